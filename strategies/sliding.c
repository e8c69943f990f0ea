/*
 * sliding.c - a ring buffer of `window` slots per layer (the seed's
 * StaticSlidingWindowLayer): the oldest token is evicted, memory is flat.
 *
 * Per layer, K and V are (batch, n_kv_heads, window, head_dim) rows of the dtype, all
 * layers in one allocation made at init. Position p lives in slot p % window.
 * view returns the held positions in order as at most two spans: the older
 * run (slots s..window-1) then the newer run (slots 0..s-1), each with
 * consecutive positions; the view's mask carries the same window to the
 * kernel, so the result is exact sliding-window attention.
 *
 * The design decision is the multi-token update. Writing n_new > 1 tokens
 * into a full ring would overwrite keys that the earliest of those queries
 * still needs. So:
 *   - into an EMPTY ring (the prefill), the last min(n_new, window) tokens go
 *     into the ring, and when n_new > window this step's view is one span
 *     over the caller's k_new/v_new covering all n_new tokens (like `none`):
 *     the kernel's window mask gives every prompt query exactly its window;
 *   - into a non-empty ring it is allowed only when nothing is evicted
 *     (length + n_new <= window); otherwise KV_ERR_INVALID, nothing written
 *     (a documented limitation: feed decode steps one token at a time).
 * Single-token updates never fail: the cache never refuses a length, and
 * max_len is not enforced here. Its parameters are the window (--window)
 * and the rows' dtype (--dtype f16|bf16: sliding-f16, sliding-bf16; the
 * pass-through view of a long prefill stays the caller's f32).
 *
 * Operations: crop only within the window (while nothing has been evicted;
 * past that, KV_ERR_UNSUPPORTED), fork copies the rings, reorder moves
 * whole rings of sequences up to the creation batch (KV_ERR_FULL beyond).
 * All three move stored rows as bytes, so they hold for every row dtype.
 */
#include <stdio.h>

#include "kv_store.h"

/* ------------------------------------------------------------------------ */
/* Parameters                                                               */

struct sliding_params {
    int32_t window; /* ring size in tokens (>= 1) */
    int32_t dtype;  /* enum kv_dtype of the rows: f32, f16 or bf16 */
};

static const struct kv_param sliding_param_table[] = {
    {.name = "window", .flag = "--window", .type = KV_PARAM_INT, .lo = 1, .hi = 1 << 30,
     .def = 512, .help = "ring size in tokens: keys older than this are evicted",
     .scales_memory = 1, .offset = offsetof(struct sliding_params, window)},
    KV_STORE_DTYPE_PARAM(struct sliding_params, dtype),
};

static const struct kv_preset sliding_presets[] = {KV_STORE_DTYPE_PRESETS("sliding", 0)};

static enum kv_dtype sliding_dtype(const void *params)
{
    return (enum kv_dtype)((const struct sliding_params *)params)->dtype;
}

static int sliding_label(const void *params, char *buf, size_t n)
{
    return kv_store_dtype_label("sliding", sliding_dtype(params), buf, n);
}

/* ------------------------------------------------------------------------ */
/* State                                                                    */

struct sliding_layer {
    int32_t len;          /* tokens seen (the next pos0) */
    /* Pass-through view of the last update when it did not fit the ring. */
    const float *pk, *pv; /* (batch, pn, n_kv_heads, head_dim), the caller's */
    int32_t pn;           /* 0: the ring serves the view */
};

struct sliding_state {
    struct kv_cache_config cfg;
    int32_t window;
    int32_t cap_batch;            /* sequences the rings have room for (creation batch) */
    enum kv_dtype dtype;          /* of the rows */
    char *buf;                    /* (n_layers, 2, batch, n_kv_heads, window, head_dim) */
    size_t half;                  /* bytes of one K (or V) ring of one layer */
    struct sliding_layer *layers; /* (n_layers) */
    size_t copied;
};

static enum kv_status sliding_init(void *state, const struct kv_cache_config *cfg,
                                   const void *params)
{
    struct sliding_state *s = state;
    const struct sliding_params *p = params;
    s->cfg = *cfg;
    s->window = p->window;
    s->cap_batch = cfg->batch;
    s->dtype = sliding_dtype(params);
    if (s->window < 1 || kv_type_traits[s->dtype].has_qparams)
        return KV_ERR_INVALID;
    size_t half;
    enum kv_status st = kv_store_bytes(&half, cfg, (size_t)s->window,
                                       kv_store_row_bytes_as(cfg, s->dtype));
    if (st != KV_OK)
        return st;
    if (half > (size_t)PTRDIFF_MAX / 2)
        return KV_ERR_OVERFLOW;
    s->half = half;
    void *meta = NULL;
    st = kv_layered_alloc(&s->buf, &meta, 2 * half, sizeof *s->layers, cfg->n_layers);
    s->layers = meta;
    return st;
}

static void sliding_free(void *state)
{
    struct sliding_state *s = state;
    kv_layered_free(&s->buf, s->layers);
    s->layers = NULL;
}

