#!/usr/bin/env bash
# e2e_plots_noshell.sh - no value read from a CSV, its metadata or a path
# reaches a shell through the plots or the report (the issue "data reaches a
# shell"), end to end in seconds:
#
# 1. Static: no plots/*.gp or plots/model/*.gp holds `system(`, a quote
#    followed by the less-than or pipe sign (a piped data source, output,
#    print or load), a backquote outside a comment (gnuplot runs `...` in a
#    command line, even inside a string), a macro (@NAME) outside a comment,
#    an eval of anything but the constant forms, or a `set output` that is
#    not the checked OUTD / OUT. The one allowed exception, listed here:
#    the output folder's `set print "| xargs -d '\\n' mkdir -p --"` line
#    (a constant command; the path goes to its standard input).
# 2. Hostile CSVs: a tiny sweep, frontier, sharing run and a hand-made
#    kernel CSV whose labels, dtypes and metadata (cpu, commit, threads) are
#    shell and gnuplot attacks (`;touch${IFS}M;#`, `$(...)`, backquotes,
#    quotes, a leading less-than or pipe sign, enhanced-text and HTML
#    markup), each one touching its own marker file when executed. Every
#    figure script runs as the tests call it (gnuplot -e "csv='..'" with
#    plain paths) and as make / merge.sbatch call it (gnuplot -c SCRIPT CSV
#    OUTDIR) with paths full of quotes, backquotes, `$(...)` and `;`; `make
#    plots` on the hostile CSVs, and refusing (exit 2, one line) a hostile
#    BENCH_CSV or PLOTS_DIR before anything runs (mk/guard.mk);
#    bench/slurm/merge.sbatch on clean shards of a sweep without lossy
#    strategies (plots drawn, the frontier skipped in one note line, exit 0)
#    and on doctored shards (merge refuses them, or the plots are drawn).
#    No marker may appear, every figure must still be drawn (the hostile
#    series with "?" for its unsafe characters), and frontier.gp on a
#    sweep without lossy rows must exit 0 with one note line and no figure.
# 3. bench/py/report.py: a FIFO or a directory as --csv / --steps / --peers /
#    --baseline / an SVG under --plots is refused at once (exit 2, one
#    line, never a hang); --out as the input itself (path, hard link,
#    symbolic link), a directory, a FIFO, a dangling link, a read-only file
#    or a missing folder is refused with exit 2 before anything is read; a
#    hostile label reaches the page HTML-escaped; no temporary file is left.
#
# KV_PLOTS_UNDER_TEST=DIR and KV_REPORT_UNDER_TEST=FILE point parts 1-3 at
# other copies (e.g. the scripts before this fix, to see this test fail);
# the make and merge.sbatch checks then use the repository's own files and
# are skipped. Usage: KVLAB=build/kvlab bash tests/e2e_plots_noshell.sh
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
KVLAB=${KVLAB:-build/kvlab}
case $KVLAB in /*) ;; *) KVLAB=$PWD/$KVLAB ;; esac
PLOTS=${KV_PLOTS_UNDER_TEST:-$ROOT/plots}
REPORT=${KV_REPORT_UNDER_TEST:-$ROOT/bench/py/report.py}
OWN=0
[ "$PLOTS" = "$ROOT/plots" ] && [ "$REPORT" = "$ROOT/bench/py/report.py" ] && OWN=1
PY=/usr/bin/python3
TMP=$(mktemp -d "${TMPDIR:-/tmp}/kvlab_e2e_noshell.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
M=$TMP/markers
W=$TMP/work
mkdir -p "$M" "$W"
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
check() { # check DESCRIPTION COMMAND...
    local what=$1; shift
    if "$@"; then ok; else bad "$what"; fi
}
finish() {
    echo "$pass passed, $fail failed"
    [ "$fail" = 0 ]
    exit
}
# (a path cannot hold a / in a file name: its attacks touch PWNED_* in the
# working directory, $W for gnuplot, the repository for make and merge.sbatch)
no_markers() { # no_markers WHAT: nothing was executed so far
    local got
    got=$(ls -A "$M"; cd "$W" && ls -d PWNED_* 2>/dev/null; cd "$ROOT" && ls -d PWNED_* 2>/dev/null)
    if [ -z "$got" ]; then ok; else bad "$1: executed: $(echo $got)"; fi
}

# ---------------------------------------------------------------- 1. static
ALLOWED="set print \"| xargs -d '\\\\n' mkdir -p --\""
gps=$(ls "$PLOTS"/*.gp "$PLOTS"/model/*.gp 2>/dev/null)
check "the plot scripts are there ($PLOTS)" test -n "$gps"
for f in $gps; do
    n=${f#"$PLOTS"/}
    hits=$(grep -nE 'system[[:space:]]*\(|["'"'"'][<|]|["'"'"'][[:space:]]+<' "$f" | grep -vF "$ALLOWED")
    check "$n: no system(, no piped data source / output / print / load: $hits" test -z "$hits"
    hits=$(grep -nE '^[^#]*`' "$f")
    check "$n: no backquote outside comments: $hits" test -z "$hits"
    hits=$(grep -nE '^[^#]*@[A-Za-z_]' "$f")
    check "$n: no macro outside comments: $hits" test -z "$hits"
    hits=$(grep -nE '^[^#]*\beval\b' "$f" |
        grep -vE 'eval (TERM\(fmt\)|sprintf\("set (table|print) \$[A-Z]%d( append)?", [a-z]\))$')
    check "$n: eval only of constant forms: $hits" test -z "$hits"
    hits=$(grep -nE '^[^#]*\bset (output|out|o)\b' "$f" | grep -vE 'set output (OUTD|OUT) \. "')
    check "$n: set output only under the checked OUTD / OUT: $hits" test -z "$hits"
done

# ---------------------------------------------------------------- 2. data
if ! command -v gnuplot >/dev/null 2>&1; then
    bad "gnuplot not installed (make deps)"
    finish
fi
if [ ! -x "$KVLAB" ]; then
    bad "$KVLAB not built"
    finish
fi
SE="--layers 2 --dim 64 --heads 4 --kv-heads 2 --hidden 128 --vocab 64 --threads 2 --reps 3
    --warmup 1 --no-roofline --quiet"
SW="$SE --window 96 --group 8 --residual 8"
# shellcheck disable=SC2086
"$KVLAB" sweep $SW --strategies none,dynamic,dynamic-concat,static,sliding,quantized-int8,quantized-int4,paged-16 \
    --seq-lens 64,128 --none-max 128 --out "$TMP/sweep.csv" 2>"$TMP/err"
check "tiny sweep ($(head -c 200 "$TMP/err"))" test -s "$TMP/sweep.csv"
# shellcheck disable=SC2086
"$KVLAB" sweep $SE --strategies dynamic,static --seq-lens 64,128 --out "$TMP/exact.csv" 2>"$TMP/err"
check "tiny sweep of exact caches ($(head -c 200 "$TMP/err"))" test -s "$TMP/exact.csv"
printf '%s\n' 'sl+w:1=2*3 sliding window=@' 'q8 quantized-int8 -' >"$TMP/frontier.list"
# shellcheck disable=SC2086
"$KVLAB" sweep $SE --group 8 --frontier "$TMP/frontier.list" --budgets 50 --seq-lens 128 \
    --out "$TMP/frontier.csv" 2>"$TMP/err"
check "tiny frontier sweep ($(head -c 200 "$TMP/err"))" test -s "$TMP/frontier.csv"
"$KVLAB" sharing --layers 2 --dim 64 --heads 4 --kv-heads 2 --hidden 96 --vocab 256 --max-len 256 \
    --threads 1 --strategies paged-16,dynamic --batches 1,2 --prompt-lens 40 --new-tokens 4 --quiet \
    --out "$TMP/sharing.csv" 2>"$TMP/err"
check "tiny sharing run ($(head -c 200 "$TMP/err"))" test -s "$TMP/sharing.csv"
SERVING_RATES=50,200 SERVING_REQUESTS=4 SERVING_POOL_MB=0.2 SERVING_WORKLOAD=instruct SERVING_PREFIX_LEN=0 SERVING_STEP_BATCHES= \
    SERVING_ARGS="--layers 2 --dim 32 --heads 4 --kv-heads 2 --hidden 48 --vocab 64 --max-len 128 --threads 1 --fixed-step-ms 2" \
    KVLAB=$KVLAB bash "$ROOT/bench/scripts/serving.sh" "$TMP/sv" 2>"$TMP/err" && cp "$TMP/sv/summary.csv" "$TMP/serving.csv" &&
    cp "$TMP/sv/timeline.csv" "$TMP/timeline.csv"
check "tiny serving run ($(tail -n 1 "$TMP/err"))" test -s "$TMP/serving.csv"
cat >"$TMP/kernel.csv" <<'EOF'
# kvlab kernel
# cpu=test cpu
# threads=2
# commit=abc1234
# read_gbps=20.000
# read_l3_gbps=50.000
head_dim,heads,kv_heads,seq_len,queries,dtype,threads,us_min,us_median,gbps,gflops,ref_us_min,mode,sets
64,8,8,512,1,f32,2,100.00,110.00,10.0,10.0,,cold,30
64,8,8,2048,1,f32,2,300.00,310.00,14.0,14.0,,cold,30
64,8,8,2048,1,int8,2,150.00,160.00,9.0,28.0,,cold,90
64,8,8,2048,1,f32,2,200.00,210.00,21.0,21.0,900.00,hot,1
EOF

# the attacks: each touches its own marker when a shell (or gnuplot's
# command line) runs it; no commas, so the CSVs keep their columns
H=(
    ";touch\${IFS}$M/h1;#"
    "\$(touch\${IFS}$M/h2)"
    "\`touch\${IFS}$M/h3\`"
    "x';touch\${IFS}$M/h4;'"
    "a\"b;touch\${IFS}$M/h5;#"
    "<touch\${IFS}$M/h6"
    "|touch\${IFS}$M/h7"
    'n\nb {/*9 x}^_@&~%<i>zz</i>'
)
HS=$(printf '%s\n' "${H[@]}")
# hostile CSV OUT: every label (or, without one, every dtype) an attack, the
# dynamic rows twice more under two more attacks, cpu / commit / threads too
hostile() {
    # (through the environment: awk -v would read the backslashes as escapes)
    KV_HS=$HS KV_M=$M awk -F, -v OFS=, '
        BEGIN { nh = split(ENVIRON["KV_HS"], H, "\n"); m = ENVIRON["KV_M"] }
        /^#/ {
            if ($0 ~ /^# cpu=/) { print "# cpu=$(touch${IFS}" m "/c1)"; next }
            if ($0 ~ /^# commit=/) { print "# commit=`touch${IFS}" m "/c2`"; next }
            if ($0 ~ /^# threads=/) { print "# threads=;touch${IFS}" m "/c3;#"; next }
            print; next
        }
        !h++ { for (i = 1; i <= NF; i++) c[$i] = i; print; next }
        {
            col = ("label" in c) ? c["label"] : ("policy" in c) ? c["policy"] : c["dtype"]
            v = $col
            if (!(v in seen)) seen[v] = ++n
            k = (seen[v] - 1) % nh + 1
            fam = v; bud = ""
            if (index(v, "@") > 0) { bud = substr(v, index(v, "@")); fam = substr(v, 1, index(v, "@") - 1) }
            if (v == "dynamic" && ("label" in c)) {
                $col = H[(k + 5) % nh + 1] "-b"; print
                $col = H[(k + 6) % nh + 1] "-c"; print
            }
            $col = H[k] (bud != "" ? "@" H[(k + 2) % nh + 1] : "")
            print
        }' "$1" >"$2"
}
for f in sweep frontier sharing kernel serving timeline; do hostile "$TMP/$f.csv" "$TMP/h_$f.csv"; done
check "the hostile sweep holds the attacks" grep -qF ";touch\${IFS}$M/h1;#" "$TMP/h_sweep.csv"

figures=""
for s in "$PLOTS"/*.gp; do
    n=$(basename "$s" .gp)
    [ "$n" = common ] || figures="$figures $n"
done
# the CSVs a figure reads: kernel.gp the kernel's, sharing.gp, serving.gp
# and frontier.gp theirs and a sweep's (as tests/e2e_sweep.sh runs them)
inputs_of() {
    case $1 in
    kernel) echo h_kernel ;;
    sharing) echo "h_sharing h_sweep" ;;
    serving) echo "h_serving h_sweep" ;;
    serving_timeline) echo "h_timeline h_sweep" ;;
    frontier) echo "h_frontier h_sweep" ;;
    *) echo h_sweep ;;
    esac
}
# the hostile paths of the -c runs: quotes, backquotes, $(...), ; and spaces
HP="$TMP/p'q\"\`touch PWNED_p1\`;\$(touch PWNED_p2) x"
mkdir -p "$HP"
for n in $figures; do
    for in in $(inputs_of "$n"); do
        # as the tests call them: -e with plain paths
        out=$W/e_$in
        (cd "$W" && gnuplot -e "csv='$TMP/$in.csv'; outdir='$out'" "$PLOTS/$n.gp") >/dev/null 2>"$TMP/gp.err"
        rc=$?
        check "gnuplot -e $n.gp on $in.csv exits 0 (rc=$rc: $(head -c 200 "$TMP/gp.err"))" test "$rc" = 0
        check "$n.png and .svg drawn from $in.csv (-e)" test -s "$out/$n.png" -a -s "$out/$n.svg"
        # as make and merge.sbatch call them: -c with hostile paths
        cp "$TMP/$in.csv" "$HP/$in;\$(touch PWNED_p3).csv"
        out="$HP/out \$(touch PWNED_p4) \`touch PWNED_p5\` '$in"
        (cd "$W" && gnuplot -c "$PLOTS/$n.gp" "$HP/$in;\$(touch PWNED_p3).csv" "$out") >/dev/null 2>"$TMP/gp.err"
        rc=$?
        check "gnuplot -c $n.gp on $in.csv, hostile paths, exits 0 (rc=$rc: $(head -c 200 "$TMP/gp.err"))" \
            test "$rc" = 0
        check "$n.png drawn under the hostile output path" test -s "$out/$n.png"
    done
done
no_markers "the figure scripts on hostile CSVs and paths"
check "the hostile series are drawn, their unsafe characters as ? (latency.svg)" \
    grep -qF ';touch??IFS?' "$W/e_h_sweep/latency.svg"
check "no attack reaches a figure as it was" \
    test -z "$(grep -lF '${IFS}' "$W"/e_*/*.svg)"

