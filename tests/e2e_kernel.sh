#!/usr/bin/env bash
# e2e_kernel.sh - `kvlab kernel --csv` end to end on a tiny configuration
# (seconds), and the two consumers of its CSV: the metadata lines come before
# the header, the header and the rows have the documented columns, one row
# per (T, dtype), the rates agree with the declared byte and FLOP counts,
# --no-ref leaves ref_us_min empty, --roofline adds the limits (DRAM and
# L3), cold (the default) rotates over copies exceeding --cold-bytes and
# says so in its metadata and rows, --hot keeps one; bad options exit 2;
# bench/scripts/kernel_table.sh turns hand-made kernel and peers CSVs with known
# figures into the expected ratios and met / NOT met / not measured
# verdicts (and fails cleanly on bad input); gnuplot renders
# plots/kernel.gp to a non-empty PNG. Never asserts on wall time: the
# timings are only checked for shape and consistency.
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
HEADER="head_dim,heads,kv_heads,seq_len,queries,dtype,threads,us_min,us_median,gbps,gflops,ref_us_min,mode,sets,bound_gbps,passes,others,noisy,noise_reason"

# The tiny configuration: GQA 4/2, head_dim 16, group 8, two T, all dtypes
# (int codes carry a (scale, min) pair per group; f16 and bf16 rows none).
D=16; H=4; HKV=2; G=8
# cold over copies exceeding 1 MiB (not 2 x the L3: seconds, not minutes)
COLD=1048576
TINY=(kernel --head-dim "$D" --heads "$H" --kv-heads "$HKV" --group "$G" --seq-len "16,40"
      --dtype "f32,int8,int4,f16,bf16,int2" --reps 3 --threads 2 --cold-bytes "$COLD")

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
check "one row per (T, dtype): 12 rows" test "$(wc -l <"$TMP/rows")" = 12
check "every row has 19 fields" test "$(awk -F, 'NF != 19' "$TMP/rows" | wc -l)" = 0
check "every row says its passes (1-4), other programs' cores (>= 0) and noisy 0/1" \
    test "$(awk -F, '$16 < 1 || $16 > 4 || $17 < 0 || ($18 != 0 && $18 != 1)' "$TMP/rows" | wc -l)" = 0
check "a noisy row says why, a clean one nothing" \
    test "$(awk -F, '($18 == 1) != ($19 != "")' "$TMP/rows" | wc -l)" = 0
check "without --roofline bound_gbps is empty" test "$(awk -F, '$15 != ""' "$TMP/rows" | wc -l)" = 0
check "cold by default: metadata says mode=cold, the cold total and the DRAM limit" \
    sh -c "grep -qx '# mode=cold' '$TMP/k.csv' && grep -qx '# cold_bytes=$COLD' '$TMP/k.csv' && grep -qx '# limit=read_gbps' '$TMP/k.csv'"
# copies of one cache: K+V codes and qparams, each part rounded up to 64 B;
# the least n with n x copy > COLD
sets_bad=$(awk -F, -v d=$D -v hkv=$HKV -v g=$G -v cold=$COLD '
    function r64(x) { return int((x + 63) / 64) * 64 }
    {
        rb = $6 == "f32" ? 4 * d : $6 == "f16" || $6 == "bf16" ? 2 * d : $6 == "int8" ? d : $6 == "int2" ? d / 4 : d / 2
        part = r64(hkv * $4 * rb); qp = $6 ~ /^int/ ? r64(hkv * $4 * (d / g) * 8) : 0
        n = int(cold / (2 * part + 2 * qp)) + 1
        if ($13 != "cold" || $14 != n) print
    }' "$TMP/rows" | wc -l)
check "cold rows: mode cold, sets = the least count of copies exceeding --cold-bytes" test "$sets_bad" = 0
check "rows in order T x dtype" test "$(cut -d, -f4,6 "$TMP/rows" | tr '\n' ' ')" = \
    "16,f32 16,int8 16,int4 16,f16 16,bf16 16,int2 40,f32 40,int8 40,int4 40,f16 40,bf16 40,int2 "
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
        rb = $6 == "f32" ? 4 * d : $6 == "f16" || $6 == "bf16" ? 2 * d : $6 == "int8" ? d : $6 == "int2" ? d / 4 : d / 2
        if ($6 ~ /^int/) rb += d / g * 8
        bytes = 2 * hkv * $4 * rb
        flops = 4 * d * h * $4
        if (off($10, bytes / ($8 * 1e3)) || off($11, flops / ($8 * 1e3))) print
    }' "$TMP/rows" | wc -l)
