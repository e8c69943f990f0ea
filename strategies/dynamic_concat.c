/*
 * dynamic_concat.c - a cache that grows by allocate-and-copy on every update,
 * the way `torch.cat((past, new), dim=-2)` does in the popular Python caches.
 *
 * Per layer, K and V are (batch, n_kv_heads, len, head_dim) floats in one
 * allocation (K first, then V) of exactly len tokens. The design decision:
 * this strategy exists to be measured, so it keeps the cost it models.
 * Every update allocates a buffer of exactly len + n_new tokens, copies the
 * len old rows and writes the n_new new ones, then frees the old buffer.
 * The bytes copied by an update are (len + n_new) token rows of K and V, so
 * token-by-token generation copies an arithmetic series, O(T^2) in total.
 * The allocation comes first: KV_ERR_NOMEM leaves the cache unchanged.
 */
#include "kv_store.h"

/* ------------------------------------------------------------------------ */
/* State                                                                    */

struct cat_layer {
    float *buf;  /* K (batch, n_kv_heads, len, head_dim) then V, same shape */
    int32_t len; /* tokens held == tokens allocated */
};

struct cat_state {
    struct kv_cache_config cfg;
    struct cat_layer *layers; /* (n_layers) */
    size_t copied;
};

static enum kv_status cat_init(void *state, const struct kv_cache_config *cfg)
{
    struct cat_state *s = state;
    s->cfg = *cfg;
    size_t bytes;
    if (kv_mul_size(&bytes, (size_t)cfg->n_layers, sizeof *s->layers) != KV_OK)
        return KV_ERR_OVERFLOW;
    s->layers = kv_alloc(bytes);
    return s->layers == NULL ? KV_ERR_NOMEM : KV_OK;
}

static void cat_release(struct cat_state *s)
{
    for (int32_t l = 0; l < s->cfg.n_layers; l++) {
        kv_free(s->layers[l].buf);
        s->layers[l] = (struct cat_layer){0};
    }
    s->copied = 0;
}

static void cat_free(void *state)
{
    struct cat_state *s = state;
    if (s->layers == NULL)
        return;
    cat_release(s);
    kv_free(s->layers);
    s->layers = NULL;
}

static void cat_reset(void *state) { cat_release(state); }

/* ------------------------------------------------------------------------ */
/* Update: new = cat(old, k_new)                                            */

/* Positions past cfg.max_len (when it is > 0) are refused with KV_ERR_FULL. */
static enum kv_status cat_update(void *state, int32_t layer, const float *k_new,
                                 const float *v_new, int32_t n_new, int32_t pos0)
{
    struct cat_state *s = state;
    struct cat_layer *l = &s->layers[layer];
    if (pos0 != l->len)
        return KV_ERR_INVALID;
    if (s->cfg.max_len > 0 && pos0 + n_new > s->cfg.max_len)
        return KV_ERR_FULL;
    const int32_t len = l->len + n_new;
    const size_t row = kv_store_row_bytes(&s->cfg);
    size_t half;
    enum kv_status st = kv_store_bytes(&half, &s->cfg, (size_t)len, row);
    if (st != KV_OK)
        return st;
    float *buf = kv_alloc_uninit(2 * half); /* every row is written just below */
    if (buf == NULL)
        return KV_ERR_NOMEM;
    float *k = buf, *v = (float *)((char *)buf + half);
    if (l->len > 0) {
        const size_t old_half = half / (size_t)len * (size_t)l->len;
        kv_store_move(k, len, 0, l->buf, l->len, 0, l->len, row, &s->cfg);
        kv_store_move(v, len, 0, (char *)l->buf + old_half, l->len, 0, l->len, row, &s->cfg);
    }
    kv_store_put(k, len, l->len, k_new, n_new, 0, n_new, &s->cfg);
    kv_store_put(v, len, l->len, v_new, n_new, 0, n_new, &s->cfg);
    kv_free(l->buf);
    l->buf = buf;
    l->len = len;
    s->copied += (size_t)len * kv_store_token_bytes(&s->cfg);
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* View and accounting                                                      */

static int32_t cat_view(const void *state, int32_t layer, struct kv_span *spans)
{
    const struct cat_state *s = state;
    const struct cat_layer *l = &s->layers[layer];
    if (l->len == 0)
        return 0;
    const float *v = l->buf + (size_t)s->cfg.batch * (size_t)s->cfg.n_kv_heads *
                                  (size_t)l->len * (size_t)s->cfg.head_dim;
    spans[0] = kv_store_span(l->buf, v, l->len, 0, l->len, 0, &s->cfg);
    return 1;
}

static int32_t cat_seq_len(const void *state, int32_t layer)
{
    const struct cat_state *s = state;
    return s->layers[layer].len;
}

static size_t cat_resident_bytes(const void *state)
{
    const struct cat_state *s = state;
    size_t total = 0;
    for (int32_t l = 0; l < s->cfg.n_layers; l++)
        total += (size_t)s->layers[l].len * kv_store_token_bytes(&s->cfg);
    return total;
}

static size_t cat_copied_bytes(const void *state)
{
    const struct cat_state *s = state;
    return s->copied;
}

const struct kv_strategy_ops kv_strategy_dynamic_concat = {
    .name = "dynamic-concat",
    .description = "reallocates and copies everything every step, like torch.cat",
    .keeps_history = 1,
    .mask_window = NULL,
    .state_size = sizeof(struct cat_state),
    .init = cat_init,
    .free = cat_free,
    .update = cat_update,
    .view = cat_view,
    .seq_len = cat_seq_len,
    .resident_bytes = cat_resident_bytes,
    .copied_bytes = cat_copied_bytes,
    .reset = cat_reset,
};
