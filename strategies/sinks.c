/*
 * sinks.c - attention sinks plus a sliding window (StreamingLLM, Xiao et
 * al. 2023): the first `sinks` positions are kept forever, every later one
 * goes into a ring of `window` slots, so a query at position p sees
 * [0, sinks) and (p - window, p] and memory is flat at sinks + window.
 *
 * Per layer, one allocation made at init: the sinks' K and V
 * (batch, n_kv_heads, sinks, head_dim), the ring's K and V
 * (batch, n_kv_heads, window, head_dim) and, in re-indexed mode, a copy of
 * the sinks' keys rotated to their re-indexed positions. Position p < sinks
 * lives in sink slot p, position p >= sinks in ring slot (p - sinks) %
 * window. The view is the sinks span and the ring's one or two spans, in
 * position order, and its mask carries window and n_sink, so the kernel
 * gives every query exactly [0, sinks) U (p - window, p].
 *
 * Two position modes (--reindex):
 *   0 (original): every key keeps the rotation of its true position, as in
 *     a plain window that also keeps the sinks;
 *   1 (re-indexed, StreamingLLM's): positions are assigned within the cache,
 *     sinks 0..S-1 and the window after them, the query last. RoPE scores
 *     depend only on the distance between query and key, and the window's
 *     distances are the same in both modes; only the sinks move: a sink at
 *     j is seen at distance (S + W - 1) - j instead of p - j, that is as if
 *     it sat at position j + e with e = p - (S + W - 1) the number of tokens
 *     evicted between sinks and window. So this mode keeps the queries and
 *     the window as the model rotated them and serves, as the sinks' keys,
 *     a copy rotated e positions further (kv_rope_shift, the model's own
 *     RoPE, kernels/kv_ops.c), redone from the stored keys whenever e
 *     changes: S rows per layer per step, no model-side hook at all. Values
 *     carry no rotation and are shared.
 *
 * Updates, as sliding's (sliding.c): single tokens always; a multi-token
 * update into an empty cache, where a prompt longer than sinks + window is
 * served by one span over the caller's k_new/v_new (its queries each get
 * their mask; in re-indexed mode with original positions, since one copy of
 * the sinks cannot serve queries with different e: the modes differ from
 * the first decode step on); a multi-token update into a non-empty cache
 * only while it evicts nothing (KV_ERR_INVALID otherwise, nothing written).
 */
#include <stdio.h>

#include "kv_store.h"

#include "../kernels/kv_ops.h"

/* ------------------------------------------------------------------------ */
/* Parameters                                                               */

struct sinks_params {
    int32_t sinks;   /* first positions kept forever (>= 0) */
    int32_t window;  /* ring of recent tokens (>= 1) */
    int32_t reindex; /* 0: original positions; 1: positions within the cache */
};

static const int32_t sinks_reindex_choices[] = {0, 1};

static const struct kv_param sinks_param_table[] = {
    {.name = "sinks", .flag = "--sinks", .type = KV_PARAM_INT, .lo = 0, .hi = 1 << 30, .def = 4,
     .help = "first positions kept forever (attention sinks; at most --window)",
     .scales_memory = 1, .offset = offsetof(struct sinks_params, sinks)},
    {.name = "window", .flag = "--window", .type = KV_PARAM_INT, .lo = 1, .hi = 1 << 30,
     .def = 508, .help = "ring size in tokens: keys older than this are evicted",
     .scales_memory = 1, .offset = offsetof(struct sinks_params, window)},
    {.name = "reindex", .flag = "--reindex", .type = KV_PARAM_CHOICE,
     .choices = sinks_reindex_choices, .n_choices = 2, .def = 0,
     .help = "1: StreamingLLM's positions within the cache (sinks re-rotated), 0: true positions",
     .offset = offsetof(struct sinks_params, reindex)},
};

static const struct kv_preset sinks_presets[] = {
    {.name = "sinks-original", .params = "reindex=0"},
    {.name = "sinks-reindex", .params = "reindex=1"},
};

