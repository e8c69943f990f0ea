/*
 * kv_attention.c - the fast attention kernel over a view of KV spans
 * (kv_attention.h): its entry point and its workspace. Two shapes of the
 * same contract, a file each:
 *  - decode (n_q == 1, kv_attn_decode.c) is memory-bound: every K and V row
 *    is streamed once for the whole GQA group, in blocks with an online
 *    softmax, the keys cut into split-K chunks merged by a log-sum-exp
 *    rescale;
 *  - prefill (n_q > 1, kv_attn_prefill.c) is GEMM-bound: tiles of queries
 *    against key tiles through cblas_sgemm, an online softmax between them.
 *
 * The design decision that matters: kv_attn never allocates. All scratch
 * comes from the caller's workspace, and one layout (struct kv_attn_layout,
 * attn_layout_of) both sizes it (kv_attn_workspace_bytes) and cuts it up
 * (each shape), so the two cannot disagree. Masking is interval arithmetic
 * on positions (kv_attention_impl.h).
 */
#include "kv_rows.h"

/* ------------------------------------------------------------------------ */
/* Layout of the workspace                                                  */

static void attn_layout_of(struct kv_attn_layout *L, const struct kv_attn_params *p)
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
    struct kv_attn_layout L;
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

/* What kv_attn_decode_many cuts ws into for these decode calls: each
 * call's queries and partial states, then the largest scratch per thread
 * for the team (all calls share n_threads). */
static size_t many_floats(const struct kv_attn_params *p, int32_t n)
{
    size_t total = 0, per = 0;
    for (int32_t i = 0; i < n; i++) {
        struct kv_attn_layout L;
        attn_layout_of(&L, &p[i]);
        total += L.qs + L.parts;
        per = L.per_thread > per ? L.per_thread : per;
    }
    return total + per * (size_t)p[0].n_threads;
}

/* Params one team job can run: decode, no mass, one team size, shapes
 * kv_attn_workspace_bytes accepts (its own bound on their sizes). */
static int many_joinable(const struct kv_attn_params *p, int32_t n)
{
    for (int32_t i = 0; i < n; i++) {
        if (p[i].n_q != 1 || p[i].mass != NULL || p[i].n_threads != p[0].n_threads)
            return 0;
        const size_t ws = kv_attn_workspace_bytes(&p[i]);
        if (ws == 0 || ws == SIZE_MAX)
            return 0;
    }
    return 1;
}

size_t kv_attn_many_workspace_bytes(const struct kv_attn_params *p, int32_t n)
{
    if (p == NULL || n < 1 || n > KV_ATTN_MANY_MAX || !many_joinable(p, n))
        return 0;
    /* each call's floats are bounded (kv_attn_workspace_bytes), n by 64 */
    return many_floats(p, n) * sizeof(float);
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
    struct kv_attn_layout L;
    attn_layout_of(&L, p);
    if (p->n_q == 1)
        kv_attn_decode(out, q, p, v, ws, &L);
    else
        kv_attn_prefill(out, q, p, v, ws, &L);
    return KV_OK;
}

enum kv_status kv_attn_many(float *const *out, const float *const *q,
                            const struct kv_attn_params *p, const struct kv_view *v, int32_t n,
                            void *ws, size_t ws_bytes)
{
    if (out == NULL || q == NULL || p == NULL || v == NULL || n < 1 || n > KV_ATTN_MANY_MAX)
        return KV_ERR_INVALID;
    for (int32_t i = 0; i < n; i++) { /* every call checked before any is run */
        enum kv_status st = kv_attn_check(&p[i], &v[i]);
        if (st != KV_OK)
            return st;
        if (out[i] == NULL || q[i] == NULL)
            return KV_ERR_INVALID;
    }
    if (ws == NULL || ((uintptr_t)ws % 64) != 0)
        return KV_ERR_INVALID;
    const size_t need = kv_attn_many_workspace_bytes(p, n);
    if (n == 1 || need == 0 || ws_bytes < need) {
        for (int32_t i = 0; i < n; i++)
            if (ws_bytes < kv_attn_workspace_bytes(&p[i]))
                return KV_ERR_INVALID;
        for (int32_t i = 0; i < n; i++) {
            enum kv_status st = kv_attn(out[i], q[i], &p[i], &v[i], ws, ws_bytes);
            if (st != KV_OK)
                return st;
        }
        return KV_OK;
    }
    struct kv_attn_layout L[KV_ATTN_MANY_MAX];
    for (int32_t i = 0; i < n; i++)
        attn_layout_of(&L[i], &p[i]);
    kv_attn_decode_many(out, q, p, v, n, ws, L);
    return KV_OK;
}
