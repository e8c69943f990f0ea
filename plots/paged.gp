# paged.gp - paged vs contiguous decode (a sweep CSV, out/bench.csv): left,
# the median decode step time vs seq_len of the contiguous caches (dynamic,
# static) and the paged ones (paged-16, paged-128: blocks read in place
# through one paged span); right, the speed of each paged series relative
# to dynamic in the same run (dynamic step / paged step; issue 12's target
# for paged-16 at T >= 2048 is at least 0.95).
#   gnuplot -c plots/paged.gp out/bench.csv out/plots
plotdir = ARG0; while (strlen(plotdir) > 0 && plotdir[strlen(plotdir):strlen(plotdir)] ne "/") { plotdir = plotdir[1:strlen(plotdir) - 1] }
if (!exists("csv") && ARGC >= 1) { csv = ARG1 }
if (!exists("outdir") && ARGC >= 2) { outdir = ARG2 }
load (plotdir[1:1] eq "/" ? "" : "./") . plotdir . "common.gp"

# the series present with rows at some T (a CSV without seq_len has none)
hasT(k) = has(k) && LT[kidx(k)] > 0
PKEYS = ""
do for [k in "dynamic static paged-16 paged-128"] { if (hasT(k)) { PKEYS = PKEYS . k . " " } }
PAGED = ""
do for [k in "paged-16 paged-128"] { if (hasT(k) && hasT("dynamic")) { PAGED = PAGED . k . " " } }
# dynamic's median step per T, then per paged series: T and dynamic's step / its step
array DYN_T[200]
array DYN_S[200]
ND = 0
if (words(PAGED) > 0) {
    stats SER(kidx("dynamic")) using (ND < |DYN_T| ? (ND = ND + 1, DYN_T[ND] = column(S_T), \
          DYN_S[ND] = column(S_STEP), 0) : 0) nooutput
}
dyn_r(t, j) = j > ND ? NaN : (DYN_T[j] == t ? DYN_S[j] : dyn_r(t, j + 1))
dynstep(t) = dyn_r(t, 1)
do for [p = 1:words(PAGED)] {
    eval sprintf("set table $R%d", p)
    plot SER(kidx(word(PAGED, p))) using (column(S_T)):(dynstep(column(S_T)) / column(S_STEP)) \
         with table if (dynstep(column(S_T)) > 0 && column(S_STEP) > 0)
    unset table
}
RATIO(p) = sprintf("$R%d", p)

do for [fmt in "png svg"] {
    eval TERM(fmt)
    set output OUTD . "/paged." . fmt
    set multiplot layout 1,2 title "Paged vs contiguous KV cache, decode (" . kv_esc1(META("threads")) . " threads)"
    set key top left box opaque font ",12"
    set logscale x 2
    set format x "%g"
    set xlabel "seq\\_len T (tokens attended)"
    set title "median decode step"
    set ylabel "step time (ms)"
    if (words(PKEYS) > 0) {
        plot for [i = 1:words(PKEYS)] SER(kidx(word(PKEYS, i))) using S_T:(column(S_STEP) / 1e6) \
             with linespoints lw 2 pt ptype(word(PKEYS, i)) ps 1.4 lc rgb color(word(PKEYS, i)) \
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
        plot for [p = 1:words(PAGED)] RATIO(p) using 1:2 with linespoints lw 2 \
             pt 7 ps 1.4 lc rgb color(word(PAGED, p)) title word(PAGED, p), \
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
