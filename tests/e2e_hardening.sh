#!/usr/bin/env bash
# e2e_hardening.sh - the classes of failure of issue 17, end to end, each
# against the shared mechanism that now handles it (see the section heads):
#
#   2  signals and pipes    a closed pipe on stderr never kills a run
#                           (cli_io.c: SIGPIPE ignored, kv_cli_progress)
#   3  blocking opens       every named input must be a regular file, opened
#                           O_NONBLOCK (file_check.c: kv_file_open_input)
#   4  non-finite data      NaN/Inf weights or scores refused on load, naming
#                           the tensor (checkpoint.c: kv_first_nonfinite)
#   5  unchecked writes     stdout checked at exit by main (kv_cli_finish)
#   6  failed runs          a result file is replaced only by one with a row
#   7  output targets       every target judged before any work
#                           (kv_cli_check_outputs / kv_file_check_output)
#   8  temporary files      mkstemp next to the resolved target, mode kept,
#                           removed on SIGTERM (file_commit.c)
#   9  real configuration   each strategy's parameters checked against the
#                           model it runs on, its cache bytes (window,
#                           residual, slots) in the memory estimate
#                           (cli_opts.c: kv_cli_check_strategy, on the
#                           strategies' own parameter tables and bytes_for)
#  10  messages             echoed values quoted (kv_cli_q), BOM skipped
#  11  bounded work         the demo's estimated work refused up front
#
# Every refusal: the exit status named, one stderr line starting "kvlab",
# no signal death, no sanitizer report, within CASE_TIMEOUT seconds. Run it
# with KVLAB=build/san/kvlab too (make test SANITIZE=1 does).
set -u
KVLAB=${KVLAB:-build/kvlab}
KVLAB=$(cd "$(dirname "$KVLAB")" && pwd)/$(basename "$KVLAB") # cases cd elsewhere
CASE_TIMEOUT=${CASE_TIMEOUT:-60}
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
check() { # check DESCRIPTION COMMAND...
    local what=$1
    shift
    if "$@"; then ok; else bad "$what"; fi
}

# run WANT ARGS...: kvlab ARGS with stdin from /dev/null; $rc, $tmp/out, $tmp/err.
# WANT is 0, 1, 2 or "1|2"; a failure must print exactly one line.
run() {
    local want=$1
    shift
    timeout "$CASE_TIMEOUT" "$KVLAB" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
    rc=$?
    local why=""
    if [ "$rc" -eq 124 ]; then
        why="no exit within ${CASE_TIMEOUT}s"
    elif [ "$rc" -ge 128 ]; then
        why="killed by signal $((rc - 128))"
    elif grep -qE 'Sanitizer|runtime error:' "$tmp/err"; then
        why="sanitizer report"
    elif ! printf '%s\n' "$want" | tr '|' '\n' | grep -qx "$rc"; then
        why="exit $rc, expected $want"
    elif [ "$want" != 0 ] && [ "$(awk 'END { print NR }' "$tmp/err")" != 1 ]; then
        why="$(awk 'END { print NR }' "$tmp/err") lines on stderr, expected 1"
    elif [ "$want" != 0 ] && ! head -n 1 "$tmp/err" | grep -q '^kvlab'; then
        why="stderr does not start with 'kvlab'"
    fi
    if [ -n "$why" ]; then
        bad "kvlab $*: $why; stderr: $(head -c 300 "$tmp/err")"
        return 1
    fi
    ok
}
# said TEXT: the last run's stderr contains TEXT
said() {
    if grep -qF -- "$1" "$tmp/err"; then ok; else bad "expected '$1' on stderr, got: $(head -c 300 "$tmp/err")"; fi
}

MODEL=(--layers 1 --dim 16 --heads 2 --kv-heads 2 --hidden 24 --vocab 256 --max-len 64)
# (no --group: a parameter flag that none of the run's strategies takes is
# refused, and neither dynamic nor static has groups); TINY0: without
# --strategies, for the cases that name their own (an option given twice is
# refused)
TINY0=("${MODEL[@]}" --seq-lens 16,32 --reps 1 --warmup 0 --threads 1 --no-roofline)
TINY=("${TINY0[@]}" --strategies dynamic,static)
"$KVLAB" export-synthetic --out "$tmp/m.bin" "${MODEL[@]}" --tokenizer-out "$tmp/tok.bin" \
    >/dev/null || { echo "FAIL: cannot export a model"; exit 1; }
