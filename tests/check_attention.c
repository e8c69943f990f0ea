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
 * given out of order, a quantized span plus an f32 residual, all quantized),
 * so the span addressing, the masking and the quantized paths are all
 * checked against the same dense truth.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/kv_attention.h"
#include "../kernels/kv_quant.h"

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
};

struct acase {
    int32_t batch, n_q, heads, kv_heads, d, T, window;
    int32_t pad[3];
    enum kv_dtype dt; /* for the quantized layouts */
    int32_t group;
    enum layout layout;
    int32_t threads;
};

/* Everything one case builds; freed by fixture_free. */
struct fixture {
    struct acase c;
    struct kv_attn_params p;
    struct kv_span spans[2];
    int32_t n_spans;
    float *kd, *vd;       /* dense truth (batch, kv_heads, T, d) */
    float *q;             /* (batch, n_q, heads, d) */
    void *kbuf, *vbuf;    /* span storage */
    void *kbuf2, *vbuf2;  /* second span's storage (f32 residual) */
    struct kv_qparams *kqp, *vqp;
    double vmax;
};

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
    int32_t n = t_to - t_from, ng = c->d / c->group;
    size_t rb = kv_dtype_row_bytes(c->dt, c->d);
    for (int32_t b = 0; b < c->batch; b++)
        for (int32_t h = 0; h < c->kv_heads; h++)
            for (int32_t t = 0; t < n; t++) {
                size_t r = ((size_t)b * c->kv_heads + h) * n + t;
                float *kr = f->kd + dense_at(c, b, h, t_from + t);
                float *vr = f->vd + dense_at(c, b, h, t_from + t);
                kv_quantize_row(kc + r * rb, kqp + r * ng, kr, c->dt, c->d, c->group);
                kv_quantize_row(vc + r * rb, vqp + r * ng, vr, c->dt, c->d, c->group);
                kv_dequantize_row(kr, kc + r * rb, kqp + r * ng, c->dt, c->d, c->group);
                kv_dequantize_row(vr, vc + r * rb, vqp + r * ng, c->dt, c->d, c->group);
            }
}

static void quant_span(struct kv_span *s, const struct acase *c, const void *k, const void *v,
                       const struct kv_qparams *kqp, const struct kv_qparams *vqp,
                       int32_t pos0, int32_t n)
{
    size_t rb = kv_dtype_row_bytes(c->dt, c->d), qb = (size_t)(c->d / c->group) * 8;
    *s = (struct kv_span){.dtype = c->dt, .k = k, .v = v, .k_qp = kqp, .v_qp = vqp,
                          .n_tokens = n, .pos0 = pos0, .row_stride = rb,
                          .head_stride = rb * n, .seq_stride = rb * n * c->kv_heads,
                          .qp_row_stride = qb, .qp_head_stride = qb * n,
                          .qp_seq_stride = qb * n * c->kv_heads};
}

static void f32_span(struct kv_span *s, const struct acase *c, const float *k, const float *v,
                     int32_t pos0, int32_t n, int32_t cap)
{
    size_t rb = (size_t)c->d * sizeof(float);
    *s = (struct kv_span){.dtype = KV_DTYPE_F32, .k = k, .v = v, .n_tokens = n, .pos0 = pos0,
                          .row_stride = rb, .head_stride = rb * cap,
                          .seq_stride = rb * cap * c->kv_heads};
}

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
    ck_assert(f->kd && f->vd && f->q);
    for (size_t i = 0; i < nd; i++) {
        f->kd[i] = (float)rnd(-1, 1);
        f->vd[i] = (float)rnd(-1, 1);
    }
    for (size_t i = 0; i < nq; i++)
        f->q[i] = (float)rnd(-4, 4);

    const int32_t T = c->T, d = c->d;
    if (c->layout == LAYOUT_ONE || c->layout == LAYOUT_RING || c->layout == LAYOUT_TOKEN) {
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
            f->spans[0] = (struct kv_span){.dtype = KV_DTYPE_F32, .k = kb, .v = vb,
                                           .n_tokens = T, .pos0 = 0,
                                           .row_stride = rb * c->kv_heads, .head_stride = rb,
                                           .seq_stride = rb * c->kv_heads * T};
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
        size_t rb = kv_dtype_row_bytes(c->dt, d), ng = (size_t)(d / c->group);
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
                                   .group = c->group, .q_pos0 = T - c->n_q,
                                   .window = c->window, .pad = c->batch > 1 || c->pad[0] ? f->c.pad : NULL,
                                   .scale = 1.0f / sqrtf((float)d), .n_threads = c->threads};
}

