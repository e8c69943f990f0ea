/*
 * check_model.c - the decoder, the generation loop and every registered
 * cache strategy, end to end.
 *
 * - decoder: kv_forward against a naive double-precision forward written
 *   here from the weights (embedding, RMSNorm, RoPE, causal GQA attention,
 *   SwiGLU, classifier), for a prefill and for decode steps;
 * - conformance, looped over kv_strategy_count()/kv_strategy_at() so a new
 *   strategy is tested by registering it (two test-only paged strategies,
 *   tests/test_paged.h, are registered in main()), driven by capabilities:
 *   a strategy without KV_CAP_LOSSY must give the greedy tokens of the
 *   no-history strategy (run with the strategy's mask window) over 64
 *   generated tokens, and logits within float tolerance at every step; a
 *   KV_CAP_LOSSY one is run with its default parameters and each of its
 *   presets, teacher-forced in lockstep with the exact reference (keeps
 *   history, lossless, no eviction), and its logit error at every step must
 *   stay under a bound derived from its dtype's quantization step (printed);
 * - left padding: each sequence of a padded batch of 3 gives the tokens it
 *   gives alone, for every strategy;
 * - FLOP and byte counters against closed forms, for `none` and `dynamic`;
 * - synthetic weights (determinism, scale), config checks, error paths,
 *   and allocation failure at every k with nothing leaked.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_params.h"
#include "test_paged.h"
#include "../bench/model/kv_model.h"
#include "../kernels/kv_ops.h"

/* ------------------------------------------------------------------------ */
/* Configuration and tolerances                                             */

#define PROMPT 16   /* prompt tokens */
#define NEW 64      /* generated tokens */
#define WINDOW 24   /* sliding window, smaller than PROMPT + NEW */
#define GROUP 8     /* quantization group (head_dim is 16) */
#define RESIDUAL 8  /* quantized: recent tokens kept in f32 */
/* One thread keeps the suite fast on a loaded 2-core machine (OpenMP
 * workers spin); the threaded paths are covered by check_ops and by the
 * two-thread case of test_forward_vs_naive. */
#define THREADS 1

/*
 * Exact strategies vs `none`: the same float32 math in a different order
 * (prefill vs decode kernel paths, split-K, different GEMM shapes). Each
 * sum of K <= 96 terms differs by at most ~K*eps relative; about ten such
 * sums in sequence through 2 layers give ~1e-5 of the logits' O(1) scale.
 * We allow 1e-4 (absolute, on logits of RMS ~1) - still far below the
 * changes a wrong position or a dropped key causes (>= 1e-2).
 */
#define EXACT_LOGIT_TOL 1e-4
/* Naive double forward vs kv_forward: float32 end to end, same reasoning. */
#define NAIVE_LOGIT_TOL 1e-4

/*
 * Quantized strategies: a cached value is rounded to the nearest of
 * 2^bits levels spanning its group's range, so its error is at most half a
 * step, delta/2 of the group's range with delta = 1/(2^bits - 1). For
 * unit-variance activations a group of 8 spans about 3 standard deviations,
 * so K and V carry a relative RMS error of about delta (uniform rounding:
 * step/sqrt(12) of a ~3 sigma step). Attention passes it on linearly: through
 * V directly and through K via the scores (scale/sqrt(head_dim) * q.dk, of
 * the same relative size since scores are O(1)); that is at most ~2 delta
 * relative per layer, and each of the L layers adds its share to the
 * residual stream, so the relative L2 error of the logits is bounded by
 * QUANT_GAIN * L * delta with QUANT_GAIN = 2.
 */
#define QUANT_GAIN 2.0

static struct kv_model_config small_cfg(void)
{
    return (struct kv_model_config){
        .dim = 64,
        .hidden_dim = 96,
        .n_layers = 2,
        .n_heads = 4,
        .n_kv_heads = 2,
        .vocab_size = 256,
        .max_len = 256,
        .mlp = 1,
        .shared_classifier = 0,
    };
}

/* The strategy parameters every cache of a test gets (window, group,
 * residual fixed; cache_cfg sets the bits of the test's quantized caches;
 * each strategy takes the ones it has). */
static struct test_params cur_tp = {.window = WINDOW, .bits = 8, .group = GROUP,
                                    .residual = RESIDUAL};

static struct kv_cache_config cache_cfg(const struct kv_model_config *m, int32_t batch,
                                        int32_t bits)
{
    cur_tp.bits = bits;
    return (struct kv_cache_config){
        .n_layers = m->n_layers,
        .batch = batch,
        .n_kv_heads = m->n_kv_heads,
        .head_dim = m->dim / m->n_heads,
        .max_len = m->max_len,
    };
}

static void make_prompt(int32_t *p, int32_t n, int32_t vocab, uint64_t seed)
{
    uint64_t s = seed * 2862933555777941757ull + 3037000493ull;
    for (int32_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (int32_t)((s >> 33) % (uint64_t)vocab);
    }
}

static struct kv_model *make_model(const struct kv_model_config *c, uint64_t seed)
{
    struct kv_model *m = NULL;
    ck_assert_int_eq(kv_model_create_synthetic(&m, c, seed), KV_OK);
    return m;
}

static struct kv_cache *make_cache(const struct kv_strategy_ops *ops,
                                   const struct kv_cache_config *cc)
{
    struct kv_cache *c = NULL;
    enum kv_status s = test_cache_create(&c, ops, cc, &cur_tp);
    ck_assert_msg(s == KV_OK, "%s: kv_cache_create: %s", ops->name, kv_status_str(s));
    return c;
}

/* ------------------------------------------------------------------------ */
/* Collecting a generation                                                  */

struct run_log {
    int32_t batch, vocab;
    float *logits; /* (NEW, batch, vocab) */
    int32_t steps;
};

static void collect(void *user, int32_t step, const float *logits, const int32_t *next,
                    const struct kv_step_stats *st, int64_t step_ns)
{
    (void)next;
    (void)st;
    (void)step_ns;
    struct run_log *g = user;
    ck_assert_int_eq(step, g->steps); /* called once per step, in order */
    size_t n = (size_t)g->batch * (size_t)g->vocab;
    memcpy(g->logits + (size_t)step * n, logits, n * sizeof(float));
    g->steps++;
}

/* Generates NEW tokens; tokens (batch, n_new), log->logits filled. */
static void run_gen(const struct kv_model *m, const struct kv_strategy_ops *ops,
                    const struct kv_cache_config *cc, const struct kv_gen_params *gp,
                    int32_t *tokens, struct run_log *log)
{
    struct kv_cache *c = make_cache(ops, cc);
    log->batch = gp->batch;
    log->vocab = m->cfg.vocab_size;
    log->steps = 0;
    enum kv_status s = kv_generate(m, c, gp, tokens, collect, log);
    ck_assert_msg(s == KV_OK, "%s: kv_generate: %s", ops->name, kv_status_str(s));
    ck_assert_int_eq(log->steps, gp->new_tokens);
    kv_cache_destroy(c);
}

/* Max |a - b| over n floats. */
static double max_abs_diff(const float *a, const float *b, size_t n)
{
    double d = 0;
    for (size_t i = 0; i < n; i++)
        d = fmax(d, fabs((double)a[i] - (double)b[i]));
    return d;
}

/* The no-history strategy (the `none` semantics) and the exact reference. */
static const struct kv_strategy_ops *no_cache_ops(void)
{
    const struct kv_strategy_ops *o = kv_strategy_with(0, KV_CAP_KEEPS_HISTORY);
    ck_assert_ptr_nonnull(o);
    return o;
}

static const struct kv_strategy_ops *exact_ops(void)
{
    const struct kv_strategy_ops *o =
        kv_strategy_with(KV_CAP_KEEPS_HISTORY, KV_CAP_LOSSY | KV_CAP_EVICTS | KV_CAP_PREALLOCATES);
    ck_assert_ptr_nonnull(o);
    return o;
}

/* Whether the strategy exposes quantized spans once it holds n tokens; it
 * must say so by KV_CAP_LOSSY. */
static int strategy_is_lossy(const struct kv_model *m, const struct kv_strategy_ops *ops,
                             int32_t bits)
{
    struct kv_cache_config cc = cache_cfg(&m->cfg, 1, bits);
    struct kv_cache *c = make_cache(ops, &cc);
    int32_t n = PROMPT + NEW, hs = cc.head_dim;
    size_t row = (size_t)n * (size_t)cc.n_kv_heads * (size_t)hs;
    float *k = malloc(row * sizeof *k), *v = malloc(row * sizeof *v);
    for (size_t i = 0; i < row; i++) {
        k[i] = (float)sin(0.1 * (double)i);
        v[i] = (float)cos(0.1 * (double)i);
    }
    int lossy = 0;
    for (int32_t l = 0; l < cc.n_layers; l++) {
        ck_assert_int_eq(kv_cache_update(c, l, k, v, n, 0), KV_OK);
        struct kv_view view;
        ck_assert_int_eq(kv_cache_view(c, l, &view), KV_OK);
        for (int32_t i = 0; i < view.n_spans; i++)
            lossy |= kv_type_traits[view.spans[i].k.dtype].has_qparams ||
                     kv_type_traits[view.spans[i].v.dtype].has_qparams;
    }
    const int flagged = kv_cache_has(c, KV_CAP_LOSSY); /* for its parameters */
    kv_cache_destroy(c);
    free(k);
    free(v);
    ck_assert_int_eq(lossy, flagged);
    return lossy;
}

/* ------------------------------------------------------------------------ */
/* Naive reference forward (double, from the weights, no cache)             */

/*
 * logits (vocab) of the last of tokens[0..n), positions 0..n-1, causal
 * attention over all of them (window 0 = none), written as directly as the
 * math of docs/design.md reads.
 */
