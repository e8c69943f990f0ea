/*
 * check_cache_ops.c - the optional cache operations, tested on every
 * registered strategy that declares them (a strategy is tested by
 * registering it, as in check_strategies.c): crop (KV_CAP_CROP), fork
 * (KV_CAP_FORK) and reorder with its convenience forms free_seq and
 * copy_seq (KV_CAP_REORDER), borrow (KV_CAP_BORROW). A strategy without the flag must answer
 * KV_ERR_UNSUPPORTED and change nothing.
 *
 * The design decision: the test keeps the truth itself. Every sequence of a
 * cache reads one "row" of the test's history (random keys and values per
 * layer, position, head); an operation changes which row a sequence reads
 * (reorder: sequence b now reads its source's row; a copy gets a fresh row
 * that shares the source's past and continues differently), and after
 * every operation the whole view is read back and compared with the rows:
 * bit-exact for lossless dtypes, within a bound of the quantization step
 * for lossy ones. So the three promises are checked literally:
 *   - append k tokens, crop back, append others == never having appended
 *     the k (the cropped cache reads back the history without them, and
 *     attention over it equals attention over a cache that never saw them);
 *   - a fork equals an independent run, and the two never touch each other;
 *   - reorder == recomputing: the reordered cache reads back the reordered
 *     histories and its attention equals that of a cache fed them afresh.
 * A strategy that forgets tokens (KV_CAP_EVICTS) may refuse a crop whose
 * tokens it no longer holds (KV_ERR_UNSUPPORTED, nothing changed), but must
 * take one while it has evicted nothing; a lossy one (KV_CAP_LOSSY) may
 * refuse a crop back to a length whose tokens it held more exactly then
 * than now (a quantized cache's residual flushed since), as the cropped
 * cache would not equal never having appended. Every strategy declaring
 * crop must take some of the crops, and a crop to 0 always. Every operation is also run under
 * allocation failure at every step: KV_ERR_NOMEM, the cache unchanged,
 * nothing leaked.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/kv_attention_impl.h"
#include "../strategies/strategy.h"
#include "test_params.h"

/* ------------------------------------------------------------------------ */
/* Tolerances                                                               */

/*
 * Lossy rows: values are uniform in [-2, 2], so every quantization group's
 * range is at most 4 and a value reads back within err_step * 4 (+ err_rel
 * of the value); LOSSY_SLACK covers float rounding of the step. A wrong row
 * misses by O(1) in most of its elements, far outside it.
 */
#define VALUE_RANGE 4.0
#define LOSSY_SLACK 1.001
/* Attention over two caches holding the same keys in different spans
 * (kv_attn_ref, double accumulation): a few float ulps of |out| <= 2. */
#define ATTN_REF_TOL 1e-5f

/* Check logs every passing ck_assert; the inner loops use this instead. */
#define REQUIRE(cond, ...)                                                                   \
    do {                                                                                     \
        if (!(cond))                                                                         \
            ck_abort_msg(__VA_ARGS__);                                                       \
    } while (0)

/* ------------------------------------------------------------------------ */
/* The test's history                                                       */

#define MAX_ROWS 32

struct conf {
    int32_t n_layers, batch, n_kv_heads, head_dim, max_len;
    int32_t window, bits, group, residual;
    int32_t dtype, layout; /* --dtype of the float stores, quantized --layout */
};

static const struct conf confs[] = {
    {.n_layers = 2, .batch = 3, .n_kv_heads = 2, .head_dim = 16, .max_len = 96,
     .window = 24, .bits = 8, .group = 8, .residual = 6},
    {.n_layers = 1, .batch = 4, .n_kv_heads = 1, .head_dim = 32, .max_len = 96,
     .window = 8, .bits = 4, .group = 16, .residual = 3},
    /* 16-bit rows (the strategies with --dtype), int2 and the kivi layout */
    {.n_layers = 2, .batch = 3, .n_kv_heads = 2, .head_dim = 16, .max_len = 96,
     .window = 24, .bits = 2, .group = 8, .residual = 8, .dtype = KV_DTYPE_F16, .layout = 1},
    {.n_layers = 1, .batch = 4, .n_kv_heads = 1, .head_dim = 32, .max_len = 96,
     .window = 8, .bits = 2, .group = 16, .residual = 3, .dtype = KV_DTYPE_BF16},
    /* kivi at 4 and 8 bits: blocks of 16 keys (a residual of 16 whatever
     * --residual says) and of 4, so crops meet both whole and cut blocks */
    {.n_layers = 1, .batch = 3, .n_kv_heads = 2, .head_dim = 32, .max_len = 96,
     .window = 5, .bits = 4, .group = 16, .residual = 3, .dtype = KV_DTYPE_F16, .layout = 1},
    {.n_layers = 2, .batch = 3, .n_kv_heads = 1, .head_dim = 16, .max_len = 96,
     .window = 12, .bits = 8, .group = 4, .residual = 5, .layout = 1},
};
#define N_CONFS ((int32_t)(sizeof confs / sizeof confs[0]))

struct hist {
    struct conf c;
    int32_t t_max;
    float *k, *v;            /* (n_layers, MAX_ROWS, t_max, n_kv_heads, head_dim) */
    int32_t row[MAX_ROWS];   /* the row sequence b of the cache reads */
    int32_t batch;           /* sequences in the cache now */
    int32_t n_rows;          /* rows in use */
    float *ck, *cv;          /* (MAX_ROWS, n, heads, head_dim) a chunk */
    float *tmp;              /* (head_dim) */
    uint64_t rng;
};

static float rnd(uint64_t *s) /* uniform in [-2, 2) */
{
    return (float)((double)(kv_rng_next(s) >> 11) / 9007199254740992.0 * 4.0 - 2.0);
}

