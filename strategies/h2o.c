/*
 * h2o.c - heavy hitters plus a recent window (H2O, Zhang et al. 2023): per
 * layer and per (sequence, kv head), a budget of `heavy` kept tokens chosen
 * by accumulated attention and a ring of the `window` most recent ones;
 * memory is flat at heavy + window tokens.
 *
 * The score of a kept token is the attention probability it has received,
 * summed over every query since it arrived and over the query heads that
 * share its kv head. It comes out of the attention kernel itself: the
 * strategy has KV_CAP_ATTN_MASS, so the model hands each view's mass per
 * key back through observe() (kernels/kv_attention.h defines it). Each
 * decode step the token leaving the ring competes with the heavy set: if
 * the heavy set is full, whichever of it and the lowest-scored heavy token
 * scores less is evicted (H2O's greedy rule), per (sequence, kv head), so
 * every head keeps its own tokens.
 *
 * Per layer, one allocation made at init: heavy K and V (batch, n_kv_heads,
 * heavy, head_dim), the ring's K and V (batch, n_kv_heads, window, head_dim),
 * then the heavy tokens' positions (int32) and scores, the ring's scores and
 * each (b, h)'s lowest-scored heavy slot. Heavy slots are filled in place
 * (an evicted token's slot takes the newcomer), so they are in no order:
 * the view's heavy span carries a position table (kv_span.pos) and the
 * kernel masks it key by key. The view is that span, then the ring's one or
 * two spans; its mask is causal only (every kept key is visible).
 *
 * The design decisions:
 *   - The lowest heavy score of each (b, h) is found while observe adds the
 *     masses (one pass), so update only compares; without observe (a caller
 *     that never passes masses) update scans, every score stays 0, the
 *     heavy slots keep the first tokens that left the window, and the cache
 *     stays exact for the keys it keeps.
 *   - A prompt longer than heavy + window (into an empty cache) attends in
 *     full over the caller's k_new/v_new (all of it visible, causal), and
 *     the heavy set is picked from that prompt's own attention when its
 *     masses arrive (observe, while k_new/v_new are alive): the top `heavy`
 *     scores among the tokens older than the window (a min-heap in the
 *     heavy slots' own arrays: no update or observe allocates). Until then (and for
 *     good, if observe never comes) the heavy slots hold the tokens right
 *     before the window. This is H2O's prompt phase: full attention, then
 *     compress.
 *   - Other multi-token updates are taken while they evict nothing (the
 *     cache holds at most heavy + window); one that would evict is refused
 *     with KV_ERR_INVALID and nothing written, as sliding does.
 *   - Resident bytes count everything allocated: rows, positions, scores.
 */
#include <stdio.h>
#include <stdlib.h>

#include "kv_store.h"

/* ------------------------------------------------------------------------ */
/* Parameters                                                               */

struct h2o_params {
    int32_t heavy;  /* tokens kept by score (>= 1) */
    int32_t window; /* recent tokens always kept (>= 1) */
};

static const struct kv_param h2o_param_table[] = {
    {.name = "heavy", .flag = "--heavy", .type = KV_PARAM_INT, .lo = 1, .hi = 1 << 30,
     .def = 256, .help = "tokens kept by accumulated attention (heavy hitters)",
     .scales_memory = 1, .offset = offsetof(struct h2o_params, heavy)},
    {.name = "window", .flag = "--window", .type = KV_PARAM_INT, .lo = 1, .hi = 1 << 30,
     .def = 256, .help = "ring size in tokens: keys older than this are evicted",
     .scales_memory = 1, .offset = offsetof(struct h2o_params, window)},
};

static int h2o_describe(const struct kv_cache_config *cfg, const void *params, char *buf,
                        size_t n)
{
    const struct h2o_params *p = params;
    (void)cfg;
    return snprintf(buf, n, "%s (heavy %d, window %d)", kv_strategy_h2o.description, p->heavy,
                    p->window);
}

/* ------------------------------------------------------------------------ */
/* State                                                                    */

