/*
 * params.c - a strategy's parameters, driven by its table (strategy.h,
 * struct kv_param): defaults, setting by name, range checks, and the
 * `k=v;k=v` text form of the CSV `params` column and of presets.
 *
 * The design decision: a parameter block is the strategy's own struct,
 * opaque here; the table says where each int32_t field (or char field of a
 * text parameter) lives (offset), its range and default, so the CLI, the
 * CSV writer and the tests handle every strategy's parameters with this
 * one file and never name a field.
 */
#include "strategy.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Labels (strategy.h: the one text rule)                                   */

int kv_label_char_ok(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr(KV_LABEL_PUNCT, c) != NULL);
}

int kv_label_why(const char *s, char *why, size_t n)
{
    if (why != NULL && n > 0)
        why[0] = '\0';
    if (s == NULL || s[0] == '\0') {
        if (why != NULL && n > 0)
            snprintf(why, n, "a label may not be empty");
        return -1;
    }
    size_t i = 0;
    for (; s[i] != '\0'; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (i == KV_LABEL_MAX) {
            if (why != NULL && n > 0)
                snprintf(why, n, "a label has at most %d characters", KV_LABEL_MAX);
            return -1;
        }
        if (kv_label_char_ok(c))
            continue;
        if (why != NULL && n > 0) {
            /* the bad byte is named, never echoed unless it is plainly printable */
            char what[16];
            if (c > ' ' && c < 127 && c != '\'' && c != '\\' && c != '"')
                snprintf(what, sizeof what, "'%c'", c);
            else if (c == ' ')
                snprintf(what, sizeof what, "a space");
            else
                snprintf(what, sizeof what, "byte 0x%02x", c);
            snprintf(why, n, "character %zu (%s) is not allowed: a label has only letters, "
                     "digits and %s", i + 1, what, KV_LABEL_PUNCT);
        }
        return -1;
    }
    return 0;
}

int kv_label_ok(const char *s)
{
    return kv_label_why(s, NULL, 0) == 0;
}

/* ------------------------------------------------------------------------ */
/* Fields                                                                   */

static int32_t *field(const struct kv_param *p, void *params)
{
    return (int32_t *)((char *)params + p->offset);
}

static int32_t field_get(const struct kv_param *p, const void *params)
{
    int32_t v;
    memcpy(&v, (const char *)params + p->offset, sizeof v);
    return v;
}

int32_t kv_param_find(const struct kv_strategy_ops *ops, const char *name)
{
    if (ops == NULL || name == NULL)
        return -1;
    for (int32_t i = 0; i < ops->n_params; i++)
        if (strcmp(ops->params[i].name, name) == 0)
            return i;
    return -1;
}

int kv_param_accepts(const struct kv_param *p, int64_t v)
{
    if (p == NULL || p->type == KV_PARAM_TEXT)
        return 0; /* not a number: kv_params_set_text */
    if (p->n_choices > 0) {
        for (int32_t i = 0; i < p->n_choices; i++)
            if (p->choices[i] == v)
                return 1;
        return 0;
    }
    return v >= p->lo && v <= p->hi;
}

int kv_param_range_str(const struct kv_param *p, char *buf, size_t n)
{
    if (buf == NULL || n == 0)
        return 0;
    if (p == NULL)
        return snprintf(buf, n, "?");
    if (p->type == KV_PARAM_TEXT)
        return snprintf(buf, n, "a text of at most %d characters", p->text_size - 1);
    if (p->n_choices == 0)
        return snprintf(buf, n, "an integer in [%lld, %lld]", (long long)p->lo,
                        (long long)p->hi);
    int w = snprintf(buf, n, "one of ");
    for (int32_t i = 0; i < p->n_choices && w >= 0 && (size_t)w < n; i++) {
        const char *sep = i == 0 ? "" : i + 1 == p->n_choices ? " or " : ", ";
        if (p->names != NULL)
            w += snprintf(buf + w, n - (size_t)w, "%s%s", sep, p->names[i]);
        else
            w += snprintf(buf + w, n - (size_t)w, "%s%d", sep, p->choices[i]);
    }
    return w;
}

