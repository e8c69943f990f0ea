#!/usr/bin/env bash
# ppl_table.sh - the bits-per-byte table of `make bench-perplexity`: `kvlab
# perplexity` of the trained model on the held-out text, for each cache
# configuration of bench/data/ppl.configs, into one CSV and one markdown
# table.
#
#   bash bench/scripts/ppl_table.sh KVLAB MODEL TEXT OUT.csv OUT.md
#
# Environment: PPL_CONTEXT (default 512, the training context: the cache is
# reset every PPL_CONTEXT tokens, so every configuration sees the same
# positions the model was trained on), PPL_MAX_TOKENS (score only the first
# N tokens; default: the whole text), PPL_THREADS (default 1), PPL_JOBS
# (configurations at once; default: the number of cores).
#
# The design decision: a configuration is one line of a data file,
# bench/data/ppl.configs (PPL_CONFIGS= names another), `label | kvlab
# perplexity options`, and a line whose strategy is not registered (`kvlab
# strategies`) is reported and skipped, so the lines for strategies still
# to come are added with their options when they land and cost nothing
# before. The first line is the exact baseline every other row is compared
# with. The options reach kvlab as words (read -a: split at blanks, no
# pattern expanded), never through a shell.
#
# The configurations run PPL_JOBS at a time (default: the number of cores),
# each on PPL_THREADS threads: one configuration on one thread gives the same
# bits as it does alone, so running them side by side changes no figure and
# divides the wall time (this table was the longest part of `make bench`).
set -euo pipefail

if [ $# -ne 5 ]; then
    echo "usage: bash bench/scripts/ppl_table.sh KVLAB MODEL TEXT OUT.csv OUT.md" >&2
    exit 2
fi
KVLAB=$1 MODEL=$2 TEXT=$3 CSV=$4 MD=$5
CONFIGS=${PPL_CONFIGS:-$(cd "$(dirname "$0")" && pwd)/../data/ppl.configs}
[ -f "$CONFIGS" ] && [ -r "$CONFIGS" ] || { echo "ppl_table: cannot read '$CONFIGS'" >&2; exit 2; }
CONTEXT=${PPL_CONTEXT:-512}
THREADS=${PPL_THREADS:-1}
MAXTOK=()
[ -n "${PPL_MAX_TOKENS:-}" ] && MAXTOK=(--max-tokens "$PPL_MAX_TOKENS")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
registered=" $("$KVLAB" strategies | awk '{ printf "%s ", $1 }') "

meta() { sed -n "s/^# $1=//p" "$2" | head -n 1; }

{
    echo "# kvlab bits-per-byte table (bench/scripts/ppl_table.sh)"
    echo "# model=$MODEL"
    echo "# text=$TEXT"
    echo "# context=$CONTEXT"
    echo "# max_tokens=${PPL_MAX_TOKENS:-all}"
    echo "# commit=$(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "# date=$(date -u +%Y-%m-%dT%H:%MZ)"
    echo "label,strategy,params,context,tokens,bytes,bits_per_byte,perplexity,peak_cache_bytes,delta_bpb"
} >"$work/table.csv"
JOBS=${PPL_JOBS:-$(nproc 2>/dev/null || echo 1)}
case "$JOBS" in '' | *[!0-9]* | 0) echo "ppl_table: PPL_JOBS must be a positive integer" >&2; exit 2 ;; esac
# pass 1: every registered configuration, JOBS at a time; each writes
# $work/I.csv, I.txt, I.err and I.rc
i=0
labels=()
while IFS='|' read -r label args; do
    label=$(echo "$label" | sed 's/^ *//; s/ *$//')
    case "$label" in '' | '#'*) continue ;; esac
    read -r -a opts <<<"$args"
    strategy=
    for ((k = 0; k + 1 < ${#opts[@]}; k++)); do
        [ "${opts[k]}" = --strategy ] && strategy=${opts[k + 1]}
    done
    if [[ -z "$strategy" || "$registered" != *" $strategy "* ]]; then
        echo "ppl_table: skipping '$label': strategy '$strategy' is not registered" >&2
        continue
    fi
    i=$((i + 1))
    labels[i]=$label
    printf '%s\n' "${opts[*]}" >"$work/$i.args"
    echo "$strategy" >"$work/$i.strategy"
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
    echo "[$i] $KVLAB perplexity --model $MODEL --text $TEXT --context $CONTEXT ${MAXTOK[*]} ${opts[*]}" >&2
    (
        rc=0
        "$KVLAB" perplexity --model "$MODEL" --text "$TEXT" --context "$CONTEXT" "${MAXTOK[@]}" \
            --threads "$THREADS" "${opts[@]}" --csv "$work/$i.csv" </dev/null >"$work/$i.txt" 2>"$work/$i.err" || rc=$?
        echo "$rc" >"$work/$i.rc"
    ) &
done <"$CONFIGS"
wait
# pass 2: the rows in the table's order; a configuration that failed stops it
base_bpb='' base_cache=''
for j in $(seq 1 "$i"); do
    if [ "$(cat "$work/$j.rc" 2>/dev/null)" != 0 ]; then
        echo "ppl_table: '${labels[j]}' failed: $(tail -n 1 "$work/$j.err" 2>/dev/null)" >&2
        exit 1
    fi
    label=${labels[j]} strategy=$(cat "$work/$j.strategy") out=$work/$j.csv
    bpb=$(meta bits_per_byte "$out")
    cache=$(meta peak_cache_bytes "$out")
    [ -z "$base_bpb" ] && base_bpb=$bpb base_cache=$cache
    delta=$(awk -v a="$bpb" -v b="$base_bpb" 'BEGIN { printf "%+.4f", a - b }')
    printf '"%s",%s,"%s",%s,%s,%s,%s,%s,%s,%s\n' "$label" "$strategy" "$(meta params "$out")" \
        "$CONTEXT" "$(meta tokens "$out")" "$(meta bytes "$out")" "$bpb" \
        "$(meta perplexity "$out")" "$cache" "$delta" >>"$work/table.csv"
    printf '| %s | %.4f | %s | %.3f | %.1f KiB (%.2fx) |\n' "$label" "$bpb" "$delta" \
        "$(meta perplexity "$out")" "$(awk -v c="$cache" 'BEGIN { print c / 1024 }')" \
        "$(awk -v c="$cache" -v b="$base_cache" 'BEGIN { print (b > 0 ? c / b : 0) }')" \
        >>"$work/rows.md"
done

{
    echo "**Bits per byte on the held-out text** (\`kvlab perplexity --context $CONTEXT\`,"
    echo "$(meta tokens "$work/1.csv") bytes scored of $TEXT; model $MODEL; lower is better;"
    echo "peak cache: the most the cache held at once, all layers):"
    echo
    echo "| configuration | bits/byte | vs dense | perplexity/byte | peak cache (vs dense) |"
    echo "|---|---:|---:|---:|---:|"
    cat "$work/rows.md"
} >"$work/table.md"
# temp file next to each target, then rename ($work may be another file system)
cp "$work/table.csv" "$CSV.tmp.$$" && mv "$CSV.tmp.$$" "$CSV"
cp "$work/table.md" "$MD.tmp.$$" && mv "$MD.tmp.$$" "$MD"
echo "ppl_table: $i configurations in $CSV and $MD" >&2
