/*
 * test_paged.h - a test-only cache strategy, registered inside the test
 * binaries (kv_strategy_register) so the conformance suites run it exactly
 * as they run the built-in ones, with no test written for it.
 *
 * A dynamic cache whose storage is pages of `page` tokens (--page, default
 * 4), each page its own allocation of (batch, n_kv_heads, page, head_dim)
 * floats for K and another for V, allocated as tokens arrive. Two tables
 * share it and differ only in how they expose it:
 *   test-pages : one span per page (many spans: max_len / page of them,
 *                sized up front through max_spans);
 *   test-paged : one span over the page table (kv_span.page_tokens), the
 *                form a paged cache uses so the kernel keeps its 64-row
 *                blocks whatever the page size.
 * It declares crop, fork and reorder, so those suites run on it too. A
 * layer's page table holds ceil(max_len / page) entries, so it needs a
 * max_len (check refuses 0).
 */
#ifndef KV_TEST_PAGED_H
#define KV_TEST_PAGED_H

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "../strategies/strategy.h"

struct tp_params {
    int32_t page; /* tokens per page */
};

static const struct kv_param tp_param_table[] = {
    {.name = "page", .flag = "--page", .type = KV_PARAM_INT, .lo = 1, .hi = 1 << 16, .def = 4,
     .help = "tokens per page of the test-only paged cache", .scales_memory = 1,
     .offset = offsetof(struct tp_params, page)},
};

struct tp_layer {
    float **k, **v; /* (max_pages) page pointers, NULL past the last allocated */
    int32_t len;    /* tokens held */
    int32_t pages;  /* pages allocated */
};

struct tp_state {
    struct kv_cache_config cfg;
    int32_t page, max_pages;
    int32_t cap_batch; /* sequences a page holds: the creation batch */
    size_t page_bytes; /* one K (or V) page: batch * heads * page * head_dim * 4 */
    struct tp_layer *layers;
    size_t copied;
};

static size_t tp_token_bytes(const struct tp_state *s)
{
    return 2 * (size_t)s->cfg.batch * (size_t)s->cfg.n_kv_heads * (size_t)s->cfg.head_dim *
           sizeof(float);
}

static enum kv_status tp_check(const struct kv_cache_config *cfg, const void *params, char *why,
                               size_t why_len)
{
    (void)params;
    if (cfg->max_len >= 1)
        return KV_OK;
    if (why != NULL && why_len > 0)
        snprintf(why, why_len, "the paged test cache needs --max-len for its page table");
    return KV_ERR_INVALID;
}

static void tp_free(void *state)
{
    struct tp_state *s = state;
    if (s->layers == NULL)
        return;
    for (int32_t l = 0; l < s->cfg.n_layers; l++) {
        struct tp_layer *L = &s->layers[l];
        for (int32_t p = 0; L->k != NULL && p < L->pages; p++) {
            kv_free(L->k[p]);
            kv_free(L->v[p]);
        }
        kv_free(L->k);
        kv_free(L->v);
    }
    kv_free(s->layers);
    s->layers = NULL;
}

static enum kv_status tp_init(void *state, const struct kv_cache_config *cfg, const void *params)
{
    struct tp_state *s = state;
    s->cfg = *cfg;
    s->page = ((const struct tp_params *)params)->page;
    s->cap_batch = cfg->batch;
    if (s->page < 1 || cfg->max_len < 1)
        return KV_ERR_INVALID;
    s->max_pages = (int32_t)(((int64_t)cfg->max_len + s->page - 1) / s->page);
    size_t f[5] = {(size_t)cfg->batch, (size_t)cfg->n_kv_heads, (size_t)s->page,
                   (size_t)cfg->head_dim, sizeof(float)};
    if (kv_mul_sizes(&s->page_bytes, 5, f) != KV_OK)
        return KV_ERR_OVERFLOW;
    s->layers = kv_alloc((size_t)cfg->n_layers * sizeof *s->layers);
    if (s->layers == NULL)
        return KV_ERR_NOMEM;
    for (int32_t l = 0; l < cfg->n_layers; l++) {
        s->layers[l].k = kv_alloc((size_t)s->max_pages * sizeof(float *));
        s->layers[l].v = kv_alloc((size_t)s->max_pages * sizeof(float *));
        if (s->layers[l].k == NULL || s->layers[l].v == NULL) {
            tp_free(s);
            return KV_ERR_NOMEM;
        }
    }
    return KV_OK;
}

