#!/usr/bin/env bash
# e2e_kernel.sh - `kvlab kernel --csv` end to end on a tiny configuration
# (seconds), and the two consumers of its CSV: the metadata lines come before
# the header, the header and the rows have the documented columns, one row
# per (T, dtype), the rates agree with the declared byte and FLOP counts,
# --no-ref leaves ref_us_min empty, --roofline adds the limits; bad options
# exit 2; bench/kernel_table.sh turns a hand-made CSV with known figures into
# the expected ratios and met/NOT met verdicts (and fails cleanly on bad
# input); gnuplot renders plots/kernel.gp to a non-empty PNG. Never asserts
# on wall time: the timings are only checked for shape and consistency.
# Usage: KVLAB=build/kvlab bash tests/e2e_kernel.sh
set -u
KVLAB=${KVLAB:-build/kvlab}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/kvlab_e2e_kernel.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
check() { # check DESCRIPTION COMMAND...
    local what=$1; shift
    if "$@"; then ok; else bad "$what"; fi
}

# gbps and gflops are printed from us_min, which is printed with 2 decimals:
# for a call of >= 0.5 us that rounding is <= 1%; the rates themselves are
# printed with 3 decimals, so they may also be off by 0.0005 absolute (a
# slow call, e.g. on a busy machine, prints tiny rates). Times below 0.5 us
# are skipped by the rate checks.
RATE_REL_TOL=0.02
RATE_ABS_TOL=0.0006
HEADER="head_dim,heads,kv_heads,seq_len,queries,dtype,threads,us_min,us_median,gbps,gflops,ref_us_min"

# The tiny configuration: GQA 4/2, head_dim 16, group 8, two T, all dtypes.
D=16; H=4; HKV=2; G=8
TINY=(kernel --head-dim "$D" --heads "$H" --kv-heads "$HKV" --group "$G" --seq-len "16,40"
      --dtype "f32,int8,int4" --reps 3 --threads 2)

# ---------------------------------------------------------------- format
"$KVLAB" "${TINY[@]}" --csv >"$TMP/k.csv" 2>"$TMP/err"
rc=$?
check "kernel --csv exits 0 (rc=$rc: $(head -c 300 "$TMP/err"))" test "$rc" = 0
first_data=$(grep -n -v '^#' "$TMP/k.csv" | head -n 1 | cut -d: -f1)
nmeta=$(grep -c '^# ' "$TMP/k.csv")
check "metadata lines come first, then the header" test "${first_data:-0}" = $((nmeta + 1))
check "every metadata line after the title is '# key=value'" \
    test "$(sed -n "2,${nmeta}p" "$TMP/k.csv" | grep -cv '^# [a-z0-9_]*=')" = 0
check "metadata names the thread count" grep -qx '# threads=2' "$TMP/k.csv"
check "metadata names the group" grep -qx "# group=$G" "$TMP/k.csv"
check "header is the documented one" test "$(sed -n "${first_data}p" "$TMP/k.csv")" = "$HEADER"
grep -v '^#' "$TMP/k.csv" | tail -n +2 >"$TMP/rows"
check "one row per (T, dtype): 6 rows" test "$(wc -l <"$TMP/rows")" = 6
check "every row has 12 fields" test "$(awk -F, 'NF != 12' "$TMP/rows" | wc -l)" = 0
check "rows in order T x dtype" test "$(cut -d, -f4,6 "$TMP/rows" | tr '\n' ' ')" = \
    "16,f32 16,int8 16,int4 40,f32 40,int8 40,int4 "
check "shape columns echo the request" \
    test "$(awk -F, -v d=$D -v h=$H -v k=$HKV '$1 != d || $2 != h || $3 != k || $5 != 1 || $7 != 2' \
            "$TMP/rows" | wc -l)" = 0
check "times positive, median >= min, reference timed" \
    test "$(awk -F, '!($8 > 0 && $9 >= $8 && $12 > 0)' "$TMP/rows" | wc -l)" = 0
