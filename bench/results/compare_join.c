/*
 * compare_join.c - reading two sweep CSVs for a join (compare.h; kvlab
 * compare and kvlab merge): the schema check every file passes first, the
 * configuration key rows are joined on, and compare's join itself.
 *
 * The design decision that matters: the join sorts each file's keys once
 * (O(n log n)), and the same sort finds duplicate keys, which are an error
 * because a join on them would be ambiguous. A file's own key is always
 * its full key (dtype and params when it has them); only between a
 * schema-1 file and a later one does the join fall back to the v1 key,
 * and there a class of rows sharing one v1 key matches only when it holds
 * one row on each side (compare.h says why nothing finer is guessed).
 * Cells are validated here, once, so everything after (the verdicts, the
 * report) re-parses them without error paths.
 */
#include "compare.h"

#include <stdlib.h>
#include <string.h>

#include "../../strategies/strategy.h"

/* ------------------------------------------------------------------------ */
/* Schema                                                                   */

const char *const kv_sweep_required[KV_SWEEP_N_REQUIRED] = {KV_SCHEMA_V1_NAMES};

/* Short local names for the columns this file reads by index. */
enum {
    COL_STRATEGY = KV_SCHEMA_COL_STRATEGY,
    COL_SEQ_LEN = KV_SCHEMA_COL_SEQ_LEN,
    COL_REPS = KV_SCHEMA_COL_REPS,
};
static_assert(KV_SWEEP_N_KEY == COL_SEQ_LEN + 1, "the key ends at seq_len");
#define N_INT_KEYS (KV_SWEEP_N_KEY - 1) /* key columns after strategy */

/* The text rule (strategy.h) on a cell kvlab wrote: a label (the strategy,
 * label and dtype columns, an entry of `# strategies=`), or, for params,
 * `k=v;k=v` of label characters. -1 with "FILE:LINE: ..." in err. */
static int text_rule(const struct kv_csv *c, int64_t line, const char *what, const char *s,
                     int params, char *err, size_t err_len)
{
    if (!params) {
        char sub[192];
        if (kv_label_why(s, sub, sizeof sub) == 0)
            return 0;
        kv_csv_error(err, err_len, c->name, line, "%s: %s (kvlab writes no such label)", what,
                     sub);
        return -1;
    }
    for (const char *t = s; *t != '\0'; t++)
        if (*t != ';' && !kv_label_char_ok((unsigned char)*t)) {
            kv_csv_error(err, err_len, c->name, line, "%s: character %d is not allowed: "
                         "parameters are k=v;k=v of letters, digits and %s", what,
                         (int)(t - s) + 1, KV_LABEL_PUNCT);
            return -1;
        }
    return 0;
}

/* Every label a sweep file holds passes the text rule: the strategy, label,
 * dtype and params cells and the `# strategies=` list. */
static enum kv_status labels_check(const struct kv_csv *c, int32_t j_strategy, char *err,
                                   size_t err_len)
{
    const struct kv_csv_meta *m = kv_csv_meta_find(c, "strategies");
    if (m != NULL && m->value[0] != '\0') {
        char one[KV_LABEL_MAX + 2];
        for (const char *p = m->value; p != NULL;) {
            const char *e = strchr(p, ',');
            const size_t len = e != NULL ? (size_t)(e - p) : strlen(p);
            snprintf(one, sizeof one, "%.*s", (int)(len < sizeof one ? len : sizeof one - 1),
                     p);
            if (len >= sizeof one)
                one[KV_LABEL_MAX] = '?'; /* too long: said so */
            if (text_rule(c, m->line, "metadata 'strategies'", one, 0, err, err_len) != 0)
                return KV_ERR_FORMAT;
            p = e != NULL ? e + 1 : NULL;
        }
    }
    static const char *const names[] = {"label", KV_SWEEP_COL_DTYPE, KV_SWEEP_COL_PARAMS};
    int32_t jc[4] = {j_strategy, -1, -1, -1};
    for (int q = 0; q < 3; q++)
        jc[q + 1] = kv_csv_col(c, names[q]);
    for (int64_t r = 0; r < c->n_rows; r++)
        for (int q = 0; q < 4; q++) {
            if (jc[q] < 0)
                continue;
            const char *s = kv_csv_cell(c, r, jc[q]);
            if (q > 0 && s[0] == '\0')
                continue; /* a column some merged inputs lack (schema 2 asks dtype above) */
            char what[48];
            snprintf(what, sizeof what, "column '%s'", q == 0 ? "strategy" : names[q - 1]);
            if (text_rule(c, c->row_line[r], what, s, q == 3, err, err_len) != 0)
                return KV_ERR_FORMAT;
        }
    return KV_OK;
}

