/*
 * cmd_merge.c - `kvlab merge OUT.csv SHARD.csv...`: join the shard files of
 * a sweep (or sweeps of other configurations) into one CSV that compare,
 * the plots and the report read like a single sweep.
 *
 * The CLI half of merge.h: parse options, refuse an output that cannot be
 * written or that names an input (before reading anything), read every
 * input, merge, write OUT atomically (temporary file + rename), and print a
 * summary on stderr: each input's rows and, for shards, the predicted and
 * measured sweep time (the shard balance). Exit 0 merged, 2 bad input (one
 * line naming the file), 1 a run-time failure (memory, the write).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_opts.h"
#include "cli_io.h"
#include "cli_cmd.h"
#include "commands.h"
int kv_cmd_merge(int argc, char **argv);
#include "merge.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: kvlab merge OUT.csv IN.csv... [--allow-mixed] [--allow-partial]\n"
            "                   [--prefer newest] [--quiet]\n"
            "\n"
            "Joins sweep CSVs, typically the shards of one sweep (kvlab sweep --shard I/N),\n"
            "into OUT.csv with the same columns plus, per row, where it ran: source,\n"
            "shard, host, cpu, commit, date, read_gbps, copy_gbps, sgemm_gflops. Shared\n"
            "metadata is kept; metadata that differs is kept per input (# source.K.key=).\n"
            "\n"
            "  --allow-mixed    merge files of different commits, schema versions or columns\n"
            "  --allow-partial  accept files marked partial=1 and missing shards (the\n"
            "                   output is then marked partial=1)\n"
            "  --prefer newest  two rows with the same configuration: keep the one from\n"
            "                   the file with the newest # date= (default: refuse)\n"
            "  --quiet          no summary on stderr\n"
            "\n"
            "exit status: 0 merged, 1 run-time failure, 2 bad input (reason on stderr)\n");
}

/* Refuses OUT up front through the output check every command shares
 * (cli_io.h): not a regular file, read-only, one of the inputs (by resolved
 * path), a directory that cannot take it. The exit status, 0 or 2. */
static int check_out(const char *out, char **inputs, int n)
{
    if (out[0] == '\0') {
        fprintf(stderr, "kvlab merge: OUT.csv must be a file name\n");
        return 2;
    }
    struct kv_cli_file ins[64];
    int n_in = n < 64 ? n : 64;
    for (int k = 0; k < n_in; k++)
        ins[k] = (struct kv_cli_file){"input", inputs[k]};
    const struct kv_cli_file outs[] = {{"OUT.csv", out}};
    int rc = kv_cli_check_outputs("merge", outs, 1, ins, n_in, KV_FILE_PARENT_EXISTS, 2);
    for (int k = n_in; rc == 0 && k < n; k++) { /* beyond 64 inputs: one at a time */
        const struct kv_cli_file one[] = {{"input", inputs[k]}};
        rc = kv_cli_check_outputs("merge", outs, 1, one, 1, KV_FILE_PARENT_EXISTS, 2);
    }
    return rc;
}

/* Each input's rows and, for shards, predicted vs measured sweep time. */
static void summarise(const struct kv_merge_result *r, struct kv_csv *const *in, int n,
                      const char *out)
{
    double max_p = 0, sum_p = 0, max_m = 0, sum_m = 0;
    int n_timed = 0;
    for (int k = 0; k < n; k++) {
        const struct kv_merge_source *s = &r->src[k];
        char name[256], shard[32] = "-";
        kv_csv_excerpt(name, sizeof name, in[k]->name, 200);
        if (s->n_shards > 0)
            snprintf(shard, sizeof shard, "%d/%d", s->shard, s->n_shards);
        fprintf(stderr, "kvlab merge: %-7s %s: %lld rows (%lld kept)", shard, name,
                (long long)s->rows_in, (long long)s->rows_kept);
        if (isfinite(s->pred_s) && isfinite(s->sweep_s) && s->pred_s > 0) {
            fprintf(stderr, ", predicted %.3g s, measured %.3g s (%.2fx)", s->pred_s,
                    s->sweep_s, s->sweep_s / s->pred_s);
            max_p = fmax(max_p, s->pred_s);
            max_m = fmax(max_m, s->sweep_s);
            sum_p += s->pred_s;
            sum_m += s->sweep_s;
            n_timed++;
        }
        fprintf(stderr, "%s\n", s->partial ? ", PARTIAL" : "");
    }
    if (n_timed > 1 && sum_p > 0 && sum_m > 0)
        fprintf(stderr, "kvlab merge: shard balance: largest / mean shard %.2f predicted, "
                        "%.2f measured\n", max_p * n_timed / sum_p, max_m * n_timed / sum_m);
    if (r->n_resolved > 0)
        fprintf(stderr, "kvlab merge: %lld repeated rows resolved by --prefer newest\n",
                (long long)r->n_resolved);
    if (r->missing[0])
        fprintf(stderr, "kvlab merge: note: merged without %s (--allow-partial)\n",
                r->missing);
    char ex[256];
    kv_csv_excerpt(ex, sizeof ex, out, 200);
    fprintf(stderr, "kvlab merge: %lld rows from %d files -> %s%s\n", (long long)r->n_rows, n,
            ex, r->partial ? " (partial=1)" : "");
}

