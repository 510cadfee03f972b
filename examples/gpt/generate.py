#!/usr/bin/env python3
"""Writes a GPT-2-style decoder as a maxc model (docs/model-format.md, version 1).

    examples/gpt/generate.py [--layers N] [--seq S] [--d-model D] [--heads H]
                             [--vocab V] [-o PATH]

The model reads tokens i64 ["batch", S] and returns logits f32
["batch", S, V]. The N pre-LN transformer blocks are one module "Block"
marked as a subgraph and instantiated with `repeat` under the prefixes
h.0 ... h.{N-1}, so the traced graph holds a single Block definition and N
calls to it. Parameter names follow GPT-2 (wte, wpe, h.{i}.ln_1, h.{i}.attn,
h.{i}.ln_2, h.{i}.mlp, ln_f) plus an untied lm_head; `maxc init-weights`
creates them from the modules' `params` declarations.

Only the Python standard library is used.
"""

import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from model_json import dump  # noqa: E402


def build_model(layers, seq, d_model, heads, vocab):
    if layers < 1:
        raise ValueError("--layers must be at least 1")
    if seq < 1 or d_model < 1 or heads < 1 or vocab < 1:
        raise ValueError("--seq, --d-model, --heads and --vocab must be positive")
    if d_model % heads:
        raise ValueError("--d-model (%d) must be divisible by --heads (%d)" % (d_model, heads))
    head_dim = d_model // heads
    scale = 1.0 / math.sqrt(head_dim)

    modules = {
        # A lookup table [num, dim]; used for both token and position embeddings.
        "Embedding": {
            "args": ["ids"],
            "options": {"num": vocab, "dim": d_model},
            "params": {"weight": {"shape": ["$num", "$dim"], "init": "normal:0.02"}},
            "body": [{"y": ["embedding", "@weight", "ids"]}],
            "return": "y",
        },
        "LayerNorm": {
            "args": ["x"],
            "options": {"dim": d_model},
            "params": {
                "weight": {"shape": ["$dim"], "init": "ones"},
                "bias": {"shape": ["$dim"], "init": "zeros"},
            },
            "body": [{"y": ["layer_norm", "x", "@weight", "@bias", {"eps": 1e-5}]}],
            "return": "y",
        },
        "Linear": {
            "args": ["x"],
            "options": {"in": d_model, "out": d_model},
            "params": {
                "weight": ["$out", "$in"],
                "bias": {"shape": ["$out"], "init": "zeros"},
            },
            "body": [{"y": ["linear", "x", "@weight", "@bias"]}],
            "return": "y",
        },
        "LinearNoBias": {
            "args": ["x"],
            "options": {"in": d_model, "out": vocab},
            "params": {"weight": ["$out", "$in"]},
            "body": [{"y": ["linear", "x", "@weight"]}],
            "return": "y",
        },
        # Causal multi-head self-attention with a fused QKV projection.
        # x [batch, seq, d] -> [batch, seq, d]
        "Attention": {
            "args": ["x"],
            "options": {"d": d_model, "d3": 3 * d_model, "heads": heads, "hd": head_dim, "seq": seq},
            "body": [
                {"qkv": ["call", "Linear", "x", {"instance": "qkv", "in": "$d", "out": "$d3"}]},
                {"q,k,v": ["split", "qkv", {"sizes": ["$d", "$d", "$d"], "axis": -1}]},
                {"q": ["reshape", "q", {"shape": ["batch", "$seq", "$heads", "$hd"]}]},
                {"k": ["reshape", "k", {"shape": ["batch", "$seq", "$heads", "$hd"]}]},
                {"v": ["reshape", "v", {"shape": ["batch", "$seq", "$heads", "$hd"]}]},
                {"q": ["transpose", "q", {"perm": [0, 2, 1, 3]}]},
                {"k": ["transpose", "k", {"perm": [0, 2, 1, 3]}]},
                {"v": ["transpose", "v", {"perm": [0, 2, 1, 3]}]},
                {"scores": ["matmul", "q", "k", {"transpose_b": True}]},
                {"scores": ["mul", "scores", scale]},
                {"rows": ["iota", {"shape": ["$seq", "$seq"], "axis": 0, "dtype": "i64"}]},
                {"cols": ["iota", {"shape": ["$seq", "$seq"], "axis": 1, "dtype": "i64"}]},
                {"causal": ["ge", "rows", "cols"]},
                {"masked": ["full", {"value": -1e9, "dtype": "f32", "shape": []}]},
                {"scores": ["where", "causal", "scores", "masked"]},
                {"probs": ["softmax", "scores", {"axis": -1}]},
                {"o": ["matmul", "probs", "v"]},
                {"o": ["transpose", "o", {"perm": [0, 2, 1, 3]}]},
                {"o": ["reshape", "o", {"shape": ["batch", "$seq", "$d"]}]},
                {"y": ["call", "Linear", "o", {"instance": "proj", "in": "$d", "out": "$d"}]},
            ],
            "return": "y",
        },
        # Pre-LN transformer block: x + attn(ln_1(x)), then + mlp(ln_2(x)).
        "Block": {
            "subgraph": True,
            "args": ["x"],
            "options": {
                "d": d_model,
                "d3": 3 * d_model,
                "ff": 4 * d_model,
                "heads": heads,
                "hd": head_dim,
                "seq": seq,
            },
            "body": [
                {"h": ["call", "LayerNorm", "x", {"instance": "ln_1", "dim": "$d"}]},
                {"a": ["call", "Attention", "h",
                       {"instance": "attn", "d": "$d", "d3": "$d3", "heads": "$heads", "hd": "$hd",
                        "seq": "$seq"}]},
                {"x": ["add", "x", "a"]},
                {"h": ["call", "LayerNorm", "x", {"instance": "ln_2", "dim": "$d"}]},
                {"h": ["call", "Linear", "h", {"instance": "mlp.fc", "in": "$d", "out": "$ff"}]},
                {"h": ["gelu", "h", {"approximate": "tanh"}]},
                {"h": ["call", "Linear", "h", {"instance": "mlp.proj", "in": "$ff", "out": "$d"}]},
                {"y": ["add", "x", "h"]},
            ],
            "return": "y",
        },
    }

    main = [
        {"tok": ["call", "Embedding", "tokens", {"instance": "wte", "num": vocab, "dim": d_model}]},
        {"positions": ["iota", {"shape": [seq], "axis": 0, "dtype": "i64"}]},
        {"pos": ["call", "Embedding", "positions", {"instance": "wpe", "num": seq, "dim": d_model}]},
        {"x": ["add", "tok", "pos"]},
        {"x": ["repeat", "Block", "x", {"times": layers, "prefix": "h.{i}"}]},
        {"x": ["call", "LayerNorm", "x", {"instance": "ln_f", "dim": d_model}]},
        {"logits": ["call", "LinearNoBias", "x", {"instance": "lm_head", "in": d_model, "out": vocab}]},
    ]

    return {
        "maxc": 1,
        "name": "gpt",
        "weights": "gpt.safetensors",
        "inputs": [{"name": "tokens", "dtype": "i64", "shape": ["batch", seq]}],
        "outputs": ["logits"],
        "modules": modules,
        "main": main,
    }


