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
#include <stddef.h>
#include <stdio.h>

#include "cli_cmd.h"
#include "cli_io.h"
#include "commands.h"
#include "../measure/roofline.h"
#include "../measure/sysinfo.h"

struct roofline_opts {
    int32_t reps;
    int csv;
};

static const struct kv_opt roofline_opts[] = {
    {.name = "--reps", .kind = KV_OPT_INT, .off = offsetof(struct roofline_opts, reps), .lo = 1,
     .hi = 1000, .meta = "R", .help = "timed passes of each test; the best is reported, the median as its spread"},
    {.name = "--csv", .kind = KV_OPT_FLAG, .off = offsetof(struct roofline_opts, csv),
     .help = "one header line and one row instead of the table"},
};

static void roofline_defaults(void *opts, struct kv_cli_common *c)
{
    struct roofline_opts *o = opts;
    struct kv_roofline_params p;
    kv_roofline_defaults(&p, c->threads);
    o->reps = p.reps;
}

static int roofline_run(struct kv_cmd_ctx *x)
{
    const struct roofline_opts *o = x->opts;
    struct kv_sysinfo si;
    kv_sysinfo_collect(&si);
    struct kv_roofline_params p;
    kv_roofline_defaults(&p, x->c.threads);
    p.reps = o->reps;
    kv_progress("kvlab roofline: %s, %d threads, OpenBLAS %s, best of %d passes\n",
                    si.cpu, p.n_threads, si.blas_core, p.reps);
    struct kv_roofline r;
    enum kv_status s = kv_roofline_measure(&r, &p);
    if (s != KV_OK) {
        fprintf(stderr, "kvlab: roofline: %s\n", kv_status_str(s));
        return 1;
    }
    if (o->csv) {
        printf("# roofline_method=%s\n", KV_ROOFLINE_METHOD);
        printf("threads,read_gbps,copy_gbps,sgemm_gflops,read_l3_gbps,read_spread,copy_spread,"
               "sgemm_spread,read_l3_spread\n");
        printf("%d,%.3f,%.3f,%.3f,%.3f,%.4f,%.4f,%.4f,%.4f\n", p.n_threads, r.read_gbps,
               r.copy_gbps, r.sgemm_gflops, r.read_l3_gbps, r.read_spread, r.copy_spread,
               r.sgemm_spread, r.read_l3_spread);
    } else {
        printf("read bandwidth  %8.2f GB/s      (DRAM: OpenMP sum over %zu MiB; median %.1f%% "
               "slower)\n",
               r.read_gbps, p.read_bytes >> 20, 100.0 * r.read_spread);
        printf("read bandwidth  %8.2f GB/s      (L3: OpenMP sums over %zu MiB; median %.1f%% "
               "slower)\n",
               r.read_l3_gbps, p.read_l3_bytes >> 20, 100.0 * r.read_l3_spread);
        printf("copy bandwidth  %8.2f GB/s      (read + write bytes, 2 x %zu MiB; median %.1f%% "
               "slower)\n",
               r.copy_gbps, p.copy_bytes >> 20, 100.0 * r.copy_spread);
        printf("sgemm           %8.2f GFLOP/s   (cblas_sgemm, M=N=K=%d; median %.1f%% slower)\n",
               r.sgemm_gflops, p.gemm_n, 100.0 * r.sgemm_spread);
    }
    return 0;
}

const struct kv_cmd kv_cmd_roofline_def = {
    .name = "roofline",
    .summary = "measure memory bandwidth and the GEMM rate",
    .usage = "[--threads N] [--reps R] [--csv]",
    .about = "  measures read bandwidth from DRAM (sum over max(256 MiB, 2 x L3)) and from\n"
             "  the L3 (sums over an L3-resident array of L3/8, at most 32 MiB), copy\n"
             "  bandwidth (2 x 128 MiB, read + write bytes) and cblas_sgemm GFLOP/s at\n"
             "  M=N=K=2048, on N threads. Each figure is the best of R passes after an\n"
             "  untimed one; how much slower the median pass ran is its spread. Cold kernel\n"
             "  timings compare with the first, hot with the second. Machine context goes\n"
             "  to stderr, the figures to stdout.\n",
    .opts = roofline_opts,
    .n_opts = sizeof roofline_opts / sizeof roofline_opts[0],
    .groups = KV_GRP_THREADS,
    .opts_size = sizeof(struct roofline_opts),
    .defaults = roofline_defaults,
    .run = roofline_run,
    .example = "--reps 1 --threads 1 --csv",
};
