/*
 * kv_attention.h - the one attention kernel, over a list of KV spans.
 *
 * The kernel never knows which cache strategy it serves: a strategy exposes
 * its storage as spans (one for a dynamic cache, two for a ring buffer, a
 * quantized block plus a full-precision residual for the quantized cache),
 * and the kernel masks by absolute position. Decode (one query per
 * sequence) and prefill (many queries) are the same call.
 *
 * Layouts (all row-major):
 *   q, out : (batch, n_q, n_heads, head_dim) floats
 *   a span : for sequence b, kv head h, token t of the span, the key row is at
 *            (const char *)k + b*seq_stride + h*head_stride + t*row_stride,
 *            and is head_dim elements of the span's dtype; the same strides
 *            locate value rows in v. For quantized spans the qparams of row
 *            (b, h, t), head_dim/group of them, start at
 *            (const char *)k_qp + b*qp_seq_stride + h*qp_head_stride
 *                               + t*qp_row_stride   (same for v_qp).
 *   Token t of a span has absolute position pos0 + t.
 *
 * Masking, for the query of sequence b at absolute position p (query i of
 * the call has position q_pos0 + i) and a key at absolute position s:
 *   visible  <=>  s <= p                      (causal)
 *             &&  (window == 0 || s > p - window)   (sliding window)
 *             &&  s >= pad[b]                 (left padding of sequence b)
 * A query that sees no key at all (a padded query) gets an all-zero output.
 *
 * Grouped-query attention: query head h reads kv head h / (n_heads/n_kv_heads).
 */
#ifndef KV_ATTENTION_H
#define KV_ATTENTION_H

#include "kv_common.h"

struct kv_span {
    enum kv_dtype dtype;
    const void *k;
    const void *v;
    const struct kv_qparams *k_qp; /* NULL for f32 */
    const struct kv_qparams *v_qp; /* NULL for f32 */
    int32_t n_tokens;
    int32_t pos0;           /* absolute position of token 0 of the span */
    size_t row_stride;      /* bytes between consecutive tokens          */
    size_t head_stride;     /* bytes between kv heads                    */
    size_t seq_stride;      /* bytes between batch sequences             */
    size_t qp_row_stride;   /* bytes, quantized spans only               */
    size_t qp_head_stride;
    size_t qp_seq_stride;
};

struct kv_attn_params {
    int32_t batch;
    int32_t n_q;        /* queries per sequence in this call (1 = decode) */
    int32_t n_heads;
    int32_t n_kv_heads; /* divides n_heads */
    int32_t head_dim;
    int32_t group;      /* quantization group along head_dim (quantized spans) */
    int32_t q_pos0;     /* absolute position of query 0 (same for every sequence) */
    int32_t window;     /* 0 = no sliding window */
    const int32_t *pad; /* (batch) left-padding length per sequence, or NULL */
    float scale;        /* usually 1/sqrt(head_dim) */
    int32_t n_threads;  /* OpenMP threads to use (>= 1) */
};

/*
 * The mask of the header comment as a predicate: 1 if the query of sequence
 * b at absolute position qpos sees the key at absolute position kpos. The
 * kernel applies the same rule as an interval of positions
 * (kv_attention_impl.h, kv_attn_visible_range); callers that show or check
 * masks (the demo) use this one so they cannot drift from it.
 */
static inline int kv_attn_key_visible(const struct kv_attn_params *p, int32_t b, int64_t qpos,
                                      int64_t kpos)
{
    return kpos <= qpos && (p->window <= 0 || kpos > qpos - p->window) &&
           (p->pad == NULL || kpos >= p->pad[b]);
}

/* Checks the params and spans against each other (shapes, dtypes, group). */
enum kv_status kv_attn_check(const struct kv_attn_params *p,
                             const struct kv_span *spans, int32_t n_spans);

/*
 * Bytes of scratch the kernel needs for calls with these params; depends on
 * batch, n_q, heads, head_dim and threads, never on the number of keys, so
 * a caller sizes it once up front and the decode loop never allocates.
 */
size_t kv_attn_workspace_bytes(const struct kv_attn_params *p);

/*
 * out (batch, n_q, n_heads, head_dim) = softmax(q K^T * scale + mask) V
 * over all keys of all spans. ws must hold kv_attn_workspace_bytes(p) bytes
 * (64-byte aligned). Prefill tiles over keys with an online softmax, so no
 * (n_q x n_keys) matrix is ever stored; decode streams each K/V row once for
 * the whole group of query heads that shares it.
 */
enum kv_status kv_attn(float *out, const float *q, const struct kv_attn_params *p,
                       const struct kv_span *spans, int32_t n_spans,
                       void *ws, size_t ws_bytes);

/*
 * Scalar reference twin: the same contract, obviously right and slow
 * (double accumulation, full softmax per query, one key at a time). Needs no
 * workspace. Used by tests and by `kvlab kernel` for comparison.
 */
enum kv_status kv_attn_ref(float *out, const float *q, const struct kv_attn_params *p,
                           const struct kv_span *spans, int32_t n_spans);

/*
 * Number of visible (query, key) pairs summed over the batch, computed in
 * closed form from the positions (no pass over the data). The attention
 * FLOPs of a call are 4 * head_dim * n_heads * pairs (2 for QK^T, 2 for PV).
 */
int64_t kv_attn_visible_pairs(const struct kv_attn_params *p,
                              const struct kv_span *spans, int32_t n_spans);

/* K+V bytes (codes + qparams) that the spans hold, all sequences and heads. */
size_t kv_attn_span_bytes(const struct kv_attn_params *p,
                          const struct kv_span *spans, int32_t n_spans);

#endif /* KV_ATTENTION_H */
