#!/usr/bin/env bash
# e2e_badinput.sh - every kvlab subcommand against bad input.
#
# For each entry point (strategies, generate, sweep, demo, compare, kernel,
# roofline, export-synthetic, and the dispatcher itself) it tries unknown
# options, missing values, non-numbers, negative, zero and huge values,
# byte counts that overflow or exceed the machine's memory, contradictory
# combinations, unreadable or malformed input files, and output paths that
# are a directory, unwritable, or the same file as an input. Each case must
# end with the exit status it names (2 = bad input, 1 = run-time failure),
# print exactly one line on stderr starting with "kvlab", never crash (exit
# status < 128, no sanitizer report: run it with KVLAB=build/san/kvlab too)
# and finish within CASE_TIMEOUT seconds. Output files must not appear (or
# be half-written) after a refused run.
#
# Cases that fail because of a known problem in code this script's author
# could not change are listed in XFAIL below, each with the problem; they
# print XFAIL (or XPASS once fixed: then delete the line). Set
# BADINPUT_TABLE=FILE to also get a markdown table of every case (entry
# point, input, what kvlab said, exit status). Prints "N passed, N failed"
# last and exits non-zero on any FAIL or XPASS.
set -u

KVLAB=${KVLAB:-build/kvlab}
CASE_TIMEOUT=${CASE_TIMEOUT:-120}
TABLE=${BADINPUT_TABLE:-}
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
pass=0
fail=0
xfail=0
xpass=0

# ---- expected failures ---------------------------------------------------
# "case-id  reason" per line, for a known bug being fixed (none now).
XFAIL=$(cat <<'EOF'
EOF
)

is_xfail() { printf '%s\n' "$XFAIL" | awk -v id="$1" '$1 == id { f = 1 } END { exit !f }'; }

# ---- the check -----------------------------------------------------------
# A small model so every accepted part of a run takes milliseconds.
# (no --group: an option none of the run's strategies takes is refused; the
# quantized cases give their own)
SMALL=(--layers 1 --dim 16 --heads 2 --kv-heads 2 --hidden 24 --vocab 256 --max-len 64
    --threads 1)
# The smallest sweep the CLI accepts, for cases that reach the end of a run.
# (no --group: a parameter flag that none of the run's strategies takes is
# refused, and dynamic has no groups)
TINY_SWEEP=(--layers 1 --dim 16 --heads 2 --kv-heads 2 --hidden 24 --vocab 64 --max-len 64
    --seq-lens 16 --reps 1 --warmup 0 --threads 1 --strategies dynamic
    --no-roofline --quiet)

