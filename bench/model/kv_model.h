/*
 * kv_model.h - the Llama-architecture decoder that the workload runs, and the
 * generation loop around it.
 *
 * Weights follow the llama2.c legacy checkpoint layout exactly (see
 * docs/design.md), so the synthetic model and a loaded checkpoint are
 * the same struct and `export-synthetic` is a plain write of it.
 *
 * One forward call takes n tokens of every sequence of the batch at
 * absolute positions pos0..pos0+n-1 and, per layer:
 *   RMSNorm -> Wq,Wk,Wv (GEMM) -> RoPE -> cache update -> cache view
 *   -> attention(q, spans, mask) -> Wo (GEMM) -> residual
 *   -> RMSNorm -> SwiGLU MLP (unless mlp is off) -> residual
 * then final RMSNorm and the classifier on the last token of each sequence.
 */
#ifndef KV_MODEL_H
#define KV_MODEL_H

#include "../../strategies/strategy.h"

struct kv_model_config {
    int32_t dim;
    int32_t hidden_dim;
    int32_t n_layers;
    int32_t n_heads;
    int32_t n_kv_heads;
    int32_t vocab_size;
    int32_t max_len;        /* max positions (llama2.c seq_len) */
    int32_t mlp;            /* 1: SwiGLU MLP; 0: attention-only layers */
    int32_t shared_classifier; /* 1: logits use token_embedding */
};

/* docs/design.md's default synthetic benchmark model. */
struct kv_model_config kv_model_default_config(void);
/* Checks sizes, divisibility, overflow; KV_ERR_INVALID / KV_ERR_OVERFLOW. */
enum kv_status kv_model_config_check(const struct kv_model_config *c);

/* Weights, llama2.c order; each matrix is (out, in) row-major. */
struct kv_weights {
    float *token_embedding; /* (vocab, dim) */
    float *rms_att;         /* (layers, dim) */
    float *wq;              /* (layers, n_heads*hs, dim) */
    float *wk;              /* (layers, n_kv_heads*hs, dim) */
    float *wv;              /* (layers, n_kv_heads*hs, dim) */
    float *wo;              /* (layers, dim, n_heads*hs) */
    float *rms_ffn;         /* (layers, dim) */
    float *w1;              /* (layers, hidden, dim) */
    float *w2;              /* (layers, dim, hidden) */
    float *w3;              /* (layers, hidden, dim) */
    float *rms_final;       /* (dim) */
    float *wcls;            /* (vocab, dim); == token_embedding when shared */
};

struct kv_model {
    struct kv_model_config cfg;
    struct kv_weights w;
    void *storage;          /* what w points into (owned) */
    size_t storage_bytes;
    int32_t mapped;         /* 1 when storage is an mmap of a checkpoint */
};

/* Seeded random weights scaled so activations stay O(1). Same seed, same weights. */
enum kv_status kv_model_create_synthetic(struct kv_model **out,
                                         const struct kv_model_config *cfg,
                                         uint64_t seed);
void kv_model_destroy(struct kv_model *m);
/* Bytes of all weights (what a step must stream once). */
size_t kv_model_weight_bytes(const struct kv_model_config *c);
/* Estimated FLOPs of one forward of n_new tokens after `past` cached ones,
 * per batch of `batch` (projections, MLP, attention pairs, classifier for
 * every token fed): for refusing work no one will wait for, not a counter.
 * 0 for a config kv_model_config_check refuses or a negative count. */
double kv_model_forward_flops(const struct kv_model_config *c, int32_t batch, int32_t n_new,
                              int32_t past);

/* ------------------------------------------------------------------------ */
/* Counters                                                                 */

