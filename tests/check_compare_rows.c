/*
 * check_compare_rows.c - which rows `kvlab compare` judges, and how, on
 * hand-made sweep files of schemas 1, 2 and 3 (check_compare.c has the
 * verdicts and the reader on schema 1).
 *
 * The join across schemas: a schema-1 baseline against a schema-2 sweep
 * whose dynamic-f16 and dynamic-bf16 rows share every v1 column is no
 * longer refused: what matches one row on each side is compared, the rest
 * is listed as in one file only or ambiguous; only no match at all, or the
 * same full key twice in one file, is refused. The noise columns of schema
 * 3: a change is called only when the two rows' confidence intervals
 * separate by the threshold, a row marked noisy is never judged, and the
 * outcome is a clean regression first, else noisy (the CLI's exit 3), else
 * clean, per row or, with aggregate, per group.
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

/* ------------------------------------------------------------------------ */
/* Hand-made sweep files                                                    */

static const char *const HEADER =
    "strategy,layers,dim,heads,kv_heads,head_dim,hidden,batch,window,bits,group,"
    "residual,threads,seq_len,reps,step_ns_median,step_ns_p95,attn_ns_median,"
    "flops_step,attn_flops_step,bytes_step,cache_bytes,copy_bytes_step,"
    "peak_rss_bytes,max_abs_err,rel_err,token_match";

/* One row of any schema: schema 2 adds dtype and params, schema 3 the
 * interval of step_ns_median and the noise flag. */
struct row {
    const char *strategy;
    int bits, T;
    double med;         /* step_ns_median; p95 1% above, attention a quarter */
    double lo, hi;      /* step_ns_ci_lo, _hi (schema 3) */
    int noisy;          /* schema 3 */
    const char *reason; /* noise_reason */
    const char *dtype, *params;
};

/* A clean row whose interval is +-2% of its median. */
static struct row row3(const char *s, int bits, int T, double med, const char *dtype,
                       const char *params)
{
    return (struct row){s, bits, T, med, med * 0.98, med * 1.02, 0, "-", dtype, params};
}

static char tmpdir[64];

static void tmp_path(char *out, size_t cap, const char *name)
{
    ck_assert_int_lt(snprintf(out, cap, "%s/%s", tmpdir, name), (int)cap);
}

/* Writes rows as a sweep file of the given schema into tmpdir/name. */
static void write_rows(const char *name, char *path, size_t cap, int schema,
                       const struct row *rows, int n)
{
    tmp_path(path, cap, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "# kvlab sweep\n# schema=%d\n# read_gbps=20\n# sgemm_gflops=100\n%s%s%s\n",
            schema, HEADER, schema >= 2 ? ",dtype,params" : "",
            schema >= 3 ? ",step_ns_ci_lo,step_ns_ci_hi,noisy,noise_reason" : "");
    for (int i = 0; i < n; i++) {
        const struct row *r = &rows[i];
        fprintf(f, "%s,4,512,8,8,64,1376,1,512,%d,32,32,2,%d,5,%.17g,%.17g,%.17g,%.17g,"
                   "%.17g,%.17g,%d,0,1000000,0,0,1",
                r->strategy, r->bits, r->T, r->med, r->med * 1.01, r->med / 4,
                4.0e6 + 1000.0 * r->T, 1.0e6, 2.0e6 + 500.0 * r->T, 4096 * r->T);
        if (schema >= 2)
            fprintf(f, ",%s,%s", r->dtype, r->params);
        if (schema >= 3)
            fprintf(f, ",%.17g,%.17g,%d,%s", r->lo, r->hi, r->noisy, r->reason);
        fprintf(f, "\n");
    }
    ck_assert_int_eq(fclose(f), 0);
}

static void file_put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fputs(text, f) >= 0, 1);
    ck_assert_int_eq(fclose(f), 0);
}

struct run {
    struct kv_csv *b, *c;
    struct kv_compare_result *r;
    char err[KV_CSV_ERR_LEN];
};

