// decompose()'s unrolling of `recurrence` nodes (maxc/Ops/Recurrence.h).
#pragma once

#include "maxc/IR/Graph.h"
#include "maxc/Tensor/Tensor.h"

#include <vector>

namespace maxc {

/// The node's results computed by per-step primitives (matmul, gates,
/// where for the lengths mask) in the current realization context. Throws
/// maxc::Error (UnboundDim) when the sequence length is symbolic.
std::vector<Tensor> unroll_recurrence(const Node &node, const std::vector<Tensor> &in);

} // namespace maxc
