/*
 * kv_attention_impl.h - private helpers shared by the attention kernel and
 * its scalar reference twin: where a row lives and which keys a query sees.
 *
 * The one idea: span positions are contiguous (token t is at pos0 + t), and
 * a query's visible keys are one position interval [lo, hi], so the keys of
 * a span that a query sees are one token interval. Masking is interval
 * arithmetic, never a per-key test.
 */
#ifndef KV_ATTENTION_IMPL_H
#define KV_ATTENTION_IMPL_H

#include "kv_attention.h"

/* ------------------------------------------------------------------------ */
/* Addresses                                                                */

static inline const char *kv_span_k_row(const struct kv_span *s, int32_t b, int32_t h,
                                        int32_t t)
{
    return (const char *)s->k + (size_t)b * s->seq_stride + (size_t)h * s->head_stride +
           (size_t)t * s->row_stride;
}

static inline const char *kv_span_v_row(const struct kv_span *s, int32_t b, int32_t h,
                                        int32_t t)
{
    return (const char *)s->v + (size_t)b * s->seq_stride + (size_t)h * s->head_stride +
           (size_t)t * s->row_stride;
}

static inline const struct kv_qparams *kv_span_qp(const struct kv_qparams *base,
                                                  const struct kv_span *s, int32_t b,
                                                  int32_t h, int32_t t)
{
    return (const struct kv_qparams *)((const char *)base + (size_t)b * s->qp_seq_stride +
                                       (size_t)h * s->qp_head_stride +
                                       (size_t)t * s->qp_row_stride);
}

/* ------------------------------------------------------------------------ */
/* Visibility                                                               */

/* Visible key positions [*lo, *hi] of a query at position pos in sequence b
 * (empty when *lo > *hi). */
static inline void kv_attn_visible_range(const struct kv_attn_params *p, int32_t b,
                                         int64_t pos, int64_t *lo, int64_t *hi)
{
    int64_t l = p->pad != NULL ? p->pad[b] : 0;
    if (p->window > 0 && pos - p->window + 1 > l)
        l = pos - p->window + 1;
    *lo = l;
    *hi = pos;
}

/* Tokens [*t0, *t1) of span s whose positions lie in [lo, hi]. */
static inline void kv_span_token_range(const struct kv_span *s, int64_t lo, int64_t hi,
                                       int32_t *t0, int32_t *t1)
{
    int64_t a = lo - s->pos0, e = hi - s->pos0 + 1;
    if (a < 0)
        a = 0;
    if (e > s->n_tokens)
        e = s->n_tokens;
    if (e < a)
        e = a;
    *t0 = (int32_t)a;
    *t1 = (int32_t)e;
}

#endif /* KV_ATTENTION_IMPL_H */
