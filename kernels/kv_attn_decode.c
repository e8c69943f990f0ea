/*
 * kv_attn_decode.c - the attention kernel's decode shape (n_q == 1,
 * kv_attention.c calls it), which is memory-bound: every K and V row is
 * streamed once for the whole group of query heads that shares it (GQA), in
 * blocks of DEC_KB rows with an online softmax.
 *
 * The design decision that matters: the visible keys of each (sequence, kv
 * head) are cut into split-K chunks, so both cores are busy even with one kv
 * head, and the chunks' partial softmaxes are merged with a log-sum-exp
 * rescale. The per-block row kernels (scores, weighted values; AVX-512,
 * AVX2, scalar) are in one file per dtype (rows_q8.c, rows_q4.c, rows_q2.c
 * through rows_int.h; rows_f32.c, rows_f16.c, rows_bf16.c through rows_float.h),
 * bound once per (span, sequence, kv head) through rows_bind[] (kv_rows.h):
 * quantized and 16-bit rows are dequantized in registers, never into a
 * cache-sized buffer. A 64-row block of a paged span is cut into page runs
 * for the row kernels but keeps one online-softmax step, so small pages do
 * not shrink it.
 */
#include "kv_pool.h"
#include "kv_rows.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Binding a span's row kernels                                             */

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

int kv_rows_int_query(enum kv_dtype dt, int32_t d, int32_t group, int32_t g)
{
    switch (dt) {
    case KV_DTYPE_Q8:
        return kv_rows_intq_q8(d, group, g);
    case KV_DTYPE_Q4:
        return kv_rows_intq_q4(d, group, g);
    case KV_DTYPE_Q2:
        return kv_rows_intq_q2(d, group, g);
    default:
        return 0;
    }
}

void kv_rows_query_int(float *out, const float *q, int32_t d, int32_t group, int bits)
{
    const int32_t qmax = (1 << (bits - 1)) - 1;
    for (int32_t g0 = 0; g0 < d; g0 += group) {
        const float amax = kv_rows_amax(q + g0, group), step = kv_rows_qstep(amax, qmax);
        for (int32_t e = g0; e < g0 + group; e++)
            out[e] = (float)kv_rows_qcode(q[e], amax, qmax) * step;
    }
}

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
    int streams;                     /* both sides' kernels ask for their rows ahead
                                        (kv_rows_ahead): no prefetch_block */
};

static void side_of(struct kv_rows_side *r, const struct kv_tensor *t, int32_t d)
{
    r->dt = t->dtype;
    r->group = kv_type_traits[t->dtype].has_qparams ? t->group : 0;
    r->ng = r->group > 0 ? d / r->group : 1;
    r->stride = t->row_stride;
    r->qp_stride = t->qp_row_stride;
    r->bytes = kv_dtype_row_bytes(t->dtype, d);
}

/*
 * Binds the kernels of span s for (b, h): each side by its dtype's bind
 * function, or the generic tile path for a per-channel side or a dtype
 * without row kernels; a tiled side gets the f32 kernels over the tile.
 * qsum (g, d) scratch receives the group sums of the queries when the keys
 * are read directly as codes.
 */
