// The GPU backend executed on the host: kernel bodies lowered to the
// emulation target (every work-item of every workgroup, barrier-separated
// phases) and the same host launch sequence as the HIP artifact, with a
// direct call in place of hipModuleLaunchKernel. For `maxc run --device
// amdgpu-emu` and the tests that compare GPU kernels with the interpreter.
#pragma once

#include "maxc/IR/Graph.h"

#include <memory>
#include <string>

namespace llvm {
class LLVMContext;
class Module;
} // namespace llvm

namespace maxc::codegen {

/// A host module exporting
///   int32_t NAME_run_packed(void *const *buffers, const int64_t *dims, void *workspace)
/// (a null workspace is allocated), with the weights embedded.
std::unique_ptr<llvm::Module> build_gpu_emulation_module(const Graph &graph, const std::string &name,
                                                         llvm::LLVMContext &context);

} // namespace maxc::codegen
