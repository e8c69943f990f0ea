#!/usr/bin/env bash
# e2e_serving.sh - `kvlab serving` end to end on a tiny model (seconds): a
# generated stream and a trace run, their CSVs (a row per request, a row per
# iteration, the pool's split adding up), a fixed-step clock that repeats a
# schedule exactly, a reservation that limits the batch, then every refusal
# the serving issue lists (exit 2, one line, no output file): a rate <= 0,
# NaN or infinite, a pool smaller than one request, a malformed trace
# (unsorted, zero or negative lengths, past the context, an unknown
# prefix), --chunk 0, a strategy that cannot serve. Never asserts on wall
# time. Usage: KVLAB=build/kvlab bash tests/e2e_serving.sh
set -u
KVLAB=${KVLAB:-build/kvlab}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/kvlab_e2e_serving.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
check() { # check DESCRIPTION COMMAND...
    local what=$1; shift
    if "$@"; then ok; else bad "$what"; fi
}
# expect_bad DESCRIPTION PATTERN ARGS...: exit 2, one line matching PATTERN,
# no requests CSV written
expect_bad() {
    local what=$1 pat=$2; shift 2
    rm -f "$TMP/bad.csv"
    "$KVLAB" serving $MODEL "$@" --requests-out "$TMP/bad.csv" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    if [ "$rc" != 2 ]; then bad "$what: exit $rc, want 2 ($(head -c 300 "$TMP/err"))"; return; fi
    if [ "$(wc -l <"$TMP/err")" != 1 ]; then bad "$what: stderr is not one line: $(cat "$TMP/err")"; return; fi
    if ! grep -q -- "$pat" "$TMP/err"; then bad "$what: '$pat' not in: $(cat "$TMP/err")"; return; fi
    if [ -e "$TMP/bad.csv" ]; then bad "$what: a CSV was written"; return; fi
    ok
}
rows() { grep -v '^#' "$1" | tail -n +2 | wc -l; }
col() { awk -F, -v n="$2" '/^#/ { next } !h { for (i = 1; i <= NF; i++) if ($i == n) c = i; h = 1; next } { print $c }' "$1"; }

MODEL="--layers 2 --dim 32 --heads 4 --kv-heads 2 --hidden 48 --vocab 64 --max-len 128 --threads 1"
FIX="--fixed-step-ms 2 --quiet"

# ---------------------------------------------------------------- a generated stream
"$KVLAB" serving $MODEL $FIX --strategy paged --requests 12 --rate 200 --prompt-mean 10 \
    --output-mean 20 --pool-mb 1 --requests-out "$TMP/r.csv" --iterations-out "$TMP/i.csv" \
    --summary-out "$TMP/s.csv" >"$TMP/sum" 2>"$TMP/err"
rc=$?; check "paged stream exits 0 ($(head -c 300 "$TMP/err"))" test "$rc" = 0
check "a row per request" test "$(rows "$TMP/r.csv")" = 12
check "every request's tokens counted" test "$(col "$TMP/r.csv" output_tokens | awk '$1 < 1' | wc -l)" = 0
check "a row per iteration" test "$(rows "$TMP/i.csv")" -gt 12
check "no iteration without a request in its forward" test "$(col "$TMP/i.csv" batch | awk '$1 < 1' | wc -l)" = 0
check "a summary row: 12 requests, the pool, the split of the used pool summing to 1" \
    test "$(awk -F, '/^#/ { next } !h { for (i = 1; i <= NF; i++) c[$i] = i; h = 1; next }
        { s = $c["token_share_used"] + $c["reserved_share_used"] + $c["internal_share_used"] + $c["spare_share_used"]
          print $c["requests"], $c["pool_bytes"], (s > 0.999 && s < 1.001) }' "$TMP/s.csv")" = "12 1048576 1"
check "the summary names the policy" grep -q "^policy paged: 12 requests in " "$TMP/sum"
check "the summary gives the throughput" grep -q "^  throughput: .* requests/s" "$TMP/sum"
check "the summary fits 80 columns" test "$(awk 'length > 80' "$TMP/sum" | wc -l)" = 0
check "first token after arrival, finish after first token" \
    test "$(awk -F, '!/^#/ && NR > 1 && h { if ($3 < $2 || $4 < $3) print } /^id,/ { h = 1 }' "$TMP/r.csv" | wc -l)" = 0
