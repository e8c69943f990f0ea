#!/usr/bin/env bash
# e2e_stale.sh - end-to-end tests of `kvlab stale-cache` on synthetic
# checkpoints (no PyTorch needed).
#
# With the same weights on both sides the "stale" cache is not stale: its
# logits equal the no-cache ones up to float rounding, like the control
# line. With different weights (another seed, or OLD with one weight array
# nudged) the stale-cache logits differ from the no-cache ones by far more
# than rounding, and every layer's K/V distance is non-zero. Bad input: exit
# 2 with one "kvlab: " line. Prints "N passed, N failed".
set -u
KVLAB=${KVLAB:-build/kvlab}
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
    run "$@"
    if [ "$rc" -ne 2 ] || [ "$(wc -l <"$tmp/err")" -ne 1 ] || ! grep -q '^kvlab: ' "$tmp/err"; then
        bad "$desc: exit $rc, stderr: $(head -c 200 "$tmp/err")"
    else
        ok
    fi
}
SMALL=(--layers 3 --dim 64 --heads 4 --kv-heads 2 --hidden 96 --max-len 128)
"$KVLAB" export-synthetic --out "$tmp/a.bin" "${SMALL[@]}" --seed 1 >/dev/null
"$KVLAB" export-synthetic --out "$tmp/b.bin" "${SMALL[@]}" --seed 2 >/dev/null
"$KVLAB" export-synthetic --out "$tmp/c.bin" --layers 2 --dim 64 --heads 4 --kv-heads 2 \
    --hidden 96 --max-len 128 >/dev/null
S=(stale-cache --threads 1 --prompt "the cache and the weights")

run "${S[@]}" --model "$tmp/a.bin" --updated "$tmp/a.bin"
ctrl=$(awk '/old weights: cache vs no cache/ { print $(NF - 2) }' "$tmp/out")
stale=$(awk '/new weights: STALE cache vs no cache/ { print $(NF - 5) }' "$tmp/out")
[ "$rc" -eq 0 ] && awk -v a="$ctrl" -v b="$stale" 'BEGIN { exit !(a != "" && a < 1e-4 && b < 1e-4) }' &&
    ok || bad "same weights: control $ctrl, stale $stale (exit $rc) $(head -c 300 "$tmp/err")"
awk '/^    [0-9]+  / { if ($2 + 0 != 0 || $3 + 0 != 0) exit 1; n++ } END { exit n != 3 }' "$tmp/out" &&
    ok || bad "same weights: a layer's K/V differ: $(cat "$tmp/out")"

run "${S[@]}" --model "$tmp/a.bin" --updated "$tmp/b.bin"
ctrl=$(awk '/old weights: cache vs no cache/ { print $(NF - 2) }' "$tmp/out")
stale=$(awk '/new weights: STALE cache vs no cache/ { print $(NF - 5) }' "$tmp/out")
[ "$rc" -eq 0 ] && awk -v a="$ctrl" -v b="$stale" 'BEGIN { exit !(a < 1e-4 && b > 1e-2) }' &&
    ok || bad "other weights: control $ctrl, stale $stale (exit $rc)"
awk '/^    [0-9]+  / { if (!($2 > 0 && $3 > 0)) exit 1; n++ } END { exit n != 3 }' "$tmp/out" &&
    ok || bad "other weights: a layer's K/V distance is zero: $(cat "$tmp/out")"
run stale-cache --help
[ "$rc" -eq 0 ] && grep -q -- "--updated" "$tmp/out" && ok || bad "--help"
expect_bad "--prompt and --prompt-tokens" "${S[@]}" --model "$tmp/a.bin" --updated "$tmp/b.bin" \
    --prompt-tokens 1,2
expect_bad "no --updated" stale-cache --model "$tmp/a.bin"
expect_bad "no --model" stale-cache --updated "$tmp/a.bin"
expect_bad "different shapes" "${S[@]}" --model "$tmp/a.bin" --updated "$tmp/c.bin"
expect_bad "missing file" "${S[@]}" --model "$tmp/a.bin" --updated "$tmp/none.bin"
expect_bad "not a checkpoint" "${S[@]}" --model "$tmp/a.bin" --updated "$tmp/out"
expect_bad "empty prompt" stale-cache --model "$tmp/a.bin" --updated "$tmp/b.bin" --prompt ''
expect_bad "token out of the vocabulary" stale-cache --model "$tmp/a.bin" --updated "$tmp/b.bin" \
    --prompt-tokens 1,256
expect_bad "unknown option" "${S[@]}" --model "$tmp/a.bin" --updated "$tmp/b.bin" --frob
expect_bad "--batch 2" "${S[@]}" --model "$tmp/a.bin" --updated "$tmp/b.bin" --batch 2
# --strategy picks the exact cache: an unknown one, one that evicts or rounds
# is refused; another exact one gives the same numbers
expect_bad "--strategy nosuch" "${S[@]}" --model "$tmp/a.bin" --updated "$tmp/b.bin" --strategy nosuch
expect_bad "--strategy sliding" "${S[@]}" --model "$tmp/a.bin" --updated "$tmp/b.bin" --strategy sliding
expect_bad "--dtype f16" "${S[@]}" --model "$tmp/a.bin" --updated "$tmp/b.bin" --dtype f16
expect_bad "a control character in --updated" "${S[@]}" --model "$tmp/a.bin" --updated "$tmp/x"$'\n'".bin"
run "${S[@]}" --model "$tmp/a.bin" --updated "$tmp/b.bin"
grep -v '^  cache: ' "$tmp/out" >"$tmp/dyn.out"
run "${S[@]}" --model "$tmp/a.bin" --updated "$tmp/b.bin" --strategy static
[ "$rc" -eq 0 ] && grep -q '^  cache: static' "$tmp/out" && ok || bad "--strategy static: exit $rc"
grep -v '^  cache: ' "$tmp/out" | cmp -s - "$tmp/dyn.out" && ok || bad "static and dynamic differ"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
