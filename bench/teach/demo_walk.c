/*
 * demo_walk.c - the step walk of one strategy (kv_demo_walk, demo_view.h):
 * greedy generation one step at a time, with, per step, what is fed, the
 * attention shape (new_tokens, past_len + new_tokens), the mask rows, what
 * each layer's cache holds after the update, the attention weights of the
 * newest query, and the FLOPs next to what the same step costs without a
 * cache; or, with --brief, one line per step.
 *
 * The design decision that matters: a `none` run is driven alongside with
 * the same tokens, which gives the no-cache FLOPs of the very same step and
 * the reference logits the next token is checked against; and every row of
 * keys (mask and attention shades) is elided the same way, so their
 * columns line up at any width.
 */
#include "demo_view.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define DEMO_MAX_MASK_ROWS 8

/* ------------------------------------------------------------------------ */
/* Rows of keys: mask and attention shades, elided to fit the width          */

/* One character per attention weight, nine levels relative to the row's
 * largest weight ('@'); '_' for a masked key. No space, so a shade row is
 * one word for tools that split on blanks. */
static const char shade_ramp[] = ".:-=+*#%@";
#define SHADE_TOP 8

/* w: the weight, wmax: the row's largest (the shade is relative to it). */
static void put_shade(const struct kv_demo_style *S, float w, float wmax)
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

/* Label columns before a row of keys ("  mask   q@12        "). */
#define ROW_LABEL 22
/* Room kept after an attention row for "   max 0.58 at pos 123". */
#define ROW_TAIL 22
/* Held keys shown before the elision mark when a row does not fit. */
#define ROW_HEAD 4

/* How many key columns fit; mask and attention rows use the same, so their
 * columns line up. */
static int32_t row_room(const struct kv_demo_session *x)
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

static void put_elision(const struct kv_demo_session *x)
{
    printf("%s~%s", x->S.yellow, x->S.reset);
}

/* Mask rows of one sequence, over the held key positions. */
static void print_mask(const struct kv_demo_session *x, const struct kv_demo_layer *lc,
                       int32_t b)
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

static void print_weights(const struct kv_demo_session *x, const struct kv_demo_run *R,
                          int32_t l, int32_t b)
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

/* ------------------------------------------------------------------------ */
/* What each layer's cache holds                                            */

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

/* Bytes one token slot takes in every layer (K and V, all kv heads, batch). */
static size_t slot_bytes(const struct kv_demo_session *x)
{
    return (size_t)x->cc.n_layers * (size_t)x->B * (size_t)x->cc.n_kv_heads *
           (size_t)x->cc.head_dim * sizeof(float) * 2;
}

