/*
 * compare.h - compare two sweep CSVs (schemas 1, 2 and 3) and decide, per
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
 * Confidence intervals and noisy rows (schema 3; any file with the columns).
 * A row may carry a bootstrap 95% confidence interval of a median,
 * X_ci_lo and X_ci_hi for the metric X_median (step_ns_ci_lo/_hi for
 * step_ns_median), and `noisy` (0/1) with `noise_reason`. When both rows of
 * a time metric have a finite interval, it replaces the band above: at
 * threshold t, NEW is slower only when new.ci_lo > base.ci_hi * (1 + t) and
 * faster only when base.ci_lo > new.ci_hi * (1 + t), so the intervals must
 * not just separate but separate by the threshold; anything else is "same"
 * (within noise). The p95 spread is then not used: it is the spread of
 * single steps, the interval is the uncertainty of the median itself, which
 * is what two medians are compared by. Written as a band on the change,
 * d = new - base is a regression when d > (new - new.ci_lo) + (base.ci_hi -
 * base) + t * base.ci_hi (the item's noise, in the direction of d), which
 * is the same rule. A row marked noisy in either file (a time metric or
 * attn_vs_rest; sizes and errors do not depend on timing) is never called
 * better or worse: its verdict is KV_VERDICT_NOISY ("noisy, re-run", with
 * its reason), and with aggregate a group that holds a noisy row is noisy.
 * kv_compare_outcome says what the result is: a clean confirmed
 * regression first, else noisy, else clean.
 *
 * Rows are joined on the configuration key: strategy and every
 * configuration column (layers .. threads) plus seq_len, and the dtype and
 * params columns of a file that has them (schema 2 and later); reps is not
 * part of the key. Each file must have unique full keys (a duplicate is
 * refused). When both files have dtype and params the join is exact. When
 * one is schema 1 (an older baseline) the join falls back to the v1
 * columns, and a v1 key matches only when it is unambiguous: one row on
 * each side. A schema-2 file has several rows per v1 key where only dtype
 * or params tell them apart (dynamic-f16 and dynamic-bf16 are both
 * "dynamic bits=16"; quantized 2-bit per token and per channel both
 * "quantized bits=2"), and a schema-1 row cannot say which it was, so no
 * dtype is implied from it (bits already carries the width, and the
 * storage layout is nowhere): the rows of such a class are reported as
 * ambiguous, as rows present in one file only are, and the rest is
 * compared. Only no match at all is an error.
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

/* Schema 3's noise columns are named in csv_schema.h (KV_SWEEP_COL_NOISY,
 * KV_SWEEP_COL_NOISE_REASON, the step_ns interval); compare looks every one
 * up by name, so a file of any schema may carry them and files without
 * them compare as before. The interval of a metric X_median is X_ci_lo and
 * X_ci_hi (step_ns_median: step_ns_ci_lo/_hi). */
#define KV_COMPARE_MEDIAN_SUFFIX "_median"
#define KV_COMPARE_CI_LO_SUFFIX "_ci_lo"
#define KV_COMPARE_CI_HI_SUFFIX "_ci_hi"

/*
 * Checks that a parsed CSV is a usable sweep file: `# schema=1`, `2` or
 * `3`, every required column (schema 2 and 3: also dtype and params, dtype
 * non-empty), at least one row, integers in the key columns and reps,
 * numbers (nan/inf allowed) in the other required columns and in the
 * *_ci_lo / *_ci_hi columns, 0 or 1 in `noisy`, a non-empty strategy,
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
 * and the dtype and params of a file that has them (NULL: not in the key;
 * a key with them compares equal to one without on the rest). */
struct kv_sweep_key {
    const char *strategy;             /* points into the file's cells */
    int64_t v[KV_SWEEP_N_KEY - 1];    /* layers .. threads, seq_len */
    const char *ext[2];               /* dtype, params cells; NULL: not in the key */
    int64_t row;                      /* row index in its file */
};

/* k[0 .. c->n_rows) from the rows of a file validated by kv_sweep_validate;
 * ext: its dtype and params columns (kv_sweep_ext_cols) to put them in the
 * key, or NULL (the v1 key alone). */
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
    KV_VERDICT_NOISY,    /* a row measured under interference: not judged */
    KV_VERDICT_COUNT
};

/* One configuration across its seq_lens: items[first .. first + count). */
struct kv_compare_group {
    int64_t first, count;
    int64_t n_compared;    /* items with finite values and a non-zero base */
    int64_t n_noisy;       /* items marked noisy: the group is KV_VERDICT_NOISY */
    double change;         /* median of (new - base) / |base|; nan if none */
    double noise;          /* median of noise / |base| of the same items */
    enum kv_verdict verdict;
};

/* One joined configuration. */
struct kv_compare_item {
    int64_t base_row, new_row; /* row indices in the two files */
    double base, cur;          /* metric values (normalised if r->normalized) */
    double ratio;              /* cur / base (1 when both are 0) */
    double noise;              /* the |cur - base| still counted as same (with
                                  intervals: in the direction of the change) */
    int uses_ci;               /* the confidence intervals decided (see above) */
    unsigned noisy;            /* bit 0: the base row is noisy, bit 1: the new one */
    enum kv_verdict verdict;
};

