/*
 * cmd_sweep.c - `kvlab sweep`: measure every strategy over sequence
 * lengths and write the schema-v3 CSV (docs/design.md).
 *
 *   kvlab sweep [--strategies LIST] [--seq-lens LIST | --max-seq N]
 *               [--none-max N] [--reps R] [--warmup W] [--out FILE]
 *               [--retries N] [--strict] [--noise-max-other-cores X]
 *               [--noise-min-util X] [--quiet] [--no-roofline] [--bound] [--shard I/N]
 *               [--list] [--plan-rates G,B[,C]] [model and strategy options]
 *
 * The measurement is sweep.c; this file declares the options (a table of
 * cli_cmd.h: the parser judges --out, --model and --frontier before the
 * run, refuses an option the mode ignores - --out with --list, --budgets
 * without --frontier - and a strategy parameter flag that none of the
 * run's strategies takes), measures the machine's limits first
 * (roofline.c) so every result file carries them, prints progress, and
 * writes the file atomically (csv_write.c). SIGINT and SIGTERM only set a
 * flag: the sweep drops the row in flight, the rows done so far are
 * written as a complete file marked `# partial=1`, and the exit status is
 * 130 / 143. A row another program disturbed is measured again (sweep.h);
 * one still noisy when its retries run out is written flagged, listed in a
 * warning at the end, and with --strict makes the exit status 1 - after the
 * file is written, so the figures are kept either way. --shard I/N
 * measures one part of the sweep's rows and --list prints the plan
 * (shard.h decides both). The file's columns and metadata
 * are sweep_csv.c's, the --frontier file's configurations
 * sweep_frontier.c's (cmd_sweep_impl.h: what the three share).
 */
#include <ctype.h>
#include <inttypes.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../model/checkpoint.h"
#include "cli_cmd.h"
#include "cli_io.h"
#include "cli_opts.h"
#include "commands.h"
#include "cmd_sweep_impl.h"
#include "../results/csv_read.h"

#define DEFAULT_MAX_SEQ 8192
#define DEFAULT_NONE_MAX 4096
#define DEFAULT_WARMUP 2
#define DEFAULT_RETRIES 2
#define MIN_POW2_SEQ 64
/* --bound: timed passes of the read probe before and after each row */
#define SWEEP_PROBE_PASSES 7

/* ------------------------------------------------------------------------ */
/* Signals                                                                  */

/* SIGINT / SIGTERM / SIGHUP: the signal's number (kv_cli_signals); a second
 * one ends the process at once, removing a temporary file in flight. */
static volatile sig_atomic_t sweep_signal;

static void fmt_duration(char *buf, size_t n, int64_t ns)
{
    if (ns < 0) {
        snprintf(buf, n, "?");
        return;
    }
    int64_t s = (ns + 500000000) / 1000000000;
    if (s >= 60)
        snprintf(buf, n, "%" PRId64 "m%02" PRId64 "s", s / 60, s % 60);
    else
        snprintf(buf, n, "%" PRId64 "s", s);
}

