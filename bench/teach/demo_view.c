/*
 * demo_view.c - the demo session's text (demo_view.h): tokens, byte
 * strings, the opening lines every walk prints, and what the walks share
 * about a step (its tokens, a failure, the generated text).
 *
 * The design decision that matters: every token the renderer shows is read
 * through kv_demo_seq_tok or kv_demo_tok_after, which know each
 * sequence's padding, so a one-token prompt (T = 1) or a padded row never
 * reads outside its row; and byte-level text is shown as one quoted string
 * with a soft break after every byte, so a prompt without spaces still
 * wraps to the width.
 */
#include "demo_view.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../model/checkpoint.h"

/* ------------------------------------------------------------------------ */
/* Style and tokens                                                         */

struct kv_demo_style kv_demo_style_make(int color)
{
    if (!color)
        return (struct kv_demo_style){0, "", "", "", "", "", "", ""};
    return (struct kv_demo_style){1, "\033[1m", "\033[2m", "\033[31m", "\033[32m",
                                  "\033[33m", "\033[36m", "\033[0m"};
}

/* A short printable form of token id: 'a', '\x9f', ' the' (kv_token_text). */
const char *kv_demo_tok_text(const struct kv_demo_vocab *vv, int32_t prev, int32_t id,
                             char *buf, size_t cap)
{
    return kv_token_text(vv->tok, vv->vocab, prev, id, buf, cap);
}

/*
 * Token t of sequence b in seq ((B, stride) tokens), or -1 where there is
 * none: before the sequence's first real token (t < pad[b], t < 0). Every
 * token the renderer shows is read through here or kv_demo_tok_after, so a
 * one-token prompt (T = 1) or a padded row never reads outside its row.
 */
int32_t kv_demo_seq_tok(const struct kv_demo_session *x, const int32_t *seq, int32_t b,
                        int32_t t)
{
    KV_ASSERT(b >= 0 && b < x->B && t < x->stride);
    return t >= 0 && t >= x->pad[b] ? seq[(size_t)b * x->stride + (size_t)t] : -1;
}

/* Text of token id as the successor of position t - 1 of sequence b (a BPE
 * piece may decode differently after a given token; none before t = 0). */
const char *kv_demo_tok_after(const struct kv_demo_session *x, const int32_t *seq, int32_t b,
                              int32_t t, int32_t id, char *buf, size_t cap)
{
    return kv_demo_tok_text(&x->vv, kv_demo_seq_tok(x, seq, b, t - 1), id, buf, cap);
}

float kv_demo_max_abs_diff(const float *a, const float *b, size_t n)
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
/* Lines                                                                    */

/* Prints the session's line, wrapped to the width, continuation lines
 * indented by `indent` columns. */
void kv_demo_emit(struct kv_demo_session *x, int indent)
{
    kv_line_emit(stdout, &x->L, x->width, indent);
}

/* Byte-level text (no tokenizer and at most 256 tokens, or a tokenizer
 * whose token i is the byte i): one quoted string reads better than a list
 * of one-byte tokens. */
int kv_demo_bytes_vocab(const struct kv_demo_session *x)
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

