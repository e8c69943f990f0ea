/*
 * kv_attention_ref.c - kv_attn_ref, the scalar reference twin of the fast
 * kernel: the attention contract in its plainest form.
 *
 * The reference is written to be obviously right, not fast: for each query
 * it walks every key of every span twice (once for the maximum score, once
 * for the exponentials and the weighted sum of values), asks the mask about
 * each key on its own (kv_attn_key_visible, the predicate of kv_attention.h,
 * not the kernel's interval arithmetic), accumulates in double and reads
 * every row through its dtype's to_float_row one row at a time. So it shares
 * nothing with the fast paths except the row addressing and the argument
 * checks (kv_attn_check.c). The attention mass, when asked for, is a third
 * pass: each key's probability, accumulated in double over the queries.
 */
#include "kv_attention_impl.h"

#include <math.h>

/* x[0..d) <- row t of span s (keys if is_v == 0, values otherwise) */
static void ref_row(float *x, const struct kv_span *s, const struct kv_attn_params *p,
                    int32_t b, int32_t h, int32_t t, int is_v)
{
    const struct kv_tensor *td = is_v ? &s->v : &s->k;
    const struct kv_tensor tb = kv_tensor_of_seq(td, b);
    kv_tensor_row_float(x, &tb, s->page_tokens, kv_tensor_off(td, b, h),
                        kv_tensor_qp_off(td, b, h), t, p->head_dim);
}

static double ref_dot(const float *q, const float *k, int32_t d)
{
    double acc = 0.0;
    for (int32_t i = 0; i < d; i++)
        acc += (double)q[i] * k[i];
    return acc;
}

/*
 * out (d) = attention of one query q (d) of sequence b at position pos, kv
 * head h. With mass (n_keys doubles of this query head, or NULL), adds each
 * key's probability at its index in the view.
 */
static void ref_query(float *out, double *mass, const float *q, const struct kv_attn_params *p,
                      const struct kv_view *v, int32_t b, int32_t h, int64_t pos, float *row,
                      double *acc)
{
    const int32_t d = p->head_dim;

    /* pass 1: the largest score */
    double mx = -INFINITY;
    for (int32_t s = 0; s < v->n_spans; s++) {
        const struct kv_span *sp = &v->spans[s];
        for (int32_t t = 0; t < sp->n_tokens; t++) {
            if (!kv_attn_key_visible(&v->mask, b, pos, kv_span_pos(sp, b, h, t)))
                continue;
            ref_row(row, sp, p, b, h, t, 0);
            double sc = ref_dot(q, row, d) * p->scale;
            if (sc > mx)
                mx = sc;
        }
    }
    /* pass 2: exponentials and the weighted sum of values */
    double sum = 0.0;
    for (int32_t i = 0; i < d; i++)
        acc[i] = 0.0;
    for (int32_t s = 0; s < v->n_spans; s++) {
        const struct kv_span *sp = &v->spans[s];
        for (int32_t t = 0; t < sp->n_tokens; t++) {
            if (!kv_attn_key_visible(&v->mask, b, pos, kv_span_pos(sp, b, h, t)))
                continue;
            ref_row(row, sp, p, b, h, t, 0);
            double w = exp(ref_dot(q, row, d) * p->scale - mx);
            sum += w;
            ref_row(row, sp, p, b, h, t, 1);
            for (int32_t i = 0; i < d; i++)
                acc[i] += w * row[i];
        }
    }
    for (int32_t i = 0; i < d; i++)
        out[i] = sum > 0.0 ? (float)(acc[i] / sum) : 0.0f; /* no key: zeros */
    if (mass == NULL || !(sum > 0.0))
        return;
    /* pass 3: the probabilities, by key index in the view */
    int64_t j = 0;
    for (int32_t s = 0; s < v->n_spans; s++) {
        const struct kv_span *sp = &v->spans[s];
        for (int32_t t = 0; t < sp->n_tokens; t++, j++) {
            if (!kv_attn_key_visible(&v->mask, b, pos, kv_span_pos(sp, b, h, t)))
                continue;
            ref_row(row, sp, p, b, h, t, 0);
            mass[j] += exp(ref_dot(q, row, d) * p->scale - mx) / sum;
        }
    }
}

