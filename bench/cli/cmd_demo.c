/*
 * cmd_demo.c - `kvlab demo`: walk a tiny model through generation one step
 * at a time and show what the KV cache does. This file is the command: its
 * options and their checks, the width, and the session it sets up (the
 * model, the prompt's sequences, each strategy's cache shape); the walks
 * render it (demo_view.h: one strategy, or `--compare A,B` two side by
 * side; demo_ops.h: the cache operations' walks) and demo.c runs.
 *
 * For every step a walk prints what is fed to the model, the attention
 * shape (new_tokens, past_len + new_tokens), the mask rows, what each
 * layer's cache holds after the update, the attention weights of the newest
 * query, and the FLOPs of the step next to what the same step costs without
 * a cache.
 *
 * The design decision that matters: everything shown about the cache is
 * derived from what the attention kernel actually received. A probe
 * (kv_runner_set_probe, driven by demo.c) hands the demo the query, the mask
 * parameters and the spans of every layer; the held positions, the
 * quantized/f32 split and the attention weights (a naive softmax over
 * dequantized rows) all come from those spans, so the demo works for any
 * registered strategy and cannot show something the kernel did not see. A
 * `none` run is driven alongside with the same tokens, which gives the
 * no-cache FLOPs of the very same step and the reference logits for "where
 * do outputs diverge". So that every run stays a walk-through, its work is
 * estimated and bounded before it starts (DEMO_MAX_FLOPS).
 *
 * Output fits the width of a classroom terminal (--width, else the
 * terminal's, else COLUMNS, else 100; at least KV_DEMO_MIN_WIDTH = 80, the
 * narrowest every walk honours; a COLUMNS it cannot use is noted on
 * stderr); demo_view.h says how each walk fits it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cli_cmd.h"
#include "cli_io.h"
#include "cli_opts.h"
#include "commands.h"
#include "../teach/demo_ops.h"
#include "../teach/demo_view.h"
#include "../term/termout.h"
#include "../model/tokenizer.h"

#define DEMO_MAX_PROMPT 256
/* The demo is a walk-through, not a benchmark: a run whose estimated work
 * (the strategies shown plus the hidden no-cache reference, which re-runs
 * the whole sequence every step, so it grows like steps^3) exceeds this is
 * refused up front. The tiny default model does ~8 GFLOP/s on one core
 * here, so this is seconds, not hours: --steps 1500 at the default sizes. */
#define DEMO_MAX_FLOPS 1e11
/* The narrowest width every line of every walk fits, --width's lower end:
 * the compare table stacked one line per strategy and step is 80 columns
 * with the longest registered names (14 bytes: dynamic-concat), the brief
 * table 65 with --time, a mask row's "(N more rows ...)" up to 74. Below
 * it the tables would overflow, so it is not accepted (a terminal that
 * narrow gets this width). */
#define KV_DEMO_MIN_WIDTH 80
#define KV_DEMO_STR2(x) #x
#define KV_DEMO_STR(x) KV_DEMO_STR2(x)
#define KV_DEMO_MIN_WIDTH_STR KV_DEMO_STR(KV_DEMO_MIN_WIDTH)

/* ------------------------------------------------------------------------ */
/* Options                                                                  */

/* What a walk runs with: the parsed options, resolved (demo_run). */
struct demo_opts {
    struct kv_cli_common c;
    int32_t steps;
    const char *prompt;
    const char *prompt_tokens;
    const char *compare;
    int brief;
    int32_t every;
    int show_time;
    int color;      /* -1 auto */
    int32_t slots;  /* static capacity; 0: --max-len */
    int32_t width;  /* columns; 0: the terminal's, else COLUMNS, else 100 */
    int shared;     /* --shared-prompt: demo_ops.c's walks */
    int32_t beams, draft_layers, draft_tokens;
};

/* The table's fields (what the command line says). */
struct demo_args {
    int32_t steps, every, slots, width, beams, draft_layers, draft_tokens;
    const char *prompt, *prompt_tokens, *compare;
    int brief, show_time, shared;
    int color; /* index into demo_colors */
};

