# gen_targets.awk - the generation-mode targets (bench/scripts/gen_targets.sh;
# awk -F, -f targets.awk -f gen_targets.awk TARGETS.tsv GEN.csv): the rows
# of bench/data/targets.tsv's table `gen`, judged on the figures the script
# measured, one CSV row per strategy (label,beams_ratio,tokens_equal):
#   beams_ratio  beam search's median decode step over greedy decoding of
#                as many sequences from the same prompt;
#   spec_equal   1 when self-speculation gave the greedy tokens, else 0.
BEGIN { targets_load("gen"); targets_known("gen", "beams_ratio spec_equal") }
!hd { for (i = 1; i <= NF; i++) col[$i] = i; hd = 1; next }
{ n++; L[n] = $col["label"]; BR[n] = $col["beams_ratio"]; EQ[n] = $col["tokens_equal"] }
END {
    if (TG_BAD) exit 2
    print "| strategy | target | required | measured | |"
    print "|---|---|---:|---:|---|"
    for (k = 1; k <= TG_N; k++) {
        ns = tg_list(TG_SERIES[k], sl)
        for (q = 1; q <= ns; q++) {
            j = 0; for (i = 1; i <= n; i++) if (L[i] == sl[q]) j = i
            if (TG_METRIC[k] == "beams_ratio")
                tg_row("`" sl[q] "` | beam search's decode step over greedy's", TG_CMP[k] " " tg_x(k), \
                       sprintf("%.2f", BR[j]), tg_ok(k, BR[j] + 0), j > 0 && BR[j] + 0 > 0)
            else
                tg_row("`" sl[q] "` | self-speculation gives the greedy tokens", "yes", \
                       EQ[j] == 1 ? "yes" : "no", tg_ok(k, EQ[j] + 0), j > 0)
        }
    }
    tg_count("generation targets")
}
