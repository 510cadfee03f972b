#!/usr/bin/env python3
"""A statically quantized (QDQ) ResNet-18 / MobileNetV2 in ONNX Runtime's QDQ
format, made without ONNX Runtime's Python quantization tool (issue 25's QDQ
bar; not a test).

    /usr/bin/python3 bench/qdq_model.py OUT_DIR [--model resnet18|mobilenet_v2]
        [--calib 4] [--seed 0] [--ort-dir /tmp/ortnode]

Writes OUT_DIR/MODEL_f32.onnx (torchvision, random weights from --seed, random
BatchNorm statistics, exported at opset 13 in eval mode: BatchNorm folded
into the convs) and OUT_DIR/MODEL_qdq.onnx, rewritten the way
`onnxruntime.quantization.quantize_static(quant_format=QDQ, per_channel=True)`
writes with its defaults (activation_type = weight_type = QInt8, MinMax
calibration):

- weights: int8, symmetric per output channel (range -127..127, zero point 0),
  DequantizeLinear(axis=0) on an int8 initializer (Gemm's B, transB=1: axis 0);
- biases: int32 with scale x_scale * w_scale (per channel), zero point 0,
  DequantizeLinear(axis=0) — what ORT's QDQ quantizer writes;
- activations: int8 asymmetric (-128..127; --activation-type uint8: 0..255,
  MODEL_qdq_u8.onnx), one QuantizeLinear →
  DequantizeLinear pair per tensor, scale = (max - min) / 255 of the
  calibration range widened to include 0, zero point round(-128 - min/scale);
- Relu after Conv/Add removed, its range given to the producer's output (ORT's
  QDQRemovableActivation: the int8 saturation at zero point -128 is the relu);
- MaxPool's output quantized like its input (QDQDirect8BitOp); Add and
  GlobalAveragePool quantized on their inputs and outputs; the model output
  stays float (Q → DQ on the logits).

Calibration ranges come from running the f32 model under ONNX Runtime (node,
bench/ort_run.js) on --calib random normal inputs with every intermediate
tensor as an extra output. OUT_DIR/input.npy is one more random input (for the
comparisons).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference, TensorProto

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def export(model_name, path, seed):
    import torch
    import torchvision

    torch.manual_seed(seed)
    net = getattr(torchvision.models, model_name)(weights=None)
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                n = m.num_features
                m.running_mean.copy_(torch.randn(n, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(n, generator=g) + 0.5)
                m.weight.copy_(torch.rand(n, generator=g) + 0.5)
                m.bias.copy_(torch.randn(n, generator=g) * 0.1)
    net.eval()
    x = torch.randn(1, 3, 224, 224)
    torch.onnx.export(net, x, path, opset_version=13, do_constant_folding=True, input_names=["input"],
                      output_names=["output"], training=torch.onnx.TrainingMode.EVAL)


def ort_run(model_path, inputs, ort_dir, work):
    """Runs model_path under ORT node on each input (dict name -> array); returns the list of
    {output name: array} per input."""
    results = []
    for k, feeds in enumerate(inputs):
        spec = {"inputs": []}
        for name, arr in feeds.items():
            f = os.path.join(work, f"in{k}_{name}.bin")
            arr.astype(np.float32).tofile(f)
            spec["inputs"].append({"name": name, "dtype": "float32", "shape": list(arr.shape), "file": f})
        spec_path = os.path.join(work, f"spec{k}.json")
        with open(spec_path, "w") as fh:
            json.dump(spec, fh)
        out = os.path.join(work, f"out{k}")
        os.makedirs(out, exist_ok=True)
        env = dict(os.environ, NODE_PATH=os.path.join(ort_dir, "node_modules"))
        subprocess.run(["node", os.path.join(ROOT, "bench", "ort_run.js"), model_path, spec_path, out], check=True,
                       env=env)
        with open(os.path.join(out, "outputs.json")) as fh:
            meta = json.load(fh)
        res = {}
        for i, m in enumerate(meta):
            dt = {"float32": np.float32, "int8": np.int8, "uint8": np.uint8}[m["dtype"]]
            res[m["name"]] = np.fromfile(os.path.join(out, f"out{i}.bin"), dtype=dt).reshape(m["dims"])
        results.append(res)
    return results


def calibrate(model, inputs, ort_dir):
    """MinMax ranges of every float tensor (graph input, node outputs) over the inputs."""
    m = shape_inference.infer_shapes(model)
    names = [o for n in m.graph.node for o in n.output if o]
    known = {o.name for o in m.graph.output}
    extra = onnx.ModelProto()
    extra.CopyFrom(m)
    for n in names:
        if n not in known:
            extra.graph.output.append(helper.make_tensor_value_info(n, TensorProto.FLOAT, None))
    with tempfile.TemporaryDirectory() as work:
        p = os.path.join(work, "calib.onnx")
        onnx.save(extra, p)
        runs = ort_run(p, [{"input": x} for x in inputs], ort_dir, work)
    ranges = {}
    for k, r in enumerate(runs):
        vals = dict(r)
        vals["input"] = inputs[k]
        for name, arr in vals.items():
            lo, hi = float(arr.min()), float(arr.max())
            if name in ranges:
                lo, hi = min(lo, ranges[name][0]), max(hi, ranges[name][1])
            ranges[name] = (lo, hi)
    return ranges


ACT = np.int8


def act_params(lo, hi):
    """ORT's compute_scale_zp for asymmetric activations (int8: -128..127, uint8: 0..255)."""
    qmin = -128 if ACT == np.int8 else 0
    lo, hi = np.float32(min(lo, 0.0)), np.float32(max(hi, 0.0))
    scale = np.array((np.float64(hi) - np.float64(lo)) / 255.0)
    if scale < np.finfo(np.float32).tiny:
        return np.float32(1.0), ACT(0)
    zp = ACT(np.round(qmin - np.float64(lo) / scale))
    return np.float32(scale), zp


