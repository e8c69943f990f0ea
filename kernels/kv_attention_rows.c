/*
 * kv_attention_rows.c - the decode kernel's inner loops: scores and weighted
 * values of a block of K/V rows of one span, for f32, int8 and int4 rows.
 *
 * The design decision: quantized rows are dequantized in registers, never
 * into a buffer the size of the cache. int8 scores use the group form,
 * score = sum_g scale_g*dot(q_g, codes_g) + min_g*sum(q_g), and values add
 * p*scale_g*codes and p*min_g apart; int4 on AVX-512 puts a group's sixteen
 * possible values min + scale*c in one register and indexes it with the
 * nibbles (vpermps), which costs less than widening and converting. With
 * GQA (2, 4 or 8 heads a kv head) each 16-element chunk is dequantized in a
 * register once and fed to all the group's heads (q_rows_heads,
 * pv_q_heads: no tile stored or re-read); other group sizes dequantize a
 * block once into an L1 tile that the heads share (kv_attn_rows_dequant).
 * Three levels: AVX-512 (16 lanes), AVX2 (8 lanes), scalar; each level
 * takes the shapes it can (head_dim, group) and leaves the rest to the
 * next, so every shape works on every machine.
 */
#include "kv_attention_impl.h"
#include "kv_quant.h"

#include <string.h>

#ifdef __AVX2__
#include <immintrin.h>
#endif

#define DEC_KB KV_ATTN_DEC_KB

#ifdef __AVX2__
static inline float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline __m256 load_u8x8(const uint8_t *p)
{
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}
#endif

/* ------------------------------------------------------------------------ */
/* Row access (scalar)                                                      */

static inline int32_t code_at(const uint8_t *codes, int32_t d, enum kv_dtype t,
                              int32_t group)
{
    if (t == KV_DTYPE_Q8)
        return codes[d];
    int32_t half = group / 2, gi = d / group, j = d % group;
    uint8_t byte = codes[gi * half + (j < half ? j : j - half)];
    return j < half ? (byte & 0x0F) : (byte >> 4);
}

/* ------------------------------------------------------------------------ */
/* Decode: one span's rows for one (sequence, kv head)                      */

void kv_attn_job_init(struct kv_attn_job *J, const struct kv_attn_params *p,
                      const struct kv_span *s, int32_t b, int32_t h, int32_t g, int32_t ng,
                      const float *qs, const float *qsum)
{
    J->dt = s->dtype;
    J->g = g;
    J->d = p->head_dim;
    J->group = p->group;
    J->ng = ng;
    J->k = kv_span_k_row(s, b, h, 0);
    J->v = kv_span_v_row(s, b, h, 0);
    J->stride = s->row_stride;
    J->kqp = J->vqp = NULL;
    J->qp_stride = 0;
    if (s->dtype != KV_DTYPE_F32) {
        J->kqp = (const char *)kv_span_qp(s->k_qp, s, b, h, 0);
        J->vqp = (const char *)kv_span_qp(s->v_qp, s, b, h, 0);
        J->qp_stride = s->qp_row_stride;
    }
    J->qs = qs;
    J->qsum = qsum;
#ifdef __AVX2__
    J->fast = s->dtype == KV_DTYPE_F32  ? 1
              : s->dtype == KV_DTYPE_Q8 ? p->group % 8 == 0
                                        : p->group % 16 == 0;
#else
    J->fast = 0;
#endif
#ifdef __AVX512F__
    J->wide = (s->dtype == KV_DTYPE_Q8 && p->group % 16 == 0) ||
              (s->dtype == KV_DTYPE_Q4 && p->group % 32 == 0);
#else
    J->wide = 0;
#endif
    J->tile = J->wide && g >= 2;
    /* GQA of 2, 4 or 8 heads: dequantize in registers for the whole group
     * instead of through the L1 tile. Measured (32/8 heads, 2 threads, min
     * of 5 interleaved runs): int8 at head_dim 64 148 vs 235 us (T 2048),
     * 683 vs 871 (T 8192); int4 at head_dim 128 250 vs 455 us (T 2048), int4
     * at head_dim 64 within noise of the tile. The tile stays for the
     * shapes the fused kernels do not take. */
    J->fuse = J->tile && (g == 2 || g == 4 || g == 8) && J->d % (256 / g) == 0;
}

static inline const struct kv_qparams *job_qp(const char *base, size_t stride, int32_t t)
{
    return (const struct kv_qparams *)(base + (size_t)t * stride);
}

/* ------------------------------------------------------------------------ */
/* Decode: scores, scalar                                                   */

/* sc (g, DEC_KB) <- qs . k_row(t0 + j), j < nb  (any dtype and shape) */
static void sc_scalar(float *sc, const struct kv_attn_job *J, int32_t t0, int32_t nb)
{
    const int32_t d = J->d, group = J->group;
    for (int32_t j = 0; j < nb; j++) {
        const char *row = J->k + (size_t)(t0 + j) * J->stride;
        const struct kv_qparams *qp =
            J->dt == KV_DTYPE_F32 ? NULL : job_qp(J->kqp, J->qp_stride, t0 + j);
        for (int32_t i = 0; i < J->g; i++) {
            const float *q = J->qs + (size_t)i * d;
            float r = 0.0f;
            if (J->dt == KV_DTYPE_F32) {
                const float *k = (const float *)row;
                for (int32_t e = 0; e < d; e++)
                    r += q[e] * k[e];
            } else {
                for (int32_t gi = 0; gi < J->ng; gi++) {
                    float part = 0.0f;
                    for (int32_t e = gi * group; e < (gi + 1) * group; e++)
                        part += q[e] * (float)code_at((const uint8_t *)row, e, J->dt, group);
                    r += qp[gi].scale * part + qp[gi].min * J->qsum[(size_t)i * J->ng + gi];
                }
            }
            sc[(size_t)i * DEC_KB + j] = r;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Decode: scores, AVX2                                                     */

#ifdef __AVX2__
#define KV_INLINE static inline __attribute__((always_inline))

/* (sum a[0], ..., sum a[7]) */
KV_INLINE __m256 hsum8x8(const __m256 *a)
{
    __m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
    __m256 t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
    __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20),
                         _mm256_permute2f128_ps(u0, u1, 0x31));
}

/* (sum a[0], ..., sum a[3]) */
KV_INLINE __m128 hsum4x4(const __m256 *a)
{
    __m256 u = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
    return _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1));
}

/* o[0..nr) <- q . rows r, r + st, ... (f32, d any) */
KV_INLINE void f32_rows(float *o, const int nr, const float *q, const char *r, size_t st,
                        int32_t d)
{
    const int32_t d8 = d & ~7;
    __m256 a[8];
    for (int u = 0; u < nr; u++)
        a[u] = _mm256_setzero_ps();
    for (int32_t e = 0; e < d8; e += 8) {
        __m256 qv = _mm256_loadu_ps(q + e);
        for (int u = 0; u < nr; u++)
            a[u] = _mm256_fmadd_ps(qv, _mm256_loadu_ps((const float *)(r + u * st) + e), a[u]);
    }
    float tail[8] = {0};
    for (int u = 0; u < nr; u++)
        for (int32_t e = d8; e < d; e++)
            tail[u] += q[e] * ((const float *)(r + u * st))[e];
    if (nr == 8) {
        _mm256_storeu_ps(o, _mm256_add_ps(hsum8x8(a), _mm256_loadu_ps(tail)));
    } else {
        for (int u = 0; u < nr; u++)
            o[u] = hsum8(a[u]) + tail[u];
    }
}

/* o[0..nr) <- scores of int8 rows r, r + st, ... with qparams at qpr, qpr + qst, ... */
KV_INLINE void q8_rows(float *o, const int nr, const float *q, const float *qsum,
                       const char *r, size_t st, const char *qpr, size_t qst,
                       int32_t group, int32_t ng)
{
    __m256 tot[4];
    float mins[4];
    for (int u = 0; u < nr; u++) {
        tot[u] = _mm256_setzero_ps();
        mins[u] = 0.0f;
    }
    for (int32_t gi = 0; gi < ng; gi++) {
        const int32_t g0 = gi * group;
        __m256 a[4];
        for (int u = 0; u < nr; u++)
            a[u] = _mm256_setzero_ps();
        for (int32_t e = g0; e < g0 + group; e += 8) {
            __m256 qv = _mm256_loadu_ps(q + e);
            for (int u = 0; u < nr; u++)
                a[u] = _mm256_fmadd_ps(qv, load_u8x8((const uint8_t *)(r + u * st) + e), a[u]);
        }
        for (int u = 0; u < nr; u++) {
            const struct kv_qparams *qp = (const struct kv_qparams *)(qpr + u * qst) + gi;
            tot[u] = _mm256_fmadd_ps(_mm256_set1_ps(qp->scale), a[u], tot[u]);
            mins[u] += qp->min * qsum[gi];
        }
    }
    if (nr == 4) {
        _mm_storeu_ps(o, _mm_add_ps(hsum4x4(tot), _mm_loadu_ps(mins)));
    } else {
        for (int u = 0; u < nr; u++)
            o[u] = hsum8(tot[u]) + mins[u];
    }
}

