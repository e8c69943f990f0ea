/*
 * sweep.c - the measurement loop of `kvlab sweep` (contract in sweep.h).
 *
 * Shape of a run:
 *   tokens (batch, capacity)      one seeded random sequence per batch row
 *                                 (seed and row alone), fed to everyone
 *   for each T ascending:
 *     for each cached slot (the reference first):
 *       reset, chunked prefill to P = T-1-W-(R-1)/2 tokens   (untimed)
 *       W warm-up + R timed decode steps at positions P .. P+W+R-1
 *       the reference stores its logits per step, the others compare
 *     `none` (if T <= none_max): W + R full forwards of tokens[0..T)
 *   a row the interference classifier calls noisy (noise.h: another
 *   program ran) is measured again after a pause, from a fresh prefill
 *   (retry_row, backoff)
 *
 * The key decision is the lockstep: all caches see the same tokens at the
 * same positions through the same appends, so the exact `dynamic` cache's
 * logits at each step are the reference for every other strategy. A cache
 * is emptied before each row, so a row never depends on the rows before it
 * (sweep.h). Everything the loop needs (runner,
 * caches, token and logit buffers) is allocated before the first timed
 * step; the only allocations inside it are the ones a strategy makes itself
 * (dynamic's doubling, dynamic-concat's copies), which is what they measure.
 */
#include "sweep.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../kernels/kv_ops.h"
#include "../model/checkpoint.h"
#include "roofline.h"
#include "stats.h"
#include "sysinfo.h"

/* ------------------------------------------------------------------------ */
/* Slots: one cache per measured strategy, plus a hidden reference          */

struct slot {
    int32_t index;            /* into cfg->strategies; -1: hidden reference */
    const struct kv_strategy_ops *ops;
    const void *params;       /* ops->params_size bytes */
    const char *label;
    struct kv_cache *cache;
    int32_t len;              /* tokens the cache holds */
    int32_t is_none;          /* keeps no history: full re-run per step */
    int32_t whole_prefill;    /* no KV_CAP_CHUNKED_APPEND (a ring buffer): the
                                 cache cannot be extended by a multi-token chunk,
                                 so prefill refills it from empty in one forward */
    int32_t window;           /* the mask window of its views, read once from the
                                 empty cache (the rows' window column) */
    int32_t prev_T;           /* none: previous measured T (auto reps) */
    int64_t prev_median;      /* none: its median step time */
};

struct sweep {
    const struct kv_sweep_config *cfg;
    const struct kv_model *m;
    struct kv_runner *runner;
    struct slot slots[KV_SWEEP_MAX_STRATEGIES + 1];
    int32_t n_slots;          /* slots[0] is the reference (kv_sweep_reference_strategy) */
    int32_t capacity;         /* positions per sequence */
    int32_t max_call;         /* most tokens per sequence in one forward */
    int32_t vocab;
    int32_t *seq;             /* (batch, capacity) token ids */
    int32_t *call;            /* (batch, max_call) tokens of one forward */
    float *logits;            /* (batch, vocab) */
    float *ref_logits;        /* (W + max reps, batch, vocab) reference per step */
    int64_t *times;           /* (max reps) step wall times */
    int64_t *attn;            /* (max reps) attention times */
    int64_t *gemv, *ops, *sync; /* (max reps) the rest of the step's split */
    int32_t max_reps;
    /* progress */
    int64_t t_start;
    double pred_total, pred_done; /* predicted ns of all work / of finished work */
    int32_t rows_total, rows_done;
    int32_t retries_left;     /* for the whole run (KV_SWEEP_RETRY_BUDGET) */
    int32_t noisy_streak;     /* reported rows in a row still noisy (KV_SWEEP_BUSY_ROWS) */
    char busy[KV_SWEEP_NOISE_LEN]; /* the last attempt's noise reason, "" when clean */
};

/* ------------------------------------------------------------------------ */
/* Small helpers                                                            */

static int stopped(const struct kv_sweep_config *cfg)
{
    return cfg->stop != NULL && *cfg->stop;
}

/* The value of the parameter called name, or 0 when the strategy has none
 * (the schema-v1 columns group and residual). */
static int32_t param_or_zero(const struct kv_strategy_ops *ops, const void *params,
                             const char *name)
{
    int32_t i = kv_param_find(ops, name);
    return i < 0 ? 0 : kv_params_get(ops, params, i);
}

/* ------------------------------------------------------------------------ */
/* Work prediction (ETA and automatic reps for `none`)                      */

/* GEMM FLOPs per token through every layer (projections and MLP). */
static double gemm_flops_per_token(const struct kv_model_config *c)
{
    double D = c->dim, KVD = (double)c->n_kv_heads * (c->dim / c->n_heads);
    double per_layer = 2.0 * (D * D + 2.0 * D * KVD + D * D);
    if (c->mlp)
        per_layer += 2.0 * 3.0 * D * c->hidden_dim;
    return per_layer * c->n_layers;
}

/* Attention FLOPs per visible (query, key) pair through every layer. */
static double attn_flops_per_pair(const struct kv_model_config *c)
{
    return 4.0 * (c->dim / c->n_heads) * c->n_heads * c->n_layers;
}

/* Bytes of f32 K+V per token per sequence, all layers. */
static double kv_bytes_per_token(const struct kv_model_config *c)
{
    return 2.0 * c->n_layers * (double)c->n_kv_heads * (c->dim / c->n_heads) * 4.0;
}

static double pred_ns(const struct sweep *s, double flops, double bytes)
{
    double a = flops / s->cfg->est_gflops, b = bytes / s->cfg->est_gbps;
    return a > b ? a : b;
}