check "gbps and gflops match the declared bytes and FLOPs" test "$rate_bad" = 0

"$KVLAB" kernel --head-dim 16 --heads 4 --kv-heads 2 --group 4 --seq-len 30 --dtype int2,int4,int8 \
    --layout kivi --reps 2 --threads 2 --csv >"$TMP/kivi.csv" 2>"$TMP/err"
rc=$?
check "--layout kivi exits 0 (rc=$rc: $(head -c 200 "$TMP/err"))" test "$rc" = 0
check "--layout kivi is named in the metadata" grep -qx '# layout=kivi' "$TMP/kivi.csv"
check "--layout kivi: one row per dtype, reference timed" \
    test "$(grep -v '^#' "$TMP/kivi.csv" | tail -n +2 | awk -F, '$12 > 0' | wc -l)" = 3
"$KVLAB" kernel --head-dim 8 --heads 2 --kv-heads 2 --seq-len 24 --queries 8 --reps 2 \
    --threads 1 --no-ref --hot --csv >"$TMP/p.csv" 2>/dev/null
check "prefill --no-ref: exit 0, queries 8, ref_us_min empty" \
    test "$(grep -v '^#' "$TMP/p.csv" | tail -n +2 | awk -F, '$5 == 8 && $12 == ""' | wc -l)" = 1
check "without --roofline there is no read_gbps line" test "$(grep -c '^# read_gbps=' "$TMP/p.csv")" = 0

"$KVLAB" kernel --head-dim 8 --heads 2 --kv-heads 2 --seq-len 24 --reps 2 --threads 1 --hot \
    --csv >"$TMP/h.csv" 2>/dev/null
rc=$?
check "--hot exits 0" test "$rc" = 0
check "--hot: metadata mode=hot and the L3 limit, no cold total" \
    sh -c "grep -qx '# mode=hot' '$TMP/h.csv' && grep -qx '# limit=read_l3_gbps' '$TMP/h.csv' && ! grep -q '^# cold_bytes=' '$TMP/h.csv'"
check "--hot: the row says hot and one copy" \
    test "$(grep -v '^#' "$TMP/h.csv" | tail -n +2 | awk -F, '$13 == "hot" && $14 == 1' | wc -l)" = 1

"$KVLAB" kernel --head-dim 8 --heads 2 --kv-heads 2 --seq-len 24 --reps 2 --threads 1 \
    --no-ref --roofline --cold-bytes "$COLD" --csv >"$TMP/r.csv" 2>/dev/null
rc=$?
check "--roofline exits 0" test "$rc" = 0
for key in read_gbps read_l3_gbps copy_gbps sgemm_gflops; do
    check "--roofline writes a positive $key" \
        awk -F= -v k="# $key" '$1 == k { found = ($2 + 0 > 0) } END { exit !found }' "$TMP/r.csv"
done
check "--roofline: the row carries the read limit measured beside it (bound_gbps > 0)" \
    test "$(grep -v '^#' "$TMP/r.csv" | tail -n +2 | awk -F, '$15 + 0 > 0' | wc -l)" = 1
"$KVLAB" kernel --head-dim 8 --heads 2 --kv-heads 2 --seq-len 24 --reps 2 --threads 1 \
    --no-ref --bound --hot --csv >"$TMP/b.csv" 2>/dev/null
check "--bound alone: the row's limit, no roofline metadata" \
    test "$(grep -v '^#' "$TMP/b.csv" | tail -n +2 | awk -F, '$15 + 0 > 0' | wc -l):$(grep -c '^# read_gbps=' "$TMP/b.csv")" = "1:0"
"$KVLAB" kernel --head-dim 8 --heads 2 --kv-heads 2 --seq-len 24 --reps 2 --threads 1 \
    --no-ref --roofline --cold-bytes "$COLD" >"$TMP/r.txt" 2>/dev/null
check "--roofline, text: the row's share of the limit beside it" \
    grep -q '^T 24, f32: [0-9.]*% of the DRAM read limit beside it, [0-9.]* GB/s$' "$TMP/r.txt"

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
bad_opt dtype-f8 "${K[@]}" --dtype f8
bad_opt layout-channel "${K[@]}" --layout channel
bad_opt dtype-list-trailing-comma "${K[@]}" --dtype f32,
bad_opt seq-len-zero "${K[@]}" --seq-len 0
bad_opt kv-heads-not-dividing "${K[@]}" --heads 3
bad_opt queries-past-seq-len "${K[@]}" --queries 17
bad_opt roofline-is-a-flag "${K[@]}" --roofline=1
bad_opt bound-is-a-flag "${K[@]}" --bound=1
bad_opt hot-is-a-flag "${K[@]}" --hot=1
bad_opt cold-bytes-zero "${K[@]}" --cold-bytes 0
bad_opt cold-bytes-text "${K[@]}" --cold-bytes lots
bad_opt cold-bytes-missing "${K[@]}" --cold-bytes
bad_opt cold-bytes-with-hot "${K[@]}" --hot --cold-bytes 100

