"""kvtorch.py - kvlab's decoder in PyTorch and the llama2.c checkpoint
format, for the training script (bench/py/train_model.py),
the PyTorch oracle test (tests/torch_oracle.py) and the sink and stale-cache
experiments (bench/py/attn_sinks.py, bench/stale_cache.py).

The one design decision that matters: this module is a second, independent
implementation of exactly the model kvlab runs (docs/design.md, "The
model the workload runs"), written from the definition and not from
bench/model/model.c, so that PyTorch agreeing with kvlab token for token is a real
check of both. Every convention is the one the C side documents:
- RMSNorm: x / sqrt(mean(x^2) + 1e-5) * w;
- RoPE, theta 10000, on adjacent pairs (2i, 2i+1) of each head, rotated by
  pos * 10000^(-2i / head_size) (llama2.c's convention, not the
  half-split one of Hugging Face Llama);
- grouped-query attention: query head h reads KV head h // (n_heads /
  n_kv_heads);
- SwiGLU MLP w2(silu(w1 x) * w3 x); no biases anywhere;
- the classifier is tied to the token embedding (positive vocab_size in the
  checkpoint header).

Run with /usr/bin/python3 (Debian's python3-torch and python3-numpy).
"""

import math
import struct

import torch
import torch.nn.functional as F
from torch import nn

from corpus import atomic_write  # noqa: F401  (bench/py/corpus.py)

RMS_EPS = 1e-5
ROPE_THETA = 10000.0

# ---------------------------------------------------------------------------
# The model


class Config:
    """The seven header fields of a llama2.c checkpoint."""

    FIELDS = ("dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len")

    def __init__(self, dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len):
        self.dim, self.hidden_dim, self.n_layers = dim, hidden_dim, n_layers
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.vocab_size, self.seq_len = vocab_size, seq_len
        if dim % n_heads or (dim // n_heads) % 2 or n_heads % n_kv_heads:
            raise ValueError("heads must divide dim into even head sizes and kv_heads divide heads")

    @property
    def head_size(self):
        return self.dim // self.n_heads

    def as_tuple(self):
        return tuple(getattr(self, f) for f in self.FIELDS)

    def __repr__(self):
        return "Config(" + ", ".join(f"{f}={getattr(self, f)}" for f in self.FIELDS) + ")"


class RMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + RMS_EPS) * self.weight


