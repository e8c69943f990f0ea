#!/usr/bin/env bash
# e2e_demo.sh - end-to-end tests of `kvlab demo`, `kvlab export-synthetic`
# and checkpoint loading through the CLI.
#
# Golden outputs (tests/golden/demo_*.txt) pin what a reader sees for fixed
# seeds: every word and every integer (positions, shapes, mask rows, slot
# maps, FLOP and byte counts) must match exactly; decimal numbers (attention
# weights, logit differences, round-trip errors) within DEMO_ATOL + DEMO_RTOL
# * |golden|, because they are printed to 2-4 significant digits and a
# different float summation order may flip the last one; each shade
# character within one level (same reason: a weight near a level boundary).
# The one-line strategy descriptions on the "cache" header lines belong to
# the strategies, so only the strategy name is compared there.
#
# Regenerate after an intended change: KVLAB_UPDATE_GOLDEN=1 bash tests/e2e_demo.sh
set -u
KVLAB=${KVLAB:-build/kvlab}
here=$(cd "$(dirname "$0")" && pwd)
golden=$here/golden
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
DEMO_ATOL=0.02
DEMO_RTOL=0.05

note() { printf '  %s\n' "$*"; }
bad() { printf '  FAIL: %s\n' "$*"; fail=1; }

# compare_golden OUT GOLDEN: 0 when they match under the rules above.
compare_golden() {
    awk -v atol="$DEMO_ATOL" -v rtol="$DEMO_RTOL" '
    function isnum(s) { return s ~ /^[-+]?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$/ }
    function isint(s) { return s ~ /^[-+]?[0-9]+$/ }
    function lvl(c) { return index(".:-=+*#%@", c) }
    # Split s into alternating text and number pieces in arr; returns count.
    function pieces(s, arr,    n, m) {
        n = 0
        while (length(s) > 0) {
            m = match(s, /[-+]?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?/)
            if (m == 0) { arr[++n] = "T" s; break }
            if (m > 1) arr[++n] = "T" substr(s, 1, m - 1)
            arr[++n] = "N" substr(s, m, RLENGTH)
            s = substr(s, m + RLENGTH)
        }
        return n
    }
    function same_text(a, b,    na, nb, A, B, i, x, y, d) {
        na = pieces(a, A); nb = pieces(b, B)
        if (na != nb) return 0
        for (i = 1; i <= na; i++) {
            if (substr(A[i], 1, 1) != substr(B[i], 1, 1)) return 0
            x = substr(A[i], 2); y = substr(B[i], 2)
            if (substr(A[i], 1, 1) == "T" || isint(x) && isint(y)) {
                if (x != y) return 0
                continue
            }
            d = x - y; if (d < 0) d = -d
            if (d > atol + rtol * (y < 0 ? -y : y)) return 0
        }
        return 1
    }
    # Shade rows: "  attn   L0 q@7       @:*:*==+   max 0.26 at pos 0"
    function same_shade_line(a, b,    ia, ib, sa, sb, i, ca, cb, d) {
        ia = index(a, "   max "); ib = index(b, "   max ")
        if (ia == 0 || ib == 0) return same_text(a, b)
        if (substr(a, 1, 22) != substr(b, 1, 22)) return 0
        sa = substr(a, 23, ia - 23); sb = substr(b, 23, ib - 23)
        if (length(sa) != length(sb)) return 0
        for (i = 1; i <= length(sa); i++) {
            ca = substr(sa, i, 1); cb = substr(sb, i, 1)
            # masked keys and the elision mark must match exactly
            if (ca == "_" || cb == "_" || ca == "~" || cb == "~") { if (ca != cb) return 0; continue }
            d = lvl(ca) - lvl(cb)
            if (lvl(ca) == 0 || lvl(cb) == 0 || d > 1 || d < -1) return 0
        }
        return same_text(substr(a, ia), substr(b, ib))
    }
    FNR == NR { g[FNR] = $0; ng = FNR; next }
    {
        n = FNR; o = $0
        if (n > ng) { printf "    extra line %d: %s\n", n, o; bad = 1; next }
        w = g[n]; ok = 1
        if (o ~ /^cache  / && w ~ /^cache  /) {
            split(o, oa, ":"); split(w, wa, ":"); ok = oa[1] == wa[1]
        } else if (substr(o, 1, 22) ~ /L[0-9]+ .*q@/ && substr(o, 1, 9) ~ /^  (attn)?  *$/) {
            ok = same_shade_line(o, w)
        } else {
            ok = same_text(o, w)
        }
        if (!ok) {
            printf "    line %d differs\n      got:    %s\n      golden: %s\n", n, o, w
            bad = 1
        }
    }
    END {
        if (FNR < ng) { printf "    output ends at line %d of %d\n", FNR, ng; bad = 1 }
        exit bad
    }' "$2" "$1"
}

