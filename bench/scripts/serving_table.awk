# serving_table.awk - the table of `make serving`'s summary.csv (awk -F,):
# per policy and rate, throughput, normalized latency, the batch it reached
# and how much of the pool held token rows.
/^# latency_bound_s=/ { bound = substr($0, index($0, "=") + 1) + 0; next }
/^#/ { next }
!h { for (i = 1; i <= NF; i++) c[$i] = i; h = 1
     print "| policy | rate (req/s) | served (req/s) | tokens/s | norm. latency p50 (s/token) | p90 | peak batch | preemptions | token rows, share of the used pool | peak share of the pool |"
     print "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
     next }
{ p = $c["policy"]; if (!(p in seen)) { seen[p] = 1; order[++np] = p }
  if ($c["norm_latency_p50_s"] + 0 <= bound && $c["rate"] + 0 > best[p]) best[p] = $c["rate"] + 0 }
{ printf "| %s | %s | %.3f | %.1f | %.4f | %.4f | %d | %d | %.1f%% | %.1f%% |\n", $c["policy"], $c["rate"],
         $c["requests_per_s"], $c["tokens_per_s"], $c["norm_latency_p50_s"], $c["norm_latency_p90_s"],
         $c["peak_batch"], $c["preemptions"], 100 * $c["token_share_used"], 100 * $c["peak_token_share"] }
END {
    if (bound > 0) {
        printf "\nThe highest rate each policy sustains within %.4g s/token (twice the best median normalized latency at the lowest rate):\n\n", bound
        print "| policy | sustained rate (req/s) |"
        print "|---|---:|"
        for (i = 1; i <= np; i++) printf "| %s | %s |\n", order[i], (order[i] in best) ? best[order[i]] : "below the lowest rate"
    }
}
