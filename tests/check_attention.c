/*
 * check_attention.c - the attention kernel (kv_attn) and its scalar twin
 * (kv_attn_ref) against an independent naive reference written here.
 *
 * The naive reference shares no code with the kernel: it rebuilds dense K
 * and V arrays (batch, kv_heads, T, head_dim) holding every position's row
 * (for quantized layouts, the dequantized row), and computes, per query and
 * head, softmax(q k^T * scale) v over the positions the mask lets through,
 * in double. The kernel is fed the same data laid out as spans in several
 * ways (one span, token-major strides, a wrapped ring buffer as two spans
 * given out of order, a quantized span plus an f32 residual, all quantized,
 * one paged span, one span per small page, one paged span with a block table
 * per sequence sharing pages, per-channel quantized keys with
 * per-token values, quantized keys with f32 values, a span with a position
 * table in another order per head), so the span addressing,
 * the masking (windows, attention sinks, padding) and the quantized paths are
 * all checked against the same dense truth. Every case runs a second time
 * asking for the attention mass per key, checked against the naive one.
 * Rejected inputs include params that do not match the shape a view
 * states: a cache's view with one sequence and one kv head too many asked
 * for is KV_ERR_INVALID from the kernel, the reference and the counts
 * (test_view_shape_rejects), never a read past the cache's storage.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/kv_attention.h"
#include "../kernels/kv_quant.h"
#include "../kernels/kv_rows.h" /* the decode kernel's form of the query (integer scores) */
#include "../strategies/strategy.h" /* a cache's view: test_view_shape_rejects */

/*
 * Tolerance. The kernel works in float: a score is a dot product of head_dim
 * terms (relative error about head_dim * FLT_EPSILON, and for quantized
 * spans scale*dot(q, codes) + min*sum(q) can cancel to the same order), and
 * an output is a convex combination of up to T value rows whose weights and
 * sums accumulate in float over T terms (relative error about T *
 * FLT_EPSILON). Both scale with the largest |value| (vmax). A factor of 4
 * covers the exponential's couple of ulps and the rescales of the online
 * softmax. A real bug (a wrong key, a missed mask) moves outputs by O(vmax).
 */
#define ATTN_TOL_FACTOR 4.0
static double attn_tol(int32_t T, int32_t d, double vmax)
{
    return ATTN_TOL_FACTOR * (double)(T + d) * FLT_EPSILON * (vmax > 1.0 ? vmax : 1.0);
}

/* ------------------------------------------------------------------------ */
/* Test data                                                                */

static uint64_t rng_state;
static double rnd(double lo, double hi)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    uint64_t r = rng_state * 2685821657736338717ull;
    return lo + (hi - lo) * (double)(r >> 11) / 9007199254740992.0;
}

enum layout {
    LAYOUT_ONE,       /* one f32 span, (batch, kv_heads, T, d) */
    LAYOUT_TOKEN,     /* one f32 span, (batch, T, kv_heads, d): other strides */
    LAYOUT_RING,      /* a wrapped ring buffer: two f32 spans, later one first */
    LAYOUT_QUANT,     /* one quantized span */
    LAYOUT_QUANT_F32, /* quantized older tokens, then an f32 residual span */
    LAYOUT_PAGED,     /* one span over pages of PAGE_TOKENS tokens (a block table) */
    LAYOUT_PAGES,     /* one span per page of PAGE_TOKENS tokens: many spans */
    LAYOUT_SEQ_PAGED, /* one span over a block table PER SEQUENCE (table_stride):
                         pages of one sequence each, taken from a pool in
                         scrambled order, the first page shared by all
                         sequences (a shared prompt), NULL entries between
                         the tables that nothing may read */
    LAYOUT_CHANNEL,   /* keys quantized per channel over groups of tokens,
                         values per token (KIVI-style) */
    LAYOUT_MIXED,     /* quantized keys, f32 values */
    LAYOUT_SCATTER,   /* an f32 span with a position table holding the older
                         three quarters in another order per (sequence, kv
                         head), then a contiguous f32 span of the rest (the
                         survivors of a cache that evicts by score) */
};

/* Tokens per page of the paged layouts: small and odd, so pages cut the
 * kernel's 64-row blocks at every offset. */
#define PAGE_TOKENS 5
/* Tokens per block of per-channel key qparams. */
#define CHANNEL_TOKENS 16

struct acase {
    int32_t batch, n_q, heads, kv_heads, d, T, window;
    int32_t pad[3];
    enum kv_dtype dt; /* for the quantized layouts */
    int32_t group;
    enum layout layout;
    int32_t threads;
    int32_t n_sink; /* attention sinks of the mask (with a window) */
};

/* Everything one case builds; freed by fixture_free. */
struct fixture {
    struct acase c;
    struct kv_attn_params p;
    struct kv_span *spans; /* (n_spans) */
    int32_t n_spans;
    struct kv_view view;   /* spans and the case's mask */
    const void **pages;    /* (4, n_pages): K, V, K qparams, V qparams pages;
                              LAYOUT_SEQ_PAGED: (4, batch, n_pages + 2) tables */
    void **owned;          /* LAYOUT_SEQ_PAGED: the pool's pages, each once */
    int32_t n_owned;
    float *kd, *vd;       /* dense truth (batch, kv_heads, T, d) */
    float *q;             /* (batch, n_q, heads, d) */
    void *kbuf, *vbuf;    /* span storage */
    void *kbuf2, *vbuf2;  /* second span's storage (f32 residual) */
    struct kv_qparams *kqp, *vqp;
    int32_t *pos;         /* LAYOUT_SCATTER: the position table */
    double vmax;
    unsigned char *kint;  /* (batch, kv_heads, T): 1 where the key row is stored
                             quantized per token, which the decode kernel may
                             score with an int8 form of the query */
    float *qint;          /* (batch, n_q, heads, d): that form, unscaled, or NULL */
};

/* The key row x of f->kd has just been quantized per token. */
static void mark_key(struct fixture *f, const float *x)
{
    f->kint[(size_t)(x - f->kd) / (size_t)f->c.d] = 1;
}

/* Position-table strides of LAYOUT_SCATTER: padded, so the kernel must use them. */
#define SCATTER_HEAD_PAD 3

/* qparams pairs per row of the case's dtype (0: a dtype without qparams,
 * f16 / bf16, whose rows are rounded floats) */
static int32_t n_groups(const struct acase *c)
{
    return kv_type_traits[c->dt].has_qparams ? c->d / c->group : 0;
}

static size_t dense_at(const struct acase *c, int32_t b, int32_t h, int32_t t)
{
    return (((size_t)b * c->kv_heads + h) * c->T + t) * c->d;
}

/* Stores rows [t_from, t_to) of the dense arrays quantized (dt) into storage
 * (batch, kv_heads, n, rowbytes) and replaces the dense rows by what they
 * read back as. */
static void quantize_into(struct fixture *f, int32_t t_from, int32_t t_to, uint8_t *kc,
                          uint8_t *vc, struct kv_qparams *kqp, struct kv_qparams *vqp)
{
    const struct acase *c = &f->c;
    int32_t n = t_to - t_from, ng = n_groups(c);
    size_t rb = kv_dtype_row_bytes(c->dt, c->d);
    for (int32_t b = 0; b < c->batch; b++)
        for (int32_t h = 0; h < c->kv_heads; h++)
            for (int32_t t = 0; t < n; t++) {
                size_t r = ((size_t)b * c->kv_heads + h) * n + t;
                float *kr = f->kd + dense_at(c, b, h, t_from + t);
                float *vr = f->vd + dense_at(c, b, h, t_from + t);
                kv_quantize_row(kc + r * rb, kqp + r * ng, kr, c->dt, c->d, c->group);
                mark_key(f, kr);
                kv_quantize_row(vc + r * rb, vqp + r * ng, vr, c->dt, c->d, c->group);
                kv_dequantize_row(kr, kc + r * rb, kqp + r * ng, c->dt, c->d, c->group);
                kv_dequantize_row(vr, vc + r * rb, vqp + r * ng, c->dt, c->d, c->group);
            }
}

/* A per-token quantized descriptor over (batch, kv_heads, n, row) codes. */
static struct kv_tensor quant_tensor(const struct acase *c, const void *codes,
                                     const struct kv_qparams *qp, int32_t n)
{
    size_t rb = kv_dtype_row_bytes(c->dt, c->d), qb = (size_t)n_groups(c) * 8;
    return (struct kv_tensor){.dtype = c->dt, .data = codes, .row_stride = rb,
                              .head_stride = rb * n, .seq_stride = rb * n * c->kv_heads,
                              .axis = KV_QAXIS_TOKEN, .group = c->group, .qp = qp,
                              .qp_row_stride = qb, .qp_head_stride = qb * n,
                              .qp_seq_stride = qb * n * c->kv_heads};
}

static struct kv_tensor f32_tensor(const struct acase *c, const float *data, int32_t cap)
{
    size_t rb = (size_t)c->d * sizeof(float);
    return (struct kv_tensor){.dtype = KV_DTYPE_F32, .data = data, .row_stride = rb,
                              .head_stride = rb * cap, .seq_stride = rb * cap * c->kv_heads};
}

static void quant_span(struct kv_span *s, const struct acase *c, const void *k, const void *v,
                       const struct kv_qparams *kqp, const struct kv_qparams *vqp,
                       int32_t pos0, int32_t n)
{
    *s = (struct kv_span){.k = quant_tensor(c, k, kqp, n), .v = quant_tensor(c, v, vqp, n),
                          .n_tokens = n, .pos0 = pos0};
}

static void f32_span(struct kv_span *s, const struct acase *c, const float *k, const float *v,
                     int32_t pos0, int32_t n, int32_t cap)
{
    *s = (struct kv_span){.k = f32_tensor(c, k, cap), .v = f32_tensor(c, v, cap), .n_tokens = n,
                          .pos0 = pos0};
}

/*
 * LAYOUT_SEQ_PAGED: a page per (sequence, block of PAGE_TOKENS tokens),
 * (kv_heads, PAGE_TOKENS, row) codes or floats, its qparams likewise; each
 * sequence's table has n_pages + 2 entries, the last two NULL. Page 0 is
 * one page shared by every sequence, so the dense truth of sequences b > 0
 * is made equal to sequence 0's there first. The pages are allocated in a
 * scrambled order (a pool hands out blocks as they come).
 */
static void seq_paged_build(struct fixture *f, int32_t n_pages)
{
    const struct acase *c = &f->c;
    const int32_t d = c->d, stride = n_pages + 2;
    const int quant = kv_type_traits[c->dt].has_qparams;
    const size_t rb = kv_dtype_row_bytes(c->dt, d);
    const size_t qb = quant ? (size_t)(d / c->group) * sizeof(struct kv_qparams) : 0;
    const size_t prow = (size_t)c->kv_heads * PAGE_TOKENS;
    const size_t tab = (size_t)c->batch * stride;
    for (int32_t b = 1; b < c->batch; b++)
        for (int32_t h = 0; h < c->kv_heads; h++)
            for (int32_t t = 0; t < PAGE_TOKENS && t < c->T; t++) {
                memcpy(f->kd + dense_at(c, b, h, t), f->kd + dense_at(c, 0, h, t), d * sizeof(float));
                memcpy(f->vd + dense_at(c, b, h, t), f->vd + dense_at(c, 0, h, t), d * sizeof(float));
            }
    f->pages = calloc(4 * tab, sizeof *f->pages);
    f->owned = calloc(4 * tab, sizeof *f->owned);
    ck_assert(f->pages != NULL && f->owned != NULL);
    /* (b, pg) in a scrambled order: i = k * m + 3 modulo the count, m
     * coprime with it (so every i comes once) */
    const int32_t n = c->batch * n_pages;
    int32_t m = 7;
    for (;;) {
        int32_t a = n, r = m;
        while (r != 0) {
            const int32_t t = a % r;
            a = r;
            r = t;
        }
        if (a == 1)
            break;
        m += 2;
    }
    for (int32_t k = 0; k < n; k++) {
        const int32_t i = (int32_t)(((int64_t)k * m + 3) % n), b = i % c->batch, pg = i / c->batch;
        if (pg == 0 && b > 0)
            continue; /* shares sequence 0's */
        for (int w = 0; w < 4; w++) {
            if (w >= 2 && !quant)
                continue;
            void *page = malloc(prow * (w < 2 ? rb : qb) + 8);
            ck_assert(page != NULL);
            f->owned[f->n_owned++] = page;
            f->pages[(size_t)w * tab + (size_t)b * stride + pg] = page;
        }
    }
    for (int32_t b = 1; b < c->batch; b++)
        for (int w = 0; w < 4; w++)
            f->pages[(size_t)w * tab + (size_t)b * stride] = f->pages[(size_t)w * tab];
    for (int32_t b = 0; b < c->batch; b++)
        for (int32_t h = 0; h < c->kv_heads; h++)
            for (int32_t t = 0; t < c->T; t++) {
                const size_t e = (size_t)b * stride + t / PAGE_TOKENS;
                const size_t r = (size_t)h * PAGE_TOKENS + t % PAGE_TOKENS;
                for (int kv = 0; kv < 2; kv++) {
                    float *x = (kv ? f->vd : f->kd) + dense_at(c, b, h, t);
                    char *codes = (char *)f->pages[(size_t)kv * tab + e] + r * rb;
                    struct kv_qparams *qp =
                        quant ? (struct kv_qparams *)f->pages[(size_t)(2 + kv) * tab + e] +
                                    r * (qb / sizeof(struct kv_qparams))
                              : NULL;
                    kv_quantize_row(codes, qp, x, c->dt, d, c->group);
                    kv_dequantize_row(x, codes, qp, c->dt, d, c->group);
                    if (quant && kv == 0)
                        mark_key(f, x);
                }
            }
    struct kv_tensor side = {.dtype = c->dt, .row_stride = rb, .head_stride = rb * PAGE_TOKENS,
                             .seq_stride = 0, .table_stride = (size_t)stride,
                             .axis = KV_QAXIS_TOKEN, .group = quant ? c->group : 0,
                             .qp_row_stride = qb, .qp_head_stride = qb * PAGE_TOKENS};
    struct kv_span *sp = &f->spans[0];
    *sp = (struct kv_span){.k = side, .v = side, .n_tokens = c->T, .pos0 = 0,
                           .page_tokens = PAGE_TOKENS};
    sp->k.pages = f->pages;
    sp->v.pages = f->pages + tab;
    if (quant) {
        sp->k.qp_pages = f->pages + 2 * tab;
        sp->v.qp_pages = f->pages + 3 * tab;
    }
    f->n_spans = 1;
}

