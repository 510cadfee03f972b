#include "maxc/Codegen/Profile.h"

#include "maxc/Ops/OpRegistry.h"

#include <algorithm>
#include <functional>
#include <set>

namespace maxc {

namespace {

/// The kernel of node `n` (or output copy `n - nodes`) of `g`, with the
/// nodes it computes.
ProfiledKernel describe_kernel(const Graph &g, const std::string &graph_name, const LoweringPlan &plan, size_t n) {
  ProfiledKernel k;
  k.graph = &g;
  k.graph_name = graph_name;
  k.node = n;
  std::set<size_t> covered;
  // A fused value is recomputed by its reader: its producer (and the fused
  // values that one reads) are part of the kernel.
  std::function<void(ValueId)> fused_from = [&](ValueId v) {
    if (plan.values[v].storage != Storage::fused)
      return;
    int64_t p = g.value_info(v).producer;
    if (p < 0 || !covered.insert(static_cast<size_t>(p)).second)
      return;
    for (ValueId o : g.nodes()[static_cast<size_t>(p)].operands)
      fused_from(o);
  };
  if (n < g.nodes().size()) {
    const Node &node = g.nodes()[n];
    k.op = node.op;
    covered.insert(n);
    for (ValueId o : node.operands)
      fused_from(o);
    if (auto e = plan.epilogues.find(n); e != plan.epilogues.end()) {
      int64_t p = g.value_info(e->second).producer;
      if (p >= 0 && covered.insert(static_cast<size_t>(p)).second)
        for (ValueId o : g.nodes()[static_cast<size_t>(p)].operands)
          fused_from(o);
    }
  } else {
    k.op = "copy";
    fused_from(g.output_ids().at(n - g.nodes().size()));
  }
  // The kernel's own op first, then the others in graph order.
  if (n < g.nodes().size())
    k.ops.push_back(k.op);
  std::set<std::string> names;
  for (size_t c : covered) {
    const Node &node = g.nodes()[c];
    if (node.op == "constant")
      continue;
    if (std::find(k.ops.begin(), k.ops.end(), node.op) == k.ops.end())
      k.ops.push_back(node.op);
    if (!node.name.empty() && names.insert(node.name).second)
      k.nodes.push_back(node.name);
  }
  return k;
}

void add_graph(std::vector<ProfiledKernel> &out, const Graph &g, const std::string &graph_name,
               const LoweringPlans &plans) {
  const LoweringPlan &plan = plans.at(&g);
  for (size_t n : plan.kernels)
    if (!is_call(g.nodes()[n]))
      out.push_back(describe_kernel(g, graph_name, plan, n));
  for (const auto &copy : plan.output_copies)
    out.push_back(describe_kernel(g, graph_name, plan, g.nodes().size() + copy.first));
}

} // namespace

std::string ProfiledKernel::label() const {
  std::string out = op;
  for (size_t i = 1; i < ops.size() && i <= 3; ++i)
    out += "+" + ops[i];
  if (ops.size() > 4)
    out += "+...";
  return out;
}

std::string ProfiledKernel::nodes_summary(size_t shown) const {
  std::string out;
  for (size_t i = 0; i < nodes.size() && i < shown; ++i)
    out += (i ? ", " : "") + nodes[i];
  if (nodes.size() > shown)
    out += " +" + std::to_string(nodes.size() - shown) + " more";
  return out;
}

std::vector<ProfiledKernel> profiled_kernels(const Graph &lowered, const LoweringPlans &plans) {
  std::vector<ProfiledKernel> out;
  for (const auto &[name, sub] : lowered.subgraphs())
    add_graph(out, *sub, name, plans);
  add_graph(out, lowered, "main", plans);
  return out;
}

} // namespace maxc
