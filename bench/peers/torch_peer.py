#!/usr/bin/python3
"""torch_peer.py - kvlab's PyTorch peer: the usual Hugging Face-style eager
decode loop in PyTorch (Debian's python3-torch; run with /usr/bin/python3),
over the weights of a kvlab checkpoint (the llama2.c layout of docs/design.md).

Written for kvlab, not taken from transformers: a Llama decoder (RMSNorm
eps 1e-5, RoPE theta 10000 on pairs (i, i+1) of each head, grouped-query
attention, SwiGLU MLP, untied or tied classifier) with a past_key_values
object per layer and the three cache variants a user meets:

  cat       DynamicCache: every step appends the new K/V with torch.cat
            (a new tensor of T rows each step);
  prealloc  StaticCache: one (kv_heads, max_len, head_dim) buffer per layer,
            the new rows written in place; attention reads the filled slice
            [:T] (Hugging Face's StaticCache reads all max_len rows under a
            mask; the slice is the faster choice, so the comparison is the
            one most favourable to PyTorch);
  none      no cache: every step runs the whole sequence again.

Attention is eager (matmul, softmax in f32, matmul; repeat_interleave of
K/V for GQA), as transformers' eager attention; PyTorch 1.13 has no SDPA.

Commands:
  tokens  --model M.bin --prompt-tokens ID,... --steps N [--cache V] [--mlp on|off]
          greedy tokens, printed as `tokens: ID ID ...` (kvlab generate's format)
  bench   --model M.bin --seq-lens T,... [--caches cat,prealloc,none]
          [--none-max T] [--reps R] [--mlp on|off] [--version-only]
          decode-step timings as out/peers.csv rows (no header): for each T
          the cache is filled (untimed) so that the middle timed step
          attends over T tokens, 2 warm-up steps, R timed steps (21; 5 for
          `none`, whose every step runs T tokens), min and median in us.
Common: --threads N (torch.set_num_threads; default 2), --shape S (the
out/peers.csv shape string).
Exit: 0, 2 on bad input (unreadable or malformed checkpoint, bad option),
1 on a run-time failure.
"""
import argparse
import os
import statistics
import struct
import sys
import time

try:
    import numpy as np
    import torch
except ImportError as e:  # one line, exit 2 (the caller names the package)
    print(f"torch_peer: {e.name or e} is missing; run: apt-get install -y python3-torch",
          file=sys.stderr)
    sys.exit(2)

WARMUP = 2
REPS = 21
NONE_REPS = 5
# the untimed prefill runs in chunks of this many tokens through the cache,
# so eager attention never holds a (heads, T, T) score matrix (2 GB at 8192)
PREFILL_CHUNK = 512


