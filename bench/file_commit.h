/*
 * file_commit.h - replace a file atomically: write a temporary file next to
 * it, fsync, rename it over the target. Used by the checkpoint and
 * tokenizer exporters, which write through stdio.
 *
 * The design decision: the temporary file is made by mkstemp (a unique name,
 * path.tmp.XXXXXX, so two writers never share it) and given the mode a new
 * file would get (0666 less the umask), because mkstemp's 0600 would
 * otherwise survive the rename. A failed write leaves the target untouched
 * and removes the temporary file. The CSV writer (csv_write.c) keeps its own
 * sequence on purpose: it writes a raw fd, names its temporary by pid, makes
 * it 0644, and also fsyncs the directory.
 */
#ifndef KV_FILE_COMMIT_H
#define KV_FILE_COMMIT_H

#include <stdio.h>

#include "../kernels/kv_common.h"

/*
 * Opens a new temporary file next to path for writing ("wb"). On KV_OK,
 * *f is the open stream and *tmp its name (kv_alloc'd); pass both to
 * kv_file_commit. KV_ERR_NOMEM, or KV_ERR_IO when the file cannot be made.
 */
enum kv_status kv_file_begin(const char *path, FILE **f, char **tmp);

/*
 * Flushes, fsyncs and closes f, then renames tmp over path, unless `failed`
 * is nonzero or one of those steps fails: then tmp is removed and the
 * target is left as it was. Frees tmp. KV_OK, or KV_ERR_IO.
 */
enum kv_status kv_file_commit(FILE *f, char *tmp, const char *path, int failed);

#endif /* KV_FILE_COMMIT_H */