static void fixture_free(struct fixture *f)
{
    free(f->kd);
    free(f->vd);
    free(f->q);
    free(f->kbuf);
    free(f->vbuf);
    free(f->kbuf2);
    free(f->vbuf2);
    free(f->kqp);
    free(f->vqp);
}

/* ------------------------------------------------------------------------ */
/* The naive reference                                                      */

static int naive_visible(const struct kv_attn_params *p, int32_t b, int64_t qpos, int64_t kpos)
{
    if (kpos > qpos)
        return 0;
    if (p->window > 0 && kpos <= qpos - p->window)
        return 0;
    if (p->pad != NULL && kpos < p->pad[b])
        return 0;
    return 1;
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
                    if (!naive_visible(p, b, qpos, t))
                        continue;
                    const float *k = f->kd + dense_at(c, b, h, t);
                    double s = 0.0;
                    for (int32_t e = 0; e < d; e++)
                        s += (double)q[e] * k[e];
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
                         "(B=%d nq=%d H=%d Hkv=%d d=%d T=%d win=%d layout=%d dt=%d group=%d thr=%d)",
                         idx, who, r / c->heads / c->n_q, r / c->heads % c->n_q, r % c->heads, e,
                         got[i], want[i], err, tol, c->batch, c->n_q, c->heads, c->kv_heads, c->d,
                         c->T, c->window, (int)c->layout, (int)c->dt, c->group, c->threads);
        }
    }
}

