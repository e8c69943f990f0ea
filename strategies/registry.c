/*
 * registry.c - the list of cache strategies, searched by name.
 *
 * A const array of the built-in ops tables, then the ones a program
 * registers at run time (kv_strategy_register: its own strategies, or a
 * test double). Adding a built-in strategy is one line here (and its
 * file); the conformance suite in tests/check_strategies.c then tests it,
 * because it walks this list. Order is the order `kvlab strategies` prints,
 * from the no-cache baseline to the lossy cache, then the paged cache.
 *
 * Registration is where a table's names are checked against the text rule
 * (every name, preset, parameter, choice and label() a label: strategy.h),
 * and against the commands' own options: the CLI reserves those at start-up
 * (kv_strategy_reserve_flags) and a parameter with a reserved flag is
 * refused, so `--seed` can never mean a strategy's option.
 */
#include "strategy.h"

#include <stdio.h>
#include <string.h>

static const struct kv_strategy_ops *const kv_registry[] = {
    &kv_strategy_none,
    &kv_strategy_dynamic,
    &kv_strategy_dynamic_concat,
    &kv_strategy_static,
    &kv_strategy_sliding,
    &kv_strategy_sinks,
    &kv_strategy_h2o,
    &kv_strategy_quantized,
    &kv_strategy_hybrid,
    &kv_strategy_paged,
};

#define KV_REGISTRY_COUNT ((int32_t)(sizeof kv_registry / sizeof kv_registry[0]))

static const struct kv_strategy_ops *kv_extra[KV_STRATEGY_MAX_EXTRA];
static int32_t kv_n_extra;

int32_t kv_strategy_count(void) { return KV_REGISTRY_COUNT + kv_n_extra; }

const struct kv_strategy_ops *kv_strategy_at(int32_t i)
{
    if (i < 0 || i >= kv_strategy_count())
        return NULL;
    return i < KV_REGISTRY_COUNT ? kv_registry[i] : kv_extra[i - KV_REGISTRY_COUNT];
}

/* A thin wrapper of the one resolver, kv_strategy_lookup: the table of a
 * strategy's own name, NULL for a preset's (whose parameters it would drop). */
const struct kv_strategy_ops *kv_strategy_find(const char *name)
{
    const struct kv_strategy_ops *o = NULL;
    if (kv_strategy_lookup(name, &o, NULL, 0) != KV_OK || strcmp(o->name, name) != 0)
        return NULL;
    return o;
}

/* ------------------------------------------------------------------------ */
/* Capability names                                                         */

/* Bit i of enum kv_cap is named kv_cap_names[i] (`kvlab strategies
 * --verbose`, messages): a flag added to strategy.h without its name here
 * fails the assertion. */
static const char *const kv_cap_names[] = {
    "keeps-history", "lossy",          "evicts",  "preallocates", "chunked-append",
    "crop",          "fork",           "reorder", "shares-storage", "bounded",
    "attention-mass", "score-evicts", "repositions", "borrows-prefix",
};
_Static_assert(KV_CAP_ALL == (1u << (sizeof kv_cap_names / sizeof kv_cap_names[0])) - 1,
               "kv_cap_names must name every KV_CAP_ flag, in bit order");

const char *kv_cap_name(uint32_t cap)
{
    if (cap == 0 || (cap & (cap - 1)) != 0 || (cap & ~(uint32_t)KV_CAP_ALL) != 0)
        return NULL;
    int32_t i = 0;
    while ((cap >> i) != 1u)
        i++;
    return kv_cap_names[i];
}

/* 1 when a strategy or a preset already has this name. */
static int name_taken(const char *name)
{
    for (int32_t i = 0; i < kv_strategy_count(); i++) {
        const struct kv_strategy_ops *o = kv_strategy_at(i);
        if (strcmp(o->name, name) == 0)
            return 1;
        for (int32_t p = 0; p < o->n_presets; p++)
            if (strcmp(o->presets[p].name, name) == 0)
                return 1;
    }
    return 0;
}

/* A parameter's CLI flag: "--" and a label. */
static int flag_ok(const char *flag)
{
    return flag != NULL && strncmp(flag, "--", 2) == 0 && kv_label_ok(flag + 2);
}