/* A row of one file that was not compared. */
struct kv_compare_unmatched {
    int64_t row;        /* row index in its file */
    int cur;            /* 0: BASE, 1: NEW */
    int64_t candidates; /* rows of the other file with the same v1 key: > 0 means
                           ambiguous (several on one side), 0 in this file only */
};

/* What a result says, in the order it decides the exit status: a clean
 * regression wins over noise, noise over a clean pass. */
enum kv_compare_outcome {
    KV_COMPARE_CLEAN = 0, /* no regression, nothing noisy among the verdicts that count */
    KV_COMPARE_REGRESSED, /* a regression judged from clean rows */
    KV_COMPARE_NOISY,     /* no clean regression, but a row or group that counts is noisy */
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
    int64_t n_noisy;                /* compared items that are noisy (not judged) */
    int64_t n_only_base, n_only_new; /* rows of each file not compared */
    int64_t n_ambiguous_base, n_ambiguous_new; /* ... of which ambiguous */
    int64_t n_unmatched;            /* n_only_base + n_only_new */
    struct kv_compare_unmatched *unmatched; /* (n_unmatched): BASE's, then NEW's,
                                               each ambiguous first, in key order */
    double worst_ratio;             /* nan when nothing was compared */
    int64_t worst_item;             /* index into items, or -1 */
    uint32_t varying;               /* bit k: key column k differs between rows */
    int aggregate;                  /* the groups' verdicts decide (opts.aggregate) */
    int64_t n_groups;               /* groups (filled always) */
    struct kv_compare_group *groups; /* (n_groups), in items order */
    int64_t n_groups_regressed, n_groups_improved, n_groups_noisy;
    int attn_bytes_fallback;        /* normalised attn_ns_median predicted from
                                       cache_bytes (no attn_bytes_step column):
                                       bit 0 the base file, bit 1 the new one */

    /* private: column indices and machine rates, for the writers */
    int32_t col_base[KV_SWEEP_N_REQUIRED], col_cur[KV_SWEEP_N_REQUIRED];
    int32_t metric_base, metric_cur;
    int pred_attn; /* t_pred from attn_bytes_step (or cache_bytes) and
                      attn_flops_step, not the step's */
    int32_t col_attn_bytes_base, col_attn_bytes_cur; /* -1: no attn_bytes_step */
    int use_ext;                    /* both files have dtype and params: they join */
    int has_ext[2];                 /* [base, new]: the file has dtype and params */
    int32_t col_ext_base[2], col_ext_cur[2]; /* dtype, params columns (-1: none) */
    uint32_t ext_varying;           /* bit 0: dtype, bit 1: params differ between rows */
    int uses_ci;                    /* both files have the metric's interval columns */
    int noise_flags;                /* noisy rows are not judged (a time metric) */
    int32_t col_ci[2][2];           /* [base, new][lo, hi], -1 */
    int32_t col_noisy[2], col_reason[2]; /* [base, new], -1 */
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
 * some row did (otherwise), judged from clean rows. The CLI's exit status 1. */
int kv_compare_regressed(const struct kv_compare_result *r);

/* The result in one word (see enum kv_compare_outcome): the verdicts that
 * count are the groups' with aggregate, else the rows'. The CLI maps it to
 * its exit status: 1 regressed, 3 noisy, 0 clean. */
enum kv_compare_outcome kv_compare_outcome(const struct kv_compare_result *r);

/* Why row `row` of one side (cur: NEW) is noisy: its noise_reason cell, or
 * "" when the file has none or the row is clean. Points into the file. */
const char *kv_compare_noise_reason(const struct kv_compare_result *r, int cur, int64_t row);

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

/* "faster"/"slower" for times, "better"/"worse" otherwise, "same", "n/a",
 * "noisy". */
const char *kv_compare_verdict_str(const struct kv_compare_result *r, enum kv_verdict v);

/* ------------------------------------------------------------------------ */
/* Private to compare_join.c, compare.c and compare_report.c                */

/* Integer cell (r, j) of a file kv_sweep_validate accepted (key columns). */
int64_t kv_sweep_cell_int(const struct kv_csv *c, int64_t r, int32_t j);

/* keys (n_rows), sorted; KV_ERR_FORMAT on a duplicate. ext: the dtype and
 * params columns when they are in the key (else NULL). */
enum kv_status kv_sweep_keys_build(struct kv_sweep_key **out, const struct kv_csv *c,
                                   const int32_t col[KV_SWEEP_N_REQUIRED], const int32_t *ext,
                                   char *err, size_t err_len);

/* Joins res->base and res->cur (validated, columns and has_ext[] filled):
 * res->items (base_row, new_row) in key order, res->unmatched and the
 * n_only / n_ambiguous counts. KV_ERR_FORMAT on a duplicate full key in
 * either file or when no row matched. */
enum kv_status kv_compare_join(struct kv_compare_result *res, char *err, size_t err_len);

/* The metric of row r on one side (cur: the new file), normalised when
 * asked. */
double kv_compare_row_value(const struct kv_compare_result *res, int cur, int64_t r);

/* Two items belong to the same group (one table) when all key columns but
 * seq_len agree. */
int kv_compare_same_group(const struct kv_compare_result *r, int64_t a, int64_t b);

#endif /* KV_COMPARE_H */
