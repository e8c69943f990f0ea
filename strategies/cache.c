/*
 * cache.c - the cache object: a strategy's ops table plus its state.
 *
 * The core owns lifecycle and memory, the strategy owns behaviour (the
 * SQLite-VFS pattern). The design decision: every argument a strategy could
 * get wrong is checked here once, before the strategy sees it. Config fields
 * common to all strategies (positive sizes, a token's byte count fitting in
 * size_t) are validated before anything is allocated, and update arguments
 * (layer in range, n_new >= 1, pos0 >= 0, pos0 + n_new fitting in int32)
 * before the strategy's update runs, so each strategy only checks the fields
 * it reads itself (window, bits, group, residual, max_len, pos0 == length).
 * Optional methods that are NULL get defaults here: mask_window 0, reset
 * = free + init, and 0 for seq_len/resident/copied, no spans for view.
 */
#include "strategy.h"

#include <string.h>

/* ------------------------------------------------------------------------ */
/* Config validation                                                        */

/*
 * Fields every strategy reads. max_len may be 0 (no limit) for strategies
 * other than static, which checks its own. The byte count of one token in
 * all layers (K and V, f32) must fit in size_t, so no strategy's per-token
 * arithmetic can overflow.
 */
static enum kv_status kv_cache_check_config(const struct kv_cache_config *cfg)
{
    if (cfg->n_layers < 1 || cfg->batch < 1 || cfg->n_kv_heads < 1 || cfg->head_dim < 1 ||
        cfg->max_len < 0)
        return KV_ERR_INVALID;
    size_t f[6] = {2, (size_t)cfg->n_layers, (size_t)cfg->batch, (size_t)cfg->n_kv_heads,
                   (size_t)cfg->head_dim, sizeof(float)};
    size_t bytes;
    if (kv_mul_sizes(&bytes, 6, f) != KV_OK || bytes > (size_t)PTRDIFF_MAX)
        return KV_ERR_OVERFLOW;
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* Lifecycle                                                                */

enum kv_status kv_cache_create(struct kv_cache **out, const struct kv_strategy_ops *ops,
                               const struct kv_cache_config *cfg)
{
    if (out == NULL)
        return KV_ERR_INVALID;
    *out = NULL;
    if (ops == NULL || cfg == NULL || ops->init == NULL || ops->update == NULL ||
        ops->state_size == 0)
        return KV_ERR_INVALID;
    enum kv_status st = kv_cache_check_config(cfg);
    if (st != KV_OK)
        return st;

    struct kv_cache *c = kv_alloc(sizeof *c);
    if (c == NULL)
        return KV_ERR_NOMEM;
    void *state = kv_alloc(ops->state_size); /* zeroed, as init expects */
    if (state == NULL) {
        kv_free(c);
        return KV_ERR_NOMEM;
    }
    c->ops = ops;
    c->cfg = *cfg;
    c->state = state;
    st = ops->init(state, &c->cfg);
    if (st != KV_OK) { /* init freed its own allocations */
        kv_free(state);
        kv_free(c);
        return st;
    }
    *out = c;
    return KV_OK;
}

void kv_cache_destroy(struct kv_cache *c)
{
    if (c == NULL)
        return;
    if (c->ops->free != NULL)
        c->ops->free(c->state);
    kv_free(c->state);
    kv_free(c);
}

/*
 * Forgets every token. With the strategy's own reset this cannot fail. The
 * default (free + init on zeroed state) can fail only if init's allocations
 * fail; the cache then holds nothing and must be destroyed.
 */
enum kv_status kv_cache_reset(struct kv_cache *c)
{
    if (c == NULL)
        return KV_ERR_INVALID;
    if (c->ops->reset != NULL) {
        c->ops->reset(c->state);
        return KV_OK;
    }
    if (c->ops->free != NULL)
        c->ops->free(c->state);
    memset(c->state, 0, c->ops->state_size);
    return c->ops->init(c->state, &c->cfg);
}

/* ------------------------------------------------------------------------ */
/* Per-step calls                                                           */

enum kv_status kv_cache_update(struct kv_cache *c, int32_t layer, const float *k_new,
                               const float *v_new, int32_t n_new, int32_t pos0)
{
    if (c == NULL || k_new == NULL || v_new == NULL)
        return KV_ERR_INVALID;
    if (layer < 0 || layer >= c->cfg.n_layers || n_new < 1 || pos0 < 0 ||
        pos0 > INT32_MAX - n_new)
        return KV_ERR_INVALID;
    return c->ops->update(c->state, layer, k_new, v_new, n_new, pos0);
}

/* Returns 0 spans for a bad layer (the count cannot carry a status). */
int32_t kv_cache_view(const struct kv_cache *c, int32_t layer, struct kv_span *spans)
{
    if (c == NULL || spans == NULL || layer < 0 || layer >= c->cfg.n_layers ||
        c->ops->view == NULL)
        return 0;
    int32_t n = c->ops->view(c->state, layer, spans);
    KV_ASSERT(n >= 0 && n <= KV_MAX_SPANS);
    return n;
}

int32_t kv_cache_seq_len(const struct kv_cache *c, int32_t layer)
{
    if (c == NULL || layer < 0 || layer >= c->cfg.n_layers || c->ops->seq_len == NULL)
        return 0;
    return c->ops->seq_len(c->state, layer);
}

size_t kv_cache_resident_bytes(const struct kv_cache *c)
{
    if (c == NULL || c->ops->resident_bytes == NULL)
        return 0;
    return c->ops->resident_bytes(c->state);
}

size_t kv_cache_copied_bytes(const struct kv_cache *c)
{
    if (c == NULL || c->ops->copied_bytes == NULL)
        return 0;
    return c->ops->copied_bytes(c->state);
}

int32_t kv_cache_mask_window(const struct kv_cache *c)
{
    if (c == NULL || c->ops->mask_window == NULL)
        return 0;
    return c->ops->mask_window(&c->cfg);
}
