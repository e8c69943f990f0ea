#!/usr/bin/env bash
# e2e_cli.sh - end-to-end tests of `kvlab strategies` and `kvlab generate`.
#
# Good options must exit 0 and print one `tokens:` line per sequence (ids in
# range, the same ids for every exact strategy); every bad input must exit
# with status 2 and print exactly one line, starting with "kvlab: ", on
# stderr. Run with KVLAB=path/to/kvlab (the Makefile sets it). Prints
# "N passed, N failed" last and exits non-zero on any failure.
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

# A small model so every run takes milliseconds.
SMALL=(--layers 2 --dim 64 --heads 4 --kv-heads 2 --hidden 96 --vocab 256 --max-len 128
    --threads 1)

# run ARGS...: runs kvlab, sets rc, leaves stdout/stderr in $tmp/out, $tmp/err
run() {
    "$KVLAB" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
}

# expect_tokens DESC NSEQ NTOK ARGS...: exit 0, NSEQ tokens lines of NTOK ids < 256
expect_tokens() {
    local desc=$1 nseq=$2 ntok=$3
    shift 3
    run "$@"
    if [ "$rc" -ne 0 ]; then
        bad "$desc: exit $rc: $(head -c 300 "$tmp/err")"
        return
    fi
    local lines
    lines=$(grep -c '^tokens:' "$tmp/out")
    if [ "$lines" -ne "$nseq" ]; then
        bad "$desc: $lines tokens lines, expected $nseq"
        return
    fi
    if ! awk -v n="$ntok" '/^tokens:/ { if (NF - 1 != n) exit 1;
            for (i = 2; i <= NF; i++) if ($i !~ /^[0-9]+$/ || $i + 0 >= 256) exit 1 }' \
        "$tmp/out"; then
        bad "$desc: malformed tokens line: $(grep '^tokens:' "$tmp/out" | head -1)"
        return
    fi
    ok
}

# expect_bad DESC ARGS...: exit 2, exactly one stderr line starting "kvlab: "
expect_bad() {
    local desc=$1
    shift
    run "$@"
    local n
    n=$(wc -l <"$tmp/err")
    if [ "$rc" -ne 2 ]; then
        bad "$desc: exit $rc, expected 2 ($(head -c 200 "$tmp/err"))"
    elif [ "$n" -ne 1 ] || ! grep -q '^kvlab: ' "$tmp/err"; then
        bad "$desc: expected one 'kvlab: ' line on stderr, got $n: $(head -c 300 "$tmp/err")"
    elif grep -q '^tokens:' "$tmp/out"; then
        bad "$desc: printed tokens despite the error"
    else
        ok
    fi
}

# ---------------------------------------------------------------------------
# kvlab strategies

run strategies
if [ "$rc" -eq 0 ] && grep -q '^none ' "$tmp/out" && grep -q '^dynamic ' "$tmp/out" &&
    awk 'NF < 3 { exit 1 }' "$tmp/out"; then
    ok
else
    bad "strategies: exit $rc or missing names/descriptions: $(head -c 300 "$tmp/out")"
fi
mapfile -t names < <(awk '{ print $1 }' "$tmp/out")
[ "${#names[@]}" -ge 6 ] && ok || bad "strategies: only ${#names[@]} listed"
expect_bad "strategies with an argument" strategies extra

# ---------------------------------------------------------------------------
# kvlab generate: good runs

# each strategy gets the small values of the parameters its own table has
# (`kvlab strategies` lists them in brackets): an option a strategy does
# not take is refused
small_params() {
    local line
    line=$(awk -v s="$1" '$1 == s' "$tmp/strategies.txt")
    for p in "--window 8" "--residual 4" "--group 8"; do
        case $line in *"[${p%% *} "* | *" ${p%% *} "*) printf '%s\n' $p ;; esac
    done
}
"$KVLAB" strategies >"$tmp/strategies.txt"
for s in "${names[@]}"; do
    mapfile -t sp < <(small_params "$s")
    expect_tokens "generate $s" 1 12 generate --strategy "$s" "${SMALL[@]}" \
        --prompt-len 10 --new-tokens 12 "${sp[@]}"
    grep '^tokens:' "$tmp/out" >"$tmp/tokens.$s"
    grep -q 'prefill' "$tmp/out" && grep -q 'flops' "$tmp/out" && grep -q 'cache' "$tmp/out" &&
        ok || bad "generate $s: no summary"
done
# exact strategies give the tokens of `none`
for s in dynamic dynamic-concat static; do
    if [ -f "$tmp/tokens.$s" ] && [ -f "$tmp/tokens.none" ]; then
        cmp -s "$tmp/tokens.$s" "$tmp/tokens.none" && ok ||
            bad "$s tokens differ from none: $(cat "$tmp/tokens.$s") vs $(cat "$tmp/tokens.none")"
    fi
done

expect_tokens "batch 3" 3 5 generate --strategy dynamic "${SMALL[@]}" --batch 3 \
    --prompt-len 6 --new-tokens 5
expect_tokens "mlp off" 1 5 generate --strategy static "${SMALL[@]}" --mlp off \
    --prompt-len 6 --new-tokens 5
expect_tokens "--opt=value form" 1 4 generate --strategy=dynamic --layers=1 --dim=32 \
    --heads=2 --kv-heads=1 --hidden=48 --max-len=64 --prompt-len=3 --new-tokens=4 --threads=1
