# cumulative_time.gp - figure 4: wall time to generate N tokens one by one,
# the integral of step latency over T (trapezoids between the measured T;
# the steps below the first measured T are counted at its latency). The
# no-cache curve bends like T^3, the cached ones like T^2 at most.
plotdir = system("dirname '" . ARG0 . "'")
load plotdir . "/common.gp"

do for [fmt in "png svg"] {
    eval TERM(fmt)
    set output outdir . "/cumulative_time." . fmt
    set multiplot layout 1,2 title "Cumulative time to generate N tokens, one decode step each\n" . SUB
    set title "linear axes"
    set xlabel "tokens generated N"
    set ylabel "total decode time (s)"
    set xrange [0:*]
    set yrange [0:*]
    plot for [i = 1:words(KEYS)] DATA("cumul", word(KEYS, i), "x") \
         using 1:2 with linespoints lw 2 pt ptype(word(KEYS, i)) ps 1.2 \
         lc rgb color(word(KEYS, i)) title title(word(KEYS, i))
    set title "log-log"
    set key off
    set logscale xy
    set format x "%g"
    set format y "10^{%L}"
    set logscale x 2
    set xrange [*:*]
    set yrange [*:*]
    plot for [i = 1:words(KEYS)] DATA("cumul", word(KEYS, i), "x") \
         using 1:2 with linespoints lw 2 pt ptype(word(KEYS, i)) ps 1.2 \
         lc rgb color(word(KEYS, i)) notitle
    unset logscale xy
    set format x "%g"
    set format y "%g"
    set key on
    unset multiplot
    unset output
}
