/*
 * compare.c - the verdicts of kvlab compare (compare.h): each joined row,
 * and with aggregate each group, classified as better, worse or the same
 * within noise, with the roofline normalisation that makes two machines'
 * times comparable.
 *
 * The design decision that matters: a change only counts when it is larger
 * than the noise, the larger of a relative threshold and the spread each
 * side measured itself, or, where both rows carry confidence intervals,
 * when the intervals separate by the threshold; a row measured under
 * interference is never judged (compare.h has the rules). The files are
 * validated, keyed and joined by compare_join.c, judged here (run_checked)
 * and written by compare_report.c.
 */
#include "compare.h"

#include <math.h>
#include <string.h>

#include "../measure/stats.h"

/* Short local names for the columns this file reads by index. */
enum {
    COL_STRATEGY = KV_SCHEMA_COL_STRATEGY,
    COL_SEQ_LEN = KV_SCHEMA_COL_SEQ_LEN,
    COL_STEP_MED = KV_SCHEMA_COL_STEP_MED,
    COL_STEP_P95 = KV_SCHEMA_COL_STEP_P95,
    COL_ATTN_MED = KV_SCHEMA_COL_ATTN_MED,
    COL_FLOPS = KV_SCHEMA_COL_FLOPS,
    COL_ATTN_FLOPS = KV_SCHEMA_COL_ATTN_FLOPS,
    COL_BYTES = KV_SCHEMA_COL_BYTES,
    COL_CACHE_BYTES = KV_SCHEMA_COL_CACHE_BYTES,
};

static double cell_num(const struct kv_csv *c, int64_t r, int32_t j)
{
    double v = NAN;
    int rc = kv_csv_parse_double(kv_csv_cell(c, r, j), &v);
    KV_ASSERT(rc == 0); /* validated */
    (void)rc;
    return v;
}

/* ------------------------------------------------------------------------ */
/* Metric properties                                                        */

