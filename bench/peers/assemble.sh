#!/usr/bin/env bash
# assemble.sh - write out/peers.csv or out/peers_accuracy.csv from the row
# files the peer runs of this `make bench` left (missing or empty ones are
# skipped): `# key=value` metadata (date, CPU, host, kvlab commit, the peers'
# versions or why they are absent), the header, the rows. Written through a
# temporary file and a rename, so a reader never sees half a file; always
# written, so no table ever reads a previous run's peer figures.
#
#   bash bench/peers/assemble.sh peers|accuracy OUT.csv [ROWS.csv...]
#
# Columns: notebooks_data/README.md (out/peers.csv, out/peers_accuracy.csv).
set -u
[ $# -ge 2 ] || { echo "usage: bash bench/peers/assemble.sh peers|accuracy OUT.csv [ROWS.csv...]" >&2; exit 2; }
kind=$1 out=$2
shift 2
case $kind in
peers) header="peer,version,bench,shape,seq_len,dtype,layout,mode,threads,reps,us_min,us_median,noisy,noise_reason" ;;
accuracy) header="peer,version,model,config,compared_with,steps,agree,first_diff,max_abs_logit_diff,rel_l2" ;;
*) echo "assemble: unknown kind '$kind'" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/peers/lib.sh
. "$here/lib.sh"
mkdir -p "$(dirname "$out")"
tmp="$out.tmp"
{
    echo "# kvlab peers ($kind)"
    echo "# date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "# cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
    echo "# host=$(hostname 2>/dev/null || echo unknown)"
    echo "# kvlab_commit=$(git -C "$here/../.." rev-parse --short HEAD 2>/dev/null || echo unknown)"
    if peers_built; then
        echo "# llama_cpp_commit=$(peers_commit)"
        echo "# node_llama_cpp=$(cat "$PEERS_DIR/npm.version" 2>/dev/null)"
    else
        echo "# llama_cpp_commit=not built (make peers)"
    fi
    if peers_have_torch; then
        echo "# torch_version=$("$PEERS_PY" -c 'import torch; print(torch.__version__)')"
    else
        echo "# torch_version=not importable by $PEERS_PY"
    fi
    echo "$header"
    for f in "$@"; do
        if [ -s "$f" ]; then grep -v '^#' "$f" || true; fi
    done
} >"$tmp" && mv "$tmp" "$out"
