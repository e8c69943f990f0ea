/*
 * rows_q8.c - decode row kernels for int8 keys and values (kv_rows.h),
 * per-token groups along head_dim (kv_quant.h's layout: code of element i
 * in byte i): the kernels of rows_int.h with a chunk of codes read by
 * widening bytes.
 *
 * The design decision: the codes are dequantized in registers, never into a
 * buffer the size of the cache. Scores use the group form
 *     score = sum_g scale_g * dot(q_g, codes_g) + min_g * sum(q_g)
 * (sum(q_g) precomputed per job, J->qsum), and values add p*scale_g*codes
 * to the accumulator and p*min_g to msum apart (the driver folds msum in at
 * the end). With GQA (2, 4 or 8 heads a kv head) on AVX-512 each 16-element
 * chunk is dequantized in a register once and fed to all the group's heads
 * (no tile stored or re-read: head_dim 64, 32/8 heads, 2 threads, min of 5
 * interleaved runs, 148 vs 235 us through the tile at T 2048, 683 vs 871 at
 * T 8192); other group sizes dequantize a block once into an L1 tile the
 * heads share. The common shapes (head_dim 64 and 128, group 32) get their
 * own copies with the shape as constants, so their loops unroll.
 */
#include "kv_rows.h"

#define INT_PFX q8
#define INT_BITS 8
#define INT_NC 1 /* a read of codes is one chunk */

static inline int32_t int_code_at(const uint8_t *row, int32_t e, int32_t group, int32_t d)
{
    (void)group;
    (void)d;
    return row[e];
}

/* chunk 0 of the bytes from o on is element o */
/* (unused by a build without AVX2: only the SIMD levels read chunks) */
__attribute__((unused)) static inline int32_t int_el(int32_t o, int c, int32_t group)
{
    (void)c;
    (void)group;
    return o;
}

#ifdef __AVX2__
#define INT_AVX2_OK(d, group) ((group) % 8 == 0)
#define INT_SC8_NC 1
#define INT_SC8_SPAN(group) (group)
#define INT_CHUNKS_ONE_GROUP(group, n) 1 /* one chunk a read */
#define INT_PV8_UNITS 4 /* 32 elements a value pass */

KV_INLINE void int_sc8(__m256 *x, const uint8_t *row, int32_t g0, int32_t e, int32_t group)
{
    (void)group;
    x[0] = kv_load_u8x8(row + g0 + e);
}

KV_INLINE void int_pv8(__m256 *x, const uint8_t *p) { x[0] = kv_load_u8x8(p); }

/* integer scores with an int16 query (an int8 one would double the error
 * of 8-bit keys): 16 codes a read, widened to 16 bits */
#define INT_ISC_QBITS 16
#define INT_ISC_MIN_G 4 /* below, the f32 query's kernel was as fast or faster
                          (hot T 2048, AVX2 EPYC: 1 head 1.0-1.14x, 2 heads at
                          head_dim 128 1.14x) */
#define INT_ISC_OK(d, group) ((group) % 16 == 0)
#define INT_ISC_MERGE(group) 1

KV_INLINE void int_isc_codes(__m256i *x, const uint8_t *p, int full)
{
    (void)full; /* a row is whole reads: d is a multiple of the group */
    x[0] = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)p));
}
#endif

#ifdef __AVX512F__
#define INT_512_OK(d, group) ((group) % 16 == 0)
#define INT_FUSED_OK(g, d) ((d) % (256 / (g)) == 0)
#define INT_PV_CH(g) (16 / (g))
#define INT_NR_MID 4
#define INT_AHEAD 1

/* The 16 elements of the row from element o on (o a multiple of 16, so the
 * chunk lies in one group), dequantized in a register. */
KV_INLINE void int_deq16(__m512 *x, const uint8_t *p, const struct kv_qparams *qp, int32_t o,
                         int32_t group)
{
    const int32_t gi = o / group;
    x[0] = _mm512_fmadd_ps(kv_load_u8x16(p), _mm512_set1_ps(qp[gi].scale),
                           _mm512_set1_ps(qp[gi].min));
}

/* o[0..nr) <- scores of nr <= 4 int8 rows r, r + st, ... with qparams at
 * qpr, qpr + qst, ... */
