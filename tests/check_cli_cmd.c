/*
 * check_cli_cmd.c - the one command layer (bench/cli/cli_cmd.c) on a test
 * command of its own: strict numbers, no abbreviations, an option given
 * twice, options the active mode ignores, strategy parameters no strategy
 * of the run takes (or its preset fixes), the model's shape next to
 * --model, labels and strategy lists, and the files judged before the run:
 * a FIFO input refused at once, an output equal to an input, a directory.
 * Every refusal is exit 2 with one line on stderr, and the run function
 * is never called; an accepted line reaches it with the parsed values.
 */
#include <check.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../bench/cli/cli_cmd.h"

/* ---- the test command ------------------------------------------------------- */

enum { M_PLAIN = 1u << 0, M_FANCY = 1u << 1 };
static const char *const mode_names[] = {"without --fancy", "with --fancy"};
static const char *const colours[] = {"red", "green", NULL};

struct t_opts {
    int32_t n;
    double x;
    int fancy;
    int colour;
    int32_t only_fancy;
    struct kv_opt_ints lens;
    const char *list;
    const char *in;
    const char *out;
    const char *pos_out;
};

#define T(f) offsetof(struct t_opts, f)
static const struct kv_opt t_table[] = {
    {.name = "--n", .kind = KV_OPT_INT, .off = T(n), .lo = 1, .hi = 100, .help = "a count"},
    {.name = "--x", .kind = KV_OPT_FLOAT, .off = T(x), .flo = 0.0, .fhi = 10.0, .help = "x"},
    {.name = "--fancy", .kind = KV_OPT_FLAG, .off = T(fancy), .help = "the other mode"},
    {.name = "--colour", .kind = KV_OPT_ENUM, .off = T(colour), .names = colours, .help = "c"},
    {.name = "--only-fancy", .kind = KV_OPT_INT, .off = T(only_fancy), .lo = 0, .hi = 9,
     .modes = M_FANCY, .help = "used with --fancy only"},
    {.name = "--lens", .kind = KV_OPT_INTS, .off = T(lens), .lo = 2, .hi = 99, .hi_n = 3,
     .help = "lengths"},
    {.name = "--list", .kind = KV_OPT_STRATEGIES, .off = T(list), .help = "strategies"},
    {.name = "--in", .kind = KV_OPT_INPUT, .off = T(in), .help = "an input"},
    {.name = "--out", .kind = KV_OPT_OUTPUT, .off = T(out), .help = "an output"},
    {.name = "OUT", .kind = KV_OPT_OUTPUT, .off = T(pos_out), .pos = 1, .help = "positional"},
};
#undef T

static struct t_opts seen;
static int runs;

static uint32_t t_modes(const struct kv_cmd_ctx *x)
{
    return ((const struct t_opts *)x->opts)->fancy ? M_FANCY : M_PLAIN;
}

static int32_t t_strategies(const struct kv_cmd_ctx *x, const char **names, int32_t max)
{
    const struct t_opts *o = x->opts;
    if (o->list == NULL)
        return x->c.strategy != NULL ? (names[0] = x->c.strategy, 1) : 0;
    /* the list's items, for the parameter check */
    static char buf[512];
    snprintf(buf, sizeof buf, "%s", o->list);
    int32_t n = 0;
    for (char *s = strtok(buf, ","); s != NULL && n < max; s = strtok(NULL, ","))
        names[n++] = s;
    return n;
}

static int t_run(struct kv_cmd_ctx *x)
{
    seen = *(const struct t_opts *)x->opts;
    runs++;
    return 0;
}

static const struct kv_cmd t_cmd = {
    .name = "t",
    .summary = "a test command",
    .usage = "[options] [OUT]",
    .opts = t_table,
    .n_opts = sizeof t_table / sizeof t_table[0],
    .groups = KV_GRP_MODEL | KV_GRP_CHECKPOINT | KV_GRP_STRATEGY | KV_GRP_PARAMS | KV_GRP_SEED,
    .opts_size = sizeof(struct t_opts),
    .modes = t_modes,
    .mode_names = mode_names,
    .strategies = t_strategies,
    .run = t_run,
};

