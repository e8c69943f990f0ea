/*
 * merge.c - join sweep CSVs (contract in merge.h).
 *
 * Order of work: validate every input and refuse what cannot be merged
 * (before anything is built: a cut file, a hostile label), check the shard
 * sets for gaps and each shard's rows against its plan, join all rows
 * on compare's key (one sort of every row of every file, which also finds
 * the repeated keys), order the kept rows as the sweep writes them
 * (strategies as listed, then T), then build the output: columns, rows with
 * their attribution, metadata common and per input.
 */
#include "merge.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../measure/shard.h"

/* ------------------------------------------------------------------------ */
/* Small helpers                                                            */

static const char *meta(const struct kv_csv *c, const char *key)
{
    const struct kv_csv_meta *m = kv_csv_meta_find(c, key);
    return m != NULL ? m->value : NULL;
}

static int is_partial(const struct kv_csv *c)
{
    const char *v = meta(c, "partial");
    return v != NULL && strcmp(v, "0") != 0;
}

static double meta_num(const struct kv_csv *c, const char *key)
{
    double v;
    const char *s = meta(c, key);
    return s != NULL && kv_csv_parse_double(s, &v) == 0 ? v : NAN;
}

static void name_of(char *buf, size_t n, const struct kv_csv *c)
{
    kv_csv_excerpt(buf, n, c->name, 200);
}

/* A metadata value as a cell: no comma, quote or control byte. */
static void cell_safe(char *dst, size_t n, const char *s)
{
    size_t w = 0;
    for (; s != NULL && *s && w + 1 < n; s++) {
        unsigned char ch = (unsigned char)*s;
        dst[w++] = ch == ',' ? ';' : ch == '"' ? '\'' : ch < 0x20 || ch == 0x7f ? ' ' : *s;
    }
    dst[w] = '\0';
}

/* ------------------------------------------------------------------------ */
/* Checks on the inputs                                                     */

/* Identical column lists. */
static int same_columns(const struct kv_csv *a, const struct kv_csv *b)
{
    if (a->n_cols != b->n_cols)
        return 0;
    for (int32_t j = 0; j < a->n_cols; j++)
        if (strcmp(a->cols[j], b->cols[j]) != 0)
            return 0;
    return 1;
}

