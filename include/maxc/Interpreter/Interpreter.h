// The reference interpreter: runs any Graph (including subgraph calls) on
// host tensors, using each op's reference kernel. It is the oracle every
// backend is tested against, so it favours clarity and exactness over speed.
#pragma once

#include "maxc/IR/Graph.h"
#include "maxc/IR/HostTensor.h"

#include <optional>
#include <vector>

namespace maxc {

/// Binds the symbolic dims of `graph`'s inputs from the concrete input
/// shapes (adding to `bindings`), checking every static dim, dtype and
/// already-bound symbol. Throws maxc::Error (InputMismatch) naming the input.
void bind_input_dims(const Graph &graph, const std::vector<HostTensor> &inputs, DimBindings &bindings);

class Interpreter {
public:
  /// Runs `graph` on `inputs` (one per graph input). `dims` may pre-bind
  /// symbolic dims that no input determines.
  static std::vector<HostTensor> run(const Graph &graph, const std::vector<HostTensor> &inputs,
                                     DimBindings dims = {});

  /// Computes, in order, every node of `graph` whose results are not yet in
  /// `env` (indexed by ValueId; resized as needed). Graph inputs must already
  /// be present. Used by the eager context to compute incrementally.
  static void execute(const Graph &graph, std::vector<std::optional<HostTensor>> &env, DimBindings &dims,
                      size_t first_node = 0);
};

} // namespace maxc