# dedupe ARGS...: the words with an option given again later dropped (with
# its value): a case adds the option it is about after a base list that may
# hold a good value of it, and an option given twice is refused on its own
dedupe() {
    local words=("$@") keep=() i j w n later
    n=${#words[@]}
    i=0
    while [ $i -lt "$n" ]; do
        w=${words[$i]}
        if [ "${w#--}" != "$w" ] && [ "$w" != "--" ]; then
            later=0
            for ((j = i + 1; j < n; j++)); do
                [ "${words[$j]%%=*}" = "${w%%=*}" ] && later=1
            done
            local takes=0
            [ "${w#*=}" = "$w" ] && [ $((i + 1)) -lt "$n" ] && [ "${words[$((i + 1))]#--}" = "${words[$((i + 1))]}" ] && takes=1
            if [ $later = 1 ]; then
                i=$((i + 1 + takes))
                continue
            fi
            keep+=("$w")
            [ $takes = 1 ] && keep+=("${words[$((i + 1))]}") && i=$((i + 1))
        else
            keep+=("$w")
        fi
        i=$((i + 1))
    done
    printf '%s\n' "${keep[@]}"
}

# case ID WANT ARGS... : WANT is 2, 1 or "1|2" (either is right for the case).
# The refusal must be about the case: "given twice", or "has no effect"
# about an option the case does not name in its id, is a case that tests
# nothing.
case_() {
    local id=$1 want=$2
    shift 2
    local args
    mapfile -t args < <(dedupe "$@")
    if [ "${args[0]:-}" = sharing ]; then # sharing runs a --strategies list
        for i in "${!args[@]}"; do [ "${args[$i]}" = --strategy ] && args[$i]=--strategies; done
        mapfile -t args < <(dedupe "${args[@]}")
    fi
    set -- "${args[@]}"
    timeout "$CASE_TIMEOUT" "$KVLAB" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
    local rc=$? why=""
    local lines
    lines=$(awk 'END { print NR }' "$tmp/err")
    if [ "$rc" -eq 124 ]; then
        why="no exit within ${CASE_TIMEOUT}s"
    elif [ "$rc" -ge 128 ]; then
        why="killed by signal $((rc - 128))"
    elif grep -qE 'Sanitizer|runtime error:' "$tmp/err"; then
        why="sanitizer report"
    elif ! printf '%s\n' "$want" | tr '|' '\n' | grep -qx "$rc"; then
        why="exit $rc, expected $want"
    elif [ "$lines" -ne 1 ]; then
        why="$lines lines on stderr, expected 1"
    elif ! head -n 1 "$tmp/err" | grep -q '^kvlab'; then
        why="stderr line does not start with 'kvlab'"
    elif grep -q 'is given twice' "$tmp/err"; then
        why="refused for a repeated option, not for what the case tries"
    elif grep -q 'has no effect' "$tmp/err" &&
        ! grep -qE "$(printf '%s' "$id" | sed 's/^[a-z]*-//; s/-/|/g')" "$tmp/err"; then
        why="refused for an option the case is not about"
    fi
    if [ -n "$TABLE" ]; then
        local entry=${1:-"(none)"} args said verdict=ok
        args=$(printf '%s ' "${@:2}" | sed "s|$tmp|TMP|g; s/|/\\\\|/g; s/ *\$//")
        [ "${#args}" -gt 100 ] && args="...${args: -96}" # the bad part comes last
        said=$(head -n 1 "$tmp/err" | cut -c 1-150 | sed "s|$tmp|TMP|g; s/|/\\\\|/g")
        [ "$lines" -gt 1 ] && said="$said (+$((lines - 1)) more lines)"
        [ -n "$why" ] && verdict="XFAIL: $why"
        printf '| %s | %s | `%s` | %s | %s | %s |\n' "$id" "$entry" "$args" "$said" "$rc" \
            "$verdict" >>"$TABLE"
    fi
    if [ -z "$why" ]; then
        if is_xfail "$id"; then
            xpass=$((xpass + 1))
            echo "XPASS: $id (fixed? remove it from XFAIL)"
        else
            pass=$((pass + 1))
        fi
    elif is_xfail "$id"; then
        xfail=$((xfail + 1))
        echo "XFAIL: $id: $why"
    else
        fail=$((fail + 1))
        echo "FAIL: $id: $why; stderr: $(head -c 400 "$tmp/err")"
    fi
}

# no_file ID PATH: a refused run left nothing behind at PATH
no_file() {
    if [ -e "$2" ]; then
        fail=$((fail + 1))
        echo "FAIL: $1: $2 exists after a refused run"
    else
        pass=$((pass + 1))
    fi
}

# same_bytes ID FILE COPY: FILE is unchanged (equal to COPY made before)
same_bytes() {
    if cmp -s "$2" "$3"; then
        pass=$((pass + 1))
    elif is_xfail "$1"; then
        xfail=$((xfail + 1))
        echo "XFAIL: $1: $2 was modified"
    else
        fail=$((fail + 1))
        echo "FAIL: $1: $2 was modified by a refused run"
    fi
}

# ---- input files ---------------------------------------------------------
"$KVLAB" export-synthetic --out "$tmp/model.bin" "${SMALL[@]:0:14}" >/dev/null ||
    { echo "FAIL: cannot export a small model"; exit 1; }
cp "$tmp/model.bin" "$tmp/model.copy"
printf 'this is not a checkpoint, just some bytes of text\n' >"$tmp/garbage.bin"
head -c 100 "$tmp/model.bin" >"$tmp/truncated.bin"
printf 'not,a,sweep\n1,2,3\n' >"$tmp/garbage.csv"
: >"$tmp/empty.csv"
printf '\x05\x00\x00\x00\x00\x00\x80\x3f\xff\xff\xff\x7fabc' >"$tmp/garbage.tok"
mkdir "$tmp/dir" "$tmp/ro"
chmod a-w "$tmp/ro"
"$KVLAB" sweep "${TINY_SWEEP[@]}" --out "$tmp/good.csv" >/dev/null 2>&1 ||
    { echo "FAIL: cannot run a tiny sweep"; exit 1; }
cp "$tmp/good.csv" "$tmp/good.copy"
UNWRITABLE=/proc/kvlab-badinput.out # cannot be created, even by root
NODIR=$tmp/no/such/dir/x.out

# ---- the dispatcher --------------------------------------------------------
case_ main-none 2
case_ main-unknown 2 frobnicate
case_ main-dash 2 --frobnicate

# ---- strategies ------------------------------------------------------------
case_ strategies-unknown-opt 2 strategies --bogus
case_ strategies-extra-arg 2 strategies dynamic

# ---- options shared by generate, sweep, demo, export-synthetic, sharing ---
# (each subcommand parses them through bench/cli/cli_opts.c; tried on each)
for cmd in generate sweep demo export-synthetic sharing; do
    extra=()
    case $cmd in
    generate) extra=(--strategy dynamic --new-tokens 2 --prompt-len 4) ;;
    sharing) extra=(--strategies dynamic --batches 1 --prompt-lens 4 --new-tokens 2 --quiet
        --out "$tmp/sh.csv") ;;
    sweep) extra=(--seq-lens 16 --reps 1 --warmup 0 --no-roofline --quiet --out "$tmp/s.csv") ;;
    demo) extra=(--steps 1) ;;
    export-synthetic) extra=(--out "$tmp/e.bin") ;;
    esac
    case_ "$cmd-unknown-opt" 2 "$cmd" "${extra[@]}" --bogus
    case_ "$cmd-stray-arg" 2 "$cmd" "${extra[@]}" stray
    case_ "$cmd-missing-value" 2 "$cmd" "${extra[@]}" --dim
    case_ "$cmd-non-number" 2 "$cmd" "${extra[@]}" --dim abc
    case_ "$cmd-trailing-junk" 2 "$cmd" "${extra[@]}" --layers 2x
    case_ "$cmd-empty-number" 2 "$cmd" "${extra[@]}" --layers=
    case_ "$cmd-float" 2 "$cmd" "${extra[@]}" --heads 2.5
    case_ "$cmd-hex" 2 "$cmd" "${extra[@]}" --heads 0x10
    case_ "$cmd-negative" 2 "$cmd" "${extra[@]}" --layers -1
    case_ "$cmd-zero-layers" 2 "$cmd" "${extra[@]}" --layers 0
    case_ "$cmd-zero-heads" 2 "$cmd" "${extra[@]}" --heads 0
    case_ "$cmd-int-overflow" 2 "$cmd" "${extra[@]}" --dim 99999999999999999999
    case_ "$cmd-huge-bytes" 2 "$cmd" "${extra[@]}" --dim 2000000000 --layers 1000
    # each value inside its range, the product past 2^64 bytes
    case_ "$cmd-overflow-in-range" 2 "$cmd" "${extra[@]}" --dim 1073741824 --heads 4096 \
        --kv-heads 4096 --layers 1048576 --hidden 1073741824
    case_ "$cmd-huge-hidden" 2 "$cmd" "${extra[@]}" --hidden 1073741824 --layers 1048576
    case_ "$cmd-above-memory" 2 "$cmd" "${extra[@]}" --dim 65536 --heads 64 --kv-heads 64 \
        --layers 4096 --hidden 65536
    case_ "$cmd-kv-heads-not-dividing" 2 "$cmd" "${extra[@]}" --heads 8 --kv-heads 3
    case_ "$cmd-heads-not-dividing-dim" 2 "$cmd" "${extra[@]}" --dim 100 --heads 3 --kv-heads 3
    case_ "$cmd-odd-head-dim" 2 "$cmd" "${extra[@]}" --dim 6 --heads 2 --kv-heads 2
    case_ "$cmd-mlp-maybe" 2 "$cmd" "${extra[@]}" --mlp maybe
    case_ "$cmd-seed-negative" 2 "$cmd" "${extra[@]}" --seed -5
    case_ "$cmd-threads-zero" 2 "$cmd" "${extra[@]}" --threads 0
    case_ "$cmd-threads-huge" 2 "$cmd" "${extra[@]}" --threads 100000
    case_ "$cmd-vocab-zero" 2 "$cmd" "${extra[@]}" --vocab 0
    case_ "$cmd-max-len-zero" 2 "$cmd" "${extra[@]}" --max-len 0
    if [ "$cmd" != export-synthetic ]; then
        case_ "$cmd-bits-3" 2 "$cmd" "${extra[@]}" --strategy quantized --bits 3
        case_ "$cmd-group-not-dividing" 2 "$cmd" "${extra[@]}" --strategy quantized --group 7
        case_ "$cmd-window-zero" 2 "$cmd" "${extra[@]}" --strategy sliding --window 0
        case_ "$cmd-sinks-over-window" 2 "$cmd" "${extra[@]}" --strategy sinks --sinks 8 --window 4
        case_ "$cmd-sinks-over-max-len" 2 "$cmd" "${extra[@]}" --strategy sinks --sinks 100 \
            --window 200 --max-len 64
        case_ "$cmd-heavy-zero" 2 "$cmd" "${extra[@]}" --strategy h2o --heavy 0
        case_ "$cmd-reindex-2" 2 "$cmd" "${extra[@]}" --strategy sinks --reindex 2
        case_ "$cmd-pattern-not-dividing" 2 "$cmd" "${extra[@]}" --strategy hybrid \
            --layers-pattern 'sliding*3'
        case_ "$cmd-pattern-unknown" 2 "$cmd" "${extra[@]}" --strategy hybrid \
            --layers-pattern 'sliding,dynamo'
        case_ "$cmd-pattern-space" 2 "$cmd" "${extra[@]}" --strategy hybrid \
            --layers-pattern 'sliding dynamic'
        case_ "$cmd-dtype-f8" 2 "$cmd" "${extra[@]}" --strategy dynamic --dtype f8
        case_ "$cmd-dtype-int8" 2 "$cmd" "${extra[@]}" --strategy static --dtype int8
        case_ "$cmd-dtype-number" 2 "$cmd" "${extra[@]}" --strategy sliding --dtype 3
        case_ "$cmd-dtype-empty" 2 "$cmd" "${extra[@]}" --strategy dynamic --dtype=
        case_ "$cmd-layout-channel" 2 "$cmd" "${extra[@]}" --strategy quantized --layout channel
        case_ "$cmd-layout-number" 2 "$cmd" "${extra[@]}" --strategy quantized --layout 1
        case_ "$cmd-bits-1" 2 "$cmd" "${extra[@]}" --strategy quantized --bits 1
        case_ "$cmd-unknown-strategy" 2 "$cmd" "${extra[@]}" --strategy nosuch
        case_ "$cmd-batch-zero" 2 "$cmd" "${extra[@]}" --batch 0
        case_ "$cmd-model-missing" 2 "$cmd" "${extra[@]}" --model "$tmp/nonexistent.bin"
        case_ "$cmd-model-dir" 2 "$cmd" "${extra[@]}" --model "$tmp/dir"
        case_ "$cmd-model-garbage" 2 "$cmd" "${extra[@]}" --model "$tmp/garbage.bin"
        case_ "$cmd-model-truncated" 2 "$cmd" "${extra[@]}" --model "$tmp/truncated.bin"
    fi
