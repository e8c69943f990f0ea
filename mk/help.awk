# mk/help.awk - `make help`: the targets documented in the makefiles named on
# the command line, one line each, aligned, by area. Read as data, from
#   target: prerequisites ## what it does     (a rule line)
#   ## target: what it does                    (a line of its own, above the rule)
#   ##@ Title                                  (the area of what follows)
# The targets in `first` (awk -v first='all test ...') come first, in that order.

FNR == 1 { area = FILENAME }
/^##@ / { area = substr($0, 5); next }
/^## [^:]+: / {
    rest = substr($0, 4)
    c = index(rest, ": ")
    add(substr(rest, 1, c - 1), substr(rest, c + 2))
    next
}
/^[a-zA-Z0-9][^:=#]*:[^=]*## / {
    name = substr($0, 1, index($0, ":") - 1)
    sub(/ +$/, "", name)
    add(name, substr($0, index($0, "## ") + 3))
}

function add(name, text) {
    if (name in seen) return
    seen[name] = 1
    n++
    tname[n] = name; ttext[n] = text; tarea[n] = area
    if (!(area in areaseen)) { areaseen[area] = 1; areas[++na] = area }
    if (length(name) > w) w = length(name)
}

function show(i) {
    printf "  %s  %s\n", sprintf("%-" w "s", tname[i]), ttext[i]
    shown[i] = 1
}

END {
    print "Usage: make [TARGET...] [VARIABLE=value...]   (make alone: all)"
    print ""
    print "Main targets:"
    nf = split(first, f, " ")
    for (k = 1; k <= nf; k++)
        for (i = 1; i <= n; i++)
            if (tname[i] == f[k] && !(i in shown)) show(i)
    for (a = 1; a <= na; a++) {
        head = 0
        for (i = 1; i <= n; i++) {
            if (tarea[i] != areas[a] || (i in shown)) continue
            if (!head) { print ""; print areas[a] ":"; head = 1 }
            show(i)
        }
    }
    print ""
    print "Settings (CC, CFLAGS, SANITIZE=1, PORTABLE=1, BUILD, PREFIX) are at the top of"
    print "the Makefile; each mk/*.mk holds its own beside its rules (BENCH_ARGS, FUZZ_SECONDS, ...)."
}
