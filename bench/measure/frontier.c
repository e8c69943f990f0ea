/*
 * frontier.c - the frontier list and its planner (frontier.h): budgets
 * solved with each strategy's own bytes_for, so a configuration is matched
 * to a budget by the bytes it will really hold, whatever its layout.
 */
#include "frontier.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* The list                                                                 */

/* why <- one sentence; returns st. */
__attribute__((format(printf, 4, 5))) static enum kv_status fail(enum kv_status st, char *why,
                                                                size_t n, const char *fmt, ...)
{
    if (why != NULL && n > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, n, fmt, ap);
        va_end(ap);
    }
    return st;
}

/* Copies the next whitespace-separated field of *p into dst (size n);
 * returns its length, 0 when none, -1 when it does not fit. */
static int field(const char **p, char *dst, size_t n)
{
    const char *s = *p;
    while (*s == ' ' || *s == '\t')
        s++;
    size_t k = 0;
    while (s[k] != '\0' && !isspace((unsigned char)s[k]))
        k++;
    *p = s + k;
    if (k == 0)
        return 0;
    if (k >= n)
        return -1;
    memcpy(dst, s, k);
    dst[k] = '\0';
    return (int)k;
}

enum kv_status kv_frontier_parse(const char *text, struct kv_frontier_line *lines, int32_t max,
                                 int32_t *n, char *why, size_t why_len)
{
    *n = 0;
    int32_t line_no = 0;
    for (const char *p = text; *p != '\0';) {
        const char *end = strchr(p, '\n');
        const size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
        char buf[512];
        line_no++;
        if (len >= sizeof buf)
            return fail(KV_ERR_FORMAT, why, why_len, "line %d is longer than %zu characters", line_no,
                        sizeof buf - 1);
        memcpy(buf, p, len);
        buf[len] = '\0';
        p += len + (end != NULL);
        char *hash = strchr(buf, '#');
        if (hash != NULL)
            *hash = '\0';
        const char *q = buf;
        struct kv_frontier_line L = {.line_no = line_no};
        const int a = field(&q, L.label, sizeof L.label);
        if (a == 0)
            continue; /* blank or a comment */
        const int b = a < 0 ? -1 : field(&q, L.strategy, sizeof L.strategy);
        const int c = b <= 0 ? b : field(&q, L.params, sizeof L.params);
        char extra[8];
        if (a < 0 || b < 0 || c < 0)
            return fail(KV_ERR_FORMAT, why, why_len, "line %d: a field is too long (label %zu, strategy %zu, "
                        "parameters %zu characters at most)", line_no, sizeof L.label - 1,
                        sizeof L.strategy - 1, sizeof L.params - 1);
        if (b == 0 || c == 0 || field(&q, extra, sizeof extra) != 0)
            return fail(KV_ERR_FORMAT, why, why_len, "line %d: expected LABEL STRATEGY PARAMS (PARAMS '-' "
                        "for none)", line_no);
        /* the text rule (strategy.h), at read time: a label ends up in the
         * CSV, the legends and every message */
        char sub[160];
        if (kv_label_why(L.label, sub, sizeof sub) != 0)
            return fail(KV_ERR_FORMAT, why, why_len, "line %d: the label: %s", line_no, sub);
        if (kv_label_why(L.strategy, sub, sizeof sub) != 0)
            return fail(KV_ERR_FORMAT, why, why_len, "line %d: the strategy: %s", line_no, sub);
        for (const char *t = L.params; *t != '\0'; t++)
            if (*t != ';' && !kv_label_char_ok((unsigned char)*t))
                return fail(KV_ERR_FORMAT, why, why_len, "line %d: the parameters: character "
                            "%d is not allowed: parameters are k=v;k=v of letters, digits and "
                            "%s", line_no, (int)(t - L.params) + 1, KV_LABEL_PUNCT);
        if (*n == max)
            return fail(KV_ERR_FORMAT, why, why_len, "more than %d configurations", max);
        lines[(*n)++] = L;
    }
    return KV_OK;
}

