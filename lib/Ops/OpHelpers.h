// Shared helpers for op definitions (verification, broadcasting, indexing).
// Private to lib/Ops.
#pragma once

#include "maxc/IR/HostTensor.h"
#include "maxc/IR/TensorType.h"
#include "maxc/Ops/OpRegistry.h"
#include "maxc/Support/Error.h"

#include <string>
#include <vector>

namespace maxc::ophelpers {

// ---- verification ----
[[noreturn]] void fail_shape(const std::string &op, const std::string &message);
[[noreturn]] void fail_dtype(const std::string &op, const std::string &message);
[[noreturn]] void fail_attr(const std::string &op, const std::string &message);

void require_same_dtype(const std::string &op, const std::vector<TensorType> &types);
void require_float(const std::string &op, const TensorType &t, const char *what = "operand");
void require_dtype(const std::string &op, const TensorType &t, DType dtype, const char *what = "operand");
/// Rejects bool (arithmetic needs numbers).
void require_numeric(const std::string &op, const TensorType &t, const char *what = "operand");
void require_integer(const std::string &op, const TensorType &t, const char *what = "operand");
void require_rank(const std::string &op, const TensorType &t, int64_t rank, const char *what = "operand");
void require_min_rank(const std::string &op, const TensorType &t, int64_t rank, const char *what = "operand");
/// Same device for all operands (ops never move data implicitly).
void require_same_device(const std::string &op, const std::vector<TensorType> &types);

/// Maps a possibly negative axis into [0, rank); throws InvalidAttribute.
int64_t normalize_axis(const std::string &op, int64_t axis, int64_t rank);
/// Sorted unique normalised axes; an empty list means "all axes" only when
/// `empty_means_all` is set.
std::vector<int64_t> normalize_axes(const std::string &op, const std::vector<int64_t> &axes, int64_t rank,
                                    bool empty_means_all);

/// For an error where the model needs symbolic `d` to equal `want`: "; the
/// model fixes it at WANT: pin it with --dim S=V" when d names one symbol S
/// and some V gives exactly WANT (d non-decreasing in S, as sizes are), else
/// a hint naming d's symbols; "" for a static d.
std::string pin_hint(const Dim &d, int64_t want);

/// NumPy broadcasting of two shapes, or a ShapeMismatch error (with a
/// pin_hint where a symbolic dim meets a static one other than 1).
Shape broadcast_shapes(const std::string &op, const Shape &a, const Shape &b);

// ---- reference-kernel indexing ----
/// Row-major strides of `shape`.
std::vector<int64_t> strides_of(const std::vector<int64_t> &shape);
int64_t numel_of(const std::vector<int64_t> &shape);
/// Multi-index of linear index `i` in `shape`.
std::vector<int64_t> unravel(int64_t i, const std::vector<int64_t> &shape);
/// For broadcasting operand `in` to `out`: the linear index in `in` for each
/// linear index in `out`.
std::vector<int64_t> broadcast_index_map(const std::vector<int64_t> &in, const std::vector<int64_t> &out);
/// An integer element as HostTensor::get_i64 reads it, mapped so that int64
/// order is the dtype's order: itself for every dtype but u64, whose bits
/// (read as negative past 2^63 - 1) get their sign bit flipped.
inline int64_t int_order_key(DType d, int64_t v) {
  const DTypeInfo &info = dtype_info(d);
  return !info.is_signed && info.digits > 63 ? static_cast<int64_t>(static_cast<uint64_t>(v) ^ (uint64_t{1} << 63)) : v;
}

} // namespace maxc::ophelpers
