# mk/build.mk - building kvlab: the flags it requires, the two archives and
# the CLI, the Debian packages (deps), install and clean. Included by the
# Makefile, after the settings there (CC, CFLAGS, SANITIZE, PORTABLE, BUILD).

##@ Build and install (mk/build.mk)

# (the rest of the CFLAGS story is at the top of the Makefile)
KV_REQ_CFLAGS := -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -Wall -Wextra -Werror \
                 -fopenmp -MMD -MP
BLAS_CFLAGS := $(shell pkg-config --cflags openblas 2>/dev/null)
BLAS_LIBS   := $(shell pkg-config --libs openblas 2>/dev/null || echo -lopenblas)
CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   := $(shell pkg-config --libs check 2>/dev/null || echo -lcheck)
KV_REQ_CPPFLAGS := $(BLAS_CFLAGS)
LDLIBS   := $(BLAS_LIBS) -lm
KV_REQ_LDFLAGS := -fopenmp $(SANLD)
KV_CPPFLAGS = $(CPPFLAGS) $(KV_REQ_CPPFLAGS)
KV_CFLAGS_ALL = $(CFLAGS) $(KV_REQ_CFLAGS)
KV_LDFLAGS = $(LDFLAGS) $(KV_REQ_LDFLAGS)

# libkvlab.a: the kernels, the strategies and the model (decoder, its
# generation modes, checkpoints, tokenizer, and the file checks they open and
# write files with): everything the installed headers declare, which a
# program of yours links (make install; tests/e2e_linkall.sh checks it);
# libkvlab-cli.a: the commands, sweep, CSV, compare, merge, demo, roofline,
# which only the kvlab binary and the tests use.
# The folders are the layers (docs/design.md): the library is kernels/,
# strategies/ and bench/model/; the CLI archive the layers above it.
KV_LIB_DIRS := kernels strategies bench/model
CLI_LIB_DIRS := bench/term bench/measure bench/teach bench/results bench/serve bench/cli
KV_LIB_SRCS := $(foreach d,$(KV_LIB_DIRS),$(wildcard $(d)/*.c))
CLI_LIB_SRCS := $(filter-out bench/cli/main.c,$(foreach d,$(CLI_LIB_DIRS),$(wildcard $(d)/*.c)))
LIB_SRCS := $(KV_LIB_SRCS) $(CLI_LIB_SRCS)
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)
CLI_OBJS := $(BUILD)/obj/bench/cli/main.o

LIB := $(BUILD)/libkvlab.a
CLI_LIB := $(BUILD)/libkvlab-cli.a
CLI := $(BUILD)/kvlab

# the sweep CSV records the build flags (# cflags=) through sysinfo.c
$(BUILD)/obj/bench/measure/sysinfo.o: KV_REQ_CPPFLAGS += -DKV_CFLAGS='"$(strip $(KV_CFLAGS_ALL))"'

# what `make deps` installs (a `make deps` you type adds the notebook's
# NOTEBOOK_PKGS, mk/quality.mk; targets call it with their own DEPS_PKGS=)
DEPS_PKGS := libopenblas-dev check gnuplot-nox pkg-config

.PHONY: all deps clean install

all: $(LIB) $(CLI) ## build build/libkvlab.a, build/libkvlab-cli.a and build/kvlab (the default)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(KV_CPPFLAGS) $(KV_CFLAGS_ALL) -c $< -o $@

# (each archive is rebuilt when a makefile changes, so a member moved to
# the other archive leaves this one)
$(LIB): $(KV_LIB_SRCS:%.c=$(BUILD)/obj/%.o) Makefile $(KV_MK_FILES)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $(filter %.o,$^)

$(CLI_LIB): $(CLI_LIB_SRCS:%.c=$(BUILD)/obj/%.o) Makefile $(KV_MK_FILES)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $(filter %.o,$^)

$(CLI): $(CLI_OBJS) $(CLI_LIB) $(LIB)
	$(CC) $(KV_LDFLAGS) -o $@ $^ $(LDLIBS)

deps: ## install the missing Debian packages (as root), else print the apt-get command
	@missing=""; for p in $(DEPS_PKGS); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "deps: installing$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || exit 1; \
	  else \
	    echo "deps: missing$$missing; run: sudo apt-get update && sudo apt-get install -y$$missing" >&2; exit 1; \
	  fi; \
	fi


clean: ## remove build/ (results in out/ are kept)
	rm -rf build

# Install the CLI, the library, its public headers (under include/kvlab/, in
# the source layout: their relative includes stay valid) and kvlab.pc under
# $(DESTDIR)$(PREFIX); tests/e2e_install.sh links a program against it.
KV_VERSION ?= 0.2
# (strategies/kv_store.h, the strategies' own storage helpers, is not one:
# its inline functions take the strategies' state on trust)
KV_PUBLIC_HDRS := kvlab.h kernels/kv_common.h kernels/kv_attention.h kernels/kv_quant.h \
                  kernels/kv_ops.h strategies/strategy.h \
                  bench/model/kv_model.h bench/model/checkpoint.h bench/model/tokenizer.h
# OpenBLAS through its own .pc when there is one, else its flags as found here
KV_PC_REQUIRES := $(if $(shell pkg-config --exists openblas 2>/dev/null && echo y),openblas)
KV_PC_LIBS := $(if $(KV_PC_REQUIRES),,$(BLAS_LIBS))
install: all ## install kvlab, libkvlab.a, its headers and kvlab.pc under DESTDIR/PREFIX
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig \
	  $(addprefix $(DESTDIR)$(PREFIX)/include/kvlab/,kernels strategies bench/model)
	install -m 755 $(CLI) $(DESTDIR)$(PREFIX)/bin/kvlab
	install -m 644 $(LIB) $(DESTDIR)$(PREFIX)/lib/libkvlab.a
	for h in $(KV_PUBLIC_HDRS); do \
	  install -m 644 $$h $(DESTDIR)$(PREFIX)/include/kvlab/$$h || exit 1; done
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(KV_VERSION)|' \
	  -e 's|@REQUIRES@|$(KV_PC_REQUIRES)|' -e 's|@LIBS@|$(KV_PC_LIBS)|' kvlab.pc.in \
	  >$(DESTDIR)$(PREFIX)/lib/pkgconfig/kvlab.pc