# serving.gp rings each policy's sustained rate: the highest rate below
# the lowest one over the bound (2 here). X: 1, 1.5, 3 -> its point at rate
# 2. Y: over the bound from the start (A) -> no ring; 1.8 at rate 1 (B) ->
# its point at rate 1. In the SVG a ring is pt 6 (gpPt5) at 3.2x, the
# policies' points pt 7 (X, gpPt6) and pt 5 (Y, gpPt4).
ring_csv() {
    local y1=$1
    echo "# latency_bound_s=2"
    echo "policy,rate,norm_latency_p50_s,token_share_used,reserved_share_used,internal_share_used,spare_share_used"
    for r in "1 1" "2 1.5" "4 3"; do set -- $r; echo "X,$1,$2,0.5,0.2,0.2,0.1"; done
    for r in "1 $y1" "2 3" "4 3"; do set -- $r; echo "Y,$1,$2,0.5,0.2,0.2,0.1"; done
}
# the translate(x,y) of the uses of point PT (scale SC: a ring's, or any)
at_of() { grep -o "<use xlink:href='#gpPt$2' transform='translate([0-9.,]*) scale($3)" "$1" |
    sed 's/.*translate(\([0-9.,]*\)).*/\1/'; }
ring_csv 3 >"$TMP/ringA.csv"
ring_csv 1.8 >"$TMP/ringB.csv"
for c in A B; do
    (cd "$W" && gnuplot -c "$PLOTS/serving.gp" "$TMP/ring$c.csv" "$W/ring" "ring$c") >/dev/null 2>"$TMP/gp.err"
    rc=$?
    check "serving.gp on the ring CSV $c exits 0 (rc=$rc: $(head -c 200 "$TMP/gp.err"))" test "$rc" = 0
