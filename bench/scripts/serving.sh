#!/usr/bin/env bash
# serving.sh - `make serving`: every policy of bench/data/serving.policies
# at every request rate, each a `kvlab serving` run of the same generated
# stream (one seed), into OUT_DIR/summary.csv (one row per policy and rate)
# and OUT_DIR/summary.md (the table, and the highest rate each policy
# sustains within twice the best normalized latency at the lowest rate), and each policy's per-iteration CSV at
# the middle rate (OUT_DIR/iterations-LABEL.csv: batch and pool over time).
# Then the same for a stream whose requests share a system prompt (one
# prefix group), with the policies of bench/data/serving-prefix.policies
# (one cache with and without sharing it), into OUT_DIR/prefix/, its table
# appended to OUT_DIR/summary.md. Last, the decode step inside the
# scheduler against `kvlab sweep`'s at the same batch (serving_step.sh,
# SERVING_STEP_* there; SERVING_STEP_BATCHES empty skips it), its table
# appended too.
#
# usage: serving.sh OUT_DIR
# env: KVLAB (build/kvlab), SERVING_RATES (1,2,4,8), SERVING_REQUESTS (12),
#      SERVING_WORKLOAD (chat), SERVING_POOL_MB (128), SERVING_MAX_BATCH (32),
#      SERVING_POLICIES (bench/data/serving.policies), SERVING_ARGS (more
#      `kvlab serving` options, e.g. a smaller model or --threads),
#      SERVING_PREFIX_LEN (512 tokens of system prompt; 0: no such stream),
#      SERVING_PREFIX_RATES (2,4,8), SERVING_PREFIX_REQUESTS (8),
#      SERVING_PREFIX_POLICIES
#      (bench/data/serving-prefix.policies)
# The defaults fit `make bench` (about 3 minutes on 2 cores; the second
# stream's requests are fewer and longer): a pool of 128
# MiB holds one request reserved at the default model's whole context (8192
# tokens of 16 KiB), so reservation, not the pool's size, limits static-max.
# Values from the environment and the policies file reach kvlab as
# arguments only, never a shell.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: serving.sh OUT_DIR" >&2; exit 2; }
out=$1
KVLAB=${KVLAB:-build/kvlab}
RATES=${SERVING_RATES:-1,2,4,8}
REQUESTS=${SERVING_REQUESTS:-12}
WORKLOAD=${SERVING_WORKLOAD:-chat}
POOL=${SERVING_POOL_MB:-128}
BATCH=${SERVING_MAX_BATCH:-32}
POLICIES=${SERVING_POLICIES:-$(dirname "$0")/../data/serving.policies}
PREFIX_LEN=${SERVING_PREFIX_LEN:-512}
PREFIX_RATES=${SERVING_PREFIX_RATES:-2,4,8}
PREFIX_REQUESTS=${SERVING_PREFIX_REQUESTS:-8}
PREFIX_POLICIES=${SERVING_PREFIX_POLICIES:-$(dirname "$0")/../data/serving-prefix.policies}
read -r -a extra <<<"${SERVING_ARGS:-}"
[ -x "$KVLAB" ] || { echo "serving: $KVLAB: no such program (make first)" >&2; exit 2; }
[[ $PREFIX_LEN =~ ^[0-9]+$ ]] || { echo "serving: SERVING_PREFIX_LEN '$PREFIX_LEN': a whole number of tokens" >&2; exit 2; }

