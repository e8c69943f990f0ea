/*
 * rows_q2.c - decode row kernels for int2 keys and values (kv_rows.h):
 * 2-bit codes, four to a byte, with a scale and a minimum per group
 * (kv_quant.h's layout: within each run of 64 elements, byte j holds
 * elements j, j + 16, j + 32 and j + 48 in its bit pairs 0-1 ... 6-7): the
 * kernels of rows_int.h, each read of codes giving four chunks.
 *
 * The design decision: the layout makes every 16-byte load four
 * contiguous 16-element chunks (a shift by 0, 2, 4, 6 bits each), and
 * VPERMILPS reads only the low two bits of each lane, so a chunk's codes
 * become floats (or, through a group's table min + scale * c, values) in
 * one in-lane permute, without masking or converting. Scores and values of
 * one head per kv head use the group form of rows_q8.c (scale * dot(q,
 * codes) + min * sum(q); values add p*scale*codes and p*min apart); with
 * GQA of 2, 4 or 8 heads each chunk is dequantized once through its
 * group's table and fed to all the heads. The fast paths take rows of a
 * multiple of 64 elements and groups of a multiple of 16 (AVX-512) or 8
 * (AVX2); other rows are dequantized into a tile (q2_tile_any) for the
 * f32 kernels, and the scalar path reads codes directly.
 */
#include "kv_rows.h"

#define INT_PFX q2
#define INT_BITS 2
#define INT_NC 4 /* a read of codes: the four bit pairs of its bytes */

/* the code of element e of a row of d elements (kv_quant.h's layout) */
static inline int32_t int_code_at(const uint8_t *row, int32_t e, int32_t group, int32_t d)
{
    (void)group;
    const int32_t r0 = e - e % 64, len = d - r0 < 64 ? d - r0 : 64, q = len / 4, w = e - r0;
    return (row[r0 / 4 + w % q] >> (2 * (w / q))) & 3;
}

/* bytes from o on (o a multiple of 8) are in the run at element o / 16 * 64,
 * their chunk c 16 c further */
/* (unused by a build without AVX2: only the SIMD levels read chunks) */
__attribute__((unused)) static inline int32_t int_el(int32_t o, int c, int32_t group)
{
    (void)group;
    return o / 16 * 64 + o % 16 + 16 * c;
}

/* dst (nb, d) <- rows as floats, any shape: a run of 64 elements at a time
 * (its last run len = d - r0 long, byte i holding elements i, i + len/4,
 * ...), then min + scale * code per group. Rows whose length is not a
 * multiple of 64 take this tile and the f32 kernels: reading their codes
 * element by element (int_code_at, three divisions each, per head) ran
 * head_dim 32 fifty times slower than head_dim 64. */
static void q2_tile_any(float *dst, const struct kv_rows_side *s, int32_t d, const char *rows,
                        const char *qp0, int32_t nb)
{
    for (int32_t j = 0; j < nb; j++) {
        const uint8_t *c = (const uint8_t *)(rows + (size_t)j * s->stride);
        const struct kv_qparams *qp = kv_rows_qp(qp0, s->qp_stride, j);
        float *o = dst + (size_t)j * d;
        for (int32_t r0 = 0; r0 < d; r0 += 64) {
            const int32_t len = d - r0 < 64 ? d - r0 : 64, q = len / 4;
            const uint8_t *b = c + r0 / 4;
            for (int32_t k = 0; k < 4; k++)
                for (int32_t i = 0; i < q; i++)
                    o[r0 + k * q + i] = (float)((b[i] >> (2 * k)) & 3);
        }
        for (int32_t gi = 0; gi < s->ng; gi++)
            for (int32_t e = gi * s->group; e < (gi + 1) * s->group; e++)
                o[e] = qp[gi].min + qp[gi].scale * o[e];
    }
}

#ifdef __AVX2__
/* The 8-byte half h of the 64-element run at element r0 gives four chunks
 * of 8 elements: r0 + 8h + 16k, k = 0..3 (bits 2k, 2k+1 of each byte). */
KV_INLINE __m256 q2_codes8(__m256i x, int k)
{
    return _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(x, 2 * k), _mm256_set1_epi32(3)));
}

KV_INLINE __m256i q2_load8(const uint8_t *p)
{
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
}

#define INT_AVX2_OK(d, group) ((d) % 64 == 0 && (group) % 8 == 0)
#define INT_SC8_NC 1
#define INT_SC8_SPAN(group) (group)
#define INT_CHUNKS_ONE_GROUP(group, n) ((group) % (16 * (n)) == 0) /* chunk c: 16 c on in the run */
#define INT_PV8_UNITS 1 /* a half-run, its four chunks, a value pass */

