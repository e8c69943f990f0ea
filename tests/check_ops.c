/*
 * check_ops.c - the decoder's math kernels (kernels/kv_ops.h) against naive
 * references written here, independently of the library's `_ref` twins:
 * GEMM (every path: streaming small-M, serial sgemm, split over threads,
 * beta 0 and 1) and its FLOP counter, several GEMMs on one input
 * (kv_gemm_multi: each part exactly as kv_gemm gives it), RMSNorm, RoPE (identity at position
 * 0, norm preservation, the exact angle formula, relative-position
 * property), SwiGLU, softmax (including huge inputs) and argmax, and that
 * kv_blas_single leaves no OpenBLAS thread behind.
 *
 * Tolerances come from float32 rounding: a sum of K products carries an
 * error of at most about K * FLT_EPSILON times the sum of |terms| (the
 * classic gamma_K bound); element-wise ops are within a few ulps.
 */
#include <cblas.h>
#include <check.h>
#include <dirent.h>
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../kernels/kv_ops.h"

/* Element-wise float ops (one rounding per step, a handful of steps). */
#define ELEMWISE_ULPS 8.0
/* expf and 1/(1+e) in SwiGLU: a few ulps each in glibc. */
#define SWIGLU_REL_TOL (16.0 * FLT_EPSILON)

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */

static uint64_t rng_state;

static double urand(void) /* uniform in [0, 1) */
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) * (1.0 / 9007199254740992.0);
}

static float *rand_floats(size_t n, double lo, double hi)
{
    float *x = malloc(n * sizeof *x);
    ck_assert_ptr_nonnull(x);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(lo + (hi - lo) * urand());
    return x;
}

/* ------------------------------------------------------------------------ */
/* GEMM                                                                     */

struct gemm_case {
    int64_t M, N, K;
    int threads;
};

/* Covers: streaming paths (M <= 4, and up to 128 KiB of x in SIMD builds),
 * serial sgemm (small M*N*K), split over
 * W's rows (N >= M) and over x's rows (M > N), odd sizes, K not a multiple
 * of the vector width. */
static const struct gemm_case gemm_cases[] = {
    {1, 1, 1, 1},     {1, 7, 5, 1},      {1, 512, 512, 2},  {2, 33, 17, 2},
    {3, 1376, 512, 2}, {4, 64, 100, 1},  {5, 100, 70, 2},   {17, 9, 31, 1},
    {64, 300, 128, 2}, {300, 64, 128, 2}, {129, 257, 65, 2}, {1000, 3, 96, 2},
    /* the 4-rows-of-W streaming path (K a multiple of 16, N of 4), M 1..4 */
    {1, 12, 16, 1},   {2, 64, 96, 2},    {4, 128, 512, 1},
    /* more rows of x than one register block, still streamed (SIMD builds):
     * whole and partial blocks of 4, K a multiple of 16 or not */
    {8, 64, 512, 2},  {13, 100, 512, 2}, {33, 36, 64, 1},  {6, 20, 70, 2},
    /* AVX2's register tile: K % 16 == 8 (its half-trip tail), odd M */
    {3, 8, 24, 1},    {5, 44, 520, 2},   {7, 1376, 512, 2},
    /* x over the streaming path's L2 budget: OpenBLAS slices by W's rows */
    {200, 300, 256, 2}, {90, 4, 400, 2},
};

