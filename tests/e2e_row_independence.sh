#!/usr/bin/env bash
# e2e_row_independence.sh - a row's figures depend on its own configuration
# only (bench/measure/sweep.h), and a sharded sweep is the whole sweep, end to end on
# a tiny model (seconds):
#   - KIVI-2 (and int8/int4) measured alone, with other strategies, with
#     other T, in --shard 1/2 + 2/2 and merged: the same rel_err, max_abs_err
#     and token_match to the last digit (they once changed with the rows
#     around them: a quantized cache carried from one T to the next, and a
#     batch row's tokens depending on the sweep's largest T);
#   - hybrid with a pattern of more than one entry plans, lists and shards
#     (`--layers-pattern sliding:8*1+dynamic --layers 2`); a pattern the
#     model refuses is named with its reason;
#   - merge refuses a shard cut inside its last field and shards whose rows
#     were edited away from their plan, each in one line, exit 2.
# Never asserts on wall time. Usage: KVLAB=build/kvlab bash tests/e2e_row_independence.sh
set -u
KVLAB=${KVLAB:-build/kvlab}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/kvlab_e2e_rows.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
check() { # check DESCRIPTION COMMAND...
    local what=$1; shift
    if "$@"; then ok; else bad "$what"; fi
}
# expect_bad RC DESCRIPTION PATTERN COMMAND...: exit status RC, exactly one
# line on stderr matching PATTERN
expect_bad() {
    local want=$1 what=$2 pat=$3; shift 3
    "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    if [ "$rc" != "$want" ]; then bad "$what: exit $rc, want $want ($(head -c 300 "$TMP/err"))"; return; fi
    if [ "$(wc -l <"$TMP/err")" != 1 ]; then bad "$what: stderr is not one line: $(cat "$TMP/err")"; return; fi
    if ! grep -q -- "$pat" "$TMP/err"; then bad "$what: '$pat' not in: $(cat "$TMP/err")"; return; fi
    ok
}

MODEL="--layers 2 --dim 64 --heads 4 --kv-heads 2 --hidden 128 --vocab 64 --threads 1"
Q="--group 8 --residual 8" # the quantized caches' (head_dim 16)
W="--window 96"            # sliding's
RUN="--reps 3 --warmup 1 --no-roofline --quiet"

# "label seq_len rel_err max_abs_err token_match", one line per row, sorted
errs_of() { # errs_of FILE
    awk -F, '/^#/ { next }
        !h { for (i = 1; i <= NF; i++) c[$i] = i; h = 1; next }
        { print $c["label"], $c["seq_len"], $c["rel_err"], $c["max_abs_err"], $c["token_match"] }' "$1" |
        sort
}
# the lines of A whose label and seq_len are in B, against B (exit 0: equal)
same_rows() { # same_rows A B
    errs_of "$2" >"$TMP/b.rows"
    errs_of "$1" | awk 'NR == FNR { want[$1 " " $2] = 1; next } ($1 " " $2) in want' \
        "$TMP/b.rows" - >"$TMP/a.rows"
    test -s "$TMP/b.rows" && cmp -s "$TMP/a.rows" "$TMP/b.rows"
}
sweep() { # sweep OUT ARGS...
    local out=$1; shift
    # shellcheck disable=SC2086
    "$KVLAB" sweep $MODEL $RUN "$@" --out "$out" 2>"$TMP/sweep.err"
    local rc=$?
    [ "$rc" = 0 ] || echo "note: sweep $* exited $rc: $(head -c 300 "$TMP/sweep.err")"
    return $rc
}

# ---------------------------------------------------------------- row independence
STRATS="dynamic,kivi-2,quantized-int8,quantized-int4,sliding"
# shellcheck disable=SC2086
sweep "$TMP/whole.csv" --strategies "$STRATS" $Q $W --seq-lens 64,128,256
check "the whole sweep runs" test -s "$TMP/whole.csv"
# shellcheck disable=SC2086
sweep "$TMP/kivi.csv" --strategies kivi-2 $Q --seq-lens 64,128,256
check "kivi-2 alone = kivi-2 among others (rel_err, max_abs_err, token_match)" \
    same_rows "$TMP/whole.csv" "$TMP/kivi.csv"
# shellcheck disable=SC2086
sweep "$TMP/kivi128.csv" --strategies kivi-2 $Q --seq-lens 128
check "kivi-2 at T=128 alone = at T=128 after T=64" same_rows "$TMP/whole.csv" "$TMP/kivi128.csv"
# shellcheck disable=SC2086
sweep "$TMP/int4_256.csv" --strategies quantized-int4,sliding $Q $W --seq-lens 256
check "int4 and sliding at T=256 alone = in the whole sweep" \
    same_rows "$TMP/whole.csv" "$TMP/int4_256.csv"
for i in 1 2; do
    # shellcheck disable=SC2086
    sweep "$TMP/shard-$i.csv" --strategies "$STRATS" $Q $W --seq-lens 64,128,256 --shard $i/2
