#!/usr/bin/env python3
"""Compile time against `maxc compile --jobs N` (issue #11: unique subgraph
definitions code-generated in parallel).

    /usr/bin/python3 bench/compile_jobs.py [--maxc build/bin/maxc] [--runs 3]
        [--jobs 1,2] [--layers 12,48] [--onnx /tmp/maxc-onnx-models/resnet18.onnx]
        [--gpu gfx90a,gfx942,gfx1100] [--work build/bench/compile_cost]

Compiles each model with every --jobs value, alternating them run by run
(which goes first alternates too), and prints the median wall time, the
median CPU time (user + system) and each value's speedup over the first.
Models: the GPT generator (d 256) at --layers (one subgraph definition: two
partitions), an ONNX model when --onnx exists (ResNet-18: seven
definitions), and the GPT at the smallest layer count with --gpu (one code
object per arch). Also checks that the objects are the same bytes for every
--jobs value. Not a test: the numbers are indicative on a shared machine.
"""

import argparse
import hashlib
import os
import shutil
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compile_cost import ROOT, make_model, measure  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--maxc", default=os.path.join(ROOT, "build/bin/maxc"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--jobs", default="1,2")
    ap.add_argument("--layers", default="12,48")
    ap.add_argument("--onnx", default="/tmp/maxc-onnx-models/resnet18.onnx")
    ap.add_argument("--gpu", default="gfx90a,gfx942,gfx1100")
    ap.add_argument("--work", default=os.path.join(ROOT, "build/bench/compile_cost"))
    args = ap.parse_args()
    maxc = os.path.abspath(args.maxc)
    jobs = args.jobs.split(",")
    layers = [int(x) for x in args.layers.split(",")]
    os.makedirs(args.work, exist_ok=True)
    load = open("/proc/loadavg").read().split()[:3]
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print("machine: %s, %d cores, load %s; maxc %s" % (cpu, os.cpu_count(), " ".join(load), maxc))

    cases = []  # (label, model, extra args)
    for n in layers:
        model, _ = make_model(maxc, args.work, n, 256, 4)
        cases.append(("gpt %d layers" % n, model, []))
    if args.onnx and os.path.exists(args.onnx):
        cases.append((os.path.basename(args.onnx), args.onnx, []))
    if args.gpu:
        model, _ = make_model(maxc, args.work, min(layers), 256, 4)
        cases.append(("gpt %d layers --gpu %s" % (min(layers), args.gpu), model, ["--gpu", args.gpu]))

    print("%-40s %5s %9s %9s %8s" % ("model", "jobs", "time s", "cpu s", "speedup"))
    ok = True
    for label, model, extra in cases:
        times = {j: ([], []) for j in jobs}
        digests = {j: set() for j in jobs}
        for i in range(args.runs):
            for j in (jobs if i % 2 == 0 else jobs[::-1]):
                out = os.path.join(args.work, "jobs-out-" + j)
                shutil.rmtree(out, ignore_errors=True)
                os.makedirs(out)
                obj = os.path.join(out, "m.o")
                wall, cpu_s, _ = measure([maxc, "compile", "-O2", model, "-o", obj, "--name", "m", "--jobs", j] + extra)
                times[j][0].append(wall)
                times[j][1].append(cpu_s)
                with open(obj, "rb") as f:
                    digests[j].add(hashlib.sha256(f.read()).hexdigest())
        first = statistics.median(times[jobs[0]][0])
        for j in jobs:
            t, c = statistics.median(times[j][0]), statistics.median(times[j][1])
            print("%-40s %5s %9.2f %9.2f %7.2fx" % (label, j, t, c, first / t), flush=True)
        same = len(set().union(*digests.values())) == 1
        ok &= same
        if not same:
            print("  the objects differ between --jobs values!")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
