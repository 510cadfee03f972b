#!/usr/bin/env python3
"""Latency of one ONNX model file, maxc vs ONNX Runtime, side by side in one run
(run by `scripts/bench onnx`; not a test).

    /usr/bin/python3 bench/onnx_bench.py MODEL.onnx --shape 1,3,224,224 [--dtype float32|int64]
        [--high 1000] [--dim batch=1 ...] [--threads 1,2] [--rounds 7] [--block-seconds 0.5]
        [--maxc build/bin/maxc] [--ort-dir build/bench/ort] [--work build/bench/onnx]

The model must have one input and one output (a torch export, e.g. from
scripts/onnx-export-models). maxc compiles the file (`maxc compile MODEL.onnx
-O3 --cpu native --dim ...`, every symbolic dim pinned by --dim) into a timing
server, bench/model_bench.c, with the model's tasks on bench/pool.h's thread
pool; ONNX Runtime (onnxruntime-node, bench/ort_bench.js, intraOpNumThreads =
the same count) loads the same file. One random input of --shape (randn for
float32, integers in [0, --high) for int64) goes to both; outputs must agree
to --tol (max|diff| / max|ORT output|, default 1e-4, exit status 1 past it).
Then timing blocks alternate for --rounds rounds (which side goes first
alternates too); a block runs the model for about --block-seconds, its median
is one sample, and the table shows the median of the samples per side and the
ratio ORT/maxc (> 1: maxc faster).
"""

import argparse
import os
import re
import statistics
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from model_bench import Server  # noqa: E402  (the same line protocol)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--shape", required=True, help="input shape, e.g. 1,3,224,224")
    ap.add_argument("--dtype", default="float32", choices=["float32", "int64"])
    ap.add_argument("--high", type=int, default=1000, help="int64 inputs: values in [0, HIGH)")
    ap.add_argument("--dim", action="append", default=[], help="NAME=VALUE, passed to maxc compile --dim")
    ap.add_argument("--threads", default="1", help="comma-separated thread counts, e.g. 1,2")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--block-seconds", type=float, default=0.5)
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--maxc", default=os.path.join(ROOT, "build", "bin", "maxc"))
    ap.add_argument("--cpu", default="native")
    ap.add_argument("--ort-dir", default=os.path.join(ROOT, "build", "bench", "ort"))
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench", "onnx"))
    a = ap.parse_args()

    os.makedirs(a.work, exist_ok=True)
    base = re.sub(r"\W", "_", os.path.splitext(os.path.basename(a.model))[0])
    name = "onnx_" + base
    obj = os.path.join(a.work, name + ".o")
    cmd = [a.maxc, "compile", a.model, "-o", obj, "--name", name, "-O3", "--cpu", a.cpu, "--emit", "obj,header", "-q"]
    for d in a.dim:
        cmd += ["--dim", d]
    print("$ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    header = os.path.join(a.work, name + ".h")
    with open(header) as f:
        text = f.read()
    all_pinned = re.search(r"_workspace_size\(void\)", text) is not None
    # The harness binds one symbolic dim, `batch`; any other must be pinned.
    decl = re.search(r"\w+_workspace_size\(((?:int64_t \w+(?:, )?)+)\)", text)
    unbound = [p.split()[1] for p in decl.group(1).split(", ")] if decl else []
    unbound = [d for d in unbound if d != "batch"]
    if unbound:
        sys.exit("onnx_bench: %s has symbolic dims the harness cannot bind: %s; pin them with %s" % (
            a.model, ", ".join(unbound), " ".join("--dim %s=N" % d for d in unbound)))
    server = os.path.join(a.work, name + "_bench")
    cc = ["cc", "-O2", "-DMODEL=" + name, "-include", header, "-I" + os.path.join(ROOT, "bench")]
    if all_pinned:
        cc.append("-DWORKSPACE_ARGS=")
    cc += [os.path.join(ROOT, "bench", "model_bench.c"), obj, "-lm", "-lpthread", "-o", server]
    subprocess.run(cc, check=True)

    shape = [int(s) for s in a.shape.split(",")]
    rng = np.random.default_rng(0)
    if a.dtype == "int64":
        x = rng.integers(0, a.high, size=shape, dtype=np.int64)
    else:
        x = rng.standard_normal(shape).astype(np.float32)
    in_path = os.path.join(a.work, base + ".in.bin")
    x.tofile(in_path)
    import onnx
    input_name = onnx.load(a.model, load_external_data=False).graph.input[0].name
    env = dict(os.environ, NODE_PATH=os.path.join(a.ort_dir, "node_modules"))

    rows, failed = [], False
    for threads in [int(t) for t in a.threads.split(",")]:
        maxc = Server([server, str(threads)])
        ort = Server(["node", os.path.join(ROOT, "bench", "ort_bench.js"), a.model, input_name, a.dtype, str(threads)]
                     + [str(s) for s in shape[1:]], env=env)
        try:
            ort_out = os.path.join(a.work, base + ".ort.out.bin")
            ort.request(in_path, shape[0], 0, 1, 1, ort_out)
            want = np.fromfile(ort_out, dtype=np.float32)
            maxc_out = os.path.join(a.work, base + ".maxc.out.bin")
            maxc.request(in_path, shape[0], want.size, 1, 1, maxc_out)
            got = np.fromfile(maxc_out, dtype=np.float32)
            rel = float(np.max(np.abs(got.astype(np.float64) - want))) / max(float(np.max(np.abs(want))), 1e-30)
            failed = failed or not rel <= a.tol
            iters = {}
            for side, s in (("maxc", maxc), ("ort", ort)):
                t = statistics.median(s.request(in_path, shape[0], want.size, 5, 2))
                iters[side] = max(3, min(5000, int(a.block_seconds / max(t, 1e-6) * 1e3)))
            samples = {"maxc": [], "ort": []}
            order = [("maxc", maxc), ("ort", ort)]
            for r in range(a.rounds):
                for side, s in order if r % 2 == 0 else order[::-1]:
                    samples[side].append(statistics.median(s.request(in_path, shape[0], want.size, iters[side], 1)))
        finally:
            maxc.close()
            ort.close()
        m, o = statistics.median(samples["maxc"]), statistics.median(samples["ort"])
        rows.append((threads, m, min(samples["maxc"]), max(samples["maxc"]), o, min(samples["ort"]),
                     max(samples["ort"]), o / m, rel, iters))
        print("threads %d: maxc %.3f ms [%.3f-%.3f], ORT %.3f ms [%.3f-%.3f], ORT/maxc %.2f, rel err %.2e, iters %s"
              % rows[-1], flush=True)
    print()
    print("| model | input | threads | maxc ms | ORT ms | ORT/maxc | max rel err |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print("| %s | %s %s | %d | %.3f | %.3f | %.2f | %.1e%s |" % (base, a.dtype, "x".join(map(str, shape)), r[0], r[1],
                                                                  r[4], r[7], r[8], "" if r[8] <= a.tol else " FAIL"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
