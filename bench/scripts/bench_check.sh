#!/usr/bin/env bash
# bench_check.sh - the shell of `make baseline` and `make bench-check`.
#
#   bench/scripts/bench_check.sh baseline   the check sweep BASELINE_RUNS times, the
#                                   per-row median (bench/scripts/median_rows.awk)
#                                   saved as BASELINE
#   bench/scripts/bench_check.sh check      the check sweep once into
#                                   out/bench-check.csv, compared with
#                                   BASELINE: the INFO metrics shown, the
#                                   gating METRICS decide; a regression or a
#                                   noisy result is measured once more.
#                                   Exit 0 no regression, 1 a regression
#                                   both runs showed, 2 no comparison, 3
#                                   noisy, re-run: the rerun was noisy too,
#                                   or regressed after a noisy first run (a
#                                   regression counts only when two runs in
#                                   a row show it).
#
# From the environment (the Makefile passes its variables): KVLAB BASELINE
# BASELINE_RUNS BENCH_CHECK_ARGS BENCH_CHECK_METRICS BENCH_CHECK_INFO
# COMPARE_FLAGS.
set -u
: "${KVLAB:?}" "${BASELINE:?}" "${BENCH_CHECK_ARGS:?}"
BASELINE_RUNS=${BASELINE_RUNS:-3}
BENCH_CHECK_METRICS=${BENCH_CHECK_METRICS:-attn_vs_rest:15}
BENCH_CHECK_INFO=${BENCH_CHECK_INFO:-}
COMPARE_FLAGS=${COMPARE_FLAGS:-}
CHECK_CSV=${CHECK_CSV:-out/bench-check.csv}

# check_sweep FILE: the check sweep into FILE (written atomically by kvlab)
check_sweep() {
    echo "$KVLAB sweep $BENCH_CHECK_ARGS --out $1"
    # shellcheck disable=SC2086
    "$KVLAB" sweep $BENCH_CHECK_ARGS --out "$1"
}

# combine A B: the verdict of two gating comparisons by kvlab compare's
# own precedence: 2 (no comparison; any status it does not name counts so)
# over 1 (a clean regression) over 3 (noisy, re-run) over 0
combine() {
    local s
    for s in 2 1 3; do
        case " $1 $2 " in *" $s "*) echo "$s"; return ;; esac
    done
    case "$1$2" in 00) echo 0 ;; *) echo 2 ;; esac
}

# compare_all: rc = the gating comparisons' verdicts combined
compare_all() {
    local mt r
    for mt in $BENCH_CHECK_INFO; do
        echo "[for information, not gating]"
        # shellcheck disable=SC2086
        "$KVLAB" compare "$BASELINE" "$CHECK_CSV" --normalize --aggregate \
            --metric "${mt%%:*}" --threshold "${mt##*:}" $COMPARE_FLAGS
        echo
    done
    rc=0
    for mt in $BENCH_CHECK_METRICS; do
        echo "[gate]"
        # shellcheck disable=SC2086
        "$KVLAB" compare "$BASELINE" "$CHECK_CSV" --normalize --aggregate \
            --metric "${mt%%:*}" --threshold "${mt##*:}" $COMPARE_FLAGS
        r=$?
        rc=$(combine "$rc" "$r")
        echo
    done
}

case "${1:-}" in
baseline)
    mkdir -p "$(dirname "$BASELINE")"
    runs=()
    for i in $(seq "$BASELINE_RUNS"); do
        check_sweep "$BASELINE.run$i" || exit 1
        runs+=("$BASELINE.run$i")
    done
    echo "awk -f bench/scripts/median_rows.awk ${runs[*]} >$BASELINE.new"
    awk -f bench/scripts/median_rows.awk "${runs[@]}" >"$BASELINE.new" || exit 1
    mv "$BASELINE.new" "$BASELINE" && rm -f "${runs[@]}"
    echo "baseline: saved $BASELINE (median of $BASELINE_RUNS runs)"
    ;;
check)
    if [ ! -f "$BASELINE" ]; then
        echo "bench-check: no $BASELINE (run 'make baseline' first)" >&2
        exit 2
    fi
    mkdir -p "$(dirname "$CHECK_CSV")"
    check_sweep "$CHECK_CSV" || exit 2
    compare_all
    first=$rc
    if [ "$rc" -eq 1 ] || [ "$rc" -eq 3 ]; then
        if [ "$rc" -eq 1 ]; then
            echo "bench-check: regression reported; measuring again to rule out a noisy run"
        else
            echo "bench-check: noisy rows (measured under interference); measuring again"
        fi
        check_sweep "$CHECK_CSV" || exit 2
        compare_all
        # one regressing run after a noisy one is not yet a confirmation
        [ "$rc" -eq 1 ] && [ "$first" -eq 3 ] && rc=3
    fi
    case $rc in
    0) echo "bench-check: no regression against $BASELINE" ;;
    1) echo "bench-check: REGRESSION against $BASELINE (confirmed by a second run)" >&2 ;;
    3) echo "bench-check: noisy, re-run: no confirmed regression against $BASELINE, but the" \
            "measurements were disturbed (noisy rows, see above); run it again on a quieter machine" >&2 ;;
    *) echo "bench-check: the comparison could not be made (exit $rc)" >&2 ;;
    esac
    exit "$rc"
    ;;
*)
    echo "usage: bench/scripts/bench_check.sh baseline|check (variables from the environment)" >&2
    exit 2
    ;;
esac
