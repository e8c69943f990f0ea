/*
 * compare.h - compare two sweep CSVs (schema v1) and decide, per
 * configuration, whether a metric got better, worse or stayed the same
 * within noise. The library half of `kvlab compare`.
 *
 * The design decision that matters: a change only counts when it is larger
 * than the noise, and the noise is the larger of a relative threshold
 * (default 5%) and the spread each side measured itself (p95 - median of
 * the step time, on either file). With normalisation, each time is divided
 * by the file's own roofline prediction for that row,
 *
 *   step metrics:  t_pred = max(bytes_step / read_gbps, flops_step / sgemm_gflops)
 *   attn_ns_median: t_pred = max(attn_bytes_step / read_gbps,
 *                                attn_flops_step / sgemm_gflops)
 *
 * (GB/s = bytes/ns and GFLOP/s = flop/ns, so t_pred is in ns), where
 * read_gbps and sgemm_gflops come from the file's `# key=value` metadata,
 * measured in the same run, or, in a file joined by `kvlab merge` from runs
 * on several machines, from the row's own read_gbps and sgemm_gflops
 * columns (each row's limits measured where it ran). A machine that is uniformly slower (slower
 * memory and slower GEMM by the same factor) then compares as "same".
 * attn_bytes_step (an extra column after the required ones) is the K/V
 * bytes the attention kernel read in the step, which is what its time
 * depends on; cache_bytes is resident capacity (a static cache's whole
 * preallocation, dynamic's power-of-two rounding, 0 for none) and is used
 * only as a fallback for files written before the column existed
 * (attn_bytes_fallback says which side fell back; the CLI notes it).
 *
 * One derived metric needs no machine figures at all: attn_vs_rest =
 * attn_ns_median / (step_ns_median - attn_ns_median), the attention time in
 * units of the rest of the same steps (the projections and MLP streaming
 * the weights, timed in the very same moments). A machine that is slower or
 * busier for everything cancels; an attention kernel that got 1.3x slower
 * shows as a ratio of 1.3. It is what `make bench-check` judges kernels by:
 * on a shared VM the roofline measured once per run drifts by 20-30% against
 * the machine's state minutes later, the rest of the step does not.
 *
 * Rows are joined on the configuration key: strategy and every
 * configuration column (layers .. threads) plus seq_len, and, when both
 * files are schema 2, the dtype and params columns (two configurations of a
 * strategy that differ only in a parameter the v1 columns do not show, a
 * sink count or a page size, stay apart); reps is not part of the key. A
 * schema-1 file (an older baseline) joins a schema-2 one on the v1 key.
 * Each file must have unique keys.
 *
 * With aggregate on, the verdict that counts is per group (one strategy and
 * configuration across its seq_lens): the median of its rows' relative
 * changes against the median of their noise bands. On a shared machine a
 * single row can be off by 2x for reasons that have nothing to do with the
 * code (memory placement, a neighbour's burst); a real change of a kernel
 * moves most rows of a group, so the median sees it and one outlier cannot
 * fail a CI gate. Per-row verdicts are still computed and printed.
 */
#ifndef KV_COMPARE_H
#define KV_COMPARE_H

#include <stdint.h>
#include <stdio.h>

#include "csv_read.h"
#include "../measure/csv_schema.h"
#include "../../kernels/kv_common.h"

/* ------------------------------------------------------------------------ */
/* The sweep CSV schema (docs/design.md, schema v1)                              */

/* Schema v1's columns, KV_SWEEP_N_REQUIRED/N_KEY, KV_SWEEP_COL_ATTN_BYTES and
 * kv_sweep_required[] are in csv_schema.h. */
#define KV_METRIC_ATTN_VS_REST "attn_vs_rest" /* derived, see above */

/*
 * Checks that a parsed CSV is a usable sweep file: `# schema=1` or
 * `# schema=2`, every required column (schema 2: also dtype and params, non-
 * empty), at least one row, integers in the key columns and reps, numbers
 * (nan/inf allowed) in the other required columns, a non-empty strategy,
 * and the text rule (strategy.h, kv_label_ok) on every label the file
 * holds: the strategy, label and dtype cells and each entry of
 * `# strategies=` are labels, params cells `k=v;k=v` of label characters.
 * Fills col[] with the index of each required column. KV_ERR_FORMAT with
 * one line "FILE:LINE: reason" on failure (a bad byte named, not echoed).
 */
