/*
 * check_demo.c - the capture side of `kvlab demo` (bench/teach/demo.c): what the
 * probe records must be true of the cache and of attention, for every
 * registered strategy.
 *
 * Checked: the newest query's attention weights are a distribution over
 * exactly the visible held keys; exact strategies (none, dynamic,
 * dynamic-concat, static) record the same weights and choose the same
 * tokens even though their spans are laid out differently; dynamic holds
 * every position in one span; sliding holds exactly the last `window`
 * positions after a decode step; quantized holds every position once,
 * quantized or f32, and its recorded round-trip error is within half a
 * quantization step; a failed allocation leaks nothing.
 */
#include <check.h>
#include <math.h>
#include <string.h>

#include "test_params.h"
#include "../bench/teach/demo.h"

/* Weights are float32 softmax outputs (computed in double, stored as float,
 * averaged over 2 heads): their sum is 1 within a few float32 ulps. */
#define WEIGHT_SUM_TOL 1e-5f
/* Two exact strategies differ only by float32 summation order in the
 * kernel, which moves weights of O(0.1) by far less than 1e-4. */
#define WEIGHT_SAME_TOL 1e-4f
/* Round trip: |x - x'| <= scale/2 (kv_quant.h), plus float32 rounding of
 * min + scale*q for values of O(1). */
#define QUANT_SLACK 1e-5f

#define P 6
#define STEPS 8
#define MAXPOS (P + STEPS)
#define WINDOW 4

static struct kv_model *make_model(void)
{
    struct kv_model_config c = {.dim = 16, .hidden_dim = 24, .n_layers = 2, .n_heads = 2,
                                .n_kv_heads = 1, .vocab_size = 64, .max_len = 64, .mlp = 1,
                                .shared_classifier = 0};
    struct kv_model *m = NULL;
    ck_assert_int_eq(kv_model_create_synthetic(&m, &c, 99), KV_OK);
    return m;
}

static struct kv_cache_config cache_cfg(const struct kv_model *m, int32_t batch)
{
    return (struct kv_cache_config){
        .n_layers = m->cfg.n_layers, .batch = batch, .n_kv_heads = m->cfg.n_kv_heads,
        .head_dim = m->cfg.dim / m->cfg.n_heads, .max_len = m->cfg.max_len,
    };
}

/* kv_demo_run_create with the test's parameters (a window of `window`, 8
 * bits, group 4, residual 2: each strategy takes the ones it has). */
static enum kv_status run_create(struct kv_demo_run *R, const char *name, int32_t window,
                                 const struct kv_model *m, const struct kv_cache_config *cc,
                                 int32_t B, int32_t p, int32_t max_pos, int capture)
{
    const struct test_params tp = {.window = window, .bits = 8, .group = 4, .residual = 2,
                                   .sinks = window < 2 ? window : 2, .heavy = 3};
    const struct kv_strategy_ops *ops;
    struct test_param_block blk;
    if (kv_strategy_lookup(name, &ops, NULL, 0) != KV_OK)
        return kv_demo_run_create(R, name, NULL, m, cc, B, p, max_pos, capture);
    test_params_fill(ops, &blk, &tp);
    return kv_demo_run_create(R, name, blk.b, m, cc, B, p, max_pos, capture);
}

/* Runs strategy `name` for STEPS decode steps after a prompt of p <= P
 * tokens, with a sliding window of `window`; seq (MAXPOS+1) is filled with
 * the prompt and the greedy tokens; w_out (STEPS+1, n_layers, MAXPOS) gets the
 * recorded weights of sequence 0. Checks the per-step invariants. */