void kv_demo_print_model(struct kv_demo_session *x)
{
    const struct kv_model_config *c = &x->model->cfg;
    struct kv_line *L = &x->L;
    kv_line_addf(L, "%smodel%s  %s: %" PRId32 " layers, %" PRId32 " heads (%" PRId32
                 " kv heads) x head_dim %" PRId32 " = dim %" PRId32 ", hidden %" PRId32
                 ", vocab %" PRId32 "%s",
                 x->S.bold, x->S.reset, x->model_path ? x->model_path : "synthetic",
                 c->n_layers, c->n_heads, c->n_kv_heads, c->dim / c->n_heads, c->dim,
                 c->mlp ? c->hidden_dim : 0, c->vocab_size, c->mlp ? "" : " (no MLP)");
    kv_demo_emit(x, 8);
    kv_line_addf(L, "%sprompt%s ", x->S.bold, x->S.reset);
    for (int32_t b = 0; b < x->B; b++) {
        if (x->B > 1)
            kv_line_addf(L, "%sseq %" PRId32 " (pad %" PRId32 "): ", b ? "; " : "", b, x->pad[b]);
        if (kv_demo_bytes_vocab(x)) {
            line_bytes(L, x->seq_a + (size_t)b * x->stride + x->pad[b], x->P - x->pad[b]);
            continue;
        }
        char buf[64];
        for (int32_t t = x->pad[b]; t < x->P; t++)
            kv_line_addf(L, "%s%s", t > x->pad[b] ? " " : "",
                         kv_demo_tok_after(x, x->seq_a, b, t, kv_demo_seq_tok(x, x->seq_a, b, t),
                                           buf, sizeof buf));
    }
    kv_line_addf(L, "  (%" PRId32 " token%s%s)", x->P, x->P == 1 ? "" : "s",
                 x->B > 1 ? " with padding" : "");
    kv_demo_emit(x, 7);
}

/* The strategy describes itself, with its parameters' values. */
void kv_demo_print_cache(struct kv_demo_session *x, const struct kv_demo_run *R)
{
    char line[512];
    kv_cache_describe(R->cache, line, sizeof line);
    kv_line_addf(&x->L, "%scache%s  %s: %s", x->S.bold, x->S.reset, R->name, line);
    kv_demo_emit(x, 8);
}

/* ------------------------------------------------------------------------ */
/* What every walk shares about a step                                      */

void kv_demo_append_next(struct kv_demo_session *x, int32_t *seq, const struct kv_demo_run *R,
                         int32_t T)
{
    for (int32_t b = 0; b < x->B; b++)
        seq[(size_t)b * x->stride + T] = R->next[b];
}

int kv_demo_report_failure(struct kv_demo_session *x, const struct kv_demo_run *R,
                           int32_t step, enum kv_status s)
{
    fflush(stdout);
    if (s == KV_ERR_FULL) {
        printf("\n");
        kv_line_addf(&x->L, "%s-- step %" PRId32 ": the %s cache is full%s: it holds %" PRId32
                            " preallocated slots and position %" PRId32 " does not fit.",
                     x->S.red, step, R->name, x->S.reset, R->cache->cfg.max_len, x->P + step - 1);
        kv_demo_emit(x, 3);
        kv_line_addf(&x->L, "   kv_cache_update returned KV_ERR_FULL, wrote nothing, and the "
                            "walk stops here (a static cache never grows).");
        kv_demo_emit(x, 3);
        fflush(stdout);
    }
    fprintf(stderr, "kvlab: demo: step %" PRId32 " with %s: %s\n", step, R->name,
            kv_status_str(s));
    return 1;
}

/* "generated ..." of sequence 0 from position P to P + steps. */
void kv_demo_line_generated(struct kv_demo_session *x, const int32_t *seq, int32_t steps)
{
    char buf[64];
    if (kv_demo_bytes_vocab(x)) {
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
        kv_line_addf(&x->L, " %s", kv_demo_tok_after(x, seq, 0, t, kv_demo_seq_tok(x, seq, 0, t),
                                                     buf, sizeof buf));
    }
}

/* Exit 1 when a step's logits hold a NaN or infinity (weights are checked
 * finite at load, so this is an overflow): greedy decoding would pick token
 * 0 and every comparison would be meaningless. 0 when all are finite. */
int kv_demo_check_logits(const struct kv_demo_session *x, const struct kv_demo_run *R,
                         int32_t step)
{
    size_t n = (size_t)x->B * (size_t)x->model->cfg.vocab_size;
    if (kv_first_nonfinite(R->logits, n) == n)
        return 0;
    fflush(stdout);
    fprintf(stderr, "kvlab: demo: step %" PRId32 " with %s: the logits are not finite (NaN "
                    "or infinity); stopping\n", step, R->name);
    return 1;
}