done
# a policy with no latency at all (every median NaN) draws as nothing
ring_csv 3 | sed 's/^Y,\([0-9]*\),[0-9.]*,/Y,\1,nan,/' >"$TMP/ringN.csv"
(cd "$W" && gnuplot -c "$PLOTS/serving.gp" "$TMP/ringN.csv" "$W/ring" ringN) >/dev/null 2>"$TMP/gp.err"
rc=$?
check "serving.gp with a policy of NaN latencies only exits 0 (rc=$rc: $(grep -v -i warning "$TMP/gp.err" | head -c 200))" \
    test "$rc" = 0 -a -s "$W/ring/ringN.svg"
# and serving_timeline.gp, a policy with no batch nor pool at all
{ echo "# rate=2"
  echo "policy,iteration,t_s,step_s,batch,prefill_tokens,decode_tokens,waiting,swapped,token_bytes,reserved_bytes,internal_bytes,spare_bytes,free_bytes,attn_s"
  echo "A,0,1,0.01,1,20,0,0,0,100,100,0,0,1000,0.001"
  echo "A,1,2,0.01,2,0,2,0,0,200,100,0,0,900,0.001"
  echo "B,0,1,0.01,nan,20,0,0,0,nan,nan,nan,nan,nan,0.001"; } >"$TMP/tlN.csv"
