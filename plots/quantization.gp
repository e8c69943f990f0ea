# quantization.gp - figure 5: what quantizing the cache buys and costs, per
# bit width. Left: memory saved against an f32 cache of the same tokens vs
# the logits' relative L2 error against the exact cache (one point per T).
# Right: how often the greedy token still agrees with the exact cache.
# The series are picked by their bits column (under 16: integer codes),
# never by name. A sweep without them draws both panels empty, labelled so.
#   gnuplot -c plots/quantization.gp out/bench.csv out/plots
plotdir = ARG0; while (strlen(plotdir) > 0 && plotdir[strlen(plotdir):strlen(plotdir)] ne "/") { plotdir = plotdir[1:strlen(plotdir) - 1] }
if (!exists("csv") && ARGC >= 1) { csv = ARG1 }
if (!exists("outdir") && ARGC >= 2) { outdir = ARG2 }
load (plotdir[1:1] eq "/" ? "" : "./") . plotdir . "common.gp"

# the quantized series: under 16 bits a value (integer codes), in file
# order, as series indices; the first cache with a window (WIN1) is lossy
# too beyond it, and is shown on the right for contrast
QI = ""
do for [i = 1:NK] { if (LBITS[i] < 16) { QI = QI . sprintf("%d ", i) } }
RI = QI . (WIN1 > 0 ? sprintf("%d", WIN1) : "")
qser(j) = int(word(QI, j))
rser(j) = int(word(RI, j))

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
    if (words(QI) > 0) {
        # the limit for long sequences: codes plus one (scale, min) pair of
        # 8 bytes per group, against 32 bits per f32 element
        do for [i = 1:words(QI)] {
            qb = LBITS[qser(i)]; qg = LGROUP[qser(i)]
            lim = 100 * (1 - (qb + 64 / qg) / 32)
            set arrow 10 + i from lim, graph 0 to lim, graph 1 nohead dt 3 lw 1.5 lc rgb kcolor(qser(i))
            set label 10 + i sprintf("long-T limit %.1f%%", lim) at lim, graph 0.03 left \
                rotate by 90 offset -0.6, 0 font ",11" tc rgb kcolor(qser(i))
        }
        plot for [i = 1:words(QI)] SER(qser(i)) \
             using (100 * (1 - column(S_CBYTES) / column(S_F32))):(column(S_ERR) > 0 ? column(S_ERR) : NaN) \
             with linespoints lw 1.5 pt kpt(CIDX[qser(i)]) ps 1.6 \
             lc rgb kcolor(qser(i)) title ktitle(qser(i)), \
             for [i = 1:words(QI)] SER(qser(i)) \
             using (100 * (1 - column(S_CBYTES) / column(S_F32))):(column(S_ERR) > 0 ? column(S_ERR) : NaN): \
             (sprintf("%.0f", column(S_T))) with labels \
             offset 0, 1 font ",10" tc rgb kcolor(qser(i)) notitle
        do for [i = 1:words(QI)] { unset arrow 10 + i; unset label 10 + i }
    } else {
        set label 1 "no rows of integer codes (under 16 bits) in this CSV" at graph 0.5, 0.5 center
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
    if (words(RI) > 0) {
        plot for [i = 1:words(RI)] SER(rser(i)) using S_T:(100 * column(S_MATCH)) \
             with linespoints lw 2 pt kpt(CIDX[rser(i)]) ps 1.3 \
             lc rgb kcolor(rser(i)) title ktitle(rser(i))
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