/* A time in nanoseconds: the name ends in "_ns" or contains "_ns_". */
static int metric_is_time(const char *m)
{
    for (const char *p = strstr(m, "_ns"); p != NULL; p = strstr(p + 1, "_ns")) {
        if (p[3] == '\0' || p[3] == '_')
            return 1;
    }
    return 0;
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* token_match and rates get better as they grow; everything else shrinks. */
static int metric_smaller_is_better(const char *m)
{
    return !(strcmp(m, "token_match") == 0 || ends_with(m, "_gbps") ||
             ends_with(m, "_gflops") || ends_with(m, "_per_s"));
}

static const char *metric_unit(const char *m, int normalized)
{
    if (metric_is_time(m))
        return normalized ? "x roofline" : "ns";
    if (ends_with(m, "_gbps"))
        return "GB/s";
    if (ends_with(m, "_gflops"))
        return "GFLOP/s";
    if (strstr(m, "bytes") != NULL)
        return "bytes";
    if (strstr(m, "flops") != NULL)
        return "flop";
    return "";
}

/* ------------------------------------------------------------------------ */
/* Normalisation                                                            */

static enum kv_status meta_rate(const struct kv_csv *c, const char *key, double *out,
                                char *err, size_t err_len)
{
    const struct kv_csv_meta *m = kv_csv_meta_find(c, key);
    if (m == NULL) {
        kv_csv_error(err, err_len, c->name, c->header_line,
                     "no '# %s=' metadata line, needed by --normalize", key);
        return KV_ERR_FORMAT;
    }
    double v;
    if (kv_csv_parse_double(m->value, &v) != 0 || !isfinite(v) || v <= 0) {
        char ex[48];
        kv_csv_excerpt(ex, sizeof ex, m->value, 32);
        kv_csv_error(err, err_len, c->name, m->line,
                     "metadata %s='%s' is not a positive number, needed by --normalize",
                     key, ex);
        return KV_ERR_FORMAT;
    }
    *out = v;
    return KV_OK;
}

/* Column index of the bytes attn_ns_median is predicted from on one side:
 * attn_bytes_step when the file has it, else (older files) cache_bytes. */
static int32_t attn_bytes_col(const struct kv_compare_result *res, int cur)
{
    int32_t j = cur ? res->col_attn_bytes_cur : res->col_attn_bytes_base;
    return j >= 0 ? j : (cur ? res->col_cur : res->col_base)[COL_CACHE_BYTES];
}

/* A row's own limit from column j (a merged file of several machines,
 * kvlab merge), else the file's metadata value; nan if unusable. */
static double row_rate(const struct kv_csv *c, int64_t r, int32_t j, double file_value)
{
    double v = file_value;
    if (j >= 0 && (kv_csv_parse_double(kv_csv_cell(c, r, j), &v) != 0 || !(v > 0)))
        return NAN;
    return v;
}

/* Roofline prediction in ns for row r of one side; nan if unusable. */
static double row_pred(const struct kv_compare_result *res, int cur, int64_t r)
{
    const struct kv_csv *c = cur ? res->cur : res->base;
    const int32_t *col = cur ? res->col_cur : res->col_base;
    double gbps = row_rate(c, r, res->col_rate[cur][0],
                           cur ? res->cur_read_gbps : res->base_read_gbps);
    double gflops = row_rate(c, r, res->col_rate[cur][1],
                             cur ? res->cur_gflops : res->base_gflops);
    double bytes = NAN; /* attn_bytes_step is not validated: parse, nan if bad */
    if (kv_csv_parse_double(kv_csv_cell(c, r, res->pred_attn ? attn_bytes_col(res, cur)
                                                               : col[COL_BYTES]),
                            &bytes) != 0)
        bytes = NAN;
    double flops = cell_num(c, r, col[res->pred_attn ? COL_ATTN_FLOPS : COL_FLOPS]);
    if (!isfinite(bytes) || !isfinite(flops) || bytes < 0 || flops < 0 || !isfinite(gbps) ||
        !isfinite(gflops))
        return NAN;
    double t = fmax(bytes / gbps, flops / gflops);
    return t > 0 && isfinite(t) ? t : NAN;
}

double kv_compare_row_value(const struct kv_compare_result *res, int cur, int64_t r)
{
    const struct kv_csv *c = cur ? res->cur : res->base;
    if (res->self_normalized) { /* KV_METRIC_ATTN_VS_REST */
        const int32_t *col = cur ? res->col_cur : res->col_base;
        double a = cell_num(c, r, col[COL_ATTN_MED]), t = cell_num(c, r, col[COL_STEP_MED]);
        return a > 0 && t > a ? a / (t - a) : NAN;
    }
    double v = cell_num(c, r, cur ? res->metric_cur : res->metric_base);
    return res->normalized ? v / row_pred(res, cur, r) : v;
}

/* p95 - median of the step time (normalised when asked), 0 if unusable. */
static double row_spread(const struct kv_compare_result *res, int cur, int64_t r)
{
    const struct kv_csv *c = cur ? res->cur : res->base;
    const int32_t *col = cur ? res->col_cur : res->col_base;
    double s = cell_num(c, r, col[COL_STEP_P95]) - cell_num(c, r, col[COL_STEP_MED]);
    if (res->normalized)
        s /= row_pred(res, cur, r);
    return isfinite(s) && s > 0 ? s : 0.0;
}

/* Every row of one side must have a usable prediction. */
static enum kv_status preds_check(const struct kv_compare_result *res, int cur,
                                  char *err, size_t err_len)
{
    const struct kv_csv *c = cur ? res->cur : res->base;
    for (int64_t r = 0; r < c->n_rows; r++) {
        if (isnan(row_pred(res, cur, r))) {
            kv_csv_error(err, err_len, c->name, c->row_line[r],
                         "cannot normalise: the roofline prediction from %s and %s "
                         "(and the limits) is not a positive number",
                         !res->pred_attn ? "bytes_step"
                         : (cur ? res->col_attn_bytes_cur : res->col_attn_bytes_base) >= 0
                             ? KV_SWEEP_COL_ATTN_BYTES
                             : "cache_bytes",
                         res->pred_attn ? "attn_flops_step" : "flops_step");
            return KV_ERR_FORMAT;
        }
    }
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* Running a comparison                                                     */

void kv_compare_opts_defaults(struct kv_compare_opts *o)
{
    o->metric = "step_ns_median";
    o->threshold_pct = 5.0;
    o->normalize = 0;
    o->aggregate = 0;
}

void kv_compare_destroy(struct kv_compare_result *r)
{
    if (r == NULL)
        return;
    kv_free(r->items);
    kv_free(r->groups);
    kv_free(r->unmatched);
    kv_free(r);
}

/* The metric column in one file; every cell must be a number. */
static enum kv_status metric_col(const struct kv_csv *c, const char *metric,
                                 int32_t *out, char *err, size_t err_len)
{
    char ex[80];
    kv_csv_excerpt(ex, sizeof ex, metric, 64);
    int32_t j = kv_csv_col(c, metric);
    if (j < 0) {
        kv_csv_error(err, err_len, c->name, c->header_line,
                     "no column '%s' (given to --metric)", ex);
        return KV_ERR_INVALID;
    }
    for (int64_t r = 0; r < c->n_rows; r++) {
        double v;
        const char *s = kv_csv_cell(c, r, j);
        if (kv_csv_parse_double(s, &v) != 0) {
            char cx[48];
            kv_csv_excerpt(cx, sizeof cx, s, 32);
            kv_csv_error(err, err_len, c->name, c->row_line[r],
                         "column '%s': '%s' is not a number", ex, cx);
            return KV_ERR_FORMAT;
        }
    }
    *out = j;
    return KV_OK;
}

/* Row r's confidence interval on one side, normalised like its value and
 * widened to hold the value itself (a percentile interval of an even
 * count's median can miss the sample median by a hair); 0 when the row has
 * none (an empty or non-finite bound, lo > hi). */
static int row_ci(const struct kv_compare_result *res, int cur, int64_t r, double v,
                  double *lo, double *hi)
{
    const struct kv_csv *c = cur ? res->cur : res->base;
    double b[2];
    for (int k = 0; k < 2; k++)
        if (kv_csv_parse_double(kv_csv_cell(c, r, res->col_ci[cur][k]), &b[k]) != 0)
            return 0; /* empty: validated otherwise */
    if (res->normalized) {
        const double p = row_pred(res, cur, r);
        b[0] /= p;
        b[1] /= p;
    }
    if (!isfinite(b[0]) || !isfinite(b[1]) || b[0] > b[1])
        return 0;
    *lo = fmin(b[0], v);
    *hi = fmax(b[1], v);
    return 1;
}

/*
 * The band of a time whose rows both carry intervals (compare.h): in the
 * direction of d = n - b, the change the intervals allow plus the threshold
 * of the larger side, so that |d| > band is exactly "the intervals separate
 * by the threshold". 0 when either row has no interval.
 */
static int ci_band(const struct kv_compare_result *res, const struct kv_compare_item *it,
                   double *band)
{
    double blo, bhi, nlo, nhi;
    if (!res->uses_ci || !row_ci(res, 0, it->base_row, it->base, &blo, &bhi) ||
        !row_ci(res, 1, it->new_row, it->cur, &nlo, &nhi))
        return 0;
    const double t = res->threshold_pct / 100.0;
    if (it->cur >= it->base) /* slower: new.lo > base.hi * (1 + t) */
        *band = (it->cur - nlo) + (bhi - it->base) + t * fabs(bhi);
    else                     /* faster: base.lo > new.hi * (1 + t) */
        *band = (it->base - blo) + (nhi - it->cur) + t * fabs(nhi);
    return 1;
}

/* Bit 0: the base row is marked noisy, bit 1: the new one. */
static unsigned item_noisy(const struct kv_compare_result *res, const struct kv_compare_item *it)
{
    unsigned m = 0;
    for (int s = 0; s < 2 && res->noise_flags; s++) {
        const int32_t j = res->col_noisy[s];
        const int64_t row = s ? it->new_row : it->base_row;
        if (j >= 0 && strcmp(kv_csv_cell(s ? res->cur : res->base, row, j), "1") == 0)
            m |= 1u << s;
    }
    return m;
}

static void item_classify(struct kv_compare_result *res, struct kv_compare_item *it)
{
    double b = kv_compare_row_value(res, 0, it->base_row);
    double n = kv_compare_row_value(res, 1, it->new_row);
    it->base = b;
    it->cur = n;
    if (!isfinite(b) || !isfinite(n)) {
        it->ratio = NAN;
        it->noise = NAN;
        it->verdict = KV_VERDICT_NA;
        return;
    }
    if (b != 0)
        it->ratio = n / b;
    else
        it->ratio = n == 0 ? 1.0 : (n > 0 ? INFINITY : -INFINITY);
    it->uses_ci = ci_band(res, it, &it->noise);
    if (!it->uses_ci) {
        it->noise = res->threshold_pct / 100.0 * fabs(b);
        if (res->uses_spread) {
            it->noise = fmax(it->noise, row_spread(res, 0, it->base_row));
            it->noise = fmax(it->noise, row_spread(res, 1, it->new_row));
        }
    }
    it->noisy = item_noisy(res, it);
    double d = n - b;
    if (it->noisy)
        it->verdict = KV_VERDICT_NOISY; /* never judged, whatever d is */
    else if (fabs(d) <= it->noise)
        it->verdict = KV_VERDICT_SAME;
    else if (res->smaller_is_better ? d > 0 : d < 0)
        it->verdict = KV_VERDICT_WORSE;
    else
        it->verdict = KV_VERDICT_BETTER;
}

int kv_compare_same_group(const struct kv_compare_result *r, int64_t a, int64_t b)
{
    const struct kv_csv *c = r->base;
    int64_t ra = r->items[a].base_row, rb = r->items[b].base_row;
    if (strcmp(kv_csv_cell(c, ra, r->col_base[COL_STRATEGY]),
               kv_csv_cell(c, rb, r->col_base[COL_STRATEGY])) != 0)
        return 0;
    for (int j = 1; j < COL_SEQ_LEN; j++) {
        if (kv_sweep_cell_int(c, ra, r->col_base[j]) !=
            kv_sweep_cell_int(c, rb, r->col_base[j]))
            return 0;
    }
    /* dtype and params of each file that has them (against a schema-1 file,
     * the other side's tell the groups apart) */
    for (int s = 0; s < 2; s++) {
        const int32_t *ext = s ? r->col_ext_cur : r->col_ext_base;
        const struct kv_csv *cs = s ? r->cur : r->base;
        const int64_t xa = s ? r->items[a].new_row : ra, xb = s ? r->items[b].new_row : rb;
        for (int e = 0; e < 2 && r->has_ext[s]; e++)
            if (strcmp(kv_csv_cell(cs, xa, ext[e]), kv_csv_cell(cs, xb, ext[e])) != 0)
                return 0;
    }
    return 1;
}

/*
 * Splits the (key-sorted) items into groups of one configuration across
 * seq_len and judges each by the median relative change of its rows
 * against the median of their relative noise bands.
 */
static enum kv_status groups_build(struct kv_compare_result *res)
{
    res->groups = kv_alloc((size_t)res->n_items * sizeof *res->groups);
    double *chg = kv_alloc((size_t)res->n_items * sizeof *chg);
    double *noi = kv_alloc((size_t)res->n_items * sizeof *noi);
    if (res->groups == NULL || chg == NULL || noi == NULL) {
        kv_free(chg);
        kv_free(noi);
        return KV_ERR_NOMEM;
    }
    for (int64_t t = 0; t < res->n_items;) {
        struct kv_compare_group *g = &res->groups[res->n_groups++];
        g->first = t;
        int64_t n = 0;
        do {
            const struct kv_compare_item *it = &res->items[t];
            g->n_noisy += it->verdict == KV_VERDICT_NOISY;
            if (it->verdict != KV_VERDICT_NA && it->base != 0) {
                chg[n] = (it->cur - it->base) / fabs(it->base);
                noi[n] = it->noise / fabs(it->base);
                n++;
            }
            t++;
        } while (t < res->n_items && kv_compare_same_group(res, t - 1, t));
        g->count = t - g->first;
        g->n_compared = n;
        if (n == 0) {
            g->change = g->noise = NAN;
            g->verdict = KV_VERDICT_NA;
            continue;
        }
        g->change = kv_stats_median(chg, n);
        g->noise = kv_stats_median(noi, n);
        if (g->n_noisy > 0) /* one disturbed row spoils the group's median */
            g->verdict = KV_VERDICT_NOISY;
        else if (fabs(g->change) <= g->noise)
            g->verdict = KV_VERDICT_SAME;
        else if (res->smaller_is_better ? g->change > 0 : g->change < 0)
            g->verdict = KV_VERDICT_WORSE;
        else
            g->verdict = KV_VERDICT_BETTER;
        res->n_groups_regressed += g->verdict == KV_VERDICT_WORSE;
        res->n_groups_improved += g->verdict == KV_VERDICT_BETTER;
        res->n_groups_noisy += g->verdict == KV_VERDICT_NOISY;
    }
    kv_free(chg);
    kv_free(noi);
    return KV_OK;
}

int kv_compare_regressed(const struct kv_compare_result *r)
{
    if (r == NULL)
        return 0;
    return r->aggregate ? r->n_groups_regressed > 0 : r->n_regressed > 0;
}

enum kv_compare_outcome kv_compare_outcome(const struct kv_compare_result *r)
{
    if (r == NULL)
        return KV_COMPARE_CLEAN;
    if (kv_compare_regressed(r))
        return KV_COMPARE_REGRESSED;
    return (r->aggregate ? r->n_groups_noisy : r->n_noisy) > 0 ? KV_COMPARE_NOISY
                                                                : KV_COMPARE_CLEAN;
}

const char *kv_compare_noise_reason(const struct kv_compare_result *r, int cur, int64_t row)
{
    const int s = cur != 0;
    const struct kv_csv *c = s ? r->cur : r->base;
    if (r->col_noisy[s] < 0 || strcmp(kv_csv_cell(c, row, r->col_noisy[s]), "1") != 0 ||
        r->col_reason[s] < 0)
        return "";
    return kv_csv_cell(c, row, r->col_reason[s]);
}

/* The noise columns of both files: the metric's interval (X_median ->
 * X_ci_lo, X_ci_hi) for a time metric, and the noisy flags for a time or
 * attn_vs_rest (a size or an error does not depend on how busy the machine
 * was). */
static void noise_cols(struct kv_compare_result *res)
{
    char name[2][96];
    const char *m = res->metric;
    const size_t ml = strlen(m), sl = strlen(KV_COMPARE_MEDIAN_SUFFIX);
    const int median = ml > sl && strcmp(m + ml - sl, KV_COMPARE_MEDIAN_SUFFIX) == 0;
    const int stem = median ? (int)(ml - sl) : 0;
    snprintf(name[0], sizeof name[0], "%.*s%s", stem, m, KV_COMPARE_CI_LO_SUFFIX);
    snprintf(name[1], sizeof name[1], "%.*s%s", stem, m, KV_COMPARE_CI_HI_SUFFIX);
    res->uses_ci = median && res->is_time && !res->self_normalized;
    res->noise_flags = res->is_time || res->self_normalized;
    for (int s = 0; s < 2; s++) {
        const struct kv_csv *c = s ? res->cur : res->base;
        for (int k = 0; k < 2; k++) {
            res->col_ci[s][k] = res->uses_ci ? kv_csv_col(c, name[k]) : -1;
            res->uses_ci &= res->col_ci[s][k] >= 0;
        }
        res->col_noisy[s] = kv_csv_col(c, KV_SWEEP_COL_NOISY);
        res->col_reason[s] = kv_csv_col(c, KV_SWEEP_COL_NOISE_REASON);
    }
}

static enum kv_status run_checked(struct kv_compare_result *res, const struct kv_compare_opts *o,
                                  char *err, size_t err_len)
{
    const struct kv_csv *base = res->base, *cur = res->cur;
    enum kv_status st;
    if ((st = kv_sweep_validate(base, res->col_base, err, err_len)) != KV_OK ||
        (st = kv_sweep_validate(cur, res->col_cur, err, err_len)) != KV_OK)
        return st;
    if (strcmp(res->metric, "strategy") == 0) {
        kv_csv_error(err, err_len, "--metric", 0, "'strategy' is not a numeric column");
        return KV_ERR_INVALID;
    }
    res->self_normalized = strcmp(res->metric, KV_METRIC_ATTN_VS_REST) == 0;
    if (res->self_normalized) {
        res->metric_base = res->col_base[COL_ATTN_MED];
        res->metric_cur = res->col_cur[COL_ATTN_MED];
    } else if ((st = metric_col(base, res->metric, &res->metric_base, err, err_len)) != KV_OK ||
               (st = metric_col(cur, res->metric, &res->metric_cur, err, err_len)) != KV_OK) {
        return st;
    }

    res->is_time = metric_is_time(res->metric);
    res->normalized = o->normalize && res->is_time;
    res->smaller_is_better = metric_smaller_is_better(res->metric);
    res->uses_spread = strcmp(res->metric, "step_ns_median") == 0;
    res->pred_attn = strcmp(res->metric, "attn_ns_median") == 0;
    res->col_attn_bytes_base = kv_csv_col(base, KV_SWEEP_COL_ATTN_BYTES);
    res->col_attn_bytes_cur = kv_csv_col(cur, KV_SWEEP_COL_ATTN_BYTES);
    res->unit = res->self_normalized ? "x rest of step" : metric_unit(res->metric, res->normalized);
    if (res->normalized) {
        /* per-row limits (columns of a merged file) win over the metadata */
        static const char *const rate_keys[2] = {"read_gbps", "sgemm_gflops"};
        double *rates[2][2] = {{&res->base_read_gbps, &res->base_gflops},
                               {&res->cur_read_gbps, &res->cur_gflops}};
        for (int side = 0; side < 2; side++) {
            const struct kv_csv *c = side ? cur : base;
            for (int k = 0; k < 2; k++) {
                res->col_rate[side][k] = kv_csv_col(c, rate_keys[k]);
                if (res->col_rate[side][k] < 0 &&
                    (st = meta_rate(c, rate_keys[k], rates[side][k], err, err_len)) != KV_OK)
                    return st;
            }
        }
        if ((st = preds_check(res, 0, err, err_len)) ||
            (st = preds_check(res, 1, err, err_len)))
            return st;
        if (res->pred_attn)
            res->attn_bytes_fallback = (res->col_attn_bytes_base < 0 ? 1 : 0) |
                                       (res->col_attn_bytes_cur < 0 ? 2 : 0);
    }

    /* dtype and params join when both files have them (compare_join.c) */
    res->has_ext[0] = kv_sweep_ext_cols(base, res->col_ext_base);
    res->has_ext[1] = kv_sweep_ext_cols(cur, res->col_ext_cur);
    res->use_ext = res->has_ext[0] && res->has_ext[1];
    if ((st = kv_compare_join(res, err, err_len)) != KV_OK)
        return st;
    noise_cols(res);
    const int64_t nb = base->n_rows, nc = cur->n_rows;

    /* which key columns differ between rows of either file (for labels,
     * so that every row of either file gets a distinct name) */
    for (int k = 1; k < KV_SWEEP_N_KEY - 1; k++) {
        int64_t v0 = kv_sweep_cell_int(base, 0, res->col_base[k]);
        for (int64_t t = 0; t < nb + nc && !(res->varying & (1u << k)); t++) {
            int64_t v = t < nb ? kv_sweep_cell_int(base, t, res->col_base[k])
                               : kv_sweep_cell_int(cur, t - nb, res->col_cur[k]);
            if (v != v0)
                res->varying |= 1u << k;
        }
    }
    for (int e = 0; e < 2 && (res->has_ext[0] || res->has_ext[1]); e++) {
        /* over the rows of the files that have the column */
        const int64_t t0 = res->has_ext[0] ? 0 : nb, t1 = res->has_ext[1] ? nb + nc : nb;
        const char *v0 = t0 < nb ? kv_csv_cell(base, 0, res->col_ext_base[e])
                                 : kv_csv_cell(cur, 0, res->col_ext_cur[e]);
        for (int64_t t = t0; t < t1 && !(res->ext_varying & (1u << e)); t++) {
            const char *v = t < nb ? kv_csv_cell(base, t, res->col_ext_base[e])
                                   : kv_csv_cell(cur, t - nb, res->col_ext_cur[e]);
            if (strcmp(v, v0) != 0)
                res->ext_varying |= 1u << e;
        }
    }

    res->worst_ratio = NAN;
    res->worst_item = -1;
    for (int64_t t = 0; t < res->n_items; t++) {
        struct kv_compare_item *it = &res->items[t];
        item_classify(res, it);
        if (it->verdict == KV_VERDICT_NA) {
            res->n_na++;
            continue;
        }
        res->n_compared++;
        res->n_regressed += it->verdict == KV_VERDICT_WORSE;
        res->n_improved += it->verdict == KV_VERDICT_BETTER;
        if (it->verdict == KV_VERDICT_NOISY) {
            res->n_noisy++; /* compared, not judged: not the worst either */
            continue;
        }
        if (res->worst_item < 0 ||
            (res->smaller_is_better ? it->ratio > res->worst_ratio
                                    : it->ratio < res->worst_ratio)) {
            res->worst_ratio = it->ratio;
            res->worst_item = t;
        }
    }
    return groups_build(res);
}

enum kv_status kv_compare_run(struct kv_compare_result **out, const struct kv_csv *base,
                              const struct kv_csv *cur, const struct kv_compare_opts *o,
                              char *err, size_t err_len)
{
    if (out == NULL || base == NULL || cur == NULL || o == NULL)
        return KV_ERR_INVALID;
    *out = NULL;
    const char *metric = o->metric != NULL ? o->metric : "step_ns_median";
    if (strlen(metric) >= sizeof ((struct kv_compare_result *)0)->metric) {
        kv_csv_error(err, err_len, "--metric", 0, "column name is too long");
        return KV_ERR_INVALID;
    }
    if (!(o->threshold_pct >= 0) || !isfinite(o->threshold_pct)) {
        kv_csv_error(err, err_len, "--threshold", 0, "must be a percentage >= 0");
        return KV_ERR_INVALID;
    }
    struct kv_compare_result *res = kv_alloc(sizeof *res);
    if (res == NULL) {
        kv_csv_error(err, err_len, "compare", 0, "%s", kv_status_str(KV_ERR_NOMEM));
        return KV_ERR_NOMEM;
    }
    res->base = base;
    res->cur = cur;
    memcpy(res->metric, metric, strlen(metric) + 1); /* length checked above */
    res->threshold_pct = o->threshold_pct;
    res->aggregate = o->aggregate != 0;
    for (int k = 0; k < 4; k++)
        res->col_rate[k / 2][k % 2] = res->col_ci[k / 2][k % 2] = -1;
    for (int k = 0; k < 2; k++)
        res->col_ext_base[k] = res->col_ext_cur[k] = res->col_noisy[k] = res->col_reason[k] = -1;
    enum kv_status st = run_checked(res, o, err, err_len);
    if (st != KV_OK) {
        if (st == KV_ERR_NOMEM)
            kv_csv_error(err, err_len, "compare", 0, "%s", kv_status_str(st));
        kv_compare_destroy(res);
        return st;
    }
    *out = res;
    return KV_OK;
}
