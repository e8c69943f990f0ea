#!/usr/bin/python3
"""train_model.py - train the small byte-level model that ships with kvlab
(`make train-model`), export it as a llama2.c checkpoint + tokenizer.bin, and
write its model card and loss curve.

    /usr/bin/python3 bench/py/train_model.py [--out-dir notebooks_data] [options]

The model is exactly kvlab's decoder (bench/py/kvtorch.py says how each piece
matches docs/design.md), trained on Debian's fortunes (apt-get install
fortunes) with a held-out split of whole fortunes, a fixed seed and a fixed
number of steps. The design decisions that matter:
- Reproducible: one seed drives the split, the initialisation and the
  batches; the default is ONE torch thread, because the sums of a
  multi-threaded reduction may be ordered differently on another machine,
  and because on a shared 2-core machine one thread trains 2-3x faster than
  two (an OpenMP team whose second core is busy waits at every barrier).
- Nothing committed is touched until the end: the checkpoint, tokenizer,
  loss CSV and model card are first written as temporary files and renamed
  into place together once training and the final evaluation succeeded, so
  an interrupted run leaves the committed files as they were. Training
  state is saved to --state-dir every --save-every steps (atomically), and
  a rerun with the same options resumes from it.
- The header's seq_len (--max-len, default 4096) is larger than the training
  context (--context 512) on purpose: RoPE is relative, so kvlab can run
  the model past 512 positions, which the streaming experiments
  (bench/scripts/streaming.sh) need to show what happens there.
"""

import argparse
import json
import math
import os
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.stderr.write("train_model: needs PyTorch; run: sudo apt-get install -y python3-torch\n")
    sys.exit(2)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402
import kvtorch  # noqa: E402

CARD_NAME = "fortunes-model"


def parse_args(argv):
    p = argparse.ArgumentParser(description="train kvlab's small fortunes model")
    p.add_argument("--out-dir", default="notebooks_data",
                   help="where the checkpoint, tokenizer, card and loss CSV go")
    p.add_argument("--name", default=CARD_NAME, help="file name stem of the outputs")
    p.add_argument("--state-dir", default="out/train", help="resumable training state")
    p.add_argument("--seed", type=int, default=corpus.DEFAULT_SEED)
    p.add_argument("--steps", type=int, default=800)
    p.add_argument("--batch", type=int, default=16, help="sequences per step")
    p.add_argument("--context", type=int, default=512, help="training sequence length")
    p.add_argument("--max-len", type=int, default=4096, help="seq_len in the checkpoint header")
    p.add_argument("--dim", type=int, default=192)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--lr", type=float, default=3e-3, help="peak learning rate")
    p.add_argument("--min-lr", type=float, default=3e-4, help="learning rate at the end")
    p.add_argument("--warmup", type=int, default=40, help="linear warm-up steps")
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0, help="gradient norm clip")
    p.add_argument("--heldout-frac", type=float, default=corpus.DEFAULT_HELDOUT_FRAC)
    p.add_argument("--eval-every", type=int, default=50)
    p.add_argument("--eval-windows", type=int, default=24,
                   help="fixed windows of each split for the loss curve")
    p.add_argument("--save-every", type=int, default=50)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--no-resume", action="store_true", help="ignore saved training state")
    p.add_argument("--stop-at", type=int, default=0, metavar="STEP",
                   help="save the state and stop after STEP, as an interruption would "
                        "(tests resuming)")
    p.add_argument("--one-step-from", metavar="CKPT",
                   help="instead of training: load CKPT, take ONE optimizer step of this "
                        "script on a training batch, write the result to --one-step-out")
    p.add_argument("--one-step-out", metavar="FILE", default="out/fortunes-model-step1.bin")
    p.add_argument("--command", default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    for k in ("steps", "batch", "context", "max_len", "eval_every", "save_every", "threads",
              "eval_windows"):
        if getattr(a, k) < 1:
            p.error(f"--{k.replace('_', '-')} must be >= 1")
    if a.context > a.max_len:
        p.error("--context must not exceed --max-len")
    if not 0 < a.heldout_frac < 0.5:
        p.error("--heldout-frac must be in (0, 0.5)")
    return a


def lr_at(a, step):
    """Linear warm-up, then cosine from lr down to min_lr at the last step."""
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    t = (step - a.warmup) / max(1, a.steps - a.warmup)
    return a.min_lr + 0.5 * (a.lr - a.min_lr) * (1 + math.cos(math.pi * min(1.0, t)))


def make_optimizer(a, model):
    """AdamW; weight decay on the matrices only (not norms)."""
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=a.lr, betas=(0.9, 0.95), eps=1e-8)


