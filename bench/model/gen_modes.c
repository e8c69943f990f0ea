/*
 * gen_modes.c - the generation modes built on the cache operations: beam
 * search (reorder), n samples of one prompt (a shared prefix: reorder with
 * every source 0) and self-speculative decoding (crop).
 *
 * The design decision: each mode drives the cache only through the
 * interface's optional operations (strategies/strategy.h), declared by
 * capability flags, and asks for them before doing anything
 * (KV_ERR_UNSUPPORTED otherwise). So the same beam search runs over a paged
 * cache, whose reorder moves block-table entries, and over a contiguous
 * one, whose reorder copies rows; the tests check that both give the
 * result of recomputing every beam without a cache.
 *
 * Speculation. A draft model made of the first draft_layers layers of the
 * same model (the same weights, then the final norm and classifier: layer
 * arrays are stored layer after layer, so the draft is the model struct
 * with fewer layers) proposes k tokens greedily with its own cache; the full
 * model verifies [current, d1 .. dk] in one prefill-style call
 * (kv_forward_all) and keeps the drafts up to the first disagreement plus
 * its own next token; both caches are cropped back to what was kept. With
 * a batch, the batch keeps the shortest accepted run (one crop length for
 * every sequence), so each sequence still gets exactly its greedy tokens.
 *
 * Part of libkvlab.a (kv_model.h declares these functions, so the installed
 * library must define them): it uses the model and the cache interface only,
 * never the command line. Every entry checks the model's config
 * (kv_model_config_check) and its other arguments before it allocates or
 * touches the cache.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/kv_ops.h"
#include "kv_model.h"

/* ------------------------------------------------------------------------ */
/* Sampling                                                                 */

uint64_t kv_sample_rng(uint64_t seed, int32_t sample)
{
    uint64_t s = seed ^ (0x9E3779B97F4A7C15ull * ((uint64_t)sample + 1)); /* no int overflow */
    (void)kv_rng_next(&s); /* decorrelate neighbouring seeds */
    return s;
}

int32_t kv_sample_token(const float *logits, int32_t vocab, float temperature, uint64_t *rng)
{
    if (logits == NULL || vocab < 1 || (temperature > 0.0f && rng == NULL))
        return -1;
    if (!(temperature > 0.0f))
        return kv_argmax(logits, vocab);
    const int32_t top = kv_argmax(logits, vocab);
    const double mx = logits[top], inv_t = 1.0 / (double)temperature;
    double sum = 0.0;
    for (int32_t i = 0; i < vocab; i++)
        sum += exp(((double)logits[i] - mx) * inv_t);
    /* u in [0, sum): the first token whose running sum passes it */
    const double u = (double)(kv_rng_next(rng) >> 11) / 9007199254740992.0 * sum;
    double acc = 0.0;
    for (int32_t i = 0; i < vocab; i++) {
        acc += exp(((double)logits[i] - mx) * inv_t);
        if (u < acc)
            return i;
    }
    return top; /* u rounded up to sum: the most likely token */
}