static void dec_bind(struct dec_span *D, const struct kv_span *s, int32_t b, int32_t h,
                     int32_t g, int32_t d, const float *qs, float *qsum, float *qx, int from_dram)
{
    struct kv_dec_job *J = &D->J;
    memset(D, 0, sizeof *D);
    /* a page run's rows ahead lie past its page, in another sequence's or
     * none: paged spans keep the page-aware prefetch_block */
    J->from_dram = from_dram && s->page_tokens == 0;
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
    J->k_channel = D->k_channel;
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
    if (D->k_generic || J->k_tile != NULL) /* its kernels read the tile */
        J->k.ahead = 0;
    if (D->v_generic || J->v_tile != NULL)
        J->v.ahead = 0;
    D->streams = J->k.ahead > 0 && J->v.ahead > 0;
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
/* One block of rows                                                        */

/*
 * Asks for the K and V rows of the next block while this one computes. Only
 * when the call's K/V are likely to come from DRAM (dec_from_dram), and
 * only for a span whose kernels do not ask for their rows themselves
 * (D->streams: kv_rows_ahead, which is what works on the AVX-512 Xeon,
 * where this burst read the same as no prefetch): there it
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

/*
 * A page run starts where the hardware prefetcher has not been: a 16-token
 * f32 run of head_dim 64 is one 4 KiB piece of its block, the next run
 * another block. So before a run's row kernel the first DEC_PAGE_AHEAD
 * bytes of the block's next run are asked for (at most that run's rows):
 * a few lines, unlike prefetch_block's whole blocks, which cost more than
 * they hide when the rows sit in L3. Measured on the AVX2 AMD EPYC only
 * (paged 16-token blocks, batch 8, T 272, 5 interleaved rounds against the
 * same build without it: attention 0.83-0.96x, faster in every round; from
 * DRAM at batch 4, T 4096, a median of 0.91x), so it is built there, AVX2
 * without AVX-512; an AVX-512 build keeps the hardware prefetcher alone
 * until an A/B there.
 */
#define DEC_PAGE_AHEAD 1024

static inline void prefetch_run(const char *p, size_t bytes)
{
#if defined(__AVX2__) && !defined(__AVX512F__)
    const size_t n = bytes < DEC_PAGE_AHEAD ? bytes : DEC_PAGE_AHEAD;
    for (size_t o = 0; o < n; o += 64)
        __builtin_prefetch(p + o, 0, 3);
#else
    (void)p;
    (void)bytes;
#endif
}

/* The online softmax of one block's scores sc (g, DEC_KB; nb valid): the
 * running max and sum per head in part, the states rescaled, sc turned
 * into probabilities. */
static void dec_softmax(float *part, const struct kv_attn_layout *L, const struct dec_scratch *X,
                        float *sc, int32_t d, int32_t nb, int32_t msum_ng)
{
    const int32_t g = L->g;
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
}

/* Rows t .. t+nb-1 (nb <= DEC_KB) of a bound span into the running softmax
 * states part (g, slot) of one chunk; msum_ng: min terms pending per head
 * (rescaled with the states), 0 for none; E: masking and mass, or NULL. */
static void dec_block(float *part, const struct kv_attn_layout *L, const struct dec_scratch *X,
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
            if (j + run < nb)
                prefetch_run(dec_page_row(&D->k, pg + 1, D->koff, 0),
                             (size_t)(nb - j - run < page ? nb - j - run : page) * J->k.stride);
            J->scores(sc + j, J, &J->k, dec_page_row(&D->k, pg, D->koff, in),
                      D->k_qp ? dec_page_qp(&D->k, pg, D->kqoff, in) : NULL, run);
            j += run;
        }
    }

    if (E != NULL)
        dec_block_extra(sc, E, g, t, nb);

    dec_softmax(part, L, X, sc, d, nb, msum_ng);

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
            if (j + run < nb)
                prefetch_run(dec_page_row(&D->v, pg + 1, D->voff, 0),
                             (size_t)(nb - j - run < page ? nb - j - run : page) * J->v.stride);
            J->pv(part, L->slot, X->msum, X->w, sc + j, J, &J->v,
                  dec_page_row(&D->v, pg, D->voff, in),
                  D->v_qp ? dec_page_qp(&D->v, pg, D->vqoff, in) : NULL, run);
            j += run;
        }
    }
}