"$KVLAB" sweep "${TINY[@]}" --quiet --out "$tmp/good.csv" ||
    { echo "FAIL: cannot run a tiny sweep"; exit 1; }
rows() { grep -v '^#' "$1" | tail -n +2 | grep -c .; }

# ---- 2: signals and pipes ------------------------------------------------
echo "class 2: a closed pipe on stderr or stdout"
# A pipe whose reader is gone, deterministically: open a FIFO read-write
# (fd 8), then write-only (fd 9), then close the only reader.
mkfifo "$tmp/pipe"
exec 8<>"$tmp/pipe" 9>"$tmp/pipe" 8<&-
# progress (not --quiet) into the dead pipe: every write is EPIPE
timeout "$CASE_TIMEOUT" "$KVLAB" sweep "${TINY[@]}" --out "$tmp/p.csv" 2>&9 >&9
rc=$?
check "sweep with its progress on a closed pipe exits 0 (rc=$rc; SIGPIPE is 141)" test "$rc" = 0
check "... and writes every row" test "$(rows "$tmp/p.csv" 2>/dev/null)" = 4
timeout "$CASE_TIMEOUT" "$KVLAB" sweep "${TINY[@]}" --out "$tmp/p2.csv" 2>/dev/full
rc=$?
check "sweep with its progress on a full device exits 0 (rc=$rc)" test "$rc" = 0
check "... and writes every row" test "$(rows "$tmp/p2.csv" 2>/dev/null)" = 4
# the head -1 of the report: 2>&1 | head -1 (a race, the FIFO case above is not)
timeout "$CASE_TIMEOUT" "$KVLAB" sweep "${TINY[@]}" --out "$tmp/p3.csv" 2>&1 | head -1 >/dev/null
rc=${PIPESTATUS[0]}
check "sweep 2>&1 | head -1 exits 0 (rc=$rc)" test "$rc" = 0
check "... and writes every row" test "$(rows "$tmp/p3.csv" 2>/dev/null)" = 4
# stdout into the dead pipe: a failed write (exit 1, one line), not a signal
timeout "$CASE_TIMEOUT" "$KVLAB" demo --steps 2 >&9 2>"$tmp/err"
rc=$?
check "demo into a closed pipe exits 1, not by SIGPIPE (rc=$rc)" test "$rc" = 1
said "cannot write standard output"
exec 9>&-

# ---- 3: blocking opens ---------------------------------------------------
echo "class 3: inputs that are not regular files"
mkfifo "$tmp/fifo"
ln -s "$tmp/fifo" "$tmp/fifo.link"
G=(generate --strategy dynamic --new-tokens 2 --prompt-len 2 --threads 1)
for input in "$tmp/fifo" "$tmp/fifo.link" /dev/zero; do
    run 2 "${G[@]}" --model "$input" && said "not a regular file"
    run 2 demo --model "$input"
    run 2 sweep "${TINY[@]}" --model "$input" --out "$tmp/s.csv"
    run 2 generate --strategy dynamic --new-tokens 2 --threads 1 "${MODEL[@]}" --prompt hi \
        --tokenizer "$input" && said "not a regular file"
    run 2 demo --tokenizer "$input"
    run 2 compare "$input" "$tmp/good.csv" && said "not a regular file"
    run 2 compare "$tmp/good.csv" "$input"
done
check "the FIFO is still a FIFO" test -p "$tmp/fifo"
# reading a pipe is the point of '-': compare takes one file from stdin
timeout "$CASE_TIMEOUT" "$KVLAB" compare - "$tmp/good.csv" <"$tmp/good.csv" >"$tmp/out" 2>"$tmp/err"
rc=$?
check "compare - FILE reads standard input (rc=$rc: $(head -c 200 "$tmp/err"))" test "$rc" = 0
cat "$tmp/good.csv" | timeout "$CASE_TIMEOUT" "$KVLAB" compare "$tmp/good.csv" - >/dev/null 2>&1
check "compare FILE - reads a pipe" test $? = 0
run 2 compare - -

