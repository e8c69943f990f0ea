/*
 * cmd_kernel.c - `kvlab kernel`: times the attention kernel alone.
 *
 * Builds filled caches per configuration, laid out as the strategies lay
 * them out, (n_kv_heads, T, head_dim) for the one sequence, in the requested
 * dtype, and times kv_attn over them (decode when --queries is 1, causal
 * prefill of the last N positions otherwise), then the scalar reference
 * kv_attn_ref with fewer repetitions. Rates come from declared counts: bytes
 * are the K+V bytes the spans hold (codes + qparams), FLOPs are 4 * head_dim
 * * heads per visible (query, key) pair. OpenBLAS is set to one thread:
 * kv_attn runs its own OpenMP threads and calls sgemm on tiles.
 *
 * The one design decision: the default is cold. A decode step reads each
 * layer's cache once, so over a model whose caches outgrow the L3 every
 * read comes from DRAM; timing one cache over and over measures the L3
 * instead. So the calls rotate over independent copies of the cache whose
 * total exceeds 2 x the L3 (kernel_timing.h; --cold-bytes changes that
 * total); --hot keeps one cache, which stays in the L3 between calls. The
 * copies are carved from one pool allocated (and page-faulted) once per
 * process and reused by every configuration; the memory check before the
 * run counts exactly that pool (kv_ktime_sets_bytes: at least two copies in
 * cold mode) and every buffer a configuration allocates next to it. The protocol (warm-up,
 * repetitions, disturbed passes measured again) is kernel_timing.c's, the
 * one the peer harnesses in bench/peers/ use too.
 *
 * With --csv the rows are preceded by `# key=value` metadata lines (commit,
 * CPU, threads, mode, the L3 size and the cold total; with --roofline also
 * the machine's limits measured on the same threads: read_gbps from DRAM,
 * read_l3_gbps from an L3-resident buffer, copy_gbps, sgemm_gflops, and
 * `limit=` naming the one that matches the mode). --bound (implied by
 * --roofline) measures that limit again right before and after each row,
 * into the row's bound_gbps: the host's bandwidth drifts within a run.
 *
 *   kvlab kernel [--seq-len T[,T...]] [--heads H] [--kv-heads HKV] [--head-dim D]
 *                [--dtype f32|f16|bf16|int8|int4|int2[,...]] [--queries N] [--reps R]
 *                [--threads N] [--group G] [--layout token|kivi] [--hot | --cold-bytes B]
 *                [--no-ref] [--roofline] [--bound] [--csv]
 *
 * --layout kivi lays the quantized keys out as the quantized strategy's
 * KIVI layout does: per channel, one (scale, min) per element of head_dim
 * over each block of --group tokens; values stay per token.
 */
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../kernels/kv_attention.h"
#include "../../kernels/kv_ops.h"
#include "../../kernels/kv_quant.h"
#include "cli_cmd.h"
#include "cli_io.h"
#include "cli_opts.h"
#include "commands.h"
#include "../measure/kernel_timing.h"
#include "../measure/roofline.h"
#include "../measure/stats.h"
#include "../measure/sysinfo.h"

#define KERNEL_MAX_LIST 32

/* The configuration a run measures, resolved from the options. */
struct kernel_opts {
    int32_t seq_len[KERNEL_MAX_LIST];
    int n_seq_len;
    enum kv_dtype dtype[KERNEL_MAX_LIST];
    int n_dtype;
    int32_t heads, kv_heads, head_dim, queries, reps, threads, group;
    int no_ref, csv, roofline, bound; /* bound: the read limit beside each row */
    enum kv_ktime_mode mode;
    size_t cold_bytes; /* cold: the copies together exceed this (default 2 x L3) */
    int kivi; /* --layout kivi: quantized keys per channel over blocks of --group tokens */
};

/* timed passes of the read probe before and after each row: about 50 ms a
 * side at 80 GB/s over 256 MiB, next to a row's second or more; the best of
 * 3 a side read 64-90 GB/s over six runs in a phase where the run's own
 * limit moved 66-86 (best of 9); 15 a side hold the estimate near the
 * host's best of those minutes */
#define KERNEL_PROBE_PASSES 15

/* noisy rows the end-of-run warning names (the rest it counts) */
#define KERNEL_NOISY_LISTED 8

struct kernel_result {
    double us_min, us_median, gbps, gflops;
    int32_t sets;      /* copies of the cache the calls rotated over */
    int32_t passes;    /* timing passes made */
    double others;     /* cores' worth other programs used in the kept pass */
    int noisy;         /* no pass undisturbed (kernel_timing.h) */
    char noise_reason[96];
    double ref_us_min; /* NAN when not measured */
    double max_err;    /* max |kv_attn - kv_attn_ref|, NAN when not measured */
};

/* ------------------------------------------------------------------------ */
/* Options                                                                  */

struct kernel_dtypes {
    int32_t n;
    enum kv_dtype v[KERNEL_MAX_LIST];
};

/* What the command line says (the table's fields). */
struct kernel_args {
    struct kv_opt_ints seq_len;
    struct kernel_dtypes dtype;
    int32_t heads, kv_heads, head_dim, queries, reps, group;
    int layout; /* 0 token, 1 kivi */
    int hot, no_ref, roofline, bound, csv;
    int64_t cold_bytes;
};

