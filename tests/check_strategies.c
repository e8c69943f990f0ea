/*
 * check_strategies.c - proves the cache strategies correct.
 *
 * The design decision: one conformance suite walks the registry, so a new
 * strategy is tested by registering it; what it checks follows from the
 * strategy's capability flags and its dtypes' error bounds, never from its
 * name. Two test-only strategies (tests/test_paged.h: a dynamic cache in
 * 4-token pages, one span per page or one paged span) are registered in
 * main() and pass the suite unchanged. It feeds random keys/values (token
 * by token, prefill then decode, uneven chunks; batch > 1; several layers
 * with different data) and after every update reads everything back through
 * the spans, honouring strides and dtypes, against the history the test
 * itself keeps: every position a query of the step needs must be visible
 * exactly once, in order, with the value that was written (bit-exact for
 * f32 spans, within half a quantization step of the ORIGINAL value for
 * quantized spans). Per-strategy suites then check what only that strategy
 * promises: closed-form resident and copied bytes, static's KV_ERR_FULL,
 * sliding's last-`window` contents, quantized's residual schedule. The
 * error-path suite fails every allocation in turn (kv_alloc_fail_at) and
 * checks that the status is KV_ERR_NOMEM, the cache is unchanged and
 * nothing leaks (kv_alloc_live); run it under ASan too.
 *
 * The test configurations set the parameters the test knows by name
 * (window, bits, group, residual, sinks, heavy). So the suite runs every
 * subject a second time at small sizes it derives from the parameter
 * table alone (test_conformance_small): every integer parameter with
 * scales_memory at the smallest value near 3 that the strategy's check
 * accepts, tokens fed far past it, readback, coverage, attention against
 * the scalar reference (over the history under the view's mask, or over
 * the keys it claims to keep), the attention mass handed back, memory.
 * Those checks return a verdict instead of aborting, so
 * test_conformance_small_catches can show them failing on three broken
 * copies of a test double (test-budget: the newest --budget tokens, a
 * parameter no other test names), which pass every check at its default.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/kv_attention.h"
#include "../kernels/kv_quant.h"
#include "../strategies/strategy.h"
#include "test_params.h"
#include "test_paged.h"

/*
 * A test configuration: the cache's shape and the strategy parameters of
 * the tests (window, bits, group, residual), each strategy taking the ones
 * its table has (tests/test_params.h) and the defaults for its others.
 */
struct conf {
    int32_t n_layers, batch, n_kv_heads, head_dim, max_len;
    int32_t window, bits, group, residual;
    int32_t sinks, heavy; /* 0: the table's default */
    int32_t dtype; /* --dtype of the float stores (0: f32) */
    int32_t layout; /* quantized --layout (0: token, 1: kivi) */
};

/*
 * The conformance suite's subjects: every registered strategy with its
 * defaults, then every preset whose parameters differ from those and from
 * the presets before it (quantized-int4, sinks-reindex), so a preset that
 * changes what the cache does is tested like a strategy.
 */
struct variant {
    const struct kv_strategy_ops *ops;
    const char *preset; /* NULL: the defaults */
    const char *params; /* k=v;k=v set last, or NULL */
};

/* Parameter sets a strategy's defaults and presets do not reach: per-layer
 * patterns mixing the evicting, lossy and exact strategies (their layers'
 * counts 1, 2 and 3 fit some of the configurations below; the others skip
 * them, as for presets). */
static const struct {
    const char *name, *params;
} extra_variants[] = {
    {"hybrid", "pattern=h2o:1:2"},
    {"hybrid", "pattern=sinks:1:4+h2o:2:3"},
    {"hybrid", "pattern=sinks-reindex:2:4+dynamic"},
    {"hybrid", "pattern=sliding:3*2+quantized:4:4:3"},
};

static int32_t variant_list(struct variant *out, int32_t max)
{
    int32_t n = 0;
    for (int32_t i = 0; i < kv_strategy_count(); i++) {
        const struct kv_strategy_ops *ops = kv_strategy_at(i);
        struct test_param_block base, pk, pj;
        /* (no ck_assert here: the suite is built from this list) */
        memset(&base, 0, sizeof base);
        kv_params_defaults(ops, base.b);
        if (n < max)
            out[n] = (struct variant){ops, NULL, NULL};
        n++;
        for (int32_t k = 0; k < ops->n_presets; k++) {
            pk = base;
            if (kv_params_parse(ops, pk.b, ops->presets[k].params) != KV_OK)
                abort(); /* kv_strategy_validate promises presets parse */
            int dup = ops->params_size == 0 || memcmp(pk.b, base.b, ops->params_size) == 0;
            for (int32_t j = 0; j < k && !dup; j++) {
                pj = base;
                if (kv_params_parse(ops, pj.b, ops->presets[j].params) != KV_OK)
                    abort();
                dup = memcmp(pk.b, pj.b, ops->params_size) == 0;
            }
            if (dup)
                continue;
            if (n < max)
                out[n] = (struct variant){ops, ops->presets[k].name, NULL};
            n++;
        }
    }
    for (size_t i = 0; i < sizeof extra_variants / sizeof extra_variants[0]; i++) {
        const struct kv_strategy_ops *ops = kv_strategy_find(extra_variants[i].name);
        if (ops == NULL)
            continue;
        if (n < max)
            out[n] = (struct variant){ops, NULL, extra_variants[i].params};
        n++;
    }
    return n;
}

#define MAX_VARIANTS 64
static int32_t n_variants(void)
{
    struct variant v[MAX_VARIANTS];
    const int32_t n = variant_list(v, MAX_VARIANTS);
    if (n > MAX_VARIANTS)
        abort(); /* raise MAX_VARIANTS */
    return n;
}

static struct variant variant_at(int32_t i)
{
    struct variant v[MAX_VARIANTS];
    const int32_t n = variant_list(v, MAX_VARIANTS);
    ck_assert_int_lt(i, n);
    return v[i];
}

static struct kv_cache_config cc_of(const struct conf *t)
{
    return (struct kv_cache_config){.n_layers = t->n_layers, .batch = t->batch,
                                    .n_kv_heads = t->n_kv_heads, .head_dim = t->head_dim,
                                    .max_len = t->max_len};
}

/* kv_cache_create with t's shape and parameters, then a preset's own (NULL:
 * none) (t NULL: a NULL config). */
static enum kv_status tcreate_preset(struct kv_cache **out, const struct kv_strategy_ops *ops,
                                     const char *preset, const char *extra,
                                     const struct conf *t)
{
    if (t == NULL)
        return kv_cache_create(out, ops, NULL, NULL);
    const struct kv_cache_config cc = cc_of(t);
    if (ops == NULL)
        return kv_cache_create(out, ops, &cc, NULL);
    const struct test_params tp = {.window = t->window, .bits = t->bits, .group = t->group,
                                   .residual = t->residual, .sinks = t->sinks,
                                   .heavy = t->heavy, .dtype = t->dtype, .layout = t->layout,
                                   .literal_zeros = 1};
    struct test_param_block blk;
    test_params_fill(ops, &blk, &tp);
    if (preset != NULL) {
        const struct kv_strategy_ops *po;
        ck_assert_int_eq(kv_strategy_lookup(preset, &po, NULL, 0), KV_OK);
        for (int32_t k = 0; k < ops->n_presets; k++)
            if (strcmp(ops->presets[k].name, preset) == 0)
                ck_assert_int_eq(kv_params_parse(ops, blk.b, ops->presets[k].params), KV_OK);
    }
    if (extra != NULL)
        ck_assert_int_eq(kv_params_parse(ops, blk.b, extra), KV_OK);
    return kv_cache_create(out, ops, &cc, blk.b);
}

static enum kv_status tcreate(struct kv_cache **out, const struct kv_strategy_ops *ops,
                              const struct conf *t)
{
    return tcreate_preset(out, ops, NULL, NULL, t);
}

static enum kv_status tcreate_v(struct kv_cache **out, struct variant v, const struct conf *t)
{
    return tcreate_preset(out, v.ops, v.preset, v.params, t);
}

/* 1 when a preset or extra variant cannot take configuration t (its own
 * values win: the test skips it there). */
static int variant_refuses(struct variant v, const struct conf *t)
{
    if (v.preset == NULL && v.params == NULL)
        return 0;
    struct kv_cache *c = NULL;
    const enum kv_status st = tcreate_v(&c, v, t);
    kv_cache_destroy(c);
    return st == KV_ERR_INVALID;
}

/* ------------------------------------------------------------------------ */
/* Tolerances                                                               */

/*
 * Quantized values: asymmetric rounding to the nearest of 2^bits levels is
 * off by at most half a step, step = (max - min) / (2^bits - 1) of the
 * group, in exact arithmetic. Float evaluation of the step, the division and
 * min + step*q adds a few ulps of the group's magnitude: QUANT_REL_SLACK of
 * the half step plus QUANT_ULP_SLACK ulps of max|x|.
 */
#define QUANT_REL_SLACK 1e-4f
#define QUANT_ULP_SLACK 8.0f

/*
 * Check logs a mark for every passing ck_assert (a write to its pipe), so
 * the per-element comparisons in the inner loops use this instead: silent
 * when it holds, a normal failure with the message when it does not.
 */
#define REQUIRE(cond, ...)                                                                   \
    do {                                                                                     \
        if (!(cond))                                                                         \
            ck_abort_msg(__VA_ARGS__);                                                       \
    } while (0)

/*
 * Attention over a strategy's spans against attention over the test's own
 * history, both through kv_attn_ref (double accumulation): the same keys
 * summed in a different span order, then rounded to float, differ by a few
 * float ulps of |out| <= 2 (outputs are convex combinations of values in
 * [-2, 2]).
 */
#define ATTN_REF_TOL 1e-5f
/*
 * The fast kernel (float accumulation, online softmax over tiles) against
 * the reference on the same spans: scores here are O(1) and at most 64 keys
 * are visible, so float rounding stays near 64 * 2^-24 relative; 1e-4 keeps
 * a margin while still catching any misread row or parameter.
 */
#define ATTN_FAST_TOL 1e-4f

/* Upper bound on allocations one failure-injection scenario makes. */
#define MAX_ALLOC_STEPS 2000

/* ------------------------------------------------------------------------ */
/* Random history the test keeps for itself                                 */

static uint64_t rng_state;

static float rng_uniform(void) /* in [-2, 2) */
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    uint64_t z = rng_state;
    z = (z ^ (z >> 33)) * 0xff51afd7ed558ccdULL;
    z ^= z >> 33;
    return (float)((double)(z >> 11) / 9007199254740992.0 * 4.0 - 2.0);
}

struct feed {
    struct conf cfg;
    int32_t t_max;
    float *k, *v;   /* (n_layers, batch, t_max, n_kv_heads, head_dim) history */
    float *ck, *cv; /* (batch, n, n_kv_heads, head_dim) the chunk being fed */
    float *deq;     /* (head_dim) scratch */
};

static size_t feed_row(const struct feed *f, int32_t l, int32_t b, int32_t p, int32_t h)
{
    const struct conf *c = &f->cfg;
    return ((((size_t)l * c->batch + b) * f->t_max + p) * c->n_kv_heads + h) * c->head_dim;
}

static void feed_init(struct feed *f, const struct conf *cfg, int32_t t_max,
                      uint64_t seed)
{
    f->cfg = *cfg;
    f->t_max = t_max;
    size_t n = (size_t)cfg->n_layers * cfg->batch * t_max * cfg->n_kv_heads * cfg->head_dim;
    size_t chunk = (size_t)cfg->batch * t_max * cfg->n_kv_heads * cfg->head_dim;
    f->k = malloc(n * sizeof(float));
    f->v = malloc(n * sizeof(float));
    f->ck = malloc(chunk * sizeof(float));
    f->cv = malloc(chunk * sizeof(float));
    f->deq = malloc((size_t)cfg->head_dim * sizeof(float));
    ck_assert(f->k && f->v && f->ck && f->cv && f->deq);
    rng_state = seed;
    for (size_t i = 0; i < n; i++) {
        f->k[i] = rng_uniform();
        f->v[i] = rng_uniform();
    }
    /* a few groups with all-equal values and one with a large outlier */
    for (int32_t d = 0; d < cfg->head_dim; d++) {
        f->k[feed_row(f, 0, 0, 1, 0) + d] = 0.75f;
        f->v[feed_row(f, 0, 0, 2, 0) + d] = -1.5f;
    }
    f->k[feed_row(f, 0, cfg->batch - 1, 3, 0)] = 1000.0f;
}

static void feed_free(struct feed *f)
{
    free(f->k);
    free(f->v);
    free(f->ck);
    free(f->cv);
    free(f->deq);
}

/* ck, cv (batch, n, n_kv_heads, head_dim) <- history of layer l, positions [p0, p0+n). */
static void feed_chunk(struct feed *f, int32_t l, int32_t p0, int32_t n)
{
    const struct conf *c = &f->cfg;
    const size_t tok = (size_t)c->n_kv_heads * c->head_dim;
    ck_assert_int_le(p0 + n, f->t_max);
    for (int32_t b = 0; b < c->batch; b++) {
        memcpy(f->ck + (size_t)b * n * tok, f->k + feed_row(f, l, b, p0, 0), n * tok * sizeof(float));
        memcpy(f->cv + (size_t)b * n * tok, f->v + feed_row(f, l, b, p0, 0), n * tok * sizeof(float));
    }
}

/* ------------------------------------------------------------------------ */
/* Reading a view back                                                      */

/* x (head_dim) <- row t of one side of span sp for (sequence b, kv head h),
 * addressed exactly as kernels/kv_attention.h lays spans out (contiguous or
 * paged, qparams per token or per channel) and converted by the dtype's
 * traits: the test's own reader, not the kernel's. */
static void read_side(float *x, const struct kv_span *sp, const struct kv_tensor *td,
                      int32_t b, int32_t h, int32_t t, int32_t d)
{
    const int32_t page = sp->page_tokens;
    const size_t off = (size_t)b * td->seq_stride + (size_t)h * td->head_stride;
    const size_t qoff = (size_t)b * td->qp_seq_stride + (size_t)h * td->qp_head_stride;
    const int32_t in = page ? t % page : t;
    const size_t pg = (size_t)b * td->table_stride + (size_t)(page ? t / page : 0); /* its table's entry */
    const char *row = (const char *)(page ? td->pages[pg] : td->data) + off +
                      (size_t)in * td->row_stride;
    const struct kv_type_traits *tr = &kv_type_traits[td->dtype];
    if (!tr->has_qparams) {
        tr->to_float_row(x, row, NULL, d, 1);
        return;
    }
    const int32_t qi = td->axis == KV_QAXIS_CHANNEL ? in / td->group : in;
    const struct kv_qparams *qp = (const struct kv_qparams *)(
        (const char *)(page ? td->qp_pages[pg] : (const void *)td->qp) + qoff +
        (size_t)qi * td->qp_row_stride);
    if (td->axis == KV_QAXIS_TOKEN)
        tr->to_float_row(x, row, qp, d, td->group);
    else
        kv_dequantize_row_channel(x, row, qp, td->dtype, d);
}

/*
 * |x' - x| within the dtype's bound (kv_type_traits: err_rel * |x| +
 * err_step * the range of x's group; see tolerances) for every element of
 * row t of one side. The group is the elements of the row that share a
 * qparams pair (per token) or the span's tokens of the same block of
 * `group` tokens in that channel (per channel); `hist` gives the original
 * value of (position, element).
 */
/* The first element of row t outside that bound (-1: none), its original
 * value and tolerance. */
static int32_t lossy_row_bad(const struct feed *f, const struct kv_span *sp,
                             const struct kv_tensor *td, int32_t l, int32_t b, int32_t h,
                             int32_t t, const float *got, int is_v, float *want_i, float *tol_i)
{
    const int32_t d = f->cfg.head_dim, pos = sp->pos0 + t;
    const struct kv_type_traits *tr = &kv_type_traits[td->dtype];
    const float *hist = is_v ? f->v : f->k;
    const float *want = hist + feed_row(f, l, b, pos, h);
    for (int32_t i = 0; i < d; i++) {
        float lo = want[i], hi = want[i], amax = 0.0f;
        if (!tr->has_qparams) {
            /* exact unless the type says otherwise */
        } else if (td->axis == KV_QAXIS_TOKEN) {
            const int32_t g0 = i - i % td->group;
            for (int32_t e = g0; e < g0 + td->group; e++) {
                lo = fminf(lo, want[e]);
                hi = fmaxf(hi, want[e]);
                amax = fmaxf(amax, fabsf(want[e]));
            }
        } else {
            const int32_t t0 = t - t % td->group;
            for (int32_t u = t0; u < t0 + td->group && u < sp->n_tokens; u++) {
                const float x = hist[feed_row(f, l, b, sp->pos0 + u, h) + i];
                lo = fminf(lo, x);
                hi = fmaxf(hi, x);
                amax = fmaxf(amax, fabsf(x));
            }
        }
        const float step = (float)tr->err_step * (hi - lo);
        const float tol = step * (1.0f + QUANT_REL_SLACK) + (float)tr->err_rel * fabsf(want[i]) +
                          (float)tr->err_abs + QUANT_ULP_SLACK * FLT_EPSILON * amax;
        if (!(fabsf(got[i] - want[i]) <= tol)) {
            *want_i = want[i];
            *tol_i = tol;
            return i;
        }
    }
    return -1;
}

static void check_lossy_row(const struct feed *f, const struct kv_span *sp,
                            const struct kv_tensor *td, int32_t l, int32_t b, int32_t h,
                            int32_t t, const float *got, int is_v, const char *what)
{
    float want = 0.0f, tol = 0.0f;
    const int32_t i = lossy_row_bad(f, sp, td, l, b, h, t, got, is_v, &want, &tol);
    REQUIRE(i < 0, "%s pos %d elem %d: got %g want %g (tol %g)", what, sp->pos0 + t, i,
            (double)got[i < 0 ? 0 : i], (double)want, (double)tol);
}

/*
 * A key served rotated to another position (KV_CAP_REPOSITIONS) keeps the
 * length of every RoPE pair (x_2i, x_2i+1); the rotation's float rounding
 * moves it by a few ulps (ROTATED_PAIR_TOL of the pair's length, plus an
 * absolute floor for near-zero pairs).
 */
#define ROTATED_PAIR_TOL 1e-5f
/* The first pair whose length moved (-1: none). */
static int32_t rotated_pair_bad(const float *got, const float *want, int32_t d)
{
    for (int32_t i = 0; i + 1 < d; i += 2) {
        const float a = hypotf(got[i], got[i + 1]), b = hypotf(want[i], want[i + 1]);
        if (!(fabsf(a - b) <= ROTATED_PAIR_TOL * (b + 1.0f)))
            return i / 2;
    }
    return -1;
}

static void check_rotated_row(const float *got, const float *want, int32_t d, int32_t l,
                              int32_t pos)
{
    const int32_t i = rotated_pair_bad(got, want, d);
    REQUIRE(i < 0, "layer %d pos %d: rotated key pair %d has length %g, written %g", l, pos, i,
            (double)hypotf(got[2 * (i < 0 ? 0 : i)], got[2 * (i < 0 ? 0 : i) + 1]),
            (double)hypotf(want[2 * (i < 0 ? 0 : i)], want[2 * (i < 0 ? 0 : i) + 1]));
}

struct seen {
    int32_t count; /* positions visible (of sequence 0, kv head 0) */
    int32_t lo;    /* smallest visible position */
    int32_t hi;    /* one past the largest */
    int32_t n_spans;
    int32_t n_quant; /* positions in lossy (quantized) spans */
};

/*
 * Reads layer l's view back and compares it with the history. For every
 * (sequence, kv head), every position of the view (pos0 + t, or its
 * position table) must be in [0, q_end) and appear once, spans without a
 * table in position order, and hold what was written: bit-exact for
 * lossless dtypes, within the dtype's error bound for lossy ones. Then what
 * the queries at [q_first, q_end) need must be there: every key the view's
 * own mask lets one of them see, or, for a cache that evicts by score (no
 * mask says what it dropped), at least the update's own positions
 * [keep_from, q_end). Returns what was seen in (0, 0).
 */
