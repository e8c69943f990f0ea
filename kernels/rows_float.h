/*
 * rows_float.h - decode row kernels for the float dtypes (kv_rows.h),
 * written once for f32, f16 and bf16: rows_f32.c, rows_f16.c and
 * rows_bf16.c each define how a row's elements become floats, then include
 * this file.
 *
 * The includer defines, before including:
 *   HALF_PFX       the name prefix (f32 / f16 / bf16): functions are HALF_PFX_xxx
 *   HALF_T         the stored element type (float, uint16_t)
 *   half_scalar(h) one HALF_T -> float             (any build)
 *   half_ld8(p)    8 elements -> __m256             (KV_TARGET_AVX2)
 *   half_ld16(p)   16 elements -> __m512            (KV_TARGET_AVX512)
 *
 * The design decision: the rows are converted in registers as they are
 * read, never into a buffer, so a 16-bit cache reads half the bytes of f32
 * and does the f32 kernels' arithmetic plus one conversion per chunk. Every
 * kernel streams each row once per group of heads where it can: with GQA
 * of 2, 4 or 8 heads a chunk of a K row is loaded once and fed to all the
 * group's heads (rows_heads on AVX-512, rows8_heads on AVX2), and on
 * AVX-512 a chunk of a V row as well (pv_heads); otherwise each head runs
 * 8 rows per pass (one reduction tree for the 8 sums). The
 * level is chosen when the job is bound, from kv_isa(): AVX-512 (16 lanes;
 * d a multiple of 16), AVX2 (+ F16C for f16; 8 lanes, any d), scalar, so
 * one binary uses what the CPU it runs on has.
 */
#ifndef HALF_PFX
#error "define HALF_PFX, HALF_T, half_scalar, half_ld8 and half_ld16 before including rows_float.h"
#endif

#define HALF_CAT2(a, b) a##_##b
#define HALF_CAT(a, b) HALF_CAT2(a, b)
#define HN(x) HALF_CAT(HALF_PFX, x)

/* ------------------------------------------------------------------------ */
/* Scalar                                                                   */

static void HN(sc_scalar)(float *sc, const struct kv_dec_job *J, const struct kv_rows_side *s,
                          const char *k0, const char *kqp, int32_t nb)
{
    (void)kqp;
    const int32_t d = J->d;
    for (int32_t j = 0; j < nb; j++) {
        const HALF_T *k = (const HALF_T *)(k0 + (size_t)j * s->stride);
        for (int32_t i = 0; i < J->g; i++) {
            const float *q = J->qs + (size_t)i * d;
            float r = 0.0f;
            for (int32_t e = 0; e < d; e++)
                r += q[e] * half_scalar(k[e]);
            sc[(size_t)i * DEC_KB + j] = r;
        }
    }
}

static void HN(pv_scalar)(float *acc, size_t acc_stride, float *msum, float *w, const float *pr,
                          const struct kv_dec_job *J, const struct kv_rows_side *s,
                          const char *v0, const char *vqp, int32_t nb)
{
    (void)msum;
    (void)w;
    (void)vqp;
    const int32_t d = J->d;
    for (int32_t i = 0; i < J->g; i++) {
        float *a = acc + (size_t)i * acc_stride;
        const float *pi = pr + (size_t)i * DEC_KB;
        for (int32_t j = 0; j < nb; j++) {
            const HALF_T *v = (const HALF_T *)(v0 + (size_t)j * s->stride);
            for (int32_t e = 0; e < d; e++)
                a[e] += pi[j] * half_scalar(v[e]);
        }
    }
}

#ifdef KV_X86
/* ------------------------------------------------------------------------ */
/* AVX2 + F16C (8 lanes, any d: the last d % 8 elements in scalar)          */

#define HROW(r, u, st) ((const HALF_T *)((r) + (size_t)(u) * (st)))

/* o[0..nr) <- q . rows r, r + st, ... */
KV_INLINE2 void HN(rows8)(float *o, const int nr, const float *q, const char *r, size_t st,
                          int32_t d)
{
    const int32_t d8 = d & ~7;
    __m256 a[8];
    for (int u = 0; u < nr; u++)
        a[u] = _mm256_setzero_ps();
    for (int32_t e = 0; e < d8; e += 8) {
        __m256 qv = _mm256_loadu_ps(q + e);
        for (int u = 0; u < nr; u++)
            a[u] = _mm256_fmadd_ps(qv, half_ld8(HROW(r, u, st) + e), a[u]);
    }
    float tail[8] = {0};
    for (int u = 0; u < nr; u++)
        for (int32_t e = d8; e < d; e++)
            tail[u] += q[e] * half_scalar(HROW(r, u, st)[e]);
    if (nr == 8) {
        _mm256_storeu_ps(o, _mm256_add_ps(kv_hsum8x8(a), _mm256_loadu_ps(tail)));
    } else {
        for (int u = 0; u < nr; u++)
            o[u] = kv_hsum8(a[u]) + tail[u];
    }
}

