/*
 * demo_ops.c - the demo's walks of the cache operations (kvlab demo
 * --shared-prompt, --beams K, --draft-layers L): what a server does with a
 * cache besides appending to it.
 *
 *   --shared-prompt  the prompt prefilled once as one sequence, then B
 *                    sequences made from it (kv_cache_reorder with every
 *                    source 0), each then sampling its own tokens: the
 *                    cache's picture after every step (kv_cache_show: a
 *                    paged cache's pool, block tables and reference counts)
 *                    and what each step cost in copies (copy-on-write of a
 *                    shared, partly filled block as it happens);
 *   --beams K        beam search: each step's survivors, their parents and
 *                    scores, and the cache reordered so every beam continues
 *                    its parent (a paged cache moves block-table entries);
 *   --draft-layers L self-speculative decoding: each round's drafts, the
 *                    full model's verdict and the rollback (crop) of the
 *                    cache to what was accepted.
 *
 * The design decision: these walks drive the same library calls a user
 * runs (kv_prefill_shared, kv_generate_beams_ex, kv_generate_speculative_ex,
 * the latter two through their observers), and every number shown comes
 * from the cache itself (kv_cache_stats, seq_len, copied bytes, show), so
 * the demo cannot show an operation the library did not do. Any strategy
 * with the operation works; a strategy without a picture (no show method)
 * gets the byte counts only.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/kv_ops.h"
#include "demo_ops.h"
#include "../term/termout.h"

#define SHOW_BYTES 8192

/* Every line is built whole and wrapped to the demo's width (termout.h):
 * ADD appends to the line, EMIT prints it with a hanging indent. */
static struct kv_line line;
#define ADD(...) kv_line_addf(&line, __VA_ARGS__)
#define EMIT(r, indent) kv_line_emit((r)->out, &line, (r)->width, (indent))

/* A token as the demo prints it: the id, and the byte for a printable
 * byte-level vocabulary. */
static void put_tok(const struct kv_demo_ops_req *r, int32_t id)
{
    if (r->byte_vocab && id > 0x20 && id < 0x7f && id != '\'')
        ADD("%" PRId32 "'%c'", id, (char)id);
    else
        ADD("%" PRId32, id);
}

/* The cache's picture of layer 0, indented, or its byte counts. */
static void show_cache(const struct kv_demo_ops_req *r, const struct kv_cache *c)
{
    static char buf[SHOW_BYTES];
    const int n = kv_cache_show(c, 0, buf, sizeof buf);
    struct kv_cache_stats st;
    kv_cache_stats(c, &st);
    if (n > 0) {
        for (const char *p = buf; *p != '\0';) {
            const char *nl = strchr(p, '\n');
            const size_t len = nl != NULL ? (size_t)(nl - p) : strlen(p);
            ADD("     %.*s", (int)len, p);
            EMIT(r, 8);
            p += len + (nl != NULL);
        }
    }
    ADD("     bytes: %zu resident, %zu hold tokens, %zu read by several sequences, %zu copied "
        "on write", st.resident, st.tokens, st.shared, st.cow);
    EMIT(r, 8);
}

/* ------------------------------------------------------------------------ */
/* --shared-prompt                                                          */

