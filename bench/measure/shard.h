/*
 * shard.h - split a sweep into N disjoint parts of about equal predicted
 * cost, so that N processes (a Slurm array job, GNU parallel, several
 * machines) can each run one part and `kvlab merge` can join their files
 * into the whole sweep, row for row.
 *
 * The design decision that matters: there is no coordinator. Every shard
 * computes the whole plan itself, from the sweep's options alone, in integer
 * arithmetic (FLOPs, bytes, nanoseconds at whole-number rates), so N
 * processes on N machines, with different compilers and CPUs, agree on which
 * shard owns which row without talking to each other. The plan's id goes
 * into each shard's file, and merge checks that the shards it joins come
 * from one plan and hold exactly its rows: the id is a hash of what the
 * files themselves record - the configuration metadata (seed, warmup, reps,
 * the model's mlp, the planning rates, the shard count) and the identity of
 * every row as its CSV line shows it (strategy, the key columns layers ..
 * seq_len, dtype, params, label) with its shard (kv_plan_row_hash, summed:
 * kv_plan_id_of) - so merge recomputes it from a complete set of shards,
 * and a row missing, added, moved to another shard or with an edited
 * configuration column changes it. A shard's own digest (the sum of its
 * rows' hashes, kv_plan_shard_digest, `# shard_digest=`) lets merge check
 * one file alone and name it.
 *
 * Cost model (predicted wall time of a forward):
 *     t = max(flops / gflops, bytes / gbps) + bytes written into the cache / copy_gbps
 * with flops = the GEMMs (closed form, as bench/model/model.c counts them) plus
 * attention (4 * head_dim * heads per visible query-key pair), bytes = the
 * weights plus the K/V the step reads. What a strategy stores, exposes and
 * copies is not guessed: a probe cache of the strategy (one layer, one
 * sequence, one KV head; bytes scale linearly in each) is driven through
 * the sweep's own schedule of appends, and its spans and copied bytes are
 * read through the same accounting the model uses (kv_attn_span_bytes,
 * kv_attn_visible_pairs, copied_bytes). So dynamic-concat's O(T) copy per
 * step, a sliding window's flat K/V and a quantized cache's smaller rows are
 * all in the prediction without bench/ naming a strategy. Prefill (untimed,
 * but real time) is predicted from its FLOPs.
 *
 * A shard's cost is not the sum of its rows: every row is prefilled from an
 * empty cache (sweep.h: a row never depends on the rows before it), but
 * every shard that measures a lossy strategy or `none` at some T also runs
 * the exact reference there. The planner therefore simulates each candidate
 * shard's run (sweep.c's order: T ascending, the reference first) and
 * assigns rows greedily, largest first, to the shard where a row costs
 * least without raising the largest shard's predicted time, else to the
 * shard it leaves smallest.
 *
 * A strategy is probed with one layer when it takes one, else (a per-layer
 * pattern, `hybrid --layers-pattern sliding:1024*3+dynamic`) with the
 * model's layers, each probed; a probe the strategy refuses is reported
 * with its name and reason.
 */
#ifndef KV_SHARD_H
#define KV_SHARD_H

#include <stdint.h>

#include "csv_schema.h"
#include "sweep.h"

#define KV_PLAN_MAX_ROWS (KV_SWEEP_MAX_STRATEGIES * KV_SWEEP_MAX_LENS)

/*
 * Default planning rates, whole GB/s and GFLOP/s: the sweep's own ETA
 * factors (0.6 of sgemm, 0.7 of read bandwidth) applied to the 2-core
 * reference run of docs/performance.md (sgemm 250-290 GFLOP/s, read 25-28 GB/s),
 * and the rate at which dynamic-concat's per-step copies into freshly
 * allocated memory ran there (the 8192 row: 134 MB in ~80 ms, page faults
 * included). Only their ratios shape the plan; --plan-rates changes them.
 */
#define KV_PLAN_GFLOPS_DEFAULT 160
#define KV_PLAN_GBPS_DEFAULT 18
#define KV_PLAN_COPY_GBPS_DEFAULT 2

struct kv_plan_rates {
    int64_t gflops;    /* sustained GEMM rate, GFLOP/s = FLOP per ns (>= 1) */
    int64_t gbps;      /* read bandwidth, GB/s = bytes per ns (>= 1) */
    int64_t copy_gbps; /* writes into the cache, fresh memory included (>= 1) */
};

void kv_plan_rates_default(struct kv_plan_rates *r);

/* Parses "GFLOPS,GBPS" or "GFLOPS,GBPS,COPY_GBPS" (whole numbers in
 * 1..1000000); 0, or -1 leaving *r untouched. */
int kv_plan_rates_parse(const char *s, struct kv_plan_rates *r);

/* Parses "I/N" (decimal, 1 <= I <= N <= KV_PLAN_MAX_ROWS); 0, or -1. */
int kv_shard_parse(const char *s, int32_t *i, int32_t *n);

