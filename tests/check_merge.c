/*
 * check_merge.c - unit tests of kvlab merge (bench/results/merge.c) and of compare's
 * per-row limits on merged files.
 *
 * Inputs are written in the test, as the CSV text kvlab sweep writes: a few
 * metadata lines, schema v1's columns plus `label` and `mlp`, and rows; the
 * shards carry the id the planner would give their plan (shard.h). Each
 * refusal of merge.h is checked with its message (partial, repeated key,
 * mixed commit and schema, missing shards, a file that is not a kvlab CSV,
 * a merge of a merge, a file cut short, rows away from their plan), each
 * permission (--allow-partial, --prefer newest,
 * --allow-mixed) with what it produces, and every allocation failure in
 * turn must leave nothing allocated.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../bench/results/merge.h"
#include "../bench/measure/shard.h"

/* ------------------------------------------------------------------------ */
/* Writing and reading test files                                           */

#define HEADER                                                                           \
    "strategy,layers,dim,heads,kv_heads,head_dim,hidden,batch,window,bits,group,"        \
    "residual,threads,seq_len,reps,step_ns_median,step_ns_p95,attn_ns_median,"           \
    "flops_step,attn_flops_step,bytes_step,cache_bytes,copy_bytes_step,peak_rss_bytes,"  \
    "max_abs_err,rel_err,token_match,label,mlp\n"

static const char *strategy_of(const char *label)
{
    return strncmp(label, "quantized", 9) == 0 ? "quantized" : label;
}

static int bits_of(const char *label)
{
    return strcmp(label, "quantized-int4") == 0 ? 4 : strcmp(label, "quantized-int8") == 0 ? 8 : 32;
}

/* One row of (label, T); flops and bytes derived from T so rows differ. */
static void add_row(char *buf, size_t cap, const char *label, int T, long step_ns)
{
    size_t n = strlen(buf);
    snprintf(buf + n, cap - n,
             "%s,2,64,4,2,16,128,1,0,%d,0,0,2,%d,3,%ld,%ld,%ld,%d,%d,%d,%d,512,1000,0,0,1,%s,1\n",
             strategy_of(label), bits_of(label), T, step_ns, step_ns + 100, step_ns / 4,
             1000 * T, 100 * T, 5000 + 64 * T, 64 * T, label);
}

/* The rows of the test plan: shard 1 holds dynamic, shard 2 none and
 * quantized-int8 (shard_text). */
static const struct {
    const char *label;
    int T, shard;
} plan_rows[] = {{"dynamic", 64, 1},        {"dynamic", 128, 1}, {"quantized-int8", 64, 2},
                 {"none", 128, 2},          {"none", 64, 2}};
#define N_PLAN_ROWS ((int)(sizeof plan_rows / sizeof plan_rows[0]))

static uint64_t row_hash(int i)
{
    struct kv_plan_key k = {.strategy = strategy_of(plan_rows[i].label),
                            .label = plan_rows[i].label, .shard = plan_rows[i].shard,
                            .v = {2, 64, 4, 2, 16, 128, 1, 0, bits_of(plan_rows[i].label), 0, 0,
                                  2, plan_rows[i].T}};
    return kv_plan_row_hash(&k);
}

/* The id the planner gives that plan (shard.h), as the metadata records it. */
static uint64_t test_plan_id(void)
{
    struct kv_plan_config_key c = {.seed = 7, .warmup = 1, .reps = 3, .mlp = 1,
                                   .rates = {160, 18, 2}, .n_shards = 2, .n_rows = N_PLAN_ROWS};
    uint64_t d = 0;
    for (int i = 0; i < N_PLAN_ROWS; i++)
        d += row_hash(i);
    return kv_plan_id_of(&c, d);
}

/* Metadata block: commit, date, host, limits, optional shard/plan/partial. */
static void add_meta(char *buf, size_t cap, const char *commit, const char *date,
                     const char *host, double read_gbps, const char *shard, int partial)
{
    size_t n = strlen(buf);
    n += (size_t)snprintf(buf + n, cap - n,
                          "# kvlab sweep\n# schema=1\n# commit=%s\n# date=%s\n# cpu=Test CPU, "
                          "rev 2\n# host=%s\n# threads=2\n# read_gbps=%.1f\n"
                          "# sgemm_gflops=100.0\n# strategies=none,dynamic,quantized-int8\n"
                          "# seed=7\n# warmup=1\n# reps_mode=fixed\n"
                          "# partial=%d\n# sweep_s=2.5\n# pred_s=2.0\n",
                          commit, date, host, read_gbps, partial);
    if (shard != NULL)
        snprintf(buf + n, cap - n, "# shard=%s\n# plan=%016llx\n# plan_rates=160,18,2\n",
                 shard, (unsigned long long)test_plan_id());
}