/* kv_attn_params.evicted of the fixtures built while it is set */
static int32_t fixture_evicted;

static void fixture_build(struct fixture *f, const struct acase *c, uint64_t seed)
{
    memset(f, 0, sizeof(*f));
    f->c = *c;
    rng_state = seed * 0x9E3779B97F4A7C15ull + 1;
    size_t nd = (size_t)c->batch * c->kv_heads * c->T * c->d;
    size_t nq = (size_t)c->batch * c->n_q * c->heads * c->d;
    f->kd = malloc(nd * sizeof(float) + 4);
    f->vd = malloc(nd * sizeof(float) + 4);
    f->q = malloc(nq * sizeof(float));
    f->kint = calloc(nd / (size_t)c->d + 1, 1);
    ck_assert(f->kd && f->vd && f->q && f->kint);
    for (size_t i = 0; i < nd; i++) {
        f->kd[i] = (float)rnd(-1, 1);
        f->vd[i] = (float)rnd(-1, 1);
    }
    for (size_t i = 0; i < nq; i++)
        f->q[i] = (float)rnd(-4, 4);

    const int32_t T = c->T, d = c->d;
    const int32_t n_pages = (T + PAGE_TOKENS - 1) / PAGE_TOKENS;
    f->spans = calloc((size_t)(n_pages > 2 ? n_pages : 2), sizeof *f->spans);
    ck_assert(f->spans != NULL);
    if (c->layout == LAYOUT_SEQ_PAGED) {
        seq_paged_build(f, n_pages);
    } else if (c->layout == LAYOUT_PAGED || c->layout == LAYOUT_PAGES) {
        /* every page its own allocation: (batch, kv_heads, PAGE_TOKENS, row)
         * codes or floats, and its qparams likewise */
        const int quant = kv_type_traits[c->dt].has_qparams;
        const size_t rb = kv_dtype_row_bytes(c->dt, d);
        const size_t qb = (size_t)n_groups(c) * sizeof(struct kv_qparams);
        const size_t prow = (size_t)c->batch * c->kv_heads * PAGE_TOKENS;
        f->pages = calloc(4 * (size_t)n_pages, sizeof *f->pages);
        ck_assert(f->pages != NULL);
        for (int32_t pg = 0; pg < n_pages; pg++) {
            for (int w = 0; w < 4; w++) {
                f->pages[(size_t)w * n_pages + pg] = w < 2 || quant
                    ? malloc(prow * (w < 2 ? rb : qb) + 8) : NULL;
                ck_assert(w >= 2 && !quant ? 1 : f->pages[(size_t)w * n_pages + pg] != NULL);
            }
        }
        for (int32_t b = 0; b < c->batch; b++)
            for (int32_t h = 0; h < c->kv_heads; h++)
                for (int32_t t = 0; t < T; t++) {
                    const int32_t pg = t / PAGE_TOKENS;
                    const size_t r = ((size_t)b * c->kv_heads + h) * PAGE_TOKENS + t % PAGE_TOKENS;
                    for (int kv = 0; kv < 2; kv++) {
                        float *x = (kv ? f->vd : f->kd) + dense_at(c, b, h, t);
                        char *codes = (char *)f->pages[(size_t)kv * n_pages + pg] + r * rb;
                        struct kv_qparams *qp =
                            quant ? (struct kv_qparams *)f->pages[(size_t)(2 + kv) * n_pages + pg] +
                                        r * (qb / sizeof(struct kv_qparams))
                                  : NULL;
                        kv_quantize_row(codes, qp, x, c->dt, d, c->group);
                        kv_dequantize_row(x, codes, qp, c->dt, d, c->group);
                        if (quant && kv == 0)
                            mark_key(f, x);
                    }
                }
        struct kv_tensor side = {.dtype = c->dt, .row_stride = rb,
                                 .head_stride = rb * PAGE_TOKENS,
                                 .seq_stride = rb * PAGE_TOKENS * c->kv_heads,
                                 .axis = KV_QAXIS_TOKEN, .group = quant ? c->group : 0,
                                 .qp_row_stride = qb, .qp_head_stride = qb * PAGE_TOKENS,
                                 .qp_seq_stride = qb * PAGE_TOKENS * c->kv_heads};
        if (c->layout == LAYOUT_PAGED) {
            struct kv_span *sp = &f->spans[0];
            *sp = (struct kv_span){.k = side, .v = side, .n_tokens = T, .pos0 = 0,
                                   .page_tokens = PAGE_TOKENS};
            sp->k.pages = f->pages;
            sp->v.pages = f->pages + n_pages;
            if (quant) {
                sp->k.qp_pages = f->pages + 2 * (size_t)n_pages;
                sp->v.qp_pages = f->pages + 3 * (size_t)n_pages;
            }
            f->n_spans = 1;
        } else {
            for (int32_t pg = 0; pg < n_pages; pg++) {
                struct kv_span *sp = &f->spans[pg];
                const int32_t n = T - pg * PAGE_TOKENS < PAGE_TOKENS ? T - pg * PAGE_TOKENS
                                                                    : PAGE_TOKENS;
                *sp = (struct kv_span){.k = side, .v = side, .n_tokens = n,
                                       .pos0 = pg * PAGE_TOKENS};
                sp->k.data = f->pages[pg];
                sp->v.data = f->pages[n_pages + pg];
                if (quant) {
                    sp->k.qp = f->pages[2 * (size_t)n_pages + pg];
                    sp->v.qp = f->pages[3 * (size_t)n_pages + pg];
                }
            }
            f->n_spans = n_pages;
        }
    } else if (c->layout == LAYOUT_CHANNEL || c->layout == LAYOUT_MIXED) {
        /* keys: per channel over blocks of CHANNEL_TOKENS tokens (CHANNEL)
         * or per token (MIXED); values per token (CHANNEL) or f32 (MIXED) */
        const size_t rb = kv_dtype_row_bytes(c->dt, d), ng = (size_t)n_groups(c);
        const size_t rows = (size_t)c->batch * c->kv_heads * T;
        const int32_t nblk = (T + CHANNEL_TOKENS - 1) / CHANNEL_TOKENS;
        const size_t kq = c->layout == LAYOUT_CHANNEL
                              ? (size_t)c->batch * c->kv_heads * nblk * d
                              : rows * ng;
        f->kbuf = malloc(rows * rb + 1);
        f->kqp = malloc(kq * sizeof(struct kv_qparams) + 8);
        ck_assert(f->kbuf && f->kqp);
        for (int32_t b = 0; b < c->batch; b++)
            for (int32_t h = 0; h < c->kv_heads; h++) {
                const size_t bh = (size_t)b * c->kv_heads + h;
                for (int32_t t0 = 0; t0 < T; t0 += CHANNEL_TOKENS) {
                    const int32_t n = T - t0 < CHANNEL_TOKENS ? T - t0 : CHANNEL_TOKENS;
                    for (int32_t t = t0; t < t0 + n; t++) {
                        float *x = f->kd + dense_at(c, b, h, t);
                        uint8_t *codes = (uint8_t *)f->kbuf + (bh * T + t) * rb;
                        if (c->layout == LAYOUT_MIXED) {
                            struct kv_qparams *qp = f->kqp + (bh * T + t) * ng;
                            kv_quantize_row(codes, qp, x, c->dt, d, c->group);
                            kv_dequantize_row(x, codes, qp, c->dt, d, c->group);
                            mark_key(f, x);
                        } else if (t == t0) {
                            struct kv_qparams *qp = f->kqp + (bh * nblk + t0 / CHANNEL_TOKENS) * d;
                            kv_quantize_rows_channel(codes, rb, qp, x, (size_t)d, n, c->dt, d);
                            for (int32_t u = 0; u < n; u++)
                                kv_dequantize_row_channel(x + (size_t)u * d, codes + u * rb, qp,
                                                          c->dt, d);
                        }
                    }
                }
            }
        struct kv_span *sp = &f->spans[0];
        sp->n_tokens = T;
        if (c->layout == LAYOUT_MIXED) {
            sp->k = quant_tensor(c, f->kbuf, f->kqp, T);
            float *vb = malloc(rows * d * sizeof(float) + 4);
            ck_assert(vb != NULL);
            f->vbuf = vb;
            memcpy(vb, f->vd, rows * d * sizeof(float));
            sp->v = f32_tensor(c, vb, T);
        } else {
            const size_t qrow = (size_t)d * sizeof(struct kv_qparams);
            sp->k = (struct kv_tensor){.dtype = c->dt, .data = f->kbuf, .row_stride = rb,
                                       .head_stride = rb * T, .seq_stride = rb * T * c->kv_heads,
                                       .axis = KV_QAXIS_CHANNEL, .group = CHANNEL_TOKENS,
                                       .qp = f->kqp, .qp_row_stride = qrow,
                                       .qp_head_stride = qrow * nblk,
                                       .qp_seq_stride = qrow * nblk * c->kv_heads};
            f->vbuf = malloc(rows * rb + 1);
            f->vqp = malloc(rows * ng * sizeof(struct kv_qparams) + 8);
            ck_assert(f->vbuf && f->vqp);
            for (size_t r = 0; r < rows; r++) {
                float *x = f->vd + r * d;
                kv_quantize_row((uint8_t *)f->vbuf + r * rb, f->vqp + r * ng, x, c->dt, d, c->group);
                kv_dequantize_row(x, (uint8_t *)f->vbuf + r * rb, f->vqp + r * ng, c->dt, d, c->group);
            }
            sp->v = quant_tensor(c, f->vbuf, f->vqp, T);
        }
        f->n_spans = 1;
    } else if (c->layout == LAYOUT_SCATTER) {
        /* positions [0, ns) in a random order per (b, h), then [ns, T) */
        const int32_t ns = T - T / 4, nr = T - ns;
        const size_t hs = (size_t)ns + SCATTER_HEAD_PAD, ss = hs * c->kv_heads;
        float *kb = malloc(nd * sizeof(float) + 4), *vb = malloc(nd * sizeof(float) + 4);
        f->pos = malloc(ss * c->batch * sizeof(int32_t) + 4);
        ck_assert(kb && vb && f->pos);
        f->kbuf = kb;
        f->vbuf = vb;
        for (int32_t b = 0; b < c->batch; b++)
            for (int32_t h = 0; h < c->kv_heads; h++) {
                int32_t *row = f->pos + (size_t)b * ss + (size_t)h * hs;
                for (int32_t t = 0; t < ns; t++)
                    row[t] = t;
                for (int32_t t = ns - 1; t > 0; t--) { /* Fisher-Yates */
                    int32_t u = (int32_t)rnd(0, t + 1), x = row[t];
                    row[t] = row[u > t ? t : u];
                    row[u > t ? t : u] = x;
                }
                for (int32_t t = 0; t < T; t++) {
                    const int32_t from = t < ns ? row[t] : t;
                    memcpy(kb + dense_at(c, b, h, t), f->kd + dense_at(c, b, h, from),
                           d * sizeof(float));
                    memcpy(vb + dense_at(c, b, h, t), f->vd + dense_at(c, b, h, from),
                           d * sizeof(float));
                }
            }
        f32_span(&f->spans[0], c, kb, vb, 0, ns, T);
        f->spans[0].pos = f->pos;
        f->spans[0].pos_head_stride = hs;
        f->spans[0].pos_seq_stride = ss;
        f->n_spans = 1;
        if (nr > 0) {
            f32_span(&f->spans[1], c, kb + (size_t)ns * d, vb + (size_t)ns * d, ns, nr, T);
            f->n_spans = 2;
        }
    } else if (c->layout == LAYOUT_ONE || c->layout == LAYOUT_RING || c->layout == LAYOUT_TOKEN) {
        float *kb = malloc(nd * sizeof(float) + 4), *vb = malloc(nd * sizeof(float) + 4);
        ck_assert(kb && vb);
        f->kbuf = kb;
        f->vbuf = vb;
        int32_t shift = c->layout == LAYOUT_RING ? T / 3 : 0; /* slot = (t + shift) % T */
        for (int32_t b = 0; b < c->batch; b++)
            for (int32_t h = 0; h < c->kv_heads; h++)
                for (int32_t t = 0; t < T; t++) {
                    size_t dst;
                    if (c->layout == LAYOUT_TOKEN)
                        dst = (((size_t)b * T + t) * c->kv_heads + h) * d;
                    else
                        dst = dense_at(c, b, h, (t + shift) % T);
                    memcpy(kb + dst, f->kd + dense_at(c, b, h, t), d * sizeof(float));
                    memcpy(vb + dst, f->vd + dense_at(c, b, h, t), d * sizeof(float));
                }
        if (c->layout == LAYOUT_ONE) {
            f32_span(&f->spans[0], c, kb, vb, 0, T, T);
            f->n_spans = 1;
        } else if (c->layout == LAYOUT_TOKEN) {
            size_t rb = (size_t)d * sizeof(float);
            f->spans[0] = (struct kv_span){
                .k = {.dtype = KV_DTYPE_F32, .data = kb, .row_stride = rb * c->kv_heads,
                      .head_stride = rb, .seq_stride = rb * c->kv_heads * T},
                .v = {.dtype = KV_DTYPE_F32, .data = vb, .row_stride = rb * c->kv_heads,
                      .head_stride = rb, .seq_stride = rb * c->kv_heads * T},
                .n_tokens = T, .pos0 = 0};
            f->n_spans = 1;
        } else {
            /* positions [0, T - shift) live in slots [shift, T), the newest
             * [T - shift, T) wrapped around into slots [0, shift) */
            f32_span(&f->spans[0], c, kb, vb, T - shift, shift, T);
            f32_span(&f->spans[1], c, kb + (size_t)shift * d, vb + (size_t)shift * d, 0,
                     T - shift, T);
            f->n_spans = 2;
        }
    } else {
        int32_t tq = c->layout == LAYOUT_QUANT ? T : T - T / 4;
        size_t rb = kv_dtype_row_bytes(c->dt, d), ng = (size_t)n_groups(c);
        size_t rows = (size_t)c->batch * c->kv_heads * tq;
        f->kbuf = malloc(rows * rb + 1);
        f->vbuf = malloc(rows * rb + 1);
        f->kqp = malloc(rows * ng * sizeof(struct kv_qparams) + 8);
        f->vqp = malloc(rows * ng * sizeof(struct kv_qparams) + 8);
        ck_assert(f->kbuf && f->vbuf && f->kqp && f->vqp);
        quantize_into(f, 0, tq, f->kbuf, f->vbuf, f->kqp, f->vqp);
        quant_span(&f->spans[0], c, f->kbuf, f->vbuf, f->kqp, f->vqp, 0, tq);
        f->n_spans = 1;
        if (c->layout == LAYOUT_QUANT_F32) {
            int32_t nr = T - tq;
            size_t nres = (size_t)c->batch * c->kv_heads * (nr > 0 ? nr : 1) * d;
            float *kb = malloc(nres * sizeof(float)), *vb = malloc(nres * sizeof(float));
            ck_assert(kb && vb);
            f->kbuf2 = kb;
            f->vbuf2 = vb;
            for (int32_t b = 0; b < c->batch; b++)
                for (int32_t h = 0; h < c->kv_heads; h++)
                    for (int32_t t = 0; t < nr; t++) {
                        size_t dst = (((size_t)b * c->kv_heads + h) * nr + t) * d;
                        memcpy(kb + dst, f->kd + dense_at(c, b, h, tq + t), d * sizeof(float));
                        memcpy(vb + dst, f->vd + dense_at(c, b, h, tq + t), d * sizeof(float));
                    }
            f32_span(&f->spans[1], c, kb, vb, tq, nr, nr);
            f->n_spans = 2;
        }
    }
    f->vmax = 0.0;
    for (size_t i = 0; i < nd; i++)
        f->vmax = fmax(f->vmax, fabs(f->vd[i]));

    f->p = (struct kv_attn_params){.batch = c->batch, .n_q = c->n_q, .n_heads = c->heads,
                                   .n_kv_heads = c->kv_heads, .head_dim = d,
                                   .q_pos0 = T - c->n_q,
                                   .scale = 1.0f / sqrtf((float)d), .n_threads = c->threads,
                                   .evicted = fixture_evicted};
    f->view = (struct kv_view){
        .spans = f->spans, .n_spans = f->n_spans,
        .mask = {.window = c->window, .n_sink = c->n_sink,
                 .pad = c->batch > 1 || c->pad[0] ? f->c.pad : NULL},
        .batch = c->batch, .n_kv_heads = c->kv_heads, .head_dim = d};
}

