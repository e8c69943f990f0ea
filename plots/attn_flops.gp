# attn_flops.gp - figure 2: attention FLOPs of one decode step vs sequence
# length (analytic counts from the rows, log-log). With a cache a step's
# one query attends to T keys: linear. Without one, all T queries are
# recomputed, each attending to its prefix: T(T+1)/2 pairs, quadratic.
# A cache with a window (sliding) stops at it.
#   gnuplot -c plots/attn_flops.gp out/bench.csv out/plots
plotdir = ARG0; while (strlen(plotdir) > 0 && plotdir[strlen(plotdir):strlen(plotdir)] ne "/") { plotdir = plotdir[1:strlen(plotdir) - 1] }
if (!exists("csv") && ARGC >= 1) { csv = ARG1 }
if (!exists("outdir") && ARGC >= 2) { outdir = ARG2 }
load (plotdir[1:1] eq "/" ? "" : "./") . plotdir . "common.gp"

set title "Attention FLOPs per decode step vs sequence length\n" . SUB
set xlabel "sequence length T (tokens attended by the step)"
set ylabel "attention FLOPs per step (QK^T + PV, all layers)"
set logscale x 2
set logscale y 10
set format x "%g"
set format y "10^{%L}"
set key outside right top font ",13" spacing 1.0
# The annotations take the colour of the series they point at, found by
# what the rows say (common.gp): the cache-less one, the exact reference (or
# the first cache that matches it), the first one with a window.
CACHED = REF > 0 ? REF : EXACT1
if (NC1 > 0) {
    set label 1 "no cache: ∝ T(T+1)/2 (every query again)" \
        at graph 0.40, graph 0.62 font ",14" tc rgb kcolor(NC1)
}
set label 2 "cached (the lines coincide): ∝ T" \
    at graph 0.08, graph 0.35 font ",14" tc rgb (CACHED > 0 ? kcolor(CACHED) : "#555555")
if (WIN1 > 0) {
    set label 3 KT[WIN1] . ": flat at its window" at graph 0.56, graph 0.20 font ",14" tc rgb kcolor(WIN1)
}
do for [fmt in "png svg"] {
    eval TERM(fmt)
    set output OUTD . "/attn_flops." . fmt
    plot for [i = 1:NK] SER(i) using S_T:S_AFLOPS with linespoints lw 2 pt kpt(CIDX[i]) ps 1.3 \
         lc rgb kcolor(i) title ktitle(i)
    unset output
}