enum kv_status kv_frontier_load(const char *path, struct kv_frontier_line *lines, int32_t max,
                                int32_t *n, char *why, size_t why_len)
{
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return fail(KV_ERR_IO, why, why_len, "cannot open it");
    const size_t cap = (size_t)1 << 20;
    char *text = kv_alloc(cap + 1);
    if (text == NULL) {
        fclose(f);
        return fail(KV_ERR_NOMEM, why, why_len, "out of memory");
    }
    const size_t len = fread(text, 1, cap + 1, f);
    const int err = ferror(f);
    fclose(f);
    enum kv_status st;
    if (err)
        st = fail(KV_ERR_IO, why, why_len, "cannot read it");
    else if (len > cap)
        st = fail(KV_ERR_FORMAT, why, why_len, "larger than 1 MiB");
    else if (memchr(text, '\0', len) != NULL)
        st = fail(KV_ERR_FORMAT, why, why_len, "not a text file (a NUL byte)");
    else {
        text[len] = '\0';
        st = kv_frontier_parse(text, lines, max, n, why, why_len);
    }
    kv_free(text);
    return st;
}

/* ------------------------------------------------------------------------ */
/* Planning                                                                 */

/* The registry's starting parameters: defaults, then the preset's. */
static enum kv_status resolve_registry(void *user, const char *name, struct kv_sweep_strategy *st)
{
    (void)user;
    return kv_strategy_lookup(name, &st->ops, st->params, sizeof st->params);
}

/* How make_strategy resolves names (one planner call at a time). */
struct resolver {
    kv_frontier_resolve_fn fn;
    void *user;
};

/* st <- strategy `name` with its parameters: resolved (defaults, flags,
 * the preset's), then tmpl with every '@' replaced by v (v < 0: tmpl has
 * none). */
static enum kv_status make_strategy(const struct resolver *R, struct kv_sweep_strategy *st,
                                    const char *name, const char *tmpl, int64_t v)
{
    memset(st, 0, sizeof *st);
    if (R->fn(R->user, name, st) != KV_OK || st->ops == NULL)
        return KV_ERR_INVALID;
    if (strcmp(tmpl, "-") == 0)
        return KV_OK;
    char text[400];
    size_t w = 0;
    for (const char *t = tmpl; *t != '\0'; t++) {
        const int k = *t == '@' ? snprintf(text + w, sizeof text - w, "%lld", (long long)v)
                                : snprintf(text + w, sizeof text - w, "%c", *t);
        if (k < 0 || (size_t)k >= sizeof text - w)
            return KV_ERR_INVALID;
        w += (size_t)k;
    }
    return kv_params_parse(st->ops, st->params, text);
}

/* Resident bytes the strategy will hold at T tokens, or SIZE_MAX when it
 * cannot say or its parameters do not fit the shape. */
static size_t bytes_at(const struct kv_sweep_strategy *st, const struct kv_cache_config *cc,
                       int32_t T)
{
    size_t b;
    if (kv_params_check(st->ops, cc, st->params, NULL, 0) != KV_OK ||
        kv_cache_bytes_for(st->ops, cc, st->params, T, &b) != KV_OK)
        return SIZE_MAX;
    return b;
}

/* The f32 `dynamic` bytes of T tokens: the budgets' 100%. */
static double f32_bytes(const struct kv_cache_config *cc, int32_t T)
{
    return 2.0 * cc->n_layers * cc->batch * cc->n_kv_heads * cc->head_dim * 4.0 * T;
}

