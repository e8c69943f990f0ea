/*
 * csv_read.c - the bounded CSV reader (see csv_read.h for the syntax).
 *
 * Two passes over one in-memory copy of the file. Pass 1 checks every line
 * (length, binary bytes) and counts comment and data lines without touching
 * the bytes, so every array can be sized before anything is split. Pass 2
 * NUL-terminates lines and fields in place and fills the arrays. Duplicate
 * metadata keys and column names are found by sorting pointers, so no step
 * is quadratic in the file size.
 */
#include "csv_read.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../term/text.h"
#include "../model/file_check.h"

/* ------------------------------------------------------------------------ */
/* Error messages                                                           */

void kv_csv_error(char *err, size_t err_len, const char *name, int64_t line,
                  const char *fmt, ...)
{
    if (err == NULL || err_len == 0)
        return;
    const char *q = kv_text_q(name);
    int k = line > 0 ? snprintf(err, err_len, "%s:%lld: ", q, (long long)line)
                     : snprintf(err, err_len, "%s: ", q);
    if (k < 0) {
        err[0] = '\0';
        return;
    }
    if ((size_t)k < err_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + k, err_len - (size_t)k, fmt, ap);
        va_end(ap);
    }
    /* a file name or reason must never break the one-line contract */
    for (char *p = err; *p != '\0'; p++) {
        if ((unsigned char)*p < 0x20 || (unsigned char)*p == 0x7f)
            *p = '?';
    }
}

void kv_csv_excerpt(char *dst, size_t dst_len, const char *s, size_t n)
{
    kv_text_quote(dst, dst_len, s, n); /* the one quoting of every echoed value */
}

/* ------------------------------------------------------------------------ */
/* Numbers                                                                  */

static int is_digit(char c) { return c >= '0' && c <= '9'; }

int kv_csv_parse_double(const char *s, double *out)
{
    const char *p = s;
    if (*p == '+' || *p == '-')
        p++;
    int special = strcasecmp(p, "nan") == 0 || strcasecmp(p, "inf") == 0 ||
                  strcasecmp(p, "infinity") == 0;
    if (!special) {
        int nd = 0;
        while (is_digit(*p)) {
            p++;
            nd++;
        }
        if (*p == '.') {
            p++;
            while (is_digit(*p)) {
                p++;
                nd++;
            }
        }
        if (nd == 0)
            return -1;
        if (*p == 'e' || *p == 'E') {
            p++;
            if (*p == '+' || *p == '-')
                p++;
            if (!is_digit(*p))
                return -1;
            while (is_digit(*p))
                p++;
        }
        if (*p != '\0')
            return -1;
    }
    errno = 0;
    char *end = NULL;
    double v = strtod(s, &end);
    if (end == NULL || *end != '\0')
        return -1;
    if (!special && errno == ERANGE && isinf(v))
        return -1; /* 1e999: out of range, not a measurement */
    *out = v;
    return 0;
}

int kv_csv_parse_int64(const char *s, int64_t *out)
{
    const char *p = s;
    int neg = 0;
    if (*p == '+' || *p == '-')
        neg = *p++ == '-';
    if (!is_digit(*p))
        return -1;
    uint64_t acc = 0;
    const uint64_t lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (; is_digit(*p); p++) {
        uint64_t d = (uint64_t)(*p - '0');
        if (acc > (lim - d) / 10)
            return -1;
        acc = acc * 10 + d;
    }
    if (*p != '\0')
        return -1;
    if (neg)
        *out = acc == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)acc;
    else
        *out = (int64_t)acc;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Lines and fields                                                         */

struct line_it {
    char *p, *end;
    int64_t no; /* number of the line last returned */
};

/* Next line: *s its first byte, *n its length without "\n" or "\r\n". */
static int line_next(struct line_it *it, char **s, size_t *n)
{
    if (it->p >= it->end)
        return 0;
    char *nl = memchr(it->p, '\n', (size_t)(it->end - it->p));
    char *le = nl != NULL ? nl : it->end;
    *s = it->p;
    *n = (size_t)(le - it->p);
    if (*n > 0 && (*s)[*n - 1] == '\r')
        (*n)--;
    it->p = nl != NULL ? nl + 1 : it->end;
    it->no++;
    return 1;
}

static int is_blank(char c) { return c == ' ' || c == '\t'; }

enum line_kind { LINE_BLANK, LINE_COMMENT, LINE_DATA };

static enum line_kind line_classify(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && is_blank(s[i]))
        i++;
    if (i == n)
        return LINE_BLANK;
    return s[i] == '#' ? LINE_COMMENT : LINE_DATA;
}

