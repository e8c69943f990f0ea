/*
 * fuzz_csv.c - libFuzzer target for the sweep CSV reader and the compare
 * logic behind it (`make fuzz`; clang -fsanitize=fuzzer,address,undefined).
 *
 * The input is one file, or two files separated by a line "%%" (BASE then
 * NEW; without the separator the file is compared with itself). Each part
 * goes through kv_csv_parse; when both parse, kv_compare_run runs with a
 * few option sets and every writer renders the result to /dev/null. Beyond
 * the sanitizers, the target checks the contracts: an error comes with a
 * non-empty one-line message, a success with consistent counts, and every
 * kv_alloc is freed. The same two parts also go through kvlab merge under
 * each combination of its permissions.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../bench/results/compare.h"
#include "../../bench/results/csv_read.h"
#include "../../bench/results/merge.h"

static const char SEP[] = "\n%%\n";

static void check_msg(const char *err)
{
    if (err[0] == '\0' || strchr(err, '\n') != NULL)
        abort();
}

static void check_csv(const struct kv_csv *c)
{
    if (c->n_cols < 1 || c->n_rows < 0 || c->header_line < 1)
        abort();
    for (int64_t r = 0; r < c->n_rows; r++) {
        if (c->row_line[r] <= c->header_line)
            abort();
        for (int32_t j = 0; j < c->n_cols; j++)
            if (kv_csv_cell(c, r, j) == NULL)
                abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *sink;
    if (sink == NULL && (sink = fopen("/dev/null", "w")) == NULL)
        abort();
    const char *text = (const char *)data;
    size_t n1 = size, off2 = 0, n2 = size;
    for (size_t i = 0; i + sizeof SEP - 1 <= size; i++) {
        if (memcmp(text + i, SEP, sizeof SEP - 1) == 0) {
            n1 = i + 1;
            off2 = i + sizeof SEP - 1;
            n2 = size - off2;
            break;
        }
    }
    char err[KV_CSV_ERR_LEN];
    struct kv_csv *a = NULL, *b = NULL;
    err[0] = '\0';
    if (kv_csv_parse(&a, text, n1, "base", err, sizeof err) != KV_OK) {
        check_msg(err);
        goto out;
    }
    check_csv(a);
    err[0] = '\0';
    if (kv_csv_parse(&b, text + off2, n2, "new", err, sizeof err) != KV_OK) {
        check_msg(err);
        goto out;
    }
    check_csv(b);

    static const struct kv_compare_opts opts[] = {
        {.metric = "step_ns_median", .threshold_pct = 5.0},
        {.metric = "step_ns_median", .threshold_pct = 0.0, .normalize = 1},
        {.metric = "attn_ns_median", .threshold_pct = 5.0, .normalize = 1},
        {.metric = "attn_ns_median", .threshold_pct = 5.0, .normalize = 1, .aggregate = 1},
        {.metric = "token_match", .threshold_pct = 1.0},
        {.metric = "rel_err", .threshold_pct = 1000.0, .normalize = 1, .aggregate = 1},
    };
    for (size_t k = 0; k < sizeof opts / sizeof opts[0]; k++) {
        struct kv_compare_result *r = NULL;
        err[0] = '\0';
        if (kv_compare_run(&r, a, b, &opts[k], err, sizeof err) != KV_OK) {
            check_msg(err);
            if (r != NULL)
                abort();
            continue;
        }
        if (r->n_items < 1 || r->n_compared + r->n_na != r->n_items ||
            r->n_regressed + r->n_improved > r->n_compared ||
            r->n_items + r->n_only_base != a->n_rows || r->n_items + r->n_only_new != b->n_rows)
            abort();
        for (int f = 0; f < KV_COMPARE_FORMAT_COUNT; f++)
            if (kv_compare_write(sink, r, (enum kv_compare_format)f) != KV_OK)
                abort();
        kv_compare_destroy(r);
    }

    /* kvlab merge of the two parts, under each permission */
    const struct kv_csv *pair[2] = {a, b};
    for (int k = 0; k < 8; k++) {
        struct kv_merge_opts mo = {.allow_mixed = k & 1, .allow_partial = (k >> 1) & 1,
                                   .prefer_newest = (k >> 2) & 1};
        struct kv_merge_result *m = NULL;
        err[0] = '\0';
        if (kv_merge_run(&m, pair, 2, &mo, err, sizeof err) != KV_OK) {
            check_msg(err);
            if (m != NULL)
                abort();
            continue;
        }
        if (m->n_rows < 1 || m->n_rows > a->n_rows + b->n_rows ||
            kv_csv_writer_row_count(m->out) != m->n_rows ||
            m->src[0].rows_kept + m->src[1].rows_kept != m->n_rows)
            abort();
        kv_merge_destroy(m);
    }
out:
    kv_csv_destroy(b);
    kv_csv_destroy(a);
    if (kv_alloc_live() != 0)
        abort();
    return 0;
}
