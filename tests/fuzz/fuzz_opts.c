/*
 * fuzz_opts.c - libFuzzer target for the shared option parser
 * (bench/cli_opts.c): kv_cli_parse_common, kv_cli_check_common,
 * kv_cli_int_list and kv_cli_check_memory (`make fuzz-opts`).
 *
 * The input is an argument vector: the bytes split at newlines (so a seed
 * corpus is written as text, one argument a line), at most MAX_ARGS
 * arguments; a NUL byte ends the input, as no argv string can hold one. The target walks it the way every subcommand
 * does: a common option is consumed with its value, anything else is skipped
 * as if the subcommand had taken it, and the walk stops at the first error;
 * when the whole vector parses, the cross-checks run.
 *
 * The design decision: stderr (the FILE *, not file descriptor 2, so the
 * sanitizers still report) is pointed at an in-memory stream for each run,
 * so the target checks the CLI's contract besides "no crash": an error
 * prints exactly one line that starts with "kvlab: ", a success prints
 * nothing, every accepted value is inside the range the parser promises,
 * and a configuration that passes the cross-checks has a non-zero,
 * non-overflowing weight byte count. The seeds cover every strategy's
 * parameters, the text of a --layers-pattern included (its parser runs in
 * the cross-checks of --strategy hybrid).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../bench/cli_opts.h"

#define MAX_ARGS 64
#define MAX_INPUT 4096

/* One line starting with "kvlab: " and ending with the only newline. */
static void check_one_line(const char *msg, size_t len)
{
    if (len < 8 || strncmp(msg, "kvlab: ", 7) != 0 || msg[len - 1] != '\n' ||
        memchr(msg, '\n', len - 1) != NULL)
        abort();
}

static void check_ranges(const struct kv_cli_common *c)
{
    const struct kv_model_config *m = &c->model;
    if (m->n_layers < 1 || m->dim < 2 || m->n_heads < 1 || m->n_kv_heads < 1 ||
        m->hidden_dim < 1 || m->vocab_size < 1 || m->max_len < 1 || c->batch < 1 ||
        c->threads < 1 || c->threads > 1024 || (m->mlp != 0 && m->mlp != 1) ||
        c->cache.max_len != m->max_len)
        abort();
    /* every strategy-parameter flag holds a value its table accepts (a text
     * one: the text given, checked when a strategy takes it) */
    for (int32_t i = 0; i < c->n_flags; i++) {
        const struct kv_cli_flag *f = &c->flags[i];
        if (f->param->type == KV_PARAM_TEXT ? f->given && f->text == NULL
                                            : !kv_param_accepts(f->param, f->value))
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > MAX_INPUT)
        return 0;
    /* argv: "kvlab-fuzz", then the pieces of a NUL-terminated copy. */
    static char buf[MAX_INPUT + 1];
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = "kvlab-fuzz";
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

    char *msg = NULL;
    size_t msg_len = 0;
    FILE *cap = open_memstream(&msg, &msg_len);
    if (cap == NULL)
        return 0;
    FILE *saved = stderr;
    stderr = cap;

    struct kv_cli_common c;
    kv_cli_common_defaults(&c);
    int failed = 0;
    for (int i = 1; i < argc && !failed;) {
        int before = i;
        int r = kv_cli_parse_common(&c, argc, argv, &i);
        if (r < 0) {
            failed = 1;
        } else if (r == 0) {
            if (i != before)
                abort(); /* "not mine" must not consume anything */
            i++;
        } else if (i <= before || i > argc) {
            abort(); /* consumed nothing, or past the end */
        }
    }
    if (!failed) {
        check_ranges(&c);
        if (kv_cli_check_common(&c) != 0) {
            failed = 1;
        } else {
            const struct kv_strategy_ops *ops;
            if (c.strategy != NULL && kv_strategy_lookup(c.strategy, &ops, NULL, 0) != KV_OK)
                abort();
            if (kv_model_config_check(&c.model) != KV_OK ||
                kv_model_weight_bytes(&c.model) == 0)
                abort();
            (void)kv_cli_check_memory("the model", kv_model_weight_bytes(&c.model));
        }
    }
    fflush(cap);
    if (failed)
        check_one_line(msg, msg_len);
    else if (msg_len != 0 && (msg_len < 8 || strncmp(msg, "kvlab: ", 7) != 0))
        abort(); /* only check_memory may have spoken, with one kvlab: line */

    /* The list parser on every argument, against its own contract. */
    for (int i = 1; i < argc; i++) {
        int32_t vals[8];
        rewind(cap);
        fflush(cap);
        int n = kv_cli_int_list("--list", argv[i], -5, 1000, vals, 8);
        fflush(cap);
        if (n < 0) {
            check_one_line(msg, msg_len);
        } else {
            if (n < 1 || n > 8)
                abort();
            for (int k = 0; k < n; k++)
                if (vals[k] < -5 || vals[k] > 1000)
                    abort();
        }
    }
    stderr = saved;
    fclose(cap);
    free(msg);
    if (kv_alloc_live() != 0)
        abort();
    return 0;
}
