/*
 * model.c - the Llama-architecture decoder (synthetic weights), the runner
 * that holds its activations, one forward pass, and the greedy generation
 * loop. See kv_model.h for the contract and docs/design.md for the model.
 *
 * The design decision that matters: the runner allocates every activation
 * buffer and the attention workspace once, sized for the largest call it
 * will see (batch x max_tokens tokens), so kv_forward and the decode loop of
 * kv_generate never allocate. The only allocations a step can cause are the
 * ones the cache strategy makes on purpose (dynamic's doubling,
 * dynamic-concat's copy), which is exactly what the benchmark measures.
 *
 * Decisions written down here:
 * - Positions under left padding are HF-style: the token at absolute position
 *   p of sequence b is rotated as position max(p - pad[b], 0), so a padded
 *   sequence computes exactly what it computes alone; the attention mask
 *   hides the padding keys (absolute positions < pad[b]).
 * - The runner's extra window and the strategy's mask window combine as the
 *   intersection of both windows: the smaller non-zero window wins, with the
 *   sinks of the mask it came from.
 * - The synthetic model has an untied classifier by default: with a tied
 *   one and random embeddings, a token's own embedding dominates its logits
 *   and greedy decoding just repeats the last token.
 * - Each weight tensor gets its own PRNG stream (seed, tensor index), so the
 *   same seed gives the same attention weights with the MLP on or off.
 * - Weight bytes count every weight array once (what a step streams, up to
 *   the embedding table which a step only reads row by row).
 */
#include "kv_model.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "../../kernels/kv_ops.h"
#include "../../kernels/kv_pool.h"
#include "checkpoint.h"

/* ------------------------------------------------------------------------ */
/* Configuration                                                            */

struct kv_model_config kv_model_default_config(void)
{
    return (struct kv_model_config){
        .dim = 512,
        .hidden_dim = 1376,
        .n_layers = 4,
        .n_heads = 8,
        .n_kv_heads = 8,
        .vocab_size = 256,
        .max_len = 8192,
        .mlp = 1,
        .shared_classifier = 0,
    };
}

/* Number of floats of each weight tensor, in llama2.c order. */
enum {
    W_EMB, W_RMS_ATT, W_Q, W_K, W_V, W_O, W_RMS_FFN, W_1, W_2, W_3, W_RMS_FINAL,
    W_CLS, W_COUNT
};

static enum kv_status weight_counts(const struct kv_model_config *c, size_t n[W_COUNT])
{
    size_t L = (size_t)c->n_layers, D = (size_t)c->dim, H = (size_t)c->hidden_dim;
    size_t V = (size_t)c->vocab_size;
    size_t hs = D / (size_t)c->n_heads;
    size_t kvd = (size_t)c->n_kv_heads * hs;
    const size_t f_emb[] = {V, D}, f_rms[] = {L, D}, f_q[] = {L, D, D},
                 f_kv[] = {L, kvd, D}, f_mlp[] = {L, H, D};
    if (kv_mul_sizes(&n[W_EMB], 2, f_emb) || kv_mul_sizes(&n[W_RMS_ATT], 2, f_rms) ||
        kv_mul_sizes(&n[W_Q], 3, f_q) || kv_mul_sizes(&n[W_K], 3, f_kv) ||
        kv_mul_sizes(&n[W_1], 3, f_mlp))
        return KV_ERR_OVERFLOW;
    n[W_V] = n[W_K];
    n[W_O] = n[W_Q];
    n[W_RMS_FFN] = n[W_RMS_ATT];
    if (!c->mlp)
        n[W_1] = 0;
    n[W_2] = n[W_1];
    n[W_3] = n[W_1];
    n[W_RMS_FINAL] = D;
    n[W_CLS] = c->shared_classifier ? 0 : n[W_EMB];
    return KV_OK;
}

/* Total floats of all weights; KV_ERR_OVERFLOW if the byte count overflows. */
static enum kv_status weight_total(const struct kv_model_config *c, size_t *floats)
{
    size_t n[W_COUNT];
    enum kv_status s = weight_counts(c, n);
    if (s != KV_OK)
        return s;
    size_t total = 0;
    for (int i = 0; i < W_COUNT; i++) {
        if (n[i] > SIZE_MAX - total)
            return KV_ERR_OVERFLOW;
        total += n[i];
    }
    size_t bytes;
    if (kv_mul_size(&bytes, total, sizeof(float)) != KV_OK)
        return KV_ERR_OVERFLOW;
    *floats = total;
    return KV_OK;
}

enum kv_status kv_model_config_check(const struct kv_model_config *c)
{
    if (c == NULL || c->dim < 1 || c->hidden_dim < 1 || c->n_layers < 1 ||
        c->n_heads < 1 || c->n_kv_heads < 1 || c->vocab_size < 1 || c->max_len < 1)
        return KV_ERR_INVALID;
    if (c->dim % c->n_heads != 0 || (c->dim / c->n_heads) % 2 != 0)
        return KV_ERR_INVALID; /* head_dim must be whole and even (RoPE pairs) */
    if (c->n_heads % c->n_kv_heads != 0)
        return KV_ERR_INVALID;
    if ((c->mlp != 0 && c->mlp != 1) ||
        (c->shared_classifier != 0 && c->shared_classifier != 1))
        return KV_ERR_INVALID;
    size_t floats;
    return weight_total(c, &floats);
}

/* 0 when the config is invalid or its size overflows. */
size_t kv_model_weight_bytes(const struct kv_model_config *c)
{
    size_t floats;
    if (kv_model_config_check(c) != KV_OK || weight_total(c, &floats) != KV_OK)
        return 0;
    return floats * sizeof(float);
}

