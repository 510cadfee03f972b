#!/usr/bin/env python3
"""Streams the silero voice-activity models over consecutive audio chunks
from ONE compiled maxc artifact, with the state fed back as an application
does, against ONNX Runtime doing the same (issue 24's VAD bar; a benchmark
script, not a test):

    /usr/bin/python3 bench/vad_stream.py [--models silero_vad_v5,...]
        [--chunks 100] [--rounds 3] [--maxc build/bin/maxc]
        [--ort-dir /tmp/ortnode] [--dir build/bench/real] [--cc cc]

For each model (fetched and checked by bench/real_bench.py's list):
  1. `maxc --bind sr=16000 --dim ... compile MODEL -o vad.o --name vad`
     (the sample-rate `If` resolves at import; the default portable --cpu);
  2. a C driver (generated from the artifact's manifest) links vad.o and
     calls `vad_run_packed` once per 512-sample chunk of a 16 kHz signal
     (voiced harmonic bursts with vibrato between stretches of noise),
     copying each state output into its state input for the next chunk;
     the state starts at zeros;
  3. bench/ort_stream.js runs the same chunks under onnxruntime-node 1.30
     (1 thread), feeding its own state outputs back.
It prints, per model, the largest |maxc - ORT| of the speech probability
over all chunks, of the final state, and the probabilities' range (so a
constant output cannot pass unnoticed); the bar is 1e-4. With --rounds R the
two streams alternate R times and each reports its loop's time (session
creation and compilation excluded): the medians per chunk and their ratio
(ORT / maxc, > 1: maxc faster). Exit status 1 when a model misses the bar.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_bench  # noqa: E402  (the model list and fetching)

ROOT = real_bench.ROOT
CHUNK = 512
RATE = 16000
# The state outputs each model feeds back, output name -> input name.
FEEDBACK = {
    "silero_vad_legacy": {"hn": "h", "cn": "c"},
    "silero_vad_v5": {"stateN": "state"},
    "silero_vad_v6": {"stateN": "state"},
}


def signal(chunks, seed=0):
    """Chunks x 512 samples: 0.4 s voiced bursts (f0 110-230 Hz with
    vibrato, 6 harmonics, a syllable envelope) alternating with 0.3 s of
    noise, everything over a low noise floor."""
    rng = np.random.default_rng(seed)
    n = chunks * CHUNK
    t = np.arange(n) / RATE
    x = 0.01 * rng.standard_normal(n)
    start = 0
    while start < n:
        voiced = int(0.4 * RATE)
        end = min(n, start + voiced)
        tt = t[start:end] - t[start]
        f0 = rng.uniform(110, 230) * (1 + 0.03 * np.sin(2 * np.pi * 5 * tt))
        phase = 2 * np.pi * np.cumsum(f0) / RATE
        env = np.sin(np.pi * tt / max(tt[-1], 1e-3)) ** 2 * (0.5 + 0.5 * np.abs(np.sin(2 * np.pi * 4 * tt)))
        x[start:end] += 0.3 * env * sum(np.sin(k * phase) / k for k in range(1, 7))
        start = end + int(0.3 * RATE)
        x[end:min(n, start)] += 0.05 * rng.standard_normal(min(n, start) - end)
    return x.astype(np.float32).reshape(chunks, CHUNK)


C_DRIVER = r"""
#include "vad.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void *load(const char *path, size_t bytes) {
  void *p = malloc(bytes);
  FILE *f = fopen(path, "rb");
  if (!p || !f || fread(p, 1, bytes, f) != bytes) { fprintf(stderr, "cannot read %s\n", path); exit(2); }
  fclose(f);
  return p;
}