int kv_cmd_merge(int argc, char **argv)
{
    struct kv_merge_opts o = {0};
    int quiet = 0, np = 0, only_files = 0;
    char **paths = argv; /* reused in place: at most argc - 1 entries */
    char ex[80];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!only_files && (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)) {
            usage(stdout);
            return 0; /* main checks that stdout took it (kv_cli_finish) */
        } else if (!only_files && strcmp(a, "--") == 0) {
            only_files = 1;
        } else if (!only_files && strcmp(a, "--allow-mixed") == 0) {
            o.allow_mixed = 1;
        } else if (!only_files && strcmp(a, "--allow-partial") == 0) {
            o.allow_partial = 1;
        } else if (!only_files && strcmp(a, "--quiet") == 0) {
            quiet = 1;
        } else if (!only_files && (strcmp(a, "--prefer") == 0 ||
                                   strncmp(a, "--prefer=", 9) == 0)) {
            const char *v = a[8] == '=' ? a + 9 : (i + 1 < argc ? argv[++i] : NULL);
            if (v == NULL || strcmp(v, "newest") != 0) {
                kv_csv_excerpt(ex, sizeof ex, v ? v : "", 40);
                fprintf(stderr, "kvlab merge: --prefer expects 'newest', got '%s'\n", ex);
                return 2;
            }
            o.prefer_newest = 1;
        } else if (!only_files && a[0] == '-' && a[1] != '\0') {
            kv_csv_excerpt(ex, sizeof ex, a, 40);
            fprintf(stderr, "kvlab merge: unknown option '%s' (try --help)\n", ex);
            return 2;
        } else {
            paths[np++] = argv[i];
        }
    }
    if (np < 2) {
        fprintf(stderr, "kvlab merge: expects OUT.csv and at least one input file "
                        "(try --help)\n");
        return 2;
    }
    const char *outp = paths[0];
    char **inp = paths + 1;
    const int n = np - 1;
    int orc = check_out(outp, inp, n);
    if (orc != 0)
        return orc;

    char err[KV_CSV_ERR_LEN] = "";
    struct kv_csv **in = kv_alloc((size_t)n * sizeof(struct kv_csv *));
    if (in == NULL) {
        fprintf(stderr, "kvlab merge: %s\n", kv_status_str(KV_ERR_NOMEM));
        return 1;
    }
    struct kv_merge_result *res = NULL;
    int rc = 2;
    enum kv_status st = KV_OK;
    for (int k = 0; k < n && st == KV_OK; k++)
        st = kv_csv_read_file(&in[k], inp[k], err, sizeof err);
    if (st == KV_OK)
        st = kv_merge_run(&res, (const struct kv_csv *const *)in, n, &o, err, sizeof err);
    if (st != KV_OK) {
        fprintf(stderr, "kvlab merge: %s\n", err);
        rc = st == KV_ERR_NOMEM ? 1 : 2;
        goto done;
    }
    st = kv_csv_writer_write(res->out, outp);
    if (st != KV_OK) {
        kv_csv_excerpt(ex, sizeof ex, outp, 60);
        fprintf(stderr, "kvlab merge: cannot write %s: %s\n", ex, strerror(errno));
        rc = 1;
        goto done;
    }
    if (!quiet)
        summarise(res, in, n, outp);
    rc = 0;
done:
    kv_merge_destroy(res);
    for (int k = 0; k < n; k++)
        kv_csv_destroy(in[k]);
    kv_free(in);
    return rc;
}

/* transitional: on the command table, parsing its own argv */
const struct kv_cmd kv_cmd_merge_def = {.name = "merge", .summary = "join the shard CSVs of a sweep (sweep --shard I/N) into one", .legacy = kv_cmd_merge};
