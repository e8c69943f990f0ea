/*
 * rows_q2.c - decode row kernels for int2 keys and values (kv_rows.h):
 * 2-bit codes, four to a byte, with a scale and a minimum per group
 * (kv_quant.h's layout: within each run of 64 elements, byte j holds
 * elements j, j + 16, j + 32 and j + 48 in its bit pairs 0-1 ... 6-7).
 *
 * The design decision: the layout makes every 16-byte load four
 * contiguous 16-element chunks (a shift by 0, 2, 4, 6 bits each), and
 * VPERMILPS reads only the low two bits of each lane, so a chunk's codes
 * become floats (or, through a group's table min + scale * c, values) in
 * one in-lane permute, without masking or converting. Scores and values of
 * one head per kv head use the group form of rows_q8.c (scale * dot(q,
 * codes) + min * sum(q); values add p*scale*codes and p*min apart); with
 * GQA of 2, 4 or 8 heads each chunk is dequantized once through its
 * group's table and fed to all the heads (as rows_q4.c); other group
 * sizes dequantize a block into an L1 tile. The fast paths take rows of a
 * multiple of 64 elements and groups of a multiple of 16 (AVX-512) or 8
 * (AVX2); other rows are dequantized into a tile (q2_tile_any) for the
 * f32 kernels, and the scalar path reads codes directly (any shape).
 */
#include "kv_rows.h"

/* ------------------------------------------------------------------------ */
/* Scalar (any shape)                                                       */

/* the code of element e of a row of d elements (kv_quant.h's layout) */
static inline int32_t q2_code_at(const uint8_t *row, int32_t e, int32_t d)
{
    const int32_t r0 = e - e % 64, len = d - r0 < 64 ? d - r0 : 64, q = len / 4, w = e - r0;
    return (row[r0 / 4 + w % q] >> (2 * (w / q))) & 3;
}

static void q2_sc_scalar(float *sc, const struct kv_dec_job *J, const struct kv_rows_side *s,
                         const char *k0, const char *kqp, int32_t nb)
{
    const int32_t d = J->d, group = s->group;
    for (int32_t j = 0; j < nb; j++) {
        const uint8_t *row = (const uint8_t *)(k0 + (size_t)j * s->stride);
        const struct kv_qparams *qp = kv_rows_qp(kqp, s->qp_stride, j);
        for (int32_t i = 0; i < J->g; i++) {
            const float *q = J->qs + (size_t)i * d;
            float r = 0.0f;
            for (int32_t gi = 0; gi < s->ng; gi++) {
                float part = 0.0f;
                for (int32_t e = gi * group; e < (gi + 1) * group; e++)
                    part += q[e] * (float)q2_code_at(row, e, d);
                r += qp[gi].scale * part + qp[gi].min * J->qsum[(size_t)i * s->ng + gi];
            }
            sc[(size_t)i * DEC_KB + j] = r;
        }
    }
}

static void q2_pv_scalar(float *acc, size_t acc_stride, float *msum, float *w, const float *pr,
                         const struct kv_dec_job *J, const struct kv_rows_side *s,
                         const char *v0, const char *vqp, int32_t nb)
{
    const int32_t d = J->d, group = s->group, ng = s->ng;
    for (int32_t i = 0; i < J->g; i++) {
        float *a = acc + (size_t)i * acc_stride;
        kv_rows_pv_weights(w, msum + (size_t)i * ng, pr + (size_t)i * DEC_KB, s, vqp, nb);
        for (int32_t j = 0; j < nb; j++) {
            const uint8_t *row = (const uint8_t *)(v0 + (size_t)j * s->stride);
            for (int32_t e = 0; e < d; e++)
                a[e] += w[(size_t)j * ng + e / group] * (float)q2_code_at(row, e, d);
        }
    }
}

/* dst (nb, d) <- rows as floats, any shape: a run of 64 elements at a time
 * (its last run len = d - r0 long, byte i holding elements i, i + len/4,
 * ...), then min + scale * code per group. Rows whose length is not a
 * multiple of 64 take this tile and the f32 kernels: reading their codes
 * element by element (q2_code_at, three divisions each, per head) ran
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
/* ------------------------------------------------------------------------ */
/* AVX2 (d a multiple of 64, group a multiple of 8)                         */

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