START_TEST(test_gemm_vs_naive)
{
    const struct gemm_case *gc = &gemm_cases[_i];
    rng_state = 1000 + (uint64_t)_i;
    omp_set_num_threads(gc->threads);
    int64_t M = gc->M, N = gc->N, K = gc->K;
    float *x = rand_floats((size_t)(M * K), -1, 1);
    float *w = rand_floats((size_t)(N * K), -1, 1);
    float *c0 = rand_floats((size_t)(M * N), -1, 1);
    for (int beta_i = 0; beta_i < 2; beta_i++) {
        float beta = (float)beta_i;
        float *out = malloc((size_t)(M * N) * sizeof *out);
        float *ref = malloc((size_t)(M * N) * sizeof *ref);
        memcpy(out, c0, (size_t)(M * N) * sizeof *out);
        memcpy(ref, c0, (size_t)(M * N) * sizeof *ref);
        int64_t flops = 7; /* the wrapper adds, it does not overwrite */
        kv_gemm(out, x, w, M, N, K, beta, &flops);
        ck_assert_int_eq(flops, 7 + 2 * M * N * K);
        int64_t flops_ref = 0;
        kv_gemm_ref(ref, x, w, M, N, K, beta, &flops_ref);
        ck_assert_int_eq(flops_ref, 2 * M * N * K);
        /* worst error in units of its bound; asserted once (Check records
         * every assertion, so asserting per element would be slow) */
        double worst = 0, worst_ref = 0, got = 0, want = 0;
        int64_t wm = 0, wn = 0;
        for (int64_t m = 0; m < M; m++) {
            for (int64_t n = 0; n < N; n++) {
                double exact = beta_i ? (double)c0[m * N + n] : 0.0, mag = fabs(exact);
                for (int64_t k = 0; k < K; k++) {
                    double t = (double)x[m * K + k] * (double)w[n * K + k];
                    exact += t;
                    mag += fabs(t);
                }
                /* gamma_{K+1} bound on a float sum of K+1 terms */
                double tol = (double)(K + 2) * FLT_EPSILON * mag + 1e-30;
                double e = fabs(out[m * N + n] - exact) / tol;
                if (e > worst) {
                    worst = e;
                    wm = m;
                    wn = n;
                    got = out[m * N + n];
                    want = exact;
                }
                worst_ref = fmax(worst_ref, fabs(ref[m * N + n] - exact) / tol);
            }
        }
        ck_assert_msg(worst <= 1.0, "gemm %ldx%ldx%ld beta %d at (%ld,%ld): %g vs %g", (long)M,
                      (long)N, (long)K, beta_i, (long)wm, (long)wn, got, want);
        ck_assert_msg(worst_ref <= 1.0, "gemm_ref off by %g bounds", worst_ref);
        free(out);
        free(ref);
    }
    free(x);
    free(w);
    free(c0);
}
END_TEST

/* On the streaming path a row of x gets the same bits whatever rows run
 * beside it, so a request decoded in a serving batch gets exactly the
 * logits it gets alone (check_serve's exact tokens rest on this). The
 * streaming path takes up to 4 rows of x, 7 in a SIMD build (kv_ops.c,
 * gemv_path); past that sgemm makes no such promise. The shapes cover the
 * SIMD tiles (K a multiple of 16, or 8 more), the plain loop (K 70) and a
 * row count of W that is not a multiple of 4 (N 37). */
#if (defined(__AVX2__) && defined(__FMA__)) || defined(__AVX512F__)
#define STREAMED_M_MAX 7
#else
#define STREAMED_M_MAX 4
#endif
START_TEST(test_gemm_row_alone_as_in_batch)
{
    static const int64_t shapes[][2] = {{64, 512}, {36, 24}, {20, 70}, {37, 64}, {1376, 512}};
    const int64_t N = shapes[_i][0], K = shapes[_i][1];
    rng_state = 77 + (uint64_t)_i;
    omp_set_num_threads(2);
    float *x = rand_floats((size_t)(STREAMED_M_MAX * K), -1, 1);
    float *w = rand_floats((size_t)(N * K), -1, 1);
    float *alone = malloc((size_t)N * sizeof *alone);
    float *batch = malloc((size_t)(STREAMED_M_MAX * N) * sizeof *batch);
    for (int64_t M = 2; M <= STREAMED_M_MAX; M++) {
        ck_assert_int_eq(kv_gemm(batch, x, w, M, N, K, 0.0f, NULL), KV_OK);
        for (int64_t m = 0; m < M; m++) {
            ck_assert_int_eq(kv_gemm(alone, x + m * K, w, 1, N, K, 0.0f, NULL), KV_OK);
            ck_assert_msg(memcmp(alone, batch + m * N, (size_t)N * sizeof *alone) == 0,
                          "N %ld K %ld: row %ld of %ld differs from it alone", (long)N, (long)K,
                          (long)m, (long)M);
        }
    }
    free(x);
    free(w);
    free(alone);
    free(batch);
}
END_TEST