/* The measurement modes: bit k is kernel_modes[k]. */
enum { KERNEL_COLD = 1u << 0, KERNEL_HOT = 1u << 1 };
static const char *const kernel_modes[] = {"in cold mode (without --hot)", "with --hot"};
static const char *const kernel_layouts[] = {"token", "kivi", NULL};

/* "f32, int8, int4, f16, bf16 or int2": every dtype's name, for messages. */
static const char *dtype_names(char *buf, size_t n)
{
    size_t w = 0;
    buf[0] = '\0';
    for (int t = 0; t < KV_DTYPE_COUNT && w < n; t++)
        w += (size_t)snprintf(buf + w, n - w, "%s%s",
                              t == 0 ? "" : t + 1 == KV_DTYPE_COUNT ? " or " : ", ",
                              kv_type_traits[t].name);
    return buf;
}

/* --dtype "f32,int8": names of kv_type_traits, at most KERNEL_MAX_LIST. */
static int parse_dtypes(const char *s, void *field, char *why, size_t n)
{
    struct kernel_dtypes *d = field;
    d->n = 0;
    for (const char *p = s;;) {
        size_t len = strcspn(p, ",");
        int found = -1;
        for (int t = 0; t < KV_DTYPE_COUNT; t++)
            if (len == strlen(kv_type_traits[t].name) &&
                strncmp(p, kv_type_traits[t].name, len) == 0)
                found = t;
        if (found < 0) {
            char names[128];
            snprintf(why, n, "%s (comma list)", dtype_names(names, sizeof names));
            return -1;
        }
        if (d->n == KERNEL_MAX_LIST) {
            snprintf(why, n, "at most %d values", KERNEL_MAX_LIST);
            return -1;
        }
        d->v[d->n++] = (enum kv_dtype)found;
        if (p[len] == '\0')
            return 0;
        p += len + 1;
    }
}

#define A(field) offsetof(struct kernel_args, field)
static const struct kv_opt kernel_table[] = {
    {.name = "--seq-len", .kind = KV_OPT_INTS, .off = A(seq_len), .lo = 1, .hi = 1 << 24,
     .hi_n = KERNEL_MAX_LIST, .meta = "T[,T...]", .help = "cached tokens, one run per value"},
    {.name = "--heads", .kind = KV_OPT_INT, .off = A(heads), .lo = 1, .hi = 4096, .meta = "H",
     .help = "query heads"},
    {.name = "--kv-heads", .kind = KV_OPT_INT, .off = A(kv_heads), .lo = 1, .hi = 4096,
     .meta = "HKV", .help = "key/value heads (divides --heads)"},
    {.name = "--head-dim", .kind = KV_OPT_INT, .off = A(head_dim), .lo = 1, .hi = 16384,
     .meta = "D", .help = "elements per head"},
    {.name = "--dtype", .kind = KV_OPT_CUSTOM, .off = A(dtype), .parse = parse_dtypes,
     .meta = "LIST", .help = "row types, comma list of f32|f16|bf16|int8|int4|int2, one run "
                             "per value (default f32)"},
    {.name = "--queries", .kind = KV_OPT_INT, .off = A(queries), .lo = 1, .hi = 1 << 20,
     .meta = "N", .help = "1: decode; N > 1: causal prefill of the last N positions"},
    {.name = "--reps", .kind = KV_OPT_INT, .off = A(reps), .lo = 1, .hi = 1000000, .meta = "R",
     .help = "timed calls per pass, at most 1000 used (default: as many as fill about 0.15 "
             "s, 5 to 1000)"},
    {.name = "--group", .kind = KV_OPT_INT, .off = A(group), .lo = 1, .hi = 16384, .meta = "G",
     .help = "elements per quantization group (divides --head-dim)"},
    {.name = "--layout", .kind = KV_OPT_ENUM, .off = A(layout), .names = kernel_layouts,
     .meta = "token|kivi", .help = "quantized keys: every row its own groups (token), or per "
                                   "channel over blocks of --group tokens (kivi; values stay "
                                   "per token)"},
    {.name = "--hot", .kind = KV_OPT_FLAG, .off = A(hot),
     .help = "one cache, reused by every call (it stays in the L3)"},
    {.name = "--cold-bytes", .kind = KV_OPT_I64, .off = A(cold_bytes), .lo = 1,
     .hi = (int64_t)1 << 40, .modes = KERNEL_COLD, .meta = "B",
     .help = "the total the cold copies exceed (2 x this machine's L3 unless given)"},
    {.name = "--no-ref", .kind = KV_OPT_FLAG, .off = A(no_ref),
     .help = "skip the scalar reference (its time and the error check)"},
    {.name = "--roofline", .kind = KV_OPT_FLAG, .off = A(roofline),
     .help = "first measure read bandwidth (DRAM and L3), copy bandwidth and sgemm on the "
             "same threads (and --bound)"},
    {.name = "--bound", .kind = KV_OPT_FLAG, .off = A(bound),
     .help = "measure the read limit of the mode (DRAM cold, L3 hot) right before and after "
             "each row: bound_gbps"},
    {.name = "--csv", .kind = KV_OPT_FLAG, .off = A(csv),
     .help = "'# key=value' metadata lines, a header, one row per (T, dtype)"},
};
#undef A