expect_tokens "int4 quantized" 1 6 generate --strategy quantized "${SMALL[@]}" --bits 4 \
    --group 8 --residual 2 --prompt-len 9 --new-tokens 6
expect_tokens "default model" 1 3 generate --strategy dynamic --prompt-len 4 --new-tokens 3
expect_tokens "prompt + new == max-len" 1 6 generate --strategy static "${SMALL[@]:0:12}" \
    --threads 1 --max-len 16 --prompt-len 10 --new-tokens 6

# the seed decides the prompt and the weights
run generate --strategy dynamic "${SMALL[@]}" --seed 7 --new-tokens 16
a=$(grep '^tokens:' "$tmp/out")
run generate --strategy dynamic "${SMALL[@]}" --seed 7 --new-tokens 16
b=$(grep '^tokens:' "$tmp/out")
run generate --strategy dynamic "${SMALL[@]}" --seed 8 --new-tokens 16
c=$(grep '^tokens:' "$tmp/out")
[ -n "$a" ] && [ "$a" = "$b" ] && ok || bad "same seed, different tokens: $a / $b"
[ "$a" != "$c" ] && ok || bad "seeds 7 and 8 give the same tokens: $a"

# a text prompt (byte-level vocabulary): one tokens line and one text line
expect_tokens "--prompt TEXT" 2 7 generate --strategy dynamic "${SMALL[@]}" --batch 2 \
    --prompt "Hello, cache" --new-tokens 7
[ "$(grep -c '^text: ' "$tmp/out")" -eq 2 ] && grep -q 'prompt 12,' "$tmp/out" && ok ||
    bad "--prompt: expected 2 text lines and a 12-token prompt: $(head -c 300 "$tmp/out")"

run generate --help
[ "$rc" -eq 0 ] && grep -q -- '--strategy' "$tmp/out" && ok || bad "generate --help: exit $rc"

# ---------------------------------------------------------------------------
# kvlab generate: bad input (exit 2, one line)

G=(generate --strategy dynamic "${SMALL[@]}")
expect_bad "unknown strategy" generate --strategy bogus "${SMALL[@]}"
expect_bad "missing --strategy" generate "${SMALL[@]}"
expect_bad "kv-heads not dividing heads" "${G[@]}" --kv-heads 3
expect_bad "dim not divisible by heads" "${G[@]}" --dim 66
expect_bad "odd head_dim" "${G[@]}" --dim 12 --heads 4 --kv-heads 1
expect_bad "group not dividing head_dim" generate --strategy quantized "${SMALL[@]}" --group 5
expect_bad "bits 3" "${G[@]}" --bits 3
expect_bad "bits 16" generate --strategy quantized "${SMALL[@]}" --bits 16
expect_bad "window 0" generate --strategy sliding "${SMALL[@]}" --window 0
expect_bad "window -4" generate --strategy sliding "${SMALL[@]}" --window -4
expect_bad "non-number" "${G[@]}" --heads x
expect_bad "trailing junk" "${G[@]}" --heads 4x
expect_bad "empty number" "${G[@]}" --layers ''
expect_bad "space before number" "${G[@]}" --layers ' 2'
expect_bad "fraction" "${G[@]}" --prompt-len 2.5
expect_bad "negative prompt" "${G[@]}" --prompt-len -5
expect_bad "negative batch" "${G[@]}" --batch -1
expect_bad "zero new tokens" "${G[@]}" --new-tokens 0
expect_bad "zero threads" "${G[@]}" --threads 0
expect_bad "negative seed" "${G[@]}" --seed -1
expect_bad "integer overflow" "${G[@]}" --heads 99999999999999999999999
expect_bad "int32 overflow" "${G[@]}" --dim 4294967296
expect_bad "byte count overflows" generate --strategy dynamic --layers 1048576 \
    --dim 1073741824 --heads 1 --kv-heads 1 --threads 1
expect_bad "cache byte count overflows" generate --strategy static --layers 1048576 \
    --dim 65536 --heads 1 --kv-heads 1 --batch 65536 --max-len 1073741824 --threads 1
expect_bad "more memory than the machine" generate --strategy dynamic --vocab 1073741824 \
    --dim 65536 --heads 1 --kv-heads 1 --threads 1
expect_bad "static: prompt + new over max-len" generate --strategy static "${SMALL[@]}" \
    --max-len 16 --prompt-len 10 --new-tokens 7
expect_bad "dynamic: prompt + new over max-len" "${G[@]}" --max-len 16 --prompt-len 16 \
    --new-tokens 1
expect_bad "mlp maybe" "${G[@]}" --mlp maybe
expect_bad "unknown option" "${G[@]}" --frobnicate 3
expect_bad "positional argument" "${G[@]}" extra
expect_bad "missing value" "${G[@]}" --heads
expect_bad "empty --prompt" "${G[@]}" --prompt ''
expect_bad "--prompt without a tokenizer" "${G[@]}" --vocab 300 --prompt hi
expect_bad "missing tokenizer file" "${G[@]}" --prompt hi --tokenizer "$tmp/no-such-tok.bin"
expect_bad "--prompt over max-len" "${G[@]}" --max-len 8 --new-tokens 2 --prompt "0123456789"
expect_bad "missing model file" "${G[@]}" --model "$tmp/no-such-model.bin"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
