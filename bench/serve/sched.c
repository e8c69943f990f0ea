/*
 * sched.c - the iteration-level scheduler of `kvlab serving` (sched.h).
 */
#include "sched.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../../kernels/kv_ops.h"

enum rstate { R_FUTURE, R_WAITING, R_RUNNING, R_SWAPPED, R_DONE };

struct req {
    enum rstate st;
    struct kv_cache *cache;
    struct kv_cache_config cfg;
    int32_t fed;        /* tokens in the cache */
    int32_t n_gen;      /* tokens generated (toks[prompt ..]) */
    int32_t n_feed;     /* tokens this iteration feeds */
    int32_t preemptions;
    int preempted;      /* waits at the queue's front */
    int64_t admitted;   /* admission order: the last admitted is preempted first */
    int32_t borrowed;   /* tokens its cache reads from its group's prefix cache */
    int sharing;        /* holds a use of its group's prefix cache */
    double first_s;
    int32_t *toks;      /* (prompt + output) */
};

struct sched {
    const struct kv_model *m;
    const struct kv_request_set *rs;
    const struct kv_serve_params *p;
    struct req *q;
    struct kv_runner *runner;
    struct kv_segment *seg;
    int32_t *who;
    float *logits;
    char *stage;        /* swap: the host buffer a swapped cache's bytes go through */
    size_t used;        /* resident bytes of the running caches */
    int32_t running, waiting, swapped, done;
    int64_t admissions;
    double t;
    struct kv_serve_totals tot;
    int32_t prefill_rows; /* prefill tokens an iteration feeds at most */
    /* sharing: each group's prefix, prefilled once into a cache of its own
     * that the group's running and swapped requests borrow from */
    struct group {
        struct kv_cache *cache;
        int32_t users;
    } groups[KV_REQ_MAX_GROUPS];
    double side_s;       /* prefix prefills since the last iteration: time, tokens */
    double attn_s;       /* the last forward's time in the attention kernel */
    int32_t side_tokens;
};

#define SWAP_STAGE (16u << 20)

static int32_t len_of(const struct kv_request *r) { return r->prompt + r->output; }

static int32_t reserve_len(const struct kv_serve_params *p, const struct kv_request *r,
                           int32_t context)
{
    int32_t n = len_of(r);
    if (p->reserve == KV_RESERVE_EXACT)
        return n;
    if (p->reserve == KV_RESERVE_POW2) {
        int64_t k = 1;
        while (k < n)
            k *= 2;
        return k < context ? (int32_t)k : context;
    }
    return context;
}

/* The strategy's bound on a request's bytes at n tokens (SIZE_MAX: none). */
static size_t bytes_at(const struct sched *S, const struct req *q, int32_t n)
{
    size_t b;
    return kv_cache_bytes_for(S->p->ops, &q->cfg, S->p->params, n - q->borrowed, &b) == KV_OK
               ? b : SIZE_MAX;
}

/* Does request q share its group's prefix? (tokens it would borrow, or 0) */
static int32_t share_of(const struct sched *S, const struct req *q)
{
    const struct kv_request *r = &S->rs->req[q - S->q];
    if (!S->p->share_prefixes || r->group < 0 || S->rs->prefix_len < 1)
        return 0;
    return kv_strategy_borrowable(S->p->ops, S->p->params, S->rs->prefix_len);
}

/* The config of a group's prefix cache: the prefix and no more. */
static struct kv_cache_config prefix_cfg(const struct sched *S)
{
    struct kv_cache_config c = kv_cache_config_for_model(S->m, 1);
    c.max_len = S->rs->prefix_len;
    return c;
}

void kv_serve_prompt(int32_t *out, const struct kv_request_set *rs, int32_t i, int32_t vocab,
                     uint64_t seed)
{
    const struct kv_request *r = &rs->req[i];
    int32_t k = 0;
    if (r->group >= 0) {
        uint64_t g = seed ^ (0x9e3779b9ull * (uint64_t)(r->group + 1)) ^ 0xabcdefull;
        for (; k < rs->prefix_len; k++)
            out[k] = (int32_t)(kv_rng_next(&g) % (uint64_t)vocab);
    }
    uint64_t s = seed ^ (0x632be59bd9b4e019ull * (uint64_t)(i + 1));
    for (; k < r->prompt; k++)
        out[k] = (int32_t)(kv_rng_next(&s) % (uint64_t)vocab);
}

