/*
 * check_files.c - the file helpers every command shares (bench/model/file_check.c,
 * bench/model/file_commit.c): the non-blocking input open, the up-front
 * output-target check, same-file detection by resolved path, and the one
 * temporary-file creator (mkstemp next to the resolved target, the target's
 * mode kept, links written through, pending temporaries removable from a
 * signal handler).
 *
 * Each case builds what it needs in a fresh temporary directory: FIFOs, a
 * character device (root only: a node with /dev/null's numbers, so that a
 * broken writer could only ever replace that private node, never a system
 * device) and links to it, read-only files, hard links, names at NAME_MAX.
 * Runs as root as well: a read-only file is refused even where root could
 * write.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "../bench/results/csv_write.h"
#include "../bench/model/file_check.h"
#include "../bench/model/file_commit.h"

static char dir[64];
static char cwd0[PATH_MAX];

/* A fresh directory, made the current one so relative names work. */
static void setup(void)
{
    ck_assert_ptr_nonnull(getcwd(cwd0, sizeof cwd0));
    snprintf(dir, sizeof dir, "/tmp/kvlab_check_files.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ck_assert_int_eq(chdir(dir), 0);
}

static void teardown(void)
{
    ck_assert_int_eq(chdir(cwd0), 0);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "chmod -R u+w '%s'; rm -rf '%s'", dir, dir);
    ck_assert_int_eq(system(cmd), 0);
}

static void put(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(chmod(path, mode), 0);
}

static int same_text(const char *path, const char *text)
{
    char buf[256] = "";
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strcmp(buf, text) == 0;
}

/* Entries of the current directory whose name contains s. */
static int count_names(const char *s)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "ls -a | grep -c -F '%s'", s);
    FILE *p = popen(cmd, "r");
    int n = -1;
    ck_assert_ptr_nonnull(p);
    if (fscanf(p, "%d", &n) != 1)
        n = -1;
    pclose(p);
    return n;
}

/* "chardev" (and "chardev.link") in the current directory when this
 * process may make device nodes; 0 otherwise (those cases are skipped). */
static int make_chardev(void)
{
    if (mknod("chardev", S_IFCHR | 0666, makedev(1, 3)) != 0)
        return 0;
    ck_assert_int_eq(symlink("chardev", "chardev.link"), 0);
    return 1;
}

static void name_of_len(char *buf, size_t len, char c)
{
    memset(buf, c, len);
    buf[len] = '\0';
}

/* ------------------------------------------------------------------------ */
/* Inputs                                                                   */

