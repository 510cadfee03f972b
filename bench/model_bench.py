#!/usr/bin/env python3
"""Model latency, maxc vs ONNX Runtime, side by side in one run (run by scripts/bench).

    /usr/bin/python3 bench/model_bench.py [--models mlp:1,mlp:64,gpt:1,gpt_flat:1] [--rounds 7]
                                          [--block-seconds 0.2] [--threads 1]

For each model it writes an ONNX graph equivalent to examples/<m>/model.json
with the same weights (read from examples/<m>/<m>.safetensors), starts two
timing servers, build/bench/<m>_bench (bench/model_bench.c linked with the
maxc-compiled object) and node bench/ort_bench.js (onnxruntime-node), checks
that both, and `maxc run --device reference`, give the same output on the
same input (exit status 1 past 1e-4 relative), then alternates timing
blocks between them for --rounds rounds (which side goes first alternates
too). A block runs the model repeatedly for about --block-seconds; its median
is one sample and the table shows the median of the samples per side.
--threads gives both sides the same thread count: ORT's intraOpNumThreads,
and maxc's own pool (NAME_set_num_threads, in the server).

gpt_flat is the GPT example compiled with "subgraph": false (every block
inlined; scripts/bench writes build/bench/gpt_flat/model.json), against the
same ONNX graph: with gpt, it measures what subgraph dedup costs at run time.

Needs numpy and onnx (Debian's python3-onnx, hence /usr/bin/python3); scripts/bench
builds the servers and installs onnxruntime-node under build/bench/ort.
"""

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys

import numpy as np
from onnx import TensorProto, checker, helper, numpy_helper, save

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = os.path.join(ROOT, "build", "bench")
OPSET = 17
TOLERANCE = 1e-4  # max|diff| / max|ORT output|
EXAMPLE_OF = {"gpt_flat": "gpt"}  # variants: the example whose weights, ONNX graph and reference they share

SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64, "I32": np.int32}


def read_safetensors(path):
    """8-byte little-endian header length, a JSON header, then the raw data."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n])
    base = 8 + n
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = SAFETENSORS_DTYPES[info["dtype"]]
        tensors[name] = np.frombuffer(blob, dtype=dtype, count=(end - begin) // np.dtype(dtype).itemsize,
                                      offset=base + begin).reshape(info["shape"]).copy()
    return tensors


class Graph:
    """A small onnx.helper wrapper: nodes with generated output names, numpy initializers."""

    def __init__(self):
        self.nodes, self.inits, self.count = [], [], 0

    def const(self, array, name=None):
        self.count += 1
        name = name or "c%d" % self.count
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def op(self, op_type, *inputs, outputs=1, name=None, **attrs):
        self.count += 1
        outs = [name or "t%d" % self.count] if outputs == 1 else ["t%d_%d" % (self.count, i) for i in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, **attrs))
        return outs[0] if outputs == 1 else outs

    def save(self, path, name, inputs, outputs):
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        model = helper.make_model(graph, producer_name="maxc bench", opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = 8
        checker.check_model(model)
        save(model, path)


def linear(g, w, prefix, x, gemm):
    """maxc's linear: x @ W^T + b with W [out, in]."""
    weight = w[prefix + ".weight"]
    bias = w.get(prefix + ".bias")
    if gemm:  # 2-D input: Gemm with transB=1, as torch.onnx.export writes nn.Linear
        ins = [x, g.const(weight)] + ([g.const(bias)] if bias is not None else [])
        return g.op("Gemm", *ins, transB=1)
    y = g.op("MatMul", x, g.const(np.ascontiguousarray(weight.T)))
    return g.op("Add", y, g.const(bias)) if bias is not None else y


def build_mlp(w, path):
    g = Graph()
    h = g.op("Relu", linear(g, w, "fc1", "x", True))
    h = g.op("Relu", linear(g, w, "fc2", h, True))
    linear(g, w, "fc3", h, True)
    g.nodes[-1].output[0] = "logits"
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", w["fc1.weight"].shape[1]])
    y = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", w["fc3.weight"].shape[0]])
    g.save(path, "mlp", [x], [y])


