/*
 * rows_f32.c - decode row kernels for f32 keys and values (kv_rows.h): the
 * kernels of rows_float.h, whose rows need no conversion. The same kernels
 * read the f32 tiles that quantized and generic sides are dequantized into.
 */
#include "kv_rows.h"

#define HALF_T float
#define HALF_PFX f32

static inline float half_scalar(float x) { return x; }

#ifdef KV_X86
KV_INLINE2 __m256 half_ld8(const float *p) { return _mm256_loadu_ps(p); }

KV_INLINE512 __m512 half_ld16(const float *p) { return _mm512_loadu_ps(p); }
#endif

#include "rows_float.h"

void kv_rows_bind_f32(struct kv_dec_job *J, int is_v) { f32_bind_convert(J, is_v); }