/* Reads both files and compares: the first failing status. */
static enum kv_status run_compare(struct run *x, const char *pb, const char *pn,
                                  const struct kv_compare_opts *o)
{
    x->b = x->c = NULL;
    x->r = NULL;
    x->err[0] = '\0';
    enum kv_status st = kv_csv_read_file(&x->b, pb, x->err, sizeof x->err);
    if (st == KV_OK)
        st = kv_csv_read_file(&x->c, pn, x->err, sizeof x->err);
    if (st == KV_OK)
        st = kv_compare_run(&x->r, x->b, x->c, o, x->err, sizeof x->err);
    return st;
}

static void run_free(struct run *x)
{
    kv_compare_destroy(x->r);
    kv_csv_destroy(x->c);
    kv_csv_destroy(x->b);
    ck_assert_int_eq(kv_alloc_live(), 0);
}

/* The table of a result (caller frees). */
static char *table_of(const struct kv_compare_result *r)
{
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(kv_compare_write(m, r, KV_COMPARE_TABLE), KV_OK);
    ck_assert_int_eq(fclose(m), 0);
    return text;
}

#define TABLE_HAS(r, want)                                                                 \
    do {                                                                                   \
        char *t_ = table_of(r);                                                            \
        ck_assert_msg(strstr(t_, want) != NULL, "table lacks '%s':\n%s", want, t_);        \
        free(t_);                                                                          \
    } while (0)

/* ------------------------------------------------------------------------ */
/* The join across schemas                                                  */

/* A schema-2 sweep as kvlab writes it today: dynamic in f32, f16 and bf16
 * (f16 and bf16 share bits=16 and every other v1 column) at T = 64, 128. */
static int new_sweep_rows(struct row *r, double f32_factor)
{
    int n = 0;
    for (int T = 64; T <= 128; T *= 2) {
        r[n++] = row3("dynamic", 32, T, 1e6 * f32_factor, "f32", "dtype=f32");
        r[n++] = row3("dynamic", 16, T, 0.8e6, "f16", "dtype=f16");
        r[n++] = row3("dynamic", 16, T, 0.8e6, "bf16", "dtype=bf16");
    }
    return n;
}

/* The case: once refused as "duplicate configuration". The f32
 * rows match the reference's, f16 and bf16 are new, the reference's
 * quantized row is gone: listed, and the rest judged. */
START_TEST(test_v1_against_v2_dtypes)
{
    struct row rb[3] = {row3("dynamic", 32, 64, 1e6, "", ""), row3("dynamic", 32, 128, 1e6, "", ""),
                        row3("quantized", 8, 64, 1e6, "", "")};
    struct row rn[6];
    const int nn = new_sweep_rows(rn, 1.3);
    char pb[128], pn[128];
    write_rows("dt_base.csv", pb, sizeof pb, 1, rb, 3);
    write_rows("dt_new.csv", pn, sizeof pn, 2, rn, nn);
    struct kv_compare_opts o;
    kv_compare_opts_defaults(&o);
    struct run x;
    ck_assert_msg(run_compare(&x, pb, pn, &o) == KV_OK, "%s", x.err);
    ck_assert_int_eq(x.r->n_items, 2);
    ck_assert_int_eq(x.r->n_only_base, 1);
    ck_assert_int_eq(x.r->n_only_new, 4);
    ck_assert_int_eq(x.r->n_ambiguous_base + x.r->n_ambiguous_new, 0);
    for (int64_t t = 0; t < x.r->n_items; t++) /* the f32 rows, judged */
        ck_assert_str_eq(kv_csv_cell(x.c, x.r->items[t].new_row, x.r->col_ext_cur[0]), "f32");
    ck_assert_int_eq(x.r->n_regressed, 2);
    ck_assert_int_eq(kv_compare_outcome(x.r), KV_COMPARE_REGRESSED);
    ck_assert_int_eq(x.r->n_unmatched, 5);
    TABLE_HAS(x.r, "not compared: 1 rows of base and 4 rows of new had no match:");
    TABLE_HAS(x.r, "  base quantized bits=8 T=64: only in base");
    TABLE_HAS(x.r, "  new  dynamic bits=16 f16 dtype=f16 T=64,128: only in new");
    TABLE_HAS(x.r, "  new  dynamic bits=16 bf16 dtype=bf16 T=64,128: only in new");
    run_free(&x);

    /* the other way round: the schema-2 file as BASE */
    ck_assert_msg(run_compare(&x, pn, pb, &o) == KV_OK, "%s", x.err);
    ck_assert_int_eq(x.r->n_items, 2);
    ck_assert_int_eq(x.r->n_only_base, 4);
    ck_assert_int_eq(x.r->n_only_new, 1);
    ck_assert_int_eq(x.r->n_improved, 2);
    run_free(&x);
}
END_TEST

