#!/usr/bin/env bash
# e2e_bench_check.sh - the decisions of `make bench-check`
# (bench/scripts/bench_check.sh check) on scripted verdicts: a stand-in for
# kvlab writes the sweep file and answers each gating `compare` with the
# next exit status of a list, so the rerun rule and the exit statuses are
# checked in a second, without measuring anything. The rules: a regression
# (1) or a noisy result (3) is measured once more; 1 only when both runs
# regress; 3 when the rerun is noisy, or regresses after a noisy first run;
# several gating metrics combine as compare does (2 over 1 over 3 over 0).
# Usage: bash tests/e2e_bench_check.sh (KVLAB is not used: nothing runs)
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
SCRIPT="$HERE/../bench/scripts/bench_check.sh"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/kvlab_e2e_bench_check.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# the stand-in: `sweep ... --out F` creates F; `compare` exits with the
# next status of $FAKE_CODES (0 once they run out); both logged
cat >"$TMP/fake_kvlab" <<'EOF'
#!/usr/bin/env bash
case $1 in
sweep)
    prev=
    for a in "$@"; do [ "$prev" = --out ] && : >"$a"; prev=$a; done
    echo sweep >>"$FAKE_LOG" ;;
compare)
    n=$(grep -c '^compare' "$FAKE_LOG")
    echo compare >>"$FAKE_LOG"
    # shellcheck disable=SC2086
    set -- $FAKE_CODES
    shift "$n" 2>/dev/null || set --
    exit "${1:-0}" ;;
esac
EOF
chmod +x "$TMP/fake_kvlab"
: >"$TMP/baseline.csv"

# check NAME "CODES" WANT_RC WANT_SWEEPS [METRICS]
check() {
    local name=$1 codes=$2 want=$3 sweeps=$4 metrics=${5:-attn_vs_rest:15}
    : >"$TMP/log"
    FAKE_LOG="$TMP/log" FAKE_CODES="$codes" KVLAB="$TMP/fake_kvlab" \
        BASELINE="$TMP/baseline.csv" BENCH_CHECK_ARGS="--quiet" BENCH_CHECK_INFO="" \
        BENCH_CHECK_METRICS="$metrics" CHECK_CSV="$TMP/check.csv" \
        bash "$SCRIPT" check >"$TMP/out" 2>"$TMP/err"
    local rc=$? n
    n=$(grep -c '^sweep' "$TMP/log")
    if [ "$rc" = "$want" ] && [ "$n" = "$sweeps" ]; then ok; else
        bad "$name: exit $rc after $n sweeps, want $want after $sweeps ($(tail -n 1 "$TMP/err"))"
    fi
}

check "clean" "0" 0 1
check "regression confirmed" "1 1" 1 2
check "regression not confirmed" "1 0" 0 2
check "regression, then noisy" "1 3" 3 2
check "noisy, then clean" "3 0" 0 2
check "noisy twice" "3 3" 3 2
if grep -q "^bench-check: noisy, re-run: " "$TMP/err"; then ok; else bad "noisy twice: no 'noisy, re-run' line: $(cat "$TMP/err")"; fi
if grep -q "noisy rows (measured under interference); measuring again" "$TMP/out"; then ok; else bad "noisy twice: the rerun not announced"; fi
check "noisy, then a regression" "3 1" 3 2
check "no comparison" "2" 2 1
check "a crash is no comparison" "139" 2 1
# two gating metrics: a clean regression beside a noisy one is a regression
check "two metrics" "3 1 1 3" 1 2 "attn_vs_rest:15 step_ns_median:10"
check "two metrics, 2 wins" "1 2" 2 1 "attn_vs_rest:15 step_ns_median:10"
check "two metrics, noisy" "0 3 3 0" 3 2 "attn_vs_rest:15 step_ns_median:10"
rm -f "$TMP/baseline.csv"
check "no baseline" "0" 2 0

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
