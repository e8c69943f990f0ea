/*
 * rows_q8.c - decode row kernels for int8 keys and values (kv_rows.h),
 * per-token groups along head_dim (kv_quant.h's layout: code of element i
 * in byte i).
 *
 * The design decision: the codes are dequantized in registers, never into a
 * buffer the size of the cache. Scores use the group form
 *     score = sum_g scale_g * dot(q_g, codes_g) + min_g * sum(q_g)
 * (sum(q_g) precomputed per job, J->qsum), and values add p*scale_g*codes
 * to the accumulator and p*min_g to msum apart (the driver folds msum in at
 * the end). With GQA (2, 4 or 8 heads a kv head) on AVX-512 each 16-element
 * chunk is dequantized in a register once and fed to all the group's heads
 * (q8_rows_heads, pv_q8_heads: no tile stored or re-read); other group
 * sizes dequantize a block once into an L1 tile the heads share. The common
 * shapes (head_dim 64 and 128, group 32) get their own copies with the
 * shape as constants, chosen at bind time, so their loops unroll.
 */
#include "kv_rows.h"

/* ------------------------------------------------------------------------ */
/* Scalar (any group)                                                       */

static void q8_sc_scalar(float *sc, const struct kv_dec_job *J, const struct kv_rows_side *s,
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
                    part += q[e] * (float)row[e];
                r += qp[gi].scale * part + qp[gi].min * J->qsum[(size_t)i * s->ng + gi];
            }
            sc[(size_t)i * DEC_KB + j] = r;
        }
    }
}

static void q8_pv_scalar(float *acc, size_t acc_stride, float *msum, float *w, const float *pr,
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
                a[e] += w[(size_t)j * ng + e / group] * (float)row[e];
        }
    }
}

/* ------------------------------------------------------------------------ */
/* AVX2 (group a multiple of 8)                                             */

#ifdef __AVX2__
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
                a[u] = _mm256_fmadd_ps(qv, kv_load_u8x8((const uint8_t *)(r + u * st) + e), a[u]);
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

static void q8_sc_avx2(float *sc, const struct kv_dec_job *J, const struct kv_rows_side *s,
                       const char *k, const char *kqp, int32_t nb)
{
    const size_t st = s->stride, qst = s->qp_stride;
    for (int32_t i = 0; i < J->g; i++) {
        const float *q = J->qs + (size_t)i * J->d, *qsum = J->qsum + (size_t)i * s->ng;
        float *o = sc + (size_t)i * DEC_KB;
        int32_t j = 0;
        for (; j + 4 <= nb; j += 4)
            q8_rows(o + j, 4, q, qsum, k + j * st, st, kqp + j * qst, qst, s->group, s->ng);
        for (; j < nb; j++)
            q8_rows(o + j, 1, q, qsum, k + j * st, st, kqp + j * qst, qst, s->group, s->ng);
    }
}

/* a (d) += sum_j w[j][group of e] * codes_j[e], 32 elements a pass */
static void q8_pv_avx2(float *acc, size_t acc_stride, float *msum, float *w, const float *pr,
                       const struct kv_dec_job *J, const struct kv_rows_side *s,
                       const char *v0, const char *vqp, int32_t nb)
{
    const int32_t d = J->d, group = s->group, ng = s->ng;
    const size_t stride = s->stride;
    for (int32_t i = 0; i < J->g; i++) {
        float *a = acc + (size_t)i * acc_stride;
        kv_rows_pv_weights(w, msum + (size_t)i * ng, pr + (size_t)i * DEC_KB, s, vqp, nb);
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
                a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(wj + g0), kv_load_u8x8(c), a0);
                a1 = _mm256_fmadd_ps(_mm256_broadcast_ss(wj + g1), kv_load_u8x8(c + 8), a1);
                a2 = _mm256_fmadd_ps(_mm256_broadcast_ss(wj + g2), kv_load_u8x8(c + 16), a2);
                a3 = _mm256_fmadd_ps(_mm256_broadcast_ss(wj + g3), kv_load_u8x8(c + 24), a3);
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
                a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(w + (size_t)j * ng + g0),
                                     kv_load_u8x8(c), a0);
            }
            _mm256_storeu_ps(a + e, a0);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* AVX-512 (group a multiple of 16)                                         */

