// The lowering plan of one graph (root or subgraph): which values get
// memory and where (fusion decisions), and the workspace slots temporaries
// share by liveness. Pure IR analysis, no LLVM, so it is tested on its own.
#pragma once

#include "maxc/IR/Graph.h"

#include <string>
#include <vector>

namespace maxc {

enum class Storage {
  input,    // the caller's buffer for graph input `index`
  output,   // the caller's buffer for graph output `index`
  constant, // a global holding a graph constant
  temp,     // workspace slot `index`
  fused,    // never stored: recomputed inside the kernel that reads it
};

struct ValuePlan {
  Storage storage = Storage::fused;
  size_t index = 0;
};

struct WorkspaceSlot {
  Dim bytes; // size, rounded up to 64 bytes when laid out
};

struct LoweringPlan {
  std::vector<ValuePlan> values;     // by ValueId
  std::vector<WorkspaceSlot> slots;  // temporaries, shared by liveness
  /// Graph outputs whose value lives elsewhere (an input, a constant or an
  /// earlier output): copied into output buffer `first` from value `second`.
  std::vector<std::pair<size_t, ValueId>> output_copies;
  /// Node indices whose results are computed by a kernel of their own, in order.
  std::vector<size_t> kernels;
  /// A slot for kernels' private scratch (the im2col matrix of a convolution
  /// lowered to GEMM); only one kernel runs at a time, so they share it.
  /// npos when no kernel needs scratch.
  size_t scratch_slot = static_cast<size_t>(-1);
};

/// True for a conv2d the code generator lowers as im2col + GEMM (f32, one
/// group); its scratch bytes are returned in `bytes`.
bool conv_uses_gemm(const Graph &graph, const Node &node, int64_t *bytes = nullptr);

/// Ops that compute one output element from operand elements without inner
/// loops: they fuse into their consumers.
bool is_elemental_op(const std::string &op);
/// Reductions: producers fuse into them (each operand element is read once).
bool is_reduction_op(const std::string &op);

LoweringPlan plan_lowering(const Graph &graph);

/// Bytes of workspace a run of `graph` (decomposed, with its subgraphs)
/// needs at most, as a polynomial in the symbolic dims: slots rounded up to
/// 64 bytes, plus the largest callee's need (the sum when they are symbolic).
Dim workspace_bound(const Graph &graph);

/// "%3 temp slot 1", one line per value; for golden tests of fusion decisions.
std::string describe_plan(const Graph &graph, const LoweringPlan &plan);

} // namespace maxc
