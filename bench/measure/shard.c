/*
 * shard.c - the shard planner (contract and cost model in shard.h).
 *
 * Three passes: probe each strategy's cache along the whole sweep's schedule
 * (what each decode step reads and copies), predict every piece of work in
 * integer nanoseconds, then assign rows to shards by simulating each
 * candidate shard's run. Everything is integer arithmetic with saturating
 * adds, so every process that plans the same sweep gets the same plan.
 */
#include "shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Saturating integer arithmetic                                            */

static int64_t sat_add(int64_t a, int64_t b)
{
    return a > INT64_MAX - b ? INT64_MAX : a + b;
}

static int64_t sat_mul(int64_t a, int64_t b)
{
    if (a == 0 || b == 0)
        return 0;
    return a > INT64_MAX / b ? INT64_MAX : a * b;
}

/* ------------------------------------------------------------------------ */
/* Parsing                                                                  */

void kv_plan_rates_default(struct kv_plan_rates *r)
{
    r->gflops = KV_PLAN_GFLOPS_DEFAULT;
    r->gbps = KV_PLAN_GBPS_DEFAULT;
    r->copy_gbps = KV_PLAN_COPY_GBPS_DEFAULT;
}

/* A whole decimal number in [lo, hi] at *s, up to the next `end` char or
 * NUL; advances *s past it. -1 when there is none. */
static int parse_uint(const char **s, int64_t lo, int64_t hi, int64_t *out)
{
    const char *p = *s;
    int64_t v = 0;
    if (*p < '0' || *p > '9')
        return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (INT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (*p - '0');
    }
    if (v < lo || v > hi)
        return -1;
    *s = p;
    *out = v;
    return 0;
}

int kv_plan_rates_parse(const char *s, struct kv_plan_rates *r)
{
    enum { RATE_MAX = 1000000 };
    int64_t v[3] = {0, 0, KV_PLAN_COPY_GBPS_DEFAULT};
    int n = 0;
    if (s == NULL)
        return -1;
    for (;;) {
        if (n == 3 || parse_uint(&s, 1, RATE_MAX, &v[n]) != 0)
            return -1;
        n++;
        if (*s == '\0')
            break;
        if (*s++ != ',')
            return -1;
    }
    if (n < 2)
        return -1;
    r->gflops = v[0];
    r->gbps = v[1];
    r->copy_gbps = v[2];
    return 0;
}

