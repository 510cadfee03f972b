"""Shared helpers of maxc's Python test runners (test/cli, test/e2e):
failures with the command's output attached, small assertions, and .npy
files."""
import ast
import os
import struct


class Failure(Exception):
    pass


def tail(text, limit=4000):
    return text if len(text) <= limit else "...\n" + text[-limit:]


def describe(r):
    """A finished command (with .cmd, .returncode, .stdout, .stderr) as text."""
    out = r.stdout if isinstance(r.stdout, str) else "<%d bytes>" % len(r.stdout)
    return "command: %s\nexit: %d\n--- stdout ---\n%s\n--- stderr ---\n%s" % (
        " ".join(r.cmd), r.returncode, tail(out), tail(r.stderr))


def expect(cond, message, r=None):
    if not cond:
        raise Failure(message + ("\n" + describe(r) if r is not None else ""))


def expect_in(needle, haystack, what, r=None):
    expect(needle in haystack, "expected %r in %s" % (needle, what), r)


def listing(directory):
    return sorted(os.listdir(directory))


# ---------------------------------------------------------------------------
# .npy files (version 1.0 written, 1.0-3.0 read; C order; little-endian)

# npy descr: (struct format, bytes)
NPY_FORMATS = {"<f4": ("f", 4), "<f8": ("d", 8), "<i8": ("q", 8), "<i4": ("i", 4), "|i1": ("b", 1)}


def write_npy_raw(path, descr, shape, raw):
    """Writes a C-ordered version 1.0 .npy file around little-endian bytes."""
    dims = "(%s)" % ("%d," % shape[0] if len(shape) == 1 else ", ".join(str(d) for d in shape))
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, dims)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(raw)
    return path


def write_npy(path, shape, values, descr="<f4"):
    """Writes a list of values as a C-ordered version 1.0 .npy file."""
    fmt, _ = NPY_FORMATS[descr]
    return write_npy_raw(path, descr, shape, struct.pack("<%d%s" % (len(values), fmt), *values))


def read_npy(path):
    """Reads a .npy file: (descr, shape, list of values)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        raise Failure("%s: not a .npy file" % path)
    major = data[6]
    if major == 1:
        hlen, start = struct.unpack("<H", data[8:10])[0], 10
    else:
        hlen, start = struct.unpack("<I", data[8:12])[0], 12
    header = ast.literal_eval(data[start:start + hlen].decode("latin1"))
    if header["fortran_order"]:
        raise Failure("%s: Fortran order" % path)
    if header["descr"] not in NPY_FORMATS:
        raise Failure("%s: this test does not read descr %r" % (path, header["descr"]))
    fmt, size = NPY_FORMATS[header["descr"]]
    shape = tuple(header["shape"])
    count = 1
    for d in shape:
        count *= d
    body = data[start + hlen:]
    if len(body) != count * size:
        raise Failure("%s: %d data bytes for shape %s" % (path, len(body), shape))
    return header["descr"], shape, list(struct.unpack("<%d%s" % (count, fmt), body))
