/*
 * file_check.c - non-blocking input opens and up-front output checks (see
 * file_check.h).
 */
#include "file_check.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file_commit.h"

/* ------------------------------------------------------------------------ */
/* Why                                                                      */

static _Thread_local char why_buf[512];

const char *kv_file_why(void) { return why_buf; }

void kv_file_set_why(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why_buf, sizeof why_buf, fmt, ap);
    va_end(ap);
}

/* "a directory", "a FIFO", ... for a file type that is not regular. */
static const char *kind_of(mode_t m)
{
    if (S_ISDIR(m))
        return "a directory";
    if (S_ISFIFO(m))
        return "a FIFO (named pipe)";
    if (S_ISCHR(m))
        return "a character device";
    if (S_ISBLK(m))
        return "a block device";
    if (S_ISSOCK(m))
        return "a socket";
    return "not a regular file";
}

/* ------------------------------------------------------------------------ */
/* Inputs                                                                   */

enum kv_status kv_file_open_input(const char *path, int *fd_out)
{
    why_buf[0] = '\0';
    if (path == NULL || path[0] == '\0') {
        kv_file_set_why("no file name");
        return KV_ERR_IO;
    }
    /* O_NONBLOCK: opening a FIFO that has no writer returns at once
     * instead of waiting for one; the fstat below then refuses it. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        kv_file_set_why("%s", strerror(errno));
        return KV_ERR_IO;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        kv_file_set_why("%s", strerror(errno));
        close(fd);
        return KV_ERR_IO;
    }
    if (!S_ISREG(st.st_mode)) {
        kv_file_set_why("is %s, not a regular file", kind_of(st.st_mode));
        close(fd);
        return KV_ERR_IO;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    *fd_out = fd;
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* Outputs                                                                  */

/* Creates and removes a temporary file in dir: can the writer make one? */
static int probe_dir(const char *dir)
{
    char name[PATH_MAX];
    int n = snprintf(name, sizeof name, "%s/.kvlab-probe.XXXXXX", dir);
    if (n < 0 || (size_t)n >= sizeof name)
        return -1;
    int fd = mkstemp(name);
    if (fd < 0)
        return -1;
    close(fd);
    unlink(name);
    return 0;
}

enum kv_status kv_file_check_output(const char *path, enum kv_file_parent parent)
{
    why_buf[0] = '\0';
    if (path == NULL || path[0] == '\0') {
        kv_file_set_why("expects a file name");
        return KV_ERR_INVALID;
    }
    size_t n = strlen(path);
    if (path[n - 1] == '/') {
        kv_file_set_why("ends in '/': a directory, not a file name");
        return KV_ERR_INVALID;
    }
    const char *base = strrchr(path, '/');
    base = base != NULL ? base + 1 : path;
    if (strlen(base) > NAME_MAX) {
        kv_file_set_why("its file name is longer than %d bytes", NAME_MAX);
        return KV_ERR_INVALID;
    }
    if (n >= PATH_MAX) {
        kv_file_set_why("the path is longer than %d bytes", PATH_MAX - 1);
        return KV_ERR_INVALID;
    }
    if (strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
        kv_file_set_why("names a directory, not a file");
        return KV_ERR_INVALID;
    }
    char target[PATH_MAX];
    enum kv_status s = kv_file_resolve(path, target, sizeof target);
    if (s == KV_ERR_OVERFLOW) {
        kv_file_set_why("the resolved path is longer than %d bytes", PATH_MAX - 1);
        return KV_ERR_INVALID;
    }
    struct stat st;
    if (s != KV_OK) {
        if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
            kv_file_set_why("is a symbolic link to a missing file");
            return KV_ERR_INVALID;
        }
        kv_file_set_why("cannot write into its directory: a directory on its path is not "
                        "a directory");
        return KV_ERR_IO;
    }
    if (stat(target, &st) == 0) {
        if (!S_ISREG(st.st_mode)) {
            kv_file_set_why("is %s, not a regular file; kvlab replaces only regular files",
                            kind_of(st.st_mode));
            return KV_ERR_INVALID;
        }
        if ((st.st_mode & 0222) == 0 || access(target, W_OK) != 0) {
            kv_file_set_why("is read-only; make it writable or choose another name");
            return KV_ERR_INVALID;
        }
    }
    /* Its directory: must exist (or be one level the writer creates). */
    char dir[PATH_MAX];
    const char *slash = strrchr(target, '/'); /* target is absolute */
    if (slash == target)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - target), target);
    if (stat(dir, &st) != 0) {
        int missing_one = 0;
        if (parent == KV_FILE_PARENT_MKDIR) {
            char up[PATH_MAX];
            const char *s2 = strrchr(dir, '/');
            if (s2 == dir)
                snprintf(up, sizeof up, "/");
            else
                snprintf(up, sizeof up, "%.*s", (int)(s2 - dir), dir);
            missing_one = stat(up, &st) == 0 && S_ISDIR(st.st_mode);
            if (missing_one && probe_dir(up) != 0) {
                kv_file_set_why("cannot write into its directory: it does not exist and "
                                "cannot be created in '%s': %s", up, strerror(errno));
                return KV_ERR_IO;
            }
        }
        if (!missing_one) {
            kv_file_set_why("cannot write into its directory: it does not exist");
            return KV_ERR_IO;
        }
        return KV_OK;
    }
    if (!S_ISDIR(st.st_mode)) {
        kv_file_set_why("cannot write into its directory: a directory on its path is not "
                        "a directory");
        return KV_ERR_IO;
    }
    if (probe_dir(dir) != 0) {
        kv_file_set_why("cannot write into its directory: %s", strerror(errno));
        return KV_ERR_IO;
    }
    return KV_OK;
}

int kv_file_same(const char *a, const char *b)
{
    if (a == NULL || b == NULL)
        return 0;
    if (strcmp(a, b) == 0)
        return 1;
    char ra[PATH_MAX], rb[PATH_MAX];
    if (kv_file_resolve(a, ra, sizeof ra) == KV_OK &&
        kv_file_resolve(b, rb, sizeof rb) == KV_OK && strcmp(ra, rb) == 0)
        return 1;
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}
