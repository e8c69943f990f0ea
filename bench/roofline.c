/*
 * roofline.c - measure the machine's limits on the run's threads: read
 * bandwidth (an OpenMP sum over a large float array), copy bandwidth (an
 * OpenMP copy between two large arrays) and the cblas_sgemm rate.
 *
 * Every buffer is allocated with kv_alloc (zero-filled, so every page is
 * touched) and then written once by the same threads, with the same static
 * schedule, that later read it: no page fault lands inside a timed pass.
 * Each test runs once untimed, then `reps` timed passes; the median is kept.
 * Copy bandwidth counts bytes read plus bytes written (as STREAM does; the
 * write-allocate traffic the hardware adds is not counted).
 */
#include "roofline.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of t[0..n) (sorts t). */
static double median(double *t, int32_t n)
{
    qsort(t, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static int stopped(const struct kv_roofline_params *p)
{
    return p->stop != NULL && *p->stop;
}

/* The result of each read pass goes here so the sum cannot be optimised away. */
static volatile float roofline_sink;

/* ------------------------------------------------------------------------ */
/* Tests                                                                    */

/* x (n) <- value, written by the threads that will read it. */
static void fill(float *x, size_t n, float value, int32_t nt)
{
#pragma omp parallel for schedule(static) num_threads(nt)
    for (size_t i = 0; i < n; i++)
        x[i] = value;
}

/* sum of x (n): one streaming read of 4n bytes. */
static float sum(const float *x, size_t n, int32_t nt)
{
    float s = 0.0f;
#pragma omp parallel for simd schedule(static) num_threads(nt) reduction(+ : s)
    for (size_t i = 0; i < n; i++)
        s += x[i];
    return s;
}

/* dst (n) <- src (n): 4n bytes read, 4n bytes written. */
static void copy(float *restrict dst, const float *restrict src, size_t n, int32_t nt)
{
#pragma omp parallel for simd schedule(static) num_threads(nt)
    for (size_t i = 0; i < n; i++)
        dst[i] = src[i];
}

static enum kv_status measure_read(double *gbps, const struct kv_roofline_params *p)
{
    size_t n = p->read_bytes / sizeof(float);
    float *x = kv_alloc(n * sizeof(float));
    double *t = kv_alloc((size_t)p->reps * sizeof(double));
    if (x == NULL || t == NULL) {
        kv_free(x);
        kv_free(t);
        return KV_ERR_NOMEM;
    }
    fill(x, n, 1.0f, p->n_threads);
    roofline_sink = sum(x, n, p->n_threads); /* untimed warm-up pass */
    int32_t done = 0;
    for (; done < p->reps && !stopped(p); done++) {
        int64_t t0 = kv_now_ns();
        roofline_sink = sum(x, n, p->n_threads);
        t[done] = (double)(kv_now_ns() - t0);
    }
    *gbps = done == p->reps ? (double)(n * sizeof(float)) / median(t, done) : NAN;
    kv_free(x);
    kv_free(t);
    return KV_OK;
}

static enum kv_status measure_copy(double *gbps, const struct kv_roofline_params *p)
{
    size_t n = p->copy_bytes / sizeof(float);
    float *a = kv_alloc(n * sizeof(float));
    float *b = kv_alloc(n * sizeof(float));
    double *t = kv_alloc((size_t)p->reps * sizeof(double));
    if (a == NULL || b == NULL || t == NULL) {
        kv_free(a);
        kv_free(b);
        kv_free(t);
        return KV_ERR_NOMEM;
    }
    fill(a, n, 1.0f, p->n_threads);
    fill(b, n, 2.0f, p->n_threads);
    copy(b, a, n, p->n_threads); /* untimed warm-up pass */
    int32_t done = 0;
    for (; done < p->reps && !stopped(p); done++) {
        int64_t t0 = kv_now_ns();
        copy(b, a, n, p->n_threads);
        t[done] = (double)(kv_now_ns() - t0);
    }
    roofline_sink = b[n / 2];
    *gbps = done == p->reps ? 2.0 * (double)(n * sizeof(float)) / median(t, done) : NAN;
    kv_free(a);
    kv_free(b);
    kv_free(t);
    return KV_OK;
}

static enum kv_status measure_sgemm(double *gflops, const struct kv_roofline_params *p)
{
    size_t n = (size_t)p->gemm_n;
    float *a = kv_alloc(n * n * sizeof(float)); /* (n, n) */
    float *b = kv_alloc(n * n * sizeof(float)); /* (n, n) */
    float *c = kv_alloc(n * n * sizeof(float)); /* (n, n) */
    double *t = kv_alloc((size_t)p->reps * sizeof(double));
    if (a == NULL || b == NULL || c == NULL || t == NULL) {
        kv_free(a);
        kv_free(b);
        kv_free(c);
        kv_free(t);
        return KV_ERR_NOMEM;
    }
    /* Small non-trivial values: no denormals, no overflow. */
    for (size_t i = 0; i < n * n; i++) {
        a[i] = (float)((i % 17) + 1) * (1.0f / 64.0f);
        b[i] = (float)((i % 13) + 1) * (1.0f / 64.0f);
    }
    openblas_set_num_threads(p->n_threads);
    int gn = p->gemm_n;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, gn, gn, gn, 1.0f, a, gn, b,
                gn, 0.0f, c, gn); /* untimed warm-up call */
    int32_t done = 0;
    for (; done < p->reps && !stopped(p); done++) {
        int64_t t0 = kv_now_ns();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, gn, gn, gn, 1.0f, a, gn,
                    b, gn, 0.0f, c, gn);
        t[done] = (double)(kv_now_ns() - t0);
    }
    roofline_sink = c[n * n / 2];
    *gflops = done == p->reps ? 2.0 * (double)n * (double)n * (double)n / median(t, done)
                              : NAN;
    kv_free(a);
    kv_free(b);
    kv_free(c);
    kv_free(t);
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* Public                                                                   */

void kv_roofline_defaults(struct kv_roofline_params *p, int32_t n_threads)
{
    memset(p, 0, sizeof(*p));
    p->n_threads = n_threads;
    p->read_bytes = (size_t)256 << 20;
    p->copy_bytes = (size_t)128 << 20;
    p->gemm_n = 2048;
    p->reps = 7;
}

enum kv_status kv_roofline_measure(struct kv_roofline *out,
                                   const struct kv_roofline_params *p)
{
    out->read_gbps = out->copy_gbps = out->sgemm_gflops = NAN;
    if (p->n_threads < 1 || p->reps < 1 || p->gemm_n < 1 || p->gemm_n > 16384 ||
        p->read_bytes < sizeof(float) || p->copy_bytes < sizeof(float))
        return KV_ERR_INVALID;
    out->n_threads = p->n_threads;
    out->reps = p->reps;
    enum kv_status s = measure_read(&out->read_gbps, p);
    if (s == KV_OK && !stopped(p))
        s = measure_copy(&out->copy_gbps, p);
    if (s == KV_OK && !stopped(p))
        s = measure_sgemm(&out->sgemm_gflops, p);
    return s;
}
