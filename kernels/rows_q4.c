/*
 * rows_q4.c - decode row kernels for int4 keys and values (kv_rows.h),
 * per-token groups along head_dim (kv_quant.h's layout: byte j of a group
 * holds element j in its low nibble and element j + group/2 in its high one,
 * so the low nibbles of a byte chunk are the first half of the group).
 *
 * The design decision: on AVX-512 a group's sixteen possible values
 * min + scale*c sit in one register and the nibbles index it (vpermps),
 * which costs less than widening and converting, and carries the min, so
 * there are no separate min terms. AVX2 and scalar use the group form of
 * rows_q8.c (scale * dot(q, codes) + min * sum(q)). With GQA of 2, 4 or 8
 * heads one load of a byte chunk and one table serve both nibble halves and
 * all the group's heads (q4_rows_heads, pv_q4_heads).
 */
#include "kv_rows.h"

/* ------------------------------------------------------------------------ */
/* Scalar (any even group)                                                  */

static inline int32_t q4_code_at(const uint8_t *codes, int32_t d, int32_t group)
{
    int32_t half = group / 2, gi = d / group, j = d % group;
    uint8_t byte = codes[gi * half + (j < half ? j : j - half)];
    return j < half ? (byte & 0x0F) : (byte >> 4);
}

static void q4_sc_scalar(float *sc, const struct kv_dec_job *J, const struct kv_rows_side *s,
                         const char *k0, const char *kqp, int32_t nb)
{
    const int32_t d = J->d, group = s->group;
    (void)d;
    for (int32_t j = 0; j < nb; j++) {
        const uint8_t *row = (const uint8_t *)(k0 + (size_t)j * s->stride);
        const struct kv_qparams *qp = kv_rows_qp(kqp, s->qp_stride, j);
        for (int32_t i = 0; i < J->g; i++) {
            const float *q = J->qs + (size_t)i * d;
            float r = 0.0f;
            for (int32_t gi = 0; gi < s->ng; gi++) {
                float part = 0.0f;
                for (int32_t e = gi * group; e < (gi + 1) * group; e++)
                    part += q[e] * (float)q4_code_at(row, e, group);
                r += qp[gi].scale * part + qp[gi].min * J->qsum[(size_t)i * s->ng + gi];
            }
            sc[(size_t)i * DEC_KB + j] = r;
        }
    }
}

