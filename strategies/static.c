/*
 * static.c - a cache preallocated to max_len tokens at creation (the seed's
 * StaticLayer): no allocation ever happens after init.
 *
 * All layers live in one allocation of (n_layers, 2, batch, n_kv_heads,
 * max_len, head_dim) floats: layer l's K block, then its V block. The design
 * decision: the cache never grows and never evicts, so an update that would
 * take a layer past max_len returns KV_ERR_FULL before writing anything;
 * resident bytes are flat at max_len from the first step. reset only forgets
 * the lengths and keeps the storage (the point of preallocating).
 */
#include "kv_store.h"

/* ------------------------------------------------------------------------ */
/* State                                                                    */

struct static_state {
    struct kv_cache_config cfg;
    float *buf;        /* (n_layers, 2, batch, n_kv_heads, max_len, head_dim) */
    size_t half;       /* bytes of one K (or V) block of one layer */
    int32_t *len;      /* (n_layers) tokens held per layer */
    size_t copied;
};

static enum kv_status static_init(void *state, const struct kv_cache_config *cfg)
{
    struct static_state *s = state;
    s->cfg = *cfg;
    if (cfg->max_len < 1)
        return KV_ERR_INVALID;
    size_t half, total, lens;
    enum kv_status st = kv_store_bytes(&half, cfg, (size_t)cfg->max_len, kv_store_row_bytes(cfg));
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
static float *static_k(const struct static_state *s, int32_t l)
{
    return (float *)((char *)s->buf + (size_t)l * 2 * s->half);
}

static float *static_v(const struct static_state *s, int32_t l)
{
    return (float *)((char *)s->buf + ((size_t)l * 2 + 1) * s->half);
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
    kv_store_put(static_k(s, layer), s->cfg.max_len, len, k_new, n_new, 0, n_new, &s->cfg);
    kv_store_put(static_v(s, layer), s->cfg.max_len, len, v_new, n_new, 0, n_new, &s->cfg);
    s->len[layer] = len + n_new;
    s->copied += (size_t)n_new * kv_store_token_bytes(&s->cfg);
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* View and accounting                                                      */

static int32_t static_view(const void *state, int32_t layer, struct kv_span *spans)
{
    const struct static_state *s = state;
    if (s->len[layer] == 0)
        return 0;
    spans[0] = kv_store_span(static_k(s, layer), static_v(s, layer), s->cfg.max_len, 0,
                             s->len[layer], 0, &s->cfg);
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

static size_t static_copied_bytes(const void *state)
{
    const struct static_state *s = state;
    return s->copied;
}

const struct kv_strategy_ops kv_strategy_static = {
    .name = "static",
    .description = "preallocated to max length at creation; full is an error",
    .keeps_history = 1,
    .mask_window = NULL,
    .state_size = sizeof(struct static_state),
    .init = static_init,
    .free = static_free,
    .update = static_update,
    .view = static_view,
    .seq_len = static_seq_len,
    .resident_bytes = static_resident_bytes,
    .copied_bytes = static_copied_bytes,
    .reset = static_reset,
};
