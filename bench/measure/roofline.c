/*
 * roofline.c - measure the machine's limits on the run's threads: read
 * bandwidth from DRAM (an OpenMP sum over a float array of more than twice
 * the L3, each thread reading its part as four streams at once) and from the L3 (the same sum, repeated over an array of an
 * eighth of it), copy bandwidth (an OpenMP copy between two large arrays)
 * and the cblas_sgemm rate. A cold kernel measurement is compared with the
 * first, a hot one (its cache reused call after call) with the second.
 *
 * Every buffer is allocated with kv_alloc (zero-filled, so every page is
 * touched) and then written once by the same threads, with the same static
 * schedule, that later read it: no page fault lands inside a timed pass.
 * Each test runs once untimed, then `reps` timed passes; the limit is the
 * best pass (a limit is what the machine can do, and a pass can only lose
 * to interference, never gain), and the median's distance from it is kept
 * as the test's spread, so a reader sees how steady the machine was.
 * On a shared machine a pass during which another program took a core (the
 * process got under KV_ROOFLINE_MIN_UTIL of the CPU it asked for) is not
 * kept and is run again, up to KV_ROOFLINE_MAX_TRIES times as many passes.
 * Copy bandwidth counts bytes read plus bytes written (as STREAM does; the
 * write-allocate traffic the hardware adds is not counted).
 */
#include "roofline.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../kernels/kv_ops.h"
#include "stats.h"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */

static int stopped(const struct kv_roofline_params *p)
{
    return p->stop != NULL && *p->stop;
}

/* The result of each read pass goes here so the sum cannot be optimised away. */
static volatile float roofline_sink;

/*
 * Runs pass(ctx) until `reps` undisturbed passes are timed into t[], or
 * KV_ROOFLINE_MAX_TRIES * reps passes were made. A pass is disturbed when
 * the process got less than KV_ROOFLINE_MIN_UTIL of the CPU it asked for
 * (another program took a core): it is not kept, unless too few passes were
 * undisturbed; then the last disturbed ones fill t[]. When the first `reps`
 * passes were all disturbed the machine is busy throughout and no pass is
 * run again: beside three CPU-bound loops every pass was disturbed, and the
 * retries tripled the time of a measurement that could not come out clean
 * (a sweep measures the limits twice). Returns the number of times in t
 * (reps unless stopped).
 */
static int32_t timed_passes(double *t, const struct kv_roofline_params *p,
                            void (*pass)(void *ctx), void *ctx)
{
    int32_t kept = 0, tries = 0, n_spare = 0;
    double *spare = kv_alloc((size_t)p->reps * sizeof(double)); /* the last disturbed times */
    while (kept < p->reps && tries < KV_ROOFLINE_MAX_TRIES * p->reps && !stopped(p)) {
        int64_t c0 = kv_cpu_now_ns(), t0 = kv_now_ns();
        pass(ctx);
        int64_t wall = kv_now_ns() - t0, cpu = kv_cpu_now_ns() - c0;
        tries++;
        if ((double)cpu >= KV_ROOFLINE_MIN_UTIL * (double)wall * p->n_threads)
            t[kept++] = (double)wall;
        else if (spare != NULL)
            spare[n_spare++ % p->reps] = (double)wall;
        if (kept == 0 && tries >= p->reps)
            break; /* busy throughout */
    }
    for (int32_t i = 0; kept < p->reps && !stopped(p) && i < n_spare && i < p->reps; i++)
        t[kept++] = spare[i]; /* never undisturbed enough: report what was seen */
    kv_free(spare);
    return kept;
}

/* work / best time into *rate, median / best - 1 into *spread; NaN for
 * both unless all `reps` passes were timed. */
static void best_and_spread(double *rate, double *spread, double work, double *t, int32_t done,
                            int32_t reps)
{
    *rate = *spread = NAN;
    if (done != reps || done < 1)
        return;
    double best = t[0];
    for (int32_t i = 1; i < done; i++)
        best = t[i] < best ? t[i] : best;
    *rate = work / best;
    *spread = kv_stats_median(t, done) / best - 1.0;
}

/* ------------------------------------------------------------------------ */
/* Tests                                                                    */

/* x (n) <- value, written by the threads that will read it. */
static void fill(float *x, size_t n, float value, int32_t nt)
{
#pragma omp parallel for schedule(static) num_threads(nt)
    for (size_t i = 0; i < n; i++)
        x[i] = value;
}

/* sum of x (n), `sweeps` times over: 4n bytes read per sweep. One parallel
 * region for all sweeps (a region per sweep would wait at a barrier each
 * time); each thread reads the same static chunk that fill() wrote, as
 * ROOFLINE_STREAMS equal parts in lockstep, each into its own accumulator.
 * Why several streams: one sequential stream per core leaves DRAM under
 * its limit (on the 2-core Xeon VM one stream read 26.7 GB/s, four 31.6),
 * while the attention kernel reads K and V of several heads at once; a
 * limit below what the kernel reaches would put it above 100%. */