static size_t h_at(const struct hist *h, int32_t l, int32_t r, int32_t p, int32_t kvh)
{
    const struct conf *c = &h->c;
    return ((((size_t)l * MAX_ROWS + r) * h->t_max + p) * c->n_kv_heads + kvh) * c->head_dim;
}

/* positions [from, t_max) of row r, every layer, fresh random values */
static void h_randomize(struct hist *h, int32_t r, int32_t from)
{
    for (int32_t l = 0; l < h->c.n_layers; l++)
        for (size_t i = h_at(h, l, r, from, 0); i < h_at(h, l, r, h->t_max, 0); i++) {
            h->k[i] = rnd(&h->rng);
            h->v[i] = rnd(&h->rng);
        }
}

static void h_init(struct hist *h, const struct conf *c, int32_t t_max, uint64_t seed)
{
    memset(h, 0, sizeof *h);
    h->c = *c;
    h->t_max = t_max;
    h->rng = seed;
    const size_t n = (size_t)c->n_layers * MAX_ROWS * t_max * c->n_kv_heads * c->head_dim;
    const size_t chunk = (size_t)MAX_ROWS * t_max * c->n_kv_heads * c->head_dim;
    h->k = malloc(n * sizeof(float));
    h->v = malloc(n * sizeof(float));
    h->ck = malloc(chunk * sizeof(float));
    h->cv = malloc(chunk * sizeof(float));
    h->tmp = malloc((size_t)c->head_dim * sizeof(float));
    ck_assert(h->k && h->v && h->ck && h->cv && h->tmp);
    h->batch = c->batch;
    h->n_rows = c->batch;
    for (int32_t b = 0; b < c->batch; b++) {
        h->row[b] = b;
        h_randomize(h, b, 0);
    }
}

static void h_free(struct hist *h)
{
    free(h->k);
    free(h->v);
    free(h->ck);
    free(h->cv);
    free(h->tmp);
}

/* A new row sharing row r's first len positions, different after them. */
static int32_t h_branch(struct hist *h, int32_t r, int32_t len)
{
    ck_assert_int_lt(h->n_rows, MAX_ROWS);
    const int32_t nr = h->n_rows++;
    for (int32_t l = 0; l < h->c.n_layers; l++) {
        memcpy(h->k + h_at(h, l, nr, 0, 0), h->k + h_at(h, l, r, 0, 0),
               (h_at(h, l, r, len, 0) - h_at(h, l, r, 0, 0)) * sizeof(float));
        memcpy(h->v + h_at(h, l, nr, 0, 0), h->v + h_at(h, l, r, 0, 0),
               (h_at(h, l, r, len, 0) - h_at(h, l, r, 0, 0)) * sizeof(float));
    }
    h_randomize(h, nr, len);
    return nr;
}

/* What kv_cache_reorder(src, n) does to the rows: sequence b reads its
 * source's past; every sequence after the first with the same source
 * continues on a branch of its own (so copies must diverge cleanly). */
static void h_reorder(struct hist *h, const int32_t *src, int32_t n, int32_t len)
{
    int32_t old[MAX_ROWS], used[MAX_ROWS] = {0};
    memcpy(old, h->row, sizeof old);
    for (int32_t b = 0; b < n; b++) {
        const int32_t r = old[src[b]];
        h->row[b] = used[src[b]]++ == 0 ? r : h_branch(h, r, len);
    }
    h->batch = n;
}

/* ------------------------------------------------------------------------ */
/* Feeding and reading back                                                 */

static enum kv_status tcreate(struct kv_cache **out, const struct kv_strategy_ops *ops,
                              const struct conf *t)
{
    const struct kv_cache_config cc = {.n_layers = t->n_layers, .batch = t->batch,
                                       .n_kv_heads = t->n_kv_heads, .head_dim = t->head_dim,
                                       .max_len = t->max_len};
    const struct test_params tp = {.window = t->window, .bits = t->bits, .group = t->group,
                                   .residual = t->residual, .dtype = t->dtype,
                                   .layout = t->layout};
    return test_cache_create(out, ops, &cc, &tp);
}

/* One model step: positions [len, len + n) of every sequence's row, every
 * layer in order. A strategy without chunked appends gets one token at a
 * time once it holds any. */
static enum kv_status feed(struct hist *h, struct kv_cache *c, int32_t len, int32_t n)
{
    if (n > 1 && len > 0 && !kv_cache_has(c, KV_CAP_CHUNKED_APPEND)) {
        for (int32_t i = 0; i < n; i++) {
            enum kv_status st = feed(h, c, len + i, 1);
            if (st != KV_OK)
                return st;
        }
        return KV_OK;
    }
    const size_t tok = (size_t)h->c.n_kv_heads * h->c.head_dim;
    ck_assert_int_le(len + n, h->t_max);
    ck_assert_int_eq(c->cfg.batch, h->batch);
    for (int32_t l = 0; l < h->c.n_layers; l++) {
        for (int32_t b = 0; b < h->batch; b++) {
            memcpy(h->ck + (size_t)b * n * tok, h->k + h_at(h, l, h->row[b], len, 0),
                   (size_t)n * tok * sizeof(float));
            memcpy(h->cv + (size_t)b * n * tok, h->v + h_at(h, l, h->row[b], len, 0),
                   (size_t)n * tok * sizeof(float));
        }
        enum kv_status st = kv_cache_update(c, l, h->ck, h->cv, n, len);
        if (st != KV_OK) {
            ck_assert_int_eq(l, 0); /* a refusal comes at layer 0, before anything */
            return st;
        }
    }
    return KV_OK;
}

static int lossy_side(const struct kv_tensor *x)
{
    const struct kv_type_traits *tr = &kv_type_traits[x->dtype];
    return tr->has_qparams || tr->err_rel > 0.0;
}

/*
 * Every layer of c holds the rows' first len positions: positions [0, len)
 * each visible exactly once, or, for a strategy that evicts, a contiguous
 * run ending at len that covers what the next query (position len) sees
 * under the view's mask window; each row equal to the history (exact or
 * within the lossy bound). Returns the positions held in layer 0.
 */
