/*
 * fuzz_tok.c - libFuzzer target for the tokenizer.bin reader and the BPE
 * encoder behind it (bench/model/tokenizer.c; `make fuzz-tok`).
 *
 * The input is written to a temporary file and loaded with
 * kv_tokenizer_load (any vocabulary size, then the size the first load
 * found, then one more, which must fail). When it loads, a fixed text
 * (ASCII, multi-byte UTF-8, an invalid byte, a NUL) is encoded with every
 * flag combination, and every id of the vocabulary is decoded, looked up
 * and printed with kv_token_text.
 *
 * The design decision: beyond "no crash", the target checks the contracts
 * the CLI relies on: a failed load is KV_ERR_FORMAT or KV_ERR_IO and leaves
 * *out NULL; an encode that succeeds returns ids inside the vocabulary and
 * no more than max_ids of them; kv_token_text always NUL-terminates inside
 * its buffer; nothing allocated is left behind.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../bench/model/tokenizer.h"

#define MAX_FILE (1u << 20)
/* Encoding is quadratic in the text; keep the vocabulary lookups bounded. */
#define MAX_IDS 64

static char path[64];
static int fd = -1;

static void remove_file(void)
{
    if (fd >= 0)
        unlink(path);
}

static const char TEXT[] = "KV cache \xc3\xa9t\xc3\xa9 \xe2\x82\xac\xff<s>\0end";

static void exercise(const struct kv_tokenizer *t)
{
    const int32_t n = kv_tokenizer_vocab_size(t);
    if (n < 1)
        abort();
    for (unsigned flags = 0; flags < 8; flags++) {
        int32_t ids[MAX_IDS], n_ids = -1;
        int32_t cap = flags == 7 ? 3 : MAX_IDS; /* once with too small a buffer */
        enum kv_status s = kv_tokenizer_encode(t, TEXT, sizeof TEXT - 1, flags, ids, cap,
                                               &n_ids);
        if (s != KV_OK) {
            if (s != KV_ERR_INVALID)
                abort();
            continue;
        }
        if (n_ids < 0 || n_ids > cap)
            abort();
        for (int32_t i = 0; i < n_ids; i++)
            if (ids[i] < 0 || ids[i] >= n)
                abort();
        char out[256];
        size_t len = 0;
        kv_tokenizer_decode_all(t, ids, n_ids, out, sizeof out, &len);
        if (strlen(out) > sizeof out - 1 || (len < sizeof out && strlen(out) > len))
            abort();
    }
    int32_t prev = -1;
    for (int32_t id = -1; id <= n && id < 4096; id++) {
        int32_t plen = -1;
        const char *piece = kv_tokenizer_piece(t, id, &plen);
        if ((id < 0 || id >= n) != (piece == NULL) || (piece != NULL && plen < 0))
            abort();
        const char *bytes;
        size_t bl = kv_tokenizer_decode(t, prev, id, &bytes);
        if (bytes == NULL || (bl > 0 && piece == NULL))
            abort();
        char buf[24];
        memset(buf, 'x', sizeof buf);
        kv_token_text(t, n, prev, id, buf, 16);
        if (memchr(buf, '\0', 16) == NULL || memchr(buf + 16, 'x', 8) != buf + 16 ||
            buf[23] != 'x')
            abort();
        prev = id;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (fd < 0) {
        snprintf(path, sizeof path, "/tmp/kvlab_fuzz_tok_%ld.bin", (long)getpid());
        fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0)
            abort();
        atexit(remove_file);
    }
    if (size > MAX_FILE)
        return 0;
    if (ftruncate(fd, 0) != 0 || (size > 0 && pwrite(fd, data, size, 0) != (ssize_t)size))
        abort();

    struct kv_tokenizer *t = NULL;
    enum kv_status s = kv_tokenizer_load(&t, path, 0);
    if (s != KV_OK) {
        if (t != NULL || (s != KV_ERR_FORMAT && s != KV_ERR_IO))
            abort();
    } else {
        const int32_t n = kv_tokenizer_vocab_size(t);
        exercise(t);
        kv_tokenizer_destroy(t);
        /* The exact count loads, one more token than the file has does not. */
        t = NULL;
        if (kv_tokenizer_load(&t, path, n) != KV_OK || kv_tokenizer_vocab_size(t) != n)
            abort();
        kv_tokenizer_destroy(t);
        t = NULL;
        if (n < INT32_MAX && (kv_tokenizer_load(&t, path, n + 1) != KV_ERR_FORMAT || t))
            abort();
    }
    if (kv_alloc_live() != 0)
        abort();
    return 0;
}