# run_policies OUT_DIR POLICIES RATES REQUESTS [kvlab options...]: one
# stream, every policy at every rate (the header says what the stream was)
run_policies() {
    local out=$1 policies=$2 rates_csv=$3 requests=$4 label args rate f l
    shift 4
    local -a stream=("$@") rates opts it
    [ -r "$policies" ] || { echo "serving: $policies: cannot read the policies" >&2; exit 2; }
    IFS=, read -r -a rates <<<"$rates_csv"
    [ ${#rates[@]} -ge 1 ] || { echo "serving: no request rate given" >&2; exit 2; }
    local mid=${rates[$(((${#rates[@]} - 1) / 2))]}
    mkdir -p "$out"
    work=$(mktemp -d "$out/.serving.XXXXXX")
    local n=0
    while IFS=$'\t' read -r label args; do
        case $label in '' | '#'*) continue ;; esac
        [[ $label =~ ^[A-Za-z0-9_.-]+$ ]] || { echo "serving: label '$label': letters, digits, . _ - only" >&2; exit 2; }
        read -r -a opts <<<"$args"
        for rate in "${rates[@]}"; do
            n=$((n + 1))
            it=()
            [ "$rate" = "$mid" ] && it=(--iterations-out "$work/iterations-$label.csv")
            echo "serving: $label at $rate requests/s" >&2
            "$KVLAB" serving "${opts[@]}" --rate "$rate" --requests "$requests" --workload "$WORKLOAD" \
                --pool-mb "$POOL" --max-batch "$BATCH" --quiet --summary-out "$work/run-$n.csv" \
                "${it[@]}" "${stream[@]}" "${extra[@]}" >"$work/run-$n.txt"
            # the CSV's policy column carries the label the table and plots use
            awk -F, -v OFS=, -v l="$label" '/^#/ { next } !h { h = 1; if (!hd) print; next } { $1 = l; print }' \
                hd="$([ $n -gt 1 ] && echo 1 || echo 0)" "$work/run-$n.csv" >>"$work/summary.csv"
        done
    done <"$policies"
    [ $n -gt 0 ] || { echo "serving: $policies names no policy" >&2; exit 2; }
    # the latency a policy must stay within to sustain a rate: twice the best
    # median normalized latency any policy had at the lowest rate
    bound=$(awk -F, '!h { for (i = 1; i <= NF; i++) c[$i] = i; h = 1; next }
        { r = $c["rate"] + 0; l = $c["norm_latency_p50_s"] + 0
          if (!n++ || r < rmin) { rmin = r; best = l } else if (r == rmin && l < best) best = l }
        END { if (n) printf "%.6g", 2 * best }' "$work/summary.csv")
    {
        grep -m 1 '^# commit=' "$work/run-1.csv" || true
        grep -m 1 '^# cpu=' "$work/run-1.csv" || true
        echo "# workload=$WORKLOAD requests=$requests pool_mb=$POOL max_batch=$BATCH${stream[*]:+ ${stream[*]}}"
        echo "# latency_bound_s=$bound"
        cat "$work/summary.csv"
    } >"$work/summary.tmp" && mv "$work/summary.tmp" "$out/summary.csv"
    awk -F, -f "$(dirname "$0")/serving_table.awk" "$out/summary.csv" >"$work/summary.md"
    mv "$work/summary.md" "$out/summary.md"
    # every policy's iterations at the middle rate in one file, a policy column
    # first (what plots/serving_timeline.gp draws)
    for f in "$work"/iterations-*.csv; do
        [ -e "$f" ] || continue
        l=$(basename "$f" .csv); l=${l#iterations-}
        awk -F, -v l="$l" '/^#/ { next } !h { h = 1; if (!hd) print "policy," $0; next } { print l "," $0 }' \
            hd="$([ -s "$work/timeline.csv" ] && echo 1 || echo 0)" "$f" >>"$work/timeline.csv"
        mv "$f" "$out/"
    done
    { echo "# rate=$mid"; cat "$work/timeline.csv"; } >"$out/timeline.csv"
    rm -rf "$work"
    echo "serving: $n runs -> $out/summary.csv, $out/summary.md" >&2
}

work=
trap '[ -z "$work" ] || rm -rf "$work"' EXIT
run_policies "$out" "$POLICIES" "$RATES" "$REQUESTS"
if [ "$PREFIX_LEN" -gt 0 ]; then
    run_policies "$out/prefix" "$PREFIX_POLICIES" "$PREFIX_RATES" "$PREFIX_REQUESTS" --prefixes 1 --prefix-len "$PREFIX_LEN"
    { echo; echo "With a system prompt of $PREFIX_LEN tokens shared by every request (one prefix group; \`make serving\`'s second stream):"
      echo; cat "$out/prefix/summary.md"; } >>"$out/summary.md"
else
    rm -rf "$out/prefix" # no stale second stream beside this run's first
fi
rm -f "$out/step.csv" "$out/step.md"
if [ -n "${SERVING_STEP_BATCHES-8}" ]; then
    KVLAB=$KVLAB bash "$(dirname "$0")/serving_step.sh" "$out"
    { echo; echo "The decode step inside the scheduler against \`kvlab sweep\` at the same batch (the median of the iterations that decode every request, no prefill beside them; each side's fastest of the interleaved rounds, as another program only adds time, and the median and range of the rounds' own ratios; bench/scripts/serving_step.sh):"
      echo; cat "$out/step.md"; } >>"$out/summary.md"
fi
