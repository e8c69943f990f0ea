/*
 * cmd_kernel.c - `kvlab kernel`: times the attention kernel alone.
 *
 * Builds one filled cache per configuration, laid out as the strategies lay
 * it out, (n_kv_heads, T, head_dim) for the one sequence, in the requested
 * dtype, and times kv_attn over it (decode when --queries is 1, causal
 * prefill of the last N positions otherwise), then the scalar reference
 * kv_attn_ref with fewer repetitions. Rates come from declared counts: bytes
 * are the K+V bytes the spans hold (codes + qparams), FLOPs are 4 * head_dim
 * * heads per visible (query, key) pair. Every buffer is touched at creation
 * (kv_alloc zero-fills) and the kernel is warmed up before timing; the
 * result is checked against the reference after timing. OpenBLAS is set to
 * one thread: kv_attn runs its own OpenMP threads and calls sgemm on tiles.
 * With --csv the rows are preceded by `# key=value` metadata lines (commit,
 * CPU, threads, ...; with --roofline also the machine's limits measured on
 * the same threads, read_gbps, copy_gbps, sgemm_gflops, as sweep records).
 *
 *   kvlab kernel --seq-len T[,T...] --heads H --kv-heads HKV --head-dim D
 *                --dtype f32|int8|int4[,...] [--queries N] [--reps R]
 *                [--threads N] [--group G] [--no-ref] [--roofline] [--csv]
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
#include "commands.h"
#include "roofline.h"
#include "stats.h"
#include "sysinfo.h"

#define KERNEL_MAX_LIST 32
/* A timing pass during which other programs (or the hypervisor, "steal")
 * used more than this share of one core (busy time of the whole machine
 * from /proc/stat minus this process's CPU time, over the pass's wall time)
 * shared the cores with us: it is run again, after a pause, up to
 * KERNEL_MAX_TRIES passes, and the pass with the best minimum is kept.
 * Passes shorter than KERNEL_CHECK_MIN_NS are not judged (/proc/stat counts
 * in 10 ms ticks). */
#define KERNEL_MAX_OTHERS 0.15
#define KERNEL_CHECK_MIN_NS 50000000L
#define KERNEL_MAX_TRIES 4
#define KERNEL_RETRY_PAUSE_NS 300000000L

struct kernel_opts {
    int32_t seq_len[KERNEL_MAX_LIST];
    int n_seq_len;
    enum kv_dtype dtype[KERNEL_MAX_LIST];
    int n_dtype;
    int32_t heads, kv_heads, head_dim, queries, reps, threads, group;
    int no_ref, csv, roofline;
};

struct kernel_result {
    double us_min, us_median, gbps, gflops;
    double ref_us_min; /* NAN when not measured */
    double max_err;    /* max |kv_attn - kv_attn_ref|, NAN when not measured */
};

static void kernel_usage(FILE *f)
{
    fprintf(f,
            "usage: kvlab kernel --seq-len T[,T...] --heads H --kv-heads HKV --head-dim D\n"
            "                    --dtype f32|int8|int4[,...] [--queries N] [--reps R]\n"
            "                    [--threads N] [--group G] [--no-ref] [--roofline] [--csv]\n"
            "Times one attention call over a filled cache (decode when N = 1, causal\n"
            "prefill of the last N positions otherwise) and the scalar reference.\n"
            "  --no-ref    skip the scalar reference (its time and the error check)\n"
            "  --roofline  first measure read/copy bandwidth and sgemm on the same threads\n"
            "  --csv       '# key=value' metadata lines, a header, one row per (T, dtype)\n");
}

/* ------------------------------------------------------------------------ */
/* Options                                                                  */

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
            fprintf(stderr, "kvlab: --dtype expects f32, int8 or int4 (comma list), got '%s'\n",
                    kv_cli_q(s));
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
        static const char *const valued[] = {"--seq-len", "--dtype", "--heads", "--kv-heads",
                                             "--head-dim", "--queries", "--reps", "--threads",
                                             "--group"};
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
            if (o->dtype[t] != KV_DTYPE_F32)
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
            total = cache + io;
            if (kv_cli_check_memory("kernel", total) != 0)
                return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* One configuration                                                        */

