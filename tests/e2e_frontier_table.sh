#!/usr/bin/env bash
# e2e_frontier_table.sh - bench/scripts/frontier_table.sh, the markdown tables of
# the memory-accuracy frontier (what `make frontier` writes beside
# out/frontier.csv): hand-made frontier CSVs with known figures, columns in
# a shuffled order, `#` metadata and no `dynamic` row (the f32 bytes from
# the shape), must give exactly the expected tables; a file with a
# `dynamic` row and no shape columns takes the row's bytes; bad input (no
# file, a missing column, no f32 reference, no rows, bad usage) exits 2
# with one line and leaves an existing table alone. Never runs a timing.
# Usage: bash tests/e2e_frontier_table.sh
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TABLE="$ROOT/bench/scripts/frontier_table.sh"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/kvlab_e2e_frontier_table.XXXXXX")
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0
check() { # check DESCRIPTION COMMAND...
    local what=$1; shift
    if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $what"; fi
}
# bad_input DESCRIPTION WORD ARGS...: exit 2, one stderr line naming WORD,
# no table written over the old one, no temporary file left
bad_input() {
    local what=$1 word=$2; shift 2
    echo "old table" >"$TMP/old.md"
    bash "$TABLE" "$@" "$TMP/old.md" >"$TMP/bad.out" 2>"$TMP/bad.err"
    local rc=$?
    check "$what: exit 2 (rc=$rc)" test "$rc" = 2
    check "$what: one line on stderr ($(head -c 200 "$TMP/bad.err"))" test "$(wc -l <"$TMP/bad.err")" = 1
    check "$what: the line names '$word'" grep -qF -- "$word" "$TMP/bad.err"
    check "$what: nothing on stdout" test ! -s "$TMP/bad.out"
    check "$what: the old table is kept" grep -qx 'old table' "$TMP/old.md"
    check "$what: no temporary file left" test -z "$(find "$TMP" -maxdepth 1 -name '*.tmp.*')"
}

# ---------------------------------------------------------------- the shape
# 2 layers, batch 1, 2 KV heads of 16: the f32 bytes of T tokens are
# 2 x 1 x 2 x 16 x 2 x 4 x T = 512 T: 0.25 MiB at T = 512, 1 MiB at 2048.
# Columns shuffled; rows out of order in bytes and in T (2048 first); the
# `dynamic` row absent. sinks@25% and sliding@25% hold the same bytes: the
# file's order is kept. h2o's step is nan, int4's empty: "-".
cat >"$TMP/a.csv" <<'EOF'
# kvlab sweep
# schema=2
# commit=abc1234
# date=2026-01-02T03:04:05Z
# cpu=Test CPU, 2 cores
# command=kvlab sweep --frontier bench/data/frontier.list --seq-lens 512,2048 --out a.csv
step_ns_median,label,cache_bytes,kv_heads,rel_err,dtype,seq_len,head_dim,token_match,params,layers,max_abs_err,strategy,batch,dim,heads
1234567,f16,524288,2,4.15253e-05,f16,2048,16,1.0000,dtype=f16,2,0.001,dynamic,1,64,4
1400000,sinks@25%,262144,2,0.3,f32,2048,16,0.6190,sinks=4;window=508;reindex=0,2,0.9,sinks,1,64,4
1500000,sliding@25%,262144,2,0.25,f32,2048,16,0.5,window=512;dtype=f32,2,0.8,sliding,1,64,4
2000000,int8,344064,2,0.00102814,int8,2048,16,1,bits=8;group=32;residual=32;layout=token,2,0.01,quantized,1,64,4
250000,sinks@50%,131072,2,0.2,f32,512,16,0.5238,sinks=4;window=124;reindex=0,2,0.7,sinks,1,64,4
,int4,86016,2,0.0236,int4,512,16,1.0000,bits=4;group=32;residual=32;layout=token,2,0.05,quantized,1,64,4
nan,h2o@12.5%,130048,2,0.1,f32,2048,16,0.7143,heavy=64;window=64,2,0.6,h2o,1,64,4
EOF
cat >"$TMP/a.want" <<'EOF'
Run: commit abc1234, date 2026-01-02T03:04:05Z, cpu Test CPU, 2 cores; model: 2 layers, dim 64, 4 heads, 2 KV heads of 16 (synthetic, random weights).

