#!/usr/bin/env bash
# The layering check (cmake/MaxcCheckLayers.cmake) passes on the tree and
# fails on a copy of its layer table with one upward include added
# (lib/IR including the op registry).
#   layering_test.sh CMAKE SOURCE_DIR
set -euo pipefail
CMAKE=$1 SOURCE_DIR=$2
"$CMAKE" -DSOURCE_DIR="$SOURCE_DIR" -P "$SOURCE_DIR/cmake/MaxcCheckLayers.cmake"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/maxc-layering.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/lib/IR" "$TMP/lib/Ops"
printf '#include "maxc/IR/Graph.h"\n#include "maxc/Support/Error.h"\n' > "$TMP/lib/Ops/Fine.cpp"
"$CMAKE" -DSOURCE_DIR="$TMP" -P "$SOURCE_DIR/cmake/MaxcCheckLayers.cmake"
printf '#include "maxc/Ops/OpRegistry.h"\n' > "$TMP/lib/IR/Upward.cpp"
if out=$("$CMAKE" -DSOURCE_DIR="$TMP" -P "$SOURCE_DIR/cmake/MaxcCheckLayers.cmake" 2>&1); then
  echo "FAIL: an upward include (IR -> Ops) passed the layering check" >&2
  exit 1
fi
grep -q "lib/IR/Upward.cpp: IR may not use Ops" <<<"$out" || { echo "FAIL: unexpected message: $out" >&2; exit 1; }
# A backend-neutral Codegen file including a backend folder fails too.
rm "$TMP/lib/IR/Upward.cpp"
mkdir -p "$TMP/lib/Codegen/Cpu"
printf '#include "Cpu/KernelEmitter.h"\n' > "$TMP/lib/Codegen/Cpu/Fine.cpp"
"$CMAKE" -DSOURCE_DIR="$TMP" -P "$SOURCE_DIR/cmake/MaxcCheckLayers.cmake"
printf '#include "Cpu/KernelEmitter.h"\n' > "$TMP/lib/Codegen/Neutral.cpp"
if out=$("$CMAKE" -DSOURCE_DIR="$TMP" -P "$SOURCE_DIR/cmake/MaxcCheckLayers.cmake" 2>&1); then
  echo "FAIL: a neutral Codegen file including Cpu/ passed the layering check" >&2
  exit 1
fi
grep -q "lib/Codegen/Neutral.cpp: a backend-neutral Codegen file" <<<"$out" ||
  { echo "FAIL: unexpected message: $out" >&2; exit 1; }
echo "PASS"
