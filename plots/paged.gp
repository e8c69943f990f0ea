# paged.gp - paged vs contiguous decode (a sweep CSV, out/bench.csv): left,
# the median decode step time vs seq_len of the contiguous caches (dynamic,
# static) and the paged ones (paged-16, paged-128: blocks read in place
# through one paged span); right, the speed of each paged series relative
# to dynamic in the same run (dynamic step / paged step; issue 12's target
# for paged-16 at T >= 2048 is at least 0.95).
#   gnuplot -e "csv='out/bench.csv'; outdir='out/plots'" plots/paged.gp
plotdir = system("dirname '" . ARG0 . "'")
load plotdir . "/common.gp"

# the series present with rows at some T (a CSV without seq_len has none)
hasT(k) = has(k) && LASTT(k) ne "" && LASTT(k) ne "NaN"
PKEYS = ""
do for [k in "dynamic static paged-16 paged-128"] { if (hasT(k)) { PKEYS = PKEYS . k . " " } }
PAGED = ""
do for [k in "paged-16 paged-128"] { if (hasT(k) && hasT("dynamic")) { PAGED = PAGED . k . " " } }
pcolor(k) = k eq "paged-16" ? "#bcbd22" : k eq "paged-128" ? "#393b79" : color(k)
# seq_len and dynamic's median step / k's, for the T both have
RATIO(k) = sprintf("< awk -F, -v a='%s' -v b=dynamic '/^[ \\t]*#/ || /^[ \\t]*$/ { next } " . \
    "!h++ { for (i = 1; i <= NF; i++) c[$i] = i; next } " . \
    "$c[\"label\"] == a { x[$c[\"seq_len\"]] = $c[\"step_ns_median\"] } " . \
    "$c[\"label\"] == b { y[$c[\"seq_len\"]] = $c[\"step_ns_median\"] } " . \
    "END { for (t in x) if ((t in y) && x[t] > 0) print t, y[t] / x[t] }' '%s' | sort -n", k, csv)

do for [fmt in "png svg"] {
    eval TERM(fmt)
    set output outdir . "/paged." . fmt
    set multiplot layout 1,2 title "Paged vs contiguous KV cache, decode (" . META("threads") . " threads)"
    set key top left box opaque font ",12"
    set logscale x 2
    set format x "%g"
    set xlabel "seq\\_len T (tokens attended)"
    set title "median decode step"
    set ylabel "step time (ms)"
    if (words(PKEYS) > 0) {
        plot for [i = 1:words(PKEYS)] DATA("rows", word(PKEYS, i), "seq_len,step_ms") using 1:2 \
             with linespoints lw 2 pt ptype(word(PKEYS, i)) ps 1.4 lc rgb pcolor(word(PKEYS, i)) \
             title word(PKEYS, i)
    } else {
        set label 1 "no dynamic, static or paged rows in this CSV" at graph 0.5, 0.5 center
        set xrange [1:2]
        set yrange [0:1]
        plot NaN notitle
        unset label 1
        set autoscale xy
    }
    set title "paged speed relative to dynamic (same run)"
    set ylabel "dynamic step / paged step"
    set yrange [0:*]
    if (words(PAGED) > 0) {
        plot for [i = 1:words(PAGED)] RATIO(word(PAGED, i)) using 1:2 with linespoints lw 2 \
             pt 7 ps 1.4 lc rgb pcolor(word(PAGED, i)) title word(PAGED, i), \
             0.95 with lines dt 2 lc rgb "#d62728" title "target 0.95"
    } else {
        set label 1 "no paged and dynamic rows in this CSV" at graph 0.5, 0.5 center
        set xrange [1:2]
        set yrange [0:1]
        plot NaN notitle
        unset label 1
        set autoscale xy
    }
    set autoscale y
    unset multiplot
    unset logscale x
}
