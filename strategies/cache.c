/*
 * cache.c - the cache object: a strategy's ops table, its parameters and
 * its state.
 *
 * The core owns lifecycle and memory, the strategy owns behaviour (the
 * SQLite-VFS pattern). The design decision: every argument a strategy could
 * get wrong is checked here once, before the strategy sees it. The shape
 * (positive sizes, a token's byte count fitting in size_t) and the
 * parameters (the table's ranges, then the strategy's own check against the
 * shape) are validated before anything is allocated; update arguments
 * (layer in range, n_new >= 1, pos0 >= 0, pos0 + n_new fitting in int32),
 * crop lengths and reorder maps (and the new batch's shape) before the
 * strategy runs, so each strategy only checks what depends on its state
 * (pos0 == length, room).
 * Optional methods that are NULL get defaults here: max_spans 1, reset =
 * free + init, 0 for seq_len/resident/copied, an equal share of the
 * resident bytes per layer, no spans for view, the name for label and
 * describe, f32 for dtype, the table's caps, KV_ERR_UNSUPPORTED for crop,
 * fork and reorder. The core also owns the span storage of the views
 * (max_spans per layer, allocated at creation) and the attention-mass
 * buffer of a strategy that asks for one (grown to the largest view), and
 * it states the shape of the storage behind every view it returns (batch,
 * kv heads, head_dim: the kernel's check refuses params that differ).
 * Every public function here answers a NULL cache, ops table, config or
 * output with KV_ERR_INVALID or its documented neutral value (0, an empty
 * string, f32), never a crash.
 */
#include "strategy.h"

#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Config validation                                                        */

/*
 * Fields every strategy reads. max_len may be 0 (no limit) for strategies
 * that do not preallocate. The byte count of one token in all layers (K and
 * V, f32) must fit in size_t, so no strategy's per-token arithmetic can
 * overflow.
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

/* A cache object with zeroed state and the parameters copied (params NULL:
 * defaults), checked; spans allocated. Everything but ops->init. */
static enum kv_status cache_alloc(struct kv_cache **out, const struct kv_strategy_ops *ops,
                                  const struct kv_cache_config *cfg, const void *params)
{
    *out = NULL;
    struct kv_cache *c = kv_alloc(sizeof *c);
    if (c == NULL)
        return KV_ERR_NOMEM;
    c->ops = ops;
    c->cfg = *cfg;
    if (ops->params_size > 0) {
        c->params = kv_alloc(ops->params_size);
        if (c->params == NULL) {
            kv_free(c);
            return KV_ERR_NOMEM;
        }
        if (params != NULL)
            memcpy(c->params, params, ops->params_size);
        else
            kv_params_defaults(ops, c->params);
    }
    enum kv_status st = kv_params_check(ops, cfg, c->params, NULL, 0);
    const int32_t max_spans = ops->max_spans != NULL ? ops->max_spans(cfg, c->params) : 1;
    size_t span_bytes = 0;
    if (st == KV_OK && max_spans < 1)
        st = KV_ERR_INVALID;
    if (st == KV_OK && kv_mul_size(&span_bytes, (size_t)cfg->n_layers * (size_t)max_spans,
                                   sizeof(struct kv_span)) != KV_OK)
        st = KV_ERR_OVERFLOW;
    if (st == KV_OK) {
        c->max_spans = max_spans;
        c->caps = kv_strategy_caps(ops, cfg, c->params);
        c->state = kv_alloc(ops->state_size); /* zeroed, as init expects */
        c->spans = kv_alloc(span_bytes);
        if (c->state == NULL || c->spans == NULL)
            st = KV_ERR_NOMEM;
    }
    if (st != KV_OK) {
        kv_free(c->state);
        kv_free(c->spans);
        kv_free(c->params);
        kv_free(c);
        return st;
    }
    *out = c;
    return KV_OK;
}

/* Frees the object (not what init allocated). */
static void cache_release(struct kv_cache *c)
{
    kv_free(c->mass);
    kv_free(c->state);
    kv_free(c->spans);
    kv_free(c->params);
    kv_free(c);
}