/* per head: 8 rows a pass, then one at a time */
KV_TARGET_AVX2 static void HN(sc_avx2)(float *sc, const struct kv_dec_job *J,
                                       const struct kv_rows_side *s, const char *k,
                                       const char *kqp, int32_t nb)
{
    (void)kqp;
    const size_t st = s->stride;
    for (int32_t i = 0; i < J->g; i++) {
        const float *q = J->qs + (size_t)i * J->d;
        float *o = sc + (size_t)i * DEC_KB;
        int32_t j = 0;
        for (; j + 8 <= nb; j += 8)
            HN(rows8)(o + j, 8, q, k + j * st, st, J->d);
        for (; j < nb; j++)
            HN(rows8)(o + j, 1, q, k + j * st, st, J->d);
    }
}

/* a (d) += sum_j pi[j] * v_j, 32 elements a pass; even and odd rows
 * accumulate apart so that eight FMA chains are in flight (four would wait
 * on the FMA latency every row) */
KV_TARGET_AVX2 static void HN(pv_avx2)(float *acc, size_t acc_stride, float *msum, float *w,
                                       const float *pr, const struct kv_dec_job *J,
                                       const struct kv_rows_side *s, const char *v0,
                                       const char *vqp, int32_t nb)
{
    (void)msum;
    (void)w;
    (void)vqp;
    const int32_t d = J->d;
    const size_t st = s->stride;
    for (int32_t i = 0; i < J->g; i++) {
        float *a = acc + (size_t)i * acc_stride;
        const float *pi = pr + (size_t)i * DEC_KB;
        int32_t e = 0;
        for (; e + 32 <= d; e += 32) {
            __m256 x[4], y[4];
            for (int c = 0; c < 4; c++) {
                x[c] = _mm256_loadu_ps(a + e + 8 * c);
                y[c] = _mm256_setzero_ps();
            }
            int32_t j = 0;
            for (; j + 2 <= nb; j += 2) {
                const HALF_T *v = HROW(v0, j, st) + e, *u = HROW(v0, j + 1, st) + e;
                const __m256 pj = _mm256_broadcast_ss(pi + j), pk = _mm256_broadcast_ss(pi + j + 1);
                for (int c = 0; c < 4; c++) {
                    x[c] = _mm256_fmadd_ps(pj, half_ld8(v + 8 * c), x[c]);
                    y[c] = _mm256_fmadd_ps(pk, half_ld8(u + 8 * c), y[c]);
                }
            }
            if (j < nb) {
                const HALF_T *v = HROW(v0, j, st) + e;
                const __m256 pj = _mm256_broadcast_ss(pi + j);
                for (int c = 0; c < 4; c++)
                    x[c] = _mm256_fmadd_ps(pj, half_ld8(v + 8 * c), x[c]);
            }
            for (int c = 0; c < 4; c++)
                _mm256_storeu_ps(a + e + 8 * c, _mm256_add_ps(x[c], y[c]));
        }
        for (; e + 8 <= d; e += 8) {
            __m256 a0 = _mm256_loadu_ps(a + e);
            for (int32_t j = 0; j < nb; j++)
                a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(pi + j), half_ld8(HROW(v0, j, st) + e),
                                     a0);
            _mm256_storeu_ps(a + e, a0);
        }
        for (; e < d; e++)
            for (int32_t j = 0; j < nb; j++)
                a[e] += pi[j] * half_scalar(HROW(v0, j, st)[e]);
    }
}

/*
 * GQA scores (g in 2, 4, 8), written once for AVX2 and AVX-512: ROWS(sc, g,
 * nr, qs, r, st, d) scores nr rows (nr * g <= LANES) for the g heads of a
 * kv head, each chunk of a K row read (and converted) once for all of
 * them, where the one-head kernels read it once per head; accumulator u =
 * h*nr + rr. KV_SC_HEADS (kv_rows.h) runs a block through it. Only the
 * vector type and its operations differ between the levels.
 *
 * On AVX2 the values stay per head (pv_avx2): a value pass fused over the
 * heads walks a block's V rows one 64-byte line per row at a time, and on
 * the AVX2 EPYC it measured slower for f32 (cold, T 32768, 32/8: 24.7
 * against 20.1 ms at head_dim 128) and no faster for f16 (12.8 against
 * 12.5 ms). AVX-512 fuses both sides (pv_heads below).
 */
