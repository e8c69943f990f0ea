#!/usr/bin/env bash
# e2e_bench_check.sh - the decisions of `make bench-check`
# (bench/scripts/bench_check.sh check) on scripted verdicts: a stand-in for
# kvlab writes the sweep file and answers each gating `compare` with the
# next exit status of a list, so the rerun rule and the exit statuses are
# checked in a second, without measuring anything. The rules: a regression
# (1) or a noisy result (3) is measured once more; 1 only when both runs
# regress; 3 when the rerun is noisy, or regresses after a noisy first run;
# several gating metrics combine as compare does (2 over 1 over 3 over 0).
# The ab mode (`make bench-check BASE=REV`) under the same rules: its
# rounds alternate base and new (AB BA AB), each side merged per row, it
# gates on the step and attention times where the stored baseline gates
# on attn_vs_rest, and a bad BASE or AB_ROUNDS is refused before anything
# runs.
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
# next status of $FAKE_CODES (0 once they run out); both logged, compare
# with its --metric
# the file is a one-row sweep, so median_rows.awk can merge the ab mode's
# runs; the log names the binary (fake_kvlab, fake_base)
cat >"$TMP/fake_kvlab" <<'EOF'
#!/usr/bin/env bash
case $1 in
sweep)
    prev=
    for a in "$@"; do
        [ "$prev" = --out ] && printf '%s\n' "strategy,seq_len,step_ns_median,step_ns_p95,attn_ns_median" \
            "dynamic,512,1000,1100,400" >"$a"
        prev=$a
    done
    echo "sweep ${0##*/}" >>"$FAKE_LOG" ;;
compare)
    n=$(grep -c '^compare' "$FAKE_LOG")
    prev= metric=
    for a in "$@"; do
        [ "$prev" = --metric ] && metric=$a
        prev=$a
    done
    echo "compare $metric" >>"$FAKE_LOG"
    # shellcheck disable=SC2086
    set -- $FAKE_CODES
    shift "$n" 2>/dev/null || set --
    exit "${1:-0}" ;;
esac
EOF
chmod +x "$TMP/fake_kvlab"
cp "$TMP/fake_kvlab" "$TMP/fake_base"
: >"$TMP/baseline.csv"

