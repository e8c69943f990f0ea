/*
 * quantized.c - a cache that stores old tokens as int8 or int4 groups and
 * keeps the most recent `residual` tokens in f32 (like the popular Python
 * QuantizedCache, but the kernel reads the codes directly: no step ever
 * dequantizes the whole cache into a buffer).
 *
 * Per layer there are two stores:
 *   quantized: K and V codes (batch, n_kv_heads, qcap, row_bytes) and their
 *              qparams (batch, n_kv_heads, qcap, head_dim/group), one
 *              allocation (K qparams, V qparams, K codes, V codes, so every
 *              qparams block is 8-byte aligned whatever row_bytes is);
 *   residual:  K and V f32 (batch, n_kv_heads, R, head_dim), allocated at init.
 * Positions 0..nq-1 are quantized, nq..nq+nr-1 are in the residual; view
 * returns the quantized span then the residual span, in position order.
 *
 * Design decisions:
 *   - Quantization is per token row (kv_quantize_row), groups of `group`
 *     values along head_dim with their own scale and min, for K and V alike:
 *     a row is final once written, so appending never re-quantizes old data.
 *   - Flushing in halves: when the new tokens do not fit in the residual,
 *     the oldest ceil(R/2) residual tokens (or more, if the update needs
 *     more room) are quantized and the residual shifts down. Flushing half
 *     rather than one token amortises the shift (R/2 row moves per R/2
 *     tokens) while always keeping at least floor(R/2) recent tokens exact.
 *     A prefill longer than R quantizes all but its last R tokens at once.
 *     In general, with nr held and n_new arriving (total = nr + n_new > R),
 *     nqz = max(total - R, min(ceil(R/2), nr)) oldest tokens are quantized.
 *   - The quantized store grows like `dynamic`: capacity
 *     next_pow2(max(16, needed)), old codes and qparams copied; the growth
 *     happens before anything is written, so KV_ERR_NOMEM leaves the cache
 *     unchanged. No other allocation happens in update.
 *   - Copied bytes count every byte written into cache storage: new tokens
 *     stored in the residual (f32), residual rows shifted (f32), rows
 *     quantized (codes + qparams) and store growth copies (codes + qparams).
 *   - Resident bytes: qcap * (row_bytes + (head_dim/group) * 8) + R * head_dim
 *     * 4, times 2 (K, V) * n_kv_heads * batch, summed over layers.
 *   - reset frees the quantized store (it is grown, not preallocated) and
 *     keeps the residual.
 */
#include "kv_store.h"

#include "../kernels/kv_quant.h"

/* ------------------------------------------------------------------------ */
/* State                                                                    */

struct quant_layer {
    void *store;                    /* the one allocation below, or NULL */
    struct kv_qparams *k_qp, *v_qp; /* (batch, n_kv_heads, qcap, n_groups) */
    uint8_t *k_codes, *v_codes;     /* (batch, n_kv_heads, qcap, code_row) */
    int32_t nq;                     /* quantized tokens (positions 0..nq-1) */
    int32_t qcap;                   /* quantized tokens allocated */
    float *res;                     /* K (batch, n_kv_heads, R, head_dim) then V */
    int32_t nr;                     /* residual tokens (positions nq..nq+nr-1) */
};

struct quant_state {
    struct kv_cache_config cfg;
    enum kv_dtype dtype;         /* KV_DTYPE_Q8 or KV_DTYPE_Q4 */
    size_t code_row;             /* bytes of codes of one head row */
    size_t qp_row;               /* bytes of qparams of one head row */
    size_t res_half;             /* bytes of one K (or V) residual */
    struct quant_layer *layers;  /* (n_layers) */
    size_t copied;
};