/* The walks (modes): bit k is demo_modes[k]. */
enum {
    DEMO_WALK = 1u << 0,   /* the step walk of one strategy (full or --brief) */
    DEMO_CMP = 1u << 1,    /* --compare */
    DEMO_SHARED = 1u << 2, /* --shared-prompt */
    DEMO_BEAMS = 1u << 3,  /* --beams */
    DEMO_DRAFT = 1u << 4,  /* --draft-layers */
};
static const char *const demo_modes[] = {"in the step-by-step walk of one strategy",
                                         "with --compare", "with --shared-prompt",
                                         "with --beams", "with --draft-layers"};
static const char *const demo_colors[] = {"auto", "always", "never", NULL};

#define D(field) offsetof(struct demo_args, field)
static const struct kv_opt demo_table[] = {
    {.name = "--steps", .kind = KV_OPT_INT, .off = D(steps), .lo = 0, .hi = 1 << 20, .meta = "N",
     .help = "decode steps after the prefill (a run estimated past 1e11 FLOPs with its no-cache "
             "reference is refused)"},
    {.name = "--compare", .kind = KV_OPT_STRATEGIES, .off = D(compare), .meta = "A,B",
     .help = "run two strategies side by side, show where they diverge"},
    {.name = "--prompt", .kind = KV_OPT_TEXT, .off = D(prompt), .meta = "TEXT",
     .help = "prompt (default \"KV cache\"; bytes, or the tokenizer's BPE)"},
    {.name = "--prompt-tokens", .kind = KV_OPT_TEXT, .off = D(prompt_tokens), .meta = "IDS",
     .help = "comma-separated token ids instead of a prompt text"},
    {.name = "--slots", .kind = KV_OPT_INT, .off = D(slots), .lo = 1, .hi = 1 << 30,
     .modes = DEMO_WALK | DEMO_CMP, .meta = "N",
     .help = "the static cache's preallocated slots (default: --max-len; refused when no "
             "strategy shown is static)"},
    {.name = "--brief", .kind = KV_OPT_FLAG, .off = D(brief), .modes = DEMO_WALK,
     .help = "one line per step"},
    {.name = "--every", .kind = KV_OPT_INT, .off = D(every), .lo = 1, .hi = 1 << 20,
     .modes = DEMO_WALK | DEMO_CMP, .meta = "K",
     .help = "print every K-th step and the first and last (default: every step)"},
    {.name = "--time", .kind = KV_OPT_FLAG, .off = D(show_time), .modes = DEMO_WALK,
     .help = "with --brief, also print each step's wall time (not reproducible)"},
    {.name = "--color", .kind = KV_OPT_ENUM, .off = D(color), .names = demo_colors,
     .modes = DEMO_WALK | DEMO_CMP, .meta = "WHEN",
     .help = "colour of the mask, the attention shades and evicted slots (auto: on a "
             "terminal, unless NO_COLOR is set)"},
    {.name = "--width", .kind = KV_OPT_INT, .off = D(width), .lo = KV_DEMO_MIN_WIDTH,
     .hi = KV_TERM_MAX_WIDTH, .meta = "N",
     .help = "columns every line fits (default: the terminal's width, else COLUMNS, else 100); "
             "long rows of keys are elided with '~'"},
    {.name = "--shared-prompt", .kind = KV_OPT_FLAG, .off = D(shared),
     .help = "the --batch sequences share the prompt: prefilled once, the cache's picture "
             "(a paged pool, block tables, reference counts) after every step, copy-on-write "
             "as it happens"},
    {.name = "--beams", .kind = KV_OPT_INT, .off = D(beams), .lo = 1, .hi = 8, .meta = "K",
     .help = "beam search: survivors, parents, the reorders"},
    {.name = "--draft-layers", .kind = KV_OPT_INT, .off = D(draft_layers), .lo = 1,
     .hi = 1 << 20, .meta = "L",
     .help = "speculative decoding with a draft of the first L layers: drafts, verdicts and "
             "the rollback (crop) of every round"},
    {.name = "--draft-tokens", .kind = KV_OPT_INT, .off = D(draft_tokens), .lo = 1, .hi = 64,
     .modes = DEMO_DRAFT, .meta = "k", .help = "drafts per round (default 3)"},
};
#undef D

