/*
 * kv_store.h - private helpers shared by the strategies that keep float
 * rows (f32, or f16 / bf16 with --dtype): the one storage layout, the copy
 * that transposes the model's layout into it (converting each row once),
 * and the span that exposes it to the attention kernel.
 *
 * The design decision: every strategy that keeps history stores, per layer,
 *     K, V : (batch, n_kv_heads, cap, head_dim) elements of its dtype
 * so the tokens of one (sequence, kv head) are contiguous and the kernel
 * streams them with a fixed row stride (head_dim * 4 bytes in f32, * 2 in
 * f16 and bf16). The model hands tokens as (batch, n_new, n_kv_heads,
 * head_dim) floats, so every write transposes, and a 16-bit store rounds
 * each row there, once; the kernel reads the 16-bit rows directly.
 * Growing a store (dynamic, dynamic-concat) is a copy of each (sequence,
 * head) run of rows into a bigger buffer of the same layout; the state and
 * every method of those two strategies except update and bytes_for live
 * here, crop, fork and reorder included.
 *
 * Not part of the public interface: only the strategy files include it.
 */
#ifndef KV_STORE_H
#define KV_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "strategy.h"

/* ------------------------------------------------------------------------ */
/* Sizes                                                                    */

/* Smallest capacity a growing store starts with, in tokens. */
#define KV_STORE_MIN_CAP 16

/*
 * *out = bytes of ONE of K or V holding `cap` tokens of `row_bytes` bytes per
 * (sequence, kv head), i.e. batch * n_kv_heads * cap * row_bytes. Sizes past
 * PTRDIFF_MAX / 2 (so that K and V together still fit an object) count as
 * overflow: no allocation is attempted for them.
 */
static inline enum kv_status kv_store_bytes(size_t *out, const struct kv_cache_config *cfg,
                                            size_t cap, size_t row_bytes)
{
    size_t f[4] = {(size_t)cfg->batch, (size_t)cfg->n_kv_heads, cap, row_bytes};
    size_t b;
    if (kv_mul_sizes(&b, 4, f) != KV_OK || b > (size_t)PTRDIFF_MAX / 2)
        return KV_ERR_OVERFLOW;
    *out = b;
    return KV_OK;
}

/* Bytes of one row of one kv head in dtype dt (f32, f16, bf16). */
static inline size_t kv_store_row_bytes_as(const struct kv_cache_config *cfg, enum kv_dtype dt)
{
    return kv_dtype_row_bytes(dt, cfg->head_dim);
}

/* Bytes of one f32 row of one kv head. */
static inline size_t kv_store_row_bytes(const struct kv_cache_config *cfg)
{
    return kv_store_row_bytes_as(cfg, KV_DTYPE_F32);
}

/* Bytes of one token across the whole batch, K and V, in dt. */
static inline size_t kv_store_token_bytes_as(const struct kv_cache_config *cfg, enum kv_dtype dt)
{
    /* cannot overflow: kv_cache_create checked layers*batch*heads*head_dim*8 */
    return 2 * (size_t)cfg->batch * (size_t)cfg->n_kv_heads * kv_store_row_bytes_as(cfg, dt);
}

/* The same in f32. */
static inline size_t kv_store_token_bytes(const struct kv_cache_config *cfg)
{
    return kv_store_token_bytes_as(cfg, KV_DTYPE_F32);
}

/* *bytes = n_layers * tokens * one token's K+V bytes in dt (bytes_for of
 * the stores), KV_ERR_OVERFLOW past size_t. */
static inline enum kv_status kv_store_layers_bytes_as(size_t *bytes,
                                                      const struct kv_cache_config *cfg,
                                                      enum kv_dtype dt, size_t tokens)
{
    size_t f[3] = {(size_t)cfg->n_layers, tokens, kv_store_token_bytes_as(cfg, dt)};
    return kv_mul_sizes(bytes, 3, f);
}

