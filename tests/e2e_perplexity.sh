#!/usr/bin/env bash
# e2e_perplexity.sh - end-to-end tests of `kvlab perplexity` and of the
# scripts of its benchmark (bench/scripts/ppl_table.sh, bench/scripts/streaming.sh), on a
# small synthetic checkpoint, so they need neither PyTorch nor the trained
# model (tests/e2e_torch.sh checks the numbers against PyTorch).
#
# Good runs: exit 0, a bucket table whose token counts add up to the scored
# tokens, the same bits per byte for every exact strategy (none, dynamic,
# dynamic-concat, static, and sliding with a window covering the context),
# a different one for a window that evicts, a CSV whose buckets add up to
# its summary. Bad input (the issue's list and more): exit 2 with one
# "kvlab: " line on stderr and no CSV written. Prints "N passed, N failed".
set -u
KVLAB=${KVLAB:-build/kvlab}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() {
    fail=$((fail + 1))
    echo "FAIL: $*"
}
run() {
    "$KVLAB" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
}
expect_bad() {
    local desc=$1
    shift
    rm -f "$tmp/bad.csv"
    run "$@"
    local n
    n=$(wc -l <"$tmp/err")
    if [ "$rc" -ne 2 ]; then
        bad "$desc: exit $rc, expected 2 ($(head -c 200 "$tmp/err"))"
    elif [ "$n" -ne 1 ] || ! grep -q '^kvlab: ' "$tmp/err"; then
        bad "$desc: expected one 'kvlab: ' line on stderr, got $n: $(head -c 300 "$tmp/err")"
    elif [ -e "$tmp/bad.csv" ]; then
        bad "$desc: wrote a CSV despite the error"
    else
        ok
    fi
}
# bpb FILE: the summary's bits per byte (full precision, from the CSV)
bpb() { sed -n 's/^# bits_per_byte=//p' "$1"; }

M=$tmp/model.bin
"$KVLAB" export-synthetic --out "$M" --layers 2 --dim 64 --heads 4 --kv-heads 2 --hidden 96 \
    --max-len 128 >/dev/null || bad "export-synthetic failed"
# a text of 300 bytes
for i in $(seq 1 10); do printf 'line %02d: the quick brown fox jumps.\n' "$i"; done >"$tmp/text.txt"
head -c 300 "$tmp/text.txt" >"$tmp/t300.txt"
T=$tmp/t300.txt
P=(perplexity --model "$M" --text "$T" --threads 1)

# ---------------------------------------------------------------- good runs
for s in none dynamic dynamic-concat static sliding; do
    # (--window only for the strategy that takes it: any other refuses it)
    w=()
    [ "$s" = sliding ] && w=(--window 100)
    run "${P[@]}" --strategy "$s" --context 100 "${w[@]}" --csv "$tmp/$s.csv"
    if [ "$rc" -ne 0 ]; then
        bad "perplexity $s: exit $rc: $(head -c 300 "$tmp/err")"
        continue
    fi
    grep -q "^bits per byte [0-9.]*, perplexity" "$tmp/out" && ok || bad "$s: no summary line"
    # the bucket rows add up to the scored tokens (299)
    awk '/^  [0-9]+-[0-9]+ / { n += $2 } END { exit !(n == 299) }' "$tmp/out" && ok ||
        bad "$s: bucket tokens do not add up to 299: $(cat "$tmp/out")"
    # the CSV's buckets add up to its summary
    awk -F, -v want="$(bpb "$tmp/$s.csv")" '/^#/ || !h++ { next }
        { nats += $5; bytes += $4 } END { b = nats / log(2) / bytes
          exit !(bytes == 299 && (b - want < 1e-5 && want - b < 1e-5)) }' "$tmp/$s.csv" && ok ||
        bad "$s: CSV buckets disagree with the summary"
done
for s in dynamic-concat static sliding none; do
    awk -v a="$(bpb "$tmp/$s.csv")" -v b="$(bpb "$tmp/dynamic.csv")" \
        'BEGIN { d = a - b; exit !(a != "" && d < 1e-5 && -d < 1e-5) }' && ok ||
        bad "$s: $(bpb "$tmp/$s.csv") bits per byte, dynamic $(bpb "$tmp/dynamic.csv")"
done
run "${P[@]}" --strategy sliding --window 8 --context 100 --csv "$tmp/w8.csv"
awk -v a="$(bpb "$tmp/w8.csv")" -v b="$(bpb "$tmp/dynamic.csv")" \
    'BEGIN { d = a - b; exit !(rc == 0 && (d > 1e-3 || -d > 1e-3)) }' rc="$rc" && ok ||
    bad "sliding window 8 gives dense's bits per byte ($(bpb "$tmp/w8.csv"))"
# one stream (no --context) fits max-len 128 with 128 tokens; recompute; the forms
head -c 129 "$T" >"$tmp/t129.txt"
run perplexity --model "$M" --text "$tmp/t129.txt" --threads 1
[ "$rc" -eq 0 ] && grep -q "one stream of 128 positions" "$tmp/out" && ok ||
    bad "stream of 128 positions: exit $rc $(head -c 200 "$tmp/err")"
