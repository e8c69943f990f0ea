#!/usr/bin/env bash
# streaming.sh - StreamingLLM's experiment on kvlab's trained model (`make
# streaming`): loss against position over held-out text several times longer
# than the 512-token training context, for each cache configuration listed
# of bench/data/streaming.configs (STREAM_CONFIGS= names another); one CSV
# and one plot.
#
#   bash bench/scripts/streaming.sh KVLAB MODEL TEXT OUTDIR
#
# Every configuration runs `kvlab perplexity --context LENGTH`: the held-out
# text is cut into STREAM_SEGMENTS pieces of STREAM_LENGTH tokens (default
# 4 x 2048), each streamed from an empty cache at positions 0..LENGTH-1,
# and the loss is averaged per bucket of STREAM_BUCKET positions over the
# pieces. Writes OUTDIR/streaming.csv (label, bucket_start, bucket_end,
# tokens, bits_per_byte) and OUTDIR/streaming.dat (the same, one gnuplot
# block per configuration); plots/model/streaming.gp draws them.
#
# The design decision: a configuration is one line of the data file, `label
# | kvlab perplexity options`, and one whose strategy is not registered is
# skipped with a note, so another configuration at the same budget is one
# line. The options reach kvlab as words (read -a: split at blanks, no
# pattern expanded), never through a shell.
set -euo pipefail

if [ $# -ne 4 ]; then
    echo "usage: bash bench/scripts/streaming.sh KVLAB MODEL TEXT OUTDIR" >&2
    exit 2
fi
KVLAB=$1 MODEL=$2 TEXT=$3 OUTDIR=$4
CONFIGS=${STREAM_CONFIGS:-$(cd "$(dirname "$0")" && pwd)/../data/streaming.configs}
[ -f "$CONFIGS" ] && [ -r "$CONFIGS" ] || { echo "streaming: cannot read '$CONFIGS'" >&2; exit 2; }
LENGTH=${STREAM_LENGTH:-2048}
SEGMENTS=${STREAM_SEGMENTS:-4}
BUCKET=${STREAM_BUCKET:-64}
THREADS=${STREAM_THREADS:-1}
mkdir -p "$OUTDIR"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
registered=" $("$KVLAB" strategies | awk '{ printf "%s ", $1 }') "

{
    echo "# kvlab streaming experiment (bench/scripts/streaming.sh): $SEGMENTS pieces of $LENGTH bytes of $TEXT, buckets of $BUCKET"
    echo "# model=$MODEL"
    echo "# commit=$(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "# date=$(date -u +%Y-%m-%dT%H:%MZ)"
    echo "label,bucket_start,bucket_end,tokens,bits_per_byte"
} >"$work/streaming.csv"
: >"$work/streaming.dat"
i=0
while IFS='|' read -r label args; do
    label=$(echo "$label" | sed 's/^ *//; s/ *$//')
    case "$label" in '' | '#'*) continue ;; esac
    read -r -a opts <<<"$args"
    strategy=
    for ((k = 0; k + 1 < ${#opts[@]}; k++)); do
        [ "${opts[k]}" = --strategy ] && strategy=${opts[k + 1]}
    done
    if [[ -z "$strategy" || "$registered" != *" $strategy "* ]]; then
        echo "streaming: skipping '$label': strategy '$strategy' is not registered" >&2
        continue
    fi
    i=$((i + 1))
    echo "[$i] $KVLAB perplexity --model $MODEL --text $TEXT --context $LENGTH --max-tokens $((LENGTH * SEGMENTS + 1)) --bucket $BUCKET ${opts[*]}" >&2
    "$KVLAB" perplexity --model "$MODEL" --text "$TEXT" --context "$LENGTH" \
        --max-tokens $((LENGTH * SEGMENTS + 1)) --bucket "$BUCKET" --threads "$THREADS" \
        "${opts[@]}" --csv "$work/$i.csv" </dev/null >"$work/$i.txt"
    grep -v '^#' "$work/$i.csv" | tail -n +2 |
        awk -F, -v l="$label" '{ printf "\"%s\",%s,%s,%s,%s\n", l, $1, $2, $3, $6 }' \
            >>"$work/streaming.csv"
    {
        [ "$i" -gt 1 ] && printf '\n\n'
        printf '"%s"\n' "$label"
        grep -v '^#' "$work/$i.csv" | tail -n +2 | awk -F, '{ print ($1 + $2) / 2, $6 }'
    } >>"$work/streaming.dat"
    tail -n 1 "$work/$i.txt" >&2
done <"$CONFIGS"

for f in streaming.csv streaming.dat; do
    cp "$work/$f" "$OUTDIR/$f.tmp.$$" && mv "$OUTDIR/$f.tmp.$$" "$OUTDIR/$f"
done
echo "streaming: $i configurations in $OUTDIR/streaming.csv" >&2
