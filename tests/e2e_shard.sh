#!/usr/bin/env bash
# e2e_shard.sh - a sweep split into shards and joined again, end to end on a
# tiny model (seconds): `kvlab sweep --shard I/N` run the no-scheduler way
# (xargs, one shard at a time), `kvlab merge`, and the merged file against an
# unsharded run of the same sweep: the same keys, row for row and in the same
# order, and the same exact columns (FLOPs, bytes, cache bytes, copies; the
# timings differ); compare, every plot and the report read the merged file. Then
# `--list`, the bad --shard values (exit 2, one line) and every refusal of
# merge (partial, missing shard, repeated key, mixed commit, not a kvlab
# CSV, output = input), each also with its permission where there is one.
# Never asserts on wall time. Usage: KVLAB=build/kvlab bash tests/e2e_shard.sh
set -u
KVLAB=${KVLAB:-build/kvlab}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/kvlab_e2e_shard.XXXXXX")
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

MODEL="--layers 2 --dim 64 --heads 4 --kv-heads 2 --hidden 128 --vocab 64 --window 96 \
--group 8 --residual 8 --threads 2"
STRATS="none,dynamic,dynamic-concat,static,sliding,quantized-int8,quantized-int4"
SWEEP="$MODEL --strategies $STRATS --seq-lens 64,128,256,512 --none-max 256 --reps 3 \
--warmup 1 --no-roofline --quiet"
N=4
# exact columns: everything but times, RSS, CPU share and the measured error
EXACT="strategy layers dim heads kv_heads head_dim hidden batch window bits group residual \
threads seq_len reps flops_step attn_flops_step bytes_step cache_bytes copy_bytes_step \
label mlp warmup seq_len_lo seq_len_hi gemm_flops_step attn_bytes_step"

# ---------------------------------------------------------------- the runs
# shellcheck disable=SC2086
"$KVLAB" sweep $SWEEP --out "$TMP/whole.csv" 2>"$TMP/err"
check "unsharded sweep exits 0 ($(head -c 300 "$TMP/err"))" test -s "$TMP/whole.csv"
mkdir -p "$TMP/shards"
# the no-scheduler way (docs/scaling.md): one shard at a time on a small machine
# shellcheck disable=SC2086
seq 1 $N | xargs -P 1 -I{} "$KVLAB" sweep $SWEEP --shard {}/$N --out "$TMP/shards/shard-{}.csv" \
    2>"$TMP/err"
check "xargs ran every shard ($(head -c 300 "$TMP/err"))" test "$(ls "$TMP/shards" | wc -l)" = $N
"$KVLAB" merge "$TMP/merged.csv" "$TMP"/shards/shard-*.csv 2>"$TMP/merge.err"
rc=$?
check "merge exits 0 (rc=$rc: $(head -c 300 "$TMP/merge.err"))" test "$rc" = 0
check "no temporary file left behind" test -z "$(ls "$TMP" | grep '\.tmp')"
if [ ! -s "$TMP/merged.csv" ]; then
    echo "$pass passed, $fail failed"
    exit 1
fi

# ---------------------------------------------------------------- shards
for i in $(seq 1 $N); do
    check "shard $i records shard=$i/$N" grep -qx "# shard=$i/$N" "$TMP/shards/shard-$i.csv"
    rows=$(grep -v '^#' "$TMP/shards/shard-$i.csv" | tail -n +2 | wc -l)
    check "shard $i is not empty" test "$rows" -gt 0
    check "shard $i has its planned rows" grep -qx "# shard_rows=$rows" "$TMP/shards/shard-$i.csv"
done
plans=$(grep -h '^# plan=' "$TMP"/shards/shard-*.csv | sort -u | wc -l)
check "every shard has the same plan id" test "$plans" = 1
check "merge prints predicted vs measured per shard" \
    test "$(grep -c 'predicted .* s, measured .* s' "$TMP/merge.err")" = $N
check "merge prints the shard balance" grep -q 'shard balance: largest / mean' "$TMP/merge.err"

