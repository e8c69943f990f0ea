/*
 * none.c - the no-cache baseline: keeps nothing.
 *
 * With caching off a model re-runs the whole sequence through every layer at
 * every step, so the attention of a step sees exactly the keys/values computed
 * in that step. The design decision: update copies nothing, it only records
 * where the caller's k_new/v_new are (per layer), and view exposes them in
 * the model's own layout (batch, n_new, n_kv_heads, head_dim). So resident
 * and copied bytes are 0 and seq_len is 0 (no KV_CAP_KEEPS_HISTORY tells the
 * model to feed the whole sequence; KV_CAP_SHARES_STORAGE says the view points
 * at the caller's arrays). The caller keeps k_new/v_new alive until it
 * has run attention (strategy.h, pointer lifetime).
 */
#include "kv_store.h"

/* ------------------------------------------------------------------------ */
/* State                                                                    */

struct none_layer {
    const float *k, *v; /* (batch, n, n_kv_heads, head_dim), the caller's */
    int32_t n;          /* tokens of the last update; 0 before any */
    int32_t pos0;
};

struct none_state {
    struct kv_cache_config cfg;
    struct none_layer *layers; /* (n_layers) */
};

static enum kv_status none_init(void *state, const struct kv_cache_config *cfg,
                                const void *params)
{
    (void)params;
    struct none_state *s = state;
    s->cfg = *cfg;
    size_t bytes;
    if (kv_mul_size(&bytes, (size_t)cfg->n_layers, sizeof *s->layers) != KV_OK)
        return KV_ERR_OVERFLOW;
    s->layers = kv_alloc(bytes);
    return s->layers == NULL ? KV_ERR_NOMEM : KV_OK;
}

static void none_free(void *state)
{
    struct none_state *s = state;
    kv_free(s->layers);
    s->layers = NULL;
}

static void none_reset(void *state)
{
    struct none_state *s = state;
    memset(s->layers, 0, (size_t)s->cfg.n_layers * sizeof *s->layers);
}

/* ------------------------------------------------------------------------ */
/* Update and view                                                          */

/* Positions past max_len (when set) are refused like any other strategy. */
static enum kv_status none_update(void *state, int32_t layer, const float *k_new,
                                  const float *v_new, int32_t n_new, int32_t pos0)
{
    struct none_state *s = state;
    if (s->cfg.max_len > 0 && pos0 + n_new > s->cfg.max_len)
        return KV_ERR_FULL;
    s->layers[layer] = (struct none_layer){.k = k_new, .v = v_new, .n = n_new, .pos0 = pos0};
    return KV_OK;
}

static int32_t none_view(const void *state, int32_t layer, struct kv_span *spans,
                         struct kv_mask *mask)
{
    (void)mask;
    const struct none_state *s = state;
    const struct none_layer *l = &s->layers[layer];
    if (l->n == 0)
        return 0;
    spans[0] = kv_store_span_model(l->k, l->v, l->n, l->pos0, &s->cfg);
    return 1;
}

/* ------------------------------------------------------------------------ */
/* Accounting: nothing is kept                                              */

static int32_t none_seq_len(const void *state, int32_t layer)
{
    (void)state;
    (void)layer;
    return 0;
}

static size_t none_zero_bytes(const void *state)
{
    (void)state;
    return 0;
}

static enum kv_status none_bytes_for(const struct kv_cache_config *cfg, const void *params,
                                     int32_t n_tokens, size_t *bytes)
{
    (void)cfg, (void)params, (void)n_tokens;
    *bytes = 0;
    return KV_OK;
}

const struct kv_strategy_ops kv_strategy_none = {
    .name = "none",
    .description = "no cache: every step re-runs the whole sequence (quadratic)",
    .caps = KV_CAP_CHUNKED_APPEND | KV_CAP_SHARES_STORAGE | KV_CAP_BOUNDED,
    .bytes_for = none_bytes_for,
    .state_size = sizeof(struct none_state),
    .init = none_init,
    .free = none_free,
    .update = none_update,
    .view = none_view,
    .seq_len = none_seq_len,
    .resident_bytes = none_zero_bytes,
    .copied_bytes = none_zero_bytes,
    .reset = none_reset,
};
