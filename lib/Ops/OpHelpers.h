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

/// NumPy broadcasting of two shapes, or a ShapeMismatch error.
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

} // namespace maxc::ophelpers
