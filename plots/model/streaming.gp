# plots/model/streaming.gp - StreamingLLM's experiment on kvlab's trained model
# (bench/scripts/streaming.sh): bits per byte against the position in a stream
# several times longer than the 512-byte training context, one line per
# cache configuration. Not a bench.csv figure: `make streaming` draws it.
#   gnuplot -e "dat='out/streaming.dat'; outdir='out/plots'" plots/model/streaming.gp
#   gnuplot -c plots/model/streaming.gp out/streaming.dat out/plots
# The data file holds one block per configuration (a quoted label line, then
# "position bits_per_byte" rows), blocks separated by two blank lines.
if (!exists("dat")) dat = ARGC >= 1 ? ARG1 : "out/streaming.dat"
if (!exists("outdir")) outdir = ARGC >= 2 ? ARG2 : "out/plots"
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
set grid lw 0.5 lc rgb "#cccccc"
set border lw 1
set key inside top left box opaque samplen 2 font ",15"
set title "Loss vs position in a long stream (held-out fortunes)\n{/*0.7 mean per bucket of positions over the pieces of the text; the model was trained on " . context . "-byte windows}"
set xlabel "position in the stream (bytes since the cache was empty)"
set ylabel "bits per byte"
set xrange [0:*]
set yrange [0:*]
set arrow 1 from context, graph 0 to context, graph 1 nohead dt 2 lw 1.5 lc rgb "#555555"
set label 1 "training context" at context, graph 0.04 offset 0.5, 0 font ",13" tc rgb "#555555"
COLORS = "#d62728 #1f77b4 #2ca02c #9467bd #ff7f0e #8c564b #e377c2 #17becf"
do for [fmt in "png svg"] {
    if (fmt eq "png") {
        set terminal pngcairo size 1280,800 enhanced font "DejaVu Sans,17" linewidth 2
    } else {
        set terminal svg size 1280,800 enhanced font "DejaVu Sans,17" linewidth 2 background "#ffffff"
    }
    set output OUTD . "/streaming." . fmt
    # thinner, dashed lines for the later configurations, so a line that
    # coincides with an earlier one still shows
    plot for [i = 0:*] DAT index i using 1:2 with linespoints lw 4 - i % 3 \
         dashtype i % 4 + 1 pt 5 + 2 * (i % 4) ps 1.1 lc rgb word(COLORS, i % 8 + 1) \
         title columnheader(1)
    unset output
}