static enum kv_status sinks_check(const struct kv_cache_config *cfg, const void *params,
                                  char *why, size_t why_len)
{
    const struct sinks_params *p = params;
    if (p->sinks > p->window) {
        if (why != NULL && why_len > 0)
            snprintf(why, why_len, "--sinks (%d) must not exceed --window (%d)", p->sinks,
                     p->window);
        return KV_ERR_INVALID;
    }
    if (cfg->max_len > 0 && p->sinks > cfg->max_len) {
        if (why != NULL && why_len > 0)
            snprintf(why, why_len, "--sinks (%d) must not exceed the maximum length (%d)",
                     p->sinks, cfg->max_len);
        return KV_ERR_INVALID;
    }
    if (p->reindex && cfg->head_dim % 2 != 0) {
        if (why != NULL && why_len > 0)
            snprintf(why, why_len, "--reindex 1 needs an even head_dim (RoPE pairs), got %d",
                     cfg->head_dim);
        return KV_ERR_INVALID;
    }
    return KV_OK;
}

/* Re-indexed: the sinks' keys are served rotated to other positions. */
static uint32_t sinks_caps_of(const struct kv_cache_config *cfg, const void *params)
{
    const struct sinks_params *p = params;
    (void)cfg;
    return kv_strategy_sinks.caps & (p->reindex ? KV_CAP_ALL : ~(uint32_t)KV_CAP_REPOSITIONS);
}

static int sinks_label(const void *params, char *buf, size_t n)
{
    const struct sinks_params *p = params;
    return snprintf(buf, n, "%s", p->reindex ? "sinks-reindex" : "sinks");
}

static int sinks_describe(const struct kv_cache_config *cfg, const void *params, char *buf,
                          size_t n)
{
    const struct sinks_params *p = params;
    (void)cfg;
    return snprintf(buf, n, "%s (%d sinks, window %d, %s positions)",
                    kv_strategy_sinks.description, p->sinks, p->window,
                    p->reindex ? "re-indexed" : "original");
}

/* ------------------------------------------------------------------------ */
/* State                                                                    */

struct sinks_layer {
    int32_t len;          /* tokens seen (the next pos0) */
    int32_t shift;        /* re-indexed: the e the rotated sink keys were made for */
    const float *pk, *pv; /* pass-through view of a long prefill (caller's) */
    int32_t pn;           /* 0: the cache's own storage serves the view */
};

struct sinks_state {
    struct kv_cache_config cfg;
    struct sinks_params p;
    size_t sink_half, ring_half; /* bytes of one K (or V) of the sinks / the ring */
    size_t layer_bytes;          /* all of one layer's storage */
    char *buf;                   /* (n_layers) x [sink K, sink V, ring K, ring V, rotated K] */
    struct sinks_layer *layers;  /* (n_layers) */
    size_t copied;
};

static float *sinks_at(const struct sinks_state *s, int32_t l, int part)
{
    /* part: 0 sink K, 1 sink V, 2 ring K, 3 ring V, 4 rotated sink K */
    size_t off = (size_t)l * s->layer_bytes;
    const size_t sizes[4] = {s->sink_half, s->sink_half, s->ring_half, s->ring_half};
    for (int i = 0; i < part; i++)
        off += sizes[i];
    return (float *)(s->buf + off);
}

static enum kv_status sinks_layer_size(const struct kv_cache_config *cfg,
                                       const struct sinks_params *p, size_t *sink_half,
                                       size_t *ring_half, size_t *layer)
{
    const size_t row = kv_store_row_bytes(cfg);
    if (kv_store_bytes(sink_half, cfg, (size_t)p->sinks, row) != KV_OK ||
        kv_store_bytes(ring_half, cfg, (size_t)p->window, row) != KV_OK)
        return KV_ERR_OVERFLOW;
    const size_t parts = p->reindex ? 3 : 2; /* sinks K, V (+ rotated K) */
    if (*sink_half > (size_t)PTRDIFF_MAX / 8 || *ring_half > (size_t)PTRDIFF_MAX / 8)
        return KV_ERR_OVERFLOW;
    *layer = parts * *sink_half + 2 * *ring_half;
    return KV_OK;
}

static enum kv_status sinks_init(void *state, const struct kv_cache_config *cfg,
                                 const void *params)
{
    struct sinks_state *s = state;
    s->cfg = *cfg;
    s->p = *(const struct sinks_params *)params;
    if (s->p.window < 1 || s->p.sinks < 0 || s->p.sinks > s->p.window)
        return KV_ERR_INVALID;
    enum kv_status st = sinks_layer_size(cfg, &s->p, &s->sink_half, &s->ring_half,
                                         &s->layer_bytes);
    if (st != KV_OK)
        return st;
    void *meta = NULL;
    st = kv_layered_alloc(&s->buf, &meta, s->layer_bytes, sizeof *s->layers, cfg->n_layers);
    s->layers = meta;
    return st;
}

