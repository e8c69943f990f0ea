#!/usr/bin/python3
"""notebook_check.py - the assertions of make notebook-check (tests/notebook_check.sh).

    notebook_check.py clean NOTEBOOK            the committed notebook holds no outputs
    notebook_check.py ran EXECUTED CSV          an executed notebook read CSV and answered
    notebook_check.py missing EXECUTED PATH     the first cell's output says PATH does not exist
    notebook_check.py served EXECUTED SUMMARY   the serving cell drew SUMMARY (make serving's)

`ran` checks what nbconvert's exit status cannot: that the first cell read
the intended file (its row count, counted here independently) and listed
its noisy rows (counted here too: series, T and reason of each, or that
none is noisy, or that the file predates the noise columns), that every
figure was drawn (one image/png output per figure cell), that the cell after
each exercise printed an answer, and that the answers' exact identities hold
(the attention-FLOP formula on every row; the int4 memory formula on every
int4 row). Standard library only; one line per failure, exit 1.
"""
import csv
import json
import os
import sys

FIGURES = 7          # latency, log-log, attention FLOPs, memory, quantization, cumulative, roofline
EXERCISES = 8
NOISY_LISTED = 20    # noisy rows the first cell lists one by one (the rest in one line)


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def text_of(cell):
    out = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            out.append("".join(o.get("text", "")))
        elif "data" in o and "text/plain" in o["data"]:
            out.append("".join(o["data"]["text/plain"]))
    return "".join(out)


def source(cell):
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else s


def data_rows(csv_path):
    n, header = 0, False
    with open(csv_path, encoding="utf-8") as f:
        for line in f:
            if line.lstrip().startswith("#") or not line.strip():
                continue
            if not header:
                header = True
            else:
                n += 1
    return n


def noisy_rows(csv_path):
    """(T, reason) of each row with noisy = 1; None when the file has no noisy
    column (schema 1 and 2)."""
    header, out = None, []
    with open(csv_path, encoding="utf-8") as f:
        for line in f:
            if line.lstrip().startswith("#") or not line.strip():
                continue
            # noise_reason never holds a comma (the writer replaces them)
            cells = line.rstrip("\n").split(",")
            if header is None:
                header = {c: i for i, c in enumerate(cells)}
                if "noisy" not in header:
                    return None
            elif cells[header["noisy"]].strip() == "1":
                out.append((cells[header["seq_len"]], cells[header["noise_reason"]]))
    return out


def check_clean(nb_path):
    nb = load(nb_path)
    bad = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"
           and (c.get("outputs") or c.get("execution_count") is not None)]
    if bad:
        return [f"{nb_path}: cells {bad} carry outputs or execution counts; commit it "
                "cleared (jupyter nbconvert --clear-output --inplace)"]
    return []


