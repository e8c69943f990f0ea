/*
 * rows_int.h - decode row kernels for the integer dtypes (kv_rows.h),
 * written once for int8, int4 and int2: rows_q8.c, rows_q4.c and rows_q2.c
 * each define how a row's codes are read, then include this file (as
 * rows_float.h serves f32, f16 and bf16).
 *
 * The includer defines, before including:
 *   INT_PFX             the name prefix (q8 / q4 / q2): functions are INT_PFX_xxx
 *   INT_BITS            bits per code: a row of d elements is d*INT_BITS/8 bytes
 *   int_code_at(row, e, group, d)   the code of element e (scalar, any shape)
 *   int_el(o, c, group) the element where chunk c of the codes read from
 *                       byte o on starts (each read below yields INT_NC
 *                       chunks of 8 or 16 elements, from 8 or 16 bytes)
 *   AVX2 (group form, scale * dot(q, codes) + min * sum(q)):
 *     INT_AVX2_OK(d, group)  the shapes the 8-lane kernels take
 *     INT_SC8_NC, INT_SC8_SPAN(group)  chunks a score step reads, and the
 *                       elements of a group the steps walk (chunk c of the
 *                       step at g0 + e is at g0 + e + c * span)
 *     int_sc8(x, row, g0, e, group)  x[INT_SC8_NC] <- those chunks' codes
 *                       (g0: the group's first element, e from it)
 *     INT_NC, INT_PV8_UNITS   chunks per 8-byte read; reads per value pass
 *     INT_CHUNKS_ONE_GROUP(group, n)  1 where any n consecutive chunks of an
 *                       8-byte read that a value pass takes (from a multiple
 *                       of n on) lie in one group: one weight per head
 *                       serves them
 *     int_pv8(x, p)      x[INT_NC] <- the codes of the 8 bytes at p
 *   AVX2 integer scores (optional; a dtype without them scores the f32 query):
 *     INT_ISC_QBITS      8: the query as int8 against a read of 32 bytes of
 *                       codes (VPMADDUBSW); 16: as int16 against 16 bytes
 *                       widened to 16-bit codes (VPMADDWD)
 *     INT_ISC_OK(d, group)   the shapes they take
 *     INT_ISC_MIN_G      the fewest heads a kv head for which they pay
 *     INT_ISC_MERGE(group)   chunks of a read that lie in one group (their
 *                       products are summed before scaling)
 *     int_isc_codes(x, p, full)  x[INT_NC] <- the codes of a read at p (8
 *                       bits: one a byte, 32 bytes or 16 and zeros when
 *                       !full; 16 bits: 16 bytes, one code a 16-bit lane)
 *   AVX-512 with VNNI integer scores (optional; groups of 32):
 *     INT_VNNI_QBITS    defined where they are built: 8, an int8 query
 *                       against 64 codes a read (VPDPBUSD), or 16, an int16
 *                       query against 32 codes widened to 16 bits (VPDPWSSD)
 *     INT_VNNI_MAX_G    the most heads a kv head they take (where the float
 *                       kernels' one dequantization per chunk for all heads
 *                       is cheaper, they keep them)
 *     int_vnni_codes(row, rd)  read rd of a row (64 or 32 elements on from
 *                       64 rd or 32 rd), one code a byte or a 16-bit lane,
 *                       in element order (an __m512i)
 *   AVX-512:
 *     INT_512_OK(d, group), INT_FUSED_OK(g, d)  the shapes taken, the GQA
 *                       ones fused in registers (others: an L1 tile)
 *     int_deq16(x, p, qp, o, group)  x[INT_NC] <- the chunks of the 16
 *                       bytes at row byte o, dequantized (qp: the row's)
 *     INT_PV_CH(g)       chunks a fused value pass keeps per head
 *     INT_NR_MID         rows a one-head score call takes between 16 and 1
 *     INT_AHEAD          1: the kernels ask for their rows ahead where they
 *                       come from DRAM (kv_rows_ahead; PFX_pv_row too), 0:
 *                       never, as it pays only where the DRAM time exceeds
 *                       the arithmetic
 *     PFX_rows_x16, PFX_rows_n, PFX_pv_row  the one-head (MHA) kernels,
 *                       whose form differs by dtype (group form or table)
 *
 * The design decision: the loops that walk rows, heads, shapes and levels
 * are the same for every integer layout; only how a read of codes becomes
 * lanes differs, so that is all an instantiation says. Every hook is
 * always inlined with the shape as constants, so the loops compile to what
 * a hand-written copy per dtype would (the reads of one step unroll, no
 * call or branch per chunk). The level is chosen when compiled (-march).
 */
#ifndef INT_PFX
#error "define INT_PFX and the code readers (see rows_int.h) before including rows_int.h"
#endif

#define INT_CAT2(a, b) a##_##b
#define INT_CAT(a, b) INT_CAT2(a, b)
#define IN(x) INT_CAT(INT_PFX, x)

/* M's kernels for G heads at the common shapes (head_dim 64 and 128, groups
 * of 32: constants, so their loops unroll) and at any shape, named with
 * the suffixes G_d64, G_d128 and G */
