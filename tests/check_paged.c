/*
 * check_paged.c - what only the paged strategy promises, in closed form:
 * blocks per sequence (ceil(T / block)), resident bytes and internal
 * fragmentation, growth that never copies or moves a row, a decode step
 * that allocates nothing once the pool has free blocks, prefix sharing by
 * reference count (B sequences of a P-token prompt hold P + B x generated
 * rows, not B x (P + generated)), copy-on-write of a shared partly filled
 * block on its first append (bytes counted), --max-blocks refusing with
 * KV_ERR_FULL and nothing written, and every allocation of a sharing
 * scenario failed in turn. The generic suites (check_strategies.c,
 * check_cache_ops.c) test paged's contents like every other strategy's.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/kv_attention_impl.h"
#include "../strategies/strategy.h"

/* The shape of these tests: 2 layers, 2 kv heads of 8 floats. */
#define L_ 2
#define H_ 2
#define D_ 8
/* bytes of one token's K and V rows of one layer and one sequence */
#define ROW_KV ((size_t)2 * H_ * D_ * sizeof(float))

struct paged_cfg {
    int32_t batch, max_len, block, max_blocks;
};

static struct kv_cache *make(const struct paged_cfg *p)
{
    const struct kv_strategy_ops *ops = kv_strategy_find("paged");
    ck_assert_ptr_nonnull(ops);
    _Alignas(16) unsigned char params[64];
    ck_assert_uint_le(ops->params_size, sizeof params);
    kv_params_defaults(ops, params);
    ck_assert_int_eq(kv_params_set(ops, params, "block", p->block), KV_OK);
    ck_assert_int_eq(kv_params_set(ops, params, "max_blocks", p->max_blocks), KV_OK);
    const struct kv_cache_config cc = {.n_layers = L_, .batch = p->batch, .n_kv_heads = H_,
                                       .head_dim = D_, .max_len = p->max_len};
    struct kv_cache *c = NULL;
    ck_assert_int_eq(kv_cache_create(&c, ops, &cc, params), KV_OK);
    return c;
}

/* Value of (layer, history row, position, head, element): a different
 * number everywhere, so a misplaced row shows. */
static float val(int32_t l, int32_t r, int32_t p, int32_t h, int32_t e, int kv)
{
    return (float)(((((l * 64 + r) * 1024 + p) * 8 + h) * 16 + e) * 2 + kv);
}

/* Appends positions [len, len+n) for every layer; sequence b reads history
 * row rows[b]. Returns the first failing status. */
/* (not inlined: gcc cannot see that rows has batch entries and warns) */
__attribute__((noinline)) static enum kv_status put(struct kv_cache *c, const int32_t *rows,
                                                    int32_t len, int32_t n)
{
    const int32_t B = c->cfg.batch;
    const size_t tok = (size_t)H_ * D_;
    float *k = malloc((size_t)B * n * tok * sizeof(float));
    float *v = malloc((size_t)B * n * tok * sizeof(float));
    ck_assert(k && v);
    enum kv_status st = KV_OK;
    for (int32_t l = 0; l < L_ && st == KV_OK; l++) {
        for (int32_t b = 0; b < B; b++)
            for (int32_t t = 0; t < n; t++)
                for (int32_t h = 0; h < H_; h++)
                    for (int32_t e = 0; e < D_; e++) {
                        const size_t i = (((size_t)b * n + t) * H_ + h) * D_ + e;
                        k[i] = val(l, rows[b], len + t, h, e, 0);
                        v[i] = val(l, rows[b], len + t, h, e, 1);
                    }
        st = kv_cache_update(c, l, k, v, n, len);
    }
    free(k);
    free(v);
    return st;
}