#define ROOFLINE_STREAMS 4
static float sum(const float *x, size_t n, int32_t sweeps, int32_t nt)
{
    float s = 0.0f;
#pragma omp parallel num_threads(nt) reduction(+ : s)
    {
        size_t t = (size_t)omp_get_thread_num(), nth = (size_t)omp_get_num_threads();
        size_t lo = n / nth * t + (t < n % nth ? t : n % nth);
        size_t hi = lo + n / nth + (t < n % nth ? 1 : 0);
        size_t part = (hi - lo) / ROOFLINE_STREAMS;
        const float *x0 = x + lo, *x1 = x0 + part, *x2 = x1 + part, *x3 = x2 + part;
        for (int32_t k = 0; k < sweeps; k++) {
            float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
#pragma omp simd reduction(+ : a0, a1, a2, a3)
            for (size_t i = 0; i < part; i++) {
                a0 += x0[i];
                a1 += x1[i];
                a2 += x2[i];
                a3 += x3[i];
            }
            /* the few floats past the last whole part */
            for (size_t i = lo + ROOFLINE_STREAMS * part; i < hi; i++)
                a0 += x[i];
            s += (a0 + a1) + (a2 + a3);
        }
    }
    return s;
}

/* dst (n) <- src (n): 4n bytes read, 4n bytes written. */
static void copy(float *restrict dst, const float *restrict src, size_t n, int32_t nt)
{
#pragma omp parallel for simd schedule(static) num_threads(nt)
    for (size_t i = 0; i < n; i++)
        dst[i] = src[i];
}

/* Contexts of the three timed passes. */
struct read_ctx {
    const float *x;
    size_t n;
    int32_t nt;
    int32_t sweeps; /* passes over x per timed pass */
};
struct copy_ctx {
    float *dst;
    const float *src;
    size_t n;
    int32_t nt;
};
struct gemm_ctx {
    const float *a, *b;
    float *c;
    int n;
};

static void read_pass(void *ctx)
{
    const struct read_ctx *r = ctx;
    roofline_sink = sum(r->x, r->n, r->sweeps, r->nt);
}

static void copy_pass(void *ctx)
{
    const struct copy_ctx *c = ctx;
    copy(c->dst, c->src, c->n, c->nt);
}

/* c (n, n) = a (n, n) b (n, n) */
static void gemm_pass(void *ctx)
{
    const struct gemm_ctx *g = ctx;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g->n, g->n, g->n, 1.0f, g->a,
                g->n, g->b, g->n, 0.0f, g->c, g->n);
}

/* Read bandwidth over an array of `bytes`, summed `sweeps` times a pass. */
static enum kv_status measure_read(double *gbps, double *spread,
                                   const struct kv_roofline_params *p, size_t bytes,
                                   int32_t sweeps)
{
    size_t n = bytes / sizeof(float);
    float *x = kv_alloc(n * sizeof(float));
    double *t = kv_alloc((size_t)p->reps * sizeof(double));
    if (x == NULL || t == NULL) {
        kv_free(x);
        kv_free(t);
        return KV_ERR_NOMEM;
    }
    fill(x, n, 1.0f, p->n_threads);
    struct read_ctx ctx = {x, n, p->n_threads, sweeps};
    read_pass(&ctx); /* untimed warm-up pass */
    int32_t done = timed_passes(t, p, read_pass, &ctx);
    best_and_spread(gbps, spread, (double)sweeps * (double)(n * sizeof(float)), t, done, p->reps);
    kv_free(x);
    kv_free(t);
    return KV_OK;
}

static enum kv_status measure_copy(double *gbps, double *spread,
                                   const struct kv_roofline_params *p)
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
    struct copy_ctx ctx = {b, a, n, p->n_threads};
    copy_pass(&ctx); /* untimed warm-up pass */
    int32_t done = timed_passes(t, p, copy_pass, &ctx);
    roofline_sink = b[n / 2];
    best_and_spread(gbps, spread, 2.0 * (double)(n * sizeof(float)), t, done, p->reps);
    kv_free(a);
    kv_free(b);
    kv_free(t);
    return KV_OK;
}

static enum kv_status measure_sgemm(double *gflops, double *spread,
                                    const struct kv_roofline_params *p)
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
    /* The sgemm rate is OpenBLAS's own threading at its best; the kernel and
     * the model need OpenBLAS at one thread (they split their work on kv_pool's team), so the
     * previous setting is restored afterwards, and at one thread its idle
     * threads stopped (kv_blas_single), else they spin into what runs next. */
    const int blas_threads = openblas_get_num_threads();
    openblas_set_num_threads(p->n_threads);
    struct gemm_ctx ctx = {a, b, c, p->gemm_n};
    gemm_pass(&ctx); /* untimed warm-up call */
    int32_t done = timed_passes(t, p, gemm_pass, &ctx);
    if (blas_threads <= 1)
        kv_blas_single();
    else
        openblas_set_num_threads(blas_threads);
    roofline_sink = c[n * n / 2];
    best_and_spread(gflops, spread, 2.0 * (double)n * (double)n * (double)n, t, done, p->reps);
    kv_free(a);
    kv_free(b);
    kv_free(c);
    kv_free(t);
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* Public                                                                   */

