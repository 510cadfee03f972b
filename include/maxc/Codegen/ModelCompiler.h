// Compiling a Graph to a native artifact: an LLVM module with the model's C
// entry points, optimized and emitted for a CPU target, plus the C header
// and the manifest that describe it.
//
// Entry points (NAME = CompileOptions::name):
//   int32_t NAME_run(const T *in..., T *out..., int64_t dim..., void *workspace);
//   int32_t NAME_run_packed(void *const *buffers, const int64_t *dims, void *workspace);
//   int64_t NAME_workspace_size(int64_t dim...);
//   const char *NAME_status_string(int32_t status);
// A null workspace makes the run allocate (malloc) and free its own.
#pragma once

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

struct CompileOptions {
  /// Prefix of every exported symbol; a C identifier. Default: the graph's name.
  std::string name;
  std::string triple; // "" = x86_64-unknown-linux-gnu
  std::string cpu = "native";
  int opt_level = 2;
  /// Weights in a separate NAME.weights.bin the program loads at run time
  /// (NAME_set_weights), instead of embedded in the object.
  bool external_weights = false;
};

/// Status codes returned by the generated entry points.
enum class RunStatus : int32_t {
  ok = 0,
  null_pointer = 1,
  invalid_dim = 2,
  out_of_memory = 3,
  weights_not_set = 4,   // external weights: NAME_set_weights was not called
  weights_mismatch = 5,  // external weights: wrong size, hash or alignment
};

/// What the artifact looks like from C, shared by the header and manifest.
struct ModelInterface {
  struct Tensor {
    std::string name;   // C identifier
    TensorType type;
  };
  std::string name;
  std::vector<Tensor> inputs, outputs;
  std::vector<std::string> symbols; // symbolic dims, in argument order
  uint64_t constant_bytes = 0;
  size_t subgraph_definitions = 0, subgraph_calls = 0;
  /// External weights: the blob's size and FNV-1a 64 hash (0 when embedded).
  bool external_weights = false;
  uint64_t weights_blob_bytes = 0;
  uint64_t weights_blob_fnv1a = 0;
};

ModelInterface describe_interface(const Graph &graph, const std::string &name);

/// Builds the (unoptimized) LLVM module of `graph` in `context`. With
/// `external_weights_blob`, constants are not embedded: the blob the program
/// must pass to NAME_set_weights is returned there (64-byte aligned entries).
std::unique_ptr<llvm::Module> build_model_module(const Graph &graph, const std::string &name,
                                                 llvm::LLVMContext &context,
                                                 std::string *external_weights_blob = nullptr);

struct CompiledModel {
  CpuTarget target;
  ModelInterface interface;
  std::string object;
  std::string assembly; // when requested
  std::string llvm_ir;  // when requested (optimized IR)
  std::string header;
  std::string weights_blob; // --weights-mode external: NAME.weights.bin
  /// Upper bound of the workspace, in bytes, as a polynomial in the dims.
  std::string workspace_bound;
  /// "main: 9 kernels", "sub.Block: 14 kernels" — fusion results per function.
  std::vector<std::string> kernels;
};

struct EmitRequest {
  bool object = true;
  bool assembly = false;
  bool llvm_ir = false;
};

/// Validates the target, decomposes, lowers, optimizes and emits. Throws
/// maxc::Error (InvalidArgument for bad names/targets).
CompiledModel compile_model(const Graph &graph, const CompileOptions &options, const EmitRequest &emit = {});

/// The C header of a compiled model.
std::string emit_c_header(const ModelInterface &interface, const std::string &workspace_bound);

/// True for a valid C identifier that is not a C keyword.
bool is_c_identifier(const std::string &name);

} // namespace maxc
