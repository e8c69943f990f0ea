/*
 * cmd_sweep_impl.h - what the three files of `kvlab sweep` share, and
 * nothing outside them includes: the options its table fills (cmd_sweep.c),
 * the run's state the progress callbacks fill, the CSV's columns and its
 * writing (sweep_csv.c), and the --frontier file's configurations
 * (sweep_frontier.c).
 */
#ifndef KV_CMD_SWEEP_IMPL_H
#define KV_CMD_SWEEP_IMPL_H

#include <stdint.h>

#include "cli_cmd.h"
#include "../measure/frontier.h"
#include "../measure/roofline.h"
#include "../measure/shard.h"
#include "../measure/sweep.h"
#include "../measure/sysinfo.h"

/* --shard I/N, --plan-rates G,B[,C], --budgets P,...: the value and the
 * text it was read from (for the command line the CSV records). */
struct shard_opt {
    int32_t shard, n_shards; /* 0, 0 without --shard */
    const char *text;
};
struct rates_opt {
    struct kv_plan_rates r;
    const char *text;
};
struct budgets_opt {
    double v[KV_FRONTIER_MAX_BUDGETS]; /* fractions, ascending */
    int32_t n;
    const char *text;
};

struct sweep_opts {
    const char *strategies; /* --strategies, or the default list */
    struct kv_opt_ints seq_lens;
    int32_t max_seq;
    int32_t none_max;
    int32_t reps;
    int32_t warmup;
    int32_t retries;
    int strict;                   /* --strict: exit 1 when a row stays noisy */
    double noise_max_other_cores; /* --noise-max-other-cores */
    double noise_min_util;        /* --noise-min-util */
    const char *out;
    int quiet;
    int no_roofline;
    int bound;               /* --bound: the DRAM read limit beside each row */
    struct shard_opt shard;  /* --shard I/N */
    int list;                /* --list */
    struct rates_opt rates;  /* --plan-rates */
    const char *frontier;    /* --frontier FILE, or NULL */
    struct budgets_opt budgets;
};

/* The run's state, shared with the progress callbacks: each finished row. */
struct kv_sweepi_run {
    const struct kv_sweep_config *cfg;
    const struct kv_model *m;
    struct kv_sweep_row rows[KV_SWEEP_MAX_STRATEGIES][KV_SWEEP_MAX_LENS];
    int32_t have[KV_SWEEP_MAX_STRATEGIES][KV_SWEEP_MAX_LENS];
    int tty;
    int quiet;
    int bar_shown;
};

/* ---- sweep_csv.c: the file */

/* What the file records besides the rows and the run's configuration. */
struct kv_sweepi_file {
    const struct kv_sysinfo *si;
    const struct kv_roofline *rl;
    int rl_runs;    /* roofline measurements: 0 (--no-roofline), 1 or 2 */
    double read_lo; /* the lower DRAM read figure of those (the higher is rl's) */
    int partial;    /* 1: interrupted or failed, the rows finished so far */
    int64_t t0;     /* kv_now_ns() at the start, for wall_s */
    int64_t t_sweep; /* ns of the measuring loop, for sweep_s */
    const struct kv_plan *plan; /* --shard's plan, or NULL */
};

/* Rows of run r still noisy after their retries (the `noisy` column). */
int32_t kv_sweepi_noisy_rows(const struct kv_sweepi_run *r);

/*
 * The CSV of run r: the metadata (the sweep's, then f's), the header and
 * every finished row (by strategy as listed, then T), written atomically
 * to the options' --out (one missing directory level is made). Returns the
 * writer's status; *n_rows the rows it held, *werr errno of a failed write.
 */
enum kv_status kv_sweepi_write_csv(const struct kv_sweepi_run *r, const struct kv_cmd_ctx *x,
                                   const struct kv_sweepi_file *f, int32_t *n_rows, int *werr);

/* ---- sweep_frontier.c: the --frontier file */

/* The distinct strategies of the --frontier file's lines into names (for
 * the parameter-flag check), or every registered strategy when the file
 * cannot be read or parsed (its own refusal comes later); their count. */
int32_t kv_sweepi_frontier_strategies(const char *path, const char **names, int32_t max);

/* A parameter flag given must reach at least one configuration of the
 * --frontier file (one that takes it and does not set it itself): 2 after
 * one line, else 0. */
int kv_sweepi_frontier_flags(const struct kv_cmd_ctx *x);

/* cfg's strategies and only-mask from the --frontier file, for the model
 * shape mc; -1 after printing one line. */
int kv_sweepi_plan_frontier(struct kv_sweep_config *cfg, uint32_t *only,
                            const struct kv_cmd_ctx *x, const struct kv_model_config *mc);

#endif /* KV_CMD_SWEEP_IMPL_H */
