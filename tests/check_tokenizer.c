/*
 * check_tokenizer.c - the tokenizer.bin loader and the BPE encoder.
 *
 * The encoder is checked against a naive twin written here from the rule
 * alone (strings, linear scans, no index), on hand-worked merges, and by
 * decode(encode(text)) == text round trips. The loader is checked on every
 * truncation of a valid file and on lying lengths: each must be
 * KV_ERR_FORMAT, never an overread (ASan watches).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../bench/model/tokenizer.h"

/* ------------------------------------------------------------------------ */
/* A small sentencepiece-like vocabulary                                    */

/* ids 0..2 specials, 3..258 byte fallback, then these with their scores. */
static const char *const extra[] = {" ", "a", "b", "c", "ab", "bc", "abc", " a", " ab",
                                    "\xc3\xa9", "c\xc3\xa9", "aa", "aaa"};
static const float extra_score[] = {-1, -2, -3, -4, 5, 2, 6, 3, 4, -5, 1, 7, 8};
#define N_EXTRA ((int32_t)(sizeof extra / sizeof extra[0]))
#define N_VOCAB (3 + 256 + N_EXTRA)

static char hexes[256][7];
static const char *pieces[N_VOCAB];
static int32_t lens[N_VOCAB];
static float scores[N_VOCAB];

static void make_vocab(void)
{
    pieces[0] = "<unk>";
    pieces[1] = "<s>";
    pieces[2] = "</s>";
    for (int b = 0; b < 256; b++) {
        snprintf(hexes[b], sizeof hexes[b], "<0x%02X>", b);
        pieces[3 + b] = hexes[b];
    }
    for (int i = 0; i < N_EXTRA; i++)
        pieces[259 + i] = extra[i];
    for (int i = 0; i < N_VOCAB; i++) {
        lens[i] = (int32_t)strlen(pieces[i]);
        scores[i] = i >= 259 ? extra_score[i - 259] : 0.0f;
    }
}

static int32_t id_of(const char *s)
{
    for (int i = 0; i < N_VOCAB; i++) {
        if (lens[i] == (int32_t)strlen(s) && memcmp(pieces[i], s, (size_t)lens[i]) == 0)
            return i;
    }
    return -1;
}

/* ------------------------------------------------------------------------ */
/* Naive twin: the rule, written as plainly as possible                     */

static int32_t naive_find(const char *s, size_t n)
{
    for (int i = 0; i < N_VOCAB; i++) { /* lowest id wins */
        if ((size_t)lens[i] == n && memcmp(pieces[i], s, n) == 0)
            return i;
    }
    return -1;
}

/* ids (without BOS) of text under the dummy-prefix rule; returns count. */
static int naive_encode(const char *text, size_t len, int32_t *ids)
{
    int n = 0;
    if (len > 0)
        ids[n++] = naive_find(" ", 1);
    for (size_t i = 0; i < len;) {
        unsigned char c = (unsigned char)text[i];
        size_t cl = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
        if (i + cl > len)
            cl = 1;
        for (size_t j = 1; j < cl; j++) {
            if (((unsigned char)text[i + j] >> 6) != 2)
                cl = 1;
        }
        int32_t id = naive_find(text + i, cl);
        if (id >= 0) {
            ids[n++] = id;
        } else {
            for (size_t j = 0; j < cl; j++) {
                char hex[8];
                snprintf(hex, sizeof hex, "<0x%02X>", (unsigned char)text[i + j]);
                ids[n++] = naive_find(hex, 6);
            }
        }
        i += cl;
    }
    for (;;) {
        int best = -1;
        int32_t best_id = -1;
        for (int i = 0; i + 1 < n; i++) {
            char buf[64];
            size_t la = (size_t)lens[ids[i]], lb = (size_t)lens[ids[i + 1]];
            memcpy(buf, pieces[ids[i]], la);
            memcpy(buf + la, pieces[ids[i + 1]], lb);
            int32_t id = naive_find(buf, la + lb);
            if (id >= 0 && (best < 0 || scores[id] > scores[best_id])) {
                best = i;
                best_id = id;
            }
        }
        if (best < 0)
            break;
        ids[best] = best_id;
        for (int i = best + 1; i + 1 < n; i++)
            ids[i] = ids[i + 1];
        n--;
    }
    return n;
}

static struct kv_tokenizer *make_tok(void)
{
    make_vocab();
    struct kv_tokenizer *t = NULL;
    ck_assert_int_eq(kv_tokenizer_create(&t, N_VOCAB, pieces, lens, scores), KV_OK);
    return t;
}

