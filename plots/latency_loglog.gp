# latency_loglog.gp - figure 1, log-log twin: on log axes a power law is a
# straight line whose slope is its exponent. Guide lines of slope 1 (linear,
# anchored at the exact reference's largest T: REF, dynamic in a default
# sweep; the last series without one) and slope 2 (quadratic, anchored at
# the largest T of the series without a cache: NC1, none) let the reader
# read the growth rate off the picture.
# A no-cache step re-runs all T tokens: its projections and MLP grow like T
# and its attention like T^2, so its attention time is drawn on its own
# (dashed): the quadratic term that takes over as T grows.
#   gnuplot -c plots/latency_loglog.gp out/bench.csv out/plots
plotdir = ARG0; while (strlen(plotdir) > 0 && plotdir[strlen(plotdir):strlen(plotdir)] ne "/") { plotdir = plotdir[1:strlen(plotdir) - 1] }
if (!exists("csv") && ARGC >= 1) { csv = ARG1 }
if (!exists("outdir") && ARGC >= 2) { outdir = ARG2 }
load (plotdir[1:1] eq "/" ? "" : "./") . plotdir . "common.gp"

set title "Decode step latency vs sequence length (log-log)\n" . SUB
set xlabel "sequence length T (tokens attended by the step)"
set ylabel "median step latency (ms)"
set logscale xy 2
set format x "%g"
set format y "10^{%L}"
set logscale y 10
set key outside right top font ",13" spacing 1.0

set label 5 "How to read it: T^k is a straight\n\
line of slope k. Cached steps stay flat\n\
while reading the weights dominates,\n\
then grow like T with the cache.\n\
A no-cache step re-runs all T tokens:\n\
projections and MLP grow like T, its\n\
attention (dashed) like T^2, and that\n\
term takes over as T grows." at screen 0.64, screen 0.36 left font ",12"

# guides: y = a * T^k through an anchor point (a series' largest T)
A1 = REF > 0 ? REF : NK
T1 = LT[A1]; Y1 = LSTEP[A1] / 1e6
NI = NC1
T2 = NI > 0 ? LT[NI] : 0; Y2 = NI > 0 ? LSTEP[NI] / 1e6 : 0
slope1(x) = Y1 * (x / T1)
slope2(x) = Y2 * (x / T2)**2

do for [fmt in "png svg"] {
    eval TERM(fmt)
    set output OUTD . "/latency_loglog." . fmt
    if (NI > 0) {
        plot for [i = 1:NK] SER(i) using S_T:(column(S_STEP) / 1e6) with linespoints lw 2 \
             pt kpt(CIDX[i]) ps 1.3 lc rgb kcolor(i) title ktitle(i), \
             SER(NI) using S_T:(column(S_ATTN) / 1e6) \
             with linespoints dt 4 lw 2 pt 6 ps 1.1 lc rgb kcolor(NI) \
             title KT[NI] . ": its attention kernel time alone", \
             slope2(x) with lines dt 2 lw 1.5 lc rgb "#555555" title "slope 2 (T^2)", \
             slope1(x) with lines dt 3 lw 1.5 lc rgb "#555555" title "slope 1 (T)"
    } else {
        plot for [i = 1:NK] SER(i) using S_T:(column(S_STEP) / 1e6) with linespoints lw 2 \
             pt kpt(CIDX[i]) ps 1.3 lc rgb kcolor(i) title ktitle(i), \
             slope1(x) with lines dt 3 lw 1.5 lc rgb "#555555" title "slope 1 (T)"
    }
    unset output
}
