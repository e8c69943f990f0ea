/*
 * sweep_csv.c - the file `kvlab sweep` writes: its columns (schema v3: v2's
 * in docs/design.md's order, then the extras, the noise columns last;
 * notebooks_data/README.md is the data dictionary), one row per finished
 * (strategy, T), and the metadata lines before the header, written
 * atomically by csv_write.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_io.h"
#include "cmd_sweep_impl.h"
#include "../measure/csv_schema.h"
#include "../results/csv_write.h"

/* ------------------------------------------------------------------------ */
/* Columns: schema v2 (docs/design.md, in this order), then extras          */

/*
 * The extras after the schema's columns: X(ID, "name", printf format,
 * value). The schema's own columns (csv_schema.h) get their format and
 * value from SWEEP_V_<ID> below, so the header and every row come from the
 * same lists: a column without a value does not compile, and names and
 * values cannot drift apart. `label` names the series, `family` the
 * strategy whose table made it (its ops->name: quantized-int8 and kivi-2
 * are both quantized), what the plots choose a series' colour by.
 */
#define SWEEP_EXTRA_COLUMNS(X)                                                               \
    X(LABEL, "label", "%s", st->label)                                                       \
    X(MLP, "mlp", "%d", mc->mlp)                                                             \
    X(WARMUP, "warmup", "%d", row->warmup)                                                   \
    X(SEQ_LEN_LO, "seq_len_lo", "%d", row->seq_len_lo)                                       \
    X(SEQ_LEN_HI, "seq_len_hi", "%d", row->seq_len_hi)                                       \
    X(STEP_MIN, "step_ns_min", "%" PRId64, row->step_ns_min)                                 \
    X(STEP_MEAN, "step_ns_mean", "%.0f", row->step_ns_mean)                                  \
    X(GEMM_FLOPS, "gemm_flops_step", "%" PRId64, row->gemm_flops_step)                       \
    X(ACH_GBPS, "achieved_gbps", "%.3f", med > 0 ? (double)row->bytes_step / med : NAN)      \
    X(ACH_GFLOPS, "achieved_gflops", "%.3f", med > 0 ? (double)row->flops_step / med : NAN)  \
    X(ACC_MEASURED, "acc_measured", "%d", row->acc_measured)                                 \
    X(CPU_UTIL, "cpu_util", "%.3f", row->cpu_util)                                           \
    X(ATTEMPTS, KV_SWEEP_COL_ATTEMPTS, "%d", row->attempts)                                  \
    X(ATTN_BYTES, KV_SWEEP_COL_ATTN_BYTES, "%zu", row->attn_bytes_step)                     \
    X(LAYER_BYTES, "layer_bytes", "%s", row->layer_bytes)                                   \
    X(FAMILY, "family", "%s", st->ops->name)                                                \
    X(CI_LO, KV_SWEEP_COL_CI_LO, "%" PRId64, row->step_ns_ci_lo)                            \
    X(CI_HI, KV_SWEEP_COL_CI_HI, "%" PRId64, row->step_ns_ci_hi)                            \
    X(NOISY, KV_SWEEP_COL_NOISY, "%d", row->noisy)                                          \
    X(NOISE_REASON, KV_SWEEP_COL_NOISE_REASON, "%s", reason)                                \
    X(GEMV_MED, "gemv_ns_median", "%" PRId64, row->gemv_ns_median)                          \
    X(OPS_MED, "ops_ns_median", "%" PRId64, row->ops_ns_median)                             \
    X(SYNC_MED, "sync_ns_median", "%" PRId64, row->sync_ns_median)                          \
    X(BOUND, "bound_gbps", "%.3f", row->bound_gbps)

