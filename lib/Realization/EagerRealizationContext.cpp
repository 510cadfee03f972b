#include "maxc/Realization/EagerRealizationContext.h"

#include "maxc/Support/Error.h"

namespace maxc {

namespace {
GraphExecutor eager_executor = nullptr;
} // namespace

void set_eager_executor(GraphExecutor executor) { eager_executor = executor; }

EagerRealizationContext::EagerRealizationContext(std::string prefix)
    : graph_("eager"), prefix_(std::move(prefix)) {}

EagerRealizationContext::~EagerRealizationContext() {
  try {
    realize_all();
  } catch (...) {
    // Destructors must not throw; an unrealized tensor stays unrealized and
    // reports the problem if it is used again.
  }
}

std::vector<Tensor> EagerRealizationContext::record(const std::string &op, const std::vector<Tensor> &operands,
                                                    const Attrs &attrs) {
  std::vector<ValueId> ids;
  for (const Tensor &t : operands) {
    if (t.is_null())
      throw Error(ErrorCode::InvalidArgument, op + ": use of a null Tensor");
    if (t.is_realized()) {
      // Realized tensors enter as constants; their values are already known.
      std::string name = graph_.add_constant(t.name().empty() ? "input" : qualify(t.name()), t.host());
      ids.push_back(graph_.add_node("constant", {}, {{"name", name}}).front());
      continue;
    }
    if (t.context() != this)
      throw Error(ErrorCode::ForeignValue, op + ": tensor was recorded in another realization context");
    if (t.is_sharded())
      throw Error(ErrorCode::InvalidArgument, op + ": sharded tensors are not supported in eager mode");
    ids.push_back(t.value().id());
  }
  std::vector<Tensor> out;
  for (ValueId id : graph_.add_node(op, ids, attrs)) {
    out.push_back(Tensor::make_unrealized(this, {graph_.value(id)}));
    live_.push_back(out.back().impl());
  }
  return out;
}

void EagerRealizationContext::compute_pending() {
  if (!eager_executor)
    throw Error(ErrorCode::Internal, "no interpreter to realize tensors with (link maxc's Interpreter component)");
  DimBindings dims;
  eager_executor(graph_, computed_, dims, computed_nodes_);
  computed_nodes_ = graph_.nodes().size();
}

void EagerRealizationContext::realize(const Tensor &tensor) {
  if (tensor.is_realized())
    return;
  if (tensor.context() != this)
    throw Error(ErrorCode::ForeignValue, "realize: tensor was recorded in another realization context");
  compute_pending();
  tensor.set_realized(*computed_.at(tensor.value().id()));
}

void EagerRealizationContext::realize_all() {
  compute_pending();
  for (auto &weak : live_) {
    if (auto impl = weak.lock()) {
      Tensor handle = Tensor::wrap(std::move(impl));
      if (!handle.is_realized())
        handle.set_realized(*computed_.at(handle.value().id()));
    }
  }
  live_.clear();
}

} // namespace maxc
