# frontier_table.awk - the tables of a frontier CSV (bench/scripts/
# frontier_table.sh; awk -F, -v src=FRONTIER.csv -f targets.awk -f
# frontier_table.awk TARGETS.tsv FRONTIER.csv): the run, then one table per
# T. The reference cache whose bytes the fractions divide is the row of
# bench/data/targets.tsv's table `frontier` (metric reference): a selector
# on the CSV's columns; its bytes are the CSV's own row of it at that T,
# else the shape's (layers x batch x kv_heads x head_dim x 2 x element
# bytes x T).
function fail(msg) { print "frontier_table: " src ": " msg > "/dev/stderr"; bad = 1; exit 2 }
# the reference: the one row of bench/data/targets.tsv's table frontier
# (metric reference), a selector on the CSV's columns (strategy=...;dtype=...)
BEGIN {
    targets_load("frontier"); targets_known("frontier", "reference")
    for (k = 1; k <= TG_N; k++) if (TG_METRIC[k] == "reference" && REF == "") REF = TG_SERIES[k]
    if (REF == "") { TG_AT = 0; tg_fail("no frontier reference row") }
    REF_DT = tg_sel_value(REF, "dtype"); REF_NAME = tg_sel_value(REF, "strategy")
    if (REF_NAME == "") REF_NAME = tg_sel_value(REF, "label")
    if (REF_NAME == "") REF_NAME = REF
    REF_B = REF_DT == "f16" || REF_DT == "bf16" ? 2 : 4    # bytes of one element
    REF_TXT = (REF_DT == "" ? "" : REF_DT " ") REF_NAME
}
function missing(x) { return x == "" || x ~ /nan/ }
function meta_of(k) { return (k in meta && meta[k] != "") ? meta[k] : "not recorded" }
function mib(b,   x) { x = b / 1048576; return x >= 100 ? sprintf("%.1f", x) : (x >= 1 ? sprintf("%.2f", x) : sprintf("%.3f", x)) }
# x to 3 significant digits, trailing zeros kept (0.200, 0.0187); tiny
# values in exponent form
function sig3(x,   f, e, d) {
    if (x == 0) return "0"
    f = log(x < 0 ? -x : x) / log(10); e = int(f); if (e > f) e--
    d = 2 - e; if (d < 0) d = 0
    return d > 6 ? sprintf("%.2e", x) : sprintf(sprintf("%%.%df", d), x)
}
function cell(s) { gsub(/\|/, "\\|", s); return s }
# "k=v;k=v" less its dtype entry, as "k=v, k=v"; a precision (dtype not
# f32) says its dtype first: "int8: bits=8, group=32", "f16"
function keeps(p, dt,   n, a, i, s) {
    s = ""
    n = split(p == "-" ? "" : p, a, ";")
    for (i = 1; i <= n; i++) if (a[i] != "" && a[i] !~ /^dtype=/) s = s (s == "" ? "" : ", ") a[i]
    if (dt != "" && dt != "f32") s = dt (s == "" ? "" : ": " s)
    return s == "" ? (dt == "" ? "-" : dt) : s
}
function header(   i, n, need, k) {
    delete col
    for (i = 1; i <= NF; i++) col[$i] = i
    n = split("label strategy params seq_len cache_bytes rel_err token_match step_ns_median dtype", need, " ")
    for (k = 1; k <= n; k++) if (!(need[k] in col)) fail("no column \"" need[k] "\"")
    shape = ("layers" in col) && ("kv_heads" in col) && ("head_dim" in col)
}
function v(name) { return (name in col) ? $col[name] : "" }
# this row's columns into R, for the reference's selector (targets.awk)
function row_R(   i) { delete R; for (i in col) R[i] = $col[i] }
/^[ \t]*#/ {
    line = $0; sub(/^[ \t]*#[ \t]*/, "", line); eq = index(line, "=")
    if (eq > 0) { k = substr(line, 1, eq - 1); if (!(k in meta)) meta[k] = substr(line, eq + 1) }
    next
}
/^[ \t]*$/ { next }
# the header, and again in a concatenated file (a line naming both columns)
!hd || ($0 ~ /(^|,)label(,|$)/ && $0 ~ /(^|,)seq_len(,|$)/) { header(); hd = 1; next }
{
    t = v("seq_len") + 0; b = v("cache_bytes") + 0; n++
    T[n] = t; B[n] = b; L[n] = v("label"); K[n] = keeps(v("params"), v("dtype"))
    E[n] = v("rel_err"); M[n] = v("token_match"); S[n] = v("step_ns_median")
    if (!(t in seenT)) { seenT[t] = 1; ts[++nt] = t }
    row_R()
    if (tg_sel(REF, v("label")) && !(t in dyn)) dyn[t] = b
    if (!(t in fromshape) && shape) {
        batch = ("batch" in col) ? v("batch") + 0 : 1
        fromshape[t] = v("layers") * (batch > 0 ? batch : 1) * v("kv_heads") * v("head_dim") * 2 * REF_B * t
    }
    if (model == "" && ("layers" in col)) {
        model = v("layers") (v("layers") == 1 ? " layer" : " layers")
        if ("dim" in col) model = model ", dim " v("dim")
        if ("heads" in col) model = model ", " v("heads") " heads"
        if ("kv_heads" in col) model = model ", " v("kv_heads") " KV heads"
        if ("head_dim" in col) model = model " of " v("head_dim")
        if ("batch" in col && v("batch") != 1) model = model ", batch " v("batch")
    }
}
END {
    if (TG_BAD) exit 2
    if (bad) exit 2
    if (!hd) fail("no header line")
    if (n == 0) fail("no rows")
    for (i = 2; i <= nt; i++) { x = ts[i]; for (j = i - 1; j >= 1 && ts[j] > x; j--) ts[j + 1] = ts[j]; ts[j + 1] = x }
    for (j = 1; j <= nt; j++) if (!(ts[j] in dyn) && !(ts[j] in fromshape))
        fail("no " REF_TXT " row at T = " ts[j] " and no layers, kv_heads, head_dim columns")
    # the model: a checkpoint named by --model in the command, else the
    # synthetic one when the command is recorded
    cmd = meta["command"]; what = ""
    if ("model" in meta) what = meta["model"]
    else if (match(cmd, /--model[ =][^ ]+/)) { what = substr(cmd, RSTART + 8, RLENGTH - 8) }
    else if (cmd != "") what = "synthetic, random weights"
    printf "Run: commit %s, date %s, cpu %s; model: %s%s.\n", meta_of("commit"), meta_of("date"), meta_of("cpu"),
           model == "" ? "shape not recorded" : model, what == "" ? "" : " (" what ")"
    for (j = 1; j <= nt; j++) {
        t = ts[j]; ref = (t in dyn) ? dyn[t] : fromshape[t]
        printf "\nT = %d: an %s`%s` cache holds %s MiB (%s).\n\n", t, (REF_DT == "" ? "" : REF_DT " "), REF_NAME, mib(ref),
               (t in dyn) ? "its own row in this run" : "from the shape: layers x batch x kv_heads x head_dim x 2 x " REF_B " B x T"
        print "| configuration | what it keeps | cache (MiB) | of " REF_TXT " | rel. logits error | greedy tokens agree | decode step (ms) |"
        print "|---|---|---:|---:|---:|---:|---:|"
        m = 0
        for (i = 1; i <= n; i++) if (T[i] == t) {
            r[++m] = i
            for (k = m - 1; k >= 1 && B[r[k]] > B[i]; k--) r[k + 1] = r[k]
            r[k + 1] = i
        }
        for (k = 1; k <= m; k++) {
            i = r[k]
            printf "| %s | %s | %s | %.3f | %s | %s | %s |\n", cell(L[i]), cell(K[i]), mib(B[i]),
                   (ref > 0 ? B[i] / ref : 0),
                   missing(E[i]) ? "-" : sig3(E[i]),
                   missing(M[i]) ? "-" : sprintf("%.1f%%", 100 * M[i]),
                   missing(S[i]) ? "-" : sprintf("%.3f", S[i] / 1e6)
        }
    }
}