# ---------------------------------------------------------------- the table
TABLE="$ROOT/bench/scripts/kernel_table.sh"
# Hand-made results with known answers. DRAM read 20 GB/s, L3 read 50 GB/s,
# sgemm 100 GFLOP/s. 64, 8/8, T 8192 f32: K+V = 2*8*8192*64*4 = 33554432 B.
# Cold f32 1800 us: DRAM limit 1677.7 us -> 93% (>= 90%: met), 18.6 GB/s;
# cold int8 700 us = 2.57x faster than cold f32 (>= 2.5x: met), int4 500
# us = 3.60x (< 4x: NOT met). Hot f32 600 us: L3 limit 671.1 us -> 112%.
# Prefill at 80 GFLOP/s = 80% of sgemm (met).
cat >"$TMP/hand.csv" <<'EOF'
# kvlab kernel
# cpu=test cpu
# threads=2
# commit=abc1234
# group=32
# mode=cold
# cold_bytes=1000000000
# limit=read_gbps
# read_gbps=20.000
# read_l3_gbps=50.000
# sgemm_gflops=100.000
head_dim,heads,kv_heads,seq_len,queries,dtype,threads,us_min,us_median,gbps,gflops,ref_us_min,mode,sets
64,8,8,8192,1,f32,2,1800.00,1900.00,18.641,18.6,,cold,30
64,8,8,8192,1,int8,2,700.00,710.00,15.0,48.0,,cold,90
64,8,8,8192,1,int4,2,500.00,510.00,12.0,67.0,,cold,150
64,8,8,8192,1,f32,2,600.00,610.00,55.9,55.9,9000.00,hot,1
64,8,8,8192,1,int8,2,300.00,310.00,35.0,112.0,9000.00,hot,1
64,8,8,2048,512,f32,2,1000.00,1100.00,8.0,80.0,,hot,1
EOF
# ggml at the same shape: cold llama layout f32 4000, f16 5000, bf16 3000
# (best: bf16, 3000 / 1800 = 1.67x < 2x: NOT met), q8_0 2800 (4.00x >= 3x:
# met), q4_0 2100 (4.20x >= 4x: met); the contig layout (faster here) is
# never the comparison. Hot: f32 1500 (2.50x: met), no q8_0 (not measured).
cat >"$TMP/peers.csv" <<'EOF'
# kvlab peers (peers)
# llama_cpp_commit=0123456789abcdef
peer,version,bench,shape,seq_len,dtype,layout,mode,threads,reps,us_min,us_median
ggml,0123456789abcdef,kernel,head_dim=64;heads=8;kv_heads=8,8192,f32,llama,cold,2,5,4000.00,4100.00
ggml,0123456789abcdef,kernel,head_dim=64;heads=8;kv_heads=8,8192,f16,llama,cold,2,5,5000.00,5100.00
ggml,0123456789abcdef,kernel,head_dim=64;heads=8;kv_heads=8,8192,bf16,llama,cold,2,5,3000.00,3100.00
ggml,0123456789abcdef,kernel,head_dim=64;heads=8;kv_heads=8,8192,q8_0,llama,cold,2,5,2800.00,2900.00
ggml,0123456789abcdef,kernel,head_dim=64;heads=8;kv_heads=8,8192,q4_0,llama,cold,2,5,2100.00,2200.00
ggml,0123456789abcdef,kernel,head_dim=64;heads=8;kv_heads=8,8192,f32,contig,cold,2,5,1000.00,1100.00
ggml,0123456789abcdef,kernel,head_dim=64;heads=8;kv_heads=8,8192,f32,llama,hot,2,5,1500.00,1600.00
EOF
bash "$TABLE" --peers "$TMP/peers.csv" "$TMP/hand.csv" >"$TMP/hand.md" 2>"$TMP/err"
rc=$?
check "table script exits 0 on valid CSVs (rc=$rc: $(head -c 200 "$TMP/err"))" test "$rc" = 0
row() { grep -F -- "$1" "$TMP/hand.md" | grep -qF -- "$2"; }
check "cold row: DRAM limit 1678, 93%, ggml best bf16 1.67x, q8_0 4.00x, q4_0 4.20x" \
    grep -qF '| 64, 8/8, 8192 | 1678 | 1800.0 | 93% | 3000 (bf16) | 1.67x | 700.0 | 2800 | 4.00x | 500.0 | 2100 | 4.20x |' "$TMP/hand.md"
