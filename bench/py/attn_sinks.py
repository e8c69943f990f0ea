#!/usr/bin/python3
"""attn_sinks.py - does kvlab's small trained model have attention sinks?

    /usr/bin/python3 bench/py/attn_sinks.py MODEL.bin TEXT OUTDIR [--length 2048]
                                         [--segments 4] [--bucket 64]

For the first SEGMENTS pieces of LENGTH bytes of TEXT (the held-out text,
the same pieces bench/scripts/streaming.sh streams), run the model densely from
position 0 and record, for every layer, head and query position t, the
attention weight on position 0 (the first token of the piece). Averaged
over the pieces and over buckets of positions it is written as
OUTDIR/attn_sinks.dat (a matrix: one row per layer and head, one column per
bucket; plots/model/sinks.gp draws the heatmap) and OUTDIR/attn_sinks.csv.
A uniform attention would put 1 / (t + 1) on position 0; a sink head puts
a large, roughly constant share there at every position. OUTDIR/attn_sinks.md
summarises each head: mean weight on the first token, on the token itself,
on the previous token, and the mean distance attended, over the positions
of the training context (1..511) and past it.

The weights are computed in PyTorch from the same checkpoint (bench/py/kvtorch.py
is the model kvlab runs; tests/torch_oracle.py checks that they agree).
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402
import kvtorch  # noqa: E402

TRAIN_CONTEXT = 512


def main(argv):
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("text")
    p.add_argument("outdir")
    p.add_argument("--length", type=int, default=2048)
    p.add_argument("--segments", type=int, default=4)
    p.add_argument("--bucket", type=int, default=64)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    model = kvtorch.read_checkpoint(a.model).eval()
    cfg = model.cfg
    if a.length > cfg.seq_len:
        sys.exit(f"attn_sinks: --length {a.length} exceeds the model's length {cfg.seq_len}")
    with open(a.text, "rb") as f:
        data = f.read()
    if len(data) < a.length * a.segments:
        sys.exit(f"attn_sinks: {a.text} has {len(data)} bytes, fewer than "
                 f"{a.segments} x {a.length}")
    L, H, T = cfg.n_layers, cfg.n_heads, a.length
    first = torch.zeros(L, H, T, dtype=torch.float64)    # weight on key 0
    selfw = torch.zeros(L, H, T, dtype=torch.float64)    # on key t
    prevw = torch.zeros(L, H, T, dtype=torch.float64)    # on key t - 1
    dist = torch.zeros(L, H, T, dtype=torch.float64)     # sum_k w_k (t - k)
    with torch.no_grad():
        for s in range(a.segments):
            x = torch.tensor(list(data[s * T:(s + 1) * T]))[None, :]
            _, _, probs = model(x, want_probs=True, all_logits=False)
            t = torch.arange(T)
            for l in range(L):
                pr = probs[l][0].double()                    # (H, T, T)
                first[l] += pr[:, :, 0]
                selfw[l] += pr[:, t, t]
                prevw[l, :, 1:] += pr[:, t[1:], t[1:] - 1]
                dist[l] += (pr * (t[:, None] - t[None, :]).clamp(min=0)).sum(-1)
                probs[l] = None
    for m in (first, selfw, prevw, dist):
        m /= a.segments
    nb = (T + a.bucket - 1) // a.bucket
    os.makedirs(a.outdir, exist_ok=True)
    rows_dat, rows_csv = [], ["layer,head,bucket_start,bucket_end,first_weight,uniform_weight"]
    uniform = 1.0 / (torch.arange(T, dtype=torch.float64) + 1)
    for l in range(L):
        for h in range(H):
            vals = []
            for b in range(nb):
                lo, hi = b * a.bucket, min(T, (b + 1) * a.bucket)
                v = float(first[l, h, lo:hi].mean())
                vals.append(f"{v:.5f}")
                rows_csv.append(f"{l},{h},{lo},{hi - 1},{v:.6f},{float(uniform[lo:hi].mean()):.6f}")
            rows_dat.append(" ".join(vals))
    corpus.atomic_write(os.path.join(a.outdir, "attn_sinks.dat"),
                        [("\n".join(rows_dat) + "\n").encode()])
    corpus.atomic_write(os.path.join(a.outdir, "attn_sinks.csv"),
                        [("\n".join(rows_csv) + "\n").encode()])

    def span(m, lo, hi):
        return float(m[lo:hi].mean())

    inside = (1, min(TRAIN_CONTEXT, T))
    past = (min(TRAIN_CONTEXT, T), T)
    md = [f"Attention of {a.model} on {a.segments} pieces of {T} bytes of {a.text}, "
          f"mean over query positions {inside[0]}..{inside[1] - 1} (inside the training "
          f"context) and {past[0]}..{past[1] - 1} (past it). Uniform attention would put "
          f"{span(uniform, *inside):.4f} and {span(uniform, *past):.4f} on the first token.",
          "",
          "| layer.head | on first token (in / past) | on itself | on previous | mean distance |",
          "|---|---:|---:|---:|---:|"]
    sinks = []
    for l in range(L):
        for h in range(H):
            fi, fp = span(first[l, h], *inside), span(first[l, h], *past)
            ratio = fi / span(uniform, *inside)
            if fi >= 0.2:
                sinks.append(f"{l}.{h}")
            md.append(f"| {l}.{h} | {fi:.3f} / {fp:.3f} ({ratio:.1f}x uniform) | "
                      f"{span(selfw[l, h], *inside):.3f} | {span(prevw[l, h], *inside):.3f} | "
                      f"{span(dist[l, h], *inside):.1f} |")
    md += ["", f"Heads with at least 0.2 of their attention on the first token inside the "
               f"training context: {', '.join(sinks) if sinks else 'none'} "
               f"({len(sinks)} of {L * H})."]
    corpus.atomic_write(os.path.join(a.outdir, "attn_sinks.md"), [("\n".join(md) + "\n").encode()])
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
