# common.gp - loaded by every plot script (not a figure itself): input and
# output paths, the CSV's metadata and header, the series of a sweep CSV
# split into in-memory datablocks, what each series is (read from its rows),
# each series' colour and point type (by its index in the file), and the
# terminals.
#
# Usage from a figure script, run from anywhere (paths as plain arguments,
# the way make and bench/slurm/merge.sbatch call them, or as -e strings):
#   gnuplot -c plots/NAME.gp out/bench.csv out/plots
#   gnuplot -e "csv='out/bench.csv'; outdir='out/plots'" plots/NAME.gp
# The figure script sets plotdir from ARG0 and csv / outdir from ARG1 / ARG2
# (load does not pass them on) before loading this file.
#
# No script names a strategy (tests/e2e_agnostic.sh): a figure picks its
# series by what their rows say, never by their names. Which series is the
# exact reference, which keeps no cache, which has a window, which stores
# integer codes: the CSV's own columns (acc_measured, cache_bytes, window,
# bits), read here once per series (REF, NC1, WIN1, LBITS below). A
# figure whose choice is editorial, so no column can make it (paged.gp:
# which caches are the contiguous ones), reads its series by label from
# bench/data/figures.tsv, also here (ROLE below). So a new strategy shows
# up in every figure, and with the right meaning, without a line of plot
# code.
#
# Nothing read from the CSV, its metadata or the command line ever reaches a
# shell or gnuplot's command parser. gnuplot itself selects the series
# (stats and `plot ... with table if`; no shell command, no piped data
# source): every series of a sweep is copied into a datablock with a
# generated name ($S1, $S2, ...; columns S_T.. below, numbers only) and the
# figures plot those. A string that reaches a title or a label goes through
# kvtext(): at most 80 characters, each outside [A-Za-z0-9] and
# " ._+-:*=@/,;%()" replaced by "?", then @ and _ escaped for enhanced text.
# The CSV and output paths are opened as files only: a relative path gets
# "./" in front, so a path that starts with the less-than sign or the pipe
# sign, "-" or a dollar sign names a file, never a command, standard input or
# a datablock. The output folder is made with mkdir -p through one pipe whose
# command is a constant (the `set print` line below, xargs then mkdir): the
# path is written to its standard input, which xargs hands to mkdir as one
# argument; a path holding a newline is refused. That pipe is the one
# command any plot script starts (tests/e2e_plots_noshell.sh allows exactly
# that line and refuses every other way of starting one).
#
# A figure that reads another CSV (kernel.gp, sharing.gp, frontier.gp) sets
# NOSPLIT = 1 before loading and selects its own series the same way.

if (!exists("csv")) { csv = "out/bench.csv" }
if (!exists("outdir")) { outdir = "out/plots" }
if (!exists("NOSPLIT")) { NOSPLIT = 0 }
if (strstrt(csv, "\n") > 0 || strstrt(outdir, "\n") > 0 || strstrt(csv, "\r") > 0 || strstrt(outdir, "\r") > 0) {
    print "plots: a path holding a newline is refused"
    exit status 2
}
# a file name, never a command, standard input ("-") or a datablock
kvpath(p) = p[1:1] eq "/" ? p : "./" . p
CSV = kvpath(csv)
OUTD = kvpath(outdir)
set print "| xargs -d '\\n' mkdir -p --"
print OUTD
unset print

# ---------------------------------------------------------------- safe text
KV_SAFE = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 ._+-:*=@/,;%()"
kv_ch(c) = strstrt(KV_SAFE, c) > 0 ? c : "?"
kv_safe1(s) = strlen(s) == 0 ? "" : kv_ch(s[1:1]) . kv_safe1(s[2:])
kvsafe(s) = kv_safe1(strlen(s) > 80 ? s[1:80] : s)
kv_esc1(s) = strlen(s) == 0 ? "" : ((s[1:1] eq "@" || s[1:1] eq "_") ? "\\" : "") . s[1:1] . kv_esc1(s[2:])
# the enhanced-text form of a string read from a file: safe, then escaped
kvtext(s) = kv_esc1(kvsafe(s))