static void demo_defaults(void *opts, struct kv_cli_common *c)
{
    struct demo_args *a = opts;
    c->model = (struct kv_model_config){.dim = 16, .hidden_dim = 32, .n_layers = 2,
                                        .n_heads = 2, .n_kv_heads = 2, .vocab_size = 256,
                                        .max_len = 128, .mlp = 1, .shared_classifier = 0};
    c->cache.max_len = 128;
    /* the tiny model's own defaults for the parameters that size a cache
     * (applied like given flags unless the command line gives them) */
    kv_cli_flag_default(c, "--window", 6);
    kv_cli_flag_default(c, "--group", 8);
    kv_cli_flag_default(c, "--residual", 2);
    c->threads = 1; /* the walk runs on one thread (its timings are not the point) */
    a->steps = 6;
    a->color = 0; /* auto */
}

static uint32_t demo_mode(const struct kv_cmd_ctx *x)
{
    const struct demo_args *a = x->opts;
    return a->beams > 0 ? DEMO_BEAMS : a->draft_layers > 0 ? DEMO_DRAFT
         : a->shared ? DEMO_SHARED : a->compare != NULL ? DEMO_CMP : DEMO_WALK;
}

/* The default strategy: the exact growing cache (keeps history, lossless,
 * evicts nothing, grows as it goes). */
static const char *demo_default_strategy(void)
{
    const struct kv_strategy_ops *d =
        kv_strategy_with(KV_CAP_KEEPS_HISTORY, KV_CAP_LOSSY | KV_CAP_EVICTS | KV_CAP_PREALLOCATES);
    return d != NULL ? d->name : "";
}

/* "A,B" of --compare into a and b (checked: two names of at most 63 bytes). */
static void split_compare(const char *v, char *a, char *b, size_t cap)
{
    size_t la = strcspn(v, ",");
    snprintf(a, cap, "%.*s", (int)la, v);
    snprintf(b, cap, "%s", v[la] == ',' ? v + la + 1 : "");
}

static int32_t demo_strategies(const struct kv_cmd_ctx *x, const char **names, int32_t max)
{
    static char a[64], b[64];
    const struct demo_args *o = x->opts;
    if (max < 2)
        return 0;
    if (o->compare != NULL) {
        split_compare(o->compare, a, b, sizeof a);
        names[0] = a;
        names[1] = b;
        return strchr(b, ',') == NULL && b[0] != '\0' ? 2 : 1;
    }
    names[0] = x->c.strategy != NULL ? x->c.strategy : demo_default_strategy();
    return 1;
}

static int demo_check(struct kv_cmd_ctx *x)
{
    const struct demo_args *o = x->opts;
    if (o->compare != NULL) {
        const char *comma = strchr(o->compare, ',');
        if (comma == NULL || strchr(comma + 1, ',') != NULL) {
            fprintf(stderr, "kvlab: demo: --compare expects two strategy names, A,B, got '%s'\n",
                    kv_text_q(o->compare));
            return 2;
        }
        if (x->c.strategy != NULL) {
            fprintf(stderr, "kvlab: demo: give either --strategy or --compare, not both\n");
            return 2;
        }
    }
    if ((o->compare != NULL) + o->shared + (o->beams > 0) + (o->draft_layers > 0) > 1) {
        fprintf(stderr, "kvlab: demo: give one of --compare, --shared-prompt, --beams, "
                        "--draft-layers (each is a walk of its own)\n");
        return 2;
    }
    if (o->show_time && !o->brief) {
        fprintf(stderr, "kvlab: demo: --time has no effect without --brief (it is a column "
                        "of the brief table)\n");
        return 2;
    }
    if (x->c.batch > KV_DEMO_MAX_BATCH) {
        fprintf(stderr, "kvlab: demo: --batch expects an integer in [1, %d], got %" PRId32 "\n",
                KV_DEMO_MAX_BATCH, x->c.batch);
        return 2;
    }
    if (o->beams > 0 && kv_cmd_given(x, "--batch")) {
        fprintf(stderr, "kvlab: demo: --batch has no effect with --beams (the beams are the "
                        "batch)\n");
        return 2;
    }
    if (o->prompt != NULL && o->prompt_tokens != NULL) {
        fprintf(stderr, "kvlab: demo: give either --prompt or --prompt-tokens, not both\n");
        return 2;
    }
    /* --slots sizes a preallocated (static) cache; a walk without one would
     * ignore it, and an option that does nothing is bad input */
    if (o->slots > 0) {
        const char *names[2];
        int32_t n = demo_strategies(x, names, 2), any = 0;
        for (int32_t k = 0; k < n; k++) {
            const struct kv_strategy_ops *ops;
            any |= kv_strategy_lookup(names[k], &ops, NULL, 0) == KV_OK &&
                   kv_cli_slots_apply(ops);
        }
        if (!any) {
            fprintf(stderr, "kvlab: demo: --slots sets the slots of a preallocated (static) "
                            "cache; %s%s%s has none\n", kv_text_q(names[0]),
                    n > 1 ? " and " : "", n > 1 ? kv_text_q(names[1]) : "");
            return 2;
        }
    }
    return 0;
}

