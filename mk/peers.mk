# mk/peers.mk - the peers kvlab is measured against: llama.cpp/ggml, fetched
# pinned and built once, with Debian's python3-torch (make peers), kvlab's two
# harnesses linked against it (peers-bin), and the greedy-token agreement
# check (make check-peers). make bench and make kernel-bench (mk/bench.mk)
# run the peers when they are built.

##@ Peers: llama.cpp/ggml and PyTorch (mk/peers.mk)

.PHONY: peers peers-bin check-peers
# llama.cpp's source comes from the npm package node-llama-cpp (a git bundle
# inside it), pinned by version and by npm's sha512 integrity of the tarball;
# bench/peers/build.sh fetches, checks, clones and builds it into build/peers/
# (about 12 minutes on 2 cores, once; a second `make peers` does nothing).
PEERS_VERSION ?= 3.21.1
PEERS_INTEGRITY := sha512-E3N0Ev2Va0wzydvXYFwM9Hvyo07PoWjt8T/9GMc43Cvt8YkV/NU/tYUgEMC1grTPv2o9PRjQi0G3Wb5P/awiMg==
PEERS_DIR := build/peers
PEERS_STAMP := $(PEERS_DIR)/stamp-$(PEERS_VERSION)
PEERS_BUILT := $(wildcard $(PEERS_STAMP))
PEERS_GGML := $(PEERS_DIR)/bin/kvlab-peer-ggml
PEERS_LLAMA := $(PEERS_DIR)/bin/kvlab-peer-llama
PEERS_INC := -I$(PEERS_DIR)/llama.cpp/ggml/include -I$(PEERS_DIR)/llama.cpp/include
PEERS_LIBS := $(PEERS_DIR)/build/src/libllama.a $(PEERS_DIR)/build/ggml/src/libggml.a \
              $(PEERS_DIR)/build/ggml/src/libggml-cpu.a $(PEERS_DIR)/build/ggml/src/libggml-base.a \
              -lstdc++
PEERS_CFLAGS := -O2 -g -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -Wall -Wextra -Werror -fopenmp

# Fetch, verify and build llama.cpp (ggml CPU, libllama, llama-bench, the
# llama2.c converter), install Debian's python3-torch, build kvlab's peer
# harnesses; exit 2 naming what is missing when a tool or the network is.
peers: ## fetch (pinned, checked) and build llama.cpp/ggml and the harnesses (build/peers/)
	@bash bench/peers/build.sh $(PEERS_VERSION) $(PEERS_INTEGRITY) $(PEERS_DIR)
	@$(MAKE) --no-print-directory SANITIZE=0 PORTABLE=0 peers-bin

# kvlab's two harnesses, linked against that build (and kvlab's library: run
# it with the default build settings, as `peers` and `bench` do).
peers-bin: $(PEERS_GGML) $(PEERS_LLAMA) ## relink kvlab's two peer harnesses against that build

# (the timing protocol and the command layer that parses both harnesses'
# options live in the CLI's archive, the allocator and kernels in libkvlab)
$(PEERS_GGML): bench/peers/ggml_attn.c bench/measure/kernel_timing.h $(PEERS_STAMP) $(CLI_LIB) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(PEERS_CFLAGS) $(PEERS_INC) -o $@ $< $(CLI_LIB) $(LIB) $(PEERS_LIBS) $(LDLIBS)

$(PEERS_LLAMA): bench/peers/llama_greedy.c $(PEERS_STAMP) $(CLI_LIB) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(PEERS_CFLAGS) $(PEERS_INC) -o $@ $< $(CLI_LIB) $(LIB) $(PEERS_LIBS) $(LDLIBS)

# The external agreement checks, required: greedy tokens of llama.cpp and of
# PyTorch equal kvlab's (tests/e2e_peers.sh; make test runs it too, skipping
# what is not built).
check-peers: $(CLI) ## llama.cpp's and PyTorch's greedy tokens must equal kvlab's
	@$(MAKE) --no-print-directory SANITIZE=0 PORTABLE=0 peers-bin
	KVLAB=$(CLI) PEERS_REQUIRED=1 bash tests/e2e_peers.sh