static void naive_forward(double *logits, const struct kv_model *m, const int32_t *tokens,
                          int32_t n, int32_t window)
{
    const struct kv_model_config *c = &m->cfg;
    const struct kv_weights *w = &m->w;
    const int32_t D = c->dim, HS = D / c->n_heads, KVD = c->n_kv_heads * HS;
    const int32_t H = c->hidden_dim, G = c->n_heads / c->n_kv_heads;
    double *x = calloc((size_t)n * D, sizeof *x), *xb = calloc((size_t)n * D, sizeof *xb);
    double *q = calloc((size_t)n * D, sizeof *q), *k = calloc((size_t)n * KVD, sizeof *k);
    double *v = calloc((size_t)n * KVD, sizeof *v), *att = calloc((size_t)n * D, sizeof *att);
    double *h1 = calloc(H, sizeof *h1), *h3 = calloc(H, sizeof *h3);
    double *sc = calloc((size_t)n, sizeof *sc);

    for (int32_t t = 0; t < n; t++)
        for (int32_t i = 0; i < D; i++)
            x[t * D + i] = w->token_embedding[(size_t)tokens[t] * D + i];
    for (int32_t l = 0; l < c->n_layers; l++) {
        const float *rms = w->rms_att + (size_t)l * D;
        for (int32_t t = 0; t < n; t++) {
            double ss = 0;
            for (int32_t i = 0; i < D; i++)
                ss += x[t * D + i] * x[t * D + i];
            double inv = 1.0 / sqrt(ss / D + 1e-5);
            for (int32_t i = 0; i < D; i++)
                xb[t * D + i] = x[t * D + i] * inv * rms[i];
            for (int32_t o = 0; o < D; o++) {
                double a = 0;
                for (int32_t i = 0; i < D; i++)
                    a += w->wq[((size_t)l * D + o) * D + i] * xb[t * D + i];
                q[t * D + o] = a;
            }
            for (int32_t o = 0; o < KVD; o++) {
                double a = 0, b = 0;
                for (int32_t i = 0; i < D; i++) {
                    a += w->wk[((size_t)l * KVD + o) * D + i] * xb[t * D + i];
                    b += w->wv[((size_t)l * KVD + o) * D + i] * xb[t * D + i];
                }
                k[t * KVD + o] = a;
                v[t * KVD + o] = b;
            }
            /* RoPE: pair (i, i+1) at angle t * 10000^(-(i mod HS)/HS) */
            for (int32_t i = 0; i < D; i += 2) {
                double ang = t * pow(10000.0, -(double)(i % HS) / HS);
                double cs = cos(ang), sn = sin(ang);
                double a0 = q[t * D + i], a1 = q[t * D + i + 1];
                q[t * D + i] = a0 * cs - a1 * sn;
                q[t * D + i + 1] = a0 * sn + a1 * cs;
                if (i < KVD) {
                    a0 = k[t * KVD + i];
                    a1 = k[t * KVD + i + 1];
                    k[t * KVD + i] = a0 * cs - a1 * sn;
                    k[t * KVD + i + 1] = a0 * sn + a1 * cs;
                }
            }
        }
        /* causal attention, query head h reads kv head h / G */
        for (int32_t t = 0; t < n; t++) {
            for (int32_t h = 0; h < c->n_heads; h++) {
                int32_t kh = h / G, s0 = window > 0 && t - window + 1 > 0 ? t - window + 1 : 0;
                double mx = -INFINITY, sum = 0;
                for (int32_t s = s0; s <= t; s++) {
                    double a = 0;
                    for (int32_t d = 0; d < HS; d++)
                        a += q[t * D + h * HS + d] * k[s * KVD + kh * HS + d];
                    sc[s] = a / sqrt((double)HS);
                    mx = fmax(mx, sc[s]);
                }
                for (int32_t s = s0; s <= t; s++)
                    sum += sc[s] = exp(sc[s] - mx);
                for (int32_t d = 0; d < HS; d++) {
                    double a = 0;
                    for (int32_t s = s0; s <= t; s++)
                        a += sc[s] / sum * v[s * KVD + kh * HS + d];
                    att[t * D + h * HS + d] = a;
                }
            }
        }
        for (int32_t t = 0; t < n; t++) {
            for (int32_t o = 0; o < D; o++) {
                double a = 0;
                for (int32_t i = 0; i < D; i++)
                    a += w->wo[((size_t)l * D + o) * D + i] * att[t * D + i];
                x[t * D + o] += a;
            }
            if (!c->mlp)
                continue;
            const float *rf = w->rms_ffn + (size_t)l * D;
            double ss = 0;
            for (int32_t i = 0; i < D; i++)
                ss += x[t * D + i] * x[t * D + i];
            double inv = 1.0 / sqrt(ss / D + 1e-5);
            for (int32_t i = 0; i < D; i++)
                xb[t * D + i] = x[t * D + i] * inv * rf[i];
            for (int32_t j = 0; j < H; j++) {
                double a = 0, b = 0;
                for (int32_t i = 0; i < D; i++) {
                    a += w->w1[((size_t)l * H + j) * D + i] * xb[t * D + i];
                    b += w->w3[((size_t)l * H + j) * D + i] * xb[t * D + i];
                }
                h1[j] = a / (1.0 + exp(-a)) * b;
            }
            for (int32_t o = 0; o < D; o++) {
                double a = 0;
                for (int32_t j = 0; j < H; j++)
                    a += w->w2[((size_t)l * D + o) * H + j] * h1[j];
                x[t * D + o] += a;
            }
        }
    }
    const double *xl = x + (size_t)(n - 1) * D;
    double ss = 0;
    for (int32_t i = 0; i < D; i++)
        ss += xl[i] * xl[i];
    double inv = 1.0 / sqrt(ss / D + 1e-5);
    for (int32_t o = 0; o < c->vocab_size; o++) {
        double a = 0;
        for (int32_t i = 0; i < D; i++)
            a += w->wcls[(size_t)o * D + i] * xl[i] * inv * w->rms_final[i];
        logits[o] = a;
    }
    free(x);
    free(xb);
    free(q);
    free(k);
    free(v);
    free(att);
    free(h1);
    free(h3);
    free(sc);
}

/* ------------------------------------------------------------------------ */
/* Decoder vs the naive forward                                             */