(cd "$W" && gnuplot -c "$PLOTS/serving_timeline.gp" "$TMP/tlN.csv" "$W/tlN") >/dev/null 2>"$TMP/gp.err"
rc=$?
check "serving_timeline.gp with a policy of NaN rows only exits 0 (rc=$rc: $(grep -v -i warning "$TMP/gp.err" | head -c 200))" \
    test "$rc" = 0 -a -s "$W/tlN/serving_timeline.svg"
X2=$(at_of "$W/ring/ringA.svg" 6 '[0-9.]*' | sed -n 2p)
Y1=$(at_of "$W/ring/ringB.svg" 4 '[0-9.]*' | sed -n 1p)
check "serving.gp: X's point at rate 2 found ($X2), Y's at rate 1 ($Y1)" test -n "$X2" -a -n "$Y1"
check "serving.gp rings X at rate 2 alone when Y sustains none ($(at_of "$W/ring/ringA.svg" 5 '20[0-9.]*' | tr '\n' ' '))" \
    test "$(at_of "$W/ring/ringA.svg" 5 '20[0-9.]*')" = "$X2"
check "serving.gp rings X at rate 2 and Y at rate 1 ($(at_of "$W/ring/ringB.svg" 5 '20[0-9.]*' | tr '\n' ' '))" \
    test "$(at_of "$W/ring/ringB.svg" 5 '20[0-9.]*' | sort | tr '\n' ' ')" = "$(printf '%s\n' "$X2" "$Y1" | sort | tr '\n' ' ')"