static inline enum kv_status kv_store_layers_bytes(size_t *bytes,
                                                   const struct kv_cache_config *cfg,
                                                   size_t tokens)
{
    return kv_store_layers_bytes_as(bytes, cfg, KV_DTYPE_F32, tokens);
}

/* ------------------------------------------------------------------------ */
/* The storage dtype parameter (dynamic, static, sliding)                   */

/* --dtype f32|f16|bf16: one table entry, the same in every strategy that
 * stores float rows, so the CLI's one --dtype flag sets them all. The
 * names are the dtypes' kv_type_traits names (a test checks). */
static const int32_t kv_store_dtype_choices[] = {KV_DTYPE_F32, KV_DTYPE_F16, KV_DTYPE_BF16};
static const char *const kv_store_dtype_names[] = {"f32", "f16", "bf16"};
#define KV_STORE_DTYPE_PARAM(STRUCT, FIELD)                                                    \
    {.name = "dtype", .flag = "--dtype", .type = KV_PARAM_CHOICE,                            \
     .choices = kv_store_dtype_choices, .names = kv_store_dtype_names, .n_choices = 3,       \
     .def = KV_DTYPE_F32,                                                                    \
     .help = "element type of the stored rows: f32, f16 or bf16 (rounded once, on append)", \
     .scales_memory = 1, .offset = offsetof(STRUCT, FIELD)}

/* Presets "NAME-f16" and "NAME-bf16" of a strategy with that parameter;
 * SWEEP 1 makes them series of the default sweep. */
#define KV_STORE_DTYPE_PRESETS(NAME, SWEEP)                                                  \
    {.name = NAME "-f16", .params = "dtype=f16", .sweep = (SWEEP)},                          \
        {.name = NAME "-bf16", .params = "dtype=bf16", .sweep = (SWEEP)}

/* One line for such a strategy: its description, "(f16 rows)" added for a
 * 16-bit store. */
static inline int kv_store_dtype_describe(const char *description, enum kv_dtype dt, char *buf,
                                          size_t n)
{
    if (dt == KV_DTYPE_F32)
        return snprintf(buf, n, "%s", description);
    return snprintf(buf, n, "%s (%s rows)", description, kv_type_traits[dt].name);
}

/* The CSV label of such a strategy: its name, "-f16" or "-bf16" added. */
static inline int kv_store_dtype_label(const char *name, enum kv_dtype dt, char *buf, size_t n)
{
    if (dt == KV_DTYPE_F32)
        return snprintf(buf, n, "%s", name);
    return snprintf(buf, n, "%s-%s", name, kv_type_traits[dt].name);
}

/*
 * Capacity a growing store moves to when it must hold `needed` tokens:
 * next_pow2(max(KV_STORE_MIN_CAP, needed)), so appends are amortised O(1).
 * Clamped to INT32_MAX (positions are int32), where pow2 would not fit.
 */
static inline int32_t kv_store_grow_cap(int32_t needed)
{
    int64_t c = KV_STORE_MIN_CAP;
    while (c < needed)
        c *= 2;
    return c > INT32_MAX ? INT32_MAX : (int32_t)c;
}

/* ------------------------------------------------------------------------ */
/* Copies                                                                   */

/*
 * dst (batch, n_kv_heads, dst_cap, head_dim) rows [t0, t0+n) in dtype dt
 *   <- src (batch, n_src, n_kv_heads, head_dim) f32 tokens [s0, s0+n),
 * each row copied (f32) or rounded (f16, bf16: the dtype's from_float_row).
 */
