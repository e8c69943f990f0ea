#!/usr/bin/env bash
# e2e_sweep.sh - `kvlab sweep` end to end on a tiny model (seconds): the CSV
# parses, its header is schema v3 (v1's columns, then dtype and params, and the noise
# columns among the extras), there is one row per (strategy, bits, T),
# attention FLOPs grow quadratically without a cache and linearly with one
# (log-log slope fitted from the rows, and the exact closed forms), every
# strategy's cache bytes and the attention bytes (attn_bytes_step) follow
# their formulas, exact strategies agree with the
# reference and lossy ones do not, every gnuplot script renders a PNG from
# the CSV, an interrupted run leaves a complete file marked partial=1, and
# bad options exit 2. Never asserts on wall time.
# Usage: KVLAB=build/kvlab bash tests/e2e_sweep.sh
set -u
KVLAB=${KVLAB:-build/kvlab}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/kvlab_e2e_sweep.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
check() { # check DESCRIPTION COMMAND...
    local what=$1; shift
    if "$@"; then ok; else bad "$what"; fi
}

# Slopes of exact closed forms, fitted over T = 64..512: none's pairs are
# T(T+1)/2, whose log-log slope there is 2 + O(1/T) (2.004..2.008), cached
# ones T (exactly 1). The tolerance only absorbs that 1/T term.
SLOPE_TOL=0.05
# Exact strategies against the exact reference: same math, possibly another
# summation order (prefill vs decode kernels, span layout): float32 rounding
# of O(1) logits through a 2-layer model stays far below this.
EXACT_REL_TOL=1e-4

# The tiny model: GQA (4 heads on 2 kv heads), head_dim 16, group 8.
L=2; DIM=64; H=4; KVH=2; HD=16; HID=128; VOCAB=64
WIN=96; GROUP=8; RES=8; REPS=3; WARM=1
LENS="64,128,256,512"
MODEL="--layers $L --dim $DIM --heads $H --kv-heads $KVH --hidden $HID --vocab $VOCAB \
--window $WIN --group $GROUP --residual $RES --threads 2"
STRATS="none,dynamic,dynamic-concat,static,sliding,quantized-int8,quantized-int4"
CSV=$TMP/sweep.csv

REQUIRED="strategy,layers,dim,heads,kv_heads,head_dim,hidden,batch,window,bits,group,residual,threads,seq_len,reps,step_ns_median,step_ns_p95,attn_ns_median,flops_step,attn_flops_step,bytes_step,cache_bytes,copy_bytes_step,peak_rss_bytes,max_abs_err,rel_err,token_match"

# ---------------------------------------------------------------- the sweep
# shellcheck disable=SC2086
"$KVLAB" sweep $MODEL --strategies "$STRATS" --seq-lens "$LENS" --reps $REPS \
    --warmup $WARM --no-roofline --quiet --out "$CSV" 2>"$TMP/err"
rc=$?
check "tiny sweep exits 0 (rc=$rc: $(head -c 300 "$TMP/err"))" test "$rc" = 0
if [ ! -s "$CSV" ]; then
    bad "no CSV written"
    echo "$pass passed, $fail failed"
    exit 1
fi
check "no temporary file left behind" test -z "$(ls "$TMP" | grep '\.tmp\.')"

# ---------------------------------------------------------------- format
# metadata lines first, all `# ...`, then the header, then rows
first_data=$(grep -n -v '^#' "$CSV" | head -n 1 | cut -d: -f1)
last_meta=$(grep -n '^#' "$CSV" | tail -n 1 | cut -d: -f1)
check "metadata lines come before the header" test "$last_meta" -lt "$first_data"
check "first line is '# kvlab sweep'" test "$(head -n 1 "$CSV")" = "# kvlab sweep"
for key in schema commit date cpu threads blas_core blas_config cflags read_gbps \
           copy_gbps sgemm_gflops partial command; do
    n=$(grep -c "^# $key=" "$CSV")
    check "metadata key '$key' appears once" test "$n" = 1
