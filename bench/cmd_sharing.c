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
 * Everything is checked before the first run (options, the memory of the
 * largest run, the output file); the CSV is written through a temporary
 * file and a rename, also when the run stops on an error (rows so far).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_io.h"
#include "cli_opts.h"
#include "cli_cmd.h"
#include "commands.h"
int kv_cmd_sharing(int argc, char **argv);
#include "csv_write.h"
#include "stats.h"
#include "sysinfo.h"

#define SHARING_MAX_LIST 16
#define SHARING_MAX_STRATEGIES 8

static void sharing_usage(FILE *f)
{
    fprintf(f,
            "usage: kvlab sharing --strategies LIST [options]\n"
            "  B sequences share one prompt of P tokens and generate N greedy tokens each,\n"
            "  unshared (prefilled per sequence) and shared (prefilled once: the cache's\n"
            "  reorder); one CSV row per strategy, P, B and mode\n"
            "  --strategies LIST  strategy or preset names (each needs reorder)\n"
            "  --batches LIST     B values (default 1,2,4,8)\n"
            "  --prompt-lens LIST P values (default 1024,4096)\n"
            "  --new-tokens N     generated tokens per sequence (default 128)\n"
            "  --out FILE         the CSV (default out/sharing.csv)\n"
            "  --quiet            no progress lines\n"
            "  --seed S --threads T, model options as for generate (--layers --dim ...\n"
            "  --max-len, --model FILE.bin), and the strategies' parameters:\n");
    kv_cli_print_param_help(f);
}

struct sharing_opts {
    struct kv_cli_common c;
    const char *strategies;
    int32_t batches[SHARING_MAX_LIST], n_batches;
    int32_t prompts[SHARING_MAX_LIST], n_prompts;
    int32_t new_tokens;
    const char *out;
    int quiet;
};

/* The value of argv[*i]'s option ("--opt v" or "--opt=v"), advancing *i;
 * NULL after printing when it is missing. */
static const char *opt_value(int argc, char **argv, int *i, const char *eq, const char *name)
{
    if (eq != NULL) {
        (*i)++;
        return eq + 1;
    }
    if (*i + 1 >= argc) {
        fprintf(stderr, "kvlab: sharing: %s expects a value\n", name);
        return NULL;
    }
    *i += 2;
    return argv[*i - 1];
}

/* 0, 1 (help printed) or 2 (bad input printed). */
static int parse(struct sharing_opts *o, int argc, char **argv)
{
    for (int i = 1; i < argc;) {
        const int r = kv_cli_parse_common(&o->c, argc, argv, &i);
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        const char *a = argv[i], *eq = strchr(a, '=');
        const size_t n = eq != NULL ? (size_t)(eq - a) : strlen(a);
#define IS(s) (n == sizeof(s) - 1 && strncmp(a, s, n) == 0)
        const char *v;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            sharing_usage(stdout);
            return 1;
        } else if (strcmp(a, "--quiet") == 0) {
            o->quiet = 1;
            i++;
        } else if (IS("--strategies")) {
            if ((o->strategies = opt_value(argc, argv, &i, eq, "--strategies")) == NULL)
                return 2;
        } else if (IS("--batches")) {
            if ((v = opt_value(argc, argv, &i, eq, "--batches")) == NULL ||
                (o->n_batches = kv_cli_int_list("--batches", v, 1, 1 << 12, o->batches,
                                                SHARING_MAX_LIST)) < 1)
                return 2;
        } else if (IS("--prompt-lens")) {
            if ((v = opt_value(argc, argv, &i, eq, "--prompt-lens")) == NULL ||
                (o->n_prompts = kv_cli_int_list("--prompt-lens", v, 1, 1 << 30, o->prompts,
                                                SHARING_MAX_LIST)) < 1)
                return 2;
        } else if (IS("--new-tokens")) {
            if ((v = opt_value(argc, argv, &i, eq, "--new-tokens")) == NULL ||
                kv_cli_i32("--new-tokens", v, 1, 1 << 20, &o->new_tokens) != 0)
                return 2;
        } else if (IS("--out")) {
            if ((o->out = opt_value(argc, argv, &i, eq, "--out")) == NULL)
                return 2;
            if (o->out[0] == '\0') {
                fprintf(stderr, "kvlab: sharing: --out expects a file name\n");
                return 2;
            }
        } else {
            fprintf(stderr, "kvlab: sharing: unknown option '%s' (see 'kvlab sharing --help')\n",
                    kv_cli_q(a));
            return 2;
        }
#undef IS
    }
    return 0;
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