done

# ---- generate ----------------------------------------------------------------
G=(generate "${SMALL[@]}")
case_ generate-no-strategy 2 "${G[@]}" --new-tokens 2
case_ generate-new-tokens-zero 2 "${G[@]}" --strategy dynamic --new-tokens 0
case_ generate-new-tokens-negative 2 "${G[@]}" --strategy dynamic --new-tokens -3
case_ generate-prompt-len-zero 2 "${G[@]}" --strategy dynamic --prompt-len 0
case_ generate-past-max-len 2 "${G[@]}" --strategy dynamic --prompt-len 60 --new-tokens 10
case_ generate-prompt-past-max-len 2 "${G[@]}" --strategy dynamic --prompt-len 65
case_ generate-empty-prompt 2 "${G[@]}" --strategy dynamic --prompt ""
case_ generate-prompt-and-len 2 "${G[@]}" --strategy dynamic --prompt hi --prompt-len 3
case_ generate-prompt-and-tokens 2 "${G[@]}" --strategy dynamic --prompt hi --prompt-tokens 1,2
case_ generate-prompt-tokens-range 2 "${G[@]}" --strategy dynamic --prompt-tokens 1,256
case_ generate-huge-batch 2 "${G[@]}" --strategy dynamic --batch 65536 --max-len 8192 \
    --prompt-len 8000
