#!/usr/bin/env bash
# e2e_gen_modes.sh - prefix sharing and the generation modes through the CLI
# (issue 12): `kvlab generate --shared-prompt` gives the tokens of the
# unshared run and, over a paged cache, fewer resident bytes; --beams gives
# the same beams over a paged and a contiguous cache; --samples with one
# seed is reproducible and differs from another seed; --draft-layers gives
# the greedy tokens and reports an acceptance rate; `kvlab sharing` writes a
# CSV whose rows say what sharing saves (paged shared flat in B, unshared
# and dynamic growing), every shared run's tokens equal to the unshared
# run's, and plots/sharing.gp draws it; bad input is one line and exit 2.
set -u
KVLAB=${KVLAB:-build/kvlab}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "  ok  $*"; }
bad() { echo "FAIL  $*"; fail=1; }
col() { awk -F, -v n="$2" '/^#/ { next } { for (i = 1; i <= NF; i++) if ($i == n) { print i; exit } }' "$1"; }

M=(--layers 3 --dim 64 --heads 4 --kv-heads 2 --hidden 96 --vocab 256 --max-len 512 --threads 1)
G=(generate "${M[@]}" --prompt-len 37 --new-tokens 14)
toks() { grep 'tokens:' "$1" | sed 's/.*tokens: //'; }
resident() { awk '/cache .* bytes resident/ { print $2 }' "$1"; }

# ---- shared prompt -----------------------------------------------------------
PT=(--new-tokens 14 --prompt-tokens "$(seq -s, 1 37)")
for s in paged-16 dynamic static; do
    "$KVLAB" generate "${M[@]}" "${PT[@]}" --strategy "$s" --batch 3 >"$tmp/u" 2>&1 &&
        "$KVLAB" generate "${M[@]}" "${PT[@]}" --strategy "$s" --batch 3 --shared-prompt >"$tmp/s" 2>&1
    rc=$?
    if [ "$rc" != 0 ]; then bad "generate --shared-prompt $s: exit $rc"; continue; fi
    [ "$(toks "$tmp/u")" = "$(toks "$tmp/s")" ] && ok "$s: shared prompt gives the unshared tokens" ||
        bad "$s: shared and unshared tokens differ"
done
"$KVLAB" generate "${M[@]}" --new-tokens 14 --strategy paged --block-size 4 --batch 4 \
    --prompt-tokens "$(seq -s, 1 37)" >"$tmp/pu"
"$KVLAB" generate "${M[@]}" --new-tokens 14 --strategy paged --block-size 4 --batch 4 \
    --prompt-tokens "$(seq -s, 1 37)" --shared-prompt >"$tmp/ps"
ru=$(resident "$tmp/pu"); rs=$(resident "$tmp/ps")
[ -n "$ru" ] && [ -n "$rs" ] && [ "$rs" -lt "$ru" ] &&
    ok "paged: shared prompt resident $rs < unshared $ru bytes" ||
    bad "paged: shared resident '$rs' not below unshared '$ru'"

# ---- beams -------------------------------------------------------------------
"$KVLAB" "${G[@]}" --strategy paged-16 --beams 3 >"$tmp/bp"
"$KVLAB" "${G[@]}" --strategy dynamic --beams 3 >"$tmp/bd"
nb=$(grep -c '^beam ' "$tmp/bp")
[ "$nb" = 3 ] && ok "--beams 3 prints 3 beams" || bad "--beams 3 printed $nb beams"
[ "$(grep '^beam ' "$tmp/bp")" = "$(grep '^beam ' "$tmp/bd")" ] &&
    ok "beams over paged == beams over dynamic (tokens and scores)" || bad "beams differ: paged vs dynamic"
sorted=$(grep '^beam ' "$tmp/bp" | awk '{ print $4 }' | sort -gr | tr '\n' ' ')
[ "$sorted" = "$(grep '^beam ' "$tmp/bp" | awk '{ print $4 }' | tr '\n' ' ')" ] &&
    ok "beams printed best first" || bad "beams not sorted by score"