/* Builds the case, runs kv_attn and kv_attn_ref, compares both with naive. */
static void run_case(const struct acase *c, int idx)
{
    struct fixture f;
    fixture_build(&f, c, (uint64_t)idx + 17);
    ck_assert_int_eq(kv_attn_check(&f.p, f.spans, f.n_spans), KV_OK);
    size_t no = (size_t)c->batch * c->n_q * c->heads * c->d;
    double *want = malloc(no * sizeof(double));
    float *got = malloc(no * sizeof(float));
    ck_assert(want && got);
    naive_attention(want, &f);

    size_t wsb = kv_attn_workspace_bytes(&f.p);
    void *ws = kv_alloc(wsb);
    ck_assert(ws != NULL);
    for (size_t i = 0; i < no; i++)
        got[i] = NAN; /* every output must be written */
    kv_alloc_fail_at(0, 0);
    ck_assert_int_eq(kv_attn(got, f.q, &f.p, f.spans, f.n_spans, ws, wsb), KV_OK);
    ck_assert_int_eq(kv_alloc_count(), 0); /* the kernel never allocates */
    compare(got, want, &f, "kv_attn", idx);

    for (size_t i = 0; i < no; i++)
        got[i] = NAN;
    ck_assert_int_eq(kv_attn_ref(got, f.q, &f.p, f.spans, f.n_spans), KV_OK);
    compare(got, want, &f, "kv_attn_ref", idx);

    kv_free(ws);
    free(want);
    free(got);
    fixture_free(&f);
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

START_TEST(test_shapes_decode)
{
    struct acase c = shape_case(_i, 0);
    run_case(&c, _i);
}
END_TEST

START_TEST(test_shapes_prefill)
{
    struct acase c = shape_case(_i, 1);
    run_case(&c, 100 + _i);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Masks, layouts, dtypes, split-K: a table                                 */

#define F32 KV_DTYPE_F32
#define Q8 KV_DTYPE_Q8
#define Q4 KV_DTYPE_Q4
static const struct acase table[] = {
    /* sliding windows: 1, small, == T, > T; decode and prefill */
    {1, 1, 8, 2, 64, 33, 1, {0}, F32, 0, LAYOUT_ONE, 2},
    {1, 33, 8, 2, 64, 33, 1, {0}, F32, 0, LAYOUT_ONE, 2},
    {1, 1, 8, 8, 64, 1000, 16, {0}, F32, 0, LAYOUT_ONE, 2},
    {1, 40, 8, 8, 64, 1000, 16, {0}, F32, 0, LAYOUT_ONE, 2},
    {1, 40, 4, 1, 80, 1000, 100, {0}, F32, 0, LAYOUT_ONE, 2},
    {1, 1, 8, 4, 128, 33, 33, {0}, F32, 0, LAYOUT_ONE, 2},
    {1, 33, 8, 4, 128, 33, 33, {0}, F32, 0, LAYOUT_ONE, 2},
    {1, 1, 8, 4, 64, 33, 50, {0}, F32, 0, LAYOUT_ONE, 2},
    {1, 33, 8, 4, 64, 33, 50, {0}, F32, 0, LAYOUT_ONE, 2},
    /* left padding, batch of 3 sequences of different lengths */
    {3, 1, 8, 2, 64, 33, 0, {0, 5, 20}, F32, 0, LAYOUT_ONE, 2},
    {3, 33, 8, 2, 64, 33, 0, {0, 5, 20}, F32, 0, LAYOUT_ONE, 2},
    {3, 1, 8, 8, 80, 1000, 0, {0, 300, 999}, F32, 0, LAYOUT_ONE, 2},
    {3, 40, 8, 8, 80, 1000, 0, {0, 300, 990}, F32, 0, LAYOUT_ONE, 2},
    {3, 7, 4, 4, 64, 7, 3, {2, 0, 6}, F32, 0, LAYOUT_ONE, 1},
    {3, 1, 8, 1, 128, 200, 50, {0, 170, 199}, F32, 0, LAYOUT_TOKEN, 3},
    /* strides and spans: token-major, ring buffer, quantized + f32 residual */
    {2, 1, 8, 2, 64, 100, 0, {0, 0}, F32, 0, LAYOUT_TOKEN, 2},
    {2, 9, 8, 2, 64, 100, 0, {0, 0}, F32, 0, LAYOUT_TOKEN, 2},
    {1, 1, 8, 8, 64, 100, 0, {0}, F32, 0, LAYOUT_RING, 2},
    {1, 20, 8, 8, 64, 100, 0, {0}, F32, 0, LAYOUT_RING, 2},
    {2, 1, 8, 4, 80, 99, 40, {0, 10}, F32, 0, LAYOUT_RING, 2},
    {2, 30, 8, 4, 80, 99, 40, {0, 10}, F32, 0, LAYOUT_RING, 2},
    {1, 1, 8, 2, 64, 1000, 0, {0}, Q8, 32, LAYOUT_QUANT_F32, 2},
    {1, 1, 8, 2, 64, 1000, 0, {0}, Q4, 32, LAYOUT_QUANT_F32, 2},
    {2, 12, 8, 2, 64, 300, 0, {0, 7}, Q8, 32, LAYOUT_QUANT_F32, 2},
    {2, 12, 8, 2, 64, 300, 0, {0, 7}, Q4, 32, LAYOUT_QUANT_F32, 2},
    {1, 1, 4, 4, 64, 1, 0, {0}, Q8, 32, LAYOUT_QUANT_F32, 2},
    /* quantized spans: every head_dim, several groups (fast and scalar paths) */
    {1, 1, 8, 8, 64, 1000, 0, {0}, Q8, 32, LAYOUT_QUANT, 2},
    {1, 1, 8, 8, 64, 1000, 0, {0}, Q4, 32, LAYOUT_QUANT, 2},
    {1, 1, 8, 2, 128, 333, 0, {0}, Q8, 64, LAYOUT_QUANT, 2},
    /* the fused GQA paths (AVX-512, groups of 2, 4 and 8 heads): int8 at
     * head_dim 128 and 256, a batch with padding, odd T for the leftover row;
     * int8 and int4 at head_dim 64 below */
    {1, 1, 8, 4, 128, 333, 0, {0}, Q8, 64, LAYOUT_QUANT, 2},
    {1, 1, 16, 2, 128, 129, 0, {0}, Q8, 32, LAYOUT_QUANT, 2},
    {2, 1, 16, 2, 256, 65, 0, {0, 9}, Q8, 128, LAYOUT_QUANT_F32, 2},
    {1, 1, 8, 2, 128, 333, 0, {0}, Q4, 128, LAYOUT_QUANT, 2},
    /* the fused int4 GQA path: groups of 2, 4 and 8 heads, groups of 32
     * and 64 codes (one and two byte chunks per group), padding */
    {1, 1, 8, 4, 128, 333, 0, {0}, Q4, 64, LAYOUT_QUANT, 2},
    {1, 1, 16, 2, 128, 129, 0, {0}, Q4, 32, LAYOUT_QUANT, 2},
    {1, 1, 16, 4, 128, 130, 0, {0}, Q4, 32, LAYOUT_QUANT, 2},
    {2, 1, 16, 2, 256, 65, 0, {0, 9}, Q4, 128, LAYOUT_QUANT_F32, 2},
    {1, 1, 16, 2, 256, 77, 0, {0}, Q4, 64, LAYOUT_QUANT, 2},
    {1, 1, 16, 4, 64, 131, 0, {0}, Q8, 32, LAYOUT_QUANT, 2},
    {1, 1, 16, 4, 64, 131, 0, {0}, Q4, 32, LAYOUT_QUANT, 2},
    {2, 1, 16, 2, 64, 70, 0, {0, 5}, Q4, 32, LAYOUT_QUANT_F32, 2},
    /* int8 MHA, 16 rows a call: packed (s, m) pairs of 2 groups, 4 groups,
     * 5 groups of 16 (scalar min terms) */
    {1, 1, 4, 4, 128, 200, 0, {0}, Q8, 64, LAYOUT_QUANT, 2},
    {1, 1, 8, 8, 128, 333, 0, {0}, Q8, 32, LAYOUT_QUANT, 2},
    {1, 1, 4, 4, 80, 150, 0, {0}, Q8, 16, LAYOUT_QUANT_F32, 2},
    {1, 1, 8, 1, 80, 77, 0, {0}, Q8, 16, LAYOUT_QUANT, 2},
    /* int4 MHA, 16 rows a call: 2, 4 groups of 32, 2 groups of 64 */
    {1, 1, 8, 8, 128, 333, 0, {0}, Q4, 32, LAYOUT_QUANT, 2},
    {1, 1, 4, 4, 128, 200, 0, {0}, Q4, 64, LAYOUT_QUANT_F32, 2},
    {1, 1, 8, 1, 80, 77, 0, {0}, Q4, 16, LAYOUT_QUANT, 2},
    {1, 1, 8, 4, 80, 77, 0, {0}, Q8, 40, LAYOUT_QUANT, 2},
    {1, 1, 8, 4, 80, 77, 0, {0}, Q4, 40, LAYOUT_QUANT, 2},
    {1, 1, 8, 4, 64, 77, 0, {0}, Q8, 8, LAYOUT_QUANT, 2},
    {1, 1, 8, 4, 64, 77, 0, {0}, Q4, 8, LAYOUT_QUANT, 2},
    {1, 1, 8, 4, 64, 77, 0, {0}, Q8, 4, LAYOUT_QUANT, 2},
    {1, 1, 8, 4, 64, 77, 0, {0}, Q4, 2, LAYOUT_QUANT, 2},
    {1, 1, 16, 2, 64, 129, 0, {0}, Q4, 16, LAYOUT_QUANT, 2},
    {1, 1, 16, 2, 64, 129, 0, {0}, Q8, 64, LAYOUT_QUANT, 2},
    {3, 1, 8, 2, 64, 150, 20, {0, 50, 149}, Q8, 32, LAYOUT_QUANT, 2},
    {3, 1, 8, 2, 64, 150, 20, {0, 50, 149}, Q4, 32, LAYOUT_QUANT, 2},
    {1, 33, 8, 4, 80, 33, 0, {0}, Q8, 16, LAYOUT_QUANT, 2},
    {1, 33, 8, 4, 128, 64, 10, {0}, Q4, 32, LAYOUT_QUANT, 2},
    /* prefill across several query tiles (256 rows of queries x group
     * heads) and key tiles (512 keys), with windows and padding */
    {1, 300, 4, 4, 64, 1100, 0, {0}, F32, 0, LAYOUT_ONE, 2},
    {1, 300, 4, 4, 64, 1100, 600, {0}, F32, 0, LAYOUT_ONE, 2},
    {2, 140, 8, 2, 64, 1030, 0, {0, 333}, F32, 0, LAYOUT_RING, 2},
    {1, 260, 8, 8, 80, 1040, 513, {0}, Q8, 16, LAYOUT_QUANT_F32, 2},
    {1, 150, 4, 4, 64, 300, 0, {0}, F32, 0, LAYOUT_ONE, 2},
    {1, 150, 4, 4, 64, 300, 100, {0}, F32, 0, LAYOUT_ONE, 2},
    {2, 140, 8, 2, 64, 600, 0, {0, 333}, F32, 0, LAYOUT_RING, 2},
    {1, 130, 8, 8, 80, 520, 257, {0}, Q8, 16, LAYOUT_QUANT_F32, 2},
    {1, 129, 2, 1, 128, 400, 0, {0}, Q4, 32, LAYOUT_QUANT, 3},
    /* split-K boundaries: one kv head, so decode splits the keys (2 threads:
     * 4 splits, 3 threads: 6, each a whole number of 64-key blocks); T just
     * below, at and above multiples of the block and chunk sizes */
    {1, 1, 8, 1, 64, 31, 0, {0}, F32, 0, LAYOUT_ONE, 2},
    {1, 1, 8, 1, 64, 32, 0, {0}, F32, 0, LAYOUT_ONE, 2},
    {1, 1, 8, 1, 64, 33, 0, {0}, F32, 0, LAYOUT_ONE, 2},
    {1, 1, 8, 1, 64, 127, 0, {0}, F32, 0, LAYOUT_ONE, 2},
    {1, 1, 8, 1, 64, 128, 0, {0}, F32, 0, LAYOUT_ONE, 2},
    {1, 1, 8, 1, 64, 129, 0, {0}, F32, 0, LAYOUT_ONE, 2},
    {1, 1, 8, 1, 64, 255, 0, {0}, F32, 0, LAYOUT_ONE, 2},
    {1, 1, 8, 1, 64, 256, 0, {0}, F32, 0, LAYOUT_ONE, 2},
    {1, 1, 8, 1, 64, 384, 0, {0}, F32, 0, LAYOUT_ONE, 3},
    {1, 1, 8, 1, 64, 385, 0, {0}, Q8, 32, LAYOUT_QUANT, 3},
    {1, 1, 8, 1, 64, 257, 0, {0}, F32, 0, LAYOUT_ONE, 2},
    {1, 1, 8, 1, 64, 191, 0, {0}, F32, 0, LAYOUT_ONE, 3},
    {1, 1, 8, 1, 64, 193, 0, {0}, F32, 0, LAYOUT_ONE, 3},
    {1, 1, 8, 1, 64, 129, 0, {0}, Q8, 32, LAYOUT_QUANT, 2},
    {1, 1, 8, 1, 64, 127, 0, {0}, Q4, 32, LAYOUT_QUANT, 2},
    {1, 1, 8, 1, 64, 257, 0, {0}, F32, 0, LAYOUT_RING, 2},
    {1, 1, 8, 1, 64, 129, 60, {0}, F32, 0, LAYOUT_ONE, 2},
    {1, 1, 4, 1, 64, 999, 0, {0}, F32, 0, LAYOUT_ONE, 1},
    /* odd sizes: head_dim not a multiple of 8, one thread, many threads */
    {1, 1, 3, 1, 13, 37, 0, {0}, F32, 0, LAYOUT_ONE, 2},
    {1, 5, 3, 1, 13, 37, 9, {0}, F32, 0, LAYOUT_ONE, 2},
    {2, 1, 6, 3, 20, 45, 0, {0, 3}, Q8, 5, LAYOUT_QUANT, 4},
    {2, 3, 6, 3, 20, 45, 0, {0, 3}, Q4, 10, LAYOUT_QUANT, 1},
};
#define N_TABLE ((int)(sizeof(table) / sizeof(table[0])))

START_TEST(test_table)
{
    run_case(&table[_i], 200 + _i);
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
    run_case(&table[_i], 200 + _i);
    kv_l3_bytes_override(0);
}
END_TEST

/* A padded query sees nothing: its output is exactly zero. */
START_TEST(test_padded_query_zero)
{
    struct fixture f;
    struct acase c = {3, 10, 4, 2, 64, 10, 0, {0, 4, 10}, F32, 0, LAYOUT_ONE, 2};
    fixture_build(&f, &c, 5);
    size_t no = (size_t)c.batch * c.n_q * c.heads * c.d;
    float *got = malloc(no * sizeof(float));
    size_t wsb = kv_attn_workspace_bytes(&f.p);
    void *ws = kv_alloc(wsb);
    ck_assert(got && ws);
    ck_assert_int_eq(kv_attn(got, f.q, &f.p, f.spans, f.n_spans, ws, wsb), KV_OK);
    /* sequence 2 is all padding; sequence 1's queries 0..3 too */
    for (size_t i = 0; i < (size_t)c.n_q * c.heads * c.d; i++)
        ck_assert(got[2 * (size_t)c.n_q * c.heads * c.d + i] == 0.0f);
    for (size_t i = 0; i < 4 * (size_t)c.heads * c.d; i++)
        ck_assert(got[(size_t)c.n_q * c.heads * c.d + i] == 0.0f);
    /* the decode path too */
    f.p.n_q = 1;
    f.p.q_pos0 = 9;
    ck_assert_int_eq(kv_attn(got, f.q, &f.p, f.spans, f.n_spans, ws, kv_attn_workspace_bytes(&f.p)), KV_OK);
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
    /* brute force: every (query, span token) pair through the mask */
    int64_t want = 0;
    for (int32_t b = 0; b < c->batch; b++)
        for (int32_t i = 0; i < c->n_q; i++)
            for (int32_t s = 0; s < f.n_spans; s++)
                for (int32_t t = 0; t < f.spans[s].n_tokens; t++)
                    want += naive_visible(&f.p, b, (int64_t)f.p.q_pos0 + i,
                                          (int64_t)f.spans[s].pos0 + t);
    ck_assert_int_eq(kv_attn_visible_pairs(&f.p, f.spans, f.n_spans), want);
    /* positions beyond the queries and windows at odd places */
    f.p.q_pos0 += 3;
    f.p.window = 5;
    want = 0;
    for (int32_t b = 0; b < c->batch; b++)
        for (int32_t i = 0; i < c->n_q; i++)
            for (int32_t s = 0; s < f.n_spans; s++)
                for (int32_t t = 0; t < f.spans[s].n_tokens; t++)
                    want += naive_visible(&f.p, b, (int64_t)f.p.q_pos0 + i,
                                          (int64_t)f.spans[s].pos0 + t);
    ck_assert_int_eq(kv_attn_visible_pairs(&f.p, f.spans, f.n_spans), want);
    fixture_free(&f);
}
END_TEST

START_TEST(test_span_bytes)
{
    struct acase c = {2, 1, 8, 2, 64, 100, 0, {0, 0}, Q4, 32, LAYOUT_QUANT_F32, 2};
    struct fixture f;
    fixture_build(&f, &c, 1);
    /* 75 int4 tokens (32 code bytes + 2 qparams of 8 bytes per row) and 25
     * f32 tokens (256 bytes per row); K and V; 2 sequences x 2 kv heads */
    size_t want = 2 * 2 * 2 * (75 * (32 + 16) + 25 * 256);
    ck_assert_uint_eq(kv_attn_span_bytes(&f.p, f.spans, f.n_spans), want);
    fixture_free(&f);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Rejected inputs                                                          */

START_TEST(test_check_rejects)
{
    struct acase c = {2, 1, 8, 2, 64, 40, 0, {0, 0}, Q8, 32, LAYOUT_QUANT_F32, 2};
    struct fixture f;
    fixture_build(&f, &c, 2);
    struct kv_attn_params p;
    struct kv_span s[2];
    ck_assert_int_eq(kv_attn_check(&f.p, f.spans, 2), KV_OK);
#define EXPECT_BAD_P(stmt)                                                     \
    do {                                                                       \
        p = f.p;                                                               \
        stmt;                                                                  \
        ck_assert_int_eq(kv_attn_check(&p, f.spans, 2), KV_ERR_INVALID);       \
    } while (0)
#define EXPECT_BAD_S(stmt)                                                     \
    do {                                                                       \
        memcpy(s, f.spans, sizeof(s));                                         \
        stmt;                                                                  \
        ck_assert_int_eq(kv_attn_check(&f.p, s, 2), KV_ERR_INVALID);           \
    } while (0)
    EXPECT_BAD_P(p.n_kv_heads = 3);
    EXPECT_BAD_P(p.n_kv_heads = 0);
    EXPECT_BAD_P(p.batch = 0);
    EXPECT_BAD_P(p.n_q = 0);
    EXPECT_BAD_P(p.head_dim = 0);
    EXPECT_BAD_P(p.window = -1);
    EXPECT_BAD_P(p.n_threads = 0);
    EXPECT_BAD_P(p.q_pos0 = -1);
    EXPECT_BAD_P(p.q_pos0 = INT32_MAX; p.n_q = 2);
    EXPECT_BAD_P(p.scale = NAN);
    EXPECT_BAD_P(p.group = 24);  /* does not divide 64 */
    EXPECT_BAD_P(p.group = 0);
    static const int32_t badpad[2] = {0, -1};
    EXPECT_BAD_P(p.pad = badpad);
    EXPECT_BAD_S(s[0].dtype = KV_DTYPE_COUNT);
    EXPECT_BAD_S(s[0].k = NULL);
    EXPECT_BAD_S(s[1].v = NULL);
    EXPECT_BAD_S(s[0].k_qp = NULL);
    EXPECT_BAD_S(s[0].n_tokens = -1);
    EXPECT_BAD_S(s[0].pos0 = -5);
    EXPECT_BAD_S(s[1].pos0 = INT32_MAX);
    EXPECT_BAD_S(s[1].row_stride = 2);             /* f32: misaligned, overlapping */
    EXPECT_BAD_S(s[1].row_stride = 64 * 4 - 4);    /* rows overlap */
    EXPECT_BAD_S(s[0].row_stride = 63);            /* rows overlap */
    EXPECT_BAD_S(s[0].qp_row_stride = 8);          /* 2 groups need 16 bytes */
    EXPECT_BAD_S(s[0].qp_row_stride = 17);         /* misaligned qparams */
    ck_assert_int_eq(kv_attn_check(NULL, f.spans, 2), KV_ERR_INVALID);
    ck_assert_int_eq(kv_attn_check(&f.p, NULL, 2), KV_ERR_INVALID);
    ck_assert_int_eq(kv_attn_check(&f.p, f.spans, -1), KV_ERR_INVALID);
    ck_assert_int_eq(kv_attn_check(&f.p, NULL, 0), KV_OK); /* no keys at all */
    /* int4 needs an even group */
    p = f.p;
    p.head_dim = 63;
    p.group = 21;
    memcpy(s, f.spans, sizeof(s));
    s[0].dtype = KV_DTYPE_Q4;
    ck_assert_int_eq(kv_attn_check(&p, s, 1), KV_ERR_INVALID);

    /* kv_attn itself: a workspace too small, misaligned, or missing */
    size_t wsb = kv_attn_workspace_bytes(&f.p);
    char *ws = kv_alloc(wsb + 64);
    float out[2 * 8 * 64];
    ck_assert(ws != NULL);
    ck_assert_int_eq(kv_attn(out, f.q, &f.p, f.spans, 2, ws, wsb - 1), KV_ERR_INVALID);
    ck_assert_int_eq(kv_attn(out, f.q, &f.p, f.spans, 2, ws + 4, wsb), KV_ERR_INVALID);
    ck_assert_int_eq(kv_attn(out, f.q, &f.p, f.spans, 2, NULL, wsb), KV_ERR_INVALID);
    ck_assert_int_eq(kv_attn(NULL, f.q, &f.p, f.spans, 2, ws, wsb), KV_ERR_INVALID);
    ck_assert_int_eq(kv_attn(out, f.q, &f.p, f.spans, 2, ws, wsb), KV_OK);
    p = f.p;
    p.n_kv_heads = 3;
    ck_assert_int_eq(kv_attn(out, f.q, &p, f.spans, 2, ws, wsb), KV_ERR_INVALID);
    ck_assert_int_eq(kv_attn_ref(out, f.q, &p, f.spans, 2), KV_ERR_INVALID);
    kv_free(ws);
    fixture_free(&f);
}
END_TEST

/* The workspace depends on the call's shape, never on the number of keys. */
START_TEST(test_workspace_independent_of_keys)
{
    struct kv_attn_params p = {.batch = 2, .n_q = 1, .n_heads = 8, .n_kv_heads = 2,
                               .head_dim = 64, .group = 32, .scale = 0.125f, .n_threads = 2};
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

/* ------------------------------------------------------------------------ */

static Suite *attention_suite(void)
{
    Suite *s = suite_create("attention");
    TCase *tc = tcase_create("shapes");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_shapes_decode, 0, N_SHAPES);
    tcase_add_loop_test(tc, test_shapes_prefill, 0, N_SHAPES);
    suite_add_tcase(s, tc);
    tc = tcase_create("table");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_table, 0, N_TABLE);
    tcase_add_loop_test(tc, test_table_prefetch, 0, N_TABLE);
    tcase_add_test(tc, test_padded_query_zero);
    suite_add_tcase(s, tc);
    tc = tcase_create("counts");
    tcase_add_loop_test(tc, test_visible_pairs, 0, N_TABLE);
    tcase_add_test(tc, test_span_bytes);
    tcase_add_test(tc, test_check_rejects);
    tcase_add_test(tc, test_workspace_independent_of_keys);
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
