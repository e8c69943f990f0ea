#!/usr/bin/env bash
# report_check.sh - make report-check: the one-file report (make report,
# bench/py/report.py) on bad input, then in a real browser.
#
#   KVLAB=build/kvlab bash tests/report_check.sh SWEEP.csv...
#
# 1. Bad input through `make report`: no sweep CSV, another schema version,
#    a file cut inside a line, a row cut short, a missing column, a
#    non-number, no schema line, no rows, a missing BASELINE. Each must fail
#    with one line naming the file (and the line), exit 2 from the script,
#    and leave the previous report as it was, with no temporary file.
# 2. For each CSV (make report-check passes the committed reference run and a
#    fresh bench-quick output), a schema-2 copy of the first
#    (tests/csv_v2.awk) and a copy of the first with one row noisy
#    (tests/csv_noisy.awk): `make report` with target tables made from it
#    (bench/scripts/kernel_table.sh --steps) and from a small `kvlab kernel` run of
#    this test; the second run adds a peers file and BASELINE. The page must
#    name the run's commit, inline every SVG of its plots folder, carry no
#    script and no external address, and pass tests/browser_check.py in
#    headless chromium (figures rendered, no console error, no request beyond
#    the page); its screenshot goes to out/report-NAME.png. Its noisy rows
#    (schema 3), counted here, must be counted under "The run", listed in a
#    warning when there are any, and their step times marked; a page without
#    the noise columns says nothing of them.
# 3. The browser check must fail on a page with a broken image and an
#    external style sheet (so it is known to catch them).
set -u
cd "$(dirname "$0")/.."

