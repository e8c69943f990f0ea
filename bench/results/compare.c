/*
 * compare.c - join two sweep CSVs on their configuration key and classify
 * each joined row as better / worse / same within noise (see compare.h for
 * the noise rule and the roofline normalisation).
 *
 * The join sorts each file's keys once (O(n log n)); the same sort finds
 * duplicate keys, which are an error because a join on them would be
 * ambiguous. Cells were validated before use, so the writers re-parse them
 * without error paths.
 */
#include "compare.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../measure/stats.h"
#include "../../strategies/strategy.h"

/* ------------------------------------------------------------------------ */
/* Schema                                                                   */

const char *const kv_sweep_required[KV_SWEEP_N_REQUIRED] = {KV_SCHEMA_V1_NAMES};

/* Short local names for the columns this file reads by index. */
enum {
    COL_STRATEGY = KV_SCHEMA_COL_STRATEGY,
    COL_BITS = KV_SCHEMA_COL_BITS,
    COL_SEQ_LEN = KV_SCHEMA_COL_SEQ_LEN,
    COL_REPS = KV_SCHEMA_COL_REPS,
    COL_STEP_MED = KV_SCHEMA_COL_STEP_MED,
    COL_STEP_P95 = KV_SCHEMA_COL_STEP_P95,
    COL_ATTN_MED = KV_SCHEMA_COL_ATTN_MED,
    COL_FLOPS = KV_SCHEMA_COL_FLOPS,
    COL_ATTN_FLOPS = KV_SCHEMA_COL_ATTN_FLOPS,
    COL_BYTES = KV_SCHEMA_COL_BYTES,
    COL_CACHE_BYTES = KV_SCHEMA_COL_CACHE_BYTES,
};
static_assert(KV_SWEEP_N_KEY == COL_SEQ_LEN + 1, "the key ends at seq_len");
#define N_INT_KEYS (KV_SWEEP_N_KEY - 1) /* key columns after strategy */

/* The text rule (strategy.h) on a cell kvlab wrote: a label (the strategy,
 * label and dtype columns, an entry of `# strategies=`), or, for params,
 * `k=v;k=v` of label characters. -1 with "FILE:LINE: ..." in err. */
static int text_rule(const struct kv_csv *c, int64_t line, const char *what, const char *s,
                     int params, char *err, size_t err_len)
{
    char sub[192];
    if (!params) {
        if (kv_label_why(s, sub, sizeof sub) == 0)
            return 0;
        kv_csv_error(err, err_len, c->name, line, "%s: %s (kvlab writes no such label)", what,
                     sub);
        return -1;
    }
    for (const char *t = s; *t != '\0'; t++)
        if (*t != ';' && !kv_label_char_ok((unsigned char)*t)) {
            kv_csv_error(err, err_len, c->name, line, "%s: character %d is not allowed: "
                         "parameters are k=v;k=v of letters, digits and %s", what,
                         (int)(t - s) + 1, KV_LABEL_PUNCT);
            return -1;
        }
    return 0;
}

/* Every label a sweep file holds passes the text rule: the strategy, label,
 * dtype and params cells and the `# strategies=` list. */
