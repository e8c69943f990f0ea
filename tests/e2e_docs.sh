#!/usr/bin/env bash
# e2e_docs.sh - the documentation stays true: the transcripts of README.md
# and of every docs/*.md page are run, every relative link points at a file
# (and a heading) that exists, and the figures quoted about the reference
# run are recomputed from the committed notebooks_data/bench.csv.
#
# RULES FOR WHOEVER EDITS README.md, docs/*.md OR notebooks_data/README.md
#
# 1. Transcripts. A fenced block (```) whose first line is `$ build/kvlab ARGS`
#    is a transcript: this test runs `kvlab ARGS` (stdout, NO_COLOR=1; exit
#    status 0 or 1 - a static cache that fills up exits 1 - never 2 or a
#    signal) and compares the block's other lines with what it printed:
#      - a line that is exactly `...` stands for any number of output lines
#        (zero or more): every elision is marked, nothing is silently left out;
#      - a line ending in ` ...` matches an output line that starts with the
#        text before ` ...` (a long line cut short);
#      - every other line must equal the next output line (trailing blanks
#        ignored): text and integers (FLOPs, bytes, shapes, positions)
#        exactly, decimal numbers (attention weights, errors printed to a few
#        digits) within DOC_ATOL + DOC_RTOL * |x|, as the golden demo tests
#        allow, because another kernel path may round their last digit
#        differently; tokens and verdicts are text: exact;
#      - the block matches from the first output line unless it starts with
#        `...`, and up to the last one unless it ends with `...`.
#    So a transcript may show only lines kvlab prints: no annotations (write
#    them in the prose), no timings (kvlab prints none unless asked, and a
#    command that prints machine-dependent numbers does not belong in a
#    transcript: show it in a ```sh block, which is not run). One command
#    per block. Only a plain ``` fence opens a transcript: shell blocks
#    (```sh) and output that depends on files other targets make or on the
#    machine (```text: the held-out text of `make bench-perplexity`, the
#    PyTorch step of `make stale-cache`) are never run. Help text belongs
#    to `kvlab COMMAND --help`, not to the pages: a transcript of `--help`
#    is refused (show the command in a ```sh block instead).
# 2. Reference-run figures. notebooks_data/README.md, up to its section
#    "Loading it" (what the file is, where it came from, what it shows), may
#    hold only numbers this test
#    recomputes from notebooks_data/bench.csv (its rows and its `# key=value`
#    metadata): each check below names a phrase with its numbers; after the
#    checked phrases are taken out, no digit may remain there (code spans
#    aside).
#    A new number there needs a new check here. The pages' sentences that
#    quote the reference run (docs/tutorial.md, docs/performance.md) are
#    checked the same way, phrase by phrase. Regenerating bench.csv (make
#    notebooks-data) makes this test name every figure to update.
# 3. Machine-specific figures (times, bandwidths, cache sizes) appear only in
#    tables generated from a named run with that run's metadata (make bench
#    writes them into out/; the pages never paste them), or in prose that
#    names the run or gives a range with the machine.
# 4. Links. Every relative link of README.md and docs/*.md, `[text](path)`
#    or `![alt](path)` outside code, must name an existing file or folder,
#    relative to the page; a `#anchor` (alone: the same page) must be the
#    GitHub anchor of a heading of the target page (lower-cased, everything
#    but letters, digits, spaces, `_` and `-` dropped, spaces turned into
#    `-`; a repeated heading gets `-1`, `-2`, ...).
# 5. The front door. README.md stays at most 300 lines and links every
#    docs/*.md page; no page carries editor notes (`<!-- ... -->`), issue
#    numbers, or "this machine" / "this VM" for the machine a figure came
#    from (name it).
set -u
KVLAB=${KVLAB:-build/kvlab}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
README=${DOCS_README:-$ROOT/README.md}
DOCS=${DOCS_DIR:-$ROOT/docs}
TUTORIAL=$DOCS/tutorial.md
PERF=$DOCS/performance.md
DICT=${DOCS_DICT:-$ROOT/notebooks_data/README.md}
CSV=${DOCS_CSV:-$ROOT/notebooks_data/bench.csv}
tmp=$(mktemp -d)
trap '[ -n "${DOCS_KEEP:-}" ] || rm -rf "$tmp"' EXIT
pass=0
fail=0
DOC_ATOL=0.02
DOC_RTOL=0.05
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# ---- 1. transcripts --------------------------------------------------------