# ---------------------------------------------------------------- merged = whole
# rows as "key|exact columns" (columns found by name), in file order
rows_of() { # rows_of FILE
    awk -F, -v want="$EXACT" '
        /^#/ { next }
        !h { for (i = 1; i <= NF; i++) col[$i] = i; n = split(want, w, " "); h = 1; next }
        { line = ""; for (k = 1; k <= n; k++) line = line (k > 1 ? "|" : "") $(col[w[k]]); print line }' "$1"
}
rows_of "$TMP/whole.csv" >"$TMP/whole.rows"
rows_of "$TMP/merged.csv" >"$TMP/merged.rows"
nw=$(wc -l <"$TMP/whole.rows")
check "the unsharded sweep has 27 rows (6 cached x 4 T + none x 3)" test "$nw" = 27
check "merged: the same rows as the unsharded run, in the same order, exact columns equal" \
    cmp -s "$TMP/whole.rows" "$TMP/merged.rows"
if ! cmp -s "$TMP/whole.rows" "$TMP/merged.rows"; then
    diff "$TMP/whole.rows" "$TMP/merged.rows" | head -5
fi
ncols=$(grep -v '^#' "$TMP/whole.csv" | head -1 | tr ',' '\n' | wc -l)
check "merged keeps the schema's columns first, in order" \
    test "$(grep -v '^#' "$TMP/merged.csv" | head -1 | cut -d, -f1-"$ncols")" = \
         "$(grep -v '^#' "$TMP/whole.csv" | head -1)"
check "merged rows carry source,shard,host,cpu,commit,date and limits" \
    test "$(grep -v '^#' "$TMP/merged.csv" | head -1 | cut -d, -f$((ncols + 1))-)" = \
         "source,shard,host,cpu,commit,date,read_gbps,copy_gbps,sgemm_gflops"
check "merged metadata: schema kept" grep -qx "$(grep -m1 '^# schema=' "$TMP/whole.csv")" \
    "$TMP/merged.csv"
check "merged metadata: the sweep's schema is 3" grep -qx '# schema=3' "$TMP/merged.csv"
check "merged metadata: partial=0" grep -qx '# partial=0' "$TMP/merged.csv"
check "merged metadata: each shard's file kept" \
    test "$(grep -c '^# source\.[0-9]*\.file=' "$TMP/merged.csv")" = $N
# the shards' DRAM read measurements (read_gbps_n, read_gbps_low: a sweep
# with its roofline) merge into their count and their lowest
mkdir -p "$TMP/rl"
for i in $(seq 1 $N); do
    sed "s/^# limit=read_gbps\$/# limit=read_gbps\n# read_gbps_n=$((i + 2))\n# read_gbps_low=3$i.500/" \
        "$TMP/shards/shard-$i.csv" >"$TMP/rl/shard-$i.csv"
done
"$KVLAB" merge "$TMP/rl/merged.csv" "$TMP"/rl/shard-*.csv 2>"$TMP/err"
check "merged metadata: read_gbps_n is the shards' sum ($(head -c 200 "$TMP/err"))" \
    grep -qx "# read_gbps_n=$((N * (N + 1) / 2 + 2 * N))" "$TMP/rl/merged.csv"
check "merged metadata: read_gbps_low is the shards' lowest" \
    grep -qx '# read_gbps_low=31.500' "$TMP/rl/merged.csv"
# the exact columns once more, through compare's own join (exit 0 = no change)
for metric in flops_step bytes_step cache_bytes copy_bytes_step; do
    "$KVLAB" compare "$TMP/whole.csv" "$TMP/merged.csv" --metric "$metric" --threshold 0 \
        >"$TMP/cmp.out" 2>&1
    rc=$?
    check "compare whole merged --metric $metric --threshold 0: exit 0 (rc=$rc)" test "$rc" = 0
    check "compare joins all 27 rows on $metric" grep -q "summary: 27 compared, 0 regressed, 0 improved" "$TMP/cmp.out"
done