static void sinks_free(void *state)
{
    struct sinks_state *s = state;
    kv_layered_free(&s->buf, s->layers);
    s->layers = NULL;
}

static void sinks_reset(void *state)
{
    struct sinks_state *s = state;
    memset(s->layers, 0, (size_t)s->cfg.n_layers * sizeof *s->layers);
    s->copied = 0;
}

/* The sinks, and the ring's two runs (or one span over the caller's). */
static int32_t sinks_max_spans(const struct kv_cache_config *cfg, const void *params)
{
    (void)cfg, (void)params;
    return 3;
}

/* ------------------------------------------------------------------------ */
/* Update                                                                   */

/* Writes positions [a, b) of the update (tokens a - pos0 ..) into their
 * slots: sinks below S, the ring above. */
static void sinks_write(struct sinks_state *s, int32_t l, const float *k_new, const float *v_new,
                        int32_t n_new, int32_t pos0, int32_t a, int32_t b)
{
    const int32_t S = s->p.sinks;
    const int32_t sb = b < S ? b : S;
    if (a < sb) {
        kv_store_put(sinks_at(s, l, 0), S, a, k_new, n_new, a - pos0, sb - a, &s->cfg);
        kv_store_put(sinks_at(s, l, 1), S, a, v_new, n_new, a - pos0, sb - a, &s->cfg);
    }
    const int32_t ra = a > S ? a : S;
    if (ra < b)
        kv_ring_put(sinks_at(s, l, 2), sinks_at(s, l, 3), s->p.window, S, k_new, v_new, n_new,
                    pos0, ra, b, &s->cfg);
    s->copied += (size_t)(b - a) * kv_store_token_bytes(&s->cfg);
}

/* Re-indexed mode: the sinks' keys rotated by e = the tokens evicted
 * between sinks and window when the last position is len - 1 (0 while
 * nothing is evicted), redone when e changed. */
static void sinks_reindex(struct sinks_state *s, int32_t l)
{
    struct sinks_layer *L = &s->layers[l];
    const int32_t S = s->p.sinks;
    const int64_t e64 = (int64_t)L->len - S - s->p.window;
    const int32_t e = e64 > 0 ? (int32_t)e64 : 0;
    const int32_t held = L->len < S ? L->len : S;
    if (!s->p.reindex || e == 0 || held == 0 || (e == L->shift && L->shift > 0))
        return;
    const struct kv_cache_config *c = &s->cfg;
    const size_t rows = (size_t)c->batch * (size_t)c->n_kv_heads;
    float *rot = sinks_at(s, l, 4);
    const float *src = sinks_at(s, l, 0);
    for (size_t r = 0; r < rows; r++) /* (b, h) runs of S rows, `held` of them used */
        kv_rope_shift(rot + r * (size_t)S * c->head_dim, src + r * (size_t)S * c->head_dim,
                      held, c->head_dim, e);
    L->shift = e;
    s->copied += rows * (size_t)held * kv_store_row_bytes(c);
}

