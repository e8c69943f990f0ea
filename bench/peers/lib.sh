# lib.sh - shell helpers shared by the peer scripts (bench/peers/*.sh) and
# the agreement test (tests/e2e_peers.sh). Source it; it sets nothing else.
#
#   PEERS_DIR   build/peers (the llama.cpp build of `make peers`)
#
# peers_built                 0 when `make peers` finished (stamp, binaries)
# peers_commit                the llama.cpp commit that was built
# peers_have_torch            0 when /usr/bin/python3 imports torch
# peers_convert BIN TOK GGUF  a kvlab checkpoint -> llama.cpp GGUF, with the
#                             converter's hard-coded metadata corrected
# peers_llama_bench_rows ...  llama-bench -o jsonl on stdin -> peers.csv rows

PEERS_DIR=${PEERS_DIR:-build/peers}
PEERS_PY=${PEERS_PY:-/usr/bin/python3}

peers_built() {
    [ -n "$(ls "$PEERS_DIR"/stamp-* 2>/dev/null)" ] &&
        [ -x "$PEERS_DIR/bin/kvlab-peer-ggml" ] && [ -x "$PEERS_DIR/bin/kvlab-peer-llama" ] &&
        [ -x "$PEERS_DIR/build/bin/llama-bench" ] &&
        [ -x "$PEERS_DIR/build/bin/llama-convert-llama2c-to-ggml" ]
}

peers_commit() { cat "$PEERS_DIR/llama.commit" 2>/dev/null || echo unknown; }

peers_have_torch() { "$PEERS_PY" -c 'import torch, numpy' >/dev/null 2>&1; }

# The llama2.c converter writes three things of its own (its source,
# examples/convert-llama2c-to-ggml): rope.dimension_count = min(64, head
# size), so a head size of 128 would rotate only half of each head (and
# llama.cpp refuses to load it); context_length = 128; and ids 0/1/2 as
# <unk>/<s>/</s> (kvlab's byte vocabulary has no special tokens: callers
# never let llama.cpp stop at id 2, see llama_greedy.c). The first two are
# set here from the checkpoint's header with gguf-py's gguf_set_metadata.py
# from the same llama.cpp source (needs Debian's python3-numpy).
peers_convert() { # BIN TOK GGUF
    local bin=$1 tok=$2 gguf=$3 hdr dim heads seq hs
    "$PEERS_DIR/build/bin/llama-convert-llama2c-to-ggml" --copy-vocab-from-model "$tok" \
        --llama2c-model "$bin" --llama2c-output-model "$gguf.tmp" >"$gguf.log" 2>&1 || {
        echo "peers: llama-convert-llama2c-to-ggml failed on $bin (see $gguf.log)" >&2; return 1; }
    hdr=$(od -An -t d4 -N 28 "$bin") || return 1
    set -- $hdr
    dim=$1 heads=$4 seq=$7
    hs=$((dim / heads))
    local set_md="$PEERS_DIR/llama.cpp/gguf-py/gguf/scripts/gguf_set_metadata.py"
    if [ "$hs" -gt 64 ] || [ "$seq" != 128 ]; then
        if ! PYTHONPATH="$PEERS_DIR/llama.cpp/gguf-py" "$PEERS_PY" -c 'import numpy' 2>/dev/null; then
            if [ "$hs" -gt 64 ]; then
                echo "peers: head size $hs needs gguf_set_metadata.py, which needs python3-numpy; run: apt-get install -y python3-numpy" >&2
                return 2
            fi
        else
            for kv in "llama.rope.dimension_count $hs" "llama.context_length $seq"; do
                set -- $kv
                PYTHONPATH="$PEERS_DIR/llama.cpp/gguf-py" "$PEERS_PY" "$set_md" --force \
                    "$gguf.tmp" "$1" "$2" >>"$gguf.log" 2>&1 || {
                    echo "peers: could not set $1 in $gguf (see $gguf.log)" >&2; return 1; }
            done
        fi
    fi
    mv "$gguf.tmp" "$gguf"
}

# stdin: llama-bench -o jsonl lines (one per test; -n 1, so each sample is
# one decode step at depth n_depth, attending over n_depth + 1 tokens);
# stdout: peers.csv rows, us per step, min and median of the samples.
peers_llama_bench_rows() { # VERSION SHAPE THREADS
    awk -v ver="$1" -v shape="$2" -v th="$3" '
    function field(name,   re, s) {
        re = "\"" name "\": *"
        if (!match($0, re "[^,}]*")) return ""
        s = substr($0, RSTART, RLENGTH); sub(re, "", s); gsub(/"/, "", s); return s
    }
    {
        if (!match($0, /"samples_ns": *\[[^]]*\]/)) next
        s = substr($0, RSTART, RLENGTH); sub(/.*\[/, "", s); sub(/\].*/, "", s)
        n = split(s, v, ",")
        if (n < 1) next
        gen = field("n_gen") + 0; if (gen < 1) gen = 1
        for (i = 1; i <= n; i++) v[i] = v[i] / gen / 1e3
        # sort ascending (n is small)
        for (i = 2; i <= n; i++) { x = v[i]; for (j = i - 1; j >= 1 && v[j] > x; j--) v[j + 1] = v[j]; v[j + 1] = x }
        med = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
        t = field("type_k")
        printf "llama.cpp,%s,step,%s,%d,%s,llama,step,%d,%d,%.2f,%.2f\n", ver, shape, \
            field("n_depth") + 1, t, th, n, v[1], med
    }'
}