/*
 * K and V read together. Block by block, a thread reads 64 K rows, then the
 * same 64 V rows: one stream at a time. A pattern test on the AVX2 AMD
 * EPYC (sums over the K and V of 8 heads, 805 MB, 2 threads) read 15-20
 * GB/s that way, 12-15 with a burst prefetch of the next block, 23-25 with
 * the next block's K rows and this block's V rows alternating every 1-16
 * rows, and 21-29 with the K and V of two heads row by row: demand loads
 * from several streams at once, not prefetches. So here block i+1's scores
 * run in sub-runs of DEC_FUSE_ROWS rows between block i's value sub-runs,
 * and block i+1's softmax follows, once all of block i's values are in.
 *
 * Measured cold at T 32768, 14 interleaved rounds against the block loop
 * with its next-block prefetch (median of the per-round ratios, 2
 * threads): bf16 0.66x at head_dim 128 8/8, 0.83x at 128 32/8, 0.88x at 64
 * 8/8 and 64 32/8; f16 0.77x at 128 8/8 and 0.95-1.01x (the noise) at the
 * other three. f32, timed beside them and not fused, read 0.94-1.04x. An
 * earlier try fused f32 too: 0.85x at 64 8/8 but 1.11x at 128 8/8, so f32
 * keeps the loop below. From the L3 the short runs' calls cost more than
 * they overlap (hot, T 2048: 1.58-1.79x at 64 8/8, 1.12-1.15x at 128
 * 32/8), so only a call whose rows come from DRAM runs fused: past half
 * the L3 (dec_from_dram, as prefetch_block), or said evicted by its caller
 * (kv_attn_params.evicted), as in a model's step, whose weights stream
 * through the L3 between two calls of a layer. There, 6 interleaved rounds
 * of `kvlab sweep --strategies dynamic-f16,dynamic-bf16,quantized-int8
 * --seq-lens 512,2048,8192` gave attention 0.85-0.89x at T 2048 and 8192
 * (0.97-0.99x at 512); the step's prefetch_block stays off by that flag, as
 * it made int8's attention 1.13-1.22x. Sub-runs of 8-32 rows lost the cold
 * gain.
 *
 * The plain path only: rows read in place, no group parameters, no mask
 * or mass. Built for AVX2 without AVX-512 (as prefetch_run), where it was
 * measured. On the AVX-512 Xeon it read as the block loop (0.91-1.07x at
 * the same shapes, 4 rounds) and so did sub-runs of 8; there the kernels
 * ask for their rows ahead instead (kv_rows_ahead).
 */
#if defined(__AVX2__) && !defined(__AVX512F__)
#define DEC_FUSE_ROWS 4
#else
#define DEC_FUSE_ROWS 0
#endif

static int dtype_is_half(enum kv_dtype t) { return t == KV_DTYPE_F16 || t == KV_DTYPE_BF16; }

/* Whether span D's rows run fused (above): 16-bit rows on both sides, read
 * in place, and room for a second score buffer in ktile (g <= d). */
static int dec_fused(const struct dec_span *D, const struct dec_extra *Ep, int32_t g, int32_t d)
{
    return DEC_FUSE_ROWS > 0 && Ep == NULL && D->s->page_tokens == 0 && !D->k_generic &&
           !D->k_channel && D->J.k_tile == NULL && !D->v_generic && D->J.v_tile == NULL &&
           !D->k_qp && !D->v_qp && g <= d && dtype_is_half(D->s->k.dtype) &&
           dtype_is_half(D->s->v.dtype);
}

