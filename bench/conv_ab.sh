#!/bin/sh
# A/B of two maxc builds on one ONNX model, 1 thread, alternating:
# task-clock (perf stat) of the bench harness and its p50 / min latency.
#   bench/conv_ab.sh OLD_MAXC NEW_MAXC [model.onnx] [rounds] [runs]
# e.g. bench/conv_ab.sh /work/main/build/bin/maxc build/bin/maxc /tmp/onnxm/resnet18.onnx 5 30
set -eu
old=$(realpath "$1") new=$(realpath "$2") model=${3:-/tmp/onnxm/resnet18.onnx} rounds=${4:-5} runs=${5:-30}
dir=$(mktemp -d)
for v in old new; do
  eval maxc=\$$v
  mkdir -p "$dir/$v"
  (cd "$dir/$v" && "$maxc" compile "$model" -o r.o --name r -O3 --cpu native --emit obj,header,bench-harness -q &&
     cc -O2 r_bench.c r.o -lm -lpthread -o bench)
done
i=0
while [ $i -lt "$rounds" ]; do
  for v in old new; do
    perf stat -e task-clock -x, "$dir/$v/bench" -n "$runs" 2>&1 |
      awk -v v=$v -F, '/latency/{split($0,a," "); lat="p50 "a[4]" min "a[10]} /task-clock/{tc=$1} END{print v, "task-clock ms", tc, lat}'
  done
  i=$((i + 1))
done
rm -rf "$dir"
