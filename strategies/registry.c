/*
 * registry.c - the list of cache strategies, searched by name.
 *
 * A const array of the ops tables: adding a strategy is one line here (and
 * its file), and the conformance suite in tests/check_strategies.c then
 * tests it, because it walks this list. Order is the order `kvlab
 * strategies` prints, from the no-cache baseline to the lossy cache.
 */
#include "strategy.h"

#include <string.h>

static const struct kv_strategy_ops *const kv_registry[] = {
    &kv_strategy_none,
    &kv_strategy_dynamic,
    &kv_strategy_dynamic_concat,
    &kv_strategy_static,
    &kv_strategy_sliding,
    &kv_strategy_quantized,
};

#define KV_REGISTRY_COUNT ((int32_t)(sizeof kv_registry / sizeof kv_registry[0]))

const struct kv_strategy_ops *kv_strategy_find(const char *name)
{
    if (name == NULL)
        return NULL;
    for (int32_t i = 0; i < KV_REGISTRY_COUNT; i++)
        if (strcmp(kv_registry[i]->name, name) == 0)
            return kv_registry[i];
    return NULL;
}

int32_t kv_strategy_count(void) { return KV_REGISTRY_COUNT; }

const struct kv_strategy_ops *kv_strategy_at(int32_t i)
{
    if (i < 0 || i >= KV_REGISTRY_COUNT)
        return NULL;
    return kv_registry[i];
}