START_TEST(test_input_regular_only)
{
    put("in.bin", "data", 0644);
    int fd = -1;
    ck_assert_int_eq(kv_file_open_input("in.bin", &fd), KV_OK);
    char b[8];
    ck_assert_int_eq(read(fd, b, sizeof b), 4); /* blocking mode again, reads */
    ck_assert_int_eq(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
    close(fd);

    /* a FIFO without a writer: refused at once, never waited on */
    ck_assert_int_eq(mkfifo("fifo", 0644), 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ck_assert_int_eq(kv_file_open_input("fifo", &fd), KV_ERR_IO);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ck_assert(t1.tv_sec - t0.tv_sec < 5); /* a blocking open would never return */
    ck_assert_ptr_nonnull(strstr(kv_file_why(), "FIFO"));
    ck_assert_int_eq(symlink("fifo", "fifo.link"), 0);
    ck_assert_int_eq(kv_file_open_input("fifo.link", &fd), KV_ERR_IO);
    ck_assert_int_eq(kv_file_open_input("/dev/null", &fd), KV_ERR_IO);
    ck_assert_ptr_nonnull(strstr(kv_file_why(), "character device"));
    ck_assert_int_eq(kv_file_open_input(".", &fd), KV_ERR_IO);
    ck_assert_ptr_nonnull(strstr(kv_file_why(), "directory"));
    ck_assert_int_eq(kv_file_open_input("missing", &fd), KV_ERR_IO);
    ck_assert_ptr_nonnull(strstr(kv_file_why(), strerror(ENOENT)));
    ck_assert_int_eq(kv_file_open_input("", &fd), KV_ERR_IO);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Output targets                                                           */

START_TEST(test_output_targets)
{
    char name[NAME_MAX + 2];
    /* can be written */
    ck_assert_int_eq(kv_file_check_output("new.csv", KV_FILE_PARENT_EXISTS), KV_OK);
    put("old.csv", "old", 0644);
    ck_assert_int_eq(kv_file_check_output("old.csv", KV_FILE_PARENT_EXISTS), KV_OK);
    ck_assert_int_eq(symlink("old.csv", "old.link"), 0);
    ck_assert_int_eq(kv_file_check_output("old.link", KV_FILE_PARENT_EXISTS), KV_OK);
    name_of_len(name, NAME_MAX, 'n');
    ck_assert_int_eq(kv_file_check_output(name, KV_FILE_PARENT_EXISTS), KV_OK);
    ck_assert_int_eq(kv_file_check_output("sub/x.csv", KV_FILE_PARENT_MKDIR), KV_OK);

    /* the target itself is refused: KV_ERR_INVALID */
    ck_assert_int_eq(mkfifo("fifo", 0644), 0);
    int dev = make_chardev();
    ck_assert_int_eq(symlink("fifo", "fifo.link"), 0);
    ck_assert_int_eq(symlink("nowhere", "dangling"), 0);
    ck_assert_int_eq(mkdir("adir", 0755), 0);
    put("ro.csv", "ro", 0444);
    static const char *const refused[] = {"",        "fifo",   "fifo.link", "chardev",
                                          "chardev.link", "adir", "newdir/", "adir/..",
                                          "dangling", "ro.csv"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        if (!dev && strncmp(refused[i], "chardev", 7) == 0)
            continue;
        ck_assert_msg(kv_file_check_output(refused[i], KV_FILE_PARENT_MKDIR) == KV_ERR_INVALID,
                      "'%s' accepted (%s)", refused[i], kv_file_why());
    }
    name_of_len(name, NAME_MAX + 1, 'n');
    ck_assert_int_eq(kv_file_check_output(name, KV_FILE_PARENT_EXISTS), KV_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(kv_file_why(), "longer than"));
    ck_assert_int_eq(kv_file_check_output("ro.csv", KV_FILE_PARENT_EXISTS), KV_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(kv_file_why(), "read-only"));
    /* nothing was replaced, created or left behind */
    struct stat st;
    if (dev) {
        ck_assert_int_eq(lstat("chardev.link", &st), 0);
        ck_assert(S_ISLNK(st.st_mode));
        ck_assert_int_eq(lstat("chardev", &st), 0);
        ck_assert(S_ISCHR(st.st_mode));
    }
    ck_assert_int_eq(stat("fifo", &st), 0);
    ck_assert(S_ISFIFO(st.st_mode));
    ck_assert(same_text("ro.csv", "ro"));
    ck_assert_int_eq(count_names("probe"), 0);
    ck_assert_int_eq(count_names(".tmp."), 0);
    ck_assert_int_eq(access("sub", F_OK), -1); /* checking creates nothing */

    /* its directory cannot take it: KV_ERR_IO */
    ck_assert_int_eq(kv_file_check_output("no/such/x.csv", KV_FILE_PARENT_MKDIR), KV_ERR_IO);
    ck_assert_int_eq(kv_file_check_output("sub/x.csv", KV_FILE_PARENT_EXISTS), KV_ERR_IO);
    ck_assert_int_eq(kv_file_check_output("old.csv/x.csv", KV_FILE_PARENT_MKDIR), KV_ERR_IO);
    ck_assert_int_eq(kv_file_check_output("/proc/kvlab-check.csv", KV_FILE_PARENT_EXISTS),
                     KV_ERR_IO);
}
END_TEST

START_TEST(test_same_file)
{
    ck_assert(kv_file_same("a.bin", "a.bin"));
    ck_assert(kv_file_same("a.bin", "./a.bin")); /* neither exists yet */
    ck_assert_int_eq(mkdir("d", 0755), 0);
    ck_assert(kv_file_same("a.bin", "d/../a.bin"));
    char abs[PATH_MAX + 8];
    snprintf(abs, sizeof abs, "%s/a.bin", dir);
    ck_assert(kv_file_same("a.bin", abs));
    put("a.bin", "x", 0644);
    ck_assert_int_eq(symlink("a.bin", "link.bin"), 0);
    ck_assert_int_eq(link("a.bin", "hard.bin"), 0);
    ck_assert(kv_file_same("link.bin", "a.bin"));
    ck_assert(kv_file_same("hard.bin", "./a.bin"));
    ck_assert(kv_file_same("d/../link.bin", "hard.bin"));
    ck_assert(!kv_file_same("a.bin", "b.bin"));
    ck_assert(!kv_file_same("d/a.bin", "a.bin"));
    ck_assert(!kv_file_same(NULL, "a.bin"));
    ck_assert(!kv_file_same("a.bin", NULL));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The temporary-file creator                                               */

static enum kv_status write_text(const char *path, const char *text)
{
    FILE *f;
    char *tmp;
    enum kv_status s = kv_file_begin(path, &f, &tmp);
    if (s != KV_OK)
        return s;
    fputs(text, f);
    return kv_file_commit(f, tmp, path, 0);
}

START_TEST(test_commit_keeps_mode_and_links)
{
    mode_t um = umask(022);
    ck_assert_int_eq(write_text("new.txt", "one"), KV_OK);
    struct stat st;
    ck_assert_int_eq(stat("new.txt", &st), 0);
    ck_assert_uint_eq(st.st_mode & 07777, 0644); /* 0666 less the umask, not 0600 */
    put("kept.txt", "old", 0640);
    ck_assert_int_eq(write_text("kept.txt", "two"), KV_OK);
    ck_assert(same_text("kept.txt", "two"));
    ck_assert_int_eq(stat("kept.txt", &st), 0);
    ck_assert_uint_eq(st.st_mode & 07777, 0640); /* the replaced file's mode */
    /* through a link: the file it names is replaced, the link stays */
    ck_assert_int_eq(mkdir("real", 0755), 0);
    put("real/t.txt", "old", 0600);
    ck_assert_int_eq(symlink("real/t.txt", "t.link"), 0);
    ck_assert_int_eq(write_text("t.link", "three"), KV_OK);
    ck_assert_int_eq(lstat("t.link", &st), 0);
    ck_assert(S_ISLNK(st.st_mode));
    ck_assert(same_text("real/t.txt", "three"));
    ck_assert_int_eq(stat("real/t.txt", &st), 0);
    ck_assert_uint_eq(st.st_mode & 07777, 0600);
    /* a name at NAME_MAX: the temporary's name is shortened, it fits */
    char name[NAME_MAX + 1];
    name_of_len(name, NAME_MAX, 'm');
    ck_assert_int_eq(write_text(name, "four"), KV_OK);
    ck_assert(same_text(name, "four"));
    ck_assert_int_eq(count_names(".tmp."), 0);
    umask(um);
}
END_TEST

START_TEST(test_commit_refuses_and_cleans_up)
{
    put("keep.txt", "old", 0644);
    FILE *f;
    char *tmp;
    ck_assert_int_eq(kv_file_begin("keep.txt", &f, &tmp), KV_OK);
    ck_assert_ptr_nonnull(strstr(tmp, "keep.txt.tmp."));
    fputs("half", f);
    ck_assert_int_eq(kv_file_commit(f, tmp, "keep.txt", 1), KV_ERR_IO); /* failed run */
    ck_assert(same_text("keep.txt", "old"));
    ck_assert_int_eq(count_names(".tmp."), 0);
    /* targets the writer must never replace, even without the check */
    ck_assert_int_eq(mkfifo("fifo", 0644), 0);
    int dev = make_chardev();
    ck_assert_int_eq(mkdir("adir", 0755), 0);
    static const char *const never[] = {"fifo", "chardev", "chardev.link", "adir", "x/", ""};
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++) {
        if (!dev && strncmp(never[i], "chardev", 7) == 0)
            continue;
        ck_assert_msg(kv_file_begin(never[i], &f, &tmp) == KV_ERR_INVALID, "'%s'", never[i]);
    }
    ck_assert_int_eq(kv_file_begin("missing/x.txt", &f, &tmp), KV_ERR_IO);
    struct stat st;
    if (dev) {
        ck_assert_int_eq(lstat("chardev", &st), 0);
        ck_assert(S_ISCHR(st.st_mode));
    }
    ck_assert_int_eq(count_names(".tmp."), 0);
}
END_TEST

/* The temporary name is not predictable: a link planted where the old
 * writer put its temporary (NAME.tmp.PID) is never followed, so the file it
 * points to stays untouched. */
START_TEST(test_planted_link_not_followed)
{
    put("victim.txt", "precious", 0644);
    char planted[64];
    snprintf(planted, sizeof planted, "out.csv.tmp.%ld", (long)getpid());
    ck_assert_int_eq(symlink("victim.txt", planted), 0);
    struct kv_csv_writer *w;
    static const char *const cols[] = {"a", "b"};
    ck_assert_int_eq(kv_csv_writer_create(&w), KV_OK);
    ck_assert_int_eq(kv_csv_writer_set_header(w, cols, 2), KV_OK);
    ck_assert_int_eq(kv_csv_writer_add_row(w, "1,2"), KV_OK);
    ck_assert_int_eq(kv_csv_writer_write(w, "out.csv"), KV_OK);
    kv_csv_writer_destroy(w);
    ck_assert(same_text("victim.txt", "precious"));
    ck_assert(same_text("out.csv", "a,b\n1,2\n"));
    struct stat st;
    ck_assert_int_eq(lstat(planted, &st), 0);
    ck_assert(S_ISLNK(st.st_mode)); /* not ours: left alone */
}
END_TEST

START_TEST(test_pending_removed)
{
    FILE *f1, *f2;
    char *t1, *t2;
    ck_assert_int_eq(kv_file_begin("a.bin", &f1, &t1), KV_OK);
    ck_assert_int_eq(kv_file_begin("b.bin", &f2, &t2), KV_OK);
    ck_assert_int_eq(count_names(".tmp."), 2);
    kv_file_remove_pending(); /* what the SIGINT/SIGTERM handler calls */
    ck_assert_int_eq(count_names(".tmp."), 0);
    ck_assert_int_eq(access("a.bin", F_OK), -1);
    /* committing afterwards fails cleanly: the temporary is gone */
    ck_assert_int_eq(kv_file_commit(f1, t1, "a.bin", 0), KV_ERR_IO);
    ck_assert_int_eq(kv_file_commit(f2, t2, "b.bin", 1), KV_ERR_IO);
    ck_assert_int_eq(access("a.bin", F_OK), -1);
    /* a committed file is no longer pending */
    ck_assert_int_eq(write_text("c.bin", "c"), KV_OK);
    kv_file_remove_pending();
    ck_assert(same_text("c.bin", "c"));
}
END_TEST

START_TEST(test_resolve)
{
    char buf[PATH_MAX], want[PATH_MAX + 32];
    ck_assert_int_eq(mkdir("d", 0755), 0);
    ck_assert_int_eq(symlink("d", "dl"), 0);
    ck_assert_int_eq(kv_file_resolve("dl/new/x.csv", buf, sizeof buf), KV_OK);
    char real[PATH_MAX];
    ck_assert_ptr_nonnull(realpath(dir, real)); /* /tmp may itself be a link */
    snprintf(want, sizeof want, "%s/d/new/x.csv", real);
    ck_assert_str_eq(buf, want);
    ck_assert_int_eq(kv_file_resolve("x", buf, sizeof buf), KV_OK);
    snprintf(want, sizeof want, "%s/x", real);
    ck_assert_str_eq(buf, want);
    ck_assert_int_eq(kv_file_resolve("/", buf, sizeof buf), KV_OK);
    ck_assert_str_eq(buf, "/");
    ck_assert_int_eq(kv_file_resolve("", buf, sizeof buf), KV_ERR_INVALID);
    ck_assert_int_eq(kv_file_resolve("x", buf, 3), KV_ERR_OVERFLOW);
    ck_assert_int_eq(symlink("nowhere", "dangling"), 0);
    ck_assert_int_eq(kv_file_resolve("dangling", buf, sizeof buf), KV_ERR_IO);
}
END_TEST

static Suite *files_suite(void)
{
    Suite *s = suite_create("files");
    TCase *tc = tcase_create("inputs");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_input_regular_only);
    suite_add_tcase(s, tc);
    tc = tcase_create("outputs");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_output_targets);
    tcase_add_test(tc, test_same_file);
    tcase_add_test(tc, test_resolve);
    suite_add_tcase(s, tc);
    tc = tcase_create("temporary_files");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_commit_keeps_mode_and_links);
    tcase_add_test(tc, test_commit_refuses_and_cleans_up);
    tcase_add_test(tc, test_planted_link_not_followed);
    tcase_add_test(tc, test_pending_removed);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(files_suite());
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed;
}
