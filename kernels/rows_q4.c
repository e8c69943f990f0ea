/*
 * rows_q4.c - decode row kernels for int4 keys and values (kv_rows.h),
 * per-token groups along head_dim (kv_quant.h's layout: byte j of a group
 * holds element j in its low nibble and element j + group/2 in its high one,
 * so the low nibbles of a byte chunk are the first half of the group): the
 * kernels of rows_int.h, each read of codes giving two chunks.
 *
 * The design decision: on AVX-512 a group's sixteen possible values
 * min + scale*c sit in one register and the nibbles index it (vpermps),
 * which costs less than widening and converting, and carries the min, so
 * there are no separate min terms. AVX2 and scalar use the group form of
 * rows_q8.c (scale * dot(q, codes) + min * sum(q)). With GQA of 2, 4 or 8
 * heads one load of a byte chunk and one table serve both nibble halves and
 * all the group's heads (head_dim 128: 250 vs 455 us through the tile at
 * T 2048; head_dim 64 within noise of it).
 */
#include "kv_rows.h"

#define INT_PFX q4
#define INT_BITS 4
#define INT_NC 2 /* a read of codes: its low nibbles, then its high ones */

static inline int32_t int_code_at(const uint8_t *codes, int32_t e, int32_t group, int32_t d)
{
    (void)d;
    int32_t half = group / 2, gi = e / group, j = e % group;
    uint8_t byte = codes[gi * half + (j < half ? j : j - half)];
    return j < half ? (byte & 0x0F) : (byte >> 4);
}

/* bytes from o on hold the elements from (o's group) + o % half on (low
 * nibbles) and half further (high) */
/* (unused by a build without AVX2: only the SIMD levels read chunks) */
__attribute__((unused)) static inline int32_t int_el(int32_t o, int c, int32_t group)
{
    const int32_t half = group / 2;
    return o / half * group + o % half + c * half;
}

#ifdef __AVX2__
#define INT_AVX2_OK(d, group) ((group) % 16 == 0)
#define INT_SC8_NC 2
#define INT_SC8_SPAN(group) ((group) / 2)
#define INT_CHUNKS_ONE_GROUP(group, n) 1 /* a byte's two nibbles are one group's */
#define INT_PV8_UNITS 2 /* 16 bytes a value pass */

KV_INLINE void int_pv8(__m256 *x, const uint8_t *p)
{
    __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
    x[0] = _mm256_cvtepi32_ps(_mm256_and_si256(b, _mm256_set1_epi32(0x0F)));
    x[1] = _mm256_cvtepi32_ps(_mm256_srli_epi32(b, 4));
}

/* integer scores: a 16-byte half lies in one group, whose two nibbles of a
 * byte always do */
#define INT_ISC_QBITS 8
#define INT_ISC_MIN_G 1
#define INT_ISC_OK(d, group) ((group) % 32 == 0)
#define INT_ISC_MERGE(group) 2

KV_INLINE void int_isc_codes(__m256i *x, const uint8_t *p, int full)
{
    const __m256i v = full ? _mm256_loadu_si256((const __m256i *)p)
                           : _mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)p));
    const __m256i m = _mm256_set1_epi8(0x0F);
    x[0] = _mm256_and_si256(v, m);
    x[1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m);
}

/* e in the first half of the group (whose bytes start at g0 / 2) */
KV_INLINE void int_sc8(__m256 *x, const uint8_t *row, int32_t g0, int32_t e, int32_t group)
{
    (void)group;
    int_pv8(x, row + g0 / 2 + e);
}
#endif

#ifdef __AVX512F__
#define INT_512_OK(d, group) ((group) % 32 == 0)
#define INT_FUSED_OK(g, d) ((d) % (256 / (g)) == 0)
#define INT_PV_CH(g) (16 / (g))
#define INT_NR_MID 8
#define INT_AHEAD 1

#define KV_IOTA16 _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)

/* the 16 values min + scale*c of a group, c = 0..15 */
KV_INLINE __m512 q4_table(const struct kv_qparams *qp)
{
    return _mm512_fmadd_ps(KV_IOTA16, _mm512_set1_ps(qp->scale), _mm512_set1_ps(qp->min));
}

KV_INLINE void int_deq16(__m512 *x, const uint8_t *p, const struct kv_qparams *qp, int32_t o,
                         int32_t group)
{
    __m512 tbl = q4_table(qp + o / (group / 2));
    __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
    x[0] = _mm512_permutexvar_ps(b, tbl);
    x[1] = _mm512_permutexvar_ps(_mm512_srli_epi32(b, 4), tbl);
}

/* o[0..nr) <- scores of nr <= 8 int4 rows, by table (which carries the
 * min: qsum is not read) */
