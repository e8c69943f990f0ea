# mk/bench.mk - running kvlab and showing what it measured: the demo tour,
# the sweeps (make bench, make bench-quick), the kernel alone, the frontier,
# the storage, eviction, sharing and generation targets, the plots, the
# classroom reference data and the one-file report. Results go to out/.

##@ Demo, benchmarks, plots and the report (mk/bench.mk)

BENCH_CSV ?= out/bench.csv
PLOTS_DIR ?= out/plots
BENCH_QUICK_CSV ?= out/bench-quick.csv
# extra options for bench's sweep, e.g. BENCH_ARGS='--threads 1'
BENCH_ARGS ?=
# the reduced sweep of bench-quick: default model, shorter sequences
BENCH_QUICK_ARGS ?= --max-seq 2048 --none-max 1024
# where bench-quick draws its plots (and `make report` of its run finds them)
BENCH_QUICK_PLOTS ?= out/plots-quick
PLOT_SCRIPTS := $(filter-out plots/common.gp plots/kernel.gp plots/frontier.gp plots/sharing.gp plots/serving.gp plots/serving_timeline.gp,$(sort $(wildcard plots/*.gp)))
# the memory-accuracy frontier (make frontier, part of make bench): every
# configuration of FRONTIER_LIST at FRONTIER_BUDGETS (% of an f32 dynamic
# cache of T tokens) and FRONTIER_SEQ_LENS, into FRONTIER_CSV, its tables
# into FRONTIER_CSV with .md for .csv, plot frontier.png
FRONTIER_CSV ?= out/frontier.csv
FRONTIER_LIST ?= bench/data/frontier.list
FRONTIER_BUDGETS ?= 12.5,25,50
FRONTIER_SEQ_LENS ?= 2048,8192
# extra options for the frontier sweep, e.g. FRONTIER_ARGS='--model M.bin'
FRONTIER_ARGS ?=
# kernel-bench: `kvlab kernel` over the shapes of issue 5's peer table
# (head_dim,heads,kv_heads), decode at every T and dtype, plus causal prefill
KERNEL_CSV ?= out/kernel.csv
KERNEL_SHAPES ?= 64,8,8 64,32,8 128,8,8 128,32,8
KERNEL_SEQ_LENS ?= 512,2048,8192
KERNEL_DTYPES ?= f32,f16,bf16,int8,int4,int2
# quantized dtypes kernel-bench also times cold with --layout kivi (issue 18)
KERNEL_KIVI_DTYPES ?= int2
KERNEL_PREFILL ?= --queries 512 --seq-len 2048 --dtype f32 --no-ref
# extra options for every kernel run, e.g. KERNEL_ARGS='--threads 2'
KERNEL_ARGS ?=
# passes over all shapes, interleaved; the table keeps each configuration's
# best min us and the limits' best measurement. On a shared VM host load
# comes in bursts of seconds: one pass can be hit on some rows, two rarely
# on the same row (and each row is already a min over its repetitions);
# a third pass would cost make bench 1.5 of its 10 minutes.
# KERNEL_PASSES=1 for a quick look, 3 for a noisier machine.
KERNEL_PASSES ?= 2
# the attention-only one-layer model of issue 5's PyTorch comparison, and
# the markdown of the step-level targets (bench/scripts/kernel_table.sh --steps)
TORCH_CSV ?= out/torch_compare.csv
STEPS_MD ?= out/steps.md
TORCH_ARGS ?= --layers 1 --dim 512 --heads 8 --kv-heads 8 --mlp off --strategies dynamic,static \
              --seq-lens 128,512,1024,2048,4096,8192
# the peers' measurements of this run (bench/peers/): out/peers.csv, the
# token agreement and precision of each peer, and the row files the parts
# of a run leave before they are assembled
PEERS_CSV ?= out/peers.csv
PEERS_ACC_CSV ?= out/peers_accuracy.csv
PEERS_PART = $(PEERS_CSV:.csv=).part

.PHONY: bench bench-quick kernel-bench plots demo

# Play the narrated demo tour (under 30 s; DEMO_PAUSE=1 pauses between parts on a terminal).
demo: deps ## the narrated demo tour, under 30 s (DEMO_PAUSE=1 pauses between parts)
	@$(MAKE) --no-print-directory $(CLI)
	@KVLAB=$(CLI) bash bench/scripts/demo_tour.sh

# Build, run the default sweep into $(BENCH_CSV) (each row beside its own DRAM
# read limit: --bound), the PyTorch-comparison sweep into
# $(TORCH_CSV), the kernel sweep into $(KERNEL_CSV) and, when built (make peers)
# or importable, the peers beside them into $(PEERS_CSV) and $(PEERS_ACC_CSV)
# (tables: $(STEPS_MD), $(KERNEL_CSV:.csv=.md)), draw every plot into $(PLOTS_DIR).
bench: deps ## the full benchmark: sweeps, kernel, peers when built, tables, plots (out/)
	@$(MAKE) --no-print-directory $(CLI) $(if $(PEERS_BUILT),peers-bin)
	@mkdir -p $(dir $(BENCH_CSV)) $(dir $(PEERS_CSV))
	$(CLI) sweep --bound --out $(BENCH_CSV) $(BENCH_ARGS)
	$(CLI) sweep $(TORCH_ARGS) --quiet --out $(TORCH_CSV)
	@$(MAKE) --no-print-directory kernel-bench-run
	@rm -f $(PEERS_PART).models $(PEERS_PART).acc
	KVLAB=$(CLI) PEERS_DIR=$(PEERS_DIR) bash bench/peers/models.sh $(PEERS_PART).models $(PEERS_PART).acc
	@$(MAKE) --no-print-directory peers-assemble PEERS_ROWS="$(PEERS_PART).kernel $(PEERS_PART).models"
	bash bench/peers/assemble.sh accuracy $(PEERS_ACC_CSV) $(PEERS_PART).acc
	@rm -f $(PEERS_PART).models $(PEERS_PART).acc
	bash bench/scripts/kernel_table.sh --peers $(PEERS_CSV) --accuracy $(PEERS_ACC_CSV) \
	  --steps $(BENCH_CSV) $(TORCH_CSV) >$(STEPS_MD).tmp && mv $(STEPS_MD).tmp $(STEPS_MD)
	@$(MAKE) --no-print-directory frontier-run
	@$(MAKE) --no-print-directory serving SERVING_DIR=$(SERVING_DIR) PLOTS_DIR=$(PLOTS_DIR)
	@$(MAKE) --no-print-directory plots BENCH_CSV=$(BENCH_CSV) PLOTS_DIR=$(PLOTS_DIR)
	@if [ -f $(MODEL) ] && [ -d /usr/share/games/fortunes ]; then \
	  $(MAKE) --no-print-directory bench-perplexity PPL_MAX_TOKENS=$(BENCH_PPL_MAX_TOKENS); \
	else echo "bench: no bits-per-byte table (needs $(MODEL) and the fortunes package)"; fi
	@echo "bench: results in $(BENCH_CSV), $(TORCH_CSV), $(KERNEL_CSV), $(PEERS_CSV), $(PEERS_ACC_CSV) and $(FRONTIER_CSV); step and kernel targets in $(STEPS_MD) and $(KERNEL_CSV:.csv=.md); frontier table in $(FRONTIER_CSV:.csv=.md); serving table in $(SERVING_DIR)/summary.md; plots (PNG + SVG) in $(PLOTS_DIR)/"

# A reduced sweep (under a minute) into $(BENCH_QUICK_CSV), plots into $(BENCH_QUICK_PLOTS)/.
bench-quick: deps ## a reduced sweep (T up to 2048) and its plots: out/bench-quick.csv
	@$(MAKE) --no-print-directory $(CLI)
	@mkdir -p $(dir $(BENCH_QUICK_CSV))
	$(CLI) sweep --out $(BENCH_QUICK_CSV) $(BENCH_QUICK_ARGS) $(BENCH_ARGS)
	@$(MAKE) --no-print-directory plots BENCH_CSV=$(BENCH_QUICK_CSV) PLOTS_DIR=$(BENCH_QUICK_PLOTS)
	@echo "bench-quick: results in $(BENCH_QUICK_CSV), plots in $(BENCH_QUICK_PLOTS)/"

# The decode step quiet and beside CPU-bound competitors, 1 and 2 threads, in
# one run (bench/scripts/load_bench.sh; docs/performance.md, "Threads under
# load"): LOAD_RUNTIMES names the kvlab binaries to compare, interleaved,
# e.g. LOAD_RUNTIMES='new=build/kvlab old=/tmp/old/kvlab'.
LOAD_DIR ?= out/load
LOAD_RUNTIMES ?= kvlab=$(CLI)
.PHONY: bench-load
bench-load: deps $(CLI) ## the 2-thread step beside 3 CPU-bound competitors: out/load/load.{csv,md}
	bash bench/scripts/load_bench.sh $(LOAD_DIR) $(LOAD_RUNTIMES)

# Time the attention kernel alone (the machine's limits first, same threads), and
# ggml's when the peers are built, into $(KERNEL_CSV) and $(PEERS_CSV), the
# markdown table into $(KERNEL_CSV:.csv=.md), plot kernel.png.
kernel-bench: export KV_PLOT_CSV = $(KERNEL_CSV)
kernel-bench: export KV_PLOT_DIR = $(PLOTS_DIR)
kernel-bench: deps ## the attention kernel alone, ggml beside it when built: out/kernel.*
	@$(MAKE) --no-print-directory $(CLI) $(if $(PEERS_BUILT),peers-bin)
	@$(MAKE) --no-print-directory kernel-bench-run
	@$(MAKE) --no-print-directory peers-assemble PEERS_ROWS="$(PEERS_PART).kernel"
	@mkdir -p $(PLOTS_DIR)
	gnuplot -c plots/kernel.gp "$$KV_PLOT_CSV" "$$KV_PLOT_DIR"
	@echo "kernel-bench: results in $(KERNEL_CSV) and $(PEERS_CSV), table in $(KERNEL_CSV:.csv=.md), plot in $(PLOTS_DIR)/kernel.png"

# (the measuring part: bench/scripts/kernel_bench.sh, per pass and shape kvlab cold,
# hot and prefill, then ggml cold and hot; ggml's rows into $(PEERS_PART).kernel)
.PHONY: kernel-bench-run peers-assemble
kernel-bench-run: $(CLI)
	@rm -f $(PEERS_PART).kernel
	@KVLAB=$(CLI) KERNEL_CSV='$(KERNEL_CSV)' KERNEL_SHAPES='$(KERNEL_SHAPES)' \
	  KERNEL_SEQ_LENS='$(KERNEL_SEQ_LENS)' KERNEL_DTYPES='$(KERNEL_DTYPES)' \
	  KERNEL_KIVI_DTYPES='$(KERNEL_KIVI_DTYPES)' KERNEL_PREFILL='$(KERNEL_PREFILL)' KERNEL_ARGS='$(KERNEL_ARGS)' KERNEL_PASSES='$(KERNEL_PASSES)' \
	  PEERS_GGML='$(if $(PEERS_BUILT),$(PEERS_GGML))' PEERS_KERNEL_CSV='$(PEERS_PART).kernel' \
	  PEERS_COMMIT="$$(cat $(PEERS_DIR)/llama.commit 2>/dev/null)" bash bench/scripts/kernel_bench.sh

# ($(PEERS_CSV) from this run's peer rows, then the kernel table that reads it)
peers-assemble:
	bash bench/peers/assemble.sh peers $(PEERS_CSV) $(PEERS_ROWS)
	@rm -f $(PEERS_PART).kernel
	bash bench/scripts/kernel_table.sh --peers $(PEERS_CSV) $(KERNEL_CSV) >$(KERNEL_CSV:.csv=.md).tmp && \
	  mv $(KERNEL_CSV:.csv=.md).tmp $(KERNEL_CSV:.csv=.md)

# The memory-accuracy frontier alone: $(FRONTIER_CSV), its tables in
# $(FRONTIER_CSV:.csv=.md) (bench/scripts/frontier_table.sh) and $(PLOTS_DIR)/frontier.png.
.PHONY: frontier frontier-run
frontier: export KV_PLOT_CSV = $(FRONTIER_CSV)
frontier: export KV_PLOT_DIR = $(PLOTS_DIR)
frontier: deps ## the memory-accuracy frontier of the lossy caches: out/frontier.*
	@$(MAKE) --no-print-directory $(CLI)
	@$(MAKE) --no-print-directory frontier-run
	@mkdir -p $(PLOTS_DIR)
	gnuplot -c plots/frontier.gp "$$KV_PLOT_CSV" "$$KV_PLOT_DIR"
	@echo "frontier: results in $(FRONTIER_CSV), table in $(FRONTIER_CSV:.csv=.md), plot in $(PLOTS_DIR)/frontier.png"

frontier-run: $(CLI)
	@mkdir -p $(dir $(FRONTIER_CSV))
	$(CLI) sweep --frontier $(FRONTIER_LIST) --budgets $(FRONTIER_BUDGETS) \
	  --seq-lens $(FRONTIER_SEQ_LENS) --quiet --out $(FRONTIER_CSV) $(FRONTIER_ARGS)
	bash bench/scripts/frontier_table.sh $(FRONTIER_CSV) $(FRONTIER_CSV:.csv=.md)

# The storage targets of issue 18 (f16/bf16 decode >= 1.8x and int2/kivi-2
# >= 4x faster than f32 from DRAM at T >= 8192, int2/kivi-2 <= 0.15x the f32
# bytes at T = 8192): the kernel cold over STORAGE_SHAPES at STORAGE_SEQ_LENS
# into $(STORAGE_KERNEL_CSV), a sweep of the five caches into $(STORAGE_CSV),
# the tables of bench/scripts/kernel_table.sh into $(STORAGE_MD). Timings: run it on
# a quiet machine.
STORAGE_KERNEL_CSV ?= out/storage_kernel.csv
STORAGE_CSV ?= out/storage.csv
STORAGE_MD ?= out/storage.md
STORAGE_SHAPES ?= 64,8,8 64,32,8 128,8,8
STORAGE_SEQ_LENS ?= 8192,32768
# the sweep part: T of the bytes and step targets, extra sweep options
STORAGE_SWEEP_LENS ?= 8192
STORAGE_SWEEP_ARGS ?=
.PHONY: storage-targets
storage-targets: $(CLI) ## the 16-bit and 2-bit cache targets: out/storage.md (quiet machine)
	@mkdir -p $(dir $(STORAGE_CSV)) $(dir $(STORAGE_KERNEL_CSV))
	KVLAB=$(CLI) KERNEL_CSV='$(STORAGE_KERNEL_CSV)' KERNEL_SHAPES='$(STORAGE_SHAPES)' \
	  KERNEL_SEQ_LENS='$(STORAGE_SEQ_LENS)' KERNEL_DTYPES=f32,f16,bf16,int2 KERNEL_KIVI_DTYPES=int2 \
	  KERNEL_PREFILL='--queries 16 --seq-len 1024 --dtype f32 --no-ref' KERNEL_ARGS='$(KERNEL_ARGS)' \
	  KERNEL_PASSES='$(KERNEL_PASSES)' PEERS_GGML= bash bench/scripts/kernel_bench.sh
	$(CLI) sweep --strategies dynamic,dynamic-f16,dynamic-bf16,quantized-int2,kivi-2 \
	  --seq-lens $(STORAGE_SWEEP_LENS) --quiet --out $(STORAGE_CSV) $(STORAGE_SWEEP_ARGS)
	{ bash bench/scripts/kernel_table.sh $(STORAGE_KERNEL_CSV) && \
	  bash bench/scripts/kernel_table.sh $(if $(wildcard $(PEERS_CSV)),--peers $(PEERS_CSV)) --steps $(STORAGE_CSV); } \
	  >$(STORAGE_MD).tmp && mv $(STORAGE_MD).tmp $(STORAGE_MD)
	@grep -E '(f16|bf16|int2|kivi)' $(STORAGE_MD) | grep -E 'met|not measured' || true
	@echo "storage-targets: $(STORAGE_KERNEL_CSV), $(STORAGE_CSV), tables in $(STORAGE_MD)"

# The eviction targets (sinks and sliding flat in T past the window, h2o's
# bookkeeping over sliding at one budget): a sweep into out/eviction.csv, then
# the table of bench/eviction_targets.sh. Timings: run it on a quiet machine.
.PHONY: eviction-targets
eviction-targets: $(CLI) ## the eviction targets: sinks, sliding, h2o (quiet machine)
	KVLAB=$(CLI) bash bench/scripts/eviction_targets.sh

# The serving benchmark (docs/serving.md): every policy of
# bench/data/serving.policies at every SERVING_RATES request rate, the same
# generated stream each time, into $(SERVING_DIR)/summary.csv and
# summary.md, with each policy's per-iteration CSV at the middle rate.
# Part of `make bench`: its defaults (serving.sh) fit about 3 minutes on 2 cores.
# SERVING_ARGS adds `kvlab serving` options (a smaller model, --threads).
SERVING_DIR ?= out/serving
.PHONY: serving
serving: $(CLI) ## the serving benchmark: policies x request rates, out/serving/summary.md, serving*.png
	KVLAB=$(CLI) bash bench/scripts/serving.sh $(SERVING_DIR)
	@mkdir -p $(PLOTS_DIR)
	gnuplot -c plots/serving.gp $(SERVING_DIR)/summary.csv $(PLOTS_DIR)
	if [ -f $(SERVING_DIR)/prefix/summary.csv ]; then \
	  gnuplot -c plots/serving.gp $(SERVING_DIR)/prefix/summary.csv $(PLOTS_DIR) serving_prefix; fi
	gnuplot -c plots/serving_timeline.gp $(SERVING_DIR)/timeline.csv $(PLOTS_DIR)
	@cat $(SERVING_DIR)/summary.md

# The prefix-sharing sweep (issue 12): B = SHARING_BATCHES sequences sharing a
# prompt of each of SHARING_PROMPTS tokens, SHARING_NEW tokens each, every
# strategy of SHARING_STRATEGIES shared and unshared, into $(SHARING_CSV);
# plot sharing.png (memory and step time per sequence vs B).
SHARING_CSV ?= out/sharing.csv
SHARING_STRATEGIES ?= paged-16,dynamic
SHARING_BATCHES ?= 1,2,4,8
SHARING_PROMPTS ?= 1024,4096
SHARING_NEW ?= 128
# extra options, e.g. SHARING_ARGS='--threads 2'
SHARING_ARGS ?=
.PHONY: sharing gen-targets
sharing: export KV_PLOT_CSV = $(SHARING_CSV)
sharing: export KV_PLOT_DIR = $(PLOTS_DIR)
sharing: $(CLI) ## the prefix-sharing sweep: out/sharing.csv, sharing.png
	@mkdir -p $(dir $(SHARING_CSV)) $(PLOTS_DIR)
	$(CLI) sharing --strategies $(SHARING_STRATEGIES) --batches $(SHARING_BATCHES) \
	  --prompt-lens $(SHARING_PROMPTS) --new-tokens $(SHARING_NEW) --out $(SHARING_CSV) $(SHARING_ARGS)
	gnuplot -c plots/sharing.gp "$$KV_PLOT_CSV" "$$KV_PLOT_DIR"
	@echo "sharing: results in $(SHARING_CSV), plot in $(PLOTS_DIR)/sharing.png"

# The generation-mode targets (issue 12): beam search with GEN_BEAMS beams
# over each of GEN_STRATEGIES against greedy decoding of as many sequences
# from the same shared prompt, and self-speculative decoding against plain
# greedy; a markdown table (bench/scripts/gen_targets.sh) into $(GEN_TARGETS_MD).
GEN_STRATEGIES ?= paged-16 dynamic
GEN_BEAMS ?= 4
GEN_PROMPT ?= 1024
GEN_NEW ?= 128
GEN_DRAFT_LAYERS ?= 2
GEN_TARGETS_MD ?= out/gen_targets.md
gen-targets: $(CLI) ## beam search and self-speculation against greedy: out/gen_targets.md
	@mkdir -p $(dir $(GEN_TARGETS_MD))
	KVLAB=$(CLI) STRATEGIES='$(GEN_STRATEGIES)' BEAMS=$(GEN_BEAMS) PROMPT=$(GEN_PROMPT) \
	  NEW=$(GEN_NEW) DRAFT_LAYERS=$(GEN_DRAFT_LAYERS) bash bench/scripts/gen_targets.sh >$(GEN_TARGETS_MD).tmp && \
	  mv $(GEN_TARGETS_MD).tmp $(GEN_TARGETS_MD) && cat $(GEN_TARGETS_MD)

# Re-draw every plot from an existing $(BENCH_CSV) without measuring anything.
# The paths reach the recipe through the environment and gnuplot as plain
# arguments (gnuplot -c SCRIPT CSV OUTDIR): no path is spliced into a shell
# command or a gnuplot command line. gnuplot selects the series itself
# (plots/common.gp); a frontier CSV without lossy rows draws no frontier
# (one note line, exit 0).
plots: export KV_PLOT_CSV = $(BENCH_CSV)
plots: export KV_PLOT_DIR = $(PLOTS_DIR)
plots: export KV_PLOT_KERNEL = $(KERNEL_CSV)
plots: export KV_PLOT_FRONTIER = $(FRONTIER_CSV)
plots: ## redraw every plot from an existing out/bench.csv (BENCH_CSV=, PLOTS_DIR=)
	@test -f "$$KV_PLOT_CSV" || { echo "plots: $$KV_PLOT_CSV not found (run 'make bench' first)" >&2; exit 1; }
	@mkdir -p -- "$$KV_PLOT_DIR"
	@for s in $(PLOT_SCRIPTS); do \
	  gnuplot -c "$$s" "$$KV_PLOT_CSV" "$$KV_PLOT_DIR" || exit 1; done
	@echo "plots: $(words $(PLOT_SCRIPTS)) figures from $$KV_PLOT_CSV in $$KV_PLOT_DIR/"
	@if [ -f "$$KV_PLOT_KERNEL" ]; then \
	  gnuplot -c plots/kernel.gp "$$KV_PLOT_KERNEL" "$$KV_PLOT_DIR" || exit 1; \
	  echo "plots: kernel.png/svg from $$KV_PLOT_KERNEL in $$KV_PLOT_DIR/"; fi
	@if [ -f "$$KV_PLOT_FRONTIER" ]; then \
	  gnuplot -c plots/frontier.gp "$$KV_PLOT_FRONTIER" "$$KV_PLOT_DIR" || exit 1; \
	  echo "plots: frontier from $$KV_PLOT_FRONTIER in $$KV_PLOT_DIR/"; fi

# The reference run: one `make bench` run's result files, committed, from which
# docs/reference-run.md (the one page with machine-specific figures) is
# generated. `make reference` after a quiet `make peers && make bench` makes that
# run the reference: its sweep becomes notebooks_data/bench.csv (the notebook
# and the report read it), the rest goes to $(REF_DIR)/, and the page is
# generated again. tests/e2e_docs.sh regenerates the page and fails when the
# committed one differs.
REF_DIR ?= notebooks_data/reference
REF_CSV ?= notebooks_data/bench.csv
REF_DOC ?= docs/reference-run.md
REF_FILES = $(TORCH_CSV) $(KERNEL_CSV) $(PEERS_CSV) $(PEERS_ACC_CSV) $(FRONTIER_CSV)
# make serving's summaries, beside the sweep CSV where the notebook looks
REF_SERVING ?= $(dir $(REF_CSV))serving
.PHONY: reference reference-doc
reference: ## keep the last make bench (out/) as the reference run, regenerate docs/reference-run.md
	@for f in $(BENCH_CSV) $(REF_FILES); do \
	  test -f "$$f" || { echo "reference: no $$f (run 'make peers && make bench' first)" >&2; exit 2; }; \
	  test ! "$$f" -ot $(BENCH_CSV) || \
	    { echo "reference: $$f is older than $(BENCH_CSV): not from the same make bench run" >&2; exit 2; }; done
	@mkdir -p $(REF_DIR)
	cp $(BENCH_CSV) $(REF_CSV)
	cp $(REF_FILES) $(REF_DIR)/
	@rm -f $(REF_DIR)/perplexity.md
	@if [ -f $(PPL_CSV:.csv=.md) ] && [ $(PPL_CSV:.csv=.md) -nt $(BENCH_CSV) ]; then \
	  cp $(PPL_CSV:.csv=.md) $(REF_DIR)/perplexity.md; fi
	@rm -rf $(REF_SERVING)
	@if [ -f $(SERVING_DIR)/summary.csv ] && [ $(SERVING_DIR)/summary.csv -nt $(BENCH_CSV) ]; then \
	  mkdir -p $(REF_SERVING)/prefix && cp $(SERVING_DIR)/summary.csv $(SERVING_DIR)/summary.md $(REF_SERVING)/ && \
	  { [ ! -f $(SERVING_DIR)/prefix/summary.csv ] || cp $(SERVING_DIR)/prefix/summary.csv $(REF_SERVING)/prefix/; }; fi
	@$(MAKE) --no-print-directory reference-doc

reference-doc: ## regenerate docs/reference-run.md from the committed reference run
	bash bench/scripts/reference_doc.sh $(REF_CSV) $(REF_DIR) $(REF_DOC)

# ---- the one-file report (make report) -------------------------------------
.PHONY: report
PY3 ?= /usr/bin/python3
REPORT ?= out/report.html
# BASELINE has a default for bench-check; the report compares only when it is given.
REPORT_BASELINE := $(if $(filter command line environment,$(origin BASELINE)),$(BASELINE))
# The run the report is of: REPORT_CSV=FILE or BENCH_CSV=FILE when given,
# else the newer of make bench's $(BENCH_CSV) and make bench-quick's
# $(BENCH_QUICK_CSV), looked up when the recipe runs (so `make bench-quick
# report` finds the new file).
REPORT_CSV ?= $(if $(filter command line environment,$(origin BENCH_CSV)),$(BENCH_CSV),$(report_newest))
report_newest = $(firstword $(shell ls -t -- $(BENCH_CSV) $(BENCH_QUICK_CSV) 2>/dev/null))
# where its figures are drawn again: PLOTS_DIR when given, else bench-quick's
# own folder for bench-quick's run, PLOTS_DIR's default for any other
REPORT_PLOTS = $(if $(filter command line environment,$(origin PLOTS_DIR)),$(PLOTS_DIR),$(if $(report_quick),$(BENCH_QUICK_PLOTS),$(PLOTS_DIR)))
# (the recipe's words: was the CSV picked here, is it bench-quick's, the
# line that says which it is, the line when there is none)
report_auto = $(if $(filter command line environment,$(origin REPORT_CSV) $(origin BENCH_CSV)),,y)
report_quick = $(filter $(BENCH_QUICK_CSV),$(REPORT_CSV))
report_which = report: $(REPORT_CSV), the newer of make bench's and make bench-quick's sweep (figures in $(REPORT_PLOTS)/); REPORT_CSV=FILE for another
report_missing = $(if $(REPORT_CSV),$(REPORT_CSV) not found (run 'make bench' first),neither $(BENCH_CSV) nor $(BENCH_QUICK_CSV) found (run 'make bench' or 'make bench-quick' first))

# Write $(REPORT), one self-contained HTML page of the run in $(REPORT_CSV):
# its metadata, the target tables, key figures, every plot inlined as SVG
# (drawn again from the CSV), the peers, and `kvlab compare` verdicts with
# BASELINE=FILE. A table or peers file that is absent (bench-quick writes
# none) is named absent on the page; one older than the CSV is flagged.
report: ## out/report.html: the newest of out/bench.csv, out/bench-quick.csv (REPORT_CSV=)
	@test -f "$(REPORT_CSV)" || { echo "report: $(report_missing)" >&2; exit 2; }
	$(if $(report_auto),@echo "$(report_which)")
	@test -x $(PY3) || $(MAKE) --no-print-directory deps DEPS_PKGS=python3
	@$(PY3) bench/py/report.py --check --csv $(REPORT_CSV)
	@command -v gnuplot >/dev/null || $(MAKE) --no-print-directory deps DEPS_PKGS=gnuplot-nox
	@$(MAKE) --no-print-directory plots BENCH_CSV=$(REPORT_CSV) PLOTS_DIR=$(REPORT_PLOTS) >/dev/null
	$(if $(REPORT_BASELINE),@$(MAKE) --no-print-directory -q $(CLI) || $(MAKE) --no-print-directory $(CLI))
	@$(PY3) bench/py/report.py --csv $(REPORT_CSV) --steps $(STEPS_MD) --kernel-md $(KERNEL_CSV:.csv=.md) \
	  --plots $(REPORT_PLOTS) --serving-md $(SERVING_DIR)/summary.md --peers $(PEERS_CSV) --out $(REPORT) \
	  $(if $(REPORT_BASELINE),--baseline $(REPORT_BASELINE) --kvlab $(CLI))
