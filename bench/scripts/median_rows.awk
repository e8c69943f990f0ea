# median_rows.awk - merges N sweep CSVs of one configuration into one whose
# timings are the per-row median over the N runs. `make baseline` keeps this
# instead of a single run: on a shared machine one run's rows can sit 20-40%
# off for the whole run (memory placement, a neighbour), and a baseline that
# carries such a row biases every later comparison.
#
#   awk -f bench/scripts/median_rows.awk RUN1.csv RUN2.csv RUN3.csv >BASELINE.csv
#
# The files must hold the same rows in the same order (the same sweep
# command); the configuration columns (strategy .. seq_len) are checked. The
# output is the first file with step_ns_median, step_ns_p95, attn_ns_median
# (and, in a schema-3 file, step_ns_ci_lo and step_ns_ci_hi: the medians of
# each keep ci_lo <= median <= ci_hi, as an order statistic keeps the order
# of its inputs) and the read_gbps, copy_gbps, sgemm_gflops metadata
# replaced by medians, and a `# merged=` metadata line saying so. A merged
# row is noisy (schema 3) when more than half of its runs were - then the
# median itself may be a disturbed run's - with the first such run's
# reason, and `# noisy_rows` counts the merged rows. Exit 2 with one line on
# stderr when the files do not match.
BEGIN { FS = ","; OFS = "," }

FNR == 1 { nf++ }
{ line[nf, FNR] = $0; nlines[nf] = FNR }

function die(msg) { print "median_rows.awk: " msg > "/dev/stderr"; bad = 1; exit 2 }

# median of v[1..n] (sorts v)
function median(v, n,    i, j, t) {
    for (i = 2; i <= n; i++)
        for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}

# schema 3: the merged noisy and noise_reason of every row after header line
# h0 (by line number, into mnoisy[] and mreason[]), and how many are noisy
function merge_noise(h0, jn, jr,    n, f, k, b, first) {
    nnoisy = 0
    for (n = h0 + 1; n <= nlines[1]; n++) {
        if (line[1, n] ~ /^#/) continue
        k = 0; first = ""
        for (f = 1; f <= nf; f++) {
            split(line[f, n], b, ",")
            if (b[jn] == 1) { k++; if (first == "") first = b[jr] }
        }
        mnoisy[n] = 2 * k > nf ? 1 : 0
        mreason[n] = mnoisy[n] ? first : "-"
        nnoisy += mnoisy[n]
    }
}

END {
    if (bad) exit 2
    if (nf < 1) die("no input files")
    for (f = 2; f <= nf; f++)
        if (nlines[f] != nlines[1]) die("file " f " has " nlines[f] " lines, file 1 has " nlines[1])
    # the header's columns first: the noise columns are merged before the
    # metadata that counts them is printed
    for (n = 1; n <= nlines[1] && line[1, n] ~ /^#/; n++) ;
    nc = split(line[1, n], h, ",")
    for (j = 1; j <= nc; j++) col[h[j]] = j
    if (("noisy" in col) && ("noise_reason" in col))
        merge_noise(n, col["noisy"], col["noise_reason"])
    hdr = 0
    for (n = 1; n <= nlines[1]; n++) {
        l = line[1, n]
        if (l ~ /^# (read_gbps|copy_gbps|sgemm_gflops)=/) {
            key = substr(l, 1, index(l, "="))
            for (f = 1; f <= nf; f++) {
                if (index(line[f, n], key) != 1) die("line " n ": metadata differs between files")
                v[f] = substr(line[f, n], length(key) + 1) + 0
            }
            printf "%s%.3f\n", key, median(v, nf)
            continue
        }
        if (l ~ /^# noisy_rows=/ && ("noisy" in col)) { print "# noisy_rows=" nnoisy; continue }
        if (l ~ /^#/) { print l; continue }
        if (!hdr) { # the header: the columns to merge (found above)
            hdr = 1
            if (!("seq_len" in col) || !("step_ns_median" in col) || !("attn_ns_median" in col) ||
                !("step_ns_p95" in col))
                die("line " n ": not a kvlab sweep header")
            printf "# merged=median of %d runs (step_ns_median, step_ns_p95, attn_ns_median, roofline)\n", nf
            print l
            continue
        }
        split(l, a, ",")
        for (f = 2; f <= nf; f++) {
            split(line[f, n], b, ",")
            for (j = 1; j <= col["seq_len"]; j++)
                if (a[j] != b[j]) die("line " n ": configuration differs between files")
        }
        m = split("step_ns_median step_ns_p95 attn_ns_median step_ns_ci_lo step_ns_ci_hi", names, " ")
        for (k = 1; k <= m; k++) {
            if (!(names[k] in col)) continue # the interval: schema 3 only
            j = col[names[k]]
            for (f = 1; f <= nf; f++) { split(line[f, n], b, ","); v[f] = b[j] + 0 }
            a[j] = sprintf("%.0f", median(v, nf))
        }
        if (n in mnoisy) { a[col["noisy"]] = mnoisy[n]; a[col["noise_reason"]] = mreason[n] }
        out = a[1]
        for (j = 2; j <= nc; j++) out = out "," a[j]
        print out
    }
}