/* the same for int4 rows: byte j of a group holds elements j and j + group/2 */
KV_INLINE void q4_rows(float *o, const int nr, const float *q, const float *qsum,
                       const char *r, size_t st, const char *qpr, size_t qst,
                       int32_t group, int32_t ng)
{
    const int32_t half = group / 2;
    const __m256i m4 = _mm256_set1_epi32(0x0F);
    __m256 tot[4];
    float mins[4];
    for (int u = 0; u < nr; u++) {
        tot[u] = _mm256_setzero_ps();
        mins[u] = 0.0f;
    }
    for (int32_t gi = 0; gi < ng; gi++) {
        const int32_t g0 = gi * group;
        __m256 a[4];
        for (int u = 0; u < nr; u++)
            a[u] = _mm256_setzero_ps();
        for (int32_t e = 0; e < half; e += 8) {
            __m256 qlo = _mm256_loadu_ps(q + g0 + e), qhi = _mm256_loadu_ps(q + g0 + half + e);
            for (int u = 0; u < nr; u++) {
                const uint8_t *cb = (const uint8_t *)(r + u * st) + gi * half + e;
                __m256i x = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)cb));
                a[u] = _mm256_fmadd_ps(qlo, _mm256_cvtepi32_ps(_mm256_and_si256(x, m4)), a[u]);
                a[u] = _mm256_fmadd_ps(qhi, _mm256_cvtepi32_ps(_mm256_srli_epi32(x, 4)), a[u]);
            }
        }
        for (int u = 0; u < nr; u++) {
            const struct kv_qparams *qp = (const struct kv_qparams *)(qpr + u * qst) + gi;
            tot[u] = _mm256_fmadd_ps(_mm256_set1_ps(qp->scale), a[u], tot[u]);
            mins[u] += qp->min * qsum[gi];
        }
    }
    if (nr == 4) {
        _mm_storeu_ps(o, _mm_add_ps(hsum4x4(tot), _mm_loadu_ps(mins)));
    } else {
        for (int u = 0; u < nr; u++)
            o[u] = hsum8(tot[u]) + mins[u];
    }
}

/* ------------------------------------------------------------------------ */
/* Decode: AVX-512 row kernels                                              */

#ifdef __AVX512F__
/* AVX-512 twins of the quantized row kernels, 16 lanes: int8 groups that
 * are a multiple of 16, int4 groups a multiple of 32. */
KV_INLINE __m512 load_u8x16(const uint8_t *p)
{
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p)));
}

KV_INLINE __m256 fold512(__m512 v)
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
KV_INLINE __m512 hsum16x16(const __m512 *a)
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

KV_INLINE void qrows_finish(float *o, const int nr, const __m512 *tot, const float *mins)
{
    __m256 t[4];
    for (int u = 0; u < nr; u++)
        t[u] = fold512(tot[u]);
    if (nr == 4) {
        _mm_storeu_ps(o, _mm_add_ps(hsum4x4(t), _mm_loadu_ps(mins)));
    } else {
        for (int u = 0; u < nr; u++)
            o[u] = hsum8(t[u]) + mins[u];
    }
}

KV_INLINE void q8_rows16(float *o, const int nr, const float *q, const float *qsum,
                         const char *r, size_t st, const char *qpr, size_t qst,
                         int32_t group, int32_t ng)
{
    __m512 tot[8];
    float mins[8];
    for (int u = 0; u < nr; u++) {
        tot[u] = _mm512_setzero_ps();
        mins[u] = 0.0f;
    }
    for (int32_t gi = 0; gi < ng; gi++) {
        const int32_t g0 = gi * group;
        __m512 a[8];
        for (int u = 0; u < nr; u++)
            a[u] = _mm512_setzero_ps();
        for (int32_t e = g0; e < g0 + group; e += 16) {
            __m512 qv = _mm512_loadu_ps(q + e);
            for (int u = 0; u < nr; u++)
                a[u] = _mm512_fmadd_ps(qv, load_u8x16((const uint8_t *)(r + u * st) + e), a[u]);
        }
        for (int u = 0; u < nr; u++) {
            const struct kv_qparams *qp = (const struct kv_qparams *)(qpr + u * qst) + gi;
            tot[u] = _mm512_fmadd_ps(_mm512_set1_ps(qp->scale), a[u], tot[u]);
            mins[u] += qp->min * qsum[gi];
        }
    }
    if (nr == 8) {
        __m256 t[8];
        for (int u = 0; u < 8; u++)
            t[u] = fold512(tot[u]);
        _mm256_storeu_ps(o, _mm256_add_ps(hsum8x8(t), _mm256_loadu_ps(mins)));
    } else {
        qrows_finish(o, nr, tot, mins);
    }
}

/*
 * Scores of 16 int8 rows (MHA): each row's group sums scaled into one
 * accumulator, the 16 accumulators reduced by one transposing tree, the
 * min terms added as a vector; one store for the 16 scores. Measured
 * against four rows per call (fold + hadd per row, scalar min terms), min
 * of 5 alternating runs: head_dim 64, 8 heads, T 2048 82 -> 65 us, T 8192
 * 271 -> 259 us; head_dim 128 unchanged within noise.
 */
KV_INLINE void q8_rows_x16(float *o, const float *q, const float *qsum, const char *r,
                           size_t st, const char *qpr, size_t qst, int32_t group, int32_t ng)
{
    __m512 tot[16];
    for (int u = 0; u < 16; u++) {
        const uint8_t *c = (const uint8_t *)(r + u * st);
        const struct kv_qparams *qp = (const struct kv_qparams *)(qpr + u * qst);
        __m512 t = _mm512_setzero_ps();
        for (int32_t gi = 0; gi < ng; gi++) {
            const int32_t g0 = gi * group;
            __m512 a = _mm512_mul_ps(_mm512_loadu_ps(q + g0), load_u8x16(c + g0));
            for (int32_t e = g0 + 16; e < g0 + group; e += 16)
                a = _mm512_fmadd_ps(_mm512_loadu_ps(q + e), load_u8x16(c + e), a);
            t = _mm512_fmadd_ps(_mm512_set1_ps(qp[gi].scale), a, t);
        }
        tot[u] = t;
    }
    __m512 sc = hsum16x16(tot);
    if (ng == 2 && qst == 2 * sizeof(struct kv_qparams)) {
        /* the 16 rows' (s0 m0 s1 m1) are 64 contiguous floats: gather the
         * mins of each group with two permutes and a shuffle */
        const float *b = (const float *)qpr;
        const __m512i idx = _mm512_setr_epi32(1, 5, 9, 13, 17, 21, 25, 29, 3, 7, 11, 15, 19,
                                              23, 27, 31);
        __m512 a = _mm512_permutex2var_ps(_mm512_loadu_ps(b), idx, _mm512_loadu_ps(b + 16));
        __m512 c = _mm512_permutex2var_ps(_mm512_loadu_ps(b + 32), idx, _mm512_loadu_ps(b + 48));
        __m512 m0 = _mm512_shuffle_f32x4(a, c, 0x44), m1 = _mm512_shuffle_f32x4(a, c, 0xEE);
        sc = _mm512_fmadd_ps(m0, _mm512_set1_ps(qsum[0]), sc);
        sc = _mm512_fmadd_ps(m1, _mm512_set1_ps(qsum[1]), sc);
    } else {
        float m[16];
        for (int u = 0; u < 16; u++) {
            const struct kv_qparams *qp = (const struct kv_qparams *)(qpr + u * qst);
            float acc = 0.0f;
            for (int32_t gi = 0; gi < ng; gi++)
                acc += qp[gi].min * qsum[gi];
            m[u] = acc;
        }
        sc = _mm512_add_ps(sc, _mm512_loadu_ps(m));
    }
    _mm512_storeu_ps(o, sc);
}

/* a (d) += sum_j w[group of e][j] * codes_j[e], int8, 64 elements a pass;
 * w is (ng, DEC_KB) here, as pv_weights_512 writes it */
/*
 * int8, AVX-512: w (ng, DEC_KB) <- pi[j] * scale_jg and msum_i (ng) += sum_j
 * pi[j] * min_jg, sixteen rows at a time (gathers of the qparams).
 */
