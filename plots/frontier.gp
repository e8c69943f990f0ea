# frontier.gp - the memory-accuracy frontier (out/frontier.csv, written by
# `kvlab sweep --frontier bench/data/frontier.list`): every lossy configuration at
# matched cache budgets, one point per configuration and T. Left: relative L2
# error of the logits against the exact cache vs resident cache bytes
# (log-log), a colour per configuration family, a point shape per T. Right:
# decode step time vs the same bytes. Points labelled with the budget.
#   gnuplot -c plots/frontier.gp out/frontier.csv out/plots
# A CSV without a lossy row (rel_err > 1e-4: a sweep of exact caches only,
# whose errors are float rounding) has no frontier: one note line on stderr,
# no figure, exit 0. Only the families with a lossy row are drawn.
# Series are the families (a label up to '@': "sliding@25%" -> "sliding"),
# selected by gnuplot itself into datablocks $F1, $F2, ... (common.gp).
plotdir = ARG0; while (strlen(plotdir) > 0 && plotdir[strlen(plotdir):strlen(plotdir)] ne "/") { plotdir = plotdir[1:strlen(plotdir) - 1] }
if (!exists("csv")) { csv = ARGC >= 1 ? ARG1 : "out/frontier.csv" }
if (!exists("outdir") && ARGC >= 2) { outdir = ARG2 }
NOSPLIT = 1
load (plotdir[1:1] eq "/" ? "" : "./") . plotdir . "common.gp"

set datafile separator comma
C_T = kvcol("seq_len"); C_CBYTES = kvcol("cache_bytes"); C_ERR = kvcol("rel_err")
C_STEP = kvcol("step_ns_median")
# a row's series, KEYOF, and whether it is a data row, kvrow: common.gp's
fam(k) = strstrt(k, "@") > 0 ? k[1:strstrt(k, "@") - 1] : k
# a budget "12.5%" as the number 12.5 (NaN when the label has none, or it
# is not one)
kv_numch(s) = strlen(s) == 0 ? 1 : (strstrt("0123456789.", s[1:1]) > 0 ? kv_numch(s[2:]) : 0)
kv_bud(k) = strstrt(k, "@") > 0 ? k[strstrt(k, "@") + 1:] : ""
kv_bud2(b) = b[strlen(b):strlen(b)] eq "%" ? b[1:strlen(b) - 1] : b
budget(k) = (b = kv_bud2(kv_bud(k)), strlen(b) > 0 && strlen(b) <= 12 && kv_numch(b) ? real(b) : NaN)

# the families (FAM[i], file order) and the T (TS, file order); lossy rows
array FAM[100]
do for [i = 1:|FAM|] { FAM[i] = "" }
NF = 0
FSTR = "\n"
TS = ""
TSTR = " "
NLOSSY = 0
array FLOSSY[100]
do for [i = 1:|FLOSSY|] { FLOSSY[i] = 0 }
kv_ffind(f, i) = i > NF ? 0 : (FAM[i] eq f ? i : kv_ffind(f, i + 1))
kv_addfam(f) = strstrt(FSTR, "\n" . f . "\n") > 0 || NF >= |FAM| ? 0 : \
               (NF = NF + 1, FAM[NF] = f, FSTR = FSTR . f . "\n", 0)
# a lossy row (rel_err above LOSSY, the exact caches' float rounding stays
# far below it) marks its family: only those are drawn
LOSSY = 1e-4
kv_lossy(f, e) = e > LOSSY ? (NLOSSY = NLOSSY + 1, fi = kv_ffind(f, 1), (fi > 0 ? FLOSSY[fi] = 1 : 0), 0) : 0
kv_addt(t) = t != t || strstrt(TSTR, " " . sprintf("%.0f", t) . " ") > 0 ? 0 : \
             (TSTR = TSTR . sprintf("%.0f", t) . " ", TS = TS . (strlen(TS) > 0 ? " " : "") . sprintf("%.0f", t), 0)
