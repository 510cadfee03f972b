#!/usr/bin/env bash
# Checks that a change to maxc left its artifacts byte-identical: compiles the
# example models (MLP, GPT, CNN) and any ONNX files given, for the CPU (and the
# GPT for amdgpu), with a reference maxc and a candidate maxc, and compares
# every output file (object, header, manifest, weights) byte for byte.
#
#   bench/objects_identical.sh REF_MAXC NEW_MAXC [model.onnx ...]
#   bench/objects_identical.sh --save DIR MAXC [model.onnx ...]   # keep REF outputs in DIR
#   bench/objects_identical.sh --against DIR MAXC [model.onnx ...] # compare with a saved DIR
#
# Exit 0 when every artifact is identical; 1 with the differing files listed.
# A restructure that is meant to change no behaviour must pass this (the
# foundations issue's bar: the GPT, ResNet-18 and MLP objects byte-identical).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)

mode=pair
case "${1:-}" in
  --save) mode=save; dir=$2; shift 2 ;;
  --against) mode=against; dir=$2; shift 2 ;;
  -h|--help|"") sed -n '2,13p' "$0"; exit 0 ;;
esac

build_all() { # maxc outdir onnx...
  local maxc=$1 out=$2; shift 2
  mkdir -p "$out"
  local ex
  for ex in mlp gpt cnn; do
    local d="$out/$ex"
    mkdir -p "$d"
    cp "$here/examples/$ex/model.json" "$d/model.json"
    "$maxc" -q init-weights "$d/model.json" -o "$d/$ex.safetensors" --seed 1
    mkdir -p "$d/embedded" "$d/external"
    "$maxc" -q compile "$d/model.json" -o "$d/embedded/$ex.o" -j 2
    "$maxc" -q compile "$d/model.json" -o "$d/external/$ex.o" --weights-mode external -j 2
  done
  mkdir -p "$out/gpt/gpu"
  "$maxc" -q compile "$out/gpt/model.json" -o "$out/gpt/gpu/gpt.o" --gpu gfx90a -j 2
  local m
  for m in "$@"; do
    local base
    base=$(basename "$m" .onnx)
    mkdir -p "$out/onnx"
    "$maxc" -q compile "$m" -o "$out/onnx/$base.o" -j 2
  done
  # The manifests name the compiler's own build; that may differ.
  find "$out" -name '*.manifest.json' -exec sed -i -E 's/"(maxc_version|compiler|build)": *"[^"]*"/"\1": ""/g' {} +
  rm -f "$out"/*/*.safetensors
}

compare() { # a b
  local bad=0 f
  while IFS= read -r f; do
    if ! cmp -s "$1/$f" "$2/$f"; then
      echo "DIFFERS: $f"
      bad=1
    fi
  done < <(cd "$1" && find . -type f | sort)
  if [ "$(cd "$1" && find . -type f | sort)" != "$(cd "$2" && find . -type f | sort)" ]; then
    echo "DIFFERS: the sets of files"
    bad=1
  fi
  [ "$bad" -eq 0 ] && echo "objects_identical: $(cd "$1" && find . -type f | wc -l) files identical"
  return "$bad"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
case "$mode" in
  save)
    rm -rf "$dir"
    build_all "$1" "$dir" "${@:2}"
    for m in "${@:2}"; do realpath "$m"; done > "$dir/onnx-models.txt"
    echo "saved to $dir" ;;
  against)
    models=("${@:2}")
    # Without model arguments, the ONNX models the saved directory was made with.
    if [ ${#models[@]} -eq 0 ] && [ -f "$dir/onnx-models.txt" ]; then mapfile -t models < "$dir/onnx-models.txt"; fi
    build_all "$1" "$tmp/new" "${models[@]}"
    [ -f "$dir/onnx-models.txt" ] && cp "$dir/onnx-models.txt" "$tmp/new/"
    compare "$dir" "$tmp/new" ;;
  pair) build_all "$1" "$tmp/ref" "${@:3}"; build_all "$2" "$tmp/new" "${@:3}"; compare "$tmp/ref" "$tmp/new" ;;
esac
