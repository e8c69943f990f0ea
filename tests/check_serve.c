/*
 * check_serve.c - the serving scheduler (bench/serve/sched.h): every
 * request of a stream gets exactly the greedy tokens it gets generated
 * alone, for every strategy that keeps history, under each reservation
 * policy and both preemption modes, with a pool small enough that requests
 * are preempted; the pool's account never passes its size; the refusals.
 *
 * A lossy cache (or one that evicts by attention) holds what its append
 * schedule made: a prompt prefilled in chunks, or prefilled again with the
 * tokens so far after a preemption, attends to quantized (or evicted)
 * earlier rows where the whole prompt saw exact ones. Those strategies are
 * held to the alone tokens where the schedule is alone's (whole prompts, no
 * preemption: mode 4); the exact ones in every mode. Prefix sharing
 * (paged borrowing one prefilled prefix per group) is held to the same
 * tokens, and must hold fewer token bytes than the same run without it.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_params.h"
#include "../bench/serve/sched.h"
#include "../kernels/kv_ops.h"

#define SEED 11

static struct kv_model_config small_cfg(void)
{
    return (struct kv_model_config){.dim = 64, .hidden_dim = 96, .n_layers = 2, .n_heads = 4,
                                    .n_kv_heads = 2, .vocab_size = 256, .max_len = 128,
                                    .mlp = 1};
}

static const struct test_params tp = {.window = 24, .bits = 8, .group = 8, .residual = 8};

struct seen {
    const struct kv_model *m;
    const struct kv_request_set *rs;
    const struct kv_strategy_ops *ops;
    const void *params;
    int32_t finished, preempted;
    size_t pool;
    int over_pool;
    int same_path; /* the tokens must equal alone's */
    const char *what;
};

/* The request generated alone through its own cache: the same tokens. */
static void check_request(void *user, const struct kv_serve_request *r)
{
    struct seen *S = user;
    const int32_t V = S->m->cfg.vocab_size, n = r->prompt + r->output;
    int32_t *seq = malloc((size_t)n * sizeof *seq);
    float *logits = malloc((size_t)V * sizeof *logits);
    kv_serve_prompt(seq, S->rs, r->id, V, SEED);
    struct kv_cache_config cc = kv_cache_config_for_model(S->m, 1);
    struct kv_cache *c = NULL;
    struct kv_runner *run = NULL;
    ck_assert_int_eq(kv_cache_create(&c, S->ops, &cc, S->params), KV_OK);
    ck_assert_int_eq(kv_runner_create(&run, S->m, 1, r->prompt, 1), KV_OK);
    for (int32_t len = r->prompt; len < n; len++) {
        ck_assert_int_eq(kv_decode_step(run, S->m, c, seq, n, len, NULL, logits, NULL), KV_OK);
        seq[len] = kv_argmax(logits, V);
        ck_assert_msg(!S->same_path || r->tokens[len - r->prompt] == seq[len],
                      "%s: request %d token %d: %d served, %d alone", S->what, r->id,
                      len - r->prompt, r->tokens[len - r->prompt], seq[len]);
    }
    kv_runner_destroy(run);
    kv_cache_destroy(c);
    free(seq);
    free(logits);
    ck_assert(r->first_token_s >= r->arrival_s && r->finish_s >= r->first_token_s);
    S->finished++;
    S->preempted += r->preemptions;
}

static void check_iteration(void *user, const struct kv_serve_iteration *it)
{
    struct seen *S = user;
    const size_t used = it->token_bytes + it->reserved_bytes + it->internal_bytes + it->spare_bytes;
    if (used > S->pool || it->batch < 0)
        S->over_pool = 1;
}

static struct kv_request_set stream(int32_t n)
{
    struct kv_workload w = {.rate = 40.0, .n_requests = n,
                            .prompt = {KV_LEN_UNIFORM, 12.0, 8.0},
                            .output = {KV_LEN_UNIFORM, 24.0, 12.0}, .seed = 5};
    struct kv_request_set rs;
    ck_assert_int_eq(kv_requests_generate(&rs, &w, small_cfg().max_len, NULL, 0), KV_OK);
    return rs;
}