def check_ran(nb_path, csv_path):
    nb = load(nb_path)
    problems = []
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    for i, c in enumerate(code):
        for o in c.get("outputs", []):
            if o.get("output_type") == "error":
                problems.append(f"code cell {i}: {o.get('ename')}: {o.get('evalue')}")
    first = text_of(code[0])
    rows = data_rows(csv_path)
    if (f"read {rows} rows" not in first or f"from {os.path.abspath(csv_path)} " not in first
            or "does not exist" in first):
        problems.append(f"the first cell did not read {csv_path} ({rows} rows): {first[:200]!r}")
    noisy = noisy_rows(csv_path)
    if noisy is None:
        if "noisy rows: not recorded" not in first:
            problems.append(f"the first cell did not say that {csv_path} predates the noise columns")
    elif not noisy:
        if "noisy rows: none" not in first:
            problems.append(f"the first cell did not say that no row of {csv_path} is noisy")
    elif f"noisy rows: {len(noisy)} of {rows} " not in first:
        problems.append(f"the first cell did not count {len(noisy)} noisy rows of {rows}")
    else:
        # up to LISTED rows one by one; past that, the rest counted in one line
        lines = first.splitlines()
        listed = [ln for ln in lines if " T = " in ln]
        if len(listed) != min(len(noisy), NOISY_LISTED):
            problems.append(f"the first cell listed {len(listed)} noisy rows, expected "
                            f"{min(len(noisy), NOISY_LISTED)}")
        more = len(noisy) - NOISY_LISTED
        if more > 0 and not any(ln.strip().startswith(f"... and {more} more: ") for ln in lines):
            problems.append(f"the first cell did not count the {more} noisy rows it did not list")
        for ln in listed:
            if not any(f"T = {t} " in ln and ln.endswith(reason) for t, reason in noisy):
                problems.append(f"the first cell listed a row that is not noisy: {ln.strip()!r}")
    pngs = sum(1 for c in code for o in c.get("outputs", [])
               if "data" in o and "image/png" in o["data"])
    if pngs < FIGURES:
        problems.append(f"{pngs} figures drawn, expected at least {FIGURES}")
    cells = nb["cells"]
    exercises = 0
    for i, c in enumerate(cells):
        if c["cell_type"] == "markdown" and source(c).lstrip().startswith("**Exercise"):
            exercises += 1
            nxt = cells[i + 1] if i + 1 < len(cells) else None
            if not nxt or nxt["cell_type"] != "code" or not text_of(nxt).strip():
                problems.append(f"exercise {exercises}: the next cell printed no answer")
    if exercises != EXERCISES:
        problems.append(f"{exercises} exercises, expected {EXERCISES}")
    answers = None
    for line in text_of(code[-1]).splitlines():
        if line.startswith("KVLAB_ANSWERS "):
            answers = json.loads(line[len("KVLAB_ANSWERS "):])
    if answers is None:
        problems.append("the last cell printed no KVLAB_ANSWERS line")
    else:
        for n in range(1, EXERCISES + 1):
            if not any(k.startswith(f"{n} ") for k in answers):
                problems.append(f"no answer recorded for exercise {n}")
        for k in ("3 exact", "5 exact"):
            if answers.get(k) is not True:
                problems.append(f"'{k}' is {answers.get(k)!r}: the formula does not match the data")
    return problems


def check_missing(nb_path, missing_path):
    code = [c for c in load(nb_path)["cells"] if c["cell_type"] == "code"]
    first = text_of(code[0])
    if "does not exist" not in first or missing_path not in first:
        return [f"the first cell's output does not say that {missing_path} does not exist: "
                f"{first[:200]!r}"]
    return []


def check_served(nb_path, summary):
    """The serving section drew the summary next to DATA: a figure, and the
    sustained rate of every policy in it (read here from the CSV itself),
    and the shared-prompt stream's when its summary is there."""
    code = [c for c in load(nb_path)["cells"] if c["cell_type"] == "code"]
    cell = [c for c in code if 'path.parent / "serving"' in source(c)]
    if len(cell) != 1:
        return [f"{len(cell)} serving cells, expected 1"]
    out, problems = text_of(cell[0]), []
    if not any("data" in o and "image/png" in o["data"] for o in cell[0].get("outputs", [])):
        problems.append("the serving cell drew no figure")
    with open(summary, encoding="utf-8") as f:
        policies = {r["policy"] for r in csv.DictReader(l for l in f if not l.startswith("#"))}
    if not policies:
        problems.append(f"{summary} holds no policy")
    for pol in sorted(policies):
        if f"  {pol} " not in out:
            problems.append(f"the serving cell lists no sustained rate for {pol}")
    prefix = os.path.join(os.path.dirname(summary), "prefix", "summary.csv")
    if os.path.isfile(prefix) and "behind a shared system prompt" not in out:
        problems.append("the serving cell says nothing of the shared-prompt stream")
    return problems


def main(argv):
    if len(argv) == 3 and argv[1] == "clean":
        problems = check_clean(argv[2])
    elif len(argv) == 4 and argv[1] == "ran":
        problems = check_ran(argv[2], argv[3])
    elif len(argv) == 4 and argv[1] == "missing":
        problems = check_missing(argv[2], argv[3])
    elif len(argv) == 4 and argv[1] == "served":
        problems = check_served(argv[2], argv[3])
    else:
        print(__doc__.strip().splitlines()[2:6], file=sys.stderr)
        return 2
    for p in problems:
        print(f"notebook_check: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
