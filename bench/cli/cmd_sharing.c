/*
 * cmd_sharing.c - `kvlab sharing`: the prefix-sharing sweep. B sequences
 * start from one prompt of P tokens and each generates N greedy tokens,
 * once with the prompt prefilled per sequence (unshared) and once prefilled
 * a single time and shared (kv_prefill_shared: the cache's reorder), for
 * every strategy given, every P and every B. One CSV row per run: the
 * resident cache bytes at the end and their breakdown (kv_cache_stats:
 * token rows, rows several sequences read, copy-on-write bytes), and the
 * decode step time (median, p95, and per sequence).
 *
 * The design decision: a run is one kv_generate, the same call `kvlab
 * generate --shared-prompt` makes, so what is measured is what a user
 * runs; the shared and unshared runs of a configuration must produce the
 * same tokens (tokens_match, checked after timing), which is the
 * correctness check of every row. The strategies come from --strategies
 * only, and each must have the capability a shared prompt needs
 * (KV_CAP_KEEPS_HISTORY and KV_CAP_REORDER): a contiguous cache then copies
 * the prompt's rows into every sequence, a paged one shares its blocks.
 * Everything is checked before the first run: the options and the output
 * file by their table (cli_cmd.h: --out judged up front, one missing
 * folder level allowed and created at the write; every --batches and
 * --prompt-lens value and strategy once), then the memory of the largest
 * run; the CSV is written through a temporary file and a rename, also when
 * the run stops on an error (rows so far).
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_cmd.h"
#include "cli_io.h"
#include "cli_opts.h"
#include "commands.h"
#include "../results/csv_write.h"
#include "../measure/stats.h"
#include "../measure/sweep.h"
#include "../measure/sysinfo.h"

#define SHARING_MAX_LIST 16
#define SHARING_MAX_STRATEGIES 8

struct sharing_opts {
    const char *strategies;
    struct kv_opt_ints batches, prompts;
    int32_t new_tokens;
    const char *out;
    int quiet;
};

#define O(f) offsetof(struct sharing_opts, f)
static const struct kv_opt sharing_table[] = {
    {.name = "--strategies", .kind = KV_OPT_STRATEGIES, .off = O(strategies), .required = 1,
     .meta = "LIST", .help = "strategy or preset names, each once (each needs reorder)"},
    {.name = "--batches", .kind = KV_OPT_INTS, .off = O(batches), .lo = 1, .hi = 1 << 12,
     .hi_n = SHARING_MAX_LIST, .meta = "LIST", .help = "B values, each once"},
    {.name = "--prompt-lens", .kind = KV_OPT_INTS, .off = O(prompts), .lo = 1, .hi = 1 << 30,
     .hi_n = SHARING_MAX_LIST, .meta = "LIST", .help = "P values, each once"},
    {.name = "--new-tokens", .kind = KV_OPT_INT, .off = O(new_tokens), .lo = 1, .hi = 1 << 20,
     .meta = "N", .help = "generated tokens per sequence"},
    {.name = "--out", .kind = KV_OPT_OUTPUT, .off = O(out), .mkdir = 1, .meta = "FILE",
     .help = "the CSV, written atomically (one missing directory level is created)"},
    {.name = "--quiet", .kind = KV_OPT_FLAG, .off = O(quiet), .help = "no progress lines"},
};
#undef O

static void sharing_defaults(void *opts, struct kv_cli_common *c)
{
    (void)c;
    struct sharing_opts *o = opts;
    o->batches = (struct kv_opt_ints){.n = 4, .v = {1, 2, 4, 8}};
    o->prompts = (struct kv_opt_ints){.n = 2, .v = {1024, 4096}};
    o->new_tokens = 128;
    o->out = "out/sharing.csv";
}

/* The strategies the run uses, for the parameter-flag check: --strategies. */
static int32_t sharing_strategies(const struct kv_cmd_ctx *x, const char **names, int32_t max)
{
    const struct sharing_opts *o = x->opts;
    static char buf[KV_CMD_MAX_STRATEGIES * 64];
    int32_t n = 0;
    if (o->strategies == NULL)
        return 0;
    snprintf(buf, sizeof buf, "%s", o->strategies); /* the kind's check bounds it */
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t != NULL && n < max;
         t = strtok_r(NULL, ",", &save))
        names[n++] = t;
    return n;
}

