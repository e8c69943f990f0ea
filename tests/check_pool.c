/*
 * check_pool.c - the decode step's thread team (kernels/kv_pool.h): every
 * chunk runs exactly once whatever the thread count, worker ids index
 * per-thread scratch of n_threads slots, a team thread late inside a chunk
 * sends the next calls to the caller alone, a nested call or a second
 * caller's runs alone and still completes, and a process exits (and a
 * forked child works and exits) however late its team threads start.
 */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../kernels/kv_pool.h"

#define MAX_CHUNKS 4096

struct count_job {
    _Atomic int hits[MAX_CHUNKS];
    _Atomic int bad_worker;  /* a worker id outside [0, n_threads) */
    _Atomic int by_team;     /* chunks done by worker ids > 0 */
    int n_threads;
};

static void count_chunk(void *ctx, int64_t c0, int64_t c1, int worker)
{
    struct count_job *j = ctx;
    if (worker < 0 || worker >= j->n_threads)
        atomic_store(&j->bad_worker, 1);
    if (worker > 0)
        atomic_fetch_add(&j->by_team, (int)(c1 - c0));
    for (int64_t c = c0; c < c1; c++)
        atomic_fetch_add(&j->hits[c], 1);
}

/* Runs n_chunks on n_threads, then checks each chunk ran once. */
static void run_and_check(int n_threads, int64_t n_chunks)
{
    static struct count_job j;
    memset(&j, 0, sizeof j);
    j.n_threads = n_threads < 1 ? 1 : n_threads;
    kv_pool_run(n_threads, n_chunks, count_chunk, &j);
    for (int64_t c = 0; c < MAX_CHUNKS; c++)
        ck_assert_msg(atomic_load(&j.hits[c]) == (c < n_chunks ? 1 : 0),
                      "threads %d, chunks %lld: chunk %lld ran %d times", n_threads,
                      (long long)n_chunks, (long long)c, atomic_load(&j.hits[c]));
    ck_assert_msg(!atomic_load(&j.bad_worker), "a worker id outside [0, %d)", n_threads);
}

START_TEST(test_each_chunk_once)
{
    static const int threads[] = {0, 1, 2, 3, 8, 200};
    static const int64_t chunks[] = {-5, 0, 1, 2, 3, 64, 1000, MAX_CHUNKS};
    for (size_t t = 0; t < sizeof threads / sizeof *threads; t++)
        for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++)
            for (int rep = 0; rep < 20; rep++)
                run_and_check(threads[t], chunks[c]);
}
END_TEST

/* Back-to-back calls with tiny chunks: a thread still finishing one call
 * must never take a chunk of the next (the generation in the claim word). */
START_TEST(test_back_to_back)
{
    struct kv_pool_stats s0, s1;
    kv_pool_stats_get(&s0);
    for (int rep = 0; rep < 1000; rep++)
        run_and_check(2 + rep % 3, 1 + rep % 17);
    kv_pool_stats_get(&s1);
    ck_assert_int_ge(s1.chunks - s0.chunks, 0);
    ck_assert_int_le(s1.chunks_by_caller - s0.chunks_by_caller, s1.chunks - s0.chunks);
}
END_TEST