#define HALF_ROWS_HEADS(ROWS, INL, V, LANES, ZERO, LDQ, FMA, STORE, HSUM)                    \
    INL void HN(ROWS)(float *sc, const int g, const int nr, const float *qs, const char *r,  \
                      size_t st, int32_t d)                                                  \
    {                                                                                        \
        V a[LANES];                                                                          \
        for (int u = 0; u < g * nr; u++)                                                     \
            a[u] = ZERO();                                                                   \
        for (int32_t e = 0; e < d; e += (LANES)) {                                           \
            V kv[LANES]; /* nr <= LANES / g: sized for any g */                              \
            for (int rr = 0; rr < nr; rr++)                                                  \
                kv[rr] = half_ld##LANES(HROW(r, rr, st) + e);                                \
            for (int h = 0; h < g; h++) {                                                    \
                const V qh = LDQ(qs + (size_t)h * d + e);                                    \
                for (int rr = 0; rr < nr; rr++)                                              \
                    a[h * nr + rr] = FMA(qh, kv[rr], a[h * nr + rr]);                        \
            }                                                                                \
        }                                                                                    \
        if (nr * g == (LANES)) {                                                             \
            STORE(sc, g, a);                                                                 \
        } else {                                                                             \
            for (int h = 0; h < g; h++)                                                      \
                for (int rr = 0; rr < nr; rr++)                                              \
                    sc[(size_t)h * DEC_KB + rr] = HSUM(a[h * nr + rr]);                      \
        }                                                                                    \
    }

HALF_ROWS_HEADS(rows8_heads, KV_INLINE2, __m256, 8, _mm256_setzero_ps, _mm256_loadu_ps,
                _mm256_fmadd_ps, kv_store_heads8, kv_hsum8)
KV_SC_HEADS(HN(sc8_heads2), KV_TARGET_AVX2, 8, HN(rows8_heads), qs, 2)
KV_SC_HEADS(HN(sc8_heads4), KV_TARGET_AVX2, 8, HN(rows8_heads), qs, 4)
KV_SC_HEADS(HN(sc8_heads8), KV_TARGET_AVX2, 8, HN(rows8_heads), qs, 8)

/* ------------------------------------------------------------------------ */
/* AVX-512 (d a multiple of 16)                                             */

KV_INLINE512 void HN(rows16)(float *o, const int nr, const float *q, const char *r, size_t st,
                             int32_t d)
{
    __m512 a[8];
    for (int u = 0; u < nr; u++)
        a[u] = _mm512_setzero_ps();
    for (int32_t e = 0; e < d; e += 16) {
        __m512 qv = _mm512_loadu_ps(q + e);
        for (int u = 0; u < nr; u++)
            a[u] = _mm512_fmadd_ps(qv, half_ld16(HROW(r, u, st) + e), a[u]);
    }
    __m256 t[8];
    for (int u = 0; u < nr; u++)
        t[u] = kv_fold512(a[u]);
    if (nr == 8) {
        _mm256_storeu_ps(o, kv_hsum8x8(t));
    } else {
        for (int u = 0; u < nr; u++)
            o[u] = kv_hsum8(t[u]);
    }
}

KV_TARGET_AVX512 static void HN(sc_512)(float *sc, const struct kv_dec_job *J,
                                        const struct kv_rows_side *s, const char *k,
                                        const char *kqp, int32_t nb)
{
    (void)kqp;
    const size_t st = s->stride;
    for (int32_t i = 0; i < J->g; i++) {
        const float *q = J->qs + (size_t)i * J->d;
        float *o = sc + (size_t)i * DEC_KB;
        int32_t j = 0;
        for (; j + 8 <= nb; j += 8) {
            if (i == 0)
                kv_rows_ahead(s, k + j * st, 8);
            HN(rows16)(o + j, 8, q, k + j * st, st, J->d);
        }
        for (; j < nb; j++) {
            if (i == 0)
                kv_rows_ahead(s, k + j * st, 1);
            HN(rows16)(o + j, 1, q, k + j * st, st, J->d);
        }
    }
}

HALF_ROWS_HEADS(rows_heads, KV_INLINE512, __m512, 16, _mm512_setzero_ps, _mm512_loadu_ps,
                _mm512_fmadd_ps, kv_store_heads, _mm512_reduce_add_ps)
