/*
 * cmd_stale.c - `kvlab stale-cache`: why a KV cache is for inference only.
 *
 * A cache is exact because the keys and values of old tokens never change
 * while the weights stay the same. Training changes the weights after every
 * step, and then the cached K and V are stale: they were computed by the old
 * weights. This command shows it with two checkpoints, OLD and NEW = OLD
 * after one optimizer step of the training script (bench/py/train_model.py
 * --one-step-from; `make stale-cache` makes NEW):
 *
 *   1. prefill the prompt with OLD into an exact cache (dynamic), pick the
 *      next token;
 *   2. control: decode that token with OLD through the cache, and with OLD
 *      without a cache (`none`): the same logits up to float rounding;
 *   3. decode it with NEW through the STALE cache, and with NEW without a
 *      cache: the logits differ;
 *   4. where it comes from: layer by layer, the cached K and V (computed by
 *      OLD) against the K and V that NEW computes for the same positions.
 *      Layer 0's differ only through the weights of layer 0 (and the
 *      embedding); every later layer also receives a residual stream that
 *      the changed earlier layers computed, so the staleness compounds.
 *
 * The cache of steps 1-4 is the exact growing one (dynamic) unless
 * --strategy names another exact one: it must keep every position, in f32,
 * unrounded (static, dynamic-concat, paged ... ; a strategy that evicts or
 * rounds is refused before anything is loaded into it), since step 4 reads
 * its rows back.
 *
 * The design decision: nothing is simulated. Every number comes from kvlab's
 * own forward pass and cache (the spans a strategy exposes), and the only
 * difference between the runs in step 3 is whether the past K and V were
 * computed by the weights that use them.
 */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "../../kernels/kv_ops.h"
#include "../model/checkpoint.h"
#include "cli_cmd.h"
#include "cli_io.h"
#include "cli_opts.h"
#include "commands.h"
#include "../model/file_check.h"
#include "../model/tokenizer.h"

#define STALE_MAX_PROMPT 1024
#define STALE_DEFAULT_PROMPT "A key-value cache remembers; the weights moved on.\n"

/* ------------------------------------------------------------------------ */
/* Runs                                                                     */

struct stale_ctx {
    int32_t threads;
    const int32_t *ids; /* prompt, then the next token */
    int32_t P;
};

/* Feeds ids[0..n) at positions 0.. (one prefill) through cache with m;
 * logits of the last token into out. */
static enum kv_status run_prefill(const struct stale_ctx *x, const struct kv_model *m,
                                  struct kv_cache *cache, int32_t n, float *out)
{
    struct kv_runner *r = NULL;
    enum kv_status s = kv_runner_create(&r, m, 1, n, x->threads);
    if (s == KV_OK)
        s = kv_cache_reset(cache);
    if (s == KV_OK)
        s = kv_forward(r, m, cache, x->ids, n, 0, NULL, out, NULL);
    kv_runner_destroy(r);
    return s;
}

/* Decodes ids[P] at position P with m through the cache as it is. */
static enum kv_status run_decode(const struct stale_ctx *x, const struct kv_model *m,
                                 struct kv_cache *cache, float *out)
{
    struct kv_runner *r = NULL;
    enum kv_status s = kv_runner_create(&r, m, 1, 1, x->threads);
    if (s == KV_OK)
        s = kv_forward(r, m, cache, x->ids + x->P, 1, x->P, NULL, out, NULL);
    kv_runner_destroy(r);
    return s;
}

static float max_abs_diff(const float *a, const float *b, size_t n)
{
    float d = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float e = fabsf(a[i] - b[i]);
        d = e > d || e != e ? e : d;
    }
    return d;
}

/* The f32 row of kv head h of sequence 0 at absolute position pos in a
 * view, K (which == 0) or V, or NULL when no span holds it. */
