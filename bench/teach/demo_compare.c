/*
 * demo_compare.c - two strategies side by side (kv_demo_compare,
 * demo_view.h; `kvlab demo --compare A,B`): both walked over the same
 * tokens, one table row per step shown, until their tokens diverge, then a
 * verdict.
 *
 * The design decision that matters: once the chosen tokens differ, the two
 * runs see different inputs and their logits are no longer comparable, so
 * the logit difference is judged only while their histories are identical;
 * below DEMO_SAME_LOGIT it is float rounding between two exact strategies
 * (different summation order), not a change of output. The table becomes
 * one line per strategy and step when side by side does not fit the width.
 */
#include "demo_view.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Logit differences below this are float rounding between two exact
 * strategies (different summation order), not a change of output. */
#define DEMO_SAME_LOGIT 1e-4f

/* ------------------------------------------------------------------------ */
/* The table                                                                */

/* Side by side (one line per step) needs this many columns; narrower
 * terminals get one line per strategy and step. */
static int cmp_wide_width(int wa, int wb) { return 12 + (wa + 31) + 3 + (wb + 31) + 3 + 11; }

struct cmp_row {
    const char *tok;
    int32_t fed;
    int64_t flops;
    size_t cache, written;
};

static struct cmp_row cmp_row_of(const struct kv_demo_run *R, const char *tok)
{
    return (struct cmp_row){tok, R->n_fed, kv_demo_flops_of(&R->st),
                            kv_cache_resident_bytes(R->cache), kv_cache_copied_bytes(R->cache)};
}

static void print_cmp_header(const struct kv_demo_session *x, int wide, int wa, int wb,
                             const char *na, const char *nb)
{
    const struct kv_demo_style *S = &x->S;
    if (wide)
        printf("\n%s%4s %4s | %-*s %4s %9s %8s %7s | %-*s %4s %9s %8s %7s | %s%s\n", S->bold,
               "step", "T", wa, na, "fed", "FLOPs", "cache B", "written", wb, nb, "fed",
               "FLOPs", "cache B", "written", "max|dlogit|", S->reset);
    else
        printf("\n%s%4s %5s  %-*s %-8s %4s %9s %7s %8s  %s%s\n", S->bold, "step", "T",
               wa > wb ? wa : wb, "strategy", "next", "fed", "FLOPs", "cache B", "written",
               "max|dlogit|", S->reset);
}

/* One step of the table; dlogit_or_dash printed last (already formatted). */
static void print_cmp_step(const struct kv_demo_session *x, int wide, int wa, int wb,
                           const char *na, const char *nb, int32_t step, int32_t T,
                           const struct cmp_row *a, const struct cmp_row *b, const char *dl,
                           int diverge)
{
    const struct kv_demo_style *S = &x->S;
    if (wide) {
        printf("%4" PRId32 " %4" PRId32 " | %-*s %4" PRId32 " %9" PRId64 " %8zu %7zu | %-*s %4"
               PRId32 " %9" PRId64 " %8zu %7zu | %s",
               step, T, wa, a->tok, a->fed, a->flops, a->cache, a->written, wb, b->tok, b->fed,
               b->flops, b->cache, b->written, dl);
    } else {
        int w = wa > wb ? wa : wb;
        printf("%4" PRId32 " %5" PRId32 "  %-*s %-8s %4" PRId32 " %9" PRId64 " %7zu %8zu\n", step,
               T, w, na, a->tok, a->fed, a->flops, a->cache, a->written);
        printf("%4s %5s  %-*s %-8s %4" PRId32 " %9" PRId64 " %7zu %8zu  %s", "", "", w, nb,
               b->tok, b->fed, b->flops, b->cache, b->written, dl);
    }
    if (diverge && wide)
        printf("  %s<- tokens diverge%s", S->red, S->reset);
    putchar('\n');
    if (diverge && !wide)
        printf("%12s%s^ the tokens diverge at this step%s\n", "", S->red, S->reset);
}

/* ------------------------------------------------------------------------ */
/* Compare two strategies                                                   */