static int sharing_check(struct kv_cmd_ctx *x)
{
    const struct sharing_opts *o = x->opts;
    /* a value twice would measure (and write) the same rows twice */
    const struct {
        const char *name;
        const struct kv_opt_ints *l;
    } lists[] = {{"--batches", &o->batches}, {"--prompt-lens", &o->prompts}};
    for (size_t k = 0; k < sizeof lists / sizeof lists[0]; k++) {
        const int32_t i = kv_sweep_list_repeat(lists[k].l->v, lists[k].l->n, NULL);
        if (i >= 0) {
            fprintf(stderr, "kvlab: sharing: %s names %" PRId32 " twice\n", lists[k].name,
                    lists[k].l->v[i]);
            return 2;
        }
    }
    const char *names[KV_CMD_MAX_STRATEGIES];
    if (sharing_strategies(x, names, KV_CMD_MAX_STRATEGIES) > SHARING_MAX_STRATEGIES) {
        fprintf(stderr, "kvlab: sharing: --strategies names at most %d strategies\n",
                SHARING_MAX_STRATEGIES);
        return 2;
    }
    return 0;
}

/* Creates the parent directory of path when it is missing (one level: the
 * --out check allowed exactly that); a failure is the write's to report. */
static void make_parent_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (slash == NULL || slash == path)
        return;
    char dir[4096];
    if ((size_t)(slash - path) >= sizeof dir)
        return;
    snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    (void)mkdir(dir, 0755);
}

/* Per-step decode times of one run (the callback of kv_generate). */
struct sharing_log {
    int64_t *step_ns; /* (new_tokens) */
};

static void log_step(void *user, int32_t step, const float *logits, const int32_t *next,
                     const struct kv_step_stats *st, int64_t step_ns)
{
    (void)logits, (void)next, (void)st;
    ((struct sharing_log *)user)->step_ns[step] = step_ns;
}

static const char *const sharing_cols[] = {
    "strategy", "label", "params", "prompt_len", "batch", "shared", "new_tokens", "layers",
    "dim", "heads", "kv_heads", "head_dim", "threads", "prefill_ns", "step_ns_median",
    "step_ns_p95", "step_ns_per_seq", "resident_bytes", "used_bytes", "token_bytes",
    "shared_bytes", "cow_bytes", "copied_bytes", "peak_rss_bytes", "tokens_match"};
#define SHARING_NCOLS ((int32_t)(sizeof sharing_cols / sizeof sharing_cols[0]))

/* What one sweep holds, from the model to the CSV being filled;
 * sharing_free releases it. */
struct sharing_state {
    const struct sharing_opts *so;
    struct kv_cli_common *c;
    struct kv_model *m;
    int32_t max_p, max_b;         /* the longest prompt, the largest batch */
    struct kv_cache_config cc;    /* the cache shape of the largest run */
    struct kv_cli_strategy strat[SHARING_MAX_STRATEGIES];
    const char *sname[SHARING_MAX_STRATEGIES]; /* as given (pointers into list) */
    int32_t n_strat;
    char *list;                   /* a copy of --strategies, cut at the commas */
    size_t biggest;               /* the cache bytes of the largest run */
    struct kv_csv_writer *w;
    int32_t *prompt, *tok_a, *tok_b; /* (max_b, max_p); (max_b, N) unshared and shared */
    int64_t *steps;               /* (N) step times of the current run */
};

/* The model's shape (a checkpoint's header, loaded), the largest run's
 * length against it and its cache shape. Returns the exit status. */