static const float *view_row(const struct kv_view *v, int which, int32_t pos, int32_t h)
{
    for (int32_t i = 0; i < v->n_spans; i++) {
        const struct kv_span *sp = &v->spans[i];
        const struct kv_tensor *x = which == 0 ? &sp->k : &sp->v;
        int32_t t = pos - sp->pos0;
        if (t < 0 || t >= sp->n_tokens || x->dtype != KV_DTYPE_F32)
            continue;
        const char *base = sp->page_tokens > 0 ? (const char *)x->pages[t / sp->page_tokens]
                                               : (const char *)x->data;
        int32_t r = sp->page_tokens > 0 ? t % sp->page_tokens : t;
        return (const float *)(base + (size_t)h * x->head_stride + (size_t)r * x->row_stride);
    }
    return NULL;
}

/* Largest |a - b| and the RMS of b over positions 0..P-1 of one layer's
 * views (K if which == 0, else V), sequence 0. Both caches are exact (f32)
 * and hold every position. */
static void span_diff(const struct kv_cache *a, const struct kv_cache *b, int32_t layer,
                      int which, int32_t P, int32_t kvd, float *max_d, double *rms_b)
{
    struct kv_view va, vb;
    enum kv_status s = kv_cache_view(a, layer, &va);
    KV_ASSERT(s == KV_OK);
    s = kv_cache_view(b, layer, &vb);
    KV_ASSERT(s == KV_OK);
    (void)s;
    int32_t hs = a->cfg.head_dim;
    float md = 0.0f;
    double ss = 0.0;
    for (int32_t t = 0; t < P; t++)
        for (int32_t h = 0; h < kvd / hs; h++) {
            const float *ra = view_row(&va, which, t, h), *rb = view_row(&vb, which, t, h);
            KV_ASSERT(ra != NULL && rb != NULL);
            for (int32_t i = 0; i < hs; i++) {
                float e = fabsf(ra[i] - rb[i]);
                md = e > md ? e : md;
                ss += (double)rb[i] * rb[i];
            }
        }
    *max_d = md;
    *rms_b = sqrt(ss / ((double)P * kvd));
}

/* Largest |old - new| over all weights, and the RMS of the old weights. */
static void weight_change(const struct kv_model *a, const struct kv_model *b, float *max_d,
                          double *rms)
{
    const float *const pa[] = {a->w.token_embedding, a->w.rms_att, a->w.wq, a->w.wk, a->w.wv,
                               a->w.wo, a->w.rms_ffn, a->w.w1, a->w.w2, a->w.w3,
                               a->w.rms_final};
    const float *const pb[] = {b->w.token_embedding, b->w.rms_att, b->w.wq, b->w.wk, b->w.wv,
                               b->w.wo, b->w.rms_ffn, b->w.w1, b->w.w2, b->w.w3,
                               b->w.rms_final};
    const struct kv_model_config *c = &a->cfg;
    size_t L = (size_t)c->n_layers, D = (size_t)c->dim, H = (size_t)c->hidden_dim;
    size_t kvd = (size_t)c->n_kv_heads * (D / (size_t)c->n_heads), V = (size_t)c->vocab_size;
    const size_t n[] = {V * D, L * D, L * D * D, L * kvd * D, L * kvd * D, L * D * D,
                        L * D, L * H * D, L * H * D, L * H * D, D};
    float md = 0.0f;
    double ss = 0.0, cnt = 0.0;
    for (size_t k = 0; k < sizeof n / sizeof n[0]; k++)
        for (size_t i = 0; i < n[k]; i++) {
            float e = fabsf(pa[k][i] - pb[k][i]);
            md = e > md ? e : md;
            ss += (double)pa[k][i] * pa[k][i];
            cnt += 1.0;
        }
    *max_d = md;
    *rms = sqrt(ss / cnt);
}

/* ------------------------------------------------------------------------ */
/* The command                                                              */

static int same_shape(const struct kv_model_config *a, const struct kv_model_config *b)
{
    return a->dim == b->dim && a->hidden_dim == b->hidden_dim && a->n_layers == b->n_layers &&
           a->n_heads == b->n_heads && a->n_kv_heads == b->n_kv_heads &&
           a->vocab_size == b->vocab_size && a->max_len == b->max_len &&
           a->shared_classifier == b->shared_classifier;
}

static int load(const char *opt, const char *path, struct kv_model **m)
{
    kv_file_set_why("%s", "");
    enum kv_status s = kv_checkpoint_load(path, m);
    if (s != KV_OK) {
        const char *why = kv_file_why();
        fprintf(stderr, "kvlab: stale-cache: %s '%s': %s\n", opt, kv_text_q(path),
                why[0] != '\0' ? why : kv_status_str(s));
        return s == KV_ERR_NOMEM ? 1 : 2;
    }
    return 0;
}