KV_INLINE void q4_rows_n(float *o, const int nr, const float *q, const float *qsum,
                         const char *r, size_t st, const char *qpr, size_t qst, int32_t d,
                         int32_t group, int32_t ng)
{
    (void)qsum;
    (void)d;
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
        t[u] = kv_fold512(_mm512_add_ps(a[u], b[u]));
    if (nr == 8) {
        _mm256_storeu_ps(o, kv_hsum8x8(t));
    } else {
        for (int u = 0; u < nr; u++)
            o[u] = kv_hsum8(t[u]);
    }
}

/* Scores of 16 int4 rows (MHA), by table, one reduction tree for all 16
 * (as rows_q8.c's q8_rows_x16; the table carries the min, so no separate
 * min terms) */
KV_INLINE void q4_rows_x16(float *o, const float *q, const float *qsum, const char *r,
                           size_t st, const char *qpr, size_t qst, int32_t d, int32_t group,
                           int32_t ng)
{
    (void)qsum;
    (void)d;
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
    _mm512_storeu_ps(o, kv_hsum16x16(tot));
}

/* a (d) += sum_j pi[j] * dequantized v_row(j), int4, by table */
KV_INLINE void pv_q4_tbl(float *a, const float *pi, const struct kv_rows_side *s,
                         const char *v0, const char *vqp0, int32_t nb, int32_t d, int32_t group)
{
    const size_t stride = s->stride, qst = s->qp_stride;
    const int32_t half = group / 2, nbytes = d / 2;
    int32_t o = 0;
    for (; o + 32 <= nbytes; o += 32) {
        const int32_t gA = o / half, gB = (o + 16) / half;
        const int32_t eA = gA * group + o % half, eB = gB * group + (o + 16) % half;
        __m512 a0 = _mm512_loadu_ps(a + eA), a1 = _mm512_loadu_ps(a + eA + half);
        __m512 a2 = _mm512_loadu_ps(a + eB), a3 = _mm512_loadu_ps(a + eB + half);
        for (int32_t j = 0; j < nb; j++) {
            const uint8_t *c = (const uint8_t *)(v0 + (size_t)j * stride) + o;
            const struct kv_qparams *qp = kv_rows_qp(vqp0, qst, j);
            if (o == 0) {
                kv_rows_ahead(s, (const char *)c, 1);
                kv_rows_ahead_qp(s, (const char *)qp, 1);
            }
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
            if (o == 0) {
                kv_rows_ahead(s, (const char *)c, 1);
                kv_rows_ahead_qp(s, vqp0 + (size_t)j * qst, 1);
            }
            __m512 p = _mm512_set1_ps(pi[j]);
            __m512 tA = q4_table(kv_rows_qp(vqp0, qst, j) + gA);
            __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)c));
            a0 = _mm512_fmadd_ps(p, _mm512_permutexvar_ps(x, tA), a0);
            a1 = _mm512_fmadd_ps(p, _mm512_permutexvar_ps(_mm512_srli_epi32(x, 4), tA), a1);
        }
        _mm512_storeu_ps(a + eA, a0);
        _mm512_storeu_ps(a + eA + half, a1);
    }
}

/* one head's values, by table */
KV_INLINE void q4_pv_row(float *a, float *w, float *msum_i, const float *pi,
                         const struct kv_rows_side *s, const char *v0, const char *vqp,
                         int32_t nb, int32_t d, int32_t group)
{
    (void)w;
    (void)msum_i;
    pv_q4_tbl(a, pi, s, v0, vqp, nb, d, group);
}
#endif /* __AVX512F__ */

#if defined(__AVX512F__) && defined(__AVX512VNNI__)
#define INT_VNNI_QBITS 8 /* integer scores with VPDPBUSD (rows_int.h) */
#define INT_VNNI_MAX_G 8

/* elements 64 rd .. 64 rd + 63 of a row in groups of 32 as one byte each:
 * the low nibbles of a group's 16 bytes, then their high nibbles */
KV_INLINE __m512i int_vnni_codes(const char *row, int rd)
{
    const __m512i b = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)row + rd));
    const __m512i sh = _mm512_setr_epi32(0, 0, 0, 0, 0x40004, 0x40004, 0x40004, 0x40004, 0, 0,
                                         0, 0, 0x40004, 0x40004, 0x40004, 0x40004);
    return _mm512_and_si512(_mm512_srlv_epi16(_mm512_shuffle_i32x4(b, b, 0x50), sh),
                            _mm512_set1_epi8(0x0F));
}
#endif

#include "rows_int.h"

void kv_rows_bind_q4(struct kv_dec_job *J, int is_v) { q4_bind(J, is_v); }