/* The pool that holds the stream's longest request alone, times k. */
static size_t pool_for(const struct kv_strategy_ops *ops, const void *params,
                       const struct kv_model *m, const struct kv_request_set *rs,
                       enum kv_reserve reserve, double k)
{
    size_t most = 0;
    for (int32_t i = 0; i < rs->n; i++) {
        struct kv_cache_config cc = kv_cache_config_for_model(m, 1);
        const int32_t len = rs->req[i].prompt + rs->req[i].output;
        if (reserve == KV_RESERVE_EXACT)
            cc.max_len = len;
        size_t b;
        ck_assert_int_eq(kv_cache_bytes_for(ops, &cc, params, len, &b), KV_OK);
        most = b > most ? b : most;
    }
    return (size_t)(most * k);
}

START_TEST(test_tokens_equal_alone)
{
    const struct kv_strategy_ops *ops = kv_strategy_at(_i);
    if (!(ops->caps & KV_CAP_KEEPS_HISTORY))
        return;
    struct kv_model_config mc = small_cfg();
    struct kv_model *m = NULL;
    ck_assert_int_eq(kv_model_create_synthetic(&m, &mc, 3), KV_OK);
    struct test_param_block blk;
    test_params_fill(ops, &blk, &tp);
    struct kv_request_set rs = stream(10);
    const int exact = !(ops->caps & (KV_CAP_LOSSY | KV_CAP_SCORE_EVICTS));
    for (int mode = 0; mode < 5; mode++) {
        const enum kv_reserve reserve = mode == 3 ? KV_RESERVE_EXACT : KV_RESERVE_CONTEXT;
        const enum kv_preempt preempt = mode == 1 ? KV_PREEMPT_SWAP : KV_PREEMPT_RECOMPUTE;
        /* mode 0-1: a pool for 2.5 of the longest request (preemptions);
         * mode 2: chunked prefill in a roomy pool; mode 3: exact
         * reservations; mode 4: a roomy pool, whole prompts */
        const double k = mode == 2 || mode == 4 ? 20.0 : 2.5;
        struct kv_serve_params p = {.ops = ops, .params = blk.b, .reserve = reserve,
                                    .preempt = preempt, .max_batch = 6,
                                    .chunk = mode == 2 ? 7 : 0, .n_threads = 1, .seed = SEED,
                                    .fixed_step_s = 0.01};
        p.pool_bytes = pool_for(ops, blk.b, m, &rs, reserve, k);
        char what[96];
        snprintf(what, sizeof what, "%s, mode %d", ops->name, mode);
        struct seen S = {.m = m, .rs = &rs, .ops = ops, .params = blk.b, .pool = p.pool_bytes,
                         .same_path = exact || mode == 4, .what = what};
        struct kv_serve_totals tot;
        char why[256] = "";
        const struct kv_cache_config c1 = kv_cache_config_for_model(m, 1);
        if (p.chunk > 0 && !(kv_strategy_caps(ops, &c1, blk.b) & KV_CAP_CHUNKED_APPEND)) {
            /* refused before any work, naming the operation it lacks */
            ck_assert_int_eq(kv_serve_run(m, &rs, &p, check_request, NULL, &S, NULL, why,
                                          sizeof why), KV_ERR_INVALID);
            ck_assert_msg(strstr(why, "KV_CAP_CHUNKED_APPEND") != NULL, "%s: %s", what, why);
            ck_assert_int_eq(S.finished, 0);
            continue;
        }
        ck_assert_msg(kv_serve_run(m, &rs, &p, check_request, check_iteration, &S, &tot, why,
                                   sizeof why) == KV_OK,
                      "%s: %s", what, why);
        ck_assert_int_eq(S.finished, rs.n);
        ck_assert_msg(!S.over_pool, "%s: an iteration's account passed the pool", what);
        ck_assert_int_eq(S.preempted, tot.preemptions);
        ck_assert_int_ge(tot.peak_batch, 1);
        if (mode == 4)
            ck_assert_int_eq(tot.preemptions, 0);
        if (mode < 2 && (ops->caps & KV_CAP_PREALLOCATES))
            ck_assert_msg(tot.preemptions > 0 || tot.peak_batch <= 2,
                          "%s: a pool of 2.5 requests ran %d at once", what, tot.peak_batch);
    }
    kv_request_set_free(&rs);
    kv_model_destroy(m);
}
END_TEST

