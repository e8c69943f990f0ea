/*
 * kv_ops.h - the math of the decoder other than attention: GEMM (through
 * OpenBLAS), RMSNorm, RoPE, SwiGLU, softmax and argmax, each with a plain
 * scalar `_ref` twin that tests compare against.
 *
 * The design decision that matters: FLOPs are counted where the work is
 * issued, analytically, never measured. kv_gemm adds 2*M*N*K to the 64-bit
 * counter its caller passes; the other ops are cheap enough that the caller
 * adds their counts with the per-element constants below, so every count the
 * model reports is a closed-form function of the shapes.
 *
 * FLOP conventions (what the model's kv_flops fields hold):
 *   gemm    : 2*M*N*K per GEMM (a multiply and an add per term).
 *   attn    : 4*head_dim per visible (query, key) pair and query head
 *             (2 for q.k, 2 for p*v) - counted by the model from
 *             kv_attn_visible_pairs.
 *   softmax : KV_FLOPS_SOFTMAX_ELEM per visible pair and query head.
 *   norm    : RMSNorm KV_FLOPS_RMSNORM_ELEM per element
 *             + RoPE KV_FLOPS_ROPE_PAIR per rotated pair.
 *   other   : SwiGLU KV_FLOPS_SWIGLU_ELEM per hidden element
 *             + residual adds KV_FLOPS_RESIDUAL_ELEM per element.
 * Transcendentals (exp, sqrt, sin, cos) count as one FLOP each.
 *
 * Arguments: each op returns KV_ERR_INVALID, having written nothing, for a
 * negative count or size, a NULL array it would read or write, or a shape
 * it cannot take (an odd head_dim for RoPE), and KV_ERR_OVERFLOW when the
 * element count of an array does not fit an index; a count of 0 rows is
 * KV_OK and does nothing. (The arrays' lengths are the caller's promise.)
 */
#ifndef KV_OPS_H
#define KV_OPS_H

#include "kv_common.h"

/* RMSNorm: square, accumulate, scale by 1/rms, scale by weight. */
#define KV_FLOPS_RMSNORM_ELEM 4
/* RoPE on one pair (x0, x1): 4 multiplies and 2 adds. */
#define KV_FLOPS_ROPE_PAIR 6
/* SwiGLU silu(a)*b: negate, exp, add, divide, multiply. */
#define KV_FLOPS_SWIGLU_ELEM 5
/* Softmax: max, subtract, exp, sum, scale. */
#define KV_FLOPS_SOFTMAX_ELEM 5
/* Residual connection: one add. */
#define KV_FLOPS_RESIDUAL_ELEM 1

/* RMSNorm epsilon (llama2.c, Llama). */
#define KV_RMSNORM_EPS 1e-5f
/* RoPE base frequency. */
#define KV_ROPE_THETA 10000.0

/* ------------------------------------------------------------------------ */
/* GEMM                                                                     */

/*
 * OpenBLAS at one thread, its own worker threads stopped. The pthread build
 * starts them when it loads, and after each threaded call they spin,
 * yielding, for about 0.1 s before they sleep: the decode team then shares
 * the cores with them, and the sweep's interference check saw ~300-1300
 * involuntary context switches a second in every first row (all kvlab's
 * own). A later threaded OpenBLAS call starts them again. Call it where
 * work that threads with kv_pool begins.
 */
void kv_blas_single(void);

/*
 * out (M, N) = beta * out + x (M, K) . W^T, with W (N, K) row-major, i.e.
 * out[m][n] = beta*out[m][n] + sum_k x[m][k] * W[n][k]  (llama2.c's (out, in)
 * weight layout). beta = 0 overwrites out, beta = 1 accumulates into it (a
 * fused residual add). Adds 2*M*N*K to *flops when flops is not NULL.
 * M, N, K must each be in [0, INT_MAX] (the BLAS integer), else
 * KV_ERR_INVALID; KV_ERR_OVERFLOW when 2*M*N*K does not fit *flops. K = 0
 * leaves beta * out.
 */
