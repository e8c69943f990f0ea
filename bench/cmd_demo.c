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
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "cli_opts.h"
#include "commands.h"
#include "demo.h"
#include "tokenizer.h"

/* Logit differences below this are float rounding between two exact
 * strategies (different summation order), not a change of output. */
#define DEMO_SAME_LOGIT 1e-4f
#define DEMO_MAX_BATCH 4
#define DEMO_MAX_MASK_ROWS 8
#define DEMO_MAX_PROMPT 256

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

/* "0..5 8 10..12" for the set bits of held[0..n). */
static void print_ranges(const unsigned char *held, int32_t n)
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
        printf(first ? "" : " ");
        if (j == i)
            printf("%" PRId32, i);
        else
            printf("%" PRId32 "..%" PRId32, i, j);
        first = 0;
        i = j + 1;
    }
    if (first)
        printf("-");
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
};

static void usage(FILE *f)
{
    fprintf(f,
        "usage: kvlab demo [--strategy NAME] [--steps N] [--window W] [--bits B]\n"
        "                  [--compare A,B] [--prompt TEXT | --prompt-tokens ID,...]\n"
        "                  [--model FILE.bin [--tokenizer TOK.bin]] [model options]\n"
        "\n"
        "Walks a tiny model (2 layers, 2 heads, head_dim 8, vocab 256) through greedy\n"
        "generation one step at a time and prints, per step: what is fed, the\n"
        "attention shape (new, past+new), the mask rows (1 visible, 0 masked), what\n"
        "each layer's cache holds, the newest query's attention weights as a shade\n"
        "row ('.:-=+*#%%@', relative to the row's largest weight; '_' masked), and\n"
        "the step's FLOPs next to "
        "the FLOPs of the same step without a cache.\n"
        "\n"
        "  --strategy NAME   cache strategy (default dynamic; see 'kvlab strategies')\n"
        "  --steps N         decode steps after the prefill (default 6)\n"
        "  --compare A,B     run two strategies side by side, show where they diverge\n"
        "  --prompt TEXT     prompt (default \"KV cache\"; bytes, or the tokenizer's BPE)\n"
        "  --prompt-tokens L comma-separated token ids instead of a prompt text\n"
        "  --slots N         static: preallocated slots (default --max-len)\n"
        "  --batch B         B sequences (<= 4); sequence b drops the first 2b prompt\n"
        "                    tokens and is left-padded, to show padding masks\n"
        "  --brief           one line per step; --every K prints every K-th step\n"
        "  --time            also print each step's wall time (not reproducible)\n"
        "  --color auto|always|never   colour (auto: on a terminal, unless NO_COLOR)\n"
        "Model options (--layers --dim --heads --kv-heads --hidden --vocab --max-len\n"
        "--mlp --seed) and cache options (--window --bits --group --residual) as\n"
        "for 'kvlab generate'. Demo defaults: --dim 16 --hidden 32 --layers 2\n"
        "--heads 2 --max-len 128 --window 6 --group 8 --residual 2; one thread.\n"
        "Strategy parameters (each strategy takes those of its own table; the\n"
        "defaults shown are the tables', the demo's own are above):\n");
    kv_cli_print_param_help(f);
}

