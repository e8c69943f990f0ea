/*
 * ggml_attn.c - kvlab's kernel peer: times ggml's flash-attention op
 * (ggml_flash_attn_ext, the CPU kernel llama.cpp decodes with) at the shapes
 * `kvlab kernel` times, with the same protocol (bench/measure/kernel_timing.c: the
 * same warm-up, repetitions, min/median, disturbed passes, cold rotation
 * over copies exceeding 2 x the L3, or hot over one).
 *
 * Built by `make peers` against the llama.cpp that bench/peers/build.sh
 * fetched and built (nothing of ggml is copied here); `make kernel-bench`
 * runs it beside `kvlab kernel`, shape by shape, in the same passes.
 *
 * The one design decision is the K/V layout, two of them:
 *   llama   what llama.cpp's KV cache hands the op: a token-major buffer,
 *           one row of n_kv_heads x head_dim per token, viewed per head as
 *           [head_dim, n_kv_heads, T] and permuted to [head_dim, T,
 *           n_kv_heads] (row stride n_kv_heads x head_dim), with an f16
 *           mask of T zeros (every key visible), precision F32 as
 *           llama.cpp sets it;
 *   contig  the per-head contiguous [head_dim, T, n_kv_heads] tensors of
 *           ggml's own op tests, no mask.
 * K and V are stored in the named type (f32, f16, bf16, q8_0, q4_0); Q is
 * f32 (the op converts it to K's dot-product type itself). In llama.cpp's
 * graph an f32 cache is cast to f16 before this op when flash attention is
 * on; here the op is given f32 as it is, so the f32 rows time the op alone.
 *
 * After timing, the output is checked against a double-precision reference
 * computed from the stored (dequantized) K/V, for the first, a middle and
 * the last query head (enough to catch a wrong layout or head mapping,
 * which gives an error of order 1, at a fraction of the cost); a relative
 * L2 error above the dtype's bound exits 1 without a row.
 *
 * Output: rows of out/peers.csv (notebooks_data/README.md), no header
 * unless --header:
 *   peer,version,bench,shape,seq_len,dtype,layout,mode,threads,reps,us_min,us_median,noisy,noise_reason
 *
 *   kvlab-peer-ggml --head-dim D --heads H --kv-heads K --seq-len T[,T...]
 *       [--dtype f32,f16,bf16,q8_0,q4_0] [--layout llama,contig] [--hot]
 *       [--cold-bytes B] [--threads N] [--reps R] [--version STR] [--header]
 *
 * The options are a table of kvlab's command layer (bench/cli/cli_cmd.h),
 * parsed as strictly as kvlab's own commands' (exit 2, one line).
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-cpu.h"
#include "ggml.h"

#include "../../kernels/kv_common.h"
#include "../cli/cli_cmd.h"
#include "../measure/kernel_timing.h"

#define PEER_MAX_LIST 32

/* relative L2 error bounds of the output against the double reference over
 * the stored K/V: f32 keeps float rounding (measured ~1e-6); the others
 * round Q to K's dot-product type (f16, bf16, q8_0) and accumulate in f32
 * or f16 (measured 1e-3 to 5e-3 at T = 2048): 5e-2 leaves a margin of 10x
 * and is still 20x below the error of a layout mistake (order 1). */
static const struct peer_type {
    const char *name;
    enum ggml_type type;
    double max_rel_err;
} peer_types[] = {
    {"f32", GGML_TYPE_F32, 1e-4},  {"f16", GGML_TYPE_F16, 5e-2},
    {"bf16", GGML_TYPE_BF16, 5e-2}, {"q8_0", GGML_TYPE_Q8_0, 5e-2},
    {"q4_0", GGML_TYPE_Q4_0, 5e-2},
};
#define PEER_NTYPES ((int)(sizeof(peer_types) / sizeof(peer_types[0])))