/* A decode step attending over T tokens. */
static double pred_decode(const struct sweep *s, int32_t T)
{
    const struct kv_model_config *c = &s->m->cfg;
    double B = s->cfg->batch;
    double fl = B * (gemm_flops_per_token(c) + attn_flops_per_pair(c) * T);
    double by = (double)kv_model_weight_bytes(c) + B * kv_bytes_per_token(c) * T;
    return pred_ns(s, fl, by);
}

/* A `none` step: a forward of the whole T-token prefix. */
static double flops_none(const struct sweep *s, int32_t T)
{
    const struct kv_model_config *c = &s->m->cfg;
    return s->cfg->batch * (gemm_flops_per_token(c) * T +
                            attn_flops_per_pair(c) * 0.5 * (double)T * (T + 1.0));
}

/* buf <- the cache's resident bytes per layer, run-length ("B*N;B"). */
static void format_layer_bytes(char *buf, size_t n, const struct kv_cache *c)
{
    size_t w = 0;
    buf[0] = '\0';
    for (int32_t l = 0; l < c->cfg.n_layers;) {
        const size_t b = kv_cache_layer_bytes(c, l);
        int32_t run = 1;
        while (l + run < c->cfg.n_layers && kv_cache_layer_bytes(c, l + run) == b)
            run++;
        const int k = run > 1 ? snprintf(buf + w, n - w, "%s%zu*%d", w ? ";" : "", b, run)
                              : snprintf(buf + w, n - w, "%s%zu", w ? ";" : "", b);
        if (k < 0 || (size_t)k >= n - w) { /* does not fit: cut, marked */
            snprintf(buf + (w + 4 < n ? w : n - 4), 4, "...");
            return;
        }
        w += (size_t)k;
        l += run;
    }
}

/* The DRAM read limit beside a row (--bound): before the attempt and
 * after its timed steps, an untimed warm-up pass and probe_passes timed
 * ones (kv_read_probe_best), each reading the probe's array `sweeps`
 * times. */
static double pred_probe(const struct sweep *s)
{
    const struct kv_read_probe *p = s->cfg->probe;
    if (p == NULL || s->cfg->probe_passes < 1)
        return 0.0;
    const double pass = (double)p->n * sizeof(float) * (p->sweeps > 0 ? p->sweeps : 1);
    return 2.0 * (s->cfg->probe_passes + 1) * pass / s->cfg->est_gbps;
}

/* Prefill from a to b tokens (untimed, chunked). */
static double pred_prefill(const struct sweep *s, int32_t a, int32_t b)
{
    if (b <= a)
        return 0.0;
    const struct kv_model_config *c = &s->m->cfg;
    double pairs = 0.5 * ((double)b * (b + 1.0) - (double)a * (a + 1.0));
    double fl = s->cfg->batch * (gemm_flops_per_token(c) * (b - a) +
                                 attn_flops_per_pair(c) * pairs);
    return fl / s->cfg->est_gflops;
}

/* Odd count of `none` steps that fits the row budget, or cfg->reps. */
static int32_t reps_none(const struct sweep *s, const struct slot *sl, int32_t T)
{
    if (s->cfg->reps > 0)
        return s->cfg->reps;
    double step = sl->prev_T > 0
                      ? (double)sl->prev_median * flops_none(s, T) / flops_none(s, sl->prev_T)
                      : flops_none(s, T) / s->cfg->est_gflops;
    double r = (double)KV_SWEEP_NONE_BUDGET_NS / (step > 1.0 ? step : 1.0);
    int32_t R = r > KV_SWEEP_AUTO_REPS ? KV_SWEEP_AUTO_REPS : (int32_t)r;
    if (R < KV_SWEEP_NONE_REPS_MIN)
        R = KV_SWEEP_NONE_REPS_MIN;
    return R % 2 ? R : R - 1;
}

/* ------------------------------------------------------------------------ */
/* Configuration                                                            */

static int none_runs_at(const struct kv_sweep_config *cfg, int32_t T)
{
    return cfg->none_max == 0 || T <= cfg->none_max;
}

int kv_sweep_same_config(const struct kv_strategy_ops *a_ops, const void *a_params,
                         const struct kv_strategy_ops *b_ops, const void *b_params)
{
    return a_ops != NULL && a_ops == b_ops &&
           (a_ops->params_size == 0 || memcmp(a_params, b_params, a_ops->params_size) == 0);
}

int32_t kv_sweep_list_repeat(const int32_t *v, int32_t n, int32_t *first)
{
    for (int32_t i = 1; i < n; i++)
        for (int32_t j = 0; j < i; j++)
            if (v[i] == v[j]) {
                if (first != NULL)
                    *first = j;
                return i;
            }
    return -1;
}

int kv_sweep_row_planned(const struct kv_sweep_config *cfg, int32_t i, int32_t ti)
{
    return (cfg->strategies[i].ops->caps & KV_CAP_KEEPS_HISTORY) != 0 ||
           none_runs_at(cfg, cfg->seq_lens[ti]);
}

/* Row (i, ti) is measured and reported: planned, and in cfg->only. */
static int row_selected(const struct kv_sweep_config *cfg, int32_t i, int32_t ti)
{
    return i >= 0 && kv_sweep_row_planned(cfg, i, ti) &&
           (cfg->only == NULL || ((cfg->only[i] >> ti) & 1u));
}

int32_t kv_sweep_reference(const struct kv_sweep_config *cfg)
{
    const struct kv_sweep_strategy *r = kv_sweep_reference_strategy();
    for (int32_t i = 0; r != NULL && i < cfg->n_strategies; i++) /* at its defaults */
        if (cfg->strategies[i].ops == r->ops &&
            memcmp(cfg->strategies[i].params, r->params, r->ops->params_size) == 0)
            return i;
    return -1;
}

/* The exact reference every row's logits are compared with: the first
 * registered strategy that keeps history, reads back exactly, evicts
 * nothing and grows (a dynamic cache), with its default parameters. Made
 * once (the registry is fixed before a sweep starts). */
