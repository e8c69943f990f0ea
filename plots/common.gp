# common.gp - loaded by every plot script (not a figure itself): input and
# output paths, the fixed colour and point type of each series, and the
# data selector (select.awk) as gnuplot string functions.
#
# Usage from a figure script, run from anywhere:
#   gnuplot -e "csv='out/bench.csv'; outdir='out/plots'" plots/NAME.gp
# The figure script sets plotdir from ARG0 before loading this file.

if (!exists("csv")) csv = "out/bench.csv"
if (!exists("outdir")) outdir = "out/plots"
system("mkdir -p '" . outdir . "'")

set datafile separator whitespace
set datafile missing "NaN"

# ---------------------------------------------------------------- selectors
# AWK(mode, key, cols): the shell command; DATA(...): a gnuplot data source.
AWK(mode, key, cols) = sprintf("awk -v mode=%s -v key=%s -v cols=%s -f '%s/select.awk' '%s'", \
                               mode, key, cols, plotdir, csv)
DATA(mode, key, cols) = "< " . AWK(mode, key, cols)
META(k) = system(AWK("meta", k, "x"))
LAST(key, column) = system(AWK("rows", key, "seq_len," . column) . " | tail -n 1 | cut -d' ' -f2")
FIRSTT(key) = system(AWK("rows", key, "seq_len") . " | head -n 1")
LASTT(key) = system(AWK("rows", key, "seq_len") . " | tail -n 1")
KEYS = system(AWK("keys", "x", "x"))
has(k) = strstrt(" " . KEYS . " ", " " . k . " ") > 0

# ---------------------------------------------------------------- series style
ALLKEYS = "none dynamic dynamic-concat static sliding quantized-int8 quantized-int4 quantized-int2 paged sinks sinks-reindex h2o hybrid dynamic-f16 dynamic-bf16 kivi-2 kivi-4"
COLORS  = "#d62728 #1f77b4 #17becf #2ca02c #9467bd #ff7f0e #8c564b #e377c2 #bcbd22 #393b79 #637939 #843c39 #7b4173 #6b6ecf #9c9ede #d6616b #e7969c"
POINTS  = "7 5 13 9 11 15 4 6 8 10 12 14 3 2 1 16 17"
idx(k, i) = i > words(ALLKEYS) ? 0 : (word(ALLKEYS, i) eq k ? i : idx(k, i + 1))
color(k) = idx(k, 1) > 0 ? word(COLORS, idx(k, 1)) : "#7f7f7f"
ptype(k) = idx(k, 1) > 0 ? int(word(POINTS, idx(k, 1))) : 1
SLIDING_W = has("sliding") ? LAST("sliding", "window") : ""
title(k) = k eq "none" ? "none (no cache: full re-run)" : \
           k eq "sliding" ? "sliding (window " . SLIDING_W . ")" : \
           k eq "quantized-int8" ? "quantized int8" : \
           k eq "quantized-int4" ? "quantized int4" : \
           k eq "quantized-int2" ? "quantized int2" : k

# ---------------------------------------------------------------- output
# eval TERM(fmt) then set output outdir."/NAME.".fmt, for fmt in "png svg".
FONT = "DejaVu Sans,17"
TERM(fmt) = fmt eq "png" ? \
    "set terminal pngcairo size 1280,800 enhanced font '" . FONT . "' linewidth 2" : \
    "set terminal svg size 1280,800 enhanced font '" . FONT . "' linewidth 2 background '#ffffff'"

# Common look: grid, legend box, axis formats.
set grid lw 0.5 lc rgb "#cccccc"
set key inside top left box opaque samplen 2 spacing 1.05 font ",15"
set border lw 1
set format y "%g"
# The provenance line under every title.
CPU = META("cpu")
COMMIT = META("commit")
PARTIAL = META("partial")
SUB = sprintf("{/*0.7 %s, %s threads, commit %s%s}", CPU, META("threads"), COMMIT, \
              PARTIAL eq "1" ? ", PARTIAL RUN" : "")
