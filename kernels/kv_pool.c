/*
 * kv_pool.c - the decode step's thread team (see kv_pool.h for why).
 *
 * One team per process, started on first use and stopped at exit. A call
 * publishes a job (fn, ctx, chunk count, threads) and the chunks are handed
 * out by one 64-bit word, `state` = generation << 32 | next chunk: a claim
 * is a compare-and-swap that succeeds only while the word still names the
 * job the claimer read, so a thread that wakes late can never take a chunk
 * of the next job with the previous job's function. The job is kept in one
 * of two slots (generation & 1): a slot is rewritten two jobs later, after
 * the word has moved on, which the claim's compare-and-swap detects.
 */
/* glibc declares sched_getaffinity and CPU_COUNT only for GNU sources */
#define _GNU_SOURCE // NOLINT(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp)
#include "kv_pool.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* ------------------------------------------------------------------------ */
/* The team's shared state                                                  */

struct job {
    _Atomic(kv_pool_fn) fn;
    _Atomic(void *) ctx;
    _Atomic int64_t n_chunks;
    _Atomic int n_threads;
};

static struct {
    _Atomic uint64_t state;     /* generation << 32 | next chunk to claim */
    struct job slot[2];         /* the job of generation g is slot[g & 1] */
    _Atomic uint32_t gen;       /* the generation alone: team threads sleep on it */
    _Atomic uint32_t done;      /* chunks of the current job finished */
    _Atomic int sleepers;       /* team threads asleep (or about to be) on gen */
    _Atomic int caller_asleep;  /* the caller sleeps on done */
    _Atomic int busy;           /* a call is running: others run alone */
    _Atomic int stopping;
    int n_team;                 /* team threads started (worker ids 1..n_team) */
    pthread_t thread[KV_POOL_MAX];
    int cpus;                   /* CPUs this process may run on (0: not asked yet) */
    int exit_hook;
    /* the caller-alone backoff (kv_pool.h), touched only by the caller that
     * holds busy: calls left to run alone, and the length of the next spell */
    int64_t solo_left, solo_next;
    struct kv_pool_stats stats; /* written by the caller that holds busy */
} P;