static void draw_bar(struct kv_sweepi_run *r, const struct kv_sweep_progress *p)
{
    enum { WIDTH = 30 };
    char eta[32], el[32], bar[WIDTH + 1];
    int fill = (int)(p->frac_done * WIDTH + 0.5);
    for (int i = 0; i < WIDTH; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[WIDTH] = '\0';
    fmt_duration(eta, sizeof(eta), p->rows_done > 0 ? p->eta_ns : -1);
    fmt_duration(el, sizeof(el), p->elapsed_ns);
    kv_progress("\r\033[K[%s] %3d%%  %-15s T=%-5d  row %d/%d  %s elapsed, ETA %s%s", bar,
                    (int)(p->frac_done * 100.0 + 0.5), p->label, p->seq_len,
                    p->rows_done + 1, p->rows_total, el, eta,
                    p->busy != NULL ? "  (machine busy)" : "");
    r->bar_shown = 1;
}

static void on_row_start(void *user, const struct kv_sweep_progress *p)
{
    struct kv_sweepi_run *r = user;
    if (!r->quiet && r->tty)
        draw_bar(r, p);
}

static void on_row(void *user, const struct kv_sweep_row *row,
                   const struct kv_sweep_progress *p)
{
    struct kv_sweepi_run *r = user;
    r->rows[row->strategy][row->len_index] = *row;
    r->have[row->strategy][row->len_index] = 1;
    if (r->quiet || r->tty)
        return;
    char eta[32], el[32];
    fmt_duration(eta, sizeof(eta), p->eta_ns);
    fmt_duration(el, sizeof(el), p->elapsed_ns);
    kv_progress("sweep: [%d/%d] %-15s T=%-5d median %9.3f ms  p95 %9.3f ms  reps %d  "
                    "(%s elapsed, ETA %s)%s%s\n",
                    p->rows_done, p->rows_total, p->label, row->seq_len,
                    (double)row->step_ns_median / 1e6, (double)row->step_ns_p95 / 1e6,
                    row->reps, el, eta, p->busy != NULL ? "  machine busy: " : "",
                    p->busy != NULL ? p->busy : "");
}

/* A noisy row is measured again: said on its own line (on a terminal in
 * place of the bar, which is drawn again below it). */
static void on_retry(void *user, const struct kv_sweep_progress *p, int32_t attempt,
                     const char *why)
{
    struct kv_sweepi_run *r = user;
    if (r->quiet)
        return;
    kv_progress("%ssweep: busy machine: re-measuring %s T=%d (attempt %d of at most %d): %s\n",
                r->tty ? "\r\033[K" : "", p->label, p->seq_len, attempt,
                r->cfg->max_retries + 1, why);
    if (r->tty)
        draw_bar(r, p);
}

/* ------------------------------------------------------------------------ */
/* Options                                                                  */

/* The strategies a sweep measures by default, in registry order: each
 * registered strategy at its default parameters, then its presets marked
 * for the sweep (kv_preset.sweep: quantized's int8 and int4, dynamic's f16
 * and bf16); a strategy whose defaults such a preset repeats is measured
 * once, under the preset's name (quantized -> quantized-int8). */
static int default_strategies(char *buf, size_t n)
{
    size_t w = 0;
    buf[0] = '\0';
    for (int32_t i = 0; i < kv_strategy_count(); i++) {
        const struct kv_strategy_ops *ops = kv_strategy_at(i);
        _Alignas(16) unsigned char pd[KV_SWEEP_PARAMS_BYTES], pk[KV_SWEEP_PARAMS_BYTES],
            pj[KV_SWEEP_PARAMS_BYTES];
        const struct kv_strategy_ops *o;
        if (ops->params_size > sizeof pd)
            return -1;
        kv_params_defaults(ops, pd);
        int plain = 1; /* no sweep preset has the defaults */
        for (int32_t k = 0; k < ops->n_presets; k++)
            if (ops->presets[k].sweep &&
                kv_strategy_lookup(ops->presets[k].name, &o, pk, sizeof pk) == KV_OK &&
                memcmp(pk, pd, ops->params_size) == 0)
                plain = 0;
        if (plain && w < n)
            w += (size_t)snprintf(buf + w, n - w, "%s%s", w ? "," : "", ops->name);
        for (int32_t k = 0; k < ops->n_presets && w < n; k++) {
            int dup = 0;
            if (!ops->presets[k].sweep)
                continue;
            if (kv_strategy_lookup(ops->presets[k].name, &o, pk, sizeof pk) != KV_OK)
                return -1;
            for (int32_t j = 0; j < k && !dup; j++)
                dup = ops->presets[j].sweep &&
                      kv_strategy_lookup(ops->presets[j].name, &o, pj, sizeof pj) == KV_OK &&
                      memcmp(pj, pk, ops->params_size) == 0;
            if (!dup)
                w += (size_t)snprintf(buf + w, n - w, "%s%s", w ? "," : "", ops->presets[k].name);
        }
    }
    return w < n ? 0 : -1;
}

/* Parses one strategy (or preset) name of the list into st; -1 after
 * printing. */
static int parse_strategy(struct kv_sweep_strategy *st, const char *name,
                          const struct kv_cli_common *c)
{
    memset(st, 0, sizeof(*st));
    struct kv_cli_strategy cs;
    if (kv_cli_strategy(c, name, &cs) != 0)
        return -1;
    if (cs.ops->params_size > sizeof st->params) {
        fprintf(stderr, "kvlab: sweep: strategy '%s' has too many parameters\n",
                kv_text_q(name));
        return -1;
    }
    st->ops = cs.ops;
    memcpy(st->params, cs.params, cs.ops->params_size);
    kv_strategy_label(st->ops, st->params, st->label, sizeof st->label);
    return 0;
}

/* cfg's strategies from a comma list the option's kind has checked (known
 * names, each once); -1 after printing. */
static int parse_strategies(struct kv_sweep_config *cfg, const char *list,
                            const struct kv_cli_common *c)
{
    char buf[KV_CMD_MAX_STRATEGIES * 64];
    if (strlen(list) >= sizeof(buf) || list[0] == '\0') {
        fprintf(stderr, "kvlab: sweep: --strategies expects a comma list of names\n");
        return -1;
    }
    snprintf(buf, sizeof(buf), "%s", list);
    cfg->n_strategies = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (cfg->n_strategies == KV_SWEEP_MAX_STRATEGIES) {
            fprintf(stderr, "kvlab: sweep: at most %d strategies\n", KV_SWEEP_MAX_STRATEGIES);
            return -1;
        }
        if (parse_strategy(&cfg->strategies[cfg->n_strategies], tok, c) != 0)
            return -1;
        cfg->n_strategies++;
    }
    return 0;
}

static int parse_shard(const char *v, void *field, char *why, size_t n)
{
    struct shard_opt *s = field;
    snprintf(why, n, "I/N, whole numbers with 1 <= I <= N <= %d", KV_PLAN_MAX_ROWS);
    if (kv_shard_parse(v, &s->shard, &s->n_shards) != 0)
        return -1;
    s->text = v;
    return 0;
}

static int parse_rates(const char *v, void *field, char *why, size_t n)
{
    struct rates_opt *r = field;
    snprintf(why, n, "GFLOPS,GBPS[,COPY_GBPS], whole numbers in 1..1000000");
    if (kv_plan_rates_parse(v, &r->r) != 0)
        return -1;
    r->text = v;
    return 0;
}

/* --budgets: percentages in (0, 100], strictly ascending, decimal only. */
static int parse_budgets(const char *v, void *field, char *why, size_t n)
{
    struct budgets_opt *b = field;
    snprintf(why, n, "up to %d ascending percentages in (0, 100], comma separated",
             KV_FRONTIER_MAX_BUDGETS);
    b->n = 0;
    for (const char *p = v;;) {
        const size_t len = strcspn(p, ",");
        char item[32];
        double x;
        if (len == 0 || len >= sizeof item || b->n == KV_FRONTIER_MAX_BUDGETS)
            return -1;
        memcpy(item, p, len);
        item[len] = '\0';
        if (kv_csv_parse_double(item, &x) != 0 || !isfinite(x) || !(x > 0.0 && x <= 100.0) ||
            !(isdigit((unsigned char)item[0]) || item[0] == '.') ||
            (b->n > 0 && x / 100.0 <= b->v[b->n - 1]))
            return -1;
        b->v[b->n++] = x / 100.0;
        if (p[len] == '\0')
            break;
        p += len + 1;
    }
    b->text = v;
    return 0;
}

/* The sweep's modes: what it does (measure, or --list the plan) and where
 * its strategies come from (--strategies, or a --frontier file). */
