/*
 * demo.c - the capture side of `kvlab demo` (see demo.h): a strategy's run
 * driven one step at a time, and the probe that records what the attention
 * kernel saw. The renderer is demo_view.c, demo_walk.c and demo_compare.c.
 */
#include "demo.h"

#include <math.h>
#include <string.h>

#include "../../kernels/kv_attention.h"
#include "../../kernels/kv_ops.h"

/* ------------------------------------------------------------------------ */
/* Probe                                                                    */

static int32_t head_dim_of(const struct kv_model *m) { return m->cfg.dim / m->cfg.n_heads; }

/* x (head_dim) <- row t of one side of span s for (sequence b, kv head h),
 * whatever its dtype, axis or paging */
static void read_row(float *x, const struct kv_span *s, const struct kv_tensor *td, int32_t b,
                     int32_t h, int32_t t, int32_t hd)
{
    if (kv_span_row_float(x, s, td, b, h, t, hd) != KV_OK)
        for (int32_t i = 0; i < hd; i++) /* cannot happen: the view's own spans */
            x[i] = NAN;
}

/* Naive attention weights of the newest query of each sequence, mean over
 * heads: softmax(q k^T * scale) over the visible keys, dequantizing codes. */
static void capture_weights(struct kv_demo_run *R, struct kv_demo_layer *lc, const float *q,
                            const struct kv_attn_params *p, const struct kv_view *v)
{
    const int32_t hd = p->head_dim, H = p->n_heads, grp = H / p->n_kv_heads;
    for (int32_t b = 0; b < p->batch; b++) {
        float *w = lc->w + (size_t)b * R->max_pos;
        for (int32_t s = 0; s < R->max_pos; s++)
            w[s] = -1.0f;
        const int32_t i = p->n_q - 1, qp = p->q_pos0 + i;
        for (int32_t h = 0; h < H; h++) {
            const int32_t kvh = h / grp;
            int32_t nk = 0;
            for (int32_t si = 0; si < v->n_spans; si++) {
                const struct kv_span *sp = &v->spans[si];
                for (int32_t t = 0; t < sp->n_tokens && nk < R->max_pos; t++) {
                    const int64_t s = kv_span_pos(sp, b, kvh, t);
                    int vis = kv_attn_key_visible(&v->mask, b, qp, s);
                    if (!vis || s < 0 || s >= R->max_pos)
                        continue;
                    R->kspan[nk] = si;
                    R->ktok[nk] = t;
                    R->kpos[nk++] = (int32_t)s;
                }
            }
            if (nk == 0)
                continue;
            const float *qv = q + (((size_t)b * p->n_q + (size_t)i) * H + (size_t)h) * hd;
            double mx = -INFINITY;
            for (int32_t k = 0; k < nk; k++) {
                const struct kv_span *sp = &v->spans[R->kspan[k]];
                read_row(R->row, sp, &sp->k, b, kvh, R->ktok[k], hd);
                double d = 0.0;
                for (int32_t e = 0; e < hd; e++)
                    d += (double)qv[e] * R->row[e];
                R->scores[k] = (float)(d * p->scale);
                if (R->scores[k] > mx)
                    mx = R->scores[k];
            }
            double sum = 0.0;
            for (int32_t k = 0; k < nk; k++)
                sum += exp(R->scores[k] - mx);
            for (int32_t k = 0; k < nk; k++) {
                float pw = (float)(exp(R->scores[k] - mx) / sum) / (float)H;
                int32_t s = R->kpos[k];
                w[s] = (w[s] < 0.0f ? 0.0f : w[s]) + pw;
            }
        }
    }
}

/* Largest half step scale/2 of the qparams of row t of a quantized side. */
static float half_step_of(const struct kv_span *s, const struct kv_tensor *td, int32_t h,
                          int32_t t, int32_t hd)
{
    int32_t n = 0;
    const struct kv_qparams *qp = kv_span_row_qparams(s, td, 0, h, t, hd, &n);
    float m = 0.0f;
    for (int32_t g = 0; g < n; g++)
        if (qp[g].scale / 2 > m)
            m = qp[g].scale / 2;
    return m;
}

