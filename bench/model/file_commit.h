/*
 * file_commit.h - replace a file atomically: write a temporary file next to
 * it, fsync, rename it over the target, fsync the directory. Every result
 * file kvlab writes (sweep CSVs, checkpoints, tokenizers) goes through here:
 * this is the one temporary-file creator.
 *
 * The design decisions:
 * - The temporary file is made by mkstemp (O_CREAT|O_EXCL, mode 0600, a
 *   random suffix) in the target's own directory, so a name planted there in
 *   advance, symlink or not, is never opened or followed, and two writers
 *   never share one. Its name is at most KV_FILE_TMP_PREFIX bytes of the
 *   target's name plus ".tmp.XXXXXX", so it fits wherever the target's name
 *   fits (a 255-byte name gets a shorter temporary, not ENAMETOOLONG).
 * - A target that is a symbolic link is written through: the link's final
 *   target is replaced and the link kept. The temporary file then gets the
 *   mode (and, for root, the owner) of the file it replaces, or 0666 less
 *   the umask for a new file: mkstemp's 0600 would otherwise survive the
 *   rename.
 * - While a temporary file exists it is registered, so a fatal signal
 *   (kv_file_remove_pending, called from the CLI's signal handler) removes
 *   it before the process dies: an interrupted export leaves nothing behind.
 * A failed write leaves the target untouched and removes the temporary file.
 */
#ifndef KV_FILE_COMMIT_H
#define KV_FILE_COMMIT_H

#include <stdio.h>

#include "../../kernels/kv_common.h"

/* Bytes of the target's name kept at the front of a temporary file's name. */
#define KV_FILE_TMP_PREFIX 64

/*
 * Opens a new temporary file for writing ("wb") next to the file `path`
 * finally names (symbolic links resolved). On KV_OK, *f is the open stream
 * and *tmp its name (kv_alloc'd); pass both to kv_file_commit. KV_ERR_NOMEM;
 * KV_ERR_INVALID for an empty path, one ending in '/', or a dangling
 * symbolic link; KV_ERR_IO when the file cannot be made (errno says why).
 */
enum kv_status kv_file_begin(const char *path, FILE **f, char **tmp);

/*
 * Flushes, fsyncs and closes f, then renames tmp over the file path names
 * (symbolic links resolved again, as kv_file_begin did) and fsyncs its
 * directory, unless `failed` is nonzero or one of those steps fails: then
 * tmp is removed and the target is left as it was. Frees tmp. KV_OK, or
 * KV_ERR_IO.
 */
enum kv_status kv_file_commit(FILE *f, char *tmp, const char *path, int failed);

/*
 * Removes every registered temporary file (those between kv_file_begin and
 * kv_file_commit). Async-signal-safe: only unlink(2) on preformatted names.
 */
void kv_file_remove_pending(void);

/*
 * The file `path` finally names: realpath() of its longest existing prefix
 * with the missing rest appended ("out/new/x.csv" with out/ a link to
 * /data gives "/data/new/x.csv"). Into buf (cap bytes); KV_OK, KV_ERR_INVALID
 * for an empty path, KV_ERR_OVERFLOW when it does not fit, KV_ERR_IO when no
 * prefix resolves (a dangling link, a component that is not a directory).
 */
enum kv_status kv_file_resolve(const char *path, char *buf, size_t cap);

#endif /* KV_FILE_COMMIT_H */