/* The label() of params is a label (a strategy without label() is filed
 * under its name, checked already). */
static int label_of_ok(const struct kv_strategy_ops *o, const void *params)
{
    if (o->label == NULL)
        return 1;
    char buf[KV_LABEL_MAX + 2];
    const int k = o->label(params, buf, sizeof buf);
    return k > 0 && (size_t)k < sizeof buf && kv_label_ok(buf);
}

/* The table's promises hang together: a capability flag exactly when its
 * method is there, parameters with a struct to hold them, presets that
 * parse; and every name it shows is a label (strategy.h's text rule). */
enum kv_status kv_strategy_validate(const struct kv_strategy_ops *o)
{
    if (o == NULL)
        return KV_ERR_INVALID;
    if (o->name == NULL || o->name[0] == '\0' || o->description == NULL || o->init == NULL ||
        o->update == NULL || o->view == NULL || o->state_size == 0 || (o->caps & ~KV_CAP_ALL))
        return KV_ERR_INVALID;
    if (!kv_label_ok(o->name))
        return KV_ERR_INVALID;
    if (!(o->caps & KV_CAP_CROP) != (o->crop == NULL) ||
        !(o->caps & KV_CAP_FORK) != (o->fork == NULL) ||
        !(o->caps & KV_CAP_REORDER) != (o->reorder == NULL) ||
        !(o->caps & KV_CAP_BORROW) != (o->borrow == NULL) ||
        !(o->caps & KV_CAP_BORROW) != (o->borrowable == NULL) ||
        !(o->caps & KV_CAP_ATTN_MASS) != (o->observe == NULL) ||
        (o->wants_mass != NULL && o->observe == NULL))
        return KV_ERR_INVALID;
    /* evicting what no mask describes is a kind of evicting */
    if ((o->caps & KV_CAP_SCORE_EVICTS) && !(o->caps & KV_CAP_EVICTS))
        return KV_ERR_INVALID;
    if (o->n_params < 0 || o->n_presets < 0 || o->params_size > KV_PARAMS_MAX_BYTES ||
        (o->n_params > 0 && (o->params == NULL || o->params_size == 0)))
        return KV_ERR_INVALID;
    for (int32_t i = 0; i < o->n_params; i++) {
        const struct kv_param *p = &o->params[i];
        if (p->name == NULL || !kv_label_ok(p->name) || strchr(p->name, '=') != NULL ||
            !flag_ok(p->flag) ||
            p->help == NULL || (unsigned)p->type >= KV_PARAM_TYPE_COUNT ||
            (p->type == KV_PARAM_CHOICE) != (p->n_choices > 0) ||
            (p->names != NULL && p->type != KV_PARAM_CHOICE))
            return KV_ERR_INVALID;
        if (p->type == KV_PARAM_TEXT
                ? p->text_size < 2 || p->def_text == NULL ||
                      strlen(p->def_text) >= (size_t)p->text_size ||
                      p->offset + (size_t)p->text_size > o->params_size
                : p->offset + sizeof(int32_t) > o->params_size || !kv_param_accepts(p, p->def))
            return KV_ERR_INVALID;
        for (int32_t c = 0; p->names != NULL && c < p->n_choices; c++)
            if (p->names[c] == NULL || !kv_label_ok(p->names[c]) ||
                strchr(p->names[c], '=') != NULL)
                return KV_ERR_INVALID;
    }
    if (o->n_presets > 0 && o->presets == NULL)
        return KV_ERR_INVALID;
    void *params = o->params_size > 0 ? kv_alloc(o->params_size) : NULL;
    if (o->params_size > 0 && params == NULL)
        return KV_ERR_NOMEM;
    enum kv_status st = KV_OK;
    kv_params_defaults(o, params);
    if (!label_of_ok(o, params))
        st = KV_ERR_INVALID;
    for (int32_t i = 0; i < o->n_presets && st == KV_OK; i++) {
        kv_params_defaults(o, params);
        if (o->presets[i].name == NULL || !kv_label_ok(o->presets[i].name) ||
            o->presets[i].params == NULL ||
            kv_params_parse(o, params, o->presets[i].params) != KV_OK ||
            !label_of_ok(o, params))
            st = KV_ERR_INVALID;
    }
    kv_free(params);
    return st;
}