static void pv_weights_512(float *w, float *msum_i, const float *pi, const char *qp0,
                           size_t qst, int32_t nb, int32_t ng)
{
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9,
                                                             10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32((int)(qst / sizeof(float))));
    if (ng == 2 && qst == 2 * sizeof(struct kv_qparams) && nb % 16 == 0) {
        /* the qparams of 16 rows are 64 contiguous floats, (s0 m0 s1 m1) per
         * row: two permutes and two 128-bit shuffles per group split them
         * into scales and mins, cheaper than four gathers */
        const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17,
                                              21, 25, 29);
        const __m512i idx1 = _mm512_add_epi32(idx, _mm512_set1_epi32(2));
        __m512 ms0 = _mm512_setzero_ps(), ms1 = _mm512_setzero_ps();
        for (int32_t j = 0; j < nb; j += 16) {
            const float *b = (const float *)qp0 + (size_t)j * 4;
            __m512 v0 = _mm512_loadu_ps(b), v1 = _mm512_loadu_ps(b + 16);
            __m512 v2 = _mm512_loadu_ps(b + 32), v3 = _mm512_loadu_ps(b + 48);
            __m512 p = _mm512_loadu_ps(pi + j);
            /* a = (s rows 0-7 | m rows 0-7), c = (s rows 8-15 | m rows 8-15) */
            __m512 a = _mm512_permutex2var_ps(v0, idx, v1), c = _mm512_permutex2var_ps(v2, idx, v3);
            __m512 s0 = _mm512_shuffle_f32x4(a, c, 0x44), m0 = _mm512_shuffle_f32x4(a, c, 0xEE);
            a = _mm512_permutex2var_ps(v0, idx1, v1);
            c = _mm512_permutex2var_ps(v2, idx1, v3);
            __m512 s1 = _mm512_shuffle_f32x4(a, c, 0x44), m1 = _mm512_shuffle_f32x4(a, c, 0xEE);
            _mm512_storeu_ps(w + j, _mm512_mul_ps(p, s0));
            _mm512_storeu_ps(w + DEC_KB + j, _mm512_mul_ps(p, s1));
            ms0 = _mm512_fmadd_ps(p, m0, ms0);
            ms1 = _mm512_fmadd_ps(p, m1, ms1);
        }
        msum_i[0] += _mm512_reduce_add_ps(ms0);
        msum_i[1] += _mm512_reduce_add_ps(ms1);
        return;
    }
    for (int32_t gi = 0; gi < ng; gi++) {
        const float *base = (const float *)qp0 + 2 * gi; /* scale of row 0, group gi */
        __m512 ms = _mm512_setzero_ps();
        for (int32_t j = 0; j < nb; j += 16) {
            __mmask16 m = nb - j >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (nb - j)) - 1);
            const float *b = base + (size_t)j * (qst / sizeof(float));
            __m512 p = _mm512_maskz_loadu_ps(m, pi + j);
            __m512 sc = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, b, 4);
            __m512 mn = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, b + 1, 4);
            _mm512_mask_storeu_ps(w + (size_t)gi * DEC_KB + j, m, _mm512_mul_ps(p, sc));
            ms = _mm512_fmadd_ps(p, mn, ms);
        }
        msum_i[gi] += _mm512_reduce_add_ps(ms);
    }
}

KV_INLINE void pv_q8_512(float *a, const float *w, const char *v0, size_t stride, int32_t nb,
                      int32_t d, int32_t group)
{
    int32_t e = 0;
    for (; e + 64 <= d; e += 64) {
        const int32_t g0 = e / group, g1 = (e + 16) / group, g2 = (e + 32) / group,
                      g3 = (e + 48) / group;
        __m512 a0 = _mm512_loadu_ps(a + e), a1 = _mm512_loadu_ps(a + e + 16);
        __m512 a2 = _mm512_loadu_ps(a + e + 32), a3 = _mm512_loadu_ps(a + e + 48);
        for (int32_t j = 0; j < nb; j++) {
            const uint8_t *c = (const uint8_t *)(v0 + (size_t)j * stride) + e;
            
            a0 = _mm512_fmadd_ps(_mm512_set1_ps(w[(size_t)g0 * DEC_KB + j]), load_u8x16(c), a0);
            a1 = _mm512_fmadd_ps(_mm512_set1_ps(w[(size_t)g1 * DEC_KB + j]), load_u8x16(c + 16), a1);
            a2 = _mm512_fmadd_ps(_mm512_set1_ps(w[(size_t)g2 * DEC_KB + j]), load_u8x16(c + 32), a2);
            a3 = _mm512_fmadd_ps(_mm512_set1_ps(w[(size_t)g3 * DEC_KB + j]), load_u8x16(c + 48), a3);
        }
        _mm512_storeu_ps(a + e, a0);
        _mm512_storeu_ps(a + e + 16, a1);
        _mm512_storeu_ps(a + e + 32, a2);
        _mm512_storeu_ps(a + e + 48, a3);
    }
    for (; e < d; e += 16) {
        const int32_t g0 = e / group;
        __m512 a0 = _mm512_loadu_ps(a + e);
        for (int32_t j = 0; j < nb; j++) {
            const uint8_t *c = (const uint8_t *)(v0 + (size_t)j * stride) + e;
            a0 = _mm512_fmadd_ps(_mm512_set1_ps(w[(size_t)g0 * DEC_KB + j]), load_u8x16(c), a0);
        }
        _mm512_storeu_ps(a + e, a0);
    }
}

/* int4 on AVX-512 by table: the 16 values min + scale*c of a group sit in
 * one register and the nibbles index it (vpermps), so the dequantized value
 * is formed in-register without a convert and without separate scale and
 * min terms. */
#define KV_IOTA16 _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)

KV_INLINE __m512 q4_table(const struct kv_qparams *qp)
{
    return _mm512_fmadd_ps(KV_IOTA16, _mm512_set1_ps(qp->scale), _mm512_set1_ps(qp->min));
}

KV_INLINE void q4_rows_tbl(float *o, const int nr, const float *q, const char *r, size_t st,
                           const char *qpr, size_t qst, int32_t group, int32_t ng)
{
    const int32_t half = group / 2;
    __m512 a[8], b[8];
    for (int u = 0; u < nr; u++) {
        a[u] = _mm512_setzero_ps();
        b[u] = _mm512_setzero_ps();
    }
    for (int32_t gi = 0; gi < ng; gi++) {
        const int32_t g0 = gi * group;
        __m512 tbl[8];
        for (int u = 0; u < nr; u++)
            tbl[u] = q4_table((const struct kv_qparams *)(qpr + u * qst) + gi);
        for (int32_t e = 0; e < half; e += 16) {
            __m512 qlo = _mm512_loadu_ps(q + g0 + e), qhi = _mm512_loadu_ps(q + g0 + half + e);
            for (int u = 0; u < nr; u++) {
                const uint8_t *cb = (const uint8_t *)(r + u * st) + gi * half + e;
                __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)cb));
                a[u] = _mm512_fmadd_ps(qlo, _mm512_permutexvar_ps(x, tbl[u]), a[u]);
                b[u] = _mm512_fmadd_ps(qhi, _mm512_permutexvar_ps(_mm512_srli_epi32(x, 4), tbl[u]), b[u]);
            }
        }
    }
    __m256 t[8];
    for (int u = 0; u < nr; u++)
        t[u] = fold512(_mm512_add_ps(a[u], b[u]));
    if (nr == 8) {
        _mm256_storeu_ps(o, hsum8x8(t));
    } else {
        for (int u = 0; u < nr; u++)
            o[u] = hsum8(t[u]);
    }
}

/* Scores of 16 int4 rows (MHA), by table, one reduction tree for all 16
 * (as q8_rows_x16; the table carries the min, so no separate min terms) */
KV_INLINE void q4_rows_x16(float *o, const float *q, const char *r, size_t st,
                           const char *qpr, size_t qst, int32_t group, int32_t ng)
{
    const int32_t half = group / 2;
    __m512 tot[16];
    for (int u = 0; u < 16; u++) {
        const uint8_t *c = (const uint8_t *)(r + u * st);
        const struct kv_qparams *qp = (const struct kv_qparams *)(qpr + u * qst);
        __m512 t0 = _mm512_setzero_ps(), t1 = _mm512_setzero_ps(); /* two chains */
        for (int32_t gi = 0; gi < ng; gi++) {
            const int32_t g0 = gi * group;
            __m512 tbl = q4_table(qp + gi);
            for (int32_t e = 0; e < half; e += 16) {
                __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(c + gi * half + e)));
                t0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + g0 + e), _mm512_permutexvar_ps(x, tbl), t0);
                t1 = _mm512_fmadd_ps(_mm512_loadu_ps(q + g0 + half + e),
                                     _mm512_permutexvar_ps(_mm512_srli_epi32(x, 4), tbl), t1);
            }
        }
        tot[u] = _mm512_add_ps(t0, t1);
    }
    _mm512_storeu_ps(o, hsum16x16(tot));
}

