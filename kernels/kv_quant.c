/*
 * kv_quant.c - asymmetric group quantization of rows (int8, int4), scalar.
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

#include <float.h>
#include <math.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Checks                                                                   */

enum kv_status kv_quant_check(enum kv_dtype t, int32_t n, int32_t group)
{
    if ((unsigned)t >= KV_DTYPE_COUNT || n < 1)
        return KV_ERR_INVALID;
    if (t == KV_DTYPE_F32)
        return KV_OK; /* group is not used by f32 rows */
    if (group < 1 || n % group != 0)
        return KV_ERR_INVALID;
    if (t == KV_DTYPE_Q4 && group % 2 != 0)
        return KV_ERR_INVALID;
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* One group                                                                */

/* Largest code of a dtype: 255 for Q8, 15 for Q4. */
static int32_t quant_levels(enum kv_dtype t)
{
    return t == KV_DTYPE_Q8 ? 255 : 15;
}

/* qp <- {scale, min} of the group x[0..g) */
static void quant_params(struct kv_qparams *qp, const float *x, int32_t g,
                         int32_t levels)
{
    double lo = INFINITY, hi = -INFINITY;
    for (int32_t i = 0; i < g; i++) {
        if (!isfinite(x[i]))
            continue;
        if (x[i] < lo)
            lo = x[i];
        if (x[i] > hi)
            hi = x[i];
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

/* ------------------------------------------------------------------------ */
/* Rows                                                                     */

void kv_quantize_row(void *codes, struct kv_qparams *qp, const float *x,
                     enum kv_dtype t, int32_t n, int32_t group)
{
    KV_ASSERT(kv_quant_check(t, n, group) == KV_OK);
    if (t == KV_DTYPE_F32) {
        memcpy(codes, x, (size_t)n * sizeof(float));
        return;
    }
    uint8_t *out = codes;
    int32_t levels = quant_levels(t);
    int32_t half = group / 2;
    for (int32_t g0 = 0; g0 < n; g0 += group) {
        struct kv_qparams *gqp = &qp[g0 / group];
        quant_params(gqp, x + g0, group, levels);
        if (t == KV_DTYPE_Q8) {
            for (int32_t i = 0; i < group; i++)
                out[g0 + i] = (uint8_t)quant_code(x[g0 + i], gqp, levels);
        } else {
            /* byte j of the group: element j low nibble, j + g/2 high */
            for (int32_t j = 0; j < half; j++) {
                int32_t lo = quant_code(x[g0 + j], gqp, levels);
                int32_t hi = quant_code(x[g0 + j + half], gqp, levels);
                out[g0 / 2 + j] = (uint8_t)(lo | (hi << 4));
            }
        }
    }
}

void kv_dequantize_row(float *x, const void *codes, const struct kv_qparams *qp,
                       enum kv_dtype t, int32_t n, int32_t group)
{
    KV_ASSERT(kv_quant_check(t, n, group) == KV_OK);
    if (t == KV_DTYPE_F32) {
        memcpy(x, codes, (size_t)n * sizeof(float));
        return;
    }
    const uint8_t *in = codes;
    for (int32_t g0 = 0; g0 < n; g0 += group) {
        const struct kv_qparams *gqp = &qp[g0 / group];
        int32_t half = group / 2;
        for (int32_t i = 0; i < group; i++) {
            int32_t code;
            if (t == KV_DTYPE_Q8) {
                code = in[g0 + i];
            } else {
                uint8_t b = in[g0 / 2 + (i < half ? i : i - half)];
                code = i < half ? (b & 0x0F) : (b >> 4);
            }
            x[g0 + i] = (float)((double)gqp->min + (double)gqp->scale * code);
        }
    }
}