/* Busy time of the whole machine so far (all CPUs, /proc/stat user + nice
 * + system + irq + softirq + steal), in ns; -1 when it cannot be read. */
static int64_t machine_busy_ns(void)
{
    FILE *f = fopen("/proc/stat", "r");
    if (f == NULL)
        return -1;
    char line[512];
    const char *ok = fgets(line, sizeof line, f);
    fclose(f);
    if (ok == NULL || strncmp(line, "cpu ", 4) != 0)
        return -1;
    /* the first line: "cpu" then user nice system idle iowait irq softirq steal */
    unsigned long long v[8] = {0};
    int n = 0;
    char *p = line + 4;
    while (n < 8) {
        char *end;
        errno = 0;
        v[n] = strtoull(p, &end, 10);
        if (end == p || errno != 0)
            break;
        p = end;
        n++;
    }
    long tck = sysconf(_SC_CLK_TCK);
    if (n != 8 || tck <= 0)
        return -1;
    unsigned long long busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    return (int64_t)(busy * (1000000000ull / (unsigned long long)tck));
}

static uint64_t kernel_rng = 0x2545F4914F6CDD1Dull;
static float kernel_rand(void)
{
    kernel_rng ^= kernel_rng >> 12;
    kernel_rng ^= kernel_rng << 25;
    kernel_rng ^= kernel_rng >> 27;
    return (float)((double)((kernel_rng * 2685821657736338717ull) >> 40) / 16777216.0 * 2.0 - 1.0);
}

/* Fills, times and checks one (T, dtype); 1 on a run-time failure. */
static int kernel_run_one(struct kernel_result *r, const struct kernel_opts *o, int32_t T,
                          enum kv_dtype dt)
{
    const int32_t d = o->head_dim, hkv = o->kv_heads, nq = o->queries;
    const int32_t ng = dt == KV_DTYPE_F32 ? 0 : d / o->group;
    size_t rows = (size_t)hkv * T, rb = kv_dtype_row_bytes(dt, d);
    size_t qpb = (size_t)ng * sizeof(struct kv_qparams);
    size_t nqf = (size_t)nq * o->heads * d;
    int rc = 1;
    char *k = kv_alloc(rows * rb), *v = kv_alloc(rows * rb);
    struct kv_qparams *kqp = ng ? kv_alloc(rows * qpb) : NULL;
    struct kv_qparams *vqp = ng ? kv_alloc(rows * qpb) : NULL;
    float *q = kv_alloc(nqf * sizeof(float)), *out = kv_alloc(nqf * sizeof(float));
    float *ref = kv_alloc(nqf * sizeof(float)), *row = kv_alloc((size_t)d * sizeof(float));
    double *times = kv_alloc(1000 * sizeof(double) + 1);
    void *ws = NULL;
    if (!k || !v || (ng && (!kqp || !vqp)) || !q || !out || !ref || !row || !times) {
        fprintf(stderr, "kvlab: kernel: out of memory for T=%d\n", T);
        goto done;
    }
    for (size_t i = 0; i < rows; i++) {
        for (int32_t e = 0; e < d; e++)
            row[e] = kernel_rand();
        kv_quantize_row(k + i * rb, kqp ? kqp + i * ng : NULL, row, dt, d, o->group);
        for (int32_t e = 0; e < d; e++)
            row[e] = kernel_rand();
        kv_quantize_row(v + i * rb, vqp ? vqp + i * ng : NULL, row, dt, d, o->group);
    }
    for (size_t i = 0; i < nqf; i++)
        q[i] = 2.0f * kernel_rand();

