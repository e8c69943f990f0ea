/*
 * cmd_roofline.c - `kvlab roofline`: measure and print the machine's limits
 * (read bandwidth, copy bandwidth, sgemm rate) on the threads a run uses.
 * The measurement itself lives in roofline.c so `sweep` records the same
 * figures in its CSV metadata.
 *
 *   kvlab roofline [--threads N] [--reps R] [--csv]
 *
 * Machine context goes to stderr, the figures to stdout.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli_io.h"
#include "cli_opts.h"
#include "cli_cmd.h"
#include "commands.h"
int kv_cmd_roofline(int argc, char **argv);
#include "roofline.h"
#include "sysinfo.h"

static void roofline_usage(FILE *f)
{
    fprintf(f,
            "usage: kvlab roofline [--threads N] [--reps R] [--csv]\n"
            "  measures read bandwidth from DRAM (sum over max(256 MiB, 2 x L3)) and from\n"
            "  the L3 (sums over an L3-resident array of L3/8, at most 32 MiB), copy\n"
            "  bandwidth (2 x 128 MiB, read + write bytes) and cblas_sgemm GFLOP/s at\n"
            "  M=N=K=2048; median of R repetitions (default 7) on N threads (default:\n"
            "  online cores). Cold kernel timings compare with the first, hot with the second.\n"
            "  --csv prints one header line and one row instead of the table.\n");
}

int kv_cmd_roofline(int argc, char **argv)
{
    struct kv_sysinfo si;
    kv_sysinfo_collect(&si);
    struct kv_roofline_params p;
    kv_roofline_defaults(&p, si.ncpu);
    int csv = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            roofline_usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--csv") == 0) {
            csv = 1;
        } else if (strcmp(argv[i], "--threads") == 0 || strcmp(argv[i], "--reps") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "kvlab roofline: %s needs a value\n", argv[i]);
                return 2;
            }
            int32_t *dst = argv[i][2] == 't' ? &p.n_threads : &p.reps;
            int32_t hi = argv[i][2] == 't' ? 1024 : 1000;
            if (kv_cli_i32(argv[i], argv[i + 1], 1, hi, dst) != 0)
                return 2;
            i++;
        } else {
            fprintf(stderr, "kvlab roofline: unknown option '%s' (try --help)\n",
                    kv_cli_q(argv[i]));
            return 2;
        }
    }

    kv_cli_progress("kvlab roofline: %s, %d threads, OpenBLAS %s, median of %d reps\n",
                    si.cpu, p.n_threads, si.blas_core, p.reps);
    struct kv_roofline r;
    enum kv_status s = kv_roofline_measure(&r, &p);
    if (s != KV_OK) {
        fprintf(stderr, "kvlab roofline: %s\n", kv_status_str(s));
        return 1;
    }
    if (csv) {
        printf("threads,read_gbps,copy_gbps,sgemm_gflops,read_l3_gbps\n");
        printf("%d,%.3f,%.3f,%.3f,%.3f\n", p.n_threads, r.read_gbps, r.copy_gbps,
               r.sgemm_gflops, r.read_l3_gbps);
    } else {
        printf("read bandwidth  %8.2f GB/s      (DRAM: OpenMP sum over %zu MiB)\n", r.read_gbps,
               p.read_bytes >> 20);
        printf("read bandwidth  %8.2f GB/s      (L3: OpenMP sums over %zu MiB)\n",
               r.read_l3_gbps, p.read_l3_bytes >> 20);
        printf("copy bandwidth  %8.2f GB/s      (read + write bytes, 2 x %zu MiB)\n",
               r.copy_gbps, p.copy_bytes >> 20);
        printf("sgemm           %8.2f GFLOP/s   (cblas_sgemm, M=N=K=%d)\n",
               r.sgemm_gflops, p.gemm_n);
    }
    return 0;
}

/* transitional: on the command table, parsing its own argv */
const struct kv_cmd kv_cmd_roofline_def = {.name = "roofline", .summary = "measure memory bandwidth and the GEMM rate", .legacy = kv_cmd_roofline};
