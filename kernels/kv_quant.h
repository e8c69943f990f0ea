/*
 * kv_quant.h - asymmetric group quantization of rows of floats, and the
 * element-type table's conversions (kv_type_traits in kv_common.h).
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
 *   KV_DTYPE_Q2: n/4 bytes (n a multiple of 4), whatever the group: within
 *                each run of 64 elements starting at element r0 (the last
 *                run of a row may be shorter: its length L, a multiple of
 *                4), byte r0/4 + j holds elements r0 + j, r0 + j + L/4,
 *                r0 + j + L/2, r0 + j + 3L/4 in its bit pairs 0-1, 2-3,
 *                4-5, 6-7. (So one 16-byte load of a full run is four
 *                contiguous 16-element chunks, one shift apart.)
 * A group whose values are all equal gets scale 0 and codes 0: exact.
 *
 * Per-channel rows (KV_QAXIS_CHANNEL, kv_quantize_rows_channel): a block of
 * `group` consecutive tokens shares one {scale, min} per channel (element
 * index), computed over those tokens; each token's row of codes uses the
 * layout above with ONE group spanning the whole row (int4: byte j holds
 * elements j and j + n/2; int2's layout does not depend on the group).
 */
#ifndef KV_QUANT_H
#define KV_QUANT_H

#include "kv_common.h"

/* Checks that (dtype, n, group) is a supported combination: n a multiple of
 * the dtype's block; for types with qparams 1 <= group, group divides n and
 * is a multiple of the type's min_group. */
enum kv_status kv_quant_check(enum kv_dtype t, int32_t n, int32_t group);

/*
 * The row functions below return KV_ERR_INVALID, having written nothing,
 * when kv_quant_check refuses (t, n, group), or when an array they read or
 * write is NULL (qp only for dtypes with qparams).
 */

/* codes <- quantize(x[0..n)), qp <- n/group params (kv_type_traits[t].from_float_row). */
enum kv_status kv_quantize_row(void *codes, struct kv_qparams *qp, const float *x,
                               enum kv_dtype t, int32_t n, int32_t group);

/* x[0..n) <- dequantize(codes, qp) (kv_type_traits[t].to_float_row). */
enum kv_status kv_dequantize_row(float *x, const void *codes, const struct kv_qparams *qp,
                                 enum kv_dtype t, int32_t n, int32_t group);

/*
 * Per channel: qp (n) <- {scale, min} of each channel c over the n_tok rows
 * x[t * x_stride + c], and row t's codes (at codes + t * code_stride bytes)
 * <- those rows quantized with them, in the per-channel layout above.
 * t must have qparams and n_tok >= 1 (else KV_ERR_INVALID).
 */
enum kv_status kv_quantize_rows_channel(void *codes, size_t code_stride, struct kv_qparams *qp,
                                        const float *x, size_t x_stride, int32_t n_tok,
                                        enum kv_dtype t, int32_t n);

/* x (n) <- row of per-channel codes read back with the block's qp (n). */
enum kv_status kv_dequantize_row_channel(float *x, const void *codes,
                                         const struct kv_qparams *qp, enum kv_dtype t,
                                         int32_t n);

#endif /* KV_QUANT_H */
