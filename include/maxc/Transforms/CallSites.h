// What the call sites of subgraph definitions bind: the one query every pass
// asks before treating a subgraph parameter as a constant (pre-transposed
// matmul weights, folded BatchNorm scales, Winograd-transformed weights,
// packed GEMM panels, GPU kernels that read a parameter like a constant).
//
// Only `call` nodes bind operands to a definition's inputs one for one. The
// bodies of any other body-owning op (an `if`'s branches) are bound by that
// op's own rule, so no input of theirs is ever reported constant, and a
// definition that is also such a body is left out.
#pragma once

#include "maxc/IR/Graph.h"

#include <map>
#include <string>
#include <vector>

namespace maxc {

enum class CallSiteScope {
  /// Calls from the root graph only: an input is constant-bound when every
  /// call (at least one, all in the root) binds it to a root `constant`
  /// node. A definition called from inside another body is left out (its
  /// operands there are not root constants). Passes that rewrite the root's
  /// constants (transposing, folding, packing them) use this scope.
  RootCalls,
  /// Calls from any graph: an input is constant-bound when every call binds
  /// it to a `constant` node of its own graph or to an input of the calling
  /// definition that is itself constant-bound (a fixed point). Every
  /// definition of the root is listed. Code generators that only need to
  /// know "this is read-only and the same at every call" use this scope.
  Transitive,
};

/// Per subgraph definition of `root` (by name), per input: true when every
/// call site binds that input to a constant, in the sense of `scope`.
std::map<std::string, std::vector<bool>> constant_bound_inputs(const Graph &root,
                                                                CallSiteScope scope = CallSiteScope::RootCalls);

} // namespace maxc
