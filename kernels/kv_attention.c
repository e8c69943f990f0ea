/*
 * kv_attention.c - the fast attention kernel over KV spans (kv_attention.h).
 *
 * Two shapes of the same contract:
 *  - decode (n_q == 1) is memory-bound: every K and V row is streamed once
 *    for the whole group of query heads that shares it (GQA), in blocks of
 *    DEC_KB rows with an online softmax; the visible keys of each
 *    (sequence, kv head) are cut into split-K chunks so both cores are busy
 *    even with one kv head, and the chunks' partial softmaxes are merged with
 *    a log-sum-exp rescale. Quantized rows are never converted to a float
 *    buffer: codes are widened in registers and the group scale is applied
 *    to the partial dot product, score = sum_g scale_g*dot(q_g, codes_g) +
 *    min_g*sum(q_g); values accumulate p*scale_g*codes and p*min_g apart.
 *  - prefill (n_q > 1) is GEMM-bound: a tile of queries (times the heads of a
 *    GQA group) against key tiles, S = Q K^T and O += P V through
 *    cblas_sgemm, online softmax between them, so no n_q x n_keys matrix
 *    exists; key tiles nobody sees are never visited, tiles on the diagonal
 *    are masked.
 * Masking is interval arithmetic on positions (kv_attention_impl.h).
 * AVX2/FMA paths sit under __AVX2__; the scalar code beside them is the
 * portable fallback and handles the odd shapes (head_dim not a multiple of
 * 8, int8 groups not a multiple of 8, int4 groups not a multiple of 16).
 * kv_attn never allocates: all scratch comes from the caller's workspace.
 */
#include "kv_attention_impl.h"
#include "kv_quant.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#ifdef __AVX2__
#include <immintrin.h>
#endif

/* ------------------------------------------------------------------------ */
/* Tiling constants                                                         */

#define DEC_KB 32        /* decode: key rows per online-softmax block        */
#define PRE_QROWS 128    /* prefill: target rows (queries x group heads) per tile */
#define PRE_KT 256       /* prefill: keys per tile */
#define WS_ALIGN_FLOATS 16 /* 64 bytes */

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* ------------------------------------------------------------------------ */
/* Exponential and reductions                                               */

#ifdef __AVX2__
/* exp(x) for x <= 0 (8 lanes); 0 for x below -87.3 (including -inf).
 * Cephes-style: 2^n * poly(r), |r| <= ln2/2, about 1 ulp. */
static inline __m256 exp8_neg(__m256 x)
{
    const __m256 lo = _mm256_set1_ps(-87.3f);
    __m256 keep = _mm256_cmp_ps(x, lo, _CMP_GE_OQ);
    x = _mm256_max_ps(x, lo);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 y = _mm256_set1_ps(1.9875691500e-4f);
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    y = _mm256_mul_ps(y, _mm256_castsi256_ps(e));
    return _mm256_and_ps(y, keep);
}

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

/* x[j] <- exp(x[j] - m) for j < n, returns the sum. Entries n..round8(n)
 * must be readable; -inf entries give exactly 0. */
static float exp_sub_row(float *x, int32_t n, float m)
{
    float sum = 0.0f;
    int32_t j = 0;
#ifdef __AVX2__
    __m256 vm = _mm256_set1_ps(m), vs = _mm256_setzero_ps();
    for (; j + 8 <= n; j += 8) {
        __m256 e = exp8_neg(_mm256_sub_ps(_mm256_loadu_ps(x + j), vm));
        _mm256_storeu_ps(x + j, e);
        vs = _mm256_add_ps(vs, e);
    }
    sum = hsum8(vs);
#endif
    for (; j < n; j++) {
        x[j] = expf(x[j] - m);
        sum += x[j];
    }
    return sum;
}