static int sharing_shape(struct sharing_state *S)
{
    const struct sharing_opts *so = S->so;
    struct kv_cli_common *c = S->c;
    if (c->model_path != NULL) {
        const int rc = kv_cli_load_model("sharing", c->model_path, &S->m);
        if (rc != 0)
            return rc;
        c->model = S->m->cfg;
    }
    const struct kv_model_config *mc = &c->model;
    int32_t max_p = 0, max_b = 0;
    for (int32_t i = 0; i < so->prompts.n; i++)
        max_p = so->prompts.v[i] > max_p ? so->prompts.v[i] : max_p;
    for (int32_t i = 0; i < so->batches.n; i++)
        max_b = so->batches.v[i] > max_b ? so->batches.v[i] : max_b;
    S->max_p = max_p;
    S->max_b = max_b;
    if ((int64_t)max_p + so->new_tokens > mc->max_len) {
        fprintf(stderr, "kvlab: sharing: the longest --prompt-lens + --new-tokens (%" PRId64
                        ") exceeds --max-len (%" PRId32 ")\n",
                (int64_t)max_p + so->new_tokens, mc->max_len);
        return 2;
    }
    S->cc = (struct kv_cache_config){.n_layers = mc->n_layers, .batch = max_b,
                                     .n_kv_heads = mc->n_kv_heads,
                                     .head_dim = mc->dim / mc->n_heads, .max_len = mc->max_len};
    return 0;
}

/* Every strategy of --strategies: resolved, able to share a prompt, no
 * configuration twice, its cache's bytes for the largest run. Returns the
 * exit status. */
static int sharing_strategies_check(struct sharing_state *S)
{
    const struct sharing_opts *so = S->so;
    const struct kv_cache_config *cc = &S->cc;
    S->list = kv_alloc(strlen(so->strategies) + 1);
    if (S->list == NULL) {
        fprintf(stderr, "kvlab: sharing: %s\n", kv_status_str(KV_ERR_NOMEM));
        return 1;
    }
    strcpy(S->list, so->strategies);
    for (char *save = NULL, *t = strtok_r(S->list, ",", &save); t != NULL;
         t = strtok_r(NULL, ",", &save)) {
        if (S->n_strat == SHARING_MAX_STRATEGIES) {
            fprintf(stderr, "kvlab: sharing: at most %d strategies\n", SHARING_MAX_STRATEGIES);
            return 2;
        }
        struct kv_cli_strategy *s = &S->strat[S->n_strat];
        if (kv_cli_strategy(S->c, t, s) != 0)
            return 2;
        if (!(kv_strategy_caps(s->ops, cc, s->params) & KV_CAP_KEEPS_HISTORY) ||
            !(kv_strategy_caps(s->ops, cc, s->params) & KV_CAP_REORDER)) {
            fprintf(stderr, "kvlab: sharing: strategy '%s' does not support %s, which a shared "
                            "prompt needs\n", kv_text_q(t),
                    kv_strategy_caps(s->ops, cc, s->params) & KV_CAP_KEEPS_HISTORY
                        ? "reorder" : "keeping history");
            return 2;
        }
        /* two names of one configuration (quantized, quantized-int8) would
         * measure and write the same rows twice, as sweep refuses too */
        for (int32_t j = 0; j < S->n_strat; j++)
            if (kv_sweep_same_config(S->strat[j].ops, S->strat[j].params, s->ops, s->params)) {
                fprintf(stderr, "kvlab: sharing: --strategies names one configuration twice: "
                                "'%s' and '%s'\n", kv_text_q(S->sname[j]), kv_text_q(t));
                return 2;
            }
        size_t bytes = 0;
        int rc = kv_cli_check_strategy("sharing", s->ops, s->params, cc,
                                       S->max_p + so->new_tokens, 1, &bytes);
        if (rc != 0)
            return rc;
        S->biggest = bytes > S->biggest ? bytes : S->biggest;
        S->sname[S->n_strat++] = t;
    }
    if (S->n_strat == 0) {
        fprintf(stderr, "kvlab: sharing: --strategies names no strategy\n");
        return 2;
    }
    return 0;
}

/* Weights + the unshared prefill's activations (B x P tokens) + a cache,
 * for the largest run, against the machine. Returns the exit status. */
