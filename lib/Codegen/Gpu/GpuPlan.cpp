// The GPU backends' plan pass (refine_gpu_plans, Codegen/GpuModelCompiler.h):
// the fusion decisions the GPU kernels take on top of the common lowering
// plan, made once when the driver plans (gpu_plan_options), so that the
// plan the driver reports is the one GpuKernelEmitter runs. Pure IR
// analysis, no LLVM. Also the row grouping both share (row_group).
#include "Gpu/GpuPlan.h"

#include "maxc/Codegen/GpuModelCompiler.h"
#include "maxc/Support/Error.h"
#include "maxc/Ops/OpRegistry.h"
#include "maxc/Transforms/CallSites.h"

#include <algorithm>
#include <map>
#include <set>

namespace maxc::codegen {

bool constant_value(const LoweringPlan &plan, const std::vector<bool> &constant_params, ValueId v) {
  const ValuePlan &vp = plan.values[v];
  return vp.storage == Storage::constant ||
         (vp.storage == Storage::input && vp.index < constant_params.size() && constant_params[vp.index]);
}

ReductionShape reduction_shape(const Graph &g, const Node &node) {
  const Shape &xs = g.type_of(node.operands[0]).shape;
  int64_t rank = static_cast<int64_t>(xs.size());
  ReductionShape s;
  s.reduced.assign(rank, false);
  s.keepdims = node.attrs.get_bool("keepdims");
  std::vector<int64_t> axes = node.attrs.get_ints("axes");
  if (axes.empty())
    std::fill(s.reduced.begin(), s.reduced.end(), true);
  for (int64_t a : axes)
    s.reduced[a < 0 ? a + rank : a] = true;
  for (int64_t d = 0; d < rank; ++d)
    if (s.reduced[d]) {
      s.extents.push_back(xs[d]);
      s.count = s.count * xs[d];
    }
  return s;
}

/// A reduction over the last axis only of a rank >= 1 operand.
bool last_axis_reduction(const Graph &g, const Node &node, Rows *rows) {
  if (gpu_kernel_kind(node.op) != "reduction" || node.results.size() != 1)
    return false;
  const Shape &xs = g.type_of(node.operands[0]).shape;
  ReductionShape s = reduction_shape(g, node);
  if (xs.empty() || !s.reduced.back() || std::count(s.reduced.begin(), s.reduced.end(), true) != 1)
    return false;
  rows->outer.assign(xs.begin(), xs.end() - 1);
  rows->length = xs.back();
  return true;
}

namespace {

/// row_group's walk over the plan positions.
class RowGroups {
public:
  RowGroups(const Graph &g, const LoweringPlan &plan) : g_(g), plan_(plan) {}

  /// How a row group touches stored values: which temp slots it writes
  /// (with the value's shape) and the temps of other kernels it reads.
  struct RowAccess {
    std::set<ValueId> members; // values the group's nodes store
    std::map<size_t, Shape> written; // slot -> shape
    bool ok = true;
    std::vector<std::pair<ValueId, bool>> reads; // other temps; true: read at the reader's own index
  };

  /// Checks that `node`, evaluated at index idx of a value of shape `at`,
  /// reads the group's members only at their own row (same shape, or one
  /// element per row broadcast along it) and records other temps it reads.
  /// A row reduction (`along_row`) reads its operand at the row's elements.
  void row_reads(const Node &node, const Shape &at, const Rows &rows, bool aligned, RowAccess &acc,
                 bool along_row = false) {
    OpTraits traits = op_traits(node.op);
    bool same_index = along_row || traits.has(OpTrait::epilogue_safe) || traits.has(OpTrait::generator);
    for (ValueId o : node.operands) {
      const Shape &os = g_.type_of(o).shape;
      bool here = aligned && same_index && (os == at || (rows.per_row(os) && at == rows.full()));
      const ValuePlan &vp = plan_.values[o];
      if (vp.storage == Storage::fused) {
        const ValueInfo &info = g_.value_info(o);
        if (info.producer >= 0)
          row_reads(g_.nodes()[info.producer], os, rows, here && (os == rows.full() || rows.per_row(os)), acc);
        continue;
      }
      if (acc.members.count(o)) {
        acc.ok = acc.ok && here;
      } else if (vp.storage == Storage::temp) {
        acc.reads.push_back({o, here && os == at});
      }
    }
  }