static enum kv_status check_inputs(const struct kv_csv *const *in, int32_t n,
                                   const struct kv_merge_opts *o,
                                   int32_t (*col)[KV_SWEEP_N_REQUIRED], char *err,
                                   size_t err_len)
{
    char a[256], b[256];
    for (int32_t k = 0; k < n; k++) {
        const struct kv_csv *c = in[k];
        enum kv_status st = kv_sweep_validate(c, col[k], err, err_len);
        if (st != KV_OK)
            return st;
        if (c->unterminated > 0) {
            kv_csv_error(err, err_len, c->name, c->unterminated,
                         "the last line has no newline: the file was cut short (a CSV kvlab "
                         "writes always ends with one); copy it again, or rerun it");
            return KV_ERR_FORMAT;
        }
        if (meta(c, "merged_from") != NULL || kv_csv_col(c, "source") >= 0) {
            kv_csv_error(err, err_len, c->name, c->header_line,
                         "already a merged file; merge the files it was made from");
            return KV_ERR_FORMAT;
        }
        if (is_partial(c) && !o->allow_partial) {
            kv_csv_error(err, err_len, c->name, kv_csv_meta_find(c, "partial")->line,
                         "marked partial (# partial=1: the run was stopped after %lld "
                         "rows); rerun it, or pass --allow-partial",
                         (long long)c->n_rows);
            return KV_ERR_FORMAT;
        }
        if (k == 0 || o->allow_mixed)
            continue;
        static const char *const same_keys[] = {"schema", "commit"};
        for (int q = 0; q < 2; q++) {
            const char *v0 = meta(in[0], same_keys[q]), *v = meta(c, same_keys[q]);
            if (strcmp(v0 ? v0 : "", v ? v : "") != 0) {
                char x0[64], x[64];
                name_of(a, sizeof a, in[0]);
                kv_csv_excerpt(x0, sizeof x0, v0 ? v0 : "(none)", 40);
                kv_csv_excerpt(x, sizeof x, v ? v : "(none)", 40);
                kv_csv_error(err, err_len, c->name, 0,
                             "%s %s, but %s is %s %s; pass --allow-mixed to merge them",
                             same_keys[q], x, a, same_keys[q], x0);
                return KV_ERR_FORMAT;
            }
        }
        if (!same_columns(in[0], c)) {
            name_of(b, sizeof b, in[0]);
            kv_csv_error(err, err_len, c->name, c->header_line,
                         "its columns differ from those of %s; pass --allow-mixed to "
                         "merge their union", b);
            return KV_ERR_FORMAT;
        }
    }
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* Shard sets                                                               */

struct group {
    const char *plan;      /* the plan id, "" when a shard file has none */
    int32_t n_shards;
    int32_t first;         /* its first input */
    uint8_t have[KV_PLAN_MAX_ROWS + 1];
};

/*
 * Reads every input's `# shard=I/N` and groups the shards by plan; refuses
 * a malformed shard line, two sizes for one plan, and (unless
 * allow_partial) a missing shard or a complete shard whose row count is not
 * its plan's. The gaps allowed go to res->missing.
 */
static enum kv_status check_shards(const struct kv_csv *const *in, int32_t n,
                                   const struct kv_merge_opts *o, struct kv_merge_result *res,
                                   char *err, size_t err_len)
{
    struct group *g = kv_alloc((size_t)n * sizeof *g);
    if (g == NULL)
        return KV_ERR_NOMEM;
    int32_t n_groups = 0;
    enum kv_status st = KV_OK;
    for (int32_t k = 0; k < n && st == KV_OK; k++) {
        const struct kv_csv *c = in[k];
        const char *sv = meta(c, "shard");
        res->src[k].shard = res->src[k].n_shards = 0;
        if (sv == NULL)
            continue;
        int32_t i, N;
        if (kv_shard_parse(sv, &i, &N) != 0) {
            char ex[48];
            kv_csv_excerpt(ex, sizeof ex, sv, 32);
            kv_csv_error(err, err_len, c->name, kv_csv_meta_find(c, "shard")->line,
                         "shard '%s' is not I/N", ex);
            st = KV_ERR_FORMAT;
            break;
        }
        res->src[k].shard = i;
        res->src[k].n_shards = N;
        const char *plan = meta(c, "plan");
        plan = plan ? plan : "";
        int32_t q = 0;
        while (q < n_groups && strcmp(g[q].plan, plan) != 0)
            q++;
        if (q == n_groups) {
            memset(&g[q], 0, sizeof g[q]);
            g[q].plan = plan;
            g[q].n_shards = N;
            g[q].first = k;
            n_groups++;
        } else if (g[q].n_shards != N) {
            char first[256];
            name_of(first, sizeof first, in[g[q].first]);
            kv_csv_error(err, err_len, c->name, kv_csv_meta_find(c, "shard")->line,
                         "shard %d/%d, but %s of the same plan is one of %d shards", i, N,
                         first, g[q].n_shards);
            st = KV_ERR_FORMAT;
            break;
        }
        g[q].have[i] = 1;
        const char *rows = meta(c, "shard_rows");
        int64_t want;
        if (!is_partial(c) && !o->allow_partial && rows != NULL &&
            kv_csv_parse_int64(rows, &want) == 0 && want != c->n_rows) {
            kv_csv_error(err, err_len, c->name, c->header_line,
                         "%lld rows, but shard %d/%d of its plan has %lld",
                         (long long)c->n_rows, i, N, (long long)want);
            st = KV_ERR_FORMAT;
        }
    }
    res->missing[0] = '\0';
    for (int32_t q = 0; q < n_groups && st == KV_OK; q++) {
        char list[KV_CSV_ERR_LEN / 2];
        size_t w = 0;
        int32_t n_missing = 0;
        list[0] = '\0';
        for (int32_t i = 1; i <= g[q].n_shards; i++) {
            if (g[q].have[i])
                continue;
            if (w + 16 < sizeof list)
                w += (size_t)snprintf(list + w, sizeof list - w, "%s%d", n_missing ? ", " : "", i);
            else if (w + 4 < sizeof list && list[w - 1] != '.')
                w += (size_t)snprintf(list + w, sizeof list - w, "...");
            n_missing++;
        }
        if (n_missing == 0)
            continue;
        char ex[40];
        kv_csv_excerpt(ex, sizeof ex, g[q].plan[0] ? g[q].plan : "(none)", 24);
        if (!o->allow_partial) {
            kv_csv_error(err, err_len, "kvlab merge", 0,
                         "missing shard%s %s of %d (plan %s): no file given for %s; pass "
                         "--allow-partial to merge without %s",
                         n_missing > 1 ? "s" : "", list, g[q].n_shards, ex,
                         n_missing > 1 ? "them" : "it", n_missing > 1 ? "them" : "it");
            st = KV_ERR_FORMAT;
        } else {
            size_t m = strlen(res->missing);
            snprintf(res->missing + m, sizeof res->missing - m, "%sshard%s %s of %d (plan %s)",
                     m ? "; " : "", n_missing > 1 ? "s" : "", list, g[q].n_shards, ex);
        }
    }
    kv_free(g);
    return st;
}

/* ------------------------------------------------------------------------ */
/* Shards against their plan (shard.h: what the plan id is made of)         */

/* A whole decimal (base 10) or hexadecimal (base 16) number. */
static int parse_u64(const char *s, int base, uint64_t *out)
{
    if (s == NULL || s[0] == '\0' || s[0] == '-' || s[0] == '+' || s[0] == ' ')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, base);
    if (*end != '\0' || errno != 0)
        return -1;
    *out = v;
    return 0;
}