static float row_max(const float *x, int32_t n)
{
    float m = -INFINITY;
    int32_t j = 0;
#ifdef __AVX2__
    __m256 vm = _mm256_set1_ps(-INFINITY);
    for (; j + 8 <= n; j += 8)
        vm = _mm256_max_ps(vm, _mm256_loadu_ps(x + j));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(vm), _mm256_extractf128_ps(vm, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    m = _mm_cvtss_f32(h);
#endif
    for (; j < n; j++)
        m = x[j] > m ? x[j] : m;
    return m;
}

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

/* Everything a decode block needs about one (sequence, kv head, span). */
struct dec_job {
    enum kv_dtype dt;
    int32_t g, d, group, ng;
    int fast;               /* the SIMD path applies to this dtype and shape */
    int wide;               /* and the AVX-512 one (quantized spans) */
    const char *k, *v;      /* token 0 of the span for this (b, h) */
    const char *kqp, *vqp;  /* its qparams (quantized spans) */
    size_t stride, qp_stride;
    const float *qs;        /* (g, d) scaled queries of the group */
    const float *qsum;      /* (g, ng) per-group sums of qs */
};

static void dec_job_init(struct dec_job *J, const struct kv_attn_params *p,
                         const struct kv_span *s, int32_t b, int32_t h, int32_t g,
                         int32_t ng, const float *qs, const float *qsum)
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
}

static inline const struct kv_qparams *job_qp(const char *base, size_t stride, int32_t t)
{
    return (const struct kv_qparams *)(base + (size_t)t * stride);
}

/* ------------------------------------------------------------------------ */
/* Decode: scores, scalar                                                   */

/* sc (g, DEC_KB) <- qs . k_row(t0 + j), j < nb  (any dtype and shape) */
static void sc_scalar(float *sc, const struct dec_job *J, int32_t t0, int32_t nb)
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
                a[u] = _mm512_fmadd_ps(qv, load_u8x16((const uint8_t *)(r + u * st) + e), a[u]);
        }
        for (int u = 0; u < nr; u++) {
            const struct kv_qparams *qp = (const struct kv_qparams *)(qpr + u * qst) + gi;
            tot[u] = _mm512_fmadd_ps(_mm512_set1_ps(qp->scale), a[u], tot[u]);
            mins[u] += qp->min * qsum[gi];
        }
    }
    qrows_finish(o, nr, tot, mins);
}

KV_INLINE void q4_rows16(float *o, const int nr, const float *q, const float *qsum,
                         const char *r, size_t st, const char *qpr, size_t qst,
                         int32_t group, int32_t ng)
{
    const int32_t half = group / 2;
    const __m512i m4 = _mm512_set1_epi32(0x0F);
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
        for (int32_t e = 0; e < half; e += 16) {
            __m512 qlo = _mm512_loadu_ps(q + g0 + e), qhi = _mm512_loadu_ps(q + g0 + half + e);
            for (int u = 0; u < nr; u++) {
                const uint8_t *cb = (const uint8_t *)(r + u * st) + gi * half + e;
                __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)cb));
                a[u] = _mm512_fmadd_ps(qlo, _mm512_cvtepi32_ps(_mm512_and_si512(x, m4)), a[u]);
                a[u] = _mm512_fmadd_ps(qhi, _mm512_cvtepi32_ps(_mm512_srli_epi32(x, 4)), a[u]);
            }
        }
        for (int u = 0; u < nr; u++) {
            const struct kv_qparams *qp = (const struct kv_qparams *)(qpr + u * qst) + gi;
            tot[u] = _mm512_fmadd_ps(_mm512_set1_ps(qp->scale), a[u], tot[u]);
            mins[u] += qp->min * qsum[gi];
        }
    }
    qrows_finish(o, nr, tot, mins);
}

