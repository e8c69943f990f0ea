#!/usr/bin/env bash
# kernel_bench.sh - the measuring part of `make kernel-bench` (and of
# `make bench`): `kvlab kernel` over every shape, cold and hot, plus causal
# prefill, and, when the peers are built, ggml's flash-attention op at the
# same shapes, cold and hot, in both K/V layouts (bench/peers/ggml_attn.c),
# interleaved: per pass, per shape, kvlab's runs then ggml's, so both see
# the same minutes of the machine. KERNEL_PASSES passes; the tables keep
# each configuration's best.
#
# Writes KERNEL_CSV (one CSV: each run's `#` metadata kept as comments, one
# header line) and, with a peer, PEERS_KERNEL_CSV (out/peers.csv rows, no
# header), each through a temporary file and a rename. A kvlab run that
# fails stops the script (exit 1, nothing written); a peer run that fails
# is named on stderr and its rows left out.
#
# Environment (the Makefile passes its variables): KVLAB, KERNEL_CSV,
# KERNEL_SHAPES ("D,H,HKV ..."), KERNEL_SEQ_LENS, KERNEL_DTYPES,
# KERNEL_KIVI_DTYPES (quantized dtypes also run cold with --layout kivi,
# e.g. "int2"; empty for none), KERNEL_PREFILL, KERNEL_ARGS, KERNEL_PASSES, PEERS_GGML (the harness, empty
# for none), PEERS_KERNEL_CSV, PEERS_COMMIT (the llama.cpp commit),
# PEER_DTYPES, PEER_LAYOUTS.
set -u
KVLAB=${KVLAB:-build/kvlab}
out=${KERNEL_CSV:-out/kernel.csv}
shapes=${KERNEL_SHAPES:-64,8,8 64,32,8 128,8,8 128,32,8}
seqs=${KERNEL_SEQ_LENS:-512,2048,8192}
dtypes=${KERNEL_DTYPES:-f32,int8,int4}
kivi=${KERNEL_KIVI_DTYPES-int2}
prefill=${KERNEL_PREFILL:---queries 512 --seq-len 2048 --dtype f32 --no-ref}
args=${KERNEL_ARGS:-}
passes=${KERNEL_PASSES:-2}
ggml=${PEERS_GGML:-}
peer_out=${PEERS_KERNEL_CSV:-}
peer_ver=${PEERS_COMMIT:-unknown}
peer_dtypes=${PEER_DTYPES:-f32,f16,bf16,q8_0,q4_0}
peer_layouts=${PEER_LAYOUTS:-llama,contig}
# the peer runs on the threads kvlab runs on
threads=$(echo " $args " | sed -n 's/.* --threads[ =]\([0-9][0-9]*\) .*/\1/p')

tmp="$out.tmp"; ptmp="${peer_out:-$out.peers}.tmp"
rm -f "$tmp" "$ptmp" "$tmp.part"
trap 'rm -f "$tmp" "$ptmp" "$tmp.part" "$ptmp.part"' EXIT
[ -n "$ggml" ] && : >"$ptmp"
mkdir -p "$(dirname "$out")"

first_of_run=1
for pass in $(seq 1 "$passes"); do
    first=--roofline
    for s in $shapes; do
        set -- $(echo "$s" | tr , ' ')
        d=$1 h=$2 hkv=$3
        # cold decode (the reference check runs in the hot one: same kernel),
        # hot decode, prefill (compute-bound: hot), then cold decode of the
        # KIVI layout (kivi-int2 against cold f32)
        for mode in "--seq-len $seqs --dtype $dtypes --no-ref" "--hot --seq-len $seqs --dtype $dtypes" \
                    "--hot $prefill" ${kivi:+"--layout kivi --seq-len $seqs --dtype $kivi --no-ref"}; do
            # shellcheck disable=SC2086 # mode and args are option lists
            echo "[pass $pass/$passes] $KVLAB kernel --csv $first --head-dim $d --heads $h --kv-heads $hkv $mode $args" >&2
            # shellcheck disable=SC2086
            "$KVLAB" kernel --csv $first --head-dim "$d" --heads "$h" --kv-heads "$hkv" $mode $args \
                >"$tmp.part" || exit 1
            grep '^#' "$tmp.part" >>"$tmp"
            if [ "$first_of_run" = 1 ]; then grep -v '^#' "$tmp.part" >>"$tmp"; first_of_run=0
            else grep -v '^#' "$tmp.part" | tail -n +2 >>"$tmp"; fi
            first=--bound # every row's own limit beside it (--roofline implies it)
        done
        [ -n "$ggml" ] || continue
        for hot in "" --hot; do
            echo "[pass $pass/$passes] $ggml --head-dim $d --heads $h --kv-heads $hkv --seq-len $seqs $hot" >&2
            # shellcheck disable=SC2086
            if "$ggml" --head-dim "$d" --heads "$h" --kv-heads "$hkv" --seq-len "$seqs" \
                --dtype "$peer_dtypes" --layout "$peer_layouts" --version "$peer_ver" $hot \
                ${threads:+--threads "$threads"} >"$ptmp.part"; then
                cat "$ptmp.part" >>"$ptmp"
            else
                echo "peers: the ggml harness failed at head_dim $d, heads $h/$hkv ${hot:-cold}; those rows: not measured" >&2
            fi
        done
    done
done
mv "$tmp" "$out"
if [ -n "$ggml" ] && [ -n "$peer_out" ]; then mv "$ptmp" "$peer_out"; fi
exit 0
