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
# peers_timed OUT ERR CMD...  CMD's stdout into OUT, stderr into ERR, watching the machine;
#                             PEERS_MARK: the rows' noisy,noise_reason

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

# A peer times itself, so kvlab cannot judge its passes one by one as it
# does its own (bench/measure/kernel_timing.c); it judges the peer's whole
# run by the same signal and the same threshold: the machine's busy time in
# /proc/stat minus the peer's own CPU time, over the run's wall time. A run
# other programs disturbed is run once more after a pause, unless the run
# before it was disturbed too (busy throughout: a second run would be as
# disturbed and cost as much again); the run that saw less of them is kept,
# and its rows are marked. The first run looks at the machine for 0.2 s
# before it starts: one that is busy then counts as busy throughout.
# Nothing from the peer's output reaches a shell.
PEERS_MAX_OTHERS=${PEERS_MAX_OTHERS:-0.15}
PEERS_BUSY_STREAK=0
peers_busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat 2>/dev/null; }
# PEERS_CPU: the CPU times of this shell and its waited-for children (bash's
# times, run in this shell: a subshell would count only its own)
peers_cpu_times() {
    local f=${TMPDIR:-/tmp}/kvlab_times.$$ a b c d
    PEERS_CPU=
    times >"$f" || return 1
    { read -r a b; read -r c d; } <"$f"
    rm -f "$f"
    PEERS_CPU="$a $b $c $d"
}
# one run: CMD's stdout into OUT, stderr into ERR; sets PEERS_OTHERS
# (cores, or "" when it cannot be told)
peers_run_watched() { # OUT ERR CMD...
    local out=$1 err=$2 b0 b1 c0 c1 w0 w1 rc hz
    shift 2
    hz=$(getconf CLK_TCK 2>/dev/null || echo 100)
    b0=$(peers_busy_ticks); peers_cpu_times; c0=$PEERS_CPU; w0=$(date +%s%N)
    "$@" >"$out" 2>"$err"; rc=$?
    w1=$(date +%s%N); peers_cpu_times; c1=$PEERS_CPU; b1=$(peers_busy_ticks)
    PEERS_OTHERS=$(awk -v b0="$b0" -v b1="$b1" -v c0="$c0" -v c1="$c1" -v w0="$w0" -v w1="$w1" -v hz="$hz" '
        function ms(x,  m) { m = x; sub(/m.*/, "", m); sub(/^[0-9]*m/, "", x); sub(/s$/, "", x); return (m * 60 + x) * 1000 }
        function cpu(t,  n, v, i, s) { n = split(t, v, " "); if (n != 4) return -1; for (i = 1; i <= n; i++) s += ms(v[i]); return s }
        BEGIN {
        if (b0 == "" || b1 == "" || cpu(c0) < 0 || cpu(c1) < 0 || w1 - w0 < 5e7) exit
        o = ((b1 - b0) * 1000 / hz - (cpu(c1) - cpu(c0))) / ((w1 - w0) / 1e6)
        printf "%.2f", o < 0 ? 0 : o }')
    return $rc
}
peers_timed() { # OUT ERR CMD...
    local out=$1 err=$2 first tries=2 rc
    shift 2
    if [ -z "${PEERS_PROBED:-}" ]; then
        PEERS_PROBED=1
        peers_run_watched /dev/null /dev/null sleep 0.2 && peers_disturbed "$PEERS_OTHERS" && PEERS_BUSY_STREAK=1
    fi
    [ "$PEERS_BUSY_STREAK" -gt 0 ] && tries=1
    peers_run_watched "$out" "$err" "$@"; rc=$?
    first=$PEERS_OTHERS
    if [ $rc = 0 ] && [ "$tries" = 2 ] && peers_disturbed "$first"; then
        echo "peers: other programs used $first cores during the run, measuring again" >&2
        sleep 1
        mv "$out" "$out.first"
        if peers_run_watched "$out" "$err" "$@" && awk -v a="$PEERS_OTHERS" -v b="$first" 'BEGIN { exit !(a <= b) }'; then
            rm -f "$out.first"
        else
            mv "$out.first" "$out"; PEERS_OTHERS=$first
        fi
    fi
    [ $rc = 0 ] || return $rc
    if peers_disturbed "$PEERS_OTHERS"; then
        PEERS_MARK="1,other programs used $PEERS_OTHERS cores during the peer's run"
        [ "$tries" = 1 ] && PEERS_MARK="$PEERS_MARK (busy throughout)"
        PEERS_BUSY_STREAK=$((PEERS_BUSY_STREAK + 1))
    else
        PEERS_MARK="0,"
        [ -n "$PEERS_OTHERS" ] && PEERS_BUSY_STREAK=0
    fi
    return 0
}
peers_disturbed() { [ -n "$1" ] && awk -v o="$1" -v m="$PEERS_MAX_OTHERS" 'BEGIN { exit !(o > m) }'; }
