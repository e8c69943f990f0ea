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
 * cache is indistinguishable from a new one. Its one parameter, --dtype,
 * stores the rows as f16 or bf16 (half the bytes, rounded once on append;
 * results filed as dynamic-f16 / dynamic-bf16).
 */
#include "kv_store.h"

/* ------------------------------------------------------------------------ */
/* Parameters                                                               */

struct dyn_params {
    int32_t dtype; /* enum kv_dtype of the rows: f32, f16 or bf16 */
};

static const struct kv_param dyn_param_table[] = {
    KV_STORE_DTYPE_PARAM(struct dyn_params, dtype),
};

static const struct kv_preset dyn_presets[] = {KV_STORE_DTYPE_PRESETS("dynamic", 1)};

static enum kv_dtype dyn_dtype(const void *params)
{
    return (enum kv_dtype)((const struct dyn_params *)params)->dtype;
}

static int dyn_label(const void *params, char *buf, size_t n)
{
    return kv_store_dtype_label("dynamic", dyn_dtype(params), buf, n);
}

static int dyn_describe(const struct kv_cache_config *cfg, const void *params, char *buf,
                        size_t n)
{
    (void)cfg;
    return kv_store_dtype_describe(kv_strategy_dynamic.description, dyn_dtype(params), buf, n);
}

static enum kv_status dyn_init(void *state, const struct kv_cache_config *cfg,
                               const void *params)
{
    return kv_grow_init_as(state, cfg, dyn_dtype(params));
}

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
    return kv_store_layers_bytes_as(bytes, cfg, dyn_dtype(params),
                                    n_tokens > 0 ? (size_t)kv_store_grow_cap(n_tokens) : 0);
}

const struct kv_strategy_ops kv_strategy_dynamic = {
    .name = "dynamic",
    .description = "grows by doubling capacity (amortised O(1) append)",
    .caps = KV_CAP_KEEPS_HISTORY | KV_CAP_CHUNKED_APPEND | KV_CAP_BOUNDED | KV_CAP_CROP |
            KV_CAP_FORK | KV_CAP_REORDER,
    .params = dyn_param_table,
    .n_params = 1,
    .params_size = sizeof(struct dyn_params),
    .presets = dyn_presets,
    .n_presets = 2,
    .describe = dyn_describe,
    .label = dyn_label,
    .dtype = dyn_dtype,
    .bytes_for = dyn_bytes_for,
    .state_size = sizeof(struct kv_grow_state),
    .init = dyn_init,
    .free = kv_grow_free,
    .update = dyn_update,
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