#define INT_SHAPES(M, G)                                                                     \
    M(G##_d64, G, 64, 32)                                                                    \
    M(G##_d128, G, 128, 32)                                                                  \
    M(G, G, J->d, s->group)

/* ------------------------------------------------------------------------ */
/* Scalar (any shape the layout allows)                                     */

static void IN(sc_scalar)(float *sc, const struct kv_dec_job *J, const struct kv_rows_side *s,
                          const char *k0, const char *kqp, int32_t nb)
{
    const int32_t d = J->d, group = s->group;
    for (int32_t j = 0; j < nb; j++) {
        const uint8_t *row = (const uint8_t *)(k0 + (size_t)j * s->stride);
        const struct kv_qparams *qp = kv_rows_qp(kqp, s->qp_stride, j);
        for (int32_t i = 0; i < J->g; i++) {
            const float *q = J->qs + (size_t)i * d;
            float r = 0.0f;
            for (int32_t gi = 0; gi < s->ng; gi++) {
                float part = 0.0f;
                for (int32_t e = gi * group; e < (gi + 1) * group; e++)
                    part += q[e] * (float)int_code_at(row, e, group, d);
                r += qp[gi].scale * part + qp[gi].min * J->qsum[(size_t)i * s->ng + gi];
            }
            sc[(size_t)i * DEC_KB + j] = r;
        }
    }
}

static void IN(pv_scalar)(float *acc, size_t acc_stride, float *msum, float *w, const float *pr,
                          const struct kv_dec_job *J, const struct kv_rows_side *s,
                          const char *v0, const char *vqp, int32_t nb)
{
    const int32_t d = J->d, group = s->group, ng = s->ng;
    for (int32_t i = 0; i < J->g; i++) {
        float *a = acc + (size_t)i * acc_stride;
        kv_rows_pv_weights(w, msum + (size_t)i * ng, pr + (size_t)i * DEC_KB, s, vqp, nb);
        for (int32_t j = 0; j < nb; j++) {
            const uint8_t *row = (const uint8_t *)(v0 + (size_t)j * s->stride);
            for (int32_t e = 0; e < d; e++)
                a[e] += w[(size_t)j * ng + e / group] * (float)int_code_at(row, e, group, d);
        }
    }
}

#ifdef __AVX2__
/* ------------------------------------------------------------------------ */
/* AVX2 (group form)                                                        */

/* o[0..nr) <- scores of rows r, r + st, ... with qparams at qpr, qpr + qst, ... */
KV_INLINE void IN(rows8)(float *o, const int nr, const float *q, const float *qsum,
                         const char *r, size_t st, const char *qpr, size_t qst, int32_t group,
                         int32_t ng)
{
    const int32_t span = INT_SC8_SPAN(group);
    __m256 tot[4];
    float mins[4];
    for (int u = 0; u < nr; u++) {
        tot[u] = _mm256_setzero_ps();
        mins[u] = 0.0f;
    }
    for (int32_t gi = 0; gi < ng; gi++) {
        const int32_t g0 = gi * group;
        __m256 a[4];
        for (int u = 0; u < nr; u++)
            a[u] = _mm256_setzero_ps();
        for (int32_t e = 0; e < span; e += 8) {
            __m256 qv[INT_SC8_NC];
            for (int c = 0; c < INT_SC8_NC; c++)
                qv[c] = _mm256_loadu_ps(q + g0 + e + c * span);
            for (int u = 0; u < nr; u++) {
                __m256 x[INT_SC8_NC];
                int_sc8(x, (const uint8_t *)(r + u * st), g0, e, group);
                for (int c = 0; c < INT_SC8_NC; c++)
                    a[u] = _mm256_fmadd_ps(qv[c], x[c], a[u]);
            }
        }
        for (int u = 0; u < nr; u++) {
            const struct kv_qparams *qp = (const struct kv_qparams *)(qpr + u * qst) + gi;
            tot[u] = _mm256_fmadd_ps(_mm256_set1_ps(qp->scale), a[u], tot[u]);
            mins[u] += qp->min * qsum[gi];
        }
    }
    if (nr == 4) {
        _mm_storeu_ps(o, _mm_add_ps(kv_hsum4x4(tot), _mm_loadu_ps(mins)));
    } else {
        for (int u = 0; u < nr; u++)
            o[u] = kv_hsum8(tot[u]) + mins[u];
    }
}

static void IN(sc_avx2)(float *sc, const struct kv_dec_job *J, const struct kv_rows_side *s,
                        const char *k, const char *kqp, int32_t nb)
{
    const size_t st = s->stride, qst = s->qp_stride;
    for (int32_t i = 0; i < J->g; i++) {
        const float *q = J->qs + (size_t)i * J->d, *qsum = J->qsum + (size_t)i * s->ng;
        float *o = sc + (size_t)i * DEC_KB;
        int32_t j = 0;
        for (; j + 4 <= nb; j += 4)
            IN(rows8)(o + j, 4, q, qsum, k + j * st, st, kqp + j * qst, qst, s->group, s->ng);
        for (; j < nb; j++)
            IN(rows8)(o + j, 1, q, qsum, k + j * st, st, kqp + j * qst, qst, s->group, s->ng);
    }
}

/* a (d) += sum_j w[j][group] * codes_j over the nu * 8 bytes from byte o on:
 * their nu * INT_NC chunks in as many accumulators */
KV_INLINE void IN(pv8_pass)(float *a, const float *w, const char *v0, size_t stride, int32_t nb,
                            int32_t ng, int32_t group, int32_t o, const int nu)
{
    int32_t el[4], gw[4];
    __m256 ak[4];
    for (int u = 0; u < nu; u++)
        for (int c = 0; c < INT_NC; c++) {
            el[u * INT_NC + c] = int_el(o + 8 * u, c, group);
            gw[u * INT_NC + c] = el[u * INT_NC + c] / group;
            ak[u * INT_NC + c] = _mm256_loadu_ps(a + el[u * INT_NC + c]);
        }
    for (int32_t j = 0; j < nb; j++) {
        const uint8_t *row = (const uint8_t *)(v0 + (size_t)j * stride) + o;
        const float *wj = w + (size_t)j * ng;
        for (int u = 0; u < nu; u++) {
            __m256 x[INT_NC];
            int_pv8(x, row + 8 * u);
            for (int c = 0; c < INT_NC; c++) {
                const int k = u * INT_NC + c;
                ak[k] = _mm256_fmadd_ps(_mm256_broadcast_ss(wj + gw[k]), x[c], ak[k]);
            }
        }
    }
    for (int k = 0; k < nu * INT_NC; k++)
        _mm256_storeu_ps(a + el[k], ak[k]);
}

static void IN(pv_avx2)(float *acc, size_t acc_stride, float *msum, float *w, const float *pr,
                        const struct kv_dec_job *J, const struct kv_rows_side *s,
                        const char *v0, const char *vqp, int32_t nb)
{
    const int32_t group = s->group, ng = s->ng, nbytes = J->d * INT_BITS / 8;
    for (int32_t i = 0; i < J->g; i++) {
        float *a = acc + (size_t)i * acc_stride;
        kv_rows_pv_weights(w, msum + (size_t)i * ng, pr + (size_t)i * DEC_KB, s, vqp, nb);
        int32_t o = 0;
        for (; o + 8 * INT_PV8_UNITS <= nbytes; o += 8 * INT_PV8_UNITS)
            IN(pv8_pass)(a, w, v0, s->stride, nb, ng, group, o, INT_PV8_UNITS);
        for (; o < nbytes; o += 8)
            IN(pv8_pass)(a, w, v0, s->stride, nb, ng, group, o, 1);
    }
}


/*
 * GQA values (G = 2, 4 or 8 heads a kv head): each read of codes becomes
 * floats once and feeds every head, where pv_avx2 converts it once per
 * head. A pass keeps 8 accumulators: 8 / G chunks per head, nu reads of
 * `per` chunks each; when a read yields more chunks than a pass keeps, the
 * read is split over INT_NC / per passes (the unused chunks are never
 * formed: the split is unrolled with constants).
 */
KV_INLINE void IN(pv8_heads_pass)(float *acc, size_t acc_stride, const float *w, const int g,
                                  const char *v0, size_t stride, int32_t nb, int32_t ng,
                                  int32_t group, int32_t o0, const int nu, const int one)
{
    const int ch = 8 / g, per = ch < INT_NC ? ch : INT_NC;
#pragma GCC unroll 4
    for (int k0 = 0; k0 < INT_NC; k0 += per) {
        int32_t el[8], gw[8];
        __m256 a[8];
        for (int u = 0; u < nu; u++)
            for (int c = 0; c < per; c++) {
                const int k = u * per + c;
                el[k] = int_el(o0 + 8 * u, k0 + c, group);
                gw[k] = el[k] / group;
                for (int h = 0; h < g; h++)
                    a[h * ch + k] = _mm256_loadu_ps(acc + (size_t)h * acc_stride + el[k]);
            }
        for (int32_t j = 0; j < nb; j++) {
            const uint8_t *row = (const uint8_t *)(v0 + (size_t)j * stride) + o0;
            for (int u = 0; u < nu; u++) {
                __m256 x[INT_NC];
                int_pv8(x, row + 8 * u);
                if (one) { /* the read's chunks share a group: one weight per head */
                    for (int h = 0; h < g; h++) {
                        const __m256 wh =
                            _mm256_broadcast_ss(w + ((size_t)h * ng + gw[u * per]) * DEC_KB + j);
                        for (int c = 0; c < per; c++)
                            a[h * ch + u * per + c] =
                                _mm256_fmadd_ps(wh, x[k0 + c], a[h * ch + u * per + c]);
                    }
                    continue;
                }
                for (int c = 0; c < per; c++) {
                    const int k = u * per + c;
                    for (int h = 0; h < g; h++)
                        a[h * ch + k] = _mm256_fmadd_ps(
                            _mm256_broadcast_ss(w + ((size_t)h * ng + gw[k]) * DEC_KB + j),
                            x[k0 + c], a[h * ch + k]);
                }
            }
        }
        for (int u = 0; u < nu; u++)
            for (int c = 0; c < per; c++) {
                const int k = u * per + c;
                for (int h = 0; h < g; h++)
                    _mm256_storeu_ps(acc + (size_t)h * acc_stride + el[k], a[h * ch + k]);
            }
    }
}

KV_INLINE void IN(pv8_heads)(float *acc, size_t acc_stride, const float *w, const int g,
                             const char *v0, size_t stride, int32_t nb, int32_t ng,
                             int32_t group, int32_t nbytes)
{
    const int ch = 8 / g, nu = ch / (ch < INT_NC ? ch : INT_NC);
    int32_t o = 0;
    if (INT_CHUNKS_ONE_GROUP(group, ch < INT_NC ? ch : INT_NC)) {
        for (; o + 8 * nu <= nbytes; o += 8 * nu)
            IN(pv8_heads_pass)(acc, acc_stride, w, g, v0, stride, nb, ng, group, o, nu, 1);
    } else {
        for (; o + 8 * nu <= nbytes; o += 8 * nu)
            IN(pv8_heads_pass)(acc, acc_stride, w, g, v0, stride, nb, ng, group, o, nu, 0);
    }
    for (; o < nbytes; o += 8)
        IN(pv8_heads_pass)(acc, acc_stride, w, g, v0, stride, nb, ng, group, o, 1, 0);
}

/*
 * The weights of G heads: w[(h * ng + gi) * DEC_KB + j] <- pr_h[j] * scale_jg
 * and msum_h[gi] += sum_j pr_h[j] * min_jg. The rows' qparams are first
 * laid out by group (scales, then mins, DEC_KB apart, zeros past nb) once
 * for all heads, so each head's weights are 8 rows a multiply: the scalar
 * loop per head (kv_rows_pv_weights) took a quarter of the int4 GQA value
 * kernel's time.
 */
KV_INLINE void IN(pv_weights_heads)(float *w, float *msum, const float *pr, const int g,
                                    const struct kv_rows_side *s, const char *vqp, int32_t nb)
{
    const int32_t ng = s->ng, nb8 = (nb + 7) & ~7;
    float *sT = w + (size_t)g * ng * DEC_KB, *mT = sT + (size_t)ng * DEC_KB;
    for (int32_t j = 0; j < nb; j++) {
        const struct kv_qparams *qp = kv_rows_qp(vqp, s->qp_stride, j);
        for (int32_t gi = 0; gi < ng; gi++) {
            sT[(size_t)gi * DEC_KB + j] = qp[gi].scale;
            mT[(size_t)gi * DEC_KB + j] = qp[gi].min;
        }
    }
    for (int32_t gi = 0; gi < ng; gi++) /* 0 * whatever the scratch held may be NaN */
        for (int32_t j = nb; j < nb8; j++)
            sT[(size_t)gi * DEC_KB + j] = mT[(size_t)gi * DEC_KB + j] = 0.0f;
    for (int h = 0; h < g; h++) {
        const float *p = pr + (size_t)h * DEC_KB;
        for (int32_t gi = 0; gi < ng; gi++) {
            const float *sc = sT + (size_t)gi * DEC_KB, *mn = mT + (size_t)gi * DEC_KB;
            float *wo = w + ((size_t)h * ng + gi) * DEC_KB;
            __m256 ms = _mm256_setzero_ps();
            for (int32_t j = 0; j < nb8; j += 8) {
                /* past nb the probabilities are not computed (the scores
                 * there are -inf): loaded as 0 */
                const __m256 pj =
                    j + 8 <= nb ? _mm256_loadu_ps(p + j)
                                : _mm256_maskload_ps(
                                      p + j, _mm256_cmpgt_epi32(_mm256_set1_epi32(nb - j),
                                                                _mm256_setr_epi32(0, 1, 2, 3,
                                                                                  4, 5, 6, 7)));
                _mm256_storeu_ps(wo + j, _mm256_mul_ps(pj, _mm256_loadu_ps(sc + j)));
                ms = _mm256_fmadd_ps(pj, _mm256_loadu_ps(mn + j), ms);
            }
            msum[(size_t)h * ng + gi] += kv_hsum8(ms);
        }
    }
}

/* w: the heads' weights and the qparams by group (scratch of DEC_KB * d
 * floats: (G + 2) * ng * DEC_KB fit when G + 2 <= group) */
#define INT_PV8_HEADS(G)                                                                     \
    static void IN(pv_avx2_h##G)(float *acc, size_t acc_stride, float *msum, float *w,       \
                                 const float *pr, const struct kv_dec_job *J,                \
                                 const struct kv_rows_side *s, const char *v0,              \
                                 const char *vqp, int32_t nb)                                \
    {                                                                                        \
        IN(pv_weights_heads)(w, msum, pr, G, s, vqp, nb);                                    \
        IN(pv8_heads)(acc, acc_stride, w, G, v0, s->stride, nb, s->ng, s->group,             \
                      J->d * INT_BITS / 8);                                                  \
    }
INT_PV8_HEADS(2)
INT_PV8_HEADS(4)
INT_PV8_HEADS(8)
#undef INT_PV8_HEADS

#ifdef INT_ISC_OK
/* ------------------------------------------------------------------------ */
/* AVX2 integer scores                                                      */

/*
 * The query, quantized once per bind per key group (kv_rows_qcode), is
 * scored against the codes in integers: int4 and int2 codes with an int8
 * query by VPMADDUBSW (unsigned codes times signed query bytes, pairs
 * summed in 16 bits) and VPMADDWD (pairs of those into 32 bits), two
 * instructions per 32 codes where widening each code to a float takes
 * three per 8; int8 codes, whose step is 1/255 of the key's range, with an
 * int16 query (VPMOVZXBW, VPMADDWD: two per 16 codes), whose rounding an
 * int8 query's would match (doubling the error; the frontier allows 10%).
 * The 32-bit lanes are then scaled per group:
 * score = sum_lanes ks * (step_q * idot) + km * qlane, where ks and km are
 * the key group's scale and min and qlane the lane's sum of the query's
 * integer form (so the min term costs no second pass, and the score is
 * exactly that of the form kv_rows_query_int gives, which the tests
 * check). The query's own rounding (half a step of 1/127 of its group's
 * largest value) is far below a 4- or 2-bit key's (half of 1/15 or 1/3 of
 * the key's range), so these formats keep their error budget
 * (docs/performance.md).
 *
 * The query's form in J->qx, per head: its codes in read order (read rd,
 * chunk c: 32 bytes, lane-aligned with int_isc_codes' output), then per
 * (read, map) two vectors of 8 floats: the query step of each 32-bit lane's
 * group, and qlane. A map is INT_ISC_MERGE(group) chunks summed together.
 * Each half of a read lies in one group (INT_ISC_OK), so each vector of
 * key parameters is two broadcasts.
 */
#define ISC_MAXG 64 /* key groups a row may have */
#if INT_ISC_QBITS == 8
#define ISC_RB 32 /* bytes of codes a read takes */
#define ISC_QT int8_t
#define ISC_QMAX 127
#else
#define ISC_RB 16
#define ISC_QT int16_t
#define ISC_QMAX 32767
#endif
#define ISC_BPL (ISC_RB / 8) /* bytes of codes a 32-bit lane covers */

static inline int32_t IN(isc_reads)(int32_t d) { return (d * INT_BITS / 8 + ISC_RB - 1) / ISC_RB; }

static inline size_t IN(isc_head_floats)(int32_t d, int32_t group)
{
    (void)group; /* where the merge does not depend on it */
    const int32_t nr = IN(isc_reads)(d);
    return (size_t)nr * INT_NC * 8 + (size_t)nr * (INT_NC / INT_ISC_MERGE(group)) * 16;
}

/* 1 where the integer scores take keys of (d, group) per token */
static inline int IN(isc_fits)(int32_t d, int32_t group)
{
    return group > 0 && d % group == 0 && INT_ISC_OK(d, group) && d / group <= ISC_MAXG &&
           IN(isc_head_floats)(d, group) <= 2 * (size_t)d;
}

/* J->qx <- the integer form of J->qs for keys of `group` (see above) */
static void IN(isc_queries)(const struct kv_dec_job *J, int32_t group)
{
    const int32_t d = J->d, nbytes = d * INT_BITS / 8, nreads = IN(isc_reads)(d);
    const int mg = INT_ISC_MERGE(group), nmap = INT_NC / mg;
    const size_t hf = IN(isc_head_floats)(d, group);
    for (int32_t h = 0; h < J->g; h++) {
        const float *q = J->qs + (size_t)h * d;
        float *base = J->qx + (size_t)h * hf, *vec = base + (size_t)nreads * INT_NC * 8;
        ISC_QT *qi = (ISC_QT *)base;
        float amax[ISC_MAXG];
        for (int32_t gi = 0; gi < d / group; gi++)
            amax[gi] = kv_rows_amax(q + (size_t)gi * group, group);
        for (int32_t rd = 0; rd < nreads; rd++)
            for (int c = 0; c < INT_NC; c++)
                for (int32_t b = 0; b < ISC_RB; b++) {
                    const int32_t byte = ISC_RB * rd + b, e = int_el(byte, c, group);
                    qi[(rd * INT_NC + c) * ISC_RB + b] =
                        (ISC_QT)(byte < nbytes ? kv_rows_qcode(q[e], amax[e / group], ISC_QMAX)
                                               : 0);
                }
        for (int32_t rd = 0; rd < nreads; rd++)
            for (int m = 0; m < nmap; m++) {
                float *v = vec + ((size_t)rd * nmap + m) * 16;
                for (int lane = 0; lane < 8; lane++) {
                    const int32_t byte0 = ISC_RB * rd + ISC_BPL * lane;
                    float step = 0.0f, qs = 0.0f;
                    for (int c = m * mg; c < (m + 1) * mg && byte0 < nbytes; c++)
                        for (int k = 0; k < ISC_BPL; k++) {
                            const int32_t e = int_el(byte0 + k, c, group);
                            step = kv_rows_qstep(amax[e / group], ISC_QMAX);
                            qs += (float)qi[(rd * INT_NC + c) * ISC_RB + ISC_BPL * lane + k] *
                                  step;
                        }
                    v[lane] = step;
                    v[8 + lane] = qs;
                }
            }
    }
}

/* the 32-bit lanes of mg chunks of codes x times the query's codes at qi */
KV_INLINE __m256i IN(isc_dot)(const __m256i *x, const ISC_QT *qi, const int mg)
{
#if INT_ISC_QBITS == 8
    __m256i s16 = _mm256_maddubs_epi16(x[0], _mm256_loadu_si256((const __m256i *)qi));
    for (int c = 1; c < mg; c++)
        s16 = _mm256_add_epi16(
            s16, _mm256_maddubs_epi16(x[c], _mm256_loadu_si256((const __m256i *)(qi + 32 * c))));
    return _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
#else
    __m256i s32 = _mm256_madd_epi16(x[0], _mm256_loadu_si256((const __m256i *)qi));
    for (int c = 1; c < mg; c++)
        s32 = _mm256_add_epi32(
            s32, _mm256_madd_epi16(x[c], _mm256_loadu_si256((const __m256i *)(qi + 16 * c))));
    return s32;
#endif
}

/* sc (g, DEC_KB) for rows r, r + st, ... (nr of them, nr * g <= 8):
 * accumulator u = rr * g + h, one pass over each row's codes for all heads */
KV_INLINE void IN(isc_rows)(float *sc, const int g, const int nr, const float *qx, size_t hf,
                            const char *r, size_t st, const char *qpr, size_t qst, int32_t d,
                            int32_t group)
{
    const int32_t nbytes = d * INT_BITS / 8, nreads = (nbytes + ISC_RB - 1) / ISC_RB;
    const int mg = INT_ISC_MERGE(group), nmap = INT_NC / mg;
    __m256 tot[8];
    for (int u = 0; u < nr * g; u++)
        tot[u] = _mm256_setzero_ps();
    for (int rr = 0; rr < nr; rr++) {
        const uint8_t *row = (const uint8_t *)(r + rr * st);
        const struct kv_qparams *qp = (const struct kv_qparams *)(qpr + rr * qst);
        for (int32_t rd = 0; rd < nreads; rd++) {
            const int full = nbytes - ISC_RB * rd >= ISC_RB;
            __m256i x[INT_NC];
            int_isc_codes(x, row + ISC_RB * rd, full);
            for (int m = 0; m < nmap; m++) {
                const int32_t ga = int_el(ISC_RB * rd, m * mg, group) / group;
                const int32_t gb =
                    full ? int_el(ISC_RB * rd + ISC_RB / 2, m * mg, group) / group : ga;
                /* one group per read (int8's 16 codes, int4 with groups of
                 * 64 and more): one broadcast each */
                const __m256 ks = ga == gb ? _mm256_broadcast_ss(&qp[ga].scale)
                                           : _mm256_set_m128(_mm_broadcast_ss(&qp[gb].scale),
                                                             _mm_broadcast_ss(&qp[ga].scale));
                const __m256 km = ga == gb ? _mm256_broadcast_ss(&qp[ga].min)
                                           : _mm256_set_m128(_mm_broadcast_ss(&qp[gb].min),
                                                             _mm_broadcast_ss(&qp[ga].min));
                for (int h = 0; h < g; h++) {
                    const float *hb = qx + (size_t)h * hf;
                    const ISC_QT *qi =
                        (const ISC_QT *)hb + (size_t)(rd * INT_NC + m * mg) * ISC_RB;
                    const float *v = hb + (size_t)nreads * INT_NC * 8 +
                                     ((size_t)rd * nmap + m) * 16;
                    const __m256 f = _mm256_mul_ps(
                        _mm256_cvtepi32_ps(IN(isc_dot)(x + m * mg, qi, mg)), _mm256_loadu_ps(v));
                    const int u = rr * g + h;
                    tot[u] = _mm256_fmadd_ps(
                        ks, f, _mm256_fmadd_ps(km, _mm256_loadu_ps(v + 8), tot[u]));
                }
            }
        }
    }
    float o[8];
    const int n = nr * g;
    if (n == 8) {
        _mm256_storeu_ps(o, kv_hsum8x8(tot));
    } else if (n == 4) {
        _mm_storeu_ps(o, kv_hsum4x4(tot));
    } else {
        for (int u = 0; u < n; u++)
            o[u] = kv_hsum8(tot[u]);
    }
    for (int rr = 0; rr < nr; rr++)
        for (int h = 0; h < g; h++)
            sc[(size_t)h * DEC_KB + rr] = o[rr * g + h];
}

/* G heads (1, 2, 4, 8) of shape (D, GR): rows in fours, twos or ones so
 * that 4 or 8 accumulators share one reduction */
#define INT_ISC(SUF, G, D, GR)                                                               \
    static void IN(sc_isc##SUF)(float *sc, const struct kv_dec_job *J,                       \
                                const struct kv_rows_side *s, const char *k, const char *kqp, \
                                int32_t nb)                                                  \
    {                                                                                        \
        const size_t st = s->stride, qst = s->qp_stride, hf = IN(isc_head_floats)(D, GR);    \
        const int nr = (G) >= 4 ? 1 : 4 / (G);                                               \
        int32_t j = 0;                                                                       \
        for (; j + nr <= nb; j += nr)                                                        \
            IN(isc_rows)(sc + j, G, nr, J->qx, hf, k + j * st, st, kqp + j * qst, qst, D, GR); \
        for (; j < nb; j++)                                                                  \
            IN(isc_rows)(sc + j, G, 1, J->qx, hf, k + j * st, st, kqp + j * qst, qst, D, GR); \
    }
INT_SHAPES(INT_ISC, 1)
INT_SHAPES(INT_ISC, 2)
INT_SHAPES(INT_ISC, 4)
INT_SHAPES(INT_ISC, 8)
#undef INT_ISC

/* other group sizes: one head at a time */
static void IN(sc_isc_any)(float *sc, const struct kv_dec_job *J, const struct kv_rows_side *s,
                           const char *k, const char *kqp, int32_t nb)
{
    const size_t st = s->stride, qst = s->qp_stride, hf = IN(isc_head_floats)(J->d, s->group);
    for (int32_t h = 0; h < J->g; h++)
        for (int32_t j = 0; j < nb; j++)
            IN(isc_rows)(sc + (size_t)h * DEC_KB + j, 1, 1, J->qx + (size_t)h * hf, hf,
                         k + j * st, st, kqp + j * qst, qst, J->d, s->group);
}

static void IN(bind_isc)(struct kv_dec_job *J)
{
    static const kv_rows_scores_fn sc[4][3] = {
        {IN(sc_isc1_d64), IN(sc_isc1_d128), IN(sc_isc1)},
        {IN(sc_isc2_d64), IN(sc_isc2_d128), IN(sc_isc2)},
        {IN(sc_isc4_d64), IN(sc_isc4_d128), IN(sc_isc4)},
        {IN(sc_isc8_d64), IN(sc_isc8_d128), IN(sc_isc8)}};
    const int32_t g = J->g, d = J->d, group = J->k.group;
    const int gi = g == 1 ? 0 : g == 2 ? 1 : g == 4 ? 2 : g == 8 ? 3 : -1;
    const int shape = group == 32 && d == 64 ? 0 : group == 32 && d == 128 ? 1 : 2;
    IN(isc_queries)(J, group);
    J->scores = gi < 0 ? IN(sc_isc_any) : sc[gi][shape];
}
#undef ISC_RB
#undef ISC_QT
#undef ISC_QMAX
#undef ISC_BPL
#endif /* INT_ISC_OK */

#ifdef __AVX512F__
/* ------------------------------------------------------------------------ */
/* AVX-512                                                                  */

/* MHA scores: 16 rows a call, then INT_NR_MID, then one; (D, GR) the shape,
 * constants for the common ones */
#define INT_SC_512(NAME, D, GR)                                                              \
    static void NAME(float *sc, const struct kv_dec_job *J, const struct kv_rows_side *s,    \
                     const char *k, const char *kqp, int32_t nb)                             \
    {                                                                                        \
        const size_t st = s->stride, qst = s->qp_stride;                                     \
        for (int32_t i = 0; i < J->g; i++) {                                                 \
            const float *q = J->qs + (size_t)i * J->d, *qsum = J->qsum + (size_t)i * s->ng;  \
            float *o = sc + (size_t)i * DEC_KB;                                              \
            int32_t j = 0;                                                                   \
            for (; j + 16 <= nb; j += 16) {                                                  \
                if (i == 0) {                                                                \
                    kv_rows_ahead(s, k + j * st, 16);                                        \
                    kv_rows_ahead_qp(s, kqp + j * qst, 16);                                  \
                }                                                                            \
                IN(rows_x16)(o + j, q, qsum, k + j * st, st, kqp + j * qst, qst, D, GR,      \
                             (D) / (GR));                                                    \
            }                                                                                \
            for (; j + INT_NR_MID <= nb; j += INT_NR_MID)                                    \
                IN(rows_n)(o + j, INT_NR_MID, q, qsum, k + j * st, st, kqp + j * qst, qst,   \
                           D, GR, (D) / (GR));                                               \
            for (; j < nb; j++)                                                              \
                IN(rows_n)(o + j, 1, q, qsum, k + j * st, st, kqp + j * qst, qst, D, GR,     \
                           (D) / (GR));                                                      \
        }                                                                                    \
    }
INT_SC_512(IN(sc_512_d64), 64, 32)
INT_SC_512(IN(sc_512_d128), 128, 32)
INT_SC_512(IN(sc_512), J->d, s->group)
#undef INT_SC_512

#define INT_PV_512(NAME, D, GR)                                                              \
    static void NAME(float *acc, size_t acc_stride, float *msum, float *w, const float *pr,  \
                     const struct kv_dec_job *J, const struct kv_rows_side *s,               \
                     const char *v0, const char *vqp, int32_t nb)                            \
    {                                                                                        \
        for (int32_t i = 0; i < J->g; i++)                                                   \
            IN(pv_row)(acc + (size_t)i * acc_stride, w, msum + (size_t)i * s->ng,            \
                       pr + (size_t)i * DEC_KB, s, v0, vqp, nb, D, GR);                      \
    }
INT_PV_512(IN(pv_512_d64), 64, 32)
INT_PV_512(IN(pv_512_d128), 128, 32)
INT_PV_512(IN(pv_512), J->d, s->group)
#undef INT_PV_512

/* GQA: sc (g, DEC_KB) for rows j0 .. j0 + 16/g - 1 (g in 2, 4, 8), each
 * chunk dequantized once for all g heads: accumulator u = h*nr + r */
KV_INLINE void IN(rows_heads)(float *sc, const int g, const float *qs, const char *r, size_t st,
                              const char *qpr, size_t qst, int32_t d, int32_t group)
{
    const int nr = 16 / g;
    __m512 a[16];
    for (int u = 0; u < 16; u++)
        a[u] = _mm512_setzero_ps();
    for (int32_t o = 0; o < d * INT_BITS / 8; o += 16) {
        /* With 4 or 8 heads the query's chunks are loaded once for the nr
         * rows and kept in registers beside the 16 sums: re-read per row as
         * FMA operands (what gcc makes of a plain load), they are the loop's
         * most frequent instruction and the load ports set its pace. On the
         * AVX-512 AMD EPYC (hot, T 4096, int8, alternating builds): 128
         * 32/8 298 -> 265 us, 128 64/8 0.93x, 64 32/8 0.98x; at 2 heads
         * (nr 8) it measured 1.02-1.03x, so they keep the plain loads. */
        __m512 qv[8];
        const int keep = g >= 4 && INT_NC * g <= 8;
        if (keep)
            for (int c = 0; c < INT_NC; c++)
                for (int h = 0; h < g; h++)
                    qv[c * g + h] =
                        kv_in_reg(_mm512_loadu_ps(qs + (size_t)h * d + int_el(o, c, group)));
        for (int rr = 0; rr < nr; rr++) {
            __m512 kv[INT_NC];
            int_deq16(kv, (const uint8_t *)(r + rr * st) + o,
                      (const struct kv_qparams *)(qpr + rr * qst), o, group);
            for (int c = 0; c < INT_NC; c++) {
                const float *q = qs + int_el(o, c, group);
                for (int h = 0; h < g; h++)
                    a[h * nr + rr] = _mm512_fmadd_ps(
                        keep ? qv[c * g + h] : _mm512_loadu_ps(q + (size_t)h * d), kv[c],
                        a[h * nr + rr]);
            }
        }
    }
    kv_store_heads(sc, g, a);
}

/*
 * acc_h (d) += sum_j pr[h][j] * dequantized v_j for the g heads (g in 2, 4,
 * 8), each chunk dequantized once: passes of ch = INT_PV_CH(g) chunks per
 * head (g * ch accumulators), nu reads of INT_NC chunks each, or, when a
 * read holds more than ch chunks, a read split over INT_NC / ch passes.
 */
KV_INLINE void IN(pv_heads)(float *acc, size_t acc_stride, const float *pr, const int g,
                            const struct kv_rows_side *s, const char *v0, const char *vqp0,
                            int32_t nb, int32_t d, int32_t group)
{
    const size_t stride = s->stride, qst = s->qp_stride;
    const int ch = INT_PV_CH(g);
    const int nu = ch >= INT_NC ? ch / INT_NC : 1, per = ch >= INT_NC ? INT_NC : ch;
    for (int32_t o0 = 0; o0 < d * INT_BITS / 8; o0 += 16 * nu) {
        /* unrolled, so each pass picks its chunks of a read by constants
         * and the read's other chunks are never formed */
#pragma GCC unroll 4
        for (int k0 = 0; k0 < INT_NC; k0 += per) {
            int32_t el[16];
            for (int u = 0; u < nu; u++)
                for (int c = 0; c < per; c++)
                    el[u * per + c] = int_el(o0 + 16 * u, k0 + c, group);
            __m512 a[16];
            for (int h = 0; h < g; h++)
                for (int c = 0; c < ch; c++)
                    a[h * ch + c] = _mm512_loadu_ps(acc + (size_t)h * acc_stride + el[c]);
            for (int32_t j = 0; j < nb; j++) {
                const uint8_t *row = (const uint8_t *)(v0 + (size_t)j * stride);
                const struct kv_qparams *qp = kv_rows_qp(vqp0, qst, j);
                if (o0 == 0 && k0 == 0) {
                    kv_rows_ahead(s, (const char *)row, 1);
                    kv_rows_ahead_qp(s, (const char *)qp, 1);
                }
                __m512 vv[16];
                for (int u = 0; u < nu; u++) {
                    __m512 x[INT_NC];
                    int_deq16(x, row + o0 + 16 * u, qp, o0 + 16 * u, group);
                    for (int c = 0; c < per; c++)
                        vv[u * per + c] = x[k0 + c];
                }
                kv_heads_fma(a, vv, pr, g, ch, j);
            }
            for (int h = 0; h < g; h++)
                for (int c = 0; c < ch; c++)
                    _mm512_storeu_ps(acc + (size_t)h * acc_stride + el[c], a[h * ch + c]);
        }
    }
}

/* The fused GQA kernels with g and (d, group) as constants for the common
 * shapes; the rows left over go one head at a time. */
#define INT_FUSED(SUF, G, D, GR)                                                             \
    static void IN(sc_fused##SUF)(float *sc, const struct kv_dec_job *J,                     \
                                  const struct kv_rows_side *s, const char *k,              \
                                  const char *kqp, int32_t nb)                               \
    {                                                                                        \
        const size_t st = s->stride, qst = s->qp_stride;                                     \
        const int32_t step = 16 / (G);                                                       \
        int32_t j = 0;                                                                       \
        for (; j + step <= nb; j += step) {                                                  \
            kv_rows_ahead(s, k + j * st, step);                                              \
            kv_rows_ahead_qp(s, kqp + j * qst, step);                                        \
            IN(rows_heads)(sc + j, G, J->qs, k + j * st, st, kqp + j * qst, qst, D, GR);     \
        }                                                                                    \
        for (int32_t h = 0; h < (G); h++) {                                                  \
            const float *q = J->qs + (size_t)h * J->d, *qsum = J->qsum + (size_t)h * s->ng;  \
            for (int32_t jj = j; jj < nb; jj++)                                              \
                IN(rows_n)(sc + (size_t)h * DEC_KB + jj, 1, q, qsum, k + jj * st, st,        \
                           kqp + jj * qst, qst, D, GR, (D) / (GR));                          \
        }                                                                                    \
    }                                                                                        \
    static void IN(pv_fused##SUF)(float *acc, size_t acc_stride, float *msum, float *w,     \
                                  const float *pr, const struct kv_dec_job *J,               \
                                  const struct kv_rows_side *s, const char *v0,              \
                                  const char *vqp, int32_t nb)                               \
    {                                                                                        \
        (void)msum;                                                                          \
        (void)w;                                                                             \
        (void)J;                                                                             \
        IN(pv_heads)(acc, acc_stride, pr, G, s, v0, vqp, nb, D, GR);                         \
    }
INT_SHAPES(INT_FUSED, 2)
INT_SHAPES(INT_FUSED, 4)
INT_SHAPES(INT_FUSED, 8)
#undef INT_FUSED

/* GQA sizes without a fused kernel: dst (nb, d) <- the dequantized rows,
 * formed in registers once per block and kept in L1 for the g heads */
#define INT_TILE(NAME, D, GR)                                                                \
    static void NAME(float *dst, const struct kv_rows_side *s, int32_t d, const char *rows,  \
                     const char *qp0, int32_t nb)                                            \
    {                                                                                        \
        (void)d;                                                                             \
        for (int32_t j = 0; j < nb; j++) {                                                   \
            const uint8_t *c = (const uint8_t *)(rows + (size_t)j * s->stride);              \
            const struct kv_qparams *qp = kv_rows_qp(qp0, s->qp_stride, j);                  \
            for (int32_t o = 0; o < (D) * INT_BITS / 8; o += 16) {                           \
                __m512 x[INT_NC];                                                            \
                int_deq16(x, c + o, qp, o, GR);                                              \
                for (int k = 0; k < INT_NC; k++)                                             \
                    _mm512_storeu_ps(dst + (size_t)j * (D) + int_el(o, k, GR), x[k]);        \
            }                                                                                \
        }                                                                                    \
    }
INT_TILE(IN(tile_d64), 64, 32)
INT_TILE(IN(tile_d128), 128, 32)
INT_TILE(IN(tile), d, s->group)
#undef INT_TILE
#endif /* __AVX512F__ */
#endif /* __AVX2__ */

#ifdef INT_VNNI_QBITS
/*
 * Integer scores with VNNI for rows in groups of 32. The query of each
 * head is quantized once per bind per key group (kv_rows_query_int's form):
 * int4 and int2 against an int8 query, 64 codes a VPDPBUSD; int8 against an
 * int16 query (an int8 one would double its error), 32 codes a VPDPWSSD.
 * One instruction per head takes a read's products where the float kernels
 * take a conversion or table lookup and an FMA per 16.
 *
 * The design decision: a group's scale is applied after its sum, not per
 * lane. A call forms 16 units (head h, row r, read rd: u = h R n + r n +
 * rd, n reads a row, R = 16 / (g n) rows a call); one tree of 32-bit adds
 * reduces their 16 vectors to each unit's two half sums (32 lanes: a
 * read's two groups, or its group in two halves), and
 * only those are converted, scaled (key scale x query step) and given the
 * min terms, in lane orders fixed per call shape that the bind writes.
 * The error stays the AVX2 integer scores' (docs/performance.md).
 */
#define INT_VEL (INT_VNNI_QBITS == 8 ? 64 : 32) /* elements a read */
#define INT_VGPR (INT_VEL / 32)                  /* groups a read */
#if INT_VNNI_QBITS == 8
typedef int8_t IN(vq_t);
#define INT_VQMAX 127
#else
typedef int16_t IN(vq_t);
#define INT_VQMAX 32767
#endif

/* the floats of the query's form in J->qx (IN(vform)) */
static inline size_t IN(vform_floats)(int32_t g, int32_t d)
{
    return (size_t)g * d * INT_VNNI_QBITS / 32 + 80 + 2 * (size_t)g * (d / 32);
}

static inline int IN(vnni_fits)(int32_t d, int32_t group, int32_t g)
{
    return d % INT_VEL == 0 && group == 32 && (g == 1 || g == 2 || g == 4 || g == 8) &&
           g <= INT_VNNI_MAX_G && g * (d / INT_VEL) <= 16 &&
           IN(vform_floats)(g, d) <= 2 * (size_t)g * d; /* J->qx's size */
}

/* J->qx (2 g d floats, g d >= 64): the query's codes (g, d); then per lane
 * of the two reduced vectors the query step (32 floats) and the query
 * group sum (32, 0 in a group's second half); the lanes' offsets into a
 * call's qparams as int8, scale (32) and min (32); then per (head, group)
 * the step and the sum (the last rows' scalar path): IN(vform_floats) */
struct IN(vform) {
    const IN(vq_t) *q8;
    const float *qs, *qm, *step, *sum;
    const int8_t *is, *im;
};

static inline struct IN(vform) IN(vform)(float *qx, int32_t g, int32_t d)
{
    float *v = qx + (size_t)g * d * INT_VNNI_QBITS / 32;
    const size_t gng = (size_t)g * (d / 32);
    return (struct IN(vform)){(const IN(vq_t) *)qx, v,           v + 32,
                             v + 80,             v + 80 + gng, (const int8_t *)(v + 64),
                             (const int8_t *)(v + 72)};
}

/* 16 vectors of 32-bit sums a[u] -> v01 lanes [u0-3 lo | u0-3 hi | u4-7 lo
 * | u4-7 hi], v23 the same for u8-15 (lo: the 32 elements of a read's
 * first group) */
KV_INLINE void IN(vreduce)(__m512i *v01, __m512i *v23, const __m512i *a)
{
    __m512i t[8], w[4];
    for (int p = 0; p < 8; p++)
        t[p] = _mm512_add_epi32(_mm512_unpacklo_epi32(a[2 * p], a[2 * p + 1]),
                                _mm512_unpackhi_epi32(a[2 * p], a[2 * p + 1]));
    for (int p = 0; p < 4; p++)
        w[p] = _mm512_add_epi32(_mm512_unpacklo_epi64(t[2 * p], t[2 * p + 1]),
                                _mm512_unpackhi_epi64(t[2 * p], t[2 * p + 1]));
    *v01 = _mm512_add_epi32(_mm512_shuffle_i32x4(w[0], w[1], 0x88),
                            _mm512_shuffle_i32x4(w[0], w[1], 0xDD));
    *v23 = _mm512_add_epi32(_mm512_shuffle_i32x4(w[2], w[3], 0x88),
                            _mm512_shuffle_i32x4(w[2], w[3], 0xDD));
}

/* one head's score of row c from its integer query (int16 for int8 keys, int8 for
 * int4 and int2: the rows a call leaves) */
static float IN(vone)(const IN(vq_t) *q8, const float *step, const float *sum, const uint8_t *c,
                     const struct kv_qparams *qp, int32_t d)
{
    float s = 0.0f;
    for (int32_t gi = 0; gi < d / 32; gi++) {
        int32_t dot = 0;
        for (int32_t e = gi * 32; e < gi * 32 + 32; e++)
            dot += int_code_at(c, e, 32, d) * q8[e];
        s += (float)dot * (qp[gi].scale * step[gi]) + qp[gi].min * sum[gi];
    }
    return s;
}

KV_INLINE void IN(vscores)(float *sc, const struct kv_dec_job *J, const struct kv_rows_side *s,
                          const char *k, const char *kqp, int32_t nb, const int g,
                          const int32_t d)
{
    const int n = d / INT_VEL, ng = d / 32, R = 16 / (g * n), nq = R * ng * 2;
    const size_t st = s->stride, qst = s->qp_stride;
    const struct IN(vform) f = IN(vform)(J->qx, g, d);
    const __m512 qs01 = _mm512_loadu_ps(f.qs), qs23 = _mm512_loadu_ps(f.qs + 16);
    const __m512 qm01 = _mm512_loadu_ps(f.qm), qm23 = _mm512_loadu_ps(f.qm + 16);
#define INT_VIDX(p) _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p)))
    const __m512i is01 = INT_VIDX(f.is), is23 = INT_VIDX(f.is + 16);
    const __m512i im01 = INT_VIDX(f.im), im23 = INT_VIDX(f.im + 16);
#undef INT_VIDX
    /* a call's qparams: two vectors, four for 64 floats (int4, int2: one head) */
    const __mmask16 m0 = nq >= 16 ? 0xFFFF : (__mmask16)((1u << nq) - 1);
    const __mmask16 m1 = nq >= 32 ? 0xFFFF : nq > 16 ? (__mmask16)((1u << (nq - 16)) - 1) : 0;
    const int packed = qst == (size_t)ng * sizeof(struct kv_qparams);
    float qpt[64];
    int32_t j = 0;
    for (; j + R <= nb; j += R) {
        kv_rows_ahead(s, k + (size_t)j * st, R);
        kv_rows_ahead_qp(s, kqp + (size_t)j * qst, R);
        __m512i a[16];
        for (int r = 0; r < R; r++)
            for (int rd = 0; rd < n; rd++) {
                const __m512i x = int_vnni_codes(k + (size_t)(j + r) * st, rd);
                for (int h = 0; h < g; h++) {
                    const __m512i qv = _mm512_loadu_si512(f.q8 + (size_t)h * d + INT_VEL * rd);
#if INT_VNNI_QBITS == 8
                    a[h * R * n + r * n + rd] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), x, qv);
#else
                    a[h * R * n + r * n + rd] = _mm512_dpwssd_epi32(_mm512_setzero_si512(), x, qv);
#endif
                }
            }
        __m512i v01, v23;
        IN(vreduce)(&v01, &v23, a);
        const float *qp = (const float *)(kqp + (size_t)j * qst);
        if (!packed) {
            for (int r = 0; r < R; r++)
                memcpy(qpt + r * ng * 2, kqp + (size_t)(j + r) * qst,
                       (size_t)ng * sizeof(struct kv_qparams));
            qp = qpt;
        }
        const __m512 p0 = _mm512_maskz_loadu_ps(m0, qp), p1 = _mm512_maskz_loadu_ps(m1, qp + 16);
        const __m512 p2 = nq > 32 ? _mm512_loadu_ps(qp + 32) : p0;
        const __m512 p3 = nq > 32 ? _mm512_loadu_ps(qp + 48) : p1;
        const __m512 f01 =
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(v01),
                            _mm512_mul_ps(_mm512_permutex2var_ps(p0, is01, p1), qs01),
                            _mm512_mul_ps(_mm512_permutex2var_ps(p0, im01, p1), qm01));
        const __m512 f23 =
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(v23),
                            _mm512_mul_ps(_mm512_permutex2var_ps(p2, is23, p3), qs23),
                            _mm512_mul_ps(_mm512_permutex2var_ps(p2, im23, p3), qm23));
        __m512 u = _mm512_add_ps(_mm512_shuffle_f32x4(f01, f23, 0x88),
                                 _mm512_shuffle_f32x4(f01, f23, 0xDD));
        for (int w = n; w > 1; w /= 2) /* a row's reads: summed into its first lane */
            u = _mm512_add_ps(u, _mm512_permutexvar_ps(
                                     _mm512_add_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7,
                                                                        8, 9, 10, 11, 12, 13,
                                                                        14, 15),
                                                      _mm512_set1_epi32(w / 2)),
                                     u));
        float o[16];
        _mm512_storeu_ps(o, u);
        for (int h = 0; h < g; h++)
            for (int r = 0; r < R; r++)
                sc[(size_t)h * DEC_KB + j + r] = o[(h * R + r) * n];
    }
    for (; j < nb; j++) /* the rows a call of R leaves */
        for (int h = 0; h < g; h++)
            sc[(size_t)h * DEC_KB + j] =
                IN(vone)(f.q8 + (size_t)h * d, f.step + h * ng, f.sum + h * ng,
                        (const uint8_t *)(k + (size_t)j * st),
                        (const struct kv_qparams *)(kqp + (size_t)j * qst), d);
}