/* FLOPs counted analytically where the work is issued. */
struct kv_flops {
    int64_t gemm;    /* 2*M*N*K per GEMM (projections, MLP, classifier) */
    int64_t attn;    /* 4*head_dim*n_heads per visible (query, key) pair */
    int64_t softmax; /* 5 per visible pair (max, sub, exp, sum, scale) */
    int64_t norm;    /* RMSNorm 4/elem, RoPE 6/rotated pair... see ops.h */
    int64_t other;   /* SwiGLU, residual adds */
};
/* The sum of the fields; 0 for a NULL f. */
int64_t kv_flops_total(const struct kv_flops *f);

struct kv_step_stats {
    struct kv_flops flops;
    int64_t attn_ns;       /* wall time inside kv_attn, all layers */
    int64_t gemv_ns;       /* wall time inside the weight GEMMs (projections,
                              MLP, classifier): GEMVs in a decode step */
    int64_t sync_ns;       /* of all the above and the rest: time the calling
                              thread waited for team threads' chunks (kv_pool) */
    int64_t tokens_fed;    /* tokens run through the model per sequence */
    size_t bytes_read;     /* analytic: weights + visible cache bytes */
    size_t attn_bytes;     /* the cache part of bytes_read: K/V bytes of the
                              spans kv_attn read (kv_attn_span_bytes), all layers */
};

/* ------------------------------------------------------------------------ */
/* Runner: activations and scratch for one (model, batch, max tokens/call)  */

struct kv_runner;

/*
 * Allocates every buffer a forward of up to max_tokens tokens per sequence
 * needs (activations, attention workspace), so forward never allocates.
 * KV_ERR_INVALID for a NULL out or m, batch or max_tokens < 1, or a model
 * whose config kv_model_config_check refuses.
 */
enum kv_status kv_runner_create(struct kv_runner **out, const struct kv_model *m,
                                int32_t batch, int32_t max_tokens, int32_t n_threads);
void kv_runner_destroy(struct kv_runner *r);

/*
 * Extra sliding-window mask for strategies that have none of their own
 * (0 = off): lets tests run `none` with the same window as `sliding`.
 * kv_runner_set_mask adds attention sinks to it (the first n_sink positions
 * stay visible, as a `sinks` cache's mask says). Where the cache's view has
 * a window too, the narrower window wins, with its own sinks. A NULL runner
 * is left alone (these and kv_runner_set_probe do nothing with it).
 */
void kv_runner_set_window(struct kv_runner *r, int32_t window);
void kv_runner_set_mask(struct kv_runner *r, int32_t window, int32_t n_sink);

/*
 * Optional probe, called in kv_forward after each layer's attention with
 * the exact inputs the kernel saw (q: (batch, n, n_heads, head_dim)). The
 * demo uses it to show attention weights and slot maps. NULL turns it off.
 */
typedef void (*kv_attn_probe_fn)(void *user, int32_t layer, const float *q,
                                 const struct kv_attn_params *p, const struct kv_view *v);
void kv_runner_set_probe(struct kv_runner *r, kv_attn_probe_fn fn, void *user);

/*
 * tokens: (batch, n) ids; pad: (batch) left-padding lengths or NULL.
 * logits: (batch, vocab) for the last token of each sequence.
 * Adds this call's counters to *st (if not NULL).
 */
enum kv_status kv_forward(struct kv_runner *r, const struct kv_model *m,
                          struct kv_cache *cache, const int32_t *tokens,
                          int32_t n, int32_t pos0, const int32_t *pad,
                          float *logits, struct kv_step_stats *st);

/*
 * One forward over sequences at different positions, each with its own
 * cache (continuous batching: requests decoding and prefilling side by
 * side). Segment i feeds its cache's batch x n tokens (row b*n + t: token t
 * of sequence b) at positions pos0.., with optional left padding; the
 * weight GEMMs run once over all the segments' rows, each segment's
 * attention reads its own cache. logits: one row per sequence, segment
 * after segment ((sum of the caches' batches), vocab). KV_ERR_INVALID,
 * before any cache is touched, when a segment does not fit the model or the
 * runner (its batch above the runner's, n above max_tokens, all rows above
 * batch x max_tokens), or two segments share a cache. tokens_fed in *st
 * counts every row fed.
 */
