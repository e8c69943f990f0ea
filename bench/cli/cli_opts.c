/*
 * cli_opts.c - strict option parsing for the model-running subcommands
 * (see cli_opts.h).
 *
 * The design decision that matters: every value is parsed whole and checked
 * against a stated range before anything is sized or allocated, and every
 * size the options imply is multiplied with overflow checks, so bad input
 * always ends in one line naming the option and exit status 2, never in a
 * wrapped size, a huge allocation or a crash. Options take their value as
 * the next argument or after '=' (--dim 512, --dim=512).
 */
#include "cli_opts.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_io.h"
#include "../model/file_check.h"

/* ------------------------------------------------------------------------ */
/* Numbers                                                                  */

/* Strict decimal: optional sign, digits, nothing else; 0 on success. */
static int parse_i64(const char *s, int64_t *out)
{
    if (s == NULL || *s == '\0' || isspace((unsigned char)*s))
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || end == s)
        return -1;
    *out = (int64_t)v;
    return 0;
}

int kv_cli_int(const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    int64_t v;
    if (parse_i64(s, &v) != 0 || v < lo || v > hi) {
        kv_cli_error("%s expects an integer in [%" PRId64 ", %" PRId64 "], got '%s'\n",
                opt, lo, hi, kv_text_q(s));
        return -1;
    }
    *out = v;
    return 0;
}

int kv_cli_i32(const char *opt, const char *s, int32_t lo, int32_t hi, int32_t *out)
{
    int64_t v;
    if (kv_cli_int(opt, s, lo, hi, &v) != 0)
        return -1;
    *out = (int32_t)v;
    return 0;
}

int kv_cli_int_list(const char *opt, const char *s, int32_t lo, int32_t hi,
                    int32_t *out, int max_n)
{
    char item[32];
    int n = 0;
    const char *p = s != NULL ? s : "";
    for (;;) {
        size_t len = strcspn(p, ",");
        int64_t v;
        int bad = len == 0 || len >= sizeof item;
        if (!bad) {
            memcpy(item, p, len);
            item[len] = '\0';
            bad = parse_i64(item, &v) != 0 || v < lo || v > hi;
        }
        if (bad) {
            fprintf(stderr,
                    "kvlab: %s expects a comma-separated list of integers in [%" PRId32
                    ", %" PRId32 "], got '%s'\n",
                    opt, lo, hi, kv_text_q(s));
            return -1;
        }
        if (n == max_n) {
            kv_cli_error("%s takes at most %d values, got '%s'\n", opt, max_n,
                    kv_text_q(s));
            return -1;
        }
        out[n++] = (int32_t)v;
        if (p[len] == '\0')
            return n;
        p += len + 1;
    }
}

/* ------------------------------------------------------------------------ */
/* Common options                                                           */

/* The flag entry for a parameter flag, or NULL. */
static struct kv_cli_flag *flag_of(struct kv_cli_common *c, const char *flag)
{
    for (int32_t i = 0; i < c->n_flags; i++)
        if (strcmp(c->flags[i].param->flag, flag) == 0)
            return &c->flags[i];
    return NULL;
}

void kv_cli_common_defaults(struct kv_cli_common *c)
{
    memset(c, 0, sizeof *c);
    c->model = kv_model_default_config();
    c->cache = (struct kv_cache_config){
        .n_layers = c->model.n_layers,
        .batch = 1,
        .n_kv_heads = c->model.n_kv_heads,
        .head_dim = c->model.dim / c->model.n_heads,
        .max_len = c->model.max_len,
    };
    /* every strategy's parameter flags, each once, in registry order */
    for (int32_t i = 0; i < kv_strategy_count(); i++) {
        const struct kv_strategy_ops *ops = kv_strategy_at(i);
        for (int32_t k = 0; k < ops->n_params; k++) {
            const struct kv_param *p = &ops->params[k];
            if (flag_of(c, p->flag) != NULL || c->n_flags == KV_CLI_MAX_FLAGS)
                continue;
            c->flags[c->n_flags++] = (struct kv_cli_flag){.param = p, .value = p->def};
        }
    }
    c->batch = 1;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    c->threads = cores >= 1 && cores <= 1024 ? (int32_t)cores : 1;
    c->seed = 42;
}

/* ------------------------------------------------------------------------ */
/* Cross-checks                                                             */

struct kv_cache_config kv_cli_cache_config(const struct kv_cli_common *c)
{
    const struct kv_model_config *m = &c->model;
    return (struct kv_cache_config){.n_layers = m->n_layers,
                                    .batch = c->batch,
                                    .n_kv_heads = m->n_kv_heads,
                                    .head_dim = m->n_heads > 0 ? m->dim / m->n_heads : 0,
                                    .max_len = m->max_len};
}

