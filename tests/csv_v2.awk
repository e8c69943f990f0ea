# csv_v2.awk - rewrite a sweep CSV of any schema in the shape of schema 2
# (test fixture for the readers of make notebook-check and make
# report-check).
#
#   awk -f tests/csv_v2.awk notebooks_data/bench.csv >v2.csv
#
# Schema 2 keeps the 27 v1 columns in order and adds `dtype` and `params`
# (docs/design.md). The fixture writes them right after the v1 columns: the
# input's own where it has them (schema 2 and 3), else derived from the
# row's bits/window/group/residual (schema 1). It drops the `label` extra,
# so a reader that found columns by position, or leaned on `label`, fails,
# and schema 3's columns (the median's interval, noisy, noise_reason), which
# a schema-2 file never had. Every measured value is the input's own.
BEGIN {
    FS = OFS = ","; NV1 = 27
    split("label dtype params step_ns_ci_lo step_ns_ci_hi noisy noise_reason", d, " ")
    for (i in d) skip[d[i]] = 1
}
/^[ \t]*#/ { sub(/^# schema=[13]$/, "# schema=2"); print; next }
/^[ \t]*$/ { print; next }
!hd {
    for (i = 1; i <= NF; i++) { col[$i] = i; name[i] = $i }
    hd = 1
    line = ""
    for (i = 1; i <= NF; i++) {
        if (i > NV1 && (name[i] in skip)) continue
        line = line (line == "" ? "" : ",") $i
        if (i == NV1) line = line ",dtype,params"
    }
    print line
    next
}
{
    if ("dtype" in col) {
        dtype = $col["dtype"]; params = $col["params"]
    } else {
        bits = $col["bits"]
        dtype = bits == 32 ? "f32" : "q" bits
        params = ""
        if ($col["window"] > 0) params = "window=" $col["window"]
        if (bits < 32) params = "bits=" bits ";group=" $col["group"] ";residual=" $col["residual"]
    }
    line = ""
    for (i = 1; i <= NF; i++) {
        if (i > NV1 && (name[i] in skip)) continue
        line = line (line == "" ? "" : ",") $i
        if (i == NV1) line = line "," dtype "," params
    }
    print line
}