T = 512: an f32 `dynamic` cache holds 0.250 MiB (from the shape: layers x batch x kv_heads x head_dim x 2 x 4 B x T).

| configuration | what it keeps | cache (MiB) | of f32 dynamic | rel. logits error | greedy tokens agree | decode step (ms) |
|---|---|---:|---:|---:|---:|---:|
| int4 | int4: bits=4, group=32, residual=32, layout=token | 0.082 | 0.328 | 0.0236 | 100.0% | - |
| sinks@50% | sinks=4, window=124, reindex=0 | 0.125 | 0.500 | 0.200 | 52.4% | 0.250 |

T = 2048: an f32 `dynamic` cache holds 1.00 MiB (from the shape: layers x batch x kv_heads x head_dim x 2 x 4 B x T).

| configuration | what it keeps | cache (MiB) | of f32 dynamic | rel. logits error | greedy tokens agree | decode step (ms) |
|---|---|---:|---:|---:|---:|---:|
| h2o@12.5% | heavy=64, window=64 | 0.124 | 0.124 | 0.100 | 71.4% | - |
| sinks@25% | sinks=4, window=508, reindex=0 | 0.250 | 0.250 | 0.300 | 61.9% | 1.400 |
| sliding@25% | window=512 | 0.250 | 0.250 | 0.250 | 50.0% | 1.500 |
| int8 | int8: bits=8, group=32, residual=32, layout=token | 0.328 | 0.328 | 0.00103 | 100.0% | 2.000 |
| f16 | f16 | 0.500 | 0.500 | 4.15e-05 | 100.0% | 1.235 |
EOF
bash "$TABLE" "$TMP/a.csv" "$TMP/a.md" >"$TMP/out" 2>"$TMP/err"
rc=$?
check "shuffled columns, no dynamic row: exit 0 (rc=$rc: $(head -c 200 "$TMP/err"))" test "$rc" = 0
check "nothing on stdout or stderr" test ! -s "$TMP/out" -a ! -s "$TMP/err"
if diff "$TMP/a.want" "$TMP/a.md" >"$TMP/diff"; then pass=$((pass + 1)); else
    fail=$((fail + 1)); echo "FAIL: the tables of a.csv differ from the expected ones:"; sed 's/^/    /' "$TMP/diff"; fi
check "no temporary file left" test -z "$(find "$TMP" -maxdepth 1 -name '*.tmp.*')"

# ---------------------------------------------------------------- a dynamic row
# No shape columns, no date or cpu: the f32 bytes of T = 1024 are the
# `dynamic` f32 row's (the dynamic-f16 row is not it), the model is the
# command's --model, the output path is the CSV's with .md.
cat >"$TMP/b.csv" <<'EOF'
# command=kvlab sweep --frontier l.list --seq-lens 1024 --model m/ckpt.bin --out b.csv
label,strategy,params,seq_len,cache_bytes,rel_err,max_abs_err,token_match,step_ns_median,dtype
f16,dynamic,dtype=f16,1024,2097152,0.0001,0.001,1.0000,2800000,f16
int2,quantized,bits=2;group=32;residual=32;layout=kivi,1024,573440,0.11,0.5,0.7619,2500000,int2
dynamic,dynamic,dtype=f32,1024,4194304,0,0,1.0000,3000000,f32
EOF
bash "$TABLE" "$TMP/b.csv" >"$TMP/out" 2>"$TMP/err"
rc=$?
check "a dynamic row, no shape: exit 0 (rc=$rc: $(head -c 200 "$TMP/err"))" test "$rc" = 0
check "the default output is b.md" test -s "$TMP/b.md"
check "the run line says what is not recorded and names the checkpoint" grep -qxF \
    'Run: commit not recorded, date not recorded, cpu not recorded; model: shape not recorded (m/ckpt.bin).' "$TMP/b.md"
