/*
 * cli_cmd.h - a kvlab command is a declared option table plus a run
 * function. One parser (built on getopt_long) reads the tables; from them
 * it parses every value strictly, refuses an option the run would ignore,
 * judges every file before the run function is called, quotes every value
 * it echoes, and prints --help. A command cannot skip any of that: its run
 * function only ever sees options that passed.
 *
 * The design decision that matters: the contract is data. Each option
 * says its kind (number with a range, enum, list, strategy, input or output
 * file, flag), the modes of its command in which it has an effect, and its
 * help line. The shared options (model shape, --model, --strategy, the
 * strategies' own parameters from their tables, --batch, --threads, --seed)
 * are groups a command opts into, so they mean the same everywhere.
 *
 * Exit statuses of every command: 0 success, 1 run-time failure, 2 bad
 * input (one line on stderr, before any work).
 */
#ifndef KV_CLI_CMD_H
#define KV_CLI_CMD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cli_opts.h"

/* ------------------------------------------------------------------------ */
/* Options                                                                  */

enum kv_opt_kind {
    KV_OPT_FLAG,          /* no value; int field set to 1 */
    KV_OPT_INT,           /* int32_t in [lo, hi], decimal only */
    KV_OPT_I64,           /* int64_t in [lo, hi], decimal only */
    KV_OPT_FLOAT,         /* double in [flo, fhi], finite, decimal only */
    KV_OPT_ENUM,          /* int: index into names (NULL-terminated) */
    KV_OPT_INTS,          /* struct kv_opt_ints: comma list of ints in [lo, hi], at most hi_n */
    KV_OPT_TEXT,          /* const char *: any text (a prompt) */
    KV_OPT_LABELS,        /* const char *: comma list of labels (kv_cli_label_ok each) */
    KV_OPT_STRATEGY,      /* const char *: a strategy or preset name */
    KV_OPT_STRATEGIES,    /* const char *: comma list of strategy or preset names, no repeat */
    KV_OPT_INPUT,         /* const char *: a file read (regular, opened without blocking) */
    KV_OPT_OUTPUT,        /* const char *: a file written (judged before work, atomic) */
    KV_OPT_CUSTOM,        /* any field: parse() reads it */
    KV_OPT_KIND_COUNT
};

#define KV_OPT_INTS_MAX 64
struct kv_opt_ints {
    int32_t n;
    int32_t v[KV_OPT_INTS_MAX];
};

/* The positional arguments left after the options (KV_OPT_REST). */
struct kv_opt_rest {
    int32_t n;
    char **v;
};

struct kv_opt {
    const char *name;    /* "--reps"; a positional argument: its metavar ("OUT") */
    size_t off;          /* of the field in the command's option struct */
    int64_t lo, hi;      /* INT, I64, INTS: the range */
    double flo, fhi;     /* FLOAT: the range, both inclusive */
    const char *const *names; /* ENUM: the accepted words, NULL-terminated */
    const char *meta;    /* "N", "FILE": shown in --help */
    const char *help;    /* one line */
    /* CUSTOM: parse v into field; on failure writes what is expected
     * ("I/N, whole numbers with 1 <= I <= N") into why and returns -1. */
    int (*parse)(const char *v, void *field, char *why, size_t n);
    enum kv_opt_kind kind;
    int32_t hi_n;        /* INTS: most values (0: KV_OPT_INTS_MAX) */
    uint32_t modes;      /* the command's modes in which it has an effect; 0: all */
    int32_t pos;         /* 0: an option; k > 0: the k-th positional argument;
                            KV_OPT_REST: every positional argument from here on */
    int32_t required;    /* 1: must be given */
    int32_t stdin_ok;    /* INPUT: "-" is standard input */
    int32_t mkdir;       /* OUTPUT: one missing folder level is created */
};
#define KV_OPT_REST 1000

/* ------------------------------------------------------------------------ */
/* Commands                                                                 */

