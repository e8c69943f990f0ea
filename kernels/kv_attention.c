/*
 * kv_attention.c - the fast attention kernel over a view of KV spans
 * (kv_attention.h): workspace, decode driver, prefill, entry point.
 *
 * Two shapes of the same contract:
 *  - decode (n_q == 1) is memory-bound: every K and V row is streamed once
 *    for the whole group of query heads that shares it (GQA), in blocks of
 *    DEC_KB rows with an online softmax; the visible keys of each
 *    (sequence, kv head) are cut into split-K chunks so both cores are busy
 *    even with one kv head, and the chunks' partial softmaxes are merged with
 *    a log-sum-exp rescale. The per-block row kernels (scores, weighted
 *    values; AVX-512, AVX2, scalar) are in one file per dtype
 *    (rows_f32.c, rows_q8.c, rows_q4.c, rows_f16.c, rows_bf16.c), bound once
 *    per (span, sequence, kv head) through rows_bind[] (kv_rows.h): quantized
 *    and 16-bit rows are
 *    dequantized in registers, never into a cache-sized buffer. A 64-row
 *    block of a paged span is cut into page runs for the row kernels but
 *    keeps one online-softmax step, so small pages do not shrink it.
 *  - prefill (n_q > 1) is GEMM-bound: a tile of queries (times the heads of a
 *    GQA group) against key tiles, S = Q K^T and O += P V through
 *    cblas_sgemm, online softmax between them, so no n_q x n_keys matrix
 *    exists; key tiles nobody sees are never visited, tiles on the diagonal
 *    are masked. Quantized (and paged) key tiles are dequantized into a
 *    tile buffer first (GEMM-bound, the conversion is small next to the
 *    GEMM). The
 *    tile GEMMs run in the calling OpenMP thread: callers keep OpenBLAS at
 *    one thread (openblas_set_num_threads(1)) so the two do not fight.
 * Masking is interval arithmetic on positions (kv_attention_impl.h).
 * kv_attn never allocates: all scratch comes from the caller's workspace.
 */
#include "kv_rows.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#ifdef __AVX2__
#include <immintrin.h>
#endif

/* ------------------------------------------------------------------------ */
/* Tiling constants                                                         */

/* Prefill tiles. Measured (512 queries, T 2048, 2 threads): 256 x 512 ran
 * 10-20% faster than 128 x 256 (half as many GEMM calls, each with more
 * work per call), while S (256 x 512 floats, 512 KiB) still fits in L2.
 * -DPRE_QROWS=... -DPRE_KT=... rebuilds with other sizes to re-measure. */
#ifndef PRE_QROWS
#define PRE_QROWS 256 /* target rows (queries x group heads) per tile */
#endif
#ifndef PRE_KT
#define PRE_KT 512 /* keys per tile */
#endif
#define WS_ALIGN_FLOATS 16 /* 64 bytes */

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* ------------------------------------------------------------------------ */
/* Exponential and reductions                                               */

#ifdef __AVX2__
/* exp(x) for x <= 0 (8 lanes); 0 for x below -87.3 (including -inf).
 * Cephes-style: 2^n * poly(r), |r| <= ln2/2, about 1 ulp. */
static inline __m256 exp8_neg(__m256 x)
{
    const __m256 lo = _mm256_set1_ps(-87.3f);
    __m256 keep = _mm256_cmp_ps(x, lo, _CMP_GE_OQ);
    x = _mm256_max_ps(x, lo);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 y = _mm256_set1_ps(1.9875691500e-4f);
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    y = _mm256_mul_ps(y, _mm256_castsi256_ps(e));
    return _mm256_and_ps(y, keep);
}

#ifdef __AVX512F__
/* the same, 16 lanes */
static inline __m512 exp16_neg(__m512 x)
{
    const __m512 lo = _mm512_set1_ps(-87.3f);
    __mmask16 keep = _mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ);
    x = _mm512_max_ps(x, lo);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 y = _mm512_set1_ps(1.9875691500e-4f);
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.3981999507e-3f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(8.3334519073e-3f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.1665795894e-2f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.6666665459e-1f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.0000001201e-1f));
    y = _mm512_fmadd_ps(y, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    y = _mm512_mul_ps(y, _mm512_castsi512_ps(e));
    return _mm512_maskz_mov_ps(keep, y);
}
#endif

#endif

/* x[j] <- exp(x[j] - m) for j < n (x[j] <= m), returns the sum; -inf
 * entries give exactly 0. */
static float exp_sub_row(float *x, int32_t n, float m)
{
    float sum = 0.0f;
    int32_t j = 0;
#ifdef __AVX2__
    __m256 vm = _mm256_set1_ps(m), vs = _mm256_setzero_ps();
#ifdef __AVX512F__
    __m512 wm = _mm512_set1_ps(m), ws = _mm512_setzero_ps();
    for (; j + 16 <= n; j += 16) {
        __m512 e = exp16_neg(_mm512_sub_ps(_mm512_loadu_ps(x + j), wm));
        _mm512_storeu_ps(x + j, e);
        ws = _mm512_add_ps(ws, e);
    }
    vs = _mm256_add_ps(_mm512_castps512_ps256(ws),
                       _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(ws), 1)));
#endif
    for (; j + 8 <= n; j += 8) {
        __m256 e = exp8_neg(_mm256_sub_ps(_mm256_loadu_ps(x + j), vm));
        _mm256_storeu_ps(x + j, e);
        vs = _mm256_add_ps(vs, e);
    }
    sum = kv_hsum8(vs);
#endif
    for (; j < n; j++) {
        x[j] = expf(x[j] - m);
        sum += x[j];
    }
    return sum;
}

/* exp_sub_row over a row of any length (the mass rows of long views). */
static void exp_sub_rows(float *x, size_t n, float m)
{
    for (size_t j = 0; j < n; j += (size_t)INT32_MAX / 2) {
        const size_t k = n - j < (size_t)INT32_MAX / 2 ? n - j : (size_t)INT32_MAX / 2;
        (void)exp_sub_row(x + j, (int32_t)k, m);
    }
}

