/*
 * kv_attention_ref.c - the attention contract in its plainest form: the
 * argument checks, the closed-form counts (visible pairs, span bytes) and
 * kv_attn_ref, the scalar reference twin of the fast kernel.
 *
 * The reference is written to be obviously right, not fast: for each query
 * it walks every visible key twice (once for the maximum score, once for the
 * exponentials and the weighted sum of values), accumulates in double and
 * reads quantized rows through kv_dequantize_row one row at a time, so it
 * shares nothing with the fast paths except the row addressing.
 */
#include "kv_attention_impl.h"
#include "kv_quant.h"

#include <math.h>
#include <stdalign.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Checks                                                                   */

static enum kv_status check_span(const struct kv_attn_params *p, const struct kv_span *s)
{
    if ((unsigned)s->dtype >= KV_DTYPE_COUNT || s->n_tokens < 0 || s->pos0 < 0 ||
        s->pos0 > INT32_MAX - s->n_tokens)
        return KV_ERR_INVALID;
    if (s->n_tokens == 0)
        return KV_OK;
    if (s->k == NULL || s->v == NULL)
        return KV_ERR_INVALID;
    size_t row = kv_dtype_row_bytes(s->dtype, p->head_dim);
    if (s->dtype == KV_DTYPE_F32) {
        /* float loads must be aligned */
        if (((uintptr_t)s->k | (uintptr_t)s->v | s->row_stride | s->head_stride |
             s->seq_stride) % alignof(float) != 0)
            return KV_ERR_INVALID;
    } else {
        if (kv_quant_check(s->dtype, p->head_dim, p->group) != KV_OK)
            return KV_ERR_INVALID;
        if (s->k_qp == NULL || s->v_qp == NULL)
            return KV_ERR_INVALID;
        if (((uintptr_t)s->k_qp | (uintptr_t)s->v_qp | s->qp_row_stride |
             s->qp_head_stride | s->qp_seq_stride) % alignof(struct kv_qparams) != 0)
            return KV_ERR_INVALID;
        size_t qp_row = (size_t)(p->head_dim / p->group) * sizeof(struct kv_qparams);
        if (s->n_tokens > 1 && s->qp_row_stride < qp_row)
            return KV_ERR_INVALID;
    }
    /* consecutive tokens must not overlap */
    if (s->n_tokens > 1 && s->row_stride < row)
        return KV_ERR_INVALID;
    return KV_OK;
}