enum kv_status kv_attn_ref(float *out, const float *q, const struct kv_attn_params *p,
                           const struct kv_view *v)
{
    enum kv_status st = kv_attn_check(p, v);
    if (st != KV_OK)
        return st;
    if (out == NULL || q == NULL)
        return KV_ERR_INVALID;
    const int32_t d = p->head_dim, g = p->n_heads / p->n_kv_heads;
    const size_t n_keys = (size_t)kv_view_keys(v);
    const size_t n_mass = p->mass != NULL ? (size_t)p->batch * p->n_heads * n_keys : 0;
    float *row = kv_alloc((size_t)d * sizeof(float));
    double *acc = kv_alloc((size_t)d * sizeof(double));
    double *mass = n_mass > 0 ? kv_alloc(n_mass * sizeof(double)) : NULL; /* zeroed */
    if (row == NULL || acc == NULL || (n_mass > 0 && mass == NULL)) {
        kv_free(row);
        kv_free(acc);
        kv_free(mass);
        return KV_ERR_NOMEM;
    }
    for (int32_t b = 0; b < p->batch; b++)
        for (int32_t i = 0; i < p->n_q; i++)
            for (int32_t h = 0; h < p->n_heads; h++) {
                size_t off = (((size_t)b * p->n_q + i) * p->n_heads + h) * d;
                double *m = mass != NULL ? mass + ((size_t)b * p->n_heads + h) * n_keys : NULL;
                ref_query(out + off, m, q + off, p, v, b, h / g, (int64_t)p->q_pos0 + i, row,
                          acc);
            }
    for (size_t j = 0; j < n_mass; j++)
        p->mass[j] = (float)mass[j];
    kv_free(row);
    kv_free(acc);
    kv_free(mass);
    return KV_OK;
}

enum kv_status kv_span_row_float(float *dst, const struct kv_span *s, const struct kv_tensor *side,
                                 int32_t b, int32_t h, int32_t t, int32_t head_dim)
{
    if (dst == NULL || s == NULL || (side != &s->k && side != &s->v) || b < 0 || h < 0 ||
        t < 0 || t >= s->n_tokens || head_dim < 1 ||
        (s->page_tokens > 0 ? side->pages == NULL : side->data == NULL) ||
        (int)side->dtype < 0 || side->dtype >= KV_DTYPE_COUNT)
        return KV_ERR_INVALID;
    const struct kv_tensor tb = kv_tensor_of_seq(side, b); /* its own page table, if any */
    kv_tensor_row_float(dst, &tb, s->page_tokens, kv_tensor_off(side, b, h),
                        kv_tensor_qp_off(side, b, h), t, head_dim);
    return KV_OK;
}

const struct kv_qparams *kv_span_row_qparams(const struct kv_span *s, const struct kv_tensor *side,
                                             int32_t b, int32_t h, int32_t t, int32_t head_dim,
                                             int32_t *n)
{
    if (n != NULL)
        *n = 0;
    if (n == NULL || s == NULL || (side != &s->k && side != &s->v) || b < 0 || h < 0 || t < 0 ||
        t >= s->n_tokens || head_dim < 1 ||
        (s->page_tokens > 0 ? side->qp_pages == NULL : side->qp == NULL) || (int)side->dtype < 0 ||
        side->dtype >= KV_DTYPE_COUNT || !kv_type_traits[side->dtype].has_qparams ||
        (side->axis == KV_QAXIS_TOKEN && (side->group < 1 || head_dim % side->group != 0)))
        return NULL;
    const struct kv_tensor tb = kv_tensor_of_seq(side, b);
    *n = side->axis == KV_QAXIS_TOKEN ? head_dim / side->group : head_dim;
    return (const struct kv_qparams *)kv_tensor_qp_at(&tb, s->page_tokens,
                                                      kv_tensor_qp_off(side, b, h), t);
}
