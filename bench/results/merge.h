/*
 * merge.h - join sweep CSVs into one file of the same schema: the shards of
 * one sweep (`kvlab sweep --shard I/N`, run by a Slurm array job or side by
 * side), or sweeps of other configurations. The library half of
 * `kvlab merge`.
 *
 * The design decision that matters: a merged file must read like one sweep
 * to every reader (compare, the plots, the report) and yet keep every row
 * attributable to the run that measured it. So the sweep's columns keep
 * their order and values, and each row gains columns naming where it ran
 * (KV_MERGE_COLUMNS: the input's number, its shard, host, CPU, commit, date
 * and the limits measured there, which `compare --normalize` then uses per
 * row). Metadata that all inputs share stays as it was; metadata that
 * differs is kept per input as `# source.K.key=value` and summarised at the
 * top: limits and times by their largest value (the best the machines did,
 * the longest shard), `partial` by any, `date` by the newest, `schema` (1
 * and 2, with allow_mixed) by 1, which every input satisfies (schema 2's
 * dtype and params stay as extra columns), anything else as "mixed". The
 * join key includes dtype and params when every input has them.
 *
 * Refused, each as bad input with one line naming the file (KV_ERR_FORMAT):
 * a file that is not a kvlab sweep CSV; a file marked `# partial=1`
 * (unless allow_partial); files of different commits, schema versions or
 * columns (unless allow_mixed); two rows with the same key (compare's join
 * key), unless prefer_newest keeps the row of the file with the newest
 * `# date=` (on a tie, the later file on the command line); shards of one
 * plan with some missing (reported by number; unless allow_partial, which
 * marks the output partial); a file that is itself a merge; a file whose
 * last line has no newline (kvlab always writes one: it was cut short, maybe
 * inside its last field, so 262144 would read as 2621), whatever the
 * permissions; shards whose rows are not those their plan assigns them - a
 * complete set of one plan (all N, none partial) must give back the plan's
 * id from its rows and metadata (shard.h), and a shard with
 * `# shard_digest=` must match it alone (checked also in a partial merge,
 * naming the file): a row removed, added, moved or with an edited
 * configuration column is refused.
 */
#ifndef KV_MERGE_H
#define KV_MERGE_H

#include <stdint.h>

#include "compare.h"
#include "csv_read.h"
#include "csv_write.h"

/* Columns merge appends to every row, after the input's own. */
#define KV_MERGE_COLUMNS(X)                                                              \
    X("source") X("shard") X("host") X("cpu") X("commit") X("date") X("read_gbps")       \
    X("copy_gbps") X("sgemm_gflops")

struct kv_merge_opts {
    int allow_mixed;   /* merge across commits, schema versions, column sets */
    int allow_partial; /* accept partial files and missing shards (output partial=1) */
    int prefer_newest; /* a repeated key keeps the newest file's row */
};

/* One input, for the caller's summary (the shard balance). */
struct kv_merge_source {
    int32_t shard, n_shards; /* 0, 0 when the input is not a shard */
    int64_t rows_in, rows_kept;
    double pred_s;           /* its predicted sweep time (# pred_s=), nan if none */
    double sweep_s;          /* its measured sweep time (# sweep_s=), nan if none */
    int partial;
};

struct kv_merge_result {
    struct kv_csv_writer *out;    /* the merged file; kv_csv_writer_write it */
    int64_t n_rows;
    int64_t n_resolved;           /* repeated keys settled by prefer_newest */
    int32_t n_sources;
    struct kv_merge_source *src;  /* (n_sources) in input order */
    int partial;                  /* the output is marked partial=1 */
    char missing[KV_CSV_ERR_LEN]; /* shards let missing by allow_partial, or "" */
};

/*
 * Merges in[0 .. n) (parsed files; their names are used in messages).
 * KV_ERR_FORMAT with a one-line "FILE:LINE: reason" in err for every
 * refusal above; KV_ERR_NOMEM.
 */
enum kv_status kv_merge_run(struct kv_merge_result **out, const struct kv_csv *const *in,
                            int32_t n, const struct kv_merge_opts *o, char *err,
                            size_t err_len);

void kv_merge_destroy(struct kv_merge_result *r);

#endif /* KV_MERGE_H */
