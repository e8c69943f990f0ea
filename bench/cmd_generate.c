/*
 * cmd_generate.c - `kvlab strategies` (list the registry) and `kvlab
 * generate` (one generation with one strategy, tokens and a timing
 * summary: greedy, or with --shared-prompt, --beams, --samples or
 * --draft-layers the modes of gen_modes.c, each refused in one line when
 * the strategy lacks the cache operation it needs).
 *
 * The design decision that matters: everything a run will need is checked
 * before anything is allocated - options, cross-checks, the length against
 * max-len, byte counts for overflow and the estimated memory against the
 * machine - so bad input is one line on stderr and exit 2, and only genuine
 * run-time failures (out of memory, a cache that refuses a token) exit 1.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "cli_io.h"
#include "cli_opts.h"
#include "cli_cmd.h"
#include "commands.h"
int kv_cmd_generate(int argc, char **argv);
int kv_cmd_strategies(int argc, char **argv);
#include "stats.h"
#include "tokenizer.h"

/* ------------------------------------------------------------------------ */
/* kvlab strategies                                                         */

/* The capability flags, for --verbose. */
static const struct {
    uint32_t cap;
    const char *name;
} cap_names[] = {
    {KV_CAP_KEEPS_HISTORY, "keeps-history"}, {KV_CAP_LOSSY, "lossy"},
    {KV_CAP_EVICTS, "evicts"},               {KV_CAP_PREALLOCATES, "preallocates"},
    {KV_CAP_CHUNKED_APPEND, "chunked-append"}, {KV_CAP_CROP, "crop"},
    {KV_CAP_FORK, "fork"},                   {KV_CAP_REORDER, "reorder"},
    {KV_CAP_SHARES_STORAGE, "shares-storage"}, {KV_CAP_BOUNDED, "bounded"},
};

/* One line per strategy: name, description, then its parameters' flags
 * with their defaults and its presets in brackets; --verbose adds the
 * capability flags and a line per parameter (help, range, memory). */
