/*
 * kv_attn_prefill.c - the attention kernel's prefill shape (n_q > 1,
 * kv_attention.c calls it), which is GEMM-bound: a tile of queries (times
 * the heads of a GQA group) against key tiles, S = Q K^T and O += P V
 * through cblas_sgemm, an online softmax between them.
 *
 * The design decision that matters: no n_q x n_keys matrix exists. Key
 * tiles nobody sees are never visited, tiles on the diagonal are masked.
 * Quantized (and paged) key tiles are dequantized into a tile buffer first
 * (GEMM-bound, the conversion is small next to the GEMM). The tiles are
 * chunks of the step's thread team (kv_pool.h) and their GEMMs run in the
 * thread that claimed them: callers keep OpenBLAS at one thread
 * (openblas_set_num_threads(1)) so the two do not fight.
 */
#include "kv_attention_impl.h"
#include "kv_pool.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Rows and masks of a tile                                                 */

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

/* ------------------------------------------------------------------------ */
/* One tile of queries                                                      */

/* The tile's buffers in the thread's scratch. */
struct pre_bufs {
    float *Q, *O, *S, *mx, *ls, *Kt, *Vt;
};

static struct pre_bufs pre_bufs_of(float *my, const struct kv_attn_layout *L, int32_t d)
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
                          const struct kv_attn_layout *L, const struct pre_bufs *B, int32_t b,
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
                     const struct kv_view *view, const struct kv_attn_layout *L, float *my,
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

/* ------------------------------------------------------------------------ */
/* The driver: tiles over threads                                           */

struct pre_job {
    float *out, *scratch;
    const float *q;
    const struct kv_attn_params *p;
    const struct kv_view *view;
    const struct kv_attn_layout *L;
    int32_t n_tiles;
    int64_t bh_n;
    size_t n_keys;
};

/* With mass rows: the tiles of one (b, h) add into the same mass rows, so
 * a chunk is one (b, h) with all its tiles, after zeroing its rows. */
static void pre_bh_chunks(void *ctx, int64_t c0, int64_t c1, int worker)
{
    const struct pre_job *J = ctx;
    const struct kv_attn_params *p = J->p;
    const struct kv_attn_layout *L = J->L;
    float *my = J->scratch + (size_t)worker * L->per_thread;
    const size_t g = (size_t)L->g;
    for (int64_t bh = c0; bh < c1; bh++) {
        const int32_t b = (int32_t)(bh / p->n_kv_heads), h = (int32_t)(bh % p->n_kv_heads);
        memset(p->mass + ((size_t)b * p->n_heads + (size_t)h * g) * J->n_keys, 0,
               g * J->n_keys * sizeof(float));
        for (int32_t tile = 0; tile < J->n_tiles; tile++) {
            const int32_t i0 = tile * L->qt;
            const int32_t nq = p->n_q - i0 < L->qt ? p->n_q - i0 : L->qt;
            pre_tile(J->out, J->q, p, J->view, L, my, b, h, i0, nq, J->n_keys);
        }
    }
}

/* Without: a chunk is one (tile, b, h); later query tiles see more keys,
 * so they come first (chunks are claimed in order). */
static void pre_tile_chunks(void *ctx, int64_t c0, int64_t c1, int worker)
{
    const struct pre_job *J = ctx;
    const struct kv_attn_params *p = J->p;
    const struct kv_attn_layout *L = J->L;
    float *my = J->scratch + (size_t)worker * L->per_thread;
    for (int64_t it = c0; it < c1; it++) {
        int32_t tile = J->n_tiles - 1 - (int32_t)(it / J->bh_n);
        int64_t bh = it % J->bh_n;
        int32_t i0 = tile * L->qt;
        int32_t nq = p->n_q - i0 < L->qt ? p->n_q - i0 : L->qt;
        pre_tile(J->out, J->q, p, J->view, L, my, (int32_t)(bh / p->n_kv_heads),
                 (int32_t)(bh % p->n_kv_heads), i0, nq, 0);
    }
}

void kv_attn_prefill(float *out, const float *q, const struct kv_attn_params *p,
                     const struct kv_view *view, float *ws, const struct kv_attn_layout *L)
{
    struct pre_job J = {
        .out = out,
        .scratch = ws + L->qs,
        .q = q,
        .p = p,
        .view = view,
        .L = L,
        .n_tiles = (p->n_q + L->qt - 1) / L->qt,
        .bh_n = (int64_t)p->batch * p->n_kv_heads,
        .n_keys = p->mass != NULL ? (size_t)kv_view_keys(view) : 0,
    };
    if (p->mass != NULL)
        kv_pool_run(p->n_threads, J.bh_n, pre_bh_chunks, &J);
    else
        kv_pool_run(p->n_threads, J.bh_n * J.n_tiles, pre_tile_chunks, &J);
}
