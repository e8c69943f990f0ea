# peers.awk - what kernel_table.sh's two tables share (awk -f targets.awk
# -f peers.awk -f kernel_table.awk or step_table.awk): the number formats,
# the `# key=value` metadata lines, and the peer rows of out/peers.csv.
#
# peer_row() files a peers.csv row (a header first) into P_US / P_MED[key],
# the best us_min of each key and its us_median, and P_VER[peer]; key =
# bench SUBSEP peer SUBSEP shape-key SUBSEP seq_len SUBSEP dtype SUBSEP
# layout SUBSEP mode. Shape strings are k=v;k=v lists. The same rows by one
# TYPE, their dtype or their layout (llama.cpp's rows differ by dtype,
# PyTorch's by layout), are in P_TUS / P_TMED: peer_type_med() reads them.
function num(s) { return (s == "" || s ~ /nan/) ? 0 : s + 0 }
function f1(x) { return x < 0 ? "not measured" : sprintf("%.1f", x) }
function f0(x) { return x < 0 ? "not measured" : sprintf("%.0f", x) }
function ms(x) { return x < 0 ? "not measured" : sprintf("%.2f", x / 1e3) }
function ratio(a, b) { return (a > 0 && b > 0) ? sprintf("%.2fx", a / b) : "-" }
function pct(x) { return x < 0 ? "-" : sprintf("%.0f%%", 100 * x) }
# "k=v;k=v" -> the value of k ("" when absent)
function kv(s, k,   n, i, a, e) {
    n = split(s, a, ";")
    for (i = 1; i <= n; i++) { e = index(a[i], "="); if (substr(a[i], 1, e - 1) == k) return substr(a[i], e + 1) }
    return ""
}
function peer_type_file(k, us, med) {
    if (!(k in P_TUS) || us < P_TUS[k]) { P_TUS[k] = us; P_TMED[k] = med }
}
function peer_row(   i, key, sh, us, head, nz) {
    if (!pk_hd) { for (i = 1; i <= NF; i++) pcol[$i] = i; pk_hd = 1
        if (!("us_min" in pcol) || !("peer" in pcol) || !("shape" in pcol)) {
            print "kernel_table: " FILENAME ": not a peers.csv (no peer/shape/us_min column)" > "/dev/stderr"; bad = 1; exit 1 }
        return }
    if ($pcol["peer"] == "peer") return
    sh = $pcol["shape"]
    if ($pcol["bench"] == "kernel") sh = kv(sh, "head_dim") "," kv(sh, "heads") "," kv(sh, "kv_heads")
    else sh = kv(sh, "layers") "," kv(sh, "dim") "," kv(sh, "heads") "," kv(sh, "kv_heads") "," kv(sh, "mlp")
    head = $pcol["bench"] SUBSEP $pcol["peer"] SUBSEP sh SUBSEP ($pcol["seq_len"] + 0)
    key = head SUBSEP $pcol["dtype"] SUBSEP $pcol["layout"] SUBSEP $pcol["mode"]
    us = num($pcol["us_min"])
    if (us <= 0) return
    # a row measured while other programs ran (noisy; files before it: 0)
    # gives way to a clean one of the same key, whatever their figures
    nz = ("noisy" in pcol) ? $pcol["noisy"] + 0 : 0
    if ((key in P_US) && nz > P_NZ[key]) return
    if (!(key in P_US) || nz < P_NZ[key] || us < P_US[key]) { P_US[key] = us; P_MED[key] = num($pcol["us_median"]); P_NZ[key] = nz }
    peer_type_file(head SUBSEP $pcol["dtype"] SUBSEP $pcol["mode"], us, num($pcol["us_median"]))
    peer_type_file(head SUBSEP $pcol["layout"] SUBSEP $pcol["mode"], us, num($pcol["us_median"]))
    P_VER[$pcol["peer"]] = $pcol["version"]
}
# a sentence for the tables of BENCH (kernel, step) when some of their peer
# figures come only from runs other programs disturbed; "" otherwise
function peer_noisy_line(bench,   k, b, n, m) {
    for (k in P_NZ) { split(k, b, SUBSEP); if (b[1] != bench) continue; m++; if (P_NZ[k]) n++ }
    if (n == 0) return ""
    return sprintf("**%d of %d peer figures are noisy**: other programs ran while the peer measured them (`noisy`, `noise_reason` in out/peers.csv), so the ratios against them are suspect; measure again on a quiet machine.\n", n, m)
}
function peer(bench, who, sh, t, dt, lay, mode,   k) {
    k = bench SUBSEP who SUBSEP sh SUBSEP t SUBSEP dt SUBSEP lay SUBSEP mode
    return (k in P_US) ? P_US[k] : -1
}
function peer_med(bench, who, sh, t, dt, lay, mode,   k) {
    k = bench SUBSEP who SUBSEP sh SUBSEP t SUBSEP dt SUBSEP lay SUBSEP mode
    return (k in P_MED) ? P_MED[k] : -1
}
# the median us of peer who's rows of one TYPE (dtype or layout), -1 if none
function peer_type_med(bench, who, sh, t, type, mode,   k) {
    k = bench SUBSEP who SUBSEP sh SUBSEP t SUBSEP type SUBSEP mode
    return (k in P_TMED) ? P_TMED[k] : -1
}
function meta_line(   line, eq) {
    line = $0; sub(/^[ \t]*#[ \t]*/, "", line); eq = index(line, "=")
    if (eq == 0) return 0
    MK = substr(line, 1, eq - 1); MV = substr(line, eq + 1); return 1
}
