/*
 * check_gen_modes.c - prefix sharing and the generation modes that use the
 * cache operations (bench/model/gen_modes.c), each against an independent naive
 * reference written here:
 *   - shared prompt: B sequences from one prefilled prompt give the tokens
 *     of B unshared copies of it (every strategy that can reorder), and a
 *     paged cache then holds P + B x (generated) token rows, not
 *     B x (P + generated), with the copy-on-write bytes of the shared,
 *     partly filled last prompt block computed from the block size;
 *   - beam search over every strategy that can reorder (paged moves table
 *     entries, dynamic copies rows) == a beam search that recomputes every
 *     beam from scratch through the no-history strategy, sorting all
 *     candidates (qsort) instead of the library's insertion;
 *   - samples of one shared prompt == independent runs of one sequence
 *     each, fed by hand with the same random stream;
 *   - greedy with speculation == greedy without, token for token, for every
 *     exact strategy that can crop, and a model whose last layer adds
 *     nothing (its output projections zeroed) makes the draft exact, so
 *     every draft is accepted (the full-acceptance paths are exercised);
 *   - the modes answer KV_ERR_UNSUPPORTED for a strategy without the
 *     operation they need.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_params.h"
#include "../bench/model/kv_model.h"
#include "../kernels/kv_ops.h"

/* Beam scores of the library vs the naive recompute: sums of log-softmax of
 * logits that agree to ~1e-5 (decode vs prefill kernel, float32) over a
 * dozen steps, divided by the length. */
#define SCORE_TOL 1e-4

#define P 22     /* prompt tokens: 5 full blocks of 4 and a shared block of 2 */
#define NEW 9    /* generated tokens (8 fed) */
#define BLOCK 4  /* the paged cache's block size in these tests */

static struct kv_model_config small_cfg(int32_t layers)
{
    return (struct kv_model_config){.dim = 32, .hidden_dim = 48, .n_layers = layers,
                                    .n_heads = 4, .n_kv_heads = 2, .vocab_size = 64,
                                    .max_len = 96, .mlp = 1, .shared_classifier = 0};
}

static struct kv_model *make_model(const struct kv_model_config *c, uint64_t seed)
{
    struct kv_model *m = NULL;
    ck_assert_int_eq(kv_model_create_synthetic(&m, c, seed), KV_OK);
    return m;
}

/* A cache of ops for the model and batch: small windows and groups where
 * the strategy has them, paged blocks of BLOCK. */
static struct kv_cache *make_cache(const struct kv_strategy_ops *ops, const struct kv_model *m,
                                   int32_t batch)
{
    const struct kv_cache_config cc = {.n_layers = m->cfg.n_layers, .batch = batch,
                                       .n_kv_heads = m->cfg.n_kv_heads,
                                       .head_dim = m->cfg.dim / m->cfg.n_heads,
                                       .max_len = m->cfg.max_len};
    const struct test_params tp = {.window = 64, .group = 8, .residual = 4};
    struct test_param_block blk;
    test_params_fill(ops, &blk, &tp);
    if (kv_param_find(ops, "block") >= 0)
        ck_assert_int_eq(kv_params_set(ops, blk.b, "block", BLOCK), KV_OK);
    struct kv_cache *c = NULL;
    enum kv_status s = kv_cache_create(&c, ops, &cc, blk.b);
    ck_assert_msg(s == KV_OK, "%s: %s", ops->name, kv_status_str(s));
    return c;
}

static void make_prompt(int32_t *p, int32_t n, int32_t vocab, uint64_t seed)
{
    for (int32_t i = 0; i < n; i++)
        p[i] = (int32_t)(kv_rng_next(&seed) % (uint64_t)vocab);
}

/* Exact (lossless, evicting nothing) strategies with every flag of caps. */
static int exact_with(const struct kv_strategy_ops *ops, uint32_t caps)
{
    return (ops->caps & caps) == caps && !(ops->caps & (KV_CAP_LOSSY | KV_CAP_EVICTS));
}

/* ------------------------------------------------------------------------ */
/* Shared prompt                                                            */