/* Values of the schema's columns, by id (names in csv_schema.h). */
#define SWEEP_V_STRATEGY "%s", st->ops->name
#define SWEEP_V_LAYERS "%d", mc->n_layers
#define SWEEP_V_DIM "%d", mc->dim
#define SWEEP_V_HEADS "%d", mc->n_heads
#define SWEEP_V_KV_HEADS "%d", mc->n_kv_heads
#define SWEEP_V_HEAD_DIM "%d", mc->dim / mc->n_heads
#define SWEEP_V_HIDDEN "%d", mc->hidden_dim
#define SWEEP_V_BATCH "%d", r->cfg->batch
#define SWEEP_V_WINDOW "%d", row->window
#define SWEEP_V_BITS "%d", row->bits
#define SWEEP_V_GROUP "%d", row->group
#define SWEEP_V_RESIDUAL "%d", row->residual
#define SWEEP_V_THREADS "%d", r->cfg->threads
#define SWEEP_V_SEQ_LEN "%d", row->seq_len
#define SWEEP_V_REPS "%d", row->reps
#define SWEEP_V_STEP_MED "%" PRId64, row->step_ns_median
#define SWEEP_V_STEP_P95 "%" PRId64, row->step_ns_p95
#define SWEEP_V_ATTN_MED "%" PRId64, row->attn_ns_median
#define SWEEP_V_FLOPS "%" PRId64, row->flops_step
#define SWEEP_V_ATTN_FLOPS "%" PRId64, row->attn_flops_step
#define SWEEP_V_BYTES "%zu", row->bytes_step
#define SWEEP_V_CACHE_BYTES "%zu", row->cache_bytes
#define SWEEP_V_COPY_BYTES "%.1f", row->copy_bytes_step
#define SWEEP_V_PEAK_RSS "%zu", row->peak_rss_bytes
#define SWEEP_V_MAX_ABS_ERR "%.6g", row->max_abs_err
#define SWEEP_V_REL_ERR "%.6g", row->rel_err
#define SWEEP_V_TOKEN_MATCH "%.4f", row->token_match
#define SWEEP_V_DTYPE "%s", kv_type_traits[kv_strategy_dtype(st->ops, st->params)].name
#define SWEEP_V_PARAMS "%s", params

#define SWEEP_EXTRA_NAME_(id, name, fmt, val) name,
static const char *const sweep_columns[] = {
    KV_SCHEMA_V2_NAMES /* schema v2, in docs/design.md's order (csv_schema.h) */
    SWEEP_EXTRA_COLUMNS(SWEEP_EXTRA_NAME_)};
#undef SWEEP_EXTRA_NAME_
#define N_SWEEP_COLUMNS ((int32_t)(sizeof(sweep_columns) / sizeof(sweep_columns[0])))

/* ------------------------------------------------------------------------ */
/* Rows                                                                     */

/* One CSV line being formatted: fields appended comma-separated. */
struct line {
    char buf[2048];
    size_t len;
    int fields, overflow;
};

__attribute__((format(printf, 2, 3))) static void emit(struct line *L, const char *fmt, ...)
{
    if (L->overflow)
        return;
    if (L->fields > 0 && L->len + 1 < sizeof L->buf)
        L->buf[L->len++] = ',';
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(L->buf + L->len, sizeof L->buf - L->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof L->buf - L->len)
        L->overflow = 1;
    else
        L->len += (size_t)n;
    L->fields++;
}

/*
 * dst <- the classifier's reasons as one cell: the writer quotes nothing, so
 * a comma (it would split the cell), a double quote (a reader would take it
 * for quoting), a control byte (a line break) or a '#' (pandas, reading with
 * comment='#', would cut the line there) must never reach the file.
 * kv_noise_classify writes none of them; this makes sure, whatever it says
 * next ("," -> ";", '"' -> "'", '#' and a control byte -> ' '). "-" for a
 * clean row.
 */
static void reason_cell(char *dst, size_t cap, const struct kv_sweep_row *row)
{
    size_t w = 0;
    const char *src = row->noisy ? row->noise_reason : "";
    for (; *src != '\0' && w + 1 < cap; src++) {
        const unsigned char c = (unsigned char)*src;
        dst[w++] = c == ',' ? ';' : c == '"' ? '\'' : c < 0x20 || c == 0x7f || c == '#' ? ' '
                                                                                 : (char)c;
    }
    while (w > 0 && dst[w - 1] == ' ')
        w--;
    dst[w] = '\0';
    if (w == 0)
        snprintf(dst, cap, "%s", KV_SWEEP_NO_NOISE);
}