struct kv_segment {
    struct kv_cache *cache;
    const int32_t *tokens;
    int32_t n, pos0;
    const int32_t *pad; /* (cache batch) left padding, or NULL */
};
enum kv_status kv_forward_segments(struct kv_runner *r, const struct kv_model *m,
                                   const struct kv_segment *segs, int32_t n_seg, float *logits,
                                   struct kv_step_stats *st);

/*
 * kv_forward with the classifier on every token: logits (batch, n, vocab),
 * row b*n + t the logits after token t of sequence b (a speculative
 * verification reads all of them). No padding.
 */
enum kv_status kv_forward_all(struct kv_runner *r, const struct kv_model *m,
                              struct kv_cache *cache, const int32_t *tokens, int32_t n,
                              int32_t pos0, float *logits, struct kv_step_stats *st);

/* ------------------------------------------------------------------------ */
/* A cache for a model, and one decode step whatever the strategy           */

/*
 * The shape of a cache for m running `batch` sequences: m's layers and kv
 * heads, head_dim = dim / n_heads, max_len = m's max_len. A zeroed config
 * (which kv_cache_create refuses, KV_ERR_INVALID) for a NULL m or a config
 * kv_model_config_check refuses; batch is taken as given (kv_cache_create
 * refuses one below 1). kv_cache_config_for is the same from a config
 * alone (before any model exists).
 *
 *     struct kv_cache_config cc = kv_cache_config_for_model(m, 1);
 *     kv_cache_create(&cache, ops, &cc, params);
 */
struct kv_cache_config kv_cache_config_for_model(const struct kv_model *m, int32_t batch);
struct kv_cache_config kv_cache_config_for(const struct kv_model_config *c, int32_t batch);

/*
 * The widest call kv_decode_step makes over a run of prompt_len tokens and
 * new_tokens generated ones (the last never fed): prompt_len for a cache
 * that keeps history, prompt_len + new_tokens - 1 for one that keeps none
 * (`none` re-runs the whole sequence). The max_tokens to create the runner
 * with; 0 for a NULL cache, prompt_len < 1 or new_tokens < 1, or a sum past
 * INT32_MAX.
 */
int32_t kv_decode_max_tokens(const struct kv_cache *cache, int32_t prompt_len,
                             int32_t new_tokens);

/*
 * Brings the cache up to the first len tokens of every sequence and writes
 * the logits after token len - 1, hiding the one branch every decode loop
 * has: a cache that keeps history (KV_CAP_KEEPS_HISTORY) is fed only the
 * tokens it has not seen, positions kv_cache_seq_len .. len-1 in one call
 * (the prompt at the first step, the newest token after); one that keeps
 * none (`none`) is reset and fed all len tokens from position 0.
 *
 * seq: (batch, stride) ids, row b the tokens of sequence b (len <= stride);
 * pad, logits (batch, vocab) and st as kv_forward's. The runner must be of
 * the cache's batch with max_tokens >= the call (kv_decode_max_tokens).
 * KV_ERR_INVALID, the cache untouched, for a NULL argument, len < 1,
 * len > stride, a cache already holding len tokens or more, or a call wider
 * than the runner; otherwise kv_forward's status. Never allocates.
 *
 *     for (int32_t len = P; len < P + N; len++) {     // seq[b*S + 0..P) = prompt
 *         kv_decode_step(r, m, cache, seq, S, len, NULL, logits, NULL);
 *         seq[len] = kv_argmax(logits, vocab);         // batch 1
 *     }
 */
enum kv_status kv_decode_step(struct kv_runner *r, const struct kv_model *m,
                              struct kv_cache *cache, const int32_t *seq, int32_t stride,
                              int32_t len, const int32_t *pad, float *logits,
                              struct kv_step_stats *st);

/* ------------------------------------------------------------------------ */
/* Generation                                                               */