/* Every layer holds positions [0, len) of sequence b's history row. */
static void holds(const struct kv_cache *c, const int32_t *rows, int32_t len)
{
    float x[D_];
    for (int32_t l = 0; l < L_; l++) {
        struct kv_view vw;
        ck_assert_int_eq(kv_cache_view(c, l, &vw), KV_OK);
        ck_assert_int_eq(kv_cache_seq_len(c, l), len);
        ck_assert_int_eq(vw.n_spans, len > 0);
        if (len == 0)
            continue;
        const struct kv_span *sp = &vw.spans[0];
        ck_assert_int_eq(sp->n_tokens, len);
        for (int32_t b = 0; b < c->cfg.batch; b++)
            for (int kv = 0; kv < 2; kv++) {
                const struct kv_tensor *xt = kv ? &sp->v : &sp->k;
                const struct kv_tensor xb = kv_tensor_of_seq(xt, b);
                for (int32_t p = 0; p < len; p++)
                    for (int32_t h = 0; h < H_; h++) {
                        kv_tensor_row_float(x, &xb, sp->page_tokens, kv_tensor_off(xt, b, h),
                                            0, p, D_);
                        for (int32_t e = 0; e < D_; e++)
                            if (x[e] != val(l, rows[b], p, h, e, kv))
                                ck_abort_msg("layer %d seq %d pos %d head %d: %g, want %g", l,
                                             b, p, h, (double)x[e],
                                             (double)val(l, rows[b], p, h, e, kv));
                    }
            }
    }
}

static size_t block_bytes(int32_t block) { return (size_t)block * ROW_KV; }

/* ------------------------------------------------------------------------ */

/* ceil(T / block) blocks per sequence per layer; tokens, fragmentation and
 * free blocks add up to the resident bytes; copied = rows written, once. */
START_TEST(test_blocks_and_fragmentation)
{
    static const int32_t blocks[] = {1, 3, 4, 16};
    const int32_t bs = blocks[_i], B = 3;
    const int32_t rows[3] = {0, 1, 2};
    struct paged_cfg pc = {.batch = B, .max_len = 100, .block = bs};
    struct kv_cache *c = make(&pc);
    struct kv_cache_stats st;
    kv_cache_stats(c, &st);
    ck_assert_uint_eq(st.resident, 0);
    for (int32_t T = 1; T <= 70; T++) {
        ck_assert_int_eq(put(c, rows, T - 1, 1), KV_OK);
        kv_cache_stats(c, &st);
        const size_t per_seq = (size_t)((T + bs - 1) / bs);
        const size_t in_use = (size_t)L_ * B * per_seq;
        ck_assert_uint_eq(st.resident, kv_cache_resident_bytes(c));
        ck_assert_uint_eq(st.tokens, (size_t)L_ * B * T * ROW_KV);
        ck_assert_uint_eq(st.slack, (size_t)L_ * B * (per_seq * bs - T) * ROW_KV);
        ck_assert_uint_eq(st.tokens + st.slack, in_use * block_bytes(bs));
        ck_assert_uint_eq(st.tokens + st.slack + st.spare, st.resident);
        ck_assert_uint_eq(st.shared, 0);
        ck_assert_uint_eq(st.cow, 0);
        /* growth never copies: every row written once */
        ck_assert_uint_eq(kv_cache_copied_bytes(c), (size_t)L_ * B * T * ROW_KV);
        /* the pool grows by chunks of at least 16 blocks or a quarter */
        const size_t n_blocks = st.resident / block_bytes(bs);
        ck_assert_uint_ge(n_blocks, in_use);
        ck_assert_uint_le(n_blocks, in_use + (in_use / 4 > 16 ? in_use / 4 : 16) + L_ * B);
        size_t bound;
        ck_assert_int_eq(kv_cache_bytes_for(c->ops, &c->cfg, c->params, T, &bound), KV_OK);
        ck_assert_uint_le(st.resident, bound);
    }
    holds(c, rows, 70);
    kv_cache_destroy(c);
}
END_TEST

/* Blocks never move: the first block's address survives the pool's growth;
 * a prefill lands in ceil(T / block) blocks at once. */
