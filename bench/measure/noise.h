/*
 * noise.h - did something else disturb a measurement? Every timed row
 * (sweep, kernel) opens a window before its timed steps and closes it
 * after; the window records what the operating system saw meanwhile, and
 * one classifier turns that into noisy 0/1 with a reason a person can read
 * ("other programs used 0.97 cores; cpu_util 0.41").
 *
 * The design decision: the classifier trusts signals that see interference
 * directly - CPU time other programs spent (the machine's busy time from
 * /proc/stat less this process's own), this process's CPU utilisation,
 * involuntary context switches, hypervisor steal - and uses the spread of
 * the timed steps only as a last, loose check, because a short step's
 * spread is large on a quiet machine too. The classifier is a pure function
 * of the observation, so it is tested on synthetic series (check_noise.c).
 */
#ifndef KV_NOISE_H
#define KV_NOISE_H

#include <stddef.h>
#include <stdint.h>

/* What a window saw, and the timed steps it held. */
struct kv_noise_obs {
    int64_t wall_ns;        /* the window's length */
    int64_t own_cpu_ns;     /* this process's CPU time in it */
    int64_t busy_ns;        /* the machine's busy CPU time in it (all CPUs); -1: unknown */
    int64_t steal_ns;       /* hypervisor steal in it; -1: unknown */
    int64_t total_ns;       /* the machine's total CPU time in it (all CPUs); -1: unknown */
    int64_t nivcsw;         /* involuntary context switches of this process */
    int64_t tick_ns;        /* /proc/stat's resolution (10 ms at 100 Hz): each CPU's
                               busy time is known to a tick, so a short window's
                               other-programs figure carries (ncpu + 1) ticks of
                               doubt, which the classifier gives it */
    int32_t threads;        /* threads the timed work asked for */
    int32_t ncpu;           /* online CPUs */
    const int64_t *step_ns; /* the timed steps (n of them), or NULL */
    int32_t n;
};

/* Thresholds (kv_noise_limits_default; the sweep's options can set them). */
struct kv_noise_limits {
    double max_other_cores; /* other programs' CPU use, in cores (default 0.30) */
    double min_cpu_util;    /* own CPU time / (wall x threads) (default 0.60) */
    double max_steal;       /* steal / total (default 0.05) */
    double max_nivcsw_per_s; /* per thread (default 200: a tick of 4 ms is 250/s) */
    double max_spread;      /* p95 / median of the steps (default 3.0; with at least
                               KV_NOISE_SPREAD_MIN_STEPS steps only) */
};

/*
 * The spread is judged from this many steps on: below it the nearest-rank
 * p95 is the largest step, so one slow step that is the code's own - a
 * dynamic cache doubling its capacity inside the timed steps, which a sweep
 * at a power of two always has - would call a quiet row noisy (and have it
 * re-measured, only to be slow again). From 20 steps on the p95 is at most
 * the second largest, and a single such step passes.
 */
#define KV_NOISE_SPREAD_MIN_STEPS 20

void kv_noise_limits_default(struct kv_noise_limits *l);

/* Other programs' CPU (in cores, past the tick doubt) below which the
 * machine counts as otherwise idle: a low cpu_util is then the code's own
 * serial parts, not interference (kv_noise_classify). */
#define KV_NOISE_OTHER_FLOOR 0.05

/*
 * 1 when the observation shows interference, with the reasons (every one
 * that fired, "; "-separated) in why; 0 and "" when clean. why may be NULL.
 */
int kv_noise_classify(const struct kv_noise_obs *o, const struct kv_noise_limits *l, char *why,
                      size_t n);

/* Other programs' CPU use over the window, in cores, less the tick doubt
 * (0 when unknown or within it). */
double kv_noise_other_cores(const struct kv_noise_obs *o);

/* A measuring window: kv_noise_begin before the timed steps, kv_noise_end
 * after (fills everything but step_ns and n). */
struct kv_noise_window {
    int64_t t0, cpu0, busy0, steal0, total0, nivcsw0;
};
void kv_noise_begin(struct kv_noise_window *w);
void kv_noise_end(const struct kv_noise_window *w, int32_t threads, struct kv_noise_obs *o);

#endif /* KV_NOISE_H */
