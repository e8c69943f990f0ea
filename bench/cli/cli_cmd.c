/*
 * cli_cmd.c - the one command-line parser (see cli_cmd.h).
 *
 * The design decision that matters: nothing here knows a command. A
 * command hands over its table; the parser builds getopt_long's option
 * array from it (plus the shared groups and the registry's parameter
 * flags), and every check - number syntax and range, the option's modes,
 * the strategy parameters' strategies, the files - is a walk over that
 * table. A check added here covers every command at once.
 */
#include "cli_cmd.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_io.h"
#include "../model/file_check.h"

/* ------------------------------------------------------------------------ */
/* The shared groups                                                        */

#define C(field) offsetof(struct kv_cli_common, field)
static const char *const on_off[] = {"off", "on", NULL};

/* bit: the KV_GRP_* a group option belongs to */
struct grp_opt {
    uint32_t group;
    struct kv_opt o;
};

static const struct grp_opt grp_opts[] = {
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
#define N_GRP (sizeof grp_opts / sizeof grp_opts[0])

/* ------------------------------------------------------------------------ */
/* The option set of one command                                            */

/* Where an entry of the set comes from. */
enum src { SRC_OWN, SRC_GRP, SRC_PARAM };

struct entry {
    enum src src;
    const struct kv_opt *o;      /* SRC_OWN, SRC_GRP */
    struct kv_cli_flag *flag;    /* SRC_PARAM */
    const char *name;
    int has_value;
};

#define MAX_ENTRIES 256
struct set {
    struct entry e[MAX_ENTRIES];
    int32_t n;
};

static void set_add(struct set *s, struct entry e)
{
    assert(s->n < MAX_ENTRIES && "kvlab: too many options for one command");
    s->e[s->n++] = e;
}

/* own options, then the groups', then the strategy parameter flags */
static void build_set(const struct kv_cmd *cmd, struct kv_cli_common *c, struct set *s)
{
    s->n = 0;
    for (int32_t i = 0; i < cmd->n_opts; i++)
        if (cmd->opts[i].pos == 0)
            set_add(s, (struct entry){SRC_OWN, &cmd->opts[i], NULL, cmd->opts[i].name,
                                      cmd->opts[i].kind != KV_OPT_FLAG});
    for (size_t i = 0; i < N_GRP; i++)
        if (cmd->groups & grp_opts[i].group)
            set_add(s, (struct entry){SRC_GRP, &grp_opts[i].o, NULL, grp_opts[i].o.name, 1});
    if (cmd->groups & KV_GRP_PARAMS)
        for (int32_t i = 0; i < c->n_flags; i++)
            set_add(s, (struct entry){SRC_PARAM, NULL, &c->flags[i], c->flags[i].param->flag, 1});
}

static int32_t set_find(const struct set *s, const char *name)
{
    for (int32_t i = 0; i < s->n; i++)
        if (strcmp(s->e[i].name, name) == 0)
            return i;
    return -1;
}

/* ------------------------------------------------------------------------ */
/* Text                                                                     */

int kv_cli_label_ok(const char *s) { return kv_label_ok(s); }

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

/* The k-th comma-separated item of s into buf; its length or -1 (too long). */
static int item(const char *s, size_t k, char *buf, size_t cap, const char **next)
{
    (void)k;
    size_t len = strcspn(s, ",");
    if (len >= cap)
        return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    *next = s[len] == ',' ? s + len + 1 : NULL;
    return (int)len;
}

/* Describes what o expects, for messages and --help. */
static void expects(const struct kv_opt *o, char *buf, size_t n)
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
static int parse_value(const char *cmd, const struct kv_opt *o, const char *v, void *field)
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
            bad = item(p, 0, buf, sizeof buf, &p) <= 0 || parse_i64(buf, &x) != 0 ||
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
            bad = item(p, 0, buf, sizeof buf, &p) <= 0 || !kv_cli_label_ok(buf) ||
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
        expects(o, why, sizeof why);
        fprintf(stderr, "kvlab: %s: %s expects %s, got '%s'\n", cmd, o->name, why, kv_text_q(v));
        return -1;
    }
    return 0;
}

/* A strategy parameter flag's value, as cli_opts has always read it. */
static int parse_param(const char *cmd, struct kv_cli_flag *f, const char *v)
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

