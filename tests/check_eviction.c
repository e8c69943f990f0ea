/*
 * check_eviction.c - what only the evicting strategies promise, beyond the
 * conformance suite of check_strategies.c (which already reads every view
 * of sinks and h2o back against the history and checks the keys their
 * queries need are there).
 *
 *   - sinks: exactly [0, S) and the last W positions, flat memory, copied
 *     bytes, the long-prompt pass-through; re-indexed mode: attention with
 *     the sinks re-rotated and the query at its true position equals
 *     StreamingLLM's attention with every position assigned within the
 *     cache (computed here from raw keys, independently);
 *   - h2o: the kept sets against an independent simulation of H2O's rule
 *     (scores summed from the masses handed to observe, the token leaving
 *     the window against the lowest heavy score, per (sequence, kv head)),
 *     with random masses; the long prompt's heavy set (its top scores);
 *     without observe, still exact for the keys it keeps; memory;
 *   - hybrid: each layer's view is its own strategy's, bytes per layer,
 *     masses only where a layer wants them, bad patterns refused.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/kv_attention.h"
#include "../kernels/kv_ops.h"
#include "../strategies/strategy.h"
#include "test_params.h"

#define REQUIRE(cond, ...)                                                                   \
    do {                                                                                     \
        if (!(cond))                                                                         \
            ck_abort_msg(__VA_ARGS__);                                                       \
    } while (0)

static uint64_t rng_state;
static float rnd(float lo, float hi)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    uint64_t z = rng_state;
    z = (z ^ (z >> 33)) * 0xff51afd7ed558ccdULL;
    z ^= z >> 33;
    return lo + (hi - lo) * (float)((double)(z >> 11) / 9007199254740992.0);
}

/* ------------------------------------------------------------------------ */
/* A history of random rows and a cache fed from it                         */

struct hist {
    struct kv_cache_config cc;
    int32_t t_max;
    float *k, *v;   /* (n_layers, batch, t_max, n_kv_heads, head_dim) */
    float *ck, *cv; /* (batch, n, n_kv_heads, head_dim) the chunk being fed */
};

static size_t hist_row(const struct hist *x, int32_t l, int32_t b, int32_t p, int32_t h)
{
    const struct kv_cache_config *c = &x->cc;
    return ((((size_t)l * c->batch + b) * x->t_max + p) * c->n_kv_heads + h) * c->head_dim;
}

static void hist_init(struct hist *x, struct kv_cache_config cc, int32_t t_max, uint64_t seed)
{
    x->cc = cc;
    x->t_max = t_max;
    const size_t n = (size_t)cc.n_layers * cc.batch * t_max * cc.n_kv_heads * cc.head_dim;
    x->k = malloc(n * sizeof(float));
    x->v = malloc(n * sizeof(float));
    x->ck = malloc(n * sizeof(float));
    x->cv = malloc(n * sizeof(float));
    ck_assert(x->k && x->v && x->ck && x->cv);
    rng_state = seed;
    for (size_t i = 0; i < n; i++) {
        x->k[i] = rnd(-1, 1);
        x->v[i] = rnd(-1, 1);
    }
}

static void hist_free(struct hist *x)
{
    free(x->k);
    free(x->v);
    free(x->ck);
    free(x->cv);
}

/* Updates layer l with positions [p0, p0 + n). */
static enum kv_status hist_feed(struct hist *x, struct kv_cache *c, int32_t l, int32_t p0,
                                int32_t n)
{
    const struct kv_cache_config *cc = &x->cc;
    const size_t tok = (size_t)cc->n_kv_heads * cc->head_dim;
    for (int32_t b = 0; b < cc->batch; b++) {
        memcpy(x->ck + (size_t)b * n * tok, x->k + hist_row(x, l, b, p0, 0), n * tok * 4);
        memcpy(x->cv + (size_t)b * n * tok, x->v + hist_row(x, l, b, p0, 0), n * tok * 4);
    }
    return kv_cache_update(c, l, x->ck, x->cv, n, p0);
}

/* Position of token t of span s for (b, h). */
static int64_t pos_of(const struct kv_span *s, int32_t b, int32_t h, int32_t t)
{
    if (s->pos == NULL)
        return (int64_t)s->pos0 + t;
    return s->pos[(size_t)b * s->pos_seq_stride + (size_t)h * s->pos_head_stride + t];
}

/* A row of an f32 span side. */
static const float *span_row(const struct kv_tensor *x, int32_t b, int32_t h, int32_t t)
{
    return (const float *)((const char *)x->data + (size_t)b * x->seq_stride +
                           (size_t)h * x->head_stride + (size_t)t * x->row_stride);
}

/*
 * held[p] <- 1 for every position layer l's view holds for (b, h), checking
 * each value against the history (keys exactly unless skip_k); returns the
 * count.
 */