struct kv_plan_row {
    int32_t strategy;   /* index into cfg->strategies */
    int32_t len_index;  /* index into cfg->seq_lens */
    int32_t seq_len;
    int32_t reps;       /* timed steps; automatic `none` reps are predicted */
    int32_t shard;      /* 1 .. n_shards */
    int64_t flops_step; /* GEMM + attention FLOPs of the step over exactly T */
    int64_t bytes_step; /* weights + K/V bytes that step reads */
    int64_t copy_bytes; /* bytes written into the cache per timed step (mean) */
    int64_t alone_ns;   /* predicted time of a shard holding only this row */
    int64_t cost_ns;    /* its predicted time in its shard: its prefill and steps */
    uint64_t key_hash;  /* kv_plan_row_hash of its identity and shard */
};

struct kv_plan {
    int32_t n_rows;                         /* every row of the whole sweep */
    struct kv_plan_row rows[KV_PLAN_MAX_ROWS]; /* in file order: strategy, then T */
    int32_t n_shards;
    int64_t shard_ns[KV_PLAN_MAX_ROWS];    /* (n_shards) predicted time of each
                                               shard's sweep: rows, prefills and
                                               the reference where only it runs */
    int32_t shard_rows[KV_PLAN_MAX_ROWS];  /* (n_shards) rows per shard */
    int64_t whole_ns;                      /* the unsharded sweep */
    struct kv_plan_rates rates;
    uint64_t id;                           /* hash of configuration, rows, shards */

    /* private: the schedule's pieces, from the probes */
    int32_t n_slots;                                /* slot 0: the reference */
    int32_t slot_index[KV_SWEEP_MAX_STRATEGIES + 1]; /* cfg index, -1 hidden ref */
    int32_t slot_none[KV_SWEEP_MAX_STRATEGIES + 1];
    int32_t slot_whole[KV_SWEEP_MAX_STRATEGIES + 1]; /* kv_sweep_whole_prefill */
    int32_t slot_window[KV_SWEEP_MAX_STRATEGIES + 1];
    int64_t step_ns[KV_SWEEP_MAX_STRATEGIES + 1][KV_SWEEP_MAX_LENS]; /* W+R steps */
    int32_t n_lens, seq_lens[KV_SWEEP_MAX_LENS];
    int32_t reps_at[KV_SWEEP_MAX_LENS];             /* cached strategies' R */
    int64_t gemm_per_token, classifier, weights;    /* FLOPs, FLOPs, bytes */
    int64_t attn_per_pair;                          /* FLOPs, all layers and batch */
    int64_t attn_per_layer_pair;                    /* FLOPs, one layer, all batch */
    int32_t warmup, batch;
};

/*
 * Plans cfg (strategies, lengths, reps, warmup, and cfg->only when set: a
 * frontier's rows) on model mc into n_shards (1 .. number of rows).
 * KV_ERR_INVALID (or KV_ERR_FULL, KV_ERR_OVERFLOW) with *why set to one
 * sentence when n_shards exceeds the rows, the sweep is invalid or a
 * strategy's cache refuses the configuration (naming the strategy's label
 * and the reason); KV_ERR_NOMEM. *why points to storage of this thread,
 * valid until its next call.
 */
enum kv_status kv_plan_create(struct kv_plan **out, const struct kv_sweep_config *cfg,
                              const struct kv_model_config *mc,
                              const struct kv_plan_rates *rates, int32_t n_shards,
                              const char **why);
void kv_plan_destroy(struct kv_plan *p);

/* only[i] bit ti set for the rows of shard (1 .. n_shards); for cfg->only. */
void kv_plan_select(const struct kv_plan *p, int32_t shard,
                    uint32_t only[KV_SWEEP_MAX_STRATEGIES]);

/* ---- what the plan's id is made of (merge recomputes it) ------------- */

/* One row's identity as a sweep CSV line shows it: its strategy, dtype,
 * params and label cells (NULL: an absent column, hashed as ""), the key's
 * integer columns layers .. threads, seq_len (csv_schema.h's order, as in
 * struct kv_sweep_key) and its shard (1 .. N). */
struct kv_plan_key {
    const char *strategy, *dtype, *params, *label;
    int64_t v[KV_SWEEP_N_KEY - 1];
    int32_t shard;
};
uint64_t kv_plan_row_hash(const struct kv_plan_key *k);

/* The configuration the id covers besides the rows, each as the files
 * record it: `# seed=`, `# warmup=`, reps (`# reps_mode=fixed`: the reps
 * column, else 0), the `mlp` column, `# plan_rates=`, the N of `# shard=I/N`
 * and the number of rows of all shards. */
struct kv_plan_config_key {
    uint64_t seed;
    int64_t warmup, reps, mlp;
    struct kv_plan_rates rates;
    int32_t n_shards;
    int64_t n_rows;
};
/* The plan id of c and the sum (mod 2^64) of every row's kv_plan_row_hash. */
uint64_t kv_plan_id_of(const struct kv_plan_config_key *c, uint64_t rows_digest);

/* The sum of kv_plan_row_hash over the rows of shard (1 .. n_shards): what a
 * shard's `# shard_digest=%016llx` records, so merge can check that file
 * alone. */
uint64_t kv_plan_shard_digest(const struct kv_plan *p, int32_t shard);

#endif /* KV_SHARD_H */