# ---------------------------------------------------------------- plots
if command -v gnuplot >/dev/null 2>&1; then
    for s in "$ROOT"/plots/*.gp; do
        case $(basename "$s") in common.gp | kernel.gp) continue ;; esac
        gnuplot -e "csv='$TMP/merged.csv'; outdir='$TMP/plots'" "$s" >/dev/null 2>"$TMP/gp.err"
        name=$(basename "$s" .gp)
        check "plot $name renders from the merged file ($(head -c 200 "$TMP/gp.err"))" \
            test -s "$TMP/plots/$name.png"
    done
else
    echo "note: gnuplot not found; plots of the merged file not checked"
fi

# the one-page report (bench/py/report.py, Debian's python3) reads it too
if [ -x /usr/bin/python3 ] && [ -f "$ROOT/bench/py/report.py" ]; then
    /usr/bin/python3 "$ROOT/bench/py/report.py" --csv "$TMP/merged.csv" --plots "$TMP/plots" \
        --out "$TMP/report.html" >/dev/null 2>"$TMP/rep.err"
    check "the report renders from the merged file ($(head -c 200 "$TMP/rep.err"))" \
        test -s "$TMP/report.html"
fi

# ---------------------------------------------------------------- --list
# shellcheck disable=SC2086
"$KVLAB" sweep $SWEEP --shard 2/$N --list >"$TMP/list" 2>"$TMP/err"
check "--list exits 0" test $? = 0
check "--list names every shard's total" test "$(grep -c '^# shard [0-9]*/4: ' "$TMP/list")" = $N
check "--list marks the chosen shard" grep -q '^# shard 2/4: .*<- this shard' "$TMP/list"
listed=$(grep -v '^#' "$TMP/list" | tail -n +2 | wc -l)
rows2=$(grep -v '^#' "$TMP/shards/shard-2.csv" | tail -n +2 | wc -l)
check "--list --shard 2/4 lists the rows shard 2 measured" test "$listed" = "$rows2"
check "--list header" grep -qx 'shard,strategy,seq_len,reps,pred_ms,alone_ms,flops_step,bytes_step,copy_bytes_step' "$TMP/list"
# shellcheck disable=SC2086
all=$("$KVLAB" sweep $SWEEP --list | grep -v '^#' | tail -n +2 | wc -l)
check "--list without --shard lists all 27 rows" test "$all" = 27
# shellcheck disable=SC2086
"$KVLAB" sweep $SWEEP --list --out "$TMP/never.csv" >/dev/null 2>&1
check "--list measures and writes nothing" test ! -e "$TMP/never.csv"

# ---------------------------------------------------------------- bad --shard
for s in 0/4 5/4 a/b 1/0 1/ /4 "1/4 " -1/4 1.5/4 2/1 "" 1/99999; do
    # shellcheck disable=SC2086
    expect_bad 2 "--shard '$s'" "--shard expects I/N" "$KVLAB" sweep $SWEEP --shard "$s" --out "$TMP/x.csv"
done
# shellcheck disable=SC2086
expect_bad 2 "--shard 28/28 on a 27-row sweep" "the sweep has 27 rows" \
    "$KVLAB" sweep $SWEEP --shard 28/28 --out "$TMP/x.csv"
for r in 0,5 1 a,b 1,2,3,4 "1,,2"; do
    # shellcheck disable=SC2086
    expect_bad 2 "--plan-rates '$r'" "--plan-rates expects" "$KVLAB" sweep $SWEEP --plan-rates "$r" --list
done
check "no CSV from the refused runs" test ! -e "$TMP/x.csv"

# bench-slurm's submit script refuses a bad shard count before anything else
for n in 0 abc -1 "" 2x; do
    expect_bad 2 "bench/slurm/submit.sh '$n'" "SHARDS must be a whole number" \
        bash "$ROOT/bench/slurm/submit.sh" "$n"
done

# ---------------------------------------------------------------- merge refusals
S="$TMP/shards"
cp "$TMP/merged.csv" "$TMP/keep.csv"
expect_bad 2 "merge with shard 3 missing" "missing shard 3 of 4" \
    "$KVLAB" merge "$TMP/merged.csv" "$S/shard-1.csv" "$S/shard-2.csv" "$S/shard-4.csv"
check "a refused merge leaves the previous output as it was" cmp -s "$TMP/merged.csv" "$TMP/keep.csv"
"$KVLAB" merge --allow-partial "$TMP/gap.csv" "$S/shard-1.csv" "$S/shard-2.csv" "$S/shard-4.csv" \
    2>"$TMP/err"
check "--allow-partial merges without shard 3 (exit $?)" test -s "$TMP/gap.csv"
check "... and marks the output partial=1" grep -qx '# partial=1' "$TMP/gap.csv"