static enum kv_status labels_check(const struct kv_csv *c, int32_t j_strategy, char *err,
                                   size_t err_len)
{
    const struct kv_csv_meta *m = kv_csv_meta_find(c, "strategies");
    if (m != NULL && m->value[0] != '\0') {
        char one[KV_LABEL_MAX + 2];
        for (const char *p = m->value; p != NULL;) {
            const char *e = strchr(p, ',');
            const size_t len = e != NULL ? (size_t)(e - p) : strlen(p);
            snprintf(one, sizeof one, "%.*s", (int)(len < sizeof one ? len : sizeof one - 1),
                     p);
            if (len >= sizeof one)
                one[KV_LABEL_MAX] = '?'; /* too long: said so */
            if (text_rule(c, m->line, "metadata 'strategies'", one, 0, err, err_len) != 0)
                return KV_ERR_FORMAT;
            p = e != NULL ? e + 1 : NULL;
        }
    }
    static const char *const names[] = {"label", KV_SWEEP_COL_DTYPE, KV_SWEEP_COL_PARAMS};
    int32_t jc[4] = {j_strategy, -1, -1, -1};
    for (int q = 0; q < 3; q++)
        jc[q + 1] = kv_csv_col(c, names[q]);
    for (int64_t r = 0; r < c->n_rows; r++)
        for (int q = 0; q < 4; q++) {
            if (jc[q] < 0)
                continue;
            const char *s = kv_csv_cell(c, r, jc[q]);
            if (q > 0 && s[0] == '\0')
                continue; /* a column some merged inputs lack (schema 2 asks dtype above) */
            char what[48];
            snprintf(what, sizeof what, "column '%s'", q == 0 ? "strategy" : names[q - 1]);
            if (text_rule(c, c->row_line[r], what, s, q == 3, err, err_len) != 0)
                return KV_ERR_FORMAT;
        }
    return KV_OK;
}

enum kv_status kv_sweep_validate(const struct kv_csv *c, int32_t col[KV_SWEEP_N_REQUIRED],
                                 char *err, size_t err_len)
{
    char ex[48];
    const struct kv_csv_meta *m = kv_csv_meta_find(c, "schema");
    if (m == NULL) {
        kv_csv_error(err, err_len, c->name, c->header_line,
                     "no '# schema=' metadata line before the header "
                     "(not a kvlab sweep CSV?)");
        return KV_ERR_FORMAT;
    }
    const int v2 = strcmp(m->value, KV_SWEEP_SCHEMA) == 0;
    if (!v2 && strcmp(m->value, KV_SWEEP_SCHEMA_V1) != 0) {
        kv_csv_excerpt(ex, sizeof ex, m->value, 16);
        kv_csv_error(err, err_len, c->name, m->line,
                     "schema version '%s', but this kvlab reads schemas %s and %s", ex,
                     KV_SWEEP_SCHEMA_V1, KV_SWEEP_SCHEMA);
        return KV_ERR_FORMAT;
    }
    static const char *const ext[2] = {KV_SWEEP_COL_DTYPE, KV_SWEEP_COL_PARAMS};
    for (int e = 0; e < 2 && v2; e++) {
        const int32_t j = kv_csv_col(c, ext[e]);
        if (j < 0) {
            kv_csv_error(err, err_len, c->name, m->line,
                         "schema version '%s' needs the columns dtype and params "
                         "(the header on line %lld has no '%s')", KV_SWEEP_SCHEMA,
                         (long long)c->header_line, ext[e]);
            return KV_ERR_FORMAT;
        }
        for (int64_t r = 0; r < c->n_rows && e == 0; r++) /* params may be empty */
            if (kv_csv_cell(c, r, j)[0] == '\0') {
                kv_csv_error(err, err_len, c->name, c->row_line[r], "empty '%s'", ext[e]);
                return KV_ERR_FORMAT;
            }
    }
    for (int j = 0; j < KV_SWEEP_N_REQUIRED; j++) {
        col[j] = kv_csv_col(c, kv_sweep_required[j]);
        if (col[j] < 0) {
            kv_csv_error(err, err_len, c->name, c->header_line,
                         "missing required column '%s'", kv_sweep_required[j]);
            return KV_ERR_FORMAT;
        }
    }
    if (c->n_rows == 0) {
        kv_csv_error(err, err_len, c->name, c->header_line,
                     "no data rows after the header");
        return KV_ERR_FORMAT;
    }
    for (int64_t r = 0; r < c->n_rows; r++) {
        for (int j = 0; j < KV_SWEEP_N_REQUIRED; j++) {
            const char *s = kv_csv_cell(c, r, col[j]);
            int64_t iv;
            double dv;
            if (j == COL_STRATEGY) {
                if (s[0] == '\0') {
                    kv_csv_error(err, err_len, c->name, c->row_line[r],
                                 "empty strategy name");
                    return KV_ERR_FORMAT;
                }
            } else if (j <= COL_REPS) {
                if (kv_csv_parse_int64(s, &iv) != 0) {
                    kv_csv_excerpt(ex, sizeof ex, s, 32);
                    kv_csv_error(err, err_len, c->name, c->row_line[r],
                                 "column '%s': '%s' is not an integer",
                                 kv_sweep_required[j], ex);
                    return KV_ERR_FORMAT;
                }
            } else if (kv_csv_parse_double(s, &dv) != 0) {
                kv_csv_excerpt(ex, sizeof ex, s, 32);
                kv_csv_error(err, err_len, c->name, c->row_line[r],
                             "column '%s': '%s' is not a number", kv_sweep_required[j], ex);
                return KV_ERR_FORMAT;
            }
        }
    }
    return labels_check(c, col[COL_STRATEGY], err, err_len);
}