START_TEST(test_forward_vs_naive)
{
    /* _i: 0 = none re-running, 1 = dynamic decoding, 2 = MLP off, 3 = window */
    struct kv_model_config mc = small_cfg();
    if (_i == 2)
        mc.mlp = 0;
    struct kv_model *m = make_model(&mc, 11);
    const struct kv_strategy_ops *ops = kv_strategy_find(_i == 1 ? "dynamic" : "none");
    ck_assert_ptr_nonnull(ops);
    int32_t window = _i == 3 ? 5 : 0;
    enum { N = 21 };
    int32_t toks[N];
    make_prompt(toks, N, mc.vocab_size, 3);
    struct kv_cache_config cc = cache_cfg(&mc, 1, 8);
    struct kv_cache *c = make_cache(ops, &cc);
    struct kv_runner *r = NULL;
    ck_assert_int_eq(kv_runner_create(&r, m, 1, N, _i == 0 ? 2 : THREADS), KV_OK);
    kv_runner_set_window(r, window);
    float logits[256];
    double ref[256];
    /* lengths: a prefill of 9, then one token at a time (dynamic) or the
     * whole prefix again (none) */
    for (int32_t len = 9; len <= N; len++) {
        if ((ops->caps & KV_CAP_KEEPS_HISTORY) && len > 9) {
            ck_assert_int_eq(kv_forward(r, m, c, toks + len - 1, 1, len - 1, NULL, logits, NULL),
                             KV_OK);
        } else {
            ck_assert_int_eq(kv_cache_reset(c), KV_OK);
            ck_assert_int_eq(kv_forward(r, m, c, toks, len, 0, NULL, logits, NULL), KV_OK);
        }
        naive_forward(ref, m, toks, len, window);
        double err = 0, rms = 0;
        for (int32_t i = 0; i < mc.vocab_size; i++) {
            err = fmax(err, fabs(logits[i] - ref[i]));
            rms += ref[i] * ref[i];
        }
        rms = sqrt(rms / mc.vocab_size);
        ck_assert_msg(err <= NAIVE_LOGIT_TOL, "case %d len %d: max |logit err| %g", _i, len,
                      err);
        ck_assert(rms > 0.1 && rms < 10.0); /* activations stay O(1) */
    }
    kv_runner_destroy(r);
    kv_cache_destroy(c);
    kv_model_destroy(m);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Library helpers: a cache for a model, one decode step for any strategy   */

/* Greedy decoding through kv_decode_step alone (no branch on the strategy):
 * out (batch, n_new). */
static void decode_with_helper(const struct kv_model *m, const char *name, int32_t batch,
                               const int32_t *prompt, int32_t P, int32_t n_new, int32_t *out)
{
    const struct kv_strategy_ops *ops = NULL;
    ck_assert_int_eq(kv_strategy_lookup(name, &ops, NULL, 0), KV_OK);
    const struct kv_cache_config cc = kv_cache_config_for_model(m, batch);
    struct kv_cache *c = NULL;
    ck_assert_int_eq(kv_cache_create(&c, ops, &cc, NULL), KV_OK);
    const int32_t widest = kv_decode_max_tokens(c, P, n_new);
    ck_assert_int_eq(widest, kv_cache_has(c, KV_CAP_KEEPS_HISTORY) ? P : P + n_new - 1);
    struct kv_runner *r = NULL;
    ck_assert_int_eq(kv_runner_create(&r, m, batch, widest, THREADS), KV_OK);
    const int32_t S = P + n_new + 3, V = m->cfg.vocab_size; /* rows longer than fed */
    int32_t *seq = calloc((size_t)batch * S, sizeof *seq);
    float *logits = malloc((size_t)batch * V * sizeof *logits);
    ck_assert(seq && logits);
    for (int32_t b = 0; b < batch; b++)
        memcpy(seq + (size_t)b * S, prompt + (size_t)b * P, (size_t)P * sizeof *seq);
    for (int32_t len = P; len < P + n_new; len++) {
        struct kv_step_stats st = {0};
        ck_assert_int_eq(kv_decode_step(r, m, c, seq, S, len, NULL, logits, &st), KV_OK);
        /* the prompt once, then one token, or everything again without history */
        ck_assert_int_eq(st.tokens_fed,
                         kv_cache_has(c, KV_CAP_KEEPS_HISTORY) && len > P ? 1 : len);
        for (int32_t b = 0; b < batch; b++) {
            const int32_t next = kv_argmax(logits + (size_t)b * V, V);
            seq[(size_t)b * S + len] = next;
            out[(size_t)b * n_new + len - P] = next;
        }
    }
    free(seq);
    free(logits);
    kv_runner_destroy(r);
    kv_cache_destroy(c);
}

START_TEST(test_decode_helpers)
{
    enum { B = 2, P = 7, N = 12 };
    const struct kv_model_config mc = small_cfg();
    struct kv_model *m = make_model(&mc, 23);
    int32_t prompt[B * P], none[B * N], dyn[B * N], gen[B * N];
    make_prompt(prompt, B * P, mc.vocab_size, 9);

    /* the cache's shape from the model */
    const struct kv_cache_config cc = kv_cache_config_for_model(m, B), want = cache_cfg(&mc, B, 8);
    ck_assert(memcmp(&cc, &want, sizeof cc) == 0);
    const struct kv_cache_config from_cfg = kv_cache_config_for(&mc, B);
    ck_assert(memcmp(&from_cfg, &want, sizeof cc) == 0);
    const struct kv_cache_config zero = {0}, none_cc = kv_cache_config_for_model(NULL, B);
    ck_assert(memcmp(&none_cc, &zero, sizeof zero) == 0);
    struct kv_model_config bad = mc;
    bad.n_heads = 3; /* does not divide dim */
    const struct kv_cache_config bad_cc = kv_cache_config_for(&bad, B);
    ck_assert(memcmp(&bad_cc, &zero, sizeof zero) == 0);
    struct kv_cache *c = NULL;
    ck_assert_int_eq(kv_cache_create(&c, kv_strategy_find("dynamic"), &none_cc, NULL),
                     KV_ERR_INVALID);

    /* none (the whole sequence every step) and dynamic (one token) through
     * the same loop: the same tokens, and kv_generate's */
    decode_with_helper(m, "none", B, prompt, P, N, none);
    decode_with_helper(m, "dynamic", B, prompt, P, N, dyn);
    for (int32_t i = 0; i < B * N; i++)
        ck_assert_int_eq(none[i], dyn[i]);
    ck_assert_int_eq(kv_cache_create(&c, kv_strategy_find("dynamic"), &cc, NULL), KV_OK);
    const struct kv_gen_params gp = {.batch = B, .prompt_len = P, .prompt = prompt,
                                     .new_tokens = N, .n_threads = THREADS};
    ck_assert_int_eq(kv_generate(m, c, &gp, gen, NULL, NULL), KV_OK);
    for (int32_t i = 0; i < B * N; i++)
        ck_assert_int_eq(gen[i], dyn[i]);
    kv_cache_destroy(c);

    /* refusals, the cache untouched */
    ck_assert_int_eq(kv_decode_max_tokens(NULL, P, N), 0);
    struct kv_runner *r = NULL;
    ck_assert_int_eq(kv_runner_create(&r, m, B, P, THREADS), KV_OK);
    ck_assert_int_eq(kv_cache_create(&c, kv_strategy_find("dynamic"), &cc, NULL), KV_OK);
    ck_assert_int_eq(kv_decode_max_tokens(c, 0, N), 0);
    ck_assert_int_eq(kv_decode_max_tokens(c, P, 0), 0);
    ck_assert_int_eq(kv_decode_max_tokens(c, INT32_MAX, 2), 0);
    int32_t seq[B * (P + 1)] = {0};
    for (int32_t b = 0; b < B; b++) /* rows of P + 1: the prompt and room for one */
        memcpy(seq + (size_t)b * (P + 1), prompt + (size_t)b * P, P * sizeof(int32_t));
    float logits[B * 256];
    ck_assert_int_eq(kv_decode_step(r, m, c, seq, P, P + 1, NULL, logits, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_decode_step(r, m, c, seq, P + 1, 0, NULL, logits, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_decode_step(NULL, m, c, seq, P, P, NULL, logits, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_decode_step(r, NULL, c, seq, P, P, NULL, logits, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_decode_step(r, m, NULL, seq, P, P, NULL, logits, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_decode_step(r, m, c, NULL, P, P, NULL, logits, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_decode_step(r, m, c, seq, P, P, NULL, NULL, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_decode_step(r, m, c, seq, P + 1, P + 1, NULL, logits, NULL),
                     KV_ERR_INVALID); /* P + 1 tokens at once: wider than the runner */
    ck_assert_int_eq(kv_cache_seq_len(c, 0), 0);
    ck_assert_int_eq(kv_decode_step(r, m, c, seq, P + 1, P, NULL, logits, NULL), KV_OK);
    ck_assert_int_eq(kv_decode_step(r, m, c, seq, P + 1, P, NULL, logits, NULL),
                     KV_ERR_INVALID); /* it holds those P tokens already */
    ck_assert_int_eq(kv_cache_seq_len(c, 0), P);
    kv_cache_destroy(c);
    const struct kv_cache_config one = kv_cache_config_for_model(m, 1);
    ck_assert_int_eq(kv_cache_create(&c, kv_strategy_find("dynamic"), &one, NULL), KV_OK);
    ck_assert_int_eq(kv_decode_step(r, m, c, seq, P + 1, P, NULL, logits, NULL),
                     KV_ERR_INVALID); /* a cache of another batch than the runner's */
    kv_cache_destroy(c);
    /* none: the whole sequence must fit the runner, checked before the reset */
    ck_assert_int_eq(kv_cache_create(&c, kv_strategy_find("none"), &cc, NULL), KV_OK);
    ck_assert_int_eq(kv_decode_max_tokens(c, P, 2), P + 1);
    ck_assert_int_eq(kv_decode_step(r, m, c, seq, P + 1, P, NULL, logits, NULL), KV_OK);
    struct kv_view v;
    ck_assert_int_eq(kv_cache_view(c, 0, &v), KV_OK);
    ck_assert_int_eq(v.n_spans, 1);
    ck_assert_int_eq(kv_decode_step(r, m, c, seq, P + 1, P + 1, NULL, logits, NULL),
                     KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_view(c, 0, &v), KV_OK);
    ck_assert_int_eq(v.n_spans, 1); /* not reset */
    kv_cache_destroy(c);
    kv_runner_destroy(r);
    kv_model_destroy(m);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Conformance over every registered strategy                               */

/* Teacher-forced lockstep of `ops` (with `params`) against the exact
 * reference: both fed the reference's greedy tokens; checks the logit error
 * at every step against a bound from the dtype's step (err_step = half a
 * step of the group's range, so the step is 2 * err_step of it). */
static double check_lossy(const struct kv_model *m, const struct kv_strategy_ops *ops,
                          const void *params, const int32_t *prompt)
{
    const struct kv_strategy_ops *exact = exact_ops();
    const int32_t V = m->cfg.vocab_size, L = m->cfg.n_layers;
    const struct kv_type_traits *tr = &kv_type_traits[kv_strategy_dtype(ops, params)];
    struct kv_cache_config cc = cache_cfg(&m->cfg, 1, 8);
    struct kv_cache *ce = make_cache(exact, &cc), *cq = NULL;
    ck_assert_int_eq(kv_cache_create(&cq, ops, &cc, params), KV_OK);
    struct kv_runner *re = NULL, *rq = NULL;
    ck_assert_int_eq(kv_runner_create(&re, m, 1, PROMPT, THREADS), KV_OK);
    ck_assert_int_eq(kv_runner_create(&rq, m, 1, PROMPT, THREADS), KV_OK);
    float *le = malloc((size_t)V * sizeof *le), *lq = malloc((size_t)V * sizeof *lq);
    const double delta = 2.0 * tr->err_step;
    const double bound = QUANT_GAIN * L * delta;
    double worst_rel = 0, worst_abs = 0;
    int agree = 0;
    int32_t tok = 0;
    for (int32_t step = 0; step < NEW; step++) {
        const int32_t *in = step == 0 ? prompt : &tok;
        int32_t n = step == 0 ? PROMPT : 1, pos0 = step == 0 ? 0 : PROMPT + step - 1;
        ck_assert_int_eq(kv_forward(re, m, ce, in, n, pos0, NULL, le, NULL), KV_OK);
        ck_assert_int_eq(kv_forward(rq, m, cq, in, n, pos0, NULL, lq, NULL), KV_OK);
        double num = 0, den = 0;
        for (int32_t i = 0; i < V; i++) {
            double d = (double)lq[i] - (double)le[i];
            num += d * d;
            den += (double)le[i] * le[i];
            worst_abs = fmax(worst_abs, fabs(d));
        }
        double rel = sqrt(num / den);
        worst_rel = fmax(worst_rel, rel);
        ck_assert_msg(rel <= bound, "%s %s step %d: relative L2 logit error %.3g > bound %.3g",
                      ops->name, tr->name, step, rel, bound);
        int32_t te = kv_argmax(le, V);
        agree += te == kv_argmax(lq, V);
        tok = te;
    }
    fprintf(stderr,
            "  %s %s: max abs logit error %.3g, max relative L2 %.3g (bound %.3g = %g x "
            "%d layers x step %.3g), greedy token agrees at %d/%d steps\n",
            ops->name, tr->name, worst_abs, worst_rel, bound, QUANT_GAIN, L, delta, agree, NEW);
    /* the error is really there (the strategy quantizes) */
    ck_assert(worst_rel > 0.0);
    free(le);
    free(lq);
    kv_runner_destroy(re);
    kv_runner_destroy(rq);
    kv_cache_destroy(ce);
    kv_cache_destroy(cq);
    return worst_rel;
}

START_TEST(test_conformance)
{
    const struct kv_strategy_ops *ops = kv_strategy_at(_i);
    const struct kv_strategy_ops *none = no_cache_ops();
    ck_assert_ptr_nonnull(ops);
    struct kv_model_config mc = small_cfg();
    struct kv_model *m = make_model(&mc, 7);
    int32_t prompt[PROMPT];
    make_prompt(prompt, PROMPT, mc.vocab_size, 100);

    if (strategy_is_lossy(m, ops, 8)) {
        /* the default parameters and every preset, one run per dtype */
        struct test_param_block blk[8];
        double err[8], step[8];
        int32_t n_runs = 0;
        for (int32_t k = -1; k < ops->n_presets && n_runs < 8; k++) {
            const struct kv_strategy_ops *o;
            struct test_params tp = cur_tp;
            test_params_fill(ops, &blk[n_runs], &tp);
            if (k >= 0)
                ck_assert_int_eq(kv_params_parse(ops, blk[n_runs].b, ops->presets[k].params),
                                 KV_OK);
            (void)o;
            const double s_k = kv_type_traits[kv_strategy_dtype(ops, blk[n_runs].b)].err_step;
            int seen = 0;
            for (int32_t j = 0; j < n_runs; j++)
                seen |= step[j] == s_k;
            if (seen)
                continue;
            step[n_runs] = s_k;
            err[n_runs] = check_lossy(m, ops, blk[n_runs].b, prompt);
            n_runs++;
        }
        /* the error comes from the step size: between two dtypes it scales
         * with their step ratio (255/15 = 17 for int8/int4) within a factor
         * 4 either way, which a bug that does not depend on the step (a
         * wrong position, a lost token) would not do */
        for (int32_t a = 0; a < n_runs; a++)
            for (int32_t b = 0; b < n_runs; b++) {
                const double want = step[a] / step[b], got = err[a] / err[b];
                if (want > 1.0)
                    ck_assert_msg(got > want / 4 && got < want * 4,
                                  "%s: error ratio %.3g between dtypes, expected about %.3g",
                                  ops->name, got, want);
            }
        kv_model_destroy(m);
        return;
    }

    const size_t per_step = (size_t)mc.vocab_size;
    struct kv_cache_config cc = cache_cfg(&mc, 1, 8);
    struct kv_cache *probe = make_cache(ops, &cc);
    int32_t window = kv_cache_mask_window(probe);
    struct kv_view pv;
    ck_assert_int_eq(kv_cache_view(probe, 0, &pv), KV_OK);
    const int32_t n_sink = pv.mask.n_sink;
    kv_cache_destroy(probe);

    struct kv_gen_params gp = {
        .batch = 1, .prompt_len = PROMPT, .prompt = prompt, .new_tokens = NEW,
        .n_threads = THREADS,
    };
    int32_t tok_s[NEW], tok_r[NEW];
    struct run_log ls = {.logits = malloc(NEW * per_step * sizeof(float))};
    struct run_log lr = {.logits = malloc(NEW * per_step * sizeof(float))};
    run_gen(m, ops, &cc, &gp, tok_s, &ls);
    gp.window = window; /* `none` with the strategy's mask */
    gp.n_sink = n_sink;
    run_gen(m, none, &cc, &gp, tok_r, &lr);

    double worst = 0;
    for (int32_t step = 0; step < NEW; step++) {
        double d = max_abs_diff(ls.logits + step * per_step, lr.logits + step * per_step,
                                per_step);
        worst = fmax(worst, d);
        ck_assert_msg(d <= EXACT_LOGIT_TOL, "%s step %d: max |logit diff| vs none %g",
                      ops->name, step, d);
        ck_assert_msg(tok_s[step] == tok_r[step], "%s step %d: token %d, none gives %d",
                      ops->name, step, tok_s[step], tok_r[step]);
    }
    fprintf(stderr, "  %s: %d tokens equal to none%s, max |logit diff| %.3g\n", ops->name,
            NEW, window ? " (same window)" : "", worst);

    if (window > 0) {
        /* the window must matter here, or the comparison proves nothing */
        ck_assert_int_lt(window, PROMPT + NEW - 1);
        gp.window = 0;
        gp.n_sink = 0;
        run_gen(m, none, &cc, &gp, tok_r, &lr);
        double far = 0;
        for (int32_t step = 0; step < NEW; step++)
            far = fmax(far, max_abs_diff(ls.logits + step * per_step,
                                         lr.logits + step * per_step, per_step));
        ck_assert_msg(far > 100 * EXACT_LOGIT_TOL, "%s: window makes no difference (%g)",
                      ops->name, far);
    }
    free(ls.logits);
    free(lr.logits);
    kv_model_destroy(m);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Left padding                                                             */

#define PAD_NEW 24

START_TEST(test_padding)
{
    const struct kv_strategy_ops *ops = kv_strategy_at(_i);
    struct kv_model_config mc = small_cfg();
    struct kv_model *m = make_model(&mc, 21);
    const int32_t V = mc.vocab_size;
    static const int32_t lens[3] = {PROMPT, 11, 5};
    int32_t pad[3], batch_prompt[3 * PROMPT], real[3][PROMPT];
    for (int b = 0; b < 3; b++) {
        pad[b] = PROMPT - lens[b];
        make_prompt(real[b], lens[b], V, 500 + (uint64_t)b);
        /* padding slots hold junk ids: the mask must hide them */
        make_prompt(batch_prompt + b * PROMPT, pad[b], V, 900 + (uint64_t)b);
        memcpy(batch_prompt + b * PROMPT + pad[b], real[b], (size_t)lens[b] * sizeof(int32_t));
    }
    int lossy = strategy_is_lossy(m, ops, 8);

    struct kv_cache_config cc = cache_cfg(&mc, 3, 8);
    /* Attention sinks are the row's first positions: a sequence padded by
     * at least n_sink has padding there (masked), so it keeps no sinks and
     * computes what a plain window of the same size computes alone (the
     * documented limitation of sinks under left padding). */
    struct kv_cache *probe = make_cache(ops, &cc);
    struct kv_view pv;
    ck_assert_int_eq(kv_cache_view(probe, 0, &pv), KV_OK);
    const int32_t n_sink = pv.mask.n_sink;
    kv_cache_destroy(probe);
    struct kv_gen_params gp = {
        .batch = 3, .prompt_len = PROMPT, .prompt = batch_prompt, .pad = pad,
        .new_tokens = PAD_NEW, .n_threads = THREADS,
    };
    int32_t tok_b[3 * PAD_NEW];
    struct run_log lb = {.logits = malloc((size_t)PAD_NEW * 3 * V * sizeof(float))};
    run_gen(m, ops, &cc, &gp, tok_b, &lb);

    double worst = 0;
    for (int b = 0; b < 3; b++) {
        struct kv_cache_config c1 = cache_cfg(&mc, 1, 8);
        struct kv_gen_params g1 = {
            .batch = 1, .prompt_len = lens[b], .prompt = real[b], .new_tokens = PAD_NEW,
            .n_threads = THREADS,
        };
        int32_t tok_1[PAD_NEW];
        struct run_log l1 = {.logits = malloc((size_t)PAD_NEW * V * sizeof(float))};
        const struct kv_strategy_ops *alone = ops;
        if (n_sink > 0 && pad[b] > 0) {
            ck_assert_int_ge(pad[b], n_sink); /* (no partial sinks in this test) */
            alone = kv_strategy_find("sliding");
        }
        run_gen(m, alone, &c1, &g1, tok_1, &l1);
        for (int32_t step = 0; step < PAD_NEW; step++) {
            ck_assert_msg(tok_b[b * PAD_NEW + step] == tok_1[step],
                          "%s: padded sequence %d step %d: token %d, alone %d", ops->name, b,
                          step, tok_b[b * PAD_NEW + step], tok_1[step]);
            double d = max_abs_diff(lb.logits + ((size_t)step * 3 + b) * V,
                                    l1.logits + (size_t)step * V, (size_t)V);
            worst = fmax(worst, d);
            /* a quantized code may round the other way when its input differs
             * in the last bit: allow one quantization step's worth */
            double tol = lossy ? QUANT_GAIN * mc.n_layers / 255.0 : EXACT_LOGIT_TOL;
            ck_assert_msg(d <= tol, "%s: padded sequence %d step %d: logits differ by %g",
                          ops->name, b, step, d);
        }
        free(l1.logits);
    }
    fprintf(stderr, "  %s: padded batch of 3 = each alone, max |logit diff| %.3g\n",
            ops->name, worst);
    free(lb.logits);
    kv_model_destroy(m);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Segments: sequences at different positions in one forward                */

#define SEG_REQ 3
#define SEG_STEPS 12

/*
 * Continuous batching's forward: three requests, each with its own cache,
 * joining at different iterations (the third while the first two decode),
 * prefill and decode rows in the same call. Every request gets the tokens
 * and, within the padding test's tolerance, the logits it gets alone.
 */
START_TEST(test_segments)
{
    const struct kv_strategy_ops *ops = kv_strategy_at(_i);
    struct kv_model_config mc = small_cfg();
    struct kv_model *m = make_model(&mc, 21);
    const int32_t V = mc.vocab_size;
    struct kv_cache_config cc = cache_cfg(&mc, 1, 8);
    struct kv_cache *c[SEG_REQ];
    c[0] = make_cache(ops, &cc);
    const int keeps = kv_cache_has(c[0], KV_CAP_KEEPS_HISTORY);
    kv_cache_destroy(c[0]);
    if (!keeps) { /* one that re-runs the whole sequence cannot serve a stream */
        kv_model_destroy(m);
        return;
    }
    const double tol = strategy_is_lossy(m, ops, 8) ? QUANT_GAIN * mc.n_layers / 255.0
                                                    : EXACT_LOGIT_TOL;
    static const int32_t plen[SEG_REQ] = {5, 9, 3}, join[SEG_REQ] = {0, 0, 2};
    int32_t prompt[SEG_REQ][16], tok_alone[SEG_REQ][SEG_STEPS], tok[SEG_REQ][SEG_STEPS];
    float *alone = malloc((size_t)SEG_REQ * SEG_STEPS * V * sizeof(float));
    float *lg = malloc((size_t)SEG_REQ * V * sizeof(float));
    ck_assert_ptr_nonnull(alone);
    ck_assert_ptr_nonnull(lg);

    for (int r = 0; r < SEG_REQ; r++) {
        make_prompt(prompt[r], plen[r], V, 700 + (uint64_t)r);
        struct kv_runner *run = NULL;
        ck_assert_int_eq(kv_runner_create(&run, m, 1, 16, THREADS), KV_OK);
        struct kv_cache *one = make_cache(ops, &cc);
        for (int32_t s = 0; s < SEG_STEPS; s++) {
            float *l = alone + ((size_t)r * SEG_STEPS + s) * V;
            enum kv_status st = s == 0 ? kv_forward(run, m, one, prompt[r], plen[r], 0, NULL, l, NULL)
                                       : kv_forward(run, m, one, &tok_alone[r][s - 1], 1,
                                                    plen[r] + s - 1, NULL, l, NULL);
            ck_assert_int_eq(st, KV_OK);
            tok_alone[r][s] = kv_argmax(l, V);
        }
        kv_cache_destroy(one);
        kv_runner_destroy(run);
    }

    struct kv_runner *run = NULL;
    ck_assert_int_eq(kv_runner_create(&run, m, 1, 32, THREADS), KV_OK);
    for (int r = 0; r < SEG_REQ; r++)
        c[r] = make_cache(ops, &cc);
    for (int32_t it = 0; it < SEG_STEPS + 2; it++) {
        struct kv_segment seg[SEG_REQ];
        int who[SEG_REQ], n = 0;
        for (int r = 0; r < SEG_REQ; r++) {
            const int32_t s = it - join[r];
            if (s < 0 || s >= SEG_STEPS)
                continue;
            seg[n] = s == 0 ? (struct kv_segment){.cache = c[r], .tokens = prompt[r], .n = plen[r]}
                            : (struct kv_segment){.cache = c[r], .tokens = &tok[r][s - 1], .n = 1,
                                                  .pos0 = plen[r] + s - 1};
            who[n++] = r;
        }
        ck_assert_int_eq(kv_forward_segments(run, m, seg, n, lg, NULL), KV_OK);
        for (int i = 0; i < n; i++) {
            const int r = who[i], s = it - join[r];
            const double d = max_abs_diff(lg + (size_t)i * V, alone + ((size_t)r * SEG_STEPS + s) * V,
                                          (size_t)V);
            ck_assert_msg(d <= tol, "%s: request %d step %d: logits differ from alone by %g",
                          ops->name, r, s, d);
            tok[r][s] = kv_argmax(lg + (size_t)i * V, V);
            ck_assert_msg(tok[r][s] == tok_alone[r][s], "%s: request %d step %d: token %d, alone %d",
                          ops->name, r, s, tok[r][s], tok_alone[r][s]);
        }
    }
    for (int r = 0; r < SEG_REQ; r++)
        kv_cache_destroy(c[r]);
    kv_runner_destroy(run);
    free(alone);
    free(lg);
    kv_model_destroy(m);
}
END_TEST

/* Refused before any cache is touched: a cache in two segments, a segment
 * wider than the runner, rows past its buffers, a bad token. */
START_TEST(test_segments_errors)
{
    struct kv_model_config mc = small_cfg();
    struct kv_model *m = make_model(&mc, 3);
    struct kv_cache_config c1 = cache_cfg(&mc, 1, 8), c2 = cache_cfg(&mc, 2, 8);
    const struct kv_strategy_ops *dyn = kv_strategy_find("dynamic");
    struct kv_cache *a = make_cache(dyn, &c1), *b = make_cache(dyn, &c1), *w = make_cache(dyn, &c2);
    struct kv_runner *run = NULL;
    ck_assert_int_eq(kv_runner_create(&run, m, 1, 8, THREADS), KV_OK);
    int32_t toks[16] = {0}, bad[1] = {mc.vocab_size};
    float *lg = malloc((size_t)4 * mc.vocab_size * sizeof(float));
    const struct kv_segment twice[2] = {{.cache = a, .tokens = toks, .n = 2},
                                        {.cache = a, .tokens = toks, .n = 1}};
    ck_assert_int_eq(kv_forward_segments(run, m, twice, 2, lg, NULL), KV_ERR_INVALID);
    const struct kv_segment wide = {.cache = w, .tokens = toks, .n = 1};
    ck_assert_int_eq(kv_forward_segments(run, m, &wide, 1, lg, NULL), KV_ERR_INVALID);
    const struct kv_segment many[2] = {{.cache = a, .tokens = toks, .n = 5},
                                       {.cache = b, .tokens = toks, .n = 4}}; /* 9 rows > 8 */
    ck_assert_int_eq(kv_forward_segments(run, m, many, 2, lg, NULL), KV_ERR_INVALID);
    const struct kv_segment badtok[2] = {{.cache = a, .tokens = toks, .n = 2},
                                         {.cache = b, .tokens = bad, .n = 1}};
    ck_assert_int_eq(kv_forward_segments(run, m, badtok, 2, lg, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_forward_segments(run, m, many, 0, lg, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_forward_segments(run, m, NULL, 1, lg, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_seq_len(a, 0), 0);
    ck_assert_int_eq(kv_cache_seq_len(b, 0), 0);
    /* and a good call after them works */
    ck_assert_int_eq(kv_forward_segments(run, m, badtok, 1, lg, NULL), KV_OK);
    ck_assert_int_eq(kv_cache_seq_len(a, 0), 2);
    free(lg);
    kv_runner_destroy(run);
    kv_cache_destroy(a);
    kv_cache_destroy(b);
    kv_cache_destroy(w);
    kv_model_destroy(m);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Counters against closed forms                                            */

/* Expected counters for one kv_forward of n tokens at pos0 over batch B
 * sequences (no padding), every key from 0 visible unless window > 0. */
static struct kv_step_stats expected_stats(const struct kv_model_config *c, int64_t B,
                                           int64_t n, int64_t pos0, int64_t window)
{
    const int64_t D = c->dim, L = c->n_layers, NH = c->n_heads, HS = D / NH;
    const int64_t KVD = c->n_kv_heads * HS, H = c->hidden_dim, V = c->vocab_size;
    const int64_t T = B * n; /* tokens through the layers */
    struct kv_step_stats e = {0};
    int64_t per_tok = 2 * D * D      /* Wq */
                      + 2 * 2 * D * KVD /* Wk, Wv */
                      + 2 * D * D;      /* Wo */
    if (c->mlp)
        per_tok += 3 * 2 * D * H; /* W1, W3, W2 */
    e.flops.gemm = L * T * per_tok + 2 * B * D * V; /* + classifier */
    int64_t pairs = 0; /* per sequence: query at p sees min(p + 1, window) keys */
    for (int64_t p = pos0; p < pos0 + n; p++)
        pairs += window > 0 && window < p + 1 ? window : p + 1;
    pairs *= B;
    e.flops.attn = L * 4 * HS * NH * pairs;
    e.flops.softmax = L * 5 * NH * pairs;
    e.flops.norm = L * (c->mlp ? 2 : 1) * 4 * T * D /* RMSNorms */
                   + 4 * B * D                        /* final RMSNorm */
                   + L * 6 * T * (NH + c->n_kv_heads) * (HS / 2); /* RoPE pairs */
    e.flops.other = L * (c->mlp ? 2 : 1) * T * D /* residual adds */
                    + (c->mlp ? L * 5 * T * H : 0); /* SwiGLU */
    e.tokens_fed = n;
    return e;
}

static void check_stats(const struct kv_step_stats *got, const struct kv_step_stats *exp,
                        const char *what, int64_t len)
{
    ck_assert_msg(got->flops.gemm == exp->flops.gemm, "%s len %ld: gemm %ld vs %ld", what,
                  (long)len, (long)got->flops.gemm, (long)exp->flops.gemm);
    ck_assert_msg(got->flops.attn == exp->flops.attn, "%s len %ld: attn %ld vs %ld", what,
                  (long)len, (long)got->flops.attn, (long)exp->flops.attn);
    ck_assert_int_eq(got->flops.softmax, exp->flops.softmax);
    ck_assert_int_eq(got->flops.norm, exp->flops.norm);
    ck_assert_int_eq(got->flops.other, exp->flops.other);
    ck_assert_int_eq(got->tokens_fed, exp->tokens_fed);
    ck_assert_int_eq(kv_flops_total(&got->flops), got->flops.gemm + got->flops.attn +
                                               got->flops.softmax + got->flops.norm +
                                               got->flops.other);
}

START_TEST(test_flops)
{
    /* _i: bit 0 = MLP off, bit 1 = batch 2 */
    struct kv_model_config mc = small_cfg();
    mc.mlp = !(_i & 1);
    int32_t B = _i & 2 ? 2 : 1;
    struct kv_model *m = make_model(&mc, 5);
    const size_t wbytes = kv_model_weight_bytes(&mc);
    const size_t kv_row = 2 * (size_t)B * mc.n_kv_heads * (mc.dim / mc.n_heads) * 4;
    enum { MAXT = 40 };
    int32_t toks[2 * MAXT];
    make_prompt(toks, 2 * MAXT, mc.vocab_size, 8);
    float logits[2 * 256];
    struct kv_cache_config cc = cache_cfg(&mc, B, 8);

    /* none: a full re-run of T tokens, at several T, with and without a window */
    const struct kv_strategy_ops *none = kv_strategy_find("none");
    struct kv_cache *c = make_cache(none, &cc);
    struct kv_runner *r = NULL;
    ck_assert_int_eq(kv_runner_create(&r, m, B, MAXT, THREADS), KV_OK);
    static const int32_t lens[] = {1, 2, 5, 17, 40};
    for (int wi = 0; wi < 2; wi++) {
        int32_t window = wi ? 7 : 0;
        kv_runner_set_window(r, window);
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            int32_t T = lens[li];
            struct kv_step_stats st = {0};
            ck_assert_int_eq(kv_cache_reset(c), KV_OK);
            ck_assert_int_eq(kv_forward(r, m, c, toks, T, 0, NULL, logits, &st), KV_OK);
            struct kv_step_stats e = expected_stats(&mc, B, T, 0, window);
            check_stats(&st, &e, "none", T);
            /* bytes: weights + the K/V of the T tokens the call attends over */
            ck_assert_uint_eq(st.bytes_read, wbytes + mc.n_layers * kv_row * (size_t)T);
        }
    }
    kv_runner_destroy(r);
    kv_cache_destroy(c);

    /* dynamic: prefill of 7, then decode steps to 40 */
    const struct kv_strategy_ops *dyn = kv_strategy_find("dynamic");
    c = make_cache(dyn, &cc);
    ck_assert_int_eq(kv_runner_create(&r, m, B, 7, THREADS), KV_OK);
    int32_t tb[2], pre[2 * 7];
    struct kv_step_stats st = {0};
    for (int b = 0; b < B; b++)
        memcpy(pre + b * 7, toks + b * MAXT, 7 * sizeof(int32_t));
    ck_assert_int_eq(kv_forward(r, m, c, pre, 7, 0, NULL, logits, &st), KV_OK);
    struct kv_step_stats e = expected_stats(&mc, B, 7, 0, 0);
    check_stats(&st, &e, "dynamic prefill", 7);
    ck_assert_uint_eq(st.bytes_read, wbytes + mc.n_layers * kv_row * 7);
    for (int32_t pos = 7; pos < MAXT; pos++) {
        for (int b = 0; b < B; b++)
            tb[b] = toks[b * MAXT + pos];
        struct kv_step_stats s1 = {0};
        ck_assert_int_eq(kv_forward(r, m, c, tb, 1, pos, NULL, logits, &s1), KV_OK);
        e = expected_stats(&mc, B, 1, pos, 0);
        check_stats(&s1, &e, "dynamic decode", pos + 1);
        ck_assert_uint_eq(s1.bytes_read, wbytes + mc.n_layers * kv_row * (size_t)(pos + 1));
        ck_assert_int_eq(kv_cache_seq_len(c, 0), pos + 1);
    }
    kv_runner_destroy(r);
    kv_cache_destroy(c);
    kv_model_destroy(m);
}
END_TEST

START_TEST(test_stats_accumulate)
{
    struct kv_model_config mc = small_cfg();
    struct kv_model *m = make_model(&mc, 5);
    struct kv_cache_config cc = cache_cfg(&mc, 1, 8);
    struct kv_cache *c = make_cache(kv_strategy_find("dynamic"), &cc);
    struct kv_runner *r = NULL;
    ck_assert_int_eq(kv_runner_create(&r, m, 1, 4, 1), KV_OK);
    int32_t toks[5] = {1, 2, 3, 4, 5};
    float logits[256];
    struct kv_step_stats st = {0};
    ck_assert_int_eq(kv_forward(r, m, c, toks, 4, 0, NULL, logits, &st), KV_OK);
    ck_assert_int_eq(kv_forward(r, m, c, toks + 4, 1, 4, NULL, logits, &st), KV_OK);
    struct kv_step_stats a = expected_stats(&mc, 1, 4, 0, 0);
    struct kv_step_stats b = expected_stats(&mc, 1, 1, 4, 0);
    ck_assert_int_eq(st.flops.gemm, a.flops.gemm + b.flops.gemm);
    ck_assert_int_eq(st.flops.attn, a.flops.attn + b.flops.attn);
    ck_assert_int_eq(st.tokens_fed, 5);
    ck_assert_int_ge(st.attn_ns, 0);
    kv_runner_destroy(r);
    kv_cache_destroy(c);
    kv_model_destroy(m);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Probe and window plumbing                                                */

struct probe_log {
    int32_t calls, next_layer, n_q, q_pos0, window, n_spans;
    const int32_t *pad;
};

static void probe(void *user, int32_t layer, const float *q, const struct kv_attn_params *p,
                  const struct kv_view *v)
{
    struct probe_log *g = user;
    ck_assert_ptr_nonnull(q);
    ck_assert_ptr_nonnull(v);
    ck_assert_ptr_nonnull(v->spans);
    ck_assert_int_eq(layer, g->next_layer); /* layers in order, once each */
    g->next_layer++;
    g->calls++;
    g->n_q = p->n_q;
    g->q_pos0 = p->q_pos0;
    g->window = v->mask.window;
    g->n_spans = v->n_spans;
    g->pad = v->mask.pad;
}

START_TEST(test_probe_and_window)
{
    struct kv_model_config mc = small_cfg();
    struct kv_model *m = make_model(&mc, 3);
    const struct kv_strategy_ops *sl = kv_strategy_find("sliding");
    ck_assert_ptr_nonnull(sl);
    struct kv_cache_config cc = cache_cfg(&mc, 2, 8);
    struct kv_cache *c = make_cache(sl, &cc);
    ck_assert_int_eq(kv_cache_mask_window(c), WINDOW);
    struct kv_runner *r = NULL;
    ck_assert_int_eq(kv_runner_create(&r, m, 2, 6, 1), KV_OK);
    struct probe_log g = {0};
    kv_runner_set_probe(r, probe, &g);
    int32_t toks[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, pad[2] = {0, 2};
    float logits[2 * 256];
    ck_assert_int_eq(kv_forward(r, m, c, toks, 6, 0, pad, logits, NULL), KV_OK);
    ck_assert_int_eq(g.calls, mc.n_layers);
    ck_assert_int_eq(g.n_q, 6);
    ck_assert_int_eq(g.q_pos0, 0);
    ck_assert_int_eq(g.window, WINDOW); /* the strategy's mask */
    ck_assert_ptr_eq(g.pad, pad);
    ck_assert_int_ge(g.n_spans, 1);
    /* an extra runner window: the two masks intersect (smaller wins) */
    g.next_layer = 0;
    kv_runner_set_window(r, 5);
    ck_assert_int_eq(kv_forward(r, m, c, toks, 1, 6, pad, logits, NULL), KV_OK);
    ck_assert_int_eq(g.window, 5);
    ck_assert_int_eq(g.n_q, 1);
    ck_assert_int_eq(g.q_pos0, 6);
    g.next_layer = 0;
    kv_runner_set_window(r, 100);
    ck_assert_int_eq(kv_forward(r, m, c, toks, 1, 7, pad, logits, NULL), KV_OK);
    ck_assert_int_eq(g.window, WINDOW);
    /* probe off */
    kv_runner_set_probe(r, NULL, NULL);
    int32_t before = g.calls;
    ck_assert_int_eq(kv_forward(r, m, c, toks, 1, 8, pad, logits, NULL), KV_OK);
    ck_assert_int_eq(g.calls, before);
    kv_runner_destroy(r);
    kv_cache_destroy(c);
    kv_model_destroy(m);
}
END_TEST

/*
 * The attention mass through the model: for a cache that asks for it
 * (h2o), every layer's attention call carries a mass buffer, and what the
 * kernel wrote there (seen by the probe, before the cache takes it) equals
 * the scalar reference's mass on the same view; a cache that does not ask
 * gets none. Each query's probabilities sum to 1 per query head.
 */
struct mass_log {
    int32_t calls, with_mass;
    double worst, worst_sum;
};

#define MASS_MODEL_TOL 1e-5 /* float probabilities of O(100) keys, one or a few queries */
static void mass_probe(void *user, int32_t layer, const float *q, const struct kv_attn_params *p,
                       const struct kv_view *v)
{
    struct mass_log *g = user;
    (void)layer;
    g->calls++;
    if (p->mass == NULL)
        return;
    g->with_mass++;
    const size_t nk = (size_t)kv_view_keys(v), n = (size_t)p->batch * p->n_heads * nk;
    ck_assert_uint_ge(p->mass_len, n);
    float *want = malloc(n * sizeof(float)), *out = malloc((size_t)p->batch * p->n_q *
                                                           p->n_heads * p->head_dim * 4);
    ck_assert(want && out);
    struct kv_attn_params rp = *p;
    rp.mass = want;
    rp.mass_len = n;
    ck_assert_int_eq(kv_attn_ref(out, q, &rp, v), KV_OK);
    for (size_t r = 0; r < (size_t)p->batch * p->n_heads; r++) {
        double sum = 0;
        for (size_t j = 0; j < nk; j++) {
            g->worst = fmax(g->worst, fabs((double)p->mass[r * nk + j] - want[r * nk + j]));
            sum += p->mass[r * nk + j];
        }
        g->worst_sum = fmax(g->worst_sum, fabs(sum - p->n_q));
    }
    free(want);
    free(out);
}

START_TEST(test_mass_through_model)
{
    struct kv_model_config mc = small_cfg();
    struct kv_model *m = make_model(&mc, 5);
    struct kv_cache_config cc = cache_cfg(&mc, 2, 8);
    const struct kv_strategy_ops *h2o = kv_strategy_find("h2o");
    struct test_param_block blk;
    const struct test_params tp = {.window = 5, .heavy = 6};
    test_params_fill(h2o, &blk, &tp);
    struct kv_cache *c = NULL;
    ck_assert_int_eq(kv_cache_create(&c, h2o, &cc, blk.b), KV_OK);
    struct kv_runner *r = NULL;
    ck_assert_int_eq(kv_runner_create(&r, m, 2, PROMPT, 1), KV_OK);
    struct mass_log g = {0};
    kv_runner_set_probe(r, mass_probe, &g);
    int32_t toks[2 * PROMPT];
    make_prompt(toks, 2 * PROMPT, mc.vocab_size, 9);
    float logits[2 * 256];
    /* a prompt longer than heavy + window (passed through), then decode
     * steps that evict */
    ck_assert_int_eq(kv_forward(r, m, c, toks, PROMPT, 0, NULL, logits, NULL), KV_OK);
    for (int32_t t = 0; t < 20; t++)
        ck_assert_int_eq(kv_forward(r, m, c, toks + t % PROMPT, 1, PROMPT + t, NULL, logits, NULL),
                         KV_OK);
    ck_assert_int_eq(g.calls, 21 * mc.n_layers);
    ck_assert_int_eq(g.with_mass, g.calls);
    ck_assert_msg(g.worst <= MASS_MODEL_TOL, "kernel mass vs reference: %g", g.worst);
    ck_assert_msg(g.worst_sum <= PROMPT * MASS_MODEL_TOL, "mass sums off by %g", g.worst_sum);
    /* h2o held heavy + window keys at the end, not all of them */
    struct kv_view v;
    ck_assert_int_eq(kv_cache_view(c, 0, &v), KV_OK);
    ck_assert_int_eq(kv_view_keys(&v), 6 + 5);
    kv_cache_destroy(c);
    /* a cache that does not ask: no mass */
    c = make_cache(kv_strategy_find("dynamic"), &cc);
    g = (struct mass_log){0};
    ck_assert_int_eq(kv_forward(r, m, c, toks, PROMPT, 0, NULL, logits, NULL), KV_OK);
    ck_assert_int_eq(g.calls, mc.n_layers);
    ck_assert_int_eq(g.with_mass, 0);
    kv_cache_destroy(c);
    kv_runner_destroy(r);
    kv_model_destroy(m);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Synthetic weights and configuration                                      */

START_TEST(test_weights)
{
    struct kv_model_config mc = small_cfg();
    struct kv_model *a = make_model(&mc, 1), *b = make_model(&mc, 1), *c = make_model(&mc, 2);
    /* closed-form size: llama2.c arrays, no RoPE tables, unshared wcls */
    size_t D = 64, H = 96, L = 2, V = 256, KVD = 2 * 16;
    size_t floats = V * D + L * D + L * D * D + 2 * L * KVD * D + L * D * D + L * D +
                    3 * L * H * D + D + V * D;
    ck_assert_uint_eq(kv_model_weight_bytes(&mc), floats * 4);
    ck_assert_uint_eq(a->storage_bytes, floats * 4);
    ck_assert_int_eq(a->mapped, 0);
    ck_assert_mem_eq(a->storage, b->storage, a->storage_bytes); /* same seed */
    ck_assert(memcmp(a->storage, c->storage, a->storage_bytes) != 0);
    /* llama2.c order inside the one block */
    ck_assert_ptr_eq(a->w.token_embedding, (float *)a->storage);
    ck_assert_ptr_eq(a->w.rms_att, a->w.token_embedding + V * D);
    ck_assert_ptr_eq(a->w.wq, a->w.rms_att + L * D);
    ck_assert_ptr_eq(a->w.wk, a->w.wq + L * D * D);
    ck_assert_ptr_eq(a->w.wv, a->w.wk + L * KVD * D);
    ck_assert_ptr_eq(a->w.wo, a->w.wv + L * KVD * D);
    ck_assert_ptr_eq(a->w.rms_ffn, a->w.wo + L * D * D);
    ck_assert_ptr_eq(a->w.w1, a->w.rms_ffn + L * D);
    ck_assert_ptr_eq(a->w.w2, a->w.w1 + L * H * D);
    ck_assert_ptr_eq(a->w.w3, a->w.w2 + L * D * H);
    ck_assert_ptr_eq(a->w.rms_final, a->w.w3 + L * H * D);
    ck_assert_ptr_eq(a->w.wcls, a->w.rms_final + D);
    int not_one = 0;
    for (size_t i = 0; i < D; i++)
        not_one += a->w.rms_final[i] != 1.0f || a->w.rms_att[i] != 1.0f;
    ck_assert_int_eq(not_one, 0);
    /* scale: embedding unit variance, Wq entries within sqrt(3/dim) */
    double ss = 0;
    for (size_t i = 0; i < V * D; i++)
        ss += (double)a->w.token_embedding[i] * a->w.token_embedding[i];
    ck_assert(fabs(ss / (double)(V * D) - 1.0) < 0.05);
    int too_big = 0;
    for (size_t i = 0; i < L * D * D; i++)
        too_big += fabsf(a->w.wq[i]) > sqrtf(3.0f / 64.0f);
    ck_assert_int_eq(too_big, 0);

    /* MLP off: no w1..w3, same attention weights for the same seed */
    struct kv_model_config mo = mc;
    mo.mlp = 0;
    struct kv_model *o = make_model(&mo, 1);
    ck_assert_ptr_null(o->w.w1);
    ck_assert_uint_eq(kv_model_weight_bytes(&mo), (floats - 3 * L * H * D) * 4);
    ck_assert_mem_eq(o->w.wq, a->w.wq, L * D * D * 4);
    ck_assert_mem_eq(o->w.wcls, a->w.wcls, V * D * 4);
    /* shared classifier: wcls is the embedding */
    struct kv_model_config ms = mc;
    ms.shared_classifier = 1;
    struct kv_model *s = make_model(&ms, 1);
    ck_assert_ptr_eq(s->w.wcls, s->w.token_embedding);
    ck_assert_uint_eq(kv_model_weight_bytes(&ms), (floats - V * D) * 4);
    kv_model_destroy(a);
    kv_model_destroy(b);
    kv_model_destroy(c);
    kv_model_destroy(o);
    kv_model_destroy(s);
    ck_assert_int_eq(kv_alloc_live(), 0);
}
END_TEST

START_TEST(test_default_model)
{
    /* docs/design.md's default model: O(1) logits after a short prefill. */
    struct kv_model_config mc = kv_model_default_config();
    ck_assert_int_eq(mc.dim, 512);
    ck_assert_int_eq(mc.n_layers, 4);
    ck_assert_int_eq(mc.n_heads, 8);
    ck_assert_int_eq(mc.n_kv_heads, 8);
    ck_assert_int_eq(mc.hidden_dim, 1376);
    ck_assert_int_eq(mc.vocab_size, 256);
    ck_assert_int_eq(mc.max_len, 8192);
    ck_assert_int_eq(kv_model_config_check(&mc), KV_OK);
    struct kv_model *m = make_model(&mc, 42);
    struct kv_cache_config cc = {.n_layers = 4, .batch = 1, .n_kv_heads = 8, .head_dim = 64,
                                 .max_len = 64};
    struct kv_cache *c = make_cache(kv_strategy_find("dynamic"), &cc);
    struct kv_runner *r = NULL;
    ck_assert_int_eq(kv_runner_create(&r, m, 1, 8, THREADS), KV_OK);
    int32_t toks[8];
    make_prompt(toks, 8, 256, 1);
    float logits[256];
    ck_assert_int_eq(kv_forward(r, m, c, toks, 8, 0, NULL, logits, NULL), KV_OK);
    double ss = 0;
    for (int i = 0; i < 256; i++) {
        ck_assert(isfinite(logits[i]));
        ss += (double)logits[i] * logits[i];
    }
    double rms = sqrt(ss / 256);
    ck_assert_msg(rms > 0.2 && rms < 5.0, "default model logits RMS %g", rms);
    kv_runner_destroy(r);
    kv_cache_destroy(c);
    kv_model_destroy(m);
}
END_TEST

START_TEST(test_config_check)
{
    struct kv_model_config ok = small_cfg();
    ck_assert_int_eq(kv_model_config_check(&ok), KV_OK);
    struct kv_model_config c;
#define BAD(field, value, expect)                                                        \
    do {                                                                                 \
        c = ok;                                                                          \
        c.field = value;                                                                 \
        ck_assert_int_eq(kv_model_config_check(&c), expect);                             \
        ck_assert_uint_eq(kv_model_weight_bytes(&c), 0);                                 \
        struct kv_model *m = (struct kv_model *)&c;                                      \
        ck_assert_int_eq(kv_model_create_synthetic(&m, &c, 1), expect);                  \
        ck_assert_ptr_null(m);                                                           \
    } while (0)
    BAD(dim, 0, KV_ERR_INVALID);
    BAD(dim, -64, KV_ERR_INVALID);
    BAD(dim, 66, KV_ERR_INVALID);    /* not a multiple of 4 heads */
    BAD(dim, 4 * 3, KV_ERR_INVALID); /* head_dim 3 is odd */
    BAD(n_heads, 0, KV_ERR_INVALID);
    BAD(n_kv_heads, 3, KV_ERR_INVALID); /* does not divide 4 heads */
    BAD(n_kv_heads, 0, KV_ERR_INVALID);
    BAD(n_layers, 0, KV_ERR_INVALID);
    BAD(hidden_dim, -1, KV_ERR_INVALID);
    BAD(vocab_size, 0, KV_ERR_INVALID);
    BAD(max_len, 0, KV_ERR_INVALID);
    BAD(mlp, 2, KV_ERR_INVALID);
#undef BAD
    /* byte counts that overflow size_t */
    c = ok;
    c.n_layers = 1 << 30;
    c.dim = 1 << 30;
    c.n_heads = 1;
    c.n_kv_heads = 1;
    ck_assert_int_eq(kv_model_config_check(&c), KV_ERR_OVERFLOW);
    ck_assert_uint_eq(kv_model_weight_bytes(&c), 0);
    struct kv_model *m = NULL;
    ck_assert_int_eq(kv_model_create_synthetic(&m, &c, 1), KV_ERR_OVERFLOW);
    ck_assert_ptr_null(m);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Error paths                                                              */

START_TEST(test_forward_errors)
{
    struct kv_model_config mc = small_cfg();
    struct kv_model *m = make_model(&mc, 3);
    struct kv_cache_config cc = cache_cfg(&mc, 1, 8);
    struct kv_cache *c = make_cache(kv_strategy_find("dynamic"), &cc);
    struct kv_runner *r = NULL;
    ck_assert_int_eq(kv_runner_create(&r, m, 1, 4, 1), KV_OK);
    float logits[256];
    int32_t toks[5] = {1, 2, 3, 4, 5}, bad[2] = {7, 256}, neg[1] = {-1};
    ck_assert_int_eq(kv_forward(r, m, c, bad, 2, 0, NULL, logits, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_forward(r, m, c, neg, 1, 0, NULL, logits, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_forward(r, m, c, toks, 5, 0, NULL, logits, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_forward(r, m, c, toks, 0, 0, NULL, logits, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_forward(r, m, c, toks, 1, -1, NULL, logits, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_forward(r, m, c, toks, 2, 255, NULL, logits, NULL), KV_ERR_INVALID);
    int32_t pad_all[1] = {2}; /* the last token would be padding */
    ck_assert_int_eq(kv_forward(r, m, c, toks, 2, 0, pad_all, logits, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_seq_len(c, 0), 0); /* nothing reached the cache */
    /* a cache of another shape */
    struct kv_cache_config c2 = cc;
    c2.batch = 2;
    struct kv_cache *other = make_cache(kv_strategy_find("dynamic"), &c2);
    ck_assert_int_eq(kv_forward(r, m, other, toks, 1, 0, NULL, logits, NULL), KV_ERR_INVALID);
    kv_cache_destroy(other);
    /* the runner of another model */
    struct kv_model_config mc2 = mc;
    mc2.hidden_dim = 32;
    struct kv_model *m2 = make_model(&mc2, 3);
    ck_assert_int_eq(kv_forward(r, m2, c, toks, 1, 0, NULL, logits, NULL), KV_ERR_INVALID);
    kv_model_destroy(m2);
    /* still usable afterwards */
    ck_assert_int_eq(kv_forward(r, m, c, toks, 4, 0, NULL, logits, NULL), KV_OK);
    ck_assert_int_eq(kv_cache_seq_len(c, 0), 4);
    /* a history strategy refuses a gap in positions */
    ck_assert_int_ne(kv_forward(r, m, c, toks, 1, 9, NULL, logits, NULL), KV_OK);
    kv_runner_destroy(r);
    kv_cache_destroy(c);

    /* generation parameters */
    c = make_cache(kv_strategy_find("dynamic"), &cc);
    int32_t out[8];
    struct kv_gen_params gp = {.batch = 1, .prompt_len = 4, .prompt = toks, .new_tokens = 4,
                               .n_threads = 1};
    struct kv_gen_params g = gp;
    g.batch = 2;
    ck_assert_int_eq(kv_generate(m, c, &g, out, NULL, NULL), KV_ERR_INVALID);
    g = gp;
    g.new_tokens = 0;
    ck_assert_int_eq(kv_generate(m, c, &g, out, NULL, NULL), KV_ERR_INVALID);
    g = gp;
    g.new_tokens = 254; /* positions past the model's max_len */
    ck_assert_int_eq(kv_generate(m, c, &g, out, NULL, NULL), KV_ERR_INVALID);
    g = gp;
    g.prompt = NULL;
    ck_assert_int_eq(kv_generate(m, c, &g, out, NULL, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_generate(m, c, &gp, out, NULL, NULL), KV_OK);
    kv_cache_destroy(c);

    /* a full static cache: KV_ERR_FULL from the generation, nothing leaks */
    const struct kv_strategy_ops *st = kv_strategy_find("static");
    if (st != NULL) {
        struct kv_cache_config small = cc;
        small.max_len = 7;
        c = make_cache(st, &small);
        ck_assert_int_eq(kv_generate(m, c, &gp, out, NULL, NULL), KV_OK); /* 4 + 3 fed */
        g = gp;
        g.new_tokens = 5; /* needs 8 positions */
        ck_assert_int_eq(kv_generate(m, c, &g, out, NULL, NULL), KV_ERR_FULL);
        kv_cache_destroy(c);
    }
    kv_model_destroy(m);
    ck_assert_int_eq(kv_alloc_live(), 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Allocation failure                                                       */

/* One full life cycle; returns the first failing status (or KV_OK). */
static enum kv_status life_cycle(const struct kv_strategy_ops *ops)
{
    struct kv_model_config mc = small_cfg();
    struct kv_model *m = NULL;
    struct kv_cache *c = NULL;
    struct kv_runner *r = NULL;
    enum kv_status s = kv_model_create_synthetic(&m, &mc, 9);
    if (s != KV_OK) {
        ck_assert_ptr_null(m);
        return s;
    }
    struct kv_cache_config cc = cache_cfg(&mc, 2, 4);
    s = test_cache_create(&c, ops, &cc, &cur_tp);
    if (s == KV_OK)
        s = kv_runner_create(&r, m, 2, 8, 1);
    if (s == KV_OK) {
        int32_t prompt[2 * 8], out[2 * 24];
        make_prompt(prompt, 16, mc.vocab_size, 4);
        struct kv_gen_params gp = {.batch = 2, .prompt_len = 8, .prompt = prompt,
                                   .new_tokens = 24, .n_threads = 1};
        s = kv_generate(m, c, &gp, out, NULL, NULL);
    }
    kv_runner_destroy(r);
    kv_cache_destroy(c);
    kv_model_destroy(m);
    return s;
}

START_TEST(test_alloc_failure)
{
    const struct kv_strategy_ops *ops = kv_strategy_at(_i / 2);
    int sticky = _i % 2;
    ck_assert_int_eq(kv_alloc_live(), 0);
    int64_t k = 1;
    for (;; k++) {
        kv_alloc_fail_at(k, sticky);
        enum kv_status s = life_cycle(ops);
        int64_t calls = kv_alloc_count();
        kv_alloc_fail_at(0, 0);
        ck_assert_msg(kv_alloc_live() == 0, "%s: fail at %ld: %ld allocations leaked",
                      ops->name, (long)k, (long)kv_alloc_live());
        if (calls < k) { /* the k-th allocation never happened: a clean run */
            ck_assert_int_eq(s, KV_OK);
            break;
        }
        ck_assert_msg(s == KV_ERR_NOMEM, "%s: fail at %ld gave %s", ops->name, (long)k,
                      kv_status_str(s));
        ck_assert_int_lt(k, 10000);
    }
    ck_assert_int_gt(k, 4); /* model, cache, runner and generation all allocate */
}
END_TEST

/* ------------------------------------------------------------------------ */

static Suite *model_suite(void)
{
    Suite *s = suite_create("model");
    const int n = kv_strategy_count();

    TCase *tc = tcase_create("decoder");
    tcase_add_loop_test(tc, test_forward_vs_naive, 0, 4);
    tcase_add_test(tc, test_weights);
    tcase_add_test(tc, test_default_model);
    tcase_add_test(tc, test_config_check);
    tcase_add_test(tc, test_probe_and_window);
    tcase_add_test(tc, test_mass_through_model);
    tcase_add_test(tc, test_decode_helpers);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);

    tc = tcase_create("conformance");
    tcase_add_loop_test(tc, test_conformance, 0, n);
    tcase_add_loop_test(tc, test_padding, 0, n);
    tcase_add_loop_test(tc, test_segments, 0, n);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);

    tc = tcase_create("counters");
    tcase_add_loop_test(tc, test_flops, 0, 4);
    tcase_add_test(tc, test_stats_accumulate);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_add_test(tc, test_forward_errors);
    tcase_add_test(tc, test_segments_errors);
    tcase_add_loop_test(tc, test_alloc_failure, 0, 2 * n);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    kv_test_register_paged(); /* the test-only paged strategies join the loops */
    SRunner *sr = srunner_create(model_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed < 125 ? failed : 125; /* the number of failures */
}