static enum kv_status quant_init(void *state, const struct kv_cache_config *cfg)
{
    struct quant_state *s = state;
    s->cfg = *cfg;
    if (cfg->bits == 8)
        s->dtype = KV_DTYPE_Q8;
    else if (cfg->bits == 4)
        s->dtype = KV_DTYPE_Q4;
    else
        return KV_ERR_INVALID;
    if (cfg->group < 1 || cfg->head_dim % cfg->group != 0 || cfg->residual < 1 ||
        kv_quant_check(s->dtype, cfg->head_dim, cfg->group) != KV_OK)
        return KV_ERR_INVALID;
    s->code_row = kv_dtype_row_bytes(s->dtype, cfg->head_dim);
    s->qp_row = (size_t)(cfg->head_dim / cfg->group) * sizeof(struct kv_qparams);

    size_t half, total, meta;
    enum kv_status st = kv_store_bytes(&half, cfg, (size_t)cfg->residual, kv_store_row_bytes(cfg));
    if (st != KV_OK)
        return st;
    if (kv_mul_size(&total, 2 * half, (size_t)cfg->n_layers) != KV_OK ||
        total > (size_t)PTRDIFF_MAX ||
        kv_mul_size(&meta, (size_t)cfg->n_layers, sizeof *s->layers) != KV_OK)
        return KV_ERR_OVERFLOW;
    s->res_half = half;
    s->layers = kv_alloc(meta);
    if (s->layers == NULL)
        return KV_ERR_NOMEM;
    for (int32_t l = 0; l < cfg->n_layers; l++) {
        s->layers[l].res = kv_alloc(2 * half);
        if (s->layers[l].res == NULL) {
            while (l-- > 0)
                kv_free(s->layers[l].res);
            kv_free(s->layers);
            s->layers = NULL;
            return KV_ERR_NOMEM;
        }
    }
    return KV_OK;
}

static void quant_release_stores(struct quant_state *s)
{
    for (int32_t l = 0; l < s->cfg.n_layers; l++) {
        struct quant_layer *q = &s->layers[l];
        kv_free(q->store);
        q->store = NULL;
        q->k_qp = q->v_qp = NULL;
        q->k_codes = q->v_codes = NULL;
        q->nq = q->qcap = q->nr = 0;
    }
    s->copied = 0;
}

static void quant_free(void *state)
{
    struct quant_state *s = state;
    if (s->layers == NULL)
        return;
    quant_release_stores(s);
    for (int32_t l = 0; l < s->cfg.n_layers; l++)
        kv_free(s->layers[l].res);
    kv_free(s->layers);
    s->layers = NULL;
}

static void quant_reset(void *state) { quant_release_stores(state); }

/* Residual K and V of a layer. */
static float *quant_res_k(const struct quant_state *s, const struct quant_layer *q)
{
    (void)s;
    return q->res;
}

static float *quant_res_v(const struct quant_state *s, const struct quant_layer *q)
{
    return (float *)((char *)q->res + s->res_half);
}

/* Bytes of one token's quantized rows, K and V, whole batch. */
static size_t quant_token_qbytes(const struct quant_state *s)
{
    return 2 * (size_t)s->cfg.batch * (size_t)s->cfg.n_kv_heads * (s->code_row + s->qp_row);
}

/* ------------------------------------------------------------------------ */
/* Quantized store growth                                                   */