# ---------------------------------------------------------------- metadata, header
# One pass with every line as one field: the `# key=value` lines (up to
# 256) and the header (the first other line that is not blank).
set datafile separator "\037"
set datafile commentschars ""
array KV_ML[256]
KV_NML = 0
KV_HDR = ""
kv_nb(s, i) = (i > 16 || i > strlen(s)) ? 0 : ((s[i:i] eq " " || s[i:i] eq "\t") ? kv_nb(s, i + 1) : i)
kv_line(s) = (kv_p = kv_nb(s, 1), kv_p == 0 ? 0 : \
    (s[kv_p:kv_p] eq "#" ? (KV_NML < |KV_ML| ? (KV_NML = KV_NML + 1, KV_ML[KV_NML] = s[kv_p + 1:], 0) : 0) : \
     (strlen(KV_HDR) == 0 ? (KV_HDR = s[kv_p:], 0) : 0)))
stats CSV using (kv_line(strcol(1))) nooutput
# the metadata, made safe: KV_MK[i] = KV_MV[i]; META(k) is the first value
array KV_MK[256]
array KV_MV[256]
KV_MSTR = "\n"
do for [i = 1:KV_NML] {
    l = KV_ML[i]
    while (strlen(l) > 0 && (l[1:1] eq " " || l[1:1] eq "\t")) { l = l[2:] }
    e = strstrt(l, "=")
    KV_MK[i] = e > 1 ? kvsafe(l[1:e - 1]) : ""
    KV_MV[i] = e > 1 ? kvsafe(l[e + 1:]) : ""
    if (e > 1) { KV_MSTR = KV_MSTR . KV_MK[i] . "=" . KV_MV[i] . "\n" }
}
undefine KV_ML
kv_mpos(k) = strstrt(KV_MSTR, "\n" . k . "=")
kv_mrest(k) = substr(KV_MSTR, kv_mpos(k) + strlen(k) + 2, strlen(KV_MSTR))
META(k) = kv_mpos(k) > 0 ? substr(kv_mrest(k), 1, strstrt(kv_mrest(k), "\n") - 1) : ""
# the header's column names (up to 200); kvcol(NAME) is NAME's column, 0 if absent
array KV_HN[200]
KV_NH = 0
h = KV_HDR
while (strlen(h) > 0 && KV_NH < |KV_HN|) {
    e = strstrt(h, ",")
    KV_NH = KV_NH + 1
    KV_HN[KV_NH] = e > 0 ? h[1:e - 1] : h
    h = e > 0 ? h[e + 1:] : ""
}
kv_ci(n, j) = j > KV_NH ? 0 : (KV_HN[j] eq n ? j : kv_ci(n, j + 1))
kvcol(n) = kv_ci(n, 1)
# a row's value in column j (NaN when the column is absent), its text ("")
kvn(j) = j > 0 ? column(j) : NaN
kvs(j) = j > 0 ? strcol(j) : ""
# a number as a datablock field (written as text: `with table` drops a row
# with an undefined number, while "nan" reads back as one missing value)
kvf(v) = sprintf("%.10g", v)

# back to the CSV's own format for the data passes
set datafile separator comma
set datafile commentschars "#"
set datafile missing "NaN"

# ---------------------------------------------------------------- series style
# a colour and a point type per series by its index: no two series of the
# first 24 share a colour
PALETTE = "#1f77b4 #d62728 #2ca02c #ff7f0e #9467bd #8c564b #e377c2 #17becf #bcbd22 #7f7f7f " . \
          "#393b79 #637939 #843c39 #7b4173 #000000 #6baed6 #fd8d3c #74c476 #9e9ac8 #c49c94 " . \
          "#f7b6d2 #9edae5 #dbdb8d #fdd0a2"