  /// (codegen::row_group, GpuPlan.h)
  std::vector<const Node *> row_group(size_t first) {
    std::vector<const Node *> group;
    Rows rows;
    if (!last_axis_reduction(g_, g_.nodes()[plan_.kernels[first]], &rows))
      return group;
    for (size_t i = first; i < plan_.kernels.size(); ++i) {
      const Node &node = g_.nodes()[plan_.kernels[i]];
      if (node.results.size() != 1 || plan_.values[node.results[0]].storage == Storage::fused ||
          plan_.epilogues.count(plan_.kernels[i]))
        break;
      const Shape &shape = g_.type_of(node.results[0]).shape;
      Rows mine;
      bool reduction = last_axis_reduction(g_, node, &mine);
      if (reduction ? !(mine.outer == rows.outer && mine.length == rows.length)
                    : (gpu_kernel_kind(node.op) != "elementwise" || !(shape == rows.full() || rows.per_row(shape))))
        break;
      group.push_back(&node);
      if (!row_access_ok(group, rows)) {
        group.pop_back();
        break;
      }
    }
    return group;
  }

  bool row_access_ok(const std::vector<const Node *> &group, const Rows &rows) {
    RowAccess acc;
    for (const Node *n : group) {
      ValueId v = n->results[0];
      bool reduction = gpu_kernel_kind(n->op) == "reduction";
      // A reduction reads its operand along the row: as an elementwise
      // node of the full row shape would.
      row_reads(*n, reduction ? rows.full() : g_.type_of(v).shape, rows, true, acc, reduction);
      acc.members.insert(v);
      const ValuePlan &vp = plan_.values[v];
      if (vp.storage != Storage::temp)
        continue;
      auto [it, fresh] = acc.written.emplace(vp.index, g_.type_of(v).shape);
      if (!fresh && it->second != g_.type_of(v).shape)
        return false; // one slot, two row layouts: rows of other workgroups would collide
    }
    // Another kernel's temp in a slot the group writes: only if read at the
    // writer's own element positions (same shape, own index).
    for (const auto &[o, own_index] : acc.reads) {
      auto it = acc.written.find(plan_.values[o].index);
      if (it != acc.written.end() && !(own_index && it->second == g_.type_of(o).shape))
        return false;
    }
    return acc.ok;
  }

private:
  const Graph &g_;
  const LoweringPlan &plan_;
};

/// The GPU-only fusion decisions on top of the shared plan of one graph.
class GpuPlanPass {
public:
  /// `constant_params`: per input of `g` (a subgraph), true when every call
  /// site binds it to a constant (constant_bound_inputs, Transforms/CallSites.h).
  GpuPlanPass(const Graph &g, LoweringPlan &plan, const std::vector<bool> &constant_params)
      : g_(g), plan_(plan), constant_params_(constant_params) {}

  void run() {
    fuse_constant_subexpressions();
    fuse_views_into_matmuls();
    store_matmuls_through_views();
    fuse_into_row_groups();
    plan_.gpu = true;
  }

private:
  /// Temp slots the kernel at plan position `pos` writes.
  std::vector<size_t> slots_written(size_t pos) {
    std::vector<size_t> out;
    const Node &node = g_.nodes()[plan_.kernels[pos]];
    for (ValueId r : node.results)
      if (plan_.values[r].storage == Storage::temp)
        out.push_back(plan_.values[r].index);
    if (auto e = plan_.epilogues.find(plan_.kernels[pos]); e != plan_.epilogues.end())
      if (plan_.values[e->second].storage == Storage::temp)
        out.push_back(plan_.values[e->second].index);
    return out;
  }

  /// The stored temps a fused evaluation of `v` reads. (Iterative, with a
  /// visited set: fused chains can be tens of thousands of nodes deep, and
  /// a DAG of fused values must not be walked once per path.)
  void stored_sources(ValueId v, std::vector<ValueId> &out) {
    std::vector<ValueId> work{v};
    std::set<ValueId> seen{v};
    while (!work.empty()) {
      ValueId x = work.back();
      work.pop_back();
      if (plan_.values[x].storage != Storage::fused) {
        if (plan_.values[x].storage == Storage::temp)
          out.push_back(x);
        continue;
      }
      const ValueInfo &info = g_.value_info(x);
      if (info.producer >= 0)
        for (ValueId o : g_.nodes()[info.producer].operands)
          if (seen.insert(o).second)
            work.push_back(o);
    }
  }