START_TEST(test_shared_equals_unshared)
{
    const struct kv_model_config mc = small_cfg(2);
    struct kv_model *m = make_model(&mc, 7);
    enum { B = 3 };
    int32_t prompt[B * P], shared_tok[B * NEW], plain_tok[B * NEW];
    make_prompt(prompt, P, mc.vocab_size, 11);
    for (int32_t b = 1; b < B; b++)
        memcpy(prompt + b * P, prompt, P * sizeof *prompt);
    int tested = 0;
    for (int32_t i = 0; i < kv_strategy_count(); i++) {
        const struct kv_strategy_ops *ops = kv_strategy_at(i);
        if (!exact_with(ops, KV_CAP_KEEPS_HISTORY | KV_CAP_REORDER))
            continue;
        struct kv_cache *c = make_cache(ops, m, B);
        struct kv_gen_params gp = {.batch = B, .prompt_len = P, .prompt = prompt,
                                   .new_tokens = NEW, .n_threads = 1};
        ck_assert_int_eq(kv_generate(m, c, &gp, plain_tok, NULL, NULL), KV_OK);
        gp.shared_prompt = 1;
        ck_assert_int_eq(kv_generate(m, c, &gp, shared_tok, NULL, NULL), KV_OK);
        ck_assert_int_eq(c->cfg.batch, B);
        for (int32_t k = 0; k < B * NEW; k++)
            ck_assert_msg(shared_tok[k] == plain_tok[k], "%s: token %d: %d shared, %d not",
                          ops->name, k, shared_tok[k], plain_tok[k]);
        kv_cache_destroy(c);
        tested++;
    }
    ck_assert_int_ge(tested, 3); /* dynamic, dynamic-concat, static, paged */
    kv_model_destroy(m);
}
END_TEST

/* Paged: the token rows held, shared rows and copy-on-write bytes, from
 * the block arithmetic alone. */
START_TEST(test_shared_paged_bytes)
{
    const struct kv_model_config mc = small_cfg(2);
    struct kv_model *m = make_model(&mc, 7);
    enum { B = 4 };
    int32_t prompt[B * P], tok[B * NEW];
    make_prompt(prompt, P, mc.vocab_size, 5);
    for (int32_t b = 1; b < B; b++)
        memcpy(prompt + b * P, prompt, P * sizeof *prompt);
    const struct kv_strategy_ops *ops = kv_strategy_find("paged");
    ck_assert_ptr_nonnull(ops);
    const size_t row = 2 * (size_t)mc.n_kv_heads * (size_t)(mc.dim / mc.n_heads) * sizeof(float);
    const size_t L = (size_t)mc.n_layers, fed = NEW - 1;
    struct kv_cache_stats st;
    struct kv_gen_params gp = {.batch = B, .prompt_len = P, .prompt = prompt,
                               .new_tokens = NEW, .n_threads = 1};

    struct kv_cache *c = make_cache(ops, m, B);
    ck_assert_int_eq(kv_generate(m, c, &gp, tok, NULL, NULL), KV_OK);
    kv_cache_stats(c, &st);
    ck_assert_uint_eq(st.tokens, L * B * (P + fed) * row); /* B x (P + generated) */
    ck_assert_uint_eq(st.shared, 0);
    ck_assert_uint_eq(st.cow, 0);
    const size_t unshared_resident = st.resident;

    gp.shared_prompt = 1;
    ck_assert_int_eq(kv_generate(m, c, &gp, tok, NULL, NULL), KV_OK);
    kv_cache_stats(c, &st);
    /* P + B x generated, plus the copies of the partly filled last prompt
     * block (P % BLOCK rows) that B - 1 sequences made before writing */
    ck_assert_uint_eq(st.tokens, L * (P + B * fed + (B - 1) * (P % BLOCK)) * row);
    /* the full prompt blocks stay shared by all B */
    ck_assert_uint_eq(st.shared, L * (P / BLOCK * BLOCK) * row);
    /* the partly filled last prompt block (P % BLOCK rows): copied by every
     * sequence but the last one to write it, once per layer */
    ck_assert_uint_eq(st.cow, L * (B - 1) * (P % BLOCK) * row);
    ck_assert_uint_lt(st.resident, unshared_resident);
    kv_cache_destroy(c);
    kv_model_destroy(m);
}
END_TEST

/* A beam step over a paged cache allocates nothing: after the first
 * reorder (which makes the spare tables) a reorder swaps tables, and a
 * decode step only takes blocks from the pool's free list. */
