/*
 * cli_values.c - the value rules of every option (see cli_cmd_impl.h):
 * decimal numbers only, whole, in range and finite; enums by their words;
 * lists of labels or strategies each once; a strategy parameter by its
 * table. And the shared option groups' table, one row per option.
 *
 * The design decision: a value is parsed once, here, and a message about
 * it always quotes it (kv_text_q), so no command parses or echoes a value
 * itself.
 */
#include "cli_cmd_impl.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli_io.h"

/* ------------------------------------------------------------------------ */
/* The shared groups                                                        */

#define C(field) offsetof(struct kv_cli_common, field)
static const char *const on_off[] = {"off", "on", NULL};

const struct grp_opt kv_cmdi_groups[] = {
    {KV_GRP_MODEL, {.name = "--layers", .kind = KV_OPT_INT, .off = C(model.n_layers), .lo = 1,
                    .hi = 1 << 20, .meta = "N", .help = "decoder layers of the synthetic model"}},
    {KV_GRP_MODEL, {.name = "--dim", .kind = KV_OPT_INT, .off = C(model.dim), .lo = 2,
                    .hi = 1 << 30, .meta = "N", .help = "model width (heads x head_dim)"}},
    {KV_GRP_MODEL, {.name = "--heads", .kind = KV_OPT_INT, .off = C(model.n_heads), .lo = 1,
                    .hi = 4096, .meta = "N", .help = "query heads"}},
    {KV_GRP_MODEL, {.name = "--kv-heads", .kind = KV_OPT_INT, .off = C(model.n_kv_heads),
                    .lo = 1, .hi = 4096, .meta = "N",
                    .help = "key/value heads (divides --heads: grouped-query attention)"}},
    {KV_GRP_MODEL, {.name = "--hidden", .kind = KV_OPT_INT, .off = C(model.hidden_dim), .lo = 1,
                    .hi = 1 << 30, .meta = "N", .help = "MLP hidden width"}},
    {KV_GRP_MODEL, {.name = "--vocab", .kind = KV_OPT_INT, .off = C(model.vocab_size), .lo = 1,
                    .hi = 1 << 30, .meta = "N", .help = "vocabulary size"}},
    {KV_GRP_MODEL, {.name = "--max-len", .kind = KV_OPT_INT, .off = C(model.max_len), .lo = 1,
                    .hi = 1 << 30, .meta = "N", .help = "longest sequence the model takes"}},
    {KV_GRP_MODEL, {.name = "--mlp", .kind = KV_OPT_ENUM, .off = C(model.mlp), .names = on_off,
                    .meta = "on|off", .help = "the SwiGLU MLP of every layer"}},
    {KV_GRP_CHECKPOINT, {.name = "--model", .kind = KV_OPT_INPUT, .off = C(model_path),
                         .meta = "FILE", .help = "a llama2.c checkpoint instead of the synthetic "
                                                 "model (its header sets the shape)"}},
    {KV_GRP_TOKENIZER, {.name = "--tokenizer", .kind = KV_OPT_INPUT, .off = C(tokenizer_path),
                        .meta = "FILE", .help = "a llama2.c tokenizer.bin"}},
    {KV_GRP_STRATEGY, {.name = "--strategy", .kind = KV_OPT_STRATEGY, .off = C(strategy),
                       .meta = "NAME", .help = "cache strategy or preset (kvlab strategies)"}},
    {KV_GRP_BATCH, {.name = "--batch", .kind = KV_OPT_INT, .off = C(batch), .lo = 1,
                    .hi = 1 << 16, .meta = "B", .help = "sequences per forward"}},
    {KV_GRP_THREADS, {.name = "--threads", .kind = KV_OPT_INT, .off = C(threads), .lo = 1,
                      .hi = 1024, .meta = "N", .help = "threads"}},
    {KV_GRP_SEED, {.name = "--seed", .kind = KV_OPT_I64, .off = C(seed), .lo = 0,
                   .hi = INT64_MAX, .meta = "S", .help = "seed of the weights and random inputs"}},
};
#undef C
const size_t kv_cmdi_n_groups = sizeof kv_cmdi_groups / sizeof kv_cmdi_groups[0];