struct files {
    struct kv_csv *c[8];
    int n;
};

static void parse_into(struct files *f, const char *text, const char *name)
{
    char err[KV_CSV_ERR_LEN];
    ck_assert_int_lt(f->n, 8);
    ck_assert_msg(kv_csv_parse(&f->c[f->n], text, strlen(text), name, err, sizeof err) == KV_OK,
                  "%s", err);
    f->n++;
}

static void files_free(struct files *f)
{
    for (int k = 0; k < f->n; k++)
        kv_csv_destroy(f->c[k]);
    f->n = 0;
}

/* A shard file: shard I of 2 holds dynamic (I = 1) or none + quantized (I = 2). */
static void shard_text(char *buf, size_t cap, int shard, const char *commit, const char *date,
                       const char *host, double read_gbps, int partial)
{
    char sh[16];
    snprintf(sh, sizeof sh, "%d/2", shard);
    buf[0] = '\0';
    add_meta(buf, cap, commit, date, host, read_gbps, sh, partial);
    strncat(buf, HEADER, cap - strlen(buf) - 1);
    if (shard == 1) {
        add_row(buf, cap, "dynamic", 64, 1000);
        add_row(buf, cap, "dynamic", 128, 1100);
    } else {
        add_row(buf, cap, "quantized-int8", 64, 900);
        add_row(buf, cap, "none", 128, 50000);
        add_row(buf, cap, "none", 64, 20000);
    }
}

static enum kv_status merge(struct kv_merge_result **r, const struct files *f,
                            struct kv_merge_opts o, char *err)
{
    err[0] = '\0';
    return kv_merge_run(r, (const struct kv_csv *const *)f->c, f->n, &o, err, KV_CSV_ERR_LEN);
}

/* Writes the merged file and parses it back. */
static struct kv_csv *merged_csv(const struct kv_merge_result *r)
{
    char path[] = "/tmp/kvlab_check_merge.XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(kv_csv_writer_write(r->out, path), KV_OK);
    struct kv_csv *c = NULL;
    char err[KV_CSV_ERR_LEN];
    ck_assert_msg(kv_csv_read_file(&c, path, err, sizeof err) == KV_OK, "%s", err);
    unlink(path);
    return c;
}

static const char *meta(const struct kv_csv *c, const char *k)
{
    const struct kv_csv_meta *m = kv_csv_meta_find(c, k);
    return m ? m->value : NULL;
}

static char t1[8192], t2[8192], t3[8192];

/* ------------------------------------------------------------------------ */
/* Merging                                                                  */

/* Two shards of one plan: every row once, in the sweep's order, with its
 * attribution; shared metadata kept, differing metadata per source and
 * summarised; the result reads back as a valid sweep file. */
