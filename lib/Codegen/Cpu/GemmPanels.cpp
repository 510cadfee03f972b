#include "Cpu/GemmPanels.h"

#include "maxc/Transforms/MatmulLayout.h"

#include <cstring>

namespace maxc::codegen {

namespace {

// Whether value `v` of `g` can be read as a packed GEMM B: [K, N] f32, static.
bool packable_type(const Graph &g, ValueId v) {
  const TensorType &t = g.type_of(v);
  return t.dtype == DType::f32 && t.rank() == 2 && shape_is_static(t.shape) && t.shape[0].value() > 0 &&
         t.shape[1].value() > 0;
}

// Per value of `g`: the (node, operand slot) pairs that read it.
std::vector<std::vector<std::pair<size_t, size_t>>> uses_of(const Graph &g) {
  std::vector<std::vector<std::pair<size_t, size_t>>> uses(g.num_values());
  for (size_t n = 0; n < g.nodes().size(); ++n)
    for (size_t s = 0; s < g.nodes()[n].operands.size(); ++s)
      uses[g.nodes()[n].operands[s]].push_back({n, s});
  return uses;
}

} // namespace

bool PackedWeights::packed_value(const Graph &g, ValueId v) const {
  const ValueInfo &info = g.value_info(v);
  if (info.producer < 0)
    return inputs.count({&g, info.index}) != 0;
  const Node &n = g.nodes()[static_cast<size_t>(info.producer)];
  return n.op == "constant" && packed_constant(g, n.attrs.get_string("name"));
}

PackedWeights plan_packed_weights(const Graph &root, const LoweringPlans &plans, unsigned lanes) {
  PackedWeights out;
  out.nr = 2 * static_cast<int64_t>(lanes);
  std::map<std::string, std::vector<bool>> bound = constant_bound_inputs(root);
  std::vector<const Graph *> graphs = {&root};
  for (const auto &[name, sub] : root.subgraphs())
    graphs.push_back(sub.get());
  // Candidates: every use a GEMM's B, or (constants) a call's argument,
  // checked against the callee's parameter below.
  for (const Graph *g : graphs) {
    const LoweringPlan &plan = plans.at(g);
    auto uses = uses_of(*g);
    std::vector<bool> output(g->num_values(), false);
    for (ValueId v : g->output_ids())
      output[v] = true;
    auto only_gemm_b = [&](ValueId v, bool calls) {
      if (output[v] || uses[v].empty() || !packable_type(*g, v))
        return false;
      for (auto [n, s] : uses[v]) {
        const Node &node = g->nodes()[n];
        bool gemm_b = s == 1 && node.operands[0] != v && matmul_uses_gemm(*g, plan, node);
        if (!gemm_b && !(calls && node.op == "call"))
          return false;
      }
      return true;
    };
    for (const Node &n : g->nodes())
      if (n.op == "constant" && only_gemm_b(n.results[0], true))
        out.constants.insert({g, n.attrs.get_string("name")});
    if (auto it = bound.find(g->name()); g != &root && it != bound.end())
      for (size_t i = 0; i < g->input_ids().size(); ++i)
        if (it->second[i] && only_gemm_b(g->input_ids()[i], false))
          out.inputs.insert({g, i});
  }
  // A call's constant argument and the callee's parameter are packed
  // together or not at all (same type, too).
  for (bool changed = true; changed;) {
    changed = false;
    for (const Graph *g : graphs)
      for (const Node &n : g->nodes()) {
        if (n.op != "call")
          continue;
        const Graph *callee = root.find_subgraph(n.attrs.get_string("callee"));
        for (size_t i = 0; i < n.operands.size(); ++i) {
          const ValueInfo &info = g->value_info(n.operands[i]);
          const Node *producer = info.producer >= 0 ? &g->nodes()[static_cast<size_t>(info.producer)] : nullptr;
          std::pair<const Graph *, std::string> c;
          bool constant = producer && producer->op == "constant";
          if (constant)
            c = {g, producer->attrs.get_string("name")};
          bool arg = constant && out.constants.count(c);
          bool param = callee && i < callee->input_ids().size() && out.inputs.count({callee, i});
          if (arg && param && g->type_of(n.operands[i]) == callee->type_of(callee->input_ids()[i]))
            continue;
          if (arg) {
            out.constants.erase(c);
            changed = true;
          }
          if (param) {
            out.inputs.erase({callee, i});
            changed = true;
          }
        }
      }
  }
  return out;
}

std::vector<float> pack_gemm_panels(const HostTensor &b, int64_t nr) {
  int64_t k = b.shape()[0], n = b.shape()[1], panels = (n + nr - 1) / nr;
  std::vector<float> out(static_cast<size_t>(panels * nr * k), 0.0f);
  const auto *src = reinterpret_cast<const float *>(b.data());
  for (int64_t p = 0; p < panels; ++p) {
    int64_t width = std::min(nr, n - p * nr);
    for (int64_t r = 0; r < k; ++r)
      std::memcpy(&out[static_cast<size_t>((p * k + r) * nr)], src + r * n + p * nr,
                  static_cast<size_t>(width) * sizeof(float));
  }
  return out;
}

ConstantRewrite packed_weights_rewrite(const PackedWeights &packed) {
  return [&packed](const Graph &g, const std::string &name) -> std::shared_ptr<const std::vector<float>> {
    if (!packed.packed_constant(g, name))
      return nullptr;
    return std::make_shared<const std::vector<float>>(pack_gemm_panels(g.constant(name), packed.nr));
  };
}

} // namespace maxc::codegen