static enum kv_status add_row(struct kv_csv_writer *w, const struct kv_sweepi_run *r,
                              const struct kv_sweep_row *row)
{
    const struct kv_model_config *mc = &r->m->cfg;
    const struct kv_sweep_strategy *st = &r->cfg->strategies[row->strategy];
    const double med = (double)row->step_ns_median;
    char params[512], reason[KV_SWEEP_NOISE_LEN];
    kv_params_format(st->ops, st->params, params, sizeof params);
    reason_cell(reason, sizeof reason, row);
    struct line L = {.len = 0};
#define SWEEP_EMIT_SCHEMA_(id, name) emit(&L, SWEEP_V_##id);
#define SWEEP_EMIT_EXTRA_(id, name, fmt, val) emit(&L, fmt, val);
    KV_SCHEMA_V1_COLUMNS(SWEEP_EMIT_SCHEMA_)
    KV_SCHEMA_V2_EXTRA_COLUMNS(SWEEP_EMIT_SCHEMA_)
    SWEEP_EXTRA_COLUMNS(SWEEP_EMIT_EXTRA_)
#undef SWEEP_EMIT_SCHEMA_
#undef SWEEP_EMIT_EXTRA_
    if (L.overflow || L.fields != N_SWEEP_COLUMNS)
        return KV_ERR_OVERFLOW;
    return kv_csv_writer_add_row(w, L.buf);
}

int32_t kv_sweepi_noisy_rows(const struct kv_sweepi_run *r)
{
    int32_t n = 0;
    for (int32_t si = 0; si < r->cfg->n_strategies; si++)
        for (int32_t ti = 0; ti < r->cfg->n_lens; ti++)
            n += r->have[si][ti] && r->rows[si][ti].noisy;
    return n;
}

/*
 * The run's DRAM read limit: the best of every measurement of it in the run,
 * the roofline's before and after the rows and, with --bound, the probe
 * beside each row, so that the headline figure is not set by whichever
 * moment the roofline happened to run in (the host's bandwidth drifts:
 * back-to-back quiet runs read 8-19% apart at the roofline alone). The
 * probes run the same test with fewer passes. *probes counts the rows
 * that had one; *lo ends as the lowest of all, so the file shows how far
 * the measurements ranged. rl->read_spread stays that of the roofline's
 * own passes, or nan where a probe gave the best.
 */
static void read_best(const struct kv_sweepi_run *r, struct kv_roofline *rl, int32_t *probes,
                      double *lo)
{
    for (int32_t si = 0; si < r->cfg->n_strategies; si++)
        for (int32_t ti = 0; ti < r->cfg->n_lens; ti++) {
            const double b = r->rows[si][ti].bound_gbps;
            if (!r->have[si][ti] || !isfinite(b) || b <= 0.0)
                continue;
            (*probes)++;
            if (!(rl->read_gbps >= b))
                rl->read_gbps = b, rl->read_spread = NAN;
            if (!(*lo <= b))
                *lo = b;
        }
}

/* Rows ordered by strategy (as listed), then T. */
static enum kv_status add_rows(struct kv_csv_writer *w, const struct kv_sweepi_run *r)
{
    for (int32_t si = 0; si < r->cfg->n_strategies; si++)
        for (int32_t ti = 0; ti < r->cfg->n_lens; ti++)
            if (r->have[si][ti]) {
                enum kv_status s = add_row(w, r, &r->rows[si][ti]);
                if (s != KV_OK)
                    return s;
            }
    return KV_OK;
}

/* Creates the parent directory of path when it is missing (one level). */
static void make_parent_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (slash == NULL || slash == path)
        return;
    char dir[4096];
    snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        /* reported by the write that follows */
    }
}

/* ------------------------------------------------------------------------ */
/* Metadata                                                                 */

/* The command line the CSV records (# command=): the words as given (the
 * writer keeps the line one line, buf_add_line_safe). */