START_TEST(two_shards_merge_in_order_with_attribution)
{
    int64_t live = kv_alloc_live();
    struct files f = {0};
    shard_text(t1, sizeof t1, 1, "abc", "2025-01-01T10:00:00Z", "node1", 20.0, 0);
    shard_text(t2, sizeof t2, 2, "abc", "2025-01-01T10:05:00Z", "node2", 30.0, 0);
    parse_into(&f, t2, "shard-2.csv"); /* given out of order on purpose */
    parse_into(&f, t1, "shard-1.csv");
    struct kv_merge_result *r = NULL;
    char err[KV_CSV_ERR_LEN];
    ck_assert_msg(merge(&r, &f, (struct kv_merge_opts){0}, err) == KV_OK, "%s", err);
    ck_assert_int_eq(r->n_rows, 5);
    ck_assert_int_eq(r->partial, 0);
    ck_assert_int_eq(r->src[0].shard, 2);
    ck_assert_int_eq(r->src[1].shard, 1);
    ck_assert_int_eq(r->src[0].rows_kept, 3);
    ck_assert(r->src[1].sweep_s == 2.5 && r->src[1].pred_s == 2.0);
    struct kv_csv *m = merged_csv(r);
    int32_t col[KV_SWEEP_N_REQUIRED];
    ck_assert_msg(kv_sweep_validate(m, col, err, sizeof err) == KV_OK, "%s", err);
    ck_assert_int_eq(m->n_rows, 5);
    /* order: none (T 64, 128), dynamic (64, 128), quantized-int8 (64) */
    static const char *const want[][2] = {{"none", "64"},    {"none", "128"},
                                          {"dynamic", "64"}, {"dynamic", "128"},
                                          {"quantized", "64"}};
    int32_t js = kv_csv_col(m, "shard"), jh = kv_csv_col(m, "host"), jr = kv_csv_col(m, "read_gbps");
    int32_t jc = kv_csv_col(m, "cpu"), jsrc = kv_csv_col(m, "source");
    ck_assert(js >= 0 && jh >= 0 && jr >= 0 && jc >= 0 && jsrc >= 0);
    for (int r2 = 0; r2 < 5; r2++) {
        ck_assert_str_eq(kv_csv_cell(m, r2, col[0]), want[r2][0]);
        ck_assert_str_eq(kv_csv_cell(m, r2, col[KV_SCHEMA_COL_SEQ_LEN]), want[r2][1]);
        int dyn = strcmp(want[r2][0], "dynamic") == 0;
        ck_assert_str_eq(kv_csv_cell(m, r2, js), dyn ? "1/2" : "2/2");
        ck_assert_str_eq(kv_csv_cell(m, r2, jh), dyn ? "node1" : "node2");
        ck_assert_str_eq(kv_csv_cell(m, r2, jr), dyn ? "20.0" : "30.0");
        ck_assert_str_eq(kv_csv_cell(m, r2, jsrc), dyn ? "2" : "1");
        ck_assert_str_eq(kv_csv_cell(m, r2, jc), "Test CPU; rev 2"); /* comma made safe */
    }
    /* shared metadata as it was, differing summarised, per source kept */
    ck_assert_str_eq(meta(m, "commit"), "abc");
    ck_assert_str_eq(meta(m, "cpu"), "Test CPU, rev 2");
    ck_assert_str_eq(meta(m, "host"), "mixed");
    ck_assert_str_eq(meta(m, "read_gbps"), "30.000");
    ck_assert_str_eq(meta(m, "date"), "2025-01-01T10:05:00Z");
    ck_assert_str_eq(meta(m, "partial"), "0");
    ck_assert_str_eq(meta(m, "merged_from"), "2");
    ck_assert_ptr_null(meta(m, "shard"));
    ck_assert_str_eq(meta(m, "source.1.file"), "shard-2.csv");
    ck_assert_str_eq(meta(m, "source.1.host"), "node2");
    ck_assert_str_eq(meta(m, "source.2.shard"), "1/2");
    ck_assert_str_eq(meta(m, "source.2.read_gbps"), "20.0");
    ck_assert_ptr_null(meta(m, "source.1.commit")); /* shared: not repeated */
    kv_csv_destroy(m);
    kv_merge_destroy(r);
    files_free(&f);
    ck_assert_int_eq(kv_alloc_live(), live);
}
END_TEST

/* A missing shard is reported by number and refused; --allow-partial
 * merges without it and marks the output partial. */
START_TEST(missing_shards_are_reported_by_number)
{
    struct files f = {0};
    shard_text(t1, sizeof t1, 1, "abc", "2025-01-01T10:00:00Z", "node1", 20.0, 0);
    /* shard 1 of 5: shards 2..5 missing */
    char *p = strstr(t1, "# shard=1/2");
    ck_assert_ptr_nonnull(p);
    p[10] = '5';
    parse_into(&f, t1, "shard-1.csv");
    struct kv_merge_result *r = NULL;
    char err[KV_CSV_ERR_LEN];
    ck_assert_int_eq(merge(&r, &f, (struct kv_merge_opts){0}, err), KV_ERR_FORMAT);
    ck_assert_ptr_null(r);
    ck_assert_msg(strstr(err, "missing shards 2, 3, 4, 5 of 5") != NULL, "%s", err);
    ck_assert_msg(strstr(err, "--allow-partial") != NULL, "%s", err);
    ck_assert_ptr_null(strchr(err, '\n'));
    ck_assert_int_eq(merge(&r, &f, (struct kv_merge_opts){.allow_partial = 1}, err), KV_OK);
    ck_assert_int_eq(r->partial, 1);
    ck_assert_msg(strstr(r->missing, "shards 2, 3, 4, 5 of 5") != NULL, "%s", r->missing);
    struct kv_csv *m = merged_csv(r);
    ck_assert_str_eq(meta(m, "partial"), "1");
    ck_assert_ptr_nonnull(meta(m, "merged_missing"));
    kv_csv_destroy(m);
    kv_merge_destroy(r);
    files_free(&f);
}
END_TEST

/* A shard marked partial=1 (killed mid-way) is refused unless allowed. */
START_TEST(partial_shard_is_refused_unless_allowed)
{
    struct files f = {0};
    shard_text(t1, sizeof t1, 1, "abc", "2025-01-01T10:00:00Z", "node1", 20.0, 0);
    shard_text(t2, sizeof t2, 2, "abc", "2025-01-01T10:05:00Z", "node2", 30.0, 1);
    parse_into(&f, t1, "shard-1.csv");
    parse_into(&f, t2, "shard-2.csv");
    struct kv_merge_result *r = NULL;
    char err[KV_CSV_ERR_LEN];
    ck_assert_int_eq(merge(&r, &f, (struct kv_merge_opts){0}, err), KV_ERR_FORMAT);
    ck_assert_msg(strncmp(err, "shard-2.csv:", 12) == 0 && strstr(err, "partial") != NULL &&
                      strstr(err, "--allow-partial") != NULL,
                  "%s", err);
    ck_assert_int_eq(merge(&r, &f, (struct kv_merge_opts){.allow_partial = 1}, err), KV_OK);
    ck_assert_int_eq(r->partial, 1);
    ck_assert_int_eq(r->src[1].partial, 1);
    struct kv_csv *m = merged_csv(r);
    ck_assert_str_eq(meta(m, "partial"), "1");
    kv_csv_destroy(m);
    kv_merge_destroy(r);
    files_free(&f);
}
END_TEST