# ---- 4: non-finite data --------------------------------------------------
echo "class 4: NaN and infinity in loaded files"
# patch FILE FLOAT_INDEX BYTES: four bytes at 28 + 4 * FLOAT_INDEX
patch() { printf "$3" | dd of="$1" bs=1 seek=$((28 + 4 * $2)) conv=notrunc 2>/dev/null; }
# MODEL's file: token_embedding (256 x 16) first, then rms_att (16), wq (16 x 16)
cp "$tmp/m.bin" "$tmp/nan.bin" && patch "$tmp/nan.bin" 5 '\x00\x00\xc0\x7f'
cp "$tmp/m.bin" "$tmp/inf.bin" && patch "$tmp/inf.bin" $((4096 + 16 + 7)) '\x00\x00\x80\x7f'
cp "$tmp/m.bin" "$tmp/ninf.bin" && patch "$tmp/ninf.bin" $((4096 + 3)) '\x00\x00\x80\xff'
run 2 "${G[@]}" --model "$tmp/nan.bin" && said "tensor token_embedding holds NaN at index 5"
run 2 demo --model "$tmp/inf.bin" && said "tensor wq holds +Inf at index 7"
run 2 demo --model "$tmp/ninf.bin" --compare none,dynamic && said "tensor rms_att holds -Inf"
run 2 sweep "${TINY[@]}" --model "$tmp/nan.bin" --out "$tmp/s.csv"
check "no output after a refused model" test ! -e "$tmp/s.csv"
# a tokenizer score (the float before each piece's length)
cp "$tmp/tok.bin" "$tmp/nan.tok"
printf '\x00\x00\xc0\x7f' | dd of="$tmp/nan.tok" bs=1 seek=$((4 + 9 * 10)) conv=notrunc 2>/dev/null
run 2 demo --model "$tmp/m.bin" --tokenizer "$tmp/nan.tok" && said "score of token 10"

# ---- 5: unchecked writes -------------------------------------------------
echo "class 5: stdout that cannot be written"
K=(kernel --seq-len 16 --heads 2 --kv-heads 2 --head-dim 8 --reps 1 --threads 1 --no-ref)
while IFS= read -r line; do
    # shellcheck disable=SC2206
    args=($line)
    timeout "$CASE_TIMEOUT" "$KVLAB" "${args[@]}" >/dev/full 2>"$tmp/err" </dev/null
    rc=$?
    # (kernel and roofline print their context on stderr first: that stays)
    if [ "$rc" != 1 ] || [ "$(grep -c '^kvlab: cannot write standard output' "$tmp/err")" != 1 ] ||
        [ "$(tail -n 1 "$tmp/err" | grep -c '^kvlab: cannot write standard output')" != 1 ]; then
        bad "kvlab $line >/dev/full: exit $rc, stderr: $(head -c 200 "$tmp/err")"
    else
        ok
    fi
done <<EOF
--help
strategies
strategies --help
generate --help
generate --strategy dynamic --new-tokens 2 --prompt-len 2 --threads 1 ${MODEL[*]}
demo --steps 1
demo --compare none,dynamic --steps 1
demo --help
sweep --help
kernel --help
${K[*]}
${K[*]} --csv
roofline --help
roofline --csv --reps 1 --threads 1
compare --help
merge --help
export-synthetic --help
export-synthetic --out $tmp/e.bin ${MODEL[*]}
EOF
# a command whose stdout was closed by the caller and that prints nothing
"$KVLAB" sweep "${TINY[@]}" --quiet --out "$tmp/c.csv" >&-
check "sweep with stdout closed (it prints nothing there) exits 0" test $? = 0
"$KVLAB" strategies >&- 2>/dev/null
check "strategies with stdout closed exits 1" test $? = 1

# ---- 6: a failed run never replaces earlier results ------------------------
echo "class 6: failed runs keep the previous file"
cp "$tmp/good.csv" "$tmp/prev.csv"
# nothing to measure: bad input, decided before the run
run 2 sweep "${TINY0[@]}" --strategies none --none-max 8 --out "$tmp/prev.csv" && said "no row"
check "a sweep without rows left the previous file" cmp -s "$tmp/good.csv" "$tmp/prev.csv"
# (a setup that fails in process, every allocation in turn: check_sweep.c,
# sweep_failed_run_keeps_previous_file)
# SIGTERM while the roofline is measured (before any row)
"$KVLAB" sweep "${MODEL[@]}" --seq-lens 16 --reps 1 --warmup 0 --threads 1 \
    --strategies dynamic --out "$tmp/prev.csv" 2>"$tmp/err" &
pid=$!
for _ in $(seq 1 400); do
    grep -q 'measuring the roofline' "$tmp/err" 2>/dev/null && break
    sleep 0.02
