/*
 * tokenizer.c - load, encode and decode llama2.c tokenizer.bin files.
 *
 * Pieces live in one blob (each followed by a NUL for convenience, though
 * pieces may themselves contain NUL bytes: every comparison uses lengths).
 * An index of ids sorted by piece bytes gives O(log V) lookups; the merge
 * loop looks up the concatenation of two pieces by comparing against both
 * halves in place, so encoding allocates nothing and writes only into the
 * caller's id array.
 */
#include "tokenizer.h"

#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "file_check.h"
#include "file_commit.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "tokenizer.bin is little-endian; this host is not"
#endif

struct kv_tokenizer {
    int32_t n;                /* vocabulary size */
    int32_t max_token_length; /* longest piece, in bytes */
    float *scores;            /* (n) merge scores, higher merges first */
    int32_t *lens;            /* (n) piece lengths */
    size_t *offs;             /* (n) offset of each piece in blob */
    char *blob;               /* pieces, each followed by a NUL */
    int32_t *sorted;          /* (n) ids ordered by (piece bytes, id) */
    int32_t bos, eos;         /* "<s>", "</s>", or -1 */
    int32_t byte_tok[256];    /* token for a lone byte, or -1 */
    unsigned char bytes[256]; /* bytes[i] == i, for decode of "<0xXX>" */
};

/* ------------------------------------------------------------------------ */
/* Lookup                                                                   */

/* Compares piece id with the concatenation a[0..la) b[0..lb). */
static int cmp_concat(const struct kv_tokenizer *t, int32_t id, const char *a, size_t la,
                      const char *b, size_t lb)
{
    const unsigned char *p = (const unsigned char *)t->blob + t->offs[id];
    size_t lp = (size_t)t->lens[id];
    size_t na = lp < la ? lp : la;
    int c = memcmp(p, a, na);
    if (c != 0 || lp <= la)
        return c != 0 ? c : (lp < la ? -1 : (lb > 0 ? -1 : 0));
    size_t nb = lp - la < lb ? lp - la : lb;
    c = memcmp(p + la, b, nb);
    if (c != 0)
        return c;
    size_t rest = lp - la;
    return rest < lb ? -1 : (rest > lb ? 1 : 0);
}

/* Lowest id whose piece is a||b, or -1. */
static int32_t lookup2(const struct kv_tokenizer *t, const char *a, size_t la,
                       const char *b, size_t lb)
{
    int32_t lo = 0, hi = t->n; /* first index with piece >= a||b */
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (cmp_concat(t, t->sorted[mid], a, la, b, lb) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < t->n && cmp_concat(t, t->sorted[lo], a, la, b, lb) == 0)
        return t->sorted[lo];
    return -1;
}

static int32_t lookup(const struct kv_tokenizer *t, const char *s, size_t len)
{
    return lookup2(t, s, len, "", 0);
}

/* qsort context is not portable C11: sort with a small merge sort instead. */
static int cmp_ids(const struct kv_tokenizer *t, int32_t x, int32_t y)
{
    int c = cmp_concat(t, x, t->blob + t->offs[y], (size_t)t->lens[y], "", 0);
    return c != 0 ? c : (x < y ? -1 : (x > y ? 1 : 0));
}

static void sort_ids(const struct kv_tokenizer *t, int32_t *a, int32_t *tmp, int32_t n)
{
    if (n < 2)
        return;
    int32_t h = n / 2;
    sort_ids(t, a, tmp, h);
    sort_ids(t, a + h, tmp, n - h);
    int32_t i = 0, j = h, k = 0;
    while (i < h && j < n)
        tmp[k++] = cmp_ids(t, a[i], a[j]) <= 0 ? a[i++] : a[j++];
    while (i < h)
        tmp[k++] = a[i++];
    while (j < n)
        tmp[k++] = a[j++];
    memcpy(a, tmp, (size_t)n * sizeof *a);
}

