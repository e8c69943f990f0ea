/*
 * kernel_timing.c - the timing protocol of `kvlab kernel` and its peer
 * harnesses (see kernel_timing.h): warm-up, repetitions, min/median, passes
 * disturbed by other programs measured again, cold rotation over sets.
 */
#include "kernel_timing.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../kernels/kv_common.h"
#include "../term/text.h"
#include "stats.h"

const char *kv_ktime_mode_name(enum kv_ktime_mode m)
{
    return m == KV_KTIME_HOT ? "hot" : "cold";
}

int32_t kv_ktime_sets(enum kv_ktime_mode m, size_t set_bytes, size_t total_bytes)
{
    if (m == KV_KTIME_HOT)
        return 1;
    if (set_bytes == 0)
        set_bytes = 1;
    double n = floor((double)total_bytes / (double)set_bytes) + 1.0;
    return n < 2.0 ? 2 : n > 1e6 ? 1000000 : (int32_t)n;
}

int kv_ktime_sets_bytes(enum kv_ktime_mode m, size_t set_bytes, size_t total_bytes,
                        size_t *bytes)
{
    const size_t n = (size_t)kv_ktime_sets(m, set_bytes, total_bytes);
    if (set_bytes != 0 && n > SIZE_MAX / set_bytes)
        return -1;
    *bytes = n * set_bytes;
    return 0;
}

size_t kv_ktime_run_bytes(void) { return KV_KTIME_MAX_REPS * sizeof(double); }

int64_t kv_machine_busy_ns(void)
{
    FILE *f = fopen("/proc/stat", "r");
    if (f == NULL)
        return -1;
    char line[512];
    const char *ok = fgets(line, sizeof line, f);
    fclose(f);
    if (ok == NULL || strncmp(line, "cpu ", 4) != 0)
        return -1;
    /* the first line: "cpu" then user nice system idle iowait irq softirq steal */
    unsigned long long v[8] = {0};
    int n = 0;
    char *p = line + 4;
    while (n < 8) {
        char *end;
        errno = 0;
        v[n] = strtoull(p, &end, 10);
        if (end == p || errno != 0)
            break;
        p = end;
        n++;
    }
    long tck = sysconf(_SC_CLK_TCK);
    if (n != 8 || tck <= 0)
        return -1;
    unsigned long long busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    return (int64_t)(busy * (1000000000ull / (unsigned long long)tck));
}

/* the cores other programs used while this process slept KV_KTIME_PROBE_NS;
 * 0 when the machine cannot be read */
static double others_while_idle(int64_t (*busy_ns)(void))
{
    int64_t wall0 = kv_now_ns(), cpu0 = kv_cpu_now_ns(), busy0 = busy_ns();
    struct timespec pause = {0, KV_KTIME_PROBE_NS};
    nanosleep(&pause, NULL);
    int64_t busy1 = busy_ns(), wall = kv_now_ns() - wall0;
    if (busy0 < 0 || busy1 < 0 || wall <= 0)
        return 0.0;
    return (double)(busy1 - busy0 - (kv_cpu_now_ns() - cpu0)) / (double)wall;
}

