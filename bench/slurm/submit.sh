#!/usr/bin/env bash
# submit.sh - run a kvlab sweep on Slurm as N shards (`make bench-slurm`):
# an array job of N tasks (bench/slurm/sweep.sbatch, one shard each) and a
# merge + plots job (bench/slurm/merge.sbatch) that waits for all of them
# (--dependency=afterok). Prints the job ids, how to follow them, and where
# each task's log is. Run from the repository root, on a login node whose
# filesystem the compute nodes share (docs/scaling.md).
#
#   bash bench/slurm/submit.sh N [kvlab sweep options...]
#
# Environment (all optional):
#   KVLAB            the kvlab binary (default build/kvlab)
#   KVLAB_CPUS       CPUs per task = the sweep's --threads (default 2)
#   KVLAB_SHARD_DIR  shard CSVs and logs/ (default out/shards)
#   KVLAB_MERGED     the merged CSV (default out/bench-slurm.csv)
#   KVLAB_PLOTS_DIR  the plots of it (default out/plots-slurm; empty: none)
#   SBATCH_ARGS      more sbatch options for both jobs, e.g.
#                    "--partition=short --time=01:00:00 --constraint=avx512"
# Exit status: 0 submitted, 2 bad input (nothing submitted), 1 sbatch failed.
set -euo pipefail

N=${1:-}
if ! [[ "$N" =~ ^[1-9][0-9]*$ ]]; then
    echo "bench-slurm: SHARDS must be a whole number >= 1, got '${N}'" >&2
    exit 2
fi
shift
kvlab=${KVLAB:-build/kvlab}
cpus=${KVLAB_CPUS:-2}
dir=${KVLAB_SHARD_DIR:-out/shards}
merged=${KVLAB_MERGED:-out/bench-slurm.csv}
plots=${KVLAB_PLOTS_DIR-out/plots-slurm}
here=$(cd "$(dirname "$0")" && pwd)
if ! [[ "$cpus" =~ ^[1-9][0-9]*$ ]]; then
    echo "bench-slurm: KVLAB_CPUS must be a whole number >= 1, got '$cpus'" >&2
    exit 2
fi
if ! command -v sbatch >/dev/null 2>&1; then
    echo "bench-slurm: sbatch not found: run this on a Slurm login node (or use the" \
         "xargs/parallel way in docs/scaling.md)" >&2
    exit 2
fi
if [ ! -x "$kvlab" ]; then
    echo "bench-slurm: $kvlab not found: build it first (make)" >&2
    exit 2
fi
kvlab=$(cd "$(dirname "$kvlab")" && pwd)/$(basename "$kvlab")

# The plan, before anything is submitted: bad options or more shards than
# rows fail here with kvlab's own message, and the plan stays next to the
# shards for comparing predicted with measured times.
mkdir -p "$dir/logs"
"$kvlab" sweep "$@" --threads "$cpus" --shard "1/$N" --list >"$dir/plan.txt" || exit $?

env="ALL,KVLAB=$kvlab,KVLAB_SHARDS=$N,KVLAB_SHARD_DIR=$dir"
# shellcheck disable=SC2086
out=$(sbatch --parsable --array="1-$N" --cpus-per-task="$cpus" \
    --output="$dir/logs/sweep-%A_%a.log" --export="$env" ${SBATCH_ARGS:-} \
    "$here/sweep.sbatch" "$@") || { echo "bench-slurm: sbatch of the sweep failed" >&2; exit 1; }
sweep_id=${out%%;*}
# shellcheck disable=SC2086
out=$(sbatch --parsable --dependency="afterok:$sweep_id" --kill-on-invalid-dep=yes \
    --output="$dir/logs/merge-%j.log" \
    --export="$env,KVLAB_MERGED=$merged,KVLAB_PLOTS_DIR=$plots" ${SBATCH_ARGS:-} \
    "$here/merge.sbatch") || {
    echo "bench-slurm: sbatch of the merge failed; cancelling the sweep ($sweep_id)" >&2
    scancel "$sweep_id" 2>/dev/null || true
    exit 1
}
merge_id=${out%%;*}

cat <<MSG
bench-slurm: submitted array job $sweep_id (shards 1-$N, $cpus CPUs each) and merge job $merge_id (afterok:$sweep_id)
  plan:     $dir/plan.txt (predicted time per shard)
  follow:   squeue -j $sweep_id,$merge_id        (sacct -j $sweep_id once they ended, where accounting is on)
  logs:     $dir/logs/sweep-${sweep_id}_I.log for shard I; tail -f one to watch its rows
  failed:   if task I fails, its log is $dir/logs/sweep-${sweep_id}_I.log; the merge job
            is then cancelled (afterok): fix it, rerun that shard (sbatch --array=I ...) and merge by hand
  result:   $merged (merge log: $dir/logs/merge-$merge_id.log)${plots:+, plots in $plots/}
bench-slurm: jobs $sweep_id $merge_id
MSG