static void kernel_defaults(void *opts, struct kv_cli_common *c)
{
    struct kernel_args *a = opts;
    a->seq_len.n = 1;
    a->seq_len.v[0] = 2048;
    a->dtype.n = 1;
    a->dtype.v[0] = KV_DTYPE_F32;
    a->heads = 8;
    a->kv_heads = 8;
    a->head_dim = 64;
    a->queries = 1;
    a->reps = 0; /* chosen per configuration */
    a->group = 32;
    a->cold_bytes = (int64_t)(KV_KTIME_COLD_FACTOR * kv_l3_bytes());
    c->threads = omp_get_num_procs();
}

static uint32_t kernel_mode(const struct kv_cmd_ctx *x)
{
    return ((const struct kernel_args *)x->opts)->hot ? KERNEL_HOT : KERNEL_COLD;
}

static void kernel_resolve(const struct kv_cmd_ctx *x, struct kernel_opts *o)
{
    const struct kernel_args *a = x->opts;
    memset(o, 0, sizeof *o);
    o->n_seq_len = a->seq_len.n;
    memcpy(o->seq_len, a->seq_len.v, (size_t)a->seq_len.n * sizeof o->seq_len[0]);
    o->n_dtype = a->dtype.n;
    memcpy(o->dtype, a->dtype.v, (size_t)a->dtype.n * sizeof o->dtype[0]);
    o->heads = a->heads;
    o->kv_heads = a->kv_heads;
    o->head_dim = a->head_dim;
    o->queries = a->queries;
    o->reps = a->reps;
    o->threads = x->c.threads;
    o->group = a->group;
    o->no_ref = a->no_ref;
    o->csv = a->csv;
    o->roofline = a->roofline;
    o->bound = a->roofline || a->bound;
    o->mode = a->hot ? KV_KTIME_HOT : KV_KTIME_COLD;
    o->cold_bytes = (size_t)a->cold_bytes;
    o->kivi = a->layout == 1;
}

/* ------------------------------------------------------------------------ */
/* One configuration                                                        */

static uint64_t kernel_rng = 0x2545F4914F6CDD1Dull;
static float kernel_rand(void)
{
    kernel_rng ^= kernel_rng >> 12;
    kernel_rng ^= kernel_rng << 25;
    kernel_rng ^= kernel_rng >> 27;
    return (float)((double)((kernel_rng * 2685821657736338717ull) >> 40) / 16777216.0 * 2.0 - 1.0);
}

/* The copies of the cache a run rotates over, carved from one pool that
 * grows on demand and is reused by every configuration of the process (so
 * its pages are faulted in once, never inside a configuration). */
static char *kernel_pool;
static size_t kernel_pool_bytes;

static char *kernel_pool_get(size_t bytes)
{
    if (bytes > kernel_pool_bytes) {
        kv_free(kernel_pool);
        kernel_pool = kv_alloc(bytes);
        kernel_pool_bytes = kernel_pool ? bytes : 0;
    }
    return kernel_pool;
}

static void kernel_pool_release(void)
{
    kv_free(kernel_pool);
    kernel_pool = NULL;
    kernel_pool_bytes = 0;
}

static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Whether (o, dt) lays its keys out per channel (--layout kivi, a quantized dtype). */
static int kernel_kivi(const struct kernel_opts *o, enum kv_dtype dt)
{
    return o->kivi && kv_type_traits[dt].has_qparams;
}

/* Key blocks of --group tokens per kv head (kivi). */
static int32_t kernel_kblocks(const struct kernel_opts *o, int32_t T)
{
    return (T + o->group - 1) / o->group;
}

/* Bytes of one copy of the cache of (T, dt): K codes | V codes | K qparams
 * | V qparams, each 64-byte aligned; *kvb, *kqpb and *vqpb: the part sizes
 * (K qparams per token, or per block and channel with --layout kivi). */
static size_t kernel_set_bytes(const struct kernel_opts *o, int32_t T, enum kv_dtype dt,
                               size_t *kvb, size_t *kqpb, size_t *vqpb)
{
    size_t rows = (size_t)o->kv_heads * T;
    size_t ng = kv_type_traits[dt].has_qparams ? (size_t)(o->head_dim / o->group) : 0;
    *kvb = round64(rows * kv_dtype_row_bytes(dt, o->head_dim));
    *vqpb = ng ? round64(rows * ng * sizeof(struct kv_qparams)) : 0;
    *kqpb = !kernel_kivi(o, dt) ? *vqpb
                                : round64((size_t)o->kv_heads * (size_t)kernel_kblocks(o, T) *
                                          (size_t)o->head_dim * sizeof(struct kv_qparams));
    return 2 * *kvb + *kqpb + *vqpb;
}

/* One timed call: kv_attn over copy `set`. */
struct kernel_call {
    float *out;
    const float *q;
    const struct kv_attn_params *p;
    const struct kv_view *views; /* (n_sets): one span each */
    void *ws;
    size_t wsb;
};

