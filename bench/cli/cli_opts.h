/*
 * cli_opts.h - the values of the shared option groups (cli_cmd.h: model,
 * strategy, the strategies' parameter flags, batch, threads, seed) and the
 * checks every command runs on them: the model's cross-checks, a strategy
 * resolved with the flags given, its parameters and memory against the
 * shape the run really uses. Every error prints one line and the caller
 * exits 2.
 *
 * The strategies' own options are not listed here: they come from the
 * registered strategies' parameter tables (strategies/strategy.h), one CLI
 * flag per distinct kv_param.flag, so a new strategy's parameters are
 * parsed, range-checked, shown in --help and handed to it without a line
 * of code in bench/.
 */
#ifndef KV_CLI_OPTS_H
#define KV_CLI_OPTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../model/kv_model.h"

/* One strategy-parameter flag of the command line (the union of every
 * registered strategy's table, each flag once). */
#define KV_CLI_MAX_FLAGS 32
struct kv_cli_flag {
    const struct kv_param *param; /* the first table entry with this flag */
    int64_t value;
    const char *text;             /* a KV_PARAM_TEXT flag's value (argv's) */
    int given;
};

/* Room for any strategy's parameter struct (checked when resolving). */
#define KV_CLI_PARAMS_BYTES KV_PARAMS_MAX_BYTES
struct kv_cli_strategy {
    const struct kv_strategy_ops *ops;
    _Alignas(16) unsigned char params[KV_CLI_PARAMS_BYTES];
};

/* Options common to the model-running subcommands. */
struct kv_cli_common {
    struct kv_model_config model;
    struct kv_cache_config cache; /* max_len (the shape is the model's) */
    const char *strategy;         /* NULL when not given */
    struct kv_cli_flag flags[KV_CLI_MAX_FLAGS];
    int32_t n_flags;
    int no_cache;                 /* the command builds no cache: skip strategy checks */
    int32_t batch;
    int32_t threads;
    uint64_t seed;
    const char *model_path;       /* --model FILE.bin, or NULL */
    const char *tokenizer_path;   /* --tokenizer FILE, or NULL */
};

/* Defaults: docs/design.md's model, the strategies' parameter defaults, batch 1,
 * threads = available cores, seed 42. */
void kv_cli_common_defaults(struct kv_cli_common *c);

/* Cross-checks of the model options (kv-heads divides heads, an even
 * head_dim, byte counts that fit) and that --strategy names a strategy;
 * prints one line and returns -1 on error, 0 if fine. A strategy's own
 * parameters are checked by kv_cli_check_strategy. */
int kv_cli_check_common(const struct kv_cli_common *c);

/*
 * Validation against the real configuration, one strategy at a time: cc
 * is the shape of the model the run really uses (a loaded checkpoint's, not
 * the options' defaults) and params the strategy's parameters
 * (kv_cli_strategy). Its parameter table's ranges and cross-checks
 * (kv_params_check: a --group dividing head_dim), then, when `memory` is
 * nonzero, its cache for `tokens` tokens per layer (kv_cache_bytes_for:
 * every size-bearing parameter, --window, --residual, the preallocated
 * slots, included) against the machine's memory, the message naming those
 * options (a plan for another machine, `sweep --list`, passes 0). Prints
 * one line "kvlab: CMD: ..." and returns 2 on a refusal; 0, with *bytes
 * (if not NULL) the estimate (0 when the strategy cannot say), otherwise.
 */
int kv_cli_check_strategy(const char *cmd, const struct kv_strategy_ops *ops, const void *params,
                          const struct kv_cache_config *cc, int32_t tokens, int memory,
                          size_t *bytes);

/* The one line for a cache that refused a token (KV_ERR_FULL): names the
 * options that size it, with their values ("with --block-size 16
 * --max-blocks 4"), so the user knows what to raise. */
void kv_cli_cache_full(const char *cmd, const struct kv_strategy_ops *ops, const void *params);

/* 1 for a strategy whose capacity is its cache's max_len, allocated up
 * front (static): the demo's --slots sizes exactly those. */
int kv_cli_slots_apply(const struct kv_strategy_ops *ops);

/* The cache shape of the options' model and batch (max_len the model's). */
struct kv_cache_config kv_cli_cache_config(const struct kv_cli_common *c);

/*
 * Resolves a strategy or preset name (NULL: --strategy) into *out: the
 * table, then its parameters: defaults, the parameter flags given on the
 * command line, then the preset's own values (a preset's name says what it
 * is). Prints one line and returns -1 for an unknown name or a flag value
 * this strategy's table refuses; 0 if fine.
 */
int kv_cli_strategy(const struct kv_cli_common *c, const char *name, struct kv_cli_strategy *out);

/* A command's own default for a parameter flag (the demo's tiny model
 * wants a small window): applied like a given flag unless the command line
 * gives one. No-op for a flag no strategy has. */
void kv_cli_flag_default(struct kv_cli_common *c, const char *flag, int64_t value);

/* Prints the strategy-parameter flags for --help: "  --window N  help
 * (strategies: sliding; default 512)", one per line. */
void kv_cli_print_param_help(FILE *f);

/* Strict parse of a whole decimal integer in [lo, hi]; prints
 * "kvlab: OPT expects an integer in [lo, hi], got 'S'" and returns -1. */
int kv_cli_int(const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out);
int kv_cli_i32(const char *opt, const char *s, int32_t lo, int32_t hi, int32_t *out);

/*
 * Refuses a run whose estimated memory (`bytes`, what `what` needs) exceeds
 * the machine's physical memory, so an absurd but non-overflowing size gets
 * one line and exit 2 instead of an out-of-memory kill. Prints
 * "kvlab: WHAT needs N bytes, more than this machine's M bytes of memory"
 * and returns -1; 0 if it fits (or the memory size is unknown).
 */
int kv_cli_check_memory(const char *what, size_t bytes);

/*
 * 1 when a and b name the same file (kv_file_same: the same resolved path,
 * or the same device and inode); 0 otherwise, also when either is NULL.
 * Outputs use it (through kv_cli_check_outputs) to refuse overwriting an
 * input or another output given on the same line.
 */
int kv_cli_same_file(const char *a, const char *b);


/* Comma list of integers in [lo, hi] (at most max_n); returns count or -1. */
int kv_cli_int_list(const char *opt, const char *s, int32_t lo, int32_t hi,
                    int32_t *out, int max_n);

#endif /* KV_CLI_OPTS_H */