static void command_line(const struct kv_cmd_ctx *x, char *cmd, size_t cap)
{
    size_t len = (size_t)snprintf(cmd, cap, "kvlab");
    for (int i = 0; i < x->argc && len < cap; i++)
        len += (size_t)snprintf(cmd + len, cap - len, " %s", x->argv[i]);
}

static void set_meta_common(struct kv_csv_writer *w, const struct kv_sysinfo *si,
                            const struct kv_sweep_config *cfg, const struct kv_roofline *rl,
                            const struct kv_cmd_ctx *x)
{
    kv_csv_writer_set_meta(w, "kvlab sweep", NULL);
    kv_csv_writer_set_meta(w, "schema", KV_SWEEP_SCHEMA);
    kv_csv_writer_set_meta(w, "commit", si->commit);
    kv_csv_writer_set_meta(w, "date", si->date);
    kv_csv_writer_set_meta(w, "cpu", si->cpu);
    kv_csv_writer_set_metaf(w, "threads", "%d", cfg->threads);
    kv_csv_writer_set_meta(w, "blas_core", si->blas_core);
    kv_csv_writer_set_meta(w, "blas_config", si->blas_config);
    kv_csv_writer_set_meta(w, "compiler", si->compiler);
    kv_csv_writer_set_meta(w, "cflags", si->cflags);
    kv_csv_writer_set_metaf(w, "l3_bytes", "%ld", si->l3_bytes);
    kv_csv_writer_set_meta(w, "os", si->os);
    kv_csv_writer_set_meta(w, "host", si->host);
    kv_csv_writer_set_metaf(w, "read_gbps", "%.3f", rl->read_gbps);
    kv_csv_writer_set_metaf(w, "read_l3_gbps", "%.3f", rl->read_l3_gbps);
    /* a decode step's bytes (weights + caches) are compared with DRAM's rate */
    kv_csv_writer_set_meta(w, "limit", "read_gbps");
    kv_csv_writer_set_metaf(w, "copy_gbps", "%.3f", rl->copy_gbps);
    kv_csv_writer_set_metaf(w, "sgemm_gflops", "%.3f", rl->sgemm_gflops);
    kv_csv_writer_set_metaf(w, "read_spread", "%.4f", rl->read_spread);
    kv_csv_writer_set_metaf(w, "read_l3_spread", "%.4f", rl->read_l3_spread);
    kv_csv_writer_set_metaf(w, "copy_spread", "%.4f", rl->copy_spread);
    kv_csv_writer_set_metaf(w, "sgemm_spread", "%.4f", rl->sgemm_spread);
    kv_csv_writer_set_meta(w, "roofline_method", KV_ROOFLINE_METHOD);
    /* how bound_gbps was measured, or that it was not (--bound; the probe
     * itself is closed by now) */
    if (cfg->probe_passes > 0)
        kv_csv_writer_set_metaf(w, "bound_method", "DRAM read test; best of %d timed passes "
                                "right before and %d right after each row's attempt",
                                cfg->probe_passes, cfg->probe_passes);
    else
        kv_csv_writer_set_meta(w, "bound_method", "not measured");
    kv_csv_writer_set_metaf(w, "seed", "%" PRIu64, cfg->seed);
    kv_csv_writer_set_metaf(w, "warmup", "%d", cfg->warmup);
    kv_csv_writer_set_meta(w, "reps_mode", cfg->reps > 0 ? "fixed" : "auto");
    kv_csv_writer_set_metaf(w, "max_retries", "%d", cfg->max_retries);
    struct kv_noise_limits lim;
    if (cfg->noise != NULL)
        lim = *cfg->noise;
    else
        kv_noise_limits_default(&lim);
    kv_csv_writer_set_metaf(w, "noise_max_other_cores", "%g", lim.max_other_cores);
    kv_csv_writer_set_metaf(w, "noise_min_util", "%g", lim.min_cpu_util);
    char labels[KV_SWEEP_MAX_STRATEGIES * (KV_SWEEP_LABEL_LEN + 1)];
    size_t ln = 0;
    labels[0] = '\0';
    for (int32_t i = 0; i < cfg->n_strategies; i++)
        ln += (size_t)snprintf(labels + ln, sizeof labels - ln, "%s%s", i ? "," : "",
                               cfg->strategies[i].label);
    kv_csv_writer_set_meta(w, "strategies", labels);
    kv_csv_writer_set_meta(w, "partial", "1");
    kv_csv_writer_set_meta(w, "wall_s", "nan");
    char cmd[2048];
    command_line(x, cmd, sizeof cmd);
    kv_csv_writer_set_meta(w, "command", cmd);
}