  /// True when an element of `node`'s results follows from constants and
  /// the index alone (generators, constants, views, gathers, elementwise
  /// ops of those), with no reduction or window loop.
  bool constant_subexpression(const Node &root) {
    // Post-order over the fused producers, iteratively, memoized per node
    // (-1 unknown, 0 no, 1 yes; cleared whenever the plan changes).
    if (constant_memo_.size() != g_.nodes().size())
      constant_memo_.assign(g_.nodes().size(), -1);
    auto fused_producer = [&](ValueId o) -> int64_t { // -1: a constant; -2: neither constant nor fused
      const ValuePlan &vp = plan_.values[o];
      if (constant_value(plan_, constant_params_, o))
        return -1;
      const ValueInfo &info = g_.value_info(o);
      return vp.storage == Storage::fused && info.producer >= 0 ? info.producer : -2;
    };
    size_t root_index = static_cast<size_t>(&root - g_.nodes().data());
    std::vector<std::pair<size_t, bool>> stack{{root_index, false}};
    while (!stack.empty()) {
      auto [n, expanded] = stack.back();
      if (constant_memo_[n] >= 0) {
        stack.pop_back();
        continue;
      }
      const Node &node = g_.nodes()[n];
      if (!expanded) {
        OpTraits traits = op_traits(node.op);
        if (gpu_kernel_kind(node.op) != "elementwise" || traits.has(OpTrait::window) ||
            traits.has(OpTrait::reduction)) {
          constant_memo_[n] = 0;
          stack.pop_back();
          continue;
        }
        stack.back().second = true;
        for (ValueId o : node.operands)
          if (int64_t p = fused_producer(o); p >= 0 && constant_memo_[p] < 0)
            stack.push_back({static_cast<size_t>(p), false});
        continue;
      }
      bool yes = true;
      for (ValueId o : node.operands)
        if (int64_t p = fused_producer(o); p == -2 || (p >= 0 && constant_memo_[p] != 1))
          yes = false;
      constant_memo_[n] = yes ? 1 : 0;
      stack.pop_back();
    }
    return constant_memo_[root_index] == 1;
  }

  /// A stored value computed from constants only (the causal mask, the
  /// position table's gather) is not a kernel of its own on the GPU: it is
  /// fused, recomputed where read (a compare of two indices, one load),
  /// instead of a launch per run that writes the same bytes every time.
  void fuse_constant_subexpressions() {
    constant_memo_.clear();
    std::set<ValueId> outputs(g_.output_ids().begin(), g_.output_ids().end());
    std::set<ValueId> call_operands; // read by host code: calls, branches, a symbol's definition
    for (const Node &n : g_.nodes())
      if (has_bodies(n.op) || defines_symbol(n))
        call_operands.insert(n.operands.begin(), n.operands.end());
    for (size_t pos = 0; pos < plan_.kernels.size(); ++pos) {
      const Node &node = g_.nodes()[plan_.kernels[pos]];
      if (plan_.epilogues.count(plan_.kernels[pos]) || !constant_subexpression(node))
        continue;
      bool movable = true;
      for (ValueId r : node.results)
        movable = movable && plan_.values[r].storage == Storage::temp && !outputs.count(r) && !call_operands.count(r);
      if (movable) {
        for (ValueId r : node.results)
          plan_.values[r] = ValuePlan{Storage::fused, 0};
        constant_memo_.clear(); // readers of these values may be constant subexpressions now
      }
    }
  }

  /// True when plan position `pos` launches a kernel (a result stored, or
  /// a GEMM epilogue).
  bool launches(size_t pos) {
    size_t n = plan_.kernels[pos];
    if (plan_.epilogues.count(n))
      return true;
    for (ValueId r : g_.nodes()[n].results)
      if (plan_.values[r].storage != Storage::fused)
        return true;
    return false;
  }

  /// A stored elementwise value read only by the row group that runs right
  /// after it (an f16 model's activations cast to f32 before a norm) is
  /// recomputed by the row kernel instead: one launch fewer. Only when the
  /// temps it is computed from keep their slots until the group ends, and
  /// the group still forms reading them.
  void fuse_into_row_groups() {
    std::set<ValueId> outputs(g_.output_ids().begin(), g_.output_ids().end());
    for (size_t pos = 0; pos + 1 < plan_.kernels.size(); ++pos) {
      // (a member of a row group is not a candidate: positions advance as build() groups them)
      if (size_t members = row_group(g_, plan_, pos).size(); members > 1) {
        pos += members - 1;
        continue;
      }
      size_t n = plan_.kernels[pos];
      const Node &node = g_.nodes()[n];
      if (plan_.epilogues.count(n) || node.results.size() != 1 || !op_traits(node.op).has(OpTrait::elementwise) ||
          gpu_kernel_kind(node.op) != "elementwise")
        continue;
      ValueId v = node.results[0];
      if (plan_.values[v].storage != Storage::temp || outputs.count(v) || made_by_matmul_.count(v))
        continue;
      // The next position that launches anything (values fused since the
      // plan was made, such as constants' casts, keep their positions).
      size_t first = pos + 1;
      while (first < plan_.kernels.size() && !launches(first))
        ++first;
      if (first == plan_.kernels.size())
        continue;
      std::vector<const Node *> group = row_group(g_, plan_, first);
      if (group.size() < 2)
        continue;
      bool only_group = true;
      for (size_t r : readers(v))
        only_group = only_group && std::find(group.begin(), group.end(), &g_.nodes()[r]) != group.end();
      std::vector<ValueId> sources;
      for (ValueId o : node.operands)
        stored_sources(o, sources);
      for (size_t i = pos + 1; i < first + group.size() && only_group; ++i)
        for (size_t slot : slots_written(i))
          for (ValueId src : sources)
            only_group = only_group && plan_.values[src].index != slot;
      if (!only_group)
        continue;
      ValuePlan stored = plan_.values[v];
      plan_.values[v] = ValuePlan{Storage::fused, 0};
      if (row_group(g_, plan_, first).size() != group.size())
        plan_.values[v] = stored;
    }
  }