POINTS = "7 5 9 11 13 15 4 6 8 10 12 14 3 2 1"
kcolor(i) = word(PALETTE, (int(i) - 1) % words(PALETTE) + 1)
kpt(i) = int(word(POINTS, (int(i) - 1) % words(POINTS) + 1))

# ---------------------------------------------------------------- a row's series
# A row's series is its `label`. A file without that column (schema 1, early
# schema 2) names it after its strategy, and a cache narrower than f32 after
# its strategy and element type (`dtype`, or intBITS in schema 1, whose only
# narrow caches held integer codes): the name the preset of that width has,
# so old and new files key alike (bench/data/targets.tsv keys them so too).
C_LABEL = kvcol("label"); C_STRAT = kvcol("strategy"); C_BITS = kvcol("bits"); C_DTYPE = kvcol("dtype")
KEYNAME = C_LABEL > 0 ? "label" : "strategy"
KV_KC = C_LABEL > 0 ? C_LABEL : C_STRAT
DTYPEOF(x) = C_DTYPE > 0 ? strcol(C_DTYPE) : (kvn(C_BITS) < 32 ? sprintf("int%.0f", kvn(C_BITS)) : "f32")
KEYOF(x) = C_LABEL > 0 ? strcol(C_LABEL) : kvs(C_STRAT) . (DTYPEOF(0) eq "f32" ? "" : "-" . DTYPEOF(0))
# a data row: not the header (again, in concatenated files), a key
kvrow(x) = strlen(kvs(KV_KC)) > 0 && kvs(KV_KC) ne KEYNAME

