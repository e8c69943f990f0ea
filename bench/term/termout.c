/*
 * termout.c - terminal width and the wrapping line builder (termout.h).
 */
#include "termout.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

int kv_term_width(int fd)
{
    struct winsize ws;
    if (isatty(fd) && ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col < KV_TERM_MIN_WIDTH ? KV_TERM_MIN_WIDTH : ws.ws_col;
    const char *c = getenv("COLUMNS");
    if (c != NULL && *c != '\0') {
        char *end;
        long v = strtol(c, &end, 10);
        if (*end == '\0' && v >= KV_TERM_MIN_WIDTH && v <= KV_TERM_MAX_WIDTH)
            return (int)v;
    }
    return KV_TERM_DEFAULT_WIDTH;
}

/* Bytes of the escape sequence starting at s (ESC [ params letter), 0 if
 * s does not start one. */
static size_t escape_len(const char *s)
{
    if (s[0] != '\033' || s[1] != '[')
        return 0;
    size_t i = 2;
    while (s[i] != '\0' && !((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z')))
        i++;
    return s[i] != '\0' ? i + 1 : i;
}

int kv_visible_width(const char *s)
{
    int w = 0;
    for (size_t i = 0; s[i] != '\0';) {
        size_t e = escape_len(s + i);
        if (e > 0) {
            i += e;
            continue;
        }
        if (((unsigned char)s[i] & 0xC0) != 0x80 && s[i] != KV_LINE_SOFT)
            w++;
        i++;
    }
    return w;
}

void kv_line_clear(struct kv_line *L)
{
    L->len = 0;
    L->buf[0] = '\0';
}

void kv_line_addf(struct kv_line *L, const char *fmt, ...)
{
    size_t cap = sizeof L->buf;
    if (L->len >= cap - 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(L->buf + L->len, cap - L->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        L->len = L->len + (size_t)n < cap - 1 ? L->len + (size_t)n : cap - 1;
}

void kv_line_emit(FILE *f, struct kv_line *L, int width, int indent)
{
    const char *s = L->buf;
    int first = 1;
    while (*s != '\0') {
        int lead = first ? 0 : indent;
        /* Find the last space at which the line can break (outside escapes)
         * before the visible width passes `width`. */
        int col = lead;
        size_t i = 0, space = 0, soft = 0;
        int over = 0, seen_word = 0; /* never break inside the leading blanks */
        while (s[i] != '\0') {
            size_t e = escape_len(s + i);
            if (e > 0) {
                i += e;
                continue;
            }
            if (s[i] == ' ' && seen_word)
                space = i;
            else if (s[i] == KV_LINE_SOFT && seen_word)
                soft = i;
            seen_word |= s[i] != ' ' && s[i] != KV_LINE_SOFT;
            if (((unsigned char)s[i] & 0xC0) != 0x80 && s[i] != KV_LINE_SOFT)
                col++;
            if (col > width && (space > 0 || soft > 0)) {
                over = 1;
                break;
            }
            i++;
        }
        /* A space is the better place to break; a soft break only when the
         * line has no space to break at. */
        size_t brk = space > 0 ? space : soft;
        size_t take = over ? brk : strlen(s), keep = take;
        while (over && keep > 0 && (s[keep - 1] == ' ' || s[keep - 1] == KV_LINE_SOFT))
            keep--; /* no trailing blanks where the line breaks */
        if (!first)
            fprintf(f, "%*s", indent, "");
        for (size_t k = 0; k < keep; k++)
            if (s[k] != KV_LINE_SOFT)
                fputc(s[k], f);
        fputc('\n', f);
        s += take;
        while (*s == ' ' || *s == KV_LINE_SOFT)
            s++;
        first = 0;
    }
    if (first)
        fputc('\n', f);
    kv_line_clear(L);
}
