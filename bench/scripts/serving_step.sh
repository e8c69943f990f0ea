#!/usr/bin/env bash
# serving_step.sh - the decode step inside `kvlab serving`'s scheduler
# against `kvlab sweep`'s for the same batch: per policy of
# bench/data/serving-step.policies and batch B, B requests that arrive
# together (a trace: PROMPT tokens each, TOKENS to generate) are served, and
# the median of the iterations that decode all B (no prefill beside them)
# is set against the sweep's median step and attention time at the middle
# of those positions, each cache a strategy of the same name. Each pair runs
# back to back, in ROUNDS rounds over every policy and batch: the host's
# speed drifts by tens of percent between seconds apart, so one pair alone
# judges the drift more than the scheduler. Another program only ever adds
# time, so each side's fastest round is the one least disturbed, and the
# ratio reported is of those (best over best); the median of the rounds'
# ratios and their range come beside it. Into OUT_DIR/step.csv and
# OUT_DIR/step.md.
#
# usage: serving_step.sh OUT_DIR
# env: KVLAB (build/kvlab), SERVING_STEP_BATCHES (8; 1,8 adds batch 1), SERVING_STEP_PROMPT
#      (256: the caches of 8 requests stay near the L3 size), SERVING_STEP_TOKENS (33),
#      SERVING_STEP_ROUNDS (5), SERVING_STEP_POLICIES
#      (bench/data/serving-step.policies), SERVING_STEP_ARGS (options both
#      commands take: a smaller model, --threads)
# Values reach kvlab as arguments only, never a shell.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: serving_step.sh OUT_DIR" >&2; exit 2; }
out=$1
KVLAB=${KVLAB:-build/kvlab}
BATCHES=${SERVING_STEP_BATCHES:-8}
PROMPT=${SERVING_STEP_PROMPT:-256}
TOKENS=${SERVING_STEP_TOKENS:-33}
ROUNDS=${SERVING_STEP_ROUNDS:-5}
POLICIES=${SERVING_STEP_POLICIES:-$(dirname "$0")/../data/serving-step.policies}
read -r -a extra <<<"${SERVING_STEP_ARGS:-}"
[ -x "$KVLAB" ] || { echo "serving_step: $KVLAB: no such program (make first)" >&2; exit 2; }
[ -r "$POLICIES" ] || { echo "serving_step: $POLICIES: cannot read the policies" >&2; exit 2; }
for v in "$PROMPT" "$TOKENS" "$ROUNDS"; do
    [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "serving_step: '$v': a whole number above 0 (tokens, rounds)" >&2; exit 2; }
done
[ "$TOKENS" -ge 3 ] || { echo "serving_step: SERVING_STEP_TOKENS must be at least 3" >&2; exit 2; }
IFS=, read -r -a batches <<<"$BATCHES"
for b in "${batches[@]}"; do
    [[ $b =~ ^[1-9][0-9]*$ ]] || { echo "serving_step: batch '$b': a whole number above 0" >&2; exit 2; }
done
mid=$((PROMPT + TOKENS / 2)) # the sweep's position: the middle of the decode iterations

mkdir -p "$out"
work=$(mktemp -d "$out/.step.XXXXXX")
trap 'rm -rf "$work"' EXIT
# median of column COL of a CSV's rows where batch == B and no prefill ran
decode_median() {
    awk -F, -v col="$1" -v b="$2" '/^#/ { next } !h { for (i = 1; i <= NF; i++) c[$i] = i; h = 1; next }
        $c["batch"] == b && $c["prefill_tokens"] == 0 { print $c[col] }' "$3" | sort -g |
        awk '{ x[++n] = $1 } END { if (!n) exit 1; printf "%.6g", (n % 2 ? x[(n + 1) / 2] : (x[n / 2] + x[n / 2 + 1]) / 2) }'
}
sweep_col() {
    awk -F, -v col="$1" '/^#/ { next } !h { for (i = 1; i <= NF; i++) c[$i] = i; h = 1; next }
        { printf "%.6g", $c[col]; exit }' "$2"
}
# one line per round: label, batch, then step and attention: the
# scheduler's (seconds, as its CSV has them) and the sweep's (nanoseconds)
: >"$work/rounds.csv"
for ((round = 1; round <= ROUNDS; round++)); do
    while IFS=$'\t' read -r label sargs strategy; do
        case $label in '' | '#'*) continue ;; esac
        [[ $label =~ ^[A-Za-z0-9_.-]+$ ]] || { echo "serving_step: label '$label': letters, digits, . _ - only" >&2; exit 2; }
        [ -n "${strategy:-}" ] || { echo "serving_step: $label: no sweep strategy (the third field)" >&2; exit 2; }
        read -r -a opts <<<"$sargs"
        for b in "${batches[@]}"; do
            { echo "arrival_s,prompt_tokens,output_tokens"
              for ((i = 0; i < b; i++)); do echo "0,$PROMPT,$TOKENS"; done; } >"$work/trace.csv"
            echo "serving_step: round $round of $ROUNDS: $label, batch $b" >&2
            "$KVLAB" serving "${opts[@]}" --trace "$work/trace.csv" --max-batch "$b" --pool-mb 1000000 \
                --quiet --iterations-out "$work/it.csv" "${extra[@]}" >/dev/null
            "$KVLAB" sweep --strategies "$strategy" --batch "$b" --seq-lens "$mid" --no-roofline --quiet \
                --out "$work/sw.csv" "${extra[@]}"
            s_step=$(decode_median step_s "$b" "$work/it.csv") || { echo "serving_step: $label: no iteration decoded all $b" >&2; exit 1; }
            s_attn=$(decode_median attn_s "$b" "$work/it.csv")
            w_step=$(sweep_col step_ns_median "$work/sw.csv")
            w_attn=$(sweep_col attn_ns_median "$work/sw.csv")
            echo "$label,$b,$s_step,$w_step,$s_attn,$w_attn" >>"$work/rounds.csv"
        done
    done <"$POLICIES"
