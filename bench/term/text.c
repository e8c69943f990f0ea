/*
 * text.c - the one text rule for what kvlab prints (see text.h).
 */
#include "text.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Quoting                                                                  */

char *kv_text_quote(char *dst, size_t cap, const char *s, size_t max)
{
    static const char hex[] = "0123456789abcdef";
    if (dst == NULL || cap == 0)
        return dst;
    size_t w = 0, i = 0;
    if (s == NULL)
        s = "";
    for (; i < max && s[i] != '\0'; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[5];
        size_t k = 0;
        if (c == '\n' || c == '\t' || c == '\r' || c == '\\' || c == '\'') {
            esc[k++] = '\\';
            esc[k++] = c == '\n' ? 'n' : c == '\t' ? 't' : c == '\r' ? 'r' : (char)c;
        } else if (c < 0x20 || c == 0x7f) {
            esc[k++] = '\\';
            esc[k++] = 'x';
            esc[k++] = hex[c >> 4];
            esc[k++] = hex[c & 15];
        } else {
            esc[k++] = (char)c;
        }
        if (w + k + 4 > cap) /* room for "..." and the NUL */
            break;
        memcpy(dst + w, esc, k);
        w += k;
    }
    if (i < SIZE_MAX && s[i] != '\0' && w + 4 <= cap) {
        memcpy(dst + w, "...", 3);
        w += 3;
    }
    dst[w] = '\0';
    return dst;
}

const char *kv_text_sentence(const char *s)
{
    /* a sentence from below the CLI (a strategy's why) may quote a value
     * the user gave: its control bytes are escaped, its quotes kept */
    static char bufs[2][600];
    static unsigned next;
    char *b = bufs[next++ % 2];
    static const char hex[] = "0123456789abcdef";
    size_t w = 0;
    for (const unsigned char *p = (const unsigned char *)(s != NULL ? s : ""); *p != '\0'; p++) {
        if (w + 8 > sizeof bufs[0]) {
            memcpy(b + w, "...", 3);
            w += 3;
            break;
        }
        if (*p < 0x20 || *p == 0x7f || *p == '\\') {
            b[w++] = '\\';
            if (*p == '\\') {
                b[w++] = '\\';
            } else {
                b[w++] = 'x';
                b[w++] = hex[*p >> 4];
                b[w++] = hex[*p & 15];
            }
        } else {
            b[w++] = (char)*p;
        }
    }
    b[w] = '\0';
    return b;
}

const char *kv_text_q(const char *s)
{
    static char bufs[4][512];
    static unsigned next;
    char *b = bufs[next++ % 4];
    return kv_text_quote(b, sizeof bufs[0], s, 120);
}

/* ------------------------------------------------------------------------ */
/* Progress                                                                 */

static int progress_off;

int kv_progress(const char *fmt, ...)
{
    if (progress_off)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    int n = vfprintf(stderr, fmt, ap);
    va_end(ap);
    if (n < 0 || fflush(stderr) != 0 || ferror(stderr)) {
        progress_off = 1; /* EPIPE, a full disk: keep working, stop telling */
        clearerr(stderr);
        return -1;
    }
    return 0;
}

int kv_progress_on(void) { return !progress_off; }

