/*
 * check_checkpoint.c - llama2.c legacy checkpoints: export then load gives
 * the same model (same weights, same logits, same greedy tokens) for shared
 * and unshared classifiers, GQA and MLP-less models; the bytes on disk
 * follow docs/design.md's layout (checked here with offsets computed by hand,
 * independently of checkpoint.c's layout table); malformed files are
 * rejected with KV_ERR_FORMAT before any weight is touched; a NaN or
 * infinity in any weight tensor is rejected on load, naming the tensor and
 * the index (kv_first_nonfinite, the finiteness check of every loaded float).
 * The model that ships with kvlab (notebooks_data/fortunes-model.bin,
 * written by the training script's own Python writer) loads, has the shape
 * issue 15 asks for, and its tokenizer.bin is the byte-level vocabulary
 * kvlab builds.
 */
#include <check.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../bench/model/checkpoint.h"
#include "../bench/model/tokenizer.h"
#include "../bench/model/file_check.h"

/*
 * Loaded and in-memory weights are bit-identical, so the logits differ only
 * if BLAS sums in a different order for a differently aligned matrix (the
 * mapping puts weights at offset 28, not 64): float32 rounding over a dot
 * product of a few dozen terms of O(1) values, far below 1e-4.
 */
#define LOGIT_TOL 1e-4f

/* ------------------------------------------------------------------------ */
/* Configurations                                                           */

struct ck_case {
    const char *name;
    int32_t dim, hidden, layers, heads, kv_heads, vocab, max_len, mlp, shared;
};

static const struct ck_case cases[] = {
    {"unshared", 16, 32, 2, 2, 2, 64, 32, 1, 0},
    {"shared", 16, 32, 2, 2, 2, 64, 32, 1, 1},
    {"gqa", 32, 48, 2, 4, 2, 96, 24, 1, 0},
    {"mqa-shared", 32, 40, 1, 4, 1, 50, 16, 1, 1},
    {"no-mlp", 16, 24, 3, 2, 1, 40, 20, 0, 0},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static struct kv_model_config cfg_of(const struct ck_case *c)
{
    return (struct kv_model_config){
        .dim = c->dim, .hidden_dim = c->hidden, .n_layers = c->layers,
        .n_heads = c->heads, .n_kv_heads = c->kv_heads, .vocab_size = c->vocab,
        .max_len = c->max_len, .mlp = c->mlp, .shared_classifier = c->shared,
    };
}

static char tmpdir[64];

static void tmp_path(char *out, size_t cap, const char *name)
{
    if (tmpdir[0] == '\0') {
        strcpy(tmpdir, "/tmp/kvlab_ckpt_XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    }
    snprintf(out, cap, "%s/%s", tmpdir, name);
}

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)sz + 1);
    ck_assert_uint_eq(fread(b, 1, (size_t)sz, f), (size_t)sz);
    fclose(f);
    *n = (size_t)sz;
    return b;
}

static void spit(const char *path, const void *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(b, 1, n, f), n);
    fclose(f);
}

/* ------------------------------------------------------------------------ */
/* Greedy decoding with a dynamic cache, for comparing two models           */

#define GEN_PROMPT 5
#define GEN_NEW 6

/* Runs prompt + GEN_NEW greedy steps; logits of every step into lg
 * (GEN_NEW, vocab), tokens into tok. */
static void run_greedy(const struct kv_model *m, float *lg, int32_t *tok)
{
    const struct kv_strategy_ops *ops = kv_strategy_find("dynamic");
    ck_assert_ptr_nonnull(ops);
    struct kv_cache_config cc = {
        .n_layers = m->cfg.n_layers, .batch = 1, .n_kv_heads = m->cfg.n_kv_heads,
        .head_dim = m->cfg.dim / m->cfg.n_heads, .max_len = m->cfg.max_len,
    };
    struct kv_cache *c = NULL;
    ck_assert_int_eq(kv_cache_create(&c, ops, &cc, NULL), KV_OK);
    struct kv_runner *r = NULL;
    ck_assert_int_eq(kv_runner_create(&r, m, 1, GEN_PROMPT, 1), KV_OK);
    int32_t prompt[GEN_PROMPT];
    for (int i = 0; i < GEN_PROMPT; i++)
        prompt[i] = (7 * i + 3) % m->cfg.vocab_size;
    int32_t V = m->cfg.vocab_size;
    ck_assert_int_eq(kv_forward(r, m, c, prompt, GEN_PROMPT, 0, NULL, lg, NULL), KV_OK);
    for (int s = 0; s < GEN_NEW; s++) {
        int32_t best = 0;
        for (int32_t v = 1; v < V; v++)
            if (lg[(size_t)s * V + v] > lg[(size_t)s * V + best])
                best = v;
        tok[s] = best;
        if (s + 1 < GEN_NEW)
            ck_assert_int_eq(kv_forward(r, m, c, &tok[s], 1, GEN_PROMPT + s, NULL,
                                        lg + (size_t)(s + 1) * V, NULL), KV_OK);
    }
    kv_runner_destroy(r);
    kv_cache_destroy(c);
}

