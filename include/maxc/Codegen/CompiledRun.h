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

/// The same through the GPU backend's kernels, executed by the host
/// emulation of the GPU (every work-item of every workgroup, barriers and
/// LDS honoured): `maxc run --device amdgpu-emu`.
std::vector<HostTensor> run_gpu_emulated(const Graph &graph, const std::vector<HostTensor> &inputs,
                                         DimBindings dims = {}, int opt_level = 2);

} // namespace maxc
