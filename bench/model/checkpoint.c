/*
 * checkpoint.c - llama2.c legacy checkpoints: header validation, a
 * read-only memory mapping for loading, and an atomic export.
 *
 * One table (the `arrays` layout below) lists the float arrays of the file in
 * order with their element counts; loading walks it to set weight pointers
 * into the mapping and export walks it to write them, so the two can never
 * disagree about the format. Every count is computed with checked
 * arithmetic and the total is compared with the file size before any
 * pointer into the mapping is formed.
 */
#include "checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file_check.h"
#include "file_commit.h"

/* The format is little-endian and the weights are used in place. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "kvlab checkpoints are little-endian; this host is not"
#endif

/* ------------------------------------------------------------------------ */
/* Layout                                                                   */

/* The float arrays of a legacy checkpoint, in file order. */
enum ckpt_array {
    CK_TOKEN_EMBEDDING,
    CK_RMS_ATT,
    CK_WQ,
    CK_WK,
    CK_WV,
    CK_WO,
    CK_RMS_FFN,
    CK_W1,
    CK_W2,
    CK_W3,
    CK_RMS_FINAL,
    CK_ROPE_COS, /* (seq_len, hs/2), unused by kvlab */
    CK_ROPE_SIN, /* (seq_len, hs/2), unused by kvlab */
    CK_WCLS,     /* (vocab, dim), only when the classifier is unshared */
    CK_ARRAY_COUNT
};

/* Tensor names as llama2.c's export calls them, for messages. */
static const char *const array_name[CK_ARRAY_COUNT] = {
    [CK_TOKEN_EMBEDDING] = "token_embedding", [CK_RMS_ATT] = "rms_att",
    [CK_WQ] = "wq", [CK_WK] = "wk", [CK_WV] = "wv", [CK_WO] = "wo",
    [CK_RMS_FFN] = "rms_ffn", [CK_W1] = "w1", [CK_W2] = "w2", [CK_W3] = "w3",
    [CK_RMS_FINAL] = "rms_final", [CK_ROPE_COS] = "freq_cis_real",
    [CK_ROPE_SIN] = "freq_cis_imag", [CK_WCLS] = "wcls",
};

static enum kv_status add_size(size_t *acc, size_t x)
{
    if (x > SIZE_MAX - *acc)
        return KV_ERR_OVERFLOW;
    *acc += x;
    return KV_OK;
}

/* Structural checks of a configuration (what a header must satisfy). */
static enum kv_status check_dims(const struct kv_model_config *c)
{
    if (c->dim <= 0 || c->hidden_dim <= 0 || c->n_layers <= 0 || c->n_heads <= 0 ||
        c->n_kv_heads <= 0 || c->vocab_size <= 0 || c->max_len <= 0)
        return KV_ERR_INVALID;
    if (c->dim % c->n_heads != 0 || (c->dim / c->n_heads) % 2 != 0)
        return KV_ERR_INVALID; /* RoPE rotates pairs within a head */
    if (c->n_heads % c->n_kv_heads != 0)
        return KV_ERR_INVALID;
    return KV_OK;
}

/* counts[a] = number of floats of array a (0 for an absent wcls). */
static enum kv_status layout(const struct kv_model_config *c, size_t counts[CK_ARRAY_COUNT])
{
    enum kv_status s = check_dims(c);
    if (s != KV_OK)
        return s;
    size_t L = (size_t)c->n_layers, dim = (size_t)c->dim, hid = (size_t)c->hidden_dim;
    size_t vocab = (size_t)c->vocab_size, hs = dim / (size_t)c->n_heads;
    size_t kv_dim = hs * (size_t)c->n_kv_heads;
    const size_t f_emb[] = {vocab, dim}, f_ld[] = {L, dim}, f_q[] = {L, dim, dim},
                 f_kv[] = {L, dim, kv_dim}, f_ff[] = {L, dim, hid},
                 f_rope[] = {(size_t)c->max_len, hs / 2};
    if (kv_mul_sizes(&counts[CK_TOKEN_EMBEDDING], 2, f_emb) != KV_OK ||
        kv_mul_sizes(&counts[CK_RMS_ATT], 2, f_ld) != KV_OK ||
        kv_mul_sizes(&counts[CK_WQ], 3, f_q) != KV_OK ||
        kv_mul_sizes(&counts[CK_WK], 3, f_kv) != KV_OK ||
        kv_mul_sizes(&counts[CK_W1], 3, f_ff) != KV_OK ||
        kv_mul_sizes(&counts[CK_ROPE_COS], 2, f_rope) != KV_OK)
        return KV_ERR_OVERFLOW;
    counts[CK_WV] = counts[CK_WK];
    counts[CK_WO] = counts[CK_WQ];
    counts[CK_RMS_FFN] = counts[CK_RMS_ATT];
    counts[CK_W2] = counts[CK_W1];
    counts[CK_W3] = counts[CK_W1];
    counts[CK_RMS_FINAL] = dim;
    counts[CK_ROPE_SIN] = counts[CK_ROPE_COS];
    counts[CK_WCLS] = c->shared_classifier ? 0 : counts[CK_TOKEN_EMBEDDING];
    return KV_OK;
}