START_TEST(test_paged_beam_steps_allocate_nothing)
{
    const struct kv_model_config mc = small_cfg(2);
    struct kv_model *m = make_model(&mc, 3);
    enum { K = 4 };
    int32_t prompt[P];
    make_prompt(prompt, P, mc.vocab_size, 8);
    struct kv_cache *c = make_cache(kv_strategy_find("paged"), m, K);
    float *logits = malloc((size_t)K * mc.vocab_size * sizeof *logits);
    struct kv_runner *r = NULL;
    ck_assert_ptr_nonnull(logits);
    ck_assert_int_eq(kv_runner_create(&r, m, K, 1, 1), KV_OK);
    ck_assert_int_eq(kv_prefill_shared(m, c, prompt, P, K, 1, logits, NULL), KV_OK);
    static const int32_t maps[3][K] = {{0, 0, 1, 1}, {3, 2, 1, 0}, {2, 2, 2, 0}};
    int32_t tok[K] = {1, 2, 3, 4};
    /* a warm-up run of the same steps grows the pool (a chunk allocation
     * is how a pool grows) and makes the spare tables; crop gives its
     * blocks back to the free list */
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1)
            kv_alloc_fail_at(0, 0); /* restarts the count */
        for (int32_t step = 0; step < 6; step++) {
            ck_assert_int_eq(kv_forward(r, m, c, tok, 1, P + step, NULL, logits, NULL), KV_OK);
            ck_assert_int_eq(kv_cache_reorder(c, maps[step % 3], K), KV_OK);
        }
        if (pass == 1)
            ck_assert_int_eq(kv_alloc_count(), 0); /* 6 beam steps, no allocation */
        ck_assert_int_eq(kv_cache_crop(c, P), KV_OK);
    }
    kv_runner_destroy(r);
    free(logits);
    kv_cache_destroy(c);
    kv_model_destroy(m);
}
END_TEST