# golden_case NAME WANT_RC ARGS...: runs `kvlab demo ARGS` with colour off,
# at $COLS columns (the default 100 when empty: stdout is not a terminal).
COLS=
golden_case() {
    local name=$1 want_rc=$2
    shift 2
    NO_COLOR=1 COLUMNS=$COLS "$KVLAB" demo "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
    local rc=$?
    if [ -n "$COLS" ] && awk -v w="$COLS" 'length > w { exit 0 } END { exit 1 }' \
        "$tmp/$name.out"; then
        bad "demo $* at $COLS columns prints a wider line: $(awk -v w="$COLS" 'length > w' "$tmp/$name.out" | head -1)"
    fi
    if [ "$rc" != "$want_rc" ]; then
        bad "demo $* exited $rc, expected $want_rc: $(head -c 300 "$tmp/$name.err")"
        return
    fi
    if [ "${KVLAB_UPDATE_GOLDEN:-0}" = 1 ]; then
        mkdir -p "$golden"
        cp "$tmp/$name.out" "$golden/demo_$name.txt"
        note "updated golden/demo_$name.txt"
        return
    fi
    if [ ! -f "$golden/demo_$name.txt" ]; then
        bad "missing golden/demo_$name.txt"
        return
    fi
    if compare_golden "$tmp/$name.out" "$golden/demo_$name.txt"; then
        note "ok  demo $*"
    else
        bad "demo $* differs from golden/demo_$name.txt"
    fi
}

echo "golden outputs"
golden_case dynamic 0 --strategy dynamic --steps 3
golden_case none 0 --strategy none --steps 3
golden_case sliding 0 --strategy sliding --window 4 --steps 4
golden_case static_full 1 --strategy static --slots 10 --steps 4
golden_case quantized4 0 --strategy quantized --bits 4 --residual 2 --steps 3
golden_case padded 0 --strategy dynamic --batch 2 --steps 2
golden_case gqa_sliding 0 --dim 32 --heads 4 --kv-heads 2 --strategy sliding --window 3 \
    --steps 3 --seed 7
golden_case cmp_none_sliding 0 --compare none,sliding --window 10 --steps 8
golden_case cmp_dyn_concat 0 --compare dynamic,dynamic-concat --steps 8 --every 4
golden_case brief_none 0 --strategy none --steps 40 --every 10 --brief
# The edges every display path must handle: a one-token prompt (T = 1 at the
# prefill), a batch of 1, a window of 1 (issue 17, class 1).
golden_case one_token 0 --strategy dynamic --prompt-tokens 5 --steps 2
golden_case one_token_window1 0 --strategy sliding --window 1 --prompt-tokens 5 --steps 2
golden_case one_token_brief 0 --strategy none --prompt-tokens 5 --steps 3 --brief
golden_case one_token_cmp 0 --compare none,sliding --window 1 --prompt-tokens 5 --steps 3
golden_case one_token_batch2 0 --strategy quantized --residual 1 --prompt-tokens 5 --batch 2 \
    --steps 2
# A narrow (80) and a wide (160) terminal, through COLUMNS (issue 15): prose
# wraps with a hanging indent, the compare table stacks its two strategies
# below 113 columns, the brief table drops columns, long rows of keys elide
# their middle with '~'; at 160 everything fits unchanged.
COLS=80
golden_case w80_sliding 0 --strategy sliding --window 4 --steps 4
golden_case w80_cmp 0 --compare none,sliding --window 10 --steps 8
golden_case w80_cmp_concat 0 --compare dynamic,dynamic-concat --steps 8 --every 4
golden_case w80_brief 0 --strategy none --steps 40 --every 10 --brief
golden_case w80_long 0 --strategy dynamic --steps 60 --every 30
golden_case w80_quantized 0 --strategy quantized --bits 4 --residual 2 --steps 3
COLS=160
golden_case w160_cmp 0 --compare dynamic,dynamic-concat --steps 8 --every 4
golden_case w160_long 0 --strategy dynamic --steps 60 --every 30
golden_case w160_brief 0 --strategy none --steps 40 --every 10 --brief
COLS=