enum kv_status kv_checkpoint_file_bytes(const struct kv_model_config *c, size_t *out)
{
    if (c == NULL || out == NULL)
        return KV_ERR_INVALID;
    size_t counts[CK_ARRAY_COUNT];
    enum kv_status s = layout(c, counts);
    if (s != KV_OK)
        return s;
    size_t floats = 0, bytes;
    for (int a = 0; a < CK_ARRAY_COUNT; a++) {
        if (add_size(&floats, counts[a]) != KV_OK)
            return KV_ERR_OVERFLOW;
    }
    if (kv_mul_size(&bytes, floats, sizeof(float)) != KV_OK ||
        add_size(&bytes, KV_CHECKPOINT_HEADER_BYTES) != KV_OK)
        return KV_ERR_OVERFLOW;
    *out = bytes;
    return KV_OK;
}

/* Where array a lives in a model (NULL for the RoPE tables, which kvlab
 * does not keep, and for absent MLP weights). */
static float **weight_slot(struct kv_weights *w, int a)
{
    switch (a) {
    case CK_TOKEN_EMBEDDING: return &w->token_embedding;
    case CK_RMS_ATT: return &w->rms_att;
    case CK_WQ: return &w->wq;
    case CK_WK: return &w->wk;
    case CK_WV: return &w->wv;
    case CK_WO: return &w->wo;
    case CK_RMS_FFN: return &w->rms_ffn;
    case CK_W1: return &w->w1;
    case CK_W2: return &w->w2;
    case CK_W3: return &w->w3;
    case CK_RMS_FINAL: return &w->rms_final;
    case CK_WCLS: return &w->wcls;
    default: return NULL;
    }
}

/* ------------------------------------------------------------------------ */
/* Header                                                                   */

static int32_t le_i32(const unsigned char *b)
{
    uint32_t u = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                 (uint32_t)b[3] << 24;
    int32_t v;
    memcpy(&v, &u, sizeof v);
    return v;
}

static void put_le_i32(unsigned char *b, int32_t v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    b[0] = (unsigned char)u;
    b[1] = (unsigned char)(u >> 8);
    b[2] = (unsigned char)(u >> 16);
    b[3] = (unsigned char)(u >> 24);
}

/* Parses the header bytes and checks them against the file size. */
static enum kv_status parse_header(const unsigned char hdr[KV_CHECKPOINT_HEADER_BYTES],
                                   uint64_t file_bytes, struct kv_model_config *cfg)
{
    int32_t v[7];
    for (int i = 0; i < 7; i++)
        v[i] = le_i32(hdr + 4 * i);
    memset(cfg, 0, sizeof *cfg);
    cfg->dim = v[0];
    cfg->hidden_dim = v[1];
    cfg->n_layers = v[2];
    cfg->n_heads = v[3];
    cfg->n_kv_heads = v[4];
    cfg->vocab_size = v[5] > 0 ? v[5] : v[5] == INT32_MIN ? 0 : -v[5];
    cfg->shared_classifier = v[5] > 0;
    cfg->max_len = v[6];
    cfg->mlp = 1;
    size_t want;
    if (v[5] == 0 || v[5] == INT32_MIN || kv_checkpoint_file_bytes(cfg, &want) != KV_OK) {
        /* bad dimension or a size no file can have */
        kv_file_set_why("malformed header (dim %d, hidden %d, layers %d, heads %d, "
                        "kv_heads %d, vocab %d, seq_len %d)",
                        (int)v[0], (int)v[1], (int)v[2], (int)v[3], (int)v[4], (int)v[5],
                        (int)v[6]);
        return KV_ERR_FORMAT;
    }
    if ((uint64_t)want != file_bytes) {
        kv_file_set_why("the file has %llu bytes, its header describes %zu",
                        (unsigned long long)file_bytes, want);
        return KV_ERR_FORMAT;
    }
    return KV_OK;
}