KV_SC_HEADS(HN(sc_heads2), KV_TARGET_AVX512, 16, HN(rows_heads), qs, 2)
KV_SC_HEADS(HN(sc_heads4), KV_TARGET_AVX512, 16, HN(rows_heads), qs, 4)
KV_SC_HEADS(HN(sc_heads8), KV_TARGET_AVX512, 16, HN(rows_heads), qs, 8)
#undef HALF_ROWS_HEADS

/* a (d) += sum_j pi[j] * v_j, 64 elements a pass; even and odd rows
 * accumulate apart so eight FMA chains are in flight. The first pass asks
 * for the rows ahead where pf is set (kv_rows_ahead). */
KV_INLINE512 void HN(pv_row512)(float *a, const float *pi, const struct kv_rows_side *s, int pf,
                                const char *v0, int32_t nb, int32_t d)
{
    const size_t st = s->stride;
    int32_t e = 0;
    for (; e + 64 <= d; e += 64) {
        __m512 a0 = _mm512_loadu_ps(a + e), a1 = _mm512_loadu_ps(a + e + 16);
        __m512 a2 = _mm512_loadu_ps(a + e + 32), a3 = _mm512_loadu_ps(a + e + 48);
        __m512 b0 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps();
        __m512 b2 = _mm512_setzero_ps(), b3 = _mm512_setzero_ps();
        int32_t j = 0;
        for (; j + 2 <= nb; j += 2) {
            const HALF_T *v = HROW(v0, j, st) + e, *x = HROW(v0, j + 1, st) + e;
            if (pf && e == 0)
                kv_rows_ahead(s, (const char *)HROW(v0, j, st), 2);
            __m512 pj = _mm512_set1_ps(pi[j]), pk = _mm512_set1_ps(pi[j + 1]);
            a0 = _mm512_fmadd_ps(pj, half_ld16(v), a0);
            a1 = _mm512_fmadd_ps(pj, half_ld16(v + 16), a1);
            a2 = _mm512_fmadd_ps(pj, half_ld16(v + 32), a2);
            a3 = _mm512_fmadd_ps(pj, half_ld16(v + 48), a3);
            b0 = _mm512_fmadd_ps(pk, half_ld16(x), b0);
            b1 = _mm512_fmadd_ps(pk, half_ld16(x + 16), b1);
            b2 = _mm512_fmadd_ps(pk, half_ld16(x + 32), b2);
            b3 = _mm512_fmadd_ps(pk, half_ld16(x + 48), b3);
        }
        if (j < nb) {
            const HALF_T *v = HROW(v0, j, st) + e;
            if (pf && e == 0)
                kv_rows_ahead(s, (const char *)HROW(v0, j, st), 1);
            __m512 pj = _mm512_set1_ps(pi[j]);
            a0 = _mm512_fmadd_ps(pj, half_ld16(v), a0);
            a1 = _mm512_fmadd_ps(pj, half_ld16(v + 16), a1);
            a2 = _mm512_fmadd_ps(pj, half_ld16(v + 32), a2);
            a3 = _mm512_fmadd_ps(pj, half_ld16(v + 48), a3);
        }
        _mm512_storeu_ps(a + e, _mm512_add_ps(a0, b0));
        _mm512_storeu_ps(a + e + 16, _mm512_add_ps(a1, b1));
        _mm512_storeu_ps(a + e + 32, _mm512_add_ps(a2, b2));
        _mm512_storeu_ps(a + e + 48, _mm512_add_ps(a3, b3));
    }
    for (; e < d; e += 16) {
        __m512 a0 = _mm512_loadu_ps(a + e);
        for (int32_t j = 0; j < nb; j++) {
            if (pf && e == 0)
                kv_rows_ahead(s, (const char *)HROW(v0, j, st), 1);
            a0 = _mm512_fmadd_ps(_mm512_set1_ps(pi[j]), half_ld16(HROW(v0, j, st) + e), a0);
        }
        _mm512_storeu_ps(a + e, a0);
    }
}

KV_TARGET_AVX512 static void HN(pv_512)(float *acc, size_t acc_stride, float *msum, float *w,
                                        const float *pr, const struct kv_dec_job *J,
                                        const struct kv_rows_side *s, const char *v0,
                                        const char *vqp, int32_t nb)
{
    (void)msum;
    (void)w;
    (void)vqp;
    for (int32_t i = 0; i < J->g; i++)
        HN(pv_row512)(acc + (size_t)i * acc_stride, pr + (size_t)i * DEC_KB, s, i == 0, v0, nb,
                      J->d);
}

