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


# onnx.TensorProto data_type -> (npy descr, bytes per element, field holding
# the values when there is no raw_data: 4 float_data, 5 int32_data, 7
# int64_data, 10 double_data; and the struct format of that field's values).
ONNX_TENSOR_TYPES = {
    1: ("<f4", 4, 4, "f"), 2: ("|u1", 1, 5, "B"), 3: ("|i1", 1, 5, "b"), 6: ("<i4", 4, 5, "i"),
    7: ("<i8", 8, 7, "q"), 9: ("|b1", 1, 5, "B"), 10: ("<f2", 2, 5, "H"), 11: ("<f8", 8, 10, "d"),
}


def read_tensor_pb(path):
    """Reads a serialized onnx.TensorProto (the conformance data's
    input_N.pb): (npy descr, shape, little-endian bytes). A small protobuf
    reader, so tests need neither numpy nor the onnx package."""
    with open(path, "rb") as f:
        data = f.read()
    pos = 0

    def varint():
        nonlocal pos
        value, shift = 0, 0
        while True:
            if pos >= len(data):
                raise Failure("%s: truncated protobuf" % path)
            byte = data[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value
    dims, dtype, raw, values = [], None, None, {}
    while pos < len(data):
        key = varint()
        field, wire = key >> 3, key & 7
        if wire == 0:
            v = varint()
            if field == 1:
                dims.append(v)
            elif field == 2:
                dtype = v
            else:
                values.setdefault(field, []).append(v)
        elif wire == 2:
            n = varint()
            chunk = data[pos:pos + n]
            pos += n
            if field == 9:
                raw = chunk
            elif field == 1:  # packed dims
                dims.extend(unpack_packed(chunk, 1))
            else:
                values.setdefault(field, []).append(chunk)
        elif wire == 5:
            values.setdefault(field, []).append(data[pos:pos + 4])
            pos += 4
        elif wire == 1:
            values.setdefault(field, []).append(data[pos:pos + 8])
            pos += 8
        else:
            raise Failure("%s: unsupported protobuf wire type %d" % (path, wire))
    if dtype not in ONNX_TENSOR_TYPES:
        raise Failure("%s: tensor data_type %s is not one the tests read" % (path, dtype))
    descr, size, field, fmt = ONNX_TENSOR_TYPES[dtype]
    count = 1
    for d in dims:
        count *= d
    if raw is None:
        items = []
        for chunk in values.get(field, []):
            if isinstance(chunk, int):
                items.append(chunk)
            else:
                items.extend(unpack_packed(chunk, field))
        if fmt in "bi" and field == 5:
            items = [v - (1 << 32) if v >= 1 << 31 else v for v in items]
        if fmt == "q":
            items = [v - (1 << 64) if v >= 1 << 63 else v for v in items]
        raw = struct.pack("<%d%s" % (len(items), fmt), *items)
    if len(raw) != count * size:
        raise Failure("%s: %d bytes for shape %s of %s" % (path, len(raw), dims, descr))
    return descr, dims, raw


def unpack_packed(chunk, field):
    """The values of a packed repeated field: floats/doubles as fixed-width
    words, integers as varints."""
    if field == 4:
        return list(struct.unpack("<%df" % (len(chunk) // 4), chunk))
    if field == 10:
        return list(struct.unpack("<%dd" % (len(chunk) // 8), chunk))
    out, value, shift = [], 0, 0
    for byte in chunk:
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            out.append(value)
            value, shift = 0, 0
    return out


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