done
check "schema=3" grep -qx '# schema=3' "$CSV"
check "noisy_rows recorded" grep -qx '# noisy_rows=[0-9]*' "$CSV"
check "partial=0 for a complete run" grep -qx '# partial=0' "$CSV"
check "--no-roofline writes nan" grep -qx '# read_gbps=nan' "$CSV"
check "--no-roofline writes nan for the L3 rate too" grep -qx '# read_l3_gbps=nan' "$CSV"
check "the metadata names the limit a step's bytes are compared with (DRAM)" grep -qx '# limit=read_gbps' "$CSV"
check "threads recorded" grep -qx '# threads=2' "$CSV"

header=$(grep -v '^#' "$CSV" | head -n 1)
required_n=$(echo "$REQUIRED" | tr ',' '\n' | wc -l)
check "schema v1 has 27 required columns (test's own list)" test "$required_n" = 27
check "header starts with schema v1's 27 columns, in order" \
    test "$(echo "$header" | cut -d, -f1-27)" = "$REQUIRED"
check "schema v2: dtype and params right after them" \
    test "$(echo "$header" | cut -d, -f28-29)" = "dtype,params"
for c in step_ns_ci_lo step_ns_ci_hi noisy noise_reason attempts; do
    check "schema v3: column $c once" test "$(echo "$header" | tr ',' '\n' | grep -cx "$c")" = 1
done

# every row has as many fields as the header, no empty cell
check "every row has the header's field count and no empty cell" \
    awk -F, '!/^#/ { if (n == 0) n = NF; else if (NF != n) exit 1;
                     for (i = 1; i <= NF; i++) if ($i == "") exit 1 } END { exit n == 0 }' "$CSV"

# col NAME: the column's index, from the header
col() { echo "$header" | tr ',' '\n' | grep -n -x "$1" | cut -d: -f1; }
# rows KEY: data rows of series KEY (strategy, or quantized-intN)
rows() {
    awk -F, -v key="$1" -v s="$(col strategy)" -v b="$(col bits)" '
        /^#/ || !h++ { next }
        { k = $s; if (k == "quantized") k = k "-int" $b; if (k == key) print }' "$CSV"
}
# field KEY T NAME: one cell
field() {
    rows "$1" | awk -F, -v t="$(col seq_len)" -v c="$(col "$3")" -v T="$2" '$t == T { print $c }'
}

# ---------------------------------------------------------------- rows
nrows=$(grep -v '^#' "$CSV" | tail -n +2 | wc -l)
check "one row per (strategy, bits, T): 7 x 4 = 28 rows (got $nrows)" test "$nrows" = 28
dups=$(grep -v '^#' "$CSV" | tail -n +2 |
       awk -F, -v s="$(col strategy)" -v b="$(col bits)" -v t="$(col seq_len)" '{ print $s, $b, $t }' |
       sort | uniq -d | wc -l)
check "no duplicate (strategy, bits, T)" test "$dups" = 0
for key in none dynamic dynamic-concat static sliding quantized-int8 quantized-int4; do
    got=$(rows "$key" | awk -F, -v t="$(col seq_len)" '{ printf "%s,", $t }')
    check "$key has exactly T = $LENS" test "$got" = "$LENS,"
done
check "the strategy column holds registered names (quantized for both widths)" \
    test "$(rows quantized-int4 | head -n 1 | cut -d, -f1)" = quantized

