/*
 * demo_ops.h - the demo's walks of the cache operations (demo_ops.c):
 * prefix sharing with copy-on-write, beam search's reorders and
 * speculative decoding's rollbacks, step by step.
 */
#ifndef KV_DEMO_OPS_H
#define KV_DEMO_OPS_H

#include <stdio.h>

#include "../model/kv_model.h"

struct kv_demo_ops_req {
    const struct kv_model *m;
    const struct kv_strategy_ops *ops;
    const void *params;            /* ops->params_size bytes */
    struct kv_cache_config cc;     /* the shape (batch set from `batch`) */
    const int32_t *prompt;         /* (prompt_len) ids, every sequence's */
    int32_t prompt_len;
    int32_t steps;                 /* decode steps (rounds' tokens for speculation) */
    int32_t batch;                 /* sequences, or beams with `beams` */
    int32_t beams;                 /* > 0: the beam-search walk */
    int32_t draft_layers;          /* > 0: the speculative walk */
    int32_t draft_tokens;          /* drafts per round */
    uint64_t seed;                 /* the shared walk's sampling */
    int byte_vocab;                /* 1: print printable token ids as their byte */
    int width;                     /* columns every line fits (termout.h) */
    FILE *out;
};

/* Runs the walk r asks for (beams, draft_layers, else the shared prompt)
 * and returns the exit status: 0, 1 for a run-time failure (one line
 * printed), 2 when the strategy rejects the configuration. The caller has
 * checked that the strategy has the operation the walk needs. */
int kv_demo_ops(const struct kv_demo_ops_req *r);

#endif /* KV_DEMO_OPS_H */