enum peer_layout { PEER_LLAMA, PEER_CONTIG, PEER_LAYOUT_COUNT };
static const char *const layout_names[PEER_LAYOUT_COUNT] = {"llama", "contig"};

struct name_list {
    int n;
    int idx[PEER_MAX_LIST];
};

struct peer_opts {
    int32_t head_dim, heads, kv_heads, reps;
    struct kv_opt_ints seq_len;
    struct name_list type, layout;
    int hot;
    int64_t cold_bytes;
    const char *version;
    int header;
    /* set by peer_check: */
    int32_t threads;
    enum kv_ktime_mode mode;
};

/* ------------------------------------------------------------------------ */
/* Options                                                                  */

/* A comma list of names (n of them) into l; -1 for an empty entry, an
 * unknown one or more than PEER_MAX_LIST. */
static int parse_names(const char *s, const char *const *names, int n, struct name_list *l)
{
    l->n = 0;
    for (const char *p = s;; p++) {
        const char *e = strchr(p, ',');
        size_t len = e != NULL ? (size_t)(e - p) : strlen(p);
        int found = -1;
        for (int i = 0; i < n; i++)
            if (strlen(names[i]) == len && strncmp(p, names[i], len) == 0)
                found = i;
        if (found < 0 || l->n == PEER_MAX_LIST)
            return -1;
        l->idx[l->n++] = found;
        if (e == NULL)
            return 0;
        p = e;
    }
}

static int opt_dtype(const char *v, void *field, char *why, size_t n)
{
    const char *names[PEER_NTYPES];
    for (int i = 0; i < PEER_NTYPES; i++)
        names[i] = peer_types[i].name;
    if (parse_names(v, names, PEER_NTYPES, field) == 0)
        return 0;
    snprintf(why, n, "a comma list of f32, f16, bf16, q8_0, q4_0");
    return -1;
}

static int opt_layout(const char *v, void *field, char *why, size_t n)
{
    if (parse_names(v, layout_names, PEER_LAYOUT_COUNT, field) == 0)
        return 0;
    snprintf(why, n, "a comma list of llama, contig");
    return -1;
}

#define O(field) offsetof(struct peer_opts, field)
static const struct kv_opt peer_table[] = {
    {.name = "--head-dim", .kind = KV_OPT_INT, .off = O(head_dim), .lo = 1, .hi = 4096,
     .meta = "D", .help = "head dimension"},
    {.name = "--heads", .kind = KV_OPT_INT, .off = O(heads), .lo = 1, .hi = 4096, .meta = "H",
     .help = "query heads"},
    {.name = "--kv-heads", .kind = KV_OPT_INT, .off = O(kv_heads), .lo = 1, .hi = 4096,
     .meta = "K", .help = "key/value heads (divides --heads)"},
    {.name = "--seq-len", .kind = KV_OPT_INTS, .off = O(seq_len), .lo = 1, .hi = 1 << 24,
     .hi_n = PEER_MAX_LIST, .meta = "T,...", .help = "cached tokens"},
    {.name = "--dtype", .kind = KV_OPT_CUSTOM, .off = O(type), .parse = opt_dtype,
     .meta = "LIST", .help = "K/V types: f32,f16,bf16,q8_0,q4_0 (default all)"},
    {.name = "--layout", .kind = KV_OPT_CUSTOM, .off = O(layout), .parse = opt_layout,
     .meta = "LIST", .help = "llama (llama.cpp's cache view), contig (per head); default both"},
    {.name = "--hot", .kind = KV_OPT_FLAG, .off = O(hot),
     .help = "time over one copy (L3-resident) instead of rotating over copies beyond the L3"},
    {.name = "--cold-bytes", .kind = KV_OPT_I64, .off = O(cold_bytes), .lo = 1,
     .hi = (int64_t)1 << 40, .meta = "B", .help = "bytes the cold rotation spans"},
    {.name = "--reps", .kind = KV_OPT_INT, .off = O(reps), .lo = 1, .hi = 1000000, .meta = "R",
     .help = "timed repetitions (default: kvlab kernel's)"},
    {.name = "--version", .kind = KV_OPT_TEXT, .off = O(version), .meta = "STR",
     .help = "ggml's version, for the rows (no comma)"},
    {.name = "--header", .kind = KV_OPT_FLAG, .off = O(header), .help = "print the CSV header first"},
};
#undef O

