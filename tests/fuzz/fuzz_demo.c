/*
 * fuzz_demo.c - libFuzzer target for `kvlab demo` as a whole command
 * (bench/cli/cmd_demo.c and the walks of bench/teach/): option parsing, the prompt, every
 * display path and the cache walk (`make fuzz-demo`).
 *
 * The input is an argument vector, one argument a line, as in fuzz_opts.c;
 * the seeds (tests/fuzz/corpus_demo) are edge cases a reader meets: one-
 * token prompts (T = 1), a window of 1, a batch of 1 and of 4, a residual
 * of 1, a static cache of one slot, --compare against none. The target runs
 * kv_cmd_main on the demo's table with stdout on /dev/null and stderr's file descriptor on a
 * temporary file (not a swapped FILE *: the OpenMP runtime, C++, may
 * initialise the C++ streams from stdout/stderr during a run),
 * and checks the CLI's contract besides the sanitizers' "no crash": exit
 * status 0, 1 or 2; a failure says so in exactly one line starting with
 * "kvlab", a success says nothing on stderr; nothing leaks.
 *
 * The design decision: every run must be quick, so an input is skipped when
 * any number in it (also inside a comma list or after '=') exceeds
 * MAX_NUMBER, except token ids after --prompt-tokens and the --seed; any
 * argument is at most MAX_ARG bytes; --model and --tokenizer (files) are
 * skipped. The demo's own work bound (DEMO_MAX_FLOPS) caps the rest.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../bench/cli/commands.h"
#include "../../kernels/kv_common.h"

#define MAX_ARGS 32
#define MAX_INPUT 2048
#define MAX_ARG 64
#define MAX_NUMBER 16

/* 1 when every run of digits in s is at most MAX_NUMBER. */
static int small_numbers(const char *s)
{
    for (const char *p = s; *p != '\0';) {
        if (*p < '0' || *p > '9') {
            p++;
            continue;
        }
        long v = 0;
        while (*p >= '0' && *p <= '9') {
            v = v * 10 + (*p - '0');
            if (v > MAX_NUMBER)
                return 0;
            p++;
        }
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > MAX_INPUT)
        return 0;
    static char buf[MAX_INPUT + 1];
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = "demo";
    char *p = buf;
    for (;;) {
        size_t n = strcspn(p, "\n");
        int last = p[n] == '\0';
        p[n] = '\0';
        if (argc == MAX_ARGS + 1 || n > MAX_ARG)
            return 0;
        argv[argc++] = p;
        if (last)
            break;
        p += n + 1;
    }
    argv[argc] = NULL;
    for (int i = 1; i < argc; i++) {
        if (strstr(argv[i], "--model") != NULL || strstr(argv[i], "--tokenizer") != NULL)
            return 0;
        int free_numbers = strncmp(argv[i], "--prompt-tokens=", 16) == 0 ||
                           strncmp(argv[i], "--seed=", 7) == 0 ||
                           (i > 1 && (strcmp(argv[i - 1], "--prompt-tokens") == 0 ||
                                      strcmp(argv[i - 1], "--seed") == 0));
        if (!free_numbers && !small_numbers(argv[i]))
            return 0;
    }

    static int capfd = -1, saved2 = -1;
    if (capfd < 0) {
        if (freopen("/dev/null", "w", stdout) == NULL)
            abort();
        FILE *t = tmpfile();
        if (t == NULL || (capfd = dup(fileno(t))) < 0 || (saved2 = dup(2)) < 0)
            abort();
        fclose(t);
    }
    static char msg[8192];
    if (ftruncate(capfd, 0) != 0 || lseek(capfd, 0, SEEK_SET) != 0)
        abort();
    fflush(stderr);
    dup2(capfd, 2);
    int rc = kv_cmd_main(&kv_cmd_demo_def, argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(saved2, 2);
    ssize_t got = pread(capfd, msg, sizeof msg - 1, 0);
    size_t msg_len = got > 0 ? (size_t)got : 0;
    msg[msg_len] = '\0';
    if (rc < 0 || rc > 2)
        abort();
    if (rc == 0 && msg_len != 0)
        abort(); /* a successful walk says nothing on stderr */
    if (rc != 0 && (msg_len < 6 || strncmp(msg, "kvlab", 5) != 0 || msg[msg_len - 1] != '\n' ||
                    memchr(msg, '\n', msg_len - 1) != NULL))
        abort(); /* one line, starting with kvlab */
    if (kv_alloc_live() != 0)
        abort();
    return 0;
}
