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
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "cli_opts.h"
#include "cli_cmd.h"
#include "commands.h"
int kv_cmd_perplexity(int argc, char **argv);
#include "csv_write.h"
#include "perplexity.h"
#include "tokenizer.h"

/* Texts larger than this are refused (the ids and losses live in memory). */
#define PPL_MAX_TEXT_BYTES ((size_t)1 << 30)
/* Buckets the default bucket width aims at. */
#define PPL_DEFAULT_BUCKETS 8

static void usage(FILE *f)
{
    fprintf(f,
            "usage: kvlab perplexity --model FILE.bin --text FILE [--strategy NAME] [options]\n"
            "\n"
            "Bits per byte and perplexity of the text under one cache strategy. The text\n"
            "is fed token by token through the cache, as generation feeds it (never as one\n"
            "prefill), and each next token is scored from that step's logits.\n"
            "\n"
            "  --model FILE.bin   llama2.c checkpoint (required)\n"
            "  --tokenizer FILE   llama2.c tokenizer.bin (required unless the vocabulary is\n"
            "                     256 bytes: then the text's bytes are the tokens)\n"
            "  --text FILE        the text to score (at least 2 bytes)\n"
            "  --strategy NAME    cache strategy or preset (default: the exact growing\n"
            "                     cache, dynamic; see 'kvlab strategies')\n"
            "  --context N        reset the cache every N tokens (positions restart at 0);\n"
            "                     1 <= N <= the model's max length. Default: one stream,\n"
            "                     which must fit the model's max length\n"
            "  --recompute W      predict each token from a fresh prefill of the last W\n"
            "                     tokens (sliding window with re-computation; with\n"
            "                     --context, of the last W tokens of its chunk)\n"
            "  --max-tokens N     score only the first N tokens of the text\n"
            "  --bucket B         positions per bucket of the loss table (default: the\n"
            "                     power of two giving about 8 buckets)\n"
            "  --csv FILE         also write the bucket table and a summary as CSV\n"
            "  --threads T        threads (default: all cores)\n"
            "The strategies' parameters:\n");
    kv_cli_print_param_help(f);
}

/* Reads a regular file whole into kv_alloc memory (+1 byte, NUL). 0 or an
 * exit status, after printing one line. */
static int read_text(const char *path, char **buf, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        fprintf(stderr, "kvlab: --text %s: %s\n", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return 2;
    }
    if (!S_ISREG(st.st_mode)) {
        fprintf(stderr, "kvlab: --text %s is not a regular file\n", path);
        close(fd);
        return 2;
    }
    if ((uint64_t)st.st_size > PPL_MAX_TEXT_BYTES) {
        fprintf(stderr, "kvlab: --text %s is larger than %zu bytes\n", path, PPL_MAX_TEXT_BYTES);
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
        fprintf(stderr, "kvlab: --text %s: could not read the whole file\n", path);
        kv_free(b);
        return 2;
    }
    *buf = b;
    *len = n;
    return 0;
}

/* Parses "--name V" / "--name=V" for name; 1 consumed, 0 not this option,
 * -1 no value. */