/* o[0..nr) <- scores of int2 rows r, r + st, ... (group form) */
KV_INLINE void q2_rows(float *o, const int nr, const float *q, const float *qsum, const char *r,
                       size_t st, const char *qpr, size_t qst, int32_t d, int32_t group,
                       int32_t ng)
{
    __m256 tot[4];
    float mins[4] = {0};
    for (int u = 0; u < nr; u++)
        tot[u] = _mm256_setzero_ps();
    for (int32_t gi = 0; gi < ng; gi++) {
        const int32_t g0 = gi * group;
        __m256 a[4];
        for (int u = 0; u < nr; u++)
            a[u] = _mm256_setzero_ps();
        for (int32_t e = g0; e < g0 + group; e += 8) { /* chunk [e, e + 8) */
            const int32_t r0 = e - e % 64, h = e % 16 / 8, k = e % 64 / 16;
            __m256 qv = _mm256_loadu_ps(q + e);
            for (int u = 0; u < nr; u++) {
                __m256i x = q2_load8((const uint8_t *)(r + u * st) + r0 / 4 + 8 * h);
                a[u] = _mm256_fmadd_ps(qv, q2_codes8(x, k), a[u]);
            }
        }
        for (int u = 0; u < nr; u++) {
            const struct kv_qparams *qp = (const struct kv_qparams *)(qpr + u * qst) + gi;
            tot[u] = _mm256_fmadd_ps(_mm256_set1_ps(qp->scale), a[u], tot[u]);
            mins[u] += qp->min * qsum[gi];
        }
    }
    (void)d;
    if (nr == 4) {
        _mm_storeu_ps(o, _mm_add_ps(kv_hsum4x4(tot), _mm_loadu_ps(mins)));
    } else {
        for (int u = 0; u < nr; u++)
            o[u] = kv_hsum8(tot[u]) + mins[u];
    }
}

static void q2_sc_avx2(float *sc, const struct kv_dec_job *J, const struct kv_rows_side *s,
                       const char *k, const char *kqp, int32_t nb)
{
    const size_t st = s->stride, qst = s->qp_stride;
    for (int32_t i = 0; i < J->g; i++) {
        const float *q = J->qs + (size_t)i * J->d, *qsum = J->qsum + (size_t)i * s->ng;
        float *o = sc + (size_t)i * DEC_KB;
        int32_t j = 0;
        for (; j + 4 <= nb; j += 4)
            q2_rows(o + j, 4, q, qsum, k + j * st, st, kqp + j * qst, qst, J->d, s->group, s->ng);
        for (; j < nb; j++)
            q2_rows(o + j, 1, q, qsum, k + j * st, st, kqp + j * qst, qst, J->d, s->group, s->ng);
    }
}

/* a (d) += sum_j w[j][group] * codes_j: a pass over the rows per 8-byte
 * half-run, its four chunks in four accumulators */
static void q2_pv_avx2(float *acc, size_t acc_stride, float *msum, float *w, const float *pr,
                       const struct kv_dec_job *J, const struct kv_rows_side *s,
                       const char *v0, const char *vqp, int32_t nb)
{
    const int32_t d = J->d, group = s->group, ng = s->ng;
    const size_t stride = s->stride;
    for (int32_t i = 0; i < J->g; i++) {
        float *a = acc + (size_t)i * acc_stride;
        kv_rows_pv_weights(w, msum + (size_t)i * ng, pr + (size_t)i * DEC_KB, s, vqp, nb);
        for (int32_t o = 0; o < d / 4; o += 8) { /* byte offset of a half-run */
            const int32_t e0 = o / 16 * 64 + o % 16; /* its chunk 0 */
            int32_t gk[4];
            __m256 ak[4];
            for (int k = 0; k < 4; k++) {
                gk[k] = (e0 + 16 * k) / group;
                ak[k] = _mm256_loadu_ps(a + e0 + 16 * k);
            }
            for (int32_t j = 0; j < nb; j++) {
                __m256i x = q2_load8((const uint8_t *)(v0 + (size_t)j * stride) + o);
                const float *wj = w + (size_t)j * ng;
                for (int k = 0; k < 4; k++)
                    ak[k] = _mm256_fmadd_ps(_mm256_broadcast_ss(wj + gk[k]), q2_codes8(x, k), ak[k]);
            }
            for (int k = 0; k < 4; k++)
                _mm256_storeu_ps(a + e0 + 16 * k, ak[k]);
        }
    }
}