static struct seen check_view_q(struct feed *f, const struct kv_cache *c, int32_t l,
                                int32_t q_first, int32_t q_end, int32_t keep_from)
{
    const struct conf *cfg = &f->cfg;
    const int32_t nbh = cfg->batch * cfg->n_kv_heads;
    const size_t stride = (size_t)q_end + 1;
    const int repositions = kv_cache_has(c, KV_CAP_REPOSITIONS);
    struct kv_view view;
    struct seen s = {.lo = INT32_MAX, .hi = 0};
    char *mark = calloc((size_t)nbh * stride, 1);
    ck_assert(mark != NULL);
    ck_assert_int_eq(kv_cache_view(c, l, &view), KV_OK);
    s.n_spans = view.n_spans;
    ck_assert_int_ge(s.n_spans, 0);
    ck_assert_int_le(s.n_spans, c->max_spans);
    int32_t prev_end = 0;
    for (int32_t i = 0; i < s.n_spans; i++) {
        const struct kv_span *sp = &view.spans[i];
        ck_assert_int_ge(sp->n_tokens, 1);
        if (sp->pos == NULL) {
            ck_assert_int_ge(sp->pos0, prev_end); /* position order */
            ck_assert_int_le(sp->pos0 + sp->n_tokens, q_end);
            prev_end = sp->pos0 + sp->n_tokens;
        }
        for (int kv = 0; kv < 2; kv++) {
            const struct kv_tensor *td = kv ? &sp->v : &sp->k;
            ck_assert(kv_dtype_traits(td->dtype) != NULL);
            ck_assert(sp->page_tokens > 0 ? td->pages != NULL : td->data != NULL);
            if (kv_type_traits[td->dtype].has_qparams)
                ck_assert(sp->page_tokens > 0 ? td->qp_pages != NULL : td->qp != NULL);
        }
        const int lossy = kv_type_traits[sp->k.dtype].has_qparams ||
                          kv_type_traits[sp->v.dtype].has_qparams;
        if (lossy)
            s.n_quant += sp->n_tokens;
        /* only a strategy that says it is lossy may hold lossy rows */
        REQUIRE(!lossy || kv_cache_has(c, KV_CAP_LOSSY), "%s: lossy span without KV_CAP_LOSSY",
                c->ops->name);
        for (int32_t b = 0; b < cfg->batch; b++)
            for (int32_t h = 0; h < cfg->n_kv_heads; h++) {
                char *mk = mark + ((size_t)b * cfg->n_kv_heads + h) * stride;
                for (int32_t t = 0; t < sp->n_tokens; t++) {
                    const int64_t p = sp->pos == NULL
                                          ? (int64_t)sp->pos0 + t
                                          : sp->pos[(size_t)b * sp->pos_seq_stride +
                                                    (size_t)h * sp->pos_head_stride + (size_t)t];
                    REQUIRE(p >= 0 && p < q_end, "layer %d seq %d head %d: position %lld outside "
                            "[0, %d)", l, b, h, (long long)p, q_end);
                    REQUIRE(!mk[p], "layer %d seq %d head %d: position %lld visible twice", l, b, h,
                            (long long)p);
                    mk[p] = 1;
                    if (b == 0 && h == 0) {
                        s.count++;
                        s.lo = p < s.lo ? (int32_t)p : s.lo;
                        s.hi = p + 1 > s.hi ? (int32_t)p + 1 : s.hi;
                    }
                    for (int kv = 0; kv < 2; kv++) {
                        const struct kv_tensor *td = kv ? &sp->v : &sp->k;
                        const float *want = (kv ? f->v : f->k) + feed_row(f, l, b, (int32_t)p, h);
                        read_side(f->deq, sp, td, b, h, t, cfg->head_dim);
                        if (!kv_type_traits[td->dtype].has_qparams &&
                            kv_type_traits[td->dtype].err_rel == 0.0) {
                            if (kv == 0 && repositions &&
                                memcmp(f->deq, want, cfg->head_dim * sizeof(float)) != 0) {
                                check_rotated_row(f->deq, want, cfg->head_dim, l, (int32_t)p);
                                continue;
                            }
                            REQUIRE(memcmp(f->deq, want, cfg->head_dim * sizeof(float)) == 0,
                                    "layer %d seq %d head %d pos %lld: %s differs", l, b, h,
                                    (long long)p, kv ? "V" : "K");
                            continue;
                        }
                        ck_assert_ptr_null(sp->pos); /* lossy rows: position order */
                        check_lossy_row(f, sp, td, l, b, h, t, f->deq, kv, kv ? "V" : "K");
                    }
                }
            }
    }
    /* what the queries need */
    const int scored = kv_cache_has(c, KV_CAP_SCORE_EVICTS);
    for (int32_t bh = 0; bh < nbh && q_end > 0; bh++)
        for (int32_t k = 0; k < q_end; k++) {
            const int32_t qp = k > q_first ? k : q_first;
            const int need = scored ? k >= keep_from
                                    : kv_attn_key_visible(&view.mask, 0, qp, k);
            REQUIRE(!need || mark[(size_t)bh * stride + (size_t)k], "%s layer %d (b,h) %d: key %d "
                    "needed by the queries [%d, %d) is missing", c->ops->name, l, bh, k, q_first,
                    q_end);
        }
    free(mark);
    if (s.count == 0)
        s.lo = 0;
    return s;
}

/*
 * What a strategy may forget: a strategy without KV_CAP_EVICTS holds every
 * position of [0, q_end); one with it may drop a position only if the mask
 * its view carries hides it from every query of the step, [q_first, q_end)
 * (so attention over the view is exact under that mask), or, evicting by
 * score (KV_CAP_SCORE_EVICTS: no mask says what it dropped), any position
 * but the step's own [q_first, q_end). Every (sequence, kv head) on its own
 * (a position table may differ between them).
 */
static void check_coverage(const struct kv_cache *c, int32_t l, int32_t q_first, int32_t q_end)
{
    struct kv_view view;
    const int32_t nbh = c->cfg.batch * c->cfg.n_kv_heads;
    const int scored = kv_cache_has(c, KV_CAP_SCORE_EVICTS);
    char *held = calloc((size_t)q_end + 1, 1);
    ck_assert(held != NULL);
    ck_assert_int_eq(kv_cache_view(c, l, &view), KV_OK);
    for (int32_t bh = 0; bh < nbh; bh++) {
        const int32_t b = bh / c->cfg.n_kv_heads, h = bh % c->cfg.n_kv_heads;
        memset(held, 0, (size_t)q_end + 1);
        for (int32_t i = 0; i < view.n_spans; i++)
            for (int32_t t = 0; t < view.spans[i].n_tokens; t++)
                held[kv_span_pos(&view.spans[i], b, h, t)] = 1; /* in range: check_view_q */
        for (int32_t p = 0; p < q_end; p++) {
            if (held[p])
                continue;
            REQUIRE(kv_cache_has(c, KV_CAP_EVICTS), "%s: layer %d lost position %d without "
                    "KV_CAP_EVICTS", c->ops->name, l, p);
            REQUIRE(!scored || p < q_first, "%s: layer %d (b,h) %d evicted position %d of the "
                    "step itself", c->ops->name, l, bh, p);
            for (int32_t q = q_first; q < q_end && !scored; q++)
                REQUIRE(!kv_attn_key_visible(&view.mask, 0, q, p), "%s: layer %d evicted position "
                        "%d that the query at %d still sees", c->ops->name, l, p, q);
        }
    }
    free(held);
}

/* check_view_q for the queries of a decode step at q_end - 1. */
static struct seen check_view(struct feed *f, const struct kv_cache *c, int32_t l, int32_t q_end)
{
    return check_view_q(f, c, l, q_end > 0 ? q_end - 1 : 0, q_end, q_end > 0 ? q_end - 1 : 0);
}

/* The number of spans of layer l's view (asserting it can be taken). */
static int32_t n_view(const struct kv_cache *c, int32_t l)
{
    struct kv_view v;
    ck_assert_int_eq(kv_cache_view(c, l, &v), KV_OK);
    return v.n_spans;
}

/* ------------------------------------------------------------------------ */
/* Feeding                                                                  */

/*
 * One model step: positions [len, len+n) for every layer in order (for a
 * strategy without history, the whole prefix [0, len+n) at pos0 0). After
 * each layer's update its view is read back (check_view_q); queries of the
 * step are at [len, len+n) (all of [0, len+n) without history), and every
 * key one of them may see under the layer's mask must be visible (an exact
 * cache: exactly [0, len+n)), or, for a cache that evicts by score, at
 * least the step's own positions. Returns the first failing status (then
 * only layer 0 may have failed).
 */
static enum kv_status feed_step(struct feed *f, struct kv_cache *c, int32_t len, int32_t n)
{
    const int hist = kv_cache_has(c, KV_CAP_KEEPS_HISTORY);
    const int evicts = kv_cache_has(c, KV_CAP_EVICTS);
    const int32_t q_end = len + n;
    const int32_t q_first = hist ? len : 0;
    for (int32_t l = 0; l < f->cfg.n_layers; l++) {
        const int32_t p0 = hist ? len : 0, cnt = hist ? n : q_end;
        feed_chunk(f, l, p0, cnt);
        const size_t copied = kv_cache_copied_bytes(c);
        enum kv_status st = kv_cache_update(c, l, f->ck, f->cv, cnt, p0);
        if (st != KV_OK) {
            ck_assert_msg(l == 0, "layer %d refused what layer 0 took: %s", l, kv_status_str(st));
            return st;
        }
        ck_assert_uint_ge(kv_cache_copied_bytes(c), copied);
        ck_assert_int_eq(kv_cache_seq_len(c, l), hist ? q_end : 0);
        struct seen s = check_view_q(f, c, l, q_first, q_end, q_first);
        ck_assert_int_eq(s.hi, q_end);
        if (!evicts)
            ck_assert_int_eq(s.count, q_end);
        check_coverage(c, l, q_first, q_end);
    }
    return KV_OK;
}

/*
 * Runs a schedule of update sizes. A strategy without KV_CAP_CHUNKED_APPEND
 * may refuse a multi-token update into a non-empty cache (KV_ERR_INVALID);
 * the cache must then be unchanged, and the chunk is fed one token at a
 * time instead. One with the flag must take every update.
 */
static void run_schedule(struct feed *f, struct kv_cache *c, const int32_t *sched, int32_t n_sched)
{
    int32_t len = 0;
    for (int32_t i = 0; i < n_sched; i++) {
        const int32_t n = sched[i];
        const size_t copied = kv_cache_copied_bytes(c);
        enum kv_status st = feed_step(f, c, len, n);
        if (st == KV_ERR_INVALID && !kv_cache_has(c, KV_CAP_CHUNKED_APPEND) && len > 0 && n > 1) {
            ck_assert_int_eq(kv_cache_seq_len(c, 0), len);
            ck_assert_uint_eq(kv_cache_copied_bytes(c), copied);
            for (int32_t j = 0; j < n; j++)
                ck_assert_int_eq(feed_step(f, c, len + j, 1), KV_OK);
        } else {
            ck_assert_msg(st == KV_OK, "%s: update of %d at %d: %s", c->ops->name, n, len,
                          kv_status_str(st));
        }
        len += n;
    }
}

static int32_t sched_total(const int32_t *sched, int32_t n)
{
    int32_t t = 0;
    for (int32_t i = 0; i < n; i++)
        t += sched[i];
    return t;
}

/* ------------------------------------------------------------------------ */
/* Configurations and schedules                                             */

static const struct conf conf_cfgs[] = {
    /* layers batch heads head_dim max_len window bits group residual sinks heavy */
    {.n_layers = 2, .batch = 3, .n_kv_heads = 2, .head_dim = 16, .max_len = 64,
     .window = 5, .bits = 8, .group = 8, .residual = 4, .sinks = 2, .heavy = 3},
    {.n_layers = 1, .batch = 1, .n_kv_heads = 1, .head_dim = 32, .max_len = 64,
     .window = 1, .bits = 4, .group = 32, .residual = 1, .sinks = 1, .heavy = 1},
    {.n_layers = 3, .batch = 2, .n_kv_heads = 3, .head_dim = 8, .max_len = 64,
     .window = 16, .bits = 4, .group = 4, .residual = 7, .sinks = 3, .heavy = 5},
    {.n_layers = 1, .batch = 2, .n_kv_heads = 2, .head_dim = 12, .max_len = 50,
     .window = 9, .bits = 8, .group = 3, .residual = 32, .sinks = 9, .heavy = 7},
    /* 16-bit rows for the strategies with --dtype (the others ignore it) */
    {.n_layers = 2, .batch = 3, .n_kv_heads = 2, .head_dim = 16, .max_len = 64,
     .window = 5, .bits = 8, .group = 8, .residual = 4, .dtype = KV_DTYPE_F16},
    {.n_layers = 3, .batch = 2, .n_kv_heads = 3, .head_dim = 8, .max_len = 64,
     .window = 16, .bits = 4, .group = 4, .residual = 7, .dtype = KV_DTYPE_BF16},
    /* int2, and the kivi layout (keys per channel over blocks of `group`) */
    {.n_layers = 2, .batch = 2, .n_kv_heads = 2, .head_dim = 16, .max_len = 64,
     .window = 7, .bits = 2, .group = 8, .residual = 5},
    {.n_layers = 2, .batch = 3, .n_kv_heads = 2, .head_dim = 8, .max_len = 64,
     .window = 5, .bits = 2, .group = 4, .residual = 7, .layout = 1},
    {.n_layers = 1, .batch = 2, .n_kv_heads = 1, .head_dim = 32, .max_len = 64,
     .window = 3, .bits = 4, .group = 16, .residual = 16, .layout = 1, .sinks = 2},
};
#define N_CONF_CFGS ((int32_t)(sizeof conf_cfgs / sizeof conf_cfgs[0]))

static const int32_t sched_tokens[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                       1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                       1, 1};
static const int32_t sched_prefill[] = {13, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                        1, 1};
static const int32_t sched_long_prefill[] = {40, 1, 1, 1, 1, 1, 1, 1, 1, 1};
static const int32_t sched_chunks[] = {3, 5, 1, 7, 2, 1, 1, 11, 4, 1, 6, 2};

struct sched {
    const char *name;
    const int32_t *sizes;
    int32_t n;
};
#define SCHED(a) {#a, a, (int32_t)(sizeof a / sizeof a[0])}
static const struct sched scheds[] = {
    SCHED(sched_tokens), SCHED(sched_prefill), SCHED(sched_long_prefill), SCHED(sched_chunks)};
#define N_SCHEDS ((int32_t)(sizeof scheds / sizeof scheds[0]))

/* ------------------------------------------------------------------------ */
/* Conformance suite: every registered strategy                             */

/* _i indexes strategy x config. */
START_TEST(test_conformance_readback)
{
    const struct variant var = variant_at(_i / N_CONF_CFGS);
    const struct kv_strategy_ops *ops = var.ops;
    const struct conf *cfg = &conf_cfgs[_i % N_CONF_CFGS];
    ck_assert_ptr_nonnull(ops);
    const int64_t live0 = kv_alloc_live();
    struct kv_cache *probe = NULL;
    const enum kv_status made = tcreate_v(&probe, var, cfg);
    kv_cache_destroy(probe);
    /* a preset's own values win over the configuration's: one that cannot
     * take this configuration (int4 with an odd group, a pattern whose layers
     * do not divide these) skips it */
    if ((var.preset != NULL || var.params != NULL) && made == KV_ERR_INVALID)
        return;
    ck_assert_int_eq(made, KV_OK);
    for (int32_t s = 0; s < N_SCHEDS; s++) {
        const int32_t total = sched_total(scheds[s].sizes, scheds[s].n);
        struct feed f;
        feed_init(&f, cfg, total, 1000 + (uint64_t)_i * 17 + (uint64_t)s);
        struct kv_cache *c = NULL;
        ck_assert_int_eq(tcreate_v(&c, var, cfg), KV_OK);
        ck_assert_ptr_nonnull(c);
        for (int32_t l = 0; l < cfg->n_layers; l++) {
            ck_assert_int_eq(kv_cache_seq_len(c, l), 0);
            ck_assert_int_eq(n_view(c, l), 0);
        }
        ck_assert_uint_eq(kv_cache_copied_bytes(c), 0);
        run_schedule(&f, c, scheds[s].sizes, scheds[s].n);
        kv_cache_destroy(c);
        feed_free(&f);
    }
    ck_assert_int_eq(kv_alloc_live(), live0);
}
END_TEST

/* reset forgets everything and the cache behaves like a new one. */
START_TEST(test_conformance_reset)
{
    const struct variant var = variant_at(_i);
    const struct kv_strategy_ops *ops = var.ops;
    const struct conf *cfg = &conf_cfgs[0];
    if (variant_refuses(var, cfg))
        return;
    const int64_t live0 = kv_alloc_live();
    struct kv_cache *c = NULL, *fresh = NULL;
    ck_assert_int_eq(tcreate_v(&c, var, cfg), KV_OK);
    ck_assert_int_eq(tcreate_v(&fresh, var, cfg), KV_OK);
    struct feed f;
    const int32_t n_sched = (int32_t)(sizeof sched_prefill / sizeof sched_prefill[0]);
    const int32_t total = sched_total(sched_prefill, n_sched);
    feed_init(&f, cfg, total, 77);
    run_schedule(&f, c, sched_prefill, n_sched);
    ck_assert_int_eq(kv_cache_reset(c), KV_OK);
    for (int32_t l = 0; l < cfg->n_layers; l++) {
        ck_assert_int_eq(kv_cache_seq_len(c, l), 0);
        if ((ops->caps & KV_CAP_KEEPS_HISTORY) != 0)
            ck_assert_int_eq(n_view(c, l), 0);
    }
    ck_assert_uint_eq(kv_cache_copied_bytes(c), 0);
    ck_assert_uint_eq(kv_cache_resident_bytes(c), kv_cache_resident_bytes(fresh));
    /* new data after the reset: nothing of the old data may show through */
    feed_free(&f);
    feed_init(&f, cfg, total, 78);
    run_schedule(&f, c, sched_prefill, n_sched);
    run_schedule(&f, fresh, sched_prefill, n_sched);
    ck_assert_uint_eq(kv_cache_copied_bytes(c), kv_cache_copied_bytes(fresh));
    ck_assert_uint_eq(kv_cache_resident_bytes(c), kv_cache_resident_bytes(fresh));
    feed_free(&f);
    kv_cache_destroy(c);
    kv_cache_destroy(fresh);
    ck_assert_int_eq(kv_alloc_live(), live0);
}
END_TEST

