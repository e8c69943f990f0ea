/*
 * kv_pool.h - the thread team of the decode step: work cut into chunks that
 * any team thread claims, and a call that returns when every chunk is done,
 * whoever did it.
 *
 * The design decision that matters: no thread ever waits for another thread
 * to *arrive*. An OpenMP parallel region ends in a barrier every thread of
 * its team must reach, and a decode step of the default model has about 40
 * of them (7 GEMVs and 3 attention loops per layer). On a machine where
 * other programs compete for the cores, a team thread the scheduler has not
 * run yet holds the others at each barrier for up to a time slice, and the
 * 2-thread step took 3-5x the quiet 1-thread step with three CPU-bound
 * competitors (docs/performance.md, "Threads under load", has the
 * measurements). Here a thread that gets no CPU claims no chunk and delays
 * nothing: the caller, which claims chunks too, does the work alone, so the
 * step degrades towards the 1-thread step instead of collapsing. Only a
 * chunk a thread claimed and was then preempted in can hold the caller.
 *
 * That one case is watched: when the caller waits for a claimed chunk far
 * longer than its own chunks took (KV_POOL_LATE_FACTOR times, plus the spin
 * time), the next calls run on the caller alone, KV_POOL_SOLO_MIN of them,
 * doubling with each late call up to KV_POOL_SOLO_MAX and halving with each
 * call on time. On a machine whose CPUs are taken the step so settles on
 * one thread, and it returns to the team with the first call that finds a
 * team thread on time.
 *
 * Reading the run queue instead (/proc/loadavg, `make -l`'s rule: at most
 * the CPUs other runnable threads leave) was built and measured, and
 * removed: under CFS each runnable thread earns a share, so a 2-thread
 * step that gave up its second thread beside three busy loops on two CPUs
 * got half a CPU instead of 0.8 and ran slower (docs/performance.md).
 *
 * Waiting is bounded: a team thread with nothing to do spins for
 * KV_POOL_SPIN_NS (the gaps between the GEMVs of a step are shorter), then
 * sleeps on a futex; the caller waiting for the last chunks spins as long,
 * then sleeps too, so neither burns a CPU another program or thread needs.
 * The team is capped at the CPUs this process may run on
 * (sched_getaffinity): under `taskset -c 0`, two threads would only take
 * turns.
 */
#ifndef KV_POOL_H
#define KV_POOL_H

#include <stdint.h>

/* How long an idle thread spins before it sleeps (ns). */
#define KV_POOL_SPIN_NS 100000
/* The caller-alone backoff after a late team call (see above). */
#define KV_POOL_LATE_FACTOR 4
#define KV_POOL_SOLO_MIN 8
#define KV_POOL_SOLO_MAX 4096
/* Most threads a call can use (the caller and KV_POOL_MAX - 1 others). */
#define KV_POOL_MAX 64

/* One piece of a call's work: chunks [c0, c1) (a claim is one chunk, so
 * c1 = c0 + 1 except on the caller-alone path, which passes them all).
 * `worker` is 0 for the calling thread and 1 .. n_threads-1 for the team:
 * an index into per-thread scratch of n_threads slots. */
typedef void (*kv_pool_fn)(void *ctx, int64_t c0, int64_t c1, int worker);

/*
 * Run fn over chunks [0, n_chunks) with up to n_threads threads (the caller
 * among them) and return when all are done; each chunk runs exactly once.
 * Runs fn(ctx, 0, n_chunks, 0) on the caller alone when n_threads <= 1,
 * n_chunks <= 1, n_chunks > INT32_MAX, when called from inside a chunk
 * (nested) or while another thread's call is running, and when no team
 * thread can be started. n_chunks <= 0 does nothing.
 */
void kv_pool_run(int n_threads, int64_t n_chunks, kv_pool_fn fn, void *ctx);

/*
 * Rows of equal work as chunks: runs fn once on the caller with all rows
 * as one chunk when rows * work_per_row < min_work (the team would cost
 * more than it saves), else in chunks of about min_work / 4 each. Writes
 * the rows a chunk holds to *rows_per_chunk (which fn reads from its ctx)
 * before fn first runs.
 */
void kv_pool_run_rows(int n_threads, int64_t rows, double work_per_row, double min_work,
                      int64_t *rows_per_chunk, kv_pool_fn fn, void *ctx);

/* The threads a call of n_threads would use: min(n_threads, KV_POOL_MAX,
 * CPUs this process may run on), at least 1. */
int kv_pool_threads(int n_threads);

/*
 * What the team did since the process started (or kv_pool_stats_reset):
 * calls that used the team, their chunks, how many the caller did itself,
 * the ns the caller spent waiting for chunks other threads had claimed (a
 * preempted team thread shows here), the calls found late, the calls
 * run alone by the backoff. Counted by the caller only.
 */
struct kv_pool_stats {
    int64_t runs;
    int64_t chunks;
    int64_t chunks_by_caller;
    int64_t wait_ns;
    int64_t late_runs;
    int64_t solo_runs;
};
void kv_pool_stats_get(struct kv_pool_stats *out);
void kv_pool_stats_reset(void);

#endif /* KV_POOL_H */
