/*
 * roofline.h - the machine's limits, measured in-process on the threads a
 * run uses: read bandwidth from DRAM and from the L3, copy bandwidth and
 * the OpenBLAS sgemm rate.
 *
 * The one design decision: every buffer is created and touched (zero-filled
 * by kv_alloc, then written once) before any timing, so first-touch page
 * faults (about 1.3 GB/s on virtual machines) never enter a measurement;
 * each figure is the best of several passes after an untimed one, as STREAM
 * reports, with the median's distance from it kept as its spread
 * (KV_ROOFLINE_METHOD, which sweep and kernel write into their metadata).
 */
#ifndef KV_ROOFLINE_H
#define KV_ROOFLINE_H

#include <signal.h>

#include "../../kernels/kv_common.h"

/* A timed pass that got less than this share of the CPU it asked for
 * (process CPU time / (wall * threads)) was disturbed and is run again, up
 * to KV_ROOFLINE_MAX_TRIES * reps passes in all. */
#define KV_ROOFLINE_MIN_UTIL 0.6
#define KV_ROOFLINE_MAX_TRIES 3

/* How the limits are measured, in words, for the metadata of a run. */
#define KV_ROOFLINE_METHOD                                                                    \
    "best of reps passes after 1 untimed pass, pages touched before timing, passes under "    \
    "0.6 of the CPU asked for re-run; spread = median/best - 1"

struct kv_roofline_params {
    int32_t n_threads;     /* threads for the OpenMP loops and OpenBLAS (>= 1) */
    size_t read_bytes;     /* bytes of the array summed by the DRAM read test */
    size_t read_l3_bytes;  /* bytes of the L3-resident array of the L3 read test */
    size_t copy_bytes;     /* bytes of each of the two arrays of the copy test */
    int32_t gemm_n;        /* M = N = K of the sgemm test */
    int32_t reps;          /* timed passes of each test (the best reported) */
    const volatile sig_atomic_t *stop; /* if non-NULL and set, stop early */
};

struct kv_roofline {
    double read_gbps;      /* 1e9 bytes/s read from DRAM (sum of a float array > 2 x L3) */
    double read_l3_gbps;   /* 1e9 bytes/s read from an array that fits in the L3 */
    double copy_gbps;      /* 1e9 bytes/s moved, read + write counted (STREAM copy) */
    double sgemm_gflops;   /* 1e9 flop/s of cblas_sgemm, 2*M*N*K per call */
    /* each test's median pass / best pass - 1 (0.02: the median ran 2% slower) */
    double read_spread, read_l3_spread, copy_spread, sgemm_spread;
    int32_t n_threads;
    int32_t reps;
};

/* The defaults: a DRAM read array of max(256 MiB, 2 x L3), an L3 read
 * array of L3 / 8 clamped to [1, 32] MiB (summed repeatedly, so a pass
 * reads as many bytes as the DRAM one), 2 x 128 MiB copy arrays, sgemm
 * 2048, 30 timed passes. With 9, five runs back to back on the shared VM
 * agreed within 5% on DRAM read but 11% on copy and 27% on the L3 read;
 * with 30 (0.9 s more), within 1-3% while the host held still. The host's
 * own phases, seconds long, still move every limit by up to 30%, which no
 * pass count removes: kvlab kernel --roofline measures a row's limit beside
 * it (kv_read_probe). */
void kv_roofline_defaults(struct kv_roofline_params *p, int32_t n_threads);

/*
 * Runs the four tests. KV_ERR_INVALID on bad params, KV_ERR_NOMEM when a
 * buffer cannot be allocated. When *stop becomes set, returns KV_OK with
 * the figures not yet measured set to NaN.
 */
enum kv_status kv_roofline_measure(struct kv_roofline *out,
                                   const struct kv_roofline_params *p);

/*
 * A read probe: the DRAM (or L3) read test, kept allocated so that it can
 * be run beside each measurement. The host's bandwidth drifts by 10-25%
 * within seconds on a shared VM, so a limit taken once at the start of a
 * run is not the limit a row minutes later met; a probe taken right before
 * and after that row is. open allocates and touches the array of rp's DRAM
 * read test, or with l3 set of its L3 read test (summed as many times a
 * pass), on rp's threads; best returns the best of `passes` timed passes in
 * 1e9 bytes/s (NaN when none was undisturbed enough).
 */
struct kv_read_probe {
    float *x;
    size_t n;
    int32_t sweeps, n_threads;
};
enum kv_status kv_read_probe_open(struct kv_read_probe *p, const struct kv_roofline_params *rp,
                                  int l3);
double kv_read_probe_best(struct kv_read_probe *p, int32_t passes);
void kv_read_probe_close(struct kv_read_probe *p);

#endif /* KV_ROOFLINE_H */