done
kill -TERM "$pid" 2>/dev/null
wait "$pid"
rc=$?
check "SIGTERM during the roofline exits 143 (rc=$rc)" test "$rc" = 143
check "... and leaves the previous file" cmp -s "$tmp/good.csv" "$tmp/prev.csv"
check "... and no temporary file" test -z "$(ls "$tmp" | grep '\.tmp\.')"
# export-synthetic interrupted mid-write: no temporary file left behind
"$KVLAB" export-synthetic --out "$tmp/big.bin" --layers 24 --dim 1024 --heads 8 --kv-heads 8 \
    --hidden 2048 --vocab 256 --max-len 64 >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 400); do
    ls "$tmp" | grep -q '^big\.bin\.tmp\.' && break
    sleep 0.01
done
kill -TERM "$pid" 2>/dev/null
wait "$pid"
rc=$?
check "export-synthetic killed by SIGTERM exits 143 (rc=$rc)" test "$rc" = 143
check "... and leaves no temporary file ($(ls "$tmp" | grep '^big' | tr '\n' ' '))" \
    test -z "$(ls "$tmp" | grep '^big')"

# ---- 7: output targets, decided up front -----------------------------------
echo "class 7: output targets"
# refused before anything is measured: without --quiet a sweep that started
# would print its plan; the refusal is the only line
S=(sweep "${TINY[@]}")
# Never a system device as a target: a regression would replace it for
# everyone on the machine. A private character device (root can make one:
# a copy of /dev/null's numbers in $tmp) and FIFOs stand in for them.
targets=("$tmp/fifo" "$tmp/fifo.link2")
ln -s "$tmp/fifo" "$tmp/fifo.link2"
if mknod "$tmp/null" c 1 3 2>/dev/null; then
    ln -s "$tmp/null" "$tmp/null.link"
    targets+=("$tmp/null" "$tmp/null.link")
fi
for target in "${targets[@]}"; do
    run 2 "${S[@]}" --out "$target" && said "not a regular file"
    run 2 export-synthetic "${MODEL[@]}" --out "$target"
    run 2 export-synthetic "${MODEL[@]}" --out "$tmp/x.bin" --tokenizer-out "$target"
    run 2 merge "$target" "$tmp/good.csv"
done
if [ -e "$tmp/null" ]; then
    check "the character device is still one" test -c "$tmp/null"
    check "the link to it is still a link" test -L "$tmp/null.link"
fi
check "the FIFO is still a FIFO" test -p "$tmp/fifo"
check "no refused export left a file" test ! -e "$tmp/x.bin"
# a read-only file: refused (even for root), content and mode unchanged
cp "$tmp/good.csv" "$tmp/ro.csv" && chmod 444 "$tmp/ro.csv"
run 2 "${S[@]}" --out "$tmp/ro.csv" && said "read-only"
run 2 export-synthetic "${MODEL[@]}" --out "$tmp/ro.csv"
run 2 merge "$tmp/ro.csv" "$tmp/good.csv"
check "the read-only file is unchanged" cmp -s "$tmp/good.csv" "$tmp/ro.csv"
check "... and still mode 444" test "$(stat -c %a "$tmp/ro.csv")" = 444
# names: too long for the filesystem (refused), at the limit (written)
long=$(printf 'n%.0s' $(seq 1 256))
run 2 "${S[@]}" --out "$tmp/$long" && said "longer than"
limit=${long:1}
run 0 "${S[@]}" --quiet --out "$tmp/$limit"
check "a 255-byte name is written" test "$(rows "$tmp/$limit" 2>/dev/null)" = 4
rm -f "$tmp/$limit"
# a directory name, with or without a trailing slash
run 2 "${S[@]}" --out "$tmp/newdir/" && said "ends in '/'"
check "no directory made for 'newdir/'" test ! -e "$tmp/newdir"
run 2 "${S[@]}" --out "$tmp"
# a refused output target is bad input (2), whatever the reason
run 2 "${S[@]}" --out "$tmp/no/such/dir/x.csv"
run 2 export-synthetic "${MODEL[@]}" --out "$tmp/nodir/x.bin" && said "does not exist"
# the same file twice, by another spelling, or as an input
run 2 export-synthetic "${MODEL[@]}" --out "$tmp/a.bin" --tokenizer-out "$tmp/./a.bin" &&
    said "same file"
check "nothing written for two names of one file" test ! -e "$tmp/a.bin"
( cd "$tmp" && "$KVLAB" export-synthetic "${MODEL[@]}" --out a.bin --tokenizer-out ./a.bin \
    >/dev/null 2>&1 )
