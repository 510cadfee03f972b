#include "maxc/IR/HostTensor.h"

#include "maxc/Support/Error.h"
#include "maxc/Support/Float16.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace maxc {

static std::shared_ptr<std::byte> allocate_bytes(size_t n) {
  // One extra byte so a zero-size tensor still has a non-null pointer.
  std::shared_ptr<std::byte> p(new std::byte[n + 1], std::default_delete<std::byte[]>());
  std::memset(p.get(), 0, n + 1);
  return p;
}

static int64_t checked_numel(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      throw Error(ErrorCode::InvalidArgument, "negative dimension " + std::to_string(d) + " in tensor shape");
    if (__builtin_mul_overflow(n, d, &n))
      throw Error(ErrorCode::DimOverflow, "tensor element count overflows 64 bits");
  }
  return n;
}

HostTensor::HostTensor(DType dtype, std::vector<int64_t> shape)
    : dtype_(dtype), shape_(std::move(shape)) {
  int64_t n = checked_numel(shape_);
  size_t bytes;
  if (__builtin_mul_overflow(static_cast<size_t>(n), dtype_size(dtype_), &bytes))
    throw Error(ErrorCode::DimOverflow, "tensor byte size overflows");
  data_ = allocate_bytes(bytes);
}

HostTensor::HostTensor(DType dtype, std::vector<int64_t> shape, std::shared_ptr<std::byte> data)
    : dtype_(dtype), shape_(std::move(shape)), data_(std::move(data)) {
  checked_numel(shape_);
}

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape_)
    n *= d;
  return n;
}

std::vector<int64_t> HostTensor::strides() const {
  std::vector<int64_t> s(shape_.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape_.size()) - 2; i >= 0; --i)
    s[i] = s[i + 1] * shape_[i + 1];
  return s;
}

double HostTensor::get_f64(int64_t i) const {
  const std::byte *p = data_.get();
  switch (dtype_) {
  case DType::f16: return half_bits_to_float(reinterpret_cast<const uint16_t *>(p)[i]);
  case DType::bf16: return bfloat16_bits_to_float(reinterpret_cast<const uint16_t *>(p)[i]);
  case DType::f32: return reinterpret_cast<const float *>(p)[i];
  case DType::f64: return reinterpret_cast<const double *>(p)[i];
  case DType::i8: return reinterpret_cast<const int8_t *>(p)[i];
  case DType::i32: return reinterpret_cast<const int32_t *>(p)[i];
  case DType::i64: return static_cast<double>(reinterpret_cast<const int64_t *>(p)[i]);
  case DType::boolean: return reinterpret_cast<const uint8_t *>(p)[i] ? 1.0 : 0.0;
  }
  return 0;
}