case_ generate-tokenizer-missing 2 "${G[@]}" --strategy dynamic --prompt hi \
    --tokenizer "$tmp/nonexistent.tok"
case_ generate-tokenizer-garbage 2 "${G[@]}" --strategy dynamic --prompt hi \
    --tokenizer "$tmp/garbage.tok"
case_ generate-tokenizer-dir 2 "${G[@]}" --strategy dynamic --prompt hi --tokenizer "$tmp/dir"
case_ generate-prompt-needs-tokenizer 2 generate --strategy dynamic --layers 1 --dim 16 \
    --heads 2 --kv-heads 2 --hidden 24 --vocab 300 --max-len 64 --threads 1 --prompt hi
# generation modes and prefix sharing (issue 12): the operation a mode needs,
# its counts, and combinations that mean nothing
case_ generate-beams-none 2 "${G[@]}" --strategy none --beams 3
case_ generate-beams-zero 2 "${G[@]}" --strategy paged --beams 0
case_ generate-beams-past-vocab 2 "${G[@]}" --strategy paged --beams 300 --vocab 256
case_ generate-samples-zero 2 "${G[@]}" --strategy paged --samples 0
case_ generate-samples-and-batch 2 "${G[@]}" --strategy paged --samples 2 --batch 3
case_ generate-temperature-alone 2 "${G[@]}" --strategy paged --temperature 0.5
case_ generate-temperature-nan 2 "${G[@]}" --strategy paged --samples 2 --temperature nan
case_ generate-temperature-negative 2 "${G[@]}" --strategy paged --samples 2 --temperature -1
case_ generate-two-modes 2 "${G[@]}" --strategy paged --beams 2 --samples 2
case_ generate-draft-layers-past-model 2 "${G[@]}" --strategy paged --draft-layers 2
case_ generate-draft-none 2 "${G[@]}" --strategy none --layers 2 --draft-layers 1
case_ generate-draft-lossy 2 "${G[@]}" --strategy quantized --group 8 --layers 2 --draft-layers 1
case_ generate-draft-tokens-alone 2 "${G[@]}" --strategy paged --draft-tokens 3
case_ generate-draft-tokens-zero 2 "${G[@]}" --strategy paged --layers 2 --draft-layers 1 \
    --draft-tokens 0
