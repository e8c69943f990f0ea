/*
 * hybrid.c - a different cache per layer, from a pattern (--layers-pattern):
 * the hybrid caches of models whose layers alternate between local
 * (sliding-window) and global attention, Gemma 2/3 and Mistral-style.
 *
 * The pattern is a list of groups, NAME[:V1[:V2...]][*COUNT], separated by
 * '+' (',' is taken as '+'): a registered strategy or preset, its
 * parameters by position in its table's order, and how many consecutive
 * layers take it (1 when not given). The pattern's layers must divide the
 * model's, and it repeats over them: "sliding:1024*5+dynamic" on 12 layers
 * is five sliding layers of window 1024 and a dynamic one, twice.
 * `none` (which keeps no history) and `hybrid` itself are refused.
 *
 * The design decision: each layer is a whole one-layer cache of its own
 * strategy (kv_cache_create with n_layers 1), and every method of this file
 * forwards to the layer's cache. So each layer keeps its strategy's own
 * storage, bounds and mask (the view of layer l is exactly the one its
 * strategy returns, mask included), a pattern can never make the kernel
 * read what a strategy did not expose, and the capabilities of the whole
 * are derived from its layers (caps_of): it keeps history; it is lossy,
 * evicts, bounds positions or wants attention masses if any layer does; it
 * preallocates or takes chunks only if every layer does. Its resident bytes
 * are its layers' (layer_bytes gives each), which is what the sweep's
 * per-layer column reports.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_store.h"

/* ------------------------------------------------------------------------ */
/* Parameters                                                               */

#define HYBRID_PATTERN_LEN 192 /* bytes of the pattern, with its NUL */
#define HYBRID_MAX_GROUPS 16
#define HYBRID_NAME_LEN 48

struct hybrid_params {
    char pattern[HYBRID_PATTERN_LEN];
};

static const struct kv_param hybrid_param_table[] = {
    {.name = "pattern", .flag = "--layers-pattern", .type = KV_PARAM_TEXT,
     .text_size = HYBRID_PATTERN_LEN, .def_text = "dynamic",
     .help = "one strategy per layer: NAME[:V...][*COUNT]+..., repeated over the layers "
             "(e.g. sliding:1024*5+dynamic)",
     .scales_memory = 1, .offset = offsetof(struct hybrid_params, pattern)},
};

/* One group of the pattern, parsed. */
struct hybrid_group {
    const struct kv_strategy_ops *ops;
    _Alignas(16) unsigned char params[256];
    int32_t count;
};

struct hybrid_pattern {
    struct hybrid_group g[HYBRID_MAX_GROUPS];
    int32_t n, layers; /* groups, and the layers one repeat covers */
};

/* Writes why (one sentence naming the option); returns KV_ERR_INVALID. */
__attribute__((format(printf, 3, 4))) static enum kv_status hybrid_bad(char *why, size_t n,
                                                                      const char *fmt, ...)
{
    if (why != NULL && n > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, n, fmt, ap);
        va_end(ap);
    }
    return KV_ERR_INVALID;
}

/*
 * Parses the pattern into P: every group's strategy, parameters (defaults,
 * the preset's, then the values given) and count. KV_ERR_INVALID with a
 * sentence in why for anything malformed.
 */