/* Rows [t0, end) of span D, fused as above: part as dec_block leaves it. */
static void dec_run_fused(float *part, const struct kv_attn_layout *L, struct dec_scratch *X,
                          const struct dec_span *D, int32_t d, int32_t t0, int32_t end,
                          int32_t msum_ng)
{
    const int32_t R = DEC_FUSE_ROWS > 0 ? DEC_FUSE_ROWS : DEC_KB;
    const struct kv_dec_job *J = &D->J;
    const struct kv_span *s = D->s;
    const char *kb = (const char *)s->k.data + D->koff, *vb = (const char *)s->v.data + D->voff;
    float *cur = X->sc, *nxt = X->ktile; /* (g, DEC_KB): ktile is free on this path */
    int32_t t = t0, nb = end - t < DEC_KB ? end - t : DEC_KB;
    J->scores(cur, J, &J->k, kb + (size_t)t * J->k.stride, NULL, nb);
    dec_softmax(part, L, X, cur, d, nb, msum_ng);
    for (int32_t tn = t + nb; tn < end; tn = t + nb) {
        const int32_t nn = end - tn < DEC_KB ? end - tn : DEC_KB;
        for (int32_t j = 0; j < nb || j < nn; j += R) {
            if (j < nn)
                J->scores(nxt + j, J, &J->k, kb + (size_t)(tn + j) * J->k.stride, NULL,
                          nn - j < R ? nn - j : R);
            if (j < nb)
                J->pv(part, L->slot, X->msum, X->w, cur + j, J, &J->v,
                      vb + (size_t)(t + j) * J->v.stride, NULL, nb - j < R ? nb - j : R);
        }
        dec_softmax(part, L, X, nxt, d, nn, msum_ng);
        float *tmp = cur;
        cur = nxt;
        nxt = tmp;
        t = tn;
        nb = nn;
    }
    J->pv(part, L->slot, X->msum, X->w, cur, J, &J->v, vb + (size_t)t * J->v.stride, NULL, nb);
}

/* part_i (d) += msum_i (ng) spread over each group's elements, msum <- 0 */
static void fold_msum(float *part, const struct kv_attn_layout *L, float *msum, int32_t d,
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
/* One split-K chunk of one (sequence, kv head)                             */

/*
 * Runs the online softmax of one split-K chunk: the visible keys of
 * (sequence b, kv head h) with indices [v0, v1) in span order (each span's
 * sinks, then its window). part (g, slot): per head acc (d), then m and l.
 */
static void dec_chunk(float *part, float *scratch, const struct kv_attn_layout *L,
                      const struct kv_attn_params *p, const struct kv_view *view, int32_t b,
                      int32_t h, int64_t v0, int64_t v1, const float *qs, int prefetch, int fuse,
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
                dec_bind(&D, s, b, h, g, d, qs, X.qsum, X.qx, fuse);
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
            if (fuse && dec_fused(&D, Ep, g, d)) {
                dec_run_fused(part, L, &X, &D, d, t0 + (int32_t)a, end, msum_ng);
                continue;
            }
            for (int32_t t = t0 + (int32_t)a; t < end; t += DEC_KB) {
                int32_t nb = end - t < DEC_KB ? end - t : DEC_KB;
                if (prefetch && !D.streams && t + DEC_KB < end)
                    prefetch_block(&D, t + DEC_KB,
                                   end - t - DEC_KB < DEC_KB ? end - t - DEC_KB : DEC_KB);
                dec_block(part, L, &X, &D, d, t, nb, msum_ng, Ep);
            }
        }
    }
    if (msum_group != 0) /* fold the min terms into the values */
        fold_msum(part, L, X.msum, d, msum_group);
}

/* ------------------------------------------------------------------------ */
/* The driver (scaled queries, split-K chunks, the merge)                   */