START_TEST(test_growth_never_moves)
{
    const int32_t rows[2] = {0, 1};
    struct paged_cfg pc = {.batch = 2, .max_len = 600, .block = 4};
    struct kv_cache *c = make(&pc);
    ck_assert_int_eq(put(c, rows, 0, 5), KV_OK);
    struct kv_view vw;
    ck_assert_int_eq(kv_cache_view(c, 1, &vw), KV_OK);
    const void *first_k = vw.spans[0].k.pages[0], *first_v = vw.spans[0].v.pages[0];
    ck_assert_ptr_eq((const char *)first_v, (const char *)first_k + H_ * 4 * D_ * sizeof(float));
    for (int32_t p = 5; p < 500; p++)
        ck_assert_int_eq(put(c, rows, p, 1), KV_OK);
    ck_assert_int_eq(kv_cache_view(c, 1, &vw), KV_OK);
    ck_assert_ptr_eq(vw.spans[0].k.pages[0], first_k);
    ck_assert_ptr_eq(vw.spans[0].v.pages[0], first_v);
    ck_assert_uint_eq(vw.spans[0].k.table_stride, 150); /* ceil(600 / 4) */
    ck_assert_int_eq(vw.spans[0].page_tokens, 4);
    holds(c, rows, 500);
    kv_cache_destroy(c);
}
END_TEST

/* A decode step takes blocks from the free list: no allocation at all once
 * the pool has them (here: after a crop gave them back), and only a chunk
 * now and then while it grows. */
START_TEST(test_decode_allocates_nothing)
{
    const int32_t rows[2] = {0, 1};
    struct paged_cfg pc = {.batch = 2, .max_len = 800, .block = 16};
    struct kv_cache *c = make(&pc);
    ck_assert_int_eq(put(c, rows, 0, 32), KV_OK);
    kv_alloc_fail_at(0, 0);
    for (int32_t p = 32; p < 700; p++)
        ck_assert_int_eq(put(c, rows, p, 1), KV_OK);
    const int64_t growing = kv_alloc_count(); /* chunks, 16 blocks or a quarter each */
    ck_assert_int_ge(growing, 1);
    ck_assert_int_le(growing, 10);
    ck_assert_int_eq(kv_cache_crop(c, 40), KV_OK);
    kv_alloc_fail_at(0, 0);
    for (int32_t p = 40; p < 700; p++)
        ck_assert_int_eq(put(c, rows, p, 1), KV_OK);
    ck_assert_int_eq(kv_alloc_count(), 0);
    holds(c, rows, 700);
    kv_cache_destroy(c);
}
END_TEST

/*
 * Prefix sharing: a P-token prompt prefilled once (batch 1), then reorder
 * to B copies: every block shared, nothing copied; the first append copies
 * the shared partly filled last block for all but the last writer
 * (copy-on-write, B - 1 copies of P % block rows per layer), full blocks
 * stay shared; after g tokens the rows held are
 * floor(P / block) * block + B * (P % block + g), not B * (P + g).
 */
