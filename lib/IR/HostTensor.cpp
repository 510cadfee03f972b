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

// Element access reads the dtype table: a float by its width (the 16-bit
// ones are f16 or bf16 bits), an integer by its width and signedness, a bool
// as a byte that is 0 or 1.
namespace {

double load_float(const std::byte *p, int64_t i, DType d) {
  switch (dtype_size(d)) {
  case 2: {
    uint16_t bits = reinterpret_cast<const uint16_t *>(p)[i];
    return d == DType::bf16 ? bfloat16_bits_to_float(bits) : half_bits_to_float(bits);
  }
  case 4: return reinterpret_cast<const float *>(p)[i];
  default: return reinterpret_cast<const double *>(p)[i];
  }
}

void store_float(std::byte *p, int64_t i, DType d, double v) {
  switch (dtype_size(d)) {
  case 2: {
    float f = static_cast<float>(v);
    reinterpret_cast<uint16_t *>(p)[i] = d == DType::bf16 ? float_to_bfloat16_bits(f) : float_to_half_bits(f);
    return;
  }
  case 4: reinterpret_cast<float *>(p)[i] = static_cast<float>(v); return;
  default: reinterpret_cast<double *>(p)[i] = v; return;
  }
}

template <typename S, typename U> int64_t load_int(const std::byte *p, int64_t i, bool is_signed) {
  return is_signed ? static_cast<int64_t>(reinterpret_cast<const S *>(p)[i])
                   : static_cast<int64_t>(reinterpret_cast<const U *>(p)[i]);
}

int64_t load_integer(const std::byte *p, int64_t i, const DTypeInfo &info) {
  switch (info.bytes) {
  case 1: return load_int<int8_t, uint8_t>(p, i, info.is_signed);
  case 2: return load_int<int16_t, uint16_t>(p, i, info.is_signed);
  case 4: return load_int<int32_t, uint32_t>(p, i, info.is_signed);
  default: return reinterpret_cast<const int64_t *>(p)[i];
  }
}

// Integer narrowing wraps (two's complement), as in C and the compiled code.
template <typename T> void store_wrapped(std::byte *p, int64_t i, int64_t v) {
  reinterpret_cast<T *>(p)[i] = static_cast<T>(static_cast<uint64_t>(v));
}

void store_integer(std::byte *p, int64_t i, size_t bytes, int64_t v) {
  switch (bytes) {
  case 1: store_wrapped<uint8_t>(p, i, v); return;
  case 2: store_wrapped<uint16_t>(p, i, v); return;
  case 4: store_wrapped<uint32_t>(p, i, v); return;
  default: store_wrapped<uint64_t>(p, i, v); return;
  }
}

bool load_bool(const std::byte *p, int64_t i) { return reinterpret_cast<const uint8_t *>(p)[i] != 0; }
void store_bool(std::byte *p, int64_t i, bool v) { reinterpret_cast<uint8_t *>(p)[i] = v ? 1 : 0; }

// Float → integer conversion that never invokes UB: NaN becomes 0 and
// out-of-range values saturate.
int64_t saturating_to_i64(double v) {
  if (std::isnan(v))
    return 0;
  if (v >= 9.2233720368547758e18)
    return std::numeric_limits<int64_t>::max();
  if (v <= -9.2233720368547758e18)
    return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

// Whether an integer dtype's values can exceed int64 (u64): its bits read
// as uint64_t.
bool beyond_i64(const DTypeInfo &info) { return !info.is_signed && info.digits > 63; }

} // namespace

double HostTensor::get_f64(int64_t i) const {
  const DTypeInfo &info = dtype_info(dtype_);
  switch (info.cls) {
  case DTypeClass::floating: return load_float(data_.get(), i, dtype_);
  case DTypeClass::integer:
    if (beyond_i64(info))
      return static_cast<double>(static_cast<uint64_t>(load_integer(data_.get(), i, info)));
    return static_cast<double>(load_integer(data_.get(), i, info));
  case DTypeClass::boolean: return load_bool(data_.get(), i) ? 1.0 : 0.0;
  }
  return 0;
}

int64_t HostTensor::get_i64(int64_t i) const {
  const DTypeInfo &info = dtype_info(dtype_);
  switch (info.cls) {
  case DTypeClass::integer: return load_integer(data_.get(), i, info);
  case DTypeClass::boolean: return load_bool(data_.get(), i) ? 1 : 0;
  case DTypeClass::floating: break;
  }
  return saturating_to_i64(get_f64(i));
}

void HostTensor::set_f64(int64_t i, double v) {
  const DTypeInfo &info = dtype_info(dtype_);
  switch (info.cls) {
  case DTypeClass::floating: store_float(data_.get(), i, dtype_, v); return;
  case DTypeClass::boolean: store_bool(data_.get(), i, v != 0.0); return;
  case DTypeClass::integer:
    if (beyond_i64(info) && v >= 9.2233720368547758e18) { // [2^63, 2^64) as uint64_t; past it saturates
      uint64_t u = v >= 1.8446744073709552e19 ? std::numeric_limits<uint64_t>::max() : static_cast<uint64_t>(v);
      set_i64(i, static_cast<int64_t>(u));
      return;
    }
    set_i64(i, saturating_to_i64(v));
    return;
  }
}

void HostTensor::set_i64(int64_t i, int64_t v) {
  switch (dtype_info(dtype_).cls) {
  case DTypeClass::integer: store_integer(data_.get(), i, dtype_size(dtype_), v); return;
  case DTypeClass::boolean: store_bool(data_.get(), i, v != 0); return;
  case DTypeClass::floating: set_f64(i, static_cast<double>(v)); return;
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
