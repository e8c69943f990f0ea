# serving_table.awk - the table of `make serving`'s summary.csv (awk -F,):
# per policy and rate, throughput, normalized latency, the batch it reached
# and how much of the pool held token rows.
/^# latency_bound_s=/ { bound = substr($0, index($0, "=") + 1) + 0; next }
/^#/ { next }
!h { for (i = 1; i <= NF; i++) c[$i] = i; h = 1
     print "| policy | rate (req/s) | served (req/s) | tokens/s | norm. latency p50 (s/token) | p90 | peak batch | preemptions | token rows, share of the used pool | token rows at the peak, share of the pool |"
     print "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
     next }
{ p = $c["policy"]; if (!(p in seen)) { seen[p] = 1; order[++np] = p }
  nr[p]++; rate[p, nr[p]] = $c["rate"] + 0; lat[p, nr[p]] = $c["norm_latency_p50_s"] + 0 }
{ printf "| %s | %s | %.3f | %.1f | %.4f | %.4f | %d | %d | %.1f%% | %.1f%% |\n", $c["policy"], $c["rate"],
         $c["requests_per_s"], $c["tokens_per_s"], $c["norm_latency_p50_s"], $c["norm_latency_p90_s"],
         $c["peak_batch"], $c["preemptions"], 100 * $c["token_share_used"], 100 * $c["peak_token_share"] }
# sustained(p, b): the highest rate at which p's median and those of all its
# lower rates stay within b (rates taken in ascending order); 0: none
function sustained(p, b,    i, j, r, best, ok) {
    best = 0
    for (i = 1; i <= nr[p]; i++) {
        r = rate[p, i]; ok = lat[p, i] <= b
        for (j = 1; j <= nr[p] && ok; j++)
            if (rate[p, j] < r && lat[p, j] > b) ok = 0
        if (ok && r > best) best = r
    }
    return best
}
END {
    if (bound > 0) {
        # the bound of the plots (twice the best median at the lowest rate),
        # and around it: on a CPU a batch's step grows with the batch, so a
        # policy that batches more pays some latency before any queue forms;
        # the columns show how the comparison moves with the bound
        nf = split("1.5 2 3 4", f, " ")
        printf "\nThe highest rate each policy sustains, that is, with its median normalized latency within a bound at that rate and every lower one. The bounds are multiples of %.4g s/token, the best median at the lowest rate; the plots mark 2x (%.4g s/token):\n\n", bound / 2, bound
        printf "| policy |"; for (k = 1; k <= nf; k++) printf " within %sx (req/s) |", f[k]; print ""
        printf "|---|"; for (k = 1; k <= nf; k++) printf "---:|"; print ""
        for (i = 1; i <= np; i++) {
            printf "| %s |", order[i]
            for (k = 1; k <= nf; k++) {
                s = sustained(order[i], f[k] * bound / 2)
                printf " %s |", (s > 0 ? s : "below the lowest")
            }
            print ""
        }
    }
}
