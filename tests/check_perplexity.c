/*
 * check_perplexity.c - kv_perplexity (bench/model/perplexity.c) against its
 * definition.
 *
 * The definition, computed here the slow and obvious way: the loss of token
 * t + 1 is -ln softmax(logits)[ids[t + 1]], where the logits come from one
 * fresh forward of exactly the tokens the mode lets the model see (all of
 * ids[0..t] for a stream; the tokens of t's chunk; the last W of them for
 * recompute), through `none` (nothing cached). kv_perplexity must give the
 * same numbers while streaming one token at a time through each exact
 * strategy, and `sliding` must give what `none` gives under the same
 * window mask (that of its views). Lossy strategies are skipped: their
 * loss is what the benchmark measures. Also: positions, the sums,
 * kv_ppl_nll, bad arguments, and
 * allocation failure at every k with nothing leaked.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../bench/model/kv_model.h"
#include "../bench/model/perplexity.h"
#include "test_params.h"

/* Streaming (decode kernel, one row) vs one fresh prefill (prefill kernel,
 * GEMMs of many rows): the same float32 math in another order, ~1e-5 of
 * logits of RMS ~1 over two layers (see check_model.c); the loss is a
 * difference of logits and a logsumexp, so the same bound holds. */
#define LOSS_TOL 1e-4
#define THREADS 1
#define N_IDS 40

static struct kv_model_config cfg(void)
{
    return (struct kv_model_config){
        .dim = 64, .hidden_dim = 96, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2,
        .vocab_size = 256, .max_len = 64, .mlp = 1, .shared_classifier = 0,
    };
}

static struct kv_cache_config cache_cfg(const struct kv_model_config *m)
{
    return (struct kv_cache_config){
        .n_layers = m->n_layers, .batch = 1, .n_kv_heads = m->n_kv_heads,
        .head_dim = m->dim / m->n_heads, .max_len = m->max_len,
    };
}

/* A cache of ops with these parameters (those its table has). */
static struct kv_cache *make_cache(const struct kv_strategy_ops *ops,
                                   const struct kv_model_config *m, int32_t window)
{
    struct kv_cache_config cc = cache_cfg(m);
    struct test_params tp = {.window = window, .bits = 8, .group = 8, .residual = 4};
    struct kv_cache *c = NULL;
    enum kv_status s = test_cache_create(&c, ops, &cc, &tp);
    ck_assert_msg(s == KV_OK, "%s: %s", ops->name, kv_status_str(s));
    return c;
}

static void make_ids(int32_t *ids, int32_t n)
{
    uint64_t s = 7;
    for (int32_t i = 0; i < n; i++)
        ids[i] = (int32_t)(kv_rng_next(&s) % 256);
}

/* The definition: loss of ids[t + 1] after a fresh forward of
 * ids[first..t] at positions 0.., optionally under a window mask (with
 * n_sink attention sinks: StreamingLLM's mask). */
static double reference_loss(const struct kv_model *m, const int32_t *ids, int32_t first,
                             int32_t t, int32_t window, int32_t n_sink)
{
    /* nothing cached: the strategy that keeps no history */
    struct kv_cache *c = make_cache(kv_strategy_with(0, KV_CAP_KEEPS_HISTORY), &m->cfg, 0);
    struct kv_runner *r = NULL;
    float logits[256];
    ck_assert_int_eq(kv_runner_create(&r, m, 1, t + 1 - first, THREADS), KV_OK);
    kv_runner_set_mask(r, window, n_sink);
    ck_assert_int_eq(kv_forward(r, m, c, ids + first, t + 1 - first, 0, NULL, logits, NULL),
                     KV_OK);
    kv_runner_destroy(r);
    kv_cache_destroy(c);
    return kv_ppl_nll(logits, 256, ids[t + 1]);
}

/* ------------------------------------------------------------------------ */

START_TEST(test_nll)
{
    float l[4] = {0, 0, 0, 0};
    ck_assert_double_eq_tol(kv_ppl_nll(l, 4, 2), log(4.0), 1e-12);
    float l2[3] = {1000.0f, 0.0f, -1000.0f}; /* no overflow: logsumexp is shifted */
    ck_assert_double_eq_tol(kv_ppl_nll(l2, 3, 0), 0.0, 1e-12);
    ck_assert_double_eq_tol(kv_ppl_nll(l2, 3, 1), 1000.0, 1e-9);
    float l3[2] = {0.0f, NAN};
    ck_assert(isnan(kv_ppl_nll(l3, 2, 0)));
    float l4[2] = {0.0f, INFINITY};
    ck_assert(isnan(kv_ppl_nll(l4, 2, 0)));
    ck_assert(isnan(kv_ppl_nll(l, 4, 4)));
    ck_assert(isnan(kv_ppl_nll(l, 4, -1)));
    float l5[3] = {2.0f, 2.0f, -1.0f}; /* a tied maximum counts twice */
    ck_assert_double_eq_tol(kv_ppl_nll(l5, 3, 2), 3.0 + log(2.0 + exp(-3.0)), 1e-12);
}
END_TEST

