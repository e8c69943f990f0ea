/*
 * kv_simd.h - small SIMD helpers shared by the kernels (private: only
 * the kernel sources include it).
 *
 * The design decision: these are static inline and exist only when the
 * target has the instructions (#ifdef __AVX__), so each kernel keeps its
 * scalar path buildable and includes this file inside its own SIMD guard.
 */
#ifndef KV_SIMD_H
#define KV_SIMD_H

#ifdef __AVX__
#include <immintrin.h>

/* Sum of the 8 floats of v: (v0+v4) + (v2+v6) + (v1+v5) + (v3+v7). */
static inline float kv_hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
#endif

#endif /* KV_SIMD_H */