check "the pool's split never passes the pool (1 MiB)" \
    test "$(awk -F, '/^#/ { next } !h { h = 1; next } { if ($9 + $10 + $11 + $12 + $13 != 1048576) print }' "$TMP/i.csv" | wc -l)" = 0
"$KVLAB" serving $MODEL $FIX --strategy paged --requests 12 --rate 200 --prompt-mean 10 \
    --output-mean 20 --pool-mb 1 --requests-out "$TMP/r2.csv" 2>/dev/null >/dev/null
check "a fixed-step clock repeats the schedule" test "$(grep -v '^#' "$TMP/r.csv")" = "$(grep -v '^#' "$TMP/r2.csv")"

# ---------------------------------------------------------------- reservations limit the batch
for how in context exact; do
    "$KVLAB" serving $MODEL $FIX --strategy static --reserve $how --requests 12 --rate 1000 \
        --prompt-mean 10 --output-mean 20 --pool-mb 0.1 >"$TMP/s.$how" 2>"$TMP/err"
    rc=$?; check "static --reserve $how exits 0 ($(head -c 200 "$TMP/err"))" test "$rc" = 0
done
b_ctx=$(sed -n 's/.*peak batch \([0-9]*\),.*/\1/p' "$TMP/s.context")
b_exa=$(sed -n 's/.*peak batch \([0-9]*\),.*/\1/p' "$TMP/s.exact")
check "reserving the context runs fewer at once than reserving exactly ($b_ctx < $b_exa)" test "$b_ctx" -lt "$b_exa"
check "the policy is named by Orca's name" grep -q "static-context (Orca-Max)" "$TMP/s.context"

# ---------------------------------------------------------------- a trace
printf '# a trace\narrival_s,prompt_tokens,output_tokens,prefix_id\n0,12,5,0\n0.001,6,9,\n0.5,20,3,1\n' >"$TMP/t.csv"
"$KVLAB" serving $MODEL $FIX --strategy dynamic --trace "$TMP/t.csv" --prefixes 2 --prefix-len 4 \
    --pool-mb 1 --requests-out "$TMP/tr.csv" >/dev/null 2>"$TMP/err"
rc=$?; check "a trace run exits 0 ($(head -c 300 "$TMP/err"))" test "$rc" = 0
check "a trace run: its 3 requests" test "$(col "$TMP/tr.csv" output_tokens | tr '\n' ' ')" = "5 9 3 "

# ---------------------------------------------------------------- --watch
"$KVLAB" serving $MODEL $FIX --strategy paged --requests 12 --rate 200 --prompt-mean 10 \
    --output-mean 20 --pool-mb 1 --watch 5 --iterations-out "$TMP/w.csv" >"$TMP/w.txt" 2>"$TMP/err"
check "--watch exits 0" test $? = 0
check "--watch: a line every 5 iterations" \
    test "$(grep -c '^it ' "$TMP/w.txt")" = $(( ($(rows "$TMP/w.csv") + 4) / 5 ))
check "--watch: every bar 22 cells of the pool's marks" \
    test "$(grep '^it ' "$TMP/w.txt" | grep -cv '|[#ox~.]\{22\}|')" = 0
check "--watch: every line fits 80 columns" test "$(awk 'length > 80' "$TMP/w.txt" | wc -l)" = 0

# ---------------------------------------------------------------- a shared system prompt
# a fixed step makes the schedules the same; sharing holds the prompt once
for sh in "" --share-prefixes; do
    "$KVLAB" serving $MODEL $FIX --strategy paged --requests 12 --rate 200 --prompt-mean 10 \
        --output-mean 20 --pool-mb 1 --prefixes 1 --prefix-len 40 $sh \
        --iterations-out "$TMP/p$sh.csv" >"$TMP/p$sh.txt" 2>"$TMP/err"
    rc=$?; check "a shared prompt${sh:+, $sh}: exits 0 ($(head -c 300 "$TMP/err"))" test "$rc" = 0
