/*
 * kv_ops.c - GEMM, RMSNorm, RoPE, SwiGLU, softmax, argmax (see kv_ops.h).
 *
 * GEMM is OpenBLAS's sgemm with the weight matrix transposed at the call
 * (the weights stay in llama2.c's (out, in) layout), split over the step's
 * thread team (kv_pool.h) by kv_gemm itself; with few rows of input (decode,
 * a serving batch, a short prefill chunk: gemv_path) it is a streaming loop
 * that reads each weight row once.
 * The element-wise ops are plain loops the compiler vectorises, split over
 * rows on the team when there is enough work to pay for waking threads; the
 * thread count is OpenMP's (omp_set_num_threads, which the runner calls),
 * the threads are kv_pool's. Each op has
 * a `_ref` twin written as plainly as possible, in double, for the tests.
 */
#include "kv_ops.h"
#include "kv_pool.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <string.h>

/* Elements of work below which an op stays on one thread. */
#define KV_OPS_PAR_MIN 32768

/* (the op's job holds *rows_per_chunk: kv_pool_run_rows) */
static void run_rows(int64_t rows, int64_t per_row, int64_t *rows_per_chunk, kv_pool_fn fn,
                     void *job)
{
    kv_pool_run_rows(omp_get_max_threads(), rows, (double)per_row, KV_OPS_PAR_MIN, rows_per_chunk,
                     fn, job);
}

/* The end of chunks [.., c1) of `per` rows each, clipped to `rows`. */
static int64_t chunk_end(int64_t c1, int64_t per, int64_t rows)
{
    return c1 * per < rows ? c1 * per : rows;
}

/* ------------------------------------------------------------------------ */
/* Argument checks (kv_ops.h: nothing is written on an error)               */

/* *n = a * b * c for non-negative factors, KV_ERR_OVERFLOW when the product
 * (an element count, later scaled by sizeof(float)) passes PTRDIFF_MAX / 8. */
static enum kv_status count3(int64_t *n, int64_t a, int64_t b, int64_t c)
{
    int64_t ab, abc;
    if (a < 0 || b < 0 || c < 0)
        return KV_ERR_INVALID;
    if (__builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, c, &abc) ||
        abc > (int64_t)(PTRDIFF_MAX / 8))
        return KV_ERR_OVERFLOW;
    *n = abc;
    return KV_OK;
}

/* RoPE's shape: rows >= 0, head_dim even and positive, heads >= 0, the
 * element count of rows * heads * head_dim an index. */
static enum kv_status rope_args(int64_t rows, int32_t heads, int32_t head_dim)
{
    int64_t n;
    if (head_dim < 2 || head_dim % 2 != 0)
        return KV_ERR_INVALID;
    return count3(&n, rows, heads, head_dim);
}

/* ------------------------------------------------------------------------ */
/* GEMM                                                                     */

/* Rows of x up to which kv_gemm streams W itself (GEMV-like) instead of
 * calling sgemm: each weight row is read once from memory for all rows of
 * x, GEMV_MB rows of x at a time against a few rows of W that stay in L1. */
#define GEMV_MAX_M 4
#define GEMV_MB 4
/*
 * With SIMD dots the streaming path also takes more rows of x, as long as
 * they stay in L2 (GEMV_X_BYTES of them) while W streams past: on the
 * AVX-512 AMD EPYC the default model's layer GEMMs at M = 5..256 ran 1.6-4x
 * faster this way than as OpenBLAS sgemm slices on the team (M = 8: 2.8
 * against 8.9 ms; M = 64: 10.7 against 22.4 ms; 2 threads, median of 21),
 * and its AVX2 build wins up to M = 64 (M = 16: 5.5 against 12.2 ms) and
 * ties at 128. That is the decode of a serving batch and a prefill chunk.
 */
#define GEMV_X_BYTES (128 * 1024)
/* Work (M*N*K) below which a GEMM runs on the calling thread only. */
#define GEMM_SERIAL_MNK (1 << 18)

/* Whether kv_gemm streams W (gemm_small_m) for M rows of x of K floats. */
static int gemv_path(int64_t M, int64_t K)
{
#if (defined(__AVX2__) && defined(__FMA__)) || defined(__AVX512F__)
    return M <= GEMV_MAX_M || M * K <= GEMV_X_BYTES / (int64_t)sizeof(float);
#else
    (void)K;
    return M <= GEMV_MAX_M;
#endif
}

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#include "kv_simd.h" /* kv_hsum8 */
#endif