static void fixture_free(struct fixture *f)
{
    free(f->kd);
    free(f->vd);
    free(f->q);
    free(f->kint);
    free(f->qint);
    free(f->kbuf);
    free(f->vbuf);
    free(f->kbuf2);
    free(f->vbuf2);
    free(f->kqp);
    free(f->vqp);
    free(f->pos);
    if (f->owned != NULL) {
        for (int32_t i = 0; i < f->n_owned; i++)
            free(f->owned[i]);
        free(f->owned);
        free(f->pages);
    } else if (f->pages != NULL) {
        const int32_t n_pages = (f->c.T + PAGE_TOKENS - 1) / PAGE_TOKENS;
        for (int32_t i = 0; i < 4 * n_pages; i++)
            free((void *)f->pages[i]);
        free(f->pages);
    }
    free(f->spans);
}

/* ------------------------------------------------------------------------ */
/* The naive reference                                                      */

static int naive_visible(const struct kv_mask *m, int32_t b, int64_t qpos, int64_t kpos)
{
    if (kpos > qpos)
        return 0;
    if (m->window > 0 && kpos <= qpos - m->window && kpos >= m->n_sink)
        return 0; /* outside the window and not a sink */
    if (m->pad != NULL && kpos < m->pad[b])
        return 0;
    return 1;
}

/* Position of token t of span s for (b, h), read from the span as the
 * kernel's header lays it out. */
static int64_t span_pos(const struct kv_span *s, int32_t b, int32_t h, int32_t t)
{
    if (s->pos == NULL)
        return (int64_t)s->pos0 + t;
    return s->pos[(size_t)b * s->pos_seq_stride + (size_t)h * s->pos_head_stride + t];
}

/* Keys of the fixture's view (the mass's n_keys). */
static size_t fixture_keys(const struct fixture *f)
{
    size_t n = 0;
    for (int32_t s = 0; s < f->n_spans; s++)
        n += (size_t)f->spans[s].n_tokens;
    return n;
}

/*
 * mass (batch, heads, n_keys) from the dense arrays, in double: per query,
 * the probability of each position, put at the index of that position's key
 * in the view (the spans walked in order).
 */
/* The query that scores key row (b, h, t): the int8 form where f->qint is
 * set (the decode kernel's integer scores) and the row is quantized per
 * token, else the query itself. */
static const float *query_for(const struct fixture *f, const float *q, int32_t b, int32_t h,
                              int32_t t)
{
    if (f->qint == NULL || !f->kint[dense_at(&f->c, b, h, t) / (size_t)f->c.d])
        return q;
    return f->qint + (q - f->q);
}

static void naive_mass(double *mass, const struct fixture *f)
{
    const struct acase *c = &f->c;
    const int32_t d = c->d, grp = c->heads / c->kv_heads;
    const size_t nk = fixture_keys(f);
    double *pr = malloc(((size_t)c->T + 1) * sizeof(double));
    ck_assert(pr != NULL);
    memset(mass, 0, (size_t)c->batch * c->heads * nk * sizeof(double));
    for (int32_t b = 0; b < c->batch; b++)
        for (int32_t hq = 0; hq < c->heads; hq++) {
            const int32_t h = hq / grp;
            for (int32_t i = 0; i < c->n_q; i++) {
                const float *q = f->q + (((size_t)b * c->n_q + i) * c->heads + hq) * d;
                const int64_t qpos = (int64_t)f->p.q_pos0 + i;
                double mx = -INFINITY, sum = 0.0;
                for (int32_t t = 0; t < c->T; t++) {
                    pr[t] = -INFINITY;
                    if (!naive_visible(&f->view.mask, b, qpos, t))
                        continue;
                    double sc = 0.0;
                    const float *qt = query_for(f, q, b, h, t);
                    for (int32_t e = 0; e < d; e++)
                        sc += (double)qt[e] * f->kd[dense_at(c, b, h, t) + e];
                    pr[t] = sc * f->p.scale;
                    mx = fmax(mx, pr[t]);
                }
                for (int32_t t = 0; t < c->T; t++)
                    sum += pr[t] == -INFINITY ? 0.0 : exp(pr[t] - mx);
                size_t j = 0;
                double *row = mass + ((size_t)b * c->heads + hq) * nk;
                for (int32_t s = 0; s < f->n_spans; s++)
                    for (int32_t t = 0; t < f->spans[s].n_tokens; t++, j++) {
                        const int64_t kp = span_pos(&f->spans[s], b, h, t);
                        if (sum > 0.0 && kp >= 0 && kp < c->T && pr[kp] != -INFINITY)
                            row[j] += exp(pr[kp] - mx) / sum;
                    }
            }
        }
    free(pr);
}

/* out (batch, n_q, heads, d) from the dense arrays, in double */
static void naive_attention(double *out, const struct fixture *f)
{
    const struct acase *c = &f->c;
    const struct kv_attn_params *p = &f->p;
    const int32_t d = c->d, grp = c->heads / c->kv_heads;
    double *sc = malloc((size_t)c->T * sizeof(double));
    ck_assert(sc != NULL);
    for (int32_t b = 0; b < c->batch; b++)
        for (int32_t i = 0; i < c->n_q; i++)
            for (int32_t hq = 0; hq < c->heads; hq++) {
                const float *q = f->q + (((size_t)b * c->n_q + i) * c->heads + hq) * d;
                double *o = out + (((size_t)b * c->n_q + i) * c->heads + hq) * d;
                int32_t h = hq / grp;
                int64_t qpos = (int64_t)p->q_pos0 + i;
                double mx = -INFINITY;
                for (int32_t t = 0; t < c->T; t++) {
                    sc[t] = -INFINITY;
                    if (!naive_visible(&f->view.mask, b, qpos, t))
                        continue;
                    const float *k = f->kd + dense_at(c, b, h, t);
                    const float *qt = query_for(f, q, b, h, t);
                    double s = 0.0;
                    for (int32_t e = 0; e < d; e++)
                        s += (double)qt[e] * k[e];
                    sc[t] = s * p->scale;
                    mx = fmax(mx, sc[t]);
                }
                double sum = 0.0;
                for (int32_t e = 0; e < d; e++)
                    o[e] = 0.0;
                for (int32_t t = 0; t < c->T; t++) {
                    if (sc[t] == -INFINITY)
                        continue;
                    double w = exp(sc[t] - mx);
                    sum += w;
                    const float *v = f->vd + dense_at(c, b, h, t);
                    for (int32_t e = 0; e < d; e++)
                        o[e] += w * v[e];
                }
                for (int32_t e = 0; e < d; e++)
                    o[e] = sum > 0.0 ? o[e] / sum : 0.0;
            }
    free(sc);
}

/* ------------------------------------------------------------------------ */
/* Running one case                                                         */

static void compare(const float *got, const double *want, const struct fixture *f,
                    const char *who, int idx)
{
    const struct acase *c = &f->c;
    double tol = attn_tol(c->T, c->d, f->vmax);
    size_t n = (size_t)c->batch * c->n_q * c->heads * c->d;
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - want[i]);
        if (!(err <= tol)) {
            size_t e = i % c->d, r = i / c->d;
            ck_abort_msg("case %d %s: out[b=%zu q=%zu h=%zu][%zu] = %.7g, naive %.7g, err %.3g > tol %.3g "
                         "(B=%d nq=%d H=%d Hkv=%d d=%d T=%d win=%d sink=%d layout=%d dt=%d group=%d thr=%d)",
                         idx, who, r / c->heads / c->n_q, r / c->heads % c->n_q, r % c->heads, e,
                         got[i], want[i], err, tol, c->batch, c->n_q, c->heads, c->kv_heads, c->d,
                         c->T, c->window, c->n_sink, (int)c->layout, (int)c->dt, c->group, c->threads);
        }
    }
}

/*
 * The attention mass against the naive one, relative to each value. A
 * probability p = exp(s - max) / sum is off by about p times (the score's
 * rounding, head_dim terms of |q k| up to |score| <= 4 sqrt(d), twice: its
 * own and the max's) + (the sum's, T terms); the prefill adds n_q terms per
 * key. MASS_TOL_FACTOR covers the exponential's ulps, as ATTN_TOL_FACTOR
 * does for the outputs. A key nobody sees must be exactly 0; a real bug (a
 * wrong key, head or normalisation) is off by O(p).
 */
#define MASS_TOL_FACTOR 4.0
/* queries x keys above which run_case skips the reference's mass (slow) */
#define REF_MASS_MAX_PAIRS 40000
static void compare_mass(const float *got, const double *want, const struct fixture *f,
                         const char *who, int idx)
{
    const struct acase *c = &f->c;
    const size_t nk = fixture_keys(f), n = (size_t)c->batch * c->heads * nk;
    const double rel = MASS_TOL_FACTOR * FLT_EPSILON *
                       (8.0 * c->d * sqrt((double)c->d) + c->T + c->n_q);
    for (size_t i = 0; i < n; i++) {
        const double err = fabs((double)got[i] - want[i]);
        const double tol = rel * want[i] + 1e-30;
        if (!(err <= tol))
            ck_abort_msg("case %d %s: mass[b=%zu h=%zu][key %zu] = %.7g, naive %.7g, err %.3g > "
                         "tol %.3g (B=%d nq=%d H=%d Hkv=%d d=%d T=%d win=%d sink=%d layout=%d)",
                         idx, who, i / nk / c->heads, i / nk % c->heads, i % nk, got[i], want[i],
                         err, tol, c->batch, c->n_q, c->heads, c->kv_heads, c->d, c->T, c->window,
                         c->n_sink, (int)c->layout);
    }
}

/* Builds the case, runs kv_attn and kv_attn_ref, compares both with naive;
 * then both again asking for the attention mass: the outputs must not
 * change and the mass must match the naive one. */
static void run_case(const struct acase *c, int idx)
{
    struct fixture f;
    fixture_build(&f, c, (uint64_t)idx + 17);
    ck_assert_int_eq(kv_attn_check(&f.p, &f.view), KV_OK);
    size_t no = (size_t)c->batch * c->n_q * c->heads * c->d;
    const size_t nm = (size_t)c->batch * c->heads * fixture_keys(&f);
    double *want = malloc(no * sizeof(double));
    double *want_mass = malloc((nm + 1) * sizeof(double));
    float *got = malloc(no * sizeof(float));
    float *mass = malloc((nm + 1) * sizeof(float));
    ck_assert(want && got && want_mass && mass);
    naive_attention(want, &f);
    naive_mass(want_mass, &f);
    /* where the decode kernel scores per-token integer keys with the int8
     * form of the (scaled) query, its truth is computed from that form;
     * kv_attn_ref keeps the f32 query's */
    double *want_k = want, *want_mass_k = want_mass;
    const int qbits = c->n_q == 1 ? kv_rows_int_query(c->dt, c->d, c->group, c->heads / c->kv_heads) : 0;
    if (qbits) {
        const size_t nq = (size_t)c->batch * c->heads * c->d;
        f.qint = malloc(nq * sizeof(float));
        float *tmp = malloc((size_t)c->d * sizeof(float));
        want_k = malloc(no * sizeof(double));
        want_mass_k = malloc((nm + 1) * sizeof(double));
        ck_assert(f.qint && tmp && want_k && want_mass_k);
        for (size_t r = 0; r < nq; r += (size_t)c->d) {
            for (int32_t e = 0; e < c->d; e++)
                tmp[e] = f.q[r + e] * f.p.scale;
            kv_rows_query_int(f.qint + r, tmp, c->d, c->group, qbits);
            for (int32_t e = 0; e < c->d; e++)
                f.qint[r + e] /= f.p.scale;
        }
        free(tmp);
        naive_attention(want_k, &f);
        naive_mass(want_mass_k, &f);
    }

    size_t wsb = kv_attn_workspace_bytes(&f.p);
    void *ws = kv_alloc(wsb);
    ck_assert(ws != NULL);
    for (int with_mass = 0; with_mass < 2; with_mass++) {
        struct kv_attn_params p = f.p;
        if (with_mass) {
            p.mass = mass;
            p.mass_len = nm;
            for (size_t i = 0; i < nm; i++)
                mass[i] = NAN; /* every entry must be written */
        }
        for (size_t i = 0; i < no; i++)
            got[i] = NAN; /* every output must be written */
        kv_alloc_fail_at(0, 0);
        ck_assert_int_eq(kv_attn(got, f.q, &p, &f.view, ws, wsb), KV_OK);
        ck_assert_int_eq(kv_alloc_count(), 0); /* the kernel never allocates */
        compare(got, want_k, &f, with_mass ? "kv_attn+mass" : "kv_attn", idx);
        if (with_mass)
            compare_mass(mass, want_mass_k, &f, "kv_attn", idx);

        /* the reference's own mass pass only where it is cheap (it recomputes
         * every score once more): the big prefill tiles test the kernel's */
        if (with_mass && (size_t)c->n_q * (size_t)c->T > REF_MASS_MAX_PAIRS) {
            p.mass = NULL;
            p.mass_len = 0;
        }
        for (size_t i = 0; i < no; i++)
            got[i] = NAN;
        for (size_t i = 0; p.mass != NULL && i < nm; i++)
            mass[i] = NAN;
        ck_assert_int_eq(kv_attn_ref(got, f.q, &p, &f.view), KV_OK);
        compare(got, want, &f, p.mass != NULL ? "kv_attn_ref+mass" : "kv_attn_ref", idx);
        if (p.mass != NULL)
            compare_mass(mass, want_mass, &f, "kv_attn_ref", idx);
    }

    kv_free(ws);
    if (want_k != want) {
        free(want_k);
        free(want_mass_k);
    }
    free(want);
    free(want_mass);
    free(got);
    free(mass);
    fixture_free(&f);
}