/* Opens path, reads and validates the header; *fd_out stays open on success. */
static enum kv_status open_checked(const char *path, struct kv_model_config *cfg,
                                   int *fd_out, size_t *bytes_out)
{
    if (path == NULL || cfg == NULL)
        return KV_ERR_INVALID;
    int fd;
    if (kv_file_open_input(path, &fd) != KV_OK) /* regular files only, never blocks */
        return KV_ERR_IO;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        kv_file_set_why("%s", strerror(errno));
        close(fd);
        return KV_ERR_IO;
    }
    if (st.st_size < KV_CHECKPOINT_HEADER_BYTES) {
        kv_file_set_why("%lld bytes, shorter than the %d-byte header", (long long)st.st_size,
                        KV_CHECKPOINT_HEADER_BYTES);
        close(fd);
        return KV_ERR_FORMAT;
    }
    unsigned char hdr[KV_CHECKPOINT_HEADER_BYTES];
    ssize_t got = pread(fd, hdr, sizeof hdr, 0);
    if (got != (ssize_t)sizeof hdr) {
        kv_file_set_why("cannot read the header: %s", got < 0 ? strerror(errno) : "short read");
        close(fd);
        return got < 0 ? KV_ERR_IO : KV_ERR_FORMAT;
    }
    enum kv_status s = parse_header(hdr, (uint64_t)st.st_size, cfg);
    if (s != KV_OK) {
        close(fd);
        return s;
    }
    *fd_out = fd;
    *bytes_out = (size_t)st.st_size; /* equals a size_t computed by parse_header */
    return KV_OK;
}

enum kv_status kv_checkpoint_read_header(const char *path, struct kv_model_config *cfg)
{
    int fd;
    size_t bytes;
    enum kv_status s = open_checked(path, cfg, &fd, &bytes);
    if (s == KV_OK)
        close(fd);
    return s;
}

/* ------------------------------------------------------------------------ */
/* Load                                                                     */

enum kv_status kv_checkpoint_load(const char *path, struct kv_model **out)
{
    if (out == NULL)
        return KV_ERR_INVALID;
    *out = NULL;
    struct kv_model_config cfg;
    int fd;
    size_t bytes;
    enum kv_status s = open_checked(path, &cfg, &fd, &bytes);
    if (s != KV_OK)
        return s;
    size_t counts[CK_ARRAY_COUNT];
    s = layout(&cfg, counts); /* cannot fail: open_checked validated cfg */
    KV_ASSERT(s == KV_OK);