static void sliding_reset(void *state)
{
    struct sliding_state *s = state;
    memset(s->layers, 0, (size_t)s->cfg.n_layers * sizeof *s->layers);
    s->copied = 0;
}

/* The ring's two runs, or one span over the caller's arrays. */
static int32_t sliding_max_spans(const struct kv_cache_config *cfg, const void *params)
{
    (void)cfg, (void)params;
    return 2;
}

static char *sliding_k(const struct sliding_state *s, int32_t l)
{
    return s->buf + (size_t)l * 2 * s->half;
}

static char *sliding_v(const struct sliding_state *s, int32_t l)
{
    return s->buf + ((size_t)l * 2 + 1) * s->half;
}

/* ------------------------------------------------------------------------ */
/* Update                                                                   */

/* Writes positions [a, b) of the update (tokens a-pos0 ..) into their slots. */
static void sliding_write(struct sliding_state *s, int32_t layer, const float *k_new,
                          const float *v_new, int32_t n_new, int32_t pos0, int32_t a, int32_t b)
{
    kv_ring_put_as(sliding_k(s, layer), sliding_v(s, layer), s->dtype, s->window, 0, k_new,
                   v_new, n_new, pos0, a, b, &s->cfg);
    s->copied += (size_t)(b - a) * kv_store_token_bytes_as(&s->cfg, s->dtype);
}