/* ------------------------------------------------------------------------ */
/* Help                                                                     */

static void print_default(const struct kv_opt *o, const void *field, char *buf, size_t n)
{
    buf[0] = '\0';
    switch (o->kind) {
    case KV_OPT_INT:
        snprintf(buf, n, "%" PRId32, *(const int32_t *)field);
        break;
    case KV_OPT_I64: {
        int64_t x;
        memcpy(&x, field, sizeof x);
        snprintf(buf, n, "%" PRId64, x);
        break;
    }
    case KV_OPT_FLOAT:
        snprintf(buf, n, "%g", *(const double *)field);
        break;
    case KV_OPT_ENUM:
        snprintf(buf, n, "%s", o->names[*(const int *)field]);
        break;
    case KV_OPT_INTS: {
        const struct kv_opt_ints *l = field;
        size_t w = 0;
        for (int32_t i = 0; i < l->n && w < n; i++)
            w += (size_t)snprintf(buf + w, n - w, "%s%" PRId32, i ? "," : "", l->v[i]);
        break;
    }
    case KV_OPT_TEXT:
    case KV_OPT_LABELS:
    case KV_OPT_STRATEGY:
    case KV_OPT_STRATEGIES:
    case KV_OPT_INPUT:
    case KV_OPT_OUTPUT: {
        const char *s = *(const char *const *)field;
        if (s != NULL)
            snprintf(buf, n, "%s", s);
        break;
    }
    default:
        break;
    }
}

static void help_line(FILE *f, const struct kv_opt *o, const void *field,
                      const struct kv_cmd *cmd)
{
    char left[48], def[160], range[160] = "";
    snprintf(left, sizeof left, "%s%s%s", o->name, o->kind == KV_OPT_FLAG ? "" : " ",
             o->kind == KV_OPT_FLAG ? "" : o->meta != NULL ? o->meta : "V");
    print_default(o, field, def, sizeof def);
    if (o->kind == KV_OPT_INT || o->kind == KV_OPT_I64 || o->kind == KV_OPT_FLOAT ||
        o->kind == KV_OPT_ENUM)
        expects(o, range, sizeof range);
    /* a default outside the range means "not given" (--beams 0): not shown */
    if ((o->kind == KV_OPT_INT || o->kind == KV_OPT_I64) && def[0] != '\0') {
        int64_t v = o->kind == KV_OPT_INT ? *(const int32_t *)field : 0;
        if (o->kind == KV_OPT_I64)
            memcpy(&v, field, sizeof v);
        if (v < o->lo || v > o->hi)
            def[0] = '\0';
    }
    char text[1024];
    size_t w = (size_t)snprintf(text, sizeof text, "%s", o->help != NULL ? o->help : "");
    if ((range[0] != '\0' || def[0] != '\0') && w < sizeof text)
        w += (size_t)snprintf(text + w, sizeof text - w, " (%s%s%s%s)", range,
                              range[0] && def[0] ? "; " : "", def[0] ? "default " : "", def);
    if (o->modes != 0 && cmd != NULL && cmd->mode_names != NULL && w < sizeof text) {
        w += (size_t)snprintf(text + w, sizeof text - w, "; only");
        int first = 1;
        for (int k = 0; k < 32 && w < sizeof text; k++)
            if (o->modes >> k & 1u) {
                w += (size_t)snprintf(text + w, sizeof text - w, "%s %s", first ? "" : " or",
                                      cmd->mode_names[k]);
                first = 0;
            }
    }
    if (o->required && w < sizeof text)
        snprintf(text + w, sizeof text - w, " (required)");
    /* wrapped at 100 columns under the description's column */
    fprintf(f, "  %-22s", left);
    int col = 25;
    if (strlen(left) > 22) {
        fprintf(f, "\n%24s", "");
    }
    for (const char *p = text; *p != '\0';) {
        while (*p == ' ')
            p++;
        size_t len = strcspn(p, " ");
        if (col > 25 && col + 1 + (int)len > 100) {
            fprintf(f, "\n%24s", "");
            col = 25;
        }
        fprintf(f, " %.*s", (int)len, p);
        col += 1 + (int)len;
        p += len;
    }
    fprintf(f, "\n");
}

