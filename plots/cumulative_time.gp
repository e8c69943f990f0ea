# cumulative_time.gp - figure 4: wall time to generate N tokens one by one,
# the integral of step latency over T (trapezoids between the measured T;
# the steps below the first measured T are counted at its latency). The
# no-cache curve bends like T^3, the cached ones like T^2 at most.
#   gnuplot -c plots/cumulative_time.gp out/bench.csv out/plots
plotdir = ARG0; while (strlen(plotdir) > 0 && plotdir[strlen(plotdir):strlen(plotdir)] ne "/") { plotdir = plotdir[1:strlen(plotdir) - 1] }
if (!exists("csv") && ARGC >= 1) { csv = ARG1 }
if (!exists("outdir") && ARGC >= 2) { outdir = ARG2 }
load (plotdir[1:1] eq "/" ? "" : "./") . plotdir . "common.gp"

# the running integral over a series' rows (ascending T, as kvlab writes
# them): the first row counts T steps at its latency, then trapezoids
cum(t, s) = (column(0) == 0 ? (CUM = t * s) : (CUM = CUM + (t - TPREV) * (s + SPREV) / 2), \
             TPREV = t, SPREV = s, CUM)
do for [fmt in "png svg"] {
    eval TERM(fmt)
    set output OUTD . "/cumulative_time." . fmt
    set multiplot layout 1,2 title "Cumulative time to generate N tokens, one decode step each\n" . SUB
    set title "linear axes"
    set xlabel "tokens generated N"
    set ylabel "total decode time (s)"
    set xrange [0:*]
    set yrange [0:*]
    plot for [i = 1:NK] SER(i) using S_T:(cum(column(S_T), column(S_STEP) / 1e9)) \
         with linespoints lw 2 pt kpt(CIDX[i]) ps 1.2 lc rgb kcolor(i) title ktitle(i)
    set title "log-log"
    set key off
    set logscale xy
    set format x "%g"
    set format y "10^{%L}"
    set logscale x 2
    set xrange [*:*]
    set yrange [*:*]
    plot for [i = 1:NK] SER(i) using S_T:(cum(column(S_T), column(S_STEP) / 1e9)) \
         with linespoints lw 2 pt kpt(CIDX[i]) ps 1.2 lc rgb kcolor(i) notitle
    unset logscale xy
    set format x "%g"
    set format y "%g"
    set key on
    unset multiplot
    unset output
}