/* a (d) += sum_j pi[j] * dequantized v_row(j), int4, by table */
KV_INLINE void pv_q4_tbl(float *a, const float *pi, const char *v0, size_t stride,
                      const char *vqp0, size_t qst, int32_t nb, int32_t d, int32_t group)
{
    const int32_t half = group / 2, nbytes = d / 2;
    int32_t o = 0;
    for (; o + 32 <= nbytes; o += 32) {
        const int32_t gA = o / half, gB = (o + 16) / half;
        const int32_t eA = gA * group + o % half, eB = gB * group + (o + 16) % half;
        __m512 a0 = _mm512_loadu_ps(a + eA), a1 = _mm512_loadu_ps(a + eA + half);
        __m512 a2 = _mm512_loadu_ps(a + eB), a3 = _mm512_loadu_ps(a + eB + half);
        for (int32_t j = 0; j < nb; j++) {
            const uint8_t *c = (const uint8_t *)(v0 + (size_t)j * stride) + o;
            const struct kv_qparams *qp = job_qp(vqp0, qst, j);
            __m512 p = _mm512_set1_ps(pi[j]);
            __m512 tA = q4_table(qp + gA), tB = q4_table(qp + gB);
            __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)c));
            __m512i y = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(c + 16)));
            a0 = _mm512_fmadd_ps(p, _mm512_permutexvar_ps(x, tA), a0);
            a1 = _mm512_fmadd_ps(p, _mm512_permutexvar_ps(_mm512_srli_epi32(x, 4), tA), a1);
            a2 = _mm512_fmadd_ps(p, _mm512_permutexvar_ps(y, tB), a2);
            a3 = _mm512_fmadd_ps(p, _mm512_permutexvar_ps(_mm512_srli_epi32(y, 4), tB), a3);
        }
        _mm512_storeu_ps(a + eA, a0);
        _mm512_storeu_ps(a + eA + half, a1);
        _mm512_storeu_ps(a + eB, a2);
        _mm512_storeu_ps(a + eB + half, a3);
    }
    for (; o < nbytes; o += 16) {
        const int32_t gA = o / half, eA = gA * group + o % half;
        __m512 a0 = _mm512_loadu_ps(a + eA), a1 = _mm512_loadu_ps(a + eA + half);
        for (int32_t j = 0; j < nb; j++) {
            const uint8_t *c = (const uint8_t *)(v0 + (size_t)j * stride) + o;
            __m512 p = _mm512_set1_ps(pi[j]);
            __m512 tA = q4_table(job_qp(vqp0, qst, j) + gA);
            __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)c));
            a0 = _mm512_fmadd_ps(p, _mm512_permutexvar_ps(x, tA), a0);
            a1 = _mm512_fmadd_ps(p, _mm512_permutexvar_ps(_mm512_srli_epi32(x, 4), tA), a1);
        }
        _mm512_storeu_ps(a + eA, a0);
        _mm512_storeu_ps(a + eA + half, a1);
    }
}
/* f32 rows, 16 lanes (d a multiple of 16) */
KV_INLINE void f32_rows16(float *o, const int nr, const float *q, const char *r, size_t st,
                          int32_t d)
{
    __m512 a[8];
    for (int u = 0; u < nr; u++)
        a[u] = _mm512_setzero_ps();
    for (int32_t e = 0; e < d; e += 16) {
        __m512 qv = _mm512_loadu_ps(q + e);
        for (int u = 0; u < nr; u++)
            a[u] = _mm512_fmadd_ps(qv, _mm512_loadu_ps((const float *)(r + u * st) + e), a[u]);
    }
    __m256 t[8];
    for (int u = 0; u < nr; u++)
        t[u] = fold512(a[u]);
    if (nr == 8) {
        _mm256_storeu_ps(o, hsum8x8(t));
    } else {
        for (int u = 0; u < nr; u++)
            o[u] = hsum8(t[u]);
    }
}

/* a (d) += sum_j pi[j] * v_j, f32 rows, 16 lanes (d a multiple of 16); even
 * and odd rows accumulate apart so eight FMA chains are in flight */
static void pv_f32_512(float *a, const float *pi, const char *v0, size_t stride, int32_t nb,
                       int32_t d)
{
    int32_t e = 0;
    for (; e + 64 <= d; e += 64) {
        __m512 a0 = _mm512_loadu_ps(a + e), a1 = _mm512_loadu_ps(a + e + 16);
        __m512 a2 = _mm512_loadu_ps(a + e + 32), a3 = _mm512_loadu_ps(a + e + 48);
        __m512 b0 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps();
        __m512 b2 = _mm512_setzero_ps(), b3 = _mm512_setzero_ps();
        int32_t j = 0;
        for (; j + 2 <= nb; j += 2) {
            const float *v = (const float *)(v0 + (size_t)j * stride) + e;
            const float *w = (const float *)(v0 + (size_t)(j + 1) * stride) + e;
            __m512 pj = _mm512_set1_ps(pi[j]), pk = _mm512_set1_ps(pi[j + 1]);
            a0 = _mm512_fmadd_ps(pj, _mm512_loadu_ps(v), a0);
            a1 = _mm512_fmadd_ps(pj, _mm512_loadu_ps(v + 16), a1);
            a2 = _mm512_fmadd_ps(pj, _mm512_loadu_ps(v + 32), a2);
            a3 = _mm512_fmadd_ps(pj, _mm512_loadu_ps(v + 48), a3);
            b0 = _mm512_fmadd_ps(pk, _mm512_loadu_ps(w), b0);
            b1 = _mm512_fmadd_ps(pk, _mm512_loadu_ps(w + 16), b1);
            b2 = _mm512_fmadd_ps(pk, _mm512_loadu_ps(w + 32), b2);
            b3 = _mm512_fmadd_ps(pk, _mm512_loadu_ps(w + 48), b3);
        }
        if (j < nb) {
            const float *v = (const float *)(v0 + (size_t)j * stride) + e;
            __m512 pj = _mm512_set1_ps(pi[j]);
            a0 = _mm512_fmadd_ps(pj, _mm512_loadu_ps(v), a0);
            a1 = _mm512_fmadd_ps(pj, _mm512_loadu_ps(v + 16), a1);
            a2 = _mm512_fmadd_ps(pj, _mm512_loadu_ps(v + 32), a2);
            a3 = _mm512_fmadd_ps(pj, _mm512_loadu_ps(v + 48), a3);
        }
        _mm512_storeu_ps(a + e, _mm512_add_ps(a0, b0));
        _mm512_storeu_ps(a + e + 16, _mm512_add_ps(a1, b1));
        _mm512_storeu_ps(a + e + 32, _mm512_add_ps(a2, b2));
        _mm512_storeu_ps(a + e + 48, _mm512_add_ps(a3, b3));
    }
    for (; e < d; e += 16) {
        __m512 a0 = _mm512_loadu_ps(a + e);
        for (int32_t j = 0; j < nb; j++)
            a0 = _mm512_fmadd_ps(_mm512_set1_ps(pi[j]),
                                 _mm512_loadu_ps((const float *)(v0 + (size_t)j * stride) + e), a0);
        _mm512_storeu_ps(a + e, a0);
    }
}

/* sc[h * DEC_KB + rr] <- accumulator u = h*nr + rr summed (nr = 16/g rows) */
KV_INLINE void store_heads(float *sc, const int g, const __m512 *a)
{
    const int nr = 16 / g;
    float o[16];
    _mm512_storeu_ps(o, hsum16x16(a));
    for (int h = 0; h < g; h++)
        memcpy(sc + (size_t)h * DEC_KB, o + h * nr, (size_t)nr * sizeof(float));
}

/*
 * GQA, f32 rows, 16 lanes: sc (g, DEC_KB) for rows j0 .. j0 + 16/g - 1, each
 * K chunk loaded once for all g heads (g in 2, 4, 8): accumulator u = h*nr + r.
 */
