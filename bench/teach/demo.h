/*
 * demo.h - one strategy's step-by-step run for `kvlab demo`, with what the
 * attention kernel saw in every layer (captured through the runner's probe).
 *
 * The design decision that matters: everything the demo shows about a cache
 * is derived from the spans the kernel actually received, never from a
 * strategy's internals, so the demo works for any registered strategy. The
 * probe records, per layer: the mask parameters, which positions the spans
 * hold (and which of them are quantized), an f32 copy of every K/V row the
 * first time it is seen in f32 (sequence 0), the round-trip error of the
 * newest quantized row against that copy, and the attention weights of the
 * newest query (a naive softmax over dequantized rows, computed here).
 * Nothing here prints; the walks of demo_view.h render.
 */
#ifndef KV_DEMO_H
#define KV_DEMO_H

#include "../model/kv_model.h"

struct kv_demo_layer {
    struct kv_attn_params ap;  /* shape of this step's call */
    struct kv_mask mask;       /* the mask the kernel applied */
    int32_t n_spans;           /* spans the kernel received */
    int per_head;              /* a span has a position table: each kv head
                                  keeps its own positions; held is their union */
    unsigned char *held;       /* (max_pos) 1: position in the spans (any dtype) */
    unsigned char *held_q;     /* (max_pos) 1: held quantized */
    unsigned char *prev;       /* (max_pos) held after the previous step */
    float *w;                  /* (batch, max_pos) weight of the newest query, -1 masked */
    int32_t q_pos;             /* newest quantized position with an f32 copy, or -1 */
    int32_t q_newest;          /* newest quantized position, or -1 */
    enum kv_dtype q_dtype;     /* the dtype of the lossy spans (f32 when none) */
    float q_err, q_half_step;  /* max |x - x'| over its K,V rows; max scale/2 */
};

struct kv_demo_run {
    const char *name;
    const struct kv_strategy_ops *ops;
    const struct kv_model *m;
    struct kv_cache *cache;
    struct kv_runner *r;
    int32_t B, P, max_pos;   /* batch, prompt length (with padding), positions */
    int keeps;
    int32_t *fed;            /* (B, max_pos) tokens of the current call */
    float *logits;           /* (B, vocab) */
    int32_t *next;           /* (B) greedy tokens of the last step */
    int32_t n_fed, pos0;     /* last call */
    struct kv_step_stats st; /* last step */
    struct kv_step_stats total;
    int64_t step_ns;
    size_t copied_before;    /* copied bytes before the last step */
    int capture;             /* probe on */
    struct kv_demo_layer *lc; /* (n_layers) */
    float *hist;             /* (n_layers, max_pos, 2, kv_dim) f32 K,V rows, seq 0 */
    unsigned char *seen;     /* (n_layers, max_pos) hist row recorded */
    float *row;              /* (head_dim) scratch */
    float *scores;           /* (max_pos) scratch */
    int32_t *kspan;          /* (max_pos) scratch: span of each visible key */
    int32_t *ktok;           /* (max_pos) its token in the span */
    int32_t *kpos;           /* (max_pos) its position */
    unsigned char *gone;     /* (max_pos) scratch: evicted positions */
};

/*
 * Sets up a run of strategy `name` (or a preset's name) with its parameters
 * `params` (NULL: the preset's, else the table's defaults): cache, runner
 * with the probe, capture buffers for positions 0..max_pos-1. capture = 0
 * skips the probe's work (a reference run that only needs logits and
 * FLOPs). On failure the run may be half built: call kv_demo_run_destroy
 * either way.
 */
enum kv_status kv_demo_run_create(struct kv_demo_run *R, const char *name, const void *params,
                                  const struct kv_model *m, const struct kv_cache_config *cc,
                                  int32_t B, int32_t P, int32_t max_pos, int capture);
void kv_demo_run_destroy(struct kv_demo_run *R);

/*
 * Step `step` over seq (B rows of stride `stride`, T = P + step tokens
 * known): step 0 feeds the prompt; a decode step feeds the newest token to a
 * cache, or the whole sequence again (after a reset) when the strategy
 * keeps none. Fills next, logits, st (this step) and total.
 */
enum kv_status kv_demo_run_step(struct kv_demo_run *R, int32_t step, const int32_t *seq,
                                int32_t stride, const int32_t *pad);

#endif /* KV_DEMO_H */
