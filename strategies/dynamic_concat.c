/*
 * dynamic_concat.c - a cache that grows by allocate-and-copy on every update,
 * the way `torch.cat((past, new), dim=-2)` does in the popular Python caches.
 *
 * Per layer, K and V are (batch, n_kv_heads, len, head_dim) floats in one
 * allocation (K first, then V) of exactly len tokens (kv_store.h's growing
 * store, with cap == len). The design decision:
 * this strategy exists to be measured, so it keeps the cost it models.
 * Every update allocates a buffer of exactly len + n_new tokens, copies the
 * len old rows and writes the n_new new ones, then frees the old buffer.
 * The bytes copied by an update are (len + n_new) token rows of K and V, so
 * token-by-token generation copies an arithmetic series, O(T^2) in total.
 * The allocation comes first: KV_ERR_NOMEM leaves the cache unchanged.
 * After a crop the capacity stays above len until the next update, which
 * moves to exactly len + n_new again.
 */
#include "kv_store.h"

/* ------------------------------------------------------------------------ */
/* Update: new = cat(old, k_new) (state, view and accounting: kv_store.h)   */

/* Positions past cfg.max_len (when it is > 0) are refused with KV_ERR_FULL. */
static enum kv_status cat_update(void *state, int32_t layer, const float *k_new,
                                 const float *v_new, int32_t n_new, int32_t pos0)
{
    struct kv_grow_state *s = state;
    struct kv_grow_layer *l = &s->layers[layer];
    enum kv_status st = kv_grow_admit(s, l, n_new, pos0);
    if (st != KV_OK)
        return st;
    /* exactly len + n_new, every time: cap stays equal to len */
    st = kv_grow_realloc(s, l, l->len + n_new);
    if (st != KV_OK)
        return st;
    kv_grow_append(s, l, k_new, v_new, n_new);
    return KV_OK;
}

/* Exactly n tokens. */
static enum kv_status cat_bytes_for(const struct kv_cache_config *cfg, const void *params,
                                    int32_t n_tokens, size_t *bytes)
{
    (void)params;
    return kv_store_layers_bytes(bytes, cfg, (size_t)n_tokens);
}

const struct kv_strategy_ops kv_strategy_dynamic_concat = {
    .name = "dynamic-concat",
    .description = "reallocates and copies everything every step, like torch.cat",
    .caps = KV_CAP_KEEPS_HISTORY | KV_CAP_CHUNKED_APPEND | KV_CAP_BOUNDED | KV_CAP_CROP |
            KV_CAP_FORK | KV_CAP_REORDER,
    .bytes_for = cat_bytes_for,
    .state_size = sizeof(struct kv_grow_state),
    .init = kv_grow_init,
    .free = kv_grow_free,
    .update = cat_update,
    .view = kv_grow_view,
    .seq_len = kv_grow_seq_len,
    .resident_bytes = kv_grow_resident_bytes,
    .stats = kv_grow_stats,
    .copied_bytes = kv_grow_copied_bytes,
    .reset = kv_grow_reset,
    .crop = kv_grow_crop,
    .fork = kv_grow_fork,
    .reorder = kv_grow_reorder,
};
