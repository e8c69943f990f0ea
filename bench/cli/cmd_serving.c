/*
 * cmd_serving.c - `kvlab serving`: a request stream (a trace, or Poisson
 * arrivals with drawn lengths) through the real model under one strategy
 * and reservation policy, scheduled an iteration at a time within a pool of
 * KV memory (bench/serve/sched.h). Writes a row per request and a row per
 * iteration (the pool's split) when asked, and prints the summary.
 *
 * Everything a run could refuse is refused before it starts (exit 2, one
 * line): the options by their table, a malformed trace with its line, a
 * strategy that cannot serve, a pool that cannot hold some request alone.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_cmd.h"
#include "cli_io.h"
#include "cli_opts.h"
#include "commands.h"
#include "../measure/stats.h"
#include "../measure/sysinfo.h"
#include "../results/csv_write.h"
#include "../serve/sched.h"

enum { MODE_GEN = 1u << 0, MODE_TRACE = 1u << 1 };
static const char *const serving_modes[] = {"with generated requests (without --trace)",
                                            "with --trace"};
static const char *const reserve_names[] = {"context", "pow2", "exact", NULL};
static const char *const preempt_names[] = {"recompute", "swap", NULL};

struct serving_opts {
    const char *trace;
    double rate;
    int32_t requests;
    int workload;
    double prompt_mean, prompt_spread, output_mean, output_spread;
    int32_t prefixes, prefix_len;
    int share;
    double pool_mb;
    int reserve, preempt;
    int32_t max_batch, chunk;
    double fixed_step_ms;
    int32_t watch;
    const char *requests_out, *iterations_out, *summary_out;
    int quiet;
};

#define O(f) offsetof(struct serving_opts, f)
static const struct kv_opt serving_table[] = {
    {.name = "--trace", .kind = KV_OPT_INPUT, .off = O(trace), .modes = MODE_TRACE,
     .meta = "FILE", .help = "requests from a CSV: arrival_s,prompt_tokens,output_tokens[,prefix_id]"},
    {.name = "--rate", .kind = KV_OPT_FLOAT, .off = O(rate), .flo = 1e-6, .fhi = 1e6,
     .modes = MODE_GEN, .meta = "R", .help = "Poisson arrivals, requests per second"},
    {.name = "--requests", .kind = KV_OPT_INT, .off = O(requests), .lo = 1, .hi = KV_REQ_MAX,
     .modes = MODE_GEN, .meta = "N", .help = "requests to generate"},
    {.name = "--workload", .kind = KV_OPT_ENUM, .off = O(workload),
     .names = kv_workload_preset_names, .modes = MODE_GEN, .meta = "NAME",
     .help = "the lengths' shape: chat (long, wide outputs) or instruct (short)"},
    {.name = "--prompt-mean", .kind = KV_OPT_FLOAT, .off = O(prompt_mean), .flo = 1, .fhi = 1e6,
     .modes = MODE_GEN, .meta = "T", .help = "mean prompt tokens (lognormal; default the workload's)"},
    {.name = "--prompt-spread", .kind = KV_OPT_FLOAT, .off = O(prompt_spread), .flo = 0,
     .fhi = 1e6, .modes = MODE_GEN, .meta = "T", .help = "their standard deviation"},
    {.name = "--output-mean", .kind = KV_OPT_FLOAT, .off = O(output_mean), .flo = 1, .fhi = 1e6,
     .modes = MODE_GEN, .meta = "T", .help = "mean output tokens (lognormal; default the workload's)"},
    {.name = "--output-spread", .kind = KV_OPT_FLOAT, .off = O(output_spread), .flo = 0,
     .fhi = 1e6, .modes = MODE_GEN, .meta = "T", .help = "their standard deviation"},
    {.name = "--prefixes", .kind = KV_OPT_INT, .off = O(prefixes), .lo = 0,
     .hi = KV_REQ_MAX_GROUPS, .meta = "G", .help = "groups whose requests share a prompt prefix"},
    {.name = "--prefix-len", .kind = KV_OPT_INT, .off = O(prefix_len), .lo = 1, .hi = 1 << 24,
     .meta = "L", .help = "tokens of each group's shared prefix"},
    {.name = "--share-prefixes", .kind = KV_OPT_FLAG, .off = O(share),
     .help = "a group's requests read one prefilled copy of its prefix (paged)"},
    {.name = "--pool-mb", .kind = KV_OPT_FLOAT, .off = O(pool_mb), .flo = 1e-3, .fhi = 1e7,
     .meta = "MB", .help = "the KV memory every running request's cache must fit in (MiB)"},
    {.name = "--reserve", .kind = KV_OPT_ENUM, .off = O(reserve), .names = reserve_names,
     .meta = "HOW", .help = "each request's cache length: context (Orca-Max), pow2, exact (Oracle)"},
    {.name = "--preempt", .kind = KV_OPT_ENUM, .off = O(preempt), .names = preempt_names,
     .meta = "HOW", .help = "when the pool is full: recompute or swap the last admitted"},
    {.name = "--max-batch", .kind = KV_OPT_INT, .off = O(max_batch), .lo = 1, .hi = 4096,
     .meta = "B", .help = "running requests at most"},
    {.name = "--chunk", .kind = KV_OPT_INT, .off = O(chunk), .lo = 1, .hi = 1 << 20, .meta = "T",
     .help = "prefill tokens per iteration (default: whole prompts)"},
    {.name = "--fixed-step-ms", .kind = KV_OPT_FLOAT, .off = O(fixed_step_ms), .flo = 1e-6,
     .fhi = 1e6, .meta = "MS", .help = "advance the clock by this per iteration, not the measured time"},
    {.name = "--watch", .kind = KV_OPT_INT, .off = O(watch), .lo = 1, .hi = 1 << 30, .meta = "N",
     .help = "every N iterations, a line: the batch and a bar of what the pool holds"},
    {.name = "--requests-out", .kind = KV_OPT_OUTPUT, .off = O(requests_out), .mkdir = 1,
     .meta = "FILE", .help = "a CSV row per request"},
    {.name = "--iterations-out", .kind = KV_OPT_OUTPUT, .off = O(iterations_out), .mkdir = 1,
     .meta = "FILE", .help = "a CSV row per iteration (batch, the pool's split)"},
    {.name = "--summary-out", .kind = KV_OPT_OUTPUT, .off = O(summary_out), .mkdir = 1,
     .meta = "FILE", .help = "the summary as a CSV row (throughput, latency, the pool's split)"},
    {.name = "--quiet", .kind = KV_OPT_FLAG, .off = O(quiet), .help = "no progress lines"},
};
#undef O

static void serving_defaults(void *opts, struct kv_cli_common *c)
{
    struct serving_opts *o = opts;
    (void)c;
    o->rate = 1.0;
    o->requests = 20;
    o->prefix_len = 32;
    o->pool_mb = 512;
    o->max_batch = 32;
}

static uint32_t serving_mode(const struct kv_cmd_ctx *x)
{
    return kv_cmd_given(x, "--trace") ? MODE_TRACE : MODE_GEN;
}

static int serving_check(struct kv_cmd_ctx *x)
{
    if (x->c.strategy == NULL) {
        fprintf(stderr, "kvlab: serving: needs --strategy NAME (see 'kvlab strategies')\n");
        return 2;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Records                                                                  */

