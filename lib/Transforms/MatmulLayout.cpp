#include "maxc/Transforms/MatmulLayout.h"
#include "maxc/Transforms/CallSites.h"

#include "maxc/Support/BulkMemory.h"
#include "maxc/Support/FileSystem.h"

#include "maxc/Ops/OpRegistry.h"
#include "maxc/Ops/Ops.h"

#include <cstring>
#include <set>
#include <string_view>

namespace maxc {

namespace {

const Node *producer(const Graph &g, ValueId id) {
  const ValueInfo &info = g.value_info(id);
  return info.producer >= 0 ? &g.nodes()[info.producer] : nullptr;
}

/// Operand `slot` of `node` is read transposed (and rewritten to a row-major
/// matmul by decompose()).
bool transposed_use(const Node &node, size_t slot) {
  if (node.op == "linear")
    return slot == 1;
  if (node.op == "matmul")
    return (slot == 0 && node.attrs.get_bool("transpose_a")) || (slot == 1 && node.attrs.get_bool("transpose_b"));
  return false;
}

} // namespace

TensorType transposed_type(const TensorType &type) {
  TensorType t = type;
  std::swap(t.shape[t.shape.size() - 1], t.shape[t.shape.size() - 2]);
  return t;
}

CallSiteLayout plan_call_site_layout(const Graph &root) {
  std::map<std::string, std::vector<bool>> bound = constant_bound_inputs(root);
  CallSiteLayout layout;
  for (const auto &[name, sub] : root.subgraphs()) {
    auto it = bound.find(name);
    if (it == bound.end())
      continue;
    std::set<ValueId> outputs(sub->output_ids().begin(), sub->output_ids().end());
    for (size_t i = 0; i < sub->input_ids().size(); ++i) {
      ValueId id = sub->input_ids()[i];
      if (!it->second[i] || sub->type_of(id).rank() < 2)
        continue;
      bool transposed = false, other = outputs.count(id) != 0;
      for (const Node &n : sub->nodes())
        for (size_t s = 0; s < n.operands.size(); ++s)
          if (n.operands[s] == id)
            (transposed_use(n, s) ? transposed : other) = true;
      if (transposed)
        layout.inputs[name].push_back({i, !other});
    }
  }
  return layout;
}

Tensor MatmulLayout::transposed(ValueId id, const Tensor &operand) {
  if (auto it = pretransposed_.find(id); it != pretransposed_.end())
    return it->second;
  if (const Node *p = producer(from_, id); p && p->op == "constant") {
    const std::string &name = p->attrs.get_string("name");
    if (auto it = constants_.find(name); it != constants_.end())
      return it->second;
    // Constants with identical bytes (a tied weight passed to several
    // instances) share one transposed copy.
    const HostTensor &w = from_.constant(name);
    size_t hash = sampled_fingerprint(w.data(), w.nbytes()); // candidates; the bytes are compared below
    for (auto [it, end] = by_bytes_.equal_range(hash); it != end; ++it) {
      const HostTensor &o = *it->second.first;
      if (o.dtype() == w.dtype() && o.shape() == w.shape() && std::memcmp(o.data(), w.data(), w.nbytes()) == 0)
        return constants_[name] = it->second.second;
    }
    // Made only when read: the CPU packs GEMM panels from w itself, so
    // that no transposed copy is ever resident (Graph::add_transposed_constant).
    Tensor t = ctx_.add_transposed_source(w, name + ".T");
    by_bytes_.emplace(hash, std::make_pair(&w, t));
    return constants_[name] = t;
  }
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < operand.rank(); ++d)
    perm.push_back(d);
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  return ops::transpose(operand, perm);
}

std::vector<Tensor> MatmulLayout::rewrite_matmul(const Node &node, const std::vector<Tensor> &operands) {
  if (node.op != "matmul")
    return {};
  bool flags[2] = {node.attrs.get_bool("transpose_a"), node.attrs.get_bool("transpose_b")};
  if (!flags[0] && !flags[1])
    return {};
  Tensor in[2] = {operands[0], operands[1]};
  for (int i = 0; i < 2; ++i)
    if (flags[i])
      in[i] = transposed(node.operands[i], operands[i]);
  return {ops::matmul(in[0], in[1])};
}

std::vector<Tensor> MatmulLayout::rewrite_call(const Node &node, const std::vector<Tensor> &operands,
                                               const CallSiteLayout &layout) {
  const std::string *callee = call_body_name(node);
  if (!callee)
    return {};
  auto it = layout.inputs.find(*callee);
  if (it == layout.inputs.end())
    return {};
  std::vector<Tensor> in = operands;
  for (const PretransposedInput &p : it->second) {
    Tensor t = transposed(node.operands[p.index], operands[p.index]);
    if (p.replaces)
      in[p.index] = t;
    else
      in.push_back(t);
  }
  return ctx_.record(node.op, in, node.attrs);
}

} // namespace maxc
