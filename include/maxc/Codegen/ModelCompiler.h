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
//   void NAME_profile_report(FILE *), NAME_profile_reset(void);  (profile builds only)
// A null workspace makes the run allocate (malloc) and free its own.
#pragma once

#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/Codegen/ModelAbi.h"
#include "maxc/Codegen/PassTimer.h"
#include "maxc/Codegen/Target.h"
#include "maxc/Codegen/WeightsSection.h"
#include "maxc/IR/Graph.h"

#include <memory>
#include <string>
#include <vector>

namespace llvm {
class LLVMContext;
class Module;
} // namespace llvm

namespace maxc {

/// Where the weights (the graph's constants) go.
enum class WeightsPlacement {
  ir,             // LLVM constants (the in-process JIT)
  object_section, // LLVM sees a symbol, NAME.weights.data; the object writer
                  // (append_weights_section) defines it and streams the weights
  run_time,       // --weights-mode external: the blob passed to NAME_set_weights, whose
                  // expected lanes64 checksum the code reads from NAME.weights.checksum (an
                  // 8-byte symbol the object writer defines: compile_cpu_module)
};

/// Builds the (unoptimized, verified) LLVM module of a decomposed graph.
/// `abi` is describe_interface(lowered, name). Unless the weights are in the
/// IR, `weights` gets the weights blob (views of the constants, 64-byte
/// aligned entries): the object's weights section or the external blob.
std::unique_ptr<llvm::Module> build_cpu_module(const Graph &lowered, const ModelInterface &abi,
                                               llvm::LLVMContext &context,
                                               WeightsPlacement placement = WeightsPlacement::ir,
                                               ByteChunks *weights = nullptr,
                                               const LoweringPlans *plans = nullptr, // null: planned here
                                               unsigned vector_lanes = 0, // 0: the host's (cpu_vector_lanes)
                                               bool profile = false,      // a profile build (Codegen/Profile.h)
                                               // the integer GEMM's dot product (Codegen/Target.h:
                                               // cpu_int8_dot); -1: the host's with vector_lanes 0, else
                                               // kInt8DotGeneric
                                               int int8_dot = -1);

/// Decomposes `graph` and builds its module (for tests that JIT a graph),
/// with kernels for `vector_lanes` f32 lanes (0: the host's) and the
/// integer GEMM's `int8_dot` (as build_cpu_module).
std::unique_ptr<llvm::Module> build_model_module(const Graph &graph, const std::string &name,
                                                 llvm::LLVMContext &context, unsigned vector_lanes = 0,
                                                 int int8_dot = -1);

struct CpuCodegenRequest {
  bool object = true;
  bool assembly = false;
  bool llvm_ir = false;
  bool external_weights = false;
  unsigned jobs = 0; // threads for the partitions (maxc compile --jobs); 0 = the hardware's
  EarlyWrites *early = nullptr; // where the weights start being written during codegen (or null)
  /// A profile build (Codegen/Profile.h, maxc compile --profile): per-kernel
  /// counters, and NAME_profile_report / NAME_profile_reset exported.
  bool profile = false;
};

struct CpuCodegenResult {
  ByteChunks object;                     // as requested; the weights streamed in
  std::string assembly, llvm_ir;         // as requested (the weights as a symbol)
  ByteChunks weights_blob;               // external weights: NAME.weights.bin
  uint64_t weights_blob_checksum = 0;
  /// Per code variant (one per target): its objects' bytes before joining,
  /// and the weights bytes it adds to the blob (packed for its own vector
  /// width; 0 where it reads an earlier variant's).
  std::vector<uint64_t> variant_code_bytes, variant_weights_bytes;
};

/// The pieces compile_cpu_module splits a decomposed graph into: the root
/// (entry points, runtime, the main graph function) first, then each
/// subgraph definition, by name. They depend on the graph only, never on
/// the number of jobs; one piece (no subgraphs) is one module, as before.
std::vector<const Graph *> cpu_partitions(const Graph &lowered);

/// Builds, optimizes and emits a decomposed graph for `targets` (one code
/// variant per target, maxc compile --cpu A,B,...; the entry points pick
/// one per CPU at run time, Cpu/CpuCheck.h): each partition of each
/// variant in its own LLVMContext on one of `request.jobs` threads, the
/// objects joined (ld.lld -r) in (variant, partition) order, so the bytes
/// are the same for any number of jobs. Times "codegen", "optimize", "emit obj" (summed
/// over the partitions), "partitions" (their wall time), "link partitions",
/// and "emit <kind>" for assembly and IR (of the partitions' IR linked).
CpuCodegenResult compile_cpu_module(const Graph &lowered, const ModelInterface &abi,
                                    const std::vector<CpuTarget> &targets, const CpuCodegenRequest &request,
                                    PassTimer &timer, const LoweringPlans *plans = nullptr);

} // namespace maxc
