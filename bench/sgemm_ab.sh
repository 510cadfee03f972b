#!/usr/bin/env bash
# Before/after SGEMM: two maxc binaries' kernels, each timed against
# OpenBLAS in the same process (bench/sgemm_bench.c), runs alternating
# A, B, A, B... so that both see the same machine load. Not a test.
#   bench/sgemm_ab.sh BEFORE_MAXC AFTER_MAXC [ROUNDS]
# Environment: N ("1024 2048"), REPS (per run, 5), CPU (native).
set -euo pipefail
cd "$(dirname "$0")/.."
before=$1 after=$2 rounds=${3:-2}
work=build/bench/ab
mkdir -p "$work"
for n in ${N:-1024 2048}; do
  for side in before after; do
    mkdir -p "$work/$side"
    cat > "$work/$side/sgemm.json" <<JSON
{"maxc": 1, "name": "sgemm",
 "inputs": [{"name": "a", "dtype": "f32", "shape": [$n, $n]}, {"name": "b", "dtype": "f32", "shape": [$n, $n]}],
 "outputs": ["c"], "main": [{"c": ["matmul", "a", "b"]}]}
JSON
    maxc=$before; [ "$side" = after ] && maxc=$after
    "$maxc" compile "$work/$side/sgemm.json" -o "$work/$side/sgemm.o" -O3 --cpu "${CPU:-native}" -q
    cc -O2 -I"$work/$side" -Ibench bench/sgemm_bench.c "$work/$side/sgemm.o" -lopenblas -lpthread -lm -o "$work/$side/sgemm_bench_$n"
  done
  for r in $(seq "$rounds"); do
    for side in before after; do
      echo "$side: $(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$work/$side/sgemm_bench_$n" "${REPS:-5}" | tr '\n' '|')"
    done
  done
done
