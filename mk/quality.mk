# mk/quality.mk - is it right: the tests (Check unit suites and end-to-end
# scripts), the notebook and report checks, the regression check against a
# per-machine baseline, libFuzzer targets, static analysis and valgrind.

##@ Tests and checks (mk/quality.mk)

TEST_SRCS := $(wildcard tests/check_*.c)
TEST_BINS := $(TEST_SRCS:tests/%.c=$(BUILD)/tests/%)
# e2e_slurm.sh starts a Slurm cluster as root: its own target, test-slurm
E2E_TESTS := $(filter-out tests/e2e_slurm.sh,$(sort $(wildcard tests/e2e_*.sh)))

.PHONY: test check-unit check-e2e

$(BUILD)/tests/%: tests/%.c $(CLI_LIB) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(KV_CPPFLAGS) $(CHECK_CFLAGS) $(KV_CFLAGS_ALL) $(KV_LDFLAGS) -o $@ $< $(CLI_LIB) $(LIB) \
	  $(CHECK_LIBS) $(LDLIBS)

# Build and run every test: Check unit suites, then end-to-end scripts.
test: deps ## every Check suite and end-to-end script (SANITIZE=1: under ASan + UBSan)
	@$(MAKE) --no-print-directory check-unit check-e2e

check-unit: $(TEST_BINS) $(CLI) ## the Check unit suites alone
	@fail=0; for t in $(TEST_BINS); do \
	  echo "== $$t"; ./$$t || fail=1; done; \
	exit $$fail

check-e2e: $(CLI) ## the end-to-end scripts tests/e2e_*.sh alone (not e2e_slurm.sh)
	@fail=0; for t in $(E2E_TESTS); do \
	  echo "== $$t"; KVLAB=$(CLI) KV_MAKE_ARGS='$(KV_MAKE_ARGS)' KV_TEST_LDFLAGS='$(SANLD)' \
	  bash $$t || fail=1; done; \
	exit $$fail
# the build e2e_install.sh installs: this one
KV_MAKE_ARGS = BUILD=$(BUILD) SANITIZE=$(SANITIZE) PORTABLE=$(PORTABLE)

# ---- the classroom notebook and the report, checked ------------------------
.PHONY: notebook-check report-check
# Debian's names for what the notebook needs: pandas, matplotlib, Jupyter's
# headless executor (`jupyter nbconvert`) and its Python kernel. A `make deps`
# typed by you installs them too; `make test` and `make bench` do not need them.
NOTEBOOK_PKGS := python3-pandas python3-matplotlib python3-nbconvert python3-ipykernel jupyter-nbconvert
ifeq ($(MAKELEVEL)$(filter deps,$(MAKECMDGOALS)),0deps)
deps: DEPS_PKGS += $(NOTEBOOK_PKGS)
endif
# the browser test of the report: Debian's chromium, driven headless
REPORT_CHECK_PKGS := python3 chromium gnuplot-nox
# (shell) re-measure $(BENCH_QUICK_CSV) when it is missing or older than the CLI
fresh_quick = $(MAKE) --no-print-directory $(CLI) && \
  { [ -f $(BENCH_QUICK_CSV) ] && [ $(BENCH_QUICK_CSV) -nt $(CLI) ] || $(MAKE) --no-print-directory bench-quick; }

# Execute notebooks_data/kv_cache.ipynb headless (jupyter nbconvert --execute)
# on the committed CSV, on a fresh bench-quick output, on a schema-2 copy and
# on a copy with one noisy row; fail on any cell error (tests/notebook_check.sh).
notebook-check: ## run the classroom notebook headless on the reference and a bench-quick run
	@$(MAKE) --no-print-directory deps DEPS_PKGS="$(NOTEBOOK_PKGS)"
	@$(fresh_quick)
	PY3=$(PY3) bash tests/notebook_check.sh notebooks_data/bench.csv $(BENCH_QUICK_CSV)

