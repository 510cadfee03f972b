// maxc::Tensor — a handle that is either realized (host data) or unrealized
// (one or more symbolic graph values recorded in a realization context).
//
// Operators and maxc::ops functions never compute directly: they ask the
// current RealizationContext to record an op and return an unrealized Tensor.
// What "record" means is the context's business: a GraphRealizationContext
// builds a Graph for ahead-of-time compilation and refuses to realize; an
// EagerRealizationContext runs the reference interpreter on demand.
#pragma once

#include "maxc/IR/Graph.h"
#include "maxc/IR/HostTensor.h"
#include "maxc/IR/TensorType.h"

#include <memory>
#include <string>
#include <vector>

namespace maxc {

class RealizationContext;

class Tensor {
public:
  /// A null tensor (no data, no value); most operations reject it.
  Tensor() = default;

  /// A realized tensor holding `data`, with an optional name (used when it
  /// becomes a graph constant).
  static Tensor from_host(HostTensor data, std::string name = {});
  /// A realized f32/i64/... tensor from values.
  static Tensor from_f64(DType dtype, std::vector<int64_t> shape, const std::vector<double> &values);
  static Tensor from_i64(DType dtype, std::vector<int64_t> shape, const std::vector<int64_t> &values);
  /// An unrealized tensor backed by `value` of the current context's graph.
  /// Throws if there is no current context or the value is from another graph.
  static Tensor from_graph_value(const Value &value);

  bool is_null() const { return impl_ == nullptr; }
  bool is_realized() const;
  /// More than one graph value: a sharded tensor.
  bool is_sharded() const;

  /// Type of the tensor (of shard 0 for a sharded tensor).
  const TensorType &type() const;
  DType dtype() const { return type().dtype; }
  const Shape &shape() const { return type().shape; }
  int64_t rank() const { return type().rank(); }

  /// The host data of a realized tensor; throws RealizationError otherwise.
  const HostTensor &host() const;
  /// Asks the owning context to realize this tensor. Graph contexts throw
  /// RealizationError; eager contexts compute it.
  const Tensor &realize() const;

  /// The graph values of an unrealized tensor (one per shard).
  const std::vector<Value> &values() const;
  /// The single graph value; throws for realized or sharded tensors.
  Value value() const;
  operator Value() const { return value(); } // NOLINT: lets graph.output({y}) read naturally
  /// Device of each shard of a sharded tensor.
  const std::vector<DeviceRef> &device_mapping() const;
  /// The context that recorded this tensor (null for realized tensors).
  RealizationContext *context() const;

  const std::string &name() const;
  Tensor &set_name(std::string name);

  /// Identity (same underlying tensor), not elementwise equality.
  bool same_as(const Tensor &o) const { return impl_ == o.impl_; }

  struct Impl;
  /// For realization contexts: makes an unrealized tensor.
  static Tensor make_unrealized(RealizationContext *context, std::vector<Value> values,
                                std::vector<DeviceRef> mapping = {});
  /// For realization contexts: realizes in place, so every handle sees it.
  void set_realized(HostTensor data) const;
  const std::shared_ptr<Impl> &impl() const { return impl_; }
  /// For realization contexts: a handle sharing an existing impl.
  static Tensor wrap(std::shared_ptr<Impl> impl) {
    Tensor t;
    t.impl_ = std::move(impl);
    return t;
  }

private:
  std::shared_ptr<Impl> impl_;
};

// Arithmetic operators record ops in the current context. A number operand
// becomes a scalar of the tensor's dtype.
Tensor operator+(const Tensor &a, const Tensor &b);
Tensor operator-(const Tensor &a, const Tensor &b);
Tensor operator*(const Tensor &a, const Tensor &b);
Tensor operator/(const Tensor &a, const Tensor &b);
Tensor operator+(const Tensor &a, double b);
Tensor operator-(const Tensor &a, double b);
Tensor operator*(const Tensor &a, double b);
Tensor operator/(const Tensor &a, double b);
Tensor operator+(double a, const Tensor &b);
Tensor operator-(double a, const Tensor &b);
Tensor operator*(double a, const Tensor &b);
Tensor operator/(double a, const Tensor &b);
Tensor operator-(const Tensor &a);

} // namespace maxc
