/*
 * file_check.h - what kvlab checks about a file before it reads or writes
 * it: inputs are opened without ever blocking and must be regular files;
 * output targets are judged up front, before any work, so a run never
 * fails at its end because of where it writes.
 *
 * The design decision: both checks compare files by what a path finally
 * names (kv_file_resolve: symbolic links, "..", the current directory
 * resolved), and by device and inode where the file exists, never by the
 * string given. "./a.bin", "dir/../a.bin" and a link to a.bin are one file.
 *
 * Why a check failed is a sentence in a thread-local buffer, kv_file_why(),
 * so loaders that return only a status code (checkpoint, tokenizer) can
 * still tell the CLI "is a FIFO, not a regular file".
 */
#ifndef KV_FILE_CHECK_H
#define KV_FILE_CHECK_H

#include <stddef.h>

#include "../../kernels/kv_common.h"

/*
 * Opens path read-only with O_NONBLOCK (so a FIFO without a writer cannot
 * hang the open), then fstat()s it: anything but a regular file (directory,
 * FIFO, socket, character or block device) is closed again and refused. On
 * KV_OK *fd is open (blocking again, close-on-exec). KV_ERR_IO otherwise,
 * with kv_file_why() saying why.
 */
enum kv_status kv_file_open_input(const char *path, int *fd);

/* What the last failing kv_file_* check or loader of this thread found
 * wrong ("is a FIFO, not a regular file"); "" when nothing was recorded. */
const char *kv_file_why(void);

/* Records why (printf-style) for kv_file_why(); loaders call it. */
void kv_file_set_why(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* How an output target may be created. */
enum kv_file_parent {
    KV_FILE_PARENT_EXISTS = 0, /* its directory must exist */
    KV_FILE_PARENT_MKDIR = 1,  /* the writer creates one missing directory level */
};

/*
 * Decides, without writing anything, whether `path` can be replaced
 * atomically by kv_file_begin/kv_file_commit:
 *   KV_ERR_INVALID (the target itself is refused): an empty name, a name
 *     ending in '/', a final name longer than NAME_MAX or a path longer than
 *     PATH_MAX, a dangling symbolic link, an existing target that is not a
 *     regular file (directory, FIFO, device, socket, also through a link),
 *     or an existing regular file that is read-only (no write permission
 *     bit, or access(W_OK) refuses) - even for root;
 *   KV_ERR_IO (its directory cannot take the file): the directory is
 *     missing (beyond the one level KV_FILE_PARENT_MKDIR allows), not a
 *     directory, or a temporary file cannot be created in it (tried: the
 *     same mkstemp the writer uses, removed at once).
 * kv_file_why() says which. KV_OK when the write can go ahead.
 */
enum kv_status kv_file_check_output(const char *path, enum kv_file_parent parent);

/*
 * 1 when a and b name the same file: equal resolved paths, or two existing
 * paths with the same device and inode; 0 otherwise (also for NULL).
 */
int kv_file_same(const char *a, const char *b);

#endif /* KV_FILE_CHECK_H */
