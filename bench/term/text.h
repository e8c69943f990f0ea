/*
 * text.h - the one text rule for what kvlab prints, below every layer that
 * prints (results, measure, teach, cli):
 *
 *   kv_text_quote / kv_text_q  a value echoed in a message, quoted: control
 *                              bytes, backslashes and quotes escaped, so a
 *                              message stays one line whatever a user typed;
 *   kv_text_sentence           a sentence made below the CLI (a strategy's
 *                              why) with its control bytes escaped;
 *   kv_progress                progress and notes on stderr that stop,
 *                              silently, after the first failed write.
 */
#ifndef KV_TEXT_H
#define KV_TEXT_H

#include <stddef.h>

/* printf to stderr for progress and notes; after a write fails (a closed
 * pipe, a full disk) it prints nothing more. Returns 0, or -1 once off. */
int kv_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* 1 while kv_progress still writes. */
int kv_progress_on(void);

/*
 * Writes s into dst (cap bytes, NUL-terminated) with every byte below 0x20,
 * 0x7f, backslash and the single quote escaped (\n, \t, \r, \\, \', \xNN),
 * and at most max bytes of s shown (then "..."), so the text can sit inside
 * '...' in a one-line message. Returns dst.
 */
char *kv_text_quote(char *dst, size_t cap, const char *s, size_t max);

/* kv_text_quote into one of a few rotating static buffers (up to 120 bytes
 * of s shown): for message arguments, fprintf(stderr, "'%s'", kv_text_q(v)).
 * Not thread-safe: the CLI prints from one thread. NULL gives "". */
const char *kv_text_q(const char *s);

/* A sentence made below the CLI (a strategy's why, a loader's reason) that
 * may carry a user's value: control bytes and backslashes escaped, quotes
 * kept, into one of two rotating static buffers (at most ~590 bytes). */
const char *kv_text_sentence(const char *s);

#endif /* KV_TEXT_H */
