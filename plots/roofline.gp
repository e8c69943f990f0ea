# roofline.gp - figure 6: achieved rates per row against the machine's
# limits measured in the same run (metadata read_gbps and sgemm_gflops).
# Left: analytic bytes a step must read / median step time, against the
# read bandwidth: decode steps are memory-bound. Right: analytic FLOPs /
# step time against the sgemm rate: the no-cache step is compute-bound.
#   gnuplot -c plots/roofline.gp out/bench.csv out/plots
plotdir = ARG0; while (strlen(plotdir) > 0 && plotdir[strlen(plotdir):strlen(plotdir)] ne "/") { plotdir = plotdir[1:strlen(plotdir) - 1] }
if (!exists("csv") && ARGC >= 1) { csv = ARG1 }
if (!exists("outdir") && ARGC >= 2) { outdir = ARG2 }
load (plotdir[1:1] eq "/" ? "" : "./") . plotdir . "common.gp"

RB = META("read_gbps")
L3 = META("l3_bytes")
L3MIB = strlen(L3) > 0 ? real(L3) / 1048576 : 0
SG = META("sgemm_gflops")
okrate(s) = strlen(s) > 0 && s ne "nan" && s ne "-nan"
do for [fmt in "png svg"] {
    eval TERM(fmt)
    set output OUTD . "/roofline." . fmt
    set multiplot layout 1,2 title "Achieved rates vs the machine's measured limits\n" . SUB
    set key inside top left box opaque font ",12"
    set logscale x 2
    set format x "%g"
    set xlabel "sequence length T"
    set yrange [0:*]
    set samples 2
    set offsets 0, 0, graph 0.45, 0

    set title "memory traffic (weights + visible cache)" . (L3MIB > 0 ? \
        sprintf("\n{/*0.75 above the dashed line: data served from the %.0f MiB L3 cache}", L3MIB) : "")
    set ylabel "achieved read rate (GB/s)"
    rb = okrate(RB) ? real(RB) : NaN
    plot for [i = 1:NK] SER(i) using S_T:(column(S_BYTES) / column(S_STEP)) with linespoints lw 2 \
         pt kpt(CIDX[i]) ps 1.2 lc rgb kcolor(i) title ktitle(i), \
         rb with lines dt 2 lw 2.5 lc rgb "#000000" \
         title (okrate(RB) ? sprintf("measured read bandwidth %.1f GB/s", rb) : "read bandwidth not measured")

    set title "arithmetic (all FLOPs of the step)\n{/*0.75 a no-cache step is GEMM work and runs near the sgemm line}"
    set ylabel "achieved GFLOP/s"
    sg = okrate(SG) ? real(SG) : NaN
    plot for [i = 1:NK] SER(i) using S_T:(column(S_FLOPS) / column(S_STEP)) with linespoints lw 2 \
         pt kpt(CIDX[i]) ps 1.2 lc rgb kcolor(i) notitle, \
         sg with lines dt 2 lw 2.5 lc rgb "#000000" \
         title (okrate(SG) ? sprintf("measured sgemm %.0f GFLOP/s", sg) : "sgemm not measured")
    unset multiplot
    unset output
}
