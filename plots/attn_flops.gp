# attn_flops.gp - figure 2: attention FLOPs of one decode step vs sequence
# length (analytic counts from the rows, log-log). With a cache a step's
# one query attends to T keys: linear. Without one, all T queries are
# recomputed, each attending to its prefix: T(T+1)/2 pairs, quadratic.
# Sliding stops at its window.
plotdir = system("dirname '" . ARG0 . "'")
load plotdir . "/common.gp"

set title "Attention FLOPs per decode step vs sequence length\n" . SUB
set xlabel "sequence length T (tokens attended by the step)"
set ylabel "attention FLOPs per step (QK^T + PV, all layers)"
set logscale x 2
set logscale y 10
set format x "%g"
set format y "10^{%L}"
set label 1 "no cache: ∝ T(T+1)/2 (every query again)" \
    at graph 0.50, graph 0.62 font ",14" tc rgb "#d62728"
set label 2 "cached (the lines coincide): ∝ T" \
    at graph 0.12, graph 0.35 font ",14" tc rgb "#1f77b4"
set label 3 "sliding: flat at its window" at graph 0.66, graph 0.20 font ",14" tc rgb "#9467bd"
do for [fmt in "png svg"] {
    eval TERM(fmt)
    set output outdir . "/attn_flops." . fmt
    plot for [i = 1:words(KEYS)] DATA("rows", word(KEYS, i), "seq_len,attn_flops_step") \
         using 1:2 with linespoints lw 2 pt ptype(word(KEYS, i)) ps 1.3 \
         lc rgb color(word(KEYS, i)) title title(word(KEYS, i))
    unset output
}