/* A schema-1 row with the v1 columns of two schema-2 rows cannot be paired
 * with either: all three are reported as ambiguous, the unambiguous rest
 * is compared. */
START_TEST(test_ambiguous_rows)
{
    struct row rb[3] = {row3("dynamic", 32, 64, 1e6, "", ""), row3("dynamic", 16, 64, 1e6, "", ""),
                        row3("dynamic", 16, 128, 1e6, "", "")};
    struct row rn[6];
    const int nn = new_sweep_rows(rn, 1.0);
    char pb[128], pn[128];
    write_rows("amb_base.csv", pb, sizeof pb, 1, rb, 3);
    write_rows("amb_new.csv", pn, sizeof pn, 2, rn, nn);
    struct kv_compare_opts o;
    kv_compare_opts_defaults(&o);
    struct run x;
    ck_assert_msg(run_compare(&x, pb, pn, &o) == KV_OK, "%s", x.err);
    ck_assert_int_eq(x.r->n_items, 1); /* f32 at T=64 */
    ck_assert_int_eq(x.r->n_ambiguous_base, 2);
    ck_assert_int_eq(x.r->n_ambiguous_new, 4);
    ck_assert_int_eq(x.r->n_only_base, 2);
    ck_assert_int_eq(x.r->n_only_new, 5); /* the 4 ambiguous and f32 at T=128 */
    ck_assert_int_eq(x.r->unmatched[0].candidates, 2); /* ambiguous first */
    ck_assert_int_eq(kv_compare_outcome(x.r), KV_COMPARE_CLEAN);
    TABLE_HAS(x.r, "(2 and 4 ambiguous)");
    TABLE_HAS(x.r, "  base dynamic bits=16 T=64,128: ambiguous, matches 2 rows of new");
    TABLE_HAS(x.r, "  new  dynamic bits=16 bf16 dtype=bf16 T=64,128: ambiguous, the row of "
                   "base it matches");
    TABLE_HAS(x.r, "  new  dynamic bits=32 f32 dtype=f32 T=128: only in new");
    run_free(&x);

    /* nothing but ambiguous rows: nothing to compare, refused */
    write_rows("amb_only.csv", pb, sizeof pb, 1, rb + 1, 1);
    ck_assert_int_eq(run_compare(&x, pb, pn, &o), KV_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(x.err, "no configuration in common"));
    ck_assert_ptr_nonnull(strstr(x.err, "1 rows of BASE and 2 of NEW are ambiguous"));
    run_free(&x);
}
END_TEST

/* The same full key twice in one file is still refused, whatever the other
 * file's schema: dtype and params are in each file's own key. */
START_TEST(test_real_duplicate)
{
    struct row rn[3] = {row3("dynamic", 16, 64, 1e6, "f16", "dtype=f16"),
                        row3("dynamic", 16, 64, 1e6, "bf16", "dtype=bf16"),
                        row3("dynamic", 16, 64, 2e6, "f16", "dtype=f16")};
    struct row rb[1] = {row3("dynamic", 32, 64, 1e6, "", "")};
    char pb[128], pn[128], want[320];
    write_rows("dup_base.csv", pb, sizeof pb, 1, rb, 1);
    write_rows("dup_new.csv", pn, sizeof pn, 2, rn, 3);
    struct kv_compare_opts o;
    kv_compare_opts_defaults(&o);
    struct run x;
    ck_assert_int_eq(run_compare(&x, pb, pn, &o), KV_ERR_FORMAT);
    snprintf(want, sizeof want, "%s:8: duplicate configuration: same strategy, layers .. "
             "threads, dtype, params and seq_len as line 6", pn);
    ck_assert_str_eq(x.err, want);
    run_free(&x);
}
END_TEST

/* Allocation failures in the join across schemas: every one is
 * KV_ERR_NOMEM with nothing leaked. */