static void peer_defaults(void *opts, struct kv_cli_common *c)
{
    struct peer_opts *o = opts;
    (void)c;
    o->head_dim = 64;
    o->heads = o->kv_heads = 8;
    o->seq_len.n = 1;
    o->seq_len.v[0] = 2048;
    o->type.n = PEER_NTYPES;
    for (int i = 0; i < PEER_NTYPES; i++)
        o->type.idx[i] = i;
    o->layout.n = PEER_LAYOUT_COUNT;
    for (int i = 0; i < PEER_LAYOUT_COUNT; i++)
        o->layout.idx[i] = i;
    o->cold_bytes = (int64_t)(KV_KTIME_COLD_FACTOR * kv_l3_bytes());
    o->version = "unknown";
}

static int peer_check(struct kv_cmd_ctx *x)
{
    struct peer_opts *o = x->opts;
    o->threads = x->c.threads;
    o->mode = o->hot ? KV_KTIME_HOT : KV_KTIME_COLD;
    if (o->heads % o->kv_heads != 0) {
        fprintf(stderr, "kvlab: peer-ggml: --kv-heads %d must divide --heads %d\n", o->kv_heads,
                o->heads);
        return 2;
    }
    for (int i = 0; i < o->type.n; i++) {
        if (o->head_dim % ggml_blck_size(peer_types[o->type.idx[i]].type) != 0) {
            fprintf(stderr, "kvlab: peer-ggml: --head-dim %d is not a multiple of %s's block\n",
                    o->head_dim, peer_types[o->type.idx[i]].name);
            return 2;
        }
    }
    if (strchr(o->version, ',') || strchr(o->version, '\n')) {
        fprintf(stderr, "kvlab: peer-ggml: --version must not contain a comma or a line break\n");
        return 2;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* One configuration                                                        */

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void)
{
    return (float)((double)(kv_rng_next(&rng) >> 40) / 16777216.0 * 2.0 - 1.0);
}

static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Copies of K and V carved from one pool reused by every configuration. */
static char *pool;
static size_t pool_bytes;

/* The graph of one call, and the tensors whose data moves with the copy. */
struct peer_call {
    struct ggml_cgraph *gf;
    struct ggml_cplan plan;
    struct ggml_tensor *kt[3], *vt[3]; /* base, view, permute (llama); base (contig) */
    int nt;
    size_t set_bytes, kv_bytes;
};

static void point_at(struct peer_call *c, int32_t set)
{
    char *base = pool + (size_t)set * c->set_bytes;
    for (int i = 0; i < c->nt; i++) {
        c->kt[i]->data = base + c->kt[i]->view_offs;
        c->vt[i]->data = base + c->kv_bytes + c->vt[i]->view_offs;
    }
}

static void peer_call(void *ctx, int32_t set)
{
    struct peer_call *c = ctx;
    point_at(c, set);
    ggml_graph_compute(c->gf, &c->plan);
}

/* Relative L2 error of out (H, d) against softmax(q K^T scale) V in double
 * over the stored K/V of copy 0, for query heads 0, H/2 and H-1. */
static double check_output(const struct peer_opts *o, const struct peer_type *pt,
                           enum peer_layout lay, int32_t T, const float *q, const float *out,
                           size_t kv_bytes)
{
    const int32_t d = o->head_dim, hkv = o->kv_heads, grp = o->heads / o->kv_heads;
    const size_t rs = ggml_row_size(pt->type, d);
    const struct ggml_type_traits *tr = ggml_get_type_traits(pt->type);
    float *k = malloc((size_t)d * sizeof(float)), *v = malloc((size_t)d * sizeof(float));
    double *s = malloc((size_t)T * sizeof(double)), *acc = malloc((size_t)d * sizeof(double));
    double num = 0.0, den = 0.0;
    if (!k || !v || !s || !acc) {
        free(k), free(v), free(s), free(acc);
        return INFINITY;
    }
    const int32_t check[3] = {0, o->heads / 2, o->heads - 1};
    for (int ci = 0; ci < 3; ci++) {
        const int32_t h = check[ci], g = h / grp;
        double mx = -INFINITY, sum = 0.0;
        for (int32_t j = 0; j < T; j++) {
            size_t off = lay == PEER_LLAMA ? ((size_t)j * hkv + g) * rs : ((size_t)g * T + j) * rs;
            if (pt->type == GGML_TYPE_F32)
                memcpy(k, pool + off, (size_t)d * sizeof(float));
            else
                tr->to_float(pool + off, k, d);
            double dot = 0.0;
            for (int32_t e = 0; e < d; e++)
                dot += (double)q[(size_t)h * d + e] * k[e];
            s[j] = dot / sqrt((double)d);
            mx = s[j] > mx ? s[j] : mx;
        }
        for (int32_t e = 0; e < d; e++)
            acc[e] = 0.0;
        for (int32_t j = 0; j < T; j++) {
            size_t off = lay == PEER_LLAMA ? ((size_t)j * hkv + g) * rs : ((size_t)g * T + j) * rs;
            if (pt->type == GGML_TYPE_F32)
                memcpy(v, pool + kv_bytes + off, (size_t)d * sizeof(float));
            else
                tr->to_float(pool + kv_bytes + off, v, d);
            double w = exp(s[j] - mx);
            sum += w;
            for (int32_t e = 0; e < d; e++)
                acc[e] += w * v[e];
        }
        for (int32_t e = 0; e < d; e++) {
            double ref = acc[e] / sum, diff = (double)out[(size_t)h * d + e] - ref;
            num += diff * diff;
            den += ref * ref;
        }
    }
    free(k), free(v), free(s), free(acc);
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static size_t set_bytes_of(const struct peer_opts *o, int t, int32_t T, size_t *kvb)
{
    *kvb = round64(ggml_row_size(peer_types[t].type, o->head_dim) * (size_t)o->kv_heads * T);
    return 2 * *kvb;
}

/* what the run's configurations saw of the machine (kernel_timing.h), as
 * kvlab kernel keeps it: the two are timed the same way */
static struct kv_ktime_busy peer_busy;

/* Builds, fills, times and checks one (T, dtype, layout); prints its row. */
static int run_one(const struct peer_opts *o, struct ggml_threadpool *tp, int32_t T, int t,
                   enum peer_layout lay)
{
    const struct peer_type *pt = &peer_types[t];
    const int32_t d = o->head_dim, hkv = o->kv_heads, H = o->heads;
    size_t kvb, sb = set_bytes_of(o, t, T, &kvb);
    int32_t sets = kv_ktime_sets(o->mode, sb, (size_t)o->cold_bytes);
    size_t n_el = (size_t)d * hkv * T;
    int rc = 1;
    struct ggml_init_params ip = {.mem_size = 64 * ggml_tensor_overhead() +
                                              ggml_graph_overhead_custom(16, false),
                                  .mem_buffer = NULL, .no_alloc = true};
    struct ggml_context *ctx = ggml_init(ip);
    float *src = malloc(n_el * sizeof(float));
    float *q = malloc((size_t)H * d * sizeof(float)), *out = malloc((size_t)H * d * sizeof(float));
    ggml_fp16_t *mask = calloc((size_t)T, sizeof(ggml_fp16_t)); /* 0.0 in f16 is all-zero bits */
    void *work = NULL;
    if (!ctx || !src || !q || !out || !mask) {
        fprintf(stderr, "kvlab-peer-ggml: out of memory\n");
        goto done;
    }
    /* copy 0: random K and V in [-1, 1) stored in the type, Q in [-2, 2) */
    for (int kv = 0; kv < 2; kv++) {
        for (size_t i = 0; i < n_el; i++)
            src[i] = frand();
        ggml_quantize_chunk(pt->type, src, pool + (size_t)kv * kvb, 0, (int64_t)hkv * T, d, NULL);
    }
    for (size_t i = 0; i < (size_t)H * d; i++)
        q[i] = 2.0f * frand();
    for (int32_t s = 1; s < sets; s++)
        memcpy(pool + (size_t)s * sb, pool, sb);

    struct peer_call c = {.set_bytes = sb, .kv_bytes = kvb};
    struct ggml_tensor *tq = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, d, 1, H);
    tq->data = q;
    struct ggml_tensor *tk, *tv, *tmask = NULL;
    if (lay == PEER_LLAMA) {
        const size_t rs = ggml_row_size(pt->type, d);
        c.kt[0] = ggml_new_tensor_2d(ctx, pt->type, (int64_t)d * hkv, T);
        c.vt[0] = ggml_new_tensor_2d(ctx, pt->type, (int64_t)d * hkv, T);
        c.kt[0]->data = pool;
        c.vt[0]->data = pool + kvb;
        c.kt[1] = ggml_view_3d(ctx, c.kt[0], d, hkv, T, rs, rs * hkv, 0);
        c.vt[1] = ggml_view_3d(ctx, c.vt[0], d, hkv, T, rs, rs * hkv, 0);
        c.kt[2] = tk = ggml_permute(ctx, c.kt[1], 0, 2, 1, 3);
        c.vt[2] = tv = ggml_permute(ctx, c.vt[1], 0, 2, 1, 3);
        c.nt = 3;
        tmask = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, T, 1);
        tmask->data = mask;
    } else {
        c.kt[0] = tk = ggml_new_tensor_3d(ctx, pt->type, d, T, hkv);
        c.vt[0] = tv = ggml_new_tensor_3d(ctx, pt->type, d, T, hkv);
        c.kt[0]->data = pool;
        c.vt[0]->data = pool + kvb;
        c.nt = 1;
    }
    struct ggml_tensor *res =
        ggml_flash_attn_ext(ctx, tq, tk, tv, tmask, 1.0f / sqrtf((float)d), 0.0f, 0.0f);
    ggml_flash_attn_ext_set_prec(res, GGML_PREC_F32);
    res->data = out;
    c.gf = ggml_new_graph_custom(ctx, 16, false);
    ggml_build_forward_expand(c.gf, res);
    c.plan = ggml_graph_plan(c.gf, o->threads, tp);
    if (c.plan.work_size > 0) {
        work = malloc(c.plan.work_size);
        if (work == NULL) {
            fprintf(stderr, "kvlab-peer-ggml: out of memory for the work buffer\n");
            goto done;
        }
        c.plan.work_data = work;
    }

    char label[128];
    snprintf(label, sizeof label, "ggml T %d, %s, %s, %s", T, pt->name, layout_names[lay],
             kv_ktime_mode_name(o->mode));
    struct kv_ktime_params kp = {.reps = o->reps, .n_sets = sets, .label = label,
                                 .busy = &peer_busy};
    struct kv_ktime_result r;
    if (kv_ktime_run(&r, &kp, peer_call, &c) != 0) {
        fprintf(stderr, "kvlab-peer-ggml: out of memory for the timings\n");
        goto done;
    }
    /* every copy holds copy 0's values: check the last output against it */
    double err = check_output(o, pt, lay, T, q, out, kvb);
    if (!(err <= pt->max_rel_err)) {
        fprintf(stderr, "kvlab-peer-ggml: %s: output off the reference (relative L2 error %.3g > %.3g)\n",
                label, err, pt->max_rel_err);
        goto done;
    }
    fprintf(stderr, "# %s: %d cop%s, min %.1f us, median %.1f us, rel. error %.2g\n", label, sets,
            sets == 1 ? "y" : "ies", r.us_min, r.us_median, err);
    printf("ggml,%s,kernel,head_dim=%d;heads=%d;kv_heads=%d,%d,%s,%s,%s,%d,%d,%.2f,%.2f,%d,%s\n",
           o->version, d, H, hkv, T, pt->name, layout_names[lay], kv_ktime_mode_name(o->mode),
           o->threads, r.reps, r.us_min, r.us_median, r.noisy, r.noise_reason);
    fflush(stdout);
    rc = 0;
done:
    free(work);
    free(src);
    free(q);
    free(out);
    free(mask);
    if (ctx)
        ggml_free(ctx);
    return rc;
}

