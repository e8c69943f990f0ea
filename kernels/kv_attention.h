/*
 * kv_attention.h - the one attention kernel, over a view of KV spans.
 *
 * The kernel never knows which cache strategy it serves: a strategy exposes
 * its storage as a kv_view, a list of spans (one for a dynamic cache, two for
 * a ring buffer, a quantized block plus a full-precision residual for the
 * quantized cache, one per page or one paged span for a paged cache) and a
 * description of the mask, and the kernel masks by absolute position. Decode
 * (one query per sequence) and prefill (many queries) are the same call.
 *
 * Layouts (all row-major):
 *   q, out : (batch, n_q, n_heads, head_dim) floats
 *   a span : tokens 0 .. n_tokens-1 at absolute positions pos0 + t, with a K
 *            and a V descriptor (kv_tensor) each: its own dtype and, for
 *            quantized dtypes, its own group, axis and qparams. For sequence
 *            b, kv head h, token t, the row of a descriptor is head_dim
 *            elements at
 *              contiguous (page_tokens == 0):
 *                (const char *)data + b*seq_stride + h*head_stride + t*row_stride
 *              paged (page_tokens == P > 0): token t lives in page t / P of
 *                sequence b's page table tab = pages + b*table_stride,
 *                (const char *)tab[t / P] + b*seq_stride + h*head_stride
 *                                         + (t % P)*row_stride
 *                (table_stride 0: one table for the whole batch, each page
 *                holding every sequence seq_stride apart; table_stride > 0:
 *                a table per sequence, pages of one sequence each, seq_stride
 *                usually 0, and sequences may share pages, as a paged cache
 *                with prefix sharing does)
 *            and its qparams (qp / qp_pages and the qp_*_stride fields, same
 *            rule and table_stride) hold, per token (KV_QAXIS_TOKEN),
 *            head_dim/group pairs for row t at qp_row index t, or per channel (KV_QAXIS_CHANNEL),
 *            head_dim pairs for the block of tokens t / group at qp_row index
 *            t / group (paged: (t % P) / group in page t / P, and group
 *            divides P). Codes are laid out as kv_quant.h says.
 *
 * Positions. A span's token t is at absolute position pos0 + t, unless the
 * span carries a position table (pos != NULL, pos0 then unused): token t of
 * (sequence b, kv head h) is at pos[b*pos_seq_stride + h*pos_head_stride + t]
 * (int32 elements), in any order. A cache that evicts by score (h2o) keeps
 * the survivors where they are and says where each came from; the kernel
 * masks such a span key by key instead of by interval.
 *
 * Attention mass (optional output, kv_attn_params.mass): for each query head
 * and each key of the view, the attention probability it received, summed
 * over the call's queries:
 *   mass[(b*n_heads + hq)*n_keys + j] = sum_i softmax_i(j)
 * where j numbers the view's keys in span order (span 0's tokens, then span
 * 1's, ...), n_keys = the sum of the spans' n_tokens, and a key no query
 * sees gets 0. A strategy that evicts by accumulated attention (h2o) asks
 * for it; without it (mass NULL) nothing is computed or written.
 *
 * Masking, for the query of sequence b at absolute position p (query i of
 * the call has position q_pos0 + i) and a key at absolute position s. The
 * mask is always causal; a kv_mask adds the rest (all 0 / NULL: causal only):
 *   visible  <=>  s <= p                                    (causal)
 *             &&  s >= pad[b]                               (left padding)
 *             &&  (window == 0 || s > p - window || s < n_sink)
 *                                          (sliding window, attention sinks)
 * So the visible positions are at most two intervals, the sinks
 * [pad, n_sink) and the window (p - window, p]. A query that sees no key at
 * all (a padded query) gets an all-zero output.
 *
 * Grouped-query attention: query head h reads kv head h / (n_heads/n_kv_heads).
 */
#ifndef KV_ATTENTION_H
#define KV_ATTENTION_H

#include "kv_common.h"

/* One side (keys or values) of a span; see the header comment. */
struct kv_tensor {
    enum kv_dtype dtype;
    const void *data;             /* contiguous spans: row 0 of (b 0, h 0) */
    const void *const *pages;     /* paged spans: (pages) base of each page */
    size_t row_stride;            /* bytes between consecutive tokens */
    size_t head_stride;           /* bytes between kv heads */
    size_t seq_stride;            /* bytes between batch sequences */
    size_t table_stride;          /* paged spans: entries of pages (and qp_pages)
                                     between sequences' tables; 0: one table */
    /* quantized dtypes (kv_type_traits[dtype].has_qparams) only */
    enum kv_qaxis axis;
    int32_t group;                /* TOKEN: elements per pair; CHANNEL: tokens */
    const struct kv_qparams *qp;  /* contiguous spans */
    const void *const *qp_pages;  /* paged spans */
    size_t qp_row_stride;         /* bytes between consecutive qparams rows */
    size_t qp_head_stride;
    size_t qp_seq_stride;
};