struct stale_opts {
    const char *updated, *text, *ptoks;
};

#define S(field) offsetof(struct stale_opts, field)
static const struct kv_opt stale_table[] = {
    {.name = "--updated", .kind = KV_OPT_INPUT, .off = S(updated), .meta = "NEW.bin",
     .required = 1, .help = "the checkpoint one training step after --model's"},
    {.name = "--prompt", .kind = KV_OPT_TEXT, .off = S(text), .meta = "TEXT",
     .help = "the prompt (default \"A key-value cache remembers; the weights moved on.\\n\"; "
             "bytes, or the tokenizer's BPE)"},
    {.name = "--prompt-tokens", .kind = KV_OPT_TEXT, .off = S(ptoks), .meta = "IDS",
     .help = "the prompt as comma-separated token ids (no tokenizer needed)"},
};
#undef S

/* The exact growing cache: the default, and what --strategy must match. */
static const struct kv_strategy_ops *stale_exact(void)
{
    return kv_strategy_with(KV_CAP_KEEPS_HISTORY,
                            KV_CAP_LOSSY | KV_CAP_EVICTS | KV_CAP_PREALLOCATES);
}

static int32_t stale_strategies(const struct kv_cmd_ctx *x, const char **names, int32_t max)
{
    const struct kv_strategy_ops *d = stale_exact();
    if (max < 1 || (x->c.strategy == NULL && d == NULL))
        return 0;
    names[0] = x->c.strategy != NULL ? x->c.strategy : d->name;
    return 1;
}

static int stale_check(struct kv_cmd_ctx *x)
{
    const struct stale_opts *o = x->opts;
    if (x->c.model_path == NULL) {
        fprintf(stderr, "kvlab: stale-cache: needs --model OLD.bin and --updated NEW.bin\n");
        return 2;
    }
    if (o->text != NULL && o->ptoks != NULL) {
        fprintf(stderr, "kvlab: stale-cache: give either --prompt or --prompt-tokens, not both\n");
        return 2;
    }
    return 0;
}

/* What one run holds: both checkpoints, the prompt, the three caches and
 * the logits of every step; stale_free releases it. */
struct stale_state {
    struct kv_cli_common c;
    const struct stale_opts *so;
    struct kv_model *om, *nm;        /* OLD (--model), NEW (--updated) */
    struct kv_tokenizer *tok;
    int32_t ids[STALE_MAX_PROMPT + 1]; /* the prompt, then OLD's next token */
    int32_t P;
    struct kv_cli_strategy st;       /* the exact cache */
    const struct kv_strategy_ops *nocache;
    struct kv_cache *stale, *fresh, *none;
    float *lg;                       /* (6, vocab) logits, in the steps' order */
};

/* Both checkpoints (one shape) and the tokenizer: the given one, bytes
 * for a 256-token vocabulary, else --prompt-tokens is needed. Returns the
 * exit status. */
static int stale_load(struct stale_state *X)
{
    int rc = load("--model", X->c.model_path, &X->om);
    if (rc == 0)
        rc = load("--updated", X->so->updated, &X->nm);
    if (rc != 0)
        return rc;
    const struct kv_model_config *mc = &X->om->cfg;
    if (!same_shape(mc, &X->nm->cfg)) {
        fprintf(stderr, "kvlab: stale-cache: --model and --updated are checkpoints of "
                        "different shapes\n");
        return 2;
    }
    if (X->c.tokenizer_path != NULL)
        return kv_cli_load_tokenizer("stale-cache", X->c.tokenizer_path, mc->vocab_size,
                                     &X->tok);
    if (mc->vocab_size == 256) {
        if (kv_tokenizer_create_bytes(&X->tok) != KV_OK) {
            fprintf(stderr, "kvlab: stale-cache: %s\n", kv_status_str(KV_ERR_NOMEM));
            return 1;
        }
    } else if (X->so->ptoks == NULL) {
        fprintf(stderr, "kvlab: stale-cache: a vocabulary of %" PRId32 " tokens needs "
                        "--tokenizer FILE or --prompt-tokens\n", mc->vocab_size);
        return 2;
    }
    return 0;
}