/*
 * Splits a NUL-terminated line in place into fields (trimmed, quotes
 * removed). Stores up to `cap` pointers in out[] and returns the number of
 * fields found (which may exceed cap), or -(i + 1) when field i is badly
 * quoted.
 */
static int64_t fields_split(char *line, const char **out, int64_t cap)
{
    int64_t n = 0;
    char *p = line;
    for (;;) {
        while (is_blank(*p))
            p++;
        char *start = p, *fend;
        if (*p == '"') {
            char *w = p; /* unescaped text is written from the quote on */
            p++;
            for (;;) {
                if (*p == '\0')
                    return -(n + 1); /* no closing quote on this line */
                if (*p == '"') {
                    if (p[1] == '"') {
                        *w++ = '"';
                        p += 2;
                        continue;
                    }
                    p++;
                    break;
                }
                *w++ = *p++;
            }
            fend = w;
            while (is_blank(*p))
                p++;
            if (*p != ',' && *p != '\0')
                return -(n + 1); /* text after the closing quote */
        } else {
            while (*p != ',' && *p != '\0')
                p++;
            fend = p;
            while (fend > start && is_blank(fend[-1]))
                fend--;
        }
        char sep = *p; /* read before the terminator may overwrite it */
        *fend = '\0';
        if (n < cap)
            out[n] = start;
        n++;
        if (sep == '\0')
            return n;
        p++;
    }
}

static int is_key_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) ||
           c == '_' || c == '.' || c == '-';
}

/* "# key=value" -> key/value in place; 0 when the comment is not one. */
static int meta_split(char *s, const char **key, const char **value)
{
    while (is_blank(*s))
        s++;
    s++; /* the '#' */
    while (is_blank(*s))
        s++;
    char *k = s;
    while (is_key_char(*s))
        s++;
    char *kend = s;
    while (is_blank(*s))
        s++;
    if (kend == k || *s != '=')
        return 0;
    *kend = '\0';
    s++;
    while (is_blank(*s))
        s++;
    char *v = s, *e = s + strlen(s);
    while (e > v && is_blank(e[-1]))
        e--;
    *e = '\0';
    *key = k;
    *value = v;
    return 1;
}

/* ------------------------------------------------------------------------ */
/* Duplicate detection by sorting                                           */