/*
 * The case at every instruction-set level of the run-time dispatched
 * kernels that this CPU has (kv_isa_limit), for the dtypes that have such
 * kernels (f32, f16, bf16): each level's kernels against the same naive
 * truth. Other dtypes are compiled for one level and run once.
 */
static void run_case_isas(const struct acase *c, int idx)
{
    const int dispatched =
        c->dt == KV_DTYPE_F32 || c->dt == KV_DTYPE_F16 || c->dt == KV_DTYPE_BF16;
    const enum kv_isa top = dispatched ? kv_isa() : KV_ISA_SCALAR;
    for (int isa = (int)top; isa >= (int)KV_ISA_SCALAR; isa--) {
        kv_isa_limit((enum kv_isa)isa);
        run_case(c, idx);
    }
    kv_isa_limit(KV_ISA_COUNT);
}

/* ------------------------------------------------------------------------ */
/* Shapes: seq lengths x head_dims x GQA ratios, decode and prefill         */

static const int32_t shape_T[] = {1, 2, 7, 33, 1000};
static const int32_t shape_d[] = {64, 80, 128};
static const int32_t shape_ratio[] = {1, 2, 4, 8};
#define N_SHAPES (5 * 3 * 4)

static struct acase shape_case(int i, int prefill)
{
    int32_t T = shape_T[i % 5], d = shape_d[i / 5 % 3], ratio = shape_ratio[i / 15];
    struct acase c = {.batch = 1, .n_q = 1, .heads = 8, .kv_heads = 8 / ratio, .d = d, .T = T,
                      .layout = LAYOUT_ONE, .threads = 2};
    if (prefill) /* the whole prompt when short, else 9 new tokens */
        c.n_q = T <= 33 ? T : 9;
    return c;
}

/* f32 rows, at every ISA level (rows_float.h picks its kernels at run time) */
START_TEST(test_shapes_decode)
{
    struct acase c = shape_case(_i, 0);
    run_case_isas(&c, _i);
}
END_TEST

START_TEST(test_shapes_prefill)
{
    struct acase c = shape_case(_i, 1);
    run_case_isas(&c, 100 + _i);
}
END_TEST

/* The same shapes over a span with a position table (and its residual). */
START_TEST(test_shapes_scatter)
{
    struct acase c = shape_case(_i / 2, _i % 2);
    c.layout = LAYOUT_SCATTER;
    run_case(&c, 1000 + _i);
}
END_TEST

/* The same shapes in f16 and bf16 (one span of 16-bit rows), decode and
 * prefill, at every ISA level: _i = shape + N_SHAPES * (dtype + 2 * prefill). */
START_TEST(test_shapes_half)
{
    const int prefill = _i / (2 * N_SHAPES), bf = _i / N_SHAPES % 2;
    struct acase c = shape_case(_i % N_SHAPES, prefill);
    c.dt = bf ? KV_DTYPE_BF16 : KV_DTYPE_F16;
    c.layout = LAYOUT_QUANT;
    run_case_isas(&c, 600 + _i);
}
END_TEST

/* The same shapes in int2, keys per token and per channel (KIVI, blocks of
 * CHANNEL_TOKENS), decode and prefill: _i = shape + N_SHAPES * (layout + 2 *
 * prefill). Groups of 16 divide every head_dim of the shapes. */
