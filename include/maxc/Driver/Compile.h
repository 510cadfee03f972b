// The compile pipeline (lib/Driver/Compile.cpp): one ordered list of named
// steps — load, decompose, plan, backend, artifacts, write — each run once
// and timed, whatever the backend. `maxc compile` and the tests call it.
#pragma once

#include "maxc/Transforms/QuantizeWeights.h"
#include "maxc/Codegen/LoopCheck.h"
#include "maxc/Codegen/Profile.h"
#include "maxc/Driver/Backend.h"
#include "maxc/Support/Diagnostics.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace maxc {
struct LoadedModel;  // maxc/Frontend/ModelLoader.h
class Communicator;  // maxc/Support/Communicator.h
} // namespace maxc

namespace maxc::driver {

struct CompileRequest {
  std::string model, weights;
  std::map<std::string, int64_t> dims; // ONNX: --dim NAME=VALUE pins a symbolic dim
  std::map<std::string, std::string> bound_inputs; // ONNX: --bind NAME=VALUES fixes a graph input
  std::map<std::string, int64_t> max_dims; // ONNX: --max-dim NAME=N bounds a dim read at run time
  std::string state; // ONNX: --state auto | IN=OUT,... makes KV-cache pairs model state
  bool dedup = true;                   // ONNX: trace repeated blocks as shared subgraphs
  bool fuse_qdq = true;                // ONNX: QDQ groups as integer ops (LoadOptions::fuse_qdq)
  std::string quantize_weights;        // "" | int8 | int4: constant matmul weights to matmul_nbits (Transforms/QuantizeWeights.h)
  int tensor_parallel = 1;             // > 1: rank `rank`'s program of the model split among this many (Transforms/Shard.h)
  int rank = 0;
  std::vector<std::string> shard_replicated; // --shard PATTERN=replicated (ShardOptions::replicated)
  std::string backend = "cpu";
  BackendOptions options;
  std::string name;       // C symbol prefix; "" = the model's name
  std::string output;     // the object's path; other artifacts go next to it
  bool output_given = false; // -o given (so -o "" is an error, not the default)
  std::vector<std::string> emit; // "" = obj, header, manifest
  int threads = 1;
  bool print_outputs = false;
  bool verify_reproducible = false;
  bool manifest_timings = false;
  bool depfile = false;
  std::string depfile_path; // "" = OUT.o.d
};

struct CompileResult {
  std::vector<std::pair<std::string, std::string>> outputs; // kind, path; --print-outputs order
  PassTimer timer;
  std::string object_path, summary;
  std::vector<QuantizedLayer> quantized; // --quantize-weights: each weight quantized, with its error
};

/// `--quantize-weights KIND` ("int8", "int4"; "" does nothing) on a loaded
/// model's graph (Transforms/QuantizeWeights.h), for compile and for the
/// commands that run or check a model. `layers` gets one entry per weight
/// quantized. A bad KIND is an error for `file` and drops the graph.
void quantize_loaded_weights(LoadedModel &model, const std::string &kind, const std::string &file,
                             DiagnosticEngine &diagnostics, std::vector<QuantizedLayer> &layers);

/// Runs the pipeline. Problems go to `diagnostics`; returns false when a
/// step failed (then no output was changed). `on_step` is told each step's
/// name before it runs (progress display).
bool compile(const CompileRequest &request, DiagnosticEngine &diagnostics, CompileResult &result,
             const std::function<void(const std::string &)> &on_step = {});

/// Load, decompose and plan for `name` (the steps compile() starts with),
/// keeping whole what the backend lowers whole (Backend::decompose_options).
PlannedModel plan_model(const Graph &graph, const std::string &name, const DecomposeOptions &options = {},
                        const PlanOptions &plan_options = {});

/// A model compiled in process by `backend` ("cpu", "amdgpu-emu") once and
/// run any number of times (maxc run --generate). `graph` must outlive it.
/// Model state buffers are inputs the runs update in place.
class HostModel {
public:
  HostModel(const std::string &backend, const Graph &graph, int opt_level = 2, int threads = 1);
  ~HostModel();
  HostModel(const HostModel &) = delete;
  HostModel &operator=(const HostModel &) = delete;
  /// The outputs; dims bind from the inputs and `dims`. Throws maxc::Error
  /// for an unbound dim or a non-zero run status (its message named).
  std::vector<HostTensor> run(const std::vector<HostTensor> &inputs, DimBindings dims = {});
  /// A tensor-parallel rank's program (its graph has collectives; cpu
  /// backend): the communicator its collectives call from now on (it must
  /// outlive the runs). Throws for a model without collectives.
  void set_communicator(Communicator &comm);

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Outputs of `graph` on `inputs`, compiled in-process by `backend` ("cpu"
/// or "amdgpu-emu") and run once. Symbolic dims bind from the inputs and
/// `dims`; throws maxc::Error for an unbound dim or a non-zero run status.
/// `threads`: the "cpu" artifact's pool size (NAME_set_num_threads).
/// Every rank's program of a tensor-parallel model (rank_programs[r] is
/// rank r's, Transforms/Shard.h) compiled by `backend` ("cpu") and run on a
/// thread each with the in-process communicator: rank 0's outputs. `inputs`
/// are each rank's own (rank_inputs).
std::vector<HostTensor> run_ranks_on_host(const std::string &backend, const std::vector<const Graph *> &rank_programs,
                                          const std::vector<std::vector<HostTensor>> &inputs, const DimBindings &dims,
                                          int opt_level = 2, int threads = 1);

std::vector<HostTensor> run_on_host(const std::string &backend, const Graph &graph,
                                    const std::vector<HostTensor> &inputs, DimBindings dims = {}, int opt_level = 2,
                                    int threads = 1);

/// A profile build of `graph` for this CPU (Codegen/Profile.h) run in
/// process: `warmup` runs, the counters reset, then `runs` runs.
struct HostProfile {
  std::vector<ProfiledKernel> kernels; // their `graph` pointers are null (the graphs are gone)
  /// The cliff check of the optimized code (Codegen/LoopCheck.h).
  std::vector<ScalarStridedLoop> scalar_loops;
  std::vector<KernelCounter> counters; // summed over the `runs` runs
  int64_t runs = 0;
  double run_ms = 0; // wall time per run (mean), entry points included
  int threads = 1;
};
HostProfile profile_on_host(const Graph &graph, const std::vector<HostTensor> &inputs, DimBindings dims,
                            int threads = 1, int runs = 10, int warmup = 2, int opt_level = 2);

} // namespace maxc::driver
