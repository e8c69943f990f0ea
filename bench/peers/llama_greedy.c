/*
 * llama_greedy.c - kvlab's external correctness check against llama.cpp:
 * greedy decoding through libllama on a converted kvlab checkpoint, with
 * the exact prompt token ids kvlab is given, never stopping at an EOS id
 * (llama.cpp's tools stop at id 2, which this vocabulary maps to `</s>`,
 * where kvlab does not).
 *
 * Several llama.cpp configurations run in lockstep on the same inputs:
 * the first (the reference, normally flash attention off with an f32
 * cache, which computes in f32 as kvlab does) chooses each next token
 * greedily, and every configuration is fed that same token, so the
 * precision of each (flash attention on casts an f32 cache to f16 before
 * attention; f16, q8_0, q4_0 caches round it) shows as logit differences
 * at identical inputs, and as steps whose argmax differs, without one
 * early flip sending the sequences apart.
 *
 *   kvlab-peer-llama --model M.gguf --prompt-tokens ID[,ID...] --steps N
 *       [--configs off:f32,on:f32,on:f16,on:q8_0,on:q4_0] [--threads N]
 *       [--ctx C]
 *   kvlab-peer-llama --model M.gguf --tokenize TEXT
 *
 * Output (stdout), one line per configuration after the reference's:
 *   tokens: ID ID ...                (the reference's greedy tokens)
 *   config=on:q8_0 argmax_agree=K/N max_abs_logit_diff=X rel_l2=Y
 * --tokenize prints `ids: ID,ID,...` (llama.cpp's tokenizer, BOS added).
 * Exit 0, 2 on bad options, 1 when the model or a context cannot be made
 * or a decode fails. The options are a table of kvlab's command layer
 * (bench/cli/cli_cmd.h), so they are parsed as strictly as kvlab's own.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cli/cli_cmd.h"
#include "llama.h"

#define MAX_CONFIGS 8
#define MAX_PROMPT 4096

struct config {
    char name[32];
    int fa;              /* flash attention on */
    enum ggml_type type; /* K and V cache type */
    struct llama_context *ctx;
    int agree;
    double max_diff, num, den;
};

static void quiet_log(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR)
        fputs(text, stderr);
}

static int parse_type(const char *s, enum ggml_type *t)
{
    static const struct { const char *n; enum ggml_type t; } types[] = {
        {"f32", GGML_TYPE_F32}, {"f16", GGML_TYPE_F16}, {"bf16", GGML_TYPE_BF16},
        {"q8_0", GGML_TYPE_Q8_0}, {"q4_0", GGML_TYPE_Q4_0}};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (strcmp(s, types[i].n) == 0) {
            *t = types[i].t;
            return 0;
        }
    return -1;
}

/* "off:f32,on:q8_0,..." into c[]; count or -1. */
static int parse_configs(const char *s, struct config *c)
{
    char buf[256];
    if (strlen(s) >= sizeof buf)
        return -1;
    strcpy(buf, s);
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(t, ':');
        if (n == MAX_CONFIGS || colon == NULL || strlen(t) >= sizeof c[n].name)
            return -1;
        memset(&c[n], 0, sizeof c[n]);
        strcpy(c[n].name, t);
        *colon = '\0';
        if (strcmp(t, "on") == 0)
            c[n].fa = 1;
        else if (strcmp(t, "off") != 0)
            return -1;
        if (parse_type(colon + 1, &c[n].type) != 0)
            return -1;
        n++;
    }
    return n;
}

static int parse_ids(const char *s, llama_token *ids, int max_n)
{
    int n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v > 1 << 30 || n == max_n || (*end != ',' && *end != '\0'))
            return -1;
        ids[n++] = (llama_token)v;
        p = *end == ',' ? end + 1 : end;
        if (*end == ',' && *p == '\0')
            return -1;
    }
    return n;
}

/* Decodes n tokens at positions pos.. in ctx, logits for the last only. */
static int feed(struct llama_context *ctx, const llama_token *tok, int n, int pos)
{
    struct llama_batch b = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        b.token[i] = tok[i];
        b.pos[i] = pos + i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = i == n - 1;
    }
    b.n_tokens = n;
    int rc = llama_decode(ctx, b);
    llama_batch_free(b);
    return rc;
}