static void q4_pv_scalar(float *acc, size_t acc_stride, float *msum, float *w, const float *pr,
                         const struct kv_dec_job *J, const struct kv_rows_side *s,
                         const char *v0, const char *vqp, int32_t nb)
{
    const int32_t d = J->d, group = s->group, ng = s->ng;
    for (int32_t i = 0; i < J->g; i++) {
        float *a = acc + (size_t)i * acc_stride;
        const float *pi = pr + (size_t)i * DEC_KB;
        kv_rows_pv_weights(w, msum + (size_t)i * ng, pi, s, vqp, nb);
        for (int32_t j = 0; j < nb; j++) {
            const uint8_t *row = (const uint8_t *)(v0 + (size_t)j * s->stride);
            for (int32_t e = 0; e < d; e++)
                a[e] += w[(size_t)j * ng + e / group] * (float)q4_code_at(row, e, group);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* AVX2 (group a multiple of 16)                                            */

#ifdef __AVX2__
/* scores of int4 rows r, r + st, ...: byte j of a group holds elements j
 * and j + group/2 */
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
        _mm_storeu_ps(o, _mm_add_ps(kv_hsum4x4(tot), _mm_loadu_ps(mins)));
    } else {
        for (int u = 0; u < nr; u++)
            o[u] = kv_hsum8(tot[u]) + mins[u];
    }
}

static void q4_sc_avx2(float *sc, const struct kv_dec_job *J, const struct kv_rows_side *s,
                       const char *k, const char *kqp, int32_t nb)
{
    const size_t st = s->stride, qst = s->qp_stride;
    for (int32_t i = 0; i < J->g; i++) {
        const float *q = J->qs + (size_t)i * J->d, *qsum = J->qsum + (size_t)i * s->ng;
        float *o = sc + (size_t)i * DEC_KB;
        int32_t j = 0;
        for (; j + 4 <= nb; j += 4)
            q4_rows(o + j, 4, q, qsum, k + j * st, st, kqp + j * qst, qst, s->group, s->ng);
        for (; j < nb; j++)
            q4_rows(o + j, 1, q, qsum, k + j * st, st, kqp + j * qst, qst, s->group, s->ng);
    }
}

/* int4: byte chunk o (8 bytes) of group gi holds elements gi*group + jb ..
 * +7 (low nibbles) and + half (high nibbles) */
static void q4_pv_avx2(float *acc, size_t acc_stride, float *msum, float *w, const float *pr,
                       const struct kv_dec_job *J, const struct kv_rows_side *s,
                       const char *v0, const char *vqp, int32_t nb)
{
    const int32_t d = J->d, group = s->group, ng = s->ng;
    const size_t stride = s->stride;
    const int32_t half = group / 2, nbytes = d / 2;
    const __m256i m4 = _mm256_set1_epi32(0x0F);
    for (int32_t i = 0; i < J->g; i++) {
        float *a = acc + (size_t)i * acc_stride;
        kv_rows_pv_weights(w, msum + (size_t)i * ng, pr + (size_t)i * DEC_KB, s, vqp, nb);
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
}

/* ------------------------------------------------------------------------ */
/* AVX-512 (group a multiple of 32), by table                               */

#ifdef __AVX512F__
#define KV_IOTA16 _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)

/* the 16 values min + scale*c of a group, c = 0..15 */
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
    _mm512_storeu_ps(o, kv_hsum16x16(tot));
}

/* MHA scores: 16 rows a call, then 8, then one */
#define KV_Q4_SC_512(NAME, GR, NG)                                                           \
    static void NAME(float *sc, const struct kv_dec_job *J, const struct kv_rows_side *s,    \
                     const char *k, const char *kqp, int32_t nb)                             \
    {                                                                                        \
        const size_t st = s->stride, qst = s->qp_stride;                                     \
        for (int32_t i = 0; i < J->g; i++) {                                                 \
            const float *q = J->qs + (size_t)i * J->d;                                       \
            float *o = sc + (size_t)i * DEC_KB;                                              \
            int32_t j = 0;                                                                   \
            for (; j + 16 <= nb; j += 16)                                                    \
                q4_rows_x16(o + j, q, k + j * st, st, kqp + j * qst, qst, GR, NG);           \
            for (; j + 8 <= nb; j += 8)                                                      \
                q4_rows_tbl(o + j, 8, q, k + j * st, st, kqp + j * qst, qst, GR, NG);        \
            for (; j < nb; j++)                                                              \
                q4_rows_tbl(o + j, 1, q, k + j * st, st, kqp + j * qst, qst, s->group, s->ng); \
        }                                                                                    \
    }
KV_Q4_SC_512(q4_sc_512_g32n2, 32, 2)
KV_Q4_SC_512(q4_sc_512_g32n4, 32, 4)
KV_Q4_SC_512(q4_sc_512, s->group, s->ng)
#undef KV_Q4_SC_512

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
            const struct kv_qparams *qp = kv_rows_qp(vqp0, qst, j);
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
            __m512 tA = q4_table(kv_rows_qp(vqp0, qst, j) + gA);
            __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)c));
            a0 = _mm512_fmadd_ps(p, _mm512_permutexvar_ps(x, tA), a0);
            a1 = _mm512_fmadd_ps(p, _mm512_permutexvar_ps(_mm512_srli_epi32(x, 4), tA), a1);
        }
        _mm512_storeu_ps(a + eA, a0);
        _mm512_storeu_ps(a + eA + half, a1);
    }
}

#define KV_Q4_PV_512(NAME, D, GR)                                                            \
    static void NAME(float *acc, size_t acc_stride, float *msum, float *w, const float *pr,  \
                     const struct kv_dec_job *J, const struct kv_rows_side *s,               \
                     const char *v0, const char *vqp, int32_t nb)                            \
    {                                                                                        \
        (void)msum;                                                                          \
        (void)w;                                                                             \
        for (int32_t i = 0; i < J->g; i++)                                                   \
            pv_q4_tbl(acc + (size_t)i * acc_stride, pr + (size_t)i * DEC_KB, v0, s->stride,  \
                      vqp, s->qp_stride, nb, D, GR);                                         \
    }
KV_Q4_PV_512(q4_pv_512_d64, 64, 32)
KV_Q4_PV_512(q4_pv_512_d128, 128, 32)
KV_Q4_PV_512(q4_pv_512, J->d, s->group)
#undef KV_Q4_PV_512