KV_INLINE void f32_rows_heads(float *sc, const int g, const float *qs, const char *r,
                              size_t st, int32_t d)
{
    const int nr = 16 / g;
    __m512 a[16];
    for (int u = 0; u < 16; u++)
        a[u] = _mm512_setzero_ps();
    for (int32_t e = 0; e < d; e += 16) {
        for (int rr = 0; rr < nr; rr++) {
            __m512 kv = _mm512_loadu_ps((const float *)(r + rr * st) + e);
            for (int h = 0; h < g; h++)
                a[h * nr + rr] = _mm512_fmadd_ps(_mm512_loadu_ps(qs + (size_t)h * d + e), kv,
                                                 a[h * nr + rr]);
        }
    }
    store_heads(sc, g, a);
}

/* a[h*ch + c] += pr[h][j] * vv[c]: one row's chunks into the g heads'
 * accumulators of a pass (the GQA value kernels, f32 and quantized) */
KV_INLINE void heads_fma(__m512 *a, const __m512 *vv, const float *pr, const int g,
                         const int ch, int32_t j)
{
    for (int h = 0; h < g; h++) {
        __m512 ph = _mm512_set1_ps(pr[(size_t)h * DEC_KB + j]);
        for (int c = 0; c < ch; c++)
            a[h * ch + c] = _mm512_fmadd_ps(ph, vv[c], a[h * ch + c]);
    }
}

/*
 * GQA, f32 rows, 16 lanes: acc_h (d) += sum_j pr[h][j] * v_j for the g heads
 * of the group (g in 2, 4, 8), each V chunk loaded once for all heads;
 * 16/g chunks of 16 elements per pass over the rows (d a multiple of 256/g).
 */
KV_INLINE void pv_f32_heads(float *acc, size_t acc_stride, const float *pr, const int g,
                            const char *v0, size_t stride, int32_t nb, int32_t d)
{
    const int ch = 16 / g; /* chunks per pass */
    for (int32_t e0 = 0; e0 < d; e0 += 16 * ch) {
        __m512 a[16];
        for (int h = 0; h < g; h++)
            for (int c = 0; c < ch; c++)
                a[h * ch + c] = _mm512_loadu_ps(acc + (size_t)h * acc_stride + e0 + 16 * c);
        for (int32_t j = 0; j < nb; j++) {
            const float *v = (const float *)(v0 + (size_t)j * stride) + e0;
            __m512 vv[8];
            for (int c = 0; c < ch; c++)
                vv[c] = _mm512_loadu_ps(v + 16 * c);
            heads_fma(a, vv, pr, g, ch, j);
        }
        for (int h = 0; h < g; h++)
            for (int c = 0; c < ch; c++)
                _mm512_storeu_ps(acc + (size_t)h * acc_stride + e0 + 16 * c, a[h * ch + c]);
    }
}

/*
 * GQA over quantized rows: dst (nb, d) <- the dequantized rows, formed in
 * registers once per block and kept in L1, so the g query heads sharing
 * them run the f32 paths instead of widening the codes g times.
 */
KV_INLINE void dequant_tile(float *dst, const char *c0, size_t stride, const char *qp0,
                            size_t qst, int32_t nb, int32_t d, int32_t group, enum kv_dtype dt)
{
    const int32_t ng = d / group, half = group / 2;
    for (int32_t j = 0; j < nb; j++) {
        const uint8_t *c = (const uint8_t *)(c0 + (size_t)j * stride);
        const struct kv_qparams *qp = job_qp(qp0, qst, j);
        float *x = dst + (size_t)j * d;
        for (int32_t gi = 0; gi < ng; gi++) {
            const int32_t g0 = gi * group;
            if (dt == KV_DTYPE_Q8) {
                __m512 s = _mm512_set1_ps(qp[gi].scale), m = _mm512_set1_ps(qp[gi].min);
                for (int32_t e = 0; e < group; e += 16)
                    _mm512_storeu_ps(x + g0 + e, _mm512_fmadd_ps(load_u8x16(c + g0 + e), s, m));
            } else {
                __m512 tbl = q4_table(qp + gi);
                for (int32_t e = 0; e < half; e += 16) {
                    __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(c + gi * half + e)));
                    _mm512_storeu_ps(x + g0 + e, _mm512_permutexvar_ps(v, tbl));
                    _mm512_storeu_ps(x + g0 + half + e,
                                     _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), tbl));
                }
            }
        }
    }
}

/*
 * GQA over quantized rows, fused: the 16-element chunk of row r starting at
 * element e (e a multiple of 16, group a multiple of 32 for int4 and of 16
 * for int8, so a chunk lies in one group and, for int4, in one nibble half),
 * dequantized in registers. The g query heads of the group then take it from
 * the register, so the codes are loaded and converted once per head group and
 * no tile is stored or read back.
 */
KV_INLINE __m512 qchunk(const char *r, const struct kv_qparams *qp, int32_t e, int32_t group,
                        enum kv_dtype dt)
{
    const int32_t gi = e / group, j = e % group;
    if (dt == KV_DTYPE_Q8)
        return _mm512_fmadd_ps(load_u8x16((const uint8_t *)r + e), _mm512_set1_ps(qp[gi].scale),
                               _mm512_set1_ps(qp[gi].min));
    const int32_t half = group / 2;
    const uint8_t *cb = (const uint8_t *)r + gi * half + (j < half ? j : j - half);
    __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)cb));
    if (j >= half)
        x = _mm512_srli_epi32(x, 4);
    return _mm512_permutexvar_ps(x, q4_table(qp + gi));
}

/* sc (g, DEC_KB) for quantized rows j0 .. j0 + 16/g - 1 (g in 2, 4, 8), each
 * chunk dequantized once for all g heads: accumulator u = h*nr + r */
KV_INLINE void q_rows_heads(float *sc, const int g, const float *qs, const char *r, size_t st,
                            const char *qpr, size_t qst, int32_t d, int32_t group,
                            enum kv_dtype dt)
{
    const int nr = 16 / g;
    __m512 a[16];
    for (int u = 0; u < 16; u++)
        a[u] = _mm512_setzero_ps();
    if (dt == KV_DTYPE_Q4) {
        /* a byte chunk holds two element chunks (low nibbles at g0 + o, high
         * at g0 + half + o): load the codes and form the group's table once
         * for both */
        const int32_t half = group / 2;
        for (int32_t gi = 0; gi < d / group; gi++) {
            const int32_t g0 = gi * group;
            __m512 tbl[8];
            for (int rr = 0; rr < nr; rr++)
                tbl[rr] = q4_table((const struct kv_qparams *)(qpr + rr * qst) + gi);
            for (int32_t o = 0; o < half; o += 16) {
                for (int rr = 0; rr < nr; rr++) {
                    const uint8_t *cb = (const uint8_t *)(r + rr * st) + gi * half + o;
                    __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)cb));
                    __m512 lo = _mm512_permutexvar_ps(x, tbl[rr]);
                    __m512 hi = _mm512_permutexvar_ps(_mm512_srli_epi32(x, 4), tbl[rr]);
                    for (int h = 0; h < g; h++) {
                        const float *q = qs + (size_t)h * d + g0 + o;
                        a[h * nr + rr] = _mm512_fmadd_ps(_mm512_loadu_ps(q), lo, a[h * nr + rr]);
                        a[h * nr + rr] =
                            _mm512_fmadd_ps(_mm512_loadu_ps(q + half), hi, a[h * nr + rr]);
                    }
                }
            }
        }
    }
    for (int32_t e = 0; dt == KV_DTYPE_Q8 && e < d; e += 16) {
        for (int rr = 0; rr < nr; rr++) {
            __m512 kv = qchunk(r + rr * st, (const struct kv_qparams *)(qpr + rr * qst), e,
                               group, dt);
            for (int h = 0; h < g; h++)
                a[h * nr + rr] = _mm512_fmadd_ps(_mm512_loadu_ps(qs + (size_t)h * d + e), kv,
                                                a[h * nr + rr]);
        }
    }
    store_heads(sc, g, a);
}

/* acc_h (d) += sum_j pr[h][j] * dequantized v_j for the g heads of the
 * group (g in 2, 4, 8; d a multiple of 256/g), each chunk dequantized once */
