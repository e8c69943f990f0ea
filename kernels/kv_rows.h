/*
 * kv_rows.h - private: the decode kernel's per-dtype row kernels
 * (kernels/rows_<dtype>.c) and the job they read, plus the SIMD helpers the
 * row files share.
 *
 * The design decision: the row kernels of a (span, sequence, kv head) are
 * chosen ONCE, when the driver (kv_attn_decode.c) binds the job, by the
 * dtype's bind function (ggml-cpu's per-type vec_dot tables): it looks at the
 * dtype, the ISA the file was built for, the GQA factor and the shape
 * (head_dim, group), and stores function pointers, specialised for the
 * common shapes. Each 64-row block then makes one indirect call for its
 * scores and one for its weighted values, with no if-ladder in between. A
 * new dtype is a new rows_<dtype>.c exporting kv_rows_bind_<dtype> and a line
 * in the driver's table (an integer one: its code readers and an include of
 * rows_int.h; a float one: of rows_float.h); a dtype without one (or a
 * per-channel side) is served by the driver's generic path, each block
 * dequantized into an f32 tile through the dtype's to_float_row.
 *
 * Three levels in every row file: AVX-512 (16 lanes), AVX2 (8 lanes),
 * scalar; each level takes the shapes it can and leaves the rest to the
 * next, so every shape works on every machine. The integer files pick
 * their level when compiled (-march); the float files (rows_f32.c,
 * rows_f16.c, rows_bf16.c through rows_float.h) when bound, from kv_isa(),
 * so one binary uses what the CPU it runs on has.
 */
#ifndef KV_ROWS_H
#define KV_ROWS_H

#include "kv_attention_impl.h"
#include "kv_simd.h"

#include <math.h>
#include <string.h>

#define KV_ATTN_DEC_KB 64 /* decode: key rows per online-softmax block */
#define DEC_KB KV_ATTN_DEC_KB

/* One side (K or V) of a span as its row kernels read it: rows `stride`
 * bytes apart, qparams rows `qp_stride` apart (per-token axis). */
struct kv_rows_side {
    enum kv_dtype dt;
    int32_t group, ng; /* elements per qparams pair, pairs per row */
    size_t stride, qp_stride;
    size_t bytes;    /* one row's elements: what kv_rows_ahead asks for */
    int32_t ahead;   /* kv_rows_ahead's distance in rows, 0 off: set by a bind whose
                        kernels call it, where the job's rows come from DRAM */
};

struct kv_dec_job;

/* sc (g, DEC_KB) <- qs . k_row(j) for j < nb: rows at k + j*s->stride,
 * their qparams at kqp + j*s->qp_stride (sc is the block's column 0 of
 * this run: the heads' rows are DEC_KB apart). */
typedef void (*kv_rows_scores_fn)(float *sc, const struct kv_dec_job *J,
                                  const struct kv_rows_side *s, const char *k, const char *kqp,
                                  int32_t nb);

/*
 * acc_i (d) += sum_j pr[i][j] * v_row(j) for each head i of the group
 * (acc_i at acc + i*acc_stride, pr rows DEC_KB apart). Quantized rows may
 * instead add pr*scale_g * codes to acc_i and pr*min_g to msum (g, ng),
 * which the driver folds in at the end; w (DEC_KB * ng floats) is scratch.
 */
typedef void (*kv_rows_pv_fn)(float *acc, size_t acc_stride, float *msum, float *w,
                              const float *pr, const struct kv_dec_job *J,
                              const struct kv_rows_side *s, const char *v, const char *vqp,
                              int32_t nb);

/* dst (nb, d) <- rows (and their qparams) dequantized to f32. */
typedef void (*kv_rows_dequant_fn)(float *dst, const struct kv_rows_side *s, int32_t d,
                                   const char *rows, const char *qp, int32_t nb);

/* Everything a decode block needs about one (sequence, kv head, span). */
struct kv_dec_job {
    int32_t g, d;
    const float *qs;             /* (g, d) scaled queries of the group */
    const float *qsum;           /* (g, k.ng) per-group sums of qs (quantized keys) */
    float *qx;                   /* (2 g d) floats of scratch where a key side's bind
                                    may keep its own form of qs (bf16: evens and odds
                                    apart per 32 elements; the integer dtypes on AVX2
                                    and with VNNI: an integer form, rows_int.h) */
    int from_dram;               /* the rows come from DRAM: a bind whose kernels
                                    prefetch sets its side's ahead (kv_rows_ahead) */
    int k_channel;               /* keys quantized per channel: the driver scales the
                                    queries per block (dec_scores_channel) and
                                    uses qx itself */
    struct kv_rows_side k, v;    /* as stored */
    struct kv_rows_side tile;    /* f32 rows of a tile (stride d*4) */
    kv_rows_scores_fn scores;    /* over k, or over the f32 tile when k is tiled */
    kv_rows_pv_fn pv;            /* over v, or over the f32 tile when v is tiled */
    kv_rows_dequant_fn k_tile, v_tile; /* set: dequantize each block into an f32
                                          tile first (GQA sizes without a fused
                                          kernel: formed once, read by g heads) */
};