/* The columns to fit: --width; else the terminal's (at least
 * KV_DEMO_MIN_WIDTH); else COLUMNS when it holds a width; else 100. A
 * COLUMNS the demo cannot use is not ignored silently: a number below the
 * narrowest width gets that width, anything else (not a number, above
 * KV_TERM_MAX_WIDTH) the default, each with one note on stderr. */
static int demo_width(int32_t given, char *note, size_t cap)
{
    note[0] = '\0';
    if (given > 0)
        return given;
    struct winsize ws;
    if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col < KV_DEMO_MIN_WIDTH ? KV_DEMO_MIN_WIDTH : ws.ws_col;
    const char *c = getenv("COLUMNS");
    if (c == NULL || c[0] == '\0')
        return KV_TERM_DEFAULT_WIDTH;
    char *end;
    errno = 0;
    long v = c[0] >= '0' && c[0] <= '9' ? strtol(c, &end, 10) : -1;
    int number = v >= 0 && errno == 0 && *end == '\0';
    if (number && v >= KV_DEMO_MIN_WIDTH && v <= KV_TERM_MAX_WIDTH)
        return (int)v;
    int w = number && v < KV_DEMO_MIN_WIDTH ? KV_DEMO_MIN_WIDTH : KV_TERM_DEFAULT_WIDTH;
    snprintf(note, cap, "kvlab: demo: COLUMNS='%s' is not a width in [%d, %d]; using %d "
             "columns\n", kv_text_q(c), KV_DEMO_MIN_WIDTH, KV_TERM_MAX_WIDTH, w);
    return w;
}

/* ------------------------------------------------------------------------ */
/* The session: model, prompt, sequences, cache shapes                      */

static void session_free(struct kv_demo_session *x)
{
    kv_tokenizer_destroy(x->tok);
    kv_model_destroy(x->model);
    kv_free(x->seq_a);
    kv_free(x->seq_b);
}

/* The cache configuration strategy `name` runs with: the session's, and
 * --slots as the capacity only of a strategy whose capacity is its max_len
 * (kv_cli_slots_apply: static); the others keep the model's positions. */
static struct kv_cache_config cc_of(const struct kv_demo_session *x, int32_t slots,
                                    const char *name)
{
    struct kv_cache_config cc = x->cc;
    const struct kv_strategy_ops *ops = NULL;
    if (slots > 0 && kv_strategy_lookup(name, &ops, NULL, 0) == KV_OK &&
        kv_cli_slots_apply(ops))
        cc.max_len = slots;
    return cc;
}

/* Estimated FLOPs of walking strategy `name` through every step. */
static double run_flops(const struct kv_demo_session *x, const struct kv_strategy_ops *ops)
{
    const struct kv_model_config *c = &x->model->cfg;
    int keeps = (ops->caps & KV_CAP_KEEPS_HISTORY) != 0;
    double f = kv_model_forward_flops(c, x->B, x->P, 0);
    for (int32_t s = 1; s <= x->steps; s++)
        f += keeps ? kv_model_forward_flops(c, x->B, 1, x->P + s - 1)
                   : kv_model_forward_flops(c, x->B, x->P + s, 0);
    return f;
}