enum {
    M_MEASURE = 1u << 0,  /* measures and writes --out */
    M_LIST = 1u << 1,     /* --list: prints the plan, measures nothing */
    M_PLAIN = 1u << 2,    /* the strategies of --strategies / --strategy / the default */
    M_FRONTIER = 1u << 3, /* the configurations of --frontier FILE */
    M_PLANNED = 1u << 4,  /* a plan is made: --list or --shard */
};
static const char *const sweep_mode_names[] = {
    "when the sweep measures (not with --list)", "with --list", "without --frontier",
    "with --frontier", "with --list or --shard"};

#define O(f) offsetof(struct sweep_opts, f)
static const struct kv_opt sweep_table[] = {
    {.name = "--strategies", .kind = KV_OPT_STRATEGIES, .off = O(strategies), .modes = M_PLAIN,
     .meta = "LIST", .help = "strategy or preset names, each once; a preset fixes the "
                             "parameters it names, the rest take the parameter options"},
    {.name = "--seq-lens", .kind = KV_OPT_INTS, .off = O(seq_lens), .lo = 2, .hi = 1 << 20,
     .hi_n = KV_SWEEP_MAX_LENS, .meta = "LIST",
     .help = "sequence lengths T, strictly ascending (default: --max-seq)"},
    {.name = "--max-seq", .kind = KV_OPT_INT, .off = O(max_seq), .lo = 2, .hi = 1 << 20,
     .meta = "N", .help = "T = 64, 128, ... powers of two up to N"},
    {.name = "--none-max", .kind = KV_OPT_INT, .off = O(none_max), .lo = 0, .hi = 1 << 20,
     .meta = "N", .help = "measure `none` only for T <= N (0 = all)"},
    {.name = "--reps", .kind = KV_OPT_INT, .off = O(reps), .lo = 1, .hi = 1001, .meta = "R",
     .help = "timed decode steps per row (default: automatic, fewer for slow `none` rows)"},
    {.name = "--warmup", .kind = KV_OPT_INT, .off = O(warmup), .lo = 0, .hi = 1000,
     .meta = "W", .help = "untimed decode steps before them"},
    {.name = "--retries", .kind = KV_OPT_INT, .off = O(retries), .lo = 0, .hi = 100,
     .meta = "N", .help = "re-measure a noisy row (another program ran during its steps) up "
                          "to N times (at most 16 retries per run)"},
    {.name = "--strict", .kind = KV_OPT_FLAG, .off = O(strict), .modes = M_MEASURE,
     .help = "exit 1 when a row is still noisy after its retries (the file is written "
             "all the same; needs --retries >= 1)"},
    {.name = "--noise-max-other-cores", .kind = KV_OPT_FLOAT, .off = O(noise_max_other_cores),
     .flo = 0.0, .fhi = 4096.0, .modes = M_MEASURE, .meta = "X",
     .help = "a row is noisy when other programs used more than X cores during its timed "
             "steps"},
    {.name = "--noise-min-util", .kind = KV_OPT_FLOAT, .off = O(noise_min_util), .flo = 0.0,
     .fhi = 1.0, .modes = M_MEASURE, .meta = "X",
     .help = "a row is noisy when its steps got less than X of the CPU they asked for "
             "(cpu_util)"},
    {.name = "--out", .kind = KV_OPT_OUTPUT, .off = O(out), .modes = M_MEASURE, .mkdir = 1,
     .meta = "FILE", .help = "the CSV, written atomically (one missing directory level is "
                             "created)"},
    {.name = "--quiet", .kind = KV_OPT_FLAG, .off = O(quiet),
     .help = "no progress on stderr (the warning about noisy rows is still printed)"},
    {.name = "--no-roofline", .kind = KV_OPT_FLAG, .off = O(no_roofline),
     .help = "skip measuring the machine's limits (metadata reads nan)"},
    {.name = "--bound", .kind = KV_OPT_FLAG, .off = O(bound), .modes = M_MEASURE,
     .help = "measure the DRAM read limit right before and after each row: bound_gbps "
             "(the host's bandwidth drifts within a run)"},
    {.name = "--shard", .kind = KV_OPT_CUSTOM, .off = O(shard), .modes = M_PLAIN,
     .parse = parse_shard, .meta = "I/N",
     .help = "measure only part I of N of the sweep's rows, balanced by predicted cost"},
    {.name = "--list", .kind = KV_OPT_FLAG, .off = O(list), .modes = M_PLAIN,
     .help = "print the planned rows (of --shard I/N, else all) and every shard's "
             "predicted total; measure nothing"},
    {.name = "--plan-rates", .kind = KV_OPT_CUSTOM, .off = O(rates), .modes = M_PLANNED,
     .parse = parse_rates, .meta = "G,B[,C]",
     .help = "GFLOP/s, read GB/s, cache-copy GB/s the plan predicts with (the same for "
             "every shard of a sweep)"},
    {.name = "--frontier", .kind = KV_OPT_INPUT, .off = O(frontier), .meta = "FILE",
     .help = "the memory-accuracy frontier instead of --strategies (see above)"},
    {.name = "--budgets", .kind = KV_OPT_CUSTOM, .off = O(budgets), .modes = M_FRONTIER,
     .parse = parse_budgets, .meta = "LIST",
     .help = "cache budgets in % of an f32 dynamic cache of T tokens (default 12.5,25,50)"},
};
#undef O
#define N_SWEEP_OPTS ((int32_t)(sizeof sweep_table / sizeof sweep_table[0]))

/* the default list, for the defaults and --help */
static char sweep_default_list[KV_CMD_MAX_STRATEGIES * 64];