enum kv_status kv_generate_samples(const struct kv_model *m, struct kv_cache *cache,
                                   const struct kv_gen_params *gp, float temperature,
                                   uint64_t seed, int32_t *out_tokens, kv_gen_step_fn on_step,
                                   void *user)
{
    if (m == NULL || cache == NULL || gp == NULL || out_tokens == NULL || gp->prompt == NULL ||
        gp->batch < 1 || gp->prompt_len < 1 || gp->new_tokens < 1 ||
        gp->batch != cache->cfg.batch || !(temperature >= 0.0f) || gp->pad != NULL ||
        gp->window != 0 || kv_model_config_check(&m->cfg) != KV_OK)
        return KV_ERR_INVALID;
    const int32_t B = gp->batch, P = gp->prompt_len, N = gp->new_tokens;
    const int32_t V = m->cfg.vocab_size;
    if (N - 1 > m->cfg.max_len - P)
        return KV_ERR_INVALID;
    if (!kv_cache_has(cache, KV_CAP_KEEPS_HISTORY | KV_CAP_REORDER))
        return KV_ERR_UNSUPPORTED;
    struct kv_runner *r = NULL;
    enum kv_status s = kv_runner_create(&r, m, B, 1, gp->n_threads);
    if (s != KV_OK)
        return s;
    float *logits = kv_alloc((size_t)B * (size_t)V * sizeof *logits);
    int32_t *next = kv_alloc((size_t)B * sizeof *next);
    uint64_t *rng = kv_alloc((size_t)B * sizeof *rng);
    if (logits == NULL || next == NULL || rng == NULL) {
        s = KV_ERR_NOMEM;
        goto done;
    }
    for (int32_t b = 0; b < B; b++)
        rng[b] = kv_sample_rng(seed, b);
    for (int32_t step = 0; step < N; step++) {
        struct kv_step_stats st = {0};
        const int64_t t0 = kv_now_ns();
        s = step == 0 ? kv_prefill_shared(m, cache, gp->prompt, P, B, gp->n_threads, logits, &st)
                      : kv_forward(r, m, cache, next, 1, P + step - 1, NULL, logits, &st);
        const int64_t ns = kv_now_ns() - t0;
        if (s != KV_OK)
            goto done;
        for (int32_t b = 0; b < B; b++) {
            next[b] = kv_sample_token(logits + (size_t)b * V, V, temperature, &rng[b]);
            out_tokens[(size_t)b * N + step] = next[b];
        }
        if (on_step != NULL)
            on_step(user, step, logits, next, &st, ns);
    }
done:
    kv_free(rng);
    kv_free(next);
    kv_free(logits);
    kv_runner_destroy(r);
    return s;
}

/* ------------------------------------------------------------------------ */
/* Beam search                                                              */

/* lp[0..n) <- log softmax(x), in double for the sums. */
static void log_softmax(double *lp, const float *x, int32_t n)
{
    const double mx = x[kv_argmax(x, n)];
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++)
        sum += exp((double)x[i] - mx);
    /* sum >= 1: the maximum's own term is exp(0) */
    const double lse = mx + log(sum > 1.0 ? sum : 1.0);
    for (int32_t i = 0; i < n; i++)
        lp[i] = (double)x[i] - lse;
}

/* A candidate beam: its score and (parent, token). Better: higher score,
 * then the lower parent, then the lower token (a fixed order for ties). */
struct cand {
    double score;
    int32_t parent, token;
};

static int cand_better(const struct cand *a, const struct cand *b)
{
    if (a->score != b->score)
        return a->score > b->score;
    if (a->parent != b->parent)
        return a->parent < b->parent;
    return a->token < b->token;
}

/* Keeps the K best of the candidates offered, best first (insertion). */
static void top_insert(struct cand *top, int32_t *n, int32_t K, struct cand c)
{
    if (*n == K && !cand_better(&c, &top[K - 1]))
        return;
    int32_t i = *n < K ? (*n)++ : K - 1;
    while (i > 0 && cand_better(&c, &top[i - 1])) {
        top[i] = top[i - 1];
        i--;
    }
    top[i] = c;
}

enum kv_status kv_generate_beams(const struct kv_model *m, struct kv_cache *cache,
                                 const struct kv_gen_params *gp, int32_t *out_tokens,
                                 double *scores, kv_gen_step_fn on_step, void *user)
{
    return kv_generate_beams_ex(m, cache, gp, out_tokens, scores, on_step, NULL, user);
}

