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

/* ------------------------------------------------------------------------ */
/* Decode row kernels (kv_attention_rows.c)                                 */

#define KV_ATTN_DEC_KB 64 /* decode: key rows per online-softmax block */

/* Everything a decode block needs about one (sequence, kv head, span). */
struct kv_attn_job {
    enum kv_dtype dt;
    int32_t g, d, group, ng;
    int fast;               /* the SIMD path applies to this dtype and shape */
    int wide;               /* and the AVX-512 one (quantized spans) */
    int tile;               /* GQA: dequantize each block once into L1 */
    int fuse;               /* GQA: dequantize in registers for all g heads */
    const char *k, *v;      /* token 0 of the span for this (b, h) */
    const char *kqp, *vqp;  /* its qparams (quantized spans) */
    size_t stride, qp_stride;
    const float *qs;        /* (g, d) scaled queries of the group */
    const float *qsum;      /* (g, ng) per-group sums of qs */
};

/* Fills J for span s, sequence b, kv head h (g heads per kv head, ng groups
 * per row; qs and qsum of the group). */
void kv_attn_job_init(struct kv_attn_job *J, const struct kv_attn_params *p,
                      const struct kv_span *s, int32_t b, int32_t h, int32_t g, int32_t ng,
                      const float *qs, const float *qsum);

/* sc (g, KV_ATTN_DEC_KB) <- qs . k_row(t0 + j) for j < nb (scores, scaled q) */
void kv_attn_rows_scores(float *sc, const struct kv_attn_job *J, int32_t t0, int32_t nb);

/*
 * acc_i (d) += sum_j pr[i][j] * v_row(t0 + j) for each head i of the group
 * (acc_i at acc + i*acc_stride). Quantized rows may instead add pr*scale_g *
 * codes to acc_i and pr*min_g to msum (g, ng), which the caller folds in at
 * the end; w (KV_ATTN_DEC_KB * ng floats) is scratch.
 */
void kv_attn_rows_pv(float *acc, size_t acc_stride, float *msum, float *w, const float *pr,
                     const struct kv_attn_job *J, int32_t t0, int32_t nb);

/* dst (nb, d) <- dequantized K (is_v = 0) or V rows t .. t+nb-1 of a
 * quantized job (the GQA tile path: formed once, read by g heads). */
void kv_attn_rows_dequant(float *dst, const struct kv_attn_job *J, int32_t t, int32_t nb,
                          int is_v);

#endif /* KV_ATTENTION_IMPL_H */