# match_transcript EXCERPT OUTPUT: 0 when OUTPUT matches EXCERPT by rule 1;
# otherwise prints what did not match.
match_transcript() {
    awk '
    function rtrim(s) { sub(/[ \t]+$/, "", s); return s }
    function isint(x) { return x ~ /^[-+]?[0-9]+$/ }
    # s into alternating text ("T...") and number ("N...") pieces; count
    function pieces(s, arr,    n, m) {
        n = 0
        while (length(s) > 0) {
            m = match(s, /[-+]?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?/)
            if (m == 0) { arr[++n] = "T" s; break }
            if (m > 1) arr[++n] = "T" substr(s, 1, m - 1)
            arr[++n] = "N" substr(s, m, RLENGTH)
            s = substr(s, m + RLENGTH)
        }
        return n
    }
    # the same text and integers; decimals within DOC_ATOL + DOC_RTOL * |x|
    function same(p, o,    np_, no_, A, B, i, x, y, d) {
        if (p == o) return 1
        np_ = pieces(p, A); no_ = pieces(o, B)
        if (np_ != no_) return 0
        for (i = 1; i <= np_; i++) {
            if (substr(A[i], 1, 1) != substr(B[i], 1, 1)) return 0
            x = substr(A[i], 2); y = substr(B[i], 2)
            if (substr(A[i], 1, 1) == "T" || (isint(x) && isint(y))) { if (x != y) return 0; continue }
            d = x - y; if (d < 0) d = -d
            if (d > atol + rtol * (x < 0 ? -x : x)) return 0
        }
        return 1
    }
    function line_ok(p, o) {
        if (p ~ / \.\.\.$/) return same(substr(p, 1, length(p) - 4), substr(o, 1, length(p) - 4))
        return same(p, o)
    }
    # does segment k match output lines starting at i?
    function seg_at(k, i,    j) {
        if (i + seglen[k] - 1 > no) return 0
        for (j = 1; j <= seglen[k]; j++) if (!line_ok(seg[k, j], out[i + j - 1])) return 0
        return 1
    }
    FNR == NR { pat[++np] = rtrim($0); next }
    { out[++no] = rtrim($0) }
    END {
        # split the pattern at "..." lines into segments
        ns = 0; lead = 0; trail = 0
        for (i = 1; i <= np; i++) {
            if (pat[i] == "...") { if (i == 1) lead = 1; if (i == np) trail = 1; cur = 0; continue }
            if (!cur) { ns++; seglen[ns] = 0; cur = 1 }
            seg[ns, ++seglen[ns]] = pat[i]
        }
        pos = 1
        for (k = 1; k <= ns; k++) {
            anchored_start = (k == 1 && !lead)
            anchored_end = (k == ns && !trail)
            if (anchored_end) {
                start = no - seglen[k] + 1
                if (start < pos || (anchored_start && start != 1) || !seg_at(k, start)) { fail_at(k); exit 1 }
                pos = no + 1
                continue
            }
            if (anchored_start) {
                if (!seg_at(k, 1)) { fail_at(k); exit 1 }
                pos = seglen[k] + 1
                continue
            }
            found = 0
            for (i = pos; i <= no; i++) if (seg_at(k, i)) { found = i; break }
            if (!found) { fail_at(k); exit 1 }
            pos = found + seglen[k]
        }
        if (ns == 0 && !lead && no > 0) { print "    the block shows no output line"; exit 1 }
        exit 0
    }
    function fail_at(k,    j) {
        printf "    no match for the excerpt lines:\n"
        for (j = 1; j <= seglen[k]; j++) printf "      | %s\n", seg[k, j]
        printf "    (%d output lines; the command printed, from line %d:)\n", no, pos
        for (j = pos; j <= no && j < pos + 6; j++) printf "      > %s\n", out[j]
    }' atol="$DOC_ATOL" rtol="$DOC_RTOL" "$1" "$2"
}