# The report's tests (tests/report_check.sh): bad input, then pages of the
# committed run and of a fresh bench-quick run loaded in headless chromium;
# screenshots out/report-*.png.
report-check: ## make report on bad input, then its pages in headless chromium
	@$(MAKE) --no-print-directory deps DEPS_PKGS="$(REPORT_CHECK_PKGS)"
	@$(fresh_quick)
	KVLAB=$(CLI) PY3=$(PY3) bash tests/report_check.sh notebooks_data/bench.csv $(BENCH_QUICK_CSV)

# ---- regression tracking (kvlab compare) -----------------------------------
.PHONY: baseline bench-check
# baseline / bench-check: the file kept per machine, e.g. BASELINE=out/baseline-$$(hostname).csv
BASELINE ?= out/baseline.csv
# sweeps merged (per-row median) into a baseline
BASELINE_RUNS ?= 3
# The check sweep: a few cached strategies at lengths where attention is a
# visible share of the step, on ONE thread (a co-running program then takes
# time slices instead of stalling an OpenMP barrier of every step), 41 timed
# steps per row (medians), up to 3 re-measurements of a noisy row (another
# program ran: bench/measure/noise.h). About 15 s. Baseline and check must
# use the same arguments.
BENCH_CHECK_ARGS ?= --strategies dynamic,static,quantized-int8 --seq-lens 512,1024,2048,4096 \
                    --threads 1 --reps 41 --retries 3 --quiet
# What bench-check compares, METRIC:THRESHOLD_PERCENT, each judged per group
# (the median over T of one strategy's rows, `compare --aggregate`).
# The gate (exit status): attn_vs_rest, the attention time in units of the
# rest of the same steps, so machine speed and load cancel; unchanged code
# stayed within 0.77-1.11 of a 3-run baseline on this shared 2-core VM, even
# while another job made every step 1.5-2x slower.
BENCH_CHECK_METRICS ?= attn_vs_rest:15
# Shown, not gating: the step and the kernel over the run's roofline. Under
# that load they drifted 1.2-1.9x for unchanged code; on a quiet, dedicated
# machine move them into BENCH_CHECK_METRICS.
BENCH_CHECK_INFO ?= step_ns_median:15 attn_ns_median:15
# bench-check BASE=REV measures both sides in the same minutes, so the host's
# drift falls on both: there the step and attention times gate, and
# attn_vs_rest, which would read a faster rest of the step as slower
# attention, is shown (bench/scripts/bench_check.sh)
BENCH_CHECK_AB_METRICS ?= step_ns_median:15 attn_ns_median:15
BENCH_CHECK_AB_INFO ?= attn_vs_rest:15
# extra options for bench-check's compare, e.g. COMPARE_FLAGS='--format csv'
COMPARE_FLAGS ?=
# bench-check BASE=REV: against the commit REV (built once into
# build/base/SHA), measured in the same minutes, AB_ROUNDS rounds of a base
# and a new sweep alternating (AB BA AB), instead of against BASELINE;
# BASE_KVLAB=FILE names a built base binary instead of a commit
BASE ?=
BASE_KVLAB ?=
AB_ROUNDS ?= 3
# The shell of both, bench/scripts/bench_check.sh, reads these from its
# environment: exported, never spliced into a recipe line, so a value with
# quotes or `;` in it stays a value
BENCH_CHECK_VARS := BASELINE BASELINE_RUNS BENCH_CHECK_ARGS BENCH_CHECK_METRICS BENCH_CHECK_INFO \
                    BENCH_CHECK_AB_METRICS BENCH_CHECK_AB_INFO \
                    COMPARE_FLAGS BASE BASE_KVLAB AB_ROUNDS
$(foreach v,$(BENCH_CHECK_VARS),$(eval baseline bench-check: export $(v) := $$($(v))))
baseline bench-check: export KVLAB := $(CLI)

# Run the check sweep $(BASELINE_RUNS) times and keep the per-row median as
# $(BASELINE) (keep one per machine; bench/scripts/median_rows.awk merges the runs).
baseline: $(CLI) ## save this machine's baseline of the check sweep (BASELINE=FILE)
	@bash bench/scripts/bench_check.sh baseline

