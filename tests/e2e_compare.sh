#!/usr/bin/env bash
# e2e_compare.sh - `kvlab compare` end to end on hand-made sweep CSVs: the
# exit status is the verdict (0 no regression, 1 regression, 2 unusable
# input, 3 noisy: re-run), every error is exactly one line on stderr naming
# file and line, and the table / csv / json outputs carry what they promise.
# Across schemas: a schema-1 reference against a schema-2 sweep (dynamic
# f16 and bf16 share the v1 columns) compares what matches and lists the
# rest, a real fresh sweep against notebooks_data/bench.csv included.
# Usage: KVLAB=build/kvlab bash tests/e2e_compare.sh
set -u
KVLAB=${KVLAB:-build/kvlab}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/kvlab_e2e_compare.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

HEADER="strategy,layers,dim,heads,kv_heads,head_dim,hidden,batch,window,bits,group,residual,threads,seq_len,reps,step_ns_median,step_ns_p95,attn_ns_median,flops_step,attn_flops_step,bytes_step,cache_bytes,copy_bytes_step,peak_rss_bytes,max_abs_err,rel_err,token_match"

# sweep FILE READ_GBPS SGEMM_GFLOPS TIME_SCALE_PERCENT [EXTRA_PERCENT_FOR_T512]
# Two strategies x three seq_lens; step time = T * 1000 ns * scale / 100.
sweep() {
    local f=$1 gbps=$2 gflops=$3 scale=$4 extra=${5:-100}
    {
        echo "# kvlab sweep"
        echo "# schema=1"
        echo "# read_gbps=$gbps"
        echo "# copy_gbps=$gbps"
        echo "# sgemm_gflops=$gflops"
        echo "# partial=0"
        echo "# threads=2"
        echo "# cpu=test"
        echo "$HEADER"
        for s in dynamic quantized; do
            for T in 128 256 512; do
                local t=$((T * 1000 * scale / 100))
                [ "$T" = 512 ] && [ "$s" = quantized ] && t=$((t * extra / 100))
                echo "$s,4,512,8,8,64,1376,1,512,8,32,32,2,$T,5,$t,$((t + t / 100)),$((t / 4)),40000000,$((T * 8192)),20000000,$((T * 4096)),0,100000000,0,0,1"
            done
        done
    } >"$f"
}

# run NAME WANT_RC ARGS...: checks the exit status; stdout in $TMP/out,
# stderr in $TMP/err.
run() {
    local name=$1 want=$2
    shift 2
    "$KVLAB" compare "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    if [ "$rc" = "$want" ]; then ok; else bad "$name: exit $rc, want $want ($(head -c 300 "$TMP/err"))"; fi
}

# one_line NAME PATTERN: stderr is exactly one line and matches PATTERN.
one_line() {
    local n
    n=$(wc -l <"$TMP/err")
    if [ "$n" = 1 ] && grep -Eq -- "$2" "$TMP/err"; then ok; else
        bad "$1: stderr ($n lines) does not match '$2': $(head -c 300 "$TMP/err")"
    fi
}

out_has() {
    if grep -Fq -- "$2" "$TMP/out"; then ok; else bad "$1: stdout lacks '$2'"; fi
}

sweep "$TMP/base.csv" 20 100 100
sweep "$TMP/same.csv" 20 100 102          # 2% wobble
sweep "$TMP/slow.csv" 20 100 120          # 20% slower everywhere
sweep "$TMP/fast.csv" 20 100 80           # 20% faster
sweep "$TMP/slowmachine.csv" 8 40 250     # a machine 2.5x slower in every respect
sweep "$TMP/slowmachine_reg.csv" 8 40 250 130   # ... with a real 30% regression at one row

