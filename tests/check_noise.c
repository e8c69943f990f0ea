/*
 * check_noise.c - the interference classifier (bench/measure/noise.c) on synthetic
 * observations, and the bootstrap interval of the median (bench/measure/stats.c).
 *
 * The observations are what a window would record in the cases that
 * matter: a quiet machine (short and long windows, /proc/stat's tick doubt
 * included), a competitor taking a core, a starved process, hypervisor
 * steal, a storm of involuntary switches, and steps whose spread alone
 * gives interference away; and one real window, to see it reads the
 * machine's counters. Then the kernel timing protocol's memory across
 * calls (bench/measure/kernel_timing.c) on a fake machine that is busy or
 * quiet on demand.
 */
#include <check.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "../bench/measure/kernel_timing.h"
#include "../bench/measure/noise.h"
#include "../bench/measure/stats.h"

#define MS 1000000LL

/* A quiet 2-core machine: 1 thread, 200 ms window, 0.02 cores of daemons. */
static struct kv_noise_obs quiet(void)
{
    return (struct kv_noise_obs){.wall_ns = 200 * MS, .own_cpu_ns = 198 * MS,
                                 .busy_ns = 202 * MS, .steal_ns = 0, .total_ns = 400 * MS,
                                 .nivcsw = 1, .tick_ns = 10 * MS, .threads = 1, .ncpu = 2};
}

static int noisy(const struct kv_noise_obs *o, char *why)
{
    struct kv_noise_limits l;
    kv_noise_limits_default(&l);
    return kv_noise_classify(o, &l, why, 256);
}

START_TEST(test_quiet_is_clean)
{
    char why[256];
    struct kv_noise_obs o = quiet();
    ck_assert_msg(!noisy(&o, why), "quiet flagged: %s", why);
    ck_assert_str_eq(why, "");
    /* a 20 ms window whose busy time is a few ticks off: the tick doubt covers it */
    o.wall_ns = 20 * MS;
    o.own_cpu_ns = 19 * MS;
    o.busy_ns = 40 * MS; /* two ticks more than own */
    o.total_ns = 40 * MS;
    ck_assert_msg(!noisy(&o, why), "tick quantisation flagged: %s", why);
}
END_TEST

START_TEST(test_competitor_core)
{
    char why[256];
    struct kv_noise_obs o = quiet();
    o.busy_ns = o.own_cpu_ns + 190 * MS; /* another program ran a core all along */
    ck_assert(noisy(&o, why));
    ck_assert_msg(strstr(why, "other programs used") != NULL, "%s", why);
}
END_TEST

START_TEST(test_starved)
{
    char why[256];
    struct kv_noise_obs o = quiet();
    o.threads = 2;
    o.own_cpu_ns = 160 * MS; /* two threads got 0.4 of their time */
    o.busy_ns = -1;          /* /proc/stat unreadable: utilisation alone says it */
    ck_assert(noisy(&o, why));
    ck_assert_msg(strstr(why, "cpu_util 0.40") != NULL, "%s", why);
}
END_TEST

/* Two threads, one of them idle through serial ops, on an otherwise idle
 * machine: cpu_util 0.5 is the code's own shape, not interference. */
START_TEST(test_serial_code_on_idle_machine)
{
    char why[256];
    struct kv_noise_obs o = quiet();
    o.threads = 2;
    o.own_cpu_ns = 200 * MS; /* one core's worth of two asked for */
    o.busy_ns = 202 * MS;    /* nobody else ran */
    ck_assert_msg(!noisy(&o, why), "serial code flagged: %s", why);
    o.busy_ns = 200 * MS + 60 * MS + 30 * MS; /* 0.15 cores of others past the doubt */
    ck_assert(noisy(&o, why));
    ck_assert_msg(strstr(why, "cpu_util 0.50") != NULL, "%s", why);
}
END_TEST

START_TEST(test_steal_and_switches)
{
    char why[256];
    struct kv_noise_obs o = quiet();
    o.steal_ns = 40 * MS; /* 10% of the machine's time */
    ck_assert(noisy(&o, why));
    ck_assert_msg(strstr(why, "steal") != NULL, "%s", why);
    o = quiet();
    o.nivcsw = 60; /* 300/s */
    ck_assert(noisy(&o, why));
    ck_assert_msg(strstr(why, "involuntary") != NULL, "%s", why);
    o.nivcsw = 2; /* a couple: a kernel thread, not a competitor */
    ck_assert(!noisy(&o, why));
}
END_TEST

