#!/bin/bash
# Per-job wall times of a model (bench/job_profile.c), task functions named.
#   bench/job_profile.sh MODEL.onnx|model.json THREADS [maxc compile options...]
# e.g. MAXC=build/bin/maxc bench/job_profile.sh /tmp/maxc-onnx-models/resnet18.onnx 2 --dim batch=1
# Environment: MAXC (default build/bin/maxc), RUNS (30), CHRT (e.g. "chrt -f 10").
set -euo pipefail
model=$1 threads=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
maxc=${MAXC:-build/bin/maxc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$maxc" compile "$model" -O3 --cpu native --emit obj,header,bench-harness -o "$tmp/m.o" "$@" >/dev/null
bench_c=$(ls "$tmp"/*_bench.c)
name=$(basename "$bench_c" _bench.c)
cc -O2 -no-pie -DMODEL="$name" -o "$tmp/prof" "$tmp/${name}_bench.c" "$here/job_profile.c" \
  "$tmp/m.o" -lm -lpthread
PROF_THREADS=$threads ${CHRT:-} "$tmp/prof" -n "${RUNS:-30}" --warmup 3 --threads 1 >"$tmp/out.txt"
nm "$tmp/prof" >"$tmp/syms.txt"
python3 - "$tmp/syms.txt" "$tmp/out.txt" <<'PY'
import bisect, sys
syms = []
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) == 3:
        syms.append((int(f[0], 16), f[2]))
syms.sort()
addrs = [a for a, _ in syms]
for line in open(sys.argv[2]):
    f = line.split()
    if f and f[0] == "job" and len(f) > 2 and f[2].startswith("0x"):
        i = bisect.bisect_right(addrs, int(f[2], 16)) - 1
        line = line.rstrip() + "  " + (syms[i][1] if i >= 0 else "?") + "\n"
    sys.stdout.write(line)
PY