static int cmp_meta(const void *a, const void *b)
{
    const struct kv_csv_meta *x = *(const struct kv_csv_meta *const *)a;
    const struct kv_csv_meta *y = *(const struct kv_csv_meta *const *)b;
    int c = strcmp(x->key, y->key);
    if (c != 0)
        return c;
    return (x->line > y->line) - (x->line < y->line);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* ------------------------------------------------------------------------ */
/* Parsing                                                                  */

void kv_csv_destroy(struct kv_csv *c)
{
    if (c == NULL)
        return;
    kv_free(c->name);
    kv_free(c->cols);
    kv_free(c->cells);
    kv_free(c->row_line);
    kv_free(c->meta);
    kv_free(c->buf);
    kv_free(c);
}

static char *dup_name(const char *name)
{
    size_t n = strlen(name);
    char *s = kv_alloc(n + 1);
    if (s != NULL)
        memcpy(s, name, n + 1);
    return s;
}

/* Pass 1: check every line, count comment and data lines. */
static enum kv_status pass_check(char *buf, size_t len, const char *name,
                                 int64_t *n_comment, int64_t *n_data,
                                 int64_t *n_lines, char *err, size_t err_len)
{
    struct line_it it = {buf, buf + len, 0};
    char *s;
    size_t n;
    *n_comment = *n_data = 0;
    while (line_next(&it, &s, &n)) {
        if (n > KV_CSV_MAX_LINE) {
            kv_csv_error(err, err_len, name, it.no,
                         "line is longer than %d bytes", KV_CSV_MAX_LINE);
            return KV_ERR_FORMAT;
        }
        for (size_t i = 0; i < n; i++) {
            unsigned char ch = (unsigned char)s[i];
            if (ch == 0) {
                kv_csv_error(err, err_len, name, it.no,
                             "NUL byte at column %zu: binary data, not a CSV file", i + 1);
                return KV_ERR_FORMAT;
            }
            if ((ch < 0x20 && ch != '\t') || ch == 0x7f) {
                kv_csv_error(err, err_len, name, it.no,
                             "control byte 0x%02x at column %zu: binary data, not a CSV file",
                             ch, i + 1);
                return KV_ERR_FORMAT;
            }
        }
        enum line_kind k = line_classify(s, n);
        *n_comment += k == LINE_COMMENT;
        *n_data += k == LINE_DATA;
    }
    *n_lines = it.no;
    return KV_OK;
}

/* Sorted check for repeated metadata keys. */
static enum kv_status meta_check_unique(struct kv_csv *c, char *err, size_t err_len)
{
    if (c->n_meta < 2)
        return KV_OK;
    /* ix: (n_meta) pointers; clang-tidy takes sizeof *ix for a mistake */
    const struct kv_csv_meta **ix =
        kv_alloc((size_t)c->n_meta * sizeof *ix); // NOLINT(bugprone-sizeof-expression)
    if (ix == NULL)
        return KV_ERR_NOMEM;
    for (int32_t i = 0; i < c->n_meta; i++)
        ix[i] = &c->meta[i];
    qsort(ix, (size_t)c->n_meta, sizeof *ix, cmp_meta); // NOLINT(bugprone-sizeof-expression)
    enum kv_status st = KV_OK;
    for (int32_t i = 1; i < c->n_meta; i++) {
        if (strcmp(ix[i]->key, ix[i - 1]->key) == 0) {
            char k[48];
            kv_csv_excerpt(k, sizeof k, ix[i]->key, 32);
            kv_csv_error(err, err_len, c->name, ix[i]->line,
                         "metadata key '%s' repeated (first on line %lld)", k,
                         (long long)ix[i - 1]->line);
            st = KV_ERR_FORMAT;
            break;
        }
    }
    kv_free(ix);
    return st;
}

/* Header fields -> c->cols (unique, non-empty). */
static enum kv_status header_parse(struct kv_csv *c, char *line, int64_t no,
                                   char *err, size_t err_len)
{
    enum kv_status st = KV_OK;
    const char **tmp = kv_alloc((KV_CSV_MAX_COLS + 1) * sizeof *tmp);
    if (tmp == NULL)
        return KV_ERR_NOMEM;
    int64_t nf = fields_split(line, tmp, KV_CSV_MAX_COLS + 1);
    if (nf < 0) {
        kv_csv_error(err, err_len, c->name, no, "header: bad quoting in field %lld",
                     (long long)-nf);
        st = KV_ERR_FORMAT;
        goto out;
    }
    if (nf > KV_CSV_MAX_COLS) {
        kv_csv_error(err, err_len, c->name, no, "header has more than %d columns",
                     KV_CSV_MAX_COLS);
        st = KV_ERR_FORMAT;
        goto out;
    }
    for (int64_t j = 0; j < nf; j++) {
        if (tmp[j][0] == '\0') {
            kv_csv_error(err, err_len, c->name, no, "header: column %lld has no name",
                         (long long)j + 1);
            st = KV_ERR_FORMAT;
            goto out;
        }
    }
    c->cols = kv_alloc((size_t)nf * sizeof *c->cols);
    if (c->cols == NULL) {
        st = KV_ERR_NOMEM;
        goto out;
    }
    memcpy(c->cols, tmp, (size_t)nf * sizeof *tmp);
    c->n_cols = (int32_t)nf;
    c->header_line = no;
    qsort(tmp, (size_t)nf, sizeof *tmp, cmp_str);
    for (int64_t j = 1; j < nf; j++) {
        if (strcmp(tmp[j], tmp[j - 1]) == 0) {
            char k[48];
            kv_csv_excerpt(k, sizeof k, tmp[j], 32);
            kv_csv_error(err, err_len, c->name, no, "header: column '%s' appears twice", k);
            st = KV_ERR_FORMAT;
            goto out;
        }
    }
out:
    kv_free(tmp);
    return st;
}

/* Pass 2: split in place and fill c. buf has len + 1 bytes. */
static enum kv_status pass_fill(struct kv_csv *c, size_t len, int64_t n_comment,
                                int64_t n_data, char *err, size_t err_len)
{
    enum kv_status st;
    int64_t n_rows = n_data - 1;
    if (n_comment > 0) {
        if (n_comment > INT32_MAX) {
            kv_csv_error(err, err_len, c->name, 0, "too many comment lines");
            return KV_ERR_FORMAT;
        }
        c->meta = kv_alloc((size_t)n_comment * sizeof *c->meta);
        if (c->meta == NULL)
            return KV_ERR_NOMEM;
    }
    if (n_rows > 0) {
        c->row_line = kv_alloc((size_t)n_rows * sizeof *c->row_line);
        if (c->row_line == NULL)
            return KV_ERR_NOMEM;
    }
    struct line_it it = {c->buf, c->buf + len, 0};
    char *s;
    size_t n;
    int64_t r = 0;
    while (line_next(&it, &s, &n)) {
        s[n] = '\0'; /* the '\r', '\n' or the spare byte after the buffer */
        enum line_kind k = line_classify(s, n);
        if (k == LINE_BLANK)
            continue;
        if (k == LINE_COMMENT) {
            struct kv_csv_meta *m = &c->meta[c->n_meta];
            if (meta_split(s, &m->key, &m->value)) {
                m->line = it.no;
                c->n_meta++;
            }
            continue;
        }
        if (c->cols == NULL) {
            st = header_parse(c, s, it.no, err, err_len);
            if (st != KV_OK)
                return st;
            if (n_rows > 0) {
                size_t cells;
                if (kv_mul_size(&cells, (size_t)n_rows, (size_t)c->n_cols) != KV_OK ||
                    kv_mul_size(&cells, cells, sizeof *c->cells) != KV_OK)
                    return KV_ERR_OVERFLOW;
                c->cells = kv_alloc(cells);
                if (c->cells == NULL)
                    return KV_ERR_NOMEM;
            }
            continue;
        }
        KV_ASSERT(r < n_rows);
        int64_t nf = fields_split(s, c->cells + r * c->n_cols, c->n_cols);
        if (nf < 0) {
            kv_csv_error(err, err_len, c->name, it.no, "bad quoting in field %lld",
                         (long long)-nf);
            return KV_ERR_FORMAT;
        }
        if (nf != c->n_cols) {
            kv_csv_error(err, err_len, c->name, it.no,
                         "%lld fields, but the header (line %lld) has %d%s", (long long)nf,
                         (long long)c->header_line, c->n_cols,
                         nf < c->n_cols ? " (truncated line?)" : "");
            return KV_ERR_FORMAT;
        }
        c->row_line[r++] = it.no;
    }
    c->n_rows = r;
    return meta_check_unique(c, err, err_len);
}

/* Takes ownership of buf (len + 1 bytes). */
static enum kv_status parse_owned(struct kv_csv **out, char *buf, size_t len,
                                  const char *name, char *err, size_t err_len)
{
    int64_t n_comment, n_data, n_lines;
    enum kv_status st;
    struct kv_csv *c = kv_alloc(sizeof *c);
    if (c == NULL) {
        kv_free(buf);
        return KV_ERR_NOMEM;
    }
    /* A UTF-8 byte-order mark (some editors and spreadsheets write one) is
     * not part of the first field. */
    if (len >= 3 && memcmp(buf, "\xef\xbb\xbf", 3) == 0) {
        memmove(buf, buf + 3, len - 3);
        len -= 3;
    }
    c->buf = buf;
    c->buf[len] = '\0';
    c->name = dup_name(name);
    if (c->name == NULL) {
        st = KV_ERR_NOMEM;
        goto fail;
    }
    if (len > KV_CSV_MAX_FILE) {
        kv_csv_error(err, err_len, name, 0, "file is larger than %u bytes", KV_CSV_MAX_FILE);
        st = KV_ERR_FORMAT;
        goto fail;
    }
    st = pass_check(buf, len, name, &n_comment, &n_data, &n_lines, err, err_len);
    if (st != KV_OK)
        goto fail;
    c->unterminated = len > 0 && buf[len - 1] != '\n' ? n_lines : 0;
    if (n_data == 0) {
        kv_csv_error(err, err_len, name, n_lines > 0 ? n_lines : 1, "%s",
                     n_lines == 0 ? "empty file (no header line)"
                     : "no header line (only comments or blank lines)");
        st = KV_ERR_FORMAT;
        goto fail;
    }
    st = pass_fill(c, len, n_comment, n_data, err, err_len);
    if (st != KV_OK)
        goto fail;
    *out = c;
    return KV_OK;
fail:
    if (st == KV_ERR_NOMEM || st == KV_ERR_OVERFLOW)
        kv_csv_error(err, err_len, name, 0, "%s", kv_status_str(st));
    kv_csv_destroy(c);
    return st;
}

enum kv_status kv_csv_parse(struct kv_csv **out, const char *data, size_t len,
                            const char *name, char *err, size_t err_len)
{
    if (out == NULL || (data == NULL && len > 0) || name == NULL)
        return KV_ERR_INVALID;
    *out = NULL;
    if (len > KV_CSV_MAX_FILE) {
        kv_csv_error(err, err_len, name, 0, "file is larger than %u bytes", KV_CSV_MAX_FILE);
        return KV_ERR_FORMAT;
    }
    char *buf = kv_alloc(len + 1);
    if (buf == NULL) {
        kv_csv_error(err, err_len, name, 0, "%s", kv_status_str(KV_ERR_NOMEM));
        return KV_ERR_NOMEM;
    }
    if (len > 0)
        memcpy(buf, data, len);
    return parse_owned(out, buf, len, name, err, err_len);
}

/* ------------------------------------------------------------------------ */
/* Files                                                                    */

enum kv_status kv_csv_read_file(struct kv_csv **out, const char *path,
                                char *err, size_t err_len)
{
    if (out == NULL || path == NULL)
        return KV_ERR_INVALID;
    *out = NULL;
    /* "-" is standard input, where a pipe is the point; a named file must be
     * a regular file, opened without blocking (file_check.h), so a FIFO
     * without a writer is refused instead of hanging the read. */
    int is_stdin = strcmp(path, "-") == 0, fd = -1;
    const char *name = is_stdin ? KV_CSV_STDIN_NAME : path;
    if (is_stdin) {
        fd = dup(STDIN_FILENO);
        if (fd < 0) {
            kv_csv_error(err, err_len, name, 0, "cannot read: %s", strerror(errno));
            return KV_ERR_IO;
        }
    } else if (kv_file_open_input(path, &fd) != KV_OK) {
        kv_csv_error(err, err_len, path, 0, "cannot open: %s", kv_file_why());
        return KV_ERR_IO;
    }
    FILE *f = fdopen(fd, "rb");
    if (f == NULL) {
        kv_csv_error(err, err_len, name, 0, "cannot read: %s", strerror(errno));
        close(fd);
        return KV_ERR_IO;
    }
    struct stat sb;
    size_t cap = 65536;
    if (fstat(fileno(f), &sb) == 0) {
        if (S_ISREG(sb.st_mode)) {
            if ((uintmax_t)sb.st_size > KV_CSV_MAX_FILE) {
                fclose(f);
                kv_csv_error(err, err_len, name, 0, "file is larger than %u bytes",
                             KV_CSV_MAX_FILE);
                return KV_ERR_FORMAT;
            }
            cap = (size_t)sb.st_size + 2; /* +1 to see EOF, +1 spare byte */
        }
    }
    char *buf = kv_alloc(cap);
    size_t len = 0;
    enum kv_status st = buf != NULL ? KV_OK : KV_ERR_NOMEM;
    while (st == KV_OK) {
        if (cap - len < 2) { /* keep one spare byte for the terminator */
            if (cap > KV_CSV_MAX_FILE) {
                kv_csv_error(err, err_len, name, 0, "file is larger than %u bytes",
                             KV_CSV_MAX_FILE);
                st = KV_ERR_FORMAT;
                break;
            }
            size_t ncap = cap * 2;
            char *nb = kv_alloc(ncap);
            if (nb == NULL) {
                st = KV_ERR_NOMEM;
                break;
            }
            memcpy(nb, buf, len);
            kv_free(buf);
            buf = nb;
            cap = ncap;
        }
        size_t got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0) {
            if (ferror(f)) {
                kv_csv_error(err, err_len, name, 0, "read error: %s", strerror(errno));
                st = KV_ERR_IO;
            }
            break;
        }
    }
    fclose(f);
    if (st != KV_OK) {
        if (st == KV_ERR_NOMEM)
            kv_csv_error(err, err_len, name, 0, "%s", kv_status_str(st));
        kv_free(buf);
        return st;
    }
    return parse_owned(out, buf, len, name, err, err_len);
}

/* ------------------------------------------------------------------------ */
/* Lookups                                                                  */

int32_t kv_csv_col(const struct kv_csv *c, const char *name)
{
    for (int32_t j = 0; j < c->n_cols; j++) {
        if (strcmp(c->cols[j], name) == 0)
            return j;
    }
    return -1;
}

const char *kv_csv_cell(const struct kv_csv *c, int64_t r, int32_t j)
{
    KV_ASSERT(r >= 0 && r < c->n_rows && j >= 0 && j < c->n_cols);
    return c->cells[r * c->n_cols + j];
}

const struct kv_csv_meta *kv_csv_meta_find(const struct kv_csv *c, const char *key)
{
    for (int32_t i = 0; i < c->n_meta; i++) {
        if (strcmp(c->meta[i].key, key) == 0)
            return &c->meta[i];
    }
    return NULL;
}