/* Returns 1 consumed, 0 not ours, -1 error (printed). */
static int parse_own(struct demo_opts *o, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    const char *val = *i + 1 < argc ? argv[*i + 1] : NULL;
    if (strcmp(a, "--brief") == 0) {
        o->brief = 1;
        *i += 1;
        return 1;
    }
    if (strcmp(a, "--time") == 0) {
        o->show_time = 1;
        *i += 1;
        return 1;
    }
    static const char *const with_val[] = {"--steps", "--prompt", "--prompt-tokens",
                                           "--compare", "--every", "--color", "--slots"};
    int k = -1;
    for (int j = 0; j < (int)(sizeof with_val / sizeof with_val[0]); j++)
        if (strcmp(a, with_val[j]) == 0)
            k = j;
    if (k < 0)
        return 0;
    if (val == NULL) {
        fprintf(stderr, "kvlab: %s expects a value\n", a);
        return -1;
    }
    *i += 2;
    switch (k) {
    case 0: return kv_cli_i32(a, val, 0, 1 << 20, &o->steps) == 0 ? 1 : -1;
    case 1: o->prompt = val; return 1;
    case 2: o->prompt_tokens = val; return 1;
    case 3: o->compare = val; return 1;
    case 4: return kv_cli_i32(a, val, 1, 1 << 20, &o->every) == 0 ? 1 : -1;
    case 5:
        if (strcmp(val, "auto") == 0)
            o->color = -1;
        else if (strcmp(val, "always") == 0)
            o->color = 1;
        else if (strcmp(val, "never") == 0)
            o->color = 0;
        else {
            fprintf(stderr, "kvlab: --color expects auto, always or never, got '%s'\n", val);
            return -1;
        }
        return 1;
    default: return kv_cli_i32(a, val, 1, 1 << 30, &o->slots) == 0 ? 1 : -1;
    }
}

/* ------------------------------------------------------------------------ */
/* The session: model, prompt, runs                                         */

