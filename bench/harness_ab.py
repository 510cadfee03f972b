#!/usr/bin/env python3
"""Before/after latency of one model's generated bench harness (`maxc compile
... --emit obj,header,bench-harness`, `cc -O2 NAME_bench.c NAME.o -lm
-lpthread`) between two builds, alternating (which side goes first
alternates too). Each side's binary is first copied to COPIES files and the
rounds go round-robin over them: identical binaries read from two different
files were timed up to 6 % apart, consistently (MLP batch 1, 2026-12-04:
the weights sit in the file's page-cache pages, so their physical placement,
and with it cache-set conflicts, differs between files). Prints the medians
of each side's p50s and mins and before/after (> 1: after is faster).
Indicative on a shared machine; not a test.

    bench/harness_ab.py BEFORE_BIN AFTER_BIN [--rounds 12] [--runs 100] [--threads 1] [--copies 4]
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import tempfile


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--runs", default="100")
    ap.add_argument("--threads", default="1")
    ap.add_argument("--copies", type=int, default=4)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bins = {}
        for side, path in (("before", a.before), ("after", a.after)):
            bins[side] = []
            for c in range(a.copies):
                p = os.path.join(tmp, "%s_%d" % (side, c))
                shutil.copy(path, p)
                bins[side].append(p)
        p50 = {"before": [], "after": []}
        low = {"before": [], "after": []}
        for r in range(a.rounds):
            for side in ("before", "after") if r % 2 == 0 else ("after", "before"):
                out = subprocess.run([bins[side][r % a.copies], "-n", a.runs, "--threads", a.threads],
                                     capture_output=True, text=True, check=True).stdout
                p50[side].append(float(re.search(r"p50 ([0-9.]+)", out).group(1)))
                low[side].append(float(re.search(r"min ([0-9.]+)", out).group(1)))
    b, f = statistics.median(p50["before"]), statistics.median(p50["after"])
    bm, fm = statistics.median(low["before"]), statistics.median(low["after"])
    print("threads %s: p50 before %.4f ms after %.4f ms before/after %.3f; min before %.4f after %.4f before/after %.3f"
          " (%d alternating rounds of %s runs, %d copies per side)"
          % (a.threads, b, f, b / f, bm, fm, bm / fm, a.rounds, a.runs, a.copies))


if __name__ == "__main__":
    main()