static void kernel_call(void *ctx, int32_t set)
{
    const struct kernel_call *c = ctx;
    kv_attn(c->out, c->q, c->p, &c->views[set], c->ws, c->wsb);
}

/* what the run's configurations saw of the machine: one pass each once it
 * is busy throughout (kernel_timing.h) */
static struct kv_ktime_busy kernel_busy;

/* Fills, times and checks one (T, dtype); 1 on a run-time failure. */
static int kernel_run_one(struct kernel_result *r, const struct kernel_opts *o, int32_t T,
                          enum kv_dtype dt)
{
    const int32_t d = o->head_dim, hkv = o->kv_heads, nq = o->queries;
    const int32_t ng = kv_type_traits[dt].has_qparams ? d / o->group : 0;
    const int kivi = kernel_kivi(o, dt);
    const int32_t kblocks = kernel_kblocks(o, T);
    size_t rows = (size_t)hkv * T, rb = kv_dtype_row_bytes(dt, d);
    size_t qpb = (size_t)ng * sizeof(struct kv_qparams);
    size_t nqf = (size_t)nq * o->heads * d;
    size_t kvb, kqpb, vqpb, set_bytes = kernel_set_bytes(o, T, dt, &kvb, &kqpb, &vqpb);
    int32_t sets = kv_ktime_sets(o->mode, set_bytes, o->cold_bytes);
    int rc = 1;
    float *q = kv_alloc(nqf * sizeof(float)), *out = kv_alloc(nqf * sizeof(float));
    float *ref = kv_alloc(nqf * sizeof(float)), *row = kv_alloc((size_t)d * sizeof(float));
    struct kv_span *spans = kv_alloc((size_t)sets * sizeof(*spans));
    struct kv_view *views = kv_alloc((size_t)sets * sizeof(*views));
    float *blockx = kivi ? kv_alloc((size_t)o->group * d * sizeof(float)) : NULL;
    char *pool = kernel_pool_get((size_t)sets * set_bytes);
    void *ws = NULL;
    if (!q || !out || !ref || !row || !spans || !views || (kivi && !blockx) || !pool) {
        fprintf(stderr, "kvlab: kernel: out of memory for T=%d (%d copies of %zu bytes)\n", T,
                sets, set_bytes);
        goto done;
    }
    char *k = pool, *v = pool + kvb;
    struct kv_qparams *kqp = ng ? (struct kv_qparams *)(pool + 2 * kvb) : NULL;
    struct kv_qparams *vqp = ng ? (struct kv_qparams *)(pool + 2 * kvb + kqpb) : NULL;
    for (size_t i = 0; i < rows; i++) {
        for (int32_t e = 0; e < d; e++)
            row[e] = kernel_rand();
        if (!kivi) /* kivi keys below, a block at a time */
            kv_quantize_row(k + i * rb, kqp ? kqp + i * ng : NULL, row, dt, d, o->group);
        for (int32_t e = 0; e < d; e++)
            row[e] = kernel_rand();
        kv_quantize_row(v + i * rb, vqp ? vqp + i * ng : NULL, row, dt, d, o->group);
    }
    for (int32_t h = 0; kivi && h < hkv; h++) /* per channel over blocks of group tokens */
        for (int32_t t0 = 0; t0 < T; t0 += o->group) {
            const int32_t n = T - t0 < o->group ? T - t0 : o->group;
            for (size_t e = 0; e < (size_t)n * d; e++)
                blockx[e] = kernel_rand();
            kv_quantize_rows_channel(k + ((size_t)h * T + t0) * rb, rb,
                                     kqp + ((size_t)h * kblocks + t0 / o->group) * d, blockx,
                                     (size_t)d, n, dt, d);
        }
    for (size_t i = 0; i < nqf; i++)
        q[i] = 2.0f * kernel_rand();
    /* the other copies hold the same values at other addresses */
    for (int32_t s = 1; s < sets; s++)
        memcpy(pool + (size_t)s * set_bytes, pool, set_bytes);
    for (int32_t s = 0; s < sets; s++) {
        char *base = pool + (size_t)s * set_bytes;
        const struct kv_tensor side = {.dtype = dt, .row_stride = rb, .head_stride = rb * T,
                                       .seq_stride = rb * rows, .axis = KV_QAXIS_TOKEN,
                                       .group = o->group, .qp_row_stride = qpb,
                                       .qp_head_stride = qpb * T, .qp_seq_stride = qpb * rows};
        spans[s] = (struct kv_span){.k = side, .v = side, .n_tokens = T, .pos0 = 0};
        if (kivi) { /* keys: one row of head_dim pairs per block of group tokens */
            spans[s].k.axis = KV_QAXIS_CHANNEL;
            spans[s].k.qp_row_stride = (size_t)d * sizeof(struct kv_qparams);
            spans[s].k.qp_head_stride = spans[s].k.qp_row_stride * (size_t)kblocks;
            spans[s].k.qp_seq_stride = spans[s].k.qp_head_stride * (size_t)hkv;
        }
        spans[s].k.data = base;
        spans[s].v.data = base + kvb;
        spans[s].k.qp = ng ? (const struct kv_qparams *)(base + 2 * kvb) : NULL;
        spans[s].v.qp = ng ? (const struct kv_qparams *)(base + 2 * kvb + kqpb) : NULL;
        /* the storage's shape stated, so the kernel checks the call against it */
        views[s] = (struct kv_view){.spans = &spans[s], .n_spans = 1, .batch = 1,
                                    .n_kv_heads = hkv, .head_dim = d};
    }
    /* cold: each set is read after the others have evicted it, whatever
     * its own size against the L3 (kv_attn_params.evicted) */
    struct kv_attn_params p = {.batch = 1, .n_q = nq, .n_heads = o->heads, .n_kv_heads = hkv,
                               .head_dim = d, .q_pos0 = T - nq,
                               .scale = 1.0f / sqrtf((float)d), .n_threads = o->threads,
                               .evicted = sets > 1};
    size_t wsb = kv_attn_workspace_bytes(&p);
    ws = kv_alloc(wsb);
    if (ws == NULL) {
        fprintf(stderr, "kvlab: kernel: out of memory for the workspace\n");
        goto done;
    }
    enum kv_status st = kv_attn(out, q, &p, &views[0], ws, wsb);
    if (st != KV_OK) {
        fprintf(stderr, "kvlab: kernel: %s\n", kv_status_str(st));
        goto done;
    }
    size_t bytes = kv_attn_span_bytes(&p, &views[0]);
    double flops = 4.0 * d * o->heads * (double)kv_attn_visible_pairs(&p, &views[0]);