static int has_suffix(const char *s, const char *suf)
{
    const size_t a = strlen(s), b = strlen(suf);
    return a > b && strcmp(s + a - b, suf) == 0;
}

/* The noise columns (compare.h), wherever a file has them: interval bounds
 * are numbers (nan/inf allowed), `noisy` is 0 or 1. An empty cell is a row
 * that has none: kvlab merge leaves the columns one input lacked empty. */
static enum kv_status noise_cols_check(const struct kv_csv *c, char *err, size_t err_len)
{
    for (int32_t j = 0; j < c->n_cols; j++) {
        const char *name = c->cols[j];
        const int ci = has_suffix(name, KV_COMPARE_CI_LO_SUFFIX) ||
                       has_suffix(name, KV_COMPARE_CI_HI_SUFFIX);
        const int flag = strcmp(name, KV_SWEEP_COL_NOISY) == 0;
        for (int64_t r = 0; r < c->n_rows && (ci || flag); r++) {
            const char *s = kv_csv_cell(c, r, j);
            double v;
            if (s[0] == '\0' || (ci && kv_csv_parse_double(s, &v) == 0) ||
                (flag && (strcmp(s, "0") == 0 || strcmp(s, "1") == 0)))
                continue;
            char ex[48], nx[80];
            kv_csv_excerpt(ex, sizeof ex, s, 32);
            kv_csv_excerpt(nx, sizeof nx, name, 64);
            kv_csv_error(err, err_len, c->name, c->row_line[r], "column '%s': '%s' is not %s",
                         nx, ex, ci ? "a number" : "0 or 1");
            return KV_ERR_FORMAT;
        }
    }
    return KV_OK;
}

enum kv_status kv_sweep_validate(const struct kv_csv *c, int32_t col[KV_SWEEP_N_REQUIRED],
                                 char *err, size_t err_len)
{
    char ex[48];
    const struct kv_csv_meta *m = kv_csv_meta_find(c, "schema");
    if (m == NULL) {
        kv_csv_error(err, err_len, c->name, c->header_line,
                     "no '# schema=' metadata line before the header "
                     "(not a kvlab sweep CSV?)");
        return KV_ERR_FORMAT;
    }
    const int version = kv_sweep_schema_version(m->value);
    const int v2 = version >= 2; /* dtype and params: schema 2 and later */
    if (version == 0) {
        kv_csv_excerpt(ex, sizeof ex, m->value, 16);
        kv_csv_error(err, err_len, c->name, m->line,
                     "schema version '%s', but this kvlab reads schemas %s", ex,
                     KV_SWEEP_SCHEMAS_READ);
        return KV_ERR_FORMAT;
    }
    static const char *const ext[2] = {KV_SWEEP_COL_DTYPE, KV_SWEEP_COL_PARAMS};
    for (int e = 0; e < 2 && v2; e++) {
        const int32_t j = kv_csv_col(c, ext[e]);
        if (j < 0) {
            kv_csv_error(err, err_len, c->name, m->line,
                         "schema version '%s' needs the columns dtype and params "
                         "(the header on line %lld has no '%s')", m->value,
                         (long long)c->header_line, ext[e]);
            return KV_ERR_FORMAT;
        }
        for (int64_t r = 0; r < c->n_rows && e == 0; r++) /* params may be empty */
            if (kv_csv_cell(c, r, j)[0] == '\0') {
                kv_csv_error(err, err_len, c->name, c->row_line[r], "empty '%s'", ext[e]);
                return KV_ERR_FORMAT;
            }
    }
    for (int j = 0; j < KV_SWEEP_N_REQUIRED; j++) {
        col[j] = kv_csv_col(c, kv_sweep_required[j]);
        if (col[j] < 0) {
            kv_csv_error(err, err_len, c->name, c->header_line,
                         "missing required column '%s'", kv_sweep_required[j]);
            return KV_ERR_FORMAT;
        }
    }
    if (c->n_rows == 0) {
        kv_csv_error(err, err_len, c->name, c->header_line,
                     "no data rows after the header");
        return KV_ERR_FORMAT;
    }
    for (int64_t r = 0; r < c->n_rows; r++) {
        for (int j = 0; j < KV_SWEEP_N_REQUIRED; j++) {
            const char *s = kv_csv_cell(c, r, col[j]);
            int64_t iv;
            double dv;
            if (j == COL_STRATEGY) {
                if (s[0] == '\0') {
                    kv_csv_error(err, err_len, c->name, c->row_line[r],
                                 "empty strategy name");
                    return KV_ERR_FORMAT;
                }
            } else if (j <= COL_REPS) {
                if (kv_csv_parse_int64(s, &iv) != 0) {
                    kv_csv_excerpt(ex, sizeof ex, s, 32);
                    kv_csv_error(err, err_len, c->name, c->row_line[r],
                                 "column '%s': '%s' is not an integer",
                                 kv_sweep_required[j], ex);
                    return KV_ERR_FORMAT;
                }
            } else if (kv_csv_parse_double(s, &dv) != 0) {
                kv_csv_excerpt(ex, sizeof ex, s, 32);
                kv_csv_error(err, err_len, c->name, c->row_line[r],
                             "column '%s': '%s' is not a number", kv_sweep_required[j], ex);
                return KV_ERR_FORMAT;
            }
        }
    }
    enum kv_status st = noise_cols_check(c, err, err_len);
    return st != KV_OK ? st : labels_check(c, col[COL_STRATEGY], err, err_len);
}

