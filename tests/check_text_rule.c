/*
 * check_text_rule.c - the one text rule (strategies/strategy.h, kv_label_ok):
 * every label that reaches a CSV, a plot or a message is letters, digits and
 * KV_LABEL_PUNCT, checked where it is made and again where it is read.
 *
 * What it proves: every legitimate label passes (each built-in strategy,
 * preset and label(), bench/data/frontier.list with the budgets' "@B%" suffix,
 * docs/strategies.md's hybrid patterns); every hostile byte is refused (comma,
 * quote, backslash, space, ';', '$', backtick, control and non-ASCII bytes)
 * with one clean sentence naming its position; and each place a label is
 * made or read refuses one: a --layers-pattern (KV_PARAM_TEXT), a frontier
 * list line (at read time, naming the line), the sweep's check (before any
 * work), and the CSV readers of compare and merge (one line naming file
 * and line, the bad byte never echoed).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bench/measure/frontier.h"
#include "../bench/results/merge.h"
#include "../strategies/strategy.h"

/* One line of at most printable ASCII: no control byte, nothing past 0x7e. */
static int clean_line(const char *s)
{
    for (; *s != '\0'; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
            return 0;
    return 1;
}

static const char *const hostile[] = {
    "a,b",      "q\"x",  "back\\slash", "two words", "x;rm",   "$(id)",   "`id`",
    "e\x1b[31m", "tab\t", "nl\n",       "del\x7f",   "caf\xc3\xa9", "",   "quote'",
    "lt<",      "gt>",   "pipe|",       "amp&",      "hash#",  "slash/",  "par()",
};
#define N_HOSTILE ((int)(sizeof hostile / sizeof hostile[0]))

/* ------------------------------------------------------------------------ */
/* The rule                                                                 */

START_TEST(every_legitimate_label_passes)
{
    char buf[128];
    for (int32_t i = 0; i < kv_strategy_count(); i++) {
        const struct kv_strategy_ops *o = kv_strategy_at(i);
        ck_assert_msg(kv_label_ok(o->name), "%s", o->name);
        _Alignas(16) unsigned char params[KV_PARAMS_MAX_BYTES];
        kv_params_defaults(o, params);
        ck_assert_int_gt(kv_strategy_label(o, params, buf, sizeof buf), 0);
        ck_assert_msg(kv_label_ok(buf), "%s", buf);
        for (int32_t p = 0; p < o->n_presets; p++) {
            ck_assert_msg(kv_label_ok(o->presets[p].name), "%s", o->presets[p].name);
            ck_assert_int_eq(kv_strategy_lookup(o->presets[p].name, &o, params, sizeof params),
                             KV_OK);
            ck_assert_int_gt(kv_strategy_label(o, params, buf, sizeof buf), 0);
            ck_assert_msg(kv_label_ok(buf), "%s", buf);
        }
    }
    static const char *const more[] = {"sliding:1024*3+dynamic", "hybrid-3:1@12.5%",
                                       "sinks-reidx@50%", "kivi-2", "quantized:4",
                                       "paged-16-f16", "my_cache", "x=1"};
    for (size_t k = 0; k < sizeof more / sizeof more[0]; k++)
        ck_assert_msg(kv_label_ok(more[k]), "%s", more[k]);
    /* bench/data/frontier.list, and every label the planner makes of it */
    static struct kv_frontier_line lines[KV_FRONTIER_MAX_LINES];
    int32_t n = 0;
    char why[256];
    ck_assert_msg(kv_frontier_load("bench/data/frontier.list", lines, KV_FRONTIER_MAX_LINES, &n, why,
                                   sizeof why) == KV_OK, "%s", why);
    ck_assert_int_gt(n, 5);
    for (int32_t i = 0; i < n; i++) {
        ck_assert_msg(kv_label_ok(lines[i].label), "%s", lines[i].label);
        snprintf(buf, sizeof buf, "%.24s@%g%%", lines[i].label, 12.5);
        ck_assert_msg(kv_label_ok(buf), "%s", buf);
    }
}
END_TEST

START_TEST(every_hostile_byte_is_refused_in_one_clean_line)
{
    char why[256];
    for (int k = 0; k < N_HOSTILE; k++) {
        ck_assert_msg(!kv_label_ok(hostile[k]), "%d accepted", k);
        ck_assert_int_eq(kv_label_why(hostile[k], why, sizeof why), -1);
        ck_assert_msg(why[0] != '\0' && clean_line(why), "%d: %s", k, why);
        ck_assert_ptr_null(strchr(why, '"'));
        ck_assert_ptr_null(strchr(why, '\\'));
    }
    ck_assert(!kv_label_ok(NULL));
    ck_assert_int_eq(kv_label_why("ab\x1b", why, sizeof why), -1);
    ck_assert_msg(strstr(why, "character 3") != NULL && strstr(why, "0x1b") != NULL, "%s", why);
    ck_assert_int_eq(kv_label_why("a;b", why, sizeof why), -1);
    ck_assert_msg(strstr(why, "character 2 (';')") != NULL, "%s", why);
    char longest[KV_LABEL_MAX + 2];
    memset(longest, 'a', sizeof longest);
    longest[KV_LABEL_MAX] = '\0';
    ck_assert(kv_label_ok(longest));
    longest[KV_LABEL_MAX] = 'a';
    longest[KV_LABEL_MAX + 1] = '\0';
    ck_assert(!kv_label_ok(longest));
    ck_assert_int_eq(kv_label_why("fine", why, sizeof why), 0);
    ck_assert_str_eq(why, "");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Where labels are made                                                    */

/* A --layers-pattern is a KV_PARAM_TEXT: label characters but '=' (',' is
 * taken as '+'). */
START_TEST(layers_pattern_follows_the_rule)
{
    const struct kv_strategy_ops *h = kv_strategy_find("hybrid");
    ck_assert_ptr_nonnull(h);
    _Alignas(16) unsigned char params[KV_PARAMS_MAX_BYTES];
    kv_params_defaults(h, params);
    ck_assert_int_eq(kv_params_set_text(h, params, "pattern", "sliding:1024*3+dynamic"), KV_OK);
    ck_assert_int_eq(kv_params_set_text(h, params, "pattern", "sliding:8,dynamic"), KV_OK);
    ck_assert_str_eq(kv_params_get_text(h, params, 0), "sliding:8+dynamic");
    static const char *const bad[] = {"sliding:8;x", "a b", "\"x", "$x", "e\x1b", "a=b",
                                      "back\\slash", "tick`", "caf\xc3\xa9"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        ck_assert_msg(kv_params_set_text(h, params, "pattern", bad[k]) == KV_ERR_INVALID,
                      "%zu", k);
    ck_assert_str_eq(kv_params_get_text(h, params, 0), "sliding:8+dynamic");
}
END_TEST

/* A frontier list line whose label, strategy or parameters break the rule
 * is refused when the list is read, naming its line. */
START_TEST(frontier_list_refuses_hostile_lines)
{
    static struct kv_frontier_line lines[KV_FRONTIER_MAX_LINES];
    int32_t n = 0;
    char why[256], text[512];
    static const char *const bad[] = {
        ";echo>/tmp/pw quantized-int8 -", "a,b quantized-int8 -",  "q\"x quantized-int8 -",
        "e\x1bx quantized-int8 -",        "ok quant$zed -",        "ok quantized bits=4;$x=1",
        "ok quantized bits=\"4\"",        "ok quantized bits=4\\",  "ok `id` -",
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        snprintf(text, sizeof text, "# a list\nint8 quantized-int8 -\n%s\n", bad[k]);
        ck_assert_int_eq(kv_frontier_parse(text, lines, KV_FRONTIER_MAX_LINES, &n, why,
                                           sizeof why),
                         KV_ERR_FORMAT);
        ck_assert_msg(strncmp(why, "line 3: ", 8) == 0 && clean_line(why), "%zu: %s", k, why);
    }
    snprintf(text, sizeof text, "int8 quantized-int8 -\nhybrid-3:1 hybrid "
                                "pattern=sliding:@*3+dynamic\nsinks sinks-original "
                                "sinks=4;window=@\n");
    ck_assert_msg(kv_frontier_parse(text, lines, KV_FRONTIER_MAX_LINES, &n, why, sizeof why) ==
                      KV_OK, "%s", why);
    ck_assert_int_eq(n, 3);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Where labels are read                                                    */

#define HDR                                                                              \
    "strategy,layers,dim,heads,kv_heads,head_dim,hidden,batch,window,bits,group,"        \
    "residual,threads,seq_len,reps,step_ns_median,step_ns_p95,attn_ns_median,"           \
    "flops_step,attn_flops_step,bytes_step,cache_bytes,copy_bytes_step,peak_rss_bytes,"  \
    "max_abs_err,rel_err,token_match,dtype,params,label\n"
#define ROW_HEAD "dynamic,2,64,4,2,16,128,1,0,32,0,0,2,64,3,1000,1100,250,1,1,1,1,512,1000,0,0,1,"

/* A sweep file whose label, strategy, dtype, params or `# strategies=` is not
 * one: compare's validation and merge refuse it in one clean line naming
 * the file and line. */
START_TEST(readers_refuse_hostile_labels)
{
    struct bad_case {
        const char *strategies, *row_tail, *strategy;
        int line;
    } cases[] = {
        {"dynamic", "f32,dtype=f32,q\"\"x\n", NULL, 5},       /* a quoted quote in label */
        {"dynamic", "f32,dtype=f32,\"a,b\"\n", NULL, 5},       /* a quoted comma */
        {"dynamic", "f32,dtype=f32,a b\n", NULL, 5},
        {"dynamic", "f32,dtype=f32,x;rm\n", NULL, 5},
        {"dynamic", "f3$2,dtype=f32,dynamic\n", NULL, 5},
        {"dynamic", "f32,\"dtype=f\"\"32\",dynamic\n", NULL, 5},
        {"dynamic,q\"x", "f32,dtype=f32,dynamic\n", NULL, 3},
        {"dynamic", "f32,dtype=f32,dynamic\n", "dyn`id`", 5},
    };
    char text[2048], err[KV_CSV_ERR_LEN];
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const char *row = ROW_HEAD;
        char rowbuf[512];
        if (cases[k].strategy != NULL) {
            snprintf(rowbuf, sizeof rowbuf, "%s%s", cases[k].strategy, ROW_HEAD + 7);
            row = rowbuf;
        }
        snprintf(text, sizeof text, "# kvlab sweep\n# schema=2\n# strategies=%s\n" HDR "%s%s",
                 cases[k].strategies, row, cases[k].row_tail);
        struct kv_csv *c = NULL;
        ck_assert_msg(kv_csv_parse(&c, text, strlen(text), "bad.csv", err, sizeof err) == KV_OK,
                      "%s", err);
        int32_t col[KV_SWEEP_N_REQUIRED];
        ck_assert_int_eq(kv_sweep_validate(c, col, err, sizeof err), KV_ERR_FORMAT);
        char want[32];
        snprintf(want, sizeof want, "bad.csv:%d: ", cases[k].line);
        ck_assert_msg(strncmp(err, want, strlen(want)) == 0 && clean_line(err) &&
                          strchr(err, '"') == NULL,
                      "%zu: %s", k, err);
        struct kv_merge_result *r = NULL;
        struct kv_merge_opts o = {0};
        const struct kv_csv *in[1] = {c};
        ck_assert_int_eq(kv_merge_run(&r, in, 1, &o, err, sizeof err), KV_ERR_FORMAT);
        ck_assert_ptr_null(r);
        ck_assert_msg(strncmp(err, want, strlen(want)) == 0 && clean_line(err), "%zu: %s", k,
                      err);
        kv_csv_destroy(c);
    }
    /* the good file reads */
    snprintf(text, sizeof text, "# kvlab sweep\n# schema=2\n# strategies=dynamic,int8@12.5%%\n"
             HDR ROW_HEAD "f32,dtype=f32,int8@12.5%%\n");
    struct kv_csv *c = NULL;
    ck_assert_int_eq(kv_csv_parse(&c, text, strlen(text), "good.csv", err, sizeof err), KV_OK);
    int32_t col[KV_SWEEP_N_REQUIRED];
    ck_assert_msg(kv_sweep_validate(c, col, err, sizeof err) == KV_OK, "%s", err);
    kv_csv_destroy(c);
}
END_TEST

/* ------------------------------------------------------------------------ */

int main(void)
{
    Suite *s = suite_create("text_rule");
    TCase *t = tcase_create("text_rule");
    tcase_add_test(t, every_legitimate_label_passes);
    tcase_add_test(t, every_hostile_byte_is_refused_in_one_clean_line);
    tcase_add_test(t, layers_pattern_follows_the_rule);
    tcase_add_test(t, frontier_list_refuses_hostile_lines);
    tcase_add_test(t, readers_refuse_hostile_labels);
    suite_add_tcase(s, t);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