/* dots[m] = x[m] . wr for m < M (M <= GEMV_MB), wr and x[m] K floats. */
static void dot_rows(float *dots, const float *x, const float *wr, int M, int64_t K)
{
    int64_t k = 0;
    float acc[GEMV_MB] = {0};
#if defined(__AVX2__) && defined(__FMA__)
    __m256 a[GEMV_MB][2];
    for (int m = 0; m < M; m++)
        a[m][0] = a[m][1] = _mm256_setzero_ps();
    for (; k + 16 <= K; k += 16) {
        __m256 w0 = _mm256_loadu_ps(wr + k), w1 = _mm256_loadu_ps(wr + k + 8);
        for (int m = 0; m < M; m++) {
            a[m][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + m * K + k), a[m][0]);
            a[m][1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + m * K + k + 8), a[m][1]);
        }
    }
    for (int m = 0; m < M; m++)
        acc[m] = kv_hsum8(_mm256_add_ps(a[m][0], a[m][1]));
#endif
    for (; k < K; k++)
        for (int m = 0; m < M; m++)
            acc[m] += x[m * K + k] * wr[k];
    for (int m = 0; m < M; m++)
        dots[m] = acc[m];
}

#ifdef __AVX512F__
/*
 * dots[m * 4 + r] = x[m] . W row r, for 4 consecutive rows of W (K floats
 * each, K a multiple of 16) and M <= GEMV_MB rows of x: 4 x M independent
 * FMA chains over four streams of W. With `pf` it also asks for the next
 * four rows of W. Measured on the AVX-512 AMD EPYC, the default model's
 * layer GEMMs (50.6 MB of W, 2 threads, median of 21 passes, 3 alternating
 * runs): for one row of x the prefetch cost 0.63-0.68 -> 0.73-0.78 ms (the
 * hardware prefetcher follows four streams per core on its own), for 2-16
 * rows, where the FMAs take as long as the loads, it overlaps the two
 * (M 4: 1.18 -> 0.85 ms; M 8: 2.4 -> 1.4 ms). gemv_rows asks for it there.
 */
static inline __attribute__((always_inline)) void dot_rows4_body(float *dots, const float *x,
                                                                  const float *w, int M,
                                                                  int64_t K, int pf)
{
    __m512 a[GEMV_MB][4];
    for (int m = 0; m < M; m++)
        for (int r = 0; r < 4; r++)
            a[m][r] = _mm512_setzero_ps();
    for (int64_t k = 0; k < K; k += 16) {
        __m512 wv[4];
        for (int r = 0; r < 4; r++) {
            if (pf)
                __builtin_prefetch(w + (4 + r) * K + k, 0, 3);
            wv[r] = _mm512_loadu_ps(w + r * K + k);
        }
        for (int m = 0; m < M; m++) {
            __m512 xv = _mm512_loadu_ps(x + m * K + k);
            for (int r = 0; r < 4; r++)
                a[m][r] = _mm512_fmadd_ps(wv[r], xv, a[m][r]);
        }
    }
    for (int m = 0; m < M; m++)
        for (int r = 0; r < 4; r++)
            dots[m * 4 + r] = _mm512_reduce_add_ps(a[m][r]);
}

static void dot_rows4(float *dots, const float *x, const float *w, int M, int64_t K)
{
    dot_rows4_body(dots, x, w, M, K, 0);
}

static void dot_rows4_pf(float *dots, const float *x, const float *w, int M, int64_t K)
{
    dot_rows4_body(dots, x, w, M, K, 1);
}
#endif

#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
/*
 * dots[m * 4 + r] = x[m] . W row r for 4 rows of W, rs floats apart, and
 * M <= 2 rows of x (K a multiple of 8), a register tile: each load of W
 * feeds M FMAs and each load of x four. 8 accumulators, the 4 W vectors and
 * x fill 13 of the 16 ymm registers; x is pinned in one (the empty asm),
 * since gcc otherwise reads it from memory in each of the four FMAs and the
 * loads, not the FMAs, set the pace. Measured on the AVX2 AMD EPYC, the
 * default model's weight GEMMs (51 MB of W, 2 threads, median of 41 or 61
 * passes, interleaved runs): M 8 3.8-4.1 ms with dot_rows (one row of W
 * against four of x, a load per FMA) against 3.0-3.2 ms; M 4 2.6-2.7
 * against 2.0-2.2; M 1 unchanged.
 *
 * gemv_rows feeds it four streams: the tile's rows lie a quarter of the
 * chunk apart (rs), so each core reads four sequential runs of W at once,
 * as the roofline's read test does, where four adjacent rows are one run.
 * One run a core leaves DRAM under its limit, and software prefetch of the
 * next rows did not make up for it. Same machine, same GEMMs, median of 31
 * passes, 6 rounds of three builds in turn, four streams over one run:
 * M 1 0.70x [0.60-0.89], M 2 0.76x, M 8 0.83x (about 2.8 -> 2.1 ms at M 1);
 * four streams with a prefetch of each one's next row: 0.80x, 0.80x, 0.87x.
 *
 * Each (m, r) has one accumulator whatever M is and wherever the row sits
 * in the tile, so a row of x gets the same bits alone as in a batch
 * (check_ops; the serving test's exact tokens rest on it).
 */
