#!/usr/bin/env bash
# e2e_make_guard.sh - no value handed to make reaches a shell (mk/guard.mk).
# Make pastes variables into recipe text; many recipes pass knobs on
# unquoted (`$(MAKE) plots PLOTS_DIR=$(PLOTS_DIR)`, `$(CLI) sweep
# $(FRONTIER_ARGS)`), so the check is at make's entry, not per recipe:
# - a real injection: `make help HELP_FIRST="x' ...; touch P; ..."` runs the
#   help recipe; before the guard it created P, now make stops first;
# - every character class the shell parses, on the command line and in the
#   environment, at make's top level and inside a recursive make: exit 2,
#   one line naming the variable, nothing created, a `$(shell ...)` never run;
# - values a user really gives (option lists, paths, Slurm options) pass, and
#   an environment variable the makefiles never read (LS_COLORS) is ignored.
# Usage: bash tests/e2e_make_guard.sh (needs only make)
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# (LEVEL VAR VALUE [env]) make -n at that MAKELEVEL; sets rc, out
run_make() {
    local level=$1 var=$2 val=$3 how=${4:-cmdline}
    if [ "$how" = env ]; then
        out=$(cd "$TMP" && env -u MAKEFLAGS -u MFLAGS MAKELEVEL="$level" "$var=$val" \
            make -n --no-print-directory -C "$ROOT" all 2>&1)
    else
        out=$(cd "$TMP" && env -u MAKEFLAGS -u MFLAGS MAKELEVEL="$level" \
            make -n --no-print-directory -C "$ROOT" all "$var=$val" 2>&1)
    fi
    rc=$?
}

# the injection that worked before the guard: the help recipe is
# `awk -v first='$(HELP_FIRST)' ...`, run for real (not -n)
out=$(cd "$TMP" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory -C "$ROOT" help \
    HELP_FIRST="x' /dev/null; touch $TMP/pwned_help; echo '" 2>&1)
rc=$?
[ -e "$TMP/pwned_help" ] && bad "make help: HELP_FIRST ran as shell"
if [ "$rc" = 2 ] && [ "$(echo "$out" | wc -l)" = 1 ] && [ -z "${out##*HELP_FIRST holds*}" ]; then ok
else bad "make help HELP_FIRST=\"x' ..\": not refused in one line (rc=$rc): $out"; fi

# every character the shell parses, each alone in an otherwise plain value
i=0
for c in "'" '"' '`' '\' ';' '&' '|' '<' '>' '{' '}' '*' '?' '[' ']' '$' '(' ')' '#' "
"; do
    i=$((i + 1))
    for level in 0 1; do
        for how in cmdline env; do
            val="a${c}touch $TMP/pwned_$i"
            run_make "$level" KERNEL_ARGS "$val" "$how"
            what="KERNEL_ARGS holding [$c] ($how, MAKELEVEL $level)"
            if [ "$rc" = 2 ] && [ "$(echo "$out" | wc -l)" = 1 ] && [ -z "${out##*KERNEL_ARGS holds*}" ]; then ok
            else bad "$what: not refused in one line (rc=$rc): $out"; fi
        done
    done
done
# a make function in a value is never expanded, by the check or after it
run_make 0 PLOTS_DIR "out/\$(shell touch $TMP/pwned_shell)"
[ "$rc" = 2 ] && ok || bad "PLOTS_DIR holding \$(shell ..): rc=$rc: $out"
run_make 0 CFLAGS "-O2 \$(shell touch $TMP/pwned_shell2)" env
[ "$rc" = 2 ] && ok || bad "CFLAGS from the environment holding \$(shell ..): rc=$rc: $out"
# a variable no makefile defines, given on the command line, is checked too
run_make 0 NOT_A_KNOB "x;y"
[ "$rc" = 2 ] && ok || bad "an unknown command-line variable holding ';': rc=$rc: $out"

# what users give: accepted
for kv in "SBATCH_ARGS=--partition=short --time=1:00:00" "FRONTIER_ARGS=--budgets 0.5,1 --no-roofline" \
          "BUILD=build/guard-test" "CFLAGS=-O2 -g" "KERNEL_SHAPES=64,8,8 128,32,8" "BASE=HEAD~1" \
          "BENCH_CSV=$TMP/a-b_c.d/bench@1+2%.csv" "SANITIZE=1"; do
    run_make 0 "${kv%%=*}" "${kv#*=}"
    [ "$rc" = 0 ] && ok || bad "make -n ${kv%%=*}='${kv#*=}' refused (rc=$rc): $out"
done
# the environment's own variables that no makefile reads
run_make 0 LS_COLORS "rs=0:di=01;34:ln=01;36" env
[ "$rc" = 0 ] && ok || bad "LS_COLORS in the environment refused (rc=$rc): $out"

n=$(find "$TMP" -maxdepth 1 -name 'pwned*' | wc -l)
[ "$n" = 0 ] && ok || bad "$n values reached a shell: $(ls "$TMP")"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
