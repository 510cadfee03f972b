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
Without --state this times the caller's view: `present` is a new buffer
every step and the caller feeds it back as `past`, on both sides. --state adds
a column: the model compiled with `--state auto` (the caches kept in place:
each step writes its rows into the state buffers and reads the rest where they
are), timed by its own harness with max_context = context + prefill + 1.
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
    ap.add_argument("--state", action="store_true", help="also time the model compiled with --state auto")
    ap.add_argument("--no-bandwidth", action="store_true", help="skip the memory-bandwidth limit")
    ap.add_argument("--compile-flags", default="",
                    help="extra maxc compile flags, space-separated (e.g. '--quantize-weights int4 --no-dedup')")
    a = ap.parse_args()

    os.makedirs(a.work, exist_ok=True)
    name = "kv_" + re.sub(r"\W", "_", os.path.splitext(os.path.basename(a.model))[0])
    obj = os.path.join(a.work, name + ".o")
    cmd = [a.maxc, "compile", a.model, "-o", obj, "--name", name, "-O3", "--cpu", "native",
           "--emit", "obj,header,manifest,bench-harness", "-q"] + a.compile_flags.split()
    print("$ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    harness = os.path.join(a.work, name + "_bench")
    subprocess.run(["cc", "-O2", os.path.join(a.work, name + "_bench.c"), obj, "-lm", "-lpthread", "-o", harness],
                   check=True)
    state_harness = None
    if a.state:
        sobj = os.path.join(a.work, name + "_state.o")
        cmd = [a.maxc, "compile", a.model, "-o", sobj, "--name", name + "_state", "-O3", "--cpu", "native",
               "--state", "auto", "--emit", "obj,header,manifest,bench-harness", "-q"] + a.compile_flags.split()
        print("$ " + " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
        state_harness = os.path.join(a.work, name + "_state_bench")
        subprocess.run(["cc", "-O2", os.path.join(a.work, name + "_state_bench.c"), sobj, "-lm", "-lpthread", "-o",
                        state_harness], check=True)
    with open(os.path.join(a.work, name + ".manifest.json")) as f:
        inputs = json.load(f)["interface"]["inputs"]
    env = dict(os.environ, NODE_PATH=os.path.join(a.ort_dir, "node_modules"))
    dtypes = {"f32": "float32", "f16": "float16", "i64": "int64"}

    def maxc_block(past, seq, threads, exe=harness, extra=()):
        r = subprocess.run([exe, "-n", str(a.runs), "--warmup", "10", "--dim", "past=%d" % past,
                            "--dim", "seq=%d" % seq, "--threads", str(threads), *extra], capture_output=True,
                           text=True, check=True)
        return float(re.search(r"p50 ([0-9.]+)", r.stdout).group(1))

    def state_block(past, seq, threads):
        return maxc_block(past, seq, threads, state_harness, ("--dim", "max_context=%d" % (past + seq + 1)))

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
            m, o, st = [], [], []
            for r in range(a.rounds):
                order = [(maxc_block, m), (ort_block, o)] + ([(state_block, st)] if a.state else [])
                for fn, out in (order if r % 2 == 0 else order[::-1]):
                    out.append(fn(past, seq, threads))
            rows.append((threads, label, statistics.median(o), statistics.median(m),
                         statistics.median(st) if st else None))
            print("threads %d, %s: ORT %.3f ms, maxc %.3f ms" % rows[-1][:4] +
                  (", maxc with state %.3f ms" % rows[-1][4] if st else ""), flush=True)
    print()
    if not a.no_bandwidth:
        bandwidth_limit(a, os.path.join(a.work, name + ".manifest.json"), obj, rows)
    if a.state:
        print("| threads | step | ORT ms | maxc ms | ORT/maxc | maxc state ms | ORT/maxc state |")
        print("|---:|---|---:|---:|---:|---:|---:|")
        for threads, label, o, m, st in rows:
            print("| %d | %s | %.3f | %.3f | %.2f | %.3f | %.2f |" % (threads, label, o, m, o / m, st, o / st))
        return
    print("| threads | step | ORT ms | maxc ms | ORT/maxc |")
    print("|---:|---|---:|---:|---:|")
    for threads, label, o, m, _ in rows:
        print("| %d | %s | %.3f | %.3f | %.2f |" % (threads, label, o, m, o / m))


STREAM_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
/* A STREAM-style copy of 2 x 256 MB: the best of 7 passes, in GB/s (bytes read + written). */
int main(void) {
  size_t n = (size_t)256 << 20;
  char *a = malloc(n), *b = malloc(n);
  if (!a || !b) return 1;
  memset(a, 1, n); memset(b, 2, n);
  double best = 1e30;
  for (int r = 0; r < 7; ++r) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    memcpy(b, a, n);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec);
    if (s < best) best = s;
    a[r] = b[r + 1];
  }
  printf("%.3f\n", 2.0 * n / best / 1e9);
  return 0;
}
"""


def weights_section_bytes(obj):
    """The size of the object's weights section (the weights as the code reads them: packed panels, 16-bit
    panels, quantized codes), or None."""
    try:
        out = subprocess.run(["readelf", "-SW", obj], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    for line in out.splitlines():
        f = line.replace("[ ", "[").split()
        if ".rodata.maxc.weights" in f:
            return int(f[f.index(".rodata.maxc.weights") + 4], 16)
    return None


def bandwidth_limit(a, manifest, obj, rows):
    """The physical limit of a decode step: reading the weights once at the machine's memory bandwidth
    (a STREAM-style copy measured now), next to the measured steps. The weights' bytes are those of the
    object's weights section (what the code reads: 16-bit panels, quantized codes), else the manifest's."""
    src, exe = os.path.join(a.work, "stream.c"), os.path.join(a.work, "stream")
    with open(src, "w") as f:
        f.write(STREAM_C)
    subprocess.run(["cc", "-O2", src, "-o", exe], check=True)
    gbs = max(float(subprocess.run([exe], capture_output=True, text=True, check=True).stdout) for _ in range(3))
    weights = weights_section_bytes(obj)
    if weights is None:
        with open(manifest) as f:
            weights = json.load(f)["memory"]["weights_bytes"]
    limit = weights / gbs / 1e6  # ms
    print("memory bandwidth (copy): %.1f GB/s; weights %.1f MB: reading them once takes %.3f ms" %
          (gbs, weights / 1e6, limit))
    for row in rows:
        if row[1].startswith("decode"):
            best = min(t for t in row[3:] if t is not None)
            print("  threads %d, %s: maxc %.3f ms = %.2f x the limit" % (row[0], row[1], best, best / limit))


if __name__ == "__main__":
    main()
