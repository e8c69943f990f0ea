#!/usr/bin/env bash
# callgrind_kernel.sh - instructions per attention call, counted by valgrind's
# callgrind, for a fixed set of decode and prefill shapes: a load-independent
# way to compare two builds of the kernel on a shared machine (wall time is
# not; see PROTOCOL.md).
#
#   bench/scripts/callgrind_kernel.sh KVLAB_BINARY [OUT_DIR]
#
# The binary must run under valgrind: build it for AVX2 at most, e.g.
#   make BUILD=build/avx2 ARCH=-march=x86-64-v3 build/avx2/kvlab
# For each shape it runs `kvlab kernel --threads 1 --no-ref --reps R` under
# callgrind and prints the inclusive instruction count (Ir) of kv_attn per
# call: the sum of the costs of every call to kv_attn divided by the number
# of calls (the setup, filling the cache, is outside kv_attn and not
# counted). One line per shape: mode, head_dim, heads/kv_heads, T, dtype,
# calls, Ir per call.
set -euo pipefail
bin=${1:?usage: bench/scripts/callgrind_kernel.sh KVLAB_BINARY [OUT_DIR]}
out=${2:-$(mktemp -d)}
mkdir -p "$out"
# shape: "mode head_dim heads kv_heads T dtype reps queries group"
shapes=(
  "decode 64 8 8 2048 f32 4 1 32"
  "decode 64 8 8 2048 int8 4 1 32"
  "decode 64 8 8 2048 int4 4 1 32"
  "decode 64 32 8 2048 f32 4 1 32"
  "decode 64 32 8 2048 int8 4 1 32"
  "decode 64 32 8 2048 int4 4 1 32"
  "decode 128 8 8 1024 f32 4 1 32"
  "decode 128 8 8 1024 int8 4 1 32"
  "decode 128 8 8 1024 int4 4 1 32"
  "decode 80 4 2 1000 int8 4 1 16"
  "prefill 64 8 8 1024 f32 2 256 32"
  "prefill 64 32 8 1024 int8 2 256 32"
)
printf '%-8s %8s %8s %6s %5s %6s %16s\n' mode head_dim heads T dtype calls Ir_per_call
for s in "${shapes[@]}"; do
  set -- $s
  f="$out/cg.$1.$2.$3.$4.$5.$6"
  valgrind --tool=callgrind --callgrind-out-file="$f" "$bin" kernel --threads 1 --no-ref \
    --head-dim "$2" --heads "$3" --kv-heads "$4" --seq-len "$5" --dtype "$6" \
    --reps "$7" --queries "$8" --group "$9" >/dev/null 2>"$f.log" || { cat "$f.log" >&2; exit 1; }
  /usr/bin/python3 - "$f" "$1" "$2" "$3/$4" "$5" "$6" <<'PY'
import re, sys
path, mode, hd, heads, T, dt = sys.argv[1:]
names, calls, cost = {}, 0, 0
pending = None
with open(path) as fh:
    for line in fh:
        m = re.match(r'cfn=\((\d+)\)(?: (.*))?', line)
        if m:
            if m.group(2):
                names[m.group(1)] = m.group(2).strip()
            pending = names.get(m.group(1)) == 'kv_attn'
            continue
        m = re.match(r'fn=\((\d+)\)(?: (.*))?', line)
        if m and m.group(2):
            names[m.group(1)] = m.group(2).strip()
        if pending and line.startswith('calls='):
            calls += int(line.split()[0].split('=')[1])
            pending = 'cost'
            continue
        if pending == 'cost':
            parts = line.split()
            cost += int(parts[1])
            pending = None
print('%-8s %8s %8s %6s %5s %6d %16.0f' % (mode, hd, heads, T, dt, calls, cost / max(calls, 1)))
PY
done
