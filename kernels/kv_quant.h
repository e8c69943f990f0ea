/*
 * kv_quant.h - asymmetric group quantization of rows of floats.
 *
 * A row of n values is cut into n/group groups along head_dim; each group
 * gets its own kv_qparams {scale, min} with scale = (max - min) / (2^bits - 1)
 * and codes q = round((x - min) / scale), so the round-trip error of every
 * value is at most scale / 2 (half a quantization step).
 *
 * Code layout of one row:
 *   KV_DTYPE_Q8: n bytes, code of element i in byte i.
 *   KV_DTYPE_Q4: n/2 bytes; within each group of g elements starting at
 *                byte offset (group index)*g/2, byte j holds element j in
 *                its low nibble and element j + g/2 in its high nibble.
 *                (So a SIMD unpack of the low nibbles yields the first half
 *                of the group and the high nibbles the second half.)
 * A group whose values are all equal gets scale 0 and codes 0: exact.
 */
#ifndef KV_QUANT_H
#define KV_QUANT_H

#include "kv_common.h"

/* Checks that (dtype, n, group) is a supported combination. */
enum kv_status kv_quant_check(enum kv_dtype t, int32_t n, int32_t group);

/* codes <- quantize(x[0..n)), qp <- n/group params. */
void kv_quantize_row(void *codes, struct kv_qparams *qp, const float *x,
                     enum kv_dtype t, int32_t n, int32_t group);

/* x[0..n) <- dequantize(codes, qp). */
void kv_dequantize_row(float *x, const void *codes, const struct kv_qparams *qp,
                       enum kv_dtype t, int32_t n, int32_t group);

#endif /* KV_QUANT_H */
