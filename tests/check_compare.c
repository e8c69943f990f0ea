/*
 * check_compare.c - the sweep CSV reader and `kvlab compare`'s logic on
 * hand-made files written to a temporary directory: a 20% slowdown is
 * flagged, a 2% wobble is not, a change inside the rows' own p95-median
 * spread is not, an improvement is reported, normalisation by the roofline
 * metadata cancels a uniformly slower machine, and every kind of malformed
 * input (truncated line, text in a number column, duplicate keys, missing
 * column, empty file, a 1 MB line, binary bytes, wrong schema ...) is
 * rejected with KV_ERR_FORMAT and a one-line message naming file and line.
 * With --aggregate, a group (one configuration over seq_len) is judged by
 * the median of its rows: a consistent slowdown is flagged, one outlier not.
 * Every failure path is also run under allocation failure injection.
 */
#include <check.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../bench/results/compare.h"
#include "../bench/results/csv_read.h"

/*
 * Normalised values are t / (bytes / gbps) computed in double on both sides
 * with inputs exact in binary up to one rounding each: the ratio of two
 * such quotients is 1 within a few ulps (2^-52 each), far below 1e-12.
 */
#define NORM_RATIO_TOL 1e-12

/* ------------------------------------------------------------------------ */
/* Hand-made sweep files                                                    */

static const char *const HEADER =
    "strategy,layers,dim,heads,kv_heads,head_dim,hidden,batch,window,bits,group,"
    "residual,threads,seq_len,reps,step_ns_median,step_ns_p95,attn_ns_median,"
    "flops_step,attn_flops_step,bytes_step,cache_bytes,copy_bytes_step,"
    "peak_rss_bytes,max_abs_err,rel_err,token_match";

struct row {
    const char *strategy;
    int bits, T;
    double med, p95, attn;   /* ns */
    double flops, bytes;     /* per step */
    double cache;            /* resident cache bytes */
    double token;            /* token_match */
};

/* A row with a tight spread (p95 = 1% above the median). */
static struct row row_of(const char *s, int bits, int T, double med)
{
    return (struct row){s, bits, T, med, med * 1.01, med / 4, 4.0e6 + 1000.0 * T,
                        2.0e6 + 500.0 * T, 4096.0 * T, 1.0};
}

static char tmpdir[64];

static void tmp_path(char *out, size_t cap, const char *name)
{
    ck_assert_int_lt(snprintf(out, cap, "%s/%s", tmpdir, name), (int)cap);
}

