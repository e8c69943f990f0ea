/*
 * requests.h - the request stream `kvlab serving` schedules: a list of
 * requests, each arriving at a time with a prompt and an output length, and
 * optionally belonging to a group whose requests share their first tokens
 * (a system prompt, few-shot examples).
 *
 * The design decision that matters: a stream is data, made before the run
 * and judged whole before any work, whether it comes from a trace file or
 * from the generator. The scheduler never meets an unsorted arrival, a
 * length past the model's context or a prefix no group declares: those are
 * refused here with the file's line, and the generator can only make
 * streams the same checks accept.
 *
 * Lengths are whole prompts: a request of group g has prefix_len shared
 * tokens (the group's) then prompt - prefix_len of its own.
 */
#ifndef KV_REQUESTS_H
#define KV_REQUESTS_H

#include <stddef.h>
#include <stdint.h>

#include "../../kernels/kv_common.h"

#define KV_REQ_MAX 1000000  /* requests in one stream */
#define KV_REQ_MAX_GROUPS 64 /* prefix groups */

struct kv_request {
    double arrival_s;  /* since the stream's start, non-decreasing */
    int32_t prompt;    /* prompt tokens, the group's prefix included */
    int32_t output;    /* tokens to generate (the request's real length) */
    int32_t group;     /* its prefix group, or -1 */
};

struct kv_request_set {
    struct kv_request *req;
    int32_t n;
    int32_t n_groups;   /* groups 0 .. n_groups-1, each prefix_len tokens */
    int32_t prefix_len; /* 0 when n_groups is 0 */
};

/* A length distribution: fixed (mean), uniform over mean +- spread, or
 * lognormal with that mean and standard deviation; every draw rounded and
 * clipped to [1, max]. */
enum kv_len_dist { KV_LEN_FIXED, KV_LEN_UNIFORM, KV_LEN_LOGNORMAL, KV_LEN_DIST_COUNT };
extern const char *const kv_len_dist_names[KV_LEN_DIST_COUNT + 1]; /* NULL-terminated */

struct kv_len_spec {
    enum kv_len_dist dist;
    double mean, spread;
};

/* The generator's input. Arrivals are a Poisson process of `rate` requests
 * a second; with n_groups > 0 each request joins group (its index mod
 * n_groups) and its prompt is prefix_len tokens longer. */
struct kv_workload {
    double rate;
    int32_t n_requests;
    struct kv_len_spec prompt, output;
    int32_t n_groups, prefix_len;
    uint64_t seed;
};

/* The presets, by name: "chat" (long, widely spread outputs: a
 * conversation), "instruct" (short prompts and outputs: a single
 * instruction). Lengths are scaled to a context of max_len tokens (see
 * docs/serving.md for the shapes they imitate). KV_ERR_INVALID for another
 * name. Sets prompt and output only. */
enum kv_status kv_workload_preset(struct kv_workload *w, const char *name, int32_t max_len);
extern const char *const kv_workload_preset_names[]; /* NULL-terminated */

/*
 * Makes the stream of w for a model of max_len tokens of context: lengths
 * clipped so that prompt + output <= max_len. KV_ERR_INVALID (with a
 * one-line reason in why) for a rate that is not finite and > 0, fewer
 * than 1 or more than KV_REQ_MAX requests, a spread < 0 or not finite, a
 * mean < 1, a group count outside [0, KV_REQ_MAX_GROUPS], or a prefix that
 * leaves no room (prefix_len + 2 > max_len); KV_ERR_NOMEM. The set is
 * freed with kv_request_set_free.
 */
enum kv_status kv_requests_generate(struct kv_request_set *out, const struct kv_workload *w,
                                    int32_t max_len, char *why, size_t why_len);

/*
 * Reads a trace: CSV with the columns arrival_s, prompt_tokens,
 * output_tokens and optionally prefix_id (notebooks_data/README.md), `#`
 * comments allowed. n_groups groups of prefix_len tokens are declared by
 * the caller (--prefixes); a prefix_id must name one of them (an empty
 * cell or -1: none) and its prompt must be longer than the prefix.
 * KV_ERR_FORMAT with "FILE:LINE: reason" in why for an unsorted arrival, a
 * negative or non-finite one, a length < 1, prompt + output past max_len,
 * an unknown prefix, no rows or more than KV_REQ_MAX; KV_ERR_IO when it
 * cannot be read.
 */
enum kv_status kv_requests_read(struct kv_request_set *out, const char *path, int32_t max_len,
                                int32_t n_groups, int32_t prefix_len, char *why, size_t why_len);

void kv_request_set_free(struct kv_request_set *s);

#endif /* KV_REQUESTS_H */