enum kv_status kv_generate_beams_ex(const struct kv_model *m, struct kv_cache *cache,
                                    const struct kv_gen_params *gp, int32_t *out_tokens,
                                    double *scores, kv_gen_step_fn on_step, kv_beam_fn on_beams,
                                    void *user)
{
    if (m == NULL || cache == NULL || gp == NULL || out_tokens == NULL || scores == NULL ||
        gp->prompt == NULL || gp->batch < 1 || gp->prompt_len < 1 || gp->new_tokens < 1 ||
        gp->batch != cache->cfg.batch || gp->pad != NULL || gp->window != 0 ||
        kv_model_config_check(&m->cfg) != KV_OK)
        return KV_ERR_INVALID;
    const int32_t K = gp->batch, P = gp->prompt_len, N = gp->new_tokens;
    const int32_t V = m->cfg.vocab_size;
    if (N - 1 > m->cfg.max_len - P || K > V)
        return KV_ERR_INVALID;
    if (!kv_cache_has(cache, KV_CAP_KEEPS_HISTORY | KV_CAP_REORDER))
        return KV_ERR_UNSUPPORTED;
    struct kv_runner *r = NULL;
    enum kv_status s = kv_runner_create(&r, m, K, 1, gp->n_threads);
    if (s != KV_OK)
        return s;
    float *logits = kv_alloc((size_t)K * (size_t)V * sizeof *logits);
    double *lp = kv_alloc((size_t)V * sizeof *lp);
    double *score = kv_alloc((size_t)K * sizeof *score);
    struct cand *top = kv_alloc((size_t)K * sizeof *top);
    int32_t *parent = kv_alloc((size_t)K * sizeof *parent);
    int32_t *next = kv_alloc((size_t)K * sizeof *next);
    int32_t *hist = kv_alloc((size_t)K * (size_t)N * sizeof *hist);
    int32_t *hist2 = kv_alloc((size_t)K * (size_t)N * sizeof *hist2);
    if (logits == NULL || lp == NULL || score == NULL || top == NULL || parent == NULL ||
        next == NULL || hist == NULL || hist2 == NULL) {
        s = KV_ERR_NOMEM;
        goto done;
    }
    for (int32_t step = 0; step < N; step++) {
        struct kv_step_stats st = {0};
        const int64_t t0 = kv_now_ns();
        /* step 0: one prefilled prompt, every beam its copy; the K first
         * tokens come from its one distribution (beam 0's) */
        s = step == 0 ? kv_prefill_shared(m, cache, gp->prompt, P, K, gp->n_threads, logits, &st)
                      : kv_forward(r, m, cache, next, 1, P + step - 1, NULL, logits, &st);
        if (s != KV_OK)
            goto done;
        int32_t n_top = 0;
        for (int32_t b = 0; b < (step == 0 ? 1 : K); b++) {
            log_softmax(lp, logits + (size_t)b * V, V);
            const double base = step == 0 ? 0.0 : score[b];
            for (int32_t v = 0; v < V; v++)
                top_insert(top, &n_top, K, (struct cand){base + lp[v], b, v});
        }
        for (int32_t j = 0; j < K; j++) {
            parent[j] = top[j].parent;
            next[j] = top[j].token;
            score[j] = top[j].score;
            memcpy(hist2 + (size_t)j * N, hist + (size_t)parent[j] * N,
                   (size_t)step * sizeof *hist);
            hist2[(size_t)j * N + step] = next[j];
        }
        int32_t *t = hist;
        hist = hist2;
        hist2 = t;
        /* each beam continues its parent's cache; the last step's choice
         * is never fed, so it needs no reorder */
        if (step > 0 && step + 1 < N)
            s = kv_cache_reorder(cache, parent, K);
        const int64_t ns = kv_now_ns() - t0;
        if (s != KV_OK)
            goto done;
        if (on_step != NULL)
            on_step(user, step, logits, next, &st, ns);
        if (on_beams != NULL)
            on_beams(user, step, parent, hist, N, score, cache);
    }
    /* length-normalised: every beam has N tokens (no end token) */
    for (int32_t j = 0; j < K; j++)
        scores[j] = score[j] / (double)N;
    memcpy(out_tokens, hist, (size_t)K * (size_t)N * sizeof *hist);
done:
    kv_free(hist2);
    kv_free(hist);
    kv_free(next);
    kv_free(parent);
    kv_free(top);
    kv_free(score);
    kv_free(lp);
    kv_free(logits);
    kv_runner_destroy(r);
    return s;
}

/* ------------------------------------------------------------------------ */
/* Self-speculative decoding                                                */

enum kv_status kv_generate_speculative(const struct kv_model *m, struct kv_cache *cache,
                                       const struct kv_gen_params *gp, int32_t draft_layers,
                                       int32_t draft_tokens, int32_t *out_tokens,
                                       struct kv_spec_stats *spec)
{
    return kv_generate_speculative_ex(m, cache, gp, draft_layers, draft_tokens, out_tokens, spec,
                                      NULL, NULL);
}

