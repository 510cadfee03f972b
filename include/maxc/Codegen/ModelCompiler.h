// The CPU backend's code generation: an LLVM module with the model's C
// entry points around the graph functions, optimized and emitted for a CPU
// target, and the C header that describes it. The compile pipeline that
// drives it (load, decompose, plan, backend, artifacts) is lib/Driver.
//
// Entry points (NAME = the model's C name):
//   int32_t NAME_run(const T *in..., T *out..., int64_t dim..., void *workspace);
//   int32_t NAME_run_packed(void *const *buffers, const int64_t *dims, void *workspace);
//   int64_t NAME_workspace_size(int64_t dim...);   (-1 where NAME_run reports INVALID_DIM)
//   const char *NAME_status_string(int32_t status);
// A null workspace makes the run allocate (malloc) and free its own.
#pragma once

#include "maxc/Codegen/ModelAbi.h"
#include "maxc/Codegen/PassTimer.h"
#include "maxc/Codegen/Target.h"
#include "maxc/IR/Graph.h"

#include <memory>
#include <string>
#include <vector>

namespace llvm {
class LLVMContext;
class Module;
} // namespace llvm

namespace maxc {

/// Builds the (unoptimized, verified) LLVM module of a decomposed graph.
/// `abi` is describe_interface(lowered, name). With `external_weights_blob`,
/// constants are not embedded: the blob the program must pass to
/// NAME_set_weights is returned there (64-byte aligned entries).
std::unique_ptr<llvm::Module> build_cpu_module(const Graph &lowered, const ModelInterface &abi,
                                               llvm::LLVMContext &context,
                                               std::string *external_weights_blob = nullptr);

/// Decomposes `graph` and builds its module (for tests that JIT a graph).
std::unique_ptr<llvm::Module> build_model_module(const Graph &graph, const std::string &name,
                                                 llvm::LLVMContext &context);

struct CpuCodegenRequest {
  bool object = true;
  bool assembly = false;
  bool llvm_ir = false;
  bool external_weights = false;
};

struct CpuCodegenResult {
  std::string object, assembly, llvm_ir; // as requested
  std::string weights_blob;              // external weights: NAME.weights.bin
  uint64_t weights_blob_fnv1a = 0;
};

/// Builds, optimizes and emits the module of a decomposed graph for
/// `target`, timing "codegen", "optimize" and one "emit <kind>" step each.
CpuCodegenResult compile_cpu_module(const Graph &lowered, const ModelInterface &abi, const CpuTarget &target,
                                    const CpuCodegenRequest &request, PassTimer &timer);

} // namespace maxc
