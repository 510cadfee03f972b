#!/usr/bin/env python3
"""Writes deterministic demo inputs as .npy (stdlib only, no NumPy needed),
or summarizes .npy outputs with --summarize FILE..."""
import math
import struct
import sys


def write_npy(path, descr, shape, fmt, values):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, "".join("%d, " % d for d in shape).rstrip(" ") if len(shape) != 1 else "%d," % shape[0])
    pad = (64 - (10 + len(header) + 1) % 64) % 64
    header += " " * pad + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(struct.pack("<%d%s" % (len(values), fmt), *values))


def read_npy(path):
    data = open(path, "rb").read()
    hlen = struct.unpack("<H", data[8:10])[0]
    header = data[10:10 + hlen].decode("latin1")
    shape = tuple(int(x) for x in header.split("(")[1].split(")")[0].split(",") if x.strip())
    n = 1
    for d in shape:
        n *= d
    return shape, struct.unpack("<%df" % n, data[10 + hlen:10 + hlen + 4 * n])


def main():
    work = sys.argv[1]
    if len(sys.argv) > 2 and sys.argv[2] == "--summarize":
        for path in sys.argv[3:]:
            shape, values = read_npy(path)
            row = values[-shape[-1]:]  # last position of the last batch item
            top = sorted(range(len(row)), key=lambda i: -row[i])[:5]
            print("%s: shape %s, last row top-5 classes %s, mean %.6f" % (
                path, list(shape), top, sum(values) / len(values)))
        return
    # MLP: two 784-pixel "images" from a smooth deterministic pattern.
    write_npy(work + "/mlp_x.npy", "<f4", (2, 784), "f",
              [math.sin(0.01 * i) * 0.5 for i in range(2 * 784)])
    # GPT: one sequence of 128 token ids.
    write_npy(work + "/gpt_tokens.npy", "<i8", (1, 128), "q", [(i * 37 + 11) % 1024 for i in range(128)])


if __name__ == "__main__":
    main()