/* Every registered strategy with f32 spans, streamed (context 0), chunked
 * (context 16) and in recompute mode (W 8, within chunks of 24): the
 * definition at every t. `sliding` (window 12) against `none` under the
 * same window, when streamed. */
START_TEST(test_modes_match_definition)
{
    const struct kv_strategy_ops *ops = kv_strategy_at(_i);
    struct kv_model_config mc = cfg();
    struct kv_model *m = NULL;
    ck_assert_int_eq(kv_model_create_synthetic(&m, &mc, 3), KV_OK);
    if (ops->caps & KV_CAP_LOSSY) {
        kv_model_destroy(m);
        return; /* rounded storage: its loss is what the bits-per-byte table measures */
    }
    int32_t ids[N_IDS];
    make_ids(ids, N_IDS);
    const struct kv_ppl_params modes[] = {
        {.context = 0, .n_threads = THREADS},
        {.context = 16, .n_threads = THREADS},
        {.recompute = 8, .context = 24, .n_threads = THREADS},
    };
    for (size_t k = 0; k < sizeof modes / sizeof modes[0]; k++) {
        const struct kv_ppl_params *p = &modes[k];
        /* an evicting strategy is exact under the window its views carry */
        struct kv_cache *c = make_cache(ops, &mc, 12);
        struct kv_view v;
        ck_assert_int_eq(kv_cache_view(c, 0, &v), KV_OK);
        const int32_t mask = v.mask.window, n_sink = v.mask.n_sink;
        double loss[N_IDS];
        int32_t pos[N_IDS];
        struct kv_ppl_result res;
        ck_assert_int_eq(kv_perplexity(m, c, ids, N_IDS, p, loss, pos, &res), KV_OK);
        ck_assert_int_eq(res.tokens, N_IDS - 1);
        double sum = 0;
        for (int32_t t = 0; t + 1 < N_IDS; t++) {
            int32_t start = p->context > 0 ? t - t % p->context : 0;
            int32_t first = start;
            if (p->recompute > 0 && t + 1 - p->recompute > start)
                first = t + 1 - p->recompute;
            /* recompute prefills fresh windows: the strategy's own mask
             * applies inside each (none when the window covers it) */
            double want = reference_loss(m, ids, first, t, mask, n_sink);
            ck_assert_msg(fabs(loss[t] - want) <= LOSS_TOL,
                          "%s mode %zu t %d: loss %.7f, definition %.7f", ops->name, k, t,
                          loss[t], want);
            ck_assert_int_eq(pos[t], t - start);
            sum += loss[t];
        }
        ck_assert_double_eq_tol(res.nats, sum, 1e-9);
        ck_assert(res.peak_cache_bytes >= kv_cache_resident_bytes(c));
        kv_cache_destroy(c);
    }
    kv_model_destroy(m);
}
END_TEST

/* The window matters: streamed past its window, sliding differs from the
 * unmasked definition (so the test above cannot pass by ignoring masks). */
START_TEST(test_sliding_differs_unmasked)
{
    struct kv_model_config mc = cfg();
    struct kv_model *m = NULL;
    ck_assert_int_eq(kv_model_create_synthetic(&m, &mc, 3), KV_OK);
    /* an evicting strategy with a window of 4 */
    const struct kv_strategy_ops *ev = kv_strategy_with(KV_CAP_KEEPS_HISTORY | KV_CAP_EVICTS, 0);
    ck_assert_ptr_nonnull(ev);
    struct kv_cache *c = make_cache(ev, &mc, 4);
    ck_assert_int_eq(kv_cache_mask_window(c), 4);
    int32_t ids[N_IDS];
    make_ids(ids, N_IDS);
    double loss[N_IDS];
    struct kv_ppl_params p = {.n_threads = THREADS};
    ck_assert_int_eq(kv_perplexity(m, c, ids, N_IDS, &p, loss, NULL, NULL), KV_OK);
    double maxd = 0;
    for (int32_t t = 8; t + 1 < N_IDS; t++)
        maxd = fmax(maxd, fabs(loss[t] - reference_loss(m, ids, 0, t, 0, 0)));
    ck_assert_msg(maxd > 100 * LOSS_TOL, "sliding(4) equals dense: max diff %g", maxd);
    kv_cache_destroy(c);
    kv_model_destroy(m);
}
END_TEST