static void sweep_defaults(void *opts, struct kv_cli_common *c)
{
    (void)c;
    struct sweep_opts *o = opts;
    if (default_strategies(sweep_default_list, sizeof sweep_default_list) != 0)
        sweep_default_list[0] = '\0'; /* refused by the run: too many strategies */
    o->strategies = sweep_default_list;
    o->max_seq = DEFAULT_MAX_SEQ;
    o->none_max = DEFAULT_NONE_MAX;
    o->warmup = DEFAULT_WARMUP;
    o->retries = DEFAULT_RETRIES;
    struct kv_noise_limits lim;
    kv_noise_limits_default(&lim);
    o->noise_max_other_cores = lim.max_other_cores;
    o->noise_min_util = lim.min_cpu_util;
    o->out = "out/bench.csv";
    kv_plan_rates_default(&o->rates.r);
    static const double dflt[] = {0.125, 0.25, 0.5};
    memcpy(o->budgets.v, dflt, sizeof dflt);
    o->budgets.n = 3;
}

static uint32_t sweep_modes(const struct kv_cmd_ctx *x)
{
    const struct sweep_opts *o = x->opts;
    uint32_t m = o->list ? M_LIST : M_MEASURE;
    m |= o->frontier != NULL ? M_FRONTIER : M_PLAIN;
    if (o->frontier == NULL && (o->list || o->shard.n_shards > 0))
        m |= M_PLANNED;
    return m;
}

/* Splits a comma list into names (pointing into buf). */
static int32_t split_names(const char *list, char *buf, size_t cap, const char **names,
                           int32_t n, int32_t max)
{
    snprintf(buf, cap, "%s", list);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t != NULL && n < max;
         t = strtok_r(NULL, ",", &save))
        names[n++] = t;
    return n;
}

/* The strategies this run uses, for the parameter-flag check: the
 * --frontier file's (each line's strategy or preset), else --strategy
 * and/or --strategies (both: refused by sweep_check, which runs after),
 * else the default list. */
static int32_t sweep_strategies(const struct kv_cmd_ctx *x, const char **names, int32_t max)
{
    const struct sweep_opts *o = x->opts;
    int32_t n = 0;
    if (o->frontier != NULL)
        return kv_sweepi_frontier_strategies(o->frontier, names, max);
    if (x->c.strategy != NULL)
        names[n++] = x->c.strategy;
    if (x->c.strategy == NULL || kv_cmd_given(x, "--strategies")) {
        static char buf[KV_CMD_MAX_STRATEGIES * 64]; /* names[] point into it */
        n = split_names(o->strategies, buf, sizeof buf, names, n, max);
    }
    return n;
}

/* Cross-checks after the table's; 2 after one line. */
static int sweep_check(struct kv_cmd_ctx *x)
{
    const struct sweep_opts *o = x->opts;
    if (kv_cmd_given(x, "--seq-lens") && kv_cmd_given(x, "--max-seq")) {
        fprintf(stderr, "kvlab: sweep: give either --seq-lens or --max-seq, not both\n");
        return 2;
    }
    if (x->c.strategy != NULL && o->frontier != NULL) {
        fprintf(stderr, "kvlab: sweep: --strategy has no effect with --frontier, which takes "
                        "its strategies from its file\n");
        return 2;
    }
    if (x->c.strategy != NULL && kv_cmd_given(x, "--strategies")) {
        fprintf(stderr, "kvlab: sweep: give either --strategy or --strategies, not both\n");
        return 2;
    }
    if (o->strict && o->retries == 0) {
        fprintf(stderr, "kvlab: sweep: --strict needs --retries of at least 1 (with 0 a "
                        "noisy row is never measured again, so one busy moment fails the run)\n");
        return 2;
    }
    if (o->frontier == NULL && o->strategies[0] == '\0') {
        fprintf(stderr, "kvlab: sweep: too many registered strategies for the default list\n");
        return 2;
    }
    if (o->frontier != NULL)
        return kv_sweepi_frontier_flags(x);
    return 0;
}

