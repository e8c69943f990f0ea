# eviction_targets.awk - the eviction targets of a sweep CSV as markdown
# (bench/scripts/eviction_targets.sh; awk -F, -f targets.awk -f
# eviction_targets.awk TARGETS.tsv SWEEP.csv): the rows of
# bench/data/targets.tsv's table `eviction`, each judged on the CSV's
# series it names (labels):
#   slope       the log-log slope of step_ns_median over the T in the
#               target's range (2W..16W: W, the tokens the cache keeps, is
#               the sum of the parameters the range names), one row per
#               series;
#   step_ratio  the series' step time over the `against` series' at each T
#               in range (W: the against series'), their median; the
#               attention-kernel times beside it.
# Exit 2 with one line for a CSV without label, params, step_ns_median.
# With -v list=1 it prints the series the targets name (their series, then
# each against), a comma list, and reads no CSV: what eviction_targets.sh
# sweeps when it is given no file.
BEGIN {
    targets_load("eviction"); targets_known("eviction", "slope step_ratio")
    if (list) {
        out = ""
        for (k = 1; k <= TG_N; k++) {
            n = tg_list(TG_SERIES[k] (TG_METRIC[k] == "step_ratio" ? "," TG_AGAINST[k] : ""), a)
            for (i = 1; i <= n; i++) if (!(a[i] in named)) { named[a[i]] = 1; out = out (out == "" ? "" : ",") a[i] }
        }
        print out; listed = 1; exit 0
    }
}
/^#/ { next }
!h { for (i = 1; i <= NF; i++) c[$i] = i; h = 1
     if (!("label" in c) || !("step_ns_median" in c) || !("params" in c) || !("seq_len" in c)) {
         print "eviction_targets: " FILENAME ": not a schema-2 sweep CSV with labels" > "/dev/stderr"; bad = 1; exit 2 }
     next }
$c["label"] == "label" { next }    # a repeated header (concatenated files)
{
    l = $c["label"]; T = $c["seq_len"] + 0
    n = split($c["params"], kvs, ";")
    for (i = 1; i <= n; i++) { e = index(kvs[i], "="); if (e) PAR[l, substr(kvs[i], 1, e - 1)] = substr(kvs[i], e + 1) + 0 }
    step[l, T] = $c["step_ns_median"]; attn[l, T] = ("attn_ns_median" in c) ? $c["attn_ns_median"] : ""
    if (!(l in seen)) { seen[l] = 1; order[++nl] = l }
    Ts[T] = 1
}
# the parameters of series l into P (P[name] = value)
function params_of(l, P,   k, s) { for (k in PAR) { split(k, s, SUBSEP); if (s[1] == l) P[s[2]] = PAR[k] } }
function ms(x) { return sprintf("%.3f", x / 1e6) }
END {
    if (TG_BAD) exit 2
    if (listed) exit 0
    if (bad) exit 2
    nt = 0; for (t in Ts) tl[++nt] = t + 0
    for (i = 2; i <= nt; i++) { v = tl[i]; for (j = i - 1; j >= 1 && tl[j] > v; j--) tl[j + 1] = tl[j]; tl[j + 1] = v }
    print "**Eviction targets** (`kvlab sweep` rows, median step time; W = the tokens a cache keeps, the sum of the parameters each target names):\n"
    print "| configuration | target | required | measured | |"
    print "|---|---|---:|---:|---|"
    nd = 0
    for (k = 1; k <= TG_N; k++) {
        if (TG_METRIC[k] == "slope") {
            ns = tg_list(TG_SERIES[k], sl)
            for (q = 1; q <= ns; q++) {
                l = sl[q]
                what = "step time flat in T past the window: log-log slope over T in " tg_T_text(k)
                if (!(l in seen)) { tg_row("`" l "` | " what, TG_CMP[k] " " tg_x(k), "", 0, 0); continue }
                delete P; params_of(l, P); W = tg_W(TG_T[k], P)
                sx = sy = sxx = sxy = m = 0; rng = ""
                for (i = 1; i <= nt; i++) {
                    t = tl[i]; if (!tg_has_T(k, t, P) || !((l, t) in step)) continue
                    lx = log(t); ly = log(step[l, t]); sx += lx; sy += ly; sxx += lx * lx; sxy += lx * ly; m++
                    rng = rng (rng == "" ? "" : ", ") sprintf("%d: %s ms", t, ms(step[l, t]))
                }
                cf = sprintf("`%s`, W %d", l, W)
                if (m < 2) { tg_row(cf " | " what, TG_CMP[k] " " tg_x(k) " (fewer than 2 rows in range)", "", 0, 0); continue }
                s = (m * sxy - sx * sy) / (m * sxx - sx * sx)
                tg_row(cf " | " what, TG_CMP[k] " " tg_x(k), sprintf("%+.4f (%s)", s, rng), tg_ok(k, s), 1)
            }
        } else if (TG_METRIC[k] == "step_ratio") {
            ns = tg_list(TG_SERIES[k], sl); b = TG_AGAINST[k]
            for (q = 1; q <= ns; q++) {
                l = sl[q]
                what = "step time at the same budget: the median ratio over T " tg_T_text(k)
                if (!(l in seen) || !(b in seen)) { tg_row("`" l "`, `" b "` | " what, TG_CMP[k] " " tg_x(k), "", 0, 0); continue }
                delete P; params_of(b, P); W = tg_W(TG_T[k], P)
                delete P2; params_of(l, P2); W2 = tg_W(TG_T[k], P2)
                m = 0; delete r
                for (i = 1; i <= nt; i++) {
                    t = tl[i]; if (!tg_has_T(k, t, P) || !((l, t) in step) || !((b, t) in step)) continue
                    r[++m] = step[l, t] / step[b, t]
                    nd++; D_l[nd] = l; D_b[nd] = b; D_t[nd] = t; D_r[nd] = r[m]
                }
                cf = sprintf("`%s` (W %d) over `%s` (W %d)", l, W2, b, W)
                if (m == 0) { tg_row(cf " | " what, TG_CMP[k] " " tg_x(k) " (no T in range)", "", 0, 0); continue }
                for (i = 2; i <= m; i++) { v = r[i]; for (j = i - 1; j >= 1 && r[j] > v; j--) r[j + 1] = r[j]; r[j + 1] = v }
                med = m % 2 ? r[(m + 1) / 2] : (r[m / 2] + r[m / 2 + 1]) / 2
                tg_row(cf " | " what, TG_CMP[k] " " tg_x(k), sprintf("%.3f (%d T)", med, m), tg_ok(k, med), 1)
            }
        }
    }
    tg_count("eviction targets")
    if (nd > 0) {
        print "\nThe ratios per T (median step time and median attention-kernel time, ms):\n"
        print "| series | over | T | step | over's step | ratio | attention | over's attention | ratio |"
        print "|---|---|---:|---:|---:|---:|---:|---:|---:|"
        for (i = 1; i <= nd; i++) {
            l = D_l[i]; b = D_b[i]; t = D_t[i]
            printf "| `%s` | `%s` | %d | %s | %s | %.3f | %s | %s | %s |\n", l, b, t, ms(step[l, t]), ms(step[b, t]), D_r[i], \
                (attn[l, t] == "" ? "-" : ms(attn[l, t])), (attn[b, t] == "" ? "-" : ms(attn[b, t])), \
                (attn[b, t] > 0 ? sprintf("%.3f", attn[l, t] / attn[b, t]) : "-")
        }
    }
}
