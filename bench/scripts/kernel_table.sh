#!/usr/bin/env bash
# kernel_table.sh - the markdown tables of docs/performance.md describes (generated, never pasted),
# recomputed from result files: kvlab's own CSVs and out/peers.csv, the
# peers (ggml, llama.cpp, PyTorch) measured by the same `make bench` run.
#
#   bash bench/scripts/kernel_table.sh [--peers PEERS.csv] [KERNEL.csv]
#       the attention kernel (`kvlab kernel --csv`, out/kernel.csv): cold
#       and hot decode against the matching limit (DRAM / L3 read bandwidth)
#       and against ggml's flash-attention op in llama.cpp's cache layout;
#       ggml in both layouts; every target of issue 11 (and issue 5's
#       prefill one) and the kernel targets of issue 18 (cold f16 / bf16
#       >= 1.8x and int2, per token and KIVI, >= 4x faster than cold f32 at
#       T >= 8192); every configuration. A run with `# layout=kivi` (kvlab
#       kernel --layout kivi) names its quantized rows kivi-int2, kivi-int4 ...
#   bash bench/scripts/kernel_table.sh [--peers PEERS.csv] [--accuracy ACC.csv] --steps SWEEP.csv...
#       the whole decode step (`kvlab sweep` CSVs: out/bench.csv, the
#       one-layer out/torch_compare.csv): against the step's limits,
#       against llama-bench at the same depth, against the PyTorch loop,
#       and the accuracy of each peer (out/peers_accuracy.csv); then the
#       storage targets of issue 18 (their own count): the dynamic-f16 /
#       -bf16 step at T = 8192 within 1.2x of bytes / DRAM read bw and >= 2x
#       faster than llama.cpp's fastest cache type, quantized-int2 and kivi-2
#       holding <= 0.15x the f32 bytes of T = 8192 tokens.
#
# The one design decision: no figure is a constant. Every number is read
# from the files given (columns found by header name; K+V bytes from the
# shape, dtype and `# group=`; limits from `# key=value` metadata), a peer
# figure only from PEERS.csv; whatever a file does not hold is printed as
# "not measured", and every target is printed with its requirement, the
# measured value and met / NOT met / not measured, so a table can never
# claim more than the files show. Several runs may be concatenated: each
# configuration keeps its lowest time, each limit its highest measurement.
# Exit status: 0 on success, 2 on bad usage or a missing/unreadable file,
# 1 when a file lacks a needed column.
set -u

USAGE="usage: bash bench/scripts/kernel_table.sh [--peers PEERS.csv] [KERNEL_CSV]
       bash bench/scripts/kernel_table.sh [--peers PEERS.csv] [--accuracy ACC.csv] --steps SWEEP_CSV..."
usage() { echo "$USAGE" >&2; exit 2; }
readable() {
    if [ ! -r "$1" ] || [ ! -f "$1" ]; then echo "kernel_table: cannot read '$1'" >&2; exit 2; fi
}
peers=/dev/null acc=/dev/null steps=0
while [ $# -gt 0 ]; do
    case $1 in
    --peers) [ $# -ge 2 ] || usage; readable "$2"; peers=$2; shift 2 ;;
    --accuracy) [ $# -ge 2 ] || usage; readable "$2"; acc=$2; shift 2 ;;
    --steps) steps=1; shift; break ;;
    -h|--help) echo "$USAGE"; exit 0 ;;
    --) shift; break ;;
    -*) usage ;;
    *) break ;;
    esac
done

