# step_table.awk - the whole-decode-step tables of `kvlab sweep` CSVs
# (bench/scripts/kernel_table.sh --steps; awk -F, -f targets.awk -f
# peers.awk -f step_table.awk TARGETS.tsv PEERS.csv ACC.csv SWEEP.csv...,
# peersf = PEERS.csv, accf = ACC.csv): the step against its limits, against
# llama.cpp and PyTorch, the peers' accuracy, then the storage targets with
# their own count. Every series a table shows and every target it judges is
# a row of bench/data/targets.tsv (tables `step` and `storage`): its series
# are sweep labels, its peers PEER:TYPE, its models the two below.
BEGIN {
    targets_load("step storage")
    targets_known("step", "bytes_bound sgemm_share speedup show accuracy")
    targets_known("storage", "bytes_bound speedup f32_bytes")
    # the models of the targets: shape key (layers,dim,heads,kv_heads,mlp;
    # the default one also has hidden 1376), and how the tables name them
    MKEY["default"] = "4,512,8,8,on"; MKEY["layer"] = "1,512,8,8,off"
    MNAME["default"] = "default model"; MNAME["layer"] = "one attention layer"
    MDESC["default"] = "default model (4 layers)"
    MDESC["layer"] = "one attention layer (hidden 512, 8 heads of 64, no MLP)"
    for (i = 1; i <= TG_N; i++) {
        n = tg_list(TG_MODEL[i], ms_)
        for (j = 1; j <= n; j++) if (!(ms_[j] in MKEY)) {
            TG_AT = TG_LINE[i]; tg_fail("model '" ms_[j] "' is not one of default, layer")
        }
    }
}
FNR == 1 { delete meta; delete col; hd = 0; pk_hd = 0; ak_hd = 0 }
FILENAME == peersf { if ($0 !~ /^[ \t]*#/ && $0 !~ /^[ \t]*$/) peer_row(); next }
FILENAME == accf {
    if ($0 ~ /^[ \t]*#/ || $0 ~ /^[ \t]*$/) next
    if (!ak_hd) { ak_hd = 1; for (i = 1; i <= NF; i++) acol[$i] = i; next }
    na++; for (i = 1; i <= NF; i++) A[na, i] = $i; next
}
/^[ \t]*#/ { if (meta_line()) meta[MK] = MV; next }
/^[ \t]*$/ { next }
!hd { for (i = 1; i <= NF; i++) col[$i] = i; hd = 1; next }
function v(name) { return (name in col) ? $col[name] : "" }
# the model name of a shape key, "" for another model
function model_of(sh,   m) { for (m in MKEY) if (MKEY[m] == sh) return m; return "" }
# 1 when target i applies to the row of series st, model md, T t
function takes(i, st, md, t) { return md != "" && tg_has(TG_MODEL[i], md) && tg_has(TG_SERIES[i], st) && tg_has_T(i, t, NOP) }
{
    # the series: the label; a file without one (schema 1) files a
    # quantized width as STRATEGY-intBITS
    st = v("strategy"); t = v("seq_len") + 0; ns = num(v("step_ns_median"))
    if (v("label") != "") st = v("label")
    else if (v("bits") != "" && v("bits") + 0 < 16) st = st "-int" v("bits")
    mlp = v("mlp") == "" ? 1 : v("mlp") + 0
    sh = v("layers") "," v("dim") "," v("heads") "," v("kv_heads") "," (mlp ? "on" : "off")
    if (sh == MKEY["default"] && v("hidden") != 1376) sh = "other"
    if (v("batch") != 1 || ns <= 0) next
    md = model_of(sh)
    rb = num(meta["read_gbps"]); sg = num(meta["sgemm_gflops"])
    # the rows a target judges one by one: R_*[i, r], r = 1 .. NR[i]
    for (i = 1; i <= TG_N; i++) {
        if (TG_METRIC[i] !~ /^(bytes_bound|sgemm_share|f32_bytes)$/ || !takes(i, st, md, t)) continue
        r = ++NR_[i]
        R_st[i, r] = st; R_ns[i, r] = ns; R_min[i, r] = num(v("step_ns_min")); R_bytes[i, r] = num(v("bytes_step"))
        R_lim[i, r] = num(meta[TG_AGAINST[i]]); R_file[i, r] = FILENAME; R_t[i, r] = t
        # the DRAM limit measured beside this row (kvlab sweep --bound), where
        # it has one: the host's bandwidth drifts within a run
        if (TG_AGAINST[i] == "read_gbps" && num(v("bound_gbps")) > 0) { R_lim[i, r] = num(v("bound_gbps")); OWN_BOUND = 1 }
        R_flops[i, r] = num(v("flops_step")); R_cb[i, r] = num(v("cache_bytes"))
        R_f32[i, r] = v("layers") * v("batch") * v("kv_heads") * 2 * v("head_dim") * 4 * t
    }
    k = sh SUBSEP st SUBSEP t
    if (!(k in K_NS) || ns < K_NS[k]) K_NS[k] = ns
    K_B[k] = num(v("bytes_step"))
    if (num(meta["read_l3_gbps"]) > RL3) RL3 = num(meta["read_l3_gbps"])
    for (i = 1; i <= TG_N; i++)
        if (TG_METRIC[i] == "accuracy" && takes(i, st, md, t))
            QA[st, t] = sprintf("%s | %s | %s", v("max_abs_err"), v("rel_err"), v("token_match"))
}
function kvlab(sh, st, t,   k) { k = sh SUBSEP st SUBSEP t; return (k in K_NS) ? K_NS[k] / 1e3 : -1 }
# the floor of a step: its bytes (weights + KV, the sweep's bytes_step)
# read at the L3 read bandwidth of the run, the fastest any program can
# read them; in us, -1 when unknown
function floor_us(sh, st, t,   k) { k = sh SUBSEP st SUBSEP t; return (k in K_B && K_B[k] > 0 && RL3 > 0) ? K_B[k] / RL3 / 1e3 : -1 }
# a missed ratio target: what it needed, against the floor
function need(peer_us, x, fl) { return fl > 0 ? sprintf(" (needs <= %.2f ms; floor %.2f ms)", peer_us / x / 1e3, fl / 1e3) : "" }
function needu(peer_us, x, fl) { return fl > 0 ? sprintf(" (needs <= %.0f us; floor %.0f us)", peer_us / x, fl) : "" }
# the slowest of target i's series at (sh, t), in us (-1 when one is not
# measured); SLOW its label (the last of equal ones)
function slowest(i, sh, t,   n, a, j, u, w) {
    n = tg_list(TG_SERIES[i], a); w = -1; SLOW = ""
    for (j = 1; j <= n; j++) {
        u = kvlab(sh, a[j], t)
        if (u < 0) { SLOW = ""; return -1 }
        if (u >= w) { w = u; SLOW = a[j] }
    }
    return w
}
# the fastest of target i's peer types at (sh, t), median us (-1: none);
# FAST its type
function fastest(i, sh, t,   n, a, j, u, b) {
    n = tg_types(i, a); b = -1; FAST = ""
    for (j = 1; j <= n; j++) {
        u = peer_type_med("step", tg_peer(i), sh, t, a[j], "step")
        if (u > 0 && (b < 0 || u < b)) { b = u; FAST = a[j] }
    }
    return b
}
# what a ratio column of target i compares: "fastest llama.cpp / slower of
# dynamic, static (>= 1.3x)" (names from the targets file)
function ratio_title(i,   n, a, ns, p, s) {
    n = tg_types(i, a); ns = tg_list(TG_SERIES[i], s)
    p = n > 1 ? "fastest " tg_peer(i) : tg_peer(i) " " a[1]
    return sprintf("%s / %s (%s %sx)", p, (ns > 1 ? "slower of " join(TG_SERIES[i]) : TG_SERIES[i]), TG_CMP[i], tg_x(i))
}
function join(list) { gsub(/,/, ", ", list); return list }
# appends the comma list l's entries not yet in U[1..U[0]] (UH: those in it)
function union_add(l, U, UH,   n, a, j) {
    n = split(l, a, ",")
    for (j = 1; j <= n; j++) if (!((a[j]) in UH)) { UH[a[j]] = 1; U[++U[0]] = a[j] }
}
# the sorted explicit T values of the targets marked in SEL[i] into TS[1..n]
function t_rows(SEL, TS,   i, S, n, t, j, x) {
    for (i = 1; i <= TG_N; i++) if (i in SEL) tg_T_values(i, S)
    n = 0; for (t in S) TS[++n] = t + 0
    for (i = 2; i <= n; i++) { x = TS[i]; for (j = i - 1; j >= 1 && TS[j] > x; j--) TS[j + 1] = TS[j]; TS[j + 1] = x }
    return n
}
# the TYPE/TYPE list of target i's PEER:TYPES as a comma list
function types_list(i,   ty) { ty = substr(TG_AGAINST[i], length(tg_peer(i)) + 2); gsub(/\//, ",", ty); return ty }
# ---- the step against its limits: each target of table step that judges
# single rows, each of its rows; 0 when there was none
function limit_rows(   i, r, lim, rr, any) {
    any = 0
    for (i = 1; i <= TG_N; i++) {
        if (TG_TABLE[i] != "step" || TG_METRIC[i] !~ /^(bytes_bound|sgemm_share)$/) continue
        for (r = 1; r <= NR_[i]; r++) {
            any = 1
            if (TG_METRIC[i] == "bytes_bound") {
                if (R_lim[i, r] <= 0) { printf "| %s, T %d (%s) | bytes / read bw | read_gbps missing | - | not measured |\n", R_st[i, r], R_t[i, r], R_file[i, r]; continue }
                lim = R_bytes[i, r] / R_lim[i, r]
                printf "| %s, `%s`, T %d (%.1f MB weights + KV) | within %.1fx of bytes / DRAM read bw (%.1f GB/s) | %s %.2f ms | %.2f ms (%.2fx; min %.2f ms) | %s |\n", \
                    MNAME[TG_MODEL[i]], R_st[i, r], R_t[i, r], R_bytes[i, r] / 1e6, TG_VALUE[i], R_lim[i, r], TG_CMP[i], \
                    TG_VALUE[i] * lim / 1e6, R_ns[i, r] / 1e6, R_ns[i, r] / lim, R_min[i, r] / 1e6, tg_tgt(tg_ok(i, R_ns[i, r] / lim), 1)
            } else {
                if (R_lim[i, r] <= 0) { printf "| %s, T %d (%s) | share of sgemm | sgemm_gflops missing | - | not measured |\n", R_st[i, r], R_t[i, r], R_file[i, r]; continue }
                rr = R_flops[i, r] / R_ns[i, r]
                printf "| %s, `%s`, T %d (%.1f GFLOP per step) | %s %.0f%% of sgemm (%.0f GFLOP/s) | %s %.0f GFLOP/s | %.1f GFLOP/s (%.0f%%; %.1f ms) | %s |\n", \
                    MNAME[TG_MODEL[i]], R_st[i, r], R_t[i, r], R_flops[i, r] / 1e9, TG_CMP[i], 100 * TG_VALUE[i], R_lim[i, r], TG_CMP[i], \
                    TG_VALUE[i] * R_lim[i, r], rr, 100 * rr / R_lim[i, r], R_ns[i, r] / 1e6, tg_tgt(tg_ok(i, rr / R_lim[i, r]), 1)
            }
        }
    }
    return any
}
# ---- against llama.cpp: a row per T of its targets (table step, metric
# speedup, peer llama.cpp): the peer's types, kvlab's series, one ratio
# column per target
function llama_table(   i, j, n, nt, TS, SEL, TY, TYH, KS, KSH, LI, nl, t, sh, pv, w, c, line, hdr, al, m) {
    nl = 0; TY[0] = 0; KS[0] = 0
    for (i = 1; i <= TG_N; i++) {
        if (TG_TABLE[i] != "step" || TG_METRIC[i] != "speedup" || tg_peer(i) != "llama.cpp") continue
        LI[++nl] = i; SEL[i] = 1; union_add(types_list(i), TY, TYH); union_add(TG_SERIES[i], KS, KSH)
    }
    if (nl == 0) return
    split(TG_MODEL[LI[1]], m, ","); sh = MKEY[m[1]]   # llama.cpp runs one model
    nt = t_rows(SEL, TS)
    hdr = "| T |"; al = "|---:|"
    for (j = 1; j <= TY[0]; j++) { hdr = hdr " llama.cpp " TY[j] " |"; al = al "---:|" }
    for (j = 1; j <= KS[0]; j++) { hdr = hdr " kvlab " KS[j] " |"; al = al "---:|" }
    for (j = 1; j <= nl; j++) { hdr = hdr " " ratio_title(LI[j]) " |"; al = al "---|" }
    print hdr; print al
    for (n = 1; n <= nt; n++) {
        t = TS[n]; line = "| " t " |"
        for (j = 1; j <= TY[0]; j++) line = line " " ms(peer_type_med("step", "llama.cpp", sh, t, TY[j], "step")) " |"
        for (j = 1; j <= KS[0]; j++) line = line " " ms(kvlab(sh, KS[j], t)) " |"
        for (j = 1; j <= nl; j++) {
            i = LI[j]
            if (!tg_has_T(i, t, NOP)) { line = line " - |"; continue }
            pv = fastest(i, sh, t); w = slowest(i, sh, t)
            if (pv > 0 && w > 0) {
                c = sprintf("%.2fx, %s", pv / w, tg_tgt(tg_ok(i, pv / w), 1))
                if (!tg_ok(i, pv / w)) c = c need(pv, TG_VALUE[i], floor_us(sh, SLOW, t))
            } else c = tg_tgt(0, 0)
            line = line " " c " |"
        }
        print line
    }
}
# ---- against PyTorch: a row per model and T of its targets (table step,
# peer pytorch): the peer's layouts, kvlab's series, one ratio column per
# layout a speedup row compares (a reported row: its ratio shown, not
# judged; show: the pair side by side, no ratio)
function torch_table(   i, j, n, nt, TS, SEL, TY, TYH, KS, KSH, MO, MOH, PTY, PTYH, RI, m, sh, t, pv, w, c, line, hdr, al, k) {
    TY[0] = 0; KS[0] = 0; MO[0] = 0; PTY[0] = 0
    for (i = 1; i <= TG_N; i++) {
        if (TG_TABLE[i] != "step" || TG_METRIC[i] !~ /^(speedup|show)$/ || tg_peer(i) != "pytorch") continue
        SEL[i] = 1; union_add(types_list(i), TY, TYH); union_add(TG_SERIES[i], KS, KSH); union_add(TG_MODEL[i], MO, MOH)
        if (TG_METRIC[i] == "speedup") {
            union_add(types_list(i), PTY, PTYH)
            if (tg_judged(i) && !(types_list(i) in RI)) RI[types_list(i)] = i
        }
    }
    if (MO[0] == 0) return
    nt = t_rows(SEL, TS)
    hdr = "| model | T |"; al = "|---|---:|"
    for (j = 1; j <= TY[0]; j++) { hdr = hdr " pytorch " TY[j] " |"; al = al "---:|" }
    for (j = 1; j <= KS[0]; j++) { hdr = hdr " kvlab " KS[j] " |"; al = al "---:|" }
    for (j = 1; j <= PTY[0]; j++) { hdr = hdr " " (PTY[j] in RI ? ratio_title(RI[PTY[j]]) : "pytorch " PTY[j] " / kvlab") " |"; al = al "---|" }
    print hdr; print al
    for (m = 1; m <= MO[0]; m++) {
        sh = MKEY[MO[m]]
        for (n = 1; n <= nt; n++) {
            t = TS[n]; line = "| " MDESC[MO[m]] " | " t " |"
            for (j = 1; j <= TY[0]; j++) line = line " " f0(peer_type_med("step", "pytorch", sh, t, TY[j], "step")) " |"
            for (j = 1; j <= KS[0]; j++) line = line " " f0(kvlab(sh, KS[j], t)) " |"
            for (j = 1; j <= PTY[0]; j++) {
                i = 0
                for (k = 1; k <= TG_N && !i; k++)
                    if ((k in SEL) && TG_METRIC[k] == "speedup" && types_list(k) == PTY[j] && tg_has(TG_MODEL[k], MO[m]) && tg_has_T(k, t, NOP)) i = k
                if (!i) { line = line " - |"; continue }
                pv = peer_type_med("step", "pytorch", sh, t, PTY[j], "step"); w = slowest(i, sh, t)
                if (!tg_judged(i))
                    c = (pv > 0 && w > 0) ? sprintf("%.1fx (reported)", pv / w) : "not measured"
                else {
                    c = (pv > 0 && w > 0) ? sprintf("%.1fx, %s", pv / w, tg_tgt(tg_ok(i, pv / w), 1)) : tg_tgt(0, 0)
                    if (pv > 0 && w > 0 && !tg_ok(i, pv / w)) c = c needu(pv, TG_VALUE[i], floor_us(sh, SLOW, t))
                }
                line = line " " c " |"
            }
            print line
        }
    }
}
# ---- the storage targets: each row of table storage in file order
function storage_rows(   i, j, r, found, h, pv, sh, n, TS, k, SEL, rr, tys, nty, lim, what, m) {
    for (i = 1; i <= TG_N; i++) {
        if (TG_TABLE[i] != "storage") continue
        if (TG_METRIC[i] == "bytes_bound") {
            found = 0
            for (r = 1; r <= NR_[i]; r++) {
                found = 1
                if (R_lim[i, r] <= 0) { printf "| `%s` (%s) | within %.1fx of bytes / DRAM read bw | read_gbps missing | - | %s |\n", R_st[i, r], R_file[i, r], TG_VALUE[i], tg_tgt(0, 0); continue }
                lim = R_bytes[i, r] / R_lim[i, r]
                printf "| `%s` step (%.1f MB weights + KV) | within %.1fx of bytes / DRAM read bw (%.1f GB/s) | %s %.2f ms | %.2f ms (%.2fx; min %.2f ms) | %s |\n", \
                    R_st[i, r], R_bytes[i, r] / 1e6, TG_VALUE[i], R_lim[i, r], TG_CMP[i], TG_VALUE[i] * lim / 1e6, R_ns[i, r] / 1e6, \
                    R_ns[i, r] / lim, R_min[i, r] / 1e6, tg_tgt(tg_ok(i, R_ns[i, r] / lim), 1)
            }
            if (!found) printf "| `%s` step | within %.1fx of bytes / DRAM read bw | - | not measured | %s |\n", TG_SERIES[i], TG_VALUE[i], tg_tgt(0, 0)
        } else if (TG_METRIC[i] == "speedup") {
            delete SEL; SEL[i] = 1; n = t_rows(SEL, TS); nty = tg_types(i, tys)
            split(TG_MODEL[i], m, ","); sh = MKEY[m[1]]   # llama.cpp runs one model
            for (k = 1; k <= n; k++) {
                pv = fastest(i, sh, TS[k]); h = slowest(i, sh, TS[k])
                what = sprintf("| `%s` step | %s %sx faster than %s", TG_SERIES[i], TG_CMP[i], tg_x(i), \
                               nty > 1 ? tg_peer(i) "'s fastest cache type" : tg_peer(i) " " tys[1])
                if (pv > 0 && h > 0)
                    printf "%s | <= %.2f ms | %.2f ms (%.2fx vs %s %.2f ms) | %s |\n", what, pv / TG_VALUE[i] / 1e3, h / 1e3, pv / h, \
                        FAST, pv / 1e3, tg_tgt(tg_ok(i, pv / h), 1)
                else
                    printf "%s | - | not measured | %s |\n", what, tg_tgt(0, 0)
            }
        } else if (TG_METRIC[i] == "f32_bytes") {
            found = 0
            for (r = 1; r <= NR_[i]; r++) {
                if (R_f32[i, r] <= 0) continue
                found = 1; rr = R_cb[i, r] / R_f32[i, r]
                printf "| `%s` | resident bytes %s %.2fx the f32 bytes of T tokens | %s %.1f MB | %.2f MB (%.3fx) | %s |\n", \
                    R_st[i, r], TG_CMP[i], TG_VALUE[i], TG_CMP[i], TG_VALUE[i] * R_f32[i, r] / 1e6, R_cb[i, r] / 1e6, rr, tg_tgt(tg_ok(i, rr), 1)
            }
            if (!found) printf "| `%s` | resident bytes %s %.2fx the f32 bytes of T tokens | - | not measured | %s |\n", TG_SERIES[i], TG_CMP[i], TG_VALUE[i], tg_tgt(0, 0)
        }
    }
}
END {
    if (TG_BAD) exit 2
    if (bad) exit 1
    if ((pn = peer_noisy_line("step")) != "") print pn
    # ---- the step against its limits
    print "**Whole decode step** (`kvlab sweep`, median step time; limits from the same run; the byte bound uses the DRAM read bandwidth" \
        (OWN_BOUND ? ", measured right before and after each row where the row has it (`bound_gbps`)" : "") "):\n"
    print "| step | target | required | measured | |"
    print "|---|---|---:|---:|---|"
    if (!limit_rows()) {
        missing = ""; md = ""
        for (i = 1; i <= TG_N; i++) if (TG_TABLE[i] == "step" && TG_METRIC[i] ~ /^(bytes_bound|sgemm_share)$/) {
            missing = missing (missing == "" ? "" : " or ") TG_SERIES[i] " T " TG_T[i]; if (md == "") md = TG_MODEL[i]
        }
        if (missing != "") printf "| (no %s-model %s row) | | | | not measured |\n", md, missing
    }

    # ---- against llama.cpp (llama-bench)
    lver = ("llama.cpp" in P_VER) ? substr(P_VER["llama.cpp"], 1, 12) : "not measured"
    printf "\n**Against llama.cpp** (`llama-bench -p 0 -n 1 -d T-1 -fa on -ctk/-ctv TYPE`, llama.cpp %s, the default model converted with its llama2c converter; kvlab `sweep`, same model; ms per decode step attending over T tokens, median; llama.cpp has no f32 cache with flash attention: its f32 cache is cast to f16; floor: the step's bytes, weights + KV, at the L3 read bandwidth of the run, %.1f GB/s, the fastest any program reads them; a missed target shows the time it needed):\n\n", lver, RL3
    llama_table()

    # ---- against PyTorch
    tver = ("pytorch" in P_VER) ? P_VER["pytorch"] : "not measured"
    printf "\n**Against PyTorch %s eager** (bench/peers/torch_peer.py: the usual decode loop over the same weights, its `cat` layout = DynamicCache, `prealloc` = StaticCache, and without a cache the whole sequence every step; same threads; us per decode step, median; kvlab `sweep` rows of the same model; targets at T >= %s%s; a missed target shows the time it needed and the floor, the step's bytes at the L3 read bandwidth):\n\n", \
        tver, torch_tmin(), torch_rep()
    torch_table()

    # ---- accuracy
    print "\n**Accuracy of the peers** (out/peers_accuracy.csv; prompt: llama.cpp's tokenization of \"hello world\", BOS + a space + the bytes, fed as the same ids to every program; greedy; llama.cpp configurations run in lockstep on the reference's tokens, so their logits are compared at identical inputs):\n"
    print "| peer | model | configuration | compared with | steps | equal tokens / argmax | first difference | max abs logit diff | rel L2 of logits |"
    print "|---|---|---|---|---:|---:|---:|---:|---:|"
    for (i = 1; i <= na; i++) {
        fd = A[i, acol["first_diff"]]; fd = (fd == "" ? "-" : fd == -1 ? "never" : "step " fd)
        printf "| %s %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", A[i, acol["peer"]], substr(A[i, acol["version"]], 1, 12), \
            A[i, acol["model"]], A[i, acol["config"]], A[i, acol["compared_with"]], A[i, acol["steps"]], \
            A[i, acol["agree"]] "/" A[i, acol["steps"]], fd, \
            (A[i, acol["max_abs_logit_diff"]] == "" ? "-" : A[i, acol["max_abs_logit_diff"]]), \
            (A[i, acol["rel_l2"]] == "" ? "-" : A[i, acol["rel_l2"]])
    }
    if (na == 0) print "| not measured | | | | | | | | |"
    anyqa = 0; for (k in QA) anyqa = 1
    if (anyqa) {
        print "\nkvlab's own lossy caches on the same model, for comparison (`kvlab sweep` rows, against an exact cache fed the same tokens):\n"
        print "| strategy | T | max abs logit diff | rel L2 of logits | greedy token match |"
        print "|---|---:|---:|---:|---:|"
        for (i = 1; i <= TG_N; i++) {
            if (TG_TABLE[i] != "step" || TG_METRIC[i] != "accuracy") continue
            ns = tg_list(TG_SERIES[i], qs); delete SEL; SEL[i] = 1; nt = t_rows(SEL, TS)
            for (a = 1; a <= ns; a++) for (b = 1; b <= nt; b++)
                if ((qs[a], TS[b]) in QA && !((qs[a], TS[b]) in QDONE)) { QDONE[qs[a], TS[b]] = 1; printf "| %s | %d | %s |\n", qs[a], TS[b], QA[qs[a], TS[b]] }
        }
    }
    tg_count("step targets")

    # ---- the storage targets (their own count)
    tg_reset()
    delete SEL; for (i = 1; i <= TG_N; i++) if (TG_TABLE[i] == "storage") SEL[i] = 1
    n = t_rows(SEL, TS); stt = ""; for (i = 1; i <= n; i++) stt = stt (stt == "" ? "" : ", ") TS[i]
    print "\n**16-bit and 2-bit caches** (default model, `kvlab sweep` rows at T = " stt "; the byte bound uses the DRAM read bandwidth; f32 bytes = layers x batch x kv_heads x 2 x head_dim x 4 x T):\n"
    print "| cache | target | required | measured | |"
    print "|---|---|---:|---:|---|"
    storage_rows()
    tg_count("storage targets")
}
function torch_tmin(   i, n, a, k, tmin) {
    tmin = -1
    for (i = 1; i <= TG_N; i++)
        if (TG_TABLE[i] == "step" && TG_METRIC[i] == "speedup" && tg_peer(i) == "pytorch" && tg_judged(i)) {
            n = tg_list(TG_T[i], a); for (k = 1; k <= n; k++) if (tmin < 0 || a[k] + 0 < tmin) tmin = a[k] + 0
        }
    return tmin
}
function torch_rep(   i, S, t, n, TS, j, x, s, tmin) {
    tmin = torch_tmin()
    for (i = 1; i <= TG_N; i++)
        if (TG_TABLE[i] == "step" && TG_METRIC[i] == "speedup" && tg_peer(i) == "pytorch" && !tg_judged(i)) tg_T_values(i, S)
    n = 0; for (t in S) TS[++n] = t + 0
    for (i = 2; i <= n; i++) { x = TS[i]; for (j = i - 1; j >= 1 && TS[j] > x; j--) TS[j + 1] = TS[j]; TS[j + 1] = x }
    s = ""; for (i = 1; i <= n; i++) s = s (s == "" ? "" : ", ") TS[i]
    return s == "" ? "" : ", T = " s " reported"
}