# The pages: the README, then every docs page.
pages=("$README")
for f in "$DOCS"/*.md; do [ -f "$f" ] && pages+=("$f"); done
[ "${#pages[@]}" -ge 2 ] && ok || bad "no docs/*.md page next to README.md ($DOCS)"
rel() { case $1 in "$ROOT"/*) echo "${1#"$ROOT"/}" ;; *) echo "$1" ;; esac; }

# The transcript blocks of every page, one file each: line 1 the command.
mkdir -p "$tmp/tr"
k=0
for page in "${pages[@]}"; do
    k=$((k + 1))
    awk -v dir="$tmp/tr" -v k="$k" '
        /^```/ { if (inb) { inb = 0; if (f) close(f); f = ""; next } inb = 1; first = ($0 == "```"); next }
        inb && first { first = 0; if ($0 ~ /^\$ build\/kvlab /) { n++; f = sprintf("%s/p%02d-block%02d", dir, k, n); print > f } ; next }
        inb && f { print > f }
    ' "$page"
    printf '%s\n' "$(rel "$page")" >"$tmp/tr/p$(printf %02d "$k").name"
done
ntut=0
for ((i = 1; i <= ${#pages[@]}; i++)); do
    [ "${pages[i - 1]}" = "$TUTORIAL" ] && ntut=$(ls "$tmp/tr" | grep -c "^p$(printf %02d "$i")-block" || true)
done
[ "$ntut" -ge 8 ] && ok || bad "docs/tutorial.md has $ntut transcript blocks (expected 8 or more)"
for b in "$tmp"/tr/p*-block*; do
    [ -f "$b" ] || continue
    case $b in *.want | *.out | *.err | *.why) continue ;; esac
    where=$(cat "${b%-block*}.name")
    cmd=$(head -n 1 "$b" | sed 's/^\$ build\/kvlab //')
    tail -n +2 "$b" >"$b.want"
    # the page's own quoting ("The cache"): the words as a shell reads them
    eval "set -- $cmd"
    case " $* " in
    *" --help "* | *" -h "*)
        bad "$where: transcript 'kvlab $cmd' shows help text (show the command in a \`\`\`sh block)"
        continue ;;
    esac
    NO_COLOR=1 timeout 300 "$KVLAB" "$@" >"$b.out" 2>"$b.err" </dev/null
    rc=$?
    if [ "$rc" -gt 1 ]; then
        bad "$where: transcript 'kvlab $cmd' exited $rc: $(head -c 200 "$b.err")"
    elif match_transcript "$b.want" "$b.out" >"$b.why"; then
        ok
    else
        bad "$where: transcript 'kvlab $cmd' does not match its output:"
        cat "$b.why"
    fi
done

# ---- links and anchors -----------------------------------------------------

# anchors FILE: the GitHub anchor of every heading of FILE, one a line.
anchors() {
    LC_ALL=C awk '
        /^```/ { inb = !inb; next }
        inb || !/^#+ / { next }
        {
            h = $0; sub(/^#+ +/, "", h); sub(/ +#* *$/, "", h)
            h = tolower(h); gsub(/[^a-z0-9 _-]/, "", h); gsub(/ /, "-", h)
            if (h in seen) { seen[h]++; print h "-" seen[h] } else { seen[h] = 0; print h }
        }' "$1"
}
# links FILE: "LINE<TAB>TARGET" for every [..](TARGET) outside code.
links() {
    awk '
        /^```/ { inb = !inb; next }
        inb { next }
        {
            line = $0; gsub(/`[^`]*`/, "", line)
            while (match(line, /\]\([^) ]*\)/)) {
                print FNR "\t" substr(line, RSTART + 2, RLENGTH - 3)
                line = substr(line, RSTART + RLENGTH)
            }
        }' "$1"
}
nlinks=0
for page in "${pages[@]}"; do
    where=$(rel "$page")
    dir=$(dirname "$page")
    while IFS=$'\t' read -r ln target; do
        case $target in http://* | https://* | mailto:*) continue ;; esac
        nlinks=$((nlinks + 1))
        path=${target%%#*}
        anchor=
        case $target in *'#'*) anchor=${target#*#} ;; esac
        if [ -z "$path" ]; then file=$page; else file=$dir/$path; fi
        if [ ! -e "$file" ]; then
            bad "$where:$ln: link '$target': no such file ($(rel "$file"))"
            continue
        fi
        if [ -n "$anchor" ]; then
            if [ ! -f "$file" ] || [ "${file%.md}" = "$file" ]; then
                bad "$where:$ln: link '$target': an anchor into a file that is not a page"
                continue
            fi
            if ! anchors "$file" | grep -qxF -- "$anchor"; then
                bad "$where:$ln: link '$target': no heading of $(rel "$file") has the anchor '#$anchor'"
                continue
            fi
        fi
        ok
    done < <(links "$page")
done
[ "$nlinks" -ge 20 ] && ok || bad "only $nlinks relative links found in the pages: is the link scanner broken?"
# the scanner itself: it must see a link, skip code, and slug a heading
printf '# A. Heading (`x`), too\n\n[a](b.md#a-heading-x-too) `[c](d)`\n```\n[e](f)\n```\n' >"$tmp/l.md"
[ "$(links "$tmp/l.md" | cut -f2)" = "b.md#a-heading-x-too" ] && ok || bad "link scanner: found '$(links "$tmp/l.md" | tr '\n' ' ')'"
[ "$(anchors "$tmp/l.md")" = "a-heading-x-too" ] && ok || bad "anchor slug: got '$(anchors "$tmp/l.md")'"

# ---- the front door ----------------------------------------------------------

nl=$(wc -l <"$README")
[ "$nl" -le 300 ] && ok || bad "README.md has $nl lines (the front door stays at most 300)"
for f in "$DOCS"/*.md; do
    [ -f "$f" ] || continue
    name=docs/$(basename "$f")
    grep -qF "]($name" "$README" && ok || bad "README.md does not link $name"
done
for page in "${pages[@]}"; do
    where=$(rel "$page")
    if grep -n '<!--' "$page" >"$tmp/hit"; then bad "$where: editor notes: $(head -c 200 "$tmp/hit")"; else ok; fi
    if grep -niE '\bissues? #?[0-9]+' "$page" >"$tmp/hit"; then bad "$where: issue numbers: $(head -c 200 "$tmp/hit")"; else ok; fi
    if grep -niE '\bthis (machine|vm)\b' "$page" >"$tmp/hit"; then
        bad "$where: 'this machine' / 'this VM': name the machine: $(head -c 200 "$tmp/hit")"
    else ok; fi
done

# The matcher itself must reject what a stale transcript looks like.
printf 'a\nb\nc\nd\n' >"$tmp/m.out"
expect_match() { # WANT(0|1) PATTERN-LINES...
    local want=$1
    shift
    printf '%s\n' "$@" >"$tmp/m.pat"
    match_transcript "$tmp/m.pat" "$tmp/m.out" >/dev/null
    local got=$?
    [ "$got" = "$want" ] && ok || bad "matcher: '$*' gave $got, expected $want"
}
expect_match 0 a b c d
expect_match 0 a ... d
expect_match 0 ... c ...
expect_match 0 a ... b c ...
expect_match 0 'a ...' ... 'd'
expect_match 1 a c ...        # a line silently left out
expect_match 1 a b c          # the last line left out without '...'
expect_match 1 ... b d        # not contiguous
expect_match 1 a ... x ...    # a line kvlab does not print
expect_match 1 'a <- note' ... # an annotation
printf 'x = 0.1577 at pos 6, 12288 B\n' >"$tmp/m.out"
expect_match 0 'x = 0.1578 at pos 6, 12288 B'   # a decimal's last digit
expect_match 1 'x = 0.1577 at pos 7, 12288 B'   # an integer
expect_match 1 'x = 0.1577 at pos 6, 12289 B'
expect_match 1 'x = 0.3 at pos 6, 12288 B'      # beyond the tolerance
expect_match 0 'x = 0.1577 at ...'
expect_match 1 'x = 0.1577 on ...'

# ---- 2. the reference run's figures ---------------------------------------

# facts: NAME=VALUE lines computed from bench.csv, formatted as the docs
# print them.
awk -F, '
    /^# / { kv = substr($0, 3); k = kv; sub(/=.*/, "", k); v = substr(kv, length(k) + 2); meta[k] = v; next }
    !hdr { for (i = 1; i <= NF; i++) col[$i] = i; hdr = 1; next }
    {
        lab = $col["label"]; T = $col["seq_len"] + 0
        key = lab SUBSEP T
        step[key] = $col["step_ns_median"]; attn[key] = $col["attn_flops_step"]
        attn_ns[key] = $col["attn_ns_median"]; cache[key] = $col["cache_bytes"]
        copy[key] = $col["copy_bytes_step"]; rel[key] = $col["rel_err"]
        match_[key] = $col["token_match"]; window[lab] = $col["window"]
        group[lab] = $col["group"]; resid[lab] = $col["residual"]; bits[lab] = $col["bits"]
        rowb[lab] = 2 * $col["layers"] * $col["batch"] * $col["kv_heads"] * $col["head_dim"] * 4
        if (!(lab in seen)) { seen[lab] = 1; labs[++nl] = lab }
        Ts[lab] = Ts[lab] " " T
        if (T > maxT[lab]) maxT[lab] = T
        if (!(lab in minT) || T < minT[lab]) minT[lab] = T
    }
    # least-squares slope of log(attn_flops_step) against log(T) for lab
    function slope(lab, lo, hi,    n, i, t, x, y, sx, sy, sxx, sxy, a) {
        n = split(substr(Ts[lab], 2), a, " ")
        sx = sy = sxx = sxy = 0; t = 0
        for (i = 1; i <= n; i++) {
            if (a[i] < lo || a[i] > hi) continue
            x = log(a[i]); y = log(attn[lab, a[i]]); t++
            sx += x; sy += y; sxx += x * x; sxy += x * y
        }
        return (t * sxy - sx * sy) / (t * sxx - sx * sx)
    }
    function ms(ns) { return ns / 1e6 }
    function maxof(arr, lab, lo, hi,    n, i, a, mx) {
        n = split(substr(Ts[lab], 2), a, " "); mx = ""
        for (i = 1; i <= n; i++)
            if (a[i] >= lo && a[i] <= hi && (mx == "" || arr[lab, a[i]] + 0 > mx)) mx = arr[lab, a[i]] + 0
        return mx
    }
    function range_of(arr, lab, lo, hi, scale, fmt,    n, i, a, v, mn, mx) {
        n = split(substr(Ts[lab], 2), a, " "); mn = ""; mx = ""
        for (i = 1; i <= n; i++) {
            if (a[i] < lo || a[i] > hi) continue
            v = arr[lab, a[i]] * scale
            if (mn == "" || v < mn) mn = v
            if (mx == "" || v > mx) mx = v
        }
        return sprintf(fmt "-" fmt, mn, mx)
    }
    END {
        MiB = 1048576
        printf "commit=%s\n", meta["commit"]
        d = meta["date"]; printf "date=%s %s UTC\n", substr(d, 1, 10), substr(d, 12, 5)
        printf "threads=%s\n", meta["threads"]
        printf "l3_mib=%.0f\n", meta["l3_bytes"] / MiB
        split(meta["os"], os, " "); split(os[2], osv, "."); printf "linux=%s.%s\n", osv[1], osv[2]
        split(meta["blas_config"], bc, " "); printf "openblas=%s\n", bc[2]
        printf "blas_core=%s\n", meta["blas_core"]
        split(meta["compiler"], cv, "."); printf "gcc=%s.%s\n", cv[1], cv[2]
        printf "read=%.1f\ncopy=%.1f\nsgemm=%.0f\n", meta["read_gbps"], meta["copy_gbps"], meta["sgemm_gflops"]
        printf "wall=%.0f\n", meta["wall_s"]
        printf "lens=%d, %d, ..., %d\n", minT["dynamic"], 2 * minT["dynamic"], maxT["dynamic"]
        printf "none_max=%d\nnone_min_t=%d\n", maxT["none"], minT["none"]
        printf "n_series=%d\n", nl
        printf "none_2048_ms=%.0f\n", ms(step["none", 2048])
        printf "dyn_2048_ms=%.2f\n", ms(step["dynamic", 2048])
        printf "ratio_2048=%.0f\n", step["none", 2048] / step["dynamic", 2048]
        printf "none_4096_s=%.2f\n", step["none", 4096] / 1e9
        printf "none_4096_ms=%.0f\n", ms(step["none", 4096])
        printf "dyn_4096_ms=%.1f\n", ms(step["dynamic", 4096])
        printf "slope_none=%.2f\n", slope("none", 0, 1e9)
        printf "slope_none3=%.3f\n", slope("none", 0, 1e9)
        for (i = 1; i <= nl; i++) if (labs[i] != "none" && labs[i] != "sliding") {
            s = slope(labs[i], 0, 1e9); if (s < mins || mins == "") mins = s; if (s > maxs || maxs == "") maxs = s }
        printf "slope_cached_min=%.3f\nslope_cached_max=%.3f\n", mins, maxs
        printf "slope_sliding=%.3f\n", slope("sliding", 0, 1e9)
        printf "slope_sliding_past_window=%.3f\n", slope("sliding", window["sliding"], 1e9)
        printf "window=%d\n", window["sliding"]
        printf "static_mib=%.1f\n", cache["static", maxT["static"]] / MiB
        printf "static_tokens=%d\n", cache["static", maxT["static"]] / rowb["static"]
        printf "static_flat=%d\n", range_of(cache, "static", 0, 1e9, 1, "%d") == cache["static", 64] "-" cache["static", 64]
        printf "sliding_mib=%.0f\n", cache["sliding", maxT["sliding"]] / MiB
        printf "sliding_tokens=%d\n", cache["sliding", maxT["sliding"]] / rowb["sliding"]
        printf "sliding_flat=%d\n", range_of(cache, "sliding", 0, 1e9, 1, "%d") == cache["sliding", 64] "-" cache["sliding", 64]
        printf "dyn_8192_mib=%.0f\n", cache["dynamic", 8192] / MiB
        printf "int8_ratio3=%.3f\nint4_ratio3=%.3f\n", cache["quantized-int8", 8192] / cache["dynamic", 8192], cache["quantized-int4", 8192] / cache["dynamic", 8192]
        printf "int8_ratio2=%.2f\nint4_ratio2=%.2f\n", cache["quantized-int8", 8192] / cache["dynamic", 8192], cache["quantized-int4", 8192] / cache["dynamic", 8192]
        printf "group=%d\nresidual=%d\n", group["quantized-int8"], resid["quantized-int8"]
        printf "bits_a=%d\nbits_b=%d\n", bits["quantized-int8"], bits["quantized-int4"]
        printf "int8_rel=%s\n", range_of(rel, "quantized-int8", 0, 1e9, 100, "%.2f")
        printf "int4_rel=%s\n", range_of(rel, "quantized-int4", 0, 1e9, 100, "%.1f")
        printf "int8_match=%s\n", range_of(match_, "quantized-int8", 0, 1e9, 100, "%.0f")
        printf "int4_match=%s\n", range_of(match_, "quantized-int4", 0, 1e9, 100, "%.0f")
        printf "int8_rel_8192=%.2f\nint4_rel_8192=%.1f\n", rel["quantized-int8", 8192] * 100, rel["quantized-int4", 8192] * 100
        printf "int8_match_8192=%.0f\n", match_["quantized-int8", 8192] * 100
        w = window["sliding"]
        printf "sliding_below_rel=%.0e\n", maxof(rel, "sliding", 0, w - 1)
        printf "sliding_below_max_t=%d\n", w / 2
        printf "sliding_below_match=%s\n", range_of(match_, "sliding", 0, w - 1, 100, "%.0f")
        printf "sliding_rel_at_window=%.1f\n", rel["sliding", w] * 100
        printf "sliding_rel_max=%.0f\n", 100 * maxof(rel, "sliding", w, 1e9)
        printf "sliding_match=%s\n", range_of(match_, "sliding", w, 1e9, 100, "%.0f")
        printf "sliding_match_2048=%s\n", range_of(match_, "sliding", 2048, 1e9, 100, "%.0f")
        printf "concat_copy_8192_mb=%.0f\n", copy["dynamic-concat", 8192] / 1e6
        printf "concat_8192_ms=%.0f\ndyn_8192_ms=%.1f\n", ms(step["dynamic-concat", 8192]), ms(step["dynamic", 8192])
        printf "dyn_attn_8192_ms=%.1f\nint8_attn_8192_ms=%.1f\nint4_attn_8192_ms=%.1f\n", ms(attn_ns["dynamic", 8192]), ms(attn_ns["quantized-int8", 8192]), ms(attn_ns["quantized-int4", 8192])
        # the README table: T = 512, 2048, 4096, 8192
        split("512 2048 4096 8192", TT, " ")
        for (j = 1; j <= 4; j++) {
            t = TT[j]
            printf "t_none_ms_%d=%s\n", t, (("none", t) in step) ? sprintf("%.1f", ms(step["none", t])) : "—"
            printf "t_dyn_ms_%d=%.2f\n", t, ms(step["dynamic", t])
            v = ms(step["dynamic-concat", t]); printf "t_concat_ms_%d=%s\n", t, v < 10 ? sprintf("%.2f", v) : sprintf("%.1f", v)
            printf "t_ratio_%d=%s\n", t, (("none", t) in step) ? sprintf("%.0fx", step["none", t] / step["dynamic", t]) : "—"
            printf "t_dyn_mib_%d=%.0f\n", t, cache["dynamic", t] / MiB
            printf "t_static_mib_%d=%.1f\n", t, cache["static", t] / MiB
            printf "t_sliding_mib_%d=%.0f\n", t, cache["sliding", t] / MiB
        }
    }' "$CSV" >"$tmp/facts"
