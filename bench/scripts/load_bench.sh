#!/usr/bin/env bash
# load_bench.sh - the decode step quiet and under CPU-bound competitors, for
# 1 and 2 threads, in one run: how far a busy machine slows the step, and
# whether the 2-thread step stays within 2x the quiet 1-thread step and
# never worse than the 1-thread step under the same load (make bench-load).
#
# usage: load_bench.sh OUT_DIR [RUNTIME...]
#   RUNTIME: LABEL=BINARY[,VAR=VALUE...], a kvlab binary and the environment
#   it runs with (default: kvlab=$KVLAB). Several runtimes are measured in
#   the same rounds, interleaved, so their ratios come from the same run:
#     load_bench.sh out/load pool=build/kvlab omp=old/kvlab omp-passive=old/kvlab,OMP_WAIT_POLICY=passive
# env: COMPETITORS (3), ROUNDS (3), REPS (15), SEQ_LENS (512,4096),
#      STRATEGIES (bench/data/load.strategies), THREADS (1,2)
# writes OUT_DIR/load.csv (one row per measurement) and OUT_DIR/load.md (the
# medians over rounds and their ratios).
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: load_bench.sh OUT_DIR [LABEL=BINARY[,VAR=VALUE...]]..." >&2; exit 2; }
out=$1; shift
[ $# -ge 1 ] || set -- "kvlab=${KVLAB:-build/kvlab}"
COMPETITORS=${COMPETITORS:-3} ROUNDS=${ROUNDS:-3} REPS=${REPS:-15}
SEQ_LENS=${SEQ_LENS:-512,4096} THREADS=${THREADS:-1,2}
STRATEGIES=${STRATEGIES:-$(grep -v '^#' "$(dirname "$0")/../data/load.strategies" | head -n 1)}
[ -n "$STRATEGIES" ] || { echo "load_bench: no strategies (bench/data/load.strategies)" >&2; exit 2; }
for v in COMPETITORS ROUNDS REPS; do
    [[ ${!v} =~ ^[0-9]+$ ]] || { echo "load_bench: $v must be a whole number" >&2; exit 2; }
done

labels=() bins=() envs=()
for spec in "$@"; do
    [[ $spec == *=* ]] || { echo "load_bench: '$spec' is not LABEL=BINARY[,VAR=VALUE...]" >&2; exit 2; }
    label=${spec%%=*} rest=${spec#*=}
    [[ $label =~ ^[A-Za-z0-9_.-]+$ ]] || { echo "load_bench: label '$label': letters, digits, . _ - only" >&2; exit 2; }
    IFS=, read -r -a parts <<<"$rest"
    [ -x "${parts[0]}" ] || { echo "load_bench: ${parts[0]}: no such program (make first)" >&2; exit 2; }
    for kv in "${parts[@]:1}"; do
        [[ $kv =~ ^[A-Z_][A-Z0-9_]*=[^,]*$ ]] || { echo "load_bench: '$kv' is not VAR=VALUE" >&2; exit 2; }
    done
    labels+=("$label") bins+=("${parts[0]}") envs+=("${parts[*]:1}")
done

mkdir -p "$out"
work=$(mktemp -d "$out/.load.XXXXXX")
pids=()
stop_competitors() {
    [ ${#pids[@]} -eq 0 ] || { kill "${pids[@]}" 2>/dev/null || true; wait "${pids[@]}" 2>/dev/null || true; }
    pids=()
}
trap 'stop_competitors; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
start_competitors() {
    for ((i = 0; i < COMPETITORS; i++)); do
        ( while :; do :; done ) &
        pids+=($!)
    done
    sleep 0.5 # let the scheduler spread them
}

csv=$work/load.csv
echo "runtime,strategy,seq_len,threads,load,round,step_ns_median,cpu_util,noisy" >"$csv"
IFS=, read -r -a tlist <<<"$THREADS"
echo "load_bench: $(nproc) CPUs, ${#labels[@]} runtime(s), $ROUNDS rounds, $COMPETITORS competitors" >&2
for ((r = 1; r <= ROUNDS; r++)); do
    for load in quiet loaded; do
        [ "$load" = quiet ] || start_competitors
        for ((x = 0; x < ${#labels[@]}; x++)); do
            for t in "${tlist[@]}"; do
                f=$work/r$r-$load-${labels[x]}-t$t.csv
                read -r -a e <<<"${envs[x]}"
                env ${e[@]+"${e[@]}"} "${bins[x]}" sweep --strategies "$STRATEGIES" --seq-lens "$SEQ_LENS" \
                    --reps "$REPS" --threads "$t" --retries 0 --no-roofline --quiet --out "$f" \
                    2>"$f.err" || { echo "load_bench: ${labels[x]} failed: $(tail -n 1 "$f.err")" >&2; exit 1; }
                awk -F, -v OFS=, -v rt="${labels[x]}" -v ld="$load" -v r="$r" '
                    /^#/ { next }
                    !h { for (i = 1; i <= NF; i++) c[$i] = i; h = 1; next }
                    { print rt, $c["strategy"], $c["seq_len"], $c["threads"], ld, r,
                             $c["step_ns_median"], $c["cpu_util"], $c["noisy"] }' "$f" >>"$csv"
            done
        done
        stop_competitors
        echo "load_bench: round $r $load done" >&2
    done
done

# the medians over rounds, and the ratios the targets are about
awk -F, -v comp="$COMPETITORS" '
    NR == 1 { next }
    { k = $1 SUBSEP $2 SUBSEP $3; keys[k] = 1
      v = $4 "t-" $5; n[k, v]++; x[k, v, n[k, v]] = $7 }
    function med(k, v,   m, i, j, t, a) {
        m = n[k, v]; if (m == 0) return ""
        for (i = 1; i <= m; i++) a[i] = x[k, v, i]
        for (i = 2; i <= m; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
        return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
    }
    function ms(v) { return v == "" ? "-" : sprintf("%.2f", v / 1e6) }
    function ratio(a, b) { return a == "" || b == "" || b == 0 ? "-" : sprintf("%.2fx", a / b) }
    END {
        print "| runtime | strategy | T | 1 thread quiet (ms) | 2 threads quiet | 1 thread, " comp " competitors | 2 threads, " comp " competitors | loaded 2t / quiet 1t (target <= 2x) | loaded 2t / loaded 1t (target <= 1x) |"
        print "|---|---|---:|---:|---:|---:|---:|---:|---:|"
        nk = 0; for (k in keys) ks[++nk] = k
        for (i = 2; i <= nk; i++) { t = ks[i]; for (j = i - 1; j >= 1 && ks[j] > t; j--) ks[j + 1] = ks[j]; ks[j + 1] = t }
        for (i = 1; i <= nk; i++) {
            k = ks[i]; split(k, f, SUBSEP)
            q1 = med(k, "1t-quiet"); q2 = med(k, "2t-quiet"); l1 = med(k, "1t-loaded"); l2 = med(k, "2t-loaded")
            printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", f[1], f[2], f[3], ms(q1), ms(q2), ms(l1), ms(l2), ratio(l2, q1), ratio(l2, l1)
        }
    }' "$csv" >"$work/load.md"
mv "$csv" "$out/load.csv"
mv "$work/load.md" "$out/load.md"
cat "$out/load.md"
echo "load_bench: $out/load.csv, $out/load.md (medians over $ROUNDS rounds of $REPS-step medians)" >&2
