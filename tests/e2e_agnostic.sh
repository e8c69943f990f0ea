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
#
# The same holds for the shell, awk and gnuplot files that turn results
# into tables and figures (bench/scripts/*.sh, bench/scripts/*.awk,
# plots/*.gp, plots/model/*.gp, bench/slurm/*): outside comments none of
# them names a strategy or preset as a whole word (case-sensitive; letters,
# digits, `_` and `-` continue a word, so `dynamic-f16` is one name and
# `DynamicCache` none). Which series a table shows, what it judges them
# against and by how much, the tour's text and the perplexity
# configurations are data (bench/data/: targets.tsv, demo_tour.txt,
# *.configs), the one place names belong; a figure picks its series by the
# CSV's own columns (the exact reference by acc_measured, a cache-less
# series by cache_bytes, ...: plots/common.gp) or, where no column can,
# by bench/data/figures.tsv. A comment is a `#` at the start
# of a line or after a blank, outside quotes (shell and gnuplot '...' and
# "...", awk "..."); `#SBATCH` lines are directives, not comments. Planted
# scripts with names in code and in comments must give exactly the
# offences of their code. Every file is held to it: there is no list of
# exceptions.
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
# ---------------------------------------------------------------- scripts
# strip_comments LANG FILE: the file less its comments, line for line
# (LANG sh, awk or gp; a shell string may span lines, the others' may not)
strip_comments() {
    awk -v lang="$1" -v sq="'" '
    {
        out = ""; n = length($0)
        if (lang != "awk" && q == "" && $0 ~ /^#SBATCH/) { print; next }
        for (i = 1; i <= n; i++) {
            ch = substr($0, i, 1)
            if (q == "") {
                if (ch == "#" && (i == 1 || substr($0, i - 1, 1) ~ /[ \t]/)) break
                if (ch == "\"" || (ch == sq && lang != "awk")) q = ch
                else if (ch == "\\" && lang != "gp") { out = out ch; i++; ch = substr($0, i, 1) }
            } else if (ch == q) q = ""
            else if (ch == "\\" && q == "\"") { out = out ch; i++; ch = substr($0, i, 1) }
            out = out ch
        }
        print out
        if (lang != "sh") q = ""
    }' "$2"
}
# the names as one extended regular expression
name_re=$(printf '%s\n' "$names" | sed 's/[].[\*^$()+?{}|]/\\&/g' | paste -sd'|')
# check_script FILE: prints "file:line: names NAME: code" for each offence
check_script() {
    local f=$1 lang=sh
    case $f in *.awk) lang="awk" ;; *.gp) lang="gp" ;; esac
    strip_comments "$lang" "$f" | awk -v f="$f" -v re="($name_re)" '
    {
        line = $0; prev = " "
        while (match(line, re)) {
            b = RSTART > 1 ? substr(line, RSTART - 1, 1) : prev
            a = substr(line, RSTART + RLENGTH, 1)
            if (b !~ /[A-Za-z0-9_-]/ && a !~ /[A-Za-z0-9_-]/) {
                printf "%s:%d: names %s: %s\n", f, NR, substr(line, RSTART, RLENGTH), $0; break
            }
            prev = substr(line, RSTART, 1); line = substr(line, RSTART + 1)
        }
    }'
}
# 3. the script check can fail, and ignores comments
{
    echo '#!/usr/bin/env bash'
    echo "# \"$first\" in a comment is fine, and so is $first after code"
    echo "awk '{ if (\$1 == \"x\") print }' # and here: $first"
    echo "echo \"a ${first}x word, x$first, $first-like, ${first}_1 # $first\""
    echo "echo \"in code: $first\""
} >"$tmp/planted.sh"
{
    echo "# $first"
    echo "\$1 == \"$first\" { n++ }   # $first"
} >"$tmp/planted.awk"
# (a gnuplot '#' inside quotes opens no comment: the name after it is code)
{
    echo "# $first"
    echo "A = has(\"$first\") # $first"
    echo "set label 1 'x # $first' at 0, 0 # $first"
} >"$tmp/planted.gp"
p_sh=$(check_script "$tmp/planted.sh" | wc -l)
p_awk=$(check_script "$tmp/planted.awk" | wc -l)
p_gp=$(check_script "$tmp/planted.gp" | wc -l)
if [ "$p_sh" = 2 ] && [ "$p_awk" = 1 ] && [ "$p_gp" = 2 ]; then
    echo "  ok  names in planted scripts' code are caught, in their comments not ($p_sh + $p_awk + $p_gp offences)"
else
    echo "FAIL  the script check found $p_sh + $p_awk + $p_gp offences in the planted scripts (want 2 + 1 + 2):"
    check_script "$tmp/planted.sh"; check_script "$tmp/planted.awk"; check_script "$tmp/planted.gp"
    fail=1
fi

# 4. the scripts, the plots and the Slurm jobs
nf=0 offences=0
for f in bench/scripts/*.sh bench/scripts/*.awk plots/*.gp plots/model/*.gp bench/slurm/*; do
    [ -f "$f" ] || continue
    nf=$((nf + 1))
    rep=$(check_script "$f")
    [ -z "$rep" ] && continue
    printf '%s\n' "$rep"
    offences=$((offences + $(printf '%s\n' "$rep" | wc -l)))
done
if [ "$offences" = 0 ]; then
    echo "  ok  $nf shell, awk, gnuplot and Slurm files name none of the $n_names strategies and presets outside comments (bench/data/ holds them)"
else
    echo "FAIL  $offences lines of bench/scripts, plots or bench/slurm name strategies (see above; names belong in bench/data/)"
    fail=1
fi
[ "$fail" -eq 0 ] && echo "e2e_agnostic: passed" || echo "e2e_agnostic: FAILED"
exit "$fail"
