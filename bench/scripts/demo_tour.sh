#!/usr/bin/env bash
# demo_tour.sh - the narrated tour that `make demo` plays: what a KV cache
# is for and what each cache strategy trades, shown with `kvlab demo` on a
# tiny model (every figure on screen is computed live, nothing is canned).
# The tour's text and commands are data, bench/data/demo_tour.txt (its
# header says how a line reads; DEMO_TOUR= names another): this script
# plays it, each command's words handed to kvlab as they are, never to a
# shell.
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
root=$(cd "$(dirname "$0")/../.." && pwd)
TM=${DEMO_MODEL-notebooks_data/fortunes-model.bin}
if [ -n "$TM" ] && [ ! -f "$TM" ] && [ -f "$root/$TM" ]; then TM=$root/$TM; fi
[ -n "$TM" ] && [ ! -f "$TM" ] && TM=
PROMPT=${DEMO_PROMPT:-"The cache"}

# The stale-cache part: the checkpoint one training step later, made once
# by the training script (PyTorch and the fortunes corpus needed) and kept
# under out/, then the old cache against the new weights.
stale_part() {
    local step1=out/fortunes-model-step1.bin py=${TRAIN_PYTHON:-/usr/bin/python3}
    if [ -n "$TM" ] && { [ ! -f "$step1" ] || [ "$TM" -nt "$step1" ]; } &&
        "$py" -c 'import torch' 2>/dev/null && [ -d /usr/share/games/fortunes ]; then
        mkdir -p out
        "$py" "$root/bench/py/train_model.py" --one-step-from "$TM" --one-step-out "$step1" </dev/null |
            fold -s -w "$W"
    fi
    if [ -n "$TM" ] && [ -f "$step1" ]; then
        say "Training changes the weights after every step. Cache the prompt's K and V, take" \
            "one optimizer step of the training script, then decode one more token with the" \
            "new weights twice: through the old cache, and without a cache."
        run stale-cache --model "$TM" --updated "$step1" --threads 1
    else
        say "(skipped: needs the trained model and, once, python3-torch and the fortunes" \
            "package to take one training step; then: make stale-cache)"
    fi
}

# text with @MODEL@, @PROMPT@, @MID@ replaced (no pattern, no command: bash's
# own substitution, the values quoted)
subst() {
    local t=$1
    t=${t//@MODEL@/"$TM"}
    t=${t//@PROMPT@/"$PROMPT"}
    t=${t//@MID@/"$MID"}
    printf '%s' "$t"
}
# do DIRECTIVE TEXT (LINE for messages): one directive of the tour
on=1
do_line() {
    local kind=$1 text=$2 at=$3 w words=() mid=()
    case $kind in
    model) [ -n "$TM" ] && on=1 || on=0; return ;;
    else) on=$((1 - on)); return ;;
    end) on=1; return ;;
    esac
    [ "$on" = 1 ] || return 0
    case $kind in
    part) part "$(subst "$text")" ;;
    say) say "$(subst "$text")" ;;
    pause) pause ;;
    stale) stale_part ;;
    run)
        read -r -a mid <<<"$MID"
        read -r -a w <<<"$text"
        for word in "${w[@]}"; do
            case $word in
            @MODEL@) words+=("$TM") ;;
            @PROMPT@) words+=("$PROMPT") ;;
            @MID@) words+=("${mid[@]}") ;;
            *) words+=("$word") ;;
            esac
        done
        run "${words[@]}" </dev/null
        ;;
    *) echo "demo_tour: $TOUR:$at: '$kind' is not a directive" >&2; exit 2 ;;
    esac
}

TOUR=${DEMO_TOUR:-$root/bench/data/demo_tour.txt}
[ -f "$TOUR" ] && [ -r "$TOUR" ] || { echo "demo_tour: cannot read '$TOUR'" >&2; exit 2; }
say "${B}kvlab demo tour: how a KV cache works, measured${R}"
# one directive and its continuation lines at a time, read on fd 3 (what
# the commands read on stdin is never the tour)
kind='' text='' at=0 n=0
while IFS= read -r line <&3 || [ -n "$line" ]; do
    n=$((n + 1))
    case $line in
    '#'* | '') continue ;;
    [[:blank:]]*) line=${line#"${line%%[![:blank:]]*}"}; text="$text${text:+ }$line"; continue ;;
    esac
    [ -z "$kind" ] || do_line "$kind" "$text" "$at"
    kind=${line%% *} at=$n
    if [ "$kind" = "$line" ]; then text=''; else text=${line#* }; fi
done 3<"$TOUR"
[ -z "$kind" ] || do_line "$kind" "$text" "$at"