static void defaults(const struct kv_cmd *cmd, void *opts, struct kv_cli_common *c)
{
    memset(opts, 0, cmd->opts_size);
    kv_cli_common_defaults(c);
    if (cmd->defaults != NULL)
        cmd->defaults(opts, c);
}

void kv_cmd_help(const struct kv_cmd *cmd, FILE *f)
{
    void *opts = calloc(1, cmd->opts_size > 0 ? cmd->opts_size : 1);
    struct kv_cli_common *c = malloc(sizeof *c);
    if (opts == NULL || c == NULL) {
        free(opts);
        free(c);
        return;
    }
    defaults(cmd, opts, c);
    fprintf(f, "usage: kvlab %s %s\n  %s\n", cmd->name, cmd->usage, cmd->summary);
    if (cmd->about != NULL)
        fprintf(f, "%s", cmd->about);
    int any = 0;
    for (int32_t i = 0; i < cmd->n_opts; i++) {
        const struct kv_opt *o = &cmd->opts[i];
        if (o->pos != 0)
            continue;
        if (!any++)
            fprintf(f, "options:\n");
        help_line(f, o, (const char *)opts + o->off, cmd);
    }
    static const struct {
        uint32_t g;
        const char *title;
    } titles[] = {{KV_GRP_MODEL, "model (the synthetic model's shape; default: docs/design.md's)"},
                  {KV_GRP_CHECKPOINT | KV_GRP_TOKENIZER, "files"},
                  {KV_GRP_STRATEGY | KV_GRP_BATCH | KV_GRP_THREADS | KV_GRP_SEED, "run"}};
    for (size_t t = 0; t < sizeof titles / sizeof titles[0]; t++) {
        if (!(cmd->groups & titles[t].g))
            continue;
        fprintf(f, "%s:\n", titles[t].title);
        for (size_t i = 0; i < N_GRP; i++)
            if (grp_opts[i].group & titles[t].g & cmd->groups)
                help_line(f, &grp_opts[i].o, (const char *)c + grp_opts[i].o.off, NULL);
    }
    if (cmd->groups & KV_GRP_PARAMS) {
        fprintf(f, "strategy parameters (each applies to the strategies named):\n");
        kv_cli_print_param_help(f);
    }
    fprintf(f, "  %-22s %s\n", "--help", "this help");
    free(c);
    free(opts);
}

/* ------------------------------------------------------------------------ */
/* Checks after parsing                                                     */

/* 1 when the strategy (or preset) called name takes flag and, for a
 * preset, does not fix that parameter itself. */
static int flag_applies(const char *name, const char *flag, const char **fixed_by)
{
    const struct kv_strategy_ops *ops;
    if (kv_strategy_lookup(name, &ops, NULL, 0) != KV_OK)
        return 0;
    for (int32_t k = 0; k < ops->n_params; k++) {
        const struct kv_param *p = &ops->params[k];
        if (strcmp(p->flag, flag) != 0)
            continue;
        for (int32_t q = 0; q < ops->n_presets; q++) {
            if (strcmp(ops->presets[q].name, name) != 0)
                continue;
            /* "bits=4;group=32": does it set p->name? */
            const size_t nl = strlen(p->name);
            for (const char *s = ops->presets[q].params; s != NULL && *s != '\0';) {
                if (strncmp(s, p->name, nl) == 0 && s[nl] == '=') {
                    *fixed_by = ops->presets[q].name;
                    return 0;
                }
                s = strchr(s, ';');
                s = s != NULL ? s + 1 : NULL;
            }
        }
        return 1;
    }
    return 0;
}

/* Which strategies have a parameter flag, for the message. */
static void flag_owners(const char *flag, char *buf, size_t n)
{
    size_t w = 0;
    buf[0] = '\0';
    for (int32_t s = 0; s < kv_strategy_count() && w < n; s++) {
        const struct kv_strategy_ops *ops = kv_strategy_at(s);
        for (int32_t k = 0; k < ops->n_params; k++)
            if (strcmp(ops->params[k].flag, flag) == 0) {
                w += (size_t)snprintf(buf + w, n - w, "%s%s", w ? ", " : "", ops->name);
                break;
            }
    }
}