enum kv_status kv_cache_create(struct kv_cache **out, const struct kv_strategy_ops *ops,
                               const struct kv_cache_config *cfg, const void *params)
{
    if (out == NULL)
        return KV_ERR_INVALID;
    *out = NULL;
    if (ops == NULL || cfg == NULL || ops->init == NULL || ops->update == NULL ||
        ops->state_size == 0 || ops->params_size > KV_PARAMS_MAX_BYTES || ops->n_params < 0 ||
        (ops->n_params > 0 && (ops->params == NULL || ops->params_size == 0)))
        return KV_ERR_INVALID;
    enum kv_status st = kv_cache_check_config(cfg);
    if (st != KV_OK)
        return st;
    struct kv_cache *c;
    st = cache_alloc(&c, ops, cfg, params);
    if (st != KV_OK)
        return st;
    st = ops->init(c->state, &c->cfg, c->params);
    if (st != KV_OK) { /* init freed its own allocations */
        cache_release(c);
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
    cache_release(c);
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
    return c->ops->init(c->state, &c->cfg, c->params);
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

enum kv_status kv_cache_view(const struct kv_cache *c, int32_t layer, struct kv_view *view)
{
    if (view == NULL)
        return KV_ERR_INVALID;
    *view = (struct kv_view){0};
    if (c == NULL || layer < 0 || layer >= c->cfg.n_layers)
        return KV_ERR_INVALID;
    if (c->ops->view == NULL)
        return KV_OK;
    struct kv_span *spans = c->spans + (size_t)layer * (size_t)c->max_spans;
    int32_t n = c->ops->view(c->state, layer, spans, &view->mask);
    KV_ASSERT(n >= 0 && n <= c->max_spans);
    view->spans = spans;
    view->n_spans = n;
    /* the storage's shape: what kv_attn_check holds the params to */
    view->batch = c->cfg.batch;
    view->n_kv_heads = c->cfg.n_kv_heads;
    view->head_dim = c->cfg.head_dim;
    return KV_OK;
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

size_t kv_cache_layer_bytes(const struct kv_cache *c, int32_t layer)
{
    if (c == NULL || layer < 0 || layer >= c->cfg.n_layers)
        return 0;
    if (c->ops->layer_bytes != NULL)
        return c->ops->layer_bytes(c->state, layer);
    return kv_cache_resident_bytes(c) / (size_t)c->cfg.n_layers;
}

/* 1 when layer of c wants the attention mass. */
static int wants_mass(const struct kv_cache *c, int32_t layer)
{
    return (c->caps & KV_CAP_ATTN_MASS) != 0 && c->ops->observe != NULL &&
           (c->ops->wants_mass == NULL || c->ops->wants_mass(c->state, layer));
}

enum kv_status kv_cache_mass_buffer(struct kv_cache *c, int32_t layer, const struct kv_view *view,
                                    int32_t n_heads, float **mass, size_t *len)
{
    if (mass == NULL || len == NULL)
        return KV_ERR_INVALID;
    *mass = NULL;
    *len = 0;
    if (c == NULL || view == NULL || layer < 0 || layer >= c->cfg.n_layers || n_heads < 1 ||
        n_heads % c->cfg.n_kv_heads != 0)
        return KV_ERR_INVALID;
    if (!wants_mass(c, layer))
        return KV_OK;
    size_t need;
    const size_t f[3] = {(size_t)c->cfg.batch, (size_t)n_heads, (size_t)kv_view_keys(view)};
    if (kv_mul_sizes(&need, 3, f) != KV_OK || need > SIZE_MAX / 2 / sizeof(float))
        return KV_ERR_OVERFLOW;
    if (need > c->mass_cap) {
        const size_t cap = need > 2 * c->mass_cap ? need : 2 * c->mass_cap;
        float *m = kv_alloc_uninit(cap * sizeof(float)); /* the kernel writes it all */
        if (m == NULL)
            return KV_ERR_NOMEM;
        kv_free(c->mass);
        c->mass = m;
        c->mass_cap = cap;
    }
    *mass = c->mass;
    *len = need;
    return KV_OK;
}

enum kv_status kv_cache_observe(struct kv_cache *c, int32_t layer, const float *mass,
                                int32_t n_heads)
{
    if (c == NULL || layer < 0 || layer >= c->cfg.n_layers || n_heads < 1 ||
        n_heads % c->cfg.n_kv_heads != 0)
        return KV_ERR_INVALID;
    if (!wants_mass(c, layer))
        return KV_OK;
    if (mass == NULL)
        return KV_ERR_INVALID;
    c->ops->observe(c->state, layer, mass, n_heads);
    return KV_OK;
}

size_t kv_cache_copied_bytes(const struct kv_cache *c)
{
    if (c == NULL || c->ops->copied_bytes == NULL)
        return 0;
    return c->ops->copied_bytes(c->state);
}

enum kv_status kv_cache_stats(const struct kv_cache *c, struct kv_cache_stats *st)
{
    if (st == NULL)
        return KV_ERR_INVALID;
    *st = (struct kv_cache_stats){0};
    if (c == NULL)
        return KV_ERR_INVALID;
    if (c->ops->stats != NULL) {
        c->ops->stats(c->state, st);
        return KV_OK;
    }
    st->resident = kv_cache_resident_bytes(c);
    st->tokens = st->resident;
    return KV_OK;
}

/* buf[0] <- '\0' when there is room; 0, snprintf's count of nothing. */
static int empty_text(char *buf, size_t n)
{
    if (buf != NULL && n > 0)
        buf[0] = '\0';
    return 0;
}

int kv_cache_show(const struct kv_cache *c, int32_t layer, char *buf, size_t n)
{
    empty_text(buf, n);
    if (c == NULL || buf == NULL || c->ops->show == NULL || layer < 0 ||
        layer >= c->cfg.n_layers)
        return 0;
    return c->ops->show(c->state, layer, buf, n);
}

int32_t kv_cache_mask_window(const struct kv_cache *c)
{
    struct kv_view v;
    if (kv_cache_view(c, 0, &v) != KV_OK)
        return 0;
    return v.mask.window;
}

/* ------------------------------------------------------------------------ */
/* Self-description                                                         */

int kv_cache_has(const struct kv_cache *c, uint32_t caps)
{
    return c != NULL && (c->caps & caps) == caps;
}

uint32_t kv_strategy_caps(const struct kv_strategy_ops *ops, const struct kv_cache_config *cfg,
                          const void *params)
{
    if (ops == NULL)
        return 0;
    if (ops->caps_of == NULL || cfg == NULL || (ops->params_size > 0 && params == NULL))
        return ops->caps;
    return ops->caps_of(cfg, params) & ops->caps; /* never more than the table */
}

/* params, or the table's defaults in d when params is NULL; NULL for a
 * table whose parameters cannot be held (more than KV_PARAMS_MAX_BYTES, or
 * a parameter table without a struct: kv_strategy_validate refuses both). */
static const void *params_or_defaults(const struct kv_strategy_ops *ops, const void *params,
                                      unsigned char d[KV_PARAMS_MAX_BYTES])
{
    if (ops->params_size > KV_PARAMS_MAX_BYTES || ops->n_params < 0 ||
        (ops->n_params > 0 && (ops->params == NULL || ops->params_size == 0)))
        return NULL;
    if (params != NULL)
        return params;
    memset(d, 0, KV_PARAMS_MAX_BYTES);
    kv_params_defaults(ops, d);
    return d;
}

/* snprintf(buf, n, "%s", text) that takes a NULL buf (as n = 0) and text. */
static int put_text(char *buf, size_t n, const char *text)
{
    const char *t = text != NULL ? text : "";
    if (buf == NULL)
        return (int)strlen(t);
    return snprintf(buf, n, "%s", t);
}

int kv_strategy_describe(const struct kv_strategy_ops *ops, const struct kv_cache_config *cfg,
                         const void *params, char *buf, size_t n)
{
    _Alignas(16) unsigned char d[KV_PARAMS_MAX_BYTES];
    if (ops == NULL)
        return empty_text(buf, n);
    const void *pp = params_or_defaults(ops, params, d);
    /* a describe of its own reads the shape and the parameters */
    if (ops->describe != NULL && cfg != NULL && pp != NULL && buf != NULL)
        return ops->describe(cfg, pp, buf, n);
    return put_text(buf, n, ops->description);
}

int kv_strategy_label(const struct kv_strategy_ops *ops, const void *params, char *buf, size_t n)
{
    _Alignas(16) unsigned char d[KV_PARAMS_MAX_BYTES];
    if (ops == NULL)
        return empty_text(buf, n);
    const void *pp = params_or_defaults(ops, params, d);
    if (ops->label != NULL && pp != NULL && buf != NULL)
        return ops->label(pp, buf, n);
    return put_text(buf, n, ops->name);
}

enum kv_dtype kv_strategy_dtype(const struct kv_strategy_ops *ops, const void *params)
{
    _Alignas(16) unsigned char d[KV_PARAMS_MAX_BYTES];
    if (ops == NULL || ops->dtype == NULL)
        return KV_DTYPE_F32;
    const void *pp = params_or_defaults(ops, params, d);
    const enum kv_dtype t = pp != NULL ? ops->dtype(pp) : KV_DTYPE_F32;
    return kv_dtype_traits(t) != NULL ? t : KV_DTYPE_F32;
}

const struct kv_strategy_ops *kv_strategy_with(uint32_t have, uint32_t lack)
{
    for (int32_t i = 0; i < kv_strategy_count(); i++) {
        const struct kv_strategy_ops *o = kv_strategy_at(i);
        if ((o->caps & have) == have && (o->caps & lack) == 0)
            return o;
    }
    return NULL;
}

int kv_cache_describe(const struct kv_cache *c, char *buf, size_t n)
{
    if (c == NULL)
        return empty_text(buf, n);
    return kv_strategy_describe(c->ops, &c->cfg, c->params, buf, n);
}

int kv_cache_label(const struct kv_cache *c, char *buf, size_t n)
{
    if (c == NULL)
        return empty_text(buf, n);
    return kv_strategy_label(c->ops, c->params, buf, n);
}

enum kv_dtype kv_cache_dtype(const struct kv_cache *c)
{
    return c != NULL ? kv_strategy_dtype(c->ops, c->params) : KV_DTYPE_F32;
}

enum kv_status kv_cache_bytes_for(const struct kv_strategy_ops *ops,
                                  const struct kv_cache_config *cfg, const void *params,
                                  int32_t n_tokens, size_t *bytes)
{
    if (ops == NULL || cfg == NULL || bytes == NULL || n_tokens < 0 ||
        (ops->params_size > 0 && params == NULL))
        return KV_ERR_INVALID;
    if (ops->bytes_for == NULL)
        return KV_ERR_UNSUPPORTED;
    enum kv_status st = kv_cache_check_config(cfg);
    return st != KV_OK ? st : ops->bytes_for(cfg, params, n_tokens, bytes);
}

/* ------------------------------------------------------------------------ */
/* Optional operations                                                      */

enum kv_status kv_cache_crop(struct kv_cache *c, int32_t len)
{
    if (c == NULL)
        return KV_ERR_INVALID;
    if (c->ops->crop == NULL)
        return KV_ERR_UNSUPPORTED;
    if (len < 0)
        return KV_ERR_INVALID;
    for (int32_t l = 0; l < c->cfg.n_layers; l++)
        if (len > kv_cache_seq_len(c, l))
            return KV_ERR_INVALID;
    return c->ops->crop(c->state, len);
}

enum kv_status kv_cache_fork(struct kv_cache **out, const struct kv_cache *c)
{
    if (out == NULL)
        return KV_ERR_INVALID;
    *out = NULL;
    if (c == NULL)
        return KV_ERR_INVALID;
    if (c->ops->fork == NULL)
        return KV_ERR_UNSUPPORTED;
    struct kv_cache *d;
    enum kv_status st = kv_cache_create(&d, c->ops, &c->cfg, c->params);
    if (st != KV_OK)
        return st;
    st = c->ops->fork(d->state, c->state);
    if (st != KV_OK) {
        kv_cache_destroy(d);
        return st;
    }
    *out = d;
    return KV_OK;
}

enum kv_status kv_cache_borrow_prefix(struct kv_cache **out, const struct kv_cache *c,
                                      const struct kv_cache_config *cfg, int32_t n,
                                      int32_t *borrowed)
{
    if (out == NULL)
        return KV_ERR_INVALID;
    *out = NULL;
    if (c == NULL || cfg == NULL || borrowed == NULL)
        return KV_ERR_INVALID;
    *borrowed = 0;
    if (c->ops->borrow == NULL)
        return KV_ERR_UNSUPPORTED;
    if (cfg->n_layers != c->cfg.n_layers || cfg->n_kv_heads != c->cfg.n_kv_heads ||
        cfg->head_dim != c->cfg.head_dim || n < 0 || (cfg->max_len > 0 && n > cfg->max_len))
        return KV_ERR_INVALID;
    for (int32_t l = 0; l < c->cfg.n_layers; l++)
        if (n > kv_cache_seq_len(c, l))
            return KV_ERR_INVALID;
    struct kv_cache *d;
    enum kv_status st = kv_cache_create(&d, c->ops, cfg, c->params);
    if (st != KV_OK)
        return st;
    st = c->ops->borrow(d->state, c->state, n, borrowed);
    if (st != KV_OK) {
        *borrowed = 0;
        kv_cache_destroy(d);
        return st;
    }
    *out = d;
    return KV_OK;
}

int32_t kv_strategy_borrowable(const struct kv_strategy_ops *ops, const void *params, int32_t n)
{
    _Alignas(16) unsigned char d[KV_PARAMS_MAX_BYTES];
    if (ops == NULL || ops->borrowable == NULL || n <= 0)
        return 0;
    const void *p = params_or_defaults(ops, params, d);
    return p == NULL ? 0 : ops->borrowable(p, n);
}

enum kv_status kv_cache_reorder(struct kv_cache *c, const int32_t *src, int32_t n)
{
    if (c == NULL || src == NULL || n < 1)
        return KV_ERR_INVALID;
    if (c->ops->reorder == NULL)
        return KV_ERR_UNSUPPORTED;
    for (int32_t b = 0; b < n; b++)
        if (src[b] < 0 || src[b] >= c->cfg.batch)
            return KV_ERR_INVALID;
    struct kv_cache_config cfg = c->cfg;
    cfg.batch = n;
    enum kv_status st = kv_cache_check_config(&cfg); /* a new batch must fit too */
    if (st != KV_OK)
        return st;
    st = c->ops->reorder(c->state, src, n);
    if (st == KV_OK)
        c->cfg.batch = n;
    return st;
}

/* The reorder maps of the two convenience forms, in a small fixed array
 * when the batch is small (the common case), else allocated. */
#define SEQ_MAP_INLINE 64

static enum kv_status reorder_mapped(struct kv_cache *c, int32_t drop, int32_t src,
                                     int32_t dst)
{
    const int32_t B = c->cfg.batch, n = drop >= 0 ? B - 1 : B;
    int32_t small[SEQ_MAP_INLINE], *map = small;
    if (B > SEQ_MAP_INLINE && (map = kv_alloc((size_t)B * sizeof *map)) == NULL)
        return KV_ERR_NOMEM;
    for (int32_t b = 0, k = 0; b < B; b++)
        if (b != drop)
            map[k++] = b;
    if (drop < 0)
        map[dst] = src;
    enum kv_status st = kv_cache_reorder(c, map, n);
    if (map != small)
        kv_free(map);
    return st;
}

enum kv_status kv_cache_free_seq(struct kv_cache *c, int32_t b)
{
    if (c == NULL)
        return KV_ERR_INVALID;
    if (c->ops->reorder == NULL)
        return KV_ERR_UNSUPPORTED;
    if (b < 0 || b >= c->cfg.batch || c->cfg.batch < 2)
        return KV_ERR_INVALID;
    return reorder_mapped(c, b, 0, 0);
}

enum kv_status kv_cache_copy_seq(struct kv_cache *c, int32_t src, int32_t dst)
{
    if (c == NULL)
        return KV_ERR_INVALID;
    if (c->ops->reorder == NULL)
        return KV_ERR_UNSUPPORTED;
    if (src < 0 || src >= c->cfg.batch || dst < 0 || dst >= c->cfg.batch)
        return KV_ERR_INVALID;
    return reorder_mapped(c, -1, src, dst);
}
