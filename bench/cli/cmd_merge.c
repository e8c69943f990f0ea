/*
 * cmd_merge.c - `kvlab merge OUT.csv SHARD.csv...`: join the shard files of
 * a sweep (or sweeps of other configurations) into one CSV that compare,
 * the plots and the report read like a single sweep.
 *
 * The CLI half of merge.h: the options are a table (cli_cmd.h), so OUT and
 * every input are judged before anything is read: OUT a writable target
 * that is none of the inputs, each input a regular file opened without
 * blocking ('-' is standard input). Then read every input, merge, write OUT
 * atomically (temporary file + rename), and print a summary on stderr: each
 * input's rows and, for shards, the predicted and measured sweep time (the
 * shard balance). Exit 0 merged, 2 bad input (one line naming the file), 1
 * a run-time failure (memory, the write).
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cli_cmd.h"
#include "cli_io.h"
#include "commands.h"
#include "../results/merge.h"

struct merge_opts {
    const char *out; /* OUT.csv */
    int allow_mixed, allow_partial, prefer_newest, quiet;
};

/* --prefer: only 'newest' (without it, a repeated row is refused). */
static int parse_prefer(const char *s, void *field, char *why, size_t n)
{
    snprintf(why, n, "'newest'");
    if (strcmp(s, "newest") != 0)
        return -1;
    *(int *)field = 1;
    return 0;
}

#define O(f) offsetof(struct merge_opts, f)
static const struct kv_opt merge_table[] = {
    {.name = "OUT.csv", .kind = KV_OPT_OUTPUT, .off = O(out), .pos = 1,
     .help = "the merged CSV, written atomically; its directory must exist"},
    {.name = "SHARD.csv", .kind = KV_OPT_INPUT, .pos = KV_OPT_REST, .stdin_ok = 1,
     .help = "the sweep CSVs to join ('-': standard input)"},
    {.name = "--allow-mixed", .kind = KV_OPT_FLAG, .off = O(allow_mixed),
     .help = "merge files of different commits, schema versions or columns"},
    {.name = "--allow-partial", .kind = KV_OPT_FLAG, .off = O(allow_partial),
     .help = "accept files marked partial=1 and missing shards (output partial=1)"},
    {.name = "--prefer", .kind = KV_OPT_CUSTOM, .off = O(prefer_newest), .parse = parse_prefer,
     .meta = "newest", .help = "a configuration in two files: keep the row of the newest "
                               "# date= (default: refuse)"},
    {.name = "--quiet", .kind = KV_OPT_FLAG, .off = O(quiet), .help = "no summary on stderr"},
};
#undef O