int main(int argc, char **argv) {
  if (argc != 3) { fprintf(stderr, "usage: driver IN_DIR OUT_DIR\n"); return 2; }
  const long chunks = CHUNKS;
  const size_t in_elems[] = {IN_ELEMS};
  const size_t out_elems[] = {OUT_ELEMS};
  const int per_chunk[] = {PER_CHUNK};   /* input i holds every chunk's value */
  const int feedback[] = {FEEDBACK_MAP}; /* output j feeds input feedback[j], or -1 */
  char path[4096];
  float *data[VAD_NUM_INPUTS], *in[VAD_NUM_INPUTS], *out[VAD_NUM_OUTPUTS], *all[VAD_NUM_OUTPUTS];
  for (int i = 0; i < VAD_NUM_INPUTS; ++i) {
    snprintf(path, sizeof path, "%s/in%d.bin", argv[1], i);
    size_t n = in_elems[i] * (per_chunk[i] ? chunks : 1);
    data[i] = load(path, n * sizeof(float));
    in[i] = malloc(in_elems[i] * sizeof(float));
    memcpy(in[i], data[i], in_elems[i] * sizeof(float));
  }
  for (int j = 0; j < VAD_NUM_OUTPUTS; ++j) {
    out[j] = malloc(out_elems[j] * sizeof(float));
    all[j] = malloc(out_elems[j] * chunks * sizeof(float));
  }
  void *workspace = aligned_alloc(64, ((size_t)vad_workspace_size() + 63) / 64 * 64 + 64);
  void *buffers[VAD_NUM_INPUTS + VAD_NUM_OUTPUTS];
  int64_t dims[1] = {0};
  vad_set_num_threads(1);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long c = 0; c < chunks; ++c) {
    for (int i = 0; i < VAD_NUM_INPUTS; ++i) {
      if (per_chunk[i]) memcpy(in[i], data[i] + c * in_elems[i], in_elems[i] * sizeof(float));
      buffers[i] = in[i];
    }
    for (int j = 0; j < VAD_NUM_OUTPUTS; ++j) buffers[VAD_NUM_INPUTS + j] = out[j];
    int32_t status = vad_run_packed(buffers, dims, workspace);
    if (status != VAD_OK) { fprintf(stderr, "chunk %ld: %s\n", c, vad_status_string(status)); return 1; }
    for (int j = 0; j < VAD_NUM_OUTPUTS; ++j) {
      memcpy(all[j] + c * out_elems[j], out[j], out_elems[j] * sizeof(float));
      if (feedback[j] >= 0) memcpy(in[feedback[j]], out[j], out_elems[j] * sizeof(float));
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  for (int j = 0; j < VAD_NUM_OUTPUTS; ++j) {
    snprintf(path, sizeof path, "%s/out%d.bin", argv[2], j);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(all[j], sizeof(float), out_elems[j] * chunks, f) != out_elems[j] * chunks) return 2;
    fclose(f);
  }
  printf("%.9f\n", (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec));
  return 0;
}
"""


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit("vad_stream: %s failed:\n%s" % (" ".join(cmd), (r.stderr + r.stdout).strip()))
    return r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="silero_vad_legacy,silero_vad_v5,silero_vad_v6")
    ap.add_argument("--chunks", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=0, help="alternating timing rounds (0: correctness only)")
    ap.add_argument("--maxc", default=os.path.join(ROOT, "build", "bin", "maxc"))
    ap.add_argument("--ort-dir", default=os.path.join(ROOT, "build", "bench", "ort"))
    ap.add_argument("--dir", default=os.environ.get("REAL_DIR", os.path.join(ROOT, "build", "bench", "real")))
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"))
    a = ap.parse_args()
    env = dict(os.environ, NODE_PATH=os.path.join(os.path.abspath(a.ort_dir), "node_modules"))
    x = signal(a.chunks)
    failed = False
    rows = []
    for name in a.models.split(","):
        spec = real_bench.MODELS[name]
        model = real_bench.fetch(name, spec, a.dir)
        work = os.path.join(a.dir, "vad_stream", name)
        for sub in ("maxc_in", "maxc_out", "ort_out"):
            os.makedirs(os.path.join(work, sub), exist_ok=True)
        # One artifact: the sample rate bound at import, the dims pinned.
        cmd = [a.maxc, "-q"]
        for d, v in spec["dims"].items():
            cmd += ["--dim", "%s=%d" % (d, v)]
        for n, v in spec["binds"].items():
            cmd += ["--bind", "%s=%s" % (n, v)]
        obj = os.path.join(work, "vad.o")
        run(cmd + ["compile", model, "-o", obj, "--name", "vad"])
        with open(os.path.join(work, "vad.manifest.json")) as f:
            iface = json.load(f)["interface"]
        # Inputs: the audio per chunk, the state (zeros) fed back, the sample
        # rate (ORT only: maxc bound it).
        values = {}
        for (iname, dtype, shape, fill) in spec["inputs"]:
            if iname == "input":
                values[iname] = x
            elif iname == "sr":
                values[iname] = np.array(RATE, dtype=np.int64)
            else:
                values[iname] = np.zeros(shape, dtype=dtype)
        names_in = [t["name"] for t in iface["inputs"]]
        names_out = [t["name"] for t in iface["outputs"]]
        for i, iname in enumerate(names_in):
            values[iname].astype(np.float32).tofile(os.path.join(work, "maxc_in", "in%d.bin" % i))
        elems = lambda t: int(np.prod(t["shape"], dtype=np.int64))  # noqa: E731
        fb = FEEDBACK[name]
        src = (C_DRIVER.replace("CHUNKS", str(a.chunks))
               .replace("IN_ELEMS", ", ".join(str(elems(t)) for t in iface["inputs"]))
               .replace("OUT_ELEMS", ", ".join(str(elems(t)) for t in iface["outputs"]))
               .replace("PER_CHUNK", ", ".join("1" if n == "input" else "0" for n in names_in))
               .replace("FEEDBACK_MAP", ", ".join(str(names_in.index(fb[n]) if n in fb else -1)
                                                  for n in names_out)))
        with open(os.path.join(work, "driver.c"), "w") as f:
            f.write(src)
        exe = os.path.join(work, "driver")
        run([a.cc, "-O2", "-o", exe, os.path.join(work, "driver.c"), obj, "-I", work, "-lm", "-lpthread"])
        ort_spec = {"chunks": a.chunks, "feedback": fb, "inputs": []}
        for (iname, dtype, shape, fill) in spec["inputs"]:
            path = os.path.join(work, "ort_%s.bin" % iname)
            values[iname].tofile(path)
            ort_spec["inputs"].append({"name": iname, "dtype": dtype, "shape": [1, CHUNK] if iname == "input" else shape,
                                       "file": path, "per_chunk": iname == "input"})
        with open(os.path.join(work, "ort_spec.json"), "w") as f:
            json.dump(ort_spec, f)
        stream_js = os.path.join(ROOT, "bench", "ort_stream.js")
        maxc_s, ort_s = [], []
        for r in range(max(1, a.rounds)):
            maxc_s.append(float(run([exe, os.path.join(work, "maxc_in"), os.path.join(work, "maxc_out")])))
            ort_s.append(float(run(["node", stream_js, model, os.path.join(work, "ort_spec.json"),
                                    os.path.join(work, "ort_out")], env=env)))
        # Compare every chunk's outputs.
        errs = {}
        for j, oname in enumerate(names_out):
            mine = np.fromfile(os.path.join(work, "maxc_out", "out%d.bin" % j), dtype=np.float32)
            theirs = np.fromfile(os.path.join(work, "ort_out", "%s.bin" % oname), dtype=np.float32)
            if mine.shape != theirs.shape:
                sys.exit("vad_stream: %s: output %s has %d values, ORT %d" % (name, oname, mine.size, theirs.size))
            errs[oname] = (float(np.max(np.abs(mine - theirs))), mine, theirs)
        prob = errs["output"]
        state_err = max(e for n, (e, _, _) in errs.items() if n != "output")
        ok = prob[0] <= 1e-4 and state_err <= 1e-4
        failed |= not ok
        speech = int(np.sum(prob[2] > 0.5))
        rows.append((name, prob[0], state_err, float(prob[2].min()), float(prob[2].max()), speech,
                     statistics.median(maxc_s), statistics.median(ort_s), ok))
    print("%d chunks of %d samples at %d Hz, state fed back from zeros, one artifact per model" % (a.chunks, CHUNK, RATE))
    print()
    head = "| model | max abs diff, probability | max abs diff, state | ORT probability range | chunks > 0.5 | bar 1e-4 |"
    if a.rounds:
        head += " maxc µs/chunk | ORT µs/chunk | ORT/maxc |"
    print(head)
    print("|" + "---|" * head.count(" |"))
    for name, pe, se, lo, hi, speech, mt, ot, ok in rows:
        line = "| %s | %.1e | %.1e | %.3f .. %.3f | %d / %d | %s |" % (
            name, pe, se, lo, hi, speech, a.chunks, "pass" if ok else "FAIL")
        if a.rounds:
            line += " %.1f | %.1f | %.2f |" % (mt / a.chunks * 1e6, ot / a.chunks * 1e6, ot / mt)
        print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
