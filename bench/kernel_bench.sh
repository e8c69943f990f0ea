#!/usr/bin/env bash
# kernel_bench.sh - the measuring part of `make kernel-bench` (and of `make
# bench`): KERNEL_PASSES passes over every shape, per pass one `kvlab kernel
# --csv` per shape and mode (decode at every T and dtype, then prefill), the
# pass's first run with --roofline and its metadata (# lines) kept; one
# header line in all, so the file stays one CSV with comment lines; written
# to a temporary file, then renamed. Then the markdown table
# (bench/kernel_table.sh) beside it.
#
# Everything comes from the environment (the Makefile passes its variables):
#   KVLAB KERNEL_CSV KERNEL_PASSES KERNEL_SHAPES KERNEL_SEQ_LENS KERNEL_DTYPES
#   KERNEL_PREFILL KERNEL_ARGS
# (see the Makefile for their defaults and meaning).
set -u
: "${KVLAB:?}" "${KERNEL_CSV:?}" "${KERNEL_PASSES:?}" "${KERNEL_SHAPES:?}"
: "${KERNEL_SEQ_LENS:?}" "${KERNEL_DTYPES:?}" "${KERNEL_PREFILL:?}"
KERNEL_ARGS=${KERNEL_ARGS:-}
mkdir -p "$(dirname "$KERNEL_CSV")"
tmp="$KERNEL_CSV.tmp"
rm -f "$tmp"
for pass in $(seq 1 "$KERNEL_PASSES"); do
    first=--roofline
    for s in $KERNEL_SHAPES; do
        # shellcheck disable=SC2046
        set -- $(echo "$s" | tr , ' ')
        for mode in "--seq-len $KERNEL_SEQ_LENS --dtype $KERNEL_DTYPES" "$KERNEL_PREFILL"; do
            echo "[pass $pass/$KERNEL_PASSES] $KVLAB kernel --csv $first --head-dim $1 --heads $2 --kv-heads $3 $mode $KERNEL_ARGS"
            # shellcheck disable=SC2086
            "$KVLAB" kernel --csv $first --head-dim "$1" --heads "$2" --kv-heads "$3" $mode $KERNEL_ARGS \
                >"$tmp.part" || { rm -f "$tmp" "$tmp.part"; exit 1; }
            if [ -n "$first" ]; then grep '^#' "$tmp.part" >>"$tmp"; fi
            if [ -n "$first" ] && [ "$pass" = 1 ]; then
                grep -v '^#' "$tmp.part" >>"$tmp"
            else
                grep -v '^#' "$tmp.part" | tail -n +2 >>"$tmp"
            fi
            first=
        done
    done
done
rm -f "$tmp.part"
mv "$tmp" "$KERNEL_CSV"
md="${KERNEL_CSV%.csv}.md"
echo "bash bench/kernel_table.sh $KERNEL_CSV >$md"
bash bench/kernel_table.sh "$KERNEL_CSV" >"$md.tmp" && mv "$md.tmp" "$md"