enum kv_status kv_gemm(float *out, const float *x, const float *w, int64_t M, int64_t N,
                       int64_t K, float beta, int64_t *flops);
/*
 * Several GEMMs on one input, as one piece of work: out_p (M, N_p) = beta *
 * out_p + x (M, K) . W_p^T for each of the n_parts parts, the same result
 * as kv_gemm on each in turn (flops adds each 2*M*N_p*K). With at most a
 * few rows of x (decode) the parts share one call of the thread team
 * instead of one each, which matters where cores are busy (kernels/kv_pool.h):
 * the model passes q, k and v together, and the MLP's w1 and w3. 0 to
 * KV_GEMM_MULTI_MAX parts; every part is checked as kv_gemm checks it before
 * anything is written. The outputs must not overlap x or one another.
 */
#define KV_GEMM_MULTI_MAX 4
struct kv_gemm_part {
    float *out;     /* (M, N) */
    const float *w; /* (N, K) */
    int64_t N;
};
enum kv_status kv_gemm_multi(const struct kv_gemm_part *parts, int n_parts, const float *x,
                             int64_t M, int64_t K, float beta, int64_t *flops);
/* Triple loop, double accumulation. Same contract. */
enum kv_status kv_gemm_ref(float *out, const float *x, const float *w, int64_t M, int64_t N,
                           int64_t K, float beta, int64_t *flops);

/* ------------------------------------------------------------------------ */
/* RMSNorm                                                                  */

/* out (rows, dim) = x / sqrt(mean(x^2) + eps) * w (dim). out may equal x.
 * dim >= 1. */
enum kv_status kv_rmsnorm(float *out, const float *x, const float *w, int64_t rows, int32_t dim);
enum kv_status kv_rmsnorm_ref(float *out, const float *x, const float *w, int64_t rows,
                              int32_t dim);

/* ------------------------------------------------------------------------ */
/* RoPE                                                                     */

/*
 * Rotary position embedding, in place, llama2.c's convention. Row r of
 * q (rows, n_heads, head_dim) and of k (rows, n_kv_heads, head_dim) is at
 * position pos[r]; within each head, the pair (i, i+1), i even, is rotated by
 *     angle = pos[r] * 10000^(-i / head_dim):
 *     (x_i, x_{i+1}) <- (x_i cos - x_{i+1} sin,  x_i sin + x_{i+1} cos).
 * k may be NULL (n_kv_heads ignored). head_dim must be even and positive.
 * The angle and its cosine/sine are computed in double, once per (row,
 * pair), and shared by every head of q and k.
 */
enum kv_status kv_rope(float *q, int32_t n_heads, float *k, int32_t n_kv_heads, int64_t rows,
                       int32_t head_dim, const int32_t *pos);
enum kv_status kv_rope_ref(float *q, int32_t n_heads, float *k, int32_t n_kv_heads,
                           int64_t rows, int32_t head_dim, const int32_t *pos);

/*
 * dst (rows, head_dim) <- src rows rotated by `delta` more positions, the
 * angles of kv_rope (dst may equal src). Rotations compose: a key rotated
 * for position p, shifted by delta, is the key rotated for p + delta (up to
 * float rounding), which is how a cache moves its keys to new positions.
 */
enum kv_status kv_rope_shift(float *dst, const float *src, int64_t rows, int32_t head_dim,
                             int32_t delta);

/* ------------------------------------------------------------------------ */
/* SwiGLU, softmax, argmax                                                  */

/* a (n) <- silu(a) * b (n), silu(x) = x / (1 + exp(-x)). */
enum kv_status kv_swiglu(float *a, const float *b, int64_t n);
enum kv_status kv_swiglu_ref(float *a, const float *b, int64_t n);

/* x (n) <- exp(x - max x) / sum exp(x - max x), in place; n >= 1. */
enum kv_status kv_softmax(float *x, int32_t n);
enum kv_status kv_softmax_ref(float *x, int32_t n);

/* Index of the largest of x[0..n) (the lowest index on ties); -1 for a
 * NULL x or n < 1. */
int32_t kv_argmax(const float *x, int32_t n);

#endif /* KV_OPS_H */
