/*
 * rows_bf16.c - decode row kernels for bf16 keys and values (kv_rows.h):
 * the kernels of rows_float.h with a bf16 row widened in registers (a bf16
 * is the top half of an f32: zero-extend, shift left 16), and, on AVX-512
 * with head_dim a multiple of 32, kernels that widen 32 elements a load
 * into their even and odd halves (below), chosen at run time (kv_isa()).
 *
 * The scores do not use AVX512-BF16's VDPBF16PS: it multiplies bf16 pairs,
 * so the query would have to be split into three bf16 parts to keep f32
 * accuracy (three dot products per 32 key elements). Measured on an Intel
 * Xeon with AVX512-BF16, hot, T 8192, bf16 over f16 time: 1.21-1.25x with
 * them, 0.97-1.25x with the even/odd widening, which the GQA shapes use too
 * (0.93-0.94x at head_dim 128, 32/8 heads, against 1.00-1.04x before).
 */
#include "kv_rows.h"

#include "kv_half.h"

#define HALF_T uint16_t
#define HALF_PFX bf16

static inline float half_scalar(uint16_t h) { return kv_bf16_to_f32(h); }

#ifdef KV_X86
KV_INLINE2 __m256 half_ld8(const uint16_t *p)
{
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

KV_INLINE512 __m512 half_ld16(const uint16_t *p)
{
    __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
#endif

#include "rows_float.h"

#ifdef KV_X86
/* ------------------------------------------------------------------------ */
/* AVX-512, 32 elements a load, even and odd apart (d a multiple of 32)     */

/*
 * The design decision: 32 bf16 loaded as 16 32-bit lanes hold element 2k
 * in the low half of lane k and 2k+1 in the high half, so a shift left by
 * 16 gives the even elements as f32 and a mask of the high halves the odd
 * ones: two single-cycle integer ops per 32 elements, where widening 16 at
 * a time (half_ld16) takes a cross-lane zero-extension and a shift per 16.
 * A dot product does not care about order, so the queries are stored
 * evens-then-odds per 32-element chunk (bf16_eo_queries, once per bind) and
 * the keys are used as loaded. The values' accumulators are permuted into
 * that order once per call and back at its end, which 64 rows amortise.
 */
KV_INLINE512 void bf16_eo_ld(const uint16_t *p, __m512 *even, __m512 *odd)
{
    const __m512i x = _mm512_loadu_si512(p);
    *even = _mm512_castsi512_ps(_mm512_slli_epi32(x, 16));
    *odd = _mm512_castsi512_ps(_mm512_and_si512(x, _mm512_set1_epi32((int)0xffff0000u)));
}

/* J->qx (g, d) <- the scaled queries, per 32-element chunk its 16 even
 * elements then its 16 odd ones */
static void bf16_eo_queries(const struct kv_dec_job *J)
{
    for (int32_t i = 0; i < J->g; i++) {
        const float *q = J->qs + (size_t)i * J->d;
        float *o = J->qx + (size_t)i * J->d;
        for (int32_t c = 0; c < J->d; c += 32)
            for (int32_t k = 0; k < 16; k++) {
                o[c + k] = q[c + 2 * k];
                o[c + 16 + k] = q[c + 2 * k + 1];
            }
    }
}

/* sc (g, DEC_KB) for rows j0 .. j0 + nr - 1 (nr = 16/g, or 1 for a tail
 * row): each row's chunk loaded and split once for all g heads */
KV_INLINE512 void bf16_eo_rows(float *sc, const int g, const int nr, const float *qx,
                               const char *r, size_t st, int32_t d)
{
    __m512 a[16];
    for (int u = 0; u < g * nr; u++)
        a[u] = _mm512_setzero_ps();
    for (int32_t e = 0; e < d; e += 32) {
        for (int rr = 0; rr < nr; rr++) {
            __m512 ke, ko;
            bf16_eo_ld((const uint16_t *)(r + (size_t)rr * st) + e, &ke, &ko);
            for (int h = 0; h < g; h++) {
                const float *q = qx + (size_t)h * d + e;
                a[h * nr + rr] = _mm512_fmadd_ps(_mm512_loadu_ps(q), ke, a[h * nr + rr]);
                a[h * nr + rr] = _mm512_fmadd_ps(_mm512_loadu_ps(q + 16), ko, a[h * nr + rr]);
            }
        }
    }
    if (nr * g == 16) {
        kv_store_heads(sc, g, a);
    } else {
        for (int h = 0; h < g; h++)
            for (int rr = 0; rr < nr; rr++)
                sc[(size_t)h * DEC_KB + rr] = _mm512_reduce_add_ps(a[h * nr + rr]);
    }
}

KV_SC_HEADS(bf16_sc_eo1, KV_TARGET_AVX512, 16, bf16_eo_rows, qx, 1)
KV_SC_HEADS(bf16_sc_eo2, KV_TARGET_AVX512, 16, bf16_eo_rows, qx, 2)
KV_SC_HEADS(bf16_sc_eo4, KV_TARGET_AVX512, 16, bf16_eo_rows, qx, 4)
KV_SC_HEADS(bf16_sc_eo8, KV_TARGET_AVX512, 16, bf16_eo_rows, qx, 8)

/* acc_h (d) += sum_j pr[h][j] * v_j for the g heads, ch chunks of 32
 * elements a pass (2 g ch accumulators, at most 16), each row's chunk
 * loaded and split once for all heads */
KV_INLINE512 void bf16_eo_pv(float *acc, size_t acc_stride, const float *pr, const int g,
                             const int ch, const char *v0, const struct kv_rows_side *s,
                             int32_t nb, int32_t d)
{
    const size_t st = s->stride;
    /* natural order <-> evens then odds of a 32-element chunk */
    const __m512i ie = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i io = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    const __m512i il = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i ih = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
    for (int32_t e0 = 0; e0 < d; e0 += 32 * ch) {
        __m512 ae[8], ao[8];
        for (int h = 0; h < g; h++)
            for (int c = 0; c < ch; c++) {
                const float *a = acc + (size_t)h * acc_stride + e0 + 32 * c;
                const __m512 n0 = _mm512_loadu_ps(a), n1 = _mm512_loadu_ps(a + 16);
                ae[h * ch + c] = _mm512_permutex2var_ps(n0, ie, n1);
                ao[h * ch + c] = _mm512_permutex2var_ps(n0, io, n1);
            }
        for (int32_t j = 0; j < nb; j++) {
            __m512 ve[4], vo[4];
            if (e0 == 0)
                kv_rows_ahead(s, v0 + (size_t)j * st, 1);
            for (int c = 0; c < ch; c++)
                bf16_eo_ld((const uint16_t *)(v0 + (size_t)j * st) + e0 + 32 * c, &ve[c], &vo[c]);
            for (int h = 0; h < g; h++) {
                const __m512 p = _mm512_set1_ps(pr[(size_t)h * DEC_KB + j]);
                for (int c = 0; c < ch; c++) {
                    ae[h * ch + c] = _mm512_fmadd_ps(p, ve[c], ae[h * ch + c]);
                    ao[h * ch + c] = _mm512_fmadd_ps(p, vo[c], ao[h * ch + c]);
                }
            }
        }
        for (int h = 0; h < g; h++)
            for (int c = 0; c < ch; c++) {
                float *a = acc + (size_t)h * acc_stride + e0 + 32 * c;
                _mm512_storeu_ps(a, _mm512_permutex2var_ps(ae[h * ch + c], il, ao[h * ch + c]));
                _mm512_storeu_ps(a + 16,
                                 _mm512_permutex2var_ps(ae[h * ch + c], ih, ao[h * ch + c]));
            }
    }
}

/* chunks a pass for g heads at head_dim d: as many as 8 accumulator pairs
 * hold (ch <= 8/g, at most 4) and d divides into */
static int bf16_eo_ch(int32_t g, int32_t d)
{
    int ch = g == 1 ? 4 : g == 2 ? 4 : g == 4 ? 2 : 1;
    while (ch > 1 && d % (32 * ch) != 0)
        ch /= 2;
    return ch;
}

#define BF16_PV_EO(G, CH)                                                                    \
    KV_TARGET_AVX512 static void bf16_pv_eo##G##_##CH(                                       \
        float *acc, size_t acc_stride, float *msum, float *w, const float *pr,               \
        const struct kv_dec_job *J, const struct kv_rows_side *s, const char *v0,            \
        const char *vqp, int32_t nb)                                                         \
    {                                                                                        \
        (void)msum;                                                                          \
        (void)w;                                                                             \
        (void)vqp;                                                                           \
        bf16_eo_pv(acc, acc_stride, pr, G, CH, v0, s, nb, J->d);                             \
    }
BF16_PV_EO(1, 1)
BF16_PV_EO(1, 2)
BF16_PV_EO(1, 4)
BF16_PV_EO(2, 1)
BF16_PV_EO(2, 2)
BF16_PV_EO(2, 4)
BF16_PV_EO(4, 1)
BF16_PV_EO(4, 2)
BF16_PV_EO(8, 1)
#undef BF16_PV_EO

static kv_rows_pv_fn bf16_pv_eo(int32_t g, int32_t d)
{
    const int ch = bf16_eo_ch(g, d);
    switch (g * 10 + ch) {
    case 11: return bf16_pv_eo1_1;
    case 12: return bf16_pv_eo1_2;
    case 14: return bf16_pv_eo1_4;
    case 21: return bf16_pv_eo2_1;
    case 22: return bf16_pv_eo2_2;
    case 24: return bf16_pv_eo2_4;
    case 41: return bf16_pv_eo4_1;
    case 42: return bf16_pv_eo4_2;
    default: return bf16_pv_eo8_1;
    }
}
#endif /* KV_X86 */

/* ------------------------------------------------------------------------ */
/* Binding                                                                  */

void kv_rows_bind_bf16(struct kv_dec_job *J, int is_v)
{
    bf16_bind_convert(J, is_v);
#ifdef KV_X86
    const int32_t g = J->g, d = J->d;
    if (kv_isa() < KV_ISA_AVX512 || d % 32 != 0 || !(g == 1 || g == 2 || g == 4 || g == 8))
        return;
    if (is_v) {
        J->pv = bf16_pv_eo(g, d);
    } else {
        bf16_eo_queries(J);
        J->scores = g == 1 ? bf16_sc_eo1 : g == 2 ? bf16_sc_eo2 : g == 4 ? bf16_sc_eo4 : bf16_sc_eo8;
    }
#endif
}