static int walk_shared(const struct kv_demo_ops_req *r, struct kv_cache *c)
{
    const int32_t B = r->batch, P = r->prompt_len, V = r->m->cfg.vocab_size;
    struct kv_runner *one = NULL, *all = NULL;
    float *logits = kv_alloc((size_t)B * (size_t)V * sizeof *logits);
    int32_t *next = kv_alloc((size_t)B * sizeof *next), *zeros = kv_alloc((size_t)B * sizeof *zeros);
    uint64_t *rng = kv_alloc((size_t)B * sizeof *rng);
    enum kv_status s = logits == NULL || next == NULL || zeros == NULL || rng == NULL
                           ? KV_ERR_NOMEM : KV_OK;
    if (s == KV_OK)
        s = kv_runner_create(&one, r->m, 1, P, 1);
    if (s == KV_OK)
        s = kv_runner_create(&all, r->m, B, 1, 1);
    const int32_t first = 0;
    if (s == KV_OK)
        s = kv_cache_reorder(c, &first, 1);
    if (s != KV_OK)
        goto done;
    ADD("-- prefill: the prompt (%" PRId32 " tokens) through the model once, as one sequence",
        P);
    EMIT(r, 3);
    s = kv_forward(one, r->m, c, r->prompt, P, 0, NULL, logits, NULL);
    if (s != KV_OK)
        goto done;
    show_cache(r, c);
    size_t copied = kv_cache_copied_bytes(c);
    s = kv_cache_reorder(c, zeros, B);
    if (s != KV_OK)
        goto done;
    ADD("-- %" PRId32 " sequences from it: kv_cache_reorder, every source sequence 0; %zu bytes "
        "copied (a paged cache shares the prompt's blocks, a contiguous one copies its rows "
        "into every sequence)", B, kv_cache_copied_bytes(c) - copied);
    EMIT(r, 3);
    show_cache(r, c);
    for (int32_t b = 0; b < B; b++) {
        rng[b] = kv_sample_rng(r->seed, b);
        memcpy(logits + (size_t)b * V, logits, (size_t)V * sizeof *logits);
    }
    for (int32_t step = 1; step <= r->steps; step++) {
        for (int32_t b = 0; b < B; b++)
            next[b] = kv_sample_token(logits + (size_t)b * V, V, 1.0f, &rng[b]);
        struct kv_cache_stats before, after;
        kv_cache_stats(c, &before);
        copied = kv_cache_copied_bytes(c);
        ADD("-- step %" PRId32 ": each sequence feeds the token it sampled (temperature 1) at "
            "position %" PRId32 ":", step, P + step - 1);
        for (int32_t b = 0; b < B; b++) {
            ADD(" ");
            put_tok(r, next[b]);
        }
        EMIT(r, 3);
        s = kv_forward(all, r->m, c, next, 1, P + step - 1, NULL, logits, NULL);
        if (s != KV_OK)
            goto done;
        kv_cache_stats(c, &after);
        if (after.cow > before.cow) {
            ADD("     copy-on-write: sequences appending into a shared, partly filled block "
                "first copied its filled rows into a block of their own (%zu bytes, all "
                "layers); the last sharer writes in place", after.cow - before.cow);
            EMIT(r, 8);
        }
        ADD("     %zu bytes written into the cache this step", kv_cache_copied_bytes(c) - copied);
        EMIT(r, 8);
        show_cache(r, c);
    }
    {
        struct kv_cache_stats st;
        kv_cache_stats(c, &st);
        const size_t row = 2 * (size_t)r->cc.n_layers * (size_t)r->cc.n_kv_heads *
                           (size_t)r->cc.head_dim * sizeof(float);
        ADD("-- %" PRId32 " sequences of %" PRId32 " tokens: the cache holds %zu bytes of token "
            "rows; without sharing they would be %zu (B x (P + generated))", B, P + r->steps,
            st.tokens, (size_t)B * (size_t)(P + r->steps) * row);
        EMIT(r, 3);
    }
done:
    if (s != KV_OK)
        fprintf(stderr, "kvlab: demo: %s\n", kv_status_str(s));
    kv_runner_destroy(all);
    kv_runner_destroy(one);
    kv_free(rng);
    kv_free(zeros);
    kv_free(next);
    kv_free(logits);
    return s == KV_OK ? 0 : 1;
}

/* ------------------------------------------------------------------------ */
/* --beams K                                                                */

static void on_beams(void *user, int32_t step, const int32_t *parent, const int32_t *hist,
                     int32_t stride, const double *score, const struct kv_cache *c)
{
    const struct kv_demo_ops_req *r = user;
    const int32_t K = r->batch;
    ADD("-- step %" PRId32 ": the %" PRId32 " best (beam, next token) of all %" PRId32
        " beams survive%s", step, K, step == 0 ? 1 : K,
        step == 0 ? " (the prompt's one distribution)" : "");
    EMIT(r, 3);
    for (int32_t j = 0; j < K; j++) {
        ADD("     beam %" PRId32 " <- beam %" PRId32 " + ", j, parent[j]);
        put_tok(r, hist[(size_t)j * stride + step]);
        ADD("  log-prob %.4f, tokens:", score[j]);
        for (int32_t t = 0; t <= step; t++) {
            ADD(" ");
            put_tok(r, hist[(size_t)j * stride + t]);
        }
        EMIT(r, 8);
    }
    if (step > 0 && step + 1 < r->steps + 1)
        ADD("     kv_cache_reorder(parents): beam j now continues its parent's cache");
    else if (step > 0)
        ADD("     (the last choice is never fed, so the cache is not reordered)");
    if (step > 0)
        EMIT(r, 8);
    show_cache(r, c);
}

static int walk_beams(const struct kv_demo_ops_req *r, struct kv_cache *c)
{
    const int32_t K = r->batch, N = r->steps + 1;
    int32_t *out = kv_alloc((size_t)K * (size_t)N * sizeof *out);
    double *scores = kv_alloc((size_t)K * sizeof *scores);
    enum kv_status s = out == NULL || scores == NULL ? KV_ERR_NOMEM : KV_OK;
    const struct kv_gen_params gp = {.batch = K, .prompt_len = r->prompt_len,
                                     .prompt = r->prompt, .new_tokens = N, .n_threads = 1};
    if (s == KV_OK) {
        ADD("-- prefill: the prompt (%" PRId32 " tokens) once, then %" PRId32 " beams from it "
            "(kv_cache_reorder, every source 0)", r->prompt_len, K);
        EMIT(r, 3);
        s = kv_generate_beams_ex(r->m, c, &gp, out, scores, NULL, on_beams, (void *)r);
    }
    if (s == KV_OK) {
        ADD("-- the beams, best first (score: log-probability per token):");
        EMIT(r, 3);
        for (int32_t j = 0; j < K; j++) {
            ADD("     %.4f ", scores[j]);
            for (int32_t t = 0; t < N; t++) {
                ADD(" ");
                put_tok(r, out[(size_t)j * N + t]);
            }
            EMIT(r, 8);
        }
    } else {
        fprintf(stderr, "kvlab: demo: %s\n", kv_status_str(s));
    }
    kv_free(scores);
    kv_free(out);
    return s == KV_OK ? 0 : 1;
}

