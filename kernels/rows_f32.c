/*
 * rows_f32.c - decode row kernels for f32 keys and values (kv_rows.h): the
 * scores q . k of a run of rows for each head of a GQA group, and the
 * weighted sum of value rows into the heads' accumulators.
 *
 * The design decision: f32 decode is bound by the rows' bytes, so every
 * kernel streams each row once per group of heads where it can. On AVX-512
 * with GQA of 2, 4 or 8 heads a 16-element chunk of a K or V row is loaded
 * once and fed to all the group's heads (f32_rows_heads, pv_f32_heads);
 * otherwise each head runs 8 rows per pass (one reduction tree for the 8
 * sums). The same kernels read the f32 tiles that quantized and generic
 * sides are dequantized into.
 */
#include "kv_rows.h"

/* ------------------------------------------------------------------------ */
/* Scalar                                                                   */

static void f32_sc_scalar(float *sc, const struct kv_dec_job *J, const struct kv_rows_side *s,
                          const char *k0, const char *kqp, int32_t nb)
{
    (void)kqp;
    const int32_t d = J->d;
    for (int32_t j = 0; j < nb; j++) {
        const float *k = (const float *)(k0 + (size_t)j * s->stride);
        for (int32_t i = 0; i < J->g; i++) {
            const float *q = J->qs + (size_t)i * d;
            float r = 0.0f;
            for (int32_t e = 0; e < d; e++)
                r += q[e] * k[e];
            sc[(size_t)i * DEC_KB + j] = r;
        }
    }
}

static void f32_pv_scalar(float *acc, size_t acc_stride, float *msum, float *w,
                          const float *pr, const struct kv_dec_job *J,
                          const struct kv_rows_side *s, const char *v0, const char *vqp,
                          int32_t nb)
{
    (void)msum;
    (void)w;
    (void)vqp;
    const int32_t d = J->d;
    for (int32_t i = 0; i < J->g; i++) {
        float *a = acc + (size_t)i * acc_stride;
        const float *pi = pr + (size_t)i * DEC_KB;
        for (int32_t j = 0; j < nb; j++) {
            const float *v = (const float *)(v0 + (size_t)j * s->stride);
            for (int32_t e = 0; e < d; e++)
                a[e] += pi[j] * v[e];
        }
    }
}

/* ------------------------------------------------------------------------ */
/* AVX2                                                                     */

#ifdef __AVX2__
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
        _mm256_storeu_ps(o, _mm256_add_ps(kv_hsum8x8(a), _mm256_loadu_ps(tail)));
    } else {
        for (int u = 0; u < nr; u++)
            o[u] = kv_hsum8(a[u]) + tail[u];
    }
}

/* per head: 8 rows a pass, then one at a time */
static void f32_sc_avx2(float *sc, const struct kv_dec_job *J, const struct kv_rows_side *s,
                        const char *k, const char *kqp, int32_t nb)
{
    (void)kqp;
    const size_t st = s->stride;
    for (int32_t i = 0; i < J->g; i++) {
        const float *q = J->qs + (size_t)i * J->d;
        float *o = sc + (size_t)i * DEC_KB;
        int32_t j = 0;
        for (; j + 8 <= nb; j += 8)
            f32_rows(o + j, 8, q, k + j * st, st, J->d);
        for (; j < nb; j++)
            f32_rows(o + j, 1, q, k + j * st, st, J->d);
    }
}

/* a (d) += sum_j pi[j] * v_j: 32 elements a pass over the rows */
static void f32_pv_avx2(float *acc, size_t acc_stride, float *msum, float *w, const float *pr,
                        const struct kv_dec_job *J, const struct kv_rows_side *s,
                        const char *v0, const char *vqp, int32_t nb)
{
    (void)msum;
    (void)w;
    (void)vqp;
    const int32_t d = J->d;
    const size_t stride = s->stride;
    for (int32_t i = 0; i < J->g; i++) {
        float *a = acc + (size_t)i * acc_stride;
        const float *pi = pr + (size_t)i * DEC_KB;
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
    }
}

/* ------------------------------------------------------------------------ */
/* AVX-512                                                                  */

#ifdef __AVX512F__
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
        t[u] = kv_fold512(a[u]);
    if (nr == 8) {
        _mm256_storeu_ps(o, kv_hsum8x8(t));
    } else {
        for (int u = 0; u < nr; u++)
            o[u] = kv_hsum8(t[u]);
    }
}