START_TEST(test_prefix_sharing_and_cow)
{
    static const int32_t Ps[] = {13, 16, 1, 40};
    const int32_t P = Ps[_i % 4], bs = 4, B = 1 + _i / 4 * 3, g = 9; /* B 1 or 4 */
    struct paged_cfg pc = {.batch = B, .max_len = 128, .block = bs};
    struct kv_cache *c = make(&pc);
    static const int32_t zero[1] = {0};
    int32_t rows[8] = {0}, src[8] = {0};
    ck_assert_int_eq(kv_cache_reorder(c, zero, 1), KV_OK); /* one sequence for the prompt */
    ck_assert_int_eq(put(c, zero, 0, P), KV_OK);
    const size_t copied0 = kv_cache_copied_bytes(c);
    ck_assert_uint_eq(copied0, (size_t)L_ * P * ROW_KV); /* prefilled once */
    struct kv_cache_stats st0, st;
    kv_cache_stats(c, &st0);
    ck_assert_int_eq(kv_cache_reorder(c, src, B), KV_OK);
    ck_assert_int_eq(c->cfg.batch, B);
    kv_cache_stats(c, &st);
    ck_assert_uint_eq(kv_cache_copied_bytes(c), copied0); /* no row moved */
    ck_assert_uint_eq(st.resident, st0.resident);
    ck_assert_uint_eq(st.tokens, (size_t)L_ * P * ROW_KV);
    ck_assert_uint_eq(st.shared, B > 1 ? (size_t)L_ * P * ROW_KV : 0);
    for (int32_t b = 0; b < B; b++)
        rows[b] = 0;
    holds(c, rows, P);
    /* each sequence continues on its own row */
    for (int32_t b = 0; b < B; b++)
        rows[b] = 10 + b;
    /* (val() of row 10+b at positions < P differs from row 0's, so write
     * rows 10+b's continuation only: compare below against a row map that
     * switches at P) */
    ck_assert_int_eq(put(c, rows, P, 1), KV_OK);
    kv_cache_stats(c, &st);
    const size_t tail = (size_t)(P % bs);
    ck_assert_uint_eq(st.cow, (size_t)L_ * (B - 1) * tail * ROW_KV);
    ck_assert_uint_eq(kv_cache_copied_bytes(c), copied0 + st.cow + (size_t)L_ * B * ROW_KV);
    for (int32_t p = P + 1; p < P + g; p++)
        ck_assert_int_eq(put(c, rows, p, 1), KV_OK);
    kv_cache_stats(c, &st);
    ck_assert_uint_eq(st.cow, (size_t)L_ * (B - 1) * tail * ROW_KV); /* once per block */
    const size_t full = (size_t)(P / bs) * bs;
    ck_assert_uint_eq(st.tokens, (size_t)L_ * (full + (size_t)B * (tail + g)) * ROW_KV);
    ck_assert_uint_eq(st.shared, B > 1 ? (size_t)L_ * full * ROW_KV : 0);
    /* every sequence reads the prompt, then its own tokens */
    float x[D_];
    for (int32_t l = 0; l < L_; l++) {
        struct kv_view vw;
        ck_assert_int_eq(kv_cache_view(c, l, &vw), KV_OK);
        const struct kv_span *sp = &vw.spans[0];
        for (int32_t b = 0; b < B; b++) {
            const struct kv_tensor xb = kv_tensor_of_seq(&sp->k, b);
            for (int32_t p = 0; p < P + g; p++) {
                kv_tensor_row_float(x, &xb, sp->page_tokens, kv_tensor_off(&sp->k, b, 1), 0, p, D_);
                ck_assert(x[3] == val(l, p < P ? 0 : 10 + b, p, 1, 3, 0));
            }
        }
    }
    /* the text picture shows the shared blocks */
    char pic[4096];
    ck_assert_int_gt(kv_cache_show(c, 0, pic, sizeof pic), 0);
    ck_assert_ptr_nonnull(strstr(pic, "pool: "));
    ck_assert_ptr_nonnull(strstr(pic, "layer 0 seq 0:"));
    if (B > 1 && P >= bs)
        ck_assert_ptr_nonnull(strstr(pic, "(x4)"));
    kv_cache_destroy(c);
}
END_TEST

/* B = 8 sequences sharing a 4096-token prompt, 128 new tokens each, hold
 * about P + B x 128 rows: at most 1.25x of one sequence (the target of
 * the issue, 1.2x, is under what even exact sharing reaches: (4096 + 8 x
 * 128) / (4096 + 128) = 1.21), against 8x without sharing. */
START_TEST(test_sharing_memory_ratio)
{
    const int32_t P = 4096, G = 128, bs = 16;
    size_t held[2];
    for (int k = 0; k < 2; k++) {
        const int32_t B = k == 0 ? 1 : 8;
        struct paged_cfg pc = {.batch = B, .max_len = P + G, .block = bs};
        struct kv_cache *c = make(&pc);
        static const int32_t zero[1] = {0};
        int32_t src[8] = {0}, rows[8] = {0};
        ck_assert_int_eq(kv_cache_reorder(c, zero, 1), KV_OK);
        ck_assert_int_eq(put(c, zero, 0, P), KV_OK);
        ck_assert_int_eq(kv_cache_reorder(c, src, B), KV_OK);
        for (int32_t b = 0; b < B; b++)
            rows[b] = b;
        for (int32_t p = P; p < P + G - 1; p++) /* the last new token is not fed */
            ck_assert_int_eq(put(c, rows, p, 1), KV_OK);
        struct kv_cache_stats st;
        kv_cache_stats(c, &st);
        held[k] = st.tokens + st.slack; /* the blocks in use */
        kv_cache_destroy(c);
    }
    const double ratio = (double)held[1] / (double)held[0];
    ck_assert_msg(ratio > 1.15 && ratio < 1.25, "B=8 / B=1 blocks in use: %.3f", ratio);
}
END_TEST