#define INT_VSHAPE(G, D, SUF)                                                                 \
    static void IN(vsc##G##SUF)(float *sc, const struct kv_dec_job *J,                        \
                               const struct kv_rows_side *s, const char *k, const char *kqp, \
                               int32_t nb)                                                   \
    {                                                                                        \
        IN(vscores)(sc, J, s, k, kqp, nb, G, D);                                              \
    }
#define INT_VG(G) INT_VSHAPE(G, 64, _d64) INT_VSHAPE(G, 128, _d128) INT_VSHAPE(G, J->d, )
INT_VG(1)
INT_VG(2)
INT_VG(4)
INT_VG(8)
#undef INT_VG
#undef INT_VSHAPE

static void IN(bind_vnni)(struct kv_dec_job *J)
{
    static const kv_rows_scores_fn sc[4][3] = {{IN(vsc1_d64), IN(vsc1_d128), IN(vsc1)},
                                               {IN(vsc2_d64), IN(vsc2_d128), IN(vsc2)},
                                               {IN(vsc4_d64), IN(vsc4_d128), IN(vsc4)},
                                               {IN(vsc8_d64), IN(vsc8_d128), IN(vsc8)}};
    const int32_t g = J->g, d = J->d, n = d / INT_VEL, ng = d / 32, R = 16 / (g * n);
    const int32_t nq = R * ng * 2;
    const struct IN(vform) f = IN(vform)(J->qx, g, d);
    IN(vq_t) *q8 = (IN(vq_t) *)J->qx;
    float *vs = (float *)f.qs, *step = (float *)f.step, *sum = (float *)f.sum;
    int8_t *idx = (int8_t *)f.is;
    for (int32_t h = 0; h < g; h++) {
        const float *q = J->qs + (size_t)h * d;
        for (int32_t gi = 0; gi < ng; gi++) {
            const float amax = kv_rows_amax(q + gi * 32, 32);
            const float qstep = kv_rows_qstep(amax, INT_VQMAX);
            float sm = 0.0f;
            for (int32_t e = gi * 32; e < gi * 32 + 32; e++) {
                const int32_t c = kv_rows_qcode(q[e], amax, INT_VQMAX);
                q8[(size_t)h * d + e] = (IN(vq_t))c;
                sm += (float)c * qstep;
            }
            step[h * ng + gi] = qstep;
            sum[h * ng + gi] = sm;
        }
    }
    for (int ab = 0; ab < 2; ab++)
        for (int lane = 0; lane < 16; lane++) {
            const int blk = lane / 4, u = ab * 8 + blk / 2 * 4 + lane % 4;
            const int h = u / (R * n), r = u % (R * n) / n;
            const int gi = INT_VGPR * (u % n) + (INT_VGPR == 2 ? blk % 2 : 0);
            const int base = nq > 32 ? ab * 32 : 0; /* where the vectors read qparams */
            vs[ab * 16 + lane] = step[h * ng + gi];
            /* a group in two halves takes its min term once */
            vs[32 + ab * 16 + lane] = INT_VGPR == 1 && blk % 2 ? 0.0f : sum[h * ng + gi];
            idx[ab * 16 + lane] = (int8_t)((r * ng + gi) * 2 - base); /* 0 .. 31 */
            idx[32 + ab * 16 + lane] = (int8_t)((r * ng + gi) * 2 + 1 - base);
        }
    const int gi = g == 1 ? 0 : g == 2 ? 1 : g == 4 ? 2 : 3;
    J->scores = sc[gi][d == 64 ? 0 : d == 128 ? 1 : 2];
    J->k.ahead = J->from_dram && INT_AHEAD ? KV_ROWS_AHEAD : 0;
}
#undef INT_VEL
#undef INT_VGPR
#undef INT_VQMAX
#endif /* INT_VNNI_QBITS */