const struct kv_sweep_strategy *kv_sweep_reference_strategy(void)
{
    static struct kv_sweep_strategy hidden;
    if (hidden.ops == NULL) {
        const struct kv_strategy_ops *ops = kv_strategy_with(
            KV_CAP_KEEPS_HISTORY, KV_CAP_LOSSY | KV_CAP_EVICTS | KV_CAP_PREALLOCATES);
        if (ops == NULL || ops->params_size > sizeof hidden.params)
            return NULL;
        kv_params_defaults(ops, hidden.params);
        snprintf(hidden.label, sizeof hidden.label, "reference");
        hidden.ops = ops;
    }
    return &hidden;
}

void kv_sweep_cache_config(struct kv_cache_config *cc, const struct kv_sweep_config *cfg,
                           const struct kv_model_config *mc,
                           const struct kv_sweep_strategy *st)
{
    (void)st; /* its parameters travel in st->params */
    *cc = cfg->cache;
    cc->n_layers = mc->n_layers;
    cc->batch = cfg->batch;
    cc->n_kv_heads = mc->n_kv_heads;
    cc->head_dim = mc->dim / mc->n_heads;
    cc->max_len = kv_sweep_capacity(cfg);
}

/* A cache that cannot take a multi-token chunk once it holds tokens (a
 * ring buffer) is refilled from empty in one forward instead. */
int kv_sweep_whole_prefill(const struct kv_cache *c)
{
    return !kv_cache_has(c, KV_CAP_CHUNKED_APPEND);
}

int32_t kv_sweep_reps_cached(const struct kv_sweep_config *cfg, int32_t T)
{
    if (cfg->reps > 0)
        return cfg->reps;
    /* automatic: as many as fit the centring constraint T > W + (R-1)/2 */
    int32_t R = KV_SWEEP_AUTO_REPS;
    int32_t fit = 2 * (T - 1 - cfg->warmup) + 1;
    if (R > fit)
        R = fit;
    return R < 1 ? 1 : R;
}

static int32_t max_reps(const struct kv_sweep_config *cfg)
{
    return cfg->reps > 0 ? cfg->reps : KV_SWEEP_AUTO_REPS;
}

int32_t kv_sweep_capacity(const struct kv_sweep_config *cfg)
{
    if (cfg->n_lens < 1)
        return 0;
    int64_t cap = (int64_t)cfg->seq_lens[cfg->n_lens - 1] + cfg->warmup + max_reps(cfg);
    return cap > INT32_MAX ? INT32_MAX : (int32_t)cap;
}

