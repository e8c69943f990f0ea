/*
 * cmd_demo.c - `kvlab demo`: walk a tiny model through generation one step
 * at a time and show what the KV cache does.
 *
 * For every step it prints what is fed to the model, the attention shape
 * (new_tokens, past_len + new_tokens), the mask rows, what each layer's
 * cache holds after the update, the attention weights of the newest query,
 * and the FLOPs of the step next to what the same step costs without a
 * cache. `--compare A,B` runs two strategies side by side instead.
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
 * do outputs diverge". This file parses options and renders; demo.c runs.
 *
 * Output fits the width of a classroom terminal (--width, else the
 * terminal's, else COLUMNS, else 100; at least KV_DEMO_MIN_WIDTH = 80, the
 * narrowest every walk honours; a COLUMNS it cannot use is noted on stderr): prose lines are built whole and wrapped at
 * spaces with a hanging indent under their label; rows of keys (mask and
 * attention shades) keep the first ROW_HEAD and the newest keys and show the
 * rest as one '~'; the brief table drops its least needed columns, and the
 * side-by-side compare table becomes one line per strategy and step when it
 * does not fit. Colour escapes take no columns.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "../model/checkpoint.h"
#include "cli_cmd.h"
#include "cli_io.h"
#include "cli_opts.h"
#include "commands.h"
#include "../teach/demo.h"
#include "../teach/demo_ops.h"
#include "../term/termout.h"
#include "../model/tokenizer.h"

/* Logit differences below this are float rounding between two exact
 * strategies (different summation order), not a change of output. */
#define DEMO_SAME_LOGIT 1e-4f
#define DEMO_MAX_BATCH 4
#define DEMO_MAX_MASK_ROWS 8
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
/* Output style                                                             */

struct style {
    int color;
    const char *bold, *dim, *red, *green, *yellow, *cyan, *reset;
};

static struct style style_make(int color)
{
    if (!color)
        return (struct style){0, "", "", "", "", "", "", ""};
    return (struct style){1, "\033[1m", "\033[2m", "\033[31m", "\033[32m", "\033[33m",
                          "\033[36m", "\033[0m"};
}

/* One character per attention weight, nine levels relative to the row's
 * largest weight ('@'); '_' for a masked key. No space, so a shade row is
 * one word for tools that split on blanks. */
static const char shade_ramp[] = ".:-=+*#%@";
#define SHADE_TOP 8

/* w: the weight, wmax: the row's largest (the shade is relative to it). */
static void put_shade(const struct style *S, float w, float wmax)
{
    if (w < 0.0f) {
        fputs(S->color ? "\033[2m\xc2\xb7\033[0m" : "_", stdout);
        return;
    }
    int lvl = wmax > 0.0f ? (int)lrintf(w / wmax * (float)SHADE_TOP) : 0;
    if (lvl > SHADE_TOP)
        lvl = SHADE_TOP;
    if (!S->color) {
        putchar(shade_ramp[lvl]);
        return;
    }
    /* Brighter grey (256-colour palette) for a larger weight. */
    printf("\033[%s38;5;%dm%c\033[0m", lvl >= 6 ? "1;" : "", 240 + lvl * 15 / SHADE_TOP,
           shade_ramp[lvl]);
}

/* ------------------------------------------------------------------------ */
/* Tokens as text                                                           */

struct vocab_view {
    const struct kv_tokenizer *tok; /* NULL: bytes when vocab <= 256, else ids */
    int32_t vocab;
};

/* A short printable form of token id: 'a', '\x9f', ' the' (kv_token_text). */
static const char *tok_text(const struct vocab_view *vv, int32_t prev, int32_t id, char *buf,
                            size_t cap)
{
    return kv_token_text(vv->tok, vv->vocab, prev, id, buf, cap);
}

/* "0..5 8 10..12" for the set bits of held[0..n), appended to L. */
static void line_ranges(struct kv_line *L, const unsigned char *held, int32_t n)
{
    int first = 1;
    for (int32_t i = 0; i < n;) {
        if (!held[i]) {
            i++;
            continue;
        }
        int32_t j = i;
        while (j + 1 < n && held[j + 1])
            j++;
        kv_line_addf(L, first ? "" : " ");
        if (j == i)
            kv_line_addf(L, "%" PRId32, i);
        else
            kv_line_addf(L, "%" PRId32 "..%" PRId32, i, j);
        first = 0;
        i = j + 1;
    }
    if (first)
        kv_line_addf(L, "-");
}

/* Longest byte string shown whole; longer ones keep their first and last
 * bytes (DEMO_BYTES_HEAD, DEMO_BYTES_TAIL) around " ... ". */
#define DEMO_BYTES_MAX 240
#define DEMO_BYTES_HEAD 160
#define DEMO_BYTES_TAIL 60

/* Bytes as one quoted string: printable ASCII as is, the rest escaped,
 * with a soft break after every byte so a string without spaces still
 * wraps. */
static void line_bytes(struct kv_line *L, const int32_t *ids, int32_t n)
{
    kv_line_addf(L, "\"");
    for (int32_t i = 0; i < n; i++) {
        if (n > DEMO_BYTES_MAX && i == DEMO_BYTES_HEAD) {
            kv_line_addf(L, "\" ... \"");
            i = n - DEMO_BYTES_TAIL;
        }
        int c = ids[i];
        if (c == '\n')
            kv_line_addf(L, "\\n");
        else if (c == '\t')
            kv_line_addf(L, "\\t");
        else if (c == '"' || c == '\\')
            kv_line_addf(L, "\\%c", c);
        else if (c >= 0x20 && c < 0x7f)
            kv_line_addf(L, "%c", c);
        else
            kv_line_addf(L, "\\x%02x", c & 0xff);
        kv_line_addf(L, "%c", KV_LINE_SOFT);
    }
    kv_line_addf(L, "\"");
}

static float max_abs_diff(const float *a, const float *b, size_t n)
{
    float m = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float d = fabsf(a[i] - b[i]);
        if (d > m || d != d)
            m = d;
    }
    return m;
}

/* ------------------------------------------------------------------------ */
/* Options                                                                  */

