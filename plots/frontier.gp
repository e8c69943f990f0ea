# frontier.gp - the memory-accuracy frontier (out/frontier.csv, written by
# `kvlab sweep --frontier bench/frontier.list`): every lossy configuration at
# matched cache budgets, one point per configuration and T. Left: relative L2
# error of the logits against the exact cache vs resident cache bytes
# (log-log), a colour per configuration family, a point shape per T. Right:
# decode step time vs the same bytes. Points labelled with the budget.
#   gnuplot -e "csv='out/frontier.csv'; outdir='out/plots'" plots/frontier.gp
plotdir = system("dirname '" . ARG0 . "'")
if (!exists("csv")) csv = "out/frontier.csv"
load plotdir . "/common.gp"

# series by family: the labels up to '@' ("sliding@25%" -> "sliding")
AWKF(mode, key, cols) = sprintf("awk -v by=family -v mode=%s -v key=%s -v cols=%s -f '%s/select.awk' '%s'", \
                                mode, key, cols, plotdir, csv)
DATAF(mode, key, cols) = "< " . AWKF(mode, key, cols)
FAMS = system(AWKF("keys", "x", "x"))
TS = system("awk -F, '/^#/ || !n++ { if (!/^#/) for (i = 1; i <= NF; i++) if ($i == \"seq_len\") c = i; next } " . \
            "{ if (!($c in s)) { s[$c] = 1; printf \"%s \", $c } }' '" . csv . "'")
FCOLORS = "#9467bd #393b79 #637939 #843c39 #7b4173 #ff7f0e #8c564b #e377c2 #1f77b4 #17becf #2ca02c #d62728"
fcolor(i) = word(FCOLORS, (i - 1) % words(FCOLORS) + 1)
# the point shape of a row's T: filled circle, triangle, square, ...
TPOINTS = "7 9 5 11 13 15"
tpt(t) = int(word(TPOINTS, tidx(sprintf("%d", t), 1)))
tidx(t, i) = i > words(TS) ? 1 : (word(TS, i) eq t ? i : tidx(t, i + 1))
MiB = 1048576.0
BUDGET(lbl) = strstrt(lbl, "@") > 0 ? lbl[strstrt(lbl, "@") + 1:] : ""

do for [fmt in "png svg"] {
    eval TERM(fmt)
    set output outdir . "/frontier." . fmt
    set multiplot layout 1,2 title "Memory-accuracy frontier at matched cache budgets (T = " . TS . ")\n" . SUB
    set key outside bottom center horizontal maxrows 3 box opaque font ",12"
    set logscale xy 10
    set format x "%g"
    set format y "10^{%L}"
    set xlabel "resident cache bytes (MiB)"
    set title "logits error vs cache bytes (points: budget; shape: T)"
    set ylabel "relative L2 error of logits vs the exact cache"
    if (words(FAMS) > 0) {
        plot for [i = 1:words(FAMS)] DATAF("rows", word(FAMS, i), "cache_bytes,rel_err,seq_len") \
             using ($1 / MiB):($2 > 0 ? $2 : NaN):(tpt($3)) with points pt variable ps 1.8 \
             lc rgb fcolor(i) notitle, \
             for [i = 1:words(FAMS)] DATAF("rows", word(FAMS, i), "cache_bytes,rel_err,label") \
             using ($1 / MiB):($2 > 0 ? $2 : NaN):(BUDGET(strcol(3))) with labels offset 0, 0.9 \
             font ",9" tc rgb fcolor(i) notitle, \
             for [i = 1:words(FAMS)] NaN with points pt 7 ps 1.8 lc rgb fcolor(i) title word(FAMS, i), \
             for [j = 1:words(TS)] NaN with points pt int(word(TPOINTS, j)) ps 1.8 lc rgb "#000000" \
             title "T = " . word(TS, j)
    } else {
        set label 1 "no frontier rows in this CSV" at graph 0.5, 0.5 center
        plot NaN notitle
        unset label 1
    }
    set title "decode step time vs cache bytes"
    set ylabel "median decode step (ms)"
    set format y "%g"
    if (words(FAMS) > 0) {
        plot for [i = 1:words(FAMS)] DATAF("rows", word(FAMS, i), "cache_bytes,step_ms,seq_len") \
             using ($1 / MiB):2:(tpt($3)) with points pt variable ps 1.8 lc rgb fcolor(i) \
             notitle, \
             for [i = 1:words(FAMS)] NaN with points pt 7 ps 1.8 lc rgb fcolor(i) title word(FAMS, i), \
             for [j = 1:words(TS)] NaN with points pt int(word(TPOINTS, j)) ps 1.8 lc rgb "#000000" \
             title "T = " . word(TS, j)
    } else {
        plot NaN notitle
    }
    unset multiplot
    unset output
}
