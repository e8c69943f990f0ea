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
 * process and reused by every configuration. The protocol (warm-up,
 * repetitions, disturbed passes measured again) is kernel_timing.c's, the
 * one the peer harnesses in bench/peers/ use too.
 *
 * With --csv the rows are preceded by `# key=value` metadata lines (commit,
 * CPU, threads, mode, the L3 size and the cold total; with --roofline also
 * the machine's limits measured on the same threads: read_gbps from DRAM,
 * read_l3_gbps from an L3-resident buffer, copy_gbps, sgemm_gflops, and
 * `limit=` naming the one that matches the mode).
 *
 *   kvlab kernel --seq-len T[,T...] --heads H --kv-heads HKV --head-dim D
 *                --dtype f32|f16|bf16|int8|int4|int2[,...] [--queries N] [--reps R]
 *                [--threads N] [--group G] [--layout token|kivi] [--hot]
 *                [--cold-bytes B] [--no-ref] [--roofline] [--csv]
 *
 * --layout kivi lays the quantized keys out as the quantized strategy's
 * KIVI layout does: per channel, one (scale, min) per element of head_dim
 * over each block of --group tokens; values stay per token.
 */
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../kernels/kv_attention.h"
#include "../kernels/kv_quant.h"
#include "cli_io.h"
#include "cli_opts.h"
#include "cli_cmd.h"
#include "commands.h"
int kv_cmd_kernel(int argc, char **argv);
#include "kernel_timing.h"
#include "roofline.h"
#include "stats.h"
#include "sysinfo.h"

#define KERNEL_MAX_LIST 32
/* The dtypes --dtype takes (every kv_type_traits name), for --help. */
#define KERNEL_DTYPES_BAR "f32|f16|bf16|int8|int4|int2"

struct kernel_opts {
    int32_t seq_len[KERNEL_MAX_LIST];
    int n_seq_len;
    enum kv_dtype dtype[KERNEL_MAX_LIST];
    int n_dtype;
    int32_t heads, kv_heads, head_dim, queries, reps, threads, group;
    int no_ref, csv, roofline;
    enum kv_ktime_mode mode;
    size_t cold_bytes; /* cold: the copies together exceed this (default 2 x L3) */
    int kivi; /* --layout kivi: quantized keys per channel over blocks of --group tokens */
};

struct kernel_result {
    double us_min, us_median, gbps, gflops;
    int32_t sets;      /* copies of the cache the calls rotated over */
    double ref_us_min; /* NAN when not measured */
    double max_err;    /* max |kv_attn - kv_attn_ref|, NAN when not measured */
};

static void kernel_usage(FILE *f)
{
    fprintf(f,
            "usage: kvlab kernel --seq-len T[,T...] --heads H --kv-heads HKV --head-dim D\n"
            "                    --dtype " KERNEL_DTYPES_BAR "[,...] [--queries N] [--reps R]\n"
            "                    [--threads N] [--group G] [--layout token|kivi] [--hot]\n"
            "                    [--cold-bytes B] [--no-ref] [--roofline] [--csv]\n"
            "Times one attention call over a filled cache (decode when N = 1, causal\n"
            "prefill of the last N positions otherwise) and the scalar reference.\n"
            "Cold by default: the calls rotate over copies of the cache that together\n"
            "exceed B bytes (default 2 x the L3), so K/V come from DRAM.\n"
            "  --layout    quantized dtypes: token (every row its own groups, default) or\n"
            "              kivi (keys per channel over blocks of --group tokens, values per\n"
            "              token; '# layout=kivi' in the metadata)\n"
            "  --hot       one cache, reused by every call (it stays in the L3)\n"
            "  --cold-bytes B  the total the cold copies exceed (default 2 x L3)\n"
            "  --no-ref    skip the scalar reference (its time and the error check)\n"
            "  --roofline  first measure read bandwidth (DRAM and L3), copy bandwidth\n"
            "              and sgemm on the same threads\n"
            "  --csv       '# key=value' metadata lines, a header, one row per (T, dtype)\n");
}

/* ------------------------------------------------------------------------ */
/* Options                                                                  */

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

/* "f32,int8": names of kv_type_traits, like kv_cli_int_list: a bad item and
 * a list longer than KERNEL_MAX_LIST get their own message. */