/* a (d) += sum_j w[j][group of e] * codes_j[e], int8, 64 elements a pass */
static void pv_q8_512(float *a, const float *w, const char *v0, size_t stride, int32_t nb,
                      int32_t d, int32_t group, int32_t ng)
{
    int32_t e = 0;
    for (; e + 64 <= d; e += 64) {
        const int32_t g0 = e / group, g1 = (e + 16) / group, g2 = (e + 32) / group,
                      g3 = (e + 48) / group;
        __m512 a0 = _mm512_loadu_ps(a + e), a1 = _mm512_loadu_ps(a + e + 16);
        __m512 a2 = _mm512_loadu_ps(a + e + 32), a3 = _mm512_loadu_ps(a + e + 48);
        for (int32_t j = 0; j < nb; j++) {
            const uint8_t *c = (const uint8_t *)(v0 + (size_t)j * stride) + e;
            const float *wj = w + (size_t)j * ng;
            a0 = _mm512_fmadd_ps(_mm512_set1_ps(wj[g0]), load_u8x16(c), a0);
            a1 = _mm512_fmadd_ps(_mm512_set1_ps(wj[g1]), load_u8x16(c + 16), a1);
            a2 = _mm512_fmadd_ps(_mm512_set1_ps(wj[g2]), load_u8x16(c + 32), a2);
            a3 = _mm512_fmadd_ps(_mm512_set1_ps(wj[g3]), load_u8x16(c + 48), a3);
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
            a0 = _mm512_fmadd_ps(_mm512_set1_ps(w[(size_t)j * ng + g0]), load_u8x16(c), a0);
        }
        _mm512_storeu_ps(a + e, a0);
    }
}

/* the same for int4: 16 code bytes of group gi at offset o hold elements
 * gi*group + o%half .. +15 (low nibbles) and those + half (high) */
static void pv_q4_512(float *a, const float *w, const char *v0, size_t stride, int32_t nb,
                      int32_t d, int32_t group, int32_t ng)
{
    const int32_t half = group / 2, nbytes = d / 2;
    const __m512i m4 = _mm512_set1_epi32(0x0F);
    int32_t o = 0;
    for (; o + 32 <= nbytes; o += 32) {
        const int32_t gA = o / half, gB = (o + 16) / half;
        const int32_t eA = gA * group + o % half, eB = gB * group + (o + 16) % half;
        __m512 a0 = _mm512_loadu_ps(a + eA), a1 = _mm512_loadu_ps(a + eA + half);
        __m512 a2 = _mm512_loadu_ps(a + eB), a3 = _mm512_loadu_ps(a + eB + half);
        for (int32_t j = 0; j < nb; j++) {
            const uint8_t *c = (const uint8_t *)(v0 + (size_t)j * stride) + o;
            const float *wj = w + (size_t)j * ng;
            __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)c));
            __m512i y = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(c + 16)));
            __m512 wA = _mm512_set1_ps(wj[gA]), wB = _mm512_set1_ps(wj[gB]);
            a0 = _mm512_fmadd_ps(wA, _mm512_cvtepi32_ps(_mm512_and_si512(x, m4)), a0);
            a1 = _mm512_fmadd_ps(wA, _mm512_cvtepi32_ps(_mm512_srli_epi32(x, 4)), a1);
            a2 = _mm512_fmadd_ps(wB, _mm512_cvtepi32_ps(_mm512_and_si512(y, m4)), a2);
            a3 = _mm512_fmadd_ps(wB, _mm512_cvtepi32_ps(_mm512_srli_epi32(y, 4)), a3);
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
            __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)c));
            __m512 wA = _mm512_set1_ps(w[(size_t)j * ng + gA]);
            a0 = _mm512_fmadd_ps(wA, _mm512_cvtepi32_ps(_mm512_and_si512(x, m4)), a0);
            a1 = _mm512_fmadd_ps(wA, _mm512_cvtepi32_ps(_mm512_srli_epi32(x, 4)), a1);
        }
        _mm512_storeu_ps(a + eA, a0);
        _mm512_storeu_ps(a + eA + half, a1);
    }
}
#endif /* __AVX512F__ */

