#!/usr/bin/env bash
# eviction_targets.sh - the eviction targets of issue 18 from a sweep CSV:
#   1. `sinks` and `sliding` step time flat in T beyond the window: the
#      log-log slope of step_ns_median over T in [2W, 16W] (W = the cache's
#      tokens: window, plus sinks), target < 0.05;
#   2. h2o's bookkeeping: h2o's step time over sliding's at the same budget
#      (heavy + window = sliding's window), per T >= 2W and their median,
#      target <= 1.15; the attention-kernel time ratio is printed beside it.
#
#   bash bench/scripts/eviction_targets.sh [SWEEP.csv]
#
# Without a file it measures one first (`make eviction-targets` does):
#   kvlab sweep --strategies sliding,sinks-original,sinks-reindex,h2o \
#       --seq-lens 1024,2048,4096,8192 --out out/eviction.csv
# (defaults: sliding window 512, sinks 4 + 508, h2o 256 + 256: one budget of
# 512 tokens). Timings need a quiet machine; the script prints what it read.
set -euo pipefail
csv=${1:-}
if [ -z "$csv" ]; then
    KVLAB=${KVLAB:-build/kvlab}
    csv=out/eviction.csv
    mkdir -p out
    "$KVLAB" sweep --strategies sliding,sinks-original,sinks-reindex,h2o \
        --seq-lens 1024,2048,4096,8192 --quiet --out "$csv"
fi
[ -f "$csv" ] || { echo "eviction_targets: $csv not found" >&2; exit 2; }

awk -F, '
/^#/ { next }
!h { for (i = 1; i <= NF; i++) c[$i] = i; h = 1
     if (!("label" in c) || !("step_ns_median" in c) || !("params" in c)) {
         print "eviction_targets: not a schema-2 sweep CSV with labels" > "/dev/stderr"; bad = 1; exit 2 }
     next }
{
    l = $c["label"]; T = $c["seq_len"] + 0
    p = $c["params"]; w = 0
    n = split(p, kv, ";")
    for (i = 1; i <= n; i++) { split(kv[i], x, "="); if (x[1] == "window" || x[1] == "sinks" || x[1] == "heavy") w += x[2] }
    W[l] = w; step[l, T] = $c["step_ns_median"]; attn[l, T] = $c["attn_ns_median"]
    if (!((l, "seen") in step)) { step[l, "seen"] = 1; order[++nl] = l }
    Ts[T] = 1
}
END {
    if (bad) exit 2
    nt = 0; for (t in Ts) tl[++nt] = t + 0
    for (i = 2; i <= nt; i++) { v = tl[i]; for (j = i - 1; j >= 1 && tl[j] > v; j--) tl[j + 1] = tl[j]; tl[j + 1] = v }
    print "target 1: step time flat in T beyond the window (log-log slope over [2W, 16W] < 0.05)"
    for (k = 1; k <= nl; k++) {
        l = order[k]; if (l !~ /^(sliding|sinks)/) continue
        sx = sy = sxx = sxy = m = 0; rng = ""
        for (i = 1; i <= nt; i++) {
            t = tl[i]; if (t < 2 * W[l] || t > 16 * W[l] || !((l, t) in step)) continue
            lx = log(t); ly = log(step[l, t]); sx += lx; sy += ly; sxx += lx * lx; sxy += lx * ly; m++
            rng = rng sprintf(" %d:%.3fms", t, step[l, t] / 1e6)
        }
        if (m < 2) { printf "  %-14s W=%d: fewer than 2 rows in [2W, 16W]\n", l, W[l]; continue }
        s = (m * sxy - sx * sy) / (m * sxx - sx * sx)
        printf "  %-14s W=%-5d slope %+.4f  %s  (%s)\n", l, W[l], s, (s < 0.05 ? "met" : "MISSED"), rng
    }
    print "target 2: h2o step time over sliding at the same budget (<= 1.15)"
    if (!(("h2o", "seen") in step) || !(("sliding", "seen") in step)) { print "  needs h2o and sliding rows"; exit 0 }
    if (W["h2o"] != W["sliding"]) printf "  note: budgets differ (h2o %d, sliding %d tokens)\n", W["h2o"], W["sliding"]
    m = 0
    for (i = 1; i <= nt; i++) {
        t = tl[i]; if (t < 2 * W["sliding"] || !(("h2o", t) in step) || !(("sliding", t) in step)) continue
        r[++m] = step["h2o", t] / step["sliding", t]
        printf "  T=%-6d step %.3f / %.3f ms = %.3f   attention %.3f / %.3f ms = %.3f\n", t,
               step["h2o", t] / 1e6, step["sliding", t] / 1e6, r[m], attn["h2o", t] / 1e6,
               attn["sliding", t] / 1e6, (attn["sliding", t] > 0 ? attn["h2o", t] / attn["sliding", t] : 0)
    }
    for (i = 2; i <= m; i++) { v = r[i]; for (j = i - 1; j >= 1 && r[j] > v; j--) r[j + 1] = r[j]; r[j + 1] = v }
    if (m > 0) { med = m % 2 ? r[(m + 1) / 2] : (r[m / 2] + r[m / 2 + 1]) / 2
                 printf "  median ratio %.3f  %s\n", med, (med <= 1.15 ? "met" : "MISSED") }
}' "$csv"