/* Fills cfg from the options; -1 after printing. */
static int build_config(struct kv_sweep_config *cfg, const struct kv_cmd_ctx *x)
{
    const struct sweep_opts *o = x->opts;
    const struct kv_cli_common *c = &x->c;
    memset(cfg, 0, sizeof(*cfg));
    const char *list = c->strategy != NULL ? c->strategy : o->strategies;
    if (o->frontier == NULL && parse_strategies(cfg, list, c) != 0)
        return -1; /* (a frontier's strategies come once the model's shape is known) */
    if (o->seq_lens.n > 0) {
        for (int32_t i = 0; i < o->seq_lens.n; i++)
            cfg->seq_lens[i] = o->seq_lens.v[i];
        cfg->n_lens = o->seq_lens.n;
    } else {
        int32_t T = o->max_seq < MIN_POW2_SEQ ? o->max_seq : MIN_POW2_SEQ;
        for (; T <= o->max_seq && cfg->n_lens < KV_SWEEP_MAX_LENS; T *= 2)
            cfg->seq_lens[cfg->n_lens++] = T;
    }
    cfg->cache = c->cache;
    cfg->none_max = o->none_max;
    cfg->reps = o->reps;
    cfg->warmup = o->warmup;
    cfg->max_retries = o->retries;
    static struct kv_noise_limits noise; /* cfg->noise points here for the run */
    kv_noise_limits_default(&noise);
    noise.max_other_cores = o->noise_max_other_cores;
    noise.min_cpu_util = o->noise_min_util;
    cfg->noise = &noise;
    cfg->batch = c->batch;
    cfg->threads = c->threads;
    cfg->seed = c->seed;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Memory                                                                   */

/*
 * Every listed strategy, and the hidden exact reference when none is
 * listed, checked against the model the sweep really runs (a checkpoint's
 * shape, not the options' defaults) with the cache it gets (the sweep's
 * capacity, its own parameters): kv_cli_check_strategy, one line and exit
 * status 2 on a refusal. Then, unless `memory` is 0 (--list plans for
 * another machine), the whole run: the weights (0 for a checkpoint, mapped
 * already), every strategy's cache at once (kv_cache_bytes_for: --window,
 * --residual and static's slots included; they live together), the
 * runner's activations for its largest forward (a whole T-token prefix)
 * and the reference logits. Returns 0 or the exit status.
 */
static int check_sweep_memory(const struct kv_model_config *mc,
                              const struct kv_sweep_config *cfg, size_t weights, int memory,
                              int bound)
{
    struct kv_cache_config cc;
    size_t caches = 0, b = 0;
    int listed_ref = kv_sweep_reference(cfg) >= 0;
    for (int32_t i = 0; i < cfg->n_strategies + !listed_ref; i++) {
        const struct kv_sweep_strategy *st = i < cfg->n_strategies
                                                 ? &cfg->strategies[i]
                                                 : kv_sweep_reference_strategy();
        kv_sweep_cache_config(&cc, cfg, mc, st);
        int rc = kv_cli_check_strategy("sweep", st->ops, st->params, &cc, cc.max_len, memory,
                                       &b);
        if (rc != 0)
            return rc;
        caches = b > SIZE_MAX - caches ? SIZE_MAX : caches + b;
    }
    if (!memory)
        return 0;
    size_t kvd = (size_t)mc->n_kv_heads * (size_t)(mc->dim / mc->n_heads);
    size_t per_tok = 4 * (size_t)mc->dim + 2 * kvd +
                     (mc->mlp ? 2 * (size_t)mc->hidden_dim : 0) + (size_t)mc->vocab_size;
    size_t T = (size_t)cfg->seq_lens[cfg->n_lens - 1];
    const size_t fa[] = {(size_t)cfg->batch, T, per_tok, sizeof(float)};
    const size_t fl[] = {(size_t)cfg->batch, (size_t)mc->vocab_size, 2 * 1024, sizeof(float)};
    size_t act, logits, probe = 0;
    if (bound) { /* --bound's read probe, beside the caches */
        struct kv_roofline_params rp;
        kv_roofline_defaults(&rp, cfg->threads);
        probe = rp.read_bytes;
    }
    if (kv_mul_sizes(&act, 4, fa) != KV_OK || kv_mul_sizes(&logits, 4, fl) != KV_OK ||
        caches > SIZE_MAX - weights || act > SIZE_MAX - weights - caches ||
        logits > SIZE_MAX - weights - caches - act ||
        probe > SIZE_MAX - weights - caches - act - logits) {
        fprintf(stderr, "kvlab: sweep: the caches of this sweep would need more than "
                        "%zu bytes\n", (size_t)SIZE_MAX);
        return 2;
    }
    return kv_cli_check_memory("this sweep", weights + caches + act + logits + probe) != 0 ? 2
                                                                                        : 0;
}

/* ------------------------------------------------------------------------ */
/* Shards (shard.h)                                                         */

/* --list: the plan's rows (of one shard, or all) and every shard's total,
 * as a CSV with `#` comment lines on stdout. 0, or 1 when stdout failed. */
static int print_plan(const struct kv_plan *p, const struct kv_sweep_config *cfg, int32_t shard)
{
    printf("# kvlab sweep --list: %d rows in %d shard%s, plan %016llx; predicted at "
           "%lld GFLOP/s, %lld GB/s read, %lld GB/s cache copies\n", p->n_rows, p->n_shards,
           p->n_shards == 1 ? "" : "s", (unsigned long long)p->id, (long long)p->rates.gflops,
           (long long)p->rates.gbps, (long long)p->rates.copy_gbps);
    printf("# whole sweep: predicted %.1f s\n", (double)p->whole_ns / 1e9);
    int64_t max_ns = 0, sum_ns = 0;
    for (int32_t k = 0; k < p->n_shards; k++) {
        printf("# shard %d/%d: %d rows, predicted %.1f s%s\n", k + 1, p->n_shards,
               p->shard_rows[k], (double)p->shard_ns[k] / 1e9,
               k + 1 == shard ? "  <- this shard" : "");
        max_ns = p->shard_ns[k] > max_ns ? p->shard_ns[k] : max_ns;
        sum_ns += p->shard_ns[k];
    }
    if (p->n_shards > 1)
        printf("# largest shard %.1f s = %.2fx the mean; all shards together %.2fx the "
               "whole sweep\n", (double)max_ns / 1e9,
               (double)max_ns * p->n_shards / (double)(sum_ns > 0 ? sum_ns : 1),
               (double)sum_ns / (double)(p->whole_ns > 0 ? p->whole_ns : 1));
    printf("shard,strategy,seq_len,reps,pred_ms,alone_ms,flops_step,bytes_step,"
           "copy_bytes_step\n");
    for (int32_t r = 0; r < p->n_rows; r++) {
        const struct kv_plan_row *row = &p->rows[r];
        if (shard > 0 && row->shard != shard)
            continue;
        printf("%d,%s,%d,%d,%.3f,%.3f,%lld,%lld,%lld\n", row->shard,
               cfg->strategies[row->strategy].label, row->seq_len, row->reps,
               (double)row->cost_ns / 1e6, (double)row->alone_ns / 1e6,
               (long long)row->flops_step, (long long)row->bytes_step,
               (long long)row->copy_bytes);
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "kvlab: sweep: --list: cannot write to stdout\n");
        return 1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The command                                                              */

/* The model the sweep runs: a --model checkpoint, or the synthetic one
 * (max_len raised to what the sweep needs; with --list its shape alone, in
 * *shape); then the frontier's plan, the configuration's check and a
 * checkpoint's caches against memory. 0, or the exit status (the model
 * freed). */
static int sweep_model(const struct kv_cmd_ctx *x, struct kv_sweep_config *cfg,
                       struct kv_model **mp, struct kv_model *shape)
{
    const struct sweep_opts *o = x->opts;
    struct kv_model *m = NULL;
    int32_t capacity = kv_sweep_capacity(cfg);
    if (x->c.model_path != NULL) {
        int rc = kv_cli_load_model("sweep", x->c.model_path, &m);
        if (rc != 0)
            return rc;
    } else {
        struct kv_model_config mc = x->c.model;
        if (mc.max_len < capacity)
            mc.max_len = capacity;
        shape->cfg = mc; /* --list measures nothing: the shape is all it needs */
        /* 0: the configuration is invalid; creating it says why */
        size_t weights = kv_model_weight_bytes(&mc);
        /* --list measures nothing: its strategies are validated, not sized */
        int rc = weights > 0 ? check_sweep_memory(&mc, cfg, weights, !o->list, o->bound) : 0;
        if (rc != 0)
            return rc;
        const enum kv_status s = o->list ? (weights > 0 ? KV_OK : KV_ERR_INVALID)
                                          : kv_model_create_synthetic(&m, &mc, x->c.seed);
        if (s != KV_OK) {
            fprintf(stderr, "kvlab: sweep: model: %s\n", kv_status_str(s));
            return s == KV_ERR_INVALID || s == KV_ERR_OVERFLOW ? 2 : 1;
        }
    }
    const struct kv_model *mshape = m != NULL ? m : shape;
    const char *why = NULL;
    static uint32_t frontier_only[KV_SWEEP_MAX_STRATEGIES];
    if (o->frontier != NULL && kv_sweepi_plan_frontier(cfg, frontier_only, x, &mshape->cfg) != 0) {
        kv_model_destroy(m);
        return 2;
    }
    cfg->est_gflops = 50.0;
    cfg->est_gbps = 10.0;
    if (kv_sweep_check(cfg, mshape, &why) != KV_OK) {
        fprintf(stderr, "kvlab: sweep: %s\n", why);
        kv_model_destroy(m);
        return 2;
    }
    /* a checkpoint's weights are loaded already; its caches are not, and
     * its shape (head_dim for --group ...) is known only now */
    if (x->c.model_path != NULL) {
        int rc = check_sweep_memory(&mshape->cfg, cfg, 0, !o->list, o->bound);
        if (rc != 0) {
            kv_model_destroy(m);
            return rc;
        }
    }
    *mp = m;
    return 0;
}

/* --shard / --list: the plan (*plan), then this shard's rows only. -1 to
 * go on measuring; else the exit status (--list printed the plan, or a
 * refusal), *plan freed. */
static int sweep_shards(const struct kv_cmd_ctx *x, struct kv_sweep_config *cfg,
                        const struct kv_model *mshape, struct kv_plan **plan)
{
    const struct sweep_opts *o = x->opts;
    static uint32_t only[KV_SWEEP_MAX_STRATEGIES];
    const char *why = NULL;
    *plan = NULL;
    if (!(o->list || o->shard.n_shards > 0))
        return -1;
    int32_t n_rows = 0;
    for (int32_t i = 0; i < cfg->n_strategies; i++)
        for (int32_t ti = 0; ti < cfg->n_lens; ti++)
            n_rows += kv_sweep_row_planned(cfg, i, ti);
    if (o->shard.n_shards > n_rows) {
        fprintf(stderr, "kvlab: sweep: --shard %d/%d: the sweep has %d rows, so at most "
                        "%d shards\n", o->shard.shard, o->shard.n_shards, n_rows, n_rows);
        return 2;
    }
    enum kv_status s = kv_plan_create(plan, cfg, &mshape->cfg, &o->rates.r,
                                      o->shard.n_shards > 0 ? o->shard.n_shards : 1, &why);
    if (s != KV_OK) {
        fprintf(stderr, "kvlab: sweep: planning shards: %s\n",
                why != NULL ? why : kv_status_str(s));
        return why != NULL ? 2 : 1;
    }
    if (o->list) {
        int rc = print_plan(*plan, cfg, o->shard.shard);
        kv_plan_destroy(*plan);
        *plan = NULL;
        return rc;
    }
    kv_plan_select(*plan, o->shard.shard, only);
    cfg->only = only;
    return -1;
}

/* The machine's limits into rl, on the run's threads, and the estimates
 * the sweep plans its repetitions with; -1 after printing. */
static int sweep_roofline(struct kv_roofline *rl, struct kv_sweep_config *cfg,
                          const struct sweep_opts *o)
{
    if (!o->quiet)
        kv_progress("kvlab: sweep: measuring the roofline on %d threads...\n", cfg->threads);
    struct kv_roofline_params rp;
    kv_roofline_defaults(&rp, cfg->threads);
    rp.stop = &sweep_signal;
    enum kv_status s = kv_roofline_measure(rl, &rp);
    if (s != KV_OK) {
        fprintf(stderr, "kvlab: sweep: roofline: %s\n", kv_status_str(s));
        return -1;
    }
    if (!o->quiet)
        kv_progress("kvlab: sweep: read %.1f GB/s, copy %.1f GB/s, sgemm %.1f GFLOP/s\n",
                    rl->read_gbps, rl->copy_gbps, rl->sgemm_gflops);
    if (rl->sgemm_gflops > 0)
        cfg->est_gflops = rl->sgemm_gflops * 0.6; /* the model's GEMMs are smaller */
    if (rl->read_gbps > 0)
        cfg->est_gbps = rl->read_gbps * 0.7;
    return 0;
}

/* The limits once more, after the sweep: a limit is the best the machine
 * did, and a neighbour's burst during one measurement (it happens on
 * shared machines) must not shift every normalised time of the file.
 * 1 when rl now holds the best of two measurements. */
static int sweep_roofline_again(struct kv_roofline *rl, const struct kv_sweep_config *cfg,
                                double *read_lo)
{
    struct kv_roofline_params rp;
    struct kv_roofline rl2;
    kv_roofline_defaults(&rp, cfg->threads);
    rp.stop = &sweep_signal;
    if (kv_roofline_measure(&rl2, &rp) != KV_OK)
        return 0;
    *read_lo = fmin(rl->read_gbps, rl2.read_gbps);
    /* each limit with the spread of the measurement it came from */
    if (!(rl->read_gbps >= rl2.read_gbps))
        rl->read_gbps = rl2.read_gbps, rl->read_spread = rl2.read_spread;
    if (!(rl->read_l3_gbps >= rl2.read_l3_gbps))
        rl->read_l3_gbps = rl2.read_l3_gbps, rl->read_l3_spread = rl2.read_l3_spread;
    if (!(rl->copy_gbps >= rl2.copy_gbps))
        rl->copy_gbps = rl2.copy_gbps, rl->copy_spread = rl2.copy_spread;
    if (!(rl->sgemm_gflops >= rl2.sgemm_gflops))
        rl->sgemm_gflops = rl2.sgemm_gflops, rl->sgemm_spread = rl2.sgemm_spread;
    return 1;
}

/*
 * The rows still noisy after their retries, listed on stderr once the file
 * is written, the way pyperf and google/benchmark warn about results they
 * do not trust: the figures are kept (flagged noisy=1 in the file), and the
 * reader learns which rows, and why, without opening it. Printed with
 * --quiet too: it is about the results, not progress.
 */
static void warn_noisy(const struct kv_sweepi_run *r, const struct sweep_opts *o,
                       int32_t n_noisy, int32_t n_rows)
{
    kv_progress("kvlab: sweep: WARNING: %d of %d rows stayed noisy after their retries: "
                "other programs ran during their timed steps, so their times are not the "
                "code's alone:\n", n_noisy, n_rows);
    for (int32_t si = 0; si < r->cfg->n_strategies; si++)
        for (int32_t ti = 0; ti < r->cfg->n_lens; ti++) {
            const struct kv_sweep_row *row = &r->rows[si][ti];
            if (r->have[si][ti] && row->noisy)
                kv_progress("  %-15s T=%-6d attempts %d: %s\n", r->cfg->strategies[si].label,
                            row->seq_len, row->attempts, row->noise_reason);
        }
    kv_progress("kvlab: sweep: '%s' marks them noisy=1; measure them again on a quieter "
                "machine or with more --retries%s\n", kv_text_q(o->out),
                o->strict ? " (--strict: exit status 1)" : ", or pass --strict to fail on them");
}

/* The exit status after the file is written (or not): its error, the
 * sweep's, an interruption, 1 for a noisy row under --strict, or 0 with the
 * summary line. */
static int sweep_finish(const struct kv_sweepi_run *r, const struct sweep_opts *o,
                        enum kv_status ws, int werr, enum kv_status s, int partial,
                        int32_t n_rows, int64_t t0)
{
    if (ws != KV_OK) {
        fprintf(stderr, "kvlab: sweep: cannot write '%s': %s\n", kv_text_q(o->out),
                ws == KV_ERR_IO && werr != 0 ? strerror(werr) : kv_status_str(ws));
        return 1;
    }
    const int32_t n_noisy = kv_sweepi_noisy_rows(r);
    if (n_noisy > 0)
        warn_noisy(r, o, n_noisy, n_rows);
    if (s != KV_OK) {
        fprintf(stderr, "kvlab: sweep: %s (%d finished rows written to '%s', partial=1)\n",
                kv_status_str(s), n_rows, kv_text_q(o->out));
        return 1;
    }
    if (partial) {
        int sig = sweep_signal ? sweep_signal : SIGINT;
        fprintf(stderr, "kvlab: sweep: interrupted; %d finished rows written to '%s' "
                        "(partial=1)\n", n_rows, kv_text_q(o->out));
        return 128 + sig;
    }
    if (!o->quiet)
        kv_progress("kvlab: sweep: %d rows (%d noisy) in %.1f s -> '%s'\n", n_rows, n_noisy,
                    (double)(kv_now_ns() - t0) / 1e9, kv_text_q(o->out));
    return o->strict && n_noisy > 0 ? 1 : 0;
}

static int sweep_run(struct kv_cmd_ctx *x)
{
    const struct sweep_opts *o = x->opts;
    static struct kv_sweep_config cfg;
    if (build_config(&cfg, x) != 0)
        return 2;

    /* The model: synthetic (max_len raised to what the sweep needs) or a file. */
    struct kv_model *m = NULL;
    static struct kv_model shape; /* the synthetic model's shape, for --list */
    int rc = sweep_model(x, &cfg, &m, &shape);
    if (rc != 0)
        return rc;
    const struct kv_model *mshape = m != NULL ? m : &shape;

    /* --shard / --list: the plan, then this shard's rows only */
    struct kv_plan *plan = NULL;
    rc = sweep_shards(x, &cfg, mshape, &plan);
    if (rc >= 0) {
        kv_model_destroy(m);
        return rc;
    }

    struct kv_sysinfo si;
    kv_sysinfo_collect(&si);
    kv_cli_signals(&sweep_signal);
    cfg.stop = &sweep_signal;
    static struct kv_sweepi_run run;
    memset(&run, 0, sizeof(run));
    run.cfg = &cfg;
    run.m = m;
    run.quiet = o->quiet;
    run.tty = isatty(STDERR_FILENO);
    int64_t t0 = kv_now_ns();

    /* The machine's limits, measured first, on the run's threads. */
    struct kv_roofline rl = {.read_gbps = NAN, .read_l3_gbps = NAN, .copy_gbps = NAN,
                             .sgemm_gflops = NAN, .read_spread = NAN, .read_l3_spread = NAN,
                             .copy_spread = NAN, .sgemm_spread = NAN};
    int rl_runs = o->no_roofline ? 0 : 1;
    if (!o->no_roofline && sweep_roofline(&rl, &cfg, o) != 0) {
        kv_model_destroy(m);
        return 1;
    }
    double read_lo = rl.read_gbps;
    /* --bound: the DRAM read test beside every row, its array allocated and
     * touched once, here (sweep.h: cfg.probe) */
    struct kv_read_probe probe = {0};
    if (o->bound) {
        struct kv_roofline_params rp;
        kv_roofline_defaults(&rp, cfg.threads);
        enum kv_status ps = kv_read_probe_open(&probe, &rp, 0);
        if (ps != KV_OK) {
            fprintf(stderr, "kvlab: sweep: the read probe of --bound: %s\n", kv_status_str(ps));
            kv_model_destroy(m);
            return 1;
        }
        cfg.probe = &probe;
        cfg.probe_passes = SWEEP_PROBE_PASSES;
    }
    if (!o->quiet)
        kv_progress("kvlab: sweep: %d strategies x %d lengths (%d..%d), %d threads, "
                        "OpenBLAS %s -> '%s'\n", cfg.n_strategies, cfg.n_lens, cfg.seq_lens[0],
                        cfg.seq_lens[cfg.n_lens - 1], cfg.threads, si.blas_core,
                        kv_text_q(o->out));

    cfg.on_row_start = on_row_start;
    cfg.on_row = on_row;
    cfg.on_retry = on_retry;
    cfg.user = &run;
    int32_t interrupted = 0;
    enum kv_status s = KV_OK;
    int64_t t_sweep = kv_now_ns();
    if (!sweep_signal)
        s = kv_sweep_run(&cfg, m, &interrupted);
    else
        interrupted = 1;
    t_sweep = kv_now_ns() - t_sweep;
    kv_read_probe_close(&probe);
    cfg.probe = NULL; /* cfg outlives this call */
    if (run.bar_shown && !o->quiet)
        kv_progress("\n");
    int partial = interrupted || s != KV_OK || sweep_signal;
    if (!o->no_roofline && !partial) {
        if (sweep_roofline_again(&rl, &cfg, &read_lo))
            rl_runs = 2;
        partial = sweep_signal != 0;
    }

    /* Write whatever is complete, atomically - but only a file that holds
     * at least one finished row replaces what --out held before: a sweep
     * that failed in its setup or was stopped before its first row (during
     * the roofline, say) leaves the previous results alone. */
    int32_t n_done = 0;
    for (int32_t k = 0; k < cfg.n_strategies; k++)
        for (int32_t ti = 0; ti < cfg.n_lens; ti++)
            n_done += run.have[k][ti];
    if (n_done == 0) {
        kv_model_destroy(m);
        if (s != KV_OK) {
            fprintf(stderr, "kvlab: sweep: %s before the first row finished; %s left as it "
                            "was\n", kv_status_str(s), kv_text_q(o->out));
            return 1;
        }
        fprintf(stderr, "kvlab: sweep: interrupted before the first row finished; %s left as "
                        "it was\n", kv_text_q(o->out));
        return 128 + (sweep_signal ? sweep_signal : SIGINT);
    }
    const struct kv_sweepi_file file = {.si = &si, .rl = &rl, .rl_runs = rl_runs,
                                        .read_lo = read_lo,
                                        .partial = partial, .t0 = t0, .t_sweep = t_sweep,
                                        .plan = plan};
    int32_t n_rows = 0;
    int werr = 0;
    enum kv_status ws = kv_sweepi_write_csv(&run, x, &file, &n_rows, &werr);
    kv_model_destroy(m);
    kv_plan_destroy(plan);
    return sweep_finish(&run, o, ws, werr, s, partial, n_rows, t0);
}

const struct kv_cmd kv_cmd_sweep_def = {
    .name = "sweep",
    .summary = "measure every strategy over sequence lengths, write CSV",
    .usage = "[--strategies LIST | --frontier FILE] [--seq-lens LIST | --max-seq N] [options]",
    .about =
        "  Measures each strategy (--strategies; --strategy NAME for one; default: every\n"
        "  registered strategy and its sweep presets) at each sequence length T and\n"
        "  writes the schema-v3 CSV. Timed steps are centred on T: the cache is\n"
        "  prefilled (untimed) to T-1-W-(R-1)/2 tokens, so timed step (R-1)/2 attends\n"
        "  over exactly T. The synthetic model's --max-len is raised to what the sweep\n"
        "  needs (largest T + warmup + reps); a --model checkpoint's seq_len must\n"
        "  already cover it. A row whose timed steps another program disturbed (other\n"
        "  programs used > --noise-max-other-cores cores, cpu_util < --noise-min-util,\n"
        "  steal, preemptions, a wild spread) is measured again, up to --retries times;\n"
        "  one still noisy is written with noisy=1 and its reason, listed in a warning\n"
        "  at the end, and fails the run with --strict (exit 1, the file written).\n"
        "  --out is refused up front if it is a directory, FIFO or device, read-only,\n"
        "  in a missing folder (one level is created), or an input.\n"
        "  --shard I/N measures part I of N of the rows, balanced by predicted cost\n"
        "  (`kvlab merge` joins them); --list prints the plan and measures nothing.\n"
        "  --frontier FILE (bench/data/frontier.list: LABEL STRATEGY PARAMS, '@' solved per\n"
        "  budget) measures every configuration of FILE at each --budgets and T; the\n"
        "  parameter options then reach the configurations that do not set them.\n"
        "  SIGINT/SIGTERM: the rows done so far are written, marked # partial=1.\n",
    .opts = sweep_table,
    .n_opts = N_SWEEP_OPTS,
    .groups = KV_GRP_MODEL | KV_GRP_CHECKPOINT | KV_GRP_STRATEGY | KV_GRP_PARAMS |
              KV_GRP_BATCH | KV_GRP_THREADS | KV_GRP_SEED,
    .opts_size = sizeof(struct sweep_opts),
    .defaults = sweep_defaults,
    .modes = sweep_modes,
    .mode_names = sweep_mode_names,
    .strategies = sweep_strategies,
    .check = sweep_check,
    .run = sweep_run,
    .example = "--strategies dynamic --seq-lens 16 --reps 1 --warmup 0 --layers 1 --dim 16 "
               "--heads 2 --kv-heads 2 --hidden 24 --vocab 64 --threads 1 --no-roofline "
               "--quiet --out @OUT",
};