/* The sum of kv_plan_row_hash over the rows of file c (shard `shard`). */
static enum kv_status rows_digest(const struct kv_csv *c, const int32_t col[KV_SWEEP_N_REQUIRED],
                                  int32_t shard, uint64_t *digest)
{
    struct kv_sweep_key *k = kv_alloc((size_t)c->n_rows * sizeof *k);
    if (k == NULL)
        return KV_ERR_NOMEM;
    int32_t ext[2];
    const int has_ext = kv_sweep_ext_cols(c, ext);
    kv_sweep_key_fill(k, c, col, has_ext ? ext : NULL);
    const int32_t jl = kv_csv_col(c, "label");
    uint64_t d = 0;
    for (int64_t r = 0; r < c->n_rows; r++) {
        struct kv_plan_key pk = {.strategy = k[r].strategy, .dtype = k[r].ext[0],
                                 .params = k[r].ext[1],
                                 .label = jl >= 0 ? kv_csv_cell(c, r, jl) : NULL,
                                 .shard = shard};
        memcpy(pk.v, k[r].v, sizeof pk.v);
        d += kv_plan_row_hash(&pk);
    }
    kv_free(k);
    *digest = d;
    return KV_OK;
}

/* The configuration part of the plan id, from file c (its first row for the
 * reps and mlp columns); -1 naming the missing piece in *what. */
static int plan_config(const struct kv_csv *c, const int32_t col[KV_SWEEP_N_REQUIRED],
                       int32_t n_shards, struct kv_plan_config_key *pc, const char **what)
{
    int64_t v;
    memset(pc, 0, sizeof *pc);
    pc->n_shards = n_shards;
    if (parse_u64(meta(c, "seed"), 10, &pc->seed) != 0)
        return *what = "# seed=", -1;
    if (meta(c, "warmup") == NULL || kv_csv_parse_int64(meta(c, "warmup"), &v) != 0)
        return *what = "# warmup=", -1;
    pc->warmup = v;
    const char *mode = meta(c, "reps_mode");
    if (mode == NULL || (strcmp(mode, "fixed") != 0 && strcmp(mode, "auto") != 0))
        return *what = "# reps_mode=", -1;
    if (strcmp(mode, "fixed") == 0 &&
        (c->n_rows < 1 || kv_csv_parse_int64(kv_csv_cell(c, 0, col[KV_SCHEMA_COL_REPS]),
                                             &pc->reps) != 0))
        return *what = "reps", -1;
    const int32_t jm = kv_csv_col(c, "mlp");
    if (jm < 0 || c->n_rows < 1 || kv_csv_parse_int64(kv_csv_cell(c, 0, jm), &pc->mlp) != 0)
        return *what = "mlp", -1;
    if (kv_plan_rates_parse(meta(c, "plan_rates"), &pc->rates) != 0)
        return *what = "# plan_rates=", -1;
    return 0;
}

/*
 * Each shard holds exactly the rows its plan assigns it. A shard file with
 * `# shard_digest=` is checked alone (naming it); a complete set of shards
 * of one plan (every shard once, none partial) is checked against the plan
 * id, which the rows of all shards and their metadata determine (shard.h).
 */