/* ------------------------------------------------------------------------ */
/* Moving requests between states                                           */

static void drop_cache(struct sched *S, struct req *q)
{
    S->used -= kv_cache_resident_bytes(q->cache);
    kv_cache_destroy(q->cache);
    q->cache = NULL;
    q->borrowed = 0;
    if (q->sharing) { /* the group's last user frees its prefix */
        struct group *g = &S->groups[S->rs->req[q - S->q].group];
        q->sharing = 0;
        if (--g->users == 0) {
            S->used -= kv_cache_resident_bytes(g->cache);
            kv_cache_destroy(g->cache);
            g->cache = NULL;
        }
    }
}

/* q's cache (fresh, or readmitted after recompute), borrowing its group's
 * prefix when it shares one: the prefix is prefilled once, whole, in a
 * forward of its own (timed into the next iteration's step) when no
 * request of the group holds it. */
static enum kv_status make_cache(struct sched *S, struct req *q)
{
    const struct kv_serve_params *p = S->p;
    if (share_of(S, q) == 0) {
        enum kv_status st = kv_cache_create(&q->cache, p->ops, &q->cfg, p->params);
        if (st == KV_OK)
            S->used += kv_cache_resident_bytes(q->cache);
        return st;
    }
    struct group *g = &S->groups[S->rs->req[q - S->q].group];
    const int32_t P = S->rs->prefix_len;
    if (g->cache == NULL) {
        const struct kv_cache_config c = prefix_cfg(S);
        enum kv_status st = kv_cache_create(&g->cache, p->ops, &c, p->params);
        const struct kv_segment seg = {.cache = g->cache, .tokens = q->toks, .n = P, .pos0 = 0};
        const int64_t t0 = kv_now_ns();
        if (st == KV_OK)
            st = kv_forward_segments(S->runner, S->m, &seg, 1, S->logits, NULL);
        if (st != KV_OK) {
            kv_cache_destroy(g->cache);
            g->cache = NULL;
            return st;
        }
        S->side_s += p->fixed_step_s > 0 ? 0.0 : (double)(kv_now_ns() - t0) * 1e-9;
        S->side_tokens += P;
        S->used += kv_cache_resident_bytes(g->cache);
    }
    enum kv_status st = kv_cache_borrow_prefix(&q->cache, g->cache, &q->cfg, P, &q->borrowed);
    if (st != KV_OK) {
        if (g->users == 0) {
            S->used -= kv_cache_resident_bytes(g->cache);
            kv_cache_destroy(g->cache);
            g->cache = NULL;
        }
        return st;
    }
    g->users++;
    q->sharing = 1;
    q->fed = P;
    S->used += kv_cache_resident_bytes(q->cache);
    return KV_OK;
}

/* The bytes of a cache moving between the pool and the host, timed: the
 * cache stays where it is, its bytes are copied through the stage. */
static double copy_cost(struct sched *S, size_t bytes)
{
    const int64_t t0 = kv_now_ns();
    for (size_t done = 0; done < bytes; done += SWAP_STAGE / 2) {
        size_t n = bytes - done < SWAP_STAGE / 2 ? bytes - done : SWAP_STAGE / 2;
        memcpy(S->stage + SWAP_STAGE / 2, S->stage, n);
    }
    return S->p->fixed_step_s > 0 ? 0.0 : (double)(kv_now_ns() - t0) * 1e-9;
}

static void preempt(struct sched *S, struct req *q)
{
    const size_t b = kv_cache_resident_bytes(q->cache);
    q->preemptions++;
    S->tot.preemptions++;
    S->running--;
    if (S->p->preempt == KV_PREEMPT_SWAP) {
        S->used -= b;
        S->tot.swapped_bytes += b;
        S->t += copy_cost(S, b);
        q->st = R_SWAPPED;
        S->swapped++;
    } else {
        S->tot.recomputed_tokens += q->fed - (q->sharing ? S->rs->prefix_len : 0);
        drop_cache(S, q);
        q->fed = 0;
        q->st = R_WAITING;
        q->preempted = 1;
        S->waiting++;
    }
}

/* The running request admitted last, or NULL. */
static struct req *last_admitted(struct sched *S)
{
    struct req *best = NULL;
    for (int32_t i = 0; i < S->rs->n; i++)
        if (S->q[i].st == R_RUNNING && (best == NULL || S->q[i].admitted > best->admitted))
            best = &S->q[i];
    return best;
}