/* ------------------------------------------------------------------------ */
/* Binding                                                                  */

#ifdef __AVX512F__
/* g heads (1 or 2, 4, 8 fused, other GQA sizes through a tile) of shape
 * 0: head_dim 64, group 32; 1: head_dim 128, group 32; 2: any */
static void IN(bind_512)(struct kv_dec_job *J, int is_v, int32_t g, int32_t d, int shape)
{
    static const kv_rows_scores_fn sc[4][3] = {
        {IN(sc_512_d64), IN(sc_512_d128), IN(sc_512)},
        {IN(sc_fused2_d64), IN(sc_fused2_d128), IN(sc_fused2)},
        {IN(sc_fused4_d64), IN(sc_fused4_d128), IN(sc_fused4)},
        {IN(sc_fused8_d64), IN(sc_fused8_d128), IN(sc_fused8)}};
    static const kv_rows_pv_fn pv[4][3] = {
        {IN(pv_512_d64), IN(pv_512_d128), IN(pv_512)},
        {IN(pv_fused2_d64), IN(pv_fused2_d128), IN(pv_fused2)},
        {IN(pv_fused4_d64), IN(pv_fused4_d128), IN(pv_fused4)},
        {IN(pv_fused8_d64), IN(pv_fused8_d128), IN(pv_fused8)}};
    static const kv_rows_dequant_fn tile[3] = {IN(tile_d64), IN(tile_d128), IN(tile)};
    (void)d; /* for the layouts whose fused kernels take every d */
    const int gi = g == 1 ? 0 : g == 2 ? 1 : g == 4 ? 2 : g == 8 ? 3 : -1;
    if (gi < 0 || (gi > 0 && !INT_FUSED_OK(g, d))) {
        if (is_v)
            J->v_tile = tile[shape];
        else
            J->k_tile = tile[shape];
    } else if (is_v) {
        J->pv = pv[gi][shape];
        J->v.ahead =
            J->from_dram && INT_AHEAD ? KV_ROWS_AHEAD : 0;
    } else {
        J->scores = sc[gi][shape];
        J->k.ahead =
            J->from_dram && INT_AHEAD ? KV_ROWS_AHEAD : 0;
    }
}
#endif