def build_gpt(w, path, model_json):
    """examples/gpt/model.json: pre-LN GPT-2 blocks, causal attention, tanh GELU, untied lm_head."""
    with open(model_json) as f:
        opts = json.load(f)["modules"]["Block"]["options"]
    heads, seq = opts["heads"], opts["seq"]
    vocab, d = w["wte.weight"].shape
    hd = d // heads
    layers = len({k.split(".")[1] for k in w if k.startswith("h.")})
    g = Graph()

    def layer_norm(x, prefix):
        return g.op("LayerNormalization", x, g.const(w[prefix + ".weight"]), g.const(w[prefix + ".bias"]),
                    axis=-1, epsilon=1e-5)

    def heads_of(t, perm):
        return g.op("Transpose", g.op("Reshape", t, g.const(np.array([0, seq, heads, hd], np.int64))), perm=perm)

    tok = g.op("Gather", g.const(w["wte.weight"]), "tokens", axis=0)
    pos = g.op("Gather", g.const(w["wpe.weight"]), g.const(np.arange(seq, dtype=np.int64)), axis=0)
    x = g.op("Add", tok, pos)
    causal = g.const(np.tril(np.ones((seq, seq), dtype=bool)))
    masked = g.const(np.array(-1e9, np.float32))
    scale = g.const(np.array(1.0 / np.sqrt(hd), np.float32))
    half, one = g.const(np.array(0.5, np.float32)), g.const(np.array(1.0, np.float32))
    gelu_c, gelu_k = g.const(np.array(np.sqrt(2 / np.pi), np.float32)), g.const(np.array(0.044715, np.float32))
    split = g.const(np.array([d, d, d], np.int64))
    for i in range(layers):
        p = "h.%d." % i
        h = layer_norm(x, p + "ln_1")
        q, k, v = g.op("Split", linear(g, w, p + "attn.qkv", h, False), split, outputs=3, axis=-1)
        q, k, v = heads_of(q, [0, 2, 1, 3]), heads_of(k, [0, 2, 3, 1]), heads_of(v, [0, 2, 1, 3])
        scores = g.op("Mul", g.op("MatMul", q, k), scale)
        probs = g.op("Softmax", g.op("Where", causal, scores, masked), axis=-1)
        o = g.op("Transpose", g.op("MatMul", probs, v), perm=[0, 2, 1, 3])
        o = g.op("Reshape", o, g.const(np.array([0, seq, d], np.int64)))
        x = g.op("Add", x, linear(g, w, p + "attn.proj", o, False))
        h = linear(g, w, p + "mlp.fc", layer_norm(x, p + "ln_2"), False)
        # gelu(h, approximate=tanh) = 0.5 h (1 + tanh(sqrt(2/pi) (h + 0.044715 h^3)))
        cube = g.op("Mul", g.op("Mul", h, h), h)
        inner = g.op("Mul", g.op("Add", h, g.op("Mul", cube, gelu_k)), gelu_c)
        h = g.op("Mul", g.op("Mul", h, half), g.op("Add", g.op("Tanh", inner), one))
        x = g.op("Add", x, linear(g, w, p + "mlp.proj", h, False))
    logits = linear(g, w, "lm_head", layer_norm(x, "ln_f"), False)
    g.nodes[-1].output[0] = "logits"
    tokens = helper.make_tensor_value_info("tokens", TensorProto.INT64, ["batch", seq])
    out = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", seq, vocab])
    g.save(path, "gpt", [tokens], [out])
    return seq, vocab