/* Inside a chunk: a nested call runs alone. */
static _Thread_local int in_chunk;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void futex_wait(_Atomic uint32_t *w, uint32_t expected)
{
    /* returns at once when *w != expected; spurious wake-ups are re-checked */
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *w)
{
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* ------------------------------------------------------------------------ */
/* Claiming and doing chunks                                                */

/* The next chunk of generation g, or -1 when the job has none left or the
 * word has moved on to another job. */
static int64_t claim(uint32_t g, int64_t n_chunks)
{
    uint64_t s = atomic_load_explicit(&P.state, memory_order_acquire);
    for (;;) {
        if ((uint32_t)(s >> 32) != g || (int64_t)(s & 0xffffffffu) >= n_chunks)
            return -1;
        if (atomic_compare_exchange_weak_explicit(&P.state, &s, s + 1, memory_order_acq_rel,
                                                  memory_order_acquire))
            return (int64_t)(s & 0xffffffffu);
    }
}

/* Claim and run chunks of generation g until none is left; the count done. */
static int64_t work(uint32_t g, const struct job *j, int worker)
{
    kv_pool_fn fn = atomic_load_explicit(&j->fn, memory_order_acquire);
    void *ctx = atomic_load_explicit(&j->ctx, memory_order_acquire);
    int64_t n = atomic_load_explicit(&j->n_chunks, memory_order_acquire);
    if (worker >= atomic_load_explicit(&j->n_threads, memory_order_acquire))
        return 0;
    int64_t c, done = 0;
    in_chunk = 1;
    while ((c = claim(g, n)) >= 0) {
        fn(ctx, c, c + 1, worker);
        done++;
    }
    in_chunk = 0;
    return done;
}

/* ------------------------------------------------------------------------ */
/* Team threads                                                             */

/* Wait until the generation differs from `seen`: spin, then sleep. */
static uint32_t wait_new_gen(uint32_t seen)
{
    uint32_t g;
    const int64_t t0 = now_ns();
    for (unsigned i = 1;; i++) {
        if ((g = atomic_load_explicit(&P.gen, memory_order_acquire)) != seen ||
            atomic_load_explicit(&P.stopping, memory_order_relaxed))
            return g;
        cpu_relax();
        if (i % 64 == 0 && now_ns() - t0 > KV_POOL_SPIN_NS)
            break;
    }
    atomic_fetch_add(&P.sleepers, 1);
    /* (stopping is checked too: a thread that first runs after stop_team
     * bumped the generation has that generation as `seen`) */
    while ((g = atomic_load(&P.gen)) == seen && !atomic_load(&P.stopping))
        futex_wait(&P.gen, seen);
    atomic_fetch_sub(&P.sleepers, 1);
    return g;
}

static void *team_main(void *arg)
{
    const int worker = (int)(intptr_t)arg;
    /* (a thread that starts after a call was published sits that one out) */
    uint32_t g = atomic_load(&P.gen);
    for (;;) {
        g = wait_new_gen(g);
        if (atomic_load(&P.stopping))
            return NULL;
        int64_t k = work(g, &P.slot[g & 1], worker);
        if (k > 0) {
            int64_t n = atomic_load_explicit(&P.slot[g & 1].n_chunks, memory_order_relaxed);
            if ((int64_t)atomic_fetch_add(&P.done, (uint32_t)k) + k == n &&
                atomic_load(&P.caller_asleep))
                futex_wake(&P.done);
        }
    }
}

/* A forked child has the parent's memory but none of its team threads: it
 * starts with no team (calls run alone until one is started again). */
static void forget_team(void)
{
    P.n_team = 0;
    atomic_store(&P.busy, 0);
    atomic_store(&P.sleepers, 0);
    atomic_store(&P.caller_asleep, 0);
}

static void stop_team(void)
{
    atomic_store(&P.stopping, 1);
    atomic_fetch_add(&P.gen, 1);
    futex_wake(&P.gen);
    for (int i = 0; i < P.n_team; i++)
        pthread_join(P.thread[i], NULL);
    P.n_team = 0;
}

/* Start team threads up to ids 1..want; the number running. Signals stay
 * with the threads the program made (a SIGINT handler runs there). */
static int grow_team(int want)
{
    if (want > KV_POOL_MAX - 1)
        want = KV_POOL_MAX - 1;
    if (P.n_team >= want)
        return P.n_team;
    if (!P.exit_hook) {
        if (atexit(stop_team) != 0 || pthread_atfork(NULL, NULL, forget_team) != 0)
            return P.n_team;
        P.exit_hook = 1;
    }
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    while (P.n_team < want &&
           pthread_create(&P.thread[P.n_team], NULL, team_main,
                          (void *)(intptr_t)(P.n_team + 1)) == 0)
        P.n_team++;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return P.n_team;
}

/* ------------------------------------------------------------------------ */
/* The call                                                                 */

int kv_pool_threads(int n_threads)
{
    if (P.cpus == 0) {
        cpu_set_t set;
        int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
        P.cpus = n > 0 ? n : 1; /* (a benign race: every thread finds the same) */
    }
    int n = n_threads < P.cpus ? n_threads : P.cpus;
    if (n > KV_POOL_MAX)
        n = KV_POOL_MAX;
    return n < 1 ? 1 : n;
}

void kv_pool_run(int n_threads, int64_t n_chunks, kv_pool_fn fn, void *ctx)
{
    if (n_chunks <= 0 || fn == NULL)
        return;
    int zero = 0;
    int nt = kv_pool_threads(n_threads);
    if (nt <= 1 || n_chunks <= 1 || n_chunks > INT32_MAX || in_chunk ||
        !atomic_compare_exchange_strong(&P.busy, &zero, 1)) {
        fn(ctx, 0, n_chunks, 0);
        return;
    }
    const int team = grow_team(nt - 1);
    if (team < nt - 1)
        nt = 1 + team;
    if (nt <= 1 || P.solo_left > 0) {
        if (nt > 1) {
            P.solo_left--;
            P.stats.solo_runs++;
        }
        atomic_store(&P.busy, 0);
        fn(ctx, 0, n_chunks, 0);
        return;
    }

    /* publish: the slot, then the word that lets chunks be claimed */
    const uint32_t g = atomic_load_explicit(&P.gen, memory_order_relaxed) + 1;
    struct job *j = &P.slot[g & 1];
    atomic_store_explicit(&j->fn, fn, memory_order_release);
    atomic_store_explicit(&j->ctx, ctx, memory_order_release);
    atomic_store_explicit(&j->n_chunks, n_chunks, memory_order_release);
    atomic_store_explicit(&j->n_threads, nt, memory_order_release);
    atomic_store(&P.done, 0);
    atomic_store(&P.state, (uint64_t)g << 32);
    atomic_store(&P.gen, g);
    if (atomic_load(&P.sleepers) > 0)
        futex_wake(&P.gen);

    const int64_t w0 = now_ns();
    const int64_t mine = work(g, j, 0);
    const int64_t t0 = now_ns();
    uint32_t d = atomic_fetch_add(&P.done, (uint32_t)mine) + (uint32_t)mine;
    int late = 0;
    if ((int64_t)d < n_chunks) { /* chunks another thread claimed are still running */
        for (unsigned i = 1; (int64_t)atomic_load(&P.done) < n_chunks; i++) {
            cpu_relax();
            if (i % 64 == 0 && now_ns() - t0 > KV_POOL_SPIN_NS) {
                atomic_store(&P.caller_asleep, 1);
                while ((int64_t)(d = atomic_load(&P.done)) < n_chunks)
                    futex_wait(&P.done, d);
                atomic_store(&P.caller_asleep, 0);
                break;
            }
        }
        const int64_t waited = now_ns() - t0;
        P.stats.wait_ns += waited;
        /* a chunk takes about what the caller's own took; waiting far longer
         * means the thread that claimed it lost its CPU inside it */
        late = waited > KV_POOL_LATE_FACTOR * (t0 - w0) / (mine > 0 ? mine : 1) + KV_POOL_SPIN_NS;
    }
    if (late) {
        P.solo_next = P.solo_next > 0 ? P.solo_next * 2 : KV_POOL_SOLO_MIN;
        if (P.solo_next > KV_POOL_SOLO_MAX)
            P.solo_next = KV_POOL_SOLO_MAX;
        P.solo_left = P.solo_next;
        P.stats.late_runs++;
    } else {
        P.solo_next /= 2;
    }
    P.stats.runs++;
    P.stats.chunks += n_chunks;
    P.stats.chunks_by_caller += mine;
    atomic_store(&P.busy, 0);
}

void kv_pool_run_rows(int n_threads, int64_t rows, double work_per_row, double min_work,
                      int64_t *rows_per_chunk, kv_pool_fn fn, void *ctx)
{
    if (rows <= 0 || fn == NULL || rows_per_chunk == NULL)
        return;
    if ((double)rows * work_per_row < min_work) {
        *rows_per_chunk = rows;
        fn(ctx, 0, 1, 0);
        return;
    }
    const double per = min_work / 4 / (work_per_row > 1 ? work_per_row : 1);
    *rows_per_chunk = per < 1 ? 1 : per > (double)rows ? rows : (int64_t)per;
    kv_pool_run(n_threads, (rows + *rows_per_chunk - 1) / *rows_per_chunk, fn, ctx);
}

void kv_pool_stats_get(struct kv_pool_stats *out)
{
    if (out != NULL)
        *out = P.stats;
}

void kv_pool_stats_reset(void)
{
    P.stats = (struct kv_pool_stats){0};
}
