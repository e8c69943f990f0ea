/*
 * stats.c - median and nearest-rank percentile (definitions in stats.h).
 *
 * Sorting is qsort on the caller's array: the arrays are repetition counts
 * (tens to a few thousand values), so a selection algorithm would save
 * nothing measurable, and a sorted array is what callers want for the
 * minimum anyway.
 */
#include "stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Sorting                                                                  */

static int cmp_double(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

static int cmp_i64(const void *pa, const void *pb)
{
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    return (a > b) - (a < b);
}

/* ------------------------------------------------------------------------ */
/* Median and percentile                                                    */

int64_t kv_stats_rank_index(int64_t n, double p)
{
    double rank = ceil(p * (double)n);
    if (!(rank >= 1.0))
        return 0;
    if (rank >= (double)n)
        return n - 1;
    return (int64_t)rank - 1;
}

double kv_stats_median(double *x, int64_t n)
{
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

int64_t kv_stats_median_i64(int64_t *x, int64_t n)
{
    qsort(x, (size_t)n, sizeof *x, cmp_i64);
    if (n % 2)
        return x[n / 2];
    int64_t a = x[n / 2 - 1], b = x[n / 2];
    return a + (b - a) / 2;
}

double kv_stats_percentile(double *x, int64_t n, double p)
{
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return x[kv_stats_rank_index(n, p)];
}

int64_t kv_stats_percentile_i64(int64_t *x, int64_t n, double p)
{
    qsort(x, (size_t)n, sizeof *x, cmp_i64);
    return x[kv_stats_rank_index(n, p)];
}

/* ------------------------------------------------------------------------ */
/* Bootstrap confidence interval of the median                              */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The element of 0-based rank r of the resample whose counts are cnt. */
static int64_t rank_of(const int64_t *sorted, const int32_t *cnt, int64_t n, int64_t r)
{
    int64_t seen = 0;
    for (int64_t i = 0; i < n; i++) {
        seen += cnt[i];
        if (seen > r)
            return sorted[i];
    }
    return sorted[n - 1];
}

int kv_stats_median_ci_i64(const int64_t *x, int64_t n, int32_t resamples, uint64_t seed,
                           double level, int64_t *lo, int64_t *hi)
{
    if (x == NULL || n < 1 || resamples < 1 || !(level > 0.0 && level < 1.0))
        return -1;
    int64_t *sorted = malloc((size_t)n * sizeof *sorted);
    int32_t *cnt = malloc((size_t)n * sizeof *cnt);
    int64_t *med = malloc((size_t)resamples * sizeof *med);
    if (sorted == NULL || cnt == NULL || med == NULL) {
        free(sorted);
        free(cnt);
        free(med);
        return -1;
    }
    memcpy(sorted, x, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_i64);
    /* a resample is a multinomial count per sorted value: its median is
     * found by walking the counts, with no sort per resample */
    uint64_t s = seed ^ 0xC1C1C1C1ull;
    for (int32_t b = 0; b < resamples; b++) {
        memset(cnt, 0, (size_t)n * sizeof *cnt);
        for (int64_t k = 0; k < n; k++)
            cnt[splitmix(&s) % (uint64_t)n]++;
        if (n % 2) {
            med[b] = rank_of(sorted, cnt, n, n / 2);
        } else {
            const int64_t a = rank_of(sorted, cnt, n, n / 2 - 1);
            const int64_t c = rank_of(sorted, cnt, n, n / 2);
            med[b] = a + (c - a) / 2;
        }
    }
    qsort(med, (size_t)resamples, sizeof *med, cmp_i64);
    *lo = med[kv_stats_rank_index(resamples, (1.0 - level) / 2.0)];
    *hi = med[kv_stats_rank_index(resamples, (1.0 + level) / 2.0)];
    free(sorted);
    free(cnt);
    free(med);
    return 0;
}