/* ------------------------------------------------------------------------ */
/* Keys                                                                     */

int kv_sweep_key_cmp(const struct kv_sweep_key *a, const struct kv_sweep_key *b)
{
    int c = strcmp(a->strategy, b->strategy);
    if (c != 0)
        return c;
    for (int k = 0; k < N_INT_KEYS - 1; k++) {
        if (a->v[k] != b->v[k])
            return a->v[k] < b->v[k] ? -1 : 1;
    }
    /* dtype and params before seq_len: a group's rows stay together */
    for (int e = 0; e < 2; e++) {
        if (a->ext[e] != NULL && b->ext[e] != NULL && (c = strcmp(a->ext[e], b->ext[e])) != 0)
            return c;
    }
    const int64_t ta = a->v[N_INT_KEYS - 1], tb = b->v[N_INT_KEYS - 1];
    return ta == tb ? 0 : ta < tb ? -1 : 1;
}

static int key_qsort(const void *pa, const void *pb)
{
    const struct kv_sweep_key *a = pa, *b = pb;
    int c = kv_sweep_key_cmp(a, b);
    if (c != 0)
        return c;
    return (a->row > b->row) - (a->row < b->row); /* stable: file order */
}

int64_t kv_sweep_cell_int(const struct kv_csv *c, int64_t r, int32_t j)
{
    int64_t v = 0;
    int rc = kv_csv_parse_int64(kv_csv_cell(c, r, j), &v);
    KV_ASSERT(rc == 0); /* validated */
    (void)rc;
    return v;
}

void kv_sweep_key_fill(struct kv_sweep_key *k, const struct kv_csv *c,
                       const int32_t col[KV_SWEEP_N_REQUIRED], const int32_t *ext)
{
    for (int64_t r = 0; r < c->n_rows; r++) {
        k[r].strategy = kv_csv_cell(c, r, col[COL_STRATEGY]);
        for (int j = 0; j < N_INT_KEYS; j++)
            k[r].v[j] = kv_sweep_cell_int(c, r, col[j + 1]);
        for (int e = 0; e < 2; e++)
            k[r].ext[e] = ext != NULL ? kv_csv_cell(c, r, ext[e]) : NULL;
        if (ext != NULL && k[r].ext[1][0] == '\0') /* no parameters, as kvlab writes it */
            k[r].ext[1] = KV_SWEEP_NO_PARAMS;
        k[r].row = r;
    }
}

int kv_sweep_ext_cols(const struct kv_csv *c, int32_t ext[2])
{
    ext[0] = kv_csv_col(c, KV_SWEEP_COL_DTYPE);
    ext[1] = kv_csv_col(c, KV_SWEEP_COL_PARAMS);
    return ext[0] >= 0 && ext[1] >= 0;
}

void kv_sweep_key_describe(char *buf, size_t n, const struct kv_sweep_key *k)
{
    char strat[72];
    kv_csv_excerpt(strat, sizeof strat, k->strategy, 64);
    size_t w = (size_t)snprintf(buf, n, "%s", strat);
    for (int j = 0; j < N_INT_KEYS && w < n; j++) {
        for (int e = 0; e < 2 && j + 1 == COL_SEQ_LEN && k->ext[e] != NULL && w < n; e++) {
            char v[72];
            kv_csv_excerpt(v, sizeof v, k->ext[e], 64);
            int m = snprintf(buf + w, n - w, " %s=%s",
                             e == 0 ? KV_SWEEP_COL_DTYPE : KV_SWEEP_COL_PARAMS, v);
            w += m > 0 ? (size_t)m : 0;
        }
        if (w >= n)
            break;
        int m = snprintf(buf + w, n - w, " %s=%lld",
                         j + 1 == COL_SEQ_LEN ? "T" : kv_sweep_required[j + 1],
                         (long long)k->v[j]);
        w += m > 0 ? (size_t)m : 0;
    }
}

