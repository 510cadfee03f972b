// NumPy .npy files for HostTensor (test inputs, golden outputs, debugging).
//
// Reads format versions 1.0, 2.0 and 3.0; writes 1.0 (2.0 only for headers
// over 64 KiB), with the exact header bytes current NumPy writes:
//   "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", the
//   growth-axis spaces NumPy adds, then spaces and '\n' so that magic, version,
//   length and header end on a multiple of 64 bytes.
//
// dtype ↔ descr: f16 '<f2', f32 '<f4', f64 '<f8', i8 '|i1', i32 '<i4',
// i64 '<i8', bool '|b1'. bf16 has no NumPy dtype: writing it is an error
// (cast first) and reading never produces it. Big-endian data, structured
// dtypes and Fortran-ordered arrays (unless the layout equals C order, as for
// rank <= 1) are rejected with NpyFormat errors whose location is the file.
#pragma once

#include "maxc/IR/HostTensor.h"

#include <string>

namespace maxc {

/// Reads a whole .npy file. Throws FileNotReadable or NpyFormat.
HostTensor read_npy(const std::string &path);
/// Writes `t` atomically (temp file `path.tmp.<pid>` renamed over `path`).
/// Throws InvalidArgument for bf16 or a tensor without storage, FileWrite.
void write_npy(const std::string &path, const HostTensor &t);

/// Parses the bytes of a .npy file; `name_for_errors` is the error location.
HostTensor parse_npy(const std::string &bytes, const std::string &name_for_errors);
/// The bytes write_npy writes.
std::string serialize_npy(const HostTensor &t);

} // namespace maxc
