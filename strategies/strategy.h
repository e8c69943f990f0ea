/*
 * strategy.h - the cache strategy interface and the cache object around it.
 *
 * A strategy is one .c file exporting one `const struct kv_strategy_ops`
 * (designated initializers), listed in the registry (registry.c). The core
 * (cache.c) owns lifecycle and memory: it asks the strategy how big its state
 * struct is, allocates it, and wraps every call; the strategy owns behaviour
 * and allocates its own storage through kv_alloc(). Optional methods may be
 * NULL and the wrapper supplies the default.
 *
 * Shapes. The model hands an update for one layer as
 *     k_new, v_new : (batch, n_new, n_kv_heads, head_dim) floats
 * holding the keys/values of n_new consecutive tokens at absolute positions
 * pos0 .. pos0+n_new-1 (RoPE already applied to keys). After the update,
 * view() describes, as kv_spans (kernels/kv_attention.h), every key/value the
 * queries of this step may attend to: past tokens kept by the strategy *and*
 * the n_new new ones. The kernel masks by position, so a span may contain
 * keys that some queries must not see.
 *
 * Pointer lifetime: spans are valid until the next update/reset/destroy of
 * the cache. A strategy may return spans that point into k_new/v_new (the
 * `none` strategy does: it keeps nothing), so the caller keeps k_new/v_new
 * alive until it has run attention.
 */
#ifndef KV_STRATEGY_H
#define KV_STRATEGY_H

#include "../kernels/kv_attention.h"

/* Everything any strategy may need; each reads the fields it uses. */
struct kv_cache_config {
    int32_t n_layers;
    int32_t batch;
    int32_t n_kv_heads;
    int32_t head_dim;
    int32_t max_len;  /* static: capacity in tokens; others: refuse pos beyond it */
    int32_t window;   /* sliding: ring size in tokens (>= 1) */
    int32_t bits;     /* quantized: 8 or 4 */
    int32_t group;    /* quantized: group size along head_dim, divides head_dim */
    int32_t residual; /* quantized: recent tokens kept in f32 (>= 1) */
};

/* Most spans any strategy returns for one layer. */
#define KV_MAX_SPANS 8

struct kv_strategy_ops {
    const char *name;        /* registry key, e.g. "dynamic" */
    const char *description; /* one line, for `kvlab strategies` */

    /*
     * 1 if the strategy keeps past tokens, so the model feeds it only new
     * tokens. 0 (the `none` strategy): the model re-runs the whole sequence
     * every step and the strategy only exposes the current call's k/v.
     */
    int32_t keeps_history;

    /* Window the attention mask must apply for exact semantics (sliding). */
    int32_t (*mask_window)(const struct kv_cache_config *cfg); /* NULL: 0 */

    /* sizeof the strategy's state struct. */
    size_t state_size;

    /*
     * Validates cfg (KV_ERR_INVALID / KV_ERR_OVERFLOW) and sets up state
     * (zeroed memory of state_size bytes). Preallocating strategies allocate
     * here. On failure it frees whatever it allocated.
     */
    enum kv_status (*init)(void *state, const struct kv_cache_config *cfg);

    /* Frees what init/update allocated (not the state struct itself). */
    void (*free)(void *state);

    /*
     * Appends n_new tokens for one layer. Layers are updated in order
     * 0..n_layers-1 each step, each with the same pos0 and n_new. A strategy
     * with history requires pos0 == its current length of that layer
     * (KV_ERR_INVALID otherwise). Returns KV_ERR_FULL (static, when the
     * tokens do not fit) or KV_ERR_NOMEM with the cache unchanged and nothing
     * written.
     */
    enum kv_status (*update)(void *state, int32_t layer, const float *k_new,
                             const float *v_new, int32_t n_new, int32_t pos0);

    /*
     * Fills spans[0..return) for one layer, after that layer's update.
     * Returns the number of spans (0..KV_MAX_SPANS).
     */
    int32_t (*view)(const void *state, int32_t layer, struct kv_span *spans);

    /* Tokens seen so far by this layer (the next pos0). 0 for `none`. */
    int32_t (*seq_len)(const void *state, int32_t layer);

    /* Exact bytes of K/V storage the strategy holds now (all layers, codes
     * + qparams + residual; capacity, not just used slots). */
    size_t (*resident_bytes)(const void *state);

    /* Bytes written into cache storage by updates since init/reset:
     * new tokens stored plus any relocation (growth copies, re-quantizing). */
    size_t (*copied_bytes)(const void *state);

    /* Forgets all tokens; keeps preallocated storage. NULL: free + init. */
    void (*reset)(void *state);
};

/* ------------------------------------------------------------------------ */
/* Registry (registry.c)                                                    */

/* NULL when no strategy has that name. */
const struct kv_strategy_ops *kv_strategy_find(const char *name);
/* Number of registered strategies and the i-th one (registry order). */
int32_t kv_strategy_count(void);
const struct kv_strategy_ops *kv_strategy_at(int32_t i);

/* ------------------------------------------------------------------------ */
/* The cache object (cache.c): a strategy plus its state                    */

struct kv_cache {
    const struct kv_strategy_ops *ops;
    struct kv_cache_config cfg;
    void *state;
};

/* Validates common fields (positive sizes, overflow) then ops->init. */
enum kv_status kv_cache_create(struct kv_cache **out, const struct kv_strategy_ops *ops,
                               const struct kv_cache_config *cfg);
void kv_cache_destroy(struct kv_cache *c);
enum kv_status kv_cache_update(struct kv_cache *c, int32_t layer, const float *k_new,
                               const float *v_new, int32_t n_new, int32_t pos0);
int32_t kv_cache_view(const struct kv_cache *c, int32_t layer, struct kv_span *spans);
int32_t kv_cache_seq_len(const struct kv_cache *c, int32_t layer);
size_t kv_cache_resident_bytes(const struct kv_cache *c);
size_t kv_cache_copied_bytes(const struct kv_cache *c);
int32_t kv_cache_mask_window(const struct kv_cache *c);
enum kv_status kv_cache_reset(struct kv_cache *c);

/* The registered tables (one per strategies/<name>.c). */
extern const struct kv_strategy_ops kv_strategy_none;
extern const struct kv_strategy_ops kv_strategy_dynamic;
extern const struct kv_strategy_ops kv_strategy_dynamic_concat;
extern const struct kv_strategy_ops kv_strategy_static;
extern const struct kv_strategy_ops kv_strategy_sliding;
extern const struct kv_strategy_ops kv_strategy_quantized;

#endif /* KV_STRATEGY_H */