# declared counts: K+V bytes (codes + (scale, min) per group), 4*D*H FLOPs per key
rate_bad=$(awk -F, -v d=$D -v h=$H -v hkv=$HKV -v g=$G -v tol=$RATE_REL_TOL -v abs=$RATE_ABS_TOL '
    function off(a, b) { return (a > b ? a - b : b - a) > tol * b + abs }
    $8 < 0.5 { next }
    {
        rb = $6 == "f32" ? 4 * d : $6 == "int8" ? d : d / 2
        if ($6 != "f32") rb += d / g * 8
        bytes = 2 * hkv * $4 * rb
        flops = 4 * d * h * $4
        if (off($10, bytes / ($8 * 1e3)) || off($11, flops / ($8 * 1e3))) print
    }' "$TMP/rows" | wc -l)
check "gbps and gflops match the declared bytes and FLOPs" test "$rate_bad" = 0

"$KVLAB" kernel --head-dim 8 --heads 2 --kv-heads 2 --seq-len 24 --queries 8 --reps 2 \
    --threads 1 --no-ref --csv >"$TMP/p.csv" 2>/dev/null
check "prefill --no-ref: exit 0, queries 8, ref_us_min empty" \
    test "$(grep -v '^#' "$TMP/p.csv" | tail -n +2 | awk -F, '$5 == 8 && $12 == ""' | wc -l)" = 1
check "without --roofline there is no read_gbps line" test "$(grep -c '^# read_gbps=' "$TMP/p.csv")" = 0

"$KVLAB" kernel --head-dim 8 --heads 2 --kv-heads 2 --seq-len 24 --reps 2 --threads 1 \
    --no-ref --roofline --csv >"$TMP/r.csv" 2>/dev/null
rc=$?
check "--roofline exits 0" test "$rc" = 0
for key in read_gbps copy_gbps sgemm_gflops; do
    check "--roofline writes a positive $key" \
        awk -F= -v k="# $key" '$1 == k { found = ($2 + 0 > 0) } END { exit !found }' "$TMP/r.csv"
done

# ---------------------------------------------------------------- bad options
K=(kernel --seq-len 16 --heads 2 --kv-heads 2 --head-dim 8 --reps 1 --threads 1 --csv)
bad_opt() { # bad_opt NAME ARGS...: exit 2, nothing on stdout, one message on stderr
    local name=$1; shift
    "$KVLAB" "$@" >"$TMP/bo.out" 2>"$TMP/bo.err"
    local rc=$?
    check "$name exits 2 (rc=$rc)" test "$rc" = 2
    check "$name prints no rows" test ! -s "$TMP/bo.out"
    check "$name explains on stderr" test -s "$TMP/bo.err"
}
bad_opt unknown-option "${K[@]}" --bogus
bad_opt dtype-f16 "${K[@]}" --dtype f16
bad_opt dtype-list-trailing-comma "${K[@]}" --dtype f32,
bad_opt seq-len-zero "${K[@]}" --seq-len 0
bad_opt kv-heads-not-dividing "${K[@]}" --heads 3
bad_opt queries-past-seq-len "${K[@]}" --queries 17
bad_opt roofline-is-a-flag "${K[@]}" --roofline=1

# ---------------------------------------------------------------- the table
TABLE="$ROOT/bench/kernel_table.sh"
# Hand-made results with known answers. read bw 20 GB/s, sgemm 100 GFLOP/s.
# 64, 8/8, T 2048 f32: K+V = 2*8*2048*64*4 = 8388608 B -> limit 419.4 us;
# at 200 us that is 210% of the read bandwidth; ggml f32 229 -> 1.15x.
# int8 100 us vs q8_0 344 -> 3.44x (>= 2.5x: met); int4 200 us vs q4_0 695
# -> 3.48x (< 4x: NOT met). 64, 8/8, T 8192 f32 at 1000 us: limit 1677.7 us
# (168%); int8 at 400 us = 2.50x faster than f32 (met), int4 at 400 us
# (2.50x < 3x: NOT met). Prefill at 80 GFLOP/s = 80% of sgemm (met).
cat >"$TMP/hand.csv" <<'EOF'
# kvlab kernel
# cpu=test cpu
# threads=2
# commit=abc1234
# group=32
# read_gbps=20.000
# sgemm_gflops=100.000
head_dim,heads,kv_heads,seq_len,queries,dtype,threads,us_min,us_median,gbps,gflops,ref_us_min
64,8,8,2048,1,f32,2,200.00,210.00,41.943,42.0,
64,8,8,2048,1,int8,2,100.00,110.00,25.0,84.0,
64,8,8,2048,1,int4,2,200.00,210.00,8.0,42.0,
64,8,8,8192,1,f32,2,1000.00,1100.00,33.5,33.5,
64,8,8,8192,1,int8,2,400.00,410.00,26.0,84.0,
64,8,8,8192,1,int4,2,400.00,410.00,16.0,84.0,
64,8,8,2048,512,f32,2,1000.00,1100.00,8.0,80.0,
EOF
bash "$TABLE" "$TMP/hand.csv" >"$TMP/hand.md" 2>"$TMP/err"
rc=$?
check "table script exits 0 on a valid CSV (rc=$rc: $(head -c 200 "$TMP/err"))" test "$rc" = 0
row() { grep -F -- "$1" "$TMP/hand.md" | grep -qF -- "$2"; }
check "peer row: limit 419, 210% of read bw, f32 1.15x, int8 3.44x, int4 3.48x" \
    grep -qF '| 64, 8/8, 2048 | 419 | 200.0 | 210% | 229 | 1.15x | 100.0 | 344 | 3.44x | 200.0 | 695 | 3.48x |' "$TMP/hand.md"
check "a peer row without data prints dashes" grep -qF '| 64, 32/8, 8192 | 1678 | - | - | 3835 | - |' "$TMP/hand.md"
check "f32 at 200 us <= 229: met" row "64, 8/8, T 2048 | f32 vs ggml f32" "| met |"
check "int8 3.44x >= 2.5x: met" row "64, 8/8, T 2048 | int8 >= 2.5x faster than q8_0" "| met |"
check "int4 3.48x < 4x: NOT met" row "64, 8/8, T 2048 | int4 >= 4x faster than q4_0" "NOT met"
check "int8 2.50x own f32 at T 8192: met" row "64, 8/8, T 8192 | int8 >= 2x faster than kvlab f32" "| met |"
check "int4 2.50x own f32 at T 8192: NOT met" row "64, 8/8, T 8192 | int4 >= 3x faster than kvlab f32" "NOT met"
check "f32 share at T 8192: 168%, met" row "64, 8/8, T 8192 | f32 share of read bw" "168%"
check "prefill 80% of sgemm: met" row "512 queries, f32 | prefill share of sgemm" "80% (80.0 GFLOP/s) | met"
# 11 targets: 3 peer ratios at T 2048 and 3 at T 8192, 2 read-bw shares,
# 2 ratios to kvlab's own f32, 1 prefill; all met but int4 vs q4_0 at 2048
# and int4 vs own f32.
check "the count of targets met is right (9 of 11)" grep -qx '9 of 11 targets met.' "$TMP/hand.md"
check "every configuration is listed" test "$(grep -c '^| 64, 8/8 | ' "$TMP/hand.md")" = 7
check "limits from the metadata are quoted" grep -qF 'read bandwidth 20.0 GB/s, sgemm 100 GFLOP/s' "$TMP/hand.md"

# two runs concatenated: each configuration keeps its lowest us, the limits
# their highest measurement (a slower copy with a lower read_gbps changes nothing)
sed -e 's/^# read_gbps=20.000/# read_gbps=10.000/' -e 's/,200.00,210.00,/,900.00,910.00,/' \
    "$TMP/hand.csv" >"$TMP/slow.csv"
cat "$TMP/slow.csv" "$TMP/hand.csv" >"$TMP/both.csv"
bash "$TABLE" "$TMP/both.csv" >"$TMP/both.md" 2>/dev/null
check "two runs: best us and best read bandwidth kept" \
    grep -qF '| 64, 8/8, 2048 | 419 | 200.0 | 210% | 229 | 1.15x | 100.0 | 344 | 3.44x | 200.0 | 695 | 3.48x |' "$TMP/both.md"
check "two runs: the header says best of 2 runs" grep -qF 'Best of 2 runs' "$TMP/both.md"

bash "$TABLE" "$TMP/k.csv" >"$TMP/k.md" 2>/dev/null
check "table script works on a real tiny kvlab kernel CSV" \
    test "$(grep -c '^| 16, 4/2 | ' "$TMP/k.md")" = 6
bash "$TABLE" "$TMP/missing.csv" >/dev/null 2>&1
check "table script: a missing file exits 2" test $? = 2
bash "$TABLE" a b >/dev/null 2>&1
check "table script: two arguments exit 2" test $? = 2
sed 's/us_min,//' "$TMP/hand.csv" >"$TMP/nocol.csv"
bash "$TABLE" "$TMP/nocol.csv" >/dev/null 2>"$TMP/err"
check "table script: a missing column exits 1 and names it" \
    test $? = 1 -a -n "$(grep us_min "$TMP/err")"

# --steps: the whole-step targets from sweep CSVs, hand-made with known
# answers. Default model dynamic T 4096: 100 MB at 20 GB/s -> 5 ms bound,
# 6 ms median = 1.20x (<= 1.3x: met). none T 2048: 70 GFLOP in 350 ms =
# 200 GFLOP/s, 67% of 300 (NOT met). One attention-only layer: T 128,
# slower strategy 160 us -> 842/160 = 5.3x, 825/160 = 5.2x (met); T 512,
# static 300 us -> 1332/300 = 4.4x (< 5x: NOT met).
cat >"$TMP/steps.csv" <<'EOF2'
# read_gbps=20.000
# sgemm_gflops=300.000
strategy,layers,dim,heads,kv_heads,hidden,batch,seq_len,step_ns_median,step_ns_min,bytes_step,flops_step,mlp
dynamic,4,512,8,8,1376,1,4096,6000000,5500000,100000000,60000000,1
none,4,512,8,8,1376,1,2048,350000000,340000000,85000000,70000000000,1
dynamic,1,512,8,8,1376,1,128,150000,140000,5000000,2000000,0
static,1,512,8,8,1376,1,128,160000,150000,5000000,2000000,0
dynamic,1,512,8,8,1376,1,512,180000,170000,7000000,3000000,0
static,1,512,8,8,1376,1,512,300000,290000,7000000,3000000,0
EOF2
bash "$TABLE" --steps "$TMP/steps.csv" >"$TMP/steps.md" 2>"$TMP/err"
rc=$?
check "--steps exits 0 (rc=$rc: $(head -c 200 "$TMP/err"))" test "$rc" = 0
# shellcheck disable=SC2016 # the backquotes are markdown, not expansions
srow() { grep -F -- "$1" "$TMP/steps.md" | grep -qF -- "$2"; }
check "--steps: dynamic T 4096 at 1.20x of the byte bound, met" \
    srow '`dynamic`, T 4096' '| <= 6.50 ms | 6.00 ms (1.20x; min 5.50 ms) | met |'
check "--steps: none T 2048 at 67% of sgemm, NOT met" \
    srow '`none`, T 2048' '| >= 210 GFLOP/s | 200.0 GFLOP/s (67%; 350.0 ms) | **NOT met** |'
check "--steps: T 128 vs torch 5.3x / 5.2x, met" \
    grep -qF '| 128 | 842 | 825 | 150 | 160 | 5.3x | 5.2x | met |' "$TMP/steps.md"
check "--steps: T 512 vs torch.cat 4.4x, NOT met" \
    grep -qF '| 512 | 1332 | 813 | 180 | 300 | 4.4x | 2.7x | **NOT met** |' "$TMP/steps.md"
check "--steps: a T without rows says not measured" grep -qF '| 8192 | 11500 | 6700 | - | - | - | - | not measured |' "$TMP/steps.md"
bash "$TABLE" --steps >/dev/null 2>&1
check "--steps without files exits 2" test $? = 2

# ---------------------------------------------------------------- the plot
if command -v gnuplot >/dev/null; then
    gnuplot -e "csv='$TMP/hand.csv'; outdir='$TMP/plots'" "$ROOT/plots/kernel.gp" 2>"$TMP/gp.err"
    rc=$?
    check "gnuplot renders kernel.gp (rc=$rc: $(head -c 300 "$TMP/gp.err"))" test "$rc" = 0
    check "kernel.png is a non-empty PNG" \
        test -s "$TMP/plots/kernel.png" -a "$(head -c 4 "$TMP/plots/kernel.png" | tail -c 3)" = PNG
    check "kernel.svg is written" test -s "$TMP/plots/kernel.svg"
else
    bad "gnuplot not installed (make deps)"
fi

echo "e2e_kernel: $pass passed, $fail failed"
[ "$fail" = 0 ]