static inline void kv_store_put_as(void *dst, enum kv_dtype dt, int32_t dst_cap, int32_t t0,
                                   const float *src, int32_t n_src, int32_t s0, int32_t n,
                                   const struct kv_cache_config *cfg)
{
    const size_t hd = (size_t)cfg->head_dim, nh = (size_t)cfg->n_kv_heads;
    const size_t row = kv_store_row_bytes_as(cfg, dt);
    const struct kv_type_traits *tr = &kv_type_traits[dt];
    KV_ASSERT(!tr->has_qparams);
    for (size_t b = 0; b < (size_t)cfg->batch; b++)
        for (size_t h = 0; h < nh; h++)
            for (size_t t = 0; t < (size_t)n; t++) {
                char *d = (char *)dst + ((b * nh + h) * (size_t)dst_cap + (size_t)t0 + t) * row;
                const float *x = src + ((b * (size_t)n_src + (size_t)s0 + t) * nh + h) * hd;
                if (dt == KV_DTYPE_F32)
                    memcpy(d, x, row);
                else
                    tr->from_float_row(d, NULL, x, cfg->head_dim, 1);
            }
}

/* The same into f32 rows. */
static inline void kv_store_put(float *dst, int32_t dst_cap, int32_t t0, const float *src,
                                int32_t n_src, int32_t s0, int32_t n,
                                const struct kv_cache_config *cfg)
{
    kv_store_put_as(dst, KV_DTYPE_F32, dst_cap, t0, src, n_src, s0, n, cfg);
}

/*
 * dst (batch, n_kv_heads, dst_cap, row) rows [d0, d0+n)
 *   <- src (batch, n_kv_heads, src_cap, row) rows [s0, s0+n),
 * `row` bytes per row. dst and src may be the same buffer (memmove).
 */
static inline void kv_store_move(void *dst, int32_t dst_cap, int32_t d0, const void *src,
                                 int32_t src_cap, int32_t s0, int32_t n, size_t row,
                                 const struct kv_cache_config *cfg)
{
    const size_t nh = (size_t)cfg->n_kv_heads;
    if (n <= 0)
        return;
    for (size_t b = 0; b < (size_t)cfg->batch; b++)
        for (size_t h = 0; h < nh; h++)
            memmove((char *)dst + ((b * nh + h) * (size_t)dst_cap + (size_t)d0) * row,
                    (const char *)src + ((b * nh + h) * (size_t)src_cap + (size_t)s0) * row,
                    (size_t)n * row);
}

/* ------------------------------------------------------------------------ */
/* Spans                                                                    */

/* A descriptor of float rows (f32, f16, bf16) over data with the given strides. */
static inline struct kv_tensor kv_store_rows(enum kv_dtype dt, const void *data, size_t row,
                                             size_t head, size_t seq)
{
    return (struct kv_tensor){.dtype = dt, .data = data, .row_stride = row,
                              .head_stride = head, .seq_stride = seq};
}

static inline struct kv_tensor kv_store_f32(const float *data, size_t row, size_t head,
                                            size_t seq)
{
    return kv_store_rows(KV_DTYPE_F32, data, row, head, seq);
}

/* A span over rows [t0, t0+n) of stores k, v of dtype dt and capacity cap. */
static inline struct kv_span kv_store_span_as(const void *k, const void *v, enum kv_dtype dt,
                                              int32_t cap, int32_t t0, int32_t n, int32_t pos0,
                                              const struct kv_cache_config *cfg)
{
    const size_t row = kv_store_row_bytes_as(cfg, dt);
    const size_t off = (size_t)t0 * row;
    const size_t head = (size_t)cap * row, seq = (size_t)cfg->n_kv_heads * head;
    return (struct kv_span){
        .k = kv_store_rows(dt, (const char *)k + off, row, head, seq),
        .v = kv_store_rows(dt, (const char *)v + off, row, head, seq),
        .n_tokens = n,
        .pos0 = pos0,
    };
}

/* The same over f32 stores. */
static inline struct kv_span kv_store_span(const float *k, const float *v, int32_t cap,
                                           int32_t t0, int32_t n, int32_t pos0,
                                           const struct kv_cache_config *cfg)
{
    return kv_store_span_as(k, v, KV_DTYPE_F32, cap, t0, n, pos0, cfg);
}

