/*
 * cmd_compare.c - `kvlab compare BASE.csv NEW.csv`: did a change make
 * things faster or slower than a baseline?
 *
 * The CLI half of compare.h: parse options, read both files, run the
 * comparison, print the table (or CSV / JSON) on stdout. The exit status is
 * the verdict, so CI can gate on it: 0 no regression, 1 at least one
 * regression, 2 the comparison could not be made (bad option, unreadable or
 * malformed file, no rows in common, no finite values to compare, out of
 * memory, output not written);
 * the reason is one line on stderr naming the file and line.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli_cmd.h"
#include "commands.h"
int kv_cmd_compare(int argc, char **argv);
#include "compare.h"
#include "csv_read.h"

/* ------------------------------------------------------------------------ */
/* Options                                                                  */

#define THRESHOLD_MAX_PCT 1000.0

static void usage(FILE *f)
{
    fprintf(f,
            "usage: kvlab compare BASE.csv NEW.csv [--metric COL] [--threshold P]\n"
            "                     [--normalize] [--aggregate] [--format table|csv|json]\n"
            "\n"
            "Joins the rows of two sweep CSVs on strategy, layers .. threads and\n"
            "seq_len, and says per row whether NEW is faster, slower or the same as\n"
            "BASE within noise. One of them may be '-', standard input (a pipe);\n"
            "named files must be regular files.\n"
            "\n"
            "  --metric COL     column to compare (default step_ns_median; also\n"
            "                   attn_ns_median, cache_bytes, peak_rss_bytes, rel_err,\n"
            "                   or any numeric column; token_match: larger is better;\n"
            "                   attn_vs_rest = attn_ns_median / (step_ns_median -\n"
            "                   attn_ns_median): attention in units of the rest of the\n"
            "                   same steps, so machine speed and load cancel)\n"
            "  --threshold P    noise floor in percent, 0..1000 (default 5); for\n"
            "                   step_ns_median a change inside either row's own\n"
            "                   p95 - median spread is noise too\n"
            "  --normalize      divide each time by the run's roofline prediction,\n"
            "                   max(bytes_step/read_gbps, flops_step/sgemm_gflops)\n"
            "                   (attn_ns_median: attn_bytes_step, the K/V bytes the\n"
            "                   kernel read, and attn_flops_step; files without that\n"
            "                   column fall back to cache_bytes, with a note),\n"
            "                   with read_gbps and sgemm_gflops from each file's\n"
            "                   metadata, so a uniformly slower machine cancels\n"
            "  --aggregate      judge each strategy/configuration by the median change\n"
            "                   of its rows over seq_len (one noisy row cannot fail it;\n"
            "                   a change that moves most rows does); the exit status\n"
            "                   follows these group verdicts\n"
            "  --format F       table (default), csv, or json: an array of\n"
            "                   {name, unit, value} for NEW (customSmallerIsBetter)\n"
            "\n"
            "exit status: 0 no regression, 1 at least one regression,\n"
            "             2 unusable input (reason on stderr)\n");
}

/* "--opt VALUE" or "--opt=VALUE"; returns the value or NULL (not this opt). */
static const char *opt_value(int argc, char **argv, int *i, const char *opt, int *missing)
{
    size_t n = strlen(opt);
    if (argv[*i] == NULL || strncmp(argv[*i], opt, n) != 0)
        return NULL;
    if (argv[*i][n] == '=')
        return argv[*i] + n + 1;
    if (argv[*i][n] != '\0')
        return NULL;
    if (*i + 1 >= argc) {
        *missing = 1;
        return NULL;
    }
    return argv[++*i];
}

/* "5", "5%", "2.5" -> percent in [0, THRESHOLD_MAX_PCT]; -1 on error. */
static int parse_threshold(const char *s, double *out)
{
    char buf[64];
    size_t n = strlen(s);
    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, s, n + 1);
    if (buf[n - 1] == '%')
        buf[n - 1] = '\0';
    double v;
    if (kv_csv_parse_double(buf, &v) != 0 || !(v >= 0 && v <= THRESHOLD_MAX_PCT))
        return -1;
    *out = v;
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
            fprintf(stderr, "kvlab compare: note: the files differ in '%s' (another "
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
        fprintf(stderr, "kvlab compare: note: %s is marked partial (an interrupted sweep)\n",
                name);
    }
}