/* The same configuration twice (a shard given twice, or rerun): refused,
 * or with --prefer newest the row of the newer file kept. */
START_TEST(repeated_keys_refused_or_newest_kept)
{
    struct files f = {0};
    shard_text(t1, sizeof t1, 1, "abc", "2025-01-01T10:00:00Z", "node1", 20.0, 0);
    shard_text(t2, sizeof t2, 2, "abc", "2025-01-01T10:05:00Z", "node2", 30.0, 0);
    shard_text(t3, sizeof t3, 1, "abc", "2025-01-02T09:00:00Z", "node3", 40.0, 0);
    parse_into(&f, t3, "rerun-1.csv"); /* newer, given first */
    parse_into(&f, t1, "shard-1.csv");
    parse_into(&f, t2, "shard-2.csv");
    struct kv_merge_result *r = NULL;
    char err[KV_CSV_ERR_LEN];
    ck_assert_int_eq(merge(&r, &f, (struct kv_merge_opts){0}, err), KV_ERR_FORMAT);
    ck_assert_msg(strstr(err, "same configuration as") != NULL &&
                      strstr(err, "--prefer newest") != NULL && strstr(err, "T=64") != NULL,
                  "%s", err);
    ck_assert_int_eq(merge(&r, &f, (struct kv_merge_opts){.prefer_newest = 1}, err), KV_OK);
    ck_assert_int_eq(r->n_rows, 5);
    ck_assert_int_eq(r->n_resolved, 2);
    ck_assert_int_eq(r->src[0].rows_kept, 2); /* the rerun's rows */
    ck_assert_int_eq(r->src[1].rows_kept, 0);
    struct kv_csv *m = merged_csv(r);
    int32_t jh = kv_csv_col(m, "host");
    for (int64_t q = 0; q < m->n_rows; q++)
        ck_assert_str_ne(kv_csv_cell(m, q, jh), "node1");
    kv_csv_destroy(m);
    kv_merge_destroy(r);
    files_free(&f);

    /* within one file too */
    shard_text(t1, sizeof t1, 1, "abc", "2025-01-01T10:00:00Z", "node1", 20.0, 0);
    add_row(t1, sizeof t1, "dynamic", 64, 999);
    parse_into(&f, t1, "twice.csv");
    ck_assert_int_eq(merge(&r, &f, (struct kv_merge_opts){.allow_partial = 1}, err),
                     KV_ERR_FORMAT);
    ck_assert_msg(strstr(err, "twice.csv:") != NULL, "%s", err);
    files_free(&f);
}
END_TEST