#ifdef __AVX512F__
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
                a[u] = _mm512_fmadd_ps(qv, kv_load_u8x16((const uint8_t *)(r + u * st) + e), a[u]);
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
            t[u] = kv_fold512(tot[u]);
        _mm256_storeu_ps(o, _mm256_add_ps(kv_hsum8x8(t), _mm256_loadu_ps(mins)));
    } else {
        kv_qrows_finish(o, nr, tot, mins);
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

/* MHA scores: 16 rows a call, then 4, then one; (GR, NG) the group and
 * groups per row, constants for the common shapes */
#define KV_Q8_SC_512(NAME, GR, NG)                                                           \
    static void NAME(float *sc, const struct kv_dec_job *J, const struct kv_rows_side *s,    \
                     const char *k, const char *kqp, int32_t nb)                             \
    {                                                                                        \
        const size_t st = s->stride, qst = s->qp_stride;                                     \
        for (int32_t i = 0; i < J->g; i++) {                                                 \
            const float *q = J->qs + (size_t)i * J->d, *qsum = J->qsum + (size_t)i * s->ng;  \
            float *o = sc + (size_t)i * DEC_KB;                                              \
            int32_t j = 0;                                                                   \
            for (; j + 16 <= nb; j += 16)                                                    \
                q8_rows_x16(o + j, q, qsum, k + j * st, st, kqp + j * qst, qst, GR, NG);     \
            for (; j + 4 <= nb; j += 4)                                                      \
                q8_rows16(o + j, 4, q, qsum, k + j * st, st, kqp + j * qst, qst, GR, NG);    \
            for (; j < nb; j++)                                                              \
                q8_rows16(o + j, 1, q, qsum, k + j * st, st, kqp + j * qst, qst, s->group,   \
                          s->ng);                                                            \
        }                                                                                    \
    }
KV_Q8_SC_512(q8_sc_512_g32n2, 32, 2)
KV_Q8_SC_512(q8_sc_512_g32n4, 32, 4)
KV_Q8_SC_512(q8_sc_512, s->group, s->ng)
#undef KV_Q8_SC_512

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
 * w is (ng, DEC_KB) here, as pv_weights_512 writes it */
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
            a0 = _mm512_fmadd_ps(_mm512_set1_ps(w[(size_t)g0 * DEC_KB + j]), kv_load_u8x16(c), a0);
        }
        _mm512_storeu_ps(a + e, a0);
    }
}

#define KV_Q8_PV_512(NAME, D, GR)                                                            \
    static void NAME(float *acc, size_t acc_stride, float *msum, float *w, const float *pr,  \
                     const struct kv_dec_job *J, const struct kv_rows_side *s,               \
                     const char *v0, const char *vqp, int32_t nb)                            \
    {                                                                                        \
        for (int32_t i = 0; i < J->g; i++) {                                                 \
            pv_weights_512(w, msum + (size_t)i * s->ng, pr + (size_t)i * DEC_KB, vqp,        \
                           s->qp_stride, nb, s->ng);                                         \
            pv_q8_512(acc + (size_t)i * acc_stride, w, v0, s->stride, nb, D, GR);            \
        }                                                                                    \
    }
KV_Q8_PV_512(q8_pv_512_d64, 64, 32)
KV_Q8_PV_512(q8_pv_512_d128, 128, 32)
KV_Q8_PV_512(q8_pv_512, J->d, s->group)
#undef KV_Q8_PV_512

/* The 16 elements of row r from element e on (e a multiple of 16, so the
 * chunk lies in one group), dequantized in a register. */
KV_INLINE __m512 q8_chunk(const char *r, const struct kv_qparams *qp, int32_t e, int32_t group)
{
    const int32_t gi = e / group;
    return _mm512_fmadd_ps(kv_load_u8x16((const uint8_t *)r + e), _mm512_set1_ps(qp[gi].scale),
                           _mm512_set1_ps(qp[gi].min));
}

/* GQA: sc (g, DEC_KB) for rows j0 .. j0 + 16/g - 1 (g in 2, 4, 8), each
 * chunk dequantized once for all g heads: accumulator u = h*nr + r */
KV_INLINE void q8_rows_heads(float *sc, const int g, const float *qs, const char *r, size_t st,
                             const char *qpr, size_t qst, int32_t d, int32_t group)
{
    const int nr = 16 / g;
    __m512 a[16];
    for (int u = 0; u < 16; u++)
        a[u] = _mm512_setzero_ps();
    for (int32_t e = 0; e < d; e += 16) {
        for (int rr = 0; rr < nr; rr++) {
            __m512 kv = q8_chunk(r + rr * st, (const struct kv_qparams *)(qpr + rr * qst), e,
                                 group);
            for (int h = 0; h < g; h++)
                a[h * nr + rr] = _mm512_fmadd_ps(_mm512_loadu_ps(qs + (size_t)h * d + e), kv,
                                                 a[h * nr + rr]);
        }
    }
    kv_store_heads(sc, g, a);
}

