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
# dynamic-concat holds exactly dynamic's bytes wherever T is a power of two
# (dynamic's capacity is then T too), so its points lie on dynamic's: dynamic
# is drawn wide and light underneath, dynamic-concat thin on top, and both
# stay visible.
lw_of(k) = k eq "dynamic" ? 7 : 2
ps_of(k) = k eq "dynamic" ? 2.6 : 1.3
ttl_of(i) = K[i] eq "dynamic-concat" && has("dynamic") ? ktitle(i) . " (on dynamic: same bytes)" : ktitle(i)
do for [fmt in "png svg"] {
    eval TERM(fmt)
    set output OUTD . "/cache_memory." . fmt
    plot for [i = 1:NK] SER(i) using S_T:(column(S_CBYTES) / MiB) with linespoints lw lw_of(K[i]) \
         pt kpt(CIDX[i]) ps ps_of(K[i]) lc rgb kcolor(i) title ttl_of(i)
    unset output
}