/* The byte a "<0xXX>" piece stands for, or -1 when it is not one. */
static int hex_byte(const char *p, int32_t len)
{
    if (len != 6 || p[0] != '<' || p[1] != '0' || p[2] != 'x' || p[5] != '>')
        return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                       : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* ------------------------------------------------------------------------ */
/* Construction                                                             */

void kv_tokenizer_destroy(struct kv_tokenizer *t)
{
    if (t == NULL)
        return;
    kv_free(t->scores);
    kv_free(t->lens);
    kv_free(t->offs);
    kv_free(t->blob);
    kv_free(t->sorted);
    kv_free(t);
}

/* Builds from validated pieces (lens >= 0, n >= 1). */
static enum kv_status build(struct kv_tokenizer **out, int32_t n, int32_t max_len,
                            const char *const *pieces, const int32_t *lens,
                            const float *scores)
{
    size_t blob_bytes = 0;
    for (int32_t i = 0; i < n; i++) {
        if ((size_t)lens[i] + 1 > SIZE_MAX - blob_bytes)
            return KV_ERR_OVERFLOW;
        blob_bytes += (size_t)lens[i] + 1;
    }
    struct kv_tokenizer *t = kv_alloc(sizeof *t);
    if (t == NULL)
        return KV_ERR_NOMEM;
    t->n = n;
    t->max_token_length = max_len;
    t->scores = kv_alloc((size_t)n * sizeof *t->scores);
    t->lens = kv_alloc((size_t)n * sizeof *t->lens);
    t->offs = kv_alloc((size_t)n * sizeof *t->offs);
    t->blob = kv_alloc(blob_bytes);
    t->sorted = kv_alloc((size_t)n * sizeof *t->sorted);
    int32_t *tmp = kv_alloc((size_t)n * sizeof *tmp);
    if (!t->scores || !t->lens || !t->offs || !t->blob || !t->sorted || !tmp) {
        kv_free(tmp);
        kv_tokenizer_destroy(t);
        return KV_ERR_NOMEM;
    }
    size_t off = 0;
    for (int32_t i = 0; i < n; i++) {
        t->scores[i] = scores[i];
        t->lens[i] = lens[i];
        t->offs[i] = off;
        if (lens[i] > 0)
            memcpy(t->blob + off, pieces[i], (size_t)lens[i]);
        t->blob[off + (size_t)lens[i]] = '\0';
        off += (size_t)lens[i] + 1;
        t->sorted[i] = i;
    }
    sort_ids(t, t->sorted, tmp, n);
    kv_free(tmp);

    t->bos = lookup(t, "<s>", 3);
    t->eos = lookup(t, "</s>", 4);
    for (int b = 0; b < 256; b++) {
        char hex[7];
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        char one = (char)b;
        int32_t id = lookup(t, hex, 6);
        t->byte_tok[b] = id >= 0 ? id : lookup(t, &one, 1);
        t->bytes[b] = (unsigned char)b;
    }
    *out = t;
    return KV_OK;
}

enum kv_status kv_tokenizer_create(struct kv_tokenizer **out, int32_t n,
                                   const char *const *pieces, const int32_t *lens,
                                   const float *scores)
{
    if (out == NULL)
        return KV_ERR_INVALID;
    *out = NULL;
    if (n <= 0 || pieces == NULL || lens == NULL || scores == NULL)
        return KV_ERR_INVALID;
    int32_t max_len = 0;
    for (int32_t i = 0; i < n; i++) {
        if (lens[i] < 0 || (lens[i] > 0 && pieces[i] == NULL))
            return KV_ERR_INVALID;
        if (lens[i] > max_len)
            max_len = lens[i];
    }
    return build(out, n, max_len, pieces, lens, scores);
}

enum kv_status kv_tokenizer_create_bytes(struct kv_tokenizer **out)
{
    static char bytes[256];
    const char *pieces[256];
    int32_t lens[256];
    float scores[256];
    for (int i = 0; i < 256; i++) {
        bytes[i] = (char)i;
        pieces[i] = &bytes[i];
        lens[i] = 1;
        scores[i] = 0.0f;
    }
    return kv_tokenizer_create(out, 256, pieces, lens, scores);
}

/* ------------------------------------------------------------------------ */
/* File I/O                                                                 */

static int32_t get_i32(const unsigned char *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Reads the whole regular file into kv_alloc memory. */
static enum kv_status read_file(const char *path, unsigned char **buf, size_t *len)
{
    int fd;
    if (kv_file_open_input(path, &fd) != KV_OK) /* regular files only, never blocks */
        return KV_ERR_IO;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < 0 || (uint64_t)st.st_size >= (uint64_t)SIZE_MAX) {
        kv_file_set_why("cannot tell its size");
        close(fd);
        return KV_ERR_IO;
    }
    size_t n = (size_t)st.st_size;
    unsigned char *b = kv_alloc(n + 1);
    if (b == NULL) {
        close(fd);
        return KV_ERR_NOMEM;
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, b + got, n - got);
        if (r <= 0) {
            close(fd);
            kv_free(b);
            return KV_ERR_IO;
        }
        got += (size_t)r;
    }
    close(fd);
    *buf = b;
    *len = n;
    return KV_OK;
}

