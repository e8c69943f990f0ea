/*
 * frontier.h - the memory-accuracy frontier: every lossy configuration of
 * a list, at matched cache budgets, as one sweep (`kvlab sweep --frontier
 * FILE --budgets 12.5,25,50 --seq-lens 2048,8192`).
 *
 * The list (bench/data/frontier.list) is data, one configuration per line:
 *     LABEL  STRATEGY-OR-PRESET  PARAMS
 * PARAMS is the strategy's own `k=v;k=v` text ("-": none), in which '@'
 * stands for one integer the planner solves per (T, budget): the largest
 * value whose bytes_for at T fits budget x the bytes of an f32 `dynamic`
 * cache of T tokens (binary search; a strategy's bytes grow with its sizes).
 * A line without '@' is measured as it is, once per T, at its own bytes (a
 * precision, not a size: int8, f16). Adding a configuration is a line; a
 * line that names a strategy this build lacks, that the model's shape
 * refuses, or whose budget it cannot reach is skipped with a note.
 *
 * The design decision: the frontier is an ordinary sweep. The planner turns
 * the list into sweep strategies (labelled "LABEL@25%" per budget) and, in
 * the sweep's `only` mask, runs each at the one T it was solved for, so
 * every row of every configuration is measured in one run with one exact
 * reference, and the CSV, its columns, the plots' readers and `kvlab
 * compare` are the sweep's own.
 */
#ifndef KV_FRONTIER_H
#define KV_FRONTIER_H

#include "sweep.h"

#define KV_FRONTIER_MAX_LINES 32
#define KV_FRONTIER_MAX_BUDGETS 8

struct kv_frontier_line {
    char label[20];
    char strategy[48];
    char params[200];
    int32_t line_no; /* in the file, for messages */
};

/*
 * Parses the list's text into lines[0 .. *n) ('#' starts a comment, blank
 * lines are skipped). KV_ERR_FORMAT with one sentence in why (naming the
 * line) for a line without three fields, a field too long, a label or
 * strategy that is not a label (strategy.h's text rule, kv_label_ok),
 * parameters with a character outside labels' and ';', or more than max
 * lines - all at read time, before any configuration is planned or run.
 */
enum kv_status kv_frontier_parse(const char *text, struct kv_frontier_line *lines, int32_t max,
                                 int32_t *n, char *why, size_t why_len);

/* Reads the list file (at most 1 MiB) and parses it: KV_ERR_IO with why
 * when it cannot be read, else as kv_frontier_parse. */
enum kv_status kv_frontier_load(const char *path, struct kv_frontier_line *lines, int32_t max,
                                int32_t *n, char *why, size_t why_len);

/*
 * Appends the sweep strategies of the list to cfg (cfg->seq_lens set;
 * budgets[0 .. n_budgets) are fractions of the f32 bytes, e.g. 0.25) and
 * sets only[i] for each: the T it was solved for, or every T for a line
 * without '@'. cc is the cache shape the sweep uses (batch, layers, kv
 * heads, head_dim, max_len). resolve (NULL: the registry's defaults and
 * presets) gives each line's starting parameters. Each skipped
 * configuration is reported through note (one sentence). KV_ERR_FULL with why when the configurations
 * exceed KV_SWEEP_MAX_STRATEGIES, KV_ERR_INVALID when none is left.
 */
/* Resolves a strategy or preset name into st->ops and st->params (the
 * parameters every configuration of it starts from, before the line's own);
 * KV_ERR_INVALID for an unknown name. The CLI's applies its parameter flags
 * (--group, --residual ...) like for --strategies. */
typedef enum kv_status (*kv_frontier_resolve_fn)(void *user, const char *name,
                                                  struct kv_sweep_strategy *st);

enum kv_status kv_frontier_plan(struct kv_sweep_config *cfg, uint32_t *only,
                                const struct kv_cache_config *cc,
                                const struct kv_frontier_line *lines, int32_t n_lines,
                                const double *budgets, int32_t n_budgets,
                                kv_frontier_resolve_fn resolve,
                                void (*note)(void *user, const char *sentence), void *user,
                                char *why, size_t why_len);

#endif /* KV_FRONTIER_H */