// Float → integer conversion that never invokes UB: NaN becomes 0 and
// out-of-range values saturate.
static int64_t saturating_to_i64(double v) {
  if (std::isnan(v))
    return 0;
  if (v >= 9.2233720368547758e18)
    return std::numeric_limits<int64_t>::max();
  if (v <= -9.2233720368547758e18)
    return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

int64_t HostTensor::get_i64(int64_t i) const {
  const std::byte *p = data_.get();
  switch (dtype_) {
  case DType::i8: return reinterpret_cast<const int8_t *>(p)[i];
  case DType::i32: return reinterpret_cast<const int32_t *>(p)[i];
  case DType::i64: return reinterpret_cast<const int64_t *>(p)[i];
  case DType::boolean: return reinterpret_cast<const uint8_t *>(p)[i] ? 1 : 0;
  default: return saturating_to_i64(get_f64(i));
  }
}

// Integer narrowing wraps (two's complement), as in C and the compiled code.
template <typename T> static T wrap_to(int64_t v) {
  return static_cast<T>(static_cast<uint64_t>(v));
}

void HostTensor::set_f64(int64_t i, double v) {
  std::byte *p = data_.get();
  switch (dtype_) {
  case DType::f16: reinterpret_cast<uint16_t *>(p)[i] = float_to_half_bits(static_cast<float>(v)); return;
  case DType::bf16: reinterpret_cast<uint16_t *>(p)[i] = float_to_bfloat16_bits(static_cast<float>(v)); return;
  case DType::f32: reinterpret_cast<float *>(p)[i] = static_cast<float>(v); return;
  case DType::f64: reinterpret_cast<double *>(p)[i] = v; return;
  case DType::boolean: reinterpret_cast<uint8_t *>(p)[i] = v != 0.0 ? 1 : 0; return;
  default: set_i64(i, saturating_to_i64(v)); return;
  }
}

void HostTensor::set_i64(int64_t i, int64_t v) {
  std::byte *p = data_.get();
  switch (dtype_) {
  case DType::i8: reinterpret_cast<int8_t *>(p)[i] = wrap_to<int8_t>(v); return;
  case DType::i32: reinterpret_cast<int32_t *>(p)[i] = wrap_to<int32_t>(v); return;
  case DType::i64: reinterpret_cast<int64_t *>(p)[i] = v; return;
  case DType::boolean: reinterpret_cast<uint8_t *>(p)[i] = v != 0 ? 1 : 0; return;
  default: set_f64(i, static_cast<double>(v)); return;
  }
}

std::vector<double> HostTensor::to_f64() const {
  std::vector<double> out(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i)
    out[i] = get_f64(i);
  return out;
}

std::vector<int64_t> HostTensor::to_i64() const {
  std::vector<int64_t> out(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i)
    out[i] = get_i64(i);
  return out;
}

HostTensor HostTensor::from_f64(DType dtype, std::vector<int64_t> shape, const std::vector<double> &values) {
  HostTensor t(dtype, std::move(shape));
  if (static_cast<int64_t>(values.size()) != t.numel())
    throw Error(ErrorCode::InvalidArgument, "HostTensor::from_f64: " + std::to_string(values.size()) +
                                                " values for " + std::to_string(t.numel()) + " elements");
  for (int64_t i = 0; i < t.numel(); ++i)
    t.set_f64(i, values[i]);
  return t;
}

HostTensor HostTensor::from_i64(DType dtype, std::vector<int64_t> shape, const std::vector<int64_t> &values) {
  HostTensor t(dtype, std::move(shape));
  if (static_cast<int64_t>(values.size()) != t.numel())
    throw Error(ErrorCode::InvalidArgument, "HostTensor::from_i64: " + std::to_string(values.size()) +
                                                " values for " + std::to_string(t.numel()) + " elements");
  for (int64_t i = 0; i < t.numel(); ++i)
    t.set_i64(i, values[i]);
  return t;
}

HostTensor HostTensor::scalar(DType dtype, double value) {
  HostTensor t(dtype, {});
  t.set_f64(0, value);
  return t;
}

HostTensor HostTensor::clone() const {
  HostTensor t(dtype_, shape_);
  if (nbytes())
    std::memcpy(t.data(), data(), nbytes());
  return t;
}

HostTensor HostTensor::reshaped(std::vector<int64_t> shape) const {
  HostTensor t(dtype_, std::move(shape), data_);
  if (t.numel() != numel())
    throw Error(ErrorCode::ShapeMismatch, "reshape of " + describe(*this) + " changes the element count");
  return t;
}

bool HostTensor::identical(const HostTensor &o) const {
  return dtype_ == o.dtype_ && shape_ == o.shape_ &&
         (nbytes() == 0 || std::memcmp(data(), o.data(), nbytes()) == 0);
}

std::string describe(const HostTensor &t) {
  std::string s(dtype_name(t.dtype()));
  s += "[";
  for (size_t i = 0; i < t.shape().size(); ++i)
    s += (i ? "," : "") + std::to_string(t.shape()[i]);
  return s + "]";
}

} // namespace maxc