static int sharing_check_memory(const struct sharing_state *S)
{
    const struct kv_model_config *mc = &S->c->model;
    const size_t hs = (size_t)(mc->dim / mc->n_heads), kvd = (size_t)mc->n_kv_heads * hs;
    const size_t per_tok = (4 * (size_t)mc->dim + 2 * kvd +
                            (mc->mlp ? 2 * (size_t)mc->hidden_dim : 0)) * sizeof(float);
    size_t act;
    const size_t f[3] = {(size_t)S->max_b, (size_t)S->max_p, per_tok};
    const size_t wb = kv_model_weight_bytes(mc);
    if (kv_mul_sizes(&act, 3, f) != KV_OK || act > SIZE_MAX - wb - S->biggest) {
        fprintf(stderr, "kvlab: sharing: the largest run needs more bytes than size_t "
                        "holds\n");
        return 2;
    }
    if (kv_cli_check_memory("the largest sharing run", wb + act + S->biggest) != 0)
        return 2;
    /* (--out was judged before the run: cli_cmd.c) */
    return 0;
}

/* The synthetic model (unless a checkpoint is loaded), the token arrays,
 * and the CSV's metadata and header. From here on, failures are run-time
 * failures (exit 1). Returns the exit status. */
static int sharing_alloc(struct sharing_state *S)
{
    const struct sharing_opts *so = S->so;
    const struct kv_cli_common *c = S->c;
    enum kv_status s;
    if (S->m == NULL && (s = kv_model_create_synthetic(&S->m, &c->model, c->seed)) != KV_OK) {
        fprintf(stderr, "kvlab: sharing: model: %s\n", kv_status_str(s));
        return 1;
    }
    const size_t n_prompt = (size_t)S->max_b * (size_t)S->max_p;
    S->prompt = kv_alloc(n_prompt * sizeof *S->prompt);
    S->tok_a = kv_alloc((size_t)S->max_b * (size_t)so->new_tokens * sizeof *S->tok_a);
    S->tok_b = kv_alloc((size_t)S->max_b * (size_t)so->new_tokens * sizeof *S->tok_b);
    S->steps = kv_alloc((size_t)so->new_tokens * sizeof *S->steps);
    if (S->prompt == NULL || S->tok_a == NULL || S->tok_b == NULL || S->steps == NULL ||
        kv_csv_writer_create(&S->w) != KV_OK) {
        fprintf(stderr, "kvlab: sharing: %s\n", kv_status_str(KV_ERR_NOMEM));
        return 1;
    }
    struct kv_csv_writer *w = S->w;
    struct kv_sysinfo si;
    kv_sysinfo_collect(&si);
    kv_csv_writer_set_meta(w, "kvlab sharing", NULL);
    kv_csv_writer_set_meta(w, "schema", "1");
    kv_csv_writer_set_meta(w, "commit", si.commit);
    kv_csv_writer_set_meta(w, "date", si.date);
    kv_csv_writer_set_meta(w, "cpu", si.cpu);
    kv_csv_writer_set_metaf(w, "threads", "%d", c->threads);
    kv_csv_writer_set_meta(w, "blas_core", si.blas_core);
    kv_csv_writer_set_metaf(w, "seed", "%" PRIu64, c->seed);
    kv_csv_writer_set_meta(w, "strategies", so->strategies);
    if ((s = kv_csv_writer_set_header(w, sharing_cols, SHARING_NCOLS)) != KV_OK) {
        fprintf(stderr, "kvlab: sharing: %s\n", kv_status_str(s));
        return 1;
    }
    return 0;
}

/* One run: strategy k, B sequences of the prompt (P tokens), shared or
 * not, as one kv_generate; its CSV row and progress line. A shared run's
 * tokens must equal the unshared run's just before it. Returns 1 when the
 * sweep must stop (the failure said in one line), else 0. */
