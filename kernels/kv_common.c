/*
 * kv_common.c - status strings, row sizes, checked size arithmetic, the
 * allocator with its failure-injection hook, and the clock.
 *
 * The allocator zero-fills what it returns: that touches every page once at
 * creation time, so page faults are paid when a buffer is made and not in the
 * first timed step that writes to it.
 */
#include "kv_common.h"

#include <sys/mman.h>

#include <stdatomic.h>
#include <stdlib.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#endif
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
    if ((unsigned)t >= KV_DTYPE_COUNT || n < 0)
        return 0; /* a caller's value outside the enum or a negative length */
    return ((size_t)n * (size_t)kv_type_traits[t].bits + 7) / 8;
}

/* ------------------------------------------------------------------------ */
/* Sizes                                                                    */

enum kv_status kv_mul_size(size_t *out, size_t a, size_t b)
{
    if (out == NULL)
        return KV_ERR_INVALID;
    if (a != 0 && b > SIZE_MAX / a)
        return KV_ERR_OVERFLOW;
    *out = a * b;
    return KV_OK;
}

enum kv_status kv_mul_sizes(size_t *out, int n, const size_t *factors)
{
    if (out == NULL || n < 0 || (n > 0 && factors == NULL))
        return KV_ERR_INVALID;
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
    void *p;
#ifdef MADV_HUGEPAGE
    /* Buffers of 2 MiB and more (K/V caches, weights, the cold copies) are
     * aligned to 2 MiB and asked for transparent huge pages before their
     * first touch: decode streams them once per step, and with 4 KiB pages
     * every 4 KiB costs a page walk whose tables miss the caches too. On the
     * 2-core Xeon VM (THP in madvise mode) cold f32 decode at T = 8192, GQA
     * 32/8, went from a median of 1.79 to 1.48 ms, int8 8/8 from 0.56 to
     * 0.44 ms. The bound was 4 MiB until `kvlab serving` showed what it
     * missed: a request's own `dynamic` cache holds each layer in one 2 MiB
     * buffer at 512 tokens, and its batch-8 attention ran 0.93x as long on
     * huge pages (median of 35 interleaved rounds, AVX2 EPYC), the last
     * per-request cache on 4 KiB pages. A kernel without THP ignores the
     * advice. */
    const size_t huge = (size_t)2 << 20;
    if (rounded >= huge && rounded <= SIZE_MAX - huge) {
        rounded = (rounded + huge - 1) & ~(huge - 1);
        p = aligned_alloc(huge, rounded);
        if (p != NULL)
            (void)madvise(p, rounded, MADV_HUGEPAGE);
    } else
#endif
        p = aligned_alloc(64, rounded);
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

/* Reads a small sysfs file into buf; 0 when it cannot. */
static int read_small(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t n = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[n] = '\0';
    return n > 0;
}

size_t kv_l3_bytes_sysfs(const char *cache_dir)
{
    char path[512], buf[64];
    for (int i = 0; i < 16; i++) {
        if (snprintf(path, sizeof(path), "%s/index%d/level", cache_dir, i) >= (int)sizeof(path))
            return 0;
        if (!read_small(path, buf, sizeof(buf)))
            continue; /* numbering may have gaps */
        if (strtol(buf, NULL, 10) != 3)
            continue;
        snprintf(path, sizeof(path), "%s/index%d/size", cache_dir, i);
        if (!read_small(path, buf, sizeof(buf)))
            return 0;
        char *end;
        const char *num = buf + strspn(buf, " \t");
        if (*num < '0' || *num > '9')
            return 0; /* strtoull would take a sign */
        errno = 0;
        unsigned long long v = strtoull(num, &end, 10);
        if (errno != 0 || v == 0)
            return 0;
        unsigned shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
        if (shift == 0 && *end != '\n' && *end != '\0')
            return 0;
        if (v > (SIZE_MAX >> shift))
            return 0;
        return (size_t)v << shift;
    }
    return 0;
}

size_t kv_l3_bytes(void)
{
    static _Atomic size_t cached; /* 0: not read yet; racing readers agree */
    size_t v = atomic_load(&l3_override);
    if (v != 0)
        return v;
    v = atomic_load(&cached);
    if (v == 0) {
        /* sysfs first: it gives the L3 one core shares (a CCX on AMD),
         * where glibc's sysconf can report a whole socket's, 8x too much
         * on a Zen 3 EPYC VM */
        v = kv_l3_bytes_sysfs("/sys/devices/system/cpu/cpu0/cache");
#ifdef _SC_LEVEL3_CACHE_SIZE
        if (v == 0) {
            long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
            if (l3 > 0)
                v = (size_t)l3;
        }
#endif
        if (v == 0)
            v = (size_t)32 << 20;
        atomic_store(&cached, v);
    }
    return v;
}

/* ------------------------------------------------------------------------ */
/* Instruction sets chosen at run time                                      */

static const char *const isa_names[KV_ISA_COUNT] = {
    [KV_ISA_SCALAR] = "scalar", [KV_ISA_AVX2] = "avx2", [KV_ISA_AVX512] = "avx512",
    [KV_ISA_AVX512_BF16] = "avx512bf16"};

const char *kv_isa_name(enum kv_isa isa)
{
    return (unsigned)isa < KV_ISA_COUNT ? isa_names[isa] : "unknown";
}

int kv_isa_from_name(const char *name)
{
    for (int i = 0; name != NULL && i < KV_ISA_COUNT; i++)
        if (strcmp(name, isa_names[i]) == 0)
            return i;
    return -1;
}

/* CPUID and XGETBV directly: the instructions must exist AND the OS must
 * save their registers (XCR0), which __builtin_cpu_supports does not
 * report the same way in every compiler (clang 14 knows no "f16c"). */
static enum kv_isa isa_probe(void)
{
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return KV_ISA_SCALAR;
    const int fma = (c >> 12) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1,
              f16c = (c >> 29) & 1;
    if (!(fma && osxsave && avx && f16c))
        return KV_ISA_SCALAR;
    unsigned xlo, xhi;
    __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
    (void)xhi;
    if ((xlo & 0x6) != 0x6) /* XMM and YMM state */
        return KV_ISA_SCALAR;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !((b >> 5) & 1)) /* AVX2 */
        return KV_ISA_SCALAR;
    const int f = (b >> 16) & 1, dq = (b >> 17) & 1, bw = (b >> 30) & 1, vl = (b >> 31) & 1;
    if (!(f && dq && bw && vl) || (xlo & 0xE0) != 0xE0) /* opmask, ZMM state */
        return KV_ISA_AVX2;
    if (__get_cpuid_count(7, 1, &a, &b, &c, &d) && ((a >> 5) & 1)) /* AVX512_BF16 */
        return KV_ISA_AVX512_BF16;
    return KV_ISA_AVX512;
#else
    return KV_ISA_SCALAR;
#endif
}