fact() { # the one value of fact NAME; a missing or doubled name is a bug here
    awk -F= -v k="$1" '$1 == k { v = substr($0, length(k) + 2); n++ }
        END { if (n != 1) { print "FACT-" k "-DEFINED-" n "-TIMES"; exit 1 } print v }' "$tmp/facts"
}
# Check that the facts themselves hold what the phrases below assert.
[ "$(fact static_flat)" = 1 ] && ok || bad "bench.csv: static's cache bytes are not flat over T"
[ "$(fact sliding_flat)" = 1 ] && ok || bad "bench.csv: sliding's cache bytes are not flat over T"
[ "$(fact sliding_below_match)" = "100-100" ] && ok ||
    bad "bench.csv: sliding does not choose the exact tokens below its window ($(fact sliding_below_match))"

# phrase FILE TEXT: FILE contains TEXT (with {name} replaced by its fact),
# which is then recorded as checked (for the no-unchecked-digit rule).
: >"$tmp/checked"
phrase() {
    local file=$1 text=$2 name
    while [[ $text =~ \{([a-z0-9_]+)\} ]]; do
        name=${BASH_REMATCH[1]}
        text=${text//\{$name\}/$(fact "$name")}
    done
    if grep -qF -- "$text" <(tr '\n' ' ' <"$file" | tr -s ' '); then
        ok
        printf '%s\n' "$text" >>"$tmp/checked"
    else
        bad "$(basename "$(dirname "$file")")/$(basename "$file") should say (from bench.csv): $text"
    fi
}

D=$DICT
phrase "$D" "from {date} on"
phrase "$D" "{l3_mib} MiB L3"
phrase "$D" "Linux {linux}"
phrase "$D" "OpenBLAS {openblas} (pthreads, {blas_core} kernels)"
phrase "$D" "gcc {gcc}"
phrase "$D" "{threads} threads, built from commit {commit}"
phrase "$D" "read {read} GB/s, copy {copy} GB/s, sgemm {sgemm} GFLOP/s"
phrase "$D" "The sweep took {wall} s"
phrase "$D" "(\`quantized\` at {bits_a} and {bits_b} bits)"
phrase "$D" "T = {lens} (\`none\` up to {none_max})"
phrase "$D" "at T = 2048 a decode step without a cache (\`none\`, {none_2048_ms} ms) is {ratio_2048}x slower than with \`dynamic\` ({dyn_2048_ms} ms); at T = 4096 it takes {none_4096_s} s"
phrase "$D" "log-log slope {slope_none} without a cache (fitted over T = {none_min_t}..{none_max})"
phrase "$D" "exactly {slope_cached_min} with every cache that keeps all of T"
phrase "$D" "\`sliding\` ({slope_sliding}) stays flat from T = {window} (its window) on"
phrase "$D" "\`static\` holds {static_mib} MiB at every T (its one capacity, {static_tokens} tokens)"
phrase "$D" "\`sliding\` holds {sliding_mib} MiB ({sliding_tokens} tokens) at every T"
phrase "$D" "\`dynamic\` grows to {dyn_8192_mib} MiB at T = 8192"
phrase "$D" "int8 to {int8_ratio3}x and int4 to {int4_ratio3}x of it"
phrase "$D" "one scale/min pair per group of {group}, plus {residual} recent tokens"
phrase "$D" "int8 costs a relative logits error of {int8_rel}% with the same greedy token at every step"
phrase "$D" "int4 {int4_rel}% with {int4_match}% agreement"
phrase "$D" "\`sliding\` matches the exact cache while T stays below its window (T <= {sliding_below_max_t}: the same greedy token at every step, a relative error of at most {sliding_below_rel}, float rounding)"
phrase "$D" "from T = {window}, whose timed steps pass the window, it drifts ({sliding_rel_at_window}% at T = {window}, up to {sliding_rel_max}%, {sliding_match}% agreement)"
[ "$(fact int8_match)" = "100-100" ] && ok || bad "bench.csv: int8 does not agree at every step"

# No digit left in what the dictionary says about the run (everything
# before "## Loading it") once the checked phrases are out.
awk '/^## Loading it/ { exit } { print }' "$D" >"$tmp/sections"
awk 'BEGIN { while ((getline l < ARGV[2]) > 0) checked[++n] = l; ARGV[2] = "" }
     { text = text " " $0 }
     END {
         gsub(/  +/, " ", text)
         for (i = 1; i <= n; i++) { while ((k = index(text, checked[i])) > 0) text = substr(text, 1, k - 1) " " substr(text, k + length(checked[i])) }
         gsub(/`[^`]*`/, "", text)    # code spans: file and command names
         # names that hold digits but are no figures
         gsub(/AVX-512|x86-64|int8|int4|f32|llama2\.c|L3|UTF-8/, "", text)
         if (text ~ /[0-9]/) { m = text; while (match(m, /[^ ]*[0-9][^ ]*/)) { printf "%s ", substr(m, RSTART, RLENGTH); m = substr(m, RSTART + RLENGTH) }; exit 1 }
     }' "$tmp/sections" "$tmp/checked" >"$tmp/left"
if [ -s "$tmp/left" ]; then
    bad "notebooks_data/README.md quotes numbers no check recomputes from bench.csv: $(cat "$tmp/left")"
else
    ok
fi

# The pages' figures from the reference run: the tutorial's prose and the
# performance page's FLOP slopes.
T=$TUTORIAL
phrase "$T" "\`notebooks_data/bench.csv\` (commit {commit}, {threads} threads on the project's 2-core Intel Xeon VM"
phrase "$T" "takes {none_2048_ms} ms without a cache and {dyn_2048_ms} ms with \`dynamic\` ({ratio_2048}x); at T = 4096, {none_4096_ms} ms vs {dyn_4096_ms} ms"
phrase "$T" "({concat_copy_8192_mb} MB per step at T = 8192) and its step takes {concat_8192_ms} ms against \`dynamic\`'s {dyn_8192_ms} ms"
phrase "$T" "the sliding cache holds {sliding_mib} MiB at every T"
phrase "$T" "agree with the full cache in {sliding_match_2048}% of the steps at T >= 2048"
phrase "$T" "int8 holds the cache in {int8_ratio2}x of \`dynamic\`'s bytes"
phrase "$T" "relative logits error of {int8_rel_8192}% and every greedy token equal; int4 in {int4_ratio2}x with {int4_rel_8192}% error"
phrase "$T" "faster: {int8_attn_8192_ms} ms (int8) and {int4_attn_8192_ms} ms (int4) against {dyn_attn_8192_ms} ms (f32, \`dynamic\`) of attention per step at T = 8192"
P=$PERF
phrase "$P" "is {slope_none3} for \`none\`, {slope_cached_min} for every cached strategy that keeps all T tokens, and {slope_sliding} for \`sliding\`"
[ "$(fact slope_cached_max)" = "$(fact slope_cached_min)" ] && ok ||
    bad "bench.csv: the cached strategies' slopes differ ($(fact slope_cached_min)..$(fact slope_cached_max))"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