# a sweep without lossy strategies: every figure but the frontier, which
# is skipped in one line with exit 0
for n in $figures; do
    [ "$n" = kernel ] && continue
    out=$W/exact
    (cd "$W" && gnuplot -c "$PLOTS/$n.gp" "$TMP/exact.csv" "$out") >/dev/null 2>"$TMP/gp.err"
    rc=$?
    check "$n.gp on a sweep of exact caches exits 0 (rc=$rc: $(head -c 200 "$TMP/gp.err"))" test "$rc" = 0
    if [ "$n" = frontier ]; then
        check "frontier.gp without lossy rows: one note line ($(cat "$TMP/gp.err"))" \
            test "$(wc -l <"$TMP/gp.err")" = 1 -a -n "$(grep 'frontier plot skipped' "$TMP/gp.err")"
        check "frontier.gp without lossy rows draws no figure" test ! -e "$out/frontier.png"
    else
        check "$n.png drawn from a sweep of exact caches" test -s "$out/$n.png"
    fi
done

if [ "$OWN" = 1 ]; then
    # make plots, the way make bench calls it, with hostile paths: make
    # refuses them before any recipe runs (mk/guard.mk), in one line
    DM="$TMP/mk'q\"\`touch PWNED_p6\`;x"
    mkdir -p "$DM"
    cp "$TMP/h_sweep.csv" "$DM/bench.csv"
    make --no-print-directory -s -C "$ROOT" plots BENCH_CSV="$DM/bench.csv" PLOTS_DIR="$DM/plots \`touch PWNED_p7\`" \
        >"$TMP/mk.out" 2>"$TMP/mk.err"
    rc=$?
    check "make plots with hostile paths is refused with exit 2 (rc=$rc)" test "$rc" = 2
    check "make plots with hostile paths: one line naming the value ($(head -c 300 "$TMP/mk.err"))" \
        test "$(wc -l <"$TMP/mk.err")" = 1 -a "$(grep -c 'BENCH_CSV holds\|PLOTS_DIR holds' "$TMP/mk.err")" = 1
    check "make plots with hostile paths: nothing drawn" test ! -e "$DM/plots \`touch PWNED_p7\`"
    # the hostile CSVs themselves, under plain paths: every figure drawn
    DM="$TMP/mkplain"
    mkdir -p "$DM"
    cp "$TMP/h_sweep.csv" "$DM/bench.csv"
    cp "$TMP/h_kernel.csv" "$DM/kernel.csv"
    cp "$TMP/h_frontier.csv" "$DM/frontier.csv"
    make --no-print-directory -s -C "$ROOT" plots BENCH_CSV="$DM/bench.csv" PLOTS_DIR="$DM/plots" \
        KERNEL_CSV="$DM/kernel.csv" FRONTIER_CSV="$DM/frontier.csv" >"$TMP/mk.out" 2>"$TMP/mk.err"
    rc=$?
    check "make plots with hostile CSVs exits 0 (rc=$rc: $(head -c 300 "$TMP/mk.err"))" test "$rc" = 0
    for n in latency cache_memory quantization kernel frontier; do
        check "make plots drew $n.png" test -s "$DM/plots/$n.png"
    done
    make --no-print-directory -s -C "$ROOT" plots BENCH_CSV="$TMP/exact.csv" PLOTS_DIR="$DM/exact" \
        KERNEL_CSV="$DM/none.csv" FRONTIER_CSV="$TMP/exact.csv" >"$TMP/mk.out" 2>"$TMP/mk.err"
    rc=$?
    check "make plots on a sweep without lossy rows exits 0 (rc=$rc: $(head -c 300 "$TMP/mk.err"))" test "$rc" = 0
    check "make plots: the frontier skipped in one note line ($(cat "$TMP/mk.err"))" \
        test "$(grep -c 'frontier plot skipped' "$TMP/mk.err")" = 1
    check "make plots: the other figures drawn, no frontier" \
        test -s "$DM/exact/latency.png" -a ! -e "$DM/exact/frontier.png"

    # the Slurm merge job (run here as a script): clean shards of an exact
    # sweep, then shards doctored with the attacks
    SD="$TMP/sh'q\"\`touch PWNED_p8\`;\$(touch PWNED_p9)"
    mkdir -p "$SD/ok" "$SD/bad"
    for i in 1 2; do
        # shellcheck disable=SC2086
        "$KVLAB" sweep $SE --strategies dynamic,static --seq-lens 64,128 --shard $i/2 \
            --out "$SD/ok/shard-$i.csv" 2>"$TMP/err" || bad "shard $i: $(head -c 200 "$TMP/err")"
        hostile "$SD/ok/shard-$i.csv" "$SD/bad/shard-$i.csv"
    done
    (cd "$ROOT" && KVLAB_SHARDS=2 KVLAB="$KVLAB" KVLAB_SHARD_DIR="$SD/ok" KVLAB_MERGED="$SD/merged.csv" \
        KVLAB_PLOTS_DIR="$SD/plots" bash bench/slurm/merge.sbatch) >"$TMP/mg.out" 2>"$TMP/mg.err"
    rc=$?
    check "merge.sbatch, a sweep without lossy strategies, exits 0 (rc=$rc: $(tail -c 300 "$TMP/mg.err"))" \
        test "$rc" = 0
    check "merge.sbatch drew the plots" test -s "$SD/plots/latency.png" -a -s "$SD/plots/sharing.png"
    check "merge.sbatch skipped the frontier in one note line" \
        test "$(grep -c 'frontier plot skipped' "$TMP/mg.err")" = 1 -a ! -e "$SD/plots/frontier.png"
    (cd "$ROOT" && KVLAB_SHARDS=2 KVLAB="$KVLAB" KVLAB_SHARD_DIR="$SD/bad" KVLAB_MERGED="$SD/bad.csv" \
        KVLAB_PLOTS_DIR="$SD/badplots" bash bench/slurm/merge.sbatch) >"$TMP/mg.out" 2>"$TMP/mg.err"
    rc=$?
    if [ "$rc" = 0 ]; then
        check "merge.sbatch on doctored shards: the plots drawn" test -s "$SD/badplots/latency.png"
    else
        check "merge.sbatch on doctored shards: refused by kvlab merge, no plots" test ! -e "$SD/badplots"
    fi
    no_markers "make plots and merge.sbatch"