/* passes over the L3 array per timed pass: as many bytes as the DRAM test
 * reads, at most 4096 */
static int32_t l3_sweeps(const struct kv_roofline_params *p)
{
    size_t sw = (p->read_bytes + p->read_l3_bytes - 1) / p->read_l3_bytes;
    return sw > 4096 ? 4096 : (int32_t)sw;
}

void kv_roofline_defaults(struct kv_roofline_params *p, int32_t n_threads)
{
    memset(p, 0, sizeof(*p));
    p->n_threads = n_threads;
    size_t l3 = kv_l3_bytes();
    p->read_bytes = (size_t)256 << 20;
    if (p->read_bytes < 2 * l3)
        p->read_bytes = 2 * l3;
    p->read_l3_bytes = l3 / 8;
    if (p->read_l3_bytes < ((size_t)1 << 20))
        p->read_l3_bytes = (size_t)1 << 20;
    if (p->read_l3_bytes > ((size_t)32 << 20))
        p->read_l3_bytes = (size_t)32 << 20;
    p->copy_bytes = (size_t)128 << 20;
    p->gemm_n = 2048;
    p->reps = 30;
}

enum kv_status kv_roofline_measure(struct kv_roofline *out,
                                   const struct kv_roofline_params *p)
{
    out->read_gbps = out->read_l3_gbps = out->copy_gbps = out->sgemm_gflops = NAN;
    out->read_spread = out->read_l3_spread = out->copy_spread = out->sgemm_spread = NAN;
    if (p->n_threads < 1 || p->reps < 1 || p->gemm_n < 1 || p->gemm_n > 16384 ||
        p->read_bytes < sizeof(float) || p->read_l3_bytes < sizeof(float) ||
        p->copy_bytes < sizeof(float))
        return KV_ERR_INVALID;
    out->n_threads = p->n_threads;
    out->reps = p->reps;
    enum kv_status s = measure_read(&out->read_gbps, &out->read_spread, p, p->read_bytes, 1);
    if (s == KV_OK && !stopped(p)) {
        s = measure_read(&out->read_l3_gbps, &out->read_l3_spread, p, p->read_l3_bytes,
                         l3_sweeps(p));
    }
    if (s == KV_OK && !stopped(p))
        s = measure_copy(&out->copy_gbps, &out->copy_spread, p);
    if (s == KV_OK && !stopped(p))
        s = measure_sgemm(&out->sgemm_gflops, &out->sgemm_spread, p);
    return s;
}

enum kv_status kv_read_probe_open(struct kv_read_probe *p, const struct kv_roofline_params *rp,
                                  int l3)
{
    memset(p, 0, sizeof(*p));
    const size_t bytes = l3 ? rp->read_l3_bytes : rp->read_bytes;
    if (bytes < sizeof(float) || rp->read_bytes < sizeof(float) || rp->n_threads < 1)
        return KV_ERR_INVALID;
    const int32_t sweeps = l3 ? l3_sweeps(rp) : 1, n_threads = rp->n_threads;
    p->n = bytes / sizeof(float);
    p->x = kv_alloc(p->n * sizeof(float));
    if (p->x == NULL)
        return KV_ERR_NOMEM;
    p->sweeps = sweeps;
    p->n_threads = n_threads;
    fill(p->x, p->n, 1.0f, n_threads);
    return KV_OK;
}

double kv_read_probe_best(struct kv_read_probe *p, int32_t passes)
{
    if (p->x == NULL || passes < 1)
        return NAN;
    struct kv_roofline_params rp = {.n_threads = p->n_threads, .reps = passes};
    struct read_ctx ctx = {p->x, p->n, p->n_threads, p->sweeps};
    double *t = kv_alloc((size_t)passes * sizeof(double));
    if (t == NULL)
        return NAN;
    read_pass(&ctx); /* the caches and TLB hold the kernel's data, not ours */
    int32_t done = timed_passes(t, &rp, read_pass, &ctx);
    double gbps, spread;
    best_and_spread(&gbps, &spread, (double)p->sweeps * (double)(p->n * sizeof(float)), t, done,
                    passes);
    kv_free(t);
    return gbps;
}

void kv_read_probe_close(struct kv_read_probe *p)
{
    kv_free(p->x);
    memset(p, 0, sizeof(*p));
}
