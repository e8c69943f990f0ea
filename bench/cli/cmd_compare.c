/*
 * cmd_compare.c - `kvlab compare BASE.csv NEW.csv`: did a change make
 * things faster or slower than a baseline?
 *
 * The CLI half of compare.h: the options are a table (cli_cmd.h: both
 * files are judged before anything is read, '-' is standard input), then
 * read both files, run the comparison, print the table (or CSV / JSON) on
 * stdout. The exit status is the verdict, so CI can gate on it: 0 no
 * regression, 1 at least one regression or a run-time failure (the result
 * could not be written), 2 the comparison could not be made (bad option,
 * unreadable or malformed file, no rows in common, no finite values to
 * compare), 3 noisy: no regression from clean rows, but a row (a group with
 * --aggregate) that counts was measured under interference, so measure
 * again. A clean regression wins over noise (1, not 3): a slowdown seen in
 * clean rows is not explained away by another row's disturbance. The
 * reason for 2 is one line on stderr naming the file and line; 3 comes
 * with one line saying how many rows were noisy and why.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cli_cmd.h"
#include "cli_io.h"
#include "commands.h"
#include "../results/compare.h"
#include "../results/csv_read.h"

/* ------------------------------------------------------------------------ */
/* Options                                                                  */

#define THRESHOLD_MAX_PCT 1000.0

/* Exit status of a result that is noisy and has no clean regression (0, 1
 * and 2 are every command's, docs/cli.md). */
#define EXIT_NOISY 3

struct compare_opts {
    const char *base, *cur; /* BASE.csv, NEW.csv */
    const char *metric;
    double threshold_pct;
    int normalize, aggregate;
    int format; /* enum kv_compare_format, in the order of format_names */
};

/* "5", "5%", "2.5" -> percent in [0, THRESHOLD_MAX_PCT]. */
static int parse_threshold(const char *s, void *field, char *why, size_t n)
{
    char buf[64];
    size_t len = strlen(s);
    snprintf(why, n, "a percentage in [0, %g]", THRESHOLD_MAX_PCT);
    if (len == 0 || len >= sizeof buf)
        return -1;
    memcpy(buf, s, len + 1);
    if (buf[len - 1] == '%')
        buf[len - 1] = '\0';
    double v;
    if (kv_csv_parse_double(buf, &v) != 0 || !(v >= 0 && v <= THRESHOLD_MAX_PCT))
        return -1;
    *(double *)field = v;
    return 0;
}

/* A column name: what a sweep CSV's header holds (kv_cli_label_ok). */
static int parse_metric(const char *s, void *field, char *why, size_t n)
{
    snprintf(why, n, "a column name (letters, digits, . _ + - : * = @)");
    if (!kv_cli_label_ok(s))
        return -1;
    *(const char **)field = s;
    return 0;
}

static const char *const format_names[] = {
    [KV_COMPARE_TABLE] = "table", [KV_COMPARE_CSV] = "csv", [KV_COMPARE_JSON] = "json", NULL};

#define O(f) offsetof(struct compare_opts, f)
static const struct kv_opt compare_table[] = {
    {.name = "BASE.csv", .kind = KV_OPT_INPUT, .off = O(base), .pos = 1, .stdin_ok = 1,
     .help = "the baseline sweep CSV ('-': standard input)"},
    {.name = "NEW.csv", .kind = KV_OPT_INPUT, .off = O(cur), .pos = 2, .stdin_ok = 1,
     .help = "the sweep CSV to judge ('-': standard input)"},
    {.name = "--metric", .kind = KV_OPT_CUSTOM, .off = O(metric), .parse = parse_metric,
     .meta = "COL", .help = "column to compare (default step_ns_median; see above)"},
    {.name = "--threshold", .kind = KV_OPT_CUSTOM, .off = O(threshold_pct),
     .parse = parse_threshold, .meta = "P",
     .help = "noise floor in percent, 0..1000, '%' allowed (default 5)"},
    {.name = "--normalize", .kind = KV_OPT_FLAG, .off = O(normalize),
     .help = "divide each time by the run's roofline prediction (see above)"},
    {.name = "--aggregate", .kind = KV_OPT_FLAG, .off = O(aggregate),
     .help = "judge each configuration by the median change over seq_len"},
    {.name = "--format", .kind = KV_OPT_ENUM, .off = O(format), .names = format_names,
     .meta = "F", .help = "table, csv, or json: {name, unit, value} of NEW"},
};
#undef O

static void compare_defaults(void *opts, struct kv_cli_common *c)
{
    (void)c;
    struct compare_opts *o = opts;
    struct kv_compare_opts d;
    kv_compare_opts_defaults(&d);
    o->metric = d.metric;
    o->threshold_pct = d.threshold_pct;
    o->format = KV_COMPARE_TABLE;
}