/*
 * Binds one side of J (is_v 0: keys, 1: values) for its dtype and shape:
 * sets J->scores / J->pv, or J->k_tile / J->v_tile when the block is better
 * served from an f32 tile (the driver then binds the f32 kernels over it).
 * J->g, J->d and J->k / J->v are filled before.
 */
typedef void (*kv_rows_bind_fn)(struct kv_dec_job *J, int is_v);
void kv_rows_bind_f32(struct kv_dec_job *J, int is_v);
void kv_rows_bind_q8(struct kv_dec_job *J, int is_v);
void kv_rows_bind_q4(struct kv_dec_job *J, int is_v);
void kv_rows_bind_q2(struct kv_dec_job *J, int is_v);
void kv_rows_bind_f16(struct kv_dec_job *J, int is_v);
void kv_rows_bind_bf16(struct kv_dec_job *J, int is_v);

/*
 * The bits (8 or 16) of the integer form of the query with which the
 * per-token key kernels of an integer dtype, as this build binds them for
 * (d, group) and g heads a kv head, score it (rows_int.h's integer
 * scores), or 0 where they read the f32 query; kv_rows_int_query dispatches on dt (0 for the float
 * dtypes). The tests build their truth from that form (kv_rows_query_int).
 */
int kv_rows_int_query(enum kv_dtype dt, int32_t d, int32_t group, int32_t g);
int kv_rows_intq_q8(int32_t d, int32_t group, int32_t g);
int kv_rows_intq_q4(int32_t d, int32_t group, int32_t g);
int kv_rows_intq_q2(int32_t d, int32_t group, int32_t g);

/* out (d) <- q (d) as the integer scores of `bits` (8 or 16) read it: per
 * group of `group` elements, code * step with step = max|q| / (2^(bits-1)
 * - 1) and code = round(q / step) */
void kv_rows_query_int(float *out, const float *q, int32_t d, int32_t group, int bits);

/* ------------------------------------------------------------------------ */
/* Shared helpers                                                           */

static inline const struct kv_qparams *kv_rows_qp(const char *base, size_t stride, int32_t t)
{
    return (const struct kv_qparams *)(base + (size_t)t * stride);
}

/*
 * Quantized rows: w (nb, ng) <- pr_i[j] * scale_jg, and msum_i (ng) +=
 * sum_j pr_i[j] * min_jg (two partial sums, so the adds do not chain).
 */
static inline void kv_rows_pv_weights(float *w, float *msum_i, const float *pi,
                                      const struct kv_rows_side *s, const char *vqp, int32_t nb)
{
    const int32_t ng = s->ng;
    for (int32_t gi = 0; gi < ng; gi++) {
        float m0 = 0.0f, m1 = 0.0f;
        int32_t j = 0;
        for (; j + 2 <= nb; j += 2) {
            const struct kv_qparams *a = kv_rows_qp(vqp, s->qp_stride, j) + gi;
            const struct kv_qparams *b = kv_rows_qp(vqp, s->qp_stride, j + 1) + gi;
            w[(size_t)j * ng + gi] = pi[j] * a->scale;
            w[(size_t)(j + 1) * ng + gi] = pi[j + 1] * b->scale;
            m0 += pi[j] * a->min;
            m1 += pi[j + 1] * b->min;
        }
        if (j < nb) {
            const struct kv_qparams *a = kv_rows_qp(vqp, s->qp_stride, j) + gi;
            w[(size_t)j * ng + gi] = pi[j] * a->scale;
            m0 += pi[j] * a->min;
        }
        msum_i[gi] += m0 + m1;
    }
}

/* The integer form of a query group whose largest |value| is amax, codes
 * in [-qmax, qmax] (127: int8, 32767: int16): the code of x and the step
 * one code is worth. */
static inline int32_t kv_rows_qcode(float x, float amax, int32_t qmax)
{
    /* x / amax first: it is at most 1, where qmax / amax overflows for a
     * tiny amax */
    return amax > 0.0f ? (int32_t)lrintf(x / amax * (float)qmax) : 0;
}
static inline float kv_rows_qstep(float amax, int32_t qmax) { return amax / (float)qmax; }
static inline float kv_rows_amax(const float *x, int32_t n)
{
    float m = 0.0f;
    for (int32_t i = 0; i < n; i++)
        m = fabsf(x[i]) > m ? fabsf(x[i]) : m;
    return m;
}

