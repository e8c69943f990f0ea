# kernel_table.awk - the tables of `kvlab kernel` CSVs (bench/scripts/
# kernel_table.sh without --steps; awk -F, -f targets.awk -f peers.awk -f
# kernel_table.awk TARGETS.tsv PEERS.csv KERNEL.csv, peersf = PEERS.csv):
# cold and hot decode against their limit and ggml, ggml in both layouts,
# the targets of bench/data/targets.tsv's table `kernel`, why cold decode
# sits where it does, and every configuration. The series are the kernel's
# dtypes (a `# layout=kivi` run's int codes are kivi-int2 ...); which dtype
# is judged against what, and by how much, is the targets file's.
BEGIN {
    targets_load("kernel")
    targets_known("kernel", "cold_share cold_speedup speedup prefill_share")
    group = 32
    split("cold hot", MODES, " ")
    split("f32 f16 bf16 q8_0 q4_0", GT, " ")
    split("f32 f16 bf16 int8 int4 int2 kivi-int2", CDT, " ")
}
FNR == 1 { pk_hd = 0 }
FILENAME == peersf { if ($0 !~ /^[ \t]*#/ && $0 !~ /^[ \t]*$/) peer_row(); next }
/^[ \t]*#/ {
    if (!meta_line()) { if ($0 ~ /^[ \t]*#[ \t]*kvlab kernel/) LAYOUT = ""; next }   # a run begins
    if (MK == "layout") { LAYOUT = MV; next }
    if (MK ~ /^(read_gbps|read_l3_gbps|copy_gbps|sgemm_gflops)$/) {
        if (MK == "read_gbps") { nrl++; if (MV + 0 > 0 && (rlo == "" || MV + 0 < rlo)) rlo = MV + 0 }
        if (!(MK in meta) || MV + 0 > meta[MK] + 0) meta[MK] = MV
    } else if (MK == "date") {
        if (!("date" in meta)) meta["date"] = MV; last_date = MV
    } else meta[MK] = MV
    next
}
/^[ \t]*$/ { next }
!have_header {
    for (i = 1; i <= NF; i++) col[$i] = i
    split("head_dim heads kv_heads seq_len queries dtype threads us_min us_median gbps gflops", need, " ")
    for (i in need) if (!(need[i] in col)) { print "kernel_table: column " need[i] " missing" > "/dev/stderr"; bad = 1; exit 1 }
    have_header = 1
    next
}
$col["head_dim"] == "head_dim" { next }    # a repeated header (concatenated runs)
{
    n++
    D[n] = $col["head_dim"] + 0; H[n] = $col["heads"] + 0; HKV[n] = $col["kv_heads"] + 0
    T[n] = $col["seq_len"] + 0; Q[n] = $col["queries"] + 0; DT[n] = $col["dtype"]
    if (LAYOUT == "kivi" && DT[n] ~ /^int/) DT[n] = "kivi-" DT[n]   # per-channel keys
    US[n] = $col["us_min"] + 0; MED[n] = $col["us_median"] + 0
    GB[n] = $col["gbps"] + 0; GF[n] = $col["gflops"] + 0
    # the read limit measured right before and after this row (kvlab kernel
    # --bound or --roofline); 0: judge it by the run's limits instead
    BND[n] = ("bound_gbps" in col) ? $col["bound_gbps"] + 0 : 0
    if (BND[n] > 0) nbnd++
    # files from before cold/hot timed one cache over and over: hot
    MO[n] = ("mode" in col) ? $col["mode"] : "hot"
    # no timing pass undisturbed (kvlab kernel's noisy); files before it: 0
    NZ[n] = ("noisy" in col) ? $col["noisy"] + 0 : 0
    key = D[n] "," H[n] "," HKV[n] "," T[n] "," Q[n] "," DT[n] "," MO[n]
    if (!(key in row)) order[++nkeys] = key
    # a configuration's figure: its best clean row, a noisy one only without
    if (!(key in row) || (NZ[row[key]] && !NZ[n]) || (NZ[row[key]] == NZ[n] && US[n] < US[row[key]])) row[key] = n
    if (Q[n] == 1) { sk = D[n] "," H[n] "," HKV[n] "," T[n]; if (!(sk in seen)) { seen[sk] = 1; dec[++ndec] = sk } }
    if (Q[n] == 1) {   # per shape the largest T; per shape and dtype the smallest hot T
        sh3 = D[n] "," H[n] "," HKV[n]
        if (T[n] > MAXT_OF[sh3]) MAXT_OF[sh3] = T[n]
        k3 = sh3 "," DT[n]
        if (MO[n] == "hot" && (!(k3 in MINT_OF) || T[n] < MINT_OF[k3])) MINT_OF[k3] = T[n]
    }
}
# (kivi-: per-channel keys hold one pair per channel per group tokens, the
# same bytes as one pair per group values)
function kv_bytes(d, hkv, t, dt,   rb) {
    sub(/^kivi-/, "", dt)
    rb = dt == "f32" ? 4 * d : dt == "f16" || dt == "bf16" ? 2 * d : dt == "int8" ? d : dt == "int2" ? d / 4 : d / 2
    if (dt ~ /^int/) rb += (d / group) * 8
    return 2.0 * hkv * t * rb
}
function us_of(sk, dt, mode,   k) { k = sk ",1," dt "," mode; return (k in row) ? US[row[k]] : -1 }
# " (noisy)" after the figure of a configuration whose every row is noisy
function nz(sk, dt, mode,   k) { k = sk ",1," dt "," mode; return (k in row) && NZ[row[k]] ? " (noisy)" : "" }
function limit_gbps(mode) { return mode == "cold" ? rb : rl3 }
# the limit row j is held to: its own, measured beside it, else the run's
function row_limit(j) { return BND[j] > 0 ? BND[j] : limit_gbps(MO[j]) }
function shape(d, h, hkv) { return d ", " h "/" hkv }
# the best of ggml's types tys[1..nt] in llama.cpp's layout: its us, and
# BEST_T its type
function ggml_best(sh, t, mode, tys, nt,   j, u, b) {
    b = -1; BEST_T = ""
    for (j = 1; j <= nt; j++) {
        u = peer("kernel", "ggml", sh, t, tys[j], "llama", mode)
        if (u > 0 && (b < 0 || u < b)) { b = u; BEST_T = tys[j] }
    }
    return b
}
# the rows of a shape i (dec[i]: d,h,hkv,T) that target k applies to
function applies(k, s) {
    return (TG_MODEL[k] == "*" || TG_MODEL[k] == (s[2] != s[3] ? "gqa" : "mha")) && tg_has_T(k, s[4] + 0, NOP)
}
END {
    if (TG_BAD) exit 2
    if (bad) exit 1
    if (n == 0) { print "kernel_table: no data rows" > "/dev/stderr"; exit 1 }
    if ("group" in meta) group = meta["group"] + 0
    rb = num(meta["read_gbps"]); rl3 = num(meta["read_l3_gbps"]); sg = num(meta["sgemm_gflops"])
    # the headline read limits: the best of every measurement of them in the
    # run, the roofline's and the probe beside each row (bound_gbps: DRAM for
    # cold rows, the L3 for hot), as the sweep's read_gbps; rb_lo the lowest
    rb_lo = rlo == "" ? rb : rlo
    for (j = 1; j <= n; j++) {
        if (BND[j] <= 0) continue
        if (MO[j] == "cold") { nrl++; if (BND[j] > rb) rb = BND[j]; if (rb_lo <= 0 || BND[j] < rb_lo) rb_lo = BND[j] }
        else if (BND[j] > rl3) rl3 = BND[j]
    }
    if (rb > 0) meta["read_gbps"] = rb          # what the targets are held to, too
    if (rl3 > 0) meta["read_l3_gbps"] = rl3
    nbest = split("f32 f16 bf16", BEST_OF, " ")   # the decode tables' ggml float column
    gver = ("ggml" in P_VER) ? "ggml of llama.cpp " substr(P_VER["ggml"], 1, 12) " (out/peers.csv)" : "ggml: not measured (no peer rows; make peers)"
    printf "Measured on %s, %s threads, commit %s, %s%s. Limits (%s): read bandwidth from DRAM %s GB/s, from the L3 %s GB/s, sgemm %s GFLOP/s. Peer: %s.\n\n", \
        meta["cpu"], meta["threads"], meta["commit"], meta["date"], (last_date != meta["date"] ? " .. " last_date : ""), \
        (nrl > 1 ? sprintf("the best of %d measurements", nrl) : "measured in the same run"), \
        (rb > 0 ? sprintf("%.1f", rb) (nrl > 1 && rb_lo < rb ? sprintf(" (lowest %.1f)", rb_lo) : "") : "not measured"), (rl3 > 0 ? sprintf("%.1f", rl3) : "not measured"), \
        (sg > 0 ? sprintf("%.0f", sg) : "not measured"), gver
    for (o = 1; o <= nkeys; o++) if (NZ[row[order[o]]]) nnoisy++
    if (nnoisy > 0)
        printf "**%d of %d configurations are noisy**, marked (noisy): other programs ran during every timing pass of each of their rows, so their figures are suspect (`noisy`, `noise_reason` in the CSV); measure them again on a quiet machine.\n\n", nnoisy, nkeys
    if ((pn = peer_noisy_line("kernel")) != "") print pn
    if (nbnd > 0)
        print "A row's limit and % of limit use the read bandwidth measured right before and after that row (`bound_gbps`), where the row has one: the host's bandwidth drifts within a run.\n"

    for (m = 1; m <= 2; m++) {
        mode = MODES[m]
        if (mode == "cold")
            print "**Decode, cold** (every call reads its K/V from DRAM: the calls rotate over copies of the cache totalling more than 2 x the L3, as a decode step over many layers does; min us per call; limit = f32 K+V bytes / DRAM read bandwidth; ggml in llama.cpp's cache layout, its f32 column the best of its f32, f16 and bf16; speedup = ggml / kvlab):\n"
        else
            print "\n**Decode, hot** (one cache reused by every call, so it stays in the L3; limit = f32 K+V bytes / L3 read bandwidth; same columns):\n"
        print "| head_dim, heads/kv_heads, T | limit f32 | kvlab f32 | % of limit | ggml f32/f16/bf16 | speedup | kvlab int8 | ggml q8_0 | speedup | kvlab int4 | ggml q4_0 | speedup |"
        print "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        for (i = 1; i <= ndec; i++) {
            split(dec[i], s, ","); sh = s[1] "," s[2] "," s[3]
            f = us_of(dec[i], "f32", mode); i8 = us_of(dec[i], "int8", mode); i4 = us_of(dec[i], "int4", mode)
            if (f < 0 && i8 < 0 && i4 < 0) continue
            k = dec[i] ",1,f32," mode; lg = (k in row) ? row_limit(row[k]) : limit_gbps(mode)
            lim = lg > 0 ? kv_bytes(s[1], s[3], s[4], "f32") / (lg * 1e3) : -1
            gb = ggml_best(sh, s[4], mode, BEST_OF, nbest); bt = BEST_T
            g8 = peer("kernel", "ggml", sh, s[4], "q8_0", "llama", mode)
            g4 = peer("kernel", "ggml", sh, s[4], "q4_0", "llama", mode)
            printf "| %s, %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", \
                shape(s[1], s[2], s[3]), s[4], (lim > 0 ? sprintf("%.0f", lim) : "not measured"), f1(f) nz(dec[i], "f32", mode), \
                (lim > 0 && f > 0) ? pct(lim / f) : "-", (gb > 0 ? sprintf("%.0f (%s)", gb, bt) : "not measured"), \
                ratio(gb, f), f1(i8) nz(dec[i], "int8", mode), f0(g8), ratio(g8, i8), f1(i4) nz(dec[i], "int4", mode), f0(g4), ratio(g4, i4)
        }
    }

    # ---- ggml in both layouts
    print "\n**ggml flash attention in both K/V layouts** (min us per call; llama = llama.cpp's token-major cache viewed per head through a permute, with its mask; contig = per-head contiguous K/V, no mask):\n"
    print "| head_dim, heads/kv_heads, T | mode | f32 llama | f32 contig | f16 llama | f16 contig | bf16 llama | bf16 contig | q8_0 llama | q8_0 contig | q4_0 llama | q4_0 contig |"
    print "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for (m = 1; m <= 2; m++) for (i = 1; i <= ndec; i++) {
        split(dec[i], s, ","); sh = s[1] "," s[2] "," s[3]; line = ""
        for (j = 1; j <= 5; j++)
            line = line sprintf(" %s | %s |", f0(peer("kernel", "ggml", sh, s[4], GT[j], "llama", MODES[m])), \
                                           f0(peer("kernel", "ggml", sh, s[4], GT[j], "contig", MODES[m])))
        printf "| %s, %s | %s |%s\n", shape(s[1], s[2], s[3]), s[4], MODES[m], line
    }

    # ---- every target
    print "\n**Targets** (the kernel's and prefill's; cold share = f32 K+V bytes / DRAM read bandwidth / time):\n"
    print "| configuration | target | required | measured | |"
    print "|---|---|---:|---:|---|"
    # (bench/data/targets.tsv: the rows of table kernel, by metric, per shape in file order)
    for (i = 1; i <= ndec; i++) for (k = 1; k <= TG_N; k++) {
        split(dec[i], s, ","); c = shape(s[1], s[2], s[3]) ", T " s[4]
        if (TG_METRIC[k] != "cold_share" || !applies(k, s)) continue
        dt = TG_SERIES[k]; f = us_of(dec[i], dt, "cold"); lb = num(meta[TG_AGAINST[k]])
        if (f > 0) {
            share = lb > 0 ? kv_bytes(s[1], s[3], s[4], dt) / (lb * 1e3) / f : -1
            tg_row(c " | cold " dt " share of DRAM read bw", TG_CMP[k] " " pct(TG_VALUE[k]), \
                   sprintf("%s (%.1f GB/s)", pct(share), kv_bytes(s[1], s[3], s[4], dt) / (f * 1e3)), tg_ok(k, share), lb > 0)
        }
    }
    for (i = 1; i <= ndec; i++) for (k = 1; k <= TG_N; k++) {
        split(dec[i], s, ","); c = shape(s[1], s[2], s[3]) ", T " s[4]
        if (TG_METRIC[k] != "cold_speedup" || !applies(k, s)) continue
        f = us_of(dec[i], TG_AGAINST[k], "cold"); u = us_of(dec[i], TG_SERIES[k], "cold"); x = tg_x(k)
        if (f > 0 && u > 0)
            tg_row(c " | cold " TG_SERIES[k] " " TG_CMP[k] " " x "x faster than kvlab cold " TG_AGAINST[k], \
                   sprintf("<= %.0f us", f / x), sprintf("%.1f us (%.2fx)", u, f / u), tg_ok(k, f / u), 1)
    }
    for (m = 1; m <= 2; m++) for (i = 1; i <= ndec; i++) for (k = 1; k <= TG_N; k++) {
        mode = MODES[m]; split(dec[i], s, ","); sh = s[1] "," s[2] "," s[3]
        c = shape(s[1], s[2], s[3]) ", T " s[4] ", " mode
        if (TG_METRIC[k] != "speedup" || !applies(k, s)) continue
        f = us_of(dec[i], TG_SERIES[k], mode); x = tg_x(k)
        nt = tg_types(k, tys); g = ggml_best(sh, s[4], mode, tys, nt); bt = BEST_T
        if (f > 0)
            tg_row(c " | " TG_SERIES[k] " " TG_CMP[k] " " x "x faster than " tg_peer(k) " " substr(TG_AGAINST[k], length(tg_peer(k)) + 2), \
                   g > 0 ? sprintf("<= %.0f us", g / x) : "-", \
                   nt > 1 ? sprintf("%.1f us (%.2fx vs %s)", f, g / f, bt) : sprintf("%.1f us (%.2fx)", f, g / f), \
                   tg_ok(k, g / f), g > 0)
    }
    for (o = 1; o <= nkeys; o++) for (k = 1; k <= TG_N; k++) {
        j = row[order[o]]
        if (Q[j] == 1 || TG_METRIC[k] != "prefill_share" || !(TG_SERIES[k] == "*" || TG_SERIES[k] == DT[j])) continue
        if (!(TG_MODEL[k] == "*" || TG_MODEL[k] == (H[j] != HKV[j] ? "gqa" : "mha")) || !tg_has_T(k, T[j], NOP)) continue
        lg = num(meta[TG_AGAINST[k]]); x = TG_VALUE[k]
        c = shape(D[j], H[j], HKV[j]) ", T " T[j] ", " Q[j] " queries, " DT[j]
        tg_row(c " | prefill share of sgemm", sprintf("%s %s (%.0f GFLOP/s)", TG_CMP[k], pct(x), x * lg), \
               sprintf("%s (%.1f GFLOP/s)", pct(lg > 0 ? GF[j] / lg : -1), GF[j]), tg_ok(k, lg > 0 ? GF[j] / lg : 0), lg > 0)
    }
    # ---- why cold decode sits where it does: the DRAM time of its bytes, the
    # time of its arithmetic (the hot call at the smallest T of the run, whose
    # K/V sit in the L2/L3, scaled to T), and how much of one hides the other
    ncause = 0
    for (i = 1; i <= ndec; i++) {
        split(dec[i], s, ","); if (s[4] + 0 != MAXT_OF[s[1] "," s[2] "," s[3]]) continue
        for (j = 1; j <= 7; j++) {
            dt = CDT[j]; u = us_of(dec[i], dt, "cold"); if (u <= 0 || rb <= 0) continue
            if (!ncause++) {
                print "\n**Why cold decode sits where it does** (at the largest T of each shape: DRAM time = the dtype's K/V bytes / DRAM read bandwidth; compute time = the hot call at the smallest T of the run, its K/V in the L2/L3, scaled by T; full overlap would take the larger of the two, no overlap their sum; overlap = (sum - cold) / the smaller, 100% = fully hidden, 0% = not at all):\n"
                print "| head_dim, heads/kv_heads, T | dtype | cold | DRAM time | compute time (hot T) | sum | cold / DRAM time | overlap |"
                print "|---|---|---:|---:|---:|---:|---:|---:|"
            }
            dr = kv_bytes(s[1], s[3], s[4], dt) / (rb * 1e3)
            t0 = MINT_OF[s[1] "," s[2] "," s[3] "," dt]; hu = t0 > 0 ? us_of(s[1] "," s[2] "," s[3] "," t0, dt, "hot") : -1
            cp = hu > 0 ? hu * s[4] / t0 : -1
            ov = cp > 0 ? (dr + cp - u) / (cp < dr ? cp : dr) : -1
            printf "| %s, %s | %s | %.0f us | %.0f us | %s | %s | %.2fx | %s |\n", shape(s[1], s[2], s[3]), s[4], dt, u, dr, \
                (cp > 0 ? sprintf("%.0f us (%d)", cp, t0) : "-"), (cp > 0 ? sprintf("%.0f us", dr + cp) : "-"), u / dr, \
                (cp > 0 ? sprintf("%.0f%%", 100 * (ov < 0 ? 0 : (ov > 1 ? 1 : ov))) : "-")
        }
    }

    tg_count("targets")

    # ---- every row
    print "\n**Every kvlab configuration** (limit = K+V bytes of that dtype / the read bandwidth matching the mode: DRAM for cold, L3 for hot):\n"
    print "| head_dim, heads/kv_heads | T | queries | dtype | mode | us min | us median | limit us | GB/s | % of limit | GFLOP/s |"
    print "|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|"
    for (o = 1; o <= nkeys; o++) {
        j = row[order[o]]; lg = row_limit(j)
        lim = lg > 0 ? kv_bytes(D[j], HKV[j], T[j], DT[j]) / (lg * 1e3) : -1
        printf "| %s | %d | %d | %s | %s | %.1f%s | %.1f | %s | %.1f | %s | %.1f |\n", shape(D[j], H[j], HKV[j]), \
            T[j], Q[j], DT[j], MO[j], US[j], (NZ[j] ? " (noisy)" : ""), MED[j], (lim > 0 ? sprintf("%.1f", lim) : "-"), GB[j], \
            (lim > 0 && Q[j] == 1) ? pct(lim / US[j]) : "-", GF[j]
    }
}