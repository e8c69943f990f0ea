# breakdown.gp - figure 7: where a decode step's time goes. Left: the
# dynamic cache's median step split into the attention kernel (kv_attn,
# timed inside the step) and everything else (GEMMs, norms, cache update).
# Right: the attention share of the step for every strategy.
plotdir = system("dirname '" . ARG0 . "'")
load plotdir . "/common.gp"

BKEY = has("dynamic") ? "dynamic" : word(KEYS, 1)
do for [fmt in "png svg"] {
    eval TERM(fmt)
    set output outdir . "/breakdown." . fmt
    set multiplot layout 1,2 title "Decode step time: attention vs the rest\n" . SUB
    set title BKEY . ": median step split"
    set style data histograms
    set style histogram rowstacked
    set style fill solid 0.85 border -1
    set boxwidth 0.75
    set key inside top left box opaque
    set xlabel "sequence length T"
    set ylabel "time per step (ms)"
    set yrange [0:*]
    set xtics rotate by -45
    plot DATA("rows", BKEY, "seq_len,attn_ns_median,rest_ns") using ($2 / 1e6):xtic(1) \
             title "attention kernel" lc rgb "#1f77b4", \
         '' using ($3 / 1e6) title "rest (GEMMs, norms, cache update)" lc rgb "#bbbbbb"
    set xtics norotate
    set style data linespoints
    set title "attention share of the step, every strategy"
    set ylabel "attention / step time (%)"
    set yrange [0:100]
    set logscale x 2
    set format x "%g"
    set key inside top left box opaque font ",12"
    plot for [i = 1:words(KEYS)] DATA("rows", word(KEYS, i), "seq_len,attn_ns_median,step_ns_median") \
         using 1:(100 * $2 / $3) with linespoints lw 2 pt ptype(word(KEYS, i)) ps 1.2 \
         lc rgb color(word(KEYS, i)) title title(word(KEYS, i))
    unset logscale x
    unset multiplot
    unset output
}