/* The prompt's ids: --prompt-tokens, else --prompt (or the default text)
 * tokenized; at most STALE_MAX_PROMPT, one position left for the next
 * token. Returns the exit status. */
static int stale_prompt(struct stale_state *X)
{
    const struct kv_model_config *mc = &X->om->cfg;
    int32_t P = 0;
    int32_t cap = STALE_MAX_PROMPT < mc->max_len ? STALE_MAX_PROMPT : mc->max_len - 1;
    if (X->so->ptoks != NULL) {
        P = kv_cli_int_list("stale-cache: --prompt-tokens", X->so->ptoks, 0, mc->vocab_size - 1,
                            X->ids, cap);
        if (P < 1)
            return 2;
    } else {
        const char *t = X->so->text != NULL ? X->so->text : STALE_DEFAULT_PROMPT;
        size_t len = strlen(t);
        int32_t buf[STALE_MAX_PROMPT + 3];
        if (len == 0 || len > STALE_MAX_PROMPT ||
            kv_tokenizer_encode(X->tok, t, len, kv_tokenizer_default_flags(X->tok), buf,
                                STALE_MAX_PROMPT + 3, &P) != KV_OK || P < 1 || P > cap) {
            fprintf(stderr, "kvlab: stale-cache: --prompt must give 1 to %" PRId32 " tokens\n",
                    cap);
            return 2;
        }
        memcpy(X->ids, buf, (size_t)P * sizeof *X->ids);
    }
    X->P = P;
    return 0;
}

/* The exact cache (--strategy, default the growing one), which must keep
 * every position in f32 as computed (step 4 reads the rows back), and one
 * that keeps nothing (no cache). Returns the exit status. */
static int stale_strategy(struct stale_state *X)
{
    struct kv_cli_common *c = &X->c;
    const struct kv_model_config *mc = &X->om->cfg;
    c->model = *mc;
    c->cache = (struct kv_cache_config){.n_layers = mc->n_layers, .batch = 1,
                                        .n_kv_heads = mc->n_kv_heads,
                                        .head_dim = mc->dim / mc->n_heads,
                                        .max_len = mc->max_len};
    const struct kv_strategy_ops *dflt = stale_exact();
    X->nocache = kv_strategy_with(0, KV_CAP_KEEPS_HISTORY);
    if (dflt == NULL || X->nocache == NULL) {
        fprintf(stderr, "kvlab: stale-cache: no exact and no cache-less strategy registered\n");
        return 1;
    }
    struct kv_cli_strategy *st = &X->st;
    if (kv_cli_strategy(c, c->strategy != NULL ? c->strategy : dflt->name, st) != 0)
        return 2;
    const uint32_t caps = kv_strategy_caps(st->ops, &c->cache, st->params);
    if (!(caps & KV_CAP_KEEPS_HISTORY) || (caps & (KV_CAP_LOSSY | KV_CAP_EVICTS)) ||
        kv_strategy_dtype(st->ops, st->params) != KV_DTYPE_F32) {
        char label[64];
        kv_strategy_label(st->ops, st->params, label, sizeof label);
        fprintf(stderr, "kvlab: stale-cache: strategy '%s' %s; the comparison needs an exact "
                        "cache that keeps every position in f32 (the default: %s)\n",
                kv_text_q(label), !(caps & KV_CAP_KEEPS_HISTORY) ? "keeps no cache"
                : (caps & KV_CAP_EVICTS) ? "evicts positions" : "rounds what it stores",
                dflt->name);
        return 2;
    }
    return kv_cli_check_strategy("stale-cache", st->ops, st->params, &c->cache, X->P + 1, 1,
                                 NULL);
}

/* Steps 1-4 (this file's opening): every forward pass, its logits into
 * lg. From here on, failures are run-time failures (exit 1). Returns the
 * exit status. */
