/*
 * fuzz_ckpt.c - libFuzzer target for the llama2.c checkpoint reader
 * (bench/model/checkpoint.c): header parsing, the exact-size check and the
 * memory-mapped load (`make fuzz-ckpt`).
 *
 * Each input is used twice, through a temporary file:
 *   1. as the whole file: kv_checkpoint_read_header and kv_checkpoint_load
 *      must agree, and a random file almost always fails cleanly;
 *   2. resized to the exact byte count its first 28 bytes declare (when
 *      that is at most MAX_FILE): the header is then self-consistent, so
 *      the load must succeed whenever kv_checkpoint_file_bytes accepts the
 *      header, and a one-token forward pass runs over the mapped weights,
 *      reading every weight array (an array placed past the end of the
 *      mapping would fault there).
 * The design decision: the target re-derives the header's meaning itself
 * (seven little-endian int32, negative vocab = unshared classifier) and
 * checks the loader against it, beyond the sanitizers' "no crash". A load
 * may also refuse a self-consistent file for a NaN or infinity in a weight
 * tensor (tests/fuzz/ckpt.dict feeds such floats): then the file must hold a
 * non-finite float and kv_file_why() must name the tensor; a file whose
 * floats are all finite must load.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../bench/model/checkpoint.h"
#include "../../bench/model/file_check.h"

/* Largest file step 2 builds: keeps every run fast and small. */
#define MAX_FILE (256u << 10)

static char path[64];
static int fd = -1;

static void remove_file(void)
{
    if (fd >= 0)
        unlink(path);
}

static void write_file(const uint8_t *data, size_t size, size_t file_size)
{
    if (ftruncate(fd, 0) != 0 || ftruncate(fd, (off_t)file_size) != 0)
        abort();
    size_t n = size < file_size ? size : file_size;
    if (n > 0 && pwrite(fd, data, n, 0) != (ssize_t)n)
        abort();
}

static int32_t le_i32(const uint8_t *b)
{
    uint32_t u = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                 (uint32_t)b[3] << 24;
    return (int32_t)u;
}

/* 1 when the file's floats after the header (first n bytes) are all finite. */
static int all_finite(const uint8_t *data, size_t n)
{
    for (size_t i = KV_CHECKPOINT_HEADER_BYTES; i + 4 <= n; i += 4) {
        uint32_t u = (uint32_t)data[i] | (uint32_t)data[i + 1] << 8 |
                     (uint32_t)data[i + 2] << 16 | (uint32_t)data[i + 3] << 24;
        if ((u & 0x7f800000u) == 0x7f800000u)
            return 0;
    }
    return 1;
}

/* Loads path; returns the status; checks header/load agreement. The file
 * is data[0..n) (zero-padded past size). */
static enum kv_status load_and_check(struct kv_model **out, const uint8_t *data, size_t n)
{
    struct kv_model_config h;
    enum kv_status sh = kv_checkpoint_read_header(path, &h);
    enum kv_status sl = kv_checkpoint_load(path, out);
    if (sh == KV_OK && sl == KV_ERR_FORMAT) {
        /* only a non-finite weight refuses a file whose header is right */
        if (all_finite(data, n) || strstr(kv_file_why(), "tensor ") == NULL || *out != NULL)
            abort();
        return sl;
    }
    if (sh != sl)
        abort(); /* the two validate the same way */
    if (sl != KV_OK) {
        if (*out != NULL || (sl != KV_ERR_FORMAT && sl != KV_ERR_IO && sl != KV_ERR_NOMEM))
            abort();
        return sl;
    }
    if (memcmp(&h, &(*out)->cfg, sizeof h) != 0 || kv_model_config_check(&h) != KV_OK)
        abort();
    return sl;
}

/* One token through every layer of the mapped model. */
static void run_forward(const struct kv_model *m)
{
    const struct kv_model_config *c = &m->cfg;
    struct kv_cache_config cc = {
        .n_layers = c->n_layers,
        .batch = 1,
        .n_kv_heads = c->n_kv_heads,
        .head_dim = c->dim / c->n_heads,
        .max_len = c->max_len,
    };
    struct kv_cache *cache = NULL;
    struct kv_runner *r = NULL;
    float *logits = kv_alloc((size_t)c->vocab_size * sizeof(float));
    int32_t tok = c->vocab_size - 1;
    if (logits == NULL || kv_cache_create(&cache, kv_strategy_find("dynamic"), &cc, NULL) != KV_OK ||
        kv_runner_create(&r, m, 1, 1, 1) != KV_OK ||
        kv_forward(r, m, cache, &tok, 1, 0, NULL, logits, NULL) != KV_OK)
        abort(); /* tiny sizes: none of these may fail */
    kv_runner_destroy(r);
    kv_cache_destroy(cache);
    kv_free(logits);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (fd < 0) {
        snprintf(path, sizeof path, "/tmp/kvlab_fuzz_ckpt_%ld.bin", (long)getpid());
        fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0)
            abort();
        atexit(remove_file);
    }
    if (size > MAX_FILE)
        return 0;

    /* 1. The input as the whole file. */
    struct kv_model *m = NULL;
    write_file(data, size, size);
    if (load_and_check(&m, data, size) == KV_OK)
        kv_model_destroy(m);

    /* 2. Resized to the size its header declares. */
    if (size >= KV_CHECKPOINT_HEADER_BYTES) {
        int32_t v[7];
        for (int i = 0; i < 7; i++)
            v[i] = le_i32(data + 4 * i);
        struct kv_model_config c = {
            .dim = v[0],
            .hidden_dim = v[1],
            .n_layers = v[2],
            .n_heads = v[3],
            .n_kv_heads = v[4],
            .vocab_size = v[5] < 0 && v[5] != INT32_MIN ? -v[5] : v[5],
            .max_len = v[6],
            .mlp = 1,
            .shared_classifier = v[5] > 0,
        };
        size_t want;
        if (v[5] != INT32_MIN && kv_checkpoint_file_bytes(&c, &want) == KV_OK &&
            want <= MAX_FILE) {
            write_file(data, size, want);
            m = NULL;
            enum kv_status s = load_and_check(&m, data, size < want ? size : want);
            if (s != KV_OK && s != KV_ERR_FORMAT)
                abort(); /* exact size and a valid header must load (or name a NaN) */
            if (s == KV_OK) {
                if (m->storage_bytes != want || m->w.wcls == NULL || m->w.w1 == NULL)
                    abort();
                run_forward(m);
                kv_model_destroy(m);
            }
        }
    }
    if (kv_alloc_live() != 0)
        abort();
    return 0;
}
