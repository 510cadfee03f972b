#!/usr/bin/env python3
"""Compile cost of `maxc compile -O2` against the number of layers (issue #11).

    /usr/bin/python3 bench/compile_cost.py [--maxc build/bin/maxc] [--runs 3]
        [--layers 2,12,48] [--modes embed,external,gpu] [--big | --no-big]
        [--work build/bench/compile_cost]

Generates GPT-generator models (examples/gpt/generate.py, d 256, 2/12/48
layers) and their weights (`maxc init-weights`, on the fly into --work, never
committed), then compiles each one --runs times per mode and prints the
median wall time and the median peak RSS (the child's own ru_maxrss, from
wait4) with the weights' size:

    embed     maxc compile -O2 model.json -o OUT/gpt.o
    external  ... --weights-mode external
    gpu       ... --gpu gfx942

and the bars of issue #11: 48 layers <= 1.5x the 2-layer time; peak RSS
<= 1.5 x weight bytes + 150 MB at 48 layers. --big adds the 1 GB case
(d 1024, 20 layers: 1.01e9 bytes of f32 weights; embed and external, one run
each), whose bar is peak RSS <= 2 GB. Not a test: the numbers are indicative
on a shared machine. `scripts/bench compile-cost` runs it.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MB = 1e6


def run(cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def make_model(maxc, work, layers, d_model, heads):
    """model.json + gpt.safetensors in work/gpt-dD-L (reused when present)."""
    d = os.path.join(work, "gpt-d%d-%d" % (d_model, layers))
    model = os.path.join(d, "model.json")
    weights = os.path.join(d, "gpt.safetensors")
    if not (os.path.exists(model) and os.path.exists(weights)):
        os.makedirs(d, exist_ok=True)
        run([sys.executable, os.path.join(ROOT, "examples/gpt/generate.py"), "--layers", str(layers),
             "--d-model", str(d_model), "--heads", str(heads), "-o", model])
        run([maxc, "init-weights", model, "-o", weights + ".tmp", "--seed", "1"])
        os.replace(weights + ".tmp", weights)
    return model, weights


def measure(cmd):
    """(wall seconds, peak RSS bytes) of one run of cmd."""
    start = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - start
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    if status != 0:
        sys.exit("failed (%d): %s\n%s" % (status, " ".join(cmd), err))
    return wall, usage.ru_maxrss * 1024


MODES = {
    "embed": [],
    "external": ["--weights-mode", "external"],
    "gpu": ["--gpu", "gfx942"],
}


def compile_cmd(maxc, model, out_dir, mode):
    return [maxc, "compile", "-O2", model, "-o", os.path.join(out_dir, "gpt.o")] + MODES[mode]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--maxc", default=os.path.join(ROOT, "build/bin/maxc"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--layers", default="2,12,48")
    ap.add_argument("--modes", default="embed,external,gpu")
    ap.add_argument("--big", dest="big", action="store_true", default=True, help="the 1 GB case (default)")
    ap.add_argument("--no-big", dest="big", action="store_false")
    ap.add_argument("--work", default=os.path.join(ROOT, "build/bench/compile_cost"))
    args = ap.parse_args()
    maxc = os.path.abspath(args.maxc)
    layers = [int(x) for x in args.layers.split(",")]
    modes = args.modes.split(",")
    os.makedirs(args.work, exist_ok=True)
    out_dir = os.path.join(args.work, "out")
    load = open("/proc/loadavg").read().split()[:3]
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print("machine: %s, %d cores, load %s; maxc %s" % (cpu, os.cpu_count(), " ".join(load), maxc))

    models = {n: make_model(maxc, args.work, n, 256, 4) for n in layers}
    results = {}  # (mode, layers) -> (time, rss, weight bytes)
    print("%-9s %6s %10s %9s %10s %12s" % ("mode", "layers", "weights MB", "time s", "peak RSS MB", "RSS/weights"))
    for mode in modes:
        for n in layers:
            model, weights = models[n]
            wbytes = os.path.getsize(weights)
            times, rss = [], []
            for _ in range(args.runs):
                shutil.rmtree(out_dir, ignore_errors=True)
                os.makedirs(out_dir)
                t, r = measure(compile_cmd(maxc, model, out_dir, mode))
                times.append(t)
                rss.append(r)
            t, r = statistics.median(times), statistics.median(rss)
            results[(mode, n)] = (t, r, wbytes)
            print("%-9s %6d %10.1f %9.2f %10.0f %12.2f" % (mode, n, wbytes / MB, t, r / MB, r / wbytes), flush=True)

    print("\nbars (issue #11):")
    ok = True
    lo, hi = min(layers), max(layers)
    for mode in modes:
        if (mode, lo) not in results or (mode, hi) not in results:
            continue
        t_lo, _, _ = results[(mode, lo)]
        t_hi, r_hi, w_hi = results[(mode, hi)]
        time_ok = t_hi <= 1.5 * t_lo
        rss_bar = 1.5 * w_hi + 150 * MB
        rss_ok = r_hi <= rss_bar
        ok &= time_ok and rss_ok
        print("  %-9s time %d/%d layers = %.2fx (bar 1.5x): %s; RSS at %d layers %.0f MB (bar %.0f MB): %s" %
              (mode, hi, lo, t_hi / t_lo, "holds" if time_ok else "FAILS", hi, r_hi / MB, rss_bar / MB,
               "holds" if rss_ok else "FAILS"))

    if args.big:
        model, weights = make_model(maxc, args.work, 20, 1024, 16)
        wbytes = os.path.getsize(weights)
        for mode in [m for m in modes if m != "gpu"]:
            shutil.rmtree(out_dir, ignore_errors=True)
            os.makedirs(out_dir)
            t, r = measure(compile_cmd(maxc, model, out_dir, mode))
            big_ok = r <= 2e9
            ok &= big_ok
            print("  1 GB model (d 1024, 20 layers, %.0f MB of weights), %s: %.2f s, peak RSS %.0f MB (bar 2000 MB): %s"
                  % (wbytes / MB, mode, t, r / MB, "holds" if big_ok else "FAILS"), flush=True)
    shutil.rmtree(out_dir, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
