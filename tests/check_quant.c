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

static int levels_of(enum kv_dtype t) { return t == KV_DTYPE_Q8 ? 255 : 15; }

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
    enum kv_dtype t = _i % 2 ? KV_DTYPE_Q4 : KV_DTYPE_Q8;
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
        size_t code_bytes = t == KV_DTYPE_Q8 ? 32 : 16;
        for (size_t b = 0; b < code_bytes; b++)
            ck_assert_int_eq(codes[b], 0);
    }
}
END_TEST

START_TEST(test_extreme_values)
{
    enum kv_dtype t = _i % 2 ? KV_DTYPE_Q4 : KV_DTYPE_Q8;
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
    enum kv_dtype t = _i % 2 ? KV_DTYPE_Q4 : KV_DTYPE_Q8;
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
    enum kv_dtype t = _i % 2 ? KV_DTYPE_Q4 : KV_DTYPE_Q8;
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
        ck_assert(tr->err_rel >= 0.0 && tr->err_step >= 0.0);
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
                double bound = tr->err_rel * fabs(x[i]) + tr->err_step * (hi - lo) +
                               slack(x[i], tr->has_qparams ? qp[i / group].scale : 0.0,
                                     tr->levels);
                ck_assert_msg(fabs((double)y[i] - x[i]) <= bound, "%s value %d: %g vs %g",
                              tr->name, i, (double)y[i], (double)x[i]);
                if (tr->has_qparams) { /* the raw code, read back by hand */
                    ck_assert(c[i] >= 0.0f && c[i] <= (float)tr->levels && c[i] == floorf(c[i]));
                    const struct kv_qparams *g = &qp[i / group];
                    ck_assert_float_eq(y[i], (float)((double)g->min + (double)g->scale * c[i]));
                } else {
                    ck_assert_float_eq(c[i], x[i]);
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
    const enum kv_dtype t = _i == 0 ? KV_DTYPE_Q8 : KV_DTYPE_Q4;
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
        ck_assert(qp[c].scale <= (hi - lo) / tr->levels);
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

static Suite *quant_suite(void)
{
    Suite *s = suite_create("quant");
    TCase *tc = tcase_create("roundtrip");
    tcase_add_loop_test(tc, test_roundtrip_random, 0,
                        (int)(sizeof(rt_cases) / sizeof(rt_cases[0])));
    tcase_add_test(tc, test_scale_is_range_over_levels);
    suite_add_tcase(s, tc);
    tc = tcase_create("edges");
    tcase_add_loop_test(tc, test_all_equal_exact, 0, 2);
    tcase_add_loop_test(tc, test_extreme_values, 0, 2);
    tcase_add_loop_test(tc, test_nonfinite_inputs, 0, 2);
    suite_add_tcase(s, tc);
    tc = tcase_create("layout");
    tcase_add_test(tc, test_layout_q8);
    tcase_add_loop_test(tc, test_layout_q4, 0, 5);
    tcase_add_loop_test(tc, test_no_overwrite, 0, 2);
    tcase_add_test(tc, test_check_combos);
    suite_add_tcase(s, tc);
    tc = tcase_create("traits");
    tcase_add_test(tc, test_traits_table);
    tcase_add_test(tc, test_traits_error_bound);
    tcase_add_loop_test(tc, test_channel_roundtrip, 0, 2);
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
