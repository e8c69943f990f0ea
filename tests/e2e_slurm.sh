#!/usr/bin/env bash
# e2e_slurm.sh - the Slurm path of a sharded sweep, on a real single-node
# Slurm started here (`make test-slurm`; CI runs it as root).
#
# Installs Debian's slurm-wlm and munge when missing, starts a private
# munged (own key and socket), slurmctld and slurmd on localhost with a
# generated slurm.conf (one node, 2 CPUs, non-default ports, state and spool
# in a temporary folder, so a Slurm already on the machine is not touched),
# waits until sinfo says idle, then:
#   1. submits a small sweep as 4 shards with `make bench-slurm SHARDS=4`
#      (bench/slurm/submit.sh): the array job and the afterok merge job;
#      waits (bounded) and checks the merged CSV against an unsharded run of
#      the same sweep: the same keys in the same order and the same exact
#      columns (FLOPs, bytes, cache bytes, copies; timings differ), every
#      shard on --cpus-per-task threads, plots drawn;
#   2. submits again with one shard made to fail (its output path is a
#      directory): that task's log holds kvlab's one-line error, the merge
#      job never runs, and bench-slurm's output named the log.
# Every daemon is stopped by its PID from the EXIT trap, and the test checks
# that none is left. Without root it skips with a message (exit 0).
# Usage: KVLAB=build/kvlab bash tests/e2e_slurm.sh
set -u
KVLAB=${KVLAB:-build/kvlab}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WAIT_S=${KVLAB_SLURM_WAIT_S:-300} # bound on each wait for jobs

if [ "$(id -u)" != 0 ]; then
    echo "e2e_slurm: SKIPPED: needs root to install slurm-wlm and munge and to start" \
         "munged, slurmctld and slurmd (CI runs it as root: make test-slurm)"
    exit 0
fi
KVLAB=$(cd "$(dirname "$KVLAB")" && pwd)/$(basename "$KVLAB")
cd "$ROOT" || exit 1

pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
check() { # check DESCRIPTION COMMAND...
    local what=$1; shift
    if "$@"; then ok; else bad "$what"; fi
}
die() { echo "FAIL: $*"; echo "$pass passed, $((fail + 1)) failed"; exit 1; }

# ---------------------------------------------------------------- packages
need=""
for p in slurm-wlm munge; do dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"; done
if [ -n "$need" ]; then
    echo "e2e_slurm: installing$need"
    t0=$(date +%s)
    # where systemd runs, the packages' scripts would start munge (and
    # slurmd, once configured) as services: policy-rc.d forbids it for the
    # install, so that only the daemons this test starts, and stops, run
    policy=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        policy=/usr/sbin/policy-rc.d
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy"
    fi
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need; } \
        >/dev/null 2>&1
    rc=$?
    [ -n "$policy" ] && rm -f "$policy"
    [ "$rc" = 0 ] || die "apt-get install$need failed"
    echo "e2e_slurm: installed in $(( $(date +%s) - t0 )) s"
fi
for b in munged slurmctld slurmd sbatch squeue sinfo scancel; do
    command -v "$b" >/dev/null 2>&1 || die "$b not found after installing slurm-wlm and munge"
done