# ---- verdicts and exit codes ----------------------------------------------
run "wobble" 0 "$TMP/base.csv" "$TMP/same.csv"
out_has "wobble" "summary: 6 compared, 0 regressed, 0 improved"
run "slowdown" 1 "$TMP/base.csv" "$TMP/slow.csv"
out_has "slowdown" "summary: 6 compared, 6 regressed, 0 improved, worst ratio 1.200"
out_has "slowdown" "slower"
run "improvement" 0 "$TMP/base.csv" "$TMP/fast.csv"
out_has "improvement" "6 improved"
out_has "improvement" "faster"
run "threshold" 0 "$TMP/base.csv" "$TMP/slow.csv" --threshold 25%
run "threshold-equals" 1 "$TMP/base.csv" "$TMP/same.csv" --threshold=1
run "machine raw" 1 "$TMP/base.csv" "$TMP/slowmachine.csv"
run "machine normalized" 0 "$TMP/base.csv" "$TMP/slowmachine.csv" --normalize
out_has "machine normalized" "x roofline"
run "machine normalized attn" 0 "$TMP/base.csv" "$TMP/slowmachine.csv" --normalize --metric attn_ns_median
# these files predate attn_bytes_step: attention falls back to cache_bytes, noted once
one_line "machine normalized attn" "note: no attn_bytes_step column in either file"
run "machine regression" 1 "$TMP/base.csv" "$TMP/slowmachine_reg.csv" --normalize
out_has "machine regression" "1 regressed"
out_has "machine regression" "quantized bits=8 T=512"
run "cache_bytes" 0 "$TMP/base.csv" "$TMP/slow.csv" --metric cache_bytes
run "normalize non-time" 0 "$TMP/base.csv" "$TMP/slow.csv" --metric cache_bytes --normalize
one_line "normalize non-time" "note: --normalize applies to time metrics only"

# ---- --aggregate: group verdicts (median over seq_len) decide ------------------
run "aggregate outlier" 0 "$TMP/base.csv" "$TMP/slowmachine_reg.csv" --normalize --aggregate
out_has "aggregate outlier" "1 regressed"   # the row is still shown as slower
out_has "aggregate outlier" "verdict by group (median over T): 2 groups, 0 regressed, 0 improved"
run "aggregate slowdown" 1 "$TMP/base.csv" "$TMP/slow.csv" --aggregate
out_has "aggregate slowdown" "verdict by group (median over T): 2 groups, 2 regressed"
out_has "aggregate slowdown" "1.200    5.0%  slower (median of 3 rows)"
run "aggregate csv" 1 "$TMP/base.csv" "$TMP/slow.csv" --aggregate --format csv
out_has "aggregate csv" "# groups_regressed=2"
sed 's/^# cpu=test$/# cpu=another cpu/' "$TMP/slowmachine.csv" >"$TMP/othercpu.csv"
run "other machine" 0 "$TMP/base.csv" "$TMP/othercpu.csv" --normalize
one_line "other machine" "note: the files differ in 'cpu' \\(another machine\\?\\)$"

# ---- bench/scripts/median_rows.awk (make baseline): per-row median of runs ---------------
MEDIAN_AWK="$(dirname "$0")/../bench/scripts/median_rows.awk"
if awk -f "$MEDIAN_AWK" "$TMP/base.csv" "$TMP/slow.csv" "$TMP/same.csv" >"$TMP/merged.csv" 2>"$TMP/err"; then ok; else bad "median_rows: exit $?"; fi
# the medians are the 102% file's timings: compare says ratio 1.000 everywhere
run "median_rows merged" 0 "$TMP/merged.csv" "$TMP/same.csv" --threshold 0
out_has "median_rows merged" "summary: 6 compared, 0 regressed, 0 improved, worst ratio 1.000"
if grep -q '^# merged=median of 3 runs' "$TMP/merged.csv"; then ok; else bad "median_rows: no merged= line"; fi
head -n 12 "$TMP/base.csv" >"$TMP/short.csv"
awk -f "$MEDIAN_AWK" "$TMP/base.csv" "$TMP/short.csv" >/dev/null 2>"$TMP/err"
if [ $? = 2 ]; then ok; else bad "median_rows: files of different length accepted"; fi
one_line "median_rows short" "^median_rows.awk: file 2 has"
sed 's/^quantized,4,512/quantized,8,512/' "$TMP/same.csv" >"$TMP/otherconf.csv"
awk -f "$MEDIAN_AWK" "$TMP/base.csv" "$TMP/otherconf.csv" >/dev/null 2>"$TMP/err"
if [ $? = 2 ]; then ok; else bad "median_rows: different configurations accepted"; fi
one_line "median_rows config" "configuration differs"

# ---- attn_vs_rest: attention in units of the rest of the step -------------------
run "attn_vs_rest machine" 0 "$TMP/base.csv" "$TMP/slowmachine.csv" --metric attn_vs_rest
out_has "attn_vs_rest machine" "x rest of step"