    char label[96];
    snprintf(label, sizeof label, "T %d, %s, %s", T, kv_type_traits[dt].name,
             kv_ktime_mode_name(o->mode));
    struct kernel_call call = {out, q, &p, views, ws, wsb};
    struct kv_ktime_params tp = {.reps = o->reps, .n_sets = sets, .label = label,
                                 .busy = &kernel_busy};
    struct kv_ktime_result tr;
    if (kv_ktime_run(&tr, &tp, kernel_call, &call) != 0) {
        fprintf(stderr, "kvlab: kernel: out of memory for the timings\n");
        goto done;
    }
    r->us_min = tr.us_min;
    r->us_median = tr.us_median;
    r->passes = tr.passes;
    r->others = tr.others;
    r->noisy = tr.noisy;
    snprintf(r->noise_reason, sizeof r->noise_reason, "%s", tr.noise_reason);
    r->sets = sets;
    r->gbps = (double)bytes / (r->us_min * 1e3);
    r->gflops = flops / (r->us_min * 1e3);
    r->ref_us_min = NAN;
    r->max_err = NAN;
    if (!o->no_ref) {
        /* the reference is ~100x slower: a few calls at most (every copy
         * holds the same values, so the last timed call's output is the
         * output over copy 0) */
        int ref_reps = tr.reps / 20 < 1 ? 1 : tr.reps / 20 > 5 ? 5 : tr.reps / 20;
        double best = INFINITY;
        for (int i = 0; i < ref_reps; i++) {
            int64_t a = kv_now_ns();
            st = kv_attn_ref(ref, q, &p, &views[0]);
            double us = (double)(kv_now_ns() - a) / 1e3;
            best = us < best ? us : best;
            if (st != KV_OK) {
                fprintf(stderr, "kvlab: kernel: reference: %s\n", kv_status_str(st));
                goto done;
            }
        }
        r->ref_us_min = best;
        double err = 0.0;
        for (size_t i = 0; i < nqf; i++)
            if (!(fabs((double)out[i] - ref[i]) <= err)) /* NaN: a difference */
                err = fabs((double)out[i] - ref[i]);
        r->max_err = err;
    }
    rc = 0;
done:
    kv_free(q);
    kv_free(out);
    kv_free(ref);
    kv_free(row);
    kv_free(spans);
    kv_free(views);
    kv_free(blockx);
    kv_free(ws);
    return rc;
}


/* Bytes one configuration holds at its peak: the pool of copies (*pool, kept
 * for the whole run) and what kernel_run_one allocates next to it (*extra:
 * q, out, ref, one row, the spans and views, the kivi block, the workspace,
 * the timing buffer), and the copies made (*sets). -1 when a count
 * overflows size_t. */