/* Different commits or schema versions: refused unless --allow-mixed. */
START_TEST(mixed_commits_and_schemas_need_allow_mixed)
{
    struct files f = {0};
    shard_text(t1, sizeof t1, 1, "abc", "2025-01-01T10:00:00Z", "node1", 20.0, 0);
    shard_text(t2, sizeof t2, 2, "def", "2025-01-01T10:05:00Z", "node2", 30.0, 0);
    parse_into(&f, t1, "shard-1.csv");
    parse_into(&f, t2, "shard-2.csv");
    struct kv_merge_result *r = NULL;
    char err[KV_CSV_ERR_LEN];
    ck_assert_int_eq(merge(&r, &f, (struct kv_merge_opts){0}, err), KV_ERR_FORMAT);
    ck_assert_msg(strstr(err, "shard-2.csv") != NULL && strstr(err, "commit def") != NULL &&
                      strstr(err, "commit abc") != NULL && strstr(err, "--allow-mixed") != NULL,
                  "%s", err);
    ck_assert_int_eq(merge(&r, &f, (struct kv_merge_opts){.allow_mixed = 1}, err), KV_OK);
    struct kv_csv *m = merged_csv(r);
    ck_assert_str_eq(meta(m, "commit"), "mixed");
    ck_assert_str_eq(meta(m, "source.1.commit"), "abc");
    ck_assert_str_eq(meta(m, "source.2.commit"), "def");
    int32_t jc = kv_csv_col(m, "commit");
    ck_assert_str_eq(kv_csv_cell(m, 0, jc), "def"); /* none, from shard 2 */
    kv_csv_destroy(m);
    kv_merge_destroy(r);
    files_free(&f);

    /* another schema version: validation refuses it, naming the file */
    shard_text(t2, sizeof t2, 2, "abc", "2025-01-01T10:05:00Z", "node2", 30.0, 0);
    char *p = strstr(t2, "# schema=1");
    p[9] = '9';
    parse_into(&f, t1, "shard-1.csv");
    parse_into(&f, t2, "shard-2.csv");
    ck_assert_int_eq(merge(&r, &f, (struct kv_merge_opts){.allow_mixed = 1}, err),
                     KV_ERR_FORMAT);
    ck_assert_msg(strncmp(err, "shard-2.csv:", 12) == 0 && strstr(err, "schema") != NULL,
                  "%s", err);
    files_free(&f);

    /* other columns (an extra one): refused, or their union with --allow-mixed */
    shard_text(t2, sizeof t2, 2, "abc", "2025-01-01T10:05:00Z", "node2", 30.0, 0);
    char extra[8192] = "";
    const char *h = strstr(t2, "strategy,");
    memcpy(extra, t2, (size_t)(h - t2));
    /* the same rows, each with one more column */
    for (const char *line = h; *line != '\0';) {
        const char *e = strchr(line, '\n');
        strncat(extra, line, (size_t)(e - line));
        strcat(extra, line == h ? ",extra\n" : ",7\n");
        line = e + 1;
    }
    parse_into(&f, t1, "shard-1.csv");
    parse_into(&f, extra, "shard-2.csv");
    ck_assert_int_eq(merge(&r, &f, (struct kv_merge_opts){0}, err), KV_ERR_FORMAT);
    ck_assert_msg(strstr(err, "columns differ") != NULL, "%s", err);
    ck_assert_int_eq(merge(&r, &f, (struct kv_merge_opts){.allow_mixed = 1,
                                                          .allow_partial = 1}, err), KV_OK);
    m = merged_csv(r);
    int32_t je = kv_csv_col(m, "extra");
    ck_assert_int_ge(je, 0);
    ck_assert_int_lt(je, kv_csv_col(m, "source"));
    ck_assert_str_eq(kv_csv_cell(m, 0, je), "7");  /* none 64, from shard 2 */
    ck_assert_str_eq(kv_csv_cell(m, 2, je), "");   /* dynamic 64, shard 1: no such column */
    kv_csv_destroy(m);
    kv_merge_destroy(r);
    files_free(&f);
}
END_TEST

/* Files that are not kvlab sweep CSVs, or are merges themselves: refused,
 * naming the file. */
/*
 * Schema 2: rows that the v1 columns cannot tell apart but whose params
 * differ (a sink count) are distinct keys and both kept; the same params
 * twice are the same configuration and refused; a schema-1 file merged with
 * a schema-2 one (--allow-mixed) makes a schema-1 file, which every input
 * satisfies, and reads back.
 */
static void v2_text(char *buf, size_t cap, const char *params_a, const char *params_b)
{
    buf[0] = '\0';
    add_meta(buf, cap, "abc", "2025-01-01T10:00:00Z", "node1", 20.0, NULL, 0);
    char *p = strstr(buf, "# schema=1");
    p[9] = '2';
    size_t n = strlen(buf);
    snprintf(buf + n, cap - n,
             "strategy,layers,dim,heads,kv_heads,head_dim,hidden,batch,window,bits,group,"
             "residual,threads,seq_len,reps,step_ns_median,step_ns_p95,attn_ns_median,"
             "flops_step,attn_flops_step,bytes_step,cache_bytes,copy_bytes_step,peak_rss_bytes,"
             "max_abs_err,rel_err,token_match,dtype,params,label\n"
             "sinks,2,64,4,2,16,128,1,0,32,0,0,2,64,3,1000,1100,250,1,1,1,1,512,1000,0,0,1,f32,"
             "%s,sinks\n"
             "sinks,2,64,4,2,16,128,1,0,32,0,0,2,64,3,2000,2100,500,1,1,1,1,512,1000,0,0,1,f32,"
             "%s,sinks\n",
             params_a, params_b);
}

