# roofline.gp - figure 6: achieved rates per row against the machine's
# limits measured in the same run (metadata read_gbps and sgemm_gflops).
# Left: analytic bytes a step must read / median step time, against the
# read bandwidth: decode steps are memory-bound. Right: analytic FLOPs /
# step time against the sgemm rate: the no-cache step is compute-bound.
plotdir = system("dirname '" . ARG0 . "'")
load plotdir . "/common.gp"

RB = META("read_gbps")
SG = META("sgemm_gflops")
okrate(s) = strlen(s) > 0 && s ne "nan" && s ne "-nan"
do for [fmt in "png svg"] {
    eval TERM(fmt)
    set output outdir . "/roofline." . fmt
    set multiplot layout 1,2 title "Achieved rates vs the machine's measured limits\n" . SUB
    set key inside bottom right box opaque font ",13"
    set logscale x 2
    set format x "%g"
    set xlabel "sequence length T"
    set yrange [0:*]

    set title "memory traffic (weights + visible cache)"
    set ylabel "achieved read rate (GB/s)"
    if (okrate(RB)) {
        set arrow 1 from graph 0, first real(RB) to graph 1, first real(RB) nohead dt 2 lw 2 lc rgb "#000000"
        set label 1 sprintf("measured read bandwidth %.1f GB/s", real(RB)) at graph 0.02, first real(RB) offset 0,0.7 font ",13"
        set yrange [0:real(RB) * 1.15]
    }
    plot for [i = 1:words(KEYS)] DATA("rows", word(KEYS, i), "seq_len,bytes_step,step_ns_median") \
         using 1:($2 / $3) with linespoints lw 2 pt ptype(word(KEYS, i)) ps 1.2 \
         lc rgb color(word(KEYS, i)) title title(word(KEYS, i))
    unset arrow 1
    unset label 1
    set yrange [0:*]

    set title "arithmetic (all FLOPs of the step)"
    set ylabel "achieved GFLOP/s"
    if (okrate(SG)) {
        set arrow 1 from graph 0, first real(SG) to graph 1, first real(SG) nohead dt 2 lw 2 lc rgb "#000000"
        set label 1 sprintf("measured sgemm %.0f GFLOP/s", real(SG)) at graph 0.02, first real(SG) offset 0,0.7 font ",13"
        set yrange [0:real(SG) * 1.15]
    }
    plot for [i = 1:words(KEYS)] DATA("rows", word(KEYS, i), "seq_len,flops_step,step_ns_median") \
         using 1:($2 / $3) with linespoints lw 2 pt ptype(word(KEYS, i)) ps 1.2 \
         lc rgb color(word(KEYS, i)) notitle
    unset arrow 1
    unset label 1
    unset multiplot
    unset output
}
