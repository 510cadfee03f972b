#!/usr/bin/env python3
"""Greedy tokens of a KV-cache decoder under weight-only quantization, against
its f32 tokens (issue 25's bar: a 64-token decode with int4 weights matches
the f32 model's first 16 tokens). Not a test.

    /usr/bin/python3 bench/quantized_greedy.py MODEL.onnx [--prompts "This pro|you can|..."]
        [--tokens 64] [--maxc build/bin/maxc] [--kinds int8,int4]

MODEL is an HF-style decoder with byte tokens (bench/kv_decoder.py --train
STEPS --text FILE writes one); each prompt's first 7 bytes are its tokens.
Per prompt and kind: `maxc --state auto [--quantize-weights KIND] run MODEL
--generate N` (the CPU, one process each), and the index of the first token
that differs from the f32 run's (N: all equal). Then the reason for each
difference: the f32 model's logits over the whole sequence (prompt + f32
tokens, one prefill run with past = 0) against the quantized model's — the
relative error of the logits, the positions where the argmax flips, and the
f32 margin there (top-1 minus top-2 logit, in units of that position's
logits' standard deviation; median and 5th percentile over all positions for
scale). A flip at a margin of a few thousandths is a near-tie that any
rounding decides.
"""
import argparse
import os
import subprocess
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--prompts", default="This pro|you can|License|of the |Copyright|software")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--kinds", default="int8,int4")
    ap.add_argument("--maxc", default=os.path.join(ROOT, "build", "bin", "maxc"))
    a = ap.parse_args()
    kinds = a.kinds.split(",")

    def generate(prompt, kind):
        flags = ["--quantize-weights", kind] if kind else []
        out = subprocess.run([a.maxc, "--state", "auto", "--quiet", *flags, "run", a.model, "--device", "cpu", "--generate",
                              str(a.tokens), "--prompt", ",".join(map(str, prompt)), "--max-context",
                              str(len(prompt) + a.tokens + 8)], capture_output=True, text=True, check=True).stdout
        return [int(x) for x in out.split("\n")[0].split()]

    def logits(seq, kind, past_inputs):
        with tempfile.TemporaryDirectory() as d:
            args = []
            np.save(f"{d}/tokens.npy", np.array([seq], np.int64))
            args += ["--input", f"tokens={d}/tokens.npy"]
            for name, shape in past_inputs:
                np.save(f"{d}/{name}.npy", np.zeros(shape, np.float32))
                args += ["--input", f"{name}={d}/{name}.npy"]
            flags = ["--quantize-weights", kind] if kind else []
            subprocess.run([a.maxc, "--quiet", *flags, "run", a.model, "--device", "cpu", "--output-dir", d + "/o", *args],
                           check=True)
            return np.load(d + "/o/logits.npy")[0]

    import onnx  # the past inputs' shapes, with past = 0
    graph = onnx.load(a.model, load_external_data=False).graph
    past_inputs = []
    for i in graph.input:
        if i.name == "tokens":
            continue
        dims = [d.dim_value if d.HasField("dim_value") else 0 for d in i.type.tensor_type.shape.dim]
        past_inputs.append((i.name, dims))

    print("| prompt | " + " | ".join(f"{k}: first differing token" for k in kinds) + " | f32 tokens |")
    print("|---|" + "---:|" * len(kinds) + "---|")
    notes = []
    for text in a.prompts.split("|"):
        prompt = list(text.encode()[:7])
        ref = generate(prompt, "")
        cells = []
        seq = prompt + ref[:-1]
        f = logits(seq, "", past_inputs)[len(prompt) - 1:]
        srt = np.sort(f, axis=1)
        margin = (srt[:, -1] - srt[:, -2]) / f.std(axis=1)
        for kind in kinds:
            got = generate(prompt, kind)
            first = next((i for i, (x, y) in enumerate(zip(ref, got)) if x != y), len(ref))
            cells.append(str(first))
            g = logits(seq, kind, past_inputs)[len(prompt) - 1:]
            flips = np.nonzero(g.argmax(1) != f.argmax(1))[0][:6]
            rel = np.linalg.norm(g - f) / np.linalg.norm(f)
            notes.append(f"{text!r} {kind}: logits {rel:.4f} off f32 (relative L2); argmax flips at {flips.tolist()}, "
                         f"f32 margins there {[round(float(x), 3) for x in margin[flips]]} (median margin {np.median(margin):.3f}, "
                         f"5th percentile {np.percentile(margin, 5):.3f})")
        shown = bytes(ref).decode("latin-1")[:40].replace("|", "/").replace("\n", " ")
        print(f"| {text!r} | " + " | ".join(cells) + f" | {shown!r} |")
    print()
    for n in notes:
        print("- " + n)


if __name__ == "__main__":
    main()
