#!/usr/bin/env python3
"""Tensor parallelism on the CPU (issue 27's bar): the Llama example's
prefill, 1 rank x 2 threads against 2 ranks x 1 thread, alternating in one
process (bench/tensor_parallel.c), with the time the ranks spend in their
collectives.

  bench/tensor_parallel.py --maxc build/bin/maxc [--seq 64] [--rounds 50] [--cpu native]

Prints one JSON line per prompt length: the medians, their ratio (2 ranks /
whole: <= 1.2 is the bar) and rank 0's collective time per run."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run(cmd, cwd):
    r = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit("failed: %s\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))
    return r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--maxc", default=os.path.join(ROOT, "build", "bin", "maxc"))
    ap.add_argument("--seq", default="64", help="prompt lengths, comma-separated")
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--cpu", default="native")
    ap.add_argument("--work", help="directory for the artifacts (default: a temp dir)")
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="maxc-tp-")
    os.makedirs(work, exist_ok=True)
    model = os.path.join(ROOT, "examples", "llama", "model.json")
    flags = ["-q", "compile", model, "-O3", "--cpu", args.cpu]
    run([args.maxc] + flags + ["-o", "llama.o"], work)
    run([args.maxc] + flags + ["--tensor-parallel", "2", "-o", "llama.o"], work)
    run(["cc", "-O2", "-std=c11", "-pthread", "-I", work, os.path.join(HERE, "tensor_parallel.c"), "llama.o",
         "llama_rank0.o", "llama_rank1.o", "-lm", "-o", "tp_bench"], work)
    for seq in args.seq.split(","):
        line = run([os.path.join(work, "tp_bench"), seq, str(args.rounds)], work).strip()
        result = json.loads(line)
        result["cpu"] = args.cpu
        print(json.dumps(result))


if __name__ == "__main__":
    main()