/* GQA: sc (g, DEC_KB) for rows j0 .. j0 + 16/g - 1 (g in 2, 4, 8). A byte
 * chunk holds two element chunks (low nibbles at g0 + o, high at
 * g0 + half + o): the codes are loaded and the group's table formed once
 * for both, and for all g heads. */
KV_INLINE void q4_rows_heads(float *sc, const int g, const float *qs, const char *r, size_t st,
                             const char *qpr, size_t qst, int32_t d, int32_t group)
{
    const int nr = 16 / g;
    const int32_t half = group / 2;
    __m512 a[16];
    for (int u = 0; u < 16; u++)
        a[u] = _mm512_setzero_ps();
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
    kv_store_heads(sc, g, a);
}

/* acc_h (d) += sum_j pr[h][j] * dequantized v_j for the g heads of the
 * group (g in 2, 4, 8; d a multiple of 256/g): passes over ch/2 byte
 * chunks of 16 codes; byte chunk c gives the element chunks at el[2c] (low
 * nibbles) and el[2c] + half (high) */
KV_INLINE void pv_q4_heads(float *acc, size_t acc_stride, const float *pr, const int g,
                           const char *v0, size_t stride, const char *vqp0, size_t qst,
                           int32_t nb, int32_t d, int32_t group)
{
    const int ch = 16 / g; /* chunks per pass */
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
            const struct kv_qparams *qp = kv_rows_qp(vqp0, qst, j);
            __m512 vv[8];
            for (int c = 0; c < ch / 2; c++) {
                __m512 tbl = q4_table(qp + gr[c]);
                __m512i x =
                    _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(row + 16 * c)));
                vv[2 * c] = _mm512_permutexvar_ps(x, tbl);
                vv[2 * c + 1] = _mm512_permutexvar_ps(_mm512_srli_epi32(x, 4), tbl);
            }
            kv_heads_fma(a, vv, pr, g, ch, j);
        }
        for (int h = 0; h < g; h++)
            for (int c = 0; c < ch; c++)
                _mm512_storeu_ps(acc + (size_t)h * acc_stride + el[c], a[h * ch + c]);
    }
}

#define KV_Q4_FUSED(SUF, G, D, GR)                                                           \
    static void q4_sc_fused##SUF(float *sc, const struct kv_dec_job *J,                      \
                                 const struct kv_rows_side *s, const char *k,               \
                                 const char *kqp, int32_t nb)                                \
    {                                                                                        \
        const size_t st = s->stride, qst = s->qp_stride;                                     \
        const int32_t step = 16 / (G);                                                       \
        int32_t j = 0;                                                                       \
        for (; j + step <= nb; j += step)                                                    \
            q4_rows_heads(sc + j, G, J->qs, k + j * st, st, kqp + j * qst, qst, D, GR);      \
        for (int32_t h = 0; h < (G); h++) {                                                  \
            const float *q = J->qs + (size_t)h * J->d;                                       \
            for (int32_t jj = j; jj < nb; jj++)                                              \
                q4_rows_tbl(sc + (size_t)h * DEC_KB + jj, 1, q, k + jj * st, st,             \
                            kqp + jj * qst, qst, s->group, s->ng);                           \
        }                                                                                    \
    }                                                                                        \
    static void q4_pv_fused##SUF(float *acc, size_t acc_stride, float *msum, float *w,      \
                                 const float *pr, const struct kv_dec_job *J,                \
                                 const struct kv_rows_side *s, const char *v0,               \
                                 const char *vqp, int32_t nb)                                \
    {                                                                                        \
        (void)msum;                                                                          \
        (void)w;                                                                             \
        (void)J;                                                                             \
        pv_q4_heads(acc, acc_stride, pr, G, v0, s->stride, vqp, s->qp_stride, nb, D, GR);    \
    }
KV_Q4_FUSED(2_d64, 2, 64, 32)
KV_Q4_FUSED(2_d128, 2, 128, 32)
KV_Q4_FUSED(2, 2, J->d, s->group)
KV_Q4_FUSED(4_d64, 4, 64, 32)
KV_Q4_FUSED(4_d128, 4, 128, 32)
KV_Q4_FUSED(4, 4, J->d, s->group)
KV_Q4_FUSED(8_d64, 8, 64, 32)
KV_Q4_FUSED(8_d128, 8, 128, 32)
KV_Q4_FUSED(8, 8, J->d, s->group)
#undef KV_Q4_FUSED