static int32_t expect(struct hist *h, const struct kv_cache *c, int32_t len, const char *what)
{
    const struct conf *cf = &h->c;
    const int32_t d = cf->head_dim;
    int32_t held0 = 0;
    ck_assert_int_eq(c->cfg.batch, h->batch);
    for (int32_t l = 0; l < cf->n_layers; l++) {
        REQUIRE(kv_cache_seq_len(c, l) == len, "%s: %s layer %d holds %d, want %d",
                c->ops->name, what, l, kv_cache_seq_len(c, l), len);
        struct kv_view v;
        ck_assert_int_eq(kv_cache_view(c, l, &v), KV_OK);
        int32_t lo = len, hi = 0, count = 0;
        for (int32_t s = 0; s < v.n_spans; s++) {
            const struct kv_span *sp = &v.spans[s];
            for (int32_t t = 0; t < sp->n_tokens; t++) {
                const int32_t p = sp->pos0 + t;
                REQUIRE(p >= hi && p < len, "%s: %s layer %d: position %d out of order",
                        c->ops->name, what, l, p);
                lo = p < lo ? p : lo;
                hi = p + 1;
                count++;
                for (int32_t b = 0; b < h->batch; b++)
                    for (int32_t kvh = 0; kvh < cf->n_kv_heads; kvh++)
                        for (int kv = 0; kv < 2; kv++) {
                            const struct kv_tensor *x = kv ? &sp->v : &sp->k;
                            const struct kv_tensor xb = kv_tensor_of_seq(x, b);
                            kv_tensor_row_float(h->tmp, &xb, sp->page_tokens,
                                                kv_tensor_off(x, b, kvh),
                                                kv_tensor_qp_off(x, b, kvh), t, d);
                            const float *want =
                                (kv ? h->v : h->k) + h_at(h, l, h->row[b], p, kvh);
                            if (!lossy_side(x)) {
                                REQUIRE(memcmp(h->tmp, want, (size_t)d * sizeof(float)) == 0,
                                        "%s: %s layer %d seq %d head %d pos %d: %s differs",
                                        c->ops->name, what, l, b, kvh, p, kv ? "V" : "K");
                                continue;
                            }
                            const struct kv_type_traits *tr = &kv_type_traits[x->dtype];
                            for (int32_t e = 0; e < d; e++) {
                                const double tol = LOSSY_SLACK * (tr->err_step * VALUE_RANGE +
                                                                  tr->err_rel * fabs(want[e])) +
                                                   8 * FLT_EPSILON * VALUE_RANGE;
                                REQUIRE(fabs(h->tmp[e] - want[e]) <= tol,
                                        "%s: %s layer %d seq %d pos %d: %g, want %g",
                                        c->ops->name, what, l, b, p, (double)h->tmp[e],
                                        (double)want[e]);
                            }
                        }
            }
        }
        if (len == 0) {
            ck_assert_int_eq(count, 0);
            continue;
        }
        REQUIRE(hi == len && count == hi - lo, "%s: %s layer %d: holds %d positions "
                "[%d, %d), want a run ending at %d", c->ops->name, what, l, count, lo, hi, len);
        if (!kv_cache_has(c, KV_CAP_EVICTS)) {
            REQUIRE(lo == 0, "%s: %s layer %d lost positions below %d", c->ops->name, what, l,
                    lo);
        } else {
            for (int32_t p = 0; p < lo; p++)
                REQUIRE(!kv_attn_key_visible(&v.mask, 0, len, p), "%s: %s layer %d evicted "
                        "position %d that the next query still sees", c->ops->name, what, l, p);
        }
        if (l == 0)
            held0 = count;
    }
    return held0;
}

/* out <- attention (kv_attn_ref) of the next position's queries over layer
 * l of c (q: (batch, 1, 2 * kv_heads, head_dim)). */
static void attend(float *out, const float *q, const struct kv_cache *c, int32_t l, int32_t pos)
{
    struct kv_view v;
    ck_assert_int_eq(kv_cache_view(c, l, &v), KV_OK);
    const struct kv_attn_params p = {.batch = c->cfg.batch, .n_q = 1,
                                     .n_heads = 2 * c->cfg.n_kv_heads,
                                     .n_kv_heads = c->cfg.n_kv_heads,
                                     .head_dim = c->cfg.head_dim, .q_pos0 = pos,
                                     .scale = 1.0f / sqrtf((float)c->cfg.head_dim),
                                     .n_threads = 1};
    ck_assert_int_eq(kv_attn_ref(out, q, &p, &v), KV_OK);
}

/* Attention over every layer of a and b agrees (same keys, maybe other spans). */
static void same_attention(const struct kv_cache *a, const struct kv_cache *b, int32_t pos,
                           uint64_t seed, const char *what)
{
    const size_t n = (size_t)a->cfg.batch * 2 * a->cfg.n_kv_heads * a->cfg.head_dim;
    float *q = malloc(n * sizeof(float)), *oa = malloc(n * sizeof(float)),
          *ob = malloc(n * sizeof(float));
    ck_assert(q && oa && ob);
    for (size_t i = 0; i < n; i++)
        q[i] = rnd(&seed);
    for (int32_t l = 0; l < a->cfg.n_layers; l++) {
        attend(oa, q, a, l, pos);
        attend(ob, q, b, l, pos);
        for (size_t i = 0; i < n; i++)
            REQUIRE(fabsf(oa[i] - ob[i]) <= ATTN_REF_TOL, "%s: %s layer %d: attention %g vs %g",
                    a->ops->name, what, l, (double)oa[i], (double)ob[i]);
    }
    free(q);
    free(oa);
    free(ob);
}