#define GEMV_TILE_M 2

/* columns k .. k+7 of the tile, x pinned */
static inline __attribute__((always_inline)) void dot_tile_8(__m256 a[][4], const float *x,
                                                              const float *w, int M, int64_t K,
                                                              int64_t k, int64_t rs)
{
    __m256 wv[4];
    for (int r = 0; r < 4; r++)
        wv[r] = _mm256_loadu_ps(w + r * rs + k);
    for (int m = 0; m < M; m++) {
        __m256 xv = _mm256_loadu_ps(x + m * K + k);
        __asm__("" : "+x"(xv));
        for (int r = 0; r < 4; r++)
            a[m][r] = _mm256_fmadd_ps(wv[r], xv, a[m][r]);
    }
}

static inline __attribute__((always_inline)) void dot_tile_body(float *dots, const float *x,
                                                                 const float *w, int M,
                                                                 int64_t K, int64_t rs)
{
    __m256 a[GEMV_TILE_M][4];
    for (int m = 0; m < M; m++)
        for (int r = 0; r < 4; r++)
            a[m][r] = _mm256_setzero_ps();
    int64_t k = 0;
    /* two vectors of each row per trip: half the loop's overhead */
    for (; k + 16 <= K; k += 16) {
        dot_tile_8(a, x, w, M, K, k, rs);
        dot_tile_8(a, x, w, M, K, k + 8, rs);
    }
    if (k < K) /* K % 16 == 8 */
        dot_tile_8(a, x, w, M, K, k, rs);
    /* the four rows' sums side by side: hadd within lanes, then the lanes */
    for (int m = 0; m < M; m++) {
        const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a[m][0], a[m][1]),
                                        _mm256_hadd_ps(a[m][2], a[m][3]));
        _mm_storeu_ps(dots + m * 4, _mm_add_ps(_mm256_castps256_ps128(h),
                                               _mm256_extractf128_ps(h, 1)));
    }
}

/* (one copy per M, so the tile's loops unroll into registers) */
static void dot_tile(float *dots, const float *x, const float *w, int M, int64_t K, int64_t rs)
{
    if (M == 1)
        dot_tile_body(dots, x, w, 1, K, rs);
    else
        dot_tile_body(dots, x, w, GEMV_TILE_M, K, rs);
}
#endif

#if (defined(__AVX2__) && defined(__FMA__)) || defined(__AVX512F__)
/* out rows m0 .. m0+mb-1, columns n + r * cs (r < 4) = d (mb x 4) + beta * out */
static inline void put_tile(float *out, const float *d, int mb, int64_t N, int64_t n, int64_t cs,
                            int64_t m0, float beta)
{
    for (int64_t m = 0; m < mb; m++) {
        float *o = out + (m0 + m) * N + n;
        for (int64_t r = 0; r < 4; r++)
            o[r * cs] = beta == 0.0f ? d[m * 4 + r] : d[m * 4 + r] + beta * o[r * cs];
    }
}
#endif

static void gemv_rows(float *out, const float *x, const float *w, int64_t M, int64_t N,
                      int64_t K, float beta, int64_t n0, int64_t n1)
{
#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
    if (K % 8 == 0 && (n1 - n0) % 4 == 0) {
        const int64_t q = (n1 - n0) / 4; /* rows of each of the four streams */
        for (int64_t n = n0; n < n0 + q; n++)
            for (int64_t m0 = 0; m0 < M; m0 += GEMV_TILE_M) {
                const int mb = M - m0 < GEMV_TILE_M ? (int)(M - m0) : GEMV_TILE_M;
                float d[GEMV_TILE_M * 4];
                dot_tile(d, x + m0 * K, w + n * K, mb, K, q * K);
                put_tile(out, d, mb, N, n, q, m0, beta);
            }
        return;
    }
#endif
#ifdef __AVX512F__
    if (K % 16 == 0 && N % 4 == 0) {
        for (int64_t n = n0; n < n1; n += 4)
            for (int64_t m0 = 0; m0 < M; m0 += GEMV_MB) {
                const int mb = M - m0 < GEMV_MB ? (int)(M - m0) : GEMV_MB;
                float d[GEMV_MB * 4] = {0};
                if (M > 1 && m0 == 0) /* the first pass over these rows */
                    dot_rows4_pf(d, x, w + n * K, mb, K);
                else
                    dot_rows4(d, x + m0 * K, w + n * K, mb, K);
                put_tile(out, d, mb, N, n, 1, m0, beta);
            }
        return;
    }
#endif
    for (int64_t n = n0; n < n1; n++)
        for (int64_t m0 = 0; m0 < M; m0 += GEMV_MB) {
            const int mb = M - m0 < GEMV_MB ? (int)(M - m0) : GEMV_MB;
            float d[GEMV_MB] = {0}; /* dot_rows fills d[0..mb); gcc cannot see it */
            dot_rows(d, x + m0 * K, w + n * K, mb, K);
            for (int64_t m = 0; m < mb; m++) {
                float *o = out + (m0 + m) * N + n;
                *o = beta == 0.0f ? d[m] : d[m] + beta * *o;
            }
        }
}

