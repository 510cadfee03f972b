#!/usr/bin/env python3
"""Greedy decoding of a KV-cache decoder, maxc vs ONNX Runtime (issue #23's
first bar; not a test).

    /usr/bin/python3 bench/kv_greedy_check.py MODEL.onnx [--prompt 7] [--steps 8]
        [--maxc build/bin/maxc] [--ort-dir build/bench/ort] [--work build/bench/kv-greedy]

MODEL is an HF/optimum-style decoder (bench/kv_decoder.py): inputs tokens[1,
seq] and past caches past_*[1, kv_heads, past, head_dim]; outputs logits[1,
seq, vocab] and present_* (same order as the pasts). Both runtimes prefill the
same random prompt (--prompt tokens, empty caches), then decode --steps tokens
greedily, each feeding its own `present` back as `past`:
  - ONNX Runtime: bench/ort_run.js per step;
  - maxc: the model compiled ONCE (`maxc compile`, seq and past symbolic) with
    its generated test harness (NAME_test.c), which runs the object on each of
    ORT's steps and compares every output with ORT's (rtol 1e-4, atol 1e-5:
    the harness's exit status), and `maxc run --device cpu` for maxc's own
    greedy sequence.
Prints per step the tokens, the max relative logits difference, and PASS or
FAIL; exit status 1 when the tokens differ or a step fails.

--state also compiles the model with `--state auto` (past/present pairs kept
in place) and drives its state API from a small C program: kvs_state_create,
kvs_step on the prompt, then kvs_step on each of ORT's greedy tokens; every
step's last logits row must match ORT's (rtol 1e-4, atol 1e-5) and give
ORT's token.
"""

import argparse
import json
import os
import re
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--prompt", type=int, default=7)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--maxc", default=os.path.join(ROOT, "build", "bin", "maxc"))
    ap.add_argument("--ort-dir", default=os.path.join(ROOT, "build", "bench", "ort"))
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench", "kv-greedy"))
    ap.add_argument("--state", action="store_true", help="also check the state API (--state auto)")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    w = lambda *p: os.path.join(a.work, *p)
    env = dict(os.environ, NODE_PATH=os.path.join(a.ort_dir, "node_modules"))

    # One compile: object, manifest and test harness.
    obj = w("kv.o")
    subprocess.run([a.maxc, "compile", a.model, "-o", obj, "--name", "kv", "--emit", "obj,header,manifest,test-harness",
                    "-q"], check=True)
    subprocess.run(["cc", "-O2", w("kv_test.c"), obj, "-lm", "-lpthread", "-o", w("kv_test")], check=True)
    with open(w("kv.manifest.json")) as f:
        iface = json.load(f)["interface"]
    ins, outs = iface["inputs"], iface["outputs"]
    vocab = outs[0]["shape"][-1]
    rng = np.random.default_rng(0)

    def ort_step(step, feeds):
        spec = {"inputs": []}
        for i in ins:
            arr = feeds[i["name"]]
            raw = w("ort%d_%s.bin" % (step, i["name"]))
            arr.tofile(raw)
            spec["inputs"].append({"name": i["name"], "dtype": str(arr.dtype), "shape": list(arr.shape), "file": raw})
        with open(w("spec.json"), "w") as f:
            json.dump(spec, f)
        d = w("ort%d" % step)
        os.makedirs(d, exist_ok=True)
        subprocess.run(["node", os.path.join(ROOT, "bench", "ort_run.js"), a.model, w("spec.json"), d], check=True, env=env)
        with open(os.path.join(d, "outputs.json")) as f:
            meta = json.load(f)
        res = {}
        for k, m in enumerate(meta):
            dt = np.float32 if m["dtype"] == "float32" else np.int64
            res[m["name"]] = np.fromfile(os.path.join(d, "out%d.bin" % k), dtype=dt).reshape(m["dims"])
        return res

    def maxc_step(step, feeds):
        d = w("maxc%d" % step)
        os.makedirs(d, exist_ok=True)
        cmd = [a.maxc, "run", a.model, "--device", "cpu", "--output-dir", d]
        for i in ins:
            p = w("m%d_%s.npy" % (step, i["name"]))
            np.save(p, feeds[i["name"]])
            cmd += ["--input", "%s=%s" % (i["name"], p)]
        subprocess.run(cmd, check=True, capture_output=True)
        return {o["name"]: np.load(os.path.join(d, o["name"] + ".npy")) for o in outs}

    def first_feeds():
        f = {ins[0]["name"]: rng.integers(0, vocab, (1, a.prompt), dtype=np.int64)}
        for i in ins[1:]:
            shape = [0 if d == "past" else d for d in i["shape"]]
            f[i["name"]] = np.zeros(shape, np.float32)
        return f

    def next_feeds(res, token):
        f = {ins[0]["name"]: np.array([[token]], np.int64)}
        for i, o in zip(ins[1:], outs[1:]):
            f[i["name"]] = res[o["name"]]
        return f

    ok = True
    of = mf = first_feeds()
    ort_tokens, maxc_tokens, ort_logits = [], [], []
    prompt_tokens = [int(t) for t in of[ins[0]["name"]][0]]
    for step in range(a.steps + 1):
        o = ort_step(step, of)
        m = maxc_step(step, mf)
        # The compiled object on ORT's inputs, checked against ORT's outputs.
        args = [w("kv_test")]
        for i in ins:
            p = w("o%d_%s.npy" % (step, i["name"]))
            np.save(p, of[i["name"]])
            args.append(p)
        for out in outs:
            p = w("o%d_want_%s.npy" % (step, out["name"]))
            np.save(p, o[out["name"]])
            args.append(p)
        harness = subprocess.run(args, capture_output=True, text=True)
        ot, mt = int(o[outs[0]["name"]][0, -1].argmax()), int(m[outs[0]["name"]][0, -1].argmax())
        ort_tokens.append(ot)
        ort_logits.append(o[outs[0]["name"]][0, -1])
        maxc_tokens.append(mt)
        lo, lm = o[outs[0]["name"]], m[outs[0]["name"]]
        rel = float(np.abs(lo - lm).max() / np.abs(lo).max()) if step == 0 else float("nan")
        print("step %d (%s, past %d): ORT token %d, maxc token %d; object on ORT's inputs: %s%s" % (
            step, "prefill %d" % a.prompt if step == 0 else "decode", of[ins[1]["name"]].shape[2], ot, mt,
            "PASS" if harness.returncode == 0 else "FAIL " + harness.stdout.strip().splitlines()[-1][:200],
            "; logits rel diff %.1e" % rel if step == 0 else ""), flush=True)
        ok = ok and harness.returncode == 0 and ot == mt
        of, mf = next_feeds(o, ot), next_feeds(m, mt)
    print("greedy tokens: ORT %s, maxc %s: %s" % (ort_tokens, maxc_tokens, "identical" if ort_tokens == maxc_tokens
                                                                              else "DIFFERENT"))
    if a.state:
        ok = check_state(a, w, ort_logits, prompt_tokens, ort_tokens, vocab) and ok
    return 0 if ok else 1