/* Forgets every token and frees the pages. */
static void tp_reset(void *state)
{
    struct tp_state *s = state;
    for (int32_t l = 0; l < s->cfg.n_layers; l++) {
        struct tp_layer *L = &s->layers[l];
        for (int32_t p = 0; p < L->pages; p++) {
            kv_free(L->k[p]);
            kv_free(L->v[p]);
            L->k[p] = L->v[p] = NULL;
        }
        L->len = L->pages = 0;
    }
    s->copied = 0;
}

/* Row t of sequence b, kv head h of page p of one side. */
static float *tp_row(const struct tp_state *s, float *page, int32_t b, int32_t h, int32_t t)
{
    return page + (((size_t)b * s->cfg.n_kv_heads + (size_t)h) * (size_t)s->page + (size_t)t) *
                      (size_t)s->cfg.head_dim;
}

/* Pages to hold `tokens` tokens: allocated first, all or nothing. */
static enum kv_status tp_reserve(struct tp_state *s, struct tp_layer *L, int32_t tokens)
{
    const int32_t need = (tokens + s->page - 1) / s->page;
    for (int32_t p = L->pages; p < need; p++) {
        L->k[p] = kv_alloc_uninit(s->page_bytes);
        L->v[p] = kv_alloc_uninit(s->page_bytes);
        if (L->k[p] == NULL || L->v[p] == NULL) {
            for (int32_t q = L->pages; q <= p; q++) {
                kv_free(L->k[q]);
                kv_free(L->v[q]);
                L->k[q] = L->v[q] = NULL;
            }
            return KV_ERR_NOMEM;
        }
    }
    if (need > L->pages)
        L->pages = need;
    return KV_OK;
}

static enum kv_status tp_update(void *state, int32_t layer, const float *k_new,
                                const float *v_new, int32_t n_new, int32_t pos0)
{
    struct tp_state *s = state;
    struct tp_layer *L = &s->layers[layer];
    if (pos0 != L->len)
        return KV_ERR_INVALID;
    if (pos0 + n_new > s->cfg.max_len)
        return KV_ERR_FULL;
    enum kv_status st = tp_reserve(s, L, pos0 + n_new);
    if (st != KV_OK)
        return st;
    const size_t hd = (size_t)s->cfg.head_dim, nh = (size_t)s->cfg.n_kv_heads;
    for (int32_t i = 0; i < n_new; i++) {
        const int32_t t = pos0 + i, p = t / s->page, r = t % s->page;
        for (int32_t b = 0; b < s->cfg.batch; b++)
            for (int32_t h = 0; h < s->cfg.n_kv_heads; h++) {
                const size_t src = (((size_t)b * (size_t)n_new + (size_t)i) * nh + (size_t)h) * hd;
                memcpy(tp_row(s, L->k[p], b, h, r), k_new + src, hd * sizeof(float));
                memcpy(tp_row(s, L->v[p], b, h, r), v_new + src, hd * sizeof(float));
            }
    }
    L->len += n_new;
    s->copied += (size_t)n_new * tp_token_bytes(s);
    return KV_OK;
}

