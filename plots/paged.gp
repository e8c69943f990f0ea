# paged.gp - paged vs contiguous decode (a sweep CSV, out/bench.csv): left,
# the median decode step time vs seq_len of the contiguous caches (dynamic,
# static) and the paged ones (paged-16, paged-128: blocks read in place
# through one paged span); right, the speed of each paged series relative
# to dynamic in the same run (dynamic step / paged step; issue 12's target
# for paged-16 at T >= 2048 is at least 0.95).
# No column says which caches are the contiguous ones, so which series
# play which part is data: this figure's rows of bench/data/figures.tsv
# (roles base, contiguous, compared; common.gp reads them), and this script
# names none. The figure's name is its script's (FIG, from ARG0), as it is
# also a strategy's.
#   gnuplot -c plots/paged.gp out/bench.csv out/plots
plotdir = ARG0; while (strlen(plotdir) > 0 && plotdir[strlen(plotdir):strlen(plotdir)] ne "/") { plotdir = plotdir[1:strlen(plotdir) - 1] }
if (!exists("csv") && ARGC >= 1) { csv = ARG1 }
if (!exists("outdir") && ARGC >= 2) { outdir = ARG2 }
FIG = ARG0[strlen(plotdir) + 1:]
FIG = strlen(FIG) > 3 && FIG[strlen(FIG) - 2:] eq ".gp" ? FIG[1:strlen(FIG) - 3] : FIG
load (plotdir[1:1] eq "/" ? "" : "./") . plotdir . "common.gp"

# the series of each role with rows at some T (a CSV without seq_len has
# none), as indices: the left panel's, the compared ones (with the base), the base
hasT(i) = i > 0 && LT[i] > 0
BASE = words(ROLE("base")) > 0 ? int(word(ROLE("base"), 1)) : 0
BT = hasT(BASE) ? KT[BASE] : "the base"
PI = ""
do for [w in ROLE("contiguous") . ROLE("compared")] { if (hasT(int(w))) { PI = PI . w . " " } }
QI = ""
do for [w in ROLE("compared")] { if (hasT(int(w)) && hasT(BASE)) { QI = QI . w . " " } }
pser(j) = int(word(PI, j))
qser(j) = int(word(QI, j))
# the base's median step per T, then per paged series: T and the base's step / its step
array BASE_T[200]
array BASE_S[200]
NB = 0
if (words(QI) > 0) {
    stats SER(BASE) using (NB < |BASE_T| ? (NB = NB + 1, BASE_T[NB] = column(S_T), \
          BASE_S[NB] = column(S_STEP), 0) : 0) nooutput
}
base_r(t, j) = j > NB ? NaN : (BASE_T[j] == t ? BASE_S[j] : base_r(t, j + 1))
basestep(t) = base_r(t, 1)
do for [p = 1:words(QI)] {
    eval sprintf("set table $R%d", p)
    plot SER(qser(p)) using (column(S_T)):(basestep(column(S_T)) / column(S_STEP)) \
         with table if (basestep(column(S_T)) > 0 && column(S_STEP) > 0)
    unset table
}
RATIO(p) = sprintf("$R%d", p)

do for [fmt in "png svg"] {
    eval TERM(fmt)
    set output OUTD . "/" . FIG . "." . fmt
    set multiplot layout 1,2 title "Paged vs contiguous KV cache, decode (" . kv_esc1(META("threads")) . " threads)"
    set key top left box opaque font ",12"
    set logscale x 2
    set format x "%g"
    set xlabel "seq\\_len T (tokens attended)"
    set title "median decode step"
    set ylabel "step time (ms)"
    if (words(PI) > 0) {
        plot for [i = 1:words(PI)] SER(pser(i)) using S_T:(column(S_STEP) / 1e6) \
             with linespoints lw 2 pt kpt(CIDX[pser(i)]) ps 1.4 lc rgb kcolor(pser(i)) \
             title KT[pser(i)]
    } else {
        set label 1 "no series of this figure (bench/data/figures.tsv) in this CSV" at graph 0.5, 0.5 center
        set xrange [1:2]
        set yrange [0:1]
        plot NaN notitle
        unset label 1
        set autoscale xy
    }
    set title "speed relative to " . BT . " (same run)"
    set ylabel BT . " step / series step"
    set yrange [0:*]
    if (words(QI) > 0) {
        plot for [p = 1:words(QI)] RATIO(p) using 1:2 with linespoints lw 2 \
             pt 7 ps 1.4 lc rgb kcolor(qser(p)) title KT[qser(p)], \
             0.95 with lines dt 2 lc rgb "#d62728" title "target 0.95"
    } else {
        set label 1 "nothing to compare with " . BT . " in this CSV" at graph 0.5, 0.5 center
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