int kv_cmd_sharing(int argc, char **argv)
{
    struct sharing_opts o = {.new_tokens = 128, .out = "out/sharing.csv"};
    kv_cli_common_defaults(&o.c);
    o.batches[0] = 1, o.batches[1] = 2, o.batches[2] = 4, o.batches[3] = 8;
    o.n_batches = 4;
    o.prompts[0] = 1024, o.prompts[1] = 4096;
    o.n_prompts = 2;
    int rc = parse(&o, argc, argv);
    if (rc != 0)
        return rc == 1 ? 0 : 2;
    static const char *const unused[] = {"--strategy", "--batch", "--tokenizer", NULL};
    if (kv_cli_reject_unused("sharing", &o.c, unused) != 0)
        return 2;
    if (o.strategies == NULL) {
        fprintf(stderr, "kvlab: sharing needs --strategies LIST (see 'kvlab strategies')\n");
        return 2;
    }
    if (kv_cli_check_common(&o.c) != 0)
        return 2;
    struct kv_model *m = NULL;
    if (o.c.model_path != NULL) {
        if ((rc = kv_cli_load_model("sharing", o.c.model_path, &m)) != 0)
            return rc;
        o.c.model = m->cfg;
    }
    const struct kv_model_config *mc = &o.c.model;
    int32_t max_p = 0, max_b = 0;
    for (int32_t i = 0; i < o.n_prompts; i++)
        max_p = o.prompts[i] > max_p ? o.prompts[i] : max_p;
    for (int32_t i = 0; i < o.n_batches; i++)
        max_b = o.batches[i] > max_b ? o.batches[i] : max_b;
    rc = 2;
    struct kv_cli_strategy strat[SHARING_MAX_STRATEGIES];
    int32_t n_strat = 0;
    char *list = NULL;
    struct kv_csv_writer *w = NULL;
    int32_t *prompt = NULL, *tok_a = NULL, *tok_b = NULL;
    int64_t *steps = NULL;
    if ((int64_t)max_p + o.new_tokens > mc->max_len) {
        fprintf(stderr, "kvlab: sharing: the longest --prompt-lens + --new-tokens (%" PRId64
                        ") exceeds --max-len (%" PRId32 ")\n",
                (int64_t)max_p + o.new_tokens, mc->max_len);
        goto out;
    }
    struct kv_cache_config cc = {.n_layers = mc->n_layers, .batch = max_b,
                                 .n_kv_heads = mc->n_kv_heads,
                                 .head_dim = mc->dim / mc->n_heads, .max_len = mc->max_len};
    list = kv_alloc(strlen(o.strategies) + 1);
    if (list == NULL) {
        fprintf(stderr, "kvlab: sharing: %s\n", kv_status_str(KV_ERR_NOMEM));
        rc = 1;
        goto out;
    }
    strcpy(list, o.strategies);
    size_t biggest = 0; /* the cache bytes of the largest run */
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t != NULL;
         t = strtok_r(NULL, ",", &save)) {
        if (n_strat == SHARING_MAX_STRATEGIES) {
            fprintf(stderr, "kvlab: sharing: at most %d strategies\n", SHARING_MAX_STRATEGIES);
            goto out;
        }
        struct kv_cli_strategy *s = &strat[n_strat];
        if (kv_cli_strategy(&o.c, t, s) != 0)
            goto out;
        if (!(kv_strategy_caps(s->ops, &cc, s->params) & KV_CAP_KEEPS_HISTORY) ||
            !(kv_strategy_caps(s->ops, &cc, s->params) & KV_CAP_REORDER)) {
            fprintf(stderr, "kvlab: sharing: strategy '%s' does not support %s, which a shared "
                            "prompt needs\n", t,
                    kv_strategy_caps(s->ops, &cc, s->params) & KV_CAP_KEEPS_HISTORY
                        ? "reorder" : "keeping history");
            goto out;
        }
        size_t bytes = 0;
        if ((rc = kv_cli_check_strategy("sharing", s->ops, s->params, &cc,
                                        max_p + o.new_tokens, 1, &bytes)) != 0)
            goto out;
        rc = 2;
        biggest = bytes > biggest ? bytes : biggest;
        n_strat++;
    }
    if (n_strat == 0) {
        fprintf(stderr, "kvlab: sharing: --strategies names no strategy\n");
        goto out;
    }
    /* weights + the unshared prefill's activations (B x P tokens) + a cache */
    {
        const size_t hs = (size_t)(mc->dim / mc->n_heads), kvd = (size_t)mc->n_kv_heads * hs;
        const size_t per_tok = (4 * (size_t)mc->dim + 2 * kvd +
                                (mc->mlp ? 2 * (size_t)mc->hidden_dim : 0)) * sizeof(float);
        size_t act;
        const size_t f[3] = {(size_t)max_b, (size_t)max_p, per_tok};
        const size_t wb = kv_model_weight_bytes(mc);
        if (kv_mul_sizes(&act, 3, f) != KV_OK || act > SIZE_MAX - wb - biggest) {
            fprintf(stderr, "kvlab: sharing: the largest run needs more bytes than size_t "
                            "holds\n");
            goto out;
        }
        if (kv_cli_check_memory("the largest sharing run", wb + act + biggest) != 0)
            goto out;
    }
    const struct kv_cli_file outs[] = {{"--out", o.out}};
    const struct kv_cli_file ins[] = {{"--model", o.c.model_path}};
    if ((rc = kv_cli_check_outputs("sharing", outs, 1, ins, 1, KV_FILE_PARENT_MKDIR, 1)) != 0)
        goto out;

    /* From here on, failures are run-time failures (exit 1). */
    rc = 1;
    enum kv_status s;
    if (m == NULL && (s = kv_model_create_synthetic(&m, mc, o.c.seed)) != KV_OK) {
        fprintf(stderr, "kvlab: sharing: model: %s\n", kv_status_str(s));
        goto out;
    }
    const size_t n_prompt = (size_t)max_b * (size_t)max_p;
    prompt = kv_alloc(n_prompt * sizeof *prompt);
    tok_a = kv_alloc((size_t)max_b * (size_t)o.new_tokens * sizeof *tok_a);
    tok_b = kv_alloc((size_t)max_b * (size_t)o.new_tokens * sizeof *tok_b);
    steps = kv_alloc((size_t)o.new_tokens * sizeof *steps);
    if (prompt == NULL || tok_a == NULL || tok_b == NULL || steps == NULL ||
        kv_csv_writer_create(&w) != KV_OK) {
        fprintf(stderr, "kvlab: sharing: %s\n", kv_status_str(KV_ERR_NOMEM));
        goto out;
    }
    struct kv_sysinfo si;
    kv_sysinfo_collect(&si);
    kv_csv_writer_set_meta(w, "kvlab sharing", NULL);
    kv_csv_writer_set_meta(w, "schema", "1");
    kv_csv_writer_set_meta(w, "commit", si.commit);
    kv_csv_writer_set_meta(w, "date", si.date);
    kv_csv_writer_set_meta(w, "cpu", si.cpu);
    kv_csv_writer_set_metaf(w, "threads", "%d", o.c.threads);
    kv_csv_writer_set_meta(w, "blas_core", si.blas_core);
    kv_csv_writer_set_metaf(w, "seed", "%" PRIu64, o.c.seed);
    kv_csv_writer_set_meta(w, "strategies", o.strategies);
    if ((s = kv_csv_writer_set_header(w, sharing_cols, SHARING_NCOLS)) != KV_OK) {
        fprintf(stderr, "kvlab: sharing: %s\n", kv_status_str(s));
        goto out;
    }

    int failed = 0;
    for (int32_t si_ = 0; si_ < n_strat && !failed; si_++)
        for (int32_t pi = 0; pi < o.n_prompts && !failed; pi++)
            for (int32_t bi = 0; bi < o.n_batches && !failed; bi++) {
                const int32_t P = o.prompts[pi], B = o.batches[bi], N = o.new_tokens;
                /* one seeded prompt, the same in every row */
                uint64_t rs = o.c.seed ^ 0x5EEDF00Dull ^ (uint64_t)P;
                for (int32_t t = 0; t < P; t++)
                    prompt[t] = (int32_t)(kv_rng_next(&rs) % (uint64_t)mc->vocab_size);
                for (int32_t b = 1; b < B; b++)
                    memcpy(prompt + (size_t)b * P, prompt, (size_t)P * sizeof *prompt);
                for (int shared = 0; shared < 2 && !failed; shared++) {
                    struct kv_cache_config one = cc;
                    one.batch = B;
                    struct kv_cache *cache = NULL;
                    s = kv_cache_create(&cache, strat[si_].ops, &one, strat[si_].params);
                    struct kv_gen_params gp = {.batch = B, .prompt_len = P, .prompt = prompt,
                                               .new_tokens = N, .n_threads = o.c.threads,
                                               .shared_prompt = shared};
                    struct sharing_log lg = {.step_ns = steps};
                    int32_t *tok = shared ? tok_b : tok_a;
                    if (s == KV_OK)
                        s = kv_generate(m, cache, &gp, tok, log_step, &lg);
                    if (s != KV_OK) {
                        fprintf(stderr, "kvlab: sharing: %s, P %" PRId32 ", B %" PRId32
                                        "%s: %s\n", strat[si_].ops->name, P, B,
                                shared ? ", shared" : "", kv_status_str(s));
                        kv_cache_destroy(cache);
                        failed = 1;
                        break;
                    }
                    struct kv_cache_stats st;
                    kv_cache_stats(cache, &st);
                    const size_t copied = kv_cache_copied_bytes(cache);
                    char label[64], params[256];
                    kv_cache_label(cache, label, sizeof label);
                    kv_params_format(strat[si_].ops, strat[si_].params, params, sizeof params);
                    kv_cache_destroy(cache);
                    const int64_t prefill = steps[0];
                    int64_t med = 0, p95 = 0;
                    if (N > 1) {
                        med = kv_stats_median_i64(steps + 1, N - 1);
                        p95 = kv_stats_percentile_i64(steps + 1, N - 1, KV_STATS_P95);
                    }
                    const int match =
                        shared == 0 ||
                        memcmp(tok_a, tok_b, (size_t)B * (size_t)N * sizeof *tok_a) == 0;
                    char line[1024];
                    snprintf(line, sizeof line,
                             "%s,%s,%s,%" PRId32 ",%" PRId32 ",%d,%" PRId32 ",%" PRId32
                             ",%" PRId32 ",%" PRId32 ",%" PRId32 ",%" PRId32 ",%" PRId32
                             ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%.1f,%zu,%zu,%zu,%zu,%zu,"
                             "%zu,%zu,%d",
                             strat[si_].ops->name, label, params, P, B, shared, N,
                             mc->n_layers, mc->dim, mc->n_heads, mc->n_kv_heads,
                             mc->dim / mc->n_heads, o.c.threads, prefill, med, p95,
                             (double)med / B, st.resident, st.resident - st.spare, st.tokens,
                             st.shared, st.cow, copied, kv_peak_rss_bytes(), match);
                    if ((s = kv_csv_writer_add_row(w, line)) != KV_OK) {
                        fprintf(stderr, "kvlab: sharing: %s\n", kv_status_str(s));
                        failed = 1;
                        break;
                    }
                    if (!o.quiet)
                        kv_cli_progress("sharing: %-10s P %5" PRId32 " B %2" PRId32 " %-8s "
                                        "%12zu bytes resident, step %.3f ms (%.3f ms per "
                                        "sequence)%s\n", label, P, B,
                                        shared ? "shared" : "unshared", st.resident,
                                        (double)med / 1e6, (double)med / B / 1e6,
                                        match ? "" : "  TOKENS DIFFER");
                    if (!match) {
                        fprintf(stderr, "kvlab: sharing: %s, P %" PRId32 ", B %" PRId32
                                        ": the shared run's tokens differ from the unshared "
                                        "run's\n", label, P, B);
                        failed = 1;
                    }
                }
            }
    if (kv_csv_writer_row_count(w) > 0 && (s = kv_csv_writer_write(w, o.out)) != KV_OK) {
        fprintf(stderr, "kvlab: sharing: cannot write '%s': %s\n", kv_cli_q(o.out),
                kv_status_str(s));
        goto out;
    }
    if (!failed) {
        if (!o.quiet)
            kv_cli_progress("sharing: %" PRId32 " rows in %s\n", kv_csv_writer_row_count(w),
                            o.out);
        rc = 0;
    }

out:
    kv_csv_writer_destroy(w);
    kv_free(steps);
    kv_free(tok_b);
    kv_free(tok_a);
    kv_free(prompt);
    kv_free(list);
    kv_model_destroy(m);
    return rc;
}

/* transitional: on the command table, parsing its own argv */
const struct kv_cmd kv_cmd_sharing_def = {.name = "sharing", .summary = "memory and step time of B sequences sharing one prompt, write CSV", .legacy = kv_cmd_sharing};
