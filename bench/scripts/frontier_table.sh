#!/usr/bin/env bash
# frontier_table.sh - the memory-accuracy frontier as markdown: the tables
# of a frontier CSV (`kvlab sweep --frontier bench/data/frontier.list`, what
# `make frontier` and `make bench` write to out/frontier.csv), so that the
# run frontier.png draws can be read as numbers (docs/performance.md says how to read them).
#
#   bash bench/scripts/frontier_table.sh FRONTIER.csv [OUT.md]
#
# OUT.md defaults to FRONTIER.csv with .csv replaced by .md. One line names
# the run (`# commit=`, `# date=`, `# cpu=` metadata) and the model shape,
# then one table per T, rows by resident cache bytes ascending: the
# configuration (label), what it keeps (its parameters; a precision's
# dtype first), the resident bytes in MiB and as a fraction of the
# reference cache of the same T (an exact f32 one: the `frontier` row of
# bench/data/targets.tsv names it, TARGETS= another file), the relative L2
# error of the logits and the greedy-token agreement against the exact
# cache, the median decode step (bench/scripts/frontier_table.awk).
#
# The one design decision: every figure comes from the file. Columns are
# found by header name, never by position; the reference's bytes of T
# are the CSV's own row of it at that T when there is one, else the
# budget's definition from the shape columns (layers x batch x kv_heads x
# head_dim x 2 x 4 bytes x T), and the table says which. A value the file
# does not hold (empty, nan) prints as "-".
# Exit status: 0 on success, 2 on bad usage, a missing or unreadable file,
# a missing column or a file without rows.
set -u

USAGE="usage: bash bench/scripts/frontier_table.sh FRONTIER_CSV [OUT_MD]"
usage() { echo "$USAGE" >&2; exit 2; }
case ${1:-} in
-h|--help) echo "$USAGE"; exit 0 ;;
-*|'') usage ;;
esac
[ $# -le 2 ] || usage
csv=$1
out=${2:-${csv%.csv}.md}
[ "$out" != "$csv" ] || { echo "frontier_table: output '$out' would overwrite the CSV" >&2; exit 2; }
if [ ! -f "$csv" ] || [ ! -r "$csv" ]; then echo "frontier_table: cannot read '$csv'" >&2; exit 2; fi

here=$(cd "$(dirname "$0")" && pwd)
targets=${TARGETS:-$here/../data/targets.tsv}
if [ ! -f "$targets" ] || [ ! -r "$targets" ]; then echo "frontier_table: cannot read '$targets'" >&2; exit 2; fi
tmp=$out.tmp.$$
trap 'rm -f "$tmp"' EXIT

awk -F, -v src="$csv" -f "$here/targets.awk" -f "$here/frontier_table.awk" "$targets" "$csv" >"$tmp" || exit $?
mv "$tmp" "$out"
