/*
 * fuzz_opts.c - libFuzzer target for the one command layer (bench/cli/cli_cmd.c)
 * (`make fuzz-opts`): kv_cmd_main on a command whose table holds every
 * value kind and every shared group but the files (their refusals are the
 * e2e matrix's job, and a fuzzer should not create files), plus the model
 * cross-checks and the strategy resolution the real commands run.
 *
 * The input is an argument vector: the bytes split at newlines (so a seed
 * corpus is written as text, one argument a line), at most MAX_ARGS
 * arguments; a NUL byte ends the input, as no argv string can hold one.
 *
 * The design decision: stderr (the FILE *, not file descriptor 2, so the
 * sanitizers still report) is pointed at an in-memory stream for each run,
 * so the target checks the contract besides "no crash": a refusal is exit
 * 2 with exactly one line starting "kvlab: f: ", an accepted line reaches
 * the run function with every value inside the range its table promises,
 * and the run function is never reached after a refusal.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../bench/cli/cli_cmd.h"
#include "../../bench/cli/cli_io.h"

#define MAX_ARGS 64
#define MAX_INPUT 4096

static const char *const colours[] = {"red", "green", "blue", NULL};
enum { M_A = 1u << 0, M_B = 1u << 1 };
static const char *const mode_names[] = {"without --b", "with --b"};

struct f_opts {
    int32_t n;
    int64_t big;
    double x;
    int b;
    int colour;
    int32_t only_b;
    struct kv_opt_ints lens;
    const char *text;
    const char *labels;
    const char *list;
};

#define F(f) offsetof(struct f_opts, f)
static const struct kv_opt f_table[] = {
    {.name = "--n", .kind = KV_OPT_INT, .off = F(n), .lo = -5, .hi = 1000, .help = "n"},
    {.name = "--big", .kind = KV_OPT_I64, .off = F(big), .lo = 0, .hi = INT64_MAX, .help = "b"},
    {.name = "--x", .kind = KV_OPT_FLOAT, .off = F(x), .flo = -1.0, .fhi = 1e6, .help = "x"},
    {.name = "--b", .kind = KV_OPT_FLAG, .off = F(b), .help = "mode b"},
    {.name = "--colour", .kind = KV_OPT_ENUM, .off = F(colour), .names = colours, .help = "c"},
    {.name = "--only-b", .kind = KV_OPT_INT, .off = F(only_b), .lo = 0, .hi = 9, .modes = M_B,
     .help = "with --b"},
    {.name = "--lens", .kind = KV_OPT_INTS, .off = F(lens), .lo = 2, .hi = 1 << 20, .hi_n = 8,
     .help = "lengths"},
    {.name = "--text", .kind = KV_OPT_TEXT, .off = F(text), .help = "text"},
    {.name = "--labels", .kind = KV_OPT_LABELS, .off = F(labels), .help = "labels"},
    {.name = "--list", .kind = KV_OPT_STRATEGIES, .off = F(list), .help = "strategies"},
};
#undef F

static int ran;

static uint32_t f_modes(const struct kv_cmd_ctx *x)
{
    return ((const struct f_opts *)x->opts)->b ? M_B : M_A;
}

static int32_t f_strategies(const struct kv_cmd_ctx *x, const char **names, int32_t max)
{
    static char buf[MAX_INPUT + 1];
    const struct f_opts *o = x->opts;
    if (o->list == NULL)
        return x->c.strategy != NULL ? (names[0] = x->c.strategy, 1) : 0;
    snprintf(buf, sizeof buf, "%s", o->list);
    int32_t n = 0;
    for (char *s = strtok(buf, ","); s != NULL && n < max; s = strtok(NULL, ","))
        names[n++] = s;
    return n;
}

static int f_run(struct kv_cmd_ctx *x)
{
    const struct f_opts *o = x->opts;
    const struct kv_cli_common *c = &x->c;
    ran = 1;
    if (o->n < -5 || o->n > 1000 || o->big < 0 || !isfinite(o->x) || o->x < -1.0 ||
        o->x > 1e6 || o->colour < 0 || o->colour > 2 || o->only_b < 0 || o->only_b > 9 ||
        (o->only_b != 0 && !o->b) || o->lens.n < 0 || o->lens.n > 8)
        abort();
    for (int32_t k = 0; k < o->lens.n; k++)
        if (o->lens.v[k] < 2 || o->lens.v[k] > 1 << 20)
            abort();
    if (o->labels != NULL) {
        static char buf[MAX_INPUT + 1];
        snprintf(buf, sizeof buf, "%s", o->labels);
        for (char *s = strtok(buf, ","); s != NULL; s = strtok(NULL, ","))
            if (!kv_label_ok(s))
                abort();
    }
    const struct kv_model_config *m = &c->model;
    if (m->n_layers < 1 || m->dim < 2 || m->n_heads < 1 || m->n_kv_heads < 1 ||
        m->hidden_dim < 1 || m->vocab_size < 1 || m->max_len < 1 || c->batch < 1 ||
        c->threads < 1 || c->threads > 1024 || (m->mlp != 0 && m->mlp != 1) ||
        c->cache.max_len != m->max_len)
        abort();
    /* the model passed the cross-checks: its bytes are counted */
    if (kv_model_config_check(m) != KV_OK || kv_model_weight_bytes(m) == 0)
        abort();
    /* every strategy-parameter flag holds a value its table accepts */
    for (int32_t i = 0; i < c->n_flags; i++) {
        const struct kv_cli_flag *f = &c->flags[i];
        if (f->param->type == KV_PARAM_TEXT ? f->given && f->text == NULL
                                            : !kv_param_accepts(f->param, f->value))
            abort();
    }
    /* the strategy resolves with the flags given (it may still refuse a
     * value in one line, as a real command would: exit 2) */
    if (c->strategy != NULL) {
        struct kv_cli_strategy st;
        struct kv_cli_common copy = *c;
        if (kv_cli_strategy(&copy, c->strategy, &st) != 0)
            return 2;
        const struct kv_cache_config cc = kv_cli_cache_config(c);
        return kv_cli_check_strategy("f", st.ops, st.params, &cc, 16, 0, NULL);
    }
    return 0;
}

