# sharing.awk - series of a `kvlab sharing` CSV (out/sharing.csv) for
# plots/sharing.gp. Columns are found by header name.
#
#   awk -v mode=series -f plots/sharing.awk FILE.csv
#       every series LABEL/MODE/P (MODE shared or unshared), file order
#   awk -v mode=rows -v key=LABEL/MODE/P -f plots/sharing.awk FILE.csv
#       for that series: batch, resident MiB, decode step ms per sequence,
#       one line per row, sorted by batch
# A CSV without those columns (a sweep's) has no series.
BEGIN { FS = "," }
/^[ \t]*#/ || /^[ \t]*$/ { next }
!have_header {
    for (i = 1; i <= NF; i++) col[$i] = i
    have_header = 1
    # another CSV (a sweep's): no series
    ok = ("label" in col) && ("shared" in col) && ("prompt_len" in col) && ("batch" in col)
    next
}
ok {
    k = $col["label"] "/" ($col["shared"] == 1 ? "shared" : "unshared") "/" $col["prompt_len"]
    if (mode == "series") {
        if (!(k in seen)) { seen[k] = 1; printf "%s ", k }
    } else if (mode == "rows" && k == key) {
        line[$col["batch"] + 0] = sprintf("%d %.6f %.6f", $col["batch"],
                                          $col["resident_bytes"] / 1048576.0,
                                          $col["step_ns_per_seq"] / 1e6)
    }
}
END {
    if (mode == "rows") {
        n = 0
        for (b in line) order[++n] = b + 0
        for (i = 2; i <= n; i++) # insertion sort: a handful of batch sizes
            for (j = i; j > 1 && order[j - 1] > order[j]; j--) {
                t = order[j]; order[j] = order[j - 1]; order[j - 1] = t
            }
        for (i = 1; i <= n; i++) print line[order[i]]
    }
    if (mode == "series") printf "\n"
}