START_TEST(test_spread)
{
    char why[256];
    /* 20 steps of 10-11 ns with two slow ones: the p95 (the 19th) is 40 */
    int64_t steps[KV_NOISE_SPREAD_MIN_STEPS];
    for (int i = 0; i < KV_NOISE_SPREAD_MIN_STEPS; i++)
        steps[i] = 10 + i % 2;
    steps[7] = steps[19] = 40;
    struct kv_noise_obs o = quiet();
    o.step_ns = steps;
    o.n = KV_NOISE_SPREAD_MIN_STEPS;
    ck_assert(noisy(&o, why));
    ck_assert_msg(strstr(why, "p95/median 4.00") != NULL, "%s", why);
    /* one slow step alone is the code's own (a dynamic cache doubling in the
     * timed steps): the p95 is the second largest, and the row is clean */
    steps[7] = 11;
    ck_assert_msg(!noisy(&o, why), "one slow step flagged: %s", why);
    ck_assert_int_eq(steps[19], 40); /* the caller's steps are not reordered */
    /* too few steps for a spread: p95 would be the largest, not judged */
    steps[7] = 100;
    o.n = KV_NOISE_SPREAD_MIN_STEPS - 1;
    steps[3] = 100;
    ck_assert_msg(!noisy(&o, why), "few steps flagged: %s", why);
}
END_TEST

START_TEST(test_reasons_accumulate)
{
    char why[256];
    struct kv_noise_obs o = quiet();
    o.threads = 2;
    o.own_cpu_ns = 160 * MS;
    o.busy_ns = 400 * MS; /* the rest of the machine was busy too */
    ck_assert(noisy(&o, why));
    ck_assert_msg(strstr(why, "other programs") != NULL && strstr(why, "; cpu_util") != NULL,
                  "%s", why);
}
END_TEST

/* A real window around some work: /proc/stat is read (its counters known,
 * total >= busy), the process's own CPU time and the window's length are
 * positive; no figure is judged against a time. */
START_TEST(test_window_reads_the_machine)
{
    struct kv_noise_window w;
    struct kv_noise_obs o;
    kv_noise_begin(&w);
    volatile double x = 0.0;
    for (int i = 0; i < 2000000; i++)
        x = x + 1e-9 * i;
    kv_noise_end(&w, 3, &o);
    ck_assert_int_gt(o.wall_ns, 0);
    ck_assert_int_gt(o.own_cpu_ns, 0);
    ck_assert_msg(o.busy_ns >= 0 && o.total_ns >= o.busy_ns && o.steal_ns >= 0,
                  "/proc/stat not read: busy %lld total %lld steal %lld", (long long)o.busy_ns,
                  (long long)o.total_ns, (long long)o.steal_ns);
    ck_assert_int_ge(o.nivcsw, 0);
    ck_assert_int_gt(o.tick_ns, 0);
    ck_assert_int_ge(o.ncpu, 1);
    ck_assert_int_eq(o.threads, 3);
    ck_assert(o.step_ns == NULL && o.n == 0);
}
END_TEST

/* ---- bootstrap interval ------------------------------------------------------ */

START_TEST(test_ci_brackets_the_median)
{
    int64_t x[101];
    uint64_t s = 7;
    for (int i = 0; i < 101; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = 1000 + (int64_t)(s >> 54); /* 1000 .. 2023 */
    }
    int64_t copy[101];
    memcpy(copy, x, sizeof x);
    int64_t lo, hi, lo2, hi2;
    ck_assert_int_eq(kv_stats_median_ci_i64(x, 101, 500, 1, 0.95, &lo, &hi), 0);
    ck_assert_mem_eq(x, copy, sizeof x); /* x left as it was */
    const int64_t med = kv_stats_median_i64(copy, 101);
    ck_assert_msg(lo <= med && med <= hi && lo < hi, "%ld <= %ld <= %ld", (long)lo, (long)med,
                  (long)hi);
    /* a uniform spread of 1024 over 101 values: the interval is far narrower */
    ck_assert_int_lt(hi - lo, 400);
    /* reproducible */
    ck_assert_int_eq(kv_stats_median_ci_i64(x, 101, 500, 1, 0.95, &lo2, &hi2), 0);
    ck_assert(lo == lo2 && hi == hi2);
    /* a constant series has a zero-width interval */
    for (int i = 0; i < 101; i++)
        x[i] = 5;
    ck_assert_int_eq(kv_stats_median_ci_i64(x, 101, 200, 1, 0.95, &lo, &hi), 0);
    ck_assert(lo == 5 && hi == 5);
    ck_assert_int_eq(kv_stats_median_ci_i64(x, 0, 200, 1, 0.95, &lo, &hi), -1);
    ck_assert_int_eq(kv_stats_median_ci_i64(x, 5, 200, 1, 1.0, &lo, &hi), -1);
}
END_TEST

/* ---- the kernel timing protocol under a competitor that never stops ---- */

static int fake_disturbed;
static int64_t fake_busy_total;

/* the machine's busy time as kv_ktime_run reads it: while "disturbed",
 * other programs took far more than a core between any two reads */
static int64_t fake_busy_ns(void)
{
    if (fake_disturbed)
        fake_busy_total += 1000000 * MS;
    return fake_busy_total;
}

/* 11 ms a call: 5 calls make a pass long enough to be judged
 * (KV_KTIME_CHECK_MIN_NS) */
static void sleepy_call(void *ctx, int32_t set)
{
    (void)ctx;
    (void)set;
    const struct timespec ts = {0, 11 * MS};
    nanosleep(&ts, NULL);
}

/* 1 ms a call: 5 calls make a pass too short to be judged */
static void quick_call(void *ctx, int32_t set)
{
    (void)ctx;
    (void)set;
    const struct timespec ts = {0, MS};
    nanosleep(&ts, NULL);
}

