#include "maxc/Realization/RealizationContext.h"

#include "maxc/Support/Error.h"

#include <algorithm>

namespace maxc {

// The stack of live contexts on this thread, innermost last.
static thread_local std::vector<RealizationContext *> context_stack;

RealizationContext::RealizationContext() { context_stack.push_back(this); }

RealizationContext::~RealizationContext() {
  // Normally the innermost; tolerate out-of-order destruction (e.g. contexts
  // held in containers) by removing this one wherever it is.
  auto it = std::find(context_stack.rbegin(), context_stack.rend(), this);
  if (it != context_stack.rend())
    context_stack.erase(std::next(it).base());
}

RealizationContext *RealizationContext::current() {
  return context_stack.empty() ? nullptr : context_stack.back();
}

RealizationContext &RealizationContext::require_current(const std::string &what) {
  if (RealizationContext *ctx = current())
    return *ctx;
  throw Error(ErrorCode::NoContext, what + ": no realization context is active; create a "
                                           "GraphRealizationContext or EagerRealizationContext first");
}

std::string RealizationContext::qualify(const std::string &name) const {
  const std::string &p = prefix();
  if (p.empty())
    return name;
  if (name.empty())
    return p;
  return p + "." + name;
}

Tensor record_op(const std::string &op, const std::vector<Tensor> &operands, const Attrs &attrs) {
  auto results = record_op_multi(op, operands, attrs);
  if (results.size() != 1)
    throw Error(ErrorCode::Internal, op + ": expected one result, got " + std::to_string(results.size()));
  return results.front();
}

std::vector<Tensor> record_op_multi(const std::string &op, const std::vector<Tensor> &operands,
                                    const Attrs &attrs) {
  return RealizationContext::require_current(op).record(op, operands, attrs);
}

// Tensor members that need a realization context (Tensor sits below
// Realization; see lib/Tensor/Tensor.cpp).

Tensor Tensor::from_graph_value(const Value &value) {
  RealizationContext &ctx = RealizationContext::require_current("Tensor::from_graph_value");
  if (!value.valid())
    throw Error(ErrorCode::InvalidArgument, "Tensor::from_graph_value: null value");
  return make_unrealized(&ctx, {value});
}

const Tensor &Tensor::realize() const {
  if (!is_realized())
    context()->realize(*this);
  return *this;
}

} // namespace maxc
