/*
 * stats.h - the one definition of the median and of a percentile that every
 * kvlab tool reports (sweep CSV, generate, kernel, roofline, compare).
 *
 * The key decision: these are the definitions notebooks_data/README.md
 * documents for the sweep's step_ns_median and step_ns_p95, and every other
 * tool uses the same functions so that a "median" or "p95" printed anywhere
 * means the same thing:
 *   - median: the middle element of the sorted values; for an even count
 *     the mean of the two middle elements (int64: rounded toward the lower
 *     one, a + (b - a) / 2 with a <= b);
 *   - percentile p (0 < p <= 1): nearest rank, the element of rank
 *     ceil(p * n) (1-based) of the sorted values, rank clamped to [1, n];
 *     no interpolation, so the result is always a measured value.
 *
 * Every function sorts x[0..n) in place (ascending) and then reads it; the
 * caller may rely on that order afterwards (x[0] is the minimum). Sorting
 * an already sorted array again is cheap, so calling the median and then a
 * percentile on the same array is fine. n must be >= 1; double inputs must
 * not contain NaN (the order would be undefined).
 */
#ifndef KV_STATS_H
#define KV_STATS_H

#include <stdint.h>

/* The percentile every tool reports as "p95". */
#define KV_STATS_P95 0.95

/* Median of x[0..n) (sorts x). */
double kv_stats_median(double *x, int64_t n);
int64_t kv_stats_median_i64(int64_t *x, int64_t n);

/* Nearest-rank percentile p in (0, 1] of x[0..n) (sorts x); p = 0.95: p95. */
double kv_stats_percentile(double *x, int64_t n, double p);
int64_t kv_stats_percentile_i64(int64_t *x, int64_t n, double p);

/* The 0-based index nearest rank reads: ceil(p * n) - 1, clamped to [0, n-1]. */
int64_t kv_stats_rank_index(int64_t n, double p);

/*
 * A confidence interval of the median of x[0..n) (x left as it is): the
 * percentile bootstrap, `resamples` resamples with replacement from a
 * generator seeded with `seed` (the same data and seed give the same
 * interval), the (1-level)/2 and (1+level)/2 nearest-rank quantiles of the
 * resampled medians (level 0.95: a 95% interval). 0, or -1 for n < 1,
 * resamples < 1, a level outside (0, 1) or no memory.
 */
int kv_stats_median_ci_i64(const int64_t *x, int64_t n, int32_t resamples, uint64_t seed,
                           double level, int64_t *lo, int64_t *hi);

#endif /* KV_STATS_H */