static float row_max(const float *x, int32_t n)
{
    float m = -INFINITY;
    int32_t j = 0;
#ifdef __AVX2__
    __m256 vm = _mm256_set1_ps(-INFINITY);
    for (; j + 8 <= n; j += 8)
        vm = _mm256_max_ps(vm, _mm256_loadu_ps(x + j));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(vm), _mm256_extractf128_ps(vm, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    m = _mm_cvtss_f32(h);
#endif
    for (; j < n; j++)
        m = x[j] > m ? x[j] : m;
    return m;
}

/* ------------------------------------------------------------------------ */
/* Layout of the workspace                                                  */

/* Sizes shared by workspace sizing and the kernel. */
struct attn_layout {
    int32_t g, splits;
    size_t slot;        /* floats per partial state: acc (d), m, l */
    size_t qs;          /* floats of the scaled queries (decode) */
    size_t parts;       /* floats of all partial states (decode) */
    size_t per_thread;  /* floats of scratch per thread */
    int32_t qt, m_rows, kt; /* prefill: queries, rows and keys per tile */
};

static void attn_layout_of(struct attn_layout *L, const struct kv_attn_params *p)
{
    const size_t A = WS_ALIGN_FLOATS;
    const int32_t d = p->head_dim;
    L->g = p->n_heads / p->n_kv_heads;
    int64_t items = (int64_t)p->batch * p->n_kv_heads;
    L->splits = items >= 2 * (int64_t)p->n_threads
                    ? 1
                    : (int32_t)((2 * (int64_t)p->n_threads + items - 1) / items);
    L->slot = round_up((size_t)d + 2, A);
    L->qs = round_up((size_t)p->batch * p->n_q * p->n_heads * d, A);
    L->qt = PRE_QROWS / L->g > 0 ? PRE_QROWS / L->g : 1;
    if (L->qt > p->n_q)
        L->qt = p->n_q;
    L->m_rows = L->qt * L->g;
    L->kt = PRE_KT;
    if (p->n_q == 1) {
        /* sc (g, DEC_KB), w (DEC_KB, ng), msum and qsum (g, ng), the K and V
         * tiles (DEC_KB, d), qx (2 g d); ng <= d whatever the views' groups are */
        L->parts = (size_t)items * L->splits * L->g * L->slot;
        L->per_thread = round_up((size_t)L->g * DEC_KB, A) + round_up((size_t)DEC_KB * d, A) +
                        2 * round_up((size_t)L->g * d, A) + 2 * round_up((size_t)DEC_KB * d, A) +
                        round_up(2 * (size_t)L->g * d, A);
    } else {
        size_t m = (size_t)L->m_rows;
        L->qs = 0;
        L->parts = 0;
        L->per_thread = 2 * round_up(m * d, A) + round_up(m * L->kt, A) + 2 * round_up(m, A) +
                        2 * round_up((size_t)L->kt * d, A);
    }
}

size_t kv_attn_workspace_bytes(const struct kv_attn_params *p)
{
    struct attn_layout L;
    if (p == NULL || p->n_kv_heads < 1 || p->n_heads < 1 || p->head_dim < 1 ||
        p->n_threads < 1 || p->batch < 1 || p->n_q < 1)
        return 0;
    /* the largest terms in double first, so the size_t sums below cannot wrap */
    double g = (double)p->n_heads / p->n_kv_heads, d = p->head_dim;
    double big = (double)p->batch * p->n_q * p->n_heads * (d + 2) * 2 +
                 (double)p->batch * p->n_heads * (d + 16) * (2.0 * p->n_threads + 1) +
                 (double)p->n_threads * (g * PRE_QROWS + PRE_KT + 16) * (d + PRE_KT + 16) * 4;
    if (big * sizeof(float) > (double)(SIZE_MAX / 4))
        return SIZE_MAX;
    attn_layout_of(&L, p);
    return ((size_t)L.qs + L.parts + L.per_thread * (size_t)p->n_threads) * sizeof(float);
}

/* ------------------------------------------------------------------------ */
/* Decode: binding a span's row kernels                                     */

/* The row files, by dtype; NULL: the generic tile path (kv_rows.h). */
static const kv_rows_bind_fn rows_bind[KV_DTYPE_COUNT] = {
    [KV_DTYPE_F32] = kv_rows_bind_f32,
    [KV_DTYPE_Q8] = kv_rows_bind_q8,
    [KV_DTYPE_Q4] = kv_rows_bind_q4,
    [KV_DTYPE_F16] = kv_rows_bind_f16,
    [KV_DTYPE_BF16] = kv_rows_bind_bf16,
    [KV_DTYPE_Q2] = kv_rows_bind_q2,
};
static_assert(KV_DTYPE_COUNT == 6, "a new dtype needs a rows_<type>.c line in rows_bind[]");

/* One span of one (sequence, kv head), as the decode blocks read it. */
struct dec_span {
    const struct kv_span *s;
    struct kv_tensor k, v;           /* the span's sides as this sequence reads
                                        them (its own page table, if any) */
    struct kv_dec_job J;
    size_t koff, voff, kqoff, vqoff; /* (b, h) offsets in K/V rows and qparams */
    int k_generic, v_generic;        /* read through kv_tensor_row_float into a tile */
    int k_qp, v_qp;                  /* the side's kernels read qparams */
    int k_channel;                   /* per-channel codes read by the row kernels through
                                        scaled queries (dec_scores_channel) */
    int32_t k_block;                 /* k_channel: tokens per qparams block */
    size_t row_bytes;                /* the longer of a K and a V row (prefetch) */
};

static void side_of(struct kv_rows_side *r, const struct kv_tensor *t, int32_t d)
{
    r->dt = t->dtype;
    r->group = kv_type_traits[t->dtype].has_qparams ? t->group : 0;
    r->ng = r->group > 0 ? d / r->group : 1;
    r->stride = t->row_stride;
    r->qp_stride = t->qp_row_stride;
}

/*
 * Binds the kernels of span s for (b, h): each side by its dtype's bind
 * function, or the generic tile path for a per-channel side or a dtype
 * without row kernels; a tiled side gets the f32 kernels over the tile.
 * qsum (g, d) scratch receives the group sums of the queries when the keys
 * are read directly as codes.
 */
static void dec_bind(struct dec_span *D, const struct kv_span *s, int32_t b, int32_t h,
                     int32_t g, int32_t d, const float *qs, float *qsum, float *qx)
{
    struct kv_dec_job *J = &D->J;
    memset(D, 0, sizeof *D);
    D->s = s;
    D->k = kv_tensor_of_seq(&s->k, b);
    D->v = kv_tensor_of_seq(&s->v, b);
    D->koff = kv_tensor_off(&s->k, b, h);
    D->voff = kv_tensor_off(&s->v, b, h);
    D->kqoff = kv_tensor_qp_off(&s->k, b, h);
    D->vqoff = kv_tensor_qp_off(&s->v, b, h);
    const size_t krow = kv_dtype_row_bytes(s->k.dtype, d), vrow = kv_dtype_row_bytes(s->v.dtype, d);
    D->row_bytes = krow > vrow ? krow : vrow;
    J->g = g;
    J->d = d;
    J->qs = qs;
    J->qsum = qsum;
    J->qx = qx;
    side_of(&J->k, &s->k, d);
    side_of(&J->v, &s->v, d);
    J->tile = (struct kv_rows_side){.dt = KV_DTYPE_F32, .ng = 1,
                                    .stride = (size_t)d * sizeof(float)};
    D->k_channel = s->k.axis == KV_QAXIS_CHANNEL && kv_type_traits[s->k.dtype].has_qparams &&
                   rows_bind[s->k.dtype] != NULL;
    D->k_generic = (s->k.axis != KV_QAXIS_TOKEN && !D->k_channel) || rows_bind[s->k.dtype] == NULL;
    D->v_generic = s->v.axis != KV_QAXIS_TOKEN || rows_bind[s->v.dtype] == NULL;
    if (D->k_channel) { /* the per-token kernels of one group spanning the row */
        D->k_block = s->k.group;
        J->k.group = d;
        J->k.ng = 1;
        J->k.qp_stride = 0;
    }
    if (!D->k_generic)
        rows_bind[s->k.dtype](J, 0);
    if (D->k_channel && J->k_tile != NULL) { /* a tile would read the block's pairs
                                                 as one token's: the generic reader */
        J->k_tile = NULL;
        D->k_channel = 0;
        D->k_generic = 1;
    }
    if (!D->v_generic)
        rows_bind[s->v.dtype](J, 1);
    if (D->k_generic || J->k_tile != NULL)
        kv_rows_bind_f32(J, 0);
    if (D->v_generic || J->v_tile != NULL)
        kv_rows_bind_f32(J, 1);
    D->k_qp = kv_type_traits[s->k.dtype].has_qparams && !D->k_generic && J->k_tile == NULL &&
              !D->k_channel;
    D->v_qp = kv_type_traits[s->v.dtype].has_qparams && !D->v_generic && J->v_tile == NULL;
    if (D->k_qp) { /* sums of the scaled queries per key group */
        const int32_t ng = J->k.ng, gs = d / ng;
        for (int32_t i = 0; i < g; i++)
            for (int32_t gi = 0; gi < ng; gi++) {
                float sm = 0.0f;
                for (int32_t e = gi * gs; e < (gi + 1) * gs; e++)
                    sm += qs[(size_t)i * d + e];
                qsum[(size_t)i * ng + gi] = sm;
            }
    }
}

/* ------------------------------------------------------------------------ */
/* Decode: one block of rows                                                */

/*
 * Asks for the K and V rows of the next block while this one computes. Only
 * when the call's K/V are likely to come from DRAM (dec_from_dram): there it
 * lifted f32 decode at T = 131072 from ~64% to ~90% of the read bandwidth
 * (GQA 32/8: 32.7 -> 26.6 ms), but from L3 the extra load slots cost more
 * than the latency they hide (T = 8192: 599 -> 797 us).
 */
static void prefetch_block(const struct dec_span *D, int32_t t, int32_t nb)
{
    const struct kv_span *s = D->s;
    const size_t row = D->row_bytes;
    if (s->page_tokens == 0) {
        const char *k0 = (const char *)s->k.data + D->koff, *v0 = (const char *)s->v.data + D->voff;
        for (int32_t j = 0; j < nb; j++) {
            const char *k = k0 + (size_t)(t + j) * s->k.row_stride;
            const char *v = v0 + (size_t)(t + j) * s->v.row_stride;
            for (size_t o = 0; o < row; o += 64) {
                __builtin_prefetch(k + o, 0, 3);
                __builtin_prefetch(v + o, 0, 3);
            }
        }
        return;
    }
    for (int32_t j = 0; j < nb; j++) {
        const char *k = kv_tensor_row_at(&D->k, s->page_tokens, D->koff, t + j);
        const char *v = kv_tensor_row_at(&D->v, s->page_tokens, D->voff, t + j);
        for (size_t o = 0; o < row; o += 64) {
            __builtin_prefetch(k + o, 0, 3);
            __builtin_prefetch(v + o, 0, 3);
        }
    }
}

/* dst (nb, d) <- rows t .. t+nb-1 of one side as f32: its dtype's tile
 * function page run by page run, or the generic reader row by row */
static void dec_tile(float *dst, const struct dec_span *D, int is_v, int32_t d, int32_t t,
                     int32_t nb)
{
    const struct kv_span *s = D->s;
    const struct kv_tensor *x = is_v ? &D->v : &D->k;
    const size_t off = is_v ? D->voff : D->koff, qoff = is_v ? D->vqoff : D->kqoff;
    const kv_rows_dequant_fn fn = is_v ? D->J.v_tile : D->J.k_tile;
    if ((is_v ? D->v_generic : D->k_generic) || fn == NULL) {
        for (int32_t j = 0; j < nb; j++)
            kv_tensor_row_float(dst + (size_t)j * d, x, s->page_tokens, off, qoff, t + j, d);
        return;
    }
    for (int32_t j = 0; j < nb;) {
        const int32_t run = kv_span_run(s, t + j, nb - j);
        fn(dst + (size_t)j * d, is_v ? &D->J.v : &D->J.k, d,
           kv_tensor_row_at(x, s->page_tokens, off, t + j),
           kv_tensor_qp_at(x, s->page_tokens, qoff, t + j), run);
        j += run;
    }
}

/* Row `in` of page pg of a paged side (its sequence's table, off its (b, h)
 * offset), and its per-token qparams (the row kernels take per-token sides
 * only): kv_tensor_row_at / kv_tensor_qp_at without the division. */
static inline const char *dec_page_row(const struct kv_tensor *x, int32_t pg, size_t off,
                                       int32_t in)
{
    return (const char *)x->pages[pg] + off + (size_t)in * x->row_stride;
}

static inline const char *dec_page_qp(const struct kv_tensor *x, int32_t pg, size_t qoff,
                                      int32_t in)
{
    return (const char *)x->qp_pages[pg] + qoff + (size_t)in * x->qp_row_stride;
}

/* Scratch of one decode chunk (per thread). */
struct dec_scratch {
    float *sc;           /* (g, DEC_KB) scores, then probabilities */
    float *w;            /* (DEC_KB, ng) weights of quantized value rows */
    float *msum;         /* (g, ng) pending min terms of quantized values */
    float *qsum;         /* (g, ng) group sums of the scaled queries */
    float *ktile, *vtile; /* (DEC_KB, d) */
    float *qx;           /* (2 g d) the key kernels' own form of the queries */
};

/* What a block does besides attention, for spans and calls that ask:
 * mask key by key (a span with a position table) and keep the raw scores
 * (the attention mass). All NULL on the plain path. */
struct dec_extra {
    const struct kv_mask *mask;
    int32_t b;
    int64_t qpos;
    const int32_t *pos; /* the (b, h) row of the span's position table, or NULL */
    float *mass;        /* this span's keys in the mass row of head 0 of the
                           group, or NULL; heads n_keys apart */
    size_t n_keys;
};

/* Keys of the block the query must not see (position table) -> -inf, every
 * head; then the raw scores into the mass rows (normalised by the merge). */
static void dec_block_extra(float *sc, const struct dec_extra *E, int32_t g, int32_t t,
                            int32_t nb)
{
    if (E->pos != NULL)
        for (int32_t j = 0; j < nb; j++)
            if (!kv_attn_key_visible(E->mask, E->b, E->qpos, E->pos[t + j]))
                for (int32_t i = 0; i < g; i++)
                    sc[(size_t)i * DEC_KB + j] = -INFINITY;
    if (E->mass != NULL)
        for (int32_t i = 0; i < g; i++)
            memcpy(E->mass + (size_t)i * E->n_keys + t, sc + (size_t)i * DEC_KB,
                   (size_t)nb * sizeof(float));
}

/*
 * Scores of per-channel codes (KIVI keys): within a block of k_block tokens
 * sharing one (scale_c, min_c) per channel c,
 *     q . k_t = sum_c q_c (min_c + scale_c code_tc)
 *             = sum_c (q_c scale_c) code_tc + sum_c q_c min_c,
 * so the codes go through the dtype's per-token row kernels (one group
 * spanning the row, qparams {1, 0}) with the queries scaled per channel,
 * q'_c = q_c scale_c, and m = sum_c q_c min_c added to every score of the
 * block. The codes are read as they are; q' costs 2 g d per block of tokens.
 * qx (2 g d floats) holds q' (g, d) and m (g).
 */
static void dec_scores_channel(float *sc, const struct dec_span *D, int32_t t, int32_t nb,
                               float *qx)
{
    static const struct kv_qparams unit = {.scale = 1.0f, .min = 0.0f};
    const struct kv_span *s = D->s;
    const int32_t g = D->J.g, d = D->J.d, blk = D->k_block, page = s->page_tokens;
    struct kv_dec_job Jc = D->J;
    float *qc = qx, *m = qx + (size_t)g * d;
    Jc.qs = qc;
    Jc.qsum = m; /* min terms: 0 * sum, whatever it holds */
    for (int32_t j = 0; j < nb;) {
        const int32_t tt = t + j;
        int32_t run = blk - tt % blk < nb - j ? blk - tt % blk : nb - j;
        run = kv_span_run(s, tt, run); /* blocks do not straddle pages (kv_attn_check) */
        const struct kv_qparams *qp =
            (const struct kv_qparams *)kv_tensor_qp_at(&s->k, page, D->kqoff, tt);
        for (int32_t i = 0; i < g; i++) {
            const float *q = D->J.qs + (size_t)i * d;
            float *o = qc + (size_t)i * d, mi = 0.0f;
            for (int32_t c = 0; c < d; c++) {
                o[c] = q[c] * qp[c].scale;
                mi += q[c] * qp[c].min;
            }
            m[i] = mi;
        }
        Jc.scores(sc + j, &Jc, &Jc.k, kv_tensor_row_at(&s->k, page, D->koff, tt),
                  (const char *)&unit, run);
        for (int32_t i = 0; i < g; i++)
            for (int32_t u = 0; u < run; u++)
                sc[(size_t)i * DEC_KB + j + u] += m[i];
        j += run;
    }
}

/* Rows t .. t+nb-1 (nb <= DEC_KB) of a bound span into the running softmax
 * states part (g, slot) of one chunk; msum_ng: min terms pending per head
 * (rescaled with the states), 0 for none; E: masking and mass, or NULL. */
static void dec_block(float *part, const struct attn_layout *L, const struct dec_scratch *X,
                      const struct dec_span *D, int32_t d, int32_t t, int32_t nb,
                      int32_t msum_ng, const struct dec_extra *E)
{
    const struct kv_dec_job *J = &D->J;
    const struct kv_span *s = D->s;
    const int32_t g = L->g, page = s->page_tokens;
    float *sc = X->sc;

    /* scores (g, nb) */
    if (D->k_generic || J->k_tile != NULL) {
        dec_tile(X->ktile, D, 0, d, t, nb);
        J->scores(sc, J, &J->tile, (const char *)X->ktile, NULL, nb);
    } else if (D->k_channel) {
        dec_scores_channel(sc, D, t, nb, X->qx);
    } else if (page == 0) {
        const char *k = (const char *)s->k.data + D->koff + (size_t)t * J->k.stride;
        const char *kq = D->k_qp ? (const char *)s->k.qp + D->kqoff + (size_t)t * J->k.qp_stride
                                 : NULL;
        J->scores(sc, J, &J->k, k, kq, nb);
    } else {
        /* page runs: one division per block, then page by page */
        for (int32_t j = 0, pg = t / page, in = t % page; j < nb; pg++, in = 0) {
            const int32_t run = page - in < nb - j ? page - in : nb - j;
            J->scores(sc + j, J, &J->k, dec_page_row(&D->k, pg, D->koff, in),
                      D->k_qp ? dec_page_qp(&D->k, pg, D->kqoff, in) : NULL, run);
            j += run;
        }
    }

    if (E != NULL)
        dec_block_extra(sc, E, g, t, nb);

    /* online softmax: the running max and sum per head */
    for (int32_t i = 0; i < g; i++) {
        float *st = part + (size_t)i * L->slot, *si_ = sc + (size_t)i * DEC_KB;
        for (int32_t j = nb; j < DEC_KB; j++)
            si_[j] = -INFINITY;
        float bm = row_max(si_, nb);
        if (bm == -INFINITY) { /* a masked block this head sees nothing of */
            memset(si_, 0, (size_t)nb * sizeof(float));
            continue;
        }
        if (bm > st[d]) {
            float corr = expf(st[d] - bm); /* 0 for the first block */
            st[d] = bm;
            st[d + 1] *= corr;
            for (int32_t e2 = 0; e2 < d; e2++)
                st[e2] *= corr;
            for (int32_t gi = 0; gi < msum_ng; gi++)
                X->msum[(size_t)i * msum_ng + gi] *= corr;
        }
        st[d + 1] += exp_sub_row(si_, nb, st[d]);
    }

    /* weighted values */
    if (D->v_generic || J->v_tile != NULL) {
        dec_tile(X->vtile, D, 1, d, t, nb);
        J->pv(part, L->slot, X->msum, X->w, sc, J, &J->tile, (const char *)X->vtile, NULL, nb);
    } else if (page == 0) {
        const char *v = (const char *)s->v.data + D->voff + (size_t)t * J->v.stride;
        const char *vq = D->v_qp ? (const char *)s->v.qp + D->vqoff + (size_t)t * J->v.qp_stride
                                 : NULL;
        J->pv(part, L->slot, X->msum, X->w, sc, J, &J->v, v, vq, nb);
    } else {
        for (int32_t j = 0, pg = t / page, in = t % page; j < nb; pg++, in = 0) {
            const int32_t run = page - in < nb - j ? page - in : nb - j;
            J->pv(part, L->slot, X->msum, X->w, sc + j, J, &J->v,
                  dec_page_row(&D->v, pg, D->voff, in),
                  D->v_qp ? dec_page_qp(&D->v, pg, D->vqoff, in) : NULL, run);
            j += run;
        }
    }
}

/* part_i (d) += msum_i (ng) spread over each group's elements, msum <- 0 */
static void fold_msum(float *part, const struct attn_layout *L, float *msum, int32_t d,
                      int32_t group)
{
    const int32_t ng = d / group;
    for (int32_t i = 0; i < L->g; i++) {
        for (int32_t e2 = 0; e2 < d; e2++)
            part[(size_t)i * L->slot + e2] += msum[(size_t)i * ng + e2 / group];
        memset(msum + (size_t)i * ng, 0, (size_t)ng * sizeof(float));
    }
}

/* ------------------------------------------------------------------------ */
/* Decode: one split-K chunk of one (sequence, kv head)                     */

/*
 * Runs the online softmax of one split-K chunk: the visible keys of
 * (sequence b, kv head h) with indices [v0, v1) in span order (each span's
 * sinks, then its window). part (g, slot): per head acc (d), then m and l.
 */
static void dec_chunk(float *part, float *scratch, const struct attn_layout *L,
                      const struct kv_attn_params *p, const struct kv_view *view, int32_t b,
                      int32_t h, int64_t v0, int64_t v1, const float *qs, int prefetch,
                      size_t n_keys)
{
    const int32_t g = L->g, d = p->head_dim;
    struct dec_scratch X;
    X.sc = scratch;
    X.w = X.sc + round_up((size_t)g * DEC_KB, WS_ALIGN_FLOATS);
    X.msum = X.w + round_up((size_t)DEC_KB * d, WS_ALIGN_FLOATS);
    X.qsum = X.msum + round_up((size_t)g * d, WS_ALIGN_FLOATS);
    X.ktile = X.qsum + round_up((size_t)g * d, WS_ALIGN_FLOATS);
    X.vtile = X.ktile + round_up((size_t)DEC_KB * d, WS_ALIGN_FLOATS);
    X.qx = X.vtile + round_up((size_t)DEC_KB * d, WS_ALIGN_FLOATS);
    for (int32_t i = 0; i < g; i++) {
        float *st = part + (size_t)i * L->slot;
        memset(st, 0, (size_t)d * sizeof(float));
        st[d] = -INFINITY;
        st[d + 1] = 0.0f;
    }
    memset(X.msum, 0, (size_t)g * d * sizeof(float));
    int32_t msum_group = 0, msum_ng = 0; /* group and count per head of the
                                            pending min terms, 0: none */

    int64_t lo[2], hi[2], seen = 0;
    const int nr = kv_mask_ranges(&view->mask, b, p->q_pos0, lo, hi);
    struct dec_span D;
    struct dec_extra E = {.mask = &view->mask, .b = b, .qpos = p->q_pos0, .n_keys = n_keys};
    size_t key0 = 0; /* index in the view of the span's token 0 */
    for (int32_t si = 0; si < view->n_spans && seen < v1;
         key0 += (size_t)view->spans[si].n_tokens, si++) {
        const struct kv_span *s = &view->spans[si];
        int bound = 0;
        /* a span with a position table: all its tokens are candidates
         * (masked key by key), once */
        const int nrs = s->pos != NULL ? nr > 0 : nr;
        E.pos = s->pos != NULL ? s->pos + (size_t)b * s->pos_seq_stride +
                                     (size_t)h * s->pos_head_stride
                               : NULL;
        E.mass = p->mass != NULL
                     ? p->mass + ((size_t)b * p->n_heads + (size_t)h * g) * n_keys + key0
                     : NULL;
        const struct dec_extra *Ep = E.pos != NULL || E.mass != NULL ? &E : NULL;
        for (int r = 0; r < nrs; r++) {
            int32_t t0 = 0, t1 = s->n_tokens;
            if (s->pos == NULL)
                kv_span_token_range(s, lo[r], hi[r], &t0, &t1);
            int64_t n = t1 - t0;
            /* intersect [seen, seen + n) with [v0, v1) */
            int64_t a = v0 > seen ? v0 - seen : 0, e = v1 - seen < n ? v1 - seen : n;
            seen += n;
            if (a >= e)
                continue;
            if (!bound) {
                dec_bind(&D, s, b, h, g, d, qs, X.qsum, X.qx);
                bound = 1;
                if (D.v_qp && msum_group != 0 && msum_group != D.J.v.group) {
                    fold_msum(part, L, X.msum, d, msum_group);
                    msum_group = msum_ng = 0;
                }
                if (D.v_qp) {
                    msum_group = D.J.v.group;
                    msum_ng = D.J.v.ng;
                }
            }
            const int32_t end = t0 + (int32_t)e;
            for (int32_t t = t0 + (int32_t)a; t < end; t += DEC_KB) {
                int32_t nb = end - t < DEC_KB ? end - t : DEC_KB;
                if (prefetch && t + DEC_KB < end)
                    prefetch_block(&D, t + DEC_KB,
                                   end - t - DEC_KB < DEC_KB ? end - t - DEC_KB : DEC_KB);
                dec_block(part, L, &X, &D, d, t, nb, msum_ng, Ep);
            }
        }
    }
    if (msum_group != 0) /* fold the min terms into the values */
        fold_msum(part, L, X.msum, d, msum_group);
}

/* Number of visible keys of sequence b for the decode query (every key of
 * a span with a position table: the candidates, masked in the blocks). */
static int64_t dec_visible(const struct kv_attn_params *p, const struct kv_view *v, int32_t b)
{
    int64_t lo[2], hi[2], n = 0;
    const int nr = kv_mask_ranges(&v->mask, b, p->q_pos0, lo, hi);
    for (int32_t s = 0; s < v->n_spans; s++) {
        if (v->spans[s].pos != NULL) {
            n += nr > 0 ? v->spans[s].n_tokens : 0;
            continue;
        }
        for (int r = 0; r < nr; r++) {
            int32_t t0, t1;
            kv_span_token_range(&v->spans[s], lo[r], hi[r], &t0, &t1);
            n += t1 - t0;
        }
    }
    return n;
}

/* Whether the K/V rows one decode call reads (all sequences and kv heads,
 * codes and group parameters) exceed half the L3 cache: they share it with
 * the weights, the other layers' rows and, on a VM, other guests (on the
 * 2-core VM with a 260 MiB L3, 33 MB of f32 rows ran from L3 at 53 GB/s, 67
 * MB at 28-50 GB/s, 134 MB at the DRAM rate; 168 MB of int8 rows ran
 * 10.6 ms without prefetching, 8.6 ms with it). */
static int dec_from_dram(const struct kv_attn_params *p, const struct kv_view *v)
{
    return (double)kv_attn_span_bytes(p, v) > 0.5 * (double)kv_l3_bytes();
}

static void attn_decode(float *out, const float *q, const struct kv_attn_params *p,
                        const struct kv_view *view, float *ws, const struct attn_layout *L)
{
    const int32_t d = p->head_dim, g = L->g, S = L->splits;
    const int32_t H = p->n_heads;
    const int64_t items = (int64_t)p->batch * p->n_kv_heads, rows = (int64_t)p->batch * H;
    float *qs = ws, *parts = qs + L->qs;
    float *scratch = parts + L->parts;
    const int prefetch = dec_from_dram(p, view);
    const size_t n_keys = p->mass != NULL ? (size_t)kv_view_keys(view) : 0;

#pragma omp parallel num_threads(p->n_threads)
    {
        float *my = scratch + (size_t)omp_get_thread_num() * L->per_thread;
        /* scaled queries (and the mass rows: -inf, a key nobody sees) */
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            for (int32_t e = 0; e < d; e++)
                qs[(size_t)r * d + e] = q[(size_t)r * d + e] * p->scale;
            for (size_t j = 0; j < n_keys; j++)
                p->mass[(size_t)r * n_keys + j] = -INFINITY;
        }
        /* split-K chunks, each (sequence, kv head, split) independent */
#pragma omp for schedule(static)
        for (int64_t it = 0; it < items * S; it++) {
            int64_t bh = it / S;
            int32_t s = (int32_t)(it % S), b = (int32_t)(bh / p->n_kv_heads),
                    h = (int32_t)(bh % p->n_kv_heads);
            int64_t nv = dec_visible(p, view, b);
            int64_t chunk = (nv + S - 1) / S;
            chunk = (chunk + DEC_KB - 1) / DEC_KB * DEC_KB;
            int64_t v0 = s * chunk < nv ? s * chunk : nv;
            int64_t v1 = v0 + chunk < nv ? v0 + chunk : nv;
            size_t r0 = (size_t)b * H + (size_t)h * g;
            dec_chunk(parts + (size_t)it * g * L->slot, my, L, p, view, b, h, v0, v1,
                      qs + r0 * d, prefetch, n_keys);
        }
        /* merge the splits of each (sequence, query head) */
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            int32_t b = (int32_t)(r / H), hq = (int32_t)(r % H), h = hq / g, i = hq % g;
            const float *st0 = parts + (((size_t)b * p->n_kv_heads + h) * S * g + i) * L->slot;
            const size_t sstride = (size_t)g * L->slot;
            float M = -INFINITY, lsum = 0.0f;
            for (int32_t s = 0; s < S; s++) {
                const float *st = st0 + s * sstride;
                if (st[d + 1] > 0.0f && st[d] > M)
                    M = st[d];
            }
            float *o = out + (size_t)r * d;
            for (int32_t e = 0; e < d; e++)
                o[e] = 0.0f;
            for (int32_t s = 0; s < S; s++) {
                const float *st = st0 + s * sstride;
                if (!(st[d + 1] > 0.0f))
                    continue;
                float f = expf(st[d] - M);
                lsum += st[d + 1] * f;
                for (int32_t e = 0; e < d; e++)
                    o[e] += st[e] * f;
            }
            if (lsum > 0.0f) {
                float inv = 1.0f / lsum;
                for (int32_t e = 0; e < d; e++)
                    o[e] *= inv;
            }
            if (n_keys > 0) { /* raw scores -> probabilities */
                float *m = p->mass + (size_t)r * n_keys;
                if (lsum > 0.0f) {
                    exp_sub_rows(m, n_keys, M);
                    const float inv = 1.0f / lsum;
                    for (size_t j = 0; j < n_keys; j++)
                        m[j] *= inv;
                } else {
                    memset(m, 0, n_keys * sizeof(float));
                }
            }
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Prefill                                                                  */

/* rows (n, d) <- rows t0..t0+n of one side of a span as f32 (any dtype,
 * axis or paging) */
static void pre_gather(float *dst, const struct kv_span *s, const struct kv_tensor *x,
                       int32_t d, int32_t b, int32_t h, int32_t t0, int32_t n)
{
    const size_t off = kv_tensor_off(x, b, h), qoff = kv_tensor_qp_off(x, b, h);
    const struct kv_tensor xb = kv_tensor_of_seq(x, b);
    for (int32_t j = 0; j < n; j++)
        kv_tensor_row_float(dst + (size_t)j * d, &xb, s->page_tokens, off, qoff, t0 + j, d);
}

/* The f32 rows [t, t + nk) of one side for a tile GEMM: the span's own rows
 * when they are f32 and consecutive (*ld their stride in floats), else a
 * copy in buf (*ld = d). */
static const float *pre_rows(float *buf, int *ld, const struct kv_span *s,
                             const struct kv_tensor *x, int32_t d, int32_t b, int32_t h,
                             int32_t t, int32_t nk)
{
    if (x->dtype == KV_DTYPE_F32 && kv_span_run(s, t, nk) == nk) {
        *ld = nk == 1 ? d : (int)(x->row_stride / sizeof(float));
        const struct kv_tensor xb = kv_tensor_of_seq(x, b);
        return (const float *)kv_tensor_row_at(&xb, s->page_tokens, kv_tensor_off(x, b, h), t);
    }
    pre_gather(buf, s, x, d, b, h, t, nk);
    *ld = d;
    return buf;
}

/*
 * Row r of a score tile S (keys t .. t+nk-1 of span s, positions from s_lo
 * when contiguous) <- -inf where query qpos of sequence b (kv head h) must
 * not see the key: interval arithmetic on a contiguous span, key by key on a
 * span with a position table.
 */
static void pre_mask_row(float *sr, int32_t nk, const struct kv_mask *mask,
                         const struct kv_span *s, int32_t b, int32_t h, int64_t qpos, int32_t t,
                         int64_t s_lo)
{
    if (s->pos != NULL) {
        for (int32_t j = 0; j < nk; j++)
            if (!kv_attn_key_visible(mask, b, qpos, kv_span_pos(s, b, h, t + j)))
                sr[j] = -INFINITY;
        return;
    }
    int64_t lo[2], hi[2];
    const int nr = kv_mask_ranges(mask, b, qpos, lo, hi);
    int64_t j = 0;
    for (int k = 0; k < nr; k++) {
        /* visible j in [jlo, jhi) */
        int64_t jlo = lo[k] - s_lo, jhi = hi[k] - s_lo + 1;
        jlo = jlo < j ? j : jlo > nk ? nk : jlo;
        jhi = jhi < jlo ? jlo : jhi > nk ? nk : jhi;
        for (; j < jlo; j++)
            sr[j] = -INFINITY;
        j = jhi;
    }
    for (; j < nk; j++)
        sr[j] = -INFINITY;
}

/* Key tiles [t, t + nk) of span s a tile of queries may see: the union
 * ranges' tokens on a contiguous span, all tokens (masked later) on a span
 * with a position table. Returns how many ranges (0..2) it filled. */
static int pre_key_ranges(const struct kv_span *s, int nu, const int64_t ulo[2],
                          const int64_t uhi[2], int32_t t0[2], int32_t t1[2])
{
    if (s->pos != NULL) {
        t0[0] = 0;
        t1[0] = s->n_tokens;
        return nu > 0;
    }
    for (int u = 0; u < nu; u++)
        kv_span_token_range(s, ulo[u], uhi[u], &t0[u], &t1[u]);
    return nu;
}

/* The tile's buffers in the thread's scratch. */
struct pre_bufs {
    float *Q, *O, *S, *mx, *ls, *Kt, *Vt;
};

static struct pre_bufs pre_bufs_of(float *my, const struct attn_layout *L, int32_t d)
{
    const size_t A = WS_ALIGN_FLOATS;
    struct pre_bufs B;
    B.Q = my;                                              /* (m, d) */
    B.O = B.Q + round_up((size_t)L->m_rows * d, A);        /* (m, d) */
    B.S = B.O + round_up((size_t)L->m_rows * d, A);        /* (m, kt) */
    B.mx = B.S + round_up((size_t)L->m_rows * L->kt, A);   /* (m) */
    B.ls = B.mx + round_up((size_t)L->m_rows, A);          /* (m) */
    B.Kt = B.ls + round_up((size_t)L->m_rows, A);          /* (kt, d) */
    B.Vt = B.Kt + round_up((size_t)L->kt * d, A);          /* (kt, d) */
    return B;
}

/*
 * The attention mass of a finished tile (B->mx, B->ls final): each key's
 * probability, recomputed from S = Q K^T, added over the tile's queries into
 * mass rows (b, h*g + j) (n_keys apart). One more QK^T pass, only when the
 * mass is asked for; the caller runs the tiles of one (b, h) in one thread.
 */
static void pre_tile_mass(const struct kv_attn_params *p, const struct kv_view *view,
                          const struct attn_layout *L, const struct pre_bufs *B, int32_t b,
                          int32_t h, int32_t i0, int32_t nq, size_t n_keys)
{
    const int32_t d = p->head_dim, g = L->g, kt = L->kt, m = nq * g;
    const struct kv_mask *mask = &view->mask;
    const int64_t pfirst = (int64_t)p->q_pos0 + i0, plast = pfirst + nq - 1;
    int64_t ulo[2], uhi[2];
    const int nu = kv_mask_ranges_of(mask, b, pfirst, plast, ulo, uhi);
    float *mrow = p->mass + ((size_t)b * p->n_heads + (size_t)h * g) * n_keys;
    size_t key0 = 0;
    for (int32_t si = 0; si < view->n_spans; key0 += (size_t)view->spans[si].n_tokens, si++) {
        const struct kv_span *s = &view->spans[si];
        int32_t t0[2], t1[2];
        const int nr = pre_key_ranges(s, nu, ulo, uhi, t0, t1);
        for (int u = 0; u < nr; u++) {
            for (int32_t t = t0[u]; t < t1[u]; t += kt) {
                int32_t nk = t1[u] - t < kt ? t1[u] - t : kt;
                const int64_t s_lo = (int64_t)s->pos0 + t, s_hi = s_lo + nk - 1;
                int ldk;
                const float *K = pre_rows(B->Kt, &ldk, s, &s->k, d, b, h, t, nk);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, nk, d, 1.0f, B->Q, d, K,
                            ldk, 0.0f, B->S, kt);
                const int full = s->pos == NULL &&
                                 kv_mask_block_full(mask, b, pfirst, plast, s_lo, s_hi);
                for (int32_t r = 0; r < m; r++) {
                    float *sr = B->S + (size_t)r * kt;
                    if (!(B->ls[r] > 0.0f))
                        continue; /* this query sees nothing at all */
                    if (!full)
                        pre_mask_row(sr, nk, mask, s, b, h, pfirst + r / g, t, s_lo);
                    (void)exp_sub_row(sr, nk, B->mx[r]);
                    const float inv = 1.0f / B->ls[r];
                    float *dst = mrow + (size_t)(r % g) * n_keys + key0 + (size_t)t;
                    for (int32_t j = 0; j < nk; j++)
                        dst[j] += sr[j] * inv;
                }
            }
        }
    }
}

/* One tile of queries [i0, i0+nq) of (sequence b, kv head h) against every
 * key it sees; writes its rows of out (and its share of the mass). */
static void pre_tile(float *out, const float *q, const struct kv_attn_params *p,
                     const struct kv_view *view, const struct attn_layout *L, float *my,
                     int32_t b, int32_t h, int32_t i0, int32_t nq, size_t n_keys)
{
    const int32_t d = p->head_dim, g = L->g, H = p->n_heads, kt = L->kt;
    const int32_t m = nq * g; /* rows: r = i*g + j  <->  query i0+i, head h*g+j */
    const struct kv_mask *mask = &view->mask;
    const struct pre_bufs B = pre_bufs_of(my, L, d);
    float *Q = B.Q, *O = B.O, *S = B.S, *mx = B.mx, *ls = B.ls;

    for (int32_t i = 0; i < nq; i++)
        for (int32_t j = 0; j < g; j++) {
            const float *src = q + (((size_t)b * p->n_q + i0 + i) * H + (size_t)h * g + j) * d;
            float *dst = Q + ((size_t)i * g + j) * d;
            for (int32_t e = 0; e < d; e++)
                dst[e] = src[e] * p->scale;
        }
    memset(O, 0, (size_t)m * d * sizeof(float));
    for (int32_t r = 0; r < m; r++) {
        mx[r] = -INFINITY;
        ls[r] = 0.0f;
    }
    const int64_t pfirst = (int64_t)p->q_pos0 + i0, plast = pfirst + nq - 1;
    int64_t ulo[2], uhi[2]; /* the keys any row of the tile sees */
    const int nu = kv_mask_ranges_of(mask, b, pfirst, plast, ulo, uhi);

    for (int32_t si = 0; si < view->n_spans; si++) {
        const struct kv_span *s = &view->spans[si];
        int32_t t0[2], t1[2];
        const int nr = pre_key_ranges(s, nu, ulo, uhi, t0, t1);
        for (int u = 0; u < nr; u++) {
            for (int32_t t = t0[u]; t < t1[u]; t += kt) {
                int32_t nk = t1[u] - t < kt ? t1[u] - t : kt;
                int64_t s_lo = (int64_t)s->pos0 + t, s_hi = s_lo + nk - 1;
                int ldk, ldv;
                const float *K = pre_rows(B.Kt, &ldk, s, &s->k, d, b, h, t, nk);
                const float *V = pre_rows(B.Vt, &ldv, s, &s->v, d, b, h, t, nk);
                /* S (m, nk) = Q K^T */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, nk, d, 1.0f, Q, d, K,
                            ldk, 0.0f, S, kt);
                const int full = s->pos == NULL &&
                                 kv_mask_block_full(mask, b, pfirst, plast, s_lo, s_hi);
                for (int32_t r = 0; r < m; r++) {
                    float *sr = S + (size_t)r * kt;
                    if (!full) /* keys outside the row's intervals get -inf */
                        pre_mask_row(sr, nk, mask, s, b, h, pfirst + r / g, t, s_lo);
                    float bm = row_max(sr, nk);
                    if (bm == -INFINITY) { /* this row sees nothing here */
                        memset(sr, 0, (size_t)nk * sizeof(float));
                        continue;
                    }
                    if (bm > mx[r]) {
                        float corr = expf(mx[r] - bm);
                        mx[r] = bm;
                        ls[r] *= corr;
                        float *orow = O + (size_t)r * d;
                        for (int32_t e = 0; e < d; e++)
                            orow[e] *= corr;
                    }
                    ls[r] += exp_sub_row(sr, nk, mx[r]);
                }
                /* O (m, d) += P (m, nk) V (nk, d) */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, d, nk, 1.0f, S, kt, V,
                            ldv, 1.0f, O, d);
            }
        }
    }
    for (int32_t i = 0; i < nq; i++)
        for (int32_t j = 0; j < g; j++) {
            int32_t r = i * g + j;
            float *dst = out + (((size_t)b * p->n_q + i0 + i) * H + (size_t)h * g + j) * d;
            float inv = ls[r] > 0.0f ? 1.0f / ls[r] : 0.0f; /* no key: zeros */
            for (int32_t e = 0; e < d; e++)
                dst[e] = O[(size_t)r * d + e] * inv;
        }
    if (p->mass != NULL)
        pre_tile_mass(p, view, L, &B, b, h, i0, nq, n_keys);
}

