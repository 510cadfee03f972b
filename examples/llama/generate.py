#!/usr/bin/env python3
"""Writes a Llama-style decoder with a KV cache as a maxc model (docs/model-format.md).

    examples/llama/generate.py [--layers N] [--d-model D] [--heads H]
                               [--kv-heads K] [--ff F] [--vocab V] [-o PATH]

The model reads tokens i64 [1, "seq"] — the tokens not yet in the cache —
and returns logits f32 [1, "seq", V]. Each layer keeps its keys and values
as model state: buffers k_cache_i / v_cache_i ["max_context", K, D/H] that a
run appends "seq" rows to, at row "past" (the tokens already seen), in
place. So a prefill is a run with the whole prompt, and a decode step a run
with one token; the compiled artifact's NAME_state_create(max_context) /
NAME_step(state, ...) keep the cache between calls (docs/ONNX.md, "Model
state").

Each block: RMSNorm, rotary position embeddings (rotate-half) at positions
past..past+seq-1, grouped-query causal attention (H query heads read K k/v
heads, in place: no repeated keys), an output projection, RMSNorm and a
SwiGLU MLP. The N blocks are one module "Block" marked as a subgraph, so
the traced graph holds one Block definition called N times, each call with
its own weights and cache buffers. `maxc init-weights` creates the weights.

Only the Python standard library is used.
"""

import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from model_json import dump  # noqa: E402