struct h2o_layer {
    int32_t len;          /* tokens seen (the next pos0) */
    int32_t n_heavy;      /* heavy slots in use (the same in every (b, h)) */
    int32_t min_valid;    /* heavy_min holds each (b, h)'s lowest slot */
    const float *pk, *pv; /* pass-through view of a long prompt (caller's) */
    int32_t pn;           /* 0: the cache's own storage serves the view */
    int32_t pending;      /* 1: the prompt's heavy set awaits its masses */
};

/* One layer's storage, at byte offsets in its block. */
struct h2o_parts {
    size_t hk, hv, rk, rv, pos, hscore, rscore, hmin, total;
};

struct h2o_state {
    struct kv_cache_config cfg;
    struct h2o_params p;
    struct h2o_parts part;
    size_t bh;                  /* batch * n_kv_heads */
    char *buf;                  /* (n_layers) blocks of part.total bytes */
    struct h2o_layer *layers;   /* (n_layers) */
    size_t copied;
};

static enum kv_status h2o_parts_of(const struct kv_cache_config *cfg, const struct h2o_params *p,
                                   struct h2o_parts *o)
{
    const size_t row = kv_store_row_bytes(cfg);
    size_t hh, rh, bh;
    if (kv_store_bytes(&hh, cfg, (size_t)p->heavy, row) != KV_OK ||
        kv_store_bytes(&rh, cfg, (size_t)p->window, row) != KV_OK ||
        kv_mul_size(&bh, (size_t)cfg->batch, (size_t)cfg->n_kv_heads) != KV_OK ||
        hh > (size_t)PTRDIFF_MAX / 8 || rh > (size_t)PTRDIFF_MAX / 8)
        return KV_ERR_OVERFLOW;
    /* int32/float arrays after the rows, each rounded to 64 bytes */
    const size_t hv = (bh * (size_t)p->heavy * 4 + 63) & ~(size_t)63;
    const size_t rv = (bh * (size_t)p->window * 4 + 63) & ~(size_t)63;
    const size_t mv = (bh * 4 + 63) & ~(size_t)63;
    o->hk = 0;
    o->hv = hh;
    o->rk = 2 * hh;
    o->rv = 2 * hh + rh;
    o->pos = 2 * hh + 2 * rh;
    o->hscore = o->pos + hv;
    o->rscore = o->hscore + hv;
    o->hmin = o->rscore + rv;
    o->total = o->hmin + mv;
    return o->total > (size_t)PTRDIFF_MAX / 2 ? KV_ERR_OVERFLOW : KV_OK;
}

static void *h2o_at(const struct h2o_state *s, int32_t l, size_t off)
{
    return s->buf + (size_t)l * s->part.total + off;
}
#define H2O_F(s, l, f) ((float *)h2o_at(s, l, (s)->part.f))
#define H2O_I(s, l, f) ((int32_t *)h2o_at(s, l, (s)->part.f))

static enum kv_status h2o_init(void *state, const struct kv_cache_config *cfg, const void *params)
{
    struct h2o_state *s = state;
    s->cfg = *cfg;
    s->p = *(const struct h2o_params *)params;
    if (s->p.heavy < 1 || s->p.window < 1)
        return KV_ERR_INVALID;
    s->bh = (size_t)cfg->batch * (size_t)cfg->n_kv_heads;
    enum kv_status st = h2o_parts_of(cfg, &s->p, &s->part);
    if (st != KV_OK)
        return st;
    void *meta = NULL;
    st = kv_layered_alloc(&s->buf, &meta, s->part.total, sizeof *s->layers, cfg->n_layers);
    s->layers = meta;
    return st;
}

static void h2o_free(void *state)
{
    struct h2o_state *s = state;
    kv_layered_free(&s->buf, s->layers);
    s->layers = NULL;
}

static void h2o_reset(void *state)
{
    struct h2o_state *s = state;
    memset(s->layers, 0, (size_t)s->cfg.n_layers * sizeof *s->layers);
    s->copied = 0;
}

/* The heavy span, then the ring's two runs (or one span over the caller's). */
static int32_t h2o_max_spans(const struct kv_cache_config *cfg, const void *params)
{
    (void)cfg, (void)params;
    return 3;
}