enum kv_status kv_tokenizer_load(struct kv_tokenizer **out, const char *path,
                                 int32_t vocab_size)
{
    if (out == NULL)
        return KV_ERR_INVALID;
    *out = NULL;
    if (path == NULL || vocab_size < 0)
        return KV_ERR_INVALID;
    unsigned char *buf;
    size_t len;
    enum kv_status s = read_file(path, &buf, &len);
    if (s != KV_OK)
        return s;

    /* Pass 1: count tokens, checking every length against what remains. */
    s = KV_ERR_FORMAT;
    const char **pieces = NULL;
    int32_t *lens = NULL;
    float *scores = NULL;
    if (len < 4)
        goto done;
    int32_t max_len = get_i32(buf);
    if (max_len < 0)
        goto done;
    size_t pos = 4;
    int64_t count = 0;
    while (pos < len && (vocab_size == 0 || count < vocab_size)) {
        if (len - pos < 8)
            goto done;
        int32_t l = get_i32(buf + pos + 4);
        if (l < 0 || l > max_len || (size_t)l > len - pos - 8)
            goto done;
        pos += 8 + (size_t)l;
        if (++count > INT32_MAX)
            goto done;
    }
    if (pos != len || count == 0 || (vocab_size > 0 && count != vocab_size))
        goto done;

    /* Pass 2: point at the pieces and build. */
    s = KV_ERR_NOMEM;
    pieces = kv_alloc((size_t)count * sizeof *pieces);
    lens = kv_alloc((size_t)count * sizeof *lens);
    scores = kv_alloc((size_t)count * sizeof *scores);
    if (!pieces || !lens || !scores)
        goto done;
    pos = 4;
    for (int64_t i = 0; i < count; i++) {
        memcpy(&scores[i], buf + pos, sizeof(float));
        lens[i] = get_i32(buf + pos + 4);
        pieces[i] = (const char *)buf + pos + 8;
        pos += 8 + (size_t)lens[i];
    }
    /* a NaN score would make every merge comparison false */
    size_t bad = kv_first_nonfinite(scores, (size_t)count);
    if (bad < (size_t)count) {
        kv_file_set_why("the score of token %zu is not a finite number", bad);
        s = KV_ERR_FORMAT;
        goto done;
    }
    s = build(out, (int32_t)count, max_len, pieces, lens, scores);
done:
    kv_free(pieces);
    kv_free(lens);
    kv_free(scores);
    kv_free(buf);
    return s;
}