/* Moves layer q's quantized store to capacity `cap` (> nq), copying. */
static enum kv_status quant_grow(struct quant_state *s, struct quant_layer *q, int32_t cap)
{
    size_t qp_half, code_half, total;
    enum kv_status st = kv_store_bytes(&qp_half, &s->cfg, (size_t)cap, s->qp_row);
    if (st == KV_OK)
        st = kv_store_bytes(&code_half, &s->cfg, (size_t)cap, s->code_row);
    if (st != KV_OK)
        return st;
    if (qp_half > (size_t)PTRDIFF_MAX / 4 || code_half > (size_t)PTRDIFF_MAX / 4)
        return KV_ERR_OVERFLOW;
    total = 2 * qp_half + 2 * code_half;
    char *store = kv_alloc_uninit(total); /* rows are copied or quantized before use */
    if (store == NULL)
        return KV_ERR_NOMEM;
    struct kv_qparams *k_qp = (struct kv_qparams *)store;
    struct kv_qparams *v_qp = (struct kv_qparams *)(store + qp_half);
    uint8_t *k_codes = (uint8_t *)(store + 2 * qp_half);
    uint8_t *v_codes = (uint8_t *)(store + 2 * qp_half + code_half);
    if (q->nq > 0) {
        kv_store_move(k_qp, cap, 0, q->k_qp, q->qcap, 0, q->nq, s->qp_row, &s->cfg);
        kv_store_move(v_qp, cap, 0, q->v_qp, q->qcap, 0, q->nq, s->qp_row, &s->cfg);
        kv_store_move(k_codes, cap, 0, q->k_codes, q->qcap, 0, q->nq, s->code_row, &s->cfg);
        kv_store_move(v_codes, cap, 0, q->v_codes, q->qcap, 0, q->nq, s->code_row, &s->cfg);
        s->copied += (size_t)q->nq * quant_token_qbytes(s);
    }
    kv_free(q->store);
    q->store = store;
    q->k_qp = k_qp;
    q->v_qp = v_qp;
    q->k_codes = k_codes;
    q->v_codes = v_codes;
    q->qcap = cap;
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* Update                                                                   */

/*
 * Quantizes token i of the sequence (residual ++ new tokens) into store row
 * `dst` of every (sequence, kv head): i < nr reads residual row i, otherwise
 * token i - nr of k_new/v_new (batch, n_new, n_kv_heads, head_dim).
 */
static void quant_put_row(struct quant_state *s, struct quant_layer *q, int32_t dst, int32_t i,
                          const float *k_new, const float *v_new, int32_t n_new)
{
    const size_t hd = (size_t)s->cfg.head_dim, nh = (size_t)s->cfg.n_kv_heads;
    const size_t ng = s->qp_row / sizeof(struct kv_qparams);
    const float *rk = quant_res_k(s, q), *rv = quant_res_v(s, q);
    for (size_t b = 0; b < (size_t)s->cfg.batch; b++)
        for (size_t h = 0; h < nh; h++) {
            const size_t bh = b * nh + h;
            const size_t row = bh * (size_t)q->qcap + (size_t)dst;
            const float *xk, *xv;
            if (i < q->nr) {
                xk = rk + (bh * (size_t)s->cfg.residual + (size_t)i) * hd;
                xv = rv + (bh * (size_t)s->cfg.residual + (size_t)i) * hd;
            } else {
                const size_t t = (size_t)(i - q->nr);
                xk = k_new + ((b * (size_t)n_new + t) * nh + h) * hd;
                xv = v_new + ((b * (size_t)n_new + t) * nh + h) * hd;
            }
            kv_quantize_row(q->k_codes + row * s->code_row, q->k_qp + row * ng, xk, s->dtype,
                            s->cfg.head_dim, s->cfg.group);
            kv_quantize_row(q->v_codes + row * s->code_row, q->v_qp + row * ng, xv, s->dtype,
                            s->cfg.head_dim, s->cfg.group);
        }
}

/* Positions past cfg.max_len (when it is > 0) are refused with KV_ERR_FULL. */
static enum kv_status quant_update(void *state, int32_t layer, const float *k_new,
                                   const float *v_new, int32_t n_new, int32_t pos0)
{
    struct quant_state *s = state;
    struct quant_layer *q = &s->layers[layer];
    const int32_t r = s->cfg.residual;
    if (pos0 != q->nq + q->nr)
        return KV_ERR_INVALID;
    if (s->cfg.max_len > 0 && pos0 + n_new > s->cfg.max_len)
        return KV_ERR_FULL;

    /* How many of the oldest tokens of (residual ++ new) leave for the store. */
    const int64_t total = (int64_t)q->nr + n_new;
    int32_t nqz = 0;
    if (total > r) {
        const int32_t half = r - r / 2; /* ceil(R/2) */
        const int32_t at_least = (int32_t)(total - r);
        const int32_t flush = half < q->nr ? half : q->nr;
        nqz = at_least > flush ? at_least : flush;
    }
    if (nqz > 0 && q->nq + nqz > q->qcap) {
        enum kv_status st = quant_grow(s, q, kv_store_grow_cap(q->nq + nqz));
        if (st != KV_OK)
            return st;
    }

    /* 1. quantize tokens [0, nqz) of (residual ++ new) into rows nq.. */
    for (int32_t i = 0; i < nqz; i++)
        quant_put_row(s, q, q->nq + i, i, k_new, v_new, n_new);
    s->copied += (size_t)nqz * quant_token_qbytes(s);

    /* 2. the residual keeps tokens [nqz, total): shift the old ones down */
    const size_t row = kv_store_row_bytes(&s->cfg);
    const int32_t kept_old = q->nr > nqz ? q->nr - nqz : 0;
    if (kept_old > 0 && nqz > 0) {
        kv_store_move(quant_res_k(s, q), r, 0, quant_res_k(s, q), r, nqz, kept_old, row, &s->cfg);
        kv_store_move(quant_res_v(s, q), r, 0, quant_res_v(s, q), r, nqz, kept_old, row, &s->cfg);
        s->copied += (size_t)kept_old * kv_store_token_bytes(&s->cfg);
    }
    /* 3. ... then append the new ones that are not quantized */
    const int32_t first_new = nqz > q->nr ? nqz - q->nr : 0; /* index into k_new */
    const int32_t n_put = n_new - first_new;
    if (n_put > 0) {
        kv_store_put(quant_res_k(s, q), r, kept_old, k_new, n_new, first_new, n_put, &s->cfg);
        kv_store_put(quant_res_v(s, q), r, kept_old, v_new, n_new, first_new, n_put, &s->cfg);
        s->copied += (size_t)n_put * kv_store_token_bytes(&s->cfg);
    }
    q->nq += nqz;
    q->nr = (int32_t)(total - nqz);
    KV_ASSERT(q->nr == kept_old + n_put && q->nr <= r);
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* View and accounting                                                      */

static int32_t quant_view(const void *state, int32_t layer, struct kv_span *spans)
{
    const struct quant_state *s = state;
    const struct quant_layer *q = &s->layers[layer];
    const size_t nh = (size_t)s->cfg.n_kv_heads;
    int32_t n = 0;
    if (q->nq > 0) {
        const size_t qcap = (size_t)q->qcap;
        spans[n++] = (struct kv_span){
            .dtype = s->dtype,
            .k = q->k_codes,
            .v = q->v_codes,
            .k_qp = q->k_qp,
            .v_qp = q->v_qp,
            .n_tokens = q->nq,
            .pos0 = 0,
            .row_stride = s->code_row,
            .head_stride = qcap * s->code_row,
            .seq_stride = nh * qcap * s->code_row,
            .qp_row_stride = s->qp_row,
            .qp_head_stride = qcap * s->qp_row,
            .qp_seq_stride = nh * qcap * s->qp_row,
        };
    }
    if (q->nr > 0)
        spans[n++] = kv_store_span(quant_res_k(s, q), quant_res_v(s, q), s->cfg.residual, 0,
                                   q->nr, q->nq, &s->cfg);
    return n;
}

static int32_t quant_seq_len(const void *state, int32_t layer)
{
    const struct quant_state *s = state;
    return s->layers[layer].nq + s->layers[layer].nr;
}

static size_t quant_resident_bytes(const void *state)
{
    const struct quant_state *s = state;
    size_t total = 0;
    for (int32_t l = 0; l < s->cfg.n_layers; l++)
        total += (size_t)s->layers[l].qcap * quant_token_qbytes(s) + 2 * s->res_half;
    return total;
}

static size_t quant_copied_bytes(const void *state)
{
    const struct quant_state *s = state;
    return s->copied;
}

const struct kv_strategy_ops kv_strategy_quantized = {
    .name = "quantized",
    .description = "int8/int4 groups with scale and min, recent tokens kept in f32",
    .keeps_history = 1,
    .mask_window = NULL,
    .state_size = sizeof(struct quant_state),
    .init = quant_init,
    .free = quant_free,
    .update = quant_update,
    .view = quant_view,
    .seq_len = quant_seq_len,
    .resident_bytes = quant_resident_bytes,
    .copied_bytes = quant_copied_bytes,
    .reset = quant_reset,
};