START_TEST(test_bad_arguments)
{
    struct kv_model_config mc = cfg();
    struct kv_model *m = NULL;
    ck_assert_int_eq(kv_model_create_synthetic(&m, &mc, 3), KV_OK);
    struct kv_cache *c = make_cache(&kv_strategy_dynamic, &mc, 12);
    int32_t ids[80];
    make_ids(ids, 80);
    double loss[80];
    struct kv_ppl_params p = {.n_threads = THREADS};
    ck_assert_int_eq(kv_perplexity(m, c, ids, 1, &p, loss, NULL, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_perplexity(NULL, c, ids, 4, &p, loss, NULL, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_perplexity(m, c, ids, 4, &p, NULL, NULL, NULL), KV_ERR_INVALID);
    /* a stream of 80 tokens feeds positions 0..78, beyond max_len 64 */
    ck_assert_int_eq(kv_perplexity(m, c, ids, 80, &p, loss, NULL, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_perplexity(m, c, ids, 65, &p, loss, NULL, NULL), KV_OK);
    p.context = 65;
    ck_assert_int_eq(kv_perplexity(m, c, ids, 80, &p, loss, NULL, NULL), KV_ERR_INVALID);
    p.context = 64;
    ck_assert_int_eq(kv_perplexity(m, c, ids, 80, &p, loss, NULL, NULL), KV_OK);
    p.context = -1;
    ck_assert_int_eq(kv_perplexity(m, c, ids, 8, &p, loss, NULL, NULL), KV_ERR_INVALID);
    p.context = 0;
    p.recompute = 65;
    ck_assert_int_eq(kv_perplexity(m, c, ids, 8, &p, loss, NULL, NULL), KV_ERR_INVALID);
    p.recompute = 0;
    ids[3] = 256;
    ck_assert_int_eq(kv_perplexity(m, c, ids, 8, &p, loss, NULL, NULL), KV_ERR_INVALID);
    ids[3] = -1;
    ck_assert_int_eq(kv_perplexity(m, c, ids, 8, &p, loss, NULL, NULL), KV_ERR_INVALID);
    kv_cache_destroy(c);
    kv_model_destroy(m);
}
END_TEST

/* Non-finite weights: KV_ERR_INVALID, not a NaN bits-per-byte. */
START_TEST(test_nonfinite_logits)
{
    struct kv_model_config mc = cfg();
    struct kv_model *m = NULL;
    ck_assert_int_eq(kv_model_create_synthetic(&m, &mc, 3), KV_OK);
    m->w.rms_final[5] = NAN;
    struct kv_cache *c = make_cache(&kv_strategy_dynamic, &mc, 12);
    int32_t ids[8];
    make_ids(ids, 8);
    double loss[8];
    struct kv_ppl_params p = {.n_threads = THREADS};
    ck_assert_int_eq(kv_perplexity(m, c, ids, 8, &p, loss, NULL, NULL), KV_ERR_INVALID);
    kv_cache_destroy(c);
    kv_model_destroy(m);
}
END_TEST

/* Allocation failure at every k: KV_ERR_NOMEM, nothing leaked. */
START_TEST(test_alloc_failure)
{
    struct kv_model_config mc = cfg();
    struct kv_model *m = NULL;
    ck_assert_int_eq(kv_model_create_synthetic(&m, &mc, 3), KV_OK);
    int32_t ids[20];
    make_ids(ids, 20);
    double loss[20];
    struct kv_ppl_params p = {.context = 8, .n_threads = THREADS};
    int failed_once = 0;
    for (int64_t k = 1; k < 200; k++) {
        struct kv_cache *c = make_cache(&kv_strategy_dynamic, &mc, 12);
        int64_t live = kv_alloc_live();
        kv_alloc_fail_at(k, 1);
        enum kv_status s = kv_perplexity(m, c, ids, 20, &p, loss, NULL, NULL);
        kv_alloc_fail_at(0, 0);
        ck_assert(s == KV_OK || s == KV_ERR_NOMEM);
        kv_cache_destroy(c);
        ck_assert_int_le(kv_alloc_live(), live);
        if (s == KV_OK)
            break;
        failed_once = 1;
    }
    ck_assert(failed_once);
    kv_model_destroy(m);
}
END_TEST

static Suite *perplexity_suite(void)
{
    Suite *s = suite_create("perplexity");
    TCase *tc = tcase_create("definition");
    tcase_add_test(tc, test_nll);
    tcase_add_loop_test(tc, test_modes_match_definition, 0, kv_strategy_count());
    tcase_add_test(tc, test_sliding_differs_unmasked);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_add_test(tc, test_bad_arguments);
    tcase_add_test(tc, test_nonfinite_logits);
    tcase_add_test(tc, test_alloc_failure);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(perplexity_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed;
}