/* ------------------------------------------------------------------------ */
/* --draft-layers L                                                         */

static void on_round(void *user, const struct kv_spec_round *rd)
{
    const struct kv_demo_ops_req *r = user;
    ADD("-- round %" PRId32 ": the draft (the first %" PRId32 " layer%s) proposes %" PRId32
        " token%s after ", rd->round, r->draft_layers, r->draft_layers == 1 ? "" : "s", rd->k,
        rd->k == 1 ? "" : "s");
    put_tok(r, rd->drafts[0]);
    ADD(" (position %" PRId32 ")%s", rd->pos, rd->k > 0 ? ":" : "");
    for (int32_t i = 1; i <= rd->k; i++) {
        ADD(" ");
        put_tok(r, rd->drafts[i]);
    }
    EMIT(r, 3);
    ADD("     the full model verifies them in one call of %" PRId32 " tokens; its tokens:",
        rd->k + 1);
    for (int32_t i = 0; i <= rd->k; i++) {
        ADD(" ");
        put_tok(r, rd->targets[i]);
    }
    EMIT(r, 8);
    ADD("     %" PRId32 " of %" PRId32 " drafts accepted, then the full model's ", rd->accepted,
        rd->k);
    put_tok(r, rd->targets[rd->accepted]);
    EMIT(r, 8);
    ADD("     kv_cache_crop: the cache held %" PRId32 " tokens, rolled back to %" PRId32 "%s",
        rd->held, rd->kept, rd->held == rd->kept ? " (nothing to roll back)" : "");
    EMIT(r, 8);
}

static int walk_spec(const struct kv_demo_ops_req *r, struct kv_cache *c)
{
    const int32_t N = r->steps + 1;
    int32_t *out = kv_alloc((size_t)N * sizeof *out);
    int32_t *greedy = kv_alloc((size_t)N * sizeof *greedy);
    enum kv_status s = out == NULL || greedy == NULL ? KV_ERR_NOMEM : KV_OK;
    const struct kv_gen_params gp = {.batch = 1, .prompt_len = r->prompt_len,
                                     .prompt = r->prompt, .new_tokens = N, .n_threads = 1};
    struct kv_spec_stats ss = {0};
    if (s == KV_OK) {
        ADD("-- prefill: the prompt (%" PRId32 " tokens) through the full model and through "
            "the draft (its first %" PRId32 " layer%s, with a cache of its own)",
            r->prompt_len, r->draft_layers, r->draft_layers == 1 ? "" : "s");
        EMIT(r, 3);
        s = kv_generate_speculative_ex(r->m, c, &gp, r->draft_layers, r->draft_tokens, out, &ss,
                                       on_round, (void *)r);
    }
    /* greedy decoding without the draft, for the verdict */
    if (s == KV_OK)
        s = kv_generate(r->m, c, &gp, greedy, NULL, NULL);
    if (s == KV_OK) {
        const int same = memcmp(out, greedy, (size_t)N * sizeof *out) == 0;
        ADD("-- %" PRId32 " tokens in %" PRId64 " rounds, %" PRId64 " of %" PRId64 " drafts "
            "accepted; %s greedy decoding without the draft:", N, ss.rounds, ss.accepted,
            ss.proposed, same ? "the same tokens as" : "NOT the tokens of");
        for (int32_t t = 0; t < N; t++) {
            ADD(" ");
            put_tok(r, out[t]);
        }
        EMIT(r, 3);
    } else {
        fprintf(stderr, "kvlab: demo: %s\n", kv_status_str(s));
    }
    kv_free(greedy);
    kv_free(out);
    return s == KV_OK ? 0 : 1;
}

/* ------------------------------------------------------------------------ */

int kv_demo_ops(const struct kv_demo_ops_req *r)
{
    struct kv_cache_config cc = r->cc;
    cc.batch = r->batch;
    struct kv_cache *c = NULL;
    enum kv_status s = kv_cache_create(&c, r->ops, &cc, r->params);
    if (s != KV_OK) {
        fprintf(stderr, "kvlab: demo: strategy '%s' rejects this configuration: %s\n",
                r->ops->name, kv_status_str(s));
        return s == KV_ERR_NOMEM ? 1 : 2;
    }
    char desc[256];
    kv_cache_describe(c, desc, sizeof desc);
    kv_line_clear(&line);
    ADD("cache  %s: %s", r->ops->name, desc);
    EMIT(r, 7);
    ADD("prompt");
    for (int32_t t = 0; t < r->prompt_len; t++) {
        ADD(" ");
        put_tok(r, r->prompt[t]);
    }
    EMIT(r, 7);
    const int rc = r->beams > 0         ? walk_beams(r, c)
                   : r->draft_layers > 0 ? walk_spec(r, c)
                                         : walk_shared(r, c);
    kv_cache_destroy(c);
    return rc;
}
