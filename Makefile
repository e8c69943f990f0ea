# kvlab - build, test, bench, demo.
#
#   make             build/libkvlab.a (library), build/libkvlab-cli.a (commands), build/kvlab
#   make help        every target in one line each, by area (from the `##` comments)
#   make test        Check suites + end-to-end tests (SANITIZE=1: ASan+UBSan)
#   make bench       the default, PyTorch-comparison and kernel sweeps + every plot (out/)
#   make bench-quick a reduced sweep and its plots; `make report` then pages it
#   make demo        the narrated tour
#   make deps        install the Debian packages kvlab needs, when missing
#
# This file holds the settings you choose; the rules live in mk/, one file
# per area (each starts by saying what it holds; its knobs sit beside its rules):
#   mk/build.mk    compile and link the archives and the CLI, deps, install, clean
#   mk/bench.mk    the demo, the sweeps, kernel timing, targets, plots, the report
#   mk/peers.mk    llama.cpp/ggml and PyTorch beside kvlab (make peers)
#   mk/model.mk    the trained model: training, bits per byte, streaming
#   mk/quality.mk  tests, regression checks, fuzzing, lint, valgrind, notebook and report checks
#   mk/slurm.mk    one sweep in shards, on this machine or on Slurm
#   mk/guard.mk    the check of every value you hand make, before it is used
# A target's `## text` (after its prerequisites, or `## target: text` on a
# line above it) is its line in `make help`; `##@ Title` starts an area.
#
# Knobs: CFLAGS, CPPFLAGS, LDFLAGS (yours: `make CFLAGS=-O2` replaces the
# optimisation flags only, the required ones in KV_REQ_* stay), PORTABLE=1
# (no -march=native), SANITIZE=1, BUILD (the output folder), CC,
# PREFIX/DESTDIR for install.

# every value given on make's command line or in the environment is checked
# before anything expands it: no character the shell parses (mk/guard.mk)
KV_MK_FILES := mk/build.mk mk/bench.mk mk/peers.mk mk/model.mk mk/quality.mk mk/slurm.mk
include mk/guard.mk

CC       ?= cc
PREFIX   ?= /usr/local

ifeq ($(origin CC),default)
CC := gcc
endif

ifeq ($(SANITIZE),1)
BUILD    := build/san
OPT      := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
SANLD    := -fsanitize=address,undefined
else
BUILD    := build
OPT      := -O3 -g
SANLD    :=
endif

# A portable build keeps its objects apart, so it never mixes with native ones.
ifeq ($(PORTABLE),1)
ARCH     :=
BUILD    := $(if $(filter build,$(BUILD)),build/portable,$(BUILD)-portable)
else
ARCH     := -march=native
endif

# CFLAGS is the user's (optimisation, -march); what kvlab needs to build at
# all is in KV_REQ_CFLAGS (mk/build.mk), added after it in every rule, so a
# command-line CFLAGS adds to it instead of replacing it (likewise CPPFLAGS,
# LDFLAGS).
CFLAGS   ?= $(OPT) $(ARCH)

# `make` alone builds the library and the CLI (all, in mk/build.mk).
.DEFAULT_GOAL := all
include $(KV_MK_FILES)

# ---- make help ------------------------------------------------------------
##@ Help
.PHONY: help
# the targets `make help` lists first, in this order
HELP_FIRST := all test bench bench-quick demo deps help
# awk reads the `##` comments of the makefiles read (not the .d files) as
# data (mk/help.awk); the shell sees only their names
help: ## this list: every target in one line, by area
	@awk -v first='$(HELP_FIRST)' -f mk/help.awk $(filter-out %.d,$(MAKEFILE_LIST))

-include $(LIB_OBJS:.o=.d) $(CLI_OBJS:.o=.d) $(TEST_BINS:=.d)
