/*
 * cli_help.c - what the command tables tell people and tools: the
 * generated --help of every command, `kvlab options` (the tables as
 * tab-separated lines, for the e2e matrix), and the reservation of every
 * command option against the registry's parameter flags.
 */
#include "cli_cmd_impl.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli_io.h"

/* ------------------------------------------------------------------------ */
/* Help                                                                     */

void kv_cmdi_default_str(const struct kv_opt *o, const void *field, char *buf, size_t n)
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
    kv_cmdi_default_str(o, field, def, sizeof def);
    if (o->kind == KV_OPT_INT || o->kind == KV_OPT_I64 || o->kind == KV_OPT_FLOAT ||
        o->kind == KV_OPT_ENUM)
        kv_cmdi_expects(o, range, sizeof range);
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

void kv_cmd_help(const struct kv_cmd *cmd, FILE *f)
{
    void *opts = calloc(1, cmd->opts_size > 0 ? cmd->opts_size : 1);
    struct kv_cli_common *c = malloc(sizeof *c);
    if (opts == NULL || c == NULL) {
        free(opts);
        free(c);
        return;
    }
    kv_cmdi_defaults(cmd, opts, c);
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
        for (size_t i = 0; i < kv_cmdi_n_groups; i++)
            if (kv_cmdi_groups[i].group & titles[t].g & cmd->groups)
                help_line(f, &kv_cmdi_groups[i].o, (const char *)c + kv_cmdi_groups[i].o.off, NULL);
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
        for (size_t i = 0; i < kv_cmdi_n_groups; i++)
            if (cmd->groups & kv_cmdi_groups[i].group)
                fprintf(f, "opt\t%s\t%s\t%s\t0\n", cmd->name, kv_cmdi_groups[i].o.name,
                        kind_names[kv_cmdi_groups[i].o.kind]);
    }
}

int kv_cmd_reserve(const struct kv_cmd *const *cmds, int32_t n)
{
    /* the names a strategy parameter must not take: every option of a
     * command that also reads strategy parameters (a command without them,
     * like kernel, may have its own --dtype), and every group option */
    const char **names = malloc(((size_t)kv_cmdi_n_groups + 1) * sizeof *names);
    int32_t k = 0, cap = (int32_t)kv_cmdi_n_groups + 1;
    if (names == NULL)
        return -1;
    for (size_t g = 0; g < kv_cmdi_n_groups; g++)
        names[k++] = kv_cmdi_groups[g].o.name;
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