sed 's/^# partial=0$/# partial=1/' "$S/shard-2.csv" >"$TMP/killed-2.csv"
expect_bad 2 "merge of a partial shard" "killed-2.csv.*partial.*--allow-partial" \
    "$KVLAB" merge "$TMP/m.csv" "$S/shard-1.csv" "$TMP/killed-2.csv" "$S/shard-3.csv" "$S/shard-4.csv"
"$KVLAB" merge --allow-partial "$TMP/m.csv" "$S/shard-1.csv" "$TMP/killed-2.csv" \
    "$S/shard-3.csv" "$S/shard-4.csv" 2>/dev/null
check "--allow-partial accepts the partial shard" grep -qx '# partial=1' "$TMP/m.csv"

expect_bad 2 "merge with a shard given twice" "same configuration as.*--prefer newest" \
    "$KVLAB" merge "$TMP/m2.csv" "$S"/shard-*.csv "$S/shard-2.csv"
"$KVLAB" merge --prefer newest "$TMP/m2.csv" "$S"/shard-*.csv "$S/shard-2.csv" 2>"$TMP/err"
check "--prefer newest resolves the repeated rows" grep -q 'repeated rows resolved' "$TMP/err"
check "... into the same rows" test "$(rows_of "$TMP/m2.csv" | md5sum)" = "$(md5sum <"$TMP/whole.rows")"

sed 's/^# commit=.*/# commit=0000000/' "$S/shard-3.csv" >"$TMP/old-3.csv"
expect_bad 2 "merge across commits" "old-3.csv.*commit 0000000.*--allow-mixed" \
    "$KVLAB" merge "$TMP/m3.csv" "$S/shard-1.csv" "$S/shard-2.csv" "$TMP/old-3.csv" "$S/shard-4.csv"
"$KVLAB" merge --allow-mixed "$TMP/m3.csv" "$S/shard-1.csv" "$S/shard-2.csv" "$TMP/old-3.csv" \
    "$S/shard-4.csv" 2>/dev/null
check "--allow-mixed merges them, commit=mixed" grep -qx '# commit=mixed' "$TMP/m3.csv"

printf 'a,b\n1,2\n' >"$TMP/plain.csv"
expect_bad 2 "merge of a non-kvlab CSV names it" "plain.csv.*not a kvlab sweep CSV" \
    "$KVLAB" merge "$TMP/m4.csv" "$S/shard-1.csv" "$TMP/plain.csv"
head -c 2000 /dev/urandom >"$TMP/noise.bin"
expect_bad 2 "merge of a binary file names it" "noise.bin" \
    "$KVLAB" merge "$TMP/m4.csv" "$S/shard-1.csv" "$TMP/noise.bin"
expect_bad 2 "merge of a missing file names it" "nosuch.csv" \
    "$KVLAB" merge "$TMP/m4.csv" "$TMP/nosuch.csv"
expect_bad 2 "merge of a merged file" "already a merged file" \
    "$KVLAB" merge "$TMP/m4.csv" "$TMP/merged.csv"
check "no output from the refused merges" test ! -e "$TMP/m4.csv"
expect_bad 2 "merge onto one of its inputs" "also an input" \
    "$KVLAB" merge "$S/shard-1.csv" "$S/shard-1.csv" "$S/shard-2.csv"
expect_bad 2 "merge onto a directory" "is a directory" "$KVLAB" merge "$TMP" "$S/shard-1.csv"
expect_bad 2 "merge into a missing directory" "cannot write into" \
    "$KVLAB" merge "$TMP/no/such/dir/m.csv" "$S/shard-1.csv"
expect_bad 2 "merge without inputs" "expects OUT.csv and at least one input" "$KVLAB" merge "$TMP/m5.csv"
expect_bad 2 "merge --prefer oldest" "--prefer expects 'newest'" \
    "$KVLAB" merge --prefer oldest "$TMP/m5.csv" "$S/shard-1.csv"
expect_bad 2 "merge --bogus" "unknown option" "$KVLAB" merge --bogus "$TMP/m5.csv" "$S/shard-1.csv"
"$KVLAB" merge --help >"$TMP/help" 2>&1
check "merge --help exits 0 and shows usage" grep -q '^usage: kvlab merge OUT.csv' "$TMP/help"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
