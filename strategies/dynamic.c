/*
 * dynamic.c - a cache that grows by doubling its capacity (the seed's
 * DynamicLayer, done the way a vector grows).
 *
 * Per layer, K and V are (batch, n_kv_heads, cap, head_dim) floats in one
 * allocation (K first, then V). The design decision: capacity starts at 0
 * and, when an update needs more, moves to next_pow2(max(16, needed)); the
 * old rows are copied into the new buffer (counted in copied bytes) and the
 * old buffer freed. Each token is therefore copied O(1) times on average
 * (amortised O(1) append), against dynamic-concat's O(T) per step. Growth
 * happens before anything is written, so a failed allocation leaves the
 * cache exactly as it was (KV_ERR_NOMEM). reset frees the storage: a reset
 * cache is indistinguishable from a new one.
 */
#include "kv_store.h"

/* ------------------------------------------------------------------------ */
/* State                                                                    */

struct dyn_layer {
    float *buf;   /* K (batch, n_kv_heads, cap, head_dim) then V, same shape */
    int32_t len;  /* tokens held */
    int32_t cap;  /* tokens allocated */
};

struct dyn_state {
    struct kv_cache_config cfg;
    struct dyn_layer *layers; /* (n_layers) */
    size_t copied;            /* bytes written by updates since init/reset */
};

static enum kv_status dyn_init(void *state, const struct kv_cache_config *cfg)
{
    struct dyn_state *s = state;
    s->cfg = *cfg;
    size_t bytes;
    if (kv_mul_size(&bytes, (size_t)cfg->n_layers, sizeof *s->layers) != KV_OK)
        return KV_ERR_OVERFLOW;
    s->layers = kv_alloc(bytes);
    return s->layers == NULL ? KV_ERR_NOMEM : KV_OK;
}

static void dyn_release(struct dyn_state *s)
{
    for (int32_t l = 0; l < s->cfg.n_layers; l++) {
        kv_free(s->layers[l].buf);
        s->layers[l] = (struct dyn_layer){0};
    }
    s->copied = 0;
}

static void dyn_free(void *state)
{
    struct dyn_state *s = state;
    if (s->layers == NULL)
        return;
    dyn_release(s);
    kv_free(s->layers);
    s->layers = NULL;
}

static void dyn_reset(void *state) { dyn_release(state); }

/* ------------------------------------------------------------------------ */
/* Update                                                                   */

/* Moves layer l to capacity `cap` (> its len), copying its rows. */
static enum kv_status dyn_grow(struct dyn_state *s, struct dyn_layer *l, int32_t cap)
{
    size_t half;
    enum kv_status st = kv_store_bytes(&half, &s->cfg, (size_t)cap, kv_store_row_bytes(&s->cfg));
    if (st != KV_OK)
        return st;
    float *buf = kv_alloc_uninit(2 * half); /* rows are copied or appended before use */
    if (buf == NULL)
        return KV_ERR_NOMEM;
    if (l->len > 0) {
        const size_t row = kv_store_row_bytes(&s->cfg);
        const size_t old_half = half / (size_t)cap * (size_t)l->cap;
        kv_store_move(buf, cap, 0, l->buf, l->cap, 0, l->len, row, &s->cfg);
        kv_store_move((char *)buf + half, cap, 0, (char *)l->buf + old_half, l->cap, 0, l->len,
                      row, &s->cfg);
        s->copied += (size_t)l->len * kv_store_token_bytes(&s->cfg);
    }
    kv_free(l->buf);
    l->buf = buf;
    l->cap = cap;
    return KV_OK;
}

/* Positions past cfg.max_len (when it is > 0) are refused with KV_ERR_FULL. */
static enum kv_status dyn_update(void *state, int32_t layer, const float *k_new,
                                 const float *v_new, int32_t n_new, int32_t pos0)
{
    struct dyn_state *s = state;
    struct dyn_layer *l = &s->layers[layer];
    if (pos0 != l->len)
        return KV_ERR_INVALID;
    if (s->cfg.max_len > 0 && pos0 + n_new > s->cfg.max_len)
        return KV_ERR_FULL;
    const int32_t needed = l->len + n_new;
    if (needed > l->cap) {
        enum kv_status st = dyn_grow(s, l, kv_store_grow_cap(needed));
        if (st != KV_OK)
            return st;
    }
    float *k = l->buf;
    float *v = l->buf + (size_t)s->cfg.batch * (size_t)s->cfg.n_kv_heads * (size_t)l->cap *
                            (size_t)s->cfg.head_dim;
    kv_store_put(k, l->cap, l->len, k_new, n_new, 0, n_new, &s->cfg);
    kv_store_put(v, l->cap, l->len, v_new, n_new, 0, n_new, &s->cfg);
    l->len = needed;
    s->copied += (size_t)n_new * kv_store_token_bytes(&s->cfg);
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* View and accounting                                                      */

static int32_t dyn_view(const void *state, int32_t layer, struct kv_span *spans)
{
    const struct dyn_state *s = state;
    const struct dyn_layer *l = &s->layers[layer];
    if (l->len == 0)
        return 0;
    const float *v = l->buf + (size_t)s->cfg.batch * (size_t)s->cfg.n_kv_heads *
                                  (size_t)l->cap * (size_t)s->cfg.head_dim;
    spans[0] = kv_store_span(l->buf, v, l->cap, 0, l->len, 0, &s->cfg);
    return 1;
}

static int32_t dyn_seq_len(const void *state, int32_t layer)
{
    const struct dyn_state *s = state;
    return s->layers[layer].len;
}

/* Sum over layers of cap * (one token's K+V bytes): capacity, not length. */
static size_t dyn_resident_bytes(const void *state)
{
    const struct dyn_state *s = state;
    size_t total = 0;
    for (int32_t l = 0; l < s->cfg.n_layers; l++)
        total += (size_t)s->layers[l].cap * kv_store_token_bytes(&s->cfg);
    return total;
}

static size_t dyn_copied_bytes(const void *state)
{
    const struct dyn_state *s = state;
    return s->copied;
}

const struct kv_strategy_ops kv_strategy_dynamic = {
    .name = "dynamic",
    .description = "grows by doubling capacity (amortised O(1) append)",
    .keeps_history = 1,
    .mask_window = NULL,
    .state_size = sizeof(struct dyn_state),
    .init = dyn_init,
    .free = dyn_free,
    .update = dyn_update,
    .view = dyn_view,
    .seq_len = dyn_seq_len,
    .resident_bytes = dyn_resident_bytes,
    .copied_bytes = dyn_copied_bytes,
    .reset = dyn_reset,
};