KV_INLINE void q8_rows_n(float *o, const int nr, const float *q, const float *qsum,
                         const char *r, size_t st, const char *qpr, size_t qst, int32_t d,
                         int32_t group, int32_t ng)
{
    (void)d;
    __m512 tot[4];
    float mins[4];
    for (int u = 0; u < nr; u++) {
        tot[u] = _mm512_setzero_ps();
        mins[u] = 0.0f;
    }
    for (int32_t gi = 0; gi < ng; gi++) {
        const int32_t g0 = gi * group;
        __m512 a[4];
        for (int u = 0; u < nr; u++)
            a[u] = _mm512_setzero_ps();
        for (int32_t e = g0; e < g0 + group; e += 16) {
            __m512 qv = _mm512_loadu_ps(q + e);
            for (int u = 0; u < nr; u++)
                a[u] = _mm512_fmadd_ps(qv, kv_load_u8x16((const uint8_t *)(r + u * st) + e), a[u]);
        }
        for (int u = 0; u < nr; u++) {
            const struct kv_qparams *qp = (const struct kv_qparams *)(qpr + u * qst) + gi;
            tot[u] = _mm512_fmadd_ps(_mm512_set1_ps(qp->scale), a[u], tot[u]);
            mins[u] += qp->min * qsum[gi];
        }
    }
    kv_qrows_finish(o, nr, tot, mins);
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
                           size_t st, const char *qpr, size_t qst, int32_t d, int32_t group,
                           int32_t ng)
{
    (void)d;
    __m512 tot[16];
    for (int u = 0; u < 16; u++) {
        const uint8_t *c = (const uint8_t *)(r + u * st);
        const struct kv_qparams *qp = (const struct kv_qparams *)(qpr + u * qst);
        __m512 t = _mm512_setzero_ps();
        for (int32_t gi = 0; gi < ng; gi++) {
            const int32_t g0 = gi * group;
            __m512 a = _mm512_mul_ps(_mm512_loadu_ps(q + g0), kv_load_u8x16(c + g0));
            for (int32_t e = g0 + 16; e < g0 + group; e += 16)
                a = _mm512_fmadd_ps(_mm512_loadu_ps(q + e), kv_load_u8x16(c + e), a);
            t = _mm512_fmadd_ps(_mm512_set1_ps(qp[gi].scale), a, t);
        }
        tot[u] = t;
    }
    __m512 sc = kv_hsum16x16(tot);
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

/* a (d) += sum_j w[group of e][j] * codes_j[e], 64 elements a pass;
 * w is (ng, DEC_KB) here, as pv_weights_512 writes it. The first pass asks
 * for the rows ahead (kv_rows_ahead). */
KV_INLINE void pv_q8_512(float *a, const float *w, const struct kv_rows_side *s, const char *v0,
                         const char *vqp, int32_t nb, int32_t d, int32_t group)
{
    const size_t stride = s->stride;
    int32_t e = 0;
    for (; e + 64 <= d; e += 64) {
        const int32_t g0 = e / group, g1 = (e + 16) / group, g2 = (e + 32) / group,
                      g3 = (e + 48) / group;
        __m512 a0 = _mm512_loadu_ps(a + e), a1 = _mm512_loadu_ps(a + e + 16);
        __m512 a2 = _mm512_loadu_ps(a + e + 32), a3 = _mm512_loadu_ps(a + e + 48);
        for (int32_t j = 0; j < nb; j++) {
            const uint8_t *c = (const uint8_t *)(v0 + (size_t)j * stride) + e;
            if (e == 0) {
                kv_rows_ahead(s, (const char *)c, 1);
                kv_rows_ahead_qp(s, vqp + (size_t)j * s->qp_stride, 1);
            }
            a0 = _mm512_fmadd_ps(_mm512_set1_ps(w[(size_t)g0 * DEC_KB + j]), kv_load_u8x16(c), a0);
            a1 = _mm512_fmadd_ps(_mm512_set1_ps(w[(size_t)g1 * DEC_KB + j]), kv_load_u8x16(c + 16), a1);
            a2 = _mm512_fmadd_ps(_mm512_set1_ps(w[(size_t)g2 * DEC_KB + j]), kv_load_u8x16(c + 32), a2);
            a3 = _mm512_fmadd_ps(_mm512_set1_ps(w[(size_t)g3 * DEC_KB + j]), kv_load_u8x16(c + 48), a3);
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
            if (e == 0) {
                kv_rows_ahead(s, (const char *)c, 1);
                kv_rows_ahead_qp(s, vqp + (size_t)j * s->qp_stride, 1);
            }
            a0 = _mm512_fmadd_ps(_mm512_set1_ps(w[(size_t)g0 * DEC_KB + j]), kv_load_u8x16(c), a0);
        }
        _mm512_storeu_ps(a + e, a0);
    }
}

/* one head's values: the weights by row and group, then the codes */
KV_INLINE void q8_pv_row(float *a, float *w, float *msum_i, const float *pi,
                         const struct kv_rows_side *s, const char *v0, const char *vqp,
                         int32_t nb, int32_t d, int32_t group)
{
    pv_weights_512(w, msum_i, pi, vqp, s->qp_stride, nb, s->ng);
    pv_q8_512(a, w, s, v0, vqp, nb, d, group);
}
#endif /* __AVX512F__ */

#if defined(__AVX512F__) && defined(__AVX512VNNI__)
#define INT_VNNI_QBITS 16 /* integer scores with VPDPWSSD (rows_int.h) */
/* one head a kv head: with 4, 5-6% slower than the float kernels, which
 * convert a chunk once for all heads (cold T 32768, 32/8 heads) */
#define INT_VNNI_MAX_G 1

/* elements 32 rd .. 32 rd + 31 of a row, a 16-bit lane each */
KV_INLINE __m512i int_vnni_codes(const char *row, int rd)
{
    return _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)row + rd));
}
#endif

#include "rows_int.h"

void kv_rows_bind_q8(struct kv_dec_job *J, int is_v) { q8_bind(J, is_v); }