/*
 * Prefix sharing: resets the cache, makes it one sequence (kv_cache_reorder),
 * prefills prompt (prompt_len tokens) once, then makes it `batch` sequences
 * that all start from those tokens (kv_cache_reorder with every source 0:
 * a paged cache shares the blocks, a contiguous one copies rows). logits:
 * (batch, vocab), the prompt's last logits in every row. KV_ERR_UNSUPPORTED
 * for a cache without KV_CAP_KEEPS_HISTORY and KV_CAP_REORDER. On failure
 * the cache may be left at batch 1: reset or destroy it.
 */
enum kv_status kv_prefill_shared(const struct kv_model *m, struct kv_cache *cache,
                                 const int32_t *prompt, int32_t prompt_len, int32_t batch,
                                 int32_t n_threads, float *logits, struct kv_step_stats *st);

struct kv_gen_params {
    int32_t batch;
    int32_t prompt_len;     /* tokens per sequence, including padding */
    const int32_t *prompt;  /* (batch, prompt_len) ids */
    const int32_t *pad;     /* (batch) left-padding lengths, or NULL */
    int32_t new_tokens;     /* greedy tokens to generate */
    int32_t n_threads;
    int32_t window;         /* extra sliding-window mask for the runner
                               (kv_runner_set_window); 0 = none */
    int32_t n_sink;         /* with window: sinks of that mask (kv_runner_set_mask) */
    int32_t shared_prompt;  /* 1: every sequence starts from row 0 of prompt,
                               prefilled once (kv_prefill_shared; needs
                               KV_CAP_REORDER, no pad, no window) */
};

/* Called after the prefill (step 0) and after every decode step. */
typedef void (*kv_gen_step_fn)(void *user, int32_t step, const float *logits,
                               const int32_t *next_tokens,
                               const struct kv_step_stats *st, int64_t step_ns);

/*
 * Prefill the prompt then greedy-decode new_tokens tokens, each step one
 * kv_decode_step: with a strategy that keeps no history, every decode step
 * re-runs the whole sequence so far. out_tokens: (batch, new_tokens).
 * on_step may be NULL.
 */
enum kv_status kv_generate(const struct kv_model *m, struct kv_cache *cache,
                           const struct kv_gen_params *gp, int32_t *out_tokens,
                           kv_gen_step_fn on_step, void *user);

/* ------------------------------------------------------------------------ */
/* Generation modes (gen_modes.c): beam search, samples, speculation        */

/* (In libkvlab.a like the rest. Each mode returns KV_ERR_INVALID, before it
 * touches the cache, for a NULL model, cache, params, prompt or output, a
 * model whose config kv_model_config_check refuses, and gp fields out of
 * range.) */

/*
 * N continuations of one prompt: row 0 of gp->prompt prefilled once and
 * shared (kv_prefill_shared), then each of the gp->batch sequences samples
 * from softmax(logits / temperature) with its own random stream
 * kv_sample_rng(seed, b) (temperature 0: greedy). out_tokens: (batch,
 * new_tokens). KV_ERR_UNSUPPORTED without KV_CAP_KEEPS_HISTORY and
 * KV_CAP_REORDER; no pad or window.
 */
enum kv_status kv_generate_samples(const struct kv_model *m, struct kv_cache *cache,
                                   const struct kv_gen_params *gp, float temperature,
                                   uint64_t seed, int32_t *out_tokens, kv_gen_step_fn on_step,
                                   void *user);
/* The random stream of sample b of a run seeded with seed. */
uint64_t kv_sample_rng(uint64_t seed, int32_t sample);
/* A token drawn from softmax(logits / temperature) with *rng (one draw);
 * the argmax for temperature <= 0 (rng unused, may be NULL). -1 for a NULL
 * logits, vocab < 1 or, with temperature > 0, a NULL rng. */
int32_t kv_sample_token(const float *logits, int32_t vocab, float temperature, uint64_t *rng);

