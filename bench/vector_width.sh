#!/bin/bash
# Issue #12: the CPU kernels' vector width from the target. Compiles a model
# for --cpu CPU with two maxc binaries (before/after) and counts the
# instructions of one single-thread run of each bench harness under callgrind,
# then times alternating runs (task-clock). Indicative on a shared machine.
#   bench/vector_width.sh MAXC_BEFORE MAXC_AFTER MODEL [CPU=haswell]
# e.g. bench/vector_width.sh /tmp/maxc-base build/bin/maxc /tmp/onnxm/resnet18.onnx
set -euo pipefail
before=$1 after=$2 model=$3 cpu=${4:-haswell}
work=$(mktemp -d)
for v in before after; do
  bin=$before; [ $v = after ] && bin=$after
  (cd "$work" && "$bin" compile "$model" -o m-$v.o --name m -O3 --cpu "$cpu" --emit obj,header,bench-harness -q &&
     cc -O2 m_bench.c m-$v.o -lm -lpthread -o b-$v)
done
for v in before after; do
  valgrind --tool=callgrind --callgrind-out-file="$work/cg-$v.out" "$work/b-$v" -n 1 --warmup 0 --threads 1 >/dev/null 2>&1
  echo "$v: instructions $(grep -m1 '^summary:' "$work/cg-$v.out" | cut -d' ' -f2)"
done
for v in before after before after; do
  echo "$v: $(perf stat -e task-clock "$work/b-$v" -n 5 --warmup 1 --threads 1 2>&1 | grep -E 'task-clock' | awk '{print $1 " ms task-clock"}')"
done
rm -rf "$work"
