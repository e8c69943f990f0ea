#!/usr/bin/env bash
# e2e_eviction.sh - the evicting strategies and the frontier through the CLI:
# a small frontier sweep (every configuration of bench/data/frontier.list at its
# budgets, each row within its budget, labels per budget, per-layer bytes
# summing to the cache's), its plot, a hybrid sweep's per-layer bytes, the
# demo showing sinks, h2o and a hybrid evicting, and generate with each.
set -u
KVLAB=${KVLAB:-build/kvlab}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "  ok  $*"; }
bad() { echo "FAIL  $*"; fail=1; }

# column index of NAME in a CSV's header line
col() { awk -F, -v n="$2" '/^#/ { next } { for (i = 1; i <= NF; i++) if ($i == n) { print i; exit } }' "$1"; }

# (no --group: a parameter none of a run's strategies takes is refused; the
# frontier's quantized lines take it, below)
SMALL=(--layers 4 --dim 64 --heads 4 --kv-heads 2 --hidden 96 --vocab 256 --threads 2)

# ---- the frontier ----------------------------------------------------------
"$KVLAB" sweep --frontier bench/data/frontier.list --budgets 25,50 --seq-lens 128,256 --reps 3 \
    --warmup 1 --no-roofline --quiet --out "$tmp/f.csv" "${SMALL[@]}" --group 8 2>"$tmp/f.err"
rc=$?
[ "$rc" = 0 ] && ok "frontier sweep exit 0" || bad "frontier sweep exit $rc: $(head -3 "$tmp/f.err")"
if [ -f "$tmp/f.csv" ]; then
    L=$(col "$tmp/f.csv" label); C=$(col "$tmp/f.csv" cache_bytes); T=$(col "$tmp/f.csv" seq_len)
    B=$(col "$tmp/f.csv" layer_bytes); E=$(col "$tmp/f.csv" rel_err)
    for need in sliding@25% sliding@50% sinks@50% sinks-reidx@50% h2o@25% hybrid-3:1@50% int8 int4; do
        rows=$(awk -F, -v c="$L" -v k="$need" '!/^#/ && $c == k' "$tmp/f.csv" | wc -l)
        [ "$rows" = 2 ] && ok "frontier: $need at both T" || bad "frontier: $need has $rows rows (want 2)"
    done
    # every budgeted row holds at most its budget of an f32 cache of T tokens
    over=$(awk -F, -v l="$L" -v c="$C" -v t="$T" '!/^#/ && h++ && $l ~ /@/ {
        b = $l; sub(/.*@/, "", b); sub(/%/, "", b)
        f32 = 4 * 2 * 2 * 16 * 4 * $t     # layers, K+V, kv heads, head_dim, bytes
        if ($c > b / 100 * f32 || $c < 0.7 * b / 100 * f32) print $l, $t, $c, f32 }' "$tmp/f.csv")
    [ -z "$over" ] && ok "frontier: every row within (and near) its budget" ||
        bad "frontier rows off their budget: $over"
    # per-layer bytes (run-length B*N;B) add up to the cache's bytes
    sums=$(awk -F, -v b="$B" -v c="$C" '!/^#/ && h++ { n = split($b, g, ";"); s = 0
        for (i = 1; i <= n; i++) { m = split(g[i], x, "*"); s += x[1] * (m > 1 ? x[2] : 1) }
        if (s != $c) print $b, $c }' "$tmp/f.csv")
    [ -z "$sums" ] && ok "frontier: layer_bytes sums to cache_bytes" || bad "layer_bytes: $sums"
    # the errors are real: evicting at 25% of the tokens moves the logits
    zero=$(awk -F, -v l="$L" -v e="$E" '!/^#/ && h++ && $l ~ /@25%/ && !($e > 0)' "$tmp/f.csv")
    [ -z "$zero" ] && ok "frontier: every 25% row has a non-zero error" || bad "zero errors: $zero"
    if command -v gnuplot >/dev/null 2>&1; then
        gnuplot -e "csv='$tmp/f.csv'; outdir='$tmp/plots'" plots/frontier.gp 2>"$tmp/gp.err"
        [ -s "$tmp/plots/frontier.png" ] && [ -s "$tmp/plots/frontier.svg" ] &&
            ok "frontier.gp: frontier.png and .svg" || bad "frontier.gp: $(head -3 "$tmp/gp.err")"
    fi