/* ------------------------------------------------------------------------ */
/* Moving rows                                                              */

/* Row (b, h) of a (batch, n_kv_heads, cap, head_dim) store, slot t. */
static float *h2o_row(float *store, const struct h2o_state *s, size_t bh, int32_t cap, int32_t t)
{
    return store + (bh * (size_t)cap + (size_t)t) * (size_t)s->cfg.head_dim;
}

/* Heavy slot hs of (b, h) <- the ring token in slot rs (K, V, score) at
 * position pos. */
static void h2o_promote(struct h2o_state *s, int32_t l, size_t bh, int32_t hs, int32_t rs,
                        int32_t pos)
{
    const int32_t H = s->p.heavy, W = s->p.window;
    const size_t row = kv_store_row_bytes(&s->cfg);
    memcpy(h2o_row(H2O_F(s, l, hk), s, bh, H, hs), h2o_row(H2O_F(s, l, rk), s, bh, W, rs), row);
    memcpy(h2o_row(H2O_F(s, l, hv), s, bh, H, hs), h2o_row(H2O_F(s, l, rv), s, bh, W, rs), row);
    H2O_I(s, l, pos)[bh * (size_t)H + (size_t)hs] = pos;
    H2O_F(s, l, hscore)[bh * (size_t)H + (size_t)hs] = H2O_F(s, l, rscore)[bh * (size_t)W + (size_t)rs];
    s->copied += 2 * row;
}

/* The lowest-scored heavy slot of (b, h) (the first on ties). */
static int32_t h2o_argmin(const float *score, int32_t n)
{
    int32_t m = 0;
    for (int32_t i = 1; i < n; i++)
        if (score[i] < score[m])
            m = i;
    return m;
}

/*
 * The token at position p - W leaves the ring (p = the position about to
 * take its slot): into a free heavy slot, or, with the heavy set full, in
 * place of the lowest-scored heavy token of each (b, h) that scores less.
 */
static void h2o_leave_ring(struct h2o_state *s, int32_t l, int32_t leaving)
{
    struct h2o_layer *L = &s->layers[l];
    const int32_t H = s->p.heavy, W = s->p.window, rs = leaving % W;
    if (L->n_heavy < H) {
        for (size_t bh = 0; bh < s->bh; bh++)
            h2o_promote(s, l, bh, L->n_heavy, rs, leaving);
        L->n_heavy++;
        L->min_valid = 0;
        return;
    }
    const float *hscore = H2O_F(s, l, hscore), *rscore = H2O_F(s, l, rscore);
    int32_t *hmin = H2O_I(s, l, hmin);
    for (size_t bh = 0; bh < s->bh; bh++) {
        if (!L->min_valid)
            hmin[bh] = h2o_argmin(hscore + bh * (size_t)H, H);
        const int32_t m = hmin[bh];
        if (rscore[bh * (size_t)W + (size_t)rs] > hscore[bh * (size_t)H + (size_t)m]) {
            h2o_promote(s, l, bh, m, rs, leaving);
            hmin[bh] = h2o_argmin(hscore + bh * (size_t)H, H);
        }
    }
    L->min_valid = 1;
}

/* Writes the update's tokens [a, b) (positions pos0 + ...) into the ring,
 * scores 0, the token leaving each slot first. */
static void h2o_append(struct h2o_state *s, int32_t l, const float *k_new, const float *v_new,
                       int32_t n_new, int32_t pos0, int32_t a, int32_t b)
{
    const int32_t W = s->p.window;
    float *rscore = H2O_F(s, l, rscore);
    for (int32_t p = a; p < b; p++) {
        if (p >= W)
            h2o_leave_ring(s, l, p - W);
        kv_ring_put(H2O_F(s, l, rk), H2O_F(s, l, rv), W, 0, k_new, v_new, n_new, pos0, p, p + 1,
                    &s->cfg);
        for (size_t bh = 0; bh < s->bh; bh++)
            rscore[bh * (size_t)W + (size_t)(p % W)] = 0.0f;
        s->copied += kv_store_token_bytes(&s->cfg);
    }
}