static int kernel_need_bytes(const struct kernel_opts *o, int32_t T, enum kv_dtype dt,
                             int32_t *sets, size_t *set_bytes, size_t *pool, size_t *extra)
{
    const size_t d = (size_t)o->head_dim, hkv = (size_t)o->kv_heads;
    const size_t ng = kv_type_traits[dt].has_qparams ? d / (size_t)o->group : 0;
    const size_t qp = sizeof(struct kv_qparams);
    size_t rows, codes, qps = 0, kqps = 0, io;
    /* the parts of kernel_set_bytes, each checked before it is summed */
    if (kv_mul_size(&rows, hkv, (size_t)T) != KV_OK ||
        kv_mul_size(&codes, rows, kv_dtype_row_bytes(dt, o->head_dim)) != KV_OK)
        return -1;
    if (ng > 0) {
        const size_t fq[] = {rows, ng, qp};
        const size_t fk[] = {hkv, (size_t)kernel_kblocks(o, T), d, qp};
        if (kv_mul_sizes(&qps, 3, fq) != KV_OK ||
            (kernel_kivi(o, dt) && kv_mul_sizes(&kqps, 4, fk) != KV_OK))
            return -1;
    }
    if (codes > SIZE_MAX / 8 || qps > SIZE_MAX / 8 || kqps > SIZE_MAX / 8)
        return -1;
    size_t kvb, kqpb, vqpb;
    *set_bytes = kernel_set_bytes(o, T, dt, &kvb, &kqpb, &vqpb);
    *sets = kv_ktime_sets(o->mode, *set_bytes, o->cold_bytes);
    if (kv_ktime_sets_bytes(o->mode, *set_bytes, o->cold_bytes, pool) != 0)
        return -1;
    const size_t fi[] = {3, (size_t)o->queries, (size_t)o->heads, d, sizeof(float)};
    if (kv_mul_sizes(&io, 5, fi) != KV_OK)
        return -1;
    struct kv_attn_params p = {.batch = 1, .n_q = o->queries, .n_heads = o->heads,
                               .n_kv_heads = o->kv_heads, .head_dim = o->head_dim,
                               .q_pos0 = T - o->queries, .scale = 1.0f,
                               .n_threads = o->threads};
    const size_t parts[] = {
        io,
        d * sizeof(float),                                                   /* row */
        (size_t)*sets * (sizeof(struct kv_span) + sizeof(struct kv_view)),    /* spans, views */
        kernel_kivi(o, dt) ? (size_t)o->group * d * sizeof(float) : 0,       /* blockx */
        kv_attn_workspace_bytes(&p),
        kv_ktime_run_bytes(),
    };
    *extra = 0;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        if (parts[i] > SIZE_MAX - *extra)
            return -1;
        *extra += parts[i];
    }
    return 0;
}

/* The largest pool of copies over the configurations (the one allocation
 * kept for the whole run), and the largest extra: what the run holds at
 * its peak is their sum. -1 on overflow, with *at the configuration. */
static int kernel_peak_bytes(const struct kernel_opts *o, size_t *peak, int32_t *at_T,
                             enum kv_dtype *at_dt, int32_t *at_sets, size_t *at_set)
{
    size_t pool_max = 0, extra_max = 0;
    for (int si = 0; si < o->n_seq_len; si++)
        for (int di = 0; di < o->n_dtype; di++) {
            int32_t sets;
            size_t set, pool, extra;
            *at_T = o->seq_len[si];
            *at_dt = o->dtype[di];
            if (kernel_need_bytes(o, o->seq_len[si], o->dtype[di], &sets, &set, &pool,
                                  &extra) != 0)
                return -1;
            if (pool >= pool_max) {
                pool_max = pool;
                *at_sets = sets;
                *at_set = set;
            }
            extra_max = extra > extra_max ? extra : extra_max;
        }
    if (pool_max > SIZE_MAX - extra_max)
        return -1;
    *peak = pool_max + extra_max;
    return 0;
}

