#!/usr/bin/env bash
# gen_targets.sh - the generation-mode figures of issue 12 as a markdown
# table (make gen-targets). For each strategy of $STRATEGIES (given by the
# Makefile: this script names none):
#   - greedy decoding of $BEAMS sequences from one shared prompt of $PROMPT
#     tokens, and beam search with $BEAMS beams from it: median decode step
#     of each and their ratio (target: beams at most 1.5x greedy over a
#     paged cache, whose reorder moves block-table entries, not rows);
#   - one sequence greedy with and without self-speculation (a draft of the
#     first $DRAFT_LAYERS layers): total time, acceptance rate, and whether
#     the tokens agree (they must, for an exact strategy).
# Then the targets of bench/data/targets.tsv's table `gen` (TARGETS= names
# another file), judged on these figures by bench/scripts/targets.awk
# (gen_targets.awk). Timings only mean something on a quiet machine.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
targets=${TARGETS:-$here/../data/targets.tsv}
[ -f "$targets" ] && [ -r "$targets" ] || { echo "gen_targets: cannot read '$targets'" >&2; exit 2; }
KVLAB=${KVLAB:-build/kvlab}
STRATEGIES=${STRATEGIES:?the strategies to measure}
BEAMS=${BEAMS:-4}
PROMPT=${PROMPT:-1024}
NEW=${NEW:-128}
DRAFT_LAYERS=${DRAFT_LAYERS:-2}
ARGS=(--prompt-len "$PROMPT" --new-tokens "$NEW")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# the median decode step (ms) of a generate summary on stdin
step_ms() { awk '/decode step/ { print $3; exit }'; }
# the token lines of a generate output, without a beam's score prefix
toks() { sed -n 's/.*tokens: //p' "$1"; }

echo "# Generation modes: prompt $PROMPT tokens, $NEW new tokens"
echo
echo "| strategy | greedy B=$BEAMS step (ms) | beams K=$BEAMS step (ms) | beams / greedy | greedy total (ms) | speculative total (ms) | acceptance | tokens equal |"
echo "|---|---|---|---|---|---|---|---|"
echo "label,beams_ratio,tokens_equal" >"$tmp/gen.csv"
for s in $STRATEGIES; do
    "$KVLAB" generate --strategy "$s" "${ARGS[@]}" --batch "$BEAMS" --shared-prompt >"$tmp/g"
    "$KVLAB" generate --strategy "$s" "${ARGS[@]}" --beams "$BEAMS" >"$tmp/b"
    "$KVLAB" generate --strategy "$s" "${ARGS[@]}" >"$tmp/one"
    "$KVLAB" generate --strategy "$s" "${ARGS[@]}" --draft-layers "$DRAFT_LAYERS" >"$tmp/spec"
    g=$(step_ms <"$tmp/g")
    b=$(step_ms <"$tmp/b")
    ratio=$(awk -v b="$b" -v g="$g" 'BEGIN { printf "%.2f", (g > 0 ? b / g : 0) }')
    # greedy total: prefill + median decode step x steps of the plain run
    one=$(awk '/prefill/ { p = $2 } /decode step/ { d = $3; n = $10 }
               END { printf "%.1f", p + d * n }' "$tmp/one")
    spec=$(awk '/total/ { print $2; exit }' "$tmp/spec")
    acc=$(sed -n 's/.*(rate \([0-9.]*\);.*/\1/p' "$tmp/spec")
    same=no
    if [ "$(toks "$tmp/one")" = "$(toks "$tmp/spec")" ]; then same=yes; fi
    echo "| $s | $g | $b | $ratio | $one | $spec | $acc | $same |"
    echo "$s,$ratio,$([ "$same" = yes ] && echo 1 || echo 0)" >>"$tmp/gen.csv"
done
echo
awk -F, -f "$here/targets.awk" -f "$here/gen_targets.awk" "$targets" "$tmp/gen.csv"
