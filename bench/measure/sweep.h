/*
 * sweep.h - the measurement loop behind `kvlab sweep`: for every strategy
 * and every sequence length T, time the decode step that attends over T
 * tokens, and record its FLOPs, bytes, cache memory and logits error.
 *
 * The design decision that matters: all caches are fed ONE fixed, seeded
 * token sequence (token i of batch row b depends on the seed, b and i
 * only). For each T (ascending), every cache is emptied and prefilled,
 * untimed and in chunks, to P = T - 1 - W - (R-1)/2 tokens, then runs W
 * warm-up and R timed decode steps, each feeding the next token of the
 * sequence (teacher forcing). Timed step j (0-based) therefore attends over
 * T - (R-1)/2 + j tokens: the steps are centred on T, step (R-1)/2 attends
 * over exactly T, and the FLOP, byte and memory columns are read at that
 * step. Because every strategy sees the same tokens at the same positions
 * through the same appends, the exact `dynamic` cache (the reference) gives
 * each other strategy its logits error at every step for free.
 *
 * A row's figures depend on its own configuration only (strategy,
 * parameters, T, the model, seed, batch, warmup, reps), never on which
 * other rows the run measures: a quantized cache's state at a step depends
 * on the appends that built it (its residual, which tokens a flush took),
 * so a cache is never carried from one T to the next - a row at T measured
 * alone, in a shard or in the whole sweep is the same measurement. The
 * price is a prefill per row instead of one pass per strategy. `static`
 * still has one capacity for every row (the largest T's), which is what its
 * cache_bytes reports.
 *
 * `none` keeps nothing: its step is one forward of the whole T-token prefix
 * (positions 0..T-1), repeated W + R times, so its rows attend over exactly
 * T, and its logits are compared with the reference's step at T.
 *
 * On a shared machine another program can take the cores for seconds. Each
 * row's timed steps run inside an interference window (noise.h); a row the
 * classifier calls noisy is measured again (from an empty cache, prefilled
 * back to P) after a short pause, within cfg->max_retries per row and
 * KV_SWEEP_RETRY_BUDGET per run, and not while the machine stays busy row
 * after row (KV_SWEEP_BUSY_ROWS). A row still noisy when they run out is
 * reported with its last attempt's figures, flagged (noisy, noise_reason):
 * never dropped, never passed off as clean.
 *
 * Labels follow the text rule (strategy.h, kv_label_ok): kv_sweep_check
 * refuses a strategy whose label is not one, before any work.
 *
 * Library code: returns kv_status, never prints; progress goes through
 * callbacks, and an interrupt flag (set by a signal handler) stops the run
 * between two forwards, dropping the row in flight.
 */
#ifndef KV_SWEEP_H
#define KV_SWEEP_H

#include <signal.h>

#include "../model/kv_model.h"
#include "noise.h"

#define KV_SWEEP_MAX_STRATEGIES 64 /* a frontier lists each configuration per T */
#define KV_SWEEP_STR_(x) #x
#define KV_SWEEP_STR(x) KV_SWEEP_STR_(x)
#define KV_SWEEP_MAX_LENS 32
#define KV_SWEEP_LABEL_LEN 32

/* Automatic repetitions: timed steps of cached strategies per row, the
 * range of `none`'s (scaled so a row costs about KV_SWEEP_NONE_BUDGET_NS),
 * and the tokens of one prefill forward. */
#define KV_SWEEP_AUTO_REPS 21
#define KV_SWEEP_NONE_REPS_MIN 3
#define KV_SWEEP_NONE_BUDGET_NS 1500000000LL
#define KV_SWEEP_PREFILL_CHUNK 1024

/* A noisy row (kv_noise_classify over its timed steps) is measured again,
 * from a fresh prefill, up to cfg->max_retries times, at most
 * KV_SWEEP_RETRY_BUDGET times per run; before retry k (1, 2, ...) the sweep
 * pauses KV_SWEEP_BACKOFF_NS * 2^(k-1), at most KV_SWEEP_BACKOFF_MAX_NS. */
#define KV_SWEEP_RETRY_BUDGET 16
#define KV_SWEEP_BACKOFF_NS 50000000LL
#define KV_SWEEP_BACKOFF_MAX_NS 1000000000LL
/* After this many reported rows in a row stayed noisy through their retries,
 * no row is measured again until one comes out clean: the machine is busy
 * throughout, and a retry would measure the same load again at the cost of
 * the run's time (bench-quick's sweep beside three CPU-bound loops had every
 * row noisy and spent all 16 retries on its first rows). A burst that ends
 * gives a clean row, and retries resume. */
#define KV_SWEEP_BUSY_ROWS 3

/* The interval of a row's median step time: a percentile bootstrap with
 * this many resamples (kv_stats_median_ci_i64) at this level. */
#define KV_SWEEP_CI_RESAMPLES 2000
#define KV_SWEEP_CI_LEVEL 0.95