static int32_t view_held(struct hist *x, const struct kv_cache *c, int32_t l, int32_t b,
                         int32_t h, char *held, int32_t n_pos, int skip_k)
{
    struct kv_view v;
    ck_assert_int_eq(kv_cache_view(c, l, &v), KV_OK);
    memset(held, 0, (size_t)n_pos);
    int32_t n = 0;
    const size_t row = (size_t)x->cc.head_dim * sizeof(float);
    for (int32_t s = 0; s < v.n_spans; s++)
        for (int32_t t = 0; t < v.spans[s].n_tokens; t++) {
            const int64_t p = pos_of(&v.spans[s], b, h, t);
            REQUIRE(p >= 0 && p < n_pos && !held[p], "layer %d (%d,%d): position %lld", l, b, h,
                    (long long)p);
            held[p] = 1;
            n++;
            REQUIRE(skip_k || memcmp(span_row(&v.spans[s].k, b, h, t),
                                     x->k + hist_row(x, l, b, (int32_t)p, h), row) == 0,
                    "layer %d (%d,%d) pos %lld: K differs", l, b, h, (long long)p);
            REQUIRE(memcmp(span_row(&v.spans[s].v, b, h, t),
                           x->v + hist_row(x, l, b, (int32_t)p, h), row) == 0,
                    "layer %d (%d,%d) pos %lld: V differs", l, b, h, (long long)p);
        }
    return n;
}

static struct kv_cache *make(const char *name, struct kv_cache_config cc, const char *params)
{
    const struct kv_strategy_ops *ops;
    struct test_param_block blk;
    ck_assert_int_eq(kv_strategy_lookup(name, &ops, blk.b, sizeof blk.b), KV_OK);
    ck_assert_int_eq(kv_params_parse(ops, blk.b, params), KV_OK);
    struct kv_cache *c = NULL;
    ck_assert_int_eq(kv_cache_create(&c, ops, &cc, blk.b), KV_OK);
    return c;
}

/* ------------------------------------------------------------------------ */
/* sinks                                                                    */

static const struct kv_cache_config small_cc = {
    .n_layers = 2, .batch = 2, .n_kv_heads = 3, .head_dim = 8, .max_len = 0};

/* One token at a time: exactly [0, S) U [max(S, t - W), t), flat bytes. */
START_TEST(test_sinks_contents)
{
    static const int32_t SW[][2] = {{0, 1}, {2, 4}, {5, 7}, {3, 3}, {1, 1}};
    const int32_t S = SW[_i][0], W = SW[_i][1];
    const struct kv_cache_config cc = small_cc;
    const int32_t t_max = 4 * (S + W) + 3;
    struct hist x;
    hist_init(&x, cc, t_max, 100 + (uint64_t)_i);
    char params[64];
    snprintf(params, sizeof params, "sinks=%d;window=%d", S, W);
    struct kv_cache *c = make("sinks", cc, params);
    const size_t tok = 2 * (size_t)cc.batch * cc.n_kv_heads * cc.head_dim * 4;
    const size_t flat = (size_t)cc.n_layers * (S + W) * tok;
    ck_assert_uint_eq(kv_cache_resident_bytes(c), flat);
    char *held = malloc((size_t)t_max);
    ck_assert_ptr_nonnull(held);
    for (int32_t t = 1; t <= t_max; t++) {
        for (int32_t l = 0; l < cc.n_layers; l++)
            ck_assert_int_eq(hist_feed(&x, c, l, t - 1, 1), KV_OK);
        ck_assert_uint_eq(kv_cache_resident_bytes(c), flat);
        ck_assert_uint_eq(kv_cache_copied_bytes(c), (size_t)cc.n_layers * t * tok);
        for (int32_t l = 0; l < cc.n_layers; l++) {
            struct kv_view v;
            ck_assert_int_eq(kv_cache_view(c, l, &v), KV_OK);
            ck_assert_int_eq(v.mask.window, W);
            ck_assert_int_eq(v.mask.n_sink, S);
            for (int32_t b = 0; b < cc.batch; b++)
                for (int32_t h = 0; h < cc.n_kv_heads; h++) {
                    const int32_t n = view_held(&x, c, l, b, h, held, t, 0);
                    int32_t want = 0;
                    for (int32_t p = 0; p < t; p++) {
                        const int keep = p < S || p >= t - W;
                        REQUIRE(held[p] == keep, "S %d W %d t %d: position %d %s", S, W, t, p,
                                keep ? "missing" : "kept");
                        want += keep;
                    }
                    ck_assert_int_eq(n, want);
                }
        }
    }
    free(held);
    kv_cache_destroy(c);
    hist_free(&x);
}
END_TEST

/* A prompt longer than S + W passes through (all of it, this step), then
 * the cache holds the sinks and the prompt's last W; an evicting chunk into
 * a non-empty cache is refused with nothing changed. */
