#!/usr/bin/env bash
# eviction_targets.sh - the eviction targets of a sweep CSV, as a markdown
# table: the rows of bench/data/targets.tsv's table `eviction` (today: the
# step time of each evicting cache flat in T beyond its window, the
# log-log slope over T in [2W, 16W]; h2o's bookkeeping, its step time over
# a sliding window's of the same budget), judged by the one target reader
# bench/scripts/targets.awk (eviction_targets.awk: the figures).
#
#   bash bench/scripts/eviction_targets.sh [SWEEP.csv]
#
# Without a file it measures one first (`make eviction-targets` does):
#   kvlab sweep --strategies SERIES --seq-lens 1024,2048,4096,8192 --out out/eviction.csv
# where SERIES are the series the eviction targets name (each label a
# strategy or preset name; at their defaults one budget of 512 tokens).
# Timings need a quiet machine; the table says what it read. TARGETS= names
# another targets file.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
targets=${TARGETS:-$here/../data/targets.tsv}
[ -f "$targets" ] && [ -r "$targets" ] || { echo "eviction_targets: cannot read '$targets'" >&2; exit 2; }
csv=${1:-}
if [ -z "$csv" ]; then
    KVLAB=${KVLAB:-build/kvlab}
    csv=out/eviction.csv
    series=$(awk -v list=1 -f "$here/targets.awk" -f "$here/eviction_targets.awk" "$targets")
    [ -n "$series" ] || { echo "eviction_targets: $targets names no eviction series" >&2; exit 2; }
    mkdir -p out
    "$KVLAB" sweep --strategies "$series" --seq-lens 1024,2048,4096,8192 --quiet --out "$csv"
fi
[ -f "$csv" ] || { echo "eviction_targets: $csv not found" >&2; exit 2; }

exec awk -F, -f "$here/targets.awk" -f "$here/eviction_targets.awk" "$targets" "$csv"