  /// True when every reader of `v` is a matmul kernel or a fused view
  /// read only by matmul kernels; `last` = the latest such kernel's position.
  bool read_only_by_matmuls(ValueId v, const std::map<size_t, size_t> &position, const std::set<ValueId> &outputs,
                            size_t &last) {
    std::vector<ValueId> work{v}; // iterative: chains of views can be deep
    std::set<ValueId> seen{v};
    while (!work.empty()) {
      ValueId x = work.back();
      work.pop_back();
      for (size_t n : readers(x)) {
        const Node &c = g_.nodes()[n];
        if (auto at = position.find(n); at != position.end()) {
          if (c.op != "matmul" && c.op != "attention") // both read operands through loaders
            return false;
          last = std::max(last, at->second);
          continue;
        }
        if (!op_traits(c.op).has(OpTrait::shape))
          return false;
        for (ValueId r : c.results) {
          if (plan_.values[r].storage != Storage::fused || outputs.count(r))
            return false;
          if (seen.insert(r).second)
            work.push_back(r);
        }
      }
    }
    return true;
  }

  /// Temp slots the kernel at plan position `pos` reads (through fused
  /// values too, its GEMM epilogue chain included).
  std::set<size_t> slots_read(size_t pos) {
    std::vector<ValueId> sources;
    size_t n = plan_.kernels[pos];
    for (ValueId o : g_.nodes()[n].operands)
      stored_sources(o, sources);
    if (auto e = plan_.epilogues.find(n); e != plan_.epilogues.end()) {
      const ValueInfo &info = g_.value_info(e->second);
      for (ValueId o : g_.nodes()[info.producer].operands)
        stored_sources(o, sources);
    }
    std::set<size_t> out;
    for (ValueId v : sources)
      out.insert(plan_.values[v].index);
    return out;
  }

  /// The nodes reading `v` (each once), by node index.
  const std::vector<size_t> &readers(ValueId v) {
    if (readers_.empty()) {
      readers_.resize(g_.num_values());
      for (size_t n = 0; n < g_.nodes().size(); ++n)
        for (ValueId o : g_.nodes()[n].operands)
          if (readers_[o].empty() || readers_[o].back() != n)
            readers_[o].push_back(n);
    }
    return readers_[v];
  }

  /// The single node reading `v`, or null.
  const Node *only_reader(ValueId v) {
    const std::vector<size_t> &r = readers(v);
    return r.size() == 1 ? &g_.nodes()[r[0]] : nullptr;
  }

