/*
 * requests.c - the request stream of `kvlab serving`: the generator and
 * the trace reader (see requests.h).
 */
#include "requests.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../results/csv_read.h"

const char *const kv_len_dist_names[KV_LEN_DIST_COUNT + 1] = {"fixed", "uniform", "lognormal",
                                                              NULL};
const char *const kv_workload_preset_names[] = {"chat", "instruct", NULL};

/* The context the preset lengths were shaped for (docs/serving.md). */
#define PRESET_CONTEXT 2048.0

enum kv_status kv_workload_preset(struct kv_workload *w, const char *name, int32_t max_len)
{
    if (w == NULL || name == NULL || max_len < 2)
        return KV_ERR_INVALID;
    const double k = max_len < PRESET_CONTEXT ? max_len / PRESET_CONTEXT : 1.0;
    if (strcmp(name, "chat") == 0) {
        w->prompt = (struct kv_len_spec){KV_LEN_LOGNORMAL, 161.0 * k, 180.0 * k};
        w->output = (struct kv_len_spec){KV_LEN_LOGNORMAL, 338.0 * k, 300.0 * k};
    } else if (strcmp(name, "instruct") == 0) {
        w->prompt = (struct kv_len_spec){KV_LEN_LOGNORMAL, 19.0 * k, 14.0 * k};
        w->output = (struct kv_len_spec){KV_LEN_LOGNORMAL, 58.0 * k, 45.0 * k};
    } else {
        return KV_ERR_INVALID;
    }
    if (w->prompt.mean < 1.0)
        w->prompt.mean = 1.0;
    if (w->output.mean < 1.0)
        w->output.mean = 1.0;
    return KV_OK;
}

void kv_request_set_free(struct kv_request_set *s)
{
    if (s == NULL)
        return;
    kv_free(s->req);
    *s = (struct kv_request_set){0};
}

/* ------------------------------------------------------------------------ */
/* The generator                                                            */

/* A uniform draw in (0, 1): never 0, so its logarithm is finite. */
static double unit(uint64_t *rng)
{
    return ((double)(kv_rng_next(rng) >> 11) + 0.5) / 9007199254740992.0;
}