static void f32_sc_512(float *sc, const struct kv_dec_job *J, const struct kv_rows_side *s,
                       const char *k, const char *kqp, int32_t nb)
{
    (void)kqp;
    const size_t st = s->stride;
    for (int32_t i = 0; i < J->g; i++) {
        const float *q = J->qs + (size_t)i * J->d;
        float *o = sc + (size_t)i * DEC_KB;
        int32_t j = 0;
        for (; j + 8 <= nb; j += 8)
            f32_rows16(o + j, 8, q, k + j * st, st, J->d);
        for (; j < nb; j++)
            f32_rows16(o + j, 1, q, k + j * st, st, J->d);
    }
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
    kv_store_heads(sc, g, a);
}

/* all heads of the group at once, rows in steps of 16/g; the rows left
 * over one head at a time */
#define KV_F32_SC_HEADS(G)                                                                   \
    static void f32_sc_heads##G(float *sc, const struct kv_dec_job *J,                       \
                                const struct kv_rows_side *s, const char *k, const char *kqp, \
                                int32_t nb)                                                  \
    {                                                                                        \
        (void)kqp;                                                                           \
        const size_t st = s->stride;                                                         \
        const int32_t step = 16 / (G);                                                       \
        int32_t j = 0;                                                                       \
        for (; j + step <= nb; j += step)                                                    \
            f32_rows_heads(sc + j, G, J->qs, k + j * st, st, J->d);                          \
        for (int32_t h = 0; h < (G); h++)                                                    \
            for (int32_t jj = j; jj < nb; jj++)                                              \
                f32_rows16(sc + (size_t)h * DEC_KB + jj, 1, J->qs + (size_t)h * J->d,        \
                           k + jj * st, st, J->d);                                           \
    }
KV_F32_SC_HEADS(2)
KV_F32_SC_HEADS(4)
KV_F32_SC_HEADS(8)
#undef KV_F32_SC_HEADS

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

static void f32_pv_512(float *acc, size_t acc_stride, float *msum, float *w, const float *pr,
                       const struct kv_dec_job *J, const struct kv_rows_side *s,
                       const char *v0, const char *vqp, int32_t nb)
{
    (void)msum;
    (void)w;
    (void)vqp;
    for (int32_t i = 0; i < J->g; i++)
        pv_f32_512(acc + (size_t)i * acc_stride, pr + (size_t)i * DEC_KB, v0, s->stride, nb,
                   J->d);
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
            kv_heads_fma(a, vv, pr, g, ch, j);
        }
        for (int h = 0; h < g; h++)
            for (int c = 0; c < ch; c++)
                _mm512_storeu_ps(acc + (size_t)h * acc_stride + e0 + 16 * c, a[h * ch + c]);
    }
}

#define KV_F32_PV_HEADS(G)                                                                   \
    static void f32_pv_heads##G(float *acc, size_t acc_stride, float *msum, float *w,       \
                                const float *pr, const struct kv_dec_job *J,                 \
                                const struct kv_rows_side *s, const char *v0,                \
                                const char *vqp, int32_t nb)                                 \
    {                                                                                        \
        (void)msum;                                                                          \
        (void)w;                                                                             \
        (void)vqp;                                                                           \
        pv_f32_heads(acc, acc_stride, pr, G, v0, s->stride, nb, J->d);                       \
    }
KV_F32_PV_HEADS(2)
KV_F32_PV_HEADS(4)
KV_F32_PV_HEADS(8)
#undef KV_F32_PV_HEADS
#endif /* __AVX512F__ */
#endif /* __AVX2__ */

/* ------------------------------------------------------------------------ */
/* Binding                                                                  */

void kv_rows_bind_f32(struct kv_dec_job *J, int is_v)
{
    const int32_t g = J->g, d = J->d;
    (void)g;
    (void)d;
    if (!is_v) {
        J->scores = f32_sc_scalar;
#ifdef __AVX2__
        J->scores = f32_sc_avx2;
#ifdef __AVX512F__
        if (d % 16 == 0)
            J->scores = g == 2 ? f32_sc_heads2
                        : g == 4 ? f32_sc_heads4
                        : g == 8 ? f32_sc_heads8
                                 : f32_sc_512;
#endif
#endif
        return;
    }
    J->pv = f32_pv_scalar;
#ifdef __AVX2__
    J->pv = f32_pv_avx2;
#ifdef __AVX512F__
    if ((g == 2 || g == 4 || g == 8) && d % (256 / g) == 0)
        J->pv = g == 2 ? f32_pv_heads2 : g == 4 ? f32_pv_heads4 : f32_pv_heads8;
    else if (d % 16 == 0)
        J->pv = f32_pv_512;
#endif
#endif
}