/* A stream that makes the growing caches preempt: every request long, the
 * pool for a little more than one of them. */
START_TEST(test_preemptions_happen)
{
    struct kv_model_config mc = small_cfg();
    struct kv_model *m = NULL;
    ck_assert_int_eq(kv_model_create_synthetic(&m, &mc, 3), KV_OK);
    const struct kv_strategy_ops *ops = kv_strategy_find("paged");
    struct test_param_block blk;
    test_params_fill(ops, &blk, &tp);
    struct kv_workload w = {.rate = 1000.0, .n_requests = 6,
                            .prompt = {KV_LEN_FIXED, 8.0, 0.0},
                            .output = {KV_LEN_FIXED, 100.0, 0.0}, .seed = 9};
    struct kv_request_set rs;
    ck_assert_int_eq(kv_requests_generate(&rs, &w, mc.max_len, NULL, 0), KV_OK);
    for (int preempt = 0; preempt < KV_PREEMPT_COUNT; preempt++) {
        struct kv_serve_params p = {.ops = ops, .params = blk.b, .preempt = preempt,
                                    .max_batch = 6, .n_threads = 1, .seed = SEED,
                                    .fixed_step_s = 0.01};
        p.pool_bytes = pool_for(ops, blk.b, m, &rs, KV_RESERVE_CONTEXT, 2.2);
        struct seen S = {.m = m, .rs = &rs, .ops = ops, .params = blk.b, .pool = p.pool_bytes,
                         .same_path = 1, .what = preempt ? "paged, swap" : "paged, recompute"};
        struct kv_serve_totals tot;
        ck_assert_int_eq(kv_serve_run(m, &rs, &p, check_request, check_iteration, &S, &tot,
                                      NULL, 0), KV_OK);
        ck_assert_int_eq(S.finished, 6);
        ck_assert_msg(tot.preemptions > 0, "%s: no preemption", S.what);
        ck_assert(preempt ? tot.swapped_bytes > 0 : tot.recomputed_tokens > 0);
        ck_assert(!S.over_pool);
    }
    kv_request_set_free(&rs);
    kv_model_destroy(m);
}
END_TEST

/* The pool's split comes from each cache's stats: its parts add up to
 * the resident bytes, and a cache holding tokens counts them. */
START_TEST(test_stats_add_up)
{
    const struct kv_strategy_ops *ops = kv_strategy_at(_i);
    if (!(ops->caps & KV_CAP_KEEPS_HISTORY))
        return;
    struct kv_model_config mc = small_cfg();
    struct kv_cache_config cc = kv_cache_config_for(&mc, 1);
    struct test_param_block blk;
    test_params_fill(ops, &blk, &tp);
    struct kv_cache *c = NULL;
    ck_assert_int_eq(kv_cache_create(&c, ops, &cc, blk.b), KV_OK);
    const int32_t kvd = mc.n_kv_heads * (mc.dim / mc.n_heads);
    float *kv = calloc((size_t)40 * kvd, sizeof(float));
    for (int32_t l = 0; l < mc.n_layers; l++)
        ck_assert_int_eq(kv_cache_update(c, l, kv, kv, 40, 0), KV_OK);
    struct kv_cache_stats st;
    ck_assert_int_eq(kv_cache_stats(c, &st), KV_OK);
    ck_assert_uint_eq(st.tokens + st.slack + st.spare, st.resident);
    ck_assert_uint_eq(st.resident, kv_cache_resident_bytes(c));
    ck_assert_uint_gt(st.tokens, 0);
    if (!strcmp(ops->name, "static") || !strcmp(ops->name, "dynamic"))
        ck_assert_uint_eq(st.tokens, (size_t)mc.n_layers * 40 * 2 * kvd * sizeof(float));
    free(kv);
    kv_cache_destroy(c);
}
END_TEST

/* --grow-blocks 1: a paged cache holds only the blocks its tokens fill
 * (a request's own pool in serving), none ahead. */