static enum kv_status hybrid_parse(const char *text, struct hybrid_pattern *P, char *why,
                                   size_t why_len)
{
    memset(P, 0, sizeof *P);
    const char *p = text;
    if (*p == '\0')
        return hybrid_bad(why, why_len, "--layers-pattern is empty");
    for (;;) {
        const size_t len = strcspn(p, "+,");
        char grp[HYBRID_PATTERN_LEN], name[HYBRID_NAME_LEN];
        if (len == 0 || len >= sizeof grp)
            return hybrid_bad(why, why_len, "--layers-pattern has an empty group");
        if (P->n == HYBRID_MAX_GROUPS)
            return hybrid_bad(why, why_len, "--layers-pattern has more than %d groups",
                              HYBRID_MAX_GROUPS);
        memcpy(grp, p, len);
        grp[len] = '\0';
        struct hybrid_group *g = &P->g[P->n];
        /* the count */
        g->count = 1;
        char *star = strchr(grp, '*');
        if (star != NULL) {
            char *end;
            long long c = strtoll(star + 1, &end, 10);
            if (star[1] == '\0' || *end != '\0' || c < 1 || c > 1 << 20)
                return hybrid_bad(why, why_len, "--layers-pattern: bad layer count in '%s'", grp);
            g->count = (int32_t)c;
            *star = '\0';
        }
        /* the name, then values by position */
        char *colon = strchr(grp, ':');
        const size_t nl = colon != NULL ? (size_t)(colon - grp) : strlen(grp);
        if (nl == 0 || nl >= sizeof name)
            return hybrid_bad(why, why_len, "--layers-pattern: no strategy name in '%s'", grp);
        memcpy(name, grp, nl);
        name[nl] = '\0';
        if (kv_strategy_lookup(name, &g->ops, g->params, sizeof g->params) != KV_OK)
            return hybrid_bad(why, why_len, "--layers-pattern: unknown strategy '%s'", name);
        if (!(g->ops->caps & KV_CAP_KEEPS_HISTORY) || g->ops == &kv_strategy_hybrid)
            return hybrid_bad(why, why_len, "--layers-pattern: '%s' cannot be one layer of a "
                              "pattern (it keeps no history, or is a pattern itself)", name);
        int32_t k = 0;
        for (char *v = colon; v != NULL; k++) {
            char *next = strchr(v + 1, ':');
            if (next != NULL)
                *next = '\0';
            while (k < g->ops->n_params && g->ops->params[k].type == KV_PARAM_TEXT)
                k++;
            char *end;
            long long x = strtoll(v + 1, &end, 10);
            if (k >= g->ops->n_params || v[1] == '\0' || *end != '\0' ||
                kv_params_set(g->ops, g->params, g->ops->params[k].name, x) != KV_OK)
                return hybrid_bad(why, why_len, "--layers-pattern: '%s' takes at most %d "
                                  "value(s), each in its parameter's range (got '%s')", name,
                                  g->ops->n_params, v + 1);
            v = next;
        }
        if (P->layers > INT32_MAX - g->count)
            return hybrid_bad(why, why_len, "--layers-pattern has too many layers");
        P->layers += g->count;
        P->n++;
        if (p[len] == '\0')
            return KV_OK;
        p += len + 1;
    }
}

/* The cache shape of one layer. */
static struct kv_cache_config hybrid_layer_cfg(const struct kv_cache_config *cfg)
{
    struct kv_cache_config c = *cfg;
    c.n_layers = 1;
    return c;
}

/* The group that layer l takes. */
static const struct hybrid_group *hybrid_group_of(const struct hybrid_pattern *P, int32_t l)
{
    int32_t r = l % P->layers;
    for (int32_t i = 0; i < P->n; i++) {
        if (r < P->g[i].count)
            return &P->g[i];
        r -= P->g[i].count;
    }
    /* not reached: P->layers is the sum of the counts, so r falls in a group */
    return &P->g[P->n - 1];
}

/* The pattern parses, divides the layers, and every group's parameters fit
 * the shape (its strategy's own check, the sentence prefixed). */
static enum kv_status hybrid_check(const struct kv_cache_config *cfg, const void *params,
                                   char *why, size_t why_len)
{
    const struct hybrid_params *hp = params;
    struct hybrid_pattern P;
    enum kv_status st = hybrid_parse(hp->pattern, &P, why, why_len);
    if (st != KV_OK)
        return st;
    if (cfg->n_layers % P.layers != 0) {
        if (why != NULL && why_len > 0)
            snprintf(why, why_len, "--layers-pattern covers %d layers, which does not divide "
                     "the model's %d", P.layers, cfg->n_layers);
        return KV_ERR_INVALID;
    }
    const struct kv_cache_config c1 = hybrid_layer_cfg(cfg);
    for (int32_t i = 0; i < P.n; i++) {
        char sub[192];
        st = kv_params_check(P.g[i].ops, &c1, P.g[i].params, sub, sizeof sub);
        if (st != KV_OK) {
            if (why != NULL && why_len > 0)
                snprintf(why, why_len, "--layers-pattern, %s: %s", P.g[i].ops->name, sub);
            return st;
        }
    }
    return KV_OK;
}

static uint32_t hybrid_caps_of(const struct kv_cache_config *cfg, const void *params)
{
    const struct hybrid_params *hp = params;
    struct hybrid_pattern P;
    (void)cfg;
    const uint32_t any = KV_CAP_LOSSY | KV_CAP_EVICTS | KV_CAP_SCORE_EVICTS |
                         KV_CAP_SHARES_STORAGE | KV_CAP_ATTN_MASS | KV_CAP_BOUNDED |
                         KV_CAP_REPOSITIONS;
    const uint32_t all = KV_CAP_KEEPS_HISTORY | KV_CAP_PREALLOCATES | KV_CAP_CHUNKED_APPEND;
    if (hybrid_parse(hp->pattern, &P, NULL, 0) != KV_OK)
        return KV_CAP_KEEPS_HISTORY;
    uint32_t caps = all;
    for (int32_t i = 0; i < P.n; i++) {
        const struct kv_cache_config c1 = hybrid_layer_cfg(cfg);
        const uint32_t c = kv_strategy_caps(P.g[i].ops, &c1, P.g[i].params);
        caps = (caps & (c | ~all)) | (c & any);
    }
    return caps;
}

