#!/usr/bin/env python3
"""Compile cost of `maxc compile -O2` against the number of layers (issue #11).

    /usr/bin/python3 bench/compile_cost.py [--maxc build/bin/maxc] [--runs 3]
        [--layers 2,12,48] [--modes embed,external,gpu] [--big | --no-big]
        [--work build/bench/compile_cost] [--baseline OTHER_MAXC]

Generates GPT-generator models (examples/gpt/generate.py, d 256, 2/12/48
layers) and their weights (`maxc init-weights` for one layer, replicated to N
layers; on the fly into --work, never committed), then compiles each one --runs times per mode and prints the
median wall time and the median peak RSS (the child's own ru_maxrss, from
wait4) with the weights' size:

    embed     maxc compile -O2 model.json -o OUT/gpt.o
    external  ... --weights-mode external
    gpu       ... --gpu gfx942

and the bars of issue #11: 48 layers <= 1.5x the 2-layer time; peak RSS
<= 1.5 x weight bytes + 150 MB at 48 layers. --big adds the 1 GB case
(d 1024, 20 layers: 1.01e9 bytes of f32 weights; embed and external, one run
each), whose bar is peak RSS <= 2 GB. --baseline OTHER_MAXC alternates every
run with a second binary (before a change) and prints both. Not a test: the numbers are indicative
on a shared machine. `scripts/bench compile-cost` runs it.
"""

import argparse
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MB = 1e6


def run(cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def replicate_layers(one_layer, path, layers):
    """Writes the weights of a `layers`-layer model from those of its 1-layer
    twin: h.0.* copied to h.i.*, each copy's bytes rotated by 4*i so no two
    layers are identical (fast where init-weights would take minutes)."""
    with open(one_layer, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", None)
    tensors = []  # (name, dtype, shape, bytes)
    for name, t in sorted(header.items()):
        b = data[t["data_offsets"][0]:t["data_offsets"][1]]
        if name.startswith("h.0."):
            for i in range(layers):
                r = (4 * i) % max(len(b), 1)
                tensors.append(("h.%d.%s" % (i, name[4:]), t["dtype"], t["shape"], b[r:] + b[:r]))
        else:
            tensors.append((name, t["dtype"], t["shape"], b))
    out, offset = {}, 0
    if meta:
        out["__metadata__"] = meta
    for name, dtype, shape, b in tensors:
        out[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
    text = json.dumps(out, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for _, _, _, b in tensors:
            f.write(b)


def make_model(maxc, work, layers, d_model, heads):
    """model.json + gpt.safetensors in work/gpt-dD-L (reused when present)."""
    d = os.path.join(work, "gpt-d%d-%d" % (d_model, layers))
    model = os.path.join(d, "model.json")
    weights = os.path.join(d, "gpt.safetensors")
    if not (os.path.exists(model) and os.path.exists(weights)):
        os.makedirs(d, exist_ok=True)
        run([sys.executable, os.path.join(ROOT, "examples/gpt/generate.py"), "--layers", str(layers),
             "--d-model", str(d_model), "--heads", str(heads), "-o", model])
        if layers > 1:
            _, one = make_model(maxc, work, 1, d_model, heads)
            replicate_layers(one, weights + ".tmp", layers)
        else:
            run([maxc, "init-weights", model, "-o", weights + ".tmp", "--seed", "1"])
        os.replace(weights + ".tmp", weights)
    return model, weights


def measure(cmd):
    """(wall seconds, user+system CPU seconds, peak RSS bytes) of one run of cmd."""
    start = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - start
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    if status != 0:
        sys.exit("failed (%d): %s\n%s" % (status, " ".join(cmd), err))
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024


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
    ap.add_argument("--baseline", help="another maxc (before a change): each run alternates it with --maxc and "
                    "both are printed, the baseline's rows marked 'before'")
    args = ap.parse_args()
    maxc = os.path.abspath(args.maxc)
    binaries = [("", maxc)] + ([("before", os.path.abspath(args.baseline))] if args.baseline else [])
    layers = [int(x) for x in args.layers.split(",")]
    modes = args.modes.split(",")
    os.makedirs(args.work, exist_ok=True)
    out_dir = os.path.join(args.work, "out")
    load = open("/proc/loadavg").read().split()[:3]
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print("machine: %s, %d cores, load %s; maxc %s" % (cpu, os.cpu_count(), " ".join(load), maxc))

    models = {n: make_model(maxc, args.work, n, 256, 4) for n in layers}
    results = {}  # (binary tag, mode, layers) -> (time, cpu, rss, weight bytes)
    print("%-9s %-6s %6s %10s %9s %9s %11s %12s" %
          ("mode", "maxc", "layers", "weights MB", "time s", "cpu s", "peak RSS MB", "RSS/weights"))
    for mode in modes:
        for n in layers:
            model, weights = models[n]
            wbytes = os.path.getsize(weights)
            runs = {tag: ([], [], []) for tag, _ in binaries}
            for i in range(args.runs):
                # Alternating, and which one goes first alternates too.
                for tag, binary in (binaries if i % 2 == 0 else binaries[::-1]):
                    shutil.rmtree(out_dir, ignore_errors=True)
                    os.makedirs(out_dir)
                    for acc, value in zip(runs[tag], measure(compile_cmd(binary, model, out_dir, mode))):
                        acc.append(value)
            for tag, _ in binaries:
                t, c, r = (statistics.median(v) for v in runs[tag])
                results[(tag, mode, n)] = (t, c, r, wbytes)
                print("%-9s %-6s %6d %10.1f %9.2f %9.2f %11.0f %12.2f" %
                      (mode, tag or "this", n, wbytes / MB, t, c, r / MB, r / wbytes), flush=True)

    print("\nbars (issue #11):")
    ok = True
    lo, hi = min(layers), max(layers)
    for (tag, _), mode in [(b, m) for m in modes for b in binaries]:
        if (tag, mode, lo) not in results or (tag, mode, hi) not in results:
            continue
        t_lo, c_lo, _, _ = results[(tag, mode, lo)]
        t_hi, c_hi, r_hi, w_hi = results[(tag, mode, hi)]
        time_ok = t_hi <= 1.5 * t_lo
        rss_bar = 1.5 * w_hi + 150 * MB
        rss_ok = r_hi <= rss_bar
        if not tag:
            ok &= time_ok and rss_ok
        print("  %-9s%s time %d/%d layers = %.2fx (CPU time %.2fx; bar 1.5x): %s; RSS at %d layers %.0f MB (bar %.0f MB): %s" %
              (mode, " (" + tag + ")" if tag else "", hi, lo, t_hi / t_lo, c_hi / c_lo, "holds" if time_ok else "FAILS", hi, r_hi / MB, rss_bar / MB,
               "holds" if rss_ok else "FAILS"))

    if args.big:
        model, weights = make_model(maxc, args.work, 20, 1024, 16)
        wbytes = os.path.getsize(weights)
        for mode in [m for m in modes if m != "gpu"]:
            shutil.rmtree(out_dir, ignore_errors=True)
            os.makedirs(out_dir)
            t, _, r = measure(compile_cmd(maxc, model, out_dir, mode))
            big_ok = r <= 2e9
            ok &= big_ok
            print("  1 GB model (d 1024, 20 layers, %.0f MB of weights), %s: %.2f s, peak RSS %.0f MB (bar 2000 MB): %s"
                  % (wbytes / MB, mode, t, r / MB, "holds" if big_ok else "FAILS"), flush=True)
    shutil.rmtree(out_dir, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