enum kv_status kv_sweep_check(const struct kv_sweep_config *cfg, const struct kv_model *m,
                              const char **why)
{
    *why = NULL;
    if (cfg->n_strategies < 1 || cfg->n_strategies > KV_SWEEP_MAX_STRATEGIES)
        *why = "between 1 and " KV_SWEEP_STR(KV_SWEEP_MAX_STRATEGIES) " strategies are needed";
    else if (cfg->n_lens < 1 || cfg->n_lens > KV_SWEEP_MAX_LENS)
        *why = "between 1 and 32 sequence lengths are needed";
    else if (cfg->warmup < 0 || cfg->reps < 0 || cfg->max_retries < 0 || cfg->batch < 1 ||
             cfg->threads < 1)
        *why = "warmup, reps, retries, batch and threads must be positive";
    else if (!(cfg->est_gflops > 0.0) || !(cfg->est_gbps > 0.0))
        *why = "machine rate estimates must be positive";
    else if (cfg->noise != NULL &&
             !(cfg->noise->max_other_cores >= 0.0 && cfg->noise->min_cpu_util >= 0.0 &&
               cfg->noise->max_steal >= 0.0 && cfg->noise->max_nivcsw_per_s >= 0.0 &&
               cfg->noise->max_spread >= 0.0))
        *why = "noise thresholds must be numbers >= 0";
    if (*why != NULL)
        return KV_ERR_INVALID;
    static _Thread_local char msg[256];
    for (int32_t i = 0; i < cfg->n_strategies; i++) {
        const struct kv_sweep_strategy *st = &cfg->strategies[i];
        if (st->ops == NULL) {
            *why = "unknown strategy";
            return KV_ERR_INVALID;
        }
        /* the text rule (strategy.h), before any work: a label goes into
         * the CSV, the plots' legends and every message */
        char sub[192];
        if (memchr(st->label, '\0', sizeof st->label) == NULL ||
            kv_label_why(st->label, sub, sizeof sub) != 0) {
            snprintf(msg, sizeof msg, "strategy %d's label: %s",
                     (int)i + 1, memchr(st->label, '\0', sizeof st->label) == NULL
                                     ? "not terminated" : sub);
            *why = msg;
            return KV_ERR_INVALID;
        }
        for (int32_t j = 0; j < i; j++) {
            /* twice at one T (a row would have two measurements); the same
             * configuration at different T of an `only` mask (a frontier's
             * budgets) is two rows, not a repeat */
            if (kv_sweep_same_config(cfg->strategies[j].ops, cfg->strategies[j].params,
                                     st->ops, st->params) &&
                (cfg->only == NULL || (cfg->only[i] & cfg->only[j]) != 0)) {
                snprintf(msg, sizeof msg, "a strategy is listed twice (%s and %s are one "
                         "configuration)", cfg->strategies[j].label, st->label);
                *why = msg;
                return KV_ERR_INVALID;
            }
        }
    }
    for (int32_t i = 0; i < cfg->n_lens; i++) {
        int32_t T = cfg->seq_lens[i];
        if (T < 2 || (i > 0 && T <= cfg->seq_lens[i - 1])) {
            *why = "sequence lengths must be >= 2 and strictly ascending";
            return KV_ERR_INVALID;
        }
        if (cfg->reps > 0 && T <= cfg->warmup + (cfg->reps - 1) / 2) {
            *why = "every sequence length T must exceed warmup + (reps-1)/2, "
                   "because the timed steps are centred on T";
            return KV_ERR_INVALID;
        }
    }
    /* A row per (strategy, T), except `none`-like strategies (no history)
     * past none_max: a sweep that would measure nothing is bad input, not a
     * successful run with an empty file. */
    int32_t rows = 0;
    for (int32_t i = 0; i < cfg->n_strategies; i++)
        for (int32_t t = 0; t < cfg->n_lens; t++)
            rows += (cfg->strategies[i].ops->caps & KV_CAP_KEEPS_HISTORY) != 0 ||
                    none_runs_at(cfg, cfg->seq_lens[t]);
    if (rows == 0) {
        *why = "no row to measure: every listed strategy keeps no history and every "
               "sequence length exceeds --none-max";
        return KV_ERR_INVALID;
    }
    if (kv_sweep_capacity(cfg) > m->cfg.max_len) {
        *why = "the model's max length is below the largest T + warmup + reps";
        return KV_ERR_INVALID;
    }
    int32_t n_rows = 0;
    for (int32_t i = 0; i < cfg->n_strategies; i++)
        for (int32_t ti = 0; ti < cfg->n_lens; ti++)
            n_rows += row_selected(cfg, i, ti);
    if (n_rows == 0) {
        *why = "the sweep selects no row";
        return KV_ERR_INVALID;
    }
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* Setup and teardown                                                       */

static void sweep_free(struct sweep *s)
{
    for (int32_t i = 0; i < s->n_slots; i++)
        kv_cache_destroy(s->slots[i].cache);
    kv_runner_destroy(s->runner);
    kv_free(s->seq);
    kv_free(s->call);
    kv_free(s->logits);
    kv_free(s->ref_logits);
    kv_free(s->times);
    kv_free(s->attn);
    kv_free(s->gemv);
    kv_free(s->ops);
    kv_free(s->sync);
}

static void slot_init(struct slot *sl, const struct kv_sweep_strategy *st, int32_t index)
{
    memset(sl, 0, sizeof(*sl));
    sl->index = index;
    sl->ops = st->ops;
    sl->params = st->params;
    sl->label = st->label;
    sl->is_none = (st->ops->caps & KV_CAP_KEEPS_HISTORY) == 0;
}

static enum kv_status sweep_setup(struct sweep *s)
{
    const struct kv_sweep_config *cfg = s->cfg;
    const struct kv_model_config *mc = &s->m->cfg;
    s->capacity = kv_sweep_capacity(cfg);
    s->vocab = mc->vocab_size;
    s->max_reps = max_reps(cfg);

    /* Slots: the reference (listed or hidden) first, then the list. */
    if (kv_sweep_reference_strategy() == NULL)
        return KV_ERR_INVALID;
    int32_t ref = kv_sweep_reference(cfg);
    if (ref >= 0)
        slot_init(&s->slots[s->n_slots++], &cfg->strategies[ref], ref);
    else
        slot_init(&s->slots[s->n_slots++], kv_sweep_reference_strategy(), -1);
    for (int32_t i = 0; i < cfg->n_strategies; i++)
        if (i != ref)
            slot_init(&s->slots[s->n_slots++], &cfg->strategies[i], i);

    /* Largest forward: a whole prefill from empty (whole_prefill slots), or
     * `none`'s whole prefix. */
    s->max_call = cfg->seq_lens[cfg->n_lens - 1];

    enum kv_status st = kv_runner_create(&s->runner, s->m, cfg->batch, s->max_call,
                                         cfg->threads);
    if (st != KV_OK)
        return st;
    for (int32_t i = 0; i < s->n_slots; i++) {
        struct kv_cache_config cc;
        const struct kv_sweep_strategy *st_i = s->slots[i].index >= 0
                                                   ? &cfg->strategies[s->slots[i].index]
                                                   : kv_sweep_reference_strategy();
        kv_sweep_cache_config(&cc, cfg, mc, st_i);
        st = kv_cache_create(&s->slots[i].cache, s->slots[i].ops, &cc, st_i->params);
        if (st != KV_OK)
            return st;
        s->slots[i].whole_prefill = kv_sweep_whole_prefill(s->slots[i].cache);
        s->slots[i].window = kv_cache_mask_window(s->slots[i].cache);
    }

    size_t B = (size_t)cfg->batch, V = (size_t)s->vocab;
    size_t steps = (size_t)cfg->warmup + (size_t)s->max_reps;
    s->seq = kv_alloc(B * (size_t)s->capacity * sizeof(int32_t));
    s->call = kv_alloc(B * (size_t)s->max_call * sizeof(int32_t));
    s->logits = kv_alloc(B * V * sizeof(float));
    s->ref_logits = kv_alloc(steps * B * V * sizeof(float));
    s->times = kv_alloc((size_t)s->max_reps * sizeof(int64_t));
    s->attn = kv_alloc((size_t)s->max_reps * sizeof(int64_t));
    s->gemv = kv_alloc((size_t)s->max_reps * sizeof(int64_t));
    s->ops = kv_alloc((size_t)s->max_reps * sizeof(int64_t));
    s->sync = kv_alloc((size_t)s->max_reps * sizeof(int64_t));
    if (!s->seq || !s->call || !s->logits || !s->ref_logits || !s->times || !s->attn ||
        !s->gemv || !s->ops || !s->sync)
        return KV_ERR_NOMEM;

    /* One fixed token sequence per batch row, from the seed and the row's
     * number alone: token i of sequence b is the same whatever the sweep's
     * capacity (its largest T), so a row's inputs never depend on the
     * other rows of the run. Sequence 0 is the stream it always was. */
    for (size_t b = 0; b < B; b++) {
        uint64_t rng = (cfg->seed ^ 0x6B766C6162ull) /* "kvlab" */ +
                       (uint64_t)b * 0x9E3779B97F4A7C15ull;
        for (size_t i = 0; i < (size_t)s->capacity; i++)
            s->seq[b * (size_t)s->capacity + i] =
                (int32_t)(kv_rng_next(&rng) % (uint64_t)s->vocab);
    }
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* Forwards                                                                 */

/* One forward of tokens [pos0, pos0+n) of every sequence. */
static enum kv_status forward(struct sweep *s, struct kv_cache *cache, int32_t pos0,
                              int32_t n, struct kv_step_stats *st)
{
    for (int32_t b = 0; b < s->cfg->batch; b++)
        memcpy(s->call + (size_t)b * n, s->seq + (size_t)b * s->capacity + pos0,
               (size_t)n * sizeof(int32_t));
    return kv_forward(s->runner, s->m, cache, s->call, n, pos0, NULL, s->logits, st);
}

/*
 * Untimed: brings a cached slot to exactly `target` tokens, extending it in
 * chunks of up to KV_SWEEP_PREFILL_CHUNK tokens (a row calls it on an empty
 * cache: timed_attempt resets first, so every row sees the same appends, and
 * shard.c's probe mirrors it). A slot with whole_prefill
 * set (a strategy with a sliding window: its ring cannot take a
 * multi-token update that would evict keys the same call still needs) is
 * instead refilled from empty in one forward whenever it is not already at
 * target; a strategy accepts any prompt length into an empty cache. This is
 * decided up front from the cache's declared window, so every error a
 * forward returns here is a real error and propagates.
 */
static enum kv_status prefill_to(struct sweep *s, struct slot *sl, int32_t target)
{
    if (sl->len > target || (sl->whole_prefill && sl->len != target && sl->len > 0)) {
        enum kv_status st = kv_cache_reset(sl->cache);
        if (st != KV_OK)
            return st;
        sl->len = 0;
    }
    while (sl->len < target && !stopped(s->cfg)) {
        int32_t n = target - sl->len;
        int32_t chunk = sl->whole_prefill ? s->max_call : KV_SWEEP_PREFILL_CHUNK;
        if (n > chunk)
            n = chunk;
        enum kv_status st = forward(s, sl->cache, sl->len, n, NULL);
        if (st != KV_OK)
            return st;
        sl->len += n;
    }
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* Accuracy against the reference                                           */

struct acc {
    double max_abs, max_rel;
    int64_t match, total;
};

/* Adds one step's logits (batch, vocab) against the reference's. */
static void acc_add(struct acc *a, const float *l, const float *ref, int32_t batch,
                    int32_t vocab)
{
    for (int32_t b = 0; b < batch; b++) {
        const float *x = l + (size_t)b * vocab, *r = ref + (size_t)b * vocab;
        double d2 = 0.0, r2 = 0.0;
        for (int32_t i = 0; i < vocab; i++) {
            double d = (double)x[i] - (double)r[i];
            d2 += d * d;
            r2 += (double)r[i] * r[i];
            if (!(fabs(d) <= a->max_abs)) /* a NaN is a difference, never "exact" */
                a->max_abs = fabs(d);
        }
        double rel = r2 > 0.0 ? sqrt(d2 / r2) : sqrt(d2);
        if (!(rel <= a->max_rel))
            a->max_rel = rel;
        /* argmax over NaNs picks token 0 for both: that is no agreement */
        a->match += kv_argmax(x, vocab) == kv_argmax(r, vocab) &&
                    kv_first_nonfinite(x, (size_t)vocab) == (size_t)vocab &&
                    kv_first_nonfinite(r, (size_t)vocab) == (size_t)vocab;
        a->total++;
    }
}

/* ------------------------------------------------------------------------ */
/* Progress                                                                 */

static void progress(struct sweep *s, const struct slot *sl, int32_t T,
                     struct kv_sweep_progress *p)
{
    p->strategy = sl->index;
    p->label = sl->label;
    p->seq_len = T;
    p->rows_done = s->rows_done;
    p->rows_total = s->rows_total;
    p->elapsed_ns = kv_now_ns() - s->t_start;
    p->frac_done = s->pred_total > 0 ? s->pred_done / s->pred_total : 0.0;
    if (p->frac_done > 1.0)
        p->frac_done = 1.0;
    double left = s->pred_total - s->pred_done;
    if (left < 0)
        left = 0;
    /* the plan's prediction, corrected by how fast the finished work really
     * went; the correction is weighed against KV_SWEEP_ETA_PRIOR of the
     * plan's own work, so one slow first row (a `none` row, a busy moment)
     * does not multiply the whole run's estimate */
    const double prior = KV_SWEEP_ETA_PRIOR * s->pred_total;
    double speed = prior > 0 ? ((double)p->elapsed_ns + prior) / (s->pred_done + prior) : 1.0;
    p->eta_ns = (int64_t)(left * speed);
    p->busy = s->busy[0] != '\0' ? s->busy : NULL;
}

static void row_start(struct sweep *s, const struct slot *sl, int32_t T)
{
    if (s->cfg->on_row_start == NULL)
        return;
    struct kv_sweep_progress p;
    progress(s, sl, T, &p);
    s->cfg->on_row_start(s->cfg->user, &p);
}

static void row_done(struct sweep *s, const struct slot *sl, int32_t T,
                     const struct kv_sweep_row *row, double pred)
{
    s->pred_done += pred;
    if (!row_selected(s->cfg, sl->index, row->len_index))
        return; /* the hidden reference, or the reference where only it is needed */
    s->rows_done++;
    if (s->cfg->on_row == NULL)
        return;
    struct kv_sweep_progress p;
    progress(s, sl, T, &p);
    s->cfg->on_row(s->cfg->user, row, &p);
}

/* ------------------------------------------------------------------------ */
/* Measuring one row                                                        */

/* Fills the configuration columns of a row. */
static void row_config(const struct sweep *s, const struct slot *sl, int32_t ti,
                       struct kv_sweep_row *row)
{
    memset(row, 0, sizeof(*row));
    row->strategy = sl->index;
    row->len_index = ti;
    row->window = sl->window;
    row->bits = kv_type_traits[kv_cache_dtype(sl->cache)].bits;
    row->group = param_or_zero(sl->ops, sl->params, "group");
    row->residual = param_or_zero(sl->ops, sl->params, "residual");
    row->seq_len = s->cfg->seq_lens[ti];
    row->warmup = s->cfg->warmup;
}

/* The seed of a row's bootstrap interval: the run's seed, the row's label
 * and T (FNV-1a), so the interval depends on the row and its steps alone,
 * never on which other rows the run measures or in what order (sweep.h). */
static uint64_t ci_seed(const struct sweep *s, const struct slot *sl, int32_t T)
{
    uint64_t h = 0xcbf29ce484222325ull ^ s->cfg->seed;
    for (const char *c = sl->label; *c != '\0'; c++)
        h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
    return (h ^ (uint64_t)(uint32_t)T) * 0x100000001b3ull;
}

/* Latency columns from the R timed steps, and the interval of their
 * median; KV_ERR_NOMEM when the bootstrap finds no memory. */
static enum kv_status row_times(struct sweep *s, const struct slot *sl, int32_t T,
                                struct kv_sweep_row *row, int32_t R)
{
    double sum = 0.0;
    for (int32_t i = 0; i < R; i++)
        sum += (double)s->times[i];
    int64_t lo, hi;
    if (kv_stats_median_ci_i64(s->times, R, KV_SWEEP_CI_RESAMPLES, ci_seed(s, sl, T),
                               KV_SWEEP_CI_LEVEL, &lo, &hi) != 0)
        return KV_ERR_NOMEM; /* its only failure with these arguments */
    row->step_ns_mean = sum / R;
    row->step_ns_median = kv_stats_median_i64(s->times, R);
    row->step_ns_p95 = kv_stats_percentile_i64(s->times, R, KV_STATS_P95);
    row->step_ns_min = s->times[0]; /* sorted by the calls above */
    row->attn_ns_median = kv_stats_median_i64(s->attn, R);
    row->gemv_ns_median = kv_stats_median_i64(s->gemv, R);
    row->ops_ns_median = kv_stats_median_i64(s->ops, R);
    row->sync_ns_median = kv_stats_median_i64(s->sync, R);
    /* the percentile interval of a few steps holds their median in
     * practice; widened to hold it always, so that ci_lo <= median <=
     * ci_hi is an invariant of the columns a reader may rely on */
    row->step_ns_ci_lo = lo < row->step_ns_median ? lo : row->step_ns_median;
    row->step_ns_ci_hi = hi > row->step_ns_median ? hi : row->step_ns_median;
    row->reps = R;
    row->peak_rss_bytes = kv_peak_rss_bytes();
    return KV_OK;
}

static void row_step_stats(struct kv_sweep_row *row, const struct kv_step_stats *st)
{
    row->flops_step = kv_flops_total(&st->flops);
    row->attn_flops_step = st->flops.attn;
    row->gemm_flops_step = st->flops.gemm;
    row->bytes_step = st->bytes_read;
    row->attn_bytes_step = st->attn_bytes;
}

/*
 * Whether to measure a row again: the interference classifier called its
 * attempt noisy (another program took the cores, so the latency is not the
 * code's), the row is reported (the hidden reference's times are never
 * written, only its logits are used, so re-measuring it would spend the
 * run's budget on nothing), retries are left for the row and the run, and
 * the machine has not been busy for the last KV_SWEEP_BUSY_ROWS rows.
 */
static int retry_row(struct sweep *s, const struct slot *sl, const struct kv_sweep_row *row)
{
    if (stopped(s->cfg) || !row->noisy || !row_selected(s->cfg, sl->index, row->len_index) ||
        row->attempts > s->cfg->max_retries || s->retries_left <= 0 ||
        s->noisy_streak >= KV_SWEEP_BUSY_ROWS)
        return 0;
    s->retries_left--;
    return 1;
}

/* The pause before retry k of a row (sweep.h): a competitor's burst (a
 * compile step, a cron job) is often over by then, while measuring again at
 * once mostly measures the burst again. Slept in slices of at most 50 ms, so
 * that a stop ends it promptly. */
static void backoff(const struct sweep *s, int32_t retry)
{
    int64_t ns = KV_SWEEP_BACKOFF_NS;
    for (int32_t k = 1; k < retry && ns < KV_SWEEP_BACKOFF_MAX_NS; k++)
        ns *= 2;
    if (ns > KV_SWEEP_BACKOFF_MAX_NS)
        ns = KV_SWEEP_BACKOFF_MAX_NS;
    while (ns > 0 && !stopped(s->cfg)) {
        const int64_t slice = ns < 50000000 ? ns : 50000000;
        const struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)slice};
        nanosleep(&ts, NULL);
        ns -= slice;
    }
}

/*
 * One measurement of a slot at T: W warm-up then R timed steps, filling the
 * row's measured columns and its noise verdict (not the latency summary,
 * which row_times makes from s->times). Returns KV_OK with *complete = 0
 * when interrupted.
 *
 * A cached slot is prefilled to P (from empty when the cache is past P, as
 * on a retry) and then decodes one token per step at positions
 * P .. P+W+R-1: step j attends over P+j+1 tokens, step mid = W + (R-1)/2
 * over exactly T, and step j is compared with the reference's step j. The
 * reference slot (slots[0]) records its logits instead.
 * `none` re-runs tokens [0, T) every step, so each step attends over exactly
 * T tokens and is compared with the reference's step at T (index
 * W + (R_ref-1)/2 of this T's plan).
 *
 * The interference window opens after the warm-up and closes after the
 * last timed step: what it saw, with the steps' own spread, is the row's
 * verdict (kv_noise_classify), and its CPU share is the cpu_util column.
 */
static enum kv_status timed_attempt(struct sweep *s, struct slot *sl, int32_t T,
                                    struct kv_sweep_row *row, int *complete)
{
    const struct kv_sweep_config *cfg = s->cfg;
    const int none = sl->is_none;
    const int32_t W = cfg->warmup, R = row->reps;
    const int32_t P = T - 1 - W - (R - 1) / 2;
    const int32_t stats_at = none ? W : W + (R - 1) / 2;
    const int32_t ref_mid = W + (kv_sweep_reps_cached(cfg, T) - 1) / 2;
    const int is_ref = sl == &s->slots[0];
    const size_t BV = (size_t)cfg->batch * (size_t)s->vocab;
    *complete = 0;
    /* the limit beside the row: before its prefill and warm-up, which bring
     * back what the probe evicted */
    double bound_before = NAN;
    if (cfg->probe != NULL)
        bound_before = kv_read_probe_best(cfg->probe, cfg->probe_passes);
    if (!none) {
        /* from an empty cache, always: what a cache holds at a step (a
         * quantized cache's residual, which tokens a block flush took)
         * depends on the appends that brought it there, so every row gets
         * the same ones - a prefill of P tokens from empty, then its steps -
         * whichever rows ran before it (another T, another shard) */
        enum kv_status st = sl->len > 0 ? kv_cache_reset(sl->cache) : KV_OK;
        if (st != KV_OK)
            return st;
        sl->len = 0;
        st = prefill_to(s, sl, P);
        if (st != KV_OK || stopped(cfg))
            return st;
    }

    struct acc acc = {0};
    size_t copied0 = 0;
    struct kv_noise_window win = {0}; /* opened at j == W: R >= 1, so always */
    for (int32_t j = 0; j < W + R; j++) {
        if (j == W) {
            copied0 = kv_cache_copied_bytes(sl->cache);
            kv_noise_begin(&win);
        }
        struct kv_step_stats ss = {0};
        int64_t t0 = kv_now_ns();
        enum kv_status st = none ? forward(s, sl->cache, 0, T, &ss)
                                 : forward(s, sl->cache, sl->len, 1, &ss);
        int64_t t1 = kv_now_ns();
        if (st != KV_OK)
            return st;
        if (!none)
            sl->len++;
        if (j >= W) {
            s->times[j - W] = t1 - t0;
            s->attn[j - W] = ss.attn_ns;
            s->gemv[j - W] = ss.gemv_ns;
            s->ops[j - W] = t1 - t0 - ss.attn_ns - ss.gemv_ns;
            s->sync[j - W] = ss.sync_ns;
        }
        if (j == stats_at) {
            row_step_stats(row, &ss);
            row->cache_bytes = kv_cache_resident_bytes(sl->cache);
            format_layer_bytes(row->layer_bytes, sizeof row->layer_bytes, sl->cache);
        }
        if (is_ref)
            memcpy(s->ref_logits + (size_t)j * BV, s->logits, BV * sizeof(float));
        else if (j >= W)
            acc_add(&acc, s->logits, s->ref_logits + (size_t)(none ? ref_mid : j) * BV,
                    cfg->batch, s->vocab);
        if (stopped(cfg))
            return KV_OK;
    }
    struct kv_noise_obs obs;
    kv_noise_end(&win, cfg->threads, &obs);
    row->bound_gbps = bound_before;
    if (cfg->probe != NULL) {
        double after = kv_read_probe_best(cfg->probe, cfg->probe_passes);
        if (isnan(row->bound_gbps) || after > row->bound_gbps)
            row->bound_gbps = after;
    }
    obs.step_ns = s->times; /* in step order: row_times has not sorted them yet */
    obs.n = R;
    struct kv_noise_limits lim;
    if (cfg->noise != NULL)
        lim = *cfg->noise;
    else
        kv_noise_limits_default(&lim);
    row->noisy = kv_noise_classify(&obs, &lim, row->noise_reason, sizeof row->noise_reason);
    snprintf(s->busy, sizeof s->busy, "%s", row->noisy ? row->noise_reason : "");
    row->copy_bytes_step = (double)(kv_cache_copied_bytes(sl->cache) - copied0) / R;
    row->cpu_util = obs.wall_ns > 0 ? (double)obs.own_cpu_ns /
                                          ((double)obs.wall_ns * cfg->threads)
                                    : 0.0;
    row->acc_measured = !is_ref;
    row->max_abs_err = is_ref ? 0.0 : acc.max_abs;
    row->rel_err = is_ref ? 0.0 : acc.max_rel;
    row->token_match = is_ref ? 1.0 : (double)acc.match / (double)acc.total;
    *complete = 1;
    return KV_OK;
}

/* Tells the caller a noisy row is measured again (cfg->on_retry). */
static void retrying(struct sweep *s, const struct slot *sl, int32_t T,
                     const struct kv_sweep_row *row)
{
    if (s->cfg->on_retry == NULL)
        return;
    struct kv_sweep_progress p;
    progress(s, sl, T, &p);
    s->cfg->on_retry(s->cfg->user, &p, row->attempts + 1, row->noise_reason);
}

/*
 * Measures a slot at T until an attempt is clean or the retries run out
 * (retry_row, with a pause before each: backoff), then the latency columns.
 * A row still noisy keeps its LAST attempt's figures, flagged: its reason
 * and cpu_util then describe the very steps its times came from, while
 * reporting the fastest or the "least noisy" attempt would select on the
 * measured value (the least of a few medians is biased low) and hide that
 * every attempt was disturbed. KV_OK with *complete = 0 when interrupted.
 */
static enum kv_status measure_attempts(struct sweep *s, struct slot *sl, int32_t T,
                                       struct kv_sweep_row *row, int *complete)
{
    for (row->attempts = 1;; row->attempts++) {
        enum kv_status st = timed_attempt(s, sl, T, row, complete);
        if (st != KV_OK || !*complete)
            return st;
        if (!retry_row(s, sl, row))
            break;
        retrying(s, sl, T, row);
        backoff(s, row->attempts);
        if (stopped(s->cfg)) {
            *complete = 0;
            return KV_OK;
        }
    }
    if (row_selected(s->cfg, sl->index, row->len_index))
        s->noisy_streak = row->noisy ? s->noisy_streak + 1 : 0;
    return row_times(s, sl, T, row, row->reps);
}

/* A cached slot at T. */
static enum kv_status measure_cached(struct sweep *s, struct slot *sl, int32_t ti,
                                     int *done)
{
    const struct kv_sweep_config *cfg = s->cfg;
    const int32_t T = cfg->seq_lens[ti], W = cfg->warmup;
    const int32_t R = kv_sweep_reps_cached(cfg, T);
    const int32_t P = T - 1 - W - (R - 1) / 2;
    double pred = pred_prefill(s, 0, P) + (W + R) * pred_decode(s, T) + pred_probe(s);
    *done = 0;
    row_start(s, sl, T);

    struct kv_sweep_row row;
    row_config(s, sl, ti, &row);
    row.reps = R;
    row.seq_len_lo = T - (R - 1) / 2;
    row.seq_len_hi = row.seq_len_lo + R - 1;
    int complete;
    enum kv_status st = measure_attempts(s, sl, T, &row, &complete);
    if (st != KV_OK || !complete)
        return st;
    *done = 1;
    row_done(s, sl, T, &row, pred);
    return KV_OK;
}

static enum kv_status measure_none(struct sweep *s, struct slot *sl, int32_t ti, int *done)
{
    const struct kv_sweep_config *cfg = s->cfg;
    const int32_t T = cfg->seq_lens[ti], W = cfg->warmup;
    const int32_t R = reps_none(s, sl, T);
    double pred = (W + R) * flops_none(s, T) / cfg->est_gflops + pred_probe(s);
    *done = 0;
    if (R > s->max_reps)
        return KV_ERR_INVALID; /* cannot happen: reps_none caps at max_reps */
    row_start(s, sl, T);

    struct kv_sweep_row row;
    row_config(s, sl, ti, &row);
    row.reps = R;
    row.seq_len_lo = row.seq_len_hi = T;
    int complete;
    enum kv_status st = measure_attempts(s, sl, T, &row, &complete);
    if (st != KV_OK || !complete)
        return st;
    sl->prev_T = T;
    sl->prev_median = row.step_ns_median;
    *done = 1;
    row_done(s, sl, T, &row, pred);
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* The run                                                                  */

/* Whether slot i measures anything at seq_lens[ti]: its row is selected,
 * or it is the reference (slots[0]) and some other slot needs its logits. */
static int slot_runs_at(const struct sweep *s, int32_t i, int32_t ti)
{
    if (row_selected(s->cfg, s->slots[i].index, ti))
        return 1;
    if (i != 0)
        return 0;
    for (int32_t k = 1; k < s->n_slots; k++)
        if (slot_runs_at(s, k, ti))
            return 1;
    return 0;
}

/* Predicted total work and row count, for the ETA. */
static void plan(struct sweep *s)
{
    const struct kv_sweep_config *cfg = s->cfg;
    for (int32_t ti = 0; ti < cfg->n_lens; ti++) {
        int32_t T = cfg->seq_lens[ti], W = cfg->warmup;
        int32_t R = kv_sweep_reps_cached(cfg, T), P = T - 1 - W - (R - 1) / 2;
        for (int32_t i = 0; i < s->n_slots; i++) {
            const struct slot *sl = &s->slots[i];
            if (!slot_runs_at(s, i, ti))
                continue;
            if (sl->is_none) {
                int32_t Rn = reps_none(s, sl, T); /* before any row: analytic */
                s->pred_total += (W + Rn) * flops_none(s, T) / cfg->est_gflops;
            } else {
                s->pred_total += pred_prefill(s, 0, P) + (W + R) * pred_decode(s, T);
            }
            s->pred_total += pred_probe(s);
            s->rows_total += row_selected(cfg, sl->index, ti);
        }
    }
}

enum kv_status kv_sweep_run(const struct kv_sweep_config *cfg, const struct kv_model *m,
                            int32_t *interrupted)
{
    *interrupted = 0;
    const char *why;
    enum kv_status st = kv_sweep_check(cfg, m, &why);
    if (st != KV_OK)
        return st;
    struct sweep s;
    memset(&s, 0, sizeof(s));
    s.cfg = cfg;
    s.m = m;
    st = sweep_setup(&s);
    if (st != KV_OK) {
        sweep_free(&s);
        return st;
    }
    plan(&s);
    s.retries_left = KV_SWEEP_RETRY_BUDGET;
    s.t_start = kv_now_ns();

    for (int32_t ti = 0; ti < cfg->n_lens && st == KV_OK; ti++) {
        for (int32_t i = 0; i < s.n_slots && st == KV_OK; i++) {
            struct slot *sl = &s.slots[i];
            int done = 1;
            if (!slot_runs_at(&s, i, ti))
                continue;
            if (sl->is_none)
                st = measure_none(&s, sl, ti, &done);
            else
                st = measure_cached(&s, sl, ti, &done);
            if (st == KV_OK && !done) {
                *interrupted = 1;
                break;
            }
        }
        if (*interrupted)
            break;
    }
    sweep_free(&s);
    return st;
}