struct serving_state {
    struct kv_csv_writer *req, *it;
    double *norm, *ttft, *tpot;
    int32_t n_tpot;
    int32_t n_done;
    int64_t tokens;
    int failed;
    /* the pool's split over the run, each iteration weighted by its time */
    double w_token, w_reserved, w_internal, w_spare, w_used;
    int32_t watch;   /* --watch: a line every this many iterations, 0: none */
    size_t pool;
};

/* --watch: one line of at most 72 columns for a classroom terminal; the
 * bar's cells are the pool's split, each rounded to whole cells */
#define WATCH_CELLS 22
static void watch_line(const struct serving_state *S, const struct kv_serve_iteration *it)
{
    const size_t part[5] = {it->token_bytes, it->reserved_bytes, it->internal_bytes,
                            it->spare_bytes, it->free_bytes};
    static const char mark[5] = {'#', 'o', 'x', '~', '.'};
    char bar[WATCH_CELLS + 1];
    int32_t n = 0;
    double edge = 0;
    for (int k = 0; k < 5; k++) { /* cumulative rounding: the cells sum to the bar */
        edge += S->pool > 0 ? (double)part[k] / (double)S->pool * WATCH_CELLS : 0;
        const int32_t to = edge > WATCH_CELLS ? WATCH_CELLS : (int32_t)(edge + 0.5);
        for (; n < to; n++)
            bar[n] = mark[k];
    }
    for (; n < WATCH_CELLS; n++)
        bar[n] = '.';
    bar[WATCH_CELLS] = '\0';
    printf("it %5" PRId64 " %6.2fs batch %3d wait %3d |%s| %3.0f%% tokens\n", it->index, it->t_s,
           it->batch, it->waiting, bar,
           S->pool > 0 ? 100.0 * (double)it->token_bytes / (double)S->pool : 0.0);
}

