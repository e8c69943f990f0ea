/*
 * quantized.c - a cache that stores old tokens as int8, int4 or int2 codes
 * and keeps the most recent `residual` tokens in f32 (like the popular
 * Python QuantizedCache, but the kernel reads the codes directly: no step
 * ever dequantizes the whole cache into a buffer). Two layouts:
 *   token (the default): every row of K and V quantized on its own, groups
 *          of `group` values along head_dim with their own scale and min;
 *   kivi:  (KIVI, Liu et al. 2024) keys per CHANNEL: each element of the
 *          head dimension gets its own scale and min over a block of
 *          `group` consecutive tokens (outlier channels then cost their own
 *          range, not every row's), values per token as above.
 *
 * Per layer there are two stores:
 *   quantized: K and V codes (batch, n_kv_heads, qcap, code_row) and their
 *              qparams, one allocation (K qparams, V qparams, K codes, V
 *              codes, so every qparams block is 8-byte aligned whatever
 *              code_row is). V qparams (batch, n_kv_heads, qcap, d/group);
 *              K qparams the same in the token layout, and in kivi
 *              (batch, n_kv_heads, ceil(qcap/group), d): one row of head_dim
 *              pairs per block of `group` tokens;
 *   residual:  K and V f32 (batch, n_kv_heads, R, head_dim), allocated at init.
 * Positions 0..nq-1 are quantized, nq..nq+nr-1 are in the residual; view
 * returns the quantized span then the residual span, in position order.
 *
 * Design decisions:
 *   - A row (token layout) or a block of `group` tokens (kivi keys) is final
 *     once written: appending never re-quantizes old data. So kivi quantizes
 *     whole blocks only, as the residual fills: nq is a multiple of `group`,
 *     and the residual keeps the tokens of the block that is not complete
 *     yet (so in kivi it holds R = max(--residual, --group) tokens).
 *   - Flushing in halves: when the new tokens do not fit in the residual,
 *     the oldest ceil(R/2) residual tokens (or more, if the update needs
 *     more room) are quantized and the residual shifts down. Flushing half
 *     rather than one token amortises the shift (R/2 row moves per R/2
 *     tokens) while always keeping at least floor(R/2) recent tokens exact.
 *     A prefill longer than R quantizes all but its last R tokens at once.
 *     In general, with nr held and n_new arriving (total = nr + n_new > R),
 *       token: nqz = max(total - R, min(ceil(R/2), nr))
 *       kivi:  nqz = max(G * ceil((total - R) / G), G * floor(min(ceil(R/2), nr) / G))
 *     oldest tokens are quantized (G = group).
 *   - The quantized store grows like `dynamic`: capacity
 *     next_pow2(max(16, needed)), old codes and qparams copied; the growth
 *     happens before anything is written, so KV_ERR_NOMEM leaves the cache
 *     unchanged. No other allocation happens in update (kivi's block of
 *     keys is gathered in a buffer allocated at init).
 *   - Copied bytes count every byte written into cache storage: new tokens
 *     stored in the residual (f32), residual rows shifted (f32), rows
 *     quantized (codes + qparams, kivi: + one K qparams row per block) and
 *     store growth copies (codes + qparams).
 *   - Resident bytes: per (sequence, kv head) and K/V, the codes and
 *     qparams of qcap tokens (kivi keys: ceil(qcap/group) rows of head_dim
 *     pairs) plus R * head_dim * 4 of residual, summed over layers.
 *   - reset frees the quantized store (it is grown, not preallocated) and
 *     keeps the residual.
 *   - Operations: crop within the residual (back to no earlier than the
 *     end of the last update that quantized tokens, else
 *     KV_ERR_UNSUPPORTED: see quant_crop; in kivi that end is never before
 *     the last whole block of keys, so a crop never splits a quantized
 *     block), fork and reorder copy codes, qparams (kivi: the keys' per-
 *     channel rows, one per block) and residual rows as they are (never
 *     re-quantized), for every --bits and both layouts.
 * Parameters: --bits (8, 4, 2), --group, --residual, --layout token|kivi;
 * the presets quantized-int8/-int4/-int2 and kivi-2/-4/-8 pick them, and
 * results are filed under those names.
 */
#include <stdio.h>

#include "kv_store.h"

#include "../kernels/kv_quant.h"

/* ------------------------------------------------------------------------ */
/* Parameters                                                               */

enum quant_layout { QUANT_LAYOUT_TOKEN = 0, QUANT_LAYOUT_KIVI, QUANT_LAYOUT_COUNT };

struct quant_params {
    int32_t bits;     /* 8, 4 or 2 */
    int32_t group;    /* values per {scale, min} along head_dim (kivi keys: tokens per
                         block); divides head_dim */
    int32_t residual; /* recent tokens kept in f32 (>= 1; kivi: at least group) */
    int32_t layout;   /* enum quant_layout */
};