static void attn_prefill(float *out, const float *q, const struct kv_attn_params *p,
                         const struct kv_view *view, float *ws, const struct attn_layout *L)
{
    float *scratch = ws + L->qs;
    const int32_t n_tiles = (p->n_q + L->qt - 1) / L->qt;
    const int64_t bh_n = (int64_t)p->batch * p->n_kv_heads, items = bh_n * n_tiles;
    if (p->mass != NULL) {
        /* the tiles of one (b, h) add into the same mass rows: each (b, h)
         * runs its tiles in one thread, after zeroing its rows */
        const size_t n_keys = (size_t)kv_view_keys(view), g = (size_t)L->g;
#pragma omp parallel num_threads(p->n_threads)
        {
            float *my = scratch + (size_t)omp_get_thread_num() * L->per_thread;
#pragma omp for schedule(dynamic, 1)
            for (int64_t bh = 0; bh < bh_n; bh++) {
                const int32_t b = (int32_t)(bh / p->n_kv_heads), h = (int32_t)(bh % p->n_kv_heads);
                memset(p->mass + ((size_t)b * p->n_heads + (size_t)h * g) * n_keys, 0,
                       g * n_keys * sizeof(float));
                for (int32_t tile = 0; tile < n_tiles; tile++) {
                    const int32_t i0 = tile * L->qt;
                    const int32_t nq = p->n_q - i0 < L->qt ? p->n_q - i0 : L->qt;
                    pre_tile(out, q, p, view, L, my, b, h, i0, nq, n_keys);
                }
            }
        }
        return;
    }
    /* later query tiles see more keys: hand them out first, one at a time */
#pragma omp parallel num_threads(p->n_threads)
    {
        float *my = scratch + (size_t)omp_get_thread_num() * L->per_thread;
#pragma omp for schedule(dynamic, 1)
        for (int64_t it = 0; it < items; it++) {
            int32_t tile = n_tiles - 1 - (int32_t)(it / bh_n);
            int64_t bh = it % bh_n;
            int32_t i0 = tile * L->qt;
            int32_t nq = p->n_q - i0 < L->qt ? p->n_q - i0 : L->qt;
            pre_tile(out, q, p, view, L, my, (int32_t)(bh / p->n_kv_heads),
                     (int32_t)(bh % p->n_kv_heads), i0, nq, 0);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Entry point                                                              */

enum kv_status kv_attn(float *out, const float *q, const struct kv_attn_params *p,
                       const struct kv_view *v, void *ws, size_t ws_bytes)
{
    enum kv_status st = kv_attn_check(p, v);
    if (st != KV_OK)
        return st;
    if (out == NULL || q == NULL || ws == NULL || ws_bytes < kv_attn_workspace_bytes(p) ||
        ((uintptr_t)ws % 64) != 0)
        return KV_ERR_INVALID;
    struct attn_layout L;
    attn_layout_of(&L, p);
    if (p->n_q == 1)
        attn_decode(out, q, p, v, ws, &L);
    else
        attn_prefill(out, q, p, v, ws, &L);
    return KV_OK;
}