/* One span per page. */
static int32_t tp_pages_view(const void *state, int32_t layer, struct kv_span *spans,
                             struct kv_mask *mask)
{
    (void)mask;
    const struct tp_state *s = state;
    const struct tp_layer *L = &s->layers[layer];
    const size_t row = (size_t)s->cfg.head_dim * sizeof(float), head = (size_t)s->page * row;
    int32_t n = 0;
    for (int32_t t0 = 0; t0 < L->len; t0 += s->page, n++) {
        const struct kv_tensor side = {.dtype = KV_DTYPE_F32, .row_stride = row,
                                       .head_stride = head,
                                       .seq_stride = (size_t)s->cfg.n_kv_heads * head};
        spans[n] = (struct kv_span){.k = side, .v = side, .pos0 = t0,
                                    .n_tokens = L->len - t0 < s->page ? L->len - t0 : s->page};
        spans[n].k.data = L->k[n];
        spans[n].v.data = L->v[n];
    }
    return n;
}

/* One span over the page table. */
static int32_t tp_paged_view(const void *state, int32_t layer, struct kv_span *spans,
                             struct kv_mask *mask)
{
    (void)mask;
    const struct tp_state *s = state;
    const struct tp_layer *L = &s->layers[layer];
    if (L->len == 0)
        return 0;
    const size_t row = (size_t)s->cfg.head_dim * sizeof(float), head = (size_t)s->page * row;
    const struct kv_tensor side = {.dtype = KV_DTYPE_F32, .row_stride = row, .head_stride = head,
                                   .seq_stride = (size_t)s->cfg.n_kv_heads * head};
    spans[0] = (struct kv_span){.k = side, .v = side, .n_tokens = L->len, .pos0 = 0,
                                .page_tokens = s->page};
    spans[0].k.pages = (const void *const *)L->k;
    spans[0].v.pages = (const void *const *)L->v;
    return 1;
}

static int32_t tp_pages_max_spans(const struct kv_cache_config *cfg, const void *params)
{
    const int32_t page = ((const struct tp_params *)params)->page;
    return cfg->max_len < 1 ? 1 : (int32_t)(((int64_t)cfg->max_len + page - 1) / page);
}

static int32_t tp_seq_len(const void *state, int32_t layer)
{
    const struct tp_state *s = state;
    return s->layers[layer].len;
}

static size_t tp_resident_bytes(const void *state)
{
    const struct tp_state *s = state;
    size_t total = 0;
    for (int32_t l = 0; l < s->cfg.n_layers; l++)
        total += 2 * (size_t)s->layers[l].pages * s->page_bytes;
    return total;
}

static size_t tp_copied_bytes(const void *state)
{
    const struct tp_state *s = state;
    return s->copied;
}

/* Whole pages holding n tokens, every layer. */
static enum kv_status tp_bytes_for(const struct kv_cache_config *cfg, const void *params,
                                   int32_t n_tokens, size_t *bytes)
{
    const int32_t page = ((const struct tp_params *)params)->page;
    const size_t pages = ((size_t)n_tokens + (size_t)page - 1) / (size_t)page;
    size_t f[7] = {2, (size_t)cfg->n_layers, pages, (size_t)page, (size_t)cfg->batch,
                   (size_t)cfg->n_kv_heads, (size_t)cfg->head_dim * sizeof(float)};
    return kv_mul_sizes(bytes, 7, f);
}

/* Keeps the first len tokens; the pages past them are freed. */
static enum kv_status tp_crop(void *state, int32_t len)
{
    struct tp_state *s = state;
    const int32_t keep = (len + s->page - 1) / s->page;
    for (int32_t l = 0; l < s->cfg.n_layers; l++) {
        struct tp_layer *L = &s->layers[l];
        for (int32_t p = keep; p < L->pages; p++) {
            kv_free(L->k[p]);
            kv_free(L->v[p]);
            L->k[p] = L->v[p] = NULL;
        }
        if (L->pages > keep)
            L->pages = keep;
        L->len = len;
    }
    return KV_OK;
}

