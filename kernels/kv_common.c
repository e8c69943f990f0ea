/*
 * kv_common.c - status strings, row sizes, checked size arithmetic, the
 * allocator with its failure-injection hook, and the clock.
 *
 * The allocator zero-fills what it returns: that touches every page once at
 * creation time, so page faults are paid when a buffer is made and not in the
 * first timed step that writes to it.
 */
#include "kv_common.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Status codes                                                             */

static const char *const status_text[KV_STATUS_COUNT] = {
    [KV_OK] = "success",
    [KV_ERR_INVALID] = "invalid argument or configuration",
    [KV_ERR_NOMEM] = "out of memory",
    [KV_ERR_OVERFLOW] = "size overflows the address space",
    [KV_ERR_FULL] = "cache is full",
    [KV_ERR_IO] = "input/output error",
    [KV_ERR_FORMAT] = "malformed file",
    [KV_ERR_UNSUPPORTED] = "operation not supported by this cache strategy",
};

const char *kv_status_str(enum kv_status s)
{
    if ((unsigned)s >= KV_STATUS_COUNT)
        return "unknown status";
    return status_text[s];
}

/* ------------------------------------------------------------------------ */
/* Element types                                                            */

size_t kv_dtype_row_bytes(enum kv_dtype t, int32_t n)
{
    KV_ASSERT((unsigned)t < KV_DTYPE_COUNT && n >= 0);
    return ((size_t)n * (size_t)kv_type_traits[t].bits + 7) / 8;
}

/* ------------------------------------------------------------------------ */
/* Sizes                                                                    */

enum kv_status kv_mul_size(size_t *out, size_t a, size_t b)
{
    if (a != 0 && b > SIZE_MAX / a)
        return KV_ERR_OVERFLOW;
    *out = a * b;
    return KV_OK;
}

enum kv_status kv_mul_sizes(size_t *out, int n, const size_t *factors)
{
    size_t acc = 1;
    for (int i = 0; i < n; i++) {
        if (kv_mul_size(&acc, acc, factors[i]) != KV_OK)
            return KV_ERR_OVERFLOW;
    }
    *out = acc;
    return KV_OK;
}

/* ------------------------------------------------------------------------ */
/* Allocation                                                               */

static _Atomic int64_t alloc_calls;
static _Atomic int64_t alloc_fail_k;
static _Atomic int alloc_fail_sticky;
static _Atomic int64_t alloc_live;

void kv_alloc_fail_at(int64_t k, int sticky)
{
    atomic_store(&alloc_calls, 0);
    atomic_store(&alloc_fail_k, k);
    atomic_store(&alloc_fail_sticky, sticky);
}

int64_t kv_alloc_count(void) { return atomic_load(&alloc_calls); }

int64_t kv_alloc_live(void) { return atomic_load(&alloc_live); }

static void *alloc_aligned(size_t bytes, int zero)
{
    int64_t n = atomic_fetch_add(&alloc_calls, 1) + 1;
    int64_t k = atomic_load(&alloc_fail_k);
    if (k > 0 && (n == k || (n > k && atomic_load(&alloc_fail_sticky))))
        return NULL;
    if (bytes == 0)
        bytes = 1; /* a distinct, freeable pointer, like malloc(0) may give */
    /* round up so aligned_alloc's size-multiple rule holds */
    if (bytes > SIZE_MAX - 63)
        return NULL;
    size_t rounded = (bytes + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, rounded);
    if (p == NULL)
        return NULL;
    if (zero)
        memset(p, 0, rounded);
    atomic_fetch_add(&alloc_live, 1);
    return p;
}

void *kv_alloc(size_t bytes) { return alloc_aligned(bytes, 1); }

void *kv_alloc_uninit(size_t bytes) { return alloc_aligned(bytes, 0); }

void kv_free(void *p)
{
    if (p == NULL)
        return;
    atomic_fetch_sub(&alloc_live, 1);
    free(p);
}

/* ------------------------------------------------------------------------ */
/* Time                                                                     */

int64_t kv_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t kv_cpu_now_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ------------------------------------------------------------------------ */
/* Machine                                                                  */

static _Atomic size_t l3_override;


void kv_l3_bytes_override(size_t bytes) { atomic_store(&l3_override, bytes); }

size_t kv_l3_bytes(void)
{
    static _Atomic size_t cached; /* 0: not read yet; racing readers agree */
    size_t v = atomic_load(&l3_override);
    if (v != 0)
        return v;
    v = atomic_load(&cached);
    if (v == 0) {
        v = (size_t)32 << 20;
#ifdef _SC_LEVEL3_CACHE_SIZE
        long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
        if (l3 > 0)
            v = (size_t)l3;
#endif
        atomic_store(&cached, v);
    }
    return v;
}

/* ------------------------------------------------------------------------ */
/* Random numbers                                                           */

uint64_t kv_rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