done
check "sharing is named in the policy" grep -q "^policy paged+shared-prefix:" "$TMP/p--share-prefixes.txt"
tok() { col "$1" token_bytes | awk '{ s += $1 } END { print s + 0 }'; }
check "sharing holds fewer token bytes over the run ($(tok "$TMP/p--share-prefixes.csv") < $(tok "$TMP/p.csv"))" \
    test "$(tok "$TMP/p--share-prefixes.csv")" -lt "$(tok "$TMP/p.csv")"

# ---------------------------------------------------------------- make serving's script
SERVING_RATES=50,200 SERVING_REQUESTS=6 SERVING_POOL_MB=0.2 SERVING_WORKLOAD=instruct \
    SERVING_PREFIX_LEN=24 SERVING_PREFIX_RATES=50,200,400 SERVING_STEP_BATCHES=1,3 SERVING_STEP_ROUNDS=2 \
    SERVING_STEP_PROMPT=20 SERVING_STEP_TOKENS=6 SERVING_STEP_ARGS="$MODEL" \
    SERVING_ARGS="$MODEL --fixed-step-ms 2" KVLAB=$KVLAB \
    bash "$(dirname "$0")/../bench/scripts/serving.sh" "$TMP/sv" 2>"$TMP/err"
rc=$?; check "serving.sh exits 0 ($(tail -n 1 "$TMP/err"))" test "$rc" = 0
np=$(grep -cv '^#' "$(dirname "$0")/../bench/data/serving.policies")
check "serving.sh: a row per policy and rate ($np policies x 2)" test "$(rows "$TMP/sv/summary.csv")" = $((np * 2))
first() { sed '/^With a system prompt/,$d' "$TMP/sv/summary.md"; } # the first stream's tables
check "serving.sh: the table has the same rows" \
    test "$(first | awk -F'|' '/^\| [a-z]/ && NF == 12' | wc -l)" = $((np * 2 + 1))
check "serving.sh: a sustained rate per policy, at four bounds" \
    test "$(first | awk -F'|' '/^\| [a-z]/ && NF == 7' | wc -l)" = $((np + 1))
check "serving.sh: an iterations CSV per policy" test "$(ls "$TMP/sv"/iterations-*.csv | wc -l)" = "$np"
check "serving.sh: the timeline holds every policy's iterations" \
    test "$(rows "$TMP/sv/timeline.csv")" = "$(cat "$TMP/sv"/iterations-*.csv | grep -v '^#' | grep -cv '^iteration,')"
npp=$(grep -cv '^#' "$(dirname "$0")/../bench/data/serving-prefix.policies")
check "serving.sh: the shared-prompt stream, a row per policy and rate ($npp policies x 3)" \
    test "$(rows "$TMP/sv/prefix/summary.csv")" = $((npp * 3))
check "serving.sh: its header names the stream" grep -q '^# workload=.* --prefixes 1 --prefix-len 24$' "$TMP/sv/prefix/summary.csv"
check "serving.sh: its table follows the first one" \
    test "$(grep -c '^| policy | rate' "$TMP/sv/summary.md")" = 2
nps=$(grep -cv '^#' "$(dirname "$0")/../bench/data/serving-step.policies")
check "serving.sh: the step against sweep's, a row per policy and batch ($nps x 2)" \
    test "$(rows "$TMP/sv/step.csv")" = $((nps * 2))
check "serving.sh: every step ratio a positive number" \
    test "$(col "$TMP/sv/step.csv" step_ratio | awk '$1 + 0 > 0' | wc -l)" = $((nps * 2))
# the best round over the best round lies between the rounds' own ratios
# (a_i / b_j, i and j the best rounds: at most a_j / b_j, at least a_i / b_i)
check "serving.sh: each step row is of 2 interleaved rounds, its ratios inside their range" \
    test "$(awk -F, '/^#/ { next } !h { for (i = 1; i <= NF; i++) c[$i] = i; h = 1; next }
        function within(r) { return $c[r "_lo"] <= $c[r] * 1.00001 && $c[r] <= $c[r "_hi"] * 1.00001 &&
                                    $c[r "_lo"] <= $c[r "_median"] && $c[r "_median"] <= $c[r "_hi"] }
        $c["rounds"] == 2 && within("step_ratio") && within("attn_ratio")' "$TMP/sv/step.csv" | wc -l)" = $((nps * 2))
