/*
 * kv_common.h - what every kvlab module shares: status codes, element types,
 * quantization parameters and the allocator.
 *
 * The one design decision that matters here: every allocation in the library
 * goes through kv_alloc()/kv_free(). That lets tests fail the k-th allocation
 * (kv_alloc_fail_at) and check that each error path cleans up, and it lets
 * us touch every page at creation time, so first-touch page faults (slow on
 * virtual machines) never land inside a timed decode step.
 */
#ifndef KV_COMMON_H
#define KV_COMMON_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------------ */
/* Status codes                                                             */

enum kv_status {
    KV_OK = 0,
    KV_ERR_INVALID,  /* a bad argument or configuration (user input) */
    KV_ERR_NOMEM,    /* an allocation failed */
    KV_ERR_OVERFLOW, /* a size computation would overflow size_t */
    KV_ERR_FULL,     /* the cache cannot take more tokens (static) */
    KV_ERR_IO,       /* a file could not be opened, read or written */
    KV_ERR_FORMAT,   /* a file's contents are malformed */
    KV_ERR_UNSUPPORTED, /* an optional operation this strategy's storage cannot do */
    KV_STATUS_COUNT
};

/* A sentence for a status code; never NULL. */
const char *kv_status_str(enum kv_status s);

/* Programming mistakes (broken invariants, not bad input). Never about what
 * a caller passes: every function of the installed headers answers a NULL
 * pointer, an enum outside its range, a negative or overflowing count with
 * an error code (kv_status_str says which kind) or, where it returns no
 * status, with the neutral value its comment names (0, -1, NULL, nothing
 * done); tests/check_api_errors.c calls each one so. */
#define KV_ASSERT(cond) assert(cond)

/* ------------------------------------------------------------------------ */
/* Element types of cached keys and values                                  */

enum kv_dtype {
    KV_DTYPE_F32 = 0,
    KV_DTYPE_Q8, /* 8-bit unsigned codes, asymmetric, per group along head_dim */
    KV_DTYPE_Q4, /* 4-bit unsigned codes, two per byte (see kv_quant.h)       */
    KV_DTYPE_F16,  /* IEEE 754 binary16, rounded to nearest even (kv_half.h) */
    KV_DTYPE_BF16, /* bfloat16: the top 16 bits of an f32, rounded to nearest even */
    KV_DTYPE_Q2,   /* 2-bit unsigned codes, four per byte (see kv_quant.h)   */
    KV_DTYPE_COUNT
};

/*
 * Per-group quantization parameters: a value x is stored as an unsigned code
 * q and read back as  x' = min + scale * q.  `min` is the zero-point kept as
 * the real value that code 0 stands for (equivalent to an integer zero-point
 * z = -min/scale, but without rounding z).
 */
struct kv_qparams {
    float scale;
    float min;
};
static_assert(sizeof(struct kv_qparams) == 8, "kv_qparams must pack to 8 bytes");

/* Where a quantized tensor's {scale, min} pairs apply. */
enum kv_qaxis {
    KV_QAXIS_TOKEN = 0, /* per token: groups of `group` elements along head_dim */
    KV_QAXIS_CHANNEL,   /* per channel: one pair per element over `group`
                           consecutive tokens (KIVI-style keys) */
    KV_QAXIS_COUNT
};

/*
 * The element-type table (ggml's type_traits): everything a module needs to
 * know about a dtype, so that adding one (f16, bf16, int2) is a traits row,
 * its conversions and its row kernels (kernels/rows_<type>.c), not a new
 * branch in every loop.
 *
 * Row conversions take a row of n elements; for types with qparams, row
 * element i uses qp[i / group] (group divides n; see kv_quant.h for the code
 * layouts). unpack_row gives the raw codes as floats (0 .. levels), for
 * readers that apply qparams themselves (the per-channel axis); for f32 it
 * is a copy. After from_float_row then to_float_row, every element is within
 *     err_rel * |x| + err_step * (max - min of its group) + err_abs
 * of the original (plus float rounding of that bound), for finite x within
 * the type's range (f16: |x| <= 65504; larger values read back as inf).
 */
struct kv_type_traits {
    const char *name;   /* "f32", "int8", "int4": CLI and CSV spelling */
    int32_t bits;       /* bits per element of the code (32 for f32) */
    int32_t block;      /* elements packed together: a row length is a multiple */
    int32_t has_qparams; /* 1: values read back through kv_qparams */
    int32_t levels;     /* largest code, 2^bits - 1 (0 without qparams) */
    int32_t min_group;  /* a group must be a multiple of this (int4: 2) */
    void (*to_float_row)(float *x, const void *codes, const struct kv_qparams *qp, int32_t n,
                         int32_t group);
    void (*from_float_row)(void *codes, struct kv_qparams *qp, const float *x, int32_t n,
                           int32_t group);
    void (*unpack_row)(float *c, const void *codes, int32_t n, int32_t group);
    /* ORs `code` in as element i of a row of n (zeroed before): the layout
     * as one function, so a per-channel row needs no case per dtype (NULL
     * without qparams) */
    void (*put_code)(uint8_t *row, int32_t i, int32_t n, int32_t group, int32_t code);
    double err_rel, err_step; /* round-trip error bound, see above */
    double err_abs;           /* its absolute floor (half the f16 subnormal spacing) */
};
/* Indexed by enum kv_dtype (kv_quant.c). */
extern const struct kv_type_traits kv_type_traits[KV_DTYPE_COUNT];