static void probe(void *user, int32_t layer, const float *q, const struct kv_attn_params *p,
                  const struct kv_view *v)
{
    struct kv_demo_run *R = user;
    if (!R->capture)
        return;
    struct kv_demo_layer *lc = &R->lc[layer];
    const int32_t hd = p->head_dim, kvd = p->n_kv_heads * hd, M = R->max_pos;
    lc->ap = *p;
    lc->mask = v->mask;
    lc->n_spans = v->n_spans;
    lc->per_head = 0;
    for (int32_t si = 0; si < v->n_spans; si++)
        lc->per_head |= v->spans[si].pos != NULL;
    memset(lc->held, 0, (size_t)M);
    memset(lc->held_q, 0, (size_t)M);
    float *hist = R->hist + (size_t)layer * M * 2 * kvd;
    unsigned char *seen = R->seen + (size_t)layer * M;
    lc->q_pos = lc->q_newest = -1;
    lc->q_dtype = KV_DTYPE_F32;
    for (int32_t si = 0; si < v->n_spans; si++) {
        const struct kv_span *s = &v->spans[si];
        const int lossy = kv_type_traits[s->k.dtype].has_qparams ||
                          kv_type_traits[s->v.dtype].has_qparams;
        if (lossy)
            lc->q_dtype = kv_type_traits[s->k.dtype].has_qparams ? s->k.dtype : s->v.dtype;
        /* positions per kv head (a span with a position table, h2o, keeps
         * different ones in each): held = held by any head */
        for (int32_t h = 0; h < p->n_kv_heads; h++)
            for (int32_t t = 0; t < s->n_tokens; t++) {
                const int64_t pos64 = kv_span_pos(s, 0, h, t);
                if (pos64 < 0 || pos64 >= M)
                    continue;
                const int32_t pos = (int32_t)pos64;
                lc->held[pos] = 1;
                if (lossy) {
                    lc->held_q[pos] = 1;
                    if (pos > lc->q_newest)
                        lc->q_newest = pos;
                    if (seen[pos] == 1 && pos > lc->q_pos)
                        lc->q_pos = pos;
                    continue;
                }
                if (seen[pos] == 1)
                    continue;
                read_row(hist + ((size_t)pos * 2) * kvd + (size_t)h * hd, s, &s->k, 0, h, t, hd);
                read_row(hist + ((size_t)pos * 2 + 1) * kvd + (size_t)h * hd, s, &s->v, 0, h, t,
                         hd);
                seen[pos] = 2; /* recorded for some heads in this call */
            }
    }
    for (int32_t pos = 0; pos < M; pos++)
        seen[pos] = seen[pos] != 0;
    /* Round-trip error of the newest quantized row we hold an f32 copy of. */
    lc->q_err = lc->q_half_step = 0.0f;
    for (int32_t si = 0; si < v->n_spans && lc->q_pos >= 0; si++) {
        const struct kv_span *s = &v->spans[si];
        int32_t t = lc->q_pos - s->pos0;
        if (s->pos != NULL || t < 0 || t >= s->n_tokens)
            continue; /* (quantized spans are in position order) */
        for (int kv = 0; kv < 2; kv++) {
            const struct kv_tensor *td = kv ? &s->v : &s->k;
            if (!kv_type_traits[td->dtype].has_qparams)
                continue;
            for (int32_t h = 0; h < p->n_kv_heads; h++) {
                read_row(R->row, s, td, 0, h, t, hd);
                const float *x = hist + ((size_t)lc->q_pos * 2 + (size_t)kv) * kvd +
                                 (size_t)h * hd;
                for (int32_t e = 0; e < hd; e++) {
                    float d = fabsf(R->row[e] - x[e]);
                    if (d > lc->q_err)
                        lc->q_err = d;
                }
                float hs = half_step_of(s, td, h, t, hd);
                if (hs > lc->q_half_step)
                    lc->q_half_step = hs;
            }
        }
    }
    capture_weights(R, lc, q, p, v);
}

/* ------------------------------------------------------------------------ */
/* Runs                                                                     */

void kv_demo_run_destroy(struct kv_demo_run *R)
{
    if (R->lc != NULL) {
        for (int32_t l = 0; l < R->m->cfg.n_layers; l++) {
            kv_free(R->lc[l].held);
            kv_free(R->lc[l].held_q);
            kv_free(R->lc[l].prev);
            kv_free(R->lc[l].w);
        }
    }
    kv_free(R->lc);
    kv_free(R->hist);
    kv_free(R->seen);
    kv_free(R->row);
    kv_free(R->scores);
    kv_free(R->kspan);
    kv_free(R->ktok);
    kv_free(R->kpos);
    kv_free(R->gone);
    kv_free(R->fed);
    kv_free(R->logits);
    kv_free(R->next);
    kv_runner_destroy(R->r);
    kv_cache_destroy(R->cache);
    memset(R, 0, sizeof *R);
}