/*
 * Beam search with gp->batch = K beams from row 0 of gp->prompt (prefilled
 * once, shared): each step every beam's log-softmax is added to its score,
 * the K best (beam, token) candidates over all beams survive (ties: lower
 * beam, then lower token), and the cache is reordered so beam j continues
 * its parent's tokens (kv_cache_reorder: a paged cache moves table entries,
 * a contiguous one copies rows). out_tokens: (K, new_tokens), best beam
 * first; scores: (K) length-normalised log-probabilities (sum / new_tokens).
 * KV_ERR_UNSUPPORTED without KV_CAP_KEEPS_HISTORY and KV_CAP_REORDER;
 * KV_ERR_INVALID for K > vocab, a pad or a window.
 */
enum kv_status kv_generate_beams(const struct kv_model *m, struct kv_cache *cache,
                                 const struct kv_gen_params *gp, int32_t *out_tokens,
                                 double *scores, kv_gen_step_fn on_step, void *user);

/* kv_generate_beams with an observer of each step after the cache's
 * reorder: parent[j] the beam that beam j continues, hist (K, stride) every
 * beam's tokens so far (step + 1 of them), score[j] its summed log-prob. */
typedef void (*kv_beam_fn)(void *user, int32_t step, const int32_t *parent, const int32_t *hist,
                           int32_t stride, const double *score, const struct kv_cache *cache);
enum kv_status kv_generate_beams_ex(const struct kv_model *m, struct kv_cache *cache,
                                    const struct kv_gen_params *gp, int32_t *out_tokens,
                                    double *scores, kv_gen_step_fn on_step, kv_beam_fn on_beams,
                                    void *user);

/* What a speculative run did: draft tokens proposed and kept (summed over
 * the batch; a batch keeps its shortest accepted run), the drafts each
 * sequence alone would have kept, and verification rounds. */
struct kv_spec_stats {
    int64_t proposed, accepted, accepted_seq, rounds;
    struct kv_flops flops; /* of every forward call, draft and full model */
};

/*
 * Self-speculative greedy decoding: the first draft_layers layers of m
 * (1 <= draft_layers <= n_layers: all of them drafts what the model
 * verifies, every draft accepted; a cache of the same strategy and
 * parameters of its own) propose up to draft_tokens (1..64) greedy tokens,
 * the full model verifies them in one kv_forward_all call, the drafts up
 * to the first disagreement and the full model's next token are kept, and
 * both caches are cropped to them. out_tokens (batch, new_tokens) equals
 * kv_generate's for an exact strategy. KV_ERR_UNSUPPORTED without
 * KV_CAP_KEEPS_HISTORY, KV_CAP_CROP and KV_CAP_CHUNKED_APPEND.
 */
enum kv_status kv_generate_speculative(const struct kv_model *m, struct kv_cache *cache,
                                       const struct kv_gen_params *gp, int32_t draft_layers,
                                       int32_t draft_tokens, int32_t *out_tokens,
                                       struct kv_spec_stats *spec);

/* One verification round, for an observer: the k drafts of sequence b are
 * drafts[b * stride + 1 .. k] (drafts[b * stride] the current token), the
 * full model's tokens after each targets[b * stride + 0 .. k]; `accepted`
 * drafts kept by the batch; the cache held `held` tokens after verifying
 * and is cropped to `kept` right after the call. */
struct kv_spec_round {
    int32_t round, pos, k, accepted;
    const int32_t *drafts, *targets;
    int32_t stride, held, kept;
};
typedef void (*kv_spec_fn)(void *user, const struct kv_spec_round *rd);
enum kv_status kv_generate_speculative_ex(const struct kv_model *m, struct kv_cache *cache,
                                          const struct kv_gen_params *gp, int32_t draft_layers,
                                          int32_t draft_tokens, int32_t *out_tokens,
                                          struct kv_spec_stats *spec, kv_spec_fn on_round,
                                          void *user);

#endif /* KV_MODEL_H */