/* exp_sub_row over a row of any length (the mass rows of long views). */
static void exp_sub_rows(float *x, size_t n, float m)
{
    for (size_t j = 0; j < n; j += (size_t)INT32_MAX / 2) {
        const size_t k = n - j < (size_t)INT32_MAX / 2 ? n - j : (size_t)INT32_MAX / 2;
        (void)exp_sub_row(x + j, (int32_t)k, m);
    }
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

/* What the three loops of a decode call share (chunks of the decode team,
 * kv_pool.h; each loop's chunks are independent of one another). */
struct dec_job {
    float *out, *qs, *parts, *scratch;
    const float *q;
    const struct kv_attn_params *p;
    const struct kv_view *view;
    const struct kv_attn_layout *L;
    int prefetch; /* dec_from_dram: prefetch_block on */
    int fuse;     /* that, or the caller says the rows were evicted: dec_run_fused and
                     kv_rows_ahead on */
    size_t n_keys;
    int64_t rows_per_chunk;
    size_t per_thread; /* floats of scratch per worker (the largest of a many job's) */
};

/* Scaled queries (and the mass rows: -inf, a key nobody sees), rows
 * [c0, c1) * rows_per_chunk. */
static void dec_scale(void *ctx, int64_t c0, int64_t c1, int worker)
{
    const struct dec_job *J = ctx;
    const struct kv_attn_params *p = J->p;
    const int32_t d = p->head_dim;
    const int64_t rows = (int64_t)p->batch * p->n_heads;
    const int64_t r1 = c1 * J->rows_per_chunk < rows ? c1 * J->rows_per_chunk : rows;
    (void)worker;
    for (int64_t r = c0 * J->rows_per_chunk; r < r1; r++) {
        for (int32_t e = 0; e < d; e++)
            J->qs[(size_t)r * d + e] = J->q[(size_t)r * d + e] * p->scale;
        for (size_t j = 0; j < J->n_keys; j++)
            p->mass[(size_t)r * J->n_keys + j] = -INFINITY;
    }
}

/* Split-K chunk `it` of a call: (sequence, kv head, split). */
static void dec_item(const struct dec_job *J, int64_t it, int worker)
{
    const struct kv_attn_params *p = J->p;
    const struct kv_attn_layout *L = J->L;
    const int32_t d = p->head_dim, g = L->g, S = L->splits, H = p->n_heads;
    int64_t bh = it / S;
    int32_t s = (int32_t)(it % S), b = (int32_t)(bh / p->n_kv_heads),
            h = (int32_t)(bh % p->n_kv_heads);
    int64_t nv = dec_visible(p, J->view, b);
    int64_t chunk = (nv + S - 1) / S;
    chunk = (chunk + DEC_KB - 1) / DEC_KB * DEC_KB;
    int64_t v0 = s * chunk < nv ? s * chunk : nv;
    int64_t v1 = v0 + chunk < nv ? v0 + chunk : nv;
    size_t r0 = (size_t)b * H + (size_t)h * g;
    dec_chunk(J->parts + (size_t)it * g * L->slot, J->scratch + (size_t)worker * J->per_thread, L,
              p, J->view, b, h, v0, v1, J->qs + r0 * d, J->prefetch, J->fuse, J->n_keys);
}

/* Split-K chunks [c0, c1) of one call. */
static void dec_splits(void *ctx, int64_t c0, int64_t c1, int worker)
{
    for (int64_t it = c0; it < c1; it++)
        dec_item(ctx, it, worker);
}

/* Merge the splits of each (sequence, query head), rows [c0, c1) *
 * rows_per_chunk. */
static void dec_merge(void *ctx, int64_t c0, int64_t c1, int worker)
{
    const struct dec_job *J = ctx;
    const struct kv_attn_params *p = J->p;
    const struct kv_attn_layout *L = J->L;
    const int32_t d = p->head_dim, g = L->g, S = L->splits, H = p->n_heads;
    const int64_t rows = (int64_t)p->batch * H;
    const int64_t r1 = c1 * J->rows_per_chunk < rows ? c1 * J->rows_per_chunk : rows;
    const size_t n_keys = J->n_keys;
    (void)worker;
    for (int64_t r = c0 * J->rows_per_chunk; r < r1; r++) {
        int32_t b = (int32_t)(r / H), hq = (int32_t)(r % H), h = hq / g, i = hq % g;
        const float *st0 = J->parts + (((size_t)b * p->n_kv_heads + h) * S * g + i) * L->slot;
        const size_t sstride = (size_t)g * L->slot;
        float M = -INFINITY, lsum = 0.0f;
        for (int32_t s = 0; s < S; s++) {
            const float *st = st0 + s * sstride;
            if (st[d + 1] > 0.0f && st[d] > M)
                M = st[d];
        }
        float *o = J->out + (size_t)r * d;
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

/* Floats a row loop (scale, merge) touches below which it stays on the
 * calling thread: waking the team costs more than the loop. */
#define DEC_ROWS_PAR_MIN 32768

static void dec_rows(struct dec_job *J, kv_pool_fn fn, int64_t rows, double per_row)
{
    kv_pool_run_rows(J->p->n_threads, rows, per_row, DEC_ROWS_PAR_MIN, &J->rows_per_chunk, fn, J);
}

void kv_attn_decode(float *out, const float *q, const struct kv_attn_params *p,
                    const struct kv_view *view, float *ws, const struct kv_attn_layout *L)
{
    const int32_t d = p->head_dim, S = L->splits;
    const int64_t items = (int64_t)p->batch * p->n_kv_heads, rows = (int64_t)p->batch * p->n_heads;
    const int prefetch = dec_from_dram(p, view);
    struct dec_job J = {
        .out = out,
        .qs = ws,
        .parts = ws + L->qs,
        .scratch = ws + L->qs + L->parts,
        .q = q,
        .p = p,
        .view = view,
        .L = L,
        .prefetch = prefetch,
        .fuse = prefetch || p->evicted != 0,
        .n_keys = p->mass != NULL ? (size_t)kv_view_keys(view) : 0,
        .per_thread = L->per_thread,
    };
    dec_rows(&J, dec_scale, rows, (double)d + (double)J.n_keys);
    kv_pool_run(p->n_threads, items * S, dec_splits, &J);
    dec_rows(&J, dec_merge, rows, (double)S * d + 2.0 * (double)J.n_keys);
}

/* The calls of a many job, and where each call's chunks start in the job's
 * numbering (first[n] chunks in all). */
struct dec_many {
    const struct dec_job *J;
    const int64_t *first;
    int32_t n;
};

/* Chunks [c0, c1) of a many job: each its call's own chunk. */
static void dec_splits_many(void *ctx, int64_t c0, int64_t c1, int worker)
{
    const struct dec_many *M = ctx;
    int32_t i = 0;
    while (M->first[i + 1] <= c0)
        i++;
    for (int64_t it = c0; it < c1; it++) {
        while (M->first[i + 1] <= it)
            i++;
        dec_item(&M->J[i], it - M->first[i], worker);
    }
}

void kv_attn_decode_many(float *const *out, const float *const *q, const struct kv_attn_params *p,
                         const struct kv_view *view, int32_t n, float *ws,
                         const struct kv_attn_layout *L)
{
    struct dec_job J[KV_ATTN_MANY_MAX];
    int64_t first[KV_ATTN_MANY_MAX + 1];
    size_t off = 0, per = 0;
    double bytes = 0.0;
    int evicted = 0;
    first[0] = 0;
    for (int32_t i = 0; i < n; i++) {
        J[i] = (struct dec_job){.out = out[i], .qs = ws + off, .parts = ws + off + L[i].qs,
                                .q = q[i], .p = &p[i], .view = &view[i], .L = &L[i]};
        off += L[i].qs + L[i].parts;
        per = L[i].per_thread > per ? L[i].per_thread : per;
        bytes += (double)kv_attn_span_bytes(&p[i], &view[i]);
        evicted |= p[i].evicted != 0;
        first[i + 1] = first[i] + (int64_t)p[i].batch * p[i].n_kv_heads * L[i].splits;
    }
    /* from DRAM or not as one call over every cache would be */
    const int prefetch = bytes > 0.5 * (double)kv_l3_bytes();
    for (int32_t i = 0; i < n; i++) {
        J[i].scratch = ws + off;
        J[i].per_thread = per;
        J[i].prefetch = prefetch;
        J[i].fuse = prefetch || evicted;
        dec_rows(&J[i], dec_scale, (int64_t)p[i].batch * p[i].n_heads, (double)p[i].head_dim);
    }
    const struct dec_many M = {.J = J, .first = first, .n = n};
    kv_pool_run(p[0].n_threads, first[n], dec_splits_many, (void *)&M);
    for (int32_t i = 0; i < n; i++)
        dec_rows(&J[i], dec_merge, (int64_t)p[i].batch * p[i].n_heads,
                 (double)L[i].splits * p[i].head_dim);
}