START_TEST(test_paged_grow_exact)
{
    const struct kv_strategy_ops *ops = kv_strategy_find("paged");
    struct kv_model_config mc = small_cfg();
    struct kv_cache_config cc = kv_cache_config_for(&mc, 1);
    struct test_param_block blk;
    test_params_fill(ops, &blk, &tp);
    const int32_t one = 1, k = kv_param_find(ops, "grow");
    ck_assert_int_ge(k, 0);
    memcpy(blk.b + ops->params[k].offset, &one, sizeof one);
    struct kv_cache *c = NULL;
    ck_assert_int_eq(kv_cache_create(&c, ops, &cc, blk.b), KV_OK);
    const int32_t kvd = mc.n_kv_heads * (mc.dim / mc.n_heads);
    float *kv = calloc((size_t)40 * kvd, sizeof(float));
    for (int32_t l = 0; l < mc.n_layers; l++)
        ck_assert_int_eq(kv_cache_update(c, l, kv, kv, 40, 0), KV_OK);
    struct kv_cache_stats st;
    ck_assert_int_eq(kv_cache_stats(c, &st), KV_OK);
    ck_assert_uint_eq(st.spare, 0);
    /* 3 blocks of 16 per layer for 40 tokens */
    ck_assert_uint_eq(st.resident, (size_t)mc.n_layers * 3 * 16 * 2 * kvd * sizeof(float));
    size_t bound;
    ck_assert_int_eq(kv_cache_bytes_for(ops, &cc, blk.b, 40, &bound), KV_OK);
    ck_assert_uint_ge(bound, st.resident);
    free(kv);
    kv_cache_destroy(c);
}
END_TEST

/* Prefix sharing: requests in two groups with a shared prefix of 20 tokens
 * (a block of 16 borrowed, 4 rows copied), each mode as above; every
 * request's tokens equal alone's, and at every iteration of the same
 * schedule (a roomy pool, a fixed step) the pool holds no more token
 * states than without sharing, and less over the run. */
struct tally {
    struct seen s;
    double token_bytes;
    size_t most;
};

static void tally_iteration(void *user, const struct kv_serve_iteration *it)
{
    struct tally *T = user;
    check_iteration(&T->s, it);
    T->token_bytes += (double)it->token_bytes;
    T->most = it->token_bytes > T->most ? it->token_bytes : T->most;
}

static void tally_request(void *user, const struct kv_serve_request *r)
{
    check_request(&((struct tally *)user)->s, r);
}

