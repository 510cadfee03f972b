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

echo "cmake-app: OK"