enum kv_status kv_param_parse_value(const struct kv_param *p, const char *text, int64_t *v)
{
    if (p == NULL || text == NULL || v == NULL)
        return KV_ERR_INVALID;
    if (p->names != NULL) {
        for (int32_t i = 0; i < p->n_choices; i++)
            if (strcmp(text, p->names[i]) == 0) {
                *v = p->choices[i];
                return KV_OK;
            }
        return KV_ERR_INVALID;
    }
    char *end;
    errno = 0;
    long long x = strtoll(text, &end, 10);
    if (text[0] == '\0' || isspace((unsigned char)text[0]) || *end != '\0' || errno != 0 ||
        !kv_param_accepts(p, x))
        return KV_ERR_INVALID;
    *v = x;
    return KV_OK;
}

int kv_param_value_str(const struct kv_param *p, int64_t v, char *buf, size_t n)
{
    if (buf == NULL || n == 0)
        return 0;
    for (int32_t i = 0; p != NULL && p->names != NULL && i < p->n_choices; i++)
        if (p->choices[i] == v)
            return snprintf(buf, n, "%s", p->names[i]);
    return snprintf(buf, n, "%lld", (long long)v);
}

/* ------------------------------------------------------------------------ */
/* Blocks                                                                   */

void kv_params_defaults(const struct kv_strategy_ops *ops, void *params)
{
    if (ops == NULL || params == NULL || ops->params_size == 0)
        return;
    memset(params, 0, ops->params_size);
    for (int32_t i = 0; i < ops->n_params; i++) {
        const struct kv_param *p = &ops->params[i];
        if (p->type == KV_PARAM_TEXT)
            snprintf((char *)params + p->offset, (size_t)p->text_size, "%s", p->def_text);
        else
            *field(p, params) = p->def;
    }
}

/* 1 when text may be the value of text parameter p (see strategy.h): label
 * characters but '=', and ',' (stored as '+'). */
static int text_ok(const struct kv_param *p, const char *text)
{
    const size_t n = strlen(text);
    if (n == 0 || n >= (size_t)p->text_size)
        return 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)text[i];
        if (c == '=' || (c != ',' && !kv_label_char_ok(c)))
            return 0;
    }
    return 1;
}

enum kv_status kv_params_set_text(const struct kv_strategy_ops *ops, void *params,
                                  const char *name, const char *text)
{
    const int32_t i = kv_param_find(ops, name);
    if (i < 0 || params == NULL || text == NULL)
        return KV_ERR_INVALID;
    const struct kv_param *p = &ops->params[i];
    if (p->type != KV_PARAM_TEXT) { /* a number, or a choice by name */
        int64_t v;
        if (kv_param_parse_value(p, text, &v) != KV_OK)
            return KV_ERR_INVALID;
        return kv_params_set(ops, params, name, v);
    }
    if (!text_ok(p, text))
        return KV_ERR_INVALID;
    char *dst = (char *)params + p->offset;
    size_t k = 0;
    for (; text[k] != '\0'; k++)
        dst[k] = text[k] == ',' ? '+' : text[k];
    memset(dst + k, 0, (size_t)p->text_size - k);
    return KV_OK;
}

const char *kv_params_get_text(const struct kv_strategy_ops *ops, const void *params, int32_t i)
{
    if (ops == NULL || params == NULL || i < 0 || i >= ops->n_params)
        return NULL;
    const struct kv_param *p = &ops->params[i];
    return p->type == KV_PARAM_TEXT ? (const char *)params + p->offset : NULL;
}

enum kv_status kv_params_set(const struct kv_strategy_ops *ops, void *params, const char *name,
                             int64_t value)
{
    const int32_t i = kv_param_find(ops, name);
    if (i < 0 || params == NULL || !kv_param_accepts(&ops->params[i], value))
        return KV_ERR_INVALID;
    *field(&ops->params[i], params) = (int32_t)value;
    return KV_OK;
}