KV_INLINE void pv_q_heads(float *acc, size_t acc_stride, const float *pr, const int g,
                          const char *v0, size_t stride, const char *vqp0, size_t qst,
                          int32_t nb, int32_t d, int32_t group, enum kv_dtype dt)
{
    const int ch = 16 / g; /* chunks per pass */
    if (dt == KV_DTYPE_Q4) {
        /* passes over ch/2 byte chunks of 16 codes; byte chunk c gives the
         * element chunks at el[2c] (low nibbles) and el[2c] + half (high) */
        const int32_t half = group / 2;
        for (int32_t o0 = 0; o0 < d / 2; o0 += 8 * ch) {
            int32_t el[16], gr[8];
            for (int c = 0; c < ch / 2; c++) {
                const int32_t ob = o0 + 16 * c;
                gr[c] = ob / half;
                el[2 * c] = gr[c] * group + ob % half;
                el[2 * c + 1] = el[2 * c] + half;
            }
            __m512 a[16];
            for (int h = 0; h < g; h++)
                for (int c = 0; c < ch; c++)
                    a[h * ch + c] = _mm512_loadu_ps(acc + (size_t)h * acc_stride + el[c]);
            for (int32_t j = 0; j < nb; j++) {
                const uint8_t *row = (const uint8_t *)(v0 + (size_t)j * stride) + o0;
                const struct kv_qparams *qp = job_qp(vqp0, qst, j);
                __m512 vv[8];
                for (int c = 0; c < ch / 2; c++) {
                    __m512 tbl = q4_table(qp + gr[c]);
                    __m512i x =
                        _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(row + 16 * c)));
                    vv[2 * c] = _mm512_permutexvar_ps(x, tbl);
                    vv[2 * c + 1] = _mm512_permutexvar_ps(_mm512_srli_epi32(x, 4), tbl);
                }
                heads_fma(a, vv, pr, g, ch, j);
            }
            for (int h = 0; h < g; h++)
                for (int c = 0; c < ch; c++)
                    _mm512_storeu_ps(acc + (size_t)h * acc_stride + el[c], a[h * ch + c]);
        }
        return;
    }
    for (int32_t e0 = 0; e0 < d; e0 += 16 * ch) {
        __m512 a[16];
        for (int h = 0; h < g; h++)
            for (int c = 0; c < ch; c++)
                a[h * ch + c] = _mm512_loadu_ps(acc + (size_t)h * acc_stride + e0 + 16 * c);
        for (int32_t j = 0; j < nb; j++) {
            const char *row = v0 + (size_t)j * stride;
            const struct kv_qparams *qp = job_qp(vqp0, qst, j);
            __m512 vv[8];
            for (int c = 0; c < ch; c++)
                vv[c] = qchunk(row, qp, e0 + 16 * c, group, dt);
            heads_fma(a, vv, pr, g, ch, j);
        }
        for (int h = 0; h < g; h++)
            for (int c = 0; c < ch; c++)
                _mm512_storeu_ps(acc + (size_t)h * acc_stride + e0 + 16 * c, a[h * ch + c]);
    }
}

/* The fused GQA kernels with g, dtype and the common (d, group) as
 * constants, so the chunk loops unroll and the group arithmetic folds. */
#define KV_FUSE_DISPATCH(CALL, g, d, group, dt)                                              \
    do {                                                                                     \
        if ((dt) == KV_DTYPE_Q8) {                                                           \
            if ((d) == 64 && (group) == 32)                                                  \
                CALL(g, 64, 32, KV_DTYPE_Q8);                                                \
            else if ((d) == 128 && (group) == 32)                                            \
                CALL(g, 128, 32, KV_DTYPE_Q8);                                               \
            else                                                                             \
                CALL(g, d, group, KV_DTYPE_Q8);                                              \
        } else {                                                                             \
            if ((d) == 64 && (group) == 32)                                                  \
                CALL(g, 64, 32, KV_DTYPE_Q4);                                                \
            else if ((d) == 128 && (group) == 32)                                            \
                CALL(g, 128, 32, KV_DTYPE_Q4);                                               \
            else                                                                             \
                CALL(g, d, group, KV_DTYPE_Q4);                                              \
        }                                                                                    \
    } while (0)

/* scores of a block on the fused path; leftover rows go one head at a time */
static void sc_fused(float *sc, const struct kv_attn_job *J, const char *k, const char *kqp,
                     int32_t nb)
{
    const size_t st = J->stride, qst = J->qp_stride;
    const int32_t g = J->g, step = 16 / g;
    int32_t j = 0;
#define KV_SC_CALL(G, D, GR, DT)                                                             \
    for (; j + step <= nb; j += step)                                                        \
    q_rows_heads(sc + j, G, J->qs, k + j * st, st, kqp + j * qst, qst, D, GR, DT)
    if (g == 2)
        KV_FUSE_DISPATCH(KV_SC_CALL, 2, J->d, J->group, J->dt);
    else if (g == 4)
        KV_FUSE_DISPATCH(KV_SC_CALL, 4, J->d, J->group, J->dt);
    else
        KV_FUSE_DISPATCH(KV_SC_CALL, 8, J->d, J->group, J->dt);
#undef KV_SC_CALL
    for (int32_t h = 0; h < g; h++) {
        const float *q = J->qs + (size_t)h * J->d, *qsum = J->qsum + (size_t)h * J->ng;
        for (int32_t jj = j; jj < nb; jj++) {
            float *o = sc + (size_t)h * DEC_KB + jj;
            if (J->dt == KV_DTYPE_Q8)
                q8_rows16(o, 1, q, qsum, k + jj * st, st, kqp + jj * qst, qst, J->group, J->ng);
            else
                q4_rows_tbl(o, 1, q, k + jj * st, st, kqp + jj * qst, qst, J->group, J->ng);
        }
    }
}

/* weighted values of a block on the fused path */
static void pv_fused(float *acc, size_t acc_stride, const float *pr, const struct kv_attn_job *J,
                     const char *v0, const char *vqp0, int32_t nb)
{
#define KV_PV_CALL(G, D, GR, DT)                                                             \
    pv_q_heads(acc, acc_stride, pr, G, v0, J->stride, vqp0, J->qp_stride, nb, D, GR, DT)
    if (J->g == 2)
        KV_FUSE_DISPATCH(KV_PV_CALL, 2, J->d, J->group, J->dt);
    else if (J->g == 4)
        KV_FUSE_DISPATCH(KV_PV_CALL, 4, J->d, J->group, J->dt);
    else
        KV_FUSE_DISPATCH(KV_PV_CALL, 8, J->d, J->group, J->dt);
#undef KV_PV_CALL
}
#endif /* __AVX512F__ */

/* ------------------------------------------------------------------------ */
/* Decode: scores, dispatch                                                 */