static int argmax(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

/* ------------------------------------------------------------------------ */
/* Options                                                                  */

enum { MODE_DECODE = 1u << 0, MODE_TOKENIZE = 1u << 1 };
static const char *const ll_modes[] = {"when decoding (without --tokenize)", "with --tokenize"};

struct prompt_ids {
    int n;
    llama_token v[MAX_PROMPT];
};
struct config_list {
    int n;
    struct config c[MAX_CONFIGS];
};

struct ll_opts {
    const char *model, *text;
    struct prompt_ids prompt;
    struct config_list configs;
    int32_t steps, n_ctx;
};

static int opt_prompt(const char *v, void *field, char *why, size_t n)
{
    struct prompt_ids *p = field;
    if ((p->n = parse_ids(v, p->v, MAX_PROMPT)) >= 1)
        return 0;
    snprintf(why, n, "comma-separated token ids (0 to 2^30, at most %d)", MAX_PROMPT);
    return -1;
}

static int opt_configs(const char *v, void *field, char *why, size_t n)
{
    struct config_list *l = field;
    if ((l->n = parse_configs(v, l->c)) >= 1)
        return 0;
    snprintf(why, n, "a comma list of at most %d FA:TYPE, FA on|off, TYPE f32|f16|bf16|q8_0|q4_0",
             MAX_CONFIGS);
    return -1;
}

#define O(field) offsetof(struct ll_opts, field)
static const struct kv_opt ll_table[] = {
    {.name = "--model", .kind = KV_OPT_INPUT, .off = O(model), .required = 1, .meta = "M.gguf",
     .help = "the GGUF model (a kvlab checkpoint converted by bench/peers/models.sh)"},
    {.name = "--tokenize", .kind = KV_OPT_TEXT, .off = O(text), .modes = MODE_TOKENIZE,
     .meta = "TEXT", .help = "print llama.cpp's token ids of TEXT (BOS added) and stop"},
    {.name = "--prompt-tokens", .kind = KV_OPT_CUSTOM, .off = O(prompt), .parse = opt_prompt,
     .modes = MODE_DECODE, .meta = "ID,...", .help = "the prompt as token ids"},
    {.name = "--steps", .kind = KV_OPT_INT, .off = O(steps), .lo = 1, .hi = 100000,
     .modes = MODE_DECODE, .meta = "N", .help = "greedy tokens to generate"},
    {.name = "--configs", .kind = KV_OPT_CUSTOM, .off = O(configs), .parse = opt_configs,
     .modes = MODE_DECODE, .meta = "FA:TYPE,...",
     .help = "flash attention and cache type of each context, the reference first"},
    {.name = "--ctx", .kind = KV_OPT_INT, .off = O(n_ctx), .lo = 0, .hi = 1 << 24,
     .modes = MODE_DECODE, .meta = "C", .help = "context size (0: prompt + steps + 16)"},
};
#undef O

static void ll_defaults(void *opts, struct kv_cli_common *c)
{
    struct ll_opts *o = opts;
    (void)c;
    o->steps = 32;
    o->configs.n = parse_configs("off:f32,on:f32,on:f16,on:q8_0,on:q4_0", o->configs.c);
}

static uint32_t ll_mode(const struct kv_cmd_ctx *x)
{
    return kv_cmd_given(x, "--tokenize") ? MODE_TOKENIZE : MODE_DECODE;
}

static int ll_check(struct kv_cmd_ctx *x)
{
    if (x->modes == MODE_DECODE && !kv_cmd_given(x, "--prompt-tokens")) {
        fprintf(stderr, "kvlab: peer-llama: needs --prompt-tokens ID,... (or --tokenize TEXT)\n");
        return 2;
    }
    return 0;
}

static int ll_run(struct kv_cmd_ctx *x);

static const struct kv_cmd ll_cmd = {
    .name = "peer-llama",
    .summary = "greedy decoding through llama.cpp on kvlab's prompt ids",
    .usage = "--model M.gguf (--prompt-tokens ID,... [--steps N] [--configs LIST] [--ctx C] | "
             "--tokenize TEXT) [--threads N]",
    .opts = ll_table,
    .n_opts = sizeof ll_table / sizeof ll_table[0],
    .groups = KV_GRP_THREADS,
    .opts_size = sizeof(struct ll_opts),
    .defaults = ll_defaults,
    .modes = ll_mode,
    .mode_names = ll_modes,
    .check = ll_check,
    .run = ll_run,
};

int main(int argc, char **argv)
{
    argv[0] = (char *)ll_cmd.name;
    return kv_cmd_main(&ll_cmd, argc, argv);
}

static int ll_run(struct kv_cmd_ctx *x)
{
    struct ll_opts *o = x->opts;
    const char *model_path = o->model, *text = o->text;
    struct config *cfg = o->configs.c;
    const int n_cfg = o->configs.n, steps = o->steps, threads = x->c.threads;
    int n_ctx = o->n_ctx;
    llama_log_set(quiet_log, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    struct llama_model *model = llama_model_load_from_file(model_path, mp);
    if (model == NULL) {
        fprintf(stderr, "kvlab-peer-llama: cannot load %s\n", model_path);
        return 1;
    }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);
    llama_token *ids = o->prompt.v;
    if (text != NULL) {
        int n = llama_tokenize(vocab, text, (int32_t)strlen(text), ids, MAX_PROMPT, true, false);
        if (n < 0) {
            fprintf(stderr, "kvlab-peer-llama: the text is longer than %d tokens\n", MAX_PROMPT);
            return 2;
        }
        printf("ids: ");
        for (int i = 0; i < n; i++)
            printf("%s%d", i ? "," : "", ids[i]);
        printf("\n");
        llama_model_free(model);
        return 0;
    }
    const int n_prompt = o->prompt.n;
    for (int i = 0; i < n_prompt; i++) {
        if (ids[i] >= n_vocab) {
            fprintf(stderr, "kvlab-peer-llama: token id %d outside the vocabulary (%d)\n", ids[i],
                    n_vocab);
            return 2;
        }
    }
    if (n_ctx == 0)
        n_ctx = n_prompt + steps + 16;
    int rc = 0;
    for (int c = 0; c < n_cfg; c++) {
        struct llama_context_params cp = llama_context_default_params();
        cp.n_ctx = (uint32_t)n_ctx;
        cp.n_batch = cp.n_ubatch = (uint32_t)(n_prompt > 512 ? n_prompt : 512);
        cp.n_threads = cp.n_threads_batch = threads;
        cp.flash_attn_type = cfg[c].fa ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
        cp.type_k = cp.type_v = cfg[c].type;
        cp.no_perf = true;
        cfg[c].ctx = llama_init_from_model(model, cp);
        if (cfg[c].ctx == NULL) {
            fprintf(stderr, "kvlab-peer-llama: cannot create a context for %s\n", cfg[c].name);
            rc = 1;
            goto done;
        }
        if (feed(cfg[c].ctx, ids, n_prompt, 0) != 0) {
            fprintf(stderr, "kvlab-peer-llama: prompt decode failed (%s)\n", cfg[c].name);
            rc = 1;
            goto done;
        }
    }
    llama_token *out = malloc((size_t)steps * sizeof(llama_token));
    if (out == NULL) {
        rc = 1;
        goto done;
    }
    for (int s = 0; s < steps; s++) {
        const float *ref = llama_get_logits_ith(cfg[0].ctx, -1);
        llama_token next = (llama_token)argmax(ref, n_vocab);
        out[s] = next;
        for (int c = 1; c < n_cfg; c++) {
            const float *l = llama_get_logits_ith(cfg[c].ctx, -1);
            cfg[c].agree += argmax(l, n_vocab) == next;
            for (int i = 0; i < n_vocab; i++) {
                double d = (double)l[i] - ref[i];
                cfg[c].max_diff = fmax(cfg[c].max_diff, fabs(d));
                cfg[c].num += d * d;
                cfg[c].den += (double)ref[i] * ref[i];
            }
        }
        if (s + 1 == steps)
            break;
        for (int c = 0; c < n_cfg; c++) {
            if (feed(cfg[c].ctx, &next, 1, n_prompt + s) != 0) {
                fprintf(stderr, "kvlab-peer-llama: decode failed at step %d (%s)\n", s, cfg[c].name);
                rc = 1;
                free(out);
                goto done;
            }
        }
    }
    printf("tokens:");
    for (int s = 0; s < steps; s++)
        printf(" %d", out[s]);
    printf("\nconfig=%s reference\n", cfg[0].name);
    for (int c = 1; c < n_cfg; c++)
        printf("config=%s argmax_agree=%d/%d max_abs_logit_diff=%.3g rel_l2=%.3g\n", cfg[c].name,
               cfg[c].agree, steps, cfg[c].max_diff,
               cfg[c].den > 0 ? sqrt(cfg[c].num / cfg[c].den) : 0.0);
    free(out);
done:
    for (int c = 0; c < n_cfg; c++)
        if (cfg[c].ctx)
            llama_free(cfg[c].ctx);
    llama_model_free(model);
    llama_backend_free();
    return rc;
}