def build_model(layers, d_model, heads, kv_heads, ff, vocab):
    if min(layers, d_model, heads, kv_heads, ff, vocab) < 1:
        raise ValueError("every size must be positive")
    if d_model % heads:
        raise ValueError("--d-model (%d) must be divisible by --heads (%d)" % (d_model, heads))
    if heads % kv_heads:
        raise ValueError("--heads (%d) must be divisible by --kv-heads (%d)" % (heads, kv_heads))
    hd = d_model // heads
    if hd % 2:
        raise ValueError("the head dim (%d) must be even for rotary embeddings" % hd)
    half = hd // 2
    kv_dim = kv_heads * hd

    modules = {
        "Embedding": {
            "args": ["ids"],
            "options": {"num": vocab, "dim": d_model},
            "params": {"weight": {"shape": ["$num", "$dim"], "init": "normal:1.0"}},
            "body": [{"y": ["embedding", "@weight", "ids"]}],
            "return": "y",
        },
        "RMSNorm": {
            "args": ["x"],
            "options": {"dim": d_model},
            "params": {"weight": {"shape": ["$dim"], "init": "ones"}},
            "body": [{"y": ["rms_norm", "x", "@weight", {"eps": 1e-05}]}],
            "return": "y",
        },
        "Linear": {
            "args": ["x"],
            "options": {"in": d_model, "out": d_model},
            "params": {"weight": ["$out", "$in"]},
            "body": [{"y": ["linear", "x", "@weight"]}],
            "return": "y",
        },
        # Rotate-half rotary embedding of x [seq, heads, hd] with cos/sin
        # [seq, 1, hd/2] (the positions' angles).
        "Rope": {
            "args": ["x", "cos", "sin"],
            "options": {"half": half},
            "body": [
                {"x1,x2": ["split", "x", {"sizes": ["$half", "$half"], "axis": -1}]},
                {"a": ["mul", "x1", "cos"]},
                {"b": ["mul", "x2", "sin"]},
                {"r1": ["sub", "a", "b"]},
                {"c": ["mul", "x2", "cos"]},
                {"d": ["mul", "x1", "sin"]},
                {"r2": ["add", "c", "d"]},
                {"y": ["concat", "r1", "r2", {"axis": -1}]},
            ],
            "return": "y",
        },
        # x [1, seq, d] -> [1, seq, d]; appends this step's keys and values
        # to the layer's cache (rows past..past+seq-1) and attends to all
        # past+seq rows.
        "Block": {
            "subgraph": True,
            "args": ["x", "k_cache", "v_cache", "cos", "sin", "mask"],
            "options": {"d": d_model, "kvd": kv_dim, "ff": ff, "heads": heads, "kvh": kv_heads, "hd": hd,
                        "groups": heads // kv_heads, "scale": 1.0 / math.sqrt(hd)},
            "body": [
                {"h": ["call", "RMSNorm", "x", {"instance": "attention_norm", "dim": "$d"}]},
                {"q": ["call", "Linear", "h", {"instance": "attention.wq", "in": "$d", "out": "$d"}]},
                {"k": ["call", "Linear", "h", {"instance": "attention.wk", "in": "$d", "out": "$kvd"}]},
                {"v": ["call", "Linear", "h", {"instance": "attention.wv", "in": "$d", "out": "$kvd"}]},
                {"q": ["reshape", "q", {"shape": ["seq", "$heads", "$hd"]}]},
                {"k": ["reshape", "k", {"shape": ["seq", "$kvh", "$hd"]}]},
                {"v": ["reshape", "v", {"shape": ["seq", "$kvh", "$hd"]}]},
                {"q": ["call", "Rope", "q", "cos", "sin", {"half": half}]},
                {"k": ["call", "Rope", "k", "cos", "sin", {"half": half}]},
                {"keys": ["buffer_append", "k_cache", "k", {"offset": ["past"]}]},
                {"values": ["buffer_append", "v_cache", "v", {"offset": ["past"]}]},
                {"q": ["transpose", "q", {"perm": [1, 0, 2]}]},
                {"keys": ["transpose", "keys", {"perm": [1, 0, 2]}]},
                {"values": ["transpose", "values", {"perm": [1, 0, 2]}]},
                {"o": ["attention", "q", "keys", "values", "mask", {"scale": "$scale", "kv_groups": "$groups", "fill": -1e9}]},
                {"o": ["transpose", "o", {"perm": [1, 0, 2]}]},
                {"o": ["reshape", "o", {"shape": [1, "seq", "$d"]}]},
                {"o": ["call", "Linear", "o", {"instance": "attention.wo", "in": "$d", "out": "$d"}]},
                {"x": ["add", "x", "o"]},
                {"h": ["call", "RMSNorm", "x", {"instance": "ffn_norm", "dim": "$d"}]},
                {"g": ["call", "Linear", "h", {"instance": "feed_forward.w1", "in": "$d", "out": "$ff"}]},
                {"u": ["call", "Linear", "h", {"instance": "feed_forward.w3", "in": "$d", "out": "$ff"}]},
                {"g": ["silu", "g"]},
                {"g": ["mul", "g", "u"]},
                {"f": ["call", "Linear", "g", {"instance": "feed_forward.w2", "in": "$ff", "out": "$d"}]},
                {"y": ["add", "x", "f"]},
            ],
            "return": "y",
        },
    }

    main = [
        {"x": ["call", "Embedding", "tokens", {"instance": "tok_embeddings"}]},
        # Positions past..past+seq-1 and their rotary angles pos * 10000^(-2i/hd).
        {"past": ["dim_values", {"dims": ["past"], "scalar": True}]},
        {"pos": ["iota", {"shape": ["seq"], "axis": 0, "dtype": "i64"}]},
        {"pos": ["add", "pos", "past"]},
        {"pos": ["cast", "pos", {"dtype": "f32"}]},
        {"pos": ["reshape", "pos", {"shape": ["seq", 1]}]},
        {"i": ["iota", {"shape": [half], "axis": 0, "dtype": "f32"}]},
        {"inv_freq": ["mul", "i", -2.0 * math.log(10000.0) / hd]},
        {"inv_freq": ["exp", "inv_freq"]},
        {"angles": ["mul", "pos", "inv_freq"]},
        {"angles": ["reshape", "angles", {"shape": ["seq", 1, half]}]},
        {"cos": ["cos", "angles"]},
        {"sin": ["sin", "angles"]},
        # Query row r (position past + r) sees cache rows 0..past+r.
        {"rows": ["iota", {"shape": ["seq", "past+seq"], "axis": 0, "dtype": "i64"}]},
        {"rows": ["add", "rows", "past"]},
        {"cols": ["iota", {"shape": ["seq", "past+seq"], "axis": 1, "dtype": "i64"}]},
        {"mask": ["ge", "rows", "cols"]},
    ]
    for i in range(layers):
        main.append({"x": ["call", "Block", "x", "k_cache_%d" % i, "v_cache_%d" % i, "cos", "sin", "mask",
                           {"instance": "layers.%d" % i}]})
    main += [
        {"x": ["call", "RMSNorm", "x", {"instance": "norm"}]},
        {"logits": ["call", "Linear", "x", {"instance": "output", "out": vocab}]},
    ]

    buffers = []
    for i in range(layers):
        buffers += ["k_cache_%d" % i, "v_cache_%d" % i]
    inputs = [{"name": "tokens", "dtype": "i64", "shape": [1, "seq"]}]
    inputs += [{"name": b, "dtype": "f32", "shape": ["max_context", kv_heads, hd]} for b in buffers]
    return {
        "maxc": 1,
        "name": "llama",
        "description": "A Llama-style decoder (%d layers, d %d, %d heads, %d k/v heads, ff %d, vocab %d) with its "
                       "KV cache as model state; written by examples/llama/generate.py" %
                       (layers, d_model, heads, kv_heads, ff, vocab),
        "weights": "llama.safetensors",
        "inputs": inputs,
        "outputs": ["logits"],
        "state": {"buffers": buffers, "length": "past", "advance": "seq"},
        "modules": modules,
        "main": main,
    }


def param_count(layers, d_model, heads, kv_heads, ff, vocab):
    kv = d_model // heads * kv_heads
    block = 2 * d_model * d_model + 2 * d_model * kv + 3 * d_model * ff + 2 * d_model
    return 2 * vocab * d_model + layers * block + d_model


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4, help="decoder blocks (default 4)")
    parser.add_argument("--d-model", type=int, default=256, help="model width (default 256)")
    parser.add_argument("--heads", type=int, default=8, help="query heads (default 8)")
    parser.add_argument("--kv-heads", type=int, default=2, help="key/value heads (default 2)")
    parser.add_argument("--ff", type=int, default=704, help="SwiGLU hidden width (default 704)")
    parser.add_argument("--vocab", type=int, default=1024, help="vocabulary size (default 1024)")
    parser.add_argument("-o", "--output", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "model.json"),
                        help="output path (default: model.json next to this script)")
    args = parser.parse_args(argv)
    try:
        model = build_model(args.layers, args.d_model, args.heads, args.kv_heads, args.ff, args.vocab)
    except ValueError as e:
        parser.error(str(e))
    text = dump(model) + "\n"
    if args.output == "-":
        sys.stdout.write(text)
    else:
        with open(args.output, "w") as f:
            f.write(text)
        n = param_count(args.layers, args.d_model, args.heads, args.kv_heads, args.ff, args.vocab)
        print("wrote %s (%d layers, %d parameters)" % (args.output, args.layers, n), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