/* sc (g, DEC_KB) for rows t0 .. t0+nb-1 on the widest path the shape allows */
static void sc_avx2(float *sc, const struct kv_attn_job *J, int32_t t0, int32_t nb)
{
    const size_t st = J->stride, qst = J->qp_stride;
    const char *k = J->k + (size_t)t0 * st;
    const char *kqp = J->kqp != NULL ? J->kqp + (size_t)t0 * qst : NULL;
#ifdef __AVX512F__
    if (J->fuse) {
        sc_fused(sc, J, k, kqp, nb);
        return;
    }
    if (J->dt == KV_DTYPE_F32 && J->d % 16 == 0 && (J->g == 2 || J->g == 4 || J->g == 8)) {
        /* all heads of the group at once; rows in steps of 16/g */
        const int32_t step = 16 / J->g;
        int32_t j = 0;
        for (; j + step <= nb; j += step) {
            if (J->g == 2)
                f32_rows_heads(sc + j, 2, J->qs, k + j * st, st, J->d);
            else if (J->g == 4)
                f32_rows_heads(sc + j, 4, J->qs, k + j * st, st, J->d);
            else
                f32_rows_heads(sc + j, 8, J->qs, k + j * st, st, J->d);
        }
        for (int32_t h = 0; h < J->g; h++)
            for (int32_t jj = j; jj < nb; jj++)
                f32_rows16(sc + (size_t)h * DEC_KB + jj, 1, J->qs + (size_t)h * J->d,
                           k + jj * st, st, J->d);
        return;
    }
#endif
    for (int32_t i = 0; i < J->g; i++) {
        const float *q = J->qs + (size_t)i * J->d, *qsum = J->qsum + (size_t)i * J->ng;
        float *o = sc + (size_t)i * DEC_KB;
        int32_t j = 0;
        if (J->dt == KV_DTYPE_F32) {
#ifdef __AVX512F__
            if (J->d % 16 == 0) {
                for (; j + 8 <= nb; j += 8)
                    f32_rows16(o + j, 8, q, k + j * st, st, J->d);
                for (; j < nb; j++)
                    f32_rows16(o + j, 1, q, k + j * st, st, J->d);
            }
#endif
            for (; j + 8 <= nb; j += 8)
                f32_rows(o + j, 8, q, k + j * st, st, J->d);
            for (; j < nb; j++)
                f32_rows(o + j, 1, q, k + j * st, st, J->d);
        }
#ifdef __AVX512F__
        else if (J->wide && J->dt == KV_DTYPE_Q8) {
            if (J->group == 32 && J->ng == 2) /* head_dim 64 and 128: constants */
                for (; j + 16 <= nb; j += 16)
                    q8_rows_x16(o + j, q, qsum, k + j * st, st, kqp + j * qst, qst, 32, 2);
            if (J->group == 32 && J->ng == 4)
                for (; j + 16 <= nb; j += 16)
                    q8_rows_x16(o + j, q, qsum, k + j * st, st, kqp + j * qst, qst, 32, 4);
            for (; j + 16 <= nb; j += 16)
                q8_rows_x16(o + j, q, qsum, k + j * st, st, kqp + j * qst, qst, J->group, J->ng);
            if (J->group == 32 && J->ng == 2)
                for (; j + 4 <= nb; j += 4)
                    q8_rows16(o + j, 4, q, qsum, k + j * st, st, kqp + j * qst, qst, 32, 2);
            if (J->group == 32 && J->ng == 4)
                for (; j + 4 <= nb; j += 4)
                    q8_rows16(o + j, 4, q, qsum, k + j * st, st, kqp + j * qst, qst, 32, 4);
            for (; j + 4 <= nb; j += 4)
                q8_rows16(o + j, 4, q, qsum, k + j * st, st, kqp + j * qst, qst, J->group, J->ng);
            for (; j < nb; j++)
                q8_rows16(o + j, 1, q, qsum, k + j * st, st, kqp + j * qst, qst, J->group, J->ng);
        } else if (J->wide) {
            if (J->group == 32 && J->ng == 2) /* head_dim 64 and 128: constants */
                for (; j + 16 <= nb; j += 16)
                    q4_rows_x16(o + j, q, k + j * st, st, kqp + j * qst, qst, 32, 2);
            if (J->group == 32 && J->ng == 4)
                for (; j + 16 <= nb; j += 16)
                    q4_rows_x16(o + j, q, k + j * st, st, kqp + j * qst, qst, 32, 4);
            for (; j + 16 <= nb; j += 16)
                q4_rows_x16(o + j, q, k + j * st, st, kqp + j * qst, qst, J->group, J->ng);
            if (J->group == 32 && J->ng == 2)
                for (; j + 8 <= nb; j += 8)
                    q4_rows_tbl(o + j, 8, q, k + j * st, st, kqp + j * qst, qst, 32, 2);
            if (J->group == 32 && J->ng == 4)
                for (; j + 8 <= nb; j += 8)
                    q4_rows_tbl(o + j, 8, q, k + j * st, st, kqp + j * qst, qst, 32, 4);
            for (; j + 8 <= nb; j += 8)
                q4_rows_tbl(o + j, 8, q, k + j * st, st, kqp + j * qst, qst, J->group, J->ng);
            for (; j < nb; j++)
                q4_rows_tbl(o + j, 1, q, k + j * st, st, kqp + j * qst, qst, J->group, J->ng);
        }
#endif
        else if (J->dt == KV_DTYPE_Q8) {
            for (; j + 4 <= nb; j += 4)
                q8_rows(o + j, 4, q, qsum, k + j * st, st, kqp + j * qst, qst, J->group, J->ng);
            for (; j < nb; j++)
                q8_rows(o + j, 1, q, qsum, k + j * st, st, kqp + j * qst, qst, J->group, J->ng);
        } else {
            for (; j + 4 <= nb; j += 4)
                q4_rows(o + j, 4, q, qsum, k + j * st, st, kqp + j * qst, qst, J->group, J->ng);
            for (; j < nb; j++)
                q4_rows(o + j, 1, q, qsum, k + j * st, st, kqp + j * qst, qst, J->group, J->ng);
        }
    }
}
#endif

void kv_attn_rows_scores(float *sc, const struct kv_attn_job *J, int32_t t0, int32_t nb)
{
#ifdef __AVX2__
    if (J->fast) {
        sc_avx2(sc, J, t0, nb);
        return;
    }
#endif
    sc_scalar(sc, J, t0, nb);
}

/* ------------------------------------------------------------------------ */
/* Decode: weighted values                                                  */

/*
 * Quantized rows: w (nb, ng) <- pr_i[j] * scale_jg, and msum_i (ng) +=
 * sum_j pr_i[j] * min_jg (two partial sums, so the adds do not chain).
 */
static void pv_weights(float *w, float *msum_i, const float *pi, const struct kv_attn_job *J,
                       int32_t t0, int32_t nb)
{
    const int32_t ng = J->ng;
    for (int32_t gi = 0; gi < ng; gi++) {
        float m0 = 0.0f, m1 = 0.0f;
        int32_t j = 0;
        for (; j + 2 <= nb; j += 2) {
            const struct kv_qparams *a = job_qp(J->vqp, J->qp_stride, t0 + j) + gi;
            const struct kv_qparams *b = job_qp(J->vqp, J->qp_stride, t0 + j + 1) + gi;
            w[(size_t)j * ng + gi] = pi[j] * a->scale;
            w[(size_t)(j + 1) * ng + gi] = pi[j + 1] * b->scale;
            m0 += pi[j] * a->min;
            m1 += pi[j + 1] * b->min;
        }
        if (j < nb) {
            const struct kv_qparams *a = job_qp(J->vqp, J->qp_stride, t0 + j) + gi;
            w[(size_t)j * ng + gi] = pi[j] * a->scale;
            m0 += pi[j] * a->min;
        }
        msum_i[gi] += m0 + m1;
    }
}

/*
 * acc_i (d) += sum_j pr[i][j] * v_row(t0 + j) for each head i of the group
 * (acc_i at acc + i*acc_stride). Quantized rows: acc_i += sum_j
 * (pr*scale_g) * codes and msum (g, ng) += sum_j pr*min_g; w (DEC_KB, ng)
 * is scratch.
 */
