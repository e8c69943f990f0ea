# kernel.gp - the attention kernel alone (`make kernel-bench`, out/kernel.csv):
# achieved GB/s of one decode call (K+V bytes the call reads / min time) per
# configuration, one panel per shape of the kernel table (head_dim,
# heads/kv_heads), one line per cache dtype and mode (cold: solid, K/V from
# DRAM; hot: dotted, one cache reused from the L3), against the read
# bandwidths measured in the same run (metadata read_gbps from DRAM,
# read_l3_gbps from the L3). A file without a mode column is hot. A quantized cache holds
# about 1/3 (int8) or 1/5 (int4) of the f32 bytes (codes + group scales), so
# its GB/s is lower for the same speed; the us per call are in the table
# that bench/kernel_table.sh writes from the same CSV.
#
#   gnuplot -e "csv='out/kernel.csv'; outdir='out/plots'" plots/kernel.gp
plotdir = system("dirname '" . ARG0 . "'")
if (!exists("csv")) csv = "out/kernel.csv"
load plotdir . "/common.gp"

# KSEL(d, h, hkv, dt, mode): "seq_len gbps us_min" of the decode rows of one
# configuration, sorted by seq_len (columns found by header name). Several
# runs may be concatenated in the file: each T keeps its best (highest GB/s)
# row, and the metadata its first value (the limits: their highest).
KAWK = "awk -F, -v d=%d -v h=%d -v hkv=%d -v dt=%s -v mode=%s '/^[ \\t]*#/ || /^[ \\t]*$/ {next} " . \
       "!hd {for (i = 1; i <= NF; i++) c[$i] = i; hd = 1; next} $1 == \"head_dim\" {next} " . \
       "((\"mode\" in c) ? $c[\"mode\"] : \"hot\") == mode && " . \
       "$c[\"head_dim\"] == d && $c[\"heads\"] == h && $c[\"kv_heads\"] == hkv && " . \
       "$c[\"queries\"] == 1 && $c[\"dtype\"] == dt && $c[\"gbps\"] + 0 >= b[$c[\"seq_len\"]] + 0 " . \
       "{b[$c[\"seq_len\"]] = $c[\"gbps\"]; u[$c[\"seq_len\"]] = $c[\"us_min\"]} " . \
       "END {for (t in b) print t, b[t], u[t] | \"sort -g\"}' '%s'"
KSEL(d, h, hkv, dt, mode) = "< " . sprintf(KAWK, d, h, hkv, dt, mode, csv)

MAXMETA(k) = system(AWK("meta", k, "x") . " | sort -g | tail -n 1")
FIRSTMETA(k) = system(AWK("meta", k, "x") . " | head -n 1")
RB = MAXMETA("read_gbps")
RL3 = MAXMETA("read_l3_gbps")
SUB = sprintf("{/*0.7 %s, %s threads, commit %s}", FIRSTMETA("cpu"), FIRSTMETA("threads"), FIRSTMETA("commit"))
okrate(s) = strlen(s) > 0 && s ne "nan" && s ne "-nan"
rb = okrate(RB) ? real(RB) : NaN
rl3 = okrate(RL3) ? real(RL3) : NaN
L3 = FIRSTMETA("l3_bytes")
L3MIB = strlen(L3) > 0 ? real(L3) / 1048576 : 0

# the x range of every panel: the decode T of the whole file (a panel whose
# shape is absent shows only the bandwidth line)
TRANGE = system("awk -F, '/^[ \\t]*#/ || /^[ \\t]*$/ {next} !hd {for (i = 1; i <= NF; i++) c[$i] = i; hd = 1; next} " . \
    "$c[\"queries\"] == 1 {t = $c[\"seq_len\"] + 0; if (!lo || t < lo) lo = t; if (t > hi) hi = t} " . \
    "END {if (!lo) {lo = 512; hi = 8192} print lo, hi}' '" . csv . "'")
TMIN = real(word(TRANGE, 1)) / 1.5
TMAX = real(word(TRANGE, 2)) * 1.5
SHAPES = "64,8,8 64,32,8 128,8,8 128,32,8"
DTYPES = "f32 int8 int4"
DCOLORS = "#1f77b4 #ff7f0e #2ca02c"
DPOINTS = "7 5 9"
fld(s, i) = int(word(system("echo '" . s . "' | tr , ' '"), i))

do for [fmt in "png svg"] {
    eval TERM(fmt)
    set output outdir . "/kernel." . fmt
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
    do for [s = 1:words(SHAPES)] {
        sh = word(SHAPES, s)
        d = fld(sh, 1); h = fld(sh, 2); hkv = fld(sh, 3)
        set title sprintf("head\\_dim %d, heads %d/%d%s", d, h, hkv, h > hkv ? " (GQA: K/V read once per group)" : "") font ",14"
        plot for [i = 1:words(DTYPES)] KSEL(d, h, hkv, word(DTYPES, i), "cold") using 1:2 \
             with linespoints lw 2 pt int(word(DPOINTS, i)) ps 1.3 lc rgb word(DCOLORS, i) \
             title word(DTYPES, i) . " cold", \
             for [i = 1:words(DTYPES)] KSEL(d, h, hkv, word(DTYPES, i), "hot") using 1:2 \
             with linespoints dt 3 lw 1.5 pt int(word(DPOINTS, i)) ps 0.9 lc rgb word(DCOLORS, i) \
             title word(DTYPES, i) . " hot", \
             rb with lines dt 2 lw 2.5 lc rgb "#000000" \
             title (okrate(RB) ? sprintf("DRAM %.1f GB/s", rb) : "DRAM bw not measured"), \
             rl3 with lines dt 4 lw 2 lc rgb "#777777" \
             title (okrate(RL3) ? sprintf("L3 %.1f GB/s", rl3) : "L3 bw not measured")
    }
    unset multiplot
    unset output
}
