#!/usr/bin/env python3
"""Generated bench harnesses (`maxc compile ... --emit obj,header,bench-harness`,
`cc -O2 NAME_bench.c NAME.o -lm -lpthread`) at several thread counts and
builds, alternating: each round runs every LABEL:BINARY:THREADS once (`-n
RUNS --threads THREADS`), the order rotated and reversed every other round.
Prints the load average and, per label, the medians of the rounds' p50s
and mins. Indicative on a shared machine (run it under `chrt -f 10`); not
a test. For two builds of one model, bench/harness_ab.py also spreads each
side over several file copies.

    bench/harness_threads.py ROUNDS RUNS LABEL:BINARY:THREADS...
    e.g. bench/harness_threads.py 10 200 main1:old/cls:1 main2:old/cls:2 new1:new/cls:1 new2:new/cls:2
"""
import re
import statistics
import subprocess
import sys


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    rounds, runs = int(sys.argv[1]), sys.argv[2]
    specs = [s.split(":") for s in sys.argv[3:]]
    p50 = {s[0]: [] for s in specs}
    low = {s[0]: [] for s in specs}
    for r in range(rounds):
        order = specs[r % len(specs):] + specs[:r % len(specs)]
        if r % 2:
            order = order[::-1]
        for label, binary, threads in order:
            out = subprocess.run([binary, "-n", runs, "--threads", threads], capture_output=True, text=True,
                                 check=True).stdout
            p50[label].append(float(re.search(r"p50 ([0-9.]+)", out).group(1)))
            low[label].append(float(re.search(r"min ([0-9.]+)", out).group(1)))
    load = open("/proc/loadavg").read().split()[:3]
    print("load %s | " % " ".join(load) + " | ".join(
        "%s p50 %.4f min %.4f" % (label, statistics.median(p50[label]), statistics.median(low[label])) for label in p50))


if __name__ == "__main__":
    main()