/* Heavy slot hs of (b, h) <- token t of the caller's (batch, n, n_kv_heads,
 * head_dim) arrays (a prompt: position t), with score sc. */
static void h2o_take(struct h2o_state *s, int32_t l, size_t bh, int32_t hs, const float *k_new,
                     const float *v_new, int32_t n, int32_t t, float sc)
{
    const struct kv_cache_config *c = &s->cfg;
    const int32_t H = s->p.heavy;
    const size_t b = bh / (size_t)c->n_kv_heads, h = bh % (size_t)c->n_kv_heads;
    const size_t src = ((b * (size_t)n + (size_t)t) * (size_t)c->n_kv_heads + h) * (size_t)c->head_dim;
    const size_t row = kv_store_row_bytes(c);
    memcpy(h2o_row(H2O_F(s, l, hk), s, bh, H, hs), k_new + src, row);
    memcpy(h2o_row(H2O_F(s, l, hv), s, bh, H, hs), v_new + src, row);
    H2O_I(s, l, pos)[bh * (size_t)H + (size_t)hs] = t;
    H2O_F(s, l, hscore)[bh * (size_t)H + (size_t)hs] = sc;
    s->copied += 2 * row;
}

static enum kv_status h2o_update(void *state, int32_t layer, const float *k_new,
                                 const float *v_new, int32_t n_new, int32_t pos0)
{
    struct h2o_state *s = state;
    struct h2o_layer *l = &s->layers[layer];
    const int32_t H = s->p.heavy, W = s->p.window;
    if (pos0 != l->len)
        return KV_ERR_INVALID;
    const int64_t end = (int64_t)pos0 + n_new;
    const int evicts = end > (int64_t)H + W;
    if (n_new > 1 && l->len > 0 && evicts)
        return KV_ERR_INVALID; /* would evict keys these queries need */
    if (n_new > 1 && evicts) { /* a prompt longer than the budget: pass it through */
        /* the ring: the last W; the heavy slots, until the masses come:
         * the H tokens before them */
        kv_ring_put(H2O_F(s, layer, rk), H2O_F(s, layer, rv), W, 0, k_new, v_new, n_new, 0,
                    n_new - W, n_new, &s->cfg);
        s->copied += (size_t)W * kv_store_token_bytes(&s->cfg);
        float *rscore = H2O_F(s, layer, rscore);
        for (size_t i = 0; i < s->bh * (size_t)W; i++)
            rscore[i] = 0.0f;
        for (size_t bh = 0; bh < s->bh; bh++)
            for (int32_t j = 0; j < H; j++)
                h2o_take(s, layer, bh, j, k_new, v_new, n_new, n_new - W - H + j, 0.0f);
        l->n_heavy = H;
        l->min_valid = 0;
        l->pk = k_new;
        l->pv = v_new;
        l->pn = n_new;
        l->pending = 1;
        l->len = (int32_t)end;
        return KV_OK;
    }
    l->pn = 0;
    l->pending = 0;
    h2o_append(s, layer, k_new, v_new, n_new, pos0, pos0, (int32_t)end);
    l->len = (int32_t)end;
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* View                                                                     */

static int32_t h2o_ring_held(const struct h2o_state *s, const struct h2o_layer *l)
{
    return l->len < s->p.window ? l->len : s->p.window;
}

static int32_t h2o_view(const void *state, int32_t layer, struct kv_span *spans,
                        struct kv_mask *mask)
{
    const struct h2o_state *s = state;
    const struct h2o_layer *l = &s->layers[layer];
    const int32_t H = s->p.heavy, W = s->p.window;
    (void)mask; /* causal only: every kept key is visible */
    if (l->pn > 0) {
        spans[0] = kv_store_span_model(l->pk, l->pv, l->pn, l->len - l->pn, &s->cfg);
        return 1;
    }
    int32_t n = 0;
    if (l->n_heavy > 0) {
        spans[n] = kv_store_span(H2O_F(s, layer, hk), H2O_F(s, layer, hv), H, 0, l->n_heavy, 0,
                                 &s->cfg);
        spans[n].pos = H2O_I(s, layer, pos);
        spans[n].pos_head_stride = (size_t)H;
        spans[n].pos_seq_stride = (size_t)H * (size_t)s->cfg.n_kv_heads;
        n++;
    }
    const int32_t held = h2o_ring_held(s, l);
    n += kv_ring_spans(spans + n, H2O_F(s, layer, rk), H2O_F(s, layer, rv), W, 0, l->len - held,
                       l->len, &s->cfg);
    return n;
}

/* ------------------------------------------------------------------------ */
/* Scores                                                                   */

/* Sum over the g query heads of (b, h) of the mass of key j. */
static float h2o_key_mass(const float *mass, size_t row0, size_t n_keys, int32_t g, size_t j)
{
    float m = 0.0f;
    for (int32_t i = 0; i < g; i++)
        m += mass[(row0 + (size_t)i) * n_keys + j];
    return m;
}

/* Sift the min-heap (sc, ps) of n entries down from i (the lowest score on
 * top). */
static void h2o_sift(float *sc, int32_t *ps, int32_t n, int32_t i)
{
    for (;;) {
        int32_t m = i;
        const int32_t l = 2 * i + 1, r = l + 1;
        if (l < n && sc[l] < sc[m])
            m = l;
        if (r < n && sc[r] < sc[m])
            m = r;
        if (m == i)
            return;
        const float ts = sc[i];
        const int32_t tp = ps[i];
        sc[i] = sc[m];
        ps[i] = ps[m];
        sc[m] = ts;
        ps[m] = tp;
        i = m;
    }
}

/*
 * The prompt's masses: ring scores for its last W tokens, and its heavy
 * set: the H best-scored of the older ones (a min-heap of H kept in the
 * heavy slots' own score and position arrays, so nothing is allocated),
 * then their rows copied from the caller's k_new/v_new.
 */
static void h2o_choose_prompt(struct h2o_state *s, int32_t layer, const float *mass, int32_t g)
{
    struct h2o_layer *l = &s->layers[layer];
    const int32_t H = s->p.heavy, W = s->p.window, n = l->pn, old = n - W;
    float *rscore = H2O_F(s, layer, rscore);
    for (size_t bh = 0; bh < s->bh; bh++) {
        const size_t b = bh / (size_t)s->cfg.n_kv_heads, h = bh % (size_t)s->cfg.n_kv_heads;
        const size_t row0 = (b * (size_t)s->cfg.n_kv_heads + h) * (size_t)g;
        float *sc = H2O_F(s, layer, hscore) + bh * (size_t)H;
        int32_t *ps = H2O_I(s, layer, pos) + bh * (size_t)H;
        for (int32_t t = old; t < n; t++)
            rscore[bh * (size_t)W + (size_t)(t % W)] =
                h2o_key_mass(mass, row0, (size_t)n, g, (size_t)t);
        for (int32_t t = 0; t < old; t++) {
            const float m = h2o_key_mass(mass, row0, (size_t)n, g, (size_t)t);
            if (t < H) {
                sc[t] = m;
                ps[t] = t;
                if (t == H - 1)
                    for (int32_t i = H / 2 - 1; i >= 0; i--)
                        h2o_sift(sc, ps, H, i);
            } else if (m > sc[0]) {
                sc[0] = m;
                ps[0] = t;
                h2o_sift(sc, ps, H, 0);
            }
        }
        for (int32_t j = 0; j < H; j++)
            h2o_take(s, layer, bh, j, l->pk, l->pv, n, ps[j], sc[j]);
    }
    l->min_valid = 0;
    l->pending = 0;
}

/*
 * Adds the view's masses to the scores of the keys it showed (heavy slots
 * in view order, then the ring's tokens by position) and finds each (b, h)'s
 * lowest heavy slot on the way; or, for a prompt passed through, picks its
 * heavy set.
 */
static void h2o_observe(void *state, int32_t layer, const float *mass, int32_t n_heads)
{
    struct h2o_state *s = state;
    struct h2o_layer *l = &s->layers[layer];
    const int32_t H = s->p.heavy, W = s->p.window, g = n_heads / s->cfg.n_kv_heads;
    if (l->pn > 0) {
        if (l->pending)
            h2o_choose_prompt(s, layer, mass, g);
        return;
    }
    const int32_t held = h2o_ring_held(s, l), first = l->len - held;
    const size_t nk = (size_t)l->n_heavy + (size_t)held;
    float *hscore = H2O_F(s, layer, hscore), *rscore = H2O_F(s, layer, rscore);
    int32_t *hmin = H2O_I(s, layer, hmin);
    for (size_t bh = 0; bh < s->bh; bh++) {
        const size_t b = bh / (size_t)s->cfg.n_kv_heads, h = bh % (size_t)s->cfg.n_kv_heads;
        const size_t row0 = b * (size_t)n_heads + h * (size_t)g;
        float *hs = hscore + bh * (size_t)H;
        int32_t m = 0;
        for (int32_t j = 0; j < l->n_heavy; j++) {
            hs[j] += h2o_key_mass(mass, row0, nk, g, (size_t)j);
            if (hs[j] < hs[m])
                m = j;
        }
        hmin[bh] = m;
        for (int32_t t = 0; t < held; t++)
            rscore[bh * (size_t)W + (size_t)((first + t) % W)] +=
                h2o_key_mass(mass, row0, nk, g, (size_t)l->n_heavy + (size_t)t);
    }
    l->min_valid = l->n_heavy == H;
}

/* ------------------------------------------------------------------------ */
/* Accounting                                                               */

static int32_t h2o_seq_len(const void *state, int32_t layer)
{
    const struct h2o_state *s = state;
    return s->layers[layer].len;
}

static size_t h2o_resident_bytes(const void *state)
{
    const struct h2o_state *s = state;
    return s->part.total * (size_t)s->cfg.n_layers;
}

/* The heavy and recent rows held; the rest (slots not filled yet, and
 * the positions and scores beside them) is slack. */
static void h2o_stats(const void *state, struct kv_cache_stats *st)
{
    const struct h2o_state *s = state;
    const size_t heavy_row = (s->part.rk - s->part.hk) / (size_t)s->p.heavy; /* K and V */
    const size_t ring_row = (s->part.pos - s->part.rk) / (size_t)s->p.window;
    st->resident = h2o_resident_bytes(state);
    for (int32_t l = 0; l < s->cfg.n_layers; l++)
        st->tokens += (size_t)s->layers[l].n_heavy * heavy_row +
                      (size_t)h2o_ring_held(s, &s->layers[l]) * ring_row;
    st->slack = st->resident - st->tokens;
}

static size_t h2o_copied_bytes(const void *state)
{
    const struct h2o_state *s = state;
    return s->copied;
}

/* Flat: heavy + window rows and their positions and scores, whatever n. */
static enum kv_status h2o_bytes_for(const struct kv_cache_config *cfg, const void *params,
                                    int32_t n_tokens, size_t *bytes)
{
    struct h2o_parts part;
    (void)n_tokens;
    enum kv_status st = h2o_parts_of(cfg, params, &part);
    return st != KV_OK ? st : kv_mul_size(bytes, part.total, (size_t)cfg->n_layers);
}

const struct kv_strategy_ops kv_strategy_h2o = {
    .name = "h2o",
    .description = "heavy hitters by accumulated attention plus a ring of recent tokens (H2O)",
    .caps = KV_CAP_KEEPS_HISTORY | KV_CAP_EVICTS | KV_CAP_SCORE_EVICTS | KV_CAP_PREALLOCATES |
            KV_CAP_SHARES_STORAGE | KV_CAP_ATTN_MASS,
    .params = h2o_param_table,
    .n_params = 2,
    .params_size = sizeof(struct h2o_params),
    .describe = h2o_describe,
    .bytes_for = h2o_bytes_for,
    .max_spans = h2o_max_spans,
    .state_size = sizeof(struct h2o_state),
    .init = h2o_init,
    .free = h2o_free,
    .update = h2o_update,
    .view = h2o_view,
    .seq_len = h2o_seq_len,
    .resident_bytes = h2o_resident_bytes,
    .stats = h2o_stats,
    .copied_bytes = h2o_copied_bytes,
    .reset = h2o_reset,
    .observe = h2o_observe,
};
