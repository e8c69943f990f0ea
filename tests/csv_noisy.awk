# csv_noisy.awk - a schema-3 sweep CSV with exactly one noisy row (test
# fixture for the readers of make report-check and make notebook-check).
#
#   awk -v reason='WHY' [-v picked=FILE] [-v all=1] -f tests/csv_noisy.awk notebooks_data/bench.csv >noisy.csv
#
# The first `dynamic` row gets noisy=1 and REASON, every other row noisy=0
# and `-`, and `# noisy_rows` says 1; columns are found by header name.
# With all=1 every row is noisy (a run on a busy machine), and `#
# noisy_rows` is left as it was.
# PICKED, when given, receives that row's series (its label, else
# "dynamic") and T as "SERIES,T". Exit 1 when the input has no noise columns
# (schema 1 or 2) or no dynamic row. Every measured value is the input's own.
BEGIN { FS = OFS = "," }
/^[ \t]*#/ { if (/^# noisy_rows=/ && !all) $0 = "# noisy_rows=1"; print; next }
/^[ \t]*$/ { print; next }
!hd { hd = 1; for (j = 1; j <= NF; j++) c[$j] = j; print; next }
!("noisy" in c) || !("noise_reason" in c) { exit 1 }
{ $c["noisy"] = all ? 1 : 0; $c["noise_reason"] = all ? reason : "-" }
!done && $c["strategy"] == "dynamic" {
    done = 1; $c["noisy"] = 1; $c["noise_reason"] = reason
    if (picked != "")
        print (("label" in c) && $c["label"] != "" ? $c["label"] : "dynamic"), $c["seq_len"] >picked
}
{ print }
END { if (!done) exit 1 }