/* What layer l holds after this step's update. */
static void print_cache_layer(struct kv_demo_session *x, const struct kv_demo_run *R, int32_t l)
{
    const struct kv_demo_layer *lc = &R->lc[l];
    const int32_t M = x->max_pos;
    struct kv_line *L = &x->L;
    kv_line_addf(L, "  %-7sL%-12" PRId32, l == 0 ? "cache" : "", l);
    if (!R->keeps) {
        kv_line_addf(L, "keeps nothing: K,V of pos ");
        line_ranges(L, lc->held, M);
        kv_line_addf(L, " recomputed this step, dropped after it");
        kv_demo_emit(x, ROW_LABEL);
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
    kv_demo_emit(x, ROW_LABEL);
    if (any_q) {
        kv_line_addf(L, "  %-7s%-13s", "", "");
        if (lc->q_pos >= 0)
            kv_line_addf(L, "newest quantized pos %" PRId32 ": round-trip error max "
                            "|x - x'| = %.4f (half a quantization step: %.4f)",
                         lc->q_pos, (double)lc->q_err, (double)lc->q_half_step);
        else
            kv_line_addf(L, "newest quantized pos %" PRId32 ": quantized in the same "
                            "update it arrived (no f32 copy seen)", lc->q_newest);
        kv_demo_emit(x, ROW_LABEL);
    }
}

/* ------------------------------------------------------------------------ */
/* The full per-step report                                                 */

/* One step in full: what is fed, the shape and the mask, the weights, what
 * each layer holds, memory, FLOPs, and the next token against no cache. */
static void print_step(struct kv_demo_session *x, const struct kv_demo_run *R,
                       const struct kv_demo_run *ref, int32_t step, const int32_t *seq)
{
    const struct kv_demo_style *S = &x->S;
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
                     kv_demo_tok_after(x, seq, 0, T - 1, kv_demo_seq_tok(x, seq, 0, T - 1), buf,
                                       sizeof buf),
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
    kv_demo_emit(x, ROW_LABEL);
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
    kv_demo_emit(x, ROW_LABEL);
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
    kv_demo_emit(x, ROW_LABEL);
    int64_t f = kv_demo_flops_of(&R->st), fn = kv_demo_flops_of(&ref->st);
    kv_line_addf(L, "  %-20sthis step %" PRId64 " (attention %" PRId64 ")   without a cache %"
                 PRId64 " (attention %" PRId64 ")",
                 "FLOPs", f, R->st.flops.attn, fn, ref->st.flops.attn);
    if (f > 0 && fn != f)
        kv_line_addf(L, "   %s%.1fx%s", S->bold, (double)fn / (double)f, S->reset);
    kv_demo_emit(x, ROW_LABEL);
    kv_line_addf(L, "  %-20sso far %" PRId64 "   without a cache %" PRId64, "",
                 kv_demo_flops_of(&R->total), kv_demo_flops_of(&ref->total));
    kv_demo_emit(x, ROW_LABEL);
    /* Next token, against the no-cache reference. */
    kv_line_addf(L, "  %-20s", "next token");
    for (int32_t b = 0; b < x->B; b++) {
        if (x->B > 1)
            kv_line_addf(L, "%ss%" PRId32 " ", b ? "  " : "", b);
        kv_line_addf(L, "%s%s%s (%" PRId32 ")", S->cyan,
                     kv_demo_tok_after(x, seq, b, T, R->next[b], buf, sizeof buf), S->reset,
                     R->next[b]);
    }
    if (ref != R) {
        size_t V = (size_t)x->model->cfg.vocab_size;
        float d = kv_demo_max_abs_diff(R->logits, ref->logits, (size_t)x->B * V);
        int same = memcmp(R->next, ref->next, (size_t)x->B * sizeof(int32_t)) == 0;
        if (same)
            kv_line_addf(L, "   %ssame as without a cache%s", S->green, S->reset);
        else
            kv_line_addf(L, "   %sdiffers from without a cache: %s%s", S->red,
                         kv_demo_tok_text(&x->vv, -1, ref->next[0], buf, sizeof buf), S->reset);
        kv_line_addf(L, " (max |logit diff| %.2g)", (double)d);
    }
    kv_demo_emit(x, ROW_LABEL);
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

static void brief_layout(const struct kv_demo_session *x, int on[BC_COUNT])
{
    int w = BRIEF_TOKEN;
    for (int c = 0; c < BC_COUNT; c++) {
        on[c] = c != BC_US || x->show_time;
        w += on[c] ? brief_cols[c].width + 1 : 0;
    }
    for (size_t k = 0; k < sizeof brief_drop / sizeof brief_drop[0] && w > x->width; k++) {
        on[brief_drop[k]] = 0;
        w -= brief_cols[brief_drop[k]].width + 1;
    }
}

static void print_brief_header(struct kv_demo_session *x)
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
        dropped += !on[c] && (c != BC_US || x->show_time);
    if (dropped) {
        kv_line_addf(&x->L, "%s(%d column%s left out to fit %d columns:", x->S.dim, dropped,
                     dropped == 1 ? "" : "s", x->width);
        for (int c = 0; c < BC_COUNT; c++)
            if (!on[c] && (c != BC_US || x->show_time))
                kv_line_addf(&x->L, " %s", brief_cols[c].name);
        kv_line_addf(&x->L, ")%s", x->S.reset);
        kv_demo_emit(x, 1);
    }
}

static void print_brief(const struct kv_demo_session *x, const struct kv_demo_run *R,
                        const struct kv_demo_run *ref, int32_t step, const int32_t *seq)
{
    char buf[64], shape[32];
    const int32_t T = x->P + step;
    int32_t n_keys = count_held(R->lc[0].held, x->max_pos);
    snprintf(shape, sizeof shape, "(%" PRId32 ",%" PRId32 ")", R->lc[0].ap.n_q, n_keys);
    int64_t f = kv_demo_flops_of(&R->st), fn = kv_demo_flops_of(&ref->st);
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
    printf("  %s", kv_demo_tok_after(x, seq, 0, T, R->next[0], buf, sizeof buf));
    if (ref != R && R->next[0] != ref->next[0])
        printf("  %s(without a cache: %s)%s", x->S.red,
               kv_demo_tok_text(&x->vv, -1, ref->next[0], buf, sizeof buf), x->S.reset);
    putchar('\n');
}

/* ------------------------------------------------------------------------ */
/* Walk one strategy                                                        */

int kv_demo_walk(struct kv_demo_session *x, const char *name, const void *params)
{
    struct kv_demo_run R, ref;
    int rc = 0;
    struct kv_cache_config cc = x->cc_shown[0];
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
    kv_demo_print_model(x);
    kv_demo_print_cache(x, &R);
    if (x->brief)
        print_brief_header(x);
    for (int32_t step = 0; step <= x->steps; step++) {
        s = kv_demo_run_step(&R, step, x->seq_a, x->stride, x->B > 1 ? x->pad : NULL);
        if (s != KV_OK) {
            rc = kv_demo_report_failure(x, &R, step, s);
            break;
        }
        if ((rc = kv_demo_check_logits(x, &R, step)) != 0)
            break;
        if (own_ref) {
            s = kv_demo_run_step(&ref, step, x->seq_a, x->stride, x->B > 1 ? x->pad : NULL);
            if (s != KV_OK) {
                rc = kv_demo_report_failure(x, &ref, step, s);
                break;
            }
            if ((rc = kv_demo_check_logits(x, &ref, step)) != 0)
                break;
        }
        int show = step == 0 || step == x->steps || x->every == 0 || step % x->every == 0;
        if (show && x->brief)
            print_brief(x, &R, refp, step, x->seq_a);
        else if (show)
            print_step(x, &R, refp, step, x->seq_a);
        kv_demo_append_next(x, x->seq_a, &R, x->P + step);
    }
    if (rc == 0) {
        struct kv_line *L = &x->L;
        printf("\n");
        kv_line_addf(L, "%ssummary%s  %s, %" PRId32 " steps: generated", x->S.bold, x->S.reset,
                     name, x->steps + 1);
        kv_demo_line_generated(x, x->seq_a, x->steps);
        kv_demo_emit(x, 9);
        int64_t f = kv_demo_flops_of(&R.total), fn = kv_demo_flops_of(&refp->total);
        kv_line_addf(L, "  FLOPs %" PRId64 " in total, %" PRId64 " without a cache", f, fn);
        if (f > 0 && f != fn)
            kv_line_addf(L, " (%.1fx more)", (double)fn / (double)f);
        kv_line_addf(L, "; tokens fed %" PRId64 " vs %" PRId64, R.total.tokens_fed,
                     refp->total.tokens_fed);
        kv_demo_emit(x, 2);
        kv_line_addf(L, "  cache resident %zu B at the end, %zu B written by updates",
                     kv_cache_resident_bytes(R.cache), kv_cache_copied_bytes(R.cache));
        kv_demo_emit(x, 2);
        if (!R.keeps) {
            kv_line_addf(L, "  %swhy each step costs more than the last:%s without a cache, "
                            "step s feeds all P+s tokens again, so every layer recomputes "
                            "their K and V (projection and MLP FLOPs grow like s); its (P+s) "
                            "queries attend over (P+s)(P+s+1)/2 query-key pairs (attention "
                            "FLOPs grow like s^2). A cache feeds one token per step: P+s "
                            "pairs and one row of projections.",
                         x->S.bold, x->S.reset);
            kv_demo_emit(x, 2);
        }
    }
    kv_demo_run_destroy(&R);
    if (own_ref)
        kv_demo_run_destroy(&ref);
    return rc;
}
