/*
 * cmd_perplexity.c - `kvlab perplexity`: bits per byte and perplexity of a
 * text under one cache strategy, streamed token by token (perplexity.h),
 * with the loss per position bucket so a reader sees where a strategy
 * starts to hurt.
 *
 * The design decision that matters: every check that can be made before
 * the run is made before it (options, the model's header, the text's size
 * and tokens, the context against the model's length, the memory the run
 * needs), so bad input is one line and exit 2; the run itself can only fail
 * for run-time reasons (exit 1). Data goes to stdout (and --csv); the time
 * the run took goes to stderr, so stdout is the same on every machine.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../model/checkpoint.h"
#include "cli_cmd.h"
#include "cli_io.h"
#include "cli_opts.h"
#include "commands.h"
#include "../results/csv_write.h"
#include "../model/file_check.h"
#include "../model/perplexity.h"
#include "../model/tokenizer.h"

/* Texts larger than this are refused (the ids and losses live in memory). */
#define PPL_MAX_TEXT_BYTES ((size_t)1 << 30)
/* Buckets the default bucket width aims at. */
#define PPL_DEFAULT_BUCKETS 8

/* A file name echoed on stdout: quoted (control characters escaped), so a
 * name cannot forge a line; long names are kept whole up to 1 KiB. */
static const char *qname(char *buf, size_t cap, const char *s)
{
    return kv_text_quote(buf, cap, s, 1024);
}

/* Reads the --text file whole into kv_alloc memory (+1 byte, NUL). It is
 * opened as the layer judged it (without blocking, a regular file), so a
 * FIFO swapped in afterwards cannot hang the run. 0 or an exit status,
 * after printing one line. */