/* What a walk runs with: the parsed options, resolved (demo_resolve). */
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
    if (x->c.batch > DEMO_MAX_BATCH) {
        fprintf(stderr, "kvlab: demo: --batch expects an integer in [1, %d], got %" PRId32 "\n",
                DEMO_MAX_BATCH, x->c.batch);
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
/* The session: model, prompt, runs                                         */

struct session {
    struct demo_opts *o;
    struct style S;
    int width;              /* columns every line must fit */
    char width_note[256];   /* why COLUMNS was not used, printed once the walk starts */
    struct kv_line L;       /* the line being built */
    struct kv_model *model;
    struct kv_tokenizer *tok;
    struct vocab_view vv;
    struct kv_cache_config cc;
    int32_t B, P, max_pos, stride;
    int32_t pad[DEMO_MAX_BATCH];
    int32_t *seq_a, *seq_b; /* (B, stride) tokens: padded prompt, then generated */
};

/*
 * Token t of sequence b in seq ((B, stride) tokens), or -1 where there is
 * none: before the sequence's first real token (t < pad[b], t < 0). Every
 * token the renderer shows is read through here or tok_after, so a
 * one-token prompt (T = 1) or a padded row never reads outside its row.
 */
static int32_t seq_tok(const struct session *x, const int32_t *seq, int32_t b, int32_t t)
{
    KV_ASSERT(b >= 0 && b < x->B && t < x->stride);
    return t >= 0 && t >= x->pad[b] ? seq[(size_t)b * x->stride + (size_t)t] : -1;
}

/* Text of token id as the successor of position t - 1 of sequence b (a BPE
 * piece may decode differently after a given token; none before t = 0). */
static const char *tok_after(const struct session *x, const int32_t *seq, int32_t b, int32_t t,
                             int32_t id, char *buf, size_t cap)
{
    return tok_text(&x->vv, seq_tok(x, seq, b, t - 1), id, buf, cap);
}

/* Prints the session's line, wrapped to the width, continuation lines
 * indented by `indent` columns. */
static void emit(struct session *x, int indent)
{
    kv_line_emit(stdout, &x->L, x->width, indent);
}

/* Byte-level text (no tokenizer and at most 256 tokens, or a tokenizer
 * whose token i is the byte i): one quoted string reads better than a list
 * of one-byte tokens. */
static int bytes_vocab(const struct session *x)
{
    if (x->tok == NULL)
        return x->vv.vocab <= 256;
    if (kv_tokenizer_vocab_size(x->tok) != 256)
        return 0;
    for (int32_t i = 0; i < 256; i++) {
        int32_t len;
        const char *p = kv_tokenizer_piece(x->tok, i, &len);
        if (p == NULL || len != 1 || (unsigned char)p[0] != i)
            return 0;
    }
    return 1;
}

static void print_model_line(struct session *x)
{
    const struct kv_model_config *c = &x->model->cfg;
    struct kv_line *L = &x->L;
    kv_line_addf(L, "%smodel%s  %s: %" PRId32 " layers, %" PRId32 " heads (%" PRId32
                 " kv heads) x head_dim %" PRId32 " = dim %" PRId32 ", hidden %" PRId32
                 ", vocab %" PRId32 "%s",
                 x->S.bold, x->S.reset, x->o->c.model_path ? x->o->c.model_path : "synthetic",
                 c->n_layers, c->n_heads, c->n_kv_heads, c->dim / c->n_heads, c->dim,
                 c->mlp ? c->hidden_dim : 0, c->vocab_size, c->mlp ? "" : " (no MLP)");
    emit(x, 8);
    kv_line_addf(L, "%sprompt%s ", x->S.bold, x->S.reset);
    for (int32_t b = 0; b < x->B; b++) {
        if (x->B > 1)
            kv_line_addf(L, "%sseq %" PRId32 " (pad %" PRId32 "): ", b ? "; " : "", b, x->pad[b]);
        if (bytes_vocab(x)) {
            line_bytes(L, x->seq_a + (size_t)b * x->stride + x->pad[b], x->P - x->pad[b]);
            continue;
        }
        char buf[64];
        for (int32_t t = x->pad[b]; t < x->P; t++)
            kv_line_addf(L, "%s%s", t > x->pad[b] ? " " : "",
                         tok_after(x, x->seq_a, b, t, seq_tok(x, x->seq_a, b, t), buf,
                                   sizeof buf));
    }
    kv_line_addf(L, "  (%" PRId32 " token%s%s)", x->P, x->P == 1 ? "" : "s",
                 x->B > 1 ? " with padding" : "");
    emit(x, 7);
}

/* The cache configuration strategy `name` runs with: the session's, and
 * --slots as the capacity only of a strategy whose capacity is its max_len
 * (kv_cli_slots_apply: static); the others keep the model's positions. */
static struct kv_cache_config cc_of(const struct session *x, const char *name)
{
    struct kv_cache_config cc = x->cc;
    const struct kv_strategy_ops *ops = NULL;
    if (x->o->slots > 0 && kv_strategy_lookup(name, &ops, NULL, 0) == KV_OK &&
        kv_cli_slots_apply(ops))
        cc.max_len = x->o->slots;
    return cc;
}

/* The strategy describes itself, with its parameters' values. */
static void print_cache_config(struct session *x, const struct kv_demo_run *R)
{
    char line[512];
    kv_cache_describe(R->cache, line, sizeof line);
    kv_line_addf(&x->L, "%scache%s  %s: %s", x->S.bold, x->S.reset, R->name, line);
    emit(x, 8);
}

/* Bytes one token slot takes in every layer (K and V, all kv heads, batch). */
static size_t slot_bytes(const struct session *x)
{
    return (size_t)x->cc.n_layers * (size_t)x->B * (size_t)x->cc.n_kv_heads *
           (size_t)x->cc.head_dim * sizeof(float) * 2;
}

/* ------------------------------------------------------------------------ */
/* Rows of keys: mask and attention shades, elided to fit the width          */

/* Label columns before a row of keys ("  mask   q@12        "). */
#define ROW_LABEL 22
/* Room kept after an attention row for "   max 0.58 at pos 123". */
#define ROW_TAIL 22
/* Held keys shown before the elision mark when a row does not fit. */
#define ROW_HEAD 4

/* How many key columns fit; mask and attention rows use the same, so their
 * columns line up. */
static int32_t row_room(const struct session *x)
{
    int32_t room = x->width - ROW_LABEL - ROW_TAIL;
    return room > ROW_HEAD + 2 ? room : ROW_HEAD + 2;
}

static int32_t count_held(const unsigned char *held, int32_t n)
{
    int32_t c = 0;
    for (int32_t s = 0; s < n; s++)
        c += held[s];
    return c;
}

/* For the k-th of n held keys: 0 show it, 1 print the elision mark '~'
 * (it stands for keys ROW_HEAD .. n - tail - 1), 2 skip it. */
static int row_slot(int32_t k, int32_t n, int32_t room)
{
    if (n <= room)
        return 0;
    int32_t tail = room - ROW_HEAD - 1;
    if (k < ROW_HEAD || k >= n - tail)
        return 0;
    return k == ROW_HEAD ? 1 : 2;
}

static void put_elision(const struct session *x)
{
    printf("%s~%s", x->S.yellow, x->S.reset);
}

/* Mask rows of one sequence, over the held key positions. */
static void print_mask(const struct session *x, const struct kv_demo_layer *lc, int32_t b)
{
    const struct kv_attn_params *p = &lc->ap;
    int32_t rows = p->n_q, n = count_held(lc->held, x->max_pos), room = row_room(x);
    for (int32_t i = 0; i < rows; i++) {
        if (rows > DEMO_MAX_MASK_ROWS && i == 2) {
            printf("  %-7s%-13s(%" PRId32 " more rows, one per query, the same pattern)\n",
                   "", "...", rows - 6);
            i = rows - 4;
        }
        int32_t qp = p->q_pos0 + i;
        char label[64];
        if (x->B > 1)
            snprintf(label, sizeof label, "s%" PRId32 " q@%" PRId32, b, qp);
        else
            snprintf(label, sizeof label, "q@%" PRId32, qp);
        printf("  %-7s%-13s", i == 0 && b == 0 ? "mask" : "", label);
        for (int32_t s = 0, k = 0; s < x->max_pos; s++) {
            if (!lc->held[s])
                continue;
            int what = row_slot(k++, n, room);
            if (what == 1)
                put_elision(x);
            if (what != 0)
                continue;
            int vis = kv_attn_key_visible(&lc->mask, b, qp, s);
            if (x->S.color)
                printf("%s%c%s", vis ? x->S.green : x->S.dim, vis ? '1' : '0', x->S.reset);
            else
                putchar(vis ? '1' : '0');
        }
        putchar('\n');
    }
}

static void print_weights(const struct session *x, const struct kv_demo_run *R, int32_t l,
                          int32_t b)
{
    const struct kv_demo_layer *lc = &R->lc[l];
    const float *w = lc->w + (size_t)b * x->max_pos;
    int32_t qp = lc->ap.q_pos0 + lc->ap.n_q - 1;
    int32_t n = count_held(lc->held, x->max_pos), room = row_room(x);
    char label[64];
    if (x->B > 1)
        snprintf(label, sizeof label, "L%" PRId32 " s%" PRId32 " q@%" PRId32, l, b, qp);
    else
        snprintf(label, sizeof label, "L%" PRId32 " q@%" PRId32, l, qp);
    printf("  %-7s%-13s", l == 0 && b == 0 ? "attn" : "", label);
    int32_t best = -1;
    for (int32_t s = 0; s < x->max_pos; s++) {
        if (lc->held[s] && w[s] >= 0.0f && (best < 0 || w[s] > w[best]))
            best = s;
    }
    for (int32_t s = 0, k = 0; s < x->max_pos; s++) {
        if (!lc->held[s])
            continue;
        int what = row_slot(k++, n, room);
        if (what == 1)
            put_elision(x);
        if (what == 0)
            put_shade(&x->S, w[s], best >= 0 ? w[best] : 0.0f);
    }
    if (best >= 0)
        printf("   max %.2f at pos %" PRId32, (double)w[best], best);
    putchar('\n');
}

/* What layer l holds after this step's update. */
static void print_cache_layer(struct session *x, const struct kv_demo_run *R, int32_t l)
{
    const struct kv_demo_layer *lc = &R->lc[l];
    const int32_t M = x->max_pos;
    struct kv_line *L = &x->L;
    kv_line_addf(L, "  %-7sL%-12" PRId32, l == 0 ? "cache" : "", l);
    if (!R->keeps) {
        kv_line_addf(L, "keeps nothing: K,V of pos ");
        line_ranges(L, lc->held, M);
        kv_line_addf(L, " recomputed this step, dropped after it");
        emit(x, ROW_LABEL);
        return;
    }
    /* this layer's own mask (a per-layer pattern has one per layer) */
    const int32_t window = lc->mask.window, sinks = lc->mask.n_sink;
    int any_q = 0;
    for (int32_t s = 0; s < M; s++)
        any_q |= lc->held_q[s];
    size_t res = kv_cache_layer_bytes(R->cache, l), sb = slot_bytes(x) / (size_t)x->cc.n_layers;
    int32_t held_n = count_held(lc->held, M);
    if (any_q) {
        unsigned char f32[4096] = {0}; /* only [0, n) is used */
        int32_t n = M < 4096 ? M : 4096;
        for (int32_t s = 0; s < n; s++)
            f32[s] = lc->held[s] && !lc->held_q[s];
        kv_line_addf(L, "%s pos ", kv_type_traits[lc->q_dtype].name);
        line_ranges(L, lc->held_q, M);
        kv_line_addf(L, " | f32 residual pos ");
        line_ranges(L, f32, n);
    } else if (window > 0) {
        /* Ring: slot = (pos - sinks) % window holds the newest held position;
         * attention sinks [0, sinks) stay in slots of their own. */
        int32_t shown = 0;
        if (sinks > 0) {
            kv_line_addf(L, "sinks [");
            for (int32_t s = 0; s < sinks && s < M; s++) {
                kv_line_addf(L, "%s%s", s ? " " : "", lc->held[s] ? "" : ".");
                if (lc->held[s]) {
                    kv_line_addf(L, "%" PRId32, s);
                    shown++;
                }
            }
            kv_line_addf(L, "] + ");
        }
        kv_line_addf(L, "ring [");
        for (int32_t slot = 0; slot < window; slot++) {
            int32_t pos = -1;
            for (int32_t s = sinks + slot; s < M; s += window)
                if (lc->held[s])
                    pos = s;
            kv_line_addf(L, "%s%s", slot ? " " : "", pos >= 0 ? "" : ".");
            if (pos >= 0) {
                kv_line_addf(L, "%" PRId32, pos);
                shown++;
            }
        }
        if (sinks > 0)
            kv_line_addf(L, "] slot = (pos - %" PRId32 ") %% %" PRId32, sinks, window);
        else
            kv_line_addf(L, "] slot = pos %% %" PRId32, window);
        if (held_n > shown)
            kv_line_addf(L, " (+%" PRId32 " new this step, passed through)", held_n - shown);
    } else {
        int32_t cap = sb > 0 && res % sb == 0 ? (int32_t)(res / sb) : -1;
        kv_line_addf(L, "f32 slots [");
        if (held_n <= 24) {
            int first = 1;
            for (int32_t s = 0; s < M; s++) {
                if (lc->held[s]) {
                    kv_line_addf(L, "%s%" PRId32, first ? "" : " ", s);
                    first = 0;
                }
            }
        } else {
            line_ranges(L, lc->held, M);
        }
        kv_line_addf(L, "]");
        if (lc->per_head) /* (h2o: its bytes count positions and scores too) */
            kv_line_addf(L, " kept by attention score, per kv head (shown: their union)");
        else if (cap >= 0)
            kv_line_addf(L, " %" PRId32 " of %" PRId32 " slots used", held_n, cap);
    }
    /* Evicted: held before or fed now, no longer held. */
    unsigned char *gone = R->gone;
    int ev = 0;
    for (int32_t s = 0; s < M; s++) {
        int before = lc->prev[s] || (s >= R->pos0 && s < R->pos0 + R->n_fed);
        gone[s] = before && !lc->held[s];
        ev |= gone[s];
    }
    if (ev) {
        kv_line_addf(L, "  %sevicted pos ", x->S.yellow);
        line_ranges(L, gone, M);
        kv_line_addf(L, "%s", x->S.reset);
    }
    emit(x, ROW_LABEL);
    if (any_q) {
        kv_line_addf(L, "  %-7s%-13s", "", "");
        if (lc->q_pos >= 0)
            kv_line_addf(L, "newest quantized pos %" PRId32 ": round-trip error max "
                            "|x - x'| = %.4f (half a quantization step: %.4f)",
                         lc->q_pos, (double)lc->q_err, (double)lc->q_half_step);
        else
            kv_line_addf(L, "newest quantized pos %" PRId32 ": quantized in the same "
                            "update it arrived (no f32 copy seen)", lc->q_newest);
        emit(x, ROW_LABEL);
    }
}

static int64_t flops_of(const struct kv_step_stats *st) { return kv_flops_total(&st->flops); }

/* The full per-step report. */
static void print_step(struct session *x, const struct kv_demo_run *R,
                       const struct kv_demo_run *ref, int32_t step, const int32_t *seq)
{
    const struct style *S = &x->S;
    struct kv_line *L = &x->L;
    char buf[64];
    const int32_t T = x->P + step;
    /* the rule: 50 dashes after the label, fewer when the width is narrower */
    int head = printf("\n%s-- step %" PRId32 " %s", S->bold, step, step == 0 ? "(prefill) " : "");
    head -= 1 + (int)strlen(S->bold); /* the newline and the escape take no column */
    for (int i = 0; i < 50 && head + i < x->width; i++)
        putchar('-');
    printf("%s\n", S->reset);
    /* What is fed. */
    kv_line_addf(L, "  %-20s", "fed");
    if (step > 0 && R->n_fed == 1) {
        kv_line_addf(L, "1 token %s at pos %" PRId32,
                     tok_after(x, seq, 0, T - 1, seq_tok(x, seq, 0, T - 1), buf, sizeof buf),
                     T - 1);
        kv_line_addf(L, "  %s(without a cache: all %" PRId32 " tokens, pos 0..%" PRId32 ")%s",
                     S->dim, T, T - 1, S->reset);
    } else {
        kv_line_addf(L, "%" PRId32 " token%s, pos 0..%" PRId32, R->n_fed,
                     R->n_fed == 1 ? "" : "s", T - 1);
        if (step > 0)
            kv_line_addf(L, "  %s(no cache: the whole sequence again, every layer "
                            "recomputes K and V)%s", S->dim, S->reset);
    }
    emit(x, ROW_LABEL);
    /* Shape and mask. */
    const struct kv_demo_layer *lc0 = &R->lc[0];
    int32_t n_keys = count_held(lc0->held, x->max_pos), room = row_room(x);
    kv_line_addf(L, "  %-20s(new, past+new) = (%" PRId32 ", %" PRId32 ")", "attention shape",
                 lc0->ap.n_q, n_keys);
    kv_line_addf(L, " = %" PRId32 " past + %" PRId32 " new", n_keys - lc0->ap.n_q, lc0->ap.n_q);
    if (lc0->mask.window > 0)
        kv_line_addf(L, ", window %" PRId32, lc0->mask.window);
    kv_line_addf(L, ", keys at pos ");
    line_ranges(L, lc0->held, x->max_pos);
    kv_line_addf(L, " (%" PRId32 " span%s)", lc0->n_spans, lc0->n_spans == 1 ? "" : "s");
    if (n_keys > room)
        kv_line_addf(L, "; rows show the first %d and the last %" PRId32 " keys, %s~%s stands "
                        "for the %" PRId32 " between", ROW_HEAD, room - ROW_HEAD - 1, S->yellow,
                     S->reset, n_keys - room + 1);
    emit(x, ROW_LABEL);
    for (int32_t b = 0; b < x->B; b++)
        print_mask(x, lc0, b);
    for (int32_t l = 0; l < x->model->cfg.n_layers; l++)
        for (int32_t b = 0; b < x->B; b++)
            print_weights(x, R, l, b);
    for (int32_t l = 0; l < x->model->cfg.n_layers; l++)
        print_cache_layer(x, R, l);
    /* Memory and FLOPs. */
    size_t copied = kv_cache_copied_bytes(R->cache);
    kv_line_addf(L, "  %-20sresident %zu B, written by updates %zu B this step (%zu B in total)",
                 "memory", kv_cache_resident_bytes(R->cache), copied - R->copied_before, copied);
    emit(x, ROW_LABEL);
    int64_t f = flops_of(&R->st), fn = flops_of(&ref->st);
    kv_line_addf(L, "  %-20sthis step %" PRId64 " (attention %" PRId64 ")   without a cache %"
                 PRId64 " (attention %" PRId64 ")",
                 "FLOPs", f, R->st.flops.attn, fn, ref->st.flops.attn);
    if (f > 0 && fn != f)
        kv_line_addf(L, "   %s%.1fx%s", S->bold, (double)fn / (double)f, S->reset);
    emit(x, ROW_LABEL);
    kv_line_addf(L, "  %-20sso far %" PRId64 "   without a cache %" PRId64, "",
                 flops_of(&R->total), flops_of(&ref->total));
    emit(x, ROW_LABEL);
    /* Next token, against the no-cache reference. */
    kv_line_addf(L, "  %-20s", "next token");
    for (int32_t b = 0; b < x->B; b++) {
        if (x->B > 1)
            kv_line_addf(L, "%ss%" PRId32 " ", b ? "  " : "", b);
        kv_line_addf(L, "%s%s%s (%" PRId32 ")", S->cyan,
                     tok_after(x, seq, b, T, R->next[b], buf, sizeof buf), S->reset,
                     R->next[b]);
    }
    if (ref != R) {
        size_t V = (size_t)x->model->cfg.vocab_size;
        float d = max_abs_diff(R->logits, ref->logits, (size_t)x->B * V);
        int same = memcmp(R->next, ref->next, (size_t)x->B * sizeof(int32_t)) == 0;
        if (same)
            kv_line_addf(L, "   %ssame as without a cache%s", S->green, S->reset);
        else
            kv_line_addf(L, "   %sdiffers from without a cache: %s%s", S->red,
                         tok_text(&x->vv, -1, ref->next[0], buf, sizeof buf), S->reset);
        kv_line_addf(L, " (max |logit diff| %.2g)", (double)d);
    }
    emit(x, ROW_LABEL);
}

/* ------------------------------------------------------------------------ */
/* The brief table: one line per step, columns dropped to fit the width     */

enum brief_col {
    BC_STEP, BC_T, BC_FED, BC_SHAPE, BC_ATTN, BC_FLOPS, BC_NOCACHE, BC_RATIO, BC_CACHE,
    BC_WRITTEN, BC_US, BC_COUNT
};
static const struct {
    const char *name;
    int width;
} brief_cols[BC_COUNT] = {
    [BC_STEP] = {"step", 5},      [BC_T] = {"T", 5},           [BC_FED] = {"fed", 5},
    [BC_SHAPE] = {"attn shape", 11}, [BC_ATTN] = {"attn FLOPs", 10}, [BC_FLOPS] = {"FLOPs", 10},
    [BC_NOCACHE] = {"no cache", 10}, [BC_RATIO] = {"ratio", 6}, [BC_CACHE] = {"cache B", 8},
    [BC_WRITTEN] = {"written B", 9}, [BC_US] = {"us", 7},
};
/* Dropped first when the table is too wide, in this order. */
static const enum brief_col brief_drop[] = {BC_ATTN, BC_WRITTEN, BC_SHAPE, BC_T};
/* Room kept for the next token after the columns. */
#define BRIEF_TOKEN 10

static void brief_layout(const struct session *x, int on[BC_COUNT])
{
    int w = BRIEF_TOKEN;
    for (int c = 0; c < BC_COUNT; c++) {
        on[c] = c != BC_US || x->o->show_time;
        w += on[c] ? brief_cols[c].width + 1 : 0;
    }
    for (size_t k = 0; k < sizeof brief_drop / sizeof brief_drop[0] && w > x->width; k++) {
        on[brief_drop[k]] = 0;
        w -= brief_cols[brief_drop[k]].width + 1;
    }
}

static void print_brief_header(struct session *x)
{
    int on[BC_COUNT];
    brief_layout(x, on);
    printf("\n%s", x->S.bold);
    for (int c = 0; c < BC_COUNT; c++)
        if (on[c])
            printf("%s%*s", c ? " " : "", brief_cols[c].width, brief_cols[c].name);
    printf("  %s%s\n", "next", x->S.reset);
    int dropped = 0;
    for (int c = 0; c < BC_COUNT; c++)
        dropped += !on[c] && (c != BC_US || x->o->show_time);
    if (dropped) {
        kv_line_addf(&x->L, "%s(%d column%s left out to fit %d columns:", x->S.dim, dropped,
                     dropped == 1 ? "" : "s", x->width);
        for (int c = 0; c < BC_COUNT; c++)
            if (!on[c] && (c != BC_US || x->o->show_time))
                kv_line_addf(&x->L, " %s", brief_cols[c].name);
        kv_line_addf(&x->L, ")%s", x->S.reset);
        emit(x, 1);
    }
}

static void print_brief(const struct session *x, const struct kv_demo_run *R,
                        const struct kv_demo_run *ref, int32_t step, const int32_t *seq)
{
    char buf[64], shape[32];
    const int32_t T = x->P + step;
    int32_t n_keys = count_held(R->lc[0].held, x->max_pos);
    snprintf(shape, sizeof shape, "(%" PRId32 ",%" PRId32 ")", R->lc[0].ap.n_q, n_keys);
    int64_t f = flops_of(&R->st), fn = flops_of(&ref->st);
    int on[BC_COUNT];
    brief_layout(x, on);
    for (int c = 0; c < BC_COUNT; c++) {
        if (!on[c])
            continue;
        int w = brief_cols[c].width;
        const char *sep = c ? " " : "";
        switch ((enum brief_col)c) {
        case BC_STEP: printf("%s%*" PRId32, sep, w, step); break;
        case BC_T: printf("%s%*" PRId32, sep, w, T); break;
        case BC_FED: printf("%s%*" PRId32, sep, w, R->n_fed); break;
        case BC_SHAPE: printf("%s%*s", sep, w, shape); break;
        case BC_ATTN: printf("%s%*" PRId64, sep, w, R->st.flops.attn); break;
        case BC_FLOPS: printf("%s%*" PRId64, sep, w, f); break;
        case BC_NOCACHE: printf("%s%*" PRId64, sep, w, fn); break;
        case BC_RATIO: printf("%s%*.1fx", sep, w - 1, f > 0 ? (double)fn / (double)f : 0.0); break;
        case BC_CACHE: printf("%s%*zu", sep, w, kv_cache_resident_bytes(R->cache)); break;
        case BC_WRITTEN: printf("%s%*zu", sep, w, kv_cache_copied_bytes(R->cache)); break;
        case BC_US: printf("%s%*.0f", sep, w, (double)R->step_ns / 1e3); break;
        case BC_COUNT: break;
        }
    }
    printf("  %s", tok_after(x, seq, 0, T, R->next[0], buf, sizeof buf));
    if (ref != R && R->next[0] != ref->next[0])
        printf("  %s(without a cache: %s)%s", x->S.red,
               tok_text(&x->vv, -1, ref->next[0], buf, sizeof buf), x->S.reset);
    putchar('\n');
}

/* ------------------------------------------------------------------------ */
/* Walk one strategy                                                        */

static void append_next(struct session *x, int32_t *seq, const struct kv_demo_run *R, int32_t T)
{
    for (int32_t b = 0; b < x->B; b++)
        seq[(size_t)b * x->stride + T] = R->next[b];
}

static int report_failure(struct session *x, const struct kv_demo_run *R, int32_t step,
                          enum kv_status s)
{
    fflush(stdout);
    if (s == KV_ERR_FULL) {
        printf("\n");
        kv_line_addf(&x->L, "%s-- step %" PRId32 ": the %s cache is full%s: it holds %" PRId32
                            " preallocated slots and position %" PRId32 " does not fit.",
                     x->S.red, step, R->name, x->S.reset, R->cache->cfg.max_len, x->P + step - 1);
        emit(x, 3);
        kv_line_addf(&x->L, "   kv_cache_update returned KV_ERR_FULL, wrote nothing, and the "
                            "walk stops here (a static cache never grows).");
        emit(x, 3);
        fflush(stdout);
    }
    fprintf(stderr, "kvlab: demo: step %" PRId32 " with %s: %s\n", step, R->name,
            kv_status_str(s));
    return 1;
}

/* "generated ..." of sequence 0 from position P to P + steps. */
static void line_generated(struct session *x, const int32_t *seq, int32_t steps)
{
    char buf[64];
    if (bytes_vocab(x)) {
        kv_line_addf(&x->L, " ");
        line_bytes(&x->L, seq + x->P, steps + 1);
        return;
    }
    for (int32_t t = x->P; t <= x->P + steps; t++) {
        if (steps >= 24 && t == x->P + 12) {
            kv_line_addf(&x->L, " ...");
            t = x->P + steps - 8;
            continue;
        }
        kv_line_addf(&x->L, " %s", tok_after(x, seq, 0, t, seq_tok(x, seq, 0, t), buf,
                                             sizeof buf));
    }
}

/* Exit 1 when a step's logits hold a NaN or infinity (weights are checked
 * finite at load, so this is an overflow): greedy decoding would pick token
 * 0 and every comparison would be meaningless. 0 when all are finite. */
static int check_logits(const struct session *x, const struct kv_demo_run *R, int32_t step)
{
    size_t n = (size_t)x->B * (size_t)x->model->cfg.vocab_size;
    if (kv_first_nonfinite(R->logits, n) == n)
        return 0;
    fflush(stdout);
    fprintf(stderr, "kvlab: demo: step %" PRId32 " with %s: the logits are not finite (NaN "
                    "or infinity); stopping\n", step, R->name);
    return 1;
}

static int walk(struct session *x, const char *name, const void *params)
{
    struct demo_opts *o = x->o;
    struct kv_demo_run R, ref;
    int rc = 0;
    struct kv_cache_config cc = cc_of(x, name);
    enum kv_status s = kv_demo_run_create(&R, name, params, x->model, &cc, x->B, x->P,
                                          x->max_pos, 1);
    int own_ref = s == KV_OK && R.keeps;
    if (s == KV_OK && own_ref) {
        /* FLOPs without a cache: a strategy that keeps no history */
        const struct kv_strategy_ops *nc = kv_strategy_with(0, KV_CAP_KEEPS_HISTORY);
        struct kv_cache_config rc_cfg = x->cc;
        rc_cfg.max_len = x->model->cfg.max_len;
        s = nc == NULL ? KV_ERR_INVALID
                       : kv_demo_run_create(&ref, nc->name, NULL, x->model, &rc_cfg, x->B, x->P,
                                            x->max_pos, 0);
    }
    if (s != KV_OK) {
        fprintf(stderr, "kvlab: demo: cannot set up strategy %s: %s\n", name, kv_status_str(s));
        kv_demo_run_destroy(&R);
        if (own_ref)
            kv_demo_run_destroy(&ref);
        return s == KV_ERR_NOMEM ? 1 : 2;
    }
    const struct kv_demo_run *refp = own_ref ? &ref : &R;
    print_model_line(x);
    print_cache_config(x, &R);
    if (o->brief)
        print_brief_header(x);
    for (int32_t step = 0; step <= o->steps; step++) {
        s = kv_demo_run_step(&R, step, x->seq_a, x->stride, x->B > 1 ? x->pad : NULL);
        if (s != KV_OK) {
            rc = report_failure(x, &R, step, s);
            break;
        }
        if ((rc = check_logits(x, &R, step)) != 0)
            break;
        if (own_ref) {
            s = kv_demo_run_step(&ref, step, x->seq_a, x->stride, x->B > 1 ? x->pad : NULL);
            if (s != KV_OK) {
                rc = report_failure(x, &ref, step, s);
                break;
            }
            if ((rc = check_logits(x, &ref, step)) != 0)
                break;
        }
        int show = step == 0 || step == o->steps || o->every == 0 || step % o->every == 0;
        if (show && o->brief)
            print_brief(x, &R, refp, step, x->seq_a);
        else if (show)
            print_step(x, &R, refp, step, x->seq_a);
        append_next(x, x->seq_a, &R, x->P + step);
    }
    if (rc == 0) {
        struct kv_line *L = &x->L;
        printf("\n");
        kv_line_addf(L, "%ssummary%s  %s, %" PRId32 " steps: generated", x->S.bold, x->S.reset,
                     name, o->steps + 1);
        line_generated(x, x->seq_a, o->steps);
        emit(x, 9);
        int64_t f = flops_of(&R.total), fn = flops_of(&refp->total);
        kv_line_addf(L, "  FLOPs %" PRId64 " in total, %" PRId64 " without a cache", f, fn);
        if (f > 0 && f != fn)
            kv_line_addf(L, " (%.1fx more)", (double)fn / (double)f);
        kv_line_addf(L, "; tokens fed %" PRId64 " vs %" PRId64, R.total.tokens_fed,
                     refp->total.tokens_fed);
        emit(x, 2);
        kv_line_addf(L, "  cache resident %zu B at the end, %zu B written by updates",
                     kv_cache_resident_bytes(R.cache), kv_cache_copied_bytes(R.cache));
        emit(x, 2);
        if (!R.keeps) {
            kv_line_addf(L, "  %swhy each step costs more than the last:%s without a cache, "
                            "step s feeds all P+s tokens again, so every layer recomputes "
                            "their K and V (projection and MLP FLOPs grow like s); its (P+s) "
                            "queries attend over (P+s)(P+s+1)/2 query-key pairs (attention "
                            "FLOPs grow like s^2). A cache feeds one token per step: P+s "
                            "pairs and one row of projections.",
                         x->S.bold, x->S.reset);
            emit(x, 2);
        }
    }
    kv_demo_run_destroy(&R);
    if (own_ref)
        kv_demo_run_destroy(&ref);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Compare two strategies                                                   */

/* Side by side (one line per step) needs this many columns; narrower
 * terminals get one line per strategy and step. */
static int cmp_wide_width(int wa, int wb) { return 12 + (wa + 31) + 3 + (wb + 31) + 3 + 11; }

struct cmp_row {
    const char *tok;
    int32_t fed;
    int64_t flops;
    size_t cache, written;
};

static struct cmp_row cmp_row_of(const struct kv_demo_run *R, const char *tok)
{
    return (struct cmp_row){tok, R->n_fed, flops_of(&R->st), kv_cache_resident_bytes(R->cache),
                            kv_cache_copied_bytes(R->cache)};
}

static void print_cmp_header(const struct session *x, int wide, int wa, int wb, const char *na,
                             const char *nb)
{
    const struct style *S = &x->S;
    if (wide)
        printf("\n%s%4s %4s | %-*s %4s %9s %8s %7s | %-*s %4s %9s %8s %7s | %s%s\n", S->bold,
               "step", "T", wa, na, "fed", "FLOPs", "cache B", "written", wb, nb, "fed",
               "FLOPs", "cache B", "written", "max|dlogit|", S->reset);
    else
        printf("\n%s%4s %5s  %-*s %-8s %4s %9s %7s %8s  %s%s\n", S->bold, "step", "T",
               wa > wb ? wa : wb, "strategy", "next", "fed", "FLOPs", "cache B", "written",
               "max|dlogit|", S->reset);
}

/* One step of the table; dlogit_or_dash printed last (already formatted). */
static void print_cmp_step(const struct session *x, int wide, int wa, int wb, const char *na,
                           const char *nb, int32_t step, int32_t T, const struct cmp_row *a,
                           const struct cmp_row *b, const char *dl, int diverge)
{
    const struct style *S = &x->S;
    if (wide) {
        printf("%4" PRId32 " %4" PRId32 " | %-*s %4" PRId32 " %9" PRId64 " %8zu %7zu | %-*s %4"
               PRId32 " %9" PRId64 " %8zu %7zu | %s",
               step, T, wa, a->tok, a->fed, a->flops, a->cache, a->written, wb, b->tok, b->fed,
               b->flops, b->cache, b->written, dl);
    } else {
        int w = wa > wb ? wa : wb;
        printf("%4" PRId32 " %5" PRId32 "  %-*s %-8s %4" PRId32 " %9" PRId64 " %7zu %8zu\n", step,
               T, w, na, a->tok, a->fed, a->flops, a->cache, a->written);
        printf("%4s %5s  %-*s %-8s %4" PRId32 " %9" PRId64 " %7zu %8zu  %s", "", "", w, nb,
               b->tok, b->fed, b->flops, b->cache, b->written, dl);
    }
    if (diverge && wide)
        printf("  %s<- tokens diverge%s", S->red, S->reset);
    putchar('\n');
    if (diverge && !wide)
        printf("%12s%s^ the tokens diverge at this step%s\n", "", S->red, S->reset);
}

static int compare(struct session *x, const char *na, const void *pa, const char *nb,
                   const void *pb)
{
    struct demo_opts *o = x->o;
    struct kv_demo_run A, B;
    memset(&B, 0, sizeof B);
    struct kv_cache_config ca = cc_of(x, na), cb = cc_of(x, nb);
    enum kv_status s = kv_demo_run_create(&A, na, pa, x->model, &ca, x->B, x->P,
                                          x->max_pos, 1);
    if (s == KV_OK)
        s = kv_demo_run_create(&B, nb, pb, x->model, &cb, x->B, x->P, x->max_pos, 1);
    if (s != KV_OK) {
        fprintf(stderr, "kvlab: demo: cannot set up %s and %s: %s\n", na, nb, kv_status_str(s));
        kv_demo_run_destroy(&A);
        kv_demo_run_destroy(&B);
        return s == KV_ERR_NOMEM ? 1 : 2;
    }
    print_model_line(x);
    print_cache_config(x, &A);
    print_cache_config(x, &B);
    const struct style *S = &x->S;
    const int wa = strlen(na) > 8 ? (int)strlen(na) : 8;
    const int wb = strlen(nb) > 8 ? (int)strlen(nb) : 8;
    const int wide = x->width >= cmp_wide_width(wa, wb);
    print_cmp_header(x, wide, wa, wb, na, nb);
    int32_t diverged = -1, logit_diff = -1, rc = 0;
    float worst = 0.0f;
    int32_t last_step = -1;
    for (int32_t step = 0; step <= o->steps; step++) {
        enum kv_status sa = kv_demo_run_step(&A, step, x->seq_a, x->stride, x->B > 1 ? x->pad : NULL);
        enum kv_status sb = sa == KV_OK ? kv_demo_run_step(&B, step, x->seq_b, x->stride,
                                                   x->B > 1 ? x->pad : NULL)
                                        : KV_OK;
        if (sa != KV_OK || sb != KV_OK) {
            rc = report_failure(x, sa != KV_OK ? &A : &B, step, sa != KV_OK ? sa : sb);
            break;
        }
        if ((rc = check_logits(x, &A, step)) != 0 || (rc = check_logits(x, &B, step)) != 0)
            break;
        last_step = step;
        const int32_t T = x->P + step;
        size_t V = (size_t)x->model->cfg.vocab_size;
        float d = max_abs_diff(A.logits, B.logits, (size_t)x->B * V);
        int same_hist = diverged < 0;
        /* !(d <= x): a NaN difference counts, it never reads as "rounding" */
        if (same_hist && !(d <= worst))
            worst = d;
        if (same_hist && logit_diff < 0 && !(d <= DEMO_SAME_LOGIT))
            logit_diff = step;
        int same_tok = memcmp(A.next, B.next, (size_t)x->B * sizeof(int32_t)) == 0;
        int show = step == 0 || step == o->steps || o->every == 0 || step % o->every == 0 ||
                   (same_hist && !same_tok);
        if (show) {
            char ta[64], tb[64], dl[48];
            struct cmp_row ra = cmp_row_of(&A, tok_after(x, x->seq_a, 0, T, A.next[0], ta,
                                                         sizeof ta));
            struct cmp_row rb = cmp_row_of(&B, tok_after(x, x->seq_b, 0, T, B.next[0], tb,
                                                         sizeof tb));
            if (same_hist)
                snprintf(dl, sizeof dl, "%s%.1e%s", !(d <= DEMO_SAME_LOGIT) ? S->yellow : "",
                         (double)d, S->reset);
            else
                snprintf(dl, sizeof dl, "-");
            print_cmp_step(x, wide, wa, wb, na, nb, step, T, &ra, &rb, dl,
                           same_hist && !same_tok);
        }
        if (same_hist && !same_tok)
            diverged = step;
        append_next(x, x->seq_a, &A, T);
        append_next(x, x->seq_b, &B, T);
    }
    if (last_step >= 0) {
        struct kv_line *L = &x->L;
        printf("\n");
        kv_line_addf(L, "%sverdict%s  ", S->bold, S->reset);
        if (diverged < 0)
            kv_line_addf(L, "%s%s and %s chose the same %" PRId32 " tokens%s", S->green, na, nb,
                         last_step + 1, S->reset);
        else
            kv_line_addf(L, "%stokens diverge at step %" PRId32 " (T = %" PRId32 ")%s", S->red,
                         diverged, x->P + diverged, S->reset);
        kv_line_addf(L, "; max |logit difference| while their inputs were identical: %.2g",
                     (double)worst);
        if (logit_diff >= 0)
            kv_line_addf(L, " (first above %.0e at step %" PRId32 ", T = %" PRId32 ")",
                         (double)DEMO_SAME_LOGIT, logit_diff, x->P + logit_diff);
        else
            kv_line_addf(L, " (float rounding only)");
        emit(x, 9);
        if (bytes_vocab(x)) { /* the text itself, when it is text */
            kv_line_addf(L, "  %s:", diverged >= 0 ? na : "text");
            line_generated(x, x->seq_a, last_step);
            emit(x, 4);
            if (diverged >= 0) {
                kv_line_addf(L, "  %s:", nb);
                line_generated(x, x->seq_b, last_step);
                emit(x, 4);
            }
        }
        kv_line_addf(L, "  FLOPs in total: %s %" PRId64 ", %s %" PRId64 "; cache at the end: "
                        "%s %zu B, %s %zu B; bytes written by updates: %s %zu, %s %zu",
                     na, flops_of(&A.total), nb, flops_of(&B.total), na,
                     kv_cache_resident_bytes(A.cache), nb, kv_cache_resident_bytes(B.cache), na,
                     kv_cache_copied_bytes(A.cache), nb, kv_cache_copied_bytes(B.cache));
        emit(x, 4);
    }
    kv_demo_run_destroy(&A);
    kv_demo_run_destroy(&B);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Entry                                                                    */

static void session_free(struct session *x)
{
    kv_tokenizer_destroy(x->tok);
    kv_model_destroy(x->model);
    kv_free(x->seq_a);
    kv_free(x->seq_b);
}

/* Estimated FLOPs of walking strategy `name` through every step. */
static double run_flops(const struct session *x, const struct kv_strategy_ops *ops)
{
    const struct kv_model_config *c = &x->model->cfg;
    int keeps = (ops->caps & KV_CAP_KEEPS_HISTORY) != 0;
    double f = kv_model_forward_flops(c, x->B, x->P, 0);
    for (int32_t s = 1; s <= x->o->steps; s++)
        f += keeps ? kv_model_forward_flops(c, x->B, 1, x->P + s - 1)
                   : kv_model_forward_flops(c, x->B, x->P + s, 0);
    return f;
}

/* Builds the prompt ids of sequence 0 into ids; returns count or -1. */
static int32_t prompt_ids(struct session *x, int32_t *ids, int32_t cap)
{
    struct demo_opts *o = x->o;
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

/* The walks of the cache operations (demo_ops.c), after their own checks:
 * the counts against the model, the operation the walk needs by capability.
 * Returns the exit status. */
static int ops_walk(struct session *x, const struct kv_cli_strategy *st, const int32_t *ids,
                    int32_t n)
{
    const struct demo_opts *o = x->o;
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
    if ((caps & need) != need || (o->draft_layers > 0 && (caps & (KV_CAP_LOSSY | KV_CAP_EVICTS)))) {
        fprintf(stderr, "kvlab: demo: strategy '%s' does not support %s as %s needs\n",
                st->ops->name, o->draft_layers > 0 ? "crop to any length" : "reorder", mode);
        return 2;
    }
    const struct kv_demo_ops_req r = {
        .m = x->model, .ops = st->ops, .params = st->params, .cc = x->cc, .prompt = ids,
        .prompt_len = n, .steps = o->steps, .batch = o->beams > 0 ? o->beams : x->B,
        .beams = o->beams, .draft_layers = o->draft_layers,
        .draft_tokens = o->draft_tokens > 0 ? o->draft_tokens : 3, .seed = o->c.seed,
        .byte_vocab = bytes_vocab(x), .width = x->width, .out = stdout};
    const struct kv_model_config *c = &x->model->cfg;
    kv_line_addf(&x->L, "model  %s: %" PRId32 " layers, %" PRId32 " heads (%" PRId32
                 " kv heads) x head_dim %" PRId32 ", vocab %" PRId32,
                 o->c.model_path ? o->c.model_path : "synthetic", c->n_layers, c->n_heads,
                 c->n_kv_heads, c->dim / c->n_heads, c->vocab_size);
    emit(x, 7);
    if (x->width_note[0] != '\0')
        kv_progress("%s", x->width_note);
    return kv_demo_ops(&r); /* main checks that stdout took it (kv_cli_finish) */
}

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
    struct session x;
    memset(&x, 0, sizeof x);
    x.o = &o;
    const char *no_color = getenv("NO_COLOR");
    int use_color = o.color >= 0 ? o.color
                                 : (isatty(STDOUT_FILENO) &&
                                    (no_color == NULL || no_color[0] == '\0'));
    x.S = style_make(use_color);
    x.width = demo_width(o.width, x.width_note, sizeof x.width_note);
    const char *strategy = o.c.strategy != NULL ? o.c.strategy : demo_default_strategy();
    if (o.c.model_path != NULL) {
        int lrc = kv_cli_load_model("demo", o.c.model_path, &x.model);
        if (lrc != 0)
            return lrc;
        o.c.model = x.model->cfg;
    } else if (o.c.tokenizer_path != NULL && o.c.model.vocab_size == 256) {
        /* a tokenizer without a model: keep the synthetic model's vocab */
    }
    struct kv_cli_common chk = o.c;
    struct kv_cli_strategy sa, sb;
    chk.strategy = o.compare ? name_a : strategy;
    if (kv_cli_check_common(&chk) != 0 || kv_cli_strategy(&chk, chk.strategy, &sa) != 0) {
        session_free(&x);
        return 2;
    }
    if (o.compare) {
        chk.strategy = name_b;
        if (kv_cli_check_common(&chk) != 0 || kv_cli_strategy(&chk, name_b, &sb) != 0) {
            session_free(&x);
            return 2;
        }
    }
    if (x.model == NULL) {
        if (kv_cli_check_memory("demo: the model", kv_model_weight_bytes(&o.c.model)) != 0) {
            session_free(&x);
            return 2;
        }
        enum kv_status s = kv_model_create_synthetic(&x.model, &o.c.model, o.c.seed);
        if (s != KV_OK) {
            fprintf(stderr, "kvlab: demo: cannot build the model: %s\n", kv_status_str(s));
            return 1;
        }
    }
    if (o.c.tokenizer_path != NULL) {
        int lrc = kv_cli_load_tokenizer("demo", o.c.tokenizer_path, x.model->cfg.vocab_size,
                                        &x.tok);
        if (lrc != 0) {
            session_free(&x);
            return lrc;
        }
    }
    x.vv = (struct vocab_view){x.tok, x.model->cfg.vocab_size};

    /* the operation walks' default prompt leaves a partly filled block at
     * block sizes 2, 4, 8 and 16 (9 tokens), so copy-on-write shows */
    if ((o.shared || o.beams > 0 || o.draft_layers > 0) && o.prompt == NULL &&
        o.prompt_tokens == NULL)
        x.o->prompt = "shared KV";
    int32_t ids[DEMO_MAX_PROMPT];
    int32_t n = prompt_ids(&x, ids, DEMO_MAX_PROMPT);
    if (n < 1) {
        if (n == 0)
            fprintf(stderr, "kvlab: demo: the prompt encodes to no tokens\n");
        session_free(&x);
        return 2;
    }
    x.B = o.c.batch;
    x.P = n;
    x.max_pos = n + o.steps;
    if (x.max_pos > x.model->cfg.max_len) {
        fprintf(stderr, "kvlab: demo: %" PRId32 " prompt tokens + --steps %" PRId32
                        " exceed the model's %" PRId32 " positions (--max-len)\n",
                n, o.steps, x.model->cfg.max_len);
        session_free(&x);
        return 2;
    }
    x.stride = x.max_pos + 1;
    x.seq_a = kv_alloc((size_t)x.B * (size_t)x.stride * sizeof(int32_t));
    x.seq_b = kv_alloc((size_t)x.B * (size_t)x.stride * sizeof(int32_t));
    if (x.seq_a == NULL || x.seq_b == NULL) {
        fprintf(stderr, "kvlab: demo: out of memory\n");
        session_free(&x);
        return 1;
    }
    /* Sequence b: the prompt without its first 2b tokens, left-padded with 0. */
    for (int32_t b = 0; b < x.B; b++) {
        int32_t pad = 2 * b < n - 1 ? 2 * b : n - 1;
        x.pad[b] = pad;
        int32_t *row = x.seq_a + (size_t)b * x.stride;
        for (int32_t t = 0; t < n; t++)
            row[t] = t < pad ? 0 : ids[t];
        memcpy(x.seq_b + (size_t)b * x.stride, row, (size_t)n * sizeof(int32_t));
    }
    x.cc = o.c.cache;
    x.cc.n_layers = x.model->cfg.n_layers;
    x.cc.batch = x.B;
    x.cc.n_kv_heads = x.model->cfg.n_kv_heads;
    x.cc.head_dim = x.model->cfg.dim / x.model->cfg.n_heads;
    x.cc.max_len = x.model->cfg.max_len; /* --slots: cc_of, for static only */
    /* each strategy shown, against the model that really runs (a --model
     * checkpoint's head_dim for --group), with its cache's bytes */
    for (int k = 0; k < 1 + (o.compare != NULL); k++) {
        const struct kv_cli_strategy *st = k == 0 ? &sa : &sb;
        struct kv_cache_config cc = cc_of(&x, k == 0 ? (o.compare ? name_a : strategy) : name_b);
        int crc = kv_cli_check_strategy("demo", st->ops, st->params, &cc, x.max_pos, 1, NULL);
        if (crc != 0) {
            session_free(&x);
            return crc;
        }
    }

    if (o.shared || o.beams > 0 || o.draft_layers > 0) {
        int orc = ops_walk(&x, &sa, ids, n);
        session_free(&x);
        return orc;
    }

    /* the hidden reference: a strategy that keeps no history, as walk() picks */
    const struct kv_strategy_ops *nc = kv_strategy_with(0, KV_CAP_KEEPS_HISTORY);
    double work = o.compare ? run_flops(&x, sa.ops) + run_flops(&x, sb.ops)
                            : run_flops(&x, sa.ops) +
                                  ((sa.ops->caps & KV_CAP_KEEPS_HISTORY) && nc != NULL
                                       ? run_flops(&x, nc) : 0.0);
    if (!(work <= DEMO_MAX_FLOPS)) {
        fprintf(stderr, "kvlab: demo: --steps %" PRId32 " on this model would take about %.1e "
                        "FLOPs (%s), more than the demo's %.0e; use fewer --steps or a "
                        "smaller model\n", o.steps, work,
                o.compare ? "both strategies" : "with the no-cache reference", DEMO_MAX_FLOPS);
        session_free(&x);
        return 2;
    }
    if (x.width_note[0] != '\0')
        kv_progress("%s", x.width_note);
    int rc = o.compare ? compare(&x, name_a, sa.params, name_b, sb.params)
                       : walk(&x, strategy, sa.params);
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
