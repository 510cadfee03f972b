#!/usr/bin/env bash
# Before/after latency of the attention models between two maxc binaries
# (the "Fusion" section of docs/PERFORMANCE.md): the GPT example (causal,
# JSON spelling) and, if the file exists, a torch-exported BERT-shaped
# encoder (ONNX spelling; scripts/onnx-export-models writes it). Each side
# compiles with -O3 --cpu native and its generated bench harness
# (--emit bench-harness); runs alternate between the sides (which goes
# first alternates too) at 1 and 2 threads of the artifact's pool. Prints
# the median of each side's p50s and before/after (> 1: after is faster).
# Indicative on a shared machine; not a test.
#
#   bench/attention_bench.sh BEFORE_MAXC AFTER_MAXC [ROUNDS=5] [RUNS=100]
# Environment: BERT (the .onnx, /tmp/onnxm/bert.onnx), THREADS ("1 2"),
# MODELS (other models instead: "NAME FILE [MAXC OPTIONS]" entries separated
# by ';', e.g. "mlp64 examples/mlp/model.json --dim batch=64").
set -euo pipefail
cd "$(dirname "$0")/.."
before=$(realpath "$1") after=$(realpath "$2") rounds=${3:-5} runs=${4:-100}
bert=${BERT:-/tmp/onnxm/bert.onnx}
work=build/bench/attention
mkdir -p "$work"
models=("gpt examples/gpt/model.json")
[ -f "$bert" ] && models+=("bert $bert --dim batch=1 --dim seq=128")
[ -n "${MODELS:-}" ] && IFS=';' read -ra models <<<"$MODELS"
for entry in "${models[@]}"; do
  read -r name src dims <<<"$entry"
  src=$(realpath "$src")
  for side in before after; do
    bin=${!side}
    mkdir -p "$work/$side"
    (cd "$work/$side" && "$bin" compile "$src" -o "$name.o" --name "$name" -O3 --cpu native \
      --emit obj,header,bench-harness -q $dims &&
      cc -O2 "${name}_bench.c" "$name.o" -o "$name" -lm -lpthread)
  done
  for t in ${THREADS:-1 2}; do
    /usr/bin/python3 - "$work" "$name" "$t" "$rounds" "$runs" <<'PY'
import re, statistics, subprocess, sys
work, name, threads, rounds, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
p50 = {"before": [], "after": []}
for r in range(rounds):
    for s in (("before", "after") if r % 2 == 0 else ("after", "before")):
        out = subprocess.run([f"{work}/{s}/{name}", "-n", runs, "--threads", threads], capture_output=True, text=True, check=True).stdout
        p50[s].append(float(re.search(r"p50 ([0-9.]+)", out).group(1)))
b, a = statistics.median(p50["before"]), statistics.median(p50["after"])
print(f"{name} threads {threads}: before {b:.3f} ms  after {a:.3f} ms  before/after {b/a:.2f}x  ({rounds} alternating rounds of {runs} runs)")
PY
  done
done
