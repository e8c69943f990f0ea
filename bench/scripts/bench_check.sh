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
#   bench/scripts/bench_check.sh ab         the same verdicts against the
#                                   commit BASE (built once into
#                                   build/base/SHA; BASE_KVLAB names a built
#                                   binary instead), measured in the same
#                                   minutes: AB_ROUNDS rounds of one base and
#                                   one new sweep, in the order AB BA AB ..,
#                                   each side merged per row (median) before
#                                   the comparison. A stored baseline ages
#                                   with the host's speed; interleaved runs
#                                   share it.
#
# Exit 0 no regression, 1 a regression both measurements showed, 2 no
# comparison, 3 noisy, re-run: the rerun was noisy too, or regressed after a
# noisy first run (a regression counts only when two measurements in a row
# show it).
#
# What gates: against a stored baseline, attn_vs_rest (BENCH_CHECK_METRICS):
# attention in units of the rest of the same steps, so a host that drifted
# since the baseline cancels. Interleaved (ab), the drift falls on both
# sides, and the ratio would confound a change to the rest of the step with
# attention (a weight GEMV 0.7x as fast read as attention 1.5-1.8x slower,
# with attention itself 0.90-1.20x): there the step and the attention times
# gate (BENCH_CHECK_AB_METRICS) and the ratio is shown (BENCH_CHECK_AB_INFO).
#
# From the environment (the Makefile passes its variables): KVLAB BASELINE
# BASELINE_RUNS BENCH_CHECK_ARGS BENCH_CHECK_METRICS BENCH_CHECK_INFO
# COMPARE_FLAGS, and for ab: BASE or BASE_KVLAB, AB_ROUNDS,
# BENCH_CHECK_AB_METRICS, BENCH_CHECK_AB_INFO.
set -u
: "${KVLAB:?}" "${BENCH_CHECK_ARGS:?}"
BASELINE_RUNS=${BASELINE_RUNS:-3}
BENCH_CHECK_METRICS=${BENCH_CHECK_METRICS:-attn_vs_rest:15}
BENCH_CHECK_INFO=${BENCH_CHECK_INFO:-}
COMPARE_FLAGS=${COMPARE_FLAGS:-}
BASELINE=${BASELINE:-out/baseline.csv}
CHECK_CSV=${CHECK_CSV:-out/bench-check.csv}
AB_ROUNDS=${AB_ROUNDS-3}

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

# build_base: sets base_kvlab to BASE_KVLAB, or to the CLI of the commit
# BASE, built once from `git archive` into build/base/SHA with the default
# flags (the caller's make variables are not passed on)
build_base() {
    if [ -n "${BASE_KVLAB:-}" ]; then
        base_kvlab=$BASE_KVLAB
        [ -x "$base_kvlab" ] && return 0
        echo "bench-check: BASE_KVLAB=$base_kvlab is not an executable" >&2
        return 2
    fi
    local sha dir
    case ${BASE:-} in
    "" | -*)
        echo "bench-check: name the commit to compare with, BASE=REV (or a built binary, BASE_KVLAB=FILE)" >&2
        return 2 ;;
    esac
    if ! sha=$(git rev-parse --verify --quiet "$BASE^{commit}" 2>/dev/null); then
        echo "bench-check: BASE=$BASE is not a commit of this repository" >&2
        return 2
    fi
    dir=build/base/$sha
    base_kvlab=$dir/build/kvlab
    [ -x "$base_kvlab" ] && return 0
    echo "bench-check: building $BASE ($sha) into $dir (log: $dir.log)"
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp" || return 2
    if ! git archive "$sha" | tar -x -C "$dir.tmp"; then
        echo "bench-check: could not extract $BASE into $dir.tmp" >&2
        return 2
    fi
    if ! env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$dir.tmp" -j "$(nproc)" build/kvlab \
        >"$dir.log" 2>&1; then
        echo "bench-check: building $BASE failed (see $dir.log)" >&2
        return 2
    fi
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
}

# measure_ab: AB_ROUNDS interleaved rounds (AB, BA, AB, ..: a drift in the
# host's speed then falls on both sides alike), each side merged per row
# into BASELINE and CHECK_CSV
measure_ab() {
    local r side bases=() news=()
    for r in $(seq "$AB_ROUNDS"); do
        if [ $((r % 2)) = 1 ]; then set -- base new; else set -- new base; fi
        for side in "$@"; do
            if [ "$side" = base ]; then
                KVLAB=$base_kvlab check_sweep "$CHECK_CSV.base$r" || return 2
                bases+=("$CHECK_CSV.base$r")
            else
                check_sweep "$CHECK_CSV.new$r" || return 2
                news+=("$CHECK_CSV.new$r")
            fi
        done
    done
    awk -f bench/scripts/median_rows.awk "${bases[@]}" >"$BASELINE.new" &&
        awk -f bench/scripts/median_rows.awk "${news[@]}" >"$CHECK_CSV.new" || return 2
    mv "$BASELINE.new" "$BASELINE" && mv "$CHECK_CSV.new" "$CHECK_CSV" &&
        rm -f "${bases[@]}" "${news[@]}"
}

# measure: the new side (and in ab mode the base side) once more
measure() {
    if [ "$mode" = ab ]; then measure_ab; else check_sweep "$CHECK_CSV"; fi
}

mode=${1:-}
case $mode in
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
check | ab)
    if [ "$mode" = ab ]; then
        case $AB_ROUNDS in
        "" | *[!0-9]* | 0*)
            echo "bench-check: AB_ROUNDS=$AB_ROUNDS is not a whole number of rounds >= 1" >&2
            exit 2 ;;
        esac
        build_base || exit 2
        BENCH_CHECK_METRICS=${BENCH_CHECK_AB_METRICS:-step_ns_median:15 attn_ns_median:15}
        BENCH_CHECK_INFO=${BENCH_CHECK_AB_INFO-attn_vs_rest:15}
        BASELINE=$CHECK_CSV.base
        against="BASE=${BASE:-$base_kvlab}, measured interleaved"
    else
        if [ ! -f "$BASELINE" ]; then
            echo "bench-check: no $BASELINE (run 'make baseline' first)" >&2
            exit 2
        fi
        against=$BASELINE
    fi
    mkdir -p "$(dirname "$CHECK_CSV")"
    measure || exit 2
    compare_all
    first=$rc
    if [ "$rc" -eq 1 ] || [ "$rc" -eq 3 ]; then
        if [ "$rc" -eq 1 ]; then
            echo "bench-check: regression reported; measuring again to rule out a noisy run"
        else
            echo "bench-check: noisy rows (measured under interference); measuring again"
        fi
        measure || exit 2
        compare_all
        # one regressing run after a noisy one is not yet a confirmation
        [ "$rc" -eq 1 ] && [ "$first" -eq 3 ] && rc=3
    fi
    case $rc in
    0) echo "bench-check: no regression against $against" ;;
    1) echo "bench-check: REGRESSION against $against (confirmed by a second measurement)" >&2 ;;
    3) echo "bench-check: noisy, re-run: no confirmed regression against $against, but the" \
            "measurements were disturbed (noisy rows, see above); run it again on a quieter machine" >&2 ;;
    *) echo "bench-check: the comparison could not be made (exit $rc)" >&2 ;;
    esac
    exit "$rc"
    ;;
*)
    echo "usage: bench/scripts/bench_check.sh baseline|check|ab (variables from the environment)" >&2
    exit 2
    ;;
esac