int kv_cmd_compare(int argc, char **argv)
{
    struct kv_compare_opts o;
    kv_compare_opts_defaults(&o);
    int fmt = KV_COMPARE_TABLE;
    const char *paths[2] = {NULL, NULL};
    int np = 0;
    char ex[80];

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int missing = 0;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(a, "--normalize") == 0) {
            o.normalize = 1;
        } else if (strcmp(a, "--aggregate") == 0) {
            o.aggregate = 1;
        } else if ((v = opt_value(argc, argv, &i, "--metric", &missing)) != NULL) {
            if (v[0] == '\0') {
                fprintf(stderr, "kvlab compare: --metric expects a column name\n");
                return 2;
            }
            o.metric = v;
        } else if ((v = opt_value(argc, argv, &i, "--threshold", &missing)) != NULL) {
            if (parse_threshold(v, &o.threshold_pct) != 0) {
                kv_csv_excerpt(ex, sizeof ex, v, 40);
                fprintf(stderr,
                        "kvlab compare: --threshold expects a percentage in [0, %g], got '%s'\n",
                        THRESHOLD_MAX_PCT, ex);
                return 2;
            }
        } else if ((v = opt_value(argc, argv, &i, "--format", &missing)) != NULL) {
            fmt = kv_compare_format_parse(v);
            if (fmt < 0) {
                kv_csv_excerpt(ex, sizeof ex, v, 40);
                fprintf(stderr,
                        "kvlab compare: --format expects table, csv or json, got '%s'\n", ex);
                return 2;
            }
        } else if (missing) {
            fprintf(stderr, "kvlab compare: %s expects a value\n", a);
            return 2;
        } else if (a[0] == '-' && a[1] != '\0') {
            kv_csv_excerpt(ex, sizeof ex, a, 40);
            fprintf(stderr, "kvlab compare: unknown option '%s' (try --help)\n", ex);
            return 2;
        } else if (np == 2) {
            kv_csv_excerpt(ex, sizeof ex, a, 60);
            fprintf(stderr, "kvlab compare: unexpected argument '%s': expects BASE.csv NEW.csv\n",
                    ex);
            return 2;
        } else {
            paths[np++] = a;
        }
    }
    if (np < 2) {
        fprintf(stderr, "kvlab compare: expects two files, BASE.csv NEW.csv (try --help)\n");
        return 2;
    }
    if (strcmp(paths[0], "-") == 0 && strcmp(paths[1], "-") == 0) {
        fprintf(stderr, "kvlab compare: only one of BASE and NEW can be '-' (standard "
                        "input)\n");
        return 2;
    }

    char err[KV_CSV_ERR_LEN] = "";
    struct kv_csv *base = NULL, *cur = NULL;
    struct kv_compare_result *res = NULL;
    int rc = 2;
    if (kv_csv_read_file(&base, paths[0], err, sizeof err) != KV_OK ||
        kv_csv_read_file(&cur, paths[1], err, sizeof err) != KV_OK ||
        kv_compare_run(&res, base, cur, &o, err, sizeof err) != KV_OK) {
        fprintf(stderr, "kvlab compare: %s\n", err);
        goto out;
    }
    if (o.normalize && !res->normalized && !res->self_normalized)
        fprintf(stderr,
                "kvlab compare: note: --normalize applies to time metrics only; "
                "%s is compared as is\n", res->metric);
    if (res->attn_bytes_fallback)
        fprintf(stderr,
                "kvlab compare: note: no %s column in %s; attn_ns_median is "
                "normalised by cache_bytes (resident capacity) there\n",
                KV_SWEEP_COL_ATTN_BYTES,
                res->attn_bytes_fallback == 3 ? "either file"
                : res->attn_bytes_fallback == 1 ? "BASE" : "NEW");
    note_partial(base);
    note_partial(cur);
    note_machines(base, cur, res->normalized);
    if (kv_compare_write(stdout, res, (enum kv_compare_format)fmt) != KV_OK ||
        fflush(stdout) != 0) {
        fprintf(stderr, "kvlab compare: cannot write the result: %s\n", strerror(errno));
        goto out;
    }
    if (res->n_compared == 0) {
        /* nothing to judge must not pass a CI gate silently */
        fprintf(stderr, "kvlab compare: no joined row has a finite %s in both files\n",
                res->metric);
        goto out;
    }
    rc = kv_compare_regressed(res) ? 1 : 0;
out:
    kv_compare_destroy(res);
    kv_csv_destroy(cur);
    kv_csv_destroy(base);
    return rc;
}

/* transitional: on the command table, parsing its own argv */
const struct kv_cmd kv_cmd_compare_def = {.name = "compare", .summary = "compare two sweep CSVs and flag regressions", .legacy = kv_cmd_compare};