enum kv_status kv_tokenizer_save(const struct kv_tokenizer *t, const char *path)
{
    if (t == NULL || path == NULL)
        return KV_ERR_INVALID;
    FILE *f;
    char *tmp;
    enum kv_status s = kv_file_begin(path, &f, &tmp);
    if (s != KV_OK)
        return s;
    int err = fwrite(&t->max_token_length, 4, 1, f) != 1;
    for (int32_t i = 0; i < t->n && !err; i++) {
        err = fwrite(&t->scores[i], 4, 1, f) != 1 || fwrite(&t->lens[i], 4, 1, f) != 1 ||
              fwrite(t->blob + t->offs[i], 1, (size_t)t->lens[i], f) != (size_t)t->lens[i];
    }
    return kv_file_commit(f, tmp, path, err);
}

/* ------------------------------------------------------------------------ */
/* Queries                                                                  */

int32_t kv_tokenizer_vocab_size(const struct kv_tokenizer *t) { return t != NULL ? t->n : 0; }
int32_t kv_tokenizer_bos(const struct kv_tokenizer *t) { return t != NULL ? t->bos : -1; }
int32_t kv_tokenizer_eos(const struct kv_tokenizer *t) { return t != NULL ? t->eos : -1; }

unsigned kv_tokenizer_default_flags(const struct kv_tokenizer *t)
{
    return t != NULL && t->bos >= 0 ? (unsigned)(KV_TOK_BOS | KV_TOK_DUMMY_PREFIX) : 0u;
}

const char *kv_tokenizer_piece(const struct kv_tokenizer *t, int32_t id, int32_t *len)
{
    if (t == NULL || id < 0 || id >= t->n)
        return NULL;
    if (len)
        *len = t->lens[id];
    return t->blob + t->offs[id];
}

/* ------------------------------------------------------------------------ */
/* Encode                                                                   */

/* Length of the UTF-8 code point starting at s[0] (1 for invalid bytes). */
static size_t utf8_len(const unsigned char *s, size_t avail)
{
    size_t n = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3
                         : (s[0] & 0xF8) == 0xF0 ? 4 : 1;
    if (n > avail)
        return 1;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 1;
    }
    return n;
}

enum kv_status kv_tokenizer_encode(const struct kv_tokenizer *t, const char *text,
                                   size_t len, unsigned flags, int32_t *ids,
                                   int32_t max_ids, int32_t *n_out)
{
    if (t == NULL || (text == NULL && len > 0) || ids == NULL || n_out == NULL ||
        max_ids < 0)
        return KV_ERR_INVALID;
    if (((flags & KV_TOK_BOS) && t->bos < 0) || ((flags & KV_TOK_EOS) && t->eos < 0))
        return KV_ERR_INVALID;
    int32_t n = 0;
    if (flags & KV_TOK_BOS) {
        if (n >= max_ids)
            return KV_ERR_INVALID;
        ids[n++] = t->bos;
    }
    int32_t first = n; /* the merge loop works on ids[first..n) */
    if ((flags & KV_TOK_DUMMY_PREFIX) && len > 0) {
        int32_t sp = lookup(t, " ", 1);
        if (sp >= 0) {
            if (n >= max_ids)
                return KV_ERR_INVALID;
            ids[n++] = sp;
        }
    }
    /* Code points, or their bytes when the code point is not a token. */
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < len;) {
        size_t cl = utf8_len(s + i, len - i);
        int32_t id = lookup(t, (const char *)s + i, cl);
        if (id >= 0) {
            if (n >= max_ids)
                return KV_ERR_INVALID;
            ids[n++] = id;
        } else {
            for (size_t j = 0; j < cl; j++) {
                int32_t b = t->byte_tok[s[i + j]];
                if (b < 0 || n >= max_ids)
                    return KV_ERR_INVALID;
                ids[n++] = b;
            }
        }
        i += cl;
    }
    /* Merge the best-scoring adjacent pair until none merges. */
    for (;;) {
        float best = 0.0f;
        int32_t best_at = -1, best_id = -1;
        for (int32_t i = first; i + 1 < n; i++) {
            int32_t a = ids[i], b = ids[i + 1];
            int32_t id = lookup2(t, t->blob + t->offs[a], (size_t)t->lens[a],
                                 t->blob + t->offs[b], (size_t)t->lens[b]);
            if (id >= 0 && (best_at < 0 || t->scores[id] > best)) {
                best = t->scores[id];
                best_at = i;
                best_id = id;
            }
        }
        if (best_at < 0)
            break;
        ids[best_at] = best_id;
        memmove(&ids[best_at + 1], &ids[best_at + 2],
                (size_t)(n - best_at - 2) * sizeof *ids);
        n--;
    }
    if (flags & KV_TOK_EOS) {
        if (n >= max_ids)
            return KV_ERR_INVALID;
        ids[n++] = t->eos;
    }
    *n_out = n;
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* Decode                                                                   */

