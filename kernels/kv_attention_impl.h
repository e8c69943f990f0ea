/*
 * kv_attention_impl.h - private helpers shared by the attention kernel's
 * files, its argument checks and its scalar reference twin: where a row
 * lives, which keys a query sees, and (for the fast kernel's three files)
 * its tiles, its workspace layout and the softmax's row helpers.
 *
 * The one idea: span positions are contiguous (token t is at pos0 + t), and
 * a query's visible keys are at most two position intervals (the sinks and
 * the window, kv_mask_ranges), so the keys of a span that a query sees are at
 * most two token intervals. Masking is interval arithmetic, never a per-key
 * test (the reference alone tests key by key, kv_attn_key_visible).
 */
#ifndef KV_ATTENTION_IMPL_H
#define KV_ATTENTION_IMPL_H

#include "kv_attention.h"
#include "kv_quant.h"
#include "kv_simd.h"

#include <math.h>

/* ------------------------------------------------------------------------ */
/* Addresses                                                                */

/* Byte offsets of (sequence b, kv head h) within a descriptor's rows and
 * within its qparams. */
static inline size_t kv_tensor_off(const struct kv_tensor *x, int32_t b, int32_t h)
{
    return (size_t)b * x->seq_stride + (size_t)h * x->head_stride;
}

static inline size_t kv_tensor_qp_off(const struct kv_tensor *x, int32_t b, int32_t h)
{
    return (size_t)b * x->qp_seq_stride + (size_t)h * x->qp_head_stride;
}

/* Descriptor x as sequence b reads it: with a page table per sequence
 * (table_stride > 0) its pages and qp_pages start at sequence b's table, so
 * the helpers below find a page by t / P alone; otherwise x itself. Callers
 * that address the rows of sequence b go through this first. */
static inline struct kv_tensor kv_tensor_of_seq(const struct kv_tensor *x, int32_t b)
{
    struct kv_tensor y = *x;
    const size_t skip = (size_t)b * x->table_stride;
    if (skip != 0 && y.pages != NULL)
        y.pages += skip;
    if (skip != 0 && y.qp_pages != NULL)
        y.qp_pages += skip;
    return y;
}

/* Row t of descriptor x in a span of `page` tokens per page (0: contiguous),
 * off = kv_tensor_off(x, b, h). */
static inline const char *kv_tensor_row_at(const struct kv_tensor *x, int32_t page, size_t off,
                                           int32_t t)
{
    if (page == 0)
        return (const char *)x->data + off + (size_t)t * x->row_stride;
    return (const char *)x->pages[t / page] + off + (size_t)(t % page) * x->row_stride;
}

/* The qparams of row t (per token: its head_dim/group pairs; per channel:
 * the head_dim pairs of its block of `group` tokens), qoff =
 * kv_tensor_qp_off(x, b, h). */
static inline const char *kv_tensor_qp_at(const struct kv_tensor *x, int32_t page, size_t qoff,
                                          int32_t t)
{
    int32_t i = page == 0 ? t : t % page;
    if (x->axis == KV_QAXIS_CHANNEL)
        i /= x->group;
    const char *base = page == 0 ? (const char *)x->qp : (const char *)x->qp_pages[t / page];
    return base + qoff + (size_t)i * x->qp_row_stride;
}

/* Rows t .. t+run-1 with run <= n that lie in one page (consecutive in
 * memory, row_stride apart): all n for a contiguous span. */
static inline int32_t kv_span_run(const struct kv_span *s, int32_t t, int32_t n)
{
    if (s->page_tokens == 0)
        return n;
    int32_t left = s->page_tokens - t % s->page_tokens;
    return left < n ? left : n;
}

/* dst (d) <- row t of x as floats, either quantization axis, through the
 * dtype's traits (the generic reader: reference, prefill tiles, and decode
 * sides without row kernels of their own). */