/* Builds the prompt ids of sequence 0 into ids; returns count or -1. */
static int32_t prompt_ids(struct kv_demo_session *x, const struct demo_opts *o, int32_t *ids,
                          int32_t cap)
{
    const int32_t V = x->model->cfg.vocab_size;
    if (o->prompt_tokens != NULL) {
        int n = kv_cli_int_list("demo: --prompt-tokens", o->prompt_tokens, 0, V - 1, ids, cap);
        return n;
    }
    const char *text = o->prompt != NULL ? o->prompt : "KV cache";
    size_t len = strlen(text);
    if (len == 0 || len + 3 > (size_t)cap) {
        fprintf(stderr, "kvlab: demo: --prompt must have 1 to %d bytes\n", cap - 3);
        return -1;
    }
    if (x->tok != NULL) {
        int32_t n;
        enum kv_status s = kv_tokenizer_encode(x->tok, text, len,
                                               kv_tokenizer_default_flags(x->tok), ids, cap, &n);
        if (s != KV_OK) {
            fprintf(stderr, "kvlab: demo: cannot encode the prompt with '%s': %s\n",
                    kv_text_q(o->c.tokenizer_path), kv_status_str(s));
            return -1;
        }
        return n;
    }
    for (size_t i = 0; i < len; i++)
        ids[i] = (int32_t)(unsigned char)text[i] % V;
    return (int32_t)len;
}

/* The model (a checkpoint, else the synthetic one), the strategies shown
 * (shown[0] into sa; with --compare shown[1] into sb) checked against the
 * options, and the tokenizer. Returns the exit status. */
static int demo_load(struct kv_demo_session *x, struct demo_opts *o, const char *const shown[2],
                     struct kv_cli_strategy *sa, struct kv_cli_strategy *sb)
{
    if (o->c.model_path != NULL) {
        int lrc = kv_cli_load_model("demo", o->c.model_path, &x->model);
        if (lrc != 0)
            return lrc;
        o->c.model = x->model->cfg;
    } else if (o->c.tokenizer_path != NULL && o->c.model.vocab_size == 256) {
        /* a tokenizer without a model: keep the synthetic model's vocab */
    }
    struct kv_cli_common chk = o->c;
    chk.strategy = shown[0];
    if (kv_cli_check_common(&chk) != 0 || kv_cli_strategy(&chk, chk.strategy, sa) != 0)
        return 2;
    if (o->compare) {
        chk.strategy = shown[1];
        if (kv_cli_check_common(&chk) != 0 || kv_cli_strategy(&chk, shown[1], sb) != 0)
            return 2;
    }
    if (x->model == NULL) {
        if (kv_cli_check_memory("demo: the model", kv_model_weight_bytes(&o->c.model)) != 0)
            return 2;
        enum kv_status s = kv_model_create_synthetic(&x->model, &o->c.model, o->c.seed);
        if (s != KV_OK) {
            fprintf(stderr, "kvlab: demo: cannot build the model: %s\n", kv_status_str(s));
            return 1;
        }
    }
    if (o->c.tokenizer_path != NULL) {
        int lrc = kv_cli_load_tokenizer("demo", o->c.tokenizer_path, x->model->cfg.vocab_size,
                                        &x->tok);
        if (lrc != 0)
            return lrc;
    }
    x->vv = (struct kv_demo_vocab){x->tok, x->model->cfg.vocab_size};
    return 0;
}

/* The prompt's ids (ids, *n of them) and the --batch sequences, against
 * the model's positions. Returns the exit status. */