static int hybrid_describe(const struct kv_cache_config *cfg, const void *params, char *buf,
                           size_t n)
{
    const struct hybrid_params *hp = params;
    (void)cfg;
    return snprintf(buf, n, "%s (%s)", kv_strategy_hybrid.description, hp->pattern);
}

/* The lowest-precision dtype of its layers. */
static enum kv_dtype hybrid_dtype(const void *params)
{
    const struct hybrid_params *hp = params;
    struct hybrid_pattern P;
    enum kv_dtype d = KV_DTYPE_F32;
    if (hybrid_parse(hp->pattern, &P, NULL, 0) != KV_OK)
        return d;
    for (int32_t i = 0; i < P.n; i++) {
        const enum kv_dtype x = kv_strategy_dtype(P.g[i].ops, P.g[i].params);
        if (kv_type_traits[x].bits < kv_type_traits[d].bits)
            d = x;
    }
    return d;
}

/* Every layer's bound, summed. */
static enum kv_status hybrid_bytes_for(const struct kv_cache_config *cfg, const void *params,
                                       int32_t n_tokens, size_t *bytes)
{
    const struct hybrid_params *hp = params;
    struct hybrid_pattern P;
    if (hybrid_parse(hp->pattern, &P, NULL, 0) != KV_OK || P.layers < 1)
        return KV_ERR_INVALID;
    const struct kv_cache_config c1 = hybrid_layer_cfg(cfg);
    size_t total = 0;
    for (int32_t l = 0; l < cfg->n_layers; l++) {
        const struct hybrid_group *g = hybrid_group_of(&P, l);
        size_t b;
        enum kv_status st = kv_cache_bytes_for(g->ops, &c1, g->params, n_tokens, &b);
        if (st != KV_OK)
            return st;
        if (b > SIZE_MAX - total)
            return KV_ERR_OVERFLOW;
        total += b;
    }
    *bytes = total;
    return KV_OK;
}

static int32_t hybrid_max_spans(const struct kv_cache_config *cfg, const void *params)
{
    const struct hybrid_params *hp = params;
    struct hybrid_pattern P;
    int32_t m = 1;
    if (hybrid_parse(hp->pattern, &P, NULL, 0) != KV_OK)
        return 1;
    const struct kv_cache_config c1 = hybrid_layer_cfg(cfg);
    for (int32_t i = 0; i < P.n; i++) {
        const int32_t s = P.g[i].ops->max_spans != NULL
                              ? P.g[i].ops->max_spans(&c1, P.g[i].params) : 1;
        m = s > m ? s : m;
    }
    return m;
}

/* ------------------------------------------------------------------------ */
/* State: one cache per layer                                               */

struct hybrid_state {
    int32_t n_layers;
    int32_t bound;           /* positions refused from here on (0: none): the
                                max_len when any layer is bounded, so every
                                layer refuses the same step */
    struct kv_cache **layer; /* (n_layers) */
};

static void hybrid_free(void *state)
{
    struct hybrid_state *s = state;
    if (s->layer == NULL)
        return;
    for (int32_t l = 0; l < s->n_layers; l++)
        kv_cache_destroy(s->layer[l]);
    kv_free(s->layer);
    s->layer = NULL;
}

static enum kv_status hybrid_init(void *state, const struct kv_cache_config *cfg,
                                  const void *params)
{
    struct hybrid_state *s = state;
    const struct hybrid_params *hp = params;
    struct hybrid_pattern P;
    if (hybrid_parse(hp->pattern, &P, NULL, 0) != KV_OK || P.layers <= 0 ||
        cfg->n_layers % P.layers != 0)
        return KV_ERR_INVALID;
    size_t bytes;
    /* an array of pointers: the size of a pointer is meant */
    // NOLINTNEXTLINE(bugprone-sizeof-expression)
    if (kv_mul_size(&bytes, (size_t)cfg->n_layers, sizeof *s->layer) != KV_OK)
        return KV_ERR_OVERFLOW;
    s->layer = kv_alloc(bytes);
    if (s->layer == NULL)
        return KV_ERR_NOMEM;
    s->n_layers = cfg->n_layers;
    s->bound = (hybrid_caps_of(cfg, params) & KV_CAP_BOUNDED) ? cfg->max_len : 0;
    const struct kv_cache_config c1 = hybrid_layer_cfg(cfg);
    for (int32_t l = 0; l < cfg->n_layers; l++) {
        const struct hybrid_group *g = hybrid_group_of(&P, l);
        enum kv_status st = kv_cache_create(&s->layer[l], g->ops, &c1, g->params);
        if (st != KV_OK) {
            hybrid_free(s);
            return st;
        }
    }
    return KV_OK;
}

