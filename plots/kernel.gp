# kernel.gp - the attention kernel alone (`make kernel-bench`, out/kernel.csv):
# achieved GB/s of one decode call (K+V bytes the call reads / min time) per
# configuration, one panel per shape of the kernel table (head_dim,
# heads/kv_heads), one line per cache dtype and mode (cold: solid, K/V from
# DRAM; hot: dotted, one cache reused from the L3), against the read
# bandwidths measured in the same run (metadata read_gbps from DRAM,
# read_l3_gbps from the L3). A file without a mode column is hot. A quantized cache holds
# about 1/3 (int8) or 1/5 (int4) of the f32 bytes (codes + group scales), so
# its GB/s is lower for the same speed; the us per call are in the table
# that bench/scripts/kernel_table.sh writes from the same CSV.
#
#   gnuplot -e "csv='out/kernel.csv'; outdir='out/plots'" plots/kernel.gp
#
#   gnuplot -c plots/kernel.gp out/kernel.csv out/plots
# gnuplot selects the rows itself (no command runs): the decode rows
# (queries 1) of each shape, dtype and mode go into a datablock $K1..$K24
# of "seq_len gbps", ascending in T. Several runs may be concatenated in the
# file: each T keeps its best (highest GB/s) row, and the metadata its first
# value (the limits: their highest).
plotdir = ARG0; while (strlen(plotdir) > 0 && plotdir[strlen(plotdir):strlen(plotdir)] ne "/") { plotdir = plotdir[1:strlen(plotdir) - 1] }
if (!exists("csv")) { csv = ARGC >= 1 ? ARG1 : "out/kernel.csv" }
if (!exists("outdir") && ARGC >= 2) { outdir = ARG2 }
NOSPLIT = 1
load (plotdir[1:1] eq "/" ? "" : "./") . plotdir . "common.gp"

# the metadata: the limits at their highest over concatenated runs
okrate(s) = strlen(s) > 0 && s ne "nan" && s ne "-nan"
RB = ""
RL3 = ""
do for [i = 1:KV_NML] {
    if (KV_MK[i] eq "read_gbps" && okrate(KV_MV[i]) && (!okrate(RB) || real(KV_MV[i]) > real(RB))) { RB = KV_MV[i] }
    if (KV_MK[i] eq "read_l3_gbps" && okrate(KV_MV[i]) && (!okrate(RL3) || real(KV_MV[i]) > real(RL3))) { RL3 = KV_MV[i] }
}
if (strlen(RB) == 0) { RB = META("read_gbps") }
if (strlen(RL3) == 0) { RL3 = META("read_l3_gbps") }
SUB = sprintf("{/*0.7 %s, %s threads, commit %s}", kv_esc1(META("cpu")), kv_esc1(META("threads")), kv_esc1(META("commit")))
rb = okrate(RB) ? real(RB) : NaN
rl3 = okrate(RL3) ? real(RL3) : NaN
L3 = META("l3_bytes")
L3MIB = strlen(L3) > 0 ? real(L3) / 1048576 : 0

# the configurations: shape s (head_dim, heads, kv_heads) x dtype x mode
SD = "64 64 128 128"
SH = "8 32 8 32"
SKV = "8 8 8 8"
DTYPES = "f32 int8 int4"
MODES = "cold hot"
DCOLORS = "#1f77b4 #ff7f0e #2ca02c"
DPOINTS = "7 5 9"
NCFG = words(SD) * words(DTYPES) * words(MODES)
cfg(s, d, m) = ((s - 1) * words(DTYPES) + d - 1) * words(MODES) + m

set datafile separator comma
C_HD = kvcol("head_dim"); C_H = kvcol("heads"); C_KV = kvcol("kv_heads"); C_T = kvcol("seq_len")
C_Q = kvcol("queries"); C_DT = kvcol("dtype"); C_G = kvcol("gbps"); C_MODE = kvcol("mode")
# a decode row (a repeated header line or a row without numbers is none)
krow(x) = kvn(C_Q) == 1 && kvn(C_T) == kvn(C_T) && kvn(C_G) == kvn(C_G)
kshape(s) = s > words(SD) ? 0 : ((kvn(C_HD) == real(word(SD, s)) && kvn(C_H) == real(word(SH, s)) && \
                                  kvn(C_KV) == real(word(SKV, s))) ? s : kshape(s + 1))
kdtype(d) = d > words(DTYPES) ? 0 : (kvs(C_DT) eq word(DTYPES, d) ? d : kdtype(d + 1))
kmodestr(x) = C_MODE > 0 ? strcol(C_MODE) : "hot"
kmode(x) = kmodestr(0) eq "cold" ? 1 : (kmodestr(0) eq "hot" ? 2 : 0)
kcfg(x) = (ks = kshape(1), kd = kdtype(1), km = kmode(0), (ks > 0 && kd > 0 && km > 0) ? cfg(ks, kd, km) : 0)