    const struct kv_tensor side = {.dtype = dt, .row_stride = rb, .head_stride = rb * T,
                                   .seq_stride = rb * rows, .axis = KV_QAXIS_TOKEN,
                                   .group = o->group, .qp_row_stride = qpb,
                                   .qp_head_stride = qpb * T, .qp_seq_stride = qpb * rows};
    struct kv_span span = {.k = side, .v = side, .n_tokens = T, .pos0 = 0};
    span.k.data = k;
    span.k.qp = kqp;
    span.v.data = v;
    span.v.qp = vqp;
    const struct kv_view view = {.spans = &span, .n_spans = 1};
    struct kv_attn_params p = {.batch = 1, .n_q = nq, .n_heads = o->heads, .n_kv_heads = hkv,
                               .head_dim = d, .q_pos0 = T - nq,
                               .scale = 1.0f / sqrtf((float)d), .n_threads = o->threads};
    size_t wsb = kv_attn_workspace_bytes(&p);
    ws = kv_alloc(wsb);
    if (ws == NULL) {
        fprintf(stderr, "kvlab: kernel: out of memory for the workspace\n");
        goto done;
    }
    enum kv_status st = kv_attn(out, q, &p, &view, ws, wsb);
    if (st != KV_OK) {
        fprintf(stderr, "kvlab: kernel: %s\n", kv_status_str(st));
        goto done;
    }
    size_t bytes = kv_attn_span_bytes(&p, &view);
    double flops = 4.0 * d * o->heads * (double)kv_attn_visible_pairs(&p, &view);