/* Room for a noisy row's reasons ("; "-joined, kv_noise_classify). */
#define KV_SWEEP_NOISE_LEN 256

#define KV_SWEEP_PARAMS_BYTES KV_PARAMS_MAX_BYTES
#define KV_SWEEP_LAYER_BYTES_LEN 256

/* One measured strategy: its table, its parameters (ops->params_size bytes)
 * and the label its rows are filed under (kv_strategy_label). */
struct kv_sweep_strategy {
    const struct kv_strategy_ops *ops;
    _Alignas(16) unsigned char params[KV_SWEEP_PARAMS_BYTES];
    char label[KV_SWEEP_LABEL_LEN]; /* "dynamic", "quantized-int4", ... */
};

/* One finished (strategy, T) measurement. */
struct kv_sweep_row {
    int32_t strategy;        /* index into cfg->strategies */
    int32_t len_index;       /* index into cfg->seq_lens */
    int32_t window;          /* sliding-window mask in effect (0 = none) */
    int32_t bits;            /* bits per element of the cache's dtype (32: f32) */
    int32_t group, residual; /* the parameters of those names, else 0 (schema v1) */
    int32_t seq_len;         /* tokens the step at the median position attends over */
    int32_t seq_len_lo, seq_len_hi; /* range over the timed steps */
    int32_t reps, warmup;
    int64_t step_ns_median, step_ns_p95, step_ns_min;
    double step_ns_mean;
    int64_t attn_ns_median;  /* kv_attn time per step, all layers */
    int64_t gemv_ns_median;  /* the weight GEMMs' (GEMVs') time per step */
    int64_t ops_ns_median;   /* the rest: norms, RoPE, SwiGLU, cache update */
    int64_t sync_ns_median;  /* of all three: waiting for team threads */
    int64_t flops_step;      /* kv_flops_total of the step at seq_len */
    int64_t attn_flops_step; /* flops.attn of that step (QK^T and PV) */
    int64_t gemm_flops_step; /* flops.gemm of that step */
    size_t bytes_step;       /* analytic bytes read by that step */
    size_t attn_bytes_step;  /* the K/V part of bytes_step: the spans' bytes the
                                attention kernel read in that step, all layers */
    size_t cache_bytes;      /* resident cache bytes after that step */
    /* the same per layer, run-length: "B*N;B*N" in layer order (N omitted
     * when 1), e.g. "262144*3;1048576" for three windowed layers and a
     * growing one; ends in "..." if it does not fit */
    char layer_bytes[KV_SWEEP_LAYER_BYTES_LEN];
    double copy_bytes_step;  /* bytes written into the cache per timed step */
    size_t peak_rss_bytes;   /* process peak RSS when the row finished */
    double max_abs_err;      /* max |logit - reference| over timed steps */
    double rel_err;          /* max over timed steps of ||l - ref|| / ||ref|| */
    double token_match;      /* fraction of timed steps with the same argmax */
    int32_t acc_measured;    /* 1: compared with the reference; 0: is the reference */
    double cpu_util;         /* process CPU time during the timed steps / (their
                                wall time * threads): well below 1 when another
                                program took the cores (the row is suspect) */
    int32_t attempts;        /* measurements of this row (> 1: retried) */
    /* the 95% bootstrap interval of step_ns_median over the timed steps,
     * lo <= median <= hi; seeded from the run's seed, the label and T, so
     * the same steps give the same interval in any run that measures them */
    int64_t step_ns_ci_lo, step_ns_ci_hi;
    int32_t noisy;           /* 1: the reported attempt was disturbed (noise.h) */
    char noise_reason[KV_SWEEP_NOISE_LEN]; /* the classifier's reasons; "" when clean */
    double bound_gbps;       /* the DRAM read limit measured right before and after
                                the reported attempt (the best of both), NaN
                                without cfg->probe */
};

struct kv_sweep_progress {
    int32_t strategy;        /* index into cfg->strategies, -1: the hidden reference */
    const char *label;
    int32_t seq_len;
    int32_t rows_done, rows_total;
    int64_t elapsed_ns;
    int64_t eta_ns;          /* predicted time left, -1 when unknown */
    double frac_done;        /* 0..1, by predicted work */
    const char *busy;        /* why the last attempt was noisy (the machine is busy), or NULL */
};

/* The share of the plan's predicted work the ETA's correction is weighed
 * against: after that much work the measured speed counts as much as the
 * plan's. */
#define KV_SWEEP_ETA_PRIOR 0.1

