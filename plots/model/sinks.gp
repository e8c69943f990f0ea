# plots/model/sinks.gp - attention sinks in kvlab's trained model
# (bench/py/attn_sinks.py): a heatmap of the attention weight every head puts
# on the first token of the stream, against the query position. A sink head
# is a bright row; a head that ignores the first token fades like 1/(t+1).
#   gnuplot -e "dat='out/attn_sinks.dat'; outdir='out/plots'; heads=6; bucket=64" plots/model/sinks.gp
#   gnuplot -c plots/model/sinks.gp out/attn_sinks.dat out/plots 6 64
# The data file is a matrix: one row per (layer, head), layer-major, one
# column per bucket of `bucket` positions.
if (!exists("dat")) dat = ARGC >= 1 ? ARG1 : "out/attn_sinks.dat"
if (!exists("outdir")) outdir = ARGC >= 2 ? ARG2 : "out/plots"
# (a number argument is taken only when it is digits)
kv_dig1(s) = strlen(s) == 0 ? 1 : (strstrt("0123456789", s[1:1]) > 0 ? kv_dig1(s[2:]) : 0)
kv_digits(s) = strlen(s) > 0 && strlen(s) <= 9 && kv_dig1(s)
if (!exists("heads")) heads = (ARGC >= 3 && kv_digits(ARG3)) ? int(ARG3) : 6
if (!exists("bucket")) bucket = (ARGC >= 4 && kv_digits(ARG4)) ? int(ARG4) : 64
if (heads < 1) heads = 1
if (bucket < 1) bucket = 1
if (!exists("context")) context = 512
# the output folder: mkdir -p through a pipe whose command is a constant, the
# path on its standard input (xargs hands it to mkdir as one argument); a
# relative path gets "./" in front, so it never names a command or a datablock
if (strstrt(outdir, "\n") > 0 || strstrt(dat, "\n") > 0) { print ARG0 . ": a path holding a newline is refused"; exit status 2 }
kvpath(p) = p[1:1] eq "/" ? p : "./" . p
DAT = kvpath(dat)
OUTD = kvpath(outdir)
set print "| xargs -d '\\n' mkdir -p --"
print OUTD
unset print
stats DAT matrix nooutput
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
    set output OUTD . "/attn_sinks." . fmt
    plot DAT matrix using (($1 + 0.5) * bucket):2:3 with image
    unset output
}
