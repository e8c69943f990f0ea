#!/usr/bin/env bash
# kernel_table.sh - the markdown tables of docs/performance.md describes (generated, never pasted),
# recomputed from result files: kvlab's own CSVs and out/peers.csv, the
# peers (ggml, llama.cpp, PyTorch) measured by the same `make bench` run.
#
#   bash bench/scripts/kernel_table.sh [--peers PEERS.csv] [KERNEL.csv]
#       the attention kernel (`kvlab kernel --csv`, out/kernel.csv): cold
#       and hot decode against the matching limit (DRAM / L3 read bandwidth)
#       and against ggml's flash-attention op in llama.cpp's cache layout;
#       ggml in both layouts; every target of bench/data/targets.tsv's table
#       `kernel` (the cold f32 share of the DRAM bandwidth, each dtype's
#       speed-up over cold f32 and over ggml, prefill's share of sgemm);
#       every configuration (bench/scripts/kernel_table.awk). A run with
#       `# layout=kivi` (kvlab kernel --layout kivi) names its quantized rows
#       kivi-int2, kivi-int4 ...
#   bash bench/scripts/kernel_table.sh [--peers PEERS.csv] [--accuracy ACC.csv] --steps SWEEP.csv...
#       the whole decode step (`kvlab sweep` CSVs: out/bench.csv, the
#       one-layer out/torch_compare.csv): against the step's limits,
#       against llama-bench at the same depth, against the PyTorch loop,
#       and the accuracy of each peer (out/peers_accuracy.csv); then the
#       storage targets (their own count): the tables `step` and `storage`
#       of bench/data/targets.tsv, which also name the series each table
#       shows (bench/scripts/step_table.awk).
#
# Which series a table shows, what it is judged against and by how much
# are data: bench/data/targets.tsv (TARGETS= names another file), read by
# bench/scripts/targets.awk, the one reader of the targets and writer of
# their verdicts; the peers' rows by bench/scripts/peers.awk. No script
# names a strategy (tests/e2e_agnostic.sh).
#
# The one design decision: no figure is a constant. Every number is read
# from the files given (columns found by header name; K+V bytes from the
# shape, dtype and `# group=`; limits from `# key=value` metadata), a peer
# figure only from PEERS.csv; whatever a file does not hold is printed as
# "not measured", and every target is printed with its requirement, the
# measured value and met / NOT met / not measured, so a table can never
# claim more than the files show. Several runs may be concatenated: each
# configuration keeps its lowest time, each limit its highest measurement.
# Exit status: 0 on success, 2 on bad usage, a missing/unreadable file or
# a malformed targets file (one line naming its line), 1 when a file lacks
# a needed column.
set -u

USAGE="usage: bash bench/scripts/kernel_table.sh [--peers PEERS.csv] [KERNEL_CSV]
       bash bench/scripts/kernel_table.sh [--peers PEERS.csv] [--accuracy ACC.csv] --steps SWEEP_CSV..."
usage() { echo "$USAGE" >&2; exit 2; }
readable() {
    if [ ! -r "$1" ] || [ ! -f "$1" ]; then echo "kernel_table: cannot read '$1'" >&2; exit 2; fi
}
peers=/dev/null acc=/dev/null steps=0
while [ $# -gt 0 ]; do
    case $1 in
    --peers) [ $# -ge 2 ] || usage; readable "$2"; peers=$2; shift 2 ;;
    --accuracy) [ $# -ge 2 ] || usage; readable "$2"; acc=$2; shift 2 ;;
    --steps) steps=1; shift; break ;;
    -h|--help) echo "$USAGE"; exit 0 ;;
    --) shift; break ;;
    -*) usage ;;
    *) break ;;
    esac
done

here=$(cd "$(dirname "$0")" && pwd)
targets=${TARGETS:-$here/../data/targets.tsv}
readable "$targets"

if [ "$steps" = 1 ]; then
    [ $# -ge 1 ] || usage
    for f in "$@"; do readable "$f"; done
    exec awk -F, -v peersf="$peers" -v accf="$acc" -f "$here/targets.awk" -f "$here/peers.awk" \
        -f "$here/step_table.awk" "$targets" "$peers" "$acc" "$@"
fi

[ $# -le 1 ] || usage
csv=${1:-out/kernel.csv}
case $csv in -h|--help) echo "$USAGE"; exit 0 ;; -*) usage ;; esac
readable "$csv"

exec awk -F, -v peersf="$peers" -f "$here/targets.awk" -f "$here/peers.awk" -f "$here/kernel_table.awk" \
    "$targets" "$peers" "$csv"