struct kv_read_probe;
struct kv_sweep_config {
    struct kv_cache_config cache; /* unused fields are taken from the model */
    struct kv_sweep_strategy strategies[KV_SWEEP_MAX_STRATEGIES];
    int32_t n_strategies;
    int32_t seq_lens[KV_SWEEP_MAX_LENS]; /* strictly ascending, >= 2 */
    int32_t n_lens;
    int32_t none_max;  /* `none` only at T <= none_max; 0: every T */
    int32_t reps;      /* timed steps per row; 0: automatic */
    int32_t warmup;    /* untimed decode steps before them (>= 0) */
    int32_t max_retries; /* re-measurements of a noisy row (0: never) */
    const struct kv_noise_limits *noise; /* what counts as noisy; NULL: the defaults */
    int32_t batch;
    int32_t threads;
    uint64_t seed;
    double est_gflops, est_gbps; /* machine rates for ETA and auto reps (> 0) */
    /* The limit beside each row (bound_gbps): this open DRAM read probe
     * (roofline.h) is run for probe_passes timed passes right before each
     * attempt and right after it; NULL: none. The probe evicts the caches,
     * so a row's prefill and warm-up steps come after it. */
    struct kv_read_probe *probe;
    int32_t probe_passes; /* > 0 when the run measures bound_gbps */
    /* Part of the sweep (a shard, shard.h): bit ti of only[i] set = measure and
     * report row (strategy i, seq_lens[ti]); NULL = every row. Capacity, model
     * and reference stay those of the whole list, so a row is measured exactly
     * as in the whole sweep; the reference also runs where only it is needed. */
    const uint32_t *only;
    const volatile sig_atomic_t *stop; /* set by a signal handler, or NULL */
    /* Called before a row's work starts and when it is done; may be NULL. */
    void (*on_row_start)(void *user, const struct kv_sweep_progress *p);
    void (*on_row)(void *user, const struct kv_sweep_row *row,
                   const struct kv_sweep_progress *p);
    /* Called when a noisy row is about to be measured again: the attempt
     * coming (2, 3, ...) and why the last one was noisy; may be NULL. */
    void (*on_retry)(void *user, const struct kv_sweep_progress *p, int32_t attempt,
                     const char *why);
    void *user;
};

/*
 * Positions the sweep needs (largest T + warmup + max reps): the capacity of
 * every cache (so `static` is one size for the whole sweep) and the least
 * max_len the model must have.
 */
int32_t kv_sweep_capacity(const struct kv_sweep_config *cfg);

/* Timed steps of a cached strategy's row at T (cfg->reps or automatic). */
int32_t kv_sweep_reps_cached(const struct kv_sweep_config *cfg, int32_t T);

/* ---- repeats, for every command that takes lists -------------------- */

/* 1 when a and b are one configuration: the same table and identical
 * parameters (what kv_sweep_check refuses twice at one T). */
int kv_sweep_same_config(const struct kv_strategy_ops *a_ops, const void *a_params,
                         const struct kv_strategy_ops *b_ops, const void *b_params);
/* The index of the first value of v[0 .. n) that repeats an earlier one
 * (*first, if not NULL, <- that earlier index), or -1 when all differ. */
int32_t kv_sweep_list_repeat(const int32_t *v, int32_t n, int32_t *first);

/* ---- the schedule, for planners that predict a run (shard.c) ---------- */

/* 1 when (strategy i, seq_lens[ti]) is a row of the whole sweep (`none`
 * only up to none_max), whatever cfg->only says. */
int kv_sweep_row_planned(const struct kv_sweep_config *cfg, int32_t i, int32_t ti);

/* Index of the listed strategy that serves as the exact reference for the
 * logits error, or -1 when a hidden one (kv_sweep_reference_strategy) runs. */
int32_t kv_sweep_reference(const struct kv_sweep_config *cfg);
const struct kv_sweep_strategy *kv_sweep_reference_strategy(void);

/* The cache configuration the sweep creates for strategy st on model mc. */
void kv_sweep_cache_config(struct kv_cache_config *cc, const struct kv_sweep_config *cfg,
                           const struct kv_model_config *mc,
                           const struct kv_sweep_strategy *st);

/* 1 when the sweep prefills cache c from empty in one forward (a sliding
 * window), 0 when it extends it in chunks of KV_SWEEP_PREFILL_CHUNK. */
int kv_sweep_whole_prefill(const struct kv_cache *c);

/*
 * Checks the configuration against the model: lengths ascending and large
 * enough for warmup and reps (T > W + (R-1)/2), capacity within the model's
 * max_len, strategies known. KV_ERR_INVALID with *why set to a sentence.
 */
enum kv_status kv_sweep_check(const struct kv_sweep_config *cfg, const struct kv_model *m,
                              const char **why);

/*
 * Runs the sweep, calling cfg->on_row for every finished row (in
 * measurement order: T outer, strategies inner). *interrupted is set to 1
 * when cfg->stop ended it early (the row in flight is dropped and KV_OK is
 * returned). Any other failure returns its status; rows already reported
 * stay valid.
 */
enum kv_status kv_sweep_run(const struct kv_sweep_config *cfg, const struct kv_model *m,
                            int32_t *interrupted);

#endif /* KV_SWEEP_H */