echo "properties"
# The golden comparison itself must reject a changed mask bit and a changed count.
if [ -f "$golden/demo_dynamic.txt" ]; then
    sed '0,/11111111/s//11111110/' "$golden/demo_dynamic.txt" >"$tmp/mut1.txt"
    sed '0,/of 16 slots/s//of 17 slots/' "$golden/demo_dynamic.txt" >"$tmp/mut2.txt"
    for m in mut1 mut2; do
        if compare_golden "$tmp/$m.txt" "$golden/demo_dynamic.txt" >/dev/null; then
            bad "the golden comparison accepted a mutated output ($m)"
        fi
    done
fi

# Exact strategies choose the same tokens as no cache; sliding diverges once
# T passes the window; the static cache fails with one line on stderr.
out=$(NO_COLOR=1 "$KVLAB" demo --compare none,dynamic --steps 12) || bad "compare none,dynamic failed"
grep -q "none and dynamic chose the same 13 tokens" <<<"$out" || bad "none vs dynamic tokens differ"
out=$(NO_COLOR=1 "$KVLAB" demo --compare dynamic,static --steps 12) || bad "compare dynamic,static failed"
grep -q "chose the same 13 tokens" <<<"$out" || bad "dynamic vs static tokens differ"
out=$(NO_COLOR=1 "$KVLAB" demo --compare none,sliding --window 10 --steps 8)
grep -q "first above 1e-04 at step 3, T = 11" <<<"$out" ||
    bad "sliding (window 10, prompt 8) should first differ from none when T = 11"
NO_COLOR=1 "$KVLAB" demo --strategy static --slots 10 --steps 4 >/dev/null 2>"$tmp/err"
[ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "cache is full" "$tmp/err" ||
    bad "static full: expected one stderr line, got: $(cat "$tmp/err")"

# Every registered strategy on the smallest inputs, every display path (the
# full walk, --brief, --compare against none): exit 0, nothing on stderr.
# Under SANITIZE=1 (build/san/kvlab) this is the sanitizer run of T = 1.
# A strategy parameter goes only to a strategy that takes it (any other is
# refused: a flag that does nothing is bad input), and --compare names two
# different strategies.
mapfile -t strategies < <("$KVLAB" strategies | awk '{ print $1 }')
[ "${#strategies[@]}" -ge 6 ] || bad "kvlab strategies listed ${#strategies[@]} strategies"
# own_params S EDGE...: EDGE without the --window/--sinks/--residual/--heavy
# values strategy S does not take (its [--flag default ...] in kvlab strategies)
own_params() {
    local s=$1 takes
    shift
    takes=$("$KVLAB" strategies | awk -v s="$s" '$1 == s { i = index($0, "["); if (i) print substr($0, i) }')
    set -- $*
    local out=()
    while [ $# -gt 0 ]; do
        case $1 in
        --window | --sinks | --residual | --heavy)
            case "$takes" in *"$1 "*) out+=("$1" "$2") ;; esac
            shift 2 ;;
        *) out+=("$1"); shift ;;
        esac
    done
    echo "${out[*]}"
}
for s in "${strategies[@]}"; do
    cmp_with=none
    [ "$s" = none ] && cmp_with=dynamic
    for args in "--strategy $s" "--strategy $s --brief" "--compare $cmp_with,$s"; do
        # (--slots sizes a static cache only: other strategies refuse it)
        slots=""
        [ "$s" = static ] && slots="--slots 3"
        for edge in "--prompt-tokens 5 --steps 0" "--prompt-tokens 5 --steps 2" \
                    "--prompt-tokens 5 --steps 2 --window 1 --sinks 1 --residual 1 $slots" \
                    "--prompt-tokens 5 --steps 1 --batch 4 --window 1 --sinks 0" \
                    "--prompt-tokens 5 --steps 3 --window 1 --sinks 1 --heavy 1" "--prompt z --steps 1"; do
            edge=$(own_params "$s" $edge)
            # shellcheck disable=SC2086
            NO_COLOR=1 "$KVLAB" demo $args $edge >"$tmp/edge.out" 2>"$tmp/edge.err"
            rc=$?
            if [ "$rc" != 0 ] || [ -s "$tmp/edge.err" ]; then
                bad "demo $args $edge: exit $rc: $(head -c 300 "$tmp/edge.err")"
            fi
        done
    done