def batch_at(data, offsets, context):
    x = torch.stack([data[o:o + context] for o in offsets]).long()
    y = torch.stack([data[o + 1:o + context + 1] for o in offsets]).long()
    return x, y


def train_step(model, opt, x, y, lr, clip):
    """One optimizer step on (x, y); returns the batch loss (nats/token).
    Also what bench/stale_cache.py applies once to show a stale cache."""
    for g in opt.param_groups:
        g["lr"] = lr
    logits, _, _ = model(x)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    opt.step()
    return float(loss)


@torch.no_grad()
def window_loss(model, data, offsets, context):
    model.eval()
    tot = 0.0
    for o in offsets:
        x, y = batch_at(data, [o], context)
        logits, _, _ = model(x)
        tot += float(F.cross_entropy(logits[0], y[0]))
    model.train()
    return tot / len(offsets)


def fixed_offsets(gen, n_tokens, context, count):
    return torch.randint(0, n_tokens - context - 1, (count,), generator=gen).tolist()


def config_key(a):
    """The options a saved state must agree with to be resumed."""
    keys = ("seed", "steps", "batch", "context", "max_len", "dim", "hidden", "layers", "heads",
            "kv_heads", "lr", "min_lr", "warmup", "weight_decay", "clip", "heldout_frac",
            "eval_every", "eval_windows")
    return {k: getattr(a, k) for k in keys}


def save_state(path, state):
    tmp = path + ".tmp"
    torch.save(state, tmp)
    os.replace(tmp, path)


def write_text(path, text):
    corpus.atomic_write(path, [text.encode()])


def fortunes_version():
    try:
        with open("/var/lib/dpkg/status", encoding="utf-8", errors="replace") as f:
            block = f.read().split("\n\n")
        out = []
        for b in block:
            lines = dict(ln.split(": ", 1) for ln in b.splitlines() if ": " in ln)
            if lines.get("Package") in ("fortunes", "fortunes-min"):
                out.append(f"{lines['Package']} {lines.get('Version', '?')}")
        return ", ".join(sorted(out)) or "unknown"
    except OSError:
        return "unknown"


def model_card(a, cfg, n_params, info, train, held, log, final, elapsed, cpu, ckpt_bytes):
    last = log[-1]
    lines = [
        f"# {a.name}: kvlab's small trained model",
        "",
        "A byte-level Llama (exactly kvlab's decoder: RMSNorm eps 1e-5, RoPE theta 10000 on",
        "adjacent pairs, grouped-query attention, SwiGLU, classifier tied to the embedding)",
        "trained on Debian's fortunes, so that kvlab's demo prints text and its perplexity",
        "benchmark measures what a cache strategy costs on real text.",
        "",
        "| | |",
        "|---|---|",
        f"| files | `{a.name}.bin` (llama2.c legacy checkpoint, {ckpt_bytes} bytes), "
        f"`{a.name}-tokenizer.bin` (byte-level tokenizer.bin, token i = byte i) |",
        f"| architecture | dim {cfg.dim}, {cfg.n_layers} layers, {cfg.n_heads} query heads / "
        f"{cfg.n_kv_heads} KV heads of {cfg.head_size}, hidden {cfg.hidden_dim}, vocab 256 |",
        f"| parameters | {n_params} ({n_params * 4 / 2**20:.2f} MiB of float32) |",
        f"| context | trained on {a.context}-token windows; header seq_len {cfg.seq_len} "
        "(RoPE is relative: past "
        f"{a.context} positions the model runs, but was never trained there) |",
        f"| corpus | Debian `fortunes` + `fortunes-min` ({fortunes_version()}): "
        f"{info['files']} files of /usr/share/games/fortunes except "
        f"{', '.join(corpus.FORTUNES_EXCLUDE)}, "
        f"{info['fortunes']} distinct fortunes (sha256 of the files {info['sha256'][:16]}...) |",
        f"| split | fortunes shuffled with the seed; {info['train_fortunes']} train "
        f"({len(train)} bytes), {info['heldout_fortunes']} held out ({len(held)} bytes); "
        "fortunes joined by a blank line, overstrike (char, backspace) removed |",
        f"| training | {a.steps} steps of {a.batch} x {a.context} tokens "
        f"({a.steps * a.batch * a.context} tokens, "
        f"{a.steps * a.batch * a.context / len(train):.2f} epochs), AdamW (0.9, 0.95), lr "
        f"{a.lr:g} (warm-up {a.warmup} steps, cosine to {a.min_lr:g}), weight decay "
        f"{a.weight_decay:g} on matrices, grad clip {a.clip:g}, float32 |",
        f"| seed | {a.seed} |",
        f"| time | {cpu / 60:.1f} min of CPU time on {a.threads} torch thread(s), "
        f"{elapsed / 60:.1f} min wall-clock on a machine shared with other jobs "
        f"(PyTorch {torch.__version__}) |",
        f"| final losses | train windows {last['train_loss']:.4f}, held-out windows "
        f"{last['heldout_loss']:.4f} nats/byte |",
        f"| **held-out bits per byte** | **{final['bpb']:.4f}** (perplexity "
        f"{final['ppl']:.3f} per byte) over all {final['tokens']} predicted bytes, in chunks "
        f"of {a.context} (`kvlab perplexity --strategy dynamic --context {a.context}` "
        "computes the same) |",
        "",
        "Command (what `make train-model` runs):",
        "",
        "```sh",
        a.command,
        "```",
        "",
        f"The loss curve: `{a.name}-loss.png` (from `{a.name}-loss.csv`, columns step, "
        "tokens, lr, train_loss, heldout_loss, train_bpb, heldout_bpb, elapsed_s, cpu_s; the "
        f"losses are the mean over {a.eval_windows} fixed {a.context}-token windows of each "
        "split, nats per byte).",
        "",
    ]
    return "\n".join(lines)