static void walk_p(const struct kv_model *m, const char *name, int32_t p, int32_t window,
                   int32_t *seq, float *w_out)
{
    struct kv_demo_run R;
    struct kv_cache_config cc = cache_cfg(m, 1);
    ck_assert_int_eq(run_create(&R, name, window, m, &cc, 1, p, MAXPOS, 1), KV_OK);
    for (int32_t t = 0; t < p; t++)
        seq[t] = (5 * t + 1) % m->cfg.vocab_size;
    const int32_t L = m->cfg.n_layers;
    for (int32_t step = 0; step <= STEPS; step++) {
        ck_assert_int_eq(kv_demo_run_step(&R, step, seq, MAXPOS + 1, NULL), KV_OK);
        const int32_t T = p + step;
        ck_assert_int_eq(R.n_fed, step == 0 || !R.keeps ? T : 1);
        ck_assert_int_eq(R.st.tokens_fed, R.n_fed);
        for (int32_t l = 0; l < L; l++) {
            const struct kv_demo_layer *lc = &R.lc[l];
            const int32_t q = T - 1;
            ck_assert_int_eq(lc->ap.q_pos0 + lc->ap.n_q - 1, q);
            double sum = 0.0;
            for (int32_t s = 0; s < MAXPOS; s++) {
                float w = lc->w[s];
                int vis = lc->held[s] && kv_attn_key_visible(&lc->mask, 0, q, s);
                if (vis) {
                    ck_assert_msg(w >= 0.0f && w <= 1.0f, "%s L%d pos %d weight %g", name, l,
                                  s, (double)w);
                    sum += w;
                } else {
                    ck_assert_float_eq(w, -1.0f);
                }
                ck_assert(!lc->held[s] || s < T); /* nothing from the future */
                w_out[((size_t)step * L + (size_t)l) * MAXPOS + (size_t)s] = w;
            }
            ck_assert_msg(fabs(sum - 1.0) < WEIGHT_SUM_TOL, "%s step %d L%d sum %g", name,
                          step, l, sum);

            int32_t held = 0, held_q = 0;
            for (int32_t s = 0; s < MAXPOS; s++) {
                held += lc->held[s];
                held_q += lc->held_q[s];
            }
            if (strcmp(name, "sliding") == 0 && step > 0) {
                ck_assert_int_eq(held, window < T ? window : T);
                for (int32_t s = T - window; s < T; s++)
                    ck_assert(lc->held[s]);
            } else if (strcmp(name, "quantized") == 0) {
                ck_assert_int_eq(held, T);
                if (lc->q_pos >= 0)
                    ck_assert_msg(lc->q_err <= lc->q_half_step * (1.0f + QUANT_SLACK) +
                                                   QUANT_SLACK,
                                  "round trip %g > half step %g", (double)lc->q_err,
                                  (double)lc->q_half_step);
                ck_assert_int_eq(held_q > 0, lc->q_newest >= 0);
            } else if (strcmp(name, "none") == 0 || strcmp(name, "dynamic") == 0 ||
                       strcmp(name, "dynamic-concat") == 0 || strcmp(name, "static") == 0) {
                ck_assert_int_eq(held, T);
                ck_assert_int_eq(held_q, 0);
            }
            if (strcmp(name, "dynamic") == 0)
                ck_assert_int_eq(lc->n_spans, 1);
            if (kv_cache_has(R.cache, KV_CAP_EVICTS) && step > 0) {
                /* an evicting cache holds the query's own key */
                ck_assert(lc->held[T - 1]);
                if (lc->mask.n_sink > 0) /* sinks: [0, S) and the window */
                    for (int32_t s = 0; s < T; s++)
                        ck_assert_int_eq(lc->held[s], s < lc->mask.n_sink ||
                                                          s >= T - lc->mask.window);
            }
        }
        seq[T] = R.next[0];
    }
    kv_demo_run_destroy(&R);
}

static void walk(const struct kv_model *m, const char *name, int32_t *seq, float *w_out)
{
    walk_p(m, name, P, WINDOW, seq, w_out);
}

START_TEST(test_every_strategy)
{
    int64_t live0 = kv_alloc_live();
    struct kv_model *m = make_model();
    const struct kv_strategy_ops *ops = kv_strategy_at(_i);
    int32_t seq[MAXPOS + 1];
    size_t nw = (size_t)(STEPS + 1) * (size_t)m->cfg.n_layers * MAXPOS;
    float w[(STEPS + 1) * 2 * MAXPOS];
    ck_assert_uint_eq(nw, sizeof w / sizeof w[0]);
    walk(m, ops->name, seq, w);
    kv_model_destroy(m);
    ck_assert_int_eq(kv_alloc_live(), live0);
}
END_TEST

/* The smallest inputs every display path must handle: a one-token prompt
 * (T = 1 at the prefill, every later step has one past key), a batch of 1,
 * a window of 1; then the same prompt in a batch of 2 with padding. The
 * per-step invariants of walk_p hold for every strategy. */
START_TEST(test_one_token_window_one)
{
    int64_t live0 = kv_alloc_live();
    struct kv_model *m = make_model();
    const struct kv_strategy_ops *ops = kv_strategy_at(_i);
    int32_t seq[MAXPOS + 1];
    static float w[(STEPS + 1) * 2 * MAXPOS];
    walk_p(m, ops->name, 1, 1, seq, w);
    /* step 0 attended over exactly the one position, with all the weight */
    for (int32_t l = 0; l < m->cfg.n_layers; l++)
        ck_assert_float_eq_tol(w[(size_t)l * MAXPOS], 1.0f, WEIGHT_SUM_TOL);

    struct kv_demo_run R;
    struct kv_cache_config cc = cache_cfg(m, 2);
    ck_assert_int_eq(run_create(&R, ops->name, 1, m, &cc, 2, 1, MAXPOS, 1), KV_OK);
    int32_t seq2[2 * (MAXPOS + 1)] = {0};
    seq2[0] = seq2[MAXPOS + 1] = 7;
    const int32_t pad[2] = {0, 0};
    for (int32_t step = 0; step <= 2; step++) {
        ck_assert_int_eq(kv_demo_run_step(&R, step, seq2, MAXPOS + 1, pad), KV_OK);
        /* both sequences hold the same tokens: the same greedy choice */
        ck_assert_int_eq(R.next[0], R.next[1]);
        for (int32_t b = 0; b < 2; b++)
            seq2[b * (MAXPOS + 1) + 1 + step] = R.next[b];
    }
    kv_demo_run_destroy(&R);
    kv_model_destroy(m);
    ck_assert_int_eq(kv_alloc_live(), live0);
}
END_TEST