run "${P[@]}" --recompute 16 --context 64 --bucket 16
[ "$rc" -eq 0 ] && grep -q "recompute 16" "$tmp/out" && grep -q "^  48-63 " "$tmp/out" && ok ||
    bad "recompute: exit $rc $(head -c 300 "$tmp/out")"
run "${P[@]}" --context=50 --max-tokens=60 --strategy=quantized --bits=4 --group=8 --residual=4
[ "$rc" -eq 0 ] && grep -q "59 tokens\|  all  *59 " "$tmp/out" && ok ||
    bad "--opt=value forms / --max-tokens: exit $rc $(head -c 300 "$tmp/out")"
run perplexity --help
[ "$rc" -eq 0 ] && grep -q -- "--context N" "$tmp/out" && ok || bad "--help"

# ---------------------------------------------------------------- bad input
: >"$tmp/empty.txt"
printf 'x' >"$tmp/one.txt"
"$KVLAB" export-synthetic --out "$tmp/v300.bin" --layers 1 --dim 32 --heads 2 --kv-heads 1 \
    --hidden 48 --vocab 300 --max-len 64 >/dev/null
expect_bad "empty text" "${P[@]}" --text "$tmp/empty.txt" --csv "$tmp/bad.csv"
expect_bad "one-byte text" "${P[@]}" --text "$tmp/one.txt" --csv "$tmp/bad.csv"
expect_bad "--context 0" "${P[@]}" --context 0 --csv "$tmp/bad.csv"
expect_bad "--context beyond max length" "${P[@]}" --context 129 --csv "$tmp/bad.csv"
expect_bad "--recompute beyond max length" "${P[@]}" --recompute 129 --csv "$tmp/bad.csv"
expect_bad "vocab 300 without --tokenizer" "${P[@]}" --model "$tmp/v300.bin" --csv "$tmp/bad.csv"
expect_bad "stream longer than max length" "${P[@]}" --csv "$tmp/bad.csv"
expect_bad "no --model" perplexity --text "$T"
expect_bad "no --text" perplexity --model "$M"
expect_bad "missing text file" "${P[@]}" --text "$tmp/none.txt"
expect_bad "text is a directory" "${P[@]}" --text "$tmp"
expect_bad "missing model file" "${P[@]}" --model "$tmp/none.bin"
expect_bad "not a checkpoint" "${P[@]}" --model "$T"
expect_bad "unknown strategy" "${P[@]}" --context 64 --strategy frob
expect_bad "unknown option" "${P[@]}" --context 64 --frobnicate
expect_bad "--bucket 0" "${P[@]}" --context 64 --bucket 0
expect_bad "--max-tokens 1" "${P[@]}" --context 64 --max-tokens 1
expect_bad "--context not a number" "${P[@]}" --context 12x
expect_bad "--context without a value" "${P[@]}" --context
expect_bad "--batch 2" "${P[@]}" --context 64 --batch 2
expect_bad "--csv is the text" "${P[@]}" --context 64 --csv "$T"
expect_bad "quantized group not dividing head_dim" "${P[@]}" --context 64 --strategy quantized \
    --group 12
expect_bad "a tokenizer of another size" "${P[@]}" --context 64 --tokenizer "$M"
# every file judged before the run (the command layer): inputs regular and
# opened without blocking, --csv never an input, a read-only file, a
# directory, a FIFO, a device, a dangling link or a missing folder
"$KVLAB" export-synthetic --out "$tmp/junk.bin" --layers 1 --dim 16 --heads 2 --kv-heads 2 \
    --hidden 24 --max-len 16 --tokenizer-out "$tmp/tok.bin" >/dev/null
cp "$tmp/tok.bin" "$tmp/tok.copy"
expect_bad "--csv is the tokenizer" "${P[@]}" --context 64 --tokenizer "$tmp/tok.bin" \
    --csv "$tmp/tok.bin"
cmp -s "$tmp/tok.bin" "$tmp/tok.copy" && ok || bad "--csv overwrote the tokenizer"
cp "$T" "$tmp/ro.csv" && chmod 444 "$tmp/ro.csv"
expect_bad "--csv read-only" "${P[@]}" --context 64 --csv "$tmp/ro.csv"
cmp -s "$T" "$tmp/ro.csv" && [ "$(stat -c %a "$tmp/ro.csv")" = 444 ] && ok ||
    bad "--csv replaced a read-only file"
mkfifo "$tmp/fifo"
ln -s "$tmp/none/x" "$tmp/dangling"
for target in "$tmp" "$tmp/fifo" /dev/null "$tmp/dangling" "$tmp/no/such/x.csv"; do
    expect_bad "--csv $target" "${P[@]}" --context 64 --csv "$target"
