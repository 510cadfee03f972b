// Constant GEMM weights packed at compile time in the order the GEMM
// microkernel (Cpu/GemmEmitter.h) reads them: B[K, N] as column panels of
// NR = 2 * lanes floats, panel p (columns [p * NR, p * NR + NR)) at
// p * K * NR, its row k at + k * NR, the last panel padded with zeros past N.
// The GEMM then reads each K block of a panel as one contiguous run instead
// of packing it at run time (or reading B's rows in place).
//
// A weight is packed in place of its original bytes, so only where nothing
// else reads it: a constant whose every use is the B operand of a GEMM
// (matmul_uses_gemm, B [K, N] f32, static) or an argument of a call whose
// parameter is packed; a subgraph parameter that every call binds to such a
// constant (Transforms/CallSites.h: constant_bound_inputs) and whose every use is
// such a B operand. Call sites then pass the packed copy; the subgraph stays
// one function, and each instance's weights are stored once.
#pragma once

#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/Codegen/WeightsSection.h"
#include "maxc/IR/Graph.h"
#include "maxc/IR/HostTensor.h"

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace maxc::codegen {

struct PackedWeights {
  int64_t nr = 0; // panel width in floats (2 * lanes)
  std::set<std::pair<const Graph *, std::string>> constants; // (graph, constant name)
  std::set<std::pair<const Graph *, size_t>> inputs;         // (subgraph, input index)

  bool packed_constant(const Graph &g, const std::string &name) const { return constants.count({&g, name}) != 0; }
  /// Whether value `v` of `g` (a constant's result or a subgraph input) is packed.
  bool packed_value(const Graph &g, ValueId v) const;
};

/// Which weights of `root` (decomposed, with `plans`) are packed for a
/// microkernel of `lanes` f32 lanes.
PackedWeights plan_packed_weights(const Graph &root, const LoweringPlans &plans, unsigned lanes);

/// B [K, N] (f32) in panel order for panels of `nr` floats:
/// ceil(N / nr) * nr * K floats.
std::vector<float> pack_gemm_panels(const HostTensor &b, int64_t nr);

/// For weights_blob (WeightsSection.h): the packed bytes of packed
/// constants, made on demand while the blob is written (never all resident:
/// they would double the weights' memory during a compile).
ConstantRewrite packed_weights_rewrite(const PackedWeights &packed);

} // namespace maxc::codegen
