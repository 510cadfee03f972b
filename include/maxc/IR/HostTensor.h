// A dense, row-major tensor in host memory with a static shape.
//
// HostTensor is the unit of data in maxc: graph constants (weights), the
// interpreter's inputs and outputs, and realized Tensors all hold one. The
// storage is shared (copying a HostTensor copies a pointer) and may be a view
// into a memory-mapped weights file, which is why it is treated as read-only
// once built: kernels write only to tensors they allocated themselves.
#pragma once

#include "maxc/IR/DType.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace maxc {

class HostTensor {
public:
  HostTensor() = default;
  /// Allocates zero-filled storage.
  HostTensor(DType dtype, std::vector<int64_t> shape);
  /// Wraps existing storage (no copy). `data` must hold at least
  /// numel()*dtype_size(dtype) bytes and stay alive as long as the pointer.
  HostTensor(DType dtype, std::vector<int64_t> shape, std::shared_ptr<std::byte> data);

  DType dtype() const { return dtype_; }
  const std::vector<int64_t> &shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  bool valid() const { return data_ != nullptr || numel() == 0; }

  std::byte *data() { return data_.get(); }
  const std::byte *data() const { return data_.get(); }
  const std::shared_ptr<std::byte> &storage() const { return data_; }
  template <typename T> T *data_as() { return reinterpret_cast<T *>(data_.get()); }
  template <typename T> const T *data_as() const { return reinterpret_cast<const T *>(data_.get()); }

  /// Element i converted to double (bool → 0/1). Exact for every dtype but
  /// i64 and u64 values beyond 2^53.
  double get_f64(int64_t i) const;
  /// Element i converted to int64 (floats truncate toward zero). A u64
  /// element gives its bits: values past 2^63 - 1 read as negative (integer
  /// arithmetic that wraps is the same on the bits; what compares or divides
  /// reads them as uint64_t).
  int64_t get_i64(int64_t i) const;
  /// Stores v rounded to the tensor's dtype (nearest-even for floats,
  /// truncation toward zero for integers, v != 0 for bool). Integers
  /// saturate to [-2^63, 2^63) and wrap to their width, but a u64 holds
  /// [0, 2^64): v past 2^63 saturates to 2^64 - 1 instead.
  void set_f64(int64_t i, double v);
  void set_i64(int64_t i, int64_t v);

  /// All elements as double / int64.
  std::vector<double> to_f64() const;
  std::vector<int64_t> to_i64() const;

  /// Builds a tensor from values, converting to `dtype`.
  static HostTensor from_f64(DType dtype, std::vector<int64_t> shape, const std::vector<double> &values);
  static HostTensor from_i64(DType dtype, std::vector<int64_t> shape, const std::vector<int64_t> &values);
  static HostTensor scalar(DType dtype, double value);

  /// A deep copy with its own storage.
  HostTensor clone() const;
  /// Same bytes, new shape (numel must match).
  HostTensor reshaped(std::vector<int64_t> shape) const;
  /// Byte-wise equality of dtype, shape and contents.
  bool identical(const HostTensor &other) const;

  /// Row-major strides in elements.
  std::vector<int64_t> strides() const;

private:
  DType dtype_ = DType::f32;
  std::vector<int64_t> shape_;
  std::shared_ptr<std::byte> data_;
};

/// "f32[2,3]".
std::string describe(const HostTensor &t);

} // namespace maxc
