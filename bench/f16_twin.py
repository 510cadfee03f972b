#!/usr/bin/env python3
"""An ONNX model's f16-weight twin (issue 25's f16 bar; not a test).

    /usr/bin/python3 bench/f16_twin.py IN.onnx OUT.onnx [--min-elements 1024] [--full]

Every FLOAT initializer of at least --min-elements elements is stored as
FLOAT16 (round to nearest even) and read through a Cast back to FLOAT, the
way a model shipped with half-size weights and f32 arithmetic looks (ONNX
Runtime folds such casts once at session start). The graph's inputs, outputs
and arithmetic are unchanged, so the twin computes what IN computes with its
weights rounded to f16: maxc keeps such weights in 16 bits inside its GEMM
panels (docs/DESIGN.md, "16-bit panels"), and `maxc profile` / the bench
harnesses compare the two files' times.

--full makes the model f16 throughout instead, as f16 exports are shipped
(onnxconverter_common's float16 conversion without keep_io_types): every FLOAT
initializer, Constant and Cast target FLOAT16, and the FLOAT graph inputs and
outputs FLOAT16.
"""

import argparse
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--min-elements", type=int, default=1024)
    ap.add_argument("--full", action="store_true", help="f16 throughout (inputs, outputs, arithmetic)")
    a = ap.parse_args()
    model = onnx.load(a.input)
    graph = model.graph
    if a.full:
        return full_f16(model, a.output)
    casts, kept = [], []
    converted = 0
    for init in graph.initializer:
        if init.data_type != onnx.TensorProto.FLOAT or np.prod(init.dims, dtype=np.int64) < a.min_elements:
            kept.append(init)
            continue
        half = numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float16), init.name + "_f16")
        kept.append(half)
        casts.append(onnx.helper.make_node("Cast", [half.name], [init.name], to=onnx.TensorProto.FLOAT,
                                           name=init.name + "_widen"))
        converted += 1
    del graph.initializer[:]
    graph.initializer.extend(kept)
    nodes = list(graph.node)
    del graph.node[:]
    graph.node.extend(casts + nodes)
    onnx.save(model, a.output)
    print(f"{a.output}: {converted} initializers stored as FLOAT16", file=sys.stderr)


def full_f16(model, out_path):
    F32, F16 = onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16
    graph = model.graph

    def half(t):
        h = numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name)
        t.CopyFrom(h)

    for init in graph.initializer:
        if init.data_type == F32:
            half(init)
    for node in graph.node:
        for attr in node.attribute:
            if node.op_type == "Constant" and attr.name == "value" and attr.t.data_type == F32:
                half(attr.t)
            if node.op_type == "Cast" and attr.name == "to" and attr.i == F32:
                attr.i = F16
    for v in list(graph.input) + list(graph.output):
        if v.type.tensor_type.elem_type == F32:
            v.type.tensor_type.elem_type = F16
    del graph.value_info[:]
    onnx.save(model, out_path)
    print(f"{out_path}: f16 throughout", file=sys.stderr)


if __name__ == "__main__":
    main()
