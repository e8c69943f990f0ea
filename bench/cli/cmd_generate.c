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
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/checkpoint.h"
#include "cli_io.h"
#include "cli_opts.h"
#include "cli_cmd.h"
#include "commands.h"
#include "../measure/stats.h"
#include "../model/tokenizer.h"

/* ------------------------------------------------------------------------ */
/* kvlab strategies                                                         */



/* One line per strategy: name, description, then its parameters' flags
 * with their defaults and its presets in brackets; --verbose adds the
 * capability flags and a line per parameter (help, range, memory). */
struct strategies_opts {
    int verbose;
};

static const struct kv_opt strategies_opts[] = {
    {.name = "--verbose", .kind = KV_OPT_FLAG, .off = offsetof(struct strategies_opts, verbose),
     .help = "add the capability flags and one line per parameter (help, range, memory)"},
};

static int strategies_run(struct kv_cmd_ctx *x)
{
    const int verbose = ((const struct strategies_opts *)x->opts)->verbose;
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
        for (uint32_t bit = 1; bit & KV_CAP_ALL; bit <<= 1)
            if (ops->caps & bit)
                printf(" %s", kv_cap_name(bit));
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

/* The generation modes: bit k is generate_modes[k]. */
enum { GEN_GREEDY = 1u << 0, GEN_BEAMS = 1u << 1, GEN_SAMPLES = 1u << 2, GEN_SPEC = 1u << 3 };
static const char *const generate_modes[] = {
    "in greedy decoding (without --beams, --samples or --draft-layers)", "with --beams",
    "with --samples", "with --draft-layers"};

struct generate_opts {
    int32_t prompt_len, new_tokens;
    const char *text;  /* --prompt TEXT */
    const char *ptoks; /* --prompt-tokens ID,ID,... */
    int shared;
    int32_t beams, samples, draft_layers, draft_tokens;
    double temperature;
};

#define G(field) offsetof(struct generate_opts, field)
static const struct kv_opt generate_opts[] = {
    {.name = "--prompt-len", .kind = KV_OPT_INT, .off = G(prompt_len), .lo = 1, .hi = 1 << 30,
     .meta = "P", .help = "prompt tokens per sequence (random, seeded)"},
    {.name = "--prompt", .kind = KV_OPT_TEXT, .off = G(text), .meta = "TEXT",
     .help = "TEXT, tokenized, as every sequence's prompt (byte-level for a 256-token "
             "vocabulary, else needs --tokenizer); a `text:` line then shows each output"},
    {.name = "--prompt-tokens", .kind = KV_OPT_TEXT, .off = G(ptoks), .meta = "IDS",
     .help = "the prompt as comma-separated token ids (no tokenizer needed)"},
    {.name = "--new-tokens", .kind = KV_OPT_INT, .off = G(new_tokens), .lo = 1, .hi = 1 << 30,
     .meta = "N", .help = "tokens to generate"},
    {.name = "--shared-prompt", .kind = KV_OPT_FLAG, .off = G(shared), .modes = GEN_GREEDY,
     .help = "every sequence starts from one prompt, prefilled once and shared (the cache's "
             "reorder; a paged cache shares its blocks, copy-on-write)"},
    {.name = "--beams", .kind = KV_OPT_INT, .off = G(beams), .lo = 1, .hi = 1 << 16,
     .meta = "K", .help = "beam search over K beams (length-normalised log-probs; reorder)"},
    {.name = "--samples", .kind = KV_OPT_INT, .off = G(samples), .lo = 1, .hi = 1 << 16,
     .meta = "N", .help = "N sampled continuations of one shared prompt (reorder; --seed seeds "
                          "them)"},
    {.name = "--temperature", .kind = KV_OPT_FLOAT, .off = G(temperature), .flo = 0.0,
     .fhi = 1000.0, .modes = GEN_SAMPLES, .meta = "T", .help = "sampling temperature, 0 = greedy"},
    {.name = "--draft-layers", .kind = KV_OPT_INT, .off = G(draft_layers), .lo = 1,
     .hi = 1 << 20, .meta = "L", .help = "self-speculative greedy decoding: the first L layers "
                                        "draft, the full model verifies, the cache is cropped"},
    {.name = "--draft-tokens", .kind = KV_OPT_INT, .off = G(draft_tokens), .lo = 1, .hi = 64,
     .modes = GEN_SPEC, .meta = "k", .help = "drafts per verification"},
};
#undef G

static void generate_defaults(void *opts, struct kv_cli_common *c)
{
    (void)c;
    struct generate_opts *o = opts;
    o->prompt_len = 32;
    o->new_tokens = 32;
    o->draft_tokens = 4;
    o->temperature = 1.0;
}

static uint32_t generate_mode(const struct kv_cmd_ctx *x)
{
    const struct generate_opts *o = x->opts;
    return o->beams > 0 ? GEN_BEAMS : o->samples > 0 ? GEN_SAMPLES
         : o->draft_layers > 0 ? GEN_SPEC : GEN_GREEDY;
}

static int generate_check(struct kv_cmd_ctx *x)
{
    const struct generate_opts *o = x->opts;
    if (x->c.strategy == NULL) {
        fprintf(stderr, "kvlab: generate: needs --strategy NAME (see 'kvlab strategies')\n");
        return 2;
    }
    if ((o->beams > 0) + (o->samples > 0) + (o->draft_layers > 0) > 1) {
        fprintf(stderr, "kvlab: generate: give one of --beams, --samples, --draft-layers\n");
        return 2;
    }
    if (o->text != NULL && o->ptoks != NULL) {
        fprintf(stderr, "kvlab: generate: give either --prompt or --prompt-tokens, not both\n");
        return 2;
    }
    if (kv_cmd_given(x, "--prompt-len") && (o->text != NULL || o->ptoks != NULL)) {
        fprintf(stderr, "kvlab: generate: --prompt-len contradicts --prompt/--prompt-tokens, "
                        "which set the length themselves\n");
        return 2;
    }
    if ((o->beams > 0 || o->samples > 0) && kv_cmd_given(x, "--batch")) {
        fprintf(stderr, "kvlab: generate: --batch has no effect with %s (the %s are the "
                        "batch)\n", o->beams > 0 ? "--beams" : "--samples",
                o->beams > 0 ? "beams" : "samples");
        return 2;
    }
    return 0;
}

/* What one generation holds, from the options to the tokens it produced;
 * gen_free releases it. */
struct gen_state {
    struct kv_cli_common c;        /* the options, the model's shape once known */
    const struct generate_opts *o;
    int32_t prompt_len;            /* --prompt-len, or the given prompt's tokens */
    int shared;                    /* one prefilled prompt (also beams, samples) */
    struct kv_cli_strategy strat;
    struct kv_model *m;
    struct kv_cache *cache;
    struct kv_tokenizer *tok;      /* for --prompt or --tokenizer: then a text line */
    int32_t *ids;                  /* the given prompt's ids, or NULL (random) */
    int32_t *prompt, *out_tokens;  /* (batch, prompt_len), (batch, new_tokens) */
    struct gen_log g;
    double *beam_scores;           /* (beams) */
    struct kv_spec_stats spec;     /* --draft-layers */
    int64_t spec_ns;
};

/* The strategy, and the cache operations the mode needs from it, by
 * capability (this strategy with these parameters). Returns the exit
 * status. */
static int gen_strategy(struct gen_state *G)
{
    const struct generate_opts *o = G->o;
    struct kv_cli_common *c = &G->c;
    if (kv_cli_strategy(c, c->strategy, &G->strat) != 0 || G->strat.ops == NULL)
        return 2;
    const struct kv_strategy_ops *ops = G->strat.ops;
    if (o->beams > 0 || o->samples > 0) {
        c->batch = o->beams > 0 ? o->beams : o->samples;
        G->shared = 1;   /* both start from one prefilled prompt */
    }
    const char *mode = o->beams > 0 ? "--beams" : o->samples > 0 ? "--samples"
                     : o->draft_layers > 0 ? "--draft-layers" : G->shared ? "--shared-prompt"
                                                                          : NULL;
    const uint32_t needs = o->draft_layers > 0
                               ? KV_CAP_KEEPS_HISTORY | KV_CAP_CROP | KV_CAP_CHUNKED_APPEND
                         : mode != NULL ? KV_CAP_KEEPS_HISTORY | KV_CAP_REORDER
                                        : 0;
    struct kv_cache_config probe = kv_cli_cache_config(c);
    const uint32_t have = kv_strategy_caps(ops, &probe, G->strat.params);
    const uint32_t miss = needs & ~have;
    if (o->draft_layers > 0 && miss == 0 && (have & (KV_CAP_LOSSY | KV_CAP_EVICTS))) {
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
    return 0;
}

/* The model's shape: a checkpoint's header (the checkpoint loaded), or the
 * synthetic configuration of the options. Returns the exit status. */
static int gen_model_shape(struct gen_state *G)
{
    struct kv_cli_common *c = &G->c;
    if (c->model_path == NULL)
        return 0;
    int lrc = kv_cli_load_model("generate", c->model_path, &G->m);
    if (lrc != 0)
        return lrc;
    c->model = G->m->cfg;
    c->cache.max_len = G->m->cfg.max_len;
    return 0;
}

/* The prompt's ids when one is given: a text, tokenized (byte-level for a
 * 256-token vocabulary), or token ids; else the prompt stays random.
 * Returns the exit status. */
static int gen_prompt(struct gen_state *G)
{
    const char *text = G->o->text, *ptoks = G->o->ptoks;
    const struct kv_model_config *mc = &G->c.model;
    if (G->c.tokenizer_path != NULL) {
        int rc = kv_cli_load_tokenizer("generate", G->c.tokenizer_path, mc->vocab_size, &G->tok);
        if (rc != 0)
            return rc;
    } else if (text != NULL) {
        if (mc->vocab_size != 256) {
            fprintf(stderr, "kvlab: --prompt needs --tokenizer FILE for a vocabulary of %" PRId32
                            " tokens\n", mc->vocab_size);
            return 2;
        }
        if (kv_tokenizer_create_bytes(&G->tok) != KV_OK) {
            fprintf(stderr, "kvlab: generate: %s\n", kv_status_str(KV_ERR_NOMEM));
            return 1;
        }
    }
    if (text != NULL) {
        size_t len = strlen(text);
        int32_t n_ids = 0;
        if (len > (size_t)(1 << 30)) {
            fprintf(stderr, "kvlab: --prompt is longer than %d bytes\n", 1 << 30);
            return 2;
        }
        G->ids = kv_alloc((len + 3) * sizeof *G->ids);
        if (G->ids == NULL) {
            fprintf(stderr, "kvlab: generate: %s\n", kv_status_str(KV_ERR_NOMEM));
            return 1;
        }
        enum kv_status s = kv_tokenizer_encode(G->tok, text, len,
                                               kv_tokenizer_default_flags(G->tok), G->ids,
                                               (int32_t)(len + 3), &n_ids);
        if (s != KV_OK || n_ids < 1) {
            fprintf(stderr, "kvlab: --prompt: %s\n",
                    s != KV_OK ? "the tokenizer cannot encode this text" : "empty prompt");
            return 2;
        }
        G->prompt_len = n_ids;
    }
    /* A prompt given as token ids: no tokenizer needed. */
    if (ptoks != NULL) {
        size_t n_max = 1;
        for (const char *p = ptoks; *p != '\0'; p++)
            n_max += *p == ',';
        if (n_max > (size_t)mc->max_len) {
            fprintf(stderr, "kvlab: --prompt-tokens has more than --max-len (%" PRId32
                            ") ids\n", mc->max_len);
            return 2;
        }
        G->ids = kv_alloc(n_max * sizeof *G->ids);
        if (G->ids == NULL) {
            fprintf(stderr, "kvlab: generate: %s\n", kv_status_str(KV_ERR_NOMEM));
            return 1;
        }
        int n_ids = kv_cli_int_list("--prompt-tokens", ptoks, 0, mc->vocab_size - 1, G->ids,
                                    (int)n_max);
        if (n_ids < 1)
            return 2;
        G->prompt_len = n_ids;
    }
    return 0;
}

/* The run against the model: lengths, the mode's counts, the cache's shape
 * and the strategy's parameters and bytes, then the estimated memory.
 * Returns the exit status. */
static int gen_check_size(struct gen_state *G)
{
    const struct generate_opts *o = G->o;
    struct kv_cli_common *c = &G->c;
    const struct kv_model_config *mc = &c->model;
    const int32_t prompt_len = G->prompt_len, new_tokens = o->new_tokens;
    if ((int64_t)prompt_len + new_tokens > mc->max_len) {
        fprintf(stderr, "kvlab: %s + --new-tokens (%" PRId64 ") exceeds --max-len (%" PRId32 ")\n",
                o->text != NULL ? "the --prompt's tokens" : "--prompt-len",
                (int64_t)prompt_len + new_tokens, mc->max_len);
        return 2;
    }
    if (o->draft_layers > mc->n_layers) {
        fprintf(stderr, "kvlab: generate: --draft-layers (%" PRId32 ") exceeds the model's "
                        "layers (%" PRId32 ")\n", o->draft_layers, mc->n_layers);
        return 2;
    }
    if (o->beams > mc->vocab_size) {
        fprintf(stderr, "kvlab: --beams (%" PRId32 ") exceeds the vocabulary (%" PRId32 ")\n",
                o->beams, mc->vocab_size);
        return 2;
    }
    if (G->strat.ops == NULL) /* gen_strategy resolved it */
        return 2;
    const int keeps = (G->strat.ops->caps & KV_CAP_KEEPS_HISTORY) != 0;
    int32_t call_tokens = keeps ? prompt_len : prompt_len + new_tokens - 1;
    if ((int64_t)c->batch * call_tokens > INT32_MAX) {
        fprintf(stderr, "kvlab: --batch x tokens per forward (%" PRId64 ") exceeds %d\n",
                (int64_t)c->batch * call_tokens, INT32_MAX);
        return 2;
    }
    c->cache.n_layers = mc->n_layers;
    c->cache.batch = c->batch;
    c->cache.n_kv_heads = mc->n_kv_heads;
    c->cache.head_dim = mc->dim / mc->n_heads;
    c->cache.max_len = mc->max_len;
    /* the strategy's own parameters against the model that really runs (a
     * checkpoint's head_dim for --group), and its cache's bytes with every
     * size-bearing parameter (--window, --residual, preallocated slots) */
    size_t cache_bytes = 0;
    int rc = kv_cli_check_strategy("generate", G->strat.ops, G->strat.params, &c->cache,
                                   prompt_len + new_tokens, 1, &cache_bytes);
    if (rc != 0)
        return rc;
    if (kv_cli_check_memory("this run", estimate_bytes(mc, c->batch, call_tokens,
                                                       cache_bytes)) != 0)
        return 2;
    return 0;
}

/* The synthetic model (unless a checkpoint is loaded), the cache, the
 * token arrays and the prompt. From here on, failures are run-time
 * failures (exit 1) unless the strategy itself rejects the configuration.
 * Returns the exit status. */
static int gen_alloc(struct gen_state *G)
{
    const struct kv_cli_common *c = &G->c;
    const struct kv_model_config *mc = &c->model;
    const struct kv_strategy_ops *ops = G->strat.ops;
    const int32_t prompt_len = G->prompt_len, new_tokens = G->o->new_tokens;
    enum kv_status s;
    if (G->m == NULL) {
        s = kv_model_create_synthetic(&G->m, mc, c->seed);
        if (s != KV_OK) {
            fprintf(stderr, "kvlab: generate: model: %s\n", kv_status_str(s));
            return 1;
        }
    }
    s = kv_cache_create(&G->cache, ops, &c->cache, G->strat.params);
    if (s != KV_OK) {
        fprintf(stderr, "kvlab: strategy '%s' rejects this configuration: %s\n", ops->name,
                kv_status_str(s));
        return s == KV_ERR_NOMEM ? 1 : 2;
    }
    size_t n_prompt = (size_t)c->batch * (size_t)prompt_len;
    size_t n_out = (size_t)c->batch * (size_t)new_tokens;
    G->prompt = kv_alloc(n_prompt * sizeof *G->prompt);
    G->out_tokens = kv_alloc(n_out * sizeof *G->out_tokens);
    G->g.step_ns = kv_alloc((size_t)new_tokens * sizeof *G->g.step_ns);
    G->g.attn_ns = kv_alloc((size_t)new_tokens * sizeof *G->g.attn_ns);
    if (G->prompt == NULL || G->out_tokens == NULL || G->g.step_ns == NULL ||
        G->g.attn_ns == NULL) {
        fprintf(stderr, "kvlab: generate: %s\n", kv_status_str(KV_ERR_NOMEM));
        return 1;
    }
    uint64_t rs = c->seed ^ 0x5EEDF00Dull;
    for (size_t i = 0; i < n_prompt; i++)
        G->prompt[i] = G->ids != NULL ? G->ids[i % (size_t)prompt_len]
                                      : (int32_t)(kv_rng_next(&rs) % (uint64_t)mc->vocab_size);
    return 0;
}

/* The generation in its mode: greedy, beams, samples or speculative.
 * Returns the exit status. */
static int gen_generate(struct gen_state *G)
{
    const struct generate_opts *o = G->o;
    const struct kv_cli_common *c = &G->c;
    struct gen_log *g = &G->g;
    struct kv_gen_params gp = {
        .batch = c->batch,
        .prompt_len = G->prompt_len,
        .prompt = G->prompt,
        .pad = NULL,
        .new_tokens = o->new_tokens,
        .n_threads = c->threads,
        .shared_prompt = G->shared,
    };
    g->n_logits = (size_t)c->batch * (size_t)c->model.vocab_size;
    g->nonfinite_step = -1;
    enum kv_status s;
    if (o->beams > 0) {
        G->beam_scores = kv_alloc((size_t)o->beams * sizeof *G->beam_scores);
        s = G->beam_scores == NULL ? KV_ERR_NOMEM
                                   : kv_generate_beams(G->m, G->cache, &gp, G->out_tokens,
                                                       G->beam_scores, log_step, g);
    } else if (o->samples > 0) {
        s = kv_generate_samples(G->m, G->cache, &gp, (float)o->temperature, c->seed,
                                G->out_tokens, log_step, g);
    } else if (o->draft_layers > 0) {
        const int64_t t0 = kv_now_ns();
        s = kv_generate_speculative(G->m, G->cache, &gp, o->draft_layers, o->draft_tokens,
                                    G->out_tokens, &G->spec);
        G->spec_ns = kv_now_ns() - t0;
    } else {
        s = kv_generate(G->m, G->cache, &gp, G->out_tokens, log_step, g);
    }
    if (s == KV_ERR_FULL) {
        kv_cli_cache_full("generate", G->strat.ops, G->strat.params);
        return 1;
    }
    if (s != KV_OK) {
        fprintf(stderr, "kvlab: generate: %s\n", kv_status_str(s));
        return 1;
    }
    if (g->nonfinite_step >= 0) { /* greedy tokens of NaN logits mean nothing */
        fprintf(stderr, "kvlab: generate: the logits of step %" PRId32 " are not finite (NaN "
                        "or infinity); no tokens printed\n", g->nonfinite_step);
        return 1;
    }
    return 0;
}

/* The tokens of every sequence (and their text with a tokenizer), then the
 * run's summary: its mode, times, cache and FLOPs. */
static void gen_print(const struct gen_state *G)
{
    const struct generate_opts *o = G->o;
    const struct kv_cli_common *c = &G->c;
    const struct kv_model_config *mc = &c->model;
    const struct gen_log *g = &G->g;
    const struct kv_spec_stats *spec = &G->spec;
    const int32_t prompt_len = G->prompt_len, new_tokens = o->new_tokens;
    for (int32_t b = 0; b < c->batch; b++) {
        if (G->beam_scores != NULL)
            printf("beam %" PRId32 " score %.6f ", b, G->beam_scores[b]);
        printf("tokens:");
        for (int32_t t = 0; t < new_tokens; t++)
            printf(" %" PRId32, G->out_tokens[(size_t)b * new_tokens + t]);
        printf("\n");
    }
    for (int32_t b = 0; G->tok != NULL && b < c->batch; b++) {
        printf("text: ");
        int32_t prev = G->prompt[(size_t)b * prompt_len + prompt_len - 1];
        for (int32_t t = 0; t < new_tokens; t++) {
            int32_t id = G->out_tokens[(size_t)b * new_tokens + t];
            const char *bytes;
            size_t nb = kv_tokenizer_decode(G->tok, prev, id, &bytes);
            print_escaped(bytes, nb);
            prev = id;
        }
        printf("\n");
    }
    printf("strategy %s: batch %" PRId32 ", prompt %" PRId32 ", %" PRId32
           " new tokens, %" PRId32 " threads, %" PRId32 " layers, dim %" PRId32 "\n",
           G->strat.ops->name, c->batch, prompt_len, new_tokens, c->threads, mc->n_layers,
           mc->dim);
    if (o->beams > 0)
        printf("  beam search   %" PRId32 " beams, scores: mean log-probability per token\n",
               o->beams);
    if (o->samples > 0)
        printf("  sampling      %" PRId32 " samples, temperature %g, seed %" PRIu64 "\n",
               o->samples, o->temperature, c->seed);
    if (o->draft_layers > 0) {
        printf("  speculation   draft of %" PRId32 " layers, up to %" PRId32 " drafts per round: "
               "%" PRId64 " rounds, %" PRId64 " of %" PRId64 " drafts accepted (rate %.3f; "
               "per sequence %.3f)\n", o->draft_layers, o->draft_tokens, spec->rounds,
               spec->accepted, spec->proposed,
               spec->proposed > 0 ? (double)spec->accepted / (double)spec->proposed : 0.0,
               spec->proposed > 0 ? (double)spec->accepted_seq / (double)spec->proposed : 0.0);
        printf("  total         %.3f ms for prefill and %" PRId32 " tokens\n",
               (double)G->spec_ns / 1e6, new_tokens);
    } else {
        printf("  prefill       %.3f ms\n", (double)g->step_ns[0] / 1e6);
    }
    if (new_tokens > 1 && o->draft_layers == 0) {
        int32_t nd = new_tokens - 1;
        double med = (double)kv_stats_median_i64(g->step_ns + 1, nd) / 1e6;
        double p95 = (double)kv_stats_percentile_i64(g->step_ns + 1, nd, KV_STATS_P95) / 1e6;
        double att = (double)kv_stats_median_i64(g->attn_ns + 1, nd) / 1e6;
        printf("  decode step   %.3f ms median, %.3f ms p95 over %" PRId32
               " steps (attention %.3f ms median)\n", med, p95, nd, att);
    }
    printf("  cache         %zu bytes resident, %zu bytes copied\n",
           kv_cache_resident_bytes(G->cache), kv_cache_copied_bytes(G->cache));
    /* speculation counts its own (draft and verification calls) */
    const struct kv_flops *fl = o->draft_layers > 0 ? &spec->flops : &g->flops;
    printf("  flops         %" PRId64 " total, %" PRId64 " attention, %" PRId64 " gemm\n",
           kv_flops_total(fl), fl->attn, fl->gemm);
}

static void gen_free(struct gen_state *G)
{
    kv_free(G->beam_scores);
    kv_free(G->g.attn_ns);
    kv_free(G->g.step_ns);
    kv_free(G->out_tokens);
    kv_free(G->prompt);
    kv_free(G->ids);
    kv_tokenizer_destroy(G->tok);
    kv_cache_destroy(G->cache);
    kv_model_destroy(G->m);
}

/* Check everything before anything is allocated, then generate and print:
 * each step only after the one before it succeeded. */
static int generate_run(struct kv_cmd_ctx *x)
{
    const struct generate_opts *o = x->opts;
    struct gen_state G = {.c = x->c, .o = o, .prompt_len = o->prompt_len, .shared = o->shared};
    int rc = gen_strategy(&G);
    if (rc == 0)
        rc = gen_model_shape(&G);
    if (rc == 0)
        rc = gen_prompt(&G);
    if (rc == 0)
        rc = gen_check_size(&G);
    if (rc == 0)
        rc = gen_alloc(&G);
    if (rc == 0)
        rc = gen_generate(&G);
    if (rc == 0)
        gen_print(&G);
    gen_free(&G);
    return rc;
}

const struct kv_cmd kv_cmd_strategies_def = {
    .name = "strategies",
    .summary = "list the registered cache strategies",
    .usage = "[--verbose]",
    .about = "  one line per strategy: name, description, its parameters (CLI flag and default)\n"
             "  and presets in brackets\n",
    .opts = strategies_opts,
    .n_opts = sizeof strategies_opts / sizeof strategies_opts[0],
    .opts_size = sizeof(struct strategies_opts),
    .run = strategies_run,
    .example = "--verbose",
};

const struct kv_cmd kv_cmd_generate_def = {
    .name = "generate",
    .summary = "run one generation and print tokens and a timing summary",
    .usage = "--strategy NAME [options]",
    .about = "  greedy decoding by default; --beams, --samples and --draft-layers are the other\n"
             "  modes, one at a time, each refused when the strategy lacks the cache operation\n"
             "  it needs (kvlab strategies --verbose lists them)\n",
    .opts = generate_opts,
    .n_opts = sizeof generate_opts / sizeof generate_opts[0],
    .groups = KV_GRP_MODEL | KV_GRP_CHECKPOINT | KV_GRP_TOKENIZER | KV_GRP_STRATEGY |
              KV_GRP_PARAMS | KV_GRP_BATCH | KV_GRP_THREADS | KV_GRP_SEED,
    .opts_size = sizeof(struct generate_opts),
    .defaults = generate_defaults,
    .modes = generate_mode,
    .mode_names = generate_modes,
    .check = generate_check,
    .run = generate_run,
    .example = "--strategy dynamic --layers 1 --dim 16 --heads 2 --kv-heads 2 --hidden 24 "
               "--max-len 64 --prompt-len 4 --new-tokens 2 --threads 1",
};