fi

# ---- a hybrid sweep: per-layer bytes ---------------------------------------
"$KVLAB" sweep --strategies hybrid --layers-pattern 'sliding:16*3,dynamic' --seq-lens 128 --reps 3 \
    --warmup 1 --no-roofline --quiet --out "$tmp/h.csv" "${SMALL[@]}" 2>"$tmp/h.err"
rc=$?
if [ "$rc" = 0 ]; then
    B=$(col "$tmp/h.csv" layer_bytes); P=$(col "$tmp/h.csv" params)
    got=$(awk -F, -v b="$B" -v p="$P" '!/^#/ && h++ { print $p, $b }' "$tmp/h.csv")
    # 16 tokens of K and V (2 kv heads x head_dim 16 x 4 bytes) per sliding
    # layer; the dynamic layer at its power-of-two capacity for T = 128 tokens
    want="pattern=sliding:16*3+dynamic 4096*3;32768"
    [ "$got" = "$want" ] && ok "hybrid sweep: layer_bytes $got" ||
        bad "hybrid sweep: got '$got', want '$want'"
else
    bad "hybrid sweep exit $rc: $(head -3 "$tmp/h.err")"
fi

# ---- the demo shows each evicting ------------------------------------------
for args in "--strategy sinks --sinks 2 --window 3" "--strategy sinks-reindex --sinks 2 --window 3" \
            "--strategy h2o --heavy 2 --window 3" \
            "--strategy hybrid --layers-pattern sinks:1:3+h2o:2:2"; do
    # shellcheck disable=SC2086
    NO_COLOR=1 "$KVLAB" demo $args --steps 8 --prompt hello >"$tmp/d.out" 2>"$tmp/d.err"
    rc=$?
    if [ "$rc" = 0 ] && [ ! -s "$tmp/d.err" ] && grep -q "evicted pos" "$tmp/d.out"; then
        ok "demo $args: evicts"
    else
        bad "demo $args: exit $rc, $(head -c 200 "$tmp/d.err")"
    fi
done
# sinks: the first positions stay in the cache line, the ring after them
NO_COLOR=1 "$KVLAB" demo --strategy sinks --sinks 2 --window 3 --steps 6 --prompt hello 2>/dev/null |
    grep -q "sinks \[0 1\] + ring \[" && ok "demo: sinks [0 1] + ring" || bad "demo: no sinks line"
# the hybrid: layer 0 shows its sinks, layer 1 (h2o) its kept slots
NO_COLOR=1 "$KVLAB" demo --strategy hybrid --layers-pattern 'sinks:1:3+h2o:2:2' --steps 6 \
    --prompt hello 2>/dev/null >"$tmp/hy.out"
grep -q "L0 .*sinks \[0\] + ring" "$tmp/hy.out" && grep -q "L1 .*f32 slots" "$tmp/hy.out" &&
    ok "demo: hybrid layers shown each with its own cache" || bad "demo: hybrid layer lines"

# ---- generate ---------------------------------------------------------------
for args in "--strategy sinks" "--strategy sinks-reindex" "--strategy h2o --heavy 8 --window 8" \
            "--strategy hybrid --layers-pattern sliding:8+h2o:4:4"; do
    # shellcheck disable=SC2086
    "$KVLAB" generate $args --prompt-len 40 --new-tokens 12 "${SMALL[@]}" >"$tmp/g.out" 2>"$tmp/g.err"
    rc=$?
    [ "$rc" = 0 ] && grep -q "tokens:" "$tmp/g.out" && ok "generate $args" ||
        bad "generate $args: exit $rc $(head -c 200 "$tmp/g.err")"
done

[ "$fail" = 0 ] && echo "e2e_eviction: passed" || echo "e2e_eviction: FAILED"
exit "$fail"