    void *map = mmap(NULL, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return errno == ENOMEM ? KV_ERR_NOMEM : KV_ERR_IO;

    struct kv_model *m = kv_alloc(sizeof *m);
    if (m == NULL) {
        munmap(map, bytes);
        return KV_ERR_NOMEM;
    }
    m->cfg = cfg;
    m->storage = map;
    m->storage_bytes = bytes;
    m->mapped = 1;
    /* Every array lies inside [28, bytes): the sum of counts was checked
     * against the file size above. */
    float *p = (float *)((char *)map + KV_CHECKPOINT_HEADER_BYTES);
    for (int a = 0; a < CK_ARRAY_COUNT; a++) {
        float **slot = weight_slot(&m->w, a);
        if (slot != NULL && counts[a] > 0)
            *slot = p;
        p += counts[a];
    }
    KV_ASSERT((char *)p == (char *)map + bytes);
    if (cfg.shared_classifier)
        m->w.wcls = m->w.token_embedding;
    /* Every weight must be a number: one NaN or Inf turns every logit into
     * NaN, and greedy decoding would silently print token 0 forever. */
    p = (float *)((char *)map + KV_CHECKPOINT_HEADER_BYTES);
    for (int a = 0; a < CK_ARRAY_COUNT; a++) {
        /* the legacy RoPE tables are skipped, never read: not checked */
        size_t bad = weight_slot(&m->w, a) != NULL ? kv_first_nonfinite(p, counts[a])
                                                   : counts[a];
        if (bad < counts[a]) {
            float x = p[bad];
            kv_file_set_why("tensor %s holds %s at index %zu (of %zu): weights must be finite",
                            array_name[a], x != x ? "NaN" : x > 0 ? "+Inf" : "-Inf", bad,
                            counts[a]);
            munmap(map, bytes);
            kv_free(m);
            return KV_ERR_FORMAT;
        }
        p += counts[a];
    }
    *out = m;
    return KV_OK;
}

size_t kv_first_nonfinite(const float *x, size_t n)
{
    /* Exponent bits all ones is NaN or Inf. Blocks of an OR-reduction the
     * compiler vectorises, and the exact index only in the block that has
     * one: a loaded checkpoint is read once at memory speed. */
    const size_t block = 4096;
    const uint32_t exp_bits = 0x7f800000u;
    if (x == NULL)
        return 0; /* no float to look at: the first one is "not finite" */
    for (size_t i0 = 0; i0 < n; i0 += block) {
        size_t end = n - i0 < block ? n : i0 + block;
        uint32_t any = 0;
        for (size_t i = i0; i < end; i++) {
            uint32_t u;
            memcpy(&u, &x[i], sizeof u);
            any |= (uint32_t)((u & exp_bits) == exp_bits);
        }
        for (size_t i = i0; any != 0 && i < end; i++) {
            if (!isfinite(x[i]))
                return i;
        }
    }
    return n;
}

void kv_checkpoint_unmap(struct kv_model *m)
{
    if (m == NULL || !m->mapped)
        return;
    if (m->storage != NULL)
        munmap(m->storage, m->storage_bytes);
    m->storage = NULL;
    m->storage_bytes = 0;
    m->mapped = 0;
    memset(&m->w, 0, sizeof m->w);
}

/* ------------------------------------------------------------------------ */
/* Export                                                                   */

/* Writes n floats from src, or n zeros when src is NULL. 0 on success. */
static int write_floats(FILE *f, const float *src, size_t n)
{
    static const float zeros[1024];
    while (n > 0) {
        size_t k = n < 1024 ? n : 1024;
        if (fwrite(src ? src : zeros, sizeof(float), k, f) != k)
            return -1;
        if (src)
            src += k;
        n -= k;
    }
    return 0;
}

/* The legacy RoPE tables: cos (sin) of pos * theta^(-2i/hs), (seq_len, hs/2). */
static int write_rope(FILE *f, const struct kv_model_config *c, int use_sin)
{
    int32_t hs = c->dim / c->n_heads;
    float row[512];
    for (int32_t pos = 0; pos < c->max_len; pos++) {
        for (int32_t i0 = 0; i0 < hs / 2; i0 += 512) {
            int32_t n = hs / 2 - i0 < 512 ? hs / 2 - i0 : 512;
            for (int32_t i = 0; i < n; i++) {
                double freq = pow(10000.0, -2.0 * (double)(i0 + i) / (double)hs);
                double ang = (double)pos * freq;
                row[i] = (float)(use_sin ? sin(ang) : cos(ang));
            }
            if (fwrite(row, sizeof(float), (size_t)n, f) != (size_t)n)
                return -1;
        }
    }
    return 0;
}

enum kv_status kv_checkpoint_export(const char *path, const struct kv_model *m)
{
    if (path == NULL || m == NULL)
        return KV_ERR_INVALID;
    const struct kv_model_config *c = &m->cfg;
    size_t counts[CK_ARRAY_COUNT];
    enum kv_status s = layout(c, counts);
    if (s != KV_OK)
        return s;
    if (c->vocab_size == INT32_MIN)
        return KV_ERR_INVALID;
    struct kv_weights w = m->w;
    if (w.token_embedding == NULL || w.rms_att == NULL || w.wq == NULL || w.wk == NULL ||
        w.wv == NULL || w.wo == NULL || w.rms_final == NULL ||
        (!c->shared_classifier && w.wcls == NULL) ||
        (c->mlp && (w.rms_ffn == NULL || w.w1 == NULL || w.w2 == NULL || w.w3 == NULL)))
        return KV_ERR_INVALID;
    if (!c->mlp) /* zero MLP weights compute exactly "no MLP" */
        w.w1 = w.w2 = w.w3 = NULL;

    /* Temporary file next to the target, renamed over it at the end. */
    FILE *f;
    char *tmp;
    s = kv_file_begin(path, &f, &tmp);
    if (s != KV_OK)
        return s;
    unsigned char hdr[KV_CHECKPOINT_HEADER_BYTES];
    const int32_t v[7] = {c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads,
                          c->shared_classifier ? c->vocab_size : -c->vocab_size,
                          c->max_len};
    for (int i = 0; i < 7; i++)
        put_le_i32(hdr + 4 * i, v[i]);
    int err = fwrite(hdr, 1, sizeof hdr, f) != sizeof hdr;
    for (int a = 0; a < CK_ARRAY_COUNT && !err; a++) {
        if (a == CK_ROPE_COS || a == CK_ROPE_SIN) {
            err = write_rope(f, c, a == CK_ROPE_SIN) != 0;
            continue;
        }
        float **slot = weight_slot(&w, a);
        if (counts[a] > 0)
            err = write_floats(f, *slot, counts[a]) != 0;
    }
    return kv_file_commit(f, tmp, path, err);
}