def quantize_weight(w, axis):
    """int8 symmetric per channel along axis (-127..127), scale = max|w| / 127."""
    moved = np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)
    absmax = np.abs(moved).max(axis=1).astype(np.float32)
    scale = (absmax * 2 / np.float32(254)).astype(np.float32)
    scale[scale == 0] = 1.0
    shape = [1] * w.ndim
    shape[axis] = -1
    q = np.clip(np.round(w.astype(np.float32) / scale.reshape(shape)), -127, 127).astype(np.int8)
    return q, scale


def rewrite(model, ranges):
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    consumers = {}
    for n in g.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    outputs = {o.name for o in g.output}

    # Relu after Conv/Add: removed, its output name (and range) given to the producer.
    producer = {o: n for n in g.node for o in n.output}
    keep = []
    for n in g.node:
        if n.op_type == "Relu":
            p = producer.get(n.input[0])
            if p is not None and p.op_type in ("Conv", "Add") and len(consumers[n.input[0]]) == 1 and \
                    n.input[0] not in outputs:
                p.output[0] = n.output[0]
                continue
        keep.append(n)
    del g.node[:]
    g.node.extend(keep)

    params = {}  # tensor -> (scale, zp)
    producer = {o: n for n in g.node for o in n.output}

    def quant(t):
        if t not in params:
            if t in ranges:
                params[t] = act_params(*ranges[t])
            else:
                raise SystemExit(f"no calibration range for {t}")
        return params[t]

    # MaxPool output like its input (propagated in order).
    for n in g.node:
        if n.op_type == "MaxPool":
            params[n.output[0]] = quant(n.input[0])

    quantized = []  # activation tensors to wrap, in order
    new_inits = []
    for n in g.node:
        if n.op_type not in ("Conv", "Gemm", "Add", "MaxPool", "GlobalAveragePool"):
            continue
        acts = [n.input[0]] if n.op_type in ("Conv", "Gemm", "MaxPool", "GlobalAveragePool") else list(n.input)
        for t in acts + [n.output[0]]:
            if t not in quantized:
                quant(t)
                quantized.append(t)
        if n.op_type in ("Conv", "Gemm"):
            w = numpy_helper.to_array(inits[n.input[1]])
            axis = 0  # Conv [O, C, kh, kw]; Gemm transB=1: [N, K]
            if n.op_type == "Gemm":
                assert any(a.name == "transB" and a.i == 1 for a in n.attribute)
            q, ws = quantize_weight(w, axis)
            wname = n.input[1]
            new_inits += [numpy_helper.from_array(q, wname + "_quantized"),
                          numpy_helper.from_array(ws, wname + "_scale"),
                          numpy_helper.from_array(np.zeros(ws.shape, np.int8), wname + "_zero_point")]
            dq_w = helper.make_node("DequantizeLinear", [wname + "_quantized", wname + "_scale", wname + "_zero_point"],
                                    [wname + "_DequantizeLinear_Output"], name=wname + "_DequantizeLinear", axis=axis)
            quantized_nodes_before.setdefault(n.name, []).append(dq_w)
            n.input[1] = wname + "_DequantizeLinear_Output"
            if len(n.input) > 2 and n.input[2]:
                b = numpy_helper.to_array(inits[n.input[2]]).astype(np.float32)
                xs = quant(n.input[0])[0]
                bs = (np.float32(xs) * ws).astype(np.float32)
                bq = np.round(b / bs).astype(np.int32)
                bname = n.input[2]
                new_inits += [numpy_helper.from_array(bq, bname + "_quantized"),
                              numpy_helper.from_array(bs, bname + "_quantized_scale"),
                              numpy_helper.from_array(np.zeros(bs.shape, np.int32), bname + "_quantized_zero_point")]
                dq_b = helper.make_node("DequantizeLinear",
                                        [bname + "_quantized", bname + "_quantized_scale", bname + "_quantized_zero_point"],
                                        [bname + "_DequantizeLinear_Output"], name=bname + "_DequantizeLinear", axis=0)
                quantized_nodes_before[n.name].append(dq_b)
                n.input[2] = bname + "_DequantizeLinear_Output"

    # Q -> DQ per quantized activation tensor: consumers read the DQ's output; a graph
    # output keeps its name (the producer writes NAME_QuantizeLinear_Input).
    wrap = {}
    for t in quantized:
        s, z = params[t]
        new_inits += [numpy_helper.from_array(np.array(s, np.float32), t + "_scale"),
                      numpy_helper.from_array(np.array(z, ACT), t + "_zero_point")]
        src = t
        if t in outputs:
            src = t + "_QuantizeLinear_Input"
            producer_of = next(n for n in g.node if t in n.output)
            producer_of.output[list(producer_of.output).index(t)] = src
        dq_out = t if t in outputs else t + "_DequantizeLinear_Output"
        q = helper.make_node("QuantizeLinear", [src, t + "_scale", t + "_zero_point"], [t + "_QuantizeLinear_Output"],
                             name=t + "_QuantizeLinear")
        dq = helper.make_node("DequantizeLinear", [t + "_QuantizeLinear_Output", t + "_scale", t + "_zero_point"],
                              [dq_out], name=t + "_DequantizeLinear")
        wrap[t] = (src, q, dq, dq_out)
    for n in g.node:
        for i, name in enumerate(n.input):
            if name in wrap and wrap[name][3] != name and n.op_type not in ("QuantizeLinear",):
                n.input[i] = wrap[name][3]

    # New node order: input's Q/DQ first, then every node preceded by its weight DQs and
    # followed by the Q/DQ of its outputs.
    nodes = []
    if "input" in wrap:
        nodes += [wrap["input"][1], wrap["input"][2]]
    for n in g.node:
        nodes += quantized_nodes_before.get(n.name, [])
        nodes.append(n)
        for o in n.output:
            if o in wrap:
                nodes += [wrap[o][1], wrap[o][2]]
            elif o.endswith("_QuantizeLinear_Input") and o[: -len("_QuantizeLinear_Input")] in wrap:
                t = o[: -len("_QuantizeLinear_Input")]
                nodes += [wrap[t][1], wrap[t][2]]
    del g.node[:]
    g.node.extend(nodes)
    used = {i for n in g.node for i in n.input}
    kept = [t for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(kept + [t for t in new_inits if t.name in used])
    del g.value_info[:]
    return model


quantized_nodes_before = {}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--model", default="resnet18", choices=["resnet18", "mobilenet_v2"])
    ap.add_argument("--calib", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ort-dir", default="/tmp/ortnode")
    ap.add_argument("--activation-type", default="int8", choices=["int8", "uint8"],
                    help="int8: quantize_static's default (QInt8); uint8: QUInt8 (ORT fuses every op on x86)")
    a = ap.parse_args()
    global ACT
    ACT = np.int8 if a.activation_type == "int8" else np.uint8
    os.makedirs(a.out_dir, exist_ok=True)
    f32 = os.path.join(a.out_dir, a.model + "_f32.onnx")
    export(a.model, f32, a.seed)
    model = onnx.load(f32)
    ops = {n.op_type for n in model.graph.node}
    assert "BatchNormalization" not in ops, "BatchNorm not folded"
    for n in model.graph.node:  # names for the rewrite's bookkeeping
        if not n.name:
            n.name = n.output[0]
    rng = np.random.default_rng(a.seed)
    inputs = [rng.standard_normal((1, 3, 224, 224)).astype(np.float32) for _ in range(a.calib)]
    ranges = calibrate(model, inputs, a.ort_dir)
    q = rewrite(model, ranges)
    onnx.checker.check_model(q)
    qpath = os.path.join(a.out_dir, a.model + ("_qdq.onnx" if ACT == np.int8 else "_qdq_u8.onnx"))
    onnx.save(q, qpath)
    np.save(os.path.join(a.out_dir, "input.npy"), rng.standard_normal((1, 3, 224, 224)).astype(np.float32))
    counts = {}
    for n in q.graph.node:
        counts[n.op_type] = counts.get(n.op_type, 0) + 1
    print(qpath, json.dumps(counts))


if __name__ == "__main__":
    main()
