#!/usr/bin/env python3
"""The cliff check over the real-model corpus: `maxc profile` of each model
of bench/real_bench.py (its --dim pins, --bind settings and --max-dim
bounds; its inputs, one timed run) and the scalar loops it lists
(docs/profiling.md, "Scalar loops"). Exit status 1 when any model lists
one, 2 when a model fails to compile. Not a test (minutes of compiles).
Session 23: 18 of the 19 default models list none (whisper_tiny_decoder
keeps its cross-attention's transposed keys).

    /usr/bin/python3 bench/corpus_cliffs.py [--maxc build/bin/maxc] [--models a,b] [--symbolic]

--symbolic drops the --dim pins of the image models (PaddleOCR's H and W),
compiling them for every size; models that need their pins to import are
reported as failures then.
"""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_bench as rb  # noqa: E402  (the corpus: MODELS, fetch)

# Minutes to compile and profile even once: left out unless named.
SLOW = {"htdemucs", "isnet_fp16", "isnet_quint8", "kokoro_tts"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--maxc", default=os.path.join(rb.ROOT, "build", "bin", "maxc"))
    ap.add_argument("--models", default=",".join(n for n in rb.MODELS if n not in SLOW))
    ap.add_argument("--symbolic", action="store_true", help="no --dim pins")
    ap.add_argument("--dir", default=os.environ.get("REAL_DIR") or os.path.join(rb.ROOT, "build", "bench", "real"))
    a = ap.parse_args()
    names = [n for n in a.models.split(",") if n]
    unknown = [n for n in names if n not in rb.MODELS]
    if unknown:
        sys.exit("corpus_cliffs: unknown model(s) %s; known: %s" % (", ".join(unknown), ", ".join(rb.MODELS)))
    found = failed = 0
    for name in names:
        spec = rb.MODELS[name]
        model = rb.fetch(name, spec, a.dir)
        cmd = [a.maxc]
        if not a.symbolic:
            for d, v in spec["dims"].items():
                cmd += ["--dim", "%s=%d" % (d, v)]
        for n, v in spec.get("binds", {}).items():
            cmd += ["--bind", "%s=%s" % (n, v)]
        for n, v in spec.get("max_dims", {}).items():
            cmd += ["--max-dim", "%s=%d" % (n, v)]
        work = os.path.join(a.dir, "run", name)
        os.makedirs(work, exist_ok=True)
        cmd += ["profile", model, "--runs", "1", "--warmup", "0", "--top", "1"]
        for input_name, _, npy, _ in rb.make_inputs(spec, work, 0):  # real_bench's inputs (they set symbolic dims)
            if input_name not in spec.get("binds", {}):  # a bound input is no input of the graph
                cmd += ["--input", "%s=%s" % (input_name, npy)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        lines = r.stdout.splitlines()
        if r.returncode != 0:
            failed += 1
            print("== %s: failed: %s" % (name, rb.first_error(r.stderr + r.stdout)), flush=True)
            continue
        loops = []
        for i, ln in enumerate(lines):
            if "scalar loop(s)" in ln:
                loops = [l.strip() for l in lines[i + 1:] if l.strip()]
                break
        found += len(loops) > 0
        print("== %s: %s; %d scalar loop(s)" % (name, lines[1].strip() if len(lines) > 1 else "", len(loops)),
              flush=True)
        for ln in loops:
            print("   " + ln)
    print("%d of %d model(s) list scalar loops, %d failed" % (found, len(names), failed))
    sys.exit(2 if failed else 1 if found else 0)


if __name__ == "__main__":
    main()
