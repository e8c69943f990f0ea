#!/usr/bin/env bash
# notebook_check.sh - make notebook-check: run the classroom notebook
# (notebooks_data/kv_cache.ipynb) top to bottom, headless, the way a class
# would, and fail on any cell error.
#
#   bash tests/notebook_check.sh SWEEP.csv...
#
# For each CSV (make notebook-check passes the committed reference run and a
# fresh `make bench-quick` output), plus a schema-2 rewrite of the first one
# (tests/csv_v2.awk) and a copy of it with one noisy row
# (tests/csv_noisy.awk) and one with every row noisy, `jupyter nbconvert --to notebook --execute` runs the
# notebook with DATA pointed at the file (KVLAB_DATA), and
# tests/notebook_check.py checks the executed copy: the first cell read that
# file and listed its noisy rows, every figure was drawn, every exercise's
# answer cell printed, the exact identities held. A last run points DATA at a
# path that does not exist and checks that the first cell's output says so;
# one more has a tiny `make serving` output next to it, which the serving
# section must draw.
# The committed notebook must carry no outputs. Executed copies go to
# build/notebook/.
set -u
cd "$(dirname "$0")/.."

NB=notebooks_data/kv_cache.ipynb
OUT=build/notebook
PY=${PY3:-/usr/bin/python3}
JUPYTER=${JUPYTER:-jupyter}
[ $# -ge 1 ] || { echo "usage: bash tests/notebook_check.sh SWEEP.csv..." >&2; exit 2; }
for f in "$@"; do
    [ -f "$f" ] || { echo "notebook_check: $f not found" >&2; exit 2; }
done
command -v "$JUPYTER" >/dev/null || { echo "notebook_check: $JUPYTER not found (make deps installs jupyter-nbconvert)" >&2; exit 2; }
rm -rf "$OUT" && mkdir -p "$OUT"
# the debugger's frozen-modules notice is noise in a headless run
export PYDEVD_DISABLE_FILE_VALIDATION=1 MPLBACKEND=module://matplotlib_inline.backend_inline

fail=0
"$PY" tests/notebook_check.py clean "$NB" || fail=1

run() {  # run NAME DATA: execute the notebook with DATA, into $OUT/kv_cache.NAME.ipynb
    echo "notebook-check: $NB with DATA=$2"
    KVLAB_DATA="$2" "$JUPYTER" nbconvert --to notebook --execute \
        --ExecutePreprocessor.timeout=600 --output-dir "$OUT" --output "kv_cache.$1.ipynb" "$NB" \
        >"$OUT/$1.log" 2>&1 || { sed -n '/Traceback\|Error/,$p' "$OUT/$1.log" | tail -n 25 >&2
                                  echo "notebook-check: a cell failed with DATA=$2 (log: $OUT/$1.log)" >&2
                                  return 1; }
}

awk -f tests/csv_v2.awk "$1" >"$OUT/schema2.csv" || fail=1
awk -v reason='other programs used 1.62 cores (limit 0.30); cpu_util 0.48 (limit 0.60)' \
    -f tests/csv_noisy.awk "$1" >"$OUT/noisy.csv" ||
    { echo "notebook-check: no noisy fixture: $1 lacks the noise columns or a dynamic row" >&2; fail=1; }
awk -v reason='cpu_util 0.28 (limit 0.60)' -v all=1 -f tests/csv_noisy.awk "$1" >"$OUT/all-noisy.csv" ||
    { echo "notebook-check: no all-noisy fixture from $1" >&2; fail=1; }
i=0
for csv in "$@" "$OUT/schema2.csv" "$OUT/noisy.csv" "$OUT/all-noisy.csv"; do
    i=$((i + 1))
    name="$i-$(basename "$csv" .csv)"
    abs=$(cd "$(dirname "$csv")" && pwd)/$(basename "$csv")
    if run "$name" "$abs"; then
        "$PY" tests/notebook_check.py ran "$OUT/kv_cache.$name.ipynb" "$csv" || fail=1
    else
        fail=1
    fi
done

# a run with make serving's output next to it (a tiny model on a fixed
# clock, seconds): the serving section draws it
served="$PWD/$OUT/served"
mkdir -p "$served" && cp "$1" "$served/bench.csv"
TINY="--layers 2 --dim 32 --heads 4 --kv-heads 2 --hidden 48 --vocab 64 --max-len 128 --threads 1"
if SERVING_RATES=50,200 SERVING_REQUESTS=6 SERVING_POOL_MB=0.2 SERVING_WORKLOAD=instruct \
    SERVING_PREFIX_LEN=24 SERVING_PREFIX_RATES=50,200 SERVING_STEP_BATCHES= \
    SERVING_ARGS="$TINY --fixed-step-ms 2" KVLAB=${KVLAB:-build/kvlab} \
    bash bench/scripts/serving.sh "$served/serving" 2>"$OUT/served-serving.log"; then
    if run served "$served/bench.csv"; then
        "$PY" tests/notebook_check.py served "$OUT/kv_cache.served.ipynb" "$served/serving/summary.csv" || fail=1
    else
        fail=1
    fi
else
    echo "notebook-check: the tiny serving run failed (log: $OUT/served-serving.log)" >&2
    fail=1
fi

missing="$PWD/$OUT/no-such-run/bench.csv"
if run missing "$missing"; then
    "$PY" tests/notebook_check.py missing "$OUT/kv_cache.missing.ipynb" "$missing" || fail=1
else
    fail=1
fi

if [ $fail = 0 ]; then
    echo "notebook-check: $NB ran clean on $*, a schema-2 copy, a noisy one and an all-noisy one; a missing DATA path is reported"
    "$PY" -c 'import json,sys; nb=json.load(open(sys.argv[1]))
for l in "".join(nb["cells"][-1]["outputs"][0]["text"]).splitlines():
    if not l.startswith("KVLAB_ANSWERS"): print("  " + l)' "$OUT/kv_cache.1-$(basename "$1" .csv).ipynb"
fi
exit $fail