done

# Every line of the tour fits 80, 100 and 160 columns (COLUMNS, not a
# terminal), and --width overrides COLUMNS.
here_root=$(cd "$here/.." && pwd)
for w in 80 100 160; do
    COLUMNS=$w KVLAB=$KVLAB bash "$here_root/bench/scripts/demo_tour.sh" >"$tmp/tour.out" 2>&1 ||
        bad "demo tour at $w columns exited non-zero"
    n=$(awk -v w="$w" 'length > w' "$tmp/tour.out" | wc -l)
    [ "$n" = 0 ] || bad "demo tour at $w columns: $n lines wider: $(awk -v w="$w" 'length > w' "$tmp/tour.out" | head -1)"
done
COLUMNS=160 NO_COLOR=1 "$KVLAB" demo --compare none,sliding --steps 8 --width 80 >"$tmp/w.out"
awk 'length > 80 { exit 1 }' "$tmp/w.out" && grep -q '^ *sliding ' "$tmp/w.out" ||
    bad "--width 80 did not override COLUMNS=160"
COLUMNS=abc NO_COLOR=1 "$KVLAB" demo --steps 60 >"$tmp/w.out" 2>&1
awk 'length > 100 { exit 1 }' "$tmp/w.out" || bad "COLUMNS=abc: not the default 100 columns"
# a COLUMNS the demo cannot honour is said on stderr (one line), not ignored
# silently: below the narrowest width (80) it gets 80
COLUMNS=39 NO_COLOR=1 "$KVLAB" demo --steps 2 >"$tmp/w.out" 2>"$tmp/w.err"
[ "$(wc -l <"$tmp/w.err")" = 1 ] && grep -q "COLUMNS='39'" "$tmp/w.err" &&
    awk 'length > 80 { exit 1 }' "$tmp/w.out" || bad "COLUMNS=39: $(cat "$tmp/w.err")"
# Colour (mask, shades, evicted slots) survives wrapping: escapes take no columns.
COLUMNS=80 "$KVLAB" demo --strategy sliding --window 4 --steps 6 --color always >"$tmp/c.out"
sed 's/\x1b\[[0-9;]*m//g' "$tmp/c.out" | awk 'length > 80 { exit 1 }' ||
    bad "--color always at 80 columns: a line wider than 80 without its escapes"
grep -q $'\033\\[33mevicted' "$tmp/c.out" || bad "--color always: evicted slots not coloured"

# Colour only on request or on a terminal, and never with NO_COLOR.
"$KVLAB" demo --steps 1 | grep -q $'\033' && bad "colour escape codes in piped output"
"$KVLAB" demo --steps 1 --color always | grep -q $'\033\\[' || bad "--color always printed no colour"
if command -v script >/dev/null 2>&1; then
    NO_COLOR=1 script -qec "$KVLAB demo --steps 1" /dev/null | grep -q $'\033' &&
        bad "NO_COLOR=1 on a terminal still printed colour"
fi

# Bad input: exit 2 and one line on stderr.
bad_input() {
    "$KVLAB" demo "$@" >/dev/null 2>"$tmp/err"
    local rc=$?
    if [ "$rc" != 2 ] || [ "$(wc -l <"$tmp/err")" != 1 ]; then
        bad "demo $* should exit 2 with one line (rc $rc): $(cat "$tmp/err")"
    fi
}
bad_input --compare dynamic
bad_input --compare dynamic,nosuch
bad_input --strategy nosuch
bad_input --steps 500
bad_input --batch 9
bad_input --steps -1
bad_input --prompt ""
bad_input --width 39
bad_input --width 79
bad_input --width 1001
bad_input --width abc
bad_input --color sometimes
bad_input --prompt-tokens 1,2,300
bad_input --bogus
bad_input --model "$tmp/missing.bin"

echo "checkpoints through the CLI"
ck=$tmp/tiny.bin
"$KVLAB" export-synthetic --out "$ck" --dim 16 --hidden 32 --layers 2 --heads 2 --kv-heads 2 \
    --vocab 256 --max-len 128 --seed 42 --tokenizer-out "$tmp/tok.bin" >"$tmp/exp.out" ||
    bad "export-synthetic failed: $(cat "$tmp/exp.out")"