static inline void kv_tensor_row_float(float *dst, const struct kv_tensor *x, int32_t page,
                                       size_t off, size_t qoff, int32_t t, int32_t d)
{
    const struct kv_type_traits *tr = &kv_type_traits[x->dtype];
    const char *row = kv_tensor_row_at(x, page, off, t);
    if (!tr->has_qparams) {
        tr->to_float_row(dst, row, NULL, d, 1);
        return;
    }
    const struct kv_qparams *qp = (const struct kv_qparams *)kv_tensor_qp_at(x, page, qoff, t);
    if (x->axis == KV_QAXIS_TOKEN)
        tr->to_float_row(dst, row, qp, d, x->group);
    else
        kv_dequantize_row_channel(dst, row, qp, x->dtype, d);
}

/* ------------------------------------------------------------------------ */
/* Visibility                                                               */

/*
 * Visible key positions of queries at positions p0 .. p1 (p0 <= p1) of
 * sequence b, united: at most two disjoint intervals [lo[i], hi[i]], in
 * ascending order; returns how many (0, 1 or 2). With p0 == p1 that is
 * exactly one query's visible set (the mask of kv_attention.h): the sinks
 * [pad, n_sink) below the window (pad, p0 - window], ..., p1].
 */
static inline int kv_mask_ranges_of(const struct kv_mask *m, int32_t b, int64_t p0, int64_t p1,
                                    int64_t lo[2], int64_t hi[2])
{
    const int64_t pad = m->pad != NULL ? m->pad[b] : 0;
    int64_t wlo = pad;
    if (m->window > 0 && p0 - m->window + 1 > wlo)
        wlo = p0 - m->window + 1;
    int n = 0;
    if (wlo > pad && m->n_sink > 0) {
        int64_t shi = m->n_sink - 1 < p1 ? m->n_sink - 1 : p1; /* last sink */
        if (shi >= pad) {
            if (shi + 1 >= wlo) { /* the sinks reach the window: one interval */
                wlo = pad;
            } else {
                lo[0] = pad;
                hi[0] = shi;
                n = 1;
            }
        }
    }
    if (wlo <= p1) {
        lo[n] = wlo;
        hi[n] = p1;
        n++;
    }
    return n;
}

static inline int kv_mask_ranges(const struct kv_mask *m, int32_t b, int64_t pos, int64_t lo[2],
                                 int64_t hi[2])
{
    return kv_mask_ranges_of(m, b, pos, pos, lo, hi);
}

/* 1 when every key of positions [s_lo, s_hi] is visible to every query at
 * positions p0 .. p1 of sequence b (a prefill tile that needs no masking). */
static inline int kv_mask_block_full(const struct kv_mask *m, int32_t b, int64_t p0, int64_t p1,
                                     int64_t s_lo, int64_t s_hi)
{
    const int64_t pad = m->pad != NULL ? m->pad[b] : 0;
    return s_hi <= p0 && s_lo >= pad &&
           (m->window <= 0 || s_lo > p1 - m->window || s_hi < m->n_sink);
}

/* Tokens [*t0, *t1) of span s whose positions lie in [lo, hi]. */
static inline void kv_span_token_range(const struct kv_span *s, int64_t lo, int64_t hi,
                                       int32_t *t0, int32_t *t1)
{
    int64_t a = lo - s->pos0, e = hi - s->pos0 + 1;
    if (a < 0)
        a = 0;
    if (e > s->n_tokens)
        e = s->n_tokens;
    if (e < a)
        e = a;
    *t0 = (int32_t)a;
    *t1 = (int32_t)e;
}

/* ------------------------------------------------------------------------ */
/* The fast kernel's shared pieces                                          */

/*
 * What kv_attention.c (entry point, workspace), kv_attn_decode.c and
 * kv_attn_prefill.c share: the tile sizes, the one layout that both sizes
 * the workspace and cuts it up, and the softmax's row helpers. The helpers
 * are static inline here so each shape's hot loops compile them in, as
 * when the kernel was one file.
 */

/* Prefill tiles. Measured (512 queries, T 2048, 2 threads): 256 x 512 ran
 * 10-20% faster than 128 x 256 (half as many GEMM calls, each with more
 * work per call), while S (256 x 512 floats, 512 KiB) still fits in L2.
 * -DPRE_QROWS=... -DPRE_KT=... rebuilds with other sizes to re-measure. */
