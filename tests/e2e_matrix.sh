#!/usr/bin/env bash
# e2e_matrix.sh - the file contract of every command, built from the
# command tables themselves (`kvlab options`), not from a list written here:
# a new command, or a new file option of an old one, is in the matrix the
# moment it is on the table.
#
# For each command it first runs the table's own example (it must succeed:
# an example that rots is a failure too). Then, for every declared output
# (option or positional), each hostile target - a directory, a FIFO, a
# device, a read-only file, a dangling link, a folder that does not exist,
# and a name equal to one of the command's inputs - must be refused with
# exit 2, one line on stderr starting with "kvlab", before the command's
# run begins (KVLAB_TRACE_RUN makes the layer say when a run starts) and
# without creating any of the example's outputs. For every declared input,
# a FIFO and a directory must be refused the same way, at once.
# Prints "N passed, N failed" last.
set -u

KVLAB=${KVLAB:-build/kvlab}
TIMEOUT=${MATRIX_TIMEOUT:-60}
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() {
    fail=$((fail + 1))
    echo "FAIL: $*"
}

# ---- fixtures for the examples' placeholders -------------------------------
TINY=(--layers 1 --dim 16 --heads 2 --kv-heads 2 --hidden 24 --vocab 256 --max-len 64 --threads 1)
mkdir -p "$tmp/fx"
"$KVLAB" sweep "${TINY[@]}" --strategies dynamic --seq-lens 8,16 --reps 1 --warmup 0 \
    --no-roofline --quiet --out "$tmp/fx/a.csv" >/dev/null 2>"$tmp/fx.err" ||
    { echo "FAIL: fixture sweep: $(head -c 300 "$tmp/fx.err")"; echo "0 passed, 1 failed"; exit 1; }
cp "$tmp/fx/a.csv" "$tmp/fx/b.csv"
"$KVLAB" export-synthetic "${TINY[@]:0:14}" --out "$tmp/fx/m.bin" --tokenizer-out "$tmp/fx/t.bin" \
    >/dev/null 2>"$tmp/fx.err" ||
    { echo "FAIL: fixture model: $(head -c 300 "$tmp/fx.err")"; echo "0 passed, 1 failed"; exit 1; }
printf 'the cache holds what the query reads. ' >"$tmp/fx/text.txt"
printf 'dynamic dynamic -\n' >"$tmp/fx/list.txt"

# hostile targets
mkdir "$tmp/hdir"
mkfifo "$tmp/hfifo"
: >"$tmp/hro"
chmod 444 "$tmp/hro"
ln -s "$tmp/nowhere/x" "$tmp/hdangling"
TARGETS=("directory:$tmp/hdir" "fifo:$tmp/hfifo" "device:/dev/null" "read-only:$tmp/hro"
    "dangling-link:$tmp/hdangling" "missing-folder:$tmp/no/such/folder/x.csv")

# ---- the tables ------------------------------------------------------------
"$KVLAB" options >"$tmp/options.tsv" || { bad "kvlab options exited $?"; }
n_cmds=$(awk -F'\t' '$1 == "cmd"' "$tmp/options.tsv" | wc -l)
[ "$n_cmds" -ge 12 ] && ok || bad "kvlab options lists $n_cmds commands, expected every one (>= 12)"

# kind_of CMD OPT: the option's kind
kind_of() { awk -F'\t' -v c="$1" -v o="$2" '$1 == "opt" && $2 == c && $3 == o { print $4 }' "$tmp/options.tsv"; }

# words ARGS...: the example with placeholders filled, one word a line;
# each @OUT becomes a fresh path (listed in $tmp/outs)
fill() {
    local n=0 w
    : >"$tmp/outs"
    for w in "$@"; do
        case $w in
        @CSV) echo "$tmp/fx/a.csv" ;;
        @CSV2) echo "$tmp/fx/b.csv" ;;
        @MODEL) echo "$tmp/fx/m.bin" ;;
        @TOKENIZER) echo "$tmp/fx/t.bin" ;;
        @TEXT) echo "$tmp/fx/text.txt" ;;
        @LIST) echo "$tmp/fx/list.txt" ;;
        @OUT)
            n=$((n + 1))
            echo "$tmp/run/out$n.dat"
            echo "$tmp/run/out$n.dat" >>"$tmp/outs"
            ;;
        *) echo "$w" ;;
        esac
    done
}