/* A fresh cache fed the rows' first len positions as one prefill (or token
 * by token for a strategy that evicts), its batch the history's. A lossy
 * strategy's rounding depends on the update sizes (which tokens a
 * quantized cache's residual flushes when), so with first > 0 it is fed as
 * the cache under test was: positions [0, first) at once, then one by one. */
static struct kv_cache *recompute_as(struct hist *h, const struct kv_strategy_ops *ops,
                                     int32_t len, int32_t first)
{
    struct conf c = h->c;
    c.batch = h->batch;
    struct kv_cache *r = NULL;
    ck_assert_int_eq(tcreate(&r, ops, &c), KV_OK);
    if (first > 0 && kv_cache_has(r, KV_CAP_LOSSY) && !kv_cache_has(r, KV_CAP_EVICTS)) {
        ck_assert_int_eq(feed(h, r, 0, first), KV_OK);
        for (int32_t p = first; p < len; p++)
            ck_assert_int_eq(feed(h, r, p, 1), KV_OK);
    } else if (kv_cache_has(r, KV_CAP_EVICTS)) {
        for (int32_t p = 0; p < len; p++)
            ck_assert_int_eq(feed(h, r, p, 1), KV_OK);
    } else if (len > 0) {
        ck_assert_int_eq(feed(h, r, 0, len), KV_OK);
    }
    return r;
}

static struct kv_cache *recompute(struct hist *h, const struct kv_strategy_ops *ops, int32_t len)
{
    return recompute_as(h, ops, len, 0);
}

/* ------------------------------------------------------------------------ */
/* crop                                                                     */

/* _i: strategy x config. Prompts prefilled at once and token by token,
 * crops of 1 .. 9 tokens, then to the middle and to 0. */
