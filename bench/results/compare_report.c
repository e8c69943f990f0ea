/*
 * compare_report.c - writing a comparison (compare.h): the per-group tables
 * with a summary for people, one CSV row per joined configuration, and the
 * JSON of the new file's values for a benchmark tracker.
 *
 * The design decision that matters: a row is named by what tells it apart.
 * Its label holds the strategy and bits, and only the configuration columns
 * (and schema-2 dtype and params) that differ between rows, so every row of
 * either file gets a distinct, short name. Rows that were not compared (in
 * one file only, or ambiguous against a schema-1 file) are listed under
 * the table, the first UNMATCHED_LISTED of them, and counted.
 */
#include "compare.h"

#include <math.h>
#include <string.h>

/* Unmatched rows named one by one under the table; the rest are counted. */
#define UNMATCHED_LISTED 10

/* Short local names for the columns this file reads by index. */
enum {
    COL_STRATEGY = KV_SCHEMA_COL_STRATEGY,
    COL_BITS = KV_SCHEMA_COL_BITS,
    COL_SEQ_LEN = KV_SCHEMA_COL_SEQ_LEN,
};

/* ------------------------------------------------------------------------ */
/* Names and numbers                                                        */

const char *kv_compare_verdict_str(const struct kv_compare_result *r, enum kv_verdict v)
{
    switch (v) {
    case KV_VERDICT_SAME:
        return "same";
    case KV_VERDICT_BETTER:
        return r->is_time ? "faster" : "better";
    case KV_VERDICT_WORSE:
        return r->is_time ? "slower" : "worse";
    case KV_VERDICT_NOISY:
        return "noisy";
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
    const int has_ext = r->has_ext[c != r->base];
    size_t w = 0;
    char strat[72];
    kv_csv_excerpt(strat, sizeof strat, kv_csv_cell(c, row, col[COL_STRATEGY]), 64);
    int k = snprintf(buf, n, "%s", strat);
    w = k > 0 ? (size_t)k : 0;
    for (int j = 1; j < KV_SWEEP_N_KEY && w < n; j++) {
        for (int e = 0; e < 2 && j == COL_SEQ_LEN && has_ext && w < n; e++) {
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
                     (long long)kv_sweep_cell_int(c, row, col[j]));
        w += k > 0 ? (size_t)k : 0;
    }
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
    if (g->verdict == KV_VERDICT_NOISY) {
        fprintf(f, "%8s %14s %14s %8s %7s  noisy, re-run (%lld of %lld rows noisy)\n",
                "median", "", "", "-", "-", (long long)g->n_noisy, (long long)g->count);
        return;
    }
    ratio_fmt(q, sizeof q, 1.0 + g->change);
    snprintf(noise, sizeof noise, "%.1f%%", 100.0 * g->noise);
    fprintf(f, "%8s %14s %14s %8s %7s  %s (median of %lld rows)\n", "median", "", "", q,
            noise, kv_compare_verdict_str(r, g->verdict), (long long)g->n_compared);
}

/* The verdict column: the word, and for a noisy row the reason each noisy
 * side gave ("noisy, re-run: new: cpu 0.41 of 1"). */
static void verdict_text(char *buf, size_t n, const struct kv_compare_result *r,
                         const struct kv_compare_item *it)
{
    if (it->verdict != KV_VERDICT_NOISY) {
        snprintf(buf, n, "%s", kv_compare_verdict_str(r, it->verdict));
        return;
    }
    size_t w = (size_t)snprintf(buf, n, "noisy, re-run");
    for (int s = 0; s < 2 && w < n; s++) {
        if (!(it->noisy & (1u << s)))
            continue;
        char why[128];
        const char *reason = kv_compare_noise_reason(r, s, s ? it->new_row : it->base_row);
        kv_csv_excerpt(why, sizeof why, reason[0] != '\0' ? reason : "no reason given", 100);
        int k = snprintf(buf + w, n - w, "%s %s: %s", w == 13 ? ":" : ";", s ? "new" : "base",
                         why);
        w += k > 0 ? (size_t)k : 0;
    }
}

/* Rows a and b of one file are one configuration (all but seq_len). */
static int same_config(const struct kv_compare_result *r, int cur, int64_t a, int64_t b)
{
    const struct kv_csv *c = cur ? r->cur : r->base;
    const int32_t *col = cur ? r->col_cur : r->col_base;
    const int32_t *ext = cur ? r->col_ext_cur : r->col_ext_base;
    if (strcmp(kv_csv_cell(c, a, col[COL_STRATEGY]), kv_csv_cell(c, b, col[COL_STRATEGY])) != 0)
        return 0;
    for (int j = 1; j < COL_SEQ_LEN; j++)
        if (kv_sweep_cell_int(c, a, col[j]) != kv_sweep_cell_int(c, b, col[j]))
            return 0;
    for (int e = 0; e < 2 && r->has_ext[cur]; e++)
        if (strcmp(kv_csv_cell(c, a, ext[e]), kv_csv_cell(c, b, ext[e])) != 0)
            return 0;
    return 1;
}

/* "not compared: N rows of base and M rows of new had no match:", then one
 * line per configuration (its T values together) and reason, the first
 * UNMATCHED_LISTED lines, and how many rows more. */
static void write_unmatched(FILE *f, const struct kv_compare_result *r)
{
    if (r->n_unmatched == 0)
        return;
    fprintf(f, "not compared: %lld rows of base and %lld rows of new had no match",
            (long long)r->n_only_base, (long long)r->n_only_new);
    if (r->n_ambiguous_base + r->n_ambiguous_new > 0)
        fprintf(f, " (%lld and %lld ambiguous)", (long long)r->n_ambiguous_base,
                (long long)r->n_ambiguous_new);
    fprintf(f, ":\n");
    char lab[512];
    int lines = 0;
    int64_t u = 0;
    for (; u < r->n_unmatched && lines < UNMATCHED_LISTED; lines++) {
        const struct kv_compare_unmatched *m = &r->unmatched[u];
        const struct kv_csv *c = m->cur ? r->cur : r->base;
        const int32_t *col = m->cur ? r->col_cur : r->col_base;
        row_label(lab, sizeof lab, r, c, col, m->row, ' ', 0);
        const char *here = m->cur ? "new" : "base", *there = m->cur ? "base" : "new";
        fprintf(f, "  %-4s %s T=", here, lab);
        int64_t v = u;
        for (; v < r->n_unmatched; v++) {
            const struct kv_compare_unmatched *x = &r->unmatched[v];
            if (x->cur != m->cur || x->candidates != m->candidates ||
                !same_config(r, m->cur, m->row, x->row))
                break;
            fprintf(f, "%s%lld", v == u ? "" : ",",
                    (long long)kv_sweep_cell_int(c, x->row, col[COL_SEQ_LEN]));
        }
        u = v;
        /* a class of one row on one side and several on the other: the one
         * row sees several candidates, each of the several sees one */
        if (m->candidates == 0)
            fprintf(f, ": only in %s\n", here);
        else if (m->candidates > 1)
            fprintf(f, ": ambiguous, matches %lld rows of %s on the schema-1 columns "
                       "(only dtype or params tell them apart)\n",
                    (long long)m->candidates, there);
        else
            fprintf(f, ": ambiguous, the row of %s it matches on the schema-1 columns "
                       "matches other rows here too (only dtype or params tell them apart)\n",
                    there);
    }
    if (u < r->n_unmatched)
        fprintf(f, "  ... and %lld more rows\n", (long long)(r->n_unmatched - u));
}

static void write_table(FILE *f, const struct kv_compare_result *r)
{
    char b[40], n[40], q[40], lab[512];
    fprintf(f, "metric %s%s%s%s, threshold %.3g%%%s\n", r->metric,
            r->unit[0] ? " (" : "", r->unit, r->unit[0] ? ")" : "", r->threshold_pct,
            r->uses_ci ? " beyond the rows' 95% confidence intervals (rows without them: or "
                         "their p95-median spread)"
            : r->uses_spread ? " or the rows' own p95-median spread" : "");
    kv_csv_excerpt(lab, sizeof lab, r->base->name, 400);
    fprintf(f, "base %s\n", lab);
    kv_csv_excerpt(lab, sizeof lab, r->cur->name, 400);
    fprintf(f, "new  %s\n", lab);
    for (int64_t t = 0; t < r->n_items; t++) {
        const struct kv_compare_item *it = &r->items[t];
        if (t == 0 || !kv_compare_same_group(r, t - 1, t)) {
            /* titled from the file with dtype and params, if only one has them */
            const int rich = r->has_ext[1] && !r->has_ext[0];
            row_label(lab, sizeof lab, r, rich ? r->cur : r->base, rich ? r->col_cur : r->col_base,
                      rich ? it->new_row : it->base_row, ' ', 0);
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
        char verdict[320];
        verdict_text(verdict, sizeof verdict, r, it);
        fprintf(f, "%8lld %14s %14s %8s %7s  %s\n",
                (long long)kv_sweep_cell_int(r->base, it->base_row, r->col_base[COL_SEQ_LEN]),
                b, n, q, noise, verdict);
        if (r->aggregate && (t + 1 == r->n_items || !kv_compare_same_group(r, t, t + 1))) {
            for (int64_t k = 0; k < r->n_groups; k++) {
                if (r->groups[k].first + r->groups[k].count == t + 1)
                    write_group_line(f, r, &r->groups[k]);
            }
        }
    }
    fprintf(f, "\n");
    write_unmatched(f, r);
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
        fprintf(f, "summary: %lld compared, 0 regressed, 0 improved, worst ratio n/a\n",
                (long long)r->n_compared);
    }
    if (r->n_noisy > 0)
        fprintf(f, "noisy, re-run: %lld rows measured under interference were not judged\n",
                (long long)r->n_noisy);
    if (r->aggregate) {
        fprintf(f, "verdict by group (median over T): %lld groups, %lld regressed, "
                   "%lld improved", (long long)r->n_groups,
                (long long)r->n_groups_regressed, (long long)r->n_groups_improved);
        if (r->n_groups_noisy > 0)
            fprintf(f, ", %lld noisy (re-run)", (long long)r->n_groups_noisy);
        fprintf(f, "\n");
    }
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
            fprintf(f, "%lld,",
                    (long long)kv_sweep_cell_int(r->base, it->base_row, r->col_base[j]));
        fprintf(f, "%s,%s,%.9g,%.9g,%.9g,%.9g,%s\n", r->metric, r->unit, it->base, it->cur,
                it->ratio, it->noise, kv_compare_verdict_str(r, it->verdict));
    }
    fprintf(f, "# compared=%lld\n# regressed=%lld\n# improved=%lld\n# noisy=%lld\n"
               "# not_comparable=%lld\n# only_base=%lld\n# only_new=%lld\n"
               "# ambiguous_base=%lld\n# ambiguous_new=%lld\n# worst_ratio=%.9g\n",
            (long long)r->n_compared, (long long)r->n_regressed, (long long)r->n_improved,
            (long long)r->n_noisy, (long long)r->n_na, (long long)r->n_only_base,
            (long long)r->n_only_new, (long long)r->n_ambiguous_base,
            (long long)r->n_ambiguous_new, r->worst_ratio);
    if (r->aggregate)
        fprintf(f, "# groups=%lld\n# groups_regressed=%lld\n# groups_improved=%lld\n"
                   "# groups_noisy=%lld\n", (long long)r->n_groups,
                (long long)r->n_groups_regressed, (long long)r->n_groups_improved,
                (long long)r->n_groups_noisy);
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
        double v = kv_compare_row_value(r, 1, row);
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