/* acc_h (d) += sum_j pr[h][j] * dequantized v_j for the g heads of the
 * group (g in 2, 4, 8; d a multiple of 256/g), each chunk dequantized once */
KV_INLINE void pv_q8_heads(float *acc, size_t acc_stride, const float *pr, const int g,
                           const char *v0, size_t stride, const char *vqp0, size_t qst,
                           int32_t nb, int32_t d, int32_t group)
{
    const int ch = 16 / g; /* chunks per pass */
    for (int32_t e0 = 0; e0 < d; e0 += 16 * ch) {
        __m512 a[16];
        for (int h = 0; h < g; h++)
            for (int c = 0; c < ch; c++)
                a[h * ch + c] = _mm512_loadu_ps(acc + (size_t)h * acc_stride + e0 + 16 * c);
        for (int32_t j = 0; j < nb; j++) {
            const char *row = v0 + (size_t)j * stride;
            const struct kv_qparams *qp = kv_rows_qp(vqp0, qst, j);
            __m512 vv[8];
            for (int c = 0; c < ch; c++)
                vv[c] = q8_chunk(row, qp, e0 + 16 * c, group);
            kv_heads_fma(a, vv, pr, g, ch, j);
        }
        for (int h = 0; h < g; h++)
            for (int c = 0; c < ch; c++)
                _mm512_storeu_ps(acc + (size_t)h * acc_stride + e0 + 16 * c, a[h * ch + c]);
    }
}

/* The fused GQA kernels with g and (d, group) as constants for the common
 * shapes; the rows left over go one head at a time. */
#define KV_Q8_FUSED(SUF, G, D, GR)                                                           \
    static void q8_sc_fused##SUF(float *sc, const struct kv_dec_job *J,                      \
                                 const struct kv_rows_side *s, const char *k,               \
                                 const char *kqp, int32_t nb)                                \
    {                                                                                        \
        const size_t st = s->stride, qst = s->qp_stride;                                     \
        const int32_t step = 16 / (G);                                                       \
        int32_t j = 0;                                                                       \
        for (; j + step <= nb; j += step)                                                    \
            q8_rows_heads(sc + j, G, J->qs, k + j * st, st, kqp + j * qst, qst, D, GR);      \
        for (int32_t h = 0; h < (G); h++) {                                                  \
            const float *q = J->qs + (size_t)h * J->d, *qsum = J->qsum + (size_t)h * s->ng;  \
            for (int32_t jj = j; jj < nb; jj++)                                              \
                q8_rows16(sc + (size_t)h * DEC_KB + jj, 1, q, qsum, k + jj * st, st,         \
                          kqp + jj * qst, qst, s->group, s->ng);                             \
        }                                                                                    \
    }                                                                                        \
    static void q8_pv_fused##SUF(float *acc, size_t acc_stride, float *msum, float *w,      \
                                 const float *pr, const struct kv_dec_job *J,                \
                                 const struct kv_rows_side *s, const char *v0,               \
                                 const char *vqp, int32_t nb)                                \
    {                                                                                        \
        (void)msum;                                                                          \
        (void)w;                                                                             \
        (void)J;                                                                             \
        pv_q8_heads(acc, acc_stride, pr, G, v0, s->stride, vqp, s->qp_stride, nb, D, GR);    \
    }
KV_Q8_FUSED(2_d64, 2, 64, 32)
KV_Q8_FUSED(2_d128, 2, 128, 32)
KV_Q8_FUSED(2, 2, J->d, s->group)
KV_Q8_FUSED(4_d64, 4, 64, 32)
KV_Q8_FUSED(4_d128, 4, 128, 32)
KV_Q8_FUSED(4, 4, J->d, s->group)
KV_Q8_FUSED(8_d64, 8, 64, 32)
KV_Q8_FUSED(8_d128, 8, 128, 32)
KV_Q8_FUSED(8, 8, J->d, s->group)
#undef KV_Q8_FUSED

/* GQA sizes without a fused kernel: dst (nb, d) <- the dequantized rows,
 * formed in registers once per block and kept in L1 for the g heads */