done
# per label and batch, in the policies' order: each column's best round,
# the ratios of the best rounds, and the median and range of the rounds'
# own ratios
echo "label,batch,seq_len,serving_step_s,sweep_step_s,step_ratio,serving_attn_s,sweep_attn_s,attn_ratio,rounds,step_ratio_median,step_ratio_lo,step_ratio_hi,attn_ratio_median,attn_ratio_lo,attn_ratio_hi" >"$work/step.csv"
awk -F, -v OFS=, -v t="$mid" '
    function med(s,   v, n, i, j, x) { n = split(s, v, " ")
        for (i = 2; i <= n; i++) { x = v[i]; for (j = i - 1; j >= 1 && v[j] + 0 > x + 0; j--) v[j + 1] = v[j]; v[j + 1] = x }
        lo = v[1]; hi = v[n]; return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }
    function ratio(a, b) { return b > 0 ? a / b : "nan" }
    { k = $1 SUBSEP $2; if (!(k in n)) order[++nk] = k; n[k]++
      ws = $4 / 1e9; wa = $6 / 1e9
      ss[k] = ss[k] " " $3; sw[k] = sw[k] " " ws; as[k] = as[k] " " $5; aw[k] = aw[k] " " wa
      rs[k] = rs[k] " " ratio($3, ws); ra[k] = ra[k] " " ratio($5, wa) }
    END { for (i = 1; i <= nk; i++) { k = order[i]; split(k, lb, SUBSEP)
            med(ss[k]); s1 = lo; med(sw[k]); s2 = lo; med(as[k]); a1 = lo; med(aw[k]); a2 = lo
            sm = med(rs[k]); slo = lo; shi = hi; am = med(ra[k])
            print lb[1], lb[2], t, s1, s2, ratio(s1, s2), a1, a2, ratio(a1, a2), n[k], sm, slo, shi, am, lo, hi } }' \
    "$work/rounds.csv" >>"$work/step.csv"
{
    grep -m 1 '^# commit=' "$work/sw.csv" || true
    grep -m 1 '^# cpu=' "$work/sw.csv" || true
    echo "# prompt=$PROMPT tokens=$TOKENS rounds=$ROUNDS"
    cat "$work/step.csv"
} >"$work/step.tmp" && mv "$work/step.tmp" "$out/step.csv"
awk -F, '/^#/ { next } !h { h = 1
        print "| policy | batch | T | step in the scheduler (ms) | sweep (ms) | ratio | rounds: median (range) | attention in the scheduler (ms) | sweep (ms) | ratio | rounds: median (range) |"
        print "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"; next }
    { printf "| %s | %d | %d | %.3f | %.3f | %.2f | %.2f (%.2f-%.2f) | %.3f | %.3f | %.2f | %.2f (%.2f-%.2f) |\n", $1, $2, $3, 1e3 * $4, 1e3 * $5, $6, $11, $12, $13, 1e3 * $7, 1e3 * $8, $9, $14, $15, $16 }' \
    "$out/step.csv" >"$work/step.md" && mv "$work/step.md" "$out/step.md"
echo "serving_step: -> $out/step.csv, $out/step.md" >&2