check "hot row: L3 limit 671, 112%, ggml f32 2.50x, int8 peer not measured" \
    grep -qF '| 64, 8/8, 8192 | 671 | 600.0 | 112% | 1500 (f32) | 2.50x | 300.0 | not measured | - | not measured | not measured | - |' "$TMP/hand.md"
# why cold sits where it does: f32 DRAM time 1678 us, compute (hot, T 8192)
# 600 us, sum 2278, cold 1800: (2278 - 1800) / 600 = 80% hidden; int8:
# 2*8*8192*(64 + 16) B / 20 GB/s = 524 us, hot 300, cold 700: 41%; int4 has
# no hot row: no compute time
check "causes: f32 cold against DRAM time + compute time, 80% overlap" \
    grep -qF '| 64, 8/8, 8192 | f32 | 1800 us | 1678 us | 600 us (8192) | 2278 us | 1.07x | 80% |' "$TMP/hand.md"
check "causes: int8 41% overlap" \
    grep -qF '| 64, 8/8, 8192 | int8 | 700 us | 524 us | 300 us (8192) | 824 us | 1.34x | 41% |' "$TMP/hand.md"
check "causes: int4 without a hot row has no compute time" \
    grep -qF '| 64, 8/8, 8192 | int4 | 500 us | 315 us | - | - | 1.59x | - |' "$TMP/hand.md"
check "the layouts table shows both ggml layouts" \
    grep -qF '| 64, 8/8, 8192 | cold | 4000 | 1000 | 5000 | not measured | 3000 | not measured | 2800 | not measured | 2100 | not measured |' "$TMP/hand.md"
check "cold f32 share 93%: met" row "64, 8/8, T 8192 | cold f32 share of DRAM read bw" "93% (18.6 GB/s) | met"
check "cold int8 2.57x own f32: met" row "64, 8/8, T 8192 | cold int8 >= 2.5x faster than kvlab cold f32" "| met |"
check "cold int4 3.60x own f32: NOT met" row "64, 8/8, T 8192 | cold int4 >= 4x faster than kvlab cold f32" "NOT met"
check "cold f32 1.67x ggml (bf16): NOT met" row "64, 8/8, T 8192, cold | f32 >= 2x faster than ggml" "(1.67x vs bf16) | **NOT met**"
check "cold int8 4.00x q8_0: met" row "64, 8/8, T 8192, cold | int8 >= 3x faster than ggml q8_0" "| met |"
check "cold int4 4.20x q4_0: met" row "64, 8/8, T 8192, cold | int4 >= 4x faster than ggml q4_0" "| met |"
check "hot f32 2.50x ggml: met" row "64, 8/8, T 8192, hot | f32 >= 2x faster than ggml" "| met |"
check "hot int8 without a peer row: not measured" row "64, 8/8, T 8192, hot | int8 >= 3x faster than ggml q8_0" "| not measured | not measured |"
check "prefill 80% of sgemm: met" row "512 queries, f32 | prefill share of sgemm" "80% (80.0 GFLOP/s) | met"
# measured: share, 2 own ratios, 3 cold peer ratios, hot f32, prefill = 8,
# 6 met; the hot int8 peer ratio not measured
check "the count of targets is right (6 of 8, 1 not measured)" \
    grep -qx '6 of 8 targets met; 1 not measured.' "$TMP/hand.md"
check "every kvlab configuration is listed" test "$(grep -c '^| 64, 8/8 | ' "$TMP/hand.md")" = 6
check "the limits from the metadata are quoted" \
    grep -qF 'read bandwidth from DRAM 20.0 GB/s, from the L3 50.0 GB/s, sgemm 100 GFLOP/s' "$TMP/hand.md"
check "the peer's commit is quoted" grep -qF 'ggml of llama.cpp 0123456789ab' "$TMP/hand.md"

# without a peers file every peer figure is "not measured" (never a constant)
bash "$TABLE" "$TMP/hand.csv" >"$TMP/nopeer.md" 2>/dev/null
check "no peers: the cold row's peer cells say not measured" \
    grep -qF '| 64, 8/8, 8192 | 1678 | 1800.0 | 93% | not measured | - | 700.0 | not measured | - | 500.0 | not measured | - |' "$TMP/nopeer.md"