enum kv_status kv_sweep_keys_build(struct kv_sweep_key **out, const struct kv_csv *c,
                                   const int32_t col[KV_SWEEP_N_REQUIRED], const int32_t *ext,
                                   char *err, size_t err_len)
{
    struct kv_sweep_key *k = kv_alloc((size_t)c->n_rows * sizeof *k);
    if (k == NULL)
        return KV_ERR_NOMEM;
    kv_sweep_key_fill(k, c, col, ext);
    qsort(k, (size_t)c->n_rows, sizeof *k, key_qsort);
    for (int64_t r = 1; r < c->n_rows; r++) {
        if (kv_sweep_key_cmp(&k[r], &k[r - 1]) == 0) {
            kv_csv_error(err, err_len, c->name, c->row_line[k[r].row],
                         "duplicate configuration: same strategy, layers .. threads%s "
                         "and seq_len as line %lld", ext != NULL ? ", dtype, params" : "",
                         (long long)c->row_line[k[r - 1].row]);
            kv_free(k);
            return KV_ERR_FORMAT;
        }
    }
    *out = k;
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* The join                                                                 */

/*
 * Walks two key lists sorted alike and pairs each class of equal keys that
 * holds exactly one row on each side: partner[s][row] = the other file's
 * row. A class with more on either side (keys without dtype and params
 * against keys with them) pairs nothing: cand[s][row] = the other side's
 * count, so the rows can be reported as ambiguous rather than only here.
 */
static void match_classes(const struct kv_sweep_key *kb, int64_t nb,
                          const struct kv_sweep_key *kc, int64_t nc, int64_t *partner[2],
                          int64_t *cand[2])
{
    int64_t i = 0, j = 0;
    while (i < nb || j < nc) {
        const int c = i >= nb ? 1 : j >= nc ? -1 : kv_sweep_key_cmp(&kb[i], &kc[j]);
        int64_t ei = i, ej = j;
        while (c <= 0 && ei < nb && kv_sweep_key_cmp(&kb[ei], &kb[i]) == 0)
            ei++;
        while (c >= 0 && ej < nc && kv_sweep_key_cmp(&kc[ej], &kc[j]) == 0)
            ej++;
        if (ei - i == 1 && ej - j == 1) {
            partner[0][kb[i].row] = kc[j].row;
            partner[1][kc[j].row] = kb[i].row;
        } else {
            for (int64_t t = i; t < ei; t++)
                cand[0][kb[t].row] = ej - j;
            for (int64_t t = j; t < ej; t++)
                cand[1][kc[t].row] = ei - i;
        }
        i = ei;
        j = ej;
    }
}

/* The v1 view of sorted full keys: dtype and params dropped, sorted again. */
static struct kv_sweep_key *keys_v1(const struct kv_sweep_key *full, int64_t n)
{
    struct kv_sweep_key *k = kv_alloc((size_t)n * sizeof *k);
    if (k == NULL)
        return NULL;
    memcpy(k, full, (size_t)n * sizeof *k);
    for (int64_t r = 0; r < n; r++)
        k[r].ext[0] = k[r].ext[1] = NULL;
    qsort(k, (size_t)n, sizeof *k, key_qsort);
    return k;
}

/* items in the order of the richer side's full keys (so a group's rows are
 * adjacent, dtype and params included), then the rows left over. */
static enum kv_status join_collect(struct kv_compare_result *res, struct kv_sweep_key *full[2],
                                   int64_t *partner[2], int64_t *cand[2])
{
    const int64_t n[2] = {res->base->n_rows, res->cur->n_rows};
    const int rich = res->has_ext[1] && !res->has_ext[0];
    res->items = kv_alloc((size_t)(n[0] < n[1] ? n[0] : n[1]) * sizeof *res->items);
    if (res->items == NULL)
        return KV_ERR_NOMEM;
    for (int64_t t = 0; t < n[rich]; t++) {
        const int64_t row = full[rich][t].row, other = partner[rich][row];
        if (other < 0)
            continue;
        struct kv_compare_item *it = &res->items[res->n_items++];
        it->base_row = rich ? other : row;
        it->new_row = rich ? row : other;
    }
    res->n_only_base = n[0] - res->n_items;
    res->n_only_new = n[1] - res->n_items;
    res->n_unmatched = res->n_only_base + res->n_only_new;
    if (res->n_unmatched == 0)
        return KV_OK;
    res->unmatched = kv_alloc((size_t)res->n_unmatched * sizeof *res->unmatched);
    if (res->unmatched == NULL)
        return KV_ERR_NOMEM;
    /* per file, the ambiguous rows first: they are the surprise, rows of
     * one file only are the usual different --seq-lens or --strategies */
    int64_t u = 0;
    for (int s = 0; s < 2; s++)
        for (int amb = 1; amb >= 0; amb--)
            for (int64_t t = 0; t < n[s]; t++) {
                const int64_t row = full[s][t].row;
                if (partner[s][row] >= 0 || (cand[s][row] > 0) != amb)
                    continue;
                res->unmatched[u++] = (struct kv_compare_unmatched){row, s, cand[s][row]};
                *(s ? &res->n_ambiguous_new : &res->n_ambiguous_base) += amb;
            }
    KV_ASSERT(u == res->n_unmatched);
    return KV_OK;
}

/* KV_ERR_FORMAT: not one row matched. */
static enum kv_status join_none(const struct kv_compare_result *res, char *err, size_t err_len)
{
    char other[80], amb[160] = "";
    kv_csv_excerpt(other, sizeof other, res->base->name, 64);
    if (res->n_ambiguous_base + res->n_ambiguous_new > 0)
        snprintf(amb, sizeof amb, "; %lld rows of BASE and %lld of NEW are ambiguous: one "
                 "schema-1 row against several that only dtype or params tell apart",
                 (long long)res->n_ambiguous_base, (long long)res->n_ambiguous_new);
    kv_csv_error(err, err_len, res->cur->name, res->cur->row_line[0],
                 "no configuration in common with %s (none of %lld rows here "
                 "matches any of its %lld on strategy, layers .. threads%s, seq_len%s)",
                 other, (long long)res->cur->n_rows, (long long)res->base->n_rows,
                 res->use_ext ? ", dtype, params" : "", amb);
    return KV_ERR_FORMAT;
}

enum kv_status kv_compare_join(struct kv_compare_result *res, char *err, size_t err_len)
{
    const struct kv_csv *c[2] = {res->base, res->cur};
    const int32_t *col[2] = {res->col_base, res->col_cur};
    const int32_t *ext[2] = {res->col_ext_base, res->col_ext_cur};
    struct kv_sweep_key *full[2] = {NULL, NULL}, *v1[2] = {NULL, NULL};
    const int64_t nb = c[0]->n_rows, nc = c[1]->n_rows;
    /* partner and cand of both sides in one block: -1 and 0 to start */
    int64_t *block = kv_alloc((size_t)(nb + nc) * 2 * sizeof *block);
    enum kv_status st = block == NULL ? KV_ERR_NOMEM : KV_OK;
    for (int s = 0; s < 2 && st == KV_OK; s++)
        st = kv_sweep_keys_build(&full[s], c[s], col[s], res->has_ext[s] ? ext[s] : NULL, err,
                                 err_len);
    /* one file without dtype and params: both join on the v1 key */
    const int fall_back = !res->use_ext && (res->has_ext[0] || res->has_ext[1]);
    if (st == KV_OK && fall_back) {
        for (int s = 0; s < 2 && st == KV_OK; s++)
            if ((v1[s] = keys_v1(full[s], c[s]->n_rows)) == NULL)
                st = KV_ERR_NOMEM;
    }
    if (st == KV_OK) {
        int64_t *partner[2] = {block, block + nb}, *cand[2] = {block + nb + nc,
                                                              block + 2 * nb + nc};
        for (int64_t t = 0; t < nb + nc; t++) {
            block[t] = -1;
            block[nb + nc + t] = 0;
        }
        struct kv_sweep_key *const *k = fall_back ? v1 : full;
        match_classes(k[0], nb, k[1], nc, partner, cand);
        st = join_collect(res, full, partner, cand);
    }
    for (int s = 0; s < 2; s++) {
        kv_free(full[s]);
        kv_free(v1[s]);
    }
    kv_free(block);
    if (st == KV_OK && res->n_items == 0)
        st = join_none(res, err, err_len);
    return st;
}
