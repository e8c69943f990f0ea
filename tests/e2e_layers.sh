#!/usr/bin/env bash
# e2e_layers.sh - the folders are the layers, and includes only go down:
#
#   bench/cli -> bench/serve -> bench/results -> bench/measure | bench/teach -> bench/term
#     -> bench/model -> strategies -> kernels
#
# Every #include "..." of every C file in those folders is resolved against
# the including file's folder; one that reaches a higher layer, or a sibling
# on the same level (measure and teach know nothing of each other), fails.
# The library (kernels, strategies, bench/model) must also not include a
# private header of another folder's internals: kernels/kv_attention_impl.h
# and strategies/kv_store.h are theirs alone. With --graph it prints the
# include graph by folder (how many includes go from which folder to which).
# Prints "N passed, N failed" last.
set -u
cd "$(dirname "$0")/.."

rank() {
    case $1 in
    kernels) echo 0 ;;
    strategies) echo 1 ;;
    bench/model) echo 2 ;;
    bench/term) echo 3 ;;
    bench/measure | bench/teach) echo 4 ;;
    bench/results) echo 5 ;;
    bench/serve) echo 6 ;;
    bench/cli) echo 7 ;;
    *) echo -1 ;;
    esac
}

pass=0
fail=0
declare -A edges
for dir in kernels strategies bench/model bench/term bench/measure bench/teach bench/results bench/serve bench/cli; do
    [ -d "$dir" ] || { fail=$((fail + 1)); echo "FAIL: $dir is missing"; continue; }
    r_from=$(rank "$dir")
    for f in "$dir"/*.c "$dir"/*.h; do
        [ -e "$f" ] || continue
        while IFS= read -r inc; do
            target=$(realpath -m --relative-to=. "$dir/$inc")
            tdir=$(dirname "$target")
            [ "$tdir" = "$dir" ] && continue
            r_to=$(rank "$tdir")
            edges["$dir -> $tdir"]=$((${edges["$dir -> $tdir"]:-0} + 1))
            if [ "$r_to" -lt 0 ]; then
                fail=$((fail + 1))
                echo "FAIL: $f includes $inc ($tdir is no layer)"
            elif [ "$r_to" -gt "$r_from" ] || { [ "$r_to" -eq "$r_from" ] && [ "$tdir" != "$dir" ]; }; then
                fail=$((fail + 1))
                echo "FAIL: $f includes $inc: $dir may not include $tdir (upward or sideways)"
            elif [ "$r_from" -ge 2 ] && case $target in kernels/kv_attention_impl.h | strategies/kv_store.h) true ;; *) false ;; esac; then
                fail=$((fail + 1))
                echo "FAIL: $f includes $inc, a private header of $tdir"
            else
                pass=$((pass + 1))
            fi
        done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
    done
done
# nothing is left at bench/'s top level but folders
loose=$(find bench -maxdepth 1 -type f | head -n 5)
if [ -z "$loose" ]; then pass=$((pass + 1)); else
    fail=$((fail + 1))
    echo "FAIL: files at bench/'s top level: $loose"
fi
if [ "${1:-}" = --graph ]; then
    for e in "${!edges[@]}"; do printf '%s: %d\n' "$e" "${edges[$e]}"; done | sort
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
