#!/usr/bin/env bash
# examples/cmake-app against an installed maxc, and maxc_add_model's rebuild
# rules. Everything happens in a fresh temporary directory; the source tree
# is only read.
#
#   cmake_app_test.sh CMAKE NINJA BUILD_DIR SOURCE_DIR
#
# 1. cmake --install BUILD_DIR into a clean prefix.
# 2. Configure examples/cmake-app with Ninja against that prefix, pointing it
#    at copies of the mlp/cnn models and weights; build; run the program.
# 3. Rebuild rules (ninja -n): nothing to do after a build; touching the mlp
#    weights or model recompiles mlp and not cnn; touching the installed maxc
#    recompiles both; the depfile names the model and the weights.
# 4. Without WEIGHTS the weights file the model names is tracked through the
#    depfile alone.
set -euo pipefail

if [[ $# -ne 4 ]]; then
  echo "usage: $0 CMAKE NINJA BUILD_DIR SOURCE_DIR" >&2
  exit 2
fi
CMAKE=$1 NINJA=$2 BUILD_DIR=$3 SOURCE_DIR=$4
if [[ -z $NINJA || ! -x $NINJA ]]; then
  echo "SKIP: ninja not found" >&2
  exit 77
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/maxc-cmake-app.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
PREFIX=$TMP/prefix APP=$TMP/app MODELS=$TMP/models

step() { echo "== $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
# ninja -n's plan, one line per edge it would run.
plan() { "$NINJA" -C "$APP" -n | tee "$TMP/plan.txt"; }
expect_in_plan() { grep -qF -- "$1" "$TMP/plan.txt" || fail "ninja -n does not show '$1'"; }
expect_not_in_plan() { ! grep -qF -- "$1" "$TMP/plan.txt" || fail "ninja -n unexpectedly shows '$1'"; }
expect_no_work() {
  plan >/dev/null
  grep -q "no work to do" "$TMP/plan.txt" || { cat "$TMP/plan.txt"; fail "$1: expected nothing to do"; }
}
build_and_run() {
  "$CMAKE" --build "$APP" -j1
  "$APP/cmake_app" | tee "$TMP/run.txt"
  grep -q "^cmake_app: OK$" "$TMP/run.txt" || fail "cmake_app did not print OK"
  grep -q "^mlp\[1\]:" "$TMP/run.txt" && grep -q "^cnn\[1\]:" "$TMP/run.txt" || fail "missing logits"
}
# A later mtime than anything built so far, even on coarse filesystems.
bump() { sleep 1; touch "$@"; }

step "install maxc into a clean prefix"
"$CMAKE" --install "$BUILD_DIR" --prefix "$PREFIX"
for f in bin/maxc include/maxc/maxc.h lib/cmake/maxc/maxcConfig.cmake \
         lib/cmake/maxc/maxcConfigVersion.cmake lib/cmake/maxc/maxcTargets.cmake \
         lib/cmake/maxc/MaxcAddModel.cmake; do
  [[ -e $PREFIX/$f ]] || fail "not installed: $f"
done
"$PREFIX/bin/maxc" --version

step "copy the example models and weights"
for m in mlp cnn; do
  mkdir -p "$MODELS/$m"
  cp "$SOURCE_DIR/examples/$m/model.json" "$SOURCE_DIR/examples/$m/$m.safetensors" "$MODELS/$m/"
done

step "configure examples/cmake-app against the install"
"$CMAKE" -S "$SOURCE_DIR/examples/cmake-app" -B "$APP" -G Ninja -DCMAKE_MAKE_PROGRAM="$NINJA" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
  -DMLP_MODEL="$MODELS/mlp/model.json" -DMLP_WEIGHTS="$MODELS/mlp/mlp.safetensors" \
  -DCNN_MODEL="$MODELS/cnn/model.json" -DCNN_WEIGHTS="$MODELS/cnn/cnn.safetensors"
found=$(sed -n 's/^maxc_DIR:PATH=//p' "$APP/CMakeCache.txt")
[[ $found == "$PREFIX/lib/cmake/maxc" ]] || fail "found maxc in '$found', not in the clean prefix"

step "build and run"
build_and_run
for m in mlp cnn; do
  d=$APP/maxc_models/${m}_model
  for f in $m.o $m.h $m.manifest.json; do [[ -s $d/$f ]] || fail "missing $d/$f"; done
done

step "depfile lists the model and the weights"
dep=$APP/maxc_models/mlp_model/mlp.o.d
cat "$dep"
grep -qF "$MODELS/mlp/model.json" "$dep" || fail "depfile lacks the model"
grep -qF "$MODELS/mlp/mlp.safetensors" "$dep" || fail "depfile lacks the weights"
grep -qF "$APP/maxc_models/mlp_model/mlp.o:" "$dep" || fail "depfile target is not the object"

step "up to date after a build"
expect_no_work "after the first build"

step "touching the mlp weights recompiles mlp, not cnn"
bump "$MODELS/mlp/mlp.safetensors"
plan
expect_in_plan "maxc: compiling model mlp"
expect_not_in_plan "maxc: compiling model cnn"
expect_in_plan "Linking C executable cmake_app"
build_and_run
expect_no_work "after rebuilding mlp"

step "touching the cnn model recompiles cnn, not mlp"
bump "$MODELS/cnn/model.json"
plan
expect_in_plan "maxc: compiling model cnn"
expect_not_in_plan "maxc: compiling model mlp"
"$CMAKE" --build "$APP" -j1
expect_no_work "after rebuilding cnn"

step "a new maxc recompiles both"
bump "$PREFIX/bin/maxc"
plan
expect_in_plan "maxc: compiling model mlp"
expect_in_plan "maxc: compiling model cnn"
build_and_run
expect_no_work "after rebuilding both"

step "without WEIGHTS, the weights the model names are tracked through the depfile"
"$CMAKE" -S "$SOURCE_DIR/examples/cmake-app" -B "$APP" -DCNN_WEIGHTS=
build_and_run # the command line changed: cnn is recompiled
grep -qF "$MODELS/cnn/cnn.safetensors" "$APP/maxc_models/cnn_model/cnn.o.d" || fail "cnn depfile lacks the weights"
expect_no_work "after reconfiguring"
bump "$MODELS/cnn/cnn.safetensors"
plan
expect_in_plan "maxc: compiling model cnn"
expect_not_in_plan "maxc: compiling model mlp"

step "an ONNX model through maxc_add_model (external data tracked by the depfile)"
if /usr/bin/python3 -c "import onnx" 2>/dev/null; then
  ONNXAPP=$TMP/onnxapp
  mkdir -p "$ONNXAPP/src" "$MODELS/onnx"
  /usr/bin/python3 - "$MODELS/onnx" <<'PY'
import struct, sys, onnx
from onnx import TensorProto, helper
d = sys.argv[1]
w = helper.make_tensor("w", TensorProto.FLOAT, [2, 3], struct.pack("<6f", 1, -2, 3, -4, 5, -6), raw=True)
g = helper.make_graph([helper.make_node("Add", ["input.1", "w"], ["s"], name="/l/Add"),
                       helper.make_node("Relu", ["s"], ["/out/y"], name="/l/Relu")], "relu_add",
                      [helper.make_tensor_value_info("input.1", TensorProto.FLOAT, [2, 3])],
                      [helper.make_tensor_value_info("/out/y", TensorProto.FLOAT, [2, 3])], [w])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
onnx.save(m, d + "/relu.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
          location="relu.data", size_threshold=0)
PY
  cat > "$ONNXAPP/src/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.20)
project(onnx_app C)
find_package(maxc CONFIG REQUIRED)
maxc_add_model(relu_model MODEL "$MODELS/onnx/relu.onnx" NAME relu)
add_executable(onnx_app main.c)
target_link_libraries(onnx_app PRIVATE relu_model)
CMAKE
  cat > "$ONNXAPP/src/main.c" <<'C'
#include "relu.h"
#include <stdio.h>
int main(void) {
  const float x[6] = {0, 0, 0, 0, 0, 0};
  float y[6];
  int i, bad = 0;
  int32_t status = relu_run(x, y, NULL);
  for (i = 0; i < 6; ++i)
    bad |= y[i] != (i % 2 ? 0.0f : (float)(i + 1));
  printf("onnx_app: %s\n", status == RELU_OK && !bad ? "OK" : "FAIL");
  return status == RELU_OK && !bad ? 0 : 1;
}
C
  "$CMAKE" -S "$ONNXAPP/src" -B "$ONNXAPP/build" -G Ninja -DCMAKE_MAKE_PROGRAM="$NINJA" \
    -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
  "$CMAKE" --build "$ONNXAPP/build" -j1
  "$ONNXAPP/build/onnx_app" | tee "$TMP/onnx_run.txt"
  grep -q "^onnx_app: OK$" "$TMP/onnx_run.txt" || fail "onnx_app did not print OK"
  grep -qF "$MODELS/onnx/relu.data" "$ONNXAPP/build/maxc_models/relu_model/relu.o.d" || fail "depfile lacks the external data"
  bump "$MODELS/onnx/relu.data"
  "$NINJA" -C "$ONNXAPP/build" -n > "$TMP/onnx_plan.txt" # (not piped into grep -q: pipefail + SIGPIPE)
  grep -qF "maxc: compiling model relu" "$TMP/onnx_plan.txt" || fail "touching the external data does not recompile"
else
  echo "SKIP: no python3-onnx (the ONNX step)"
fi

echo "cmake-app: OK"