int kv_cmd_strategies(int argc, char **argv)
{
    int verbose = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: kvlab strategies [--verbose]\n  lists the registered cache "
                   "strategies, one per line with a description, their parameters\n"
                   "  (CLI flag and default) and presets; --verbose adds capabilities and "
                   "one line per parameter\n");
            return 0;
        }
        if (strcmp(argv[i], "--verbose") == 0) {
            verbose = 1;
            continue;
        }
        fprintf(stderr, "kvlab: strategies: unexpected argument '%s'\n", kv_cli_q(argv[i]));
        return 2;
    }
    for (int32_t i = 0; i < kv_strategy_count(); i++) {
        const struct kv_strategy_ops *ops = kv_strategy_at(i);
        printf("%-16s %s", ops->name, ops->description);
        if (ops->n_params > 0 || ops->n_presets > 0) {
            printf("  [");
            for (int32_t k = 0; k < ops->n_params; k++) {
                const struct kv_param *p = &ops->params[k];
                char def[64];
                if (p->type == KV_PARAM_TEXT)
                    snprintf(def, sizeof def, "%s", p->def_text);
                else
                    kv_param_value_str(p, p->def, def, sizeof def);
                printf("%s%s %s", k ? " " : "", p->flag, def);
            }
            for (int32_t k = 0; k < ops->n_presets; k++)
                printf("%s%s", k ? " " : ops->n_params ? "; presets " : "presets ",
                       ops->presets[k].name);
            printf("]");
        }
        printf("\n");
        if (!verbose)
            continue;
        printf("%-16s capabilities:", "");
        for (size_t c = 0; c < sizeof cap_names / sizeof cap_names[0]; c++)
            if (ops->caps & cap_names[c].cap)
                printf(" %s", cap_names[c].name);
        printf("\n");
        for (int32_t k = 0; k < ops->n_params; k++) {
            const struct kv_param *p = &ops->params[k];
            char range[128];
            kv_param_range_str(p, range, sizeof range);
            char def[64];
            if (p->type == KV_PARAM_TEXT)
                snprintf(def, sizeof def, "%s", p->def_text);
            else
                kv_param_value_str(p, p->def, def, sizeof def);
            printf("%-16s %s %s  %s; %s, default %s%s\n", "", p->flag,
                   p->type == KV_PARAM_TEXT ? "TEXT" : p->names ? "NAME" : "N", p->help, range,
                   def, p->scales_memory ? "; sizes the cache" : "");
        }
        for (int32_t k = 0; k < ops->n_presets; k++)
            printf("%-16s preset %s = %s\n", "", ops->presets[k].name, ops->presets[k].params);
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* kvlab generate                                                           */

static void generate_usage(FILE *f)
{
    fprintf(f,
            "usage: kvlab generate --strategy NAME [options]\n"
            "  --prompt-len P     prompt tokens per sequence (random, seeded; default 32)\n"
            "  --prompt TEXT      use TEXT, tokenized, as every sequence's prompt instead\n"
            "                     (byte-level for a 256-token vocabulary, else needs\n"
            "                     --tokenizer); a `text:` line then shows each output\n"
            "  --new-tokens N     greedy tokens to generate (default 32)\n"
            "  --batch B --seed S --threads T\n"
            "  model:  --layers --dim --heads --kv-heads --hidden --vocab --max-len\n"
            "          --mlp on|off   (default: DESIGN.md's synthetic model)\n"
            "  cache:  the strategy's parameters (kvlab strategies; listed below)\n"
            "  --model FILE.bin   a llama2.c checkpoint instead of the synthetic model\n"
            "                     (its header sets the model options)\n"
            "  --tokenizer FILE   a llama2.c tokenizer.bin for --prompt and `text:` lines\n"
            "  --prompt-tokens L  the prompt as comma-separated token ids (no tokenizer needed)\n"
            "  --shared-prompt    every sequence of the batch starts from the same prompt,\n"
            "                     prefilled once and shared (the cache's reorder; a paged\n"
            "                     cache shares its blocks, copy-on-write)\n"
            "generation modes (one at a time; each needs the cache operations it uses):\n"
            "  --beams K          beam search over K beams (length-normalised log-probs;\n"
            "                     reorder); prints every beam, best first\n"
            "  --samples N        N sampled continuations of one shared prompt (reorder)\n"
            "  --temperature T    sampling temperature, 0 = greedy (default 1)\n"
            "                     (--seed S seeds the samples too)\n"
            "  --draft-layers L   self-speculative greedy decoding: the first L layers draft,\n"
            "                     the full model verifies, the cache is cropped (crop)\n"
            "  --draft-tokens k   drafts per verification, 1..64 (default 4)\n"
            "Strategy parameters (each strategy takes those of its own table):\n");
    kv_cli_print_param_help(f);
}

/* Per-step measurements, filled by the on_step callback. */
struct gen_log {
    int64_t *step_ns;  /* (new_tokens) */
    int64_t *attn_ns;  /* (new_tokens) */
    struct kv_flops flops;
    size_t n_logits;   /* batch x vocab */
    int32_t nonfinite_step; /* first step with a NaN or Inf logit, or -1 */
};

static void log_step(void *user, int32_t step, const float *logits, const int32_t *next,
                     const struct kv_step_stats *st, int64_t step_ns)
{
    (void)next;
    struct gen_log *g = user;
    if (g->nonfinite_step < 0 && kv_first_nonfinite(logits, g->n_logits) < g->n_logits)
        g->nonfinite_step = step;
    g->step_ns[step] = step_ns;
    g->attn_ns[step] = st->attn_ns;
    g->flops.gemm += st->flops.gemm;
    g->flops.attn += st->flops.attn;
    g->flops.softmax += st->flops.softmax;
    g->flops.norm += st->flops.norm;
    g->flops.other += st->flops.other;
}

/* Prints bytes on one line: printable ASCII as is, the rest escaped. */
static void print_escaped(const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)b[i];
        if (ch == '\\')
            fputs("\\\\", stdout);
        else if (ch == '\n')
            fputs("\\n", stdout);
        else if (ch >= 0x20 && ch < 0x7f)
            putchar(ch);
        else
            printf("\\x%02x", ch);
    }
}

/* Rough upper bound of the bytes a run holds (weights, activations, cache). */
/* Rough upper bound of the bytes a run holds: weights, activations, and
 * the cache's bytes (kv_cli_check_strategy: the strategy's own bytes_for). */