/* GQA sizes without a fused kernel: dst (nb, d) <- the dequantized rows */
KV_INLINE void q4_dequant_tile(float *dst, const char *c0, size_t stride, const char *qp0,
                               size_t qst, int32_t nb, int32_t d, int32_t group)
{
    const int32_t ng = d / group, half = group / 2;
    for (int32_t j = 0; j < nb; j++) {
        const uint8_t *c = (const uint8_t *)(c0 + (size_t)j * stride);
        const struct kv_qparams *qp = kv_rows_qp(qp0, qst, j);
        float *x = dst + (size_t)j * d;
        for (int32_t gi = 0; gi < ng; gi++) {
            const int32_t g0 = gi * group;
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

#define KV_Q4_TILE(NAME, D, GR)                                                              \
    static void NAME(float *dst, const struct kv_rows_side *s, int32_t d, const char *rows,  \
                     const char *qp, int32_t nb)                                             \
    {                                                                                        \
        (void)d;                                                                             \
        q4_dequant_tile(dst, rows, s->stride, qp, s->qp_stride, nb, D, GR);                  \
    }
KV_Q4_TILE(q4_tile_d64, 64, 32)
KV_Q4_TILE(q4_tile_d128, 128, 32)
KV_Q4_TILE(q4_tile, d, s->group)
#undef KV_Q4_TILE
#endif /* __AVX512F__ */
#endif /* __AVX2__ */

/* ------------------------------------------------------------------------ */
/* Binding                                                                  */

#ifdef __AVX512F__
static void bind_fused(struct kv_dec_job *J, int is_v, int32_t g, int shape)
{
    static const kv_rows_scores_fn sc[3][3] = {
        {q4_sc_fused2_d64, q4_sc_fused2_d128, q4_sc_fused2},
        {q4_sc_fused4_d64, q4_sc_fused4_d128, q4_sc_fused4},
        {q4_sc_fused8_d64, q4_sc_fused8_d128, q4_sc_fused8}};
    static const kv_rows_pv_fn pv[3][3] = {
        {q4_pv_fused2_d64, q4_pv_fused2_d128, q4_pv_fused2},
        {q4_pv_fused4_d64, q4_pv_fused4_d128, q4_pv_fused4},
        {q4_pv_fused8_d64, q4_pv_fused8_d128, q4_pv_fused8}};
    const int gi = g == 2 ? 0 : g == 4 ? 1 : 2;
    if (is_v)
        J->pv = pv[gi][shape];
    else
        J->scores = sc[gi][shape];
}
#endif

void kv_rows_bind_q4(struct kv_dec_job *J, int is_v)
{
    const struct kv_rows_side *s = is_v ? &J->v : &J->k;
    const int32_t g = J->g, d = J->d, group = s->group;
    (void)g;
    (void)d;
    (void)group;
#ifdef __AVX512F__
    if (group % 32 == 0) {
        /* 0: head_dim 64, group 32; 1: head_dim 128, group 32; 2: any */
        const int shape = group == 32 && d == 64 ? 0 : group == 32 && d == 128 ? 1 : 2;
        if (g >= 2) {
            /* GQA of 2, 4 or 8 heads fused in registers (head_dim 128: 250
             * vs 455 us through the tile at T 2048; head_dim 64 within noise
             * of it); the tile for the other sizes */
            if ((g == 2 || g == 4 || g == 8) && d % (256 / g) == 0) {
                bind_fused(J, is_v, g, shape);
            } else {
                kv_rows_dequant_fn t = shape == 0 ? q4_tile_d64 : shape == 1 ? q4_tile_d128 : q4_tile;
                if (is_v)
                    J->v_tile = t;
                else
                    J->k_tile = t;
            }
            return;
        }
        if (is_v)
            J->pv = shape == 0 ? q4_pv_512_d64 : shape == 1 ? q4_pv_512_d128 : q4_pv_512;
        else
            J->scores = group == 32 && s->ng == 2   ? q4_sc_512_g32n2
                        : group == 32 && s->ng == 4 ? q4_sc_512_g32n4
                                                    : q4_sc_512;
        return;
    }
#endif
#ifdef __AVX2__
    if (group % 16 == 0) {
        if (is_v)
            J->pv = q4_pv_avx2;
        else
            J->scores = q4_sc_avx2;
        return;
    }
#endif
    if (is_v)
        J->pv = q4_pv_scalar;
    else
        J->scores = q4_sc_scalar;
}