#ifdef __AVX512F__
/* ------------------------------------------------------------------------ */
/* AVX-512 (d a multiple of 64, group a multiple of 16)                     */

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
KV_INLINE void q2_rows16(float *o, const int nr, const float *q, const float *qsum,
                         const char *r, size_t st, const char *qpr, size_t qst, int32_t d,
                         int32_t group)
{
    __m512 tot[4];
    float mins[4];
    for (int u = 0; u < nr; u++) {
        const struct kv_qparams *qp = (const struct kv_qparams *)(qpr + u * qst);
        tot[u] = _mm512_setzero_ps();
        q2_row_dot(&tot[u], q, (const uint8_t *)(r + u * st), qp, d, group);
        mins[u] = q2_row_mins(qp, qsum, d / group);
    }
    kv_qrows_finish(o, nr, tot, mins);
}

/* Scores of 16 int2 rows (MHA), one reduction tree for all 16 */
KV_INLINE void q2_rows_x16(float *o, const float *q, const float *qsum, const char *r,
                           size_t st, const char *qpr, size_t qst, int32_t d, int32_t group)
{
    __m512 tot[16];
    float m[16];
    for (int u = 0; u < 16; u++) {
        const struct kv_qparams *qp = (const struct kv_qparams *)(qpr + u * qst);
        tot[u] = _mm512_setzero_ps();
        q2_row_dot(&tot[u], q, (const uint8_t *)(r + u * st), qp, d, group);
        m[u] = q2_row_mins(qp, qsum, d / group);
    }
    _mm512_storeu_ps(o, _mm512_add_ps(kv_hsum16x16(tot), _mm512_loadu_ps(m)));
}

#define KV_Q2_SC_512(NAME, D, GR)                                                            \
    static void NAME(float *sc, const struct kv_dec_job *J, const struct kv_rows_side *s,    \
                     const char *k, const char *kqp, int32_t nb)                             \
    {                                                                                        \
        const size_t st = s->stride, qst = s->qp_stride;                                     \
        for (int32_t i = 0; i < J->g; i++) {                                                 \
            const float *q = J->qs + (size_t)i * J->d, *qsum = J->qsum + (size_t)i * s->ng;  \
            float *o = sc + (size_t)i * DEC_KB;                                              \
            int32_t j = 0;                                                                   \
            for (; j + 16 <= nb; j += 16)                                                    \
                q2_rows_x16(o + j, q, qsum, k + j * st, st, kqp + j * qst, qst, D, GR);      \
            for (; j + 4 <= nb; j += 4)                                                      \
                q2_rows16(o + j, 4, q, qsum, k + j * st, st, kqp + j * qst, qst, D, GR);     \
            for (; j < nb; j++)                                                              \
                q2_rows16(o + j, 1, q, qsum, k + j * st, st, kqp + j * qst, qst, D, GR);     \
        }                                                                                    \
    }
KV_Q2_SC_512(q2_sc_512_d64g32, 64, 32)
KV_Q2_SC_512(q2_sc_512_d128g32, 128, 32)
KV_Q2_SC_512(q2_sc_512, J->d, s->group)
#undef KV_Q2_SC_512

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

#define KV_Q2_PV_512(NAME, D, GR)                                                            \
    static void NAME(float *acc, size_t acc_stride, float *msum, float *w, const float *pr,  \
                     const struct kv_dec_job *J, const struct kv_rows_side *s,               \
                     const char *v0, const char *vqp, int32_t nb)                            \
    {                                                                                        \
        for (int32_t i = 0; i < J->g; i++) {                                                 \
            kv_rows_pv_weights(w, msum + (size_t)i * s->ng, pr + (size_t)i * DEC_KB, s, vqp, \
                               nb);                                                          \
            pv_q2_512(acc + (size_t)i * acc_stride, w, v0, s->stride, nb, D, GR);            \
        }                                                                                    \
    }
KV_Q2_PV_512(q2_pv_512_d64g32, 64, 32)
KV_Q2_PV_512(q2_pv_512_d128g32, 128, 32)
KV_Q2_PV_512(q2_pv_512, J->d, s->group)
#undef KV_Q2_PV_512