static int demo_sequences(struct kv_demo_session *x, struct demo_opts *o, int32_t *ids,
                          int32_t *n_ids)
{
    /* the operation walks' default prompt leaves a partly filled block at
     * block sizes 2, 4, 8 and 16 (9 tokens), so copy-on-write shows */
    if ((o->shared || o->beams > 0 || o->draft_layers > 0) && o->prompt == NULL &&
        o->prompt_tokens == NULL)
        o->prompt = "shared KV";
    int32_t n = prompt_ids(x, o, ids, DEMO_MAX_PROMPT);
    if (n < 1) {
        if (n == 0)
            fprintf(stderr, "kvlab: demo: the prompt encodes to no tokens\n");
        return 2;
    }
    x->B = o->c.batch;
    x->P = n;
    x->max_pos = n + o->steps;
    if (x->max_pos > x->model->cfg.max_len) {
        fprintf(stderr, "kvlab: demo: %" PRId32 " prompt tokens + --steps %" PRId32
                        " exceed the model's %" PRId32 " positions (--max-len)\n",
                n, o->steps, x->model->cfg.max_len);
        return 2;
    }
    x->stride = x->max_pos + 1;
    x->seq_a = kv_alloc((size_t)x->B * (size_t)x->stride * sizeof(int32_t));
    x->seq_b = kv_alloc((size_t)x->B * (size_t)x->stride * sizeof(int32_t));
    if (x->seq_a == NULL || x->seq_b == NULL) {
        fprintf(stderr, "kvlab: demo: out of memory\n");
        return 1;
    }
    /* Sequence b: the prompt without its first 2b tokens, left-padded with 0. */
    for (int32_t b = 0; b < x->B; b++) {
        int32_t pad = 2 * b < n - 1 ? 2 * b : n - 1;
        x->pad[b] = pad;
        int32_t *row = x->seq_a + (size_t)b * x->stride;
        for (int32_t t = 0; t < n; t++)
            row[t] = t < pad ? 0 : ids[t];
        memcpy(x->seq_b + (size_t)b * x->stride, row, (size_t)n * sizeof(int32_t));
    }
    *n_ids = n;
    return 0;
}

/* The cache shape of the model that really runs, and each strategy shown
 * (st[k], named shown[k]) against it (a --model checkpoint's head_dim for
 * --group), with its cache's bytes: cc_shown[k]. Returns the exit status. */
static int demo_shapes(struct kv_demo_session *x, const struct demo_opts *o,
                       const char *const shown[2], const struct kv_cli_strategy *const st[2])
{
    x->cc = o->c.cache;
    x->cc.n_layers = x->model->cfg.n_layers;
    x->cc.batch = x->B;
    x->cc.n_kv_heads = x->model->cfg.n_kv_heads;
    x->cc.head_dim = x->model->cfg.dim / x->model->cfg.n_heads;
    x->cc.max_len = x->model->cfg.max_len; /* --slots: cc_of, for static only */
    for (int k = 0; k < 1 + (o->compare != NULL); k++) {
        x->cc_shown[k] = cc_of(x, o->slots, shown[k]);
        int crc = kv_cli_check_strategy("demo", st[k]->ops, st[k]->params, &x->cc_shown[k],
                                        x->max_pos, 1, NULL);
        if (crc != 0)
            return crc;
    }
    return 0;
}

/* The walk's estimated work, with the hidden no-cache reference that
 * kv_demo_walk adds, against DEMO_MAX_FLOPS. Returns the exit status. */