static int merge_check(struct kv_cmd_ctx *x)
{
    const struct merge_opts *o = x->opts;
    if (o->out == NULL || x->rest.n == 0) {
        fprintf(stderr, "kvlab: merge: expects OUT.csv and at least one input file (see "
                        "'kvlab merge --help')\n");
        return 2;
    }
    int n_stdin = 0;
    for (int32_t k = 0; k < x->rest.n; k++)
        n_stdin += strcmp(x->rest.v[k], "-") == 0;
    if (n_stdin > 1) {
        fprintf(stderr, "kvlab: merge: standard input ('-') can be only one of the inputs\n");
        return 2;
    }
    return 0;
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
        fprintf(stderr, "kvlab: merge: %-7s %s: %lld rows (%lld kept)", shard, name,
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
        fprintf(stderr, "kvlab: merge: shard balance: largest / mean shard %.2f predicted, "
                        "%.2f measured\n", max_p * n_timed / sum_p, max_m * n_timed / sum_m);
    if (r->n_resolved > 0)
        fprintf(stderr, "kvlab: merge: %lld repeated rows resolved by --prefer newest\n",
                (long long)r->n_resolved);
    if (r->missing[0])
        fprintf(stderr, "kvlab: merge: note: merged without %s (--allow-partial)\n",
                r->missing);
    fprintf(stderr, "kvlab: merge: %lld rows from %d files -> '%s'%s\n", (long long)r->n_rows,
            n, kv_text_q(out), r->partial ? " (partial=1)" : "");
}

/* merge.c's messages are "FILE:LINE: reason", except two that name the
 * command themselves ("kvlab merge: missing shard ..."): printed after our
 * own "kvlab: merge: " without that second prefix. */
static const char *reason(const char *err)
{
    static const char own[] = "kvlab merge: ";
    return strncmp(err, own, sizeof own - 1) == 0 ? err + sizeof own - 1 : err;
}

static int merge_run(struct kv_cmd_ctx *x)
{
    const struct merge_opts *mo = x->opts;
    const char *outp = mo->out;
    char **inp = x->rest.v;
    const int n = x->rest.n;
    /* the layer compares OUT with the first inputs it judges (cli_cmd.c
     * holds 64 files); the rest, one at a time, before anything is read */
    for (int k = 0; k < n; k++)
        if (strcmp(inp[k], "-") != 0 && kv_cli_same_file(outp, inp[k])) {
            fprintf(stderr, "kvlab: merge: OUT.csv '%s' is also an input: the same file as "
                            "SHARD.csv '%s'; refusing to overwrite it\n", kv_text_q(outp),
                    kv_text_q(inp[k]));
            return 2;
        }
    struct kv_merge_opts o = {.allow_mixed = mo->allow_mixed,
                              .allow_partial = mo->allow_partial,
                              .prefer_newest = mo->prefer_newest};
    char err[KV_CSV_ERR_LEN] = "";
    struct kv_csv **in = kv_alloc((size_t)n * sizeof(struct kv_csv *));
    if (in == NULL) {
        fprintf(stderr, "kvlab: merge: %s\n", kv_status_str(KV_ERR_NOMEM));
        return 1;
    }
    for (int k = 0; k < n; k++)
        in[k] = NULL;
    struct kv_merge_result *res = NULL;
    int rc = 2;
    enum kv_status st = KV_OK;
    for (int k = 0; k < n && st == KV_OK; k++)
        st = kv_csv_read_file(&in[k], inp[k], err, sizeof err);
    if (st == KV_OK)
        st = kv_merge_run(&res, (const struct kv_csv *const *)in, n, &o, err, sizeof err);
    if (st != KV_OK) {
        if (st == KV_ERR_NOMEM)
            fprintf(stderr, "kvlab: merge: %s\n", kv_status_str(st));
        else
            fprintf(stderr, "kvlab: merge: %s\n", reason(err));
        rc = st == KV_ERR_NOMEM ? 1 : 2;
        goto done;
    }
    errno = 0;
    st = kv_csv_writer_write(res->out, outp);
    if (st != KV_OK) {
        fprintf(stderr, "kvlab: merge: cannot write '%s': %s\n", kv_text_q(outp),
                st == KV_ERR_IO && errno != 0 ? strerror(errno) : kv_status_str(st));
        rc = 1;
        goto done;
    }
    if (!mo->quiet)
        summarise(res, in, n, outp);
    rc = 0;
done:
    kv_merge_destroy(res);
    for (int k = 0; k < n; k++)
        kv_csv_destroy(in[k]);
    kv_free(in);
    return rc;
}

const struct kv_cmd kv_cmd_merge_def = {
    .name = "merge",
    .summary = "join the shard CSVs of a sweep (sweep --shard I/N) into one",
    .usage = "OUT.csv SHARD.csv... [--allow-mixed] [--allow-partial] [--prefer newest] "
             "[--quiet]",
    .about =
        "  Joins sweep CSVs, typically the shards of one sweep (kvlab sweep --shard I/N),\n"
        "  into OUT.csv with the same columns plus, per row, where it ran: source,\n"
        "  shard, host, cpu, commit, date, read_gbps, copy_gbps, sgemm_gflops. Shared\n"
        "  metadata is kept; metadata that differs is kept per input (# source.K.key=).\n"
        "  OUT.csv is refused up front if it is a directory, FIFO or device, read-only,\n"
        "  in a missing directory, or one of the inputs; every input must be a regular\n"
        "  file ('-': standard input, once).\n"
        "  exit status: 0 merged, 1 run-time failure, 2 bad input (reason on stderr)\n",
    .opts = merge_table,
    .n_opts = sizeof merge_table / sizeof merge_table[0],
    .opts_size = sizeof(struct merge_opts),
    .check = merge_check,
    .run = merge_run,
    .example = "@OUT @CSV --quiet",
};