/* ------------------------------------------------------------------------ */
/* Keys                                                                     */

int kv_sweep_key_cmp(const struct kv_sweep_key *a, const struct kv_sweep_key *b)
{
    int c = strcmp(a->strategy, b->strategy);
    if (c != 0)
        return c;
    for (int k = 0; k < N_INT_KEYS - 1; k++) {
        if (a->v[k] != b->v[k])
            return a->v[k] < b->v[k] ? -1 : 1;
    }
    /* dtype and params before seq_len: a group's rows stay together */
    for (int e = 0; e < 2; e++) {
        if (a->ext[e] != NULL && b->ext[e] != NULL && (c = strcmp(a->ext[e], b->ext[e])) != 0)
            return c;
    }
    const int64_t ta = a->v[N_INT_KEYS - 1], tb = b->v[N_INT_KEYS - 1];
    return ta == tb ? 0 : ta < tb ? -1 : 1;
}

static int key_qsort(const void *pa, const void *pb)
{
    const struct kv_sweep_key *a = pa, *b = pb;
    int c = kv_sweep_key_cmp(a, b);
    if (c != 0)
        return c;
    return (a->row > b->row) - (a->row < b->row); /* stable: file order */
}

static int64_t cell_int(const struct kv_csv *c, int64_t r, int32_t j)
{
    int64_t v = 0;
    int rc = kv_csv_parse_int64(kv_csv_cell(c, r, j), &v);
    KV_ASSERT(rc == 0); /* validated */
    (void)rc;
    return v;
}

static double cell_num(const struct kv_csv *c, int64_t r, int32_t j)
{
    double v = NAN;
    int rc = kv_csv_parse_double(kv_csv_cell(c, r, j), &v);
    KV_ASSERT(rc == 0); /* validated */
    (void)rc;
    return v;
}

void kv_sweep_key_fill(struct kv_sweep_key *k, const struct kv_csv *c,
                       const int32_t col[KV_SWEEP_N_REQUIRED], const int32_t *ext)
{
    for (int64_t r = 0; r < c->n_rows; r++) {
        k[r].strategy = kv_csv_cell(c, r, col[COL_STRATEGY]);
        for (int j = 0; j < N_INT_KEYS; j++)
            k[r].v[j] = cell_int(c, r, col[j + 1]);
        for (int e = 0; e < 2; e++)
            k[r].ext[e] = ext != NULL ? kv_csv_cell(c, r, ext[e]) : NULL;
        if (ext != NULL && k[r].ext[1][0] == '\0') /* no parameters, as kvlab writes it */
            k[r].ext[1] = KV_SWEEP_NO_PARAMS;
        k[r].row = r;
    }
}

int kv_sweep_ext_cols(const struct kv_csv *c, int32_t ext[2])
{
    ext[0] = kv_csv_col(c, KV_SWEEP_COL_DTYPE);
    ext[1] = kv_csv_col(c, KV_SWEEP_COL_PARAMS);
    return ext[0] >= 0 && ext[1] >= 0;
}