static int check_params(const struct kv_cmd_ctx *x, const struct set *s)
{
    const struct kv_cmd *cmd = x->cmd;
    const char *names[KV_CMD_MAX_STRATEGIES];
    int32_t n = 0;
    if (cmd->strategies != NULL)
        n = cmd->strategies(x, names, KV_CMD_MAX_STRATEGIES);
    else if (x->c.strategy != NULL)
        names[n++] = x->c.strategy;
    for (int32_t i = 0; i < s->n; i++) {
        const struct entry *e = &s->e[i];
        if (e->src != SRC_PARAM || !x->given[i])
            continue;
        const char *fixed = NULL;
        int ok = 0;
        for (int32_t k = 0; k < n && !ok; k++)
            ok = flag_applies(names[k], e->name, &fixed);
        if (ok)
            continue;
        char owners[256];
        flag_owners(e->name, owners, sizeof owners);
        if (n == 0)
            fprintf(stderr, "kvlab: %s: %s has no effect without a strategy that takes it "
                            "(%s)\n", cmd->name, e->name, owners);
        else if (fixed != NULL && n == 1)
            fprintf(stderr, "kvlab: %s: %s has no effect on preset '%s', which sets it itself\n",
                    cmd->name, e->name, fixed);
        else
            fprintf(stderr, "kvlab: %s: %s has no effect on %s%s%s; it is a parameter of %s\n",
                    cmd->name, e->name, n == 1 ? "'" : "any of ",
                    n == 1 ? kv_text_q(names[0]) : "the strategies this run uses",
                    n == 1 ? "'" : "", owners);
        return -1;
    }
    return 0;
}

static int check_modes(const struct kv_cmd_ctx *x, const struct set *s)
{
    const struct kv_cmd *cmd = x->cmd;
    for (int32_t i = 0; i < s->n; i++) {
        const struct entry *e = &s->e[i];
        if (!x->given[i] || e->src != SRC_OWN || e->o->modes == 0 ||
            (e->o->modes & x->modes) != 0)
            continue;
        fprintf(stderr, "kvlab: %s: %s has no effect here; it applies only", cmd->name,
                e->name);
        int first = 1;
        for (int k = 0; k < 32; k++)
            if (e->o->modes >> k & 1u) {
                fprintf(stderr, "%s %s", first ? "" : " or",
                        cmd->mode_names != NULL ? cmd->mode_names[k] : "in another mode");
                first = 0;
            }
        fprintf(stderr, "\n");
        return -1;
    }
    /* the synthetic model's shape means nothing next to a checkpoint */
    if (x->c.model_path != NULL)
        for (int32_t i = 0; i < s->n; i++)
            if (x->given[i] && s->e[i].src == SRC_GRP && strcmp(s->e[i].name, "--model") != 0)
                for (size_t g = 0; g < N_GRP; g++)
                    if (grp_opts[g].group == KV_GRP_MODEL && &grp_opts[g].o == s->e[i].o) {
                        fprintf(stderr, "kvlab: %s: %s has no effect with --model (the "
                                        "checkpoint's header sets the model's shape)\n",
                                cmd->name, s->e[i].name);
                        return -1;
                    }
    return 0;
}

/* Every file option judged: inputs opened without blocking and regular,
 * outputs writable and none the same file as another output or an input. */
struct files {
    struct kv_cli_file *ins, *outs;
    int *mk;
    int n_in, n_out;
};

static void files_free(struct files *f)
{
    free(f->ins);
    free(f->outs);
    free(f->mk);
}

static void files_add(struct files *f, const struct kv_opt *o, const char *name, const char *path)
{
    if (path == NULL)
        return;
    if (o->kind == KV_OPT_INPUT) {
        if (!(o->stdin_ok && strcmp(path, "-") == 0))
            f->ins[f->n_in++] = (struct kv_cli_file){name, path};
    } else {
        f->mk[f->n_out] = o->mkdir;
        f->outs[f->n_out++] = (struct kv_cli_file){name, path};
    }
}

/* Every file the command line names, and the default outputs of the
 * active modes. -1 when out of memory. */
