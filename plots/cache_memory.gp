# cache_memory.gp - figure 3: resident KV-cache bytes vs sequence length
# (exact, from each strategy, read after the step at T). Dynamic grows
# linearly; static is preallocated, flat at its capacity; sliding is flat at
# its window; the quantized caches grow at about bits/32 of the f32 slope
# plus their scales; none keeps nothing.
#   gnuplot -c plots/cache_memory.gp out/bench.csv out/plots
plotdir = ARG0; while (strlen(plotdir) > 0 && plotdir[strlen(plotdir):strlen(plotdir)] ne "/") { plotdir = plotdir[1:strlen(plotdir) - 1] }
if (!exists("csv") && ARGC >= 1) { csv = ARG1 }
if (!exists("outdir") && ARGC >= 2) { outdir = ARG2 }
load (plotdir[1:1] eq "/" ? "" : "./") . plotdir . "common.gp"

set title "Resident KV-cache memory vs sequence length\n" . SUB
set xlabel "sequence length T (tokens held)"
set ylabel "resident cache memory (MiB)"
set xrange [0:*]
set yrange [0:*]
MiB = 1048576.0
set key outside right top font ",13" spacing 1.0
# Several caches hold exactly the reference's bytes (REF, dynamic in a
# default sweep: dynamic-concat wherever T is a power of two, and a paged
# cache whose pages fill, a hybrid of reference layers), so their points
# lie on its: the reference is drawn wide underneath, every series with its
# bytes at each of its T is drawn thin on top and says so in the legend,
# and all of them stay visible. Which ones, the rows say: REF's bytes per
# T, then each series' rows against them.
array REF_T[200]
array REF_B[200]
NR = 0
if (REF > 0) {
    stats SER(REF) using (NR < |REF_T| ? (NR = NR + 1, REF_T[NR] = column(S_T), REF_B[NR] = column(S_CBYTES), 0) : 0) \
        nooutput
}
ref_r(t, j) = j > NR ? NaN : (REF_T[j] == t ? REF_B[j] : ref_r(t, j + 1))
array SAME[100]
do for [i = 1:NK] {
    SAME[i] = 0
    if (REF > 0 && i != REF) {
        n_same = 0; n_diff = 0
        stats SER(i) using (ref_r(column(S_T), 1) == column(S_CBYTES) ? (n_same = n_same + 1) : (n_diff = n_diff + 1)) \
            nooutput
        SAME[i] = n_same > 0 && n_diff == 0
    }
}
lw_of(i) = i == REF ? 7 : 2
ps_of(i) = i == REF ? 2.6 : 1.3
ttl_of(i) = SAME[i] ? ktitle(i) . " (on " . KT[REF] . ": same bytes)" : ktitle(i)
do for [fmt in "png svg"] {
    eval TERM(fmt)
    set output OUTD . "/cache_memory." . fmt
    plot for [i = 1:NK] SER(i) using S_T:(column(S_CBYTES) / MiB) with linespoints lw lw_of(i) \
         pt kpt(CIDX[i]) ps ps_of(i) lc rgb kcolor(i) title ttl_of(i)
    unset output
}