static size_t estimate_bytes(const struct kv_model_config *m, int32_t batch,
                             int32_t tokens_per_call, size_t cache)
{
    size_t hs = (size_t)(m->dim / m->n_heads), kvd = (size_t)m->n_kv_heads * hs;
    size_t per_tok = 4 * (size_t)m->dim + 2 * kvd + (m->mlp ? 2 * (size_t)m->hidden_dim : 0);
    size_t act, total = kv_model_weight_bytes(m);
    const size_t fa[] = {(size_t)batch, (size_t)tokens_per_call, per_tok, sizeof(float)};
    if (kv_mul_sizes(&act, 4, fa) != KV_OK || act > SIZE_MAX - total ||
        cache > SIZE_MAX - total - act)
        return SIZE_MAX;
    return total + act + cache;
}

int kv_cmd_generate(int argc, char **argv)
{
    struct kv_cli_common c;
    kv_cli_common_defaults(&c);
    int32_t prompt_len = 32, new_tokens = 32;
    const char *text = NULL;  /* --prompt TEXT */
    const char *ptoks = NULL; /* --prompt-tokens ID,ID,... */
    int prompt_len_given = 0;
    int shared = 0;
    int32_t beams = 0, samples = 0, draft_layers = 0, draft_tokens = 4;
    int draft_tokens_given = 0, temperature_given = 0;
    double temperature = 1.0;
    for (int i = 1; i < argc;) {
        int r = kv_cli_parse_common(&c, argc, argv, &i);
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            generate_usage(stdout);
            return 0;
        }
        /* --prompt-len / --new-tokens, as "--opt value" or "--opt=value" */
        const char *eq = strchr(argv[i], '=');
        size_t nlen = eq != NULL ? (size_t)(eq - argv[i]) : strlen(argv[i]);
        int32_t *field = NULL;
        const char *name = NULL;
        if (nlen == 8 && strncmp(argv[i], "--prompt", 8) == 0) {
            if (eq == NULL && i + 1 >= argc) {
                fprintf(stderr, "kvlab: --prompt expects a value\n");
                return 2;
            }
            text = eq != NULL ? eq + 1 : argv[i + 1];
            i += eq != NULL ? 1 : 2;
            continue;
        }
        if (strcmp(argv[i], "--shared-prompt") == 0) {
            shared = 1;
            i++;
            continue;
        }
        if (nlen == 13 && strncmp(argv[i], "--temperature", 13) == 0) {
            if (eq == NULL && i + 1 >= argc) {
                fprintf(stderr, "kvlab: --temperature expects a value\n");
                return 2;
            }
            const char *v = eq != NULL ? eq + 1 : argv[i + 1];
            char *end = NULL;
            temperature = strtod(v, &end);
            if (end == v || *end != '\0' || !(temperature >= 0.0 && temperature <= 1000.0)) {
                fprintf(stderr, "kvlab: --temperature expects a number in [0, 1000], got '%s'\n",
                        kv_cli_q(v));
                return 2;
            }
            temperature_given = 1;
            i += eq != NULL ? 1 : 2;
            continue;
        }
        if (nlen == 15 && strncmp(argv[i], "--prompt-tokens", 15) == 0) {
            if (eq == NULL && i + 1 >= argc) {
                fprintf(stderr, "kvlab: --prompt-tokens expects a value\n");
                return 2;
            }
            ptoks = eq != NULL ? eq + 1 : argv[i + 1];
            i += eq != NULL ? 1 : 2;
            continue;
        }
        if (nlen == 12 && strncmp(argv[i], "--prompt-len", 12) == 0) {
            field = &prompt_len;
            name = "--prompt-len";
            prompt_len_given = 1;
        } else if (nlen == 12 && strncmp(argv[i], "--new-tokens", 12) == 0) {
            field = &new_tokens;
            name = "--new-tokens";
        } else if (nlen == 7 && strncmp(argv[i], "--beams", 7) == 0) {
            field = &beams;
            name = "--beams";
        } else if (nlen == 9 && strncmp(argv[i], "--samples", 9) == 0) {
            field = &samples;
            name = "--samples";
        } else if (nlen == 14 && strncmp(argv[i], "--draft-layers", 14) == 0) {
            field = &draft_layers;
            name = "--draft-layers";
        } else if (nlen == 14 && strncmp(argv[i], "--draft-tokens", 14) == 0) {
            field = &draft_tokens;
            name = "--draft-tokens";
            draft_tokens_given = 1;
        }
        if (field == NULL) {
            fprintf(stderr, "kvlab: generate: unknown option '%s' (see 'kvlab generate "
                            "--help')\n", kv_cli_q(argv[i]));
            return 2;
        }
        if (eq == NULL && i + 1 >= argc) {
            fprintf(stderr, "kvlab: %s expects a value\n", name);
            return 2;
        }
        if (kv_cli_i32(name, eq != NULL ? eq + 1 : argv[i + 1], 1,
                       field == &beams || field == &samples ? 1 << 16
                       : field == &draft_tokens           ? 64
                                                          : 1 << 30,
                       field) != 0)
            return 2;
        i += eq != NULL ? 1 : 2;
    }
    if (c.strategy == NULL) {
        fprintf(stderr, "kvlab: generate needs --strategy NAME (see 'kvlab strategies')\n");
        return 2;
    }
    if (kv_cli_check_common(&c) != 0)
        return 2;
    if (text != NULL && ptoks != NULL) {
        fprintf(stderr, "kvlab: give either --prompt or --prompt-tokens, not both\n");
        return 2;
    }
    if (prompt_len_given && (text != NULL || ptoks != NULL)) {
        fprintf(stderr, "kvlab: --prompt-len contradicts --prompt/--prompt-tokens, "
                        "which set the length themselves\n");
        return 2;
    }
    struct kv_cli_strategy strat;
    if (kv_cli_strategy(&c, c.strategy, &strat) != 0)
        return 2;
    const struct kv_strategy_ops *ops = strat.ops;
    if ((beams > 0) + (samples > 0) + (draft_layers > 0) > 1) {
        fprintf(stderr, "kvlab: generate: give one of --beams, --samples, --draft-layers\n");
        return 2;
    }
    if ((temperature_given && samples == 0) || (draft_tokens_given && draft_layers == 0)) {
        fprintf(stderr, "kvlab: generate: %s has no effect without %s\n",
                temperature_given && samples == 0 ? "--temperature" : "--draft-tokens",
                temperature_given && samples == 0 ? "--samples" : "--draft-layers");
        return 2;
    }
    if (beams > 0 || samples > 0) {
        static const char *const batch_opt[] = {"--batch", NULL};
        if (kv_cli_reject_unused(beams > 0 ? "generate --beams" : "generate --samples", &c,
                                 batch_opt) != 0)
            return 2; /* the beams or samples are the batch */
        c.batch = beams > 0 ? beams : samples;
        shared = 1;   /* both start from one prefilled prompt */
    }
    /* the cache operations each mode needs, by capability (this strategy
     * with these parameters) */
    const char *mode = beams > 0 ? "--beams" : samples > 0 ? "--samples"
                     : draft_layers > 0 ? "--draft-layers" : shared ? "--shared-prompt" : NULL;
    const uint32_t needs = draft_layers > 0 ? KV_CAP_KEEPS_HISTORY | KV_CAP_CROP | KV_CAP_CHUNKED_APPEND
                         : mode != NULL     ? KV_CAP_KEEPS_HISTORY | KV_CAP_REORDER
                                            : 0;
    {
        struct kv_cache_config probe = kv_cli_cache_config(&c);
        const uint32_t have = kv_strategy_caps(ops, &probe, strat.params);
        const uint32_t miss = needs & ~have;
        if (draft_layers > 0 && miss == 0 && (have & (KV_CAP_LOSSY | KV_CAP_EVICTS))) {
            /* its crop is refused once it has rounded or evicted tokens since */
            fprintf(stderr, "kvlab: generate: strategy '%s' can crop only within what it "
                            "holds exactly, not to any accepted length, which --draft-layers "
                            "needs\n", ops->name);
            return 2;
        }
        if (miss != 0) {
            fprintf(stderr, "kvlab: generate: strategy '%s' does not support %s, which %s needs\n",
                    ops->name,
                    miss & KV_CAP_REORDER   ? "reorder"
                    : miss & KV_CAP_CROP    ? "crop"
                    : miss & KV_CAP_KEEPS_HISTORY ? "keeping history"
                                            : "multi-token appends",
                    mode);
            return 2;
        }
    }

    /* The model: a checkpoint's header, or the synthetic configuration. */
    struct kv_model *m = NULL;
    struct kv_cache *cache = NULL;
    int32_t *prompt = NULL, *out_tokens = NULL, *ids = NULL;
    struct kv_tokenizer *tok = NULL;
    struct gen_log g = {0};
    double *beam_scores = NULL;
    enum kv_status s;
    if (c.model_path != NULL) {
        int lrc = kv_cli_load_model("generate", c.model_path, &m);
        if (lrc != 0)
            return lrc;
        c.model = m->cfg;
        c.cache.max_len = m->cfg.max_len;
    }
    const struct kv_model_config *mc = &c.model;
    int rc = 2;

    /* A text prompt: tokenize it (byte-level for a 256-token vocabulary). */
    if (c.tokenizer_path != NULL) {
        rc = kv_cli_load_tokenizer("generate", c.tokenizer_path, mc->vocab_size, &tok);
        if (rc != 0)
            goto out;
        rc = 2;
    } else if (text != NULL) {
        if (mc->vocab_size != 256) {
            fprintf(stderr, "kvlab: --prompt needs --tokenizer FILE for a vocabulary of %" PRId32
                            " tokens\n", mc->vocab_size);
            goto out;
        }
        if (kv_tokenizer_create_bytes(&tok) != KV_OK) {
            fprintf(stderr, "kvlab: generate: %s\n", kv_status_str(KV_ERR_NOMEM));
            rc = 1;
            goto out;
        }
    }
    if (text != NULL) {
        size_t len = strlen(text);
        int32_t n_ids = 0;
        if (len > (size_t)(1 << 30)) {
            fprintf(stderr, "kvlab: --prompt is longer than %d bytes\n", 1 << 30);
            goto out;
        }
        ids = kv_alloc((len + 3) * sizeof *ids);
        if (ids == NULL) {
            fprintf(stderr, "kvlab: generate: %s\n", kv_status_str(KV_ERR_NOMEM));
            rc = 1;
            goto out;
        }
        s = kv_tokenizer_encode(tok, text, len, kv_tokenizer_default_flags(tok), ids,
                                (int32_t)(len + 3), &n_ids);
        if (s != KV_OK || n_ids < 1) {
            fprintf(stderr, "kvlab: --prompt: %s\n",
                    s != KV_OK ? "the tokenizer cannot encode this text" : "empty prompt");
            goto out;
        }
        prompt_len = n_ids;
    }
    /* A prompt given as token ids: no tokenizer needed. */
    if (ptoks != NULL) {
        size_t n_max = 1;
        for (const char *p = ptoks; *p != '\0'; p++)
            n_max += *p == ',';
        if (n_max > (size_t)mc->max_len) {
            fprintf(stderr, "kvlab: --prompt-tokens has more than --max-len (%" PRId32
                            ") ids\n", mc->max_len);
            goto out;
        }
        ids = kv_alloc(n_max * sizeof *ids);
        if (ids == NULL) {
            fprintf(stderr, "kvlab: generate: %s\n", kv_status_str(KV_ERR_NOMEM));
            rc = 1;
            goto out;
        }
        int n_ids = kv_cli_int_list("--prompt-tokens", ptoks, 0, mc->vocab_size - 1, ids,
                                    (int)n_max);
        if (n_ids < 1)
            goto out;
        prompt_len = n_ids;
    }

    if ((int64_t)prompt_len + new_tokens > mc->max_len) {
        fprintf(stderr, "kvlab: %s + --new-tokens (%" PRId64 ") exceeds --max-len (%" PRId32 ")\n",
                text != NULL ? "the --prompt's tokens" : "--prompt-len",
                (int64_t)prompt_len + new_tokens, mc->max_len);
        goto out;
    }
    if (draft_layers >= mc->n_layers) {
        fprintf(stderr, "kvlab: --draft-layers (%" PRId32 ") must be smaller than the model's "
                        "layers (%" PRId32 ")\n", draft_layers, mc->n_layers);
        goto out;
    }
    if (beams > mc->vocab_size) {
        fprintf(stderr, "kvlab: --beams (%" PRId32 ") exceeds the vocabulary (%" PRId32 ")\n",
                beams, mc->vocab_size);
        goto out;
    }
    const int keeps = (ops->caps & KV_CAP_KEEPS_HISTORY) != 0;
    int32_t call_tokens = keeps ? prompt_len : prompt_len + new_tokens - 1;
    if ((int64_t)c.batch * call_tokens > INT32_MAX) {
        fprintf(stderr, "kvlab: --batch x tokens per forward (%" PRId64 ") exceeds %d\n",
                (int64_t)c.batch * call_tokens, INT32_MAX);
        goto out;
    }
    c.cache.n_layers = mc->n_layers;
    c.cache.batch = c.batch;
    c.cache.n_kv_heads = mc->n_kv_heads;
    c.cache.head_dim = mc->dim / mc->n_heads;
    c.cache.max_len = mc->max_len;
    /* the strategy's own parameters against the model that really runs (a
     * checkpoint's head_dim for --group), and its cache's bytes with every
     * size-bearing parameter (--window, --residual, preallocated slots) */
    size_t cache_bytes = 0;
    if ((rc = kv_cli_check_strategy("generate", ops, strat.params, &c.cache,
                                    prompt_len + new_tokens, 1, &cache_bytes)) != 0)
        goto out;
    rc = 2;
    if (kv_cli_check_memory("this run", estimate_bytes(mc, c.batch, call_tokens,
                                                       cache_bytes)) != 0)
        goto out;

    /* From here on, failures are run-time failures (exit 1) unless the
     * strategy itself rejects the configuration. */
    rc = 1;
    if (m == NULL) {
        s = kv_model_create_synthetic(&m, mc, c.seed);
        if (s != KV_OK) {
            fprintf(stderr, "kvlab: generate: model: %s\n", kv_status_str(s));
            goto out;
        }
    }
    s = kv_cache_create(&cache, ops, &c.cache, strat.params);
    if (s != KV_OK) {
        fprintf(stderr, "kvlab: strategy '%s' rejects this configuration: %s\n", ops->name,
                kv_status_str(s));
        rc = s == KV_ERR_NOMEM ? 1 : 2;
        goto out;
    }
    size_t n_prompt = (size_t)c.batch * (size_t)prompt_len;
    size_t n_out = (size_t)c.batch * (size_t)new_tokens;
    prompt = kv_alloc(n_prompt * sizeof *prompt);
    out_tokens = kv_alloc(n_out * sizeof *out_tokens);
    g.step_ns = kv_alloc((size_t)new_tokens * sizeof *g.step_ns);
    g.attn_ns = kv_alloc((size_t)new_tokens * sizeof *g.attn_ns);
    if (prompt == NULL || out_tokens == NULL || g.step_ns == NULL || g.attn_ns == NULL) {
        fprintf(stderr, "kvlab: generate: %s\n", kv_status_str(KV_ERR_NOMEM));
        goto out;
    }
    uint64_t rs = c.seed ^ 0x5EEDF00Dull;
    for (size_t i = 0; i < n_prompt; i++)
        prompt[i] = ids != NULL ? ids[i % (size_t)prompt_len]
                                : (int32_t)(kv_rng_next(&rs) % (uint64_t)mc->vocab_size);

    struct kv_gen_params gp = {
        .batch = c.batch,
        .prompt_len = prompt_len,
        .prompt = prompt,
        .pad = NULL,
        .new_tokens = new_tokens,
        .n_threads = c.threads,
        .shared_prompt = shared,
    };
    g.n_logits = (size_t)c.batch * (size_t)mc->vocab_size;
    g.nonfinite_step = -1;
    struct kv_spec_stats spec = {0};
    int64_t spec_ns = 0;
    if (beams > 0) {
        beam_scores = kv_alloc((size_t)beams * sizeof *beam_scores);
        s = beam_scores == NULL ? KV_ERR_NOMEM
                                : kv_generate_beams(m, cache, &gp, out_tokens, beam_scores,
                                                    log_step, &g);
    } else if (samples > 0) {
        s = kv_generate_samples(m, cache, &gp, (float)temperature, c.seed, out_tokens, log_step,
                                &g);
    } else if (draft_layers > 0) {
        const int64_t t0 = kv_now_ns();
        s = kv_generate_speculative(m, cache, &gp, draft_layers, draft_tokens, out_tokens, &spec);
        spec_ns = kv_now_ns() - t0;
    } else {
        s = kv_generate(m, cache, &gp, out_tokens, log_step, &g);
    }
    if (s != KV_OK) {
        fprintf(stderr, "kvlab: generate: %s\n", kv_status_str(s));
        goto out;
    }
    if (g.nonfinite_step >= 0) { /* greedy tokens of NaN logits mean nothing */
        fprintf(stderr, "kvlab: generate: the logits of step %" PRId32 " are not finite (NaN "
                        "or infinity); no tokens printed\n", g.nonfinite_step);
        goto out;
    }

    for (int32_t b = 0; b < c.batch; b++) {
        if (beam_scores != NULL)
            printf("beam %" PRId32 " score %.6f ", b, beam_scores[b]);
        printf("tokens:");
        for (int32_t t = 0; t < new_tokens; t++)
            printf(" %" PRId32, out_tokens[(size_t)b * new_tokens + t]);
        printf("\n");
    }
    for (int32_t b = 0; tok != NULL && b < c.batch; b++) {
        printf("text: ");
        int32_t prev = prompt[(size_t)b * prompt_len + prompt_len - 1];
        for (int32_t t = 0; t < new_tokens; t++) {
            int32_t id = out_tokens[(size_t)b * new_tokens + t];
            const char *bytes;
            size_t nb = kv_tokenizer_decode(tok, prev, id, &bytes);
            print_escaped(bytes, nb);
            prev = id;
        }
        printf("\n");
    }
    printf("strategy %s: batch %" PRId32 ", prompt %" PRId32 ", %" PRId32
           " new tokens, %" PRId32 " threads, %" PRId32 " layers, dim %" PRId32 "\n",
           ops->name, c.batch, prompt_len, new_tokens, c.threads, mc->n_layers, mc->dim);
    if (beams > 0)
        printf("  beam search   %" PRId32 " beams, scores: mean log-probability per token\n",
               beams);
    if (samples > 0)
        printf("  sampling      %" PRId32 " samples, temperature %g, seed %" PRIu64 "\n", samples,
               temperature, c.seed);
    if (draft_layers > 0) {
        printf("  speculation   draft of %" PRId32 " layers, up to %" PRId32 " drafts per round: "
               "%" PRId64 " rounds, %" PRId64 " of %" PRId64 " drafts accepted (rate %.3f; "
               "per sequence %.3f)\n", draft_layers, draft_tokens, spec.rounds, spec.accepted,
               spec.proposed,
               spec.proposed > 0 ? (double)spec.accepted / (double)spec.proposed : 0.0,
               spec.proposed > 0 ? (double)spec.accepted_seq / (double)spec.proposed : 0.0);
        printf("  total         %.3f ms for prefill and %" PRId32 " tokens\n",
               (double)spec_ns / 1e6, new_tokens);
    } else {
        printf("  prefill       %.3f ms\n", (double)g.step_ns[0] / 1e6);
    }
    if (new_tokens > 1 && draft_layers == 0) {
        int32_t nd = new_tokens - 1;
        double med = (double)kv_stats_median_i64(g.step_ns + 1, nd) / 1e6;
        double p95 = (double)kv_stats_percentile_i64(g.step_ns + 1, nd, KV_STATS_P95) / 1e6;
        double att = (double)kv_stats_median_i64(g.attn_ns + 1, nd) / 1e6;
        printf("  decode step   %.3f ms median, %.3f ms p95 over %" PRId32
               " steps (attention %.3f ms median)\n", med, p95, nd, att);
    }
    printf("  cache         %zu bytes resident, %zu bytes copied\n",
           kv_cache_resident_bytes(cache), kv_cache_copied_bytes(cache));
    printf("  flops         %" PRId64 " total, %" PRId64 " attention, %" PRId64 " gemm\n",
           kv_flops_total(&g.flops), g.flops.attn, g.flops.gemm);
    rc = 0;

out:
    kv_free(beam_scores);
    kv_free(g.attn_ns);
    kv_free(g.step_ns);
    kv_free(out_tokens);
    kv_free(prompt);
    kv_free(ids);
    kv_tokenizer_destroy(tok);
    kv_cache_destroy(cache);
    kv_model_destroy(m);
    return rc;
}

/* transitional: on the command table, parsing its own argv */
const struct kv_cmd kv_cmd_strategies_def = {.name = "strategies", .summary = "list the registered cache strategies", .legacy = kv_cmd_strategies};

/* transitional: on the command table, parsing its own argv */
const struct kv_cmd kv_cmd_generate_def = {.name = "generate", .summary = "run one generation and print tokens and a timing summary", .legacy = kv_cmd_generate};