check "no peers: 3 of 4 targets met, 5 not measured" grep -qx '3 of 4 targets met; 5 not measured.' "$TMP/nopeer.md"
check "no peers: the table says so" grep -qF 'ggml: not measured' "$TMP/nopeer.md"
check "no figure of the script is a constant: no digits of peers without a peers file" \
    test "$(grep -c '| 3000\|2800\|2100' "$TMP/nopeer.md")" = 0

# two runs concatenated: each configuration keeps its lowest us, the limits
# their highest measurement (a slower copy with a lower read_gbps changes nothing)
sed -e 's/^# read_gbps=20.000/# read_gbps=10.000/' -e 's/,1800.00,1900.00,/,2900.00,2910.00,/' \
    "$TMP/hand.csv" >"$TMP/slow.csv"
cat "$TMP/slow.csv" "$TMP/hand.csv" >"$TMP/both.csv"
bash "$TABLE" --peers "$TMP/peers.csv" "$TMP/both.csv" >"$TMP/both.md" 2>/dev/null
check "two runs: best us and best read bandwidth kept" \
    grep -qF '| 64, 8/8, 8192 | 1678 | 1800.0 | 93% | 3000 (bf16) | 1.67x |' "$TMP/both.md"
check "two runs: the limits are the best of 2 measurements" grep -qF 'the best of 2 measurements' "$TMP/both.md"
# a file from before cold/hot (no mode column) is read as hot
cut -d, -f1-12 "$TMP/hand.csv" | grep -v ',cold$' | sed '/^64,8,8,8192,1,int[48],2,[57]00/d' >"$TMP/old.csv"
bash "$TABLE" "$TMP/old.csv" >"$TMP/old.md" 2>/dev/null
check "an old CSV without a mode column: its rows are hot" \
    grep -qF '| 64, 8/8 | 8192 | 1 | f32 | hot |' "$TMP/old.md"

bash "$TABLE" "$TMP/k.csv" >"$TMP/k.md" 2>/dev/null
check "table script works on a real tiny kvlab kernel CSV" \
    test "$(grep -c '^| 16, 4/2 | ' "$TMP/k.md")" = 12
bash "$TABLE" "$TMP/missing.csv" >/dev/null 2>&1
check "table script: a missing file exits 2" test $? = 2
bash "$TABLE" --peers "$TMP/missing.csv" "$TMP/hand.csv" >/dev/null 2>&1
check "table script: a missing peers file exits 2" test $? = 2
bash "$TABLE" a b >/dev/null 2>&1
check "table script: two arguments exit 2" test $? = 2
sed 's/us_min,//' "$TMP/hand.csv" >"$TMP/nocol.csv"
bash "$TABLE" "$TMP/nocol.csv" >/dev/null 2>"$TMP/err"
check "table script: a missing column exits 1 and names it" \
    test $? = 1 -a -n "$(grep us_min "$TMP/err")"
bash "$TABLE" --peers "$TMP/hand.csv" "$TMP/hand.csv" >/dev/null 2>"$TMP/err"
check "table script: a peers file that is not one exits 1" test $? = 1