static void add_row(struct serving_state *S, struct kv_csv_writer *w, const char *line)
{
    if (w != NULL && kv_csv_writer_add_row(w, line) != KV_OK)
        S->failed = 1;
}

static void on_request(void *user, const struct kv_serve_request *r)
{
    struct serving_state *S = user;
    const double ttft = r->first_token_s - r->arrival_s;
    const double tpot = r->output > 1 ? (r->finish_s - r->first_token_s) / (r->output - 1) : 0.0;
    const double norm = (r->finish_s - r->arrival_s) / r->output;
    S->norm[S->n_done] = norm;
    S->ttft[S->n_done++] = ttft;
    if (r->output > 1) /* a one-token reply has no time per output token */
        S->tpot[S->n_tpot++] = tpot;
    S->tokens += r->output;
    char line[512];
    snprintf(line, sizeof line, "%d,%.6f,%.6f,%.6f,%d,%d,%.6f,%.6f,%.6f,%d", r->id, r->arrival_s,
             r->first_token_s, r->finish_s, r->prompt, r->output, ttft, tpot, norm,
             r->preemptions);
    add_row(S, S->req, line);
}

static void on_iteration(void *user, const struct kv_serve_iteration *it)
{
    struct serving_state *S = user;
    const double w = it->step_s;
    S->w_token += w * (double)it->token_bytes;
    S->w_reserved += w * (double)it->reserved_bytes;
    S->w_internal += w * (double)it->internal_bytes;
    S->w_spare += w * (double)it->spare_bytes;
    S->w_used += w * (double)(it->token_bytes + it->reserved_bytes + it->internal_bytes +
                              it->spare_bytes);
    if (S->watch > 0 && it->index % S->watch == 0)
        watch_line(S, it);
    if (S->it == NULL)
        return;
    char line[512];
    snprintf(line, sizeof line,
             "%" PRId64 ",%.6f,%.6f,%d,%d,%d,%d,%d,%zu,%zu,%zu,%zu,%zu,%.6f", it->index, it->t_s,
             it->step_s, it->batch, it->prefill_tokens, it->decode_tokens, it->waiting,
             it->swapped, it->token_bytes, it->reserved_bytes, it->internal_bytes,
             it->spare_bytes, it->free_bytes, it->attn_s);
    add_row(S, S->it, line);
}

static const char *const request_cols[] = {
    "id", "arrival_s", "first_token_s", "finish_s", "prompt_tokens", "output_tokens",
    "ttft_s", "tpot_s", "norm_latency_s", "preemptions"};
static const char *const iteration_cols[] = {
    "iteration", "t_s", "step_s", "batch", "prefill_tokens", "decode_tokens", "waiting",
    "swapped", "token_bytes", "reserved_bytes", "internal_bytes", "spare_bytes", "free_bytes",
    "attn_s"};

/* The policy's name: the strategy, and for one that preallocates its
 * reservation (Orca's names). */
static void policy_name(char *buf, size_t n, const struct kv_cli_strategy *s, int reserve,
                        int share)
{
    static const char *const orca[] = {"Orca-Max", "Orca-Pow2", "Orca-Oracle"};
    if (s->ops->caps & KV_CAP_PREALLOCATES)
        snprintf(buf, n, "%s-%s (%s)", s->ops->name, reserve_names[reserve], orca[reserve]);
    else
        snprintf(buf, n, "%s%s", s->ops->name, share ? "+shared-prefix" : "");
}

