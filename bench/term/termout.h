/*
 * termout.h - text for a terminal of a given width: how wide it is, and a
 * line builder that wraps at spaces with a hanging indent.
 *
 * The design decision: a line is built whole (kv_line_addf, which may embed
 * colour escapes) and only then printed, so the wrapper measures what is
 * visible - ANSI escape sequences take no columns and a UTF-8 character
 * takes one - and breaks only at spaces. A word longer than the line stays
 * whole rather than being cut, so a token is never split across lines.
 */
#ifndef KV_TERMOUT_H
#define KV_TERMOUT_H

#include <stddef.h>
#include <stdio.h>

/* Width used when neither the terminal nor COLUMNS says. */
#define KV_TERM_DEFAULT_WIDTH 100
/* Narrowest and widest width accepted (from COLUMNS or an option). */
#define KV_TERM_MIN_WIDTH 40
#define KV_TERM_MAX_WIDTH 1000

/*
 * Columns to format for: the terminal's width when fd is a terminal that
 * reports one, else COLUMNS when it holds an integer in [MIN, MAX], else
 * KV_TERM_DEFAULT_WIDTH.
 */
int kv_term_width(int fd);

/* Visible columns of s: escape sequences (ESC [ ... letter) count 0, UTF-8
 * continuation bytes 0, every other byte 1. */
int kv_visible_width(const char *s);

/* A soft break: a place the wrapper may break a line that has no space
 * there (inside a long quoted string); it takes no column and is never
 * printed. */
#define KV_LINE_SOFT '\001'

/* A line under construction (truncated, never overrun, past its capacity). */
struct kv_line {
    char buf[8192];
    size_t len;
};

void kv_line_clear(struct kv_line *L);
void kv_line_addf(struct kv_line *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * Prints L to f, broken at spaces (or soft breaks) so that no output line is
 * wider than width (unless one word is), every line after the first indented by
 * `indent` spaces; then a newline. Clears L.
 */
void kv_line_emit(FILE *f, struct kv_line *L, int width, int indent);

#endif /* KV_TERMOUT_H */