size_t kv_tokenizer_decode(const struct kv_tokenizer *t, int32_t prev, int32_t id,
                           const char **bytes)
{
    if (bytes == NULL)
        return 0;
    *bytes = "";
    if (t == NULL || id < 0 || id >= t->n || id == t->bos || id == t->eos)
        return 0;
    const char *p = t->blob + t->offs[id];
    size_t len = (size_t)t->lens[id];
    int hb = hex_byte(p, (int32_t)len);
    if (hb >= 0) {
        *bytes = (const char *)&t->bytes[hb];
        return 1;
    }
    if (prev >= 0 && prev == t->bos && len > 0 && p[0] == ' ') {
        p++;
        len--;
    }
    *bytes = p;
    return len;
}

void kv_tokenizer_decode_all(const struct kv_tokenizer *t, const int32_t *ids, int32_t n,
                             char *out, size_t cap, size_t *len_out)
{
    size_t total = 0;
    int32_t prev = -1;
    if (out == NULL)
        cap = 0; /* nothing to write into: only the length */
    for (int32_t i = 0; ids != NULL && i < n; i++) {
        const char *b;
        size_t l = kv_tokenizer_decode(t, prev, ids[i], &b);
        for (size_t j = 0; j < l; j++, total++) {
            if (cap > 0 && total < cap - 1)
                out[total] = b[j];
        }
        prev = ids[i];
    }
    if (cap > 0)
        out[total < cap - 1 ? total : cap - 1] = '\0';
    if (len_out)
        *len_out = total;
}

/* ------------------------------------------------------------------------ */
/* Display                                                                  */

const char *kv_token_text(const struct kv_tokenizer *t, int32_t vocab, int32_t prev,
                          int32_t id, char *buf, size_t cap)
{
    if (buf == NULL || cap < 16) { /* the caller's buffer: no room for a token */
        if (buf != NULL && cap > 0)
            buf[0] = '\0';
        return buf;
    }
    const char *bytes = "";
    size_t len = 0;
    char one[1]; /* the byte of a byte-level token (t == NULL) */
    if (t != NULL) {
        len = kv_tokenizer_decode(t, prev, id, &bytes);
        if (len == 0) {
            int32_t pl = 0;
            bytes = kv_tokenizer_piece(t, id, &pl);
            len = bytes != NULL ? (size_t)pl : 0;
            if (bytes == NULL) {
                snprintf(buf, cap, "#%" PRId32, id);
                return buf;
            }
        }
    } else if (vocab <= 256 && id >= 0 && id < 256) {
        one[0] = (char)id;
        bytes = one;
        len = 1;
    } else {
        snprintf(buf, cap, "#%" PRId32, id);
        return buf;
    }
    size_t o = 0;
    buf[o++] = '\'';
    for (size_t i = 0; i < len && o + 6 < cap; i++) {
        unsigned char c = (unsigned char)bytes[i];
        if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'')
            buf[o++] = (char)c;
        else
            o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", c);
    }
    buf[o++] = '\'';
    buf[o] = '\0';
    return buf;
}