START_TEST(schema2_params_are_in_the_key)
{
    struct files f = {0};
    struct kv_merge_result *r = NULL;
    char err[KV_CSV_ERR_LEN];
    v2_text(t1, sizeof t1, "sinks=4", "sinks=8");
    v2_text(t2, sizeof t2, "sinks=16", "sinks=32");
    parse_into(&f, t1, "v2-1.csv");
    parse_into(&f, t2, "v2-2.csv");
    ck_assert_msg(merge(&r, &f, (struct kv_merge_opts){0}, err) == KV_OK, "%s", err);
    ck_assert_int_eq(r->n_rows, 4);
    struct kv_csv *m = merged_csv(r);
    ck_assert_str_eq(meta(m, "schema"), "2");
    int32_t jp = kv_csv_col(m, "params");
    ck_assert_int_ge(jp, 0);
    int seen = 0;
    for (int64_t q = 0; q < m->n_rows; q++)
        seen |= strcmp(kv_csv_cell(m, q, jp), "sinks=32") == 0;
    ck_assert(seen);
    kv_csv_destroy(m);
    kv_merge_destroy(r);
    files_free(&f);

    /* the same params in both files: a repeated key */
    v2_text(t2, sizeof t2, "sinks=8", "sinks=64");
    parse_into(&f, t1, "v2-1.csv");
    parse_into(&f, t2, "v2-2.csv");
    ck_assert_int_eq(merge(&r, &f, (struct kv_merge_opts){0}, err), KV_ERR_FORMAT);
    ck_assert_msg(strstr(err, "v2-2.csv:") == err && strstr(err, "params=sinks=8") != NULL,
                  "%s", err);
    files_free(&f);

    /* schema 1 with schema 2: the v1 key (here the two v2 rows collide with
     * each other, so keep the newest), schema 1 out */
    t2[0] = '\0';
    add_meta(t2, sizeof t2, "abc", "2025-01-01T10:05:00Z", "node2", 30.0, NULL, 0);
    strncat(t2, HEADER, sizeof t2 - strlen(t2) - 1);
    add_row(t2, sizeof t2, "dynamic", 64, 1000);
    add_row(t2, sizeof t2, "dynamic", 128, 1100);
    parse_into(&f, t1, "v2-1.csv");
    parse_into(&f, t2, "v1.csv");
    ck_assert_msg(merge(&r, &f, (struct kv_merge_opts){.allow_mixed = 1, .prefer_newest = 1},
                        err) == KV_OK,
                  "%s", err);
    ck_assert_int_eq(r->n_rows, 3); /* one sinks row, dynamic at 64 and 128 */
    m = merged_csv(r);
    ck_assert_str_eq(meta(m, "schema"), "1");
    int32_t col[KV_SWEEP_N_REQUIRED];
    ck_assert_msg(kv_sweep_validate(m, col, err, sizeof err) == KV_OK, "%s", err);
    kv_csv_destroy(m);
    kv_merge_destroy(r);
    files_free(&f);
}
END_TEST

START_TEST(foreign_and_merged_files_are_refused)
{
    struct files f = {0};
    char err[KV_CSV_ERR_LEN];
    struct kv_merge_result *r = NULL;
    shard_text(t1, sizeof t1, 1, "abc", "2025-01-01T10:00:00Z", "node1", 20.0, 0);
    static const char *const foreign[] = {
        "a,b,c\n1,2,3\n",                                  /* no schema line */
        "# schema=1\nstrategy,layers\ndynamic,4\n",        /* columns missing */
        "# schema=1\n" HEADER,                             /* no rows */
    };
    for (size_t k = 0; k < sizeof foreign / sizeof foreign[0]; k++) {
        parse_into(&f, t1, "shard-1.csv");
        parse_into(&f, foreign[k], "other.csv");
        ck_assert_int_eq(merge(&r, &f, (struct kv_merge_opts){.allow_mixed = 1,
                                                              .allow_partial = 1}, err),
                         KV_ERR_FORMAT);
        ck_assert_msg(strncmp(err, "other.csv:", 10) == 0, "case %zu: %s", k, err);
        ck_assert_ptr_null(strchr(err, '\n'));
        files_free(&f);
    }
    /* a merge of a merge */
    shard_text(t2, sizeof t2, 2, "abc", "2025-01-01T10:05:00Z", "node2", 30.0, 0);
    parse_into(&f, t1, "shard-1.csv");
    parse_into(&f, t2, "shard-2.csv");
    ck_assert_int_eq(merge(&r, &f, (struct kv_merge_opts){0}, err), KV_OK);
    struct kv_csv *m = merged_csv(r);
    kv_merge_destroy(r);
    files_free(&f);
    f.c[0] = m;
    f.n = 1;
    ck_assert_int_eq(merge(&r, &f, (struct kv_merge_opts){0}, err), KV_ERR_FORMAT);
    ck_assert_msg(strstr(err, "already a merged file") != NULL, "%s", err);
    files_free(&f);
}
END_TEST

/* compare --normalize divides each row of a merged file by the limits of
 * the machine it ran on (its own columns), not by one file-wide value. */