__attribute__((noinline)) static void sc_avx2(float *sc, const struct dec_job *J, int32_t t0, int32_t nb)
{
    const size_t st = J->stride, qst = J->qp_stride;
    const char *k = J->k + (size_t)t0 * st;
    const char *kqp = J->kqp != NULL ? J->kqp + (size_t)t0 * qst : NULL;
    for (int32_t i = 0; i < J->g; i++) {
        const float *q = J->qs + (size_t)i * J->d, *qsum = J->qsum + (size_t)i * J->ng;
        float *o = sc + (size_t)i * DEC_KB;
        int32_t j = 0;
        if (J->dt == KV_DTYPE_F32) {
            for (; j + 8 <= nb; j += 8)
                f32_rows(o + j, 8, q, k + j * st, st, J->d);
            for (; j < nb; j++)
                f32_rows(o + j, 1, q, k + j * st, st, J->d);
        }
#ifdef __AVX512F__
        else if (J->wide && J->dt == KV_DTYPE_Q8) {
            for (; j + 4 <= nb; j += 4)
                q8_rows16(o + j, 4, q, qsum, k + j * st, st, kqp + j * qst, qst, J->group, J->ng);
            for (; j < nb; j++)
                q8_rows16(o + j, 1, q, qsum, k + j * st, st, kqp + j * qst, qst, J->group, J->ng);
        } else if (J->wide) {
            for (; j + 4 <= nb; j += 4)
                q4_rows16(o + j, 4, q, qsum, k + j * st, st, kqp + j * qst, qst, J->group, J->ng);
            for (; j < nb; j++)
                q4_rows16(o + j, 1, q, qsum, k + j * st, st, kqp + j * qst, qst, J->group, J->ng);
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

static void dec_scores(float *sc, const struct dec_job *J, int32_t t0, int32_t nb)
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
__attribute__((noinline)) static void pv_weights(float *w, float *msum_i, const float *pi, const struct dec_job *J,
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
__attribute__((noinline)) static void dec_pv(float *acc, size_t acc_stride, float *msum, float *w,
                   const float *pr, const struct dec_job *J, int32_t t0, int32_t nb)
{
    const int32_t d = J->d, group = J->group, ng = J->ng;
    const size_t stride = J->stride;
    const char *v0 = J->v + (size_t)t0 * stride;
    for (int32_t i = 0; i < J->g; i++) {
        float *a = acc + (size_t)i * acc_stride;
        const float *pi = pr + (size_t)i * DEC_KB;
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
        if (J->wide) {
            if (J->dt == KV_DTYPE_Q8)
                pv_q8_512(a, w, v0, stride, nb, d, group, ng);
            else
                pv_q4_512(a, w, v0, stride, nb, d, group, ng);
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

/* ------------------------------------------------------------------------ */
/* Decode: one split-K chunk of one (sequence, kv head)                     */

/* Sizes shared by workspace sizing and the kernel. */
struct attn_layout {
    int32_t g, ng, splits;
    size_t slot;        /* floats per partial state: acc (d), m, l */
    size_t qs, qsum;    /* floats of the scaled queries and their group sums */
    size_t parts;       /* floats of all partial states (decode) */
    size_t per_thread;  /* floats of scratch per thread */
    int32_t qt, m_rows, kt; /* prefill: queries, rows and keys per tile */
};

static void attn_layout_of(struct attn_layout *L, const struct kv_attn_params *p)
{
    const size_t A = WS_ALIGN_FLOATS;
    const int32_t d = p->head_dim;
    L->g = p->n_heads / p->n_kv_heads;
    L->ng = (p->group > 0 && d % p->group == 0) ? d / p->group : 1;
    int32_t items = p->batch * p->n_kv_heads;
    L->splits = items >= 2 * p->n_threads ? 1 : (2 * p->n_threads + items - 1) / items;
    L->slot = round_up((size_t)d + 2, A);
    L->qs = round_up((size_t)p->batch * p->n_q * p->n_heads * d, A);
    L->qsum = round_up((size_t)p->batch * p->n_q * p->n_heads * L->ng, A);
    L->qt = PRE_QROWS / L->g > 0 ? PRE_QROWS / L->g : 1;
    if (L->qt > p->n_q)
        L->qt = p->n_q;
    L->m_rows = L->qt * L->g;
    L->kt = PRE_KT;
    if (p->n_q == 1) {
        L->parts = (size_t)items * L->splits * L->g * L->slot;
        L->per_thread = round_up((size_t)L->g * DEC_KB, A) + round_up((size_t)DEC_KB * L->ng, A) +
                        round_up((size_t)L->g * L->ng, A);
    } else {
        size_t m = (size_t)L->m_rows;
        L->parts = 0;
        L->per_thread = 2 * round_up(m * d, A) + round_up(m * L->kt, A) + 2 * round_up(m, A) +
                        2 * round_up((size_t)L->kt * d, A);
    }
}

size_t kv_attn_workspace_bytes(const struct kv_attn_params *p)
{
    struct attn_layout L;
    if (p == NULL || p->n_kv_heads < 1 || p->n_heads < 1 || p->head_dim < 1 ||
        p->n_threads < 1 || p->batch < 1 || p->n_q < 1)
        return 0;
    attn_layout_of(&L, p);
    double total = (double)L.qs + (double)L.qsum + (double)L.parts +
                   (double)L.per_thread * p->n_threads;
    if (total * sizeof(float) > (double)(SIZE_MAX / 2))
        return SIZE_MAX;
    return ((size_t)L.qs + L.qsum + L.parts + L.per_thread * (size_t)p->n_threads) *
           sizeof(float);
}

/*
 * Runs the online softmax of one split-K chunk: the visible keys of
 * (sequence b, kv head h) with indices [v0, v1) in span order. part
 * (g, slot): per head acc (d), then m and l.
 */
__attribute__((noinline)) static void dec_chunk(float *part, float *scratch, const struct attn_layout *L,
                      const struct kv_attn_params *p, const struct kv_span *spans,
                      int32_t n_spans, int32_t b, int32_t h, int64_t v0, int64_t v1,
                      const float *qs, const float *qsum)
{
    const int32_t g = L->g, d = p->head_dim, ng = L->ng;
    float *sc = scratch;
    float *w = sc + round_up((size_t)g * DEC_KB, WS_ALIGN_FLOATS);
    float *msum = w + round_up((size_t)DEC_KB * ng, WS_ALIGN_FLOATS);
    for (int32_t i = 0; i < g; i++) {
        float *st = part + (size_t)i * L->slot;
        memset(st, 0, (size_t)d * sizeof(float));
        st[d] = -INFINITY;
        st[d + 1] = 0.0f;
    }
    memset(msum, 0, (size_t)g * ng * sizeof(float));
    int have_quant = 0;

    int64_t lo, hi, seen = 0;
    kv_attn_visible_range(p, b, p->q_pos0, &lo, &hi);
    for (int32_t si = 0; si < n_spans && seen < v1; si++) {
        int32_t t0, t1;
        kv_span_token_range(&spans[si], lo, hi, &t0, &t1);
        int64_t n = t1 - t0;
        /* intersect [seen, seen + n) with [v0, v1) */
        int64_t a = v0 > seen ? v0 - seen : 0, e = v1 - seen < n ? v1 - seen : n;
        seen += n;
        if (a >= e)
            continue;
        struct dec_job J;
        dec_job_init(&J, p, &spans[si], b, h, g, ng, qs, qsum);
        have_quant |= spans[si].dtype != KV_DTYPE_F32;
        for (int32_t t = t0 + (int32_t)a; t < t0 + e; t += DEC_KB) {
            int32_t nb = (int32_t)(t0 + e - t < DEC_KB ? t0 + e - t : DEC_KB);
            dec_scores(sc, &J, t, nb);
            for (int32_t i = 0; i < g; i++) {
                float *st = part + (size_t)i * L->slot, *si_ = sc + (size_t)i * DEC_KB;
                for (int32_t j = nb; j < DEC_KB; j++)
                    si_[j] = -INFINITY;
                float bm = row_max(si_, nb);
                if (bm > st[d]) {
                    float corr = expf(st[d] - bm); /* 0 for the first block */
                    st[d] = bm;
                    st[d + 1] *= corr;
                    for (int32_t e2 = 0; e2 < d; e2++)
                        st[e2] *= corr;
                    for (int32_t gi = 0; gi < ng; gi++)
                        msum[(size_t)i * ng + gi] *= corr;
                }
                st[d + 1] += exp_sub_row(si_, nb, st[d]);
            }
            dec_pv(part, L->slot, msum, w, sc, &J, t, nb);
        }
    }
    if (have_quant) { /* fold the min terms into the values */
        for (int32_t i = 0; i < g; i++)
            for (int32_t e2 = 0; e2 < d; e2++)
                part[(size_t)i * L->slot + e2] += msum[(size_t)i * ng + e2 / p->group];
    }
}

/* Number of visible keys of sequence b for the decode query. */
static int64_t dec_visible(const struct kv_attn_params *p, const struct kv_span *spans,
                           int32_t n_spans, int32_t b)
{
    int64_t lo, hi, n = 0;
    kv_attn_visible_range(p, b, p->q_pos0, &lo, &hi);
    for (int32_t s = 0; s < n_spans; s++) {
        int32_t t0, t1;
        kv_span_token_range(&spans[s], lo, hi, &t0, &t1);
        n += t1 - t0;
    }
    return n;
}

static void attn_decode(float *out, const float *q, const struct kv_attn_params *p,
                        const struct kv_span *spans, int32_t n_spans, float *ws,
                        const struct attn_layout *L)
{
    const int32_t d = p->head_dim, g = L->g, ng = L->ng, S = L->splits;
    const int32_t H = p->n_heads, items = p->batch * p->n_kv_heads;
    float *qs = ws, *qsum = qs + L->qs, *parts = qsum + L->qsum;
    float *scratch = parts + L->parts;

#pragma omp parallel num_threads(p->n_threads)
    {
        float *my = scratch + (size_t)omp_get_thread_num() * L->per_thread;
        /* scaled queries and their per-group sums */
#pragma omp for schedule(static)
        for (int32_t r = 0; r < p->batch * H; r++) {
            for (int32_t e = 0; e < d; e++)
                qs[(size_t)r * d + e] = q[(size_t)r * d + e] * p->scale;
            for (int32_t gi = 0; gi < ng; gi++) {
                float sm = 0.0f;
                int32_t gs = d / ng;
                for (int32_t e = gi * gs; e < (gi + 1) * gs; e++)
                    sm += qs[(size_t)r * d + e];
                qsum[(size_t)r * ng + gi] = sm;
            }
        }
        /* split-K chunks, each (sequence, kv head, split) independent */
#pragma omp for schedule(static)
        for (int32_t it = 0; it < items * S; it++) {
            int32_t bh = it / S, s = it % S, b = bh / p->n_kv_heads, h = bh % p->n_kv_heads;
            int64_t nv = dec_visible(p, spans, n_spans, b);
            int64_t chunk = (nv + S - 1) / S;
            chunk = (chunk + DEC_KB - 1) / DEC_KB * DEC_KB;
            int64_t v0 = s * chunk < nv ? s * chunk : nv;
            int64_t v1 = v0 + chunk < nv ? v0 + chunk : nv;
            size_t r0 = (size_t)b * H + (size_t)h * g;
            dec_chunk(parts + (size_t)it * g * L->slot, my, L, p, spans, n_spans, b, h, v0, v1,
                      qs + r0 * d, qsum + r0 * ng);
        }
        /* merge the splits of each (sequence, query head) */
#pragma omp for schedule(static)
        for (int32_t r = 0; r < p->batch * H; r++) {
            int32_t b = r / H, hq = r % H, h = hq / g, i = hq % g;
            const float *st0 = parts + (((size_t)b * p->n_kv_heads + h) * S * g + i) * L->slot;
            const size_t sstride = (size_t)g * L->slot;
            float M = -INFINITY, lsum = 0.0f;
            for (int32_t s = 0; s < S; s++) {
                const float *st = st0 + s * sstride;
                if (st[d + 1] > 0.0f && st[d] > M)
                    M = st[d];
            }
            float *o = out + (size_t)r * d;
            for (int32_t e = 0; e < d; e++)
                o[e] = 0.0f;
            for (int32_t s = 0; s < S; s++) {
                const float *st = st0 + s * sstride;
                if (!(st[d + 1] > 0.0f))
                    continue;
                float f = expf(st[d] - M);
                lsum += st[d + 1] * f;
                for (int32_t e = 0; e < d; e++)
                    o[e] += st[e] * f;
            }
            if (lsum > 0.0f) {
                float inv = 1.0f / lsum;
                for (int32_t e = 0; e < d; e++)
                    o[e] *= inv;
            }
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Prefill                                                                  */

/* rows (n, d) <- rows t0..t0+n of a quantized span (keys or values) */
static void pre_dequant(float *dst, const struct kv_span *s, const struct kv_attn_params *p,
                        int32_t b, int32_t h, int32_t t0, int32_t n, int is_v)
{
    for (int32_t j = 0; j < n; j++) {
        const char *row = is_v ? kv_span_v_row(s, b, h, t0 + j) : kv_span_k_row(s, b, h, t0 + j);
        const struct kv_qparams *qp = kv_span_qp(is_v ? s->v_qp : s->k_qp, s, b, h, t0 + j);
        kv_dequantize_row(dst + (size_t)j * p->head_dim, row, qp, s->dtype, p->head_dim,
                          p->group);
    }
}

/* One tile of queries [i0, i0+nq) of (sequence b, kv head h) against every
 * key it sees; writes its rows of out. */
static void pre_tile(float *out, const float *q, const struct kv_attn_params *p,
                     const struct kv_span *spans, int32_t n_spans,
                     const struct attn_layout *L, float *my, int32_t b, int32_t h,
                     int32_t i0, int32_t nq)
{
    const int32_t d = p->head_dim, g = L->g, H = p->n_heads, kt = L->kt;
    const int32_t m = nq * g; /* rows: r = i*g + j  <->  query i0+i, head h*g+j */
    const size_t A = WS_ALIGN_FLOATS;
    float *Q = my;                                            /* (m, d) */
    float *O = Q + round_up((size_t)L->m_rows * d, A);        /* (m, d) */
    float *S = O + round_up((size_t)L->m_rows * d, A);        /* (m, kt) */
    float *mx = S + round_up((size_t)L->m_rows * kt, A);      /* (m) */
    float *ls = mx + round_up((size_t)L->m_rows, A);          /* (m) */
    float *Kt = ls + round_up((size_t)L->m_rows, A);          /* (kt, d) */
    float *Vt = Kt + round_up((size_t)kt * d, A);             /* (kt, d) */

    for (int32_t i = 0; i < nq; i++)
        for (int32_t j = 0; j < g; j++) {
            const float *src = q + (((size_t)b * p->n_q + i0 + i) * H + (size_t)h * g + j) * d;
            float *dst = Q + ((size_t)i * g + j) * d;
            for (int32_t e = 0; e < d; e++)
                dst[e] = src[e] * p->scale;
        }
    memset(O, 0, (size_t)m * d * sizeof(float));
    for (int32_t r = 0; r < m; r++) {
        mx[r] = -INFINITY;
        ls[r] = 0.0f;
    }
    const int64_t pfirst = (int64_t)p->q_pos0 + i0, plast = pfirst + nq - 1;
    int64_t lo_first, lo_last, hi_tmp;
    kv_attn_visible_range(p, b, pfirst, &lo_first, &hi_tmp);
    kv_attn_visible_range(p, b, plast, &lo_last, &hi_tmp);

    for (int32_t si = 0; si < n_spans; si++) {
        const struct kv_span *s = &spans[si];
        int32_t t0, t1;
        kv_span_token_range(s, lo_first, plast, &t0, &t1); /* union of the rows' ranges */
        for (int32_t t = t0; t < t1; t += kt) {
            int32_t nk = t1 - t < kt ? t1 - t : kt;
            int64_t s_lo = (int64_t)s->pos0 + t, s_hi = s_lo + nk - 1;
            const float *K, *V;
            int ldk;
            if (s->dtype == KV_DTYPE_F32) {
                K = (const float *)kv_span_k_row(s, b, h, t);
                V = (const float *)kv_span_v_row(s, b, h, t);
                ldk = (int)(s->row_stride / sizeof(float));
                if (nk == 1)
                    ldk = d;
            } else {
                pre_dequant(Kt, s, p, b, h, t, nk, 0);
                pre_dequant(Vt, s, p, b, h, t, nk, 1);
                K = Kt;
                V = Vt;
                ldk = d;
            }
            /* S (m, nk) = Q K^T */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, nk, d, 1.0f, Q, d, K, ldk,
                        0.0f, S, kt);
            int full = s_hi <= pfirst && s_lo >= lo_last;
            for (int32_t r = 0; r < m; r++) {
                float *sr = S + (size_t)r * kt;
                if (!full) { /* keys outside the row's [lo, hi] get -inf */
                    int64_t lo, hi;
                    kv_attn_visible_range(p, b, pfirst + r / g, &lo, &hi);
                    int64_t jlo = lo - s_lo, jhi = hi - s_lo + 1; /* visible j in [jlo, jhi) */
                    jlo = jlo < 0 ? 0 : jlo > nk ? nk : jlo;
                    jhi = jhi < jlo ? jlo : jhi > nk ? nk : jhi;
                    for (int64_t j = 0; j < jlo; j++)
                        sr[j] = -INFINITY;
                    for (int64_t j = jhi; j < nk; j++)
                        sr[j] = -INFINITY;
                }
                float bm = row_max(sr, nk);
                if (bm == -INFINITY) { /* this row sees nothing here */
                    memset(sr, 0, (size_t)nk * sizeof(float));
                    continue;
                }
                if (bm > mx[r]) {
                    float corr = expf(mx[r] - bm);
                    mx[r] = bm;
                    ls[r] *= corr;
                    float *orow = O + (size_t)r * d;
                    for (int32_t e = 0; e < d; e++)
                        orow[e] *= corr;
                }
                ls[r] += exp_sub_row(sr, nk, mx[r]);
            }
            /* O (m, d) += P (m, nk) V (nk, d) */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, d, nk, 1.0f, S, kt, V,
                        ldk, 1.0f, O, d);
        }
    }
    for (int32_t i = 0; i < nq; i++)
        for (int32_t j = 0; j < g; j++) {
            int32_t r = i * g + j;
            float *dst = out + (((size_t)b * p->n_q + i0 + i) * H + (size_t)h * g + j) * d;
            float inv = ls[r] > 0.0f ? 1.0f / ls[r] : 0.0f; /* no key: zeros */
            for (int32_t e = 0; e < d; e++)
                dst[e] = O[(size_t)r * d + e] * inv;
        }
}

static void attn_prefill(float *out, const float *q, const struct kv_attn_params *p,
                         const struct kv_span *spans, int32_t n_spans, float *ws,
                         const struct attn_layout *L)
{
    float *scratch = ws + L->qs + L->qsum;
    const int32_t n_tiles = (p->n_q + L->qt - 1) / L->qt;
    const int32_t items = p->batch * p->n_kv_heads * n_tiles;
    /* later query tiles see more keys: deal them out round-robin, heaviest first */
#pragma omp parallel num_threads(p->n_threads)
    {
        float *my = scratch + (size_t)omp_get_thread_num() * L->per_thread;
#pragma omp for schedule(dynamic, 1)
        for (int32_t it = 0; it < items; it++) {
            int32_t tile = n_tiles - 1 - it / (p->batch * p->n_kv_heads);
            int32_t bh = it % (p->batch * p->n_kv_heads);
            int32_t i0 = tile * L->qt;
            int32_t nq = p->n_q - i0 < L->qt ? p->n_q - i0 : L->qt;
            pre_tile(out, q, p, spans, n_spans, L, my, bh / p->n_kv_heads, bh % p->n_kv_heads,
                     i0, nq);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Entry point                                                              */

enum kv_status kv_attn(float *out, const float *q, const struct kv_attn_params *p,
                       const struct kv_span *spans, int32_t n_spans, void *ws, size_t ws_bytes)
{
    enum kv_status st = kv_attn_check(p, spans, n_spans);
    if (st != KV_OK)
        return st;
    if (out == NULL || q == NULL || ws == NULL || ws_bytes < kv_attn_workspace_bytes(p) ||
        ((uintptr_t)ws % 64) != 0)
        return KV_ERR_INVALID;
    struct attn_layout L;
    attn_layout_of(&L, p);
    if (p->n_q == 1)
        attn_decode(out, q, p, spans, n_spans, ws, &L);
    else
        attn_prefill(out, q, p, spans, n_spans, ws, &L);
    return KV_OK;
}
