# serving_table.awk - the table of `make serving`'s summary.csv (awk -F,):
# per policy and rate, throughput, normalized latency, the batch it reached
# and how much of the pool held token rows.
/^#/ { next }
!h { for (i = 1; i <= NF; i++) c[$i] = i; h = 1
     print "| policy | rate (req/s) | served (req/s) | tokens/s | norm. latency p50 (s/token) | p90 | peak batch | preemptions | token rows, share of the used pool | peak share of the pool |"
     print "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
     next }
{ printf "| %s | %s | %.3f | %.1f | %.4f | %.4f | %d | %d | %.1f%% | %.1f%% |\n", $c["policy"], $c["rate"],
         $c["requests_per_s"], $c["tokens_per_s"], $c["norm_latency_p50_s"], $c["norm_latency_p90_s"],
         $c["peak_batch"], $c["preemptions"], 100 * $c["token_share_used"], 100 * $c["peak_token_share"] }
