/*
 * kv_half.c - rows of f16 and bf16 to and from f32 (kv_half.h), chosen at
 * run time from kv_isa(): AVX-512, AVX2 + F16C, or the scalar definition.
 *
 * The design decision: every path gives the scalar definition's bits. f16
 * uses F16C / AVX-512 VCVTPS2PH with round-to-nearest-even (its NaN and
 * subnormal results are the definition's); bf16 is rounded with integer
 * adds (x + 0x7FFF + lsb) >> 16 and NaNs quieted by a blend, because
 * VCVTNEPS2BF16 flushes subnormals. Stores happen once per token on append,
 * loads in prefill tiles and the reference; the decode kernel converts in
 * registers instead (rows_float.h).
 */
#include "kv_half.h"

#include "kv_simd.h"

/* ------------------------------------------------------------------------ */
/* Scalar                                                                   */

static void f16_store_scalar(uint16_t *dst, const float *src, int32_t n)
{
    for (int32_t i = 0; i < n; i++)
        dst[i] = kv_f32_to_f16(src[i]);
}

static void bf16_store_scalar(uint16_t *dst, const float *src, int32_t n)
{
    for (int32_t i = 0; i < n; i++)
        dst[i] = kv_f32_to_bf16(src[i]);
}

static void f16_load_scalar(float *dst, const uint16_t *src, int32_t n)
{
    for (int32_t i = 0; i < n; i++)
        dst[i] = kv_f16_to_f32(src[i]);
}

static void bf16_load_scalar(float *dst, const uint16_t *src, int32_t n)
{
    for (int32_t i = 0; i < n; i++)
        dst[i] = kv_bf16_to_f32(src[i]);
}

#ifdef KV_X86
/* ------------------------------------------------------------------------ */
/* AVX2 + F16C                                                              */

#define ROUND_NE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

KV_TARGET_AVX2 static void f16_store_avx2(uint16_t *dst, const float *src, int32_t n)
{
    int32_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), ROUND_NE));
    f16_store_scalar(dst + i, src + i, n - i);
}

KV_TARGET_AVX2 static void f16_load_avx2(float *dst, const uint16_t *src, int32_t n)
{
    int32_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    f16_load_scalar(dst + i, src + i, n - i);
}

/* 8 floats -> their bf16 bits in the low 16 bits of each 32-bit lane */
KV_TARGET_AVX2 static inline __m256i bf16_round8(__m256 x)
{
    const __m256i u = _mm256_castps_si256(x);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i r = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), lsb), 16);
    const __m256i q = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    return _mm256_blendv_epi8(r, q, _mm256_castps_si256(nan));
}

KV_TARGET_AVX2 static void bf16_store_avx2(uint16_t *dst, const float *src, int32_t n)
{
    int32_t i = 0;
    for (; i + 16 <= n; i += 16) {
        /* packus works per 128-bit lane: (a0 b0 a1 b1) -> permute to (a0 a1 b0 b1) */
        __m256i p = _mm256_packus_epi32(bf16_round8(_mm256_loadu_ps(src + i)),
                                        bf16_round8(_mm256_loadu_ps(src + i + 8)));
        _mm256_storeu_si256((__m256i *)(dst + i), _mm256_permute4x64_epi64(p, 0xD8));
    }
    bf16_store_scalar(dst + i, src + i, n - i);
}

KV_TARGET_AVX2 static void bf16_load_avx2(float *dst, const uint16_t *src, int32_t n)
{
    int32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + i)));
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    }
    bf16_load_scalar(dst + i, src + i, n - i);
}

/* ------------------------------------------------------------------------ */
/* AVX-512                                                                  */

KV_TARGET_AVX512 static void f16_store_512(uint16_t *dst, const float *src, int32_t n)
{
    int32_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(dst + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(src + i), ROUND_NE));
    f16_store_avx2(dst + i, src + i, n - i);
}

KV_TARGET_AVX512 static void f16_load_512(float *dst, const uint16_t *src, int32_t n)
{
    int32_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i,
                         _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + i))));
    f16_load_avx2(dst + i, src + i, n - i);
}

KV_TARGET_AVX512 static void bf16_store_512(uint16_t *dst, const float *src, int32_t n)
{
    const __m512i bias = _mm512_set1_epi32(0x7FFF), one = _mm512_set1_epi32(1),
                  quiet = _mm512_set1_epi32(0x40);
    int32_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 x = _mm512_loadu_ps(src + i);
        const __m512i u = _mm512_castps_si512(x), hi = _mm512_srli_epi32(u, 16);
        __m512i r = _mm512_srli_epi32(
            _mm512_add_epi32(_mm512_add_epi32(u, bias), _mm512_and_si512(hi, one)), 16);
        const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
        r = _mm512_mask_or_epi32(r, nan, hi, quiet);
        _mm256_storeu_si256((__m256i *)(dst + i), _mm512_cvtepi32_epi16(r));
    }
    bf16_store_avx2(dst + i, src + i, n - i);
}

KV_TARGET_AVX512 static void bf16_load_512(float *dst, const uint16_t *src, int32_t n)
{
    int32_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(src + i)));
        _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
    }
    bf16_load_avx2(dst + i, src + i, n - i);
}
#endif /* KV_X86 */

/* ------------------------------------------------------------------------ */
/* Dispatch                                                                 */

void kv_half_from_f32(uint16_t *dst, const float *src, int32_t n, enum kv_dtype t)
{
    KV_ASSERT(t == KV_DTYPE_F16 || t == KV_DTYPE_BF16);
    const int bf = t == KV_DTYPE_BF16;
#ifdef KV_X86
    const enum kv_isa isa = kv_isa();
    if (isa >= KV_ISA_AVX512) {
        (bf ? bf16_store_512 : f16_store_512)(dst, src, n);
        return;
    }
    if (isa >= KV_ISA_AVX2) {
        (bf ? bf16_store_avx2 : f16_store_avx2)(dst, src, n);
        return;
    }
#endif
    (bf ? bf16_store_scalar : f16_store_scalar)(dst, src, n);
}

void kv_half_to_f32(float *dst, const uint16_t *src, int32_t n, enum kv_dtype t)
{
    KV_ASSERT(t == KV_DTYPE_F16 || t == KV_DTYPE_BF16);
    const int bf = t == KV_DTYPE_BF16;
#ifdef KV_X86
    const enum kv_isa isa = kv_isa();
    if (isa >= KV_ISA_AVX512) {
        (bf ? bf16_load_512 : f16_load_512)(dst, src, n);
        return;
    }
    if (isa >= KV_ISA_AVX2) {
        (bf ? bf16_load_avx2 : f16_load_avx2)(dst, src, n);
        return;
    }
#endif
    (bf ? bf16_load_scalar : f16_load_scalar)(dst, src, n);
}
