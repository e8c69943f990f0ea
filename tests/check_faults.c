/*
 * check_faults.c - allocation-failure injection over the whole decoder.
 *
 * What it proves: every allocation the library makes while a model is built,
 * a cache is created, a generation runs and a few forward calls follow, can
 * fail without a crash, a wrong status or a leak. check_strategies.c does the
 * same for a cache on its own; this suite runs the real workload (model,
 * runner, cache, kv_generate, kv_forward) with every registered strategy, and
 * the file readers (checkpoint, tokenizer, sweep CSV) on their own.
 *
 * The design decision: a scenario is first run with no failure to count its
 * allocations N and record its results (generated tokens, last logits). Then
 * for every k in 1..N it is run again with kv_alloc_fail_at(k, sticky): the
 * k-th allocation (and, when sticky, every later one) fails. Each run must
 * end either with KV_ERR_NOMEM from the step that hit the failure, or (only
 * possible if the library does not depend on that allocation) with success
 * and results bit-identical to the reference; after cleanup kv_alloc_live()
 * must be back to its value before the run. Finally k = N + 1 must succeed.
 * Everything runs on one thread so the reference is deterministic.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_params.h"
#include "../bench/model/checkpoint.h"
#include "../bench/results/csv_read.h"
#include "../bench/model/kv_model.h"
#include "../bench/model/tokenizer.h"
#include "../strategies/strategy.h"

/* ------------------------------------------------------------------------ */
/* The workload                                                             */

/* Tiny GQA model: head_dim 8, 2 query heads per KV head, MLP on. */
static const struct kv_model_config MODEL = {
    .dim = 16,
    .hidden_dim = 24,
    .n_layers = 2,
    .n_heads = 2,
    .n_kv_heads = 1,
    .vocab_size = 40,
    .max_len = 48,
    .mlp = 1,
    .shared_classifier = 0,
};

enum {
    BATCH = 2,
    PROMPT_LEN = 5,
    NEW_TOKENS = 6,  /* decode steps past the prefill in kv_generate */
    FWD_DECODES = 4, /* kv_forward decode calls after the generation */
    WINDOW = 4,      /* sliding: smaller than the sequence, so it wraps */
    GROUP = 4,       /* quantized: two groups per head row */
    RESIDUAL = 2,    /* quantized: small, so tokens get quantized */
};

/* Upper bound on allocations of one scenario (the loop stops at N + 1). */
#define MAX_ALLOCS 4000

/* Scenarios: every registered strategy; quantized once per bit width. */
struct scenario {
    int32_t strategy; /* registry index */
    int32_t bits;
};

static int32_t n_scenarios(void) { return kv_strategy_count() + 1; }

static struct scenario scenario_at(int32_t i)
{
    int32_t n = kv_strategy_count();
    if (i < n)
        return (struct scenario){i, 8};
    /* the extra one: quantized at 4 bits */
    for (int32_t j = 0; j < n; j++)
        if (strcmp(kv_strategy_at(j)->name, "quantized") == 0)
            return (struct scenario){j, 4};
    return (struct scenario){0, 8};
}

struct result {
    enum kv_status status;
    const char *where; /* the step that returned status */
    int32_t tokens[BATCH * NEW_TOKENS];
    int32_t fwd_tokens[BATCH * FWD_DECODES];
    float logits[BATCH * 40]; /* (batch, vocab) of the last forward */
};

static void make_prompt(int32_t *p)
{
    for (int32_t i = 0; i < BATCH * PROMPT_LEN; i++)
        p[i] = (7 * i + 3) % MODEL.vocab_size;
}

