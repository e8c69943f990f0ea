/*
 * csv_write.h - a result file that is never torn: metadata lines, a header
 * and rows are collected in memory and written in one go to a temporary
 * file next to PATH (file_commit.h: mkstemp, the replaced file's mode
 * kept), flushed to disk (fsync), then renamed over PATH.
 *
 * The one design decision: nothing reaches PATH until the file is
 * complete. A run that is interrupted writes the rows it finished with
 * `# partial=1` (the caller sets that key); a run that is killed outright
 * leaves the previous PATH untouched. Readers (gnuplot, pandas with
 * comment='#', kvlab compare) see either a whole old file or a whole new one.
 *
 * File layout:
 *     # kvlab sweep          <- a bare tag line (key with no value)
 *     # schema=1             <- `# key=value`, one per line, in insertion order
 *     ...
 *     strategy,layers,...    <- header
 *     dynamic,4,...          <- rows
 */
#ifndef KV_CSV_WRITE_H
#define KV_CSV_WRITE_H

#include "../../kernels/kv_common.h"

struct kv_csv_writer;

enum kv_status kv_csv_writer_create(struct kv_csv_writer **out);
void kv_csv_writer_destroy(struct kv_csv_writer *w);

/*
 * Sets metadata `key` to `value`, replacing an earlier value of the same key
 * in place (so `partial` keeps its position), else appending. value NULL
 * writes a bare `# key` line. Newlines in either become spaces; a key may
 * not contain '='.
 */
enum kv_status kv_csv_writer_set_meta(struct kv_csv_writer *w, const char *key,
                                      const char *value);
/* Same, with a printf-style value. */
enum kv_status kv_csv_writer_set_metaf(struct kv_csv_writer *w, const char *key,
                                       const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The column names, in order (copied). Must be called before any row. */
enum kv_status kv_csv_writer_set_header(struct kv_csv_writer *w, const char *const *names,
                                        int32_t n);

/*
 * Appends one row given as an already formatted line without the newline.
 * KV_ERR_INVALID if it has not exactly as many fields as the header or
 * contains a newline.
 */
enum kv_status kv_csv_writer_add_row(struct kv_csv_writer *w, const char *line);
int32_t kv_csv_writer_row_count(const struct kv_csv_writer *w);
/* Drops every row (metadata and header stay). */
void kv_csv_writer_clear_rows(struct kv_csv_writer *w);

/*
 * Writes the whole file to a temporary file next to path, fsyncs it,
 * renames it to path and fsyncs the directory. KV_ERR_IO (and the temporary
 * removed) on any failure; path is then unchanged. It writes a file without
 * rows too (metadata and header); a command that must not replace earlier
 * results with an empty run checks kv_csv_writer_row_count first (sweep).
 */
enum kv_status kv_csv_writer_write(const struct kv_csv_writer *w, const char *path);

#endif /* KV_CSV_WRITE_H */
