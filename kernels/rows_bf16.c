/*
 * rows_bf16.c - decode row kernels for bf16 keys and values (kv_rows.h):
 * the kernels of rows_half.h with a bf16 row widened in registers (a bf16
 * is the top half of an f32: zero-extend, shift left 16), and, where the CPU
 * has AVX512-BF16, scores by VDPBF16PS, chosen at run time (kv_isa()).
 *
 * The design decision for the BF16 dot products: VDPBF16PS multiplies bf16
 * pairs, so the query must be bf16 too, and one bf16 copy of it would cost
 * 2^-9 of every score. The query is split instead into three bf16 parts,
 * q = hi + mid + lo (each the bf16 rounding of what the previous ones left;
 * the remainder is below 2^-24 |q|, and every product of two bf16 is exact
 * in f32), and each chunk of 32 key elements takes three VDPBF16PS with no
 * conversion: the scores come out at f32 accuracy. Used for one head per kv
 * head (MHA), where a key chunk feeds one head; a GQA group converts each
 * chunk once for all its heads instead (rows_half.h), which is cheaper than
 * three dot products per head. The values always take the converting
 * kernels: the weights would need the same split.
 */
#include "kv_rows.h"

#include "kv_half.h"

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

#include "rows_half.h"

#ifdef KV_X86
/* ------------------------------------------------------------------------ */
/* AVX512-BF16 scores (MHA, d a multiple of 32)                             */

/*
 * J->qx (per head, per 32-element chunk: 32 bf16 of hi, then mid, then lo)
 * <- the three-part split of the scaled queries. Scalar, once per bind:
 * g * d elements, against the T * g * d of the scores.
 */
static void bf16_split_queries(const struct kv_dec_job *J)
{
    uint16_t *out = (uint16_t *)J->qx;
    for (int32_t i = 0; i < J->g; i++) {
        const float *q = J->qs + (size_t)i * J->d;
        for (int32_t c = 0; c < J->d; c += 32) {
            uint16_t *o = out + ((size_t)i * J->d + (size_t)c) * 3;
            for (int32_t e = 0; e < 32; e++) {
                float r = q[c + e]; /* each remainder is exact in f32 */
                for (int part = 0; part < 3; part++) {
                    const uint16_t b = kv_f32_to_bf16(r);
                    o[part * 32 + e] = b;
                    r -= kv_bf16_to_f32(b);
                }
            }
        }
    }
}

/* o[0..nr) <- split q . rows r, r + st, ... (bf16, d a multiple of 32) */
KV_INLINE KV_TARGET_BF16 void bf16_rows_dp(float *o, const int nr, const uint16_t *qx, const char *r, size_t st,
                  int32_t d)
{
    __m512 a[8];
    for (int u = 0; u < nr; u++)
        a[u] = _mm512_setzero_ps();
    for (int32_t e = 0; e < d; e += 32) {
        const uint16_t *qc = qx + (size_t)e * 3;
        const __m512bh hi = (__m512bh)_mm512_loadu_si512(qc);
        const __m512bh mid = (__m512bh)_mm512_loadu_si512(qc + 32);
        const __m512bh lo = (__m512bh)_mm512_loadu_si512(qc + 64);
        for (int u = 0; u < nr; u++) {
            const __m512bh k =
                (__m512bh)_mm512_loadu_si512((const uint16_t *)(r + (size_t)u * st) + e);
            a[u] = _mm512_dpbf16_ps(a[u], lo, k);
            a[u] = _mm512_dpbf16_ps(a[u], mid, k);
            a[u] = _mm512_dpbf16_ps(a[u], hi, k);
        }
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

KV_TARGET_BF16 static void bf16_sc_dp(float *sc, const struct kv_dec_job *J,
                                      const struct kv_rows_side *s, const char *k,
                                      const char *kqp, int32_t nb)
{
    (void)kqp;
    const size_t st = s->stride;
    for (int32_t i = 0; i < J->g; i++) {
        const uint16_t *qx = (const uint16_t *)J->qx + (size_t)i * J->d * 3;
        float *o = sc + (size_t)i * DEC_KB;
        int32_t j = 0;
        for (; j + 8 <= nb; j += 8)
            bf16_rows_dp(o + j, 8, qx, k + j * st, st, J->d);
        for (; j < nb; j++)
            bf16_rows_dp(o + j, 1, qx, k + j * st, st, J->d);
    }
}
#endif /* KV_X86 */

/* ------------------------------------------------------------------------ */
/* Binding                                                                  */

void kv_rows_bind_bf16(struct kv_dec_job *J, int is_v)
{
    bf16_bind_convert(J, is_v);
#ifdef KV_X86
    if (!is_v && J->g == 1 && J->d % 32 == 0 && kv_isa() >= KV_ISA_AVX512_BF16) {
        bf16_split_queries(J);
        J->scores = bf16_sc_dp;
    }
#endif
}
