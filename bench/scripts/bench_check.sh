#!/usr/bin/env bash
# bench_check.sh - the shell of `make baseline` and `make bench-check`.
#
#   bench/scripts/bench_check.sh baseline   the check sweep BASELINE_RUNS times, the
#                                   per-row median (bench/scripts/median_rows.awk)
#                                   saved as BASELINE
#   bench/scripts/bench_check.sh check      the check sweep once into
#                                   out/bench-check.csv, compared with
#                                   BASELINE: the INFO metrics shown, the
#                                   gating METRICS decide; a regression is
#                                   measured once more and fails only if the
#                                   rerun shows it too. Exit 0 no regression,
#                                   1 a confirmed one, 2 no comparison.
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

# compare_all: rc = the worst exit status of the gating comparisons
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
        [ "$r" -gt "$rc" ] && rc=$r
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
    if [ "$rc" -eq 1 ]; then
        echo "bench-check: regression reported; measuring again to rule out a noisy run"
        check_sweep "$CHECK_CSV" || exit 2
        compare_all
    fi
    case $rc in
    0) echo "bench-check: no regression against $BASELINE" ;;
    1) echo "bench-check: REGRESSION against $BASELINE (confirmed by a second run)" >&2 ;;
    *) echo "bench-check: the comparison could not be made (exit $rc)" >&2 ;;
    esac
    exit "$rc"
    ;;
*)
    echo "usage: bench/scripts/bench_check.sh baseline|check (variables from the environment)" >&2
    exit 2
    ;;
esac