static void file_put(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

/* Sweep text: metadata (meta_extra may be ""), header, rows. */
static char *sweep_text(double gbps, double gflops, const char *meta_extra,
                        const struct row *rows, int n)
{
    size_t cap = 4096 + (size_t)n * 512;
    char *buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    size_t w = (size_t)snprintf(buf, cap,
                                "# kvlab sweep\n# schema=1\n# read_gbps=%.17g\n"
                                "# copy_gbps=%.17g\n# sgemm_gflops=%.17g\n# partial=0\n"
                                "# threads=2\n# cpu=test cpu, 2 cores\n%s%s\n",
                                gbps, gbps / 2, gflops, meta_extra, HEADER);
    for (int i = 0; i < n; i++) {
        const struct row *r = &rows[i];
        w += (size_t)snprintf(buf + w, cap - w,
                              "%s,4,512,8,8,64,1376,1,512,%d,32,32,2,%d,5,%.17g,%.17g,"
                              "%.17g,%.17g,%.17g,%.17g,%.17g,0,1000000,0,0,%.17g\n",
                              r->strategy, r->bits, r->T, r->med, r->p95, r->attn, r->flops,
                              r->flops / 10, r->bytes, r->cache, r->token);
        ck_assert_uint_lt(w, cap);
    }
    return buf;
}

static void write_sweep(const char *name, char *path, size_t cap, double gbps, double gflops,
                        const struct row *rows, int n)
{
    char *t = sweep_text(gbps, gflops, "", rows, n);
    tmp_path(path, cap, name);
    file_put(path, t, strlen(t));
    free(t);
}

/* Reads both files and compares; the first failing status. */
static enum kv_status load_compare(const char *pb, const char *pn,
                                   const struct kv_compare_opts *o,
                                   struct kv_csv **b, struct kv_csv **n,
                                   struct kv_compare_result **res, char *err, size_t err_len)
{
    *b = *n = NULL;
    *res = NULL;
    enum kv_status st = kv_csv_read_file(b, pb, err, err_len);
    if (st == KV_OK)
        st = kv_csv_read_file(n, pn, err, err_len);
    if (st == KV_OK)
        st = kv_compare_run(res, *b, *n, o, err, err_len);
    return st;
}

static void release(struct kv_csv *b, struct kv_csv *n, struct kv_compare_result *r)
{
    kv_compare_destroy(r);
    kv_csv_destroy(n);
    kv_csv_destroy(b);
}

/* Base and new with one row per T, new = base * factor[i]. */
static struct kv_compare_result *compare_factors(const char *tag, const double *factors,
                                                 int n, const struct kv_compare_opts *o,
                                                 struct kv_csv **b, struct kv_csv **c)
{
    struct row rb[16], rn[16];
    ck_assert_int_le(n, 16);
    for (int i = 0; i < n; i++) {
        rb[i] = row_of("dynamic", 32, 64 << i, 1.0e6);
        rn[i] = row_of("dynamic", 32, 64 << i, 1.0e6 * factors[i]);
    }
    char pb[128], pn[128], nb[64], nn[64], err[KV_CSV_ERR_LEN];
    snprintf(nb, sizeof nb, "%s_base.csv", tag);
    snprintf(nn, sizeof nn, "%s_new.csv", tag);
    write_sweep(nb, pb, sizeof pb, 20, 100, rb, n);
    write_sweep(nn, pn, sizeof pn, 20, 100, rn, n);
    struct kv_compare_result *res;
    enum kv_status st = load_compare(pb, pn, o, b, c, &res, err, sizeof err);
    ck_assert_msg(st == KV_OK, "compare failed: %s", err);
    return res;
}

/* ------------------------------------------------------------------------ */
/* Verdicts                                                                 */

/* new/base factor and the verdict the default options must give. */
static const struct {
    double factor;
    enum kv_verdict want;
} verdict_cases[] = {
    {1.20, KV_VERDICT_WORSE},  /* a 20% slowdown is flagged */
    {1.02, KV_VERDICT_SAME},   /* a 2% wobble is not */
    {0.98, KV_VERDICT_SAME},
    {0.80, KV_VERDICT_BETTER}, /* an improvement is reported */
    {1.00, KV_VERDICT_SAME},
    {1.06, KV_VERDICT_WORSE},  /* just above the 5% threshold */
};

START_TEST(test_verdict_table)
{
    struct kv_compare_opts o;
    kv_compare_opts_defaults(&o);
    struct kv_csv *b, *c;
    double f = verdict_cases[_i].factor;
    char tag[32];
    snprintf(tag, sizeof tag, "verdict%d", _i);
    struct kv_compare_result *r = compare_factors(tag, &f, 1, &o, &b, &c);
    ck_assert_int_eq(r->n_items, 1);
    ck_assert_int_eq(r->items[0].verdict, verdict_cases[_i].want);
    ck_assert_int_eq(r->n_compared, 1);
    ck_assert_int_eq(r->n_regressed, verdict_cases[_i].want == KV_VERDICT_WORSE);
    ck_assert_int_eq(r->n_improved, verdict_cases[_i].want == KV_VERDICT_BETTER);
    ck_assert_double_eq_tol(r->items[0].ratio, f, 1e-12);
    release(b, c, r);
    ck_assert_int_eq(kv_alloc_live(), 0);
}
END_TEST

START_TEST(test_summary_counts)
{
    /* mixed changes: two regressions, one improvement, two same */
    const double f[5] = {1.30, 1.10, 0.70, 1.01, 0.99};
    struct kv_compare_opts o;
    kv_compare_opts_defaults(&o);
    struct kv_csv *b, *c;
    struct kv_compare_result *r = compare_factors("summary", f, 5, &o, &b, &c);
    ck_assert_int_eq(r->n_compared, 5);
    ck_assert_int_eq(r->n_regressed, 2);
    ck_assert_int_eq(r->n_improved, 1);
    ck_assert_double_eq_tol(r->worst_ratio, 1.30, 1e-12);
    ck_assert_int_eq(r->worst_item, 0);
    /* the summary line carries the same numbers */
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(kv_compare_write(m, r, KV_COMPARE_TABLE), KV_OK);
    fclose(m);
    ck_assert_ptr_nonnull(strstr(text, "summary: 5 compared, 2 regressed, 1 improved, "
                                       "worst ratio 1.300"));
    ck_assert_ptr_nonnull(strstr(text, "slower"));
    ck_assert_ptr_nonnull(strstr(text, "faster"));
    free(text);
    release(b, c, r);
}
END_TEST

START_TEST(test_threshold_option)
{
    /* a 20% slowdown is noise with --threshold 25, a 2% one is not with 1 */
    struct kv_compare_opts o;
    kv_compare_opts_defaults(&o);
    struct kv_csv *b, *c;
    double f = 1.20;
    o.threshold_pct = 25;
    struct kv_compare_result *r = compare_factors("thr25", &f, 1, &o, &b, &c);
    ck_assert_int_eq(r->items[0].verdict, KV_VERDICT_SAME);
    release(b, c, r);
    f = 1.02;
    o.threshold_pct = 1;
    r = compare_factors("thr1", &f, 1, &o, &b, &c);
    ck_assert_int_eq(r->items[0].verdict, KV_VERDICT_WORSE);
    release(b, c, r);
}
END_TEST

START_TEST(test_spread_is_noise)
{
    /* +20% with the base's p95 30% above its median: inside the spread */
    struct row rb = row_of("dynamic", 32, 128, 1.0e6), rn = row_of("dynamic", 32, 128, 1.2e6);
    rb.p95 = 1.3e6;
    char pb[128], pn[128], err[KV_CSV_ERR_LEN];
    write_sweep("spread_base.csv", pb, sizeof pb, 20, 100, &rb, 1);
    write_sweep("spread_new.csv", pn, sizeof pn, 20, 100, &rn, 1);
    struct kv_compare_opts o;
    kv_compare_opts_defaults(&o);
    struct kv_csv *b, *c;
    struct kv_compare_result *r;
    ck_assert_int_eq(load_compare(pb, pn, &o, &b, &c, &r, err, sizeof err), KV_OK);
    ck_assert_int_eq(r->items[0].verdict, KV_VERDICT_SAME);
    ck_assert_double_eq_tol(r->items[0].noise, 0.3e6, 1e-6);
    release(b, c, r);

    /* the new side's own spread counts too */
    rb.p95 = 1.01e6;
    rn.p95 = 1.5e6;
    write_sweep("spread_base.csv", pb, sizeof pb, 20, 100, &rb, 1);
    write_sweep("spread_new.csv", pn, sizeof pn, 20, 100, &rn, 1);
    ck_assert_int_eq(load_compare(pb, pn, &o, &b, &c, &r, err, sizeof err), KV_OK);
    ck_assert_int_eq(r->items[0].verdict, KV_VERDICT_SAME);
    release(b, c, r);

    /* control: the same medians with tight spreads are a regression */
    rn.p95 = 1.2e6 * 1.01;
    write_sweep("spread_new.csv", pn, sizeof pn, 20, 100, &rn, 1);
    ck_assert_int_eq(load_compare(pb, pn, &o, &b, &c, &r, err, sizeof err), KV_OK);
    ck_assert_int_eq(r->items[0].verdict, KV_VERDICT_WORSE);
    release(b, c, r);

    /* attn_ns_median has no p95: only the threshold, whatever the step spread */
    rb.p95 = 2.0e6;
    write_sweep("spread_base.csv", pb, sizeof pb, 20, 100, &rb, 1);
    o.metric = "attn_ns_median";
    ck_assert_int_eq(load_compare(pb, pn, &o, &b, &c, &r, err, sizeof err), KV_OK);
    ck_assert_int_eq(r->uses_spread, 0);
    ck_assert_int_eq(r->items[0].verdict, KV_VERDICT_WORSE); /* attn = med/4, +20% */
    release(b, c, r);
}
END_TEST

START_TEST(test_other_metrics)
{
    struct row rb[2] = {row_of("quantized", 8, 64, 1e6), row_of("quantized", 8, 128, 1e6)};
    struct row rn[2] = {rb[0], rb[1]};
    rn[0].cache *= 2;   /* memory doubled: worse */
    rn[1].token = 0.5;  /* fewer tokens agree: worse although smaller */
    char pb[128], pn[128], err[KV_CSV_ERR_LEN];
    write_sweep("metric_base.csv", pb, sizeof pb, 20, 100, rb, 2);
    write_sweep("metric_new.csv", pn, sizeof pn, 20, 100, rn, 2);
    struct kv_compare_opts o;
    kv_compare_opts_defaults(&o);
    struct kv_csv *b, *c;
    struct kv_compare_result *r;

    o.metric = "cache_bytes";
    o.normalize = 1; /* no effect on a size */
    ck_assert_int_eq(load_compare(pb, pn, &o, &b, &c, &r, err, sizeof err), KV_OK);
    ck_assert_int_eq(r->normalized, 0);
    ck_assert_str_eq(r->unit, "bytes");
    ck_assert_int_eq(r->items[0].verdict, KV_VERDICT_WORSE);
    ck_assert_int_eq(r->items[1].verdict, KV_VERDICT_SAME);
    ck_assert_str_eq(kv_compare_verdict_str(r, KV_VERDICT_WORSE), "worse");
    release(b, c, r);

    o.metric = "token_match";
    ck_assert_int_eq(load_compare(pb, pn, &o, &b, &c, &r, err, sizeof err), KV_OK);
    ck_assert_int_eq(r->smaller_is_better, 0);
    ck_assert_int_eq(r->items[1].verdict, KV_VERDICT_WORSE);
    ck_assert_int_eq(r->n_regressed, 1);
    release(b, c, r);

    o.metric = "no_such_column";
    ck_assert_int_eq(load_compare(pb, pn, &o, &b, &c, &r, err, sizeof err), KV_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err, "no_such_column"));
    release(b, c, r);

    o.metric = "strategy";
    ck_assert_int_eq(load_compare(pb, pn, &o, &b, &c, &r, err, sizeof err), KV_ERR_INVALID);
    release(b, c, r);
    ck_assert_int_eq(kv_alloc_live(), 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Group verdicts (--aggregate)                                             */

/* factors of four rows (one group), the group verdict, the per-row regressions */
static const struct {
    double f[4];
    enum kv_verdict want;
    int rows_regressed;
} group_cases[] = {
    {{1.25, 1.30, 1.20, 1.02}, KV_VERDICT_WORSE, 3},  /* a kernel slowdown at most T */
    {{2.00, 1.00, 1.01, 0.99}, KV_VERDICT_SAME, 1},   /* one 2x outlier is not */
    {{0.70, 0.70, 0.80, 1.00}, KV_VERDICT_BETTER, 0}, /* an improvement */
    {{1.04, 1.03, 1.04, 1.02}, KV_VERDICT_SAME, 0},   /* inside the 5% threshold */
};

START_TEST(test_aggregate_groups)
{
    struct kv_compare_opts o;
    kv_compare_opts_defaults(&o);
    o.aggregate = 1;
    struct kv_csv *b, *c;
    char tag[32];
    snprintf(tag, sizeof tag, "group%d", _i);
    struct kv_compare_result *r = compare_factors(tag, group_cases[_i].f, 4, &o, &b, &c);
    ck_assert_int_eq(r->n_groups, 1);
    ck_assert_int_eq(r->groups[0].first, 0);
    ck_assert_int_eq(r->groups[0].count, 4);
    ck_assert_int_eq(r->groups[0].n_compared, 4);
    ck_assert_int_eq(r->groups[0].verdict, group_cases[_i].want);
    /* the median of four changes: the mean of the middle two, computed here */
    double d[4];
    for (int k = 0; k < 4; k++)
        d[k] = group_cases[_i].f[k] - 1.0;
    for (int x = 0; x < 4; x++)
        for (int y = x + 1; y < 4; y++)
            if (d[y] < d[x]) {
                double t = d[x];
                d[x] = d[y];
                d[y] = t;
            }
    ck_assert_double_eq_tol(r->groups[0].change, 0.5 * (d[1] + d[2]), 1e-12);
    ck_assert_double_eq_tol(r->groups[0].noise, 0.05, 1e-12); /* the threshold */
    ck_assert_int_eq(r->n_regressed, group_cases[_i].rows_regressed);
    ck_assert_int_eq(kv_compare_regressed(r), group_cases[_i].want == KV_VERDICT_WORSE);
    /* without aggregate, any regressed row is a regression */
    r->aggregate = 0;
    ck_assert_int_eq(kv_compare_regressed(r), group_cases[_i].rows_regressed > 0);
    release(b, c, r);
    ck_assert_int_eq(kv_alloc_live(), 0);
}
END_TEST

START_TEST(test_aggregate_two_groups)
{
    /* dynamic unchanged, quantized 30% slower at every T: two groups */
    struct row rb[6], rn[6];
    for (int i = 0; i < 6; i++) {
        int q = i >= 3;
        rb[i] = row_of(q ? "quantized" : "dynamic", q ? 8 : 32, 128 << (i % 3), 2.0e6);
        rn[i] = row_of(q ? "quantized" : "dynamic", q ? 8 : 32, 128 << (i % 3),
                       q ? 2.6e6 : 2.0e6);
    }
    char pb[128], pn[128], err[KV_CSV_ERR_LEN];
    write_sweep("groups_base.csv", pb, sizeof pb, 20, 100, rb, 6);
    write_sweep("groups_new.csv", pn, sizeof pn, 20, 100, rn, 6);
    struct kv_compare_opts o;
    kv_compare_opts_defaults(&o);
    o.aggregate = 1;
    struct kv_csv *b, *c;
    struct kv_compare_result *r;
    ck_assert_int_eq(load_compare(pb, pn, &o, &b, &c, &r, err, sizeof err), KV_OK);
    ck_assert_int_eq(r->n_groups, 2);
    ck_assert_int_eq(r->groups[0].count, 3);
    ck_assert_int_eq(r->groups[0].verdict, KV_VERDICT_SAME);
    ck_assert_int_eq(r->groups[1].first, 3);
    ck_assert_int_eq(r->groups[1].verdict, KV_VERDICT_WORSE);
    ck_assert_int_eq(r->n_groups_regressed, 1);
    ck_assert_int_eq(r->n_groups_improved, 0);
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(kv_compare_write(m, r, KV_COMPARE_TABLE), KV_OK);
    fclose(m);
    ck_assert_ptr_nonnull(strstr(text, "verdict by group (median over T): 2 groups, "
                                       "1 regressed, 0 improved"));
    ck_assert_ptr_nonnull(strstr(text, "slower (median of 3 rows)"));
    free(text);
    release(b, c, r);
    ck_assert_int_eq(kv_alloc_live(), 0);
}
END_TEST

START_TEST(test_attn_vs_rest)
{
    /* row 0: the machine is 2x slower for everything (cancels);
     * row 1: attention 1.3x slower, the rest of the step unchanged;
     * row 2: the rest 2x slower, attention unchanged (reads better) */
    struct row rb[3], rn[3];
    for (int i = 0; i < 3; i++)
        rb[i] = rn[i] = row_of("dynamic", 32, 128 << i, 4.0e6); /* attn = 1e6 */
    rn[0].med = 8.0e6;
    rn[0].attn = 2.0e6;
    rn[1].attn = 1.3e6;
    rn[1].med = 3.0e6 + 1.3e6;
    rn[2].med = 6.0e6 + 1.0e6;
    for (int i = 0; i < 3; i++)
        rn[i].p95 = rn[i].med * 1.01;
    char pb[128], pn[128], err[KV_CSV_ERR_LEN];
    write_sweep("avr_base.csv", pb, sizeof pb, 20, 100, rb, 3);
    write_sweep("avr_new.csv", pn, sizeof pn, 20, 100, rn, 3);
    struct kv_compare_opts o;
    kv_compare_opts_defaults(&o);
    o.metric = KV_METRIC_ATTN_VS_REST;
    o.normalize = 1; /* no effect: needs no machine rates */
    struct kv_csv *b, *c;
    struct kv_compare_result *r;
    ck_assert_int_eq(load_compare(pb, pn, &o, &b, &c, &r, err, sizeof err), KV_OK);
    ck_assert_int_eq(r->self_normalized, 1);
    ck_assert_int_eq(r->normalized, 0);
    ck_assert_str_eq(r->unit, "x rest of step");
    /* base: 1e6 / (4e6 - 1e6) */
    ck_assert_double_eq_tol(r->items[0].base, 1.0 / 3.0, 1e-12);
    ck_assert_double_eq_tol(r->items[0].ratio, 1.0, 1e-12);
    ck_assert_int_eq(r->items[0].verdict, KV_VERDICT_SAME);
    ck_assert_double_eq_tol(r->items[1].ratio, 1.3, 1e-12);
    ck_assert_int_eq(r->items[1].verdict, KV_VERDICT_WORSE);
    ck_assert_double_eq_tol(r->items[2].ratio, 0.5, 1e-12);
    ck_assert_int_eq(r->items[2].verdict, KV_VERDICT_BETTER);
    release(b, c, r);

    /* attention not below the step (not measured, or broken): n/a */
    rn[0].attn = rn[0].med;
    write_sweep("avr_new.csv", pn, sizeof pn, 20, 100, rn, 3);
    ck_assert_int_eq(load_compare(pb, pn, &o, &b, &c, &r, err, sizeof err), KV_OK);
    ck_assert_int_eq(r->items[0].verdict, KV_VERDICT_NA);
    ck_assert_int_eq(r->n_na, 1);
    release(b, c, r);
    ck_assert_int_eq(kv_alloc_live(), 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Normalisation                                                            */

START_TEST(test_normalize_cancels_slower_machine)
{
    /* NEW ran on a machine 2.5x slower in every respect: times x2.5,
     * bandwidth and GEMM rate /2.5. Rows mix bandwidth- and compute-bound. */
    const double s = 2.5, gbps = 20, gflops = 100;
    struct row rb[4], rn[4];
    for (int i = 0; i < 4; i++) {
        rb[i] = row_of(i < 2 ? "dynamic" : "none", 32, 256 << (i % 2), 3.0e6 + 1.0e5 * i);
        if (i == 3)
            rb[i].flops = 1e9; /* compute-bound: flops/gflops > bytes/gbps */
        rn[i] = rb[i];
        rn[i].med *= s;
        rn[i].p95 *= s;
        rn[i].attn *= s;
    }
    char pb[128], pn[128], err[KV_CSV_ERR_LEN];
    write_sweep("norm_base.csv", pb, sizeof pb, gbps, gflops, rb, 4);
    write_sweep("norm_new.csv", pn, sizeof pn, gbps / s, gflops / s, rn, 4);
    struct kv_compare_opts o;
    kv_compare_opts_defaults(&o);
    struct kv_csv *b, *c;
    struct kv_compare_result *r;

    /* raw: everything is slower */
    ck_assert_int_eq(load_compare(pb, pn, &o, &b, &c, &r, err, sizeof err), KV_OK);
    ck_assert_int_eq(r->n_regressed, 4);
    release(b, c, r);

    /* normalised: the machine cancels, for the step and for attention */
    o.normalize = 1;
    const char *metrics[2] = {"step_ns_median", "attn_ns_median"};
    for (int m = 0; m < 2; m++) {
        o.metric = metrics[m];
        ck_assert_int_eq(load_compare(pb, pn, &o, &b, &c, &r, err, sizeof err), KV_OK);
        ck_assert_int_eq(r->normalized, 1);
        ck_assert_str_eq(r->unit, "x roofline");
        ck_assert_int_eq(r->n_compared, 4);
        ck_assert_int_eq(r->n_regressed, 0);
        ck_assert_int_eq(r->n_improved, 0);
        for (int64_t t = 0; t < r->n_items; t++) {
            const struct kv_compare_item *it = &r->items[t];
            ck_assert_double_eq_tol(it->ratio, 1.0, NORM_RATIO_TOL);
            /* the normalised base value, recomputed here from the row */
            const struct row *x = &rb[it->base_row];
            double pred = m == 0 ? fmax(x->bytes / gbps, x->flops / gflops)
                                 : fmax(x->cache / gbps, x->flops / 10 / gflops);
            double v = (m == 0 ? x->med : x->attn) / pred;
            ck_assert_double_eq_tol(it->base, v, v * NORM_RATIO_TOL);
        }
        release(b, c, r);
    }

    /* a real 20% regression on the slower machine is still flagged */
    rn[1].med *= 1.2;
    rn[1].p95 = rn[1].med * 1.01;
    write_sweep("norm_new.csv", pn, sizeof pn, gbps / s, gflops / s, rn, 4);
    o.metric = "step_ns_median";
    ck_assert_int_eq(load_compare(pb, pn, &o, &b, &c, &r, err, sizeof err), KV_OK);
    ck_assert_int_eq(r->n_regressed, 1);
    ck_assert_int_eq(r->items[1].verdict, KV_VERDICT_WORSE);
    release(b, c, r);
}
END_TEST

/*
 * Sweep text with the extra attn_bytes_step column: cells[i] is row i's cell
 * (a number or any text). Built from sweep_text by appending to the header
 * and to each data line.
 */
static char *sweep_text_attn_bytes(double gbps, double gflops, const struct row *rows, int n,
                                   const char *const *cells)
{
    char *t = sweep_text(gbps, gflops, "", rows, n);
    size_t cap = strlen(t) + 64 + (size_t)n * 64, w = 0;
    char *out = malloc(cap);
    ck_assert_ptr_nonnull(out);
    int line = 0; /* 0: header not yet seen; then 1 + data row index */
    for (char *p = t; *p != '\0';) {
        char *nl = strchr(p, '\n');
        ck_assert_ptr_nonnull(nl);
        *nl = '\0';
        if (p[0] == '#')
            w += (size_t)snprintf(out + w, cap - w, "%s\n", p);
        else if (line++ == 0)
            w += (size_t)snprintf(out + w, cap - w, "%s,attn_bytes_step\n", p);
        else
            w += (size_t)snprintf(out + w, cap - w, "%s,%s\n", p, cells[line - 2]);
        ck_assert_uint_lt(w, cap);
        p = nl + 1;
    }
    free(t);
    return out;
}

/*
 * attn_ns_median is predicted from attn_bytes_step (the K/V bytes attention
 * read) when the column is there, not from cache_bytes (capacity): a static
 * cache with a huge preallocation and a dynamic one that read the same bytes
 * in the same time normalise to the same value. Files without the column
 * fall back to cache_bytes, and the result says which side did.
 */
START_TEST(test_normalize_attn_bytes)
{
    const double gbps = 20, gflops = 100;
    struct row rows[2] = {row_of("dynamic", 32, 64, 1e6), row_of("static", 32, 64, 1e6)};
    rows[1].cache = 4096.0 * 8192; /* the whole preallocation */
    const double read = 4096.0 * 64;      /* both read 64 tokens */
    const char *const cells[2] = {"262144", "262144"};
    ck_assert_double_eq(read, 262144.0);
    char pb[128], pn[128], pold[128], err[KV_CSV_ERR_LEN];
    char *t = sweep_text_attn_bytes(gbps, gflops, rows, 2, cells);
    tmp_path(pb, sizeof pb, "ab_base.csv");
    file_put(pb, t, strlen(t));
    tmp_path(pn, sizeof pn, "ab_new.csv");
    file_put(pn, t, strlen(t));
    free(t);
    write_sweep("ab_old.csv", pold, sizeof pold, gbps, gflops, rows, 2);

    struct kv_compare_opts o;
    kv_compare_opts_defaults(&o);
    o.normalize = 1;
    o.metric = "attn_ns_median";
    struct kv_csv *b, *c;
    struct kv_compare_result *r;

    /* both files have the column: static and dynamic normalise alike */
    ck_assert_int_eq(load_compare(pb, pn, &o, &b, &c, &r, err, sizeof err), KV_OK);
    ck_assert_int_eq(r->attn_bytes_fallback, 0);
    ck_assert_int_eq(r->n_items, 2);
    for (int64_t i = 0; i < r->n_items; i++) {
        const struct row *x = &rows[r->items[i].base_row];
        double v = x->attn / fmax(read / gbps, x->flops / 10 / gflops);
        ck_assert_double_eq_tol(r->items[i].base, v, v * NORM_RATIO_TOL);
        ck_assert_double_eq_tol(r->items[i].cur, v, v * NORM_RATIO_TOL);
    }
    ck_assert_double_eq_tol(r->items[0].base, r->items[1].base, r->items[0].base * NORM_RATIO_TOL);
    release(b, c, r);

    /* the new file is old (no column): it falls back to cache_bytes alone */
    ck_assert_int_eq(load_compare(pb, pold, &o, &b, &c, &r, err, sizeof err), KV_OK);
    ck_assert_int_eq(r->attn_bytes_fallback, 2);
    for (int64_t i = 0; i < r->n_items; i++) {
        const struct row *x = &rows[r->items[i].new_row];
        double v = x->attn / fmax(x->cache / gbps, x->flops / 10 / gflops);
        ck_assert_double_eq_tol(r->items[i].cur, v, v * NORM_RATIO_TOL);
    }
    release(b, c, r);
    ck_assert_int_eq(load_compare(pold, pold, &o, &b, &c, &r, err, sizeof err), KV_OK);
    ck_assert_int_eq(r->attn_bytes_fallback, 3);
    release(b, c, r);

    /* the step metric never looks at the column */
    o.metric = "step_ns_median";
    ck_assert_int_eq(load_compare(pb, pold, &o, &b, &c, &r, err, sizeof err), KV_OK);
    ck_assert_int_eq(r->attn_bytes_fallback, 0);
    release(b, c, r);

    /* a cell that is not a number is named when it is needed */
    const char *const bad[2] = {"262144", "lots"};
    t = sweep_text_attn_bytes(gbps, gflops, rows, 2, bad);
    file_put(pn, t, strlen(t));
    free(t);
    o.metric = "attn_ns_median";
    ck_assert_int_eq(load_compare(pb, pn, &o, &b, &c, &r, err, sizeof err), KV_ERR_FORMAT);
    ck_assert_msg(strstr(err, "ab_new.csv:") && strstr(err, "attn_bytes_step"), "%s", err);
    release(b, c, r);
}
END_TEST

START_TEST(test_normalize_needs_metadata)
{
    struct row rb = row_of("dynamic", 32, 64, 1e6);
    char pb[128], pn[128], err[KV_CSV_ERR_LEN];
    write_sweep("nm_base.csv", pb, sizeof pb, 20, 100, &rb, 1);
    struct kv_compare_opts o;
    kv_compare_opts_defaults(&o);
    o.normalize = 1;
    struct kv_csv *b, *c;
    struct kv_compare_result *r;

    /* sgemm_gflops = nan: the line of that metadata is named (line 5) */
    char *t = sweep_text(20, NAN, "", &rb, 1);
    tmp_path(pn, sizeof pn, "nm_nan.csv");
    file_put(pn, t, strlen(t));
    free(t);
    ck_assert_int_eq(load_compare(pb, pn, &o, &b, &c, &r, err, sizeof err), KV_ERR_FORMAT);
    ck_assert_msg(strstr(err, "nm_nan.csv:5:") && strstr(err, "sgemm_gflops"), "%s", err);
    release(b, c, r);

    /* read_gbps = 0 */
    t = sweep_text(0, 100, "", &rb, 1);
    file_put(pn, t, strlen(t));
    free(t);
    ck_assert_int_eq(load_compare(pb, pn, &o, &b, &c, &r, err, sizeof err), KV_ERR_FORMAT);
    ck_assert_msg(strstr(err, "nm_nan.csv:3:") && strstr(err, "read_gbps"), "%s", err);
    release(b, c, r);

    /* no read_gbps line at all */
    char text[2048];
    snprintf(text, sizeof text,
             "# schema=1\n# sgemm_gflops=100\n%s\n"
             "dynamic,4,512,8,8,64,1376,1,512,32,32,32,2,64,5,1e6,1.01e6,2e5,1e7,1e6,"
             "2e6,262144,0,1000000,0,0,1\n", HEADER);
    tmp_path(pn, sizeof pn, "nm_missing.csv");
    file_put(pn, text, strlen(text));
    ck_assert_int_eq(load_compare(pb, pn, &o, &b, &c, &r, err, sizeof err), KV_ERR_FORMAT);
    ck_assert_msg(strstr(err, "nm_missing.csv:3:") && strstr(err, "read_gbps"), "%s", err);
    release(b, c, r);

    /* without --normalize the same file is fine */
    o.normalize = 0;
    ck_assert_int_eq(load_compare(pb, pn, &o, &b, &c, &r, err, sizeof err), KV_OK);
    release(b, c, r);
    ck_assert_int_eq(kv_alloc_live(), 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Joining                                                                  */

/*
 * Schema 2 (dtype and params after the v1 columns): two configurations that
 * the v1 columns cannot tell apart (a parameter of the strategy's own, here
 * a sink count) are distinct keys and join with their own rows; against a
 * schema-1 base they join on the v1 key alone, where a schema-1 row meets
 * two of them: ambiguous, so nothing here matches and that is refused
 * (check_compare_rows.c has the partial cases); a schema-2 file without
 * the two columns is refused at the schema line, an empty dtype cell at its
 * row; an empty params cell reads as "-" (no parameters).
 */
START_TEST(test_schema2)
{
#define V2_ROW(strat, T, med, dtype, params)                                                  \
    strat ",4,512,8,8,64,1376,1,512,32,0,0,2," #T ",9," #med "," #med ",1,1,1,1,1,0,1,0,0,1," \
    dtype "," params "\n"
    char text[4096], pb[128], pn[128], err[KV_CSV_ERR_LEN];
    snprintf(text, sizeof text,
             "# schema=2\n%s,dtype,params\n"
             V2_ROW("sinks", 64, 1e6, "f32", "window=512;sinks=4")
             V2_ROW("sinks", 64, 2e6, "f32", "window=512;sinks=8")
             V2_ROW("sinks", 128, 1e6, "f32", "window=512;sinks=4")
             V2_ROW("sinks", 128, 2e6, "f32", "window=512;sinks=8"),
             HEADER);
    tmp_path(pb, sizeof pb, "v2_base.csv");
    file_put(pb, text, strlen(text));
    snprintf(text, sizeof text,
             "# schema=2\n%s,dtype,params\n"
             V2_ROW("sinks", 128, 2e6, "f32", "window=512;sinks=8")
             V2_ROW("sinks", 64, 1e6, "f32", "window=512;sinks=4")
             V2_ROW("sinks", 64, 3e6, "f32", "window=512;sinks=8")
             V2_ROW("sinks", 128, 1e6, "f32", "window=512;sinks=4"),
             HEADER);
    tmp_path(pn, sizeof pn, "v2_new.csv");
    file_put(pn, text, strlen(text));
    struct kv_compare_opts o;
    kv_compare_opts_defaults(&o);
    o.aggregate = 1;
    struct kv_csv *b, *c;
    struct kv_compare_result *r;
    ck_assert_int_eq(load_compare(pb, pn, &o, &b, &c, &r, err, sizeof err), KV_OK);
    ck_assert_int_eq(r->use_ext, 1);
    ck_assert_int_eq(r->n_items, 4); /* every row found its own partner */
    ck_assert_int_eq(r->n_only_base + r->n_only_new, 0);
    ck_assert_int_eq(r->n_regressed, 1); /* sinks=8 at T=64: 2e6 -> 3e6 */
    ck_assert_int_eq(r->n_groups, 2);    /* one group per parameter set */
    for (int64_t t = 0; t < r->n_items; t++) /* joined on their own params */
        ck_assert_str_eq(kv_csv_cell(b, r->items[t].base_row, r->col_ext_base[1]),
                         kv_csv_cell(c, r->items[t].new_row, r->col_ext_cur[1]));
    /* the table names the parameters where they differ */
    char *tbl = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&tbl, &len);
    ck_assert_int_eq(kv_compare_write(m, r, KV_COMPARE_TABLE), KV_OK);
    fclose(m);
    ck_assert_ptr_nonnull(strstr(tbl, "sinks=8"));
    free(tbl);
    release(b, c, r);

    /* a schema-1 base: the v1 key only, so each of its rows meets the v2
     * file's two rows of that T: ambiguous, not a duplicate */
    snprintf(text, sizeof text, "# schema=1\n%s\n%s%s", HEADER,
             "sinks,4,512,8,8,64,1376,1,512,32,0,0,2,64,9,1e6,1e6,1,1,1,1,1,0,1,0,0,1\n",
             "sinks,4,512,8,8,64,1376,1,512,32,0,0,2,128,9,1e6,1e6,1,1,1,1,1,0,1,0,0,1\n");
    tmp_path(pb, sizeof pb, "v2_oldbase.csv");
    file_put(pb, text, strlen(text));
    ck_assert_int_eq(load_compare(pb, pn, &o, &b, &c, &r, err, sizeof err), KV_ERR_FORMAT);
    ck_assert_ptr_null(strstr(err, "duplicate configuration"));
    ck_assert_ptr_nonnull(strstr(err, "no configuration in common"));
    ck_assert_ptr_nonnull(strstr(err, "2 rows of BASE and 4 of NEW are ambiguous"));
    release(b, c, r);

    /* schema 2 without its columns, or with an empty params cell */
    snprintf(text, sizeof text, "# schema=2\n%s\n%s\n", HEADER,
             "dynamic,4,512,8,8,64,1376,1,512,32,32,32,2,64,5,1,1,1,1,1,1,1,0,1,0,0,1");
    tmp_path(pn, sizeof pn, "v2_nocols.csv");
    file_put(pn, text, strlen(text));
    ck_assert_int_eq(load_compare(pn, pn, &o, &b, &c, &r, err, sizeof err), KV_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(err, "v2_nocols.csv:1:"));
    ck_assert_ptr_nonnull(strstr(err, "dtype and params"));
    release(b, c, r);
    snprintf(text, sizeof text, "# schema=2\n%s,dtype,params\n%s,,-\n", HEADER,
             "dynamic,4,512,8,8,64,1376,1,512,32,32,32,2,64,5,1,1,1,1,1,1,1,0,1,0,0,1");
    tmp_path(pn, sizeof pn, "v2_empty.csv");
    file_put(pn, text, strlen(text));
    ck_assert_int_eq(load_compare(pn, pn, &o, &b, &c, &r, err, sizeof err), KV_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(err, "v2_empty.csv:3: empty 'dtype'"));
    release(b, c, r);
    /* empty params against "-": the same configuration */
    snprintf(text, sizeof text, "# schema=2\n%s,dtype,params\n%s,f32,-\n", HEADER,
             "dynamic,4,512,8,8,64,1376,1,512,32,32,32,2,64,5,1,1,1,1,1,1,1,0,1,0,0,1");
    tmp_path(pb, sizeof pb, "v2_dash.csv");
    file_put(pb, text, strlen(text));
    snprintf(text, sizeof text, "# schema=2\n%s,dtype,params\n%s,f32,\n", HEADER,
             "dynamic,4,512,8,8,64,1376,1,512,32,32,32,2,64,5,1,1,1,1,1,1,1,0,1,0,0,1");
    tmp_path(pn, sizeof pn, "v2_noparams.csv");
    file_put(pn, text, strlen(text));
    ck_assert_int_eq(load_compare(pb, pn, &o, &b, &c, &r, err, sizeof err), KV_OK);
    ck_assert_int_eq(r->use_ext, 1);
    ck_assert_int_eq(r->n_items, 1);
    release(b, c, r);
#undef V2_ROW
}
END_TEST

START_TEST(test_join)
{
    /* base: dynamic T=64,128,256 and static T=64; new: shuffled, with
     * other reps, dynamic T=512 extra, static missing, window changed on
     * one row (a different key). */
    struct row rb[4] = {row_of("dynamic", 32, 64, 1e6), row_of("dynamic", 32, 128, 2e6),
                        row_of("dynamic", 32, 256, 4e6), row_of("static", 32, 64, 1e6)};
    char pb[128], pn[128], err[KV_CSV_ERR_LEN];
    write_sweep("join_base.csv", pb, sizeof pb, 20, 100, rb, 4);
    char text[4096];
    snprintf(text, sizeof text,
             "# schema=1\n%s\n"
             "dynamic,4,512,8,8,64,1376,1,512,32,32,32,2,256,9,4.8e6,4.9e6,1,1,1,1,1,0,1,0,0,1\n"
             "dynamic,4,512,8,8,64,1376,1,512,32,32,32,2,512,9,8e6,8.1e6,1,1,1,1,1,0,1,0,0,1\n"
             "dynamic,4,512,8,8,64,1376,1,256,32,32,32,2,128,9,2e6,2e6,1,1,1,1,1,0,1,0,0,1\n"
             "dynamic,4,512,8,8,64,1376,1,512,32,32,32,2,64,7,1e6,1e6,1,1,1,1,1,0,1,0,0,1\n",
             HEADER);
    tmp_path(pn, sizeof pn, "join_new.csv");
    file_put(pn, text, strlen(text));
    struct kv_compare_opts o;
    kv_compare_opts_defaults(&o);
    struct kv_csv *b, *c;
    struct kv_compare_result *r;
    ck_assert_int_eq(load_compare(pb, pn, &o, &b, &c, &r, err, sizeof err), KV_OK);
    ck_assert_int_eq(r->n_items, 2); /* T=64 and T=256, both window 512 */
    ck_assert_int_eq(r->n_only_base, 2);
    ck_assert_int_eq(r->n_only_new, 2);
    /* items are in key order: T=64 first */
    ck_assert_int_eq(r->items[0].base_row, 0);
    ck_assert_int_eq(r->items[0].new_row, 3);
    ck_assert_int_eq(r->items[1].base_row, 2);
    ck_assert_int_eq(r->items[1].new_row, 0);
    ck_assert_int_eq(r->items[1].verdict, KV_VERDICT_WORSE); /* 4e6 -> 4.8e6 */
    ck_assert_int_eq(r->n_regressed, 1);
    /* the JSON lists every NEW row, naming the window where windows differ */
    char *js = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&js, &len);
    ck_assert_int_eq(kv_compare_write(m, r, KV_COMPARE_JSON), KV_OK);
    fclose(m);
    int records = 0;
    for (const char *p = js; (p = strstr(p, "\"name\"")) != NULL; p++)
        records++;
    ck_assert_int_eq(records, 4);
    ck_assert_ptr_nonnull(strstr(js, "\"name\": \"dynamic/window=256/bits=32/T=128/step_ns_median\""));
    ck_assert_ptr_nonnull(strstr(js, "\"unit\": \"ns\", \"value\": 8000000}"));
    ck_assert_int_eq(js[0], '[');
    free(js);
    release(b, c, r);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Malformed input                                                          */

#define GOOD_ROW "dynamic,4,512,8,8,64,1376,1,512,32,32,32,2,64,5,1e6,1.01e6,2e5,1e7,1e6,2e6,262144,0,1000000,0,0,1"
#define GOOD_ROW2 "dynamic,4,512,8,8,64,1376,1,512,32,32,32,2,128,5,1e6,1.01e6,2e5,1e7,1e6,2e6,262144,0,1000000,0,0,1"

/* Text (with %s for the header), and the line the message must name (0:
 * no line). Line 1 is "# schema=1" unless the text says otherwise. */
static const struct {
    const char *name, *text;
    int line;
} bad_cases[] = {
    {"truncated", "# schema=1\n%s\n" GOOD_ROW "\ndynamic,4,512,8,8,64,1376,1,5", 4},
    {"text_in_number", "# schema=1\n%s\n" GOOD_ROW "\n"
     "dynamic,4,512,8,8,64,1376,1,512,32,32,32,2,128,5,fast,1.01e6,2e5,1e7,1e6,2e6,262144,0,1000000,0,0,1\n", 4},
    {"text_in_key", "# schema=1\n%s\n"
     "dynamic,4,512.5,8,8,64,1376,1,512,32,32,32,2,64,5,1e6,1.01e6,2e5,1e7,1e6,2e6,262144,0,1000000,0,0,1\n", 3},
    {"empty_number", "# schema=1\n%s\n"
     "dynamic,4,512,8,8,64,1376,1,512,32,32,32,2,64,5,,1.01e6,2e5,1e7,1e6,2e6,262144,0,1000000,0,0,1\n", 3},
    {"duplicate_key", "# schema=1\n%s\n" GOOD_ROW "\n" GOOD_ROW2 "\n\n" GOOD_ROW "\n", 6},
    {"missing_column", "# schema=1\nstrategy,layers,dim,heads,kv_heads,head_dim,hidden,batch,window,bits,group,residual,threads,seq_len,reps,step_ns_median,step_ns_p95,attn_ns_median%s\n", 2},
    {"empty", "", 1},
    {"only_comments", "# schema=1\n# partial=0\n\n", 3},
    {"no_rows", "# schema=1\n%s\n", 2},
    {"wrong_schema", "# kvlab sweep\n# schema=2\n%s\n" GOOD_ROW "\n", 2},
    {"no_schema", "# kvlab sweep\n%s\n" GOOD_ROW "\n", 2},
    {"repeated_meta", "# schema=1\n# read_gbps=3\n# read_gbps=4\n%s\n" GOOD_ROW "\n", 3},
    {"extra_field", "# schema=1\n%s\n" GOOD_ROW ",7\n", 3},
    {"bad_quote", "# schema=1\n%s\n\"dynamic,4\n", 3},
    {"duplicate_column", "# schema=1\n%s,rel_err\n", 2},
    {"control_byte", "# schema=1\n%s\n" GOOD_ROW "\x1b[0m\n", 3},
    {"bare_cr", "# schema=1\r%s\n", 1},
};

static void check_one_line(const char *err)
{
    ck_assert_msg(err[0] != '\0', "empty message");
    ck_assert_msg(strchr(err, '\n') == NULL, "message has a newline: %s", err);
}

START_TEST(test_bad_input)
{
    char text[8192], path[128], good[128], err[KV_CSV_ERR_LEN], want[160];
    /* "%s" in the case text stands for the header ("missing column": nothing) */
    const char *fmt = bad_cases[_i].text, *at = strstr(fmt, "%s");
    const char *h = strcmp(bad_cases[_i].name, "missing_column") == 0 ? "" : HEADER;
    if (at == NULL)
        snprintf(text, sizeof text, "%s", fmt);
    else
        snprintf(text, sizeof text, "%.*s%s%s", (int)(at - fmt), fmt, h, at + 2);
    char name[64];
    snprintf(name, sizeof name, "bad_%s.csv", bad_cases[_i].name);
    tmp_path(path, sizeof path, name);
    file_put(path, text, strlen(text));
    struct row rg = row_of("dynamic", 32, 64, 1e6);
    write_sweep("bad_good.csv", good, sizeof good, 20, 100, &rg, 1);

    struct kv_compare_opts o;
    kv_compare_opts_defaults(&o);
    struct kv_csv *b, *c;
    struct kv_compare_result *r;
    /* as NEW and as BASE */
    for (int side = 0; side < 2; side++) {
        err[0] = '\0';
        enum kv_status st = side == 0 ? load_compare(good, path, &o, &b, &c, &r, err, sizeof err)
                                      : load_compare(path, good, &o, &b, &c, &r, err, sizeof err);
        ck_assert_msg(st == KV_ERR_FORMAT, "%s: status %d (%s)", name, st, err);
        ck_assert_ptr_null(r);
        check_one_line(err);
        snprintf(want, sizeof want, "%s:%d: ", path, bad_cases[_i].line);
        ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "want '%s...', got '%s'", want, err);
        release(b, c, r);
    }
    ck_assert_int_eq(kv_alloc_live(), 0);
}
END_TEST

START_TEST(test_huge_line_and_binary)
{
    char path[128], good[128], err[KV_CSV_ERR_LEN];
    struct row rg = row_of("dynamic", 32, 64, 1e6);
    write_sweep("hb_good.csv", good, sizeof good, 20, 100, &rg, 1);
    struct kv_compare_opts o;
    kv_compare_opts_defaults(&o);
    struct kv_csv *b, *c;
    struct kv_compare_result *r;

    /* a 1 MB line (line 3) after a valid start */
    size_t big = 1u << 20;
    size_t hl = strlen(HEADER);
    char *t = malloc(big + hl + 64);
    ck_assert_ptr_nonnull(t);
    size_t w = (size_t)sprintf(t, "# schema=1\n%s\n", HEADER);
    memset(t + w, 'x', big);
    w += big;
    t[w++] = '\n';
    tmp_path(path, sizeof path, "huge_line.csv");
    file_put(path, t, w);
    ck_assert_int_eq(load_compare(good, path, &o, &b, &c, &r, err, sizeof err), KV_ERR_FORMAT);
    check_one_line(err);
    ck_assert_msg(strstr(err, "huge_line.csv:3: line is longer than"), "%s", err);
    release(b, c, r);

    /* the same through the in-memory parser, without a final newline */
    ck_assert_int_eq(kv_csv_parse(&b, t, w - 1, "mem", err, sizeof err), KV_ERR_FORMAT);
    ck_assert_ptr_null(b);
    ck_assert_msg(strncmp(err, "mem:3:", 6) == 0, "%s", err);

    /* a binary file: bytes 0..255 repeated */
    for (size_t i = 0; i < 4096; i++)
        t[i] = (char)(i * 7 + 3);
    tmp_path(path, sizeof path, "binary.bin");
    file_put(path, t, 4096);
    ck_assert_int_eq(load_compare(good, path, &o, &b, &c, &r, err, sizeof err), KV_ERR_FORMAT);
    check_one_line(err);
    ck_assert_msg(strstr(err, "binary data"), "%s", err);
    release(b, c, r);

    /* a valid file with one NUL byte in a row */
    char *s = sweep_text(20, 100, "", &rg, 1);
    size_t sl = strlen(s);
    s[sl - 5] = '\0';
    tmp_path(path, sizeof path, "nul.csv");
    file_put(path, s, sl);
    free(s);
    ck_assert_int_eq(load_compare(good, path, &o, &b, &c, &r, err, sizeof err), KV_ERR_FORMAT);
    ck_assert_msg(strstr(err, "nul.csv:10: NUL byte"), "%s", err);
    release(b, c, r);
    free(t);

    /* a missing file and a directory: I/O errors naming the path */
    tmp_path(path, sizeof path, "does_not_exist.csv");
    ck_assert_int_eq(load_compare(good, path, &o, &b, &c, &r, err, sizeof err), KV_ERR_IO);
    ck_assert_msg(strstr(err, "does_not_exist.csv: cannot open"), "%s", err);
    release(b, c, r);
    ck_assert_int_eq(load_compare(good, tmpdir, &o, &b, &c, &r, err, sizeof err), KV_ERR_IO);
    release(b, c, r);

    /* no rows in common */
    struct row ro = row_of("static", 32, 64, 1e6);
    write_sweep("hb_other.csv", path, sizeof path, 20, 100, &ro, 1);
    ck_assert_int_eq(load_compare(good, path, &o, &b, &c, &r, err, sizeof err), KV_ERR_FORMAT);
    ck_assert_msg(strstr(err, "hb_other.csv:10: no configuration in common"), "%s", err);
    release(b, c, r);
    ck_assert_int_eq(kv_alloc_live(), 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The reader itself                                                        */

START_TEST(test_reader_syntax)
{
    const char *text = "\xef\xbb" "x\r\n"; /* not a header we use, but legal text */
    struct kv_csv *c;
    char err[KV_CSV_ERR_LEN];
    ck_assert_int_eq(kv_csv_parse(&c, text, strlen(text), "t", err, sizeof err), KV_OK);
    ck_assert_int_eq(c->n_cols, 1);
    kv_csv_destroy(c);

    text = "  # a comment without a key\n"
           "#k1=v1\n"
           "# k2 = spaced value  \n"
           "\n"
           " a , \"b, c\" ,\"say \"\"hi\"\"\"\r\n"
           "1,2,3\n"
           "# late=1\n"
           "\t\n"
           "  4 ,\"\", 6"; /* no final newline */
    ck_assert_int_eq(kv_csv_parse(&c, text, strlen(text), "t", err, sizeof err), KV_OK);
    ck_assert_int_eq(c->n_meta, 3);
    ck_assert_str_eq(kv_csv_meta_find(c, "k1")->value, "v1");
    ck_assert_str_eq(kv_csv_meta_find(c, "k2")->value, "spaced value");
    ck_assert_int_eq(kv_csv_meta_find(c, "late")->line, 7);
    ck_assert_ptr_null(kv_csv_meta_find(c, "a"));
    ck_assert_int_eq(c->n_cols, 3);
    ck_assert_str_eq(c->cols[0], "a");
    ck_assert_str_eq(c->cols[1], "b, c");
    ck_assert_str_eq(c->cols[2], "say \"hi\"");
    ck_assert_int_eq(c->header_line, 5);
    ck_assert_int_eq(c->n_rows, 2);
    ck_assert_int_eq(c->row_line[0], 6);
    ck_assert_int_eq(c->row_line[1], 9);
    ck_assert_str_eq(kv_csv_cell(c, 1, 0), "4");
    ck_assert_str_eq(kv_csv_cell(c, 1, 1), "");
    ck_assert_str_eq(kv_csv_cell(c, 1, 2), "6");
    ck_assert_int_eq(kv_csv_col(c, "say \"hi\""), 2);
    ck_assert_int_eq(kv_csv_col(c, "nope"), -1);
    kv_csv_destroy(c);

    /* a line of exactly the limit is fine, one byte more is not */
    size_t n = KV_CSV_MAX_LINE;
    char *t = malloc(n + 2);
    ck_assert_ptr_nonnull(t);
    memset(t, 'a', n);
    ck_assert_int_eq(kv_csv_parse(&c, t, n, "t", err, sizeof err), KV_OK);
    kv_csv_destroy(c);
    t[n] = 'a';
    ck_assert_int_eq(kv_csv_parse(&c, t, n + 1, "t", err, sizeof err), KV_ERR_FORMAT);
    free(t);
    ck_assert_int_eq(kv_alloc_live(), 0);
}
END_TEST

static const struct {
    const char *s;
    int ok;
} number_cases[] = {
    {"0", 1}, {"-1.5", 1}, {"+2e3", 1}, {"1.", 1}, {".5", 1}, {"1e-400", 1},
    {"nan", 1}, {"-inf", 1}, {"Infinity", 1}, {"", 0}, {" 1", 0}, {"1 ", 0},
    {"0x10", 0}, {"1e", 0}, {"e5", 0}, {".", 0}, {"1,5", 0}, {"1e999", 0},
    {"abc", 0}, {"--1", 0}, {"nan1", 0},
};

START_TEST(test_numbers)
{
    double v;
    int ok = kv_csv_parse_double(number_cases[_i].s, &v) == 0;
    ck_assert_msg(ok == number_cases[_i].ok, "'%s'", number_cases[_i].s);
    if (ok && strcmp(number_cases[_i].s, "nan") != 0) {
        /* an independent reading of the same text */
        char *end;
        ck_assert_double_eq(v, strtod(number_cases[_i].s, &end));
    }
}
END_TEST

START_TEST(test_integers)
{
    int64_t v;
    ck_assert_int_eq(kv_csv_parse_int64("9223372036854775807", &v), 0);
    ck_assert_int_eq(v, INT64_MAX);
    ck_assert_int_eq(kv_csv_parse_int64("-9223372036854775808", &v), 0);
    ck_assert_int_eq(v, INT64_MIN);
    ck_assert_int_eq(kv_csv_parse_int64("9223372036854775808", &v), -1);
    ck_assert_int_eq(kv_csv_parse_int64("12a", &v), -1);
    ck_assert_int_eq(kv_csv_parse_int64("1.0", &v), -1);
    ck_assert_int_eq(kv_csv_parse_int64("", &v), -1);
    ck_assert_int_eq(kv_csv_parse_int64("-", &v), -1);
    ck_assert_int_eq(kv_csv_parse_int64("+42", &v), 0);
    ck_assert_int_eq(v, 42);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Allocation failures                                                      */

START_TEST(test_alloc_failures)
{
    struct row rb[3] = {row_of("dynamic", 32, 64, 1e6), row_of("dynamic", 32, 128, 2e6),
                        row_of("none", 32, 64, 3e6)};
    char pb[128], pn[128], err[KV_CSV_ERR_LEN];
    write_sweep("af_base.csv", pb, sizeof pb, 20, 100, rb, 3);
    rb[1].med *= 1.5;
    write_sweep("af_new.csv", pn, sizeof pn, 20, 100, rb, 3);
    struct kv_compare_opts o;
    kv_compare_opts_defaults(&o);
    o.normalize = 1;
    struct kv_csv *b, *c;
    struct kv_compare_result *r;
    /* count the allocations of a clean run, then fail each in turn */
    kv_alloc_fail_at(0, 0);
    ck_assert_int_eq(load_compare(pb, pn, &o, &b, &c, &r, err, sizeof err), KV_OK);
    int64_t total = kv_alloc_count();
    ck_assert_int_eq(r->n_regressed, 1);
    release(b, c, r);
    ck_assert_int_gt(total, 5);
    for (int64_t k = 1; k <= total; k++) {
        kv_alloc_fail_at(k, 0);
        enum kv_status st = load_compare(pb, pn, &o, &b, &c, &r, err, sizeof err);
        ck_assert_msg(st == KV_ERR_NOMEM, "k=%lld: status %d", (long long)k, st);
        check_one_line(err);
        release(b, c, r);
        ck_assert_int_eq(kv_alloc_live(), 0);
    }
    kv_alloc_fail_at(0, 0);
}
END_TEST

/* ------------------------------------------------------------------------ */

static void tmpdir_remove(void)
{
    DIR *d = opendir(tmpdir);
    if (d == NULL)
        return;
    struct dirent *e;
    char p[512];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(tmpdir);
}

int main(void)
{
    strcpy(tmpdir, "/tmp/kvlab_compare_XXXXXX");
    if (mkdtemp(tmpdir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    Suite *s = suite_create("compare");
    TCase *tc = tcase_create("verdicts");
    tcase_add_loop_test(tc, test_verdict_table, 0,
                        (int)(sizeof verdict_cases / sizeof verdict_cases[0]));
    tcase_add_test(tc, test_summary_counts);
    tcase_add_test(tc, test_threshold_option);
    tcase_add_test(tc, test_spread_is_noise);
    tcase_add_loop_test(tc, test_aggregate_groups, 0,
                        (int)(sizeof group_cases / sizeof group_cases[0]));
    tcase_add_test(tc, test_aggregate_two_groups);
    tcase_add_test(tc, test_attn_vs_rest);
    tcase_add_test(tc, test_other_metrics);
    suite_add_tcase(s, tc);
    tc = tcase_create("normalize");
    tcase_add_test(tc, test_normalize_cancels_slower_machine);
    tcase_add_test(tc, test_normalize_needs_metadata);
    tcase_add_test(tc, test_normalize_attn_bytes);
    suite_add_tcase(s, tc);
    tc = tcase_create("join");
    tcase_add_test(tc, test_join);
    tcase_add_test(tc, test_schema2);
    suite_add_tcase(s, tc);
    tc = tcase_create("bad_input");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_bad_input, 0, (int)(sizeof bad_cases / sizeof bad_cases[0]));
    tcase_add_test(tc, test_huge_line_and_binary);
    tcase_add_test(tc, test_alloc_failures);
    suite_add_tcase(s, tc);
    tc = tcase_create("reader");
    tcase_add_test(tc, test_reader_syntax);
    tcase_add_loop_test(tc, test_numbers, 0, (int)(sizeof number_cases / sizeof number_cases[0]));
    tcase_add_test(tc, test_integers);
    suite_add_tcase(s, tc);

    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    tmpdir_remove();
    return failed;
}