/* --max-blocks: the update that would need more is refused with
 * KV_ERR_FULL before anything is written; freed blocks are taken again. */
START_TEST(test_max_blocks)
{
    const int32_t rows[2] = {0, 1};
    /* 2 layers x 2 sequences x 3 blocks of 4 = 24 tokens of room each */
    struct paged_cfg pc = {.batch = 2, .max_len = 100, .block = 4, .max_blocks = 12};
    struct kv_cache *c = make(&pc);
    for (int32_t p = 0; p < 12; p++)
        ck_assert_int_eq(put(c, rows, p, 1), KV_OK);
    const int64_t live0 = kv_alloc_live(); /* the pool at its cap */
    const size_t copied = kv_cache_copied_bytes(c), resident = kv_cache_resident_bytes(c);
    ck_assert_uint_le(resident, 12 * block_bytes(4));
    ck_assert_int_eq(put(c, rows, 12, 1), KV_ERR_FULL);
    ck_assert_int_eq(put(c, rows, 12, 5), KV_ERR_FULL);
    ck_assert_uint_eq(kv_cache_copied_bytes(c), copied);
    ck_assert_uint_eq(kv_cache_resident_bytes(c), resident);
    holds(c, rows, 12);
    ck_assert_int_eq(kv_cache_crop(c, 8), KV_OK); /* one block per sequence back */
    ck_assert_int_eq(put(c, rows, 8, 4), KV_OK);
    holds(c, rows, 12);
    ck_assert_int_eq(kv_alloc_live(), live0); /* nothing allocated past the cap */
    /* the prefill that does not fit is refused whole */
    ck_assert_int_eq(kv_cache_reset(c), KV_OK);
    ck_assert_int_eq(put(c, rows, 0, 13), KV_ERR_FULL);
    ck_assert_int_eq(kv_cache_seq_len(c, 0), 0);
    ck_assert_int_eq(put(c, rows, 0, 12), KV_OK);
    holds(c, rows, 12);
    /* sharing makes room: one sequence's blocks serve both */
    ck_assert_int_eq(kv_cache_reset(c), KV_OK);
    static const int32_t one[1] = {0}, two[2] = {0, 0};
    ck_assert_int_eq(kv_cache_reorder(c, one, 1), KV_OK);
    ck_assert_int_eq(put(c, one, 0, 20), KV_OK); /* 5 blocks per layer: 10 */
    ck_assert_int_eq(kv_cache_reorder(c, two, 2), KV_OK);
    const int32_t r2[2] = {0, 0};
    holds(c, r2, 20);
    ck_assert_int_eq(put(c, r2, 20, 1), KV_ERR_FULL); /* 2 layers x 2 new blocks > 2 free */
    holds(c, r2, 20);
    kv_cache_destroy(c);
}
END_TEST

/* Every allocation of a sharing scenario (prefill, reorder to 3, the
 * copy-on-write append, growth, a fork) failed in turn: KV_ERR_NOMEM with
 * the cache as before, then the scenario goes on; nothing leaks. */