/* The helpers below exist in every x86 build (kv_simd.h): the files built
 * for one ISA use them under their #ifdef __AVX2__ / __AVX512F__, the
 * run-time dispatched ones from functions with the matching target. */
#ifdef KV_X86
#define KV_INLINE static inline __attribute__((always_inline))
#define KV_INLINE2 KV_INLINE KV_TARGET_AVX2
#define KV_INLINE512 KV_INLINE KV_TARGET_AVX512

KV_INLINE2 __m256 kv_load_u8x8(const uint8_t *p)
{
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}

/* (sum a[0], ..., sum a[7]) */
KV_INLINE2 __m256 kv_hsum8x8(const __m256 *a)
{
    __m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
    __m256 t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
    __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20),
                         _mm256_permute2f128_ps(u0, u1, 0x31));
}

/* (sum a[0], ..., sum a[3]) */
KV_INLINE2 __m128 kv_hsum4x4(const __m256 *a)
{
    __m256 u = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
    return _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1));
}

/* sc[h * DEC_KB + rr] <- o[h*nr + rr]: the sums of a GQA score pass of
 * nr = n/g rows, to the heads' rows of sc */
KV_INLINE void kv_put_heads(float *sc, const int g, const float *o, const int n)
{
    const int nr = n / g;
    for (int h = 0; h < g; h++)
        memcpy(sc + (size_t)h * DEC_KB, o + h * nr, (size_t)nr * sizeof(float));
}

/*
 * Rows from DRAM: asks for the n rows s->ahead rows on from r, as a kernel
 * reaches r. A thread that reads its rows and then computes on them leaves
 * the memory system idle while it computes; the hardware prefetcher runs
 * only a short way ahead of the demand loads. Asked row by row as the
 * kernel goes, the next rows arrive while this one's arithmetic runs. A
 * burst of a whole block at its start (prefetch_block) fills the miss
 * buffers at once and stalls the loads behind it instead. Measured on the
 * AVX-512 Xeon (2 threads, cold, 3 interleaved rounds of `kvlab kernel`
 * against the build with the block prefetch, head_dim 64/128 x heads
 * 8/8, 32/8), at T 32768: f16 0.68-0.79x, bf16 0.70-0.90x, int8
 * 0.68-0.94x, int4 0.77-0.99x, f32 0.84-0.85x at 32/8 (at 8/8 it read at
 * the DRAM rate already); at T 4096 0.55-0.88x. 32 rows ahead, or a fixed
 * 2-8 KB, did no better than 16 rows. The value kernels must ask too: int8
 * with its keys alone read 1.10x at 128 8/8, with both 0.85x. Where the
 * arithmetic is the longer part the prefetches only add instructions
 * (int2: 0.96-1.12x), so its kernels leave ahead 0 (INT_AHEAD). From the
 * L3 they cost up to 1.15x (hot, T 8192), so only a job from DRAM sets
 * it. The AVX2 kernels do not call it: on the AVX2 EPYC the K/V
 * interleave (dec_run_fused) is what worked.
 */
#define KV_ROWS_AHEAD 16

KV_INLINE void kv_rows_ahead(const struct kv_rows_side *s, const char *r, int n)
{
    if (s->ahead == 0)
        return;
    uintptr_t p = (uintptr_t)(r + (size_t)s->ahead * s->stride);
    for (int u = 0; u < n; u++, p += s->stride)
        for (uintptr_t a = p & ~(uintptr_t)63; a < p + s->bytes; a += 64)
            __builtin_prefetch((const void *)a, 0, 3);
}

/* kv_rows_ahead for the rows' group parameters, qp the first row's */
KV_INLINE void kv_rows_ahead_qp(const struct kv_rows_side *s, const char *qp, int n)
{
    if (s->ahead == 0 || s->qp_stride == 0)
        return;
    uintptr_t p = (uintptr_t)(qp + (size_t)s->ahead * s->qp_stride);
    const size_t bytes = (size_t)s->ng * sizeof(struct kv_qparams);
    for (int u = 0; u < n; u++, p += s->qp_stride)
        for (uintptr_t a = p & ~(uintptr_t)63; a < p + bytes; a += 64)
            __builtin_prefetch((const void *)a, 0, 3);
}

/* The score kernel FN over a block for the G heads of a kv head: passes of
 * LANES/G rows by ROWS(sc, g, nr, q, r, stride, d), then the rows left one
 * at a time (nr = 1, all heads); Q the job's query field (qs, or a dtype's
 * reordered qx). */