# --steps: the whole-step targets from sweep CSVs and peers, hand-made with
# known answers. Default model dynamic T 4096: 100 MB at 20 GB/s -> 5 ms
# bound, 6 ms median = 1.20x (<= 1.3x: met). none T 2048: 70 GFLOP in 350
# ms = 200 GFLOP/s, 67% of 300 (NOT met). Default model T 512: dynamic 2.0
# ms, static 2.5 ms (the slower), int8 1.0 ms, int4 1.0 ms against
# llama.cpp f16 5.0, bf16 4.0, q8_0 3.5, q4_0 2.0 ms (the fastest cache
# type): f32 2.0 / 2.5 = 0.80x (< 1.3x: NOT met), int8 3.50x (>= 3x: met),
# int4 2.00x (NOT met). One attention layer: T 128 reported (cat 700 / 120 = 5.8x);
# T 512 slower kvlab 160 us: cat 1000 -> 6.2x (met), prealloc 400 -> 2.5x
# (NOT met). Default model T 512 vs torch: cat 20000 / 2500 = 8.0x (met),
# prealloc 9000 -> 3.6x (met).
cat >"$TMP/steps.csv" <<'EOF2'
# read_gbps=20.000
# sgemm_gflops=300.000
strategy,layers,dim,heads,kv_heads,hidden,batch,seq_len,step_ns_median,step_ns_min,bytes_step,flops_step,mlp,label,max_abs_err,rel_err,token_match
dynamic,4,512,8,8,1376,1,4096,6000000,5500000,100000000,60000000,1,dynamic,0,0,1
none,4,512,8,8,1376,1,2048,350000000,340000000,85000000,70000000000,1,none,0,0,1
dynamic,4,512,8,8,1376,1,512,2000000,1900000,60000000,30000000,1,dynamic,0,0,1
static,4,512,8,8,1376,1,512,2500000,2400000,60000000,30000000,1,static,0,0,1
quantized,4,512,8,8,1376,1,512,1000000,900000,50000000,30000000,1,quantized-int8,0.01,0.0008,1
quantized,4,512,8,8,1376,1,512,1000000,900000,50000000,30000000,1,quantized-int4,0.2,0.015,0.9
dynamic,1,512,8,8,1376,1,128,100000,90000,5000000,2000000,0,dynamic,0,0,1
static,1,512,8,8,1376,1,128,120000,110000,5000000,2000000,0,static,0,0,1
dynamic,1,512,8,8,1376,1,512,150000,140000,7000000,3000000,0,dynamic,0,0,1
static,1,512,8,8,1376,1,512,160000,150000,7000000,3000000,0,static,0,0,1
EOF2
cat >"$TMP/speers.csv" <<'EOF2'
peer,version,bench,shape,seq_len,dtype,layout,mode,threads,reps,us_min,us_median
llama.cpp,0123456789abcdef,step,layers=4;dim=512;heads=8;kv_heads=8;hidden=1376;vocab=256;mlp=on,512,f16,llama,step,2,21,4900.00,5000.00
llama.cpp,0123456789abcdef,step,layers=4;dim=512;heads=8;kv_heads=8;hidden=1376;vocab=256;mlp=on,512,bf16,llama,step,2,21,3900.00,4000.00
llama.cpp,0123456789abcdef,step,layers=4;dim=512;heads=8;kv_heads=8;hidden=1376;vocab=256;mlp=on,512,q8_0,llama,step,2,21,3400.00,3500.00
llama.cpp,0123456789abcdef,step,layers=4;dim=512;heads=8;kv_heads=8;hidden=1376;vocab=256;mlp=on,512,q4_0,llama,step,2,21,1900.00,2000.00
pytorch,1.13.0,step,layers=1;dim=512;heads=8;kv_heads=8;hidden=1376;vocab=256;mlp=off,128,f32,cat,step,2,21,690.00,700.00
pytorch,1.13.0,step,layers=1;dim=512;heads=8;kv_heads=8;hidden=1376;vocab=256;mlp=off,128,f32,prealloc,step,2,21,390.00,400.00
pytorch,1.13.0,step,layers=1;dim=512;heads=8;kv_heads=8;hidden=1376;vocab=256;mlp=off,512,f32,cat,step,2,21,990.00,1000.00
pytorch,1.13.0,step,layers=1;dim=512;heads=8;kv_heads=8;hidden=1376;vocab=256;mlp=off,512,f32,prealloc,step,2,21,390.00,400.00
pytorch,1.13.0,step,layers=4;dim=512;heads=8;kv_heads=8;hidden=1376;vocab=256;mlp=on,512,f32,cat,step,2,21,19000.00,20000.00
pytorch,1.13.0,step,layers=4;dim=512;heads=8;kv_heads=8;hidden=1376;vocab=256;mlp=on,512,f32,prealloc,step,2,21,8900.00,9000.00
EOF2
cat >"$TMP/acc.csv" <<'EOF2'
peer,version,model,config,compared_with,steps,agree,first_diff,max_abs_logit_diff,rel_l2
llama.cpp,0123456789abcdef,default,off:f32,kvlab dynamic tokens,200,200,-1,,
llama.cpp,0123456789abcdef,default,on:f32,llama.cpp off:f32 logits (same inputs),200,199,,0.0039,0.00083
EOF2
bash "$TABLE" --peers "$TMP/speers.csv" --accuracy "$TMP/acc.csv" --steps "$TMP/steps.csv" >"$TMP/steps.md" 2>"$TMP/err"
rc=$?
check "--steps exits 0 (rc=$rc: $(head -c 200 "$TMP/err"))" test "$rc" = 0
# shellcheck disable=SC2016 # the backquotes are markdown, not expansions
srow() { grep -F -- "$1" "$TMP/steps.md" | grep -qF -- "$2"; }
check "--steps: dynamic T 4096 at 1.20x of the byte bound, met" \
    srow '`dynamic`, T 4096' '| <= 6.50 ms | 6.00 ms (1.20x; min 5.50 ms) | met |'