check "export --out a.bin --tokenizer-out ./a.bin exits 2" test $? = 2
cp "$tmp/m.bin" "$tmp/in.bin"
ln -s "$tmp/in.bin" "$tmp/in.link"
ln "$tmp/in.bin" "$tmp/in.hard"
mkdir "$tmp/sub"
for spelling in "$tmp/in.link" "$tmp/in.hard" "$tmp/sub/../in.bin"; do
    run 2 "${S[@]}" --model "$tmp/in.bin" --out "$spelling"
done
cp "$tmp/good.csv" "$tmp/in.csv"
run 2 merge "$tmp/sub/../in.csv" "$tmp/in.csv" && said "same file"
check "the merge input is unchanged" cmp -s "$tmp/good.csv" "$tmp/in.csv"
check "the --model input is unchanged" cmp -s "$tmp/m.bin" "$tmp/in.bin"

# ---- 8: temporary files ------------------------------------------------------
echo "class 8: temporary files"
# a link planted where the old writer put its temporary (OUT.tmp.PID, the
# PID being that of the shell that execs kvlab) is never followed
echo precious >"$tmp/victim"
sh -c 'ln -s "$1/victim" "$1/planted.csv.tmp.$$"; shift; exec "$@"' sh "$tmp" \
    "$KVLAB" "${S[@]}" --quiet --out "$tmp/planted.csv"
check "sweep with a planted link exits 0" test $? = 0
check "the file the planted link names is untouched" test "$(cat "$tmp/victim")" = precious
check "the results went to --out" test "$(rows "$tmp/planted.csv" 2>/dev/null)" = 4
rm -f "$tmp"/planted.csv.tmp.*
# the replaced file keeps its mode; a link is written through, not replaced
cp "$tmp/good.csv" "$tmp/mode.csv" && chmod 640 "$tmp/mode.csv"
run 0 "${S[@]}" --quiet --out "$tmp/mode.csv"
check "a replaced file keeps mode 640 (got $(stat -c %a "$tmp/mode.csv"))" \
    test "$(stat -c %a "$tmp/mode.csv")" = 640
ln -s "$tmp/mode.csv" "$tmp/mode.link"
run 0 "${S[@]}" --quiet --out "$tmp/mode.link"
check "a link target is written through, the link kept" test -L "$tmp/mode.link"
run 0 export-synthetic "${MODEL[@]}" --out "$tmp/mode.link"
check "... also by export-synthetic" test -L "$tmp/mode.link"
check "... and the file it names holds the checkpoint" cmp -s "$tmp/m.bin" "$tmp/mode.csv"
check "no temporary file is left anywhere" test -z "$(ls -a "$tmp" | grep -e '\.tmp\.' -e probe)"

# ---- 9: validation against the real configuration ---------------------------
echo "class 9: each strategy against the model it runs on"
# a strategy's own parameters matter only to it: --group (default 32) is not
# checked against head_dim 16 when no quantized strategy runs
run 0 sweep --dim 32 --heads 2 --kv-heads 2 --layers 1 --hidden 32 --vocab 64 --seq-lens 16 \
    --reps 1 --warmup 0 --threads 1 --no-roofline --quiet --strategies dynamic --out "$tmp/d32.csv"
run 0 generate --dim 32 --heads 2 --kv-heads 2 --layers 1 --hidden 32 --vocab 64 --max-len 32 \
    --threads 1 --strategy sliding --new-tokens 2 --prompt-len 2
# ... and is checked against the checkpoint's head_dim (8), not the options'
run 2 sweep --model "$tmp/m.bin" --seq-lens 16 --reps 1 --warmup 0 --threads 1 --no-roofline \
    --strategies dynamic,quantized-int8 --out "$tmp/s.csv" && said "head_dim (8)"
run 2 generate --model "$tmp/m.bin" --strategy quantized --new-tokens 2 --prompt-len 2 \
    --threads 1 && said "--group (32) must divide head_dim (8)"
run 2 demo --model "$tmp/m.bin" --strategy quantized --group 16 && said "head_dim (8)"
run 0 demo --model "$tmp/m.bin" --strategy quantized --group 8 --steps 1
# every size-bearing parameter is in the memory estimate: refused up front,
# naming the option, the previous results kept
cp "$tmp/good.csv" "$tmp/prev.csv"
run 2 sweep "${TINY0[@]}" --strategies sliding --window 1073741824 --out "$tmp/prev.csv" &&
    said "--window 1073741824"
run 2 sweep "${TINY0[@]}" --strategies quantized-int4 --group 8 --residual 1073741824 \
    --out "$tmp/prev.csv" && said "--residual 1073741824"
