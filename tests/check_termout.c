/*
 * check_termout.c - terminal width and the wrapping line builder
 * (bench/term/termout.c) that `kvlab demo` prints through.
 *
 * Checked: escape sequences and UTF-8 continuation bytes take no columns;
 * no wrapped line is wider than the width unless a single word is; words
 * are never split and come out in order (the text survives wrapping up to
 * the blanks at the breaks); continuation lines carry the indent; a soft
 * break is used only where a line has no space to break at and is never
 * printed; the width comes from COLUMNS when stdout is not a terminal, and
 * is 100 when COLUMNS is unset, not a number or out of range.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../bench/term/termout.h"

/* Emits L at width and indent into buf (NUL-terminated). */
static void emit_to(char *buf, size_t cap, struct kv_line *L, int width, int indent)
{
    FILE *f = fmemopen(buf, cap, "w");
    ck_assert_ptr_nonnull(f);
    kv_line_emit(f, L, width, indent);
    fclose(f);
}

/* Every line's visible width <= width; returns the number of lines. */
static int check_widths(char *out, int width)
{
    int n = 0;
    for (char *line = strtok(out, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        ck_assert_msg(kv_visible_width(line) <= width, "line '%s' is %d wide (> %d)", line,
                      kv_visible_width(line), width);
        n++;
    }
    return n;
}

/* s without blanks, for comparing the words' order before and after. */
static void squeeze(const char *s, char *out)
{
    for (; *s; s++)
        if (*s != ' ' && *s != '\n' && *s != KV_LINE_SOFT)
            *out++ = *s;
    *out = '\0';
}

START_TEST(test_visible_width)
{
    ck_assert_int_eq(kv_visible_width("abc"), 3);
    ck_assert_int_eq(kv_visible_width("\033[1;38;5;240ma\033[0m"), 1);
    ck_assert_int_eq(kv_visible_width("\xc2\xb7x"), 2); /* middle dot, x */
    ck_assert_int_eq(kv_visible_width(""), 0);
    char soft[] = {'a', KV_LINE_SOFT, 'b', '\0'};
    ck_assert_int_eq(kv_visible_width(soft), 2);
}
END_TEST

START_TEST(test_wrap_widths_and_words)
{
    static const int widths[] = {40, 57, 80, 100};
    const char *text = "  FLOPs               this step 20660 (attention 1152)   without a cache "
                       "114564 (attention 5760)   5.5x and some more words to wrap around the "
                       "edge of a narrow terminal, twice over if need be";
    for (size_t k = 0; k < sizeof widths / sizeof widths[0]; k++) {
        struct kv_line L;
        kv_line_clear(&L);
        kv_line_addf(&L, "%s", text);
        char out[4096], a[4096], b[4096];
        emit_to(out, sizeof out, &L, widths[k], 22);
        ck_assert_int_eq(L.len, 0); /* emit clears the line */
        squeeze(text, a);
        squeeze(out, b);
        ck_assert_str_eq(a, b); /* same words, same order, none split */
        /* continuation lines are indented by 22 */
        const char *nl = strchr(out, '\n');
        if (nl != NULL && nl[1] != '\0')
            ck_assert(strncmp(nl + 1, "                      ", 22) == 0 && nl[23] != ' ');
        int lines = check_widths(out, widths[k]);
        ck_assert_int_ge(lines, (int)strlen(text) / widths[k]);
    }
}
END_TEST

START_TEST(test_colour_does_not_count)
{
    struct kv_line L;
    kv_line_clear(&L);
    for (int i = 0; i < 30; i++)
        kv_line_addf(&L, "\033[32mword%02d\033[0m ", i);
    char out[8192];
    emit_to(out, sizeof out, &L, 40, 2);
    /* 7 visible columns per word: 5 words fit in 40 columns, not 1 */
    ck_assert_int_eq(check_widths(out, 40), 6);
}
END_TEST

START_TEST(test_long_word_and_soft_breaks)
{
    struct kv_line L;
    char out[4096], sq[4096];
    /* one word longer than the width stays whole on its own line */
    kv_line_clear(&L);
    kv_line_addf(&L, "short %s tail", "0123456789012345678901234567890123456789012345");
    emit_to(out, sizeof out, &L, 40, 4);
    ck_assert(strstr(out, "0123456789012345678901234567890123456789012345") != NULL);
    /* soft breaks: used when a line has no space, never printed */
    kv_line_clear(&L);
    kv_line_addf(&L, "s: \"");
    for (int i = 0; i < 100; i++)
        kv_line_addf(&L, "\\x%02x%c", i, KV_LINE_SOFT);
    kv_line_addf(&L, "\"");
    emit_to(out, sizeof out, &L, 40, 4);
    ck_assert(strchr(out, KV_LINE_SOFT) == NULL);
    ck_assert_int_ge(check_widths(out, 40), 10);
    /* a space is preferred to a soft break on the same line */
    kv_line_clear(&L);
    kv_line_addf(&L, "aaaa bbbb%ccc%cdd%cee%cff%cgg", KV_LINE_SOFT, KV_LINE_SOFT, KV_LINE_SOFT,
                 KV_LINE_SOFT, KV_LINE_SOFT);
    emit_to(out, sizeof out, &L, 12, 0);
    ck_assert_str_eq(out, "aaaa\nbbbbccddeeff\ngg\n"); /* the space first, then a soft break */
    squeeze(out, sq);
    ck_assert_str_eq(sq, "aaaabbbbccddeeffgg");
    /* an empty line is one newline */
    kv_line_clear(&L);
    emit_to(out, sizeof out, &L, 40, 4);
    ck_assert_str_eq(out, "\n");
}
END_TEST

START_TEST(test_width_from_columns)
{
    /* stdout of a test is not a terminal: COLUMNS decides (a pipe here) */
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    setenv("COLUMNS", "80", 1);
    ck_assert_int_eq(kv_term_width(fds[1]), 80);
    setenv("COLUMNS", "160", 1);
    ck_assert_int_eq(kv_term_width(fds[1]), 160);
    setenv("COLUMNS", "abc", 1);
    ck_assert_int_eq(kv_term_width(fds[1]), KV_TERM_DEFAULT_WIDTH);
    setenv("COLUMNS", "10", 1); /* narrower than anything readable */
    ck_assert_int_eq(kv_term_width(fds[1]), KV_TERM_DEFAULT_WIDTH);
    setenv("COLUMNS", "80x", 1);
    ck_assert_int_eq(kv_term_width(fds[1]), KV_TERM_DEFAULT_WIDTH);
    unsetenv("COLUMNS");
    ck_assert_int_eq(kv_term_width(fds[1]), KV_TERM_DEFAULT_WIDTH);
    close(fds[0]);
    close(fds[1]);
}
END_TEST

static Suite *termout_suite(void)
{
    Suite *s = suite_create("termout");
    TCase *tc = tcase_create("wrap");
    tcase_add_test(tc, test_visible_width);
    tcase_add_test(tc, test_wrap_widths_and_words);
    tcase_add_test(tc, test_colour_does_not_count);
    tcase_add_test(tc, test_long_word_and_soft_breaks);
    tcase_add_test(tc, test_width_from_columns);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(termout_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed;
}