static int sharing_one(struct sharing_state *S, int32_t k, int32_t P, int32_t B, int shared)
{
    const struct sharing_opts *so = S->so;
    const struct kv_cli_common *c = S->c;
    const struct kv_model_config *mc = &c->model;
    const struct kv_cli_strategy *st_k = &S->strat[k];
    const int32_t N = so->new_tokens;
    int64_t *steps = S->steps;
    struct kv_cache_config one = S->cc;
    one.batch = B;
    struct kv_cache *cache = NULL;
    enum kv_status s = kv_cache_create(&cache, st_k->ops, &one, st_k->params);
    struct kv_gen_params gp = {.batch = B, .prompt_len = P, .prompt = S->prompt,
                               .new_tokens = N, .n_threads = c->threads,
                               .shared_prompt = shared};
    struct sharing_log lg = {.step_ns = steps};
    int32_t *tok = shared ? S->tok_b : S->tok_a;
    if (s == KV_OK)
        s = kv_generate(S->m, cache, &gp, tok, log_step, &lg);
    if (s != KV_OK) {
        fprintf(stderr, "kvlab: sharing: %s, P %" PRId32 ", B %" PRId32
                        "%s: %s\n", st_k->ops->name, P, B,
                shared ? ", shared" : "", kv_status_str(s));
        kv_cache_destroy(cache);
        return 1;
    }
    struct kv_cache_stats st;
    kv_cache_stats(cache, &st);
    const size_t copied = kv_cache_copied_bytes(cache);
    char label[64], params[256];
    kv_cache_label(cache, label, sizeof label);
    kv_params_format(st_k->ops, st_k->params, params, sizeof params);
    kv_cache_destroy(cache);
    const int64_t prefill = steps[0];
    int64_t med = 0, p95 = 0;
    if (N > 1) {
        med = kv_stats_median_i64(steps + 1, N - 1);
        p95 = kv_stats_percentile_i64(steps + 1, N - 1, KV_STATS_P95);
    }
    const int match =
        shared == 0 ||
        memcmp(S->tok_a, S->tok_b, (size_t)B * (size_t)N * sizeof *S->tok_a) == 0;
    char line[1024];
    snprintf(line, sizeof line,
             "%s,%s,%s,%" PRId32 ",%" PRId32 ",%d,%" PRId32 ",%" PRId32
             ",%" PRId32 ",%" PRId32 ",%" PRId32 ",%" PRId32 ",%" PRId32
             ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%.1f,%zu,%zu,%zu,%zu,%zu,"
             "%zu,%zu,%d",
             st_k->ops->name, label, params, P, B, shared, N,
             mc->n_layers, mc->dim, mc->n_heads, mc->n_kv_heads,
             mc->dim / mc->n_heads, c->threads, prefill, med, p95,
             (double)med / B, st.resident, st.resident - st.spare, st.tokens,
             st.shared, st.cow, copied, kv_peak_rss_bytes(), match);
    if ((s = kv_csv_writer_add_row(S->w, line)) != KV_OK) {
        fprintf(stderr, "kvlab: sharing: %s\n", kv_status_str(s));
        return 1;
    }
    if (!so->quiet)
        kv_progress("sharing: %-10s P %5" PRId32 " B %2" PRId32 " %-8s "
                    "%12zu bytes resident, step %.3f ms (%.3f ms per sequence)%s\n", label,
                    P, B, shared ? "shared" : "unshared", st.resident, (double)med / 1e6,
                    (double)med / B / 1e6, match ? "" : "  TOKENS DIFFER");
    if (!match) {
        fprintf(stderr, "kvlab: sharing: %s, P %" PRId32 ", B %" PRId32
                        ": the shared run's tokens differ from the unshared "
                        "run's\n", label, P, B);
        return 1;
    }
    return 0;
}

/* Every strategy, P and B, unshared then shared, until one fails. Returns
 * 1 when a run failed. */