done
timeout 20 "$KVLAB" "${P[@]}" --text "$tmp/fifo" >/dev/null 2>"$tmp/err"
[ $? = 2 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && ok || bad "--text FIFO: not refused at once"
expect_bad "--window past the memory" "${P[@]}" --context 64 --strategy sliding --window 1073741824
expect_bad "a control character in --text" "${P[@]}" --text "$tmp/no"$'\n'"such.txt"

# ---------------------------------------------------------------- scripts
# their configurations are written for the trained model: head_dim 32
# (quantization groups of 32), windows up to 256 (max length 512)
M2=$tmp/model2.bin
"$KVLAB" export-synthetic --out "$M2" --layers 2 --dim 64 --heads 2 --kv-heads 1 --hidden 96 \
    --max-len 512 >/dev/null || bad "export-synthetic failed"
PPL_CONTEXT=64 PPL_MAX_TOKENS=200 bash "$here/../bench/scripts/ppl_table.sh" "$KVLAB" "$M2" "$T" \
    "$tmp/ppl.csv" "$tmp/ppl.md" 2>"$tmp/ppl.err"
rc=$?
[ "$rc" -eq 0 ] && [ "$(grep -c '^"' "$tmp/ppl.csv")" -ge 6 ] && grep -q '^| dense' "$tmp/ppl.md" &&
    ok || bad "ppl_table.sh: exit $rc $(tail -c 300 "$tmp/ppl.err")"
awk -F, 'NR > 1 && $2 == "static" { exit !($10 == "+0.0000") }' "$tmp/ppl.csv" && ok ||
    bad "ppl_table.sh: static differs from dense: $(grep static "$tmp/ppl.csv")"
# the configurations run side by side: one at a time gives the same rows
PPL_JOBS=1 PPL_CONTEXT=64 PPL_MAX_TOKENS=200 bash "$here/../bench/scripts/ppl_table.sh" "$KVLAB" "$M2" "$T" \
    "$tmp/ppl1.csv" "$tmp/ppl1.md" 2>/dev/null &&
    cmp -s <(grep -v '^#' "$tmp/ppl.csv") <(grep -v '^#' "$tmp/ppl1.csv") && ok ||
    bad "ppl_table.sh: PPL_JOBS=1 and the default give different rows"
# a configuration that fails stops the table (exit 1, its label named, no file)
printf '#!/usr/bin/env bash\ncase " $* " in *" --window 128 "*) echo "planted failure" >&2; exit 1 ;; esac\nexec "%s" "$@"\n' \
    "$KVLAB" >"$tmp/kvfail" && chmod +x "$tmp/kvfail"
PPL_CONTEXT=64 PPL_MAX_TOKENS=200 bash "$here/../bench/scripts/ppl_table.sh" "$tmp/kvfail" "$M2" "$T" \
    "$tmp/pplf.csv" "$tmp/pplf.md" 2>"$tmp/pplf.err"
rc=$?
[ "$rc" -eq 1 ] && grep -q "'sliding window 128' failed: planted failure" "$tmp/pplf.err" &&
    [ ! -e "$tmp/pplf.csv" ] && ok || bad "ppl_table.sh with a failing configuration: exit $rc $(tail -c 200 "$tmp/pplf.err")"
PPL_JOBS=0 bash "$here/../bench/scripts/ppl_table.sh" "$KVLAB" "$M2" "$T" "$tmp/pplz.csv" "$tmp/pplz.md" 2>/dev/null
[ $? -eq 2 ] && ok || bad "ppl_table.sh: PPL_JOBS=0 not refused"
STREAM_LENGTH=64 STREAM_SEGMENTS=2 STREAM_BUCKET=16 bash "$here/../bench/scripts/streaming.sh" \
    "$KVLAB" "$M2" "$T" "$tmp/stream" 2>"$tmp/st.err"
rc=$?
# every configuration whose strategy is registered: one row per bucket of 16
# over 64 tokens (4), and the script's lines skip only unregistered ones
confs=$(grep -v '^[[:space:]]*#' "$here/../bench/data/streaming.configs" | grep '[|]')
nconf=$(echo "$confs" | grep -c . || true)
nreg=0
for s in $(echo "$confs" | sed -n 's/.*--strategy \([a-z0-9_-]*\).*/\1/p'); do
    "$KVLAB" strategies | grep -q "^$s " && nreg=$((nreg + 1))
done
[ "$rc" -eq 0 ] && [ "$nreg" -ge 3 ] && [ "$(grep -c '^"' "$tmp/stream/streaming.csv")" -eq $((4 * nreg)) ] &&
    awk -F'"' 'NR > 1 { n[$2]++ } END { for (l in n) if (n[l] != 4) exit 1 }' "$tmp/stream/streaming.csv" && ok ||
    bad "streaming.sh: exit $rc, $(grep -c '^"' "$tmp/stream/streaming.csv" 2>/dev/null) rows for $nreg of $nconf configurations"
if command -v gnuplot >/dev/null 2>&1; then
    gnuplot -e "dat='$tmp/stream/streaming.dat'; outdir='$tmp/plots'; context=64" \
        "$here/../plots/model/streaming.gp" 2>"$tmp/gp.err" &&
        head -c 8 "$tmp/plots/streaming.png" | od -An -c | grep -q 'P   N   G' && ok ||
        bad "plots/model/streaming.gp: $(head -c 200 "$tmp/gp.err")"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