static enum kv_status check_plans(const struct kv_csv *const *in, int32_t n,
                                  int32_t (*col)[KV_SWEEP_N_REQUIRED],
                                  const struct kv_merge_result *res, char *err, size_t err_len)
{
    enum kv_status st = KV_OK;
    for (int32_t k = 0; k < n && st == KV_OK; k++) {
        const struct kv_csv *c = in[k];
        const char *dv = meta(c, "shard_digest");
        uint64_t want, got;
        if (res->src[k].n_shards == 0 || dv == NULL || is_partial(c))
            continue;
        if (parse_u64(dv, 16, &want) != 0) {
            char ex[48];
            kv_csv_excerpt(ex, sizeof ex, dv, 32);
            kv_csv_error(err, err_len, c->name, kv_csv_meta_find(c, "shard_digest")->line,
                         "shard_digest '%s' is not a hexadecimal number", ex);
            return KV_ERR_FORMAT;
        }
        st = rows_digest(c, col[k], res->src[k].shard, &got);
        if (st == KV_OK && got != want) {
            kv_csv_error(err, err_len, c->name, c->header_line,
                         "its %lld rows are not the ones shard %d/%d of its plan assigns it "
                         "(a row removed, added, moved or with an edited configuration "
                         "column)", (long long)c->n_rows, res->src[k].shard,
                         res->src[k].n_shards);
            return KV_ERR_FORMAT;
        }
    }
    /* complete sets: one file per shard number, the first given */
    uint8_t *done = kv_alloc((size_t)n);
    int32_t *file_of = kv_alloc((KV_PLAN_MAX_ROWS + 1) * sizeof *file_of);
    if (done == NULL || file_of == NULL) {
        kv_free(done);
        kv_free(file_of);
        return KV_ERR_NOMEM;
    }
    memset(done, 0, (size_t)n);
    for (int32_t k = 0; k < n && st == KV_OK; k++) {
        if (done[k] || res->src[k].n_shards == 0)
            continue;
        const char *plan = meta(in[k], "plan");
        const int32_t N = res->src[k].n_shards;
        int complete = plan != NULL;
        for (int32_t i = 0; i <= N; i++)
            file_of[i] = -1;
        for (int32_t q = k; q < n; q++) {
            const char *pq = meta(in[q], "plan");
            if (res->src[q].n_shards == 0 || strcmp(pq ? pq : "", plan ? plan : "") != 0)
                continue;
            done[q] = 1;
            complete &= !is_partial(in[q]);
            if (file_of[res->src[q].shard] < 0)
                file_of[res->src[q].shard] = q;
        }
        for (int32_t i = 1; i <= N; i++)
            complete &= file_of[i] >= 0;
        if (!complete)
            continue; /* a gap or a partial shard: refused or allowed elsewhere */
        uint64_t digest = 0, id;
        int64_t rows = 0;
        for (int32_t i = 1; i <= N && st == KV_OK; i++) {
            uint64_t d;
            st = rows_digest(in[file_of[i]], col[file_of[i]], i, &d);
            digest += d;
            rows += in[file_of[i]]->n_rows;
        }
        if (st != KV_OK)
            break;
        struct kv_plan_config_key pc;
        const char *what = NULL;
        char ex[40];
        kv_csv_excerpt(ex, sizeof ex, plan, 24);
        if (plan_config(in[k], col[k], N, &pc, &what) != 0) {
            kv_csv_error(err, err_len, in[k]->name, 0, "cannot check its rows against plan "
                         "%s: no valid %s", ex, what);
            st = KV_ERR_FORMAT;
            break;
        }
        pc.n_rows = rows;
        if (parse_u64(plan, 16, &id) != 0 || kv_plan_id_of(&pc, digest) != id) {
            kv_csv_error(err, err_len, in[k]->name, 0,
                         "the %d shards of plan %s do not hold the rows it assigns them (a "
                         "row removed, added, moved between shards or with an edited "
                         "configuration column), or a different kvlab planned them", N, ex);
            st = KV_ERR_FORMAT;
        }
    }
    kv_free(done);
    kv_free(file_of);
    return st;
}

/* ------------------------------------------------------------------------ */
/* Joining rows                                                             */

struct entry {
    struct kv_sweep_key key;
    int32_t src;
    int32_t rank;   /* position of the row's strategy label in the sweeps' lists */
    int keep;
};

static int entry_by_key(const void *pa, const void *pb)
{
    const struct entry *a = pa, *b = pb;
    int c = kv_sweep_key_cmp(&a->key, &b->key);
    if (c != 0)
        return c;
    if (a->src != b->src)
        return a->src < b->src ? -1 : 1;
    return (a->key.row > b->key.row) - (a->key.row < b->key.row);
}