# ---------------------------------------------------------------- shared awk
# Peer rows (out/peers.csv) into P_US/P_MED[key] (best us_min per key) with
# P_VER[peer]; key = bench SUBSEP peer SUBSEP shape-key SUBSEP seq_len
# SUBSEP dtype SUBSEP layout SUBSEP mode. Shape strings are k=v;k=v lists.
AWK_COMMON='
function num(s) { return (s == "" || s ~ /nan/) ? 0 : s + 0 }
function verdict(ok) { return ok ? "met" : "**NOT met**" }
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
function peer_row(   i, key, sh, us) {
    if (!pk_hd) { for (i = 1; i <= NF; i++) pcol[$i] = i; pk_hd = 1
        if (!("us_min" in pcol) || !("peer" in pcol) || !("shape" in pcol)) {
            print "kernel_table: " FILENAME ": not a peers.csv (no peer/shape/us_min column)" > "/dev/stderr"; bad = 1; exit 1 }
        return }
    if ($pcol["peer"] == "peer") return
    sh = $pcol["shape"]
    if ($pcol["bench"] == "kernel") sh = kv(sh, "head_dim") "," kv(sh, "heads") "," kv(sh, "kv_heads")
    else sh = kv(sh, "layers") "," kv(sh, "dim") "," kv(sh, "heads") "," kv(sh, "kv_heads") "," kv(sh, "mlp")
    key = $pcol["bench"] SUBSEP $pcol["peer"] SUBSEP sh SUBSEP ($pcol["seq_len"] + 0) SUBSEP \
          $pcol["dtype"] SUBSEP $pcol["layout"] SUBSEP $pcol["mode"]
    us = num($pcol["us_min"])
    if (us <= 0) return
    if (!(key in P_US) || us < P_US[key]) { P_US[key] = us; P_MED[key] = num($pcol["us_median"]) }
    P_VER[$pcol["peer"]] = $pcol["version"]
}
function peer(bench, who, sh, t, dt, lay, mode,   k) {
    k = bench SUBSEP who SUBSEP sh SUBSEP t SUBSEP dt SUBSEP lay SUBSEP mode
    return (k in P_US) ? P_US[k] : -1
}
function peer_med(bench, who, sh, t, dt, lay, mode,   k) {
    k = bench SUBSEP who SUBSEP sh SUBSEP t SUBSEP dt SUBSEP lay SUBSEP mode
    return (k in P_MED) ? P_MED[k] : -1
}
function meta_line(   line, eq) {
    line = $0; sub(/^[ \t]*#[ \t]*/, "", line); eq = index(line, "=")
    if (eq == 0) return 0
    MK = substr(line, 1, eq - 1); MV = substr(line, eq + 1); return 1
}
'

if [ "$steps" = 1 ]; then
    [ $# -ge 1 ] || usage
    for f in "$@"; do readable "$f"; done
    exec awk -F, -v peersf="$peers" -v accf="$acc" "$AWK_COMMON"'
    BEGIN {
        BYTES_X = 1.3; SGEMM_SHARE = 0.70          # issue 5: the step against its limits
        LLAMA_X = 1.3; LLAMA_Q_X = 3               # issue 11: against llama-bench, f32 / int8, int4
        CAT_X = 5; PRE_X = 3; TORCH_T_MIN = 512    # issue 11: against PyTorch, T >= 512
        nllt = split("512 1024 2048 4096 8192", LLT, " ")
        ntt = split("128 512 1024 2048 4096 8192", TT, " ")
        split("f16 bf16 q8_0 q4_0", LTY, " ")
        DEF = "4,512,8,8,on"; LAYER = "1,512,8,8,off"
        H16_X = 1.2; H16_LLAMA_X = 2; Q2_BYTES = 0.15   # issue 18: 16-bit and 2-bit caches
        split("dynamic-f16 dynamic-bf16", H16S, " "); split("quantized-int2 kivi-2", Q2S, " ")
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
    {
        st = v("strategy"); t = v("seq_len") + 0; ns = num(v("step_ns_median"))
        if (v("label") != "") st = v("label")
        else if (st == "quantized") st = "quantized-int" v("bits")
        mlp = v("mlp") == "" ? 1 : v("mlp") + 0
        sh = v("layers") "," v("dim") "," v("heads") "," v("kv_heads") "," (mlp ? "on" : "off")
        if (sh == DEF && v("hidden") != 1376) sh = "other"
        if (v("batch") != 1 || ns <= 0) next
        rb = num(meta["read_gbps"]); sg = num(meta["sgemm_gflops"])
        if (sh == DEF && st == "dynamic" && t == 4096) {
            nb++; B_ns[nb] = ns; B_min[nb] = num(v("step_ns_min")); B_bytes[nb] = num(v("bytes_step"))
            B_rb[nb] = rb; B_file[nb] = FILENAME
        }
        if (sh == DEF && (st == "dynamic-f16" || st == "dynamic-bf16") && t == 8192) {
            nh++; H_st[nh] = st; H_ns[nh] = ns; H_min[nh] = num(v("step_ns_min"))
            H_bytes[nh] = num(v("bytes_step")); H_rb[nh] = rb; H_file[nh] = FILENAME
        }
        if (sh == DEF && (st == "quantized-int2" || st == "kivi-2") && t == 8192) {
            nq2++; Q2_st[nq2] = st; Q2_cb[nq2] = num(v("cache_bytes"))
            Q2_f32[nq2] = v("layers") * v("batch") * v("kv_heads") * 2 * v("head_dim") * 4 * t
        }
        if (sh == DEF && st == "none" && t == 2048) {
            nf++; F_ns[nf] = ns; F_flops[nf] = num(v("flops_step")); F_sg[nf] = sg; F_file[nf] = FILENAME
        }
        k = sh SUBSEP st SUBSEP t
        if (!(k in K_NS) || ns < K_NS[k]) K_NS[k] = ns
        K_B[k] = num(v("bytes_step"))
        if (num(meta["read_l3_gbps"]) > RL3) RL3 = num(meta["read_l3_gbps"])
        if (sh == DEF && st ~ /^quantized-int/ && (t == 512 || t == 8192)) {
            QA[st, t] = sprintf("%s | %s | %s", v("max_abs_err"), v("rel_err"), v("token_match"))
        }
    }
    function kvlab(sh, st, t,   k) { k = sh SUBSEP st SUBSEP t; return (k in K_NS) ? K_NS[k] / 1e3 : -1 }
    # the floor of a step: its bytes (weights + KV, the sweep'"'"'s bytes_step)
    # read at the L3 read bandwidth of the run, the fastest any program can
    # read them; in us, -1 when unknown
    function floor_us(sh, st, t,   k) { k = sh SUBSEP st SUBSEP t; return (k in K_B && K_B[k] > 0 && RL3 > 0) ? K_B[k] / RL3 / 1e3 : -1 }
    # a missed ratio target: what it needed, against the floor
    function need(peer_us, x, fl) { return fl > 0 ? sprintf(" (needs <= %.2f ms; floor %.2f ms)", peer_us / x / 1e3, fl / 1e3) : "" }
    function needu(peer_us, x, fl) { return fl > 0 ? sprintf(" (needs <= %.0f us; floor %.0f us)", peer_us / x, fl) : "" }
    function tgt(ok, measured) { if (!measured) { nnm++; return "not measured" } ntgt++; if (ok) nmet++; return verdict(ok) }
    END {
        if (bad) exit 1
        # ---- the step against its limits (issue 5)
        print "**Whole decode step** (`kvlab sweep`, median step time; limits from the same run; the byte bound uses the DRAM read bandwidth):\n"
        print "| step | target | required | measured | |"
        print "|---|---|---:|---:|---|"
        for (i = 1; i <= nb; i++) {
            if (B_rb[i] <= 0) { printf "| dynamic, T 4096 (%s) | bytes / read bw | read_gbps missing | - | not measured |\n", B_file[i]; continue }
            lim = B_bytes[i] / B_rb[i]
            printf "| default model, `dynamic`, T 4096 (%.1f MB weights + KV) | within %.1fx of bytes / DRAM read bw (%.1f GB/s) | <= %.2f ms | %.2f ms (%.2fx; min %.2f ms) | %s |\n", \
                B_bytes[i] / 1e6, BYTES_X, B_rb[i], BYTES_X * lim / 1e6, B_ns[i] / 1e6, B_ns[i] / lim, \
                B_min[i] / 1e6, tgt(B_ns[i] <= BYTES_X * lim, 1)
        }
        for (i = 1; i <= nf; i++) {
            if (F_sg[i] <= 0) { printf "| none, T 2048 (%s) | share of sgemm | sgemm_gflops missing | - | not measured |\n", F_file[i]; continue }
            r = F_flops[i] / F_ns[i]
            printf "| default model, `none`, T 2048 (%.1f GFLOP per step) | >= %.0f%% of sgemm (%.0f GFLOP/s) | >= %.0f GFLOP/s | %.1f GFLOP/s (%.0f%%; %.1f ms) | %s |\n", \
                F_flops[i] / 1e9, 100 * SGEMM_SHARE, F_sg[i], SGEMM_SHARE * F_sg[i], r, 100 * r / F_sg[i], \
                F_ns[i] / 1e6, tgt(r >= SGEMM_SHARE * F_sg[i], 1)
        }
        if (nb + nf == 0) print "| (no default-model dynamic T 4096 or none T 2048 row) | | | | not measured |"

        # ---- against llama.cpp (llama-bench)
        lver = ("llama.cpp" in P_VER) ? substr(P_VER["llama.cpp"], 1, 12) : "not measured"
        printf "\n**Against llama.cpp** (`llama-bench -p 0 -n 1 -d T-1 -fa on -ctk/-ctv TYPE`, llama.cpp %s, the default model converted with its llama2c converter; kvlab `sweep`, same model; ms per decode step attending over T tokens, median; llama.cpp has no f32 cache with flash attention: its f32 cache is cast to f16; floor: the step'"'"'s bytes, weights + KV, at the L3 read bandwidth of the run, %.1f GB/s, the fastest any program reads them; a missed target shows the time it needed):\n\n", lver, RL3
        print "| T | llama.cpp f16 | llama.cpp bf16 | llama.cpp q8_0 | llama.cpp q4_0 | kvlab dynamic | kvlab static | kvlab int8 | kvlab int4 | f32: fastest llama.cpp / slower kvlab (>= 1.3x) | int8: q8_0 / kvlab (>= 3x) | int4: q4_0 / kvlab (>= 3x) |"
        print "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|"
        for (i = 1; i <= nllt; i++) {
            t = LLT[i]; best = -1
            for (j = 1; j <= 4; j++) {
                L[j] = peer_med("step", "llama.cpp", DEF, t, LTY[j], "llama", "step")
                if (L[j] > 0 && (best < 0 || L[j] < best)) best = L[j]
            }
            d = kvlab(DEF, "dynamic", t); s = kvlab(DEF, "static", t)
            q8 = kvlab(DEF, "quantized-int8", t); q4 = kvlab(DEF, "quantized-int4", t)
            w = (d > 0 && s > 0) ? (d > s ? d : s) : -1
            c1 = (best > 0 && w > 0) ? sprintf("%.2fx, %s", best / w, tgt(best / w >= LLAMA_X, 1)) : tgt(0, 0)
            if (best > 0 && w > 0 && best / w < LLAMA_X) c1 = c1 need(best, LLAMA_X, floor_us(DEF, "static", t))
            c2 = (L[3] > 0 && q8 > 0) ? sprintf("%.2fx, %s", L[3] / q8, tgt(L[3] / q8 >= LLAMA_Q_X, 1)) : tgt(0, 0)
            if (L[3] > 0 && q8 > 0 && L[3] / q8 < LLAMA_Q_X) c2 = c2 need(L[3], LLAMA_Q_X, floor_us(DEF, "quantized-int8", t))
            c3 = (L[4] > 0 && q4 > 0) ? sprintf("%.2fx, %s", L[4] / q4, tgt(L[4] / q4 >= LLAMA_Q_X, 1)) : tgt(0, 0)
            if (L[4] > 0 && q4 > 0 && L[4] / q4 < LLAMA_Q_X) c3 = c3 need(L[4], LLAMA_Q_X, floor_us(DEF, "quantized-int4", t))
            printf "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", t, ms(L[1]), ms(L[2]), ms(L[3]), ms(L[4]), \
                ms(d), ms(s), ms(q8), ms(q4), c1, c2, c3
        }

        # ---- against PyTorch
        tver = ("pytorch" in P_VER) ? P_VER["pytorch"] : "not measured"
        printf "\n**Against PyTorch %s eager** (bench/peers/torch_peer.py: the usual decode loop over the same weights, `torch.cat` = DynamicCache, preallocated = StaticCache, none = the whole sequence every step; same threads; us per decode step, median; kvlab `sweep` rows of the same model; targets at T >= %d, T = 128 reported; a missed target shows the time it needed and the floor, the step'"'"'s bytes at the L3 read bandwidth):\n\n", tver, TORCH_T_MIN
        print "| model | T | torch.cat | torch preallocated | torch none | kvlab dynamic | kvlab static | kvlab none | torch.cat / slower kvlab (>= 5x) | preallocated / slower kvlab (>= 3x) |"
        print "|---|---:|---:|---:|---:|---:|---:|---:|---|---|"
        for (m = 1; m <= 2; m++) {
            sh = m == 1 ? LAYER : DEF; name = m == 1 ? "one attention layer (hidden 512, 8 heads of 64, no MLP)" : "default model (4 layers)"
            for (i = 1; i <= ntt; i++) {
                t = TT[i]
                pc = peer_med("step", "pytorch", sh, t, "f32", "cat", "step")
                pp = peer_med("step", "pytorch", sh, t, "f32", "prealloc", "step")
                pn = peer_med("step", "pytorch", sh, t, "f32", "none", "step")
                d = kvlab(sh, "dynamic", t); s = kvlab(sh, "static", t); n0 = kvlab(sh, "none", t)
                w = (d > 0 && s > 0) ? (d > s ? d : s) : -1
                if (t >= TORCH_T_MIN) {
                    c1 = (pc > 0 && w > 0) ? sprintf("%.1fx, %s", pc / w, tgt(pc / w >= CAT_X, 1)) : tgt(0, 0)
                    if (pc > 0 && w > 0 && pc / w < CAT_X) c1 = c1 needu(pc, CAT_X, floor_us(sh, "static", t))
                    c2 = (pp > 0 && w > 0) ? sprintf("%.1fx, %s", pp / w, tgt(pp / w >= PRE_X, 1)) : tgt(0, 0)
                    if (pp > 0 && w > 0 && pp / w < PRE_X) c2 = c2 needu(pp, PRE_X, floor_us(sh, "static", t))
                } else {
                    c1 = (pc > 0 && w > 0) ? sprintf("%.1fx (reported)", pc / w) : "not measured"
                    c2 = (pp > 0 && w > 0) ? sprintf("%.1fx (reported)", pp / w) : "not measured"
                }
                printf "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", name, t, f0(pc), f0(pp), f0(pn), \
                    f0(d), f0(s), f0(n0), c1, c2
            }
        }

        # ---- accuracy
        print "\n**Accuracy of the peers** (out/peers_accuracy.csv; prompt: llama.cpp'"'"'s tokenization of \"hello world\", BOS + a space + the bytes, fed as the same ids to every program; greedy; llama.cpp configurations run in lockstep on the reference'"'"'s tokens, so their logits are compared at identical inputs):\n"
        print "| peer | model | configuration | compared with | steps | equal tokens / argmax | first difference | max abs logit diff | rel L2 of logits |"
        print "|---|---|---|---|---:|---:|---:|---:|---:|"
        for (i = 1; i <= na; i++) {
            fd = A[i, acol["first_diff"]]; fd = (fd == "" ? "-" : fd == -1 ? "none" : "step " fd)
            printf "| %s %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", A[i, acol["peer"]], substr(A[i, acol["version"]], 1, 12), \
                A[i, acol["model"]], A[i, acol["config"]], A[i, acol["compared_with"]], A[i, acol["steps"]], \
                A[i, acol["agree"]] "/" A[i, acol["steps"]], fd, \
                (A[i, acol["max_abs_logit_diff"]] == "" ? "-" : A[i, acol["max_abs_logit_diff"]]), \
                (A[i, acol["rel_l2"]] == "" ? "-" : A[i, acol["rel_l2"]])
        }
        if (na == 0) print "| not measured | | | | | | | | |"
        if (("quantized-int8", 512) in QA || ("quantized-int8", 8192) in QA) {
            print "\nkvlab'"'"'s own quantized caches on the same model, for comparison (`kvlab sweep` rows, against an exact `dynamic` cache fed the same tokens):\n"
            print "| strategy | T | max abs logit diff | rel L2 of logits | greedy token match |"
            print "|---|---:|---:|---:|---:|"
            split("quantized-int8 quantized-int4", QS, " ")
            for (i = 1; i <= 2; i++) for (j = 1; j <= 2; j++) {
                t = j == 1 ? 512 : 8192
                if ((QS[i], t) in QA) printf "| %s | %d | %s |\n", QS[i], t, QA[QS[i], t]
            }
        }
        printf "\n%d of %d step targets met", nmet, ntgt
        if (nnm) printf "; %d not measured", nnm
        print "."

        # ---- issue 18: 16-bit and 2-bit caches (their own count)
        ntgt = nmet = nnm = 0
        print "\n**16-bit and 2-bit caches** (issue 18; default model, `kvlab sweep` rows at T = 8192; the byte bound uses the DRAM read bandwidth; f32 bytes = layers x batch x kv_heads x 2 x head_dim x 4 x T):\n"
        print "| cache | target | required | measured | |"
        print "|---|---|---:|---:|---|"
        for (i = 1; i <= 2; i++) {
            found = 0
            for (j = 1; j <= nh; j++) {
                if (H_st[j] != H16S[i]) continue
                found = 1
                if (H_rb[j] <= 0) { printf "| `%s` (%s) | within %.1fx of bytes / DRAM read bw | read_gbps missing | - | %s |\n", H_st[j], H_file[j], H16_X, tgt(0, 0); continue }
                lim = H_bytes[j] / H_rb[j]
                printf "| `%s` step (%.1f MB weights + KV) | within %.1fx of bytes / DRAM read bw (%.1f GB/s) | <= %.2f ms | %.2f ms (%.2fx; min %.2f ms) | %s |\n", \
                    H_st[j], H_bytes[j] / 1e6, H16_X, H_rb[j], H16_X * lim / 1e6, H_ns[j] / 1e6, H_ns[j] / lim, \
                    H_min[j] / 1e6, tgt(H_ns[j] <= H16_X * lim, 1)
            }
            if (!found) printf "| `%s` step | within %.1fx of bytes / DRAM read bw | - | not measured | %s |\n", H16S[i], H16_X, tgt(0, 0)
            best = -1
            for (j = 1; j <= 4; j++) {
                u = peer_med("step", "llama.cpp", DEF, 8192, LTY[j], "llama", "step")
                if (u > 0 && (best < 0 || u < best)) { best = u; bt = LTY[j] }
            }
            h = kvlab(DEF, H16S[i], 8192)
            if (best > 0 && h > 0)
                printf "| `%s` step | >= %dx faster than llama.cpp'"'"'s fastest cache type | <= %.2f ms | %.2f ms (%.2fx vs %s %.2f ms) | %s |\n", \
                    H16S[i], H16_LLAMA_X, best / H16_LLAMA_X / 1e3, h / 1e3, best / h, bt, best / 1e3, tgt(best / h >= H16_LLAMA_X, 1)
            else
                printf "| `%s` step | >= %dx faster than llama.cpp'"'"'s fastest cache type | - | not measured | %s |\n", H16S[i], H16_LLAMA_X, tgt(0, 0)
        }
        for (i = 1; i <= 2; i++) {
            found = 0
            for (j = 1; j <= nq2; j++) {
                if (Q2_st[j] != Q2S[i] || Q2_f32[j] <= 0) continue
                found = 1; r = Q2_cb[j] / Q2_f32[j]
                printf "| `%s` | resident bytes <= %.2fx the f32 bytes of T tokens | <= %.1f MB | %.2f MB (%.3fx) | %s |\n", \
                    Q2S[i], Q2_BYTES, Q2_BYTES * Q2_f32[j] / 1e6, Q2_cb[j] / 1e6, r, tgt(r <= Q2_BYTES, 1)
            }
            if (!found) printf "| `%s` | resident bytes <= %.2fx the f32 bytes of T tokens | - | not measured | %s |\n", Q2S[i], Q2_BYTES, tgt(0, 0)
        }
        printf "\n%d of %d storage targets met", nmet, ntgt
        if (nnm) printf "; %d not measured", nnm
        print "."
    }' "$peers" "$acc" "$@"
