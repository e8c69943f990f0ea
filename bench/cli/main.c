/*
 * main.c - the kvlab command line: a table of commands, each a declared
 * option table plus a run function (cli_cmd.h). Only the CLI prints and
 * exits; everything below it returns status codes.
 */
#include <stdio.h>
#include <string.h>

#include "cli_cmd.h"
#include "cli_io.h"
#include "commands.h"
#include "../measure/sysinfo.h"

/* kvlab's release; the Makefile's KV_VERSION (kvlab.pc) says the same. */
#ifndef KV_VERSION_STRING
#define KV_VERSION_STRING "0.2"
#endif

static const struct kv_cmd *const commands[] = {
    &kv_cmd_strategies_def, &kv_cmd_generate_def,   &kv_cmd_sweep_def,   &kv_cmd_sharing_def,
    &kv_cmd_demo_def,       &kv_cmd_compare_def,    &kv_cmd_merge_def,   &kv_cmd_kernel_def,
    &kv_cmd_roofline_def,   &kv_cmd_export_def,     &kv_cmd_perplexity_def, &kv_cmd_stale_def,
    &kv_cmd_serving_def,
};
#define N_COMMANDS ((int32_t)(sizeof(commands) / sizeof(commands[0])))

static void usage(FILE *f)
{
    fprintf(f, "usage: kvlab COMMAND [options]   (kvlab COMMAND --help for its options)\n"
               "       kvlab --version | --help | options\n\n");
    for (int32_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-17s %s\n", commands[i]->name, commands[i]->summary);
    fprintf(f, "  %-17s %s\n", "options",
            "every command's option table, tab-separated (for tools and the e2e matrix)");
}

/*
 * Every command's exit goes through kv_cli_finish: whatever a command
 * printed on stdout must have reached it (a full disk, a closed pipe, a
 * write error is exit 1 with one line), whichever command it was.
 */
int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "kvlab: missing command (try 'kvlab --help')\n");
        return 2;
    }
    /* a strategy parameter named like a command option would silently
     * take it over: refused before anything is parsed */
    if (kv_cmd_reserve(commands, N_COMMANDS) != 0)
        return 1;
    kv_cli_signals(NULL);
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        if (argc > 2) {
            fprintf(stderr, "kvlab: --help takes nothing after it (try 'kvlab COMMAND --help')\n");
            return 2;
        }
        usage(stdout);
        return kv_cli_finish(stdout, "standard output", 0);
    }
    if (strcmp(argv[1], "--version") == 0) {
        if (argc > 2) {
            fprintf(stderr, "kvlab: --version takes nothing after it\n");
            return 2;
        }
        printf("kvlab %s\n", KV_VERSION_STRING);
        return kv_cli_finish(stdout, "standard output", 0);
    }
    if (strcmp(argv[1], "options") == 0) {
        if (argc > 2) {
            fprintf(stderr, "kvlab: options takes no arguments\n");
            return 2;
        }
        kv_cmd_dump(commands, N_COMMANDS, stdout);
        return kv_cli_finish(stdout, "standard output", 0);
    }
    for (int32_t i = 0; i < N_COMMANDS; i++) {
        if (strcmp(argv[1], commands[i]->name) != 0)
            continue;
        /*
         * OpenBLAS picks its kernels from the CPU model when it loads; on VMs
         * that mask the model it falls back to slow SSE3 kernels. This
         * re-executes kvlab once with the core the CPU supports (see sysinfo.c),
         * so every command measures with the same, right GEMM.
         */
        kv_sysinfo_blas_reexec(argc - 1, argv + 1);
        int rc = kv_cmd_main(commands[i], argc - 1, argv + 1);
        return kv_cli_finish(stdout, "standard output", rc);
    }
    fprintf(stderr, "kvlab: unknown command '%s' (try 'kvlab --help')\n", kv_text_q(argv[1]));
    return 2;
}