static _Atomic int isa_best = -1; /* detection and KVLAB_ISA, read once */
static _Atomic int isa_cap = KV_ISA_COUNT;

enum kv_isa kv_isa_detected(void) { return isa_probe(); }

enum kv_isa kv_isa(void)
{
    int best = atomic_load_explicit(&isa_best, memory_order_relaxed);
    if (best < 0) { /* racing first callers compute the same value */
        best = (int)isa_probe();
        const int env = kv_isa_from_name(getenv("KVLAB_ISA"));
        /* cppcheck-suppress knownConditionTrueFalse ; false positive: cppcheck
         * sees the non-x86 isa_probe, which always says scalar */
        if (env >= 0 && env < best)
            best = env;
        atomic_store(&isa_best, best);
    }
    const int cap = atomic_load_explicit(&isa_cap, memory_order_relaxed);
    return (enum kv_isa)(best < cap ? best : cap);
}

void kv_isa_limit(enum kv_isa max)
{
    atomic_store(&isa_cap, (unsigned)max < KV_ISA_COUNT ? (int)max : KV_ISA_COUNT);
}

/* ------------------------------------------------------------------------ */
/* Random numbers                                                           */

uint64_t kv_rng_next(uint64_t *state)
{
    if (state == NULL)
        return 0;
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
