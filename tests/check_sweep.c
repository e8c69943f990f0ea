/*
 * check_sweep.c - unit tests of the bench harness's library pieces: the
 * atomic CSV writer (csv_write.c), the sweep loop (sweep.c) on a tiny model,
 * and the roofline's argument checks (roofline.c).
 *
 * The sweep cases check what the CSV's honesty rests on: the timed steps are
 * centred on T, the FLOP counts match the closed forms, an interrupt drops
 * the row in flight and reports it, and nothing leaks on any path (including
 * failed allocations, through kv_alloc_fail_at).
 */
#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../bench/cli/cli_cmd.h"
#include "../bench/cli/commands.h"
#include "../bench/results/csv_write.h"
#include "../bench/measure/roofline.h"
#include "../bench/measure/sweep.h"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */

static char tmpdir[256];

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/kvlab_check_sweep.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void remove_tmpdir(void)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Whole file into buf (NUL-terminated); returns its length or -1. */
static long slurp(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return -1;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    return (long)n;
}

/* Number of entries in tmpdir whose name contains ".tmp." */
static int count_tmp_files(void)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "ls '%s' | grep -c '\\.tmp\\.'", tmpdir);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p != NULL) {
        if (fscanf(p, "%d", &n) != 1)
            n = -1;
        pclose(p);
    }
    return n;
}

/* ------------------------------------------------------------------------ */
/* CSV writer                                                               */

static const char *const cols3[] = {"a", "b", "c"};