# shellcheck disable=SC2016 # the backquotes are markdown
check "the f32 bytes from the dynamic row" grep -qxF \
    'T = 1024: an f32 `dynamic` cache holds 4.00 MiB (its own row in this run).' "$TMP/b.md"
check "int2 at 0.137 of the dynamic row" grep -qxF \
    '| int2 | int2: bits=2, group=32, residual=32, layout=kivi | 0.547 | 0.137 | 0.110 | 76.2% | 2.500 |' "$TMP/b.md"
check "the dynamic row itself: 1.000, error 0" grep -qxF '| dynamic | f32 | 4.00 | 1.000 | 0 | 100.0% | 3.000 |' "$TMP/b.md"
check "rows by bytes: int2, f16, dynamic" \
    test "$(grep '^| [a-z]' "$TMP/b.md" | grep -v configuration | cut -d'|' -f2 | tr -d ' \n')" = int2f16dynamic

# ---------------------------------------------------------------- the reference is data
# The cache the fractions divide is bench/data/targets.tsv's frontier row
# (TARGETS= another file): here the f16 row of b.csv, by its label.
awk -F'\t' -v OFS='\t' '$1 == "frontier" && $3 == "reference" { $2 = "label=f16" } { print }' \
    "$ROOT/bench/data/targets.tsv" >"$TMP/t.tsv"
TARGETS="$TMP/t.tsv" bash "$TABLE" "$TMP/b.csv" "$TMP/bt.md" >/dev/null 2>"$TMP/err"
# shellcheck disable=SC2016 # the backquotes are markdown
check "TARGETS=: the reference is the targets file's (f16 by label)" grep -qxF \
    'T = 1024: an `f16` cache holds 2.00 MiB (its own row in this run).' "$TMP/bt.md"
check "TARGETS=: the dynamic row is 2.000 of it" grep -qxF '| dynamic | f32 | 4.00 | 2.000 | 0 | 100.0% | 3.000 |' "$TMP/bt.md"
awk -F'\t' '$1 != "frontier"' "$ROOT/bench/data/targets.tsv" >"$TMP/t2.tsv"
TARGETS="$TMP/t2.tsv" bash "$TABLE" "$TMP/b.csv" "$TMP/bt2.md" >/dev/null 2>"$TMP/err"
rc=$?
check "a targets file without a frontier reference: exit 2, one line (rc=$rc: $(head -c 200 "$TMP/err"))" \
    test "$rc" = 2 -a "$(wc -l <"$TMP/err")" = 1

# ---------------------------------------------------------------- bad input
bad_input "a missing file" "$TMP/none.csv" "$TMP/none.csv"
awk -F, '/^#/ { print; next } !h { for (i = 1; i <= NF; i++) if ($i == "rel_err") c = i; h = 1 }
    { s = ""; n = 0; for (i = 1; i <= NF; i++) if (i != c) s = s (n++ ? "," : "") $i; print s }' "$TMP/a.csv" >"$TMP/norel.csv"
bad_input "no rel_err column" '"rel_err"' "$TMP/norel.csv"
grep -v '^dynamic,' "$TMP/b.csv" >"$TMP/noref.csv"
bad_input "no dynamic row and no shape" "T = 1024" "$TMP/noref.csv"
grep '^#\|^label' "$TMP/b.csv" >"$TMP/empty.csv"
bad_input "a header and no rows" "no rows" "$TMP/empty.csv"
bash "$TABLE" >/dev/null 2>"$TMP/err"
rc=$?
check "no argument: exit 2 with the usage line (rc=$rc)" test "$rc" = 2 -a "$(cat "$TMP/err")" = \
    "usage: bash bench/scripts/frontier_table.sh FRONTIER_CSV [OUT_MD]"
bash "$TABLE" "$TMP/a.csv" "$TMP/x.md" extra >/dev/null 2>"$TMP/err"
rc=$?
check "three arguments: exit 2 (rc=$rc)" test "$rc" = 2 -a "$(wc -l <"$TMP/err")" = 1

echo "e2e_frontier_table: $pass passed, $fail failed"
[ "$fail" = 0 ]