static const int32_t quant_bits_choices[] = {8, 4, 2};
static const int32_t quant_layout_choices[] = {QUANT_LAYOUT_TOKEN, QUANT_LAYOUT_KIVI};
static const char *const quant_layout_names[] = {"token", "kivi"};

static const struct kv_param quant_param_table[] = {
    {.name = "bits", .flag = "--bits", .type = KV_PARAM_CHOICE, .choices = quant_bits_choices,
     .n_choices = 3, .def = 8, .help = "bits per cached value: 8 (int8), 4 (int4) or 2 (int2)",
     .scales_memory = 1, .offset = offsetof(struct quant_params, bits)},
    {.name = "group", .flag = "--group", .type = KV_PARAM_INT, .lo = 1, .hi = 1 << 16, .def = 32,
     .help = "values per scale and minimum along head_dim (divides head_dim); with --layout "
             "kivi also the keys' block of tokens",
     .scales_memory = 1, .offset = offsetof(struct quant_params, group)},
    {.name = "residual", .flag = "--residual", .type = KV_PARAM_INT, .lo = 1, .hi = INT32_MAX,
     .def = 32, .help = "newest tokens kept in f32 before they are quantized (kivi: at least "
                        "--group)",
     .scales_memory = 1, .offset = offsetof(struct quant_params, residual)},
    {.name = "layout", .flag = "--layout", .type = KV_PARAM_CHOICE,
     .choices = quant_layout_choices, .names = quant_layout_names, .n_choices = 2,
     .def = QUANT_LAYOUT_TOKEN,
     .help = "token: K and V per token; kivi: keys per channel over --group tokens, values "
             "per token",
     .scales_memory = 1, .offset = offsetof(struct quant_params, layout)},
};

static const struct kv_preset quant_presets[] = {
    {.name = "quantized-int8", .params = "bits=8", .sweep = 1},
    {.name = "quantized-int4", .params = "bits=4", .sweep = 1},
    {.name = "quantized-int2", .params = "bits=2", .sweep = 1},
    {.name = "quantized:8", .params = "bits=8"},
    {.name = "quantized:4", .params = "bits=4"},
    {.name = "quantized:2", .params = "bits=2"},
    {.name = "kivi-2", .params = "layout=kivi;bits=2", .sweep = 1},
    {.name = "kivi-4", .params = "layout=kivi;bits=4"},
    {.name = "kivi-8", .params = "layout=kivi;bits=8"},
};

/* Tokens the f32 residual holds: --residual, and in the kivi layout at
 * least one block of keys (--group), since keys leave it a block at a time. */
static int32_t quant_residual_of(const struct quant_params *p)
{
    return p->layout == QUANT_LAYOUT_KIVI && p->group > p->residual ? p->group : p->residual;
}

/* The integer dtype whose traits have p->bits (int8 for none: the choice
 * list admits only bits some dtype has), so a new one needs no case here. */
static enum kv_dtype quant_dtype_of(const void *params)
{
    const struct quant_params *p = params;
    for (int t = 0; t < KV_DTYPE_COUNT; t++)
        if (kv_type_traits[t].has_qparams && kv_type_traits[t].bits == p->bits)
            return (enum kv_dtype)t;
    return KV_DTYPE_Q8;
}

/* The group must divide head_dim in a way the dtype's layout allows (kivi:
 * the per-channel rows too). */
static enum kv_status quant_check(const struct kv_cache_config *cfg, const void *params,
                                  char *why, size_t why_len)
{
    const struct quant_params *p = params;
    if (cfg->head_dim % p->group != 0) {
        if (why != NULL && why_len > 0)
            snprintf(why, why_len, "--group (%d) must divide head_dim (%d)", p->group,
                     cfg->head_dim);
        return KV_ERR_INVALID;
    }
    if (kv_quant_check(quant_dtype_of(params), cfg->head_dim, p->group) != KV_OK ||
        (p->layout == QUANT_LAYOUT_KIVI &&
         kv_quant_check(quant_dtype_of(params), cfg->head_dim, cfg->head_dim) != KV_OK)) {
        if (why != NULL && why_len > 0)
            snprintf(why, why_len, "--bits %d with --group %d is not supported for head_dim %d",
                     p->bits, p->group, cfg->head_dim);
        return KV_ERR_INVALID;
    }
    return KV_OK;
}

static int quant_label(const void *params, char *buf, size_t n)
{
    const struct quant_params *p = params;
    if (p->layout == QUANT_LAYOUT_KIVI)
        return snprintf(buf, n, "kivi-%d", p->bits);
    return snprintf(buf, n, "quantized-int%d", p->bits);
}

static int quant_describe(const struct kv_cache_config *cfg, const void *params, char *buf,
                          size_t n)
{
    const struct quant_params *p = params;
    (void)cfg;
    if (p->layout == QUANT_LAYOUT_KIVI)
        return snprintf(buf, n, "%s (int%d, KIVI: keys per channel over %d tokens, values "
                                "per token in groups of %d, f32 residual %d)",
                        kv_strategy_quantized.description, p->bits, p->group, p->group,
                        quant_residual_of(p));
    return snprintf(buf, n, "%s (int%d, group %d, f32 residual %d)",
                    kv_strategy_quantized.description, p->bits, p->group, p->residual);
}