# ---------------------------------------------------------------- checkpoint
class Weights:
    """The llama2.c legacy checkpoint, as torch tensors (out, in) row-major."""

    def __init__(self, path):
        with open(path, "rb") as f:
            head = f.read(28)
            if len(head) != 28:
                raise ValueError(f"{path}: not a llama2.c checkpoint (short header)")
            dim, hidden, layers, heads, kv_heads, vocab, seq_len = struct.unpack("<7i", head)
            data = np.fromfile(f, dtype="<f4")
        if min(dim, hidden, layers, heads, kv_heads, seq_len) <= 0 or vocab == 0 or \
                dim % heads or heads % kv_heads:
            raise ValueError(f"{path}: bad header {dim, hidden, layers, heads, kv_heads, vocab}")
        self.shared = vocab > 0
        vocab = abs(vocab)
        hs = dim // heads
        self.dim, self.hidden, self.layers = dim, hidden, layers
        self.heads, self.kv_heads, self.vocab, self.hs = heads, kv_heads, vocab, hs
        self.seq_len = seq_len
        t = torch.from_numpy(data.astype(np.float32))
        off = [0]

        def take(*shape):
            n = 1
            for s in shape:
                n *= s
            if off[0] + n > t.numel():
                raise ValueError(f"{path}: checkpoint shorter than its header says")
            x = t[off[0]:off[0] + n].view(*shape)
            off[0] += n
            return x

        kvd = kv_heads * hs
        self.emb = take(vocab, dim)
        self.rms_att = take(layers, dim)
        self.wq = take(layers, heads * hs, dim)
        self.wk = take(layers, kvd, dim)
        self.wv = take(layers, kvd, dim)
        self.wo = take(layers, dim, heads * hs)
        self.rms_ffn = take(layers, dim)
        self.w1 = take(layers, hidden, dim)
        self.w2 = take(layers, dim, hidden)
        self.w3 = take(layers, hidden, dim)
        self.rms_final = take(dim)
        take(seq_len, hs // 2)  # the old RoPE tables, unused
        take(seq_len, hs // 2)
        self.wcls = self.emb if self.shared else take(vocab, dim)


# ---------------------------------------------------------------- model
def rmsnorm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w


class Rope:
    """cos/sin of pos * 10000^(-2j/hs) for pair j of a head, for all positions."""

    def __init__(self, hs, max_pos):
        j = torch.arange(0, hs, 2, dtype=torch.float64)
        freq = 10000.0 ** (-j / hs)
        ang = torch.arange(max_pos, dtype=torch.float64)[:, None] * freq[None, :]
        self.cos = ang.cos().float()  # (max_pos, hs/2)
        self.sin = ang.sin().float()

    def apply(self, x, pos0):
        """x (heads, n, hs): rotates pairs (2j, 2j+1) by their position's angle."""
        n = x.shape[1]
        c = self.cos[pos0:pos0 + n][None]
        s = self.sin[pos0:pos0 + n][None]
        x0, x1 = x[..., 0::2], x[..., 1::2]
        out = torch.empty_like(x)
        out[..., 0::2] = x0 * c - x1 * s
        out[..., 1::2] = x0 * s + x1 * c
        return out


class DynamicCache:
    """transformers' DynamicCache: torch.cat along the sequence, per layer."""

    def __init__(self, layers, kv_heads, hs, max_len):
        self.k = [None] * layers
        self.v = [None] * layers

    def update(self, layer, k, v, pos0):
        if self.k[layer] is None:
            self.k[layer], self.v[layer] = k, v
        else:
            self.k[layer] = torch.cat([self.k[layer], k], dim=1)
            self.v[layer] = torch.cat([self.v[layer], v], dim=1)
        return self.k[layer], self.v[layer]


class StaticCache:
    """transformers' StaticCache: preallocated, written in place (read [:T])."""

    def __init__(self, layers, kv_heads, hs, max_len):
        self.k = [torch.zeros(kv_heads, max_len, hs) for _ in range(layers)]
        self.v = [torch.zeros(kv_heads, max_len, hs) for _ in range(layers)]

    def update(self, layer, k, v, pos0):
        n = k.shape[1]
        self.k[layer][:, pos0:pos0 + n].copy_(k)
        self.v[layer][:, pos0:pos0 + n].copy_(v)
        return self.k[layer][:, :pos0 + n], self.v[layer][:, :pos0 + n]


class Model:
    def __init__(self, w, mlp, max_pos):
        self.w, self.mlp = w, mlp
        self.rope = Rope(w.hs, max_pos)

    def forward(self, tokens, pos0, cache):
        """tokens (n,) at positions pos0.. -> logits of the last (vocab,)."""
        w = self.w
        n = tokens.shape[0]
        h = w.emb[tokens]  # (n, dim)
        rep = w.heads // w.kv_heads
        mask = None
        if n > 1:  # causal among the new tokens (past keys all visible)
            T = pos0 + n
            mask = torch.full((n, T), float("-inf")).triu(pos0 + 1)
        for l in range(w.layers):
            x = rmsnorm(h, w.rms_att[l])
            q = (x @ w.wq[l].t()).view(n, w.heads, w.hs).transpose(0, 1)
            k = (x @ w.wk[l].t()).view(n, w.kv_heads, w.hs).transpose(0, 1)
            v = (x @ w.wv[l].t()).view(n, w.kv_heads, w.hs).transpose(0, 1)
            q = self.rope.apply(q, pos0)
            k = self.rope.apply(k, pos0)
            if cache is not None:
                k, v = cache.update(l, k, v, pos0)
            if rep > 1:
                k = k.repeat_interleave(rep, dim=0)
                v = v.repeat_interleave(rep, dim=0)
            s = torch.matmul(q, k.transpose(1, 2)) / (w.hs ** 0.5)  # (heads, n, T)
            if mask is not None:
                s = s + mask
            p = torch.softmax(s.float(), dim=-1)
            o = torch.matmul(p, v).transpose(0, 1).reshape(n, w.heads * w.hs)
            h = h + o @ w.wo[l].t()
            if self.mlp:
                x = rmsnorm(h, w.rms_ffn[l])
                g = torch.nn.functional.silu(x @ w.w1[l].t()) * (x @ w.w3[l].t())
                h = h + g @ w.w2[l].t()
        return rmsnorm(h[-1], w.rms_final) @ w.wcls.t()


CACHES = {"cat": DynamicCache, "prealloc": StaticCache, "none": None}


def new_cache(kind, w, max_len):
    c = CACHES[kind]
    return None if c is None else c(w.layers, w.kv_heads, w.hs, max_len)


# ---------------------------------------------------------------- commands
def greedy(model, w, prompt, steps, kind):
    """The HF-style loop: prefill the prompt, then one token a step."""
    max_len = len(prompt) + steps
    cache = new_cache(kind, w, max_len)
    seq = list(prompt)
    logits = model.forward(torch.tensor(seq), 0, cache)
    out = []
    for s in range(steps):
        nxt = int(torch.argmax(logits))
        out.append(nxt)
        seq.append(nxt)
        if s + 1 == steps:
            break
        if cache is None:
            logits = model.forward(torch.tensor(seq), 0, None)
        else:
            logits = model.forward(torch.tensor([nxt]), len(seq) - 1, cache)
    return out


def bench_one(model, w, kind, T, reps):
    """min, median us of the decode step whose middle timed one attends over T."""
    gen = torch.Generator().manual_seed(T)
    if kind == "none":
        toks = torch.randint(0, w.vocab, (T,), generator=gen)
        times = []
        for j in range(WARMUP + reps):
            t0 = time.perf_counter_ns()
            model.forward(toks, 0, None)
            if j >= WARMUP:
                times.append((time.perf_counter_ns() - t0) / 1e3)
        return min(times), statistics.median(times)
    P = T - 1 - WARMUP - (reps - 1) // 2
    cache = new_cache(kind, w, P + WARMUP + reps + 1)
    toks = torch.randint(0, w.vocab, (P + WARMUP + reps,), generator=gen)
    for c0 in range(0, P, PREFILL_CHUNK):  # prefill, untimed
        model.forward(toks[c0:min(P, c0 + PREFILL_CHUNK)], c0, cache)
    times = []
    for j in range(WARMUP + reps):
        pos = P + j
        t0 = time.perf_counter_ns()
        model.forward(toks[pos:pos + 1], pos, cache)
        if j >= WARMUP:
            times.append((time.perf_counter_ns() - t0) / 1e3)
    return min(times), statistics.median(times)


def int_list(s):
    try:
        v = [int(x) for x in s.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expects comma-separated integers, got '{s}'")
    if not v or min(v) < 0:
        raise argparse.ArgumentTypeError(f"expects non-negative integers, got '{s}'")
    return v


def main():
    ap = argparse.ArgumentParser(prog="torch_peer.py")
    ap.add_argument("command", choices=["tokens", "bench"])
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--mlp", choices=["on", "off"], default="on")
    ap.add_argument("--prompt-tokens", type=int_list)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--cache", choices=sorted(CACHES), default="cat")
    ap.add_argument("--seq-lens", type=int_list, default=[128, 512, 1024, 2048, 4096, 8192])
    ap.add_argument("--caches", default="cat,prealloc,none")
    ap.add_argument("--none-max", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=REPS)
    ap.add_argument("--shape", default="")
    a = ap.parse_args()
    if a.threads < 1 or a.steps < 1 or a.reps < 1:
        ap.error("--threads, --steps and --reps must be >= 1")
    kinds = a.caches.split(",")
    if any(k not in CACHES for k in kinds):
        ap.error(f"--caches expects a list of {', '.join(sorted(CACHES))}")
    torch.set_num_threads(a.threads)
    try:
        w = Weights(a.model)
    except (OSError, ValueError) as e:
        print(f"torch_peer: {e}", file=sys.stderr)
        return 2
    torch.set_grad_enabled(False)
    if a.command == "tokens":
        if not a.prompt_tokens or max(a.prompt_tokens) >= w.vocab:
            print("torch_peer: --prompt-tokens expects ids below the vocabulary size",
                  file=sys.stderr)
            return 2
        model = Model(w, a.mlp == "on", len(a.prompt_tokens) + a.steps + 1)
        with torch.inference_mode():
            out = greedy(model, w, a.prompt_tokens, a.steps, a.cache)
        print("tokens: " + " ".join(str(t) for t in out))
        return 0
    reps_max = max(a.reps, NONE_REPS)
    model = Model(w, a.mlp == "on", max(a.seq_lens) + WARMUP + reps_max + 1)
    shape = a.shape or (f"layers={w.layers};dim={w.dim};heads={w.heads};kv_heads={w.kv_heads};"
                        f"hidden={w.hidden};vocab={w.vocab};mlp={a.mlp}")
    with torch.inference_mode():
        for T in a.seq_lens:
            for kind in kinds:
                if kind == "none" and T > a.none_max:
                    continue
                reps = NONE_REPS if kind == "none" else a.reps
                if kind != "none" and T < WARMUP + 2 + (reps - 1) // 2:
                    continue
                mn, med = bench_one(model, w, kind, T, reps)
                print(f"pytorch,{torch.__version__},step,{shape},{T},f32,{kind},step,"
                      f"{a.threads},{reps},{mn:.2f},{med:.2f}", flush=True)
                print(f"# pytorch {kind} T {T}: min {mn:.1f} us, median {med:.1f} us",
                      file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (RuntimeError, MemoryError) as e:
        print(f"torch_peer: {e}", file=sys.stderr)
        sys.exit(1)