static int32_t argmax(const float *x, int32_t n)
{
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

/*
 * model -> cache -> kv_generate -> runner -> reset -> prefill forward ->
 * FWD_DECODES decode forwards -> destroy all. Stops at the first error and
 * records which step returned it; always frees what it made.
 */
static void run_scenario(const struct scenario *sc, struct result *res)
{
    memset(res, 0, sizeof *res);
    const struct kv_strategy_ops *ops = kv_strategy_at(sc->strategy);
    const struct kv_cache_config cc = {
        .n_layers = MODEL.n_layers,
        .batch = BATCH,
        .n_kv_heads = MODEL.n_kv_heads,
        .head_dim = MODEL.dim / MODEL.n_heads,
        .max_len = MODEL.max_len,
    };
    const struct test_params tp = {.window = WINDOW, .bits = sc->bits, .group = GROUP,
                                   .residual = RESIDUAL};
    int32_t prompt[BATCH * PROMPT_LEN];
    make_prompt(prompt);
    static const int32_t pad[BATCH] = {0, 2}; /* sequence 1 is left-padded */
    struct kv_model *m = NULL;
    struct kv_cache *c = NULL;
    struct kv_runner *r = NULL;
    enum kv_status s;

#define STEP(name, call)                                                                     \
    do {                                                                                     \
        s = (call);                                                                          \
        if (s != KV_OK) {                                                                    \
            res->where = (name);                                                             \
            goto out;                                                                        \
        }                                                                                    \
    } while (0)

    STEP("kv_model_create_synthetic", kv_model_create_synthetic(&m, &MODEL, 11));
    STEP("kv_cache_create", test_cache_create(&c, ops, &cc, &tp));
    const struct kv_gen_params gp = {
        .batch = BATCH,
        .prompt_len = PROMPT_LEN,
        .prompt = prompt,
        .pad = pad,
        .new_tokens = NEW_TOKENS,
        .n_threads = 1,
        .window = 0,
    };
    STEP("kv_generate", kv_generate(m, c, &gp, res->tokens, NULL, NULL));

    /* Forward calls by hand: the runner sized for the whole sequence so
     * the no-history strategy can re-run it. */
    const int32_t max_tokens = PROMPT_LEN + FWD_DECODES;
    STEP("kv_runner_create", kv_runner_create(&r, m, BATCH, max_tokens, 1));
    STEP("kv_cache_reset", kv_cache_reset(c));
    STEP("kv_forward(prefill)",
         kv_forward(r, m, c, prompt, PROMPT_LEN, 0, pad, res->logits, NULL));
    int32_t seq[BATCH * (PROMPT_LEN + FWD_DECODES)];
    for (int32_t d = 0; d < FWD_DECODES; d++) {
        int32_t next[BATCH];
        for (int32_t b = 0; b < BATCH; b++) {
            next[b] = argmax(res->logits + b * MODEL.vocab_size, MODEL.vocab_size);
            res->fwd_tokens[b * FWD_DECODES + d] = next[b];
        }
        if (ops->caps & KV_CAP_KEEPS_HISTORY) {
            STEP("kv_forward(decode)", kv_forward(r, m, c, next, 1, PROMPT_LEN + d, pad,
                                                  res->logits, NULL));
        } else {
            const int32_t len = PROMPT_LEN + d + 1;
            for (int32_t b = 0; b < BATCH; b++) {
                memcpy(seq + b * len, prompt + b * PROMPT_LEN, PROMPT_LEN * sizeof *seq);
                memcpy(seq + b * len + PROMPT_LEN, res->fwd_tokens + b * FWD_DECODES,
                       (size_t)(d + 1) * sizeof *seq);
            }
            STEP("kv_cache_reset", kv_cache_reset(c));
            STEP("kv_forward(recompute)",
                 kv_forward(r, m, c, seq, len, 0, pad, res->logits, NULL));
        }
    }
#undef STEP
out:
    res->status = s;
    kv_runner_destroy(r);
    kv_cache_destroy(c);
    kv_model_destroy(m);
}

/* ------------------------------------------------------------------------ */
/* The injection loop                                                       */

/*
 * Runs fn(arg) once cleanly (N allocations, reference result), then for
 * k = 1..N+1 with the k-th allocation failing. check(arg, ref, got) compares
 * a successful run with the reference. Returns the number of runs that
 * failed with KV_ERR_NOMEM.
 */
typedef void (*run_fn)(const void *arg, void *res);
typedef int (*same_fn)(const void *ref, const void *got);
typedef enum kv_status (*status_fn)(const void *res);
typedef const char *(*where_fn)(const void *res);

static int64_t inject_all(const char *label, int sticky, run_fn run, const void *arg,
                          void *ref, void *got, same_fn same, status_fn status_of,
                          where_fn where_of)
{
    const int64_t live0 = kv_alloc_live();
    kv_alloc_fail_at(0, 0);
    run(arg, ref);
    const int64_t n_allocs = kv_alloc_count();
    ck_assert_msg(status_of(ref) == KV_OK, "%s: reference run failed: %s at %s", label,
                  kv_status_str(status_of(ref)), where_of(ref));
    ck_assert_int_eq(kv_alloc_live(), live0);
    ck_assert_msg(n_allocs >= 1 && n_allocs < MAX_ALLOCS, "%s: %lld allocations", label,
                  (long long)n_allocs);

    int64_t nomem = 0;
    for (int64_t k = 1; k <= n_allocs + 1; k++) {
        kv_alloc_fail_at(k, sticky);
        run(arg, got);
        const int64_t made = kv_alloc_count();
        kv_alloc_fail_at(0, 0);
        const enum kv_status s = status_of(got);
        ck_assert_msg(kv_alloc_live() == live0,
                      "%s: k=%lld (%s): %lld allocations leaked after %s at %s", label,
                      (long long)k, sticky ? "sticky" : "once",
                      (long long)(kv_alloc_live() - live0), kv_status_str(s),
                      where_of(got) ? where_of(got) : "-");
        if (s == KV_OK) {
            ck_assert_msg(same(ref, got),
                          "%s: k=%lld (%s): succeeded with results that differ from the "
                          "reference", label, (long long)k, sticky ? "sticky" : "once");
        } else {
            ck_assert_msg(s == KV_ERR_NOMEM, "%s: k=%lld (%s): %s at %s, expected %s", label,
                          (long long)k, sticky ? "sticky" : "once", kv_status_str(s),
                          where_of(got), kv_status_str(KV_ERR_NOMEM));
            ck_assert_msg(k <= made, "%s: k=%lld: out of memory reported but only %lld "
                          "allocations were attempted", label, (long long)k,
                          (long long)made);
            nomem++;
        }
        if (k == n_allocs + 1)
            ck_assert_msg(s == KV_OK, "%s: k=N+1=%lld must not fail", label, (long long)k);
    }
    printf("  %-22s %-6s %4lld allocations, %4lld clean out-of-memory exits, no leak\n",
           label, sticky ? "sticky" : "once", (long long)n_allocs, (long long)nomem);
    return nomem;
}

/* ------------------------------------------------------------------------ */
/* Decoder, every strategy                                                  */

static void decoder_run(const void *arg, void *res) { run_scenario(arg, res); }

static int decoder_same(const void *a, const void *b)
{
    const struct result *x = a, *y = b;
    return memcmp(x->tokens, y->tokens, sizeof x->tokens) == 0 &&
           memcmp(x->fwd_tokens, y->fwd_tokens, sizeof x->fwd_tokens) == 0 &&
           memcmp(x->logits, y->logits, sizeof x->logits) == 0;
}

static enum kv_status decoder_status(const void *res)
{
    return ((const struct result *)res)->status;
}

static const char *decoder_where(const void *res)
{
    const char *w = ((const struct result *)res)->where;
    return w != NULL ? w : "-";
}

/* _i = scenario * 2 + sticky */
START_TEST(test_decoder_alloc_failure)
{
    const struct scenario sc = scenario_at(_i / 2);
    const int sticky = _i % 2;
    static struct result ref, got;
    char label[64];
    snprintf(label, sizeof label, "%s/%d-bit", kv_strategy_at(sc.strategy)->name, sc.bits);
    ck_assert_int_eq(MODEL.vocab_size * BATCH, (int)(sizeof ref.logits / sizeof(float)));
    int64_t nomem = inject_all(label, sticky, decoder_run, &sc, &ref, &got, decoder_same,
                               decoder_status, decoder_where);
    /* The model, the cache and the runner allocate at least once each. */
    ck_assert_int_ge(nomem, 3);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* File readers                                                             */

struct file_result {
    enum kv_status status;
    const char *where;
    int32_t ids[32];
    int32_t n_ids;
    struct kv_model_config cfg;
    int64_t rows;
};

static char ckpt_path[64], tok_path[64], csv_path[64];

/* Writes the three input files once (no injection while doing so). */
static void write_inputs(void)
{
    if (ckpt_path[0] != '\0')
        return;
    snprintf(ckpt_path, sizeof ckpt_path, "/tmp/kvlab_faults_%ld.bin", (long)getpid());
    snprintf(tok_path, sizeof tok_path, "/tmp/kvlab_faults_%ld.tok", (long)getpid());
    snprintf(csv_path, sizeof csv_path, "/tmp/kvlab_faults_%ld.csv", (long)getpid());
    struct kv_model *m = NULL;
    ck_assert_int_eq(kv_model_create_synthetic(&m, &MODEL, 3), KV_OK);
    ck_assert_int_eq(kv_checkpoint_export(ckpt_path, m), KV_OK);
    kv_model_destroy(m);

    /* A small BPE vocabulary: bytes a..e, merges "ab", "abc", and <s>. */
    static const char *const pieces[] = {"<s>", "</s>", "a", "b", "c", "d", "e",
                                         " ", "ab", "abc", "de"};
    const int32_t n = (int32_t)(sizeof pieces / sizeof pieces[0]);
    int32_t lens[sizeof pieces / sizeof pieces[0]];
    float scores[sizeof pieces / sizeof pieces[0]];
    for (int32_t i = 0; i < n; i++) {
        lens[i] = (int32_t)strlen(pieces[i]);
        scores[i] = (float)i;
    }
    struct kv_tokenizer *t = NULL;
    ck_assert_int_eq(kv_tokenizer_create(&t, n, pieces, lens, scores), KV_OK);
    ck_assert_int_eq(kv_tokenizer_save(t, tok_path), KV_OK);
    kv_tokenizer_destroy(t);

    FILE *f = fopen(csv_path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("# kvlab sweep v1\n"
          "strategy,layers,seq_len,step_ns_median\n"
          "dynamic,2,64,1000\n"
          "static,2,64,1200\n"
          "dynamic,2,128,2000\n",
          f);
    ck_assert_int_eq(fclose(f), 0);
}

static void remove_inputs(void)
{
    if (ckpt_path[0] == '\0')
        return;
    unlink(ckpt_path);
    unlink(tok_path);
    unlink(csv_path);
}

/* Loads the checkpoint, runs one forward on it, writes it back out. */
static void ckpt_run(const void *arg, void *res_)
{
    (void)arg;
    struct file_result *res = res_;
    memset(res, 0, sizeof *res);
    struct kv_model *m = NULL;
    struct kv_runner *r = NULL;
    char out[80];
    snprintf(out, sizeof out, "%s.out", ckpt_path);
    enum kv_status s = kv_checkpoint_read_header(ckpt_path, &res->cfg);
    res->where = "kv_checkpoint_read_header";
    if (s == KV_OK) {
        s = kv_checkpoint_load(ckpt_path, &m);
        res->where = "kv_checkpoint_load";
    }
    if (s == KV_OK) {
        s = kv_runner_create(&r, m, 1, 4, 1);
        res->where = "kv_runner_create";
    }
    if (s == KV_OK) {
        s = kv_checkpoint_export(out, m);
        res->where = "kv_checkpoint_export";
    }
    res->status = s;
    kv_runner_destroy(r);
    kv_model_destroy(m);
    unlink(out);
}

static void tok_run(const void *arg, void *res_)
{
    (void)arg;
    struct file_result *res = res_;
    memset(res, 0, sizeof *res);
    struct kv_tokenizer *t = NULL, *b = NULL;
    res->where = "kv_tokenizer_load";
    enum kv_status s = kv_tokenizer_load(&t, tok_path, 0);
    if (s == KV_OK) {
        static const char text[] = "abcde ab";
        res->where = "kv_tokenizer_encode";
        s = kv_tokenizer_encode(t, text, sizeof text - 1, kv_tokenizer_default_flags(t),
                                res->ids, 32, &res->n_ids);
    }
    if (s == KV_OK) {
        res->where = "kv_tokenizer_create_bytes";
        s = kv_tokenizer_create_bytes(&b);
    }
    res->status = s;
    kv_tokenizer_destroy(b);
    kv_tokenizer_destroy(t);
}

static void csv_run(const void *arg, void *res_)
{
    (void)arg;
    struct file_result *res = res_;
    memset(res, 0, sizeof *res);
    struct kv_csv *c = NULL;
    char err[KV_CSV_ERR_LEN];
    res->where = "kv_csv_read_file";
    res->status = kv_csv_read_file(&c, csv_path, err, sizeof err);
    if (res->status == KV_OK)
        res->rows = c->n_rows;
    kv_csv_destroy(c);
}

static int file_same(const void *a, const void *b)
{
    const struct file_result *x = a, *y = b;
    return x->n_ids == y->n_ids && memcmp(x->ids, y->ids, sizeof x->ids) == 0 &&
           memcmp(&x->cfg, &y->cfg, sizeof x->cfg) == 0 && x->rows == y->rows;
}

static enum kv_status file_status(const void *res)
{
    return ((const struct file_result *)res)->status;
}

static const char *file_where(const void *res)
{
    const char *w = ((const struct file_result *)res)->where;
    return w != NULL ? w : "-";
}

static const struct {
    const char *name;
    run_fn run;
} readers[] = {
    {"checkpoint", ckpt_run},
    {"tokenizer", tok_run},
    {"csv", csv_run},
};
#define N_READERS ((int)(sizeof readers / sizeof readers[0]))

/* _i = reader * 2 + sticky */
START_TEST(test_reader_alloc_failure)
{
    write_inputs();
    static struct file_result ref, got;
    int64_t nomem = inject_all(readers[_i / 2].name, _i % 2, readers[_i / 2].run, NULL,
                               &ref, &got, file_same, file_status, file_where);
    ck_assert_int_ge(nomem, 1);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Suite                                                                    */

/* A failed assertion in a no-fork run jumps out of the test: start clean. */
static void reset_injection(void) { kv_alloc_fail_at(0, 0); }

static Suite *faults_suite(void)
{
    Suite *s = suite_create("faults");
    TCase *tc = tcase_create("decoder");
    tcase_set_timeout(tc, 300);
    tcase_add_checked_fixture(tc, reset_injection, reset_injection);
    tcase_add_loop_test(tc, test_decoder_alloc_failure, 0, 2 * n_scenarios());
    suite_add_tcase(s, tc);
    tc = tcase_create("readers");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, reset_injection, reset_injection);
    tcase_add_loop_test(tc, test_reader_alloc_failure, 0, 2 * N_READERS);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(faults_suite());
    /* One process: the input files are written once and removed at the end. */
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    remove_inputs();
    return failed;
}