/* ------------------------------------------------------------------------ */
/* State                                                                    */

struct quant_layer {
    void *store;                    /* the one allocation below, or NULL */
    struct kv_qparams *k_qp, *v_qp; /* (batch, n_kv_heads, k/v qparams rows, pairs) */
    uint8_t *k_codes, *v_codes;     /* (batch, n_kv_heads, qcap, code_row) */
    int32_t nq;                     /* quantized tokens (positions 0..nq-1) */
    int32_t qcap;                   /* quantized tokens allocated */
    float *res;                     /* K (batch, n_kv_heads, R, head_dim) then V */
    int32_t nr;                     /* residual tokens (positions nq..nq+nr-1) */
    int32_t flush_end;              /* length after the last update that quantized
                                       residual tokens (crop: see below) */
};

struct quant_state {
    struct kv_cache_config cfg;
    struct quant_params p;
    enum kv_dtype dtype;         /* KV_DTYPE_Q8, Q4 or Q2 */
    int kivi;                    /* keys per channel */
    size_t code_row;             /* bytes of codes of one head row */
    size_t qp_row;               /* bytes of qparams of one head row (per token) */
    size_t kqp_row;              /* bytes of one K qparams row: qp_row, kivi d pairs */
    size_t res_half;             /* bytes of one K (or V) residual */
    float *block;                /* kivi: (group, head_dim) keys being quantized */
    struct quant_layer *layers;  /* (n_layers) */
    size_t copied;
};

/* K qparams rows that `tokens` quantized tokens need (kivi: one per block). */
static int32_t quant_kqp_rows(const struct quant_state *s, int32_t tokens)
{
    return s->kivi ? (tokens + s->p.group - 1) / s->p.group : tokens;
}

