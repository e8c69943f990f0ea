#!/usr/bin/env bash
# demo_tour.sh - the narrated tour that `make demo` plays: what a KV cache
# is for and what each cache strategy trades, shown with `kvlab demo` on a
# tiny model (every figure on screen is computed live, nothing is canned).
# Where the text matters (cache vs no cache, sliding window, quantization,
# the stale cache) it runs kvlab's small trained model when it is there
# (notebooks_data/fortunes-model.bin, `make train-model`; DEMO_MODEL= names
# another, DEMO_MODEL='' forces the synthetic one), so the tokens are text.
#
# Runs in well under 30 seconds. Pauses between parts only when stdout is a
# terminal and DEMO_PAUSE=1. Colour follows kvlab: on a terminal unless
# NO_COLOR is set. Every line fits the terminal (else COLUMNS, else 100).
set -u
KVLAB=${KVLAB:-build/kvlab}
if [ ! -x "$KVLAB" ]; then
    echo "demo_tour: $KVLAB not found (run 'make' first)" >&2
    exit 1
fi

if [ -t 1 ] && [ -z "${NO_COLOR:-}" ]; then
    B=$'\033[1m' D=$'\033[2m' R=$'\033[0m'
else
    B='' D='' R=''
fi
# The width every line fits, as kvlab demo chooses it: the terminal's, else
# COLUMNS, else 100 (exported, so every kvlab run below agrees).
W=
if [ -t 1 ]; then W=$(stty size </dev/tty 2>/dev/null | cut -d' ' -f2); fi
case "${W:-}" in '' | 0 | *[!0-9]*) W=${COLUMNS:-} ;; esac
case "${W:-}" in '' | *[!0-9]*) W=100 ;; esac
[ "$W" -lt 40 ] && W=40
export COLUMNS=$W