START_TEST(csv_write_exact_layout)
{
    make_tmpdir();
    int64_t live = kv_alloc_live();
    struct kv_csv_writer *w;
    ck_assert_int_eq(kv_csv_writer_create(&w), KV_OK);
    ck_assert_int_eq(kv_csv_writer_set_meta(w, "kvlab sweep", NULL), KV_OK);
    ck_assert_int_eq(kv_csv_writer_set_meta(w, "schema", "1"), KV_OK);
    ck_assert_int_eq(kv_csv_writer_set_meta(w, "partial", "1"), KV_OK);
    ck_assert_int_eq(kv_csv_writer_set_metaf(w, "cpu", "x%dy", 7), KV_OK);
    /* replacing keeps the position; newlines in values become spaces */
    ck_assert_int_eq(kv_csv_writer_set_meta(w, "partial", "0"), KV_OK);
    ck_assert_int_eq(kv_csv_writer_set_meta(w, "note", "two\nlines"), KV_OK);
    ck_assert_int_eq(kv_csv_writer_set_meta(w, "bad=key", "v"), KV_ERR_INVALID);
    ck_assert_int_eq(kv_csv_writer_set_header(w, cols3, 3), KV_OK);
    ck_assert_int_eq(kv_csv_writer_add_row(w, "1,2,3"), KV_OK);
    ck_assert_int_eq(kv_csv_writer_add_row(w, "1,2"), KV_ERR_INVALID);
    ck_assert_int_eq(kv_csv_writer_add_row(w, "1,2,3,4"), KV_ERR_INVALID);
    ck_assert_int_eq(kv_csv_writer_add_row(w, "1,2\n,3"), KV_ERR_INVALID);
    ck_assert_int_eq(kv_csv_writer_add_row(w, "x,y,z"), KV_OK);
    ck_assert_int_eq(kv_csv_writer_row_count(w), 2);

    char path[512], buf[4096];
    snprintf(path, sizeof(path), "%s/out.csv", tmpdir);
    ck_assert_int_eq(kv_csv_writer_write(w, path), KV_OK);
    ck_assert_int_ge(slurp(path, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "# kvlab sweep\n# schema=1\n# partial=0\n# cpu=x7y\n"
                          "# note=two lines\na,b,c\n1,2,3\nx,y,z\n");
    ck_assert_int_eq(count_tmp_files(), 0);

    /* writing again replaces the file whole */
    kv_csv_writer_clear_rows(w);
    ck_assert_int_eq(kv_csv_writer_write(w, path), KV_OK);
    ck_assert_int_ge(slurp(path, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "# kvlab sweep\n# schema=1\n# partial=0\n# cpu=x7y\n"
                          "# note=two lines\na,b,c\n");
    kv_csv_writer_destroy(w);
    ck_assert_int_eq(kv_alloc_live(), live);
    remove_tmpdir();
}
END_TEST

START_TEST(csv_write_failure_leaves_previous_file)
{
    make_tmpdir();
    struct kv_csv_writer *w;
    ck_assert_int_eq(kv_csv_writer_create(&w), KV_OK);
    ck_assert_int_eq(kv_csv_writer_set_header(w, cols3, 3), KV_OK);
    ck_assert_int_eq(kv_csv_writer_add_row(w, "1,2,3"), KV_OK);
    char path[512], buf[256];
    /* a directory that does not exist: KV_ERR_IO, nothing created */
    snprintf(path, sizeof(path), "%s/missing/out.csv", tmpdir);
    ck_assert_int_eq(kv_csv_writer_write(w, path), KV_ERR_IO);
    /* a path that is a directory: rename fails, the directory survives */
    snprintf(path, sizeof(path), "%s/adir", tmpdir);
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "mkdir '%s' && touch '%s/keep'", path, path);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(kv_csv_writer_write(w, path), KV_ERR_IO);
    snprintf(cmd, sizeof(cmd), "%s/keep", path);
    ck_assert_int_ge(slurp(cmd, buf, sizeof(buf)), 0);
    ck_assert_int_eq(count_tmp_files(), 0);
    kv_csv_writer_destroy(w);
    remove_tmpdir();
}
END_TEST

START_TEST(csv_write_alloc_failures_clean_up)
{
    int64_t live = kv_alloc_live();
    int saw_nomem = 0;
    for (int64_t k = 1; k <= 12; k++) {
        kv_alloc_fail_at(k, 1);
        struct kv_csv_writer *w = NULL;
        enum kv_status s = kv_csv_writer_create(&w);
        if (s == KV_OK)
            s = kv_csv_writer_set_meta(w, "schema", "1");
        if (s == KV_OK)
            s = kv_csv_writer_set_header(w, cols3, 3);
        for (int r = 0; r < 200 && s == KV_OK; r++)
            s = kv_csv_writer_add_row(w, "123456789,123456789,123456789");
        kv_alloc_fail_at(0, 0);
        if (s != KV_OK) {
            ck_assert_int_eq(s, KV_ERR_NOMEM);
            saw_nomem = 1;
        }
        kv_csv_writer_destroy(w);
        ck_assert_int_eq(kv_alloc_live(), live);
    }
    ck_assert(saw_nomem);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Sweep on a tiny model                                                    */

enum { TINY_L = 2, TINY_DIM = 32, TINY_H = 4, TINY_KVH = 2, TINY_HD = 8 };

static struct kv_model *tiny_model(int32_t max_len)
{
    struct kv_model_config c = kv_model_default_config();
    c.dim = TINY_DIM;
    c.hidden_dim = 64;
    c.n_layers = TINY_L;
    c.n_heads = TINY_H;
    c.n_kv_heads = TINY_KVH;
    c.vocab_size = 32;
    c.max_len = max_len;
    struct kv_model *m = NULL;
    ck_assert_int_eq(kv_model_create_synthetic(&m, &c, 7), KV_OK);
    return m;
}

struct collect {
    struct kv_sweep_row rows[64];
    int n;
    volatile sig_atomic_t *stop_after_first;
};

static void collect_row(void *user, const struct kv_sweep_row *row,
                        const struct kv_sweep_progress *p)
{
    struct collect *c = user;
    ck_assert_int_lt(c->n, 64);
    ck_assert_int_eq(p->rows_done, c->n + 1);
    c->rows[c->n++] = *row;
    if (c->stop_after_first != NULL)
        *c->stop_after_first = 1;
}

static void tiny_config(struct kv_sweep_config *cfg, const char *const *names, int n)
{
    memset(cfg, 0, sizeof(*cfg));
    for (int i = 0; i < n; i++) {
        struct kv_sweep_strategy *s = &cfg->strategies[i];
        /* a name or a preset ("quantized-int4"), then the test's window,
         * group and residual where the strategy has them */
        ck_assert_int_eq(kv_strategy_lookup(names[i], &s->ops, s->params, sizeof s->params),
                         KV_OK);
        const struct {
            const char *name;
            int32_t v;
        } set[] = {{"window", 24}, {"group", 4}, {"residual", 4}};
        for (size_t k = 0; k < sizeof set / sizeof set[0]; k++)
            if (kv_param_find(s->ops, set[k].name) >= 0)
                ck_assert_int_eq(kv_params_set(s->ops, s->params, set[k].name, set[k].v), KV_OK);
        snprintf(s->label, sizeof(s->label), "%s", names[i]);
    }
    cfg->n_strategies = n;
    cfg->seq_lens[0] = 16;
    cfg->seq_lens[1] = 32;
    cfg->seq_lens[2] = 64;
    cfg->n_lens = 3;
    cfg->reps = 5;
    cfg->warmup = 1;
    cfg->batch = 1;
    cfg->threads = 1;
    cfg->seed = 3;
    cfg->est_gflops = 10.0;
    cfg->est_gbps = 10.0;
}

START_TEST(sweep_rows_are_centred_and_counted)
{
    static const char *const names[] = {"none", "dynamic", "static", "sliding", "quantized-int4"};
    struct kv_sweep_config cfg;
    tiny_config(&cfg, names, 5);
    int64_t live = kv_alloc_live();
    struct kv_model *m = tiny_model(kv_sweep_capacity(&cfg));
    ck_assert_int_eq(kv_sweep_capacity(&cfg), 64 + 1 + 5);
    static struct collect c;
    memset(&c, 0, sizeof(c));
    cfg.on_row = collect_row;
    cfg.user = &c;
    int32_t interrupted = -1;
    ck_assert_int_eq(kv_sweep_run(&cfg, m, &interrupted), KV_OK);
    ck_assert_int_eq(interrupted, 0);
    ck_assert_int_eq(c.n, 5 * 3);
    const int64_t pair = 4 * TINY_HD * TINY_H * TINY_L; /* FLOPs per visible pair */
    for (int i = 0; i < c.n; i++) {
        const struct kv_sweep_row *r = &c.rows[i];
        int64_t T = cfg.seq_lens[r->len_index];
        const char *name = names[r->strategy];
        ck_assert_int_eq(r->seq_len, T);
        ck_assert_int_eq(r->reps, 5);
        ck_assert_int_gt(r->step_ns_median, 0);
        ck_assert_int_ge(r->step_ns_p95, r->step_ns_median);
        ck_assert_int_le(r->step_ns_min, r->step_ns_median);
        ck_assert_int_eq(r->attempts, 1); /* max_retries = 0: never re-measured */
        ck_assert(r->cpu_util > 0.0);
        /* the interval holds the median; a verdict comes with its reasons
         * (whether this machine was quiet is not for a test to assume) */
        ck_assert_int_le(r->step_ns_ci_lo, r->step_ns_median);
        ck_assert_int_ge(r->step_ns_ci_hi, r->step_ns_median);
        ck_assert_int_gt(r->step_ns_ci_lo, 0);
        ck_assert_int_eq(r->noisy, r->noise_reason[0] != '\0');
        if (strcmp(name, "none") == 0) {
            ck_assert_int_eq(r->seq_len_lo, T);
            ck_assert_int_eq(r->seq_len_hi, T);
            ck_assert_int_eq(r->attn_flops_step, pair * T * (T + 1) / 2);
            ck_assert_uint_eq(r->cache_bytes, 0);
        } else {
            /* R = 5 centred: T-2 .. T+2 */
            ck_assert_int_eq(r->seq_len_lo, T - 2);
            ck_assert_int_eq(r->seq_len_hi, T + 2);
            int64_t vis = strcmp(name, "sliding") == 0 && T > 24 ? 24 : T;
            ck_assert_int_eq(r->attn_flops_step, pair * vis);
        }
        if (strcmp(name, "static") == 0)
            ck_assert_uint_eq(r->cache_bytes,
                              (size_t)70 * TINY_L * 2 * TINY_KVH * TINY_HD * sizeof(float));
        /* attention bytes: the K/V attention read (f32: visible tokens, not
         * capacity); the rest of bytes_step is the weights */
        const size_t tok = (size_t)TINY_L * 2 * TINY_KVH * TINY_HD * sizeof(float);
        if (strcmp(name, "quantized-int4") == 0) {
            ck_assert_uint_gt(r->attn_bytes_step, 0);
            ck_assert_uint_le(r->attn_bytes_step, r->cache_bytes);
        } else {
            int64_t vis = strcmp(name, "sliding") == 0 && T > 24 ? 24 : T;
            ck_assert_uint_eq(r->attn_bytes_step, (size_t)vis * tok);
        }
        ck_assert_uint_eq(r->bytes_step - r->attn_bytes_step, kv_model_weight_bytes(&m->cfg));
        if (strcmp(name, "dynamic") == 0) {
            ck_assert_int_eq(r->acc_measured, 0); /* it is the reference */
            ck_assert(r->max_abs_err == 0.0 && r->token_match == 1.0);
        } else {
            ck_assert_int_eq(r->acc_measured, 1);
        }
        if (strcmp(name, "quantized-int4") == 0)
            ck_assert(r->rel_err > 0.0); /* lossy: must differ from the reference */
    }
    kv_model_destroy(m);
    ck_assert_int_eq(kv_alloc_live(), live);
}
END_TEST

START_TEST(sweep_interrupt_drops_the_row_in_flight)
{
    static const char *const names[] = {"dynamic", "quantized-int8"};
    struct kv_sweep_config cfg;
    tiny_config(&cfg, names, 2);
    int64_t live = kv_alloc_live();
    struct kv_model *m = tiny_model(kv_sweep_capacity(&cfg));
    static volatile sig_atomic_t stop;
    stop = 0;
    static struct collect c;
    memset(&c, 0, sizeof(c));
    c.stop_after_first = &stop;
    cfg.on_row = collect_row;
    cfg.user = &c;
    cfg.stop = &stop;
    int32_t interrupted = 0;
    ck_assert_int_eq(kv_sweep_run(&cfg, m, &interrupted), KV_OK);
    ck_assert_int_eq(interrupted, 1);
    ck_assert_int_eq(c.n, 1); /* the second row was in flight: dropped */
    kv_model_destroy(m);
    ck_assert_int_eq(kv_alloc_live(), live);
}
END_TEST

/* NaN logits (a NaN planted in a weight of the in-memory model: loaded
 * checkpoints are refused before this) must never read as "exact": the
 * accuracy columns compare with !(d <= max), so a NaN difference is
 * recorded, and NaN logits agree on no token. */
START_TEST(sweep_nan_is_a_difference)
{
    static const char *const names[] = {"dynamic", "static"};
    struct kv_sweep_config cfg;
    tiny_config(&cfg, names, 2);
    cfg.n_lens = 1;
    struct kv_model *m = tiny_model(kv_sweep_capacity(&cfg));
    m->w.rms_final[0] = NAN;
    static struct collect c;
    memset(&c, 0, sizeof(c));
    cfg.on_row = collect_row;
    cfg.user = &c;
    int32_t interrupted = -1;
    ck_assert_int_eq(kv_sweep_run(&cfg, m, &interrupted), KV_OK);
    ck_assert_int_eq(c.n, 2);
    for (int i = 0; i < c.n; i++) {
        const struct kv_sweep_row *r = &c.rows[i];
        if (r->acc_measured == 0)
            continue; /* the reference itself */
        ck_assert_msg(!(r->max_abs_err <= 0.0), "max_abs_err %g for NaN logits", r->max_abs_err);
        ck_assert_msg(!(r->rel_err <= 0.0), "rel_err %g for NaN logits", r->rel_err);
        ck_assert_msg(r->token_match == 0.0, "token_match %g for NaN logits", r->token_match);
    }
    kv_model_destroy(m);
}
END_TEST

START_TEST(sweep_rejects_bad_configs)
{
    static const char *const names[] = {"dynamic"};
    struct kv_sweep_config cfg;
    tiny_config(&cfg, names, 1);
    struct kv_model *m = tiny_model(kv_sweep_capacity(&cfg));
    const char *why = NULL;
    ck_assert_int_eq(kv_sweep_check(&cfg, m, &why), KV_OK);

    struct kv_sweep_config bad = cfg;
    bad.seq_lens[1] = 16; /* not ascending */
    ck_assert_int_eq(kv_sweep_check(&bad, m, &why), KV_ERR_INVALID);
    ck_assert_ptr_nonnull(why);
    bad = cfg;
    bad.seq_lens[0] = 3; /* 3 <= warmup + (reps-1)/2 = 3 */
    ck_assert_int_eq(kv_sweep_check(&bad, m, &why), KV_ERR_INVALID);
    bad = cfg;
    bad.seq_lens[2] = 1000; /* beyond the model's max_len */
    ck_assert_int_eq(kv_sweep_check(&bad, m, &why), KV_ERR_INVALID);
    bad = cfg;
    bad.strategies[1] = bad.strategies[0]; /* listed twice */
    bad.n_strategies = 2;
    ck_assert_int_eq(kv_sweep_check(&bad, m, &why), KV_ERR_INVALID);
    int32_t interrupted = 0;
    ck_assert_int_eq(kv_sweep_run(&bad, m, &interrupted), KV_ERR_INVALID);
    /* nothing scheduled: only `none`, every T past none_max */
    static const char *const only_none[] = {"none"};
    tiny_config(&bad, only_none, 1);
    bad.none_max = bad.seq_lens[0] - 1;
    ck_assert_int_eq(kv_sweep_check(&bad, m, &why), KV_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(why, "no row"));
    bad.none_max = bad.seq_lens[0]; /* one row: fine */
    ck_assert_int_eq(kv_sweep_check(&bad, m, &why), KV_OK);
    /* noise thresholds: numbers >= 0 */
    struct kv_noise_limits nl;
    kv_noise_limits_default(&nl);
    bad = cfg;
    bad.noise = &nl;
    ck_assert_int_eq(kv_sweep_check(&bad, m, &why), KV_OK);
    nl.max_other_cores = NAN;
    ck_assert_int_eq(kv_sweep_check(&bad, m, &why), KV_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(why, "noise"));
    kv_noise_limits_default(&nl);
    nl.min_cpu_util = -0.1;
    ck_assert_int_eq(kv_sweep_check(&bad, m, &why), KV_ERR_INVALID);
    kv_model_destroy(m);
}
END_TEST

/* What a run with retries reported: its rows and its on_retry calls. */
struct retried_run {
    struct collect *c;
    int32_t n, bad_attempt, hidden, reasons_ok;
};

static void count_retry(void *user, const struct kv_sweep_progress *p, int32_t attempt,
                        const char *why)
{
    struct retried_run *r = user;
    r->n++;
    r->bad_attempt += attempt < 2 || attempt > 7;
    r->hidden += p->strategy < 0;
    r->reasons_ok += strstr(why, "p95/median") != NULL;
}

static void collect_retried_row(void *user, const struct kv_sweep_row *row,
                                const struct kv_sweep_progress *p)
{
    collect_row(((struct retried_run *)user)->c, row, p);
}

/* A machine that is always "busy" (a threshold no run meets: a p95/median
 * spread of at most 0, judged from KV_NOISE_SPREAD_MIN_STEPS steps on; a
 * low cpu_util alone no longer counts on a machine /proc/stat shows
 * otherwise idle, so it cannot serve here) makes every attempt noisy, deterministically: each row is measured
 * again up to max_retries times, then reported with its last attempt,
 * flagged, with the reason; the run's budget (KV_SWEEP_RETRY_BUDGET) bounds
 * the retries of the whole run, and none is spent on the hidden reference,
 * whose times are never reported. Looped: 0, max_retries 6, the budget ends
 * the retries (6 + 6 + 4); 1, max_retries 2, the busy streak does: after
 * KV_SWEEP_BUSY_ROWS rows stayed noisy, no row is retried (3 x 2, where
 * without the streak 6 x 2 = 12 would have been spent). */
START_TEST(sweep_noisy_rows_are_retried_then_flagged)
{
    static const char *const names[] = {"static", "quantized-int8"};
    struct kv_sweep_config cfg;
    tiny_config(&cfg, names, 2); /* 2 x 3 rows; the reference is the hidden one */
    cfg.max_retries = _i == 0 ? 6 : 2;
    struct kv_noise_limits nl;
    kv_noise_limits_default(&nl);
    nl.max_spread = 0.0;
    cfg.reps = KV_NOISE_SPREAD_MIN_STEPS + 1; /* the spread is judged; T 16 still fits */
    cfg.noise = &nl;
    struct kv_model *m = tiny_model(kv_sweep_capacity(&cfg));
    static struct collect c;
    memset(&c, 0, sizeof(c));
    struct retried_run u = {.c = &c};
    cfg.on_row = collect_retried_row;
    cfg.on_retry = count_retry;
    cfg.user = &u;
    int32_t interrupted = -1;
    ck_assert_int_eq(kv_sweep_run(&cfg, m, &interrupted), KV_OK);
    ck_assert_int_eq(c.n, 6);
    int32_t retried = 0;
    for (int i = 0; i < c.n; i++) {
        const struct kv_sweep_row *r = &c.rows[i];
        ck_assert_int_eq(r->noisy, 1);
        ck_assert_msg(strstr(r->noise_reason, "p95/median") != NULL, "%s",
                      r->noise_reason);
        ck_assert_int_ge(r->attempts, 1);
        ck_assert_int_le(r->attempts, cfg.max_retries + 1);
        ck_assert_int_le(r->step_ns_ci_lo, r->step_ns_median);
        ck_assert_int_ge(r->step_ns_ci_hi, r->step_ns_median);
        retried += r->attempts - 1;
    }
    const int32_t want = _i == 0 ? KV_SWEEP_RETRY_BUDGET : KV_SWEEP_BUSY_ROWS * cfg.max_retries;
    ck_assert_int_lt(want, 6 * cfg.max_retries); /* a limit binds */
    ck_assert_int_eq(retried, want);
    ck_assert_int_eq(c.rows[0].attempts, cfg.max_retries + 1); /* first come, first served */
    for (int i = KV_SWEEP_BUSY_ROWS; i < c.n; i++)
        ck_assert_int_eq(c.rows[i].attempts, 1);
    ck_assert_int_eq(u.n, want); /* each retry announced */
    ck_assert_int_eq(u.bad_attempt, 0);
    ck_assert_int_eq(u.hidden, 0);
    ck_assert_int_eq(u.reasons_ok, u.n);
    kv_model_destroy(m);
}
END_TEST

/* The first row's ETA (nothing measured yet: the plan's own prediction). */
static void first_eta(void *user, const struct kv_sweep_progress *p)
{
    int64_t *eta = user;
    if (*eta < 0)
        *eta = p->eta_ns;
}

/*
 * --bound: the plan counts the DRAM read test beside every row (its passes
 * before the attempt and after its timed steps) at the run's bandwidth
 * estimate, so the first ETA grows by exactly that. Without it, a sweep
 * whose rows each spend about half a second reading the probe's array
 * promised a fraction of its real time.
 */
START_TEST(sweep_eta_counts_the_bound_probe)
{
    static const char *const names[] = {"dynamic"};
    struct kv_sweep_config cfg;
    tiny_config(&cfg, names, 1);
    cfg.n_lens = 1;
    struct kv_model *m = tiny_model(kv_sweep_capacity(&cfg));
    int64_t eta[2];
    struct kv_read_probe probe;
    struct kv_roofline_params rp;
    kv_roofline_defaults(&rp, 1);
    rp.read_bytes = (size_t)4 << 20;
    ck_assert_int_eq(kv_read_probe_open(&probe, &rp, 0), KV_OK);
    for (int with = 0; with < 2; with++) {
        eta[with] = -1;
        cfg.probe = with ? &probe : NULL;
        cfg.probe_passes = with ? 3 : 0;
        cfg.on_row_start = first_eta;
        cfg.user = &eta[with];
        int32_t interrupted = -1;
        ck_assert_int_eq(kv_sweep_run(&cfg, m, &interrupted), KV_OK);
        ck_assert_int_ge(eta[with], 0);
    }
    const double pass = (double)probe.n * sizeof(float) * (probe.sweeps > 0 ? probe.sweeps : 1);
    /* before and after: a warm-up pass and 3 timed ones; ns = bytes / (1e9 B/s) */
    const double want = 2.0 * (3 + 1) * pass / cfg.est_gbps;
    const double got = (double)(eta[1] - eta[0]);
    ck_assert_msg(fabs(got - want) <= 0.05 * want, "ETA grew by %.0f ns, the probe's %.0f",
                  got, want);
    kv_read_probe_close(&probe);
    kv_model_destroy(m);
}
END_TEST

/* The text rule (strategy.h) before any work: a label that is not one -
 * a quote, an escape byte, a comma, a space - is refused by kv_sweep_check,
 * so a sweep never writes what compare and merge then refuse; the repeat
 * checks every list-taking command shares. */
START_TEST(sweep_refuses_bad_labels_and_repeats)
{
    static const char *const names[] = {"dynamic", "quantized-int8"};
    struct kv_sweep_config cfg;
    tiny_config(&cfg, names, 2);
    struct kv_model *m = tiny_model(kv_sweep_capacity(&cfg));
    const char *why = NULL;
    ck_assert_int_eq(kv_sweep_check(&cfg, m, &why), KV_OK);
    static const char *const bad_labels[] = {"q\"x", "e\x1b[31m", "a,b", "a b", "", "x;rm",
                                             "$(id)", "`id`", "back\\slash"};
    for (size_t k = 0; k < sizeof bad_labels / sizeof bad_labels[0]; k++) {
        struct kv_sweep_config bad = cfg;
        snprintf(bad.strategies[1].label, sizeof bad.strategies[1].label, "%s", bad_labels[k]);
        ck_assert_int_eq(kv_sweep_check(&bad, m, &why), KV_ERR_INVALID);
        ck_assert_ptr_nonnull(why);
        ck_assert_msg(strstr(why, "label") != NULL && strpbrk(why, "\x1b\n\"") == NULL,
                      "%zu: %s", k, why);
        int32_t interrupted = 0;
        ck_assert_int_eq(kv_sweep_run(&bad, m, &interrupted), KV_ERR_INVALID);
    }
    struct kv_sweep_config ok = cfg;
    snprintf(ok.strategies[1].label, sizeof ok.strategies[1].label, "int8@12.5%%");
    ck_assert_int_eq(kv_sweep_check(&ok, m, &why), KV_OK);
    /* repeats */
    ck_assert(kv_sweep_same_config(cfg.strategies[0].ops, cfg.strategies[0].params,
                                   cfg.strategies[0].ops, cfg.strategies[0].params));
    ck_assert(!kv_sweep_same_config(cfg.strategies[0].ops, cfg.strategies[0].params,
                                    cfg.strategies[1].ops, cfg.strategies[1].params));
    struct kv_sweep_strategy q4 = cfg.strategies[1];
    ck_assert_int_eq(kv_params_set(q4.ops, q4.params, "bits", 4), KV_OK);
    ck_assert(!kv_sweep_same_config(q4.ops, q4.params, cfg.strategies[1].ops,
                                    cfg.strategies[1].params));
    static const int32_t b1[] = {1, 2, 4, 8}, b2[] = {4, 2, 4};
    int32_t first = -1;
    ck_assert_int_eq(kv_sweep_list_repeat(b1, 4, &first), -1);
    ck_assert_int_eq(kv_sweep_list_repeat(b2, 3, &first), 2);
    ck_assert_int_eq(first, 0);
    kv_model_destroy(m);
}
END_TEST

/*
 * The data-loss rule of `kvlab sweep` (cmd_sweep.c), in process: with every
 * allocation failed in turn (alone, and with all after it), a run either
 * succeeds or fails; a failed run leaves the previous --out file byte for
 * byte - when it failed in its model, its setup or its first row - or
 * replaces it with a complete file marked partial=1 that holds the rows it
 * finished, and never leaves a temporary file. A file is replaced only by
 * one with at least one finished row.
 */
START_TEST(sweep_failed_run_keeps_previous_file)
{
    char dir[] = "/tmp/kvlab_check_sweep_keep.XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char out[128], buf[8192];
    snprintf(out, sizeof out, "%s/results.csv", dir);
    char *argv[] = {"sweep", "--layers", "1", "--dim", "16", "--heads", "2", "--kv-heads", "2",
                    "--hidden", "24", "--vocab", "64", "--seq-lens", "16,32", "--reps", "1",
                    "--warmup", "0", "--threads", "1", "--strategies", "dynamic,static",
                    "--no-roofline", "--quiet", "--out", out, NULL};
    int argc = (int)(sizeof argv / sizeof argv[0]) - 1;
    ck_assert_ptr_nonnull(freopen("/dev/null", "w", stderr)); /* one line per failure */
    int kept = 0, partial = 0;
    for (int sticky = 0; sticky < 2; sticky++) {
    int ok = 0;
    for (int64_t k = 1; k <= 600 && !ok; k++) {
        FILE *f = fopen(out, "w");
        fputs("previous results\n", f);
        fclose(f);
        kv_alloc_fail_at(k, sticky);
        int rc = kv_cmd_main(&kv_cmd_sweep_def, argc, argv);
        kv_alloc_fail_at(0, 0);
        ck_assert_int_ge(slurp(out, buf, sizeof buf), 0);
        if (rc == 0) {
            ok = 1;
            ck_assert_ptr_nonnull(strstr(buf, "\ndynamic,1,16,"));
        } else if (strcmp(buf, "previous results\n") == 0) {
            ck_assert_int_eq(rc, 1);
            kept++;
        } else {
            ck_assert_int_eq(rc, 1);
            ck_assert_msg(strstr(buf, "\n# partial=1\n") != NULL &&
                              (strstr(buf, "\ndynamic,1,16,") || strstr(buf, "\nstatic,1,16,")),
                          "allocation %lld failed: the previous file became:\n%.300s",
                          (long long)k, buf);
            partial++;
        }
        char cmd[256];
        snprintf(cmd, sizeof cmd, "ls '%s' | grep -c '\\.tmp\\.'", dir);
        FILE *p = popen(cmd, "r");
        int n = -1;
        ck_assert_int_eq(fscanf(p, "%d", &n), 1);
        pclose(p);
        ck_assert_int_eq(n, 0);
    }
    ck_assert(ok);
    }
    ck_assert_int_gt(kept, 10);
    ck_assert_int_gt(partial, 0);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(sweep_alloc_failures_clean_up)
{
    static const char *const names[] = {"none", "dynamic", "static"};
    struct kv_sweep_config cfg;
    tiny_config(&cfg, names, 3);
    cfg.n_lens = 2;
    struct kv_model *m = tiny_model(kv_sweep_capacity(&cfg));
    int64_t live = kv_alloc_live();
    int saw_nomem = 0;
    for (int64_t k = 1; k <= 40; k++) {
        kv_alloc_fail_at(k, 1);
        int32_t interrupted = 0;
        enum kv_status s = kv_sweep_run(&cfg, m, &interrupted);
        kv_alloc_fail_at(0, 0);
        ck_assert(s == KV_OK || s == KV_ERR_NOMEM);
        saw_nomem |= s == KV_ERR_NOMEM;
        ck_assert_int_eq(kv_alloc_live(), live);
    }
    ck_assert(saw_nomem);
    kv_model_destroy(m);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Roofline                                                                 */

START_TEST(roofline_small_run_and_bad_params)
{
    struct kv_roofline_params p;
    kv_roofline_defaults(&p, 1);
    p.read_bytes = p.copy_bytes = (size_t)1 << 20;
    p.read_l3_bytes = (size_t)1 << 18;
    p.gemm_n = 64;
    p.reps = 3;
    struct kv_roofline r;
    ck_assert_int_eq(kv_roofline_measure(&r, &p), KV_OK);
    ck_assert(r.read_gbps > 0 && r.read_l3_gbps > 0 && r.copy_gbps > 0 && r.sgemm_gflops > 0);
    struct kv_roofline_params bad = p;
    bad.read_l3_bytes = 0;
    ck_assert_int_eq(kv_roofline_measure(&r, &bad), KV_ERR_INVALID);
    ck_assert(isnan(r.read_l3_gbps));
    bad = p;
    bad.n_threads = 0;
    ck_assert_int_eq(kv_roofline_measure(&r, &bad), KV_ERR_INVALID);
    ck_assert(isnan(r.read_gbps));
    bad = p;
    bad.reps = 0;
    ck_assert_int_eq(kv_roofline_measure(&r, &bad), KV_ERR_INVALID);
    /* a set stop flag ends it early with NaN figures */
    static volatile sig_atomic_t stop = 1;
    bad = p;
    bad.stop = &stop;
    ck_assert_int_eq(kv_roofline_measure(&r, &bad), KV_OK);
    ck_assert(isnan(r.copy_gbps) && isnan(r.sgemm_gflops));
}
END_TEST

/* ------------------------------------------------------------------------ */

static Suite *sweep_suite(void)
{
    Suite *s = suite_create("sweep");
    TCase *w = tcase_create("csv_write");
    tcase_add_test(w, csv_write_exact_layout);
    tcase_add_test(w, csv_write_failure_leaves_previous_file);
    tcase_add_test(w, csv_write_alloc_failures_clean_up);
    suite_add_tcase(s, w);
    TCase *sw = tcase_create("sweep");
    tcase_set_timeout(sw, 120);
    tcase_add_test(sw, sweep_rows_are_centred_and_counted);
    tcase_add_test(sw, sweep_interrupt_drops_the_row_in_flight);
    tcase_add_test(sw, sweep_rejects_bad_configs);
    tcase_add_test(sw, sweep_refuses_bad_labels_and_repeats);
    tcase_add_test(sw, sweep_nan_is_a_difference);
    tcase_add_loop_test(sw, sweep_noisy_rows_are_retried_then_flagged, 0, 2);
    tcase_add_test(sw, sweep_alloc_failures_clean_up);
    tcase_add_test(sw, sweep_failed_run_keeps_previous_file);
    tcase_add_test(sw, sweep_eta_counts_the_bound_probe);
    suite_add_tcase(s, sw);
    TCase *rl = tcase_create("roofline");
    tcase_set_timeout(rl, 60);
    tcase_add_test(rl, roofline_small_run_and_bad_params);
    suite_add_tcase(s, rl);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(sweep_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed;
}
