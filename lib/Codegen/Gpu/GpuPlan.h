// The GPU backends' view of a lowering plan: the plan pass they run when the
// driver plans (refine_gpu_plans, declared with gpu_plan_options in
// maxc/Codegen/GpuModelCompiler.h), and what the pass and the kernel
// generator (GpuKernelEmitter) both read from a plan: constant values,
// reduction shapes and the row kernels' groups. Pure IR, no LLVM.
#pragma once

#include "maxc/Codegen/LoweringPlan.h"

#include <set>
#include <vector>

namespace maxc::codegen {

/// A value every run of a graph sees with the same contents: a constant,
/// or a subgraph parameter every call site binds to one (`constant_params`:
/// per input, from constant_bound_inputs, Transforms/CallSites.h).
bool constant_value(const LoweringPlan &plan, const std::vector<bool> &constant_params, ValueId v);

/// The axes a reduction node reduces over, and their extents.
struct ReductionShape {
  std::vector<bool> reduced;
  std::vector<Dim> extents; // of the reduced dims, in order
  Dim count{1};
  bool keepdims = false;
};
ReductionShape reduction_shape(const Graph &g, const Node &node);

/// The rows of a row group: shape [outer..., L] reduced over its last axis.
struct Rows {
  Shape outer;
  Dim length{1};
  Shape full() const {
    Shape s = outer;
    s.push_back(length);
    return s;
  }
  /// [outer...] or [outer..., 1]: one element per row.
  bool per_row(const Shape &s) const {
    if (s == outer)
      return true;
    Shape kept = outer;
    kept.push_back(Dim(1));
    return s == kept;
  }
};

/// A reduction over the last axis only of a rank >= 1 operand; its rows in `rows`.
bool last_axis_reduction(const Graph &g, const Node &node, Rows *rows);

/// The kernels from plan position `first` on that run as one row kernel:
/// a last-axis reduction, then every following reduction over the same
/// rows and every elementwise node computing one row (or one element per
/// row) that reads the group's values only at its own row. Such a chain
/// (LayerNorm, RMSNorm, softmax after decomposition) is one launch with
/// one workgroup per row. Fewer than two nodes: no group. Decided at emit
/// time from the plan (the pass's fuse_into_row_groups asks it too).
std::vector<const Node *> row_group(const Graph &g, const LoweringPlan &plan, size_t first);

/// The values the matmuls of plan.stored_through store (the last view's results).
std::set<ValueId> stored_by_matmuls(const Graph &g, const LoweringPlan &plan);

} // namespace maxc::codegen
