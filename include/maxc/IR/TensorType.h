// The type of a graph value: element type, shape and device.
#pragma once

#include "maxc/IR/DType.h"
#include "maxc/IR/Dim.h"

#include <string>

namespace maxc {

/// Where a tensor lives: the host CPU or GPU number N.
struct DeviceRef {
  enum class Kind : uint8_t { cpu, gpu };
  Kind kind = Kind::cpu;
  int id = 0;

  static DeviceRef cpu() { return {Kind::cpu, 0}; }
  static DeviceRef gpu(int id = 0) { return {Kind::gpu, id}; }
  /// "cpu" or "gpu:N"; throws maxc::Error on anything else.
  static DeviceRef parse(const std::string &text);
  std::string to_string() const;

  bool operator==(const DeviceRef &o) const { return kind == o.kind && id == o.id; }
  bool operator!=(const DeviceRef &o) const { return !(*this == o); }
  bool operator<(const DeviceRef &o) const { return kind != o.kind ? kind < o.kind : id < o.id; }
};

struct TensorType {
  DType dtype = DType::f32;
  Shape shape;
  DeviceRef device = DeviceRef::cpu();

  TensorType() = default;
  TensorType(DType dtype, Shape shape, DeviceRef device = DeviceRef::cpu())
      : dtype(dtype), shape(std::move(shape)), device(device) {}

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  /// "f32[batch,5]", with "@gpu:0" appended off the CPU.
  std::string to_string() const;
  /// Parses to_string()'s form; throws maxc::Error when malformed.
  static TensorType parse(const std::string &text);

  bool operator==(const TensorType &o) const {
    return dtype == o.dtype && shape == o.shape && device == o.device;
  }
  bool operator!=(const TensorType &o) const { return !(*this == o); }
};

} // namespace maxc