check "serving.sh: a step ratio is its best rounds' (serving_step_s / sweep_step_s)" \
    test "$(awk -F, '/^#/ { next } !h { for (i = 1; i <= NF; i++) c[$i] = i; h = 1; next }
        { d = $c["serving_step_s"] / $c["sweep_step_s"] - $c["step_ratio"]; e = $c["serving_attn_s"] / $c["sweep_attn_s"] - $c["attn_ratio"] }
        d * d < 1e-8 && e * e < 1e-8' "$TMP/sv/step.csv" | wc -l)" = $((nps * 2))
SERVING_STEP_ROUNDS=0 KVLAB=$KVLAB bash "$(dirname "$0")/../bench/scripts/serving_step.sh" "$TMP/sv0" 2>"$TMP/err"
rc=$?; check "serving_step.sh refuses 0 rounds, exit 2 ($(head -c 200 "$TMP/err"))" test "$rc" = 2
check "serving.sh: the step table closes summary.md" \
    test "$(tail -n $((nps * 2 + 2)) "$TMP/sv/summary.md" | grep -c '^|')" = $((nps * 2 + 2))
SERVING_RATES=50 SERVING_REQUESTS=2 SERVING_POOL_MB=0.2 SERVING_WORKLOAD=instruct SERVING_PREFIX_LEN=0 \
    SERVING_STEP_BATCHES= \
    SERVING_ARGS="$MODEL --fixed-step-ms 2" KVLAB=$KVLAB \
    bash "$(dirname "$0")/../bench/scripts/serving.sh" "$TMP/sv" 2>"$TMP/err"
check "serving.sh without the second stream leaves none behind" test ! -e "$TMP/sv/prefix"
check "serving.sh without the step check leaves no step table behind" test ! -e "$TMP/sv/step.csv"
check "iterations count from 0" test "$(col "$TMP/i.csv" iteration | head -n 1)" = 0

# ---------------------------------------------------------------- refusals
expect_bad "rate 0" "rate" --strategy paged --rate 0
expect_bad "rate -1" "rate" --strategy paged --rate -1
expect_bad "rate nan" "rate" --strategy paged --rate nan
expect_bad "rate inf" "rate" --strategy paged --rate inf
expect_bad "a pool smaller than one request" "cannot hold request" --strategy static --pool-mb 0.01
expect_bad "--chunk 0" "chunk" --strategy paged --chunk 0
expect_bad "--chunk with a strategy that cannot append in chunks" "KV_CAP_CHUNKED_APPEND" \
    --strategy sliding --window 8 --chunk 4 --prompt-mean 30
expect_bad "a strategy that cannot serve" "none keeps no history.*KV_CAP_KEEPS_HISTORY" --strategy none
expect_bad "no strategy" "needs --strategy"
expect_bad "sharing without prefix groups" "needs prefix groups" --strategy paged --share-prefixes
expect_bad "sharing with a strategy that cannot borrow" "static cannot read.*KV_CAP_BORROW" \
    --strategy static --share-prefixes --prefixes 1 --prefix-len 8
expect_bad "a generator option with --trace" "has no effect" --strategy paged --trace "$TMP/t.csv" --prefixes 2 --rate 3
for case in "unsorted:0,5,5,\n1,5,5,\n0.5,5,5,:arrivals must be sorted" \
    "zero length:0,0,5,:prompt_tokens '0'" "negative length:0,5,-1,:output_tokens '-1'" \
    "past the context:0,100,100,:(100 + 100) pass the model's context of" "unknown prefix:0,10,5,7:names no declared prefix"; do
    name=${case%%:*} rest=${case#*:} body=${rest%:*} pat=${rest##*:}
    printf "arrival_s,prompt_tokens,output_tokens,prefix_id\n$body\n" >"$TMP/bt.csv"
    expect_bad "a trace: $name" "$pat" --strategy paged --trace "$TMP/bt.csv" --prefixes 1 --prefix-len 2
done

echo "e2e_serving: $pass passed, $fail failed"
[ "$fail" = 0 ]