static enum kv_status hybrid_update(void *state, int32_t layer, const float *k_new,
                                    const float *v_new, int32_t n_new, int32_t pos0)
{
    struct hybrid_state *s = state;
    if (s->bound > 0 && pos0 + n_new > s->bound)
        return KV_ERR_FULL;
    return kv_cache_update(s->layer[layer], 0, k_new, v_new, n_new, pos0);
}

static int32_t hybrid_view(const void *state, int32_t layer, struct kv_span *spans,
                           struct kv_mask *mask)
{
    const struct hybrid_state *s = state;
    struct kv_view v;
    if (kv_cache_view(s->layer[layer], 0, &v) != KV_OK)
        return 0;
    /* the layer's spans fit: max_spans is the largest of the layers' */
    memcpy(spans, v.spans, (size_t)v.n_spans * sizeof *spans);
    *mask = v.mask;
    return v.n_spans;
}

static int32_t hybrid_seq_len(const void *state, int32_t layer)
{
    const struct hybrid_state *s = state;
    return kv_cache_seq_len(s->layer[layer], 0);
}

static size_t hybrid_layer_bytes(const void *state, int32_t layer)
{
    const struct hybrid_state *s = state;
    return kv_cache_resident_bytes(s->layer[layer]);
}

static size_t hybrid_resident_bytes(const void *state)
{
    const struct hybrid_state *s = state;
    size_t t = 0;
    for (int32_t l = 0; l < s->n_layers; l++)
        t += kv_cache_resident_bytes(s->layer[l]);
    return t;
}

/* Each layer's cache's own breakdown, summed. */
static void hybrid_stats(const void *state, struct kv_cache_stats *st)
{
    const struct hybrid_state *s = state;
    for (int32_t l = 0; l < s->n_layers; l++) {
        struct kv_cache_stats c;
        if (kv_cache_stats(s->layer[l], &c) != KV_OK)
            continue; /* cannot happen: a live cache and a place to write */
        st->resident += c.resident;
        st->tokens += c.tokens;
        st->slack += c.slack;
        st->spare += c.spare;
        st->shared += c.shared;
        st->cow += c.cow;
    }
}

static size_t hybrid_copied_bytes(const void *state)
{
    const struct hybrid_state *s = state;
    size_t t = 0;
    for (int32_t l = 0; l < s->n_layers; l++)
        t += kv_cache_copied_bytes(s->layer[l]);
    return t;
}

static void hybrid_observe(void *state, int32_t layer, const float *mass, int32_t n_heads)
{
    struct hybrid_state *s = state;
    (void)kv_cache_observe(s->layer[layer], 0, mass, n_heads); /* n_heads checked by the core */
}

static int hybrid_wants_mass(const void *state, int32_t layer)
{
    const struct hybrid_state *s = state;
    return kv_cache_has(s->layer[layer], KV_CAP_ATTN_MASS);
}

const struct kv_strategy_ops kv_strategy_hybrid = {
    .name = "hybrid",
    .description = "one strategy per layer from a pattern (local/global layers, Gemma-style)",
    .caps = KV_CAP_KEEPS_HISTORY | KV_CAP_LOSSY | KV_CAP_EVICTS | KV_CAP_SCORE_EVICTS |
            KV_CAP_PREALLOCATES | KV_CAP_CHUNKED_APPEND | KV_CAP_SHARES_STORAGE |
            KV_CAP_BOUNDED | KV_CAP_ATTN_MASS | KV_CAP_REPOSITIONS,
    .caps_of = hybrid_caps_of,
    .params = hybrid_param_table,
    .n_params = 1,
    .params_size = sizeof(struct hybrid_params),
    .check = hybrid_check,
    .describe = hybrid_describe,
    .dtype = hybrid_dtype,
    .bytes_for = hybrid_bytes_for,
    .max_spans = hybrid_max_spans,
    .state_size = sizeof(struct hybrid_state),
    .init = hybrid_init,
    .free = hybrid_free,
    .update = hybrid_update,
    .view = hybrid_view,
    .seq_len = hybrid_seq_len,
    .resident_bytes = hybrid_resident_bytes,
    .stats = hybrid_stats,
    .layer_bytes = hybrid_layer_bytes,
    .copied_bytes = hybrid_copied_bytes,
    .observe = hybrid_observe,
    .wants_mass = hybrid_wants_mass,
};
