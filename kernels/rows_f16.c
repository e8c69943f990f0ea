/*
 * rows_f16.c - decode row kernels for f16 keys and values (kv_rows.h): the
 * kernels of rows_float.h with an f16 row read through F16C / AVX-512
 * VCVTPH2PS (exact: every f16 is an f32), chosen at run time (kv_isa()).
 *
 * The design decision: f16 decode is bound by the rows' bytes like f32, at
 * half of them; the conversion is one instruction per 8 or 16 elements and
 * is shared by the heads of a GQA group, so the arithmetic stays below the
 * memory time even from the L3.
 */
#include "kv_rows.h"

#include "kv_half.h"

#define HALF_T uint16_t
#define HALF_PFX f16

static inline float half_scalar(uint16_t h) { return kv_f16_to_f32(h); }

#ifdef KV_X86
KV_INLINE2 __m256 half_ld8(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

KV_INLINE512 __m512 half_ld16(const uint16_t *p)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}
#endif

#include "rows_float.h"

void kv_rows_bind_f16(struct kv_dec_job *J, int is_v) { f16_bind_convert(J, is_v); }