case_ generate-shared-none 2 "${G[@]}" --strategy none --shared-prompt
case_ generate-block-size-zero 2 "${G[@]}" --strategy paged --block-size 0
case_ generate-pool-exhausted 1 "${G[@]}" --strategy paged --max-blocks 3 --block-size 2 --prompt-len 4 \
    --new-tokens 4
# a full cache names the option that sized it
if grep -q -- '--max-blocks 3' "$tmp/err"; then pass=$((pass + 1)); else
    fail=$((fail + 1))
    echo "FAIL: generate-pool-exhausted-names-option: $(head -c 300 "$tmp/err")"
fi

# ---- sweep -------------------------------------------------------------------
S=(sweep "${TINY_SWEEP[@]}")
case_ sweep-lens-descending 2 "${S[@]}" --seq-lens 32,16 --out "$tmp/s.csv"
case_ sweep-lens-empty 2 "${S[@]}" --seq-lens "" --out "$tmp/s.csv"
case_ sweep-lens-zero 2 "${S[@]}" --seq-lens 0 --out "$tmp/s.csv"
case_ sweep-lens-comma 2 "${S[@]}" --seq-lens 16,,32 --out "$tmp/s.csv"
# (an explicit --max-len below the longest --seq-lens is raised on purpose:
# cmd_sweep.c sizes the synthetic model for the sweep; a checkpoint is not)
case_ sweep-lens-past-model 2 "${S[@]}" --model "$tmp/model.bin" --seq-lens 16,1000 \
    --out "$tmp/s.csv"