# ---------------------------------------------------------------- the cluster
TMP=$(mktemp -d "${TMPDIR:-/tmp}/kvlab_e2e_slurm.XXXXXX")
chmod 755 "$TMP" # munged runs as the munge user and needs to reach its folder
PIDS=()
stop_all() {
    # jobs first (so slurmd has nothing to wait for), then the daemons by PID
    if [ -n "${SLURM_CONF:-}" ] && [ -n "${CTLD_PID:-}" ]; then
        scancel --quiet --user=root >/dev/null 2>&1 || true
    fi
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do
        for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$p" 2>/dev/null
    done
}
cleanup() {
    stop_all
    [ -n "${KVLAB_SLURM_KEEP:-}" ] && echo "e2e_slurm: kept $TMP" || rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# munge: a private key and socket, munged as the munge user
# (munged insists: the key private to it, the socket's folder open to all)
mkdir -p "$TMP/munge" "$TMP/munge-run"
dd if=/dev/urandom of="$TMP/munge/munge.key" bs=1024 count=1 2>/dev/null
chown -R munge:munge "$TMP/munge" "$TMP/munge-run"
chmod 700 "$TMP/munge"
chmod 755 "$TMP/munge-run"
chmod 400 "$TMP/munge/munge.key"
SOCK=$TMP/munge-run/munge.socket
runuser -u munge -- munged --foreground --key-file="$TMP/munge/munge.key" \
    --socket="$SOCK" --pid-file="$TMP/munge-run/munged.pid" \
    --log-file="$TMP/munge/munged.log" --seed-file="$TMP/munge/munged.seed" \
    >"$TMP/munged.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
[ -S "$SOCK" ] || die "munged did not start: $(tail -3 "$TMP/munged.out" 2>&1)"
MUNGE_PID=$(cat "$TMP/munge-run/munged.pid" 2>/dev/null)
[ -n "$MUNGE_PID" ] && PIDS+=("$MUNGE_PID")

# two free TCP ports for slurmctld and slurmd
port_free() { ! (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
PORTS=()
for p in $(shuf -i 20000-60000 -n 50); do
    port_free "$p" && PORTS+=("$p")
    [ "${#PORTS[@]}" = 2 ] && break
done
[ "${#PORTS[@]}" = 2 ] || die "no two free ports"

NODE=$(hostname -s)
mkdir -p "$TMP/state" "$TMP/spool"
export SLURM_CONF=$TMP/slurm.conf
cat >"$SLURM_CONF" <<CONF
ClusterName=kvlabtest
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=${PORTS[0]}
SlurmdPort=${PORTS[1]}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCK
SlurmUser=root
SlurmdUser=root
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
StateSaveLocation=$TMP/state
SlurmdSpoolDir=$TMP/spool
SlurmctldPidFile=$TMP/slurmctld.pid
SlurmdPidFile=$TMP/slurmd.pid
SlurmctldLogFile=$TMP/slurmctld.log
SlurmdLogFile=$TMP/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=2 Sockets=1 CoresPerSocket=2 ThreadsPerCore=1 State=UNKNOWN
PartitionName=test Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
CONF

slurmctld -D -c -f "$SLURM_CONF" >"$TMP/slurmctld.out" 2>&1 &
CTLD_PID=$!
PIDS+=("$CTLD_PID")
slurmd -D -f "$SLURM_CONF" -N "$NODE" >"$TMP/slurmd.out" 2>&1 &
PIDS+=($!)
state=""
for _ in $(seq 1 120); do
    state=$(sinfo -h -n "$NODE" -o %t 2>/dev/null | head -n 1)
    [ "$state" = idle ] && break
    sleep 0.5
done
if [ "$state" != idle ]; then
    echo "--- slurmctld.log"; tail -20 "$TMP/slurmctld.log" "$TMP/slurmctld.out" 2>/dev/null
    echo "--- slurmd.log"; tail -20 "$TMP/slurmd.log" "$TMP/slurmd.out" 2>/dev/null
    die "the node did not become idle (sinfo: '$state')"
fi
ok
echo "e2e_slurm: one-node Slurm up ($NODE, ports ${PORTS[*]}), $(sinfo -h -o '%P %D %c %t')"

# waits until none of the given jobs is in squeue (bounded); 0, or 1 on timeout
wait_jobs() {
    local t0
    t0=$(date +%s)
    while [ -n "$(squeue -h -j "$1" -o %i 2>/dev/null)" ]; do
        [ $(( $(date +%s) - t0 )) -ge "$WAIT_S" ] && return 1
        sleep 1
    done
    return 0
}

# ---------------------------------------------------------------- 1. a sharded sweep
SWEEP=(--layers 2 --dim 64 --heads 4 --kv-heads 2 --hidden 128 --vocab 64 --window 96
       --group 8 --residual 8 --strategies none,dynamic,sliding,quantized-int8
       --seq-lens 64,128,256 --reps 3 --warmup 1 --no-roofline)
EXACT="strategy layers dim heads kv_heads head_dim hidden batch window bits group residual \
threads seq_len reps flops_step attn_flops_step bytes_step cache_bytes copy_bytes_step \
label seq_len_lo seq_len_hi gemm_flops_step attn_bytes_step"
rows_of() { # rows_of FILE: "exact columns" per row, in file order
    awk -F, -v want="$EXACT" '
        /^#/ { next }
        !h { for (i = 1; i <= NF; i++) col[$i] = i; n = split(want, w, " "); h = 1; next }
        { line = ""; for (k = 1; k <= n; k++) line = line (k > 1 ? "|" : "") $(col[w[k]]); print line }' "$1"
}

"$KVLAB" sweep "${SWEEP[@]}" --threads 2 --quiet --out "$TMP/whole.csv" 2>"$TMP/err" ||
    die "the unsharded sweep failed: $(cat "$TMP/err")"

run_submit() { # run_submit DIR: `make bench-slurm` with its outputs under DIR
    make --no-print-directory -C "$ROOT" bench-slurm CLI="$KVLAB" SHARDS=4 SLURM_CPUS=2 \
        SHARD_ARGS="${SWEEP[*]} --quiet" SHARD_DIR="$1/shards" SLURM_MERGED="$1/merged.csv" \
        SLURM_PLOTS="$1/plots"
}
R1=$TMP/run1
mkdir -p "$R1"
t0=$(date +%s)
run_submit "$R1" >"$R1/submit.out" 2>&1
rc=$?; check "make bench-slurm exits 0 ($(tail -c 300 "$R1/submit.out"))" test "$rc" = 0
cat "$R1/submit.out"
read -r _ _ SWEEP_ID MERGE_ID <<<"$(grep '^bench-slurm: jobs ' "$R1/submit.out")"
[ -n "${MERGE_ID:-}" ] || die "no job ids in submit.sh's output"
check "submit.sh names the follow command" grep -q "squeue -j $SWEEP_ID,$MERGE_ID" "$R1/submit.out"
check "submit.sh says where a failed task's log is" \
    grep -q "if task I fails, its log is $R1/shards/logs/sweep-${SWEEP_ID}_I.log" "$R1/submit.out"
wait_jobs "$SWEEP_ID,$MERGE_ID" || bad "jobs $SWEEP_ID, $MERGE_ID still queued after $WAIT_S s"
echo "e2e_slurm: 4 shards and the merge ran in $(( $(date +%s) - t0 )) s"
for i in 1 2 3 4; do
    log=$R1/shards/logs/sweep-${SWEEP_ID}_$i.log
    check "task $i wrote its log" test -s "$log"
    check "task $i ran shard $i/4 on 2 threads" grep -q "kvlab shard $i/4: .* 2 threads" "$log"
    f=$R1/shards/shard-$i.csv
    check "shard $i: shard-$i.csv with shard=$i/4" grep -qx "# shard=$i/4" "$f"
    check "shard $i: threads = --cpus-per-task" grep -qx "# threads=2" "$f"
    check "shard $i: complete (partial=0)" grep -qx "# partial=0" "$f"
done
check "the merge job wrote its log" test -s "$R1/shards/logs/merge-$MERGE_ID.log"
check "the merge job wrote the merged CSV" test -s "$R1/merged.csv"
rows_of "$TMP/whole.csv" >"$TMP/whole.rows"
rows_of "$R1/merged.csv" >"$R1/merged.rows"
check "the unsharded sweep has 12 rows" test "$(wc -l <"$TMP/whole.rows")" = 12
check "merged on Slurm = unsharded: same keys, order and exact columns" \
    cmp -s "$TMP/whole.rows" "$R1/merged.rows"
cmp -s "$TMP/whole.rows" "$R1/merged.rows" || diff "$TMP/whole.rows" "$R1/merged.rows" | head -5
"$KVLAB" compare "$TMP/whole.csv" "$R1/merged.csv" --metric cache_bytes --threshold 0 >"$TMP/cmp" 2>&1
check "compare joins all 12 rows, cache bytes equal" \
    grep -q "summary: 12 compared, 0 regressed, 0 improved" "$TMP/cmp"
if command -v gnuplot >/dev/null 2>&1; then
    check "the merge job drew the plots" test -s "$R1/plots/latency.png"
fi
echo "e2e_slurm: merged vs unsharded (key|exact columns), first rows:"
paste -d'\n' <(head -n 3 "$TMP/whole.rows" | sed 's/^/  unsharded  /') \
             <(head -n 3 "$R1/merged.rows" | sed 's/^/  merged     /')
grep 'shard balance\|predicted' "$R1/shards/logs/merge-$MERGE_ID.log" | sed 's/^/  /'

# ---------------------------------------------------------------- 2. a failing task
R2=$TMP/run2
mkdir -p "$R2/shards/shard-3.csv" # shard 3's output is a directory: kvlab refuses it
run_submit "$R2" >"$R2/submit.out" 2>&1
check "second submit exits 0" test $? = 0
read -r _ _ SWEEP2 MERGE2 <<<"$(grep '^bench-slurm: jobs ' "$R2/submit.out")"
[ -n "${MERGE2:-}" ] || die "no job ids in the second submit's output"
wait_jobs "$SWEEP2,$MERGE2" || bad "jobs $SWEEP2, $MERGE2 still queued after $WAIT_S s"
log3=$R2/shards/logs/sweep-${SWEEP2}_3.log
check "the failed task's log is where submit.sh said" grep -q "sweep-${SWEEP2}_I.log" "$R2/submit.out"
check "the failed task's log holds kvlab's error" grep -q "kvlab: sweep: --out .*: is a directory" "$log3"
check "the other tasks still ran" test -s "$R2/shards/shard-4.csv"
check "the merge job did not run (afterok)" test ! -e "$R2/merged.csv"
check "... and left no log" test ! -e "$R2/shards/logs/merge-$MERGE2.log"

# ---------------------------------------------------------------- teardown
stop_all
left=0
for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && left=$((left + 1)); done
check "every daemon stopped ($left left)" test "$left" = 0
PIDS=()

if [ "$fail" != 0 ]; then # what the daemons said, for the CI log
    for f in slurmctld.log slurmd.log; do
        echo "--- $f (last 25 lines)"; tail -n 25 "$TMP/$f" 2>/dev/null
    done
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
