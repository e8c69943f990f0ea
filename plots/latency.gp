# latency.gp - figure 1: decode step latency vs sequence length, linear
# axes: the no-cache step grows super-linearly and dwarfs the cached ones,
# whose steps grow only linearly (they read a cache of T tokens).
#   gnuplot -c plots/latency.gp out/bench.csv out/plots
plotdir = ARG0; while (strlen(plotdir) > 0 && plotdir[strlen(plotdir):strlen(plotdir)] ne "/") { plotdir = plotdir[1:strlen(plotdir) - 1] }
if (!exists("csv") && ARGC >= 1) { csv = ARG1 }
if (!exists("outdir") && ARGC >= 2) { outdir = ARG2 }
load (plotdir[1:1] eq "/" ? "" : "./") . plotdir . "common.gp"

set title "Decode step latency vs sequence length\n" . SUB
set xlabel "sequence length T (tokens attended by the step)"
set ylabel "median step latency (ms)"
set xrange [0:*]
set yrange [0:*]
set key outside right top font ",13" spacing 1.0
do for [fmt in "png svg"] {
    eval TERM(fmt)
    set output OUTD . "/latency." . fmt
    plot for [i = 1:NK] SER(i) using S_T:(column(S_STEP) / 1e6) with linespoints lw 2 pt kpt(CIDX[i]) ps 1.3 \
         lc rgb kcolor(i) title ktitle(i)
    unset output
}