enum kv_status kv_sweep_validate(const struct kv_csv *c, int32_t col[KV_SWEEP_N_REQUIRED],
                                 char *err, size_t err_len);

/* ------------------------------------------------------------------------ */
/* The join key (shared with kvlab merge)                                   */

/* A row's configuration: strategy, layers .. threads, seq_len (not reps),
 * and, when schema-2 files are joined, dtype and params. */
struct kv_sweep_key {
    const char *strategy;             /* points into the file's cells */
    int64_t v[KV_SWEEP_N_KEY - 1];    /* layers .. threads, seq_len */
    const char *ext[2];               /* dtype, params cells; NULL: not in the key */
    int64_t row;                      /* row index in its file */
};

/* k[0 .. c->n_rows) from the rows of a file validated by kv_sweep_validate;
 * ext: its dtype and params columns (kv_sweep_ext_cols) to put them in the
 * key, or NULL (a join with a schema-1 file). */
void kv_sweep_key_fill(struct kv_sweep_key *k, const struct kv_csv *c,
                       const int32_t col[KV_SWEEP_N_REQUIRED], const int32_t *ext);
/* ext[] = the dtype and params columns (-1 when absent); 1 when both exist. */
int kv_sweep_ext_cols(const struct kv_csv *c, int32_t ext[2]);
/* Total order on keys (not on row); 0 when two rows are the same configuration. */
int kv_sweep_key_cmp(const struct kv_sweep_key *a, const struct kv_sweep_key *b);
/* "dynamic layers=4 ... T=512" for messages (one line, cut to n). */
void kv_sweep_key_describe(char *buf, size_t n, const struct kv_sweep_key *k);

/* ------------------------------------------------------------------------ */
/* Comparison                                                               */

struct kv_compare_opts {
    const char *metric;   /* column name; default "step_ns_median" */
    double threshold_pct; /* relative noise floor in percent; default 5 */
    int normalize;        /* divide time metrics by the roofline prediction */
    int aggregate;        /* judge groups by their median change (see above) */
};

void kv_compare_opts_defaults(struct kv_compare_opts *o);

enum kv_verdict {
    KV_VERDICT_SAME = 0, /* |new - base| within noise */
    KV_VERDICT_BETTER,   /* improved beyond noise */
    KV_VERDICT_WORSE,    /* regressed beyond noise */
    KV_VERDICT_NA,       /* a value is nan/inf: not compared */
    KV_VERDICT_COUNT
};

/* One configuration across its seq_lens: items[first .. first + count). */
struct kv_compare_group {
    int64_t first, count;
    int64_t n_compared;    /* items with finite values and a non-zero base */
    double change;         /* median of (new - base) / |base|; nan if none */
    double noise;          /* median of noise / |base| of the same items */
    enum kv_verdict verdict;
};

/* One joined configuration. */
struct kv_compare_item {
    int64_t base_row, new_row; /* row indices in the two files */
    double base, cur;          /* metric values (normalised if r->normalized) */
    double ratio;              /* cur / base (1 when both are 0) */
    double noise;              /* the |cur - base| still counted as same */
    enum kv_verdict verdict;
};

struct kv_compare_result {
    const struct kv_csv *base, *cur; /* borrowed; must outlive the result */
    char metric[64];
    const char *unit;       /* "ns", "bytes", "x roofline", "" ... */
    int is_time;            /* the metric is a time (name has "_ns") */
    int normalized;         /* values are divided by t_pred */
    int smaller_is_better;  /* 0 for token_match and rates */
    int self_normalized;    /* KV_METRIC_ATTN_VS_REST: derived, needs no machine rates */
    int uses_spread;        /* p95 - median widened the noise band */
    double threshold_pct;