want=$((28 + 4 * (256*16 + 2*16 + 2*16*16*4 + 2*16 + 3*2*16*32 + 16 + 2*128*4 + 256*16)))
[ "$(stat -c %s "$ck")" = "$want" ] || bad "exported size $(stat -c %s "$ck"), expected $want"
# The exported checkpoint runs the very same demo as the in-memory model
# (from the prompt line on: the model line names the file, and may wrap).
from_prompt() { awk 'p || /^prompt/ { p = 1; print }'; }
NO_COLOR=1 "$KVLAB" demo --steps 4 --seed 42 | from_prompt >"$tmp/a.txt"
NO_COLOR=1 "$KVLAB" demo --steps 4 --model "$ck" | from_prompt >"$tmp/b.txt"
cmp -s "$tmp/a.txt" "$tmp/b.txt" || bad "demo --model differs from the synthetic model: $(diff "$tmp/a.txt" "$tmp/b.txt" | head -5)"
# ... also through the byte-level tokenizer it wrote.
NO_COLOR=1 "$KVLAB" demo --steps 4 --model "$ck" --tokenizer "$tmp/tok.bin" | from_prompt >"$tmp/c.txt"
cmp -s "$tmp/a.txt" "$tmp/c.txt" || bad "demo --tokenizer (bytes) differs from no tokenizer"
# generate --model: every exact strategy gives the same tokens on the exported
# checkpoint, and the same as the in-memory synthetic model it came from.
gen() { "$KVLAB" generate --threads 1 --prompt-len 8 --new-tokens 24 "$@" | grep '^tokens:'; }
gen --strategy dynamic --dim 16 --hidden 32 --layers 2 --heads 2 --kv-heads 2 --vocab 256 \
    --max-len 128 --seed 42 >"$tmp/gen_synthetic.txt" || bad "generate (synthetic) failed"
for s in none dynamic dynamic-concat static; do
    gen --model "$ck" --strategy "$s" >"$tmp/gen_$s.txt" || bad "generate --model --strategy $s failed"
    cmp -s "$tmp/gen_$s.txt" "$tmp/gen_synthetic.txt" ||
        bad "generate --model --strategy $s: tokens differ from the synthetic model"
done
[ -s "$tmp/gen_synthetic.txt" ] || bad "generate printed no tokens"
# Malformed checkpoints: exit 2, one line, no crash.
head -c 1000 "$ck" >"$tmp/trunc.bin"
bad_input --model "$tmp/trunc.bin"
cp "$ck" "$tmp/long.bin" && printf 'xxxx' >>"$tmp/long.bin"
bad_input --model "$tmp/long.bin"
cp "$ck" "$tmp/zero.bin" && printf '\0\0\0\0' | dd of="$tmp/zero.bin" bs=1 seek=0 conv=notrunc 2>/dev/null
bad_input --model "$tmp/zero.bin"
cp "$ck" "$tmp/heads.bin" && printf '\3\0\0\0' | dd of="$tmp/heads.bin" bs=1 seek=12 conv=notrunc 2>/dev/null
bad_input --model "$tmp/heads.bin"
head -c 100 "$tmp/tok.bin" >"$tmp/trunc_tok.bin"
bad_input --model "$ck" --tokenizer "$tmp/trunc_tok.bin"
# export-synthetic input errors.
"$KVLAB" export-synthetic --dim 16 >/dev/null 2>&1; [ $? = 2 ] || bad "export without --out should exit 2"
"$KVLAB" export-synthetic --out "$tmp/x.bin" --tokenizer-out "$tmp/x.bin" >/dev/null 2>&1
[ $? = 2 ] || bad "export with --out == --tokenizer-out should exit 2"
"$KVLAB" export-synthetic --out "$tmp/nodir/x.bin" --dim 16 --hidden 16 --layers 1 --heads 2 --kv-heads 2 \
    --vocab 256 --max-len 16 >/dev/null 2>&1
[ $? = 2 ] || bad "export into a missing directory should exit 2 (refused before any work)"
ls "$tmp"/nodir 2>/dev/null && bad "export left files behind"

if [ $fail = 0 ]; then echo "e2e_demo: all passed"; else echo "e2e_demo: FAILED"; fi
exit $fail