/* Exact strategies: same tokens and same recorded weights as no cache. */
START_TEST(test_exact_strategies_agree)
{
    static const char *const exact[] = {"dynamic", "dynamic-concat", "static"};
    struct kv_model *m = make_model();
    enum { NW = (STEPS + 1) * 2 * MAXPOS };
    static float w_ref[NW], w[NW];
    int32_t seq_ref[MAXPOS + 1], seq[MAXPOS + 1];
    walk(m, "none", seq_ref, w_ref);
    for (int k = 0; k < 3; k++) {
        if (kv_strategy_find(exact[k]) == NULL)
            continue;
        walk(m, exact[k], seq, w);
        for (int32_t t = 0; t <= MAXPOS; t++)
            ck_assert_int_eq(seq[t], seq_ref[t]);
        for (int i = 0; i < NW; i++)
            ck_assert_msg(fabsf(w[i] - w_ref[i]) <= WEIGHT_SAME_TOL, "%s weight %d: %g vs %g",
                          exact[k], i, (double)w[i], (double)w_ref[i]);
    }
    kv_model_destroy(m);
}
END_TEST

/* Left padding: the padded positions of sequence 1 get no weight. */
START_TEST(test_padding_masked)
{
    struct kv_model *m = make_model();
    struct kv_demo_run R;
    struct kv_cache_config cc = cache_cfg(m, 2);
    ck_assert_int_eq(run_create(&R, "dynamic", WINDOW, m, &cc, 2, P, MAXPOS, 1), KV_OK);
    int32_t seq[2 * (MAXPOS + 1)], pad[2] = {0, 3};
    for (int32_t b = 0; b < 2; b++)
        for (int32_t t = 0; t < P; t++)
            seq[b * (MAXPOS + 1) + t] = t < pad[b] ? 0 : (3 * t + 2 * b + 1) % 64;
    for (int32_t step = 0; step <= 2; step++) {
        ck_assert_int_eq(kv_demo_run_step(&R, step, seq, MAXPOS + 1, pad), KV_OK);
        for (int32_t l = 0; l < m->cfg.n_layers; l++) {
            const float *w1 = R.lc[l].w + MAXPOS;
            double sum = 0.0;
            for (int32_t s = 0; s < P + step; s++) {
                if (s < pad[1])
                    ck_assert_float_eq(w1[s], -1.0f);
                else
                    sum += w1[s];
            }
            ck_assert(fabs(sum - 1.0) < WEIGHT_SUM_TOL);
        }
        for (int32_t b = 0; b < 2; b++)
            seq[b * (MAXPOS + 1) + P + step] = R.next[b];
    }
    kv_demo_run_destroy(&R);
    kv_model_destroy(m);
}
END_TEST

START_TEST(test_alloc_failure_cleans_up)
{
    struct kv_model *m = make_model();
    int64_t live0 = kv_alloc_live();
    struct kv_cache_config cc = cache_cfg(m, 1);
    int failed = 0;
    for (int64_t k = 1; k < 200; k++) {
        struct kv_demo_run R;
        kv_alloc_fail_at(k, 0);
        enum kv_status s = run_create(&R, "quantized", WINDOW, m, &cc, 1, P, MAXPOS, 1);
        kv_alloc_fail_at(0, 0);
        kv_demo_run_destroy(&R);
        ck_assert_int_eq(kv_alloc_live(), live0);
        if (s == KV_OK)
            break;
        ck_assert_int_eq(s, KV_ERR_NOMEM);
        failed++;
    }
    ck_assert_int_gt(failed, 10);
    struct kv_demo_run R;
    ck_assert_int_eq(run_create(&R, "nosuch", WINDOW, m, &cc, 1, P, MAXPOS, 1),
                     KV_ERR_INVALID);
    kv_demo_run_destroy(&R);
    kv_model_destroy(m);
}
END_TEST

static Suite *demo_suite(void)
{
    Suite *s = suite_create("demo");
    TCase *tc = tcase_create("capture");
    tcase_add_loop_test(tc, test_every_strategy, 0, kv_strategy_count());
    tcase_add_loop_test(tc, test_one_token_window_one, 0, kv_strategy_count());
    tcase_add_test(tc, test_exact_strategies_agree);
    tcase_add_test(tc, test_padding_masked);
    tcase_add_test(tc, test_alloc_failure_cleans_up);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(demo_suite());
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed;
}
