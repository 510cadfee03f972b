// Profile builds of the CPU backend (maxc profile, maxc compile --profile;
// docs/profiling.md): every kernel of every graph function is bracketed by
// calls into the runtime (Cpu/RuntimeProfile.c) that sum its wall time, count
// its calls and keep the most threads its jobs ran on, in one counter per
// kernel. This is the compile-time map from those counters to the model:
// which kernel each counter measures and the model nodes it computes.
#pragma once

#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/IR/Graph.h"

#include <cstdint>
#include <string>
#include <vector>

namespace maxc {

/// One kernel of a profile build: counter i measures profiled_kernels()[i].
struct ProfiledKernel {
  const Graph *graph = nullptr; // the root or one of its subgraphs
  std::string graph_name;       // "main" or the subgraph's name
  /// The kernel's node in `graph`; graph->nodes().size() + i for the copy
  /// into output i (an output whose value lives elsewhere).
  size_t node = 0;
  std::string op;                 // the kernel node's op; "copy" for an output copy
  std::vector<std::string> ops;   // every op the kernel computes: its own, then the fused ones (distinct)
  std::vector<std::string> nodes; // the names of the model nodes it computes (distinct, non-empty, in graph order)
  /// "conv2d+add+sigmoid": op and up to three fused ops ("+..." past those).
  std::string label() const;
  /// "a, b, c +4 more": the first `shown` node names.
  std::string nodes_summary(size_t shown = 3) const;
};

/// The kernels of a profile build of `lowered` (decomposed) planned as
/// `plans`, in counter order: each subgraph's (by name), then the root's;
/// in a graph, its plan's kernels in execution order, except subgraph calls
/// (their callee's kernels are counted once per call), then its output
/// copies. A kernel's nodes are its own node, the fused producers it
/// recomputes inline (transitively) and, for a GEMM, its epilogue chain.
std::vector<ProfiledKernel> profiled_kernels(const Graph &lowered, const LoweringPlans &plans);

/// What a profile build's counters hold for one kernel (RuntimeProfile.c's
/// layout: three int64 per kernel).
struct KernelCounter {
  int64_t ns = 0;      // wall time over all calls (monotonic clock)
  int64_t calls = 0;   // times it ran
  int64_t threads = 0; // most threads one of its jobs ran on; -1: the program's parallel-for
};

} // namespace maxc