int32_t kv_params_get(const struct kv_strategy_ops *ops, const void *params, int32_t i)
{
    if (ops == NULL || params == NULL || i < 0 || i >= ops->n_params ||
        ops->params[i].type == KV_PARAM_TEXT)
        return 0;
    return field_get(&ops->params[i], params);
}

enum kv_status kv_params_check(const struct kv_strategy_ops *ops,
                               const struct kv_cache_config *cfg, const void *params,
                               char *why, size_t why_len)
{
    if (why != NULL && why_len > 0)
        why[0] = '\0';
    if (ops == NULL || cfg == NULL || (ops->params_size > 0 && params == NULL))
        return KV_ERR_INVALID;
    for (int32_t i = 0; i < ops->n_params; i++) {
        const struct kv_param *p = &ops->params[i];
        if (p->type == KV_PARAM_TEXT) { /* its meaning: the strategy's check */
            const char *t = (const char *)params + p->offset;
            if (memchr(t, '\0', (size_t)p->text_size) == NULL || !text_ok(p, t)) {
                if (why != NULL && why_len > 0)
                    snprintf(why, why_len, "%s expects a text of letters, digits and "
                             "%s but '='", p->flag, KV_LABEL_PUNCT);
                return KV_ERR_INVALID;
            }
            continue;
        }
        const int32_t v = field_get(p, params);
        if (!kv_param_accepts(p, v)) {
            if (why != NULL && why_len > 0) {
                char range[128];
                kv_param_range_str(p, range, sizeof range);
                snprintf(why, why_len, "%s expects %s, got %d", p->flag, range, v);
            }
            return KV_ERR_INVALID;
        }
    }
    if (ops->check != NULL)
        return ops->check(cfg, params, why, why_len);
    return KV_OK;
}

int kv_params_format(const struct kv_strategy_ops *ops, const void *params, char *buf, size_t n)
{
    if (buf == NULL || n == 0)
        return 0;
    buf[0] = '\0';
    if (ops == NULL || ops->n_params == 0 || params == NULL)
        return snprintf(buf, n, "-");
    int w = 0;
    for (int32_t i = 0; i < ops->n_params && w >= 0 && (size_t)w < n; i++) {
        const struct kv_param *p = &ops->params[i];
        if (p->type == KV_PARAM_TEXT) {
            w += snprintf(buf + w, n - (size_t)w, "%s%s=%.*s", i ? ";" : "", p->name,
                          p->text_size, (const char *)params + p->offset);
        } else {
            char v[64];
            kv_param_value_str(p, field_get(p, params), v, sizeof v);
            w += snprintf(buf + w, n - (size_t)w, "%s%s=%s", i ? ";" : "", p->name, v);
        }
    }
    return w;
}

enum kv_status kv_params_parse(const struct kv_strategy_ops *ops, void *params, const char *text)
{
    if (ops == NULL || params == NULL || text == NULL)
        return KV_ERR_INVALID;
    if (strcmp(text, "-") == 0 || text[0] == '\0')
        return KV_OK;
    const char *p = text;
    for (;;) {
        const size_t len = strcspn(p, ";");
        const char *eq = memchr(p, '=', len);
        char name[64], val[512];
        if (eq == NULL || (size_t)(eq - p) >= sizeof name || len - (size_t)(eq - p) - 1 >= sizeof val)
            return KV_ERR_INVALID;
        memcpy(name, p, (size_t)(eq - p));
        name[eq - p] = '\0';
        const size_t nl = len - (size_t)(eq - p) - 1;
        memcpy(val, eq + 1, nl);
        val[nl] = '\0';
        if (nl == 0 || kv_params_set_text(ops, params, name, val) != KV_OK)
            return KV_ERR_INVALID;
        if (p[len] == '\0')
            return KV_OK;
        p += len + 1;
    }
}
