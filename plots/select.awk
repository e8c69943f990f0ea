# select.awk - pull series out of a kvlab sweep CSV for the gnuplot scripts.
#
#   awk -v mode=MODE -v key=KEY -v cols=C1,C2,... -f plots/select.awk FILE.csv
#
# A series is one label (the sweep's `label` column: the strategy, or what
# its parameters make it, "quantized-int4", "sinks-reindex", a frontier's
# "sliding@25%"); a file without the column keys quantized widths by
# strategy + bits ("quantized-int8"). With -v by=family, series are the
# labels up to '@' (a frontier configuration over its budgets). Columns are
# found by header name, so extra columns and column order do not matter.
#   keys   the series present, in file order, space separated
#   rows   for series KEY, the named columns, one row per line, sorted by
#          the first column; a name may also be a derived value:
#            f32_bytes  bytes an f32 cache of seq_len tokens holds
#            rest_ns    step_ns_median - attn_ns_median
#            step_ms    step_ns_median / 1e6
#   cumul  for series KEY: N and the seconds to generate tokens 1..N,
#          integrating step latency over T with trapezoids between the
#          measured T (steps below the first measured T cost its latency)
#   meta   the value of metadata line `# KEY=value`
BEGIN { FS = ","; n_want = split(cols, want, ",") }

/^[ \t]*#/ {
    if (mode == "meta") {
        line = $0
        sub(/^[ \t]*#[ \t]*/, "", line)
        eq = index(line, "=")
        if (eq > 0 && substr(line, 1, eq - 1) == key)
            print substr(line, eq + 1)
    }
    next
}

/^[ \t]*$/ { next }

!have_header {
    for (i = 1; i <= NF; i++) col[$i] = i
    have_header = 1
    next
}

function val(name) {
    if (name == "f32_bytes")
        return $col["layers"] * 2 * $col["kv_heads"] * $col["head_dim"] * 4 * $col["batch"] * $col["seq_len"]
    if (name == "rest_ns")
        return $col["step_ns_median"] - $col["attn_ns_median"]
    if (name == "step_ms")
        return $col["step_ns_median"] / 1e6
    if (!(name in col))
        return "NaN"
    return $col[name]
}

{
    if ("label" in col) {
        k = $col["label"]
    } else {
        k = $col["strategy"]
        if (k == "quantized") k = k "-int" $col["bits"]
    }
    if (by == "family") sub(/@.*/, "", k)
}

mode == "keys" {
    if (!(k in seen)) { seen[k] = 1; printf "%s ", k }
    next
}

k != key { next }

mode == "rows" {
    out = ""
    for (j = 1; j <= n_want; j++) out = out (j > 1 ? " " : "") val(want[j])
    print out | "sort -g"
    next
}

mode == "cumul" {
    m++
    T[m] = $col["seq_len"] + 0
    S[m] = $col["step_ns_median"] / 1e9
}

END {
    if (mode == "keys") print ""
    if (mode == "cumul" && m > 0) {
        # insertion sort by T
        for (i = 2; i <= m; i++) {
            t = T[i]; s = S[i]
            for (j = i - 1; j >= 1 && T[j] > t; j--) { T[j + 1] = T[j]; S[j + 1] = S[j] }
            T[j + 1] = t; S[j + 1] = s
        }
        cum = T[1] * S[1]
        print T[1], cum
        for (i = 2; i <= m; i++) {
            cum += (T[i] - T[i - 1]) * (S[i] + S[i - 1]) / 2
            print T[i], cum
        }
    }
}