int kv_cli_strategy(const struct kv_cli_common *c, const char *name, struct kv_cli_strategy *out)
{
    memset(out, 0, sizeof *out);
    if (name == NULL)
        name = c->strategy;
    const struct kv_strategy_ops *ops = NULL;
    if (name == NULL || kv_strategy_lookup(name, &ops, NULL, 0) != KV_OK) {
        kv_cli_error("unknown strategy '%s' (see 'kvlab strategies')\n",
                kv_text_q(name));
        return -1;
    }
    if (ops->params_size > sizeof out->params) {
        kv_cli_error("strategy '%s' has %zu bytes of parameters, more than the "
                        "CLI's %zu\n", ops->name, ops->params_size, sizeof out->params);
        return -1;
    }
    out->ops = ops;
    kv_params_defaults(ops, out->params);
    for (int32_t k = 0; k < ops->n_params; k++) {
        const struct kv_param *p = &ops->params[k];
        for (int32_t i = 0; i < c->n_flags; i++) {
            if (!c->flags[i].given || strcmp(c->flags[i].param->flag, p->flag) != 0)
                continue;
            if (p->type == KV_PARAM_TEXT) {
                if (c->flags[i].text == NULL ||
                    kv_params_set_text(ops, out->params, p->name, c->flags[i].text) != KV_OK) {
                    char range[128];
                    kv_param_range_str(p, range, sizeof range);
                    kv_cli_error("%s expects %s (no spaces, ';', '=' or quotes), "
                                    "got '%s'\n", p->flag, range,
                            kv_text_q(c->flags[i].text));
                    return -1;
                }
                continue;
            }
            if (kv_params_set(ops, out->params, p->name, c->flags[i].value) != KV_OK) {
                char range[128];
                kv_param_range_str(p, range, sizeof range);
                char got[64];
                kv_param_value_str(p, c->flags[i].value, got, sizeof got);
                kv_cli_error("%s expects %s for %s, got %s\n", p->flag, range,
                        ops->name, got);
                return -1;
            }
        }
    }
    /* a preset's own values last: its name says what it is */
    for (int32_t k = 0; k < ops->n_presets; k++)
        if (strcmp(ops->presets[k].name, name) == 0 &&
            kv_params_parse(ops, out->params, ops->presets[k].params) != KV_OK)
            return -1; /* cannot happen: kv_strategy_register checks presets */
    return 0;
}

int kv_cli_slots_apply(const struct kv_strategy_ops *ops)
{
    const uint32_t slots = KV_CAP_PREALLOCATES | KV_CAP_BOUNDED;
    return (ops->caps & slots) == slots;
}

int kv_cli_check_strategy(const char *cmd, const struct kv_strategy_ops *ops, const void *params,
                          const struct kv_cache_config *cc, int32_t tokens, int memory,
                          size_t *bytes)
{
    char why[256] = "";
    if (kv_params_check(ops, cc, params, why, sizeof why) != KV_OK) {
        fprintf(stderr, "kvlab: %s: %s: %s\n", cmd, ops->name,
                why[0] ? kv_text_sentence(why) : "invalid strategy parameters");
        return 2;
    }
    /* what sizes it beyond its tokens: the parameters its table says scale
     * memory, and the preallocated capacity of a cache that has one */
    char sizing[160] = "";
    size_t w = 0;
    for (int32_t k = 0; k < ops->n_params && w < sizeof sizing; k++) {
        const struct kv_param *p = &ops->params[k];
        if (!p->scales_memory)
            continue;
        char v[160];
        if (p->type == KV_PARAM_TEXT) {
            snprintf(v, sizeof v, "%s", kv_text_sentence(kv_params_get_text(ops, params, k)));
        } else {
            const int32_t x = kv_params_get(ops, params, k);
            if (p->names != NULL && x == p->def)
                continue; /* a named choice at its default (--dtype f32) says nothing */
            kv_param_value_str(p, x, v, sizeof v);
        }
        w += (size_t)snprintf(sizing + w, sizeof sizing - w, "%s %s %s", w ? "" : " with",
                              p->flag, v);
    }
    if (kv_cli_slots_apply(ops) && w < sizeof sizing)
        snprintf(sizing + w, sizeof sizing - w, "%s %" PRId32 " preallocated slots",
                 w ? " and" : " with", cc->max_len);
    size_t b = 0;
    enum kv_status s = kv_cache_bytes_for(ops, cc, params, tokens, &b);
    if (s == KV_ERR_OVERFLOW) {
        fprintf(stderr, "kvlab: %s: the %s cache%s needs more bytes than size_t holds\n", cmd,
                ops->name, sizing);
        return 2;
    }
    if (s != KV_OK) {
        b = 0; /* the strategy cannot say (no bytes_for): not refused on memory */
    } else if (memory) {
        char what[256];
        snprintf(what, sizeof what, "%s: the %s cache%s", cmd, ops->name, sizing);
        if (kv_cli_check_memory(what, b) != 0)
            return 2;
    }
    if (bytes != NULL)
        *bytes = b;
    return 0;
}

