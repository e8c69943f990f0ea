#!/usr/bin/python3
"""report.py - one self-contained HTML page of a kvlab run (make report).

    /usr/bin/python3 bench/py/report.py --csv out/bench.csv --out out/report.html \
        [--steps out/steps.md] [--kernel-md out/kernel.md] [--plots out/plots] \
        [--serving-md out/serving/summary.md] [--peers out/peers.csv] \
        [--baseline BASE.csv --kvlab build/kvlab]

The page holds the run's metadata (the CSV's `# key=value` lines), the
target tables of `make bench` (out/steps.md, out/kernel.md, met / not met;
make serving's table, out/serving/summary.md),
a table of the sweep's key figures, every SVG under the plots folder inlined,
the peers' measurements when out/peers.csv exists and, with --baseline, the
verdicts of `kvlab compare BASE.csv NEW.csv`. Rows that schema 3 flags as
measured under interference (noisy = 1) are counted under "The run", listed
there with their reasons, and their times marked in the key figures.

The one design decision: the page is a single file that needs nothing else.
No script, no external font, image, style sheet or link that loads; the SVGs
are inlined as <svg> elements (their ids prefixed per figure, so the
definitions of two gnuplot files cannot collide), and it reads the same with
JavaScript off. Everything the page says is read from the files it is given;
a file that is absent is named as absent, never filled in.

Bad input exits 2 with one line naming the file and the line: no sweep CSV,
a schema version other than 1, 2 or 3, a missing required column, a row with
the wrong number of fields or a non-number, a file that ends without its
final newline (truncated). The page is written to a temporary file in the
same folder and renamed, so a failed run leaves the previous report or
nothing. A run-time failure (a write error, an SVG carrying a script) exits 1.
Only the Python standard library is used (/usr/bin/python3, no pip).

Files, kvlab's rules. Every input (--csv, --steps, --kernel-md, --serving-md, --peers,
--baseline, each SVG under --plots) is opened with O_NONBLOCK and must be a
regular file: a FIFO, a device, a socket or a directory is refused at once,
never waited on, with one line `report.py: --csv 'PATH': is a FIFO, not a
regular file` and exit 2 (--plots must be a directory). An optional input
that does not exist is named as absent. The --out target is judged before
anything is read: a directory, FIFO or device (also through a link), a
dangling link, a read-only file, a name too long, a folder that does not
exist or cannot take a new file, or the same file as an input (by resolved
path and by device and inode) is refused with exit 2. The page is written to
a temporary file next to the target (through a link; a replaced file keeps
its mode) and renamed over it; SIGINT and SIGTERM remove the temporary file.
Paths go to `kvlab compare` as arguments of its own process (absolute, so
none reads as an option or as standard input), never through a shell.
"""
import argparse
import csv
import datetime
import html
import os
import re
import signal
import stat
import subprocess
import sys
import tempfile

# ------------------------------------------------------------------ schema

# v2 adds dtype and params; v3 the noise columns (step_ns_ci_lo/hi, noisy,
# noise_reason); v1 columns keep their order
SCHEMAS = ("1", "2", "3")
V1_COLUMNS = (
    "strategy layers dim heads kv_heads head_dim hidden batch window bits group "
    "residual threads seq_len reps step_ns_median step_ns_p95 attn_ns_median "
    "flops_step attn_flops_step bytes_step cache_bytes copy_bytes_step "
    "peak_rss_bytes max_abs_err rel_err token_match"
).split()
TEXT_COLUMNS = {"strategy", "label", "dtype", "params", "noise_reason"}

# Figures in the order of docs/performance.md's plot table; others follow by name.
FIGURES = [
    ("latency", "Median decode step time vs T, linear axes: without a cache (none) "
                "the step climbs steeply; the cached strategies stay near the floor."),
    ("latency_loglog", "The same on log-log axes with slope-1 and slope-2 guides, "
                       "plus none's attention time alone (slope 2)."),
    ("attn_flops", "Attention FLOPs per step vs T: slope 2 without a cache, slope 1 "
                   "with one, flat for a sliding window past its window."),
    ("cache_memory", "Resident cache bytes vs T: static flat at its capacity, sliding "
                     "flat at its window, dynamic linear, the quantized widths below it."),
    ("cumulative_time", "Time to generate N tokens: the step times integrated over T."),
    ("quantization", "Memory saved vs logits error, per bit width."),
    ("roofline", "Achieved GB/s and GFLOP/s per row against the read bandwidth and "
                 "sgemm rate measured in the same run."),
    ("breakdown", "Step time split into attention and the rest of the step."),
    ("kernel", "The attention kernel alone: achieved GB/s per shape and dtype against "
               "the read bandwidth."),
    ("serving", "make serving: median normalized latency against the request rate, a line "
                "per policy, and what each policy's used pool held at its highest rate."),
    ("serving_timeline", "make serving at its middle rate: the batch and the pool held over "
                         "time, a line per policy."),
    ("serving_prefix", "make serving's second stream, every request behind one system "
                       "prompt: latency against rate, with and without sharing the prompt."),
]


class BadInput(Exception):
    """A file the report cannot use; the message names the file and line."""


def where(path, line=None):
    return f"{path} line {line}" if line else f"{path}"


# ------------------------------------------------------------------ files

class Refused(BadInput):
    """A path the file rules refuse; the message is the whole line."""