# ---- formats ---------------------------------------------------------------
run "json" 1 "$TMP/base.csv" "$TMP/slow.csv" --format json
out_has "json" '"name": "dynamic/bits=8/T=128/step_ns_median", "unit": "ns", "value": 153600}'
if [ "$(grep -c '"name"' "$TMP/out")" = 6 ] && head -c1 "$TMP/out" | grep -q '\['; then ok; else bad "json: want 6 records in an array"; fi
if command -v python3 >/dev/null 2>&1; then
    if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len(d)==6 and all(set(r)=={"name","unit","value"} for r in d)' "$TMP/out"; then ok; else bad "json: not valid JSON records"; fi
fi
run "csv" 1 "$TMP/base.csv" "$TMP/slow.csv" --format csv
if [ "$(grep -vc '^#' "$TMP/out")" = 7 ] && grep -q '^# regressed=6$' "$TMP/out"; then ok; else bad "csv: want header + 6 rows and '# regressed=6'"; fi

# ---- unusable input: exit 2, one line naming file and line ---------------
bad_file() { # NAME WANT_PATTERN (file content on stdin)
    cat >"$TMP/bad_$1.csv"
    run "$1" 2 "$TMP/base.csv" "$TMP/bad_$1.csv"
    one_line "$1" "$2"
}
ROW="dynamic,4,512,8,8,64,1376,1,512,8,32,32,2,128,5,128000,129280,32000,40000000,1048576,20000000,524288,0,100000000,0,0,1"
printf '# schema=1\n%s\n%s\ndynamic,4,512,8\n' "$HEADER" "$ROW" | bad_file truncated "bad_truncated.csv:4: .*fields"
printf '# schema=1\n%s\n%s\n' "$HEADER" "${ROW/128000/slow}" | bad_file text "bad_text.csv:3: column 'step_ns_median': 'slow' is not a number"
printf '# schema=1\n%s\n%s\n%s\n' "$HEADER" "$ROW" "$ROW" | bad_file dupkey "bad_dupkey.csv:4: duplicate configuration.*line 3"
printf '# schema=1\n%s\n%s\n' "${HEADER%,token_match}" "${ROW%,1}" | bad_file missing "bad_missing.csv:2: missing required column 'token_match'"
printf '' | bad_file empty "bad_empty.csv:1: empty file"
printf '# schema=2\n%s\n%s\n' "$HEADER" "$ROW" | bad_file schema "bad_schema.csv:1: schema version '2'"
printf '%s\n%s\n' "$HEADER" "$ROW" | bad_file noschema "bad_noschema.csv:1: no '# schema=' metadata"
{ printf '# schema=1\n%s\n' "$HEADER"; head -c 1048576 /dev/zero | tr '\0' 'x'; echo; } | bad_file hugeline "bad_hugeline.csv:3: line is longer than"
head -c 3000 /dev/urandom | bad_file binary "bad_binary.csv:[0-9]+: .*binary data"
printf '# schema=1\n%s\nstatic,4,512,8,8,64,1376,1,512,8,32,32,2,128,5,1,1,1,1,1,1,1,0,1,0,0,1\n' "$HEADER" | bad_file disjoint "bad_disjoint.csv:3: no configuration in common"
printf '# schema=1\n# read_gbps=nan\n# sgemm_gflops=100\n%s\n%s\n' "$HEADER" "$ROW" >"$TMP/nanmeta.csv"
run "nan metadata" 2 "$TMP/base.csv" "$TMP/nanmeta.csv" --normalize
one_line "nan metadata" "nanmeta.csv:2: metadata read_gbps='nan' is not a positive number"
run "nan metadata, no normalize" 0 "$TMP/base.csv" "$TMP/nanmeta.csv"
printf '# schema=1\n%s\n%s\n' "$HEADER" "${ROW/%,0,0,1/,nan,nan,1}" >"$TMP/nanerr.csv"
run "all nan metric" 2 "$TMP/base.csv" "$TMP/nanerr.csv" --metric rel_err
one_line "all nan metric" "no joined row has a finite rel_err"
run "missing file" 2 "$TMP/base.csv" "$TMP/nope.csv"
one_line "missing file" "NEW.csv '.*nope.csv': No such file"
run "directory" 2 "$TMP/base.csv" "$TMP"
one_line "directory" "is a directory"
run "missing base" 2 "$TMP/nope.csv" "$TMP/base.csv"
one_line "missing base" "BASE.csv '.*nope.csv': No such file"

