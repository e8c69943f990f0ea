#!/usr/bin/python3
"""torch_oracle.py - the third external oracle: PyTorch's own greedy
generation of the trained model against kvlab's, token for token, for
every exact cache strategy; and PyTorch's bits per byte of a text against
`kvlab perplexity`'s.

    /usr/bin/python3 tests/torch_oracle.py KVLAB MODEL.bin

PyTorch runs bench/py/kvtorch.py, an implementation of the model written from
docs/design.md, in float64 (so its argmax is the exact one, up to the
checkpoint's float32 weights), re-running the whole sequence every step: no
cache at all. kvlab runs its float32 decoder through each strategy.

Exact strategies: every strategy `kvlab strategies --verbose` lists without
the `lossy` capability (values read back within a rounding bound, not
bit-exact); one that `evicts` is made exact by a --window that covers the
whole generation. A strategy added to the registry is therefore compared
here by its capabilities, not by its name.

A greedy path can only legitimately differ at a near tie of the two best
logits, which float32 summation order may break either way; the test
reports the smallest top-2 margin (float64) along each path, and on a
mismatch the margin at that step, and fails either way.

Prints one line per check and "N passed, N failed"; exits 1 on a failure.
"""

import math
import os
import subprocess
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "py"))
import kvtorch  # noqa: E402

# Relative difference allowed between PyTorch's float64 bits per byte and
# kvlab's float32 run: float32 logits carry ~1e-6 relative error and the
# mean over hundreds of tokens averages it (measured: 6e-8 to 2e-7 on the
# shipped model); 1e-5 leaves almost two decades, and a wrong position or a
# dropped key moves the bits per byte by 1e-3 or more.
BPB_RTOL = 1e-5

PROMPTS = [
    b"The cache",
    b"Q:\tWhat do you call",
    b"\n\nA man walked into a bar",
    # a long prompt: generation runs past the 512 positions of training
    (b"Experience is what you get when you didn't get what you wanted. " * 9)[:580],
]
NEW_TOKENS = 96

# Not from the corpus: a paragraph written for this test.
TEXT = (b"A key-value cache keeps the keys and values of every earlier token, so that each "
        b"new token costs one row of work instead of the whole sequence again. The price is "
        b"memory, which grows with the length of the text; a sliding window caps it by "
        b"forgetting the oldest tokens, and quantization shrinks every row it keeps.\n\n")

passed = failed = 0


def report(ok, msg):
    global passed, failed
    if ok:
        passed += 1
        print(f"  ok    {msg}")
    else:
        failed += 1
        print(f"  FAIL  {msg}")


def kvlab(*args):
    r = subprocess.run([KVLAB, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"kvlab {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
    return r.stdout


@torch.no_grad()
def torch_greedy(model, prompt, n_new):
    """Greedy tokens and the top-2 logit margin at each step, no cache."""
    seq, out, margins = list(prompt), [], []
    for _ in range(n_new):
        logits, _, _ = model(torch.tensor([seq]), all_logits=False)
        top = torch.topk(logits[0], 2)
        nxt = int(torch.argmax(logits[0]))
        out.append(nxt)
        margins.append(float(top.values[0] - top.values[1]))
        seq.append(nxt)
    return out, margins


def main():
    model = kvtorch.read_checkpoint(MODEL).double().eval()
    cfg = model.cfg
    caps, flags, name = {}, {}, None
    for ln in kvlab("strategies", "--verbose").splitlines():
        if ln and not ln[0].isspace():
            name = ln.split()[0]
            caps[name] = set()
            # the parameter flags it takes, listed in brackets: an option a
            # strategy does not take is refused
            flags[name] = {w.strip("[];") for w in ln.split() if w.strip("[];").startswith("--")}
        elif name and ln.strip().startswith("capabilities:"):
            caps[name] = set(ln.split(":", 1)[1].split())
    exact = [n for n, c in caps.items() if "lossy" not in c]
    if len(exact) < 5:
        raise RuntimeError(f"only {exact} are exact: is `kvlab strategies --verbose` parsed?")
    print(f"model {MODEL}: {cfg}; exact strategies compared: {', '.join(exact)}")

    for prompt in PROMPTS:
        ids = list(prompt)
        if len(ids) + NEW_TOKENS > cfg.seq_len:
            print(f"  (prompt of {len(ids)} bytes skipped: the model's length is {cfg.seq_len})")
            continue
        want, margins = torch_greedy(model, ids, NEW_TOKENS)
        text = bytes(want).decode("utf-8", "replace").replace("\n", "\\n")
        label = f"prompt of {len(ids)} bytes"
        print(f"  {label}: torch generates {text[:60]!r}... (min top-2 margin "
              f"{min(margins):.4f})")
        for s in exact:
            args = ["generate", "--model", MODEL, "--strategy", s, "--threads", "1",
                    "--prompt-tokens", ",".join(map(str, ids)), "--new-tokens", str(NEW_TOKENS)]
            if "--window" in flags[s]:
                args += ["--window", str(len(ids) + NEW_TOKENS)]
            line = next(ln for ln in kvlab(*args).splitlines() if ln.startswith("tokens:"))
            got = [int(t) for t in line.split()[1:]]
            if got == want:
                report(True, f"{s}: {label}, {NEW_TOKENS} tokens equal to PyTorch's")
            else:
                i = next(i for i in range(min(len(got), len(want))) if got[i] != want[i])
                report(False, f"{s}: {label}: token {i} is {got[i]}, PyTorch's {want[i]} "
                              f"(top-2 margin there {margins[i]:.2e})")

    # Bits per byte of TEXT, in chunks of 128 (positions restart each chunk).
    path = os.path.join(TMP, "text.txt")
    with open(path, "wb") as f:
        f.write(TEXT)
    data = torch.tensor(list(TEXT), dtype=torch.uint8)
    for context in sorted({min(128, cfg.seq_len), min(len(TEXT), cfg.seq_len)}):
        losses, _ = kvtorch.chunked_losses(model, data, context)
        want = float(losses.sum()) / math.log(2) / losses.numel()
        for s in exact:
            csv = os.path.join(TMP, "ppl.csv")
            window = ["--window", str(context)] if "--window" in flags[s] else []
            kvlab("perplexity", "--model", MODEL, "--text", path, "--strategy", s,
                  "--threads", "1", "--context", str(context), *window, "--csv", csv)
            with open(csv) as f:
                got = float(next(ln for ln in f
                                 if ln.startswith("# bits_per_byte=")).split("=")[1])
            rel = abs(got - want) / want
            report(rel <= BPB_RTOL, f"{s}: perplexity, context {context}: {got:.6f} bits per "
                                    f"byte, PyTorch {want:.6f} (relative {rel:.1e})")

    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.stderr.write("usage: torch_oracle.py KVLAB MODEL.bin\n")
        sys.exit(2)
    KVLAB, MODEL = sys.argv[1], sys.argv[2]
    import tempfile
    with tempfile.TemporaryDirectory() as TMP:
        torch.set_num_threads(1)
        sys.exit(main())