/* ------------------------------------------------------------------------ */
/* Values                                                                   */

static int parse_i64(const char *s, int64_t *out)
{
    if (s == NULL || *s == '\0' || !(isdigit((unsigned char)*s) || *s == '-' || *s == '+'))
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || end == s)
        return -1;
    *out = (int64_t)v;
    return 0;
}

/* Decimal only: [sign] digits [. digits] [e [sign] digits]; no hex, no
 * inf or nan, no spaces. */
static int parse_f64(const char *s, double *out)
{
    const char *p = s;
    if (p == NULL)
        return -1;
    if (*p == '+' || *p == '-')
        p++;
    size_t digits = 0;
    while (isdigit((unsigned char)*p)) {
        p++;
        digits++;
    }
    if (*p == '.') {
        p++;
        while (isdigit((unsigned char)*p)) {
            p++;
            digits++;
        }
    }
    if (digits == 0)
        return -1;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!isdigit((unsigned char)*p))
            return -1;
        while (isdigit((unsigned char)*p))
            p++;
    }
    if (*p != '\0')
        return -1;
    errno = 0;
    double v = strtod(s, NULL);
    if (errno != 0 || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

/* The first comma-separated item of s into buf, *next past it (NULL after
 * the last); its length, or -1 when it does not fit. */
static int item(const char *s, char *buf, size_t cap, const char **next)
{
    *next = NULL;
    if (s == NULL)
        return -1;
    size_t len = strcspn(s, ",");
    if (len >= cap)
        return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    *next = s[len] == ',' ? s + len + 1 : NULL;
    return (int)len;
}

/* Describes what o expects, for messages and --help. */
void kv_cmdi_expects(const struct kv_opt *o, char *buf, size_t n)
{
    switch (o->kind) {
    case KV_OPT_INT:
    case KV_OPT_I64:
        snprintf(buf, n, "an integer in [%" PRId64 ", %" PRId64 "]", o->lo, o->hi);
        break;
    case KV_OPT_FLOAT:
        snprintf(buf, n, "a decimal number in [%g, %g]", o->flo, o->fhi);
        break;
    case KV_OPT_ENUM: {
        size_t w = (size_t)snprintf(buf, n, "one of");
        for (int i = 0; o->names[i] != NULL && w < n; i++)
            w += (size_t)snprintf(buf + w, n - w, "%s %s", i ? "," : "", o->names[i]);
        break;
    }
    case KV_OPT_INTS:
        snprintf(buf, n, "a comma-separated list of at most %d integers in [%" PRId64 ", %" PRId64
                 "]", o->hi_n > 0 ? o->hi_n : KV_OPT_INTS_MAX, o->lo, o->hi);
        break;
    case KV_OPT_LABELS:
        snprintf(buf, n, "a comma-separated list of names (letters, digits, . _ + - : * = @)");
        break;
    case KV_OPT_STRATEGY:
        snprintf(buf, n, "a strategy or preset name (see 'kvlab strategies')");
        break;
    case KV_OPT_STRATEGIES:
        snprintf(buf, n, "a comma-separated list of strategy or preset names, each once "
                         "(see 'kvlab strategies')");
        break;
    case KV_OPT_INPUT:
    case KV_OPT_OUTPUT:
        snprintf(buf, n, "a file name");
        break;
    default:
        snprintf(buf, n, "a value");
        break;
    }
}

/* Parses v for o into field; prints one line and returns -1 on failure. */
int kv_cmdi_parse_value(const char *cmd, const struct kv_opt *o, const char *v, void *field)
{
    char why[200] = "";
    int bad = 0;
    switch (o->kind) {
    case KV_OPT_FLAG:
        *(int *)field = 1;
        break;
    case KV_OPT_INT:
    case KV_OPT_I64: {
        int64_t x;
        bad = parse_i64(v, &x) != 0 || x < o->lo || x > o->hi;
        if (!bad && o->kind == KV_OPT_INT)
            *(int32_t *)field = (int32_t)x;
        else if (!bad)
            memcpy(field, &x, sizeof x);
        break;
    }
    case KV_OPT_FLOAT: {
        double x;
        bad = parse_f64(v, &x) != 0 || !(x >= o->flo && x <= o->fhi);
        if (!bad)
            *(double *)field = x;
        break;
    }
    case KV_OPT_ENUM:
        bad = 1;
        for (int i = 0; o->names[i] != NULL; i++)
            if (strcmp(o->names[i], v) == 0) {
                *(int *)field = i;
                bad = 0;
            }
        break;
    case KV_OPT_INTS: {
        struct kv_opt_ints *l = field;
        const int32_t max = o->hi_n > 0 ? o->hi_n : KV_OPT_INTS_MAX;
        l->n = 0;
        for (const char *p = v; p != NULL && !bad;) {
            char buf[32];
            int64_t x;
            bad = item(p, buf, sizeof buf, &p) <= 0 || parse_i64(buf, &x) != 0 ||
                  x < o->lo || x > o->hi || l->n == max;
            if (!bad)
                l->v[l->n++] = (int32_t)x;
        }
        break;
    }
    case KV_OPT_LABELS:
    case KV_OPT_STRATEGIES: {
        char seen[KV_CMD_MAX_STRATEGIES][64];
        int32_t ns = 0;
        for (const char *p = v; p != NULL && !bad;) {
            char buf[64];
            bad = item(p, buf, sizeof buf, &p) <= 0 || !kv_cli_label_ok(buf) ||
                  ns == KV_CMD_MAX_STRATEGIES;
            if (!bad && o->kind == KV_OPT_STRATEGIES) {
                const struct kv_strategy_ops *ops;
                if (kv_strategy_lookup(buf, &ops, NULL, 0) != KV_OK) {
                    fprintf(stderr, "kvlab: %s: %s: unknown strategy '%s' (see 'kvlab "
                                    "strategies')\n", cmd, o->name, kv_text_q(buf));
                    return -1;
                }
            }
            for (int32_t k = 0; !bad && k < ns; k++)
                if (strcmp(seen[k], buf) == 0) {
                    fprintf(stderr, "kvlab: %s: %s names '%s' twice\n", cmd, o->name,
                            kv_text_q(buf));
                    return -1;
                }
            if (!bad)
                memcpy(seen[ns++], buf, sizeof buf);
        }
        if (!bad)
            *(const char **)field = v;
        break;
    }
    case KV_OPT_STRATEGY: {
        const struct kv_strategy_ops *ops;
        if (!kv_cli_label_ok(v) || kv_strategy_lookup(v, &ops, NULL, 0) != KV_OK) {
            fprintf(stderr, "kvlab: %s: %s: unknown strategy '%s' (see 'kvlab strategies')\n",
                    cmd, o->name, kv_text_q(v));
            return -1;
        }
        *(const char **)field = v;
        break;
    }
    case KV_OPT_INPUT:
    case KV_OPT_OUTPUT:
        bad = v[0] == '\0';
        if (!bad)
            *(const char **)field = v;
        break;
    case KV_OPT_TEXT:
        *(const char **)field = v;
        break;
    case KV_OPT_CUSTOM:
        if (o->parse(v, field, why, sizeof why) != 0) {
            fprintf(stderr, "kvlab: %s: %s expects %s, got '%s'\n", cmd, o->name, why,
                    kv_text_q(v));
            return -1;
        }
        break;
    default:
        bad = 1;
        break;
    }
    if (bad) {
        kv_cmdi_expects(o, why, sizeof why);
        fprintf(stderr, "kvlab: %s: %s expects %s, got '%s'\n", cmd, o->name, why, kv_text_q(v));
        return -1;
    }
    return 0;
}

/* A strategy parameter flag's value, as cli_opts has always read it. */
int kv_cmdi_parse_param(const char *cmd, struct kv_cli_flag *f, const char *v)
{
    if (f->param->type == KV_PARAM_TEXT) {
        f->text = v; /* its strategy checks the text's own syntax */
    } else {
        int64_t x;
        if (kv_param_parse_value(f->param, v, &x) != KV_OK) {
            char range[128];
            kv_param_range_str(f->param, range, sizeof range);
            fprintf(stderr, "kvlab: %s: %s expects %s, got '%s'\n", cmd, f->param->flag, range,
                    kv_text_q(v));
            return -1;
        }
        f->value = x;
    }
    f->given = 1;
    return 0;
}