/* ------------------------------------------------------------------------ */

static int peer_run(struct kv_cmd_ctx *x);

static const struct kv_cmd peer_cmd = {
    .name = "peer-ggml",
    .summary = "time ggml_flash_attn_ext decode with kvlab kernel's protocol",
    .usage = "--head-dim D --heads H --kv-heads K --seq-len T[,T...] [options]",
    .about = "  prints out/peers.csv rows (notebooks_data/README.md)\n",
    .opts = peer_table,
    .n_opts = sizeof peer_table / sizeof peer_table[0],
    .groups = KV_GRP_THREADS,
    .opts_size = sizeof(struct peer_opts),
    .defaults = peer_defaults,
    .check = peer_check,
    .run = peer_run,
};

int main(int argc, char **argv)
{
    argv[0] = (char *)peer_cmd.name;
    return kv_cmd_main(&peer_cmd, argc, argv);
}

static int peer_run(struct kv_cmd_ctx *x)
{
    const struct peer_opts o = *(const struct peer_opts *)x->opts;
    int rc = 0;
    ggml_cpu_init();
    size_t need = 0;
    for (int si = 0; si < o.seq_len.n; si++) {
        for (int ti = 0; ti < o.type.n; ti++) {
            size_t kvb, sb = set_bytes_of(&o, o.type.idx[ti], o.seq_len.v[si], &kvb);
            size_t n = sb * (size_t)kv_ktime_sets(o.mode, sb, (size_t)o.cold_bytes);
            need = n > need ? n : need;
        }
    }
    if (kv_cli_check_memory("kvlab-peer-ggml", need) != 0)
        return 2;
    pool = kv_alloc(need); /* zero-filled: every page faulted in before timing */
    pool_bytes = need;
    struct ggml_threadpool_params tpp = ggml_threadpool_params_default(o.threads);
    struct ggml_threadpool *tp = ggml_threadpool_new(&tpp);
    if (pool == NULL || tp == NULL) {
        fprintf(stderr, "kvlab-peer-ggml: out of memory for %zu bytes of caches\n", need);
        kv_free(pool);
        return 1;
    }
    if (o.header)
        printf("peer,version,bench,shape,seq_len,dtype,layout,mode,threads,reps,us_min,us_median,noisy,"
               "noise_reason\n");
    fprintf(stderr, "# kvlab-peer-ggml: ggml %s, %d threads, head_dim %d, heads %d/%d, %s\n",
            o.version, o.threads, o.head_dim, o.heads, o.kv_heads, kv_ktime_mode_name(o.mode));
    for (int si = 0; si < o.seq_len.n && rc == 0; si++)
        for (int ti = 0; ti < o.type.n && rc == 0; ti++)
            for (int li = 0; li < o.layout.n && rc == 0; li++)
                rc = run_one(&o, tp, o.seq_len.v[si], o.type.idx[ti], (enum peer_layout)o.layout.idx[li]);
    ggml_threadpool_free(tp);
    kv_free(pool);
    (void)pool_bytes;
    return rc;
}