static int take_value(int argc, char **argv, int *i, const char *name, const char **val)
{
    size_t nl = strlen(name);
    const char *a = argv[*i];
    if (strncmp(a, name, nl) != 0 || (a[nl] != '\0' && a[nl] != '='))
        return 0;
    if (a[nl] == '=') {
        *val = a + nl + 1;
        *i += 1;
        return 1;
    }
    if (*i + 1 >= argc) {
        fprintf(stderr, "kvlab: %s expects a value\n", name);
        return -1;
    }
    *val = argv[*i + 1];
    *i += 2;
    return 1;
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

int kv_cmd_perplexity(int argc, char **argv)
{
    struct kv_cli_common c;
    kv_cli_common_defaults(&c);
    struct ppl_opts o = {0};
    const char *v;
    for (int i = 1; i < argc;) {
        int r = kv_cli_parse_common(&c, argc, argv, &i);
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
        static const char *const int_names[] = {"--context", "--recompute", "--max-tokens",
                                                "--bucket"};
        int32_t *int_fields[] = {&o.context, &o.recompute, &o.max_tokens, &o.bucket};
        const int32_t lo[] = {1, 1, 2, 1};
        int done = 0;
        for (size_t k = 0; k < 4 && !done; k++) {
            r = take_value(argc, argv, &i, int_names[k], &v);
            if (r < 0)
                return 2;
            if (r > 0) {
                if (kv_cli_i32(int_names[k], v, lo[k], INT32_MAX, int_fields[k]) != 0)
                    return 2;
                done = 1;
            }
        }
        if (done)
            continue;
        if ((r = take_value(argc, argv, &i, "--text", &o.text)) != 0 ||
            (r = take_value(argc, argv, &i, "--csv", &o.csv)) != 0) {
            if (r < 0)
                return 2;
            continue;
        }
        fprintf(stderr, "kvlab: perplexity: unknown option '%s' (try --help)\n", argv[i]);
        return 2;
    }
    if (c.model_path == NULL) {
        fprintf(stderr, "kvlab: perplexity needs --model FILE.bin (a trained checkpoint)\n");
        return 2;
    }
    if (o.text == NULL || o.text[0] == '\0') {
        fprintf(stderr, "kvlab: perplexity needs --text FILE\n");
        return 2;
    }
    if (c.batch != 1) {
        fprintf(stderr, "kvlab: perplexity scores one stream: --batch must be 1\n");
        return 2;
    }
    if (o.csv != NULL && (kv_cli_same_file(o.csv, o.text) ||
                          kv_cli_same_file(o.csv, c.model_path))) {
        fprintf(stderr, "kvlab: --csv '%s' names an input file\n", o.csv);
        return 2;
    }
    if (c.strategy == NULL) { /* the exact growing cache */
        const struct kv_strategy_ops *d = kv_strategy_with(
            KV_CAP_KEEPS_HISTORY, KV_CAP_LOSSY | KV_CAP_EVICTS | KV_CAP_PREALLOCATES);
        c.strategy = d != NULL ? d->name : "";
    }

    struct kv_model *m = NULL;
    struct kv_tokenizer *tok = NULL;
    struct kv_cache *cache = NULL;
    char *text = NULL;
    int32_t *ids = NULL, *pos = NULL;
    double *loss = NULL;
    struct bucket *bk = NULL;
    int rc = 2;
    enum kv_status s = kv_checkpoint_load(c.model_path, &m);
    if (s != KV_OK) {
        fprintf(stderr, "kvlab: --model %s: %s\n", c.model_path, kv_status_str(s));
        return s == KV_ERR_IO || s == KV_ERR_FORMAT ? 2 : 1;
    }
    c.model = m->cfg;
    c.cache.max_len = m->cfg.max_len;
    struct kv_cli_strategy strat;
    if (kv_cli_check_common(&c) != 0 || kv_cli_strategy(&c, c.strategy, &strat) != 0)
        goto out;
    const struct kv_strategy_ops *ops = strat.ops;
    const struct kv_model_config *mc = &m->cfg;
    if (o.context > mc->max_len || o.recompute > mc->max_len) {
        fprintf(stderr, "kvlab: %s %" PRId32 " exceeds the model's max length (%" PRId32 ")\n",
                o.context > mc->max_len ? "--context" : "--recompute",
                o.context > mc->max_len ? o.context : o.recompute, mc->max_len);
        goto out;
    }
    if (c.tokenizer_path != NULL) {
        s = kv_tokenizer_load(&tok, c.tokenizer_path, mc->vocab_size);
        if (s != KV_OK) {
            fprintf(stderr, "kvlab: --tokenizer %s: %s\n", c.tokenizer_path, kv_status_str(s));
            rc = s == KV_ERR_NOMEM ? 1 : 2;
            goto out;
        }
    } else if (mc->vocab_size != 256) {
        fprintf(stderr, "kvlab: the model's vocabulary has %" PRId32 " tokens, not 256 bytes: "
                        "perplexity needs --tokenizer FILE\n", mc->vocab_size);
        goto out;
    }

    size_t len = 0;
    int r = read_text(o.text, &text, &len);
    if (r != 0) {
        rc = r;
        goto out;
    }
    if (len < 2) {
        fprintf(stderr, "kvlab: --text %s %s; perplexity needs at least 2 bytes\n", o.text,
                len == 0 ? "is empty" : "has 1 byte");
        goto out;
    }
    ids = kv_alloc((len + 3) * sizeof *ids);
    if (ids == NULL) {
        fprintf(stderr, "kvlab: perplexity: %s\n", kv_status_str(KV_ERR_NOMEM));
        rc = 1;
        goto out;
    }
    int32_t n = 0;
    if (tok != NULL) {
        s = kv_tokenizer_encode(tok, text, len, kv_tokenizer_default_flags(tok), ids,
                                (int32_t)(len + 3), &n);
        if (s != KV_OK) {
            fprintf(stderr, "kvlab: --text %s: the tokenizer cannot encode it\n", o.text);
            goto out;
        }
    } else {
        for (size_t i = 0; i < len; i++)
            ids[i] = (unsigned char)text[i];
        n = (int32_t)len;
    }
    if (o.max_tokens > 0 && n > o.max_tokens)
        n = o.max_tokens;
    if (n < 2) {
        fprintf(stderr, "kvlab: --text %s gives %" PRId32 " token; perplexity needs at least 2\n",
                o.text, n);
        goto out;
    }
    if (o.context == 0 && o.recompute == 0 && n - 1 > mc->max_len) {
        fprintf(stderr, "kvlab: the text's %" PRId32 " tokens exceed the model's max length (%"
                        PRId32 "): use --context N or --max-tokens N\n", n, mc->max_len);
        goto out;
    }
    /* Memory: weights, the largest cache, the per-token arrays. */
    {
        size_t hs = (size_t)(mc->dim / mc->n_heads), cache_b, arr_b;
        /* at most max_len positions are cached (a static cache holds them all) */
        const size_t fc[] = {(size_t)mc->n_layers, (size_t)mc->n_kv_heads, hs,
                             (size_t)mc->max_len, 4 * sizeof(float)};
        const size_t fa[] = {(size_t)n, sizeof(double) + 2 * sizeof(int32_t)};
        if (kv_mul_sizes(&cache_b, 5, fc) != KV_OK || kv_mul_sizes(&arr_b, 2, fa) != KV_OK ||
            kv_cli_check_memory("this run", cache_b + arr_b + kv_model_weight_bytes(mc)) != 0)
            goto out;
    }

    c.cache.n_layers = mc->n_layers;
    c.cache.batch = 1;
    c.cache.n_kv_heads = mc->n_kv_heads;
    c.cache.head_dim = mc->dim / mc->n_heads;
    s = kv_cache_create(&cache, ops, &c.cache, strat.params);
    if (s != KV_OK) {
        fprintf(stderr, "kvlab: strategy '%s' rejects this configuration: %s\n", ops->name,
                kv_status_str(s));
        rc = s == KV_ERR_NOMEM ? 1 : 2;
        goto out;
    }
    rc = 1;
    loss = kv_alloc((size_t)n * sizeof *loss);
    pos = kv_alloc((size_t)n * sizeof *pos);
    if (loss == NULL || pos == NULL) {
        fprintf(stderr, "kvlab: perplexity: %s\n", kv_status_str(KV_ERR_NOMEM));
        goto out;
    }
    struct kv_ppl_params pp = {.context = o.context, .recompute = o.recompute,
                               .n_threads = c.threads};
    struct kv_ppl_result res;
    int64_t t0 = kv_now_ns();
    s = kv_perplexity(m, cache, ids, n, &pp, loss, pos, &res);
    double secs = (double)(kv_now_ns() - t0) / 1e9;
    if (s != KV_OK) {
        fprintf(stderr, "kvlab: perplexity: %s%s\n", kv_status_str(s),
                s == KV_ERR_INVALID ? " (a logit is not finite: is this a trained model?)" : "");
        goto out;
    }

    /* Bucket sums: nats, tokens and the bytes the scored tokens stand for
     * (1 each at byte level). */
    int32_t max_pos = 0;
    for (int32_t t = 0; t + 1 < n; t++)
        max_pos = pos[t] > max_pos ? pos[t] : max_pos;
    int32_t bw = o.bucket;
    if (bw == 0) {
        bw = 1;
        while ((int64_t)bw * PPL_DEFAULT_BUCKETS < (int64_t)max_pos + 1)
            bw *= 2;
    }
    int32_t nb = max_pos / bw + 1;
    bk = kv_alloc((size_t)nb * sizeof *bk);
    if (bk == NULL) {
        fprintf(stderr, "kvlab: perplexity: %s\n", kv_status_str(KV_ERR_NOMEM));
        goto out;
    }
    int64_t total_bytes = 0;
    for (int32_t t = 0; t + 1 < n; t++) {
        struct bucket *k = &bk[pos[t] / bw];
        int64_t nbytes = 1;
        if (tok != NULL) {
            const char *bytes;
            nbytes = (int64_t)kv_tokenizer_decode(tok, ids[t], ids[t + 1], &bytes);
        }
        k->nats += loss[t];
        k->tokens += 1;
        k->bytes += nbytes;
        total_bytes += nbytes;
    }
    double bpb = res.nats / log(2.0) / (double)(total_bytes > 0 ? total_bytes : 1);
    double ppl_byte = exp(res.nats / (double)(total_bytes > 0 ? total_bytes : 1));
    char sargs[256], label[64];
    kv_params_format(ops, strat.params, sargs, sizeof sargs);
    if (strcmp(sargs, "-") == 0)
        sargs[0] = '\0';
    kv_cache_label(cache, label, sizeof label);
    char mode[160];
    int mlen = 0;
    if (o.recompute > 0)
        mlen = snprintf(mode, sizeof mode, "recompute %" PRId32 " (each token from a fresh "
                        "prefill of the last %" PRId32 " tokens)%s", o.recompute, o.recompute,
                        o.context > 0 ? ", " : "");
    if (o.context > 0)
        snprintf(mode + mlen, sizeof mode - (size_t)mlen, "context %" PRId32
                 " (cache reset every %" PRId32 " tokens)", o.context, o.context);
    else if (o.recompute == 0)
        snprintf(mode, sizeof mode, "one stream of %" PRId32 " positions", n - 1);

    printf("perplexity of %s: %" PRId32 " tokens, %" PRId64 " bytes scored\n", o.text, n,
           total_bytes);
    printf("model %s: dim %" PRId32 ", %" PRId32 " layers, %" PRId32 "/%" PRId32
           " heads, max length %" PRId32 "\n", c.model_path, mc->dim, mc->n_layers,
           mc->n_heads, mc->n_kv_heads, mc->max_len);
    printf("strategy %s%s%s%s, %s\n", label, sargs[0] ? " (" : "", sargs,
           sargs[0] ? ")" : "", mode);
    printf("  %-13s %9s %10s %10s\n", "positions", "tokens", "bits/byte", "nats/token");
    for (int32_t b = 0; b < nb; b++) {
        if (bk[b].tokens == 0)
            continue;
        char range[32];
        snprintf(range, sizeof range, "%" PRId32 "-%" PRId32, b * bw, bucket_end(b, bw, max_pos));
        printf("  %-13s %9" PRId64 " %10.4f %10.4f\n", range, bk[b].tokens,
               bucket_bpb(&bk[b]), bk[b].nats / (double)bk[b].tokens);
    }
    printf("  %-13s %9" PRId64 " %10.4f %10.4f\n", "all", res.tokens, bpb,
           res.nats / (double)res.tokens);
    printf("bits per byte %.4f, perplexity %.4f per byte (%.4f per token), peak cache %zu "
           "bytes\n", bpb, ppl_byte, exp(res.nats / (double)res.tokens), res.peak_cache_bytes);
    fprintf(stderr, "perplexity: %" PRId64 " tokens scored in %.1f s (%.0f tokens/s, %" PRId32
            " threads)\n", res.tokens, secs, secs > 0 ? (double)res.tokens / secs : 0.0,
            c.threads);

    if (o.csv != NULL) {
        struct kv_csv_writer *w = NULL;
        static const char *const cols[] = {"bucket_start", "bucket_end", "tokens", "bytes",
                                           "nats", "bits_per_byte"};
        s = kv_csv_writer_create(&w);
        if (s == KV_OK) {
            kv_csv_writer_set_meta(w, "kvlab perplexity", NULL);
            kv_csv_writer_set_meta(w, "schema", "1");
            kv_csv_writer_set_meta(w, "model", c.model_path);
            kv_csv_writer_set_meta(w, "text", o.text);
            kv_csv_writer_set_meta(w, "strategy", ops->name);
            kv_csv_writer_set_meta(w, "label", label);
            kv_csv_writer_set_meta(w, "params", sargs[0] ? sargs : "-");
            kv_csv_writer_set_meta(w, "dtype", kv_type_traits[kv_cache_dtype(cache)].name);
            kv_csv_writer_set_metaf(w, "context", "%" PRId32, o.context);
            kv_csv_writer_set_metaf(w, "recompute", "%" PRId32, o.recompute);
            kv_csv_writer_set_metaf(w, "tokens", "%" PRId64, res.tokens);
            kv_csv_writer_set_metaf(w, "bytes", "%" PRId64, total_bytes);
            kv_csv_writer_set_metaf(w, "bits_per_byte", "%.6f", bpb);
            kv_csv_writer_set_metaf(w, "perplexity", "%.6f", ppl_byte);
            kv_csv_writer_set_metaf(w, "peak_cache_bytes", "%zu", res.peak_cache_bytes);
            s = kv_csv_writer_set_header(w, cols, 6);
        }
        for (int32_t b = 0; b < nb && s == KV_OK; b++) {
            if (bk[b].tokens == 0)
                continue;
            char line[256];
            snprintf(line, sizeof line, "%" PRId32 ",%" PRId32 ",%" PRId64 ",%" PRId64
                     ",%.6f,%.6f", b * bw, bucket_end(b, bw, max_pos), bk[b].tokens,
                     bk[b].bytes, bk[b].nats, bucket_bpb(&bk[b]));
            s = kv_csv_writer_add_row(w, line);
        }
        if (s == KV_OK)
            s = kv_csv_writer_write(w, o.csv);
        kv_csv_writer_destroy(w);
        if (s != KV_OK) {
            fprintf(stderr, "kvlab: cannot write '%s': %s\n", o.csv, kv_status_str(s));
            goto out;
        }
    }
    rc = 0;

out:
    kv_free(bk);
    kv_free(loss);
    kv_free(pos);
    kv_free(ids);
    kv_free(text);
    kv_cache_destroy(cache);
    kv_tokenizer_destroy(tok);
    kv_model_destroy(m);
    return rc;
}

/* transitional: on the command table, parsing its own argv */
const struct kv_cmd kv_cmd_perplexity_def = {.name = "perplexity", .summary = "bits per byte of a text, streamed through a cache strategy", .legacy = kv_cmd_perplexity};