/* ---- running it ----------------------------------------------------------- */

static char dir[64];
static char cwd0[PATH_MAX];

static void setup(void)
{
    ck_assert_ptr_nonnull(getcwd(cwd0, sizeof cwd0));
    snprintf(dir, sizeof dir, "/tmp/kvlab_check_cli_cmd.XXXXXX");
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

static char err[4096];

/* Runs t with the words (NULL-terminated); stderr into err. Returns the
 * exit status; *lines the lines printed on stderr. */
static int run_t(int *lines, const char *first, ...)
{
    char *argv[64];
    int argc = 0;
    argv[argc++] = (char *)"t";
    va_list ap;
    va_start(ap, first);
    for (const char *w = first; w != NULL && argc < 63; w = va_arg(ap, const char *))
        argv[argc++] = (char *)w;
    va_end(ap);
    argv[argc] = NULL;
    FILE *cap = tmpfile();
    ck_assert_ptr_nonnull(cap);
    FILE *saved = stderr;
    stderr = cap;
    int rc = kv_cmd_main(&t_cmd, argc, argv);
    fflush(cap);
    stderr = saved;
    rewind(cap);
    size_t got = fread(err, 1, sizeof err - 1, cap);
    err[got] = '\0';
    fclose(cap);
    *lines = 0;
    for (const char *p = err; *p != '\0'; p++)
        *lines += *p == '\n';
    return rc;
}

/* A refusal: exit 2, one line naming `needle`, and the run never called. */
#define REFUSED(needle, ...)                                                                   \
    do {                                                                                       \
        int lines_;                                                                            \
        runs = 0;                                                                              \
        int rc_ = run_t(&lines_, __VA_ARGS__, (const char *)NULL);                             \
        ck_assert_msg(rc_ == 2, "exit %d, expected 2 (stderr: %s)", rc_, err);                 \
        ck_assert_msg(lines_ == 1, "%d lines on stderr: %s", lines_, err);                     \
        ck_assert_msg(strncmp(err, "kvlab: t: ", 10) == 0, "prefix: %s", err);                 \
        ck_assert_msg(strstr(err, needle) != NULL, "'%s' not in: %s", needle, err);            \
        ck_assert_int_eq(runs, 0);                                                             \
    } while (0)

#define ACCEPTED(...)                                                                          \
    do {                                                                                       \
        int lines_;                                                                            \
        runs = 0;                                                                              \
        int rc_ = run_t(&lines_, __VA_ARGS__, (const char *)NULL);                             \
        ck_assert_msg(rc_ == 0 && runs == 1, "exit %d, runs %d: %s", rc_, runs, err);          \
    } while (0)

/* ---- numbers -------------------------------------------------------------- */

static const char *const bad_ints[] = {"0x10", " 5", "5 ", "5x", "", "+", "1e2", "101", "0",
                                       "99999999999999999999", "5.0", "--5"};
START_TEST(test_strict_ints)
{
    REFUSED("--n expects an integer in [1, 100]", "--n", bad_ints[_i]);
}
END_TEST

static const char *const bad_floats[] = {"0x10", " 1", "1 ", "nan", "inf", "-inf", "1e400",
                                         "10.5", "-0.5", "1,5", ".", "e3", "1e", "0x1p3"};
START_TEST(test_strict_floats)
{
    REFUSED("--x expects a decimal number in [0, 10]", "--x", bad_floats[_i]);
}
END_TEST

START_TEST(test_values_reach_the_run)
{
    ACCEPTED("--n", "7", "--x=2.5e0", "--colour", "green", "--lens", "2,5,99");
    ck_assert_int_eq(seen.n, 7);
    ck_assert(seen.x == 2.5);
    ck_assert_int_eq(seen.colour, 1);
    ck_assert_int_eq(seen.lens.n, 3);
    ck_assert_int_eq(seen.lens.v[2], 99);
    REFUSED("--lens expects", "--lens", "2,5,9,11"); /* four values, three allowed */
    REFUSED("--lens expects", "--lens", "2,,5");
    REFUSED("--colour expects one of red, green", "--colour", "blue");
}
END_TEST

/* ---- the command line's shape --------------------------------------------- */

START_TEST(test_shape)
{
    REFUSED("unknown option '--nn'", "--nn", "3");
    REFUSED("not abbreviated", "--fan");             /* a prefix of --fancy */
    REFUSED("unknown option '-hx'", "-hx");          /* not -h and x */
    REFUSED("unknown option '--he'", "--he");        /* not --help */
    REFUSED("unknown option '-x'", "-x");
    REFUSED("--n is given twice", "--n", "3", "--n", "4");
    REFUSED("--n expects a value", "--n");
    REFUSED("unexpected argument 'b'", "a", "b");
    REFUSED("unknown option '--\\x1b[31m'", "--\x1b[31m"); /* echoed, quoted */
    /* a value with a newline in it stays inside the one line */
    REFUSED("'12\\nkvlab: fake second line'", "--n", "12\nkvlab: fake second line");
    REFUSED("'12\\nkvlab: fake second line'", "--layers", "12\nkvlab: fake second line");
    REFUSED("'12\\nkvlab: fake second line'", "--window", "12\nkvlab: fake second line");
    /* --help prints the generated help and runs nothing */
    int lines;
    runs = 0;
    FILE *saved = stdout;
    stdout = tmpfile();
    ck_assert_ptr_nonnull(stdout);
    int rc = run_t(&lines, "--help", (const char *)NULL);
    fclose(stdout);
    stdout = saved;
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(runs, 0);
}
END_TEST

/* ---- options that would do nothing ---------------------------------------- */

START_TEST(test_modes)
{
    REFUSED("--only-fancy has no effect here; it applies only with --fancy", "--only-fancy",
            "3");
    ACCEPTED("--fancy", "--only-fancy", "3");
}
END_TEST

START_TEST(test_strategy_params)
{
    REFUSED("--window has no effect on 'dynamic'", "--strategy", "dynamic", "--window", "4");
    REFUSED("--bits has no effect on any of", "--list", "dynamic,static", "--bits", "4");
    ACCEPTED("--list", "dynamic,quantized", "--bits", "4");
    /* a preset that fixes the parameter itself */
    REFUSED("sets it itself", "--strategy", "quantized-int4", "--bits", "8");
    REFUSED("no effect without a strategy", "--window", "4");
    REFUSED("unknown strategy 'nosuch'", "--strategy", "nosuch");
    REFUSED("names 'dynamic' twice", "--list", "dynamic,dynamic");
    REFUSED("--list expects", "--list", "dyn\namic");
    REFUSED("unknown strategy", "--list", "dynamic,nosuch");
}
END_TEST

START_TEST(test_model_shape_with_checkpoint)
{
    FILE *f = fopen("m.bin", "wb");
    ck_assert_ptr_nonnull(f);
    fputs("not a checkpoint, but a regular file", f);
    fclose(f);
    REFUSED("--layers has no effect with --model", "--model", "m.bin", "--layers", "3");
}
END_TEST

/* ---- files ---------------------------------------------------------------- */

START_TEST(test_files)
{
    ck_assert_int_eq(mkfifo("fifo", 0600), 0);
    ck_assert_int_eq(mkdir("d", 0700), 0);
    FILE *f = fopen("in.txt", "wb");
    ck_assert_ptr_nonnull(f);
    fputs("x", f);
    fclose(f);
    REFUSED("'fifo': is a FIFO", "--in", "fifo");   /* at once: never opened blocking */
    REFUSED("'d'", "--in", "d");
    REFUSED("in.txt", "--in", "in.txt", "--out", "in.txt");   /* an output equal to an input */
    REFUSED("in.txt", "--in", "./d/../in.txt", "in.txt");     /* positional, another spelling */
    REFUSED("'d'", "--out", "d");
    REFUSED("o.csv", "--out", "o.csv", "o.csv");              /* two outputs, one file */
    REFUSED("--out expects a file name", "--out", "");
    REFUSED("missing/deeper/o.csv", "--out", "missing/deeper/o.csv");
    /* the files an inactive mode would ignore are not judged: none here */
    ACCEPTED("--in", "in.txt", "--out", "o.csv");
    ck_assert_str_eq(seen.out, "o.csv");
    ck_assert_int_eq(access("o.csv", F_OK), -1); /* judging writes nothing */
}
END_TEST

/* ---- labels --------------------------------------------------------------- */

static const char *const good_labels[] = {"dynamic", "quantized-int8", "sliding:1024*3+dynamic",
                                          "kivi-2", "bits=4", "a.b_c@d"};
static const char *const bad_labels[] = {"", "a b", "a,b", "a\"b", "a'b", "a;b", "$x", "a`b`",
                                         "a\nb", "a\\b", "\x1b", "é",
                                         "0123456789012345678901234567890123456789012345678901234567890123"};
START_TEST(test_labels)
{
    for (size_t i = 0; i < sizeof good_labels / sizeof good_labels[0]; i++)
        ck_assert_msg(kv_cli_label_ok(good_labels[i]), "%s refused", good_labels[i]);
    for (size_t i = 0; i < sizeof bad_labels / sizeof bad_labels[0]; i++)
        ck_assert_msg(!kv_cli_label_ok(bad_labels[i]), "'%s' accepted", bad_labels[i]);
}
END_TEST

/* ---- every real command's table ------------------------------------------- */

#include "../bench/cli/commands.h"
static const struct kv_cmd *const all[] = {
    &kv_cmd_strategies_def, &kv_cmd_generate_def, &kv_cmd_sweep_def,    &kv_cmd_sharing_def,
    &kv_cmd_demo_def,       &kv_cmd_compare_def,  &kv_cmd_merge_def,    &kv_cmd_kernel_def,
    &kv_cmd_roofline_def,   &kv_cmd_export_def,   &kv_cmd_perplexity_def, &kv_cmd_stale_def,
};

START_TEST(test_tables_well_formed)
{
    /* the registry's parameter flags collide with no command option */
    ck_assert_int_eq(kv_cmd_reserve(all, (int32_t)(sizeof all / sizeof all[0])), 0);
    for (size_t c = 0; c < sizeof all / sizeof all[0]; c++) {
        const struct kv_cmd *cmd = all[c];
        ck_assert_msg(cmd->run != NULL && cmd->usage != NULL && cmd->summary != NULL, "%s",
                      cmd->name);
        ck_assert_msg(cmd->example != NULL && cmd->example[0] != '\0', "%s: no example",
                      cmd->name);
        for (int32_t i = 0; i < cmd->n_opts; i++) {
            const struct kv_opt *o = &cmd->opts[i];
            ck_assert_msg(o->help != NULL && o->name != NULL, "%s: option %d", cmd->name, i);
            ck_assert_msg(o->pos != 0 || strncmp(o->name, "--", 2) == 0, "%s: %s", cmd->name,
                          o->name);
            ck_assert_msg(o->modes == 0 || cmd->mode_names != NULL, "%s: %s has modes but the "
                          "command names none", cmd->name, o->name);
            ck_assert_msg(o->kind != KV_OPT_ENUM || o->names != NULL, "%s", o->name);
            for (int32_t j = 0; j < i; j++)
                ck_assert_msg(strcmp(o->name, cmd->opts[j].name) != 0, "%s: %s twice",
                              cmd->name, o->name);
        }
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cli_cmd");
    TCase *tc = tcase_create("layer");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, test_strict_ints, 0, (int)(sizeof bad_ints / sizeof bad_ints[0]));
    tcase_add_loop_test(tc, test_strict_floats, 0,
                        (int)(sizeof bad_floats / sizeof bad_floats[0]));
    tcase_add_test(tc, test_values_reach_the_run);
    tcase_add_test(tc, test_shape);
    tcase_add_test(tc, test_modes);
    tcase_add_test(tc, test_strategy_params);
    tcase_add_test(tc, test_model_shape_with_checkpoint);
    tcase_add_test(tc, test_files);
    tcase_add_test(tc, test_labels);
    tcase_add_test(tc, test_tables_well_formed);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
