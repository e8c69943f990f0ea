# sharing.gp - prefix sharing (out/sharing.csv, written by `kvlab sharing`,
# make sharing): B sequences generating from one prompt of P tokens. Left:
# resident cache bytes vs B, each strategy with the prompt shared (solid)
# and prefilled per sequence (dashed), a point shape per P; a paged cache
# that shares its blocks stays near one prompt, a contiguous one copies it
# B times. Right: the decode step time per sequence vs B.
#   gnuplot -e "csv='out/sharing.csv'; outdir='out/plots'" plots/sharing.gp
plotdir = system("dirname '" . ARG0 . "'")
if (!exists("csv")) csv = "out/sharing.csv"
load plotdir . "/common.gp"

SAWK(mode, key) = sprintf("awk -v mode=%s -v key='%s' -f '%s/sharing.awk' '%s'", mode, key, \
                          plotdir, csv)
SER = system(SAWK("series", "x"))
# a series' parts: LABEL/MODE/P
part(k, n) = system("echo '" . k . "' | cut -d/ -f" . n)
SCOLORS = "#bcbd22 #1f77b4 #2ca02c #17becf #9467bd #ff7f0e #8c564b #e377c2"
LABELS = system("echo '" . SER . "' | tr ' ' '\\n' | cut -d/ -f1 | awk 'NF && !s[$0]++' | tr '\\n' ' '")
PS = system("echo '" . SER . "' | tr ' ' '\\n' | cut -d/ -f3 | awk 'NF && !s[$0]++' | tr '\\n' ' '")
lidx(l, i) = i > words(LABELS) ? 1 : (word(LABELS, i) eq l ? i : lidx(l, i + 1))
pidx(p, i) = i > words(PS) ? 1 : (word(PS, i) eq p ? i : pidx(p, i + 1))
scolor(k) = word(SCOLORS, (lidx(part(k, 1), 1) - 1) % words(SCOLORS) + 1)
sdash(k) = part(k, 2) eq "shared" ? 1 : 2
spt(k) = int(word("7 5 9 11 13 15", (pidx(part(k, 3), 1) - 1) % 6 + 1))
stitle(k) = part(k, 1) . " " . part(k, 2) . ", P = " . part(k, 3)

do for [fmt in "png svg"] {
    eval TERM(fmt)
    set output outdir . "/sharing." . fmt
    set multiplot layout 1,2 title "B sequences from one prompt of P tokens (" . \
        META("threads") . " threads)"
    set key top left box opaque font ",10"
    set logscale x 2
    set format x "%g"
    set xlabel "sequences B"
    set title "resident cache memory"
    set ylabel "resident cache (MiB)"
    if (words(SER) > 0) {
        plot for [i = 1:words(SER)] "< " . SAWK("rows", word(SER, i)) using 1:2 \
             with linespoints lw 2 dt sdash(word(SER, i)) pt spt(word(SER, i)) ps 1.6 \
             lc rgb scolor(word(SER, i)) title stitle(word(SER, i))
    } else {
        set label 1 "no sharing rows in this CSV" at graph 0.5, 0.5 center
        set xrange [1:2]
        set yrange [0:1]
        plot NaN notitle
        unset label 1
        set autoscale xy
    }
    set title "decode step time per sequence"
    set ylabel "median decode step / B (ms)"
    if (words(SER) > 0) {
        plot for [i = 1:words(SER)] "< " . SAWK("rows", word(SER, i)) using 1:3 \
             with linespoints lw 2 dt sdash(word(SER, i)) pt spt(word(SER, i)) ps 1.6 \
             lc rgb scolor(word(SER, i)) notitle
    } else {
        set xrange [1:2]
        set yrange [0:1]
        plot NaN notitle
        set autoscale xy
    }
    unset multiplot
    unset logscale x
}