#ifndef PRE_QROWS
#define PRE_QROWS 256 /* target rows (queries x group heads) per tile */
#endif
#ifndef PRE_KT
#define PRE_KT 512 /* keys per tile */
#endif
#define WS_ALIGN_FLOATS 16 /* 64 bytes */

static __attribute__((unused)) size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* Sizes shared by workspace sizing and the kernel (kv_attention.c fills it). */
struct kv_attn_layout {
    int32_t g, splits;
    size_t slot;        /* floats per partial state: acc (d), m, l */
    size_t qs;          /* floats of the scaled queries (decode) */
    size_t parts;       /* floats of all partial states (decode) */
    size_t per_thread;  /* floats of scratch per thread */
    int32_t qt, m_rows, kt; /* prefill: queries, rows and keys per tile */
};

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

#ifdef __AVX512F__
/* the same, 16 lanes */
static inline __m512 exp16_neg(__m512 x)
{
    const __m512 lo = _mm512_set1_ps(-87.3f);
    __mmask16 keep = _mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ);
    x = _mm512_max_ps(x, lo);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 y = _mm512_set1_ps(1.9875691500e-4f);
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.3981999507e-3f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(8.3334519073e-3f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.1665795894e-2f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.6666665459e-1f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.0000001201e-1f));
    y = _mm512_fmadd_ps(y, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    y = _mm512_mul_ps(y, _mm512_castsi512_ps(e));
    return _mm512_maskz_mov_ps(keep, y);
}
#endif

#endif

/* x[j] <- exp(x[j] - m) for j < n (x[j] <= m), returns the sum; -inf
 * entries give exactly 0. Static, not inline, as in the one-file kernel
 * (the compiler keeps it out of line where it did; unused: the files that
 * include this header without calling it). */
static __attribute__((unused)) float exp_sub_row(float *x, int32_t n, float m)
{
    float sum = 0.0f;
    int32_t j = 0;
#ifdef __AVX2__
    __m256 vm = _mm256_set1_ps(m), vs = _mm256_setzero_ps();
#ifdef __AVX512F__
    __m512 wm = _mm512_set1_ps(m), ws = _mm512_setzero_ps();
    for (; j + 16 <= n; j += 16) {
        __m512 e = exp16_neg(_mm512_sub_ps(_mm512_loadu_ps(x + j), wm));
        _mm512_storeu_ps(x + j, e);
        ws = _mm512_add_ps(ws, e);
    }
    vs = _mm256_add_ps(_mm512_castps512_ps256(ws),
                       _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(ws), 1)));
#endif
    for (; j + 8 <= n; j += 8) {
        __m256 e = exp8_neg(_mm256_sub_ps(_mm256_loadu_ps(x + j), vm));
        _mm256_storeu_ps(x + j, e);
        vs = _mm256_add_ps(vs, e);
    }
    sum = kv_hsum8(vs);
#endif
    for (; j < n; j++) {
        x[j] = expf(x[j] - m);
        sum += x[j];
    }
    return sum;
}

static __attribute__((unused)) float row_max(const float *x, int32_t n)
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

/* The two shapes, once kv_attn has checked the call: out <- the attention
 * of q over view, with scratch from ws cut up as L says. */
void kv_attn_decode(float *out, const float *q, const struct kv_attn_params *p,
                    const struct kv_view *view, float *ws, const struct kv_attn_layout *L);
void kv_attn_prefill(float *out, const float *q, const struct kv_attn_params *p,
                     const struct kv_view *view, float *ws, const struct kv_attn_layout *L);
/* n decode calls as one job of the team (kv_attn_many), each call's
 * queries and partial states from ws in call order, then one scratch of
 * the largest per_thread for every call. */
void kv_attn_decode_many(float *const *out, const float *const *q, const struct kv_attn_params *p,
                         const struct kv_view *view, int32_t n, float *ws,
                         const struct kv_attn_layout *L);

#endif /* KV_ATTENTION_IMPL_H */
