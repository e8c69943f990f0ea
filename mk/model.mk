# mk/model.mk - the trained model (issue 15): training it, its loss curve,
# the held-out text, bits per byte per cache, StreamingLLM's experiment and
# the stale-cache demonstration. Needs notebooks_data/fortunes-model.bin
# (committed) and, for some, PyTorch and the fortunes package.

##@ The trained model (mk/model.mk)

.PHONY: train-model model-plot bench-perplexity streaming heldout stale-cache
# Debian's Python with python3-torch (the `python3` on PATH may lack it)
TRAIN_PYTHON ?= /usr/bin/python3
# where train-model writes the checkpoint, tokenizer, card and loss curve
TRAIN_OUT ?= notebooks_data
# extra options for bench/py/train_model.py, e.g. TRAIN_ARGS='--steps 100'
TRAIN_ARGS ?=
MODEL ?= notebooks_data/fortunes-model.bin
# the held-out split of the corpus (bench/py/corpus.py, the training seed)
HELDOUT ?= out/heldout.txt
PPL_CSV ?= out/perplexity.csv
# bench-perplexity: bytes of the held-out text scored (empty: all of it),
# the context (the cache is reset every PPL_CONTEXT tokens), threads
PPL_MAX_TOKENS ?= 65536
# the bits-per-byte table inside `make bench` scores fewer bytes (every
# configuration the same ones; make bench's time target is 10 minutes)
BENCH_PPL_MAX_TOKENS ?= 32768
# configurations scored at once (each on PPL_THREADS threads; empty: the cores)
PPL_JOBS ?=
PPL_CONTEXT ?= 512
PPL_THREADS ?= 1
# streaming: pieces of the held-out text, their length, the bucket width
STREAM_SEGMENTS ?= 4
STREAM_LENGTH ?= 2048
STREAM_BUCKET ?= 128
STREAM_THREADS ?= 1
need_torch = $(TRAIN_PYTHON) -c 'import torch' 2>/dev/null || \
  { echo "$@: needs PyTorch; run: sudo apt-get install -y python3-torch" >&2; exit 2; }
need_fortunes = test -d /usr/share/games/fortunes || \
  { echo "$@: needs the corpus; run: sudo apt-get install -y fortunes" >&2; exit 2; }

# Train the shipped model (about 30 min on 2 cores) into $(TRAIN_OUT)/, draw its loss curve.
train-model: ## train the shipped model into notebooks_data/ (about 30 min; PyTorch)
	@$(need_torch)
	@$(need_fortunes)
	nice -n 10 $(TRAIN_PYTHON) bench/py/train_model.py --out-dir $(TRAIN_OUT) $(TRAIN_ARGS)
	@$(MAKE) --no-print-directory model-plot

# Re-draw the loss curve $(TRAIN_OUT)/fortunes-model-loss.png from its CSV.
model-plot: export KV_TRAIN_OUT = $(TRAIN_OUT)
model-plot: ## redraw the model's loss curve from its CSV
	gnuplot -c plots/model/loss.gp "$$KV_TRAIN_OUT/fortunes-model-loss.csv" "$$KV_TRAIN_OUT/fortunes-model-loss.tmp" && \
	  mv -- "$$KV_TRAIN_OUT/fortunes-model-loss.tmp.png" "$$KV_TRAIN_OUT/fortunes-model-loss.png"

# The held-out text (the fortunes the model never saw), made from the installed package.
## heldout: the held-out text out/heldout.txt (the fortunes package)
heldout $(HELDOUT):
	@$(need_fortunes)
	@mkdir -p $(dir $(HELDOUT))
	$(TRAIN_PYTHON) bench/py/corpus.py --heldout-out $(HELDOUT)

# The bits-per-byte table: every configuration of bench/scripts/ppl_table.sh on the
# held-out text, into $(PPL_CSV) and $(PPL_CSV:.csv=.md).
bench-perplexity: $(CLI) $(HELDOUT) ## bits per byte of every cache on the held-out text: out/perplexity.md
	@test -f $(MODEL) || { echo "$@: no $(MODEL) (make train-model)" >&2; exit 2; }
	PPL_MAX_TOKENS=$(PPL_MAX_TOKENS) PPL_CONTEXT=$(PPL_CONTEXT) PPL_THREADS=$(PPL_THREADS) PPL_JOBS=$(PPL_JOBS) \
	  bash bench/scripts/ppl_table.sh $(CLI) $(MODEL) $(HELDOUT) $(PPL_CSV) $(PPL_CSV:.csv=.md)
	@cat $(PPL_CSV:.csv=.md)

# StreamingLLM's experiment: loss vs position past the training context per
# configuration (out/streaming.csv, $(PLOTS_DIR)/streaming.png), and the
# attention on the first token per layer and head (out/attn_sinks.*,
# $(PLOTS_DIR)/attn_sinks.png; needs PyTorch).
streaming: export KV_PLOT_DIR = $(PLOTS_DIR)
streaming: export KV_MODEL = $(MODEL)
streaming: $(CLI) $(HELDOUT) ## StreamingLLM's experiment: loss past the context, attention sinks
	@test -f $(MODEL) || { echo "$@: no $(MODEL) (make train-model)" >&2; exit 2; }
	STREAM_SEGMENTS=$(STREAM_SEGMENTS) STREAM_LENGTH=$(STREAM_LENGTH) STREAM_BUCKET=$(STREAM_BUCKET) \
	  STREAM_THREADS=$(STREAM_THREADS) bash bench/scripts/streaming.sh $(CLI) $(MODEL) $(HELDOUT) out
	gnuplot -c plots/model/streaming.gp out/streaming.dat "$$KV_PLOT_DIR"
	@$(need_torch)
	$(TRAIN_PYTHON) bench/py/attn_sinks.py $(MODEL) $(HELDOUT) out --segments $(STREAM_SEGMENTS) \
	  --length $(STREAM_LENGTH)
	gnuplot -c plots/model/sinks.gp out/attn_sinks.dat "$$KV_PLOT_DIR" \
	  "$$(od -An -t d4 -j 12 -N 4 -- "$$KV_MODEL" | tr -d ' ')" 64
	@echo "streaming: out/streaming.csv, out/attn_sinks.md; plots $(PLOTS_DIR)/streaming.png and $(PLOTS_DIR)/attn_sinks.png"

# The seed's warning, shown: the model one optimizer step of the training
# script later (out/fortunes-model-step1.bin, PyTorch), then `kvlab
# stale-cache` decodes with the old cache and the new weights.
stale-cache: $(CLI) ## decode with a cache the weights have moved past
	@test -f $(MODEL) || { echo "$@: no $(MODEL) (make train-model)" >&2; exit 2; }
	@$(need_torch)
	@$(need_fortunes)
	@mkdir -p out
	$(TRAIN_PYTHON) bench/py/train_model.py --one-step-from $(MODEL) --one-step-out out/fortunes-model-step1.bin
	$(CLI) stale-cache --model $(MODEL) --updated out/fortunes-model-step1.bin
