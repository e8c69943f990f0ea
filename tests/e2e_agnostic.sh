#!/usr/bin/env bash
# e2e_agnostic.sh - nothing in bench/ names a cache strategy.
#
# bench/ (the CLI, the sweep, the demo, the model) must ask a strategy what
# it can do (capability flags, its parameter table, describe/label) and never
# compare its name or its table's address: a new strategy then works in every
# command without a line of bench/ code. This test takes every registered
# strategy name and preset name from the registry itself (`kvlab strategies
# --verbose`, so it follows the registry), strips the comments from every
# bench/*.c and bench/*.h (gcc -fpreprocessed: string literals stay), and
# fails on any
#   - string literal that is exactly a strategy or preset name ("sliding"),
#   - reference to a strategy's ops table (kv_strategy_sliding, &kv_strategy_...).
# Documentation in comments is allowed; help text names no strategy either.
# It first proves it can fail: a planted file with one of each must be
# caught.
set -u
KVLAB=${KVLAB:-build/kvlab}
CC=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

names=$("$KVLAB" strategies --verbose | awk '
    /^[^ ]/ { print $1 }                     # a strategy line starts with its name
    $1 == "preset" { print $2 }')            # "  preset NAME = k=v"
[ -n "$names" ] || { echo "e2e_agnostic: no strategy names from $KVLAB strategies"; exit 1; }
n_names=$(printf '%s\n' "$names" | wc -l)

# check FILE...: prints "file: what" for each offence
check() {
    local f
    for f in "$@"; do
        "$CC" -fpreprocessed -dD -E -P -x c "$f" 2>/dev/null >"$tmp/stripped" || {
            echo "$f: cannot strip comments"; continue; }
        while IFS= read -r nm; do
            id=${nm//-/_}
            grep -n -F "\"$nm\"" "$tmp/stripped" | sed "s|^|$f: names strategy \"$nm\": |"
            grep -n -E "\\bkv_strategy_${id}\\b" "$tmp/stripped" |
                sed "s|^|$f: uses the table of $nm: |"
        done <<<"$names"
        grep -n -E '&kv_strategy_[A-Za-z0-9_]+' "$tmp/stripped" | sed "s|^|$f: takes a table's address: |"
    done
}

# 1. the check can fail
first=$(printf '%s\n' "$names" | sed -n 2p)
cat >"$tmp/planted.c" <<EOF
/* "$first" in a comment is fine */
int f(const char *s) { return strcmp(s, "$first") == 0; }
const void *g(void) { return &kv_strategy_${first//-/_}; }
EOF
planted=$(check "$tmp/planted.c" | wc -l)
if [ "$planted" -ge 2 ]; then
    echo "  ok  a planted name and table reference are caught ($planted offences)"
else
    echo "FAIL  the check missed a planted strategy name ($planted offences found)"
    fail=1
fi

# 2. bench/ itself
report=$(check bench/*/*.c bench/*/*.h)
if [ -z "$report" ]; then
    echo "  ok  bench/*/*.c bench/*/*.h name none of the $n_names strategies and presets"
else
    printf '%s\n' "$report"
    echo "FAIL  bench/ names strategies (see above)"
    fail=1
fi
[ "$fail" -eq 0 ] && echo "e2e_agnostic: passed" || echo "e2e_agnostic: FAILED"
exit "$fail"
