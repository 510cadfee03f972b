#!/usr/bin/env python3
"""Decode-step latency of a KV-cache decoder, maxc vs ONNX Runtime, side by side
(issue #23; not a test).

    /usr/bin/python3 bench/kv_decode_bench.py MODEL.onnx [--contexts 128,512] [--prefill 128]
        [--threads 1,2] [--rounds 5] [--runs 40] [--maxc build/bin/maxc] [--ort-dir build/bench/ort]
        [--work build/bench/kv]

MODEL is an HF/optimum-style decoder (bench/kv_decoder.py writes one): inputs
tokens[1, seq] and past caches [1, kv_heads, past, head_dim], `seq` and `past`
symbolic. maxc compiles it ONCE (`maxc compile -O3 --cpu native --emit
obj,header,bench-harness`, both dims symbolic) into its generated benchmark
harness; a decode step is a run with seq = 1 and past = the context, a
prefill one with seq = --prefill and past = 0 (--prefill 0: none). ONNX
Runtime (onnxruntime-node, bench/ort_time.js, intraOpNumThreads = the same
count) runs the same file on inputs of the same shapes. Both sides get
pseudo-random inputs (caches in [-1, 1); the harness's tokens and ORT's differ,
which does not change the work). Per context and thread count, blocks
alternate for --rounds rounds (which side goes first alternates too); a block
is --runs timed runs after 10 warmup runs, its median one sample; the table
shows the median of the samples per side and ORT/maxc (> 1: maxc faster).
This times the caller's view today: `present` is a new buffer every step and
the caller feeds it back as `past` (no state API yet), on both sides.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--contexts", default="128,512")
    ap.add_argument("--prefill", type=int, default=128)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--maxc", default=os.path.join(ROOT, "build", "bin", "maxc"))
    ap.add_argument("--ort-dir", default=os.path.join(ROOT, "build", "bench", "ort"))
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench", "kv"))
    a = ap.parse_args()

    os.makedirs(a.work, exist_ok=True)
    name = "kv_" + re.sub(r"\W", "_", os.path.splitext(os.path.basename(a.model))[0])
    obj = os.path.join(a.work, name + ".o")
    cmd = [a.maxc, "compile", a.model, "-o", obj, "--name", name, "-O3", "--cpu", "native",
           "--emit", "obj,header,manifest,bench-harness", "-q"]
    print("$ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    harness = os.path.join(a.work, name + "_bench")
    subprocess.run(["cc", "-O2", os.path.join(a.work, name + "_bench.c"), obj, "-lm", "-lpthread", "-o", harness],
                   check=True)
    with open(os.path.join(a.work, name + ".manifest.json")) as f:
        inputs = json.load(f)["interface"]["inputs"]
    env = dict(os.environ, NODE_PATH=os.path.join(a.ort_dir, "node_modules"))
    dtypes = {"f32": "float32", "i64": "int64"}

    def maxc_block(past, seq, threads):
        r = subprocess.run([harness, "-n", str(a.runs), "--warmup", "10", "--dim", "past=%d" % past,
                            "--dim", "seq=%d" % seq, "--threads", str(threads)], capture_output=True, text=True,
                           check=True)
        return float(re.search(r"p50 ([0-9.]+)", r.stdout).group(1))

    def ort_block(past, seq, threads):
        specs = []
        for i in inputs:
            dims = [str(past if d == "past" else seq if d == "seq" else d) for d in i["shape"]]
            specs.append("%s:%s:%s" % (i["name"], dtypes[i["dtype"]], "x".join(dims)))
        r = subprocess.run(["node", os.path.join(ROOT, "bench", "ort_time.js"), a.model, str(threads), str(a.runs),
                            "10", *specs], capture_output=True, text=True, env=env)
        if r.returncode != 0:
            sys.exit("kv_decode_bench: ONNX Runtime failed: " + r.stderr.strip())
        return statistics.median(float(t) for t in r.stdout.split())

    cases = [("decode, context %d" % c, c, 1) for c in map(int, a.contexts.split(","))]
    if a.prefill:
        cases.append(("prefill %d" % a.prefill, 0, a.prefill))
    rows = []
    for threads in [int(t) for t in a.threads.split(",")]:
        for label, past, seq in cases:
            m, o = [], []
            for r in range(a.rounds):
                order = [(maxc_block, m), (ort_block, o)]
                for fn, out in (order if r % 2 == 0 else order[::-1]):
                    out.append(fn(past, seq, threads))
            rows.append((threads, label, statistics.median(o), statistics.median(m)))
            print("threads %d, %s: ORT %.3f ms, maxc %.3f ms" % rows[-1], flush=True)
    print()
    print("| threads | step | ORT ms | maxc ms | ORT/maxc |")
    print("|---:|---|---:|---:|---:|")
    for threads, label, o, m in rows:
        print("| %d | %s | %.3f | %.3f | %.2f |" % (threads, label, o, m, o / m))


if __name__ == "__main__":
    main()