case_ sweep-max-seq-zero 2 "${S[@]}" --max-seq 0 --out "$tmp/s.csv"
case_ sweep-reps-zero 2 "${S[@]}" --reps 0 --out "$tmp/s.csv"
case_ sweep-reps-negative 2 "${S[@]}" --reps -2 --out "$tmp/s.csv"
case_ sweep-warmup-negative 2 "${S[@]}" --warmup -1 --out "$tmp/s.csv"
case_ sweep-retries-negative 2 "${S[@]}" --retries -1 --out "$tmp/s.csv"
case_ sweep-none-max-negative 2 "${S[@]}" --none-max -1 --out "$tmp/s.csv"
case_ sweep-strategies-unknown 2 "${S[@]}" --strategies dynamic,nosuch --out "$tmp/s.csv"
case_ sweep-strategies-empty 2 "${S[@]}" --strategies "" --out "$tmp/s.csv"
case_ sweep-quantized-int3 2 "${S[@]}" --strategies quantized-int3 --out "$tmp/s.csv"
# the frontier: its list file, its budgets, and what it cannot be combined with
F=(sweep --layers 1 --dim 16 --heads 2 --kv-heads 2 --hidden 24 --vocab 64 --max-len 64
    --seq-lens 16 --reps 1 --warmup 0 --threads 1 --no-roofline --quiet)
printf 'sliding sliding\n' >"$tmp/two_fields.list"
case_ sweep-frontier-missing 2 "${F[@]}" --frontier "$tmp/nonexistent.list" --out "$tmp/s.csv"
case_ sweep-frontier-dir 2 "${F[@]}" --frontier "$tmp/dir" --out "$tmp/s.csv"
case_ sweep-frontier-binary 2 "${F[@]}" --frontier "$tmp/garbage.tok" --out "$tmp/s.csv"
case_ sweep-frontier-two-fields 2 "${F[@]}" --frontier "$tmp/two_fields.list" --out "$tmp/s.csv"
case_ sweep-frontier-nothing-fits 2 "${F[@]}" --frontier "$tmp/garbage.bin" --out "$tmp/s.csv"
case_ sweep-frontier-strategies 2 "${F[@]}" --frontier bench/data/frontier.list --strategies dynamic \
    --out "$tmp/s.csv"
case_ sweep-frontier-shard 2 "${F[@]}" --frontier bench/data/frontier.list --shard 1/2 \
    --out "$tmp/s.csv"
case_ sweep-budgets-zero 2 "${F[@]}" --frontier bench/data/frontier.list --budgets 0 --out "$tmp/s.csv"
case_ sweep-budgets-over 2 "${F[@]}" --frontier bench/data/frontier.list --budgets 25,101 \
    --out "$tmp/s.csv"
case_ sweep-budgets-descending 2 "${F[@]}" --frontier bench/data/frontier.list --budgets 50,25 \
    --out "$tmp/s.csv"
