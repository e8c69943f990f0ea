# latency.gp - figure 1: decode step latency vs sequence length, linear
# axes: the no-cache step grows super-linearly and dwarfs the cached ones,
# whose steps grow only linearly (they read a cache of T tokens).
plotdir = system("dirname '" . ARG0 . "'")
load plotdir . "/common.gp"

set title "Decode step latency vs sequence length\n" . SUB
set xlabel "sequence length T (tokens attended by the step)"
set ylabel "median step latency (ms)"
set xrange [0:*]
set yrange [0:*]
do for [fmt in "png svg"] {
    eval TERM(fmt)
    set output outdir . "/latency." . fmt
    plot for [i = 1:words(KEYS)] DATA("rows", word(KEYS, i), "seq_len,step_ms") \
         using 1:2 with linespoints lw 2 pt ptype(word(KEYS, i)) ps 1.3 \
         lc rgb color(word(KEYS, i)) title title(word(KEYS, i))
    unset output
}
