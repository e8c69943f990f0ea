/*
 * static.c - a cache preallocated to max_len tokens at creation (the seed's
 * StaticLayer): no allocation ever happens after init.
 *
 * All layers live in one allocation of (n_layers, 2, batch, n_kv_heads,
 * max_len, head_dim) floats: layer l's K block, then its V block. The design
 * decision: the cache never grows and never evicts, so an update that would
 * take a layer past max_len returns KV_ERR_FULL before writing anything;
 * resident bytes are flat at max_len from the first step. reset only forgets
 * the lengths and keeps the storage (the point of preallocating). crop only
 * shortens the lengths; reorder moves sequences in place (a parallel move
 * through a temporary of one sequence's rows) and can shrink the batch or
 * grow it back up to the creation batch, never past it. --dtype stores f16
 * or bf16 rows (static-f16, static-bf16): half the bytes, rounded once on
 * append.
 */
#include <stdio.h>

#include "kv_store.h"

/* ------------------------------------------------------------------------ */
/* Parameters                                                               */

struct static_params {
    int32_t dtype; /* enum kv_dtype of the rows: f32, f16 or bf16 */
};

static const struct kv_param static_param_table[] = {
    KV_STORE_DTYPE_PARAM(struct static_params, dtype),
};

static const struct kv_preset static_presets[] = {KV_STORE_DTYPE_PRESETS("static", 0)};

static enum kv_dtype static_dtype(const void *params)
{
    return (enum kv_dtype)((const struct static_params *)params)->dtype;
}

static int static_label(const void *params, char *buf, size_t n)
{
    return kv_store_dtype_label("static", static_dtype(params), buf, n);
}

/* ------------------------------------------------------------------------ */
/* State                                                                    */

struct static_state {
    struct kv_cache_config cfg;
    enum kv_dtype dtype; /* of the rows */
    size_t row;          /* bytes of one row of one kv head */
    char *buf;           /* (n_layers, 2, batch, n_kv_heads, max_len, head_dim) */
    size_t half;         /* bytes of one K (or V) block of one layer */
    int32_t *len;      /* (n_layers) tokens held per layer */
    int32_t cap_batch; /* sequences the storage holds: the creation batch
                          (cfg.batch, the current one, may be fewer) */
    size_t copied;
};

static enum kv_status static_init(void *state, const struct kv_cache_config *cfg,
                                  const void *params)
{
    struct static_state *s = state;
    s->cfg = *cfg;
    s->cap_batch = cfg->batch;
    s->dtype = static_dtype(params);
    if (cfg->max_len < 1 || kv_type_traits[s->dtype].has_qparams)
        return KV_ERR_INVALID;
    s->row = kv_store_row_bytes_as(cfg, s->dtype);
    size_t half, total, lens;
    enum kv_status st = kv_store_bytes(&half, cfg, (size_t)cfg->max_len, s->row);
    if (st != KV_OK)
        return st;
    if (kv_mul_size(&total, 2 * half, (size_t)cfg->n_layers) != KV_OK ||
        total > (size_t)PTRDIFF_MAX ||
        kv_mul_size(&lens, (size_t)cfg->n_layers, sizeof *s->len) != KV_OK)
        return KV_ERR_OVERFLOW;
    s->half = half;
    s->len = kv_alloc(lens);
    if (s->len == NULL)
        return KV_ERR_NOMEM;
    s->buf = kv_alloc(total);
    if (s->buf == NULL) {
        kv_free(s->len);
        s->len = NULL;
        return KV_ERR_NOMEM;
    }
    return KV_OK;
}

static void static_free(void *state)
{
    struct static_state *s = state;
    kv_free(s->buf);
    kv_free(s->len);
    s->buf = NULL;
    s->len = NULL;
}

static void static_reset(void *state)
{
    struct static_state *s = state;
    memset(s->len, 0, (size_t)s->cfg.n_layers * sizeof *s->len);
    s->copied = 0;
}

/* K and V blocks of layer l. */
static char *static_k(const struct static_state *s, int32_t l)
{
    return s->buf + (size_t)l * 2 * s->half;
}

static char *static_v(const struct static_state *s, int32_t l)
{
    return s->buf + ((size_t)l * 2 + 1) * s->half;
}

/* Bytes of one token across the batch, K and V, as stored. */
static size_t static_token_bytes(const struct static_state *s)
{
    return kv_store_token_bytes_as(&s->cfg, s->dtype);
}

/* ------------------------------------------------------------------------ */
/* Update                                                                   */

