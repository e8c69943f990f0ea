# cache_memory.gp - figure 3: resident KV-cache bytes vs sequence length
# (exact, from each strategy, read after the step at T). Dynamic grows
# linearly; static is preallocated, flat at its capacity; sliding is flat at
# its window; the quantized caches grow at about bits/32 of the f32 slope
# plus their scales; none keeps nothing.
plotdir = system("dirname '" . ARG0 . "'")
load plotdir . "/common.gp"

set title "Resident KV-cache memory vs sequence length\n" . SUB
set xlabel "sequence length T (tokens held)"
set ylabel "resident cache memory (MiB)"
set xrange [0:*]
set yrange [0:*]
MiB = 1048576.0
set key at graph 0.02, graph 0.86 left top
# dynamic-concat holds exactly dynamic's bytes wherever T is a power of two
# (dynamic's capacity is then T too), so its points lie on dynamic's: dynamic
# is drawn wide and light underneath, dynamic-concat thin on top, and both
# stay visible.
lw_of(k) = k eq "dynamic" ? 7 : 2
ps_of(k) = k eq "dynamic" ? 2.6 : 1.3
ttl_of(k) = k eq "dynamic-concat" && has("dynamic") ? title(k) . " (on dynamic: same bytes at these T)" : title(k)
do for [fmt in "png svg"] {
    eval TERM(fmt)
    set output outdir . "/cache_memory." . fmt
    plot for [i = 1:words(KEYS)] DATA("rows", word(KEYS, i), "seq_len,cache_bytes") \
         using 1:($2 / MiB) with linespoints lw lw_of(word(KEYS, i)) pt ptype(word(KEYS, i)) \
         ps ps_of(word(KEYS, i)) lc rgb color(word(KEYS, i)) title ttl_of(word(KEYS, i))
    unset output
}
