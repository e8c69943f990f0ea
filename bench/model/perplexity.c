/*
 * perplexity.c - stream a text through a cache strategy and score every
 * next token (see perplexity.h for the three ways of feeding).
 *
 * The runner is sized once for the widest call the mode makes (1 token a
 * step when the strategy keeps history, the chunk or the recompute window
 * otherwise), so the scoring loop allocates nothing beyond what the cache
 * strategy allocates on purpose.
 */
#include "perplexity.h"

#include <math.h>
#include <string.h>

double kv_ppl_nll(const float *logits, int32_t vocab, int32_t target)
{
    if (vocab < 1 || target < 0 || target >= vocab)
        return NAN;
    double mx = -INFINITY;
    for (int32_t i = 0; i < vocab; i++) {
        if (!isfinite(logits[i]))
            return NAN;
        mx = logits[i] > mx ? logits[i] : mx;
    }
    double s = 1.0; /* the maximum's own term, exp(0); s >= 1 */
    int counted = 0;
    for (int32_t i = 0; i < vocab; i++) {
        if (!counted && (double)logits[i] == mx) {
            counted = 1;
            continue;
        }
        s += exp((double)logits[i] - mx);
    }
    return mx + log(s) - (double)logits[target];
}

/* Widest forward call of the mode, in tokens. */
static int32_t call_width(const struct kv_ppl_params *p, int keeps, int32_t n)
{
    if (p->recompute > 0)
        return p->recompute < n - 1 ? p->recompute : n - 1;
    if (keeps)
        return 1;
    int32_t chunk = p->context > 0 ? p->context : n - 1;
    return chunk < n - 1 ? chunk : n - 1;
}

enum kv_status kv_perplexity(const struct kv_model *m, struct kv_cache *cache,
                             const int32_t *ids, int32_t n, const struct kv_ppl_params *p,
                             double *loss, int32_t *pos, struct kv_ppl_result *res)
{
    if (m == NULL || cache == NULL || ids == NULL || p == NULL || loss == NULL || n < 2 ||
        p->context < 0 || p->recompute < 0 || p->context > m->cfg.max_len || p->recompute > m->cfg.max_len)
        return KV_ERR_INVALID;
    /* A stream feeds ids[0..n-2] at positions 0..n-2. */
    if (p->context == 0 && p->recompute == 0 && n - 1 > m->cfg.max_len)
        return KV_ERR_INVALID;
    const int32_t V = m->cfg.vocab_size;
    for (int32_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return KV_ERR_INVALID;

    const int keeps = kv_cache_has(cache, KV_CAP_KEEPS_HISTORY) && p->recompute == 0;
    struct kv_runner *r = NULL;
    enum kv_status s = kv_runner_create(&r, m, 1, call_width(p, keeps, n), p->n_threads);
    if (s != KV_OK)
        return s;
    float *logits = kv_alloc((size_t)V * sizeof(float));
    if (logits == NULL) {
        kv_runner_destroy(r);
        return KV_ERR_NOMEM;
    }
    struct kv_ppl_result acc = {0};
    s = kv_cache_reset(cache);
    for (int32_t t = 0; t + 1 < n && s == KV_OK; t++) {
        /* The chunk's first token and the stream position of ids[t]. */
        int32_t start = p->context > 0 ? t - t % p->context : 0;
        if (p->recompute > 0) {
            int32_t first = t + 1 - p->recompute > start ? t + 1 - p->recompute : start;
            s = kv_cache_reset(cache);
            if (s == KV_OK)
                s = kv_forward(r, m, cache, ids + first, t + 1 - first, 0, NULL, logits, NULL);
        } else if (keeps) {
            if (t == start && t > 0)
                s = kv_cache_reset(cache);
            if (s == KV_OK)
                s = kv_forward(r, m, cache, ids + t, 1, t - start, NULL, logits, NULL);
        } else {
            s = kv_cache_reset(cache);
            if (s == KV_OK)
                s = kv_forward(r, m, cache, ids + start, t + 1 - start, 0, NULL, logits, NULL);
        }
        if (s != KV_OK)
            break;
        double nll = kv_ppl_nll(logits, V, ids[t + 1]);
        if (!isfinite(nll)) {
            s = KV_ERR_INVALID;
            break;
        }
        loss[t] = nll;
        if (pos != NULL)
            pos[t] = t - start;
        acc.nats += nll;
        acc.tokens++;
        size_t held = kv_cache_resident_bytes(cache);
        acc.peak_cache_bytes = held > acc.peak_cache_bytes ? held : acc.peak_cache_bytes;
    }
    kv_free(logits);
    kv_runner_destroy(r);
    if (s == KV_OK && res != NULL)
        *res = acc;
    return s;
}