# the decode T of the whole file (up to 64), ascending: every panel's x range
array KTT[64]
NT = 0
TSTR = " "
addt(t) = strstrt(TSTR, sprintf(" %.0f ", t)) > 0 || NT >= |KTT| ? 0 : \
          (NT = NT + 1, KTT[NT] = t, TSTR = TSTR . sprintf("%.0f ", t), 0)
stats CSV using (krow(0) ? addt(kvn(C_T)) : 0) nooutput
do for [a = 2:NT] {
    t = KTT[a]; b = a - 1
    while (b >= 1 && KTT[b] > t) { KTT[b + 1] = KTT[b]; b = b - 1 }
    KTT[b + 1] = t
}
TMIN = (NT > 0 ? KTT[1] : 512) / 1.5
TMAX = (NT > 0 ? KTT[NT] : 8192) * 1.5
tix(t, j) = j > NT ? 0 : (KTT[j] == t ? j : tix(t, j + 1))
# each configuration's best GB/s per T
array KB[NCFG * (NT > 0 ? NT : 1)]
do for [j = 1:|KB|] { KB[j] = -1 }
kbest(c, j, g) = (c > 0 && j > 0) ? (kslot = (c - 1) * NT + j, (g >= KB[kslot] ? KB[kslot] = g : 0), 0) : 0
stats CSV using (krow(0) ? kbest(kcfg(0), tix(kvn(C_T), 1), kvn(C_G)) : 0) nooutput
set datafile separator whitespace
# a configuration without rows gets one point left of the x range and no
# legend entry (KN: its rows)
array KN[NCFG]
do for [c = 1:NCFG] {
    eval sprintf("set print $K%d", c)
    n = 0
    do for [j = 1:NT] {
        if (KB[(c - 1) * NT + j] >= 0) { print sprintf("%.0f %.10g", KTT[j], KB[(c - 1) * NT + j]); n = n + 1 }
    }
    if (n == 0) { print sprintf("%.10g 0", TMIN / 4) }
    unset print
    KN[c] = n
}
KSEL(s, d, m) = sprintf("$K%d", cfg(s, d, m))
ktitle(s, d, m) = KN[cfg(s, d, m)] > 0 ? word(DTYPES, d) . " " . word(MODES, m) : ""

do for [fmt in "png svg"] {
    eval TERM(fmt)
    set output OUTD . "/kernel." . fmt
    set multiplot layout 2,2 title "Attention kernel alone (decode, one query): achieved GB/s = K+V bytes read / min time\n" . SUB . \
        (L3MIB > 0 ? sprintf("{/*0.7 ; cold (solid): calls rotate over copies > 2 x the %.0f MiB L3; hot (dotted): one cache}", L3MIB) : "")
    set key inside top center horizontal maxrows 2 box opaque font ",10" samplen 1.5 width 0.5
    set logscale x 2
    set xtics (512, 1024, 2048, 4096, 8192) font ",12"
    set ytics font ",12"
    set xlabel "sequence length T" font ",13" offset 0, 0.5
    set ylabel "GB/s" font ",13" offset 1, 0
    set yrange [0:*]
    set offsets 0, 0, graph 0.35, 0
    set xrange [TMIN:TMAX]
    do for [s = 1:words(SD)] {
        d = int(word(SD, s)); h = int(word(SH, s)); hkv = int(word(SKV, s))
        set title sprintf("head\\_dim %d, heads %d/%d%s", d, h, hkv, h > hkv ? " (GQA: K/V read once per group)" : "") font ",14"
        plot for [i = 1:words(DTYPES)] KSEL(s, i, 1) using 1:2 \
             with linespoints lw 2 pt int(word(DPOINTS, i)) ps 1.3 lc rgb word(DCOLORS, i) \
             title ktitle(s, i, 1), \
             for [i = 1:words(DTYPES)] KSEL(s, i, 2) using 1:2 \
             with linespoints dt 3 lw 1.5 pt int(word(DPOINTS, i)) ps 0.9 lc rgb word(DCOLORS, i) \
             title ktitle(s, i, 2), \
             rb with lines dt 2 lw 2.5 lc rgb "#000000" \
             title (okrate(RB) ? sprintf("DRAM %.1f GB/s", rb) : "DRAM bw not measured"), \
             rl3 with lines dt 4 lw 2 lc rgb "#777777" \
             title (okrate(RL3) ? sprintf("L3 %.1f GB/s", rl3) : "L3 bw not measured")
    }
    unset multiplot
    unset output
}
