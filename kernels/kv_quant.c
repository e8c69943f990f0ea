/*
 * kv_quant.c - asymmetric group quantization of rows (int8, int4, int2), scalar,
 * and the element-type table (kv_type_traits) built on it and on the 16-bit
 * float conversions (kv_half.h).
 *
 * This is the obviously-right definition that the cache strategies store
 * with and that the attention kernel's fused dequantize-in-register paths
 * must agree with; speed lives in the kernel, not here.
 *
 * The design decision that matters: every group's {scale, min} is computed
 * in double and `scale` is rounded DOWN to float, so that min + L*scale never
 * exceeds the group's max (L = 2^bits - 1). That keeps the read-back values
 * inside [min, max] even for groups spanning +-FLT_MAX (no inf, no NaN), and
 * costs at most L float ulps of scale on the top code, far below half a step.
 *
 * Non-finite inputs cannot be represented; they are kept out of min/max so
 * the qparams stay finite: NaN and -inf read back as min (code 0), +inf as
 * the group's max code. A group with no finite value gets {0, 0}. A step
 * that underflows float (a spread of a few denormals) becomes the smallest
 * denormal, which codes such groups exactly.
 */
#include "kv_quant.h"

#include "kv_half.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Checks                                                                   */

enum kv_status kv_quant_check(enum kv_dtype t, int32_t n, int32_t group)
{
    const struct kv_type_traits *tr = kv_dtype_traits(t);
    if (tr == NULL || n < 1 || n % tr->block != 0)
        return KV_ERR_INVALID;
    if (!tr->has_qparams)
        return KV_OK; /* group is not used by f32 rows */
    if (group < 1 || n % group != 0 || group % tr->min_group != 0)
        return KV_ERR_INVALID;
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* One group                                                                */

/* qp <- {scale, min} of the group x[0], x[stride], ..., x[(g-1)*stride] */
static void quant_params(struct kv_qparams *qp, const float *x, int32_t g, size_t stride,
                         int32_t levels)
{
    double lo = INFINITY, hi = -INFINITY;
    for (int32_t i = 0; i < g; i++) {
        const float v = x[(size_t)i * stride];
        if (!isfinite(v))
            continue;
        if (v < lo)
            lo = v;
        if (v > hi)
            hi = v;
    }
    if (lo > hi) { /* no finite value at all */
        qp->scale = 0.0f;
        qp->min = 0.0f;
        return;
    }
    double step = (hi - lo) / levels; /* finite: hi - lo <= 2 * FLT_MAX */
    float scale = (float)step;
    if ((double)scale > step)
        scale = nextafterf(scale, 0.0f);
    if (scale == 0.0f && hi > lo)
        scale = FLT_TRUE_MIN; /* step below float range: denormal spreads
                               * are then coded exactly */
    qp->min = (float)lo;
    qp->scale = scale;
}

/* code of one value under qp, in [0, levels] */
static int32_t quant_code(float x, const struct kv_qparams *qp, int32_t levels)
{
    if (qp->scale == 0.0f || isnan(x))
        return 0; /* all-equal group (or a step below float range) */
    double c = nearbyint(((double)x - qp->min) / qp->scale);
    if (!(c >= 0.0)) /* also -inf */
        return 0;
    if (c > levels)
        return levels;
    return (int32_t)c;
}

static float dequant_value(const struct kv_qparams *qp, int32_t code)
{
    return (float)((double)qp->min + (double)qp->scale * code);
}

/* ------------------------------------------------------------------------ */
/* f32: rows are copies                                                     */

static void f32_from_float(void *codes, struct kv_qparams *qp, const float *x, int32_t n,
                           int32_t group)
{
    (void)qp;
    (void)group;
    memcpy(codes, x, (size_t)n * sizeof(float));
}

static void f32_to_float(float *x, const void *codes, const struct kv_qparams *qp, int32_t n,
                         int32_t group)
{
    (void)qp;
    (void)group;
    memcpy(x, codes, (size_t)n * sizeof(float));
}

static void f32_unpack(float *c, const void *codes, int32_t n, int32_t group)
{
    (void)group;
    memcpy(c, codes, (size_t)n * sizeof(float));
}

/* ------------------------------------------------------------------------ */
/* int2: four codes a byte, by runs of 64 elements (kv_quant.h)             */

/* byte and bit shift of element i of a row of n elements (n a multiple of
 * 4, as kv_quant_check requires: every run holds at least 4 elements) */
static void q2_pos(int32_t i, int32_t n, int32_t *byte, int32_t *shift)
{
    KV_ASSERT(i >= 0 && i < n && n % 4 == 0);
    const int32_t r0 = i - i % 64, len = n - r0 < 64 ? n - r0 : 64, q = len / 4, w = i - r0;
    *byte = r0 / 4 + w % q;
    *shift = 2 * (w / q);
}

static int32_t q2_code_at(const uint8_t *in, int32_t i, int32_t n)
{
    int32_t byte, shift;
    q2_pos(i, n, &byte, &shift);
    return (in[byte] >> shift) & 3;
}

/* out (n/4 bytes) <- code[i] of every element, code(i) from quant_code */
static void q2_put(uint8_t *out, int32_t i, int32_t n, int32_t code)
{
    int32_t byte, shift;
    q2_pos(i, n, &byte, &shift);
    out[byte] = (uint8_t)(out[byte] | (code << shift));
}

static void q2_put_code(uint8_t *out, int32_t i, int32_t n, int32_t group, int32_t code)
{
    (void)group;
    q2_put(out, i, n, code);
}

static void q2_from_float(void *codes, struct kv_qparams *qp, const float *x, int32_t n,
                          int32_t group)
{
    uint8_t *out = codes;
    memset(out, 0, (size_t)n / 4);
    for (int32_t g0 = 0; g0 < n; g0 += group) {
        struct kv_qparams *gqp = &qp[g0 / group];
        quant_params(gqp, x + g0, group, 1, 3);
        for (int32_t i = g0; i < g0 + group; i++)
            q2_put(out, i, n, quant_code(x[i], gqp, 3));
    }
}

static void q2_unpack(float *c, const void *codes, int32_t n, int32_t group)
{
    (void)group;
    for (int32_t i = 0; i < n; i++)
        c[i] = (float)q2_code_at(codes, i, n);
}

static void q2_to_float(float *x, const void *codes, const struct kv_qparams *qp, int32_t n,
                        int32_t group)
{
    for (int32_t i = 0; i < n; i++)
        x[i] = dequant_value(&qp[i / group], q2_code_at(codes, i, n));
}

/* ------------------------------------------------------------------------ */
/* f16, bf16: rounded once when stored (kv_half.h)                          */

static void f16_from_float(void *codes, struct kv_qparams *qp, const float *x, int32_t n,
                           int32_t group)
{
    (void)qp;
    (void)group;
    kv_half_from_f32(codes, x, n, KV_DTYPE_F16);
}

static void f16_to_float(float *x, const void *codes, const struct kv_qparams *qp, int32_t n,
                         int32_t group)
{
    (void)qp;
    (void)group;
    kv_half_to_f32(x, codes, n, KV_DTYPE_F16);
}

static void f16_unpack(float *c, const void *codes, int32_t n, int32_t group)
{
    f16_to_float(c, codes, NULL, n, group);
}

static void bf16_from_float(void *codes, struct kv_qparams *qp, const float *x, int32_t n,
                            int32_t group)
{
    (void)qp;
    (void)group;
    kv_half_from_f32(codes, x, n, KV_DTYPE_BF16);
}

static void bf16_to_float(float *x, const void *codes, const struct kv_qparams *qp, int32_t n,
                          int32_t group)
{
    (void)qp;
    (void)group;
    kv_half_to_f32(x, codes, n, KV_DTYPE_BF16);
}

static void bf16_unpack(float *c, const void *codes, int32_t n, int32_t group)
{
    bf16_to_float(c, codes, NULL, n, group);
}

/* ------------------------------------------------------------------------ */
/* int8: code of element i in byte i                                        */

static void q8_from_float(void *codes, struct kv_qparams *qp, const float *x, int32_t n,
                          int32_t group)
{
    uint8_t *out = codes;
    for (int32_t g0 = 0; g0 < n; g0 += group) {
        struct kv_qparams *gqp = &qp[g0 / group];
        quant_params(gqp, x + g0, group, 1, 255);
        for (int32_t i = 0; i < group; i++)
            out[g0 + i] = (uint8_t)quant_code(x[g0 + i], gqp, 255);
    }
}

static void q8_put_code(uint8_t *out, int32_t i, int32_t n, int32_t group, int32_t code)
{
    (void)n;
    (void)group;
    out[i] = (uint8_t)(out[i] | code);
}

static void q8_unpack(float *c, const void *codes, int32_t n, int32_t group)
{
    (void)group;
    const uint8_t *in = codes;
    for (int32_t i = 0; i < n; i++)
        c[i] = (float)in[i];
}

static void q8_to_float(float *x, const void *codes, const struct kv_qparams *qp, int32_t n,
                        int32_t group)
{
    const uint8_t *in = codes;
    for (int32_t i = 0; i < n; i++)
        x[i] = dequant_value(&qp[i / group], in[i]);
}

/* ------------------------------------------------------------------------ */
/* int4: byte j of a group holds elements j (low) and j + group/2 (high)    */

static int32_t q4_code_at(const uint8_t *in, int32_t i, int32_t group)
{
    const int32_t g0 = i - i % group, j = i % group, half = group / 2;
    uint8_t b = in[g0 / 2 + (j < half ? j : j - half)];
    return j < half ? (b & 0x0F) : (b >> 4);
}

static void q4_from_float(void *codes, struct kv_qparams *qp, const float *x, int32_t n,
                          int32_t group)
{
    uint8_t *out = codes;
    const int32_t half = group / 2;
    for (int32_t g0 = 0; g0 < n; g0 += group) {
        struct kv_qparams *gqp = &qp[g0 / group];
        quant_params(gqp, x + g0, group, 1, 15);
        for (int32_t j = 0; j < half; j++) {
            int32_t lo = quant_code(x[g0 + j], gqp, 15);
            int32_t hi = quant_code(x[g0 + j + half], gqp, 15);
            out[g0 / 2 + j] = (uint8_t)(lo | (hi << 4));
        }
    }
}

static void q4_put_code(uint8_t *out, int32_t i, int32_t n, int32_t group, int32_t code)
{
    (void)n;
    const int32_t g0 = i - i % group, j = i % group, half = group / 2;
    const int32_t b = g0 / 2 + (j < half ? j : j - half);
    out[b] = (uint8_t)(out[b] | (j < half ? code : code << 4));
}

static void q4_unpack(float *c, const void *codes, int32_t n, int32_t group)
{
    for (int32_t i = 0; i < n; i++)
        c[i] = (float)q4_code_at(codes, i, group);
}

static void q4_to_float(float *x, const void *codes, const struct kv_qparams *qp, int32_t n,
                        int32_t group)
{
    for (int32_t i = 0; i < n; i++)
        x[i] = dequant_value(&qp[i / group], q4_code_at(codes, i, group));
}

/* ------------------------------------------------------------------------ */
/* The table                                                                */

const struct kv_type_traits kv_type_traits[KV_DTYPE_COUNT] = {
    [KV_DTYPE_F32] = {.name = "f32", .bits = 32, .block = 1, .has_qparams = 0, .levels = 0,
                      .min_group = 1, .to_float_row = f32_to_float,
                      .from_float_row = f32_from_float, .unpack_row = f32_unpack,
                      .err_rel = 0.0, .err_step = 0.0},
    /* half a step of (max - min) / 255 */
    [KV_DTYPE_Q8] = {.name = "int8", .bits = 8, .block = 1, .has_qparams = 1, .levels = 255,
                     .min_group = 1, .to_float_row = q8_to_float,
                     .from_float_row = q8_from_float, .unpack_row = q8_unpack,
                     .put_code = q8_put_code,
                     .err_rel = 0.0, .err_step = 0.5 / 255.0},
    /* two codes a byte, so rows and groups have an even length */
    [KV_DTYPE_Q4] = {.name = "int4", .bits = 4, .block = 2, .has_qparams = 1, .levels = 15,
                     .min_group = 2, .to_float_row = q4_to_float,
                     .from_float_row = q4_from_float, .unpack_row = q4_unpack,
                     .put_code = q4_put_code,
                     .err_rel = 0.0, .err_step = 0.5 / 15.0},
    /* round to nearest: half an ulp, 2^-11 relative; below 2^-14 the
     * subnormal spacing 2^-24, half of it absolute */
    [KV_DTYPE_F16] = {.name = "f16", .bits = 16, .block = 1, .has_qparams = 0, .levels = 0,
                      .min_group = 1, .to_float_row = f16_to_float,
                      .from_float_row = f16_from_float, .unpack_row = f16_unpack,
                      .err_rel = 0x1p-11, .err_step = 0.0, .err_abs = 0x1p-25},
    /* 8 significant bits: 2^-8 relative; subnormal spacing 2^-133 */
    [KV_DTYPE_BF16] = {.name = "bf16", .bits = 16, .block = 1, .has_qparams = 0, .levels = 0,
                       .min_group = 1, .to_float_row = bf16_to_float,
                       .from_float_row = bf16_from_float, .unpack_row = bf16_unpack,
                       .err_rel = 0x1p-8, .err_step = 0.0, .err_abs = 0x1p-134},
    /* four codes a byte: rows are a multiple of 4 long; half a step of
     * (max - min) / 3 */
    [KV_DTYPE_Q2] = {.name = "int2", .bits = 2, .block = 4, .has_qparams = 1, .levels = 3,
                     .min_group = 1, .to_float_row = q2_to_float,
                     .from_float_row = q2_from_float, .unpack_row = q2_unpack,
                     .put_code = q2_put_code,
                     .err_rel = 0.0, .err_step = 0.5 / 3.0},
};

int kv_dtype_from_name(const char *name)
{
    for (int t = 0; name != NULL && t < KV_DTYPE_COUNT; t++)
        if (strcmp(name, kv_type_traits[t].name) == 0)
            return t;
    return -1;
}

/* ------------------------------------------------------------------------ */
/* Rows                                                                     */

/* The checks of the row functions (kv_quant.h): a supported (t, n, group)
 * and the arrays, qparams only where the dtype has them. */
static enum kv_status row_args(const void *a, const void *b, const void *qp, enum kv_dtype t,
                               int32_t n, int32_t group)
{
    if (kv_quant_check(t, n, group) != KV_OK || a == NULL || b == NULL ||
        (kv_type_traits[t].has_qparams && qp == NULL))
        return KV_ERR_INVALID;
    return KV_OK;
}

enum kv_status kv_quantize_row(void *codes, struct kv_qparams *qp, const float *x,
                               enum kv_dtype t, int32_t n, int32_t group)
{
    enum kv_status st = row_args(codes, x, qp, t, n, group);
    if (st != KV_OK)
        return st;
    kv_type_traits[t].from_float_row(codes, qp, x, n, group);
    return KV_OK;
}

enum kv_status kv_dequantize_row(float *x, const void *codes, const struct kv_qparams *qp,
                                 enum kv_dtype t, int32_t n, int32_t group)
{
    enum kv_status st = row_args(x, codes, qp, t, n, group);
    if (st != KV_OK)
        return st;
    kv_type_traits[t].to_float_row(x, codes, qp, n, group);
    return KV_OK;
}

/* The checks of the per-channel functions: a dtype with qparams, a row
 * of n its layout takes as one group, and the arrays. */
static enum kv_status channel_args(const void *a, const void *b, const void *qp,
                                   enum kv_dtype t, int32_t n)
{
    const struct kv_type_traits *tr = kv_dtype_traits(t);
    if (tr == NULL || !tr->has_qparams || kv_quant_check(t, n, n) != KV_OK)
        return KV_ERR_INVALID;
    return a == NULL || b == NULL || qp == NULL ? KV_ERR_INVALID : KV_OK;
}

enum kv_status kv_quantize_rows_channel(void *codes, size_t code_stride, struct kv_qparams *qp,
                                        const float *x, size_t x_stride, int32_t n_tok,
                                        enum kv_dtype t, int32_t n)
{
    enum kv_status st = channel_args(codes, x, qp, t, n);
    if (st != KV_OK || n_tok < 1)
        return KV_ERR_INVALID;
    const struct kv_type_traits *tr = kv_dtype_traits(t);
    for (int32_t c = 0; c < n; c++)
        quant_params(&qp[c], x + c, n_tok, x_stride, tr->levels);
    for (int32_t r = 0; r < n_tok; r++) {
        uint8_t *out = (uint8_t *)codes + (size_t)r * code_stride;
        const float *xr = x + (size_t)r * x_stride;
        memset(out, 0, kv_dtype_row_bytes(t, n));
        for (int32_t c = 0; c < n; c++) /* one group spanning the row */
            tr->put_code(out, c, n, n, quant_code(xr[c], &qp[c], tr->levels));
    }
    return KV_OK;
}

enum kv_status kv_dequantize_row_channel(float *x, const void *codes,
                                         const struct kv_qparams *qp, enum kv_dtype t,
                                         int32_t n)
{
    enum kv_status st = channel_args(x, codes, qp, t, n);
    if (st != KV_OK)
        return st;
    kv_type_traits[t].unpack_row(x, codes, n, n);
    for (int32_t c = 0; c < n; c++)
        x[c] = dequant_value(&qp[c], (int32_t)x[c]);
    return KV_OK;
}
