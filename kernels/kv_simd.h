/*
 * kv_simd.h - small SIMD helpers shared by the kernels (private: only
 * the kernel sources include it).
 *
 * The design decision: most kernels are compiled for one ISA and use these
 * inside their own #ifdef __AVX2__ guard, so the scalar path stays
 * buildable. Kernels chosen at run time (kv_isa(): the 16-bit float rows)
 * are compiled in every x86 build, each function with a target attribute
 * (KV_TARGET_AVX2, KV_TARGET_AVX512, KV_TARGET_BF16); so on x86 the helpers
 * exist in every build and carry the attribute of the ISA they need (an
 * always-inline helper inlines into any function whose ISA includes it).
 */
#ifndef KV_SIMD_H
#define KV_SIMD_H

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define KV_X86 1
#include <immintrin.h>

#define KV_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define KV_TARGET_AVX512 \
    __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")))
#define KV_TARGET_BF16 \
    __attribute__((target("avx512bf16,avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")))

/* Sum of the 8 floats of v: (v0+v4) + (v2+v6) + (v1+v5) + (v3+v7). */
static inline __attribute__((always_inline)) KV_TARGET_AVX2 float kv_hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* v, pinned to a register: the compiler may no longer re-read it from
 * memory as an instruction's operand. Where a loop reuses a loaded vector
 * across rows, that re-read is what it would otherwise do, and the loads
 * then bound the loop (two vector loads a cycle) before the FMAs do. */
static inline __attribute__((always_inline)) KV_TARGET_AVX512 __m512 kv_in_reg(__m512 v)
{
    __asm__("" : "+v"(v));
    return v;
}

#endif

#endif /* KV_SIMD_H */