/* A span over the model's own (batch, n_new, n_kv_heads, head_dim) arrays. */
static inline struct kv_span kv_store_span_model(const float *k_new, const float *v_new,
                                                 int32_t n_new, int32_t pos0,
                                                 const struct kv_cache_config *cfg)
{
    const size_t head = kv_store_row_bytes(cfg);
    const size_t row = (size_t)cfg->n_kv_heads * head;
    return (struct kv_span){
        .k = kv_store_f32(k_new, row, head, (size_t)n_new * row),
        .v = kv_store_f32(v_new, row, head, (size_t)n_new * row),
        .n_tokens = n_new,
        .pos0 = pos0,
    };
}

/* ------------------------------------------------------------------------ */
/* A ring of slots (sliding, sinks, h2o's recent window)                    */

/*
 * The storage of a strategy kept layer by layer (sliding, sinks, h2o): *buf
 * gets n_layers blocks of layer_bytes, *meta n_layers zeroed records of
 * meta_size bytes. Both or neither: on an error nothing is held.
 * kv_layered_free releases both and clears the pointers.
 */
static inline enum kv_status kv_layered_alloc(char **buf, void **meta, size_t layer_bytes,
                                              size_t meta_size, int32_t n_layers)
{
    size_t total, mbytes;
    if (kv_mul_size(&total, layer_bytes, (size_t)n_layers) != KV_OK ||
        total > (size_t)PTRDIFF_MAX ||
        kv_mul_size(&mbytes, (size_t)n_layers, meta_size) != KV_OK)
        return KV_ERR_OVERFLOW;
    void *m = kv_alloc(mbytes);
    if (m == NULL)
        return KV_ERR_NOMEM;
    char *b = kv_alloc(total);
    if (b == NULL) {
        kv_free(m);
        return KV_ERR_NOMEM;
    }
    *buf = b;
    *meta = m;
    return KV_OK;
}

static inline void kv_layered_free(char **buf, void *meta)
{
    kv_free(*buf);
    kv_free(meta);
    *buf = NULL;
}

/*
 * Stores k, v (batch, n_kv_heads, w, head_dim) of dtype dt used as a ring:
 * position p (p >= base) lives in slot (p - base) % w. kv_ring_put_as
 * writes positions [a, b) of an update (tokens a - pos0 ..) into their
 * slots (rounding 16-bit rows once, there); kv_ring_spans_as fills spans
 * with positions [first, end) (end - first <= w, first >= base) in position
 * order, 0, 1 or 2 spans, and returns how many. kv_ring_put / kv_ring_spans
 * are the same over f32 rings.
 */
static inline void kv_ring_put_as(void *k, void *v, enum kv_dtype dt, int32_t w, int32_t base,
                                  const float *k_new, const float *v_new, int32_t n_new,
                                  int32_t pos0, int32_t a, int32_t b,
                                  const struct kv_cache_config *cfg)
{
    for (int32_t p = a; p < b;) {
        const int32_t slot = (p - base) % w;
        const int32_t run = (b - p < w - slot) ? b - p : w - slot;
        kv_store_put_as(k, dt, w, slot, k_new, n_new, p - pos0, run, cfg);
        kv_store_put_as(v, dt, w, slot, v_new, n_new, p - pos0, run, cfg);
        p += run;
    }
}

static inline void kv_ring_put(float *k, float *v, int32_t w, int32_t base, const float *k_new,
                               const float *v_new, int32_t n_new, int32_t pos0, int32_t a,
                               int32_t b, const struct kv_cache_config *cfg)
{
    kv_ring_put_as(k, v, KV_DTYPE_F32, w, base, k_new, v_new, n_new, pos0, a, b, cfg);
}

static inline int32_t kv_ring_spans_as(struct kv_span *spans, const void *k, const void *v,
                                       enum kv_dtype dt, int32_t w, int32_t base, int32_t first,
                                       int32_t end, const struct kv_cache_config *cfg)
{
    const int32_t held = end - first;
    if (held <= 0)
        return 0;
    const int32_t slot = (first - base) % w;
    if (held <= w - slot) { /* no wrap: one run */
        spans[0] = kv_store_span_as(k, v, dt, w, slot, held, first, cfg);
        return 1;
    }
    const int32_t n1 = w - slot;
    spans[0] = kv_store_span_as(k, v, dt, w, slot, n1, first, cfg);
    spans[1] = kv_store_span_as(k, v, dt, w, 0, held - n1, first + n1, cfg);
    return 2;
}

