#include "maxc/Ops/CallBinding.h"

#include "maxc/Ops/OpRegistry.h"
#include "maxc/Support/Error.h"

#include <set>

namespace maxc {

DimBinding bind_body_inputs(const Graph &body, const std::vector<TensorType> &operands, const std::string &what) {
  const auto &inputs = body.input_ids();
  if (inputs.size() != operands.size())
    throw Error(ErrorCode::OperandCount, what + ": expected " + std::to_string(inputs.size()) + " operands, got " +
                                             std::to_string(operands.size()));
  DimBinding binding;
  auto mismatch = [&](size_t i, const std::string &why) {
    return Error(ErrorCode::ShapeMismatch, what + ": operand " + std::to_string(i) + " is " +
                                               operands[i].to_string() + ", the subgraph expects " +
                                               body.type_of(inputs[i]).to_string() + why);
  };
  // Bare symbols bind first (as bind_input_dims does), compound dims check after.
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorType &want = body.type_of(inputs[i]);
    if (want.dtype != operands[i].dtype || want.rank() != operands[i].rank())
      throw mismatch(i, "");
    for (size_t d = 0; d < want.shape.size(); ++d) {
      if (!want.shape[d].is_symbol())
        continue;
      auto [it, inserted] = binding.emplace(want.shape[d].symbol(), operands[i].shape[d]);
      if (!inserted && it->second != operands[i].shape[d])
        throw mismatch(i, " ('" + want.shape[d].symbol() + "' is already " + it->second.to_string() + ")");
    }
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorType &want = body.type_of(inputs[i]);
    for (size_t d = 0; d < want.shape.size(); ++d)
      if (!want.shape[d].is_symbol() && want.shape[d].substitute(binding) != operands[i].shape[d])
        throw mismatch(i, " (dim " + std::to_string(d) + ")");
  }
  return binding;
}

DimBinding without_identities(DimBinding binding) {
  for (auto it = binding.begin(); it != binding.end();)
    it = it->second == Dim(it->first) ? binding.erase(it) : std::next(it);
  return binding;
}

DimBinding call_dim_binding(const Graph &caller, const Node &node) {
  const Graph *body = call_body(caller, node);
  if (!body)
    return {};
  std::vector<TensorType> operands;
  for (ValueId v : node.operands)
    operands.push_back(caller.type_of(v));
  return without_identities(bind_body_inputs(*body, operands, "call @" + body->name()));
}

std::vector<std::string> call_bound_symbols(const Graph &root) {
  // Every graph reachable through the subgraph table and node bodies, each
  // once (a worklist: no recursion, whatever the nesting).
  std::set<std::string> out;
  std::set<const Graph *> seen{&root};
  std::vector<const Graph *> work{&root};
  std::vector<std::pair<const Graph *, DimBinding>> bindings;
  while (!work.empty()) {
    const Graph *g = work.back();
    work.pop_back();
    for (const Node &n : g->nodes()) {
      DimBinding b = call_dim_binding(*g, n);
      for (const auto &[symbol, dim] : b)
        out.insert(symbol);
      if (!b.empty())
        bindings.emplace_back(g, std::move(b));
      for (const Graph *body : node_bodies(*g, n))
        if (seen.insert(body).second)
          work.push_back(body);
    }
    for (const auto &[name, sub] : g->subgraphs())
      if (seen.insert(sub.get()).second)
        work.push_back(sub.get());
  }
  for (const auto &[g, b] : bindings)
    for (const auto &[symbol, dim] : b)
      for (const std::string &s : dim.symbols())
        if (out.count(s))
          throw Error(ErrorCode::InvalidGraph, "graph '" + g->name() + "': a call binds '" + symbol + "' to " +
                                                   dim.to_string() + ", which names '" + s +
                                                   "', itself a dim bound per call: nested per-call bindings "
                                                   "are not supported yet");
  return {out.begin(), out.end()};
}

} // namespace maxc
