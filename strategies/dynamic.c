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
/* Update: the growth policy (state, view and accounting: kv_store.h)       */

/* Positions past cfg.max_len (when it is > 0) are refused with KV_ERR_FULL. */
static enum kv_status dyn_update(void *state, int32_t layer, const float *k_new,
                                 const float *v_new, int32_t n_new, int32_t pos0)
{
    struct kv_grow_state *s = state;
    struct kv_grow_layer *l = &s->layers[layer];
    enum kv_status st = kv_grow_admit(s, l, n_new, pos0);
    if (st != KV_OK)
        return st;
    const int32_t needed = l->len + n_new;
    if (needed > l->cap) {
        st = kv_grow_realloc(s, l, kv_store_grow_cap(needed));
        if (st != KV_OK)
            return st;
    }
    kv_grow_append(s, l, k_new, v_new, n_new);
    return KV_OK;
}

/* Capacity holding n tokens: next_pow2(max(16, n)), 0 before the first. */
static enum kv_status dyn_bytes_for(const struct kv_cache_config *cfg, const void *params,
                                    int32_t n_tokens, size_t *bytes)
{
    (void)params;
    return kv_store_layers_bytes(bytes, cfg, n_tokens > 0 ? (size_t)kv_store_grow_cap(n_tokens) : 0);
}

const struct kv_strategy_ops kv_strategy_dynamic = {
    .name = "dynamic",
    .description = "grows by doubling capacity (amortised O(1) append)",
    .caps = KV_CAP_KEEPS_HISTORY | KV_CAP_CHUNKED_APPEND | KV_CAP_BOUNDED | KV_CAP_CROP |
            KV_CAP_FORK | KV_CAP_REORDER,
    .bytes_for = dyn_bytes_for,
    .state_size = sizeof(struct kv_grow_state),
    .init = kv_grow_init,
    .free = kv_grow_free,
    .update = dyn_update,
    .view = kv_grow_view,
    .seq_len = kv_grow_seq_len,
    .resident_bytes = kv_grow_resident_bytes,
    .copied_bytes = kv_grow_copied_bytes,
    .reset = kv_grow_reset,
    .crop = kv_grow_crop,
    .fork = kv_grow_fork,
    .reorder = kv_grow_reorder,
};
