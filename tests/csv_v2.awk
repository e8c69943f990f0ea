# csv_v2.awk - rewrite a schema-1 sweep CSV in the shape of schema 2 (test
# fixture for the readers of make notebook-check and make report-check).
#
#   awk -f tests/csv_v2.awk notebooks_data/bench.csv >v2.csv
#
# Schema 2 keeps the 27 v1 columns in order and adds `dtype` and `params`
# (docs/design.md). The fixture inserts them after the v1 columns, with
# values derived from the row's own bits/window/group/residual, and drops the
# `label` extra, so a reader that found columns by position, or leaned on
# `label`, fails. Every measured value is the input's own.
BEGIN { FS = OFS = ","; NV1 = 27 }
/^[ \t]*#/ { sub(/^# schema=1$/, "# schema=2"); print; next }
/^[ \t]*$/ { print; next }
!hd {
    for (i = 1; i <= NF; i++) { col[$i] = i; if ($i == "label") drop = i }
    hd = 1
}
{
    if (hd == 1) { dtype = "dtype"; params = "params"; hd = 2 }
    else {
        bits = $col["bits"]
        dtype = bits == 32 ? "f32" : "q" bits
        params = ""
        if ($col["window"] > 0) params = "window=" $col["window"]
        if (bits < 32) params = "bits=" bits ";group=" $col["group"] ";residual=" $col["residual"]
    }
    line = ""
    for (i = 1; i <= NF; i++) {
        if (i == drop) continue
        line = line (line == "" ? "" : ",") $i
        if (i == NV1) line = line "," dtype "," params
    }
    print line
}