START_TEST(test_threads_capped)
{
    ck_assert_int_eq(kv_pool_threads(0), 1);
    ck_assert_int_eq(kv_pool_threads(-3), 1);
    ck_assert_int_eq(kv_pool_threads(1), 1);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    ck_assert_int_le(kv_pool_threads(1 << 20), online > KV_POOL_MAX ? KV_POOL_MAX : online);
    ck_assert_int_ge(kv_pool_threads(1 << 20), 1);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* A team thread preempted inside a chunk                                   */

/* A team thread's chunk takes 20 ms (as if it lost its CPU), the caller's
 * a microsecond; the caller's first chunk waits (up to 100 ms) until a team
 * thread has claimed one, or the caller would do all 64 before a team
 * thread woke. */
static _Atomic int team_claimed;

static void slow_team_chunk(void *ctx, int64_t c0, int64_t c1, int worker)
{
    count_chunk(ctx, c0, c1, worker);
    if (worker > 0) {
        atomic_store(&team_claimed, 1);
        struct timespec d = {0, 20000000};
        nanosleep(&d, NULL);
    } else if (c0 == 0) {
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do
            clock_gettime(CLOCK_MONOTONIC, &t);
        while (!atomic_load(&team_claimed) &&
               (t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 100000000L);
    }
}

START_TEST(test_late_team_backs_off)
{
    static struct count_job j;
    if (kv_pool_threads(2) < 2)
        return; /* one CPU: there is no team to be late */
    struct kv_pool_stats s0, s1, s2;
    kv_pool_stats_get(&s0);
    /* until a team thread claims a chunk (it may not wake in time) */
    for (int i = 0; i < 500; i++) {
        memset(&j, 0, sizeof j);
        j.n_threads = 2;
        atomic_store(&team_claimed, 0);
        kv_pool_run(2, 64, slow_team_chunk, &j);
        kv_pool_stats_get(&s1);
        if (s1.late_runs > s0.late_runs)
            break;
    }
    ck_assert_msg(s1.late_runs == s0.late_runs + 1, "no late call seen in 500 tries");
    /* the next KV_POOL_SOLO_MIN calls run on the caller alone */
    for (int i = 0; i < KV_POOL_SOLO_MIN; i++) {
        memset(&j, 0, sizeof j);
        j.n_threads = 2;
        kv_pool_run(2, 64, slow_team_chunk, &j);
        ck_assert_int_eq(atomic_load(&j.by_team), 0);
        for (int c = 0; c < 64; c++)
            ck_assert_int_eq(atomic_load(&j.hits[c]), 1);
    }
    kv_pool_stats_get(&s2);
    ck_assert_int_eq(s2.solo_runs - s1.solo_runs, KV_POOL_SOLO_MIN);
    ck_assert_int_eq(s2.runs, s1.runs);
    /* then the team is asked again */
    run_and_check(2, 64);
    kv_pool_stats_get(&s2);
    ck_assert_int_eq(s2.runs, s1.runs + 1);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Nested and concurrent calls                                              */

struct nest_job {
    struct count_job inner[8];
    _Atomic int inner_on_team; /* an inner call that used a worker id > 0 */
};

static void nest_chunk(void *ctx, int64_t c0, int64_t c1, int worker)
{
    struct nest_job *n = ctx;
    (void)worker;
    for (int64_t c = c0; c < c1; c++) {
        struct count_job *in = &n->inner[c];
        in->n_threads = 4;
        kv_pool_run(4, 50, count_chunk, in);
        if (atomic_load(&in->by_team) != 0)
            atomic_store(&n->inner_on_team, 1);
    }
}

START_TEST(test_nested_runs_alone)
{
    static struct nest_job n;
    memset(&n, 0, sizeof n);
    kv_pool_run(4, 8, nest_chunk, &n);
    for (int i = 0; i < 8; i++)
        for (int c = 0; c < 50; c++)
            ck_assert_int_eq(atomic_load(&n.inner[i].hits[c]), 1);
    ck_assert_msg(!atomic_load(&n.inner_on_team), "a nested call used the team");
}
END_TEST

static void *second_caller(void *arg)
{
    (void)arg;
    for (int rep = 0; rep < 500; rep++)
        run_and_check(2, 37);
    return NULL;
}

/* run_and_check's job is static, so the two callers use their own */
static void *own_caller(void *arg)
{
    struct count_job *j = arg;
    for (int rep = 0; rep < 500; rep++) {
        memset(j, 0, sizeof *j);
        j->n_threads = 2;
        kv_pool_run(2, 41, count_chunk, j);
        for (int c = 0; c < 41; c++)
            if (atomic_load(&j->hits[c]) != 1)
                return (void *)1;
    }
    return NULL;
}

START_TEST(test_two_callers)
{
    static struct count_job mine;
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, second_caller, NULL), 0);
    void *bad = own_caller(&mine);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_msg(bad == NULL, "a chunk of the main thread's calls ran other than once");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Exit and fork                                                            */

/* A child that starts a team and exits at once: its last team thread may
 * first run after exit() asked the team to stop (it used to wait forever). */
static int child_exits(int use_after_fork)
{
    pid_t pid = fork();
    if (pid == 0) {
        struct count_job *j = calloc(1, sizeof *j);
        if (j == NULL)
            _exit(3);
        j->n_threads = KV_POOL_MAX;
        kv_pool_run(KV_POOL_MAX, use_after_fork ? 256 : 2, count_chunk, j);
        for (int c = 0; c < (use_after_fork ? 256 : 2); c++)
            if (atomic_load(&j->hits[c]) != 1)
                exit(2);
        free(j);
        exit(0);
    }
    if (pid < 0)
        return -1;
    for (int ms = 0; ms < 20000; ms++) {
        int st;
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
        struct timespec d = {0, 1000000};
        nanosleep(&d, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return 99; /* hung */
}

START_TEST(test_exit_and_fork)
{
    /* this process has a team now; children inherit none of its threads */
    run_and_check(2, 100);
    for (int i = 0; i < 40; i++) {
        int rc = child_exits(i % 2);
        ck_assert_msg(rc == 0, "child %d: %s (%d)", i,
                      rc == 99 ? "hung at exit" : "wrong chunks or crashed", rc);
    }
    run_and_check(2, 100); /* and the parent's team still works */
}
END_TEST

static Suite *pool_suite(void)
{
    Suite *s = suite_create("pool");
    TCase *tc = tcase_create("pool");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_each_chunk_once);
    tcase_add_test(tc, test_back_to_back);
    tcase_add_test(tc, test_threads_capped);
    tcase_add_test(tc, test_late_team_backs_off);
    tcase_add_test(tc, test_nested_runs_alone);
    tcase_add_test(tc, test_two_callers);
    tcase_add_test(tc, test_exit_and_fork);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(pool_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
