#!/usr/bin/env bash
# models.sh - the whole-model peers of `make bench`: llama.cpp's llama-bench
# and the PyTorch decode loop (torch_peer.py) on the same model kvlab's
# sweep runs (exported with `kvlab export-synthetic`), and the accuracy of
# each against kvlab's greedy tokens.
#
#   bash bench/peers/models.sh ROWS.csv ACCURACY.csv
#
# ROWS.csv gets out/peers.csv rows (no header), ACCURACY.csv
# out/peers_accuracy.csv rows (no header); both are appended to only with
# the complete output of a peer that succeeded: a peer that is missing or
# fails is named on stderr and its rows are simply absent (the tables print
# "not measured"). Always exits 0 unless misused (2).
#
# Environment: KVLAB (build/kvlab), PEERS_DIR (build/peers), THREADS (the online
# cores, as kvlab sweep's default),
# LLAMA_SEQ_LENS (512,1024,2048,4096,8192; the sweep's T of the step
# table), LLAMA_REPS (21, as the sweep's cached rows), TORCH_SEQ_LENS
# (128,512,1024,2048,4096,8192), TORCH_NONE_MAX (1024: the longest T of the
# no-cache loop, whose eager attention holds a T x T score matrix per head),
# AGREE_STEPS (200), PEERS_SKIP_LLAMA=1 /
# PEERS_SKIP_TORCH=1 to leave one out.
set -u
[ $# = 2 ] || { echo "usage: bash bench/peers/models.sh ROWS.csv ACCURACY.csv" >&2; exit 2; }
rows=$1 acc=$2
KVLAB=${KVLAB:-build/kvlab}
THREADS=${THREADS:-$(nproc 2>/dev/null || echo 2)}
LLAMA_SEQ_LENS=${LLAMA_SEQ_LENS:-512,1024,2048,4096,8192}
LLAMA_REPS=${LLAMA_REPS:-21}
TORCH_SEQ_LENS=${TORCH_SEQ_LENS:-128,512,1024,2048,4096,8192}
TORCH_NONE_MAX=${TORCH_NONE_MAX:-1024}
AGREE_STEPS=${AGREE_STEPS:-200}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/peers/lib.sh
. "$here/lib.sh"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kvlab_peers.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
note() { echo "peers: $*" >&2; }

DEFAULT_SHAPE="layers=4;dim=512;heads=8;kv_heads=8;hidden=1376;vocab=256;mlp=on"
LAYER_SHAPE="layers=1;dim=512;heads=8;kv_heads=8;hidden=1376;vocab=256;mlp=off"
# the agreement models: the default, GQA 8/2, head size 128 (dim 512, 4 heads)
AGREE_MODELS="default: gqa-8/2:--kv-heads=2 head128-4/2:--heads=4,--kv-heads=2"
HELLO="hello world"

"$KVLAB" export-synthetic --out "$tmp/default.bin" --tokenizer-out "$tmp/tok.bin" >/dev/null ||
    { note "kvlab export-synthetic failed; no model peer measured"; exit 0; }

# kvlab's greedy tokens for a checkpoint and prompt ids ("tokens: ..." line)
kvlab_tokens() { # BIN IDS STEPS
    "$KVLAB" generate --model "$1" --prompt-tokens "$2" --new-tokens "$3" --strategy dynamic \
        --threads "$THREADS" 2>/dev/null | grep -m1 '^tokens:'
}
# agree first_diff of two "tokens: ..." lines
token_agreement() {
    awk -v a="$1" -v b="$2" 'BEGIN {
        n = split(a, x, " "); m = split(b, y, " "); k = 0; first = -1
        for (i = 2; i <= n && i <= m; i++) { if (x[i] == y[i]) k++; else if (first < 0) first = i - 2 }
        if (n != m && first < 0) first = (n < m ? n : m) - 1
        printf "%d,%d", k, first }'
}