/* The shared option groups a command opts into (struct kv_cmd.groups). */
enum {
    KV_GRP_MODEL = 1u << 0,      /* --layers --dim --heads --kv-heads --hidden --vocab
                                    --max-len --mlp (refused with --model) */
    KV_GRP_CHECKPOINT = 1u << 1, /* --model FILE */
    KV_GRP_TOKENIZER = 1u << 2,  /* --tokenizer FILE */
    KV_GRP_STRATEGY = 1u << 3,   /* --strategy NAME */
    KV_GRP_PARAMS = 1u << 4,     /* every strategy parameter flag of the registry */
    KV_GRP_BATCH = 1u << 5,      /* --batch */
    KV_GRP_THREADS = 1u << 6,    /* --threads */
    KV_GRP_SEED = 1u << 7,       /* --seed */
};

struct kv_cmd_ctx;

/* The most strategies a command runs at once (KV_OPT_STRATEGIES). */
#define KV_CMD_MAX_STRATEGIES 64

struct kv_cmd {
    const char *name;     /* "generate" */
    const char *summary;  /* one line for `kvlab --help` */
    const char *usage;    /* after "kvlab NAME ": "--strategy NAME [options]" */
    const char *about;    /* a few lines for --help, or NULL */
    const struct kv_opt *opts;
    int32_t n_opts;
    uint32_t groups;      /* KV_GRP_* */
    size_t opts_size;     /* sizeof the command's option struct */
    void (*defaults)(void *opts, struct kv_cli_common *c); /* NULL: zeros */
    /* The modes the parsed options select (bit k = mode_names[k]); NULL:
     * one mode, bit 0. Options whose .modes miss them are refused. */
    uint32_t (*modes)(const struct kv_cmd_ctx *x);
    const char *const *mode_names; /* "with --samples", for messages */
    /* The strategies the run will use, for the parameter-flag check: fills
     * names (at most max) and returns how many. NULL: --strategy alone. */
    int32_t (*strategies)(const struct kv_cmd_ctx *x, const char **names, int32_t max);
    /* Cross-checks of the command after the table's (one line, return 2),
     * or NULL. Runs before the files are judged. */
    int (*check)(struct kv_cmd_ctx *x);
    int (*run)(struct kv_cmd_ctx *x);
    /* A minimal valid command line (space-separated words), with
     * placeholders the e2e matrix fills: @CSV (a sweep CSV), @CSV2 (a
     * second one), @MODEL (a checkpoint), @TOKENIZER, @TEXT (a text file),
     * @LIST (a frontier list), @OUT (a fresh output path). */
    const char *example;
};

/* What a run function gets: the parsed options, nothing unchecked. */
struct kv_cmd_ctx {
    const struct kv_cmd *cmd;
    void *opts;                   /* the command's option struct */
    struct kv_cli_common c;       /* the shared groups' values */
    uint32_t modes;               /* what cmd->modes returned */
    unsigned char given[256];     /* by option index (kv_cmd_given) */
    struct kv_opt_rest rest;      /* KV_OPT_REST positional arguments */
    int argc;                     /* the command line as given (argv[0] the command), */
    char **argv;                  /* for provenance (a CSV's # command= line) only */
};

/* 1 when the command line gave option `name` (an own option, a group's or
 * a strategy parameter flag). An unknown name is a programming error. */
int kv_cmd_given(const struct kv_cmd_ctx *x, const char *name);

/*
 * Parses argv (argv[0] the command's name), applies every table check,
 * judges the files, then calls cmd->run. Returns the exit status. --help
 * prints the generated help and returns 0.
 */
int kv_cmd_main(const struct kv_cmd *cmd, int argc, char **argv);

/* The generated help of one command. */
void kv_cmd_help(const struct kv_cmd *cmd, FILE *f);

/* Every command's table as tab-separated lines (`kvlab options`), for the
 * e2e matrix: "cmd NAME\tEXAMPLE" then one "opt NAME\tKIND\tPOS" per
 * option of that command, groups included. */
void kv_cmd_dump(const struct kv_cmd *const *cmds, int32_t n, FILE *f);

/*
 * The registry's flags must not collide with any command's options: called
 * once at start-up with every command. Prints one line and returns -1 on a
 * collision (a strategy parameter named --seed would take over --seed).
 */
int kv_cmd_reserve(const struct kv_cmd *const *cmds, int32_t n);

/* ------------------------------------------------------------------------ */
/* Text                                                                     */

/* 1 when s is a label (kv_label_ok, strategies/strategy.h: the one rule
 * for what a CSV cell, a plot legend and a message carry unquoted). */
int kv_cli_label_ok(const char *s);

#endif /* KV_CLI_CMD_H */