static int compare_check(struct kv_cmd_ctx *x)
{
    const struct compare_opts *o = x->opts;
    if (o->base == NULL || o->cur == NULL) {
        fprintf(stderr, "kvlab: compare: expects two files, BASE.csv NEW.csv (see 'kvlab "
                        "compare --help')\n");
        return 2;
    }
    if (strcmp(o->base, "-") == 0 && strcmp(o->cur, "-") == 0) {
        fprintf(stderr, "kvlab: compare: only one of BASE and NEW can be '-' (standard "
                        "input)\n");
        return 2;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The command                                                              */

/* A note when the two files were measured on different machines: times
 * then only mean something with --normalize, and even so roughly. */
static void note_machines(const struct kv_csv *b, const struct kv_csv *c, int normalized)
{
    static const char *const keys[] = {"cpu", "host", "threads"};
    for (int k = 0; k < 3; k++) {
        const struct kv_csv_meta *mb = kv_csv_meta_find(b, keys[k]);
        const struct kv_csv_meta *mc = kv_csv_meta_find(c, keys[k]);
        if (mb != NULL && mc != NULL && strcmp(mb->value, mc->value) != 0) {
            fprintf(stderr, "kvlab: compare: note: the files differ in '%s' (another "
                            "machine?)%s\n", keys[k],
                    normalized ? "" : "; consider --normalize");
            return;
        }
    }
}

static void note_partial(const struct kv_csv *c)
{
    const struct kv_csv_meta *m = kv_csv_meta_find(c, "partial");
    if (m != NULL && strcmp(m->value, "0") != 0) {
        char name[256];
        kv_csv_excerpt(name, sizeof name, c->name, 200);
        fprintf(stderr, "kvlab: compare: note: %s is marked partial (an interrupted sweep)\n",
                name);
    }
}

/* Rows of a schema-1 file that only dtype or params could have matched:
 * surprising enough to say on stderr too (the table lists them). */
static void note_ambiguous(const struct kv_compare_result *r)
{
    if (r->n_ambiguous_base + r->n_ambiguous_new == 0)
        return;
    fprintf(stderr, "kvlab: compare: note: %lld rows of BASE and %lld of NEW are ambiguous "
                    "(a schema-1 file has no dtype or params to tell them apart); they are "
                    "not compared\n",
            (long long)r->n_ambiguous_base, (long long)r->n_ambiguous_new);
}

/* One line about the noisy rows: the verdict itself when nothing regressed
 * cleanly (exit 3), a note beside a clean regression (exit 1). */
static void say_noisy(const struct kv_compare_result *r, enum kv_compare_outcome out)
{
    const struct kv_compare_item *first = NULL;
    for (int64_t t = 0; t < r->n_items && first == NULL; t++)
        if (r->items[t].verdict == KV_VERDICT_NOISY)
            first = &r->items[t];
    if (first == NULL)
        return;
    const int side = (first->noisy & 2u) != 0; /* the new file's reason first */
    const char *why = kv_compare_noise_reason(r, side, side ? first->new_row : first->base_row);
    char ex[128];
    kv_csv_excerpt(ex, sizeof ex, why[0] != '\0' ? why : "no reason given", 100);
    if (out == KV_COMPARE_NOISY)
        fprintf(stderr, "kvlab: compare: noisy, re-run: %lld of %lld rows were measured under "
                        "interference (%s: %s) and not judged\n", (long long)r->n_noisy,
                (long long)r->n_compared, side ? "NEW" : "BASE", ex);
    else
        fprintf(stderr, "kvlab: compare: note: %lld noisy rows were not judged (%s: %s)\n",
                (long long)r->n_noisy, side ? "NEW" : "BASE", ex);
}

static int compare_run(struct kv_cmd_ctx *x)
{
    const struct compare_opts *co = x->opts;
    struct kv_compare_opts o;
    kv_compare_opts_defaults(&o);
    o.metric = co->metric;
    o.threshold_pct = co->threshold_pct;
    o.normalize = co->normalize;
    o.aggregate = co->aggregate;

    char err[KV_CSV_ERR_LEN] = "";
    struct kv_csv *base = NULL, *cur = NULL;
    struct kv_compare_result *res = NULL;
    int rc = 2;
    enum kv_status st = kv_csv_read_file(&base, co->base, err, sizeof err);
    if (st == KV_OK)
        st = kv_csv_read_file(&cur, co->cur, err, sizeof err);
    if (st == KV_OK)
        st = kv_compare_run(&res, base, cur, &o, err, sizeof err);
    if (st != KV_OK) {
        /* out of memory is a run-time failure, and compare.c's text for it
         * carries a "compare: " of its own: the status says it all */
        if (st == KV_ERR_NOMEM) {
            fprintf(stderr, "kvlab: compare: %s\n", kv_status_str(st));
            rc = 1;
        } else {
            fprintf(stderr, "kvlab: compare: %s\n", err);
        }
        goto out;
    }
    if (o.normalize && !res->normalized && !res->self_normalized)
        fprintf(stderr,
                "kvlab: compare: note: --normalize applies to time metrics only; "
                "%s is compared as is\n", res->metric);
    if (res->attn_bytes_fallback)
        fprintf(stderr,
                "kvlab: compare: note: no %s column in %s; attn_ns_median is "
                "normalised by cache_bytes (resident capacity) there\n",
                KV_SWEEP_COL_ATTN_BYTES,
                res->attn_bytes_fallback == 3 ? "either file"
                : res->attn_bytes_fallback == 1 ? "BASE" : "NEW");
    note_partial(base);
    note_partial(cur);
    note_machines(base, cur, res->normalized);
    note_ambiguous(res);
    errno = 0;
    if (kv_compare_write(stdout, res, (enum kv_compare_format)co->format) != KV_OK ||
        fflush(stdout) != 0) {
        /* the inputs were fine: a result that did not reach stdout is a
         * run-time failure (exit 1), not bad input */
        fprintf(stderr, "kvlab: compare: cannot write the result: %s\n",
                errno != 0 ? strerror(errno) : "a write failed");
        rc = 1;
        goto out;
    }
    if (res->n_compared == 0) {
        /* nothing to judge must not pass a CI gate silently */
        fprintf(stderr, "kvlab: compare: no joined row has a finite %s in both files\n",
                res->metric);
        goto out;
    }
    const enum kv_compare_outcome verdict = kv_compare_outcome(res);
    say_noisy(res, verdict);
    rc = verdict == KV_COMPARE_REGRESSED ? 1 : verdict == KV_COMPARE_NOISY ? EXIT_NOISY : 0;
out:
    kv_compare_destroy(res);
    kv_csv_destroy(cur);
    kv_csv_destroy(base);
    return rc;
}

const struct kv_cmd kv_cmd_compare_def = {
    .name = "compare",
    .summary = "compare two sweep CSVs and flag regressions",
    .usage = "BASE.csv NEW.csv [--metric COL] [--threshold P] [--normalize] [--aggregate] "
             "[--format F]",
    .about =
        "  Joins the rows of two sweep CSVs on strategy, layers .. threads,\n"
        "  seq_len and (schema 2 and later) dtype and params, and says per row\n"
        "  whether NEW is faster, slower or the same as BASE within noise. Against\n"
        "  a schema-1 file the join uses the other columns, and a row matches only\n"
        "  when one row on each side has them; rows of one file only, or ambiguous\n"
        "  (several that only dtype or params tell apart), are listed and not\n"
        "  compared. One of the files may be '-', standard input (a pipe); named\n"
        "  files must be regular files.\n"
        "  --metric: step_ns_median by default; also attn_ns_median, cache_bytes,\n"
        "  peak_rss_bytes, rel_err, or any numeric column; token_match: larger is\n"
        "  better; attn_vs_rest = attn_ns_median / (step_ns_median - attn_ns_median):\n"
        "  attention in units of the rest of the same steps, so machine speed and\n"
        "  load cancel. --threshold: for step_ns_median a change inside either row's\n"
        "  own p95 - median spread is noise too; when both rows carry a confidence\n"
        "  interval of the median (step_ns_ci_lo, step_ns_ci_hi) it decides instead:\n"
        "  slower only if new.ci_lo > base.ci_hi x (1 + P/100), faster only if\n"
        "  base.ci_lo > new.ci_hi x (1 + P/100). A row marked noisy=1 in either file\n"
        "  is never called slower or faster: 'noisy, re-run' with its noise_reason\n"
        "  (time metrics and attn_vs_rest). --normalize divides each time by\n"
        "  max(bytes_step/read_gbps, flops_step/sgemm_gflops) (attn_ns_median:\n"
        "  attn_bytes_step, the K/V bytes the kernel read, and attn_flops_step; files\n"
        "  without that column fall back to cache_bytes, with a note), with\n"
        "  read_gbps and sgemm_gflops from each file's metadata, so a uniformly\n"
        "  slower machine cancels. --aggregate judges each strategy/configuration by\n"
        "  the median change of its rows over seq_len (one outlier cannot fail it;\n"
        "  a change that moves most rows does; a group with a noisy row is noisy);\n"
        "  the exit status follows these group verdicts. --format json is an array\n"
        "  of {name, unit, value} for NEW (customSmallerIsBetter).\n"
        "  exit status: 0 no regression, 1 at least one regression (or the result\n"
        "  could not be written), 2 unusable input (reason on stderr), 3 noisy,\n"
        "  re-run: no regression from clean rows but a row (group) that counts is\n"
        "  noisy. A clean regression wins: 1 even beside noisy rows.\n",
    .opts = compare_table,
    .n_opts = sizeof compare_table / sizeof compare_table[0],
    .opts_size = sizeof(struct compare_opts),
    .defaults = compare_defaults,
    .check = compare_check,
    .run = compare_run,
    .example = "@CSV @CSV2 --threshold 5",
};