/* Adds a forward call's FLOPs to the speculation's count; passes s on. */
static enum kv_status spec_count(struct kv_spec_stats *sp, struct kv_step_stats *st,
                                 enum kv_status s)
{
    sp->flops.gemm += st->flops.gemm;
    sp->flops.attn += st->flops.attn;
    sp->flops.softmax += st->flops.softmax;
    sp->flops.norm += st->flops.norm;
    sp->flops.other += st->flops.other;
    memset(st, 0, sizeof *st);
    return s;
}

enum kv_status kv_generate_speculative_ex(const struct kv_model *m, struct kv_cache *cache,
                                          const struct kv_gen_params *gp, int32_t draft_layers,
                                          int32_t draft_tokens, int32_t *out_tokens,
                                          struct kv_spec_stats *spec, kv_spec_fn on_round,
                                          void *user)
{
    if (m == NULL || cache == NULL || gp == NULL || out_tokens == NULL || gp->prompt == NULL ||
        gp->batch < 1 || gp->prompt_len < 1 || gp->new_tokens < 1 ||
        gp->batch != cache->cfg.batch || gp->pad != NULL || gp->window != 0 ||
        kv_model_config_check(&m->cfg) != KV_OK || draft_layers < 1 ||
        draft_layers > m->cfg.n_layers || draft_tokens < 1 || draft_tokens > 64)
        return KV_ERR_INVALID;
    const int32_t B = gp->batch, P = gp->prompt_len, N = gp->new_tokens;
    const int32_t V = m->cfg.vocab_size, KD = draft_tokens;
    if (N - 1 > m->cfg.max_len - P)
        return KV_ERR_INVALID;
    if (!kv_cache_has(cache, KV_CAP_KEEPS_HISTORY | KV_CAP_CROP | KV_CAP_CHUNKED_APPEND))
        return KV_ERR_UNSUPPORTED;
    struct kv_model draft = *m; /* the first draft_layers layers, same weights */
    draft.cfg.n_layers = draft_layers;
    draft.storage = NULL;
    struct kv_cache_config dcfg = cache->cfg;
    dcfg.n_layers = draft_layers;

    struct kv_cache *dc = NULL;
    struct kv_runner *rf = NULL, *rd = NULL;
    const int32_t vt = KD + 1 > P ? KD + 1 : P; /* tokens of a full-model call */
    enum kv_status s = kv_cache_create(&dc, cache->ops, &dcfg, cache->params);
    if (s == KV_OK)
        s = kv_runner_create(&rf, m, B, vt, gp->n_threads);
    if (s == KV_OK)
        s = kv_runner_create(&rd, &draft, B, P, gp->n_threads);
    float *logits = kv_alloc((size_t)B * (size_t)vt * (size_t)V * sizeof *logits);
    int32_t *seq = kv_alloc((size_t)B * ((size_t)P + (size_t)N) * sizeof *seq); /* all tokens */
    int32_t *call = kv_alloc((size_t)B * (size_t)vt * sizeof *call);
    int32_t *d = kv_alloc((size_t)B * (size_t)(KD + 1) * sizeof *d);  /* cur, d1 .. dk */
    int32_t *tgt = kv_alloc((size_t)B * (size_t)(KD + 1) * sizeof *tgt);
    if (s == KV_OK && (logits == NULL || seq == NULL || call == NULL || d == NULL || tgt == NULL))
        s = KV_ERR_NOMEM;
    if (s == KV_OK)
        s = kv_cache_reset(cache);
    if (s != KV_OK)
        goto done;
    struct kv_spec_stats sp = {0};
    struct kv_step_stats st = {0}; /* the last forward call's, added to sp.flops */
    const size_t W = (size_t)P + (size_t)N; /* a sequence's row of seq */
    for (int32_t b = 0; b < B; b++)
        memcpy(seq + (size_t)b * W, gp->prompt + (size_t)b * P, (size_t)P * sizeof *seq);

    /* prefill both models; the full model's logits give the first token */
    s = spec_count(&sp, &st, kv_forward(rf, m, cache, gp->prompt, P, 0, NULL, logits, &st));
    if (s == KV_OK)
        s = spec_count(&sp, &st, kv_forward(rd, &draft, dc, gp->prompt, P, 0, NULL,
                                            logits + (size_t)B * V, &st));
    if (s != KV_OK)
        goto done;
    for (int32_t b = 0; b < B; b++)
        seq[(size_t)b * W + P] = kv_argmax(logits + (size_t)b * V, V);
    int32_t have = 1;  /* tokens generated */
    int32_t pos = P;   /* position of the current (last generated, not fed) token */
    while (have < N) {
        const int32_t k = KD < N - have - 1 ? KD : N - have - 1; /* drafts this round */
        /* the draft catches up with what was kept (after a full acceptance
         * its cache lacks the last draft), then proposes k tokens */
        while ((s == KV_OK) && kv_cache_seq_len(dc, 0) < pos) {
            const int32_t at = kv_cache_seq_len(dc, 0);
            for (int32_t b = 0; b < B; b++)
                call[b] = seq[(size_t)b * W + at];
            s = spec_count(&sp, &st, kv_forward(rd, &draft, dc, call, 1, at, NULL, logits, &st));
        }
        for (int32_t b = 0; b < B; b++)
            d[(size_t)b * (KD + 1)] = seq[(size_t)b * W + pos];
        for (int32_t i = 1; s == KV_OK && i <= k; i++) {
            for (int32_t b = 0; b < B; b++)
                call[b] = d[(size_t)b * (KD + 1) + i - 1];
            s = spec_count(&sp, &st,
                           kv_forward(rd, &draft, dc, call, 1, pos + i - 1, NULL, logits, &st));
            for (int32_t b = 0; s == KV_OK && b < B; b++)
                d[(size_t)b * (KD + 1) + i] = kv_argmax(logits + (size_t)b * V, V);
        }
        if (s != KV_OK)
            goto done;
        /* the full model verifies cur, d1 .. dk in one call */
        for (int32_t b = 0; b < B; b++)
            memcpy(call + (size_t)b * (k + 1), d + (size_t)b * (KD + 1),
                   (size_t)(k + 1) * sizeof *call);
        s = spec_count(&sp, &st, kv_forward_all(rf, m, cache, call, k + 1, pos, logits, &st));
        if (s != KV_OK)
            goto done;
        int32_t a = k; /* drafts every sequence accepts */
        for (int32_t b = 0; b < B; b++) {
            int32_t ab = 0;
            for (int32_t j = 0; j <= k; j++)
                tgt[(size_t)b * (KD + 1) + j] =
                    kv_argmax(logits + ((size_t)b * (k + 1) + (size_t)j) * V, V);
            while (ab < k && d[(size_t)b * (KD + 1) + ab + 1] == tgt[(size_t)b * (KD + 1) + ab])
                ab++;
            sp.accepted_seq += ab;
            a = ab < a ? ab : a;
        }
        sp.proposed += (int64_t)k * B;
        sp.accepted += (int64_t)a * B;
        sp.rounds++;
        /* keep d1 .. da and the full model's token after da */
        for (int32_t b = 0; b < B; b++) {
            int32_t *row = seq + (size_t)b * W + P + have;
            for (int32_t i = 1; i <= a; i++)
                row[i - 1] = d[(size_t)b * (KD + 1) + i];
            row[a] = tgt[(size_t)b * (KD + 1) + a];
        }
        have += a + 1;
        const int32_t held = kv_cache_seq_len(cache, 0);
        pos += a + 1;
        if (on_round != NULL) {
            const struct kv_spec_round info = {.round = (int32_t)sp.rounds, .pos = pos - a - 1,
                                             .k = k, .accepted = a, .drafts = d,
                                             .targets = tgt, .stride = KD + 1,
                                             .held = held, .kept = pos};
            on_round(user, &info);
        }
        /* roll both caches back to the kept tokens (the current one unfed) */
        if ((s = kv_cache_crop(cache, pos)) != KV_OK ||
            (s = kv_cache_crop(dc, pos < kv_cache_seq_len(dc, 0) ? pos
                                                                  : kv_cache_seq_len(dc, 0))) !=
                KV_OK)
            goto done;
    }
    for (int32_t b = 0; b < B; b++)
        memcpy(out_tokens + (size_t)b * N, seq + (size_t)b * W + P, (size_t)N * sizeof *seq);
    if (spec != NULL)
        *spec = sp;
done:
    kv_free(tgt);
    kv_free(d);
    kv_free(call);
    kv_free(seq);
    kv_free(logits);
    kv_runner_destroy(rd);
    kv_runner_destroy(rf);
    kv_cache_destroy(dc);
    return s;
}