case_ sweep-budgets-junk 2 "${F[@]}" --frontier bench/data/frontier.list --budgets 25x --out "$tmp/s.csv"
case_ sweep-budgets-alone 2 "${F[@]}" --budgets 25 --out "$tmp/s.csv"
case_ sweep-kivi-3 2 "${S[@]}" --strategies kivi-3 --out "$tmp/s.csv"
no_file sweep-refused-no-output "$tmp/s.csv"
case_ sweep-out-empty 2 "${S[@]}" --out ""
case_ sweep-out-dir 2 "${S[@]}" --out "$tmp/dir"
case_ sweep-out-unwritable "1|2" "${S[@]}" --out "$UNWRITABLE"
case_ sweep-out-no-dir "1|2" "${S[@]}" --out "$NODIR"
if [ "$(id -u)" -ne 0 ]; then # root writes into read-only directories
    case_ sweep-out-readonly-dir "1|2" "${S[@]}" --out "$tmp/ro/x.csv"
    no_file sweep-readonly-no-output "$tmp/ro/x.csv"
fi
case_ sweep-out-is-model 2 "${S[@]}" --model "$tmp/model.bin" --out "$tmp/model.bin"
same_bytes sweep-out-is-model-kept "$tmp/model.bin" "$tmp/model.copy"
cp "$tmp/model.copy" "$tmp/model.bin"
case_ sweep-out-is-model-alias 2 "${S[@]}" --model "$tmp/model.bin" \
    --out "$tmp/dir/../model.bin"
same_bytes sweep-out-is-model-alias-kept "$tmp/model.bin" "$tmp/model.copy"
cp "$tmp/model.copy" "$tmp/model.bin"

# ---- demo ----------------------------------------------------------------------
case_ demo-steps-text 2 demo --steps six
case_ demo-steps-negative 2 demo --steps -1
case_ demo-steps-past-max-len 2 demo --steps 100000
case_ demo-compare-one 2 demo --compare dynamic
case_ demo-compare-unknown 2 demo --compare dynamic,nosuch
case_ demo-compare-three 2 demo --compare none,dynamic,static
case_ demo-prompt-tokens-range 2 demo --prompt-tokens 1,999
case_ demo-prompt-tokens-text 2 demo --prompt-tokens a,b
case_ demo-prompt-tokens-empty 2 demo --prompt-tokens ""
case_ demo-prompt-and-tokens 2 demo --prompt hi --prompt-tokens 1,2
case_ demo-batch-five 2 demo --batch 5
case_ demo-slots-zero 2 demo --strategy static --slots 0
case_ demo-slots-too-few 1 demo --strategy static --slots 4 --steps 6
case_ demo-color-bad 2 demo --color sometimes
case_ demo-every-zero 2 demo --brief --every 0
case_ demo-tokenizer-garbage 2 demo --tokenizer "$tmp/garbage.tok"

# ---- compare -------------------------------------------------------------------
C=(compare)
case_ compare-no-args 2 compare
case_ compare-one-file 2 compare "$tmp/good.csv"
case_ compare-three-files 2 compare "$tmp/good.csv" "$tmp/good.csv" "$tmp/good.csv"
case_ compare-missing-file 2 compare "$tmp/good.csv" "$tmp/nonexistent.csv"
case_ compare-dir 2 compare "$tmp/good.csv" "$tmp/dir"
case_ compare-garbage 2 compare "$tmp/good.csv" "$tmp/garbage.csv"
case_ compare-empty 2 compare "$tmp/empty.csv" "$tmp/good.csv"
case_ compare-binary 2 compare "$tmp/good.csv" "$tmp/model.bin"
case_ compare-threshold-negative 2 compare "$tmp/good.csv" "$tmp/good.csv" --threshold -1
case_ compare-threshold-text 2 compare "$tmp/good.csv" "$tmp/good.csv" --threshold abc
case_ compare-threshold-huge 2 compare "$tmp/good.csv" "$tmp/good.csv" --threshold 1e9
case_ compare-threshold-missing 2 compare "$tmp/good.csv" "$tmp/good.csv" --threshold
case_ compare-format-xml 2 compare "$tmp/good.csv" "$tmp/good.csv" --format xml
case_ compare-metric-unknown 2 compare "$tmp/good.csv" "$tmp/good.csv" --metric nosuch
case_ compare-metric-text 2 compare "$tmp/good.csv" "$tmp/good.csv" --metric strategy
case_ compare-unknown-opt 2 compare "$tmp/good.csv" "$tmp/good.csv" --bogus
same_bytes compare-inputs-kept "$tmp/good.csv" "$tmp/good.copy"