check "--steps: none T 2048 at 67% of sgemm, NOT met" \
    srow '`none`, T 2048' '| >= 210 GFLOP/s | 200.0 GFLOP/s (67%; 350.0 ms) | **NOT met** |'
check "--steps: llama.cpp T 512: f32 0.80x of the fastest type NOT met, int8 3.50x met, int4 2.00x NOT met" \
    grep -qF '| 512 | 5.00 | 4.00 | 3.50 | 2.00 | 2.00 | 2.50 | 1.00 | 1.00 | 0.80x, **NOT met** | 3.50x, met | 2.00x, **NOT met** |' "$TMP/steps.md"
# the series of the llama.cpp table and its ratio columns are the targets
# file's (bench/data/targets.tsv): labels and peer types, in its order
check "--steps: the llama.cpp table's columns come from the targets file" \
    grep -qF '| T | llama.cpp f16 | llama.cpp bf16 | llama.cpp q8_0 | llama.cpp q4_0 | kvlab dynamic | kvlab static | kvlab quantized-int8 | kvlab quantized-int4 | fastest llama.cpp / slower of dynamic, static (>= 1.3x) | llama.cpp q8_0 / quantized-int8 (>= 3x) | llama.cpp q4_0 / quantized-int4 (>= 3x) |' "$TMP/steps.md"
check "--steps: the PyTorch table's columns too" \
    grep -qF '| model | T | pytorch cat | pytorch prealloc | pytorch none | kvlab dynamic | kvlab static | kvlab none | pytorch cat / slower of dynamic, static (>= 5x) | pytorch prealloc / slower of dynamic, static (>= 3x) |' "$TMP/steps.md"
awk -F'\t' -v OFS='\t' '!($1 == "step" && $2 == "quantized-int4" && $3 == "speedup") { print }' \
    "$ROOT/bench/data/targets.tsv" >"$TMP/t.tsv"
TARGETS="$TMP/t.tsv" bash "$TABLE" --peers "$TMP/speers.csv" --steps "$TMP/steps.csv" >"$TMP/steps_t.md" 2>/dev/null
check "--steps: a target row taken out of the targets file takes its series and column with it" \
    grep -qF '| 512 | 5.00 | 4.00 | 3.50 | 2.00 | 2.00 | 2.50 | 1.00 | 0.80x, **NOT met** | 3.50x, met |' "$TMP/steps_t.md"
check "--steps: llama.cpp T 8192 without rows: not measured" \
    grep -qF '| 8192 | not measured | not measured | not measured | not measured | not measured | not measured | not measured | not measured | not measured | not measured | not measured |' "$TMP/steps.md"
check "--steps: one layer T 128 vs torch reported, not judged" \
    srow '| one attention layer' '| 128 | 700 | 400 | not measured | 100 | 120 | not measured | 5.8x (reported) | 3.3x (reported) |'
check "--steps: one layer T 512: cat 6.2x met, prealloc 2.5x NOT met" \
    srow '| one attention layer' '| 512 | 1000 | 400 | not measured | 150 | 160 | not measured | 6.2x, met | 2.5x, **NOT met** |'
check "--steps: default model T 512: cat 8.0x, prealloc 3.6x, met" \
    srow '| default model' '| 512 | 20000 | 9000 | not measured | 2000 | 2500 | not measured | 8.0x, met | 3.6x, met |'
# with the run's L3 read bandwidth, a missed ratio shows what it needed and
# the floor (bytes / L3 bw): static T 512 60 MB at 50 GB/s = 1.20 ms against
# 2.0 / 1.3 = 1.54 ms needed; int4 50 MB = 1.00 ms against 2.0 / 3 = 0.67;
# one layer 7 MB = 140 us against prealloc 400 / 3 = 133 us
{ echo '# read_l3_gbps=50.000'; cat "$TMP/steps.csv"; } >"$TMP/steps_l3.csv"
bash "$TABLE" --peers "$TMP/speers.csv" --steps "$TMP/steps_l3.csv" >"$TMP/steps_l3.md" 2>/dev/null
check "--steps with the L3 bandwidth: f32 and int4 misses name need and floor" \
    grep -qF '| 0.80x, **NOT met** (needs <= 1.54 ms; floor 1.20 ms) | 3.50x, met | 2.00x, **NOT met** (needs <= 0.67 ms; floor 1.00 ms) |' "$TMP/steps_l3.md"