struct kv_span {
    struct kv_tensor k, v;
    int32_t n_tokens;
    int32_t pos0;        /* absolute position of token 0 of the span */
    int32_t page_tokens; /* 0: contiguous; > 0: tokens per page (paged) */
    /* NULL: positions pos0 .. pos0 + n_tokens - 1. Else the position of each
     * token per (sequence, kv head), strides in int32 elements (header). */
    const int32_t *pos;
    size_t pos_seq_stride, pos_head_stride;
};

/* Absolute position of token t of span s for (sequence b, kv head h); -1
 * for a NULL span. The position table is read only for t in [0, n_tokens)
 * and b, h >= 0 (other indices get pos0 + t, the arithmetic of a span
 * without a table); b and h must lie within the view's batch and kv heads,
 * which a span alone does not know (kv_attn_check holds params to them). */
static inline int64_t kv_span_pos(const struct kv_span *s, int32_t b, int32_t h, int32_t t)
{
    if (s == NULL)
        return -1;
    if (s->pos == NULL || t < 0 || t >= s->n_tokens || b < 0 || h < 0)
        return (int64_t)s->pos0 + t;
    return s->pos[(size_t)b * s->pos_seq_stride + (size_t)h * s->pos_head_stride + (size_t)t];
}

/* Which keys each query sees, besides causality (header comment). */
struct kv_mask {
    int32_t window;      /* 0 = no sliding window */
    int32_t n_sink;      /* positions < n_sink stay visible past the window */
    const int32_t *pad;  /* (batch) left-padding length per sequence, or NULL */
};

/* What a cache exposes for one layer: spans in position order (a span with
 * a position table may hold any positions), and the mask its storage needs
 * (kv_cache_view fills it).
 *
 * The shape of the storage behind the spans: the sequences, kv heads and
 * elements per row its strides and page tables hold. kv_cache_view fills
 * them from the cache, and kv_attn_check refuses params whose batch,
 * n_kv_heads or head_dim differ (KV_ERR_INVALID), so no call can address a
 * sequence, head or element the storage lacks. 0 means not stated (a view
 * built by hand from the caller's own arrays, which then answers for its
 * strides); a negative count is invalid. Its fields keep their order, the
 * layout callers are built against, at the cost of 8 bytes of padding (512
 * in kv_attn_many's 64 views on the stack). */
struct kv_view { // NOLINT(clang-analyzer-optin.performance.Padding)
    const struct kv_span *spans; /* (n_spans) */
    int32_t n_spans;
    struct kv_mask mask;
    int32_t batch;      /* sequences of the storage (0: not stated) */
    int32_t n_kv_heads; /* kv heads of the storage (0: not stated) */
    int32_t head_dim;   /* elements of a row (0: not stated) */
};

struct kv_attn_params {
    int32_t batch;
    int32_t n_q;        /* queries per sequence in this call (1 = decode) */
    int32_t n_heads;
    int32_t n_kv_heads; /* divides n_heads */
    int32_t head_dim;
    int32_t q_pos0;     /* absolute position of query 0 (same for every sequence) */
    float scale;        /* usually 1/sqrt(head_dim) */
    int32_t n_threads;  /* OpenMP threads to use (>= 1) */
    /* Nonzero: the caller knows the K/V rows were evicted from the caches
     * since it last read them (a model's step streams more weight bytes
     * than the L3 between two calls of a layer), so a decode call reads
     * them as rows from DRAM whatever their size. 0: judged by their size
     * against the L3. Changes speed, never a result. */
    int32_t evicted;
    /* Optional output: the attention mass per (sequence, query head, key)
     * (header comment), mass_len floats, at least batch * n_heads * n_keys.
     * NULL: not computed (the default; costs nothing). */
    float *mass;
    size_t mass_len;
};

/* Keys of a view: the sum of its spans' n_tokens (the mass's n_keys); 0
 * for a NULL view or one without spans. */
static inline int64_t kv_view_keys(const struct kv_view *v)
{
    int64_t n = 0;
    for (int32_t i = 0; v != NULL && v->spans != NULL && i < v->n_spans; i++)
        n += v->spans[i].n_tokens;
    return n;
}

/*
 * The mask of the header comment as a predicate: 1 if the query of sequence
 * b at absolute position qpos sees the key at absolute position kpos. The
 * kernel applies the same rule as intervals of positions
 * (kv_attention_impl.h, kv_mask_ranges); the scalar reference and callers
 * that show or check masks (the demo) use this one. A NULL mask is the
 * causal mask alone; b indexes the mask's pad (b < 0: no padding applies).
 */
static inline int kv_attn_key_visible(const struct kv_mask *m, int32_t b, int64_t qpos,
                                      int64_t kpos)
{
    if (m == NULL)
        return kpos <= qpos;
    return kpos <= qpos && (m->pad == NULL || b < 0 || kpos >= m->pad[b]) &&
           (m->window <= 0 || kpos > qpos - m->window || kpos < m->n_sink);
}