struct session {
    struct demo_opts *o;
    struct style S;
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

static void print_model_line(const struct session *x)
{
    const struct kv_model_config *c = &x->model->cfg;
    printf("%smodel%s  %s: %" PRId32 " layers, %" PRId32 " heads (%" PRId32
           " kv heads) x head_dim %" PRId32 " = dim %" PRId32 ", hidden %" PRId32
           ", vocab %" PRId32 "%s\n",
           x->S.bold, x->S.reset, x->o->c.model_path ? x->o->c.model_path : "synthetic",
           c->n_layers, c->n_heads, c->n_kv_heads, c->dim / c->n_heads, c->dim,
           c->mlp ? c->hidden_dim : 0, c->vocab_size, c->mlp ? "" : " (no MLP)");
    printf("%sprompt%s ", x->S.bold, x->S.reset);
    for (int32_t b = 0; b < x->B; b++) {
        if (x->B > 1)
            printf("%sseq %" PRId32 " (pad %" PRId32 "): ", b ? "; " : "", b, x->pad[b]);
        char buf[64];
        for (int32_t t = x->pad[b]; t < x->P; t++)
            printf("%s%s", t > x->pad[b] ? " " : "",
                   tok_after(x, x->seq_a, b, t, seq_tok(x, x->seq_a, b, t), buf, sizeof buf));
    }
    printf("  (%" PRId32 " token%s%s)\n", x->P, x->P == 1 ? "" : "s",
           x->B > 1 ? " with padding" : "");
}

/* The strategy describes itself, with its parameters' values. */
static void print_cache_config(const struct session *x, const struct kv_demo_run *R)
{
    char line[512];
    kv_cache_describe(R->cache, line, sizeof line);
    printf("%scache%s  %s: %s\n", x->S.bold, x->S.reset, R->name, line);
}

/* Bytes one token slot takes in every layer (K and V, all kv heads, batch). */
static size_t slot_bytes(const struct session *x)
{
    return (size_t)x->cc.n_layers * (size_t)x->B * (size_t)x->cc.n_kv_heads *
           (size_t)x->cc.head_dim * sizeof(float) * 2;
}

/* Mask rows of one sequence, over the held key positions. */
static void print_mask(const struct session *x, const struct kv_demo_layer *lc, int32_t b)
{
    const struct kv_attn_params *p = &lc->ap;
    int32_t rows = p->n_q;
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
        for (int32_t s = 0; s < x->max_pos; s++) {
            if (!lc->held[s])
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

static void print_weights(const struct session *x, const struct kv_demo_run *R, int32_t l, int32_t b)
{
    const struct kv_demo_layer *lc = &R->lc[l];
    const float *w = lc->w + (size_t)b * x->max_pos;
    int32_t qp = lc->ap.q_pos0 + lc->ap.n_q - 1;
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
    for (int32_t s = 0; s < x->max_pos; s++) {
        if (lc->held[s])
            put_shade(&x->S, w[s], best >= 0 ? w[best] : 0.0f);
    }
    if (best >= 0)
        printf("   max %.2f at pos %" PRId32, (double)w[best], best);
    putchar('\n');
}

/* What layer l holds after this step's update. */
static void print_cache_layer(const struct session *x, const struct kv_demo_run *R, int32_t l)
{
    const struct kv_demo_layer *lc = &R->lc[l];
    const int32_t M = x->max_pos;
    printf("  %-7sL%-12" PRId32, l == 0 ? "cache" : "", l);
    if (!R->keeps) {
        printf("keeps nothing: K,V of pos ");
        print_ranges(lc->held, M);
        printf(" recomputed this step, dropped after it\n");
        return;
    }
    int32_t window = kv_cache_mask_window(R->cache);
    int any_q = 0;
    for (int32_t s = 0; s < M; s++)
        any_q |= lc->held_q[s];
    size_t res = kv_cache_resident_bytes(R->cache), sb = slot_bytes(x);
    int32_t held_n = 0;
    for (int32_t s = 0; s < M; s++)
        held_n += lc->held[s];
    if (any_q) {
        unsigned char f32[4096] = {0}; /* only [0, n) is used */
        int32_t n = M < 4096 ? M : 4096;
        for (int32_t s = 0; s < n; s++)
            f32[s] = lc->held[s] && !lc->held_q[s];
        printf("%s pos ", kv_type_traits[lc->q_dtype].name);
        print_ranges(lc->held_q, M);
        printf(" | f32 residual pos ");
        print_ranges(f32, n);
    } else if (window > 0) {
        /* Ring: slot = pos % window holds the newest held position. */
        printf("ring [");
        int32_t shown = 0;
        for (int32_t slot = 0; slot < window; slot++) {
            int32_t pos = -1;
            for (int32_t s = slot; s < M; s += window)
                if (lc->held[s])
                    pos = s;
            printf("%s%s", slot ? " " : "", pos >= 0 ? "" : ".");
            if (pos >= 0) {
                printf("%" PRId32, pos);
                shown++;
            }
        }
        printf("] slot = pos %% %" PRId32, window);
        if (held_n > shown)
            printf(" (+%" PRId32 " new this step, passed through)", held_n - shown);
    } else {
        int32_t cap = sb > 0 && res % sb == 0 ? (int32_t)(res / sb) : -1;
        printf("f32 slots [");
        if (held_n <= 24) {
            int first = 1;
            for (int32_t s = 0; s < M; s++) {
                if (lc->held[s]) {
                    printf("%s%" PRId32, first ? "" : " ", s);
                    first = 0;
                }
            }
        } else {
            print_ranges(lc->held, M);
        }
        printf("]");
        if (cap >= 0)
            printf(" %" PRId32 " of %" PRId32 " slots used", held_n, cap);
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
        printf("  %sevicted pos ", x->S.yellow);
        print_ranges(gone, M);
        printf("%s", x->S.reset);
    }
    putchar('\n');
    if (any_q) {
        if (lc->q_pos >= 0)
            printf("  %-7s%-13snewest quantized pos %" PRId32 ": round-trip error max "
                   "|x - x'| = %.4f (half a quantization step: %.4f)\n",
                   "", "", lc->q_pos, (double)lc->q_err, (double)lc->q_half_step);
        else
            printf("  %-7s%-13snewest quantized pos %" PRId32 ": quantized in the same "
                   "update it arrived (no f32 copy seen)\n", "", "", lc->q_newest);
    }
}

static int64_t flops_of(const struct kv_step_stats *st) { return kv_flops_total(&st->flops); }

/* The full per-step report. */
static void print_step(struct session *x, const struct kv_demo_run *R, const struct kv_demo_run *ref,
                       int32_t step, const int32_t *seq)
{
    const struct style *S = &x->S;
    char buf[64];
    const int32_t T = x->P + step;
    printf("\n%s-- step %" PRId32 " %s", S->bold, step, step == 0 ? "(prefill) " : "");
    for (int i = 0; i < 50; i++)
        putchar('-');
    printf("%s\n", S->reset);
    /* What is fed. */
    printf("  %-20s", "fed");
    if (step > 0 && R->n_fed == 1) {
        printf("1 token %s at pos %" PRId32,
               tok_after(x, seq, 0, T - 1, seq_tok(x, seq, 0, T - 1), buf, sizeof buf), T - 1);
        printf("  %s(without a cache: all %" PRId32 " tokens, pos 0..%" PRId32 ")%s",
               S->dim, T, T - 1, S->reset);
    } else {
        printf("%" PRId32 " token%s, pos 0..%" PRId32, R->n_fed, R->n_fed == 1 ? "" : "s",
               T - 1);
        if (step > 0)
            printf("  %s(no cache: the whole sequence again, every layer recomputes "
                   "K and V)%s", S->dim, S->reset);
    }
    putchar('\n');
    /* Shape and mask. */
    const struct kv_demo_layer *lc0 = &R->lc[0];
    int32_t n_keys = 0;
    for (int32_t s = 0; s < x->max_pos; s++)
        n_keys += lc0->held[s];
    printf("  %-20s(new, past+new) = (%" PRId32 ", %" PRId32 ")", "attention shape",
           lc0->ap.n_q, n_keys);
    printf(" = %" PRId32 " past + %" PRId32 " new", n_keys - lc0->ap.n_q, lc0->ap.n_q);
    if (lc0->mask.window > 0)
        printf(", window %" PRId32, lc0->mask.window);
    printf(", keys at pos ");
    print_ranges(lc0->held, x->max_pos);
    printf(" (%" PRId32 " span%s)\n", lc0->n_spans, lc0->n_spans == 1 ? "" : "s");
    for (int32_t b = 0; b < x->B; b++)
        print_mask(x, lc0, b);
    for (int32_t l = 0; l < x->model->cfg.n_layers; l++)
        for (int32_t b = 0; b < x->B; b++)
            print_weights(x, R, l, b);
    for (int32_t l = 0; l < x->model->cfg.n_layers; l++)
        print_cache_layer(x, R, l);
    /* Memory and FLOPs. */
    size_t copied = kv_cache_copied_bytes(R->cache);
    printf("  %-20sresident %zu B, written by updates %zu B this step (%zu B in total)\n",
           "memory", kv_cache_resident_bytes(R->cache), copied - R->copied_before, copied);
    int64_t f = flops_of(&R->st), fn = flops_of(&ref->st);
    printf("  %-20sthis step %" PRId64 " (attention %" PRId64 ")   without a cache %"
           PRId64 " (attention %" PRId64 ")",
           "FLOPs", f, R->st.flops.attn, fn, ref->st.flops.attn);
    if (f > 0 && fn != f)
        printf("   %s%.1fx%s", S->bold, (double)fn / (double)f, S->reset);
    printf("\n  %-20sso far %" PRId64 "   without a cache %" PRId64 "\n", "",
           flops_of(&R->total), flops_of(&ref->total));
    /* Next token, against the no-cache reference. */
    printf("  %-20s", "next token");
    for (int32_t b = 0; b < x->B; b++) {
        if (x->B > 1)
            printf("%ss%" PRId32 " ", b ? "  " : "", b);
        printf("%s%s%s", S->cyan, tok_after(x, seq, b, T, R->next[b], buf, sizeof buf),
               S->reset);
        printf(" (%" PRId32 ")", R->next[b]);
    }
    if (ref != R) {
        size_t V = (size_t)x->model->cfg.vocab_size;
        float d = max_abs_diff(R->logits, ref->logits, (size_t)x->B * V);
        int same = memcmp(R->next, ref->next, (size_t)x->B * sizeof(int32_t)) == 0;
        if (same)
            printf("   %ssame as without a cache%s", S->green, S->reset);
        else
            printf("   %sdiffers from without a cache: %s%s", S->red,
                   tok_text(&x->vv, -1, ref->next[0], buf, sizeof buf), S->reset);
        printf(" (max |logit diff| %.2g)", (double)d);
    }
    putchar('\n');
}

static void print_brief_header(const struct session *x)
{
    printf("\n%s%5s %5s %5s %11s %10s %10s %10s %6s %8s %9s%s  %s%s\n", x->S.bold, "step",
           "T", "fed", "attn shape", "attn FLOPs", "FLOPs", "no cache", "ratio", "cache B",
           "written B", x->o->show_time ? "     us" : "", "next", x->S.reset);
}

static void print_brief(const struct session *x, const struct kv_demo_run *R, const struct kv_demo_run *ref,
                        int32_t step, const int32_t *seq)
{
    char buf[64], shape[32];
    const int32_t T = x->P + step;
    int32_t n_keys = 0;
    for (int32_t s = 0; s < x->max_pos; s++)
        n_keys += R->lc[0].held[s];
    snprintf(shape, sizeof shape, "(%" PRId32 ",%" PRId32 ")", R->lc[0].ap.n_q, n_keys);
    int64_t f = flops_of(&R->st), fn = flops_of(&ref->st);
    printf("%5" PRId32 " %5" PRId32 " %5" PRId32 " %11s %10" PRId64 " %10" PRId64 " %10" PRId64
           " %5.1fx %8zu %9zu",
           step, T, R->n_fed, shape, R->st.flops.attn, f, fn,
           f > 0 ? (double)fn / (double)f : 0.0, kv_cache_resident_bytes(R->cache),
           kv_cache_copied_bytes(R->cache));
    if (x->o->show_time)
        printf(" %7.0f", (double)R->step_ns / 1e3);
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

static int report_failure(const struct session *x, const struct kv_demo_run *R, int32_t step,
                          enum kv_status s)
{
    fflush(stdout);
    if (s == KV_ERR_FULL) {
        printf("\n%s-- step %" PRId32 ": the %s cache is full%s: it holds %" PRId32
               " preallocated slots and position %" PRId32 " does not fit.\n"
               "   kv_cache_update returned KV_ERR_FULL, wrote nothing, and the walk "
               "stops here (a static cache never grows).\n",
               x->S.red, step, R->name, x->S.reset, x->cc.max_len, x->P + step - 1);
        fflush(stdout);
    }
    fprintf(stderr, "kvlab: demo: step %" PRId32 " with %s: %s\n", step, R->name,
            kv_status_str(s));
    return 1;
}

static int walk(struct session *x, const char *name, const void *params)
{
    struct demo_opts *o = x->o;
    struct kv_demo_run R, ref;
    int rc = 0;
    enum kv_status s = kv_demo_run_create(&R, name, params, x->model, &x->cc, x->B, x->P,
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
        if (own_ref) {
            s = kv_demo_run_step(&ref, step, x->seq_a, x->stride, x->B > 1 ? x->pad : NULL);
            if (s != KV_OK) {
                rc = report_failure(x, &ref, step, s);
                break;
            }
        }
        int show = step == 0 || step == o->steps || o->every == 0 || step % o->every == 0;
        if (show && o->brief)
            print_brief(x, &R, refp, step, x->seq_a);
        else if (show)
            print_step(x, &R, refp, step, x->seq_a);
        append_next(x, x->seq_a, &R, x->P + step);
    }
    if (rc == 0) {
        char buf[64];
        printf("\n%ssummary%s  %s, %" PRId32 " steps: generated", x->S.bold, x->S.reset, name,
               o->steps + 1);
        for (int32_t t = x->P; t <= x->P + o->steps; t++) {
            if (o->steps >= 24 && t == x->P + 12) {
                printf(" ...");
                t = x->P + o->steps - 8;
                continue;
            }
            printf(" %s", tok_after(x, x->seq_a, 0, t, seq_tok(x, x->seq_a, 0, t), buf,
                                    sizeof buf));
        }
        int64_t f = flops_of(&R.total), fn = flops_of(&refp->total);
        printf("\n  FLOPs %" PRId64 " in total, %" PRId64 " without a cache", f, fn);
        if (f > 0 && f != fn)
            printf(" (%.1fx more)", (double)fn / (double)f);
        printf("; tokens fed %" PRId64 " vs %" PRId64 "\n", R.total.tokens_fed,
               refp->total.tokens_fed);
        printf("  cache resident %zu B at the end, %zu B written by updates\n",
               kv_cache_resident_bytes(R.cache), kv_cache_copied_bytes(R.cache));
        if (!R.keeps)
            printf("  %swhy each step costs more than the last:%s without a cache, step s "
                   "feeds all P+s tokens again,\n  so every layer recomputes their K and V "
                   "(projection and MLP FLOPs grow like s); its (P+s) queries\n  attend over "
                   "(P+s)(P+s+1)/2 query-key pairs (attention FLOPs grow like s^2). A "
                   "cache\n  feeds one token per step: P+s pairs and one row of projections."
                   "\n",
                   x->S.bold, x->S.reset);
    }
    kv_demo_run_destroy(&R);
    if (own_ref)
        kv_demo_run_destroy(&ref);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Compare two strategies                                                   */

static int compare(struct session *x, const char *na, const void *pa, const char *nb,
                   const void *pb)
{
    struct demo_opts *o = x->o;
    struct kv_demo_run A, B;
    memset(&B, 0, sizeof B);
    enum kv_status s = kv_demo_run_create(&A, na, pa, x->model, &x->cc, x->B, x->P,
                                          x->max_pos, 1);
    if (s == KV_OK)
        s = kv_demo_run_create(&B, nb, pb, x->model, &x->cc, x->B, x->P, x->max_pos, 1);
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
    printf("\n%s%4s %4s | %-*s %4s %9s %8s %7s | %-*s %4s %9s %8s %7s | %s%s\n", S->bold,
           "step", "T", wa, na, "fed", "FLOPs", "cache B", "written", wb, nb, "fed", "FLOPs",
           "cache B", "written", "max|dlogit|", S->reset);
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
        last_step = step;
        const int32_t T = x->P + step;
        size_t V = (size_t)x->model->cfg.vocab_size;
        float d = max_abs_diff(A.logits, B.logits, (size_t)x->B * V);
        int same_hist = diverged < 0;
        if (same_hist && d > worst)
            worst = d;
        if (same_hist && logit_diff < 0 && d > DEMO_SAME_LOGIT)
            logit_diff = step;
        int same_tok = memcmp(A.next, B.next, (size_t)x->B * sizeof(int32_t)) == 0;
        int show = step == 0 || step == o->steps || o->every == 0 || step % o->every == 0 ||
                   (same_hist && !same_tok);
        if (show) {
            char ta[64], tb[64];
            printf("%4" PRId32 " %4" PRId32 " | %-*s %4" PRId32 " %9" PRId64 " %8zu %7zu | %-*s %4"
                   PRId32 " %9" PRId64 " %8zu %7zu | ",
                   step, T, wa, tok_after(x, x->seq_a, 0, T, A.next[0], ta, sizeof ta),
                   A.n_fed, flops_of(&A.st), kv_cache_resident_bytes(A.cache),
                   kv_cache_copied_bytes(A.cache), wb,
                   tok_after(x, x->seq_b, 0, T, B.next[0], tb, sizeof tb), B.n_fed,
                   flops_of(&B.st), kv_cache_resident_bytes(B.cache),
                   kv_cache_copied_bytes(B.cache));
            if (same_hist)
                printf("%s%.1e%s", d > DEMO_SAME_LOGIT ? S->yellow : "", (double)d, S->reset);
            else
                printf("%-7s", "-");
            if (same_hist && !same_tok)
                printf("  %s<- tokens diverge%s", S->red, S->reset);
            putchar('\n');
        }
        if (same_hist && !same_tok)
            diverged = step;
        append_next(x, x->seq_a, &A, T);
        append_next(x, x->seq_b, &B, T);
    }
    if (last_step >= 0) {
        printf("\n%sverdict%s  ", S->bold, S->reset);
        if (diverged < 0)
            printf("%s%s and %s chose the same %" PRId32 " tokens%s", S->green, na, nb,
                   last_step + 1, S->reset);
        else
            printf("%stokens diverge at step %" PRId32 " (T = %" PRId32 ")%s", S->red, diverged,
                   x->P + diverged, S->reset);
        printf("; max |logit difference| while their inputs were identical: %.2g", (double)worst);
        if (logit_diff >= 0)
            printf(" (first above %.0e at step %" PRId32 ", T = %" PRId32 ")",
                   (double)DEMO_SAME_LOGIT, logit_diff, x->P + logit_diff);
        else
            printf(" (float rounding only)");
        printf("\n  FLOPs in total: %s %" PRId64 ", %s %" PRId64 "; cache at the end: %s %zu B,"
               " %s %zu B; bytes written by updates: %s %zu, %s %zu\n",
               na, flops_of(&A.total), nb, flops_of(&B.total), na,
               kv_cache_resident_bytes(A.cache), nb, kv_cache_resident_bytes(B.cache), na,
               kv_cache_copied_bytes(A.cache), nb, kv_cache_copied_bytes(B.cache));
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

/* Builds the prompt ids of sequence 0 into ids; returns count or -1. */
static int32_t prompt_ids(struct session *x, int32_t *ids, int32_t cap)
{
    struct demo_opts *o = x->o;
    const int32_t V = x->model->cfg.vocab_size;
    if (o->prompt_tokens != NULL) {
        int n = kv_cli_int_list("--prompt-tokens", o->prompt_tokens, 0, V - 1, ids, cap);
        return n;
    }
    const char *text = o->prompt != NULL ? o->prompt : "KV cache";
    size_t len = strlen(text);
    if (len == 0 || len + 3 > (size_t)cap) {
        fprintf(stderr, "kvlab: --prompt must have 1 to %d bytes\n", cap - 3);
        return -1;
    }
    if (x->tok != NULL) {
        int32_t n;
        enum kv_status s = kv_tokenizer_encode(x->tok, text, len,
                                               kv_tokenizer_default_flags(x->tok), ids, cap, &n);
        if (s != KV_OK) {
            fprintf(stderr, "kvlab: cannot encode the prompt with '%s': %s\n",
                    o->c.tokenizer_path, kv_status_str(s));
            return -1;
        }
        return n;
    }
    for (size_t i = 0; i < len; i++)
        ids[i] = (int32_t)(unsigned char)text[i] % V;
    return (int32_t)len;
}

int kv_cmd_demo(int argc, char **argv)
{
    struct demo_opts o;
    memset(&o, 0, sizeof o);
    kv_cli_common_defaults(&o.c);
    o.c.model = (struct kv_model_config){.dim = 16, .hidden_dim = 32, .n_layers = 2,
                                         .n_heads = 2, .n_kv_heads = 2, .vocab_size = 256,
                                         .max_len = 128, .mlp = 1, .shared_classifier = 0};
    o.c.cache.max_len = 128;
    /* the tiny model's own defaults for the parameters that size a cache */
    kv_cli_flag_default(&o.c, "--window", 6);
    kv_cli_flag_default(&o.c, "--group", 8);
    kv_cli_flag_default(&o.c, "--residual", 2);
    o.c.threads = 1;
    o.steps = 6;
    o.color = -1;
    for (int i = 1; i < argc;) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
        int r = kv_cli_parse_common(&o.c, argc, argv, &i);
        if (r == 0)
            r = parse_own(&o, argc, argv, &i);
        if (r < 0)
            return 2;
        if (r == 0) {
            fprintf(stderr, "kvlab: demo: unknown option '%s' (try --help)\n", argv[i]);
            return 2;
        }
    }
    char name_a[32] = "", name_b[32] = "";
    if (o.compare != NULL) {
        const char *comma = strchr(o.compare, ',');
        size_t la = comma ? (size_t)(comma - o.compare) : 0;
        if (comma == NULL || la == 0 || la >= sizeof name_a || strlen(comma + 1) == 0 ||
            strlen(comma + 1) >= sizeof name_b || strchr(comma + 1, ',') != NULL) {
            fprintf(stderr, "kvlab: --compare expects two strategy names, A,B, got '%s'\n",
                    o.compare);
            return 2;
        }
        memcpy(name_a, o.compare, la);
        memcpy(name_b, comma + 1, strlen(comma + 1) + 1); /* fits: checked above */
        for (int k = 0; k < 2; k++) {
            const char *nm = k ? name_b : name_a;
            const struct kv_strategy_ops *ops;
            if (kv_strategy_lookup(nm, &ops, NULL, 0) != KV_OK) {
                fprintf(stderr, "kvlab: unknown strategy '%s' in --compare "
                                "(see 'kvlab strategies')\n", nm);
                return 2;
            }
        }
        if (o.c.strategy != NULL) {
            fprintf(stderr, "kvlab: give either --strategy or --compare, not both\n");
            return 2;
        }
    }
    if (o.c.batch > DEMO_MAX_BATCH) {
        fprintf(stderr, "kvlab: demo: --batch expects an integer in [1, %d], got %" PRId32 "\n",
                DEMO_MAX_BATCH, o.c.batch);
        return 2;
    }
    if (o.prompt != NULL && o.prompt_tokens != NULL) {
        fprintf(stderr, "kvlab: give either --prompt or --prompt-tokens, not both\n");
        return 2;
    }

    struct session x;
    memset(&x, 0, sizeof x);
    x.o = &o;
    const char *no_color = getenv("NO_COLOR");
    int use_color = o.color >= 0 ? o.color
                                 : (isatty(STDOUT_FILENO) &&
                                    (no_color == NULL || no_color[0] == '\0'));
    x.S = style_make(use_color);
    /* default: the exact growing cache (keeps history, lossless, evicts
     * nothing, grows as it goes) */
    const struct kv_strategy_ops *dflt =
        kv_strategy_with(KV_CAP_KEEPS_HISTORY, KV_CAP_LOSSY | KV_CAP_EVICTS | KV_CAP_PREALLOCATES);
    const char *strategy = o.c.strategy != NULL ? o.c.strategy : dflt != NULL ? dflt->name : "";
    if (o.c.model_path != NULL) {
        enum kv_status s = kv_checkpoint_load(o.c.model_path, &x.model);
        if (s != KV_OK) {
            fprintf(stderr, "kvlab: cannot load model '%s': %s\n", o.c.model_path,
                    kv_status_str(s));
            return s == KV_ERR_NOMEM ? 1 : 2;
        }
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
        if (kv_cli_check_memory("the demo model", kv_model_weight_bytes(&o.c.model)) != 0)
            return 2;
        enum kv_status s = kv_model_create_synthetic(&x.model, &o.c.model, o.c.seed);
        if (s != KV_OK) {
            fprintf(stderr, "kvlab: cannot build the model: %s\n", kv_status_str(s));
            return 1;
        }
    }
    if (o.c.tokenizer_path != NULL) {
        enum kv_status s = kv_tokenizer_load(&x.tok, o.c.tokenizer_path,
                                             x.model->cfg.vocab_size);
        if (s != KV_OK) {
            fprintf(stderr, "kvlab: cannot load tokenizer '%s': %s\n", o.c.tokenizer_path,
                    kv_status_str(s));
            session_free(&x);
            return s == KV_ERR_NOMEM ? 1 : 2;
        }
    }
    x.vv = (struct vocab_view){x.tok, x.model->cfg.vocab_size};

    int32_t ids[DEMO_MAX_PROMPT];
    int32_t n = prompt_ids(&x, ids, DEMO_MAX_PROMPT);
    if (n < 1) {
        if (n == 0)
            fprintf(stderr, "kvlab: the prompt encodes to no tokens\n");
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
        fprintf(stderr, "kvlab: out of memory\n");
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
    x.cc.max_len = o.slots > 0 ? o.slots : x.model->cfg.max_len;

    int rc = o.compare ? compare(&x, name_a, sa.params, name_b, sb.params)
                       : walk(&x, strategy, sa.params);
    session_free(&x);
    return rc;
}
