/*
 * noise.c - interference windows and their classifier (see noise.h).
 *
 * /proc/stat's first line sums every CPU: user nice system idle iowait irq
 * softirq steal. Busy is everything but idle and iowait; this process's own
 * share comes from its CPU clock, so what is left was spent by others.
 * The file is read with open/read into a stack buffer, not stdio: a window
 * opens between a measured cache's warm-up and its timed steps, where
 * nothing may allocate (docs/design.md) and a FILE's buffer would.
 */
#include "noise.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "stats.h"

void kv_noise_limits_default(struct kv_noise_limits *l)
{
    l->max_other_cores = 0.30;
    l->min_cpu_util = 0.60;
    l->max_steal = 0.05;
    l->max_nivcsw_per_s = 200.0;
    l->max_spread = 3.0;
}

double kv_noise_other_cores(const struct kv_noise_obs *o)
{
    if (o->busy_ns < 0 || o->wall_ns <= 0)
        return 0.0;
    const double doubt = (double)o->tick_ns * (double)(o->ncpu + 1);
    double other = ((double)(o->busy_ns - o->own_cpu_ns) - doubt) / (double)o->wall_ns;
    return other > 0.0 ? other : 0.0;
}

/* Appends one reason. */
static void add(char *why, size_t n, size_t *w, const char *fmt, double a, double b)
{
    if (why == NULL || *w >= n)
        return;
    if (*w > 0)
        *w += (size_t)snprintf(why + *w, n - *w, "; ");
    if (*w < n)
        *w += (size_t)snprintf(why + *w, n - *w, fmt, a, b);
}

int kv_noise_classify(const struct kv_noise_obs *o, const struct kv_noise_limits *l, char *why,
                      size_t n)
{
    size_t w = 0;
    int noisy = 0;
    if (why != NULL && n > 0)
        why[0] = '\0';
    if (o->wall_ns <= 0)
        return 0;
    const double other = kv_noise_other_cores(o);
    if (o->busy_ns >= 0 && other > l->max_other_cores) {
        add(why, n, &w, "other programs used %.2f cores (limit %.2f)", other, l->max_other_cores);
        noisy = 1;
    }
    /* Low utilisation is a sign of interference only when the cores were
     * not left idle: a step whose small ops run on one thread of two (below
     * the ops' parallel threshold, the one-layer model) has cpu_util 0.5 on
     * a quiet machine, and that is the code's own shape, not a competitor.
     * So, where /proc/stat is readable, it counts only beside other
     * programs' CPU above the noise floor; unreadable, it is all there is. */
    const double util = (double)o->own_cpu_ns /
                        ((double)o->wall_ns * (double)(o->threads > 0 ? o->threads : 1));
    const int others_ran = o->busy_ns < 0 || other > KV_NOISE_OTHER_FLOOR;
    if (util < l->min_cpu_util && others_ran) {
        add(why, n, &w, "cpu_util %.2f (limit %.2f)", util, l->min_cpu_util);
        noisy = 1;
    }
    if (o->steal_ns >= 0 && o->total_ns > 0) {
        const double steal = (double)o->steal_ns / (double)o->total_ns;
        if (steal > l->max_steal) {
            add(why, n, &w, "steal %.3f (limit %.3f)", steal, l->max_steal);
            noisy = 1;
        }
    }
    const double secs = (double)o->wall_ns / 1e9;
    const double cs = (double)o->nivcsw / secs / (double)(o->threads > 0 ? o->threads : 1);
    if (o->nivcsw > 2 && cs > l->max_nivcsw_per_s) {
        add(why, n, &w, "%.0f involuntary context switches/s per thread (limit %.0f)", cs,
            l->max_nivcsw_per_s);
        noisy = 1;
    }
    if (o->step_ns != NULL && o->n >= KV_NOISE_SPREAD_MIN_STEPS) {
        int64_t *t = malloc((size_t)o->n * sizeof *t);
        if (t != NULL) {
            memcpy(t, o->step_ns, (size_t)o->n * sizeof *t);
            const double med = (double)kv_stats_median_i64(t, o->n);
            const double p95 = (double)kv_stats_percentile_i64(t, o->n, KV_STATS_P95);
            free(t);
            if (med > 0 && p95 / med > l->max_spread) {
                add(why, n, &w, "p95/median %.2f (limit %.2f)", p95 / med, l->max_spread);
                noisy = 1;
            }
        }
    }
    return noisy;
}

/* ------------------------------------------------------------------------ */
/* Windows                                                                  */

static int64_t now_ns(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* busy, steal and total CPU time of the machine from /proc/stat (-1 each
 * when it cannot be read). */
static void machine_times(int64_t *busy, int64_t *steal, int64_t *total)
{
    *busy = *steal = *total = -1;
    const int fd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char line[512];
    ssize_t got;
    do
        got = read(fd, line, sizeof line - 1);
    while (got < 0 && errno == EINTR);
    close(fd);
    if (got <= 0)
        return;
    line[got] = '\0';
    line[strcspn(line, "\n")] = '\0'; /* the first line: the sum of every CPU */
    if (strncmp(line, "cpu ", 4) != 0)
        return;
    unsigned long long v[8] = {0};
    int k = 0;
    for (char *p = line + 4; k < 8; k++) {
        char *end;
        errno = 0;
        v[k] = strtoull(p, &end, 10);
        if (end == p || errno != 0)
            break;
        p = end;
    }
    const long tck = sysconf(_SC_CLK_TCK);
    if (k != 8 || tck <= 0)
        return;
    const double ns = 1e9 / (double)tck;
    const unsigned long long b = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    const unsigned long long t = b + v[3] + v[4];
    *busy = (int64_t)((double)b * ns);
    *steal = (int64_t)((double)v[7] * ns);
    *total = (int64_t)((double)t * ns);
}

static int64_t nivcsw_now(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? (int64_t)ru.ru_nivcsw : 0;
}

void kv_noise_begin(struct kv_noise_window *w)
{
    machine_times(&w->busy0, &w->steal0, &w->total0);
    w->nivcsw0 = nivcsw_now();
    w->cpu0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
    w->t0 = now_ns(CLOCK_MONOTONIC);
}

void kv_noise_end(const struct kv_noise_window *w, int32_t threads, struct kv_noise_obs *o)
{
    const int64_t t1 = now_ns(CLOCK_MONOTONIC);
    const int64_t cpu1 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
    int64_t busy1, steal1, total1;
    machine_times(&busy1, &steal1, &total1);
    memset(o, 0, sizeof *o);
    o->wall_ns = t1 - w->t0;
    o->own_cpu_ns = cpu1 - w->cpu0;
    o->busy_ns = busy1 >= 0 && w->busy0 >= 0 ? busy1 - w->busy0 : -1;
    o->steal_ns = steal1 >= 0 && w->steal0 >= 0 ? steal1 - w->steal0 : -1;
    o->total_ns = total1 >= 0 && w->total0 >= 0 ? total1 - w->total0 : -1;
    o->nivcsw = nivcsw_now() - w->nivcsw0;
    o->threads = threads;
    const long tck = sysconf(_SC_CLK_TCK);
    o->tick_ns = tck > 0 ? 1000000000 / tck : 0;
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    o->ncpu = cpus > 0 ? (int32_t)cpus : 1;
}
