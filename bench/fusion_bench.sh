#!/usr/bin/env bash
# Before/after latency of one example model between two maxc binaries (the
# "Fusion" section of docs/PERFORMANCE.md): both compile the model (same
# --cpu), bench/model_bench.c serves each, and timing blocks alternate
# between them (which one goes first alternates too). Prints the median of
# each side's block medians and the ratio before/after (> 1: after is faster).
# Indicative on a shared machine; not a test.
#
#   bench/fusion_bench.sh BEFORE_MAXC AFTER_MAXC [MODEL=gpt] [ROUNDS=9] [ITERS=20]
# Environment: CPU (maxc --cpu, native).
set -euo pipefail
cd "$(dirname "$0")/.."
before=$1 after=$2 model=${3:-gpt} rounds=${4:-9} iters=${5:-20}
work=build/bench/fusion
mkdir -p "$work"
for side in before after; do
  bin=${!side}
  mkdir -p "$work/$side"
  "$bin" compile "examples/$model/model.json" -o "$work/$side/$model.o" --emit obj,header,manifest -O3 --cpu "${CPU:-native}" -q
  cc -O2 -DMODEL="$model" -include "$work/$side/$model.h" -Ibench bench/model_bench.c "$work/$side/$model.o" -o "$work/$side/server" -lm -lpthread
  grep -o '"sub.Block: [0-9]* kernels"' "$work/$side/$model.manifest.json" 2>/dev/null | sed "s/^/$side: /" || true
done
# Input: batch 1 of tokens 0..127 (i64).
/usr/bin/python3 -c "import struct,sys; sys.stdout.buffer.write(struct.pack('<128q', *[(i*7)%1024 for i in range(128)]))" >"$work/in.bin"
out=$(/usr/bin/python3 - "$work" "$rounds" "$iters" <<'PY'
import statistics, subprocess, sys
work, rounds, iters = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
procs = {s: subprocess.Popen([f"{work}/{s}/server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for s in ("before", "after")}
def block(s, outfile="-"):
    p = procs[s]
    p.stdin.write(f"{work}/in.bin 1 {128*1024} {iters} 3 {outfile}\n"); p.stdin.flush()
    line = p.stdout.readline().split()
    if not line or line[0] == "error": sys.exit(f"{s}: {' '.join(line)}")
    return statistics.median(float(x) for x in line)
block("before", f"{work}/before.out"); block("after", f"{work}/after.out")
med = {"before": [], "after": []}
for r in range(rounds):
    for s in (("before", "after") if r % 2 == 0 else ("after", "before")):
        med[s].append(block(s))
b, a = statistics.median(med["before"]), statistics.median(med["after"])
print(f"before {b:.3f} ms  after {a:.3f} ms  before/after {b/a:.2f}x  ({rounds} alternating blocks of {iters} runs)")
PY
)
echo "$out"
/usr/bin/python3 - "$work" <<'PY'
import array, sys
w = sys.argv[1]
b, a = array.array("f", open(f"{w}/before.out", "rb").read()), array.array("f", open(f"{w}/after.out", "rb").read())
d = max(abs(x - y) / (abs(x) + 1e-3) for x, y in zip(b, a))
print(f"outputs: max relative difference {d:.2e}")
PY
