# quantization.gp - figure 5: what quantizing the cache buys and costs, per
# bit width. Left: memory saved against an f32 cache of the same tokens vs
# the logits' relative L2 error against the exact cache (one point per T).
# Right: how often the greedy token still agrees with the exact cache.
# A sweep without these strategies draws both panels empty, labelled so.
#   gnuplot -c plots/quantization.gp out/bench.csv out/plots
plotdir = ARG0; while (strlen(plotdir) > 0 && plotdir[strlen(plotdir):strlen(plotdir)] ne "/") { plotdir = plotdir[1:strlen(plotdir) - 1] }
if (!exists("csv") && ARGC >= 1) { csv = ARG1 }
if (!exists("outdir") && ARGC >= 2) { outdir = ARG2 }
load (plotdir[1:1] eq "/" ? "" : "./") . plotdir . "common.gp"

QKEYS = ""
do for [k in "quantized-int8 quantized-int4 quantized-int2 kivi-2 kivi-4"] {
    if (has(k)) { QKEYS = QKEYS . k . " " }
}
# sliding beyond its window is lossy too: shown on the right for contrast
RKEYS = QKEYS . (has("sliding") ? "sliding" : "")

do for [fmt in "png svg"] {
    eval TERM(fmt)
    set output OUTD . "/quantization." . fmt
    set multiplot layout 1,2 title "Quantized KV cache: memory saved vs logits error\n" . SUB
    set key inside bottom left box opaque
    set title "memory saved vs error (points labelled with T)"
    set xlabel "memory saved vs f32 cache (%)"
    set ylabel "relative L2 error of logits"
    set logscale y 10
    set format y "10^{%L}"
    set xrange [0:100]
    set autoscale y
    if (words(QKEYS) > 0) {
        # the limit for long sequences: codes plus one (scale, min) pair of
        # 8 bytes per group, against 32 bits per f32 element
        do for [i = 1:words(QKEYS)] {
            qi = kidx(word(QKEYS, i))
            qb = LBITS[qi]; qg = LGROUP[qi]
            lim = 100 * (1 - (qb + 64 / qg) / 32)
            set arrow 10 + i from lim, graph 0 to lim, graph 1 nohead dt 3 lw 1.5 lc rgb color(word(QKEYS, i))
            set label 10 + i sprintf("long-T limit %.1f%%", lim) at lim, graph 0.03 left \
                rotate by 90 offset -0.6, 0 font ",11" tc rgb color(word(QKEYS, i))
        }
        plot for [i = 1:words(QKEYS)] SER(kidx(word(QKEYS, i))) \
             using (100 * (1 - column(S_CBYTES) / column(S_F32))):(column(S_ERR) > 0 ? column(S_ERR) : NaN) \
             with linespoints lw 1.5 pt ptype(word(QKEYS, i)) ps 1.6 \
             lc rgb color(word(QKEYS, i)) title title(word(QKEYS, i)), \
             for [i = 1:words(QKEYS)] SER(kidx(word(QKEYS, i))) \
             using (100 * (1 - column(S_CBYTES) / column(S_F32))):(column(S_ERR) > 0 ? column(S_ERR) : NaN): \
             (sprintf("%.0f", column(S_T))) with labels \
             offset 0, 1 font ",10" tc rgb color(word(QKEYS, i)) notitle
        do for [i = 1:words(QKEYS)] { unset arrow 10 + i; unset label 10 + i }
    } else {
        set label 1 "no quantized rows in this CSV" at graph 0.5, 0.5 center
        set yrange [1e-4:1]
        plot NaN notitle
        unset label 1
    }
    set title "greedy-token agreement with the exact cache"
    set xlabel "sequence length T"
    set ylabel "steps with the same argmax token (%)"
    unset logscale y
    set format y "%g"
    set logscale x 2
    set format x "%g"
    set xrange [*:*]
    set yrange [0:105]
    if (words(RKEYS) > 0) {
        plot for [i = 1:words(RKEYS)] SER(kidx(word(RKEYS, i))) using S_T:(100 * column(S_MATCH)) \
             with linespoints lw 2 pt ptype(word(RKEYS, i)) ps 1.3 \
             lc rgb color(word(RKEYS, i)) title title(word(RKEYS, i))
    } else {
        set label 1 "no lossy rows in this CSV" at graph 0.5, 0.5 center
        set xrange [1:2]
        plot NaN notitle
        unset label 1
    }
    unset logscale x
    unset multiplot
    unset output
}