/* The decode team's GEMV job (kv_pool.h): one or more matrices that share
 * x, cut into chunks of rows, each inside one matrix (gemm_small_m). */
#define GEMV_CHUNKS_MAX 1024
struct gemv_job {
    const struct kv_gemm_part *parts;
    const float *x;
    int64_t M, K;
    float beta;
    int32_t part[GEMV_CHUNKS_MAX];
    int64_t n0[GEMV_CHUNKS_MAX], n1[GEMV_CHUNKS_MAX];
};

static void gemv_chunk(void *ctx, int64_t c0, int64_t c1, int worker)
{
    const struct gemv_job *j = ctx;
    (void)worker;
    for (int64_t c = c0; c < c1; c++) {
        const struct kv_gemm_part *q = &j->parts[j->part[c]];
        gemv_rows(q->out, j->x, q->w, j->M, q->N, j->K, j->beta, j->n0[c], j->n1[c]);
    }
}

/*
 * Chunk sizes, largest first (OpenMP's "guided" schedule): each chunk holds
 * 1/(2 x threads) of the rows still unassigned, within [GEMV_CHUNK_MIN,
 * GEMV_CHUNK_MAX] bytes of W. Long first chunks give each thread runs the
 * hardware prefetcher follows; short last ones let the threads finish
 * together, where equal chunks of W / (2 x threads) left one thread idle
 * for up to half a chunk at the end of each of the step's 16 GEMVs. On the
 * AVX-512 AMD EPYC the default model's weight GEMVs (50.6 MB, 2 threads,
 * median of 41 passes, 8 alternating runs) took 0.95-1.08 ms with equal
 * chunks and 0.88-1.02 ms with these. A thread that loses its CPU inside a
 * chunk holds back at most GEMV_CHUNK_MAX bytes of work.
 */
#define GEMV_CHUNK_MIN 65536
#define GEMV_CHUNK_MAX (1 << 20)

/* out_p (M, N_p) = beta*out_p + x W_p^T for M rows gemv_path takes, every part in
 * one call of the decode team (kv_pool.h): each W is streamed once, and the
 * parts share one wait for the team. */
static void gemm_small_m(const struct kv_gemm_part *parts, int n_parts, const float *x,
                         int64_t M, int64_t K, float beta)
{
    const int nt = kv_pool_threads(omp_get_max_threads());
    int64_t total = 0;
    for (int p = 0; p < n_parts; p++)
        total += parts[p].N;
    struct gemv_job j; /* (not zeroed: 20 KB a call, and only n entries are read) */
    j.parts = parts;
    j.x = x;
    j.M = M;
    j.K = K;
    j.beta = beta;
    const int64_t row_bytes = K * (int64_t)sizeof(float);
    int64_t lo = GEMV_CHUNK_MIN / row_bytes, hi = GEMV_CHUNK_MAX / row_bytes;
    /* a W over 512 MiB gets longer chunks: at most half the table at hi */
    if (hi < total / (GEMV_CHUNKS_MAX / 2) + 1)
        hi = total / (GEMV_CHUNKS_MAX / 2) + 1;
    lo = lo < 4 ? 4 : lo / 4 * 4; /* whole groups of dot_rows4's four rows */
    hi = hi < lo ? lo : (hi + 3) / 4 * 4;
    int64_t left = total, n = 0;
    for (int p = 0; p < n_parts; p++)
        for (int64_t r = 0; r < parts[p].N; n++) {
            int64_t size = left / (2 * nt) / 4 * 4;
            size = size < lo ? lo : size > hi ? hi : size;
            /* (never reached below 64 threads: the rest of the part) */
            if (size > parts[p].N - r || n >= GEMV_CHUNKS_MAX - KV_GEMM_MULTI_MAX)
                size = parts[p].N - r;
            j.part[n] = p;
            j.n0[n] = r;
            j.n1[n] = r + size;
            r += size;
            left -= size;
        }
    if (M * total * K < GEMM_SERIAL_MNK)
        gemv_chunk(&j, 0, n, 0);
    else
        kv_pool_run(nt, n, gemv_chunk, &j);
}

