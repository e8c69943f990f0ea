/*
 * check_cli_io.c - the CLI's shared handling of streams, files and messages
 * (bench/cli/cli_io.c): the stdout check at exit (kv_cli_finish), progress that
 * stops after a failed write instead of killing the run, the one quoting
 * helper of every echoed value, the output-target check with its option
 * names and exit statuses, and a strategy's checks against its shape. (The
 * options themselves: check_cli_cmd.c.)
 *
 * stderr (the FILE *) is pointed at a temporary file around each call that
 * prints, so the one-line contract is checked on what was really printed.
 */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../bench/cli/cli_io.h"
#include "../bench/cli/cli_opts.h"

static char dir[64];
static char cwd0[PATH_MAX];

static void setup(void)
{
    ck_assert_ptr_nonnull(getcwd(cwd0, sizeof cwd0));
    snprintf(dir, sizeof dir, "/tmp/kvlab_check_cli_io.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ck_assert_int_eq(chdir(dir), 0);
}

static void teardown(void)
{
    ck_assert_int_eq(chdir(cwd0), 0);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* stderr captured into a file while a call prints. */
static FILE *saved_stderr;
static FILE *cap;

static void capture_begin(void)
{
    cap = tmpfile();
    ck_assert_ptr_nonnull(cap);
    saved_stderr = stderr;
    stderr = cap;
}

/* Ends the capture; the text into buf. Returns its number of lines. */
static int capture_end(char *buf, size_t n)
{
    fflush(cap);
    stderr = saved_stderr;
    rewind(cap);
    size_t got = fread(buf, 1, n - 1, cap);
    buf[got] = '\0';
    fclose(cap);
    int lines = 0;
    for (size_t i = 0; i < got; i++)
        lines += buf[i] == '\n';
    return lines;
}

/* ------------------------------------------------------------------------ */
/* The stdout check                                                         */

START_TEST(test_finish_reports_lost_output)
{
    char msg[512];
    /* a full device: everything printed was lost */
    FILE *f = fopen("/dev/full", "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "tokens: 1 2 3\n");
    capture_begin();
    int rc = kv_cli_finish(f, "standard output", 0);
    ck_assert_int_eq(capture_end(msg, sizeof msg), 1);
    ck_assert_int_eq(rc, 1);
    ck_assert_msg(strncmp(msg, "kvlab: cannot write standard output: ", 37) == 0, "%s", msg);
    /* more than a buffer's worth: the error happens before the exit */
    f = fopen("/dev/full", "w");
    for (int i = 0; i < 20000; i++)
        fputs("0123456789", f);
    capture_begin();
    rc = kv_cli_finish(f, "standard output", 0);
    ck_assert_int_eq(capture_end(msg, sizeof msg), 1);
    ck_assert_int_eq(rc, 1);
    /* a failed command keeps its status (2 stays 2) and its one line */
    f = fopen("/dev/full", "w");
    fputs("x", f);
    capture_begin();
    ck_assert_int_eq(kv_cli_finish(f, "standard output", 2), 2);
    ck_assert_int_eq(capture_end(msg, sizeof msg), 0);
    /* a good stream: the status unchanged, nothing printed */
    f = fopen("out.txt", "w");
    fputs("fine\n", f);
    capture_begin();
    ck_assert_int_eq(kv_cli_finish(f, "standard output", 0), 0);
    ck_assert_int_eq(capture_end(msg, sizeof msg), 0);
    f = fopen("out2.txt", "w"); /* nothing written at all */
    capture_begin();
    ck_assert_int_eq(kv_cli_finish(f, "standard output", 130), 130);
    ck_assert_int_eq(capture_end(msg, sizeof msg), 0);
}
END_TEST

START_TEST(test_progress_stops_after_failure)
{
    ck_assert(kv_progress_on());
    FILE *full = fopen("/dev/full", "w");
    ck_assert_ptr_nonnull(full);
    saved_stderr = stderr;
    stderr = full;
    int r1 = kv_progress("row %d of %d\n", 1, 10);
    int r2 = kv_progress("row %d of %d\n", 2, 10);
    stderr = saved_stderr;
    fclose(full);
    ck_assert_int_eq(r1, -1);
    ck_assert_int_eq(r2, -1);
    ck_assert(!kv_progress_on()); /* off for good: the run goes on quietly */
    char msg[64];
    capture_begin();
    ck_assert_int_eq(kv_progress("row 3\n"), -1);
    ck_assert_int_eq(capture_end(msg, sizeof msg), 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Quoting                                                                  */

START_TEST(test_quote)
{
    char b[64];
    ck_assert_str_eq(kv_text_quote(b, sizeof b, "a\nb", 100), "a\\nb");
    ck_assert_str_eq(kv_text_quote(b, sizeof b, "t\tr\r'q'\\", 100), "t\\tr\\r\\'q\\'\\\\");
    ck_assert_str_eq(kv_text_quote(b, sizeof b, "\x1b[31m\x7f", 100), "\\x1b[31m\\x7f");
    ck_assert_str_eq(kv_text_quote(b, sizeof b, "caf\xc3\xa9", 100), "caf\xc3\xa9");
    ck_assert_str_eq(kv_text_quote(b, sizeof b, "abcdef", 3), "abc...");
    ck_assert_str_eq(kv_text_quote(b, sizeof b, NULL, 3), "");
    ck_assert_str_eq(kv_text_quote(b, 8, "abcdefghijkl", 100), "abcd...");
    char big[300];
    memset(big, '\n', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    const char *q = kv_text_q(big);
    ck_assert_ptr_null(strchr(q, '\n'));
    ck_assert_uint_le(strlen(q), 2 * 120 + 3);
    /* rotating buffers: four arguments of one message stay distinct */
    const char *a = kv_text_q("one"), *c = kv_text_q("two"), *d = kv_text_q("three");
    ck_assert_str_eq(a, "one");
    ck_assert_str_eq(c, "two");
    ck_assert_str_eq(d, "three");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Output targets through the CLI                                           */

START_TEST(test_check_outputs_statuses)
{
    char msg[512];
    ck_assert_int_eq(mkfifo("fifo", 0644), 0);
    FILE *f = fopen("model.bin", "w");
    fclose(f);
    const struct kv_cli_file ins[] = {{"--model", "model.bin"}, {"--tokenizer", NULL}};
    struct kv_cli_file outs[2] = {{"--out", "r.csv"}, {"--tokenizer-out", NULL}};
    capture_begin();
    ck_assert_int_eq(kv_cli_check_outputs("sweep", outs, 2, ins, 2, KV_FILE_PARENT_MKDIR, 1), 0);
    ck_assert_int_eq(capture_end(msg, sizeof msg), 0);

    struct {
        const char *out, *out2, *want;
        int rc;
    } cases[] = {
        {"fifo", NULL, "--out 'fifo': is a FIFO", 2},
        {"./model.bin", NULL, "is also an input: the same file as --model 'model.bin'", 2},
        {"a.bin", "./a.bin", "--tokenizer-out './a.bin' is also an output: the same file as --out 'a.bin'", 2},
        {"no/such/x.csv", NULL, "--out 'no/such/x.csv': cannot write into its directory", 1},
        {"bad\nname/", NULL, "--out 'bad\\nname/': ends in '/'", 2},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        outs[0].path = cases[k].out;
        outs[1].path = cases[k].out2;
        capture_begin();
        int rc = kv_cli_check_outputs("sweep", outs, 2, ins, 2, KV_FILE_PARENT_MKDIR, 1);
        ck_assert_int_eq(capture_end(msg, sizeof msg), 1);
        ck_assert_int_eq(rc, cases[k].rc);
        ck_assert_msg(strncmp(msg, "kvlab: sweep: ", 14) == 0, "%s", msg);
        ck_assert_msg(strstr(msg, cases[k].want) != NULL, "%s", msg);
    }
    struct stat st;
    ck_assert_int_eq(stat("fifo", &st), 0);
    ck_assert(S_ISFIFO(st.st_mode));
}
END_TEST

/* kv_cli_check_strategy: a strategy's own parameters against the shape it
 * is given, its memory with the option that sizes it named; another
 * strategy's parameter values are not its business. */
START_TEST(test_check_strategy)
{
    struct kv_cli_common c;
    kv_cli_common_defaults(&c);
    kv_cli_flag_default(&c, "--group", 32); /* as a command line's --group 32 */
    kv_cli_flag_default(&c, "--window", 1073741824);
    struct kv_cli_strategy q, d, w, st;
    ck_assert_int_eq(kv_cli_strategy(&c, "quantized", &q), 0);
    ck_assert_int_eq(kv_cli_strategy(&c, "dynamic", &d), 0);
    ck_assert_int_eq(kv_cli_strategy(&c, "sliding", &w), 0);
    ck_assert_int_eq(kv_cli_strategy(&c, "static", &st), 0);
    struct kv_cache_config cc = {.n_layers = 2, .batch = 1, .n_kv_heads = 2, .head_dim = 16,
                                 .max_len = 64};
    char msg[1024];
    capture_begin();
    ck_assert_int_eq(kv_cli_check_strategy("t", d.ops, d.params, &cc, 64, 1, NULL), 0);
    ck_assert_int_eq(kv_cli_check_strategy("t", q.ops, q.params, &cc, 64, 1, NULL), 2);
    cc.head_dim = 64;
    size_t b = 0;
    ck_assert_int_eq(kv_cli_check_strategy("t", q.ops, q.params, &cc, 64, 1, &b), 0);
    ck_assert_uint_gt(b, 0);
    ck_assert_int_eq(kv_cli_check_strategy("t", w.ops, w.params, &cc, 64, 1, NULL), 2);
    ck_assert_int_eq(kv_cli_check_strategy("t", w.ops, w.params, &cc, 64, 0, NULL), 0);
    int lines = capture_end(msg, sizeof msg);
    ck_assert_int_eq(lines, 2);
    ck_assert_msg(strstr(msg, "kvlab: t: quantized: ") != NULL && strstr(msg, "--group") != NULL,
                  "%s", msg);
    ck_assert_msg(strstr(msg, "the sliding cache with --window 1073741824 needs") != NULL, "%s",
                  msg);
    /* --slots applies to a cache whose capacity is its max_len */
    ck_assert(kv_cli_slots_apply(st.ops));
    ck_assert(!kv_cli_slots_apply(d.ops));
    ck_assert(!kv_cli_slots_apply(w.ops));
}
END_TEST

static Suite *cli_io_suite(void)
{
    Suite *s = suite_create("cli_io");
    TCase *tc = tcase_create("streams");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_finish_reports_lost_output);
    tcase_add_test(tc, test_progress_stops_after_failure);
    suite_add_tcase(s, tc);
    tc = tcase_create("messages");
    tcase_add_test(tc, test_quote);
    suite_add_tcase(s, tc);
    tc = tcase_create("files");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_check_outputs_statuses);
    tcase_add_test(tc, test_check_strategy);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(cli_io_suite());
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed;
}