void kv_sweep_key_describe(char *buf, size_t n, const struct kv_sweep_key *k)
{
    char strat[72];
    kv_csv_excerpt(strat, sizeof strat, k->strategy, 64);
    size_t w = (size_t)snprintf(buf, n, "%s", strat);
    for (int j = 0; j < N_INT_KEYS && w < n; j++) {
        for (int e = 0; e < 2 && j + 1 == COL_SEQ_LEN && k->ext[e] != NULL && w < n; e++) {
            char v[72];
            kv_csv_excerpt(v, sizeof v, k->ext[e], 64);
            int m = snprintf(buf + w, n - w, " %s=%s",
                             e == 0 ? KV_SWEEP_COL_DTYPE : KV_SWEEP_COL_PARAMS, v);
            w += m > 0 ? (size_t)m : 0;
        }
        if (w >= n)
            break;
        int m = snprintf(buf + w, n - w, " %s=%lld",
                         j + 1 == COL_SEQ_LEN ? "T" : kv_sweep_required[j + 1],
                         (long long)k->v[j]);
        w += m > 0 ? (size_t)m : 0;
    }
}

/* keys (n_rows), sorted; KV_ERR_FORMAT on a duplicate. ext: the dtype and
 * params columns when they join (else NULL). */
static enum kv_status keys_build(struct kv_sweep_key **out, const struct kv_csv *c,
                                 const int32_t col[KV_SWEEP_N_REQUIRED], const int32_t *ext,
                                 char *err, size_t err_len)
{
    struct kv_sweep_key *k = kv_alloc((size_t)c->n_rows * sizeof *k);
    if (k == NULL)
        return KV_ERR_NOMEM;
    kv_sweep_key_fill(k, c, col, ext);
    qsort(k, (size_t)c->n_rows, sizeof *k, key_qsort);
    for (int64_t r = 1; r < c->n_rows; r++) {
        if (kv_sweep_key_cmp(&k[r], &k[r - 1]) == 0) {
            kv_csv_error(err, err_len, c->name, c->row_line[k[r].row],
                         "duplicate configuration: same strategy, layers .. threads%s "
                         "and seq_len as line %lld", ext != NULL ? ", dtype, params" : "",
                         (long long)c->row_line[k[r - 1].row]);
            kv_free(k);
            return KV_ERR_FORMAT;
        }
    }
    *out = k;
    return KV_OK;
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

/* The metric of row r on one side, normalised when asked. */
static double row_value(const struct kv_compare_result *res, int cur, int64_t r)
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

static void item_classify(struct kv_compare_result *res, struct kv_compare_item *it)
{
    double b = row_value(res, 0, it->base_row), n = row_value(res, 1, it->new_row);
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
    it->noise = res->threshold_pct / 100.0 * fabs(b);
    if (res->uses_spread) {
        it->noise = fmax(it->noise, row_spread(res, 0, it->base_row));
        it->noise = fmax(it->noise, row_spread(res, 1, it->new_row));
    }
    double d = n - b;
    if (fabs(d) <= it->noise)
        it->verdict = KV_VERDICT_SAME;
    else if (res->smaller_is_better ? d > 0 : d < 0)
        it->verdict = KV_VERDICT_WORSE;
    else
        it->verdict = KV_VERDICT_BETTER;
}

static int same_group(const struct kv_compare_result *r, int64_t a, int64_t b);

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
            if (it->verdict != KV_VERDICT_NA && it->base != 0) {
                chg[n] = (it->cur - it->base) / fabs(it->base);
                noi[n] = it->noise / fabs(it->base);
                n++;
            }
            t++;
        } while (t < res->n_items && same_group(res, t - 1, t));
        g->count = t - g->first;
        g->n_compared = n;
        if (n == 0) {
            g->change = g->noise = NAN;
            g->verdict = KV_VERDICT_NA;
            continue;
        }
        g->change = kv_stats_median(chg, n);
        g->noise = kv_stats_median(noi, n);
        if (fabs(g->change) <= g->noise)
            g->verdict = KV_VERDICT_SAME;
        else if (res->smaller_is_better ? g->change > 0 : g->change < 0)
            g->verdict = KV_VERDICT_WORSE;
        else
            g->verdict = KV_VERDICT_BETTER;
        res->n_groups_regressed += g->verdict == KV_VERDICT_WORSE;
        res->n_groups_improved += g->verdict == KV_VERDICT_BETTER;
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

