/*
 * kv_attn_check.c - the attention contract's argument checks and its
 * closed-form accounting (visible pairs for the FLOP counts, span bytes for
 * the byte counts), shared by the kernel, its reference twin and the callers
 * that count work.
 *
 * The design decision: a view is checked once per call, before any row is
 * read, down to every page pointer of a paged span, so neither the kernel
 * nor the reference can be handed an address it would read out of bounds
 * through a stride that makes rows overlap or a pointer the loads cannot
 * take (float rows must be 4-byte aligned, qparams too). The params must
 * describe the storage behind the view: a view states its batch, kv heads
 * and head_dim (kv_cache_view fills them), and params that ask for more
 * sequences, other heads or longer rows than it holds are KV_ERR_INVALID,
 * not reads past its end. The counts (visible pairs, span bytes) make the
 * checks of the shape that what they read depends on and count 0 for
 * arguments that fail them.
 */
#include "kv_attention_impl.h"

#include <math.h>
#include <stdalign.h>

/* ------------------------------------------------------------------------ */
/* Checks                                                                   */

/* Bytes of the qparams of one qparams row (per token: head_dim/group pairs;
 * per channel: head_dim pairs). */
static size_t qp_row_bytes(const struct kv_tensor *x, int32_t d)
{
    size_t pairs = x->axis == KV_QAXIS_TOKEN ? (size_t)(d / x->group) : (size_t)d;
    return pairs * sizeof(struct kv_qparams);
}

/* 1 when the pointer and every stride are multiples of a. */
static int aligned(const void *ptr, size_t a, size_t s1, size_t s2, size_t s3)
{
    return (((uintptr_t)ptr | s1 | s2 | s3) % a) == 0;
}

static enum kv_status check_tensor(const struct kv_attn_params *p, const struct kv_span *s,
                                   const struct kv_tensor *x)
{
    const struct kv_type_traits *tr = kv_dtype_traits(x->dtype);
    const int32_t d = p->head_dim, page = s->page_tokens;
    if (tr == NULL)
        return KV_ERR_INVALID;
    if (s->n_tokens == 0)
        return KV_OK;
    /* element loads must be aligned: 4 bytes for f32, none for packed codes */
    const size_t ea = tr->bits >= 8 && tr->bits % 8 == 0 ? (size_t)tr->bits / 8 : 1;
    const int32_t n_pages = page > 0 ? (int32_t)(((int64_t)s->n_tokens + page - 1) / page) : 1;
    /* a table per sequence: every sequence's n_pages entries are read */
    const int32_t n_tables = page > 0 && x->table_stride > 0 ? p->batch : 1;
    if (page == 0 ? x->data == NULL : x->pages == NULL)
        return KV_ERR_INVALID;
    if (x->table_stride > (size_t)PTRDIFF_MAX / sizeof(void *) / (size_t)n_tables)
        return KV_ERR_INVALID; /* the last table's address would not be one */
    for (int32_t b = 0; b < n_tables; b++)
        for (int32_t i = 0; i < n_pages; i++) {
            const void *base = page == 0 ? x->data : x->pages[(size_t)b * x->table_stride + (size_t)i];
            if (base == NULL || !aligned(base, ea, x->row_stride, x->head_stride, x->seq_stride))
                return KV_ERR_INVALID;
        }
    /* consecutive tokens must not overlap */
    const int32_t rows_together = page == 0 ? s->n_tokens : page;
    if (s->n_tokens > 1 && rows_together > 1 && x->row_stride < kv_dtype_row_bytes(x->dtype, d))
        return KV_ERR_INVALID;
    if (!tr->has_qparams)
        return KV_OK;

    if ((unsigned)x->axis >= KV_QAXIS_COUNT || x->group < 1)
        return KV_ERR_INVALID;
    if (kv_quant_check(x->dtype, d, x->axis == KV_QAXIS_TOKEN ? x->group : d) != KV_OK)
        return KV_ERR_INVALID;
    if (x->axis == KV_QAXIS_CHANNEL && page > 0 && page % x->group != 0)
        return KV_ERR_INVALID; /* a block of tokens may not straddle pages */
    if (page == 0 ? x->qp == NULL : x->qp_pages == NULL)
        return KV_ERR_INVALID;
    for (int32_t b = 0; b < n_tables; b++)
        for (int32_t i = 0; i < n_pages; i++) {
            const void *base = page == 0 ? (const void *)x->qp
                                         : x->qp_pages[(size_t)b * x->table_stride + (size_t)i];
            if (base == NULL || !aligned(base, alignof(struct kv_qparams), x->qp_row_stride,
                                         x->qp_head_stride, x->qp_seq_stride))
                return KV_ERR_INVALID;
        }
    /* qparams rows must not overlap either */
    const int64_t qp_rows = x->axis == KV_QAXIS_TOKEN
                                ? rows_together
                                : ((int64_t)rows_together + x->group - 1) / x->group;
    if (s->n_tokens > 1 && qp_rows > 1 && x->qp_row_stride < qp_row_bytes(x, d))
        return KV_ERR_INVALID;
    return KV_OK;
}

static enum kv_status check_span(const struct kv_attn_params *p, const struct kv_span *s)
{
    if (s->n_tokens < 0 || s->pos0 < 0 || s->pos0 > INT32_MAX - s->n_tokens ||
        s->page_tokens < 0)
        return KV_ERR_INVALID;
    enum kv_status st = check_tensor(p, s, &s->k);
    return st != KV_OK ? st : check_tensor(p, s, &s->v);
}

/* A view's stated shape against the params: each count the view states
 * (> 0) must equal the params' (0: not stated, a hand-made view). */
