#!/usr/bin/env bash
# e2e_labels.sh - the one text rule (strategies/strategy.h, kv_label_ok) end
# to end: every label is letters, digits and ._+-:*=@% only.
#   - `kvlab sweep --frontier LIST` refuses a list line whose label, strategy
#     or parameters break it when the list is read - before the roofline,
#     the model or any row - in one line naming the file and the line, exit
#     2, writing nothing (a comma once failed only at the write, after the
#     whole sweep; a quote or an escape byte was written into the CSV, a
#     `;echo>/tmp/pw` label accepted);
#   - the real bench/data/frontier.list passes and its labels reach the CSV;
#   - `kvlab compare` and `kvlab merge` of a CSV whose label holds an escape
#     byte, a quote, a space or a shell character give one clean line (no
#     control byte echoed), exit 2, and no output.
# Never asserts on wall time. Usage: KVLAB=build/kvlab bash tests/e2e_labels.sh
set -u
KVLAB=${KVLAB:-build/kvlab}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/kvlab_e2e_labels.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
check() { # check DESCRIPTION COMMAND...
    local what=$1; shift
    if "$@"; then ok; else bad "$what"; fi
}
# expect_clean RC DESCRIPTION PATTERN COMMAND...: exit status RC, exactly one
# line on stderr matching PATTERN, printable ASCII only, nothing on stdout
expect_clean() {
    local want=$1 what=$2 pat=$3; shift 3
    "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    if [ "$rc" != "$want" ]; then bad "$what: exit $rc, want $want ($(head -c 300 "$TMP/err" | cat -v))"; return; fi
    if [ "$(wc -l <"$TMP/err")" != 1 ]; then bad "$what: stderr is not one line: $(cat -v "$TMP/err")"; return; fi
    if LC_ALL=C grep -q '[^ -~]' "$TMP/err"; then bad "$what: a byte outside printable ASCII: $(cat -v "$TMP/err")"; return; fi
    if ! grep -q -- "$pat" "$TMP/err"; then bad "$what: '$pat' not in: $(cat -v "$TMP/err")"; return; fi
    if [ -s "$TMP/out" ]; then bad "$what: wrote to stdout: $(head -c 200 "$TMP/out" | cat -v)"; return; fi
    ok
}

SHAPE="--dim 64 --heads 4 --kv-heads 2 --hidden 128 --vocab 64 --threads 1"
MODEL="--layers 2 $SHAPE"
FRONT="--budgets 50 --seq-lens 64 --reps 3 --warmup 1"
ESC=$(printf '\033')

# ---------------------------------------------------------------- frontier lists
n=0
while IFS= read -r line; do
    n=$((n + 1))
    printf '# a list\nint8 quantized-int8 -\n%s\n' "$line" >"$TMP/list-$n"
    rm -f "$TMP/f.csv"
    # no --no-roofline, no --quiet: the refusal comes before the roofline
    # shellcheck disable=SC2086
    expect_clean 2 "frontier line '$(printf '%s' "$line" | cat -v)'" "list-$n.*line 3" \
        "$KVLAB" sweep $MODEL --group 8 --residual 8 --frontier "$TMP/list-$n" $FRONT \
        --out "$TMP/f.csv"
    check "... writes no CSV" test ! -e "$TMP/f.csv"
done <<EOF
;echo>/tmp/pw quantized-int4 -
a,b quantized-int4 -
q"x quantized-int4 -
e${ESC}[31mx quantized-int4 -
back\\slash quantized-int4 -
\$(id) quantized-int4 -
ok quantized bits=4;\$x=1
ok \`id\` -
EOF

# the project's own list passes, and its labels reach the CSV as they are
# (4 layers: the list's hybrid is a 3:1 pattern)
# shellcheck disable=SC2086
"$KVLAB" sweep --layers 4 $SHAPE --group 8 --residual 8 --frontier "$ROOT/bench/data/frontier.list" \
    $FRONT --no-roofline --quiet --out "$TMP/frontier.csv" 2>"$TMP/err"
check "bench/data/frontier.list sweeps ($(head -c 300 "$TMP/err"))" test -s "$TMP/frontier.csv"
for l in 'hybrid-3:1@50%' 'sinks-reidx@50%' kivi-2 int8; do
    check "frontier label $l in the CSV" grep -q ",$l," "$TMP/frontier.csv"
done

# ---------------------------------------------------------------- readers
# shellcheck disable=SC2086
"$KVLAB" sweep $MODEL --strategies dynamic,sliding --window 32 --seq-lens 64,128 --reps 3 \
    --warmup 1 --no-roofline --quiet --out "$TMP/good.csv" 2>"$TMP/err"
check "a plain sweep runs ($(head -c 300 "$TMP/err"))" test -s "$TMP/good.csv"
expect_clean_ok() { "$KVLAB" compare "$TMP/good.csv" "$TMP/good.csv" >/dev/null 2>&1; }
check "compare of the plain sweep exits 0" expect_clean_ok
# the label cell of the sliding rows (and the # strategies= list) made hostile
lab=$(grep -v '^#' "$TMP/good.csv" | head -1 | tr ',' '\n' | grep -nx label | cut -d: -f1)
k=0
# shellcheck disable=SC2016 # the '$' and backtick are the point
for hostile in "sl${ESC}[2Jide" 'sl"ide' 'sl ide' 'sl;ide' 'sl$ide' 'sl`ide' 'sl\ide'; do
    k=$((k + 1))
    # (through the environment: -v would process the backslash, each awk
    # its own way; gawk reads 'sl\ide' as 'slide')
    HOSTILE=$hostile awk -F, -v OFS=, -v c="$lab" '
        BEGIN { h = ENVIRON["HOSTILE"] }
        /^# strategies=/ { print "# strategies=dynamic," h; next }
        /^#/ { print; next }
        !s { s = 1; print; next }
        $c == "sliding" { $c = h } { print }' "$TMP/good.csv" >"$TMP/bad-$k.csv"
    # the same label in the rows only (the metadata as it was)
    HOSTILE=$hostile awk -F, -v OFS=, -v c="$lab" '
        BEGIN { h = ENVIRON["HOSTILE"] }
        /^#/ { print; next }
        !s { s = 1; print; next }
        $c == "sliding" { $c = h } { print }' "$TMP/good.csv" >"$TMP/badrow-$k.csv"
    what="label '$(printf '%s' "$hostile" | cat -v)'"
    for f in bad badrow; do
        expect_clean 2 "compare, $f $what" "$f-$k.csv:[0-9]*: " \
            "$KVLAB" compare "$TMP/good.csv" "$TMP/$f-$k.csv"
        expect_clean 2 "compare, $f $what as the base" "$f-$k.csv:[0-9]*: " \
            "$KVLAB" compare "$TMP/$f-$k.csv" "$TMP/good.csv"
        rm -f "$TMP/m.csv"
        expect_clean 2 "merge, $f $what" "$f-$k.csv:[0-9]*: " \
            "$KVLAB" merge "$TMP/m.csv" "$TMP/$f-$k.csv"
        check "... merge writes nothing" test ! -e "$TMP/m.csv"
    done
done

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