/* What the running requests need to grow by this iteration. */
static size_t growth(const struct sched *S)
{
    size_t need = 0;
    for (int32_t i = 0; i < S->rs->n; i++) {
        const struct req *q = &S->q[i];
        if (q->st != R_RUNNING)
            continue;
        const size_t at = bytes_at(S, q, q->fed + q->n_feed), now = kv_cache_resident_bytes(q->cache);
        need += at > now ? at - now : 0;
    }
    return need;
}

/* ------------------------------------------------------------------------ */
/* One iteration                                                            */

/* Tokens request q feeds now, within the prefill budget (decode: 1). */
static int32_t plan_feed(const struct sched *S, struct req *q, int32_t *budget)
{
    const int32_t left = S->rs->req[q - S->q].prompt + q->n_gen - q->fed;
    if (left <= 1)
        return left;
    /* whole prompts (no chunk) wait until one fits the iteration's rows */
    const int32_t n = left <= *budget ? left : S->p->chunk > 0 ? *budget : 0;
    *budget -= n;
    return n;
}

/* The queue's front: swapped requests first, then preempted ones (each by
 * their earlier admission), then the rest by arrival; NULL when empty. */
static int front_rank(const struct req *c)
{
    return c->st == R_SWAPPED ? 0 : c->st != R_WAITING ? 3 : c->preempted ? 1 : 2;
}

static struct req *queue_front(struct sched *S)
{
    struct req *q = NULL;
    for (int32_t i = 0; i < S->rs->n; i++) {
        struct req *c = &S->q[i];
        const int r = front_rank(c);
        if (r < 3 && (q == NULL || r < front_rank(q) ||
                      (r == front_rank(q) && r < 2 && c->admitted < q->admitted)))
            q = c;
    }
    return q;
}

static enum kv_status admit(struct sched *S, int32_t *budget)
{
    const struct kv_serve_params *p = S->p;
    for (;;) {
        if (S->running >= p->max_batch || *budget <= 0)
            return KV_OK;
        struct req *q = queue_front(S);
        if (q == NULL)
            return KV_OK;
        const int32_t total = S->rs->req[q - S->q].prompt + q->n_gen;
        /* a request that shares its group's prefix starts past it */
        const int32_t share = q->st == R_SWAPPED ? 0 : share_of(S, q);
        const int32_t from = share > 0 ? S->rs->prefix_len : q->fed;
        const int32_t n0 = q->st == R_SWAPPED || total - from <= *budget ? total - from
                           : p->chunk > 0 ? *budget : -1;
        if (n0 < 0)
            return KV_OK; /* a whole prompt waits for an iteration with room */
        const size_t cur = q->st == R_SWAPPED ? kv_cache_resident_bytes(q->cache) : 0;
        if (q->st != R_SWAPPED)
            q->borrowed = share;
        const size_t at = bytes_at(S, q, from + n0);
        size_t need = at > cur ? at : cur;
        if (share > 0 && S->groups[S->rs->req[q - S->q].group].cache == NULL) {
            const struct kv_cache_config c = prefix_cfg(S);
            size_t b = 0;
            kv_cache_bytes_for(p->ops, &c, p->params, S->rs->prefix_len, &b);
            need += b;
        }
        if (S->used + growth(S) + need > p->pool_bytes) {
            if (q->st != R_SWAPPED)
                q->borrowed = 0;
            return KV_OK; /* first come, first served: nobody overtakes it */
        }
        if (q->st == R_SWAPPED) {
            S->swapped--;
            S->used += cur;
            S->t += copy_cost(S, cur);
        } else {
            enum kv_status st = make_cache(S, q);
            if (st != KV_OK)
                return st;
            S->waiting--;
            q->n_feed = 0;
        }
        q->st = R_RUNNING;
        q->preempted = 0;
        q->admitted = S->admissions++;
        S->running++;
        q->n_feed = plan_feed(S, q, budget);
    }
}

