/*
 * install_example.c - a program of someone else's, built by
 * tests/e2e_install.sh against an installed libkvlab only:
 *
 *   cc install_example.c $(pkg-config --cflags --libs kvlab)
 *
 * For every registered strategy (kvlab's own, found through the registry):
 * create a cache (its parameter table's defaults, a window of 16 and a
 * residual of 8 where it has those parameters), append a prompt of T tokens to every layer, view the last
 * layer, run kv_attn for the last position and check it against
 * kv_attn_ref on the same view; a strategy that keeps history then takes
 * one decode token and is checked again. Prints one line per strategy; exit
 * status 0 when every check passed.
 */
#include <kvlab/kvlab.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { LAYERS = 2, BATCH = 2, KV_HEADS = 2, HEADS = 4, HEAD_DIM = 64, T = 40 };

/* K/V of n tokens (batch, n, kv_heads, head_dim), deterministic. */
static void fill(float *x, int32_t n, int32_t pos0, float salt)
{
    size_t w = 0;
    for (int32_t b = 0; b < BATCH; b++)
        for (int32_t t = 0; t < n; t++)
            for (int32_t h = 0; h < KV_HEADS * HEAD_DIM; h++)
                x[w++] = sinf(0.37f * (float)(pos0 + t) + 0.11f * (float)h + salt + (float)b);
}

/* kv_attn against kv_attn_ref for the query at position qpos; max |diff|. */
static int attend(const struct kv_cache *c, int32_t qpos, double *max_diff, int32_t *n_spans)
{
    struct kv_view v;
    if (kv_cache_view(c, LAYERS - 1, &v) != KV_OK)
        return -1;
    *n_spans = v.n_spans;
    struct kv_attn_params p = {.batch = BATCH, .n_q = 1, .n_heads = HEADS,
                               .n_kv_heads = KV_HEADS, .head_dim = HEAD_DIM, .q_pos0 = qpos,
                               .scale = 1.0f / sqrtf((float)HEAD_DIM), .n_threads = 1};
    const size_t n = (size_t)BATCH * HEADS * HEAD_DIM, ws_bytes = kv_attn_workspace_bytes(&p);
    float *q = kv_alloc(n * sizeof *q), *out = kv_alloc(n * sizeof *out),
          *ref = kv_alloc(n * sizeof *ref);
    void *ws = kv_alloc(ws_bytes);
    int rc = -1;
    if (q != NULL && out != NULL && ref != NULL && ws != NULL) {
        for (size_t i = 0; i < n; i++)
            q[i] = cosf(0.05f * (float)i);
        if (kv_attn(out, q, &p, &v, ws, ws_bytes) == KV_OK && kv_attn_ref(ref, q, &p, &v) == KV_OK) {
            *max_diff = 0;
            for (size_t i = 0; i < n; i++) {
                double d = fabs((double)out[i] - (double)ref[i]);
                *max_diff = d > *max_diff || isnan(d) ? d : *max_diff;
            }
            rc = 0;
        }
    }
    kv_free(q);
    kv_free(out);
    kv_free(ref);
    kv_free(ws);
    return rc;
}

int main(void)
{
    const struct kv_cache_config cfg = {.n_layers = LAYERS, .batch = BATCH,
                                        .n_kv_heads = KV_HEADS, .head_dim = HEAD_DIM,
                                        .max_len = T + 8};
    const size_t row = (size_t)BATCH * KV_HEADS * HEAD_DIM;
    float *k = kv_alloc((size_t)T * row * sizeof *k), *v = kv_alloc((size_t)T * row * sizeof *v);
    if (k == NULL || v == NULL)
        return 1;
    int fails = 0, n = kv_strategy_count();
    for (int32_t s = 0; s < n; s++) {
        const struct kv_strategy_ops *ops = kv_strategy_at(s);
        /* the defaults, with a window and a residual shorter than the
         * prompt where the strategy has them, so tokens are evicted and
         * quantized */
        _Alignas(16) unsigned char params[KV_PARAMS_MAX_BYTES];
        kv_params_defaults(ops, params);
        if (kv_param_find(ops, "window") >= 0)
            kv_params_set(ops, params, "window", 16);
        if (kv_param_find(ops, "residual") >= 0)
            kv_params_set(ops, params, "residual", 8);
        char what[256];
        kv_strategy_describe(ops, &cfg, params, what, sizeof what);
        struct kv_cache *c = NULL;
        double d0 = NAN, d1 = NAN;
        int32_t sp0 = 0, sp1 = 0;
        int ok = kv_cache_create(&c, ops, &cfg, params) == KV_OK;
        fill(k, T, 0, 0.0f);
        fill(v, T, 0, 1.5f);
        for (int32_t l = 0; ok && l < LAYERS; l++)
            ok = kv_cache_update(c, l, k, v, T, 0) == KV_OK;
        ok = ok && attend(c, T - 1, &d0, &sp0) == 0 && d0 <= 1e-4;
        if (ok && kv_cache_has(c, KV_CAP_KEEPS_HISTORY)) {
            fill(k, 1, T, 0.0f);
            fill(v, 1, T, 1.5f);
            for (int32_t l = 0; ok && l < LAYERS; l++)
                ok = kv_cache_update(c, l, k, v, 1, T) == KV_OK;
            ok = ok && attend(c, T, &d1, &sp1) == 0 && d1 <= 1e-4;
        }
        printf("%s %s: %d + 1 tokens, %d/%d spans, %zu bytes, max |kv_attn - kv_attn_ref| "
               "%.2g / %.2g (%s)\n",
               ok ? "ok  " : "FAIL", ops->name, T, sp0, sp1,
               c != NULL ? kv_cache_resident_bytes(c) : 0, d0, d1, what);
        fails += !ok;
        kv_cache_destroy(c);
    }
    kv_free(k);
    kv_free(v);
    printf("%d strategies, %d failed\n", n, fails);
    return fails != 0 || n < 1;
}