# ---------------------------------------------------------------- llama.cpp
if [ "${PEERS_SKIP_LLAMA:-0}" != 1 ] && peers_built; then
    ver=$(peers_commit)
    lb="$PEERS_DIR/build/bin/llama-bench"
    if peers_convert "$tmp/default.bin" "$tmp/tok.bin" "$tmp/default.gguf"; then
        # one decode step per sample (-n 1) at depth T - 1, so it attends over T
        # tokens as kvlab's middle timed step does; the depth's state is
        # computed once and restored before each repetition (untimed)
        depths=$(echo "$LLAMA_SEQ_LENS" | tr , '\n' | awk '{ printf "%s%d", (NR > 1 ? "," : ""), $1 - 1 }')
        for t in f16 bf16 q8_0 q4_0; do
            note "llama-bench, default model, cache $t, flash attention on, depths $depths"
            if peers_timed "$tmp/lb.$t" "$tmp/lb.$t.err" "$lb" -m "$tmp/default.gguf" -p 0 -n 1 -d "$depths" \
                -r "$LLAMA_REPS" -fa on -ctk "$t" -ctv "$t" -t "$THREADS" -o jsonl &&
                peers_llama_bench_rows "$ver" "$DEFAULT_SHAPE" "$THREADS" <"$tmp/lb.$t" >"$tmp/lb.$t.rows" &&
                [ -s "$tmp/lb.$t.rows" ]; then
                awk -v m="$PEERS_MARK" '{ print $0 "," m }' "$tmp/lb.$t.rows" >>"$rows"
            else
                note "llama-bench with cache $t failed ($(tail -n 1 "$tmp/lb.$t.err")); its rows: not measured"
            fi
        done
        # greedy agreement and precision, per agreement model
        for m in $AGREE_MODELS; do
            name=${m%%:*} opts=$(echo "${m#*:}" | tr , ' ' | sed 's/=/ /g')
            bin="$tmp/${name//\//_}.bin"
            if [ "$name" = default ]; then bin="$tmp/default.bin"; gguf="$tmp/default.gguf"
            else
                # shellcheck disable=SC2086 # opts is a list of options
                "$KVLAB" export-synthetic --out "$bin" --max-len 1024 $opts >/dev/null &&
                    peers_convert "$bin" "$tmp/tok.bin" "$bin.gguf" || { note "$name: export/convert failed"; continue; }
                gguf="$bin.gguf"
            fi
            ids=$("$PEERS_DIR/bin/kvlab-peer-llama" --model "$gguf" --tokenize "$HELLO" | sed -n 's/^ids: //p')
            [ -n "$ids" ] || { note "$name: llama.cpp could not tokenize"; continue; }
            configs=off:f32,on:f32
            [ "$name" = default ] && configs=off:f32,on:f32,on:f16,on:bf16,on:q8_0,on:q4_0
            if "$PEERS_DIR/bin/kvlab-peer-llama" --model "$gguf" --prompt-tokens "$ids" \
                --steps "$AGREE_STEPS" --configs "$configs" --threads "$THREADS" >"$tmp/ag" 2>"$tmp/ag.err"; then
                kv=$(kvlab_tokens "$bin" "$ids" "$AGREE_STEPS")
                ll=$(grep -m1 '^tokens:' "$tmp/ag")
                echo "llama.cpp,$ver,$name,off:f32,kvlab dynamic tokens,$AGREE_STEPS,$(token_agreement "$kv" "$ll"),," >>"$rows.acc"
                sed -n 's/^config=\([^ ]*\) argmax_agree=\([0-9]*\)\/[0-9]* max_abs_logit_diff=\([^ ]*\) rel_l2=\(.*\)$/\1 \2 \3 \4/p' "$tmp/ag" |
                    while read -r c k mx rl; do
                        echo "llama.cpp,$ver,$name,$c,llama.cpp off:f32 logits (same inputs),$AGREE_STEPS,$k,,$mx,$rl"
                    done >>"$rows.acc"
            else
                note "$name: kvlab-peer-llama failed ($(tail -n 1 "$tmp/ag.err")); its accuracy rows: not measured"
            fi
        done
        [ -f "$rows.acc" ] && cat "$rows.acc" >>"$acc" && rm -f "$rows.acc"
    else
        note "the conversion to GGUF failed; llama.cpp rows: not measured"
    fi
elif [ "${PEERS_SKIP_LLAMA:-0}" != 1 ]; then
    note "llama.cpp is not built (make peers); its rows: not measured"
fi

# ---------------------------------------------------------------- PyTorch
if [ "${PEERS_SKIP_TORCH:-0}" != 1 ] && peers_have_torch; then
    tp="$here/torch_peer.py"
    tver=$("$PEERS_PY" -c 'import torch; print(torch.__version__)')
    "$KVLAB" export-synthetic --out "$tmp/layer.bin" --layers 1 --mlp off >/dev/null
    for spec in "layer:$LAYER_SHAPE:off:$TORCH_NONE_MAX" "default:$DEFAULT_SHAPE:on:$TORCH_NONE_MAX"; do
        IFS=: read -r name shape mlp nmax <<<"$spec"
        note "pytorch $tver, $name model, caches cat,prealloc,none, T $TORCH_SEQ_LENS"
        # PyTorch in its faster configuration: its OpenMP threads sleep
        # between regions instead of spinning. On the AVX-512 AMD EPYC (2
        # threads, default model, prealloc, 3 interleaved rounds, min us a
        # step) T 512: 4.6-4.9 ms passive against 5.6-9.1 ms with the
        # default wait; T 2048: 6.7-9.5 against 7.8-8.8. Timing the peer
        # slower than it can run would flatter kvlab.
        if peers_timed "$tmp/t.$name" "$tmp/t.$name.err" env OMP_WAIT_POLICY=passive "$PEERS_PY" "$tp" bench \
            --model "$tmp/$name.bin" --mlp "$mlp" --seq-lens "$TORCH_SEQ_LENS" \
            --none-max "$nmax" --threads "$THREADS" --shape "$shape"; then
            awk -v m="$PEERS_MARK" '{ print $0 "," m }' "$tmp/t.$name" >>"$rows"
        else
            note "pytorch ($name) failed ($(tail -n 1 "$tmp/t.$name.err")); its rows: not measured"
        fi
    done
    # its tokens against kvlab's (the second external oracle)
    ids=1,32,$(printf '%s' "$HELLO" | od -An -t u1 | tr -s ' \n' ',' | sed 's/^,//; s/,$//')
    kv=$(kvlab_tokens "$tmp/default.bin" "$ids" "$AGREE_STEPS")
    for c in cat prealloc none; do
        n=$AGREE_STEPS; [ "$c" = none ] && n=$((AGREE_STEPS / 4))
        kvn=$(echo "$kv" | cut -d' ' -f1-$((n + 1)))
        if pt=$("$PEERS_PY" "$tp" tokens --model "$tmp/default.bin" --prompt-tokens "$ids" --steps "$n" \
            --cache "$c" --threads "$THREADS" 2>"$tmp/tt.err"); then
            echo "pytorch,$tver,default,$c,kvlab dynamic tokens,$n,$(token_agreement "$kvn" "$pt"),," >>"$acc"
        else
            note "pytorch tokens ($c) failed ($(tail -n 1 "$tmp/tt.err"))"
        fi
    done
elif [ "${PEERS_SKIP_TORCH:-0}" != 1 ]; then
    note "PyTorch is not importable by $PEERS_PY (apt-get install python3-torch); its rows: not measured"
fi
exit 0