static int files_collect(const struct kv_cmd_ctx *x, const struct set *s, struct files *f)
{
    const struct kv_cmd *cmd = x->cmd;
    const size_t cap = (size_t)s->n + (size_t)cmd->n_opts + (size_t)x->rest.n + 1;
    memset(f, 0, sizeof *f);
    f->ins = calloc(cap, sizeof *f->ins);
    f->outs = calloc(cap, sizeof *f->outs);
    f->mk = calloc(cap, sizeof *f->mk);
    if (f->ins == NULL || f->outs == NULL || f->mk == NULL)
        return -1;
    for (int32_t i = 0; i < s->n; i++) {
        const struct entry *e = &s->e[i];
        if (e->src == SRC_PARAM || (e->o->kind != KV_OPT_INPUT && e->o->kind != KV_OPT_OUTPUT))
            continue;
        if (e->src == SRC_OWN && e->o->modes != 0 && (e->o->modes & x->modes) == 0)
            continue; /* a default output of another mode */
        const char *base = e->src == SRC_OWN ? (const char *)x->opts : (const char *)&x->c;
        files_add(f, e->o, e->name, *(const char *const *)(base + e->o->off));
    }
    for (int32_t i = 0; i < cmd->n_opts; i++) {
        const struct kv_opt *o = &cmd->opts[i];
        if (o->pos == 0 || (o->kind != KV_OPT_INPUT && o->kind != KV_OPT_OUTPUT))
            continue;
        if (o->pos == KV_OPT_REST)
            for (int32_t k = 0; k < x->rest.n; k++)
                files_add(f, o, o->name, x->rest.v[k]);
        else
            files_add(f, o, o->name, *(const char *const *)((const char *)x->opts + o->off));
    }
    return 0;
}

static int check_files(const struct kv_cmd_ctx *x, const struct set *s)
{
    const struct kv_cmd *cmd = x->cmd;
    struct files f;
    int rc = 0;
    if (files_collect(x, s, &f) != 0) {
        files_free(&f);
        fprintf(stderr, "kvlab: %s: %s\n", cmd->name, kv_status_str(KV_ERR_NOMEM));
        return 1;
    }
    for (int i = 0; i < f.n_in && rc == 0; i++) {
        int fd;
        if (kv_file_open_input(f.ins[i].path, &fd) != KV_OK) {
            fprintf(stderr, "kvlab: %s: %s '%s': %s\n", cmd->name, f.ins[i].opt,
                    kv_text_q(f.ins[i].path), kv_file_why());
            rc = 2;
        } else {
            close(fd);
        }
    }
    for (int i = 0; i < f.n_out && rc == 0; i++) {
        /* each output against every input and the outputs before it */
        if (kv_cli_check_outputs(cmd->name, &f.outs[i], 1, f.ins, f.n_in,
                                 f.mk[i] ? KV_FILE_PARENT_MKDIR : KV_FILE_PARENT_EXISTS, 2) != 0)
            rc = 2;
        for (int j = 0; j < i && rc == 0; j++)
            if (kv_file_same(f.outs[i].path, f.outs[j].path)) {
                fprintf(stderr, "kvlab: %s: %s '%s' is the same file as %s\n", cmd->name,
                        f.outs[i].opt, kv_text_q(f.outs[i].path), f.outs[j].opt);
                rc = 2;
            }
    }
    files_free(&f);
    return rc;
}

/* The one missing folder level of each .mkdir output, made once every
 * check has passed (so a refused run creates nothing). */
static int make_dirs(const struct kv_cmd_ctx *x, const struct set *s)
{
    struct files f;
    int rc = 0;
    if (files_collect(x, s, &f) != 0) {
        files_free(&f);
        return 1;
    }
    for (int i = 0; i < f.n_out && rc == 0; i++) {
        if (!f.mk[i])
            continue;
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", f.outs[i].path);
        char *slash = strrchr(dir, '/');
        if (slash == NULL || slash == dir)
            continue;
        *slash = '\0';
        if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
            fprintf(stderr, "kvlab: %s: %s '%s': cannot make its folder: %s\n", x->cmd->name,
                    f.outs[i].opt, kv_text_q(f.outs[i].path), strerror(errno));
            rc = 1;
        }
    }
    files_free(&f);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* The parser                                                               */

int kv_cmd_given(const struct kv_cmd_ctx *x, const char *name)
{
    struct set *s = malloc(sizeof *s);
    assert(s != NULL);
    build_set(x->cmd, (struct kv_cli_common *)&x->c, s);
    int32_t i = set_find(s, name);
    free(s);
    assert(i >= 0 && "kv_cmd_given: not an option of this command");
    return i >= 0 && x->given[i];
}

/* The typed option name of the token getopt_long just consumed equals
 * the option's full name (no abbreviations: --str is not --strategy). */