enum kv_status kv_attn_check(const struct kv_attn_params *p,
                             const struct kv_span *spans, int32_t n_spans)
{
    if (p == NULL || n_spans < 0 || (n_spans > 0 && spans == NULL))
        return KV_ERR_INVALID;
    if (p->batch < 1 || p->n_q < 1 || p->n_heads < 1 || p->n_kv_heads < 1 ||
        p->n_heads % p->n_kv_heads != 0 || p->head_dim < 1 || p->window < 0 ||
        p->q_pos0 < 0 || p->q_pos0 > INT32_MAX - (p->n_q - 1) || p->n_threads < 1 ||
        !isfinite(p->scale))
        return KV_ERR_INVALID;
    if (p->pad != NULL) {
        for (int32_t b = 0; b < p->batch; b++)
            if (p->pad[b] < 0)
                return KV_ERR_INVALID;
    }
    for (int32_t i = 0; i < n_spans; i++) {
        enum kv_status st = check_span(p, &spans[i]);
        if (st != KV_OK)
            return st;
    }
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* Closed-form counts                                                       */

int64_t kv_attn_visible_pairs(const struct kv_attn_params *p,
                              const struct kv_span *spans, int32_t n_spans)
{
    int64_t pairs = 0;
    for (int32_t b = 0; b < p->batch; b++) {
        for (int32_t i = 0; i < p->n_q; i++) {
            int64_t lo, hi;
            kv_attn_visible_range(p, b, (int64_t)p->q_pos0 + i, &lo, &hi);
            for (int32_t s = 0; s < n_spans; s++) {
                int32_t t0, t1;
                kv_span_token_range(&spans[s], lo, hi, &t0, &t1);
                pairs += t1 - t0;
            }
        }
    }
    return pairs;
}

size_t kv_attn_span_bytes(const struct kv_attn_params *p,
                          const struct kv_span *spans, int32_t n_spans)
{
    size_t total = 0;
    for (int32_t s = 0; s < n_spans; s++) {
        size_t row = kv_dtype_row_bytes(spans[s].dtype, p->head_dim);
        if (spans[s].dtype != KV_DTYPE_F32 && p->group > 0)
            row += (size_t)(p->head_dim / p->group) * sizeof(struct kv_qparams);
        total += 2 * row * (size_t)spans[s].n_tokens * (size_t)p->batch *
                 (size_t)p->n_kv_heads;
    }
    return total;
}

/* ------------------------------------------------------------------------ */
/* Reference kernel                                                         */

/* x[0..d) <- row t of span s (keys if is_v == 0, values otherwise) */
static void ref_row(float *x, const struct kv_span *s, const struct kv_attn_params *p,
                    int32_t b, int32_t h, int32_t t, int is_v)
{
    const char *row = is_v ? kv_span_v_row(s, b, h, t) : kv_span_k_row(s, b, h, t);
    const struct kv_qparams *qp = NULL;
    if (s->dtype != KV_DTYPE_F32)
        qp = kv_span_qp(is_v ? s->v_qp : s->k_qp, s, b, h, t);
    kv_dequantize_row(x, row, qp, s->dtype, p->head_dim, p->group);
}

static double ref_dot(const float *q, const float *k, int32_t d)
{
    double acc = 0.0;
    for (int32_t i = 0; i < d; i++)
        acc += (double)q[i] * k[i];
    return acc;
}

/* out (d) = attention of one query q (d) of sequence b at position pos, kv head h */
static void ref_query(float *out, const float *q, const struct kv_attn_params *p,
                      const struct kv_span *spans, int32_t n_spans, int32_t b,
                      int32_t h, int64_t pos, float *row, double *acc)
{
    const int32_t d = p->head_dim;
    int64_t lo, hi;
    kv_attn_visible_range(p, b, pos, &lo, &hi);

    /* pass 1: the largest score */
    double mx = -INFINITY;
    for (int32_t s = 0; s < n_spans; s++) {
        int32_t t0, t1;
        kv_span_token_range(&spans[s], lo, hi, &t0, &t1);
        for (int32_t t = t0; t < t1; t++) {
            ref_row(row, &spans[s], p, b, h, t, 0);
            double sc = ref_dot(q, row, d) * p->scale;
            if (sc > mx)
                mx = sc;
        }
    }
    /* pass 2: exponentials and the weighted sum of values */
    double sum = 0.0;
    for (int32_t i = 0; i < d; i++)
        acc[i] = 0.0;
    for (int32_t s = 0; s < n_spans; s++) {
        int32_t t0, t1;
        kv_span_token_range(&spans[s], lo, hi, &t0, &t1);
        for (int32_t t = t0; t < t1; t++) {
            ref_row(row, &spans[s], p, b, h, t, 0);
            double w = exp(ref_dot(q, row, d) * p->scale - mx);
            sum += w;
            ref_row(row, &spans[s], p, b, h, t, 1);
            for (int32_t i = 0; i < d; i++)
                acc[i] += w * row[i];
        }
    }
    for (int32_t i = 0; i < d; i++)
        out[i] = sum > 0.0 ? (float)(acc[i] / sum) : 0.0f; /* no key: zeros */
}

enum kv_status kv_attn_ref(float *out, const float *q, const struct kv_attn_params *p,
                           const struct kv_span *spans, int32_t n_spans)
{
    enum kv_status st = kv_attn_check(p, spans, n_spans);
    if (st != KV_OK)
        return st;
    if (out == NULL || q == NULL)
        return KV_ERR_INVALID;
    const int32_t d = p->head_dim, g = p->n_heads / p->n_kv_heads;
    float *row = kv_alloc((size_t)d * sizeof(float));
    double *acc = kv_alloc((size_t)d * sizeof(double));
    if (row == NULL || acc == NULL) {
        kv_free(row);
        kv_free(acc);
        return KV_ERR_NOMEM;
    }
    for (int32_t b = 0; b < p->batch; b++)
        for (int32_t i = 0; i < p->n_q; i++)
            for (int32_t h = 0; h < p->n_heads; h++) {
                size_t off = (((size_t)b * p->n_q + i) * p->n_heads + h) * d;
                ref_query(out + off, q + off, p, spans, n_spans, b, h / g,
                          (int64_t)p->q_pos0 + i, row, acc);
            }
    kv_free(row);
    kv_free(acc);
    return KV_OK;
}
