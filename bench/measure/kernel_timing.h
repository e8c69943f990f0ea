/*
 * kernel_timing.h - the timing protocol of `kvlab kernel`, shared with the
 * peer harnesses (bench/peers/), so that kvlab and a peer are timed the same
 * way: the same warm-up, repetition count, min/median, disturbed-pass
 * re-measurement and cold/hot rotation.
 *
 * The one design decision: "cold" is a property of the protocol, not of the
 * kernel. A cold measurement rotates its calls over n_sets independent
 * copies of the operands whose total exceeds twice the last-level cache, so
 * every call reads its K/V from DRAM, as a decode step over many layers
 * does (each layer's cache is read once per step). A hot measurement keeps
 * one set, which stays in the cache between calls.
 *
 * Protocol of kv_ktime_run: 2 untimed warm-up calls; R repetitions, R given
 * or chosen to fill about KV_KTIME_TARGET_NS (0.15 s, clamped to [5, 1000]
 * calls: `make kernel-bench` times ~300 configurations, kvlab's and ggml's,
 * cold and hot, three times over, in a few minutes); one
 * timing pass times every call alone with CLOCK_MONOTONIC. A pass during
 * which other programs used more than KV_KTIME_MAX_OTHERS of a core (the
 * machine's busy time from /proc/stat minus this process's CPU time, over
 * the pass) is run again after a pause, up to KV_KTIME_MAX_TRIES passes;
 * the pass with the lowest minimum is kept (its min and its median).
 *
 * Measuring again pays off when a competitor comes in bursts, not when it
 * runs throughout: beside three CPU-bound loops every pass of make bench's
 * kernel part was disturbed, each configuration was timed four times, and
 * the part took 4.2x its quiet time, its figures disturbed either way.
 * So the calls of a run share what they saw (struct kv_ktime_busy): after
 * KV_KTIME_BUSY_CALLS calls in a row with every pass disturbed, a call
 * makes one pass, until a pass comes out undisturbed again. A pass shorter
 * than KV_KTIME_CHECK_MIN_NS is not judged: it does not end a streak, and
 * marks its configuration only while the run is busy throughout. A run's first call looks at the machine
 * for KV_KTIME_PROBE_NS first and, when other programs are using it,
 * starts the run as busy throughout: make bench times the kernel in some
 * forty processes, and each one learning the load afresh (two
 * configurations of four passes) cost its kernel part 48 such pairs.
 *
 * A configuration none of whose passes came out undisturbed is kept, and
 * marked (noisy, noise_reason), as the sweep marks its rows: the caller
 * writes the mark beside the figures and warns at the end of its run.
 */
#ifndef KV_KERNEL_TIMING_H
#define KV_KERNEL_TIMING_H

#include <stddef.h>
#include <stdint.h>

#define KV_KTIME_TARGET_NS 1.5e8
#define KV_KTIME_MIN_REPS 5
#define KV_KTIME_MAX_REPS 1000
#define KV_KTIME_MAX_OTHERS 0.15
/* passes shorter than this are not judged (/proc/stat counts 10 ms ticks) */
#define KV_KTIME_CHECK_MIN_NS 50000000L
#define KV_KTIME_MAX_TRIES 4
#define KV_KTIME_RETRY_PAUSE_NS 300000000L
/* calls in a row with every pass disturbed after which the machine counts
 * as busy throughout (one pass a call) */
#define KV_KTIME_BUSY_CALLS 2
/* how long a run's first call watches the machine before timing */
#define KV_KTIME_PROBE_NS 100000000L
/* cold: the sets together hold more than this many times the L3 */
#define KV_KTIME_COLD_FACTOR 2

enum kv_ktime_mode { KV_KTIME_COLD, KV_KTIME_HOT, KV_KTIME_MODE_COUNT };

/* "cold" / "hot" */
const char *kv_ktime_mode_name(enum kv_ktime_mode m);

/* One timed call on operand set `set` (0 <= set < n_sets). */
typedef void (*kv_ktime_call)(void *ctx, int32_t set);

/* What the calls of one run learned about the machine; zero it once. */
struct kv_ktime_busy {
    int32_t streak; /* the latest calls in a row with every pass disturbed */
    int32_t probed; /* the machine was looked at before the first call */
};

struct kv_ktime_params {
    int32_t reps;       /* 0: chosen to fill KV_KTIME_TARGET_NS; else at most this */
    int32_t n_sets;     /* call i uses set i % n_sets (1 = hot) */
    const char *label;  /* names the configuration in the "other programs" note */
    struct kv_ktime_busy *busy; /* shared by a run's calls; NULL: this call alone */
    /* the machine's busy time (tests pass their own); NULL: kv_machine_busy_ns */
    int64_t (*machine_busy_ns)(void);
};

struct kv_ktime_result {
    double us_min, us_median; /* of the kept pass */
    int32_t reps;             /* timed calls per pass */
    int32_t passes;           /* passes made (1 when undisturbed or busy throughout) */
    double others;            /* cores' worth other programs used in the kept pass */
    int noisy;                /* 1: no pass came out undisturbed, the figures are suspect */
    char noise_reason[96];    /* why, in words without commas ("" when clean) */
};

/* Sets of `set_bytes` each that a cold measurement rotates over: the least
 * n with n * set_bytes > total_bytes (at least 2; callers pass
 * KV_KTIME_COLD_FACTOR x the L3, or what --cold-bytes says); 1 for hot. */
int32_t kv_ktime_sets(enum kv_ktime_mode m, size_t set_bytes, size_t total_bytes);

/* The bytes those sets hold together, kv_ktime_sets(m, set_bytes,
 * total_bytes) x set_bytes: what a caller allocates for the rotation (a cold
 * run makes at least two copies, so a cache larger than total_bytes costs
 * twice its size, not once). 0, or -1 when the product overflows size_t. */
int kv_ktime_sets_bytes(enum kv_ktime_mode m, size_t set_bytes, size_t total_bytes,
                        size_t *bytes);

/* The bytes kv_ktime_run allocates itself (its buffer of call times). */
size_t kv_ktime_run_bytes(void);

/* Runs the protocol above; 0, or -1 when the time buffer cannot be
 * allocated. Notes about disturbed passes go to stderr. */
int kv_ktime_run(struct kv_ktime_result *r, const struct kv_ktime_params *p,
                 kv_ktime_call call, void *ctx);

/* Busy time of the whole machine so far (all CPUs: user + nice + system +
 * irq + softirq + steal from /proc/stat), in ns; -1 when unreadable. */
int64_t kv_machine_busy_ns(void);

#endif /* KV_KERNEL_TIMING_H */