static void sgemm_nt(float *out, const float *x, const float *w, int64_t M, int64_t N,
                     int64_t K, float beta, int64_t ldo)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0f, x,
                (int)K, w, (int)K, beta, out, (int)ldo);
}

/* A big GEMM on the step's team: out's columns (W's rows) or out's rows
 * (x's rows) cut into `slices`, one sgemm each. */
struct gemm_job {
    float *out;
    const float *x, *w;
    int64_t M, N, K;
    float beta;
    int by_cols;
    int64_t slices;
};

static void gemm_slices(void *ctx, int64_t c0, int64_t c1, int worker)
{
    const struct gemm_job *j = ctx;
    (void)worker;
    for (int64_t c = c0; c < c1; c++) {
        if (j->by_cols) {
            int64_t n0 = j->N * c / j->slices, n1 = j->N * (c + 1) / j->slices;
            if (n1 > n0)
                sgemm_nt(j->out + n0, j->x, j->w + n0 * j->K, j->M, n1 - n0, j->K, j->beta, j->N);
        } else {
            int64_t m0 = j->M * c / j->slices, m1 = j->M * (c + 1) / j->slices;
            if (m1 > m0)
                sgemm_nt(j->out + m0 * j->N, j->x + m0 * j->K, j->w, m1 - m0, j->N, j->K, j->beta,
                         j->N);
        }
    }
}

/*
 * Threads: the runner keeps OpenBLAS single-threaded and kv_gemm splits a big
 * GEMM across the step's team itself (kv_pool.h: slices of W, or of x when
 * W is the smaller side), so the whole forward uses one thread pool;
 * two pools (OpenBLAS's and OpenMP's) spinning against each other on few
 * cores cost several times the GEMM itself.
 */
/* What OpenBLAS runs before fork(2) to stop its threads (the child starts
 * them afresh). Weak: other builds (OpenMP's) lack it, and then only the
 * thread count is set. */
extern int blas_thread_shutdown_(void) __attribute__((weak));

void kv_blas_single(void)
{
    openblas_set_num_threads(1);
    if (blas_thread_shutdown_ != NULL)
        (void)blas_thread_shutdown_();
}

/* The checks of kv_gemm and kv_gemm_ref; *mnk2 = 2*M*N*K. */
static enum kv_status gemm_args(const float *out, const float *x, const float *w, int64_t M,
                                int64_t N, int64_t K, int64_t *mnk2)
{
    int64_t mnk;
    if (M < 0 || N < 0 || K < 0 || M > INT_MAX || N > INT_MAX || K > INT_MAX)
        return KV_ERR_INVALID;
    if (M > 0 && N > 0 && (out == NULL || (K > 0 && (x == NULL || w == NULL))))
        return KV_ERR_INVALID;
    if (__builtin_mul_overflow(M * N, K, &mnk) || __builtin_mul_overflow(mnk, 2, mnk2))
        return KV_ERR_OVERFLOW;
    return KV_OK;
}

/* out (M, N) <- beta * out: a GEMM with K = 0 (no BLAS call takes lda 0). */
static void gemm_scale(float *out, int64_t M, int64_t N, float beta)
{
    for (int64_t i = 0; i < M * N; i++)
        out[i] = beta == 0.0f ? 0.0f : beta * out[i];
}

enum kv_status kv_gemm(float *out, const float *x, const float *w, int64_t M, int64_t N,
                       int64_t K, float beta, int64_t *flops)
{
    int64_t mnk2;
    enum kv_status st = gemm_args(out, x, w, M, N, K, &mnk2);
    if (st != KV_OK)
        return st;
    if (flops != NULL)
        *flops += mnk2;
    if (M == 0 || N == 0)
        return KV_OK;
    if (K == 0) {
        gemm_scale(out, M, N, beta);
        return KV_OK;
    }
    if (gemv_path(M, K)) {
        const struct kv_gemm_part part = {out, w, N};
        gemm_small_m(&part, 1, x, M, K, beta);
        return KV_OK;
    }
    const int nt = kv_pool_threads(omp_get_max_threads());
    if (M * N * K < GEMM_SERIAL_MNK || omp_in_parallel() || nt == 1) {
        sgemm_nt(out, x, w, M, N, K, beta, N);
        return KV_OK;
    }
    /* slices of the longer side, a few per thread so a thread that gets no
     * CPU leaves its share to the others (kv_pool.h) */
    struct gemm_job j = {out, x, w, M, N, K, beta, N >= M, 0};
    const int64_t side = j.by_cols ? N : M;
    j.slices = 4 * (int64_t)nt < side / 16 ? 4 * (int64_t)nt : (side / 16 > 1 ? side / 16 : 1);
    kv_pool_run(nt, j.slices, gemm_slices, &j);
    return KV_OK;
}

