#include "maxc/Tensor/Tensor.h"

#include "maxc/Support/Error.h"

#include <optional>

// Tensor::from_graph_value and Tensor::realize need a realization context:
// lib/Realization/RealizationContext.cpp. The arithmetic operators record
// ops: lib/Ops/TensorOperators.cpp.

namespace maxc {

class RealizationContext;

struct Tensor::Impl {
  // Realized state.
  std::optional<HostTensor> data;
  TensorType realized_type;
  // Unrealized state.
  RealizationContext *context = nullptr;
  std::vector<Value> values;
  std::vector<DeviceRef> mapping;
  std::string name;
};

static const Tensor::Impl &require(const std::shared_ptr<Tensor::Impl> &impl) {
  if (!impl)
    throw Error(ErrorCode::InvalidArgument, "use of a null Tensor");
  return *impl;
}

Tensor Tensor::from_host(HostTensor data, std::string name) {
  Tensor t;
  t.impl_ = std::make_shared<Impl>();
  t.impl_->realized_type = TensorType(data.dtype(), make_shape(data.shape()));
  t.impl_->data = std::move(data);
  t.impl_->name = std::move(name);
  return t;
}

Tensor Tensor::from_f64(DType dtype, std::vector<int64_t> shape, const std::vector<double> &values) {
  return from_host(HostTensor::from_f64(dtype, std::move(shape), values));
}

Tensor Tensor::from_i64(DType dtype, std::vector<int64_t> shape, const std::vector<int64_t> &values) {
  return from_host(HostTensor::from_i64(dtype, std::move(shape), values));
}

Tensor Tensor::make_unrealized(RealizationContext *context, std::vector<Value> values,
                               std::vector<DeviceRef> mapping) {
  if (values.empty())
    throw Error(ErrorCode::InvalidArgument, "an unrealized tensor needs at least one graph value");
  if (mapping.empty())
    for (const Value &v : values)
      mapping.push_back(v.type().device);
  if (mapping.size() != values.size())
    throw Error(ErrorCode::InvalidArgument, "device mapping has " + std::to_string(mapping.size()) +
                                                " entries for " + std::to_string(values.size()) + " shards");
  Tensor t;
  t.impl_ = std::make_shared<Impl>();
  t.impl_->context = context;
  t.impl_->values = std::move(values);
  t.impl_->mapping = std::move(mapping);
  return t;
}

void Tensor::set_realized(HostTensor data) const {
  Impl &impl = *impl_;
  impl.realized_type = TensorType(data.dtype(), make_shape(data.shape()));
  impl.data = std::move(data);
  impl.context = nullptr;
  impl.values.clear();
  impl.mapping.clear();
}

bool Tensor::is_realized() const { return require(impl_).data.has_value(); }
bool Tensor::is_sharded() const { return require(impl_).values.size() > 1; }

const TensorType &Tensor::type() const {
  const Impl &impl = require(impl_);
  return impl.data ? impl.realized_type : impl.values.front().type();
}

const HostTensor &Tensor::host() const {
  const Impl &impl = require(impl_);
  if (!impl.data)
    throw RealizationError("tensor is not realized; call realize() in a context that can realize "
                           "(an EagerRealizationContext)");
  return *impl.data;
}

const std::vector<Value> &Tensor::values() const {
  const Impl &impl = require(impl_);
  if (impl.data)
    throw Error(ErrorCode::InvalidArgument, "a realized tensor has no graph values");
  return impl.values;
}

Value Tensor::value() const {
  const auto &vs = values();
  if (vs.size() != 1)
    throw Error(ErrorCode::InvalidArgument,
                "tensor is sharded over " + std::to_string(vs.size()) + " values; pick a shard");
  return vs.front();
}

const std::vector<DeviceRef> &Tensor::device_mapping() const { return require(impl_).mapping; }
RealizationContext *Tensor::context() const { return require(impl_).context; }
const std::string &Tensor::name() const { return require(impl_).name; }
Tensor &Tensor::set_name(std::string name) {
  require(impl_);
  impl_->name = std::move(name);
  return *this;
}

} // namespace maxc