# ---- samples -----------------------------------------------------------------
"$KVLAB" "${G[@]}" --strategy paged-16 --samples 3 --temperature 0.9 --seed 5 >"$tmp/s1"
"$KVLAB" "${G[@]}" --strategy dynamic --samples 3 --temperature 0.9 --seed 5 >"$tmp/s2"
"$KVLAB" "${G[@]}" --strategy paged-16 --samples 3 --temperature 0.9 --seed 6 >"$tmp/s3"
[ "$(toks "$tmp/s1")" = "$(toks "$tmp/s2")" ] && ok "samples: same seed, same tokens (paged, dynamic)" ||
    bad "samples differ between paged and dynamic with one seed"
[ "$(toks "$tmp/s1")" != "$(toks "$tmp/s3")" ] && ok "samples: another seed, other tokens" ||
    bad "samples: seeds 5 and 6 gave the same tokens"
[ "$(toks "$tmp/s1" | sort -u | wc -l)" -gt 1 ] && ok "samples differ from each other" ||
    bad "the 3 samples are identical"
"$KVLAB" "${G[@]}" --strategy paged-16 --samples 2 --temperature 0 >"$tmp/t0"
"$KVLAB" "${G[@]}" --strategy paged-16 --batch 2 --shared-prompt >"$tmp/g0"
[ "$(toks "$tmp/t0")" = "$(toks "$tmp/g0")" ] && ok "samples at temperature 0 == greedy" ||
    bad "temperature 0 samples differ from greedy"

# ---- speculation -------------------------------------------------------------
for s in paged-16 dynamic static dynamic-concat; do
    "$KVLAB" "${G[@]}" --strategy "$s" --batch 2 >"$tmp/g"
    "$KVLAB" "${G[@]}" --strategy "$s" --batch 2 --draft-layers 1 --draft-tokens 3 >"$tmp/d"
    [ "$(toks "$tmp/g")" = "$(toks "$tmp/d")" ] && ok "$s: speculation gives the greedy tokens" ||
        bad "$s: speculative tokens differ from greedy"
done
grep -q 'drafts accepted (rate [0-9.]*; per sequence [0-9.]*)' "$tmp/d" &&
    ok "speculation reports its acceptance rate" || bad "no acceptance rate: $(grep specul "$tmp/d")"
# a draft of every layer is the model itself: every draft accepted, the
# greedy tokens, and the FLOPs of both models counted
"$KVLAB" "${G[@]}" --strategy dynamic --draft-layers 3 >"$tmp/dall"
"$KVLAB" "${G[@]}" --strategy dynamic >"$tmp/g1"
grep -q 'drafts accepted (rate 1.000; per sequence 1.000)' "$tmp/dall" &&
    [ "$(toks "$tmp/dall")" = "$(toks "$tmp/g1")" ] && ok "--draft-layers = layers: all accepted, greedy tokens" ||
    bad "--draft-layers = layers: $(grep -E 'specul|tokens' "$tmp/dall")"
awk '$1 == "flops" { exit !($2 > 0) }' "$tmp/dall" && ok "speculation counts its FLOPs" ||
    bad "speculation FLOPs: $(grep flops "$tmp/dall")"

# ---- kvlab sharing -----------------------------------------------------------
"$KVLAB" sharing "${M[@]}" --strategies paged-16,dynamic --batches 1,2,4 --prompt-lens 40,100 \
    --new-tokens 9 --quiet --out "$tmp/sh.csv" 2>"$tmp/sh.err"