START_TEST(test_gemm_flops_empty)
{
    /* A zero-sized GEMM counts nothing and touches nothing. */
    int64_t flops = 0;
    float out = 3.0f;
    kv_gemm(&out, NULL, NULL, 0, 1, 5, 0.0f, &flops);
    ck_assert_int_eq(flops, 0);
    ck_assert(out == 3.0f);
    /* Counter is 64-bit: a count past 2^32 is exact. */
    flops = (int64_t)1 << 40;
    float x[4] = {1, 2, 3, 4}, w[4] = {1, 1, 1, 1}, o[1];
    kv_gemm(o, x, w, 1, 1, 4, 0.0f, &flops);
    ck_assert_int_eq(flops, ((int64_t)1 << 40) + 8);
    ck_assert(o[0] == 10.0f);
    kv_gemm(o, x, w, 1, 1, 4, 0.0f, NULL); /* NULL counter is allowed */
    ck_assert(o[0] == 10.0f);
}
END_TEST

/* kv_gemm_multi gives each part exactly what kv_gemm gives it (the same
 * 4-row groups, whatever the chunks), on every path: streamed (M <= 4)
 * serial and on the team, sgemm (M = 80; M = 5 too in a portable build),
 * K = 0, beta 0 and 1. */
struct multi_case {
    int64_t M, K;
    int n;
    int64_t N[3];
    int threads;
};
static const struct multi_case multi_cases[] = {
    {1, 512, 3, {512, 256, 256}, 2}, {1, 512, 3, {512, 256, 256}, 1},
    {3, 512, 2, {1376, 1376, 0}, 2}, {4, 64, 3, {3, 5, 7}, 2},
    {1, 9, 3, {3, 5, 7}, 2},         {5, 512, 2, {512, 130, 0}, 2},
    {2, 0, 2, {4, 6, 0}, 2},         {1, 512, 1, {1024, 0, 0}, 2},
    {9, 512, 3, {512, 128, 132}, 2}, {80, 512, 2, {512, 130, 0}, 2},
};

START_TEST(test_gemm_multi_as_each)
{
    const struct multi_case *mc = &multi_cases[_i];
    rng_state = 5000 + (uint64_t)_i;
    omp_set_num_threads(mc->threads);
    float *x = rand_floats((size_t)(mc->M * mc->K) + 1, -1, 1);
    for (int beta_i = 0; beta_i < 2; beta_i++) {
        struct kv_gemm_part parts[3];
        float *want[3], *w[3];
        int64_t flops = 3, flops_want = 3;
        for (int p = 0; p < mc->n; p++) {
            size_t no = (size_t)(mc->M * mc->N[p]);
            w[p] = rand_floats((size_t)(mc->N[p] * mc->K) + 1, -1, 1);
            float *out = rand_floats(no + 1, -1, 1);
            want[p] = malloc((no + 1) * sizeof(float));
            memcpy(want[p], out, (no + 1) * sizeof(float));
            kv_gemm(want[p], x, w[p], mc->M, mc->N[p], mc->K, (float)beta_i, &flops_want);
            parts[p] = (struct kv_gemm_part){out, w[p], mc->N[p]};
        }
        ck_assert_int_eq(kv_gemm_multi(parts, mc->n, x, mc->M, mc->K, (float)beta_i, &flops),
                         KV_OK);
        ck_assert_int_eq(flops, flops_want);
        for (int p = 0; p < mc->n; p++) {
            size_t no = (size_t)(mc->M * mc->N[p]);
            ck_assert_msg(memcmp(parts[p].out, want[p], (no + 1) * sizeof(float)) == 0,
                          "case %d part %d beta %d differs from kv_gemm", _i, p, beta_i);
            free(parts[p].out);
            free(want[p]);
            free(w[p]);
        }
    }
    free(x);
}
END_TEST