void kv_cli_cache_full(const char *cmd, const struct kv_strategy_ops *ops, const void *params)
{
    char sizing[200] = "";
    size_t w = 0;
    for (int32_t k = 0; k < ops->n_params && w < sizeof sizing; k++) {
        const struct kv_param *p = &ops->params[k];
        if (!p->scales_memory)
            continue;
        char v[160];
        if (p->type != KV_PARAM_TEXT && p->names != NULL && kv_params_get(ops, params, k) == p->def)
            continue; /* a named choice at its default (--dtype f32) sizes nothing */
        if (p->type == KV_PARAM_TEXT)
            snprintf(v, sizeof v, "%s", kv_text_sentence(kv_params_get_text(ops, params, k)));
        else
            kv_param_value_str(p, kv_params_get(ops, params, k), v, sizeof v);
        w += (size_t)snprintf(sizing + w, sizeof sizing - w, "%s %s %s", w ? "" : " with",
                              p->flag, v);
    }
    fprintf(stderr, "kvlab: %s: the %s cache is full%s; give it more room%s\n", cmd, ops->name,
            sizing, w ? " through those options" : "");
}

void kv_cli_flag_default(struct kv_cli_common *c, const char *flag, int64_t value)
{
    struct kv_cli_flag *pf = flag_of(c, flag);
    if (pf != NULL) {
        pf->value = value;
        pf->given = 1;
    }
}

void kv_cli_print_param_help(FILE *f)
{
    struct kv_cli_common c;
    kv_cli_common_defaults(&c);
    for (int32_t i = 0; i < c.n_flags; i++) {
        const struct kv_param *p = c.flags[i].param;
        char users[256] = "";
        size_t w = 0;
        for (int32_t s = 0; s < kv_strategy_count() && w < sizeof users; s++) {
            const struct kv_strategy_ops *ops = kv_strategy_at(s);
            for (int32_t k = 0; k < ops->n_params; k++)
                if (strcmp(ops->params[k].flag, p->flag) == 0) {
                    w += (size_t)snprintf(users + w, sizeof users - w, "%s%s", w ? ", " : "",
                                          ops->name);
                    break;
                }
        }
        if (p->type == KV_PARAM_TEXT) {
            fprintf(f, "  %-14s %s (%s; default %s)\n", p->flag, p->help, users, p->def_text);
        } else {
            char def[64];
            kv_param_value_str(p, p->def, def, sizeof def);
            fprintf(f, "  %-14s %s (%s; default %s)\n", p->flag, p->help, users, def);
        }
    }
}

int kv_cli_check_common(const struct kv_cli_common *c)
{
    const struct kv_model_config *m = &c->model;
    if (c->strategy != NULL) {
        const struct kv_strategy_ops *ops;
        if (kv_strategy_lookup(c->strategy, &ops, NULL, 0) != KV_OK) {
            kv_cli_error("unknown strategy '%s' (see 'kvlab strategies')\n",
                    kv_text_q(c->strategy));
            return -1;
        }
    }
    if (m->dim % m->n_heads != 0) {
        kv_cli_error("--dim (%" PRId32 ") must be a multiple of --heads (%" PRId32
                        ")\n", m->dim, m->n_heads);
        return -1;
    }
    int32_t hs = m->dim / m->n_heads;
    if (hs % 2 != 0) {
        kv_cli_error("head_dim = --dim / --heads = %" PRId32
                        " must be even (RoPE rotates pairs)\n", hs);
        return -1;
    }
    if (m->n_heads % m->n_kv_heads != 0) {
        kv_cli_error("--kv-heads (%" PRId32 ") must divide --heads (%" PRId32 ")\n",
                m->n_kv_heads, m->n_heads);
        return -1;
    }
    /* A strategy's own parameters (--group, --window, ...) are checked by
     * kv_cli_check_strategy, per strategy the command really runs, against
     * the model it really runs on (a --model checkpoint's shape, known only
     * after loading): not here, against the options' model, for every
     * registered strategy. */
    enum kv_status s = kv_model_config_check(m);
    if (s == KV_ERR_OVERFLOW) {
        kv_cli_error("the model's weight bytes overflow "
                        "(--layers x --dim x --hidden, --vocab x --dim)\n");
        return -1;
    }
    if (s != KV_OK) {
        kv_cli_error("invalid model configuration: %s\n", kv_status_str(s));
        return -1;
    }
    size_t bytes;
    const size_t f[] = {(size_t)m->n_layers, (size_t)c->batch, (size_t)m->n_kv_heads,
                        (size_t)hs, (size_t)m->max_len, 2 * sizeof(float)};
    if (kv_mul_sizes(&bytes, 6, f) != KV_OK) {
        kv_cli_error("the cache's byte count overflows "
                        "(--layers x --batch x --kv-heads x head_dim x --max-len)\n");
        return -1;
    }
    return 0;
}

int kv_cli_check_memory(const char *what, size_t bytes)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0)
        return 0;
    size_t phys;
    if (kv_mul_size(&phys, (size_t)pages, (size_t)page) != KV_OK)
        return 0;
    if (bytes > phys) {
        fprintf(stderr, "kvlab: %s needs %zu bytes, more than this machine's %zu bytes of "
                        "memory\n", what, bytes, phys);
        return -1;
    }
    return 0;
}

int kv_cli_same_file(const char *a, const char *b) { return kv_file_same(a, b); }