int kv_shard_parse(const char *s, int32_t *i, int32_t *n)
{
    int64_t a, b;
    if (s == NULL || parse_uint(&s, 1, KV_PLAN_MAX_ROWS, &a) != 0 || *s++ != '/' ||
        parse_uint(&s, 1, KV_PLAN_MAX_ROWS, &b) != 0 || *s != '\0' || a > b)
        return -1;
    *i = (int32_t)a;
    *n = (int32_t)b;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The cost of one forward                                                  */

static int64_t forward_ns(const struct kv_plan *p, int64_t flops, int64_t bytes,
                          int64_t copied)
{
    int64_t a = flops / p->rates.gflops, b = bytes / p->rates.gbps;
    return sat_add(a > b ? a : b, copied / p->rates.copy_gbps);
}

/* Visible keys summed over queries at positions 0 .. n-1 under a causal
 * mask with window w (0 = none): sum of min(q + 1, w). */
static int64_t cum_pairs(int64_t n, int64_t w)
{
    if (w <= 0 || n <= w)
        return sat_mul(n, n + 1) / 2;
    return sat_add(w * (w + 1) / 2, sat_mul(n - w, w));
}

/*
 * Predicted time to bring slot k's cache from len to target tokens, as
 * sweep.c's prefill_to does it: from empty when the cache is past target or
 * (a whole-prefill slot) not at it, then one forward (whole prefill) or
 * chunks of KV_SWEEP_PREFILL_CHUNK. Prefill is GEMM-bound: FLOPs over the
 * rate, the weights read once per forward as the floor.
 */
static int64_t prefill_ns(const struct kv_plan *p, int32_t k, int32_t len, int32_t target)
{
    if (len > target || (p->slot_whole[k] && len != target && len > 0))
        len = 0;
    if (len >= target)
        return 0;
    int64_t n = target - len;
    int64_t calls = p->slot_whole[k] ? 1
                                     : (n + KV_SWEEP_PREFILL_CHUNK - 1) / KV_SWEEP_PREFILL_CHUNK;
    int64_t pairs = cum_pairs(target, p->slot_window[k]) - cum_pairs(len, p->slot_window[k]);
    int64_t flops = sat_add(sat_add(sat_mul(p->gemm_per_token, n),
                                    sat_mul(p->classifier, calls)),
                            sat_mul(p->attn_per_pair, pairs));
    return forward_ns(p, flops, sat_mul(p->weights, calls), 0);
}

/* ------------------------------------------------------------------------ */
/* Probing each strategy along the whole sweep's schedule                   */

/* Timed steps of `none` at T: cfg->reps, or the automatic count sweep.c
 * picks before any `none` row ran (its budget over the predicted step). */
static int32_t none_reps(const struct kv_sweep_config *cfg, int64_t step_ns)
{
    if (cfg->reps > 0)
        return cfg->reps;
    int64_t r = KV_SWEEP_NONE_BUDGET_NS / (step_ns > 1 ? step_ns : 1);
    if (r > KV_SWEEP_AUTO_REPS)
        r = KV_SWEEP_AUTO_REPS;
    if (r < KV_SWEEP_NONE_REPS_MIN)
        r = KV_SWEEP_NONE_REPS_MIN;
    return (int32_t)(r % 2 ? r : r - 1);
}

struct probe {
    struct kv_cache *cache;
    struct kv_attn_params ap; /* one sequence, one KV head */
    const float *zeros;       /* (max tokens, head_dim) keys and values */
    int32_t len;
    int32_t n_layers;         /* the probe's: 1, or the model's (a pattern) */
    int64_t layer_mult;       /* model layers / probe layers */
    int64_t scale;            /* batch * n_kv_heads */
};

/* Appends n tokens at pos0 to every probe layer and reads the spans:
 * visible pairs (one sequence, summed over the model's layers) and span
 * and copied bytes (scaled to the model). */
static enum kv_status probe_update(struct probe *pr, int32_t pos0, int32_t n, int64_t *pairs,
                                   int64_t *bytes, int64_t *copied)
{
    size_t c0 = kv_cache_copied_bytes(pr->cache);
    int64_t pa = 0, by = 0;
    pr->ap.n_q = n;
    pr->ap.q_pos0 = pos0;
    for (int32_t l = 0; l < pr->n_layers; l++) {
        enum kv_status st = kv_cache_update(pr->cache, l, pr->zeros, pr->zeros, n, pos0);
        if (st != KV_OK)
            return st;
        struct kv_view view;
        st = kv_cache_view(pr->cache, l, &view);
        if (st != KV_OK)
            return st;
        pa = sat_add(pa, kv_attn_visible_pairs(&pr->ap, &view));
        by = sat_add(by, (int64_t)kv_attn_span_bytes(&pr->ap, &view));
    }
    const int64_t m = sat_mul(pr->scale, pr->layer_mult);
    *pairs = sat_mul(pa, pr->layer_mult);
    *bytes = sat_mul(by, m);
    *copied = sat_mul((int64_t)(kv_cache_copied_bytes(pr->cache) - c0), m);
    return KV_OK;
}

/* sweep.c's prefill_to on the probe: the cache state the steps then see. */
static enum kv_status probe_prefill(struct probe *pr, int whole, int32_t target)
{
    int64_t pairs = 0, bytes = 0, copied = 0;
    if (pr->len > target || (whole && pr->len != target && pr->len > 0)) {
        enum kv_status st = kv_cache_reset(pr->cache);
        if (st != KV_OK)
            return st;
        pr->len = 0;
    }
    while (pr->len < target) {
        int32_t n = target - pr->len;
        if (!whole && n > KV_SWEEP_PREFILL_CHUNK)
            n = KV_SWEEP_PREFILL_CHUNK;
        enum kv_status st = probe_update(pr, pr->len, n, &pairs, &bytes, &copied);
        if (st != KV_OK)
            return st;
        pr->len += n;
    }
    return KV_OK;
}

/* Row (i, ti) is one of the sweep's: planned (`none` up to none_max), and
 * in cfg->only when the sweep has one (a frontier: each configuration at
 * the T it was solved for). */
static int in_sweep(const struct kv_sweep_config *cfg, int32_t i, int32_t ti)
{
    return kv_sweep_row_planned(cfg, i, ti) &&
           (cfg->only == NULL || ((cfg->only[i] >> ti) & 1u));
}

/* Whether slot k runs at ti in the whole sweep (sweep.c's slot_runs_at with
 * every row selected: the reference runs wherever any row does). */
static int whole_runs_at(const struct kv_plan *p, const struct kv_sweep_config *cfg,
                         int32_t k, int32_t ti)
{
    if (p->slot_index[k] >= 0 && in_sweep(cfg, p->slot_index[k], ti))
        return 1;
    if (k != 0)
        return 0;
    for (int32_t j = 1; j < p->n_slots; j++)
        if (whole_runs_at(p, cfg, j, ti))
            return 1;
    return 0;
}

static struct kv_plan_row *row_of(struct kv_plan *p, int32_t index, int32_t ti)
{
    for (int32_t r = 0; r < p->n_rows; r++)
        if (p->rows[r].strategy == index && p->rows[r].len_index == ti)
            return &p->rows[r];
    return NULL;
}

/* Why planning failed, for *why (one planning at a time per thread). */
static _Thread_local char plan_why[384];

/* Drives slot k's probe through the whole sweep, filling step_ns[k][] and,
 * for its rows, the step's FLOPs, bytes and copies. The probe has one
 * sequence and one KV head, and one layer when the strategy takes one
 * (every layer alike: bytes and pairs scale by the layers), else the
 * model's layers (a per-layer pattern, whose layers differ: every one is
 * probed and summed). On a refusal plan_why names the strategy and why. */
static enum kv_status probe_slot(struct kv_plan *p, const struct kv_sweep_config *cfg,
                                 const struct kv_model_config *mc, int32_t k,
                                 const float *zeros)
{
    const struct kv_sweep_strategy *st = p->slot_index[k] >= 0
                                             ? &cfg->strategies[p->slot_index[k]]
                                             : kv_sweep_reference_strategy();
    struct kv_cache_config cc;
    kv_sweep_cache_config(&cc, cfg, mc, st);
    cc.batch = 1;
    cc.n_kv_heads = 1;
    const int32_t L = cc.n_layers;
    cc.n_layers = 1;
    struct probe pr = {.zeros = zeros};
    enum kv_status s = kv_cache_create(&pr.cache, st->ops, &cc, st->params);
    if (s == KV_ERR_INVALID && L > 1) { /* a pattern over the layers */
        cc.n_layers = L;
        s = kv_cache_create(&pr.cache, st->ops, &cc, st->params);
    }
    if (s != KV_OK) {
        char sub[256] = "";
        kv_params_check(st->ops, &cc, st->params, sub, sizeof sub);
        snprintf(plan_why, sizeof plan_why, "%.32s: its cache refused the sweep's "
                 "configuration (%.255s)", st->label, sub[0] ? sub : kv_status_str(s));
        return s;
    }
    pr.n_layers = cc.n_layers;
    pr.scale = (int64_t)cfg->batch * mc->n_kv_heads;
    pr.layer_mult = L / cc.n_layers;
    pr.ap = (struct kv_attn_params){.batch = 1, .n_q = 1, .n_heads = 1, .n_kv_heads = 1,
                                    .head_dim = cc.head_dim, .scale = 1.0f, .n_threads = 1};
    p->slot_whole[k] = kv_sweep_whole_prefill(pr.cache);
    p->slot_window[k] = kv_cache_mask_window(pr.cache);
    const int32_t W = cfg->warmup;
    int32_t at_T = 0;
    for (int32_t ti = 0; ti < cfg->n_lens && s == KV_OK; ti++) {
        const int32_t T = cfg->seq_lens[ti];
        at_T = T;
        p->step_ns[k][ti] = 0;
        if (!whole_runs_at(p, cfg, k, ti))
            continue;
        struct kv_plan_row *row = p->slot_index[k] >= 0 ? row_of(p, p->slot_index[k], ti)
                                                         : NULL;
        int64_t pairs = 0, bytes = 0, copied = 0;
        if (p->slot_none[k]) {
            /* every step re-runs tokens [0, T) */
            s = kv_cache_reset(pr.cache);
            if (s == KV_OK)
                s = probe_update(&pr, 0, T, &pairs, &bytes, &copied);
            if (s != KV_OK)
                break;
            int64_t fl = sat_add(sat_add(sat_mul(p->gemm_per_token, T), p->classifier),
                                 sat_mul(p->attn_per_layer_pair, pairs));
            int64_t by = sat_add(p->weights, bytes);
            int64_t t = forward_ns(p, fl, by, copied);
            int32_t R = none_reps(cfg, t);
            p->step_ns[k][ti] = sat_mul(t, W + R);
            if (row != NULL) {
                row->reps = R;
                row->flops_step = fl;
                row->bytes_step = by;
                row->copy_bytes = copied;
            }
            continue;
        }
        const int32_t R = p->reps_at[ti];
        const int32_t P = T - 1 - W - (R - 1) / 2;
        /* from empty, as sweep.c measures every row */
        s = kv_cache_reset(pr.cache);
        pr.len = 0;
        if (s == KV_OK)
            s = probe_prefill(&pr, p->slot_whole[k], P);
        int64_t copied_timed = 0;
        for (int32_t j = 0; j < W + R && s == KV_OK; j++) {
            s = probe_update(&pr, pr.len, 1, &pairs, &bytes, &copied);
            if (s != KV_OK)
                break;
            pr.len++;
            int64_t fl = sat_add(sat_add(p->gemm_per_token, p->classifier),
                                 sat_mul(p->attn_per_layer_pair, pairs));
            int64_t by = sat_add(p->weights, bytes);
            p->step_ns[k][ti] = sat_add(p->step_ns[k][ti], forward_ns(p, fl, by, copied));
            if (j >= W)
                copied_timed = sat_add(copied_timed, copied);
            if (row != NULL && j == W + (R - 1) / 2) {
                row->flops_step = fl;
                row->bytes_step = by;
            }
        }
        if (row != NULL) {
            row->reps = R;
            row->copy_bytes = copied_timed / R;
        }
    }
    kv_cache_destroy(pr.cache);
    if (s != KV_OK)
        snprintf(plan_why, sizeof plan_why, "%.32s: its cache refused the sweep's tokens at "
                 "T = %d (%s)", st->label, at_T, kv_status_str(s));
    return s;
}

/* ------------------------------------------------------------------------ */
/* Simulating one shard's run                                               */

/*
 * Predicted time of a run measuring the rows with member[r] != 0, in
 * sweep.c's order. With attr != NULL, attr[r] gets each member row's share
 * (its prefill and steps) and the return value still includes the
 * reference's work where only the reference runs.
 */
static int64_t simulate(const struct kv_plan *p, const uint8_t *member, int64_t *attr)
{
    /* member rows by (cfg index, ti) */
    int32_t at[KV_SWEEP_MAX_STRATEGIES][KV_SWEEP_MAX_LENS];
    memset(at, 0xff, sizeof at);
    for (int32_t r = 0; r < p->n_rows; r++)
        if (member[r])
            at[p->rows[r].strategy][p->rows[r].len_index] = r;
    int64_t total = 0;
    for (int32_t ti = 0; ti < p->n_lens; ti++) {
        int any = 0;
        for (int32_t k = 1; k < p->n_slots; k++)
            any |= at[p->slot_index[k]][ti] >= 0;
        for (int32_t k = 0; k < p->n_slots; k++) {
            int32_t r = p->slot_index[k] >= 0 ? at[p->slot_index[k]][ti] : -1;
            if (r < 0 && !(k == 0 && any))
                continue;
            int64_t t = p->step_ns[k][ti];
            if (!p->slot_none[k]) { /* every row from an empty cache (sweep.c) */
                const int32_t R = p->reps_at[ti];
                const int32_t P = p->seq_lens[ti] - 1 - p->warmup - (R - 1) / 2;
                t = sat_add(t, prefill_ns(p, k, 0, P));
            }
            total = sat_add(total, t);
            if (attr != NULL && r >= 0)
                attr[r] = t;
        }
    }
    return total;
}

/* ------------------------------------------------------------------------ */
/* Assignment                                                               */

/* Rows in the order they are placed: largest alone-cost first, then file
 * order (a total order, so every process places them alike). */
struct order_key {
    int64_t alone_ns;
    int32_t row;
};

static int by_alone_desc(const void *a, const void *b)
{
    const struct order_key *x = a, *y = b;
    if (x->alone_ns != y->alone_ns)
        return x->alone_ns > y->alone_ns ? -1 : 1;
    return (x->row > y->row) - (x->row < y->row);
}

/*
 * Greedy placement. The first n_shards rows seed one shard each (no shard
 * is empty). Every further row goes to the shard where it adds least among
 * those it does not lift above the current largest shard (so rows of one
 * strategy gather where its cache is already prefilled, and the reference
 * is shared), or, when it lifts every shard, to the one it leaves smallest.
 * Ties: the lower shard number.
 */
static enum kv_status assign(struct kv_plan *p)
{
    const int32_t N = p->n_shards, R = p->n_rows;
    struct order_key *order = kv_alloc((size_t)R * sizeof *order);
    uint8_t *member = kv_alloc((size_t)N * (size_t)R);
    if (order == NULL || member == NULL) {
        kv_free(order);
        kv_free(member);
        return KV_ERR_NOMEM;
    }
    memset(member, 0, (size_t)N * (size_t)R);
    for (int32_t r = 0; r < R; r++)
        order[r] = (struct order_key){.alone_ns = p->rows[r].alone_ns, .row = r};
    qsort(order, (size_t)R, sizeof *order, by_alone_desc);
    int64_t makespan = 0;
    for (int32_t s = 0; s < N; s++)
        p->shard_ns[s] = 0;
    for (int32_t q = 0; q < R; q++) {
        int32_t r = order[q].row, best = -1;
        int64_t best_add = 0, best_new = 0;
        int best_fits = 0;
        for (int32_t s = 0; s < N; s++) {
            if (q < N && s != q)
                continue; /* seeding: row q opens shard q */
            uint8_t *m = member + (size_t)s * R;
            m[r] = 1;
            int64_t now = simulate(p, m, NULL);
            m[r] = 0;
            int64_t add = now - p->shard_ns[s];
            int fits = now <= makespan;
            int better = best < 0 || (fits && !best_fits) ||
                         (fits && best_fits && add < best_add) ||
                         (!fits && !best_fits && now < best_new);
            if (better) {
                best = s;
                best_add = add;
                best_new = now;
                best_fits = fits;
            }
        }
        if (best < 0)
            best = 0; /* cannot happen: N >= 1 gives every row a candidate */
        member[(size_t)best * R + r] = 1;
        p->shard_ns[best] = best_new;
        if (best_new > makespan)
            makespan = best_new;
        p->rows[r].shard = best + 1;
    }
    /* each row's share in its shard, and the shards' row counts */
    int64_t *attr = kv_alloc((size_t)R * sizeof *attr);
    if (attr == NULL) {
        kv_free(order);
        kv_free(member);
        return KV_ERR_NOMEM;
    }
    for (int32_t s = 0; s < N; s++) {
        p->shard_ns[s] = simulate(p, member + (size_t)s * R, attr);
        p->shard_rows[s] = 0;
        for (int32_t r = 0; r < R; r++) {
            if (member[(size_t)s * R + r]) {
                p->rows[r].cost_ns = attr[r];
                p->shard_rows[s]++;
            }
        }
    }
    kv_free(attr);
    kv_free(order);
    kv_free(member);
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* The plan                                                                 */

/* FNV-1a, 64 bits, over the bytes of a string. */
static uint64_t fnv(uint64_t h, const char *s)
{
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

#define FNV_BASIS 0xcbf29ce484222325ull

uint64_t kv_plan_row_hash(const struct kv_plan_key *k)
{
    char num[32];
    uint64_t h = fnv(FNV_BASIS, "row|");
    h = fnv(fnv(h, k->strategy != NULL ? k->strategy : ""), "|");
    for (int32_t j = 0; j < KV_SWEEP_N_KEY - 1; j++) {
        snprintf(num, sizeof num, "%lld|", (long long)k->v[j]);
        h = fnv(h, num);
    }
    h = fnv(fnv(h, k->dtype != NULL ? k->dtype : ""), "|");
    h = fnv(fnv(h, k->params != NULL ? k->params : ""), "|");
    h = fnv(fnv(h, k->label != NULL ? k->label : ""), "|");
    snprintf(num, sizeof num, "%d", k->shard);
    return fnv(h, num);
}

uint64_t kv_plan_id_of(const struct kv_plan_config_key *c, uint64_t rows_digest)
{
    char buf[256];
    snprintf(buf, sizeof buf, "v3 seed=%llu warmup=%lld reps=%lld mlp=%lld rates=%lld,%lld,%lld "
             "shards=%d rows=%lld digest=%016llx", (unsigned long long)c->seed,
             (long long)c->warmup, (long long)c->reps, (long long)c->mlp,
             (long long)c->rates.gflops, (long long)c->rates.gbps,
             (long long)c->rates.copy_gbps, c->n_shards, (long long)c->n_rows,
             (unsigned long long)rows_digest);
    return fnv(FNV_BASIS, buf);
}

/* The value of the parameter called name, or 0 (the CSV's group and
 * residual columns, as sweep.c fills them). */
static int64_t param_or_zero(const struct kv_strategy_ops *ops, const void *params,
                             const char *name)
{
    int32_t i = kv_param_find(ops, name);
    return i < 0 || ops->params[i].type == KV_PARAM_TEXT ? 0 : kv_params_get(ops, params, i);
}

/* Every row's identity hash (kv_plan_row_hash, with its shard) and the id. */
static void plan_hashes(struct kv_plan *p, const struct kv_sweep_config *cfg,
                        const struct kv_model_config *mc)
{
    int32_t window_of[KV_SWEEP_MAX_STRATEGIES] = {0};
    for (int32_t k = 0; k < p->n_slots; k++)
        if (p->slot_index[k] >= 0)
            window_of[p->slot_index[k]] = p->slot_window[k];
    uint64_t all = 0;
    for (int32_t r = 0; r < p->n_rows; r++) {
        struct kv_plan_row *row = &p->rows[r];
        const struct kv_sweep_strategy *st = &cfg->strategies[row->strategy];
        const enum kv_dtype d = kv_strategy_dtype(st->ops, st->params);
        char params[512];
        kv_params_format(st->ops, st->params, params, sizeof params);
        struct kv_plan_key key = {
            .strategy = st->ops->name, .label = st->label, .params = params,
            .dtype = kv_type_traits[d].name, .shard = row->shard,
            .v = {mc->n_layers, mc->dim, mc->n_heads, mc->n_kv_heads, mc->dim / mc->n_heads,
                  mc->hidden_dim, cfg->batch, window_of[row->strategy], kv_type_traits[d].bits,
                  param_or_zero(st->ops, st->params, "group"),
                  param_or_zero(st->ops, st->params, "residual"), cfg->threads, row->seq_len}};
        row->key_hash = kv_plan_row_hash(&key);
        all += row->key_hash;
    }
    const struct kv_plan_config_key c = {.seed = cfg->seed, .warmup = cfg->warmup,
                                         .reps = cfg->reps, .mlp = mc->mlp, .rates = p->rates,
                                         .n_shards = p->n_shards, .n_rows = p->n_rows};
    p->id = kv_plan_id_of(&c, all);
}

uint64_t kv_plan_shard_digest(const struct kv_plan *p, int32_t shard)
{
    uint64_t d = 0;
    for (int32_t r = 0; r < p->n_rows; r++)
        if (p->rows[r].shard == shard)
            d += p->rows[r].key_hash;
    return d;
}

enum kv_status kv_plan_create(struct kv_plan **out, const struct kv_sweep_config *cfg,
                              const struct kv_model_config *mc,
                              const struct kv_plan_rates *rates, int32_t n_shards,
                              const char **why)
{
    *out = NULL;
    *why = NULL;
    if (rates->gflops < 1 || rates->gbps < 1 || rates->copy_gbps < 1) {
        *why = "planning rates must be positive";
        return KV_ERR_INVALID;
    }
    if (cfg->n_strategies < 1 || cfg->n_strategies > KV_SWEEP_MAX_STRATEGIES ||
        cfg->n_lens < 1 || cfg->n_lens > KV_SWEEP_MAX_LENS || cfg->batch < 1 ||
        mc->n_heads < 1 || mc->dim % mc->n_heads != 0) {
        *why = "invalid sweep configuration";
        return KV_ERR_INVALID;
    }
    struct kv_plan *p = kv_alloc(sizeof *p);
    if (p == NULL)
        return KV_ERR_NOMEM;
    memset(p, 0, sizeof *p);
    p->rates = *rates;
    p->warmup = cfg->warmup;
    p->batch = cfg->batch;
    p->n_lens = cfg->n_lens;
    for (int32_t ti = 0; ti < cfg->n_lens; ti++) {
        p->seq_lens[ti] = cfg->seq_lens[ti];
        p->reps_at[ti] = kv_sweep_reps_cached(cfg, cfg->seq_lens[ti]);
    }

    /* the model's closed forms (bench/model/model.c's GEMM calls) */
    const int64_t D = mc->dim, HS = mc->dim / mc->n_heads, KVD = (int64_t)mc->n_kv_heads * HS;
    const int64_t B = cfg->batch, L = mc->n_layers;
    int64_t per_layer = 4 * D * D + 4 * KVD * D + (mc->mlp ? 6 * (int64_t)mc->hidden_dim * D : 0);
    p->gemm_per_token = sat_mul(sat_mul(per_layer, L), B);
    p->classifier = sat_mul(2 * (int64_t)mc->vocab_size * D, B);
    p->attn_per_layer_pair = sat_mul(4 * HS * mc->n_heads, B);
    p->attn_per_pair = sat_mul(p->attn_per_layer_pair, L);
    p->weights = (int64_t)kv_model_weight_bytes(mc);

    /* rows, in file order */
    for (int32_t i = 0; i < cfg->n_strategies; i++)
        for (int32_t ti = 0; ti < cfg->n_lens; ti++)
            if (in_sweep(cfg, i, ti))
                p->rows[p->n_rows++] = (struct kv_plan_row){
                    .strategy = i, .len_index = ti, .seq_len = cfg->seq_lens[ti], .shard = 1};
    if (n_shards < 1 || n_shards > p->n_rows) {
        *why = "more shards than the sweep has rows";
        kv_free(p);
        return KV_ERR_INVALID;
    }
    p->n_shards = n_shards;

    /* slots in sweep.c's order: the reference first, then the list */
    int32_t ref = kv_sweep_reference(cfg);
    p->slot_index[p->n_slots++] = ref;
    for (int32_t i = 0; i < cfg->n_strategies; i++)
        if (i != ref)
            p->slot_index[p->n_slots++] = i;
    for (int32_t k = 0; k < p->n_slots; k++)
        p->slot_none[k] = p->slot_index[k] >= 0 &&
                          (cfg->strategies[p->slot_index[k]].ops->caps & KV_CAP_KEEPS_HISTORY) == 0;

    /* probe every slot along the whole schedule */
    int32_t max_tokens = cfg->seq_lens[cfg->n_lens - 1];
    if (max_tokens < KV_SWEEP_PREFILL_CHUNK)
        max_tokens = KV_SWEEP_PREFILL_CHUNK;
    size_t nz = (size_t)max_tokens * (size_t)HS;
    float *zeros = kv_alloc(nz * sizeof(float));
    if (zeros == NULL) {
        kv_free(p);
        return KV_ERR_NOMEM;
    }
    memset(zeros, 0, nz * sizeof(float));
    enum kv_status st = KV_OK;
    for (int32_t k = 0; k < p->n_slots && st == KV_OK; k++)
        st = probe_slot(p, cfg, mc, k, zeros);
    kv_free(zeros);
    if (st != KV_OK) {
        if (st == KV_ERR_INVALID || st == KV_ERR_OVERFLOW || st == KV_ERR_FULL)
            *why = plan_why;
        kv_free(p);
        return st;
    }

    /* each row alone, the whole sweep, then the shards */
    uint8_t *member = kv_alloc((size_t)p->n_rows);
    if (member == NULL) {
        kv_free(p);
        return KV_ERR_NOMEM;
    }
    memset(member, 0, (size_t)p->n_rows);
    for (int32_t r = 0; r < p->n_rows; r++) {
        member[r] = 1;
        p->rows[r].alone_ns = simulate(p, member, NULL);
        member[r] = 0;
    }
    memset(member, 1, (size_t)p->n_rows);
    p->whole_ns = simulate(p, member, NULL);
    kv_free(member);
    st = assign(p);
    if (st != KV_OK) {
        kv_free(p);
        return st;
    }
    plan_hashes(p, cfg, mc);
    *out = p;
    return KV_OK;
}

void kv_plan_destroy(struct kv_plan *p)
{
    kv_free(p);
}

void kv_plan_select(const struct kv_plan *p, int32_t shard,
                    uint32_t only[KV_SWEEP_MAX_STRATEGIES])
{
    memset(only, 0, KV_SWEEP_MAX_STRATEGIES * sizeof only[0]);
    for (int32_t r = 0; r < p->n_rows; r++)
        if (p->rows[r].shard == shard)
            only[p->rows[r].strategy] |= 1u << p->rows[r].len_index;
}