static inline int32_t kv_ring_spans(struct kv_span *spans, const float *k, const float *v,
                                    int32_t w, int32_t base, int32_t first, int32_t end,
                                    const struct kv_cache_config *cfg)
{
    return kv_ring_spans_as(spans, k, v, KV_DTYPE_F32, w, base, first, end, cfg);
}

/* ------------------------------------------------------------------------ */
/* A growing store (dynamic, dynamic-concat)                                */

/*
 * The state both growing strategies keep. They differ only in the capacity
 * an update moves to (their growth policy): dynamic doubles, dynamic-concat
 * moves to exactly len + n_new on every update, so its cap always equals len.
 * Everything else (init, free, reset, view, accounting) is below, once.
 */
struct kv_grow_layer {
    char *buf;   /* K (batch, n_kv_heads, cap, head_dim) then V, same shape */
    int32_t len; /* tokens held */
    int32_t cap; /* tokens allocated */
};

struct kv_grow_state {
    struct kv_cache_config cfg;
    enum kv_dtype dtype;          /* of the rows: f32, f16 or bf16 */
    size_t row;                   /* bytes of one row of one kv head */
    struct kv_grow_layer *layers; /* (n_layers) */
    size_t copied;                /* bytes written by updates since init/reset */
};

/* Bytes of one token across the batch, K and V, in the store's dtype. */
static inline size_t kv_grow_token_bytes(const struct kv_grow_state *s)
{
    return kv_store_token_bytes_as(&s->cfg, s->dtype);
}

/* V of layer l: right after K, (batch, n_kv_heads, cap, head_dim). */
static inline char *kv_grow_v(const struct kv_grow_state *s, const struct kv_grow_layer *l)
{
    return l->buf + (size_t)s->cfg.batch * (size_t)s->cfg.n_kv_heads * (size_t)l->cap * s->row;
}

/* A store of rows in dtype dt (f32, f16, bf16). */
static inline enum kv_status kv_grow_init_as(void *state, const struct kv_cache_config *cfg,
                                             enum kv_dtype dt)
{
    struct kv_grow_state *s = state;
    s->cfg = *cfg;
    if (dt != KV_DTYPE_F32 && dt != KV_DTYPE_F16 && dt != KV_DTYPE_BF16)
        return KV_ERR_INVALID;
    s->dtype = dt;
    s->row = kv_store_row_bytes_as(cfg, dt);
    size_t bytes;
    if (kv_mul_size(&bytes, (size_t)cfg->n_layers, sizeof *s->layers) != KV_OK)
        return KV_ERR_OVERFLOW;
    s->layers = kv_alloc(bytes);
    return s->layers == NULL ? KV_ERR_NOMEM : KV_OK;
}

/* An f32 store (a strategy without a dtype parameter). */
static inline enum kv_status kv_grow_init(void *state, const struct kv_cache_config *cfg,
                                          const void *params)
{
    (void)params;
    return kv_grow_init_as(state, cfg, KV_DTYPE_F32);
}

/* Frees every layer's storage: a reset cache is indistinguishable from a new one. */
static inline void kv_grow_reset(void *state)
{
    struct kv_grow_state *s = state;
    for (int32_t l = 0; l < s->cfg.n_layers; l++) {
        kv_free(s->layers[l].buf);
        s->layers[l] = (struct kv_grow_layer){0};
    }
    s->copied = 0;
}

static inline void kv_grow_free(void *state)
{
    struct kv_grow_state *s = state;
    if (s->layers == NULL)
        return;
    kv_grow_reset(s);
    kv_free(s->layers);
    s->layers = NULL;
}

