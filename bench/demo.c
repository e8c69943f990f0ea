/*
 * demo.c - the capture side of `kvlab demo` (see demo.h): a strategy's run
 * driven one step at a time, and the probe that records what the attention
 * kernel saw. The renderer is cmd_demo.c.
 */
#include "demo.h"

#include <math.h>
#include <string.h>

#include "../kernels/kv_ops.h"
#include "../kernels/kv_quant.h"

/* ------------------------------------------------------------------------ */
/* Probe                                                                    */

static int32_t head_dim_of(const struct kv_model *m) { return m->cfg.dim / m->cfg.n_heads; }

/* Naive attention weights of the newest query of each sequence, mean over
 * heads: softmax(q k^T * scale) over the visible keys, dequantizing codes. */
static void capture_weights(struct kv_demo_run *R, struct kv_demo_layer *lc, const float *q,
                            const struct kv_attn_params *p, const struct kv_span *sp,
                            int32_t ns)
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
            for (int32_t si = 0; si < ns; si++) {
                for (int32_t t = 0; t < sp[si].n_tokens && nk < R->max_pos; t++) {
                    int32_t s = sp[si].pos0 + t;
                    int vis = kv_attn_key_visible(p, b, qp, s);
                    if (!vis || s >= R->max_pos)
                        continue;
                    size_t off = (size_t)b * sp[si].seq_stride +
                                 (size_t)kvh * sp[si].head_stride + (size_t)t * sp[si].row_stride;
                    R->kptr[nk] = (const char *)sp[si].k + off;
                    R->kdt[nk] = sp[si].dtype;
                    R->kqp[nk] = sp[si].dtype == KV_DTYPE_F32 ? NULL
                        : (const struct kv_qparams *)((const char *)sp[si].k_qp +
                              (size_t)b * sp[si].qp_seq_stride +
                              (size_t)kvh * sp[si].qp_head_stride +
                              (size_t)t * sp[si].qp_row_stride);
                    R->kpos[nk++] = s;
                }
            }
            if (nk == 0)
                continue;
            const float *qv = q + (((size_t)b * p->n_q + (size_t)i) * H + (size_t)h) * hd;
            double mx = -INFINITY;
            for (int32_t k = 0; k < nk; k++) {
                const float *kr = R->kptr[k];
                if (R->kdt[k] != KV_DTYPE_F32) {
                    kv_dequantize_row(R->row, R->kptr[k], R->kqp[k], R->kdt[k], hd, p->group);
                    kr = R->row;
                }
                double d = 0.0;
                for (int32_t e = 0; e < hd; e++)
                    d += (double)qv[e] * kr[e];
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

static void probe(void *user, int32_t layer, const float *q, const struct kv_attn_params *p,
                  const struct kv_span *sp, int32_t ns)
{
    struct kv_demo_run *R = user;
    if (!R->capture)
        return;
    struct kv_demo_layer *lc = &R->lc[layer];
    const int32_t hd = p->head_dim, kvd = p->n_kv_heads * hd, M = R->max_pos;
    lc->ap = *p;
    lc->n_spans = ns;
    memset(lc->held, 0, (size_t)M);
    memset(lc->held_q, 0, (size_t)M);
    float *hist = R->hist + (size_t)layer * M * 2 * kvd;
    unsigned char *seen = R->seen + (size_t)layer * M;
    lc->q_pos = lc->q_newest = -1;
    for (int32_t si = 0; si < ns; si++) {
        const struct kv_span *s = &sp[si];
        for (int32_t t = 0; t < s->n_tokens; t++) {
            int32_t pos = s->pos0 + t;
            if (pos < 0 || pos >= M)
                continue;
            lc->held[pos] = 1;
            if (s->dtype != KV_DTYPE_F32) {
                lc->held_q[pos] = 1;
                if (pos > lc->q_newest)
                    lc->q_newest = pos;
                if (seen[pos] && pos > lc->q_pos)
                    lc->q_pos = pos;
                continue;
            }
            if (seen[pos])
                continue;
            for (int32_t h = 0; h < p->n_kv_heads; h++) {
                size_t off = (size_t)h * s->head_stride + (size_t)t * s->row_stride;
                memcpy(hist + ((size_t)pos * 2) * kvd + (size_t)h * hd,
                       (const char *)s->k + off, (size_t)hd * sizeof(float));
                memcpy(hist + ((size_t)pos * 2 + 1) * kvd + (size_t)h * hd,
                       (const char *)s->v + off, (size_t)hd * sizeof(float));
            }
            seen[pos] = 1;
        }
    }
    /* Round-trip error of the newest quantized row we hold an f32 copy of. */
    lc->q_err = lc->q_half_step = 0.0f;
    for (int32_t si = 0; si < ns && lc->q_pos >= 0; si++) {
        const struct kv_span *s = &sp[si];
        int32_t t = lc->q_pos - s->pos0;
        if (s->dtype == KV_DTYPE_F32 || t < 0 || t >= s->n_tokens)
            continue;
        for (int kv = 0; kv < 2; kv++) {
            const char *codes = kv ? s->v : s->k;
            const char *qps = (const char *)(kv ? s->v_qp : s->k_qp);
            for (int32_t h = 0; h < p->n_kv_heads; h++) {
                const struct kv_qparams *qp = (const struct kv_qparams *)(
                    qps + (size_t)h * s->qp_head_stride + (size_t)t * s->qp_row_stride);
                kv_dequantize_row(R->row, codes + (size_t)h * s->head_stride +
                                              (size_t)t * s->row_stride,
                                  qp, s->dtype, hd, p->group);
                const float *x = hist + ((size_t)lc->q_pos * 2 + (size_t)kv) * kvd +
                                 (size_t)h * hd;
                for (int32_t e = 0; e < hd; e++) {
                    float d = fabsf(R->row[e] - x[e]);
                    if (d > lc->q_err)
                        lc->q_err = d;
                }
                for (int32_t g = 0; g < hd / p->group; g++) {
                    if (qp[g].scale / 2 > lc->q_half_step)
                        lc->q_half_step = qp[g].scale / 2;
                }
            }
        }
    }
    capture_weights(R, lc, q, p, sp, ns);
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
    kv_free(R->kptr);
    kv_free(R->kqp);
    kv_free(R->kdt);
    kv_free(R->kpos);
    kv_free(R->gone);
    kv_free(R->fed);
    kv_free(R->logits);
    kv_free(R->next);
    kv_runner_destroy(R->r);
    kv_cache_destroy(R->cache);
    memset(R, 0, sizeof *R);
}

enum kv_status kv_demo_run_create(struct kv_demo_run *R, const char *name,
                                  const struct kv_model *m, const struct kv_cache_config *cc,
                                  int32_t B, int32_t P, int32_t max_pos, int capture)
{
    memset(R, 0, sizeof *R);
    R->name = name;
    R->ops = kv_strategy_find(name);
    R->m = m;
    R->B = B;
    R->P = P;
    R->max_pos = max_pos;
    R->capture = capture;
    if (R->ops == NULL)
        return KV_ERR_INVALID;
    R->keeps = R->ops->keeps_history != 0;
    enum kv_status s = kv_cache_create(&R->cache, R->ops, cc);
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
    R->kptr = kv_alloc(M * sizeof *R->kptr);
    /* kqp holds pointers; clang-tidy takes sizeof *kqp for a mistake */
    R->kqp = kv_alloc(M * sizeof *R->kqp); // NOLINT(bugprone-sizeof-expression)
    R->kdt = kv_alloc(M * sizeof *R->kdt);
    R->kpos = kv_alloc(M * sizeof *R->kpos);
    R->gone = kv_alloc(M);
    if (!R->fed || !R->logits || !R->next || !R->lc || !R->hist || !R->seen || !R->row ||
        !R->scores || !R->kptr || !R->kqp || !R->kdt || !R->kpos || !R->gone)
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