enum kv_status kv_gemm_multi(const struct kv_gemm_part *parts, int n_parts, const float *x,
                             int64_t M, int64_t K, float beta, int64_t *flops)
{
    if (n_parts < 0 || n_parts > KV_GEMM_MULTI_MAX || (n_parts > 0 && parts == NULL))
        return KV_ERR_INVALID;
    int64_t sum = 0, mnk2;
    for (int p = 0; p < n_parts; p++) {
        enum kv_status st = gemm_args(parts[p].out, x, parts[p].w, M, parts[p].N, K, &mnk2);
        if (st == KV_OK && __builtin_add_overflow(sum, mnk2, &sum))
            st = KV_ERR_OVERFLOW;
        if (st != KV_OK)
            return st; /* nothing written yet */
    }
    if (M >= 1 && K > 0 && gemv_path(M, K)) {
        if (flops != NULL)
            *flops += sum;
        gemm_small_m(parts, n_parts, x, M, K, beta);
        return KV_OK;
    }
    for (int p = 0; p < n_parts; p++)
        (void)kv_gemm(parts[p].out, x, parts[p].w, M, parts[p].N, K, beta, flops);
    return KV_OK;
}

enum kv_status kv_gemm_ref(float *out, const float *x, const float *w, int64_t M, int64_t N,
                           int64_t K, float beta, int64_t *flops)
{
    int64_t mnk2;
    enum kv_status st = gemm_args(out, x, w, M, N, K, &mnk2);
    if (st != KV_OK)
        return st;
    if (flops != NULL)
        *flops += mnk2;
    for (int64_t m = 0; m < M; m++) {
        for (int64_t n = 0; n < N; n++) {
            double acc = 0.0;
            for (int64_t k = 0; k < K; k++)
                acc += (double)x[m * K + k] * (double)w[n * K + k];
            if (beta != 0.0f)
                acc += (double)beta * (double)out[m * N + n];
            out[m * N + n] = (float)acc;
        }
    }
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* RMSNorm                                                                  */

/* o may equal x (in place), so neither is restrict */
static void rmsnorm_row(float *o, const float *x, const float *restrict w,
                        int32_t dim)
{
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int32_t i = 0; i < dim; i++)
        ss += x[i] * x[i];
    float inv = 1.0f / sqrtf(ss / (float)dim + KV_RMSNORM_EPS);
    for (int32_t i = 0; i < dim; i++)
        o[i] = x[i] * inv * w[i];
}

/* The checks of both RMSNorms. */
static enum kv_status rmsnorm_args(const float *out, const float *x, const float *w,
                                   int64_t rows, int32_t dim)
{
    int64_t n;
    if (dim < 1 || (rows > 0 && (out == NULL || x == NULL || w == NULL)))
        return KV_ERR_INVALID;
    return count3(&n, rows, dim, 1);
}

struct rmsnorm_job {
    float *out;
    const float *x, *w;
    int64_t rows;
    int32_t dim;
    int64_t per;
};

static void rmsnorm_chunk(void *ctx, int64_t c0, int64_t c1, int worker)
{
    const struct rmsnorm_job *j = ctx;
    (void)worker;
    const int64_t r0 = c0 * j->per, r1 = chunk_end(c1, j->per, j->rows);
    for (int64_t r = r0; r < r1; r++)
        rmsnorm_row(j->out + r * j->dim, j->x + r * j->dim, j->w, j->dim);
}

enum kv_status kv_rmsnorm(float *out, const float *x, const float *w, int64_t rows, int32_t dim)
{
    enum kv_status st = rmsnorm_args(out, x, w, rows, dim);
    if (st != KV_OK)
        return st;
    struct rmsnorm_job j = {out, x, w, rows, dim, 0};
    run_rows(rows, dim, &j.per, rmsnorm_chunk, &j);
    return KV_OK;
}