fi

[ $# -le 1 ] || usage
csv=${1:-out/kernel.csv}
case $csv in -h|--help) echo "$USAGE"; exit 0 ;; -*) usage ;; esac
readable "$csv"

awk -F, -v peersf="$peers" "$AWK_COMMON"'
BEGIN {
    # issue 11 targets
    COLD_BW = 0.90                     # cold f32 decode: share of the DRAM read bandwidth
    I8_SELF = 2.5; I4_SELF = 4.0       # cold int8 / int4 vs kvlab cold f32, T >= 8192, heads == kv_heads
    I8_SELF_GQA = 2.0; I4_SELF_GQA = 3.0
    H16_SELF = 1.8; I2_SELF = 4.0      # issue 18: cold f16 / bf16, int2 / kivi-int2 vs cold f32, T >= 8192
    SELF_T = 8192
    F32_PEER = 2.0; I8_PEER = 3.0; I4_PEER = 4.0   # vs ggml (llama.cpp layout), hot and cold
    SGEMM_SHARE = 0.70                 # prefill (issue 5): share of the sgemm rate
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
        if (MK == "read_gbps") nrl++
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
    # files from before cold/hot timed one cache over and over: hot
    MO[n] = ("mode" in col) ? $col["mode"] : "hot"
    key = D[n] "," H[n] "," HKV[n] "," T[n] "," Q[n] "," DT[n] "," MO[n]
    if (!(key in row)) order[++nkeys] = key
    if (!(key in row) || US[n] < US[row[key]]) row[key] = n
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
function limit_gbps(mode) { return mode == "cold" ? rb : rl3 }
function target(what, need, got, ok, measured) {
    if (!measured) { nnm++; printf "| %s | %s | not measured | not measured |\n", what, need; return }
    ntgt++; if (ok) nmet++
    printf "| %s | %s | %s | %s |\n", what, need, got, verdict(ok)
}
function shape(d, h, hkv) { return d ", " h "/" hkv }
# the best of ggml f32, f16, bf16 in llama.cpp layout: its us, and BEST_T its type
function ggml_best(sh, t, mode,   j, u, b) {
    b = -1; BEST_T = ""
    for (j = 1; j <= 3; j++) {
        u = peer("kernel", "ggml", sh, t, GT[j], "llama", mode)
        if (u > 0 && (b < 0 || u < b)) { b = u; BEST_T = GT[j] }
    }
    return b
}
END {
    if (bad) exit 1
    if (n == 0) { print "kernel_table: no data rows" > "/dev/stderr"; exit 1 }
    if ("group" in meta) group = meta["group"] + 0
    rb = num(meta["read_gbps"]); rl3 = num(meta["read_l3_gbps"]); sg = num(meta["sgemm_gflops"])
    gver = ("ggml" in P_VER) ? "ggml of llama.cpp " substr(P_VER["ggml"], 1, 12) " (out/peers.csv)" : "ggml: not measured (no peer rows; make peers)"
    printf "Measured on %s, %s threads, commit %s, %s%s. Limits (%s): read bandwidth from DRAM %s GB/s, from the L3 %s GB/s, sgemm %s GFLOP/s. Peer: %s.\n\n", \
        meta["cpu"], meta["threads"], meta["commit"], meta["date"], (last_date != meta["date"] ? " .. " last_date : ""), \
        (nrl > 1 ? sprintf("the best of %d measurements", nrl) : "measured in the same run"), \
        (rb > 0 ? sprintf("%.1f", rb) : "not measured"), (rl3 > 0 ? sprintf("%.1f", rl3) : "not measured"), \
        (sg > 0 ? sprintf("%.0f", sg) : "not measured"), gver

    for (m = 1; m <= 2; m++) {
        mode = MODES[m]; lg = limit_gbps(mode)
        if (mode == "cold")
            print "**Decode, cold** (every call reads its K/V from DRAM: the calls rotate over copies of the cache totalling more than 2 x the L3, as a decode step over many layers does; min us per call; limit = f32 K+V bytes / DRAM read bandwidth; ggml in llama.cpp'"'"'s cache layout, its f32 column the best of its f32, f16 and bf16; speedup = ggml / kvlab):\n"
        else
            print "\n**Decode, hot** (one cache reused by every call, so it stays in the L3; limit = f32 K+V bytes / L3 read bandwidth; same columns):\n"
        print "| head_dim, heads/kv_heads, T | limit f32 | kvlab f32 | % of limit | ggml f32/f16/bf16 | speedup | kvlab int8 | ggml q8_0 | speedup | kvlab int4 | ggml q4_0 | speedup |"
        print "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        for (i = 1; i <= ndec; i++) {
            split(dec[i], s, ","); sh = s[1] "," s[2] "," s[3]
            f = us_of(dec[i], "f32", mode); i8 = us_of(dec[i], "int8", mode); i4 = us_of(dec[i], "int4", mode)
            if (f < 0 && i8 < 0 && i4 < 0) continue
            lim = lg > 0 ? kv_bytes(s[1], s[3], s[4], "f32") / (lg * 1e3) : -1
            gb = ggml_best(sh, s[4], mode); bt = BEST_T
            g8 = peer("kernel", "ggml", sh, s[4], "q8_0", "llama", mode)
            g4 = peer("kernel", "ggml", sh, s[4], "q4_0", "llama", mode)
            printf "| %s, %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", \
                shape(s[1], s[2], s[3]), s[4], (lim > 0 ? sprintf("%.0f", lim) : "not measured"), f1(f), \
                (lim > 0 && f > 0) ? pct(lim / f) : "-", (gb > 0 ? sprintf("%.0f (%s)", gb, bt) : "not measured"), \
                ratio(gb, f), f1(i8), f0(g8), ratio(g8, i8), f1(i4), f0(g4), ratio(g4, i4)
        }
    }

    # ---- ggml in both layouts
    print "\n**ggml flash attention in both K/V layouts** (min us per call; llama = llama.cpp'"'"'s token-major cache viewed per head through a permute, with its mask; contig = per-head contiguous K/V, no mask):\n"
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
    print "\n**Targets** (issue 11, and issue 5'"'"'s prefill target; cold share = f32 K+V bytes / DRAM read bandwidth / time):\n"
    print "| configuration | target | required | measured | |"
    print "|---|---|---:|---:|---|"
    for (i = 1; i <= ndec; i++) {
        split(dec[i], s, ","); c = shape(s[1], s[2], s[3]) ", T " s[4]
        f = us_of(dec[i], "f32", "cold")
        if (f > 0) {
            share = rb > 0 ? kv_bytes(s[1], s[3], s[4], "f32") / (rb * 1e3) / f : -1
            target(c " | cold f32 share of DRAM read bw", ">= " pct(COLD_BW), \
                   sprintf("%s (%.1f GB/s)", pct(share), kv_bytes(s[1], s[3], s[4], "f32") / (f * 1e3)), share >= COLD_BW, rb > 0)
        }
    }
    for (i = 1; i <= ndec; i++) {
        split(dec[i], s, ","); c = shape(s[1], s[2], s[3]) ", T " s[4]
        if (s[4] < SELF_T) continue
        gqa = s[2] != s[3]; x8 = gqa ? I8_SELF_GQA : I8_SELF; x4 = gqa ? I4_SELF_GQA : I4_SELF
        f = us_of(dec[i], "f32", "cold"); i8 = us_of(dec[i], "int8", "cold"); i4 = us_of(dec[i], "int4", "cold")
        if (f > 0 && i8 > 0)
            target(c " | cold int8 >= " x8 "x faster than kvlab cold f32", sprintf("<= %.0f us", f / x8), \
                   sprintf("%.1f us (%.2fx)", i8, f / i8), i8 <= f / x8, 1)
        if (f > 0 && i4 > 0)
            target(c " | cold int4 >= " x4 "x faster than kvlab cold f32", sprintf("<= %.0f us", f / x4), \
                   sprintf("%.1f us (%.2fx)", i4, f / i4), i4 <= f / x4, 1)
        split("f16 bf16 int2 kivi-int2", ST18, " ")   # issue 18
        for (j = 1; j <= 4; j++) {
            u = us_of(dec[i], ST18[j], "cold"); x = j <= 2 ? H16_SELF : I2_SELF
            if (f > 0 && u > 0)
                target(c " | cold " ST18[j] " >= " x "x faster than kvlab cold f32", sprintf("<= %.0f us", f / x), \
                       sprintf("%.1f us (%.2fx)", u, f / u), u <= f / x, 1)
        }
    }
    for (m = 1; m <= 2; m++) for (i = 1; i <= ndec; i++) {
        mode = MODES[m]; split(dec[i], s, ","); sh = s[1] "," s[2] "," s[3]
        c = shape(s[1], s[2], s[3]) ", T " s[4] ", " mode
        f = us_of(dec[i], "f32", mode); i8 = us_of(dec[i], "int8", mode); i4 = us_of(dec[i], "int4", mode)
        gb = ggml_best(sh, s[4], mode); bt = BEST_T
        g8 = peer("kernel", "ggml", sh, s[4], "q8_0", "llama", mode)
        g4 = peer("kernel", "ggml", sh, s[4], "q4_0", "llama", mode)
        if (f > 0)
            target(c " | f32 >= " F32_PEER "x faster than ggml f32/f16/bf16", gb > 0 ? sprintf("<= %.0f us", gb / F32_PEER) : "-", \
                   sprintf("%.1f us (%.2fx vs %s)", f, gb / f, bt), f <= gb / F32_PEER, gb > 0)
        if (i8 > 0)
            target(c " | int8 >= " I8_PEER "x faster than ggml q8_0", g8 > 0 ? sprintf("<= %.0f us", g8 / I8_PEER) : "-", \
                   sprintf("%.1f us (%.2fx)", i8, g8 / i8), i8 <= g8 / I8_PEER, g8 > 0)
        if (i4 > 0)
            target(c " | int4 >= " I4_PEER "x faster than ggml q4_0", g4 > 0 ? sprintf("<= %.0f us", g4 / I4_PEER) : "-", \
                   sprintf("%.1f us (%.2fx)", i4, g4 / i4), i4 <= g4 / I4_PEER, g4 > 0)
    }
    for (o = 1; o <= nkeys; o++) {
        j = row[order[o]]
        if (Q[j] == 1) continue
        c = shape(D[j], H[j], HKV[j]) ", T " T[j] ", " Q[j] " queries, " DT[j]
        target(c " | prefill share of sgemm", sprintf(">= %s (%.0f GFLOP/s)", pct(SGEMM_SHARE), SGEMM_SHARE * sg), \
               sprintf("%s (%.1f GFLOP/s)", pct(sg > 0 ? GF[j] / sg : -1), GF[j]), GF[j] >= SGEMM_SHARE * sg, sg > 0)
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
                print "\n**Why cold decode sits where it does** (at the largest T of each shape: DRAM time = the dtype'"'"'s K/V bytes / DRAM read bandwidth; compute time = the hot call at the smallest T of the run, its K/V in the L2/L3, scaled by T; full overlap would take the larger of the two, none their sum; overlap = (sum - cold) / the smaller, 100% = fully hidden, 0% = none):\n"
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

    printf "\n%d of %d targets met", nmet, ntgt
    if (nnm) printf "; %d not measured", nnm
    print "."

    # ---- every row
    print "\n**Every kvlab configuration** (limit = K+V bytes of that dtype / the read bandwidth matching the mode: DRAM for cold, L3 for hot):\n"
    print "| head_dim, heads/kv_heads | T | queries | dtype | mode | us min | us median | limit us | GB/s | % of limit | GFLOP/s |"
    print "|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|"
    for (o = 1; o <= nkeys; o++) {
        j = row[order[o]]; lg = limit_gbps(MO[j])
        lim = lg > 0 ? kv_bytes(D[j], HKV[j], T[j], DT[j]) / (lg * 1e3) : -1
        printf "| %s | %d | %d | %s | %s | %.1f | %.1f | %s | %.1f | %s | %.1f |\n", shape(D[j], H[j], HKV[j]), \
            T[j], Q[j], DT[j], MO[j], US[j], MED[j], (lim > 0 ? sprintf("%.1f", lim) : "-"), GB[j], \
            (lim > 0 && Q[j] == 1) ? pct(lim / US[j]) : "-", GF[j]
    }
}' "$peers" "$csv"
