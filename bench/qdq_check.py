#!/usr/bin/env python3
"""maxc vs ONNX Runtime on a QDQ model's output (issue 25's QDQ bar; not a test).

    /usr/bin/python3 bench/qdq_check.py MODEL.onnx [--inputs 3] [--seed 1]
        [--maxc build/bin/maxc] [--ort-dir /tmp/ortnode] [--device cpu] [--maxc-flag --no-qdq-fusion]

The model's one output must come from a DequantizeLinear with a constant scale
and zero point (ONNX Runtime's quantizer keeps the output float that way), so
output = (q - zp) * scale and equal floats are equal integers q. For each of
--inputs random normal inputs of the model's static input shape, runs ORT
(node, bench/ort_run.js: one thread, all graph optimizations) and `maxc run
--device DEVICE`, and prints how many output integers are equal and the
largest difference in quantization steps.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--inputs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--maxc", default=os.path.join(ROOT, "build", "bin", "maxc"))
    ap.add_argument("--ort-dir", default="/tmp/ortnode")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--maxc-flag", action="append", default=[], help="a global maxc flag, e.g. --no-qdq-fusion")
    a = ap.parse_args()

    m = onnx.load(a.model)
    g = m.graph
    inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    out_name = g.output[0].name
    dq = next(n for n in g.node if out_name in n.output)
    assert dq.op_type == "DequantizeLinear", "the output must come from a DequantizeLinear"
    scale = float(inits[dq.input[1]])
    inp = next(i for i in g.input if i.name not in inits)
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    rng = np.random.default_rng(a.seed)
    total = equal = 0
    worst = 0.0
    with tempfile.TemporaryDirectory() as work:
        for k in range(a.inputs):
            x = rng.standard_normal(shape).astype(np.float32)
            xf = os.path.join(work, "x.bin")
            x.tofile(xf)
            np.save(os.path.join(work, "x.npy"), x)
            spec = os.path.join(work, "spec.json")
            with open(spec, "w") as fh:
                json.dump({"inputs": [{"name": inp.name, "dtype": "float32", "shape": shape, "file": xf}]}, fh)
            env = dict(os.environ, NODE_PATH=os.path.join(a.ort_dir, "node_modules"))
            subprocess.run(["node", os.path.join(ROOT, "bench", "ort_run.js"), a.model, spec, work], check=True,
                           env=env)
            ort = np.fromfile(os.path.join(work, "out0.bin"), np.float32)
            out = os.path.join(work, "maxc")
            subprocess.run([a.maxc, *a.maxc_flag, "run", a.model, "--input", f"{inp.name}={work}/x.npy", "--device",
                            a.device, "--output-dir", out], check=True)
            files = [f for f in os.listdir(out) if f.endswith(".npy")]
            got = np.load(os.path.join(out, files[0])).ravel()
            steps = np.abs(got.astype(np.float64) - ort.astype(np.float64)) / scale
            total += got.size
            equal += int(np.sum(got == ort))
            worst = max(worst, float(steps.max()))
            print(f"input {k}: {int(np.sum(got == ort))}/{got.size} equal, max diff {steps.max():.2f} steps, "
                  f"argmax {'same' if got.argmax() == ort.argmax() else 'differs'}")
    print(f"{os.path.basename(a.model)} ({a.device}{' ' + ' '.join(a.maxc_flag) if a.maxc_flag else ''}): "
          f"{equal}/{total} output integers equal to ONNX Runtime's, max diff {worst:.2f} steps")
    return 0 if worst <= 1.0001 else 1


if __name__ == "__main__":
    sys.exit(main())