enum kv_status kv_rmsnorm_ref(float *out, const float *x, const float *w, int64_t rows,
                              int32_t dim)
{
    enum kv_status st = rmsnorm_args(out, x, w, rows, dim);
    if (st != KV_OK)
        return st;
    for (int64_t r = 0; r < rows; r++) {
        double ss = 0.0;
        for (int32_t i = 0; i < dim; i++)
            ss += (double)x[r * dim + i] * (double)x[r * dim + i];
        double inv = 1.0 / sqrt(ss / dim + (double)KV_RMSNORM_EPS);
        for (int32_t i = 0; i < dim; i++)
            out[r * dim + i] = (float)((double)x[r * dim + i] * inv * (double)w[i]);
    }
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* RoPE                                                                     */

/* Pairs handled per block: their cos/sin live on the stack. */
#define ROPE_BLOCK 64

/* Rotates pairs [p0, p0+np) of each of n_heads heads of one row. */
static void rope_rotate(float *row, int32_t n_heads, int32_t head_dim, int32_t p0,
                        int32_t np, const float *c, const float *s)
{
    for (int32_t h = 0; h < n_heads; h++) {
        float *x = row + (int64_t)h * head_dim + 2 * p0;
        for (int32_t j = 0; j < np; j++) {
            float x0 = x[2 * j], x1 = x[2 * j + 1];
            x[2 * j] = x0 * c[j] - x1 * s[j];
            x[2 * j + 1] = x0 * s[j] + x1 * c[j];
        }
    }
}

/* The checks of both RoPEs. */
static enum kv_status rope_qk_args(const float *q, int32_t n_heads, const float *k,
                                   int32_t n_kv_heads, int64_t rows, int32_t head_dim,
                                   const int32_t *pos)
{
    enum kv_status st = rope_args(rows, n_heads, head_dim);
    if (st == KV_OK && k != NULL)
        st = rope_args(rows, n_kv_heads, head_dim);
    if (st == KV_OK && rows > 0 && (q == NULL || pos == NULL))
        st = KV_ERR_INVALID;
    return st;
}

struct rope_job {
    float *q, *k;
    const int32_t *pos;
    const double *inv_freq;
    int64_t rows;
    int32_t n_heads, n_kv_heads, head_dim, p0, np;
    int64_t per;
};

static void rope_chunk(void *ctx, int64_t c0, int64_t c1, int worker)
{
    const struct rope_job *j = ctx;
    (void)worker;
    const int64_t r0 = c0 * j->per, r1 = chunk_end(c1, j->per, j->rows);
    for (int64_t r = r0; r < r1; r++) {
        float c[ROPE_BLOCK], s[ROPE_BLOCK];
        for (int32_t i = 0; i < j->np; i++) {
            double a = (double)j->pos[r] * j->inv_freq[i];
            c[i] = (float)cos(a);
            s[i] = (float)sin(a);
        }
        rope_rotate(j->q + r * j->n_heads * j->head_dim, j->n_heads, j->head_dim, j->p0, j->np,
                    c, s);
        if (j->k != NULL)
            rope_rotate(j->k + r * j->n_kv_heads * j->head_dim, j->n_kv_heads, j->head_dim,
                        j->p0, j->np, c, s);
    }
}

enum kv_status kv_rope(float *q, int32_t n_heads, float *k, int32_t n_kv_heads, int64_t rows,
                       int32_t head_dim, const int32_t *pos)
{
    enum kv_status st = rope_qk_args(q, n_heads, k, n_kv_heads, rows, head_dim, pos);
    if (st != KV_OK)
        return st;
    int32_t half = head_dim / 2;
    for (int32_t p0 = 0; p0 < half; p0 += ROPE_BLOCK) {
        int32_t np = half - p0 < ROPE_BLOCK ? half - p0 : ROPE_BLOCK;
        double inv_freq[ROPE_BLOCK];
        for (int32_t j = 0; j < np; j++)
            inv_freq[j] = pow(KV_ROPE_THETA, -(double)(2 * (p0 + j)) / head_dim);
        struct rope_job j = {q, k, pos, inv_freq, rows, n_heads, n_kv_heads, head_dim, p0, np, 0};
        run_rows(rows, (int64_t)head_dim * n_heads, &j.per, rope_chunk, &j);
    }
    return KV_OK;
}

enum kv_status kv_rope_shift(float *dst, const float *src, int64_t rows, int32_t head_dim,
                             int32_t delta)
{
    enum kv_status st = rope_args(rows, 1, head_dim);
    if (st != KV_OK)
        return st;
    if (rows > 0 && (dst == NULL || src == NULL))
        return KV_ERR_INVALID;
    const int32_t half = head_dim / 2;
    for (int32_t p0 = 0; p0 < half; p0 += ROPE_BLOCK) {
        const int32_t np = half - p0 < ROPE_BLOCK ? half - p0 : ROPE_BLOCK;
        float c[ROPE_BLOCK], s[ROPE_BLOCK];
        for (int32_t j = 0; j < np; j++) { /* the angles of kv_rope at position delta */
            const double a = (double)delta * pow(KV_ROPE_THETA, -(double)(2 * (p0 + j)) / head_dim);
            c[j] = (float)cos(a);
            s[j] = (float)sin(a);
        }
        for (int64_t r = 0; r < rows; r++) {
            float *x = dst + r * head_dim;
            if (dst != src)
                memcpy(x + 2 * p0, src + r * head_dim + 2 * p0, (size_t)np * 2 * sizeof(float));
            rope_rotate(x, 1, head_dim, p0, np, c, s);
        }
    }
    return KV_OK;
}

static void rope_ref_one(float *x, int32_t n_heads, int64_t rows, int32_t head_dim,
                         const int32_t *pos)
{
    for (int64_t r = 0; r < rows; r++) {
        for (int32_t h = 0; h < n_heads; h++) {
            float *v = x + (r * n_heads + h) * head_dim;
            for (int32_t i = 0; i < head_dim; i += 2) {
                double freq = 1.0 / pow(KV_ROPE_THETA, (double)i / (double)head_dim);
                double a = (double)pos[r] * freq;
                double x0 = v[i], x1 = v[i + 1];
                v[i] = (float)(x0 * cos(a) - x1 * sin(a));
                v[i + 1] = (float)(x0 * sin(a) + x1 * cos(a));
            }
        }
    }
}

enum kv_status kv_rope_ref(float *q, int32_t n_heads, float *k, int32_t n_kv_heads,
                           int64_t rows, int32_t head_dim, const int32_t *pos)
{
    enum kv_status st = rope_qk_args(q, n_heads, k, n_kv_heads, rows, head_dim, pos);
    if (st != KV_OK)
        return st;
    rope_ref_one(q, n_heads, rows, head_dim, pos);
    if (k != NULL)
        rope_ref_one(k, n_kv_heads, rows, head_dim, pos);
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* SwiGLU                                                                   */

static enum kv_status swiglu_args(const float *a, const float *b, int64_t n)
{
    int64_t c;
    if (n > 0 && (a == NULL || b == NULL))
        return KV_ERR_INVALID;
    return count3(&c, n, 1, 1);
}

struct swiglu_job {
    float *a;
    const float *b;
    int64_t n, per;
};

static void swiglu_chunk(void *ctx, int64_t c0, int64_t c1, int worker)
{
    const struct swiglu_job *j = ctx;
    (void)worker;
    const int64_t i0 = c0 * j->per, i1 = chunk_end(c1, j->per, j->n);
    for (int64_t i = i0; i < i1; i++) {
        float x = j->a[i];
        j->a[i] = x / (1.0f + expf(-x)) * j->b[i];
    }
}

enum kv_status kv_swiglu(float *a, const float *b, int64_t n)
{
    enum kv_status st = swiglu_args(a, b, n);
    if (st != KV_OK)
        return st;
    struct swiglu_job j = {a, b, n, 0};
    run_rows(n, 1, &j.per, swiglu_chunk, &j);
    return KV_OK;
}

enum kv_status kv_swiglu_ref(float *a, const float *b, int64_t n)
{
    enum kv_status st = swiglu_args(a, b, n);
    if (st != KV_OK)
        return st;
    for (int64_t i = 0; i < n; i++) {
        double x = a[i];
        a[i] = (float)(x / (1.0 + exp(-x)) * (double)b[i]);
    }
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* Softmax, argmax                                                          */

enum kv_status kv_softmax(float *x, int32_t n)
{
    if (x == NULL || n < 1)
        return KV_ERR_INVALID;
    float mx = x[0];
    for (int32_t i = 1; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;
    float sum = 0.0f;
    for (int32_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    float inv = 1.0f / sum;
    for (int32_t i = 0; i < n; i++)
        x[i] *= inv;
    return KV_OK;
}

enum kv_status kv_softmax_ref(float *x, int32_t n)
{
    if (x == NULL || n < 1)
        return KV_ERR_INVALID;
    double mx = x[0];
    for (int32_t i = 1; i < n; i++)
        if (x[i] > mx)
            mx = x[i];
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++)
        sum += exp((double)x[i] - mx);
    for (int32_t i = 0; i < n; i++)
        x[i] = (float)(exp((double)x[i] - mx) / sum);
    return KV_OK;
}

int32_t kv_argmax(const float *x, int32_t n)
{
    if (x == NULL || n < 1)
        return -1;
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}