    /* repetitions: enough to fill ~0.3 s, bounded */
    int64_t t0 = kv_now_ns();
    for (int w = 0; w < 2; w++)
        kv_attn(out, q, &p, &view, ws, wsb);
    double one = (double)(kv_now_ns() - t0) / 2.0;
    int reps = o->reps > 0 ? o->reps : (int)(3e8 / (one + 1.0));
    reps = reps < 5 ? 5 : reps > 1000 ? 1000 : reps;
    if (o->reps > 0 && o->reps < reps)
        reps = o->reps;
    r->us_min = INFINITY;
    for (int attempt = 0; attempt < KERNEL_MAX_TRIES; attempt++) {
        if (attempt > 0) {
            struct timespec pause = {0, KERNEL_RETRY_PAUSE_NS};
            nanosleep(&pause, NULL);
        }
        int64_t wall0 = kv_now_ns(), cpu0 = kv_cpu_now_ns(), busy0 = machine_busy_ns();
        for (int i = 0; i < reps; i++) {
            int64_t a = kv_now_ns();
            kv_attn(out, q, &p, &view, ws, wsb);
            times[i] = (double)(kv_now_ns() - a) / 1e3;
        }
        int64_t wall = kv_now_ns() - wall0, busy1 = machine_busy_ns();
        /* cores' worth of CPU that others used during the pass */
        double others = busy0 < 0 || busy1 < 0 || wall < KERNEL_CHECK_MIN_NS ? 0.0 :
                        (double)(busy1 - busy0 - (kv_cpu_now_ns() - cpu0)) / (double)wall;
        double med = kv_stats_median(times, reps); /* sorts: times[0] is the min */
        if (times[0] < r->us_min) {
            r->us_min = times[0];
            r->us_median = med;
        }
        if (others <= KERNEL_MAX_OTHERS)
            break;
        kv_cli_progress("# T %d, %s: other programs used %.2f cores during timing pass %d%s\n",
                        T, kv_type_traits[dt].name, others, attempt + 1,
                        attempt + 1 < KERNEL_MAX_TRIES ? ", measuring again"
                                                       : ", keeping the best");
    }
    r->gbps = (double)bytes / (r->us_min * 1e3);
    r->gflops = flops / (r->us_min * 1e3);
    r->ref_us_min = NAN;
    r->max_err = NAN;
    if (!o->no_ref) {
        /* the reference is ~100x slower: a few calls at most */
        int ref_reps = reps / 20 < 1 ? 1 : reps / 20 > 5 ? 5 : reps / 20;
        double best = INFINITY;
        for (int i = 0; i < ref_reps; i++) {
            int64_t a = kv_now_ns();
            st = kv_attn_ref(ref, q, &p, &view);
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
    kv_free(k);
    kv_free(v);
    kv_free(kqp);
    kv_free(vqp);
    kv_free(q);
    kv_free(out);
    kv_free(ref);
    kv_free(row);
    kv_free(times);
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
    struct kv_roofline rl = {.read_gbps = NAN, .copy_gbps = NAN, .sgemm_gflops = NAN};
    if (o.roofline) {
        struct kv_roofline_params rp;
        kv_roofline_defaults(&rp, o.threads);
        enum kv_status s = kv_roofline_measure(&rl, &rp);
        if (s != KV_OK) {
            fprintf(stderr, "kvlab: kernel: roofline: %s\n", kv_status_str(s));
            return 1;
        }
        kv_cli_progress("# roofline: read %.2f GB/s, copy %.2f GB/s, sgemm %.1f GFLOP/s\n",
                        rl.read_gbps, rl.copy_gbps, rl.sgemm_gflops);
    }
    /* the kernel parallelises with OpenMP itself; its tile GEMMs run in the
     * calling thread */
    openblas_set_num_threads(1);
    kv_cli_progress("# kvlab kernel: %d threads (of %d cores), head_dim %d, heads %d/%d, "
                    "queries %d, group %d\n", o.threads, omp_get_num_procs(), o.head_dim,
                    o.heads, o.kv_heads, o.queries, o.group);
    if (o.csv) {
        struct kv_sysinfo si;
        kv_sysinfo_collect(&si);
        printf("# kvlab kernel\n# commit=%s\n# date=%s\n# cpu=%s\n# threads=%d\n"
               "# blas_core=%s\n# compiler=%s\n# cflags=%s\n# l3_bytes=%ld\n# group=%d\n",
               si.commit, si.date, si.cpu, o.threads, si.blas_core, si.compiler, si.cflags,
               si.l3_bytes, o.group);
        if (o.roofline)
            printf("# read_gbps=%.3f\n# copy_gbps=%.3f\n# sgemm_gflops=%.3f\n", rl.read_gbps,
                   rl.copy_gbps, rl.sgemm_gflops);
        printf("head_dim,heads,kv_heads,seq_len,queries,dtype,threads,us_min,us_median,gbps,gflops,ref_us_min\n");
    }
    for (int si = 0; si < o.n_seq_len; si++) {
        for (int di = 0; di < o.n_dtype; di++) {
            struct kernel_result r;
            int32_t T = o.seq_len[si];
            enum kv_dtype dt = o.dtype[di];
            if (kernel_run_one(&r, &o, T, dt) != 0)
                return 1;
            const char *name = kv_type_traits[dt].name;
            if (o.csv) {
                printf("%d,%d,%d,%d,%d,%s,%d,%.2f,%.2f,%.3f,%.3f,", o.head_dim, o.heads, o.kv_heads,
                       T, o.queries, name, o.threads, r.us_min, r.us_median, r.gbps, r.gflops);
                if (isnan(r.ref_us_min))
                    printf("\n");
                else
                    printf("%.2f\n", r.ref_us_min);
            } else {
                printf("T %d, %s: kv_attn min %.1f us, median %.1f us, %.2f GB/s, %.2f GFLOP/s\n",
                       T, name, r.us_min, r.us_median, r.gbps, r.gflops);
                if (!isnan(r.ref_us_min))
                    printf("T %d, %s: kv_attn_ref min %.1f us (%.1fx slower); max |kv_attn - ref| = %.2g\n",
                           T, name, r.ref_us_min, r.ref_us_min / r.us_min, r.max_err);
            }
            fflush(stdout);
        }
    }
    return 0;
}
