#!/usr/bin/env bash
# e2e_test_scripts.sh - a lint of the shell scripts themselves.
# 1. No command may read $? after a command substitution on the same
# command line. `check "exits 0 ($(head err))" test $? = 0` reads head's
# status, not the program's, so it passes whatever the program did: bash
# sets $? from each $(...) as it expands the words, left to right. Capture
# the status first (`rc=$?; check "... ($(head err))" test "$rc" = 0`).
# 2. No awk variable may bear a name gawk keeps for itself. Debian's awk
# is mawk until gawk is installed, then gawk: `-v load=...` ran under mawk
# and made gawk exit with "cannot use gawk builtin `load' as variable
# name" (make bench-load), and a parameter named RT in step_table.awk with
# "cannot use special variable `RT' as a function parameter" (make bench,
# make reference-doc). Checked: the names set with -v in every script, and
# every name in the .awk files outside comments and strings.
# usage: e2e_test_scripts.sh [FILE...] (default: tests/*.sh but this one,
#        bench/**/*.sh, .ci/run)
set -u
cd "$(dirname "$0")/.."
pass=0 fail=0
check() { # check DESCRIPTION COMMAND...
    local what=$1
    shift
    if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $what"; fi
}

# late_status FILE...: FILE:LINE: TEXT of each logical line (continuations
# joined) where $? comes after a $( (comments and `$?` inside quotes alike:
# the expansion order is the same)
late_status() {
    awk '
        FNR == 1 { buf = ""; start = 0 }
        /^[ \t]*#/ && buf == "" { next }
        { if (buf == "") start = FNR
          line = $0
          if (sub(/\\$/, "", line)) { buf = buf line " "; next }
          buf = buf line
          s = index(buf, "$("); q = index(buf, "$?")
          if (s > 0 && q > s) printf "%s:%d: %s\n", FILENAME, start, substr(buf, 1, 160)
          buf = "" }' "$@"
}

# gawk's reserved words and built-in functions (gawk 5) that POSIX awk
# leaves free
GAWK_NAMES='and|asort|asorti|bindtextdomain|compl|dcgettext|dcngettext|gensub|isarray|lshift|mktime|or|patsplit|rshift|strftime|strtonum|systime|typeof|xor|func|switch|case|default|BEGINFILE|ENDFILE|nextfile|load|include|namespace'

# and its special variables
GAWK_VARS='ARGIND|BINMODE|ERRNO|FIELDWIDTHS|FPAT|FUNCTAB|IGNORECASE|LINT|PREC|PROCINFO|ROUNDMODE|RT|SYMTAB|TEXTDOMAIN'

# gawk_vars FILE...: FILE:LINE: TEXT of each line that sets such a name
# with -v
gawk_vars() {
    grep -nHE -- "-v[ ]+($GAWK_NAMES|$GAWK_VARS)=" "$@"
}

# gawk_names AWKFILE...: FILE:LINE: NAME for each such name in awk code
# (comments, strings and regular expressions in slashes taken out first;
# a name gawk means as a function is only ever a variable in POSIX awk)
gawk_names() {
    awk -v re="^($GAWK_NAMES|$GAWK_VARS)\$" '
        { line = $0
          gsub(/"([^"\\]|\\.)*"/, "", line)
          sub(/#.*/, "", line)
          gsub(/\/([^\/\\]|\\.)+\//, "", line)
          n = split(line, w, /[^A-Za-z0-9_]+/)
          for (i = 1; i <= n; i++)
              if (w[i] ~ re) printf "%s:%d: %s\n", FILENAME, FNR, w[i] }' "$@"
}

if [ $# -gt 0 ]; then
    files=("$@")
else
    shopt -s globstar nullglob
    files=()
    for f in tests/*.sh bench/**/*.sh .ci/run; do
        [ "$f" = tests/e2e_test_scripts.sh ] || files+=("$f") # (its fixtures below)
    done
fi

# the lint sees the mistake, and not its fix
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/bad.sh" <<'BAD'
false 2>"$TMP/err"
check "exits 0 ($(head -c 80 "$TMP/err"))" test $? = 0
check "a continued line ($(cat x))" \
    test $? = 2
BAD
cat >"$tmp/good.sh" <<'GOOD'
false 2>"$TMP/err"
rc=$?; check "exits 0 ($(head -c 80 "$TMP/err"))" test "$rc" = 0
# a comment that names $(cmd) and $? is no command
GOOD
check "the lint finds both late reads of \$? in a bad script" test "$(late_status "$tmp/bad.sh" | wc -l)" = 2
check "the lint passes the captured status" test -z "$(late_status "$tmp/good.sh")"
cat >"$tmp/bad.awk.sh" <<'BAD'
awk -F, -v load="$load" '{ print load }' "$f"
awk -v x=1 -v and=2 'BEGIN { print x }'
BAD
cat >"$tmp/good.awk.sh" <<'GOOD'
awk -F, -v ld="$load" -v loaded=1 -v band=2 '{ print ld }' "$f"
GOOD
check "the lint finds both gawk names set with -v" test "$(gawk_vars "$tmp/bad.awk.sh" | wc -l)" = 2
check "the lint passes names gawk leaves free" test -z "$(gawk_vars "$tmp/good.awk.sh")"
cat >"$tmp/bad.awk" <<'BAD'
function f(x,   RT) { RT = x; return RT } # a comment may say RT
{ and = 1; print "and RT" }
BAD
cat >"$tmp/good.awk" <<'GOOD'
# RT, and, or in a comment
function f(x,   rt) { rt = x; return rt } { print "and or RT"; if ($0 ~ /RT/) n++ }
GOOD
check "the lint finds the gawk names in a bad awk file" \
    test "$(gawk_names "$tmp/bad.awk" | tr '\n' ' ')" = "$tmp/bad.awk:1: RT $tmp/bad.awk:1: RT $tmp/bad.awk:1: RT $tmp/bad.awk:2: and "
check "the lint passes them in comments, strings and patterns" test -z "$(gawk_names "$tmp/good.awk")"
if command -v gawk >/dev/null; then # where gawk is there, the mistake is real
    check "gawk refuses the bad fixture's name" \
        test "$(gawk -v load=1 'BEGIN { print "ran" }' 2>/dev/null)" != ran
fi

found=$(late_status "${files[@]}")
check "no script reads \$? after a \$(...) on the same line${found:+:
$found}" test -z "$found"
found=$(gawk_vars "${files[@]}")
check "no script sets an awk variable gawk keeps for itself${found:+:
$found}" test -z "$found"
mapfile -t awks < <(git ls-files '*.awk' 2>/dev/null || ls bench/scripts/*.awk tests/*.awk)
found=$(gawk_names "${awks[@]}")
check "no .awk file uses a name gawk keeps for itself${found:+:
$found}" test -z "$found"
echo "e2e_test_scripts: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