static struct kv_csv_writer *writer(const char *path, const struct kv_sysinfo *si,
                                    const char *policy, const char *const *cols, int32_t n)
{
    struct kv_csv_writer *w = NULL;
    if (path == NULL || kv_csv_writer_create(&w) != KV_OK)
        return NULL;
    kv_csv_writer_set_meta(w, "kvlab serving", NULL);
    kv_csv_writer_set_meta(w, "schema", "1");
    kv_csv_writer_set_meta(w, "commit", si->commit);
    kv_csv_writer_set_meta(w, "date", si->date);
    kv_csv_writer_set_meta(w, "cpu", si->cpu);
    kv_csv_writer_set_meta(w, "policy", policy);
    if (kv_csv_writer_set_header(w, cols, n) != KV_OK) {
        kv_csv_writer_destroy(w);
        return NULL;
    }
    return w;
}

static int write_csv(const struct kv_csv_writer *w, const char *path)
{
    if (w == NULL)
        return 0;
    errno = 0;
    enum kv_status s = kv_csv_writer_write(w, path);
    if (s == KV_OK)
        return 0;
    fprintf(stderr, "kvlab: serving: cannot write '%s': %s\n", kv_text_q(path),
            s == KV_ERR_IO && errno != 0 ? strerror(errno) : kv_status_str(s));
    return 1;
}

/* ------------------------------------------------------------------------ */
/* The run                                                                  */

static int load_stream(const struct serving_opts *o, const struct kv_cmd_ctx *x, int32_t max_len,
                       struct kv_request_set *rs)
{
    char why[512] = "";
    enum kv_status s;
    if (o->trace != NULL) {
        s = kv_requests_read(rs, o->trace, max_len, o->prefixes, o->prefix_len, why, sizeof why);
    } else {
        struct kv_workload w = {.rate = o->rate, .n_requests = o->requests,
                                .n_groups = o->prefixes, .prefix_len = o->prefix_len,
                                .seed = x->c.seed};
        kv_workload_preset(&w, kv_workload_preset_names[o->workload], max_len);
        if (kv_cmd_given(x, "--prompt-mean"))
            w.prompt.mean = o->prompt_mean;
        if (kv_cmd_given(x, "--prompt-spread"))
            w.prompt.spread = o->prompt_spread;
        if (kv_cmd_given(x, "--output-mean"))
            w.output.mean = o->output_mean;
        if (kv_cmd_given(x, "--output-spread"))
            w.output.spread = o->output_spread;
        s = kv_requests_generate(rs, &w, max_len, why, sizeof why);
    }
    if (s == KV_OK)
        return 0;
    fprintf(stderr, "kvlab: serving: %s\n", why[0] ? why : kv_status_str(s));
    return s == KV_ERR_NOMEM ? 1 : 2;
}

static const char *const summary_cols[] = {
    "policy", "strategy", "reserve", "preempt", "rate", "requests", "pool_bytes", "max_batch",
    "chunk", "duration_s", "requests_per_s", "tokens_per_s", "norm_latency_mean_s",
    "norm_latency_p50_s", "norm_latency_p90_s", "norm_latency_p99_s", "ttft_p50_s",
    "tpot_p50_s", "peak_batch", "iterations", "preemptions", "peak_token_share",
    "token_share_used", "reserved_share_used", "internal_share_used", "spare_share_used"};
#define N_SUMMARY_COLS ((int32_t)(sizeof summary_cols / sizeof summary_cols[0]))

static double mean_of(const double *x, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += x[i];
    return n > 0 ? s / n : NAN;
}

/* The summary row: the percentiles sort the arrays, so it comes first. */
static void summary_row(char *line, size_t cap, const struct serving_state *S, const char *policy,
                        const struct kv_serve_totals *t, const struct kv_serve_params *p,
                        double rate)
{
    double *n = S->norm;
    const int64_t k = S->n_done;
    const double u = S->w_used > 0 ? S->w_used : NAN;
    snprintf(line, cap,
             "%s,%s,%s,%s,%.6g,%d,%zu,%d,%d,%.6f,%.6f,%.3f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%d,%" PRId64
             ",%" PRId64 ",%.4f,%.4f,%.4f,%.4f,%.4f",
             policy, p->ops->name, reserve_names[p->reserve], preempt_names[p->preempt], rate,
             S->n_done, p->pool_bytes, p->max_batch, p->chunk, t->end_s,
             t->end_s > 0 ? k / t->end_s : 0.0, t->end_s > 0 ? (double)S->tokens / t->end_s : 0.0,
             mean_of(n, k), kv_stats_median(n, k), kv_stats_percentile(n, k, 0.90),
             kv_stats_percentile(n, k, 0.99), kv_stats_median(S->ttft, k),
             S->n_tpot > 0 ? kv_stats_median(S->tpot, S->n_tpot) : NAN, t->peak_batch, t->iterations, t->preemptions,
             t->peak_token_share, S->w_token / u, S->w_reserved / u, S->w_internal / u,
             S->w_spare / u);
}