static int parse_dtypes(struct kernel_opts *o, const char *s)
{
    o->n_dtype = 0;
    const char *p = s;
    for (;;) {
        size_t len = strcspn(p, ",");
        int found = -1;
        for (int t = 0; t < KV_DTYPE_COUNT; t++)
            if (len == strlen(kv_type_traits[t].name) &&
                strncmp(p, kv_type_traits[t].name, len) == 0)
                found = t;
        if (found < 0) {
            char names[128];
            fprintf(stderr, "kvlab: --dtype expects %s (comma list), got '%s'\n",
                    dtype_names(names, sizeof names), kv_cli_q(s));
            return -1;
        }
        if (o->n_dtype == KERNEL_MAX_LIST) {
            fprintf(stderr, "kvlab: --dtype takes at most %d values, got '%s'\n",
                    KERNEL_MAX_LIST, kv_cli_q(s));
            return -1;
        }
        o->dtype[o->n_dtype++] = (enum kv_dtype)found;
        if (p[len] == '\0')
            return 0;
        p += len + 1;
    }
}

static int parse_kernel_opts(struct kernel_opts *o, int argc, char **argv)
{
    memset(o, 0, sizeof(*o));
    o->seq_len[0] = 2048;
    o->n_seq_len = 1;
    o->dtype[0] = KV_DTYPE_F32;
    o->n_dtype = 1;
    o->heads = 8;
    o->kv_heads = 8;
    o->head_dim = 64;
    o->queries = 1;
    o->reps = 0; /* 0: chosen per configuration */
    o->threads = omp_get_num_procs();
    o->group = 32;
    o->mode = KV_KTIME_COLD;
    o->cold_bytes = KV_KTIME_COLD_FACTOR * kv_l3_bytes();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            kernel_usage(stdout);
            return 1;
        }
        if (strcmp(a, "--csv") == 0) {
            o->csv = 1;
            continue;
        }
        if (strcmp(a, "--no-ref") == 0) {
            o->no_ref = 1;
            continue;
        }
        if (strcmp(a, "--roofline") == 0) {
            o->roofline = 1;
            continue;
        }
        if (strcmp(a, "--hot") == 0) {
            o->mode = KV_KTIME_HOT;
            continue;
        }
        static const char *const valued[] = {"--seq-len", "--dtype", "--heads", "--kv-heads",
                                             "--head-dim", "--queries", "--reps", "--threads",
                                             "--cold-bytes", "--layout", "--group"};
        int known = 0;
        for (size_t k = 0; k < sizeof(valued) / sizeof(valued[0]); k++)
            known |= strcmp(a, valued[k]) == 0;
        if (!known) {
            fprintf(stderr, "kvlab: unknown option '%s' (try kvlab kernel --help)\n",
                    kv_cli_q(a));
            return -1;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "kvlab: %s needs a value\n", a);
            return -1;
        }
        const char *v = argv[++i];
        int rc;
        if (strcmp(a, "--seq-len") == 0) {
            o->n_seq_len = rc = kv_cli_int_list(a, v, 1, 1 << 24, o->seq_len, KERNEL_MAX_LIST);
        } else if (strcmp(a, "--dtype") == 0) {
            rc = parse_dtypes(o, v);
        } else if (strcmp(a, "--heads") == 0) {
            rc = kv_cli_i32(a, v, 1, 4096, &o->heads);
        } else if (strcmp(a, "--kv-heads") == 0) {
            rc = kv_cli_i32(a, v, 1, 4096, &o->kv_heads);
        } else if (strcmp(a, "--head-dim") == 0) {
            rc = kv_cli_i32(a, v, 1, 16384, &o->head_dim);
        } else if (strcmp(a, "--queries") == 0) {
            rc = kv_cli_i32(a, v, 1, 1 << 20, &o->queries);
        } else if (strcmp(a, "--reps") == 0) {
            rc = kv_cli_i32(a, v, 1, 1000000, &o->reps);
        } else if (strcmp(a, "--threads") == 0) {
            rc = kv_cli_i32(a, v, 1, 1024, &o->threads);
        } else if (strcmp(a, "--layout") == 0) {
            rc = 0;
            if (strcmp(v, "token") == 0 || strcmp(v, "kivi") == 0) {
                o->kivi = strcmp(v, "kivi") == 0;
            } else {
                fprintf(stderr, "kvlab: --layout expects token or kivi, got '%s'\n",
                        kv_cli_q(v));
                rc = -1;
            }
        } else if (strcmp(a, "--cold-bytes") == 0) {
            int64_t cb = 0;
            rc = kv_cli_int(a, v, 1, (int64_t)1 << 40, &cb);
            o->cold_bytes = (size_t)cb;
        } else {
            rc = kv_cli_i32(a, v, 1, 16384, &o->group); /* --group, the last known one */
        }
        if (rc < 0)
            return -1;
    }
    if (o->heads % o->kv_heads != 0) {
        fprintf(stderr, "kvlab: --kv-heads %d must divide --heads %d\n", o->kv_heads, o->heads);
        return -1;
    }
    for (int k = 0; k < o->n_dtype; k++) {
        if (o->kivi && kv_type_traits[o->dtype[k]].has_qparams &&
            kv_quant_check(o->dtype[k], o->head_dim, o->head_dim) != KV_OK) {
            fprintf(stderr, "kvlab: --layout kivi: --head-dim %d is not a whole number of %s "
                            "blocks\n", o->head_dim, kv_type_traits[o->dtype[k]].name);
            return -1;
        }
        if (kv_quant_check(o->dtype[k], o->head_dim, o->group) != KV_OK) {
            fprintf(stderr, "kvlab: --group %d must divide --head-dim %d (and be even for int4)\n",
                    o->group, o->head_dim);
            return -1;
        }
    }
    for (int k = 0; k < o->n_seq_len; k++) {
        if (o->seq_len[k] < o->queries) {
            fprintf(stderr, "kvlab: --queries %d exceeds --seq-len %d\n", o->queries,
                    o->seq_len[k]);
            return -1;
        }
        /* the cache (K and V, codes and qparams) and q, out, ref must fit */
        for (int t = 0; t < o->n_dtype; t++) {
            size_t row = kv_dtype_row_bytes(o->dtype[t], o->head_dim), cache, io, total;
            if (kv_type_traits[o->dtype[t]].has_qparams) /* kivi keys: about the same */
                row += (size_t)(o->head_dim / o->group) * sizeof(struct kv_qparams);
            const size_t fc[] = {2, (size_t)o->kv_heads, (size_t)o->seq_len[k], row};
            const size_t fi[] = {3, (size_t)o->queries, (size_t)o->heads,
                                 (size_t)o->head_dim, sizeof(float)};
            if (kv_mul_sizes(&cache, 4, fc) != KV_OK || kv_mul_sizes(&io, 5, fi) != KV_OK ||
                cache > SIZE_MAX - io) {
                fprintf(stderr, "kvlab: the cache's byte count overflows (--kv-heads x "
                                "--seq-len x --head-dim)\n");
                return -1;
            }
            /* cold: the copies exceed cold_bytes by less than one cache */
            total = cache + io;
            if (o->mode == KV_KTIME_COLD)
                total = o->cold_bytes > SIZE_MAX - total ? SIZE_MAX : total + o->cold_bytes;
            if (kv_cli_check_memory("kernel", total) != 0)
                return -1;
        }
    }
    return 0;
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
        views[s] = (struct kv_view){.spans = &spans[s], .n_spans = 1};
    }
    struct kv_attn_params p = {.batch = 1, .n_q = nq, .n_heads = o->heads, .n_kv_heads = hkv,
                               .head_dim = d, .q_pos0 = T - nq,
                               .scale = 1.0f / sqrtf((float)d), .n_threads = o->threads};
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
    struct kv_ktime_params tp = {.reps = o->reps, .n_sets = sets, .label = label};
    struct kv_ktime_result tr;
    if (kv_ktime_run(&tr, &tp, kernel_call, &call) != 0) {
        fprintf(stderr, "kvlab: kernel: out of memory for the timings\n");
        goto done;
    }
    r->us_min = tr.us_min;
    r->us_median = tr.us_median;
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