static const struct kv_cmd f_cmd = {
    .name = "f",
    .summary = "the fuzz target's command",
    .usage = "[options]",
    .opts = f_table,
    .n_opts = sizeof f_table / sizeof f_table[0],
    .groups = KV_GRP_MODEL | KV_GRP_STRATEGY | KV_GRP_PARAMS | KV_GRP_BATCH | KV_GRP_THREADS |
              KV_GRP_SEED,
    .opts_size = sizeof(struct f_opts),
    .modes = f_modes,
    .mode_names = mode_names,
    .strategies = f_strategies,
    .run = f_run,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > MAX_INPUT)
        return 0;
    /* argv: "f", then the pieces of a NUL-terminated copy. */
    static char buf[MAX_INPUT + 1];
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = "f";
    char *p = buf;
    for (;;) {
        size_t n = strcspn(p, "\n");
        int last = p[n] == '\0';
        p[n] = '\0';
        if (argc == MAX_ARGS + 1)
            break;
        argv[argc++] = p;
        if (last)
            break;
        p += n + 1;
    }
    argv[argc] = NULL;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return 0; /* help goes to stdout: not this target's business */

    char *msg = NULL;
    size_t msg_len = 0;
    FILE *cap = open_memstream(&msg, &msg_len);
    if (cap == NULL)
        return 0;
    FILE *saved = stderr;
    stderr = cap;
    ran = 0;
    const int rc = kv_cmd_main(&f_cmd, argc, argv);
    fflush(cap);
    stderr = saved;
    if (rc == 2) {
        if (msg_len < 8 || strncmp(msg, "kvlab: f: ", 10) != 0 || msg[msg_len - 1] != '\n' ||
            memchr(msg, '\n', msg_len - 1) != NULL)
            abort();
    } else if (rc != 0 || msg_len != 0 || !ran) {
        abort(); /* accepted: the run ran and nothing was said */
    }
    fclose(cap);
    free(msg);
    if (kv_alloc_live() != 0)
        abort();
    return 0;
}
