/*
 * check_api_errors.c - every function of the installed headers (kvlab.h and
 * what it includes) called with the arguments a careless or hostile caller
 * can pass: NULL pointers, enums outside their range, negative and
 * overflowing counts, params that do not match a view. Each must answer
 * with the error code (or the neutral value) its header comment names,
 * write nothing it was not asked to, and neither abort (an assert on a
 * caller's argument) nor read out of bounds (run under ASan+UBSan with
 * make SANITIZE=1).
 *
 * One test per header, each in its own process (Check's fork mode), so a
 * function that crashes fails its test and the others still run. The list
 * of functions is checked against the headers themselves by
 * tests/e2e_linkall.sh (which also calls each with all-zero arguments from
 * a program linked against the installed library alone); this file checks
 * the values.
 */
#include <check.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../kvlab.h"

/* A small dynamic cache of one layer, two sequences, two kv heads of 8,
 * holding T tokens. */
enum { L1 = 1, B2 = 2, H2 = 2, D8 = 8, T4 = 4 };

static struct kv_cache *small_cache(const char *name)
{
    const struct kv_strategy_ops *ops = kv_strategy_find(name);
    ck_assert_ptr_nonnull(ops);
    const struct kv_cache_config cfg = {.n_layers = L1, .batch = B2, .n_kv_heads = H2,
                                        .head_dim = D8, .max_len = 64};
    struct kv_cache *c = NULL;
    ck_assert_int_eq(kv_cache_create(&c, ops, &cfg, NULL), KV_OK);
    static float kv[B2 * T4 * H2 * D8];
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        kv[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
    ck_assert_int_eq(kv_cache_update(c, 0, kv, kv, T4, 0), KV_OK);
    return c;
}

/* ------------------------------------------------------------------------ */
/* kernels/kv_common.h                                                      */

START_TEST(test_common)
{
    /* status text: never NULL, also for values outside the enum */
    ck_assert_str_eq(kv_status_str((enum kv_status)-1), "unknown status");
    ck_assert_str_eq(kv_status_str(KV_STATUS_COUNT), "unknown status");
    ck_assert_str_eq(kv_status_str((enum kv_status)999), "unknown status");
    for (int s = 0; s < KV_STATUS_COUNT; s++)
        ck_assert_ptr_nonnull(kv_status_str((enum kv_status)s));
    /* dtypes */
    ck_assert_ptr_null(kv_dtype_traits(KV_DTYPE_COUNT));
    ck_assert_ptr_null(kv_dtype_traits((enum kv_dtype)-1));
    ck_assert_int_eq(kv_dtype_from_name(NULL), -1);
    ck_assert_int_eq(kv_dtype_from_name("int3"), -1);
    ck_assert_uint_eq(kv_dtype_row_bytes((enum kv_dtype)99, 64), 0);
    ck_assert_uint_eq(kv_dtype_row_bytes((enum kv_dtype)-1, 64), 0);
    ck_assert_uint_eq(kv_dtype_row_bytes(KV_DTYPE_F32, -1), 0);
    ck_assert_uint_eq(kv_dtype_row_bytes(KV_DTYPE_Q4, 64), 32);
    /* sizes */
    size_t out = 7;
    const size_t f[2] = {SIZE_MAX / 2, 3};
    ck_assert_int_eq(kv_mul_size(NULL, 2, 3), KV_ERR_INVALID);
    ck_assert_int_eq(kv_mul_size(&out, SIZE_MAX, 2), KV_ERR_OVERFLOW);
    ck_assert_int_eq(kv_mul_sizes(NULL, 2, f), KV_ERR_INVALID);
    ck_assert_int_eq(kv_mul_sizes(&out, -1, f), KV_ERR_INVALID);
    ck_assert_int_eq(kv_mul_sizes(&out, 2, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_mul_sizes(&out, 2, f), KV_ERR_OVERFLOW);
    ck_assert_uint_eq(out, 7); /* untouched by every failure */
    ck_assert_int_eq(kv_mul_sizes(&out, 0, NULL), KV_OK);
    ck_assert_uint_eq(out, 1);
    /* allocation */
    ck_assert_ptr_null(kv_alloc(SIZE_MAX));
    ck_assert_ptr_null(kv_alloc_uninit(SIZE_MAX - 10));
    kv_free(NULL);
    kv_alloc_fail_at(-3, 1); /* a negative k is the hook off */
    void *p = kv_alloc(16);
    ck_assert_ptr_nonnull(p);
    kv_free(p);
    kv_alloc_fail_at(0, 0);
    ck_assert_int_ge(kv_alloc_count(), 0);
    ck_assert_int_ge(kv_alloc_live(), 0);
    ck_assert_int_gt(kv_now_ns(), 0);
    ck_assert_int_ge(kv_cpu_now_ns(), 0);
    kv_l3_bytes_override(0);
    ck_assert_uint_gt(kv_l3_bytes(), 0);
    /* instruction sets */
    kv_isa_limit((enum kv_isa)-1); /* outside the enum: the cap lifted */
    kv_isa_limit((enum kv_isa)99);
    ck_assert_int_le(kv_isa(), kv_isa_detected());
    ck_assert_int_lt(kv_isa(), KV_ISA_COUNT);
    ck_assert_str_eq(kv_isa_name((enum kv_isa)-1), "unknown");
    ck_assert_str_eq(kv_isa_name(KV_ISA_COUNT), "unknown");
    ck_assert_int_eq(kv_isa_from_name(NULL), -1);
    ck_assert_int_eq(kv_isa_from_name("sse9"), -1);
    ck_assert_uint_eq(kv_rng_next(NULL), 0);
}
END_TEST

/* Writes text to dir/name, making dir/index<i> as needed. */
static void put_cache_file(const char *dir, int i, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/index%d", dir, i);
    mkdir(path, 0700); /* may exist */
    snprintf(path, sizeof(path), "%s/index%d/%s", dir, i, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* The L3 is found by its level, not its index, and a size that does not
 * parse or overflows reads 0 (the caller then falls back to sysconf). */
START_TEST(test_l3_sysfs)
{
    char dir[] = "/tmp/kvlab_l3_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ck_assert_uint_eq(kv_l3_bytes_sysfs(dir), 0); /* no entries */
    put_cache_file(dir, 0, "level", "1\n");
    put_cache_file(dir, 0, "size", "32K\n");
    put_cache_file(dir, 2, "level", "2\n"); /* index1 missing: a gap */
    put_cache_file(dir, 2, "size", "512K\n");
    ck_assert_uint_eq(kv_l3_bytes_sysfs(dir), 0); /* no level 3 */
    put_cache_file(dir, 3, "level", "3\n");
    put_cache_file(dir, 3, "size", "32768K\n");
    ck_assert_uint_eq(kv_l3_bytes_sysfs(dir), (size_t)32 << 20);
    put_cache_file(dir, 3, "size", "105M\n");
    ck_assert_uint_eq(kv_l3_bytes_sysfs(dir), (size_t)105 << 20);
    put_cache_file(dir, 3, "size", "4194304\n");
    ck_assert_uint_eq(kv_l3_bytes_sysfs(dir), (size_t)4 << 20);
    const char *bad[] = {"", "K\n", "32X\n", "-5K\n", "-1\n", "0K\n", "99999999999999999999G\n",
                         "18014398509481984G\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        put_cache_file(dir, 3, "size", bad[i]);
        ck_assert_msg(kv_l3_bytes_sysfs(dir) == 0, "size \"%s\" was accepted", bad[i]);
    }
    ck_assert_uint_eq(kv_l3_bytes_sysfs("/nonexistent/kvlab"), 0);
    char path[600];
    for (int i = 0; i <= 3; i++) {
        snprintf(path, sizeof(path), "%s/index%d/level", dir, i);
        unlink(path);
        snprintf(path, sizeof(path), "%s/index%d/size", dir, i);
        unlink(path);
        snprintf(path, sizeof(path), "%s/index%d", dir, i);
        rmdir(path);
    }
    ck_assert_int_eq(rmdir(dir), 0);

    /* where this machine's sysfs names an L3, that is what kv_l3_bytes
     * says, whatever sysconf reports (8x more on a Zen 3 EPYC VM) */
    size_t sys = kv_l3_bytes_sysfs("/sys/devices/system/cpu/cpu0/cache");
    kv_l3_bytes_override(0);
    if (sys != 0)
        ck_assert_uint_eq(kv_l3_bytes(), sys);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* kernels/kv_attention.h                                                   */

START_TEST(test_attention)
{
    /* the inline helpers */
    ck_assert_int_eq(kv_span_pos(NULL, 0, 0, 0), -1);
    const struct kv_span sp = {.n_tokens = 3, .pos0 = 10};
    ck_assert_int_eq(kv_span_pos(&sp, 0, 0, 2), 12);
    /* a position table is never read outside its tokens */
    const int32_t table[3] = {7, 5, 6};
    const struct kv_span tp = {.n_tokens = 3, .pos0 = 10, .pos = table, .pos_seq_stride = 3};
    ck_assert_int_eq(kv_span_pos(&tp, 0, 0, 1), 5);
    ck_assert_int_eq(kv_span_pos(&tp, 0, 0, 3), 13);
    ck_assert_int_eq(kv_span_pos(&tp, 0, 0, -1), 9);
    ck_assert_int_eq(kv_span_pos(&tp, -1, 0, 0), 10);
    ck_assert_int_eq(kv_span_pos(&tp, 0, -1, 0), 10);
    ck_assert_int_eq(kv_view_keys(NULL), 0);
    const struct kv_view nospans = {.spans = NULL, .n_spans = 3};
    ck_assert_int_eq(kv_view_keys(&nospans), 0);
    ck_assert_int_eq(kv_attn_key_visible(NULL, 0, 5, 3), 1);
    ck_assert_int_eq(kv_attn_key_visible(NULL, 0, 3, 5), 0);
    const int32_t pad[1] = {4};
    const struct kv_mask m = {.pad = pad};
    ck_assert_int_eq(kv_attn_key_visible(&m, -1, 5, 3), 1); /* b < 0: no pad */
    ck_assert_int_eq(kv_attn_key_visible(&m, 0, 5, 3), 0);

    /* the calls: NULLs, then params that do not match the view */
    struct kv_cache *c = small_cache("dynamic");
    struct kv_view v;
    ck_assert_int_eq(kv_cache_view(c, 0, &v), KV_OK);
    const struct kv_attn_params good = {.batch = B2, .n_q = 1, .n_heads = 2 * H2,
                                        .n_kv_heads = H2, .head_dim = D8, .q_pos0 = T4 - 1,
                                        .scale = 0.5f, .n_threads = 1};
    const size_t wsb = kv_attn_workspace_bytes(&good);
    ck_assert_uint_gt(wsb, 0);
    void *ws = kv_alloc(wsb);
    float q[B2 * 2 * H2 * D8] = {0}, out[B2 * 2 * H2 * D8];
    ck_assert_int_eq(kv_attn_check(NULL, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_attn_check(&good, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_attn_check(NULL, &v), KV_ERR_INVALID);
    ck_assert_uint_eq(kv_attn_workspace_bytes(NULL), 0);
    ck_assert_int_eq(kv_attn(NULL, NULL, NULL, NULL, NULL, 0), KV_ERR_INVALID);
    ck_assert_int_eq(kv_attn(out, q, &good, &v, NULL, wsb), KV_ERR_INVALID);
    ck_assert_int_eq(kv_attn(out, NULL, &good, &v, ws, wsb), KV_ERR_INVALID);
    ck_assert_int_eq(kv_attn_ref(NULL, NULL, NULL, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_attn_ref(out, NULL, &good, &v), KV_ERR_INVALID);
    ck_assert_int_eq(kv_attn_visible_pairs(NULL, NULL), 0);
    ck_assert_int_eq(kv_attn_visible_pairs(&good, NULL), 0);
    ck_assert_uint_eq(kv_attn_span_bytes(NULL, NULL), 0);
    ck_assert_uint_eq(kv_attn_span_bytes(NULL, &v), 0);
    ck_assert_int_eq(kv_attn(out, q, &good, &v, ws, wsb), KV_OK);
    ck_assert_int_gt(kv_attn_visible_pairs(&good, &v), 0);
    struct kv_attn_params p = good;
    p.batch = B2 + 1; /* one sequence more than the cache */
    ck_assert_int_eq(kv_attn_check(&p, &v), KV_ERR_INVALID);
    ck_assert_int_eq(kv_attn_ref(out, q, &p, &v), KV_ERR_INVALID);
    ck_assert_int_eq(kv_attn_visible_pairs(&p, &v), 0);
    ck_assert_uint_eq(kv_attn_span_bytes(&p, &v), 0);
    p = good;
    p.n_kv_heads = 1; /* fewer heads than the cache: not its layout */
    ck_assert_int_eq(kv_attn(out, q, &p, &v, ws, wsb), KV_ERR_INVALID);
    /* a span of a dtype outside the enum: the counts read no traits */
    struct kv_span bad = v.spans[0];
    bad.k.dtype = (enum kv_dtype)99;
    const struct kv_view bv = {.spans = &bad, .n_spans = 1};
    ck_assert_int_eq(kv_attn_check(&good, &bv), KV_ERR_INVALID);
    ck_assert_uint_eq(kv_attn_span_bytes(&good, &bv), 0);
    ck_assert_int_eq(kv_attn_visible_pairs(&good, &bv), 0);
    kv_free(ws);
    kv_cache_destroy(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* kernels/kv_quant.h                                                       */

START_TEST(test_quant)
{
    float x[64] = {0}, y[64];
    uint8_t codes[64 * 4]; /* room for a row of any dtype */
    struct kv_qparams qp[64];
    ck_assert_int_eq(kv_quant_check((enum kv_dtype)99, 64, 32), KV_ERR_INVALID);
    ck_assert_int_eq(kv_quant_check((enum kv_dtype)-1, 64, 32), KV_ERR_INVALID);
    ck_assert_int_eq(kv_quant_check(KV_DTYPE_Q8, -64, 32), KV_ERR_INVALID);
    ck_assert_int_eq(kv_quant_check(KV_DTYPE_Q8, 64, 0), KV_ERR_INVALID);
    /* per token */
    ck_assert_int_eq(kv_quantize_row(codes, qp, x, (enum kv_dtype)99, 64, 32), KV_ERR_INVALID);
    ck_assert_int_eq(kv_quantize_row(codes, qp, x, KV_DTYPE_Q8, 64, 24), KV_ERR_INVALID);
    ck_assert_int_eq(kv_quantize_row(NULL, qp, x, KV_DTYPE_Q8, 64, 32), KV_ERR_INVALID);
    ck_assert_int_eq(kv_quantize_row(codes, NULL, x, KV_DTYPE_Q8, 64, 32), KV_ERR_INVALID);
    ck_assert_int_eq(kv_quantize_row(codes, qp, NULL, KV_DTYPE_Q8, 64, 32), KV_ERR_INVALID);
    ck_assert_int_eq(kv_quantize_row(codes, qp, x, KV_DTYPE_Q8, -1, 32), KV_ERR_INVALID);
    ck_assert_int_eq(kv_quantize_row(codes, NULL, x, KV_DTYPE_F16, 64, 0), KV_OK); /* no qp */
    ck_assert_int_eq(kv_dequantize_row(y, codes, qp, (enum kv_dtype)99, 64, 32), KV_ERR_INVALID);
    ck_assert_int_eq(kv_dequantize_row(NULL, codes, qp, KV_DTYPE_Q4, 64, 32), KV_ERR_INVALID);
    ck_assert_int_eq(kv_dequantize_row(y, NULL, qp, KV_DTYPE_Q4, 64, 32), KV_ERR_INVALID);
    ck_assert_int_eq(kv_dequantize_row(y, codes, NULL, KV_DTYPE_Q4, 64, 32), KV_ERR_INVALID);
    ck_assert_int_eq(kv_dequantize_row(y, codes, qp, KV_DTYPE_Q4, 64, 3), KV_ERR_INVALID);
    /* per channel */
    ck_assert_int_eq(kv_quantize_rows_channel(codes, 64, qp, x, 64, 1, KV_DTYPE_F32, 64),
                     KV_ERR_INVALID); /* f32 has no qparams */
    ck_assert_int_eq(kv_quantize_rows_channel(codes, 64, qp, x, 64, 0, KV_DTYPE_Q8, 64),
                     KV_ERR_INVALID);
    ck_assert_int_eq(kv_quantize_rows_channel(codes, 64, qp, x, 64, -1, KV_DTYPE_Q8, 64),
                     KV_ERR_INVALID);
    ck_assert_int_eq(kv_quantize_rows_channel(NULL, 64, qp, x, 64, 1, KV_DTYPE_Q8, 64),
                     KV_ERR_INVALID);
    ck_assert_int_eq(kv_quantize_rows_channel(codes, 64, NULL, x, 64, 1, KV_DTYPE_Q8, 64),
                     KV_ERR_INVALID);
    ck_assert_int_eq(kv_quantize_rows_channel(codes, 64, qp, NULL, 64, 1, KV_DTYPE_Q8, 64),
                     KV_ERR_INVALID);
    ck_assert_int_eq(kv_quantize_rows_channel(codes, 64, qp, x, 64, 1, (enum kv_dtype)77, 64),
                     KV_ERR_INVALID);
    ck_assert_int_eq(kv_quantize_rows_channel(codes, 64, qp, x, 64, 1, KV_DTYPE_Q8, 64), KV_OK);
    ck_assert_int_eq(kv_dequantize_row_channel(y, codes, qp, (enum kv_dtype)77, 64),
                     KV_ERR_INVALID);
    ck_assert_int_eq(kv_dequantize_row_channel(y, codes, qp, KV_DTYPE_BF16, 64), KV_ERR_INVALID);
    ck_assert_int_eq(kv_dequantize_row_channel(y, codes, qp, KV_DTYPE_Q4, 63), KV_ERR_INVALID);
    ck_assert_int_eq(kv_dequantize_row_channel(NULL, codes, qp, KV_DTYPE_Q8, 64), KV_ERR_INVALID);
    ck_assert_int_eq(kv_dequantize_row_channel(y, codes, NULL, KV_DTYPE_Q8, 64), KV_ERR_INVALID);
    ck_assert_int_eq(kv_dequantize_row_channel(y, codes, qp, KV_DTYPE_Q8, 64), KV_OK);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* kernels/kv_ops.h                                                         */

START_TEST(test_ops)
{
    float a[16], b[16], c[16];
    int32_t pos[2] = {0, 1};
    int64_t flops = 5;
    for (int i = 0; i < 16; i++)
        a[i] = b[i] = c[i] = 1.0f;
    enum kv_status (*const gemms[2])(float *, const float *, const float *, int64_t, int64_t,
                                     int64_t, float, int64_t *) = {kv_gemm, kv_gemm_ref};
    for (int g = 0; g < 2; g++) {
        ck_assert_int_eq(gemms[g](NULL, a, b, 2, 2, 2, 0.0f, NULL), KV_ERR_INVALID);
        ck_assert_int_eq(gemms[g](c, NULL, b, 2, 2, 2, 0.0f, NULL), KV_ERR_INVALID);
        ck_assert_int_eq(gemms[g](c, a, NULL, 2, 2, 2, 0.0f, NULL), KV_ERR_INVALID);
        ck_assert_int_eq(gemms[g](c, a, b, -1, 2, 2, 0.0f, &flops), KV_ERR_INVALID);
        ck_assert_int_eq(gemms[g](c, a, b, 2, -1, 2, 0.0f, &flops), KV_ERR_INVALID);
        ck_assert_int_eq(gemms[g](c, a, b, 2, 2, -1, 0.0f, &flops), KV_ERR_INVALID);
        ck_assert_int_eq(gemms[g](c, a, b, (int64_t)INT_MAX + 1, 1, 1, 0.0f, &flops),
                         KV_ERR_INVALID); /* past the BLAS integer: no assert */
        ck_assert_int_eq(gemms[g](c, a, b, INT_MAX, INT_MAX, INT_MAX, 0.0f, &flops),
                         KV_ERR_OVERFLOW); /* 2MNK past int64: refused before any read */
        ck_assert_int_eq(flops, 5);
        ck_assert_int_eq(gemms[g](NULL, NULL, NULL, 0, 4, 4, 0.0f, &flops), KV_OK); /* M = 0 */
        c[0] = 3.0f;
        ck_assert_int_eq(gemms[g](c, NULL, NULL, 2, 2, 0, 0.5f, &flops), KV_OK); /* K = 0 */
        ck_assert(c[0] == 1.5f);
        ck_assert_int_eq(flops, 5);
    }
    /* several GEMMs: a bad part refuses the call before any part is written */
    struct kv_gemm_part parts[2] = {{c, b, 2}, {NULL, b, 2}};
    c[0] = 4.0f;
    ck_assert_int_eq(kv_gemm_multi(NULL, 1, a, 2, 2, 0.0f, &flops), KV_ERR_INVALID);
    ck_assert_int_eq(kv_gemm_multi(parts, -1, a, 2, 2, 0.0f, &flops), KV_ERR_INVALID);
    ck_assert_int_eq(kv_gemm_multi(parts, KV_GEMM_MULTI_MAX + 1, a, 2, 2, 0.0f, &flops),
                     KV_ERR_INVALID);
    ck_assert_int_eq(kv_gemm_multi(parts, 2, a, 2, 2, 0.0f, &flops), KV_ERR_INVALID);
    ck_assert_int_eq(kv_gemm_multi(parts, 1, a, -1, 2, 0.0f, &flops), KV_ERR_INVALID);
    ck_assert_int_eq(kv_gemm_multi(parts, 1, NULL, 2, 2, 0.0f, &flops), KV_ERR_INVALID);
    ck_assert_int_eq(kv_gemm_multi(NULL, 0, NULL, 0, 0, 0.0f, &flops), KV_OK);
    ck_assert(c[0] == 4.0f);
    ck_assert_int_eq(flops, 5);
    enum kv_status (*const norms[2])(float *, const float *, const float *, int64_t, int32_t) = {
        kv_rmsnorm, kv_rmsnorm_ref};
    for (int g = 0; g < 2; g++) {
        ck_assert_int_eq(norms[g](NULL, a, b, 1, 4), KV_ERR_INVALID);
        ck_assert_int_eq(norms[g](c, NULL, b, 1, 4), KV_ERR_INVALID);
        ck_assert_int_eq(norms[g](c, a, NULL, 1, 4), KV_ERR_INVALID);
        ck_assert_int_eq(norms[g](c, a, b, 1, 0), KV_ERR_INVALID);
        ck_assert_int_eq(norms[g](c, a, b, 1, -4), KV_ERR_INVALID);
        ck_assert_int_eq(norms[g](c, a, b, -1, 4), KV_ERR_INVALID);
        ck_assert_int_eq(norms[g](c, a, b, INT64_MAX, 4), KV_ERR_OVERFLOW);
        ck_assert_int_eq(norms[g](NULL, NULL, NULL, 0, 4), KV_OK);
    }
    enum kv_status (*const ropes[2])(float *, int32_t, float *, int32_t, int64_t, int32_t,
                                     const int32_t *) = {kv_rope, kv_rope_ref};
    for (int g = 0; g < 2; g++) {
        ck_assert_int_eq(ropes[g](a, 1, NULL, 0, 2, 3, pos), KV_ERR_INVALID); /* odd head_dim */
        ck_assert_int_eq(ropes[g](a, 1, NULL, 0, 2, 0, pos), KV_ERR_INVALID);
        ck_assert_int_eq(ropes[g](a, 1, NULL, 0, 2, -2, pos), KV_ERR_INVALID);
        ck_assert_int_eq(ropes[g](NULL, 1, NULL, 0, 2, 4, pos), KV_ERR_INVALID);
        ck_assert_int_eq(ropes[g](a, 1, NULL, 0, 2, 4, NULL), KV_ERR_INVALID);
        ck_assert_int_eq(ropes[g](a, -1, NULL, 0, 2, 4, pos), KV_ERR_INVALID);
        ck_assert_int_eq(ropes[g](a, 1, b, -1, 2, 4, pos), KV_ERR_INVALID);
        ck_assert_int_eq(ropes[g](a, 1, NULL, 0, -2, 4, pos), KV_ERR_INVALID);
        ck_assert_int_eq(ropes[g](a, INT32_MAX, NULL, 0, INT64_MAX, 2, pos), KV_ERR_OVERFLOW);
        ck_assert_int_eq(ropes[g](a, 1, b, 1, 2, 4, pos), KV_OK);
    }
    ck_assert_int_eq(kv_rope_shift(NULL, a, 2, 4, 3), KV_ERR_INVALID);
    ck_assert_int_eq(kv_rope_shift(c, NULL, 2, 4, 3), KV_ERR_INVALID);
    ck_assert_int_eq(kv_rope_shift(c, a, 2, 5, 3), KV_ERR_INVALID);
    ck_assert_int_eq(kv_rope_shift(c, a, -2, 4, 3), KV_ERR_INVALID);
    ck_assert_int_eq(kv_rope_shift(c, a, 2, 4, 3), KV_OK);
    enum kv_status (*const glus[2])(float *, const float *, int64_t) = {kv_swiglu, kv_swiglu_ref};
    for (int g = 0; g < 2; g++) {
        ck_assert_int_eq(glus[g](NULL, b, 4), KV_ERR_INVALID);
        ck_assert_int_eq(glus[g](a, NULL, 4), KV_ERR_INVALID);
        ck_assert_int_eq(glus[g](a, b, -4), KV_ERR_INVALID);
        ck_assert_int_eq(glus[g](NULL, NULL, 0), KV_OK);
    }
    enum kv_status (*const softs[2])(float *, int32_t) = {kv_softmax, kv_softmax_ref};
    for (int g = 0; g < 2; g++) {
        ck_assert_int_eq(softs[g](NULL, 4), KV_ERR_INVALID);
        ck_assert_int_eq(softs[g](a, 0), KV_ERR_INVALID);
        ck_assert_int_eq(softs[g](a, -1), KV_ERR_INVALID);
        ck_assert_int_eq(softs[g](a, 4), KV_OK);
    }
    ck_assert_int_eq(kv_argmax(NULL, 4), -1);
    ck_assert_int_eq(kv_argmax(a, 0), -1);
    ck_assert_int_eq(kv_argmax(a, -3), -1);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* strategies/strategy.h: the registry and the cache object                 */

START_TEST(test_registry)
{
    const struct kv_strategy_ops *o = (const struct kv_strategy_ops *)1;
    ck_assert_ptr_null(kv_strategy_find(NULL));
    ck_assert_ptr_null(kv_strategy_at(-1));
    ck_assert_ptr_null(kv_strategy_at(kv_strategy_count()));
    ck_assert_ptr_null(kv_strategy_at(INT32_MAX));
    ck_assert_int_eq(kv_strategy_register(NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_strategy_validate(NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_strategy_lookup(NULL, &o, NULL, 0), KV_ERR_INVALID);
    ck_assert_int_eq(kv_strategy_lookup("dynamic", NULL, NULL, 0), KV_ERR_INVALID);
    char small[1];
    ck_assert_int_eq(kv_strategy_lookup("sliding", &o, small, sizeof small), KV_ERR_INVALID);
    ck_assert_ptr_null(kv_strategy_with(1u << 30, 0)); /* a flag nobody has */
    /* the parameter functions that take a NULL table */
    ck_assert_int_eq(kv_param_find(NULL, "window"), -1);
    ck_assert_int_eq(kv_param_find(kv_strategy_find("sliding"), NULL), -1);
    int64_t val;
    ck_assert_int_eq(kv_param_parse_value(NULL, "1", &val), KV_ERR_INVALID);
    kv_params_defaults(NULL, small);
    ck_assert_int_eq(kv_params_set(NULL, small, "window", 1), KV_ERR_INVALID);
    ck_assert_int_eq(kv_params_set_text(NULL, small, "window", "1"), KV_ERR_INVALID);
    ck_assert_int_eq(kv_params_check(NULL, NULL, NULL, NULL, 0), KV_ERR_INVALID);
    ck_assert_int_eq(kv_params_parse(NULL, small, "window=1"), KV_ERR_INVALID);
}
END_TEST

START_TEST(test_cache_create)
{
    const struct kv_strategy_ops *dyn = kv_strategy_find("dynamic");
    const struct kv_cache_config cfg = {.n_layers = 1, .batch = 1, .n_kv_heads = 1,
                                        .head_dim = 8};
    struct kv_cache *c = (struct kv_cache *)1;
    ck_assert_int_eq(kv_cache_create(NULL, dyn, &cfg, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_create(&c, NULL, &cfg, NULL), KV_ERR_INVALID);
    ck_assert_ptr_null(c);
    ck_assert_int_eq(kv_cache_create(&c, dyn, NULL, NULL), KV_ERR_INVALID);
    struct kv_cache_config bad = cfg;
    bad.batch = -1;
    ck_assert_int_eq(kv_cache_create(&c, dyn, &bad, NULL), KV_ERR_INVALID);
    bad = cfg;
    bad.head_dim = 0;
    ck_assert_int_eq(kv_cache_create(&c, dyn, &bad, NULL), KV_ERR_INVALID);
    bad = cfg;
    bad.max_len = -5;
    ck_assert_int_eq(kv_cache_create(&c, dyn, &bad, NULL), KV_ERR_INVALID);
    bad = (struct kv_cache_config){INT32_MAX, INT32_MAX, INT32_MAX, INT32_MAX, 0};
    ck_assert_int_eq(kv_cache_create(&c, dyn, &bad, NULL), KV_ERR_OVERFLOW);
    /* tables a program made itself: parameters past the limit, or a
     * parameter table without a struct (no assert, no read) */
    struct kv_strategy_ops big = *dyn;
    big.params_size = KV_PARAMS_MAX_BYTES + 1;
    ck_assert_int_eq(kv_cache_create(&c, &big, &cfg, NULL), KV_ERR_INVALID);
    char buf[64];
    ck_assert_int_ge(kv_strategy_describe(&big, &cfg, NULL, buf, sizeof buf), 0);
    ck_assert_int_ge(kv_strategy_label(&big, NULL, buf, sizeof buf), 0);
    ck_assert_int_eq(kv_strategy_dtype(&big, NULL), KV_DTYPE_F32);
    struct kv_strategy_ops noparams = *dyn;
    noparams.params = NULL;
    ck_assert_int_eq(kv_cache_create(&c, &noparams, &cfg, NULL), KV_ERR_INVALID);
    struct kv_strategy_ops noinit = *dyn;
    noinit.init = NULL;
    ck_assert_int_eq(kv_cache_create(&c, &noinit, &cfg, NULL), KV_ERR_INVALID);
    ck_assert_ptr_null(c);
    kv_cache_destroy(NULL);
    /* self-description without a cache or a table */
    ck_assert_uint_eq(kv_strategy_caps(NULL, &cfg, NULL), 0);
    memset(buf, 'x', sizeof buf);
    ck_assert_int_eq(kv_strategy_describe(NULL, &cfg, NULL, buf, sizeof buf), 0);
    ck_assert_str_eq(buf, "");
    ck_assert_int_eq(kv_strategy_label(NULL, NULL, buf, sizeof buf), 0);
    ck_assert_int_eq(kv_strategy_dtype(NULL, NULL), KV_DTYPE_F32);
    /* a NULL shape: the plain description (static's own reads the shape) */
    const struct kv_strategy_ops *st = kv_strategy_find("static");
    ck_assert_int_gt(kv_strategy_describe(st, NULL, NULL, buf, sizeof buf), 0);
    ck_assert_str_eq(buf, st->description);
    /* a NULL buffer: the count, nothing written */
    ck_assert_int_gt(kv_strategy_describe(st, &cfg, NULL, NULL, 64), 0);
    ck_assert_int_gt(kv_strategy_label(st, NULL, NULL, 64), 0);
    size_t bytes = 7;
    ck_assert_int_eq(kv_cache_bytes_for(NULL, &cfg, NULL, 4, &bytes), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_bytes_for(dyn, NULL, NULL, 4, &bytes), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_bytes_for(dyn, &cfg, NULL, 4, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_bytes_for(dyn, &cfg, NULL, -1, &bytes), KV_ERR_INVALID);
    ck_assert_uint_eq(bytes, 7);
}
END_TEST

START_TEST(test_cache_calls)
{
    struct kv_cache *c = small_cache("dynamic");
    float kv[B2 * H2 * D8] = {0};
    struct kv_view v;
    ck_assert_int_eq(kv_cache_update(NULL, 0, kv, kv, 1, T4), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_update(c, -1, kv, kv, 1, T4), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_update(c, L1, kv, kv, 1, T4), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_update(c, 0, NULL, kv, 1, T4), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_update(c, 0, kv, NULL, 1, T4), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_update(c, 0, kv, kv, 0, T4), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_update(c, 0, kv, kv, -1, T4), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_update(c, 0, kv, kv, 1, -1), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_update(c, 0, kv, kv, 2, INT32_MAX - 1), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_view(NULL, 0, &v), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_view(c, 0, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_view(c, -1, &v), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_view(c, L1, &v), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_seq_len(NULL, 0), 0);
    ck_assert_int_eq(kv_cache_seq_len(c, -1), 0);
    ck_assert_int_eq(kv_cache_seq_len(c, L1), 0);
    ck_assert_uint_eq(kv_cache_resident_bytes(NULL), 0);
    ck_assert_uint_eq(kv_cache_layer_bytes(NULL, 0), 0);
    ck_assert_uint_eq(kv_cache_layer_bytes(c, -1), 0);
    ck_assert_uint_eq(kv_cache_layer_bytes(c, L1), 0);
    ck_assert_uint_eq(kv_cache_copied_bytes(NULL), 0);
    /* stats: the NULL cache and the NULL output */
    struct kv_cache_stats st;
    memset(&st, 0xff, sizeof st);
    ck_assert_int_eq(kv_cache_stats(NULL, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_stats(c, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_stats(NULL, &st), KV_ERR_INVALID);
    ck_assert_uint_eq(st.resident, 0);
    ck_assert_uint_eq(st.tokens, 0);
    ck_assert_int_eq(kv_cache_stats(c, &st), KV_OK);
    ck_assert_uint_eq(st.resident, kv_cache_resident_bytes(c));
    /* text */
    char buf[64];
    memset(buf, 'x', sizeof buf);
    ck_assert_int_eq(kv_cache_show(NULL, 0, buf, sizeof buf), 0);
    ck_assert_str_eq(buf, "");
    ck_assert_int_eq(kv_cache_show(NULL, 0, NULL, 64), 0);
    ck_assert_int_eq(kv_cache_show(c, 0, NULL, 64), 0);
    ck_assert_int_eq(kv_cache_show(c, -1, buf, sizeof buf), 0);
    memset(buf, 'x', sizeof buf);
    ck_assert_int_eq(kv_cache_describe(NULL, buf, sizeof buf), 0);
    ck_assert_str_eq(buf, "");
    ck_assert_int_eq(kv_cache_describe(NULL, NULL, 64), 0);
    ck_assert_int_gt(kv_cache_describe(c, NULL, 64), 0);
    ck_assert_int_eq(kv_cache_label(NULL, buf, sizeof buf), 0);
    ck_assert_int_eq(kv_cache_label(NULL, NULL, 64), 0);
    ck_assert_int_eq(kv_cache_dtype(NULL), KV_DTYPE_F32);
    ck_assert_int_eq(kv_cache_has(NULL, 0), 0);
    ck_assert_int_eq(kv_cache_mask_window(NULL), 0);
    ck_assert_int_eq(kv_cache_reset(NULL), KV_ERR_INVALID);
    /* the attention mass */
    ck_assert_int_eq(kv_cache_view(c, 0, &v), KV_OK);
    float *mass = (float *)1;
    size_t len = 9;
    ck_assert_int_eq(kv_cache_mass_buffer(NULL, 0, &v, 4, &mass, &len), KV_ERR_INVALID);
    ck_assert_ptr_null(mass);
    ck_assert_uint_eq(len, 0);
    ck_assert_int_eq(kv_cache_mass_buffer(c, 0, NULL, 4, &mass, &len), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_mass_buffer(c, 0, &v, 4, NULL, &len), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_mass_buffer(c, 0, &v, 4, &mass, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_mass_buffer(c, -1, &v, 4, &mass, &len), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_mass_buffer(c, 0, &v, 3, &mass, &len), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_mass_buffer(c, 0, &v, 0, &mass, &len), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_observe(NULL, 0, NULL, 4), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_observe(c, L1, NULL, 4), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_observe(c, 0, NULL, -4), KV_ERR_INVALID);
    /* the optional operations */
    struct kv_cache *d = (struct kv_cache *)1;
    const int32_t far[2] = {0, B2}, neg[2] = {-1, 0}, ok[2] = {1, 0};
    ck_assert_int_eq(kv_cache_crop(NULL, 0), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_crop(c, -1), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_crop(c, T4 + 1), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_fork(NULL, c), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_fork(&d, NULL), KV_ERR_INVALID);
    ck_assert_ptr_null(d);
    ck_assert_int_eq(kv_cache_reorder(NULL, ok, 2), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_reorder(c, NULL, 2), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_reorder(c, ok, 0), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_reorder(c, ok, -2), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_reorder(c, far, 2), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_reorder(c, neg, 2), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_free_seq(NULL, 0), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_free_seq(c, -1), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_free_seq(c, B2), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_copy_seq(NULL, 0, 1), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_copy_seq(c, 0, B2), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_copy_seq(c, -1, 0), KV_ERR_INVALID);
    /* a cache left as it was by all of the above */
    ck_assert_int_eq(kv_cache_seq_len(c, 0), T4);
    ck_assert_int_eq(kv_cache_view(c, 0, &v), KV_OK);
    ck_assert_int_eq(v.batch, B2);
    ck_assert_int_eq(kv_cache_free_seq(c, 1), KV_OK); /* batch 1: the last may not go */
    ck_assert_int_eq(kv_cache_free_seq(c, 0), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_view(c, 0, &v), KV_OK);
    ck_assert_int_eq(v.batch, 1); /* the view follows the batch */
    kv_cache_destroy(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* bench/model/kv_model.h: the model, the runner, generation and its modes        */

static struct kv_model_config tiny_config(void)
{
    return (struct kv_model_config){.dim = 16, .hidden_dim = 32, .n_layers = 2, .n_heads = 2,
                                    .n_kv_heads = 1, .vocab_size = 8, .max_len = 32,
                                    .mlp = 1, .shared_classifier = 1};
}

START_TEST(test_model)
{
    const struct kv_model_config cfg = tiny_config();
    struct kv_model_config bad = cfg;
    ck_assert_int_eq(kv_model_config_check(&cfg), KV_OK);
    ck_assert_int_eq(kv_model_config_check(NULL), KV_ERR_INVALID);
    bad.n_heads = 0;
    ck_assert_int_eq(kv_model_config_check(&bad), KV_ERR_INVALID);
    bad = cfg;
    bad.n_kv_heads = 3;
    ck_assert_int_eq(kv_model_config_check(&bad), KV_ERR_INVALID);
    ck_assert_uint_eq(kv_model_weight_bytes(NULL), 0);
    ck_assert_uint_eq(kv_model_weight_bytes(&bad), 0);
    ck_assert(kv_model_forward_flops(NULL, 1, 1, 0) == 0.0);
    bad = cfg;
    bad.n_heads = 0; /* no division by it */
    ck_assert(kv_model_forward_flops(&bad, 1, 1, 0) == 0.0);
    ck_assert(kv_model_forward_flops(&cfg, -1, 1, 0) == 0.0);
    ck_assert(kv_model_forward_flops(&cfg, 1, 1, 0) > 0.0);
    ck_assert_int_eq(kv_flops_total(NULL), 0);
    struct kv_model *m = (struct kv_model *)1;
    ck_assert_int_eq(kv_model_create_synthetic(NULL, &cfg, 1), KV_ERR_INVALID);
    ck_assert_int_eq(kv_model_create_synthetic(&m, NULL, 1), KV_ERR_INVALID);
    ck_assert_ptr_null(m);
    ck_assert_int_eq(kv_model_create_synthetic(&m, &bad, 1), KV_ERR_INVALID);
    kv_model_destroy(NULL);
    ck_assert_int_eq(kv_model_create_synthetic(&m, &cfg, 1), KV_OK);
    struct kv_runner *r = (struct kv_runner *)1;
    ck_assert_int_eq(kv_runner_create(NULL, m, 1, 4, 1), KV_ERR_INVALID);
    ck_assert_int_eq(kv_runner_create(&r, NULL, 1, 4, 1), KV_ERR_INVALID);
    ck_assert_ptr_null(r);
    ck_assert_int_eq(kv_runner_create(&r, m, 0, 4, 1), KV_ERR_INVALID);
    ck_assert_int_eq(kv_runner_create(&r, m, 1, -4, 1), KV_ERR_INVALID);
    kv_runner_destroy(NULL);
    kv_runner_set_window(NULL, 4);
    kv_runner_set_mask(NULL, 4, 1);
    kv_runner_set_probe(NULL, NULL, NULL);
    /* forward */
    ck_assert_int_eq(kv_runner_create(&r, m, 1, 4, 1), KV_OK);
    const struct kv_cache_config cc = {.n_layers = 2, .batch = 1, .n_kv_heads = 1,
                                       .head_dim = 8};
    struct kv_cache *c;
    ck_assert_int_eq(kv_cache_create(&c, kv_strategy_find("dynamic"), &cc, NULL), KV_OK);
    int32_t toks[4] = {1, 2, 3, 9}; /* 9: outside the vocabulary */
    float logits[4 * 8];
    ck_assert_int_eq(kv_forward(NULL, m, c, toks, 1, 0, NULL, logits, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_forward(r, NULL, c, toks, 1, 0, NULL, logits, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_forward(r, m, NULL, toks, 1, 0, NULL, logits, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_forward(r, m, c, NULL, 1, 0, NULL, logits, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_forward(r, m, c, toks, 1, 0, NULL, NULL, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_forward(r, m, c, toks, 0, 0, NULL, logits, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_forward(r, m, c, toks, 5, 0, NULL, logits, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_forward(r, m, c, toks, 1, -1, NULL, logits, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_forward(r, m, c, toks, 4, 0, NULL, logits, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_forward_all(NULL, m, c, toks, 1, 0, logits, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_forward_all(r, m, c, toks, 4, 0, logits, NULL), KV_ERR_INVALID);
    struct kv_model hollow = *m; /* a model struct of the caller's, without weights */
    hollow.w.wo = NULL;
    ck_assert_int_eq(kv_forward(r, &hollow, c, toks, 1, 0, NULL, logits, NULL), KV_ERR_INVALID);
    hollow = *m;
    hollow.cfg.max_len = INT32_MIN; /* no overflow in the position checks */
    ck_assert_int_eq(kv_forward(r, &hollow, c, toks, 1, 0, NULL, logits, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_seq_len(c, 0), 0); /* nothing stored by a refused call */
    ck_assert_int_eq(kv_prefill_shared(NULL, c, toks, 2, 1, 1, logits, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_prefill_shared(m, c, NULL, 2, 1, 1, logits, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_prefill_shared(m, c, toks, 0, 1, 1, logits, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_prefill_shared(m, c, toks, 2, 0, 1, logits, NULL), KV_ERR_INVALID);
    /* generation and its modes: NULLs, fields out of range, a model whose
     * config is not one */
    int32_t out[8];
    double scores[2];
    struct kv_spec_stats spec;
    const struct kv_gen_params gp = {.batch = 1, .prompt_len = 2, .prompt = toks,
                                     .new_tokens = 2, .n_threads = 1};
    struct kv_gen_params g2 = gp;
    struct kv_model broken = *m;
    broken.cfg.n_heads = 0;
    ck_assert_int_eq(kv_generate(NULL, c, &gp, out, NULL, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_generate(m, NULL, &gp, out, NULL, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_generate(m, c, NULL, out, NULL, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_generate(m, c, &gp, NULL, NULL, NULL), KV_ERR_INVALID);
    ck_assert_int_ne(kv_generate(&broken, c, &gp, out, NULL, NULL), KV_OK);
    g2.batch = 2; /* not the cache's */
    ck_assert_int_eq(kv_generate(m, c, &g2, out, NULL, NULL), KV_ERR_INVALID);
    g2 = gp;
    g2.new_tokens = -1;
    ck_assert_int_eq(kv_generate(m, c, &g2, out, NULL, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_generate_samples(NULL, c, &gp, 1.0f, 1, out, NULL, NULL),
                     KV_ERR_INVALID);
    ck_assert_int_eq(kv_generate_samples(m, c, &gp, -1.0f, 1, out, NULL, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_generate_samples(m, c, &gp, NAN, 1, out, NULL, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_generate_samples(m, c, NULL, 1.0f, 1, out, NULL, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_generate_samples(&broken, c, &gp, 1.0f, 1, out, NULL, NULL),
                     KV_ERR_INVALID);
    ck_assert_int_eq(kv_generate_beams(NULL, c, &gp, out, scores, NULL, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_generate_beams(m, c, &gp, out, NULL, NULL, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_generate_beams(&broken, c, &gp, out, scores, NULL, NULL),
                     KV_ERR_INVALID);
    ck_assert_int_eq(kv_generate_beams_ex(m, NULL, &gp, out, scores, NULL, NULL, NULL),
                     KV_ERR_INVALID);
    ck_assert_int_eq(kv_generate_speculative(NULL, c, &gp, 1, 2, out, &spec), KV_ERR_INVALID);
    ck_assert_int_eq(kv_generate_speculative(m, c, &gp, 0, 2, out, &spec), KV_ERR_INVALID);
    ck_assert_int_eq(kv_generate_speculative(m, c, &gp, 3, 2, out, &spec), KV_ERR_INVALID);
    ck_assert_int_eq(kv_generate_speculative(m, c, &gp, INT32_MAX, 2, out, &spec),
                     KV_ERR_INVALID); /* more layers than the model */
    ck_assert_int_eq(kv_generate_speculative(m, c, &gp, 1, 0, out, &spec), KV_ERR_INVALID);
    ck_assert_int_eq(kv_generate_speculative(m, c, &gp, 1, 65, out, &spec), KV_ERR_INVALID);
    ck_assert_int_eq(kv_generate_speculative(&broken, c, &gp, 1, 2, out, &spec),
                     KV_ERR_INVALID);
    ck_assert_int_eq(kv_generate_speculative_ex(m, c, NULL, 1, 2, out, &spec, NULL, NULL),
                     KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_seq_len(c, 0), 0);
    /* sampling */
    uint64_t rng = 1;
    const float lg[3] = {0.0f, 2.0f, 1.0f};
    ck_assert_int_eq(kv_sample_token(NULL, 3, 1.0f, &rng), -1);
    ck_assert_int_eq(kv_sample_token(lg, 0, 1.0f, &rng), -1);
    ck_assert_int_eq(kv_sample_token(lg, -3, 0.0f, &rng), -1);
    ck_assert_int_eq(kv_sample_token(lg, 3, 1.0f, NULL), -1);
    ck_assert_int_eq(kv_sample_token(lg, 3, 0.0f, NULL), 1); /* greedy needs no stream */
    ck_assert_int_eq(kv_sample_token(lg, 3, NAN, NULL), 1);
    (void)kv_sample_rng(1, INT32_MAX); /* no signed overflow (UBSan) */
    (void)kv_sample_rng(1, -1);
    kv_cache_destroy(c);
    kv_runner_destroy(r);
    kv_model_destroy(m);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* bench/model/checkpoint.h, bench/model/tokenizer.h                                    */

START_TEST(test_checkpoint)
{
    struct kv_model_config cfg = tiny_config();
    size_t bytes = 7;
    struct kv_model *m = (struct kv_model *)1;
    ck_assert_int_eq(kv_checkpoint_file_bytes(NULL, &bytes), KV_ERR_INVALID);
    ck_assert_int_eq(kv_checkpoint_file_bytes(&cfg, NULL), KV_ERR_INVALID);
    cfg.n_heads = 0;
    ck_assert_int_eq(kv_checkpoint_file_bytes(&cfg, &bytes), KV_ERR_INVALID);
    ck_assert_uint_eq(bytes, 7);
    ck_assert_int_eq(kv_checkpoint_read_header("/nonexistent/x.bin", &cfg), KV_ERR_IO);
    ck_assert_int_eq(kv_checkpoint_read_header(NULL, &cfg), KV_ERR_INVALID);
    ck_assert_int_eq(kv_checkpoint_read_header("/nonexistent/x.bin", NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_checkpoint_load("/nonexistent/x.bin", &m), KV_ERR_IO);
    ck_assert_ptr_null(m);
    ck_assert_int_eq(kv_checkpoint_load(NULL, &m), KV_ERR_INVALID);
    ck_assert_int_eq(kv_checkpoint_load("/nonexistent/x.bin", NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_checkpoint_export(NULL, NULL), KV_ERR_INVALID);
    struct kv_model none = {.cfg = tiny_config()}; /* no weights */
    ck_assert_int_eq(kv_checkpoint_export("/nonexistent/x.bin", &none), KV_ERR_INVALID);
    ck_assert_uint_eq(kv_first_nonfinite(NULL, 0), 0);
    ck_assert_uint_eq(kv_first_nonfinite(NULL, 5), 0); /* nothing finite there */
    const float x[3] = {1.0f, NAN, 2.0f};
    ck_assert_uint_eq(kv_first_nonfinite(x, 3), 1);
    kv_checkpoint_unmap(NULL);
}
END_TEST

START_TEST(test_tokenizer)
{
    struct kv_tokenizer *t = (struct kv_tokenizer *)1;
    ck_assert_int_eq(kv_tokenizer_load(&t, "/nonexistent/tok.bin", 0), KV_ERR_IO);
    ck_assert_ptr_null(t);
    ck_assert_int_eq(kv_tokenizer_load(NULL, "/nonexistent/tok.bin", 0), KV_ERR_INVALID);
    ck_assert_int_eq(kv_tokenizer_load(&t, NULL, 0), KV_ERR_INVALID);
    ck_assert_int_eq(kv_tokenizer_load(&t, "/nonexistent/tok.bin", -1), KV_ERR_INVALID);
    ck_assert_int_eq(kv_tokenizer_create(&t, -1, NULL, NULL, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_tokenizer_create(NULL, 1, NULL, NULL, NULL), KV_ERR_INVALID);
    const char *pieces[1] = {NULL};
    const int32_t lens[1] = {-3};
    const float scores[1] = {0.0f};
    ck_assert_int_eq(kv_tokenizer_create(&t, 1, pieces, lens, scores), KV_ERR_INVALID);
    ck_assert_int_eq(kv_tokenizer_create_bytes(NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_tokenizer_save(NULL, "/nonexistent/tok.bin"), KV_ERR_INVALID);
    kv_tokenizer_destroy(NULL);
    ck_assert_int_eq(kv_tokenizer_vocab_size(NULL), 0);
    ck_assert_int_eq(kv_tokenizer_bos(NULL), -1);
    ck_assert_int_eq(kv_tokenizer_eos(NULL), -1);
    ck_assert_uint_eq(kv_tokenizer_default_flags(NULL), 0);
    int32_t ids[8], n = 5;
    ck_assert_int_eq(kv_tokenizer_encode(NULL, "abc", 3, 0, ids, 8, &n), KV_ERR_INVALID);
    ck_assert_ptr_null(kv_tokenizer_piece(NULL, 0, &n));
    const char *bytes = "x";
    ck_assert_uint_eq(kv_tokenizer_decode(NULL, -1, 0, &bytes), 0);
    ck_assert_str_eq(bytes, "");
    ck_assert_int_eq(kv_tokenizer_create_bytes(&t), KV_OK);
    ck_assert_int_eq(kv_tokenizer_save(t, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_tokenizer_encode(t, "abc", 3, 0, ids, 2, &n), KV_ERR_INVALID);
    ck_assert_int_eq(kv_tokenizer_encode(t, NULL, 3, 0, ids, 8, &n), KV_ERR_INVALID);
    ck_assert_int_eq(kv_tokenizer_encode(t, "abc", 3, 0, NULL, 8, &n), KV_ERR_INVALID);
    ck_assert_int_eq(kv_tokenizer_encode(t, "abc", 3, 0, ids, 8, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_tokenizer_encode(t, "abc", 3, 0, ids, -1, &n), KV_ERR_INVALID);
    ck_assert_int_eq(kv_tokenizer_encode(t, "abc", 3, KV_TOK_BOS, ids, 8, &n), KV_ERR_INVALID);
    ck_assert_ptr_null(kv_tokenizer_piece(t, -1, &n));
    ck_assert_ptr_null(kv_tokenizer_piece(t, 256, &n));
    ck_assert_ptr_nonnull(kv_tokenizer_piece(t, 65, NULL));
    ck_assert_uint_eq(kv_tokenizer_decode(t, -1, 999, &bytes), 0);
    ck_assert_uint_eq(kv_tokenizer_decode(t, -1, -5, &bytes), 0);
    ck_assert_uint_eq(kv_tokenizer_decode(t, -1, 65, NULL), 0);
    char buf[16];
    size_t len = 9;
    const int32_t some[3] = {65, 999, -1};
    kv_tokenizer_decode_all(t, NULL, 3, buf, sizeof buf, &len);
    ck_assert_uint_eq(len, 0);
    kv_tokenizer_decode_all(t, some, 3, NULL, 64, &len); /* the length only */
    ck_assert_uint_eq(len, 1);
    kv_tokenizer_decode_all(NULL, some, 3, buf, sizeof buf, NULL);
    ck_assert_str_eq(buf, "");
    kv_tokenizer_decode_all(t, some, -3, buf, sizeof buf, &len);
    ck_assert_uint_eq(len, 0);
    ck_assert_ptr_eq(kv_token_text(NULL, 256, -1, 65, buf, sizeof buf), buf);
    ck_assert_ptr_eq(kv_token_text(t, 256, -1, -7, buf, sizeof buf), buf);
    ck_assert_ptr_null(kv_token_text(t, 256, -1, 65, NULL, 64));
    memset(buf, 'x', sizeof buf);
    ck_assert_ptr_eq(kv_token_text(t, 256, -1, 65, buf, 8), buf); /* under 16: no room */
    ck_assert_str_eq(buf, "");
    kv_tokenizer_destroy(t);
}
END_TEST

/* ------------------------------------------------------------------------ */

static Suite *api_suite(void)
{
    Suite *s = suite_create("api_errors");
    TCase *tc = tcase_create("kernels");
    tcase_add_test(tc, test_common);
    tcase_add_test(tc, test_l3_sysfs);
    tcase_add_test(tc, test_attention);
    tcase_add_test(tc, test_quant);
    tcase_add_test(tc, test_ops);
    suite_add_tcase(s, tc);
    tc = tcase_create("strategies");
    tcase_add_test(tc, test_registry);
    tcase_add_test(tc, test_cache_create);
    tcase_add_test(tc, test_cache_calls);
    suite_add_tcase(s, tc);
    tc = tcase_create("model");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_model);
    tcase_add_test(tc, test_checkpoint);
    tcase_add_test(tc, test_tokenizer);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(api_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