/* GQA (g in 2, 4, 8): sc (g, DEC_KB) for rows j0 .. j0 + 16/g - 1, each
 * chunk dequantized once through its group's table for all g heads */
KV_INLINE void q2_rows_heads(float *sc, const int g, const float *qs, const char *r, size_t st,
                             const char *qpr, size_t qst, int32_t d, int32_t group)
{
    const int nr = 16 / g;
    __m512 a[16];
    for (int u = 0; u < 16; u++)
        a[u] = _mm512_setzero_ps();
    for (int32_t e0 = 0; e0 < d; e0 += 64) {
        for (int rr = 0; rr < nr; rr++) {
            const struct kv_qparams *qp = (const struct kv_qparams *)(qpr + rr * qst);
            __m512i x = q2_load16((const uint8_t *)(r + rr * st) + e0 / 4);
            for (int k = 0; k < 4; k++) {
                const int32_t e = e0 + 16 * k;
                __m512 kv = q2_chunk(x, k, q2_table(qp + e / group));
                for (int h = 0; h < g; h++)
                    a[h * nr + rr] = _mm512_fmadd_ps(_mm512_loadu_ps(qs + (size_t)h * d + e), kv,
                                                     a[h * nr + rr]);
            }
        }
    }
    kv_store_heads(sc, g, a);
}

/* acc_h (d) += sum_j pr[h][j] * dequantized v_j for the g heads (g in 2, 4,
 * 8): per 64-element run, 16/g chunks a pass (a run is 4 chunks: g = 8
 * takes two passes of 2 chunks, g = 2 and 4 one pass of its 4) */
KV_INLINE void pv_q2_heads(float *acc, size_t acc_stride, const float *pr, const int g,
                           const char *v0, size_t stride, const char *vqp0, size_t qst,
                           int32_t nb, int32_t d, int32_t group)
{
    const int ch = g == 8 ? 2 : 4; /* chunks per pass, g * ch accumulators <= 16 */
    for (int32_t e0 = 0; e0 < d; e0 += 64) {
        for (int k0 = 0; k0 < 4; k0 += ch) {
            __m512 a[16];
            for (int h = 0; h < g; h++)
                for (int c = 0; c < ch; c++)
                    a[h * ch + c] =
                        _mm512_loadu_ps(acc + (size_t)h * acc_stride + e0 + 16 * (k0 + c));
            for (int32_t j = 0; j < nb; j++) {
                const struct kv_qparams *qp = kv_rows_qp(vqp0, qst, j);
                __m512i x = q2_load16((const uint8_t *)(v0 + (size_t)j * stride) + e0 / 4);
                __m512 vv[4];
                for (int c = 0; c < ch; c++) {
                    const int32_t e = e0 + 16 * (k0 + c);
                    vv[c] = q2_chunk(x, k0 + c, q2_table(qp + e / group));
                }
                kv_heads_fma(a, vv, pr, g, ch, j);
            }
            for (int h = 0; h < g; h++)
                for (int c = 0; c < ch; c++)
                    _mm512_storeu_ps(acc + (size_t)h * acc_stride + e0 + 16 * (k0 + c),
                                     a[h * ch + c]);
        }
    }
}

#define KV_Q2_FUSED(SUF, G, D, GR)                                                           \
    static void q2_sc_fused##SUF(float *sc, const struct kv_dec_job *J,                      \
                                 const struct kv_rows_side *s, const char *k,               \
                                 const char *kqp, int32_t nb)                                \
    {                                                                                        \
        const size_t st = s->stride, qst = s->qp_stride;                                     \
        const int32_t step = 16 / (G);                                                       \
        int32_t j = 0;                                                                       \
        for (; j + step <= nb; j += step)                                                    \
            q2_rows_heads(sc + j, G, J->qs, k + j * st, st, kqp + j * qst, qst, D, GR);      \
        for (int32_t h = 0; h < (G); h++) {                                                  \
            const float *q = J->qs + (size_t)h * J->d, *qsum = J->qsum + (size_t)h * s->ng;  \
            for (int32_t jj = j; jj < nb; jj++)                                              \
                q2_rows16(sc + (size_t)h * DEC_KB + jj, 1, q, qsum, k + jj * st, st,         \
                          kqp + jj * qst, qst, D, GR);                                       \
        }                                                                                    \
    }                                                                                        \
    static void q2_pv_fused##SUF(float *acc, size_t acc_stride, float *msum, float *w,      \
                                 const float *pr, const struct kv_dec_job *J,                \
                                 const struct kv_rows_side *s, const char *v0,               \
                                 const char *vqp, int32_t nb)                                \
    {                                                                                        \
        (void)msum;                                                                          \
        (void)w;                                                                             \
        (void)J;                                                                             \
        pv_q2_heads(acc, acc_stride, pr, G, v0, s->stride, vqp, s->qp_stride, nb, D, GR);    \
    }