static int typed_exactly(char **argv, int optind_now, const char *optarg_now, int has_value,
                         const char *name)
{
    int at = optind_now - 1;
    if (has_value && optarg_now != NULL && optarg_now == argv[optind_now - 1])
        at = optind_now - 2;
    if (at < 1)
        return 0;
    const char *t = argv[at];
    size_t len = strcspn(t, "=");
    return strlen(name) == len && strncmp(t, name, len) == 0;
}

static int parse(struct kv_cmd_ctx *x, struct set *s, int argc, char **argv, int *help)
{
    const struct kv_cmd *cmd = x->cmd;
    struct option *lo = calloc((size_t)s->n + 2, sizeof *lo);
    if (lo == NULL) {
        fprintf(stderr, "kvlab: %s: %s\n", cmd->name, kv_status_str(KV_ERR_NOMEM));
        return 1;
    }
    for (int32_t i = 0; i < s->n; i++)
        lo[i] = (struct option){s->e[i].name + 2, s->e[i].has_value ? required_argument
                                                                     : no_argument,
                                NULL, 256 + i};
    lo[s->n] = (struct option){"help", no_argument, NULL, 'h'};
    /* positionals in order */
    const struct kv_opt *pos[16];
    int32_t n_pos = 0;
    const struct kv_opt *rest = NULL;
    for (int32_t i = 0; i < cmd->n_opts; i++) {
        const struct kv_opt *o = &cmd->opts[i];
        if (o->pos == KV_OPT_REST)
            rest = o;
        else if (o->pos > 0 && o->pos <= 16 && o->pos > n_pos)
            n_pos = o->pos;
    }
    for (int32_t k = 0; k < n_pos; k++) {
        pos[k] = NULL;
        for (int32_t i = 0; i < cmd->n_opts; i++)
            if (cmd->opts[i].pos == k + 1)
                pos[k] = &cmd->opts[i];
        assert(pos[k] != NULL && "positional arguments are numbered from 1 without gaps");
    }
    int32_t got_pos = 0;
    x->rest.n = 0;
    x->rest.v = calloc((size_t)argc + 1, sizeof *x->rest.v);
    int rc = 0;
    if (x->rest.v == NULL) {
        free(lo);
        fprintf(stderr, "kvlab: %s: %s\n", cmd->name, kv_status_str(KV_ERR_NOMEM));
        return 1;
    }
    optind = 0; /* glibc: a full re-initialisation (a test may parse twice) */
    opterr = 0;
    int after_dashdash = 0;
    for (;;) {
        const char *arg1 = NULL;
        int r;
        if (!after_dashdash) {
            int li = -1;
            r = getopt_long(argc, argv, "-:h", lo, &li);
            if (r == -1) {
                after_dashdash = 1;
                if (optind >= argc)
                    break;
                continue;
            }
        } else {
            if (optind >= argc)
                break;
            r = 1;
            optarg = argv[optind++];
        }
        if (r == 1) {
            arg1 = optarg;
        } else if (r == 'h') {
            /* exactly -h or --help: "-hx" is a cluster getopt would take
             * letter by letter, "--he" an abbreviation */
            const char *t = argv[optind - 1];
            if (strcmp(t, "-h") != 0 && strcmp(t, "--help") != 0) {
                fprintf(stderr, "kvlab: %s: unknown option '%s' (see 'kvlab %s --help')\n",
                        cmd->name, kv_text_q(optind < argc ? argv[optind] : t), cmd->name);
                rc = 2;
                break;
            }
            *help = 1;
            break;
        } else if (r == '?' || r == ':') {
            const char *t = argv[optind - 1];
            char shortopt[3] = {'-', (char)optopt, '\0'};
            if (optopt != 0 && r == '?')
                t = shortopt; /* a short option of a cluster: name the letter */
            if (r == ':')
                fprintf(stderr, "kvlab: %s: %s expects a value\n", cmd->name, kv_text_q(t));
            else
                fprintf(stderr, "kvlab: %s: unknown option '%s' (see 'kvlab %s --help')\n",
                        cmd->name, kv_text_q(t), cmd->name);
            rc = 2;
            break;
        } else {
            const int32_t i = r - 256;
            struct entry *e = &s->e[i];
            if (!typed_exactly(argv, optind, optarg, e->has_value, e->name)) {
                fprintf(stderr, "kvlab: %s: unknown option '%s' (see 'kvlab %s --help'; "
                                "options are not abbreviated)\n",
                        cmd->name, kv_text_q(argv[optind - (e->has_value && optarg == argv[optind - 1] ? 2 : 1)]),
                        cmd->name);
                rc = 2;
                break;
            }
            if (x->given[i]) {
                fprintf(stderr, "kvlab: %s: %s is given twice\n", cmd->name, e->name);
                rc = 2;
                break;
            }
            x->given[i] = 1;
            int bad;
            if (e->src == SRC_PARAM)
                bad = parse_param(cmd->name, e->flag, optarg);
            else
                bad = parse_value(cmd->name, e->o, e->has_value ? optarg : NULL,
                                  (e->src == SRC_OWN ? (char *)x->opts : (char *)&x->c) +
                                      e->o->off);
            if (bad) {
                rc = 2;
                break;
            }
            continue;
        }
        /* a positional argument */
        if (got_pos < n_pos) {
            const struct kv_opt *o = pos[got_pos++];
            if (parse_value(cmd->name, o, arg1, (char *)x->opts + o->off) != 0) {
                rc = 2;
                break;
            }
        } else if (rest != NULL) {
            if (rest->kind != KV_OPT_INPUT && rest->kind != KV_OPT_OUTPUT &&
                rest->kind != KV_OPT_TEXT) {
                const char *dummy;
                if (parse_value(cmd->name, rest, arg1, &dummy) != 0) {
                    rc = 2;
                    break;
                }
            } else if (arg1[0] == '\0') {
                fprintf(stderr, "kvlab: %s: %s expects a file name, got ''\n", cmd->name,
                        rest->name);
                rc = 2;
                break;
            }
            x->rest.v[x->rest.n++] = (char *)arg1;
        } else {
            fprintf(stderr, "kvlab: %s: unexpected argument '%s' (see 'kvlab %s --help')\n",
                    cmd->name, kv_text_q(arg1), cmd->name);
            rc = 2;
            break;
        }
    }
    free(lo);
    if (rc != 0 || *help)
        return rc;
    if (got_pos < n_pos) {
        for (int32_t k = got_pos; k < n_pos; k++)
            if (pos[k]->required) {
                fprintf(stderr, "kvlab: %s: missing %s (usage: kvlab %s %s)\n", cmd->name,
                        pos[k]->name, cmd->name, cmd->usage);
                return 2;
            }
    }
    if (rest != NULL && rest->required && x->rest.n == 0) {
        fprintf(stderr, "kvlab: %s: missing %s (usage: kvlab %s %s)\n", cmd->name, rest->name,
                cmd->name, cmd->usage);
        return 2;
    }
    for (int32_t i = 0; i < s->n; i++)
        if (s->e[i].src == SRC_OWN && s->e[i].o->required && !x->given[i]) {
            fprintf(stderr, "kvlab: %s: needs %s %s (see 'kvlab %s --help')\n", cmd->name,
                    s->e[i].name, s->e[i].o->meta != NULL ? s->e[i].o->meta : "", cmd->name);
            return 2;
        }
    return 0;
}