done
"$KVLAB" merge "$TMP/merged.csv" "$TMP/shard-1.csv" "$TMP/shard-2.csv" 2>"$TMP/merge.err"
check "the two shards merge ($(head -c 300 "$TMP/merge.err"))" test -s "$TMP/merged.csv"
check "shards 1/2 + 2/2 = the whole sweep, row for row" same_rows "$TMP/merged.csv" "$TMP/whole.csv"
for i in 1 2; do
    check "shard $i/2's rows = the whole sweep's" same_rows "$TMP/whole.csv" "$TMP/shard-$i.csv"
done
# batch 2: the second sequence's tokens do not depend on the largest T
# shellcheck disable=SC2086
sweep "$TMP/b2.csv" --strategies kivi-2,quantized-int8 $Q --seq-lens 64,128,256 --batch 2
# shellcheck disable=SC2086
sweep "$TMP/b2_128.csv" --strategies kivi-2,quantized-int8 $Q --seq-lens 128 --batch 2
check "batch 2: T=128 alone = T=128 of 64,128,256" same_rows "$TMP/b2.csv" "$TMP/b2_128.csv"

# ---------------------------------------------------------------- hybrid patterns
HY="--strategies hybrid,dynamic --layers-pattern sliding:8*1+dynamic --seq-lens 64,128"
# shellcheck disable=SC2086
"$KVLAB" sweep $MODEL $RUN $HY --list >"$TMP/list" 2>"$TMP/err"
rc=$?
check "hybrid sliding:8*1+dynamic: --list exits 0 ($(head -c 300 "$TMP/err"))" test "$rc" = 0
check "... and lists its 4 rows" test "$(grep -v '^#' "$TMP/list" | tail -n +2 | wc -l)" = 4
# shellcheck disable=SC2086
"$KVLAB" sweep $MODEL $RUN $HY --shard 2/2 --list >"$TMP/list2" 2>"$TMP/err"
rc=$?; check "hybrid: --shard 2/2 --list exits 0 ($(head -c 300 "$TMP/err"))" test "$rc" = 0
# shellcheck disable=SC2086
sweep "$TMP/hy-1.csv" $HY --shard 1/2
check "hybrid: --shard 1/2 runs" test -s "$TMP/hy-1.csv"
# shellcheck disable=SC2086
sweep "$TMP/hy-2.csv" $HY --shard 2/2
"$KVLAB" merge "$TMP/hy.csv" "$TMP/hy-1.csv" "$TMP/hy-2.csv" 2>"$TMP/err"
check "hybrid: its shards merge ($(head -c 300 "$TMP/err"))" test -s "$TMP/hy.csv"
# shellcheck disable=SC2086
sweep "$TMP/hy-whole.csv" $HY
check "hybrid: merged shards = the whole sweep" same_rows "$TMP/hy.csv" "$TMP/hy-whole.csv"
# shellcheck disable=SC2086
expect_bad 2 "a pattern of 4 layers on 2 is named with its reason" "hybrid.*does not divide" \
    "$KVLAB" sweep $MODEL $RUN --strategies hybrid --layers-pattern 'sliding:8*3+dynamic' \
    --seq-lens 64 --list

# ---------------------------------------------------------------- merge checks the plan
S1="$TMP/shard-1.csv" S2="$TMP/shard-2.csv"
# cut inside the last field of the last row: what is left still parses
# (the newline and one byte of the last field, bound_gbps: nan without --bound)
head -c -2 "$S2" >"$TMP/cut-2.csv"
expect_bad 2 "merge of a shard cut mid-field" "cut-2.csv:[0-9]*: .*no newline" \
    "$KVLAB" merge "$TMP/m.csv" "$S1" "$TMP/cut-2.csv"
expect_bad 2 "... also with --allow-partial" "cut-2.csv:[0-9]*: .*no newline" \
    "$KVLAB" merge --allow-partial "$TMP/m.csv" "$S1" "$TMP/cut-2.csv"
check "no merged file from a cut shard" test ! -e "$TMP/m.csv"
# a row's seq_len edited (layer_bytes and all else kept)
awk -F, -v OFS=, '/^#/ { print; next } !h { for (i = 1; i <= NF; i++) if ($i == "seq_len") c = i;
    h = 1; print; next } !d { $c = $c + 1; d = 1 } { print }' "$S1" >"$TMP/edit-1.csv"
expect_bad 2 "merge of a shard with an edited seq_len" "are not the ones shard" \
    "$KVLAB" merge "$TMP/m.csv" "$TMP/edit-1.csv" "$S2"
# a row moved from shard 2 to shard 1 (each file still a valid sweep CSV)
grep -v '^#' "$S2" | sed -n 2p >"$TMP/row"
{ cat "$S1"; cat "$TMP/row"; } >"$TMP/more-1.csv"
{ grep '^#' "$S2"; grep -v '^#' "$S2" | sed 2d; } | grep -v '^# shard_rows=' >"$TMP/less-2.csv"
grep -v '^# shard_rows=' "$TMP/more-1.csv" >"$TMP/more-1b.csv"
expect_bad 2 "merge of shards with a row moved between them" "are not the ones shard" \
    "$KVLAB" merge "$TMP/m.csv" "$TMP/more-1b.csv" "$TMP/less-2.csv"
check "no merged file from edited shards" test ! -e "$TMP/m.csv"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