static enum kv_status run_checked(struct kv_compare_result *res, const struct kv_compare_opts *o,
                                  struct kv_sweep_key **kb, struct kv_sweep_key **kc, char *err, size_t err_len)
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

    /* schema 2 on both sides: dtype and params join too */
    res->use_ext = kv_sweep_ext_cols(base, res->col_ext_base) &&
                   kv_sweep_ext_cols(cur, res->col_ext_cur);
    if ((st = keys_build(kb, base, res->col_base, res->use_ext ? res->col_ext_base : NULL, err,
                         err_len)) != KV_OK ||
        (st = keys_build(kc, cur, res->col_cur, res->use_ext ? res->col_ext_cur : NULL, err,
                         err_len)) != KV_OK)
        return st;

    int64_t nb = base->n_rows, nc = cur->n_rows;
    res->items = kv_alloc((size_t)(nb < nc ? nb : nc) * sizeof *res->items);
    if (res->items == NULL)
        return KV_ERR_NOMEM;
    int64_t i = 0, j = 0;
    while (i < nb && j < nc) {
        int c = kv_sweep_key_cmp(&(*kb)[i], &(*kc)[j]);
        if (c < 0) {
            res->n_only_base++;
            i++;
        } else if (c > 0) {
            res->n_only_new++;
            j++;
        } else {
            struct kv_compare_item *it = &res->items[res->n_items++];
            it->base_row = (*kb)[i++].row;
            it->new_row = (*kc)[j++].row;
        }
    }
    res->n_only_base += nb - i;
    res->n_only_new += nc - j;
    if (res->n_items == 0) {
        char other[80];
        kv_csv_excerpt(other, sizeof other, base->name, 64);
        kv_csv_error(err, err_len, cur->name, cur->row_line[0],
                     "no configuration in common with %s (none of %lld rows here "
                     "matches any of its %lld on strategy, layers .. threads%s, seq_len)",
                     other, (long long)nc, (long long)nb,
                     res->use_ext ? ", dtype, params" : "");
        return KV_ERR_FORMAT;
    }

    /* which key columns differ between rows of either file (for labels,
     * so that every row of either file gets a distinct name) */
    for (int k = 1; k < KV_SWEEP_N_KEY - 1; k++) {
        int64_t v0 = cell_int(base, 0, res->col_base[k]);
        for (int64_t t = 0; t < nb + nc && !(res->varying & (1u << k)); t++) {
            int64_t v = t < nb ? cell_int(base, t, res->col_base[k])
                               : cell_int(cur, t - nb, res->col_cur[k]);
            if (v != v0)
                res->varying |= 1u << k;
        }
    }
    for (int e = 0; e < 2 && res->use_ext; e++) {
        const char *v0 = kv_csv_cell(base, 0, res->col_ext_base[e]);
        for (int64_t t = 0; t < nb + nc && !(res->ext_varying & (1u << e)); t++) {
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
        res->col_rate[k / 2][k % 2] = -1;
    struct kv_sweep_key *kb = NULL, *kc = NULL;
    enum kv_status st = run_checked(res, o, &kb, &kc, err, err_len);
    kv_free(kb);
    kv_free(kc);
    if (st != KV_OK) {
        if (st == KV_ERR_NOMEM)
            kv_csv_error(err, err_len, "compare", 0, "%s", kv_status_str(st));
        kv_compare_destroy(res);
        return st;
    }
    *out = res;
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* Writers                                                                  */

const char *kv_compare_verdict_str(const struct kv_compare_result *r, enum kv_verdict v)
{
    switch (v) {
    case KV_VERDICT_SAME:
        return "same";
    case KV_VERDICT_BETTER:
        return r->is_time ? "faster" : "better";
    case KV_VERDICT_WORSE:
        return r->is_time ? "slower" : "worse";
    default:
        return "n/a";
    }
}

int kv_compare_format_parse(const char *s)
{
    static const char *const names[KV_COMPARE_FORMAT_COUNT] = {
        [KV_COMPARE_TABLE] = "table", [KV_COMPARE_CSV] = "csv", [KV_COMPARE_JSON] = "json"};
    for (int i = 0; i < KV_COMPARE_FORMAT_COUNT; i++) {
        if (strcmp(s, names[i]) == 0)
            return i;
    }
    return -1;
}

/* Integral raw values print whole (ns, bytes); others with 4 digits. */
static void num_fmt(char *buf, size_t n, double v, int normalized)
{
    if (isnan(v))
        snprintf(buf, n, "nan");
    else if (isinf(v))
        snprintf(buf, n, v > 0 ? "inf" : "-inf");
    else if (!normalized && v == floor(v) && fabs(v) < 1e15)
        snprintf(buf, n, "%.0f", v);
    else
        snprintf(buf, n, "%.4g", v);
}

static void ratio_fmt(char *buf, size_t n, double v)
{
    if (isfinite(v))
        snprintf(buf, n, "%.3f", v);
    else
        num_fmt(buf, n, v, 1);
}

/*
 * "strategy<sep>bits=B<sep>window=W...<sep>T=N": bits always, the other
 * configuration columns only when they differ between rows, and (schema 2)
 * the dtype and params cells when they differ.
 * with_t = 0 leaves out the seq_len part (group titles).
 */
static void row_label(char *buf, size_t n, const struct kv_compare_result *r,
                      const struct kv_csv *c, const int32_t *col, int64_t row,
                      char sep, int with_t)
{
    const int32_t *ext = c == r->base ? r->col_ext_base : r->col_ext_cur;
    size_t w = 0;
    char strat[72];
    kv_csv_excerpt(strat, sizeof strat, kv_csv_cell(c, row, col[COL_STRATEGY]), 64);
    int k = snprintf(buf, n, "%s", strat);
    w = k > 0 ? (size_t)k : 0;
    for (int j = 1; j < KV_SWEEP_N_KEY && w < n; j++) {
        for (int e = 0; e < 2 && j == COL_SEQ_LEN && r->use_ext && w < n; e++) {
            if (!(r->ext_varying & (1u << e)))
                continue;
            char v[72];
            kv_csv_excerpt(v, sizeof v, kv_csv_cell(c, row, ext[e]), 64);
            k = snprintf(buf + w, n - w, "%c%s", sep, v);
            w += k > 0 ? (size_t)k : 0;
        }
        if (w >= n || (j == COL_SEQ_LEN && !with_t))
            break;
        if (j != COL_BITS && j != COL_SEQ_LEN && !(r->varying & (1u << j)))
            continue;
        k = snprintf(buf + w, n - w, "%c%s=%lld", sep,
                     j == COL_SEQ_LEN ? "T" : kv_sweep_required[j],
                     (long long)cell_int(c, row, col[j]));
        w += k > 0 ? (size_t)k : 0;
    }
}

/* Two items belong to the same table when all key columns but seq_len agree. */
static int same_group(const struct kv_compare_result *r, int64_t a, int64_t b)
{
    const struct kv_csv *c = r->base;
    int64_t ra = r->items[a].base_row, rb = r->items[b].base_row;
    if (strcmp(kv_csv_cell(c, ra, r->col_base[COL_STRATEGY]),
               kv_csv_cell(c, rb, r->col_base[COL_STRATEGY])) != 0)
        return 0;
    for (int j = 1; j < COL_SEQ_LEN; j++) {
        if (cell_int(c, ra, r->col_base[j]) != cell_int(c, rb, r->col_base[j]))
            return 0;
    }
    for (int e = 0; e < 2 && r->use_ext; e++) {
        if (strcmp(kv_csv_cell(c, ra, r->col_ext_base[e]),
                   kv_csv_cell(c, rb, r->col_ext_base[e])) != 0)
            return 0;
    }
    return 1;
}

/* The group line under a group's rows: its median change and verdict. */
static void write_group_line(FILE *f, const struct kv_compare_result *r,
                             const struct kv_compare_group *g)
{
    char q[40], noise[40];
    if (g->verdict == KV_VERDICT_NA) {
        fprintf(f, "%8s %14s %14s %8s %7s  %s\n", "median", "", "", "-", "-", "n/a");
        return;
    }
    ratio_fmt(q, sizeof q, 1.0 + g->change);
    snprintf(noise, sizeof noise, "%.1f%%", 100.0 * g->noise);
    fprintf(f, "%8s %14s %14s %8s %7s  %s (median of %lld rows)\n", "median", "", "", q,
            noise, kv_compare_verdict_str(r, g->verdict), (long long)g->n_compared);
}

static void write_table(FILE *f, const struct kv_compare_result *r)
{
    char b[40], n[40], q[40], lab[512];
    fprintf(f, "metric %s%s%s%s, threshold %.3g%%%s\n", r->metric,
            r->unit[0] ? " (" : "", r->unit, r->unit[0] ? ")" : "", r->threshold_pct,
            r->uses_spread ? " or the rows' own p95-median spread" : "");
    kv_csv_excerpt(lab, sizeof lab, r->base->name, 400);
    fprintf(f, "base %s\n", lab);
    kv_csv_excerpt(lab, sizeof lab, r->cur->name, 400);
    fprintf(f, "new  %s\n", lab);
    for (int64_t t = 0; t < r->n_items; t++) {
        const struct kv_compare_item *it = &r->items[t];
        if (t == 0 || !same_group(r, t - 1, t)) {
            row_label(lab, sizeof lab, r, r->base, r->col_base, it->base_row, ' ', 0);
            fprintf(f, "\n%s\n%8s %14s %14s %8s %7s  %s\n", lab, "T", "base", "new",
                    "ratio", "noise", "verdict");
        }
        num_fmt(b, sizeof b, it->base, r->normalized);
        num_fmt(n, sizeof n, it->cur, r->normalized);
        ratio_fmt(q, sizeof q, it->ratio);
        char noise[40];
        if (isfinite(it->noise) && it->base != 0)
            snprintf(noise, sizeof noise, "%.1f%%", 100.0 * it->noise / fabs(it->base));
        else
            snprintf(noise, sizeof noise, "-");
        fprintf(f, "%8lld %14s %14s %8s %7s  %s\n",
                (long long)cell_int(r->base, it->base_row, r->col_base[COL_SEQ_LEN]), b, n,
                q, noise, kv_compare_verdict_str(r, it->verdict));
        if (r->aggregate && (t + 1 == r->n_items || !same_group(r, t, t + 1))) {
            for (int64_t k = 0; k < r->n_groups; k++) {
                if (r->groups[k].first + r->groups[k].count == t + 1)
                    write_group_line(f, r, &r->groups[k]);
            }
        }
    }
    fprintf(f, "\n");
    if (r->n_only_base > 0 || r->n_only_new > 0)
        fprintf(f, "not compared: %lld rows only in base, %lld only in new\n",
                (long long)r->n_only_base, (long long)r->n_only_new);
    if (r->n_na > 0)
        fprintf(f, "not comparable: %lld rows with a nan or inf value\n", (long long)r->n_na);
    if (r->worst_item >= 0) {
        const struct kv_compare_item *w = &r->items[r->worst_item];
        ratio_fmt(q, sizeof q, r->worst_ratio);
        row_label(lab, sizeof lab, r, r->base, r->col_base, w->base_row, ' ', 1);
        fprintf(f, "summary: %lld compared, %lld regressed, %lld improved, worst ratio %s (%s)\n",
                (long long)r->n_compared, (long long)r->n_regressed,
                (long long)r->n_improved, q, lab);
    } else {
        fprintf(f, "summary: 0 compared, 0 regressed, 0 improved, worst ratio n/a\n");
    }
    if (r->aggregate)
        fprintf(f, "verdict by group (median over T): %lld groups, %lld regressed, "
                   "%lld improved\n", (long long)r->n_groups,
                (long long)r->n_groups_regressed, (long long)r->n_groups_improved);
}

static void write_csv(FILE *f, const struct kv_compare_result *r)
{
    for (int j = 0; j < KV_SWEEP_N_KEY; j++)
        fprintf(f, "%s,", kv_sweep_required[j]);
    fprintf(f, "metric,unit,base,new,ratio,noise,verdict\n");
    for (int64_t t = 0; t < r->n_items; t++) {
        const struct kv_compare_item *it = &r->items[t];
        char s[72];
        /* strategy names are plain identifiers; quote anything else */
        const char *st = kv_csv_cell(r->base, it->base_row, r->col_base[COL_STRATEGY]);
        kv_csv_excerpt(s, sizeof s, st, 64);
        for (char *p = s; *p; p++) {
            if (*p == ',' || *p == '"')
                *p = '_';
        }
        fprintf(f, "%s,", s);
        for (int j = 1; j < KV_SWEEP_N_KEY; j++)
            fprintf(f, "%lld,", (long long)cell_int(r->base, it->base_row, r->col_base[j]));
        fprintf(f, "%s,%s,%.9g,%.9g,%.9g,%.9g,%s\n", r->metric, r->unit, it->base, it->cur,
                it->ratio, it->noise, kv_compare_verdict_str(r, it->verdict));
    }
    fprintf(f, "# compared=%lld\n# regressed=%lld\n# improved=%lld\n# not_comparable=%lld\n"
               "# only_base=%lld\n# only_new=%lld\n# worst_ratio=%.9g\n",
            (long long)r->n_compared, (long long)r->n_regressed, (long long)r->n_improved,
            (long long)r->n_na, (long long)r->n_only_base, (long long)r->n_only_new,
            r->worst_ratio);
    if (r->aggregate)
        fprintf(f, "# groups=%lld\n# groups_regressed=%lld\n# groups_improved=%lld\n",
                (long long)r->n_groups, (long long)r->n_groups_regressed,
                (long long)r->n_groups_improved);
}

/* A JSON string body: quotes, backslashes and control bytes escaped. */
static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20 || ch >= 0x7f)
            fprintf(f, "\\u%04x", ch < 0x80 ? ch : '?');
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

/* Every row of the NEW file with a finite value, in file order. */
static void write_json(FILE *f, const struct kv_compare_result *r)
{
    char lab[512], name[600];
    int first = 1;
    fprintf(f, "[");
    for (int64_t row = 0; row < r->cur->n_rows; row++) {
        double v = row_value(r, 1, row);
        if (!isfinite(v))
            continue;
        row_label(lab, sizeof lab, r, r->cur, r->col_cur, row, '/', 1);
        snprintf(name, sizeof name, "%s/%s", lab, r->metric);
        fprintf(f, "%s\n  {\"name\": ", first ? "" : ",");
        json_str(f, name);
        fprintf(f, ", \"unit\": ");
        json_str(f, r->unit);
        fprintf(f, ", \"value\": %.10g}", v);
        first = 0;
    }
    fprintf(f, "%s]\n", first ? "" : "\n");
}

enum kv_status kv_compare_write(FILE *f, const struct kv_compare_result *r,
                                enum kv_compare_format fmt)
{
    if (f == NULL || r == NULL || (unsigned)fmt >= KV_COMPARE_FORMAT_COUNT)
        return KV_ERR_INVALID;
    if (fmt == KV_COMPARE_TABLE)
        write_table(f, r);
    else if (fmt == KV_COMPARE_CSV)
        write_csv(f, r);
    else
        write_json(f, r);
    return ferror(f) ? KV_ERR_IO : KV_OK;
}