# Rerun the check sweep and compare it with $(BASELINE) (normalised, per group);
# a regression or a noisy result (rows measured under interference, `kvlab
# compare` exit 3) is measured once more. Exit 0 no regression, 1 a
# regression both runs showed, 2 no comparison, 3 noisy, re-run (the rerun
# noisy too, or regressing after a noisy first run).
bench-check: $(CLI) ## compare a new check sweep with BASELINE, or with commit BASE run interleaved: 1 confirmed regression, 3 noisy (re-run)
	@bash bench/scripts/bench_check.sh $(if $(BASE)$(BASE_KVLAB),ab,check)

# ---- fuzzing ----------------------------------------------------------------
.PHONY: fuzz
FUZZ_SECONDS ?= 60
FUZZ_CC ?= clang
FUZZ_PKGS := clang libclang-rt-14-dev
FUZZ_CFLAGS := -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -std=c11 \
               -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -Wall -Wextra -Werror
# Run every libFuzzer target for FUZZ_SECONDS each (clang; not part of `make test`).
fuzz: fuzz-csv fuzz-opts fuzz-ckpt fuzz-tok fuzz-demo ## every libFuzzer target, FUZZ_SECONDS (60) each

# The fuzz targets link the whole library, built once with clang
# under the fuzzer's sanitizers into build/fuzz/ (-Wno-pass-failed: clang at
# -O1 cannot vectorize some `omp simd` loops and says so).
.PHONY: fuzz-csv fuzz-opts fuzz-ckpt fuzz-tok fuzz-demo fuzz-probe
FUZZ_OBJ_CFLAGS := -g -O1 -fsanitize=fuzzer-no-link,address,undefined \
                   -fno-sanitize-recover=undefined -std=c11 -D_POSIX_C_SOURCE=200809L \
                   -D_DEFAULT_SOURCE -Wall -Wextra -Werror -Wno-pass-failed -fopenmp
FUZZ_LIB := build/fuzz/libkvlab.a
FUZZ_LIB_OBJS := $(LIB_SRCS:%.c=build/fuzz/obj/%.o)

build/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(KV_CPPFLAGS) $(FUZZ_OBJ_CFLAGS) -c $< -o $@

$(FUZZ_LIB): $(FUZZ_LIB_OBJS)
	rm -f $@
	ar rcs $@ $^

build/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_LIB)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fopenmp -o $@ $< $(FUZZ_LIB) $(LDLIBS)

# Install clang and its fuzzer runtime when missing.
fuzz-probe:
	@mkdir -p build/fuzz
	@echo 'int LLVMFuzzerTestOneInput(void){return 0;}' >build/fuzz/probe.c
	@$(FUZZ_CC) -fsanitize=fuzzer -o build/fuzz/probe build/fuzz/probe.c >/dev/null 2>&1 || \
	  $(MAKE) --no-print-directory deps DEPS_PKGS="$(FUZZ_PKGS)"

# Fuzz the CSV reader and compare logic (csv), the option parser (opts), the
# checkpoint reader (ckpt), the tokenizer (tok) and the whole demo command
# (demo); seeds in tests/fuzz/corpus_<name>, new inputs kept in
# build/fuzz/corpus_<name>, a dictionary in tests/fuzz/<name>.dict if any.
## fuzz-NAME: one libFuzzer target alone: fuzz-csv, -opts, -ckpt, -tok or -demo
fuzz-csv fuzz-opts fuzz-ckpt fuzz-tok fuzz-demo: fuzz-%:
	@$(MAKE) --no-print-directory fuzz-probe
	@$(MAKE) --no-print-directory build/fuzz/fuzz_$*
	@mkdir -p build/fuzz/corpus_$*
	build/fuzz/fuzz_$* -max_total_time=$(FUZZ_SECONDS) -timeout=30 -print_final_stats=1 \
	  $(if $(wildcard tests/fuzz/$*.dict),-dict=tests/fuzz/$*.dict) \
	  -artifact_prefix=build/fuzz/$*- build/fuzz/corpus_$* tests/fuzz/corpus_$*

