# targets.awk - the one reader of bench/data/targets.tsv and the one writer
# of target verdicts, for every table script of bench/scripts: loaded first
# (awk -f targets.awk -f TABLE.awk TARGETS.tsv FILE...), it reads the
# targets file named by the first operand, a plain file argument, and takes
# it off the operands, so the table's program sees only its own files.
# Nothing read from either file is ever run: awk compares and prints it.
#
#   targets_load(TABLES)  in BEGIN: the rows of the tables named (a space
#       list), in file order: TG_N rows, TG_SERIES[i] TG_METRIC[i]
#       TG_AGAINST[i] TG_MODEL[i] TG_T[i] TG_CMP[i] TG_VALUE[i] (a number)
#       TG_WHY[i] TG_TABLE[i] TG_LINE[i]; a file that cannot be read, a row
#       whose columns are missing or whose cmp or value is not one, exits 2
#       with one line (TG_BAD set: the table's END must exit at once)
#   targets_known(TABLE, METRICS)  a row of TABLE whose metric is not one of
#       METRICS (a space list) is refused the same way
#   tg_list(s, a)  the comma list s into a[1..n]; n
#   tg_has(list, x)  1 when the comma list holds x, or is *
#   tg_has_T(i, t, P)  1 when T = t is in row i's T: *, a list, >=N, <=N,
#       A..B; a number NW is N times W, the sum of the parameters the spec
#       names after ";W=" (a+b), taken from P["name"] (the row's params)
#   tg_ok(i, x)  x meets row i (cmp against value); tg_judged(i): cmp is not -
#   tg_peer(i), tg_types(i, a)  PEER and the TYPE/TYPE list of PEER:TYPES
#   tg_x(i)  the value as the tables print a ratio ("2.5", "4")
#   tg_tgt(ok, measured)  a verdict cell, counted: met, **NOT met**, or
#       not measured; tg_row(what, need, got, ok, measured) a table row of it
#   tg_count(noun)  "N of M NOUN met; K not measured."; tg_reset() restarts
#       the count
#   tg_sel(sel, label)  1 when a CSV row (its columns in R[name], its series
#       name label) is the series sel: a label, or COLUMN=VALUE;... on R
function tg_fail(msg) {
    print "targets: " TG_FILE (TG_AT ? ":" TG_AT : "") ": " msg > "/dev/stderr"
    TG_BAD = 1; exit 2
}
function targets_load(tables,   line, nf, f, i, n, col, need, nneed, k, t, nt, tab, hd) {
    TG_FILE = ARGV[1]; ARGV[1] = ""; TG_N = 0; TG_AT = 0
    if (TG_FILE == "") tg_fail("no targets file")
    nt = split(tables, t, " "); for (i = 1; i <= nt; i++) tab[t[i]] = 1
    nneed = split("table series metric against model T cmp value why", need, " ")
    n = 0; hd = 0
    while ((k = (getline line < TG_FILE)) > 0) {
        n++
        if (line ~ /^[ \t]*#/ || line ~ /^[ \t]*$/) continue
        TG_AT = n
        nf = split(line, f, "\t")
        if (!hd) {
            for (i = 1; i <= nf; i++) col[f[i]] = i
            for (i = 1; i <= nneed; i++) if (!(need[i] in col)) tg_fail("the header lacks the column " need[i])
            hd = 1
            continue
        }
        for (i = 1; i <= nneed; i++) if (f[col[need[i]]] == "") tg_fail("no " need[i] " (columns are separated by one tab)")
        if (f[col["cmp"]] == "-") { if (f[col["value"]] != "-") tg_fail("a reported row (cmp -) with a value") }
        else if (f[col["cmp"]] !~ /^(>=|<=|>|<)$/) tg_fail("cmp '" f[col["cmp"]] "' is not one of >= <= > < -")
        else if (f[col["value"]] !~ /^[0-9]*\.?[0-9]+$/) tg_fail("value '" f[col["value"]] "' is not a number")
        if (!tg_tspec_ok(f[col["T"]])) tg_fail("T '" f[col["T"]] "' is not *, a list, >=N, <=N or A..B")
        if (!(f[col["table"]] in tab)) continue
        TG_N++
        TG_TABLE[TG_N] = f[col["table"]]; TG_SERIES[TG_N] = f[col["series"]]; TG_METRIC[TG_N] = f[col["metric"]]
        TG_AGAINST[TG_N] = f[col["against"]]; TG_MODEL[TG_N] = f[col["model"]]; TG_T[TG_N] = f[col["T"]]
        TG_CMP[TG_N] = f[col["cmp"]]; TG_VALUE[TG_N] = f[col["value"]]; TG_WHY[TG_N] = f[col["why"]]
        if (TG_CMP[TG_N] != "-") TG_VALUE[TG_N] += 0
        TG_LINE[TG_N] = n
    }
    if (k < 0) tg_fail("cannot be read")
    close(TG_FILE)
    TG_AT = 0
    if (!hd) tg_fail("no header line")
}
function targets_known(table, metrics,   i, m, n, a, ok) {
    n = split(metrics, a, " "); for (i = 1; i <= n; i++) ok[a[i]] = 1
    for (i = 1; i <= TG_N; i++)
        if (TG_TABLE[i] == table && !(TG_METRIC[i] in ok)) {
            TG_AT = TG_LINE[i]; tg_fail("metric '" TG_METRIC[i] "' is not one of the " table " table's (" metrics ")")
        }
}
function tg_list(s, a) { return split(s, a, ",") }
function tg_has(list, x,   n, a, i) {
    if (list == "*") return 1
    n = split(list, a, ","); for (i = 1; i <= n; i++) if (a[i] == x) return 1
    return 0
}
# a number of a T spec: N or NW (N times w); "" when it is neither
function tg_tnum(s, w) {
    if (s ~ /^[0-9]+$/) return s + 0
    if (s ~ /^[0-9]*W$/) { sub(/W$/, "", s); return (s == "" ? 1 : s + 0) * w }
    return ""
}
function tg_tspec_ok(spec,   e, n, a, i, P) {
    e = index(spec, ";"); if (e) { if (substr(spec, e + 1) !~ /^W=[a-z_]+(\+[a-z_]+)*$/) return 0; spec = substr(spec, 1, e - 1) }
    if (spec == "*") return 1
    if (spec ~ /^(>=|<=)/) return tg_tnum(substr(spec, 3), 1) != ""
    if (spec ~ /\.\./) { e = index(spec, ".."); return tg_tnum(substr(spec, 1, e - 1), 1) != "" && tg_tnum(substr(spec, e + 2), 1) != "" }
    n = split(spec, a, ","); for (i = 1; i <= n; i++) if (tg_tnum(a[i], 1) == "") return 0
    return 1
}
# W of a spec's ";W=a+b" from the parameters P[name]; 0 without one
function tg_W(spec, P,   e, n, a, i, w) {
    e = index(spec, ";W="); if (!e) return 0
    n = split(substr(spec, e + 3), a, "+"); w = 0
    for (i = 1; i <= n; i++) if (a[i] in P) w += P[a[i]]
    return w
}
function tg_has_T(i, t, P,   spec, w, e, n, a, k) {
    spec = TG_T[i]; w = tg_W(spec, P)
    e = index(spec, ";"); if (e) spec = substr(spec, 1, e - 1)
    if (spec == "*") return 1
    if (spec ~ /^>=/) return t >= tg_tnum(substr(spec, 3), w)
    if (spec ~ /^<=/) return t <= tg_tnum(substr(spec, 3), w)
    if (spec ~ /\.\./) { e = index(spec, ".."); return t >= tg_tnum(substr(spec, 1, e - 1), w) && t <= tg_tnum(substr(spec, e + 2), w) }
    n = split(spec, a, ","); for (k = 1; k <= n; k++) if (tg_tnum(a[k], w) == t) return 1
    return 0
}
# the bounds of a range spec A..B for W = w, as "[2W, 16W]" names them
function tg_T_text(i,   spec, e) {
    spec = TG_T[i]; e = index(spec, ";"); if (e) spec = substr(spec, 1, e - 1)
    if (spec ~ /\.\./) { e = index(spec, ".."); return "[" substr(spec, 1, e - 1) ", " substr(spec, e + 2) "]" }
    if (spec ~ /^(>=|<=)/) return substr(spec, 1, 2) " " substr(spec, 3)
    return spec
}
# the explicit T values of row i's spec, appended to the set S (S[t] = 1)
function tg_T_values(i, S,   spec, n, a, k) {
    spec = TG_T[i]
    if (spec ~ /^[0-9,]+$/) { n = split(spec, a, ","); for (k = 1; k <= n; k++) S[a[k] + 0] = 1 }
}
function tg_judged(i) { return TG_CMP[i] != "-" }
function tg_ok(i, x) {
    return TG_CMP[i] == ">=" ? x >= TG_VALUE[i] : TG_CMP[i] == "<=" ? x <= TG_VALUE[i] : \
           TG_CMP[i] == ">" ? x > TG_VALUE[i] : TG_CMP[i] == "<" ? x < TG_VALUE[i] : 0
}
function tg_x(i) { return TG_VALUE[i] "" }
function tg_peer(i,   e) { e = index(TG_AGAINST[i], ":"); return e ? substr(TG_AGAINST[i], 1, e - 1) : "" }
function tg_types(i, a,   e) { e = index(TG_AGAINST[i], ":"); return split(e ? substr(TG_AGAINST[i], e + 1) : "", a, "/") }
function tg_verdict(ok) { return ok ? "met" : "**NOT met**" }
function tg_tgt(ok, measured) {
    if (!measured) { TG_NNM++; return "not measured" }
    TG_NTGT++; if (ok) TG_NMET++
    return tg_verdict(ok)
}
function tg_row(what, need, got, ok, measured) {
    if (!measured) { TG_NNM++; printf "| %s | %s | not measured | not measured |\n", what, need; return }
    TG_NTGT++; if (ok) TG_NMET++
    printf "| %s | %s | %s | %s |\n", what, need, got, tg_verdict(ok)
}
function tg_count(noun) {
    printf "\n%d of %d %s met", TG_NMET, TG_NTGT, noun
    if (TG_NNM) printf "; %d not measured", TG_NNM
    print "."
}
function tg_reset() { TG_NTGT = TG_NMET = TG_NNM = 0 }
function tg_sel(sel, label,   n, a, k, e) {
    if (index(sel, "=") == 0) return sel == label
    n = split(sel, a, ";")
    for (k = 1; k <= n; k++) { e = index(a[k], "="); if (!(substr(a[k], 1, e - 1) in R) || R[substr(a[k], 1, e - 1)] != substr(a[k], e + 1)) return 0 }
    return 1
}
# the value of COLUMN in selector sel ("" when it names none)
function tg_sel_value(sel, column,   n, a, k, e) {
    n = split(sel, a, ";")
    for (k = 1; k <= n; k++) { e = index(a[k], "="); if (e && substr(a[k], 1, e - 1) == column) return substr(a[k], e + 1) }
    return ""
}