/* ------------------------------------------------------------------------ */
/* Encode                                                                   */

START_TEST(test_hand_merges)
{
    struct kv_tokenizer *t = make_tok();
    int32_t ids[16], n;
    /* "abc": ab (5) beats bc (2); then ab+c = abc (6). */
    ck_assert_int_eq(kv_tokenizer_encode(t, "abc", 3, 0, ids, 16, &n), KV_OK);
    ck_assert_int_eq(n, 1);
    ck_assert_int_eq(ids[0], id_of("abc"));
    /* With BOS and the dummy prefix: <s> " " a b c. Pairs (" ",a) 3, (a,b) 5,
     * (b,c) 2: ab merges; then (" ",ab) 4 vs (ab,c) 6: abc; (" ",abc) has
     * no token. */
    ck_assert_int_eq(kv_tokenizer_encode(t, "abc", 3, KV_TOK_BOS | KV_TOK_DUMMY_PREFIX,
                                         ids, 16, &n), KV_OK);
    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(ids[0], 1);
    ck_assert_int_eq(ids[1], id_of(" "));
    ck_assert_int_eq(ids[2], id_of("abc"));
    /* "aaaa": the three (a,a) pairs tie at 7 and the leftmost merges; then
     * (aa,a) -> aaa (8) beats (a,a) -> aa (7); (aaa,a) has no token. */
    ck_assert_int_eq(kv_tokenizer_encode(t, "aaaa", 4, 0, ids, 16, &n), KV_OK);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(ids[0], id_of("aaa"));
    ck_assert_int_eq(ids[1], id_of("a"));
    /* A known code point, a merge across it, and byte fallback for the rest. */
    ck_assert_int_eq(kv_tokenizer_encode(t, "c\xc3\xa9\x01", 4, KV_TOK_EOS, ids, 16, &n),
                     KV_OK);
    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(ids[0], id_of("c\xc3\xa9"));
    ck_assert_int_eq(ids[1], 3 + 1);
    ck_assert_int_eq(ids[2], 2);
    kv_tokenizer_destroy(t);
}
END_TEST

/* Random texts over an alphabet that exercises merges, UTF-8 and fallback. */
START_TEST(test_matches_naive_and_round_trips)
{
    struct kv_tokenizer *t = make_tok();
    static const char *const alphabet[] = {"a", "b", "c", " ", "\xc3\xa9", "\x01", "\xff",
                                           "\xe2\x82\xac", "\xc3"};
    srand(1234);
    for (int trial = 0; trial < 400; trial++) {
        char text[128];
        size_t len = 0;
        int parts = rand() % 24;
        for (int i = 0; i < parts; i++) {
            const char *p = alphabet[rand() % 9];
            memcpy(text + len, p, strlen(p));
            len += strlen(p);
        }
        int32_t ids[256], want[256], n;
        ck_assert_int_eq(kv_tokenizer_encode(t, text, len, KV_TOK_BOS | KV_TOK_DUMMY_PREFIX,
                                             ids, (int32_t)len + 3, &n), KV_OK);
        int wn = naive_encode(text, len, want);
        ck_assert_int_eq(n, wn + 1);
        ck_assert_int_eq(ids[0], 1);
        for (int i = 0; i < wn; i++)
            ck_assert_int_eq(ids[i + 1], want[i]);
        char out[256];
        size_t olen;
        kv_tokenizer_decode_all(t, ids, n, out, sizeof out, &olen);
        ck_assert_uint_eq(olen, len);
        ck_assert(memcmp(out, text, len) == 0);
    }
    kv_tokenizer_destroy(t);
}
END_TEST

START_TEST(test_bytes_tokenizer)
{
    struct kv_tokenizer *t = NULL;
    ck_assert_int_eq(kv_tokenizer_create_bytes(&t), KV_OK);
    ck_assert_int_eq(kv_tokenizer_vocab_size(t), 256);
    ck_assert_int_eq(kv_tokenizer_bos(t), -1);
    ck_assert_uint_eq(kv_tokenizer_default_flags(t), 0);
    char text[256];
    for (int i = 0; i < 256; i++)
        text[i] = (char)(255 - i); /* every byte, NUL included */
    int32_t ids[259], n;
    ck_assert_int_eq(kv_tokenizer_encode(t, text, 256, 0, ids, 259, &n), KV_OK);
    ck_assert_int_eq(n, 256);
    for (int i = 0; i < 256; i++)
        ck_assert_int_eq(ids[i], 255 - i);
    char out[300];
    size_t olen;
    kv_tokenizer_decode_all(t, ids, n, out, sizeof out, &olen);
    ck_assert_uint_eq(olen, 256);
    ck_assert(memcmp(out, text, 256) == 0);
    kv_tokenizer_destroy(t);
}
END_TEST