/* The checks every update makes first: appends only; positions past
 * cfg.max_len (when it is > 0) are refused with KV_ERR_FULL. */
static inline enum kv_status kv_grow_admit(const struct kv_grow_state *s,
                                           const struct kv_grow_layer *l, int32_t n_new,
                                           int32_t pos0)
{
    if (pos0 != l->len)
        return KV_ERR_INVALID;
    if (s->cfg.max_len > 0 && pos0 + n_new > s->cfg.max_len)
        return KV_ERR_FULL;
    return KV_OK;
}

/*
 * Moves layer l to a new buffer of capacity `cap` (>= its len), copying its
 * len rows of K and V (counted in copied bytes) and freeing the old buffer.
 * The allocation comes first: on failure the layer is unchanged.
 */
static inline enum kv_status kv_grow_realloc(struct kv_grow_state *s, struct kv_grow_layer *l,
                                             int32_t cap)
{
    const size_t row = s->row;
    size_t half;
    enum kv_status st = kv_store_bytes(&half, &s->cfg, (size_t)cap, row);
    if (st != KV_OK)
        return st;
    char *buf = kv_alloc_uninit(2 * half); /* rows are copied or appended before use */
    if (buf == NULL)
        return KV_ERR_NOMEM;
    if (l->len > 0) {
        kv_store_move(buf, cap, 0, l->buf, l->cap, 0, l->len, row, &s->cfg);
        kv_store_move(buf + half, cap, 0, kv_grow_v(s, l), l->cap, 0, l->len, row, &s->cfg);
        s->copied += (size_t)l->len * kv_grow_token_bytes(s);
    }
    kv_free(l->buf);
    l->buf = buf;
    l->cap = cap;
    return KV_OK;
}

/* Writes n_new tokens after the len held (cap >= len + n_new), counted. */
static inline void kv_grow_append(struct kv_grow_state *s, struct kv_grow_layer *l,
                                  const float *k_new, const float *v_new, int32_t n_new)
{
    kv_store_put_as(l->buf, s->dtype, l->cap, l->len, k_new, n_new, 0, n_new, &s->cfg);
    kv_store_put_as(kv_grow_v(s, l), s->dtype, l->cap, l->len, v_new, n_new, 0, n_new, &s->cfg);
    l->len += n_new;
    s->copied += (size_t)n_new * kv_grow_token_bytes(s);
}

static inline int32_t kv_grow_view(const void *state, int32_t layer, struct kv_span *spans,
                                   struct kv_mask *mask)
{
    (void)mask;
    const struct kv_grow_state *s = state;
    const struct kv_grow_layer *l = &s->layers[layer];
    if (l->len == 0)
        return 0;
    spans[0] = kv_store_span_as(l->buf, kv_grow_v(s, l), s->dtype, l->cap, 0, l->len, 0, &s->cfg);
    return 1;
}

static inline int32_t kv_grow_seq_len(const void *state, int32_t layer)
{
    const struct kv_grow_state *s = state;
    return s->layers[layer].len;
}

/* Sum over layers of cap * (one token's K+V bytes): capacity, not length. */
static inline size_t kv_grow_resident_bytes(const void *state)
{
    const struct kv_grow_state *s = state;
    size_t total = 0;
    for (int32_t l = 0; l < s->cfg.n_layers; l++)
        total += (size_t)s->layers[l].cap * kv_grow_token_bytes(s);
    return total;
}

/* Tokens held, and the capacity past them (the growth's slack). */
static inline void kv_grow_stats(const void *state, struct kv_cache_stats *st)
{
    const struct kv_grow_state *s = state;
    st->resident = kv_grow_resident_bytes(state);
    for (int32_t l = 0; l < s->cfg.n_layers; l++)
        st->tokens += (size_t)s->layers[l].len * kv_grow_token_bytes(s);
    st->slack = st->resident - st->tokens;
}

static inline size_t kv_grow_copied_bytes(const void *state)
{
    const struct kv_grow_state *s = state;
    return s->copied;
}