/* GQA (g in 2, 4, 8; d a multiple of 256/g): acc_h (d) += sum_j pr[h][j] *
 * v_j, each V chunk converted once for all heads, 16/g chunks a pass */
KV_INLINE512 void HN(pv_heads)(float *acc, size_t acc_stride, const float *pr, const int g,
                               const char *v0, const struct kv_rows_side *s, int32_t nb,
                               int32_t d)
{
    const size_t st = s->stride;
    const int ch = 16 / g;
    for (int32_t e0 = 0; e0 < d; e0 += 16 * ch) {
        __m512 a[16];
        for (int h = 0; h < g; h++)
            for (int c = 0; c < ch; c++)
                a[h * ch + c] = _mm512_loadu_ps(acc + (size_t)h * acc_stride + e0 + 16 * c);
        for (int32_t j = 0; j < nb; j++) {
            const HALF_T *v = HROW(v0, j, st) + e0;
            if (e0 == 0)
                kv_rows_ahead(s, (const char *)HROW(v0, j, st), 1);
            __m512 vv[8];
            for (int c = 0; c < ch; c++)
                vv[c] = half_ld16(v + 16 * c);
            kv_heads_fma(a, vv, pr, g, ch, j);
        }
        for (int h = 0; h < g; h++)
            for (int c = 0; c < ch; c++)
                _mm512_storeu_ps(acc + (size_t)h * acc_stride + e0 + 16 * c, a[h * ch + c]);
    }
}

#define HALF_PV_HEADS(G)                                                                     \
    KV_TARGET_AVX512 static void HN(pv_heads##G)(float *acc, size_t acc_stride, float *msum, \
                                                 float *w, const float *pr,                  \
                                                 const struct kv_dec_job *J,                 \
                                                 const struct kv_rows_side *s,               \
                                                 const char *v0, const char *vqp, int32_t nb) \
    {                                                                                        \
        (void)msum;                                                                          \
        (void)w;                                                                             \
        (void)vqp;                                                                           \
        HN(pv_heads)(acc, acc_stride, pr, G, v0, s, nb, J->d);                               \
    }
HALF_PV_HEADS(2)
HALF_PV_HEADS(4)
HALF_PV_HEADS(8)
#undef HALF_PV_HEADS
#undef HROW
#endif /* KV_X86 */

/* ------------------------------------------------------------------------ */
/* Binding                                                                  */

/* The converting kernels for J's shape at the level kv_isa() allows. */
static void HN(bind_convert)(struct kv_dec_job *J, int is_v)
{
    const int32_t g = J->g, d = J->d;
    const enum kv_isa isa = kv_isa();
    (void)g;
    (void)d;
    (void)isa;
    if (!is_v) {
        J->scores = HN(sc_scalar);
#ifdef KV_X86
        if (isa >= KV_ISA_AVX2)
            J->scores = HN(sc_avx2);
        if (isa >= KV_ISA_AVX2 && d % 8 == 0 && (g == 2 || g == 4 || g == 8))
            J->scores = g == 2 ? HN(sc8_heads2) : g == 4 ? HN(sc8_heads4) : HN(sc8_heads8);
        if (isa >= KV_ISA_AVX512 && d % 16 == 0) {
            J->scores = g == 2   ? HN(sc_heads2)
                        : g == 4 ? HN(sc_heads4)
                        : g == 8 ? HN(sc_heads8)
                                 : HN(sc_512);
            J->k.ahead = J->from_dram ? KV_ROWS_AHEAD : 0;
        }
#endif
        return;
    }
    J->pv = HN(pv_scalar);
#ifdef KV_X86
    if (isa >= KV_ISA_AVX2)
        J->pv = HN(pv_avx2);
    if (isa >= KV_ISA_AVX512 && (g == 2 || g == 4 || g == 8) && d % (256 / g) == 0)
        J->pv = g == 2 ? HN(pv_heads2) : g == 4 ? HN(pv_heads4) : HN(pv_heads8);
    else if (isa >= KV_ISA_AVX512 && d % 16 == 0)
        J->pv = HN(pv_512);
    if (isa >= KV_ISA_AVX512 && d % 16 == 0)
        J->v.ahead = J->from_dram ? KV_ROWS_AHEAD : 0;
#endif
}

#undef HN
#undef HALF_CAT
#undef HALF_CAT2
#undef HALF_T