else
    echo "note: make plots and merge.sbatch not checked (they run the repository's own plots/)"
fi

# ---------------------------------------------------------------- 3. report.py
if [ -x "$PY" ] && [ -f "$REPORT" ]; then
    R=$TMP/report
    mkdir -p "$R/dir" "$R/plots"
    mkfifo "$R/fifo" "$R/plots/fifo.svg"
    cp "$TMP/sweep.csv" "$R/s.csv"
    cp "$R/s.csv" "$R/s.keep"
    # refused REASON-PATTERN ARGS...: exit 2 at once, one line
    refused() {
        local pat=$1; shift
        printf '%s\n' "<p>previous</p>" >"$R/prev.html"
        timeout 10 "$PY" "$REPORT" "$@" >"$TMP/rp.out" 2>"$TMP/rp.err" </dev/null
        local rc=$?
        if [ "$rc" = 124 ]; then bad "report.py $*: hangs"; return; fi
        if [ "$rc" != 2 ]; then bad "report.py $*: exit $rc, want 2 ($(head -c 200 "$TMP/rp.err"))"; return; fi
        if [ "$(wc -l <"$TMP/rp.err")" != 1 ]; then bad "report.py $*: not one line: $(cat "$TMP/rp.err")"; return; fi
        if ! grep -qF -- "$pat" "$TMP/rp.err"; then bad "report.py $*: '$pat' not in: $(cat "$TMP/rp.err")"; return; fi
        ok
    }
    O=(--out "$R/prev.html")
    refused "report.py: --csv '$R/fifo': is a FIFO, not a regular file" --csv "$R/fifo" "${O[@]}"
    refused "report.py: --csv '$R/dir': is a directory, not a regular file" --csv "$R/dir" "${O[@]}"
    refused "report.py: --csv '$R/fifo': is a FIFO" --check --csv "$R/fifo"
    refused "report.py: --steps '$R/fifo': is a FIFO" --csv "$R/s.csv" --steps "$R/fifo" "${O[@]}"
    refused "report.py: --kernel-md '$R/dir': is a directory" --csv "$R/s.csv" --kernel-md "$R/dir" "${O[@]}"
    refused "report.py: --peers '$R/fifo': is a FIFO" --csv "$R/s.csv" --peers "$R/fifo" "${O[@]}"
    refused "report.py: --baseline '$R/fifo': is a FIFO" --csv "$R/s.csv" --baseline "$R/fifo" "${O[@]}"
    refused "report.py: --plots '$R/plots/fifo.svg': is a FIFO" --csv "$R/s.csv" --plots "$R/plots" "${O[@]}"
    refused "report.py: --plots '$R/fifo': is a FIFO, not a directory" --csv "$R/s.csv" --plots "$R/fifo" "${O[@]}"
    check "a refused run leaves the previous page" test "$(cat "$R/prev.html")" = "<p>previous</p>"
    ln "$R/s.csv" "$R/hard.csv"
    ln -s s.csv "$R/soft.csv"
    ln -s nowhere "$R/dangling.html"
    : >"$R/ro.html"
    chmod 444 "$R/ro.html"
    refused "report.py: --out '$R/s.csv': is the same file as --csv" --csv "$R/s.csv" --out "$R/s.csv"
    refused "report.py: --out '$R/hard.csv': is the same file as --csv" --csv "$R/s.csv" --out "$R/hard.csv"
    refused "report.py: --out '$R/soft.csv': is the same file as --csv" --csv "$R/s.csv" --out "$R/soft.csv"
    refused "report.py: --out '$R/dir': is a directory" --csv "$R/s.csv" --out "$R/dir"
    refused "report.py: --out '$R/fifo': is a FIFO" --csv "$R/s.csv" --out "$R/fifo"
    refused "report.py: --out '$R/dangling.html': is a dangling symbolic link" --csv "$R/s.csv" --out "$R/dangling.html"
    refused "report.py: --out '$R/ro.html': is read-only" --csv "$R/s.csv" --out "$R/ro.html"
    refused "report.py: --out '$R/none/r.html': its folder" --csv "$R/s.csv" --out "$R/none/r.html"
    check "the input was never written" cmp -s "$R/s.csv" "$R/s.keep"
    # the hostile sweep and its figures: drawn, escaped, written atomically
    timeout 60 "$PY" "$REPORT" --csv "$TMP/h_sweep.csv" --plots "$W/e_h_sweep" --out "$R/h.html" \
        >/dev/null 2>"$TMP/rp.err" </dev/null
    rc=$?
    check "report.py on the hostile sweep exits 0 (rc=$rc: $(head -c 200 "$TMP/rp.err"))" test "$rc" = 0
    check "a hostile label reaches the page escaped" \
        sh -c "grep -qF '&lt;i&gt;zz&lt;/i&gt;' '$R/h.html' && ! grep -qF '<i>zz</i>' '$R/h.html'"
    check "no temporary file left behind" test -z "$(find "$R" -maxdepth 1 -name '.report-*')"
    no_markers "report.py"
else
    bad "no $PY or $REPORT"
fi

no_markers "the whole test"
finish