check "the refused sweeps left the previous file" cmp -s "$tmp/good.csv" "$tmp/prev.csv"
run 2 generate "${MODEL[@]}" --strategy sliding --window 1073741824 --new-tokens 2 \
    --prompt-len 2 --threads 1 && said "--window 1073741824"
run 2 demo --strategy sliding --window 1073741824 && said "--window 1073741824"
run 2 demo --compare dynamic,quantized --residual 1073741824 && said "--residual"
# --slots sizes the static cache alone
run 2 demo --strategy dynamic --slots 3 --steps 6 && said "--slots"
run 0 demo --compare dynamic,static --slots 20 --steps 4
grep -q '^cache  static: .*(20 slots)$' "$tmp/out" && ok || bad "static did not get --slots 20"
grep '^cache  dynamic:' "$tmp/out" | grep -q 'slots' && bad "dynamic got --slots" || ok
run 1 demo --compare static,dynamic --slots 10 --steps 4 && said "step 3 with static: cache is full"

# ---- 10: messages ------------------------------------------------------------
echo "class 10: messages"
# a newline in any option's value stays inside the one line: every option
# of every command, read from its --help (an unknown option after it stops
# a value that is accepted, such as a file name, before any run)
for cmd in generate sweep demo kernel roofline compare merge export-synthetic sharing; do
    opts=$("$KVLAB" "$cmd" --help | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u)
    for opt in $opts; do
        [ "$opt" = --help ] && continue
        timeout "$CASE_TIMEOUT" "$KVLAB" "$cmd" "$opt" $'x\nkvlab: forged line' --zz-unknown \
            >/dev/null 2>"$tmp/err" </dev/null
        rc=$?
        if grep -q '^kvlab: forged line' "$tmp/err" || [ "$rc" -ge 124 ]; then
            bad "$cmd $opt 'x<newline>...': exit $rc, stderr: $(head -c 200 "$tmp/err")"
        else
            ok
        fi
    done
done
# a command that ran instead of refusing would have written the value as a file
for d in . "$tmp"; do
    [ -e "$d/"$'x\nkvlab: forged line' ] && bad "a command wrote a file named by the forged value in $d" || ok
done
run 2 demo --strategy $'dyn\namic' && said 'dyn\namic'
run 2 compare "$tmp/good.csv" $'new\nline.csv' && said 'new\nline.csv'
run 2 "${S[@]}" --out $'bad\nname/' && said 'bad\nname/'
run 2 demo --model $'no\nsuch.bin' && said 'no\nsuch.bin'
run 2 export-synthetic "${MODEL[@]}" --out "$tmp/y.bin" --tokenizer-out $'t\nk/' && said 't\nk/'
# a CSV that starts with a UTF-8 byte-order mark
printf '\xef\xbb\xbf' | cat - "$tmp/good.csv" >"$tmp/bom.csv"
run 0 compare "$tmp/good.csv" "$tmp/bom.csv"
grep -q 'compared' "$tmp/out" && ok || bad "compare of a BOM file printed no summary"
# too many entries in a list get the list's message
many=$(printf 'f32,%.0s' $(seq 1 40))f32
run 2 "${K[@]}" --dtype "$many" && said "--dtype expects at most 32 values"
run 2 "${K[@]}" --dtype f32,f8 && said "--dtype expects f32, int8, int4, f16, bf16 or int2"
# an accepted option that does nothing is bad input
# (sweep does not take --tokenizer at all: random token ids)
run 2 "${S[@]}" --tokenizer "$tmp/tok.bin" --out "$tmp/s.csv" && said "unknown option '--tokenizer'"
# (an option a command never uses is not one of its options at all)
run 2 export-synthetic "${MODEL[@]}" --out "$tmp/x.bin" --window 8 && said "unknown option '--window'"
run 2 demo --threads 2 && said "unknown option '--threads'"
run 2 kernel --hot --cold-bytes 100 && said "--cold-bytes has no effect here"
run 2 demo --beams 2 --every 2 && said "--every has no effect here"

# ---- 11: work bounded by the input -------------------------------------------
echo "class 11: work bounded by the input"
run 2 demo --steps 1048576 --max-len 2000000 && said "--steps 1048576"
run 2 demo --steps 100000 --max-len 200000 --compare dynamic,static
run 2 demo --steps 2000 --max-len 4096 --strategy dynamic --brief
run 0 demo --steps 200 --max-len 256 --strategy dynamic --brief

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