START_TEST(test_join_alloc_failures)
{
    struct row rb[3] = {row3("dynamic", 32, 64, 1e6, "", ""), row3("dynamic", 16, 64, 1e6, "", ""),
                        row3("quantized", 8, 64, 1e6, "", "")};
    struct row rn[6];
    const int nn = new_sweep_rows(rn, 1.5);
    char pb[128], pn[128];
    write_rows("af_base.csv", pb, sizeof pb, 1, rb, 3);
    write_rows("af_new.csv", pn, sizeof pn, 2, rn, nn);
    struct kv_compare_opts o;
    kv_compare_opts_defaults(&o);
    struct run x;
    kv_alloc_fail_at(0, 0);
    ck_assert_int_eq(run_compare(&x, pb, pn, &o), KV_OK);
    const int64_t total = kv_alloc_count();
    run_free(&x);
    for (int64_t k = 1; k <= total; k++) {
        kv_alloc_fail_at(k, 0);
        ck_assert_msg(run_compare(&x, pb, pn, &o) == KV_ERR_NOMEM, "k=%lld", (long long)k);
        run_free(&x);
    }
    kv_alloc_fail_at(0, 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Confidence intervals                                                     */

/* One row each side: base median 1e6 with its interval, new likewise; the
 * verdict at the default 5% threshold. */
static const struct {
    const char *name;
    double base_lo, base_hi, med, lo, hi;
    enum kv_verdict want;
} ci_cases[] = {
    /* +20% medians (the threshold rule alone: slower), intervals overlap */
    {"overlap", 0.85e6, 1.15e6, 1.2e6, 1.1e6, 1.3e6, KV_VERDICT_SAME},
    /* separated, but by less than 5%: 1.08 < 1.05 x 1.05 */
    {"separated_within_threshold", 0.95e6, 1.05e6, 1.12e6, 1.08e6, 1.16e6, KV_VERDICT_SAME},
    /* separated beyond the threshold: 1.15 > 1.05 x 1.05 */
    {"separated", 0.95e6, 1.05e6, 1.2e6, 1.15e6, 1.25e6, KV_VERDICT_WORSE},
    /* faster beyond the threshold: 0.95 > 0.84 x 1.05 */
    {"faster", 0.95e6, 1.05e6, 0.8e6, 0.76e6, 0.84e6, KV_VERDICT_BETTER},
    /* no interval on one side (nan): the threshold and the spread decide */
    {"no_interval", NAN, NAN, 1.2e6, 1.1e6, 1.3e6, KV_VERDICT_WORSE},
};

START_TEST(test_ci_verdicts)
{
    struct row rb = row3("dynamic", 32, 64, 1e6, "f32", "dtype=f32");
    struct row rn = row3("dynamic", 32, 64, ci_cases[_i].med, "f32", "dtype=f32");
    rb.lo = ci_cases[_i].base_lo;
    rb.hi = ci_cases[_i].base_hi;
    rn.lo = ci_cases[_i].lo;
    rn.hi = ci_cases[_i].hi;
    char pb[128], pn[128], nb[64], nn[64];
    snprintf(nb, sizeof nb, "ci_%s_base.csv", ci_cases[_i].name);
    snprintf(nn, sizeof nn, "ci_%s_new.csv", ci_cases[_i].name);
    write_rows(nb, pb, sizeof pb, 3, &rb, 1);
    write_rows(nn, pn, sizeof pn, 3, &rn, 1);
    struct kv_compare_opts o;
    kv_compare_opts_defaults(&o);
    for (int norm = 0; norm < 2; norm++) { /* normalising divides all alike */
        o.normalize = norm;
        struct run x;
        ck_assert_msg(run_compare(&x, pb, pn, &o) == KV_OK, "%s", x.err);
        ck_assert_int_eq(x.r->uses_ci, 1);
        const struct kv_compare_item *it = &x.r->items[0];
        ck_assert_msg(it->verdict == ci_cases[_i].want, "%s (normalize %d): verdict %d",
                      ci_cases[_i].name, norm, it->verdict);
        ck_assert_int_eq(it->uses_ci, isfinite(ci_cases[_i].base_lo));
        ck_assert_int_eq(kv_compare_outcome(x.r), ci_cases[_i].want == KV_VERDICT_WORSE
                                                      ? KV_COMPARE_REGRESSED
                                                      : KV_COMPARE_CLEAN);
        if (it->uses_ci && !norm) { /* the band, in the direction of the change */
            const double t = 0.05;
            const double band = rn.med >= rb.med
                                    ? (rn.med - rn.lo) + (rb.hi - rb.med) + t * rb.hi
                                    : (rb.med - rb.lo) + (rn.hi - rn.med) + t * rn.hi;
            ck_assert_double_eq_tol(it->noise, band, 1e-6);
        }
        run_free(&x);
    }
}
END_TEST

/* The intervals are of step_ns_median: another metric (attention, a size)
 * is judged as before even in a schema-3 file. */
START_TEST(test_ci_only_its_metric)
{
    struct row rb = row3("dynamic", 32, 64, 1e6, "f32", "dtype=f32");
    struct row rn = row3("dynamic", 32, 64, 1.2e6, "f32", "dtype=f32");
    rb.lo = 0.8e6, rb.hi = 1.2e6, rn.lo = 1.0e6, rn.hi = 1.4e6; /* overlapping */
    char pb[128], pn[128];
    write_rows("cim_base.csv", pb, sizeof pb, 3, &rb, 1);
    write_rows("cim_new.csv", pn, sizeof pn, 3, &rn, 1);
    struct kv_compare_opts o;
    kv_compare_opts_defaults(&o);
    o.metric = "attn_ns_median";
    struct run x;
    ck_assert_msg(run_compare(&x, pb, pn, &o) == KV_OK, "%s", x.err);
    ck_assert_int_eq(x.r->uses_ci, 0);
    ck_assert_int_eq(x.r->items[0].verdict, KV_VERDICT_WORSE);
    run_free(&x);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Noisy rows                                                               */

/* Two configurations at two T, base clean at 1e6; new at `factor` with row
 * noisy_row (-1: none) marked noisy. */
static void noisy_pair(const char *tag, double factor, double factor_b, int noisy_row,
                       char *pb, char *pn, size_t cap)
{
    struct row rb[4], rn[4];
    static const char *const strat[2] = {"dynamic", "static"};
    for (int i = 0; i < 4; i++) {
        rb[i] = row3(strat[i / 2], 32, 64 << (i % 2), 1e6, "f32", "dtype=f32");
        rn[i] = row3(strat[i / 2], 32, 64 << (i % 2), 1e6 * (i < 2 ? factor : factor_b), "f32",
                     "dtype=f32");
    }
    if (noisy_row >= 0) {
        rn[noisy_row].noisy = 1;
        rn[noisy_row].reason = "cpu_util=0.41";
    }
    char nb[64], nn[64];
    snprintf(nb, sizeof nb, "%s_base.csv", tag);
    snprintf(nn, sizeof nn, "%s_new.csv", tag);
    write_rows(nb, pb, cap, 3, rb, 4);
    write_rows(nn, pn, cap, 3, rn, 4);
}

/* A noisy row is never judged, however far it moved: the outcome is noisy
 * (exit 3), with its reason in the table. */
START_TEST(test_noisy_row)
{
    char pb[128], pn[128];
    noisy_pair("noisy", 2.0, 1.0, 0, pb, pn, sizeof pb);
    struct kv_compare_opts o;
    kv_compare_opts_defaults(&o);
    struct run x;
    ck_assert_msg(run_compare(&x, pb, pn, &o) == KV_OK, "%s", x.err);
    ck_assert_int_eq(x.r->items[0].verdict, KV_VERDICT_NOISY);
    ck_assert_uint_eq(x.r->items[0].noisy, 2u);
    ck_assert_int_eq(x.r->items[1].verdict, KV_VERDICT_WORSE); /* the clean T=128 row */
    ck_assert_int_eq(x.r->n_noisy, 1);
    ck_assert_int_eq(x.r->n_compared, 4);
    ck_assert_str_eq(kv_compare_noise_reason(x.r, 1, x.r->items[0].new_row), "cpu_util=0.41");
    ck_assert_str_eq(kv_compare_noise_reason(x.r, 0, x.r->items[0].base_row), "");
    TABLE_HAS(x.r, "noisy, re-run: new: cpu_util=0.41");
    TABLE_HAS(x.r, "noisy, re-run: 1 rows measured under interference were not judged");
    /* T=128 of dynamic regressed cleanly: that wins */
    ck_assert_int_eq(kv_compare_outcome(x.r), KV_COMPARE_REGRESSED);
    run_free(&x);

    /* only the noisy row moved (twice as slow): no clean regression, so noisy */
    struct row rb[2] = {row3("dynamic", 32, 64, 1e6, "f32", "dtype=f32"),
                        row3("dynamic", 32, 128, 1e6, "f32", "dtype=f32")};
    struct row rn[2] = {rb[0], rb[1]};
    rn[0].med = 2e6, rn[0].lo = 1.9e6, rn[0].hi = 2.1e6, rn[0].noisy = 1;
    rn[0].reason = "cpu_util=0.41";
    write_rows("noisy_only_base.csv", pb, sizeof pb, 3, rb, 2);
    write_rows("noisy_only_new.csv", pn, sizeof pn, 3, rn, 2);
    ck_assert_msg(run_compare(&x, pb, pn, &o) == KV_OK, "%s", x.err);
    ck_assert_int_eq(x.r->n_regressed, 0);
    ck_assert_int_eq(kv_compare_regressed(x.r), 0);
    ck_assert_int_eq(kv_compare_outcome(x.r), KV_COMPARE_NOISY);
    run_free(&x);

    /* a noisy BASE row counts the same */
    ck_assert_msg(run_compare(&x, pn, pb, &o) == KV_OK, "%s", x.err);
    ck_assert_uint_eq(x.r->items[0].noisy, 1u);
    ck_assert_int_eq(kv_compare_outcome(x.r), KV_COMPARE_NOISY);
    run_free(&x);

    /* every time metric is spoilt by the disturbance, ... */
    o.metric = "step_ns_p95";
    ck_assert_msg(run_compare(&x, pb, pn, &o) == KV_OK, "%s", x.err);
    ck_assert_int_eq(x.r->items[0].verdict, KV_VERDICT_NOISY);
    run_free(&x);
    o.metric = KV_METRIC_ATTN_VS_REST;
    ck_assert_msg(run_compare(&x, pb, pn, &o) == KV_OK, "%s", x.err);
    ck_assert_int_eq(x.r->items[0].verdict, KV_VERDICT_NOISY);
    run_free(&x);
    /* ... a size is not: judged in a noisy row too */
    o.metric = "cache_bytes";
    ck_assert_msg(run_compare(&x, pb, pn, &o) == KV_OK, "%s", x.err);
    ck_assert_int_eq(x.r->n_noisy, 0);
    ck_assert_int_eq(kv_compare_outcome(x.r), KV_COMPARE_CLEAN);
    run_free(&x);
}
END_TEST

/* With aggregate a group holding a noisy row is noisy; a clean group's
 * regression still wins. */
START_TEST(test_noisy_groups)
{
    char pb[128], pn[128];
    struct kv_compare_opts o;
    kv_compare_opts_defaults(&o);
    o.aggregate = 1;
    struct run x;
    /* dynamic 1.5x and noisy at T=64; static unchanged: noisy */
    noisy_pair("gnoisy", 1.5, 1.0, 0, pb, pn, sizeof pb);
    ck_assert_msg(run_compare(&x, pb, pn, &o) == KV_OK, "%s", x.err);
    ck_assert_int_eq(x.r->n_groups, 2);
    ck_assert_int_eq(x.r->groups[0].verdict, KV_VERDICT_NOISY);
    ck_assert_int_eq(x.r->groups[0].n_noisy, 1);
    ck_assert_int_eq(x.r->n_regressed, 1); /* the clean row of the noisy group */
    ck_assert_int_eq(x.r->n_groups_regressed, 0);
    ck_assert_int_eq(x.r->n_groups_noisy, 1);
    ck_assert_int_eq(kv_compare_outcome(x.r), KV_COMPARE_NOISY);
    TABLE_HAS(x.r, "noisy, re-run (1 of 2 rows noisy)");
    TABLE_HAS(x.r, "2 groups, 0 regressed, 0 improved, 1 noisy (re-run)");
    run_free(&x);

    /* ... and static 1.5x slower, clean: a regression */
    noisy_pair("gnoisyreg", 1.5, 1.5, 0, pb, pn, sizeof pb);
    ck_assert_msg(run_compare(&x, pb, pn, &o) == KV_OK, "%s", x.err);
    ck_assert_int_eq(x.r->groups[1].verdict, KV_VERDICT_WORSE);
    ck_assert_int_eq(kv_compare_outcome(x.r), KV_COMPARE_REGRESSED);
    run_free(&x);
}
END_TEST

/* The noise columns' cells are checked like every other: a number (or nan,
 * or empty: a merged file's row without one) and 0/1. */
START_TEST(test_noise_cells)
{
    static const struct {
        const char *cells, *want;
    } cases[] = {
        {"abc,1e6,0,-", ":6: column 'step_ns_ci_lo': 'abc' is not a number"},
        {"1e6,1e6,2,-", ":6: column 'noisy': '2' is not 0 or 1"},
        {"1e6,1e6,yes,-", ":6: column 'noisy': 'yes' is not 0 or 1"},
    };
    const char *row = "dynamic,4,512,8,8,64,1376,1,512,32,32,32,2,64,5,1e6,1e6,1,1,1,1,1,0,1,"
                      "0,0,1,f32,-,";
    char text[2048], p[128], good[128];
    struct row rg = row3("dynamic", 32, 64, 1e6, "f32", "-");
    write_rows("cells_good.csv", good, sizeof good, 3, &rg, 1);
    struct kv_compare_opts o;
    kv_compare_opts_defaults(&o);
    struct run x;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        snprintf(text, sizeof text, "# kvlab sweep\n# schema=3\n# x=1\n# y=2\n%s,dtype,params,"
                 "step_ns_ci_lo,step_ns_ci_hi,noisy,noise_reason\n%s%s\n", HEADER, row,
                 cases[k].cells);
        tmp_path(p, sizeof p, "cells_bad.csv");
        file_put(p, text);
        ck_assert_int_eq(run_compare(&x, good, p, &o), KV_ERR_FORMAT);
        ck_assert_msg(strstr(x.err, cases[k].want) != NULL, "'%s' lacks '%s'", x.err,
                      cases[k].want);
        run_free(&x);
    }
    /* empty cells and nan: no interval, not noisy */
    snprintf(text, sizeof text, "# schema=3\n%s,dtype,params,step_ns_ci_lo,step_ns_ci_hi,"
             "noisy,noise_reason\n%s,,,\n", HEADER, row);
    file_put(p, text);
    ck_assert_msg(run_compare(&x, good, p, &o) == KV_OK, "%s", x.err);
    ck_assert_int_eq(x.r->items[0].uses_ci, 0);
    ck_assert_uint_eq(x.r->items[0].noisy, 0u);
    run_free(&x);
    /* schema 3 needs dtype and params like schema 2; schema 4 is unknown */
    snprintf(text, sizeof text, "# schema=3\n%s\n%.*s\n", HEADER, (int)strlen(row) - 7, row);
    file_put(p, text);
    ck_assert_int_eq(run_compare(&x, good, p, &o), KV_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(x.err, ":1: schema version '3' needs the columns dtype"));
    run_free(&x);
    snprintf(text, sizeof text, "# schema=4\n%s\n%.*s\n", HEADER, (int)strlen(row) - 7, row);
    file_put(p, text);
    ck_assert_int_eq(run_compare(&x, good, p, &o), KV_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(x.err, "this kvlab reads schemas 1, 2 and 3"));
    run_free(&x);
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
    strcpy(tmpdir, "/tmp/kvlab_compare_rows_XXXXXX");
    if (mkdtemp(tmpdir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    Suite *s = suite_create("compare_rows");
    TCase *tc = tcase_create("join");
    tcase_add_test(tc, test_v1_against_v2_dtypes);
    tcase_add_test(tc, test_ambiguous_rows);
    tcase_add_test(tc, test_real_duplicate);
    tcase_add_test(tc, test_join_alloc_failures);
    suite_add_tcase(s, tc);
    tc = tcase_create("noise");
    tcase_add_loop_test(tc, test_ci_verdicts, 0, (int)(sizeof ci_cases / sizeof ci_cases[0]));
    tcase_add_test(tc, test_ci_only_its_metric);
    tcase_add_test(tc, test_noisy_row);
    tcase_add_test(tc, test_noisy_groups);
    tcase_add_test(tc, test_noise_cells);
    suite_add_tcase(s, tc);

    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    tmpdir_remove();
    return failed;
}