/* dst (fresh) <- copies of src's pages. */
static enum kv_status tp_fork(void *dst, const void *src)
{
    struct tp_state *d = dst;
    const struct tp_state *s = src;
    for (int32_t l = 0; l < s->cfg.n_layers; l++) {
        const struct tp_layer *S = &s->layers[l];
        struct tp_layer *D = &d->layers[l];
        enum kv_status st = tp_reserve(d, D, S->len);
        if (st != KV_OK)
            return st;
        for (int32_t p = 0; p < S->pages; p++) {
            memcpy(D->k[p], S->k[p], s->page_bytes);
            memcpy(D->v[p], S->v[p], s->page_bytes);
        }
        D->len = S->len;
        d->copied += (size_t)S->len * tp_token_bytes(s);
    }
    return KV_OK;
}

/* Sequence b <- sequence perm[b] in every page, through one page's copy. */
static enum kv_status tp_reorder(void *state, const int32_t *src, int32_t n)
{
    struct tp_state *s = state;
    if (n > s->cap_batch)
        return KV_ERR_FULL; /* a page holds the creation batch's sequences */
    float *tmp = kv_alloc_uninit(s->page_bytes);
    if (tmp == NULL)
        return KV_ERR_NOMEM;
    const size_t seq = s->page_bytes / (size_t)s->cap_batch;
    for (int32_t l = 0; l < s->cfg.n_layers; l++) {
        struct tp_layer *L = &s->layers[l];
        for (int32_t p = 0; p < L->pages; p++)
            for (int kv = 0; kv < 2; kv++) {
                float *pg = kv ? L->v[p] : L->k[p];
                memcpy(tmp, pg, s->page_bytes);
                for (int32_t b = 0; b < n; b++)
                    memcpy((char *)pg + (size_t)b * seq, (const char *)tmp + (size_t)src[b] * seq,
                           seq);
            }
    }
    s->cfg.batch = n;
    for (int32_t l = 0; l < s->cfg.n_layers; l++)
        s->copied += (size_t)s->layers[l].len * tp_token_bytes(s);
    kv_free(tmp);
    return KV_OK;
}

#define KV_TEST_PAGED_OPS(NAME, DESC, VIEW, MAXSPANS)                                        \
    {                                                                                        \
        .name = NAME, .description = DESC,                                                   \
        .caps = KV_CAP_KEEPS_HISTORY | KV_CAP_CHUNKED_APPEND | KV_CAP_BOUNDED | KV_CAP_CROP | \
                KV_CAP_FORK | KV_CAP_REORDER,                                                \
        .params = tp_param_table, .n_params = 1, .params_size = sizeof(struct tp_params),    \
        .state_size = sizeof(struct tp_state), .check = tp_check, .bytes_for = tp_bytes_for, \
        .max_spans = MAXSPANS, .init = tp_init, .free = tp_free, .update = tp_update,        \
        .view = VIEW, .seq_len = tp_seq_len, .resident_bytes = tp_resident_bytes,            \
        .copied_bytes = tp_copied_bytes, .reset = tp_reset, .crop = tp_crop, .fork = tp_fork, \
        .reorder = tp_reorder,                                                               \
    }

static const struct kv_strategy_ops kv_test_pages_ops = KV_TEST_PAGED_OPS(
    "test-pages", "test only: dynamic in pages of --page tokens, one span per page",
    tp_pages_view, tp_pages_max_spans);
static const struct kv_strategy_ops kv_test_paged_ops = KV_TEST_PAGED_OPS(
    "test-paged", "test only: dynamic in pages of --page tokens, one span over the page table",
    tp_paged_view, NULL);

/* Registers both (once per process; the suites call it before running). */
static inline void kv_test_register_paged(void)
{
    if (kv_strategy_find("test-pages") == NULL)
        if (kv_strategy_register(&kv_test_pages_ops) != KV_OK)
            abort();
    if (kv_strategy_find("test-paged") == NULL)
        if (kv_strategy_register(&kv_test_paged_ops) != KV_OK)
            abort();
}

#endif /* KV_TEST_PAGED_H */