START_TEST(test_encode_errors)
{
    struct kv_tokenizer *b = NULL, *t = make_tok();
    ck_assert_int_eq(kv_tokenizer_create_bytes(&b), KV_OK);
    int32_t ids[8], n;
    ck_assert_int_eq(kv_tokenizer_encode(b, "x", 1, KV_TOK_BOS, ids, 8, &n), KV_ERR_INVALID);
    ck_assert_int_eq(kv_tokenizer_encode(t, "abcabcab", 8, 0, ids, 2, &n), KV_ERR_INVALID);
    /* A vocabulary with no token for byte 'z'. */
    struct kv_tokenizer *small = NULL;
    const char *p[] = {"a"};
    int32_t l[] = {1};
    float s[] = {0};
    ck_assert_int_eq(kv_tokenizer_create(&small, 1, p, l, s), KV_OK);
    ck_assert_int_eq(kv_tokenizer_encode(small, "az", 2, 0, ids, 8, &n), KV_ERR_INVALID);
    ck_assert_int_eq(kv_tokenizer_encode(small, "aa", 2, 0, ids, 8, &n), KV_OK);
    ck_assert_int_eq(n, 2);
    kv_tokenizer_destroy(small);
    kv_tokenizer_destroy(b);
    kv_tokenizer_destroy(t);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Files                                                                    */

static char tmpdir[64];

static void path_in_tmp(char *out, size_t cap, const char *name)
{
    if (tmpdir[0] == '\0') {
        strcpy(tmpdir, "/tmp/kvlab_tok_XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    }
    snprintf(out, cap, "%s/%s", tmpdir, name);
}

static void write_bytes(const char *path, const unsigned char *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(b, 1, n, f), n);
    fclose(f);
}

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)sz);
    ck_assert_uint_eq(fread(b, 1, (size_t)sz, f), (size_t)sz);
    fclose(f);
    *n = (size_t)sz;
    return b;
}

START_TEST(test_save_load_round_trip)
{
    int64_t live0 = kv_alloc_live();
    struct kv_tokenizer *t = make_tok(), *u = NULL;
    char path[128];
    path_in_tmp(path, sizeof path, "tok.bin");
    ck_assert_int_eq(kv_tokenizer_save(t, path), KV_OK);
    ck_assert_int_eq(kv_tokenizer_load(&u, path, N_VOCAB), KV_OK);
    ck_assert_int_eq(kv_tokenizer_vocab_size(u), N_VOCAB);
    ck_assert_int_eq(kv_tokenizer_bos(u), 1);
    ck_assert_int_eq(kv_tokenizer_eos(u), 2);
    for (int32_t i = 0; i < N_VOCAB; i++) {
        int32_t l;
        const char *p = kv_tokenizer_piece(u, i, &l);
        ck_assert_int_eq(l, lens[i]);
        ck_assert(memcmp(p, pieces[i], (size_t)l) == 0);
    }
    kv_tokenizer_destroy(u);
    /* 0 = read to the end; a different count is a format error. */
    ck_assert_int_eq(kv_tokenizer_load(&u, path, 0), KV_OK);
    ck_assert_int_eq(kv_tokenizer_vocab_size(u), N_VOCAB);
    kv_tokenizer_destroy(u);
    ck_assert_int_eq(kv_tokenizer_load(&u, path, N_VOCAB - 1), KV_ERR_FORMAT);
    ck_assert_ptr_null(u);
    ck_assert_int_eq(kv_tokenizer_load(&u, path, N_VOCAB + 1), KV_ERR_FORMAT);
    ck_assert_int_eq(kv_tokenizer_load(&u, "/nonexistent/tok.bin", 0), KV_ERR_IO);
    /* Failing each allocation in turn leaks nothing. */
    for (int64_t k = 1; k < 32; k++) {
        kv_alloc_fail_at(k, 0);
        enum kv_status s = kv_tokenizer_load(&u, path, 0);
        kv_alloc_fail_at(0, 0);
        if (s == KV_OK) {
            kv_tokenizer_destroy(u);
            break;
        }
        ck_assert_int_eq(s, KV_ERR_NOMEM);
        ck_assert_ptr_null(u);
    }
    kv_tokenizer_destroy(t);
    unlink(path);
    ck_assert_int_eq(kv_alloc_live(), live0);
}
END_TEST