# ---- schemas: the join across them, intervals and noisy rows (schema 3) -------
# row3 STRATEGY BITS T MEDIAN: the v1 columns of one row (p95 = median)
row3() { echo "$1,4,512,8,8,64,1376,1,0,$2,0,0,2,$3,5,$4,$4,$(($4 / 4)),40000000,1000000,20000000,1048576,0,100000000,0,0,1"; }
{
    echo "# schema=1"; echo "$HEADER"
    for T in 64 128; do row3 dynamic 32 $T 1000000; done
    row3 quantized 8 64 1000000
} >"$TMP/v1.csv"
{
    echo "# schema=2"; echo "$HEADER,dtype,params"
    for T in 64 128; do
        echo "$(row3 dynamic 32 $T 1300000),f32,dtype=f32"
        echo "$(row3 dynamic 16 $T 800000),f16,dtype=f16"
        echo "$(row3 dynamic 16 $T 800000),bf16,dtype=bf16"
    done
} >"$TMP/v2.csv"
run "v1 against v2" 1 "$TMP/v1.csv" "$TMP/v2.csv"
if [ ! -s "$TMP/err" ]; then ok; else bad "v1 against v2: stderr: $(head -c 300 "$TMP/err")"; fi
out_has "v1 against v2" "summary: 2 compared, 2 regressed"
out_has "v1 against v2" "not compared: 1 rows of base and 4 rows of new had no match:"
out_has "v1 against v2" "new  dynamic bits=16 f16 dtype=f16 T=64,128: only in new"
run "v1 against v2 csv" 1 "$TMP/v1.csv" "$TMP/v2.csv" --format csv
out_has "v1 against v2 csv" "# only_new=4"
{ head -n 2 "$TMP/v1.csv"; row3 dynamic 16 64 1000000; row3 dynamic 32 64 1000000; } >"$TMP/v1amb.csv"
run "ambiguous" 1 "$TMP/v1amb.csv" "$TMP/v2.csv"   # the f32 row, 1.3x, is compared
one_line "ambiguous" "note: 1 rows of BASE and 2 of NEW are ambiguous"
out_has "ambiguous" "base dynamic bits=16 T=64: ambiguous, matches 2 rows of new"
{ head -n 2 "$TMP/v1.csv"; row3 dynamic 16 64 1000000; } >"$TMP/v1ambonly.csv"
run "only ambiguous" 2 "$TMP/v1ambonly.csv" "$TMP/v2.csv"
one_line "only ambiguous" "v2.csv:3: no configuration in common .*1 rows of BASE and 2 of NEW are ambiguous"
{ cat "$TMP/v2.csv"; tail -n 1 "$TMP/v2.csv"; } >"$TMP/v2dup.csv"
run "real duplicate" 2 "$TMP/v1.csv" "$TMP/v2dup.csv"
one_line "real duplicate" "v2dup.csv:9: duplicate configuration: .*dtype, params and seq_len as line 8"

# schema 3: v3 STEP_MEDIANS... as "median:lo:hi:noisy" per row, two
# strategies x T=64,128
v3() {
    local f=$1 i=0 s T m lo hi n
    shift
    { echo "# schema=3"; echo "$HEADER,dtype,params,step_ns_ci_lo,step_ns_ci_hi,noisy,noise_reason"
      for s in dynamic static; do
          for T in 64 128; do
              IFS=: read -r m lo hi n <<<"$1"
              shift
              echo "$(row3 $s 32 $T "$m"),f32,-,$lo,$hi,$n,$([ "$n" = 1 ] && echo cpu_util=0.41 || echo -)"
          done
      done
    } >"$f"
}
C=1000000:950000:1050000:0
v3 "$TMP/v3base.csv" $C $C $C $C
v3 "$TMP/v3overlap.csv" 1200000:1000000:1400000:0 $C $C $C     # +20%, intervals overlap
v3 "$TMP/v3apart.csv" 1200000:1150000:1250000:0 $C $C $C       # +20%, apart by > 5%
v3 "$TMP/v3noisy.csv" 2000000:1900000:2100000:1 $C $C $C       # 2x, but noisy
v3 "$TMP/v3both.csv" 2000000:1900000:2100000:1 $C 1200000:1150000:1250000:0 $C
run "ci overlap" 0 "$TMP/v3base.csv" "$TMP/v3overlap.csv"
out_has "ci overlap" "summary: 4 compared, 0 regressed"
run "ci overlap, no intervals" 1 "$TMP/v1.csv" "$TMP/v3overlap.csv"   # the old rule
run "ci apart" 1 "$TMP/v3base.csv" "$TMP/v3apart.csv"
run "noisy" 3 "$TMP/v3base.csv" "$TMP/v3noisy.csv"
one_line "noisy" "^kvlab: compare: noisy, re-run: 1 of 4 rows were measured under interference \(NEW: cpu_util=0.41\) and not judged$"
out_has "noisy" "noisy, re-run: new: cpu_util=0.41"
run "noisy aggregate" 3 "$TMP/v3base.csv" "$TMP/v3noisy.csv" --aggregate
out_has "noisy aggregate" "1 noisy (re-run)"
run "noisy base" 3 "$TMP/v3noisy.csv" "$TMP/v3base.csv"
run "noisy and a clean regression" 1 "$TMP/v3base.csv" "$TMP/v3both.csv"
one_line "noisy and a clean regression" "note: 1 noisy rows were not judged \(NEW: cpu_util=0.41\)"
run "noisy, a size" 0 "$TMP/v3base.csv" "$TMP/v3noisy.csv" --metric cache_bytes
sed 's/,0,-$/,2,-/' "$TMP/v3base.csv" >"$TMP/v3badflag.csv"
run "bad noisy flag" 2 "$TMP/v3base.csv" "$TMP/v3badflag.csv"
one_line "bad noisy flag" "v3badflag.csv:3: column 'noisy': '2' is not 0 or 1"