/*
 * Checks the params and the view against each other (shapes, dtypes, groups,
 * strides, alignment, the mask) (kv_attn_check.c). KV_ERR_INVALID for a bad
 * argument.
 */
enum kv_status kv_attn_check(const struct kv_attn_params *p, const struct kv_view *v);

/*
 * Bytes of scratch the kernel needs for calls with these params; depends on
 * batch, n_q, heads, head_dim and threads, never on the number of keys or on
 * the view's dtypes and groups, so a caller sizes it once up front and the
 * decode loop never allocates.
 */
size_t kv_attn_workspace_bytes(const struct kv_attn_params *p);

/*
 * out (batch, n_q, n_heads, head_dim) = softmax(q K^T * scale + mask) V
 * over all keys of all spans of v. ws must hold kv_attn_workspace_bytes(p)
 * bytes (64-byte aligned). Prefill tiles over keys with an online softmax, so
 * no (n_q x n_keys) matrix is ever stored; decode streams each K/V row once
 * for the whole group of query heads that shares it.
 */
enum kv_status kv_attn(float *out, const float *q, const struct kv_attn_params *p,
                       const struct kv_view *v, void *ws, size_t ws_bytes);

/*
 * n calls of kv_attn at once, call i writing out[i] from q[i], p[i] and
 * v[i]: what a serving iteration runs, one call per request's cache. Where
 * every call decodes (n_q == 1) without a mass output and with the same
 * n_threads, and ws holds kv_attn_many_workspace_bytes(p, n), the calls'
 * (sequence, kv head) chunks go to the thread team as ONE job: with one
 * job per call the team met at a barrier per call, n per layer, and a core
 * another program took for a moment held up every call it was in. Any
 * other set of calls runs one by one (each needs its own
 * kv_attn_workspace_bytes then). The results equal the n calls' bit for
 * bit. KV_ERR_INVALID for n < 1 or n > KV_ATTN_MANY_MAX; a call that
 * kv_attn refuses refuses the set, with nothing written.
 */
#define KV_ATTN_MANY_MAX 64
size_t kv_attn_many_workspace_bytes(const struct kv_attn_params *p, int32_t n);
enum kv_status kv_attn_many(float *const *out, const float *const *q,
                            const struct kv_attn_params *p, const struct kv_view *v, int32_t n,
                            void *ws, size_t ws_bytes);

/*
 * dst (head_dim floats) <- row t of one side of span s (side is &s->k or
 * &s->v) for sequence b and kv head h, whatever its dtype, quantization
 * axis or paging: what a teaching tool or a test reads to show a cached
 * key or value. KV_ERR_INVALID for NULL pointers, a side that is not one of
 * s's, b, h or t negative, t past the span or head_dim < 1; b and h must lie
 * inside the storage the span describes (a span does not carry its counts:
 * the view does, struct kv_view).
 */
enum kv_status kv_span_row_float(float *dst, const struct kv_span *s, const struct kv_tensor *side,
                                 int32_t b, int32_t h, int32_t t, int32_t head_dim);

/* The scales and minimums that row t of a quantized side uses (for sequence
 * b, kv head h), and how many (*n: head_dim / group along tokens, head_dim
 * per channel); NULL (and *n = 0) for a side without them or bad arguments
 * (those of kv_span_row_float). */
const struct kv_qparams *kv_span_row_qparams(const struct kv_span *s, const struct kv_tensor *side,
                                             int32_t b, int32_t h, int32_t t, int32_t head_dim,
                                             int32_t *n);

/*
 * Scalar reference twin: the same contract, obviously right and slow
 * (double accumulation, full softmax per query, one key at a time through
 * kv_attn_key_visible and the dtype's to_float_row). Needs no workspace.
 * Used by tests and by `kvlab kernel` for comparison.
 */
enum kv_status kv_attn_ref(float *out, const float *q, const struct kv_attn_params *p,
                           const struct kv_view *v);

/* ------------------------------------------------------------------------ */
/* Accounting (kv_attn_check.c)                                             */

/*
 * Number of visible (query, key) pairs summed over the batch, computed in
 * closed form from the positions (no pass over the data; a span with a
 * position table is counted key by key, as the mean over kv heads, exact
 * when every head sees as many keys, as an evicting cache's heads do). The
 * attention FLOPs of a call are 4 * head_dim * n_heads * pairs (2 for QK^T,
 * 2 for PV).
 */
int64_t kv_attn_visible_pairs(const struct kv_attn_params *p, const struct kv_view *v);

/* K+V bytes (codes + qparams, and position tables) that the spans hold, all
 * sequences and heads. */
size_t kv_attn_span_bytes(const struct kv_attn_params *p, const struct kv_view *v);

#endif /* KV_ATTENTION_H */
