# sharing.gp - prefix sharing (out/sharing.csv, written by `kvlab sharing`,
# make sharing): B sequences generating from one prompt of P tokens. Left:
# resident cache bytes vs B, each strategy with the prompt shared (solid)
# and prefilled per sequence (dashed), a point shape per P; a paged cache
# that shares its blocks stays near one prompt, a contiguous one copies it
# B times. Right: the decode step time per sequence vs B.
#   gnuplot -c plots/sharing.gp out/sharing.csv out/plots
# A series is LABEL/MODE/P (MODE shared or unshared), selected by gnuplot
# itself into datablocks $H1, $H2, ... (batch, resident MiB, step ms per
# sequence; file order, which kvlab writes ascending in B); a colour per
# label, by its index in the file. A CSV without the label, shared,
# prompt_len and batch columns (a sweep's) has no series: both panels say so.
plotdir = ARG0; while (strlen(plotdir) > 0 && plotdir[strlen(plotdir):strlen(plotdir)] ne "/") { plotdir = plotdir[1:strlen(plotdir) - 1] }
if (!exists("csv")) { csv = ARGC >= 1 ? ARG1 : "out/sharing.csv" }
if (!exists("outdir") && ARGC >= 2) { outdir = ARG2 }
NOSPLIT = 1
load (plotdir[1:1] eq "/" ? "" : "./") . plotdir . "common.gp"

set datafile separator comma
C_LABEL = kvcol("label"); C_SHARED = kvcol("shared"); C_P = kvcol("prompt_len")
C_B = kvcol("batch"); C_RES = kvcol("resident_bytes"); C_SPS = kvcol("step_ns_per_seq")
OK = C_LABEL > 0 && C_SHARED > 0 && C_P > 0 && C_B > 0
# the series: SL[i] label, SS[i] 1 shared / 0 not, SP[i] P; the labels LB[]
# and the P (PS, a word list of numbers) in file order
array SL[100]
array SS[100]
array SP[100]
array SC[100]
array LB[100]
do for [i = 1:|SL|] { SL[i] = ""; LB[i] = ""; SS[i] = 0; SP[i] = 0; SC[i] = 1 }
NS = 0
NL = 0
SSTR = "\n"
LSTR = "\n"
PS = ""
PSTR = " "
lfind(l, i) = i > NL ? 0 : (LB[i] eq l ? i : lfind(l, i + 1))
pkey(x) = sprintf("%.0f", column(C_P))
skey(x) = strcol(C_LABEL) . "\n" . (column(C_SHARED) == 1 ? "1" : "0") . "\n" . pkey(0)
srow(x) = strcol(C_LABEL) ne "label" && strlen(strcol(C_LABEL)) > 0 && column(C_P) == column(C_P)
addl(l) = strstrt(LSTR, "\n" . l . "\n") > 0 || NL >= |LB| ? 0 : (NL = NL + 1, LB[NL] = l, LSTR = LSTR . l . "\n", 0)
addp(p) = strstrt(PSTR, " " . p . " ") > 0 ? 0 : (PSTR = PSTR . p . " ", PS = PS . (strlen(PS) > 0 ? " " : "") . p, 0)
adds(x) = strstrt(SSTR, "\n" . skey(0) . "\n\n") > 0 || NS >= |SL| ? 0 : \
    (NS = NS + 1, SL[NS] = strcol(C_LABEL), SS[NS] = (column(C_SHARED) == 1 ? 1 : 0), SP[NS] = column(C_P), \
     SSTR = SSTR . skey(0) . "\n\n", addl(strcol(C_LABEL)), SC[NS] = lfind(strcol(C_LABEL), 1), addp(pkey(0)), 0)
if (OK) {
    stats CSV using (srow(0) ? adds(0) : 0) nooutput
    do for [i = 1:NS] {
        eval sprintf("set table $H%d", i)
        plot CSV using (kvf(column(C_B))):(kvf(kvn(C_RES) / 1048576.0)):(kvf(kvn(C_SPS) / 1e6)) \
             with table if (srow(0) && strcol(C_LABEL) eq SL[i] && (column(C_SHARED) == 1 ? 1 : 0) == SS[i] && \
                            column(C_P) == SP[i])
        unset table
    }
}
set datafile separator whitespace
HSER(i) = sprintf("$H%d", i)
pidx(p, i) = i > words(PS) ? 1 : (word(PS, i) eq p ? i : pidx(p, i + 1))
scolor(i) = kcolor(SC[i])
sdash(i) = SS[i] ? 1 : 2
spt(i) = int(word("7 5 9 11 13 15", (pidx(sprintf("%.0f", SP[i]), 1) - 1) % 6 + 1))
stitle(i) = kvtext(SL[i]) . " " . (SS[i] ? "shared" : "unshared") . sprintf(", P = %.0f", SP[i])

do for [fmt in "png svg"] {
    eval TERM(fmt)
    set output OUTD . "/sharing." . fmt
    set multiplot layout 1,2 title "B sequences from one prompt of P tokens (" . \
        kv_esc1(META("threads")) . " threads)"
    set key top left box opaque font ",10"
    set logscale x 2
    set format x "%g"
    set xlabel "sequences B"
    set title "resident cache memory"
    set ylabel "resident cache (MiB)"
    if (NS > 0) {
        plot for [i = 1:NS] HSER(i) using 1:2 with linespoints lw 2 dt sdash(i) pt spt(i) ps 1.6 \
             lc rgb scolor(i) title stitle(i)
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
    set key off
    if (NS > 0) {
        plot for [i = 1:NS] HSER(i) using 1:3 with linespoints lw 2 dt sdash(i) pt spt(i) ps 1.6 \
             lc rgb scolor(i) notitle
    } else {
        set xrange [1:2]
        set yrange [0:1]
        plot NaN notitle
        set autoscale xy
    }
    unset multiplot
    unset logscale x
    set key on
}