static enum kv_status sliding_update(void *state, int32_t layer, const float *k_new,
                                     const float *v_new, int32_t n_new, int32_t pos0)
{
    struct sliding_state *s = state;
    struct sliding_layer *l = &s->layers[layer];
    const int32_t w = s->window;
    if (pos0 != l->len)
        return KV_ERR_INVALID;
    const int32_t end = pos0 + n_new;
    const int32_t evicts = n_new > w - l->len; /* len + n_new > window */
    if (n_new > 1 && l->len > 0 && evicts)
        return KV_ERR_INVALID; /* would overwrite keys these queries need */
    l->pn = 0;
    if (n_new > 1 && evicts) { /* prefill longer than the window */
        sliding_write(s, layer, k_new, v_new, n_new, pos0, end - w, end);
        l->pk = k_new;
        l->pv = v_new;
        l->pn = n_new;
    } else {
        sliding_write(s, layer, k_new, v_new, n_new, pos0, pos0, end);
    }
    l->len = end;
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* View and accounting                                                      */

static int32_t sliding_view(const void *state, int32_t layer, struct kv_span *spans,
                            struct kv_mask *mask)
{
    const struct sliding_state *s = state;
    const struct sliding_layer *l = &s->layers[layer];
    const int32_t w = s->window;
    mask->window = w;
    if (l->pn > 0) {
        spans[0] = kv_store_span_model(l->pk, l->pv, l->pn, l->len - l->pn, &s->cfg);
        return 1;
    }
    const int32_t held = l->len < w ? l->len : w;
    return kv_ring_spans_as(spans, sliding_k(s, layer), sliding_v(s, layer), s->dtype, w, 0,
                            l->len - held, l->len, &s->cfg);
}

static int32_t sliding_seq_len(const void *state, int32_t layer)
{
    const struct sliding_state *s = state;
    return s->layers[layer].len;
}

static size_t sliding_resident_bytes(const void *state)
{
    const struct sliding_state *s = state;
    return 2 * s->half * (size_t)s->cfg.n_layers;
}

static size_t sliding_copied_bytes(const void *state)
{
    const struct sliding_state *s = state;
    return s->copied;
}

/* Flat at the window. */
static enum kv_status sliding_bytes_for(const struct kv_cache_config *cfg, const void *params,
                                        int32_t n_tokens, size_t *bytes)
{
    const struct sliding_params *p = params;
    (void)n_tokens;
    return kv_store_layers_bytes_as(bytes, cfg, sliding_dtype(params), (size_t)p->window);
}

static int sliding_describe(const struct kv_cache_config *cfg, const void *params, char *buf,
                            size_t n)
{
    const struct sliding_params *p = params;
    (void)cfg;
    const enum kv_dtype dt = sliding_dtype(params);
    if (dt == KV_DTYPE_F32)
        return snprintf(buf, n, "%s (window %d)", kv_strategy_sliding.description, p->window);
    return snprintf(buf, n, "%s (window %d, %s rows)", kv_strategy_sliding.description,
                    p->window, kv_type_traits[dt].name);
}

/* ------------------------------------------------------------------------ */
/* Crop, fork, reorder                                                      */

/* Crop within the window: while a layer has evicted nothing (length <=
 * window) its ring still holds every position, so any shorter length is
 * exact; once it has evicted, the positions a shorter cache's next query
 * would see again are gone, and only the current length is accepted
 * (KV_ERR_UNSUPPORTED otherwise, nothing changed), and 0 (an empty ring). */
static enum kv_status sliding_crop(void *state, int32_t len)
{
    struct sliding_state *s = state;
    for (int32_t l = 0; l < s->cfg.n_layers; l++)
        if (s->layers[l].len > s->window && len != s->layers[l].len && len != 0)
            return KV_ERR_UNSUPPORTED;
    for (int32_t l = 0; l < s->cfg.n_layers; l++) {
        if (s->layers[l].len != len)
            s->layers[l].pn = 0; /* the ring serves the view */
        s->layers[l].len = len;
    }
    return KV_OK;
}

/* The ring's rows of the sequences [0, batch) of layer l, counted as bytes. */
static size_t sliding_held_bytes(const struct sliding_state *s, int32_t l)
{
    const int32_t held = s->layers[l].len < s->window ? s->layers[l].len : s->window;
    return (size_t)held * kv_store_token_bytes_as(&s->cfg, s->dtype);
}

/* The rows the rings hold now, and the rest of the rings: slots a sequence
 * shorter than the window has not filled yet (and the rings of sequences a
 * reorder dropped). */
static void sliding_stats(const void *state, struct kv_cache_stats *st)
{
    const struct sliding_state *s = state;
    st->resident = sliding_resident_bytes(state);
    for (int32_t l = 0; l < s->cfg.n_layers; l++)
        st->tokens += sliding_held_bytes(s, l);
    st->slack = st->resident - st->tokens;
}

/* dst (fresh, same batch) <- src's rings. A pass-through view (a prefill
 * longer than the window) is not carried over: the fork's ring holds what
 * its next query sees. */
static enum kv_status sliding_fork(void *dst, const void *src)
{
    struct sliding_state *d = dst;
    const struct sliding_state *s = src;
    memcpy(d->buf, s->buf, 2 * s->half * (size_t)s->cfg.n_layers);
    for (int32_t l = 0; l < s->cfg.n_layers; l++) {
        d->layers[l].len = s->layers[l].len;
        d->layers[l].pn = 0;
        d->copied += sliding_held_bytes(s, l);
    }
    return KV_OK;
}

/*
 * Sequence b <- sequence src[b] for b < n (at most the creation batch, else
 * KV_ERR_FULL): every layer's rings through one temporary copy of a layer
 * (allocated before anything moves). Rings of a sequence are contiguous
 * (n_kv_heads, window, head_dim), so each move is one memcpy per K and V.
 */
static enum kv_status sliding_reorder(void *state, const int32_t *src, int32_t n)
{
    struct sliding_state *s = state;
    if (n > s->cap_batch)
        return KV_ERR_FULL;
    const size_t seq =
        (size_t)s->cfg.n_kv_heads * (size_t)s->window * kv_store_row_bytes_as(&s->cfg, s->dtype);
    char *tmp = kv_alloc_uninit(2 * s->half);
    if (tmp == NULL)
        return KV_ERR_NOMEM;
    const int32_t old_batch = s->cfg.batch;
    for (int32_t l = 0; l < s->cfg.n_layers; l++) {
        char *k = sliding_k(s, l), *v = sliding_v(s, l);
        memcpy(tmp, k, (size_t)old_batch * seq);
        memcpy(tmp + s->half, v, (size_t)old_batch * seq);
        for (int32_t b = 0; b < n; b++) {
            memcpy(k + (size_t)b * seq, tmp + (size_t)src[b] * seq, seq);
            memcpy(v + (size_t)b * seq, tmp + s->half + (size_t)src[b] * seq, seq);
        }
        s->layers[l].pn = 0;
    }
    kv_free(tmp);
    s->cfg.batch = n;
    for (int32_t l = 0; l < s->cfg.n_layers; l++)
        s->copied += sliding_held_bytes(s, l);
    return KV_OK;
}

const struct kv_strategy_ops kv_strategy_sliding = {
    .name = "sliding",
    .description = "ring buffer of `window` slots, oldest evicted (flat memory)",
    .caps = KV_CAP_KEEPS_HISTORY | KV_CAP_EVICTS | KV_CAP_PREALLOCATES | KV_CAP_SHARES_STORAGE |
            KV_CAP_CROP | KV_CAP_FORK | KV_CAP_REORDER,
    .params = sliding_param_table,
    .n_params = 2,
    .params_size = sizeof(struct sliding_params),
    .presets = sliding_presets,
    .n_presets = 2,
    .describe = sliding_describe,
    .label = sliding_label,
    .dtype = sliding_dtype,
    .bytes_for = sliding_bytes_for,
    .max_spans = sliding_max_spans,
    .state_size = sizeof(struct sliding_state),
    .init = sliding_init,
    .free = sliding_free,
    .update = sliding_update,
    .view = sliding_view,
    .seq_len = sliding_seq_len,
    .resident_bytes = sliding_resident_bytes,
    .stats = sliding_stats,
    .copied_bytes = sliding_copied_bytes,
    .reset = sliding_reset,
    .crop = sliding_crop,
    .fork = sliding_fork,
    .reorder = sliding_reorder,
};