static int read_text(const char *path, char **buf, size_t *len)
{
    int fd;
    struct stat st;
    if (kv_file_open_input(path, &fd) != KV_OK) {
        fprintf(stderr, "kvlab: perplexity: --text '%s': %s\n", kv_text_q(path), kv_file_why());
        return 2;
    }
    if (fstat(fd, &st) != 0) {
        fprintf(stderr, "kvlab: perplexity: --text '%s': %s\n", kv_text_q(path),
                strerror(errno));
        close(fd);
        return 2;
    }
    if ((uint64_t)st.st_size > PPL_MAX_TEXT_BYTES) {
        fprintf(stderr, "kvlab: perplexity: --text '%s' is larger than %zu bytes\n",
                kv_text_q(path), PPL_MAX_TEXT_BYTES);
        close(fd);
        return 2;
    }
    size_t n = (size_t)st.st_size;
    char *b = kv_alloc(n + 1);
    if (b == NULL) {
        fprintf(stderr, "kvlab: perplexity: %s\n", kv_status_str(KV_ERR_NOMEM));
        close(fd);
        return 1;
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, b + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (got != n) {
        fprintf(stderr, "kvlab: perplexity: --text '%s': could not read the whole file\n",
                kv_text_q(path));
        kv_free(b);
        return 2;
    }
    *buf = b;
    *len = n;
    return 0;
}

/* One bucket of the loss table. */
struct bucket {
    double nats;
    int64_t tokens, bytes;
};

static double bucket_bpb(const struct bucket *b)
{
    return b->nats / log(2.0) / (double)(b->bytes > 0 ? b->bytes : 1);
}

/* Last position of bucket b (width bw), clipped to the last position seen. */
static int32_t bucket_end(int32_t b, int32_t bw, int32_t max_pos)
{
    int64_t e = (int64_t)b * bw + bw - 1;
    return e < max_pos ? (int32_t)e : max_pos;
}

struct ppl_opts {
    const char *text, *csv;
    int32_t context, recompute, max_tokens, bucket;
};

#define O(field) offsetof(struct ppl_opts, field)
static const struct kv_opt ppl_table[] = {
    {.name = "--text", .kind = KV_OPT_INPUT, .off = O(text), .meta = "FILE", .required = 1,
     .help = "the text to score (at least 2 bytes)"},
    {.name = "--context", .kind = KV_OPT_INT, .off = O(context), .lo = 1, .hi = INT32_MAX,
     .meta = "N", .help = "reset the cache every N tokens (positions restart at 0), N at most "
                          "the model's max length (default: one stream, which must fit it)"},
    {.name = "--recompute", .kind = KV_OPT_INT, .off = O(recompute), .lo = 1, .hi = INT32_MAX,
     .meta = "W", .help = "predict each token from a fresh prefill of the last W tokens "
                          "(sliding window with re-computation; with --context, of its chunk)"},
    {.name = "--max-tokens", .kind = KV_OPT_INT, .off = O(max_tokens), .lo = 2, .hi = INT32_MAX,
     .meta = "N", .help = "score only the first N tokens of the text (default: all)"},
    {.name = "--bucket", .kind = KV_OPT_INT, .off = O(bucket), .lo = 1, .hi = INT32_MAX,
     .meta = "B", .help = "positions per bucket of the loss table (default: the power of two "
                          "giving about 8 buckets)"},
    {.name = "--csv", .kind = KV_OPT_OUTPUT, .off = O(csv), .meta = "FILE",
     .help = "also write the bucket table and a summary as CSV (judged before the run, "
             "replaced atomically after it)"},
};
#undef O

/* The exact growing cache: the default strategy. */
static const char *ppl_default_strategy(void)
{
    const struct kv_strategy_ops *d = kv_strategy_with(
        KV_CAP_KEEPS_HISTORY, KV_CAP_LOSSY | KV_CAP_EVICTS | KV_CAP_PREALLOCATES);
    return d != NULL ? d->name : "";
}

/* The one strategy the run uses, for the parameter-flag check. */
static int32_t ppl_strategies(const struct kv_cmd_ctx *x, const char **names, int32_t max)
{
    if (max < 1)
        return 0;
    names[0] = x->c.strategy != NULL ? x->c.strategy : ppl_default_strategy();
    return 1;
}

static int ppl_check(struct kv_cmd_ctx *x)
{
    if (x->c.model_path == NULL) {
        fprintf(stderr, "kvlab: perplexity: needs --model FILE.bin (a trained checkpoint)\n");
        return 2;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The run                                                                  */

/* What one run holds, from the model to the bucket table; ppl_free
 * releases it. */
struct ppl_state {
    struct kv_cli_common c;
    struct ppl_opts o;
    struct kv_model *m;
    struct kv_tokenizer *tok;
    struct kv_cli_strategy strat;
    struct kv_cache *cache;
    char *text;
    int32_t *ids, *pos;   /* (n) the text's tokens; the position each was scored at */
    int32_t n;            /* tokens (--max-tokens applied) */
    double *loss;         /* (n) */
    struct kv_ppl_result res;
    double secs;          /* the run's wall time (stderr only) */
    struct bucket *bk;    /* (nb) buckets of bw positions, up to max_pos */
    int32_t bw, nb, max_pos;
    int64_t total_bytes;
    double bpb, ppl_byte;
    char sargs[256], label[64]; /* the strategy's parameters ("" for none), its cache's label */
};

/* The checkpoint, the strategy against it, and the tokenizer (needed unless
 * the vocabulary is 256 bytes). Returns the exit status. */
static int ppl_load(struct ppl_state *R)
{
    struct kv_cli_common *c = &R->c;
    int rc = kv_cli_load_model("perplexity", c->model_path, &R->m);
    if (rc != 0)
        return rc;
    c->model = R->m->cfg;
    c->cache.max_len = R->m->cfg.max_len;
    if (kv_cli_check_common(c) != 0 || kv_cli_strategy(c, c->strategy, &R->strat) != 0)
        return 2;
    const struct kv_model_config *mc = &R->m->cfg;
    if (R->o.context > mc->max_len || R->o.recompute > mc->max_len) {
        fprintf(stderr, "kvlab: perplexity: %s %" PRId32 " exceeds the model's max length (%"
                        PRId32 ")\n",
                R->o.context > mc->max_len ? "--context" : "--recompute",
                R->o.context > mc->max_len ? R->o.context : R->o.recompute, mc->max_len);
        return 2;
    }
    if (c->tokenizer_path != NULL)
        return kv_cli_load_tokenizer("perplexity", c->tokenizer_path, mc->vocab_size, &R->tok);
    if (mc->vocab_size != 256) {
        fprintf(stderr, "kvlab: perplexity: the model's vocabulary has %" PRId32 " tokens, "
                        "not 256 bytes: perplexity needs --tokenizer FILE\n", mc->vocab_size);
        return 2;
    }
    return 0;
}

/* The text's tokens (its bytes, or the tokenizer's), cut to --max-tokens
 * and checked against the model's length. Returns the exit status. */
static int ppl_tokens(struct ppl_state *R)
{
    const struct ppl_opts *o = &R->o;
    const struct kv_model_config *mc = &R->m->cfg;
    size_t len = 0;
    int r = read_text(o->text, &R->text, &len);
    if (r != 0)
        return r;
    if (len < 2) {
        fprintf(stderr, "kvlab: perplexity: --text '%s' %s; perplexity needs at least 2 bytes\n",
                kv_text_q(o->text), len == 0 ? "is empty" : "has 1 byte");
        return 2;
    }
    R->ids = kv_alloc((len + 3) * sizeof *R->ids);
    if (R->ids == NULL) {
        fprintf(stderr, "kvlab: perplexity: %s\n", kv_status_str(KV_ERR_NOMEM));
        return 1;
    }
    int32_t n = 0;
    if (R->tok != NULL) {
        enum kv_status s = kv_tokenizer_encode(R->tok, R->text, len,
                                               kv_tokenizer_default_flags(R->tok), R->ids,
                                               (int32_t)(len + 3), &n);
        if (s != KV_OK) {
            fprintf(stderr, "kvlab: perplexity: --text '%s': the tokenizer cannot encode it\n",
                    kv_text_q(o->text));
            return 2;
        }
    } else {
        for (size_t i = 0; i < len; i++)
            R->ids[i] = (unsigned char)R->text[i];
        n = (int32_t)len;
    }
    if (o->max_tokens > 0 && n > o->max_tokens)
        n = o->max_tokens;
    R->n = n;
    if (n < 2) {
        fprintf(stderr, "kvlab: perplexity: --text '%s' gives %" PRId32 " token; perplexity "
                        "needs at least 2\n", kv_text_q(o->text), n);
        return 2;
    }
    if (o->context == 0 && o->recompute == 0 && n - 1 > mc->max_len) {
        fprintf(stderr, "kvlab: perplexity: the text's %" PRId32 " tokens exceed the model's "
                        "max length (%" PRId32 "): use --context N or --max-tokens N\n", n,
                mc->max_len);
        return 2;
    }
    return 0;
}

/* The strategy's own parameters against the checkpoint (a --group that
 * divides its head_dim) and its cache's bytes with every size-bearing
 * parameter (--window, --residual, preallocated slots), then the whole
 * run's memory: weights, that cache, the per-token arrays. All before
 * anything is allocated for the run. Returns the exit status. */
static int ppl_check_size(struct ppl_state *R)
{
    struct kv_cli_common *c = &R->c;
    const struct kv_model_config *mc = &R->m->cfg;
    const int32_t n = R->n;
    c->cache.n_layers = mc->n_layers;
    c->cache.batch = 1;
    c->cache.n_kv_heads = mc->n_kv_heads;
    c->cache.head_dim = mc->dim / mc->n_heads;
    c->cache.max_len = mc->max_len;
    /* the most positions the cache holds at once */
    int32_t held = n;
    if (R->o.context > 0 && R->o.context < held)
        held = R->o.context;
    if (R->o.recompute > 0 && R->o.recompute < held)
        held = R->o.recompute;
    if (held > mc->max_len)
        held = mc->max_len;
    size_t strat_b = 0;
    int rc = kv_cli_check_strategy("perplexity", R->strat.ops, R->strat.params, &c->cache, held,
                                   1, &strat_b);
    if (rc != 0)
        return rc;
    size_t hs = (size_t)(mc->dim / mc->n_heads), cache_b, arr_b, w_b;
    /* at most max_len positions are cached (a static cache holds them all) */
    const size_t fc[] = {(size_t)mc->n_layers, (size_t)mc->n_kv_heads, hs,
                         (size_t)mc->max_len, 4 * sizeof(float)};
    const size_t fa[] = {(size_t)n, sizeof(double) + 2 * sizeof(int32_t)};
    if (kv_mul_sizes(&cache_b, 5, fc) != KV_OK)
        cache_b = SIZE_MAX;
    if (strat_b > 0) /* what the strategy itself says it needs */
        cache_b = strat_b;
    w_b = kv_model_weight_bytes(mc);
    if (kv_mul_sizes(&arr_b, 2, fa) != KV_OK || arr_b > SIZE_MAX - w_b ||
        cache_b > SIZE_MAX - arr_b - w_b ||
        kv_cli_check_memory("perplexity: this run", cache_b + arr_b + w_b) != 0)
        return 2;
    return 0;
}

/* The cache, then the scoring itself (kv_perplexity): the loss and the
 * position of every scored token. Returns the exit status. */
static int ppl_score(struct ppl_state *R)
{
    const struct kv_strategy_ops *ops = R->strat.ops;
    enum kv_status s = kv_cache_create(&R->cache, ops, &R->c.cache, R->strat.params);
    if (s != KV_OK) {
        fprintf(stderr, "kvlab: perplexity: strategy '%s' rejects this configuration: %s\n",
                ops->name, kv_status_str(s));
        return s == KV_ERR_NOMEM ? 1 : 2;
    }
    R->loss = kv_alloc((size_t)R->n * sizeof *R->loss);
    R->pos = kv_alloc((size_t)R->n * sizeof *R->pos);
    if (R->loss == NULL || R->pos == NULL) {
        fprintf(stderr, "kvlab: perplexity: %s\n", kv_status_str(KV_ERR_NOMEM));
        return 1;
    }
    struct kv_ppl_params pp = {.context = R->o.context, .recompute = R->o.recompute,
                               .n_threads = R->c.threads};
    int64_t t0 = kv_now_ns();
    s = kv_perplexity(R->m, R->cache, R->ids, R->n, &pp, R->loss, R->pos, &R->res);
    R->secs = (double)(kv_now_ns() - t0) / 1e9;
    if (s != KV_OK) {
        fprintf(stderr, "kvlab: perplexity: %s%s\n", kv_status_str(s),
                s == KV_ERR_INVALID ? " (a logit is not finite: is this a trained model?)" : "");
        return 1;
    }
    return 0;
}

/* Bucket sums: nats, tokens and the bytes the scored tokens stand for
 * (1 each at byte level); the totals; the strategy's names for the report.
 * Returns the exit status. */
static int ppl_buckets(struct ppl_state *R)
{
    const int32_t n = R->n;
    int32_t max_pos = 0;
    for (int32_t t = 0; t + 1 < n; t++)
        max_pos = R->pos[t] > max_pos ? R->pos[t] : max_pos;
    int32_t bw = R->o.bucket;
    if (bw == 0) {
        bw = 1;
        while ((int64_t)bw * PPL_DEFAULT_BUCKETS < (int64_t)max_pos + 1)
            bw *= 2;
    }
    R->max_pos = max_pos;
    R->bw = bw;
    R->nb = max_pos / bw + 1;
    R->bk = kv_alloc((size_t)R->nb * sizeof *R->bk);
    if (R->bk == NULL) {
        fprintf(stderr, "kvlab: perplexity: %s\n", kv_status_str(KV_ERR_NOMEM));
        return 1;
    }
    int64_t total_bytes = 0;
    for (int32_t t = 0; t + 1 < n; t++) {
        struct bucket *k = &R->bk[R->pos[t] / bw];
        int64_t nbytes = 1;
        if (R->tok != NULL) {
            const char *bytes;
            nbytes = (int64_t)kv_tokenizer_decode(R->tok, R->ids[t], R->ids[t + 1], &bytes);
        }
        k->nats += R->loss[t];
        k->tokens += 1;
        k->bytes += nbytes;
        total_bytes += nbytes;
    }
    R->total_bytes = total_bytes;
    R->bpb = R->res.nats / log(2.0) / (double)(total_bytes > 0 ? total_bytes : 1);
    R->ppl_byte = exp(R->res.nats / (double)(total_bytes > 0 ? total_bytes : 1));
    kv_params_format(R->strat.ops, R->strat.params, R->sargs, sizeof R->sargs);
    if (strcmp(R->sargs, "-") == 0)
        R->sargs[0] = '\0';
    kv_cache_label(R->cache, R->label, sizeof R->label);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The report                                                               */

/* The report on stdout (the same on every machine), the time on stderr. */
static void ppl_print(const struct ppl_state *R)
{
    const struct ppl_opts *o = &R->o;
    const struct kv_model_config *mc = &R->m->cfg;
    const struct kv_ppl_result *res = &R->res;
    const struct bucket *bk = R->bk;
    const char *sargs = R->sargs;
    char q1[1100], q2[1100];
    char mode[160];
    int mlen = 0;
    if (o->recompute > 0)
        mlen = snprintf(mode, sizeof mode, "recompute %" PRId32 " (each token from a fresh "
                        "prefill of the last %" PRId32 " tokens)%s", o->recompute, o->recompute,
                        o->context > 0 ? ", " : "");
    if (o->context > 0)
        snprintf(mode + mlen, sizeof mode - (size_t)mlen, "context %" PRId32
                 " (cache reset every %" PRId32 " tokens)", o->context, o->context);
    else if (o->recompute == 0)
        snprintf(mode, sizeof mode, "one stream of %" PRId32 " positions", R->n - 1);

    printf("perplexity of %s: %" PRId32 " tokens, %" PRId64 " bytes scored\n",
           qname(q1, sizeof q1, o->text), R->n, R->total_bytes);
    printf("model %s: dim %" PRId32 ", %" PRId32 " layers, %" PRId32 "/%" PRId32
           " heads, max length %" PRId32 "\n", qname(q2, sizeof q2, R->c.model_path), mc->dim,
           mc->n_layers, mc->n_heads, mc->n_kv_heads, mc->max_len);
    printf("strategy %s%s%s%s, %s\n", R->label, sargs[0] ? " (" : "", sargs,
           sargs[0] ? ")" : "", mode);
    printf("  %-13s %9s %10s %10s\n", "positions", "tokens", "bits/byte", "nats/token");
    for (int32_t b = 0; b < R->nb; b++) {
        if (bk[b].tokens == 0)
            continue;
        char range[32];
        snprintf(range, sizeof range, "%" PRId32 "-%" PRId32, b * R->bw,
                 bucket_end(b, R->bw, R->max_pos));
        printf("  %-13s %9" PRId64 " %10.4f %10.4f\n", range, bk[b].tokens,
               bucket_bpb(&bk[b]), bk[b].nats / (double)bk[b].tokens);
    }
    printf("  %-13s %9" PRId64 " %10.4f %10.4f\n", "all", res->tokens, R->bpb,
           res->nats / (double)res->tokens);
    printf("bits per byte %.4f, perplexity %.4f per byte (%.4f per token), peak cache %zu "
           "bytes\n", R->bpb, R->ppl_byte, exp(res->nats / (double)res->tokens),
           res->peak_cache_bytes);
    fprintf(stderr, "perplexity: %" PRId64 " tokens scored in %.1f s (%.0f tokens/s, %" PRId32
            " threads)\n", res->tokens, R->secs,
            R->secs > 0 ? (double)res->tokens / R->secs : 0.0, R->c.threads);
}

/* --csv: the bucket table and a summary in its metadata, replaced
 * atomically. Returns the exit status (0 without --csv). */
static int ppl_write_csv(const struct ppl_state *R)
{
    const struct ppl_opts *o = &R->o;
    if (o->csv == NULL)
        return 0;
    const struct kv_ppl_result *res = &R->res;
    const struct bucket *bk = R->bk;
    struct kv_csv_writer *w = NULL;
    static const char *const cols[] = {"bucket_start", "bucket_end", "tokens", "bytes",
                                       "nats", "bits_per_byte"};
    enum kv_status s = kv_csv_writer_create(&w);
    if (s == KV_OK) {
        kv_csv_writer_set_meta(w, "kvlab perplexity", NULL);
        kv_csv_writer_set_meta(w, "schema", "1");
        kv_csv_writer_set_meta(w, "model", R->c.model_path);
        kv_csv_writer_set_meta(w, "text", o->text);
        kv_csv_writer_set_meta(w, "strategy", R->strat.ops->name);
        kv_csv_writer_set_meta(w, "label", R->label);
        kv_csv_writer_set_meta(w, "params", R->sargs[0] ? R->sargs : "-");
        kv_csv_writer_set_meta(w, "dtype", kv_type_traits[kv_cache_dtype(R->cache)].name);
        kv_csv_writer_set_metaf(w, "context", "%" PRId32, o->context);
        kv_csv_writer_set_metaf(w, "recompute", "%" PRId32, o->recompute);
        kv_csv_writer_set_metaf(w, "tokens", "%" PRId64, res->tokens);
        kv_csv_writer_set_metaf(w, "bytes", "%" PRId64, R->total_bytes);
        kv_csv_writer_set_metaf(w, "bits_per_byte", "%.6f", R->bpb);
        kv_csv_writer_set_metaf(w, "perplexity", "%.6f", R->ppl_byte);
        kv_csv_writer_set_metaf(w, "peak_cache_bytes", "%zu", res->peak_cache_bytes);
        s = kv_csv_writer_set_header(w, cols, 6);
    }
    for (int32_t b = 0; b < R->nb && s == KV_OK; b++) {
        if (bk[b].tokens == 0)
            continue;
        char line[256];
        snprintf(line, sizeof line, "%" PRId32 ",%" PRId32 ",%" PRId64 ",%" PRId64
                 ",%.6f,%.6f", b * R->bw, bucket_end(b, R->bw, R->max_pos), bk[b].tokens,
                 bk[b].bytes, bk[b].nats, bucket_bpb(&bk[b]));
        s = kv_csv_writer_add_row(w, line);
    }
    if (s == KV_OK)
        s = kv_csv_writer_write(w, o->csv);
    kv_csv_writer_destroy(w);
    if (s != KV_OK) {
        fprintf(stderr, "kvlab: perplexity: cannot write '%s': %s\n", kv_text_q(o->csv),
                kv_status_str(s));
        return 1;
    }
    return 0;
}

static void ppl_free(struct ppl_state *R)
{
    kv_free(R->bk);
    kv_free(R->loss);
    kv_free(R->pos);
    kv_free(R->ids);
    kv_free(R->text);
    kv_cache_destroy(R->cache);
    kv_tokenizer_destroy(R->tok);
    kv_model_destroy(R->m);
}

/* Load and check everything, score, then report: each step only after the
 * one before it succeeded; bad input is exit 2, a run-time failure exit 1. */
static int ppl_run(struct kv_cmd_ctx *x)
{
    struct ppl_state R = {.c = x->c, .o = *(const struct ppl_opts *)x->opts};
    if (R.c.strategy == NULL) /* the exact growing cache */
        R.c.strategy = ppl_default_strategy();
    int rc = ppl_load(&R);
    if (rc == 0)
        rc = ppl_tokens(&R);
    if (rc == 0)
        rc = ppl_check_size(&R);
    if (rc == 0)
        rc = ppl_score(&R);
    if (rc == 0)
        rc = ppl_buckets(&R);
    if (rc == 0) {
        ppl_print(&R);
        rc = ppl_write_csv(&R);
    }
    ppl_free(&R);
    return rc;
}

const struct kv_cmd kv_cmd_perplexity_def = {
    .name = "perplexity",
    .summary = "bits per byte of a text, streamed through a cache strategy",
    .usage = "--model FILE.bin --text FILE [--strategy NAME] [options]",
    .about = "  the text is fed token by token through the cache, as generation feeds it (never\n"
             "  as one prefill), and each next token is scored from that step's logits; the\n"
             "  loss per position bucket shows where a strategy starts to hurt. --model is\n"
             "  required; --tokenizer too unless the vocabulary is 256 bytes (then the text's\n"
             "  bytes are the tokens). The default strategy is the exact growing cache\n"
             "  (dynamic). Data goes to stdout (and --csv), the time the run took to stderr.\n",
    .opts = ppl_table,
    .n_opts = sizeof ppl_table / sizeof ppl_table[0],
    .groups = KV_GRP_CHECKPOINT | KV_GRP_TOKENIZER | KV_GRP_STRATEGY | KV_GRP_PARAMS |
              KV_GRP_THREADS,
    .opts_size = sizeof(struct ppl_opts),
    .strategies = ppl_strategies,
    .check = ppl_check,
    .run = ppl_run,
    .example = "--model @MODEL --tokenizer @TOKENIZER --text @TEXT --max-tokens 24 --context 16 "
               "--threads 1 --csv @OUT",
};