stats CSV using (kvrow(0) ? (kv_addfam(fam(KEYOF(0))), kv_addt(kvn(C_T)), \
                             kv_lossy(fam(KEYOF(0)), kvn(C_ERR))) : 0) nooutput
if (NLOSSY == 0) {
    print "frontier.gp: no lossy rows (rel_err > 1e-4) in " . kvsafe(csv) . "; frontier plot skipped"
    exit
}
# the lossy families, renumbered 1..NF in file order
NALL = NF
NF = 0
do for [i = 1:NALL] { if (FLOSSY[i]) { NF = NF + 1; FAM[NF] = FAM[i] } }
# a family's rows: cache bytes, rel_err, T, step ms, budget (%)
do for [i = 1:NF] {
    eval sprintf("set table $F%d", i)
    plot CSV using (kvf(kvn(C_CBYTES))):(kvf(kvn(C_ERR))):(kvf(kvn(C_T))):(kvf(kvn(C_STEP) / 1e6)): \
         (kvf(budget(KEYOF(0)))) \
         with table if (kvrow(0) && fam(KEYOF(0)) eq FAM[i])
    unset table
}
set datafile separator whitespace
FSER(i) = sprintf("$F%d", i)
FT(i) = kvtext(FAM[i])
fcolor(i) = kcolor(i)
# the point shape of a row's T: filled circle, triangle, square, ...
TPOINTS = "7 9 5 11 13 15"
tidx(t, i) = i > words(TS) ? 1 : (word(TS, i) eq t ? i : tidx(t, i + 1))
tpt(t) = int(word(TPOINTS, (tidx(sprintf("%.0f", t), 1) - 1) % words(TPOINTS) + 1))
MiB = 1048576.0
# (read as text: a row without a budget holds "nan")
blabel(s) = s eq "nan" || strlen(s) == 0 ? " " : sprintf("%g%%", real(s))

do for [fmt in "png svg"] {
    eval TERM(fmt)
    set output OUTD . "/frontier." . fmt
    set multiplot layout 1,2 title "Memory-accuracy frontier at matched cache budgets (T = " . TS . ")\n" . SUB
    set key outside bottom center horizontal maxrows 3 box opaque font ",12"
    set logscale xy 10
    set format x "%g"
    set format y "10^{%L}"
    set xlabel "resident cache bytes (MiB)"
    set title "logits error vs cache bytes (points: budget; shape: T)"
    set ylabel "relative L2 error of logits vs the exact cache"
    plot for [i = 1:NF] FSER(i) using ($1 / MiB):($2 > 0 ? $2 : NaN):(tpt($3)) with points pt variable ps 1.8 \
         lc rgb fcolor(i) notitle, \
         for [i = 1:NF] FSER(i) using ($1 / MiB):($2 > 0 ? $2 : NaN):(blabel(strcol(5))) with labels offset 0, 0.9 \
         font ",9" tc rgb fcolor(i) notitle, \
         for [i = 1:NF] NaN with points pt 7 ps 1.8 lc rgb fcolor(i) title FT(i), \
         for [j = 1:words(TS)] NaN with points pt int(word(TPOINTS, (j - 1) % words(TPOINTS) + 1)) ps 1.8 \
         lc rgb "#000000" title "T = " . word(TS, j)
    set title "decode step time vs cache bytes"
    set ylabel "median decode step (ms)"
    set format y "%g"
    plot for [i = 1:NF] FSER(i) using ($1 / MiB):($4):(tpt($3)) with points pt variable ps 1.8 lc rgb fcolor(i) \
         notitle, \
         for [i = 1:NF] NaN with points pt 7 ps 1.8 lc rgb fcolor(i) title FT(i), \
         for [j = 1:words(TS)] NaN with points pt int(word(TPOINTS, (j - 1) % words(TPOINTS) + 1)) ps 1.8 \
         lc rgb "#000000" title "T = " . word(TS, j)
    unset multiplot
    unset output
}