# ---- kernel --------------------------------------------------------------------
K=(kernel --seq-len 16 --heads 2 --kv-heads 2 --head-dim 8 --dtype f32 --reps 1 --threads 1)
case_ kernel-unknown-opt 2 "${K[@]}" --bogus
case_ kernel-seq-len-missing 2 kernel --heads 2 --kv-heads 2 --head-dim 8 --seq-len
case_ kernel-seq-len-zero 2 "${K[@]}" --seq-len 0
case_ kernel-seq-len-text 2 "${K[@]}" --seq-len abc
case_ kernel-seq-len-list-bad 2 "${K[@]}" --seq-len 16,,32
case_ kernel-heads-zero 2 "${K[@]}" --heads 0
case_ kernel-kv-heads-not-dividing 2 "${K[@]}" --heads 8 --kv-heads 3
case_ kernel-head-dim-zero 2 "${K[@]}" --head-dim 0
case_ kernel-dtype-f8 2 "${K[@]}" --dtype f8
case_ kernel-dtype-int3 2 "${K[@]}" --dtype f16,int3
case_ kernel-layout-bad 2 "${K[@]}" --layout channel
case_ kernel-layout-missing 2 "${K[@]}" --layout
case_ kernel-dtype-empty 2 "${K[@]}" --dtype ""
case_ kernel-queries-zero 2 "${K[@]}" --queries 0
case_ kernel-queries-past-seq 2 "${K[@]}" --queries 100
case_ kernel-reps-zero 2 "${K[@]}" --reps 0
case_ kernel-group-not-dividing 2 "${K[@]}" --dtype int8 --group 3
case_ kernel-threads-zero 2 "${K[@]}" --threads 0
case_ kernel-huge-bytes 2 "${K[@]}" --seq-len 2000000000 --heads 4096 --kv-heads 4096 \
    --head-dim 4096
case_ kernel-above-memory 2 "${K[@]}" --seq-len 1000000 --heads 1024 --kv-heads 1024 \
    --head-dim 1024

# ---- roofline ------------------------------------------------------------------
case_ roofline-unknown-opt 2 roofline --bogus
case_ roofline-threads-zero 2 roofline --threads 0
case_ roofline-threads-text 2 roofline --threads many
case_ roofline-reps-zero 2 roofline --reps 0
case_ roofline-reps-missing 2 roofline --reps

# ---- export-synthetic ------------------------------------------------------------
E=(export-synthetic "${SMALL[@]:0:14}")
case_ export-no-out 2 "${E[@]}"
case_ export-out-empty 2 "${E[@]}" --out ""
case_ export-out-dir 2 "${E[@]}" --out "$tmp/dir"
case_ export-out-unwritable "1|2" "${E[@]}" --out "$UNWRITABLE"
case_ export-out-no-dir "1|2" "${E[@]}" --out "$NODIR"
if [ "$(id -u)" -ne 0 ]; then # root writes into read-only directories
    case_ export-out-readonly-dir "1|2" "${E[@]}" --out "$tmp/ro/m.bin"
    no_file export-readonly-no-output "$tmp/ro/m.bin"
fi
case_ export-same-outputs 2 "${E[@]}" --out "$tmp/x.bin" --tokenizer-out "$tmp/x.bin"
no_file export-same-outputs-no-output "$tmp/x.bin"
case_ export-tokenizer-vocab 2 "${E[@]:0:11}" --vocab 300 --out "$tmp/x.bin" \
    --tokenizer-out "$tmp/x.tok"
case_ export-strategy 2 "${E[@]}" --out "$tmp/x.bin" --strategy dynamic
case_ export-model 2 "${E[@]}" --out "$tmp/x.bin" --model "$tmp/model.bin"
case_ export-out-missing 2 "${E[@]}" --out
no_file export-refused-no-output "$tmp/x.bin"

total_fail=$((fail + xpass))
[ "$xfail" -gt 0 ] && echo "($xfail expected failures, listed as XFAIL above)"
echo "$pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