START_TEST(test_malformed_files)
{
    int64_t live0 = kv_alloc_live();
    struct kv_tokenizer *t = make_tok(), *u = NULL;
    char path[128], bad[128];
    path_in_tmp(path, sizeof path, "good.bin");
    path_in_tmp(bad, sizeof bad, "bad.bin");
    ck_assert_int_eq(kv_tokenizer_save(t, path), KV_OK);
    size_t n;
    unsigned char *b = slurp(path, &n);
    /* Every proper prefix is truncated (a cut between two tokens is too
     * when the model's vocabulary size is given). */
    for (size_t cut = 0; cut < n; cut++) {
        write_bytes(bad, b, cut);
        ck_assert_int_eq(kv_tokenizer_load(&u, bad, N_VOCAB), KV_ERR_FORMAT);
        ck_assert_ptr_null(u);
    }
    /* Token 0's length: negative, past the end, above max_token_length. */
    const int32_t lies[] = {-1, (int32_t)n, 1 << 30, 7};
    for (int i = 0; i < 4; i++) {
        unsigned char *c = malloc(n);
        memcpy(c, b, n);
        int32_t maxlen = 6;
        memcpy(c, &maxlen, 4);
        memcpy(c + 8, &lies[i], 4);
        write_bytes(bad, c, n);
        ck_assert_int_eq(kv_tokenizer_load(&u, bad, 0), KV_ERR_FORMAT);
        free(c);
    }
    /* Trailing garbage after the last token. */
    unsigned char *c = malloc(n + 3);
    memcpy(c, b, n);
    memset(c + n, 0, 3);
    write_bytes(bad, c, n + 3);
    ck_assert_int_eq(kv_tokenizer_load(&u, bad, 0), KV_ERR_FORMAT);
    free(c);
    free(b);
    unlink(bad);
    unlink(path);
    kv_tokenizer_destroy(t);
    ck_assert_int_eq(kv_alloc_live(), live0);
}
END_TEST

START_TEST(test_token_text)
{
    struct kv_tokenizer *t = make_tok(), *b = NULL;
    ck_assert_int_eq(kv_tokenizer_create_bytes(&b), KV_OK);
    char buf[32];
    ck_assert_str_eq(kv_token_text(b, 256, -1, 'a', buf, sizeof buf), "'a'");
    ck_assert_str_eq(kv_token_text(b, 256, -1, 0x9f, buf, sizeof buf), "'\\x9f'");
    ck_assert_str_eq(kv_token_text(b, 256, -1, '\'', buf, sizeof buf), "'\\x27'");
    ck_assert_str_eq(kv_token_text(NULL, 256, -1, 'Z', buf, sizeof buf), "'Z'");
    ck_assert_str_eq(kv_token_text(NULL, 300, -1, 299, buf, sizeof buf), "#299");
    ck_assert_str_eq(kv_token_text(t, N_VOCAB, -1, 1, buf, sizeof buf), "'<s>'");
    ck_assert_str_eq(kv_token_text(t, N_VOCAB, -1, id_of(" ab"), buf, sizeof buf), "' ab'");
    /* After BOS the dummy-prefix space is dropped; byte fallback shows its byte. */
    ck_assert_str_eq(kv_token_text(t, N_VOCAB, 1, id_of(" ab"), buf, sizeof buf), "'ab'");
    ck_assert_str_eq(kv_token_text(t, N_VOCAB, -1, 3 + 'q', buf, sizeof buf), "'q'");
    ck_assert_str_eq(kv_token_text(t, N_VOCAB, -1, N_VOCAB + 5, buf, sizeof buf), "#277");
    /* The smallest allowed buffer holds one escaped byte. */
    char small[16];
    kv_token_text(b, 256, -1, 0x01, small, sizeof small);
    ck_assert_str_eq(small, "'\\x01'");
    kv_tokenizer_destroy(b);
    kv_tokenizer_destroy(t);
}
END_TEST

static Suite *tokenizer_suite(void)
{
    Suite *s = suite_create("tokenizer");
    TCase *tc = tcase_create("encode");
    tcase_add_test(tc, test_hand_merges);
    tcase_add_test(tc, test_matches_naive_and_round_trips);
    tcase_add_test(tc, test_bytes_tokenizer);
    tcase_add_test(tc, test_encode_errors);
    tcase_add_test(tc, test_token_text);
    suite_add_tcase(s, tc);
    tc = tcase_create("files");
    tcase_add_test(tc, test_save_load_round_trip);
    tcase_add_test(tc, test_malformed_files);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(tokenizer_suite());
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    if (tmpdir[0] != '\0')
        rmdir(tmpdir);
    return failed;
}