START_TEST(test_gemm_multi_refuses)
{
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, w[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    float a[2] = {9, 9}, b[2] = {9, 9};
    struct kv_gemm_part parts[5] = {{a, w, 2}, {b, w, 2}, {a, w, 2}, {b, w, 2}, {a, w, 2}};
    int64_t flops = 0;
    ck_assert_int_eq(kv_gemm_multi(NULL, 1, x, 1, 4, 0.0f, &flops), KV_ERR_INVALID);
    ck_assert_int_eq(kv_gemm_multi(parts, -1, x, 1, 4, 0.0f, &flops), KV_ERR_INVALID);
    ck_assert_int_eq(kv_gemm_multi(parts, KV_GEMM_MULTI_MAX + 1, x, 1, 4, 0.0f, &flops),
                     KV_ERR_INVALID);
    /* a bad second part: the first is not written either */
    parts[1].w = NULL;
    ck_assert_int_eq(kv_gemm_multi(parts, 2, x, 1, 4, 0.0f, &flops), KV_ERR_INVALID);
    parts[1] = (struct kv_gemm_part){b, w, -1};
    ck_assert_int_eq(kv_gemm_multi(parts, 2, x, 1, 4, 0.0f, &flops), KV_ERR_INVALID);
    ck_assert(a[0] == 9 && a[1] == 9 && b[0] == 9 && b[1] == 9 && flops == 0);
    ck_assert_int_eq(kv_gemm_multi(parts, 0, x, 1, 4, 0.0f, &flops), KV_OK);
    ck_assert_int_eq(flops, 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* RMSNorm                                                                  */

static const int32_t rms_dims[] = {1, 2, 7, 64, 512, 777, 4096};

START_TEST(test_rmsnorm_vs_naive)
{
    int32_t dim = rms_dims[_i];
    int64_t rows = dim >= 512 ? 70 : 5; /* 70 x 512 takes the threaded path */
    rng_state = 77 + (uint64_t)dim;
    omp_set_num_threads(2);
    float *x = rand_floats((size_t)(rows * dim), -3, 3);
    float *w = rand_floats((size_t)dim, 0.5, 1.5);
    float *out = malloc((size_t)(rows * dim) * sizeof *out);
    float *ref = malloc((size_t)(rows * dim) * sizeof *ref);
    kv_rmsnorm(out, x, w, rows, dim);
    kv_rmsnorm_ref(ref, x, w, rows, dim);
    /* sum of dim squares: gamma_dim relative error, halved by the sqrt */
    double tol = ((double)dim + ELEMWISE_ULPS) * FLT_EPSILON;
    double worst = 0, worst_ref = 0; /* relative error / tol, asserted once */
    for (int64_t r = 0; r < rows; r++) {
        double ss = 0;
        for (int32_t i = 0; i < dim; i++)
            ss += (double)x[r * dim + i] * x[r * dim + i];
        double inv = 1.0 / sqrt(ss / dim + 1e-5);
        for (int32_t i = 0; i < dim; i++) {
            double e = (double)x[r * dim + i] * inv * (double)w[i];
            double lim = tol * fabs(e) + 1e-30;
            worst = fmax(worst, fabs(out[r * dim + i] - e) / lim);
            worst_ref = fmax(worst_ref, fabs(ref[r * dim + i] - e) / lim);
        }
    }
    ck_assert_msg(worst <= 1.0, "rmsnorm dim %d: error %g x the bound", dim, worst);
    ck_assert_msg(worst_ref <= 1.0, "rmsnorm_ref dim %d: error %g x the bound", dim, worst_ref);
    /* in place gives the same */
    kv_rmsnorm(x, x, w, rows, dim);
    ck_assert_mem_eq(x, out, (size_t)(rows * dim) * sizeof *x);
    free(x);
    free(w);
    free(out);
    free(ref);
}
END_TEST

START_TEST(test_rmsnorm_scale)
{
    /* With unit weights the output has RMS 1 (up to eps), whatever the
     * input's scale; eps keeps an all-zero row at zero, not NaN. */
    enum { D = 256 };
    float x[2 * D], w[D], out[2 * D];
    for (int i = 0; i < D; i++) {
        x[i] = 1e4f * (float)((i % 13) - 6);
        x[D + i] = 0.0f;
        w[i] = 1.0f;
    }
    kv_rmsnorm(out, x, w, 2, D);
    double ss = 0;
    for (int i = 0; i < D; i++) {
        ss += (double)out[i] * out[i];
        ck_assert(out[D + i] == 0.0f);
    }
    ck_assert(fabs(sqrt(ss / D) - 1.0) < 1e-5);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* RoPE                                                                     */

struct rope_case {
    int32_t head_dim, n_heads, n_kv_heads;
    int64_t rows;
};

/* head_dim 130 and 256 cross the kernel's 64-pair block boundary; 64 rows x 8
 * heads x 64 takes the threaded path. */
static const struct rope_case rope_cases[] = {
    {2, 1, 1, 3}, {16, 4, 2, 5}, {64, 8, 8, 64}, {80, 4, 1, 9}, {130, 2, 1, 4},
    {256, 2, 2, 3},
};

/* The rotation each pair must get: llama2.c's formula, in double. */
static void rope_expected(double *o0, double *o1, double x0, double x1, int32_t pos,
                          int32_t i, int32_t hs)
{
    double freq = 1.0 / pow(10000.0, (double)(i % hs) / (double)hs);
    double a = (double)pos * freq;
    *o0 = x0 * cos(a) - x1 * sin(a);
    *o1 = x0 * sin(a) + x1 * cos(a);
}

START_TEST(test_rope_formula)
{
    const struct rope_case *rc = &rope_cases[_i];
    rng_state = 4242 + (uint64_t)_i;
    omp_set_num_threads(2);
    int32_t hs = rc->head_dim;
    int64_t rows = rc->rows;
    size_t nq = (size_t)(rows * rc->n_heads * hs), nk = (size_t)(rows * rc->n_kv_heads * hs);
    float *q = rand_floats(nq, -2, 2), *k = rand_floats(nk, -2, 2);
    float *q0 = malloc(nq * sizeof *q0), *k0 = malloc(nk * sizeof *k0);
    float *qr = malloc(nq * sizeof *qr), *kr = malloc(nk * sizeof *kr);
    memcpy(q0, q, nq * sizeof *q);
    memcpy(k0, k, nk * sizeof *k);
    memcpy(qr, q, nq * sizeof *q);
    memcpy(kr, k, nk * sizeof *k);
    int32_t *pos = malloc((size_t)rows * sizeof *pos);
    for (int64_t r = 0; r < rows; r++)
        pos[r] = r == 0 ? 0 : (r == 1 ? 8191 : (int32_t)(urand() * 5000));

    kv_rope(q, rc->n_heads, k, rc->n_kv_heads, rows, hs, pos);
    kv_rope_ref(qr, rc->n_heads, kr, rc->n_kv_heads, rows, hs, pos);

    /* worst errors in units of their bounds, asserted once at the end */
    double worst = 0, worst_ref = 0, worst_norm = 0;
    int not_identity = 0;
    char where[160] = "";

    for (int pass = 0; pass < 2; pass++) {
        const float *in = pass ? k0 : q0, *out = pass ? k : q, *ref = pass ? kr : qr;
        int32_t heads = pass ? rc->n_kv_heads : rc->n_heads;
        for (int64_t r = 0; r < rows; r++) {
            for (int32_t h = 0; h < heads; h++) {
                for (int32_t i = 0; i < hs; i += 2) {
                    size_t at = (size_t)((r * heads + h) * hs + i);
                    double x0 = in[at], x1 = in[at + 1], e0, e1;
                    rope_expected(&e0, &e1, x0, x1, pos[r], i, hs);
                    double norm = hypot(x0, x1);
                    /* cos/sin rounded to float, then 2 products and a sum */
                    double tol = ELEMWISE_ULPS * FLT_EPSILON * norm + 1e-30;
                    double e = fmax(fabs(out[at] - e0), fabs(out[at + 1] - e1)) / tol;
                    if (e > worst) {
                        worst = e;
                        snprintf(where, sizeof where, "%s hs %d pos %d pair %d: (%g,%g) vs (%g,%g)",
                                 pass ? "k" : "q", hs, pos[r], i, (double)out[at],
                                 (double)out[at + 1], e0, e1);
                    }
                    worst_ref = fmax(worst_ref,
                                     fmax(fabs(ref[at] - e0), fabs(ref[at + 1] - e1)) / tol);
                    /* the rotation preserves each pair's length */
                    worst_norm = fmax(worst_norm,
                                      fabs(hypot(out[at], out[at + 1]) - norm) / (2 * tol));
                    /* position 0 is the identity, exactly */
                    if (pos[r] == 0 && (out[at] != in[at] || out[at + 1] != in[at + 1]))
                        not_identity++;
                }
            }
        }
    }
    ck_assert_msg(worst <= 1.0, "rope off by %g x the bound at %s", worst, where);
    ck_assert_msg(worst_ref <= 1.0, "rope_ref off by %g x the bound", worst_ref);
    ck_assert_msg(worst_norm <= 1.0, "rope changes a pair's norm (%g x the bound)", worst_norm);
    ck_assert_int_eq(not_identity, 0);
    free(q);
    free(k);
    free(q0);
    free(k0);
    free(qr);
    free(kr);
    free(pos);
}
END_TEST

START_TEST(test_rope_relative)
{
    /* q.k after RoPE depends only on the distance between the positions
     * (what makes a cache of rotated keys valid at any later step). */
    enum { HS = 64 };
    rng_state = 99;
    float *q = rand_floats(HS, -1, 1), *k = rand_floats(HS, -1, 1);
    double base = 0;
    for (int shift = 0; shift < 3; shift++) {
        float qa[HS], ka[HS];
        memcpy(qa, q, sizeof qa);
        memcpy(ka, k, sizeof ka);
        int32_t pq = 37 + shift * 1000, pk = 5 + shift * 1000;
        kv_rope(qa, 1, NULL, 0, 1, HS, &pq);
        kv_rope(ka, 1, NULL, 0, 1, HS, &pk);
        double dot = 0, mag = 0;
        for (int i = 0; i < HS; i++) {
            dot += (double)qa[i] * ka[i];
            mag += fabs((double)q[i] * k[i]);
        }
        if (shift == 0)
            base = dot;
        else /* angles up to ~2000 rad: float cos/sin error dominates */
            ck_assert_msg(fabs(dot - base) <= 64 * FLT_EPSILON * mag * 4, "shift %d: %g vs %g",
                          shift, dot, base);
    }
    free(q);
    free(k);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* SwiGLU                                                                   */

START_TEST(test_swiglu_vs_naive)
{
    enum { N = 70000 }; /* over the threading threshold */
    rng_state = 5;
    omp_set_num_threads(2);
    float *a = rand_floats(N, -30, 30), *b = rand_floats(N, -3, 3);
    a[0] = -200.0f; /* exp overflows to inf: silu must give -0, not NaN */
    a[1] = 200.0f;
    a[2] = 0.0f;
    float *a0 = malloc(N * sizeof *a0), *ar = malloc(N * sizeof *ar);
    memcpy(a0, a, N * sizeof *a);
    memcpy(ar, a, N * sizeof *a);
    kv_swiglu(a, b, N);
    kv_swiglu_ref(ar, b, N);
    double worst = 0, worst_ref = 0; /* error / bound, asserted once */
    int at = 0, non_finite = 0;
    for (int i = 0; i < N; i++) {
        double x = a0[i], e = x / (1.0 + exp(-x)) * (double)b[i];
        double lim = SWIGLU_REL_TOL * fabs(e) + 1e-37;
        non_finite += !isfinite(a[i]);
        if (fabs(a[i] - e) / lim > worst) {
            worst = fabs(a[i] - e) / lim;
            at = i;
        }
        worst_ref = fmax(worst_ref, fabs(ar[i] - e) / lim);
    }
    ck_assert_int_eq(non_finite, 0);
    ck_assert_msg(worst <= 1.0, "swiglu(%g, %g) = %g: %g x the bound", (double)a0[at],
                  (double)b[at], (double)a[at], worst);
    ck_assert_msg(worst_ref <= 1.0, "swiglu_ref: %g x the bound", worst_ref);
    free(a);
    free(b);
    free(a0);
    free(ar);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Softmax, argmax                                                          */

START_TEST(test_softmax)
{
    /* Each case: values, then the check against a naive double softmax. */
    static const float cases[][6] = {
        {0, 0, 0, 0, 0, 0},
        {1, 2, 3, 4, 5, 6},
        {1000, 999, 998, -1000, 0, 1000},       /* exp overflows without the max */
        {88.7f, 88.6f, -88.7f, 3e38f, -3e38f, 1}, /* near FLT_MAX */
        {-1e30f, -1e30f, -1e30f, -1e30f, -1e30f, -2e30f},
        {-5, -7, -100, -3, -4, -1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        float x[6], xr[6];
        memcpy(x, cases[c], sizeof x);
        memcpy(xr, cases[c], sizeof xr);
        kv_softmax(x, 6);
        kv_softmax_ref(xr, 6);
        double mx = -INFINITY, sum = 0, e[6], total = 0;
        for (int i = 0; i < 6; i++)
            mx = fmax(mx, cases[c][i]);
        for (int i = 0; i < 6; i++)
            sum += e[i] = exp((double)cases[c][i] - mx);
        for (int i = 0; i < 6; i++) {
            e[i] /= sum;
            ck_assert(isfinite(x[i]) && x[i] >= 0.0f);
            ck_assert_msg(fabs(x[i] - e[i]) <= ELEMWISE_ULPS * 6 * FLT_EPSILON,
                          "softmax case %zu [%d]: %g vs %g", c, i, (double)x[i], e[i]);
            ck_assert(fabs(xr[i] - e[i]) <= ELEMWISE_ULPS * FLT_EPSILON);
            total += x[i];
        }
        ck_assert(fabs(total - 1.0) <= ELEMWISE_ULPS * 6 * FLT_EPSILON);
    }
    float one = -12345.0f;
    kv_softmax(&one, 1);
    ck_assert(one == 1.0f);
}
END_TEST

START_TEST(test_argmax)
{
    float x[] = {1, 5, -2, 5, 4};
    ck_assert_int_eq(kv_argmax(x, 5), 1); /* lowest index on ties */
    ck_assert_int_eq(kv_argmax(x, 1), 0);
    float y[] = {-INFINITY, -3, -1e30f};
    ck_assert_int_eq(kv_argmax(y, 3), 1);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* OpenBLAS's threads                                                       */

/* Threads of this process (entries of /proc/self/task), -1 if unreadable. */
static int task_count(void)
{
    DIR *d = opendir("/proc/self/task");
    if (d == NULL)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* A threaded sgemm starts OpenBLAS's worker threads (they would spin beside
 * the decode team); kv_blas_single must stop them, not only set the count. */
START_TEST(test_blas_single_stops_threads)
{
    const int n = 256;
    float *a = calloc((size_t)n * n, sizeof *a), *c = calloc((size_t)n * n, sizeof *c);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(c);
    for (int i = 0; i < n * n; i++)
        a[i] = (float)(i % 7);
    const int before = task_count();
    openblas_set_num_threads(2);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, a, n, 0.0f, c,
                n);
    const int started = task_count();
    kv_blas_single();
    /* pthread_join returns once the kernel clears the thread's tid, which
     * happens before its /proc/self/task entry goes: wait for the entry,
     * up to a second (a thread that was not stopped never leaves) */
    int after = task_count();
    for (int i = 0; i < 1000 && after > before; i++) {
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
        after = task_count();
    }
    ck_assert_int_eq(openblas_get_num_threads(), 1);
    if (openblas_get_parallel() == 1 && before > 0 && started > before)
        ck_assert_int_eq(after, before);
    else
        printf("note: OpenBLAS started no thread here (parallel mode %d, %d -> %d threads); "
               "kv_blas_single's stop is not observable\n",
               openblas_get_parallel(), before, started);
    free(a);
    free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */

static Suite *ops_suite(void)
{
    Suite *s = suite_create("ops");
    TCase *tc = tcase_create("gemm");
    tcase_add_loop_test(tc, test_gemm_vs_naive, 0,
                        (int)(sizeof gemm_cases / sizeof gemm_cases[0]));
    tcase_add_loop_test(tc, test_gemm_row_alone_as_in_batch, 0, 5);
    tcase_add_test(tc, test_gemm_flops_empty);
    tcase_add_loop_test(tc, test_gemm_multi_as_each, 0,
                        (int)(sizeof multi_cases / sizeof multi_cases[0]));
    tcase_add_test(tc, test_gemm_multi_refuses);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);

    tc = tcase_create("rmsnorm");
    tcase_add_loop_test(tc, test_rmsnorm_vs_naive, 0,
                        (int)(sizeof rms_dims / sizeof rms_dims[0]));
    tcase_add_test(tc, test_rmsnorm_scale);
    suite_add_tcase(s, tc);

    tc = tcase_create("rope");
    tcase_add_loop_test(tc, test_rope_formula, 0,
                        (int)(sizeof rope_cases / sizeof rope_cases[0]));
    tcase_add_test(tc, test_rope_relative);
    suite_add_tcase(s, tc);

    tc = tcase_create("elementwise");
    tcase_add_test(tc, test_swiglu_vs_naive);
    tcase_add_test(tc, test_softmax);
    tcase_add_test(tc, test_argmax);
    suite_add_tcase(s, tc);

    tc = tcase_create("blas_threads");
    tcase_add_test(tc, test_blas_single_stops_threads);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(ops_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed < 125 ? failed : 125; /* the number of failures */
}