  /// A matmul whose result only feeds a chain of transposes/reshapes ending
  /// in a stored value u (the attention heads' merge) stores straight into
  /// u at the permuted position: the copy kernel goes. Only when u's slot is
  /// neither read nor written between the matmul and the copy it replaces.
  void store_matmuls_through_views() {
    std::map<size_t, size_t> position;
    for (size_t i = 0; i < plan_.kernels.size(); ++i)
      position[plan_.kernels[i]] = i;
    std::set<ValueId> outputs(g_.output_ids().begin(), g_.output_ids().end());
    for (size_t p = 0; p < plan_.kernels.size(); ++p) {
      size_t m = plan_.kernels[p];
      const Node &mm = g_.nodes()[m];
      if (mm.op != "matmul" || plan_.epilogues.count(m) || plan_.values[mm.results[0]].storage != Storage::temp ||
          outputs.count(mm.results[0]))
        continue;
      std::vector<const Node *> views;
      ValueId v = mm.results[0], u = 0;
      while (const Node *c = only_reader(v)) {
        if ((c->op != "transpose" && c->op != "reshape") || outputs.count(c->results[0]))
          break;
        views.push_back(c);
        v = c->results[0];
        if (plan_.values[v].storage != Storage::fused) {
          u = v;
          break;
        }
      }
      if (!u || plan_.values[u].storage != Storage::temp || !only_reader(u) || has_bodies(only_reader(u)->op))
        continue;
      auto q = position.find(static_cast<size_t>(views.back() - g_.nodes().data()));
      if (q == position.end() || q->second <= p)
        continue;
      size_t slot = plan_.values[u].index;
      bool free = true;
      for (size_t i = p; i < q->second && free; ++i) {
        free = !slots_read(i).count(slot);
        if (i > p)
          for (size_t w : slots_written(i))
            free = free && w != slot;
      }
      if (!free)
        continue;
      plan_.values[mm.results[0]] = ValuePlan{Storage::fused, 0};
      for (const Node *c : views)
        for (ValueId r : c->results)
          if (r != u)
            plan_.values[r] = ValuePlan{Storage::fused, 0};
      for (const Node *c : views)
        plan_.stored_through[m].push_back(static_cast<size_t>(c - g_.nodes().data()));
      made_by_matmul_.insert(u);
    }
  }

  /// A view (reshape, transpose, split, ...) stored only because matmuls
  /// or fused attentions read it (the CPU's GEMM wants its operands in
  /// memory) is fused on the GPU: the tiled matmul's (the attention's)
  /// loaders read through the view, one launch fewer (the attention heads'
  /// split and merge). Only when the view's
  /// sources keep their slots until the last matmul that reads them.
  void fuse_views_into_matmuls() {
    std::map<size_t, size_t> position; // node index -> plan position
    for (size_t i = 0; i < plan_.kernels.size(); ++i)
      position[plan_.kernels[i]] = i;
    std::set<ValueId> outputs(g_.output_ids().begin(), g_.output_ids().end());
    for (size_t pos = 0; pos < plan_.kernels.size(); ++pos) {
      const Node &view = g_.nodes()[plan_.kernels[pos]];
      if (!op_traits(view.op).has(OpTrait::shape) || gpu_kernel_kind(view.op) != "elementwise")
        continue;
      for (ValueId u : view.results) {
        if (plan_.values[u].storage != Storage::temp || outputs.count(u))
          continue;
        size_t last = pos;
        if (!read_only_by_matmuls(u, position, outputs, last) || last == pos)
          continue;
        std::vector<ValueId> sources;
        for (ValueId o : view.operands)
          stored_sources(o, sources);
        bool kept = true;
        for (size_t i = pos + 1; i <= last && kept; ++i)
          for (size_t slot : slots_written(i))
            for (ValueId src : sources)
              kept = kept && plan_.values[src].index != slot;
        if (kept)
          plan_.values[u] = ValuePlan{Storage::fused, 0};
      }
    }
  }

  const Graph &g_;
  LoweringPlan &plan_;
  const std::vector<bool> &constant_params_;
  std::vector<int8_t> constant_memo_;        // constant_subexpression, per node of g_
  std::vector<std::vector<size_t>> readers_; // by value: reading nodes (lazy)
  std::set<ValueId> made_by_matmul_;         // the stored ends of plan_.stored_through's views
};

} // namespace

std::vector<const Node *> row_group(const Graph &g, const LoweringPlan &plan, size_t first) {
  return RowGroups(g, plan).row_group(first);
}

std::set<ValueId> stored_by_matmuls(const Graph &g, const LoweringPlan &plan) {
  std::set<ValueId> out;
  for (const auto &[matmul, views] : plan.stored_through)
    out.insert(g.nodes()[views.back()].results[0]);
  return out;
}

} // namespace maxc::codegen

namespace maxc {

PlanOptions gpu_plan_options() {
  PlanOptions options;
  options.refine = refine_gpu_plans;
  return options;
}

void refine_gpu_plans(const Graph &root, LoweringPlans &plans) {
  std::map<std::string, std::vector<bool>> constant_params = constant_bound_inputs(root, CallSiteScope::Transitive);
  for (const auto &[name, sub] : root.subgraphs())
    if (auto it = plans.find(sub.get()); it != plans.end())
      codegen::GpuPlanPass(*sub, it->second, constant_params[name]).run();
  std::vector<bool> root_params; // the root's inputs: never known constant
  if (auto it = plans.find(&root); it != plans.end())
    codegen::GpuPlanPass(root, it->second, root_params).run();
}

} // namespace maxc