/* ------------------------------------------------------------------------ */
/* Command                                                                  */

int kv_cmd_kernel(int argc, char **argv)
{
    struct kernel_opts o;
    int rc = parse_kernel_opts(&o, argc, argv);
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    struct kv_roofline rl = {.read_gbps = NAN, .read_l3_gbps = NAN, .copy_gbps = NAN,
                             .sgemm_gflops = NAN};
    if (o.roofline) {
        struct kv_roofline_params rp;
        kv_roofline_defaults(&rp, o.threads);
        enum kv_status s = kv_roofline_measure(&rl, &rp);
        if (s != KV_OK) {
            fprintf(stderr, "kvlab: kernel: roofline: %s\n", kv_status_str(s));
            return 1;
        }
        kv_cli_progress("# roofline: read %.2f GB/s (DRAM), %.2f GB/s (L3), copy %.2f GB/s, "
                        "sgemm %.1f GFLOP/s\n",
                        rl.read_gbps, rl.read_l3_gbps, rl.copy_gbps, rl.sgemm_gflops);
    }
    /* one pool for every configuration's copies, faulted in before any timing */
    size_t pool = 0;
    for (int si = 0; si < o.n_seq_len; si++) {
        for (int di = 0; di < o.n_dtype; di++) {
            size_t kvb, kqpb, vqpb;
            size_t sb = kernel_set_bytes(&o, o.seq_len[si], o.dtype[di], &kvb, &kqpb, &vqpb);
            size_t need = sb * (size_t)kv_ktime_sets(o.mode, sb, o.cold_bytes);
            pool = need > pool ? need : pool;
        }
    }
    if (kernel_pool_get(pool) == NULL) {
        fprintf(stderr, "kvlab: kernel: out of memory for %zu bytes of caches\n", pool);
        return 1;
    }
    /* the kernel parallelises with OpenMP itself; its tile GEMMs run in the
     * calling thread */
    openblas_set_num_threads(1);
    const char *mode = kv_ktime_mode_name(o.mode);
    char cold[64] = "";
    if (o.mode == KV_KTIME_COLD)
        snprintf(cold, sizeof cold, " (copies of each cache exceeding %zu MB)", o.cold_bytes / 1000000);
    kv_cli_progress("# kvlab kernel: %d threads (of %d cores), head_dim %d, heads %d/%d, "
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
            printf("# read_gbps=%.3f\n# read_l3_gbps=%.3f\n# copy_gbps=%.3f\n# sgemm_gflops=%.3f\n",
                   rl.read_gbps, rl.read_l3_gbps, rl.copy_gbps, rl.sgemm_gflops);
        printf("head_dim,heads,kv_heads,seq_len,queries,dtype,threads,us_min,us_median,gbps,gflops,"
               "ref_us_min,mode,sets\n");
    }
    for (int si = 0; si < o.n_seq_len; si++) {
        for (int di = 0; di < o.n_dtype; di++) {
            struct kernel_result r;
            int32_t T = o.seq_len[si];
            enum kv_dtype dt = o.dtype[di];
            if (kernel_run_one(&r, &o, T, dt) != 0) {
                kernel_pool_release();
                return 1;
            }
            const char *name = kv_type_traits[dt].name;
            if (o.csv) {
                printf("%d,%d,%d,%d,%d,%s,%d,%.2f,%.2f,%.3f,%.3f,", o.head_dim, o.heads, o.kv_heads,
                       T, o.queries, name, o.threads, r.us_min, r.us_median, r.gbps, r.gflops);
                if (!isnan(r.ref_us_min))
                    printf("%.2f", r.ref_us_min);
                printf(",%s,%d\n", mode, r.sets);
            } else {
                printf("T %d, %s, %s (%d cop%s): kv_attn min %.1f us, median %.1f us, %.2f GB/s, %.2f GFLOP/s\n",
                       T, name, mode, r.sets, r.sets == 1 ? "y" : "ies", r.us_min, r.us_median,
                       r.gbps, r.gflops);
                if (!isnan(r.ref_us_min))
                    printf("T %d, %s: kv_attn_ref min %.1f us (%.1fx slower); max |kv_attn - ref| = %.2g\n",
                           T, name, r.ref_us_min, r.ref_us_min / r.us_min, r.max_err);
            }
            fflush(stdout);
        }
    }
    kernel_pool_release();
    return 0;
}

/* transitional: on the command table, parsing its own argv */
const struct kv_cmd kv_cmd_kernel_def = {.name = "kernel", .summary = "time the attention kernel alone", .legacy = kv_cmd_kernel};