static enum kv_status sinks_update(void *state, int32_t layer, const float *k_new,
                                   const float *v_new, int32_t n_new, int32_t pos0)
{
    struct sinks_state *s = state;
    struct sinks_layer *l = &s->layers[layer];
    const int32_t S = s->p.sinks, W = s->p.window;
    if (pos0 != l->len)
        return KV_ERR_INVALID;
    const int64_t end = (int64_t)pos0 + n_new;
    const int evicts = end > (int64_t)S + W; /* some position >= S leaves the ring */
    if (n_new > 1 && l->len > 0 && evicts)
        return KV_ERR_INVALID; /* would overwrite keys these queries need */
    l->pn = 0;
    if (n_new > 1 && evicts) { /* a prefill longer than the cache */
        sinks_write(s, layer, k_new, v_new, n_new, pos0, 0, S);
        sinks_write(s, layer, k_new, v_new, n_new, pos0, (int32_t)end - W, (int32_t)end);
        l->pk = k_new;
        l->pv = v_new;
        l->pn = n_new;
    } else {
        sinks_write(s, layer, k_new, v_new, n_new, pos0, pos0, (int32_t)end);
    }
    l->len = (int32_t)end;
    if (l->pn == 0)
        sinks_reindex(s, layer);
    else
        l->shift = 0; /* the next single-token update rotates afresh */
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* View and accounting                                                      */

static int32_t sinks_view(const void *state, int32_t layer, struct kv_span *spans,
                          struct kv_mask *mask)
{
    const struct sinks_state *s = state;
    const struct sinks_layer *l = &s->layers[layer];
    const int32_t S = s->p.sinks, W = s->p.window;
    mask->window = W;
    mask->n_sink = S;
    if (l->pn > 0) {
        spans[0] = kv_store_span_model(l->pk, l->pv, l->pn, l->len - l->pn, &s->cfg);
        return 1;
    }
    if (l->len == 0)
        return 0;
    int32_t n = 0;
    const int32_t held = l->len < S ? l->len : S;
    if (held > 0) {
        const float *k = s->p.reindex && l->shift > 0 ? sinks_at(s, layer, 4)
                                                      : sinks_at(s, layer, 0);
        spans[n++] = kv_store_span(k, sinks_at(s, layer, 1), S, 0, held, 0, &s->cfg);
    }
    if (l->len > S) {
        const int32_t first = l->len - W > S ? l->len - W : S;
        n += kv_ring_spans(spans + n, sinks_at(s, layer, 2), sinks_at(s, layer, 3), W, S, first,
                           l->len, &s->cfg);
    }
    return n;
}

static int32_t sinks_seq_len(const void *state, int32_t layer)
{
    const struct sinks_state *s = state;
    return s->layers[layer].len;
}

static size_t sinks_resident_bytes(const void *state)
{
    const struct sinks_state *s = state;
    return s->layer_bytes * (size_t)s->cfg.n_layers;
}

/* The sink and ring rows held; the rest (rows not filled yet, and the
 * rotated copy of the sink keys that --reindex rewrites) is slack. */
static void sinks_stats(const void *state, struct kv_cache_stats *st)
{
    const struct sinks_state *s = state;
    const int32_t S = s->p.sinks, W = s->p.window;
    st->resident = sinks_resident_bytes(state);
    for (int32_t l = 0; l < s->cfg.n_layers; l++) {
        const int32_t len = s->layers[l].len;
        const int32_t held_s = len < S ? len : S;
        const int32_t held_r = len <= S ? 0 : len - S < W ? len - S : W;
        if (S > 0)
            st->tokens += 2 * (s->sink_half / (size_t)S) * (size_t)held_s;
        st->tokens += 2 * (s->ring_half / (size_t)W) * (size_t)held_r;
    }
    st->slack = st->resident - st->tokens;
}

static size_t sinks_copied_bytes(const void *state)
{
    const struct sinks_state *s = state;
    return s->copied;
}

/* Flat: sinks + window tokens (and the rotated sink keys), whatever n. */
static enum kv_status sinks_bytes_for(const struct kv_cache_config *cfg, const void *params,
                                      int32_t n_tokens, size_t *bytes)
{
    size_t sh, rh, layer;
    (void)n_tokens;
    enum kv_status st = sinks_layer_size(cfg, params, &sh, &rh, &layer);
    return st != KV_OK ? st : kv_mul_size(bytes, layer, (size_t)cfg->n_layers);
}

const struct kv_strategy_ops kv_strategy_sinks = {
    .name = "sinks",
    .description = "attention sinks (first tokens kept) plus a ring of recent ones (StreamingLLM)",
    .caps = KV_CAP_KEEPS_HISTORY | KV_CAP_EVICTS | KV_CAP_PREALLOCATES | KV_CAP_SHARES_STORAGE |
            KV_CAP_REPOSITIONS,
    .caps_of = sinks_caps_of,
    .params = sinks_param_table,
    .n_params = 3,
    .params_size = sizeof(struct sinks_params),
    .presets = sinks_presets,
    .n_presets = 2,
    .check = sinks_check,
    .describe = sinks_describe,
    .label = sinks_label,
    .bytes_for = sinks_bytes_for,
    .max_spans = sinks_max_spans,
    .state_size = sizeof(struct sinks_state),
    .init = sinks_init,
    .free = sinks_free,
    .update = sinks_update,
    .view = sinks_view,
    .seq_len = sinks_seq_len,
    .resident_bytes = sinks_resident_bytes,
    .stats = sinks_stats,
    .copied_bytes = sinks_copied_bytes,
    .reset = sinks_reset,
};