static int kernel_check(struct kv_cmd_ctx *x)
{
    struct kernel_opts o;
    kernel_resolve(x, &o);
    if (o.heads % o.kv_heads != 0) {
        fprintf(stderr, "kvlab: kernel: --kv-heads %d must divide --heads %d\n", o.kv_heads,
                o.heads);
        return 2;
    }
    for (int k = 0; k < o.n_dtype; k++) {
        if (o.kivi && kv_type_traits[o.dtype[k]].has_qparams &&
            kv_quant_check(o.dtype[k], o.head_dim, o.head_dim) != KV_OK) {
            fprintf(stderr, "kvlab: kernel: --layout kivi: --head-dim %d is not a whole number "
                            "of %s blocks\n", o.head_dim, kv_type_traits[o.dtype[k]].name);
            return 2;
        }
        if (kv_quant_check(o.dtype[k], o.head_dim, o.group) != KV_OK) {
            fprintf(stderr, "kvlab: kernel: --group %d must divide --head-dim %d (and be even "
                            "for int4)\n", o.group, o.head_dim);
            return 2;
        }
    }
    for (int k = 0; k < o.n_seq_len; k++)
        if (o.seq_len[k] < o.queries) {
            fprintf(stderr, "kvlab: kernel: --queries %d exceeds --seq-len %d\n", o.queries,
                    o.seq_len[k]);
            return 2;
        }
    /* what the run allocates, exactly: the pool of copies and, next to it,
     * the largest configuration's own buffers */
    size_t peak, set = 0;
    int32_t T = 0, sets = 0;
    enum kv_dtype dt = KV_DTYPE_F32;
    if (kernel_peak_bytes(&o, &peak, &T, &dt, &sets, &set) != 0) {
        fprintf(stderr, "kvlab: kernel: the caches' byte count overflows at --seq-len %d "
                        "--dtype %s (--kv-heads x --seq-len x --head-dim, and the copies)\n",
                T, kv_type_traits[dt].name);
        return 2;
    }
    if (o.bound) { /* the read probe's array, beside the pool */
        struct kv_roofline_params rp;
        kv_roofline_defaults(&rp, o.threads);
        peak += o.mode == KV_KTIME_COLD ? rp.read_bytes : rp.read_l3_bytes;
    }
    char what[192];
    snprintf(what, sizeof what, "kernel: %s mode (%d cop%s of %zu bytes at --seq-len %d --dtype "
             "%s, and its buffers)", kv_ktime_mode_name(o.mode), sets, sets == 1 ? "y" : "ies",
             set, T, kv_type_traits[dt].name);
    if (kv_cli_check_memory(what, peak) != 0)
        return 2;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Command                                                                  */

static int kernel_run(struct kv_cmd_ctx *x)
{
    struct kernel_opts o;
    kernel_resolve(x, &o);
    kernel_busy = (struct kv_ktime_busy){0};
    struct kv_roofline rl = {.read_gbps = NAN, .read_l3_gbps = NAN, .copy_gbps = NAN,
                             .sgemm_gflops = NAN, .read_spread = NAN, .read_l3_spread = NAN,
                             .copy_spread = NAN, .sgemm_spread = NAN};
    if (o.roofline) {
        struct kv_roofline_params rp;
        kv_roofline_defaults(&rp, o.threads);
        enum kv_status s = kv_roofline_measure(&rl, &rp);
        if (s != KV_OK) {
            fprintf(stderr, "kvlab: kernel: roofline: %s\n", kv_status_str(s));
            return 1;
        }
        kv_progress("# roofline: read %.2f GB/s (DRAM), %.2f GB/s (L3), copy %.2f GB/s, "
                        "sgemm %.1f GFLOP/s\n",
                        rl.read_gbps, rl.read_l3_gbps, rl.copy_gbps, rl.sgemm_gflops);
    }
    /* the limit beside each row: the same read test, right before and after
     * it (the best of both), because the host's bandwidth drifts within a
     * run; cold rows read DRAM, hot rows the L3 */
    struct kv_read_probe probe = {0};
    if (o.bound) {
        struct kv_roofline_params rp;
        kv_roofline_defaults(&rp, o.threads);
        enum kv_status s = kv_read_probe_open(&probe, &rp, o.mode == KV_KTIME_HOT);
        if (s != KV_OK) {
            fprintf(stderr, "kvlab: kernel: roofline: %s\n", kv_status_str(s));
            return 1;
        }
    }
    /* one pool for every configuration's copies, faulted in before any timing */
    size_t pool = 0;
    for (int si = 0; si < o.n_seq_len; si++) {
        for (int di = 0; di < o.n_dtype; di++) {
            size_t kvb, kqpb, vqpb, need;
            size_t sb = kernel_set_bytes(&o, o.seq_len[si], o.dtype[di], &kvb, &kqpb, &vqpb);
            if (kv_ktime_sets_bytes(o.mode, sb, o.cold_bytes, &need) != 0)
                need = SIZE_MAX; /* cannot happen: kernel_check counted it */
            pool = need > pool ? need : pool;
        }
    }
    if (kernel_pool_get(pool) == NULL) {
        fprintf(stderr, "kvlab: kernel: out of memory for %zu bytes of caches\n", pool);
        kv_read_probe_close(&probe);
        return 1;
    }
    /* the kernel splits its work on its own thread team (kv_pool); its tile GEMMs run in the
     * calling thread */
    kv_blas_single();
    const char *mode = kv_ktime_mode_name(o.mode);
    char cold[64] = "";
    if (o.mode == KV_KTIME_COLD)
        snprintf(cold, sizeof cold, " (copies of each cache exceeding %zu MB)", o.cold_bytes / 1000000);
    kv_progress("# kvlab kernel: %d threads (of %d cores), head_dim %d, heads %d/%d, "
                    "queries %d, group %d%s, %s%s, f16/bf16 rows %s\n", o.threads,
                    omp_get_num_procs(), o.head_dim, o.heads, o.kv_heads, o.queries, o.group,
                    o.kivi ? ", layout kivi" : "", mode, cold, kv_isa_name(kv_isa()));
    if (o.csv) {
        struct kv_sysinfo si;
        kv_sysinfo_collect(&si);
        printf("# kvlab kernel\n# commit=%s\n# date=%s\n# cpu=%s\n# threads=%d\n"
               "# blas_core=%s\n# compiler=%s\n# cflags=%s\n# l3_bytes=%ld\n# group=%d\n"
               "# mode=%s\n",
               si.commit, si.date, si.cpu, o.threads, si.blas_core, si.compiler, si.cflags,
               si.l3_bytes, o.group, mode);
        if (o.mode == KV_KTIME_COLD)
            printf("# cold_bytes=%zu\n", o.cold_bytes);
        if (o.kivi)
            printf("# layout=kivi\n");
        printf("# isa=%s\n", kv_isa_name(kv_isa())); /* of the f16/bf16 rows (KVLAB_ISA) */
        /* the limit that matches the mode: cold reads from DRAM, hot from the L3 */
        printf("# limit=%s\n", o.mode == KV_KTIME_COLD ? "read_gbps" : "read_l3_gbps");
        if (o.roofline)
            printf("# read_gbps=%.3f\n# read_l3_gbps=%.3f\n# copy_gbps=%.3f\n# sgemm_gflops=%.3f\n"
                   "# read_spread=%.4f\n# read_l3_spread=%.4f\n# roofline_method=%s\n",
                   rl.read_gbps, rl.read_l3_gbps, rl.copy_gbps, rl.sgemm_gflops, rl.read_spread,
                   rl.read_l3_spread, KV_ROOFLINE_METHOD);
        printf("head_dim,heads,kv_heads,seq_len,queries,dtype,threads,us_min,us_median,gbps,gflops,"
               "ref_us_min,mode,sets,bound_gbps,passes,others,noisy,noise_reason\n");
    }
    int n_noisy = 0, n_rows = 0;
    char noisy_list[KERNEL_NOISY_LISTED * 24] = "";
    for (int si = 0; si < o.n_seq_len; si++) {
        for (int di = 0; di < o.n_dtype; di++) {
            struct kernel_result r;
            int32_t T = o.seq_len[si];
            enum kv_dtype dt = o.dtype[di];
            double before = NAN, after = NAN, bound;
            if (o.bound)
                before = kv_read_probe_best(&probe, KERNEL_PROBE_PASSES);
            if (kernel_run_one(&r, &o, T, dt) != 0) {
                kernel_pool_release();
                kv_read_probe_close(&probe);
                return 1;
            }
            if (o.bound)
                after = kv_read_probe_best(&probe, KERNEL_PROBE_PASSES);
            bound = isnan(before) || after > before ? after : before;
            const char *name = kv_type_traits[dt].name;
            if (o.csv) {
                printf("%d,%d,%d,%d,%d,%s,%d,%.2f,%.2f,%.3f,%.3f,", o.head_dim, o.heads, o.kv_heads,
                       T, o.queries, name, o.threads, r.us_min, r.us_median, r.gbps, r.gflops);
                if (!isnan(r.ref_us_min))
                    printf("%.2f", r.ref_us_min);
                printf(",%s,%d,", mode, r.sets);
                if (!isnan(bound))
                    printf("%.3f", bound);
                printf(",%d,%.3f,%d,%s\n", r.passes, r.others, r.noisy, r.noise_reason);
            } else {
                printf("T %d, %s, %s (%d cop%s): kv_attn min %.1f us, median %.1f us, %.2f GB/s, %.2f GFLOP/s\n",
                       T, name, mode, r.sets, r.sets == 1 ? "y" : "ies", r.us_min, r.us_median,
                       r.gbps, r.gflops);
                if (!isnan(bound))
                    printf("T %d, %s: %.1f%% of the %s read limit beside it, %.2f GB/s\n", T,
                           name, 100.0 * r.gbps / bound,
                           o.mode == KV_KTIME_COLD ? "DRAM" : "L3", bound);
                if (!isnan(r.ref_us_min))
                    printf("T %d, %s: kv_attn_ref min %.1f us (%.1fx slower); max |kv_attn - ref| = %.2g\n",
                           T, name, r.ref_us_min, r.ref_us_min / r.us_min, r.max_err);
                if (r.noisy)
                    printf("T %d, %s: noisy: %s\n", T, name, r.noise_reason);
            }
            if (r.noisy && n_noisy < KERNEL_NOISY_LISTED)
                snprintf(noisy_list + strlen(noisy_list), sizeof noisy_list - strlen(noisy_list),
                         "%sT %d %s", n_noisy > 0 ? ", " : "", T, name);
            n_noisy += r.noisy;
            n_rows++;
            fflush(stdout);
        }
    }
    kernel_pool_release();
    kv_read_probe_close(&probe);
    /* as the sweep ends: the figures are written, but a reader of the
     * terminal learns which of them another program disturbed */
    if (n_noisy > 0)
        fprintf(stderr, "kvlab: kernel: warning: %d of %d rows noisy (other programs ran "
                        "during every timing pass): %s%s\n",
                n_noisy, n_rows, noisy_list, n_noisy > KERNEL_NOISY_LISTED ? ", ..." : "");
    return 0;
}

/* kernel's --dtype, --group and --layout share their names with strategy
 * parameters: a command without KV_GRP_PARAMS may own such names
 * (kv_cmd_reserve). */
const struct kv_cmd kv_cmd_kernel_def = {
    .name = "kernel",
    .summary = "time the attention kernel alone",
    .usage = "[--seq-len T[,T...]] [--heads H] [--kv-heads HKV] [--head-dim D] [--dtype LIST] "
             "[options]",
    .about = "  times one attention call over a filled cache (decode when --queries is 1, causal\n"
             "  prefill of the last N positions otherwise) and the scalar reference. Cold by\n"
             "  default: the calls rotate over copies of the cache (at least two) that together\n"
             "  exceed --cold-bytes, so K/V come from DRAM; --hot keeps one. The run is refused\n"
             "  up front when those copies and their buffers exceed the machine's memory.\n",
    .opts = kernel_table,
    .n_opts = sizeof kernel_table / sizeof kernel_table[0],
    .groups = KV_GRP_THREADS,
    .opts_size = sizeof(struct kernel_args),
    .defaults = kernel_defaults,
    .modes = kernel_mode,
    .mode_names = kernel_modes,
    .check = kernel_check,
    .run = kernel_run,
    .example = "--seq-len 16 --heads 2 --kv-heads 2 --head-dim 8 --dtype f32,int8 --group 8 "
               "--reps 1 --threads 1 --hot --no-ref",
};