# ---------------------------------------------------------------- FLOPs
# slope KEY COLUMN: least-squares slope of log(COLUMN) against log(T)
slope() {
    rows "$1" | awk -F, -v t="$(col seq_len)" -v c="$(col "$2")" '
        { x = log($t); y = log($c); n++; sx += x; sy += y; sxx += x * x; sxy += x * y }
        END { printf "%.4f", (n * sxy - sx * sy) / (n * sxx - sx * sx) }'
}
near() { awk -v a="$1" -v b="$2" -v tol="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= tol) }'; }

s_none=$(slope none attn_flops_step)
check "none: attention FLOPs slope $s_none ~ 2" near "$s_none" 2 "$SLOPE_TOL"
for key in dynamic dynamic-concat static quantized-int8 quantized-int4; do
    s=$(slope "$key" attn_flops_step)
    check "$key: attention FLOPs slope $s ~ 1" near "$s" 1 "$SLOPE_TOL"
done
# whole-step FLOPs: none grows faster than linearly, a cached step more slowly
s_none_all=$(slope none flops_step)
s_dyn_all=$(slope dynamic flops_step)
check "none: whole-step FLOPs super-linear (slope $s_none_all > 1.2)" \
    awk -v s="$s_none_all" 'BEGIN { exit !(s > 1.2) }'
check "dynamic: whole-step FLOPs at most linear (slope $s_dyn_all <= 1)" \
    awk -v s="$s_dyn_all" 'BEGIN { exit !(s <= 1.0 + 1e-9) }'

# exact closed forms: 4 * head_dim * heads * layers per visible (query, key) pair
PAIR=$((4 * HD * H * L))
for T in 64 128 256 512; do
    check "none T=$T attention FLOPs = PAIR*T(T+1)/2" \
        test "$(field none $T attn_flops_step)" = $((PAIR * T * (T + 1) / 2))
    check "dynamic T=$T attention FLOPs = PAIR*T" \
        test "$(field dynamic $T attn_flops_step)" = $((PAIR * T))
    vis=$((T < WIN ? T : WIN))
    check "sliding T=$T attention FLOPs = PAIR*min(T, window)" \
        test "$(field sliding $T attn_flops_step)" = $((PAIR * vis))
done

# ---------------------------------------------------------------- cache bytes
ROW=$((HD * 4))                   # bytes of one f32 head row
TOK=$((L * 2 * KVH * ROW))        # f32 K+V bytes per token, all layers
CAP=$((512 + WARM + REPS))        # one static capacity: largest T + warmup + reps
pow2() { local c=16; while [ "$c" -lt "$1" ]; do c=$((c * 2)); done; echo $c; }
for T in 64 128 256 512; do
    check "none holds nothing (T=$T)" test "$(field none $T cache_bytes)" = 0
    check "dynamic T=$T: next_pow2(max(16,T)) tokens of f32" \
        test "$(field dynamic $T cache_bytes)" = $(($(pow2 $T) * TOK))
    check "dynamic-concat T=$T: exactly T tokens of f32" \
        test "$(field dynamic-concat $T cache_bytes)" = $((T * TOK))
    check "static T=$T: flat at its capacity ($CAP tokens)" \
        test "$(field static $T cache_bytes)" = $((CAP * TOK))
    check "sliding T=$T: flat at the window ($WIN tokens)" \
        test "$(field sliding $T cache_bytes)" = $((WIN * TOK))
    # quantized: qcap * (codes + qparams) + the f32 residual, per layer and K/V;
    # between RES/2 and RES recent tokens stay f32 (flushing in halves)
    for bits in 8 4; do
        QROW=$((HD * bits / 8 + (HD / GROUP) * 8))
        lo=$(( ($(pow2 $((T - RES))) * QROW + RES * ROW) * L * 2 * KVH ))
        hi=$(( ($(pow2 $((T - RES / 2))) * QROW + RES * ROW) * L * 2 * KVH ))
        got=$(field quantized-int$bits $T cache_bytes)
        check "quantized int$bits T=$T: $got within [$lo, $hi] of its formula" \
            test "$got" -ge "$lo" -a "$got" -le "$hi"
    done
done
check "int4 holds fewer bytes than int8 at T=512" \
    test "$(field quantized-int4 512 cache_bytes)" -lt "$(field quantized-int8 512 cache_bytes)"
check "dynamic-concat copies T tokens per step (allocate and copy)" \
    awk -v c="$(field dynamic-concat 512 copy_bytes_step)" -v t=$((512 * TOK)) \
        'BEGIN { exit !(c >= t) }'
check "static copies only the new token per step" \
    awk -v c="$(field static 512 copy_bytes_step)" -v t="$TOK" 'BEGIN { exit !(c == t) }'

# ---------------------------------------------------------------- attention bytes
# attn_bytes_step (an extra after the 27 required columns): the K/V bytes the
# attention kernel read in the step at T. Unlike cache_bytes it is not
# capacity: an f32 cache that attends over all T reads T tokens, whatever it
# has allocated (static: its whole capacity; dynamic: a power of two).
ab=$(col attn_bytes_step)
check "attn_bytes_step is a column after the 27 required ones" test "${ab:-0}" -gt 27
for T in 64 128 256 512; do
    B=$(field dynamic $T batch)
    for key in none dynamic dynamic-concat static; do
        check "$key T=$T: attn_bytes_step = batch*T tokens of f32 K+V" \
            test "$(field $key $T attn_bytes_step)" = $((B * T * TOK))
    done
    vis=$((T < WIN ? T : WIN))
    check "sliding T=$T: attn_bytes_step = batch*min(T, window) tokens" \
        test "$(field sliding $T attn_bytes_step)" = $((B * vis * TOK))
    for bits in 8 4; do
        got=$(field quantized-int$bits $T attn_bytes_step)
        check "quantized int$bits T=$T: 0 < attn_bytes_step ($got) <= cache_bytes" \
            test "$got" -gt 0 -a "$got" -le "$(field quantized-int$bits $T cache_bytes)"
    done
done
check "bytes_step - attn_bytes_step is the same (the weights) on every row" \
    awk -F, -v b="$(col bytes_step)" -v a="$ab" '
        /^#/ || !h++ { next } { w = $b - $a; if (n++ && w != w0) exit 1; w0 = w }
        END { exit !(n > 0 && w0 > 0) }' "$CSV"

# ---------------------------------------------------------------- accuracy
for key in none dynamic-concat static; do
    for T in 64 512; do
        r=$(field $key $T rel_err)
        check "$key T=$T agrees with the exact reference (rel_err $r)" \
            awk -v r="$r" -v tol="$EXACT_REL_TOL" 'BEGIN { exit !(r <= tol) }'
        check "$key T=$T greedy token always agrees" \
            awk -v m="$(field $key $T token_match)" 'BEGIN { exit !(m == 1) }'
    done
done
check "sliding within its window is exact (T=64)" \
    awk -v r="$(field sliding 64 rel_err)" -v tol="$EXACT_REL_TOL" 'BEGIN { exit !(r <= tol) }'
check "sliding beyond its window differs from full attention (T=512)" \
    awk -v r="$(field sliding 512 rel_err)" 'BEGIN { exit !(r > 1e-3) }'
check "int4 logits error is non-zero and above int8's (T=512)" \
    awk -v a="$(field quantized-int4 512 rel_err)" -v b="$(field quantized-int8 512 rel_err)" \
        'BEGIN { exit !(a > 0 && a > b) }'
check "latency columns are positive and p95 >= median" \
    awk -F, -v m="$(col step_ns_median)" -v p="$(col step_ns_p95)" '
        /^#/ || !h++ { next } { if (!($m > 0 && $p >= $m)) exit 1 }' "$CSV"

# ---------------------------------------------------------------- plots
if command -v gnuplot >/dev/null 2>&1; then
    n_scripts=0
    for gp in "$ROOT"/plots/*.gp; do
        name=$(basename "$gp" .gp)
        # common.gp is shared settings; kernel.gp reads `kvlab kernel` CSVs
        # (tests/e2e_kernel.sh renders it)
        case "$name" in common | kernel) continue ;; esac
        n_scripts=$((n_scripts + 1))
        gnuplot -e "csv='$CSV'; outdir='$TMP/plots'" "$gp" 2>"$TMP/gp.err"
        rc=$?
        png=$TMP/plots/$name.png
        check "gnuplot $name.gp exits 0 ($(head -c 200 "$TMP/gp.err"))" test "$rc" = 0
        check "$name.png is a non-empty PNG" \
            sh -c "test -s '$png' && head -c 8 '$png' | od -An -c | grep -q 'P   N   G'"
        check "$name.svg is written" test -s "$TMP/plots/$name.svg"
        # an SVG is XML: one byte outside UTF-8 (a Symbol-font escape) and a
        # browser or an XML parser refuses the whole figure
        check "$name.svg is valid UTF-8" iconv -f UTF-8 -t UTF-8 -o /dev/null "$TMP/plots/$name.svg"
    done
    check "at least the six figures of docs/design.md have scripts ($n_scripts)" test "$n_scripts" -ge 6
else
    bad "gnuplot not installed (make deps)"
fi

# ---------------------------------------------------------------- interrupt
# A run that is still busy (none at long T on a wider model) gets SIGINT
# after its first finished row: it must exit 130 and leave a complete file
# marked partial=1 with the rows done so far, replacing the previous file.
PCSV=$TMP/partial.csv
echo "previous" >"$PCSV"
"$KVLAB" sweep --layers 2 --dim 256 --heads 4 --kv-heads 4 --hidden 512 --vocab 64 \
    --strategies dynamic,none --seq-lens 64,1024,2048,4096 --none-max 0 --reps 15 \
    --warmup 1 --no-roofline --threads 2 --out "$PCSV" 2>"$TMP/int.err" &
pid=$!
for _ in $(seq 1 600); do   # wait for the first finished row (progress line)
    grep -q '^sweep: \[1/' "$TMP/int.err" 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
done
kill -INT "$pid" 2>/dev/null
wait "$pid"
rc=$?
check "SIGINT exits 130 (rc=$rc)" test "$rc" = 130
check "interrupted file is marked partial=1" grep -qx '# partial=1' "$PCSV"
check "interrupted file has the schema header" \
    sh -c "grep -v '^#' '$PCSV' | head -n 1 | cut -d, -f1-27 | grep -qx '$REQUIRED'"
prow=$(grep -v '^#' "$PCSV" | tail -n +2 | wc -l)
check "interrupted file keeps the finished rows (1 <= $prow < 8)" test "$prow" -ge 1 -a "$prow" -lt 8
check "interrupted file rows are whole" \
    awk -F, '!/^#/ { if (n == 0) n = NF; else if (NF != n) exit 1 } END { exit n == 0 }' "$PCSV"
check "no temporary file left after the interrupt" test -z "$(ls "$TMP" | grep '\.tmp\.')"

# ---------------------------------------------------------------- bad options
bad_opt() { # bad_opt DESCRIPTION ARGS...
    local what=$1; shift
    "$KVLAB" sweep "$@" --no-roofline --quiet --out "$TMP/bad.csv" >/dev/null 2>"$TMP/bad.err"
    local rc=$?
    check "$what exits 2 (rc=$rc)" test "$rc" = 2
    check "$what prints one line" test "$(wc -l <"$TMP/bad.err")" = 1
}
bad_opt "unknown strategy" --strategies dynamic,bogus
bad_opt "unknown option" --frobnicate
bad_opt "reps 0" --reps 0
bad_opt "non-numeric --max-seq" --max-seq abc
bad_opt "descending --seq-lens" --seq-lens 128,64
bad_opt "--seq-lens with --max-seq" --seq-lens 64 --max-seq 128
bad_opt "T too small for the centred reps" --seq-lens 4 --reps 21
bad_opt "missing value" --reps
check "no CSV written by a rejected command" test ! -e "$TMP/bad.csv"
"$KVLAB" sweep --help >/dev/null 2>&1
check "--help exits 0" test $? = 0

# ---------------------------------------------------------------- roofline
out=$("$KVLAB" roofline --threads 1 --reps 1 --csv 2>/dev/null)
rc=$?
check "roofline --csv exits 0" test "$rc" = 0
check "roofline prints positive read (DRAM, L3), copy and sgemm rates" \
    sh -c "echo '$out' | tail -n 1 | awk -F, '{ exit !(NF == 9 && \$2 > 0 && \$3 > 0 && \$4 > 0 && \$5 > 0) }'"
check "roofline --csv: one pass has no spread (median = best)" \
    sh -c "echo '$out' | tail -n 1 | awk -F, '{ exit !(\$6 == 0 && \$7 == 0 && \$8 == 0 && \$9 == 0) }'"
check "roofline --csv header names the L3 read rate and the spreads" \
    test "$(echo "$out" | grep -v '^#' | head -n 1)" = "threads,read_gbps,copy_gbps,sgemm_gflops,read_l3_gbps,read_spread,copy_spread,sgemm_spread,read_l3_spread"
check "roofline --csv says how it measured" sh -c "echo '$out' | grep -q '^# roofline_method=best of'"
"$KVLAB" roofline --threads 0 >/dev/null 2>&1
check "roofline --threads 0 exits 2" test $? = 2


# ---------------------------------------------------------------- the limit beside each row
# without --bound (the sweep above): no limit per row, and the file says so
check "no --bound: bound_gbps is nan on every row" \
    awk -F, -v c="$(col bound_gbps)" '!/^#/ && h++ { if ($c != "nan") exit 1 } END { exit !(c > 0 && h > 1) }' "$CSV"
check "no --bound: # bound_method=not measured" grep -qx '# bound_method=not measured' "$CSV"
# shellcheck disable=SC2086
"$KVLAB" sweep $MODEL --strategies sliding,quantized-int8 --seq-lens 64,128 --reps $REPS \
    --warmup $WARM --no-roofline --bound --quiet --out "$TMP/bound.csv" 2>"$TMP/err"
rc=$?
check "--bound exits 0 (rc=$rc: $(head -c 300 "$TMP/err"))" test "$rc" = 0
bh=$(grep -v '^#' "$TMP/bound.csv" | head -n 1)
bc=$(echo "$bh" | tr ',' '\n' | grep -n -x bound_gbps | cut -d: -f1)
check "--bound: a positive, finite bound_gbps on each of the 4 rows" \
    awk -F, -v c="${bc:-0}" '!/^#/ && h++ { n++; if (!(c > 0 && $c ~ /^[0-9.]+$/ && $c + 0 > 0)) exit 1 }
        END { exit n != 4 }' "$TMP/bound.csv"
check "--bound: the metadata says how it was measured" \
    grep -qx '# bound_method=DRAM read test; best of [0-9]* timed passes right before and [0-9]* right after each row.s attempt' "$TMP/bound.csv"
bad_opt "--bound with --list" --bound --list
# with the roofline too, the run's headline DRAM figure is the best of all
# its measurements: the two roofline runs and the probe beside each row
# shellcheck disable=SC2086
"$KVLAB" sweep $MODEL --strategies sliding,quantized-int8 --seq-lens 64,128 --reps $REPS \
    --warmup $WARM --bound --quiet --out "$TMP/best.csv" 2>"$TMP/err"
rc=$?
check "--bound with the roofline exits 0 (rc=$rc: $(head -c 300 "$TMP/err"))" test "$rc" = 0
bc=$(grep -v '^#' "$TMP/best.csv" | head -n 1 | tr ',' '\n' | grep -n -x bound_gbps | cut -d: -f1)
check "--bound: read_gbps_n counts the 2 roofline runs and the 4 rows' probes" \
    grep -qx '# read_gbps_n=6' "$TMP/best.csv"
check "--bound: read_gbps is the best and read_gbps_low the lowest of them, every row's probe between" \
    awk -F, -v c="${bc:-0}" '/^# read_gbps=/ { split($0, kv, "="); hi = kv[2] + 0 }
        /^# read_gbps_low=/ { split($0, kv, "="); lo = kv[2] + 0 }
        !/^#/ && h++ { n++; if (!(c > 0 && $c + 0 <= hi && $c + 0 >= lo)) exit 1 }
        END { exit !(n == 4 && lo > 0 && lo <= hi) }' "$TMP/best.csv"
check "--bound: the metadata says the probes count" \
    grep -qx '# roofline=best of 2 (before and after); DRAM read: also each row.s probe' "$TMP/best.csv"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