void kv_attn_rows_pv(float *acc, size_t acc_stride, float *msum, float *w, const float *pr,
                     const struct kv_attn_job *J, int32_t t0, int32_t nb)
{
    const int32_t d = J->d, group = J->group, ng = J->ng;
    const size_t stride = J->stride;
    const char *v0 = J->v + (size_t)t0 * stride;
#ifdef __AVX512F__
    if (J->fuse) {
        pv_fused(acc, acc_stride, pr, J, v0, J->vqp + (size_t)t0 * J->qp_stride, nb);
        return;
    }
    if (J->dt == KV_DTYPE_F32 && (J->g == 2 || J->g == 4 || J->g == 8) && d % (256 / J->g) == 0) {
        if (J->g == 2)
            pv_f32_heads(acc, acc_stride, pr, 2, v0, stride, nb, d);
        else if (J->g == 4)
            pv_f32_heads(acc, acc_stride, pr, 4, v0, stride, nb, d);
        else
            pv_f32_heads(acc, acc_stride, pr, 8, v0, stride, nb, d);
        return;
    }
#endif
    for (int32_t i = 0; i < J->g; i++) {
        float *a = acc + (size_t)i * acc_stride;
        const float *pi = pr + (size_t)i * DEC_KB;
#ifdef __AVX512F__
        if (J->wide && J->dt == KV_DTYPE_Q4) {
            const char *vqp = J->vqp + (size_t)t0 * J->qp_stride;
            if (d == 64 && group == 32) /* the common shapes, with constants */
                pv_q4_tbl(a, pi, v0, stride, vqp, J->qp_stride, nb, 64, 32);
            else if (d == 128 && group == 32)
                pv_q4_tbl(a, pi, v0, stride, vqp, J->qp_stride, nb, 128, 32);
            else
                pv_q4_tbl(a, pi, v0, stride, vqp, J->qp_stride, nb, d, group);
            continue;
        }
        if (J->wide) {
            pv_weights_512(w, msum + (size_t)i * ng, pi, J->vqp + (size_t)t0 * J->qp_stride,
                           J->qp_stride, nb, ng);
            if (d == 64 && group == 32)
                pv_q8_512(a, w, v0, stride, nb, 64, 32);
            else if (d == 128 && group == 32)
                pv_q8_512(a, w, v0, stride, nb, 128, 32);
            else
                pv_q8_512(a, w, v0, stride, nb, d, group);
            continue;
        }
#endif
        if (J->dt != KV_DTYPE_F32)
            pv_weights(w, msum + (size_t)i * ng, pi, J, t0, nb);
        if (!J->fast) {
            for (int32_t j = 0; j < nb; j++) {
                const char *row = v0 + (size_t)j * stride;
                if (J->dt == KV_DTYPE_F32) {
                    const float *v = (const float *)row;
                    for (int32_t e = 0; e < d; e++)
                        a[e] += pi[j] * v[e];
                } else {
                    for (int32_t e = 0; e < d; e++)
                        a[e] += w[(size_t)j * ng + e / group] *
                                (float)code_at((const uint8_t *)row, e, J->dt, group);
                }
            }
            continue;
        }
#ifdef __AVX512F__
        if (J->dt == KV_DTYPE_F32 && d % 16 == 0) {
            pv_f32_512(a, pi, v0, stride, nb, d);
            continue;
        }
#endif
#ifdef __AVX2__
        if (J->dt == KV_DTYPE_F32) {
            int32_t e = 0;
            for (; e + 32 <= d; e += 32) {
                __m256 a0 = _mm256_loadu_ps(a + e), a1 = _mm256_loadu_ps(a + e + 8);
                __m256 a2 = _mm256_loadu_ps(a + e + 16), a3 = _mm256_loadu_ps(a + e + 24);
                for (int32_t j = 0; j < nb; j++) {
                    const float *v = (const float *)(v0 + (size_t)j * stride) + e;
                    __m256 pj = _mm256_broadcast_ss(pi + j);
                    a0 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v), a0);
                    a1 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + 8), a1);
                    a2 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + 16), a2);
                    a3 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + 24), a3);
                }
                _mm256_storeu_ps(a + e, a0);
                _mm256_storeu_ps(a + e + 8, a1);
                _mm256_storeu_ps(a + e + 16, a2);
                _mm256_storeu_ps(a + e + 24, a3);
            }
            for (; e + 8 <= d; e += 8) {
                __m256 a0 = _mm256_loadu_ps(a + e);
                for (int32_t j = 0; j < nb; j++) {
                    const float *v = (const float *)(v0 + (size_t)j * stride) + e;
                    a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(pi + j), _mm256_loadu_ps(v), a0);
                }
                _mm256_storeu_ps(a + e, a0);
            }
            for (; e < d; e++)
                for (int32_t j = 0; j < nb; j++)
                    a[e] += pi[j] * ((const float *)(v0 + (size_t)j * stride))[e];
        } else if (J->dt == KV_DTYPE_Q8) {
            /* d is a multiple of 8 here (group is) */
            int32_t e = 0;
            for (; e + 32 <= d; e += 32) {
                const int32_t g0 = e / group, g1 = (e + 8) / group, g2 = (e + 16) / group,
                              g3 = (e + 24) / group;
                __m256 a0 = _mm256_loadu_ps(a + e), a1 = _mm256_loadu_ps(a + e + 8);
                __m256 a2 = _mm256_loadu_ps(a + e + 16), a3 = _mm256_loadu_ps(a + e + 24);
                for (int32_t j = 0; j < nb; j++) {
                    const uint8_t *c = (const uint8_t *)(v0 + (size_t)j * stride) + e;
                    const float *wj = w + (size_t)j * ng;
                    a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(wj + g0), load_u8x8(c), a0);
                    a1 = _mm256_fmadd_ps(_mm256_broadcast_ss(wj + g1), load_u8x8(c + 8), a1);
                    a2 = _mm256_fmadd_ps(_mm256_broadcast_ss(wj + g2), load_u8x8(c + 16), a2);
                    a3 = _mm256_fmadd_ps(_mm256_broadcast_ss(wj + g3), load_u8x8(c + 24), a3);
                }
                _mm256_storeu_ps(a + e, a0);
                _mm256_storeu_ps(a + e + 8, a1);
                _mm256_storeu_ps(a + e + 16, a2);
                _mm256_storeu_ps(a + e + 24, a3);
            }
            for (; e < d; e += 8) {
                const int32_t g0 = e / group;
                __m256 a0 = _mm256_loadu_ps(a + e);
                for (int32_t j = 0; j < nb; j++) {
                    const uint8_t *c = (const uint8_t *)(v0 + (size_t)j * stride) + e;
                    a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(w + (size_t)j * ng + g0), load_u8x8(c), a0);
                }
                _mm256_storeu_ps(a + e, a0);
            }
        } else {
            /* int4: byte chunk o (8 bytes) of group gi holds elements
             * gi*group + jb .. +7 (low nibbles) and + half (high nibbles) */
            const int32_t half = group / 2, nbytes = d / 2;
            const __m256i m4 = _mm256_set1_epi32(0x0F);
            int32_t o = 0;
            for (; o + 16 <= nbytes; o += 16) {
                const int32_t gA = o / half, jA = o % half, gB = (o + 8) / half, jB = (o + 8) % half;
                const int32_t eA = gA * group + jA, eB = gB * group + jB;
                __m256 a0 = _mm256_loadu_ps(a + eA), a1 = _mm256_loadu_ps(a + eA + half);
                __m256 a2 = _mm256_loadu_ps(a + eB), a3 = _mm256_loadu_ps(a + eB + half);
                for (int32_t j = 0; j < nb; j++) {
                    const uint8_t *c = (const uint8_t *)(v0 + (size_t)j * stride) + o;
                    const float *wj = w + (size_t)j * ng;
                    __m256i x = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)c));
                    __m256i y = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(c + 8)));
                    __m256 wA = _mm256_broadcast_ss(wj + gA), wB = _mm256_broadcast_ss(wj + gB);
                    a0 = _mm256_fmadd_ps(wA, _mm256_cvtepi32_ps(_mm256_and_si256(x, m4)), a0);
                    a1 = _mm256_fmadd_ps(wA, _mm256_cvtepi32_ps(_mm256_srli_epi32(x, 4)), a1);
                    a2 = _mm256_fmadd_ps(wB, _mm256_cvtepi32_ps(_mm256_and_si256(y, m4)), a2);
                    a3 = _mm256_fmadd_ps(wB, _mm256_cvtepi32_ps(_mm256_srli_epi32(y, 4)), a3);
                }
                _mm256_storeu_ps(a + eA, a0);
                _mm256_storeu_ps(a + eA + half, a1);
                _mm256_storeu_ps(a + eB, a2);
                _mm256_storeu_ps(a + eB + half, a3);
            }
            for (; o < nbytes; o += 8) {
                const int32_t gA = o / half, eA = gA * group + o % half;
                __m256 a0 = _mm256_loadu_ps(a + eA), a1 = _mm256_loadu_ps(a + eA + half);
                for (int32_t j = 0; j < nb; j++) {
                    const uint8_t *c = (const uint8_t *)(v0 + (size_t)j * stride) + o;
                    __m256i x = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)c));
                    __m256 wA = _mm256_broadcast_ss(w + (size_t)j * ng + gA);
                    a0 = _mm256_fmadd_ps(wA, _mm256_cvtepi32_ps(_mm256_and_si256(x, m4)), a0);
                    a1 = _mm256_fmadd_ps(wA, _mm256_cvtepi32_ps(_mm256_srli_epi32(x, 4)), a1);
                }
                _mm256_storeu_ps(a + eA, a0);
                _mm256_storeu_ps(a + eA + half, a1);
            }
        }
#endif
    }
}

/* dst (nb, d) <- the dequantized K (is_v = 0) or V rows t .. t+nb-1 of J */
void kv_attn_rows_dequant(float *dst, const struct kv_attn_job *J, int32_t t, int32_t nb,
                          int is_v)
{
    const char *c0 = (is_v ? J->v : J->k) + (size_t)t * J->stride;
    const char *qp0 = (is_v ? J->vqp : J->kqp) + (size_t)t * J->qp_stride;
#ifdef __AVX512F__
    if (J->wide) {
        /* the common shapes with constants, so the loops unroll */
        if (J->d == 64 && J->group == 32 && J->dt == KV_DTYPE_Q8)
            dequant_tile(dst, c0, J->stride, qp0, J->qp_stride, nb, 64, 32, KV_DTYPE_Q8);
        else if (J->d == 64 && J->group == 32)
            dequant_tile(dst, c0, J->stride, qp0, J->qp_stride, nb, 64, 32, KV_DTYPE_Q4);
        else if (J->d == 128 && J->group == 32 && J->dt == KV_DTYPE_Q8)
            dequant_tile(dst, c0, J->stride, qp0, J->qp_stride, nb, 128, 32, KV_DTYPE_Q8);
        else if (J->d == 128 && J->group == 32)
            dequant_tile(dst, c0, J->stride, qp0, J->qp_stride, nb, 128, 32, KV_DTYPE_Q4);
        else
            dequant_tile(dst, c0, J->stride, qp0, J->qp_stride, nb, J->d, J->group, J->dt);
        return;
    }
#endif
    for (int32_t j = 0; j < nb; j++)
        kv_dequantize_row(dst + (size_t)j * J->d, c0 + (size_t)j * J->stride,
                          job_qp(qp0, J->qp_stride, j), J->dt, J->d, J->group);
}