def rope_tables(seq_len, head_size, dtype=torch.float32):
    """cos, sin of (seq_len, head_size/2): angle pos * theta^(-2i/head_size).
    Computed in float64 like kvlab (kernels/kv_ops.c), then rounded."""
    i = torch.arange(0, head_size, 2, dtype=torch.float64)
    inv_freq = ROPE_THETA ** (-i / head_size)
    ang = torch.arange(seq_len, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return torch.cos(ang).to(dtype), torch.sin(ang).to(dtype)


def apply_rope(x, cos, sin):
    """x (B, T, heads, hs): rotate pairs (2i, 2i+1) by the angles of its row,
    as one complex multiplication (x0 + i x1) (cos + i sin). cos, sin:
    (T, hs/2)."""
    xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
    rot = torch.complex(cos, sin)[None, :, None, :]
    return torch.view_as_real(xc * rot).flatten(-2)


_MASKS = {}


def causal_mask(T, S, dtype):
    """(T, S) additive mask: 0 where key position <= query position (query
    i at S - T + i), -inf elsewhere. Cached per shape."""
    key = (T, S, dtype)
    m = _MASKS.get(key)
    if m is None:
        qpos = torch.arange(S - T, S)[:, None]
        kpos = torch.arange(S)[None, :]
        m = torch.zeros(T, S, dtype=dtype).masked_fill(kpos > qpos, float("-inf"))
        if len(_MASKS) > 16:
            _MASKS.clear()
        _MASKS[key] = m
    return m


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        hs, d = cfg.head_size, cfg.dim
        self.cfg = cfg
        self.attention_norm = RMSNorm(d)
        self.wq = nn.Linear(d, cfg.n_heads * hs, bias=False)
        self.wk = nn.Linear(d, cfg.n_kv_heads * hs, bias=False)
        self.wv = nn.Linear(d, cfg.n_kv_heads * hs, bias=False)
        self.wo = nn.Linear(cfg.n_heads * hs, d, bias=False)
        self.ffn_norm = RMSNorm(d)
        self.w1 = nn.Linear(d, cfg.hidden_dim, bias=False)
        self.w2 = nn.Linear(cfg.hidden_dim, d, bias=False)
        self.w3 = nn.Linear(d, cfg.hidden_dim, bias=False)

    def forward(self, x, cos, sin, past=None, want_probs=False):
        """x (B, T, dim) at positions given by cos/sin rows (T rows).
        past: optional (k, v) of earlier positions, (B, P, kvh, hs), computed
        by whatever weights produced them (the stale-cache experiment feeds
        old ones). Returns (x, (k_all, v_all), probs or None)."""
        B, T, _ = x.shape
        c = self.cfg
        xb = self.attention_norm(x)
        q = apply_rope(self.wq(xb).view(B, T, c.n_heads, c.head_size), cos, sin)
        k = apply_rope(self.wk(xb).view(B, T, c.n_kv_heads, c.head_size), cos, sin)
        v = self.wv(xb).view(B, T, c.n_kv_heads, c.head_size)
        if past is not None:
            k = torch.cat((past[0], k), dim=1)
            v = torch.cat((past[1], v), dim=1)
        S = k.shape[1]
        kvh, rep, hs = c.n_kv_heads, c.n_heads // c.n_kv_heads, c.head_size
        # GQA without copying K/V per query head: the rep query heads of one
        # KV head (heads kv*rep .. kv*rep+rep-1) become rep*T rows of one
        # matrix product against that KV head's keys.
        qg = q.view(B, T, kvh, rep, hs).permute(0, 2, 3, 1, 4).reshape(B * kvh, rep * T, hs)
        kg = k.permute(0, 2, 3, 1).reshape(B * kvh, hs, S)
        vg = v.permute(0, 2, 1, 3).reshape(B * kvh, S, hs)
        # scores + causal mask in one pass: query i sits at absolute
        # position S - T + i and sees keys 0..that
        mask = causal_mask(T, S, x.dtype).repeat(rep, 1)          # (rep*T, S)
        att = torch.baddbmm(mask, qg, kg, alpha=1.0 / math.sqrt(hs))
        probs = F.softmax(att, dim=-1)                              # (B*kvh, rep*T, S)
        o = (probs @ vg).view(B, kvh, rep, T, hs).permute(0, 3, 1, 2, 4)
        o = o.reshape(B, T, c.n_heads * hs)
        if want_probs:
            probs = probs.view(B, kvh, rep, T, S).reshape(B, c.n_heads, T, S)
        x = x + self.wo(o)
        h = self.ffn_norm(x)
        x = x + self.w2(F.silu(self.w1(h)) * self.w3(h))
        return x, (k, v), probs if want_probs else None


class Model(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.dim)
        # float64 tables, rounded to the weights' type where used (what
        # kvlab does: cos/sin in double, then float)
        cos, sin = rope_tables(cfg.seq_len, cfg.head_size, torch.float64)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def init_weights(self, gen):
        """GPT-2-style init: N(0, 0.02), residual projections scaled by
        1/sqrt(2 n_layers); norms at 1."""
        for name, p in self.named_parameters():
            if name.endswith("norm.weight"):
                nn.init.ones_(p)
            else:
                std = 0.02
                if name.endswith("wo.weight") or name.endswith("w2.weight"):
                    std /= math.sqrt(2 * self.cfg.n_layers)
                with torch.no_grad():
                    p.copy_(torch.randn(p.shape, generator=gen) * std)

    def forward(self, tokens, pos0=0, past=None, want_probs=False, all_logits=True):
        """tokens (B, T) at positions pos0..pos0+T-1. past: per-layer (k, v)
        or None. Returns (logits (B, T, vocab) or (B, vocab) for the last
        token, new per-layer (k, v), per-layer probs or None)."""
        T = tokens.shape[1]
        cos = self.rope_cos[pos0:pos0 + T].to(self.tok_embeddings.weight.dtype)
        sin = self.rope_sin[pos0:pos0 + T].to(self.tok_embeddings.weight.dtype)
        x = self.tok_embeddings(tokens)
        kvs, probs = [], []
        for i, layer in enumerate(self.layers):
            x, kv, p = layer(x, cos, sin, past[i] if past is not None else None, want_probs)
            kvs.append(kv)
            probs.append(p)
        x = self.norm(x if all_logits else x[:, -1:, :])
        logits = x @ self.tok_embeddings.weight.t()   # tied classifier
        if not all_logits:
            logits = logits[:, 0, :]
        return logits, kvs, probs if want_probs else None

    def n_params(self):
        return sum(p.numel() for p in self.parameters())


@torch.no_grad()
def greedy(model, prompt, n_new):
    """Greedy decoding without a cache (every step re-runs the sequence, the
    most literal reading of the model). Returns the n_new token ids."""
    seq = list(prompt)
    out = []
    for _ in range(n_new):
        logits, _, _ = model(torch.tensor([seq]), all_logits=False)
        nxt = int(torch.argmax(logits[0]))   # first maximum on ties, like kv_argmax
        out.append(nxt)
        seq.append(nxt)
    return out


@torch.no_grad()
def chunked_losses(model, data, context):
    """Per-token loss (nats) of data[1:], fed in chunks of `context` tokens
    whose positions restart at 0: chunk k feeds data[k*context:(k+1)*context]
    and predicts the token after each one. This is exactly what `kvlab
    perplexity --context N` computes. Returns (losses (len-1,), positions)."""
    n = len(data)
    losses = torch.empty(n - 1, dtype=torch.float64)
    pos = torch.empty(n - 1, dtype=torch.int64)
    for s in range(0, n - 1, context):
        e = min(s + context, n - 1)
        x = data[s:e].long()[None, :]
        y = data[s + 1:e + 1].long()
        logits, _, _ = model(x)
        losses[s:e] = F.cross_entropy(logits[0].double(), y, reduction="none")
        pos[s:e] = torch.arange(e - s)
    return losses, pos


# ---------------------------------------------------------------------------
# llama2.c checkpoint and tokenizer.bin (format: docs/design.md)


def _f32(t):
    return t.detach().to(torch.float32).contiguous().numpy().tobytes()


def checkpoint_arrays(model):
    """The float arrays of the legacy format, in file order (wcls absent:
    the classifier is tied)."""
    L = model.layers
    cos, sin = rope_tables(model.cfg.seq_len, model.cfg.head_size)
    return [
        model.tok_embeddings.weight,
        torch.stack([l.attention_norm.weight for l in L]),
        torch.stack([l.wq.weight for l in L]),   # nn.Linear is (out, in) row-major
        torch.stack([l.wk.weight for l in L]),
        torch.stack([l.wv.weight for l in L]),
        torch.stack([l.wo.weight for l in L]),
        torch.stack([l.ffn_norm.weight for l in L]),
        torch.stack([l.w1.weight for l in L]),
        torch.stack([l.w2.weight for l in L]),
        torch.stack([l.w3.weight for l in L]),
        model.norm.weight,
        cos,                                       # the unused legacy RoPE tables
        sin,
    ]


def write_checkpoint(model, path):
    c = model.cfg
    header = struct.pack("<7i", c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads,
                         c.vocab_size, c.seq_len)   # positive vocab: shared classifier
    atomic_write(path, [header] + [_f32(a) for a in checkpoint_arrays(model)])


def read_checkpoint(path):
    """A Model holding the weights of a legacy checkpoint with a shared
    classifier (what write_checkpoint writes)."""
    with open(path, "rb") as f:
        buf = f.read()
    hdr = struct.unpack("<7i", buf[:28])
    if hdr[5] <= 0:
        raise ValueError(f"{path}: unshared classifier (negative vocab_size) not supported here")
    cfg = Config(*hdr)
    model = Model(cfg)
    flat = torch.frombuffer(bytearray(buf[28:]), dtype=torch.float32)
    off = 0
    L = model.layers
    targets = [
        [model.tok_embeddings.weight],
        [l.attention_norm.weight for l in L],
        [l.wq.weight for l in L], [l.wk.weight for l in L], [l.wv.weight for l in L],
        [l.wo.weight for l in L],
        [l.ffn_norm.weight for l in L],
        [l.w1.weight for l in L], [l.w2.weight for l in L], [l.w3.weight for l in L],
        [model.norm.weight],
    ]
    with torch.no_grad():
        for group in targets:
            for p in group:
                n = p.numel()
                p.copy_(flat[off:off + n].view(p.shape))
                off += n
    off += 2 * cfg.seq_len * (cfg.head_size // 2)
    if off != flat.numel():
        raise ValueError(f"{path}: {flat.numel()} floats, expected {off}")
    return model


def write_byte_tokenizer(path):
    """tokenizer.bin of the byte-level vocabulary: token i is byte i, score
    0, max_token_length 1 (what kvlab's kv_tokenizer_create_bytes holds)."""
    chunks = [struct.pack("<i", 1)]
    for i in range(256):
        chunks.append(struct.pack("<fi", 0.0, 1) + bytes([i]))
    atomic_write(path, chunks)