START_TEST(compare_normalizes_merged_rows_by_their_own_limits)
{
    struct files f = {0};
    /* shard 1 on a machine twice as fast in bandwidth, and twice as fast */
    shard_text(t1, sizeof t1, 1, "abc", "2025-01-01T10:00:00Z", "fast", 40.0, 0);
    shard_text(t2, sizeof t2, 2, "abc", "2025-01-01T10:05:00Z", "slow", 20.0, 0);
    parse_into(&f, t1, "shard-1.csv");
    parse_into(&f, t2, "shard-2.csv");
    struct kv_merge_result *r = NULL;
    char err[KV_CSV_ERR_LEN];
    ck_assert_int_eq(merge(&r, &f, (struct kv_merge_opts){0}, err), KV_OK);
    struct kv_csv *m = merged_csv(r);
    struct kv_compare_opts o;
    kv_compare_opts_defaults(&o);
    o.normalize = 1;
    struct kv_compare_result *res = NULL;
    ck_assert_msg(kv_compare_run(&res, m, m, &o, err, sizeof err) == KV_OK, "%s", err);
    int32_t col[KV_SWEEP_N_REQUIRED], jr = kv_csv_col(m, "read_gbps");
    ck_assert_int_eq(kv_sweep_validate(m, col, err, sizeof err), KV_OK);
    for (int64_t t = 0; t < res->n_items; t++) {
        int64_t row = res->items[t].base_row;
        double bytes = atof(kv_csv_cell(m, row, col[KV_SCHEMA_COL_BYTES]));
        double flops = atof(kv_csv_cell(m, row, col[KV_SCHEMA_COL_FLOPS]));
        double gbps = atof(kv_csv_cell(m, row, jr));
        double step = atof(kv_csv_cell(m, row, col[KV_SCHEMA_COL_STEP_MED]));
        double pred = fmax(bytes / gbps, flops / 100.0);
        ck_assert_msg(fabs(res->items[t].base - step / pred) <= 1e-9 * (step / pred),
                      "row %lld: %g vs %g", (long long)row, res->items[t].base, step / pred);
    }
    kv_compare_destroy(res);
    /* a row whose own limit is unusable: refused with the row's line */
    kv_csv_destroy(m);
    kv_merge_destroy(r);
    files_free(&f);
}
END_TEST

/* A shard cut inside its last field (no final newline) is refused, naming
 * the file and line, even when what is left still parses: 262144 cut to
 * 2621 is a number too. */
START_TEST(truncated_shard_is_refused)
{
    struct files f = {0};
    shard_text(t1, sizeof t1, 1, "abc", "2025-01-01T10:00:00Z", "node1", 20.0, 0);
    shard_text(t2, sizeof t2, 2, "abc", "2025-01-01T10:05:00Z", "node2", 30.0, 0);
    t2[strlen(t2) - 1] = '\0'; /* "...,none,1\n" -> "...,none,1" */
    parse_into(&f, t1, "shard-1.csv");
    parse_into(&f, t2, "shard-2.csv");
    struct kv_merge_result *r = NULL;
    char err[KV_CSV_ERR_LEN];
    for (int allow = 0; allow < 2; allow++) {
        ck_assert_int_eq(merge(&r, &f, (struct kv_merge_opts){.allow_partial = allow,
                                                              .allow_mixed = allow}, err),
                         KV_ERR_FORMAT);
        ck_assert_ptr_null(r);
        ck_assert_msg(strncmp(err, "shard-2.csv:", 12) == 0 && strstr(err, "no newline") != NULL,
                      "%s", err);
        ck_assert_ptr_null(strchr(err, '\n'));
    }
    files_free(&f);
}
END_TEST

/* Rows edited away from the plan: a configuration column changed, a row
 * moved to the other shard, a row swapped for another (the counts still
 * right): the complete set of shards no longer gives the plan's id. */
START_TEST(rows_away_from_the_plan_are_refused)
{
    struct files f = {0};
    struct kv_merge_result *r = NULL;
    char err[KV_CSV_ERR_LEN];
    for (int how = 0; how < 4; how++) {
        shard_text(t1, sizeof t1, 1, "abc", "2025-01-01T10:00:00Z", "node1", 20.0, 0);
        shard_text(t2, sizeof t2, 2, "abc", "2025-01-01T10:05:00Z", "node2", 30.0, 0);
        char *p = strstr(t2, "\nnone,2,64,4,2,16,128,1,0,32,0,0,2,128,");
        ck_assert_ptr_nonnull(p);
        if (how == 0) { /* seq_len 128 -> 256 */
            memcpy(p + 35, "256", 3);
        } else if (how == 1) { /* threads 2 -> 4 */
            p[33] = '4';
        } else if (how == 2) { /* the none 128 row moved to shard 1 */
            char *e = strchr(p + 1, '\n');
            char row[512];
            snprintf(row, sizeof row, "%.*s", (int)(e - p), p + 1);
            memmove(p, e, strlen(e) + 1);
            strcat(t1, row);
            strcat(t1, "\n");
        } else { /* its label edited */
            char *l = strstr(p + 1, ",none,1\n");
            ck_assert_ptr_nonnull(l);
            memcpy(l + 1, "nada", 4);
        }
        parse_into(&f, t1, "shard-1.csv");
        parse_into(&f, t2, "shard-2.csv");
        ck_assert_int_eq(merge(&r, &f, (struct kv_merge_opts){0}, err), KV_ERR_FORMAT);
        ck_assert_msg(strstr(err, "do not hold the rows it assigns") != NULL, "%d: %s", how,
                      err);
        ck_assert_ptr_null(strchr(err, '\n'));
        files_free(&f);
    }
}
END_TEST