check "--steps with the L3 bandwidth: one layer prealloc miss names need and floor" \
    grep -qF '| 6.2x, met | 2.5x, **NOT met** (needs <= 133 us; floor 140 us) |' "$TMP/steps_l3.md"
check "--steps: the accuracy rows are shown" \
    grep -qF '| llama.cpp 0123456789ab | default | on:f32 | llama.cpp off:f32 logits (same inputs) | 200 | 199/200 | - | 0.0039 | 0.00083 |' "$TMP/steps.md"
check "--steps: kvlab's own quantized accuracy beside them" grep -qF '| quantized-int4 | 512 | 0.2 | 0.015 | 0.9 |' "$TMP/steps.md"
# measured: 2 step limits (1 met), llama T 512 (1 of 3), torch layer T 512
# (1 of 2), default T 512 (2 of 2) = 5 of 9; not measured: llama 4 x 3,
# torch 2 models x 4 T x 2
check "--steps: 5 of 9 met, 28 not measured" grep -qx '5 of 9 step targets met; 28 not measured.' "$TMP/steps.md"
bash "$TABLE" --steps "$TMP/steps.csv" >"$TMP/steps0.md" 2>/dev/null
check "--steps without peers: no peer figure, only not measured" \
    test "$(grep -cE '\| (5\.00|4\.00|3\.50|700|20000) \|' "$TMP/steps0.md")" = 0
bash "$TABLE" --steps >/dev/null 2>&1
check "--steps without files exits 2" test $? = 2

# a configuration measured twice, once disturbed throughout: the table
# takes the clean row though the noisy one is faster, and marks a
# configuration only when all its rows are noisy
NH="head_dim,heads,kv_heads,seq_len,queries,dtype,threads,us_min,us_median,gbps,gflops,ref_us_min,mode,sets,bound_gbps,passes,others,noisy,noise_reason"
{
    grep '^#' "$TMP/hand.csv"
    echo "$NH"
    echo "64,8,8,8192,1,f32,2,900.00,1900.00,37.3,37.3,,cold,30,,1,1.20,1,other programs used 1.20 cores; 1 pass all disturbed (busy throughout)"
    echo "64,8,8,8192,1,f32,2,1800.00,1900.00,18.641,18.6,,cold,30,,1,0.00,0,"
    echo "64,8,8,8192,1,int8,2,700.00,710.00,15.0,48.0,,cold,90,,4,0.90,1,other programs used 0.90 cores; 4 passes all disturbed"
} >"$TMP/noisy.csv"
bash "$TABLE" "$TMP/noisy.csv" >"$TMP/noisy.md" 2>"$TMP/err"
rc=$?
check "table script exits 0 on a CSV with noisy rows (rc=$rc: $(head -c 200 "$TMP/err"))" test "$rc" = 0
check "noisy: the clean f32 row (1800) is the figure, not the faster noisy one (900)" \
    grep -qF '| 64, 8/8, 8192 | 1678 | 1800.0 | 93% |' "$TMP/noisy.md"
check "noisy: the int8 figure, noisy in every row, is marked" grep -qF '| 700.0 (noisy) |' "$TMP/noisy.md"
check "noisy: the table says 1 of 2 configurations is noisy" \
    grep -qF '**1 of 2 configurations are noisy**' "$TMP/noisy.md"
check "noisy: a clean run's table says nothing of noise" test "$(grep -c noisy "$TMP/hand.md")" = 0
# the headline DRAM limit: the best of the roofline's (20.0) and every cold
# row's probe (22.5, 19.0), with the lowest beside it; the targets use it too
{
    grep '^#' "$TMP/hand.csv"
    echo "$NH"
    echo "64,8,8,8192,1,f32,2,1800.00,1900.00,18.641,18.6,,cold,30,22.500,1,0.00,0,"
    echo "64,8,8,8192,1,int8,2,700.00,710.00,15.0,48.0,,cold,90,19.000,1,0.00,0,"
} >"$TMP/probes.csv"
bash "$TABLE" "$TMP/probes.csv" >"$TMP/probes.md" 2>"$TMP/err"
check "headline: DRAM 22.5 GB/s, the best of 3 measurements, lowest 19.0 ($(head -c 200 "$TMP/err"))" \
    grep -qF 'Limits (the best of 3 measurements): read bandwidth from DRAM 22.5 (lowest 19.0) GB/s' "$TMP/probes.md"

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