/* Every mode refuses a cache without the operation it needs. */
START_TEST(test_shared_refused_without_reorder)
{
    const struct kv_model_config mc = small_cfg(2);
    struct kv_model *m = make_model(&mc, 7);
    int32_t prompt[2 * P], tok[2 * NEW];
    make_prompt(prompt, 2 * P, mc.vocab_size, 3);
    int tested = 0;
    for (int32_t i = 0; i < kv_strategy_count(); i++) {
        const struct kv_strategy_ops *ops = kv_strategy_at(i);
        struct kv_cache *c = make_cache(ops, m, 2);
        if (kv_cache_has(c, KV_CAP_KEEPS_HISTORY | KV_CAP_REORDER)) {
            kv_cache_destroy(c);
            continue;
        }
        struct kv_gen_params gp = {.batch = 2, .prompt_len = P, .prompt = prompt,
                                   .new_tokens = NEW, .n_threads = 1, .shared_prompt = 1};
        ck_assert_int_eq(kv_generate(m, c, &gp, tok, NULL, NULL), KV_ERR_UNSUPPORTED);
        ck_assert_int_eq(kv_generate_beams(m, c, &gp, tok, (double[2]){0}, NULL, NULL),
                         KV_ERR_UNSUPPORTED);
        ck_assert_int_eq(kv_generate_samples(m, c, &gp, 1.0f, 1, tok, NULL, NULL),
                         KV_ERR_UNSUPPORTED);
        if (!kv_cache_has(c, KV_CAP_CROP)) {
            gp.shared_prompt = 0;
            ck_assert_int_eq(kv_generate_speculative(m, c, &gp, 1, 3, tok, NULL),
                             KV_ERR_UNSUPPORTED);
        }
        kv_cache_destroy(c);
        tested++;
    }
    ck_assert_int_ge(tested, 1); /* at least `none` */
    kv_model_destroy(m);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Beam search against recomputing every beam                               */

struct ncand {
    double score;
    int32_t parent, token;
};

static int ncand_cmp(const void *a, const void *b)
{
    const struct ncand *x = a, *y = b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    if (x->parent != y->parent)
        return x->parent < y->parent ? -1 : 1;
    return x->token < y->token ? -1 : x->token > y->token;
}

/* logits after prompt + toks[0..n), recomputed from nothing */
static void recompute_logits(const struct kv_model *m, const struct kv_strategy_ops *none,
                             const int32_t *prompt, const int32_t *toks, int32_t n, float *logits)
{
    int32_t seq[P + NEW];
    memcpy(seq, prompt, P * sizeof *seq);
    memcpy(seq + P, toks, (size_t)n * sizeof *seq);
    struct kv_cache *c = make_cache(none, m, 1);
    struct kv_runner *r = NULL;
    ck_assert_int_eq(kv_runner_create(&r, m, 1, P + n, 1), KV_OK);
    ck_assert_int_eq(kv_forward(r, m, c, seq, P + n, 0, NULL, logits, NULL), KV_OK);
    kv_runner_destroy(r);
    kv_cache_destroy(c);
}

static void naive_beams(const struct kv_model *m, const int32_t *prompt, int32_t K,
                        int32_t *out, double *scores)
{
    const struct kv_strategy_ops *none = kv_strategy_with(0, KV_CAP_KEEPS_HISTORY);
    ck_assert_ptr_nonnull(none);
    const int32_t V = m->cfg.vocab_size;
    float *logits = malloc((size_t)V * sizeof *logits);
    struct ncand *all = malloc((size_t)K * V * sizeof *all);
    int32_t *hist = calloc((size_t)K * NEW, sizeof *hist), *h2 = calloc((size_t)K * NEW, sizeof *h2);
    double score[16] = {0};
    ck_assert(K <= 16 && logits && all && hist && h2);
    for (int32_t step = 0; step < NEW; step++) {
        int32_t n = 0;
        for (int32_t b = 0; b < (step == 0 ? 1 : K); b++) {
            recompute_logits(m, none, prompt, hist + (size_t)b * NEW, step, logits);
            double mx = logits[0], sum = 0.0;
            for (int32_t v = 1; v < V; v++)
                mx = logits[v] > mx ? logits[v] : mx;
            for (int32_t v = 0; v < V; v++)
                sum += exp((double)logits[v] - mx);
            for (int32_t v = 0; v < V; v++)
                all[n++] = (struct ncand){(step ? score[b] : 0.0) + logits[v] - mx - log(sum), b, v};
        }
        qsort(all, (size_t)n, sizeof *all, ncand_cmp);
        for (int32_t j = 0; j < K; j++) {
            memcpy(h2 + (size_t)j * NEW, hist + (size_t)all[j].parent * NEW,
                   (size_t)step * sizeof *h2);
            h2[(size_t)j * NEW + step] = all[j].token;
            score[j] = all[j].score;
        }
        int32_t *t = hist;
        hist = h2;
        h2 = t;
    }
    memcpy(out, hist, (size_t)K * NEW * sizeof *out);
    for (int32_t j = 0; j < K; j++)
        scores[j] = score[j] / NEW;
    free(h2);
    free(hist);
    free(all);
    free(logits);
}

START_TEST(test_beams_equal_recompute)
{
    const struct kv_model_config mc = small_cfg(2);
    struct kv_model *m = make_model(&mc, 21);
    enum { K = 4 };
    int32_t prompt[P], ref[K * NEW], got[K * NEW];
    double ref_s[K], got_s[K];
    make_prompt(prompt, P, mc.vocab_size, 9);
    naive_beams(m, prompt, K, ref, ref_s);
    for (int32_t j = 1; j < K; j++)
        ck_assert(ref_s[j] <= ref_s[j - 1]); /* best first */
    int tested = 0;
    for (int32_t i = 0; i < kv_strategy_count(); i++) {
        const struct kv_strategy_ops *ops = kv_strategy_at(i);
        if (!exact_with(ops, KV_CAP_KEEPS_HISTORY | KV_CAP_REORDER))
            continue;
        struct kv_cache *c = make_cache(ops, m, K);
        const struct kv_gen_params gp = {.batch = K, .prompt_len = P, .prompt = prompt,
                                         .new_tokens = NEW, .n_threads = 1};
        ck_assert_int_eq(kv_generate_beams(m, c, &gp, got, got_s, NULL, NULL), KV_OK);
        for (int32_t k = 0; k < K * NEW; k++)
            ck_assert_msg(got[k] == ref[k], "%s: beam %d token %d: %d, recomputed %d", ops->name,
                          k / NEW, k % NEW, got[k], ref[k]);
        for (int32_t j = 0; j < K; j++)
            ck_assert_msg(fabs(got_s[j] - ref_s[j]) < SCORE_TOL, "%s: beam %d score %g vs %g",
                          ops->name, j, got_s[j], ref_s[j]);
        kv_cache_destroy(c);
        tested++;
    }
    ck_assert_int_ge(tested, 3);
    kv_model_destroy(m);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Samples of one prompt against independent runs                           */

START_TEST(test_samples_equal_independent)
{
    const struct kv_model_config mc = small_cfg(2);
    struct kv_model *m = make_model(&mc, 33);
    enum { N = 3 };
    const uint64_t seed = 1234;
    const float temp = 0.9f;
    int32_t prompt[P], got[N * NEW], ref[N * NEW];
    make_prompt(prompt, P, mc.vocab_size, 4);
    float *logits = malloc((size_t)mc.vocab_size * sizeof *logits);
    ck_assert_ptr_nonnull(logits);
    /* the reference: one sequence at a time, a fresh exact cache, no sharing */
    const struct kv_strategy_ops *exact =
        kv_strategy_with(KV_CAP_KEEPS_HISTORY, KV_CAP_LOSSY | KV_CAP_EVICTS | KV_CAP_PREALLOCATES);
    ck_assert_ptr_nonnull(exact);
    for (int32_t b = 0; b < N; b++) {
        struct kv_cache *c = make_cache(exact, m, 1);
        struct kv_runner *r = NULL;
        ck_assert_int_eq(kv_runner_create(&r, m, 1, P, 1), KV_OK);
        uint64_t rng = kv_sample_rng(seed, b);
        ck_assert_int_eq(kv_forward(r, m, c, prompt, P, 0, NULL, logits, NULL), KV_OK);
        for (int32_t t = 0; t < NEW; t++) {
            int32_t tok = kv_sample_token(logits, mc.vocab_size, temp, &rng);
            ref[b * NEW + t] = tok;
            if (t + 1 < NEW)
                ck_assert_int_eq(kv_forward(r, m, c, &tok, 1, P + t, NULL, logits, NULL), KV_OK);
        }
        kv_runner_destroy(r);
        kv_cache_destroy(c);
    }
    /* the samples differ from each other (else sharing proves nothing) */
    ck_assert(memcmp(ref, ref + NEW, NEW * sizeof *ref) != 0);
    int tested = 0;
    for (int32_t i = 0; i < kv_strategy_count(); i++) {
        const struct kv_strategy_ops *ops = kv_strategy_at(i);
        if (!exact_with(ops, KV_CAP_KEEPS_HISTORY | KV_CAP_REORDER))
            continue;
        struct kv_cache *c = make_cache(ops, m, N);
        const struct kv_gen_params gp = {.batch = N, .prompt_len = P, .prompt = prompt,
                                         .new_tokens = NEW, .n_threads = 1};
        ck_assert_int_eq(kv_generate_samples(m, c, &gp, temp, seed, got, NULL, NULL), KV_OK);
        for (int32_t k = 0; k < N * NEW; k++)
            ck_assert_msg(got[k] == ref[k], "%s: sample %d token %d: %d, alone %d", ops->name,
                          k / NEW, k % NEW, got[k], ref[k]);
        kv_cache_destroy(c);
        tested++;
    }
    ck_assert_int_ge(tested, 3);
    free(logits);
    kv_model_destroy(m);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Speculation                                                              */

/* spec(L, k) vs plain greedy, every exact strategy that can crop */
static void check_speculative(struct kv_model *m, int32_t draft_layers, int32_t k,
                              int expect_all_accepted)
{
    enum { B = 2, NS = 20 };
    int32_t prompt[B * P], plain[B * NS], spec[B * NS];
    make_prompt(prompt, B * P, m->cfg.vocab_size, 17);
    int tested = 0;
    for (int32_t i = 0; i < kv_strategy_count(); i++) {
        const struct kv_strategy_ops *ops = kv_strategy_at(i);
        if (!exact_with(ops, KV_CAP_KEEPS_HISTORY | KV_CAP_CROP | KV_CAP_CHUNKED_APPEND))
            continue;
        struct kv_cache *c = make_cache(ops, m, B);
        const struct kv_gen_params gp = {.batch = B, .prompt_len = P, .prompt = prompt,
                                         .new_tokens = NS, .n_threads = 1};
        ck_assert_int_eq(kv_generate(m, c, &gp, plain, NULL, NULL), KV_OK);
        struct kv_spec_stats ss = {0};
        ck_assert_int_eq(kv_generate_speculative(m, c, &gp, draft_layers, k, spec, &ss), KV_OK);
        for (int32_t t = 0; t < B * NS; t++)
            ck_assert_msg(spec[t] == plain[t], "%s L=%d k=%d: seq %d token %d: %d, greedy %d",
                          ops->name, draft_layers, k, t / NS, t % NS, spec[t], plain[t]);
        /* the cache holds the kept tokens only: prompt + all but the last */
        ck_assert_int_eq(kv_cache_seq_len(c, m->cfg.n_layers - 1), P + NS - 1);
        ck_assert(ss.accepted <= ss.proposed && ss.accepted <= ss.accepted_seq);
        ck_assert(ss.rounds >= 1 && ss.rounds <= NS - 1);
        /* every round yields its accepted drafts plus one token */
        ck_assert_int_eq(ss.accepted / B + ss.rounds, NS - 1);
        ck_assert(ss.flops.gemm > 0 && ss.flops.attn > 0);
        if (expect_all_accepted)
            ck_assert_msg(ss.accepted == ss.proposed && ss.proposed > 0,
                          "%s: %lld of %lld accepted", ops->name, (long long)ss.accepted,
                          (long long)ss.proposed);
        kv_cache_destroy(c);
        tested++;
    }
    ck_assert_int_ge(tested, 3);
}

START_TEST(test_speculative_equals_greedy)
{
    const struct kv_model_config mc = small_cfg(3);
    struct kv_model *m = make_model(&mc, 55);
    check_speculative(m, 1, 3, 0);
    check_speculative(m, 2, 5, 0);
    kv_model_destroy(m);
}
END_TEST

START_TEST(test_speculative_exact_draft)
{
    const struct kv_model_config mc = small_cfg(3);
    struct kv_model *m = make_model(&mc, 56);
    /* the last layer adds nothing to the residual stream: the draft of the
     * first two layers is the model */
    const size_t D = (size_t)mc.dim, H = (size_t)mc.hidden_dim;
    memset(m->w.wo + 2 * D * D, 0, D * D * sizeof(float));
    memset(m->w.w2 + 2 * D * H, 0, D * H * sizeof(float));
    check_speculative(m, 2, 4, 1);
    kv_model_destroy(m);
    /* a draft of every layer is the model itself, untouched: all accepted,
     * and the FLOPs of both models counted */
    m = make_model(&mc, 57);
    check_speculative(m, 3, 4, 1);
    kv_model_destroy(m);
}
END_TEST

START_TEST(test_speculative_bad_args)
{
    const struct kv_model_config mc = small_cfg(2);
    struct kv_model *m = make_model(&mc, 1);
    int32_t prompt[P], tok[NEW];
    make_prompt(prompt, P, mc.vocab_size, 2);
    struct kv_cache *c = make_cache(kv_strategy_find("paged"), m, 1);
    const struct kv_gen_params gp = {.batch = 1, .prompt_len = P, .prompt = prompt,
                                     .new_tokens = NEW, .n_threads = 1};
    ck_assert_int_eq(kv_generate_speculative(m, c, &gp, 3, 4, tok, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_generate_speculative(m, c, &gp, 0, 4, tok, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_generate_speculative(m, c, &gp, 1, 0, tok, NULL), KV_ERR_INVALID);
    double sc[1];
    struct kv_gen_params bad = gp;
    bad.batch = 2; /* not the cache's */
    ck_assert_int_eq(kv_generate_beams(m, c, &bad, tok, sc, NULL, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_generate_samples(m, c, &gp, -1.0f, 1, tok, NULL, NULL), KV_ERR_INVALID);
    kv_cache_destroy(c);
    kv_model_destroy(m);
}
END_TEST

static Suite *gen_modes_suite(void)
{
    Suite *s = suite_create("gen_modes");
    TCase *tc = tcase_create("modes");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_shared_equals_unshared);
    tcase_add_test(tc, test_shared_paged_bytes);
    tcase_add_test(tc, test_shared_refused_without_reorder);
    tcase_add_test(tc, test_paged_beam_steps_allocate_nothing);
    tcase_add_test(tc, test_beams_equal_recompute);
    tcase_add_test(tc, test_samples_equal_independent);
    tcase_add_test(tc, test_speculative_equals_greedy);
    tcase_add_test(tc, test_speculative_exact_draft);
    tcase_add_test(tc, test_speculative_bad_args);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(gen_modes_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed < 125 ? failed : 125;
}