static int stale_steps(struct stale_state *X)
{
    const struct kv_cli_common *c = &X->c;
    const struct kv_cli_strategy *st = &X->st;
    const int32_t V = X->om->cfg.vocab_size, P = X->P;
    X->lg = kv_alloc((size_t)V * 6 * sizeof *X->lg);
    if (X->lg == NULL || kv_cache_create(&X->stale, st->ops, &c->cache, st->params) != KV_OK ||
        kv_cache_create(&X->fresh, st->ops, &c->cache, st->params) != KV_OK ||
        kv_cache_create(&X->none, X->nocache, &c->cache, NULL) != KV_OK) {
        fprintf(stderr, "kvlab: stale-cache: %s\n", kv_status_str(KV_ERR_NOMEM));
        return 1;
    }
    float *lg = X->lg;
    float *l_prompt = lg, *l_old_cached = lg + V, *l_old_none = lg + 2 * (size_t)V;
    float *l_stale = lg + 3 * (size_t)V, *l_new_none = lg + 4 * (size_t)V;
    struct stale_ctx sx = {.threads = c->threads, .ids = X->ids, .P = P};
    /* 1. OLD prefills the prompt into the cache; its greedy next token. */
    enum kv_status s = run_prefill(&sx, X->om, X->stale, P, l_prompt);
    X->ids[P] = s == KV_OK ? kv_argmax(l_prompt, V) : 0;
    /* 2. control: OLD decodes through its own cache, and without one */
    if (s == KV_OK)
        s = run_prefill(&sx, X->om, X->fresh, P, l_old_cached);
    if (s == KV_OK)
        s = run_decode(&sx, X->om, X->fresh, l_old_cached);
    if (s == KV_OK)
        s = run_prefill(&sx, X->om, X->none, P + 1, l_old_none);
    /* 3. NEW decodes through the stale cache, and without a cache */
    if (s == KV_OK)
        s = run_decode(&sx, X->nm, X->stale, l_stale);
    if (s == KV_OK)
        s = run_prefill(&sx, X->nm, X->none, P + 1, l_new_none);
    /* 4. what NEW would have cached for the prompt */
    if (s == KV_OK)
        s = run_prefill(&sx, X->nm, X->fresh, P, lg + 5 * (size_t)V);
    if (s != KV_OK) {
        fprintf(stderr, "kvlab: stale-cache: %s\n", kv_status_str(s));
        return 1;
    }
    return 0;
}

/* The report: the logit differences of steps 2 and 3, then step 4 layer
 * by layer. */
static void stale_print(const struct stale_state *X)
{
    const struct kv_model_config *mc = &X->om->cfg;
    const int32_t V = mc->vocab_size, L = mc->n_layers, P = X->P;
    const int32_t kvd = mc->n_kv_heads * (mc->dim / mc->n_heads);
    const int32_t *ids = X->ids;
    const float *lg = X->lg;
    const float *l_old_cached = lg + V, *l_old_none = lg + 2 * (size_t)V;
    const float *l_stale = lg + 3 * (size_t)V, *l_new_none = lg + 4 * (size_t)V;
    char q1[1100], q2[1100];
    char b1[64], b2[64], b3[64];
    int32_t last = ids[P - 1];
    char label[64];
    kv_cache_label(X->stale, label, sizeof label);
    printf("stale cache\n  old weights: %s\n  new weights: %s (one training step later)\n",
           kv_text_quote(q1, sizeof q1, X->c.model_path, 1024),
           kv_text_quote(q2, sizeof q2, X->so->updated, 1024));
    printf("  cache: %s (exact)\n", label);
    printf("  prompt: %" PRId32 " tokens; next token (greedy, old weights): %s\n", P,
           kv_token_text(X->tok, V, last, ids[P], b1, sizeof b1));
    float wmax;
    double wrms;
    weight_change(X->om, X->nm, &wmax, &wrms);
    printf("  the step moved each weight by at most %.2e (weight RMS %.3f)\n", (double)wmax,
           wrms);
    float d_ctrl = max_abs_diff(l_old_cached, l_old_none, (size_t)V);
    float d_stale = max_abs_diff(l_stale, l_new_none, (size_t)V);
    float d_step = max_abs_diff(l_old_none, l_new_none, (size_t)V);
    int32_t t_stale = kv_argmax(l_stale, V), t_fresh = kv_argmax(l_new_none, V);
    printf("\n  max |logit difference| when decoding that token:\n");
    printf("    old weights: cache vs no cache        %.2e  (float rounding)\n",
           (double)d_ctrl);
    printf("    new weights: STALE cache vs no cache  %.2e  next token %s vs %s\n",
           (double)d_stale, kv_token_text(X->tok, V, ids[P], t_stale, b2, sizeof b2),
           kv_token_text(X->tok, V, ids[P], t_fresh, b3, sizeof b3));
    printf("    (the step itself moved the no-cache logits by %.2e)\n", (double)d_step);
    printf("\n  where it comes from: the cache holds K and V of positions 0..%" PRId32 "\n"
           "  computed by the OLD weights; their distance from what the new weights\n"
           "  compute for the same positions, per layer:\n", P - 1);
    printf("    %-5s  %-15s  %s\n", "layer", "max|dK| / RMS K", "max|dV| / RMS V");
    for (int32_t l = 0; l < L; l++) {
        float dk, dv;
        double rk, rv;
        span_diff(X->stale, X->fresh, l, 0, P, kvd, &dk, &rk);
        span_diff(X->stale, X->fresh, l, 1, P, kvd, &dv, &rv);
        printf("    %-5" PRId32 "  %-15.2e  %.2e\n", l, rk > 0 ? dk / rk : 0.0,
               rv > 0 ? dv / rv : 0.0);
    }
    printf("  Layer 0's K and V change only through its own weights (Wk, Wv, the norm)\n"
           "  and the embedding; every later layer also reads a residual stream that the\n"
           "  changed layers below it computed, so the staleness compounds with depth.\n"
           "  A cache is exact only while the weights that filled it are the weights that\n"
           "  read it. Training changes them every step, so it runs the whole sequence\n"
           "  without a cache; the cache is for inference.\n");
}