/* The printed summary: lines of at most 80 columns at ordinary figures
 * (the demo tour shows it on a classroom terminal). */
static void summary(const struct serving_state *S, const char *policy,
                    const struct kv_serve_totals *t, const struct kv_serve_params *p)
{
    double *n = S->norm, *f = S->ttft, *q = S->tpot;
    const int64_t k = S->n_done;
    printf("policy %s: %d requests in %.3f s\n", policy, S->n_done, t->end_s);
    printf("  throughput: %.3f requests/s, %.1f tokens/s\n", t->end_s > 0 ? k / t->end_s : 0.0,
           t->end_s > 0 ? (double)S->tokens / t->end_s : 0.0);
    printf("  normalized latency (s/token): median %.4f, p90 %.4f, p99 %.4f\n",
           kv_stats_median(n, k), kv_stats_percentile(n, k, 0.90), kv_stats_percentile(n, k, 0.99));
    printf("  time to first token (s): median %.4f, p90 %.4f\n", kv_stats_median(f, k),
           kv_stats_percentile(f, k, 0.90));
    printf("  time per output token (s): median %.4f\n",
           S->n_tpot > 0 ? kv_stats_median(q, S->n_tpot) : NAN);
    printf("  peak batch %d, %" PRId64 " iterations, %" PRId64 " preemptions (%s)\n",
           t->peak_batch, t->iterations, t->preemptions, preempt_names[p->preempt]);
    printf("  peak token states: %.1f%% of the %.1f MiB pool\n", 100.0 * t->peak_token_share,
           (double)p->pool_bytes / (1 << 20));
}