/* Keeps the first len tokens of every layer (the core checked len <= each
 * length); capacity and copied bytes unchanged. */
static inline enum kv_status kv_grow_crop(void *state, int32_t len)
{
    struct kv_grow_state *s = state;
    for (int32_t l = 0; l < s->cfg.n_layers; l++)
        s->layers[l].len = len;
    return KV_OK;
}

/* dst (fresh, empty) <- src's rows, into buffers of the same capacity (the
 * growth schedule continues as src's would); the rows copied count as dst's
 * copied bytes. On failure the core destroys dst. */
static inline enum kv_status kv_grow_fork(void *dst, const void *src)
{
    struct kv_grow_state *d = dst;
    const struct kv_grow_state *s = src;
    for (int32_t l = 0; l < s->cfg.n_layers; l++) {
        const struct kv_grow_layer *sl = &s->layers[l];
        if (sl->cap == 0)
            continue;
        struct kv_grow_layer *dl = &d->layers[l];
        enum kv_status st = kv_grow_realloc(d, dl, sl->cap);
        if (st != KV_OK)
            return st;
        const size_t row = s->row;
        kv_store_move(dl->buf, dl->cap, 0, sl->buf, sl->cap, 0, sl->len, row, &s->cfg);
        kv_store_move(kv_grow_v(d, dl), dl->cap, 0, kv_grow_v(s, sl), sl->cap, 0, sl->len, row,
                      &s->cfg);
        dl->len = sl->len;
        d->copied += (size_t)sl->len * kv_grow_token_bytes(s);
    }
    return KV_OK;
}

/* Sequence b <- sequence src[b] for b < n, every layer, the batch becoming
 * n: into new buffers of n sequences, all allocated before any is written
 * (KV_ERR_NOMEM leaves the cache as it was); the rows written count as
 * copied bytes. */
static inline enum kv_status kv_grow_reorder(void *state, const int32_t *src, int32_t n)
{
    struct kv_grow_state *s = state;
    struct kv_cache_config nc = s->cfg; /* the new shape */
    nc.batch = n;
    const size_t row = s->row, nh = (size_t)nc.n_kv_heads;
    char **bufs = kv_alloc((size_t)nc.n_layers * sizeof *bufs);
    if (bufs == NULL)
        return KV_ERR_NOMEM;
    for (int32_t l = 0; l < nc.n_layers; l++) {
        size_t half;
        if (s->layers[l].cap == 0)
            continue;
        enum kv_status st = kv_store_bytes(&half, &nc, (size_t)s->layers[l].cap, row);
        if (st == KV_OK && (bufs[l] = kv_alloc_uninit(2 * half)) == NULL)
            st = KV_ERR_NOMEM;
        if (st != KV_OK) {
            while (l-- > 0)
                kv_free(bufs[l]);
            kv_free(bufs);
            return st;
        }
    }
    for (int32_t l = 0; l < nc.n_layers; l++) {
        struct kv_grow_layer *g = &s->layers[l];
        if (g->cap == 0)
            continue;
        const size_t seq = nh * (size_t)g->cap * row; /* bytes of one sequence of K */
        const size_t old_half = (size_t)s->cfg.batch * seq, new_half = (size_t)n * seq;
        for (int32_t b = 0; b < n; b++)
            for (int kv = 0; kv < 2; kv++)
                for (size_t h = 0; h < nh; h++)
                    memcpy(bufs[l] + kv * new_half + (size_t)b * seq + h * g->cap * row,
                           g->buf + kv * old_half + (size_t)src[b] * seq + h * g->cap * row,
                           (size_t)g->len * row);
        kv_free(g->buf);
        g->buf = bufs[l];
        s->copied += (size_t)g->len * kv_store_token_bytes_as(&nc, s->dtype);
    }
    kv_free(bufs);
    s->cfg.batch = n;
    return KV_OK;
}

#endif /* KV_STORE_H */