# ---- static analysis (make lint) and memcheck (make valgrind) -----------
.PHONY: lint lint-cppcheck lint-tidy lint-deps valgrind
LINT_SRCS := $(LIB_SRCS) bench/cli/main.c
LINT_HDRS := $(foreach d,$(KV_LIB_DIRS) $(CLI_LIB_DIRS),$(wildcard $(d)/*.h))
# warning+style+performance+portability; true false positives are listed,
# with reasons, in .cppcheck-suppressions (or inline, cppcheck-suppress).
CPPCHECK_FLAGS := --quiet --std=c11 --enable=warning,style,performance,portability \
                  --inline-suppr --suppressions-list=.cppcheck-suppressions \
                  --error-exitcode=1 -D__GNUC__
TIDY_DEFS := -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -fopenmp

# Static analysis: cppcheck, then clang-tidy (checks chosen in .clang-tidy).
lint: lint-deps ## static analysis: cppcheck, then clang-tidy
	@$(MAKE) --no-print-directory lint-cppcheck lint-tidy
	@echo "lint: cppcheck and clang-tidy clean over kernels/ strategies/ bench/"

lint-deps:
	@command -v cppcheck >/dev/null && command -v clang-tidy >/dev/null || \
	  $(MAKE) --no-print-directory deps DEPS_PKGS="cppcheck clang-tidy"

lint-cppcheck:
	cppcheck $(CPPCHECK_FLAGS) $(BLAS_CFLAGS) $(LINT_SRCS)
	cppcheck $(CPPCHECK_FLAGS) $(if $(PEERS_BUILT),$(PEERS_INC)) $(wildcard bench/peers/*.c)

# One stamp per file, so `make -j lint` runs clang-tidy in parallel.
lint-tidy: $(LINT_SRCS:%.c=build/lint/%.tidy)

build/lint/%.tidy: %.c .clang-tidy $(LINT_HDRS)
	@mkdir -p $(dir $@)
	clang-tidy --quiet $< -- $(KV_CPPFLAGS) $(TIDY_DEFS) 2>/dev/null
	@touch $@

# valgrind memcheck of `kvlab demo` and a tiny sweep, built without
# sanitizers into build/vg/ for AVX2 at most (valgrind cannot run AVX-512,
# which -march=native may pick); suppressions in tests/valgrind.supp.
VG_ARCH ?= -march=x86-64-v3
VG_FLAGS := --error-exitcode=1 --leak-check=full --suppressions=tests/valgrind.supp \
            --quiet
VG_SWEEP := sweep --layers 1 --dim 32 --heads 2 --kv-heads 2 --hidden 48 --vocab 64 \
            --max-len 128 --group 8 --window 8 --residual 4 --seq-lens 16,32 --reps 3 \
            --warmup 1 --threads 2 \
            --no-roofline --quiet --out build/vg/sweep.csv
valgrind: ## memcheck of kvlab demo and a tiny sweep (built in build/vg/)
	@command -v valgrind >/dev/null || $(MAKE) --no-print-directory deps DEPS_PKGS=valgrind
	@$(MAKE) --no-print-directory BUILD=build/vg ARCH=$(VG_ARCH) SANITIZE=0 build/vg/kvlab
	valgrind $(VG_FLAGS) build/vg/kvlab demo >/dev/null
	valgrind $(VG_FLAGS) build/vg/kvlab demo --compare sliding,quantized --bits 4 --batch 2 \
	  >/dev/null
	valgrind $(VG_FLAGS) build/vg/kvlab demo --strategy sliding --window 1 --prompt-tokens 5 \
	  --steps 2 >/dev/null
	valgrind $(VG_FLAGS) build/vg/kvlab $(VG_SWEEP)
	@echo "valgrind: demo and a tiny sweep are memcheck-clean"
