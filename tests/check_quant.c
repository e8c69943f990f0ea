/*
 * check_quant.c - group quantization (kv_quant.h): round-trip error bound,
 * exact all-equal groups, extreme and non-finite values, the byte layout of
 * the codes, and the (dtype, n, group) checks.
 *
 * The bound under test is the one kv_quant.h promises: every value reads
 * back within half a quantization step of itself, plus float rounding.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/kv_half.h"
#include "../kernels/kv_quant.h"

/*
 * Float slack on top of the half step, per value: the stored scale is rounded
 * down to float (at most one ulp, 2^-24 relative, lost per code step, so at
 * most levels * scale * 2^-24 at the top code) and the read-back value is
 * rounded to float once (|x| * 2^-24). FLT_EPSILON = 2^-23 covers both.
 */
#define QUANT_ROUND_SLACK FLT_EPSILON

static double slack(double x, double scale, int levels)
{
    return QUANT_ROUND_SLACK * (fabs(x) + levels * scale);
}

static int levels_of(enum kv_dtype t) { return kv_type_traits[t].levels; }

/* xorshift64* in [lo, hi): deterministic test data */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double rnd(double lo, double hi)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    uint64_t r = rng_state * 2685821657736338717ull;
    return lo + (hi - lo) * (double)(r >> 11) / 9007199254740992.0;
}

/* Quantizes x (n values) and reads it back; checks the error bound of every
 * value against its own group's step and that params are finite. */
static void roundtrip_check(const float *x, enum kv_dtype t, int32_t n, int32_t group)
{
    uint8_t codes[1024];
    struct kv_qparams qp[1024];
    float y[1024];
    ck_assert_int_le(n, 1024);
    memset(codes, 0xAB, sizeof(codes));
    kv_quantize_row(codes, qp, x, t, n, group);
    kv_dequantize_row(y, codes, qp, t, n, group);
    for (int32_t i = 0; i < n; i++) {
        const struct kv_qparams *g = &qp[i / group];
        ck_assert_msg(isfinite(g->scale) && isfinite(g->min) && g->scale >= 0.0f,
                      "group %d params not finite: scale %g min %g", i / group,
                      g->scale, g->min);
        ck_assert_msg(isfinite(y[i]), "value %d reads back as %g", i, y[i]);
        if (!isfinite(x[i]))
            continue;
        double err = fabs((double)y[i] - x[i]);
        double bound = g->scale / 2.0 + slack(x[i], g->scale, levels_of(t));
        ck_assert_msg(err <= bound,
                      "%s n=%d group=%d value %d: x=%.9g y=%.9g err %.3g > bound %.3g",
                      kv_type_traits[t].name, n, group, i, x[i], y[i], err, bound);
    }
}

/* ------------------------------------------------------------------------ */
/* Round trip on random data                                                */

static const struct {
    enum kv_dtype t;
    int32_t n, group;
    double lo, hi;
} rt_cases[] = {
    {KV_DTYPE_Q8, 64, 32, -1, 1},      {KV_DTYPE_Q4, 64, 32, -1, 1},
    {KV_DTYPE_Q8, 128, 64, -5, 3},     {KV_DTYPE_Q4, 128, 128, -5, 3},
    {KV_DTYPE_Q8, 80, 16, -2, 2},      {KV_DTYPE_Q4, 80, 16, -2, 2},
    {KV_DTYPE_Q8, 80, 40, 0, 1000},    {KV_DTYPE_Q4, 80, 40, -1000, 0},
    {KV_DTYPE_Q8, 7, 7, -1, 1},        {KV_DTYPE_Q4, 6, 2, -1, 1},
    {KV_DTYPE_Q8, 1, 1, -1, 1},        {KV_DTYPE_Q4, 1024, 512, -1e-3, 1e-3},
    {KV_DTYPE_Q8, 1024, 1024, 1e6, 1e6 + 1}, {KV_DTYPE_Q4, 96, 32, -1e20, 1e20},
    {KV_DTYPE_Q2, 64, 32, -1, 1},      {KV_DTYPE_Q2, 128, 16, -5, 3},
    {KV_DTYPE_Q2, 80, 16, -2, 2},      {KV_DTYPE_Q2, 100, 25, 0, 1000},
    {KV_DTYPE_Q2, 8, 4, -1, 1},        {KV_DTYPE_Q2, 4, 1, -1, 1},
    {KV_DTYPE_Q2, 1024, 512, -1e-3, 1e-3}, {KV_DTYPE_Q2, 96, 96, -1e20, 1e20},
};

