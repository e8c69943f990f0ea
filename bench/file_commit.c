/*
 * file_commit.c - temporary file, fsync, rename (see file_commit.h).
 */
#include "file_commit.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Begin                                                                    */

/* The mode a newly created file gets (0666 less the umask): mkstemp makes
 * its file 0600, which the rename would otherwise carry over. */
static mode_t new_file_mode(void)
{
    mode_t um = umask(0);
    umask(um);
    return (mode_t)(0666 & ~um);
}

enum kv_status kv_file_begin(const char *path, FILE **f, char **tmp)
{
    size_t plen = strlen(path);
    char *name = plen > SIZE_MAX - 16 ? NULL : kv_alloc(plen + 16);
    if (name == NULL)
        return KV_ERR_NOMEM;
    snprintf(name, plen + 16, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(name);
    FILE *s = fd >= 0 && fchmod(fd, new_file_mode()) == 0 ? fdopen(fd, "wb") : NULL;
    if (s == NULL) {
        if (fd >= 0) {
            close(fd);
            unlink(name);
        }
        kv_free(name);
        return KV_ERR_IO;
    }
    *f = s;
    *tmp = name;
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* Commit                                                                   */

enum kv_status kv_file_commit(FILE *f, char *tmp, const char *path, int failed)
{
    int err = failed != 0;
    if (fflush(f) != 0 || fsync(fileno(f)) != 0)
        err = 1;
    if (fclose(f) != 0)
        err = 1;
    if (!err && rename(tmp, path) != 0)
        err = 1;
    if (err)
        unlink(tmp);
    kv_free(tmp);
    return err ? KV_ERR_IO : KV_OK;
}
