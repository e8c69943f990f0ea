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

#include "cli_cmd_impl.h"
#include "cli_io.h"
#include "../model/file_check.h"

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
    for (size_t i = 0; i < kv_cmdi_n_groups; i++)
        if (cmd->groups & kv_cmdi_groups[i].group)
            set_add(s, (struct entry){SRC_GRP, &kv_cmdi_groups[i].o, NULL, kv_cmdi_groups[i].o.name, 1});
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
                for (size_t g = 0; g < kv_cmdi_n_groups; g++)
                    if (kv_cmdi_groups[g].group == KV_GRP_MODEL && &kv_cmdi_groups[g].o == s->e[i].o) {
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

/* The positional arguments of a command, in order. */
struct positionals {
    const struct kv_opt *pos[16];
    int32_t n, got;
    const struct kv_opt *rest; /* KV_OPT_REST, or NULL */
};

static void positionals_of(const struct kv_cmd *cmd, struct positionals *P)
{
    memset(P, 0, sizeof *P);
    for (int32_t i = 0; i < cmd->n_opts; i++) {
        const struct kv_opt *o = &cmd->opts[i];
        if (o->pos == KV_OPT_REST)
            P->rest = o;
        else if (o->pos > 0 && o->pos <= 16 && o->pos > P->n)
            P->n = o->pos;
    }
    for (int32_t k = 0; k < P->n; k++) {
        for (int32_t i = 0; i < cmd->n_opts; i++)
            if (cmd->opts[i].pos == k + 1)
                P->pos[k] = &cmd->opts[i];
        assert(P->pos[k] != NULL && "positional arguments are numbered from 1 without gaps");
    }
}

/* getopt_long's table for the set: entry i answers 256 + i. */
static struct option *long_options(const struct set *s)
{
    struct option *lo = calloc((size_t)s->n + 2, sizeof *lo);
    if (lo == NULL)
        return NULL;
    for (int32_t i = 0; i < s->n; i++)
        lo[i] = (struct option){s->e[i].name + 2,
                                s->e[i].has_value ? required_argument : no_argument, NULL,
                                256 + i};
    lo[s->n] = (struct option){"help", no_argument, NULL, 'h'};
    return lo;
}

/* getopt_long's 'h', '?' or ':': 1 for a real -h/--help, else one line
 * and -1 (exactly -h or --help: "-hx" is a cluster getopt would take letter
 * by letter, "--he" an abbreviation; a short option of a cluster is named
 * by its letter). */
static int take_special(const char *cmd, int r, int argc, char **argv)
{
    const char *t = argv[optind - 1];
    if (r == 'h') {
        if (strcmp(t, "-h") == 0 || strcmp(t, "--help") == 0)
            return 1;
        t = optind < argc ? argv[optind] : t;
    }
    char shortopt[3] = {'-', (char)optopt, '\0'};
    if (r == '?' && optopt != 0)
        t = shortopt;
    if (r == ':')
        fprintf(stderr, "kvlab: %s: %s expects a value\n", cmd, kv_text_q(t));
    else
        fprintf(stderr, "kvlab: %s: unknown option '%s' (see 'kvlab %s --help')\n", cmd,
                kv_text_q(t), cmd);
    return -1;
}

/* Option entry i of the set with getopt's optarg; 0, or -1 after one line. */
static int take_option(struct kv_cmd_ctx *x, struct set *s, int32_t i, char **argv)
{
    const char *cmd = x->cmd->name;
    if (i < 0 || i >= s->n)
        return -1; /* getopt_long answers only the values long_options gave it */
    struct entry *e = &s->e[i];
    if (!typed_exactly(argv, optind, optarg, e->has_value, e->name)) {
        const int at = optind - (e->has_value && optarg == argv[optind - 1] ? 2 : 1);
        fprintf(stderr, "kvlab: %s: unknown option '%s' (see 'kvlab %s --help'; options are "
                        "not abbreviated)\n", cmd, kv_text_q(argv[at]), cmd);
        return -1;
    }
    if (x->given[i]) {
        fprintf(stderr, "kvlab: %s: %s is given twice\n", cmd, e->name);
        return -1;
    }
    x->given[i] = 1;
    if (e->src == SRC_PARAM)
        return kv_cmdi_parse_param(cmd, e->flag, optarg) != 0 ? -1 : 0;
    char *base = e->src == SRC_OWN ? (char *)x->opts : (char *)&x->c;
    return kv_cmdi_parse_value(cmd, e->o, e->has_value ? optarg : NULL, base + e->o->off) != 0
               ? -1
               : 0;
}

/* A positional argument; 0, or -1 after one line. */
static int take_positional(struct kv_cmd_ctx *x, struct positionals *P, const char *arg)
{
    const char *cmd = x->cmd->name;
    if (P->got < P->n) {
        const struct kv_opt *o = P->pos[P->got++];
        return kv_cmdi_parse_value(cmd, o, arg, (char *)x->opts + o->off) != 0 ? -1 : 0;
    }
    if (P->rest == NULL) {
        fprintf(stderr, "kvlab: %s: unexpected argument '%s' (see 'kvlab %s --help')\n", cmd,
                kv_text_q(arg), cmd);
        return -1;
    }
    const enum kv_opt_kind k = P->rest->kind;
    if (k != KV_OPT_INPUT && k != KV_OPT_OUTPUT && k != KV_OPT_TEXT) {
        const char *dummy;
        if (kv_cmdi_parse_value(cmd, P->rest, arg, &dummy) != 0)
            return -1;
    } else if (arg[0] == '\0') {
        fprintf(stderr, "kvlab: %s: %s expects a file name, got ''\n", cmd, P->rest->name);
        return -1;
    }
    x->rest.v[x->rest.n++] = (char *)arg;
    return 0;
}

/* Every required option and positional given; 0, or 2 after one line. */
static int check_required(const struct kv_cmd_ctx *x, const struct set *s,
                          const struct positionals *P)
{
    const struct kv_cmd *cmd = x->cmd;
    const struct kv_opt *missing = NULL;
    for (int32_t k = P->got; k < P->n && missing == NULL; k++)
        if (P->pos[k]->required)
            missing = P->pos[k];
    if (missing == NULL && P->rest != NULL && P->rest->required && x->rest.n == 0)
        missing = P->rest;
    if (missing != NULL) {
        fprintf(stderr, "kvlab: %s: missing %s (usage: kvlab %s %s)\n", cmd->name,
                missing->name, cmd->name, cmd->usage);
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

/* The command line into x: 0, 2 after one line, 1 out of memory; *help
 * set for -h/--help (nothing else checked then). Options and positional
 * arguments may mix; after "--" every word is positional. */
static int parse(struct kv_cmd_ctx *x, struct set *s, int argc, char **argv, int *help)
{
    const struct kv_cmd *cmd = x->cmd;
    struct positionals P;
    positionals_of(cmd, &P);
    struct option *lo = long_options(s);
    x->rest.n = 0;
    x->rest.v = calloc((size_t)argc + 1, sizeof *x->rest.v);
    if (lo == NULL || x->rest.v == NULL) {
        free(lo);
        fprintf(stderr, "kvlab: %s: %s\n", cmd->name, kv_status_str(KV_ERR_NOMEM));
        return 1;
    }
    optind = 0; /* glibc: a full re-initialisation (a test may parse twice) */
    opterr = 0;
    int rc = 0, after_dashdash = 0;
    while (rc == 0) {
        int r;
        if (!after_dashdash) {
            int li = -1;
            r = getopt_long(argc, argv, "-:h", lo, &li); /* '-': positionals in order */
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
            rc = take_positional(x, &P, optarg) != 0 ? 2 : 0;
        } else if (r == 'h' || r == '?' || r == ':') {
            const int h = take_special(cmd->name, r, argc, argv);
            if (h == 1) {
                *help = 1;
                break;
            }
            rc = 2;
        } else {
            rc = take_option(x, s, r - 256, argv) != 0 ? 2 : 0;
        }
    }
    free(lo);
    if (rc != 0 || *help)
        return rc;
    return check_required(x, s, &P);
}

void kv_cmdi_defaults(const struct kv_cmd *cmd, void *opts, struct kv_cli_common *c)
{
    memset(opts, 0, cmd->opts_size);
    kv_cli_common_defaults(c);
    if (cmd->defaults != NULL)
        cmd->defaults(opts, c);
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
    kv_cmdi_defaults(cmd, opts, &x->c);
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

