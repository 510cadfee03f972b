// Compiles a graph for the host CPU in-process (ORC JIT) and runs it once:
// `maxc run --device cpu`, and the tests that compare compiled kernels with
// the reference interpreter.
#pragma once

#include "maxc/IR/Graph.h"
#include "maxc/IR/HostTensor.h"

#include <vector>

namespace maxc {

/// Outputs of `graph` on `inputs`. Symbolic dims bind from the inputs and
/// `dims`; throws maxc::Error for an unbound dim or a non-zero run status.
std::vector<HostTensor> run_compiled_on_host(const Graph &graph, const std::vector<HostTensor> &inputs,
                                             DimBindings dims = {}, int opt_level = 2);

} // namespace maxc