static int shape_matches(const struct kv_attn_params *p, const struct kv_view *v)
{
    if (v->batch < 0 || v->n_kv_heads < 0 || v->head_dim < 0)
        return 0;
    return (v->batch == 0 || p->batch == v->batch) &&
           (v->n_kv_heads == 0 || p->n_kv_heads == v->n_kv_heads) &&
           (v->head_dim == 0 || p->head_dim == v->head_dim);
}

/* What every function of this file reads before any row: the params' own
 * shape, the view's spans array and stated shape, the mask, each span's
 * counts and dtypes (the counts read the traits table by dtype). */
static enum kv_status check_shape(const struct kv_attn_params *p, const struct kv_view *v)
{
    if (p == NULL || v == NULL || v->n_spans < 0 || (v->n_spans > 0 && v->spans == NULL))
        return KV_ERR_INVALID;
    if (p->batch < 1 || p->n_q < 1 || p->n_heads < 1 || p->n_kv_heads < 1 ||
        p->n_heads % p->n_kv_heads != 0 || p->head_dim < 1 || p->q_pos0 < 0 ||
        p->q_pos0 > INT32_MAX - (p->n_q - 1))
        return KV_ERR_INVALID;
    if (!shape_matches(p, v))
        return KV_ERR_INVALID;
    if (v->mask.window < 0 || v->mask.n_sink < 0)
        return KV_ERR_INVALID;
    if (v->mask.pad != NULL) {
        for (int32_t b = 0; b < p->batch; b++)
            if (v->mask.pad[b] < 0)
                return KV_ERR_INVALID;
    }
    for (int32_t i = 0; i < v->n_spans; i++) {
        const struct kv_span *s = &v->spans[i];
        if (s->n_tokens < 0 || s->pos0 < 0 || s->pos0 > INT32_MAX - s->n_tokens ||
            s->page_tokens < 0 || kv_dtype_traits(s->k.dtype) == NULL ||
            kv_dtype_traits(s->v.dtype) == NULL)
            return KV_ERR_INVALID;
    }
    return KV_OK;
}

enum kv_status kv_attn_check(const struct kv_attn_params *p, const struct kv_view *v)
{
    enum kv_status st = check_shape(p, v);
    if (st != KV_OK)
        return st;
    if (p->n_threads < 1 || !isfinite(p->scale))
        return KV_ERR_INVALID;
    for (int32_t i = 0; i < v->n_spans; i++) {
        st = check_span(p, &v->spans[i]);
        if (st != KV_OK)
            return st;
    }
    if (p->mass != NULL) { /* room for (batch, n_heads, n_keys) */
        size_t need;
        const size_t f[3] = {(size_t)p->batch, (size_t)p->n_heads, (size_t)kv_view_keys(v)};
        if (kv_mul_sizes(&need, 3, f) != KV_OK || p->mass_len < need)
            return KV_ERR_INVALID;
    }
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* Closed-form counts                                                       */

/* Visible keys of a span with a position table for one query, summed over
 * the kv heads (key by key). */
static int64_t table_visible(const struct kv_attn_params *p, const struct kv_mask *m,
                             const struct kv_span *s, int32_t b, int64_t qpos)
{
    int64_t n = 0;
    for (int32_t h = 0; h < p->n_kv_heads; h++)
        for (int32_t t = 0; t < s->n_tokens; t++)
            n += kv_attn_key_visible(m, b, qpos, kv_span_pos(s, b, h, t));
    return n;
}

int64_t kv_attn_visible_pairs(const struct kv_attn_params *p, const struct kv_view *v)
{
    if (check_shape(p, v) != KV_OK)
        return 0;
    int64_t pairs = 0, table = 0; /* table: summed over kv heads */
    for (int32_t b = 0; b < p->batch; b++) {
        for (int32_t i = 0; i < p->n_q; i++) {
            int64_t lo[2], hi[2];
            const int64_t qpos = (int64_t)p->q_pos0 + i;
            const int nr = kv_mask_ranges(&v->mask, b, qpos, lo, hi);
            for (int32_t s = 0; s < v->n_spans; s++) {
                if (v->spans[s].pos != NULL) {
                    table += table_visible(p, &v->mask, &v->spans[s], b, qpos);
                    continue;
                }
                for (int r = 0; r < nr; r++) {
                    int32_t t0, t1;
                    kv_span_token_range(&v->spans[s], lo[r], hi[r], &t0, &t1);
                    pairs += t1 - t0;
                }
            }
        }
    }
    return pairs + table / p->n_kv_heads;
}

/* Bytes of one descriptor of a span of n tokens, one (sequence, kv head). */
static size_t tensor_bytes(const struct kv_tensor *x, int32_t d, int32_t n)
{
    size_t bytes = kv_dtype_row_bytes(x->dtype, d) * (size_t)n;
    if (kv_type_traits[x->dtype].has_qparams && x->group > 0) {
        size_t rows = x->axis == KV_QAXIS_TOKEN ? (size_t)n
                                                : ((size_t)n + (size_t)x->group - 1) / (size_t)x->group;
        bytes += rows * qp_row_bytes(x, d);
    }
    return bytes;
}

size_t kv_attn_span_bytes(const struct kv_attn_params *p, const struct kv_view *v)
{
    if (check_shape(p, v) != KV_OK)
        return 0;
    size_t total = 0;
    for (int32_t s = 0; s < v->n_spans; s++) {
        const struct kv_span *sp = &v->spans[s];
        total += (tensor_bytes(&sp->k, p->head_dim, sp->n_tokens) +
                  tensor_bytes(&sp->v, p->head_dim, sp->n_tokens) +
                  (sp->pos != NULL ? (size_t)sp->n_tokens * sizeof(int32_t) : 0)) *
                 (size_t)p->batch * (size_t)p->n_kv_heads;
    }
    return total;
}