/* the chunk [g0 + e, g0 + e + 8) */
KV_INLINE void int_sc8(__m256 *x, const uint8_t *row, int32_t g0, int32_t e, int32_t group)
{
    (void)group;
    e += g0;
    const int32_t r0 = e - e % 64, h = e % 16 / 8, k = e % 64 / 16;
    x[0] = q2_codes8(q2_load8(row + r0 / 4 + 8 * h), k);
}

/* integer scores: a chunk of a 16-byte half is 16 consecutive elements;
 * the chunks of a half that lie in one group are summed together */
#define INT_ISC_QBITS 8
#define INT_ISC_MIN_G 1
#define INT_ISC_OK(d, group) ((d) % 64 == 0 && (group) % 16 == 0)
#define INT_ISC_MERGE(group) ((group) % 64 == 0 ? 4 : (group) % 32 == 0 ? 2 : 1)

KV_INLINE void int_isc_codes(__m256i *x, const uint8_t *p, int full)
{
    const __m256i v = full ? _mm256_loadu_si256((const __m256i *)p)
                           : _mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)p));
    const __m256i m = _mm256_set1_epi8(3);
    x[0] = _mm256_and_si256(v, m);
    for (int k = 1; k < 4; k++)
        x[k] = _mm256_and_si256(_mm256_srli_epi16(v, 2 * k), m);
}

KV_INLINE void int_pv8(__m256 *x, const uint8_t *p)
{
    __m256i b = q2_load8(p);
    for (int k = 0; k < 4; k++)
        x[k] = q2_codes8(b, k);
}

#ifdef __AVX512F__
#define INT_512_OK(d, group) ((d) % 64 == 0 && (group) % 16 == 0)
#define INT_FUSED_OK(g, d) 1 /* runs of 64: every d the level takes */
#define INT_PV_CH(g) ((g) == 8 ? 2 : 4) /* g * ch accumulators <= 16, a read at most */
#define INT_NR_MID 4
#define INT_AHEAD 0 /* the arithmetic is the longer part (kv_rows_ahead) */

/* Bytes o .. o+15 of a row (o a multiple of 16) hold the run at element
 * 4o: chunk k (elements 4o + 16k ..) is lane c's bits 2k, 2k+1. VPERMILPS
 * reads the low two bits of each lane's index: permute(table, x >> 2k) is
 * table[code] for a table repeated in every 128-bit lane. */
#define KV_Q2_IOTA _mm512_setr_ps(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3)

KV_INLINE __m512i q2_load16(const uint8_t *p)
{
    return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
}

KV_INLINE __m512 q2_chunk(__m512i x, int k, __m512 tbl)
{
    return _mm512_permutevar_ps(tbl, k ? _mm512_srli_epi32(x, 2 * k) : x);
}

/* the four values min + scale*c of a group, c = 0..3, in every 128-bit lane */
KV_INLINE __m512 q2_table(const struct kv_qparams *qp)
{
    return _mm512_fmadd_ps(KV_Q2_IOTA, _mm512_set1_ps(qp->scale), _mm512_set1_ps(qp->min));
}

/* *tot += scale_g * dot(q_g, codes_g) over the groups of one int2 row c
 * (group form; the min terms are added apart) */
KV_INLINE void q2_row_dot(__m512 *tot, const float *q, const uint8_t *c,
                          const struct kv_qparams *qp, int32_t d, int32_t group)
{
    const __m512 iota = KV_Q2_IOTA;
    __m512 t = *tot, g = _mm512_setzero_ps();
    int32_t gcur = 0;
    for (int32_t e0 = 0; e0 < d; e0 += 64) {
        __m512i x = q2_load16(c + e0 / 4);
        for (int k = 0; k < 4; k++) {
            const int32_t e = e0 + 16 * k, gi = e / group;
            if (gi != gcur) { /* a group ends: scale its sum into the score */
                t = _mm512_fmadd_ps(_mm512_set1_ps(qp[gcur].scale), g, t);
                g = _mm512_setzero_ps();
                gcur = gi;
            }
            g = _mm512_fmadd_ps(_mm512_loadu_ps(q + e), q2_chunk(x, k, iota), g);
        }
    }
    *tot = _mm512_fmadd_ps(_mm512_set1_ps(qp[gcur].scale), g, t);
}

/* sum_g min_g * sum(q_g) of one row */
KV_INLINE float q2_row_mins(const struct kv_qparams *qp, const float *qsum, int32_t ng)
{
    float acc = 0.0f;
    for (int32_t gi = 0; gi < ng; gi++)
        acc += qp[gi].min * qsum[gi];
    return acc;
}