START_TEST(test_pool_alloc_failure)
{
    const int64_t live0 = kv_alloc_live();
    int completed = 0;
    for (int64_t k = 1; k < 400 && !completed; k++) {
        struct paged_cfg pc = {.batch = 3, .max_len = 200, .block = 4};
        struct kv_cache *c = make(&pc), *d = NULL;
        static const int32_t one[1] = {0}, three[3] = {0, 0, 0};
        int32_t rows[3] = {0, 0, 0};
        ck_assert_int_eq(kv_cache_reorder(c, one, 1), KV_OK);
        kv_alloc_fail_at(k, 0);
        enum kv_status st = put(c, one, 0, 10);
        if (st != KV_OK) {
            ck_assert_int_eq(st, KV_ERR_NOMEM);
            ck_assert_int_eq(kv_cache_seq_len(c, 0), 0);
            ck_assert_int_eq(put(c, one, 0, 10), KV_OK);
        }
        st = kv_cache_reorder(c, three, 3);
        if (st != KV_OK) {
            ck_assert_int_eq(st, KV_ERR_NOMEM);
            ck_assert_int_eq(c->cfg.batch, 1);
            holds(c, one, 10);
            ck_assert_int_eq(kv_cache_reorder(c, three, 3), KV_OK);
        }
        holds(c, rows, 10);
        rows[0] = 5, rows[1] = 6, rows[2] = 7;
        int32_t len = 10;
        for (int32_t p = 10; p < 90; p++) {
            st = put(c, rows, p, 1);
            if (st != KV_OK) {
                ck_assert_int_eq(st, KV_ERR_NOMEM);
                ck_assert_int_eq(kv_cache_seq_len(c, 0), p); /* layer 0 refused it */
                ck_assert_int_eq(put(c, rows, p, 1), KV_OK);
            }
            len = p + 1;
        }
        st = kv_cache_fork(&d, c);
        if (st != KV_OK) {
            ck_assert_int_eq(st, KV_ERR_NOMEM);
            ck_assert_ptr_null(d);
            ck_assert_int_eq(kv_cache_fork(&d, c), KV_OK);
        }
        completed = kv_alloc_count() < k;
        kv_alloc_fail_at(0, 0);
        (void)len;
        kv_cache_destroy(d);
        kv_cache_destroy(c);
        ck_assert_int_eq(kv_alloc_live(), live0);
    }
    kv_alloc_fail_at(0, 0);
    ck_assert(completed);
}
END_TEST

/* The parameters: a block of 0 is refused by the table, a cache without
 * max_len by the check; label and description name the block size. */
START_TEST(test_params)
{
    const struct kv_strategy_ops *ops = kv_strategy_find("paged");
    _Alignas(16) unsigned char params[64];
    kv_params_defaults(ops, params);
    ck_assert_int_eq(kv_params_set(ops, params, "block", 0), KV_ERR_INVALID);
    ck_assert_int_eq(kv_params_set(ops, params, "max_blocks", -1), KV_ERR_INVALID);
    char buf[256];
    kv_strategy_label(ops, params, buf, sizeof buf);
    ck_assert_str_eq(buf, "paged-16");
    const struct kv_strategy_ops *o;
    ck_assert_int_eq(kv_strategy_lookup("paged-128", &o, params, sizeof params), KV_OK);
    ck_assert_ptr_eq(o, ops);
    kv_strategy_label(ops, params, buf, sizeof buf);
    ck_assert_str_eq(buf, "paged-128");
    const struct kv_cache_config cc = {.n_layers = 1, .batch = 1, .n_kv_heads = 1, .head_dim = 8,
                                       .max_len = 0};
    struct kv_cache *c = NULL;
    ck_assert_int_eq(kv_cache_create(&c, ops, &cc, params), KV_ERR_INVALID);
    ck_assert_int_eq(kv_params_check(ops, &cc, params, buf, sizeof buf), KV_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(buf, "--max-len"));
}
END_TEST

static Suite *paged_suite(void)
{
    Suite *s = suite_create("paged");
    TCase *tc = tcase_create("paged");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_blocks_and_fragmentation, 0, 4);
    tcase_add_test(tc, test_growth_never_moves);
    tcase_add_test(tc, test_decode_allocates_nothing);
    tcase_add_loop_test(tc, test_prefix_sharing_and_cow, 0, 8);
    tcase_add_test(tc, test_sharing_memory_ratio);
    tcase_add_test(tc, test_max_blocks);
    tcase_add_test(tc, test_pool_alloc_failure);
    tcase_add_test(tc, test_params);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(paged_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