rc=$?
[ "$rc" = 0 ] && ok "sharing exit 0" || bad "sharing exit $rc: $(head -3 "$tmp/sh.err")"
if [ -f "$tmp/sh.csv" ]; then
    rows=$(grep -vc '^#' "$tmp/sh.csv")
    [ "$rows" = 25 ] && ok "sharing: 24 rows and a header" || bad "sharing: $rows lines (want 25)"
    L=$(col "$tmp/sh.csv" label); P=$(col "$tmp/sh.csv" prompt_len); B=$(col "$tmp/sh.csv" batch)
    S=$(col "$tmp/sh.csv" shared); R=$(col "$tmp/sh.csv" resident_bytes)
    K=$(col "$tmp/sh.csv" token_bytes); TM=$(col "$tmp/sh.csv" tokens_match)
    bad_match=$(awk -F, -v c="$TM" '!/^#/ && h++ && $c != 1' "$tmp/sh.csv" | wc -l)
    [ "$bad_match" = 0 ] && ok "sharing: every shared run's tokens equal the unshared run's" ||
        bad "sharing: $bad_match rows with tokens_match != 1"
    # token rows: paged shared = P + B x fed plus the copy-on-write copies of
    # the partly filled last block (at most (B-1) x 15 rows); unshared B x (P + fed)
    row=$((2 * 3 * 2 * 16 * 4)) # K+V, layers, kv heads, head_dim, bytes
    check=$(awk -F, -v l="$L" -v p="$P" -v b="$B" -v s="$S" -v k="$K" -v row="$row" '
        !/^#/ && h++ && $l == "paged-16" {
            fed = 8
            if ($s == 1) { lo = ($p + $b * fed) * row; hi = lo + ($b - 1) * 15 * row }
            else { lo = hi = $b * ($p + fed) * row }
            if ($k < lo || $k > hi) print $p, $b, $s, $k, lo, hi }' "$tmp/sh.csv")
    [ -z "$check" ] && ok "sharing: paged token bytes P + B x generated (shared), B x (P + generated) (not)" ||
        bad "sharing: paged token bytes off: $check"
    # dynamic copies the prompt into every sequence: shared holds what unshared holds
    dyn=$(awk -F, -v l="$L" -v p="$P" -v b="$B" -v s="$S" -v r="$R" '
        !/^#/ && h++ && $l == "dynamic" { v[$p "," $b "," $s] = $r }
        END { for (k in v) { split(k, a, ","); if (a[3] == 1 && v[k] != v[a[1] "," a[2] ",0"]) print k } }' \
        "$tmp/sh.csv")
    [ -z "$dyn" ] && ok "sharing: dynamic shared resident == unshared" || bad "sharing: dynamic differs: $dyn"
    gnuplot -e "csv='$tmp/sh.csv'; outdir='$tmp/plots'" plots/sharing.gp 2>"$tmp/gp.err"
    [ -s "$tmp/plots/sharing.png" ] && [ -s "$tmp/plots/sharing.svg" ] && [ ! -s "$tmp/gp.err" ] &&
        ok "plots/sharing.gp draws sharing.png and .svg" || bad "sharing plot: $(head -3 "$tmp/gp.err")"
fi

# ---- the demo's walks ----------------------------------------------------------
NO_COLOR=1 "$KVLAB" demo --width 1000 --strategy paged --block-size 4 --batch 3 --shared-prompt --steps 2 \
    >"$tmp/dm" 2>&1
rc=$?
[ "$rc" = 0 ] && ok "demo --shared-prompt exit 0" || bad "demo --shared-prompt exit $rc"
grep -q '^     pool: ' "$tmp/dm" && grep -q 'layer 0 seq 2: 0(x3) 1(x3) 2(x3)\[1/4\]' "$tmp/dm" &&
    ok "demo shows the pool and shared block tables with reference counts" ||
    bad "demo: no pool / shared block table"
grep -q 'copy-on-write: .*(512 bytes, all layers)' "$tmp/dm" &&
    ok "demo shows the copy-on-write of the shared partly filled block (2 copies x 2 layers x 128 B)" ||
    bad "demo: no copy-on-write line: $(grep -i copy "$tmp/dm" | head -2)"
NO_COLOR=1 "$KVLAB" demo --width 1000 --strategy paged --block-size 4 --beams 3 --steps 3 >"$tmp/db" 2>&1 &&
    grep -q 'kv_cache_reorder(parents)' "$tmp/db" && [ "$(grep -c '<- beam' "$tmp/db")" = 12 ] &&
    ok "demo --beams shows 4 steps of 3 beams and the reorders" || bad "demo --beams: $(tail -2 "$tmp/db")"
NO_COLOR=1 "$KVLAB" demo --width 1000 --strategy paged --draft-layers 1 --steps 6 >"$tmp/ds" 2>&1 &&
    grep -q 'kv_cache_crop: the cache held [0-9]* tokens, rolled back to' "$tmp/ds" &&
    grep -q 'the same tokens as greedy decoding without the draft' "$tmp/ds" &&
    ok "demo --draft-layers shows rollbacks and the greedy verdict" || bad "demo --draft-layers: $(tail -2 "$tmp/ds")"
for w in 80 100; do
    for a in "--shared-prompt --batch 4" "--beams 4" "--draft-layers 1"; do
        # shellcheck disable=SC2086
        COLUMNS=$w NO_COLOR=1 "$KVLAB" demo --strategy paged --block-size 2 $a --steps 5 >"$tmp/dw"
        n=$(awk -v w="$w" 'length > w' "$tmp/dw" | wc -l)
        [ "$n" = 0 ] && ok "demo $a fits $w columns" || bad "demo $a: $n lines wider than $w"
    done
done
one_line_d() { "$KVLAB" demo "$@" >/dev/null 2>"$tmp/e"; [ $? = 2 ] && [ "$(wc -l <"$tmp/e")" = 1 ]; }
one_line_d --strategy none --beams 2 && ok "demo --beams with none: exit 2, one line" || bad "demo --beams none"
one_line_d --strategy paged --draft-layers 2 && ok "demo --draft-layers 2 of 2: exit 2" || bad "demo draft-layers"
one_line_d --strategy paged --shared-prompt --brief && ok "demo --shared-prompt --brief: exit 2" || bad "demo shared brief"

# ---- bad input ---------------------------------------------------------------
one_line() { # one_line WHAT ARGS...: exit 2 and one stderr line starting "kvlab"
    local what=$1
    shift
    "$KVLAB" "$@" >/dev/null 2>"$tmp/e"
    local rc=$? n
    n=$(wc -l <"$tmp/e")
    if [ "$rc" = 2 ] && [ "$n" = 1 ] && grep -q '^kvlab' "$tmp/e"; then ok "$what: exit 2, one line"
    else bad "$what: exit $rc, $n lines: $(head -2 "$tmp/e")"; fi
}
one_line "sharing without --strategies" sharing "${M[@]}" --out "$tmp/x.csv"
one_line "sharing over a strategy without reorder" sharing "${M[@]}" --strategies none --out "$tmp/x.csv"
one_line "sharing --batches 0" sharing "${M[@]}" --strategies dynamic --batches 0 --out "$tmp/x.csv"
one_line "sharing --out a directory" sharing "${M[@]}" --strategies dynamic --out "$tmp"
one_line "sharing past --max-len" sharing "${M[@]}" --strategies dynamic --prompt-lens 600 --out "$tmp/x.csv"
one_line "sharing --batch" sharing "${M[@]}" --strategies dynamic --batch 2 --out "$tmp/x.csv"
[ ! -e "$tmp/x.csv" ] && ok "no CSV after refused runs" || bad "a refused run left $tmp/x.csv"
one_line "--beams with none names the strategy and op" "${G[@]}" --strategy none --beams 2
grep -q "'none' does not support reorder" "$tmp/e" && ok "... and says which" || bad "message: $(cat "$tmp/e")"
one_line "--draft-layers past the layers" "${G[@]}" --strategy paged --draft-layers 4

[ "$fail" = 0 ] && echo "e2e_gen_modes: passed" || echo "e2e_gen_modes: FAILED"
exit "$fail"