# a real sweep of today against the committed reference run (seconds: one
# T, one timed step; dynamic in three dtypes and int8 share the v1 columns
# but not dtype/params: each must find its own row; the schema-1 join is
# tested on the fixtures above)
REF="$(dirname "$0")/../notebooks_data/bench.csv"
if "$KVLAB" sweep --strategies dynamic,dynamic-f16,dynamic-bf16,quantized-int8 --seq-lens 64 \
    --reps 1 --warmup 0 --retries 0 --no-roofline --quiet --out "$TMP/fresh.csv" 2>"$TMP/err"; then
    "$KVLAB" compare "$REF" "$TMP/fresh.csv" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    # timings of a 1-step sweep on a busy machine: 0, 1 or 3 (noisy), never 2
    case $rc in 0 | 1 | 3) ok ;; *) bad "fresh sweep vs reference: exit $rc ($(head -c 300 "$TMP/err"))" ;; esac
    out_has "fresh sweep vs reference" "summary: 4 compared"
else
    bad "fresh sweep: exit $? ($(head -c 300 "$TMP/err"))"
fi

# ---- options -----------------------------------------------------------------
run "no args" 2
one_line "no args" "expects two files"
run "one file" 2 "$TMP/base.csv"
run "three files" 2 "$TMP/base.csv" "$TMP/base.csv" "$TMP/base.csv"
one_line "three files" "unexpected argument"
run "bad threshold" 2 "$TMP/base.csv" "$TMP/slow.csv" --threshold abc
one_line "bad threshold" "--threshold expects a percentage in \[0, 1000\], got 'abc'"
run "negative threshold" 2 "$TMP/base.csv" "$TMP/slow.csv" --threshold -1
run "missing value" 2 "$TMP/base.csv" "$TMP/slow.csv" --metric
one_line "missing value" "--metric expects a value"
run "bad format" 2 "$TMP/base.csv" "$TMP/slow.csv" --format xml
one_line "bad format" "--format expects one of table, csv, json"
run "unknown option" 2 "$TMP/base.csv" "$TMP/slow.csv" --frobnicate
one_line "unknown option" "unknown option '--frobnicate'"
run "unknown metric" 2 "$TMP/base.csv" "$TMP/slow.csv" --metric nope
one_line "unknown metric" "base.csv:9: no column 'nope'"
run "help" 0 --help
out_has "help" "exit status: 0 no regression, 1 at least one regression"
out_has "help" "3 noisy,"
if [ -w /dev/full ]; then
    "$KVLAB" compare "$TMP/base.csv" "$TMP/same.csv" >/dev/full 2>"$TMP/err"
    rc=$?
    # the inputs were fine: a result that could not be written is a
    # run-time failure (1), not unusable input (2)
    if [ "$rc" = 1 ]; then ok; else bad "write to /dev/full: exit $rc, want 1"; fi
    one_line "write to /dev/full" "cannot write the result"
fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