def param_count(layers, seq, d_model, heads, vocab):
    d = d_model
    block = 2 * 2 * d + (3 * d * d + 3 * d) + (d * d + d) + (4 * d * d + 4 * d) + (4 * d * d + d)
    return vocab * d + seq * d + layers * block + 2 * d + vocab * d


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4, help="number of transformer blocks (default 4)")
    parser.add_argument("--seq", type=int, default=128, help="sequence length (default 128)")
    parser.add_argument("--d-model", type=int, default=256, help="model width (default 256)")
    parser.add_argument("--heads", type=int, default=4, help="attention heads (default 4)")
    parser.add_argument("--vocab", type=int, default=1024, help="vocabulary size (default 1024)")
    parser.add_argument("-o", "--output", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "model.json"),
                        help="output path (default: model.json next to this script)")
    args = parser.parse_args(argv)
    try:
        model = build_model(args.layers, args.seq, args.d_model, args.heads, args.vocab)
    except ValueError as e:
        parser.error(str(e))
    text = dump(model) + "\n"
    if args.output == "-":
        sys.stdout.write(text)
    else:
        with open(args.output, "w") as f:
            f.write(text)
        n = param_count(args.layers, args.seq, args.d_model, args.heads, args.vocab)
        print("wrote %s (%d layers, %d parameters)" % (args.output, args.layers, n), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