static int serving_run(struct kv_cmd_ctx *x)
{
    const struct serving_opts *o = x->opts;
    struct kv_cli_common *c = &x->c;
    struct kv_model *m = NULL;
    if (c->model_path != NULL) {
        const int rc = kv_cli_load_model("serving", c->model_path, &m);
        if (rc != 0)
            return rc;
        c->model = m->cfg;
    }
    struct kv_cli_strategy st;
    struct kv_request_set rs = {0};
    int rc = kv_cli_strategy(c, c->strategy, &st) != 0 ? 2 : 0;
    if (rc == 0)
        rc = load_stream(o, x, c->model.max_len, &rs);
    enum kv_status s;
    if (rc == 0 && m == NULL && (s = kv_model_create_synthetic(&m, &c->model, c->seed)) != KV_OK) {
        fprintf(stderr, "kvlab: serving: model: %s\n", kv_status_str(s));
        rc = 1;
    }
    const struct kv_serve_params p = {
        .ops = st.ops, .params = st.params, .reserve = (enum kv_reserve)o->reserve,
        .preempt = (enum kv_preempt)o->preempt, .pool_bytes = (size_t)(o->pool_mb * 1048576.0),
        .max_batch = o->max_batch, .chunk = kv_cmd_given(x, "--chunk") ? o->chunk : 0,
        .n_threads = c->threads, .seed = c->seed, .fixed_step_s = o->fixed_step_ms / 1e3,
        .share_prefixes = o->share};
    struct serving_state S = {0};
    struct kv_sysinfo si;
    char policy[96];
    char why[512] = "";
    if (rc == 0 && o->share && rs.n_groups == 0) {
        fprintf(stderr, "kvlab: serving: --share-prefixes needs prefix groups (--prefixes G)\n");
        rc = 2;
    }
    if (rc == 0 && kv_serve_check(m, &rs, &p, why, sizeof why) != KV_OK) {
        fprintf(stderr, "kvlab: serving: %s\n", why);
        rc = 2;
    }
    if (rc == 0) {
        kv_sysinfo_collect(&si);
        policy_name(policy, sizeof policy, &st, o->reserve, o->share);
        S.req = writer(o->requests_out, &si, policy, request_cols, 10);
        S.it = writer(o->iterations_out, &si, policy, iteration_cols,
                      (int32_t)(sizeof iteration_cols / sizeof iteration_cols[0]));
        S.norm = kv_alloc((size_t)rs.n * sizeof(double));
        S.ttft = kv_alloc((size_t)rs.n * sizeof(double));
        S.tpot = kv_alloc((size_t)rs.n * sizeof(double));
        if (S.norm == NULL || S.ttft == NULL || S.tpot == NULL ||
            (o->requests_out != NULL && S.req == NULL) ||
            (o->iterations_out != NULL && S.it == NULL)) {
            fprintf(stderr, "kvlab: serving: %s\n", kv_status_str(KV_ERR_NOMEM));
            rc = 1;
        }
    }
    struct kv_serve_totals tot = {0};
    S.watch = o->watch;
    S.pool = p.pool_bytes;
    if (rc == 0 && o->watch > 0)
        printf("pool, every %d iterations: # token rows, o room a request will still fill,\n"
               "x room it never will (fragmentation), ~ free blocks a cache keeps, . free\n",
               o->watch);
    if (rc == 0) {
        if (!o->quiet)
            kv_progress("serving: %s, %d requests, pool %.1f MiB, batch <= %d\n", policy, rs.n,
                        o->pool_mb, o->max_batch);
        s = kv_serve_run(m, &rs, &p, on_request, on_iteration, &S, &tot, why, sizeof why);
        if (s != KV_OK) {
            fprintf(stderr, "kvlab: serving: %s\n", why[0] ? why : kv_status_str(s));
            rc = s == KV_ERR_INVALID && why[0] ? 2 : 1;
        } else if (S.failed) {
            fprintf(stderr, "kvlab: serving: %s\n", kv_status_str(KV_ERR_NOMEM));
            rc = 1;
        }
    }
    struct kv_csv_writer *sw = NULL;
    if (rc == 0 && o->summary_out != NULL) {
        char line[1024];
        summary_row(line, sizeof line, &S, policy, &tot, &p, o->trace != NULL ? NAN : o->rate);
        sw = writer(o->summary_out, &si, policy, summary_cols, N_SUMMARY_COLS);
        if (sw == NULL || kv_csv_writer_add_row(sw, line) != KV_OK) {
            fprintf(stderr, "kvlab: serving: %s\n", kv_status_str(KV_ERR_NOMEM));
            rc = 1;
        }
    }
    if (rc == 0) {
        summary(&S, policy, &tot, &p);
        rc = write_csv(S.req, o->requests_out) | write_csv(S.it, o->iterations_out) |
             write_csv(sw, o->summary_out);
    }
    kv_csv_writer_destroy(sw);
    kv_csv_writer_destroy(S.req);
    kv_csv_writer_destroy(S.it);
    kv_free(S.norm);
    kv_free(S.ttft);
    kv_free(S.tpot);
    kv_request_set_free(&rs);
    kv_model_destroy(m);
    return rc;
}

const struct kv_cmd kv_cmd_serving_def = {
    .name = "serving",
    .summary = "a request stream with continuous batching over one pool of KV memory",
    .usage = "--strategy NAME [--trace FILE | --rate R --requests N] [--pool-mb MB] [options]",
    .about = "  requests arrive (a trace, or Poisson arrivals with drawn lengths) and are\n"
             "  scheduled an iteration at a time: every running request decodes a token in\n"
             "  one batched forward, waiting ones are admitted while their caches fit the\n"
             "  pool, and the last admitted is preempted when the running ones outgrow it.\n"
             "  Prints throughput and latency; --requests-out and --iterations-out write\n"
             "  the per-request and per-iteration CSVs (notebooks_data/README.md).\n",
    .opts = serving_table,
    .n_opts = sizeof serving_table / sizeof serving_table[0],
    .groups = KV_GRP_MODEL | KV_GRP_CHECKPOINT | KV_GRP_STRATEGY | KV_GRP_PARAMS |
              KV_GRP_THREADS | KV_GRP_SEED,
    .opts_size = sizeof(struct serving_opts),
    .defaults = serving_defaults,
    .modes = serving_mode,
    .mode_names = serving_modes,
    .check = serving_check,
    .run = serving_run,
    .example = "--strategy paged --layers 1 --dim 16 --heads 2 --kv-heads 2 --hidden 24 "
               "--vocab 64 --max-len 64 --requests 3 --rate 100 --pool-mb 1 --threads 1 "
               "--fixed-step-ms 1 --quiet --requests-out @OUT",
};
