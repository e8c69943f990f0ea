/*
 * main.c - the kvlab command line: a table of subcommands. Only the CLI
 * prints and exits; everything below it returns status codes.
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "commands.h"

/*
 * OpenBLAS picks its GEMM kernels from the CPU model. On virtual machines
 * that mask the model (as ours do) it falls back to "Prescott", SSE3-only
 * kernels three times slower than the CPU can run, which would flatten every
 * GEMM-bound curve. The choice is made when the library loads, so when the
 * user has not chosen a core and OpenBLAS fell back, we pick the core the CPU
 * actually supports and re-execute ourselves once with it set. The chosen
 * core is recorded in every CSV (blas_core); tests check GEMM against a naive
 * reference either way.
 */
static void select_blas_core(char **argv)
{
    if (getenv("OPENBLAS_CORETYPE") != NULL || getenv("KVLAB_BLAS_REEXEC") != NULL)
        return;
    const char *core = openblas_get_corename();
    if (core == NULL || strcasecmp(core, "prescott") != 0)
        return;
    const char *better = NULL;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        better = "SkylakeX";
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        better = "Haswell";
    if (better == NULL)
        return;
    setenv("OPENBLAS_CORETYPE", better, 1);
    setenv("KVLAB_BLAS_REEXEC", "1", 1); /* never loop, even if exec fails oddly */
    execv("/proc/self/exe", argv);
    /* exec failed: carry on with the slow kernels rather than fail */
}

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
};

static const struct command commands[] = {
    {"strategies", kv_cmd_strategies, "list the registered cache strategies"},
    {"generate", kv_cmd_generate, "run one generation and print tokens and a timing summary"},
    {"sweep", kv_cmd_sweep, "measure every strategy over sequence lengths, write CSV"},
    {"demo", kv_cmd_demo, "walk a tiny model step by step and show what the cache holds"},
    {"compare", kv_cmd_compare, "compare two sweep CSVs and flag regressions"},
    {"kernel", kv_cmd_kernel, "time the attention kernel alone"},
    {"roofline", kv_cmd_roofline, "measure memory bandwidth and the GEMM rate"},
    {"export-synthetic", kv_cmd_export, "write the synthetic model as a llama2.c checkpoint"},
};
#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *f)
{
    fprintf(f, "usage: kvlab COMMAND [options]   (kvlab COMMAND --help for its options)\n\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-17s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv)
{
    select_blas_core(argv);
    if (argc < 2) {
        fprintf(stderr, "kvlab: missing command (try 'kvlab --help')\n");
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < N_COMMANDS; i++) {
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    }
    fprintf(stderr, "kvlab: unknown command '%s' (try 'kvlab --help')\n", argv[1]);
    return 2;
}