/* The traits of t, or NULL for a value outside the enum. */
static inline const struct kv_type_traits *kv_dtype_traits(enum kv_dtype t)
{
    return (unsigned)t < KV_DTYPE_COUNT ? &kv_type_traits[t] : NULL;
}

/* The dtype called `name` ("f32", "int8", ...), or -1. */
int kv_dtype_from_name(const char *name);

/* Bytes that one row of `n` elements occupies (codes only, no qparams);
 * 0 for a dtype outside the enum or a negative n. */
size_t kv_dtype_row_bytes(enum kv_dtype t, int32_t n);

/* ------------------------------------------------------------------------ */
/* Sizes                                                                    */

/* *out = a * b; returns KV_ERR_OVERFLOW instead of wrapping (KV_ERR_INVALID
 * for a NULL out). */
enum kv_status kv_mul_size(size_t *out, size_t a, size_t b);
/* *out = a * b * c * ...  (n factors; 1 for none); KV_ERR_INVALID for a
 * NULL out, n < 0 or NULL factors with n > 0. */
enum kv_status kv_mul_sizes(size_t *out, int n, const size_t *factors);

/* ------------------------------------------------------------------------ */
/* Allocation                                                               */

/* 64-byte aligned, zero-filled (which touches every page). NULL on failure
 * (and for sizes no allocation can have). */
void *kv_alloc(size_t bytes);
/*
 * The same, but not zero-filled: for buffers the caller overwrites at once
 * (a cache growing by allocate-and-copy). Zero-filling there would add a
 * full extra write of the new buffer to every growth step, a cost that a
 * torch.cat-style cache does not pay.
 */
void *kv_alloc_uninit(size_t bytes);
/* Frees what kv_alloc or kv_alloc_uninit returned; NULL does nothing. */
void kv_free(void *p);

/*
 * Test hook: make the k-th allocation from now fail (k >= 1), and every one
 * after it while `sticky` is set; k = 0 turns the hook off. kv_alloc_count()
 * is the number of kv_alloc calls since the last kv_alloc_fail_at().
 */
void kv_alloc_fail_at(int64_t k, int sticky);
int64_t kv_alloc_count(void);
/* Allocations not yet freed (leak check for tests). */
int64_t kv_alloc_live(void);

/* ------------------------------------------------------------------------ */
/* Time                                                                     */

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t kv_now_ns(void);

/* CPU time of the whole process (all threads) so far, in ns
 * (CLOCK_PROCESS_CPUTIME_ID); 0 if the clock cannot be read. */
int64_t kv_cpu_now_ns(void);

/* ------------------------------------------------------------------------ */
/* Machine                                                                  */

/* Bytes of the L3 cache that CPU 0 shares, read once from sysfs, else
 * from sysconf, else 32 MiB. The decode kernel prefetches only past half
 * of it; the roofline and cold kernel timings size their arrays by it. */
size_t kv_l3_bytes(void);

/* The size of the level-3 entry under cache_dir (laid out as
 * /sys/devices/system/cpu/cpuN/cache); 0 when there is none or it does
 * not parse. */
size_t kv_l3_bytes_sysfs(const char *cache_dir);

/* Makes kv_l3_bytes return `bytes` from now on (0: the system's value
 * again); lets tests run the prefetching decode path on small caches. */
void kv_l3_bytes_override(size_t bytes);

/*
 * Instruction sets of the kernels chosen at run time (the 16-bit float row
 * kernels and conversions, kernels/kv_half.h): each level includes the ones
 * below it. The rest of the library is compiled for one ISA (-march); these
 * pick theirs from the CPU, so one binary serves an AVX-512 laptop and an
 * AVX2-only CI runner, and every level the CPU has can be tested in one run.
 */
enum kv_isa {
    KV_ISA_SCALAR = 0,  /* portable C */
    KV_ISA_AVX2,        /* AVX2 + FMA + F16C */
    KV_ISA_AVX512,      /* AVX-512 F, BW, DQ, VL */
    KV_ISA_AVX512_BF16, /* AVX-512 with the BF16 dot products */
    KV_ISA_COUNT
};

/* The level the run-time dispatched kernels use now: the best the CPU (and
 * its OS) supports, capped by the environment variable KVLAB_ISA
 * (scalar|avx2|avx512|avx512bf16, read once) and by kv_isa_limit. */
enum kv_isa kv_isa(void);
/* The best level the CPU and OS support, ignoring every cap. */
enum kv_isa kv_isa_detected(void);
/* Caps kv_isa at `max` (tests run each level in turn); KV_ISA_COUNT lifts
 * the cap (KVLAB_ISA still applies). Not for use while kernels run. */
void kv_isa_limit(enum kv_isa max);
/* "scalar", "avx2", "avx512", "avx512bf16"; the level called `name`, or -1. */
const char *kv_isa_name(enum kv_isa isa);
int kv_isa_from_name(const char *name);

/* ------------------------------------------------------------------------ */
/* Random numbers                                                           */

/* splitmix64: advances the one 64-bit state and returns the next value.
 * Passes BigCrush; enough for synthetic weights and prompts. 0 (and no
 * state to advance) for a NULL state. */
uint64_t kv_rng_next(uint64_t *state);

#endif /* KV_COMMON_H */