START_TEST(test_roundtrip_random)
{
    float x[1024];
    for (int rep = 0; rep < 20; rep++) {
        for (int32_t i = 0; i < rt_cases[_i].n; i++)
            x[i] = (float)rnd(rt_cases[_i].lo, rt_cases[_i].hi);
        roundtrip_check(x, rt_cases[_i].t, rt_cases[_i].n, rt_cases[_i].group);
    }
}
END_TEST

/* The step really is (max - min) / levels: a code error of one would show. */
START_TEST(test_scale_is_range_over_levels)
{
    float x[64];
    struct kv_qparams qp[2];
    uint8_t codes[64];
    for (int i = 0; i < 64; i++)
        x[i] = (float)rnd(-3, 3);
    x[5] = -4.0f;
    x[9] = 4.0f;
    kv_quantize_row(codes, qp, x, KV_DTYPE_Q8, 64, 32);
    ck_assert_float_eq_tol(qp[0].scale, 8.0f / 255.0f, 1e-7f);
    ck_assert_float_eq(qp[0].min, -4.0f);
    ck_assert_int_eq(codes[5], 0);
    ck_assert_int_eq(codes[9], 255);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* All-equal groups, extremes, non-finite values                            */

START_TEST(test_all_equal_exact)
{
    static const float vals[] = {0.0f, 1.5f, -7.25f, 1e30f, -FLT_MAX, FLT_MIN};
    enum kv_dtype t = _i == 2 ? KV_DTYPE_Q2 : _i % 2 ? KV_DTYPE_Q4 : KV_DTYPE_Q8;
    float x[64], y[64];
    uint8_t codes[64];
    struct kv_qparams qp[4];
    for (size_t v = 0; v < sizeof(vals) / sizeof(vals[0]); v++) {
        for (int i = 0; i < 64; i++)
            x[i] = i < 32 ? vals[v] : (float)rnd(-1, 1);
        kv_quantize_row(codes, qp, x, t, 64, 32);
        kv_dequantize_row(y, codes, qp, t, 64, 32);
        ck_assert_float_eq(qp[0].scale, 0.0f);
        for (int i = 0; i < 32; i++)
            ck_assert_msg(y[i] == x[i], "equal group value %d: %g != %g", i, y[i], x[i]);
        float c[64];
        kv_type_traits[t].unpack_row(c, codes, 64, 32);
        for (int i = 0; i < 32; i++) /* the equal group's codes are all 0 */
            ck_assert_float_eq(c[i], 0.0f);
        if (t != KV_DTYPE_Q2) { /* ... and its bytes come first (int2 spreads them) */
            size_t code_bytes = t == KV_DTYPE_Q8 ? 32 : 16;
            for (size_t b = 0; b < code_bytes; b++)
                ck_assert_int_eq(codes[b], 0);
        }
    }
}
END_TEST

START_TEST(test_extreme_values)
{
    enum kv_dtype t = _i == 2 ? KV_DTYPE_Q2 : _i % 2 ? KV_DTYPE_Q4 : KV_DTYPE_Q8;
    float x[32];
    /* +-1e30 */
    for (int i = 0; i < 32; i++)
        x[i] = (i % 3 == 0) ? 1e30f : (i % 3 == 1 ? -1e30f : (float)rnd(-1e30, 1e30));
    roundtrip_check(x, t, 32, 16);
    /* the whole float range in one group: max - min overflows float */
    for (int i = 0; i < 32; i++)
        x[i] = (float)rnd(-1, 1) * FLT_MAX;
    x[0] = FLT_MAX;
    x[1] = -FLT_MAX;
    roundtrip_check(x, t, 32, 32);
    /* tiny and denormal spreads */
    for (int i = 0; i < 32; i++)
        x[i] = (float)(i % 4) * FLT_TRUE_MIN;
    roundtrip_check(x, t, 32, 8);
}
END_TEST

START_TEST(test_nonfinite_inputs)
{
    enum kv_dtype t = _i == 2 ? KV_DTYPE_Q2 : _i % 2 ? KV_DTYPE_Q4 : KV_DTYPE_Q8;
    float x[32];
    for (int i = 0; i < 32; i++)
        x[i] = (float)rnd(-2, 2);
    x[3] = NAN;
    x[7] = INFINITY;
    x[20] = -INFINITY;
    roundtrip_check(x, t, 32, 16); /* finite params and read-back, bound on the rest */
    for (int i = 0; i < 16; i++)
        x[i] = NAN; /* a group with no finite value */
    roundtrip_check(x, t, 32, 16);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Code layout                                                              */

START_TEST(test_layout_q8)
{
    /* integer values 0..255 with both ends present: scale 1, min 0, so the
     * code of element i is x[i] itself */
    float x[256];
    uint8_t codes[256];
    struct kv_qparams qp[1];
    for (int i = 0; i < 256; i++)
        x[i] = (float)((i * 37) % 256);
    kv_quantize_row(codes, qp, x, KV_DTYPE_Q8, 256, 256);
    ck_assert_float_eq(qp[0].scale, 1.0f);
    ck_assert_float_eq(qp[0].min, 0.0f);
    for (int i = 0; i < 256; i++)
        ck_assert_int_eq(codes[i], (int)x[i]);
}
END_TEST

/* int2: codes 0..3 with both ends in every group (scale 1, min 0), so each
 * code is its value; every element's bit pair is where kv_quant.h says:
 * runs of 64 (the last one L long), byte r0/4 + (i - r0) % (L/4), pair
 * (i - r0) / (L/4). Rows of 64, 128, 80 (a run of 16 left) and 12. */
START_TEST(test_layout_q2)
{
    static const int32_t ns[] = {64, 128, 80, 12}, groups[] = {32, 16, 16, 4};
    const int32_t n = ns[_i], group = groups[_i];
    float x[128], y[128];
    uint8_t codes[33];
    struct kv_qparams qp[32];
    int code[128];
    for (int32_t i = 0; i < n; i++)
        code[i] = (int)((i * 7 + 3) % 4);
    for (int32_t g0 = 0; g0 < n; g0 += group) {
        code[g0] = 0;
        code[g0 + group - 1] = 3;
    }
    for (int32_t i = 0; i < n; i++)
        x[i] = (float)code[i];
    memset(codes, 0xEE, sizeof codes);
    kv_quantize_row(codes, qp, x, KV_DTYPE_Q2, n, group);
    ck_assert_uint_eq(kv_dtype_row_bytes(KV_DTYPE_Q2, n), (size_t)n / 4);
    for (int32_t g = 0; g < n / group; g++) {
        ck_assert_float_eq(qp[g].scale, 1.0f);
        ck_assert_float_eq(qp[g].min, 0.0f);
    }
    for (int32_t i = 0; i < n; i++) {
        const int32_t r0 = i / 64 * 64, len = n - r0 < 64 ? n - r0 : 64, q = len / 4;
        const int byte = r0 / 4 + (i - r0) % q, pair = (i - r0) / q;
        ck_assert_msg(((codes[byte] >> (2 * pair)) & 3) == code[i], "n %d element %d", n, i);
    }
    ck_assert_int_eq(codes[n / 4], 0xEE); /* nothing past the row */
    kv_dequantize_row(y, codes, qp, KV_DTYPE_Q2, n, group);
    for (int32_t i = 0; i < n; i++)
        ck_assert_float_eq(y[i], x[i]);
}
END_TEST

START_TEST(test_layout_q4)
{
    static const int32_t groups[] = {2, 8, 16, 32, 64};
    int32_t group = groups[_i];
    const int32_t n = 128;
    float x[128];
    uint8_t codes[64];
    struct kv_qparams qp[64];
    int code[128];
    for (int32_t g0 = 0; g0 < n; g0 += group) {
        for (int32_t i = 0; i < group; i++)
            code[g0 + i] = (int)((g0 * 7 + i * 5 + 3) % 16);
        code[g0] = 0; /* both ends present: scale 1, min 0 */
        code[g0 + group - 1] = 15;
    }
    for (int32_t i = 0; i < n; i++)
        x[i] = (float)code[i];
    kv_quantize_row(codes, qp, x, KV_DTYPE_Q4, n, group);
    for (int32_t g0 = 0; g0 < n; g0 += group) {
        ck_assert_float_eq(qp[g0 / group].scale, 1.0f);
        ck_assert_float_eq(qp[g0 / group].min, 0.0f);
        for (int32_t j = 0; j < group / 2; j++) {
            uint8_t b = codes[g0 / 2 + j];
            ck_assert_msg((b & 0x0F) == code[g0 + j],
                          "group %d byte %d low nibble %d, want element %d = %d", g0 / group,
                          j, b & 0x0F, g0 + j, code[g0 + j]);
            ck_assert_msg((b >> 4) == code[g0 + j + group / 2],
                          "group %d byte %d high nibble %d, want element %d = %d",
                          g0 / group, j, b >> 4, g0 + j + group / 2,
                          code[g0 + j + group / 2]);
        }
    }
}
END_TEST

/* Quantizing writes exactly the row's code bytes and params, nothing more. */
START_TEST(test_no_overwrite)
{
    enum kv_dtype t = _i == 2 ? KV_DTYPE_Q2 : _i % 2 ? KV_DTYPE_Q4 : KV_DTYPE_Q8;
    float x[80];
    uint8_t codes[100];
    struct kv_qparams qp[8];
    for (int i = 0; i < 80; i++)
        x[i] = (float)rnd(-1, 1);
    memset(codes, 0xCD, sizeof(codes));
    memset(qp, 0xCD, sizeof(qp));
    kv_quantize_row(codes, qp, x, t, 80, 16);
    size_t nb = kv_dtype_row_bytes(t, 80);
    for (size_t b = nb; b < sizeof(codes); b++)
        ck_assert_int_eq(codes[b], 0xCD);
    const uint8_t *qb = (const uint8_t *)qp;
    for (size_t b = 5 * sizeof(struct kv_qparams); b < sizeof(qp); b++)
        ck_assert_int_eq(qb[b], 0xCD);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Checks                                                                   */

START_TEST(test_check_combos)
{
    ck_assert_int_eq(kv_quant_check(KV_DTYPE_Q8, 64, 32), KV_OK);
    ck_assert_int_eq(kv_quant_check(KV_DTYPE_Q4, 64, 32), KV_OK);
    ck_assert_int_eq(kv_quant_check(KV_DTYPE_Q8, 7, 7), KV_OK);
    ck_assert_int_eq(kv_quant_check(KV_DTYPE_Q4, 80, 16), KV_OK);
    ck_assert_int_eq(kv_quant_check(KV_DTYPE_F32, 64, 0), KV_OK);
    ck_assert_int_eq(kv_quant_check(KV_DTYPE_Q2, 64, 32), KV_OK);
    ck_assert_int_eq(kv_quant_check(KV_DTYPE_Q2, 80, 5), KV_OK);   /* any group dividing n */
    ck_assert_int_eq(kv_quant_check(KV_DTYPE_Q2, 6, 3), KV_ERR_INVALID); /* 4 codes a byte */
    ck_assert_int_eq(kv_quant_check(KV_DTYPE_F16, 64, 0), KV_OK);
    ck_assert_int_eq(kv_quant_check(KV_DTYPE_BF16, 13, 0), KV_OK);
    ck_assert_int_eq(kv_quant_check(KV_DTYPE_Q4, 7, 7), KV_ERR_INVALID);   /* odd group */
    ck_assert_int_eq(kv_quant_check(KV_DTYPE_Q4, 63, 21), KV_ERR_INVALID); /* odd group */
    ck_assert_int_eq(kv_quant_check(KV_DTYPE_Q8, 64, 24), KV_ERR_INVALID); /* 24 !| 64 */
    ck_assert_int_eq(kv_quant_check(KV_DTYPE_Q4, 64, 0), KV_ERR_INVALID);
    ck_assert_int_eq(kv_quant_check(KV_DTYPE_Q8, 64, -32), KV_ERR_INVALID);
    ck_assert_int_eq(kv_quant_check(KV_DTYPE_Q8, 0, 32), KV_ERR_INVALID);
    ck_assert_int_eq(kv_quant_check(KV_DTYPE_F32, 0, 32), KV_ERR_INVALID);
    ck_assert_int_eq(kv_quant_check(KV_DTYPE_Q8, 32, 64), KV_ERR_INVALID); /* group > n */
    ck_assert_int_eq(kv_quant_check(KV_DTYPE_COUNT, 64, 32), KV_ERR_INVALID);
    ck_assert_int_eq(kv_quant_check((enum kv_dtype)-1, 64, 32), KV_ERR_INVALID);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The element-type table                                                   */

/* Every row is consistent: names unique and found by name, whole bytes per
 * block, 2^bits - 1 levels for quantized types, conversions present. */
START_TEST(test_traits_table)
{
    for (int t = 0; t < KV_DTYPE_COUNT; t++) {
        const struct kv_type_traits *tr = kv_dtype_traits((enum kv_dtype)t);
        ck_assert_ptr_eq(tr, &kv_type_traits[t]);
        ck_assert(tr->name != NULL && tr->name[0] != '\0');
        ck_assert_int_eq(kv_dtype_from_name(tr->name), t);
        ck_assert_int_gt(tr->bits, 0);
        ck_assert_int_ge(tr->block, 1);
        ck_assert_int_eq(tr->bits * tr->block % 8, 0);
        ck_assert_int_ge(tr->min_group, 1);
        ck_assert(tr->to_float_row && tr->from_float_row && tr->unpack_row);
        ck_assert(tr->err_rel >= 0.0 && tr->err_step >= 0.0 && tr->err_abs >= 0.0);
        if (tr->has_qparams) {
            ck_assert_int_eq(tr->levels, (1 << tr->bits) - 1);
            ck_assert(tr->err_step > 0.0);
        } else {
            ck_assert_int_eq(tr->levels, 0);
        }
        ck_assert_uint_eq(kv_dtype_row_bytes((enum kv_dtype)t, 8 * tr->block),
                          (size_t)tr->bits * tr->block);
    }
    ck_assert_ptr_null(kv_dtype_traits(KV_DTYPE_COUNT));
    ck_assert_int_eq(kv_dtype_from_name("f16x"), -1);
    ck_assert_int_eq(kv_dtype_from_name(NULL), -1);
}
END_TEST

/* The bound the table states (err_step of the group range) holds for every
 * quantized type, through the table's own conversions. */
START_TEST(test_traits_error_bound)
{
    for (int t = 0; t < KV_DTYPE_COUNT; t++) {
        const struct kv_type_traits *tr = &kv_type_traits[t];
        const int32_t n = 64, group = tr->has_qparams ? 16 : 1;
        float x[64], y[64], c[64];
        uint8_t codes[64 * 4];
        struct kv_qparams qp[64];
        for (int rep = 0; rep < 10; rep++) {
            for (int32_t i = 0; i < n; i++)
                x[i] = (float)rnd(-3, 3);
            tr->from_float_row(codes, qp, x, n, group);
            tr->to_float_row(y, codes, qp, n, group);
            tr->unpack_row(c, codes, n, group);
            for (int32_t i = 0; i < n; i++) {
                const int32_t g0 = i - i % group;
                float lo = x[g0], hi = x[g0];
                for (int32_t e = g0; e < g0 + group; e++) {
                    lo = fminf(lo, x[e]);
                    hi = fmaxf(hi, x[e]);
                }
                double bound = tr->err_rel * fabs(x[i]) + tr->err_step * (hi - lo) + tr->err_abs +
                               slack(x[i], tr->has_qparams ? qp[i / group].scale : 0.0,
                                     tr->levels);
                ck_assert_msg(fabs((double)y[i] - x[i]) <= bound, "%s value %d: %g vs %g",
                              tr->name, i, (double)y[i], (double)x[i]);
                if (tr->has_qparams) { /* the raw code, read back by hand */
                    ck_assert(c[i] >= 0.0f && c[i] <= (float)tr->levels && c[i] == floorf(c[i]));
                    const struct kv_qparams *g = &qp[i / group];
                    ck_assert_float_eq(y[i], (float)((double)g->min + (double)g->scale * c[i]));
                } else { /* unpacked = read back (a copy for f32) */
                    ck_assert(memcmp(&c[i], &y[i], sizeof(float)) == 0);
                }
            }
        }
    }
}
END_TEST

/* Per channel: each channel's pair covers the block's tokens; every value
 * within half a step of that channel's range over the block. */
START_TEST(test_channel_roundtrip)
{
    const enum kv_dtype t = _i == 0 ? KV_DTYPE_Q8 : _i == 1 ? KV_DTYPE_Q4 : KV_DTYPE_Q2;
    const struct kv_type_traits *tr = &kv_type_traits[t];
    enum { NT = 13, N = 24 };
    float x[NT * N], y[N];
    uint8_t codes[NT * N];
    struct kv_qparams qp[N];
    for (int32_t i = 0; i < NT * N; i++) /* channels of very different ranges */
        x[i] = (float)rnd(-1, 1) * (float)(1 + i % N);
    const size_t rb = kv_dtype_row_bytes(t, N);
    kv_quantize_rows_channel(codes, rb, qp, x, N, NT, t, N);
    for (int32_t c = 0; c < N; c++) {
        float lo = x[c], hi = x[c];
        for (int32_t r = 0; r < NT; r++) {
            lo = fminf(lo, x[r * N + c]);
            hi = fmaxf(hi, x[r * N + c]);
        }
        ck_assert_float_eq(qp[c].min, lo);
        ck_assert((double)qp[c].scale <= ((double)hi - lo) / tr->levels);
    }
    for (int32_t r = 0; r < NT; r++) {
        kv_dequantize_row_channel(y, codes + r * rb, qp, t, N);
        for (int32_t c = 0; c < N; c++) {
            const double err = fabs((double)y[c] - x[r * N + c]);
            const double bound = qp[c].scale / 2.0 + slack(x[r * N + c], qp[c].scale, tr->levels);
            ck_assert_msg(err <= bound, "%s row %d ch %d: err %g > %g", tr->name, r, c, err, bound);
        }
        if (t == KV_DTYPE_Q4) { /* one group spanning the row: j and j + N/2 share byte j */
            for (int32_t j = 0; j < N / 2; j++) {
                const uint8_t b = codes[r * rb + j];
                ck_assert_float_eq(y[j], (float)((double)qp[j].min + (double)qp[j].scale * (b & 15)));
                ck_assert_float_eq(y[j + N / 2], (float)((double)qp[j + N / 2].min +
                                                         (double)qp[j + N / 2].scale * (b >> 4)));
            }
        }
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* f16 and bf16 (kv_half.h)                                                 */

static int is_nan16(uint16_t h, int bf)
{
    return bf ? (h & 0x7FFF) > 0x7F80 : (h & 0x7FFF) > 0x7C00;
}

/* A row of f32 through every ISA level this CPU has gives the scalar
 * definition's bits, both ways (x: n values, any bits). */
static void half_rows_match_scalar(const float *x, int32_t n, enum kv_dtype t)
{
    const int bf = t == KV_DTYPE_BF16;
    uint16_t *want = malloc((size_t)n * 2), *got = malloc((size_t)n * 2);
    float *back = malloc((size_t)n * 4);
    ck_assert(want && got && back);
    for (int32_t i = 0; i < n; i++)
        want[i] = bf ? kv_f32_to_bf16(x[i]) : kv_f32_to_f16(x[i]);
    for (int isa = (int)kv_isa(); isa >= 0; isa--) {
        kv_isa_limit((enum kv_isa)isa);
        memset(got, 0xA5, (size_t)n * 2);
        kv_half_from_f32(got, x, n, t);
        for (int32_t i = 0; i < n; i++)
            ck_assert_msg(got[i] == want[i], "%s %s: x %a (bits %08x) -> %04x, scalar %04x",
                          kv_type_traits[t].name, kv_isa_name((enum kv_isa)isa), (double)x[i],
                          kv_f32_bits(x[i]), got[i], want[i]);
        kv_half_to_f32(back, want, n, t);
        for (int32_t i = 0; i < n; i++) {
            const float ref = bf ? kv_bf16_to_f32(want[i]) : kv_f16_to_f32(want[i]);
            ck_assert_msg(kv_f32_bits(back[i]) == kv_f32_bits(ref), "%s %s: %04x -> %08x, scalar %08x",
                          kv_type_traits[t].name, kv_isa_name((enum kv_isa)isa), want[i],
                          kv_f32_bits(back[i]), kv_f32_bits(ref));
        }
    }
    kv_isa_limit(KV_ISA_COUNT);
    free(want);
    free(got);
    free(back);
}

/* Every 16-bit pattern: to f32 and back is the identity (NaNs come back
 * quiet, payload kept), f16 -> f32 is the value the fields say, and the
 * SIMD rows agree with the scalar definition on all of them. */
START_TEST(test_half_all_patterns)
{
    const enum kv_dtype t = _i ? KV_DTYPE_BF16 : KV_DTYPE_F16;
    const int bf = _i;
    float *x = malloc(65536 * sizeof(float));
    ck_assert(x != NULL);
    for (uint32_t h = 0; h < 65536; h++) {
        const float f = bf ? kv_bf16_to_f32((uint16_t)h) : kv_f16_to_f32((uint16_t)h);
        x[h] = f;
        const uint16_t r = bf ? kv_f32_to_bf16(f) : kv_f32_to_f16(f);
        if (is_nan16((uint16_t)h, bf)) {
            ck_assert(isnan(f));
            ck_assert_uint_eq(r, h | (bf ? 0x40u : 0x200u));
            continue;
        }
        ck_assert_msg(r == h, "%s %04x -> %a -> %04x", kv_type_traits[t].name, h, (double)f, r);
        if (!bf) { /* the value from the fields, in double */
            const int e = (h >> 10) & 31, m = h & 1023;
            const double v = e == 31 ? INFINITY
                             : e == 0 ? ldexp(m, -24)
                                      : ldexp(1024 + m, e - 25);
            ck_assert(f == (float)((h & 0x8000) ? -v : v));
        } else {
            ck_assert_uint_eq(kv_f32_bits(f), h << 16);
        }
    }
    half_rows_match_scalar(x, 65536, t);
    free(x);
}
END_TEST

/* The nearest 16-bit value, ties to even: for random f32 bit patterns
 * (every exponent, so overflow, subnormals and zero too) and for the exact
 * midpoints between neighbours, the result is no farther from x (in double)
 * than either neighbour, a tie has an even last bit, and past the largest
 * finite value (f16: 65504, rounding at 65520) comes inf. The same values
 * through the SIMD rows. */
START_TEST(test_half_nearest_even)
{
    const enum kv_dtype t = _i ? KV_DTYPE_BF16 : KV_DTYPE_F16;
    const int bf = _i;
    enum { N = 100000 };
    float *x = malloc(N * sizeof(float));
    ck_assert(x != NULL);
    for (int32_t i = 0; i < N; i++) {
        uint32_t u = (uint32_t)(rnd(0, 4294967296.0));
        if (i % 4 == 1) { /* the midpoint above a random 16-bit value */
            const uint16_t h = (uint16_t)(u >> 16) & 0x7BFF; /* finite */
            const double lo = bf ? kv_bf16_to_f32(h) : kv_f16_to_f32(h);
            const double hi = bf ? kv_bf16_to_f32((uint16_t)(h + 1)) : kv_f16_to_f32((uint16_t)(h + 1));
            x[i] = (float)((lo + hi) / 2); /* exact: one more bit than the 16-bit type */
            continue;
        }
        x[i] = kv_bits_f32(u);
    }
    for (int32_t i = 0; i < N; i++) {
        const float f = x[i];
        const uint16_t h = bf ? kv_f32_to_bf16(f) : kv_f32_to_f16(f);
        const double v = bf ? kv_bf16_to_f32(h) : kv_f16_to_f32(h);
        if (isnan(f)) {
            ck_assert(is_nan16(h, bf));
            continue;
        }
        const double ax = fabs((double)f), maxf = bf ? FLT_MAX : 65504.0;
        if (isinf(v)) { /* only when x is at least half an ulp above the largest */
            const double top = bf ? ldexp(1.0, 128) - ldexp(1.0, 127 - 8) : 65520.0;
            ck_assert_msg(ax >= top || isinf(f), "%a -> inf", (double)f);
            continue;
        }
        ck_assert(fabs(v) <= maxf);
        const uint16_t mag = h & 0x7FFF;
        for (int dir = -1; dir <= 1; dir += 2) { /* the neighbours of the same sign */
            if ((dir < 0 && mag == 0) || (dir > 0 && mag >= (bf ? 0x7F7F : 0x7BFF)))
                continue;
            const uint16_t n = (uint16_t)((h & 0x8000) | (uint16_t)(mag + dir));
            const double w = bf ? kv_bf16_to_f32(n) : kv_f16_to_f32(n);
            const double dv = fabs((double)f - v), dw = fabs((double)f - w);
            ck_assert_msg(dv <= dw, "%s: %a -> %a, but %a is nearer", kv_type_traits[t].name,
                          (double)f, v, w);
            if (dv == dw)
                ck_assert_msg((h & 1) == 0, "%s: tie %a -> odd %04x", kv_type_traits[t].name,
                              (double)f, h);
        }
    }
    half_rows_match_scalar(x, N, t);
    /* lengths that leave every tail of the SIMD loops */
    for (int32_t n = 1; n < 40; n++)
        half_rows_match_scalar(x + 1000, n, t);
    free(x);
}
END_TEST

/* ------------------------------------------------------------------------ */

static Suite *quant_suite(void)
{
    Suite *s = suite_create("quant");
    TCase *tc = tcase_create("roundtrip");
    tcase_add_loop_test(tc, test_roundtrip_random, 0,
                        (int)(sizeof(rt_cases) / sizeof(rt_cases[0])));
    tcase_add_test(tc, test_scale_is_range_over_levels);
    suite_add_tcase(s, tc);
    tc = tcase_create("edges");
    tcase_add_loop_test(tc, test_all_equal_exact, 0, 3);
    tcase_add_loop_test(tc, test_extreme_values, 0, 3);
    tcase_add_loop_test(tc, test_nonfinite_inputs, 0, 3);
    suite_add_tcase(s, tc);
    tc = tcase_create("layout");
    tcase_add_test(tc, test_layout_q8);
    tcase_add_loop_test(tc, test_layout_q4, 0, 5);
    tcase_add_loop_test(tc, test_layout_q2, 0, 4);
    tcase_add_loop_test(tc, test_no_overwrite, 0, 3);
    tcase_add_test(tc, test_check_combos);
    suite_add_tcase(s, tc);
    tc = tcase_create("traits");
    tcase_set_timeout(tc, 120); /* every 16-bit pattern and 10^5 values, per ISA level */
    tcase_add_test(tc, test_traits_table);
    tcase_add_test(tc, test_traits_error_bound);
    tcase_add_loop_test(tc, test_channel_roundtrip, 0, 3);
    tcase_add_loop_test(tc, test_half_all_patterns, 0, 2);
    tcase_add_loop_test(tc, test_half_nearest_even, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(quant_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed;
}