START_TEST(test_shapes_q2)
{
    const int prefill = _i / (2 * N_SHAPES), channel = _i / N_SHAPES % 2;
    struct acase c = shape_case(_i % N_SHAPES, prefill);
    c.dt = KV_DTYPE_Q2;
    c.group = 16;
    c.layout = channel ? LAYOUT_CHANNEL : LAYOUT_QUANT;
    run_case(&c, 1600 + _i);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Masks, layouts, dtypes, split-K: a table                                 */

#define F32 KV_DTYPE_F32
#define Q8 KV_DTYPE_Q8
#define Q4 KV_DTYPE_Q4
#define F16 KV_DTYPE_F16
#define BF16 KV_DTYPE_BF16
#define Q2 KV_DTYPE_Q2
static const struct acase table[] = {
    /* sliding windows: 1, small, == T, > T; decode and prefill */
    {1, 1, 8, 2, 64, 33, 1, {0}, F32, 0, LAYOUT_ONE, 2, 0},
    {1, 33, 8, 2, 64, 33, 1, {0}, F32, 0, LAYOUT_ONE, 2, 0},
    {1, 1, 8, 8, 64, 1000, 16, {0}, F32, 0, LAYOUT_ONE, 2, 0},
    {1, 40, 8, 8, 64, 1000, 16, {0}, F32, 0, LAYOUT_ONE, 2, 0},
    {1, 40, 4, 1, 80, 1000, 100, {0}, F32, 0, LAYOUT_ONE, 2, 0},
    {1, 1, 8, 4, 128, 33, 33, {0}, F32, 0, LAYOUT_ONE, 2, 0},
    {1, 33, 8, 4, 128, 33, 33, {0}, F32, 0, LAYOUT_ONE, 2, 0},
    {1, 1, 8, 4, 64, 33, 50, {0}, F32, 0, LAYOUT_ONE, 2, 0},
    {1, 33, 8, 4, 64, 33, 50, {0}, F32, 0, LAYOUT_ONE, 2, 0},
    /* left padding, batch of 3 sequences of different lengths */
    {3, 1, 8, 2, 64, 33, 0, {0, 5, 20}, F32, 0, LAYOUT_ONE, 2, 0},
    {3, 33, 8, 2, 64, 33, 0, {0, 5, 20}, F32, 0, LAYOUT_ONE, 2, 0},
    {3, 1, 8, 8, 80, 1000, 0, {0, 300, 999}, F32, 0, LAYOUT_ONE, 2, 0},
    {3, 40, 8, 8, 80, 1000, 0, {0, 300, 990}, F32, 0, LAYOUT_ONE, 2, 0},
    {3, 7, 4, 4, 64, 7, 3, {2, 0, 6}, F32, 0, LAYOUT_ONE, 1, 0},
    {3, 1, 8, 1, 128, 200, 50, {0, 170, 199}, F32, 0, LAYOUT_TOKEN, 3, 0},
    /* strides and spans: token-major, ring buffer, quantized + f32 residual */
    {2, 1, 8, 2, 64, 100, 0, {0, 0}, F32, 0, LAYOUT_TOKEN, 2, 0},
    {2, 9, 8, 2, 64, 100, 0, {0, 0}, F32, 0, LAYOUT_TOKEN, 2, 0},
    {1, 1, 8, 8, 64, 100, 0, {0}, F32, 0, LAYOUT_RING, 2, 0},
    {1, 20, 8, 8, 64, 100, 0, {0}, F32, 0, LAYOUT_RING, 2, 0},
    {2, 1, 8, 4, 80, 99, 40, {0, 10}, F32, 0, LAYOUT_RING, 2, 0},
    {2, 30, 8, 4, 80, 99, 40, {0, 10}, F32, 0, LAYOUT_RING, 2, 0},
    {1, 1, 8, 2, 64, 1000, 0, {0}, Q8, 32, LAYOUT_QUANT_F32, 2, 0},
    {1, 1, 8, 2, 64, 1000, 0, {0}, Q4, 32, LAYOUT_QUANT_F32, 2, 0},
    {2, 12, 8, 2, 64, 300, 0, {0, 7}, Q8, 32, LAYOUT_QUANT_F32, 2, 0},
    {2, 12, 8, 2, 64, 300, 0, {0, 7}, Q4, 32, LAYOUT_QUANT_F32, 2, 0},
    {1, 1, 4, 4, 64, 1, 0, {0}, Q8, 32, LAYOUT_QUANT_F32, 2, 0},
    /* quantized spans: every head_dim, several groups (fast and scalar paths) */
    {1, 1, 8, 8, 64, 1000, 0, {0}, Q8, 32, LAYOUT_QUANT, 2, 0},
    {1, 1, 8, 8, 64, 1000, 0, {0}, Q4, 32, LAYOUT_QUANT, 2, 0},
    {1, 1, 8, 2, 128, 333, 0, {0}, Q8, 64, LAYOUT_QUANT, 2, 0},
    /* the fused GQA paths (AVX-512, groups of 2, 4 and 8 heads): int8 at
     * head_dim 128 and 256, a batch with padding, odd T for the leftover row;
     * int8 and int4 at head_dim 64 below */
    {1, 1, 8, 4, 128, 333, 0, {0}, Q8, 64, LAYOUT_QUANT, 2, 0},
    {1, 1, 16, 2, 128, 129, 0, {0}, Q8, 32, LAYOUT_QUANT, 2, 0},
    {2, 1, 16, 2, 256, 65, 0, {0, 9}, Q8, 128, LAYOUT_QUANT_F32, 2, 0},
    {1, 1, 8, 2, 128, 333, 0, {0}, Q4, 128, LAYOUT_QUANT, 2, 0},
    /* the fused int4 GQA path: groups of 2, 4 and 8 heads, groups of 32
     * and 64 codes (one and two byte chunks per group), padding */
    {1, 1, 8, 4, 128, 333, 0, {0}, Q4, 64, LAYOUT_QUANT, 2, 0},
    {1, 1, 16, 2, 128, 129, 0, {0}, Q4, 32, LAYOUT_QUANT, 2, 0},
    {1, 1, 16, 4, 128, 130, 0, {0}, Q4, 32, LAYOUT_QUANT, 2, 0},
    {2, 1, 16, 2, 256, 65, 0, {0, 9}, Q4, 128, LAYOUT_QUANT_F32, 2, 0},
    {1, 1, 16, 2, 256, 77, 0, {0}, Q4, 64, LAYOUT_QUANT, 2, 0},
    {1, 1, 16, 4, 64, 131, 0, {0}, Q8, 32, LAYOUT_QUANT, 2, 0},
    {1, 1, 16, 4, 64, 131, 0, {0}, Q4, 32, LAYOUT_QUANT, 2, 0},
    {2, 1, 16, 2, 64, 70, 0, {0, 5}, Q4, 32, LAYOUT_QUANT_F32, 2, 0},
    /* int8 MHA, 16 rows a call: packed (s, m) pairs of 2 groups, 4 groups,
     * 5 groups of 16 (scalar min terms) */
    {1, 1, 4, 4, 128, 200, 0, {0}, Q8, 64, LAYOUT_QUANT, 2, 0},
    {1, 1, 8, 8, 128, 333, 0, {0}, Q8, 32, LAYOUT_QUANT, 2, 0},
    {1, 1, 4, 4, 80, 150, 0, {0}, Q8, 16, LAYOUT_QUANT_F32, 2, 0},
    {1, 1, 8, 1, 80, 77, 0, {0}, Q8, 16, LAYOUT_QUANT, 2, 0},
    /* int4 MHA, 16 rows a call: 2, 4 groups of 32, 2 groups of 64 */
    {1, 1, 8, 8, 128, 333, 0, {0}, Q4, 32, LAYOUT_QUANT, 2, 0},
    {1, 1, 4, 4, 128, 200, 0, {0}, Q4, 64, LAYOUT_QUANT_F32, 2, 0},
    {1, 1, 8, 1, 80, 77, 0, {0}, Q4, 16, LAYOUT_QUANT, 2, 0},
    {1, 1, 8, 4, 80, 77, 0, {0}, Q8, 40, LAYOUT_QUANT, 2, 0},
    {1, 1, 8, 4, 80, 77, 0, {0}, Q4, 40, LAYOUT_QUANT, 2, 0},
    {1, 1, 8, 4, 64, 77, 0, {0}, Q8, 8, LAYOUT_QUANT, 2, 0},
    {1, 1, 8, 4, 64, 77, 0, {0}, Q4, 8, LAYOUT_QUANT, 2, 0},
    {1, 1, 8, 4, 64, 77, 0, {0}, Q8, 4, LAYOUT_QUANT, 2, 0},
    {1, 1, 8, 4, 64, 77, 0, {0}, Q4, 2, LAYOUT_QUANT, 2, 0},
    {1, 1, 16, 2, 64, 129, 0, {0}, Q4, 16, LAYOUT_QUANT, 2, 0},
    {1, 1, 16, 2, 64, 129, 0, {0}, Q8, 64, LAYOUT_QUANT, 2, 0},
    {3, 1, 8, 2, 64, 150, 20, {0, 50, 149}, Q8, 32, LAYOUT_QUANT, 2, 0},
    {3, 1, 8, 2, 64, 150, 20, {0, 50, 149}, Q4, 32, LAYOUT_QUANT, 2, 0},
    {1, 33, 8, 4, 80, 33, 0, {0}, Q8, 16, LAYOUT_QUANT, 2, 0},
    {1, 33, 8, 4, 128, 64, 10, {0}, Q4, 32, LAYOUT_QUANT, 2, 0},
    /* prefill across several query tiles (256 rows of queries x group
     * heads) and key tiles (512 keys), with windows and padding */
    {1, 300, 4, 4, 64, 1100, 0, {0}, F32, 0, LAYOUT_ONE, 2, 0},
    {1, 300, 4, 4, 64, 1100, 600, {0}, F32, 0, LAYOUT_ONE, 2, 0},
    {2, 140, 8, 2, 64, 1030, 0, {0, 333}, F32, 0, LAYOUT_RING, 2, 0},
    {1, 260, 8, 8, 80, 1040, 513, {0}, Q8, 16, LAYOUT_QUANT_F32, 2, 0},
    {1, 150, 4, 4, 64, 300, 0, {0}, F32, 0, LAYOUT_ONE, 2, 0},
    {1, 150, 4, 4, 64, 300, 100, {0}, F32, 0, LAYOUT_ONE, 2, 0},
    {2, 140, 8, 2, 64, 600, 0, {0, 333}, F32, 0, LAYOUT_RING, 2, 0},
    {1, 130, 8, 8, 80, 520, 257, {0}, Q8, 16, LAYOUT_QUANT_F32, 2, 0},
    {1, 129, 2, 1, 128, 400, 0, {0}, Q4, 32, LAYOUT_QUANT, 3, 0},
    /* split-K boundaries: one kv head, so decode splits the keys (2 threads:
     * 4 splits, 3 threads: 6, each a whole number of 64-key blocks); T just
     * below, at and above multiples of the block and chunk sizes */
    {1, 1, 8, 1, 64, 31, 0, {0}, F32, 0, LAYOUT_ONE, 2, 0},
    {1, 1, 8, 1, 64, 32, 0, {0}, F32, 0, LAYOUT_ONE, 2, 0},
    {1, 1, 8, 1, 64, 33, 0, {0}, F32, 0, LAYOUT_ONE, 2, 0},
    {1, 1, 8, 1, 64, 127, 0, {0}, F32, 0, LAYOUT_ONE, 2, 0},
    {1, 1, 8, 1, 64, 128, 0, {0}, F32, 0, LAYOUT_ONE, 2, 0},
    {1, 1, 8, 1, 64, 129, 0, {0}, F32, 0, LAYOUT_ONE, 2, 0},
    {1, 1, 8, 1, 64, 255, 0, {0}, F32, 0, LAYOUT_ONE, 2, 0},
    {1, 1, 8, 1, 64, 256, 0, {0}, F32, 0, LAYOUT_ONE, 2, 0},
    {1, 1, 8, 1, 64, 384, 0, {0}, F32, 0, LAYOUT_ONE, 3, 0},
    {1, 1, 8, 1, 64, 385, 0, {0}, Q8, 32, LAYOUT_QUANT, 3, 0},
    {1, 1, 8, 1, 64, 257, 0, {0}, F32, 0, LAYOUT_ONE, 2, 0},
    {1, 1, 8, 1, 64, 191, 0, {0}, F32, 0, LAYOUT_ONE, 3, 0},
    {1, 1, 8, 1, 64, 193, 0, {0}, F32, 0, LAYOUT_ONE, 3, 0},
    {1, 1, 8, 1, 64, 129, 0, {0}, Q8, 32, LAYOUT_QUANT, 2, 0},
    {1, 1, 8, 1, 64, 127, 0, {0}, Q4, 32, LAYOUT_QUANT, 2, 0},
    {1, 1, 8, 1, 64, 257, 0, {0}, F32, 0, LAYOUT_RING, 2, 0},
    {1, 1, 8, 1, 64, 129, 60, {0}, F32, 0, LAYOUT_ONE, 2, 0},
    {1, 1, 4, 1, 64, 999, 0, {0}, F32, 0, LAYOUT_ONE, 1, 0},
    /* odd sizes: head_dim not a multiple of 8, one thread, many threads */
    {1, 1, 3, 1, 13, 37, 0, {0}, F32, 0, LAYOUT_ONE, 2, 0},
    {1, 5, 3, 1, 13, 37, 9, {0}, F32, 0, LAYOUT_ONE, 2, 0},
    {2, 1, 6, 3, 20, 45, 0, {0, 3}, Q8, 5, LAYOUT_QUANT, 4, 0},
    {2, 3, 6, 3, 20, 45, 0, {0, 3}, Q4, 10, LAYOUT_QUANT, 1, 0},
    /* attention sinks with a window (the last column): below and across the
     * window, reaching it (one interval), with padding above the sinks,
     * decode, split-K and prefill over several tiles */
    {1, 1, 8, 2, 64, 300, 64, {0}, F32, 0, LAYOUT_ONE, 2, 4},
    {1, 40, 8, 2, 64, 300, 64, {0}, F32, 0, LAYOUT_ONE, 2, 4},
    {1, 1, 8, 8, 64, 1000, 100, {0}, F32, 0, LAYOUT_ONE, 2, 70},
    {1, 300, 4, 4, 64, 1100, 600, {0}, F32, 0, LAYOUT_ONE, 2, 16},
    {1, 1, 8, 8, 64, 100, 10, {0}, F32, 0, LAYOUT_ONE, 2, 95},
    {3, 33, 8, 2, 64, 33, 5, {0, 2, 20}, F32, 0, LAYOUT_ONE, 2, 3},
    {3, 1, 8, 2, 64, 150, 20, {0, 50, 149}, Q8, 32, LAYOUT_QUANT, 2, 8},
    {1, 1, 8, 1, 64, 385, 64, {0}, F32, 0, LAYOUT_ONE, 3, 5},
    {2, 30, 8, 4, 80, 99, 40, {0, 10}, F32, 0, LAYOUT_RING, 2, 12},
    {1, 1, 16, 4, 64, 200, 33, {0}, Q4, 32, LAYOUT_QUANT_F32, 2, 7},
    /* paged: one span over a block table of 5-token pages (the 64-row
     * blocks cut at every offset), every dtype, the fused GQA, tile and
     * MHA paths, prefill; then one span per page (many spans) */
    {1, 1, 8, 8, 64, 333, 0, {0}, F32, 0, LAYOUT_PAGED, 2, 0},
    {1, 1, 8, 2, 128, 333, 0, {0}, F32, 0, LAYOUT_PAGED, 2, 0},
    {2, 1, 8, 2, 64, 200, 30, {0, 7}, F32, 0, LAYOUT_PAGED, 2, 3},
    {1, 1, 8, 8, 64, 333, 0, {0}, Q8, 32, LAYOUT_PAGED, 2, 0},
    {1, 1, 8, 8, 64, 333, 0, {0}, Q4, 32, LAYOUT_PAGED, 2, 0},
    {1, 1, 16, 2, 64, 129, 0, {0}, Q4, 32, LAYOUT_PAGED, 2, 0},
    {1, 1, 16, 2, 64, 129, 0, {0}, Q8, 32, LAYOUT_PAGED, 2, 0},
    {1, 1, 8, 2, 128, 100, 0, {0}, Q8, 64, LAYOUT_PAGED, 2, 0},
    {1, 1, 12, 4, 64, 100, 0, {0}, Q8, 32, LAYOUT_PAGED, 2, 0},
    {1, 1, 8, 1, 64, 257, 0, {0}, Q8, 16, LAYOUT_PAGED, 3, 0},
    {1, 40, 8, 2, 64, 333, 0, {0}, F32, 0, LAYOUT_PAGED, 2, 0},
    {1, 300, 4, 4, 64, 700, 0, {0}, Q8, 32, LAYOUT_PAGED, 2, 0},
    {1, 1, 8, 8, 64, 333, 0, {0}, F32, 0, LAYOUT_PAGES, 2, 0},
    {2, 9, 8, 2, 64, 100, 20, {0, 3}, Q4, 32, LAYOUT_PAGES, 2, 2},
    {1, 1, 8, 1, 64, 257, 0, {0}, F32, 0, LAYOUT_PAGES, 3, 0},
    /* a block table per sequence, pages shared: decode (MHA, GQA, split-K,
     * padding, window and sinks), every dtype, prefill over tiles */
    {3, 1, 8, 8, 64, 333, 0, {0, 0, 0}, F32, 0, LAYOUT_SEQ_PAGED, 2, 0},
    {2, 1, 8, 2, 128, 200, 30, {0, 7}, F32, 0, LAYOUT_SEQ_PAGED, 2, 3},
    {1, 1, 8, 1, 64, 257, 0, {0}, F32, 0, LAYOUT_SEQ_PAGED, 3, 0},
    {3, 1, 16, 2, 64, 129, 0, {0, 2, 0}, Q8, 32, LAYOUT_SEQ_PAGED, 2, 0},
    {2, 1, 8, 8, 64, 150, 0, {0, 0}, Q4, 32, LAYOUT_SEQ_PAGED, 2, 0},
    {2, 40, 8, 2, 64, 333, 0, {0, 0}, F32, 0, LAYOUT_SEQ_PAGED, 2, 0},
    {2, 300, 4, 4, 64, 700, 0, {0, 0}, Q8, 32, LAYOUT_SEQ_PAGED, 2, 0},
    {3, 1, 8, 2, 64, 129, 0, {0, 2, 0}, F16, 0, LAYOUT_SEQ_PAGED, 2, 0},
    {2, 1, 8, 8, 128, 150, 30, {0, 7}, BF16, 0, LAYOUT_SEQ_PAGED, 2, 3},
    {2, 1, 16, 4, 64, 150, 0, {0, 0}, Q2, 32, LAYOUT_SEQ_PAGED, 2, 0},
    {2, 40, 8, 2, 80, 133, 0, {0, 0}, BF16, 0, LAYOUT_SEQ_PAGED, 2, 0},
    /* separate K and V descriptors: keys per channel over 16-token blocks
     * with values per token (KIVI); quantized keys with f32 values */
    {1, 1, 8, 2, 64, 333, 0, {0}, Q8, 32, LAYOUT_CHANNEL, 2, 0},
    {1, 1, 8, 8, 64, 100, 0, {0}, Q4, 32, LAYOUT_CHANNEL, 2, 0},
    {2, 20, 8, 2, 64, 150, 40, {0, 9}, Q8, 16, LAYOUT_CHANNEL, 2, 4},
    {1, 1, 16, 2, 128, 129, 0, {0}, Q4, 32, LAYOUT_CHANNEL, 2, 0},
    {1, 1, 8, 2, 64, 333, 0, {0}, Q8, 32, LAYOUT_MIXED, 2, 0},
    {1, 1, 16, 2, 128, 129, 0, {0}, Q4, 32, LAYOUT_MIXED, 2, 0},
    {1, 1, 8, 8, 64, 200, 0, {0}, Q4, 32, LAYOUT_MIXED, 2, 0},
    {1, 30, 8, 2, 64, 100, 0, {0}, Q8, 32, LAYOUT_MIXED, 2, 0},
    /* a span with a position table (per-head orders): decode and prefill,
     * windows and sinks masked key by key, padding, split-K with one kv
     * head, several query and key tiles */
    {1, 1, 8, 8, 64, 333, 0, {0}, F32, 0, LAYOUT_SCATTER, 2, 0},
    {1, 1, 8, 2, 80, 101, 40, {0}, F32, 0, LAYOUT_SCATTER, 2, 4},
    {3, 1, 8, 2, 64, 150, 0, {0, 50, 149}, F32, 0, LAYOUT_SCATTER, 2, 0},
    {3, 9, 8, 4, 128, 77, 30, {0, 5, 70}, F32, 0, LAYOUT_SCATTER, 2, 3},
    {1, 1, 8, 1, 64, 385, 0, {0}, F32, 0, LAYOUT_SCATTER, 3, 0},
    {1, 1, 8, 1, 64, 257, 64, {0}, F32, 0, LAYOUT_SCATTER, 2, 5},
    {1, 300, 4, 4, 64, 1100, 600, {0}, F32, 0, LAYOUT_SCATTER, 2, 16},
    {2, 140, 8, 2, 64, 700, 0, {0, 333}, F32, 0, LAYOUT_SCATTER, 2, 0},
    {1, 1, 3, 1, 13, 37, 9, {0}, F32, 0, LAYOUT_SCATTER, 1, 2},
    /* 16-bit float rows (run at every ISA level, run_case_isas): MHA (bf16:
     * the even/odd kernels at head_dim 64, 96 and 128, not 80), the
     * GQA kernels of 2, 4 and 8 heads and a group of 3, an f32 residual,
     * windows, sinks and padding, pages, odd head_dim, split-K, prefill
     * tiles, 16-bit keys with f32 values */
    {1, 1, 8, 8, 64, 1000, 0, {0}, F16, 0, LAYOUT_QUANT, 2, 0},
    {1, 1, 8, 8, 64, 1000, 0, {0}, BF16, 0, LAYOUT_QUANT, 2, 0},
    {1, 1, 8, 8, 96, 200, 0, {0}, BF16, 0, LAYOUT_QUANT, 2, 0},
    {1, 1, 4, 4, 80, 201, 0, {0}, BF16, 0, LAYOUT_QUANT, 2, 0},
    {1, 1, 8, 2, 128, 333, 0, {0}, BF16, 0, LAYOUT_QUANT_F32, 2, 0},
    {1, 1, 8, 2, 128, 333, 0, {0}, F16, 0, LAYOUT_QUANT_F32, 2, 0},
    {1, 1, 16, 2, 128, 129, 0, {0}, F16, 0, LAYOUT_QUANT, 2, 0},
    {1, 1, 16, 4, 64, 131, 0, {0}, BF16, 0, LAYOUT_QUANT, 2, 0},
    {2, 1, 8, 4, 80, 99, 40, {0, 10}, F16, 0, LAYOUT_QUANT_F32, 2, 5},
    {3, 1, 8, 8, 128, 150, 20, {0, 50, 149}, BF16, 0, LAYOUT_QUANT, 2, 8},
    {1, 1, 12, 4, 64, 100, 0, {0}, BF16, 0, LAYOUT_PAGED, 2, 0},
    {1, 1, 8, 8, 64, 333, 0, {0}, F16, 0, LAYOUT_PAGED, 2, 0},
    {2, 9, 8, 2, 64, 100, 20, {0, 3}, F16, 0, LAYOUT_PAGES, 2, 2},
    {1, 1, 3, 1, 13, 37, 0, {0}, BF16, 0, LAYOUT_QUANT, 2, 0},
    {2, 5, 6, 3, 20, 45, 9, {0, 3}, F16, 0, LAYOUT_QUANT, 1, 0},
    {1, 1, 8, 1, 64, 385, 0, {0}, F16, 0, LAYOUT_QUANT, 3, 0},
    {1, 1, 8, 1, 64, 257, 60, {0}, BF16, 0, LAYOUT_QUANT_F32, 2, 3},
    {1, 300, 4, 4, 64, 1100, 600, {0}, BF16, 0, LAYOUT_QUANT, 2, 16},
    {1, 260, 8, 8, 80, 1040, 513, {0}, F16, 0, LAYOUT_QUANT_F32, 2, 0},
    {1, 1, 8, 2, 64, 333, 0, {0}, F16, 0, LAYOUT_MIXED, 2, 0},
    {1, 30, 8, 8, 64, 100, 0, {0}, BF16, 0, LAYOUT_MIXED, 2, 0},
    /* int2: MHA 16 rows a call at head_dim 64 and 128, groups of 16, 32
     * and 64 (a group over several chunks and a chunk per group), the fused
     * GQA kernels of 2, 4 and 8 heads and the tile of 3 and 6, head_dim 80
     * and groups of 8 (the portable path), padding, sinks, pages, split-K,
     * prefill, an f32 residual */
    {1, 1, 8, 8, 64, 1000, 0, {0}, Q2, 32, LAYOUT_QUANT, 2, 0},
    {1, 1, 8, 8, 128, 333, 0, {0}, Q2, 32, LAYOUT_QUANT, 2, 0},
    {1, 1, 4, 4, 128, 201, 0, {0}, Q2, 64, LAYOUT_QUANT_F32, 2, 0},
    {1, 1, 4, 4, 64, 77, 0, {0}, Q2, 16, LAYOUT_QUANT, 2, 0},
    {1, 1, 8, 4, 64, 333, 0, {0}, Q2, 32, LAYOUT_QUANT, 2, 0},
    {1, 1, 16, 2, 128, 129, 0, {0}, Q2, 32, LAYOUT_QUANT, 2, 0},
    {1, 1, 16, 4, 64, 131, 0, {0}, Q2, 16, LAYOUT_QUANT, 2, 0},
    {1, 1, 12, 4, 64, 100, 0, {0}, Q2, 32, LAYOUT_QUANT, 2, 0},
    {1, 1, 12, 2, 128, 70, 0, {0}, Q2, 64, LAYOUT_QUANT_F32, 2, 0},
    {1, 1, 8, 4, 80, 77, 0, {0}, Q2, 16, LAYOUT_QUANT, 2, 0},
    {1, 1, 8, 8, 64, 77, 0, {0}, Q2, 8, LAYOUT_QUANT, 2, 0},
    {2, 1, 6, 3, 20, 45, 0, {0, 3}, Q2, 5, LAYOUT_QUANT, 4, 0},
    {3, 1, 8, 2, 64, 150, 20, {0, 50, 149}, Q2, 32, LAYOUT_QUANT, 2, 8},
    {1, 1, 8, 8, 64, 333, 0, {0}, Q2, 32, LAYOUT_PAGED, 2, 0},
    {2, 9, 8, 2, 64, 100, 20, {0, 3}, Q2, 32, LAYOUT_PAGES, 2, 2},
    {1, 1, 8, 1, 64, 385, 0, {0}, Q2, 32, LAYOUT_QUANT, 3, 0},
    {1, 33, 8, 4, 64, 64, 10, {0}, Q2, 32, LAYOUT_QUANT, 2, 0},
    {1, 260, 8, 8, 128, 1040, 513, {0}, Q2, 32, LAYOUT_QUANT_F32, 2, 0},
    /* per-channel keys (KIVI) through the codes' row kernels and scaled
     * queries: every int dtype, MHA and the fused GQA sizes, the generic
     * reader for other sizes (3 heads), head_dim 80, blocks cut by the
     * 64-row decode blocks, windows and sinks, prefill */
    {1, 1, 8, 8, 64, 333, 0, {0}, Q2, 32, LAYOUT_CHANNEL, 2, 0},
    {1, 1, 8, 8, 128, 129, 0, {0}, Q2, 64, LAYOUT_CHANNEL, 2, 0},
    {1, 1, 8, 2, 64, 333, 0, {0}, Q2, 32, LAYOUT_CHANNEL, 2, 0},
    {1, 1, 16, 2, 128, 200, 0, {0}, Q2, 32, LAYOUT_CHANNEL, 2, 0},
    {1, 1, 16, 4, 64, 131, 0, {0}, Q2, 16, LAYOUT_CHANNEL, 2, 0},
    {1, 1, 12, 4, 64, 100, 0, {0}, Q2, 32, LAYOUT_CHANNEL, 2, 0},
    {1, 1, 8, 8, 64, 333, 0, {0}, Q8, 32, LAYOUT_CHANNEL, 2, 0},
    {1, 1, 8, 1, 128, 257, 0, {0}, Q8, 32, LAYOUT_CHANNEL, 3, 0},
    {1, 1, 8, 8, 128, 199, 0, {0}, Q4, 64, LAYOUT_CHANNEL, 2, 0},
    {1, 1, 16, 4, 64, 150, 0, {0}, Q4, 32, LAYOUT_CHANNEL, 2, 0},
    {1, 1, 8, 4, 80, 77, 0, {0}, Q2, 16, LAYOUT_CHANNEL, 2, 0},
    {2, 1, 8, 8, 64, 150, 40, {0, 9}, Q4, 16, LAYOUT_CHANNEL, 2, 4},
    {1, 20, 8, 2, 64, 150, 0, {0}, Q2, 32, LAYOUT_CHANNEL, 2, 0},
    {1, 1, 8, 8, 64, 150, 0, {0}, Q2, 32, LAYOUT_MIXED, 2, 0},
};
#define N_TABLE ((int)(sizeof(table) / sizeof(table[0])))

START_TEST(test_table)
{
    run_case_isas(&table[_i], 200 + _i);
}
END_TEST

/* The decode cases again with the L3 taken as 1 byte, so the kernel
 * prefetches every next block (the path of caches past the L3); prefetching
 * must change no output. */
START_TEST(test_table_prefetch)
{
    if (table[_i].n_q != 1)
        return;
    kv_l3_bytes_override(1);
    run_case_isas(&table[_i], 200 + _i);
    kv_l3_bytes_override(0);
}
END_TEST

/* The decode cases again as a model step calls them, its rows said to be
 * evicted (kv_attn_params.evicted: 16-bit rows then run fused at any size);
 * that must change no output either. */
START_TEST(test_table_evicted)
{
    if (table[_i].n_q != 1)
        return;
    fixture_evicted = 1;
    run_case_isas(&table[_i], 200 + _i);
    fixture_evicted = 0;
}
END_TEST

/* A padded query sees nothing: its output is exactly zero. */
START_TEST(test_padded_query_zero)
{
    struct fixture f;
    struct acase c = {3, 10, 4, 2, 64, 10, 0, {0, 4, 10}, F32, 0, LAYOUT_ONE, 2, 0};
    fixture_build(&f, &c, 5);
    size_t no = (size_t)c.batch * c.n_q * c.heads * c.d;
    float *got = malloc(no * sizeof(float));
    size_t wsb = kv_attn_workspace_bytes(&f.p);
    void *ws = kv_alloc(wsb);
    ck_assert(got && ws);
    ck_assert_int_eq(kv_attn(got, f.q, &f.p, &f.view, ws, wsb), KV_OK);
    /* sequence 2 is all padding; sequence 1's queries 0..3 too */
    for (size_t i = 0; i < (size_t)c.n_q * c.heads * c.d; i++)
        ck_assert(got[2 * (size_t)c.n_q * c.heads * c.d + i] == 0.0f);
    for (size_t i = 0; i < 4 * (size_t)c.heads * c.d; i++)
        ck_assert(got[(size_t)c.n_q * c.heads * c.d + i] == 0.0f);
    /* the decode path too */
    f.p.n_q = 1;
    f.p.q_pos0 = 9;
    ck_assert_int_eq(kv_attn(got, f.q, &f.p, &f.view, ws, kv_attn_workspace_bytes(&f.p)), KV_OK);
    for (size_t i = 0; i < (size_t)c.heads * c.d; i++)
        ck_assert(got[2 * (size_t)c.heads * c.d + i] == 0.0f);
    kv_free(ws);
    free(got);
    fixture_free(&f);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* visible_pairs and span_bytes                                             */

START_TEST(test_visible_pairs)
{
    const struct acase *c = &table[_i];
    struct fixture f;
    fixture_build(&f, c, 3);
    /* brute force: every (query, span token) pair through the mask, summed
     * over kv heads and divided by their number (the layouts' heads all
     * see as many keys) */
    int64_t want = 0;
    for (int32_t b = 0; b < c->batch; b++)
        for (int32_t i = 0; i < c->n_q; i++)
            for (int32_t s = 0; s < f.n_spans; s++)
                for (int32_t h = 0; h < c->kv_heads; h++)
                    for (int32_t t = 0; t < f.spans[s].n_tokens; t++)
                        want += naive_visible(&f.view.mask, b, (int64_t)f.p.q_pos0 + i,
                                              span_pos(&f.spans[s], b, h, t));
    ck_assert_int_eq(want % c->kv_heads, 0);
    want /= c->kv_heads;
    ck_assert_int_eq(kv_attn_visible_pairs(&f.p, &f.view), want);
    /* positions beyond the queries and windows at odd places, with and
     * without sinks */
    f.p.q_pos0 += 3;
    for (int32_t sink = 0; sink <= 7; sink += 7) {
        f.view.mask.window = 5;
        f.view.mask.n_sink = sink;
        want = 0;
        for (int32_t b = 0; b < c->batch; b++)
            for (int32_t i = 0; i < c->n_q; i++)
                for (int32_t s = 0; s < f.n_spans; s++)
                    for (int32_t h = 0; h < c->kv_heads; h++)
                        for (int32_t t = 0; t < f.spans[s].n_tokens; t++)
                            want += naive_visible(&f.view.mask, b, (int64_t)f.p.q_pos0 + i,
                                                  span_pos(&f.spans[s], b, h, t));
        ck_assert_int_eq(kv_attn_visible_pairs(&f.p, &f.view), want / c->kv_heads);
    }
    fixture_free(&f);
}
END_TEST

START_TEST(test_span_bytes)
{
    struct acase c = {2, 1, 8, 2, 64, 100, 0, {0, 0}, Q4, 32, LAYOUT_QUANT_F32, 2, 0};
    struct fixture f;
    fixture_build(&f, &c, 1);
    /* 75 int4 tokens (32 code bytes + 2 qparams of 8 bytes per row) and 25
     * f32 tokens (256 bytes per row); K and V; 2 sequences x 2 kv heads */
    size_t want = 2 * 2 * 2 * (75 * (32 + 16) + 25 * 256);
    ck_assert_uint_eq(kv_attn_span_bytes(&f.p, &f.view), want);
    fixture_free(&f);
    /* per-channel keys: 100 tokens = 7 blocks of 16 (d pairs each), int4
     * codes; per-token int4 values (2 pairs a row) */
    struct acase ch = {2, 1, 8, 2, 64, 100, 0, {0, 0}, Q4, 32, LAYOUT_CHANNEL, 2, 0};
    fixture_build(&f, &ch, 1);
    want = 2 * 2 * ((100 * 32 + 7 * 64 * 8) + 100 * (32 + 16));
    ck_assert_uint_eq(kv_attn_span_bytes(&f.p, &f.view), want);
    fixture_free(&f);
    /* one span per page: the same bytes as one span */
    struct acase pg = {2, 1, 8, 2, 64, 100, 0, {0, 0}, Q8, 32, LAYOUT_PAGES, 2, 0};
    fixture_build(&f, &pg, 1);
    ck_assert_int_eq(f.n_spans, 20);
    want = 2 * 2 * 2 * 100 * (64 + 16);
    ck_assert_uint_eq(kv_attn_span_bytes(&f.p, &f.view), want);
    fixture_free(&f);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Rejected inputs                                                          */

START_TEST(test_check_rejects)
{
    struct acase c = {2, 1, 8, 2, 64, 40, 0, {0, 0}, Q8, 32, LAYOUT_QUANT_F32, 2, 0};
    struct fixture f;
    fixture_build(&f, &c, 2);
    struct kv_attn_params p;
    struct kv_span s[2];
    struct kv_view v = {.spans = s, .n_spans = 2};
    ck_assert_int_eq(kv_attn_check(&f.p, &f.view), KV_OK);
#define EXPECT_BAD_P(stmt)                                                     \
    do {                                                                       \
        p = f.p;                                                               \
        stmt;                                                                  \
        ck_assert_int_eq(kv_attn_check(&p, &f.view), KV_ERR_INVALID);          \
    } while (0)
#define EXPECT_BAD_S(stmt)                                                     \
    do {                                                                       \
        memcpy(s, f.spans, sizeof(s));                                         \
        v.mask = f.view.mask;                                                  \
        stmt;                                                                  \
        ck_assert_int_eq(kv_attn_check(&f.p, &v), KV_ERR_INVALID);             \
    } while (0)
    EXPECT_BAD_P(p.n_kv_heads = 3);
    EXPECT_BAD_P(p.n_kv_heads = 0);
    /* params that differ from the shape the view states */
    EXPECT_BAD_P(p.batch = 3);
    EXPECT_BAD_P(p.n_kv_heads = 4);
    EXPECT_BAD_P(p.head_dim = 32);
    EXPECT_BAD_S(v.batch = -1);
    EXPECT_BAD_S(v.n_kv_heads = -1);
    EXPECT_BAD_S(v.head_dim = -1);
    EXPECT_BAD_P(p.batch = 0);
    EXPECT_BAD_P(p.n_q = 0);
    EXPECT_BAD_P(p.head_dim = 0);
    EXPECT_BAD_S(v.mask.window = -1);
    EXPECT_BAD_S(v.mask.n_sink = -1);
    EXPECT_BAD_P(p.n_threads = 0);
    EXPECT_BAD_P(p.q_pos0 = -1);
    EXPECT_BAD_P(p.q_pos0 = INT32_MAX; p.n_q = 2);
    EXPECT_BAD_P(p.scale = NAN);
    EXPECT_BAD_S(s[0].k.group = s[0].v.group = 24); /* does not divide 64 */
    EXPECT_BAD_S(s[0].k.group = s[0].v.group = 0);
    EXPECT_BAD_S(s[0].v.group = 24);                /* V alone */
    static const int32_t badpad[2] = {0, -1};
    EXPECT_BAD_S(v.mask.pad = badpad);
    EXPECT_BAD_S(s[0].k.dtype = KV_DTYPE_COUNT);
    EXPECT_BAD_S(s[0].v.dtype = KV_DTYPE_COUNT);
    EXPECT_BAD_S(s[0].k.data = NULL);
    EXPECT_BAD_S(s[1].v.data = NULL);
    EXPECT_BAD_S(s[0].k.qp = NULL);
    EXPECT_BAD_S(s[0].v.qp = NULL);
    EXPECT_BAD_S(s[0].k.axis = KV_QAXIS_COUNT);
    EXPECT_BAD_S(s[0].n_tokens = -1);
    EXPECT_BAD_S(s[0].pos0 = -5);
    EXPECT_BAD_S(s[1].pos0 = INT32_MAX);
    EXPECT_BAD_S(s[0].page_tokens = -1);
    EXPECT_BAD_S(s[0].page_tokens = 4);            /* paged, but no page table */
    EXPECT_BAD_S(s[1].k.row_stride = s[1].v.row_stride = 2);          /* f32: misaligned, overlapping */
    EXPECT_BAD_S(s[1].k.row_stride = s[1].v.row_stride = 64 * 4 - 4); /* rows overlap */
    EXPECT_BAD_S(s[1].v.row_stride = 64 * 4 - 4);                     /* V alone */
    EXPECT_BAD_S(s[0].k.row_stride = s[0].v.row_stride = 63);         /* rows overlap */
    EXPECT_BAD_S(s[0].k.qp_row_stride = s[0].v.qp_row_stride = 8);    /* 2 groups need 16 bytes */
    EXPECT_BAD_S(s[0].k.qp_row_stride = s[0].v.qp_row_stride = 17);   /* misaligned qparams */
    /* a mass buffer shorter than (batch, n_heads, n_keys) */
    float mbuf[2 * 8 * 40];
    EXPECT_BAD_P(p.mass = mbuf; p.mass_len = 2 * 8 * 40 - 1);
    p = f.p;
    p.mass = mbuf;
    p.mass_len = 2 * 8 * 40;
    ck_assert_int_eq(kv_attn_check(&p, &f.view), KV_OK);
    ck_assert_int_eq(kv_attn_check(NULL, &f.view), KV_ERR_INVALID);
    ck_assert_int_eq(kv_attn_check(&f.p, NULL), KV_ERR_INVALID);
    v = (struct kv_view){.spans = NULL, .n_spans = 2};
    ck_assert_int_eq(kv_attn_check(&f.p, &v), KV_ERR_INVALID);
    v = (struct kv_view){.spans = f.spans, .n_spans = -1};
    ck_assert_int_eq(kv_attn_check(&f.p, &v), KV_ERR_INVALID);
    v = (struct kv_view){.spans = NULL, .n_spans = 0};
    ck_assert_int_eq(kv_attn_check(&f.p, &v), KV_OK); /* no keys at all */
    /* int4 needs an even group */
    p = f.p;
    p.head_dim = 63;
    memcpy(s, f.spans, sizeof(s));
    s[0].k.dtype = KV_DTYPE_Q4;
    s[0].k.group = 21;
    v = (struct kv_view){.spans = s, .n_spans = 1};
    ck_assert_int_eq(kv_attn_check(&p, &v), KV_ERR_INVALID);

    /* kv_attn itself: a workspace too small, misaligned, or missing */
    size_t wsb = kv_attn_workspace_bytes(&f.p);
    char *ws = kv_alloc(wsb + 64);
    float out[2 * 8 * 64];
    ck_assert(ws != NULL);
    ck_assert_int_eq(kv_attn(out, f.q, &f.p, &f.view, ws, wsb - 1), KV_ERR_INVALID);
    ck_assert_int_eq(kv_attn(out, f.q, &f.p, &f.view, ws + 4, wsb), KV_ERR_INVALID);
    ck_assert_int_eq(kv_attn(out, f.q, &f.p, &f.view, NULL, wsb), KV_ERR_INVALID);
    ck_assert_int_eq(kv_attn(NULL, f.q, &f.p, &f.view, ws, wsb), KV_ERR_INVALID);
    ck_assert_int_eq(kv_attn(out, f.q, &f.p, &f.view, ws, wsb), KV_OK);
    p = f.p;
    p.n_kv_heads = 3;
    ck_assert_int_eq(kv_attn(out, f.q, &p, &f.view, ws, wsb), KV_ERR_INVALID);
    ck_assert_int_eq(kv_attn_ref(out, f.q, &p, &f.view), KV_ERR_INVALID);
    kv_free(ws);
    fixture_free(&f);

    /* paged spans: a NULL page, a per-channel block straddling pages */
    struct acase pc = {1, 1, 4, 2, 64, 23, 0, {0}, Q8, 32, LAYOUT_PAGED, 2, 0};
    fixture_build(&f, &pc, 2);
    ck_assert_int_eq(kv_attn_check(&f.p, &f.view), KV_OK);
    const void *saved = f.pages[2];
    f.pages[2] = NULL;
    ck_assert_int_eq(kv_attn_check(&f.p, &f.view), KV_ERR_INVALID);
    f.pages[2] = saved;
    f.spans[0].k.axis = KV_QAXIS_CHANNEL;
    f.spans[0].k.group = 2; /* 2 does not divide the 5-token pages */
    ck_assert_int_eq(kv_attn_check(&f.p, &f.view), KV_ERR_INVALID);
    fixture_free(&f);

    /* a table per sequence: a NULL page of the last sequence's table, a
     * table reaching one entry too far (into the NULLs between tables), a
     * stride whose last table is no address */
    struct acase sq = {3, 1, 4, 2, 64, 23, 0, {0, 0, 0}, Q8, 32, LAYOUT_SEQ_PAGED, 2, 0};
    fixture_build(&f, &sq, 2);
    ck_assert_int_eq(kv_attn_check(&f.p, &f.view), KV_OK);
    const size_t last = 2 * (size_t)f.spans[0].k.table_stride + 3;
    saved = f.pages[last];
    f.pages[last] = NULL;
    ck_assert_int_eq(kv_attn_check(&f.p, &f.view), KV_ERR_INVALID);
    f.pages[last] = saved;
    f.spans[0].n_tokens = 5 * 5 + 1; /* 6 pages: the first NULL entry */
    ck_assert_int_eq(kv_attn_check(&f.p, &f.view), KV_ERR_INVALID);
    f.spans[0].n_tokens = 23;
    f.spans[0].v.table_stride = SIZE_MAX / 4;
    ck_assert_int_eq(kv_attn_check(&f.p, &f.view), KV_ERR_INVALID);
    fixture_free(&f);
}
END_TEST

/*
 * Params asking for more sequences and kv heads than the cache behind the
 * view holds: a view from kv_cache_view states the cache's shape, so
 * kv_attn, kv_attn_ref, the check and the counts refuse the call instead of
 * reading past the storage (before views stated it, the call returned
 * KV_OK having read past the end of the cache's buffer).
 */
START_TEST(test_view_shape_rejects)
{
    enum { B = 2, KVH = 2, G = 2, D = 16, T = 5 };
    const struct kv_strategy_ops *ops = kv_strategy_find("dynamic");
    ck_assert_ptr_nonnull(ops);
    const struct kv_cache_config cc = {.n_layers = 1, .batch = B, .n_kv_heads = KVH,
                                       .head_dim = D};
    struct kv_cache *c;
    ck_assert_int_eq(kv_cache_create(&c, ops, &cc, NULL), KV_OK);
    float kv[B * T * KVH * D];
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        kv[i] = (float)rnd(-1.0, 1.0);
    ck_assert_int_eq(kv_cache_update(c, 0, kv, kv, T, 0), KV_OK);
    struct kv_view v;
    ck_assert_int_eq(kv_cache_view(c, 0, &v), KV_OK);
    /* q and out sized for the largest call below: only the cache is short */
    enum { QN = (B + 1) * (KVH + 1) * G * D };
    float q[QN], out[QN], ref[QN];
    for (int i = 0; i < QN; i++)
        q[i] = (float)rnd(-1.0, 1.0);
    const struct kv_attn_params good = {.batch = B, .n_q = 1, .n_heads = KVH * G,
                                        .n_kv_heads = KVH, .head_dim = D, .q_pos0 = T - 1,
                                        .scale = 0.25f, .n_threads = 1};
    struct kv_attn_params bad[3] = {good, good, good};
    bad[0].batch = B + 1;
    bad[1].n_kv_heads = KVH + 1;
    bad[1].n_heads = (KVH + 1) * G;
    bad[2].batch = B + 1;
    bad[2].n_kv_heads = KVH + 1;
    bad[2].n_heads = (KVH + 1) * G;
    size_t wsb = kv_attn_workspace_bytes(&bad[2]);
    void *ws = kv_alloc(wsb);
    ck_assert_ptr_nonnull(ws);
    ck_assert_uint_ge(wsb, kv_attn_workspace_bytes(&good));
    ck_assert_int_eq(kv_attn(out, q, &good, &v, ws, wsb), KV_OK);
    ck_assert_int_eq(kv_attn_ref(ref, q, &good, &v), KV_OK);
    for (int i = 0; i < 3; i++) {
        ck_assert_uint_ge(wsb, kv_attn_workspace_bytes(&bad[i]));
        ck_assert_int_eq(kv_attn_check(&bad[i], &v), KV_ERR_INVALID);
        ck_assert_int_eq(kv_attn(out, q, &bad[i], &v, ws, wsb), KV_ERR_INVALID);
        ck_assert_int_eq(kv_attn_ref(ref, q, &bad[i], &v), KV_ERR_INVALID);
        ck_assert_int_eq(kv_attn_visible_pairs(&bad[i], &v), 0);
        ck_assert_uint_eq(kv_attn_span_bytes(&bad[i], &v), 0);
    }
    /* a shorter row than the cache's is in bounds but not its data */
    struct kv_attn_params shorter = good;
    shorter.head_dim = D / 2;
    ck_assert_int_eq(kv_attn(out, q, &shorter, &v, ws, wsb), KV_ERR_INVALID);
    kv_free(ws);
    kv_cache_destroy(c);
}
END_TEST

/*
 * The integer forms of a query (the decode kernel's integer scores, int8
 * and int16): every element within half a step (max|q| of its group /
 * (2 qmax)) of the query, a whole number of steps, the group's largest
 * element kept, a zero group zero; the float dtypes never use one.
 */
/* Which bound kernels ask for their rows ahead (kv_rows_ahead): only where
 * the job's rows come from DRAM (from the L3 the prefetches cost more than
 * they hide), only in the AVX-512 kernels, and only for the formats whose
 * DRAM time exceeds their arithmetic there (int2 never); a side read
 * through a tile never. */
START_TEST(test_rows_ahead_policy)
{
    static const struct {
        enum kv_dtype dt;
        kv_rows_bind_fn bind;
        int min_g, runtime; /* runtime: chosen by kv_isa(), else by the build */
    } f[] = {{KV_DTYPE_F32, kv_rows_bind_f32, 1, 1}, {KV_DTYPE_F16, kv_rows_bind_f16, 1, 1},
             {KV_DTYPE_BF16, kv_rows_bind_bf16, 1, 1}, {KV_DTYPE_Q8, kv_rows_bind_q8, 1, 0},
             {KV_DTYPE_Q4, kv_rows_bind_q4, 1, 0}, {KV_DTYPE_Q2, kv_rows_bind_q2, 0, 0}};
    enum { D = 128, GMAX = 8 };
    static float qs[GMAX * D], qsum[GMAX * D], qx[4 * GMAX * D];
    int avx512_build = 0;
#ifdef __AVX512F__
    avx512_build = 1;
#endif
    int seen = 0;
    const enum kv_isa top = kv_isa();
    for (int lim = 0; lim < 2; lim++) {
        kv_isa_limit(lim == 0 ? KV_ISA_COUNT : KV_ISA_AVX2);
        const int avx512_run = kv_isa() >= KV_ISA_AVX512;
        for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
            for (int g = 1; g <= 4; g *= 4)
                for (int fd = 0; fd < 2; fd++)
                    for (int is_v = 0; is_v < 2; is_v++) {
                        const int q = kv_type_traits[f[i].dt].has_qparams;
                        const struct kv_rows_side side = {
                            .dt = f[i].dt, .group = q ? 32 : 0, .ng = q ? D / 32 : 1,
                            .stride = 2 * kv_dtype_row_bytes(f[i].dt, D),
                            .qp_stride = q ? (size_t)(D / 32) * sizeof(struct kv_qparams) : 0,
                            .bytes = kv_dtype_row_bytes(f[i].dt, D)};
                        struct kv_dec_job J = {.g = g, .d = D, .qs = qs, .qsum = qsum, .qx = qx,
                                               .from_dram = fd, .k = side, .v = side};
                        f[i].bind(&J, is_v);
                        const int tiled = is_v ? J.v_tile != NULL : J.k_tile != NULL;
                        const int level = f[i].runtime ? avx512_run : avx512_build;
                        const int want = fd && level && f[i].min_g > 0 && g >= f[i].min_g && !tiled;
                        const int32_t got = is_v ? J.v.ahead : J.k.ahead;
                        ck_assert_msg(got == (want ? KV_ROWS_AHEAD : 0),
                                      "dtype %d g %d from_dram %d %s isa %d: ahead %d, want %d",
                                      (int)f[i].dt, g, fd, is_v ? "V" : "K", (int)kv_isa(),
                                      (int)got, want ? KV_ROWS_AHEAD : 0);
                        seen += want;
                    }
    }
    kv_isa_limit(KV_ISA_COUNT);
    if (top >= KV_ISA_AVX512)
        ck_assert_int_gt(seen, 0); /* the policy is not "never" where it can apply */
}
END_TEST

START_TEST(test_query_int_form)
{
    const int32_t d = 128, groups[] = {16, 32, 64, 128};
    const int bits[] = {8, 16};
    float q[128], out[128];
    rng_state = 99;
    for (size_t bi = 0; bi < 2; bi++)
        for (size_t gi = 0; gi < sizeof groups / sizeof groups[0]; gi++) {
            const int32_t group = groups[gi];
            const double qmax = bits[bi] == 8 ? 127.0 : 32767.0;
            for (int32_t e = 0; e < d; e++)
                q[e] = (float)rnd(-3, 3);
            for (int32_t e = 0; e < group; e++)
                q[e] = 0.0f; /* group 0 all zero */
            kv_rows_query_int(out, q, d, group, bits[bi]);
            for (int32_t g0 = 0; g0 < d; g0 += group) {
                float amax = 0.0f;
                for (int32_t e = g0; e < g0 + group; e++)
                    amax = fmaxf(amax, fabsf(q[e]));
                const double step = amax / qmax;
                for (int32_t e = g0; e < g0 + group; e++) {
                    if (amax == 0.0f) {
                        ck_assert(out[e] == 0.0f);
                        continue;
                    }
                    ck_assert_msg(fabs((double)out[e] - q[e]) <= step / 2 + 1e-6 * amax,
                                  "bits %d group %d e %d: %g vs %g", bits[bi], group, e,
                                  out[e], q[e]);
                    const double k = out[e] / step;
                    ck_assert(fabs(k - nearbyint(k)) < 1e-2 && fabs(k) <= qmax + 1e-2);
                    if (fabsf(q[e]) == amax)
                        ck_assert(fabsf(out[e] - q[e]) <= 1e-6f * amax);
                }
            }
        }
    ck_assert_int_eq(kv_rows_int_query(KV_DTYPE_F32, 64, 32, 4), 0);
    ck_assert_int_eq(kv_rows_int_query(KV_DTYPE_F16, 64, 32, 4), 0);
    ck_assert_int_eq(kv_rows_int_query(KV_DTYPE_BF16, 64, 32, 4), 0);
}
END_TEST

/*
 * Every bound integer score kernel against the scalar truth, row by row:
 * int8, int4 and int2 keys at head_dim 64, 128 and 256, groups of 16, 32
 * and 64, 1 to 8 heads a kv head, whole blocks and blocks with rows left
 * over, qparams packed and padded (a call may read a block of them at
 * once), on the query form kv_rows_int_query names (the f32 query where it
 * names none). A side the bind serves through a tile is the f32 kernels'.
 */
START_TEST(test_rows_int_scores)
{
    static const struct {
        enum kv_dtype dt;
        kv_rows_bind_fn bind;
    } f[] = {{KV_DTYPE_Q8, kv_rows_bind_q8}, {KV_DTYPE_Q4, kv_rows_bind_q4},
             {KV_DTYPE_Q2, kv_rows_bind_q2}};
    enum { DMAX = 256, GMAX = 8, NB = DEC_KB };
    static const int32_t ds[] = {32, 64, 128, 256}, groups[] = {16, 32, 64};
    static const int32_t gs[] = {1, 2, 3, 4, 8};
    static float qs[GMAX * DMAX], qt[GMAX * DMAX], qsum[GMAX * DMAX];
    static float kd[NB * DMAX], sc[GMAX * DEC_KB];
    static uint8_t codes[NB * 2 * DMAX];
    static struct kv_qparams qp[NB * (DMAX / 16 + 2)];
    int checked = 0;
    rng_state = 5;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        for (size_t di = 0; di < sizeof ds / sizeof ds[0]; di++)
            for (size_t gri = 0; gri < sizeof groups / sizeof groups[0]; gri++)
                for (size_t gi = 0; gi < sizeof gs / sizeof gs[0]; gi++)
                    for (int pad = 0; pad < 2; pad++) {
                        const int32_t d = ds[di], group = groups[gri], g = gs[gi], ng = d / group;
                        if (group > d)
                            continue;
                        const size_t rb = kv_dtype_row_bytes(f[i].dt, d), st = rb + 16 * pad;
                        const int32_t qpr = ng + 2 * pad; /* qparams a row, padded */
                        for (int32_t j = 0; j < NB; j++) {
                            for (int32_t e = 0; e < d; e++)
                                kd[j * d + e] = (float)rnd(-1, 1);
                            kv_quantize_row(codes + j * st, qp + j * qpr, kd + j * d, f[i].dt,
                                            d, group);
                            kv_dequantize_row(kd + j * d, codes + j * st, qp + j * qpr, f[i].dt,
                                              d, group);
                        }
                        for (int32_t e = 0; e < g * d; e++)
                            qs[e] = (float)rnd(-1, 1);
                        const int bits = kv_rows_int_query(f[i].dt, d, group, g);
                        for (int32_t h = 0; h < g; h++) {
                            for (int32_t c = 0; c < ng; c++) {
                                float s = 0.0f;
                                for (int32_t e = c * group; e < (c + 1) * group; e++)
                                    s += qs[h * d + e];
                                qsum[h * ng + c] = s;
                            }
                            if (bits)
                                kv_rows_query_int(qt + h * d, qs + h * d, d, group, bits);
                            else
                                memcpy(qt + h * d, qs + h * d, (size_t)d * sizeof(float));
                        }
                        const struct kv_rows_side side = {
                            .dt = f[i].dt, .group = group, .ng = ng, .stride = st,
                            .qp_stride = (size_t)qpr * sizeof(struct kv_qparams), .bytes = rb};
                        /* the scratch the decode driver gives: 2 g d floats,
                         * exactly, so that a form past it is an error under
                         * AddressSanitizer */
                        float *qx = malloc(2 * (size_t)g * d * sizeof(float));
                        ck_assert(qx != NULL);
                        struct kv_dec_job J = {.g = g, .d = d, .qs = qs, .qsum = qsum, .qx = qx,
                                               .k = side, .v = side};
                        f[i].bind(&J, 0);
                        if (J.k_tile != NULL) {
                            free(qx);
                            continue;
                        }
                        ck_assert(J.scores != NULL);
                        for (int32_t nb = NB; nb >= NB - 3; nb -= 3) {
                            for (size_t u = 0; u < sizeof sc / sizeof sc[0]; u++)
                                sc[u] = NAN;
                            J.scores(sc, &J, &J.k, (const char *)codes, (const char *)qp, nb);
                            for (int32_t h = 0; h < g; h++)
                                for (int32_t j = 0; j < nb; j++) {
                                    double want = 0.0, mag = 0.0;
                                    for (int32_t e = 0; e < d; e++) {
                                        want += (double)qt[h * d + e] * kd[j * d + e];
                                        mag += fabs((double)qt[h * d + e] * kd[j * d + e]);
                                    }
                                    const double got = sc[h * DEC_KB + j];
                                    ck_assert_msg(fabs(got - want) <= 1e-5 * mag + 1e-6,
                                                  "dtype %d d %d group %d g %d pad %d nb %d: "
                                                  "score[%d][%d] %.7g, want %.7g (bits %d)",
                                                  (int)f[i].dt, d, group, g, pad, nb, h, j, got,
                                                  want, bits);
                                    checked++;
                                }
                        }
                        free(qx);
                    }
    ck_assert_int_gt(checked, 0);
}
END_TEST

/* The workspace depends on the call's shape, never on the number of keys. */
START_TEST(test_workspace_independent_of_keys)
{
    struct kv_attn_params p = {.batch = 2, .n_q = 1, .n_heads = 8, .n_kv_heads = 2,
                               .head_dim = 64, .scale = 0.125f, .n_threads = 2};
    size_t a = kv_attn_workspace_bytes(&p);
    p.q_pos0 = 100000;
    ck_assert_uint_eq(kv_attn_workspace_bytes(&p), a);
    ck_assert_uint_gt(a, 0);
    /* absurd shapes report SIZE_MAX (an allocation that fails), never a
     * wrapped small size */
    p.batch = INT32_MAX;
    p.n_heads = 1 << 30;
    p.n_kv_heads = 1;
    p.head_dim = 1 << 20;
    ck_assert_uint_eq(kv_attn_workspace_bytes(&p), SIZE_MAX);
    p.batch = 0;
    ck_assert_uint_eq(kv_attn_workspace_bytes(&p), 0);
}
END_TEST

/*
 * kv_attn_many: calls over caches of several strategies and lengths (one
 * or two sequences each, as a serving iteration has them) give, as one
 * team job, exactly the bytes the calls give one by one; a set it cannot
 * join (a prefill call, a mass output, too little workspace) runs one by
 * one, with the same bytes; a bad call refuses the set before anything is
 * written.
 */
START_TEST(test_attn_many)
{
    enum { N = 7, KVH = 2, G = 2, D = 32, TMAX = 150, QMAX = 2 * KVH * G * D * 2 };
    static const char *const names[N] = {"dynamic", "paged", "quantized", "static",
                                         "sliding", "paged", "dynamic"};
    const int32_t len[N] = {150, 37, 96, 1, 70, 128, 65}, bat[N] = {1, 2, 1, 1, 2, 1, 1};
    struct kv_cache *c[N];
    struct kv_view v[N];
    struct kv_attn_params p[N];
    float *q[N], *out[N], *want[N];
    for (int i = 0; i < N; i++) {
        const struct kv_strategy_ops *ops = kv_strategy_find(names[i]);
        ck_assert_ptr_nonnull(ops);
        const struct kv_cache_config cc = {.n_layers = 1, .batch = bat[i], .n_kv_heads = KVH,
                                           .head_dim = D, .max_len = TMAX};
        ck_assert_int_eq(kv_cache_create(&c[i], ops, &cc, NULL), KV_OK);
        float *kv = malloc((size_t)bat[i] * len[i] * KVH * D * sizeof(float));
        ck_assert_ptr_nonnull(kv);
        for (size_t e = 0; e < (size_t)bat[i] * len[i] * KVH * D; e++)
            kv[e] = (float)rnd(-1.0, 1.0);
        ck_assert_int_eq(kv_cache_update(c[i], 0, kv, kv, len[i], 0), KV_OK);
        free(kv);
        ck_assert_int_eq(kv_cache_view(c[i], 0, &v[i]), KV_OK);
        p[i] = (struct kv_attn_params){.batch = bat[i], .n_q = 1, .n_heads = KVH * G,
                                       .n_kv_heads = KVH, .head_dim = D,
                                       .q_pos0 = len[i] - 1, .scale = 0.2f, .n_threads = 2};
        q[i] = malloc(QMAX * sizeof(float));
        out[i] = malloc(QMAX * sizeof(float));
        want[i] = malloc(QMAX * sizeof(float));
        ck_assert(q[i] && out[i] && want[i]);
        for (int e = 0; e < QMAX; e++)
            q[i][e] = (float)rnd(-1.0, 1.0);
    }
    const size_t one = kv_attn_workspace_bytes(&p[1]), many = kv_attn_many_workspace_bytes(p, N);
    ck_assert_uint_gt(many, 0);
    ck_assert_uint_ge(many, one);
    void *ws = kv_alloc(many);
    ck_assert_ptr_nonnull(ws);
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(kv_attn(want[i], q[i], &p[i], &v[i], ws, many), KV_OK);
    const size_t bytes = (size_t)KVH * G * D * sizeof(float); /* per sequence */
    /* one job: every set of the first n calls */
    for (int n = 1; n <= N; n++) {
        for (int i = 0; i < N; i++)
            memset(out[i], 0xff, QMAX * sizeof(float));
        ck_assert_int_eq(kv_attn_many(out, (const float *const *)q, p, v, n, ws, many), KV_OK);
        for (int i = 0; i < n; i++)
            ck_assert_msg(memcmp(out[i], want[i], bat[i] * bytes) == 0, "n %d: call %d (%s)", n,
                          i, names[i]);
    }
    /* too little workspace for one job, enough for each call: one by one */
    ck_assert_int_eq(kv_attn_many(out, (const float *const *)q, p, v, N, ws, one), KV_OK);
    for (int i = 0; i < N; i++)
        ck_assert(memcmp(out[i], want[i], bat[i] * bytes) == 0);
    /* a prefill call in the set: not joinable, one by one */
    struct kv_attn_params pf[N];
    memcpy(pf, p, sizeof pf);
    pf[0].n_q = 2, pf[0].q_pos0 = len[0] - 2;
    ck_assert_uint_eq(kv_attn_many_workspace_bytes(pf, N), 0);
    void *big = kv_alloc(kv_attn_workspace_bytes(&pf[0]) > many ? kv_attn_workspace_bytes(&pf[0])
                                                                 : many);
    ck_assert_ptr_nonnull(big);
    float *w0 = malloc(QMAX * sizeof(float));
    ck_assert_ptr_nonnull(w0);
    ck_assert_int_eq(kv_attn(w0, q[0], &pf[0], &v[0], big, kv_attn_workspace_bytes(&pf[0])),
                     KV_OK);
    const size_t wsz = kv_attn_workspace_bytes(&pf[0]) > many ? kv_attn_workspace_bytes(&pf[0])
                                                              : many;
    ck_assert_int_eq(kv_attn_many(out, (const float *const *)q, pf, v, N, big, wsz), KV_OK);
    ck_assert(memcmp(out[0], w0, 2 * bytes) == 0);
    for (int i = 1; i < N; i++)
        ck_assert(memcmp(out[i], want[i], bat[i] * bytes) == 0);
    /* refusals: the count, and a bad call anywhere, before anything is written */
    ck_assert_int_eq(kv_attn_many(out, (const float *const *)q, p, v, 0, ws, many),
                     KV_ERR_INVALID);
    ck_assert_int_eq(kv_attn_many(out, (const float *const *)q, p, v, KV_ATTN_MANY_MAX + 1, ws,
                                  many),
                     KV_ERR_INVALID);
    struct kv_attn_params bad[N];
    memcpy(bad, p, sizeof bad);
    bad[N - 1].batch = 3; /* more sequences than its cache */
    for (int i = 0; i < N; i++)
        memset(out[i], 0xff, QMAX * sizeof(float));
    ck_assert_int_eq(kv_attn_many(out, (const float *const *)q, bad, v, N, ws, many),
                     KV_ERR_INVALID);
    for (int i = 0; i < N; i++)
        for (int e = 0; e < QMAX; e++)
            ck_assert_msg(isnan(out[i][e]), "call %d written", i);
    free(w0);
    kv_free(big);
    kv_free(ws);
    for (int i = 0; i < N; i++) {
        free(q[i]);
        free(out[i]);
        free(want[i]);
        kv_cache_destroy(c[i]);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */

static Suite *attention_suite(void)
{
    Suite *s = suite_create("attention");
    TCase *tc = tcase_create("shapes");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_shapes_decode, 0, N_SHAPES);
    tcase_add_loop_test(tc, test_shapes_prefill, 0, N_SHAPES);
    tcase_add_loop_test(tc, test_shapes_scatter, 0, 2 * N_SHAPES);
    tcase_add_loop_test(tc, test_shapes_half, 0, 4 * N_SHAPES);
    tcase_add_loop_test(tc, test_shapes_q2, 0, 4 * N_SHAPES);
    suite_add_tcase(s, tc);
    tc = tcase_create("table");
    tcase_set_timeout(tc, 300); /* twice over every case (the mass), under ASan too */
    tcase_add_loop_test(tc, test_table, 0, N_TABLE);
    tcase_add_loop_test(tc, test_table_prefetch, 0, N_TABLE);
    tcase_add_loop_test(tc, test_table_evicted, 0, N_TABLE);
    tcase_add_test(tc, test_padded_query_zero);
    suite_add_tcase(s, tc);
    tc = tcase_create("counts");
    tcase_add_loop_test(tc, test_visible_pairs, 0, N_TABLE);
    tcase_add_test(tc, test_span_bytes);
    tcase_add_test(tc, test_check_rejects);
    tcase_add_test(tc, test_view_shape_rejects);
    tcase_add_test(tc, test_workspace_independent_of_keys);
    tcase_add_test(tc, test_query_int_form);
    tcase_add_test(tc, test_rows_ahead_policy);
    tcase_add_test(tc, test_rows_int_scores);
    tcase_add_test(tc, test_attn_many);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(attention_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed;
}