/* ------------------------------------------------------------------------ */
/* The file                                                                 */

enum kv_status kv_sweepi_write_csv(const struct kv_sweepi_run *r, const struct kv_cmd_ctx *x,
                                   const struct kv_sweepi_file *f, int32_t *n_rows, int *werr)
{
    const struct sweep_opts *o = x->opts;
    const struct kv_plan *plan = f->plan;
    struct kv_csv_writer *w = NULL;
    enum kv_status ws = kv_csv_writer_create(&w);
    if (ws == KV_OK) {
        struct kv_roofline rl = *f->rl;
        int32_t probes = 0;
        double lo = f->read_lo;
        if (f->rl_runs > 0)
            read_best(r, &rl, &probes, &lo);
        set_meta_common(w, f->si, r->cfg, &rl, x);
        kv_csv_writer_set_meta(w, "partial", f->partial ? "1" : "0");
        if (f->rl_runs > 0) {
            kv_csv_writer_set_metaf(w, "roofline", "%s%s", f->rl_runs == 2 ?
                                    "best of 2 (before and after)" : "before the sweep",
                                    probes > 0 ? "; DRAM read: also each row's probe" : "");
            kv_csv_writer_set_metaf(w, "read_gbps_n", "%d", f->rl_runs + probes);
            kv_csv_writer_set_metaf(w, "read_gbps_low", "%.3f", lo);
        } else {
            kv_csv_writer_set_meta(w, "roofline", "skipped (--no-roofline)");
        }
        kv_csv_writer_set_metaf(w, "wall_s", "%.1f", (double)(kv_now_ns() - f->t0) / 1e9);
        kv_csv_writer_set_metaf(w, "sweep_s", "%.3f", (double)f->t_sweep / 1e9);
        /* rows still noisy after their retries (the `noisy` column), known
         * now that the run is over: the file is written at its end */
        kv_csv_writer_set_metaf(w, "noisy_rows", "%d", kv_sweepi_noisy_rows(r));
        if (plan != NULL) {
            kv_csv_writer_set_metaf(w, "shard", "%d/%d", o->shard.shard, o->shard.n_shards);
            kv_csv_writer_set_metaf(w, "plan", "%016llx", (unsigned long long)plan->id);
            kv_csv_writer_set_metaf(w, "shard_digest", "%016llx",
                                    (unsigned long long)kv_plan_shard_digest(plan, o->shard.shard));
            kv_csv_writer_set_metaf(w, "plan_rows", "%d", plan->n_rows);
            kv_csv_writer_set_metaf(w, "shard_rows", "%d", plan->shard_rows[o->shard.shard - 1]);
            kv_csv_writer_set_metaf(w, "pred_s", "%.3f",
                                    (double)plan->shard_ns[o->shard.shard - 1] / 1e9);
            kv_csv_writer_set_metaf(w, "plan_rates", "%lld,%lld,%lld",
                                    (long long)o->rates.r.gflops, (long long)o->rates.r.gbps,
                                    (long long)o->rates.r.copy_gbps);
        }
        ws = kv_csv_writer_set_header(w, sweep_columns, N_SWEEP_COLUMNS);
    }
    if (ws == KV_OK)
        ws = add_rows(w, r);
    *werr = 0;
    if (ws == KV_OK) {
        make_parent_dir(o->out);
        errno = 0;
        ws = kv_csv_writer_write(w, o->out);
        *werr = errno;
    }
    *n_rows = w ? kv_csv_writer_row_count(w) : 0;
    kv_csv_writer_destroy(w);
    return ws;
}