/* o[0..nr) <- scores of nr <= 4 int2 rows */
KV_INLINE void q2_rows_n(float *o, const int nr, const float *q, const float *qsum,
                         const char *r, size_t st, const char *qpr, size_t qst, int32_t d,
                         int32_t group, int32_t ng)
{
    __m512 tot[4];
    float mins[4];
    for (int u = 0; u < nr; u++) {
        const struct kv_qparams *qp = (const struct kv_qparams *)(qpr + u * qst);
        tot[u] = _mm512_setzero_ps();
        q2_row_dot(&tot[u], q, (const uint8_t *)(r + u * st), qp, d, group);
        mins[u] = q2_row_mins(qp, qsum, ng);
    }
    kv_qrows_finish(o, nr, tot, mins);
}

/* Scores of 16 int2 rows (MHA), one reduction tree for all 16 */
KV_INLINE void q2_rows_x16(float *o, const float *q, const float *qsum, const char *r,
                           size_t st, const char *qpr, size_t qst, int32_t d, int32_t group,
                           int32_t ng)
{
    __m512 tot[16];
    float m[16];
    for (int u = 0; u < 16; u++) {
        const struct kv_qparams *qp = (const struct kv_qparams *)(qpr + u * qst);
        tot[u] = _mm512_setzero_ps();
        q2_row_dot(&tot[u], q, (const uint8_t *)(r + u * st), qp, d, group);
        m[u] = q2_row_mins(qp, qsum, ng);
    }
    _mm512_storeu_ps(o, _mm512_add_ps(kv_hsum16x16(tot), _mm512_loadu_ps(m)));
}

KV_INLINE void int_deq16(__m512 *x, const uint8_t *p, const struct kv_qparams *qp, int32_t o,
                         int32_t group)
{
    __m512i b = q2_load16(p);
    for (int k = 0; k < 4; k++)
        x[k] = q2_chunk(b, k, q2_table(qp + (4 * o + 16 * k) / group));
}

/* a (d) += sum_j w[j][group] * codes_j, w (nb, ng) as kv_rows_pv_weights
 * writes it: a pass over the rows per 64-element run, four accumulators */
KV_INLINE void pv_q2_512(float *a, const float *w, const char *v0, size_t stride, int32_t nb,
                         int32_t d, int32_t group)
{
    const __m512 iota = KV_Q2_IOTA;
    const int32_t ng = d / group;
    for (int32_t e0 = 0; e0 < d; e0 += 64) {
        int32_t gk[4];
        __m512 ak[4];
        for (int k = 0; k < 4; k++) {
            gk[k] = (e0 + 16 * k) / group;
            ak[k] = _mm512_loadu_ps(a + e0 + 16 * k);
        }
        for (int32_t j = 0; j < nb; j++) {
            __m512i x = q2_load16((const uint8_t *)(v0 + (size_t)j * stride) + e0 / 4);
            const float *wj = w + (size_t)j * ng;
            for (int k = 0; k < 4; k++)
                ak[k] = _mm512_fmadd_ps(_mm512_set1_ps(wj[gk[k]]), q2_chunk(x, k, iota), ak[k]);
        }
        for (int k = 0; k < 4; k++)
            _mm512_storeu_ps(a + e0 + 16 * k, ak[k]);
    }
}

/* one head's values: the weights by row and group, then the codes */
KV_INLINE void q2_pv_row(float *a, float *w, float *msum_i, const float *pi,
                         const struct kv_rows_side *s, const char *v0, const char *vqp,
                         int32_t nb, int32_t d, int32_t group)
{
    kv_rows_pv_weights(w, msum_i, pi, s, vqp, nb);
    pv_q2_512(a, w, v0, s->stride, nb, d, group);
}
#endif /* __AVX512F__ */
#endif /* __AVX2__ */

#if defined(__AVX512F__) && defined(__AVX512VNNI__)
#define INT_VNNI_QBITS 8 /* integer scores with VPDPBUSD (rows_int.h) */
#define INT_VNNI_MAX_G 8

/* elements 64 rd .. 64 rd + 63 of a row as one byte each: their run's 16
 * bytes in every 128-bit lane, lane k shifted right by 2k bits */
KV_INLINE __m512i int_vnni_codes(const char *row, int rd)
{
    const __m512i sh = _mm512_setr_epi32(0, 0, 0, 0, 0x20002, 0x20002, 0x20002, 0x20002,
                                         0x40004, 0x40004, 0x40004, 0x40004, 0x60006, 0x60006,
                                         0x60006, 0x60006);
    const __m128i b = _mm_loadu_si128((const __m128i *)row + rd);
    return _mm512_and_si512(_mm512_srlv_epi16(_mm512_broadcast_i32x4(b), sh),
                            _mm512_set1_epi8(3));
}
#endif

#include "rows_int.h"

void kv_rows_bind_q2(struct kv_dec_job *J, int is_v)
{
    if (J->d % 64 != 0) { /* rows no fast path takes: the f32 kernels over a tile */
        if (is_v)
            J->v_tile = q2_tile_any;
        else
            J->k_tile = q2_tile_any;
        return;
    }
    q2_bind(J, is_v);
}