part() {
    echo
    echo "${B}=== $* ===${R}" | fold -s -w "$W" | sed 's/ *$//'
}
# say TEXT...: one paragraph, the arguments joined and wrapped at spaces.
say() { printf '%s\n' "$*" | fold -s -w "$W" | sed 's/ *$//'; }
# The command line, wrapped like a shell would continue it.
show_cmd() {
    local line='$ kvlab' word
    for word in "$@"; do
        case "$word" in *[!A-Za-z0-9_./,=:+-]*) word="'$word'" ;; esac
        if [ $((${#line} + 1 + ${#word} + 2)) -gt "$W" ]; then
            echo "${D}${line} \\${R}"
            line="    $word"
        else
            line="$line $word"
        fi
    done
    echo "${D}${line}${R}"
}
run() {
    show_cmd "$@"
    "$KVLAB" "$@"
    return 0 # a part that shows a failure (static full) must not stop the tour
}
pause() {
    if [ -t 1 ] && [ "${DEMO_PAUSE:-0}" = 1 ]; then
        read -r -p "${D}-- press Enter for the next part --${R}" _ </dev/tty || true
    fi
}

# A model big enough that step times mean something, still small (about
# 2 MB of weights): used where the tour prints wall times.
MID="--dim 256 --hidden 512 --layers 4 --heads 4 --kv-heads 4 --max-len 128"
# The trained model, when present (a path relative to the repository root,
# where `make demo` runs), and the prompt it continues.
root=$(cd "$(dirname "$0")/.." && pwd)
TM=${DEMO_MODEL-notebooks_data/fortunes-model.bin}
if [ -n "$TM" ] && [ ! -f "$TM" ] && [ -f "$root/$TM" ]; then TM=$root/$TM; fi
[ -n "$TM" ] && [ ! -f "$TM" ] && TM=
PROMPT=${DEMO_PROMPT:-"The cache"}

say "${B}kvlab demo tour: how a KV cache works, measured${R}"
say "A decoder predicts one token at a time. Each new token attends to every" \
    "earlier token through their keys (K) and values (V), computed in every layer." \
    "A KV cache keeps those K and V rows so that they are not recomputed."

part "1. One step, dissected (strategy dynamic, tiny model: 2 layers, 2 heads, head_dim 8)"
say "Step 0 is the prefill: all 8 prompt tokens at once, attention shape (8, 8)," \
    "a lower-triangular mask (a query sees itself and the past, never the future)." \
    "Each decode step then feeds ONE token; its query attends over past + new keys:" \
    "shape (1, past+1), a mask row of all 1s. FLOPs are shown next to the FLOPs the" \
    "same step costs without a cache."
run demo --strategy dynamic --steps 2
pause

part "2. No cache vs cache: identical tokens, very different work"
if [ -n "$TM" ]; then
    say "From here on where text matters: kvlab's small trained model ($TM: a" \
        "byte-level Llama of 1.6 M parameters trained on Debian's fortunes, see its" \
        "model card), continuing the prompt '$PROMPT'."
    run demo --model "$TM" --prompt "$PROMPT" --compare none,dynamic --steps 60 --every 20
else
    run demo --compare none,dynamic --steps 12 --every 4
fi
say "Same tokens (the cache changes how the result is computed, not the result)." \
    "'fed' is 1 token per step with a cache, the whole sequence without one."
pause

part "3. Why is step 100 without a cache slower than step 10?"
say "Same walk on a larger model ($MID), every 10th step, with wall time (us;" \
    "one run, so noisy on a busy machine: the FLOP columns are exact):"
run demo --strategy none --steps 100 --every 10 --brief --time $MID
run demo --strategy dynamic --steps 100 --every 10 --brief --time $MID
say "Without a cache, step s feeds all 8+s tokens: every layer recomputes their K," \
    "V and MLP (work that grows with s) and attention covers (8+s)(9+s)/2 query-key" \
    "pairs (attention FLOPs grow like s^2): step 100 feeds 108 tokens, step 10 feeds 18." \
    "With a cache each step feeds 1 token and attends over 8+s keys, so its cost" \
    "barely grows. Over N steps: quadratic total work without a cache, linear with one."
pause

part "4. dynamic vs dynamic-concat: the same cache, grown two ways"
run demo --compare dynamic,dynamic-concat --steps 24 --every 8
say "Both hold the same K and V ('cache B' is similar). dynamic doubles its capacity" \
    "when full (few copies, amortised O(1) per token); dynamic-concat allocates a new" \
    "buffer and copies everything on every step, like torch.cat: 'written' grows" \
    "quadratically."
pause

part "5. static: preallocated once, fails cleanly when full"
run demo --strategy static --slots 12 --steps 6 --brief
say "'cache B' never changes: all 12 slots exist from the start (no allocation while" \
    "decoding, fixed shapes, which is what compiled / CUDA-graph kernels need). The" \
    "13th token does not fit: the update returns KV_ERR_FULL and writes nothing."
pause

part "6. sliding window: a ring of W slots, the oldest evicted"
run demo --strategy sliding --window 4 --steps 3
say "Position p lives in slot p % 4; each step evicts the oldest position and the mask" \
    "hides keys older than the window. Memory is flat. But attention no longer sees" \
    "the whole past, so outputs can change. When do they start to differ?"
if [ -n "$TM" ]; then
    run demo --model "$TM" --prompt "$PROMPT" --compare none,sliding --window 16 --steps 60 \
        --every 20
    say "Identical while T <= 16 (the window covers everything); the logits differ from" \
        "the first step whose query no longer sees position 0, and the text follows" \
        "later: the two continuations are printed under the verdict. How much a window" \
        "costs on held-out text, in bits per byte: make bench-perplexity."
else
    run demo --compare none,sliding --window 10 --steps 12 --every 4
    say "Identical while T <= 10 (the window covers everything); the logits differ from" \
        "the first step whose query no longer sees position 0, and tokens follow later."
fi
pause

part "7. quantized: memory saved, error paid"
run demo --strategy quantized --bits 4 --residual 2 --steps 2
say "Old tokens are stored as 4-bit codes with a scale and min per group; the newest" \
    "stay in f32 (the residual). The round-trip error stays within half a step."
if [ -n "$TM" ]; then
    say "On the trained model (head_dim 32, group 32), over 100 steps:"
    run demo --model "$TM" --prompt "$PROMPT" --compare dynamic,quantized --bits 8 --group 32 \
        --residual 16 --steps 100 --every 50
    run demo --model "$TM" --prompt "$PROMPT" --compare dynamic,quantized --bits 4 --group 32 \
        --residual 16 --steps 100 --every 50
else
    say "On a model with head_dim 64 (group 32), over 100 steps:"
    run demo --compare dynamic,quantized --bits 8 --group 32 --residual 16 --dim 128 --heads 2 \
        --kv-heads 2 --hidden 256 --steps 100 --every 50
    run demo --compare dynamic,quantized --bits 4 --group 32 --residual 16 --dim 128 --heads 2 \
        --kv-heads 2 --hidden 256 --steps 100 --every 50
fi
say "Compare the 'cache B' columns: int8 holds the same tokens in well under half of" \
    "dynamic's bytes and int4 in less still (both counts include the f32 residual and" \
    "capacity reserved ahead). The price is the max|dlogit| column: int8 moves the" \
    "logits a little, int4 more, sometimes enough to change a token."

part "8. Why a cache is for inference only: a stale cache"
# The checkpoint one training step later, made once by the training script
# (PyTorch and the fortunes corpus needed) and kept under out/.
STEP1=out/fortunes-model-step1.bin
PY=${TRAIN_PYTHON:-/usr/bin/python3}
if [ -n "$TM" ] && { [ ! -f "$STEP1" ] || [ "$TM" -nt "$STEP1" ]; } &&
    "$PY" -c 'import torch' 2>/dev/null && [ -d /usr/share/games/fortunes ]; then
    mkdir -p out
    "$PY" "$root/bench/py/train_model.py" --one-step-from "$TM" --one-step-out "$STEP1" |
        fold -s -w "$W"
fi
if [ -n "$TM" ] && [ -f "$STEP1" ]; then
    say "Training changes the weights after every step. Cache the prompt's K and V, take" \
        "one optimizer step of the training script, then decode one more token with the" \
        "new weights twice: through the old cache, and without a cache."
    run stale-cache --model "$TM" --updated "$STEP1" --threads 1
else
    say "(skipped: needs the trained model and, once, python3-torch and the fortunes" \
        "package to take one training step; then: make stale-cache)"
fi
pause

pause

part "8. Evicting smarter: attention sinks, heavy hitters, one strategy per layer"
run demo --compare sliding,sinks --window 6 --sinks 2 --steps 12 --every 6
say "sinks keeps the first 2 positions forever besides the ring of 6 ('sinks [0 1] +" \
    "ring'): StreamingLLM's fix for models that park attention on their first tokens." \
    "Same memory as a window of 8; here (random weights) it differs from sliding only" \
    "in which keys the query still sees."
run demo --strategy h2o --heavy 3 --window 3 --steps 9 --every 9
say "h2o keeps the 3 tokens that received the most attention so far (the kernel hands" \
    "the attention per key back to the cache) plus the 3 newest; each kv head keeps its" \
    "own, so old positions survive in the cache line while their neighbours go."
run demo --strategy hybrid --layers-pattern 'sinks:2:4+h2o:2:2' --steps 9 --every 9
say "A hybrid gives each layer its own cache (Gemma's local and global layers):" \
    "layer 0 evicts like sinks, layer 1 like h2o, each shown on its own line."

part "9. Serving many sequences: shared prompts, beams, speculation"
run demo --strategy paged --block-size 4 --batch 3 --shared-prompt --steps 2
say "The prompt is prefilled once; the 3 sequences share its blocks (x3 is the" \
    "reference count). The first token each sequence appends lands in the shared," \
    "partly filled last block, so all but the last writer copy it first" \
    "(copy-on-write); full blocks stay shared for good."
run demo --strategy paged --block-size 4 --beams 2 --steps 2
say "Beam search keeps the 2 best continuations; the cache is reordered so each beam" \
    "continues its parent. In a paged cache that moves block-table entries, not rows."
run demo --strategy paged --draft-layers 1 --steps 4
say "Speculation: the first layer alone drafts tokens cheaply, the full model checks" \
    "them in one call, and the cache is cropped back to what was accepted. The" \
    "tokens are always the greedy ones; a better draft only makes it faster."

part "done"
say "Try: kvlab demo --help, kvlab demo --strategy sliding --window 3 --batch 2" \
    "(left padding shows up as 0s in the mask rows), or your own checkpoint with" \
    "kvlab demo --model FILE.bin --tokenizer tokenizer.bin --prompt 'Once upon'."