/* Arguments the wrapper must refuse for every strategy, cache unchanged. */
START_TEST(test_conformance_bad_updates)
{
    const struct variant var = variant_at(_i);
    const struct kv_strategy_ops *ops = var.ops;
    const struct conf *cfg = &conf_cfgs[0];
    if (variant_refuses(var, cfg))
        return;
    struct kv_cache *c = NULL;
    struct feed f;
    feed_init(&f, cfg, 8, 5);
    ck_assert_int_eq(tcreate_v(&c, var, cfg), KV_OK);
    ck_assert_int_eq(feed_step(&f, c, 0, 1), KV_OK);
    const size_t copied = kv_cache_copied_bytes(c);
    const int32_t len = kv_cache_seq_len(c, 0);
    const int32_t p0 = (ops->caps & KV_CAP_KEEPS_HISTORY) != 0 ? 1 : 0;
    /* a separate buffer: `none` still points into f.ck */
    float *junk = calloc(2 * (size_t)cfg->batch * cfg->n_kv_heads * cfg->head_dim, sizeof(float));
    ck_assert_ptr_nonnull(junk);
    ck_assert_int_eq(kv_cache_update(c, -1, junk, junk, 1, p0), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_update(c, cfg->n_layers, junk, junk, 1, p0), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_update(c, 0, junk, junk, 0, p0), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_update(c, 0, junk, junk, -3, p0), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_update(c, 0, junk, junk, 1, -1), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_update(c, 0, NULL, junk, 1, p0), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_update(c, 0, junk, NULL, 1, p0), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_update(c, 0, junk, junk, 2, INT32_MAX - 1), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_update(NULL, 0, junk, junk, 1, p0), KV_ERR_INVALID);
    if ((ops->caps & KV_CAP_KEEPS_HISTORY) != 0) { /* pos0 must be the layer's length */
        ck_assert_int_eq(kv_cache_update(c, 0, junk, junk, 1, 0), KV_ERR_INVALID);
        ck_assert_int_eq(kv_cache_update(c, 0, junk, junk, 1, 2), KV_ERR_INVALID);
    }
    ck_assert_int_eq(kv_cache_seq_len(c, 0), len);
    ck_assert_uint_eq(kv_cache_copied_bytes(c), copied);
    /* (the last layer fed: `none` reads f.ck, which holds that layer) */
    struct seen s = check_view(&f, c, cfg->n_layers - 1, 1);
    ck_assert_int_eq(s.count, 1);
    /* out-of-range queries answer harmlessly */
    struct kv_view vw;
    ck_assert_int_eq(kv_cache_view(c, -1, &vw), KV_ERR_INVALID);
    ck_assert_int_eq(vw.n_spans, 0);
    ck_assert_int_eq(kv_cache_view(c, cfg->n_layers, &vw), KV_ERR_INVALID);
    ck_assert_int_eq(vw.n_spans, 0);
    ck_assert_int_eq(kv_cache_view(NULL, 0, &vw), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_view(c, 0, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_seq_len(c, cfg->n_layers), 0);
    kv_cache_destroy(c);
    kv_cache_destroy(NULL);
    free(junk);
    feed_free(&f);
}
END_TEST

/* Configs every strategy must refuse, before allocating anything. */
START_TEST(test_conformance_bad_configs)
{
    const struct variant var = variant_at(_i);
    const struct conf good = conf_cfgs[0];
    const int64_t live0 = kv_alloc_live();
    struct {
        struct conf cfg;
        enum kv_status want;
    } cases[8];
    int32_t n = 0;
    for (int32_t i = 0; i < 8; i++)
        cases[i].cfg = good;
    cases[n].cfg.n_layers = 0, cases[n++].want = KV_ERR_INVALID;
    cases[n].cfg.batch = 0, cases[n++].want = KV_ERR_INVALID;
    cases[n].cfg.n_kv_heads = -2, cases[n++].want = KV_ERR_INVALID;
    cases[n].cfg.head_dim = 0, cases[n++].want = KV_ERR_INVALID;
    cases[n].cfg.max_len = -1, cases[n++].want = KV_ERR_INVALID;
    /* 2 * 2^31 * 2^31 * 2^31 * 4 bytes per token overflows 64-bit size_t */
    cases[n].cfg.batch = INT32_MAX, cases[n].cfg.n_kv_heads = INT32_MAX;
    cases[n].cfg.head_dim = INT32_MAX, cases[n].cfg.group = 1, cases[n++].want = KV_ERR_OVERFLOW;
    cases[n].cfg.n_layers = INT32_MAX, cases[n].cfg.batch = INT32_MAX;
    cases[n].cfg.n_kv_heads = INT32_MAX, cases[n++].want = KV_ERR_OVERFLOW;
    for (int32_t i = 0; i < n; i++) {
        struct kv_cache *c = (struct kv_cache *)&cases[i]; /* must be overwritten */
        ck_assert_int_eq(tcreate_v(&c, var, &cases[i].cfg), cases[i].want);
        ck_assert_ptr_null(c);
    }
    struct kv_cache *c = NULL;
    ck_assert_int_eq(tcreate_v(&c, var, NULL), KV_ERR_INVALID);
    ck_assert_int_eq(tcreate(&c, NULL, &good), KV_ERR_INVALID);
    ck_assert_int_eq(tcreate_v(NULL, var, &good), KV_ERR_INVALID);
    ck_assert_int_eq(kv_alloc_live(), live0);
}
END_TEST

/*
 * Allocation failure at every k: create and a schedule with growth; the
 * k-th allocation and (sticky) all after it fail. Each failure must be
 * KV_ERR_NOMEM with the cache unchanged, and destroy must free everything.
 */
START_TEST(test_conformance_alloc_failure)
{
    const struct variant var = variant_at(_i / 2);
    const struct kv_strategy_ops *ops = var.ops;
    const int sticky = _i % 2;
    const struct conf *cfg = &conf_cfgs[0];
    if (variant_refuses(var, cfg))
        return;
    static const int32_t sched[] = {9, 1, 1, 1, 1, 1, 1, 1, 3, 1, 20, 1};
    const int32_t n_sched = (int32_t)(sizeof sched / sizeof sched[0]);
    struct feed f;
    feed_init(&f, cfg, sched_total(sched, n_sched), 9);
    const int64_t live0 = kv_alloc_live();
    int completed = 0;
    int32_t failures = 0;
    for (int64_t k = 1; k <= MAX_ALLOC_STEPS && !completed; k++) {
        kv_alloc_fail_at(k, sticky);
        struct kv_cache *c = NULL;
        enum kv_status st = tcreate_v(&c, var, cfg);
        if (st != KV_OK) {
            ck_assert_int_eq(st, KV_ERR_NOMEM);
            ck_assert_ptr_null(c);
            ck_assert_int_eq(kv_alloc_live(), live0);
            failures++;
            if (sticky)
                continue;
            ck_assert_int_eq(tcreate_v(&c, var, cfg), KV_OK); /* one-shot: retry */
        }
        int32_t len = 0;
        int gave_up = 0;
        for (int32_t i = 0; i < n_sched && !gave_up; i++) {
            const int32_t n = sched[i];
            if (n > 1 && len > 0 && !kv_cache_has(c, KV_CAP_CHUNKED_APPEND))
                continue; /* refused by design without the flag; tested elsewhere */
            for (int32_t l = 0; l < cfg->n_layers; l++) {
                const int hist = (ops->caps & KV_CAP_KEEPS_HISTORY) != 0;
                const int32_t p0 = hist ? len : 0, cnt = hist ? n : len + n;
                const size_t copied = kv_cache_copied_bytes(c);
                const size_t resident = kv_cache_resident_bytes(c);
                feed_chunk(&f, l, p0, cnt);
                st = kv_cache_update(c, l, f.ck, f.cv, cnt, p0);
                if (st != KV_OK) {
                    ck_assert_int_eq(st, KV_ERR_NOMEM);
                    failures++;
                    ck_assert_int_eq(kv_cache_seq_len(c, l), hist ? len : 0);
                    ck_assert_uint_eq(kv_cache_copied_bytes(c), copied);
                    ck_assert_uint_eq(kv_cache_resident_bytes(c), resident);
                    if (hist && !kv_cache_has(c, KV_CAP_EVICTS)) {
                        struct seen s = check_view(&f, c, l, len);
                        ck_assert_int_eq(s.count, len);
                    }
                    if (sticky) {
                        gave_up = 1;
                        break;
                    }
                    st = kv_cache_update(c, l, f.ck, f.cv, cnt, p0); /* one-shot: retry */
                    ck_assert_int_eq(st, KV_OK);
                }
                struct seen s = check_view(&f, c, l, len + n);
                ck_assert_int_eq(s.hi, len + n);
            }
            len += n;
        }
        completed = !gave_up && kv_alloc_count() < k;
        kv_cache_destroy(c);
        ck_assert_int_eq(kv_alloc_live(), live0);
    }
    kv_alloc_fail_at(0, 0);
    ck_assert_msg(completed, "%s: scenario never completed", ops->name);
    ck_assert_int_ge(failures, 1); /* every strategy allocates at least in create */
    feed_free(&f);
}
END_TEST

/*
 * The spans as the attention kernel reads them: for every step of a
 * prefill + decode schedule, kv_attn_check accepts the view; the fast kernel
 * agrees with the reference on it; and where the view is all f32, the
 * reference over the view equals the reference over the full history with
 * the strategy's mask window. Uses the last layer (no outlier values), GQA
 * with 2 query heads per kv head.
 */
START_TEST(test_conformance_attention)
{
    static const int32_t dts[3] = {KV_DTYPE_F32, KV_DTYPE_F16, KV_DTYPE_BF16};
    const struct variant var = variant_at(_i / 3);
    const struct kv_strategy_ops *ops = var.ops;
    struct conf cfg_dt = conf_cfgs[0]; /* f32, then --dtype f16 and bf16 */
    cfg_dt.dtype = dts[_i % 3];
    const struct conf *cfg = &cfg_dt;
    if (variant_refuses(var, cfg))
        return;
    static const int32_t sched[] = {9, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    const int32_t n_sched = (int32_t)(sizeof sched / sizeof sched[0]);
    const int32_t t_max = sched_total(sched, n_sched), l = cfg->n_layers - 1;
    const int32_t n_heads = 2 * cfg->n_kv_heads, hd = cfg->head_dim;
    const size_t q_floats = (size_t)cfg->batch * t_max * n_heads * hd;
    float *q = malloc(q_floats * sizeof(float));
    float *out = malloc(q_floats * sizeof(float));
    float *want = malloc(q_floats * sizeof(float));
    ck_assert(q && out && want);
    for (size_t i = 0; i < q_floats; i++)
        q[i] = rng_uniform();
    struct feed f;
    feed_init(&f, cfg, t_max, 40);
    struct kv_cache *c = NULL;
    ck_assert_int_eq(tcreate_v(&c, var, cfg), KV_OK);
    int32_t len = 0;
    for (int32_t i = 0; i < n_sched; i++) {
        const int32_t n = sched[i];
        ck_assert_int_eq(feed_step(&f, c, len, n), KV_OK);
        /* the last layer's view is still valid: f.ck holds that layer */
        struct kv_view view;
        ck_assert_int_eq(kv_cache_view(c, l, &view), KV_OK);
        struct kv_attn_params p = {
            .batch = cfg->batch, .n_q = (ops->caps & KV_CAP_KEEPS_HISTORY) != 0 ? n : len + n,
            .n_heads = n_heads, .n_kv_heads = cfg->n_kv_heads, .head_dim = hd,
            .q_pos0 = (ops->caps & KV_CAP_KEEPS_HISTORY) != 0 ? len : 0, .scale = 1.0f / sqrtf((float)hd),
            .n_threads = 1};
        const size_t n_out = (size_t)cfg->batch * p.n_q * n_heads * hd;
        ck_assert_int_eq(kv_attn_check(&p, &view), KV_OK);
        ck_assert_int_eq(kv_attn_ref(want, q, &p, &view), KV_OK);
        const size_t ws_bytes = (kv_attn_workspace_bytes(&p) + 63) / 64 * 64;
        void *ws = aligned_alloc(64, ws_bytes ? ws_bytes : 64);
        ck_assert_ptr_nonnull(ws);
        ck_assert_int_eq(kv_attn(out, q, &p, &view, ws, ws_bytes), KV_OK);
        free(ws);
        for (size_t j = 0; j < n_out; j++)
            REQUIRE(fabsf(out[j] - want[j]) <= ATTN_FAST_TOL, "%s step %d: fast %g ref %g",
                    ops->name, i, (double)out[j], (double)want[j]);
        int all_f32 = 1;
        for (int32_t j = 0; j < view.n_spans; j++)
            all_f32 &= view.spans[j].k.dtype == KV_DTYPE_F32 &&
                       view.spans[j].v.dtype == KV_DTYPE_F32;
        /* the whole history of layer l, the model's layout: the same result
         * under the view's mask, unless the cache evicts by score (then no
         * mask says what it dropped: h2o's own tests) */
        if (all_f32 && !kv_cache_has(c, KV_CAP_SCORE_EVICTS) &&
            !kv_cache_has(c, KV_CAP_REPOSITIONS)) {
            const size_t row = (size_t)cfg->n_kv_heads * hd * sizeof(float);
            const struct kv_tensor side = {.dtype = KV_DTYPE_F32, .row_stride = row,
                                           .head_stride = (size_t)hd * sizeof(float),
                                           .seq_stride = (size_t)t_max * row};
            struct kv_span full = {.k = side, .v = side, .n_tokens = len + n, .pos0 = 0};
            full.k.data = f.k + feed_row(&f, l, 0, 0, 0);
            full.v.data = f.v + feed_row(&f, l, 0, 0, 0);
            const struct kv_view fv = {.spans = &full, .n_spans = 1, .mask = view.mask};
            ck_assert_int_eq(kv_attn_ref(out, q, &p, &fv), KV_OK);
            for (size_t j = 0; j < n_out; j++)
                REQUIRE(fabsf(out[j] - want[j]) <= ATTN_REF_TOL, "%s step %d: view %g full %g",
                        ops->name, i, (double)want[j], (double)out[j]);
        }
        len += n;
    }
    kv_cache_destroy(c);
    feed_free(&f);
    free(q);
    free(out);
    free(want);
}
END_TEST

/*
 * Every view states the shape of the cache behind it (batch, kv heads,
 * head_dim, each layer, and the batch again after a reorder), so the kernel
 * refuses params asking for one sequence or kv head more than the storage
 * holds (KV_ERR_INVALID) instead of reading past it.
 */
START_TEST(test_conformance_view_shape)
{
    const struct variant var = variant_at(_i);
    const struct conf *cfg = &conf_cfgs[0];
    if (variant_refuses(var, cfg))
        return;
    struct feed f;
    feed_init(&f, cfg, 8, 41);
    struct kv_cache *c = NULL;
    ck_assert_int_eq(tcreate_v(&c, var, cfg), KV_OK);
    ck_assert_int_eq(feed_step(&f, c, 0, 4), KV_OK);
    for (int32_t l = 0; l < cfg->n_layers; l++) {
        struct kv_view v;
        ck_assert_int_eq(kv_cache_view(c, l, &v), KV_OK);
        REQUIRE(v.batch == cfg->batch && v.n_kv_heads == cfg->n_kv_heads &&
                    v.head_dim == cfg->head_dim,
                "%s layer %d: view states %d x %d x %d, the cache is %d x %d x %d",
                var.ops->name, l, v.batch, v.n_kv_heads, v.head_dim, cfg->batch,
                cfg->n_kv_heads, cfg->head_dim);
        const int hist = kv_cache_has(c, KV_CAP_KEEPS_HISTORY);
        const struct kv_attn_params good = {
            .batch = cfg->batch, .n_q = hist ? 1 : 4, .n_heads = 2 * cfg->n_kv_heads,
            .n_kv_heads = cfg->n_kv_heads, .head_dim = cfg->head_dim, .q_pos0 = hist ? 3 : 0,
            .scale = 0.25f, .n_threads = 1};
        ck_assert_int_eq(kv_attn_check(&good, &v), KV_OK);
        struct kv_attn_params p = good;
        p.batch++;
        p.n_kv_heads++;
        p.n_heads = 2 * p.n_kv_heads;
        ck_assert_int_eq(kv_attn_check(&p, &v), KV_ERR_INVALID);
        ck_assert_int_eq(kv_attn_ref(NULL, NULL, &p, &v), KV_ERR_INVALID);
        p = good;
        p.batch++;
        ck_assert_int_eq(kv_attn_check(&p, &v), KV_ERR_INVALID);
    }
    if (kv_cache_has(c, KV_CAP_REORDER)) {
        const int32_t src[1] = {cfg->batch - 1};
        ck_assert_int_eq(kv_cache_reorder(c, src, 1), KV_OK);
        struct kv_view v;
        ck_assert_int_eq(kv_cache_view(c, 0, &v), KV_OK);
        REQUIRE(v.batch == 1, "%s: after a reorder to one sequence the view states %d",
                var.ops->name, v.batch);
    }
    kv_cache_destroy(c);
    feed_free(&f);
}
END_TEST

/* The table: complete, self-describing, parameters that round-trip through
 * their text form and refuse what their range refuses, presets that
 * resolve and pass the strategy's own check on a shape they fit. */
START_TEST(test_conformance_table)
{
    const struct variant var = variant_at(_i);
    const struct kv_strategy_ops *ops = var.ops;
    const struct kv_cache_config cc = cc_of(&conf_cfgs[0]);
    ck_assert_int_eq(kv_strategy_validate(ops), KV_OK);
    struct test_param_block a, b;
    test_params_fill(ops, &a, NULL);
    char txt[512], line[512];
    ck_assert_int_gt(kv_params_format(ops, a.b, txt, sizeof txt), 0);
    ck_assert_int_lt(strlen(txt), sizeof txt - 1);
    memset(&b, 0xA5, sizeof b);
    kv_params_defaults(ops, b.b);
    ck_assert_int_eq(kv_params_parse(ops, b.b, txt), KV_OK);
    ck_assert(memcmp(a.b, b.b, ops->params_size) == 0);
    for (int32_t k = 0; k < ops->n_params; k++) {
        const struct kv_param *p = &ops->params[k];
        ck_assert_int_eq(kv_param_find(ops, p->name), k);
        if (p->type == KV_PARAM_TEXT) { /* its default round-trips; no number is one */
            ck_assert_int_eq(kv_params_set_text(ops, b.b, p->name, p->def_text), KV_OK);
            ck_assert_str_eq(kv_params_get_text(ops, b.b, k), p->def_text);
            ck_assert_int_eq(kv_params_set(ops, b.b, p->name, 1), KV_ERR_INVALID);
            ck_assert_int_eq(kv_params_set_text(ops, b.b, p->name, "a b"), KV_ERR_INVALID);
            ck_assert_int_eq(kv_params_set_text(ops, b.b, p->name, "a;b"), KV_ERR_INVALID);
            ck_assert_int_eq(kv_params_set_text(ops, b.b, p->name, ""), KV_ERR_INVALID);
            ck_assert_str_eq(kv_params_get_text(ops, b.b, k), p->def_text);
            ck_assert(p->help[0] != '\0' && strncmp(p->flag, "--", 2) == 0);
            continue;
        }
        ck_assert_int_eq(kv_params_set(ops, b.b, p->name, p->def), KV_OK);
        ck_assert_int_eq(kv_params_get(ops, b.b, k), p->def);
        if (p->type == KV_PARAM_INT) {
            ck_assert_int_eq(kv_params_set(ops, b.b, p->name, p->lo - 1), KV_ERR_INVALID);
            ck_assert_int_eq(kv_params_set(ops, b.b, p->name, p->hi + 1), KV_ERR_INVALID);
        } else {
            int64_t bad = 0;
            while (kv_param_accepts(p, bad))
                bad++;
            ck_assert_int_eq(kv_params_set(ops, b.b, p->name, bad), KV_ERR_INVALID);
        }
        ck_assert_int_eq(kv_params_get(ops, b.b, k), p->def); /* refused: unchanged */
        ck_assert(p->help[0] != '\0' && strncmp(p->flag, "--", 2) == 0);
    }
    ck_assert_int_eq(kv_params_set(ops, b.b, "no-such-parameter", 1), KV_ERR_INVALID);
    ck_assert_int_gt(kv_strategy_describe(ops, &cc, a.b, line, sizeof line), 0);
    ck_assert_int_gt(kv_strategy_label(ops, a.b, line, sizeof line), 0);
    /* NULL parameters are the table's defaults */
    char with_def[512];
    kv_params_defaults(ops, b.b);
    kv_strategy_describe(ops, &cc, b.b, with_def, sizeof with_def);
    kv_strategy_describe(ops, &cc, NULL, line, sizeof line);
    ck_assert_str_eq(line, with_def);
    kv_strategy_label(ops, b.b, with_def, sizeof with_def);
    kv_strategy_label(ops, NULL, line, sizeof line);
    ck_assert_str_eq(line, with_def);
    ck_assert_int_eq(kv_strategy_dtype(ops, NULL), kv_strategy_dtype(ops, b.b));
    ck_assert(kv_dtype_traits(kv_strategy_dtype(ops, a.b)) != NULL);
    /* the dtype says whether it is lossy, the flag too */
    ck_assert_int_eq(kv_type_traits[kv_strategy_dtype(ops, a.b)].has_qparams ||
                         kv_type_traits[kv_strategy_dtype(ops, a.b)].err_rel > 0.0,
                     (kv_strategy_caps(ops, &cc, a.b) & KV_CAP_LOSSY) != 0);
    const struct conf *t = &conf_cfgs[0];
    const struct test_params tp = {.window = t->window, .bits = t->bits, .group = t->group,
                                   .residual = t->residual};
    for (int32_t k = 0; k < ops->n_presets; k++) {
        const struct kv_strategy_ops *o = NULL;
        ck_assert_int_eq(kv_strategy_lookup(ops->presets[k].name, &o, b.b, sizeof b.b), KV_OK);
        ck_assert_ptr_eq(o, ops);
        /* on the test's parameters for this shape, the preset's on top */
        test_params_fill(ops, &b, &tp);
        ck_assert_int_eq(kv_params_parse(ops, b.b, ops->presets[k].params), KV_OK);
        ck_assert_msg(kv_params_check(ops, &cc, b.b, line, sizeof line) == KV_OK, "%s: %s",
                      ops->presets[k].name, line);
    }
    const struct kv_strategy_ops *o = NULL;
    ck_assert_int_eq(kv_strategy_lookup(ops->name, &o, NULL, 0), KV_OK);
    ck_assert_ptr_eq(o, ops);
}
END_TEST

/*
 * Memory accounting against the strategy's own promise: after every step
 * of every schedule, resident bytes <= bytes_for(the tokens held); a
 * preallocating strategy's resident bytes never move and its updates make
 * no allocation at all.
 */
START_TEST(test_conformance_memory)
{
    const struct variant var = variant_at(_i / N_SCHEDS);
    const struct kv_strategy_ops *ops = var.ops;
    const struct sched *sc = &scheds[_i % N_SCHEDS];
    const struct conf *cfg = &conf_cfgs[0];
    if (variant_refuses(var, cfg))
        return;
    const struct kv_cache_config cc = cc_of(cfg);
    struct feed f;
    feed_init(&f, cfg, sched_total(sc->sizes, sc->n), 300 + (uint64_t)_i);
    struct kv_cache *c = NULL;
    ck_assert_int_eq(tcreate_v(&c, var, cfg), KV_OK);
    const size_t resident0 = kv_cache_resident_bytes(c);
    const int prealloc = kv_cache_has(c, KV_CAP_PREALLOCATES);
    int32_t len = 0;
    for (int32_t i = 0; i < sc->n; i++) {
        const int32_t n = sc->sizes[i];
        if (n > 1 && len > 0 && !kv_cache_has(c, KV_CAP_CHUNKED_APPEND)) {
            len += n; /* fed one by one below */
            for (int32_t p = len - n; p < len; p++)
                ck_assert_int_eq(feed_step(&f, c, p, 1), KV_OK);
        } else {
            kv_alloc_fail_at(0, 0); /* resets the allocation count */
            ck_assert_int_eq(feed_step(&f, c, len, n), KV_OK);
            if (prealloc)
                ck_assert_int_eq(kv_alloc_count(), 0);
            len += n;
        }
        const size_t res = kv_cache_resident_bytes(c);
        if (prealloc)
            ck_assert_uint_eq(res, resident0);
        size_t bound;
        enum kv_status st = kv_cache_bytes_for(ops, &cc, c->params, len, &bound);
        ck_assert(st == KV_OK || st == KV_ERR_UNSUPPORTED);
        if (st == KV_OK)
            ck_assert_msg(res <= bound, "%s after %d tokens: resident %zu > bytes_for %zu",
                          ops->name, len, res, bound);
    }
    kv_cache_destroy(c);
    feed_free(&f);
}
END_TEST

/* Positions past max_len: refused by a KV_CAP_BOUNDED strategy (KV_ERR_FULL,
 * nothing changed), taken by one without the flag. */
START_TEST(test_conformance_bounds)
{
    const struct variant var = variant_at(_i);
    struct conf cfg = conf_cfgs[0];
    cfg.max_len = 20;
    if (variant_refuses(var, &cfg))
        return;
    struct feed f;
    feed_init(&f, &cfg, 30, 31);
    struct kv_cache *c = NULL;
    ck_assert_int_eq(tcreate_v(&c, var, &cfg), KV_OK);
    for (int32_t p = 0; p < 20; p++)
        ck_assert_int_eq(feed_step(&f, c, p, 1), KV_OK);
    const size_t copied = kv_cache_copied_bytes(c);
    const int32_t len = kv_cache_seq_len(c, 0);
    enum kv_status st = feed_step(&f, c, 20, 1);
    if (kv_cache_has(c, KV_CAP_BOUNDED)) {
        ck_assert_int_eq(st, KV_ERR_FULL);
        ck_assert_int_eq(kv_cache_seq_len(c, 0), len);
        ck_assert_uint_eq(kv_cache_copied_bytes(c), copied);
    } else {
        ck_assert_int_eq(st, KV_OK);
        for (int32_t p = 21; p < 30; p++)
            ck_assert_int_eq(feed_step(&f, c, p, 1), KV_OK);
    }
    kv_cache_destroy(c);
    feed_free(&f);
}
END_TEST

/* history (n_layers, batch, t_max, heads, head_dim): sequence b <- perm[b]. */
static void feed_permute(struct feed *f, const int32_t *perm)
{
    const struct conf *c = &f->cfg;
    const size_t seq = (size_t)f->t_max * c->n_kv_heads * c->head_dim;
    float *tmp = malloc((size_t)c->batch * seq * sizeof(float));
    ck_assert_ptr_nonnull(tmp);
    for (int kv = 0; kv < 2; kv++) {
        float *h = kv ? f->v : f->k;
        for (int32_t l = 0; l < c->n_layers; l++) {
            float *base = h + (size_t)l * c->batch * seq;
            memcpy(tmp, base, (size_t)c->batch * seq * sizeof(float));
            for (int32_t b = 0; b < c->batch; b++)
                memcpy(base + (size_t)b * seq, tmp + (size_t)perm[b] * seq, seq * sizeof(float));
        }
    }
    free(tmp);
}

/* Every layer's view after feeding [0, len) reads back exactly. */
static void check_all_layers(struct feed *f, const struct kv_cache *c, int32_t len)
{
    for (int32_t l = 0; l < f->cfg.n_layers; l++) {
        struct seen s = check_view(f, c, l, len);
        ck_assert_int_eq(s.hi, len);
    }
}

/*
 * crop, fork and reorder, where the capability is declared: crop keeps
 * exactly the first len tokens and the cache goes on from there; a fork
 * holds the same tokens and the two then grow apart without touching each
 * other; reorder permutes the sequences (bad permutations refused). Where
 * not declared: KV_ERR_UNSUPPORTED and nothing changes.
 */
START_TEST(test_conformance_optional)
{
    const struct variant var = variant_at(_i);
    const struct kv_strategy_ops *ops = var.ops;
    const struct conf *cfg = &conf_cfgs[0]; /* batch 3 */
    if (variant_refuses(var, cfg))
        return;
    struct feed f;
    feed_init(&f, cfg, 48, 41);
    struct kv_cache *c = NULL, *d = NULL;
    ck_assert_int_eq(tcreate_v(&c, var, cfg), KV_OK);
    const int hist = (ops->caps & KV_CAP_KEEPS_HISTORY) != 0;
    const int32_t n_sched = (int32_t)(sizeof sched_prefill / sizeof sched_prefill[0]);
    run_schedule(&f, c, sched_prefill, n_sched);
    int32_t len = sched_total(sched_prefill, n_sched);

    if (ops->caps & KV_CAP_CROP) {
        ck_assert_int_eq(kv_cache_crop(c, len + 1), KV_ERR_INVALID);
        ck_assert_int_eq(kv_cache_crop(c, -1), KV_ERR_INVALID);
        const enum kv_status st = kv_cache_crop(c, 17);
        if (st == KV_ERR_UNSUPPORTED) {
            /* a cache that evicted or rounded tokens since may refuse a
             * crop back past them (tests/check_cache_ops.c: which), and
             * then changes nothing */
            ck_assert(ops->caps & (KV_CAP_EVICTS | KV_CAP_LOSSY));
            for (int32_t l = 0; l < cfg->n_layers; l++)
                ck_assert_int_eq(kv_cache_seq_len(c, l), len);
            check_all_layers(&f, c, len);
        } else {
            ck_assert_int_eq(st, KV_OK);
            for (int32_t l = 0; l < cfg->n_layers; l++)
                ck_assert_int_eq(kv_cache_seq_len(c, l), 17);
            check_all_layers(&f, c, 17);
            for (int32_t p = 17; p < 21; p++) /* and goes on from there */
                ck_assert_int_eq(feed_step(&f, c, p, 1), KV_OK);
            len = 21;
        }
    } else {
        ck_assert_int_eq(kv_cache_crop(c, 1), KV_ERR_UNSUPPORTED);
        if (hist)
            ck_assert_int_eq(kv_cache_seq_len(c, 0), len);
    }

    if (ops->caps & KV_CAP_FORK) {
        ck_assert_int_eq(kv_cache_fork(&d, c), KV_OK);
        ck_assert_ptr_nonnull(d);
        check_all_layers(&f, d, len);
        const size_t copied_c = kv_cache_copied_bytes(c);
        for (int32_t p = len; p < len + 3; p++) /* the fork grows; c does not move */
            ck_assert_int_eq(feed_step(&f, d, p, 1), KV_OK);
        ck_assert_int_eq(kv_cache_seq_len(c, 0), len);
        ck_assert_uint_eq(kv_cache_copied_bytes(c), copied_c);
        check_all_layers(&f, c, len);
        ck_assert_int_eq(kv_cache_crop(d, 0) == KV_OK || !(ops->caps & KV_CAP_CROP), 1);
        check_all_layers(&f, c, len); /* and is untouched by what the fork does */
        kv_cache_destroy(d);
        d = NULL;
    } else {
        d = (struct kv_cache *)&f; /* must be overwritten */
        ck_assert_int_eq(kv_cache_fork(&d, c), KV_ERR_UNSUPPORTED);
        ck_assert_ptr_null(d);
    }

    if (ops->caps & KV_CAP_REORDER) {
        /* (repeats and other batch sizes: tests/check_cache_ops.c) */
        static const int32_t neg[3] = {0, -1, 1}, out[3] = {0, 1, 3}, perm[3] = {2, 0, 1};
        const size_t copied = kv_cache_copied_bytes(c);
        ck_assert_int_eq(kv_cache_reorder(c, neg, 3), KV_ERR_INVALID);
        ck_assert_int_eq(kv_cache_reorder(c, out, 3), KV_ERR_INVALID);
        ck_assert_int_eq(kv_cache_reorder(c, perm, 0), KV_ERR_INVALID);
        ck_assert_int_eq(kv_cache_reorder(c, NULL, 3), KV_ERR_INVALID);
        ck_assert_uint_eq(kv_cache_copied_bytes(c), copied);
        ck_assert_int_eq(kv_cache_reorder(c, perm, 3), KV_OK);
        ck_assert_uint_ge(kv_cache_copied_bytes(c), copied);
        feed_permute(&f, perm);
        check_all_layers(&f, c, len);
        for (int32_t p = len; p < len + 3; p++) /* the next tokens land in order */
            ck_assert_int_eq(feed_step(&f, c, p, 1), KV_OK);
    } else {
        static const int32_t id[3] = {0, 1, 2};
        ck_assert_int_eq(kv_cache_reorder(c, id, 3), KV_ERR_UNSUPPORTED);
    }
    kv_cache_destroy(c);
    feed_free(&f);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Test doubles: a cache of the newest --budget tokens                      */

/*
 * A strategy the suite knows nothing about by name: a ring of the newest
 * --budget tokens (default 256, scales memory, no preset), growing one row
 * at a time up to its budget, with the window mask that makes it exact. The
 * correct table is registered in main() and passes the whole suite like a
 * built-in one. Three broken tables of the same shape, each with one
 * eviction bug, are registered only by test_conformance_small_catches:
 *   - test-budget-wide-mask: the mask says one key more than it keeps;
 *   - test-budget-wrong-victim: once full, a new token replaces the
 *     second-oldest instead of the oldest;
 *   - test-budget-one-more: keeps one token more than bytes_for promises.
 * At the default budget, 64 tokens never fill the ring, so every bug is
 * invisible to the checks at the test configurations (which set window,
 * bits, group, residual, sinks and heavy by name, never budget).
 */
struct tb_params {
    int32_t budget;
};

static const struct kv_param tb_param_table[] = {
    {.name = "budget", .flag = "--budget", .type = KV_PARAM_INT, .lo = 1, .hi = 1 << 20,
     .def = 256, .help = "tokens kept, the newest (test double)", .scales_memory = 1,
     .offset = offsetof(struct tb_params, budget)},
};

enum tb_bug { TB_CORRECT, TB_WIDE_MASK, TB_WRONG_VICTIM, TB_ONE_MORE };

struct tb_layer {
    int32_t len;          /* tokens seen (the next pos0) */
    int32_t slots;        /* rows allocated, up to cap */
    float *k, *v;         /* (slots, batch, n_kv_heads, head_dim); position p in slot p % cap */
    const float *pk, *pv; /* a prefill longer than the ring: the caller's rows serve the view */
    int32_t pn;
};

struct tb_state {
    struct kv_cache_config cfg;
    int32_t budget, cap; /* cap: the rows it keeps (budget, or one more: the bug) */
    enum tb_bug bug;
    size_t row;          /* floats of one slot */
    size_t copied;
    struct tb_layer *layers;
};

static enum kv_status tb_init_bug(void *state, const struct kv_cache_config *cfg,
                                  const void *params, enum tb_bug bug)
{
    struct tb_state *s = state;
    s->cfg = *cfg;
    s->budget = ((const struct tb_params *)params)->budget;
    s->bug = bug;
    s->cap = s->budget + (bug == TB_ONE_MORE);
    s->row = (size_t)cfg->batch * (size_t)cfg->n_kv_heads * (size_t)cfg->head_dim;
    s->layers = kv_alloc((size_t)cfg->n_layers * sizeof *s->layers);
    return s->layers != NULL ? KV_OK : KV_ERR_NOMEM;
}

static enum kv_status tb_init(void *st, const struct kv_cache_config *cfg, const void *p)
{
    return tb_init_bug(st, cfg, p, TB_CORRECT);
}
static enum kv_status tb_init_wide(void *st, const struct kv_cache_config *cfg, const void *p)
{
    return tb_init_bug(st, cfg, p, TB_WIDE_MASK);
}
static enum kv_status tb_init_victim(void *st, const struct kv_cache_config *cfg, const void *p)
{
    return tb_init_bug(st, cfg, p, TB_WRONG_VICTIM);
}
static enum kv_status tb_init_more(void *st, const struct kv_cache_config *cfg, const void *p)
{
    return tb_init_bug(st, cfg, p, TB_ONE_MORE);
}

static void tb_free(void *state)
{
    struct tb_state *s = state;
    for (int32_t l = 0; s->layers != NULL && l < s->cfg.n_layers; l++) {
        kv_free(s->layers[l].k);
        kv_free(s->layers[l].v);
    }
    kv_free(s->layers);
    s->layers = NULL;
}

/* Layer L grown to `want` rows (moving what it holds); the cache unchanged
 * on KV_ERR_NOMEM. */
static enum kv_status tb_grow(struct tb_state *s, struct tb_layer *L, int32_t want)
{
    if (want <= L->slots)
        return KV_OK;
    const size_t bytes = (size_t)want * s->row * sizeof(float);
    float *k = kv_alloc(bytes), *v = kv_alloc(bytes);
    if (k == NULL || v == NULL) {
        kv_free(k);
        kv_free(v);
        return KV_ERR_NOMEM;
    }
    const size_t old = (size_t)L->slots * s->row * sizeof(float);
    if (old > 0) {
        memcpy(k, L->k, old);
        memcpy(v, L->v, old);
    }
    s->copied += 2 * old;
    kv_free(L->k);
    kv_free(L->v);
    L->k = k;
    L->v = v;
    L->slots = want;
    return KV_OK;
}

/* The slot position p is written to. The wrong-victim bug: once the ring is
 * full, it overwrites the second-oldest token (still visible) and keeps
 * the oldest (no longer visible). */
static int32_t tb_slot(const struct tb_state *s, int32_t p)
{
    if (s->bug == TB_WRONG_VICTIM && p >= s->cap)
        return (p + 1) % s->cap;
    return p % s->cap;
}

/* One token at a time, or several into an empty layer (a prefill). */
static enum kv_status tb_update(void *state, int32_t layer, const float *k_new,
                                const float *v_new, int32_t n_new, int32_t pos0)
{
    struct tb_state *s = state;
    struct tb_layer *L = &s->layers[layer];
    if (pos0 != L->len || (n_new > 1 && L->len > 0))
        return KV_ERR_INVALID;
    const int32_t end = pos0 + n_new, keep = end < s->cap ? end : s->cap;
    const enum kv_status st = tb_grow(s, L, keep);
    if (st != KV_OK)
        return st;
    const size_t kvd = (size_t)s->cfg.n_kv_heads * (size_t)s->cfg.head_dim;
    for (int32_t p = end - (n_new < s->cap ? n_new : s->cap); p < end; p++)
        for (int32_t b = 0; b < s->cfg.batch; b++) {
            const size_t to = (size_t)tb_slot(s, p) * s->row + (size_t)b * kvd;
            const size_t from = ((size_t)b * (size_t)n_new + (size_t)(p - pos0)) * kvd;
            memcpy(L->k + to, k_new + from, kvd * sizeof(float));
            memcpy(L->v + to, v_new + from, kvd * sizeof(float));
            s->copied += 2 * kvd * sizeof(float);
        }
    L->pn = n_new > s->cap ? n_new : 0;
    L->pk = k_new;
    L->pv = v_new;
    L->len = end;
    return KV_OK;
}

static struct kv_tensor tb_side(const float *data, size_t row_stride, size_t seq_stride,
                                int32_t head_dim)
{
    return (struct kv_tensor){.dtype = KV_DTYPE_F32, .data = data,
                              .row_stride = row_stride * sizeof(float),
                              .head_stride = (size_t)head_dim * sizeof(float),
                              .seq_stride = seq_stride * sizeof(float)};
}

/* The held positions in order: the ring's (at most two) runs, or the
 * caller's rows of a long prefill; the mask's window is the budget (the
 * wide-mask bug: one more). */
static int32_t tb_view(const void *state, int32_t layer, struct kv_span *spans,
                       struct kv_mask *mask)
{
    const struct tb_state *s = state;
    const struct tb_layer *L = &s->layers[layer];
    const int32_t d = s->cfg.head_dim;
    const size_t kvd = (size_t)s->cfg.n_kv_heads * (size_t)d;
    mask->window = s->budget + (s->bug == TB_WIDE_MASK);
    if (L->pn > 0) {
        spans[0] = (struct kv_span){.k = tb_side(L->pk, kvd, (size_t)L->pn * kvd, d),
                                    .v = tb_side(L->pv, kvd, (size_t)L->pn * kvd, d),
                                    .n_tokens = L->pn, .pos0 = L->len - L->pn};
        return 1;
    }
    const int32_t held = L->len < s->cap ? L->len : s->cap;
    int32_t n = 0;
    for (int32_t p = L->len - held; p < L->len;) {
        const int32_t slot = p % s->cap;
        const int32_t run = s->cap - slot < L->len - p ? s->cap - slot : L->len - p;
        spans[n++] = (struct kv_span){.k = tb_side(L->k + (size_t)slot * s->row, s->row, kvd, d),
                                      .v = tb_side(L->v + (size_t)slot * s->row, s->row, kvd, d),
                                      .n_tokens = run, .pos0 = p};
        p += run;
    }
    return n;
}

static int32_t tb_max_spans(const struct kv_cache_config *cfg, const void *params)
{
    (void)cfg, (void)params;
    return 2;
}

static int32_t tb_seq_len(const void *state, int32_t layer)
{
    return ((const struct tb_state *)state)->layers[layer].len;
}

static size_t tb_resident_bytes(const void *state)
{
    const struct tb_state *s = state;
    size_t rows = 0;
    for (int32_t l = 0; l < s->cfg.n_layers; l++)
        rows += (size_t)s->layers[l].slots;
    return 2 * rows * s->row * sizeof(float);
}

static size_t tb_copied_bytes(const void *state)
{
    return ((const struct tb_state *)state)->copied;
}

/* The promise: the newest min(n, budget) tokens of every layer. */
static enum kv_status tb_bytes_for(const struct kv_cache_config *cfg, const void *params,
                                   int32_t n_tokens, size_t *bytes)
{
    const int32_t budget = ((const struct tb_params *)params)->budget;
    const size_t f[7] = {2, (size_t)cfg->n_layers,
                         (size_t)(n_tokens < budget ? (n_tokens > 0 ? n_tokens : 0) : budget),
                         (size_t)cfg->batch, (size_t)cfg->n_kv_heads, (size_t)cfg->head_dim,
                         sizeof(float)};
    return kv_mul_sizes(bytes, 7, f) == KV_OK ? KV_OK : KV_ERR_OVERFLOW;
}

#define TB_OPS(NAME, DESC, INIT)                                                             \
    {                                                                                        \
        .name = NAME, .description = DESC,                                                   \
        .caps = KV_CAP_KEEPS_HISTORY | KV_CAP_EVICTS | KV_CAP_SHARES_STORAGE,                \
        .params = tb_param_table, .n_params = 1, .params_size = sizeof(struct tb_params),    \
        .state_size = sizeof(struct tb_state), .bytes_for = tb_bytes_for,                    \
        .max_spans = tb_max_spans, .init = INIT, .free = tb_free, .update = tb_update,       \
        .view = tb_view, .seq_len = tb_seq_len, .resident_bytes = tb_resident_bytes,         \
        .copied_bytes = tb_copied_bytes,                                                     \
    }

static const struct kv_strategy_ops tb_ops = TB_OPS(
    "test-budget", "test only: the newest --budget tokens, a growing ring", tb_init);
static const struct kv_strategy_ops tb_wide_ops = TB_OPS(
    "test-budget-wide-mask", "test only, broken: its mask shows one key more than it keeps",
    tb_init_wide);
static const struct kv_strategy_ops tb_victim_ops = TB_OPS(
    "test-budget-wrong-victim", "test only, broken: evicts the second-oldest token",
    tb_init_victim);
static const struct kv_strategy_ops tb_more_ops = TB_OPS(
    "test-budget-one-more", "test only, broken: keeps one token more than bytes_for says",
    tb_init_more);

/* ------------------------------------------------------------------------ */
/* Conformance at small sizes: parameters derived from the table            */

/*
 * The checks above give every strategy the test configurations' window,
 * bits, group, residual, sinks and heavy: parameters the test knows by
 * name. A strategy whose memory scales with a parameter of another name
 * (a --budget of 256) keeps its default there and never evicts in 64
 * tokens. So this part derives its configuration from the parameter table
 * alone: every integer parameter with scales_memory is set to the value
 * nearest SMALL_TARGET (SMALL_TARGET, then down to 1, then up) that the
 * strategy's own check accepts (kv_params_check, with the others already
 * small), and every schedule feeds tokens far past the largest of them:
 * readback and coverage against the mask (or, evicting what no mask
 * describes, against the keys the view lists), attention over the view
 * against kv_attn_ref over the history under the view's mask (or over the
 * keys it claims to keep), the attention mass handed back where the
 * strategy asks for it, bytes_for, flat preallocated memory, a bounded
 * cache full at max_len, and that an evicting cache did evict.
 *
 * These checks do not abort: each returns through a verdict (how many
 * failed, and the first one's message), so test_conformance_small_catches
 * can run them on a deliberately broken strategy and see them fail.
 */
#define SMALL_TARGET 3
#define SMALL_SEARCH 64
#define SMALL_T_MIN 48
#define SMALL_T_MAX 192

struct verdict {
    int32_t fails;
    char first[512];
};

static void verdict_fail(struct verdict *vd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void verdict_fail(struct verdict *vd, const char *fmt, ...)
{
    if (vd->fails++ == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(vd->first, sizeof vd->first, fmt, ap);
        va_end(ap);
    }
}

/* In a function returning int: records the failure and returns 1. */
#define SOFT(vd, cond, ...)                                                                  \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            verdict_fail((vd), __VA_ARGS__);                                                 \
            return 1;                                                                        \
        }                                                                                    \
    } while (0)

static const struct conf small_shape = {.n_layers = 2, .batch = 2, .n_kv_heads = 2,
                                        .head_dim = 16, .max_len = 256};

/* A variant at small sizes: its parameters, the shape, the tokens to feed. */
struct small {
    struct variant var;
    struct conf shape;
    struct test_param_block blk;
    int32_t n_scaled; /* memory-scaling parameters set small */
    int32_t biggest;  /* the largest value they got */
    int32_t T;        /* tokens each schedule feeds */
    char desc[256];   /* the parameters (kv_params_format), for messages */
};

/* 1 when a cache of these parameters takes the first n tokens one at a
 * time in every layer (a value so small that nothing fits, a pool of fewer
 * blocks than layers and sequences, tests no more than a refusal). */
static int small_takes(const struct kv_strategy_ops *ops, const struct kv_cache_config *cc,
                       const void *params, int32_t n)
{
    struct kv_cache *c = NULL;
    if (kv_cache_create(&c, ops, cc, params) != KV_OK)
        return 0;
    float *zero = calloc((size_t)cc->batch * cc->n_kv_heads * cc->head_dim, sizeof(float));
    ck_assert_ptr_nonnull(zero);
    const int hist = kv_cache_has(c, KV_CAP_KEEPS_HISTORY);
    int ok = 1;
    for (int32_t p = 0; p < n && ok && hist; p++)
        for (int32_t l = 0; l < cc->n_layers && ok; l++)
            ok = kv_cache_update(c, l, zero, zero, 1, p) == KV_OK;
    kv_cache_destroy(c);
    free(zero);
    return ok;
}

/*
 * sm <- the variant's parameters (defaults, preset, extra) with, when
 * shrink is set, every memory-scaling integer parameter small: the first
 * value of SMALL_TARGET, SMALL_TARGET - 1 .. 1, SMALL_TARGET + 1 .. that
 * the table's range and the strategy's check accept and whose cache takes
 * 2 * value + 1 tokens. The shape has 2 layers, else 3 or 1 (a per-layer
 * pattern of that many). 0 when the variant takes none of them.
 */
static int small_make_layers(struct small *sm, struct variant var, int shrink, int32_t n_layers)
{
    const struct kv_strategy_ops *ops = var.ops;
    memset(sm, 0, sizeof *sm);
    sm->var = var;
    sm->shape = small_shape;
    sm->shape.n_layers = n_layers;
    ck_assert_uint_le(ops->params_size, TEST_PARAMS_BYTES);
    kv_params_defaults(ops, sm->blk.b);
    for (int32_t k = 0; var.preset != NULL && k < ops->n_presets; k++)
        if (strcmp(ops->presets[k].name, var.preset) == 0)
            ck_assert_int_eq(kv_params_parse(ops, sm->blk.b, ops->presets[k].params), KV_OK);
    if (var.params != NULL)
        ck_assert_int_eq(kv_params_parse(ops, sm->blk.b, var.params), KV_OK);
    struct kv_cache_config cc = cc_of(&sm->shape);
    /* (a default the shape refuses, a group of 32 for head_dim 16, may be
     * one the search replaces) */
    for (int32_t k = 0; shrink && k < ops->n_params; k++) {
        const struct kv_param *p = &ops->params[k];
        if (p->type != KV_PARAM_INT || !p->scales_memory)
            continue;
        const int32_t old = kv_params_get(ops, sm->blk.b, k);
        int32_t got = 0;
        for (int32_t i = 0; i < SMALL_SEARCH && got == 0; i++) {
            const int64_t v = i < SMALL_TARGET ? SMALL_TARGET - i : i + 1;
            if (!kv_param_accepts(p, v) || kv_params_set(ops, sm->blk.b, p->name, v) != KV_OK)
                continue;
            if (kv_params_check(ops, &cc, sm->blk.b, NULL, 0) == KV_OK &&
                small_takes(ops, &cc, sm->blk.b, 2 * (int32_t)v + 1))
                got = (int32_t)v;
        }
        if (got == 0) { /* nothing small fits: it keeps its value */
            ck_assert_int_eq(kv_params_set(ops, sm->blk.b, p->name, old), KV_OK);
            continue;
        }
        sm->n_scaled++;
        sm->biggest = got > sm->biggest ? got : sm->biggest;
    }
    sm->T = 8 * sm->biggest + 16;
    sm->T = sm->T < SMALL_T_MIN ? SMALL_T_MIN : sm->T > SMALL_T_MAX ? SMALL_T_MAX : sm->T;
    /* max_len = what is fed, so a bounded cache ends full */
    sm->shape.max_len = sm->T;
    cc = cc_of(&sm->shape);
    if (kv_params_check(ops, &cc, sm->blk.b, NULL, 0) != KV_OK)
        sm->shape.max_len = small_shape.max_len;
    cc = cc_of(&sm->shape);
    if (kv_params_check(ops, &cc, sm->blk.b, NULL, 0) != KV_OK)
        return 0;
    kv_params_format(ops, sm->blk.b, sm->desc, sizeof sm->desc);
    return 1;
}

static int small_make(struct small *sm, struct variant var, int shrink)
{
    return small_make_layers(sm, var, shrink, 2) || small_make_layers(sm, var, shrink, 3) ||
           small_make_layers(sm, var, shrink, 1);
}

/* Schedule `kind` of T tokens: one by one; a prefill past the sizes then
 * tokens; uneven chunks; half of T at once then tokens. */
#define SMALL_N_SCHEDS 4
static int32_t small_sched(int32_t kind, int32_t T, int32_t biggest, int32_t *out)
{
    static const int32_t chunks[] = {3, 1, 5, 1, 1, 7, 2, 4};
    int32_t n = 0, total = 0;
    if (kind == 1 || kind == 3) {
        out[n] = kind == 3 ? T / 2 : biggest > 0 ? 2 * biggest + 1 : 13;
        out[n] = out[n] < 1 ? 1 : out[n] > T ? T : out[n];
        total += out[n++];
    }
    for (int32_t i = 0; total < T; i++) {
        int32_t c = kind == 2 ? chunks[i % (int32_t)(sizeof chunks / sizeof chunks[0])] : 1;
        c = c > T - total ? T - total : c;
        out[n++] = c;
        total += c;
    }
    return n;
}

/* One run: the cache, the history and every buffer of the checks. */
struct small_run {
    struct verdict *vd;
    const struct small *sm;
    const char *name;
    struct feed f;
    struct kv_cache *c;
    int32_t n_heads, t_max;
    float *qh;            /* (batch, t_max, n_heads, head_dim) a query per position */
    float *q, *out, *ref, *want; /* (batch, t_max, n_heads, head_dim) one call's */
    float *gk, *gv;       /* (batch, t_max, n_kv_heads, head_dim) the kept keys, gathered */
    int32_t *gpos;        /* (batch, n_kv_heads, t_max) their positions */
    char *mark;           /* (batch * n_kv_heads, t_max + 1) positions a view holds */
    int32_t held_min;     /* fewest positions (b 0, h 0) a layer's view held, last step */
};

/*
 * Layer l's view after an update of the queries [q_first, q_end): every
 * position once, in [0, q_end), spans without a table in order, the values
 * written (bit-exact, within the dtype's bound, or a rotated key of the same
 * pair lengths); a position missing only with KV_CAP_EVICTS, and then
 * hidden from every query of the step by the view's own mask, or, evicting
 * what no mask describes, not one of the step's own. Leaves mark set.
 */
static int small_view(struct small_run *R, int32_t l, int32_t q_first, int32_t q_end)
{
    const struct kv_cache *c = R->c;
    const struct conf *cfg = &R->f.cfg;
    const int32_t nbh = cfg->batch * cfg->n_kv_heads, d = cfg->head_dim;
    const size_t stride = (size_t)R->t_max + 1;
    const int scored = kv_cache_has(c, KV_CAP_SCORE_EVICTS);
    const int repositions = kv_cache_has(c, KV_CAP_REPOSITIONS);
    struct kv_view view;
    SOFT(R->vd, kv_cache_view(c, l, &view) == KV_OK, "%s: view of layer %d refused", R->name, l);
    SOFT(R->vd, view.n_spans >= 0 && view.n_spans <= c->max_spans,
         "%s: layer %d: %d spans, max_spans %d", R->name, l, view.n_spans, c->max_spans);
    memset(R->mark, 0, (size_t)nbh * stride);
    int32_t prev_end = 0, held0 = 0;
    for (int32_t i = 0; i < view.n_spans; i++) {
        const struct kv_span *sp = &view.spans[i];
        SOFT(R->vd, sp->n_tokens >= 1, "%s: layer %d span %d is empty", R->name, l, i);
        if (sp->pos == NULL) {
            SOFT(R->vd, sp->pos0 >= prev_end && sp->pos0 + sp->n_tokens <= q_end,
                 "%s: layer %d span %d holds [%d, %d): out of order or past %d", R->name, l, i,
                 sp->pos0, sp->pos0 + sp->n_tokens, q_end);
            prev_end = sp->pos0 + sp->n_tokens;
        }
        const int lossy = kv_type_traits[sp->k.dtype].has_qparams ||
                          kv_type_traits[sp->v.dtype].has_qparams;
        SOFT(R->vd, !lossy || kv_cache_has(c, KV_CAP_LOSSY),
             "%s: a lossy span without KV_CAP_LOSSY", R->name);
        SOFT(R->vd, !lossy || sp->pos == NULL, "%s: lossy rows with a position table", R->name);
        for (int32_t bh = 0; bh < nbh; bh++) {
            const int32_t b = bh / cfg->n_kv_heads, h = bh % cfg->n_kv_heads;
            char *mk = R->mark + (size_t)bh * stride;
            for (int32_t t = 0; t < sp->n_tokens; t++) {
                const int64_t p = kv_span_pos(sp, b, h, t);
                SOFT(R->vd, p >= 0 && p < q_end, "%s: layer %d (b,h) %d: position %lld outside "
                     "[0, %d)", R->name, l, bh, (long long)p, q_end);
                SOFT(R->vd, !mk[p], "%s: layer %d (b,h) %d: position %lld visible twice",
                     R->name, l, bh, (long long)p);
                mk[p] = 1;
                held0 += bh == 0;
                for (int kv = 0; kv < 2; kv++) {
                    const struct kv_tensor *td = kv ? &sp->v : &sp->k;
                    const float *want =
                        (kv ? R->f.v : R->f.k) + feed_row(&R->f, l, b, (int32_t)p, h);
                    read_side(R->f.deq, sp, td, b, h, t, d);
                    const struct kv_type_traits *tr = &kv_type_traits[td->dtype];
                    if (!tr->has_qparams && tr->err_rel == 0.0) {
                        if (memcmp(R->f.deq, want, (size_t)d * sizeof(float)) == 0)
                            continue;
                        SOFT(R->vd, kv == 0 && repositions &&
                                        rotated_pair_bad(R->f.deq, want, d) < 0,
                             "%s: layer %d seq %d head %d pos %lld: %s differs from what was "
                             "written", R->name, l, b, h, (long long)p, kv ? "V" : "K");
                        continue;
                    }
                    float w = 0.0f, tol = 0.0f;
                    const int32_t e = lossy_row_bad(&R->f, sp, td, l, b, h, t, R->f.deq, kv, &w,
                                                    &tol);
                    SOFT(R->vd, e < 0, "%s: layer %d seq %d head %d pos %lld %s elem %d: got %g, "
                         "written %g (tol %g)", R->name, l, b, h, (long long)p, kv ? "V" : "K", e,
                         (double)R->f.deq[e < 0 ? 0 : e], (double)w, (double)tol);
                }
            }
        }
    }
    for (int32_t bh = 0; bh < nbh; bh++)
        for (int32_t p = 0; p < q_end; p++) {
            if (R->mark[(size_t)bh * stride + p])
                continue;
            SOFT(R->vd, kv_cache_has(c, KV_CAP_EVICTS),
                 "%s: layer %d lost position %d without KV_CAP_EVICTS", R->name, l, p);
            SOFT(R->vd, !scored || p < q_first, "%s: layer %d (b,h) %d evicted position %d of "
                 "the step itself", R->name, l, bh, p);
            for (int32_t q = q_first; q < q_end && !scored; q++)
                SOFT(R->vd, !kv_attn_key_visible(&view.mask, 0, q, p),
                     "%s: layer %d (b,h) %d: key %d, which the query at %d sees under the view's "
                     "mask (window %d, %d sinks), is missing", R->name, l, bh, p, q,
                     view.mask.window, view.mask.n_sink);
        }
    R->held_min = held0 < R->held_min ? held0 : R->held_min;
    return 0;
}

/* The largest |a - b| over n floats, and where. */
static float max_diff(const float *a, const float *b, size_t n, size_t *at)
{
    float m = 0.0f;
    *at = 0;
    for (size_t i = 0; i < n; i++)
        if (!(fabsf(a[i] - b[i]) <= m)) {
            m = fabsf(a[i] - b[i]);
            *at = i;
        }
    return m;
}

/*
 * Attention of the step's queries over layer l's view (mark as small_view
 * left it): the fast kernel (with the attention mass, where the cache wants
 * it) against kv_attn_ref on the view; then, where every span is exact f32
 * at its written position, kv_attn_ref on the view against kv_attn_ref on
 * the history: all of it under the view's mask, or, evicting what no mask
 * describes, the keys the view lists (gathered from the history). The mass
 * is handed back (kv_cache_observe), so a score-evicting cache evicts.
 */
static int small_attend(struct small_run *R, int32_t l, int32_t q_first, int32_t q_end)
{
    struct kv_cache *c = R->c;
    const struct conf *cfg = &R->f.cfg;
    const int32_t B = cfg->batch, KH = cfg->n_kv_heads, d = cfg->head_dim, H = R->n_heads;
    const int32_t nq = q_end - q_first;
    const size_t qrow = (size_t)H * d, stride = (size_t)R->t_max + 1;
    for (int32_t b = 0; b < B; b++)
        memcpy(R->q + (size_t)b * nq * qrow, R->qh + ((size_t)b * R->t_max + q_first) * qrow,
               (size_t)nq * qrow * sizeof(float));
    struct kv_view view;
    SOFT(R->vd, kv_cache_view(c, l, &view) == KV_OK, "%s: view of layer %d refused", R->name, l);
    const struct kv_attn_params p = {.batch = B, .n_q = nq, .n_heads = H, .n_kv_heads = KH,
                                     .head_dim = d, .q_pos0 = q_first,
                                     .scale = 1.0f / sqrtf((float)d), .n_threads = 1};
    SOFT(R->vd, kv_attn_check(&p, &view) == KV_OK, "%s: layer %d: the kernel refuses the view",
         R->name, l);
    float *mass = NULL;
    size_t mass_len = 0;
    SOFT(R->vd, kv_cache_mass_buffer(c, l, &view, H, &mass, &mass_len) == KV_OK,
         "%s: layer %d: no attention mass buffer", R->name, l);
    SOFT(R->vd, mass == NULL || kv_cache_has(c, KV_CAP_ATTN_MASS),
         "%s: asks for the attention mass without KV_CAP_ATTN_MASS", R->name);
    struct kv_attn_params pm = p;
    pm.mass = mass;
    pm.mass_len = mass_len;
    const size_t ws_bytes = (kv_attn_workspace_bytes(&pm) + 63) / 64 * 64;
    void *ws = aligned_alloc(64, ws_bytes ? ws_bytes : 64);
    ck_assert_ptr_nonnull(ws);
    const enum kv_status fast = kv_attn(R->out, R->q, &pm, &view, ws, ws_bytes);
    free(ws);
    SOFT(R->vd, fast == KV_OK, "%s: layer %d: kv_attn: %s", R->name, l, kv_status_str(fast));
    SOFT(R->vd, kv_attn_ref(R->ref, R->q, &p, &view) == KV_OK, "%s: layer %d: kv_attn_ref "
         "refuses the view", R->name, l);
    const size_t n_out = (size_t)B * nq * qrow;
    size_t at;
    float diff = max_diff(R->out, R->ref, n_out, &at);
    SOFT(R->vd, diff <= ATTN_FAST_TOL, "%s: layer %d, queries [%d, %d): fast kernel %g, "
         "reference %g", R->name, l, q_first, q_end, (double)R->out[at], (double)R->ref[at]);

    int exact = !kv_cache_has(c, KV_CAP_REPOSITIONS);
    for (int32_t i = 0; i < view.n_spans; i++)
        exact &= view.spans[i].k.dtype == KV_DTYPE_F32 && view.spans[i].v.dtype == KV_DTYPE_F32;
    if (exact) {
        const size_t row = (size_t)KH * d;
        struct kv_span sp = {.n_tokens = q_end};
        const char *what = "the history under the view's mask";
        if (!kv_cache_has(c, KV_CAP_SCORE_EVICTS)) {
            sp.k = tb_side(R->f.k + feed_row(&R->f, l, 0, 0, 0), row, (size_t)R->t_max * row, d);
            sp.v = tb_side(R->f.v + feed_row(&R->f, l, 0, 0, 0), row, (size_t)R->t_max * row, d);
        } else { /* the keys it claims to keep, from the history */
            what = "the keys it lists, from the history";
            int32_t n = 0;
            for (int32_t bh = 0; bh < B * KH; bh++) {
                int32_t k = 0;
                for (int32_t t = 0; t < q_end; t++)
                    k += R->mark[(size_t)bh * stride + t] != 0;
                n = k > n ? k : n;
            }
            for (int32_t bh = 0; bh < B * KH; bh++) {
                const int32_t b = bh / KH, h = bh % KH;
                int32_t k = 0;
                for (int32_t t = 0; t < q_end; t++) {
                    if (!R->mark[(size_t)bh * stride + t])
                        continue;
                    R->gpos[(size_t)bh * n + k] = t;
                    memcpy(R->gk + (((size_t)b * n + k) * KH + h) * d,
                           R->f.k + feed_row(&R->f, l, b, t, h), (size_t)d * sizeof(float));
                    memcpy(R->gv + (((size_t)b * n + k) * KH + h) * d,
                           R->f.v + feed_row(&R->f, l, b, t, h), (size_t)d * sizeof(float));
                    k++;
                }
                for (; k < n; k++) { /* fewer here: padding past every query, never seen */
                    R->gpos[(size_t)bh * n + k] = q_end;
                    memset(R->gk + (((size_t)b * n + k) * KH + h) * d, 0, (size_t)d * sizeof(float));
                    memset(R->gv + (((size_t)b * n + k) * KH + h) * d, 0, (size_t)d * sizeof(float));
                }
            }
            sp = (struct kv_span){.k = tb_side(R->gk, row, (size_t)n * row, d),
                                  .v = tb_side(R->gv, row, (size_t)n * row, d), .n_tokens = n,
                                  .pos = R->gpos, .pos_seq_stride = (size_t)KH * n,
                                  .pos_head_stride = (size_t)n};
        }
        const struct kv_view hv = {.spans = &sp, .n_spans = sp.n_tokens > 0, .mask = view.mask,
                                   .batch = B, .n_kv_heads = KH, .head_dim = d};
        SOFT(R->vd, kv_attn_ref(R->want, R->q, &p, &hv) == KV_OK, "%s: layer %d: the "
             "reference view is refused", R->name, l);
        diff = max_diff(R->ref, R->want, n_out, &at);
        SOFT(R->vd, diff <= ATTN_REF_TOL, "%s: layer %d, queries [%d, %d): attention over the "
             "view %g, over %s %g", R->name, l, q_first, q_end, (double)R->ref[at], what,
             (double)R->want[at]);
    }
    if (mass != NULL)
        SOFT(R->vd, kv_cache_observe(c, l, mass, H) == KV_OK, "%s: layer %d refuses its "
             "attention mass", R->name, l);
    return 0;
}

/*
 * One model step at [len, len + n) (without history: all of [0, len + n)
 * at 0): every layer updated, its view and attention checked. 0, 1 when a
 * check failed, 2 when the cache refused the update (*refused: KV_ERR_FULL,
 * or KV_ERR_INVALID for a chunk without KV_CAP_CHUNKED_APPEND), unchanged.
 */
static int small_step(struct small_run *R, int32_t len, int32_t n, enum kv_status *refused)
{
    struct kv_cache *c = R->c;
    const int hist = kv_cache_has(c, KV_CAP_KEEPS_HISTORY);
    const int prealloc = kv_cache_has(c, KV_CAP_PREALLOCATES);
    const int32_t q_end = len + n, q_first = hist ? len : 0;
    R->held_min = INT32_MAX;
    for (int32_t l = 0; l < R->f.cfg.n_layers; l++) {
        const int32_t p0 = hist ? len : 0, cnt = hist ? n : q_end;
        feed_chunk(&R->f, l, p0, cnt);
        const int32_t had = kv_cache_seq_len(c, l);
        const size_t copied = kv_cache_copied_bytes(c), resident = kv_cache_resident_bytes(c);
        kv_alloc_fail_at(0, 0); /* counts from here */
        const enum kv_status st = kv_cache_update(c, l, R->f.ck, R->f.cv, cnt, p0);
        SOFT(R->vd, !prealloc || kv_alloc_count() == 0, "%s: an update of a preallocating "
             "cache allocated (layer %d, position %d)", R->name, l, len);
        if (st != KV_OK) {
            SOFT(R->vd, kv_cache_seq_len(c, l) == had && kv_cache_copied_bytes(c) == copied &&
                            kv_cache_resident_bytes(c) == resident,
                 "%s: a refused update (%s) changed layer %d", R->name, kv_status_str(st), l);
            SOFT(R->vd, st == KV_ERR_FULL || (st == KV_ERR_INVALID && l == 0 && n > 1 && len > 0 &&
                                              !kv_cache_has(c, KV_CAP_CHUNKED_APPEND)),
                 "%s: layer %d: update of %d at %d: %s", R->name, l, n, len, kv_status_str(st));
            SOFT(R->vd, st != KV_ERR_FULL || !kv_cache_has(c, KV_CAP_EVICTS),
                 "%s: an evicting cache refused position %d (layer %d) as full", R->name, len, l);
            *refused = st;
            return 2;
        }
        SOFT(R->vd, kv_cache_seq_len(c, l) == (hist ? q_end : 0), "%s: layer %d holds a length "
             "of %d after position %d", R->name, l, kv_cache_seq_len(c, l), q_end - 1);
        if (small_view(R, l, q_first, q_end) || small_attend(R, l, q_first, q_end))
            return 1;
    }
    return 0;
}

/* Memory after a step with len tokens: within bytes_for, flat when
 * preallocated. */
static int small_memory(struct small_run *R, int32_t len, size_t resident0)
{
    const struct kv_cache_config cc = cc_of(&R->sm->shape);
    const size_t res = kv_cache_resident_bytes(R->c);
    SOFT(R->vd, !kv_cache_has(R->c, KV_CAP_PREALLOCATES) || res == resident0,
         "%s: preallocated, yet its resident bytes moved from %zu to %zu", R->name, resident0,
         res);
    size_t bound;
    const enum kv_status st = kv_cache_bytes_for(R->c->ops, &cc, R->c->params, len, &bound);
    SOFT(R->vd, st == KV_OK || st == KV_ERR_UNSUPPORTED, "%s: bytes_for: %s", R->name,
         kv_status_str(st));
    SOFT(R->vd, st != KV_OK || res <= bound, "%s after %d tokens: resident %zu bytes > "
         "bytes_for %zu", R->name, len, res, bound);
    return 0;
}

/* One schedule through a fresh cache, then the end checks. */
static int small_schedule(struct small_run *R, const int32_t *sched, int32_t n_sched)
{
    const struct small *sm = R->sm;
    struct kv_cache *c = R->c;
    const size_t resident0 = kv_cache_resident_bytes(c);
    int32_t len = 0;
    int full = 0;
    for (int32_t i = 0; i < n_sched && !full; i++) {
        /* the chunk, or token by token where a chunk is refused (no
         * KV_CAP_CHUNKED_APPEND); KV_ERR_FULL ends the schedule */
        const int32_t n = sched[i];
        enum kv_status st = KV_OK;
        int r = small_step(R, len, n, &st);
        const int one_by_one = r == 2 && st == KV_ERR_INVALID;
        for (int32_t j = 0; j < (one_by_one ? n : 1) && !full; j++) {
            if (one_by_one)
                r = small_step(R, len, 1, &st);
            if (r == 1)
                return 1;
            full = r == 2;
            len += full ? 0 : one_by_one ? 1 : n;
            if (!full && small_memory(R, len, resident0))
                return 1;
        }
    }
    if (getenv("KV_TEST_VERBOSE") != NULL)
        fprintf(stderr, "small:   %d of %d tokens%s\n", len, sm->T, full ? ", then full" : "");
    if (full || !kv_cache_has(c, KV_CAP_KEEPS_HISTORY))
        return 0;
    /* an evicting cache with small sizes did evict */
    SOFT(R->vd, sm->n_scaled == 0 || !kv_cache_has(c, KV_CAP_EVICTS) || R->held_min < len,
         "%s: after %d tokens every layer's view still holds all of them: it never evicted",
         R->name, len);
    /* full at max_len: the next position is refused, nothing changed */
    if (kv_cache_has(c, KV_CAP_BOUNDED) && len == c->cfg.max_len) {
        feed_chunk(&R->f, 0, len, 1);
        const size_t copied = kv_cache_copied_bytes(c);
        const enum kv_status st = kv_cache_update(c, 0, R->f.ck, R->f.cv, 1, len);
        SOFT(R->vd, st == KV_ERR_FULL, "%s: bounded, full at max_len %d, yet position %d: %s",
             R->name, len, len, kv_status_str(st));
        SOFT(R->vd, kv_cache_seq_len(c, 0) == len && kv_cache_copied_bytes(c) == copied,
             "%s: refusing position %d as full changed the cache", R->name, len);
    }
    return 0;
}

/* Every check on one small configuration: the verdict. */
static struct verdict small_verdict(struct variant var, int shrink, uint64_t seed)
{
    struct verdict vd = {0};
    struct small sm;
    if (!small_make(&sm, var, shrink))
        return vd; /* the variant does not take the small shape */
    char name[400];
    snprintf(name, sizeof name, "%s (%s)", var.preset != NULL ? var.preset : var.ops->name,
             sm.desc);
    struct small_run R = {.vd = &vd, .sm = &sm, .name = name, .t_max = sm.T + 1,
                          .n_heads = 2 * sm.shape.n_kv_heads};
    const struct conf *cfg = &sm.shape;
    const size_t qn = (size_t)cfg->batch * R.t_max * R.n_heads * cfg->head_dim;
    const size_t kn = (size_t)cfg->batch * R.t_max * cfg->n_kv_heads * cfg->head_dim;
    R.qh = malloc(qn * sizeof(float));
    R.q = malloc(qn * sizeof(float));
    R.out = malloc(qn * sizeof(float));
    R.ref = malloc(qn * sizeof(float));
    R.want = malloc(qn * sizeof(float));
    R.gk = malloc(kn * sizeof(float));
    R.gv = malloc(kn * sizeof(float));
    R.gpos = malloc((size_t)cfg->batch * cfg->n_kv_heads * R.t_max * sizeof(int32_t));
    R.mark = malloc((size_t)cfg->batch * cfg->n_kv_heads * (R.t_max + 1));
    int32_t *sched = malloc((size_t)sm.T * sizeof(int32_t));
    ck_assert(R.qh && R.q && R.out && R.ref && R.want && R.gk && R.gv && R.gpos && R.mark &&
              sched);
    const struct kv_cache_config cc = cc_of(cfg);
    if (getenv("KV_TEST_VERBOSE") != NULL)
        fprintf(stderr, "small: %s, %d parameters set small, %d tokens, max_len %d\n", name,
                sm.n_scaled, sm.T, cfg->max_len);
    for (int32_t k = 0; k < SMALL_N_SCHEDS && vd.fails == 0; k++) {
        feed_init(&R.f, cfg, R.t_max, seed + 7 * (uint64_t)k);
        for (size_t i = 0; i < qn; i++)
            R.qh[i] = rng_uniform();
        const enum kv_status st = kv_cache_create(&R.c, var.ops, &cc, sm.blk.b);
        if (st != KV_OK)
            verdict_fail(&vd, "%s: refuses the configuration its check accepted: %s", name,
                         kv_status_str(st));
        else
            small_schedule(&R, sched, small_sched(k, sm.T, sm.biggest, sched));
        kv_cache_destroy(R.c);
        R.c = NULL;
        feed_free(&R.f);
    }
    kv_alloc_fail_at(0, 0);
    free(sched);
    free(R.qh);
    free(R.q);
    free(R.out);
    free(R.ref);
    free(R.want);
    free(R.gk);
    free(R.gv);
    free(R.gpos);
    free(R.mark);
    return vd;
}

/* Every variant at small sizes. */
START_TEST(test_conformance_small)
{
    const struct variant var = variant_at(_i);
    const int64_t live0 = kv_alloc_live();
    const struct verdict vd = small_verdict(var, 1, 5000 + (uint64_t)_i * 31);
    ck_assert_msg(vd.fails == 0, "%d failed checks, the first: %s", vd.fails, vd.first);
    ck_assert_int_eq(kv_alloc_live(), live0);
}
END_TEST

/*
 * The proof that the small configuration closes the gap: each broken
 * double, registered like any strategy and found through the registry,
 * passes these checks at its defaults (budget 256: it never evicts within
 * the tokens fed, the old blind spot) and fails them at the budget the
 * table search finds, with the failure its bug must cause; the correct
 * double of the same shape passes. (Registered here only, so the normal
 * run never walks them; in a CK_FORK=no run this test comes last.)
 */
START_TEST(test_conformance_small_catches)
{
    const struct {
        const struct kv_strategy_ops *ops;
        const char *symptom; /* in the first failure's message */
    } broken[] = {
        {&tb_wide_ops, "is missing"},
        {&tb_victim_ops, "differs from what was written"},
        {&tb_more_ops, "> bytes_for"},
    };
    const int64_t live0 = kv_alloc_live();
    for (size_t i = 0; i < sizeof broken / sizeof broken[0]; i++) {
        const char *name = broken[i].ops->name;
        if (kv_strategy_find(name) == NULL)
            ck_assert_int_eq(kv_strategy_register(broken[i].ops), KV_OK);
        const struct variant var = {kv_strategy_find(name), NULL, NULL};
        ck_assert_ptr_eq(var.ops, broken[i].ops);
        const struct verdict at_default = small_verdict(var, 0, 77);
        ck_assert_msg(at_default.fails == 0, "%s at its defaults: %s", name, at_default.first);
        const struct verdict small = small_verdict(var, 1, 77);
        ck_assert_msg(small.fails > 0, "%s passes the small configuration", name);
        ck_assert_msg(strstr(small.first, broken[i].symptom) != NULL, "%s: '%s' not in: %s",
                      name, broken[i].symptom, small.first);
        ck_assert_msg(strstr(small.first, "budget=3") != NULL, "%s: %s", name, small.first);
        if (getenv("KV_TEST_VERBOSE") != NULL)
            fprintf(stderr, "%s: %d failed checks, the first: %s\n", name, small.fails,
                    small.first);
    }
    const struct verdict good = small_verdict((struct variant){&tb_ops, NULL, NULL}, 1, 77);
    ck_assert_msg(good.fails == 0, "%s", good.first);
    ck_assert_int_eq(kv_alloc_live(), live0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Registry and wrapper defaults                                            */

START_TEST(test_registry)
{
    static const char *const names[] = {"none", "dynamic", "dynamic-concat",
                                        "static", "sliding", "quantized"};
    const int32_t n = kv_strategy_count();
    ck_assert_int_ge(n, 6);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const struct kv_strategy_ops *ops = kv_strategy_find(names[i]);
        ck_assert_ptr_nonnull(ops);
        ck_assert_str_eq(ops->name, names[i]);
    }
    for (int32_t i = 0; i < n; i++) {
        const struct kv_strategy_ops *ops = kv_strategy_at(i);
        ck_assert_ptr_nonnull(ops);
        ck_assert_ptr_eq(kv_strategy_find(ops->name), ops); /* names unique */
        ck_assert(ops->description != NULL && ops->description[0] != '\0');
        ck_assert(ops->init && ops->free && ops->update && ops->view && ops->seq_len &&
                  ops->resident_bytes && ops->copied_bytes);
        ck_assert_uint_gt(ops->state_size, 0);
        ck_assert_int_eq((ops->caps & KV_CAP_KEEPS_HISTORY) != 0, strcmp(ops->name, "none") != 0);
    }
    ck_assert_ptr_null(kv_strategy_at(-1));
    ck_assert_ptr_null(kv_strategy_at(n));
    /* registration refuses a taken name (a strategy's or a preset's), an
     * incomplete table and a capability without its method */
    struct kv_strategy_ops dupl = *kv_strategy_at(0);
    ck_assert_int_eq(kv_strategy_register(&dupl), KV_ERR_INVALID);
    dupl.name = "quantized-int8";
    ck_assert_int_eq(kv_strategy_register(&dupl), KV_ERR_INVALID);
    dupl.name = "fresh-name";
    dupl.view = NULL;
    ck_assert_int_eq(kv_strategy_register(&dupl), KV_ERR_INVALID);
    dupl = *kv_strategy_find("dynamic");
    dupl.name = "fresh-name";
    dupl.crop = NULL;
    ck_assert_int_eq(kv_strategy_register(&dupl), KV_ERR_INVALID);
    dupl = *kv_strategy_find("dynamic");
    dupl.name = "fresh-name";
    dupl.params_size = KV_PARAMS_MAX_BYTES + 1; /* callers hold parameters on the stack */
    ck_assert_int_eq(kv_strategy_register(&dupl), KV_ERR_INVALID);
    ck_assert_int_eq(kv_strategy_register(NULL), KV_ERR_INVALID);
    ck_assert_int_eq(kv_strategy_count(), n);
    ck_assert_ptr_null(kv_strategy_find("nope"));
    ck_assert_ptr_null(kv_strategy_find(""));
    ck_assert_ptr_null(kv_strategy_find(NULL));
}
END_TEST

/* A minimal strategy with every optional method NULL, to test the defaults. */
struct probe_state {
    int32_t inits, frees, updates;
    void *mem;
};
static int32_t probe_total_inits, probe_total_frees;

static enum kv_status probe_init(void *state, const struct kv_cache_config *cfg,
                                 const void *params)
{
    struct probe_state *s = state;
    (void)cfg, (void)params;
    ck_assert_int_eq(s->inits + s->frees + s->updates, 0); /* zeroed state */
    s->inits++;
    probe_total_inits++;
    s->mem = kv_alloc(100);
    return s->mem ? KV_OK : KV_ERR_NOMEM;
}

static void probe_free(void *state)
{
    struct probe_state *s = state;
    kv_free(s->mem);
    s->mem = NULL;
    probe_total_frees++;
}

static enum kv_status probe_update(void *state, int32_t layer, const float *k, const float *v,
                                   int32_t n, int32_t pos0)
{
    (void)layer, (void)k, (void)v, (void)n, (void)pos0;
    ((struct probe_state *)state)->updates++;
    return KV_OK;
}

static const struct kv_strategy_ops probe_ops = {
    .name = "probe",
    .description = "test double",
    .caps = KV_CAP_KEEPS_HISTORY,
    .state_size = sizeof(struct probe_state),
    .init = probe_init,
    .free = probe_free,
    .update = probe_update,
};

START_TEST(test_wrapper_defaults)
{
    const int64_t live0 = kv_alloc_live();
    struct kv_cache *c = NULL;
    float kv[16] = {0};
    probe_total_inits = probe_total_frees = 0;
    ck_assert_int_eq(tcreate(&c, &probe_ops, &conf_cfgs[0]), KV_OK);
    ck_assert_int_eq(kv_cache_mask_window(c), 0);
    ck_assert_int_eq(kv_cache_update(c, 0, kv, kv, 1, 0), KV_OK);
    ck_assert_int_eq(((struct probe_state *)c->state)->updates, 1);
    ck_assert_int_eq(n_view(c, 0), 0);
    ck_assert_int_eq(kv_cache_seq_len(c, 0), 0);
    ck_assert_uint_eq(kv_cache_resident_bytes(c), 0);
    ck_assert_uint_eq(kv_cache_copied_bytes(c), 0);
    /* default reset: free, zero the state, init again */
    ck_assert_int_eq(kv_cache_reset(c), KV_OK);
    ck_assert_int_eq(probe_total_frees, 1);
    ck_assert_int_eq(probe_total_inits, 2);
    ck_assert_int_eq(((struct probe_state *)c->state)->updates, 0);
    kv_cache_destroy(c);
    ck_assert_int_eq(probe_total_frees, 2);
    ck_assert_int_eq(kv_alloc_live(), live0);
    /* a table without init or update is refused */
    struct kv_strategy_ops broken = probe_ops;
    broken.init = NULL;
    ck_assert_int_eq(tcreate(&c, &broken, &conf_cfgs[0]), KV_ERR_INVALID);
    broken = probe_ops;
    broken.update = NULL;
    ck_assert_int_eq(tcreate(&c, &broken, &conf_cfgs[0]), KV_ERR_INVALID);
    ck_assert_int_eq(kv_alloc_live(), live0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Per-strategy: memory accounting in closed form                           */

/* Bytes of one token of one layer, K and V, f32, whole batch. */
static size_t f32_token_bytes(const struct conf *c)
{
    return 2 * (size_t)c->batch * c->n_kv_heads * c->head_dim * sizeof(float);
}

static struct kv_cache *make(const char *name, const struct conf *cfg)
{
    struct kv_cache *c = NULL;
    const struct kv_strategy_ops *ops = kv_strategy_find(name);
    ck_assert_ptr_nonnull(ops);
    ck_assert_int_eq(tcreate(&c, ops, cfg), KV_OK);
    return c;
}

/* Feeds single tokens until every layer holds `to` (from `from`). */
static void feed_tokens(struct feed *f, struct kv_cache *c, int32_t from, int32_t to)
{
    for (int32_t p = from; p < to; p++)
        ck_assert_int_eq(feed_step(f, c, p, 1), KV_OK);
}

static const struct conf mem_cfg = {
    .n_layers = 2, .batch = 2, .n_kv_heads = 3, .head_dim = 8, .max_len = 100,
    .window = 6, .bits = 8, .group = 4, .residual = 5};

START_TEST(test_none_keeps_nothing)
{
    struct kv_cache *c = make("none", &mem_cfg);
    struct kv_view vw;
    const struct kv_span *sp;
    struct feed f;
    feed_init(&f, &mem_cfg, 30, 3);
    for (int32_t t = 1; t <= 30; t += 7) {
        ck_assert_int_eq(feed_step(&f, c, t - 1, 1), KV_OK); /* re-feeds [0, t) */
        ck_assert_uint_eq(kv_cache_resident_bytes(c), 0);
        ck_assert_uint_eq(kv_cache_copied_bytes(c), 0);
        /* the span is the caller's own buffer, in the model's layout */
        ck_assert_int_eq(kv_cache_view(c, mem_cfg.n_layers - 1, &vw), KV_OK);
        ck_assert_int_eq(vw.n_spans, 1);
        sp = vw.spans;
        ck_assert_ptr_eq(sp[0].k.data, f.ck);
        ck_assert_ptr_eq(sp[0].v.data, f.cv);
        for (int kv = 0; kv < 2; kv++) {
            const struct kv_tensor *td = kv ? &sp[0].v : &sp[0].k;
            ck_assert_uint_eq(td->row_stride, (size_t)mem_cfg.n_kv_heads * mem_cfg.head_dim * 4);
            ck_assert_uint_eq(td->head_stride, (size_t)mem_cfg.head_dim * 4);
            ck_assert_uint_eq(td->seq_stride, (size_t)t * mem_cfg.n_kv_heads * mem_cfg.head_dim * 4);
        }
    }
    /* it keeps no history, so any pos0 is taken and shown as given */
    ck_assert_int_eq(kv_cache_update(c, 0, f.ck, f.cv, 2, 5), KV_OK);
    ck_assert_int_eq(kv_cache_view(c, 0, &vw), KV_OK);
    ck_assert_int_eq(vw.n_spans, 1);
    sp = vw.spans;
    ck_assert_int_eq(sp[0].pos0, 5);
    ck_assert_int_eq(sp[0].n_tokens, 2);
    ck_assert_int_eq(kv_cache_seq_len(c, 0), 0);
    kv_cache_destroy(c);
    feed_free(&f);
}
END_TEST

START_TEST(test_static_memory_and_full)
{
    const struct conf *cfg = &mem_cfg;
    const size_t flat = (size_t)cfg->n_layers * cfg->max_len * f32_token_bytes(cfg);
    struct kv_cache *c = make("static", cfg);
    struct feed f;
    feed_init(&f, cfg, cfg->max_len + 3, 4);
    ck_assert_uint_eq(kv_cache_resident_bytes(c), flat); /* preallocated */
    ck_assert_int_eq(feed_step(&f, c, 0, 1), KV_OK);
    ck_assert_uint_eq(kv_cache_resident_bytes(c), flat);
    ck_assert_int_eq(feed_step(&f, c, 1, 40), KV_OK);
    feed_tokens(&f, c, 41, cfg->max_len - 2);
    ck_assert_uint_eq(kv_cache_resident_bytes(c), flat);
    ck_assert_uint_eq(kv_cache_copied_bytes(c),
                      (size_t)cfg->n_layers * (cfg->max_len - 2) * f32_token_bytes(cfg));
    /* 3 tokens do not fit in the last 2 slots: refused, nothing written */
    const size_t copied = kv_cache_copied_bytes(c);
    ck_assert_int_eq(feed_step(&f, c, cfg->max_len - 2, 3), KV_ERR_FULL);
    for (int32_t l = 0; l < cfg->n_layers; l++) {
        ck_assert_int_eq(kv_cache_seq_len(c, l), cfg->max_len - 2);
        struct seen s = check_view(&f, c, l, cfg->max_len - 2);
        ck_assert_int_eq(s.count, cfg->max_len - 2);
    }
    ck_assert_uint_eq(kv_cache_copied_bytes(c), copied);
    /* the last 2 fit; then one more is refused */
    ck_assert_int_eq(feed_step(&f, c, cfg->max_len - 2, 2), KV_OK);
    ck_assert_int_eq(feed_step(&f, c, cfg->max_len, 1), KV_ERR_FULL);
    ck_assert_int_eq(kv_cache_seq_len(c, 0), cfg->max_len);
    struct seen s = check_view(&f, c, 0, cfg->max_len);
    ck_assert_int_eq(s.count, cfg->max_len);
    ck_assert_uint_eq(kv_cache_resident_bytes(c), flat);
    /* reset keeps the storage */
    ck_assert_int_eq(kv_cache_reset(c), KV_OK);
    ck_assert_uint_eq(kv_cache_resident_bytes(c), flat);
    ck_assert_int_eq(feed_step(&f, c, 0, 3), KV_OK);
    kv_cache_destroy(c);
    feed_free(&f);
}
END_TEST

START_TEST(test_sliding_memory_and_contents)
{
    for (int32_t w = 1; w <= 7; w += 3) {
        struct conf cfg = mem_cfg;
        cfg.window = w;
        const size_t flat = (size_t)cfg.n_layers * w * f32_token_bytes(&cfg);
        const int32_t t_max = 4 * w + 3;
        struct kv_cache *c = make("sliding", &cfg);
        struct feed f;
        feed_init(&f, &cfg, t_max, 10 + (uint64_t)w);
        ck_assert_int_eq(kv_cache_mask_window(c), w);
        ck_assert_uint_eq(kv_cache_resident_bytes(c), flat);
        for (int32_t t = 1; t <= t_max; t++) {
            ck_assert_int_eq(feed_step(&f, c, t - 1, 1), KV_OK);
            ck_assert_uint_eq(kv_cache_resident_bytes(c), flat);
            ck_assert_uint_eq(kv_cache_copied_bytes(c), (size_t)cfg.n_layers * t * f32_token_bytes(&cfg));
            for (int32_t l = 0; l < cfg.n_layers; l++) { /* exactly the last w */
                struct seen s = check_view(&f, c, l, t);
                ck_assert_int_eq(s.count, t < w ? t : w);
                ck_assert_int_eq(s.lo, t < w ? 0 : t - w);
                ck_assert_int_le(s.n_spans, 2);
            }
        }
        kv_cache_destroy(c);
        feed_free(&f);
    }
}
END_TEST

START_TEST(test_sliding_prefill_and_chunks)
{
    struct conf cfg = mem_cfg; /* window 6 */
    const int32_t w = cfg.window;
    struct feed f;
    feed_init(&f, &cfg, 40, 11);
    /* prefill longer than the window: this step sees the whole prompt... */
    struct kv_cache *c = make("sliding", &cfg);
    ck_assert_int_eq(feed_step(&f, c, 0, 2 * w + 1), KV_OK);
    struct kv_view vw;
    ck_assert_int_eq(kv_cache_view(c, cfg.n_layers - 1, &vw), KV_OK);
    ck_assert_int_eq(vw.n_spans, 1);
    ck_assert_int_eq(vw.mask.window, w);
    ck_assert_ptr_eq(vw.spans[0].k.data, f.ck); /* pass-through of this step's k_new */
    ck_assert_int_eq(vw.spans[0].n_tokens, 2 * w + 1);
    ck_assert_uint_eq(kv_cache_copied_bytes(c), (size_t)cfg.n_layers * w * f32_token_bytes(&cfg));
    /* ...and the ring kept its last w tokens for the next decode step */
    ck_assert_int_eq(feed_step(&f, c, 2 * w + 1, 1), KV_OK);
    for (int32_t l = 0; l < cfg.n_layers; l++) {
        struct seen s = check_view(&f, c, l, 2 * w + 2);
        ck_assert_int_eq(s.count, w);
        ck_assert_int_eq(s.lo, w + 2);
    }
    /* a multi-token update that would evict is refused, nothing changes */
    const size_t copied = kv_cache_copied_bytes(c);
    ck_assert_int_eq(feed_step(&f, c, 2 * w + 2, 2), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_seq_len(c, 0), 2 * w + 2);
    ck_assert_uint_eq(kv_cache_copied_bytes(c), copied);
    struct seen s = check_view(&f, c, 0, 2 * w + 2);
    ck_assert_int_eq(s.lo, w + 2);
    kv_cache_destroy(c);
    /* chunks that fit the ring without evicting are taken */
    c = make("sliding", &cfg);
    ck_assert_int_eq(feed_step(&f, c, 0, 2), KV_OK);
    ck_assert_int_eq(feed_step(&f, c, 2, w - 2), KV_OK);
    ck_assert_int_eq(feed_step(&f, c, w, 1), KV_OK);
    s = check_view(&f, c, 0, w + 1);
    ck_assert_int_eq(s.count, w);
    kv_cache_destroy(c);
    feed_free(&f);
}
END_TEST

/* Closed form of `dynamic`: capacity next_pow2(max(16, T)), copies T + growths. */
START_TEST(test_dynamic_memory)
{
    const struct conf *cfg = &mem_cfg;
    const size_t tok = f32_token_bytes(cfg) * (size_t)cfg->n_layers;
    struct kv_cache *c = make("dynamic", cfg);
    struct feed f;
    feed_init(&f, cfg, 100, 12);
    ck_assert_uint_eq(kv_cache_resident_bytes(c), 0);
    size_t growth_rows = 0; /* rows copied by growths: 16 + 32 + ... below T */
    for (int32_t t = 1; t <= 100; t++) {
        ck_assert_int_eq(feed_step(&f, c, t - 1, 1), KV_OK);
        size_t cap = 16;
        while (cap < (size_t)t)
            cap *= 2;
        if (t > 16 && (t - 1) == (int32_t)(cap / 2))
            growth_rows += (size_t)(t - 1); /* crossed a power of two */
        ck_assert_uint_eq(kv_cache_resident_bytes(c), cap * tok);
        ck_assert_uint_eq(kv_cache_copied_bytes(c), ((size_t)t + growth_rows) * tok);
    }
    ck_assert_uint_eq(growth_rows, 16 + 32 + 64); /* growths at 17, 33, 65 */
    /* a chunk jumps straight to the power of two that holds it */
    ck_assert_int_eq(kv_cache_reset(c), KV_OK);
    ck_assert_uint_eq(kv_cache_resident_bytes(c), 0);
    ck_assert_int_eq(feed_step(&f, c, 0, 3), KV_OK);
    ck_assert_uint_eq(kv_cache_resident_bytes(c), 16 * tok);
    ck_assert_int_eq(feed_step(&f, c, 3, 40), KV_OK);
    ck_assert_uint_eq(kv_cache_resident_bytes(c), 64 * tok);
    ck_assert_uint_eq(kv_cache_copied_bytes(c), (3 + 3 + 40) * tok);
    kv_cache_destroy(c);
    feed_free(&f);
}
END_TEST

/* `dynamic-concat` copies the arithmetic series 1 + 2 + ... + T. */
START_TEST(test_concat_memory)
{
    const struct conf *cfg = &mem_cfg;
    const size_t tok = f32_token_bytes(cfg) * (size_t)cfg->n_layers;
    struct kv_cache *c = make("dynamic-concat", cfg);
    struct feed f;
    feed_init(&f, cfg, 60, 13);
    for (int32_t t = 1; t <= 60; t++) {
        ck_assert_int_eq(feed_step(&f, c, t - 1, 1), KV_OK);
        ck_assert_uint_eq(kv_cache_resident_bytes(c), (size_t)t * tok);
        ck_assert_uint_eq(kv_cache_copied_bytes(c), (size_t)t * (t + 1) / 2 * tok);
    }
    kv_cache_destroy(c);
    feed_free(&f);
}
END_TEST

/* Positions must stay within max_len for the strategies that keep all. */
START_TEST(test_max_len_refused)
{
    static const char *const names[] = {"dynamic", "dynamic-concat", "quantized", "none"};
    struct conf cfg = mem_cfg;
    cfg.max_len = 20;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        struct kv_cache *c = make(names[i], &cfg);
        struct feed f;
        feed_init(&f, &cfg, 21, 14);
        feed_tokens(&f, c, 0, 20);
        const size_t copied = kv_cache_copied_bytes(c);
        ck_assert_int_eq(feed_step(&f, c, 20, 1), KV_ERR_FULL);
        ck_assert_uint_eq(kv_cache_copied_bytes(c), copied);
        kv_cache_destroy(c);
        feed_free(&f);
    }
    /* sliding never fails for length */
    struct kv_cache *c = make("sliding", &cfg);
    struct feed f;
    feed_init(&f, &cfg, 30, 15);
    feed_tokens(&f, c, 0, 30);
    kv_cache_destroy(c);
    feed_free(&f);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Per-strategy: quantized                                                  */

/* Quantized tokens after T single-token updates: 0 up to R, then in steps
 * of ceil(R/2) each time the residual overflows. */
static int32_t quant_nq_decode(int32_t t, int32_t r)
{
    const int32_t c = (r + 1) / 2;
    return t <= r ? 0 : c * ((t - r + c - 1) / c);
}

static size_t quant_pow2_cap(int32_t nq)
{
    if (nq == 0)
        return 0;
    size_t cap = 16;
    while (cap < (size_t)nq)
        cap *= 2;
    return cap;
}

/* Closed-form resident bytes: packed codes + qparams + f32 residual; kivi
 * keys: one row of head_dim (scale, min) pairs per block of `group` tokens
 * of the capacity instead of the per-token pairs. */
static size_t quant_resident(const struct conf *cfg, int32_t nq)
{
    const size_t code_row = (size_t)cfg->head_dim * cfg->bits / 8;
    const size_t qp_row = (size_t)(cfg->head_dim / cfg->group) * 2 * sizeof(float);
    const size_t per = 2 * (size_t)cfg->batch * cfg->n_kv_heads; /* K,V x sequences x heads */
    const size_t cap = quant_pow2_cap(nq);
    if (cfg->layout == 1) { /* the residual holds at least one block */
        const size_t blocks = (cap + (size_t)cfg->group - 1) / (size_t)cfg->group;
        const size_t r = (size_t)(cfg->residual > cfg->group ? cfg->residual : cfg->group);
        return (size_t)cfg->n_layers * (per / 2) *
               (cap * (2 * code_row + qp_row) + blocks * cfg->head_dim * 8 +
                2 * r * cfg->head_dim * 4);
    }
    return (size_t)cfg->n_layers * per *
           (cap * (code_row + qp_row) + (size_t)cfg->residual * cfg->head_dim * 4);
}

static const struct conf quant_cfgs[] = {
    {.n_layers = 2, .batch = 2, .n_kv_heads = 2, .head_dim = 16, .max_len = 0,
     .bits = 8, .group = 8, .residual = 5},
    {.n_layers = 1, .batch = 3, .n_kv_heads = 1, .head_dim = 32, .max_len = 0,
     .bits = 4, .group = 16, .residual = 1},
    {.n_layers = 2, .batch = 1, .n_kv_heads = 2, .head_dim = 8, .max_len = 0,
     .bits = 4, .group = 2, .residual = 8},
    {.n_layers = 1, .batch = 1, .n_kv_heads = 1, .head_dim = 64, .max_len = 0,
     .bits = 8, .group = 64, .residual = 32},
    {.n_layers = 2, .batch = 2, .n_kv_heads = 2, .head_dim = 16, .max_len = 0,
     .bits = 2, .group = 8, .residual = 6},
    {.n_layers = 1, .batch = 1, .n_kv_heads = 2, .head_dim = 12, .max_len = 0,
     .bits = 2, .group = 3, .residual = 1},
};
#define N_QUANT_CFGS ((int32_t)(sizeof quant_cfgs / sizeof quant_cfgs[0]))

/* Token by token: schedule of the residual, resident and copied bytes. */
START_TEST(test_quantized_decode_accounting)
{
    const struct conf *cfg = &quant_cfgs[_i];
    const int32_t r = cfg->residual, half = (r + 1) / 2, t_max = 3 * r + 40;
    const size_t code_row = (size_t)cfg->head_dim * cfg->bits / 8;
    const size_t qp_row = (size_t)(cfg->head_dim / cfg->group) * 8;
    const size_t per = 2 * (size_t)cfg->batch * cfg->n_kv_heads * cfg->n_layers;
    const size_t f32_tok = per * cfg->head_dim * 4, q_tok = per * (code_row + qp_row);
    struct kv_cache *c = make("quantized", cfg);
    struct feed f;
    feed_init(&f, cfg, t_max, 20 + (uint64_t)_i);
    ck_assert_uint_eq(kv_cache_resident_bytes(c), quant_resident(cfg, 0));
    /* independent simulation of the bytes written, one token at a time */
    size_t copied = 0, qcap = 0;
    int32_t nq = 0, nr = 0;
    for (int32_t t = 1; t <= t_max; t++) {
        if (nr < r) {
            copied += f32_tok; /* the new token lands in the residual */
            nr++;
        } else {
            if ((size_t)(nq + half) > qcap) { /* the store grows first */
                copied += (size_t)nq * q_tok;
                qcap = quant_pow2_cap(nq + half);
            }
            copied += (size_t)half * q_tok;                  /* oldest half quantized */
            copied += (size_t)(r - half + 1) * f32_tok;      /* rest shifted + new one */
            nq += half;
            nr = r - half + 1;
        }
        ck_assert_int_eq(feed_step(&f, c, t - 1, 1), KV_OK);
        ck_assert_int_eq(nq, quant_nq_decode(t, r));
        for (int32_t l = 0; l < cfg->n_layers; l++) {
            struct seen s = check_view(&f, c, l, t);
            ck_assert_int_eq(s.n_quant, nq);
            ck_assert_int_eq(s.count, t);
            ck_assert_int_eq(s.n_spans, (nq > 0) + (nr > 0));
        }
        ck_assert_uint_eq(kv_cache_resident_bytes(c), quant_resident(cfg, nq));
        ck_assert_uint_eq(kv_cache_copied_bytes(c), copied);
    }
    kv_cache_destroy(c);
    feed_free(&f);
}
END_TEST

/* Span layout: dtype from bits, packed row and qparams strides. */
START_TEST(test_quantized_span_layout)
{
    const struct conf *cfg = &quant_cfgs[_i];
    struct kv_cache *c = make("quantized", cfg);
    struct feed f;
    const int32_t t = cfg->residual + 20;
    feed_init(&f, cfg, t, 30);
    ck_assert_int_eq(feed_step(&f, c, 0, t), KV_OK); /* prefill */
    struct kv_view vw;
    ck_assert_int_eq(kv_cache_view(c, 0, &vw), KV_OK);
    ck_assert_int_eq(vw.n_spans, 2);
    const struct kv_span *sp = vw.spans;
    for (int kv = 0; kv < 2; kv++) {
        const struct kv_tensor *td = kv ? &sp[0].v : &sp[0].k;
        ck_assert_int_eq(td->dtype, cfg->bits == 8   ? KV_DTYPE_Q8
                                    : cfg->bits == 4 ? KV_DTYPE_Q4
                                                     : KV_DTYPE_Q2);
        ck_assert_int_eq(td->axis, KV_QAXIS_TOKEN);
        ck_assert_int_eq(td->group, cfg->group);
        ck_assert_uint_eq(td->row_stride, (size_t)cfg->head_dim * cfg->bits / 8);
        ck_assert_uint_eq(td->qp_row_stride, (size_t)(cfg->head_dim / cfg->group) * 8);
        ck_assert_uint_eq(td->head_stride, quant_pow2_cap(t - cfg->residual) * td->row_stride);
        ck_assert_uint_eq(td->qp_head_stride, quant_pow2_cap(t - cfg->residual) * td->qp_row_stride);
    }
    ck_assert_int_eq(sp[0].pos0, 0);
    ck_assert_int_eq(sp[0].n_tokens, t - cfg->residual); /* all but the last R */
    ck_assert_int_eq(sp[1].k.dtype, KV_DTYPE_F32);
    ck_assert_int_eq(sp[1].v.dtype, KV_DTYPE_F32);
    ck_assert_int_eq(sp[1].pos0, t - cfg->residual);
    ck_assert_int_eq(sp[1].n_tokens, cfg->residual);
    ck_assert_ptr_null(sp[1].k.qp);
    ck_assert_uint_eq(kv_cache_resident_bytes(c), quant_resident(cfg, t - cfg->residual));
    /* a short prefill stays entirely in f32 */
    ck_assert_int_eq(kv_cache_reset(c), KV_OK);
    ck_assert_int_eq(feed_step(&f, c, 0, cfg->residual), KV_OK);
    ck_assert_int_eq(kv_cache_view(c, 0, &vw), KV_OK);
    ck_assert_int_eq(vw.n_spans, 1);
    ck_assert_int_eq(vw.spans[0].k.dtype, KV_DTYPE_F32);
    ck_assert_uint_eq(kv_cache_resident_bytes(c), quant_resident(cfg, 0));
    kv_cache_destroy(c);
    feed_free(&f);
}
END_TEST

/* Chunks: the residual never exceeds R, never holds fewer than it could. */
START_TEST(test_quantized_chunks)
{
    const struct conf *cfg = &quant_cfgs[_i];
    const int32_t r = cfg->residual, half = (r + 1) / 2;
    struct kv_cache *c = make("quantized", cfg);
    const int32_t n_sched = (int32_t)(sizeof sched_chunks / sizeof sched_chunks[0]);
    struct feed f;
    feed_init(&f, cfg, sched_total(sched_chunks, n_sched), 31);
    int32_t len = 0, nq = 0;
    for (int32_t i = 0; i < n_sched; i++) {
        const int32_t n = sched_chunks[i];
        const int32_t nr = len - nq, total = nr + n;
        int32_t nqz = 0; /* the rule in quantized.c's opening comment */
        if (total > r) {
            const int32_t flush = half < nr ? half : nr;
            nqz = total - r > flush ? total - r : flush;
        }
        ck_assert_int_eq(feed_step(&f, c, len, n), KV_OK);
        len += n;
        nq += nqz;
        struct seen s = check_view(&f, c, 0, len);
        ck_assert_int_eq(s.n_quant, nq);
        ck_assert_int_le(len - nq, r);
        ck_assert_uint_eq(kv_cache_resident_bytes(c), quant_resident(cfg, nq));
    }
    kv_cache_destroy(c);
    feed_free(&f);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Per-strategy: quantized, the kivi layout                                 */

static const struct conf kivi_cfgs[] = {
    {.n_layers = 2, .batch = 2, .n_kv_heads = 2, .head_dim = 16, .max_len = 0,
     .bits = 2, .group = 4, .residual = 6, .layout = 1},
    {.n_layers = 1, .batch = 1, .n_kv_heads = 1, .head_dim = 8, .max_len = 0,
     .bits = 4, .group = 8, .residual = 8, .layout = 1},
    {.n_layers = 1, .batch = 2, .n_kv_heads = 1, .head_dim = 32, .max_len = 0,
     .bits = 8, .group = 16, .residual = 40, .layout = 1},
    {.n_layers = 2, .batch = 1, .n_kv_heads = 3, .head_dim = 8, .max_len = 0,
     .bits = 2, .group = 2, .residual = 3, .layout = 1},
    {.n_layers = 1, .batch = 2, .n_kv_heads = 2, .head_dim = 16, .max_len = 0,
     .bits = 4, .group = 8, .residual = 3, .layout = 1}, /* the residual holds a block */
};
#define N_KIVI_CFGS ((int32_t)(sizeof kivi_cfgs / sizeof kivi_cfgs[0]))

/* The kivi flush rule of quantized.c's opening comment: whole blocks of G,
 * at least what does not fit, at least half the residual rounded down. */
static int32_t kivi_n_flush(const struct conf *cfg, int32_t nr, int32_t n_new)
{
    const int32_t G = cfg->group, r = cfg->residual > G ? cfg->residual : G;
    const int32_t total = nr + n_new;
    if (total <= r)
        return 0;
    const int32_t half = (r + 1) / 2, flush = half < nr ? half : nr;
    const int32_t a = (total - r + G - 1) / G * G, f = flush / G * G;
    return a > f ? a : f;
}

/* Token by token: the residual's schedule in whole key blocks, resident and
 * copied bytes against an independent simulation, and the span layout
 * (keys per channel: one row of head_dim pairs per block of G tokens). */
START_TEST(test_kivi_decode_accounting)
{
    const struct conf *cfg = &kivi_cfgs[_i];
    const int32_t G = cfg->group, d = cfg->head_dim;
    const int32_t r = cfg->residual > G ? cfg->residual : G, t_max = 4 * r + 23;
    const size_t code_row = (size_t)d * cfg->bits / 8, qp_row = (size_t)(d / G) * 8;
    const size_t per = (size_t)cfg->batch * cfg->n_kv_heads * cfg->n_layers;
    const size_t f32_tok = 2 * per * d * 4, q_tok = per * (2 * code_row + qp_row);
    const size_t blk = per * (size_t)d * 8; /* one block's key pairs */
    struct kv_cache *c = make("quantized", cfg);
    struct feed f;
    feed_init(&f, cfg, t_max, 50 + (uint64_t)_i);
    char label[32], want[32];
    kv_cache_label(c, label, sizeof label);
    snprintf(want, sizeof want, "kivi-%d", cfg->bits);
    ck_assert_str_eq(label, want);
    size_t copied = 0, qcap = 0;
    int32_t nq = 0, nr = 0;
    for (int32_t t = 1; t <= t_max; t++) {
        const int32_t nqz = kivi_n_flush(cfg, nr, 1);
        if (nqz > 0) {
            if ((size_t)(nq + nqz) > qcap) { /* the store grows first */
                copied += (size_t)nq * q_tok + (size_t)(nq / G) * blk;
                qcap = quant_pow2_cap(nq + nqz);
            }
            copied += (size_t)nqz * q_tok + (size_t)(nqz / G) * blk;
            copied += (size_t)(nr - nqz) * f32_tok; /* the rest shifted down */
            nq += nqz;
            nr -= nqz;
        }
        copied += f32_tok; /* the new token lands in the residual */
        nr++;
        ck_assert_int_eq(feed_step(&f, c, t - 1, 1), KV_OK);
        ck_assert_int_eq(nq % G, 0);
        ck_assert_int_le(nr, r);
        for (int32_t l = 0; l < cfg->n_layers; l++) {
            struct seen s = check_view(&f, c, l, t);
            ck_assert_int_eq(s.n_quant, nq);
            ck_assert_int_eq(s.count, t);
            struct kv_view vw;
            ck_assert_int_eq(kv_cache_view(c, l, &vw), KV_OK);
            if (nq > 0) {
                const struct kv_tensor *k = &vw.spans[0].k, *v = &vw.spans[0].v;
                ck_assert_int_eq(k->axis, KV_QAXIS_CHANNEL);
                ck_assert_int_eq(k->group, G);
                ck_assert_uint_eq(k->qp_row_stride, (size_t)d * 8);
                ck_assert_uint_eq(k->qp_head_stride, (qcap + G - 1) / G * d * 8);
                ck_assert_int_eq(v->axis, KV_QAXIS_TOKEN);
                ck_assert_int_eq(v->group, G);
                ck_assert_uint_eq(v->qp_row_stride, qp_row);
                ck_assert_uint_eq(k->row_stride, code_row);
            }
        }
        ck_assert_uint_eq(kv_cache_resident_bytes(c), quant_resident(cfg, nq));
        ck_assert_uint_eq(kv_cache_copied_bytes(c), copied);
        size_t bound;
        ck_assert_int_eq(kv_cache_bytes_for(c->ops, &c->cfg, c->params, t, &bound), KV_OK);
        ck_assert_uint_ge(bound, kv_cache_resident_bytes(c));
    }
    kv_cache_destroy(c);
    feed_free(&f);
}
END_TEST

/* Chunks and prefills: the residual never exceeds R, the store holds whole
 * blocks, the rule holds for every update size. */
START_TEST(test_kivi_chunks)
{
    const struct conf *cfg = &kivi_cfgs[_i];
    struct kv_cache *c = make("quantized", cfg);
    const int32_t n_sched = (int32_t)(sizeof sched_chunks / sizeof sched_chunks[0]);
    struct feed f;
    feed_init(&f, cfg, 45 + sched_total(sched_chunks, n_sched), 61);
    int32_t len = 0, nq = 0;
    for (int32_t i = -1; i < n_sched; i++) {
        const int32_t n = i < 0 ? 45 : sched_chunks[i]; /* a prefill first */
        nq += kivi_n_flush(cfg, len - nq, n);
        ck_assert_int_eq(feed_step(&f, c, len, n), KV_OK);
        len += n;
        struct seen s = check_view(&f, c, 0, len);
        ck_assert_int_eq(s.n_quant, nq);
        ck_assert_int_le(len - nq, cfg->residual > cfg->group ? cfg->residual : cfg->group);
        ck_assert_int_eq(nq % cfg->group, 0);
        ck_assert_uint_eq(kv_cache_resident_bytes(c), quant_resident(cfg, nq));
    }
    kv_cache_destroy(c);
    feed_free(&f);
}
END_TEST

START_TEST(test_quantized_bad_configs)
{
    const struct kv_strategy_ops *ops = kv_strategy_find("quantized");
    const int64_t live0 = kv_alloc_live();
    struct conf base = quant_cfgs[0]; /* head_dim 16 */
    struct {
        int32_t bits, group, residual;
        enum kv_status want;
    } cases[] = {
        {8, 8, 5, KV_OK},          {4, 16, 1, KV_OK},         {0, 8, 5, KV_ERR_INVALID},
        {2, 8, 5, KV_OK} /* int2 since issue 18 */, {3, 8, 5, KV_ERR_INVALID},
        {16, 8, 5, KV_ERR_INVALID}, {1, 8, 5, KV_ERR_INVALID},
        {8, 0, 5, KV_ERR_INVALID}, {8, -8, 5, KV_ERR_INVALID}, {8, 6, 5, KV_ERR_INVALID},
        {8, 32, 5, KV_ERR_INVALID}, {4, 1, 5, KV_ERR_INVALID}, {8, 8, 0, KV_ERR_INVALID},
        {8, 8, -1, KV_ERR_INVALID},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct conf cfg = base;
        cfg.bits = cases[i].bits, cfg.group = cases[i].group, cfg.residual = cases[i].residual;
        struct kv_cache *c = NULL;
        ck_assert_msg(tcreate(&c, ops, &cfg) == cases[i].want, "case %zu", i);
        kv_cache_destroy(c);
    }
    /* kivi: the residual holds at least one block of keys; layouts and
     * presets by name */
    struct conf kv = base; /* head_dim 16 */
    kv.layout = 1, kv.bits = 2, kv.group = 8, kv.residual = 8;
    struct kv_cache *kc = NULL;
    ck_assert_int_eq(tcreate(&kc, ops, &kv), KV_OK);
    kv_cache_destroy(kc);
    kv.residual = 3; /* the residual then holds a block of 8 */
    ck_assert_int_eq(tcreate(&kc, ops, &kv), KV_OK);
    ck_assert_uint_eq(kv_cache_resident_bytes(kc), quant_resident(&kv, 0));
    kv_cache_destroy(kc);
    kv.residual = 8, kv.layout = 2;
    ck_assert_int_eq(tcreate(&kc, ops, &kv), KV_ERR_INVALID);
    kv.layout = -1;
    ck_assert_int_eq(tcreate(&kc, ops, &kv), KV_ERR_INVALID);
    struct test_param_block blk;
    test_params_fill(ops, &blk, NULL);
    ck_assert_int_eq(kv_params_parse(ops, blk.b, "layout=kivi;bits=2"), KV_OK);
    ck_assert_int_eq(kv_params_parse(ops, blk.b, "layout=channel"), KV_ERR_INVALID);
    ck_assert_int_eq(kv_params_parse(ops, blk.b, "bits=3"), KV_ERR_INVALID);
    char text[128];
    kv_params_format(ops, blk.b, text, sizeof text);
    ck_assert_str_eq(text, "bits=2;group=32;residual=32;layout=kivi");
    const struct kv_strategy_ops *po;
    ck_assert_int_eq(kv_strategy_lookup("kivi-2", &po, blk.b, sizeof blk.b), KV_OK);
    ck_assert_int_eq(kv_strategy_dtype(po, blk.b), KV_DTYPE_Q2);
    kv_strategy_label(po, blk.b, text, sizeof text);
    ck_assert_str_eq(text, "kivi-2");
    ck_assert_int_eq(kv_strategy_lookup("quantized-int2", &po, blk.b, sizeof blk.b), KV_OK);
    kv_strategy_label(po, blk.b, text, sizeof text);
    ck_assert_str_eq(text, "quantized-int2");
    /* a residual whose bytes overflow is refused before allocating it */
    struct conf big = base;
    big.batch = 1 << 20, big.n_kv_heads = 1 << 12, big.head_dim = 1 << 10, big.group = 8;
    big.residual = INT32_MAX;
    struct kv_cache *c = NULL;
    ck_assert_int_eq(tcreate(&c, ops, &big), KV_ERR_OVERFLOW);
    ck_assert_int_eq(kv_alloc_live(), live0);
}
END_TEST

/*
 * --dtype f16 / bf16 of the float stores (dynamic, static, sliding, paged):
 * the same schedule as an f32 cache
 * holds exactly half the bytes and copies exactly half (every row, growth
 * copies included, is half as long); views carry the dtype; the label,
 * describe, dtype, bytes_for, presets and the k=v text agree; and a dtype
 * the stores do not take is refused by the table.
 */
START_TEST(test_dtype_stores)
{
    static const char *const names[] = {"dynamic", "static", "sliding", "paged"};
    const char *name = names[_i / 2];
    const enum kv_dtype dt = _i % 2 ? KV_DTYPE_BF16 : KV_DTYPE_F16;
    const struct kv_strategy_ops *ops = kv_strategy_find(name);
    ck_assert_ptr_nonnull(ops);
    struct conf c16 = mem_cfg;
    c16.dtype = dt;
    struct kv_cache *a = make(name, &mem_cfg), *b = make(name, &c16);
    struct feed fa, fb;
    feed_init(&fa, &mem_cfg, 60, 77);
    feed_init(&fb, &c16, 60, 77);
    ck_assert_int_eq(kv_cache_dtype(a), KV_DTYPE_F32);
    ck_assert_int_eq(kv_cache_dtype(b), dt);
    char la[64], lb[256], want[96];
    kv_cache_label(a, la, sizeof la);
    kv_cache_label(b, lb, sizeof lb);
    /* the f32 label (paged: paged-16) with the dtype added */
    snprintf(want, sizeof want, "%s-%s", la, kv_type_traits[dt].name);
    ck_assert_int_eq(strncmp(la, name, strlen(name)), 0);
    ck_assert_str_eq(lb, want);
    kv_cache_describe(b, lb, sizeof lb);
    ck_assert_ptr_nonnull(strstr(lb, kv_type_traits[dt].name));
    for (int32_t t = 1; t <= 60; t++) {
        ck_assert_int_eq(feed_step(&fa, a, t - 1, 1), KV_OK);
        ck_assert_int_eq(feed_step(&fb, b, t - 1, 1), KV_OK);
        ck_assert_uint_eq(2 * kv_cache_resident_bytes(b), kv_cache_resident_bytes(a));
        ck_assert_uint_eq(2 * kv_cache_copied_bytes(b), kv_cache_copied_bytes(a));
        struct kv_view v;
        ck_assert_int_eq(kv_cache_view(b, 0, &v), KV_OK);
        for (int32_t i = 0; i < v.n_spans; i++) {
            ck_assert_int_eq(v.spans[i].k.dtype, dt);
            ck_assert_int_eq(v.spans[i].v.dtype, dt);
            ck_assert_uint_eq(v.spans[i].k.row_stride, (size_t)mem_cfg.head_dim * 2);
        }
    }
    for (int32_t nt = 1; nt <= 200; nt += 33) {
        size_t ba, bb;
        const struct kv_cache_config cc = cc_of(&mem_cfg);
        ck_assert_int_eq(kv_cache_bytes_for(ops, &cc, a->params, nt, &ba), KV_OK);
        ck_assert_int_eq(kv_cache_bytes_for(ops, &cc, b->params, nt, &bb), KV_OK);
        ck_assert_uint_eq(2 * bb, ba);
    }
    /* the parameter's text form, its names, the presets */
    char text[128];
    kv_params_format(ops, b->params, text, sizeof text);
    snprintf(want, sizeof want, "dtype=%s", kv_type_traits[dt].name);
    ck_assert_ptr_nonnull(strstr(text, want));
    struct test_param_block blk;
    test_params_fill(ops, &blk, NULL);
    ck_assert_int_eq(kv_params_parse(ops, blk.b, want), KV_OK);
    ck_assert_int_eq(kv_strategy_dtype(ops, blk.b), dt);
    ck_assert_int_eq(kv_params_parse(ops, blk.b, "dtype=f8"), KV_ERR_INVALID);
    ck_assert_int_eq(kv_params_parse(ops, blk.b, "dtype=int8"), KV_ERR_INVALID);
    ck_assert_int_eq(kv_params_parse(ops, blk.b, "dtype=1"), KV_ERR_INVALID);
    ck_assert_int_eq(kv_params_set(ops, blk.b, "dtype", KV_DTYPE_Q8), KV_ERR_INVALID);
    const int32_t k = kv_param_find(ops, "dtype");
    ck_assert_int_ge(k, 0);
    for (int32_t i = 0; i < ops->params[k].n_choices; i++)
        ck_assert_str_eq(ops->params[k].names[i],
                         kv_type_traits[ops->params[k].choices[i]].name);
    char range[128];
    kv_param_range_str(&ops->params[k], range, sizeof range);
    ck_assert_str_eq(range, "one of f32, f16 or bf16");
    snprintf(want, sizeof want, "%s-%s", la, kv_type_traits[dt].name); /* the preset */
    const struct kv_strategy_ops *po;
    ck_assert_int_eq(kv_strategy_lookup(want, &po, blk.b, sizeof blk.b), KV_OK);
    ck_assert_ptr_eq(po, ops);
    ck_assert_int_eq(kv_strategy_dtype(ops, blk.b), dt);
    kv_cache_destroy(a);
    kv_cache_destroy(b);
    feed_free(&fa);
    feed_free(&fb);
}
END_TEST

START_TEST(test_static_sliding_bad_configs)
{
    const int64_t live0 = kv_alloc_live();
    struct conf cfg = mem_cfg;
    struct kv_cache *c = NULL;
    cfg.max_len = 0;
    ck_assert_int_eq(tcreate(&c, kv_strategy_find("static"), &cfg), KV_ERR_INVALID);
    cfg = mem_cfg;
    cfg.window = 0;
    ck_assert_int_eq(tcreate(&c, kv_strategy_find("sliding"), &cfg), KV_ERR_INVALID);
    cfg.window = -3;
    ck_assert_int_eq(tcreate(&c, kv_strategy_find("sliding"), &cfg), KV_ERR_INVALID);
    /* fields a strategy does not read are not its business */
    cfg = mem_cfg;
    cfg.window = 0, cfg.bits = 0, cfg.group = 0, cfg.residual = 0, cfg.max_len = 0;
    ck_assert_int_eq(tcreate(&c, kv_strategy_find("dynamic"), &cfg), KV_OK);
    kv_cache_destroy(c);
    /* 2^20 * 2^12 * 2^30 * 2^12 bytes: overflow, refused before allocating */
    cfg = mem_cfg;
    cfg.batch = 1 << 20, cfg.n_kv_heads = 1 << 12, cfg.head_dim = 1 << 10;
    cfg.max_len = 1 << 30, cfg.window = 1 << 30;
    ck_assert_int_eq(tcreate(&c, kv_strategy_find("static"), &cfg), KV_ERR_OVERFLOW);
    ck_assert_int_eq(tcreate(&c, kv_strategy_find("sliding"), &cfg), KV_ERR_OVERFLOW);
    ck_assert_ptr_null(c);
    ck_assert_int_eq(kv_alloc_live(), live0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Registration: reserved flags and the text rule                           */

/* dynamic's table with one parameter of a given flag, no presets: a table
 * kv_strategy_validate accepts, so a refusal is the registry's. */
static const struct kv_param flag_test_param[] = {
    {.name = "depth", .flag = "--seed", .type = KV_PARAM_INT, .lo = 0, .hi = 2, .def = 0,
     .help = "a test parameter whose flag is a command's", .offset = 0},
};

static struct kv_strategy_ops flag_test_ops(const char *name,
                                            const struct kv_param *params)
{
    struct kv_strategy_ops o = *kv_strategy_find("dynamic");
    o.name = name;
    o.params = params;
    o.n_params = 1;
    o.presets = NULL;
    o.n_presets = 0;
    return o;
}

/* A strategy parameter whose flag is a command's option (reserved by the
 * CLI at start-up) is refused at registration; reserving a flag that a
 * registered strategy (built-in or extra) already has is refused and
 * reserves nothing. */
START_TEST(test_reserved_flags)
{
    static const char *const cmd_flags[] = {"--seed", "--threads", "--out"};
    const int32_t n0 = kv_strategy_count();
    const struct kv_strategy_ops seed_ops = flag_test_ops("seed-test", flag_test_param);
    ck_assert_int_eq(kv_strategy_validate(&seed_ops), KV_OK);
    ck_assert_int_eq(kv_strategy_reserve_flags(cmd_flags, 3), KV_OK);
    ck_assert(kv_strategy_flag_reserved("--seed") && kv_strategy_flag_reserved("--out"));
    ck_assert(!kv_strategy_flag_reserved("--window"));
    ck_assert_int_eq(kv_strategy_register(&seed_ops), KV_ERR_INVALID);
    ck_assert_int_eq(kv_strategy_count(), n0);
    ck_assert_ptr_null(kv_strategy_find("seed-test"));
    ck_assert_int_eq(kv_strategy_reserve_flags(cmd_flags, 3), KV_OK); /* again: no-op */
    /* a built-in's flag (sliding's --window), an extra's (the test-only
     * paged caches' --page): refused, and "--fresh" with it not reserved */
    static const char *const clash[] = {"--fresh", "--window"};
    ck_assert_int_eq(kv_strategy_reserve_flags(clash, 2), KV_ERR_INVALID);
    ck_assert(!kv_strategy_flag_reserved("--fresh"));
    static const char *const clash_extra[] = {"--page"};
    ck_assert_ptr_nonnull(kv_strategy_find("test-pages"));
    ck_assert_int_eq(kv_strategy_reserve_flags(clash_extra, 1), KV_ERR_INVALID);
    static const char *const bad[] = {"seed", "--", "--a b", "--x\"y"};
    for (int k = 0; k < 4; k++)
        ck_assert_int_eq(kv_strategy_reserve_flags(&bad[k], 1), KV_ERR_INVALID);
    ck_assert_int_eq(kv_strategy_reserve_flags(NULL, 1), KV_ERR_INVALID);
    /* cleared: the table is fine again (validated, not registered here) */
    ck_assert_int_eq(kv_strategy_reserve_flags(NULL, 0), KV_OK);
    ck_assert(!kv_strategy_flag_reserved("--seed"));
    ck_assert_int_eq(kv_strategy_validate(&seed_ops), KV_OK);
    ck_assert_int_eq(kv_strategy_count(), n0);
}
END_TEST

static int quote_label(const void *params, char *buf, size_t n)
{
    (void)params;
    return snprintf(buf, n, "dyn\"amic");
}

static const struct kv_preset comma_preset[] = {{.name = "dyn,f16", .params = "dtype=f16"}};
static const struct kv_param bad_name_param[] = {
    {.name = "a=b", .flag = "--ab", .type = KV_PARAM_INT, .lo = 0, .hi = 2, .def = 0,
     .help = "x", .offset = 0},
};
static const struct kv_param bad_flag_param[] = {
    {.name = "ab", .flag = "--a;b", .type = KV_PARAM_INT, .lo = 0, .hi = 2, .def = 0,
     .help = "x", .offset = 0},
};

/* Every name a table shows is a label (strategy.h's text rule): its name,
 * its presets', its parameters' and flags, and what label() returns; every
 * built-in table and preset passes. */
START_TEST(test_registration_text_rule)
{
    for (int32_t i = 0; i < kv_strategy_count(); i++) {
        const struct kv_strategy_ops *o = kv_strategy_at(i);
        ck_assert_msg(kv_label_ok(o->name), "%s", o->name);
        for (int32_t p = 0; p < o->n_presets; p++)
            ck_assert_msg(kv_label_ok(o->presets[p].name), "%s", o->presets[p].name);
        ck_assert_int_eq(kv_strategy_validate(o), KV_OK);
    }
    const int32_t n0 = kv_strategy_count();
    struct kv_strategy_ops o = *kv_strategy_find("dynamic");
    static const char *const bad_names[] = {"my cache", "a,b", "q\"x", "e\x1b", "$x", "",
                                            "semi;colon", "back\\slash", "tick`"};
    for (size_t k = 0; k < sizeof bad_names / sizeof bad_names[0]; k++) {
        o = *kv_strategy_find("dynamic");
        o.name = bad_names[k];
        o.presets = NULL;
        o.n_presets = 0;
        ck_assert_int_eq(kv_strategy_validate(&o), KV_ERR_INVALID);
        ck_assert_int_eq(kv_strategy_register(&o), KV_ERR_INVALID);
    }
    o = *kv_strategy_find("dynamic");
    o.name = "fresh-name";
    o.presets = comma_preset;
    o.n_presets = 1;
    ck_assert_int_eq(kv_strategy_validate(&o), KV_ERR_INVALID);
    o.presets = NULL;
    o.n_presets = 0;
    o.label = quote_label;
    ck_assert_int_eq(kv_strategy_validate(&o), KV_ERR_INVALID);
    o = flag_test_ops("fresh-name", bad_name_param);
    ck_assert_int_eq(kv_strategy_validate(&o), KV_ERR_INVALID);
    o = flag_test_ops("fresh-name", bad_flag_param);
    ck_assert_int_eq(kv_strategy_validate(&o), KV_ERR_INVALID);
    ck_assert_int_eq(kv_strategy_count(), n0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Capability names, the eviction flags, the resolver, preset labels        */

static void tb_observe(void *state, int32_t layer, const float *mass, int32_t n_heads)
{
    (void)state, (void)layer, (void)mass, (void)n_heads;
}

/* Every flag has its own short name (a label), nothing else has one; the
 * three eviction questions are separate flags (strategy.h): evicting what
 * no mask describes is a kind of evicting, and either it or needing the
 * attention scores goes without the other. */
START_TEST(test_cap_names)
{
    static const char *const want[] = {
        "keeps-history", "lossy", "evicts", "preallocates", "chunked-append", "crop", "fork",
        "reorder", "shares-storage", "bounded", "attention-mass", "score-evicts", "repositions",
        "borrows-prefix"};
    int32_t n = 0;
    for (uint32_t bit = 1; bit & KV_CAP_ALL; bit <<= 1, n++) {
        const char *name = kv_cap_name(bit);
        ck_assert_ptr_nonnull(name);
        ck_assert(kv_label_ok(name));
        ck_assert_int_lt(n, (int32_t)(sizeof want / sizeof want[0]));
        ck_assert_str_eq(name, want[n]);
    }
    ck_assert_int_eq(n, (int32_t)(sizeof want / sizeof want[0]));
    ck_assert_str_eq(kv_cap_name(KV_CAP_EVICTS), "evicts");
    ck_assert_str_eq(kv_cap_name(KV_CAP_SCORE_EVICTS), "score-evicts");
    ck_assert_str_eq(kv_cap_name(KV_CAP_ATTN_MASS), "attention-mass");
    ck_assert_ptr_null(kv_cap_name(0));
    ck_assert_ptr_null(kv_cap_name(KV_CAP_EVICTS | KV_CAP_SCORE_EVICTS));
    ck_assert_ptr_null(kv_cap_name(KV_CAP_ALL));
    ck_assert_ptr_null(kv_cap_name((uint32_t)KV_CAP_ALL + 1));
    ck_assert_ptr_null(kv_cap_name(1u << 31));
    for (int32_t i = 0; i < kv_strategy_count(); i++) {
        const struct kv_strategy_ops *o = kv_strategy_at(i);
        ck_assert(!(o->caps & KV_CAP_SCORE_EVICTS) || (o->caps & KV_CAP_EVICTS));
    }
    struct kv_strategy_ops o = tb_ops;
    o.name = "fresh-name";
    o.caps = KV_CAP_KEEPS_HISTORY | KV_CAP_SCORE_EVICTS; /* without KV_CAP_EVICTS */
    ck_assert_int_eq(kv_strategy_validate(&o), KV_ERR_INVALID);
    o.caps |= KV_CAP_EVICTS; /* evicting by a key's norm: no scores needed */
    ck_assert_int_eq(kv_strategy_validate(&o), KV_OK);
    o.caps = KV_CAP_KEEPS_HISTORY | KV_CAP_ATTN_MASS; /* scores for statistics only */
    o.observe = tb_observe;
    ck_assert_int_eq(kv_strategy_validate(&o), KV_OK);
}
END_TEST

/* kv_strategy_lookup resolves every strategy's name (its defaults) and
 * every preset's (its parameters); kv_strategy_find, its wrapper, takes a
 * strategy's own name only. */
START_TEST(test_resolver)
{
    struct test_param_block got, want;
    for (int32_t i = 0; i < kv_strategy_count(); i++) {
        const struct kv_strategy_ops *ops = kv_strategy_at(i), *o = NULL;
        memset(&got, 0xA5, sizeof got);
        test_params_fill(ops, &want, NULL);
        ck_assert_int_eq(kv_strategy_lookup(ops->name, &o, got.b, sizeof got.b), KV_OK);
        ck_assert_ptr_eq(o, ops);
        ck_assert(memcmp(got.b, want.b, ops->params_size) == 0);
        ck_assert_ptr_eq(kv_strategy_find(ops->name), ops);
        for (int32_t k = 0; k < ops->n_presets; k++) {
            const char *name = ops->presets[k].name;
            test_params_fill(ops, &want, NULL);
            ck_assert_int_eq(kv_params_parse(ops, want.b, ops->presets[k].params), KV_OK);
            memset(&got, 0xA5, sizeof got);
            o = NULL;
            ck_assert_int_eq(kv_strategy_lookup(name, &o, got.b, sizeof got.b), KV_OK);
            ck_assert_ptr_eq(o, ops);
            ck_assert(memcmp(got.b, want.b, ops->params_size) == 0);
            ck_assert_int_eq(kv_strategy_lookup(name, &o, NULL, 0), KV_OK);
            ck_assert_ptr_eq(o, ops);
            ck_assert_ptr_null(kv_strategy_find(name)); /* its parameters would be lost */
        }
    }
    const struct kv_strategy_ops *o = kv_strategy_at(0);
    ck_assert_int_eq(kv_strategy_lookup("no-such-strategy", &o, NULL, 0), KV_ERR_INVALID);
    ck_assert_ptr_null(o);
    ck_assert_int_eq(kv_strategy_lookup(NULL, &o, NULL, 0), KV_ERR_INVALID);
    ck_assert_int_eq(kv_strategy_lookup("dynamic", NULL, NULL, 0), KV_ERR_INVALID);
    ck_assert_ptr_null(kv_strategy_find("no-such-strategy"));
    ck_assert_ptr_null(kv_strategy_find(NULL));
}
END_TEST

/*
 * A strategy picked by a preset's name files its results (CSV label,
 * progress lines: kv_strategy_label, kv_cache_label) under that preset's
 * name; only an alias, whose parameters equal the defaults or an earlier
 * preset's, files under theirs (one configuration, one label), and presets
 * of different parameters never share a label.
 */
START_TEST(test_preset_labels)
{
    const struct kv_cache_config cc = cc_of(&conf_cfgs[0]);
    struct test_param_block def, pk, pj;
    char label[128], other[128];
    for (int32_t i = 0; i < kv_strategy_count(); i++) {
        const struct kv_strategy_ops *ops = kv_strategy_at(i), *o;
        test_params_fill(ops, &def, NULL);
        for (int32_t k = 0; k < ops->n_presets; k++) {
            const char *name = ops->presets[k].name;
            memset(&pk, 0, sizeof pk);
            ck_assert_int_eq(kv_strategy_lookup(name, &o, pk.b, sizeof pk.b), KV_OK);
            ck_assert_int_gt(kv_strategy_label(o, pk.b, label, sizeof label), 0);
            int alias = 0;
            if (strcmp(label, name) != 0) {
                if (memcmp(pk.b, def.b, ops->params_size) == 0) {
                    kv_strategy_label(ops, def.b, other, sizeof other);
                    alias = strcmp(label, other) == 0;
                }
                for (int32_t j = 0; j < k && !alias; j++) {
                    memset(&pj, 0, sizeof pj);
                    ck_assert_int_eq(kv_strategy_lookup(ops->presets[j].name, &o, pj.b,
                                                        sizeof pj.b), KV_OK);
                    alias = memcmp(pk.b, pj.b, ops->params_size) == 0 &&
                            strcmp(label, ops->presets[j].name) == 0;
                }
                ck_assert_msg(alias, "preset %s files its results under %s", name, label);
            }
            for (int32_t j = 0; j < k; j++) {
                memset(&pj, 0, sizeof pj);
                ck_assert_int_eq(kv_strategy_lookup(ops->presets[j].name, &o, pj.b, sizeof pj.b),
                                 KV_OK);
                kv_strategy_label(ops, pj.b, other, sizeof other);
                ck_assert_msg(memcmp(pk.b, pj.b, ops->params_size) == 0 ||
                                  strcmp(label, other) != 0,
                              "presets %s and %s differ but share the label %s", name,
                              ops->presets[j].name, label);
            }
            /* a cache made from the preset says the same */
            struct test_param_block fit;
            const struct conf *t = &conf_cfgs[0];
            const struct test_params tp = {.window = t->window, .bits = t->bits,
                                           .group = t->group, .residual = t->residual};
            test_params_fill(ops, &fit, &tp); /* this shape's sizes, the preset's on top */
            ck_assert_int_eq(kv_params_parse(ops, fit.b, ops->presets[k].params), KV_OK);
            struct kv_cache *c = NULL;
            if (kv_cache_create(&c, ops, &cc, fit.b) != KV_OK)
                continue;
            kv_cache_label(c, other, sizeof other);
            ck_assert_str_eq(other, label);
            kv_cache_destroy(c);
        }
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Suites                                                                   */

static Suite *strategies_suite(void)
{
    Suite *s = suite_create("strategies");
    const int32_t n = n_variants();

    TCase *tc = tcase_create("conformance");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_conformance_readback, 0, n * N_CONF_CFGS);
    tcase_add_loop_test(tc, test_conformance_reset, 0, n);
    tcase_add_loop_test(tc, test_conformance_bad_updates, 0, n);
    tcase_add_loop_test(tc, test_conformance_bad_configs, 0, n);
    tcase_add_loop_test(tc, test_conformance_alloc_failure, 0, 2 * n);
    tcase_add_loop_test(tc, test_conformance_attention, 0, 3 * n);
    tcase_add_loop_test(tc, test_conformance_view_shape, 0, n);
    tcase_add_loop_test(tc, test_conformance_table, 0, n);
    tcase_add_loop_test(tc, test_conformance_memory, 0, n * N_SCHEDS);
    tcase_add_loop_test(tc, test_conformance_bounds, 0, n);
    tcase_add_loop_test(tc, test_conformance_optional, 0, n);
    tcase_add_loop_test(tc, test_conformance_small, 0, n);
    suite_add_tcase(s, tc);

    tc = tcase_create("core");
    tcase_add_test(tc, test_registry);
    tcase_add_test(tc, test_wrapper_defaults);
    tcase_add_test(tc, test_reserved_flags);
    tcase_add_test(tc, test_registration_text_rule);
    tcase_add_test(tc, test_cap_names);
    tcase_add_test(tc, test_resolver);
    tcase_add_test(tc, test_preset_labels);
    suite_add_tcase(s, tc);

    tc = tcase_create("per-strategy");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_none_keeps_nothing);
    tcase_add_test(tc, test_static_memory_and_full);
    tcase_add_test(tc, test_sliding_memory_and_contents);
    tcase_add_test(tc, test_sliding_prefill_and_chunks);
    tcase_add_test(tc, test_dynamic_memory);
    tcase_add_test(tc, test_concat_memory);
    tcase_add_test(tc, test_max_len_refused);
    tcase_add_test(tc, test_static_sliding_bad_configs);
    tcase_add_loop_test(tc, test_dtype_stores, 0, 8);
    tcase_add_loop_test(tc, test_quantized_decode_accounting, 0, N_QUANT_CFGS);
    tcase_add_loop_test(tc, test_quantized_span_layout, 0, N_QUANT_CFGS);
    tcase_add_loop_test(tc, test_quantized_chunks, 0, N_QUANT_CFGS);
    tcase_add_test(tc, test_quantized_bad_configs);
    tcase_add_loop_test(tc, test_kivi_decode_accounting, 0, N_KIVI_CFGS);
    tcase_add_loop_test(tc, test_kivi_chunks, 0, N_KIVI_CFGS);
    suite_add_tcase(s, tc);

    /* last: it registers the broken doubles (in its own process, unless
     * CK_FORK=no, and then after every test that walks the registry) */
    tc = tcase_create("conformance-proof");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_conformance_small_catches);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    /* the test-only paged strategies: the suite runs them like the others */
    kv_test_register_paged();
    /* and a strategy the suite knows nothing about by name (--budget) */
    if (kv_strategy_find(tb_ops.name) == NULL && kv_strategy_register(&tb_ops) != KV_OK)
        abort();
    SRunner *sr = srunner_create(strategies_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