#define KV_SC_HEADS(FN, TARGET, LANES, ROWS, Q, G)                                           \
    TARGET static void FN(float *sc, const struct kv_dec_job *J, const struct kv_rows_side *s, \
                          const char *k, const char *kqp, int32_t nb)                        \
    {                                                                                        \
        (void)kqp;                                                                           \
        const size_t st = s->stride;                                                         \
        int32_t j = 0;                                                                       \
        for (; j + (LANES) / (G) <= nb; j += (LANES) / (G)) {                                \
            kv_rows_ahead(s, k + j * st, (LANES) / (G));                                     \
            ROWS(sc + j, G, (LANES) / (G), J->Q, k + j * st, st, J->d);                      \
        }                                                                                    \
        for (; j < nb; j++) {                                                                \
            kv_rows_ahead(s, k + j * st, 1);                                                 \
            ROWS(sc + j, G, 1, J->Q, k + j * st, st, J->d);                                  \
        }                                                                                    \
    }

/* kv_put_heads of accumulator u = h*nr + rr summed (nr = 8/g rows) */
KV_INLINE2 void kv_store_heads8(float *sc, const int g, const __m256 *a)
{
    float o[8];
    _mm256_storeu_ps(o, kv_hsum8x8(a));
    kv_put_heads(sc, g, o, 8);
}

KV_INLINE512 __m512 kv_load_u8x16(const uint8_t *p)
{
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p)));
}

KV_INLINE512 __m256 kv_fold512(__m512 v)
{
    return _mm256_add_ps(_mm512_castps512_ps256(v),
                         _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

/*
 * (sum a[0], ..., sum a[15]): sixteen horizontal sums at once, by a
 * transposing tree (unpack, 64-bit unpack, two 128-bit shuffle levels):
 * 45 instructions for 16 sums, about half of what one fold and hadd tree
 * per 8 sums costs.
 */
KV_INLINE512 __m512 kv_hsum16x16(const __m512 *a)
{
    __m512 t[8], u[4];
    for (int k = 0; k < 8; k++) /* per 128-bit lane: a0+a2, b0+b2, a1+a3, b1+b3 */
        t[k] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * k], a[2 * k + 1]),
                             _mm512_unpackhi_ps(a[2 * k], a[2 * k + 1]));
    for (int k = 0; k < 4; k++) { /* per 128-bit lane: the lane's sum of a[4k .. 4k+3] */
        __m512d x = _mm512_castps_pd(t[2 * k]), y = _mm512_castps_pd(t[2 * k + 1]);
        u[k] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)),
                             _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
    }
    __m512 w01 = _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], 0x88),
                               _mm512_shuffle_f32x4(u[0], u[1], 0xDD));
    __m512 w23 = _mm512_add_ps(_mm512_shuffle_f32x4(u[2], u[3], 0x88),
                               _mm512_shuffle_f32x4(u[2], u[3], 0xDD));
    return _mm512_add_ps(_mm512_shuffle_f32x4(w01, w23, 0x88),
                         _mm512_shuffle_f32x4(w01, w23, 0xDD));
}

/* o[0..nr) <- the folded sums of tot[u] plus mins[u] */
KV_INLINE512 void kv_qrows_finish(float *o, const int nr, const __m512 *tot, const float *mins)
{
    __m256 t[4];
    for (int u = 0; u < nr; u++)
        t[u] = kv_fold512(tot[u]);
    if (nr == 4) {
        _mm_storeu_ps(o, _mm_add_ps(kv_hsum4x4(t), _mm_loadu_ps(mins)));
    } else {
        for (int u = 0; u < nr; u++)
            o[u] = kv_hsum8(t[u]) + mins[u];
    }
}

/* kv_put_heads of accumulator u = h*nr + rr summed (nr = 16/g rows) */
KV_INLINE512 void kv_store_heads(float *sc, const int g, const __m512 *a)
{
    float o[16];
    _mm512_storeu_ps(o, kv_hsum16x16(a));
    kv_put_heads(sc, g, o, 16);
}

/* a[h*ch + c] += pr[h][j] * vv[c]: one row's chunks into the g heads'
 * accumulators of a pass (the GQA value kernels, f32 and quantized) */
KV_INLINE512 void kv_heads_fma(__m512 *a, const __m512 *vv, const float *pr, const int g,
                               const int ch, int32_t j)
{
    for (int h = 0; h < g; h++) {
        __m512 ph = _mm512_set1_ps(pr[(size_t)h * DEC_KB + j]);
        for (int c = 0; c < ch; c++)
            a[h * ch + c] = _mm512_fmadd_ps(ph, vv[c], a[h * ch + c]);
    }
}
#endif /* KV_X86 */

#endif /* KV_ROWS_H */