double kv_model_forward_flops(const struct kv_model_config *c, int32_t batch, int32_t n_new,
                              int32_t past)
{
    if (kv_model_config_check(c) != KV_OK || batch < 0 || n_new < 0 || past < 0)
        return 0.0;
    double D = c->dim, KVD = (double)c->n_kv_heads * (c->dim / c->n_heads);
    double per_tok = 2.0 * (2.0 * D * D + 2.0 * D * KVD) * c->n_layers;
    if (c->mlp)
        per_tok += 6.0 * D * c->hidden_dim * c->n_layers;
    double n = n_new, pairs = n * past + 0.5 * n * (n + 1.0);
    double attn = 4.0 * D * c->n_layers * pairs; /* 4 * head_dim * heads per pair */
    return (double)batch * (per_tok * n + attn + 2.0 * D * c->vocab_size * n);
}

/* ------------------------------------------------------------------------ */
/* Synthetic weights                                                        */

/* Uniform in [-1, 1): 24 random bits. */
static float rng_sym(uint64_t *s)
{
    return (float)(kv_rng_next(s) >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

/* Fills x[0..n) with uniform(-1,1) * amp; the stream is (seed, tensor). */
static void fill_uniform(float *x, size_t n, float amp, uint64_t seed, int tensor)
{
    uint64_t s = seed ^ (0xD1B54A32D192ED03ull * (uint64_t)(tensor + 1));
    kv_rng_next(&s);
    for (size_t i = 0; i < n; i++)
        x[i] = amp * rng_sym(&s);
}

static void fill_const(float *x, size_t n, float v)
{
    for (size_t i = 0; i < n; i++)
        x[i] = v;
}

/*
 * Scales: uniform(-a, a) has variance a^2/3, so a = sqrt(3/fan_in) makes each
 * output of a matrix-vector product unit-variance when its input has unit
 * RMS (which RMSNorm guarantees). The embedding is unit-variance, norm
 * weights are 1, so the residual stream and the logits stay O(1).
 */
enum kv_status kv_model_create_synthetic(struct kv_model **out,
                                         const struct kv_model_config *cfg,
                                         uint64_t seed)
{
    if (out == NULL)
        return KV_ERR_INVALID;
    *out = NULL;
    enum kv_status st = kv_model_config_check(cfg);
    if (st != KV_OK)
        return st;
    size_t n[W_COUNT], floats = 0;
    if (weight_counts(cfg, n) != KV_OK || weight_total(cfg, &floats) != KV_OK)
        return KV_ERR_OVERFLOW; /* already excluded by the check */

    struct kv_model *m = kv_alloc(sizeof *m);
    if (m == NULL)
        return KV_ERR_NOMEM;
    m->cfg = *cfg;
    m->storage_bytes = floats * sizeof(float);
    m->storage = kv_alloc(m->storage_bytes);
    if (m->storage == NULL) {
        kv_free(m);
        return KV_ERR_NOMEM;
    }
    m->mapped = 0;

    float *p = m->storage;
    float *ptr[W_COUNT];
    for (int i = 0; i < W_COUNT; i++) {
        ptr[i] = n[i] ? p : NULL;
        p += n[i];
    }
    struct kv_weights *w = &m->w;
    w->token_embedding = ptr[W_EMB];
    w->rms_att = ptr[W_RMS_ATT];
    w->wq = ptr[W_Q];
    w->wk = ptr[W_K];
    w->wv = ptr[W_V];
    w->wo = ptr[W_O];
    w->rms_ffn = ptr[W_RMS_FFN];
    w->w1 = ptr[W_1];
    w->w2 = ptr[W_2];
    w->w3 = ptr[W_3];
    w->rms_final = ptr[W_RMS_FINAL];
    w->wcls = cfg->shared_classifier ? w->token_embedding : ptr[W_CLS];

    float a_dim = sqrtf(3.0f / (float)cfg->dim);
    float a_hid = sqrtf(3.0f / (float)cfg->hidden_dim);
    fill_uniform(w->token_embedding, n[W_EMB], sqrtf(3.0f), seed, W_EMB);
    fill_const(w->rms_att, n[W_RMS_ATT], 1.0f);
    fill_uniform(w->wq, n[W_Q], a_dim, seed, W_Q);
    fill_uniform(w->wk, n[W_K], a_dim, seed, W_K);
    fill_uniform(w->wv, n[W_V], a_dim, seed, W_V);
    fill_uniform(w->wo, n[W_O], a_dim, seed, W_O);
    fill_const(w->rms_ffn, n[W_RMS_FFN], 1.0f);
    if (cfg->mlp) {
        fill_uniform(w->w1, n[W_1], a_dim, seed, W_1);
        fill_uniform(w->w2, n[W_2], a_hid, seed, W_2);
        fill_uniform(w->w3, n[W_3], a_dim, seed, W_3);
    }
    fill_const(w->rms_final, n[W_RMS_FINAL], 1.0f);
    if (!cfg->shared_classifier)
        fill_uniform(w->wcls, n[W_CLS], a_dim, seed, W_CLS);
    *out = m;
    return KV_OK;
}

void kv_model_destroy(struct kv_model *m)
{
    if (m == NULL)
        return;
    if (m->mapped)
        kv_checkpoint_unmap(m); /* leaves storage NULL */
    else
        kv_free(m->storage);
    kv_free(m);
}

/* ------------------------------------------------------------------------ */
/* Counters                                                                 */

int64_t kv_flops_total(const struct kv_flops *f)
{
    if (f == NULL)
        return 0;
    return f->gemm + f->attn + f->softmax + f->norm + f->other;
}

/* ------------------------------------------------------------------------ */
/* Runner                                                                   */

struct kv_runner {
    struct kv_model_config cfg; /* the model it was sized for */
    int32_t batch;
    int32_t max_tokens;         /* per sequence and call */
    int32_t n_threads;
    int32_t window;             /* extra mask window, 0 = off */
    int32_t n_sink;             /* and its sinks */
    kv_attn_probe_fn probe;
    void *probe_user;

    void *arena;                /* every buffer below points into it */
    float *x;     /* (batch*max_tokens, dim) residual stream */
    float *xb;    /* (batch*max_tokens, dim) normalised input of a sublayer */
    float *q;     /* (batch*max_tokens, n_heads*hs) */
    float *k;     /* (batch*max_tokens, n_kv_heads*hs) */
    float *v;     /* (batch*max_tokens, n_kv_heads*hs) */
    float *att;   /* (batch*max_tokens, n_heads*hs) attention output */
    float *hb;    /* (batch*max_tokens, hidden) w1 x, then silu(w1 x)*(w3 x) */
    float *hb2;   /* (batch*max_tokens, hidden) w3 x */
    int32_t *pos; /* (batch*max_tokens) RoPE positions */
    int32_t *fed; /* (batch*max_tokens) the tokens kv_decode_step gathers */
    void *ws;     /* attention workspace */
    size_t ws_bytes;
};

/* Rounds up to a multiple of 64 bytes; KV_ERR_OVERFLOW if it cannot. */
static enum kv_status add_buf(size_t *total, size_t *off, size_t n, size_t elem)
{
    size_t bytes;
    if (kv_mul_size(&bytes, n, elem) != KV_OK || bytes > SIZE_MAX - 64 - *total)
        return KV_ERR_OVERFLOW;
    *off = *total;
    *total += (bytes + 63) & ~(size_t)63;
    return KV_OK;
}

static struct kv_attn_params attn_params_for(const struct kv_model_config *c,
                                             int32_t batch, int32_t n_q,
                                             int32_t n_threads)
{
    return (struct kv_attn_params){
        .batch = batch,
        .n_q = n_q,
        .n_heads = c->n_heads,
        .n_kv_heads = c->n_kv_heads,
        .head_dim = c->dim / c->n_heads,
        .q_pos0 = 0,
        .scale = 1.0f / sqrtf((float)(c->dim / c->n_heads)),
        .n_threads = n_threads,
        /* between two steps' calls of a layer the step streams every
         * weight: past the L3's size they evict the layer's K/V rows, which
         * the kernel then reads as from DRAM at any T */
        .evicted = kv_model_weight_bytes(c) > kv_l3_bytes(),
    };
}

/* Attention workspace for calls of n_q queries (it does not depend on the
 * cache's dtypes or groups). */
static size_t ws_bytes_for(const struct kv_model_config *c, int32_t batch, int32_t n_q,
                           int32_t n_threads)
{
    struct kv_attn_params ap = attn_params_for(c, batch, n_q, n_threads);
    return kv_attn_workspace_bytes(&ap);
}

enum kv_status kv_runner_create(struct kv_runner **out, const struct kv_model *m,
                                int32_t batch, int32_t max_tokens, int32_t n_threads)
{
    if (out == NULL)
        return KV_ERR_INVALID;
    *out = NULL;
    if (m == NULL || batch < 1 || max_tokens < 1)
        return KV_ERR_INVALID;
    const struct kv_model_config *c = &m->cfg;
    enum kv_status st = kv_model_config_check(c);
    if (st != KV_OK)
        return st;
    if (n_threads < 1)
        n_threads = 1;
    size_t T = (size_t)batch * (size_t)max_tokens;
    if (T > INT32_MAX)
        return KV_ERR_OVERFLOW; /* GEMM rows must fit the BLAS integer */
    size_t D = (size_t)c->dim, hs = D / (size_t)c->n_heads;
    size_t kvd = (size_t)c->n_kv_heads * hs, H = c->mlp ? (size_t)c->hidden_dim : 0;

    /* Attention scratch: the largest over every call width this runner
     * can see (widths past 1024, where prefill tiles have long saturated,
     * are represented by max_tokens itself). */
    size_t ws = ws_bytes_for(c, batch, max_tokens, n_threads);
    for (int32_t nq = 1; nq <= max_tokens && nq <= 1024; nq++) {
        size_t b = ws_bytes_for(c, batch, nq, n_threads);
        ws = b > ws ? b : ws;
    }
    if (ws == SIZE_MAX)
        return KV_ERR_OVERFLOW;
    {
        /* and a decode call per sequence as one team job (kv_attn_many, a
         * serving iteration): batch calls of one sequence, the most floats
         * any split of the batch into segments needs */
        const int32_t n = batch < KV_ATTN_MANY_MAX ? batch : KV_ATTN_MANY_MAX;
        struct kv_attn_params one[KV_ATTN_MANY_MAX];
        for (int32_t i = 0; i < n; i++)
            one[i] = attn_params_for(c, 1, 1, n_threads);
        const size_t b = kv_attn_many_workspace_bytes(one, n);
        ws = b > ws ? b : ws;
    }

    size_t total = 0, o_x, o_xb, o_q, o_k, o_v, o_att, o_hb, o_hb2, o_pos, o_fed, o_ws;
    if (add_buf(&total, &o_x, T * D, 4) || add_buf(&total, &o_xb, T * D, 4) ||
        add_buf(&total, &o_q, T * D, 4) || add_buf(&total, &o_k, T * kvd, 4) ||
        add_buf(&total, &o_v, T * kvd, 4) || add_buf(&total, &o_att, T * D, 4) ||
        add_buf(&total, &o_hb, T * H, 4) || add_buf(&total, &o_hb2, T * H, 4) ||
        add_buf(&total, &o_pos, T, sizeof(int32_t)) ||
        add_buf(&total, &o_fed, T, sizeof(int32_t)) || add_buf(&total, &o_ws, ws, 1))
        return KV_ERR_OVERFLOW;

    struct kv_runner *r = kv_alloc(sizeof *r);
    if (r == NULL)
        return KV_ERR_NOMEM;
    r->arena = kv_alloc(total);
    if (r->arena == NULL) {
        kv_free(r);
        return KV_ERR_NOMEM;
    }
    char *a = r->arena;
    r->cfg = *c;
    r->batch = batch;
    r->max_tokens = max_tokens;
    r->n_threads = n_threads;
    r->x = (float *)(a + o_x);
    r->xb = (float *)(a + o_xb);
    r->q = (float *)(a + o_q);
    r->k = (float *)(a + o_k);
    r->v = (float *)(a + o_v);
    r->att = (float *)(a + o_att);
    r->hb = H ? (float *)(a + o_hb) : NULL;
    r->hb2 = H ? (float *)(a + o_hb2) : NULL;
    r->pos = (int32_t *)(a + o_pos);
    r->fed = (int32_t *)(a + o_fed);
    r->ws = a + o_ws;
    r->ws_bytes = ws;

    /* One thread team (kernels/kv_pool.h), sized by OpenMP's thread count:
     * kv_gemm splits big GEMMs over it, so OpenBLAS itself stays
     * single-threaded (see kv_ops.c). */
    kv_blas_single();
    omp_set_num_threads(n_threads);
    *out = r;
    return KV_OK;
}

void kv_runner_destroy(struct kv_runner *r)
{
    if (r == NULL)
        return;
    kv_free(r->arena);
    kv_free(r);
}

void kv_runner_set_window(struct kv_runner *r, int32_t window)
{
    kv_runner_set_mask(r, window, 0);
}

void kv_runner_set_mask(struct kv_runner *r, int32_t window, int32_t n_sink)
{
    if (r == NULL)
        return;
    r->window = window > 0 ? window : 0;
    r->n_sink = r->window > 0 && n_sink > 0 ? n_sink : 0;
}

void kv_runner_set_probe(struct kv_runner *r, kv_attn_probe_fn fn, void *user)
{
    if (r == NULL)
        return;
    r->probe = fn;
    r->probe_user = user;
}

/* ------------------------------------------------------------------------ */
/* Forward                                                                  */

static int same_shape(const struct kv_model_config *a, const struct kv_model_config *b)
{
    return a->dim == b->dim && a->hidden_dim == b->hidden_dim &&
           a->n_layers == b->n_layers && a->n_heads == b->n_heads &&
           a->n_kv_heads == b->n_kv_heads && a->vocab_size == b->vocab_size &&
           a->mlp == b->mlp;
}

/* 1 when every weight a forward of m reads is there (a kv_model a program
 * filled in itself may lack some: refused, never dereferenced). */
static int weights_present(const struct kv_model *m)
{
    const struct kv_weights *w = &m->w;
    return w->token_embedding != NULL && w->rms_att != NULL && w->wq != NULL &&
           w->wk != NULL && w->wv != NULL && w->wo != NULL && w->rms_final != NULL &&
           w->wcls != NULL &&
           (!m->cfg.mlp || (w->rms_ffn != NULL && w->w1 != NULL && w->w2 != NULL &&
                            w->w3 != NULL));
}

/* The view's mask and the runner's extra one: the narrower window wins,
 * with its sinks (0 = no window). */
static void combine_mask(struct kv_mask *m, int32_t window, int32_t n_sink)
{
    if (window > 0 && (m->window == 0 || window < m->window)) {
        m->window = window;
        m->n_sink = n_sink;
    }
}

/*
 * Everything is checked before the first cache update, so a bad argument
 * leaves the cache untouched. A cache that fails an update (a full static
 * cache fails at layer 0, before anything is written) returns its status;
 * one that fails at a later layer (out of memory while growing) leaves that
 * step half-stored, and the caller resets the cache.
 */
/* The checks of one segment against the model and the runner: its rows. */
static int64_t segment_rows(const struct kv_runner *r, const struct kv_model_config *c,
                            const struct kv_segment *sg)
{
    const struct kv_cache *cache = sg->cache;
    if (cache == NULL || sg->tokens == NULL || sg->n < 1 || sg->n > r->max_tokens ||
        sg->pos0 < 0 || sg->pos0 > c->max_len - sg->n || cache->cfg.batch < 1 ||
        cache->cfg.batch > r->batch || cache->cfg.n_layers != c->n_layers ||
        cache->cfg.n_kv_heads != c->n_kv_heads || cache->cfg.head_dim != c->dim / c->n_heads)
        return -1;
    const int64_t rows = (int64_t)cache->cfg.batch * sg->n;
    for (int64_t i = 0; i < rows; i++)
        if (sg->tokens[i] < 0 || sg->tokens[i] >= c->vocab_size)
            return -1;
    if (sg->pad != NULL)
        for (int32_t b = 0; b < cache->cfg.batch; b++)
            if (sg->pad[b] < 0 || sg->pad[b] > sg->pos0 + sg->n - 1)
                return -1; /* the last token must be a real one */
    struct kv_attn_params ap = attn_params_for(c, cache->cfg.batch, sg->n, r->n_threads);
    ap.q_pos0 = sg->pos0;
    if (kv_attn_workspace_bytes(&ap) > r->ws_bytes)
        return -1; /* cannot happen for n <= max_tokens */
    return rows;
}

/* One layer's attention over one segment, before the kernel runs: the
 * cache takes its rows of k and v (from row0), then says what the kernel
 * reads (the view, the params, the mass buffer of a cache that evicts by
 * attention). */
static enum kv_status segment_prepare(struct kv_runner *r, const struct kv_model_config *c,
                                      const struct kv_segment *sg, int32_t l, int64_t row0,
                                      struct kv_attn_params *ap, struct kv_view *view)
{
    const int32_t HS = c->dim / c->n_heads, KVD = c->n_kv_heads * HS;
    struct kv_cache *cache = sg->cache;
    *ap = attn_params_for(c, cache->cfg.batch, sg->n, r->n_threads);
    ap->q_pos0 = sg->pos0;

    /* The cache decides what it keeps, then exposes spans and the mask
     * its storage needs; the runner adds its own window and the batch's
     * padding. */
    enum kv_status s =
        kv_cache_update(cache, l, r->k + row0 * KVD, r->v + row0 * KVD, sg->n, sg->pos0);
    if (s != KV_OK)
        return s;
    s = kv_cache_view(cache, l, view);
    if (s != KV_OK)
        return s;
    combine_mask(&view->mask, r->window, r->n_sink);
    view->mask.pad = sg->pad;
    /* a cache that evicts by attention gets the mass per key back
     * (NULL for every other: the kernel then computes none) */
    return kv_cache_mass_buffer(cache, l, view, c->n_heads, &ap->mass, &ap->mass_len);
}

/* After the kernel: the probe, the mass back to the cache, the counts. */
static enum kv_status segment_finish(struct kv_runner *r, const struct kv_model_config *c,
                                     const struct kv_segment *sg, int32_t l, int64_t row0,
                                     const struct kv_attn_params *ap, const struct kv_view *view,
                                     struct kv_step_stats *local)
{
    const int32_t D = c->dim, HS = c->dim / c->n_heads;
    enum kv_status s;
    if (r->probe != NULL) /* before observe, which may evict what the view shows */
        r->probe(r->probe_user, l, r->q + row0 * D, ap, view);
    if (ap->mass != NULL && (s = kv_cache_observe(sg->cache, l, ap->mass, c->n_heads)) != KV_OK)
        return s;
    int64_t pairs = kv_attn_visible_pairs(ap, view);
    local->flops.attn += 4 * (int64_t)HS * c->n_heads * pairs;
    local->flops.softmax += KV_FLOPS_SOFTMAX_ELEM * (int64_t)c->n_heads * pairs;
    local->attn_bytes += kv_attn_span_bytes(ap, view);
    return KV_OK;
}

/* One layer's attention over every segment, up to KV_ATTN_MANY_MAX at a
 * time: each segment's cache is updated and viewed (the caches are
 * distinct, so no view sees another's update), then one kernel call runs
 * them all (kv_attn_many: the decode segments of a serving iteration as
 * one job of the thread team, where a call each met the team at a barrier
 * per request), then each is finished. */
static enum kv_status layer_attention(struct kv_runner *r, const struct kv_model_config *c,
                                      const struct kv_segment *segs, int32_t n_seg, int32_t l,
                                      struct kv_step_stats *local)
{
    const int32_t D = c->dim;
    struct kv_attn_params ap[KV_ATTN_MANY_MAX];
    struct kv_view view[KV_ATTN_MANY_MAX];
    float *out[KV_ATTN_MANY_MAX];
    const float *q[KV_ATTN_MANY_MAX];
    int64_t row[KV_ATTN_MANY_MAX + 1];
    row[0] = 0;
    for (int32_t i0 = 0; i0 < n_seg; i0 += KV_ATTN_MANY_MAX) {
        const int32_t n = n_seg - i0 < KV_ATTN_MANY_MAX ? n_seg - i0 : KV_ATTN_MANY_MAX;
        for (int32_t i = 0; i < n; i++) {
            const struct kv_segment *sg = &segs[i0 + i];
            enum kv_status s = segment_prepare(r, c, sg, l, row[i], &ap[i], &view[i]);
            if (s != KV_OK)
                return s;
            out[i] = r->att + row[i] * D;
            q[i] = r->q + row[i] * D;
            row[i + 1] = row[i] + (int64_t)sg->cache->cfg.batch * sg->n;
        }
        int64_t t0 = kv_now_ns();
        enum kv_status s = kv_attn_many(out, q, ap, view, n, r->ws, r->ws_bytes);
        local->attn_ns += kv_now_ns() - t0;
        if (s != KV_OK)
            return s;
        for (int32_t i = 0; i < n; i++)
            if ((s = segment_finish(r, c, &segs[i0 + i], l, row[i], &ap[i], &view[i], local)) !=
                KV_OK)
                return s;
        row[0] = row[n];
    }
    return KV_OK;
}

/*
 * Everything is checked before the first cache update, so a bad argument
 * leaves every cache untouched. A cache that fails an update (a full static
 * cache fails at layer 0, before anything is written) returns its status;
 * one that fails at a later layer (out of memory while growing) leaves that
 * step half-stored, and the caller resets the cache.
 *
 * The segments' rows are stacked (segment 0's batch x n rows first), so
 * every weight GEMM runs once over all of them and each segment's
 * attention reads its own cache: one forward serves sequences at different
 * positions (continuous batching) as well as one batch that shares them.
 */
static enum kv_status forward(struct kv_runner *r, const struct kv_model *m,
                              const struct kv_segment *segs, int32_t n_seg, float *logits,
                              struct kv_step_stats *st, int all_logits)
{
    if (r == NULL || m == NULL || segs == NULL || n_seg < 1 || logits == NULL)
        return KV_ERR_INVALID;
    const struct kv_model_config *c = &m->cfg;
    const struct kv_weights *w = &m->w;
    if (kv_model_config_check(c) != KV_OK || !same_shape(c, &r->cfg) || !weights_present(m))
        return KV_ERR_INVALID;
    const int32_t D = c->dim, H = c->hidden_dim;
    int64_t T = 0, n_last = 0;
    for (int32_t i = 0; i < n_seg; i++) {
        const int64_t rows = segment_rows(r, c, &segs[i]);
        if (rows < 0 || rows > (int64_t)r->batch * r->max_tokens - T)
            return KV_ERR_INVALID;
        for (int32_t j = 0; j < i; j++)
            if (segs[j].cache == segs[i].cache)
                return KV_ERR_INVALID; /* a cache takes one update a call */
        T += rows;
        n_last += segs[i].cache->cfg.batch;
    }

    struct kv_step_stats local = {0};
    struct kv_flops *fl = &local.flops;
    struct kv_pool_stats pool0, pool1;
    kv_pool_stats_get(&pool0);
    int64_t g0;
/* the weight GEMMs' time, for the step's split (a clock read is ~20 ns) */
#define TIMED_GEMM(call) (g0 = kv_now_ns(), (call), local.gemv_ns += kv_now_ns() - g0)

    /* Embedding and positions: row b*n + t of a segment is token t of its
     * sequence b. */
    for (int32_t i = 0, row = 0; i < n_seg; i++) {
        const struct kv_segment *sg = &segs[i];
        for (int32_t b = 0; b < sg->cache->cfg.batch; b++) {
            for (int32_t t = 0; t < sg->n; t++, row++) {
                memcpy(r->x + (int64_t)row * D,
                       w->token_embedding + (size_t)sg->tokens[b * sg->n + t] * D,
                       (size_t)D * sizeof(float));
                int32_t p = sg->pos0 + t - (sg->pad != NULL ? sg->pad[b] : 0);
                r->pos[row] = p > 0 ? p : 0;
            }
        }
    }

    const int32_t HS = c->dim / c->n_heads, KVD = c->n_kv_heads * HS;
    const size_t wqo = (size_t)D * D, wkv = (size_t)KVD * D, wmlp = (size_t)H * D;
    for (int32_t l = 0; l < c->n_layers; l++) {
        /* Attention block: xb = rmsnorm(x); q, k, v = xb W^T; RoPE. */
        kv_rmsnorm(r->xb, r->x, w->rms_att + (size_t)l * D, T, D);
        fl->norm += KV_FLOPS_RMSNORM_ELEM * T * D;
        const struct kv_gemm_part qkv[3] = {
            {r->q, w->wq + l * wqo, D}, {r->k, w->wk + l * wkv, KVD}, {r->v, w->wv + l * wkv, KVD}};
        TIMED_GEMM(kv_gemm_multi(qkv, 3, r->xb, T, D, 0.0f, &fl->gemm));
        kv_rope(r->q, c->n_heads, r->k, c->n_kv_heads, T, HS, r->pos);
        fl->norm += KV_FLOPS_ROPE_PAIR * T * (c->n_heads + c->n_kv_heads) * (HS / 2);

        enum kv_status s = layer_attention(r, c, segs, n_seg, l, &local);
        if (s != KV_OK)
            return s;

        /* x += att Wo^T (residual fused into the GEMM's beta = 1). */
        TIMED_GEMM(kv_gemm(r->x, r->att, w->wo + l * wqo, T, D, D, 1.0f, &fl->gemm));
        fl->other += KV_FLOPS_RESIDUAL_ELEM * T * D;

        /* MLP block: x += w2(silu(w1 xb) * w3 xb), xb = rmsnorm(x). */
        if (c->mlp) {
            kv_rmsnorm(r->xb, r->x, w->rms_ffn + (size_t)l * D, T, D);
            fl->norm += KV_FLOPS_RMSNORM_ELEM * T * D;
            const struct kv_gemm_part w13[2] = {{r->hb, w->w1 + l * wmlp, H},
                                                {r->hb2, w->w3 + l * wmlp, H}};
            TIMED_GEMM(kv_gemm_multi(w13, 2, r->xb, T, D, 0.0f, &fl->gemm));
            kv_swiglu(r->hb, r->hb2, T * H);
            fl->other += KV_FLOPS_SWIGLU_ELEM * T * H;
            TIMED_GEMM(kv_gemm(r->x, r->hb, w->w2 + l * wmlp, T, D, H, 1.0f, &fl->gemm));
            fl->other += KV_FLOPS_RESIDUAL_ELEM * T * D;
        }
    }

    if (all_logits) {
        /* Final norm and classifier on every token (xb is free now). */
        kv_rmsnorm(r->xb, r->x, w->rms_final, T, D);
        fl->norm += KV_FLOPS_RMSNORM_ELEM * T * D;
        TIMED_GEMM(kv_gemm(logits, r->xb, w->wcls, T, c->vocab_size, D, 0.0f, &fl->gemm));
    } else {
        /* Final norm and classifier on the last token of each sequence only
         * (into xb, free now: n_last <= T rows). */
        for (int32_t i = 0, row = 0, k = 0; i < n_seg; i++)
            for (int32_t b = 0; b < segs[i].cache->cfg.batch; b++, k++) {
                row += segs[i].n;
                kv_rmsnorm(r->xb + (int64_t)k * D, r->x + (int64_t)(row - 1) * D, w->rms_final,
                           1, D);
            }
        fl->norm += KV_FLOPS_RMSNORM_ELEM * n_last * D;
        TIMED_GEMM(kv_gemm(logits, r->xb, w->wcls, n_last, c->vocab_size, D, 0.0f, &fl->gemm));
    }
#undef TIMED_GEMM
    kv_pool_stats_get(&pool1);
    local.sync_ns = pool1.wait_ns - pool0.wait_ns;

    local.tokens_fed = n_seg == 1 ? segs[0].n : T;
    local.bytes_read += local.attn_bytes + kv_model_weight_bytes(c);
    if (st != NULL) {
        st->flops.gemm += fl->gemm;
        st->flops.attn += fl->attn;
        st->flops.softmax += fl->softmax;
        st->flops.norm += fl->norm;
        st->flops.other += fl->other;
        st->attn_ns += local.attn_ns;
        st->gemv_ns += local.gemv_ns;
        st->sync_ns += local.sync_ns;
        st->tokens_fed += local.tokens_fed;
        st->bytes_read += local.bytes_read;
        st->attn_bytes += local.attn_bytes;
    }
    return KV_OK;
}

enum kv_status kv_forward(struct kv_runner *r, const struct kv_model *m,
                          struct kv_cache *cache, const int32_t *tokens,
                          int32_t n, int32_t pos0, const int32_t *pad,
                          float *logits, struct kv_step_stats *st)
{
    if (r != NULL && cache != NULL && cache->cfg.batch != r->batch)
        return KV_ERR_INVALID; /* (a segment may be narrower; a whole call not) */
    const struct kv_segment sg = {.cache = cache, .tokens = tokens, .n = n, .pos0 = pos0, .pad = pad};
    return forward(r, m, &sg, 1, logits, st, 0);
}

enum kv_status kv_forward_segments(struct kv_runner *r, const struct kv_model *m,
                                   const struct kv_segment *segs, int32_t n_seg, float *logits,
                                   struct kv_step_stats *st)
{
    return forward(r, m, segs, n_seg, logits, st, 0);
}

enum kv_status kv_forward_all(struct kv_runner *r, const struct kv_model *m,
                              struct kv_cache *cache, const int32_t *tokens, int32_t n,
                              int32_t pos0, float *logits, struct kv_step_stats *st)
{
    if (r != NULL && cache != NULL && cache->cfg.batch != r->batch)
        return KV_ERR_INVALID;
    const struct kv_segment sg = {.cache = cache, .tokens = tokens, .n = n, .pos0 = pos0};
    return forward(r, m, &sg, 1, logits, st, 1);
}

/* ------------------------------------------------------------------------ */
/* A cache for a model, and one decode step whatever the strategy           */

struct kv_cache_config kv_cache_config_for(const struct kv_model_config *c, int32_t batch)
{
    if (c == NULL || kv_model_config_check(c) != KV_OK)
        return (struct kv_cache_config){0};
    return (struct kv_cache_config){.n_layers = c->n_layers,
                                    .batch = batch,
                                    .n_kv_heads = c->n_kv_heads,
                                    .head_dim = c->dim / c->n_heads,
                                    .max_len = c->max_len};
}

struct kv_cache_config kv_cache_config_for_model(const struct kv_model *m, int32_t batch)
{
    return kv_cache_config_for(m != NULL ? &m->cfg : NULL, batch);
}

int32_t kv_decode_max_tokens(const struct kv_cache *cache, int32_t prompt_len,
                             int32_t new_tokens)
{
    if (cache == NULL || prompt_len < 1 || new_tokens < 1 ||
        new_tokens - 1 > INT32_MAX - prompt_len)
        return 0;
    return kv_cache_has(cache, KV_CAP_KEEPS_HISTORY) ? prompt_len : prompt_len + new_tokens - 1;
}

/*
 * The one place the no-history branch lives: a cache with history takes
 * the tokens it has not seen, one without is reset and takes them all.
 * The tokens of the call are gathered into the runner's own buffer, so the
 * caller's rows may be longer than what is fed (no allocation).
 */
enum kv_status kv_decode_step(struct kv_runner *r, const struct kv_model *m,
                              struct kv_cache *cache, const int32_t *seq, int32_t stride,
                              int32_t len, const int32_t *pad, float *logits,
                              struct kv_step_stats *st)
{
    if (r == NULL || m == NULL || cache == NULL || seq == NULL || logits == NULL || len < 1 ||
        stride < len || cache->cfg.batch != r->batch)
        return KV_ERR_INVALID;
    const int keeps = kv_cache_has(cache, KV_CAP_KEEPS_HISTORY);
    const int32_t pos0 = keeps ? kv_cache_seq_len(cache, 0) : 0;
    if (pos0 < 0 || pos0 >= len || len - pos0 > r->max_tokens)
        return KV_ERR_INVALID;
    const int32_t n = len - pos0;
    for (int32_t b = 0; b < r->batch; b++)
        memcpy(r->fed + (size_t)b * n, seq + (size_t)b * stride + pos0,
               (size_t)n * sizeof(int32_t));
    if (!keeps) {
        enum kv_status s = kv_cache_reset(cache);
        if (s != KV_OK)
            return s;
    }
    return kv_forward(r, m, cache, r->fed, n, pos0, pad, logits, st);
}

/* ------------------------------------------------------------------------ */
/* Generation                                                               */

static void pick_tokens(int32_t *next, const float *logits, int32_t batch, int32_t vocab)
{
    for (int32_t b = 0; b < batch; b++)
        next[b] = kv_argmax(logits + (size_t)b * vocab, vocab);
}

enum kv_status kv_prefill_shared(const struct kv_model *m, struct kv_cache *cache,
                                 const int32_t *prompt, int32_t prompt_len, int32_t batch,
                                 int32_t n_threads, float *logits, struct kv_step_stats *st)
{
    if (m == NULL || cache == NULL || prompt == NULL || logits == NULL || prompt_len < 1 ||
        batch < 1)
        return KV_ERR_INVALID;
    if (!kv_cache_has(cache, KV_CAP_KEEPS_HISTORY | KV_CAP_REORDER))
        return KV_ERR_UNSUPPORTED;
    struct kv_runner *r = NULL;
    enum kv_status s = kv_runner_create(&r, m, 1, prompt_len, n_threads);
    if (s != KV_OK)
        return s;
    const int32_t one = 0;
    s = kv_cache_reset(cache);
    if (s == KV_OK)
        s = kv_cache_reorder(cache, &one, 1); /* an empty cache of one sequence */
    if (s == KV_OK)
        s = kv_forward(r, m, cache, prompt, prompt_len, 0, NULL, logits, st);
    kv_runner_destroy(r);
    if (s != KV_OK)
        return s;
    int32_t *zeros = kv_alloc((size_t)batch * sizeof *zeros); /* zeroed */
    if (zeros == NULL)
        return KV_ERR_NOMEM;
    s = kv_cache_reorder(cache, zeros, batch);
    kv_free(zeros);
    if (s != KV_OK)
        return s;
    const size_t V = (size_t)m->cfg.vocab_size;
    for (int32_t b = 1; b < batch; b++)
        memcpy(logits + (size_t)b * V, logits, V * sizeof *logits);
    return KV_OK;
}

/*
 * kv_generate starts from an empty cache (it resets the one it is given).
 * Step 0 is the prefill of the whole prompt at pos0 0 and yields token 0 of
 * each sequence; step s >= 1 feeds token s-1 (position prompt_len + s - 1)
 * and yields token s. With a strategy that keeps no history, step s instead
 * resets the cache and re-runs prompt + tokens 0..s-1 from pos0 0. The
 * last generated token is never fed, so positions up to
 * prompt_len + new_tokens - 2 are used. With shared_prompt the prefill is
 * kv_prefill_shared of row 0 of the prompt: one sequence prefilled, then
 * every sequence of the batch starts from its tokens (the cache's reorder,
 * which a paged cache does by sharing blocks).
 */
enum kv_status kv_generate(const struct kv_model *m, struct kv_cache *cache,
                           const struct kv_gen_params *gp, int32_t *out_tokens,
                           kv_gen_step_fn on_step, void *user)
{
    if (m == NULL || cache == NULL || gp == NULL || out_tokens == NULL ||
        gp->prompt == NULL || gp->batch < 1 || gp->prompt_len < 1 || gp->new_tokens < 1 ||
        gp->batch != cache->cfg.batch || gp->window < 0 ||
        (gp->shared_prompt && (gp->pad != NULL || gp->window > 0)))
        return KV_ERR_INVALID;
    const int32_t B = gp->batch, P = gp->prompt_len, N = gp->new_tokens;
    const int32_t V = m->cfg.vocab_size;
    if (N - 1 > m->cfg.max_len - P)
        return KV_ERR_INVALID; /* positions beyond the model's max_len */
    if (gp->shared_prompt && !kv_cache_has(cache, KV_CAP_KEEPS_HISTORY | KV_CAP_REORDER))
        return KV_ERR_UNSUPPORTED;
    /* a shared prompt is prefilled by a runner of one sequence */
    const int32_t max_tokens = gp->shared_prompt ? 1 : kv_decode_max_tokens(cache, P, N);

    struct kv_runner *r = NULL;
    enum kv_status s = kv_runner_create(&r, m, B, max_tokens, gp->n_threads);
    if (s != KV_OK)
        return s;
    kv_runner_set_mask(r, gp->window, gp->n_sink);
    /* (batch, P + N - 1): each row the prompt, then the tokens generated so
     * far (the last one is never fed) */
    const int32_t S = P + N - 1;
    float *logits = kv_alloc((size_t)B * (size_t)V * sizeof(float));
    int32_t *next = kv_alloc((size_t)B * sizeof(int32_t));
    int32_t *seq = kv_alloc((size_t)B * (size_t)S * sizeof(int32_t));
    if (logits == NULL || next == NULL || seq == NULL) {
        s = KV_ERR_NOMEM;
        goto done;
    }
    for (int32_t b = 0; b < B; b++)
        memcpy(seq + (size_t)b * S, gp->prompt + (size_t)(gp->shared_prompt ? 0 : b) * P,
               (size_t)P * sizeof(int32_t));
    s = kv_cache_reset(cache);
    if (s != KV_OK)
        goto done;

    for (int32_t step = 0; step < N; step++) {
        struct kv_step_stats st = {0};
        int64_t t0 = kv_now_ns();
        if (step == 0 && gp->shared_prompt)
            s = kv_prefill_shared(m, cache, gp->prompt, P, B, gp->n_threads, logits, &st);
        else /* the prompt, then the newest token (all of them again without history) */
            s = kv_decode_step(r, m, cache, seq, S, P + step, gp->pad, logits, &st);
        int64_t step_ns = kv_now_ns() - t0;
        if (s != KV_OK)
            goto done;
        pick_tokens(next, logits, B, V);
        for (int32_t b = 0; b < B; b++) {
            out_tokens[(size_t)b * N + step] = next[b];
            if (P + step < S)
                seq[(size_t)b * S + P + step] = next[b];
        }
        if (on_step != NULL)
            on_step(user, step, logits, next, &st, step_ns);
    }

done:
    kv_free(seq);
    kv_free(next);
    kv_free(logits);
    kv_runner_destroy(r);
    return s;
}