static void record_iteration(struct sched *S, kv_serve_iteration_fn fn, void *user,
                             int32_t batch, int32_t prefill, int32_t decode, double step)
{
    struct kv_serve_iteration it = {.index = S->tot.iterations - 1, .t_s = S->t, .step_s = step,
                                    .attn_s = S->attn_s,
                                    .batch = batch, .prefill_tokens = prefill,
                                    .decode_tokens = decode, .waiting = S->waiting,
                                    .swapped = S->swapped};
    size_t in_use = 0;
    for (int32_t i = 0; i < S->rs->n; i++) {
        const struct req *q = &S->q[i];
        struct kv_cache_stats cs;
        if (q->st != R_RUNNING || kv_cache_stats(q->cache, &cs) != KV_OK)
            continue;
        in_use += cs.resident;
        it.token_bytes += cs.tokens;
        it.spare_bytes += cs.spare;
        /* slack the request will still fill, by its bytes per token so far
         * (its last token is generated, never fed) */
        const int32_t left = len_of(&S->rs->req[i]) - 1 - q->fed;
        const int32_t own = q->fed - q->borrowed;
        const size_t per = own > 0 ? cs.tokens / (size_t)own : 0;
        const size_t fill = per * (size_t)(left > 0 ? left : 0);
        it.reserved_bytes += fill < cs.slack ? fill : cs.slack;
        it.internal_bytes += fill < cs.slack ? cs.slack - fill : 0;
    }
    for (int32_t g = 0; g < KV_REQ_MAX_GROUPS; g++) { /* a prefix never grows */
        struct kv_cache_stats cs;
        if (S->groups[g].cache == NULL || kv_cache_stats(S->groups[g].cache, &cs) != KV_OK)
            continue;
        in_use += cs.resident;
        it.token_bytes += cs.tokens;
        it.spare_bytes += cs.spare;
        it.internal_bytes += cs.slack;
    }
    it.free_bytes = S->p->pool_bytes > in_use ? S->p->pool_bytes - in_use : 0;
    const double share = S->p->pool_bytes > 0 ? (double)it.token_bytes / (double)S->p->pool_bytes : 0;
    if (share > S->tot.peak_token_share)
        S->tot.peak_token_share = share;
    if (batch > S->tot.peak_batch)
        S->tot.peak_batch = batch;
    if (fn != NULL)
        fn(user, &it);
}

static enum kv_status iterate(struct sched *S, kv_serve_request_fn on_request,
                              kv_serve_iteration_fn on_iteration, void *user)
{
    const struct kv_serve_params *p = S->p;
    int32_t budget = S->prefill_rows;
    for (int32_t i = 0; i < S->rs->n; i++)
        if (S->q[i].st == R_RUNNING)
            S->q[i].n_feed = plan_feed(S, &S->q[i], &budget);
    /* the running requests grow first; the last admitted makes room */
    while (S->running > 1 && S->used + growth(S) > p->pool_bytes) {
        struct req *v = last_admitted(S);
        if (v->n_feed > 1)
            budget += v->n_feed;
        preempt(S, v);
    }
    enum kv_status st = admit(S, &budget);
    if (st != KV_OK)
        return st;

    int32_t n = 0, prefill = 0, decode = 0;
    for (int32_t i = 0; i < S->rs->n; i++) {
        struct req *q = &S->q[i];
        if (q->st != R_RUNNING || q->n_feed < 1)
            continue;
        S->seg[n] = (struct kv_segment){.cache = q->cache, .tokens = q->toks + q->fed,
                                        .n = q->n_feed, .pos0 = q->fed};
        S->who[n++] = i;
        if (q->fed + q->n_feed < S->rs->req[i].prompt + q->n_gen || q->n_feed > 1)
            prefill += q->n_feed;
        else
            decode += q->n_feed;
    }
    if (n == 0)
        return KV_ERR_INVALID; /* cannot happen: the pool holds any request alone */
    size_t before = 0; /* the caches grow inside the forward */
    for (int32_t k = 0; k < n; k++)
        before += kv_cache_resident_bytes(S->seg[k].cache);
    struct kv_step_stats ss = {0}; /* what sweep records, for the same batch */
    const int64_t t0 = kv_now_ns();
    st = kv_forward_segments(S->runner, S->m, S->seg, n, S->logits, &ss);
    const double step = p->fixed_step_s > 0 ? p->fixed_step_s : (double)(kv_now_ns() - t0) * 1e-9;
    if (st != KV_OK)
        return st;
    S->t += step;
    S->tot.iterations++;
    const double side = S->side_s;
    prefill += S->side_tokens;
    S->side_s = 0;
    S->side_tokens = 0;
    S->t += side;

    for (int32_t k = 0; k < n; k++)
        S->used += kv_cache_resident_bytes(S->seg[k].cache);
    S->used -= before;
    const int32_t V = S->m->cfg.vocab_size;
    for (int32_t k = 0; k < n; k++) {
        struct req *q = &S->q[S->who[k]];
        const struct kv_request *r = &S->rs->req[S->who[k]];
        q->fed += q->n_feed;
        q->n_feed = 0;
        if (q->fed < r->prompt + q->n_gen)
            continue; /* a prefill chunk: its logits are not a token yet */
        q->toks[r->prompt + q->n_gen++] = kv_argmax(S->logits + (size_t)k * V, V);
        if (q->n_gen == 1)
            q->first_s = S->t;
        if (q->n_gen == r->output) {
            drop_cache(S, q);
            q->st = R_DONE;
            S->running--;
            S->done++;
            if (on_request != NULL) {
                const struct kv_serve_request out = {
                    .id = S->who[k], .arrival_s = r->arrival_s, .first_token_s = q->first_s,
                    .finish_s = S->t, .prompt = r->prompt, .output = r->output,
                    .preemptions = q->preemptions, .tokens = q->toks + r->prompt};
                on_request(user, &out);
            }
        }
    }
    S->attn_s = (double)ss.attn_ns * 1e-9;
    record_iteration(S, on_iteration, user, n, prefill, decode, step + side);
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* The run                                                                  */

__attribute__((format(printf, 3, 4))) static enum kv_status refuse(char *why, size_t n,
                                                                   const char *fmt, ...)
{
    if (why != NULL && n > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, n, fmt, ap);
        va_end(ap);
    }
    return KV_ERR_INVALID;
}

