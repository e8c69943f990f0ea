#!/usr/bin/env bash
# e2e_noise.sh - `kvlab sweep` on a busy machine, end to end (seconds): the
# schema-3 noise columns (step_ns_ci_lo/hi, noisy, noise_reason, attempts)
# and the # noisy_rows metadata, the retries, the warning at the end,
# --strict, and the refusals of its options.
#
# 1. A sweep run as it comes: the columns are there and sane (ci_lo <=
#    median <= ci_hi, noisy 0/1 with a reason exactly when 1, attempts
#    within --retries + 1, no comma in a reason) and agree with the
#    metadata, the warning and the exit status of --strict. Whether rows
#    come out noisy is NOT asserted: a CI machine may be busy.
# 2. The same sweep while busy loops hold every core (one more than there
#    are CPUs, at least 3, each bounded by `timeout`, killed on exit) and
#    thresholds that make detection certain (any CPU time of other programs
#    beyond /proc/stat's tick resolution, any CPU share below 1): rows are
#    re-measured and still flagged, the progress says "busy machine:
#    re-measuring", the warning lists them, and --strict exits 1 with the
#    file written. The timed steps last ~0.1 s a row (301 of them on a
#    4-layer model) so /proc/stat's 10 ms ticks cannot hide the competitors.
# 3. make baseline's per-row median of runs (bench/scripts/median_rows.awk)
#    keeps the interval around the merged median and calls a row noisy when
#    most of its runs were.
# 4. Bad input exits 2 with exactly one line on stderr, before any work:
#    --strict with --retries 0, a negative, NaN, infinite or out-of-range
#    threshold, --strict with --list.
# 5. Part-time competitors (a pinned and three unpinned busy loops in the
#    middle of a run, default thresholds, 2 threads): every attempt that lay
#    wholly inside the loops' interval (the sweep's progress lines, stamped
#    as they arrive, bound each attempt) was called noisy; quiet runs flag
#    at most 5% of rows (asserted when /proc/stat shows the machine was
#    quiet).
# Never asserts on wall time or speed. Usage: KVLAB=build/kvlab bash tests/e2e_noise.sh
set -u
KVLAB=${KVLAB:-build/kvlab}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/kvlab_e2e_noise.XXXXXX")
HOGS=()
cleanup() {
    local p
    for p in "${HOGS[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
check() { # check DESCRIPTION COMMAND...
    local what=$1; shift
    if "$@"; then ok; else bad "$what"; fi
}

SHAPE=(--layers 4 --dim 256 --heads 4 --kv-heads 4 --hidden 512 --vocab 256 --threads 1)
SWEEP=(sweep --strategies dynamic --seq-lens 256,512 --reps 301 --warmup 2 "${SHAPE[@]}"
    --no-roofline)

# col CSV NAME: the column's index, from the header
col() { awk -F, -v n="$2" '/^#/ { next } { for (i = 1; i <= NF; i++) if ($i == n) { print i; exit } }' "$1"; }
# cells CSV NAME: the column's cells, one a line
cells() { awk -F, -v c="$(col "$1" "$2")" '/^#/ || !h++ { next } { print $c }' "$1"; }
# meta CSV KEY: a metadata value
meta() { sed -n "s/^# $2=//p" "$1"; }

# has_reason CSV: a noise_reason names a signal the competitors move
has_reason() { cells "$1" noise_reason | grep -Eq 'other programs used|cpu_util [0-9.]+ \(limit'; }

# sane CSV RETRIES WHAT: the columns' invariants, whatever the machine did
sane() {
    local csv=$1 retries=$2 what=$3 c
    for c in step_ns_ci_lo step_ns_ci_hi noisy noise_reason attempts cpu_util; do
        check "$what: column $c" test -n "$(col "$csv" "$c")"
    done
    check "$what: schema=3" grep -qx '# schema=3' "$csv"
    check "$what: 2 rows" test "$(cells "$csv" seq_len | wc -l)" = 2
    check "$what: every row has the header's field count" \
        awk -F, '!/^#/ { if (n == 0) n = NF; else if (NF != n) exit 1 } END { exit n == 0 }' "$csv"
    check "$what: ci_lo <= step_ns_median <= ci_hi, all > 0" \
        awk -F, -v lo="$(col "$csv" step_ns_ci_lo)" -v m="$(col "$csv" step_ns_median)" \
            -v hi="$(col "$csv" step_ns_ci_hi)" '
            /^#/ || !h++ { next }
            { if (!($lo > 0 && $lo + 0 <= $m + 0 && $m + 0 <= $hi + 0) || $lo !~ /^[0-9]+$/ ||
                  $hi !~ /^[0-9]+$/) bad = 1; n++ }
            END { exit bad || n == 0 }' "$csv"
    check "$what: noisy is 0 or 1, with a reason exactly when 1" \
        awk -F, -v y="$(col "$csv" noisy)" -v r="$(col "$csv" noise_reason)" '
            /^#/ || !h++ { next }
            { if (!(($y == "0" && $r == "-") || ($y == "1" && $r != "-" && $r != ""))) bad = 1 }
            END { exit bad }' "$csv"
    check "$what: attempts within 1..--retries + 1" \
        awk -F, -v a="$(col "$csv" attempts)" -v max=$((retries + 1)) '
            /^#/ || !h++ { next } { if (!($a >= 1 && $a <= max)) bad = 1 } END { exit bad }' "$csv"
    local n_noisy
    n_noisy=$(cells "$csv" noisy | grep -c '^1$')
    check "$what: # noisy_rows=$(meta "$csv" noisy_rows) counts the noisy=1 rows ($n_noisy)" \
        test "$(meta "$csv" noisy_rows)" = "$n_noisy"
}

# ---------------------------------------------------------------- 1. as it comes
"$KVLAB" "${SWEEP[@]}" --retries 2 --out "$TMP/q.csv" >/dev/null 2>"$TMP/q.err"
rc=$?
check "sweep exits 0 (rc=$rc: $(head -c 300 "$TMP/q.err"))" test "$rc" = 0
sane "$TMP/q.csv" 2 "as it comes"
check "the thresholds in the metadata (defaults)" \
    test "$(meta "$TMP/q.csv" noise_max_other_cores),$(meta "$TMP/q.csv" noise_min_util)" = "0.3,0.6"
n=$(meta "$TMP/q.csv" noisy_rows)
if [ "${n:-0}" -gt 0 ]; then
    check "a noisy row is warned about" grep -q "WARNING: $n of 2 rows stayed noisy" "$TMP/q.err"
else
    check "no warning without a noisy row" sh -c "! grep -q WARNING '$TMP/q.err'"
fi
# --strict: exit 1 exactly when a row stayed noisy, the file written either way
"$KVLAB" "${SWEEP[@]}" --strict --quiet --out "$TMP/s.csv" >/dev/null 2>"$TMP/s.err"
rc=$?
n=$(meta "$TMP/s.csv" noisy_rows)
want=0
[ "${n:-0}" -gt 0 ] && want=1
check "--strict exits $want with noisy_rows=$n (rc=$rc: $(head -c 300 "$TMP/s.err"))" test "$rc" = "$want"
sane "$TMP/s.csv" 2 "--strict"

# ---------------------------------------------------------------- 2. busy
ncpu=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
n_hogs=$((ncpu + 1))
[ "$n_hogs" -lt 3 ] && n_hogs=3
[ "$n_hogs" -gt 64 ] && n_hogs=64
for _ in $(seq "$n_hogs"); do
    timeout 60 sh -c 'while :; do :; done' &
    HOGS+=($!)
done
sleep 0.3 # the loops are running before the first row
"$KVLAB" "${SWEEP[@]}" --retries 1 --strict --noise-max-other-cores 0 --noise-min-util 1 \
    --out "$TMP/b.csv" >/dev/null 2>"$TMP/b.err"
rc=$?
# the limits measured while every pass is disturbed: what was seen, with its
# real spread (all passes disturbed once reported one time repeated: spread 0)
"$KVLAB" roofline --csv --reps 5 >"$TMP/rl.csv" 2>/dev/null
rl_rc=$?
for p in "${HOGS[@]}"; do kill "$p" 2>/dev/null; done
wait 2>/dev/null
HOGS=()
check "busy: the file is written ($(head -c 300 "$TMP/b.err"))" test -s "$TMP/b.csv"
if [ -s "$TMP/b.csv" ]; then
    sane "$TMP/b.csv" 1 "busy"
    check "busy: the thresholds given are recorded" \
        test "$(meta "$TMP/b.csv" noise_max_other_cores),$(meta "$TMP/b.csv" noise_min_util)" = "0,1"
    flagged=$(awk -F, -v y="$(col "$TMP/b.csv" noisy)" -v a="$(col "$TMP/b.csv" attempts)" '
        /^#/ || !h++ { next } $y == 1 || $a > 1 { n++ } END { print n + 0 }' "$TMP/b.csv")
    check "busy: every row re-measured or flagged ($flagged of 2)" test "$flagged" = 2
    n=$(meta "$TMP/b.csv" noisy_rows)
    check "busy: rows stayed noisy with the loops on (noisy_rows=$n)" test "${n:-0}" -ge 1
    check "busy: a reason names what was seen" has_reason "$TMP/b.csv"
    check "busy: --strict exits 1 with a row still noisy (rc=$rc)" test "$rc" = 1
    check "busy: the progress says it re-measures" grep -q "busy machine: re-measuring dynamic T=" "$TMP/b.err"
    check "busy: the warning counts the noisy rows" grep -q "WARNING: ${n:-0} of 2 rows stayed noisy" "$TMP/b.err"
    check "busy: the warning lists each noisy row" \
        test "$(grep -c '^  dynamic  *T=[0-9]*  *attempts [0-9]*: ' "$TMP/b.err")" = "${n:-0}"
    check "busy: the warning says --strict made it exit 1" grep -q -- "--strict: exit status 1" "$TMP/b.err"
fi

check "busy: roofline exits 0 (rc=$rl_rc)" test "$rl_rc" = 0
check "busy: roofline's four spreads are not all 0 ($(tail -n 1 "$TMP/rl.csv"))" \
    awk -F, '/^[0-9]/ { z = 0; for (i = 6; i <= 9; i++) z += ($i + 0 == 0); n++ }
             END { exit (n != 1 || z == 4) }' "$TMP/rl.csv"

# ---------------------------------------------------------------- 3. median of runs
# three runs of one sweep: two of them say a row was noisy, one does not
M="$TMP/q.csv"
Y=$(col "$M" noisy) R=$(col "$M" noise_reason)
mark() { # mark IN OUT NOISY REASON: every row's noise columns set
    awk -F, -v OFS=, -v y="$Y" -v r="$R" -v v="$3" -v why="$4" \
        '/^#/ || !h++ { print; next } { $y = v; $r = why; print }' "$1" >"$2"
}
mark "$M" "$TMP/m1.csv" 1 "cpu_util 0.40 (limit 0.60)"
mark "$TMP/s.csv" "$TMP/m2.csv" 0 "-"
mark "$M" "$TMP/m3.csv" 1 "other programs used 0.90 cores (limit 0.30)"
if awk -f bench/scripts/median_rows.awk "$TMP/m1.csv" "$TMP/m2.csv" "$TMP/m3.csv" \
    >"$TMP/med.csv" 2>"$TMP/med.err"; then
    sane "$TMP/med.csv" 2 "median of runs"
    check "median of runs: noisy where 2 of 3 runs were, with the first one's reason" \
        test "$(cells "$TMP/med.csv" noise_reason | sort -u)" = "cpu_util 0.40 (limit 0.60)"
    mark "$TMP/s.csv" "$TMP/m3.csv" 0 "-"
    awk -f bench/scripts/median_rows.awk "$TMP/m1.csv" "$TMP/m2.csv" "$TMP/m3.csv" >"$TMP/med.csv"
    check "median of runs: clean where 1 of 3 runs was noisy" \
        test "$(cells "$TMP/med.csv" noisy | sort -u),$(meta "$TMP/med.csv" noisy_rows)" = "0,0"
else
    bad "median_rows.awk on three schema-3 runs: $(head -c 300 "$TMP/med.err")"
fi

# ---------------------------------------------------------------- 5. part-time competitors
# The default thresholds on 2 threads (the decode team), 8 rows. Loops are
# switched on for the middle of a run: one pinned with taskset to CPU 0,
# three unpinned. The ground truth is time, not speed: each line the sweep
# prints (a row done, or "re-measuring" after a noisy attempt) is stamped
# as it arrives, so every attempt lies between two stamps, and an attempt
# that lay wholly inside the loops' interval was certainly disturbed and
# must have been called noisy. Comparing the loaded run's medians with
# quiet runs instead (the test before) failed on quiet rows: on this host
# a row's median moved by up to 2.2x between quiet runs a minute apart,
# more than the competitors cost a row whose steps they shared only in
# part. Three quiet runs flag at most 5% of their rows, asserted only when
# /proc/stat shows the machine was quiet (other programs under 0.1 cores):
# on a busy CI runner a flag is no false flag.
PART=(sweep --strategies dynamic,static --seq-lens 256,512,1024,2048 --reps 201 --warmup 2
    --layers 4 --dim 256 --heads 4 --kv-heads 4 --hidden 512 --vocab 256 --threads 2
    --no-roofline --retries 2)
busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat; }
# children_s FILE: CPU seconds of this shell's finished children, from what
# bash's `times` wrote to FILE (`times` must run in this shell: in $(...)
# it would count the subshell's children)
children_s() { awk 'NR == 2 { for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); s += a[1] * 60 + a[2] } print s }' "$1"; }
now_ns() { date +%s%N; }
tick=$(getconf CLK_TCK 2>/dev/null || echo 100)
times >"$TMP/times0"
t0=$(now_ns) b0=$(busy_ticks) c0=$(children_s "$TMP/times0")
for i in 1 2 3; do
    "$KVLAB" "${PART[@]}" --quiet --out "$TMP/p$i.csv" >/dev/null 2>"$TMP/p$i.err" ||
        bad "quiet run $i: $(head -c 300 "$TMP/p$i.err")"
done
times >"$TMP/times1"
t1=$(now_ns) b1=$(busy_ticks) c1=$(children_s "$TMP/times1")
other=$(awk -v b="$((b1 - b0))" -v k="$tick" -v c0="$c0" -v c1="$c1" -v w="$((t1 - t0))" \
    'BEGIN { printf "%.2f", (b / k - (c1 - c0)) / (w / 1e9) }')
flags=$(cat "$TMP"/p[123].csv | awk -F, -v y="$(col "$TMP/p1.csv" noisy)" '/^#/ || /^strategy,/ { next } $y == 1 { n++ } END { print n + 0 }')
rows=$(cat "$TMP"/p[123].csv | grep -vc '^#\|^strategy,')
if awk -v o="$other" 'BEGIN { exit !(o < 0.1) }'; then
    check "quiet runs (other programs $other cores): $flags of $rows rows flagged, at most 5%" \
        awk -v f="$flags" -v n="$rows" 'BEGIN { exit !(n == 24 && f <= 0.05 * n) }'
else
    echo "note: other programs used $other cores during the quiet runs; the false-flag check is skipped ($flags of $rows flagged)"
fi
wall_ms=$(((t1 - t0) / 3000000))
# stamp: each line of stdin prefixed with the wall clock when it arrived
stamp() { local l; while IFS= read -r l; do printf '%s %s\n' "$EPOCHREALTIME" "$l"; done; }
(
    "$KVLAB" "${PART[@]}" --out "$TMP/pl.csv" 2>&1 >/dev/null | stamp >"$TMP/pl.log"
    exit "${PIPESTATUS[0]}"
) &
sweep_pid=$!
sleep "$(awk -v w="$wall_ms" 'BEGIN { printf "%.2f", 0.25 * w / 1000 }')"
h_on=$EPOCHREALTIME
if command -v taskset >/dev/null; then
    timeout 60 taskset -c 0 sh -c 'while :; do :; done' &
    HOGS+=($!)
fi
for _ in 1 2 3; do
    timeout 60 sh -c 'while :; do :; done' &
    HOGS+=($!)
done
# The loops stay on until an attempt has lain wholly inside them: two of
# the sweep's lines stamped after they started (a timed window alone, 0.7
# of a quiet run, held none in one CI run of many, when the attempts ran
# long), or until the sweep ends or 60 s pass.
lines_after() { awk -v t="$1" '$1 + 0 > t { n++ } END { print n + 0 }' "$TMP/pl.log"; }
on_from=$(awk -v t="$h_on" 'BEGIN { printf "%.6f", t + 0.05 }')
for _ in $(seq 1200); do
    [ "$(lines_after "$on_from")" -ge 2 ] && break
    kill -0 "$sweep_pid" 2>/dev/null || break
    sleep 0.05
done
for p in "${HOGS[@]}"; do kill "$p" 2>/dev/null; done
h_off=$EPOCHREALTIME
HOGS=()
wait "$sweep_pid"
rc=$?
wait 2>/dev/null
check "part-time competitors: the sweep exits 0 (rc=$rc: $(grep -v '^[0-9.]* sweep: \[' "$TMP/pl.log" | head -c 300))" test "$rc" = 0
if [ -s "$TMP/pl.csv" ] && [ -s "$TMP/pl.log" ]; then
    touched=$(awk -F, -v y="$(col "$TMP/pl.csv" noisy)" -v a="$(col "$TMP/pl.csv" attempts)" '
        /^#/ || !h++ { next } $y == 1 || $a > 1 { n++ } END { print n + 0 }' "$TMP/pl.csv")
    check "part-time competitors: some row saw them ($touched re-measured or flagged)" test "$touched" -ge 1
    # Each attempt: from the stamp of the line before it to the stamp of the
    # line that reports it; a "re-measuring" line reports a noisy attempt, a
    # row's progress line its last attempt, noisy as its CSV row says. The
    # loops need a moment to start (50 ms allowed); a stamp is never before
    # its line, so an attempt's true end is no later than its stamp.
    verdict=$(awk -v on="$h_on" -v off="$h_off" '
        FNR == 1 { f++ }
        f == 1 && /^#/ { next }
        f == 1 && !h++ { n = split($0, v, ","); for (i = 1; i <= n; i++) c[v[i]] = i; next }
        f == 1 { split($0, v, ","); noisy[v[c["strategy"]] " T=" v[c["seq_len"]]] = v[c["noisy"]]; next }
        { t = $1 + 0; k = "" }
        $2 == "sweep:" && $3 ~ /^\[[0-9]+\/[0-9]+\]$/ { k = $4 " " $5; bad = (noisy[k] != 1) }
        $2 == "sweep:" && $5 == "re-measuring" { k = $6 " " $7; bad = 0 }
        k != "" && prev > on + 0.05 && t < off {
            inside++
            if (bad) miss = miss sprintf("%s (%.2f-%.2f s into the loops); ", k, prev - on, t - on) }
        { prev = t }
        END { printf "%d|%s", inside, miss }' "$TMP/pl.csv" "$TMP/pl.log")
    echo "note: part-time competitors: attempts wholly inside the loops: ${verdict%%|*}; the loops ran $(awk -v a="$h_on" -v b="$h_off" 'BEGIN { printf "%.2f", b - a }') s"
    check "part-time competitors: some attempt lay wholly inside the loops' interval (${verdict%%|*} did)" \
        test "${verdict%%|*}" -ge 1
    check "part-time competitors: every attempt wholly inside the loops' interval was called noisy (${verdict#*|})" \
        test -z "${verdict#*|}"
fi

# ---------------------------------------------------------------- 4. bad input
# expect_bad DESCRIPTION PATTERN ARGS...: exit 2, one line on stderr matching PATTERN, no file
expect_bad() {
    local what=$1 pat=$2; shift 2
    rm -f "$TMP/bad.csv"
    "$KVLAB" "${SWEEP[@]}" "$@" >/dev/null 2>"$TMP/bad.err"
    local rc=$?
    check "$what: exit 2 (rc=$rc)" test "$rc" = 2
    check "$what: one line on stderr ($(head -c 300 "$TMP/bad.err"))" test "$(wc -l <"$TMP/bad.err")" = 1
    check "$what: says '$pat'" grep -q -- "$pat" "$TMP/bad.err"
    check "$what: no file" test ! -e "$TMP/bad.csv"
}
expect_bad "--strict --retries 0" "--strict needs --retries" --strict --retries 0 --out "$TMP/bad.csv"
expect_bad "negative --noise-max-other-cores" "--noise-max-other-cores" \
    --noise-max-other-cores -0.5 --out "$TMP/bad.csv"
expect_bad "nan --noise-max-other-cores" "--noise-max-other-cores" \
    --noise-max-other-cores nan --out "$TMP/bad.csv"
expect_bad "inf --noise-min-util" "--noise-min-util" --noise-min-util inf --out "$TMP/bad.csv"
expect_bad "negative --noise-min-util" "--noise-min-util" --noise-min-util -1 --out "$TMP/bad.csv"
expect_bad "--noise-min-util above 1" "--noise-min-util" --noise-min-util 1.5 --out "$TMP/bad.csv"
expect_bad "--strict with --list" "--strict" --strict --list

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