def q(path):
    """A path quoted for a message, control characters escaped."""
    out = []
    for c in str(path):
        if c == "'" or c == "\\":
            out.append("\\" + c)
        elif c.isprintable():
            out.append(c)
        else:
            out.append(f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")
    return "'" + "".join(out) + "'"


def kind(mode):
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a plain file"


def refuse(opt, path, why):
    raise Refused(f"report.py: --{opt} {q(path)}: {why}")


def check_input(opt, path):
    """True when PATH is a regular file, False when it does not exist (also a
    dangling link); anything else is refused. Nothing is opened."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    except OSError as e:
        refuse(opt, path, f"cannot be read: {e.strerror}")
    if not stat.S_ISREG(st.st_mode):
        refuse(opt, path, f"is {kind(st.st_mode)}, not a regular file")
    return True


def read_input(opt, path):
    """The bytes of the regular file PATH, opened without blocking (a FIFO
    put there after check_input is refused, not waited on)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            refuse(opt, path, f"is {kind(st.st_mode)}, not a regular file")
        chunks = []
        while True:
            try:
                b = os.read(fd, 1 << 20)
            except BlockingIOError:
                refuse(opt, path, "would block on reading")
            if not b:
                break
            chunks.append(b)
        return b"".join(chunks)
    finally:
        os.close(fd)


def same_file(a, b):
    try:
        return os.path.samestat(os.stat(a), os.stat(b))
    except OSError:
        return False


def judge_output(path, inputs):
    """Refuse --out PATH before any work (see the module's Files paragraph).
    INPUTS: (option, path) of every input given."""
    if len(os.fsencode(os.path.basename(path))) > 255:
        refuse("out", path, "the name is too long")
    try:
        lst = os.lstat(path)
    except FileNotFoundError:
        lst = None
    except OSError as e:
        refuse("out", path, f"cannot be judged: {e.strerror}")
    st = lst
    if lst is not None and stat.S_ISLNK(lst.st_mode):
        try:
            st = os.stat(path)
        except FileNotFoundError:
            refuse("out", path, "is a dangling symbolic link")
        except OSError as e:
            refuse("out", path, f"cannot be judged: {e.strerror}")
    target = os.path.realpath(path)
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            refuse("out", path, "is a directory")
        if not stat.S_ISREG(st.st_mode):
            refuse("out", path, f"is {kind(st.st_mode)}, not a regular file")
        if not st.st_mode & 0o222 or not os.access(target, os.W_OK):
            refuse("out", path, "is read-only")
    folder = os.path.dirname(target)
    if not os.path.isdir(folder):
        refuse("out", path, f"its folder {q(folder)} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        refuse("out", path, f"its folder {q(folder)} cannot take a new file")
    for opt, p in inputs:
        if os.path.realpath(p) == target or (st is not None and same_file(p, target)):
            refuse("out", path, f"is the same file as --{opt} {q(p)}")
    return target


def svg_files(plots_dir):
    """The SVG files of --plots (sorted); none when it is not given or absent."""
    if not plots_dir:
        return []
    try:
        st = os.stat(plots_dir)
    except FileNotFoundError:
        return []
    except OSError as e:
        refuse("plots", plots_dir, f"cannot be read: {e.strerror}")
    if not stat.S_ISDIR(st.st_mode):
        refuse("plots", plots_dir, f"is {kind(st.st_mode)}, not a directory")
    return sorted(f for f in os.listdir(plots_dir) if f.endswith(".svg"))


def judge_inputs(args):
    """Every input, before anything is read: (option, path) of those present."""
    present = []
    if args.csv:
        if check_input("csv", args.csv):
            present.append(("csv", args.csv))
    for opt, p in (("steps", args.steps), ("kernel-md", args.kernel_md),
                   ("serving-md", args.serving_md), ("peers", args.peers),
                   ("baseline", args.baseline)):
        if p and check_input(opt, p):
            present.append((opt, p))
    if not args.check:
        for f in svg_files(args.plots):
            path = os.path.join(args.plots, f)
            check_input("plots", path)
            present.append(("plots", path))
    return present


# ------------------------------------------------------------------ sweep CSV


def number(s):
    """float(s) for a CSV cell, None when it is not a number (nan/inf allowed)."""
    try:
        return float(s)
    except ValueError:
        return None


def read_sweep(path):
    """Parse and validate a sweep CSV: (meta dict, meta lines, header, rows).

    Rows are dicts by column name; numeric columns hold floats."""
    try:
        raw = read_input("csv", path)
    except FileNotFoundError:
        raise BadInput(f"{path} not found (run 'make bench' first)")
    except OSError as e:
        raise BadInput(f"{path}: cannot read: {e.strerror}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise BadInput(f"{where(path, line)}: not UTF-8 text (not a kvlab sweep CSV?)")
    if not text:
        raise BadInput(f"{path}: empty file (truncated?)")
    lines = text.split("\n")
    if lines[-1] != "":
        raise BadInput(f"{where(path, len(lines))}: the file ends inside this line, "
                       "without its newline (truncated?)")
    lines.pop()

    meta, meta_lines, header, header_line, rows = {}, [], None, 0, []
    schema_line = 0
    for no, line in enumerate(lines, 1):
        if line.lstrip().startswith("#"):
            body = line.lstrip()[1:].strip()
            meta_lines.append(body)
            key, eq, value = body.partition("=")
            if eq and key.strip():
                meta.setdefault(key.strip(), value.strip())
                if key.strip() == "schema" and not schema_line:
                    schema_line = no
            continue
        if not line.strip():
            continue
        fields = next(csv.reader([line]))
        if header is None:
            if "schema" not in meta:
                raise BadInput(f"{where(path, no)}: no '# schema=' line before the header "
                               "(not a kvlab sweep CSV?)")
            if meta["schema"] not in SCHEMAS:
                raise BadInput(f"{where(path, schema_line)}: schema version "
                               f"'{meta['schema'][:16]}'; this report reads schema "
                               f"{', '.join(SCHEMAS[:-1])} and {SCHEMAS[-1]}")
            header, header_line = [h.strip() for h in fields], no
            missing = [c for c in V1_COLUMNS if c not in header]
            if missing:
                raise BadInput(f"{where(path, no)}: header lacks the required column "
                               f"'{missing[0]}'")
            continue
        if len(fields) != len(header):
            raise BadInput(f"{where(path, no)}: {len(fields)} fields where the header "
                           f"(line {header_line}) has {len(header)} (truncated?)")
        row = {}
        for name, cell in zip(header, fields):
            if name in TEXT_COLUMNS:
                row[name] = cell
                continue
            v = number(cell)
            if v is None and (name in V1_COLUMNS or cell.strip() != ""):
                if name in V1_COLUMNS:
                    raise BadInput(f"{where(path, no)}: column '{name}' holds "
                                   f"'{cell[:24]}', not a number")
                row[name] = cell  # an extra text column of a later schema
            else:
                row[name] = v
        t = row["seq_len"]
        if not (t == t and 0 < t < float("inf") and t == int(t)):
            raise BadInput(f"{where(path, no)}: seq_len '{t:g}' is not a positive whole number")
        rows.append(row)
    if header is None:
        raise BadInput(f"{where(path, len(lines))}: the file ends before its header "
                       "line (truncated?)")
    if not rows:
        raise BadInput(f"{where(path, header_line)}: no data rows after the header "
                       "(truncated?)")
    return meta, meta_lines, header, rows


def series_name(row, multi):
    """The row's series: the sweep's label, else the strategy, told apart by
    the columns that differ within it (dtype, params, bits)."""
    if row.get("label"):
        return row["label"]
    name = row["strategy"]
    if name in multi:
        extra = [str(row[c]) for c in ("dtype", "params") if row.get(c)]
        if not extra:
            extra = [f"{int(row['bits'])}-bit"]
        name += " " + " ".join(extra)
    return name


def series_of(rows):
    configs = {}
    for r in rows:
        key = (r.get("dtype"), r.get("params"), r["bits"])
        configs.setdefault(r["strategy"], set()).add(key)
    multi = {s for s, k in configs.items() if len(k) > 1}
    out = {}
    for r in rows:
        out.setdefault(series_name(r, multi), []).append(r)
    return out


def is_noisy(row):
    """Schema 3's verdict; files before it (no noisy column) count as clean."""
    return row.get("noisy") == 1


def reason_of(row):
    r = str(row.get("noise_reason") or "").strip()
    return r if r and r != "-" else "no reason recorded"


# ------------------------------------------------------------------ HTML pieces

E = html.escape


def fmt_num(v, digits=3):
    if v is None:
        return "–"
    if v != v:
        return "nan"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.{digits}g}"


def md_inline(s):
    """Escape, then the two inline forms kernel_table.sh uses: **bold**, `code`."""
    s = E(s)
    s = re.sub(r"`([^`]+)`", r"<code>\1</code>", s)
    s = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", s)
    return s


def verdict_class(cell):
    c = re.sub(r"[*\s]", "", cell).lower()
    if c == "met":
        return "met"
    if c in ("notmet",):
        return "notmet"
    if c in ("notmeasured", "-", "–"):
        return "nm"
    return ""


def markdown_tables(text):
    """Render the markdown that bench/scripts/kernel_table.sh writes (paragraphs and
    pipe tables); returns (html, met, not_met)."""
    out, para, table = [], [], []
    met = notmet = 0

    def split_row(line):
        s = line.strip()
        if s.startswith("|"):
            s = s[1:]
        if s.endswith("|"):
            s = s[:-1]
        return [c.strip() for c in s.split("|")]

    def flush_para():
        if para:
            out.append("<p>" + md_inline(" ".join(para)) + "</p>")
            para.clear()

    def flush_table():
        nonlocal met, notmet
        if not table:
            return
        head = split_row(table[0])
        aligns = []
        body = table[1:]
        if body and re.fullmatch(r"\|?[\s:|-]+\|?", body[0].strip()):
            aligns = ["num" if c.endswith(":") else "" for c in split_row(body[0])]
            body = body[1:]
        h = ['<div class="tw"><table>', "<thead><tr>"]
        for i, c in enumerate(head):
            cls = aligns[i] if i < len(aligns) else ""
            h.append(f'<th class="{cls}">{md_inline(c)}</th>' if cls else f"<th>{md_inline(c)}</th>")
        h.append("</tr></thead><tbody>")
        for line in body:
            cells = split_row(line)
            h.append("<tr>")
            for i, c in enumerate(cells):
                cls = [aligns[i]] if i < len(aligns) and aligns[i] else []
                v = verdict_class(c)
                if v:
                    cls.append(v)
                    if i == len(cells) - 1:
                        met += v == "met"
                        notmet += v == "notmet"
                attr = f' class="{" ".join(cls)}"' if cls else ""
                h.append(f"<td{attr}>{md_inline(c)}</td>")
            h.append("</tr>")
        h.append("</tbody></table></div>")
        out.append("".join(h))
        table.clear()

    for line in text.splitlines():
        if line.lstrip().startswith("|"):
            flush_para()
            table.append(line)
            continue
        flush_table()
        if not line.strip():
            flush_para()
        else:
            para.append(line.strip())
    flush_para()
    flush_table()
    return "\n".join(out), met, notmet


def csv_table(header, rows, numeric=None, noisy=None):
    """NOISY: {(row index, column): reason} of the cells measured under
    interference, marked with NOISY_MARK and the reason as their title."""
    numeric = numeric or set()
    noisy = noisy or {}
    h = ['<div class="tw"><table><thead><tr>']
    h += [f'<th class="num">{E(c)}</th>' if c in numeric else f"<th>{E(c)}</th>" for c in header]
    h.append("</tr></thead><tbody>")
    for i, r in enumerate(rows):
        h.append("<tr>")
        for c, v in zip(header, r):
            if (i, c) in noisy:
                cls = ["num", "noisy"] if c in numeric else ["noisy"]
                h.append(f'<td class="{" ".join(cls)}" title="noisy: {E(noisy[i, c])}">'
                         f'{E(v)}{NOISY_MARK}</td>')
                continue
            cls = [] if c not in numeric else ["num"]
            vc = verdict_class(v) if c == "verdict" else ""
            if c == "verdict" and v in ("slower", "worse"):
                vc = "notmet"
            elif c == "verdict" and v in ("faster", "better"):
                vc = "met"
            if vc:
                cls.append(vc)
            attr = f' class="{" ".join(cls)}"' if cls else ""
            h.append(f"<td{attr}>{E(v)}</td>")
        h.append("</tr>")
    h.append("</tbody></table></div>")
    return "".join(h)


# ------------------------------------------------------------------ SVG inlining

SVG_FORBIDDEN = re.compile(r"<\s*(script|foreignObject|iframe)\b|\son[a-z]+\s*=|"
                           r"(href|src)\s*=\s*['\"]\s*(https?:|//|javascript:)|@import|url\(\s*['\"]?https?:",
                           re.I)


# gnuplot's enhanced text writes {/Symbol x} as the raw byte of Adobe's Symbol
# encoding in a tspan of font-family "Symbol" (e.g. 0xB5 for "proportional
# to"), which is not UTF-8 and which browsers without that font show as
# letters; the common ones, as Unicode.
SYMBOL_FONT = dict(zip(
    "abcdefghijklmnopqrstuvwxyzDFGLPQSW",
    "αβχδεφγηιϕκλμνοπθρστυϖωξψζΔΦΓΛΠΘΣΩ"))
SYMBOL_FONT.update({chr(k): v for k, v in {
    0xA3: "≤", 0xA5: "∞", 0xAE: "→", 0xB0: "°", 0xB1: "±", 0xB3: "≥", 0xB4: "×",
    0xB5: "∝", 0xB6: "∂", 0xB7: "•", 0xB8: "÷", 0xB9: "≠", 0xBA: "≡", 0xBB: "≈",
    0xD6: "√", 0xE5: "Σ"}.items()})


def svg_text(path):
    """The SVG's text as Unicode, Symbol-font runs translated, any other byte
    that is not UTF-8 read as Latin-1 (gnuplot's default encoding)."""
    raw = read_input("plots", path)
    s = raw.decode("utf-8", errors="surrogateescape")

    def from_bytes(t):
        return "".join(chr(ord(c) - 0xDC00) if 0xDC80 <= ord(c) <= 0xDCFF else c for c in t)

    s = re.sub(r"(<tspan\b[^>]*?)\s+font-family=(['\"])Symbol\2([^>]*>)([^<]*)(</tspan>)",
               lambda m: m.group(1) + m.group(3) + "".join(SYMBOL_FONT.get(c, c) for c in
                                                        from_bytes(m.group(4))) + m.group(5), s)
    return from_bytes(s)


def inline_svg(path, prefix, title):
    s = svg_text(path)
    bad = SVG_FORBIDDEN.search(s)
    if bad:
        raise RuntimeError(f"{path}: carries '{bad.group(0).strip()[:30]}' (a script or an "
                           "external reference); the report inlines only static SVG")
    start = s.find("<svg")
    if start < 0:
        raise RuntimeError(f"{path}: no <svg> element")
    s = s[start:]
    # ids are document-wide once inlined: give each figure its own
    s = re.sub(r"(\sid\s*=\s*)(['\"])", rf"\1\2{prefix}", s)
    s = re.sub(r"(href\s*=\s*)(['\"])#", rf"\1\2#{prefix}", s)
    s = re.sub(r"url\(\s*#", f"url(#{prefix}", s)
    # gnuplot gives a plot's key entry and its curve the same id: a reference
    # resolves to the first, so the later ones are renamed apart
    seen = {}

    def unique(m):
        n = seen[m.group(3)] = seen.get(m.group(3), 0) + 1
        return m.group(0) if n == 1 else f"{m.group(1)}{m.group(2)}{m.group(3)}-{n}{m.group(2)}"

    s = re.sub(r"(\sid\s*=\s*)(['\"])([^'\"]*)\2", unique, s)
    # the page sizes the figure (CSS), the viewBox keeps its proportions
    head_end = s.find(">")
    head = s[:head_end]
    head = re.sub(r"\s(width|height)\s*=\s*(['\"])[^'\"]*\2", "", head)
    if "viewBox" not in head:
        raise RuntimeError(f"{path}: the <svg> element has no viewBox")
    head += f' role="img" aria-label="{E(title)}"'
    s = head + s[head_end:]
    s = re.sub(r"<title>.*?</title>", f"<title>{E(title)}</title>", s, count=1, flags=re.S)
    return s


# ------------------------------------------------------------------ sections

STYLE = """
:root { --fg:#111; --bg:#fff; --muted:#444; --line:#bbb; --zebra:#f2f4f7;
        --met:#0a6b2b; --metbg:#e3f4e8; --not:#a3000f; --notbg:#fde5e7; --accent:#0b4f9c;
        --warn:#7a4100; --warnbg:#fff0c2; }
* { box-sizing: border-box; }
html { font-size: 18px; }
body { margin: 0; color: var(--fg); background: var(--bg); line-height: 1.45;
       font-family: system-ui, -apple-system, "Segoe UI", "DejaVu Sans", "Liberation Sans", Arial, sans-serif; }
main { max-width: 76rem; margin: 0 auto; padding: 1rem 1.25rem 3rem; }
h1 { font-size: 2rem; margin: .5rem 0 .25rem; }
h2 { font-size: 1.5rem; margin: 2.2rem 0 .6rem; border-bottom: 3px solid var(--accent); padding-bottom: .2rem; }
h3 { font-size: 1.15rem; margin: 1.4rem 0 .4rem; }
p.sub { color: var(--muted); margin: 0 0 1rem; font-size: 1.05rem; }
nav ol { display: flex; flex-wrap: wrap; gap: .2rem 1.6rem; list-style: none; margin: .5rem 0 0; padding: 0; }
a { color: var(--accent); }
code, pre { font-family: "DejaVu Sans Mono", "Liberation Mono", Menlo, Consolas, monospace; font-size: .9em; }
pre { background: var(--zebra); padding: .6rem .8rem; overflow-x: auto; border: 1px solid var(--line); }
.tw { overflow-x: auto; margin: .4rem 0 1rem; }
table { border-collapse: collapse; font-size: .9rem; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid var(--line); padding: .25rem .5rem; text-align: left; vertical-align: top; }
th { background: #dde3ea; }
tbody tr:nth-child(even) td { background: var(--zebra); }
td.num, th.num { text-align: right; white-space: nowrap; }
td.met { color: var(--met); background: var(--metbg) !important; font-weight: 600; white-space: nowrap; }
td.notmet { color: var(--not); background: var(--notbg) !important; font-weight: 700; white-space: nowrap; }
td.nm { color: var(--muted); }
.metagroups { display: grid; grid-template-columns: repeat(auto-fit, minmax(21rem, 1fr)); gap: 0 1.5rem; }
.metagroups h3 { margin-top: .6rem; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: .15rem 1rem; margin: .4rem 0 1rem; }
dl.meta dt { font-weight: 600; }
dl.meta dd { margin: 0; overflow-wrap: anywhere; }
.banner { border: 3px solid var(--not); background: var(--notbg); color: var(--not);
          padding: .6rem .9rem; font-weight: 700; margin: 1rem 0; }
.note { color: var(--muted); }
.warn { border: 3px solid var(--warn); background: var(--warnbg); padding: .3rem .9rem; margin: 1rem 0; }
.warn ul { margin: .3rem 0 .5rem; padding-left: 1.4rem; }
td.noisy { color: var(--warn); background: var(--warnbg) !important; font-weight: 700; }
.score { font-size: 1.2rem; font-weight: 700; }
figure { margin: 1.2rem 0 2rem; }
figure svg { display: block; width: 100%; max-width: 1280px; height: auto; border: 1px solid var(--line); }
figcaption { margin-top: .35rem; font-size: 1rem; }
figcaption b { font-family: "DejaVu Sans Mono", monospace; font-weight: 600; }
details summary { cursor: pointer; color: var(--accent); }
footer { margin-top: 3rem; color: var(--muted); font-size: .85rem; }
@media (max-width: 700px) { html { font-size: 16px; } }
@media print { a { color: inherit; } figure { break-inside: avoid; } }
"""

META_GROUPS = [
    ("Machine", ["cpu", "host", "os", "l3_bytes"]),
    ("Build", ["commit", "compiler", "cflags", "blas_core", "blas_config"]),
    ("Run", ["date", "threads", "seed", "warmup", "reps_mode", "max_retries", "partial",
             "wall_s", "command", "schema"]),
    ("Limits measured in the same run", ["read_gbps", "copy_gbps", "sgemm_gflops", "roofline"]),
]
NOISY_MARK = "†"
META_UNITS = {"read_gbps": " GB/s", "copy_gbps": " GB/s", "sgemm_gflops": " GFLOP/s",
              "wall_s": " s"}


def noisy_paragraphs(meta, header, rows, series):
    """The noisy rows, counted from the rows themselves (a partial or edited
    file's `# noisy_rows` may say otherwise); nothing for schema 1 and 2."""
    if "noisy" not in header:
        return []
    noisy = [(name, r) for name, rs in series.items() for r in rs if is_noisy(r)]
    said = meta.get("noisy_rows")
    differs = (f" (its metadata line says <code>noisy_rows={E(said)}</code>)"
               if said is not None and said != str(len(noisy)) else "")
    if not noisy:
        return [f'<p class="note">No row is noisy: none of the {len(rows)} rows was measured under '
                f"interference{differs}.</p>"]
    items = "".join(f"<li><b>{E(name)}</b>, T = {int(r['seq_len'])}: {E(reason_of(r))}</li>"
                    for name, r in noisy)
    return [f'<div class="warn" id="noisy"><p><strong>{len(noisy)} of {len(rows)} rows '
            f"{'is' if len(noisy) == 1 else 'are'} noisy</strong>{differs}: measured under interference, so their times are not the "
            f"code's alone; exclude them or measure again. Their times are marked {NOISY_MARK} in "
            f'the <a href="#figures-data">key figures</a>.</p><ul>{items}</ul></div>']


def meta_section(meta, meta_lines, csv_path, noisy=()):
    h = ['<section id="run"><h2>The run</h2>',
         f'<p>From the metadata lines of <code>{E(csv_path)}</code>.</p>{"".join(noisy)}'
         '<div class="metagroups">']
    for title, keys in META_GROUPS:
        items = []
        for k in keys:
            if k not in meta:
                continue
            v = meta[k]
            if k == "l3_bytes" and number(v):
                v = f"{v} ({number(v) / 2**20:.0f} MiB)"
            items.append(f"<dt>{E(k)}</dt><dd>{E(v + META_UNITS.get(k, ''))}</dd>")
        if items:
            h.append(f"<div><h3>{E(title)}</h3><dl class=\"meta\">{''.join(items)}</dl></div>")
    h.append("</div><details><summary>every metadata line</summary><pre>"
             + E("\n".join("# " + m for m in meta_lines)) + "</pre></details></section>")
    return "\n".join(h)


def targets_section(files, csv_mtime=None):
    h = ['<section id="targets"><h2>Targets</h2>']
    total_met = total_not = 0
    parts = []
    for title, path, opt in files:
        if not path or not check_input(opt, path):
            parts.append(f"<h3>{E(title)}</h3><p class=\"note\">Not measured in this run: "
                         f"<code>{E(path or '(none given)')}</code> not found "
                         "(<code>make bench</code> writes it).</p>")
            continue
        try:
            text = read_input(opt, path).decode("utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise BadInput(f"{path}: cannot read: {e}")
        body, met, notmet = markdown_tables(text)
        total_met += met
        total_not += notmet
        when = datetime.datetime.fromtimestamp(os.path.getmtime(path), datetime.timezone.utc)
        older = ""
        if csv_mtime is not None and os.path.getmtime(path) < csv_mtime:
            older = (' <strong>This file is older than the sweep CSV: it may come from '
                     "another run.</strong>")
        parts.append(f"<h3>{E(title)}</h3><p class=\"note\">From <code>{E(path)}</code>, "
                     f"written {when:%Y-%m-%d %H:%M} UTC: {met} met, {notmet} not met.{older}</p>{body}")
    if total_met + total_not:
        h.append(f'<p class="score">{total_met} of {total_met + total_not} targets met.</p>')
    h += parts
    h.append("</section>")
    return "\n".join(h), total_met, total_not


def pivot(series, column, scale, digits, mark_noisy=False):
    ts = sorted({int(r["seq_len"]) for rows in series.values() for r in rows})
    head = ["series"] + [f"T = {t}" for t in ts]
    body, marks = [], {}
    for i, (name, rows) in enumerate(series.items()):
        by_t = {int(r["seq_len"]): r[column] for r in rows}
        body.append([name] + [fmt_num(by_t[t] * scale, digits) if t in by_t and by_t[t] is not None
                              else "–" for t in ts])
        if mark_noisy:
            marks.update({(i, f"T = {int(r['seq_len'])}"): reason_of(r) for r in rows if is_noisy(r)})
    table = csv_table(head, body, numeric=set(head[1:]), noisy=marks)
    if marks:
        table += (f'<p class="note">{NOISY_MARK} noisy: measured under interference, the time '
                  "is not the code's alone (the reason in the cell's tooltip; every noisy row is "
                  'listed under <a href="#run">The run</a>).</p>')
    return table


def figures_section(series, plots_dir):
    h = ['<section id="figures-data"><h2>Key figures</h2>',
         # interference disturbs times; cache bytes and logits errors are exact
         "<h3>Median decode step (ms)</h3>", pivot(series, "step_ns_median", 1e-6, 3, True),
         "<h3>Resident cache (MiB)</h3>", pivot(series, "cache_bytes", 2**-20, 3),
         "<h3>Relative logits error against the exact cache</h3>", pivot(series, "rel_err", 1, 2),
         "</section>"]
    svgs = svg_files(plots_dir)
    known = [n for n, _ in FIGURES]
    order = [f"{n}.svg" for n in known if f"{n}.svg" in svgs] + \
            [f for f in svgs if f[:-4] not in known]
    caption = dict(FIGURES)
    figs = ['<section id="figures"><h2>Figures</h2>']
    if not order:
        figs.append(f'<p class="note">No SVG found in <code>{E(plots_dir or "(none)")}</code> '
                    "(<code>make plots</code> draws them).</p>")
    for i, f in enumerate(order):
        name = f[:-4]
        path = os.path.join(plots_dir, f)
        svg = inline_svg(path, f"f{i}-", name)
        figs.append(f'<figure id="fig-{E(name)}" class="plot">{svg}<figcaption><b>{E(name)}</b> — '
                    f'{E(caption.get(name, "from " + path))}</figcaption></figure>')
    figs.append("</section>")
    return "\n".join(h), "\n".join(figs), [f[:-4] for f in order]


def read_plain_csv(path):
    """Comment lines and rows of a CSV of any columns (the peers' file)."""
    try:
        text = read_input("peers", path).decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(f"{path}: cannot read: {e}")
    if text and not text.endswith("\n"):
        raise BadInput(f"{where(path, text.count(chr(10)) + 1)}: the file ends inside this "
                       "line, without its newline (truncated?)")
    comments, header, rows = [], None, []
    for no, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("#"):
            comments.append(line.lstrip()[1:].strip())
            continue
        if not line.strip():
            continue
        fields = next(csv.reader([line]))
        if header is None:
            header = fields
        elif len(fields) != len(header):
            raise BadInput(f"{where(path, no)}: {len(fields)} fields where the header has "
                           f"{len(header)} (truncated?)")
        else:
            rows.append(fields)
    return comments, header or [], rows


def peers_section(path):
    h = ['<section id="peers"><h2>Peers</h2>']
    if not path or not check_input("peers", path):
        h.append(f'<p class="note">Not measured: <code>{E(path or "(none given)")}</code> not '
                 "found, so no peer (llama.cpp/ggml, PyTorch) was measured for this run.</p>")
    else:
        comments, header, rows = read_plain_csv(path)
        numeric = {c for i, c in enumerate(header)
                   if rows and all(number(r[i]) is not None for r in rows)}
        h.append(f"<p>{len(rows)} rows from <code>{E(path)}</code>.</p>")
        if comments:
            h.append("<details><summary>its metadata lines</summary><pre>"
                     + E("\n".join("# " + c for c in comments)) + "</pre></details>")
        h.append(csv_table(header, rows, numeric))
    h.append("</section>")
    return "\n".join(h)


def compare_section(baseline, csv_path, kvlab):
    if not check_input("baseline", baseline):
        raise BadInput(f"{baseline}: baseline not found (BASELINE= names a sweep CSV "
                       "of an earlier run)")
    # absolute paths: neither can read as an option or as standard input ("-")
    cmd = [kvlab, "compare", os.path.abspath(baseline), os.path.abspath(csv_path), "--format", "csv"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    except OSError as e:
        raise RuntimeError(f"cannot run {kvlab}: {e.strerror}")
    if p.returncode not in (0, 1, 3):  # 3: noisy rows, not judged (re-run)
        msg = (p.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise BadInput(f"kvlab compare {baseline} {csv_path} could not compare: {msg}")
    lines = p.stdout.splitlines()
    summary = dict(ln[1:].strip().partition("=")[::2] for ln in lines if ln.startswith("#"))
    reader = list(csv.reader(ln for ln in lines if ln.strip() and not ln.startswith("#")))
    if not reader:
        raise BadInput(f"kvlab compare {baseline} {csv_path} printed no rows")
    header, rows = reader[0], [r for r in reader[1:] if len(r) == len(reader[0])]
    ix = {c: i for i, c in enumerate(header)}
    key_cols = header[: ix["metric"]] if "metric" in ix else header
    # a row's configuration: the key columns (bar T) whose value varies
    varying = [c for c in key_cols if c not in ("strategy", "seq_len")
               and len({r[ix[c]] for r in rows}) > 1]
    show = ["configuration", "T"] + [c for c in ("metric", "base", "new", "ratio", "noise",
                                                 "verdict") if c in ix]
    body = []
    counts = {}
    for r in rows:
        conf = r[ix["strategy"]] + "".join(f" {c}={r[ix[c]]}" for c in varying)
        body.append([conf, r[ix["seq_len"]]] + [r[ix[c]] for c in show[2:]])
        v = r[ix["verdict"]] if "verdict" in ix else "?"
        counts[v] = counts.get(v, 0) + 1
    verdict = ("no regression" if p.returncode == 0 else
               "noisy, re-run: rows measured under interference were not judged"
               if p.returncode == 3 else
               "REGRESSION: at least one row is slower beyond its noise band")
    h = ['<section id="compare"><h2>Against the baseline</h2>',
         f"<p><code>kvlab compare {E(baseline)} {E(csv_path)}</code> (step_ns_median, "
         "per row; threshold 5% or the rows' own p95-median spread): "
         f"<strong>{E(verdict)}</strong>; "
         + ", ".join(f"{n} {E(v)}" for v, n in sorted(counts.items())) + ".</p>"]
    if summary:
        h.append("<p class=\"note\">Its summary: "
                 + ", ".join(f"{E(k.strip())} {E(v.strip())}" for k, v in summary.items()) + ".</p>")
    notes = [ln for ln in p.stderr.splitlines() if ln.strip()]
    if notes:
        h.append("<pre>" + E("\n".join(notes)) + "</pre>")
    h.append(csv_table(show, body, numeric={"T", "base", "new", "ratio", "noise"}))
    h.append("</section>")
    return "\n".join(h), p.returncode


# ------------------------------------------------------------------ page


def build_page(args):
    meta, meta_lines, header, rows = read_sweep(args.csv)
    series = series_of(rows)
    targets, met, notmet = targets_section([("Whole decode step and PyTorch", args.steps, "steps"),
                                            ("The attention kernel alone", args.kernel_md, "kernel-md"),
                                            ("Serving: policies and request rates", args.serving_md,
                                             "serving-md")],
                                           os.path.getmtime(args.csv))
    keyfigs, figures, fig_names = figures_section(series, args.plots)
    peers = peers_section(args.peers)
    compare = ""
    if args.baseline:
        compare, _ = compare_section(args.baseline, args.csv, args.kvlab)

    title = f"kvlab run {meta.get('commit', '?')} · {meta.get('date', '?')}"
    sub = (f"{meta.get('cpu', 'unknown CPU')}, {meta.get('threads', '?')} threads, "
           f"commit {meta.get('commit', '?')}, {meta.get('date', '?')}; "
           f"{len(rows)} rows, {len(series)} series, schema {meta.get('schema')}")
    nav = [("run", "The run"), ("targets", "Targets"), ("figures-data", "Key figures"),
           ("figures", f"Figures ({len(fig_names)})"), ("peers", "Peers")]
    if compare:
        nav.append(("compare", "Against the baseline"))
    banner = ""
    if meta.get("partial") == "1":
        banner = ('<p class="banner">PARTIAL RUN: the sweep was interrupted; this file holds '
                  "only the rows that finished.</p>")
    limits = ", ".join(f"{label} {meta[k]}{META_UNITS[k]}" for k, label in
                       (("read_gbps", "read"), ("copy_gbps", "copy"), ("sgemm_gflops", "sgemm"))
                       if k in meta)
    score = (f'<p class="score">{met} of {met + notmet} targets met'
             if met + notmet else '<p class="score">No target table in this run')
    score += f"; limits measured in the same run: {E(limits)}.</p>" if limits else ".</p>"
    generated = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    inputs = [p for p in (args.csv, args.steps, args.kernel_md, args.serving_md, args.peers,
                          args.baseline)
              if p and os.path.isfile(p)]
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{E(title)}</title>
<style>{STYLE}</style>
</head>
<body>
<main>
<header>
<h1>kvlab benchmark report</h1>
<p class="sub">{E(sub)}</p>
{banner}
{score}
<nav aria-label="sections"><ol>{"".join(f'<li><a href="#{a}">{E(t)}</a></li>' for a, t in nav)}</ol></nav>
</header>
{meta_section(meta, meta_lines, args.csv, noisy_paragraphs(meta, header, rows, series))}
{targets}
{keyfigs}
{figures}
{peers}
{compare}
<footer>Written {E(generated)} by <code>bench/py/report.py</code> from {", ".join(f"<code>{E(p)}</code>" for p in inputs)}
and the SVGs in <code>{E(args.plots or "")}</code>. One self-contained file: no script, font or
network access.</footer>
</main>
</body>
</html>
"""


def write_atomic(path, text):
    """TEXT into PATH (judged by judge_output): a temporary file next to its
    target (a link is written through), the target's mode kept, renamed."""
    target = os.path.realpath(path)
    d = os.path.dirname(target)
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(prefix=".report-", suffix=".tmp", dir=d)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def main():
    ap = argparse.ArgumentParser(description="one self-contained HTML page of a kvlab run")
    ap.add_argument("--csv", required=True, help="the sweep CSV (out/bench.csv)")
    ap.add_argument("--out", help="the page to write (out/report.html)")
    ap.add_argument("--steps", help="markdown of the step targets (out/steps.md)")
    ap.add_argument("--kernel-md", help="markdown of the kernel targets (out/kernel.md)")
    ap.add_argument("--plots", help="folder of the SVG figures (out/plots)")
    ap.add_argument("--serving-md", help="make serving's table (out/serving/summary.md)")
    ap.add_argument("--peers", help="peers' measurements (out/peers.csv)")
    ap.add_argument("--baseline", help="a sweep CSV to compare with (kvlab compare)")
    ap.add_argument("--kvlab", default="build/kvlab", help="the kvlab binary for --baseline")
    ap.add_argument("--check", action="store_true",
                    help="only validate the sweep CSV (exit 2 when unusable)")
    args = ap.parse_args()
    if not args.check and not args.out:
        ap.error("--out is required (or --check)")
    # SIGTERM, like SIGINT, unwinds: write_atomic removes its temporary file
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        inputs = judge_inputs(args)
        if not args.check:
            judge_output(args.out, inputs)
        if args.check:
            read_sweep(args.csv)
            return 0
        page = build_page(args)
        write_atomic(args.out, page)
    except Refused as e:
        print(str(e), file=sys.stderr)
        return 2
    except BadInput as e:
        print(f"report: {e}", file=sys.stderr)
        return 2
    except (RuntimeError, OSError) as e:
        print(f"report: {e}", file=sys.stderr)
        return 1
    print(f"report: {args.out} ({len(page) // 1024} KiB) from {args.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
