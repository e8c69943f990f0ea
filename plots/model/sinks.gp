# plots/model/sinks.gp - attention sinks in kvlab's trained model
# (bench/attn_sinks.py): a heatmap of the attention weight every head puts
# on the first token of the stream, against the query position. A sink head
# is a bright row; a head that ignores the first token fades like 1/(t+1).
#   gnuplot -e "dat='out/attn_sinks.dat'; outdir='out/plots'; heads=6; bucket=64" plots/model/sinks.gp
# The data file is a matrix: one row per (layer, head), layer-major, one
# column per bucket of `bucket` positions.
if (!exists("dat")) dat = "out/attn_sinks.dat"
if (!exists("outdir")) outdir = "out/plots"
if (!exists("heads")) heads = 6
if (!exists("bucket")) bucket = 64
if (!exists("context")) context = 512
system("mkdir -p '" . outdir . "'")
stats dat matrix nooutput
rows = STATS_size_y
cols = STATS_size_x
set title "Attention weight on the first token, per layer.head and query position\n{/*0.7 mean over the pieces of held-out text; uniform attention would give 1/(t+1)}"
set xlabel "query position t (bytes)"
set ylabel "layer.head"
set xrange [0:cols * bucket]
set yrange [-0.5:rows - 0.5] reverse
set cblabel "weight on position 0"
set cbrange [0:1]
set palette defined (0 "#ffffff", 0.05 "#fde0c5", 0.2 "#f9a66c", 0.5 "#e8590c", 1 "#7f2704")
set ytics () font ",12"
do for [r = 0:rows - 1] { set ytics add (sprintf("%d.%d", r / heads, r % heads) r) }
set arrow 1 from context, graph 0 to context, graph 1 nohead dt 2 lw 1.5 lc rgb "#333333" front
unset key
do for [fmt in "png svg"] {
    if (fmt eq "png") {
        set terminal pngcairo size 1280,800 enhanced font "DejaVu Sans,17" linewidth 2
    } else {
        set terminal svg size 1280,800 enhanced font "DejaVu Sans,17" linewidth 2 background "#ffffff"
    }
    set output outdir . "/attn_sinks." . fmt
    plot dat matrix using (($1 + 0.5) * bucket):2:3 with image
    unset output
}
