#include "maxc/Codegen/LoweringPlan.h"

#include "maxc/Support/Error.h"

#include <algorithm>
#include <set>

namespace maxc {

bool is_elemental_op(const std::string &op) {
  static const std::set<std::string> ops = {
      "neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "gelu", "silu", "erf", "sin", "cos",
      "floor", "ceil", "round", "sign", "not", "cast", "add", "sub", "mul", "div", "pow", "maximum", "minimum", "mod",
      "eq", "ne", "lt", "le", "gt", "ge", "and", "or", "where", "full", "iota", "range", "reshape", "transpose",
      "broadcast_to", "squeeze", "unsqueeze", "concat", "split", "slice", "gather", "pad", "tile", "allreduce_sum"};
  return ops.count(op) != 0;
}

bool is_reduction_op(const std::string &op) {
  return op == "sum" || op == "mean" || op == "max" || op == "min" || op == "prod" || op == "argmax" ||
         op == "argmin";
}

// Ops with no operands whose elements cost nothing to recompute.
static bool is_cheap_op(const std::string &op) { return op == "full" || op == "iota" || op == "range"; }

LoweringPlan plan_lowering(const Graph &g) {
  LoweringPlan plan;
  const auto &nodes = g.nodes();
  plan.values.resize(g.num_values());
  std::vector<std::vector<size_t>> consumers(g.num_values());
  for (size_t n = 0; n < nodes.size(); ++n)
    for (ValueId v : nodes[n].operands)
      consumers[v].push_back(n);

  for (size_t i = 0; i < g.input_ids().size(); ++i)
    plan.values[g.input_ids()[i]] = {Storage::input, i};
  std::vector<bool> is_output(g.num_values(), false);
  for (size_t o = 0; o < g.output_ids().size(); ++o) {
    ValueId v = g.output_ids()[o];
    const ValueInfo &info = g.value_info(v);
    bool elsewhere = info.producer < 0 || nodes[info.producer].op == "constant" || is_output[v];
    if (elsewhere)
      plan.output_copies.emplace_back(o, v);
    else
      plan.values[v] = {Storage::output, o};
    is_output[v] = true;
  }

  // Fusion decisions, node by node.
  for (size_t n = 0; n < nodes.size(); ++n) {
    const Node &node = nodes[n];
    for (ValueId v : node.results) {
      ValuePlan &p = plan.values[v];
      if (p.storage == Storage::output)
        continue;
      if (node.op == "constant") {
        p = {Storage::constant, 0};
        continue;
      }
      bool fuse = false;
      if (is_elemental_op(node.op)) {
        if (is_cheap_op(node.op)) {
          // ...except into a call: its operands are passed as buffers.
          fuse = std::none_of(consumers[v].begin(), consumers[v].end(),
                              [&](size_t c) { return nodes[c].op == "call"; });
        } else if (consumers[v].size() == 1) {
          const Node &c = nodes[consumers[v][0]];
          // Fuse where every element is still computed once: into an
          // elemental consumer of the same size, or into a reduction.
          fuse = (is_elemental_op(c.op) && c.op != "gather" &&
                  shape_numel(g.type_of(c.results[0]).shape) == shape_numel(g.type_of(v).shape)) ||
                 (is_reduction_op(c.op) && c.operands[0] == v);
        }
      }
      p = {fuse ? Storage::fused : Storage::temp, 0};
    }
  }

  // The kernel that evaluates each node: its own if any result is stored,
  // else its (single) consumer's.
  std::vector<size_t> kernel_of(nodes.size());
  for (size_t n = nodes.size(); n-- > 0;) {
    const Node &node = nodes[n];
    bool stored = node.results.empty();
    size_t k = n;
    for (ValueId v : node.results) {
      if (plan.values[v].storage != Storage::fused)
        stored = true;
      else
        for (size_t c : consumers[v])
          k = std::max(k, kernel_of[c]);
    }
    kernel_of[n] = stored ? n : k;
    if (stored && node.op != "constant")
      plan.kernels.push_back(n);
  }
  std::reverse(plan.kernels.begin(), plan.kernels.end());

  // Liveness: a stored value is read until the last kernel that reads it.
  std::vector<size_t> last_use(g.num_values(), 0);
  for (size_t n = 0; n < nodes.size(); ++n)
    for (ValueId v : nodes[n].operands)
      last_use[v] = std::max(last_use[v], kernel_of[n]);

  // Slots: a temporary takes a free slot of the same size, else a new one.
  struct Live {
    size_t slot;
    size_t until;
  };
  std::vector<Live> live;
  std::vector<bool> slot_free;
  for (size_t n = 0; n < nodes.size(); ++n) {
    for (auto it = live.begin(); it != live.end();) {
      if (it->until < n) {
        slot_free[it->slot] = true;
        it = live.erase(it);
      } else {
        ++it;
      }
    }
    for (ValueId v : nodes[n].results) {
      ValuePlan &p = plan.values[v];
      if (p.storage != Storage::temp)
        continue;
      const TensorType &t = g.type_of(v);
      Dim bytes = shape_numel(t.shape) * Dim(static_cast<int64_t>(dtype_size(t.dtype)));
      size_t slot = plan.slots.size();
      for (size_t s = 0; s < plan.slots.size(); ++s)
        if (slot_free[s] && plan.slots[s].bytes == bytes) {
          slot = s;
          break;
        }
      if (slot == plan.slots.size()) {
        plan.slots.push_back({bytes});
        slot_free.push_back(false);
      }
      slot_free[slot] = false;
      p.index = slot;
      live.push_back({slot, std::max(last_use[v], n)});
    }
  }
  // Scratch for convolutions lowered to GEMM: one slot of the largest need.
  int64_t scratch = 0;
  for (size_t n : plan.kernels) {
    int64_t bytes = 0;
    if (conv_uses_gemm(g, nodes[n], &bytes))
      scratch = std::max(scratch, bytes);
  }
  if (scratch > 0) {
    plan.scratch_slot = plan.slots.size();
    plan.slots.push_back({Dim(scratch)});
  }
  return plan;
}

bool conv_uses_gemm(const Graph &g, const Node &node, int64_t *bytes) {
  if (node.op != "conv2d" || node.attrs.get_int("groups") != 1)
    return false;
  const TensorType &x = g.type_of(node.operands[0]), &w = g.type_of(node.operands[1]);
  const TensorType &out = g.type_of(node.results[0]);
  if (x.dtype != DType::f32 || !shape_is_static({x.shape[1], x.shape[2], x.shape[3]}) ||
      !shape_is_static(w.shape) || !shape_is_static({out.shape[2], out.shape[3]}))
    return false;
  // colsT: [C*KH*KW, OH*OW] f32
  if (bytes)
    *bytes = x.shape[1].value() * w.shape[2].value() * w.shape[3].value() * out.shape[2].value() *
             out.shape[3].value() * 4;
  return true;
}

static Dim own_slots_bound(const Graph &g) {
  Dim total(0);
  for (const WorkspaceSlot &s : plan_lowering(g).slots)
    total = total + s.bytes + Dim(63);
  return total;
}

Dim workspace_bound(const Graph &graph) {
  Dim callees(0);
  bool all_static = true;
  std::vector<Dim> needs;
  for (const auto &[name, sub] : graph.subgraphs()) {
    needs.push_back(own_slots_bound(*sub));
    all_static = all_static && needs.back().is_static();
  }
  for (const Dim &d : needs)
    callees = all_static ? Dim(std::max(callees.value(), d.value())) : callees + d;
  return own_slots_bound(graph) + callees;
}

std::string describe_plan(const Graph &g, const LoweringPlan &plan) {
  static const char *names[] = {"input", "output", "constant", "temp", "fused"};
  std::string out;
  for (size_t n = 0; n < g.nodes().size(); ++n)
    for (ValueId v : g.nodes()[n].results) {
      const ValuePlan &p = plan.values[v];
      out += "%" + std::to_string(v) + " " + g.nodes()[n].op + ": " + names[static_cast<int>(p.storage)];
      if (p.storage == Storage::temp)
        out += " slot " + std::to_string(p.index) + " (" + plan.slots[p.index].bytes.to_string() + " bytes)";
      if (p.storage == Storage::output || p.storage == Storage::input)
        out += " " + std::to_string(p.index);
      out += "\n";
    }
  return out;
}

} // namespace maxc