/* A shard with `# shard_digest=` (kv_plan_shard_digest) is checked alone and
 * named, also in a merge missing other shards. */
START_TEST(shard_digest_checks_one_file)
{
    struct files f = {0};
    struct kv_merge_result *r = NULL;
    char err[KV_CSV_ERR_LEN];
    uint64_t d1 = 0;
    for (int i = 0; i < N_PLAN_ROWS; i++)
        if (plan_rows[i].shard == 1)
            d1 += row_hash(i);
    for (int edit = 0; edit < 2; edit++) {
        shard_text(t1, sizeof t1, 1, "abc", "2025-01-01T10:00:00Z", "node1", 20.0, 0);
        char *h = strstr(t1, "strategy,");
        char rest[8192];
        snprintf(rest, sizeof rest, "%s", h);
        snprintf(h, sizeof t1 - (size_t)(h - t1), "# shard_digest=%016llx\n%s",
                 (unsigned long long)d1, rest);
        if (edit) {
            char *p = strstr(t1, "\ndynamic,2,64,4,2,16,128,1,0,32,0,0,2,128,");
            ck_assert_ptr_nonnull(p);
            memcpy(p + 38, "129", 3);
        }
        parse_into(&f, t1, "shard-1.csv");
        enum kv_status st = merge(&r, &f, (struct kv_merge_opts){.allow_partial = 1}, err);
        if (!edit) {
            ck_assert_msg(st == KV_OK, "%s", err);
            kv_merge_destroy(r);
            r = NULL;
        } else {
            ck_assert_int_eq(st, KV_ERR_FORMAT);
            ck_assert_msg(strncmp(err, "shard-1.csv:", 12) == 0 &&
                              strstr(err, "not the ones shard 1/2 of its plan assigns") != NULL,
                          "%s", err);
        }
        files_free(&f);
    }
}
END_TEST

/* Every allocation failure in turn: an error, nothing leaked. */
START_TEST(allocation_failures_clean_up)
{
    struct files f = {0};
    shard_text(t1, sizeof t1, 1, "abc", "2025-01-01T10:00:00Z", "node1", 20.0, 0);
    shard_text(t2, sizeof t2, 2, "abc", "2025-01-01T10:05:00Z", "node2", 30.0, 0);
    parse_into(&f, t1, "shard-1.csv");
    parse_into(&f, t2, "shard-2.csv");
    int64_t live = kv_alloc_live();
    char err[KV_CSV_ERR_LEN];
    int saw_nomem = 0, ok = 0;
    for (int64_t k = 1; k < 400 && !ok; k++) {
        struct kv_merge_result *r = NULL;
        kv_alloc_fail_at(k, 0);
        enum kv_status st = merge(&r, &f, (struct kv_merge_opts){0}, err);
        kv_alloc_fail_at(0, 0);
        if (st == KV_OK) {
            ok = 1;
            kv_merge_destroy(r);
        } else {
            ck_assert_int_eq(st, KV_ERR_NOMEM);
            ck_assert_ptr_null(r);
            ck_assert(err[0] != '\0');
            saw_nomem = 1;
        }
        ck_assert_int_eq(kv_alloc_live(), live);
    }
    ck_assert(saw_nomem && ok);
    files_free(&f);
}
END_TEST

/* ------------------------------------------------------------------------ */

static Suite *merge_suite(void)
{
    Suite *s = suite_create("merge");
    TCase *t = tcase_create("merge");
    tcase_add_test(t, two_shards_merge_in_order_with_attribution);
    tcase_add_test(t, missing_shards_are_reported_by_number);
    tcase_add_test(t, partial_shard_is_refused_unless_allowed);
    tcase_add_test(t, repeated_keys_refused_or_newest_kept);
    tcase_add_test(t, mixed_commits_and_schemas_need_allow_mixed);
    tcase_add_test(t, schema2_params_are_in_the_key);
    tcase_add_test(t, foreign_and_merged_files_are_refused);
    tcase_add_test(t, compare_normalizes_merged_rows_by_their_own_limits);
    tcase_add_test(t, truncated_shard_is_refused);
    tcase_add_test(t, rows_away_from_the_plan_are_refused);
    tcase_add_test(t, shard_digest_checks_one_file);
    tcase_add_test(t, allocation_failures_clean_up);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(merge_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed;
}