static enum kv_status static_update(void *state, int32_t layer, const float *k_new,
                                    const float *v_new, int32_t n_new, int32_t pos0)
{
    struct static_state *s = state;
    const int32_t len = s->len[layer];
    if (pos0 != len)
        return KV_ERR_INVALID;
    if (n_new > s->cfg.max_len - len)
        return KV_ERR_FULL;
    kv_store_put_as(static_k(s, layer), s->dtype, s->cfg.max_len, len, k_new, n_new, 0, n_new,
                    &s->cfg);
    kv_store_put_as(static_v(s, layer), s->dtype, s->cfg.max_len, len, v_new, n_new, 0, n_new,
                    &s->cfg);
    s->len[layer] = len + n_new;
    s->copied += (size_t)n_new * static_token_bytes(s);
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* View and accounting                                                      */

static int32_t static_view(const void *state, int32_t layer, struct kv_span *spans,
                           struct kv_mask *mask)
{
    (void)mask;
    const struct static_state *s = state;
    if (s->len[layer] == 0)
        return 0;
    spans[0] = kv_store_span_as(static_k(s, layer), static_v(s, layer), s->dtype,
                                s->cfg.max_len, 0, s->len[layer], 0, &s->cfg);
    return 1;
}

static int32_t static_seq_len(const void *state, int32_t layer)
{
    const struct static_state *s = state;
    return s->len[layer];
}

static size_t static_resident_bytes(const void *state)
{
    const struct static_state *s = state;
    return 2 * s->half * (size_t)s->cfg.n_layers;
}

/* Tokens held, and the reserved slots past them. */
static void static_stats(const void *state, struct kv_cache_stats *st)
{
    const struct static_state *s = state;
    st->resident = static_resident_bytes(state);
    for (int32_t l = 0; l < s->cfg.n_layers; l++)
        st->tokens += (size_t)s->len[l] * static_token_bytes(s);
    st->slack = st->resident - st->tokens;
}

static size_t static_copied_bytes(const void *state)
{
    const struct static_state *s = state;
    return s->copied;
}

/* Flat at max_len, whatever it holds. */
static enum kv_status static_bytes_for(const struct kv_cache_config *cfg, const void *params,
                                       int32_t n_tokens, size_t *bytes)
{
    (void)n_tokens;
    return kv_store_layers_bytes_as(bytes, cfg, static_dtype(params), (size_t)cfg->max_len);
}

static enum kv_status static_check(const struct kv_cache_config *cfg, const void *params,
                                   char *why, size_t why_len)
{
    (void)params;
    if (cfg->max_len >= 1)
        return KV_OK;
    if (why != NULL && why_len > 0)
        snprintf(why, why_len, "static needs a capacity: --max-len must be at least 1");
    return KV_ERR_INVALID;
}

static int static_describe(const struct kv_cache_config *cfg, const void *params, char *buf,
                           size_t n)
{
    const enum kv_dtype dt = static_dtype(params);
    if (dt == KV_DTYPE_F32)
        return snprintf(buf, n, "%s (%d slots)", kv_strategy_static.description, cfg->max_len);
    return snprintf(buf, n, "%s (%d slots, %s rows)", kv_strategy_static.description,
                    cfg->max_len, kv_type_traits[dt].name);
}

/* ------------------------------------------------------------------------ */
/* Crop, fork, reorder                                                      */

static enum kv_status static_crop(void *state, int32_t len)
{
    struct static_state *s = state;
    for (int32_t l = 0; l < s->cfg.n_layers; l++)
        s->len[l] = len;
    return KV_OK;
}

/* dst (fresh) <- src's rows; they count as dst's copied bytes. */
static enum kv_status static_fork(void *dst, const void *src)
{
    struct static_state *d = dst;
    const struct static_state *s = src;
    const size_t row = s->row;
    for (int32_t l = 0; l < s->cfg.n_layers; l++) {
        kv_store_move(static_k(d, l), s->cfg.max_len, 0, static_k(s, l), s->cfg.max_len, 0,
                      s->len[l], row, &s->cfg);
        kv_store_move(static_v(d, l), s->cfg.max_len, 0, static_v(s, l), s->cfg.max_len, 0,
                      s->len[l], row, &s->cfg);
        d->len[l] = s->len[l];
        d->copied += (size_t)s->len[l] * static_token_bytes(s);
    }
    return KV_OK;
}

/* The first len rows (row bytes each) of every kv head of one sequence
 * block (heads, max_len, head_dim) at src to the block at dst. */
static void seq_rows_copy(char *dst, const char *src, const struct kv_cache_config *c,
                          size_t row, int32_t len)
{
    const size_t hrow = (size_t)c->max_len * row;
    for (size_t h = 0; h < (size_t)c->n_kv_heads; h++)
        memcpy(dst + h * hrow, src + h * hrow, (size_t)len * row);
}

/*
 * Sequence b <- sequence src[b] for b < n (n at most the creation batch,
 * else KV_ERR_FULL), in place, as a parallel move: a sequence is
 * overwritten only once no pending move still reads it; what is left then
 * is cycles, each broken by parking one sequence's rows in a temporary
 * (allocated here, before anything moves). Every sequence block written
 * counts as copied bytes.
 */
static enum kv_status static_reorder(void *state, const int32_t *src, int32_t n)
{
    struct static_state *s = state;
    const struct kv_cache_config *c = &s->cfg;
    if (n > s->cap_batch)
        return KV_ERR_FULL;
    const size_t seq = (size_t)c->n_kv_heads * (size_t)c->max_len * s->row;
    char *tmp = kv_alloc_uninit(seq);
    int32_t *from = kv_alloc((size_t)n * sizeof *from);          /* pending source, or -1 */
    int32_t *readers = kv_alloc((size_t)s->cap_batch * sizeof *readers);
    if (tmp == NULL || from == NULL || readers == NULL) {
        kv_free(tmp);
        kv_free(from);
        kv_free(readers);
        return KV_ERR_NOMEM;
    }
    enum { PARKED = -2, DONE = -1 };
    for (int32_t l = 0; l < c->n_layers; l++) {
        const int32_t len = s->len[l];
        const size_t seq_written = (size_t)len * (size_t)c->n_kv_heads * s->row;
        for (int kv = 0; kv < 2; kv++) {
            char *base = kv ? static_v(s, l) : static_k(s, l);
            memset(readers, 0, (size_t)s->cap_batch * sizeof *readers);
            int32_t pending = 0;
            for (int32_t b = 0; b < n; b++) {
                from[b] = src[b] == b ? DONE : src[b];
                if (from[b] != DONE) {
                    readers[src[b]]++;
                    pending++;
                }
            }
            while (pending > 0) {
                int moved = 0;
                for (int32_t b = 0; b < n; b++) {
                    if (from[b] == DONE || readers[b] > 0)
                        continue; /* done, or another move still reads b */
                    const char *from_rows = from[b] == PARKED ? tmp : base + (size_t)from[b] * seq;
                    seq_rows_copy(base + (size_t)b * seq, from_rows, c, s->row, len);
                    s->copied += seq_written;
                    if (from[b] != PARKED)
                        readers[from[b]]--;
                    from[b] = DONE;
                    pending--;
                    moved = 1;
                }
                if (moved || pending == 0)
                    continue;
                /* stuck: every pending target is read by a pending move, so
                 * (one source per target) they form plain cycles; park one
                 * sequence of one cycle, which then unwinds completely
                 * before tmp could be needed again */
                int32_t b0 = 0;
                while (from[b0] == DONE)
                    b0++;
                const int32_t victim = from[b0];
                seq_rows_copy(tmp, base + (size_t)victim * seq, c, s->row, len);
                for (int32_t b = 0; b < n; b++)
                    if (from[b] == victim) {
                        from[b] = PARKED;
                        readers[victim]--;
                    }
            }
        }
    }
    kv_free(tmp);
    kv_free(from);
    kv_free(readers);
    s->cfg.batch = n;
    return KV_OK;
}

const struct kv_strategy_ops kv_strategy_static = {
    .name = "static",
    .description = "preallocated to max length at creation; full is an error",
    .caps = KV_CAP_KEEPS_HISTORY | KV_CAP_CHUNKED_APPEND | KV_CAP_BOUNDED | KV_CAP_PREALLOCATES |
            KV_CAP_CROP | KV_CAP_FORK | KV_CAP_REORDER,
    .params = static_param_table,
    .n_params = 1,
    .params_size = sizeof(struct static_params),
    .presets = static_presets,
    .n_presets = 2,
    .label = static_label,
    .dtype = static_dtype,
    .check = static_check,
    .describe = static_describe,
    .bytes_for = static_bytes_for,
    .state_size = sizeof(struct static_state),
    .init = static_init,
    .free = static_free,
    .update = static_update,
    .view = static_view,
    .seq_len = static_seq_len,
    .resident_bytes = static_resident_bytes,
    .stats = static_stats,
    .copied_bytes = static_copied_bytes,
    .reset = static_reset,
    .crop = static_crop,
    .fork = static_fork,
    .reorder = static_reorder,
};