/* The bits of the query's integer form where bind scores keys of (d,
 * group) per token with one (the level that takes the shape first
 * decides), else 0 */
static int IN(int_query)(int32_t d, int32_t group, int32_t g)
{
    (void)d;
    (void)group;
    (void)g;
#ifdef INT_VNNI_QBITS
    if (IN(vnni_fits)(d, group, g))
        return INT_VNNI_QBITS;
#endif
#ifdef __AVX512F__
    if (INT_512_OK(d, group))
        return 0;
#endif
#if defined(__AVX2__) && defined(INT_ISC_OK)
    return g >= INT_ISC_MIN_G && IN(isc_fits)(d, group) ? INT_ISC_QBITS : 0;
#else
    return 0;
#endif
}

int INT_CAT(kv_rows_intq, INT_PFX)(int32_t d, int32_t group, int32_t g)
{
    return IN(int_query)(d, group, g);
}

/* The kernels for J's shape at the best level this file was built for. */
static void IN(bind)(struct kv_dec_job *J, int is_v)
{
    const struct kv_rows_side *s = is_v ? &J->v : &J->k;
    const int32_t g = J->g, d = J->d, group = s->group;
    (void)g;
    (void)d;
    (void)group;
#ifdef INT_VNNI_QBITS
    if (!is_v && !J->k_channel && IN(vnni_fits)(d, group, g)) {
        IN(bind_vnni)(J);
        return;
    }
#endif
#ifdef __AVX512F__
    if (INT_512_OK(d, group)) {
        IN(bind_512)(J, is_v, g, d, group == 32 && d == 64 ? 0 : group == 32 && d == 128 ? 1 : 2);
        return;
    }
#endif
#if defined(__AVX2__) && defined(INT_ISC_OK)
    if (!is_v && !J->k_channel && IN(int_query)(d, group, g)) {
        IN(bind_isc)(J);
        return;
    }
#endif
#ifdef __AVX2__
    if (INT_AVX2_OK(d, group)) {
        if (is_v && (g == 2 || g == 4 || g == 8) && g + 2 <= group)
            J->pv = g == 2 ? IN(pv_avx2_h2) : g == 4 ? IN(pv_avx2_h4) : IN(pv_avx2_h8);
        else if (is_v)
            J->pv = IN(pv_avx2);
        else
            J->scores = IN(sc_avx2);
        return;
    }
#endif
    if (is_v)
        J->pv = IN(pv_scalar);
    else
        J->scores = IN(sc_scalar);
}

#undef IN
#undef INT_SHAPES
#undef INT_CAT
#undef INT_CAT2
