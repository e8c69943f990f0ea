/*
 * csv_read.h - a strict, bounded reader for the CSV files kvlab writes
 * (sweep results): `# key=value` metadata lines, one header line, then one
 * row per line.
 *
 * The design decision that matters: the whole file is read into one buffer
 * (at most KV_CSV_MAX_FILE bytes) and split in place, so a cell is a pointer
 * into that buffer and a parsed file costs a fixed handful of allocations
 * whatever its size. Every limit is checked before it can bite: a line longer than
 * KV_CSV_MAX_LINE, a NUL or other control byte (a binary file), a row whose
 * field count differs from the header's, more than KV_CSV_MAX_COLS columns.
 * The first problem found is reported as "FILE:LINE: reason" in a caller's
 * buffer (one line, no newline, cell text quoted and cut short), and the
 * reader returns KV_ERR_FORMAT (KV_ERR_IO when the file cannot be read).
 *
 * Accepted syntax (a superset of what `kvlab sweep` writes):
 * - lines end in "\n" or "\r\n"; the last line may lack its newline (the
 *   reader records it: kv_csv.unterminated, so a reader of files kvlab
 *   wrote, which always end in a newline, can refuse a truncated one);
 * - blank lines (only spaces/tabs) are skipped anywhere;
 * - a line whose first non-blank byte is '#' is a comment; when it reads
 *   `# key=value` (key of letters, digits, '_', '.', '-') it is metadata.
 *   Comments may appear anywhere, as pandas' comment='#' allows; a key may
 *   appear only once;
 * - the first other line is the header: unique, non-empty column names;
 * - fields are separated by ',', surrounding spaces/tabs are trimmed; a
 *   field may be quoted ("a, b" with "" for a quote) but may not span lines.
 */
#ifndef KV_CSV_READ_H
#define KV_CSV_READ_H

#include <stddef.h>
#include <stdint.h>

#include "../../kernels/kv_common.h"

/* ------------------------------------------------------------------------ */
/* Limits                                                                   */

#define KV_CSV_MAX_LINE 65536               /* bytes per line, without "\r\n" */
#define KV_CSV_MAX_FILE (16u * 1024u * 1024u) /* bytes per file */
#define KV_CSV_MAX_COLS 4096                /* columns in the header */
#define KV_CSV_ERR_LEN 512                  /* a comfortable error buffer size */

/* ------------------------------------------------------------------------ */
/* A parsed file (read-only for users; made by kv_csv_parse/read_file)      */

struct kv_csv_meta {
    const char *key;   /* as written, e.g. "read_gbps" */
    const char *value; /* trimmed, possibly empty */
    int64_t line;      /* 1-based line number in the file */
};

struct kv_csv {
    char *name;                /* file name used in messages (owned copy) */
    int32_t n_cols;
    const char **cols;         /* (n_cols) column names */
    int64_t header_line;       /* line number of the header */
    int64_t n_rows;
    const char **cells;        /* (n_rows, n_cols) cell text, row-major */
    int64_t *row_line;         /* (n_rows) line number of each row */
    int32_t n_meta;
    struct kv_csv_meta *meta;  /* (n_meta) in file order */
    int64_t unterminated;      /* number of the last line when it has no newline
                                  (a cut file, if kvlab wrote it), else 0 */
    char *buf;                 /* the file's bytes, split in place (owned) */
};

/*
 * Parses `len` bytes of `data` (need not be NUL-terminated; copied) into a
 * new kv_csv. `name` is used in error messages. On failure *out is NULL,
 * nothing is leaked and `err` (if not NULL) holds "NAME:LINE: reason".
 * Returns KV_OK, KV_ERR_FORMAT, KV_ERR_NOMEM or KV_ERR_INVALID (NULL args).
 */
enum kv_status kv_csv_parse(struct kv_csv **out, const char *data, size_t len,
                            const char *name, char *err, size_t err_len);

/* What messages call standard input (path "-"). */
#define KV_CSV_STDIN_NAME "(stdin)"

/* Reads and parses a file: path "-" reads standard input (a pipe, a
 * terminal: whatever it is); any other path must be a regular file
 * (kv_file_open_input: a FIFO, device or directory is refused, never waited
 * on). KV_ERR_IO (with the reason) when it cannot be opened or read,
 * KV_ERR_FORMAT when it is larger than KV_CSV_MAX_FILE. A UTF-8 byte-order
 * mark at the start of the data is skipped (kv_csv_parse too). */
enum kv_status kv_csv_read_file(struct kv_csv **out, const char *path,
                                char *err, size_t err_len);

void kv_csv_destroy(struct kv_csv *c);

/* Index of the column called `name`, or -1. */
int32_t kv_csv_col(const struct kv_csv *c, const char *name);

/* Cell text of row r, column j (both in range). */
const char *kv_csv_cell(const struct kv_csv *c, int64_t r, int32_t j);

/* The metadata entry for `key`, or NULL. */
const struct kv_csv_meta *kv_csv_meta_find(const struct kv_csv *c, const char *key);

/*
 * Strict number parsing for cells: the whole text must be a decimal number
 * ([+-]digits[.digits][e[+-]digits]) or nan/inf/infinity (any case, signed).
 * No hex, no spaces, no empty string. Returns 0 and sets *out, or -1.
 */
int kv_csv_parse_double(const char *s, double *out);
/* A decimal integer that fits int64_t (no sign other than '-'/'+'). */
int kv_csv_parse_int64(const char *s, int64_t *out);

/*
 * Formats "NAME:LINE: reason" (or "NAME: reason" when line <= 0) into err,
 * with every control byte replaced by '?', so the message is one line.
 * Does nothing when err is NULL or err_len is 0.
 */
__attribute__((format(printf, 5, 6)))
void kv_csv_error(char *err, size_t err_len, const char *name, int64_t line,
                  const char *fmt, ...);

/*
 * Writes at most `n` bytes of `s` into `dst` (size dst_len) as a printable,
 * single-line excerpt: kv_text_quote (control bytes escaped as \n, \xNN,
 * "..." appended when cut). Used to quote user text in error messages.
 */
void kv_csv_excerpt(char *dst, size_t dst_len, const char *s, size_t n);

#endif /* KV_CSV_READ_H */