static void free_sched(struct sched *S)
{
    if (S->q != NULL)
        for (int32_t i = 0; i < S->rs->n; i++) {
            kv_cache_destroy(S->q[i].cache);
            kv_free(S->q[i].toks);
        }
    for (int32_t g = 0; g < KV_REQ_MAX_GROUPS; g++) /* after their borrowers */
        kv_cache_destroy(S->groups[g].cache);
    kv_free(S->q);
    kv_runner_destroy(S->runner);
    kv_free(S->seg);
    kv_free(S->who);
    kv_free(S->logits);
    kv_free(S->stage);
}

enum kv_status kv_serve_check(const struct kv_model *m, const struct kv_request_set *rs,
                              const struct kv_serve_params *p, char *why, size_t why_len)
{
    if (m == NULL || rs == NULL || rs->n < 1 || rs->req == NULL || p == NULL || p->ops == NULL)
        return refuse(why, why_len, "nothing to serve");
    if (p->max_batch < 1 || p->chunk < 0 || (unsigned)p->reserve >= KV_RESERVE_COUNT ||
        (unsigned)p->preempt >= KV_PREEMPT_COUNT)
        return refuse(why, why_len, "the batch must be at least 1 and the chunk at least 0");
    if (!(p->ops->caps & KV_CAP_KEEPS_HISTORY))
        return refuse(why, why_len, "%s keeps no history, so each step would re-run every request "
                                    "whole: it cannot serve (it lacks KV_CAP_KEEPS_HISTORY)",
                      p->ops->name);
    if (p->share_prefixes && !(p->ops->caps & KV_CAP_BORROW))
        return refuse(why, why_len, "%s cannot read another cache's blocks in place: it cannot "
                                    "share prefixes (it lacks KV_CAP_BORROW)", p->ops->name);
    const struct kv_cache_config c1 = kv_cache_config_for_model(m, 1);
    if (p->chunk > 0 && !(kv_strategy_caps(p->ops, &c1, p->params) & KV_CAP_CHUNKED_APPEND))
        return refuse(why, why_len, "%s cannot take a prompt in chunks once it holds tokens: it "
                                    "cannot serve with --chunk (it lacks KV_CAP_CHUNKED_APPEND)",
                      p->ops->name);
    for (int32_t i = 0; i < rs->n; i++) {
        struct kv_cache_config cc = kv_cache_config_for_model(m, 1);
        cc.max_len = reserve_len(p, &rs->req[i], m->cfg.max_len);
        size_t b;
        if (len_of(&rs->req[i]) > m->cfg.max_len ||
            kv_cache_bytes_for(p->ops, &cc, p->params, len_of(&rs->req[i]), &b) != KV_OK)
            return refuse(why, why_len, "%s cannot bound the bytes of request %d (%d tokens): it "
                                        "cannot serve it", p->ops->name, i, len_of(&rs->req[i]));
        const int32_t bor = p->share_prefixes && rs->req[i].group >= 0
                                ? kv_strategy_borrowable(p->ops, p->params, rs->prefix_len) : 0;
        if (bor > 0) { /* its own blocks and its group's prefix */
            struct kv_cache_config pc = kv_cache_config_for_model(m, 1);
            pc.max_len = rs->prefix_len;
            size_t own, pre;
            if (kv_cache_bytes_for(p->ops, &cc, p->params, len_of(&rs->req[i]) - bor, &own) !=
                    KV_OK ||
                kv_cache_bytes_for(p->ops, &pc, p->params, rs->prefix_len, &pre) != KV_OK)
                return refuse(why, why_len, "%s cannot bound the bytes of request %d's prefix",
                              p->ops->name, i);
            b = own + pre > b ? own + pre : b;
        }
        if (b > p->pool_bytes)
            return refuse(why, why_len,
                          "the pool cannot hold request %d whole on its own (its prompt and "
                          "output: %zu bytes); give a larger pool", i, b);
    }
    return KV_OK;
}

