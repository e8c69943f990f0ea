#!/usr/bin/env bash
# demo_tour.sh - the narrated tour that `make demo` plays: what a KV cache
# is for and what each cache strategy trades, shown with `kvlab demo` on a
# tiny model (every figure on screen is computed live, nothing is canned).
#
# Runs in well under 30 seconds. Pauses between parts only when stdout is a
# terminal and DEMO_PAUSE=1. Colour follows kvlab: on a terminal unless
# NO_COLOR is set.
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

part() {
    echo
    echo "${B}=== $* ===${R}"
}
say() { printf '%s\n' "$@"; }
run() {
    echo "${D}\$ kvlab $*${R}"
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
run demo --compare none,dynamic --steps 12 --every 4
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
run demo --compare none,sliding --window 10 --steps 12 --every 4
say "Identical while T <= 10 (the window covers everything); the logits differ from" \
    "the first step whose query no longer sees position 0, and tokens follow later."
pause

part "7. quantized: memory saved, error paid"
run demo --strategy quantized --bits 4 --residual 2 --steps 2
say "Old tokens are stored as 4-bit codes with a scale and min per group; the newest" \
    "stay in f32 (the residual). The round-trip error stays within half a step."
say "On a model with head_dim 64 (group 32), over 100 steps:"
run demo --compare dynamic,quantized --bits 8 --group 32 --residual 16 --dim 128 --heads 2 \
    --kv-heads 2 --hidden 256 --steps 100 --every 50
run demo --compare dynamic,quantized --bits 4 --group 32 --residual 16 --dim 128 --heads 2 \
    --kv-heads 2 --hidden 256 --steps 100 --every 50
say "Compare the 'cache B' columns: int8 holds the same tokens in well under half of" \
    "dynamic's bytes and int4 in less still (both counts include the f32 residual and" \
    "capacity reserved ahead). The price is the max|dlogit| column: int8 moves the" \
    "logits a little, int4 more, sometimes enough to change a token."

part "done"
say "Try: kvlab demo --help, kvlab demo --strategy sliding --window 3 --batch 2" \
    "(left padding shows up as 0s in the mask rows), or your own checkpoint with" \
    "kvlab demo --model FILE.bin --tokenizer tokenizer.bin --prompt 'Once upon'."
