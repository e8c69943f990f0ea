/*
 * csv_schema.h - the sweep CSV's schema columns (docs/design.md: v1,
 * v2 = v1 + dtype + params, v3 = v2 + the noise columns), written once for
 * the file's writer (sweep_csv.c) and its readers (compare_join.c, merge.c).
 *
 * The one design decision: the column list is an X-macro, so the names, their
 * order and the readers' column indices all come from the same lines and
 * cannot drift apart. Writers emit these columns first, in this order, then
 * their extras; readers look columns up by name, so extras may follow.
 */
#ifndef KV_CSV_SCHEMA_H
#define KV_CSV_SCHEMA_H

#include <string.h>

/* ------------------------------------------------------------------------ */
/* Schema v1: required columns in docs/design.md's order                         */

/* What `kvlab sweep` writes; readers take every version listed here. */
#define KV_SWEEP_SCHEMA "3"
#define KV_SWEEP_SCHEMA_V2 "2"
#define KV_SWEEP_SCHEMA_V1 "1"
#define KV_SWEEP_SCHEMAS_READ "1, 2 and 3" /* for messages */

/* The version a `# schema=` value names (1, 2 or 3), or 0 for one kvlab
 * does not read. */
static inline int kv_sweep_schema_version(const char *v)
{
    return v == NULL                        ? 0
           : !strcmp(v, KV_SWEEP_SCHEMA)    ? 3
           : !strcmp(v, KV_SWEEP_SCHEMA_V2) ? 2
           : !strcmp(v, KV_SWEEP_SCHEMA_V1) ? 1
                                            : 0;
}

/* X(ID, "name"); the first 14 (strategy .. seq_len) form a row's key. */
#define KV_SCHEMA_V1_COLUMNS(X)                                                          \
    X(STRATEGY, "strategy") X(LAYERS, "layers") X(DIM, "dim") X(HEADS, "heads")          \
    X(KV_HEADS, "kv_heads") X(HEAD_DIM, "head_dim") X(HIDDEN, "hidden")                  \
    X(BATCH, "batch") X(WINDOW, "window") X(BITS, "bits") X(GROUP, "group")              \
    X(RESIDUAL, "residual") X(THREADS, "threads") X(SEQ_LEN, "seq_len") X(REPS, "reps")  \
    X(STEP_MED, "step_ns_median") X(STEP_P95, "step_ns_p95")                             \
    X(ATTN_MED, "attn_ns_median") X(FLOPS, "flops_step")                                 \
    X(ATTN_FLOPS, "attn_flops_step") X(BYTES, "bytes_step")                              \
    X(CACHE_BYTES, "cache_bytes") X(COPY_BYTES, "copy_bytes_step")                       \
    X(PEAK_RSS, "peak_rss_bytes") X(MAX_ABS_ERR, "max_abs_err") X(REL_ERR, "rel_err")    \
    X(TOKEN_MATCH, "token_match")

/* Index of each required column within the list above. */
#define KV_SCHEMA_COL_ENUM_(id, name) KV_SCHEMA_COL_##id,
enum kv_schema_col { KV_SCHEMA_V1_COLUMNS(KV_SCHEMA_COL_ENUM_) KV_SCHEMA_COL_COUNT };
#undef KV_SCHEMA_COL_ENUM_

/* Initializer entries for an array of the names: { KV_SCHEMA_V1_NAMES extras }. */
#define KV_SCHEMA_COL_NAME_(id, name) name,
#define KV_SCHEMA_V1_NAMES KV_SCHEMA_V1_COLUMNS(KV_SCHEMA_COL_NAME_)

#define KV_SWEEP_N_REQUIRED KV_SCHEMA_COL_COUNT
#define KV_SWEEP_N_KEY (KV_SCHEMA_COL_SEQ_LEN + 1) /* strategy, layers .. threads, seq_len */

/*
 * Schema v2: the v1 columns in order, then these two (written right after
 * them): the cache's storage dtype (kv_type_traits name: f32, int8, int4)
 * and the strategy's parameters as `k=v;k=v` from its table ("-" for a
 * strategy without parameters; readers take an empty cell the same way).
 * compare's key includes both when both files have them.
 */
#define KV_SCHEMA_V2_EXTRA_COLUMNS(X) X(DTYPE, "dtype") X(PARAMS, "params")
#define KV_SCHEMA_V2_NAMES KV_SCHEMA_V1_NAMES KV_SCHEMA_V2_EXTRA_COLUMNS(KV_SCHEMA_COL_NAME_)
#define KV_SWEEP_COL_DTYPE "dtype"
#define KV_SWEEP_COL_PARAMS "params"
#define KV_SWEEP_NO_PARAMS "-"

/* Optional extra column: K/V bytes attention read per step (compare.h). */
#define KV_SWEEP_COL_ATTN_BYTES "attn_bytes_step"

/*
 * Schema v3: v2, and among its extras (found by name; the sweep writes them
 * last) these, which say how far a row's times can be trusted: the 95%
 * bootstrap interval of step_ns_median (whole ns, ci_lo <= median <=
 * ci_hi), whether the interference classifier still called the reported
 * attempt noisy (0/1) and why ("-" when clean; never a comma, quote or
 * control byte). `attempts` (measurements of the row) is an extra of v2
 * already and stays where it was.
 */
#define KV_SWEEP_COL_CI_LO "step_ns_ci_lo"
#define KV_SWEEP_COL_CI_HI "step_ns_ci_hi"
#define KV_SWEEP_COL_NOISY "noisy"
#define KV_SWEEP_COL_NOISE_REASON "noise_reason"
#define KV_SWEEP_COL_ATTEMPTS "attempts"
#define KV_SWEEP_NO_NOISE "-"

/* Required columns in docs/design.md's order (compare_join.c); the first 14 are the key's. */
extern const char *const kv_sweep_required[KV_SWEEP_N_REQUIRED];

#endif /* KV_CSV_SCHEMA_H */