enum kv_status kv_serve_run(const struct kv_model *m, const struct kv_request_set *rs,
                            const struct kv_serve_params *p, kv_serve_request_fn on_request,
                            kv_serve_iteration_fn on_iteration, void *user,
                            struct kv_serve_totals *totals, char *why, size_t why_len)
{
    enum kv_status st = kv_serve_check(m, rs, p, why, why_len);
    if (st != KV_OK)
        return st;
    struct sched S = {.m = m, .rs = rs, .p = p};
    const int32_t ctx = m->cfg.max_len;
    int32_t longest = 0;
    for (int32_t i = 0; i < rs->n; i++)
        longest = len_of(&rs->req[i]) > longest ? len_of(&rs->req[i]) : longest;
    S.prefill_rows = p->chunk > 0 && p->chunk < longest ? p->chunk : longest;
    /* a group's prefix is prefilled whole, in a forward of its own */
    const int32_t side = p->share_prefixes && rs->prefix_len > S.prefill_rows ? rs->prefix_len : 0;
    const int32_t rows = p->max_batch + (side > S.prefill_rows ? side : S.prefill_rows);
    S.q = kv_alloc((size_t)rs->n * sizeof *S.q);
    S.seg = kv_alloc((size_t)p->max_batch * sizeof *S.seg);
    S.who = kv_alloc((size_t)p->max_batch * sizeof *S.who);
    S.logits = kv_alloc((size_t)p->max_batch * (size_t)m->cfg.vocab_size * sizeof(float));
    S.stage = p->preempt == KV_PREEMPT_SWAP ? kv_alloc(SWAP_STAGE) : NULL;
    st = S.q && S.seg && S.who && S.logits &&
                                (p->preempt != KV_PREEMPT_SWAP || S.stage)
                            ? kv_runner_create(&S.runner, m, 1, rows, p->n_threads)
                            : KV_ERR_NOMEM;
    for (int32_t i = 0; st == KV_OK && i < rs->n; i++) {
        struct req *q = &S.q[i];
        q->cfg = kv_cache_config_for_model(m, 1);
        q->cfg.max_len = reserve_len(p, &rs->req[i], ctx);
        if ((q->toks = kv_alloc((size_t)len_of(&rs->req[i]) * sizeof(int32_t))) == NULL)
            st = KV_ERR_NOMEM;
        else
            kv_serve_prompt(q->toks, rs, i, m->cfg.vocab_size, p->seed);
    }
    for (int32_t next = 0; st == KV_OK && S.done < rs->n;) {
        while (next < rs->n && rs->req[next].arrival_s <= S.t) {
            S.q[next++].st = R_WAITING;
            S.waiting++;
        }
        if (S.running == 0 && S.waiting == 0 && S.swapped == 0) {
            if (next >= rs->n)
                break; /* cannot happen: every request arrived is done */
            S.t = rs->req[next].arrival_s; /* idle until the next arrival */
            continue;
        }
        st = iterate(&S, on_request, on_iteration, user);
    }
    S.tot.end_s = S.t;
    if (totals != NULL)
        *totals = S.tot;
    free_sched(&S);
    return st;
}