START_TEST(test_shared_prefix)
{
    struct kv_model_config mc = small_cfg();
    struct kv_model *m = NULL;
    ck_assert_int_eq(kv_model_create_synthetic(&m, &mc, 3), KV_OK);
    const struct kv_strategy_ops *ops = kv_strategy_find("paged");
    struct test_param_block blk;
    test_params_fill(ops, &blk, &tp);
    struct kv_workload w = {.rate = 200.0, .n_requests = 10,
                            .prompt = {KV_LEN_UNIFORM, 30.0, 6.0},
                            .output = {KV_LEN_UNIFORM, 24.0, 12.0}, .n_groups = 2,
                            .prefix_len = 20, .seed = 5};
    struct kv_request_set rs;
    ck_assert_int_eq(kv_requests_generate(&rs, &w, mc.max_len, NULL, 0), KV_OK);
    for (int mode = 0; mode < 4; mode++) {
        /* 0: recompute, 1: swap, in a pool for 2.5 requests; 2: chunked
         * prefill; 3: a roomy pool, with and without sharing */
        double sum[2] = {0, 0};
        for (int share = mode == 3 ? 0 : 1; share < 2; share++) {
            struct kv_serve_params p = {.ops = ops, .params = blk.b,
                                        .preempt = mode == 1 ? KV_PREEMPT_SWAP
                                                             : KV_PREEMPT_RECOMPUTE,
                                        .max_batch = 6, .chunk = mode == 2 ? 7 : 0,
                                        .n_threads = 1, .seed = SEED, .fixed_step_s = 0.01,
                                        .share_prefixes = share};
            p.pool_bytes = pool_for(ops, blk.b, m, &rs, KV_RESERVE_CONTEXT,
                                    mode < 2 ? 2.5 : 20.0);
            char what[96];
            snprintf(what, sizeof what, "paged, shared prefixes %d, mode %d", share, mode);
            struct tally T = {.s = {.m = m, .rs = &rs, .ops = ops, .params = blk.b,
                                    .pool = p.pool_bytes, .same_path = 1, .what = what}};
            struct kv_serve_totals tot;
            char why[256] = "";
            const enum kv_status rc = kv_serve_run(m, &rs, &p, tally_request, tally_iteration,
                                                   &T, &tot, why, sizeof why);
            ck_assert_msg(rc == KV_OK, "%s: %s %s", what, kv_status_str(rc), why);
            ck_assert_int_eq(T.s.finished, rs.n);
            ck_assert_msg(!T.s.over_pool, "%s: an iteration's account passed the pool", what);
            if (mode < 2)
                ck_assert_msg(tot.preemptions > 0, "%s: no preemption", what);
            sum[share] = T.token_bytes;
        }
        if (mode == 3)
            ck_assert_msg(sum[1] < 0.95 * sum[0], "shared prefixes held %g token bytes over "
                          "the run, %g without", sum[1], sum[0]);
    }
    /* a strategy that cannot borrow is refused, naming what it lacks */
    const struct kv_strategy_ops *st = kv_strategy_find("static");
    test_params_fill(st, &blk, &tp);
    struct kv_serve_params p = {.ops = st, .params = blk.b, .max_batch = 2, .n_threads = 1,
                                .fixed_step_s = 0.01, .pool_bytes = 1u << 30,
                                .share_prefixes = 1};
    char why[256] = "";
    ck_assert_int_eq(kv_serve_run(m, &rs, &p, NULL, NULL, NULL, NULL, why, sizeof why),
                     KV_ERR_INVALID);
    ck_assert_msg(strstr(why, "KV_CAP_BORROW") != NULL, "%s", why);
    kv_request_set_free(&rs);
    kv_model_destroy(m);
}
END_TEST

START_TEST(test_refused)
{
    struct kv_model_config mc = small_cfg();
    struct kv_model *m = NULL;
    ck_assert_int_eq(kv_model_create_synthetic(&m, &mc, 3), KV_OK);
    struct kv_request_set rs = stream(3);
    const struct kv_strategy_ops *ops = kv_strategy_find("static");
    struct test_param_block blk;
    test_params_fill(ops, &blk, &tp);
    struct kv_serve_params p = {.ops = ops, .params = blk.b, .max_batch = 2, .n_threads = 1,
                                .fixed_step_s = 0.01, .pool_bytes = 1000};
    char why[256] = "";
    ck_assert_int_eq(kv_serve_run(m, &rs, &p, NULL, NULL, NULL, NULL, why, sizeof why),
                     KV_ERR_INVALID);
    ck_assert_msg(strstr(why, "cannot hold request 0 whole") != NULL, "%s", why);
    p.pool_bytes = 1u << 30;
    p.max_batch = 0;
    ck_assert_int_eq(kv_serve_run(m, &rs, &p, NULL, NULL, NULL, NULL, why, sizeof why),
                     KV_ERR_INVALID);
    p.max_batch = 2;
    p.chunk = -1;
    ck_assert_int_eq(kv_serve_run(m, &rs, &p, NULL, NULL, NULL, NULL, why, sizeof why),
                     KV_ERR_INVALID);
    p.chunk = 0;
    p.ops = kv_strategy_find("none");
    test_params_fill(p.ops, &blk, &tp);
    ck_assert_int_eq(kv_serve_run(m, &rs, &p, NULL, NULL, NULL, NULL, why, sizeof why),
                     KV_ERR_INVALID);
    ck_assert_msg(strstr(why, "none keeps no history") != NULL, "%s", why);
    kv_request_set_free(&rs);
    kv_model_destroy(m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("serve");
    TCase *tc = tcase_create("serve");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_tokens_equal_alone, 0, kv_strategy_count());
    tcase_add_test(tc, test_preemptions_happen);
    tcase_add_loop_test(tc, test_stats_add_up, 0, kv_strategy_count());
    tcase_add_test(tc, test_paged_grow_exact);
    tcase_add_test(tc, test_shared_prefix);
    tcase_add_test(tc, test_refused);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