# set_arg CMD OPT POS VALUE WORDS...: the words with option OPT (or the
# POS-th positional) set to VALUE, one word a line
set_arg() {
    local cmd=$1 opt=$2 pos=$3 val=$4
    shift 4
    local out=() seen=0 i=0 p=0 w k
    local words=("$@")
    while [ $i -lt ${#words[@]} ]; do
        w=${words[$i]}
        if [ "${w#--}" != "$w" ]; then
            k=$(kind_of "$cmd" "${w%%=*}")
            if [ "$pos" = 0 ] && [ "${w%%=*}" = "$opt" ]; then
                out+=("$opt" "$val")
                seen=1
                [ "$k" != flag ] && [ "${w#*=}" = "$w" ] && i=$((i + 1))
            else
                out+=("$w")
                if [ "$k" != flag ] && [ "${w#*=}" = "$w" ]; then
                    i=$((i + 1))
                    out+=("${words[$i]}")
                fi
            fi
        else
            p=$((p + 1))
            if [ "$pos" != 0 ] && { [ "$p" = "$pos" ] || { [ "$pos" = 1000 ] && [ $seen = 0 ] &&
                [ "$p" -ge "$REST_FROM" ]; }; }; then
                out+=("$val")
                seen=1
            else
                out+=("$w")
            fi
        fi
        i=$((i + 1))
    done
    [ "$pos" = 0 ] && [ $seen = 0 ] && out+=("$opt" "$val")
    printf '%s\n' "${out[@]}"
}

# refused ID PATH WORDS...: exit 2, one "kvlab" line naming PATH, no run
# started, no output made
refused() {
    local id=$1 path=$2
    shift 2
    rm -rf "$tmp/run"
    mkdir -p "$tmp/run"
    KVLAB_TRACE_RUN=1 timeout "$TIMEOUT" "$KVLAB" "$@" >/dev/null 2>"$tmp/err" </dev/null
    local rc=$? lines
    lines=$(awk 'END { print NR }' "$tmp/err")
    if [ $rc -ne 2 ]; then
        bad "$id: exit $rc, expected 2; stderr: $(head -c 300 "$tmp/err")"
    elif grep -q 'kvlab: trace: .* starts its run' "$tmp/err"; then
        bad "$id: refused only after its run started"
    elif [ "$lines" -ne 1 ] || ! grep -q '^kvlab' "$tmp/err"; then
        bad "$id: $lines lines on stderr, expected one 'kvlab...' line: $(head -c 300 "$tmp/err")"
    elif ! grep -qF -- "$path" "$tmp/err"; then
        bad "$id: refused, but not for its file: $(head -c 300 "$tmp/err")"
    elif [ -n "$(ls -A "$tmp/run")" ]; then
        bad "$id: a refused run left $(ls -A "$tmp/run" | head -n 3 | tr '\n' ' ')"
    else
        ok
    fi
}

while IFS=$'\t' read -r tag cmd example; do
    [ "$tag" = cmd ] || continue
    read -r -a ex <<<"$example"
    if [ ${#ex[@]} -eq 0 ]; then
        bad "$cmd: its table has no example command line"
        continue
    fi
    mapfile -t base < <(fill "${ex[@]}")
    # positional words of the example, for KV_OPT_REST (pos 1000): the
    # first positional after the numbered ones
    REST_FROM=$(awk -F'\t' -v c="$cmd" '$1 == "opt" && $2 == c && $5 > 0 && $5 < 1000 { n++ }
        END { print n + 1 }' "$tmp/options.tsv")

    # the example itself must run
    rm -rf "$tmp/run"
    mkdir -p "$tmp/run"
    if timeout "$TIMEOUT" "$KVLAB" "$cmd" "${base[@]}" >/dev/null 2>"$tmp/err" </dev/null; then
        ok
    else
        bad "$cmd: its table's example '${ex[*]}' exited $?: $(head -c 300 "$tmp/err")"
        continue
    fi

    # one of its inputs, for "the same file as an input"
    an_input=""
    for w in "${base[@]}"; do
        case $w in "$tmp"/fx/*) an_input=$w; break ;; esac
    done

    while IFS=$'\t' read -r _ _ opt kind pos; do
        case $kind in
        output)
            for t in "${TARGETS[@]}"; do
                mapfile -t args < <(set_arg "$cmd" "$opt" "$pos" "${t#*:}" "${base[@]}")
                refused "$cmd $opt ${t%%:*}" "${t#*:}" "$cmd" "${args[@]}"
            done
            if [ -n "$an_input" ]; then
                cp -p "$an_input" "$tmp/keep"
                mapfile -t args < <(set_arg "$cmd" "$opt" "$pos" "$an_input" "${base[@]}")
                refused "$cmd $opt same-as-input" "$an_input" "$cmd" "${args[@]}"
                cmp -s "$an_input" "$tmp/keep" && ok || bad "$cmd $opt: overwrote its input"
            fi
            ;;
        input)
            for t in "fifo:$tmp/hfifo" "directory:$tmp/hdir"; do
                mapfile -t args < <(set_arg "$cmd" "$opt" "$pos" "${t#*:}" "${base[@]}")
                refused "$cmd $opt ${t%%:*} input" "${t#*:}" "$cmd" "${args[@]}"
            done
            ;;
        esac
    done < <(awk -F'\t' -v c="$cmd" '$1 == "opt" && $2 == c' "$tmp/options.tsv")
done <"$tmp/options.tsv"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