# ---------------------------------------------------------------- series of a sweep
# K[i]: the key of series i, in file order, up to 100; KT[i] its safe title
# text; its rows in datablock SER(i) ("$Si"), file order:
S_T = 1; S_STEP = 2; S_ATTN = 3; S_AFLOPS = 4; S_CBYTES = 5; S_F32 = 6
S_ERR = 7; S_MATCH = 8; S_BYTES = 9; S_FLOPS = 10
# and at its largest T: LT[i] (T), LSTEP[i], LWIN[i], LBITS[i], LGROUP[i].
# Over all its rows: ROWS[i] rows, NREF[i] of them the accuracy reference
# (acc_measured 0), ERRMAX[i] the largest rel_err and CBMAX[i] the largest
# cache_bytes (-1: none recorded), KSTRAT[i] and KDT[i] its strategy and
# element type.
# Series i has colour i (no two of the first 24 alike) and the point type
# of its family, CIDX[i]: its index among the values of a `family` column
# when the CSV has one, else i (a family's series share a marker).
SER(i) = sprintf("$S%d", int(i))
array K[100]
array KT[100]
array CIDX[100]
array LT[100]
array LSTEP[100]
array LWIN[100]
array LBITS[100]
array LGROUP[100]
array ROWS[100]
array NREF[100]
array ERRMAX[100]
array CBMAX[100]
array KSTRAT[100]
array KDT[100]
NK = 0
do for [i = 1:|K|] {
    K[i] = ""; KT[i] = ""; CIDX[i] = i; LT[i] = -1; LSTEP[i] = NaN; LWIN[i] = NaN; LBITS[i] = NaN; LGROUP[i] = NaN
    ROWS[i] = 0; NREF[i] = 0; ERRMAX[i] = -1; CBMAX[i] = -1; KSTRAT[i] = ""; KDT[i] = ""
}
kv_find(k, i) = i > NK ? 0 : (K[i] eq k ? i : kv_find(k, i + 1))
kidx(k) = kv_find(k, 1)
# The series a figure may single out, each an index (0: the CSV has none):
#   REF     the exact reference every error is measured against: all its
#           rows have acc_measured 0 (a file without that column: EXACT1)
#   EXACT1  the first series holding a cache (cache_bytes > 0) whose every
#           rel_err is 0: bit for bit the reference's logits
#   NC1     the first series that keeps no cache (cache_bytes 0 on every
#           row): each step runs the whole sequence again
#   WIN1    the first series whose mask has a window (window > 0 at its
#           largest T): it stands for the caches that evict
# The legend says what the rows say of a series (ktitle below: no cache,
# its window), so no figure has to.
REF = 0; EXACT1 = 0; NC1 = 0; WIN1 = 0
if (!NOSPLIT) {
    C_FAMILY = kvcol("family")
    C_T = kvcol("seq_len"); C_STEP = kvcol("step_ns_median"); C_ATTN = kvcol("attn_ns_median")
    C_AFLOPS = kvcol("attn_flops_step"); C_CBYTES = kvcol("cache_bytes"); C_ERR = kvcol("rel_err")
    C_MATCH = kvcol("token_match"); C_BYTES = kvcol("bytes_step"); C_FLOPS = kvcol("flops_step")
    C_LAYERS = kvcol("layers"); C_KVH = kvcol("kv_heads"); C_HD = kvcol("head_dim")
    C_BATCH = kvcol("batch"); C_WIN = kvcol("window"); C_GROUP = kvcol("group")
    C_ACC = kvcol("acc_measured")
    FAMOF(x) = C_FAMILY > 0 ? strcol(C_FAMILY) : KEYOF(x)
    KV_KSTR = "\n"
    KV_FSTR = "\n"
    KV_NF = 0
    array KV_F[100]
    do for [i = 1:|KV_F|] { KV_F[i] = "" }
    kv_ffind(f, i) = i > KV_NF ? 0 : (KV_F[i] eq f ? i : kv_ffind(f, i + 1))
    KV_DROP = 0
    kv_addkey(k, f) = strstrt(KV_KSTR, "\n" . k . "\n") > 0 ? 0 : \
        (NK >= |K| ? (KV_DROP = KV_DROP + 1, 0) : \
         (NK = NK + 1, K[NK] = k, KV_KSTR = KV_KSTR . k . "\n", \
          (strstrt(KV_FSTR, "\n" . f . "\n") > 0 ? 0 : \
           (KV_NF = KV_NF + 1, KV_F[KV_NF] = f, KV_FSTR = KV_FSTR . f . "\n")), \
          CIDX[NK] = kv_ffind(f, 1), 0))
    stats CSV using (kvrow(0) ? kv_addkey(KEYOF(0), FAMOF(0)) : 0) nooutput
    if (KV_DROP > 0) { print "plots: more than 100 series in " . kvsafe(csv) . "; the rest are not drawn" }
    if (NK == 0) {
        print "plots: no rows with a " . KEYNAME . " in " . kvsafe(csv)
        exit status 1
    }
    do for [i = 1:NK] { KT[i] = kvtext(K[i]) }
    # what each series is, from all its rows
    kv_note(i) = i < 1 ? 0 : (ROWS[i] = ROWS[i] + 1, \
        (ROWS[i] == 1 ? (KSTRAT[i] = kvs(C_STRAT), KDT[i] = DTYPEOF(0)) : 0), \
        (kvn(C_ACC) == 0 ? NREF[i] = NREF[i] + 1 : 0), \
        (kvn(C_ERR) > ERRMAX[i] ? ERRMAX[i] = kvn(C_ERR) : 0), \
        (kvn(C_CBYTES) > CBMAX[i] ? CBMAX[i] = kvn(C_CBYTES) : 0), 0)
    stats CSV using (kvrow(0) ? kv_note(kidx(KEYOF(0))) : 0) nooutput
    f32of(x) = kvn(C_LAYERS) * 2 * kvn(C_KVH) * kvn(C_HD) * 4 * kvn(C_BATCH) * kvn(C_T)
    # column 1 records the series' values at its largest T on the way
    kv_t(i) = (KEYOF(0) eq K[i] && kvn(C_T) >= LT[i]) ? \
        (LT[i] = kvn(C_T), LSTEP[i] = kvn(C_STEP), LWIN[i] = kvn(C_WIN), \
         LBITS[i] = kvn(C_BITS), LGROUP[i] = kvn(C_GROUP), LT[i]) : kvn(C_T)
    do for [i = 1:NK] {
        eval sprintf("set table $S%d", i)
        plot CSV using (kvf(kv_t(i))):(kvf(kvn(C_STEP))):(kvf(kvn(C_ATTN))):(kvf(kvn(C_AFLOPS))): \
             (kvf(kvn(C_CBYTES))):(kvf(f32of(0))):(kvf(kvn(C_ERR))):(kvf(kvn(C_MATCH))): \
             (kvf(kvn(C_BYTES))):(kvf(kvn(C_FLOPS))) with table if (KEYOF(0) eq K[i])
        unset table
    }
    do for [i = 1:NK] {
        if (REF == 0 && C_ACC > 0 && ROWS[i] > 0 && NREF[i] == ROWS[i]) { REF = i }
        if (EXACT1 == 0 && ERRMAX[i] == 0 && CBMAX[i] > 0) { EXACT1 = i }
        if (NC1 == 0 && CBMAX[i] == 0) { NC1 = i }
        if (WIN1 == 0 && LWIN[i] > 0) { WIN1 = i }
    }
    if (C_ACC == 0) { REF = EXACT1 }
}
# the legend text of series i: its key (integer codes keyed by strategy and
# element type, quantized-int8, read "quantized int8"), then what its rows
# say it is
kv_tname(i) = LBITS[i] < 16 && K[i] eq KSTRAT[i] . "-" . KDT[i] ? kvtext(KSTRAT[i] . " " . KDT[i]) : KT[i]
ktitle(i) = kv_tname(i) . (CBMAX[i] == 0 ? " (no cache: full re-run)" : "") . \
            (LWIN[i] > 0 ? sprintf(" (window %.0f)", LWIN[i]) : "")