KV_Q2_FUSED(2_d64, 2, 64, 32)
KV_Q2_FUSED(2, 2, J->d, s->group)
KV_Q2_FUSED(4_d64, 4, 64, 32)
KV_Q2_FUSED(4, 4, J->d, s->group)
KV_Q2_FUSED(8_d64, 8, 64, 32)
KV_Q2_FUSED(8, 8, J->d, s->group)
#undef KV_Q2_FUSED

/* other GQA sizes: dst (nb, d) <- the dequantized rows, for the f32 kernels */
static void q2_tile(float *dst, const struct kv_rows_side *s, int32_t d, const char *rows,
                    const char *qp0, int32_t nb)
{
    for (int32_t j = 0; j < nb; j++) {
        const uint8_t *c = (const uint8_t *)(rows + (size_t)j * s->stride);
        const struct kv_qparams *qp = kv_rows_qp(qp0, s->qp_stride, j);
        for (int32_t e0 = 0; e0 < d; e0 += 64) {
            __m512i x = q2_load16(c + e0 / 4);
            for (int k = 0; k < 4; k++) {
                const int32_t e = e0 + 16 * k;
                _mm512_storeu_ps(dst + (size_t)j * d + e, q2_chunk(x, k, q2_table(qp + e / s->group)));
            }
        }
    }
}
#endif /* __AVX512F__ */
#endif /* __AVX2__ */

/* ------------------------------------------------------------------------ */
/* Binding                                                                  */

void kv_rows_bind_q2(struct kv_dec_job *J, int is_v)
{
    const struct kv_rows_side *s = is_v ? &J->v : &J->k;
    const int32_t g = J->g, d = J->d, group = s->group;
    (void)g;
    (void)group;
#ifdef __AVX512F__
    if (d % 64 == 0 && group % 16 == 0) {
        const int d64 = d == 64 && group == 32;
        if (g == 2 || g == 4 || g == 8) {
            static const kv_rows_scores_fn sc[3][2] = {{q2_sc_fused2_d64, q2_sc_fused2},
                                                       {q2_sc_fused4_d64, q2_sc_fused4},
                                                       {q2_sc_fused8_d64, q2_sc_fused8}};
            static const kv_rows_pv_fn pv[3][2] = {{q2_pv_fused2_d64, q2_pv_fused2},
                                                   {q2_pv_fused4_d64, q2_pv_fused4},
                                                   {q2_pv_fused8_d64, q2_pv_fused8}};
            const int gi = g == 2 ? 0 : g == 4 ? 1 : 2;
            if (is_v)
                J->pv = pv[gi][!d64];
            else
                J->scores = sc[gi][!d64];
            return;
        }
        if (g >= 2) {
            if (is_v)
                J->v_tile = q2_tile;
            else
                J->k_tile = q2_tile;
            return;
        }
        const int shape = d64 ? 0 : d == 128 && group == 32 ? 1 : 2;
        if (is_v)
            J->pv = shape == 0 ? q2_pv_512_d64g32 : shape == 1 ? q2_pv_512_d128g32 : q2_pv_512;
        else
            J->scores = shape == 0 ? q2_sc_512_d64g32 : shape == 1 ? q2_sc_512_d128g32 : q2_sc_512;
        return;
    }
#endif
#ifdef __AVX2__
    if (d % 64 == 0 && group % 8 == 0) {
        if (is_v)
            J->pv = q2_pv_avx2;
        else
            J->scores = q2_sc_avx2;
        return;
    }
#endif
    if (d % 64 != 0) {
        if (is_v)
            J->v_tile = q2_tile_any;
        else
            J->k_tile = q2_tile_any;
        return;
    }
    if (is_v)
        J->pv = q2_pv_scalar;
    else
        J->scores = q2_sc_scalar;
}
