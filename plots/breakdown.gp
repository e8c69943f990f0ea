# breakdown.gp - figure 7: where a decode step's time goes. Left: the
# exact reference cache's median step (dynamic's in a default sweep: REF,
# the series whose rows have acc_measured 0; the first series in a file
# without one) split into the attention kernel (kv_attn, timed inside the
# step) and everything else (GEMMs, norms, cache update). Right: the
# attention share of the step for every strategy.
#   gnuplot -c plots/breakdown.gp out/bench.csv out/plots
plotdir = ARG0; while (strlen(plotdir) > 0 && plotdir[strlen(plotdir):strlen(plotdir)] ne "/") { plotdir = plotdir[1:strlen(plotdir) - 1] }
if (!exists("csv") && ARGC >= 1) { csv = ARG1 }
if (!exists("outdir") && ARGC >= 2) { outdir = ARG2 }
load (plotdir[1:1] eq "/" ? "" : "./") . plotdir . "common.gp"

BI = REF > 0 ? REF : 1
do for [fmt in "png svg"] {
    eval TERM(fmt)
    set output OUTD . "/breakdown." . fmt
    set multiplot layout 1,2 title "Decode step time: attention vs the rest\n" . SUB
    set title KT[BI] . ": median step split"
    set style data histograms
    set style histogram rowstacked
    set style fill solid 0.85 border -1
    set boxwidth 0.75
    set key inside top left box opaque
    set xlabel "sequence length T"
    set ylabel "time per step (ms)"
    set yrange [0:*]
    set xtics rotate by -45
    plot SER(BI) using (column(S_ATTN) / 1e6):xtic(sprintf("%.0f", column(S_T))) \
             title "attention kernel" lc rgb "#1f77b4", \
         '' using ((column(S_STEP) - column(S_ATTN)) / 1e6) title "rest (GEMMs, norms, cache update)" lc rgb "#bbbbbb"
    set xtics norotate
    set style data linespoints
    set title "attention share of the step, every strategy"
    set ylabel "attention / step time (%)"
    set yrange [0:100]
    set logscale x 2
    set format x "%g"
    set key inside top left box opaque font ",12"
    plot for [i = 1:NK] SER(i) using S_T:(100 * column(S_ATTN) / column(S_STEP)) \
         with linespoints lw 2 pt kpt(CIDX[i]) ps 1.2 lc rgb kcolor(i) title ktitle(i)
    unset logscale x
    unset multiplot
    unset output
}