def one_step(a, train):
    """The stale-cache experiment's second checkpoint (kvlab stale-cache):
    the checkpoint after one more optimizer step of this script: AdamW as in
    training (fresh moments: a checkpoint does not keep them), the learning
    rate of the schedule's last step, one seeded batch of the training text."""
    model = kvtorch.read_checkpoint(a.one_step_from)
    model.train()
    opt = make_optimizer(a, model)
    gen = torch.Generator().manual_seed(a.seed + 2)
    offsets = torch.randint(0, len(train) - a.context - 1, (a.batch,), generator=gen).tolist()
    x, y = batch_at(train, offsets, a.context)
    loss = train_step(model, opt, x, y, lr_at(a, a.steps - 1), a.clip)
    with torch.no_grad():
        logits, _, _ = model(x)
        after = float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)))
    os.makedirs(os.path.dirname(os.path.abspath(a.one_step_out)), exist_ok=True)
    kvtorch.write_checkpoint(model, a.one_step_out)
    print(f"wrote {a.one_step_out}: {a.one_step_from} after one AdamW step (lr "
          f"{lr_at(a, a.steps - 1):g}) on {a.batch} x {a.context} training tokens; batch loss "
          f"{loss:.4f} -> {after:.4f} nats/byte")
    return 0


def main(argv):
    a = parse_args(argv)
    if a.command is None:
        a.command = "/usr/bin/python3 bench/py/train_model.py " + " ".join(argv)
    torch.set_num_threads(a.threads)
    try:
        train_b, held_b, info = corpus.load_corpus(a.seed, a.heldout_frac)
    except FileNotFoundError as e:
        sys.stderr.write(f"train_model: {e}\n")
        return 2
    train = torch.frombuffer(bytearray(train_b), dtype=torch.uint8)
    held = torch.frombuffer(bytearray(held_b), dtype=torch.uint8)
    if a.one_step_from:
        return one_step(a, train)

    cfg = kvtorch.Config(a.dim, a.hidden, a.layers, a.heads, a.kv_heads, 256, a.max_len)
    torch.manual_seed(a.seed)
    gen = torch.Generator().manual_seed(a.seed)
    model = kvtorch.Model(cfg)
    model.init_weights(gen)
    opt = make_optimizer(a, model)
    eval_gen = torch.Generator().manual_seed(a.seed + 1)
    train_eval = fixed_offsets(eval_gen, len(train), a.context, a.eval_windows)
    held_eval = fixed_offsets(eval_gen, len(held), a.context, a.eval_windows)
    step, log, elapsed0, cpu0 = 0, [], 0.0, 0.0

    os.makedirs(a.state_dir, exist_ok=True)
    state_path = os.path.join(a.state_dir, f"{a.name}-state.pt")
    if not a.no_resume and os.path.exists(state_path):
        st = torch.load(state_path)
        if st.get("config") == config_key(a):
            model.load_state_dict(st["model"])
            opt.load_state_dict(st["opt"])
            gen.set_state(st["gen"])
            step, log, elapsed0, cpu0 = st["step"], st["log"], st["elapsed"], st["cpu"]
            print(f"resuming from {state_path} at step {step}", flush=True)
        else:
            print(f"ignoring {state_path}: it was saved with other options", flush=True)

    n_params = model.n_params()
    print(f"model {cfg}: {n_params} parameters; train {len(train)} bytes, held out "
          f"{len(held)} bytes; {a.steps} steps of {a.batch}x{a.context}, seed {a.seed}, "
          f"{a.threads} thread(s)", flush=True)
    t_start = time.time() - elapsed0
    c_start = time.process_time() - cpu0
    model.train()
    while step < a.steps:
        offsets = torch.randint(0, len(train) - a.context - 1, (a.batch,), generator=gen).tolist()
        x, y = batch_at(train, offsets, a.context)
        loss = train_step(model, opt, x, y, lr_at(a, step), a.clip)
        if not math.isfinite(loss):
            sys.stderr.write(f"train_model: loss is {loss} at step {step}; stopping\n")
            return 1
        step += 1
        if step % a.eval_every == 0 or step == a.steps or step == 1:
            tl = window_loss(model, train, train_eval, a.context)
            hl = window_loss(model, held, held_eval, a.context)
            el = time.time() - t_start
            log.append({"step": step, "tokens": step * a.batch * a.context,
                        "lr": lr_at(a, step - 1), "train_loss": tl, "heldout_loss": hl,
                        "train_bpb": tl / math.log(2), "heldout_bpb": hl / math.log(2),
                        "elapsed_s": el, "cpu_s": time.process_time() - c_start})
            print(f"step {step:5d}  batch loss {loss:.4f}  train {tl:.4f}  held-out {hl:.4f} "
                  f"({hl / math.log(2):.3f} bpb)  {el:7.1f} s", flush=True)
        if (step % a.save_every == 0 or step == a.stop_at) and step < a.steps:
            save_state(state_path, {"config": config_key(a), "model": model.state_dict(),
                                    "opt": opt.state_dict(), "gen": gen.get_state(),
                                    "step": step, "log": log,
                                    "elapsed": time.time() - t_start,
                                    "cpu": time.process_time() - c_start})
        if step == a.stop_at:
            print(f"stopped after step {step} (--stop-at); state in {state_path}", flush=True)
            return 3
    elapsed = time.time() - t_start
    cpu = time.process_time() - c_start

    # Final held-out evaluation: every byte, in chunks of the training context.
    model.eval()
    losses, _ = kvtorch.chunked_losses(model, held, a.context)
    nats = float(losses.sum())
    final = {"tokens": int(losses.numel()), "bpb": nats / math.log(2) / losses.numel(),
             "ppl": math.exp(nats / losses.numel())}
    print(f"held-out: {final['bpb']:.4f} bits per byte over {final['tokens']} bytes "
          f"(context {a.context}); trained in {elapsed / 60:.1f} min", flush=True)

    # Stage every output as a temporary file, then rename them all.
    os.makedirs(a.out_dir, exist_ok=True)
    base = os.path.join(a.out_dir, a.name)
    staged = []

    def stage(path, writer):
        tmp = path + ".staged"
        writer(tmp)
        staged.append((tmp, path))

    stage(base + ".bin", lambda p: kvtorch.write_checkpoint(model, p))
    stage(base + "-tokenizer.bin", kvtorch.write_byte_tokenizer)
    cols = ["step", "tokens", "lr", "train_loss", "heldout_loss", "train_bpb", "heldout_bpb",
            "elapsed_s", "cpu_s"]
    csv = "# kvlab training log: " + a.command + "\n" + ",".join(cols) + "\n" + "".join(
        ",".join(f"{r[c]:.6g}" if isinstance(r[c], float) else str(r[c]) for c in cols) + "\n"
        for r in log)
    stage(base + "-loss.csv", lambda p: write_text(p, csv))
    ckpt_bytes = os.path.getsize(base + ".bin.staged")
    card = model_card(a, cfg, n_params, info, train_b, held_b, log, final, elapsed, cpu,
                      ckpt_bytes)
    stage(base + ".md", lambda p: write_text(p, card))
    summary = dict(final, steps=a.steps, seed=a.seed, params=n_params, minutes=elapsed / 60,
                   cpu_minutes=cpu / 60)
    stage(base + "-summary.json", lambda p: write_text(p, json.dumps(summary, indent=1) + "\n"))
    for tmp, path in staged:
        os.replace(tmp, path)
    if os.path.exists(state_path):
        os.unlink(state_path)
    print(f"wrote {', '.join(p for _, p in staged)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