# ---------------------------------------------------------------- series by name
# A figure whose series no column can pick (which caches a comparison
# shows) sets FIG, its own name, before loading this file. Its rows of
# bench/data/figures.tsv (tab-separated `figure role series`, the series a
# comma list of labels; figures=PATH, set before loading, reads another)
# give ROLE(r): the indices of the series of role r that the CSV holds, as
# words, in the data file's order. gnuplot reads the file as data, the way
# it reads the CSV: nothing in it is run. A missing file is two warnings
# and no series.
array KV_RR[100]
array KV_RS[100]
KV_NR = 0
if (exists("FIG") && !NOSPLIT) {
    if (!exists("figures")) { figures = plotdir . "../bench/data/figures.tsv" }
    FIGURES = kvpath(figures)
    set datafile separator "\t"
    kv_radd(f, r, s) = f eq FIG && KV_NR < |KV_RR| ? (KV_NR = KV_NR + 1, KV_RR[KV_NR] = r, KV_RS[KV_NR] = s, 0) : 0
    stats FIGURES using (kv_radd(strcol(1), strcol(2), strcol(3))) nooutput
}
kv_c2s(s) = strlen(s) == 0 ? "" : (s[1:1] eq "," ? " " : s[1:1]) . kv_c2s(s[2:])
kv_rl(r, j) = j > KV_NR ? "" : (KV_RR[j] eq r ? kv_c2s(KV_RS[j]) . " " : "") . kv_rl(r, j + 1)
kv_rp(w, j) = j > words(w) ? "" : (kidx(word(w, j)) > 0 ? sprintf("%d ", kidx(word(w, j))) : "") . kv_rp(w, j + 1)
ROLE(r) = kv_rp(kv_rl(r, 1), 1)
# the figures read the datablocks (whitespace-separated numbers)
set datafile separator whitespace

# ---------------------------------------------------------------- output
# eval TERM(fmt) then set output OUTD."/NAME.".fmt, for fmt in "png svg".
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
CPU = kv_esc1(META("cpu"))
COMMIT = kv_esc1(META("commit"))
PARTIAL = META("partial")
SUB = sprintf("{/*0.7 %s, %s threads, commit %s%s}", CPU, kv_esc1(META("threads")), COMMIT, \
              PARTIAL eq "1" ? ", PARTIAL RUN" : "")
