/*
 * demo_view.h - what `kvlab demo` prints from: the session a walk renders
 * (the model, the prompt's sequences, the options that shape the output),
 * and the two walks of the step-by-step demo: one strategy (demo_walk.c)
 * and two side by side (demo_compare.c).
 *
 * The design decision that matters: everything shown about the cache is
 * derived from what the attention kernel actually received (demo.h's
 * probe), so the renderer works for any registered strategy. Output fits
 * the session's width: prose lines are built whole and wrapped at spaces
 * with a hanging indent under their label; rows of keys (mask and
 * attention shades) keep the first few and the newest keys and show the
 * rest as one '~'; the brief table drops its least needed columns, and the
 * side-by-side compare table becomes one line per strategy and step when it
 * does not fit. Colour escapes take no columns. The command (cmd_demo.c)
 * parses and checks the options and sets the session up; demo.c runs.
 */
#ifndef KV_DEMO_VIEW_H
#define KV_DEMO_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include "demo.h"
#include "../term/termout.h"
#include "../model/tokenizer.h"

/* Sequences a walk shows at most (--batch). */
#define KV_DEMO_MAX_BATCH 4

/* ------------------------------------------------------------------------ */
/* The session                                                              */

/* Colour escapes, or "" for each without colour. */
struct kv_demo_style {
    int color;
    const char *bold, *dim, *red, *green, *yellow, *cyan, *reset;
};

/* How token ids read as text (kv_token_text). */
struct kv_demo_vocab {
    const struct kv_tokenizer *tok; /* NULL: bytes when vocab <= 256, else ids */
    int32_t vocab;
};

/* What a walk renders from: set up by the command, read by the walks. */
struct kv_demo_session {
    int32_t steps;          /* decode steps after the prefill */
    int32_t every;          /* print every K-th step and the first and last; 0: every step */
    int brief, show_time;   /* one line per step (--brief), with its wall time (--time) */
    const char *model_path; /* the checkpoint shown, NULL: synthetic */
    struct kv_demo_style S;
    int width;              /* columns every line must fit */
    struct kv_line L;       /* the line being built */
    struct kv_model *model;
    struct kv_tokenizer *tok;
    struct kv_demo_vocab vv;
    struct kv_cache_config cc;          /* the model's cache shape */
    struct kv_cache_config cc_shown[2]; /* what each strategy shown runs with (--slots) */
    int32_t B, P, max_pos, stride;
    int32_t pad[KV_DEMO_MAX_BATCH];
    int32_t *seq_a, *seq_b; /* (B, stride) tokens: padded prompt, then generated */
};

/* The colours of a terminal (color = 1), or none. */
struct kv_demo_style kv_demo_style_make(int color);

/* Prints the session's line, wrapped to the width, continuation lines
 * indented by `indent` columns. */
void kv_demo_emit(struct kv_demo_session *x, int indent);

/* Byte-level text (no tokenizer and at most 256 tokens, or a tokenizer
 * whose token i is the byte i): one quoted string reads better than a list
 * of one-byte tokens. */
int kv_demo_bytes_vocab(const struct kv_demo_session *x);

/* The step walk of strategy `name` (its cache shape cc_shown[0]), with the
 * no-cache reference for its FLOPs and next tokens; the full report of
 * every step shown, or the brief table. Returns the exit status. */
int kv_demo_walk(struct kv_demo_session *x, const char *name, const void *params);

/* Strategies na (cc_shown[0]) and nb (cc_shown[1]) side by side over the
 * same tokens until they diverge, then the verdict. Returns the exit
 * status. */
int kv_demo_compare(struct kv_demo_session *x, const char *na, const void *pa, const char *nb,
                    const void *pb);

/* ------------------------------------------------------------------------ */
/* Shared by the walks (demo_view.c)                                        */

/* A short printable form of token id after prev: 'a', '\x9f', ' the'. */
const char *kv_demo_tok_text(const struct kv_demo_vocab *vv, int32_t prev, int32_t id,
                             char *buf, size_t cap);
/* Token t of sequence b in seq, or -1 where there is none (see demo_view.c). */
int32_t kv_demo_seq_tok(const struct kv_demo_session *x, const int32_t *seq, int32_t b,
                        int32_t t);
/* Text of token id as the successor of position t - 1 of sequence b. */
const char *kv_demo_tok_after(const struct kv_demo_session *x, const int32_t *seq, int32_t b,
                              int32_t t, int32_t id, char *buf, size_t cap);
float kv_demo_max_abs_diff(const float *a, const float *b, size_t n);
static inline int64_t kv_demo_flops_of(const struct kv_step_stats *st)
{
    return kv_flops_total(&st->flops);
}
/* The model and prompt lines every walk opens with. */
void kv_demo_print_model(struct kv_demo_session *x);
/* The strategy describes itself, with its parameters' values. */
void kv_demo_print_cache(struct kv_demo_session *x, const struct kv_demo_run *R);
/* The step's greedy tokens into position T of every sequence of seq. */
void kv_demo_append_next(struct kv_demo_session *x, int32_t *seq, const struct kv_demo_run *R,
                         int32_t T);
/* A step that failed: said on stdout (a full static cache) and in one line
 * on stderr. Returns 1. */
int kv_demo_report_failure(struct kv_demo_session *x, const struct kv_demo_run *R,
                           int32_t step, enum kv_status s);
/* " ..." of sequence 0 from position P to P + steps, appended to the line. */
void kv_demo_line_generated(struct kv_demo_session *x, const int32_t *seq, int32_t steps);
/* 1 (said on stderr) when a step's logits are not all finite, else 0. */
int kv_demo_check_logits(const struct kv_demo_session *x, const struct kv_demo_run *R,
                         int32_t step);

#endif /* KV_DEMO_VIEW_H */