int kv_demo_compare(struct kv_demo_session *x, const char *na, const void *pa, const char *nb,
                    const void *pb)
{
    struct kv_demo_run A, B;
    memset(&B, 0, sizeof B);
    struct kv_cache_config ca = x->cc_shown[0], cb = x->cc_shown[1];
    enum kv_status s = kv_demo_run_create(&A, na, pa, x->model, &ca, x->B, x->P,
                                          x->max_pos, 1);
    if (s == KV_OK)
        s = kv_demo_run_create(&B, nb, pb, x->model, &cb, x->B, x->P, x->max_pos, 1);
    if (s != KV_OK) {
        fprintf(stderr, "kvlab: demo: cannot set up %s and %s: %s\n", na, nb, kv_status_str(s));
        kv_demo_run_destroy(&A);
        kv_demo_run_destroy(&B);
        return s == KV_ERR_NOMEM ? 1 : 2;
    }
    kv_demo_print_model(x);
    kv_demo_print_cache(x, &A);
    kv_demo_print_cache(x, &B);
    const struct kv_demo_style *S = &x->S;
    const int wa = strlen(na) > 8 ? (int)strlen(na) : 8;
    const int wb = strlen(nb) > 8 ? (int)strlen(nb) : 8;
    const int wide = x->width >= cmp_wide_width(wa, wb);
    print_cmp_header(x, wide, wa, wb, na, nb);
    int32_t diverged = -1, logit_diff = -1, rc = 0;
    float worst = 0.0f;
    int32_t last_step = -1;
    for (int32_t step = 0; step <= x->steps; step++) {
        enum kv_status sa = kv_demo_run_step(&A, step, x->seq_a, x->stride,
                                             x->B > 1 ? x->pad : NULL);
        enum kv_status sb = sa == KV_OK ? kv_demo_run_step(&B, step, x->seq_b, x->stride,
                                                           x->B > 1 ? x->pad : NULL)
                                        : KV_OK;
        if (sa != KV_OK || sb != KV_OK) {
            rc = kv_demo_report_failure(x, sa != KV_OK ? &A : &B, step, sa != KV_OK ? sa : sb);
            break;
        }
        if ((rc = kv_demo_check_logits(x, &A, step)) != 0 ||
            (rc = kv_demo_check_logits(x, &B, step)) != 0)
            break;
        last_step = step;
        const int32_t T = x->P + step;
        size_t V = (size_t)x->model->cfg.vocab_size;
        float d = kv_demo_max_abs_diff(A.logits, B.logits, (size_t)x->B * V);
        int same_hist = diverged < 0;
        /* !(d <= x): a NaN difference counts, it never reads as "rounding" */
        if (same_hist && !(d <= worst))
            worst = d;
        if (same_hist && logit_diff < 0 && !(d <= DEMO_SAME_LOGIT))
            logit_diff = step;
        int same_tok = memcmp(A.next, B.next, (size_t)x->B * sizeof(int32_t)) == 0;
        int show = step == 0 || step == x->steps || x->every == 0 || step % x->every == 0 ||
                   (same_hist && !same_tok);
        if (show) {
            char ta[64], tb[64], dl[48];
            struct cmp_row ra = cmp_row_of(&A, kv_demo_tok_after(x, x->seq_a, 0, T, A.next[0],
                                                                 ta, sizeof ta));
            struct cmp_row rb = cmp_row_of(&B, kv_demo_tok_after(x, x->seq_b, 0, T, B.next[0],
                                                                 tb, sizeof tb));
            if (same_hist)
                snprintf(dl, sizeof dl, "%s%.1e%s", !(d <= DEMO_SAME_LOGIT) ? S->yellow : "",
                         (double)d, S->reset);
            else
                snprintf(dl, sizeof dl, "-");
            print_cmp_step(x, wide, wa, wb, na, nb, step, T, &ra, &rb, dl,
                           same_hist && !same_tok);
        }
        if (same_hist && !same_tok)
            diverged = step;
        kv_demo_append_next(x, x->seq_a, &A, T);
        kv_demo_append_next(x, x->seq_b, &B, T);
    }
    if (last_step >= 0) {
        struct kv_line *L = &x->L;
        printf("\n");
        kv_line_addf(L, "%sverdict%s  ", S->bold, S->reset);
        if (diverged < 0)
            kv_line_addf(L, "%s%s and %s chose the same %" PRId32 " tokens%s", S->green, na, nb,
                         last_step + 1, S->reset);
        else
            kv_line_addf(L, "%stokens diverge at step %" PRId32 " (T = %" PRId32 ")%s", S->red,
                         diverged, x->P + diverged, S->reset);
        kv_line_addf(L, "; max |logit difference| while their inputs were identical: %.2g",
                     (double)worst);
        if (logit_diff >= 0)
            kv_line_addf(L, " (first above %.0e at step %" PRId32 ", T = %" PRId32 ")",
                         (double)DEMO_SAME_LOGIT, logit_diff, x->P + logit_diff);
        else
            kv_line_addf(L, " (float rounding only)");
        kv_demo_emit(x, 9);
        if (kv_demo_bytes_vocab(x)) { /* the text itself, when it is text */
            kv_line_addf(L, "  %s:", diverged >= 0 ? na : "text");
            kv_demo_line_generated(x, x->seq_a, last_step);
            kv_demo_emit(x, 4);
            if (diverged >= 0) {
                kv_line_addf(L, "  %s:", nb);
                kv_demo_line_generated(x, x->seq_b, last_step);
                kv_demo_emit(x, 4);
            }
        }
        kv_line_addf(L, "  FLOPs in total: %s %" PRId64 ", %s %" PRId64 "; cache at the end: "
                        "%s %zu B, %s %zu B; bytes written by updates: %s %zu, %s %zu",
                     na, kv_demo_flops_of(&A.total), nb, kv_demo_flops_of(&B.total), na,
                     kv_cache_resident_bytes(A.cache), nb, kv_cache_resident_bytes(B.cache), na,
                     kv_cache_copied_bytes(A.cache), nb, kv_cache_copied_bytes(B.cache));
        kv_demo_emit(x, 4);
    }
    kv_demo_run_destroy(&A);
    kv_demo_run_destroy(&B);
    return rc;
}
