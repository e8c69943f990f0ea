/*
 * sched.h - the iteration-level scheduler of `kvlab serving` (Orca's and
 * vLLM's scheduling): a request stream through the real model, one batched
 * forward per iteration (kv_forward_segments) that decodes a token for
 * every running request and prefills the admitted ones, each request in a
 * cache of its own, all of them within one pool of KV memory.
 *
 * The design decision that matters: the pool is an account of the real
 * caches' resident bytes, and the scheduler decides from the strategy's own
 * bound (kv_cache_bytes_for) before it lets a cache grow, so how many
 * requests fit is what the strategy really allocates: a static cache of the
 * model's context holds it all from its first token, a dynamic one its
 * capacity, a paged one its blocks. Reservation policies are the static
 * strategy's max_len per request (Orca's Max, Pow2, Oracle). When the
 * running requests would outgrow the pool, the last admitted is preempted,
 * as vLLM does: by recompute (its cache dropped, its prompt and tokens so
 * far prefilled again when it is readmitted) or by swap (its cache moved
 * out of the pool, its bytes copied to a host buffer, moved back before any
 * waiting request is admitted).
 *
 * The clock is the stream's: an iteration advances it by the forward's
 * measured wall time (or a fixed step, for schedules that must repeat), and
 * a request is seen once the clock passes its arrival.
 */
#ifndef KV_SCHED_H
#define KV_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "../model/kv_model.h"
#include "requests.h"

/* The cache length reserved per request (its cache's max_len). */
enum kv_reserve {
    KV_RESERVE_CONTEXT, /* the model's context (Orca-Max; a growing cache only bounds by it) */
    KV_RESERVE_POW2,    /* the next power of two of prompt + output (Orca-Pow2) */
    KV_RESERVE_EXACT,   /* prompt + output, known in advance (Orca-Oracle) */
    KV_RESERVE_COUNT
};
enum kv_preempt { KV_PREEMPT_RECOMPUTE, KV_PREEMPT_SWAP, KV_PREEMPT_COUNT };

struct kv_serve_params {
    const struct kv_strategy_ops *ops;
    const void *params;      /* the strategy's (from its table) */
    enum kv_reserve reserve;
    enum kv_preempt preempt;
    size_t pool_bytes;
    int32_t max_batch;       /* running requests at most */
    int32_t chunk;           /* prefill tokens an iteration feeds, all requests
                                together (0: every admitted prompt whole) */
    int32_t n_threads;
    uint64_t seed;           /* prompt contents */
    double fixed_step_s;     /* > 0: each iteration advances the clock by this */
    int share_prefixes;      /* the requests of a prefix group borrow one prefilled copy
                                of its prefix (KV_CAP_BORROW), held while any of them runs
                                or is swapped out, and counted in the pool once */
};

/* One request's record, when it finishes. */
struct kv_serve_request {
    int32_t id;
    double arrival_s, first_token_s, finish_s;
    int32_t prompt, output;
    int32_t preemptions;
    const int32_t *tokens;   /* its output tokens (valid during the callback) */
};

/* One iteration's record. Pool bytes: token rows, slots the running
 * requests will still fill, slots they never will (internal
 * fragmentation), free blocks a cache keeps, and the pool left. */
struct kv_serve_iteration {
    int64_t index;
    double t_s, step_s;
    double attn_s;           /* of step_s, in the attention kernel (kv_step_stats) */
    int32_t batch;           /* requests in the iteration's forward */
    int32_t prefill_tokens, decode_tokens, waiting, swapped;
    size_t token_bytes, reserved_bytes, internal_bytes, spare_bytes, free_bytes;
};

struct kv_serve_totals {
    double end_s;
    int64_t iterations, preemptions, recomputed_tokens;
    size_t swapped_bytes;
    int32_t peak_batch;
    double peak_token_share; /* the highest token_bytes / pool over iterations */
};

typedef void (*kv_serve_request_fn)(void *user, const struct kv_serve_request *r);
typedef void (*kv_serve_iteration_fn)(void *user, const struct kv_serve_iteration *it);

/*
 * Runs the stream through m. KV_ERR_INVALID with a one-line reason in why,
 * before any work, for a strategy that cannot serve (it keeps no history,
 * cannot bound its bytes, or, with a chunk, cannot append in chunks), a pool that cannot hold some request whole
 * (prompt and output) on its own, max_batch < 1, chunk < 0. A run-time
 * failure (KV_ERR_NOMEM) stops the run. The callbacks may be NULL.
 */
enum kv_status kv_serve_run(const struct kv_model *m, const struct kv_request_set *rs,
                            const struct kv_serve_params *p, kv_serve_request_fn on_request,
                            kv_serve_iteration_fn on_iteration, void *user,
                            struct kv_serve_totals *totals, char *why, size_t why_len);

/* kv_serve_run's checks alone (KV_OK, or KV_ERR_INVALID with why), for a
 * caller that says what it starts only once the run can start. */
enum kv_status kv_serve_check(const struct kv_model *m, const struct kv_request_set *rs,
                              const struct kv_serve_params *p, char *why, size_t why_len);

/* The prompt tokens of request i of a stream (its group's prefix first):
 * what kv_serve_run feeds, for a caller that generates it alone. */
void kv_serve_prompt(int32_t *out, const struct kv_request_set *rs, int32_t i, int32_t vocab,
                     uint64_t seed);

#endif /* KV_SCHED_H */
