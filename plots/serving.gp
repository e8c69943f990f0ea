# serving.gp - the serving benchmark (out/serving/summary.csv, written by
# make serving: bench/scripts/serving.sh). Left: the median normalized
# latency (seconds per output token) against the request rate, a line per
# policy; a ring marks the highest rate it sustains (its line under 2x the
# best latency at the lowest rate up to there; make serving's table).
# Right: what the used part of the KV pool held, per policy at its highest
# rate, stacked: token rows, slots the requests will still fill, slots they
# never will (internal fragmentation), free blocks a cache keeps (the vLLM
# paper's Figure 2 split).
#   gnuplot -c plots/serving.gp out/serving/summary.csv out/plots [NAME]
# A policy is a value of the `policy` column, selected by gnuplot itself
# into datablocks $L1, $L2, ... (rate, latency; file order); a colour per
# policy by its index in the file. A CSV without those columns (a sweep's)
# has no policy: both panels say so.
plotdir = ARG0; while (strlen(plotdir) > 0 && plotdir[strlen(plotdir):strlen(plotdir)] ne "/") { plotdir = plotdir[1:strlen(plotdir) - 1] }
if (!exists("csv")) { csv = ARGC >= 1 ? ARG1 : "out/serving/summary.csv" }
if (!exists("outdir") && ARGC >= 2) { outdir = ARG2 }
# the figure's name (serving; make serving's second stream: serving_prefix)
if (!exists("figname")) { figname = ARGC >= 3 ? ARG3 : "serving" }
NOSPLIT = 1
load (plotdir[1:1] eq "/" ? "" : "./") . plotdir . "common.gp"

set datafile separator comma
C_POL = kvcol("policy"); C_RATE = kvcol("rate"); C_LAT = kvcol("norm_latency_p50_s")
C_TOK = kvcol("token_share_used"); C_RES = kvcol("reserved_share_used")
C_INT = kvcol("internal_share_used"); C_SPA = kvcol("spare_share_used")
OK = C_POL > 0 && C_RATE > 0 && C_LAT > 0 && C_TOK > 0 && C_RES > 0 && C_INT > 0 && C_SPA > 0
array PL[40]
array RMAX[40]
do for [i = 1:|PL|] { PL[i] = ""; RMAX[i] = -1 }
NP = 0
PSTR = "\n"
prow(x) = strcol(C_POL) ne "policy" && strlen(strcol(C_POL)) > 0 && column(C_RATE) == column(C_RATE)
pfind(p, i) = i > NP ? 0 : (PL[i] eq p ? i : pfind(p, i + 1))
addp(x) = strstrt(PSTR, "\n" . strcol(C_POL) . "\n") > 0 || NP >= |PL| ? 0 : \
    (NP = NP + 1, PL[NP] = strcol(C_POL), PSTR = PSTR . strcol(C_POL) . "\n", 0)
maxr(x) = (k_ = pfind(strcol(C_POL), 1), k_ > 0 && column(C_RATE) > RMAX[k_] ? (RMAX[k_] = column(C_RATE), 0) : 0)
if (OK) {
    stats CSV using (prow(0) ? addp(0) : 0) nooutput
    stats CSV using (prow(0) ? maxr(0) : 0) nooutput
    do for [i = 1:NP] {
        eval sprintf("set table $L%d", i)
        plot CSV using (kvf(column(C_RATE))):(kvf(column(C_LAT))) with table \
             if (prow(0) && strcol(C_POL) eq PL[i])
        unset table
        # a policy whose latencies are all NaN gets no table: a comment
        # line makes one, so it still draws (as nothing)
        eval sprintf("set print $L%d append", i)
        print "# rate latency"
        unset print
    }
    # one bar per policy at its highest rate: index, then the four shares (%)
    set table $W
    plot CSV using (kvf(pfind(strcol(C_POL), 1))):(kvf(100 * column(C_TOK))):(kvf(100 * column(C_RES))):\
         (kvf(100 * column(C_INT))):(kvf(100 * column(C_SPA))) with table \
         if (prow(0) && pfind(strcol(C_POL), 1) > 0 && column(C_RATE) == RMAX[pfind(strcol(C_POL), 1)])
    unset table
}
set datafile separator whitespace
LSER(i) = sprintf("$L%d", i)

