/*
 * test_params.h - strategy parameters for the tests, by name.
 *
 * A strategy's parameters are its own struct (strategies/strategy.h); the
 * tests set them through the parameter table, like the CLI, so one set of
 * values serves every strategy: each strategy takes the ones its table has
 * and ignores the rest. A value of 0 keeps the table's default, unless
 * literal_zeros is set (the bad-configuration tests; window, bits, group
 * and residual only).
 */
#ifndef KV_TEST_PARAMS_H
#define KV_TEST_PARAMS_H

#include <check.h>
#include <string.h>

#include "../strategies/strategy.h"

struct test_params {
    int32_t window, bits, group, residual, sinks, heavy;
    int32_t dtype; /* enum kv_dtype of the float stores (--dtype); 0 is f32 */
    int32_t layout; /* quantized --layout: 0 token, 1 kivi */
    int literal_zeros;
};

/* Room for any strategy's parameter struct in a test. */
#define TEST_PARAMS_BYTES 256
struct test_param_block {
    _Alignas(16) unsigned char b[TEST_PARAMS_BYTES];
};

/* blk <- the table's defaults, then every value of tp the strategy has. */
static inline void test_params_fill(const struct kv_strategy_ops *ops, struct test_param_block *blk,
                                    const struct test_params *tp)
{
    ck_assert_uint_le(ops->params_size, TEST_PARAMS_BYTES);
    memset(blk, 0, sizeof *blk);
    kv_params_defaults(ops, blk->b);
    if (tp == NULL)
        return;
    /* literal_zeros applies to the first four (the bad-configuration
     * tests); sinks, heavy, dtype and layout keep their defaults at 0 */
    const struct {
        const char *name;
        int32_t v;
        int zero_literal;
    } vals[] = {{"window", tp->window, 1},     {"bits", tp->bits, 1},
                {"group", tp->group, 1},       {"residual", tp->residual, 1},
                {"sinks", tp->sinks, 0},       {"heavy", tp->heavy, 0},
                {"dtype", tp->dtype, 0},       {"layout", tp->layout, 0}};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        const int32_t k = kv_param_find(ops, vals[i].name);
        if (k < 0 || (vals[i].v == 0 && !(tp->literal_zeros && vals[i].zero_literal)))
            continue;
        /* a value the table refuses stays as given (bad-config tests) */
        memcpy(blk->b + ops->params[k].offset, &vals[i].v, sizeof(int32_t));
    }
}

/* kv_cache_create with the parameters of tp. */
static inline enum kv_status test_cache_create(struct kv_cache **out,
                                               const struct kv_strategy_ops *ops,
                                               const struct kv_cache_config *cfg,
                                               const struct test_params *tp)
{
    struct test_param_block blk;
    if (ops == NULL)
        return kv_cache_create(out, ops, cfg, NULL);
    test_params_fill(ops, &blk, tp);
    return kv_cache_create(out, ops, cfg, blk.b);
}

#endif /* KV_TEST_PARAMS_H */