# check NAME "CODES" WANT_RC WANT_SWEEPS [METRICS [MODE]]
check() {
    local name=$1 codes=$2 want=$3 sweeps=$4 metrics=${5:-attn_vs_rest:15} mode=${6:-check}
    : >"$TMP/log"
    FAKE_LOG="$TMP/log" FAKE_CODES="$codes" KVLAB="$TMP/fake_kvlab" \
        BASELINE="$TMP/baseline.csv" BENCH_CHECK_ARGS="--quiet" BENCH_CHECK_INFO="" \
        BENCH_CHECK_AB_INFO="" BENCH_CHECK_METRICS="$metrics" \
        BENCH_CHECK_AB_METRICS="${AB_METRICS-$metrics}" CHECK_CSV="$TMP/check.csv" \
        bash "$SCRIPT" "$mode" >"$TMP/out" 2>"$TMP/err"
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

# ---- ab: against a base binary, interleaved --------------------------------
export BASE_KVLAB="$TMP/fake_base" AB_ROUNDS=3
check "ab: clean" "0" 0 6 attn_vs_rest:15 ab
order=$(awk '/^sweep/ { printf "%s", ($2 == "fake_base" ? "A" : "B") }' "$TMP/log")
if [ "$order" = ABBAAB ]; then ok; else bad "ab: sweeps in the order $order, want ABBAAB"; fi
if [ -s "$TMP/check.csv" ] && [ -s "$TMP/check.csv.base" ] &&
    grep -q '^# merged=median of 3 runs' "$TMP/check.csv" &&
    grep -q '^# merged=median of 3 runs' "$TMP/check.csv.base"; then ok; else
    bad "ab: each side not merged from its 3 runs"
fi
if ls "$TMP"/check.csv.base[0-9] "$TMP"/check.csv.new[0-9] >/dev/null 2>&1; then
    bad "ab: the single runs were left behind"
else ok; fi
if grep -q "^bench-check: no regression against BASE=" "$TMP/out"; then ok; else
    bad "ab: the verdict does not name the base: $(tail -n 1 "$TMP/out")"
fi
check "ab: regression confirmed" "1 1" 1 12 attn_vs_rest:15 ab
check "ab: regression not confirmed" "1 0" 0 12 attn_vs_rest:15 ab
check "ab: noisy, then a regression" "3 1" 3 12 attn_vs_rest:15 ab
AB_ROUNDS=1 check "ab: one round" "0" 0 2 attn_vs_rest:15 ab
# what gates: against a stored baseline attn_vs_rest; interleaved, where
# the host's drift falls on both sides, the step and attention times (the
# ratio would read a faster rest of the step as slower attention)
gates() { awk '/^compare/ { printf "%s%s", sep, $2; sep = " " }' "$TMP/log"; }
AB_METRICS='' check "ab: the default gate" "0" 0 6 attn_vs_rest:15 ab
if [ "$(gates)" = "step_ns_median attn_ns_median" ]; then ok; else
    bad "ab: gated on '$(gates)', want 'step_ns_median attn_ns_median'"
fi
AB_METRICS='' check "ab: a slower step" "1 0 1 0" 1 12 attn_vs_rest:15 ab
: >"$TMP/baseline.csv"
AB_METRICS=step_ns_median:15 check "check: the stored baseline's gate" "0" 0 1
if [ "$(gates)" = attn_vs_rest ]; then ok; else bad "check: gated on '$(gates)', want attn_vs_rest"; fi
# refused before anything runs, with one line
for r in 0 -1 x 1.5 ""; do
    AB_ROUNDS=$r check "ab: AB_ROUNDS='$r'" "0" 2 0 attn_vs_rest:15 ab
    if [ "$(wc -l <"$TMP/err")" = 1 ]; then ok; else bad "ab: AB_ROUNDS='$r': not one line: $(cat "$TMP/err")"; fi
done
BASE_KVLAB="$TMP/missing" check "ab: BASE_KVLAB missing" "0" 2 0 attn_vs_rest:15 ab
unset BASE_KVLAB
for b in "" "-x" "no-such-commit-$$" "x'; touch $TMP/pwned; '"; do
    BASE=$b check "ab: BASE='$b'" "0" 2 0 attn_vs_rest:15 ab
    if [ "$(wc -l <"$TMP/err")" = 1 ]; then ok; else bad "ab: BASE='$b': not one line: $(cat "$TMP/err")"; fi
done
[ -e "$TMP/pwned" ] && bad "ab: a BASE value reached a shell"
# make hands BASE to the script through the environment, never in the
# recipe's command line (make -n prints the recipe without running it), and
# a BASE the shell would parse is refused by make itself (mk/guard.mk)
if out=$(make -n --no-print-directory -C "$HERE/.." bench-check BASE=HEAD~1 2>&1); then
    case $out in
    *"BASE=HEAD~1"*) bad "make bench-check: BASE is spliced into the recipe: $(echo "$out" | grep 'HEAD~1')" ;;
    *"bench_check.sh ab"*) ok ;;
    *) bad "make bench-check BASE=..: not the ab mode: $(echo "$out" | tail -n 1)" ;;
    esac
else bad "make -n bench-check failed: $(echo "$out" | tail -n 1)"; fi
out=$(make -n --no-print-directory -C "$HERE/.." bench-check BASE="x'; touch $TMP/pwned2; '" 2>&1)
rc=$?
if [ "$rc" = 2 ] && [ "$(echo "$out" | wc -l)" = 1 ] && [ -z "${out##*BASE holds*}" ] && [ ! -e "$TMP/pwned2" ]; then ok
else bad "make bench-check BASE=\"x'; ..\": not refused in one line (rc=$rc): $out"; fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