# Each policy's sustained rate, as the summary table has it: the highest
# rate below the lowest one whose median exceeds the bound (the line turns
# upward across it), ringed on the policy's line. None where even the
# lowest rate is over the bound. $S: rate, latency; row k of policy SI[k].
array SI[40]
LB = META("latency_bound_s")
LBV = strlen(LB) > 0 ? real(LB) : 0
NS = 0
set print $S
if (NP > 0 && LBV > 0) {
    do for [i = 1:NP] {
        FB = 1e300
        stats LSER(i) using ($2 > LBV && $1 < FB ? (FB = $1, 0) : 0) nooutput
        SR = -1
        SL = NaN
        stats LSER(i) using ($1 < FB && $1 > SR && $2 == $2 ? (SR = $1, SL = $2, 0) : 0) nooutput
        if (SR > 0) { print sprintf("%.10g %.10g", SR, SL); NS = NS + 1; SI[NS] = i }
    }
}
unset print

do for [fmt in "png svg"] {
    eval TERM(fmt)
    set output OUTD . "/" . figname . "." . fmt
    set multiplot layout 1,2 title "Serving: requests over one pool of KV memory (" . \
        kv_esc1(META("cpu")) . ")"
    set title "latency against load"
    set xlabel "request rate (requests/s)"
    set ylabel "median normalized latency (s/token)"
    set key right center box opaque font ",10" # between static-max, far above, and the rest
    if (NP > 0 && LBV > 0) {
        set arrow 1 from graph 0, first LBV to graph 1, first LBV nohead dt 2 lw 1.5 lc rgb "#555555"
        set label 2 "sustained: under this line (2x the best latency at the lowest rate)" \
            at graph 0.02, first LBV offset 0, 0.6 font ",8" tc rgb "#555555"
    }
    if (NP > 0 && NS == 0) {
        plot for [i = 1:NP] LSER(i) using 1:2 with linespoints lw 2 pt kpt(i) ps 1.4 \
             lc rgb kcolor(i) title kvtext(PL[i])
    }
    if (NP > 0 && NS > 0) {
        plot for [i = 1:NP] LSER(i) using 1:2 with linespoints lw 2 pt kpt(i) ps 1.4 \
             lc rgb kcolor(i) title kvtext(PL[i]), \
             for [k = 1:NS] $S every ::k-1::k-1 using 1:2 with points pt 6 ps 3.2 lw 2 \
             lc rgb kcolor(SI[k]) notitle, \
             NaN with points pt 6 ps 2 lw 2 lc rgb "#555555" title "sustained rate"
    }
    if (NP == 0) {
        set label 1 "no serving rows in this CSV" at graph 0.5, 0.5 center
        set xrange [0:1]
        set yrange [0:1]
        plot NaN notitle
        unset label 1
        set autoscale xy
    }
    unset arrow 1
    unset label 2
    set title "what the used pool held (each at its highest rate)"
    set xlabel ""
    set ylabel "share of the used pool (%)"
    set yrange [0:130] # headroom: the key above the bars, not over them
    set ytics 0, 20, 100
    set style fill solid 0.85 border -1
    set boxwidth 0.6
    set key top right box opaque font ",9"
    if (NP > 0) {
        set xrange [0.4:NP + 0.6]
        set xtics () rotate by -25 font ",9"
        do for [i = 1:NP] { set xtics add (kvtext(PL[i]) i) }
        plot $W using 1:($2 + $3 + $4 + $5) with boxes lc rgb "#c7c7c7" title "free blocks kept", \
             $W using 1:($2 + $3 + $4) with boxes lc rgb "#d62728" title "never filled (internal fragmentation)", \
             $W using 1:($2 + $3) with boxes lc rgb "#ff7f0e" title "reserved, filled later", \
             $W using 1:2 with boxes lc rgb "#2ca02c" title "token states"
        set xtics autofreq norotate font ""
        set ytics autofreq
    } else {
        set label 1 "no serving rows in this CSV" at graph 0.5, 0.5 center
        set xrange [0:1]
        plot NaN notitle
        unset label 1
    }
    set autoscale xy
    unset multiplot
}