static int entry_by_rank(const void *pa, const void *pb)
{
    const struct entry *a = pa, *b = pb;
    if (a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    return entry_by_key(pa, pb);
}

/*
 * The labels of every input's `# strategies=` list, in first-seen order;
 * a row's rank is its label's position there (rows without one sort last,
 * by key), so a merged file lists rows as the whole sweep would.
 */
struct labels {
    char (*name)[KV_SWEEP_LABEL_LEN];
    int32_t n, cap;
};

static int32_t label_rank(const struct labels *l, const char *s)
{
    for (int32_t i = 0; i < l->n; i++)
        if (strcmp(l->name[i], s) == 0)
            return i;
    return INT32_MAX;
}

static enum kv_status labels_add(struct labels *l, const char *list)
{
    while (list != NULL && *list) {
        const char *e = strchr(list, ',');
        size_t len = e ? (size_t)(e - list) : strlen(list);
        char one[KV_SWEEP_LABEL_LEN];
        if (len > 0 && len < sizeof one) {
            memcpy(one, list, len);
            one[len] = '\0';
            if (label_rank(l, one) == INT32_MAX) {
                if (l->n == l->cap) {
                    int32_t cap = l->cap ? 2 * l->cap : 16;
                    char(*p)[KV_SWEEP_LABEL_LEN] = kv_alloc((size_t)cap * sizeof *p);
                    if (p == NULL)
                        return KV_ERR_NOMEM;
                    if (l->n)
                        memcpy(p, l->name, (size_t)l->n * sizeof *p);
                    kv_free(l->name);
                    l->name = p;
                    l->cap = cap;
                }
                memcpy(l->name[l->n++], one, len + 1);
            }
        }
        list = e ? e + 1 : NULL;
    }
    return KV_OK;
}

/* Keys of every row of every input, sorted; repeated keys refused or settled. */
static enum kv_status join_rows(struct entry **out, int64_t *n_out,
                                const struct kv_csv *const *in, int32_t n,
                                int32_t (*col)[KV_SWEEP_N_REQUIRED],
                                const struct kv_merge_opts *o, struct kv_merge_result *res,
                                char *err, size_t err_len)
{
    int64_t total = 0;
    for (int32_t k = 0; k < n; k++)
        total += in[k]->n_rows;
    struct entry *e = kv_alloc((size_t)total * sizeof *e);
    struct kv_sweep_key *tmp = NULL;
    struct labels lab = {0};
    enum kv_status st = e == NULL ? KV_ERR_NOMEM : KV_OK;
    for (int32_t k = 0; k < n && st == KV_OK; k++)
        st = labels_add(&lab, meta(in[k], "strategies"));
    /* dtype and params are in the key when every input has them (schema 2) */
    int use_ext = 1;
    int32_t ext[2];
    for (int32_t k = 0; k < n; k++)
        use_ext &= kv_sweep_ext_cols(in[k], ext);
    int64_t at = 0;
    for (int32_t k = 0; k < n && st == KV_OK; k++) {
        const struct kv_csv *c = in[k];
        kv_sweep_ext_cols(c, ext);
        kv_free(tmp);
        tmp = kv_alloc((size_t)c->n_rows * sizeof *tmp);
        if (tmp == NULL) {
            st = KV_ERR_NOMEM;
            break;
        }
        kv_sweep_key_fill(tmp, c, col[k], use_ext ? ext : NULL);
        int32_t jl = kv_csv_col(c, "label");
        for (int64_t r = 0; r < c->n_rows; r++, at++) {
            e[at].key = tmp[r];
            e[at].src = k;
            e[at].rank = jl >= 0 ? label_rank(&lab, kv_csv_cell(c, r, jl)) : INT32_MAX;
            e[at].keep = 1;
        }
    }
    kv_free(tmp);
    kv_free(lab.name);
    if (st != KV_OK) {
        kv_free(e);
        return st;
    }
    qsort(e, (size_t)total, sizeof *e, entry_by_key);
    for (int64_t a = 0; a < total;) {
        int64_t b = a + 1;
        while (b < total && kv_sweep_key_cmp(&e[a].key, &e[b].key) == 0)
            b++;
        if (b - a > 1 && !o->prefer_newest) {
            char first[256], what[256];
            name_of(first, sizeof first, in[e[a].src]);
            kv_sweep_key_describe(what, sizeof what, &e[a].key);
            kv_csv_error(err, err_len, in[e[a + 1].src]->name,
                         in[e[a + 1].src]->row_line[e[a + 1].key.row],
                         "the same configuration as %s:%lld (%s); pass --prefer newest to "
                         "keep the row of the newer file",
                         first, (long long)in[e[a].src]->row_line[e[a].key.row], what);
            kv_free(e);
            return KV_ERR_FORMAT;
        }
        /* newest `# date=` wins; ties go to the later file, then the later row */
        int64_t win = a;
        for (int64_t q = a + 1; q < b; q++) {
            const char *dw = meta(in[e[win].src], "date"), *dq = meta(in[e[q].src], "date");
            if (strcmp(dq ? dq : "", dw ? dw : "") >= 0)
                win = q;
        }
        for (int64_t q = a; q < b; q++)
            e[q].keep = q == win;
        res->n_resolved += b - a - 1;
        a = b;
    }
    /* keep the winners, in the sweep's order */
    int64_t kept = 0;
    for (int64_t q = 0; q < total; q++)
        if (e[q].keep)
            e[kept++] = e[q];
    qsort(e, (size_t)kept, sizeof *e, entry_by_rank);
    *out = e;
    *n_out = kept;
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* The output                                                               */

#define MERGE_NAME_(name) name,
static const char *const merge_cols[] = {KV_MERGE_COLUMNS(MERGE_NAME_)};
#undef MERGE_NAME_
#define N_MERGE_COLS ((int32_t)(sizeof merge_cols / sizeof merge_cols[0]))

/* The output's columns: the inputs' (their union, in first-seen order)
 * then merge's own. names[] points into the inputs. */
static enum kv_status build_columns(const char ***out, int32_t *n_out,
                                    const struct kv_csv *const *in, int32_t n, char *err,
                                    size_t err_len)
{
    int32_t cap = N_MERGE_COLS;
    for (int32_t k = 0; k < n; k++)
        cap += in[k]->n_cols;
    const char **names = kv_alloc((size_t)cap * sizeof *names);
    if (names == NULL)
        return KV_ERR_NOMEM;
    int32_t m = 0;
    for (int32_t k = 0; k < n; k++) {
        for (int32_t j = 0; j < in[k]->n_cols; j++) {
            const char *c = in[k]->cols[j];
            int32_t q = 0;
            while (q < m && strcmp(names[q], c) != 0)
                q++;
            if (q < m)
                continue;
            for (int32_t x = 0; x < N_MERGE_COLS; x++) {
                if (strcmp(c, merge_cols[x]) == 0) {
                    kv_csv_error(err, err_len, in[k]->name, in[k]->header_line,
                                 "has a column '%s', which merge adds itself", c);
                    kv_free(names);
                    return KV_ERR_FORMAT;
                }
            }
            names[m++] = c;
        }
    }
    for (int32_t x = 0; x < N_MERGE_COLS; x++)
        names[m++] = merge_cols[x];
    *out = names;
    *n_out = m;
    return KV_OK;
}

/* Appends s to line[*w ..) (cap bytes); -1 when it does not fit. */
static int put(char *line, size_t cap, size_t *w, const char *s)
{
    size_t n = strlen(s);
    if (*w + n + 1 >= cap)
        return -1;
    memcpy(line + *w, s, n + 1);
    *w += n;
    return 0;
}

static enum kv_status write_rows(struct kv_csv_writer *wr, const struct kv_csv *const *in,
                                 const struct entry *e, int64_t n_rows, const char **names,
                                 int32_t n_names, struct kv_merge_result *res, char *err,
                                 size_t err_len)
{
    char *line = kv_alloc(KV_CSV_MAX_LINE);
    if (line == NULL)
        return KV_ERR_NOMEM;
    const int32_t n_base = n_names - N_MERGE_COLS;
    enum kv_status st = KV_OK;
    for (int64_t q = 0; q < n_rows && st == KV_OK; q++) {
        const struct kv_csv *c = in[e[q].src];
        const int64_t r = e[q].key.row;
        size_t w = 0;
        int bad = 0;
        line[0] = '\0';
        for (int32_t j = 0; j < n_base && !bad; j++) {
            int32_t jc = kv_csv_col(c, names[j]);
            const char *cell = jc >= 0 ? kv_csv_cell(c, r, jc) : "";
            if (strpbrk(cell, ",\"\r\n") != NULL) {
                kv_csv_error(err, err_len, c->name, c->row_line[r],
                             "column '%s' holds a comma or quote, which no kvlab sweep "
                             "writes", names[j]);
                st = KV_ERR_FORMAT;
                break;
            }
            bad = (j > 0 && put(line, KV_CSV_MAX_LINE, &w, ",")) ||
                  put(line, KV_CSV_MAX_LINE, &w, cell);
        }
        if (st != KV_OK)
            break;
        /* attribution: source, shard, then metadata values */
        char cell[512];
        snprintf(cell, sizeof cell, ",%d,", e[q].src + 1);
        bad = bad || put(line, KV_CSV_MAX_LINE, &w, cell);
        const struct kv_merge_source *s = &res->src[e[q].src];
        if (s->n_shards > 0)
            snprintf(cell, sizeof cell, "%d/%d", s->shard, s->n_shards);
        else
            snprintf(cell, sizeof cell, "-");
        bad = bad || put(line, KV_CSV_MAX_LINE, &w, cell);
        for (int32_t x = 2; x < N_MERGE_COLS && !bad; x++) {
            const char *v = meta(c, merge_cols[x]);
            cell_safe(cell, sizeof cell, v != NULL ? v : (x >= 6 ? "nan" : ""));
            bad = put(line, KV_CSV_MAX_LINE, &w, ",") || put(line, KV_CSV_MAX_LINE, &w, cell);
        }
        if (bad) {
            kv_csv_error(err, err_len, c->name, c->row_line[r],
                         "the merged row would be longer than %d bytes", KV_CSV_MAX_LINE);
            st = KV_ERR_FORMAT;
            break;
        }
        st = kv_csv_writer_add_row(wr, line);
        res->src[e[q].src].rows_kept++;
    }
    kv_free(line);
    return st;
}

/* Keys whose value differs between the inputs (or is missing in some). */
static int key_differs(const struct kv_csv *const *in, int32_t n, const char *key)
{
    const char *v0 = meta(in[0], key);
    for (int32_t k = 1; k < n; k++) {
        const char *v = meta(in[k], key);
        if ((v0 == NULL) != (v == NULL) || (v0 != NULL && strcmp(v0, v) != 0))
            return 1;
    }
    return v0 == NULL;
}

/* The top-level value of a key that differs (merge.h's rules), or NULL to
 * leave it out there. */
static const char *summary(const struct kv_csv *const *in, int32_t n, const char *key,
                           char *buf, size_t len)
{
    static const char *const best[] = {"read_gbps", "read_l3_gbps", "copy_gbps", "sgemm_gflops", "l3_bytes",
                                       "wall_s",    "sweep_s",   "pred_s"};
    if (strcmp(key, "shard") == 0 || strcmp(key, "shard_rows") == 0)
        return NULL;
    if (strcmp(key, "partial") == 0) {
        for (int32_t k = 0; k < n; k++)
            if (is_partial(in[k]))
                return "1";
        return "0";
    }
    /* schemas that differ (validated: 1, 2, 3): the merged file is what all
     * are, schema 1; the later schemas' columns stay as extra columns */
    if (strcmp(key, "schema") == 0)
        return KV_SWEEP_SCHEMA_V1;
    if (strcmp(key, "date") == 0) {
        const char *newest = "";
        for (int32_t k = 0; k < n; k++) {
            const char *v = meta(in[k], key);
            if (v != NULL && strcmp(v, newest) > 0)
                newest = v;
        }
        return newest;
    }
    /* the run's DRAM read measurements (sweep_csv.c's read_best): all the
     * shards' together, and the lowest of them */
    if (strcmp(key, "read_gbps_n") == 0 || strcmp(key, "read_gbps_low") == 0) {
        const int sum = strcmp(key, "read_gbps_n") == 0;
        double acc = sum ? 0.0 : NAN;
        for (int32_t k = 0; k < n; k++) {
            double v = meta_num(in[k], key);
            if (!isfinite(v))
                return "mixed"; /* missing in a shard: not a figure of the whole */
            acc = sum ? acc + v : !(acc <= v) ? v : acc;
        }
        snprintf(buf, len, sum ? "%.0f" : "%.3f", acc);
        return buf;
    }
    for (size_t q = 0; q < sizeof best / sizeof best[0]; q++) {
        if (strcmp(key, best[q]) != 0)
            continue;
        double mx = NAN;
        for (int32_t k = 0; k < n; k++) {
            double v = meta_num(in[k], key);
            if (isfinite(v) && !(v <= mx))
                mx = v;
        }
        if (isnan(mx))
            return "nan";
        snprintf(buf, len, strcmp(key, "l3_bytes") == 0 ? "%.0f" : "%.3f", mx);
        return buf;
    }
    return "mixed";
}

static enum kv_status write_meta(struct kv_csv_writer *wr, const struct kv_csv *const *in,
                                 int32_t n, const struct kv_merge_result *res)
{
    enum kv_status st = kv_csv_writer_set_meta(wr, "kvlab sweep", NULL);
    char buf[64];
    /* every key once, in first-seen order: shared as is, differing summarised */
    for (int32_t k = 0; k < n && st == KV_OK; k++) {
        for (int32_t m = 0; m < in[k]->n_meta && st == KV_OK; m++) {
            const char *key = in[k]->meta[m].key;
            int seen = 0;
            for (int32_t p = 0; p < k && !seen; p++)
                seen = meta(in[p], key) != NULL;
            if (seen)
                continue;
            const char *v = key_differs(in, n, key) ? summary(in, n, key, buf, sizeof buf)
                                                    : in[k]->meta[m].value;
            if (v != NULL)
                st = kv_csv_writer_set_meta(wr, key, v);
        }
    }
    if (st == KV_OK && res->partial)
        st = kv_csv_writer_set_meta(wr, "partial", "1");
    if (st == KV_OK)
        st = kv_csv_writer_set_metaf(wr, "merged_from", "%d", n);
    if (st == KV_OK && res->missing[0])
        st = kv_csv_writer_set_meta(wr, "merged_missing", res->missing);
    /* per input: its file and every key that is not shared */
    for (int32_t k = 0; k < n && st == KV_OK; k++) {
        char key[160];
        snprintf(key, sizeof key, "source.%d.file", k + 1);
        st = kv_csv_writer_set_meta(wr, key, in[k]->name);
        for (int32_t m = 0; m < in[k]->n_meta && st == KV_OK; m++) {
            if (!key_differs(in, n, in[k]->meta[m].key))
                continue;
            snprintf(key, sizeof key, "source.%d.%.120s", k + 1, in[k]->meta[m].key);
            st = kv_csv_writer_set_meta(wr, key, in[k]->meta[m].value);
        }
    }
    return st;
}

/* ------------------------------------------------------------------------ */
/* The merge                                                                */

void kv_merge_destroy(struct kv_merge_result *r)
{
    if (r == NULL)
        return;
    kv_csv_writer_destroy(r->out);
    kv_free(r->src);
    kv_free(r);
}

enum kv_status kv_merge_run(struct kv_merge_result **out, const struct kv_csv *const *in,
                            int32_t n, const struct kv_merge_opts *o, char *err,
                            size_t err_len)
{
    if (out == NULL || in == NULL || n < 1 || o == NULL)
        return KV_ERR_INVALID;
    *out = NULL;
    struct kv_merge_result *res = kv_alloc(sizeof *res);
    int32_t (*col)[KV_SWEEP_N_REQUIRED] = kv_alloc((size_t)n * sizeof *col);
    struct entry *e = NULL;
    const char **names = NULL;
    int32_t n_names = 0;
    int64_t n_rows = 0;
    enum kv_status st = res == NULL || col == NULL ? KV_ERR_NOMEM : KV_OK;
    if (st == KV_OK) {
        res->n_sources = n;
        res->src = kv_alloc((size_t)n * sizeof *res->src);
        st = res->src == NULL ? KV_ERR_NOMEM : KV_OK;
    }
    if (st == KV_OK)
        st = check_inputs(in, n, o, col, err, err_len);
    if (st == KV_OK)
        st = check_shards(in, n, o, res, err, err_len);
    if (st == KV_OK)
        st = check_plans(in, n, col, res, err, err_len);
    if (st == KV_OK)
        st = join_rows(&e, &n_rows, in, n, col, o, res, err, err_len);
    if (st == KV_OK)
        st = build_columns(&names, &n_names, in, n, err, err_len);
    if (st == KV_OK) {
        for (int32_t k = 0; k < n; k++) {
            res->src[k].rows_in = in[k]->n_rows;
            res->src[k].pred_s = meta_num(in[k], "pred_s");
            res->src[k].sweep_s = meta_num(in[k], "sweep_s");
            res->src[k].partial = is_partial(in[k]);
            res->partial |= res->src[k].partial;
        }
        res->partial |= res->missing[0] != '\0';
        res->n_rows = n_rows;
        st = kv_csv_writer_create(&res->out);
    }
    if (st == KV_OK)
        st = write_meta(res->out, in, n, res);
    if (st == KV_OK)
        st = kv_csv_writer_set_header(res->out, names, n_names);
    if (st == KV_OK)
        st = write_rows(res->out, in, e, n_rows, names, n_names, res, err, err_len);
    kv_free(e);
    kv_free(names);
    kv_free(col);
    if (st != KV_OK) {
        if (st != KV_ERR_FORMAT)
            kv_csv_error(err, err_len, "kvlab merge", 0, "%s", kv_status_str(st));
        kv_merge_destroy(res);
        return st;
    }
    *out = res;
    return KV_OK;
}