int kv_cmd_main(const struct kv_cmd *cmd, int argc, char **argv)
{
    struct kv_cmd_ctx *x = calloc(1, sizeof *x);
    struct set *s = malloc(sizeof *s);
    void *opts = calloc(1, cmd->opts_size > 0 ? cmd->opts_size : 1);
    int rc = 1;
    if (x == NULL || s == NULL || opts == NULL) {
        fprintf(stderr, "kvlab: %s: %s\n", cmd->name, kv_status_str(KV_ERR_NOMEM));
        goto out;
    }
    x->cmd = cmd;
    x->opts = opts;
    x->argc = argc;
    x->argv = argv;
    kv_cli_set_command(cmd->name);
    defaults(cmd, opts, &x->c);
    build_set(cmd, &x->c, s);
    int help = 0;
    rc = parse(x, s, argc, argv, &help);
    if (rc != 0)
        goto out;
    if (help) {
        kv_cmd_help(cmd, stdout);
        rc = 0;
        goto out;
    }
    x->c.cache.max_len = x->c.model.max_len;
    x->modes = cmd->modes != NULL ? cmd->modes(x) : 1u;
    /* files first: a FIFO or a directory is refused whatever else is wrong */
    if ((rc = check_files(x, s)) != 0)
        goto out;
    rc = 2;
    if (check_modes(x, s) != 0)
        goto out;
    if ((cmd->groups & KV_GRP_PARAMS) && check_params(x, s) != 0)
        goto out;
    if ((cmd->groups & KV_GRP_MODEL) && x->c.model_path == NULL && kv_cli_check_common(&x->c) != 0)
        goto out;
    if (cmd->check != NULL && (rc = cmd->check(x)) != 0)
        goto out;
    if ((rc = make_dirs(x, s)) != 0)
        goto out;
    /* the e2e matrix's witness that a refusal came before any work */
    if (getenv("KVLAB_TRACE_RUN") != NULL)
        fprintf(stderr, "kvlab: trace: %s starts its run\n", cmd->name);
    rc = cmd->run(x);
out:
    if (x != NULL)
        free(x->rest.v);
    free(opts);
    free(s);
    free(x);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Tables for tools                                                         */

static const char *const kind_names[KV_OPT_KIND_COUNT] = {
    "flag", "int", "int", "float", "enum", "ints", "text", "labels", "strategy", "strategies",
    "input", "output", "custom"};

void kv_cmd_dump(const struct kv_cmd *const *cmds, int32_t n, FILE *f)
{
    for (int32_t c = 0; c < n; c++) {
        const struct kv_cmd *cmd = cmds[c];
        fprintf(f, "cmd\t%s\t%s\n", cmd->name, cmd->example != NULL ? cmd->example : "");
        for (int32_t i = 0; i < cmd->n_opts; i++) {
            const struct kv_opt *o = &cmd->opts[i];
            fprintf(f, "opt\t%s\t%s\t%s\t%" PRId32 "\n", cmd->name, o->name, kind_names[o->kind],
                    o->pos);
        }
        for (size_t i = 0; i < N_GRP; i++)
            if (cmd->groups & grp_opts[i].group)
                fprintf(f, "opt\t%s\t%s\t%s\t0\n", cmd->name, grp_opts[i].o.name,
                        kind_names[grp_opts[i].o.kind]);
    }
}

int kv_cmd_reserve(const struct kv_cmd *const *cmds, int32_t n)
{
    /* the names a strategy parameter must not take: every option of a
     * command that also reads strategy parameters (a command without them,
     * like kernel, may have its own --dtype), and every group option */
    const char **names = malloc(((size_t)N_GRP + 1) * sizeof *names);
    int32_t k = 0, cap = (int32_t)N_GRP + 1;
    if (names == NULL)
        return -1;
    for (size_t g = 0; g < N_GRP; g++)
        names[k++] = grp_opts[g].o.name;
    names[k++] = "--help";
    for (int32_t c = 0; c < n; c++) {
        if (!(cmds[c]->groups & KV_GRP_PARAMS))
            continue;
        for (int32_t i = 0; i < cmds[c]->n_opts; i++) {
            if (cmds[c]->opts[i].pos != 0)
                continue;
            if (k == cap) {
                const char **more = realloc(names, (size_t)(cap *= 2) * sizeof *names);
                if (more == NULL) {
                    free(names);
                    return -1;
                }
                names = more;
            }
            names[k++] = cmds[c]->opts[i].name;
        }
    }
    /* the registry refuses the reservation when a registered strategy
     * already has one of the names, and later registrations that would */
    kv_strategy_reserve_flags(NULL, 0); /* a second call (a test) starts over */
    enum kv_status s = kv_strategy_reserve_flags(names, k);
    if (s != KV_OK) {
        for (int32_t i = 0; i < k; i++)
            if (kv_strategy_flag_reserved(names[i]) == 0) {
                for (int32_t q = 0; q < kv_strategy_count(); q++) {
                    const struct kv_strategy_ops *ops = kv_strategy_at(q);
                    for (int32_t p = 0; p < ops->n_params; p++)
                        if (strcmp(ops->params[p].flag, names[i]) == 0)
                            fprintf(stderr, "kvlab: strategy '%s': its parameter flag %s is "
                                            "also a command option; rename it\n",
                                    ops->name, names[i]);
                }
            }
        free(names);
        return -1;
    }
    free(names);
    return 0;
}