static int32_t passes_of(struct kv_ktime_busy *busy)
{
    struct kv_ktime_params p = {.reps = 5, .n_sets = 1, .label = "check_noise",
                                .busy = busy, .machine_busy_ns = fake_busy_ns};
    struct kv_ktime_result r;
    ck_assert_int_eq(kv_ktime_run(&r, &p, sleepy_call, NULL), 0);
    ck_assert(r.us_min >= 11000.0 && r.us_min <= r.us_median);
    /* disturbed in every pass: kept, and marked with the reason */
    ck_assert_int_eq(r.noisy, fake_disturbed);
    ck_assert_int_eq(r.noise_reason[0] != '\0', fake_disturbed);
    if (fake_disturbed) {
        ck_assert_ptr_nonnull(strstr(r.noise_reason, "other programs used"));
        ck_assert_ptr_null(strchr(r.noise_reason, ',')); /* a CSV field */
    }
    return r.passes;
}

START_TEST(test_ktime_busy_throughout)
{
    struct kv_ktime_busy busy = {0};
    /* a quiet start: the run's first look at the machine finds it idle */
    fake_disturbed = 0;
    ck_assert_int_eq(passes_of(&busy), 1);
    ck_assert_int_eq(busy.streak, 0);
    fake_disturbed = 1;
    /* a burst: measured again, as long as it might end */
    for (int i = 0; i < KV_KTIME_BUSY_CALLS; i++)
        ck_assert_int_eq(passes_of(&busy), KV_KTIME_MAX_TRIES);
    ck_assert_int_eq(busy.streak, KV_KTIME_BUSY_CALLS);
    /* busy throughout: one pass a call, no pauses */
    ck_assert_int_eq(passes_of(&busy), 1);
    ck_assert_int_eq(passes_of(&busy), 1);
    /* a pass too short to be judged does not end the streak, and is marked
     * by it: nothing says the pass was spared */
    const int32_t streak = busy.streak;
    struct kv_ktime_params qp = {.reps = 5, .n_sets = 1, .label = "check_noise",
                                 .busy = &busy, .machine_busy_ns = fake_busy_ns};
    struct kv_ktime_result qr;
    ck_assert_int_eq(kv_ktime_run(&qr, &qp, quick_call, NULL), 0);
    ck_assert_int_eq(qr.passes, 1);
    ck_assert_int_eq(qr.noisy, 1);
    ck_assert_ptr_nonnull(strstr(qr.noise_reason, "too short to judge"));
    ck_assert_int_eq(busy.streak, streak);
    ck_assert_int_eq(passes_of(&busy), 1);
    /* quiet again: a clean pass ends the streak ... */
    fake_disturbed = 0;
    ck_assert_int_eq(passes_of(&busy), 1);
    ck_assert_int_eq(busy.streak, 0);
    /* ... after which a short pass is not marked */
    ck_assert_int_eq(kv_ktime_run(&qr, &qp, quick_call, NULL), 0);
    ck_assert_int_eq(qr.noisy, 0);
    ck_assert_int_eq(busy.streak, 0);
    /* ... so the next burst is measured again */
    fake_disturbed = 1;
    ck_assert_int_eq(passes_of(&busy), KV_KTIME_MAX_TRIES);
    /* a call that shares nothing always measures again */
    ck_assert_int_eq(passes_of(NULL), KV_KTIME_MAX_TRIES);
}
END_TEST

/* a run that starts on a busy machine (make bench times the kernel in many
 * processes) is busy throughout from its first call, and says so */
START_TEST(test_ktime_busy_from_the_start)
{
    struct kv_ktime_busy busy = {0};
    fake_disturbed = 1;
    ck_assert_int_eq(passes_of(&busy), 1);
    ck_assert_int_eq(busy.probed, 1);
    ck_assert_int_eq(busy.streak, KV_KTIME_BUSY_CALLS + 1);
    /* it ends as any streak ends: at a clean pass */
    fake_disturbed = 0;
    ck_assert_int_eq(passes_of(&busy), 1);
    ck_assert_int_eq(busy.streak, 0);
    fake_disturbed = 1;
    ck_assert_int_eq(passes_of(&busy), KV_KTIME_MAX_TRIES);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("noise");
    TCase *tc = tcase_create("classifier");
    tcase_add_test(tc, test_quiet_is_clean);
    tcase_add_test(tc, test_competitor_core);
    tcase_add_test(tc, test_starved);
    tcase_add_test(tc, test_serial_code_on_idle_machine);
    tcase_add_test(tc, test_steal_and_switches);
    tcase_add_test(tc, test_spread);
    tcase_add_test(tc, test_reasons_accumulate);
    tcase_add_test(tc, test_window_reads_the_machine);
    tcase_add_test(tc, test_ci_brackets_the_median);
    suite_add_tcase(s, tc);
    TCase *tk = tcase_create("kernel_timing");
    tcase_set_timeout(tk, 60);
    tcase_add_test(tk, test_ktime_busy_throughout);
    tcase_add_test(tk, test_ktime_busy_from_the_start);
    suite_add_tcase(s, tk);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
