# serving_timeline.gp - one rate of the serving benchmark over time
# (out/serving/timeline.csv, written by make serving: every policy's
# iterations at the middle rate, the policy first). Top: the running batch
# against the stream's clock, a line per policy. Bottom: the pool, as the
# share held by caches (solid) and the share holding token rows (dashed):
# a reservation fills the pool long before its tokens do.
#   gnuplot -c plots/serving_timeline.gp out/serving/timeline.csv out/plots
# A policy is a value of the `policy` column, selected by gnuplot itself
# into datablocks $T1, $T2, ... (time, batch, used %, tokens %); a colour
# per policy by its index in the file. A CSV without those columns has no
# policy: both panels say so.
plotdir = ARG0; while (strlen(plotdir) > 0 && plotdir[strlen(plotdir):strlen(plotdir)] ne "/") { plotdir = plotdir[1:strlen(plotdir) - 1] }
if (!exists("csv")) { csv = ARGC >= 1 ? ARG1 : "out/serving/timeline.csv" }
if (!exists("outdir") && ARGC >= 2) { outdir = ARG2 }
NOSPLIT = 1
load (plotdir[1:1] eq "/" ? "" : "./") . plotdir . "common.gp"

set datafile separator comma
C_POL = kvcol("policy"); C_T = kvcol("t_s"); C_B = kvcol("batch"); C_TOK = kvcol("token_bytes")
C_RES = kvcol("reserved_bytes"); C_INT = kvcol("internal_bytes"); C_SPA = kvcol("spare_bytes")
C_FREE = kvcol("free_bytes")
OK = C_POL > 0 && C_T > 0 && C_B > 0 && C_TOK > 0 && C_RES > 0 && C_INT > 0 && C_SPA > 0 && C_FREE > 0
array PL[40]
do for [i = 1:|PL|] { PL[i] = "" }
NP = 0
PSTR = "\n"
prow(x) = strcol(C_POL) ne "policy" && strlen(strcol(C_POL)) > 0 && column(C_T) == column(C_T)
addp(x) = strstrt(PSTR, "\n" . strcol(C_POL) . "\n") > 0 || NP >= |PL| ? 0 : \
    (NP = NP + 1, PL[NP] = strcol(C_POL), PSTR = PSTR . strcol(C_POL) . "\n", 0)
used(x) = column(C_TOK) + column(C_RES) + column(C_INT) + column(C_SPA)
pool(x) = used(0) + column(C_FREE)
if (OK) {
    stats CSV using (prow(0) ? addp(0) : 0) nooutput
    do for [i = 1:NP] {
        eval sprintf("set table $T%d", i)
        plot CSV using (kvf(column(C_T))):(kvf(column(C_B))):(kvf(pool(0) > 0 ? 100 * used(0) / pool(0) : NaN)):\
             (kvf(pool(0) > 0 ? 100 * column(C_TOK) / pool(0) : NaN)) with table \
             if (prow(0) && strcol(C_POL) eq PL[i])
        unset table
        # a policy whose batch and pool are all NaN gets no table: a comment
        # line makes one, so it still draws (as nothing)
        eval sprintf("set print $T%d append", i)
        print "# t batch used tokens"
        unset print
    }
}
set datafile separator whitespace
TSER(i) = sprintf("$T%d", i)

do for [fmt in "png svg"] {
    eval TERM(fmt)
    set output OUTD . "/serving_timeline." . fmt
    set multiplot layout 2,1 title "Serving over time at " . kv_esc1(META("rate")) . " requests/s"
    set xlabel "time on the stream's clock (s)"
    set key top right box opaque font ",9"
    set title "running requests"
    set ylabel "batch"
    set ytics 1 # whole requests
    set yrange [0:*]
    if (NP > 0) {
        plot for [i = 1:NP] TSER(i) using 1:2 with steps lw 2 lc rgb kcolor(i) title kvtext(PL[i])
    } else {
        set label 1 "no serving iterations in this CSV" at graph 0.5, 0.5 center
        set xrange [0:1]
        set yrange [0:1]
        plot NaN notitle
        unset label 1
        set autoscale xy
    }
    set ytics autofreq
    set title "the KV pool: held by caches (solid), holding token rows (dashed)"
    set ylabel "share of the pool (%)"
    set yrange [0:100]
    if (NP > 0) {
        plot for [i = 1:NP] TSER(i) using 1:3 with steps lw 2 lc rgb kcolor(i) title kvtext(PL[i]), \
             for [i = 1:NP] TSER(i) using 1:4 with steps lw 2 dt 2 lc rgb kcolor(i) notitle
    } else {
        set label 1 "no serving iterations in this CSV" at graph 0.5, 0.5 center
        set xrange [0:1]
        plot NaN notitle
        unset label 1
    }
    set autoscale xy
    unset multiplot
}