static int sharing_sweep(struct sharing_state *S)
{
    const struct sharing_opts *so = S->so;
    const struct kv_model_config *mc = &S->c->model;
    int32_t *prompt = S->prompt;
    int failed = 0;
    for (int32_t k = 0; k < S->n_strat && !failed; k++)
        for (int32_t pi = 0; pi < so->prompts.n && !failed; pi++)
            for (int32_t bi = 0; bi < so->batches.n && !failed; bi++) {
                const int32_t P = so->prompts.v[pi], B = so->batches.v[bi];
                /* one seeded prompt, the same in every row */
                uint64_t rs = S->c->seed ^ 0x5EEDF00Dull ^ (uint64_t)P;
                for (int32_t t = 0; t < P; t++)
                    prompt[t] = (int32_t)(kv_rng_next(&rs) % (uint64_t)mc->vocab_size);
                for (int32_t b = 1; b < B; b++)
                    memcpy(prompt + (size_t)b * P, prompt, (size_t)P * sizeof *prompt);
                for (int shared = 0; shared < 2 && !failed; shared++)
                    failed = sharing_one(S, k, P, B, shared);
            }
    return failed;
}

/* The CSV, written (through a temporary file and a rename) whenever it has
 * rows, also after a failed run. Returns the exit status. */
static int sharing_write(const struct sharing_state *S, int failed)
{
    const struct sharing_opts *so = S->so;
    if (kv_csv_writer_row_count(S->w) > 0) {
        make_parent_dir(so->out);
        errno = 0;
        enum kv_status s = kv_csv_writer_write(S->w, so->out);
        if (s != KV_OK) {
            fprintf(stderr, "kvlab: sharing: cannot write '%s': %s\n", kv_text_q(so->out),
                    s == KV_ERR_IO && errno != 0 ? strerror(errno) : kv_status_str(s));
            return 1;
        }
    }
    if (failed)
        return 1;
    if (!so->quiet)
        kv_progress("sharing: %" PRId32 " rows in '%s'\n", kv_csv_writer_row_count(S->w),
                    kv_text_q(so->out));
    return 0;
}

static void sharing_free(struct sharing_state *S)
{
    kv_csv_writer_destroy(S->w);
    kv_free(S->steps);
    kv_free(S->tok_b);
    kv_free(S->tok_a);
    kv_free(S->prompt);
    kv_free(S->list);
    kv_model_destroy(S->m);
}

/* Everything checked before the first run (bad input: exit 2), then the
 * sweep and its CSV. */
static int sharing_run(struct kv_cmd_ctx *x)
{
    struct sharing_state S = {.so = x->opts, .c = &x->c};
    int rc = sharing_shape(&S);
    if (rc == 0)
        rc = sharing_strategies_check(&S);
    if (rc == 0)
        rc = sharing_check_memory(&S);
    if (rc == 0)
        rc = sharing_alloc(&S);
    if (rc == 0)
        rc = sharing_write(&S, sharing_sweep(&S));
    sharing_free(&S);
    return rc;
}

const struct kv_cmd kv_cmd_sharing_def = {
    .name = "sharing",
    .summary = "memory and step time of B sequences sharing one prompt, write CSV",
    .usage = "--strategies LIST [options]",
    .about = "  B sequences share one prompt of P tokens and generate N greedy tokens each,\n"
             "  unshared (prefilled per sequence) and shared (prefilled once: the cache's\n"
             "  reorder); one CSV row per strategy, P, B and mode. The shared run's tokens\n"
             "  must equal the unshared run's (tokens_match). The strategies take the\n"
             "  parameter options below that apply to them.\n",
    .opts = sharing_table,
    .n_opts = sizeof sharing_table / sizeof sharing_table[0],
    .groups = KV_GRP_MODEL | KV_GRP_CHECKPOINT | KV_GRP_PARAMS | KV_GRP_THREADS | KV_GRP_SEED,
    .opts_size = sizeof(struct sharing_opts),
    .defaults = sharing_defaults,
    .strategies = sharing_strategies,
    .check = sharing_check,
    .run = sharing_run,
    .example = "--strategies dynamic --batches 1,2 --prompt-lens 8 --new-tokens 2 --layers 1 "
               "--dim 16 --heads 2 --kv-heads 2 --hidden 24 --vocab 64 --max-len 32 "
               "--threads 1 --quiet --out @OUT",
};
