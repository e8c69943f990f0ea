/*
 * check_stats.c - unit tests of bench/measure/stats.c, the one median and
 * percentile every kvlab tool reports.
 *
 * The reference here is written independently of stats.c: the median by
 * counting, for each value, how many are below and above it (no sort), and
 * the nearest-rank percentile from its definition (the smallest value v such
 * that at least p*n of the values are <= v), evaluated by brute force.
 * Inputs are small integers so every expected value is exact.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "../bench/measure/stats.h"

/* ------------------------------------------------------------------------ */
/* Independent references                                                   */

#define MAX_N 64

/* Count of values in x[0..n) that are <= v. */
static int64_t count_le(const int64_t *x, int64_t n, int64_t v)
{
    int64_t c = 0;
    for (int64_t i = 0; i < n; i++)
        c += x[i] <= v;
    return c;
}

/* The k-th smallest (0-based) of x by counting: the smallest v in x with
 * more than k values <= v. */
static int64_t kth(const int64_t *x, int64_t n, int64_t k)
{
    int64_t best = INT64_MAX;
    for (int64_t i = 0; i < n; i++)
        if (count_le(x, n, x[i]) > k && x[i] < best)
            best = x[i];
    return best;
}

/* Nearest rank by definition: the smallest v in x with count_le * 100 >=
 * pct * n (pct an integer percent, so the comparison is exact). */
static int64_t ref_percentile(const int64_t *x, int64_t n, int64_t pct)
{
    int64_t best = INT64_MAX;
    for (int64_t i = 0; i < n; i++)
        if (count_le(x, n, x[i]) * 100 >= pct * n && x[i] < best)
            best = x[i];
    return best;
}

/* Deterministic small values with repeats. */
static void fill(int64_t *x, int64_t n, uint64_t seed)
{
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (int64_t)((seed >> 33) % 50);
    }
}

/* ------------------------------------------------------------------------ */
/* Tests                                                                    */

START_TEST(median_matches_reference)
{
    for (int64_t n = 1; n <= MAX_N; n++) {
        int64_t x[MAX_N], y[MAX_N];
        double d[MAX_N];
        fill(x, n, (uint64_t)n);
        for (int64_t i = 0; i < n; i++) {
            y[i] = x[i];
            d[i] = (double)x[i];
        }
        int64_t lo = kth(x, n, (n - 1) / 2), hi = kth(x, n, n / 2);
        /* even n: mean of the two middle values (int64: rounded down) */
        ck_assert_int_eq(kv_stats_median_i64(y, n), (lo + hi) / 2);
        ck_assert_double_eq(kv_stats_median(d, n), 0.5 * ((double)lo + (double)hi));
        /* documented side effect: sorted ascending */
        for (int64_t i = 1; i < n; i++) {
            ck_assert_int_le(y[i - 1], y[i]);
            ck_assert(d[i - 1] <= d[i]);
        }
    }
}
END_TEST

START_TEST(percentile_is_nearest_rank)
{
    static const int64_t pcts[] = {1, 50, 90, 95, 99, 100};
    for (int64_t n = 1; n <= MAX_N; n++) {
        for (size_t k = 0; k < sizeof pcts / sizeof pcts[0]; k++) {
            int64_t x[MAX_N], y[MAX_N];
            double d[MAX_N];
            fill(x, n, (uint64_t)(n * 7 + 1));
            for (int64_t i = 0; i < n; i++) {
                y[i] = x[i];
                d[i] = (double)x[i];
            }
            double p = (double)pcts[k] / 100.0;
            int64_t want = ref_percentile(x, n, pcts[k]);
            ck_assert_int_eq(kv_stats_percentile_i64(y, n, p), want);
            ck_assert_double_eq(kv_stats_percentile(d, n, p), (double)want);
        }
    }
}
END_TEST

START_TEST(p95_examples)
{
    /* 20 values 1..20: rank ceil(19) = 19 -> 19; 21 values: rank 20 -> 20 */
    int64_t x[21];
    for (int i = 0; i < 21; i++)
        x[i] = 21 - i;
    ck_assert_int_eq(kv_stats_percentile_i64(x + 1, 20, KV_STATS_P95), 19);
    ck_assert_int_eq(kv_stats_percentile_i64(x, 21, KV_STATS_P95), 20);
    /* one value: it is every percentile; two: the median is their mean */
    int64_t one = 7, two[2] = {9, 4};
    ck_assert_int_eq(kv_stats_percentile_i64(&one, 1, KV_STATS_P95), 7);
    ck_assert_int_eq(kv_stats_median_i64(two, 2), 6); /* (4 + 9) / 2 rounded down */
    ck_assert_int_eq(kv_stats_rank_index(5, 0.0), 0);  /* clamped to the first */
    ck_assert_int_eq(kv_stats_rank_index(5, 1.0), 4);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Runner                                                                   */

static Suite *stats_suite(void)
{
    Suite *s = suite_create("stats");
    TCase *tc = tcase_create("stats");
    tcase_add_test(tc, median_matches_reference);
    tcase_add_test(tc, percentile_is_nearest_rank);
    tcase_add_test(tc, p95_examples);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(stats_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed;
}