int kv_ktime_run(struct kv_ktime_result *r, const struct kv_ktime_params *p,
                 kv_ktime_call call, void *ctx)
{
    const int32_t sets = p->n_sets < 1 ? 1 : p->n_sets;
    double *times = kv_alloc(kv_ktime_run_bytes());
    if (times == NULL)
        return -1;
    int64_t t0 = kv_now_ns();
    for (int32_t w = 0; w < 2; w++)
        call(ctx, w % sets);
    double one = (double)(kv_now_ns() - t0) / 2.0;
    int32_t reps = (int32_t)fmin(KV_KTIME_TARGET_NS / (one + 1.0), (double)KV_KTIME_MAX_REPS);
    if (reps < KV_KTIME_MIN_REPS)
        reps = KV_KTIME_MIN_REPS;
    if (p->reps > 0)
        reps = p->reps < KV_KTIME_MAX_REPS ? p->reps : KV_KTIME_MAX_REPS;
    r->us_min = INFINITY;
    r->us_median = NAN;
    r->reps = reps;
    r->passes = 0;
    r->others = 0.0;
    r->noisy = 0;
    r->noise_reason[0] = '\0';
    /* the warm-up used sets 0 and 1: start the rotation after them */
    int32_t next = 2 % sets;
    int64_t (*busy_ns)(void) = p->machine_busy_ns ? p->machine_busy_ns : kv_machine_busy_ns;
    if (p->busy != NULL && !p->busy->probed) {
        p->busy->probed = 1;
        if (others_while_idle(busy_ns) > KV_KTIME_MAX_OTHERS)
            p->busy->streak = KV_KTIME_BUSY_CALLS;
    }
    const int busy_throughout = p->busy != NULL && p->busy->streak >= KV_KTIME_BUSY_CALLS;
    const int tries = busy_throughout ? 1 : KV_KTIME_MAX_TRIES;
    int clean = 0, judged_clean = 0;
    for (int attempt = 0; attempt < tries; attempt++) {
        if (attempt > 0) {
            struct timespec pause = {0, KV_KTIME_RETRY_PAUSE_NS};
            nanosleep(&pause, NULL);
        }
        int64_t wall0 = kv_now_ns(), cpu0 = kv_cpu_now_ns(), busy0 = busy_ns();
        for (int32_t i = 0; i < reps; i++) {
            int64_t a = kv_now_ns();
            call(ctx, next);
            times[i] = (double)(kv_now_ns() - a) / 1e3;
            next = next + 1 == sets ? 0 : next + 1;
        }
        int64_t wall = kv_now_ns() - wall0, busy1 = busy_ns();
        /* /proc/stat counts in ticks: a shorter pass cannot be judged, and
         * passes as clean without saying the machine is quiet */
        const int judged = busy0 >= 0 && busy1 >= 0 && wall >= KV_KTIME_CHECK_MIN_NS;
        double others = !judged ? 0.0 :
                        (double)(busy1 - busy0 - (kv_cpu_now_ns() - cpu0)) / (double)wall;
        if (others < 0.0) /* /proc/stat's ticks against the process's own clock */
            others = 0.0;
        double med = kv_stats_median(times, reps); /* sorts: times[0] is the min */
        r->passes++;
        if (times[0] < r->us_min) {
            r->us_min = times[0];
            r->us_median = med;
            r->others = others;
        }
        if (others <= KV_KTIME_MAX_OTHERS) {
            clean = 1;
            judged_clean = judged;
            break;
        }
        kv_progress("# %s: other programs used %.2f cores during timing pass %d%s\n",
                    p->label ? p->label : "kernel", others, attempt + 1,
                    attempt + 1 < tries ? ", measuring again" :
                    busy_throughout    ? " (busy throughout: one pass a configuration)" :
                                         ", keeping the best");
    }
    if (!clean) {
        r->noisy = 1;
        snprintf(r->noise_reason, sizeof r->noise_reason,
                 "other programs used %.2f cores; %d pass%s all disturbed%s", r->others,
                 (int)r->passes, r->passes == 1 ? "" : "es",
                 busy_throughout ? " (busy throughout)" : "");
    } else if (!judged_clean && busy_throughout) {
        /* nothing says this pass was spared, and the run's load says it was
         * not: beside three busy loops a fifth of ggml's rows came out
         * "clean" this way */
        r->noisy = 1;
        snprintf(r->noise_reason, sizeof r->noise_reason,
                 "pass too short to judge while other programs were busy throughout");
    }
    /* Only a pass seen to be quiet ends a streak: beside three busy loops,
     * the short hot passes of make bench's kernel part (1000 reps of a few
     * us) ended it every few configurations, and each long one after them
     * was measured four times again (463 retries, 5.0x the quiet time). */
    if (p->busy != NULL && !clean)
        p->busy->streak++;
    else if (p->busy != NULL && judged_clean)
        p->busy->streak = 0;
    kv_free(times);
    return 0;
}
