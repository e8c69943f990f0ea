/*
 * kv_attention_impl.h - private helpers shared by the attention kernel, its
 * argument checks and its scalar reference twin: where a row lives and which
 * keys a query sees.
 *
 * The one idea: span positions are contiguous (token t is at pos0 + t), and
 * a query's visible keys are at most two position intervals (the sinks and
 * the window, kv_mask_ranges), so the keys of a span that a query sees are at
 * most two token intervals. Masking is interval arithmetic, never a per-key
 * test (the reference alone tests key by key, kv_attn_key_visible).
 */
#ifndef KV_ATTENTION_IMPL_H
#define KV_ATTENTION_IMPL_H

#include "kv_attention.h"
#include "kv_quant.h"

/* ------------------------------------------------------------------------ */
/* Addresses                                                                */

/* Byte offsets of (sequence b, kv head h) within a descriptor's rows and
 * within its qparams. */
static inline size_t kv_tensor_off(const struct kv_tensor *x, int32_t b, int32_t h)
{
    return (size_t)b * x->seq_stride + (size_t)h * x->head_stride;
}

static inline size_t kv_tensor_qp_off(const struct kv_tensor *x, int32_t b, int32_t h)
{
    return (size_t)b * x->qp_seq_stride + (size_t)h * x->qp_head_stride;
}

/* Descriptor x as sequence b reads it: with a page table per sequence
 * (table_stride > 0) its pages and qp_pages start at sequence b's table, so
 * the helpers below find a page by t / P alone; otherwise x itself. Callers
 * that address the rows of sequence b go through this first. */
static inline struct kv_tensor kv_tensor_of_seq(const struct kv_tensor *x, int32_t b)
{
    struct kv_tensor y = *x;
    const size_t skip = (size_t)b * x->table_stride;
    if (skip != 0 && y.pages != NULL)
        y.pages += skip;
    if (skip != 0 && y.qp_pages != NULL)
        y.qp_pages += skip;
    return y;
}

/* Row t of descriptor x in a span of `page` tokens per page (0: contiguous),
 * off = kv_tensor_off(x, b, h). */
static inline const char *kv_tensor_row_at(const struct kv_tensor *x, int32_t page, size_t off,
                                           int32_t t)
{
    if (page == 0)
        return (const char *)x->data + off + (size_t)t * x->row_stride;
    return (const char *)x->pages[t / page] + off + (size_t)(t % page) * x->row_stride;
}

/* The qparams of row t (per token: its head_dim/group pairs; per channel:
 * the head_dim pairs of its block of `group` tokens), qoff =
 * kv_tensor_qp_off(x, b, h). */
static inline const char *kv_tensor_qp_at(const struct kv_tensor *x, int32_t page, size_t qoff,
                                          int32_t t)
{
    int32_t i = page == 0 ? t : t % page;
    if (x->axis == KV_QAXIS_CHANNEL)
        i /= x->group;
    const char *base = page == 0 ? (const char *)x->qp : (const char *)x->qp_pages[t / page];
    return base + qoff + (size_t)i * x->qp_row_stride;
}

/* Rows t .. t+run-1 with run <= n that lie in one page (consecutive in
 * memory, row_stride apart): all n for a contiguous span. */
static inline int32_t kv_span_run(const struct kv_span *s, int32_t t, int32_t n)
{
    if (s->page_tokens == 0)
        return n;
    int32_t left = s->page_tokens - t % s->page_tokens;
    return left < n ? left : n;
}

/* dst (d) <- row t of x as floats, either quantization axis, through the
 * dtype's traits (the generic reader: reference, prefill tiles, and decode
 * sides without row kernels of their own). */
static inline void kv_tensor_row_float(float *dst, const struct kv_tensor *x, int32_t page,
                                       size_t off, size_t qoff, int32_t t, int32_t d)
{
    const struct kv_type_traits *tr = &kv_type_traits[x->dtype];
    const char *row = kv_tensor_row_at(x, page, off, t);
    if (!tr->has_qparams) {
        tr->to_float_row(dst, row, NULL, d, 1);
        return;
    }
    const struct kv_qparams *qp = (const struct kv_qparams *)kv_tensor_qp_at(x, page, qoff, t);
    if (x->axis == KV_QAXIS_TOKEN)
        tr->to_float_row(dst, row, qp, d, x->group);
    else
        kv_dequantize_row_channel(dst, row, qp, x->dtype, d);
}

/* ------------------------------------------------------------------------ */
/* Visibility                                                               */

/*
 * Visible key positions of queries at positions p0 .. p1 (p0 <= p1) of
 * sequence b, united: at most two disjoint intervals [lo[i], hi[i]], in
 * ascending order; returns how many (0, 1 or 2). With p0 == p1 that is
 * exactly one query's visible set (the mask of kv_attention.h): the sinks
 * [pad, n_sink) below the window (pad, p0 - window], ..., p1].
 */
static inline int kv_mask_ranges_of(const struct kv_mask *m, int32_t b, int64_t p0, int64_t p1,
                                    int64_t lo[2], int64_t hi[2])
{
    const int64_t pad = m->pad != NULL ? m->pad[b] : 0;
    int64_t wlo = pad;
    if (m->window > 0 && p0 - m->window + 1 > wlo)
        wlo = p0 - m->window + 1;
    int n = 0;
    if (wlo > pad && m->n_sink > 0) {
        int64_t shi = m->n_sink - 1 < p1 ? m->n_sink - 1 : p1; /* last sink */
        if (shi >= pad) {
            if (shi + 1 >= wlo) { /* the sinks reach the window: one interval */
                wlo = pad;
            } else {
                lo[0] = pad;
                hi[0] = shi;
                n = 1;
            }
        }
    }
    if (wlo <= p1) {
        lo[n] = wlo;
        hi[n] = p1;
        n++;
    }
    return n;
}

static inline int kv_mask_ranges(const struct kv_mask *m, int32_t b, int64_t pos, int64_t lo[2],
                                 int64_t hi[2])
{
    return kv_mask_ranges_of(m, b, pos, pos, lo, hi);
}

/* 1 when every key of positions [s_lo, s_hi] is visible to every query at
 * positions p0 .. p1 of sequence b (a prefill tile that needs no masking). */
static inline int kv_mask_block_full(const struct kv_mask *m, int32_t b, int64_t p0, int64_t p1,
                                     int64_t s_lo, int64_t s_hi)
{
    const int64_t pad = m->pad != NULL ? m->pad[b] : 0;
    return s_hi <= p0 && s_lo >= pad &&
           (m->window <= 0 || s_lo > p1 - m->window || s_hi < m->n_sink);
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