START_TEST(test_sinks_prefill)
{
    const int32_t S = 3, W = 5, P = 20;
    const struct kv_cache_config cc = small_cc;
    struct hist x;
    hist_init(&x, cc, P + 4, 7);
    struct kv_cache *c = make("sinks", cc, "sinks=3;window=5");
    char held[32];
    for (int32_t l = 0; l < cc.n_layers; l++) {
        ck_assert_int_eq(hist_feed(&x, c, l, 0, P), KV_OK);
        struct kv_view v;
        ck_assert_int_eq(kv_cache_view(c, l, &v), KV_OK);
        ck_assert_int_eq(v.n_spans, 1);
        ck_assert_ptr_eq(v.spans[0].k.data, x.ck); /* the caller's rows */
        ck_assert_int_eq(v.spans[0].n_tokens, P);
    }
    for (int32_t l = 0; l < cc.n_layers; l++)
        ck_assert_int_eq(hist_feed(&x, c, l, P, 1), KV_OK);
    for (int32_t l = 0; l < cc.n_layers; l++) {
        ck_assert_int_eq(view_held(&x, c, l, 1, 2, held, P + 1, 0), S + W);
        for (int32_t p = 0; p <= P; p++)
            ck_assert_int_eq(held[p], p < S || p > P - W);
    }
    const size_t copied = kv_cache_copied_bytes(c);
    ck_assert_int_eq(hist_feed(&x, c, 0, P + 1, 2), KV_ERR_INVALID);
    ck_assert_uint_eq(kv_cache_copied_bytes(c), copied);
    ck_assert_int_eq(kv_cache_seq_len(c, 0), P + 1);
    kv_cache_destroy(c);
    /* chunks that evict nothing are taken */
    c = make("sinks", cc, "sinks=3;window=5");
    for (int32_t l = 0; l < cc.n_layers; l++) {
        ck_assert_int_eq(hist_feed(&x, c, l, 0, 4), KV_OK);
        ck_assert_int_eq(hist_feed(&x, c, l, 4, 4), KV_OK);
        ck_assert_int_eq(view_held(&x, c, l, 0, 0, held, 8, 0), 8);
    }
    kv_cache_destroy(c);
    hist_free(&x);
}
END_TEST

/* Bad parameters: sinks above the window or the maximum length. */
START_TEST(test_sinks_bad_params)
{
    const struct kv_strategy_ops *ops = kv_strategy_find("sinks");
    struct test_param_block blk;
    char why[160];
    struct kv_cache_config cc = small_cc;
    cc.max_len = 6;
    kv_params_defaults(ops, blk.b);
    ck_assert_int_eq(kv_params_parse(ops, blk.b, "sinks=5;window=4"), KV_OK);
    ck_assert_int_eq(kv_params_check(ops, &cc, blk.b, why, sizeof why), KV_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(why, "--sinks"));
    ck_assert_int_eq(kv_params_parse(ops, blk.b, "sinks=7;window=9"), KV_OK);
    ck_assert_int_eq(kv_params_check(ops, &cc, blk.b, why, sizeof why), KV_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(why, "maximum length"));
    ck_assert_int_eq(kv_params_parse(ops, blk.b, "sinks=6;window=9"), KV_OK);
    ck_assert_int_eq(kv_params_check(ops, &cc, blk.b, why, sizeof why), KV_OK);
    struct kv_cache *c = NULL;
    ck_assert_int_eq(kv_params_parse(ops, blk.b, "sinks=5;window=4"), KV_OK);
    ck_assert_int_eq(kv_cache_create(&c, ops, &cc, blk.b), KV_ERR_INVALID);
    ck_assert_ptr_null(c);
    ck_assert_int_eq(kv_params_parse(ops, blk.b, "sinks=-1"), KV_ERR_INVALID);
    ck_assert_int_eq(kv_params_parse(ops, blk.b, "reindex=2"), KV_ERR_INVALID);
}
END_TEST

/*
 * Re-indexed positions. Raw keys and queries are rotated here with the
 * double-precision RoPE reference: the cache is fed keys at their true
 * positions and the query at its true position p, as the model does; the
 * StreamingLLM answer rotates every held key at its index in the cache
 * (sinks 0..S-1, the window after them) and the query at the last index,
 * and attends over all of them (no mask). Both through kv_attn_ref (and the
 * fast kernel on the cache's view), at every step, for S + W well past the
 * window. Original mode must differ from it once something is evicted.
 */
