#!/usr/bin/env python3
"""Issue 22's bar "a second thread never makes a model slower", measured
in one process: each corpus model of bench/real_bench.py (its --dim pins,
--bind settings, --max-dim bounds and inputs), and the MLP example at
batch 64, compiled with its generated bench harness (`maxc compile -O3
--cpu native --emit obj,header,bench-harness`, `cc -O2`), which runs
`--threads 1,2 --rounds R`: R rounds, each W warmup + N timed runs at 1
thread, then at 2 (the order reversed every other round), in the same
process, on the same buffers. Prints per model the two p50s and their
ratio (2 threads / 1 thread; above 1: the second thread made it slower).
Exit status 1 when a ratio is above 1 + --tolerance, 2 when a model fails
to compile or run. Not a test (minutes of compiles).

    /usr/bin/python3 bench/second_thread.py [--maxc build/bin/maxc] [--models a,b] [--rounds 10]
        [--block-seconds 0.2] [--tolerance 0]

Why one process: separate processes for the two counts (bench/
harness_threads.py) also differ in where the kernel places them, in their
address-space layout and page colouring, which moved the p50 of models
that run the 1-thread code at 2 threads (no job big enough to hand off:
RuntimePool.c's MAXC_RT_MIN_WORK) by 2-4 % (session 23). In one process
the only difference left is the thread count.
"""
import argparse
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_bench as rb  # noqa: E402  (the corpus: MODELS, fetch, make_inputs)

# Minutes to compile and run even once: left out unless named.
SLOW = {"htdemucs", "isnet_fp16", "isnet_quint8", "kokoro_tts"}
MLP = "mlp_batch64"


def compile_harness(name, cmd_prefix, model, work, extra):
    """The model's bench harness executable (None, error on failure)."""
    os.makedirs(work, exist_ok=True)
    cname = "st_" + re.sub(r"\W", "_", name)
    obj = os.path.join(work, cname + ".o")
    r = subprocess.run(cmd_prefix + ["compile", model, "-o", obj, "--name", cname, "-O3", "--cpu", "native",
                                     "--emit", "obj,header,bench-harness", "-q"] + extra, capture_output=True, text=True)
    if r.returncode != 0:
        return None, rb.first_error(r.stderr + r.stdout)
    exe = os.path.join(work, cname + "_bench")
    r = subprocess.run(["cc", "-O2", os.path.join(work, cname + "_bench.c"), obj, "-lm", "-lpthread", "-o", exe],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None, rb.first_error(r.stderr + r.stdout)
    return exe, None


def run_harness(exe, args):
    r = subprocess.run([exe] + args, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(rb.first_error(r.stderr + r.stdout))
    return r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--maxc", default=os.path.join(rb.ROOT, "build", "bin", "maxc"))
    ap.add_argument("--models", default=",".join([n for n in rb.MODELS if n not in SLOW] + [MLP]))
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--block-seconds", type=float, default=0.2, help="timed runs per block, at 1 thread")
    ap.add_argument("--tolerance", type=float, default=0.0, help="ratios up to 1 + this pass")
    ap.add_argument("--dir", default=os.environ.get("REAL_DIR") or os.path.join(rb.ROOT, "build", "bench", "real"))
    a = ap.parse_args()
    names = [n for n in a.models.split(",") if n]
    unknown = [n for n in names if n not in rb.MODELS and n != MLP]
    if unknown:
        sys.exit("second_thread: unknown model(s) %s; known: %s" % (", ".join(unknown),
                                                                   ", ".join(list(rb.MODELS) + [MLP])))
    slower = failed = 0
    print("| model | runs × rounds | p50 1 thread (ms) | p50 2 threads (ms) | 2 threads / 1 thread |")
    print("|---|---|---:|---:|---:|", flush=True)
    for name in names:
        work = os.path.join(a.dir, "second_thread", name)
        os.makedirs(work, exist_ok=True)
        files, weights = [], None
        if name == MLP:
            model = os.path.join(rb.ROOT, "examples", "mlp", "model.json")
            weights = os.path.join(work, "mlp.safetensors")
            r = subprocess.run([a.maxc, "init-weights", model, "-o", weights, "-q"], capture_output=True, text=True)
            if r.returncode != 0:
                failed += 1
                print("| %s | failed: %s | | | |" % (name, rb.first_error(r.stderr + r.stdout)), flush=True)
                continue
            prefix = [a.maxc, "--dim", "batch=64"]
        else:
            spec = rb.MODELS[name]
            model = rb.fetch(name, spec, a.dir)
            prefix = [a.maxc]
            for d, v in spec["dims"].items():
                prefix += ["--dim", "%s=%d" % (d, v)]
            binds = spec.get("binds", {})
            for n, v in binds.items():
                prefix += ["--bind", "%s=%s" % (n, v)]
            for n, v in spec.get("max_dims", {}).items():
                prefix += ["--max-dim", "%s=%d" % (n, v)]
            for i, (n, _, npy, _) in enumerate(rb.make_inputs(spec, work, 0)):
                if n not in binds:
                    files += ["--input", "%s=%s" % (rb.c_name(n, i), npy)]
        exe, err = compile_harness(name, prefix, model, work, ["--weights", weights] if name == MLP else [])
        if not exe:
            failed += 1
            print("| %s | failed: %s | | | |" % (name, err), flush=True)
            continue
        try:
            once = run_harness(exe, ["-n", "3", "--warmup", "1"] + files)
            per_run = float(re.search(r"p50 ([0-9.]+)", once).group(1))
            runs = max(3, min(5000, int(a.block_seconds * 1e3 / max(per_run, 1e-4))))
            out = run_harness(exe, ["-n", str(runs), "--warmup", str(max(1, runs // 5)), "--threads", "1,2",
                                    "--rounds", str(a.rounds)] + files)
        except RuntimeError as e:
            failed += 1
            print("| %s | failed: %s | | | |" % (name, e), flush=True)
            continue
        p50 = [float(x) for x in re.findall(r"p50 ([0-9.]+)", out)]
        ratio = float(re.search(r"p50 ratio: .* = ([0-9.]+)", out).group(1))
        slower += ratio > 1 + a.tolerance
        print("| %s | %d × %d | %.4f | %.4f | %s%.3f%s |" % (name, runs, a.rounds, p50[0], p50[1],
                                                           "**" if ratio > 1 else "", ratio,
                                                           "**" if ratio > 1 else ""), flush=True)
    load = open("/proc/loadavg").read().split()[:3]
    print("\n%d of %d model(s) slower at 2 threads (tolerance %g), %d failed; load %s"
          % (slower, len(names), a.tolerance, failed, " ".join(load)))
    sys.exit(2 if failed else 1 if slower else 0)


if __name__ == "__main__":
    main()
