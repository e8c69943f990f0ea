/*
 * main.c - the kvlab command line: a table of subcommands. Only the CLI
 * prints and exits; everything below it returns status codes.
 */
#include <stdio.h>
#include <string.h>

#include "cli_io.h"
#include "commands.h"
#include "sysinfo.h"

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
};

static const struct command commands[] = {
    {"strategies", kv_cmd_strategies, "list the registered cache strategies"},
    {"generate", kv_cmd_generate, "run one generation and print tokens and a timing summary"},
    {"sweep", kv_cmd_sweep, "measure every strategy over sequence lengths, write CSV"},
    {"sharing", kv_cmd_sharing, "memory and step time of B sequences sharing one prompt, write CSV"},
    {"demo", kv_cmd_demo, "walk a tiny model step by step and show what the cache holds"},
    {"compare", kv_cmd_compare, "compare two sweep CSVs and flag regressions"},
    {"merge", kv_cmd_merge, "join the shard CSVs of a sweep (sweep --shard I/N) into one"},
    {"kernel", kv_cmd_kernel, "time the attention kernel alone"},
    {"roofline", kv_cmd_roofline, "measure memory bandwidth and the GEMM rate"},
    {"export-synthetic", kv_cmd_export, "write the synthetic model as a llama2.c checkpoint"},
    {"perplexity", kv_cmd_perplexity, "bits per byte of a text, streamed through a cache strategy"},
    {"stale-cache", kv_cmd_stale, "decode with a cache the weights have moved past (why not in training)"},
};
#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *f)
{
    fprintf(f, "usage: kvlab COMMAND [options]   (kvlab COMMAND --help for its options)\n\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-17s %s\n", commands[i].name, commands[i].help);
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
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        kv_cli_signals(NULL);
        usage(stdout);
        return kv_cli_finish(stdout, "standard output", 0);
    }
    for (size_t i = 0; i < N_COMMANDS; i++) {
        if (strcmp(argv[1], commands[i].name) != 0)
            continue;
        /*
         * OpenBLAS picks its kernels from the CPU model when it loads; on VMs
         * that mask the model it falls back to slow SSE3 kernels. This
         * re-executes kvlab once with the core the CPU supports (see sysinfo.c),
         * so every command measures with the same, right GEMM.
         */
        kv_sysinfo_blas_reexec(argc - 1, argv + 1);
        /* SIGPIPE ignored, temporary files removed on SIGINT/SIGTERM/SIGHUP */
        kv_cli_signals(NULL);
        int rc = commands[i].run(argc - 1, argv + 1);
        return kv_cli_finish(stdout, "standard output", rc);
    }
    fprintf(stderr, "kvlab: unknown command '%s' (try 'kvlab --help')\n", kv_cli_q(argv[1]));
    return 2;
}