static double normal(uint64_t *rng)
{
    const double u1 = unit(rng), u2 = unit(rng); /* in this order, whatever the compiler */
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static int32_t draw_len(const struct kv_len_spec *s, uint64_t *rng, int32_t max)
{
    double x = s->mean;
    if (s->dist == KV_LEN_UNIFORM) {
        x = s->mean + s->spread * (2.0 * unit(rng) - 1.0);
    } else if (s->dist == KV_LEN_LOGNORMAL && s->spread > 0) {
        const double v = log1p((s->spread / s->mean) * (s->spread / s->mean));
        x = exp(log(s->mean) - v / 2 + sqrt(v) * normal(rng));
    }
    x = nearbyint(x);
    return x < 1 ? 1 : x > max ? max : (int32_t)x;
}

static int spec_ok(const struct kv_len_spec *s)
{
    return (unsigned)s->dist < KV_LEN_DIST_COUNT && isfinite(s->mean) && s->mean >= 1.0 &&
           isfinite(s->spread) && s->spread >= 0.0;
}

enum kv_status kv_requests_generate(struct kv_request_set *out, const struct kv_workload *w,
                                    int32_t max_len, char *why, size_t why_len)
{
    if (out == NULL || w == NULL)
        return KV_ERR_INVALID;
    *out = (struct kv_request_set){0};
    const char *bad = NULL;
    if (!isfinite(w->rate) || w->rate <= 0.0)
        bad = "the request rate must be a finite number above 0";
    else if (w->n_requests < 1 || w->n_requests > KV_REQ_MAX)
        bad = "the request count must be in [1, 1000000]";
    else if (!spec_ok(&w->prompt) || !spec_ok(&w->output))
        bad = "a length distribution needs a mean >= 1 and a finite spread >= 0";
    else if (w->n_groups < 0 || w->n_groups > KV_REQ_MAX_GROUPS)
        bad = "the prefix group count must be in [0, 64]";
    else if (w->n_groups > 0 && (w->prefix_len < 1 || w->prefix_len > max_len - 2))
        bad = "the shared prefix must be at least 1 token and leave 2 of the context";
    else if (max_len < 2)
        bad = "the model's context must hold 2 tokens";
    if (bad != NULL) {
        if (why != NULL && why_len > 0)
            snprintf(why, why_len, "%s", bad);
        return KV_ERR_INVALID;
    }
    struct kv_request *r = kv_alloc((size_t)w->n_requests * sizeof *r);
    if (r == NULL)
        return KV_ERR_NOMEM;
    uint64_t rng = w->seed ^ 0x5eed5eed5eed5eedull;
    const int32_t pre = w->n_groups > 0 ? w->prefix_len : 0;
    double t = 0.0;
    for (int32_t i = 0; i < w->n_requests; i++) {
        t += -log(unit(&rng)) / w->rate;
        const int32_t own = draw_len(&w->prompt, &rng, max_len - 1 - pre);
        const int32_t output = draw_len(&w->output, &rng, max_len - pre - own);
        r[i] = (struct kv_request){.arrival_s = t, .prompt = pre + own, .output = output,
                                   .group = w->n_groups > 0 ? i % w->n_groups : -1};
    }
    *out = (struct kv_request_set){.req = r, .n = w->n_requests, .n_groups = w->n_groups,
                                   .prefix_len = pre};
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* The trace                                                                */

static enum kv_status trace_error(char *why, size_t why_len, const struct kv_csv *c, int64_t line,
                                  const char *fmt, const char *cell)
{
    char q[64], reason[256];
    kv_csv_excerpt(q, sizeof q, cell, 40);
    snprintf(reason, sizeof reason, fmt, q);
    kv_csv_error(why, why_len, c->name, line, "%s", reason);
    return KV_ERR_FORMAT;
}

enum kv_status kv_requests_read(struct kv_request_set *out, const char *path, int32_t max_len,
                                int32_t n_groups, int32_t prefix_len, char *why, size_t why_len)
{
    if (out == NULL || path == NULL || max_len < 2 || n_groups < 0 ||
        n_groups > KV_REQ_MAX_GROUPS || (n_groups > 0 && prefix_len < 1))
        return KV_ERR_INVALID;
    *out = (struct kv_request_set){0};
    struct kv_csv *c = NULL;
    enum kv_status st = kv_csv_read_file(&c, path, why, why_len);
    if (st != KV_OK)
        return st;
    const int32_t ca = kv_csv_col(c, "arrival_s"), cp = kv_csv_col(c, "prompt_tokens"),
                  co = kv_csv_col(c, "output_tokens"), cg = kv_csv_col(c, "prefix_id");
    if (ca < 0 || cp < 0 || co < 0) {
        st = trace_error(why, why_len, c, c->header_line,
                         "a trace needs the columns arrival_s, prompt_tokens, output_tokens%s", "");
    } else if (c->n_rows < 1 || c->n_rows > KV_REQ_MAX) {
        st = trace_error(why, why_len, c, c->header_line,
                         "a trace holds 1 to 1000000 requests%s", "");
    }
    struct kv_request *r = NULL;
    if (st == KV_OK && (r = kv_alloc((size_t)c->n_rows * sizeof *r)) == NULL)
        st = KV_ERR_NOMEM;
    double last = 0.0;
    for (int64_t i = 0; st == KV_OK && i < c->n_rows; i++) {
        const int64_t line = c->row_line[i];
        const char *a = kv_csv_cell(c, i, ca), *p = kv_csv_cell(c, i, cp),
                   *o = kv_csv_cell(c, i, co), *g = cg >= 0 ? kv_csv_cell(c, i, cg) : "";
        double t;
        int64_t np, no, ng = -1;
        if (kv_csv_parse_double(a, &t) != 0 || !isfinite(t) || t < 0.0)
            st = trace_error(why, why_len, c, line, "arrival_s '%s' is not a time >= 0", a);
        else if (t < last)
            st = trace_error(why, why_len, c, line,
                             "arrival_s '%s' is before the row above it: arrivals must be sorted",
                             a);
        else if (kv_csv_parse_int64(p, &np) != 0 || np < 1)
            st = trace_error(why, why_len, c, line, "prompt_tokens '%s' is not a count >= 1", p);
        else if (kv_csv_parse_int64(o, &no) != 0 || no < 1)
            st = trace_error(why, why_len, c, line, "output_tokens '%s' is not a count >= 1", o);
        else if (np > max_len || no > max_len - np) {
            kv_csv_error(why, why_len, c->name, line,
                         "prompt_tokens + output_tokens (%lld + %lld) pass the model's context "
                         "of %d tokens", (long long)np, (long long)no, (int)max_len);
            st = KV_ERR_FORMAT;
        } else if (*g != '\0' && (kv_csv_parse_int64(g, &ng) != 0 || ng < -1 || ng >= n_groups))
            st = trace_error(why, why_len, c, line,
                             "prefix_id '%s' names no declared prefix group (--prefixes)", g);
        else if (ng >= 0 && np <= prefix_len)
            st = trace_error(why, why_len, c, line,
                             "prompt_tokens '%s' does not exceed its group's shared prefix", p);
        if (st == KV_OK) {
            r[i] = (struct kv_request){.arrival_s = t, .prompt = (int32_t)np,
                                       .output = (int32_t)no, .group = (int32_t)ng};
            last = t;
        }
    }
    if (st == KV_OK)
        *out = (struct kv_request_set){.req = r, .n = (int32_t)c->n_rows, .n_groups = n_groups,
                                       .prefix_len = n_groups > 0 ? prefix_len : 0};
    else
        kv_free(r);
    kv_csv_destroy(c);
    return st;
}
