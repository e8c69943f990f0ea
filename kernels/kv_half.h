/*
 * kv_half.h - the 16-bit float element types of the cache: IEEE binary16
 * (f16) and bfloat16 (bf16), their conversions one value at a time (the
 * definition) and a row at a time (run-time dispatched SIMD, bit-identical
 * to the definition).
 *
 * The design decision: rounding is round-to-nearest-even everywhere, and
 * every SIMD path produces exactly the bits of the scalar definition (F16C's
 * VCVTPS2PH does; bf16 is rounded with integer arithmetic, not with
 * AVX512-BF16's VCVTNEPS2BF16, which flushes subnormals to zero). So which
 * CPU stored a cache never changes what is in it, and the kernel's fast
 * paths can be tested against the scalar reference at float tolerance.
 *
 *   f16:  1 sign, 5 exponent, 10 fraction bits; |x| <= 65504, and values
 *         that round beyond it become inf; subnormals below 2^-14 (spacing
 *         2^-24). Relative rounding error <= 2^-11 in the normal range.
 *   bf16: the top 16 bits of an f32 (same range), 8 significant bits:
 *         relative rounding error <= 2^-8.
 * NaN stays NaN (made quiet, the top fraction bits kept); inf stays inf.
 */
#ifndef KV_HALF_H
#define KV_HALF_H

#include <stdint.h>
#include <string.h>

#include "kv_common.h"

/* ------------------------------------------------------------------------ */
/* One value                                                                */

static inline uint32_t kv_f32_bits(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    return x;
}

static inline float kv_bits_f32(uint32_t x)
{
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

/* f32 -> f16, round to nearest even. */
static inline uint16_t kv_f32_to_f16(float f)
{
    const uint32_t x = kv_f32_bits(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7FFFFFFFu;
    if (ax >= 0x7F800000u) /* inf, or NaN made quiet */
        return (uint16_t)(sign | (ax == 0x7F800000u ? 0x7C00u : 0x7E00u | ((ax >> 13) & 0x3FFu)));
    if (ax >= 0x477FF000u) /* rounds to 65520 or beyond: inf */
        return (uint16_t)(sign | 0x7C00u);
    if (ax >= 0x38800000u) { /* normal: rebias the exponent, round 13 bits away */
        const uint32_t r = ax - 0x38000000u;
        return (uint16_t)(sign | ((r + 0xFFFu + ((r >> 13) & 1u)) >> 13));
    }
    const uint32_t e = ax >> 23; /* subnormal f16 (or zero): units of 2^-24 */
    if (e < 102)                 /* below 2^-25: rounds to zero */
        return (uint16_t)sign;
    const uint32_t m = (ax & 0x7FFFFFu) | 0x800000u, shift = 126 - e; /* 14 .. 24 */
    const uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    return (uint16_t)(sign | (q + (rem > half || (rem == half && (q & 1u)))));
}

/* f16 -> f32, exact (a signalling NaN comes back quiet, as F16C does). */
static inline float kv_f16_to_f32(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    if (e == 0x1F)
        return kv_bits_f32(sign | 0x7F800000u | (m << 13) | (m != 0 ? 0x400000u : 0u));
    if (e == 0) /* zero or subnormal: m * 2^-24, exact in float */
        return kv_bits_f32(sign | kv_f32_bits((float)m * 0x1p-24f));
    return kv_bits_f32(sign | ((e + 112) << 23) | (m << 13));
}

/* f32 -> bf16, round to nearest even (subnormals kept). */
static inline uint16_t kv_f32_to_bf16(float f)
{
    const uint32_t x = kv_f32_bits(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) /* NaN: quiet, top fraction bits kept */
        return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

/* bf16 -> f32, exact. */
static inline float kv_bf16_to_f32(uint16_t h) { return kv_bits_f32((uint32_t)h << 16); }

/* ------------------------------------------------------------------------ */
/* Rows (run-time dispatched: kv_isa())                                     */

/* dst (n) <- src (n) in t (KV_DTYPE_F16 or KV_DTYPE_BF16), and back. */
void kv_half_from_f32(uint16_t *dst, const float *src, int32_t n, enum kv_dtype t);
void kv_half_to_f32(float *dst, const uint16_t *src, int32_t n, enum kv_dtype t);

#endif /* KV_HALF_H */