START_TEST(test_crop)
{
    const struct kv_strategy_ops *ops = kv_strategy_at(_i / N_CONFS);
    const struct conf *cf = &confs[_i % N_CONFS];
    const int64_t live0 = kv_alloc_live();
    if (!(ops->caps & KV_CAP_KEEPS_HISTORY) || !(ops->caps & KV_CAP_CROP)) {
        struct kv_cache *c = NULL;
        ck_assert_int_eq(tcreate(&c, ops, cf), KV_OK);
        ck_assert_int_eq(kv_cache_crop(c, 0), (ops->caps & KV_CAP_CROP) ? KV_OK
                                                                         : KV_ERR_UNSUPPORTED);
        kv_cache_destroy(c);
        ck_assert_int_eq(kv_alloc_live(), live0);
        return;
    }
    static const int32_t prompts[] = {1, 5, 13, 30};
    static const int32_t ks[] = {1, 2, 4, 9};
    int accepted = 0; /* crops taken and checked against never appending */
    for (size_t pi = 0; pi < sizeof prompts / sizeof prompts[0]; pi++)
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
            for (int prefill = 0; prefill < 2; prefill++) {
                const int32_t len = prompts[pi], k = ks[ki], m = 7;
                struct hist h;
                h_init(&h, cf, len + k + m, 500 + (uint64_t)_i * 31 + pi * 7 + ki * 3 + prefill);
                struct kv_cache *c = NULL;
                ck_assert_int_eq(tcreate(&c, ops, cf), KV_OK);
                if (prefill) {
                    ck_assert_int_eq(feed(&h, c, 0, len), KV_OK);
                } else {
                    for (int32_t p = 0; p < len; p++)
                        ck_assert_int_eq(feed(&h, c, p, 1), KV_OK);
                }
                /* k tokens of a continuation that will be rolled back */
                int32_t keep[MAX_ROWS];
                memcpy(keep, h.row, sizeof keep);
                for (int32_t b = 0; b < h.batch; b++)
                    h.row[b] = h_branch(&h, h.row[b], len);
                ck_assert_int_eq(feed(&h, c, len, k), KV_OK);
                const int32_t held = expect(&h, c, len + k, "before the crop");
                const size_t copied = kv_cache_copied_bytes(c);
                ck_assert_int_eq(kv_cache_crop(c, len + k + 1), KV_ERR_INVALID);
                ck_assert_int_eq(kv_cache_crop(c, -1), KV_ERR_INVALID);
                enum kv_status st = kv_cache_crop(c, len);
                if (st == KV_ERR_UNSUPPORTED) {
                    /* only a cache that forgot tokens, or rounded tokens it
                     * held exactly at len (a quantized cache's residual
                     * flushed by the k), may refuse */
                    ck_assert(kv_cache_has(c, KV_CAP_EVICTS) || kv_cache_has(c, KV_CAP_LOSSY));
                    if (!kv_cache_has(c, KV_CAP_LOSSY))
                        ck_assert_int_lt(held, len + k);
                    ck_assert_uint_eq(kv_cache_copied_bytes(c), copied);
                    expect(&h, c, len + k, "after a refused crop");
                } else {
                    accepted++;
                    ck_assert_int_eq(st, KV_OK);
                    memcpy(h.row, keep, sizeof keep);
                    expect(&h, c, len, "after the crop");
                    /* the others: as if the k had never been appended */
                    ck_assert_int_eq(feed(&h, c, len, 1), KV_OK);
                    ck_assert_int_eq(feed(&h, c, len + 1, m - 1), KV_OK);
                    expect(&h, c, len + m, "appending after the crop");
                    struct kv_cache *r = recompute(&h, ops, len + m);
                    same_attention(c, r, len + m, 9, "cropped vs never appended");
                    kv_cache_destroy(r);
                    /* all the way down (a cache that evicted or rounded
                     * since may refuse the half, never 0), and the cache
                     * starts over */
                    st = kv_cache_crop(c, (len + m) / 2);
                    if (st == KV_ERR_UNSUPPORTED) {
                        ck_assert(kv_cache_has(c, KV_CAP_EVICTS) ||
                                  kv_cache_has(c, KV_CAP_LOSSY));
                        expect(&h, c, len + m, "after a refused crop to half");
                    } else {
                        ck_assert_int_eq(st, KV_OK);
                        expect(&h, c, (len + m) / 2, "cropped to half");
                    }
                    ck_assert_int_eq(kv_cache_crop(c, 0), KV_OK);
                    expect(&h, c, 0, "cropped to 0");
                    ck_assert_int_eq(feed(&h, c, 0, 3), KV_OK);
                    expect(&h, c, 3, "refilled");
                }
                kv_cache_destroy(c);
                h_free(&h);
            }
    /* a declared crop that is always refused is a stub */
    ck_assert_msg(accepted > 0, "%s: no crop was ever taken", ops->name);
    ck_assert_int_eq(kv_alloc_live(), live0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* fork                                                                     */

/* A fork holds the same tokens; both then grow apart, each equal to an
 * independent run, whichever is destroyed first. */
START_TEST(test_fork)
{
    const struct kv_strategy_ops *ops = kv_strategy_at(_i / N_CONFS);
    const struct conf *cf = &confs[_i % N_CONFS];
    const int64_t live0 = kv_alloc_live();
    struct kv_cache *c = NULL, *d = NULL;
    ck_assert_int_eq(tcreate(&c, ops, cf), KV_OK);
    if (!(ops->caps & KV_CAP_FORK) || !(ops->caps & KV_CAP_KEEPS_HISTORY)) {
        d = c; /* must be overwritten */
        ck_assert_int_eq(kv_cache_fork(&d, c), (ops->caps & KV_CAP_FORK) ? KV_OK
                                                                         : KV_ERR_UNSUPPORTED);
        if (d != c)
            kv_cache_destroy(d);
        kv_cache_destroy(c);
        ck_assert_int_eq(kv_alloc_live(), live0);
        return;
    }
    for (int first = 0; first < 2; first++) {
        const int32_t len = 21, more = 12;
        struct hist h;
        h_init(&h, cf, len + more, 700 + (uint64_t)_i);
        ck_assert_int_eq(kv_cache_reset(c), KV_OK);
        ck_assert_int_eq(feed(&h, c, 0, 17), KV_OK);
        for (int32_t p = 17; p < len; p++)
            ck_assert_int_eq(feed(&h, c, p, 1), KV_OK);
        ck_assert_int_eq(kv_cache_fork(&d, c), KV_OK);
        ck_assert_ptr_nonnull(d);
        ck_assert_int_eq(d->cfg.batch, c->cfg.batch);
        int32_t frow[MAX_ROWS]; /* the fork grows on branches of the rows */
        for (int32_t b = 0; b < h.batch; b++)
            frow[b] = h_branch(&h, h.row[b], len);
        expect(&h, d, len, "the fork");
        for (int32_t p = len; p < len + more; p++) { /* c grows on its rows */
            ck_assert_int_eq(feed(&h, c, p, 1), KV_OK);
            if (p == len + 3 && first == 0) { /* c's growth does not move d */
                expect(&h, d, len, "the fork while the original grows");
            }
        }
        expect(&h, c, len + more, "the original");
        int32_t crow[MAX_ROWS];
        memcpy(crow, h.row, sizeof crow);
        if (first == 0) {
            kv_cache_destroy(c); /* the original goes first */
            c = NULL;
        }
        memcpy(h.row, frow, sizeof frow); /* d grows on the branches */
        for (int32_t p = len; p < len + more; p++)
            ck_assert_int_eq(feed(&h, d, p, 1), KV_OK);
        expect(&h, d, len + more, "the fork after growing");
        struct kv_cache *r = recompute_as(&h, ops, len + more, 17);
        same_attention(d, r, len + more, 5, "fork vs an independent run");
        kv_cache_destroy(r);
        if (c != NULL) {
            memcpy(h.row, crow, sizeof crow);
            expect(&h, c, len + more, "the original after the fork grew");
        }
        kv_cache_destroy(d);
        d = NULL;
        if (c == NULL)
            ck_assert_int_eq(tcreate(&c, ops, cf), KV_OK);
        h_free(&h);
    }
    kv_cache_destroy(c);
    ck_assert_int_eq(kv_alloc_live(), live0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* borrow                                                                   */

/* _i: strategy x config. A lender (batch 1) prefilled with `len` tokens;
 * borrowers of the config's batch take its first n (a whole number of
 * blocks, and not), read them back, grow, crop into the borrowed part and
 * grow again, and fork; the lender's rows never change, and a fork owns
 * every row (it outlives the lender). */
START_TEST(test_borrow)
{
    const struct kv_strategy_ops *ops = kv_strategy_at(_i / N_CONFS);
    const struct conf *cf = &confs[_i % N_CONFS];
    const int64_t live0 = kv_alloc_live();
    struct conf lc = *cf;
    lc.batch = 1;
    const struct kv_cache_config dcfg = {.n_layers = cf->n_layers, .batch = cf->batch,
                                         .n_kv_heads = cf->n_kv_heads,
                                         .head_dim = cf->head_dim, .max_len = cf->max_len};
    struct kv_cache *c = NULL, *d = NULL, *f = NULL;
    int32_t bor = -1;
    ck_assert_int_eq(tcreate(&c, ops, &lc), KV_OK);
    if (!(ops->caps & KV_CAP_BORROW)) {
        d = c; /* must be overwritten */
        ck_assert_int_eq(kv_cache_borrow_prefix(&d, c, &dcfg, 0, &bor), KV_ERR_UNSUPPORTED);
        ck_assert_ptr_null(d);
        ck_assert_int_eq(bor, 0);
        ck_assert_int_eq(kv_strategy_borrowable(ops, c->params, 40), 0);
        kv_cache_destroy(c);
        ck_assert_int_eq(kv_alloc_live(), live0);
        return;
    }
    const int32_t len = 40, more = 9, cut = 20;
    const int32_t ns[2] = {32, 37};
    for (int k = 0; k < 2; k++) {
        const int32_t n = ns[k];
        struct hist h;
        h_init(&h, &lc, n + more + cut, 900 + (uint64_t)_i);
        if (c == NULL)
            ck_assert_int_eq(tcreate(&c, ops, &lc), KV_OK);
        ck_assert_int_eq(feed(&h, c, 0, 17), KV_OK);
        for (int32_t p = 17; p < len; p++)
            ck_assert_int_eq(feed(&h, c, p, 1), KV_OK);
        const int32_t row0 = h.row[0];
        /* refusals: a length past the lender's, another shape */
        struct kv_cache_config bad = dcfg;
        bad.head_dim *= 2;
        ck_assert_int_eq(kv_cache_borrow_prefix(&d, c, &dcfg, len + 1, &bor), KV_ERR_INVALID);
        ck_assert_int_eq(kv_cache_borrow_prefix(&d, c, &bad, n, &bor), KV_ERR_INVALID);
        ck_assert_ptr_null(d);

        ck_assert_int_eq(kv_cache_borrow_prefix(&d, c, &dcfg, n, &bor), KV_OK);
        ck_assert_int_eq(bor, kv_strategy_borrowable(ops, c->params, n));
        ck_assert_int_gt(bor, 0);
        ck_assert_int_le(bor, n);
        h.batch = cf->batch; /* every borrower's sequence: row 0's past, its own future */
        for (int32_t b = 0; b < h.batch; b++)
            h.row[b] = h_branch(&h, row0, n);
        expect(&h, d, n, "the borrower");
        struct kv_cache_stats sc, sd;
        ck_assert_int_eq(kv_cache_stats(c, &sc), KV_OK);
        ck_assert_int_eq(kv_cache_stats(d, &sd), KV_OK);
        /* it holds what it did not borrow, nothing of what it did */
        ck_assert_uint_eq(sd.tokens, sc.tokens / (size_t)len * (size_t)(n - bor) * (size_t)h.batch);
        ck_assert_int_eq(kv_cache_fork(&f, d), KV_OK);

        for (int32_t p = n; p < n + more; p++)
            ck_assert_int_eq(feed(&h, d, p, 1), KV_OK);
        expect(&h, d, n + more, "the borrower after growing");
        ck_assert_int_eq(kv_cache_crop(d, cut), KV_OK); /* into a borrowed block */
        ck_assert_int_eq(feed(&h, d, cut, 3), KV_OK);
        for (int32_t p = cut + 3; p < n + more; p++)
            ck_assert_int_eq(feed(&h, d, p, 1), KV_OK);
        expect(&h, d, n + more, "the borrower cropped into its borrowed blocks");

        int32_t drow[MAX_ROWS];
        memcpy(drow, h.row, sizeof drow);
        h.batch = 1; /* the lender never changed */
        h.row[0] = row0;
        expect(&h, c, len, "the lender");
        kv_cache_destroy(d);
        d = NULL;
        kv_cache_destroy(c); /* the fork copied what it read */
        c = NULL;
        h.batch = cf->batch;
        memcpy(h.row, drow, sizeof drow);
        expect(&h, f, n, "a fork of the borrower");
        kv_cache_destroy(f);
        f = NULL;
        h_free(&h);
    }
    ck_assert_int_eq(kv_alloc_live(), live0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* reorder                                                                  */

/* A map of n sources for a cache of batch B, and what it is. */
struct rmap {
    int32_t n;
    int32_t src[8];
    const char *what;
};

/* _i: strategy x config. Maps in sequence on one cache (each then grown
 * by a few tokens on diverging rows): a permutation, beams with repeated
 * parents, dropping sequences, growing the batch again. */
START_TEST(test_reorder)
{
    const struct kv_strategy_ops *ops = kv_strategy_at(_i / N_CONFS);
    const struct conf *cf = &confs[_i % N_CONFS];
    const int64_t live0 = kv_alloc_live();
    struct kv_cache *c = NULL;
    ck_assert_int_eq(tcreate(&c, ops, cf), KV_OK);
    static const int32_t id[4] = {0, 1, 2, 3};
    if (!(ops->caps & KV_CAP_REORDER) || !(ops->caps & KV_CAP_KEEPS_HISTORY)) {
        ck_assert_int_eq(kv_cache_reorder(c, id, cf->batch),
                         (ops->caps & KV_CAP_REORDER) ? KV_OK : KV_ERR_UNSUPPORTED);
        ck_assert_int_eq(kv_cache_free_seq(c, 0), (ops->caps & KV_CAP_REORDER)
                                                      ? KV_OK : KV_ERR_UNSUPPORTED);
        kv_cache_destroy(c);
        ck_assert_int_eq(kv_alloc_live(), live0);
        return;
    }
    const int32_t B = cf->batch; /* 3 or 4 (every conf's batch) */
    const struct rmap maps[] = {
        {B, {2, 0, 1, 3}, "a permutation"},
        {B, {0, 0, 1, 1}, "beams: parents 0, 0, 1, 1"},
        {B, {1, 1, 1, 1}, "every beam from one parent"},
        {2, {2, 0}, "two sequences kept"},
        {B, {1, 0, 0, 1}, "back to the creation batch"},
        {1, {B - 1}, "one sequence kept"},
        {B, {0, 0, 0, 0}, "n samples of one prompt"},
        {B, {0, 1, 2, 3}, "the identity"},
    };
    struct hist h;
    const int32_t step = 3, n_maps = (int32_t)(sizeof maps / sizeof maps[0]);
    h_init(&h, cf, 14 + step * (n_maps + 1), 900 + (uint64_t)_i);
    ck_assert_int_eq(feed(&h, c, 0, 11), KV_OK);
    for (int32_t p = 11; p < 14; p++)
        ck_assert_int_eq(feed(&h, c, p, 1), KV_OK);
    int32_t len = 14;
    /* refused maps change nothing */
    static const int32_t out_of_range[4] = {0, 9, 1, 2}, negative[4] = {0, -1, 1, 2};
    ck_assert_int_eq(kv_cache_reorder(c, out_of_range, B), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_reorder(c, negative, B), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_reorder(c, id, 0), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_reorder(c, NULL, B), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_reorder(NULL, id, B), KV_ERR_INVALID);
    expect(&h, c, len, "after refused maps");
    for (int32_t i = 0; i < n_maps; i++) {
        const struct rmap *m = &maps[i];
        const size_t copied = kv_cache_copied_bytes(c);
        ck_assert_int_eq(kv_cache_reorder(c, m->src, m->n), KV_OK);
        ck_assert_int_eq(c->cfg.batch, m->n);
        ck_assert_uint_ge(kv_cache_copied_bytes(c), copied);
        h_reorder(&h, m->src, m->n, len);
        expect(&h, c, len, m->what);
        struct kv_cache *r = recompute_as(&h, ops, len, 11);
        same_attention(c, r, len, 3 + (uint64_t)i, m->what);
        kv_cache_destroy(r);
        for (int32_t p = len; p < len + step; p++) /* the copies diverge */
            ck_assert_int_eq(feed(&h, c, p, 1), KV_OK);
        len += step;
        expect(&h, c, len, m->what);
    }
    /* past the creation batch: a preallocated cache has no room, the
     * others grow */
    static const int32_t wide[6] = {0, 1, 2, 0, 1, 2};
    enum kv_status st = kv_cache_reorder(c, wide, B + 2);
    if (ops->caps & KV_CAP_PREALLOCATES) {
        ck_assert_int_eq(st, KV_ERR_FULL);
        ck_assert_int_eq(c->cfg.batch, B);
    } else {
        ck_assert_int_eq(st, KV_OK);
        h_reorder(&h, wide, B + 2, len);
    }
    expect(&h, c, len, "a batch past the creation batch");
    kv_cache_destroy(c);
    h_free(&h);
    ck_assert_int_eq(kv_alloc_live(), live0);
}
END_TEST

/* free_seq drops one sequence, copy_seq copies one over another. */
START_TEST(test_free_and_copy_seq)
{
    const struct kv_strategy_ops *ops = kv_strategy_at(_i);
    const struct conf *cf = &confs[1]; /* batch 4 */
    if (!(ops->caps & KV_CAP_REORDER) || !(ops->caps & KV_CAP_KEEPS_HISTORY))
        return; /* test_reorder covers the refusal */
    const int64_t live0 = kv_alloc_live();
    struct kv_cache *c = NULL;
    ck_assert_int_eq(tcreate(&c, ops, cf), KV_OK);
    struct hist h;
    h_init(&h, cf, 40, 77);
    ck_assert_int_eq(feed(&h, c, 0, 9), KV_OK);
    ck_assert_int_eq(kv_cache_free_seq(c, 4), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_free_seq(c, -1), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_copy_seq(c, 0, 4), KV_ERR_INVALID);
    ck_assert_int_eq(kv_cache_free_seq(c, 1), KV_OK);
    static const int32_t drop1[3] = {0, 2, 3};
    h_reorder(&h, drop1, 3, 9);
    expect(&h, c, 9, "sequence 1 freed");
    ck_assert_int_eq(kv_cache_copy_seq(c, 2, 0), KV_OK);
    static const int32_t cp[3] = {2, 1, 2};
    h_reorder(&h, cp, 3, 9);
    expect(&h, c, 9, "sequence 2 copied over 0");
    for (int32_t p = 9; p < 14; p++)
        ck_assert_int_eq(feed(&h, c, p, 1), KV_OK);
    expect(&h, c, 14, "grown after free and copy");
    ck_assert_int_eq(kv_cache_free_seq(c, 0), KV_OK);
    ck_assert_int_eq(kv_cache_free_seq(c, 0), KV_OK);
    ck_assert_int_eq(kv_cache_free_seq(c, 0), KV_ERR_INVALID); /* the last one stays */
    kv_cache_destroy(c);
    h_free(&h);
    ck_assert_int_eq(kv_alloc_live(), live0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Allocation failure                                                       */

/*
 * Each operation with the k-th allocation failing, for every k until it
 * succeeds: KV_ERR_NOMEM, the cache reads back as before, and after the
 * scenario nothing has leaked.
 */
/*
 * kv_cache_stats, token by token: the breakdown adds up to the resident
 * bytes, and a strategy with its own `stats` counts as token rows only what
 * it holds. The sliding ring holds min(len, window) tokens (the rest of the
 * ring is slack until it wraps), sinks and h2o min(len, what they keep);
 * the quantized store holds fewer bytes than f32 rows of its tokens once
 * codes hold some, and its residual's free slots are slack. Without their
 * `stats`, everything resident would count as tokens (kv_cache_stats).
 */
START_TEST(test_stats)
{
    const struct kv_strategy_ops *ops = kv_strategy_at(_i / N_CONFS);
    const struct conf *cf = &confs[_i % N_CONFS];
    /* the rows a bounded cache holds at most: sliding its window, sinks
     * its sinks and window, h2o its heavy slots and window (0: unbounded) */
    const int sliding = strcmp(ops->name, "sliding") == 0;
    const int bounded = sliding || strcmp(ops->name, "sinks") == 0 || strcmp(ops->name, "h2o") == 0;
    const int quantized = strcmp(ops->name, "quantized") == 0;
    const int32_t n = 40;
    struct hist h;
    h_init(&h, cf, n, 91 + (uint64_t)_i);
    struct kv_cache *c = NULL;
    ck_assert_int_eq(tcreate(&c, ops, cf), KV_OK);
    int32_t cap = 0;
    if (bounded) {
        static const char *const parts[] = {"window", "sinks", "heavy"};
        for (int i = 0; i < 3; i++) {
            const int32_t k = kv_param_find(ops, parts[i]);
            int32_t v = 0;
            if (k >= 0)
                memcpy(&v, (const char *)c->params + ops->params[k].offset, sizeof v);
            cap += v;
        }
    }
    size_t one = 0, last = 0;
    int slack_seen = 0;
    for (int32_t p = 0; p < n; p++) {
        ck_assert_int_eq(feed(&h, c, p, 1), KV_OK);
        struct kv_cache_stats st;
        ck_assert_int_eq(kv_cache_stats(c, &st), KV_OK);
        REQUIRE(st.resident == kv_cache_resident_bytes(c), "%s: stats' resident %zu, the cache's %zu",
                ops->name, st.resident, kv_cache_resident_bytes(c));
        REQUIRE(st.tokens + st.slack + st.spare == st.resident,
                "%s at %d tokens: %zu + %zu + %zu != %zu", ops->name, p + 1, st.tokens, st.slack,
                st.spare, st.resident);
        REQUIRE((st.tokens > 0 || st.resident == 0) && st.tokens <= st.resident,
                "%s at %d tokens: %zu token bytes of %zu", ops->name, p + 1, st.tokens, st.resident);
        slack_seen |= st.slack > 0;
        if (p == 0)
            one = st.tokens;
        if (bounded) {
            const int32_t held = p + 1 < cap ? p + 1 : cap;
            REQUIRE(st.tokens == (size_t)held * one, "%s at %d tokens: %zu bytes, not %d x %zu",
                    ops->name, p + 1, st.tokens, held, one);
            if (sliding && p + 1 >= cf->window)
                ck_assert_uint_eq(st.slack, 0);
        }
        if (quantized) /* never more than every token as one f32 residual row */
            REQUIRE(st.tokens <= (size_t)(p + 1) * one, "quantized at %d tokens: %zu bytes, over %d x %zu",
                    p + 1, st.tokens, p + 1, one);
        last = st.tokens;
    }
    if (quantized) /* past the residual, codes hold the oldest tokens */
        REQUIRE(last < (size_t)n * one, "quantized at %d tokens: %zu bytes, no fewer than f32 rows", n,
                last);
    /* (hybrid: its layers' own breakdowns, its default layers grow by
     * doubling or hold a ring) */
    if (bounded || quantized || strcmp(ops->name, "hybrid") == 0)
        REQUIRE(slack_seen, "%s: never any slack", ops->name);
    kv_cache_destroy(c);
    h_free(&h);
}
END_TEST

START_TEST(test_ops_alloc_failure)
{
    const struct kv_strategy_ops *ops = kv_strategy_at(_i);
    const struct conf *cf = &confs[0];
    if (!(ops->caps & KV_CAP_KEEPS_HISTORY))
        return;
    const int64_t live0 = kv_alloc_live();
    for (int op = 0; op < 4; op++) {
        const uint32_t need[4] = {KV_CAP_CROP, KV_CAP_FORK, KV_CAP_REORDER, KV_CAP_REORDER};
        if (!(ops->caps & need[op]))
            continue;
        int done = 0;
        for (int64_t k = 1; k < 500 && !done; k++) {
            struct hist h;
            h_init(&h, cf, 40, 33);
            struct kv_cache *c = NULL, *d = NULL;
            ck_assert_int_eq(tcreate(&c, ops, cf), KV_OK);
            ck_assert_int_eq(feed(&h, c, 0, 19), KV_OK);
            static const int32_t beams[3] = {2, 2, 0}, one[1] = {1};
            kv_alloc_fail_at(k, 0);
            enum kv_status st;
            /* a crop the strategy refuses (back past tokens it has since
             * evicted or rounded) is tested by test_crop; crop to 0 then */
            const int32_t crop_to =
                kv_cache_has(c, KV_CAP_EVICTS) || kv_cache_has(c, KV_CAP_LOSSY) ? 0 : 7;
            if (op == 0)
                st = kv_cache_crop(c, crop_to);
            else if (op == 1)
                st = kv_cache_fork(&d, c);
            else if (op == 2)
                st = kv_cache_reorder(c, beams, 3);
            else
                st = kv_cache_reorder(c, one, 1);
            const int64_t made = kv_alloc_count();
            kv_alloc_fail_at(0, 0);
            if (st == KV_OK) {
                done = made < k; /* the failure was never reached */
                if (op >= 2)
                    h_reorder(&h, op == 2 ? beams : one, op == 2 ? 3 : 1, 19);
                expect(&h, d != NULL ? d : c, op == 0 ? crop_to : 19, "after the operation");
            } else {
                ck_assert_int_eq(st, KV_ERR_NOMEM);
                ck_assert_ptr_null(d);
                expect(&h, c, 19, "after a failed operation");
                ck_assert_int_eq(feed(&h, c, 19, 1), KV_OK); /* and still works */
            }
            kv_cache_destroy(d);
            kv_cache_destroy(c);
            h_free(&h);
            ck_assert_int_eq(kv_alloc_live(), live0);
        }
        ck_assert_msg(done, "%s: operation %d never completed", ops->name, op);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */

static Suite *ops_suite(void)
{
    Suite *s = suite_create("cache_ops");
    const int32_t n = kv_strategy_count();
    TCase *tc = tcase_create("ops");
    tcase_set_timeout(tc, 240);
    tcase_add_loop_test(tc, test_crop, 0, n * N_CONFS);
    tcase_add_loop_test(tc, test_fork, 0, n * N_CONFS);
    tcase_add_loop_test(tc, test_reorder, 0, n * N_CONFS);
    tcase_add_loop_test(tc, test_borrow, 0, n * N_CONFS);
    tcase_add_loop_test(tc, test_stats, 0, n * N_CONFS);
    tcase_add_loop_test(tc, test_free_and_copy_seq, 0, n);
    tcase_add_loop_test(tc, test_ops_alloc_failure, 0, n);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(ops_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