#define REINDEX_TOL 2e-5f /* rotations of float keys at different angles: a few ulps of |k| <= 2 */
START_TEST(test_sinks_reindex_equivalence)
{
    const int32_t S = 3, W = 6, T = 40, H = 4, HKV = 2, D = 16;
    const struct kv_cache_config cc = {.n_layers = 1, .batch = 1, .n_kv_heads = HKV,
                                       .head_dim = D};
    struct hist x;
    hist_init(&x, cc, T, 11);
    /* x.k holds raw keys; the model's keys are rotated at their position */
    float *keys = malloc((size_t)T * HKV * D * sizeof(float));
    float *qraw = malloc((size_t)T * H * D * sizeof(float));
    float *q = malloc((size_t)H * D * sizeof(float));
    float *sk = malloc((size_t)(S + W) * HKV * D * sizeof(float)); /* (n, HKV, D) */
    float *out = malloc((size_t)H * D * sizeof(float)), *want = malloc((size_t)H * D * sizeof(float));
    float *fast = malloc((size_t)H * D * sizeof(float));
    ck_assert(keys && qraw && q && sk && out && want && fast);
    int32_t *pos = malloc((size_t)T * sizeof(int32_t));
    for (int32_t t = 0; t < T; t++)
        pos[t] = t;
    memcpy(keys, x.k, (size_t)T * HKV * D * sizeof(float));
    kv_rope_ref(keys, HKV, NULL, 0, T, D, pos);
    for (size_t i = 0; i < (size_t)T * H * D; i++)
        qraw[i] = rnd(-1, 1);
    struct kv_cache *c = make("sinks", cc, "sinks=3;window=6;reindex=1");
    struct kv_cache *orig = make("sinks", cc, "sinks=3;window=6;reindex=0");
    struct kv_attn_params p = {.batch = 1, .n_q = 1, .n_heads = H, .n_kv_heads = HKV,
                               .head_dim = D, .scale = 1.0f / sqrtf((float)D), .n_threads = 1};
    const size_t wsb = kv_attn_workspace_bytes(&p);
    void *ws = kv_alloc(wsb);
    ck_assert_ptr_nonnull(ws);
    int differed = 0;
    for (int32_t t = 0; t < T; t++) {
        ck_assert_int_eq(kv_cache_update(c, 0, keys + (size_t)t * HKV * D,
                                         x.v + (size_t)t * HKV * D, 1, t), KV_OK);
        ck_assert_int_eq(kv_cache_update(orig, 0, keys + (size_t)t * HKV * D,
                                         x.v + (size_t)t * HKV * D, 1, t), KV_OK);
        /* the query at its true position */
        memcpy(q, qraw + (size_t)t * H * D, (size_t)H * D * sizeof(float));
        kv_rope_ref(q, H, NULL, 0, 1, D, &pos[t]);
        struct kv_view v;
        ck_assert_int_eq(kv_cache_view(c, 0, &v), KV_OK);
        p.q_pos0 = t;
        ck_assert_int_eq(kv_attn_ref(out, q, &p, &v), KV_OK);
        ck_assert_int_eq(kv_attn(fast, q, &p, &v, ws, wsb), KV_OK);
        /* StreamingLLM: held positions get indices 0..n-1 */
        int32_t n = 0, held[64];
        for (int32_t s = 0; s <= t; s++)
            if (s < S || s > t - W)
                held[n++] = s;
        float *vv = malloc((size_t)n * HKV * D * sizeof(float));
        ck_assert_ptr_nonnull(vv);
        for (int32_t i = 0; i < n; i++) {
            memcpy(sk + (size_t)i * HKV * D, x.k + (size_t)held[i] * HKV * D,
                   (size_t)HKV * D * sizeof(float));
            memcpy(vv + (size_t)i * HKV * D, x.v + (size_t)held[i] * HKV * D,
                   (size_t)HKV * D * sizeof(float));
        }
        kv_rope_ref(sk, HKV, NULL, 0, n, D, pos); /* index i at position i */
        memcpy(q, qraw + (size_t)t * H * D, (size_t)H * D * sizeof(float));
        kv_rope_ref(q, H, NULL, 0, 1, D, &pos[n - 1]);
        const size_t row = (size_t)D * sizeof(float), tokrow = (size_t)HKV * row;
        struct kv_span sp = {
            .k = {.dtype = KV_DTYPE_F32, .data = sk, .row_stride = tokrow, .head_stride = row,
                  .seq_stride = (size_t)n * tokrow},
            .v = {.dtype = KV_DTYPE_F32, .data = vv, .row_stride = tokrow, .head_stride = row,
                  .seq_stride = (size_t)n * tokrow},
            .n_tokens = n, .pos0 = 0};
        struct kv_view sv = {.spans = &sp, .n_spans = 1};
        struct kv_attn_params sp_p = p;
        sp_p.q_pos0 = n - 1;
        ck_assert_int_eq(kv_attn_ref(want, q, &sp_p, &sv), KV_OK);
        for (int32_t i = 0; i < H * D; i++) {
            REQUIRE(fabsf(out[i] - want[i]) <= REINDEX_TOL, "t %d: re-indexed %g, StreamingLLM %g",
                    t, (double)out[i], (double)want[i]);
            REQUIRE(fabsf(fast[i] - want[i]) <= REINDEX_TOL, "t %d: kernel %g, StreamingLLM %g",
                    t, (double)fast[i], (double)want[i]);
        }
        /* original positions: the same keys, the sinks farther away */
        memcpy(q, qraw + (size_t)t * H * D, (size_t)H * D * sizeof(float));
        kv_rope_ref(q, H, NULL, 0, 1, D, &pos[t]);
        ck_assert_int_eq(kv_cache_view(orig, 0, &v), KV_OK);
        ck_assert_int_eq(kv_attn_ref(fast, q, &p, &v), KV_OK);
        float diff = 0.0f;
        for (int32_t i = 0; i < H * D; i++)
            diff = fmaxf(diff, fabsf(fast[i] - want[i]));
        if (t <= S + W - 1)
            ck_assert_float_le(diff, REINDEX_TOL); /* nothing evicted: the modes agree */
        else
            differed += diff > 100 * REINDEX_TOL;
        free(vv);
    }
    ck_assert_int_gt(differed, (T - S - W) / 2);
    kv_free(ws);
    kv_cache_destroy(c);
    kv_cache_destroy(orig);
    free(keys);
    free(qraw);
    free(q);
    free(sk);
    free(out);
    free(want);
    free(fast);
    free(pos);
    hist_free(&x);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* h2o against a simulation of its rule                                     */

/* The simulation's state for one (layer, b, h): every position's score and
 * whether it is heavy, in the ring or gone. */
enum { SIM_GONE = 0, SIM_RING, SIM_HEAVY };
struct sim {
    int32_t H, W, len, n_heavy;
    float *score; /* (t_max) */
    char *where;  /* (t_max) */
};

static void sim_leave(struct sim *m, int32_t p)
{
    if (m->n_heavy < m->H) {
        m->where[p] = SIM_HEAVY;
        m->n_heavy++;
        return;
    }
    int32_t lo = -1; /* the lowest heavy score */
    for (int32_t q = 0; q < p; q++)
        if (m->where[q] == SIM_HEAVY && (lo < 0 || m->score[q] < m->score[lo]))
            lo = q;
    if (m->score[p] > m->score[lo]) {
        m->where[lo] = SIM_GONE;
        m->where[p] = SIM_HEAVY;
    } else {
        m->where[p] = SIM_GONE;
    }
}

/* One token at position len. */
static void sim_push(struct sim *m)
{
    if (m->len >= m->W)
        sim_leave(m, m->len - m->W);
    m->where[m->len] = SIM_RING;
    m->score[m->len] = 0.0f;
    m->len++;
}

struct h2o_case {
    int32_t H, W, prompt, steps, n_heads;
};

/*
 * Feeds a prompt then single tokens; after each update the view of every
 * (layer, b, h) must hold exactly the simulation's kept positions (values
 * exact); then random masses (per query head and key, as the kernel lays
 * them out) go to observe and, summed over the heads of each kv head, to
 * the simulation's scores.
 */
START_TEST(test_h2o_simulation)
{
    static const struct h2o_case cases[] = {
        {3, 2, 1, 40, 6},  {3, 2, 4, 40, 3},   {1, 1, 1, 30, 3}, {4, 3, 30, 30, 6},
        {5, 4, 9, 50, 3},  {2, 6, 20, 25, 6},  {6, 1, 2, 40, 3},
    };
    const struct h2o_case *k = &cases[_i];
    const struct kv_cache_config cc = {.n_layers = 2, .batch = 2, .n_kv_heads = 3,
                                       .head_dim = 4};
    const int32_t T = k->prompt + k->steps, g = k->n_heads / cc.n_kv_heads;
    const int32_t nbh = cc.batch * cc.n_kv_heads;
    struct hist x;
    hist_init(&x, cc, T, 300 + (uint64_t)_i);
    char params[64];
    snprintf(params, sizeof params, "heavy=%d;window=%d", k->H, k->W);
    struct kv_cache *c = make("h2o", cc, params);
    ck_assert(kv_cache_has(c, KV_CAP_ATTN_MASS | KV_CAP_SCORE_EVICTS));
    struct sim *sims = calloc((size_t)cc.n_layers * nbh, sizeof *sims);
    ck_assert_ptr_nonnull(sims);
    for (int32_t i = 0; i < cc.n_layers * nbh; i++) {
        sims[i] = (struct sim){.H = k->H, .W = k->W};
        sims[i].score = calloc((size_t)T, sizeof(float));
        sims[i].where = calloc((size_t)T, 1);
        ck_assert(sims[i].score && sims[i].where);
    }
    char *held = malloc((size_t)T);
    ck_assert_ptr_nonnull(held);
    int32_t len = 0;
    while (len < T) {
        const int32_t n = len == 0 ? k->prompt : 1;
        for (int32_t l = 0; l < cc.n_layers; l++) {
            ck_assert_int_eq(hist_feed(&x, c, l, len, n), KV_OK);
            struct kv_view v;
            ck_assert_int_eq(kv_cache_view(c, l, &v), KV_OK);
            float *mass;
            size_t mlen;
            ck_assert_int_eq(kv_cache_mass_buffer(c, l, &v, k->n_heads, &mass, &mlen), KV_OK);
            const size_t nk = (size_t)kv_view_keys(&v);
            ck_assert_uint_eq(mlen, (size_t)cc.batch * k->n_heads * nk);
            for (int32_t bh = 0; bh < nbh; bh++) {
                struct sim *m = &sims[l * nbh + bh];
                const int32_t b = bh / cc.n_kv_heads, h = bh % cc.n_kv_heads;
                if (n > 1 && n > k->H + k->W) { /* the prompt passes through */
                    for (int32_t p = 0; p < n; p++)
                        m->where[p] = SIM_RING; /* chosen when its masses come */
                    m->len = n;
                } else {
                    for (int32_t j = 0; j < n; j++)
                        sim_push(m);
                }
                const int32_t cnt = view_held(&x, c, l, b, h, held, len + n, 0);
                int32_t want = 0;
                for (int32_t p = 0; p < len + n; p++) {
                    REQUIRE(held[p] == (m->where[p] != SIM_GONE), "case %d layer %d (%d,%d) at "
                            "%d: position %d %s", _i, l, b, h, len + n, p,
                            held[p] ? "kept, the simulation dropped it" : "missing");
                    want += m->where[p] != SIM_GONE;
                }
                ck_assert_int_eq(cnt, want);
                /* masses: random, as (batch, n_heads, n_keys) */
                for (int32_t i = 0; i < g; i++) {
                    float *row = mass + ((size_t)b * k->n_heads + (size_t)h * g + i) * nk;
                    size_t j = 0;
                    for (int32_t s = 0; s < v.n_spans; s++)
                        for (int32_t t = 0; t < v.spans[s].n_tokens; t++, j++) {
                            row[j] = rnd(0, 1);
                            m->score[pos_of(&v.spans[s], b, h, t)] += row[j];
                        }
                }
            }
            ck_assert_int_eq(kv_cache_observe(c, l, mass, k->n_heads), KV_OK);
            /* the prompt's heavy set: the top H scores of the older ones */
            if (n > 1 && n > k->H + k->W)
                for (int32_t bh = 0; bh < nbh; bh++) {
                    struct sim *m = &sims[l * nbh + bh];
                    for (int32_t r = 0; r < n - k->W; r++)
                        m->where[r] = SIM_GONE;
                    for (int32_t j = 0; j < k->H; j++) {
                        int32_t best = -1;
                        for (int32_t r = 0; r < n - k->W; r++)
                            if (m->where[r] == SIM_GONE && (best < 0 || m->score[r] > m->score[best]))
                                best = r;
                        m->where[best] = SIM_HEAVY;
                    }
                    m->n_heavy = k->H;
                }
        }
        len += n;
    }
    /* the last step's view, after its observe: the same sets */
    for (int32_t i = 0; i < cc.n_layers * nbh; i++) {
        free(sims[i].score);
        free(sims[i].where);
    }
    free(sims);
    free(held);
    kv_cache_destroy(c);
    hist_free(&x);
}
END_TEST

/* Without observe (no masses ever), h2o is still exact for what it keeps,
 * holds heavy + window tokens, the newest always, and never grows. */
START_TEST(test_h2o_without_masses)
{
    const struct kv_cache_config cc = small_cc;
    const int32_t H = 4, W = 3, T = 30;
    struct hist x;
    hist_init(&x, cc, T, 5);
    struct kv_cache *c = make("h2o", cc, "heavy=4;window=3");
    const size_t flat = kv_cache_resident_bytes(c);
    size_t want_flat;
    struct test_param_block blk;
    const struct kv_strategy_ops *ops = kv_strategy_find("h2o");
    kv_params_defaults(ops, blk.b);
    ck_assert_int_eq(kv_params_parse(ops, blk.b, "heavy=4;window=3"), KV_OK);
    ck_assert_int_eq(kv_cache_bytes_for(ops, &cc, blk.b, 1000, &want_flat), KV_OK);
    ck_assert_uint_eq(flat, want_flat);
    /* at least the rows: heavy + window tokens of K and V, every layer */
    ck_assert_uint_ge(flat, (size_t)cc.n_layers * (H + W) * 2 * cc.batch * cc.n_kv_heads *
                                cc.head_dim * 4);
    char held[32];
    for (int32_t t = 0; t < T; t++)
        for (int32_t l = 0; l < cc.n_layers; l++) {
            ck_assert_int_eq(hist_feed(&x, c, l, t, 1), KV_OK);
            const int32_t n = view_held(&x, c, l, 1, 1, held, t + 1, 0);
            ck_assert_int_eq(n, t + 1 < H + W ? t + 1 : H + W);
            for (int32_t p = t + 1 - W > 0 ? t + 1 - W : 0; p <= t; p++)
                ck_assert(held[p]); /* the window */
            ck_assert_uint_eq(kv_cache_resident_bytes(c), flat);
        }
    kv_cache_destroy(c);
    hist_free(&x);
}
END_TEST

START_TEST(test_h2o_bad_params)
{
    const struct kv_strategy_ops *ops = kv_strategy_find("h2o");
    struct test_param_block blk;
    kv_params_defaults(ops, blk.b);
    ck_assert_int_eq(kv_params_parse(ops, blk.b, "heavy=0"), KV_ERR_INVALID);
    ck_assert_int_eq(kv_params_parse(ops, blk.b, "window=0"), KV_ERR_INVALID);
    /* observe needs a positive multiple of the kv heads */
    struct kv_cache *c = make("h2o", small_cc, "heavy=2;window=2");
    float m[64] = {0};
    ck_assert_int_eq(kv_cache_observe(c, 0, m, 4), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_observe(c, 0, m, 0), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_observe(c, 2, m, 3), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_observe(c, 0, NULL, 3), KV_ERR_INVALID);
    kv_cache_destroy(c);
    /* a cache that wants no masses gets no buffer, and observe is a no-op */
    c = make("sliding", small_cc, "window=2");
    struct kv_view v = {0};
    float *mass = m;
    size_t len = 7;
    ck_assert_int_eq(kv_cache_mass_buffer(c, 0, &v, 3, &mass, &len), KV_OK);
    ck_assert_ptr_null(mass);
    ck_assert_uint_eq(len, 0);
    ck_assert_int_eq(kv_cache_observe(c, 0, m, 3), KV_OK);
    kv_cache_destroy(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* hybrid: one strategy per layer                                           */

/*
 * A pattern of four layers repeated twice over eight: every layer's view is
 * what a one-layer cache of its own strategy shows for the same tokens
 * (spans' positions and the mask), its share of the bytes is that cache's,
 * only its h2o layers ask for attention masses, and the kernel runs over
 * every layer's view (under ASan: nothing read out of bounds).
 */
START_TEST(test_hybrid_layers)
{
    const struct kv_cache_config cc = {.n_layers = 8, .batch = 2, .n_kv_heads = 2, .head_dim = 8};
    const char *pattern = "pattern=sinks:2:5+h2o:3:4*2,quantized:4:4:3";
    static const char *const per_layer[4][2] = {
        {"sinks", "sinks=2;window=5"}, {"h2o", "heavy=3;window=4"}, {"h2o", "heavy=3;window=4"},
        {"quantized", "bits=4;group=4;residual=3"}};
    const int32_t T = 30;
    struct hist x;
    hist_init(&x, cc, T, 77);
    struct kv_cache *c = make("hybrid", cc, pattern);
    ck_assert(kv_cache_has(c, KV_CAP_EVICTS | KV_CAP_SCORE_EVICTS | KV_CAP_LOSSY |
                                  KV_CAP_ATTN_MASS | KV_CAP_KEEPS_HISTORY));
    ck_assert(!kv_cache_has(c, KV_CAP_CHUNKED_APPEND)); /* not every layer takes chunks */
    struct kv_cache *one[4];
    struct kv_cache_config c1 = cc;
    c1.n_layers = 1;
    for (int i = 0; i < 4; i++)
        one[i] = make(per_layer[i][0], c1, per_layer[i][1]);
    struct kv_attn_params p = {.batch = cc.batch, .n_q = 1, .n_heads = 4, .n_kv_heads = 2,
                               .head_dim = 8, .scale = 0.35f, .n_threads = 2};
    const size_t wsb = kv_attn_workspace_bytes(&p);
    void *ws = kv_alloc(wsb);
    float q[2 * 4 * 8], out[2 * 4 * 8];
    for (int i = 0; i < 64; i++)
        q[i] = rnd(-1, 1);
    ck_assert_ptr_nonnull(ws);
    for (int32_t t = 0; t < T; t++) {
        size_t sum = 0;
        for (int32_t l = 0; l < cc.n_layers; l++) {
            ck_assert_int_eq(hist_feed(&x, c, l, t, 1), KV_OK);
            struct kv_cache *o = one[l % 4];
            if (l < 4) /* the one-layer twins take layer l's rows of the first repeat */
                ck_assert_int_eq(kv_cache_update(o, 0, x.ck, x.cv, 1, t), KV_OK);
            struct kv_view v, w;
            ck_assert_int_eq(kv_cache_view(c, l, &v), KV_OK);
            ck_assert_int_eq(kv_cache_view(o, 0, &w), KV_OK);
            ck_assert_int_eq(v.mask.window, w.mask.window);
            ck_assert_int_eq(v.mask.n_sink, w.mask.n_sink);
            ck_assert_int_eq(v.n_spans, w.n_spans);
            for (int32_t i = 0; i < v.n_spans; i++) {
                ck_assert_int_eq(v.spans[i].n_tokens, w.spans[i].n_tokens);
                ck_assert_int_eq(v.spans[i].k.dtype, w.spans[i].k.dtype);
                ck_assert_int_eq(v.spans[i].pos0, w.spans[i].pos0);
                ck_assert_int_eq(v.spans[i].pos != NULL, w.spans[i].pos != NULL);
            }
            ck_assert_uint_eq(kv_cache_layer_bytes(c, l), kv_cache_resident_bytes(o));
            sum += kv_cache_layer_bytes(c, l);
            float *mass;
            size_t len;
            ck_assert_int_eq(kv_cache_mass_buffer(c, l, &v, 4, &mass, &len), KV_OK);
            ck_assert_int_eq(mass != NULL, l % 4 == 1 || l % 4 == 2); /* the h2o layers */
            p.q_pos0 = t;
            p.mass = mass;
            p.mass_len = len;
            ck_assert_int_eq(kv_attn(out, q, &p, &v, ws, wsb), KV_OK);
            if (mass != NULL) {
                ck_assert_int_eq(kv_cache_observe(c, l, mass, 4), KV_OK);
                if (l < 4) { /* the twin gets the same masses (its view is the same) */
                    float *m2;
                    size_t len2;
                    ck_assert_int_eq(kv_cache_mass_buffer(o, 0, &w, 4, &m2, &len2), KV_OK);
                    ck_assert_uint_eq(len2, len);
                    memcpy(m2, mass, len * sizeof(float));
                    ck_assert_int_eq(kv_cache_observe(o, 0, m2, 4), KV_OK);
                }
            }
        }
        ck_assert_uint_eq(sum, kv_cache_resident_bytes(c));
    }
    kv_free(ws);
    for (int i = 0; i < 4; i++)
        kv_cache_destroy(one[i]);
    kv_cache_destroy(c);
    hist_free(&x);
}
END_TEST

/* Bad patterns: one sentence naming --layers-pattern, nothing created. */
START_TEST(test_hybrid_bad_patterns)
{
    static const struct {
        const char *pattern, *why;
    } cases[] = {
        {"sliding*3", "does not divide"},        {"dynamo", "unknown strategy 'dynamo'"},
        {"none+dynamic", "cannot be one layer"}, {"hybrid", "cannot be one layer"},
        {"sliding:4:5", "at most"},              {"sliding:0", "at most"},
        {"sliding:x", "at most"},                {"sliding*0", "layer count"},
        {"sliding*", "layer count"},             {"sliding++dynamic", "empty group"},
        {":4", "no strategy name"},              {"sinks:9:4+dynamic", "--sinks"},
        {"quantized:3", "at most"},
    };
    const struct kv_strategy_ops *ops = kv_strategy_find("hybrid");
    const struct kv_cache_config cc = {.n_layers = 4, .batch = 1, .n_kv_heads = 2, .head_dim = 8,
                                       .max_len = 64};
    const int64_t live0 = kv_alloc_live();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct test_param_block blk;
        char why[256];
        kv_params_defaults(ops, blk.b);
        ck_assert_int_eq(kv_params_set_text(ops, blk.b, "pattern", cases[i].pattern), KV_OK);
        ck_assert_msg(kv_params_check(ops, &cc, blk.b, why, sizeof why) == KV_ERR_INVALID,
                      "pattern '%s' accepted", cases[i].pattern);
        ck_assert_msg(strstr(why, cases[i].why) != NULL && strstr(why, "--") != NULL,
                      "pattern '%s': '%s' lacks '%s'", cases[i].pattern, why, cases[i].why);
        struct kv_cache *c = NULL;
        ck_assert_int_eq(kv_cache_create(&c, ops, &cc, blk.b), KV_ERR_INVALID);
        ck_assert_ptr_null(c);
    }
    /* text a parameter can never hold */
    struct test_param_block blk;
    kv_params_defaults(ops, blk.b);
    ck_assert_int_eq(kv_params_set_text(ops, blk.b, "pattern", "sliding dynamic"), KV_ERR_INVALID);
    ck_assert_int_eq(kv_params_set_text(ops, blk.b, "pattern", "a;b=c"), KV_ERR_INVALID);
    /* ',' is stored as '+' (the CSV's params cell never holds a comma) */
    ck_assert_int_eq(kv_params_set_text(ops, blk.b, "pattern", "sliding:8*3,dynamic"), KV_OK);
    char txt[256];
    kv_params_format(ops, blk.b, txt, sizeof txt);
    ck_assert_str_eq(txt, "pattern=sliding:8*3+dynamic");
    ck_assert_int_eq(kv_params_check(ops, &cc, blk.b, NULL, 0), KV_OK);
    ck_assert_int_eq(kv_alloc_live(), live0);
}
END_TEST

static Suite *eviction_suite(void)
{
    Suite *s = suite_create("eviction");
    TCase *tc = tcase_create("sinks");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_sinks_contents, 0, 5);
    tcase_add_test(tc, test_sinks_prefill);
    tcase_add_test(tc, test_sinks_bad_params);
    tcase_add_test(tc, test_sinks_reindex_equivalence);
    suite_add_tcase(s, tc);
    tc = tcase_create("h2o");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_h2o_simulation, 0, 7);
    tcase_add_test(tc, test_h2o_without_masses);
    tcase_add_test(tc, test_h2o_bad_params);
    suite_add_tcase(s, tc);
    tc = tcase_create("hybrid");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_hybrid_layers);
    tcase_add_test(tc, test_hybrid_bad_patterns);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(eviction_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
