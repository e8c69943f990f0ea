# mk/slurm.mk - one sweep cut into shards (docs/scaling.md): submitted to
# Slurm as an array job plus a merge job, or run here one shard at a time,
# and the Slurm end-to-end test on a one-node cluster.

##@ Sharded sweeps and Slurm (mk/slurm.mk)

.PHONY: bench-slurm bench-shards test-slurm
# shards of one sweep, their options (the same for every shard: they decide
# the plan), CPUs per Slurm task (= each shard's --threads), extra sbatch
# options for both jobs (e.g. SBATCH_ARGS='--partition=short --time=2:00:00')
SHARDS ?= 4
SHARD_ARGS ?= $(BENCH_ARGS)
SLURM_CPUS ?= 2
SBATCH_ARGS ?=
SHARD_DIR ?= out/shards
SLURM_MERGED ?= out/bench-slurm.csv
SLURM_PLOTS ?= out/plots-slurm

# Submit the sweep to Slurm: an array job of $(SHARDS) shards and a dependent
# merge + plots job (bench/slurm/) into $(SLURM_MERGED) and $(SLURM_PLOTS)/;
# prints the job ids, how to follow them and where each task's log is.
bench-slurm: $(CLI) ## submit the sweep to Slurm: SHARDS array tasks and a merge job
	@KVLAB=$(CLI) KVLAB_CPUS=$(SLURM_CPUS) KVLAB_SHARD_DIR=$(SHARD_DIR) SBATCH_ARGS='$(SBATCH_ARGS)' \
	  KVLAB_MERGED=$(SLURM_MERGED) KVLAB_PLOTS_DIR=$(SLURM_PLOTS) \
	  bash bench/slurm/submit.sh $(SHARDS) $(SHARD_ARGS)

# The same shards on this machine, one at a time (xargs -P 1), merged into
# out/bench-shards.csv; merge prints each shard's predicted and measured time.
bench-shards: deps ## the same shards here, one at a time, merged: out/bench-shards.csv
	@$(MAKE) --no-print-directory $(CLI)
	@mkdir -p $(SHARD_DIR)-local
	$(CLI) sweep $(SHARD_ARGS) --shard 1/$(SHARDS) --list | grep '^#'
	seq 1 $(SHARDS) | xargs -P 1 -I{} $(CLI) sweep $(SHARD_ARGS) --shard {}/$(SHARDS) \
	  --out $(SHARD_DIR)-local/shard-{}.csv
	$(CLI) merge out/bench-shards.csv $(foreach i,$(shell seq $(SHARDS)),$(SHARD_DIR)-local/shard-$(i).csv)

# The Slurm end-to-end test: as root it installs slurm-wlm and munge and runs
# a one-node cluster (about a minute); as another user it says so and skips.
test-slurm: $(CLI) ## the Slurm end-to-end test (as root: a one-node cluster; else skips)
	KVLAB=$(CLI) bash tests/e2e_slurm.sh