class Server:
    """A timing server speaking the line protocol of bench/model_bench.c and bench/ort_bench.js."""

    def __init__(self, argv, env=None):
        self.argv = argv
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
                                     env=env, cwd=ROOT)

    def request(self, in_path, batch, out_elems, iters, warmup, out_path="-"):
        self.proc.stdin.write("%s %d %d %d %d %s\n" % (in_path, batch, out_elems, iters, warmup, out_path))
        self.proc.stdin.flush()
        line = self.proc.stdout.readline().strip()
        if not line or line.startswith("error"):
            raise RuntimeError("%s: %s" % (" ".join(self.argv[:2]), line or "exited (%s)" % self.proc.poll()))
        return [float(t) for t in line.split()]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def bench_config(maxc, ort, name, input_name, output_name, batch, x, out_elems, args):
    in_path = os.path.join(WORK, "%s_b%d.in.bin" % (name, batch))
    x.tofile(in_path)
    outs = {}
    for side, server in (("maxc", maxc), ("ort", ort)):
        out_path = os.path.join(WORK, "%s_b%d.%s.out.bin" % (name, batch, side))
        server.request(in_path, batch, out_elems, 1, 1, out_path)
        outs[side] = np.fromfile(out_path, dtype=np.float32)
    # The reference interpreter too (maxc run --device reference), on the same input.
    npy_dir = os.path.join(WORK, "%s_b%d.reference" % (name, batch))
    os.makedirs(npy_dir, exist_ok=True)
    np.save(os.path.join(npy_dir, "input.npy"), x)
    subprocess.run([os.path.join(ROOT, "build", "bin", "maxc"), "run", "-q",
                    os.path.join(ROOT, "examples", EXAMPLE_OF.get(name, name), "model.json"), "--input",
                    "%s=%s" % (input_name, os.path.join(npy_dir, "input.npy")), "--output-dir", npy_dir], check=True)
    outs["reference"] = np.load(os.path.join(npy_dir, output_name + ".npy")).ravel()
    scale = max(float(np.max(np.abs(outs["ort"]))), 1e-30)
    diff = float(np.max(np.abs(outs["maxc"].astype(np.float64) - outs["ort"])))
    rel = diff / scale
    ref_rel = float(np.max(np.abs(outs["reference"].astype(np.float64) - outs["ort"]))) / scale
    # Calibrate the block size per side, then alternate blocks.
    iters = {}
    for side, server in (("maxc", maxc), ("ort", ort)):
        t = statistics.median(server.request(in_path, batch, out_elems, 5, 2))
        iters[side] = max(3, min(5000, int(args.block_seconds / max(t, 1e-6) * 1e3)))
    samples = {"maxc": [], "ort": []}
    order = [("maxc", maxc), ("ort", ort)]
    for r in range(args.rounds):
        for side, server in order if r % 2 == 0 else order[::-1]:
            times = server.request(in_path, batch, out_elems, iters[side], 1)
            samples[side].append(statistics.median(times))
    return {
        "maxc": statistics.median(samples["maxc"]),
        "ort": statistics.median(samples["ort"]),
        "maxc_range": (min(samples["maxc"]), max(samples["maxc"])),
        "ort_range": (min(samples["ort"]), max(samples["ort"])),
        "iters": iters,
        "diff": diff,
        "rel": rel,
        "ref_rel": ref_rel,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="mlp:1,mlp:64,gpt:1", help="MODEL:BATCH,... (mlp, gpt, gpt_flat)")
    ap.add_argument("--rounds", type=int, default=7, help="alternating rounds per configuration")
    ap.add_argument("--block-seconds", type=float, default=0.2, help="length of one timing block")
    ap.add_argument("--threads", type=int, default=1, help="threads per side (ORT intraOpNumThreads, maxc's pool)")
    args = ap.parse_args()

    configs = []
    for item in args.models.split(","):
        name, _, batch = item.partition(":")
        configs.append((name, int(batch or 1)))
    env = dict(os.environ, NODE_PATH=os.path.join(os.environ.get("ORT_DIR", os.path.join(WORK, "ort")), "node_modules"))
    rng = np.random.default_rng(0)
    rows, failed = [], False
    for name in dict.fromkeys(n for n, _ in configs):
        example = EXAMPLE_OF.get(name, name)
        w = read_safetensors(os.path.join(ROOT, "examples", example, example + ".safetensors"))
        onnx_path = os.path.join(WORK, name + ".onnx")
        input_name = "x" if example == "mlp" else "tokens"
        if example == "mlp":
            build_mlp(w, onnx_path)
            in_dims, in_type = [w["fc1.weight"].shape[1]], "float32"
            out_per_batch = w["fc3.weight"].shape[0]
            make_input = lambda b: rng.standard_normal((b, in_dims[0])).astype(np.float32)
        elif example == "gpt":
            seq, vocab = build_gpt(w, onnx_path, os.path.join(ROOT, "examples", "gpt", "model.json"))
            in_dims, in_type = [seq], "int64"
            out_per_batch = seq * vocab
            make_input = lambda b: rng.integers(0, vocab, (b, seq), dtype=np.int64)
        else:
            sys.exit("model_bench: unknown model %r (mlp, gpt, gpt_flat)" % name)
        maxc = Server([os.path.join(WORK, name + "_bench"), str(args.threads)])
        ort = Server(["node", os.path.join(ROOT, "bench", "ort_bench.js"), onnx_path,
                      input_name, in_type, str(args.threads)] + [str(d) for d in in_dims],
                     env=env)
        try:
            for cname, batch in configs:
                if cname != name:
                    continue
                r = bench_config(maxc, ort, name, input_name, "logits", batch, make_input(batch),
                                 batch * out_per_batch, args)
                ok = max(r["rel"], r["ref_rel"]) <= TOLERANCE
                failed |= not ok
                rows.append((name, batch, r, ok))
                print("  %s batch %d: maxc %s ms, ORT %s ms (round medians, %d rounds of %d / %d runs)"
                      % (name, batch, " ".join("%.3f" % t for t in r["maxc_range"]),
                         " ".join("%.3f" % t for t in r["ort_range"]), args.rounds, r["iters"]["maxc"],
                         r["iters"]["ort"]), flush=True)
        finally:
            maxc.close()
            ort.close()

    print()
    print("| model | batch | maxc ms (%d thr) | ORT ms (%d thr) | ORT/maxc | max abs diff | rel diff | reference rel diff |"
          % (args.threads, args.threads))
    print("|---|---|---|---|---|---|---|---|")
    for name, batch, r, ok in rows:
        print("| %s | %d | %.3f | %.3f | %.2f | %.1e | %.1e | %.1e%s |"
              % (name, batch, r["maxc"], r["ort"], r["ort"] / r["maxc"], r["diff"], r["rel"], r["ref_rel"],
                 "" if ok else " MISMATCH"))
    print("(medians of %d alternating rounds; ORT/maxc > 1: maxc faster. Diffs are maxc's compiled output vs ORT's "
          "on the same input; rel = max|diff| / max|ORT output|; the last column is `maxc run --device reference` "
          "vs ORT; tolerance %.0e)" % (args.rounds, TOLERANCE))
    by = {(name, batch): r for name, batch, r, _ in rows}
    for (name, batch), r in by.items():
        if name == "gpt" and ("gpt_flat", batch) in by:
            flat = by[("gpt_flat", batch)]
            # Also normalized by each configuration's own ORT samples (taken
            # alternating with it), which cancels slow drifts of the load.
            print("subgraph dedup at run time, batch %d: gpt (one Block function) %.3f ms, gpt_flat (inlined) %.3f ms: "
                  "flat/dedup %.2f, normalized by ORT %.2f (>= 1: dedup at least as fast)"
                  % (batch, r["maxc"], flat["maxc"], flat["maxc"] / r["maxc"],
                     (flat["maxc"] / flat["ort"]) / (r["maxc"] / r["ort"])))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