    int64_t n_items;                /* joined rows, in key order */
    struct kv_compare_item *items;  /* (n_items) */
    int64_t n_compared, n_regressed, n_improved, n_na;
    int64_t n_only_base, n_only_new;
    double worst_ratio;             /* nan when nothing was compared */
    int64_t worst_item;             /* index into items, or -1 */
    uint32_t varying;               /* bit k: key column k differs between rows */
    int aggregate;                  /* the groups' verdicts decide (opts.aggregate) */
    int64_t n_groups;               /* groups (filled always) */
    struct kv_compare_group *groups; /* (n_groups), in items order */
    int64_t n_groups_regressed, n_groups_improved;
    int attn_bytes_fallback;        /* normalised attn_ns_median predicted from
                                       cache_bytes (no attn_bytes_step column):
                                       bit 0 the base file, bit 1 the new one */

    /* private: column indices and machine rates, for the writers */
    int32_t col_base[KV_SWEEP_N_REQUIRED], col_cur[KV_SWEEP_N_REQUIRED];
    int32_t metric_base, metric_cur;
    int pred_attn; /* t_pred from attn_bytes_step (or cache_bytes) and
                      attn_flops_step, not the step's */
    int32_t col_attn_bytes_base, col_attn_bytes_cur; /* -1: no attn_bytes_step */
    int use_ext;                    /* both files are schema 2: params and dtype join */
    int32_t col_ext_base[2], col_ext_cur[2]; /* dtype, params columns (schema 2) */
    uint32_t ext_varying;           /* bit 0: dtype, bit 1: params differ between rows */
    double base_read_gbps, base_gflops, cur_read_gbps, cur_gflops;
    int32_t col_rate[2][2]; /* [base, new][read_gbps, sgemm_gflops] per-row columns, -1 */
};

/*
 * Validates both files, joins them, and classifies every joined row.
 * KV_ERR_FORMAT (with "FILE:LINE: reason") for unusable input, including
 * no rows in common and, with normalize on a time metric, missing or
 * non-positive read_gbps / sgemm_gflops metadata. KV_ERR_INVALID for a bad
 * option (unknown metric column, negative threshold).
 */
enum kv_status kv_compare_run(struct kv_compare_result **out, const struct kv_csv *base,
                              const struct kv_csv *cur, const struct kv_compare_opts *o,
                              char *err, size_t err_len);

void kv_compare_destroy(struct kv_compare_result *r);

/* 1 when the result is a regression: some group regressed (aggregate) or
 * some row did (otherwise). The CLI's exit status 1. */
int kv_compare_regressed(const struct kv_compare_result *r);

enum kv_compare_format {
    KV_COMPARE_TABLE = 0, /* per-strategy tables and a summary line */
    KV_COMPARE_CSV,       /* one row per joined configuration */
    KV_COMPARE_JSON,      /* [{"name","unit","value"}] of the NEW file */
    KV_COMPARE_FORMAT_COUNT
};

/* Parses "table" / "csv" / "json"; -1 if unknown. */
int kv_compare_format_parse(const char *s);

/* Writes the result to f; KV_ERR_IO if a write fails. */
enum kv_status kv_compare_write(FILE *f, const struct kv_compare_result *r,
                                enum kv_compare_format fmt);

/* "faster"/"slower" for times, "better"/"worse" otherwise, "same", "n/a". */
const char *kv_compare_verdict_str(const struct kv_compare_result *r, enum kv_verdict v);

/* ------------------------------------------------------------------------ */
/* Private to compare_join.c, compare.c and compare_report.c                */

/* Integer cell (r, j) of a file kv_sweep_validate accepted (key columns). */
int64_t kv_sweep_cell_int(const struct kv_csv *c, int64_t r, int32_t j);

/* keys (n_rows), sorted; KV_ERR_FORMAT on a duplicate. ext: the dtype and
 * params columns when they join (else NULL). */
enum kv_status kv_sweep_keys_build(struct kv_sweep_key **out, const struct kv_csv *c,
                                   const int32_t col[KV_SWEEP_N_REQUIRED], const int32_t *ext,
                                   char *err, size_t err_len);

/* The metric of row r on one side (cur: the new file), normalised when
 * asked. */
double kv_compare_row_value(const struct kv_compare_result *res, int cur, int64_t r);

/* Two items belong to the same group (one table) when all key columns but
 * seq_len agree. */
int kv_compare_same_group(const struct kv_compare_result *r, int64_t a, int64_t b);

#endif /* KV_COMPARE_H */