static void notef(void (*note)(void *, const char *), void *user, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void notef(void (*note)(void *, const char *), void *user, const char *fmt, ...)
{
    if (note == NULL)
        return;
    char s[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s, sizeof s, fmt, ap);
    va_end(ap);
    note(user, s);
}

/* Appends st (label set) to cfg with mask bits; KV_ERR_FULL when full. */
static enum kv_status push(struct kv_sweep_config *cfg, uint32_t *only,
                           const struct kv_sweep_strategy *st, uint32_t bits)
{
    if (cfg->n_strategies == KV_SWEEP_MAX_STRATEGIES)
        return KV_ERR_FULL;
    cfg->strategies[cfg->n_strategies] = *st;
    only[cfg->n_strategies++] = bits;
    return KV_OK;
}

enum kv_status kv_frontier_plan(struct kv_sweep_config *cfg, uint32_t *only,
                                const struct kv_cache_config *cc,
                                const struct kv_frontier_line *lines, int32_t n_lines,
                                const double *budgets, int32_t n_budgets,
                                kv_frontier_resolve_fn resolve,
                                void (*note)(void *user, const char *sentence), void *user,
                                char *why, size_t why_len)
{
    const struct resolver R = {resolve != NULL ? resolve : resolve_registry, user};
    const uint32_t all = cfg->n_lens >= 32 ? UINT32_MAX : (1u << cfg->n_lens) - 1;
    const int32_t start = cfg->n_strategies;
    for (int32_t i = 0; i < n_lines; i++) {
        const struct kv_frontier_line *L = &lines[i];
        struct kv_sweep_strategy st;
        if (make_strategy(&R, &st, L->strategy, "-", -1) != KV_OK) {
            notef(note, user, "line %d (%s): no strategy or preset '%s' in this build: skipped",
                  L->line_no, L->label, L->strategy);
            continue;
        }
        if (strchr(L->params, '@') == NULL) { /* a precision: measured as it is */
            if (make_strategy(&R, &st, L->strategy, L->params, -1) != KV_OK) {
                notef(note, user, "line %d (%s): '%s' are not parameters of %s: skipped",
                      L->line_no, L->label, L->params, L->strategy);
                continue;
            }
            if (bytes_at(&st, cc, cfg->seq_lens[0]) == SIZE_MAX) {
                char sub[200] = "its bytes are unknown";
                kv_params_check(st.ops, cc, st.params, sub, sizeof sub);
                notef(note, user, "line %d (%s): %s: skipped", L->line_no, L->label, sub);
                continue;
            }
            snprintf(st.label, sizeof st.label, "%s", L->label);
            if (push(cfg, only, &st, all) != KV_OK)
                return fail(KV_ERR_FULL, why, why_len, "the frontier has more than %d "
                            "configurations", KV_SWEEP_MAX_STRATEGIES);
            continue;
        }
        for (int32_t ti = 0; ti < cfg->n_lens; ti++) {
            const int32_t T = cfg->seq_lens[ti];
            for (int32_t bi = 0; bi < n_budgets; bi++) {
                const double budget = budgets[bi] * f32_bytes(cc, T);
                /* the largest v in [1, T] whose bytes fit (bytes grow with v) */
                int64_t lo = 0, hi = T;
                while (lo < hi) {
                    const int64_t mid = lo + (hi - lo + 1) / 2;
                    size_t b = SIZE_MAX;
                    if (make_strategy(&R, &st, L->strategy, L->params, mid) == KV_OK)
                        b = bytes_at(&st, cc, T);
                    if (b != SIZE_MAX && (double)b <= budget)
                        lo = mid;
                    else
                        hi = mid - 1;
                }
                if (lo < 1 || make_strategy(&R, &st, L->strategy, L->params, lo) != KV_OK ||
                    bytes_at(&st, cc, T) == SIZE_MAX) {
                    char sub[200] = "";
                    if (make_strategy(&R, &st, L->strategy, L->params, T) == KV_OK)
                        kv_params_check(st.ops, cc, st.params, sub, sizeof sub);
                    if (sub[0] != '\0') /* (no value fits the model at all) */
                        notef(note, user, "line %d (%s): %s: skipped", L->line_no, L->label,
                              sub);
                    else
                        notef(note, user, "line %d (%s): no '%s' fits %g%% of the f32 bytes "
                              "at T = %d: skipped", L->line_no, L->label, L->params,
                              100.0 * budgets[bi], T);
                    continue;
                }
                const int k = snprintf(st.label, sizeof st.label, "%s@%g%%", L->label,
                                       100.0 * budgets[bi]);
                if (k < 0 || (size_t)k >= sizeof st.label || !kv_label_ok(st.label))
                    return fail(KV_ERR_INVALID, why, why_len, "line %d: label '%s@%g%%' is "
                                "longer than %zu characters", L->line_no, L->label,
                                100.0 * budgets[bi], sizeof st.label - 1);
                if (push(cfg, only, &st, 1u << ti) != KV_OK)
                    return fail(KV_ERR_FULL, why, why_len, "the frontier has more than %d "
                                "configurations", KV_SWEEP_MAX_STRATEGIES);
            }
        }
    }
    if (cfg->n_strategies == start)
        return fail(KV_ERR_INVALID, why, why_len,
                    "no configuration of the frontier list fits this model");
    return KV_OK;
}