/* ------------------------------------------------------------------------ */
/* Reserved flags: the commands' own options                                */

static char kv_reserved[KV_STRATEGY_MAX_RESERVED][KV_LABEL_MAX + 3];
static int32_t kv_n_reserved;

int kv_strategy_flag_reserved(const char *flag)
{
    for (int32_t i = 0; flag != NULL && i < kv_n_reserved; i++)
        if (strcmp(kv_reserved[i], flag) == 0)
            return 1;
    return 0;
}

/* 1 when a parameter of o has this flag. */
static int has_flag(const struct kv_strategy_ops *o, const char *flag)
{
    for (int32_t i = 0; i < o->n_params; i++)
        if (o->params[i].flag != NULL && strcmp(o->params[i].flag, flag) == 0)
            return 1;
    return 0;
}

enum kv_status kv_strategy_reserve_flags(const char *const *flags, int32_t n)
{
    if (n == 0) {
        kv_n_reserved = 0;
        return KV_OK;
    }
    if (flags == NULL || n < 0)
        return KV_ERR_INVALID;
    /* every check first, so a refusal reserves nothing */
    for (int32_t k = 0; k < n; k++) {
        if (!flag_ok(flags[k]))
            return KV_ERR_INVALID;
        for (int32_t i = 0; i < kv_strategy_count(); i++)
            if (has_flag(kv_strategy_at(i), flags[k]))
                return KV_ERR_INVALID;
    }
    int32_t fresh = 0;
    for (int32_t k = 0; k < n; k++) {
        int dup = kv_strategy_flag_reserved(flags[k]);
        for (int32_t j = 0; j < k && !dup; j++)
            dup = strcmp(flags[j], flags[k]) == 0;
        fresh += !dup;
    }
    if (fresh > KV_STRATEGY_MAX_RESERVED - kv_n_reserved)
        return KV_ERR_FULL;
    for (int32_t k = 0; k < n; k++)
        if (!kv_strategy_flag_reserved(flags[k]))
            snprintf(kv_reserved[kv_n_reserved++], sizeof kv_reserved[0], "%s", flags[k]);
    return KV_OK;
}

enum kv_status kv_strategy_register(const struct kv_strategy_ops *ops)
{
    enum kv_status st = kv_strategy_validate(ops);
    if (st != KV_OK)
        return st;
    for (int32_t i = 0; i < ops->n_params; i++)
        if (kv_strategy_flag_reserved(ops->params[i].flag))
            return KV_ERR_INVALID;
    if (name_taken(ops->name))
        return KV_ERR_INVALID;
    for (int32_t p = 0; p < ops->n_presets; p++)
        if (name_taken(ops->presets[p].name))
            return KV_ERR_INVALID;
    if (kv_n_extra == KV_STRATEGY_MAX_EXTRA)
        return KV_ERR_FULL;
    kv_extra[kv_n_extra++] = ops;
    return KV_OK;
}

enum kv_status kv_strategy_lookup(const char *name, const struct kv_strategy_ops **ops,
                                  void *params, size_t params_bytes)
{
    if (name == NULL || ops == NULL)
        return KV_ERR_INVALID;
    *ops = NULL;
    for (int32_t i = 0; i < kv_strategy_count(); i++) {
        const struct kv_strategy_ops *o = kv_strategy_at(i);
        const char *preset = NULL;
        if (strcmp(o->name, name) != 0) {
            for (int32_t p = 0; p < o->n_presets && preset == NULL; p++)
                if (strcmp(o->presets[p].name, name) == 0)
                    preset = o->presets[p].params;
            if (preset == NULL)
                continue;
        }
        if (params != NULL) {
            if (params_bytes < o->params_size)
                return KV_ERR_INVALID;
            kv_params_defaults(o, params);
            if (preset != NULL && kv_params_parse(o, params, preset) != KV_OK)
                return KV_ERR_INVALID;
        }
        *ops = o;
        return KV_OK;
    }
    return KV_ERR_INVALID;
}
