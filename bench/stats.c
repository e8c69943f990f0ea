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