static void stale_free(struct stale_state *X)
{
    kv_free(X->lg);
    kv_cache_destroy(X->none);
    kv_cache_destroy(X->fresh);
    kv_cache_destroy(X->stale);
    kv_tokenizer_destroy(X->tok);
    kv_model_destroy(X->nm);
    kv_model_destroy(X->om);
}

/* Load and check everything, run steps 1-4, report: each step only after
 * the one before it succeeded. */
static int stale_run(struct kv_cmd_ctx *x)
{
    struct stale_state X = {.c = x->c, .so = x->opts};
    int rc = stale_load(&X);
    if (rc == 0)
        rc = stale_prompt(&X);
    if (rc == 0)
        rc = stale_strategy(&X);
    if (rc == 0)
        rc = stale_steps(&X);
    if (rc == 0)
        stale_print(&X);
    stale_free(&X);
    return rc;
}

const struct kv_cmd kv_cmd_stale_def = {
    .name = "stale-cache",
    .summary = "decode with a cache the weights have moved past (why not in training)",
    .usage = "--model OLD.bin --updated NEW.bin [--prompt TEXT | --prompt-tokens ID,...] "
             "[--tokenizer TOK.bin] [--strategy NAME]",
    .about = "  caches the prompt's keys and values with the OLD weights, then decodes one more\n"
             "  token with the NEW weights (OLD after one training step) twice: through that\n"
             "  stale cache and without a cache. Prints the logit difference and, layer by\n"
             "  layer, how far the cached K and V are from the ones the new weights compute:\n"
             "  why a KV cache is for inference, not for training. --strategy picks the exact\n"
             "  cache (default dynamic; one that evicts or rounds is refused). `make\n"
             "  stale-cache` makes NEW with bench/py/train_model.py --one-step-from.\n",
    .opts = stale_table,
    .n_opts = sizeof stale_table / sizeof stale_table[0],
    .groups = KV_GRP_CHECKPOINT | KV_GRP_TOKENIZER | KV_GRP_STRATEGY | KV_GRP_PARAMS |
              KV_GRP_THREADS,
    .opts_size = sizeof(struct stale_opts),
    .strategies = stale_strategies,
    .check = stale_check,
    .run = stale_run,
    .example = "--model @MODEL --updated @MODEL --tokenizer @TOKENIZER --prompt-tokens 1,2,3 "
               "--threads 1",
};