STATE_DRIVER = r"""
#include "kvs.h"
#include <stdio.h>
#include <stdlib.h>
/* argv: logits.bin vocab prompt_len tokens...: one kvs_step on the prompt, then one per further token. */
int main(int argc, char **argv) {
  FILE *out = fopen(argv[1], "wb");
  long vocab = atol(argv[2]), prompt = atol(argv[3]), n = argc - 4;
  int64_t *tokens = malloc(sizeof(int64_t) * n);
  float *logits = malloc(sizeof(float) * vocab * prompt);
  for (long i = 0; i < n; ++i) tokens[i] = atoll(argv[4 + i]);
  kvs_state *s = kvs_state_create(n + 1);
  if (!out || !s || kvs_step(s, tokens, logits, prompt) != KVS_OK) return 2;
  fwrite(logits + (prompt - 1) * vocab, sizeof(float), vocab, out);
  for (long i = prompt; i < n; ++i) {
    if (kvs_step(s, tokens + i, logits, 1) != KVS_OK) return 3;
    fwrite(logits, sizeof(float), vocab, out);
  }
  kvs_state_destroy(s);
  return fclose(out) != 0;
}
"""


def check_state(a, w, ort_logits, prompt_tokens, ort_tokens, vocab):
    obj = w("kvs.o")
    subprocess.run([a.maxc, "compile", a.model, "-o", obj, "--name", "kvs", "--state", "auto", "-q"], check=True)
    with open(w("kvs_main.c"), "w") as f:
        f.write(STATE_DRIVER)
    subprocess.run(["cc", "-O2", "-I", a.work, w("kvs_main.c"), obj, "-lm", "-lpthread", "-o", w("kvs_main")],
                   check=True)
    tokens = list(prompt_tokens) + ort_tokens[:-1]
    subprocess.run([w("kvs_main"), w("kvs_logits.bin"), str(vocab), str(len(prompt_tokens)), *map(str, tokens)],
                   check=True)
    got = np.fromfile(w("kvs_logits.bin"), np.float32).reshape(-1, vocab)
    ok = True
    for step, (g, o) in enumerate(zip(got, ort_logits)):
        close = np.allclose(g, o, rtol=1e-4, atol=1e-5)
        same = int(g.argmax()) == ort_tokens[step]
        print("state API step %d: max abs diff %.1e, token %d: %s" % (step, float(np.abs(g - o).max()), int(g.argmax()),
                                                                    "PASS" if close and same else "FAIL"))
        ok = ok and close and same
    return ok


if __name__ == "__main__":
    sys.exit(main())