static enum kv_status quant_init(void *state, const struct kv_cache_config *cfg,
                                 const void *params)
{
    struct quant_state *s = state;
    s->cfg = *cfg;
    s->p = *(const struct quant_params *)params;
    if (s->p.bits != 8 && s->p.bits != 4 && s->p.bits != 2)
        return KV_ERR_INVALID;
    s->p.residual = quant_residual_of(&s->p); /* from here on, the tokens it holds */
    s->dtype = quant_dtype_of(&s->p);
    s->kivi = s->p.layout == QUANT_LAYOUT_KIVI;
    if (s->p.group < 1 || cfg->head_dim % s->p.group != 0 || s->p.residual < 1 ||
        kv_quant_check(s->dtype, cfg->head_dim, s->p.group) != KV_OK ||
        (s->p.layout != QUANT_LAYOUT_TOKEN && !s->kivi))
        return KV_ERR_INVALID;
    s->code_row = kv_dtype_row_bytes(s->dtype, cfg->head_dim);
    s->qp_row = (size_t)(cfg->head_dim / s->p.group) * sizeof(struct kv_qparams);
    s->kqp_row = s->kivi ? (size_t)cfg->head_dim * sizeof(struct kv_qparams) : s->qp_row;

    size_t half, total, meta;
    enum kv_status st = kv_store_bytes(&half, cfg, (size_t)s->p.residual, kv_store_row_bytes(cfg));
    if (st != KV_OK)
        return st;
    if (kv_mul_size(&total, 2 * half, (size_t)cfg->n_layers) != KV_OK ||
        total > (size_t)PTRDIFF_MAX ||
        kv_mul_size(&meta, (size_t)cfg->n_layers, sizeof *s->layers) != KV_OK)
        return KV_ERR_OVERFLOW;
    s->res_half = half;
    if (s->kivi) { /* group <= head_dim: the block fits whenever a row does */
        s->block = kv_alloc((size_t)s->p.group * (size_t)cfg->head_dim * sizeof(float));
        if (s->block == NULL)
            return KV_ERR_NOMEM;
    }
    s->layers = kv_alloc(meta);
    if (s->layers == NULL) {
        kv_free(s->block);
        s->block = NULL;
        return KV_ERR_NOMEM;
    }
    for (int32_t l = 0; l < cfg->n_layers; l++) {
        s->layers[l].res = kv_alloc(2 * half);
        if (s->layers[l].res == NULL) {
            while (l-- > 0)
                kv_free(s->layers[l].res);
            kv_free(s->layers);
            kv_free(s->block);
            s->layers = NULL;
            s->block = NULL;
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
        q->nq = q->qcap = q->nr = q->flush_end = 0;
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
    kv_free(s->block);
    s->layers = NULL;
    s->block = NULL;
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

/* Bytes of one token's quantized rows, K and V codes and the per-token
 * qparams (K's too in the token layout), whole batch. */
static size_t quant_token_qbytes(const struct quant_state *s)
{
    const size_t per_tok = 2 * s->code_row + s->qp_row + (s->kivi ? 0 : s->qp_row);
    return (size_t)s->cfg.batch * (size_t)s->cfg.n_kv_heads * per_tok;
}

/* Bytes of one kivi block's K qparams row, whole batch (0: token layout). */
static size_t quant_block_bytes(const struct quant_state *s)
{
    return s->kivi ? (size_t)s->cfg.batch * (size_t)s->cfg.n_kv_heads * s->kqp_row : 0;
}

/* ------------------------------------------------------------------------ */
/* Quantized store growth                                                   */

/* Carves a store of capacity cap for `batch` sequences into q (K qparams,
 * V qparams, K codes, V codes); returns KV_ERR_NOMEM/OVERFLOW with q
 * unchanged. The rows are left unwritten: they are copied or quantized
 * before anything reads them. */
static enum kv_status quant_store_alloc(const struct quant_state *s, int32_t batch, int32_t cap,
                                        struct quant_layer *q)
{
    struct kv_cache_config c = s->cfg;
    c.batch = batch;
    size_t kqp_half, vqp_half, code_half;
    if (kv_store_bytes(&kqp_half, &c, (size_t)quant_kqp_rows(s, cap), s->kqp_row) != KV_OK ||
        kv_store_bytes(&vqp_half, &c, (size_t)cap, s->qp_row) != KV_OK ||
        kv_store_bytes(&code_half, &c, (size_t)cap, s->code_row) != KV_OK ||
        kqp_half > (size_t)PTRDIFF_MAX / 4 || vqp_half > (size_t)PTRDIFF_MAX / 4 ||
        code_half > (size_t)PTRDIFF_MAX / 4)
        return KV_ERR_OVERFLOW;
    char *store = kv_alloc_uninit(kqp_half + vqp_half + 2 * code_half);
    if (store == NULL)
        return KV_ERR_NOMEM;
    q->store = store;
    q->k_qp = (struct kv_qparams *)store;
    q->v_qp = (struct kv_qparams *)(store + kqp_half);
    q->k_codes = (uint8_t *)(store + kqp_half + vqp_half);
    q->v_codes = (uint8_t *)(store + kqp_half + vqp_half + code_half);
    q->qcap = cap;
    return KV_OK;
}

/* Bytes of layer q's quantized rows (codes, qparams, kivi: the keys' block
 * rows) and residual rows, whole batch: what a copy of the layer writes. */
static size_t quant_held_bytes(const struct quant_state *s, const struct quant_layer *q)
{
    return (size_t)q->nq * quant_token_qbytes(s) +
           (size_t)(s->kivi ? quant_kqp_rows(s, q->nq) : 0) * quant_block_bytes(s) +
           (size_t)q->nr * kv_store_token_bytes(&s->cfg);
}

/* Moves layer q's quantized store to capacity `cap` (> nq), copying. */
static enum kv_status quant_grow(struct quant_state *s, struct quant_layer *q, int32_t cap)
{
    struct quant_layer g = *q;
    enum kv_status st = quant_store_alloc(s, s->cfg.batch, cap, &g);
    if (st != KV_OK)
        return st;
    if (q->nq > 0) {
        const int32_t kq = quant_kqp_rows(s, q->nq);
        kv_store_move(g.k_qp, quant_kqp_rows(s, cap), 0, q->k_qp, quant_kqp_rows(s, q->qcap), 0,
                      kq, s->kqp_row, &s->cfg);
        kv_store_move(g.v_qp, cap, 0, q->v_qp, q->qcap, 0, q->nq, s->qp_row, &s->cfg);
        kv_store_move(g.k_codes, cap, 0, q->k_codes, q->qcap, 0, q->nq, s->code_row, &s->cfg);
        kv_store_move(g.v_codes, cap, 0, q->v_codes, q->qcap, 0, q->nq, s->code_row, &s->cfg);
        s->copied += (size_t)q->nq * quant_token_qbytes(s) + (size_t)kq * quant_block_bytes(s);
    }
    kv_free(q->store);
    *q = g;
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* Update                                                                   */

/* Token i of the sequence (residual ++ new tokens) of (b, h): i < nr reads
 * residual row i, otherwise token i - nr of k_new / v_new (batch, n_new,
 * n_kv_heads, head_dim). */
static const float *quant_src_row(const struct quant_state *s, const struct quant_layer *q,
                                  const float *res, const float *x_new, int32_t n_new, size_t b,
                                  size_t h, int32_t i)
{
    const size_t hd = (size_t)s->cfg.head_dim, nh = (size_t)s->cfg.n_kv_heads;
    if (i < q->nr)
        return res + ((b * nh + h) * (size_t)s->p.residual + (size_t)i) * hd;
    return x_new + ((b * (size_t)n_new + (size_t)(i - q->nr)) * nh + h) * hd;
}

/* Quantizes token i of (residual ++ new tokens) into store row `dst` of
 * every (sequence, kv head): V per token, and K per token in the token
 * layout (kivi keys go by blocks, quant_put_key_block). */
static void quant_put_row(struct quant_state *s, struct quant_layer *q, int32_t dst, int32_t i,
                          const float *k_new, const float *v_new, int32_t n_new)
{
    const size_t nh = (size_t)s->cfg.n_kv_heads;
    const size_t ng = s->qp_row / sizeof(struct kv_qparams);
    for (size_t b = 0; b < (size_t)s->cfg.batch; b++)
        for (size_t h = 0; h < nh; h++) {
            const size_t row = (b * nh + h) * (size_t)q->qcap + (size_t)dst;
            if (!s->kivi)
                kv_quantize_row(q->k_codes + row * s->code_row, q->k_qp + row * ng,
                                quant_src_row(s, q, quant_res_k(s, q), k_new, n_new, b, h, i),
                                s->dtype, s->cfg.head_dim, s->p.group);
            kv_quantize_row(q->v_codes + row * s->code_row, q->v_qp + row * ng,
                            quant_src_row(s, q, quant_res_v(s, q), v_new, n_new, b, h, i),
                            s->dtype, s->cfg.head_dim, s->p.group);
        }
}

/* kivi: the keys of tokens i .. i+G-1 of (residual ++ new) into store rows
 * dst .. dst+G-1 (dst a multiple of G) of every (sequence, kv head), one
 * qparams pair per channel over the block. */
static void quant_put_key_block(struct quant_state *s, struct quant_layer *q, int32_t dst,
                                int32_t i, const float *k_new, int32_t n_new)
{
    const size_t hd = (size_t)s->cfg.head_dim, nh = (size_t)s->cfg.n_kv_heads;
    const int32_t G = s->p.group, krows = quant_kqp_rows(s, q->qcap);
    for (size_t b = 0; b < (size_t)s->cfg.batch; b++)
        for (size_t h = 0; h < nh; h++) {
            for (int32_t u = 0; u < G; u++)
                memcpy(s->block + (size_t)u * hd,
                       quant_src_row(s, q, quant_res_k(s, q), k_new, n_new, b, h, i + u),
                       hd * sizeof(float));
            const size_t row = (b * nh + h) * (size_t)q->qcap + (size_t)dst;
            const size_t qrow = (b * nh + h) * (size_t)krows + (size_t)(dst / G);
            kv_quantize_rows_channel(q->k_codes + row * s->code_row, s->code_row,
                                     (struct kv_qparams *)((char *)q->k_qp + qrow * s->kqp_row),
                                     s->block, hd, G, s->dtype, s->cfg.head_dim);
        }
}

/* How many of the oldest of `total` = nr + n_new tokens leave for the
 * store (the rule in the opening comment). */
static int32_t quant_n_flush(const struct quant_state *s, int32_t nr, int64_t total)
{
    const int32_t r = s->p.residual;
    if (total <= r)
        return 0;
    const int32_t half = r - r / 2; /* ceil(R/2) */
    const int32_t flush = half < nr ? half : nr;
    const int32_t at_least = (int32_t)(total - r);
    if (!s->kivi)
        return at_least > flush ? at_least : flush;
    const int32_t G = s->p.group; /* whole blocks: at_least rounded up, flush down */
    const int32_t a = (at_least + G - 1) / G * G, f = flush / G * G;
    return a > f ? a : f;
}

/* Positions past cfg.max_len (when it is > 0) are refused with KV_ERR_FULL. */
static enum kv_status quant_update(void *state, int32_t layer, const float *k_new,
                                   const float *v_new, int32_t n_new, int32_t pos0)
{
    struct quant_state *s = state;
    struct quant_layer *q = &s->layers[layer];
    const int32_t r = s->p.residual;
    if (pos0 != q->nq + q->nr)
        return KV_ERR_INVALID;
    if (s->cfg.max_len > 0 && pos0 + n_new > s->cfg.max_len)
        return KV_ERR_FULL;

    /* How many of the oldest tokens of (residual ++ new) leave for the store. */
    const int64_t total = (int64_t)q->nr + n_new;
    const int32_t nqz = quant_n_flush(s, q->nr, total);
    if (nqz > 0 && q->nq + nqz > q->qcap) {
        enum kv_status st = quant_grow(s, q, kv_store_grow_cap(q->nq + nqz));
        if (st != KV_OK)
            return st;
    }

    /* 1. quantize tokens [0, nqz) of (residual ++ new) into rows nq.. */
    for (int32_t i = 0; i < nqz; i++)
        quant_put_row(s, q, q->nq + i, i, k_new, v_new, n_new);
    for (int32_t i = 0; s->kivi && i < nqz; i += s->p.group)
        quant_put_key_block(s, q, q->nq + i, i, k_new, n_new);
    s->copied += (size_t)nqz * quant_token_qbytes(s) +
                 (size_t)(s->kivi ? nqz / s->p.group : 0) * quant_block_bytes(s);

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
    if (nqz > 0)
        q->flush_end = pos0 + n_new;
    KV_ASSERT(q->nr == kept_old + n_put && q->nr <= r);
    KV_ASSERT(!s->kivi || q->nq % s->p.group == 0);
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* View and accounting                                                      */

/* The quantized store, then the f32 residual. */
static int32_t quant_max_spans(const struct kv_cache_config *cfg, const void *params)
{
    (void)cfg, (void)params;
    return 2;
}

static int32_t quant_view(const void *state, int32_t layer, struct kv_span *spans,
                          struct kv_mask *mask)
{
    (void)mask;
    const struct quant_state *s = state;
    const struct quant_layer *q = &s->layers[layer];
    const size_t nh = (size_t)s->cfg.n_kv_heads;
    int32_t n = 0;
    if (q->nq > 0) {
        const size_t qcap = (size_t)q->qcap, krows = (size_t)quant_kqp_rows(s, q->qcap);
        const struct kv_tensor codes = {
            .dtype = s->dtype,
            .row_stride = s->code_row,
            .head_stride = qcap * s->code_row,
            .seq_stride = nh * qcap * s->code_row,
            .axis = KV_QAXIS_TOKEN,
            .group = s->p.group,
            .qp_row_stride = s->qp_row,
            .qp_head_stride = qcap * s->qp_row,
            .qp_seq_stride = nh * qcap * s->qp_row,
        };
        spans[n] = (struct kv_span){.k = codes, .v = codes, .n_tokens = q->nq, .pos0 = 0};
        if (s->kivi) { /* keys: one row of head_dim pairs per block of group tokens */
            spans[n].k.axis = KV_QAXIS_CHANNEL;
            spans[n].k.qp_row_stride = s->kqp_row;
            spans[n].k.qp_head_stride = krows * s->kqp_row;
            spans[n].k.qp_seq_stride = nh * krows * s->kqp_row;
        }
        spans[n].k.data = q->k_codes;
        spans[n].k.qp = q->k_qp;
        spans[n].v.data = q->v_codes;
        spans[n].v.qp = q->v_qp;
        n++;
    }
    if (q->nr > 0)
        spans[n++] = kv_store_span(quant_res_k(s, q), quant_res_v(s, q), s->p.residual, 0,
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
    for (int32_t l = 0; l < s->cfg.n_layers; l++) {
        const int32_t cap = s->layers[l].qcap;
        total += (size_t)cap * quant_token_qbytes(s) +
                 (size_t)(s->kivi ? quant_kqp_rows(s, cap) : 0) * quant_block_bytes(s) +
                 2 * s->res_half;
    }
    return total;
}

/* The quantized and residual rows held, and the rest: quantized capacity
 * past them (the store grows by doubling) and the residual's free slots. */
static void quant_stats(const void *state, struct kv_cache_stats *st)
{
    const struct quant_state *s = state;
    st->resident = quant_resident_bytes(state);
    for (int32_t l = 0; l < s->cfg.n_layers; l++)
        st->tokens += quant_held_bytes(s, &s->layers[l]);
    st->slack = st->resident - st->tokens;
}

static size_t quant_copied_bytes(const void *state)
{
    const struct quant_state *s = state;
    return s->copied;
}

/* The resident formula with the quantized store at the capacity that holds
 * all n tokens (it holds at most n - 1 of them). */
static enum kv_status quant_bytes_for(const struct kv_cache_config *cfg, const void *params,
                                      int32_t n_tokens, size_t *bytes)
{
    const struct quant_params *p = params;
    const int kivi = p->layout == QUANT_LAYOUT_KIVI;
    const size_t code_row = kv_dtype_row_bytes(quant_dtype_of(p), cfg->head_dim);
    const size_t qp_row = (size_t)(cfg->head_dim / p->group) * sizeof(struct kv_qparams);
    const size_t cap = n_tokens > 0 ? (size_t)kv_store_grow_cap(n_tokens) : 0;
    const size_t kblocks = kivi ? (cap + (size_t)p->group - 1) / (size_t)p->group : 0;
    const size_t per_tok = 2 * code_row + qp_row + (kivi ? 0 : qp_row);
    size_t bh, tok, blk, res, per_layer;
    size_t f[2] = {(size_t)cfg->batch, (size_t)cfg->n_kv_heads};
    if (kv_mul_sizes(&bh, 2, f) != KV_OK || kv_mul_size(&tok, bh, per_tok) != KV_OK ||
        kv_mul_size(&tok, tok, cap) != KV_OK ||
        kv_mul_size(&blk, bh, (size_t)cfg->head_dim * sizeof(struct kv_qparams)) != KV_OK ||
        kv_mul_size(&blk, blk, kblocks) != KV_OK)
        return KV_ERR_OVERFLOW;
    if (kv_store_bytes(&res, cfg, (size_t)quant_residual_of(p), kv_store_row_bytes(cfg)) != KV_OK ||
        res > SIZE_MAX / 2 || tok > SIZE_MAX - 2 * res || blk > SIZE_MAX - 2 * res - tok)
        return KV_ERR_OVERFLOW;
    per_layer = tok + blk + 2 * res;
    return kv_mul_size(bytes, per_layer, (size_t)cfg->n_layers);
}

/* ------------------------------------------------------------------------ */
/* Crop, fork, reorder                                                      */

/*
 * Crop within the residual. A cache that never appended the tokens past
 * len holds what this one held when it was len long; that equals this
 * cache cut at len exactly when no update since quantized residual tokens
 * (len >= flush_end: then every token below len that was f32 then is f32
 * now, and the quantized rows, final once written, are the same). A crop
 * reaching further back would leave tokens quantized that the never-
 * appended cache holds in f32, so it is refused (KV_ERR_UNSUPPORTED,
 * nothing changed); 0 (an empty cache) is always taken. The kivi layout
 * needs nothing more: flush_end >= nq and nq is a whole number of key
 * blocks, so a crop that is taken never cuts into a quantized block (and a
 * block's per-channel qparams, made over all its tokens, stay valid).
 */
static enum kv_status quant_crop(void *state, int32_t len)
{
    struct quant_state *s = state;
    for (int32_t l = 0; l < s->cfg.n_layers; l++)
        if (len != 0 && len < s->layers[l].flush_end)
            return KV_ERR_UNSUPPORTED;
    for (int32_t l = 0; l < s->cfg.n_layers; l++) {
        struct quant_layer *q = &s->layers[l];
        if (len == 0) {
            q->nq = q->nr = q->flush_end = 0; /* the store's capacity stays */
            continue;
        }
        KV_ASSERT(len >= q->nq && (!s->kivi || q->nq % s->p.group == 0));
        q->nr = len - q->nq;
    }
    return KV_OK;
}

/* The first n rows of every (sequence, head) block of one store side:
 * dst (batch, heads, dcap, row) sequence db <- src sequence sb (scap). */
static void quant_seq_rows(void *dst, int32_t dcap, int32_t db, const void *src, int32_t scap,
                           int32_t sb, int32_t n, size_t row, int32_t heads)
{
    KV_ASSERT(dst != NULL && src != NULL); /* a store holding rows is allocated */
    for (int32_t h = 0; h < heads; h++)
        memcpy((char *)dst + (((size_t)db * heads + h) * (size_t)dcap) * row,
               (const char *)src + (((size_t)sb * heads + h) * (size_t)scap) * row,
               (size_t)n * row);
}

/* Layer q's quantized store, sequence b <- sequence sb of layer `from` (a
 * store of the same layout, of any capacity and batch): codes, V qparams
 * and K qparams (token layout: one row per token; kivi: one row of
 * head_dim pairs per block, nq a whole number of blocks). */
static void quant_copy_qrows(const struct quant_state *s, struct quant_layer *q, int32_t b,
                             const struct quant_layer *from, int32_t sb)
{
    const int32_t H = s->cfg.n_kv_heads;
    if (from->nq == 0)
        return;
    quant_seq_rows(q->k_qp, quant_kqp_rows(s, q->qcap), b, from->k_qp,
                   quant_kqp_rows(s, from->qcap), sb, quant_kqp_rows(s, from->nq), s->kqp_row, H);
    quant_seq_rows(q->v_qp, q->qcap, b, from->v_qp, from->qcap, sb, from->nq, s->qp_row, H);
    quant_seq_rows(q->k_codes, q->qcap, b, from->k_codes, from->qcap, sb, from->nq, s->code_row,
                   H);
    quant_seq_rows(q->v_codes, q->qcap, b, from->v_codes, from->qcap, sb, from->nq, s->code_row,
                   H);
}

/* Layer q's store and residual, sequence b <- sequence sb of layer `from`
 * of a cache of the same layout and batch (a fork's source). */
static void quant_copy_seq(const struct quant_state *s, struct quant_layer *q, int32_t b,
                           const struct quant_layer *from, int32_t sb)
{
    const int32_t H = s->cfg.n_kv_heads, R = s->p.residual;
    const size_t frow = kv_store_row_bytes(&s->cfg);
    quant_copy_qrows(s, q, b, from, sb);
    if (from->nr > 0) {
        quant_seq_rows(q->res, R, b, from->res, R, sb, from->nr, frow, H);
        quant_seq_rows(quant_res_v(s, q), R, b, quant_res_v(s, from), R, sb, from->nr, frow, H);
    }
}

/* dst (fresh, same batch) <- src's quantized rows and residual, bit for bit
 * (no re-quantizing); the bytes copied count as dst's. */
static enum kv_status quant_fork(void *dst, const void *src)
{
    struct quant_state *d = dst;
    const struct quant_state *s = src;
    for (int32_t l = 0; l < s->cfg.n_layers; l++) {
        const struct quant_layer *sq = &s->layers[l];
        struct quant_layer *dq = &d->layers[l];
        if (sq->qcap > 0) {
            enum kv_status st = quant_store_alloc(d, d->cfg.batch, sq->qcap, dq);
            if (st != KV_OK)
                return st; /* the core destroys dst */
        }
        for (int32_t b = 0; b < s->cfg.batch; b++)
            quant_copy_seq(d, dq, b, sq, b);
        dq->nq = sq->nq;
        dq->nr = sq->nr;
        dq->flush_end = sq->flush_end;
        d->copied += quant_held_bytes(d, dq);
    }
    return KV_OK;
}

/*
 * Sequence b <- sequence src[b] for b < n, the batch becoming n: new stores
 * and residuals of n sequences for every layer, all allocated before any is
 * written (KV_ERR_NOMEM leaves the cache as it was); rows are copied, never
 * re-quantized, and count as copied bytes.
 */
static enum kv_status quant_reorder(void *state, const int32_t *src, int32_t n)
{
    struct quant_state *s = state;
    struct kv_cache_config nc = s->cfg;
    nc.batch = n;
    size_t res_half;
    if (kv_store_bytes(&res_half, &nc, (size_t)s->p.residual, kv_store_row_bytes(&nc)) != KV_OK ||
        res_half > (size_t)PTRDIFF_MAX / 4)
        return KV_ERR_OVERFLOW;
    struct quant_layer *nl = kv_alloc((size_t)s->cfg.n_layers * sizeof *nl);
    if (nl == NULL)
        return KV_ERR_NOMEM;
    enum kv_status st = KV_OK;
    int32_t made = 0;
    for (; made < s->cfg.n_layers && st == KV_OK; made++) {
        const struct quant_layer *q = &s->layers[made];
        nl[made] = (struct quant_layer){.nq = q->nq, .nr = q->nr, .flush_end = q->flush_end};
        if (q->qcap > 0)
            st = quant_store_alloc(s, n, q->qcap, &nl[made]);
        if (st == KV_OK && (nl[made].res = kv_alloc(2 * res_half)) == NULL)
            st = KV_ERR_NOMEM;
    }
    if (st != KV_OK) {
        for (int32_t l = 0; l < made; l++) {
            kv_free(nl[l].store);
            kv_free(nl[l].res);
        }
        kv_free(nl);
        return st;
    }
    /* the residuals' V halves sit at the old and the new res_half */
    const int32_t H = s->cfg.n_kv_heads, R = s->p.residual;
    const size_t frow = kv_store_row_bytes(&s->cfg);
    for (int32_t l = 0; l < s->cfg.n_layers; l++) {
        struct quant_layer *q = &s->layers[l], *to = &nl[l];
        for (int32_t b = 0; b < n; b++) {
            const int32_t sb = src[b];
            quant_copy_qrows(s, to, b, q, sb);
            if (q->nr > 0) {
                quant_seq_rows(to->res, R, b, q->res, R, sb, q->nr, frow, H);
                quant_seq_rows((char *)to->res + res_half, R, b, (char *)q->res + s->res_half,
                               R, sb, q->nr, frow, H);
            }
        }
        kv_free(q->store);
        kv_free(q->res);
        *q = nl[l];
    }
    kv_free(nl);
    s->res_half = res_half;
    s->cfg.batch = n;
    for (int32_t l = 0; l < s->cfg.n_layers; l++)
        s->copied += quant_held_bytes(s, &s->layers[l]);
    return KV_OK;
}

const struct kv_strategy_ops kv_strategy_quantized = {
    .name = "quantized",
    .description = "int8/int4/int2 groups with scale and min, recent tokens kept in f32",
    .caps = KV_CAP_KEEPS_HISTORY | KV_CAP_LOSSY | KV_CAP_CHUNKED_APPEND | KV_CAP_BOUNDED |
            KV_CAP_CROP | KV_CAP_FORK | KV_CAP_REORDER,
    .params = quant_param_table,
    .n_params = 4,
    .params_size = sizeof(struct quant_params),
    .presets = quant_presets,
    .n_presets = 9,
    .check = quant_check,
    .describe = quant_describe,
    .label = quant_label,
    .dtype = quant_dtype_of,
    .bytes_for = quant_bytes_for,
    .max_spans = quant_max_spans,
    .state_size = sizeof(struct quant_state),
    .init = quant_init,
    .free = quant_free,
    .update = quant_update,
    .view = quant_view,
    .seq_len = quant_seq_len,
    .resident_bytes = quant_resident_bytes,
    .stats = quant_stats,
    .copied_bytes = quant_copied_bytes,
    .reset = quant_reset,
    .crop = quant_crop,
    .fork = quant_fork,
    .reorder = quant_reorder,
};
