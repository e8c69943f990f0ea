#!/usr/bin/python3
"""corpus.py - the text kvlab's small model is trained and measured on:
Debian's fortunes (apt-get install fortunes), split into a training and a
held-out part by whole fortunes. No PyTorch needed, so the benchmarks can
make the held-out text on a machine without it:

    /usr/bin/python3 bench/py/corpus.py --heldout-out out/heldout.txt [--seed 1234]

The design decision that matters: the split is a pure function of the
installed files and the seed (the same seed bench/py/train_model.py trains
with), so the held-out text the benchmarks score is exactly the text the
model never saw. The model card records the sha256 of the files.
"""

import argparse
import hashlib
import os
import random
import re
import sys
import tempfile

FORTUNES_DIR = "/usr/share/games/fortunes"
# ASCII drawings, not language: left out of the corpus.
FORTUNES_EXCLUDE = ("ascii-art",)
DEFAULT_SEED = 1234
DEFAULT_HELDOUT_FRAC = 0.05


def fortune_files(root=FORTUNES_DIR):
    """Sorted regular text files of the fortunes packages (no .dat indexes,
    no .u8 links, no ascii-art)."""
    if not os.path.isdir(root):
        raise FileNotFoundError(f"{root} not found: apt-get install fortunes")
    names = []
    for n in sorted(os.listdir(root)):
        p = os.path.join(root, n)
        if n.endswith(".dat") or os.path.islink(p) or not os.path.isfile(p):
            continue
        if n in FORTUNES_EXCLUDE:
            continue
        names.append(p)
    return names


_OVERSTRIKE = re.compile(rb"[^\n]\x08")


def split_fortunes(raw):
    """One fortune file -> list of fortunes (bytes). Fortunes are separated
    by lines holding only '%'; the overstrike sequences some files use for
    bold or underline (char, backspace) are removed, trailing spaces cut,
    blank lines at either end dropped."""
    raw = _OVERSTRIKE.sub(b"", raw.replace(b"\r\n", b"\n"))
    out = []
    for chunk in re.split(rb"(?m)^%[ \t]*\n", raw + b"\n"):
        lines = [ln.rstrip() for ln in chunk.split(b"\n")]
        while lines and not lines[0]:
            lines.pop(0)
        while lines and not lines[-1]:
            lines.pop()
        if lines:
            out.append(b"\n".join(lines))
    return out


def load_corpus(seed=DEFAULT_SEED, heldout_frac=DEFAULT_HELDOUT_FRAC, root=FORTUNES_DIR):
    """(train, heldout, info). Every fortune once (exact duplicates across
    files dropped), shuffled with `seed`, the last heldout_frac of them held
    out. Each split is its fortunes joined by a blank line: fortune, "\\n\\n",
    fortune, ... (the '%' separators become paragraph breaks)."""
    seen, fortunes = set(), []
    files = fortune_files(root)
    digest = hashlib.sha256()
    for p in files:
        with open(p, "rb") as f:
            raw = f.read()
        digest.update(os.path.basename(p).encode() + b"\0" + raw)
        for ft in split_fortunes(raw):
            if ft not in seen:
                seen.add(ft)
                fortunes.append(ft)
    rng = random.Random(seed)
    rng.shuffle(fortunes)
    n_held = max(1, int(round(len(fortunes) * heldout_frac)))
    train, held = fortunes[:-n_held], fortunes[-n_held:]
    info = {
        "files": len(files),
        "fortunes": len(fortunes),
        "train_fortunes": len(train),
        "heldout_fortunes": len(held),
        "sha256": digest.hexdigest(),
    }
    return b"\n\n".join(train) + b"\n\n", b"\n\n".join(held) + b"\n\n", info


def atomic_write(path, chunks):
    """Write the byte chunks to a temporary file next to path, fsync, rename
    it over path: an interrupted write leaves the old file untouched."""
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".tmp.", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            for c in chunks:
                f.write(c)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    dfd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)



def main(argv):
    p = argparse.ArgumentParser(description="write the fortunes corpus splits")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED)
    p.add_argument("--heldout-frac", type=float, default=DEFAULT_HELDOUT_FRAC)
    p.add_argument("--heldout-out", metavar="FILE", help="write the held-out text")
    p.add_argument("--train-out", metavar="FILE", help="write the training text")
    a = p.parse_args(argv)
    try:
        train, held, info = load_corpus(a.seed, a.heldout_frac)
    except FileNotFoundError as e:
        sys.stderr.write(f"corpus: {e}\n")
        return 2
    for path, text, what in ((a.heldout_out, held, "held-out"), (a.train_out, train, "training")):
        if path:
            atomic_write(path, [text])
            print(f"wrote {path}: {len(text)} {what} bytes (seed {a.seed}, "
                  f"{info['heldout_fortunes' if what == 'held-out' else 'train_fortunes']} "
                  "fortunes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