static int demo_work_check(const struct kv_demo_session *x, const struct demo_opts *o,
                           const struct kv_cli_strategy *sa, const struct kv_cli_strategy *sb)
{
    /* the hidden reference: a strategy that keeps no history, as the walk picks */
    const struct kv_strategy_ops *nc = kv_strategy_with(0, KV_CAP_KEEPS_HISTORY);
    double work = o->compare ? run_flops(x, sa->ops) + run_flops(x, sb->ops)
                             : run_flops(x, sa->ops) +
                                   ((sa->ops->caps & KV_CAP_KEEPS_HISTORY) && nc != NULL
                                        ? run_flops(x, nc) : 0.0);
    if (!(work <= DEMO_MAX_FLOPS)) {
        fprintf(stderr, "kvlab: demo: --steps %" PRId32 " on this model would take about %.1e "
                        "FLOPs (%s), more than the demo's %.0e; use fewer --steps or a "
                        "smaller model\n", o->steps, work,
                o->compare ? "both strategies" : "with the no-cache reference", DEMO_MAX_FLOPS);
        return 2;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The walks                                                                */

/* The walks of the cache operations (demo_ops.c), after their own checks:
 * the counts against the model, the operation the walk needs by capability.
 * Returns the exit status. */
static int ops_walk(struct kv_demo_session *x, const struct demo_opts *o,
                    const struct kv_cli_strategy *st, const int32_t *ids, int32_t n,
                    const char *width_note)
{
    const char *mode = o->beams > 0 ? "--beams" : o->draft_layers > 0 ? "--draft-layers"
                                                                      : "--shared-prompt";
    /* (one walk at a time, and none of the step walk's options: demo_check
     * and the options' modes refused those) */
    if (o->beams > x->model->cfg.vocab_size) {
        fprintf(stderr, "kvlab: demo: --beams (%" PRId32 ") exceeds the vocabulary (%" PRId32
                        ")\n", o->beams, x->model->cfg.vocab_size);
        return 2;
    }
    if (o->draft_layers > 0 && (x->B > 1 || o->draft_layers >= x->model->cfg.n_layers)) {
        fprintf(stderr, "kvlab: demo: --draft-layers (%" PRId32 ") must be below the model's "
                        "%" PRId32 " layers, with one sequence\n", o->draft_layers,
                x->model->cfg.n_layers);
        return 2;
    }
    const uint32_t caps = kv_strategy_caps(st->ops, &x->cc, st->params);
    const uint32_t need = o->draft_layers > 0
                              ? KV_CAP_KEEPS_HISTORY | KV_CAP_CROP | KV_CAP_CHUNKED_APPEND
                              : KV_CAP_KEEPS_HISTORY | KV_CAP_REORDER;
    if ((caps & need) != need ||
        (o->draft_layers > 0 && (caps & (KV_CAP_LOSSY | KV_CAP_EVICTS)))) {
        fprintf(stderr, "kvlab: demo: strategy '%s' does not support %s as %s needs\n",
                st->ops->name, o->draft_layers > 0 ? "crop to any length" : "reorder", mode);
        return 2;
    }
    const struct kv_demo_ops_req r = {
        .m = x->model, .ops = st->ops, .params = st->params, .cc = x->cc, .prompt = ids,
        .prompt_len = n, .steps = o->steps, .batch = o->beams > 0 ? o->beams : x->B,
        .beams = o->beams, .draft_layers = o->draft_layers,
        .draft_tokens = o->draft_tokens > 0 ? o->draft_tokens : 3, .seed = o->c.seed,
        .byte_vocab = kv_demo_bytes_vocab(x), .width = x->width, .out = stdout};
    const struct kv_model_config *c = &x->model->cfg;
    kv_line_addf(&x->L, "model  %s: %" PRId32 " layers, %" PRId32 " heads (%" PRId32
                 " kv heads) x head_dim %" PRId32 ", vocab %" PRId32,
                 o->c.model_path ? o->c.model_path : "synthetic", c->n_layers, c->n_heads,
                 c->n_kv_heads, c->dim / c->n_heads, c->vocab_size);
    kv_demo_emit(x, 7);
    if (width_note[0] != '\0')
        kv_progress("%s", width_note);
    return kv_demo_ops(&r); /* main checks that stdout took it (kv_cli_finish) */
}

/* Sets the session up, every check before the walk starts (exit 2), then
 * the walk the options ask for. */
static int demo_run(struct kv_cmd_ctx *cx)
{
    const struct demo_args *a = cx->opts;
    struct demo_opts o = {.c = cx->c, .steps = a->steps, .prompt = a->prompt,
                          .prompt_tokens = a->prompt_tokens, .compare = a->compare,
                          .brief = a->brief, .every = a->every, .show_time = a->show_time,
                          .color = a->color == 1 ? 1 : a->color == 2 ? 0 : -1,
                          .slots = a->slots, .width = a->width, .shared = a->shared,
                          .beams = a->beams, .draft_layers = a->draft_layers,
                          .draft_tokens = a->draft_tokens};
    char name_a[64] = "", name_b[64] = "";
    if (o.compare != NULL)
        split_compare(o.compare, name_a, name_b, sizeof name_a);
    struct kv_demo_session x;
    memset(&x, 0, sizeof x);
    x.steps = o.steps;
    x.every = o.every;
    x.brief = o.brief;
    x.show_time = o.show_time;
    x.model_path = o.c.model_path;
    const char *no_color = getenv("NO_COLOR");
    int use_color = o.color >= 0 ? o.color
                                 : (isatty(STDOUT_FILENO) &&
                                    (no_color == NULL || no_color[0] == '\0'));
    x.S = kv_demo_style_make(use_color);
    char width_note[256]; /* why COLUMNS was not used, printed once the walk starts */
    x.width = demo_width(o.width, width_note, sizeof width_note);
    const char *strategy = o.c.strategy != NULL ? o.c.strategy : demo_default_strategy();
    const char *const shown[2] = {o.compare ? name_a : strategy, name_b};
    struct kv_cli_strategy sa = {0}, sb = {0}; /* sb: only with --compare */
    const struct kv_cli_strategy *const st[2] = {&sa, &sb};
    int32_t ids[DEMO_MAX_PROMPT], n = 0;
    int rc = demo_load(&x, &o, shown, &sa, &sb);
    if (rc == 0)
        rc = demo_sequences(&x, &o, ids, &n);
    if (rc == 0)
        rc = demo_shapes(&x, &o, shown, st);
    if (rc == 0 && (o.shared || o.beams > 0 || o.draft_layers > 0)) {
        rc = ops_walk(&x, &o, &sa, ids, n, width_note);
    } else if (rc == 0 && (rc = demo_work_check(&x, &o, &sa, &sb)) == 0) {
        if (width_note[0] != '\0')
            kv_progress("%s", width_note);
        rc = o.compare ? kv_demo_compare(&x, name_a, sa.params, name_b, sb.params)
                       : kv_demo_walk(&x, strategy, sa.params);
    }
    session_free(&x);
    return rc;
}

const struct kv_cmd kv_cmd_demo_def = {
    .name = "demo",
    .summary = "walk a tiny model step by step and show what the cache holds",
    .usage = "[--strategy NAME | --compare A,B] [--steps N] [--prompt TEXT | --prompt-tokens "
             "ID,...] [--model FILE.bin [--tokenizer TOK.bin]] [options]",
    .about = "  walks a tiny model (2 layers, 2 heads, head_dim 8, vocab 256) through greedy\n"
             "  generation one step at a time and prints, per step: what is fed, the attention\n"
             "  shape (new, past+new), the mask rows (1 visible, 0 masked), what each layer's\n"
             "  cache holds, the newest query's attention weights as a shade row ('.:-=+*#%@',\n"
             "  relative to the row's largest weight; '_' masked), and the step's FLOPs next to\n"
             "  the FLOPs of the same step without a cache. The default strategy is dynamic;\n"
             "  the demo's own parameter defaults are --window 6 --group 8 --residual 2 (the\n"
             "  parameters' list below shows the strategies' tables). --batch B (<= 4): sequence\n"
             "  b drops the first 2b prompt tokens and is left-padded, to show padding masks.\n"
             "  --shared-prompt, --beams and --draft-layers are walks of the cache operations,\n"
             "  one at a time. Width: every line fits --width, else the terminal's width (a\n"
             "  terminal narrower than " KV_DEMO_MIN_WIDTH_STR " columns gets " KV_DEMO_MIN_WIDTH_STR
             "), else COLUMNS, else 100. A COLUMNS\n"
             "  that is not a width in [" KV_DEMO_MIN_WIDTH_STR ", 1000] is not used: a smaller "
             "number gives " KV_DEMO_MIN_WIDTH_STR ",\n"
             "  anything else 100, and a note on stderr says so. One thread.\n",
    .opts = demo_table,
    .n_opts = sizeof demo_table / sizeof demo_table[0],
    .groups = KV_GRP_MODEL | KV_GRP_CHECKPOINT | KV_GRP_TOKENIZER | KV_GRP_STRATEGY |
              KV_GRP_PARAMS | KV_GRP_BATCH | KV_GRP_SEED,
    .opts_size = sizeof(struct demo_args),
    .defaults = demo_defaults,
    .modes = demo_mode,
    .mode_names = demo_modes,
    .strategies = demo_strategies,
    .check = demo_check,
    .run = demo_run,
    .example = "--strategy sliding --steps 2 --width 80",
};
