/*
 * file_commit.c - the one temporary-file creator: mkstemp next to the
 * resolved target, the target's mode kept, fsync, rename, directory fsync,
 * and a registry of live temporaries for the signal handler (see
 * file_commit.h).
 */
#include "file_commit.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Resolving the target                                                     */

enum kv_status kv_file_resolve(const char *path, char *buf, size_t cap)
{
    if (path == NULL || path[0] == '\0')
        return KV_ERR_INVALID;
    size_t n = strlen(path);
    if (n >= PATH_MAX)
        return KV_ERR_OVERFLOW;
    char real[PATH_MAX], prefix[PATH_MAX];
    if (realpath(path, real) != NULL) {
        if (strlen(real) >= cap)
            return KV_ERR_OVERFLOW;
        snprintf(buf, cap, "%s", real);
        return KV_OK;
    }
    struct stat st;
    if (lstat(path, &st) == 0)
        return KV_ERR_IO; /* exists but does not resolve: a dangling link */
    /* The longest existing prefix ending before a '/', then the rest as is. */
    for (size_t k = n; k-- > 0;) {
        if (path[k] != '/')
            continue;
        const char *rest = path + k;         /* "/name..." */
        if (k == 0) {
            snprintf(real, sizeof real, "/");
        } else {
            memcpy(prefix, path, k);
            prefix[k] = '\0';
            if (realpath(prefix, real) == NULL) {
                if (lstat(prefix, &st) == 0)
                    return KV_ERR_IO; /* dangling, or not a directory */
                continue;
            }
        }
        size_t rl = strlen(real);
        if (rl == 1) /* "/" */
            rl = 0;
        if (rl + strlen(rest) >= cap)
            return KV_ERR_OVERFLOW;
        snprintf(buf, cap, "%.*s%s", (int)rl, real, rest);
        return KV_OK;
    }
    /* No '/': a name in the current directory. */
    if (getcwd(real, sizeof real) == NULL)
        return KV_ERR_IO;
    size_t rl = strlen(real);
    if (rl == 1)
        rl = 0;
    if (rl + 1 + n >= cap)
        return KV_ERR_OVERFLOW;
    snprintf(buf, cap, "%.*s/%s", (int)rl, real, path);
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* Registry of live temporary files (for the signal handler)                */

#define PENDING_MAX 8
static char pending[PENDING_MAX][PATH_MAX];
static volatile sig_atomic_t pending_used[PENDING_MAX];

static void pending_add(const char *name)
{
    for (int i = 0; i < PENDING_MAX; i++) {
        if (!pending_used[i]) {
            snprintf(pending[i], sizeof pending[i], "%s", name);
            pending_used[i] = 1;
            return;
        }
    }
    /* more than PENDING_MAX at once: this one is not removed on a signal */
}

static void pending_drop(const char *name)
{
    for (int i = 0; i < PENDING_MAX; i++) {
        if (pending_used[i] && strcmp(pending[i], name) == 0) {
            pending_used[i] = 0;
            return;
        }
    }
}

void kv_file_remove_pending(void)
{
    for (int i = 0; i < PENDING_MAX; i++) {
        if (pending_used[i]) {
            unlink(pending[i]);
            pending_used[i] = 0;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Begin                                                                    */

/* The mode a newly created file gets (0666 less the umask). */
static mode_t new_file_mode(void)
{
    mode_t um = umask(0);
    umask(um);
    return (mode_t)(0666 & ~um);
}

/* Resolves path into target and checks that it may be replaced: a regular
 * file or nothing yet, and not a name ending in '/'. */
static enum kv_status target_of(const char *path, char target[PATH_MAX], struct stat *st,
                                int *exists)
{
    if (path == NULL || path[0] == '\0' || path[strlen(path) - 1] == '/')
        return KV_ERR_INVALID;
    enum kv_status s = kv_file_resolve(path, target, PATH_MAX);
    if (s != KV_OK)
        return s == KV_ERR_IO ? KV_ERR_INVALID : s;
    *exists = stat(target, st) == 0;
    if (*exists && !S_ISREG(st->st_mode))
        return KV_ERR_INVALID; /* never replace a directory, FIFO or device */
    return KV_OK;
}

enum kv_status kv_file_begin(const char *path, FILE **f, char **tmp)
{
    char target[PATH_MAX];
    struct stat st;
    int exists = 0;
    enum kv_status s = target_of(path, target, &st, &exists);
    if (s != KV_OK)
        return s;
    const char *slash = strrchr(target, '/'); /* absolute: always there */
    size_t dlen = (size_t)(slash - target), blen = strlen(slash + 1);
    if (blen > KV_FILE_TMP_PREFIX)
        blen = KV_FILE_TMP_PREFIX;
    size_t need = dlen + 1 + blen + sizeof ".tmp.XXXXXX";
    if (need > PATH_MAX)
        return KV_ERR_OVERFLOW;
    char *name = kv_alloc(need);
    if (name == NULL)
        return KV_ERR_NOMEM;
    snprintf(name, need, "%.*s/%.*s.tmp.XXXXXX", (int)dlen, target, (int)blen, slash + 1);
    int fd = mkstemp(name); /* O_CREAT | O_EXCL: never opens what is there */
    if (fd < 0) {
        int e = errno;
        kv_free(name);
        errno = e;
        return KV_ERR_IO;
    }
    pending_add(name);
    int ok = fcntl(fd, F_SETFD, FD_CLOEXEC) == 0;
    if (exists) {
        if (geteuid() == 0) /* keep a replaced file's owner; best effort */
            (void)fchown(fd, st.st_uid, st.st_gid);
        ok = ok && fchmod(fd, st.st_mode & 07777) == 0;
    } else {
        ok = ok && fchmod(fd, new_file_mode()) == 0;
    }
    FILE *stream = ok ? fdopen(fd, "wb") : NULL;
    if (stream == NULL) {
        int e = errno;
        close(fd);
        unlink(name);
        pending_drop(name);
        kv_free(name);
        errno = e;
        return KV_ERR_IO;
    }
    *f = stream;
    *tmp = name;
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* Commit                                                                   */

/* fsync the directory holding path, so the rename itself is durable. */
static void sync_dir_of(const char *path)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (slash == NULL)
        snprintf(dir, sizeof(dir), ".");
    else if (slash == path)
        snprintf(dir, sizeof(dir), "/");
    else
        snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd); /* best effort: some filesystems refuse */
        close(fd);
    }
}

enum kv_status kv_file_commit(FILE *f, char *tmp, const char *path, int failed)
{
    int err = failed != 0;
    if (fflush(f) != 0 || fsync(fileno(f)) != 0)
        err = 1;
    if (fclose(f) != 0)
        err = 1;
    char target[PATH_MAX];
    struct stat st;
    int exists = 0;
    if (!err && target_of(path, target, &st, &exists) != KV_OK)
        err = 1; /* the target became something that must not be replaced */
    if (!err) {
        /* the temporary must sit in the target's directory (rename(2) is
         * atomic only there); a link changed since kv_file_begin is refused */
        const char *ts = strrchr(target, '/'), *ps = strrchr(tmp, '/');
        err = ts == NULL || ps == NULL || ts - target != ps - tmp ||
              strncmp(target, tmp, (size_t)(ts - target)) != 0;
    }
    if (!err && rename(tmp, target) != 0)
        err = 1;
    int e = errno;
    if (err)
        unlink(tmp);
    else
        sync_dir_of(target);
    pending_drop(tmp);
    kv_free(tmp);
    errno = e;
    return err ? KV_ERR_IO : KV_OK;
}