KVLAB=${KVLAB:-build/kvlab}
PY=${PY3:-/usr/bin/python3}
W=build/report-check
[ $# -ge 1 ] || { echo "usage: KVLAB=build/kvlab bash tests/report_check.sh SWEEP.csv..." >&2; exit 2; }
for f in "$@"; do [ -f "$f" ] || { echo "report_check: $f not found" >&2; exit 2; }; done
[ -x "$KVLAB" ] || { echo "report_check: $KVLAB not built" >&2; exit 2; }
rm -rf "$W" && mkdir -p "$W/bad" out

fail=0
pass() { echo "ok    $*"; }
flunk() { echo "FAIL  $*" >&2; fail=1; }
mk() { make --no-print-directory -s report "$@"; }

# ---------------------------------------------------------------- 1. bad input
REF=$1
SENTINEL="<p>the previous report</p>"
# bad NAME EXPECT FILE [make args...]: make report on FILE must fail with EXPECT
bad() {
    local name=$1 expect=$2 file=$3; shift 3
    printf '%s\n' "$SENTINEL" >"$W/bad/report.html"
    mk BENCH_CSV="$file" REPORT="$W/bad/report.html" PLOTS_DIR="$W/bad/plots" \
       STEPS_MD="$W/bad/steps.md" KERNEL_CSV="$W/bad/kernel.csv" "$@" >"$W/bad/out" 2>"$W/bad/err"
    local rc=$?
    local ours; ours=$(grep -v '^make' "$W/bad/err")
    if [ $rc = 0 ]; then flunk "bad input '$name': make report succeeded"
    elif [ "$(printf '%s\n' "$ours" | grep -c .)" != 1 ]; then
        flunk "bad input '$name': not one line: $(head -c 300 "$W/bad/err")"
    elif ! printf '%s' "$ours" | grep -qF -- "$expect"; then
        flunk "bad input '$name': expected '$expect', got: $ours"
    elif [ "$(cat "$W/bad/report.html")" != "$SENTINEL" ]; then
        flunk "bad input '$name': the previous report was changed"
    elif ls "$W"/bad/.report-* >/dev/null 2>&1; then
        flunk "bad input '$name': a temporary file was left behind"
    else
        # the script's own status: 2 for bad input
        if [ "$name" != "missing BASELINE" ]; then
            "$PY" bench/py/report.py --csv "$file" --out "$W/bad/direct.html" 2>/dev/null
            local drc=$?
            [ $drc = 2 ] || { flunk "bad input '$name': bench/py/report.py exited $drc, not 2"; return; }
        fi
        pass "bad input '$name': $ours"
    fi
}

nrows=$(wc -l <"$REF")
hdr=$(grep -n -m1 '^strategy,' "$REF" | cut -d: -f1)
schema_line=$(grep -n -m1 '^# schema=' "$REF" | cut -d: -f1)
bad "no sweep CSV" "report: $W/bad/absent.csv not found (run 'make bench' first)" "$W/bad/absent.csv"
sed 's/^# schema=[0-9]*$/# schema=4/' "$REF" >"$W/bad/schema4.csv"
bad "schema 4" "$W/bad/schema4.csv line $schema_line: schema version '4'" "$W/bad/schema4.csv"
head -c $(( $(wc -c <"$REF") - 9 )) "$REF" >"$W/bad/cut.csv"
bad "cut inside a line" "$W/bad/cut.csv line $nrows: the file ends inside this line" "$W/bad/cut.csv"
{ head -n $((hdr + 3)) "$REF"; sed -n "$((hdr + 4))p" "$REF" | cut -d, -f1-12; } >"$W/bad/short.csv"
bad "row cut short" "$W/bad/short.csv line $((hdr + 4)): 12 fields where the header (line $hdr)" "$W/bad/short.csv"
sed "${hdr}s/,rel_err,/,relerr,/" "$REF" >"$W/bad/nocol.csv"
bad "missing column" "$W/bad/nocol.csv line $hdr: header lacks the required column 'rel_err'" "$W/bad/nocol.csv"
awk -F, -v OFS=, -v h="$hdr" 'NR == h + 2 { $16 = "12x4" } { print }' "$REF" >"$W/bad/nan.csv"
bad "non-number" "$W/bad/nan.csv line $((hdr + 2)): column 'step_ns_median' holds '12x4'" "$W/bad/nan.csv"
grep -v '^# schema=' "$REF" >"$W/bad/noschema.csv"
bad "no schema line" "$W/bad/noschema.csv line $((hdr - 1)): no '# schema=' line" "$W/bad/noschema.csv"
head -n "$hdr" "$REF" >"$W/bad/norows.csv"
bad "no rows" "$W/bad/norows.csv line $hdr: no data rows" "$W/bad/norows.csv"
bad "missing BASELINE" "report: $W/bad/nobase.csv: baseline not found" "$REF" BASELINE="$W/bad/nobase.csv"

# ---------------------------------------------------------------- 2. real pages
# A small kernel run of this test gives the kernel target table and kernel.svg.
if "$KVLAB" kernel --csv --roofline --head-dim 64 --heads 8 --kv-heads 8 --seq-len 512,2048 \
       --dtype f32,int8,int4 >"$W/kernel.csv" 2>"$W/kernel.err" &&
   bash bench/scripts/kernel_table.sh "$W/kernel.csv" >"$W/kernel.md"; then
    pass "kernel table from a fresh kvlab kernel run"
else
    flunk "kvlab kernel / kernel_table.sh failed: $(tail -n 2 "$W/kernel.err")"
fi

awk -f tests/csv_v2.awk "$REF" >"$W/schema2.csv"
# One row noisy, with a reason holding markup the page must escape.
REASON='other programs used 1.62 cores (limit 0.30); <script>x</script> & more'
awk -v reason="$REASON" -v picked="$W/noisy.picked" -f tests/csv_noisy.awk "$REF" >"$W/noisy.csv" ||
    flunk "no noisy fixture: $REF lacks the noise columns (schema 3) or a dynamic row"
IFS=, read -r noisy_series noisy_t <"$W/noisy.picked" 2>/dev/null

# noise_of CSV: "NOISY ROWS", NOISY "-" when the file has no noisy column
noise_of() {
    awk -F, '/^[ \t]*#/ || !NF { next }
             !h { h = 1; for (j = 1; j <= NF; j++) if ($j == "noisy") c = j; next }
             { rows++ } c && $c == 1 { n++ }
             END { print (c ? n + 0 : "-"), rows + 0 }' "$1"
}

i=0
for csv in "$@" "$W/schema2.csv" "$W/noisy.csv"; do
    i=$((i + 1))
    name=$(basename "$csv" .csv); [ "$csv" = "$W/schema2.csv" ] && name=schema2
    [ "$csv" = "$W/noisy.csv" ] && name=noisy
    [ "$csv" = "$REF" ] && name=reference
    D="$W/$name"; mkdir -p "$D"
    bash bench/scripts/kernel_table.sh --steps "$csv" >"$D/steps.md"
    extra=()
    if [ $i = 2 ]; then
        # the peers section renders any CSV of measurements: here this test's
        # own kvlab kernel rows stand in for a peers file; BASELINE: the run itself
        cp "$W/kernel.csv" "$D/peers.csv"
        extra=(BASELINE="$csv")
        # make serving's table, in the form serving_table.awk writes it
        mkdir -p "$D/serving"
        printf '| policy | rate (req/s) | served (req/s) |\n|---|---:|---:|\n| paged-check | 2 | 1.9 |\n' \
            >"$D/serving/summary.md"
    fi
    if ! mk BENCH_CSV="$csv" REPORT="$D/report.html" PLOTS_DIR="$D/plots" STEPS_MD="$D/steps.md" \
            KERNEL_CSV="$W/kernel.csv" PEERS_CSV="$D/peers.csv" SERVING_DIR="$D/serving" \
            "${extra[@]}" >"$D/out" 2>"$D/err"; then
        flunk "make report on $csv: $(grep -v '^make' "$D/err" | head -n 3)"
        continue
    fi
    page="$D/report.html"
    nsvg=$(ls "$D"/plots/*.svg 2>/dev/null | wc -l)
    nfig=$(grep -o '<figure id="fig-' "$page" | wc -l)
    commit=$(grep -m1 '^# commit=' "$csv" | cut -d= -f2)
    problems=""
    [ "$nsvg" -ge 9 ] || problems="$problems; only $nsvg SVGs drawn"
    [ "$nfig" = "$nsvg" ] || problems="$problems; $nfig figures for $nsvg SVGs"
    grep -q "commit $commit" "$page" || problems="$problems; commit $commit not named"
    grep -q 'targets met' "$page" || problems="$problems; no target count"
    grep -qi '<script' "$page" && problems="$problems; a <script>"
    ext=$(grep -oE '(src|href)="(https?:)?//[^"]*|url\((https?:)?//' "$page" | head -n 1)
    [ -z "$ext" ] || problems="$problems; an external address: $ext"
    read -r nnoisy nrows < <(noise_of "$csv")
    marked=$(grep -o '<td class="num noisy" title="noisy: ' "$page" | wc -l)
    listed=$(grep -o '<div class="warn" id="noisy">.*</div>' "$page" | grep -o '<li>' | wc -l)
    if [ "$nnoisy" = - ]; then
        grep -q 'No row is noisy\|id="noisy"\|†' "$page" || [ "$marked" != 0 ] &&
            problems="$problems; noisy rows spoken of without a noisy column"
    elif [ "$nnoisy" = 0 ]; then
        grep -q "No row is noisy: none of the $nrows rows" "$page" || problems="$problems; 'No row is noisy' missing"
        grep -q 'id="noisy"\|†' "$page" || [ "$marked" != 0 ] && problems="$problems; a noisy mark with no noisy row"
    else
        grep -qE "<strong>$nnoisy of $nrows rows (is|are) noisy</strong>" "$page" ||
            problems="$problems; '$nnoisy of $nrows rows noisy' missing"
        [ "$listed" = "$nnoisy" ] || problems="$problems; $listed noisy rows listed in the warning, not $nnoisy"
        [ "$marked" = "$nnoisy" ] || problems="$problems; $marked step times marked noisy, not $nnoisy"
        grep -q '<p class="note">† noisy: measured under interference' "$page" ||
            problems="$problems; no legend under the marked table"
    fi
    if [ "$name" = noisy ]; then
        reason=$(printf '%s' "$REASON" | sed 's/&/\&amp;/g; s/</\&lt;/g; s/>/\&gt;/g')
        grep -qF "<li><b>$noisy_series</b>, T = $noisy_t: $reason</li>" "$page" ||
            problems="$problems; the warning does not list $noisy_series at T = $noisy_t with the escaped reason"
        grep -qF "<td class=\"num noisy\" title=\"noisy: $reason\">" "$page" ||
            problems="$problems; no step time marked with the escaped reason"
    fi
    if [ $i = 2 ]; then
        nk=$(grep -vc '^#' "$W/kernel.csv"); nk=$((nk - 1))
        grep -q "$nk rows from <code>$D/peers.csv</code>" "$page" || problems="$problems; peers table missing"
        # the run against itself: no regression, unless a row of it was measured
        # under interference (noisy=1), which compare does not judge (exit 3)
        want='no regression'; [ "${nnoisy/-/0}" = 0 ] || want='noisy, re-run'
        grep -q 'id="compare"' "$page" && grep -q "<strong>$want" "$page" ||
            problems="$problems; compare verdict '$want' ($nnoisy noisy rows) missing"
        grep -q '<td>paged-check</td>' "$page" || problems="$problems; the serving table missing"
    else
        grep -q "Not measured in this run: <code>$D/serving/summary.md</code> not found" "$page" ||
            problems="$problems; absent serving table not said"
        grep -q "Not measured: <code>$D/peers.csv</code> not found" "$page" ||
            problems="$problems; absent peers not said"
    fi
    if [ -n "$problems" ]; then flunk "report of $csv${problems}"; continue; fi
    if "$PY" tests/browser_check.py "$page" --figures "$nsvg" --screenshot "out/report-$name.png"; then
        pass "report of $csv: $nfig figures, in chromium: out/report-$name.png"
    else
        flunk "report of $csv failed in chromium"
    fi
done

# ---------------------------------------------------------------- 3. the browser check can fail
good="$W/reference/report.html"
if [ -f "$good" ]; then
    sed -e 's|<figure id="fig-latency" class="plot">|&<img src="no-such-figure.png" alt="x">|' \
        -e 's|</head>|<link rel="stylesheet" href="https://fonts.example.invalid/x.css"></head>|' \
        "$good" >"$W/broken.html"
    if "$PY" tests/browser_check.py "$W/broken.html" --figures 1 --screenshot "$W/broken.png" 2>"$W/broken.err"; then
        flunk "browser_check passed a page with a broken image and an external style sheet"
    elif grep -q 'broken image' "$W/broken.err" && grep -q 'requested https://fonts' "$W/broken.err"; then
        pass "browser_check catches a broken image and an external request"
    else
        flunk "browser_check failed the broken page for other reasons: $(head -n 3 "$W/broken.err")"
    fi
fi

[ $fail = 0 ] && echo "report-check: all passed; screenshots in out/report-*.png"
exit $fail