KV_INLINE void q8_dequant_tile(float *dst, const char *c0, size_t stride, const char *qp0,
                               size_t qst, int32_t nb, int32_t d, int32_t group)
{
    const int32_t ng = d / group;
    for (int32_t j = 0; j < nb; j++) {
        const uint8_t *c = (const uint8_t *)(c0 + (size_t)j * stride);
        const struct kv_qparams *qp = kv_rows_qp(qp0, qst, j);
        float *x = dst + (size_t)j * d;
        for (int32_t gi = 0; gi < ng; gi++) {
            const int32_t g0 = gi * group;
            __m512 s = _mm512_set1_ps(qp[gi].scale), m = _mm512_set1_ps(qp[gi].min);
            for (int32_t e = 0; e < group; e += 16)
                _mm512_storeu_ps(x + g0 + e, _mm512_fmadd_ps(kv_load_u8x16(c + g0 + e), s, m));
        }
    }
}

#define KV_Q8_TILE(NAME, D, GR)                                                              \
    static void NAME(float *dst, const struct kv_rows_side *s, int32_t d, const char *rows,  \
                     const char *qp, int32_t nb)                                             \
    {                                                                                        \
        (void)d;                                                                             \
        q8_dequant_tile(dst, rows, s->stride, qp, s->qp_stride, nb, D, GR);                  \
    }
KV_Q8_TILE(q8_tile_d64, 64, 32)
KV_Q8_TILE(q8_tile_d128, 128, 32)
KV_Q8_TILE(q8_tile, d, s->group)
#undef KV_Q8_TILE
#endif /* __AVX512F__ */
#endif /* __AVX2__ */

/* ------------------------------------------------------------------------ */
/* Binding                                                                  */

#ifdef __AVX512F__
/* the fused GQA kernels of g heads (2, 4, 8) for (d, group) */
static void bind_fused(struct kv_dec_job *J, int is_v, int32_t g, int shape)
{
    static const kv_rows_scores_fn sc[3][3] = {
        {q8_sc_fused2_d64, q8_sc_fused2_d128, q8_sc_fused2},
        {q8_sc_fused4_d64, q8_sc_fused4_d128, q8_sc_fused4},
        {q8_sc_fused8_d64, q8_sc_fused8_d128, q8_sc_fused8}};
    static const kv_rows_pv_fn pv[3][3] = {
        {q8_pv_fused2_d64, q8_pv_fused2_d128, q8_pv_fused2},
        {q8_pv_fused4_d64, q8_pv_fused4_d128, q8_pv_fused4},
        {q8_pv_fused8_d64, q8_pv_fused8_d128, q8_pv_fused8}};
    const int gi = g == 2 ? 0 : g == 4 ? 1 : 2;
    if (is_v)
        J->pv = pv[gi][shape];
    else
        J->scores = sc[gi][shape];
}
#endif

void kv_rows_bind_q8(struct kv_dec_job *J, int is_v)
{
    const struct kv_rows_side *s = is_v ? &J->v : &J->k;
    const int32_t g = J->g, d = J->d, group = s->group;
    (void)g;
    (void)d;
    (void)group;
#ifdef __AVX512F__
    if (group % 16 == 0) {
        /* 0: head_dim 64, group 32; 1: head_dim 128, group 32; 2: any */
        const int shape = group == 32 && d == 64 ? 0 : group == 32 && d == 128 ? 1 : 2;
        if (g >= 2) {
            /* GQA of 2, 4 or 8 heads: dequantize in registers for the whole
             * group instead of through the L1 tile. Measured (32/8 heads, 2
             * threads, min of 5 interleaved runs): head_dim 64 148 vs 235 us
             * (T 2048), 683 vs 871 (T 8192). The tile stays for the shapes
             * the fused kernels do not take. */
            if ((g == 2 || g == 4 || g == 8) && d % (256 / g) == 0) {
                bind_fused(J, is_v, g, shape);
            } else {
                kv_rows_dequant_fn t = shape == 0 ? q8_tile_d64 : shape == 1 ? q8_tile_d128 : q8_tile;
                if (is_v)
                    J->v_tile = t;
                else
                    J->k_tile = t;
            }
            return;
        }
        if (is_v)
            J->pv = shape == 0 ? q8_pv_512_d64 : shape == 1 ? q8_pv_512_d128 : q8_pv_512;
        else
            J->scores = group == 32 && s->ng == 2   ? q8_sc_512_g32n2
                        : group == 32 && s->ng == 4 ? q8_sc_512_g32n4
                                                    : q8_sc_512;
        return;
    }
#endif
#ifdef __AVX2__
    if (group % 8 == 0) {
        if (is_v)
            J->pv = q8_pv_avx2;
        else
            J->scores = q8_sc_avx2;
        return;
    }
#endif
    if (is_v)
        J->pv = q8_pv_scalar;
    else
        J->scores = q8_sc_scalar;
}