/* ------------------------------------------------------------------------ */
/* Export then load                                                         */

START_TEST(test_round_trip)
{
    const struct ck_case *k = &cases[_i];
    int64_t live0 = kv_alloc_live();
    struct kv_model_config cfg = cfg_of(k);
    struct kv_model *m = NULL, *back = NULL;
    ck_assert_int_eq(kv_model_create_synthetic(&m, &cfg, 1234 + (uint64_t)_i), KV_OK);
    char path[128];
    tmp_path(path, sizeof path, k->name);
    ck_assert_int_eq(kv_checkpoint_export(path, m), KV_OK);

    /* Size: header + every array of docs/design.md, counted here by hand. */
    size_t L = (size_t)k->layers, D = (size_t)k->dim, H = (size_t)k->hidden;
    size_t V = (size_t)k->vocab, hs = D / (size_t)k->heads, kvd = hs * (size_t)k->kv_heads;
    size_t floats = V * D + L * D + L * D * D + 2 * L * D * kvd + L * D * D + L * D +
                    3 * L * D * H + D + 2 * (size_t)k->max_len * hs / 2 +
                    (k->shared ? 0 : V * D);
    size_t n;
    unsigned char *raw = slurp(path, &n);
    ck_assert_uint_eq(n, 28 + 4 * floats);
    size_t want;
    ck_assert_int_eq(kv_checkpoint_file_bytes(&cfg, &want), KV_OK);
    ck_assert_uint_eq(want, n);
    int32_t hdr[7];
    memcpy(hdr, raw, sizeof hdr);
    ck_assert_int_eq(hdr[0], k->dim);
    ck_assert_int_eq(hdr[1], k->hidden);
    ck_assert_int_eq(hdr[2], k->layers);
    ck_assert_int_eq(hdr[3], k->heads);
    ck_assert_int_eq(hdr[4], k->kv_heads);
    ck_assert_int_eq(hdr[5], k->shared ? k->vocab : -k->vocab);
    ck_assert_int_eq(hdr[6], k->max_len);
    /* Every array at the offset docs/design.md's order gives it (absent MLP
     * weights are written as zeros); the RoPE tables hold cos/sin of
     * pos * 10000^(-2i/hs). */
    const float *fl = (const float *)(raw + 28);
    const struct kv_weights *w = &m->w;
    const struct { const float *p; size_t n; } arr[] = {
        {w->token_embedding, V * D}, {w->rms_att, L * D}, {w->wq, L * D * D},
        {w->wk, L * D * kvd}, {w->wv, L * D * kvd}, {w->wo, L * D * D},
        {w->rms_ffn, L * D}, {w->w1, L * D * H}, {w->w2, L * D * H}, {w->w3, L * D * H},
        {w->rms_final, D},
    };
    size_t off = 0;
    for (size_t a = 0; a < sizeof arr / sizeof arr[0]; a++) {
        for (size_t j = 0; j < arr[a].n; j++) {
            float want_v = arr[a].p != NULL ? arr[a].p[j] : 0.0f;
            ck_assert_msg(memcmp(&fl[off + j], &want_v, 4) == 0, "array %zu elem %zu", a, j);
        }
        off += arr[a].n;
    }
    size_t half = hs / 2;
    for (size_t pos = 0; pos < (size_t)k->max_len; pos++) {
        for (size_t i = 0; i < half; i++) {
            double ang = (double)pos * pow(10000.0, -2.0 * (double)i / (double)hs);
            ck_assert_float_eq_tol(fl[off + pos * half + i], (float)cos(ang), 1e-6f);
            ck_assert_float_eq_tol(fl[off + (size_t)k->max_len * half + pos * half + i],
                                   (float)sin(ang), 1e-6f);
        }
    }
    off += 2 * (size_t)k->max_len * half;
    if (!k->shared) {
        ck_assert(memcmp(fl + off, w->wcls, V * D * 4) == 0);
        off += V * D;
    }
    ck_assert_uint_eq(off, floats);
    free(raw);

    ck_assert_int_eq(kv_checkpoint_load(path, &back), KV_OK);
    ck_assert_int_eq(back->mapped, 1);
    ck_assert_int_eq(back->cfg.dim, k->dim);
    ck_assert_int_eq(back->cfg.hidden_dim, k->hidden);
    ck_assert_int_eq(back->cfg.n_layers, k->layers);
    ck_assert_int_eq(back->cfg.n_heads, k->heads);
    ck_assert_int_eq(back->cfg.n_kv_heads, k->kv_heads);
    ck_assert_int_eq(back->cfg.vocab_size, k->vocab);
    ck_assert_int_eq(back->cfg.max_len, k->max_len);
    ck_assert_int_eq(back->cfg.shared_classifier, k->shared);
    ck_assert_int_eq(back->cfg.mlp, 1);
    if (k->shared)
        ck_assert_ptr_eq(back->w.wcls, back->w.token_embedding);
    struct kv_model_config hcfg;
    ck_assert_int_eq(kv_checkpoint_read_header(path, &hcfg), KV_OK);
    ck_assert(memcmp(&hcfg, &back->cfg, sizeof hcfg) == 0);

    /* Same logits and tokens at every step. */
    size_t nl = (size_t)GEN_NEW * V;
    float *la = malloc(nl * sizeof(float)), *lb = malloc(nl * sizeof(float));
    int32_t ta[GEN_NEW], tb[GEN_NEW];
    run_greedy(m, la, ta);
    run_greedy(back, lb, tb);
    for (size_t i = 0; i < nl; i++)
        ck_assert_float_eq_tol(la[i], lb[i], LOGIT_TOL);
    for (int s = 0; s < GEN_NEW; s++)
        ck_assert_int_eq(ta[s], tb[s]);
    free(la);
    free(lb);

    /* A loaded model exports to the same bytes. */
    char again[128];
    tmp_path(again, sizeof again, "again.bin");
    ck_assert_int_eq(kv_checkpoint_export(again, back), KV_OK);
    size_t n1, n2;
    unsigned char *a = slurp(path, &n1), *b = slurp(again, &n2);
    ck_assert_uint_eq(n1, n2);
    ck_assert(memcmp(a, b, n1) == 0);
    free(a);
    free(b);

    kv_model_destroy(back);
    kv_model_destroy(m);
    unlink(again);
    unlink(path);
    ck_assert_int_eq(kv_alloc_live(), live0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Malformed files                                                          */

/* A valid small checkpoint's bytes. */
static unsigned char *valid_file(size_t *n, char *path, size_t cap)
{
    struct kv_model_config cfg = cfg_of(&cases[0]);
    struct kv_model *m = NULL;
    ck_assert_int_eq(kv_model_create_synthetic(&m, &cfg, 7), KV_OK);
    tmp_path(path, cap, "valid.bin");
    ck_assert_int_eq(kv_checkpoint_export(path, m), KV_OK);
    kv_model_destroy(m);
    return slurp(path, n);
}

static void expect_status(const char *path, const void *bytes, size_t n, enum kv_status want)
{
    spit(path, bytes, n);
    struct kv_model *m = (struct kv_model *)1;
    ck_assert_int_eq(kv_checkpoint_load(path, &m), want);
    ck_assert_ptr_null(m);
    struct kv_model_config cfg;
    ck_assert_int_eq(kv_checkpoint_read_header(path, &cfg), want);
}

START_TEST(test_size_mismatch)
{
    int64_t live0 = kv_alloc_live();
    char good[128], bad[128];
    size_t n;
    unsigned char *b = valid_file(&n, good, sizeof good);
    tmp_path(bad, sizeof bad, "bad.bin");
    unsigned char *big = malloc(n + 8);
    memcpy(big, b, n);
    memset(big + n, 0, 8);
    expect_status(bad, big, n + 4, KV_ERR_FORMAT); /* one float too many */
    expect_status(bad, big, n + 1, KV_ERR_FORMAT);
    expect_status(bad, b, n - 4, KV_ERR_FORMAT);   /* one float short */
    expect_status(bad, b, n - 1, KV_ERR_FORMAT);
    expect_status(bad, b, n / 2, KV_ERR_FORMAT);
    expect_status(bad, b, 28, KV_ERR_FORMAT);      /* header only */
    expect_status(bad, b, 27, KV_ERR_FORMAT);      /* not even a header */
    expect_status(bad, b, 0, KV_ERR_FORMAT);
    /* Flipping the classifier sign changes the expected size. */
    int32_t v;
    memcpy(&v, b + 20, 4);
    v = -v;
    memcpy(big, b, n);
    memcpy(big + 20, &v, 4);
    expect_status(bad, big, n, KV_ERR_FORMAT);
    free(big);
    free(b);
    unlink(bad);
    unlink(good);
    ck_assert_int_eq(kv_alloc_live(), live0);
}
END_TEST

/* Header field f set to value x (the rest of the valid file unchanged). */
struct hdr_lie {
    int field;
    int32_t value;
};
static const struct hdr_lie lies[] = {
    {0, 0}, {0, -16}, {1, 0}, {1, -32}, {2, 0}, {2, -2}, {3, 0}, {3, -2}, {4, 0},
    {4, -2}, {5, 0}, {5, INT32_MIN}, {6, 0}, {6, -32},
    {3, 3},                 /* heads do not divide dim */
    {3, 16},                /* head size 1 is odd: no RoPE pairs */
    {4, 3},                 /* kv heads do not divide heads */
    {4, 4},                 /* more kv heads than heads */
    {0, INT32_MAX},         /* sizes that overflow or cannot match */
    {1, INT32_MAX}, {2, INT32_MAX}, {5, INT32_MAX}, {6, INT32_MAX},
};
#define N_LIES ((int)(sizeof lies / sizeof lies[0]))

START_TEST(test_bad_header)
{
    int64_t live0 = kv_alloc_live();
    char good[128], bad[128];
    size_t n;
    unsigned char *b = valid_file(&n, good, sizeof good);
    tmp_path(bad, sizeof bad, "badhdr.bin");
    memcpy(b + 4 * lies[_i].field, &lies[_i].value, 4);
    expect_status(bad, b, n, KV_ERR_FORMAT);
    free(b);
    unlink(bad);
    unlink(good);
    ck_assert_int_eq(kv_alloc_live(), live0);
}
END_TEST

START_TEST(test_io_errors)
{
    struct kv_model *m = NULL;
    ck_assert_int_eq(kv_checkpoint_load("/nonexistent/model.bin", &m), KV_ERR_IO);
    ck_assert_ptr_null(m);
    ck_assert_int_eq(kv_checkpoint_load("/tmp", &m), KV_ERR_IO); /* a directory */
    ck_assert_int_eq(kv_checkpoint_load(NULL, &m), KV_ERR_INVALID);
    /* Export into a missing directory fails and leaves nothing behind. */
    struct kv_model_config cfg = cfg_of(&cases[1]);
    ck_assert_int_eq(kv_model_create_synthetic(&m, &cfg, 3), KV_OK);
    ck_assert_int_eq(kv_checkpoint_export("/nonexistent/dir/out.bin", m), KV_ERR_IO);
    /* Export over an existing file replaces it whole (temp + rename). */
    char path[128];
    tmp_path(path, sizeof path, "over.bin");
    spit(path, "junk", 4);
    ck_assert_int_eq(kv_checkpoint_export(path, m), KV_OK);
    struct kv_model *back = NULL;
    ck_assert_int_eq(kv_checkpoint_load(path, &back), KV_OK);
    kv_checkpoint_unmap(back); /* explicit unmap first is allowed */
    ck_assert_ptr_null(back->storage);
    kv_model_destroy(back);
    kv_model_destroy(m);
    unlink(path);
    /* Allocation failure while loading leaves nothing mapped or allocated. */
    int64_t live0 = kv_alloc_live();
    ck_assert_int_eq(kv_model_create_synthetic(&m, &cfg, 3), KV_OK);
    ck_assert_int_eq(kv_checkpoint_export(path, m), KV_OK);
    kv_model_destroy(m);
    kv_alloc_fail_at(1, 1);
    ck_assert_int_eq(kv_checkpoint_load(path, &back), KV_ERR_NOMEM);
    kv_alloc_fail_at(0, 0);
    ck_assert_ptr_null(back);
    unlink(path);
    ck_assert_int_eq(kv_alloc_live(), live0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The shipped model                                                        */

/* Run from the repository root (make test does); KV_SHIPPED_MODEL and
 * KV_SHIPPED_TOKENIZER name other files. */
static const char *shipped(const char *env, const char *def)
{
    const char *p = getenv(env);
    return p != NULL && *p != '\0' ? p : def;
}

START_TEST(test_shipped_model)
{
    const char *mp = shipped("KV_SHIPPED_MODEL", "notebooks_data/fortunes-model.bin");
    const char *tp = shipped("KV_SHIPPED_TOKENIZER", "notebooks_data/fortunes-model-tokenizer.bin");
    struct stat st;
    ck_assert_msg(stat(mp, &st) == 0, "the shipped model %s is missing (make train-model)", mp);
    ck_assert_msg(st.st_size <= 8500000, "%s is %lld bytes, over ~8 MB", mp, (long long)st.st_size);
    struct kv_model *m = NULL;
    ck_assert_int_eq(kv_checkpoint_load(mp, &m), KV_OK);
    const struct kv_model_config *c = &m->cfg;
    /* byte-level, tied, grouped-query attention, a context of 512 or more */
    ck_assert_int_eq(c->vocab_size, 256);
    ck_assert_int_eq(c->shared_classifier, 1);
    ck_assert_int_lt(c->n_kv_heads, c->n_heads);
    ck_assert_int_ge(c->max_len, 512);
    size_t params = kv_model_weight_bytes(c) / sizeof(float);
    ck_assert_msg(params >= 1000000 && params <= 5000000, "%zu parameters", params);
    /* it runs: finite logits for a short text, through a cache */
    struct kv_cache_config cc = {.n_layers = c->n_layers, .batch = 1,
                                 .n_kv_heads = c->n_kv_heads, .head_dim = c->dim / c->n_heads,
                                 .max_len = c->max_len};
    struct kv_cache *cache = NULL;
    struct kv_runner *r = NULL;
    ck_assert_int_eq(kv_cache_create(&cache, &kv_strategy_dynamic, &cc, NULL), KV_OK);
    ck_assert_int_eq(kv_runner_create(&r, m, 1, 16, 1), KV_OK);
    const char *text = "The cache keeps";
    int32_t ids[16];
    for (int i = 0; i < 15; i++)
        ids[i] = (unsigned char)text[i];
    float logits[256];
    ck_assert_int_eq(kv_forward(r, m, cache, ids, 15, 0, NULL, logits, NULL), KV_OK);
    for (int i = 0; i < 256; i++)
        ck_assert(isfinite(logits[i]));
    kv_runner_destroy(r);
    kv_cache_destroy(cache);
    kv_model_destroy(m);

    /* tokenizer.bin: byte i is token i, exactly what kvlab writes */
    struct kv_tokenizer *t = NULL, *bytes = NULL;
    ck_assert_int_eq(kv_tokenizer_load(&t, tp, 256), KV_OK);
    ck_assert_int_eq(kv_tokenizer_create_bytes(&bytes), KV_OK);
    for (int32_t i = 0; i < 256; i++) {
        int32_t la, lb;
        const char *pa = kv_tokenizer_piece(t, i, &la), *pb = kv_tokenizer_piece(bytes, i, &lb);
        ck_assert_int_eq(la, lb);
        ck_assert(memcmp(pa, pb, (size_t)la) == 0);
    }
    kv_tokenizer_destroy(bytes);
    kv_tokenizer_destroy(t);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Non-finite weights                                                       */

/* kv_first_nonfinite over lengths around its 4096-float blocks, with one
 * NaN / +Inf / -Inf at every interesting place; FLT_MAX and subnormals are
 * finite. */
START_TEST(test_first_nonfinite)
{
    static const size_t lens[] = {0, 1, 7, 4095, 4096, 4097, 12289};
    const float bad[3] = {NAN, INFINITY, -INFINITY};
    float *x = malloc(12289 * sizeof *x);
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        size_t n = lens[li];
        for (size_t i = 0; i < n; i++)
            x[i] = i % 3 == 0 ? FLT_MAX : i % 3 == 1 ? -1e-42f : (float)i;
        ck_assert_uint_eq(kv_first_nonfinite(x, n), n);
        const size_t at[] = {0, n - 1, 4095, 4096, n / 2};
        for (size_t k = 0; k < sizeof at / sizeof at[0]; k++) {
            if (n == 0 || at[k] >= n)
                continue;
            for (int b = 0; b < 3; b++) {
                float keep = x[at[k]];
                x[at[k]] = bad[b];
                ck_assert_uint_eq(kv_first_nonfinite(x, n), at[k]);
                if (at[k] + 1 < n) { /* the first one counts */
                    float keep2 = x[n - 1];
                    x[n - 1] = NAN;
                    ck_assert_uint_eq(kv_first_nonfinite(x, n), at[k]);
                    x[n - 1] = keep2;
                }
                x[at[k]] = keep;
            }
        }
    }
    free(x);
}
END_TEST

/*
 * One non-finite float at a float index of cases[0]'s file (dim 16, hidden
 * 32, 2 layers, 2 heads, vocab 64 unshared, seq_len 32), offsets by hand:
 * token_embedding [0, 1024), rms_att 1024, wq 1056, wk 1568, wv 2080, wo
 * 2592, rms_ffn 3104, w1 3136, w2 4160, w3 5184, rms_final 6208, the two
 * unused RoPE tables 6224 and 6352, wcls [6480, 7504).
 */
struct nonfinite_case {
    size_t at;          /* float index after the 28-byte header */
    float value;
    const char *tensor; /* NULL: an unused table, the file loads */
    size_t index;       /* within the tensor */
};
static const struct nonfinite_case nonfinite[] = {
    {0, NAN, "token_embedding", 0},
    {1023, INFINITY, "token_embedding", 1023},
    {1056 + 5, -INFINITY, "wq", 5},
    {2080 + 511, NAN, "wv", 511},
    {3136 + 1000, NAN, "w1", 1000},
    {6208 + 15, INFINITY, "rms_final", 15},
    {6224 + 3, NAN, NULL, 0},
    {7503, -INFINITY, "wcls", 1023},
};
#define N_NONFINITE ((int)(sizeof nonfinite / sizeof nonfinite[0]))

START_TEST(test_nonfinite_rejected)
{
    int64_t live0 = kv_alloc_live();
    const struct nonfinite_case *c = &nonfinite[_i];
    char good[128], bad[128];
    size_t n;
    unsigned char *b = valid_file(&n, good, sizeof good);
    ck_assert_uint_eq(n, 28 + 7504 * 4);
    memcpy(b + 28 + 4 * c->at, &c->value, 4);
    tmp_path(bad, sizeof bad, "nonfinite.bin");
    spit(bad, b, n);
    struct kv_model *m = NULL;
    struct kv_model_config cfg;
    ck_assert_int_eq(kv_checkpoint_read_header(bad, &cfg), KV_OK); /* the header is fine */
    enum kv_status s = kv_checkpoint_load(bad, &m);
    if (c->tensor == NULL) {
        ck_assert_int_eq(s, KV_OK);
        kv_model_destroy(m);
    } else {
        ck_assert_int_eq(s, KV_ERR_FORMAT);
        ck_assert_ptr_null(m);
        char want[64];
        snprintf(want, sizeof want, "tensor %s holds", c->tensor);
        ck_assert_msg(strstr(kv_file_why(), want) != NULL, "why: %s", kv_file_why());
        snprintf(want, sizeof want, "at index %zu ", c->index);
        ck_assert_msg(strstr(kv_file_why(), want) != NULL, "why: %s", kv_file_why());
        ck_assert(strstr(kv_file_why(), c->value != c->value ? "NaN"
                                        : c->value > 0 ? "+Inf" : "-Inf") != NULL);
    }
    free(b);
    unlink(bad);
    unlink(good);
    ck_assert_int_eq(kv_alloc_live(), live0);
}
END_TEST

static Suite *checkpoint_suite(void)
{
    Suite *s = suite_create("checkpoint");
    TCase *tc = tcase_create("round_trip");
    tcase_add_loop_test(tc, test_round_trip, 0, N_CASES);
    suite_add_tcase(s, tc);
    tc = tcase_create("malformed");
    tcase_add_test(tc, test_size_mismatch);
    tcase_add_loop_test(tc, test_bad_header, 0, N_LIES);
    tcase_add_test(tc, test_io_errors);
    tcase_add_test(tc, test_first_nonfinite);
    tcase_add_loop_test(tc, test_nonfinite_rejected, 0, N_NONFINITE);
    suite_add_tcase(s, tc);
    tc = tcase_create("shipped");
    tcase_add_test(tc, test_shipped_model);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(checkpoint_suite());
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    if (tmpdir[0] != '\0')
        rmdir(tmpdir);
    return failed;
}
