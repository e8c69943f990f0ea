/*
 * sweep_frontier.c - `kvlab sweep --frontier FILE`: the file's
 * configurations (bench/data/frontier.list, parsed by frontier.c), read
 * once before the run for the parameter-flag checks, and planned at the
 * model's shape into the sweep's strategies and only-mask.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_io.h"
#include "cmd_sweep_impl.h"

/* The --frontier file's lines, read once for the parameter-flag checks
 * (opened without blocking and only if it is a regular file, whatever
 * order the layer judges files in: a FIFO must never hang them). */
static struct {
    const char *path;
    int loaded; /* 1 read and parsed, -1 unusable (the run or the file check says why) */
    struct kv_frontier_line lines[KV_FRONTIER_MAX_LINES];
    int32_t n;
} front;

static void frontier_peek(const char *path)
{
    front.path = path;
    front.loaded = -1;
    front.n = 0;
    int fd;
    if (kv_file_open_input(path, &fd) != KV_OK)
        return;
    enum { CAP = 1 << 20 };
    char *text = malloc(CAP + 1);
    size_t len = 0;
    ssize_t r = 1;
    while (text != NULL && len < CAP && (r = read(fd, text + len, CAP - len)) > 0)
        len += (size_t)r;
    close(fd);
    if (text == NULL || r < 0 || len == CAP) {
        free(text);
        return;
    }
    text[len] = '\0';
    char why[256];
    if (memchr(text, '\0', len) == NULL &&
        kv_frontier_parse(text, front.lines, KV_FRONTIER_MAX_LINES, &front.n, why,
                          sizeof why) == KV_OK)
        front.loaded = 1;
    free(text);
}

/* 1 when the ';'-separated "k=v" text sets parameter `name`. */
static int text_sets(const char *text, const char *name)
{
    const size_t nl = strlen(name);
    for (const char *s = text; s != NULL && *s != '\0';) {
        if (strncmp(s, name, nl) == 0 && s[nl] == '=')
            return 1;
        s = strchr(s, ';');
        s = s != NULL ? s + 1 : NULL;
    }
    return 0;
}

/* 1 when parameter flag `flag` reaches the configuration of frontier line
 * L: its strategy takes the flag, and neither its preset nor the line's
 * own PARAMS sets that parameter. */
static int line_takes(const struct kv_frontier_line *L, const char *flag)
{
    const struct kv_strategy_ops *ops;
    if (kv_strategy_lookup(L->strategy, &ops, NULL, 0) != KV_OK)
        return 0;
    for (int32_t k = 0; k < ops->n_params; k++) {
        const struct kv_param *p = &ops->params[k];
        if (strcmp(p->flag, flag) != 0)
            continue;
        for (int32_t q = 0; q < ops->n_presets; q++)
            if (strcmp(ops->presets[q].name, L->strategy) == 0 &&
                text_sets(ops->presets[q].params, p->name))
                return 0;
        return strcmp(L->params, "-") == 0 || !text_sets(L->params, p->name);
    }
    return 0;
}

int32_t kv_sweepi_frontier_strategies(const char *path, const char **names, int32_t max)
{
    int32_t n = 0;
    frontier_peek(path);
    if (front.loaded == 1) {
        for (int32_t i = 0; i < front.n && n < max; i++) {
            int dup = 0;
            for (int32_t k = 0; k < n && !dup; k++)
                dup = strcmp(names[k], front.lines[i].strategy) == 0;
            if (!dup)
                names[n++] = front.lines[i].strategy;
        }
        return n;
    }
    /* unreadable or malformed: the file's own refusal comes (the input
     * check, or the run's reading of it, kv_frontier_load's message);
     * no flag is refused for a file nobody could read */
    for (int32_t i = 0; i < kv_strategy_count() && n < max; i++)
        names[n++] = kv_strategy_at(i)->name;
    return n;
}

int kv_sweepi_frontier_flags(const struct kv_cmd_ctx *x)
{
    const struct sweep_opts *o = x->opts;
    /* a parameter flag must reach at least one configuration of the
     * frontier: every line that takes it may set it itself (window=@) */
    if (front.path != o->frontier)
        frontier_peek(o->frontier); /* (sweep_strategies read it for this run) */
    if (front.loaded == 1)
        for (int32_t f = 0; f < x->c.n_flags; f++) {
            const char *flag = x->c.flags[f].param->flag;
            if (!x->c.flags[f].given)
                continue;
            int used = 0;
            for (int32_t i = 0; i < front.n && !used; i++)
                used = line_takes(&front.lines[i], flag);
            if (!used) {
                fprintf(stderr, "kvlab: sweep: %s has no effect with --frontier '%s': every "
                                "configuration there that takes it sets it itself\n", flag,
                        kv_text_q(o->frontier));
                return 2;
            }
        }
    return 0;
}

static void frontier_note(void *user, const char *sentence)
{
    const struct kv_cmd_ctx *x = user;
    const struct sweep_opts *o = x->opts;
    if (!o->quiet)
        fprintf(stderr, "kvlab: sweep: frontier: %s\n", sentence);
}

/* A frontier line's strategy: defaults, the parameter flags given, then
 * the preset's values (as for --strategies; a flag value this strategy
 * refuses is said on stderr, and the planner skips the line). */
static enum kv_status frontier_resolve(void *user, const char *name, struct kv_sweep_strategy *st)
{
    const struct kv_cmd_ctx *x = user;
    const struct kv_strategy_ops *ops;
    if (kv_strategy_lookup(name, &ops, NULL, 0) != KV_OK || ops->params_size > sizeof st->params)
        return KV_ERR_INVALID;
    struct kv_cli_strategy cs;
    if (kv_cli_strategy(&x->c, name, &cs) != 0)
        return KV_ERR_INVALID;
    st->ops = cs.ops;
    memcpy(st->params, cs.params, cs.ops->params_size);
    return KV_OK;
}

int kv_sweepi_plan_frontier(struct kv_sweep_config *cfg, uint32_t *only,
                            const struct kv_cmd_ctx *x, const struct kv_model_config *mc)
{
    const struct sweep_opts *o = x->opts;
    static struct kv_frontier_line lines[KV_FRONTIER_MAX_LINES];
    int32_t n = 0;
    char why[256];
    enum kv_status s = kv_frontier_load(o->frontier, lines, KV_FRONTIER_MAX_LINES, &n, why,
                                        sizeof why);
    if (s != KV_OK) {
        fprintf(stderr, "kvlab: sweep: --frontier '%s': %s\n", kv_text_q(o->frontier), why);
        return -1;
    }
    struct kv_cache_config cc;
    kv_sweep_cache_config(&cc, cfg, mc, NULL);
    cfg->n_strategies = 0;
    s = kv_frontier_plan(cfg, only, &cc, lines, n, o->budgets.v, o->budgets.n,
                         frontier_resolve, frontier_note, (void *)x, why, sizeof why);
    if (s != KV_OK) {
        fprintf(stderr, "kvlab: sweep: --frontier '%s': %s\n", kv_text_q(o->frontier), why);
        return -1;
    }
    cfg->only = only;
    return 0;
}
