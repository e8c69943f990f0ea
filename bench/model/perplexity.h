/*
 * perplexity.h - how well a model predicts a text when the text is streamed
 * through a cache strategy token by token, as generation sees it: the
 * quality axis of the memory-accuracy trade-off (what llama.cpp's
 * llama-perplexity measures, in bits per byte).
 *
 * The design decision that matters: the text is never scored by one
 * prefill. Each token is fed alone, the cache decides what it keeps, and
 * the next token is scored from the logits of that step, so a strategy
 * that evicts (sliding) or rounds (quantized) hurts the score exactly where
 * it would hurt generation. Three ways to feed, chosen by the parameters:
 *
 *   stream      (context 0)  ids[0], ids[1], ... at positions 0, 1, ...,
 *                            one token a step, never reset;
 *   chunked     (context N)  the same, but the cache is reset every N
 *                            tokens and positions restart at 0: token t is
 *                            predicted from the t mod N + 1 tokens of its
 *                            chunk (the dense baseline of a fixed context);
 *   recompute   (recompute W) token t is predicted from a fresh prefill of
 *                            the last min(t + 1, W) tokens at positions
 *                            0.. (StreamingLLM's "sliding window with
 *                            re-computation"; costs a W-token prefill a
 *                            token). With a context N as well, the window
 *                            never reaches back past the start of t's
 *                            chunk, so several chunks of a long text
 *                            average into one loss-vs-position curve.
 *
 * A strategy that keeps no history (`none`) is fed, every step, the whole
 * chunk so far (what generation does without a cache), so its cost grows
 * with the square of the context.
 */
#ifndef KV_PERPLEXITY_H
#define KV_PERPLEXITY_H

#include "kv_model.h"

struct kv_ppl_params {
    int32_t context;   /* > 0: reset the cache every `context` tokens; 0: never */
    int32_t recompute; /* > 0: recompute mode over the last `recompute` tokens
                          (of the chunk, when context > 0) */
    int32_t n_threads;
};

struct kv_ppl_result {
    double nats;             /* sum of loss[] */
    int64_t tokens;          /* tokens scored: n - 1 */
    size_t peak_cache_bytes; /* the most the cache held (resident bytes) */
};

/*
 * Scores ids[1..n) (n >= 2): loss[t] = -ln p(ids[t + 1] | what the model was
 * fed up to ids[t]), in nats, computed in double from the float logits;
 * pos[t] = the stream position of ids[t] (tokens fed since the last reset:
 * t mod context when chunked, t otherwise). loss and pos are (n - 1) each;
 * pos may be NULL.
 *
 * KV_ERR_INVALID: n < 2, a token out of the vocabulary, a context or window
 * beyond the model's max_len, or a stream (context 0, no recompute) longer
 * than max_len positions. A non-finite
 * logit is KV_ERR_INVALID too (the weights are not a usable model), after
 * which loss is incomplete. The cache is reset first and left holding
 * whatever the last step stored.
 */
enum kv_status kv_perplexity(const struct kv_model *m, struct kv_cache *cache,
                             const int32_t *ids, int32_t n, const struct kv_ppl_params *p,
                             double *loss, int32_t *pos, struct kv_ppl_result *res);

/* -ln softmax(logits)[target] in double: logsumexp(logits) - logits[target].
 * NaN when a logit is not finite or target is not in [0, vocab). */
double kv_ppl_nll(const float *logits, int32_t vocab, int32_t target);

#endif /* KV_PERPLEXITY_H */
