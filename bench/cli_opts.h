/*
 * cli_opts.h - option parsing shared by every subcommand: strict number
 * parsing with ranges, and the model/strategy options that generate, sweep,
 * demo and kernel all accept. Every error prints one line naming the option
 * and the accepted range, and the caller exits 2.
 */
#ifndef KV_CLI_OPTS_H
#define KV_CLI_OPTS_H

#include <stddef.h>
#include <stdint.h>

#include "kv_model.h"

/* Options common to the model-running subcommands. */
struct kv_cli_common {
    struct kv_model_config model;
    struct kv_cache_config cache; /* window, bits, group, residual, max_len */
    const char *strategy;         /* NULL when not given */
    int32_t batch;
    int32_t threads;
    uint64_t seed;
    const char *model_path;       /* --model FILE.bin, or NULL */
    const char *tokenizer_path;   /* --tokenizer FILE, or NULL */
};

/* Defaults: DESIGN.md's model, window 512, bits 8, group 32, residual 32,
 * batch 1, threads = available cores, seed 42. */
void kv_cli_common_defaults(struct kv_cli_common *c);

/*
 * If argv[*i] is one of the common options, consumes it and its value
 * (advancing *i past them) and returns 1; returns 0 when argv[*i] is not a
 * common option (the caller tries its own), -1 after printing an error.
 * Options: --strategy --layers --dim --heads --kv-heads --hidden --vocab
 * --max-len --window --bits --group --residual --batch --threads --seed
 * --mlp on|off --model --tokenizer
 */
int kv_cli_parse_common(struct kv_cli_common *c, int argc, char **argv, int *i);

/* Cross-checks (kv-heads divides heads, group divides head_dim, ...);
 * prints one line and returns -1 on error, 0 if fine. */
int kv_cli_check_common(const struct kv_cli_common *c);

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
 * 1 when a and b name the same file: the same string, or two paths (links,
 * "dir/../f") to one existing file (same st_dev and st_ino); 0 otherwise,
 * also when either is NULL or does not exist (then they cannot collide).
 * Outputs use it to refuse overwriting an input given on the same line.
 */
int kv_cli_same_file(const char *a, const char *b);

/* Comma list of integers in [lo, hi] (at most max_n); returns count or -1. */
int kv_cli_int_list(const char *opt, const char *s, int32_t lo, int32_t hi,
                    int32_t *out, int max_n);

#endif /* KV_CLI_OPTS_H */
