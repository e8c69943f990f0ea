/*
 * csv_write.c - collect metadata, header and rows in memory, then write
 * them atomically through file_commit.c (mkstemp next to the target, fsync,
 * rename, fsync of the directory).
 *
 * Storage is growable byte buffers (one per metadata line, the header, the
 * rows), all through kv_alloc, so failure injection reaches every path.
 * Each metadata entry is kept as its finished line ("# key" or
 * "# key=value"), so setting a key again replaces the line in place.
 */
#include "csv_write.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../model/file_commit.h"

/* ------------------------------------------------------------------------ */
/* Growable buffer                                                          */

struct buf {
    char *p;
    size_t len, cap;
};

static enum kv_status buf_reserve(struct buf *b, size_t extra)
{
    if (extra > SIZE_MAX - b->len - 1)
        return KV_ERR_OVERFLOW;
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return KV_OK;
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    char *p = kv_alloc(cap);
    if (p == NULL)
        return KV_ERR_NOMEM;
    if (b->len)
        memcpy(p, b->p, b->len);
    kv_free(b->p);
    b->p = p;
    b->cap = cap;
    return KV_OK;
}

static enum kv_status buf_add(struct buf *b, const char *s, size_t n)
{
    enum kv_status st = buf_reserve(b, n);
    if (st != KV_OK)
        return st;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return KV_OK;
}

/* Appends s with newlines and carriage returns replaced by spaces. */
static enum kv_status buf_add_line_safe(struct buf *b, const char *s)
{
    size_t n = strlen(s);
    enum kv_status st = buf_reserve(b, n);
    if (st != KV_OK)
        return st;
    for (size_t i = 0; i < n; i++)
        b->p[b->len + i] = (s[i] == '\n' || s[i] == '\r') ? ' ' : s[i];
    b->len += n;
    b->p[b->len] = '\0';
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* The writer                                                               */

/* Metadata lines: a sweep writes ~30; `kvlab merge` keeps a dozen per input
 * file, for up to KV_PLAN_MAX_ROWS (512) shards. */
#define MAX_META 8192

struct kv_csv_writer {
    struct buf meta[MAX_META]; /* each: "# key" or "# key=value" (no newline) */
    int32_t n_meta;
    struct buf header;         /* "a,b,c" */
    int32_t n_cols;
    struct buf rows;           /* "row\nrow\n" */
    int32_t n_rows;
};

enum kv_status kv_csv_writer_create(struct kv_csv_writer **out)
{
    *out = kv_alloc(sizeof(struct kv_csv_writer));
    return *out ? KV_OK : KV_ERR_NOMEM;
}

void kv_csv_writer_destroy(struct kv_csv_writer *w)
{
    if (w == NULL)
        return;
    for (int32_t i = 0; i < w->n_meta; i++)
        kv_free(w->meta[i].p);
    kv_free(w->header.p);
    kv_free(w->rows.p);
    kv_free(w);
}

enum kv_status kv_csv_writer_set_meta(struct kv_csv_writer *w, const char *key,
                                      const char *value)
{
    size_t klen = strlen(key);
    if (klen == 0 || strchr(key, '=') != NULL || strchr(key, '\n') != NULL)
        return KV_ERR_INVALID;
    /* find "# key" exactly, followed by '=' or the end */
    int32_t slot = -1;
    for (int32_t i = 0; i < w->n_meta; i++) {
        const char *m = w->meta[i].p + 2;
        if (strncmp(m, key, klen) == 0 && (m[klen] == '=' || m[klen] == '\0')) {
            slot = i;
            break;
        }
    }
    struct buf nb = {0};
    enum kv_status st = buf_add(&nb, "# ", 2);
    if (st == KV_OK)
        st = buf_add(&nb, key, klen);
    if (st == KV_OK && value != NULL) {
        st = buf_add(&nb, "=", 1);
        if (st == KV_OK)
            st = buf_add_line_safe(&nb, value);
    }
    if (st == KV_OK && slot < 0 && w->n_meta == MAX_META)
        st = KV_ERR_INVALID;
    if (st != KV_OK) {
        kv_free(nb.p);
        return st;
    }
    if (slot < 0)
        slot = w->n_meta++;
    else
        kv_free(w->meta[slot].p);
    w->meta[slot] = nb;
    return KV_OK;
}

enum kv_status kv_csv_writer_set_metaf(struct kv_csv_writer *w, const char *key,
                                       const char *fmt, ...)
{
    char tmp[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    return kv_csv_writer_set_meta(w, key, tmp);
}

enum kv_status kv_csv_writer_set_header(struct kv_csv_writer *w, const char *const *names,
                                        int32_t n)
{
    if (n < 1 || w->n_rows > 0)
        return KV_ERR_INVALID;
    w->header.len = 0;
    for (int32_t i = 0; i < n; i++) {
        if (strpbrk(names[i], ",\n\r") != NULL || names[i][0] == '\0')
            return KV_ERR_INVALID;
        enum kv_status st = KV_OK;
        if (i > 0)
            st = buf_add(&w->header, ",", 1);
        if (st == KV_OK)
            st = buf_add(&w->header, names[i], strlen(names[i]));
        if (st != KV_OK)
            return st;
    }
    w->n_cols = n;
    return KV_OK;
}

enum kv_status kv_csv_writer_add_row(struct kv_csv_writer *w, const char *line)
{
    if (w->n_cols == 0 || strpbrk(line, "\n\r") != NULL)
        return KV_ERR_INVALID;
    int32_t fields = 1;
    for (const char *c = line; *c; c++)
        fields += *c == ',';
    if (fields != w->n_cols)
        return KV_ERR_INVALID;
    size_t n = strlen(line);
    enum kv_status st = buf_reserve(&w->rows, n + 1);
    if (st != KV_OK)
        return st;
    buf_add(&w->rows, line, n);
    buf_add(&w->rows, "\n", 1);
    w->n_rows++;
    return KV_OK;
}

int32_t kv_csv_writer_row_count(const struct kv_csv_writer *w)
{
    return w->n_rows;
}

void kv_csv_writer_clear_rows(struct kv_csv_writer *w)
{
    w->rows.len = 0;
    if (w->rows.p)
        w->rows.p[0] = '\0';
    w->n_rows = 0;
}

/* ------------------------------------------------------------------------ */
/* Atomic write                                                             */

enum kv_status kv_csv_writer_write(const struct kv_csv_writer *w, const char *path)
{
    FILE *f;
    char *tmp;
    enum kv_status s = kv_file_begin(path, &f, &tmp);
    if (s != KV_OK)
        return s == KV_ERR_NOMEM ? s : KV_ERR_IO;
    int bad = 0;
    for (int32_t i = 0; i < w->n_meta && !bad; i++)
        bad = fwrite(w->meta[i].p, 1, w->meta[i].len, f) != w->meta[i].len ||
              fputc('\n', f) == EOF;
    if (!bad && w->n_cols > 0)
        bad = fwrite(w->header.p, 1, w->header.len, f) != w->header.len ||
              fputc('\n', f) == EOF;
    if (!bad && w->rows.len > 0)
        bad = fwrite(w->rows.p, 1, w->rows.len, f) != w->rows.len;
    return kv_file_commit(f, tmp, path, bad);
}