enum kv_status kv_demo_run_create(struct kv_demo_run *R, const char *name, const void *params,
                                  const struct kv_model *m, const struct kv_cache_config *cc,
                                  int32_t B, int32_t P, int32_t max_pos, int capture)
{
    memset(R, 0, sizeof *R);
    R->name = name;
    R->m = m;
    R->B = B;
    R->P = P;
    R->max_pos = max_pos;
    R->capture = capture;
    if (kv_strategy_lookup(name, &R->ops, NULL, 0) != KV_OK)
        return KV_ERR_INVALID;
    void *own = NULL; /* the preset's parameters when none are given */
    if (params == NULL && R->ops->params_size > 0) {
        own = kv_alloc(R->ops->params_size);
        if (own == NULL)
            return KV_ERR_NOMEM;
        kv_strategy_lookup(name, &R->ops, own, R->ops->params_size);
        params = own;
    }
    R->keeps = (R->ops->caps & KV_CAP_KEEPS_HISTORY) != 0;
    enum kv_status s = kv_cache_create(&R->cache, R->ops, cc, params);
    kv_free(own);
    if (s != KV_OK)
        return s;
    s = kv_runner_create(&R->r, m, B, R->keeps ? P : max_pos, 1);
    if (s != KV_OK)
        return s;
    kv_runner_set_probe(R->r, probe, R);
    const size_t M = (size_t)max_pos, L = (size_t)m->cfg.n_layers;
    const size_t kvd = (size_t)m->cfg.n_kv_heads * (size_t)head_dim_of(m);
    R->fed = kv_alloc((size_t)B * M * sizeof *R->fed);
    R->logits = kv_alloc((size_t)B * (size_t)m->cfg.vocab_size * sizeof *R->logits);
    R->next = kv_alloc((size_t)B * sizeof *R->next);
    R->lc = kv_alloc(L * sizeof *R->lc);
    R->hist = kv_alloc(L * M * 2 * kvd * sizeof *R->hist);
    R->seen = kv_alloc(L * M);
    R->row = kv_alloc((size_t)head_dim_of(m) * sizeof *R->row);
    R->scores = kv_alloc(M * sizeof *R->scores);
    R->kspan = kv_alloc(M * sizeof *R->kspan);
    R->ktok = kv_alloc(M * sizeof *R->ktok);
    R->kpos = kv_alloc(M * sizeof *R->kpos);
    R->gone = kv_alloc(M);
    if (!R->fed || !R->logits || !R->next || !R->lc || !R->hist || !R->seen || !R->row ||
        !R->scores || !R->kspan || !R->ktok || !R->kpos || !R->gone)
        return KV_ERR_NOMEM;
    for (size_t l = 0; l < L; l++) {
        R->lc[l].held = kv_alloc(M);
        R->lc[l].held_q = kv_alloc(M);
        R->lc[l].prev = kv_alloc(M);
        R->lc[l].w = kv_alloc((size_t)B * M * sizeof(float));
        if (!R->lc[l].held || !R->lc[l].held_q || !R->lc[l].prev || !R->lc[l].w)
            return KV_ERR_NOMEM;
    }
    return KV_OK;
}

/*
 * Step `step` over seq (B rows of stride `stride`, T = P + step tokens known):
 * step 0 feeds the prompt; a decode step feeds the newest token to a cache,
 * or the whole sequence again (after a reset) when the strategy keeps none.
 */
enum kv_status kv_demo_run_step(struct kv_demo_run *R, int32_t step, const int32_t *seq,
                                int32_t stride, const int32_t *pad)
{
    const int32_t T = R->P + step;
    int32_t n, pos0;
    if (step == 0 || !R->keeps) {
        n = T;
        pos0 = 0;
    } else {
        n = 1;
        pos0 = T - 1;
    }
    for (int32_t b = 0; b < R->B; b++)
        memcpy(R->fed + (size_t)b * n, seq + (size_t)b * stride + pos0,
               (size_t)n * sizeof(int32_t));
    for (int32_t l = 0; l < R->m->cfg.n_layers; l++)
        memcpy(R->lc[l].prev, R->lc[l].held, (size_t)R->max_pos);
    R->copied_before = kv_cache_copied_bytes(R->cache);
    enum kv_status s = KV_OK;
    if (!R->keeps)
        s = kv_cache_reset(R->cache);
    memset(&R->st, 0, sizeof R->st);
    int64_t t0 = kv_now_ns();
    if (s == KV_OK)
        s = kv_forward(R->r, R->m, R->cache, R->fed, n, pos0, pad, R->logits, &R->st);
    R->step_ns = kv_now_ns() - t0;
    if (s != KV_OK)
        return s;
    R->n_fed = n;
    R->pos0 = pos0;
    for (int32_t b = 0; b < R->B; b++)
        R->next[b] = kv_argmax(R->logits + (size_t)b * R->m->cfg.vocab_size,
                               R->m->cfg.vocab_size);
    R->total.flops.gemm += R->st.flops.gemm;
    R->total.flops.attn += R->st.flops.attn;
    R->total.flops.softmax += R->st.flops.softmax;
    R->total.flops.norm += R->st.flops.norm;
    R->total.flops.other += R->st.flops.other;
    R->total.tokens_fed += R->st.tokens_fed;
    return KV_OK;
}

