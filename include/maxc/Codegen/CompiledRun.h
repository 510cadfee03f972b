// Compiles a graph for the host in-process (ORC JIT) and runs it once, for
// the tests that compare compiled kernels with the reference interpreter.
// Both go through the compile pipeline's backends (maxc/Driver/Compile.h,
// driver::run_on_host): "cpu" and "amdgpu-emu".
#pragma once

#include "maxc/IR/Graph.h"
#include "maxc/IR/HostTensor.h"

#include <vector>

namespace maxc {

/// Outputs of `graph` on `inputs` through the "cpu" backend. Symbolic dims
/// bind from the inputs and `dims`; throws maxc::Error for an unbound dim
/// or a non-zero run status.
std::vector<HostTensor> run_compiled_on_host(const Graph &graph, const std::vector<HostTensor> &inputs,
                                             DimBindings dims = {}, int opt_level = 2);

/// The same through the "amdgpu-emu" backend: the GPU kernels executed by
/// the host emulation of the GPU (every work-item of every workgroup,
/// barriers and LDS honoured): `maxc run --device amdgpu-emu`.
std::vector<HostTensor> run_gpu_emulated(const Graph &graph, const std::vector<HostTensor> &inputs,
                                         DimBindings dims = {}, int opt_level = 2);

} // namespace maxc
