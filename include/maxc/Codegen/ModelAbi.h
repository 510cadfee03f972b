// The model ABI every backend shares: what an artifact looks like from C
// (interface, C names, status codes, the C type of each dtype) and the
// weights blob layout. Backend-neutral: the CPU, AMDGPU and emulator
// backends, the header and the manifest all read it from here.
#pragma once

#include "maxc/IR/Graph.h"
#include "maxc/Support/CNames.h" // is_c_identifier, is_reserved_c_name

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace maxc {

/// Status codes returned by the generated entry points (every backend).
enum class RunStatus : int32_t {
  ok = 0,
  null_pointer = 1,
  invalid_dim = 2,
  out_of_memory = 3,
  weights_not_set = 4,  // external weights: NAME_set_weights was not called
  weights_mismatch = 5, // external weights: wrong size, hash or alignment
  no_device = 6,        // GPU: no device visible to the HIP runtime
  no_matching_arch = 7, // GPU: the device's architecture has no code object
  gpu_error = 8,        // GPU: a HIP call failed; NAME_hip_error() has its code
  unsupported_cpu = 9,  // CPU: the CPU lacks features the code was compiled for
  state_full = 10,      // a model with state: length + advance > capacity
  collective = 11,      // a tensor-parallel rank: a collective could not run (no or wrong communicator)
};

/// One row of the status table: the code, its header constant's suffix
/// (NAME_<suffix>), its manifest text and NAME_status_string's message.
struct StatusInfo {
  RunStatus status;
  const char *macro;   // "OK", "ERROR_NULL_POINTER", ...
  const char *summary; // "null pointer" (manifest)
  const char *message; // NAME_status_string (may contain %s: the model name)
  bool cpu;            // returned by the CPU backend
  bool gpu;            // returned by the GPU backend
  bool state_only = false; // only models with state (ModelState) return it
  bool collective_only = false; // only a tensor-parallel rank's program (ModelInterface::world) returns it
};

/// The one status table (header constants, manifest, status strings).
const std::vector<StatusInfo> &status_table();

/// The rows a backend returns ("cpu" or "gpu" column), for a model with or
/// without state.
std::vector<StatusInfo> status_codes(bool gpu, bool state = false, bool collectives = false);

/// The state API's entry points (a model with state, every backend):
/// NAME followed by each of these.
const std::vector<std::string> &state_entry_point_suffixes();

/// The C type of a dtype's elements in the generated headers ("float",
/// "uint16_t" for f16/bf16 bits, "uint8_t" for bool, ...).
const char *c_type_name(DType dtype);

/// What the artifact looks like from C, shared by the header and manifest.
struct ModelInterface {
  struct Tensor {
    std::string name;   // C identifier (mangled; see c_name below)
    TensorType type;
    std::string source_name; // the model's own name ("h.0"), shown in comments and manifests
    /// A model-state buffer (ModelState): the run writes into it, so its C
    /// pointer is not const, and NAME_step passes the state object's.
    bool state = false;
    /// The shape to allocate: `type.shape` with each symbol a node defines
    /// at run time replaced by its bound (bound_node_symbols); the run
    /// writes the output's run-time shape as a row-major prefix of it.
    /// Empty for inputs, and for outputs that name no such symbol.
    Shape bound = {};
    const Shape &alloc_shape() const { return bound.empty() ? type.shape : bound; }
  };
  std::string name;
  std::vector<Tensor> inputs, outputs;
  std::vector<std::string> symbols; // symbolic dims, in argument order (the model's names)
  std::vector<std::string> symbol_params; // their C parameter names (mangled)
  /// Symbols defined by nodes at run time (SymbolOrigin::NodeResult): no
  /// parameter; the compiled functions' dims array holds them after
  /// `symbols`, stored by the node that defines each (dims_array()).
  std::vector<std::string> defined_symbols;
  /// Each defined symbol's upper bound (what buffers are sized by).
  std::vector<int64_t> defined_bounds;
  /// Symbols a call binds per call (a body's own dims, Ops/CallBinding.h):
  /// no parameter; slots after `defined_symbols`, which each such call sets
  /// in a copy of its caller's array (the per-call dims array).
  std::vector<std::string> call_symbols;
  /// The compiled functions' dims array: symbols, then defined_symbols,
  /// then call_symbols (followed by one flag slot when any of the last two
  /// exist: graph_dims_array).
  std::vector<std::string> dims_array() const {
    std::vector<std::string> all = symbols;
    all.insert(all.end(), defined_symbols.begin(), defined_symbols.end());
    all.insert(all.end(), call_symbols.begin(), call_symbols.end());
    return all;
  }
  /// The dims array's slots after the parameters (defined and call symbols).
  size_t internal_dims() const { return defined_symbols.size() + call_symbols.size(); }
  /// The model's state (a KV cache; IR/SymbolTable.h): NAME_state_create,
  /// NAME_step... are exported, and NAME_run checks length + advance <=
  /// capacity. Its buffers are the inputs with `state` set.
  std::optional<ModelState> state;
  /// State buffers' bytes per row (of `capacity` rows), in input order.
  std::vector<int64_t> state_row_bytes;
  uint64_t constant_bytes = 0;
  /// Workspace bytes, at most: a Dim over the symbols (0 when not
  /// planned). NAME_run rejects dims for which it overflows.
  Dim workspace_bound;
  size_t subgraph_definitions = 0, subgraph_calls = 0;
  /// External weights: the blob's size and lanes64 checksum (Support/Sha256.h;
  /// 0 when embedded).
  bool external_weights = false;
  uint64_t weights_blob_bytes = 0;
  uint64_t weights_blob_checksum = 0;
  /// CPU objects: the CPU the code was compiled for and the features it
  /// checks before the first run (checked_cpu_features, Codegen/Target.h;
  /// empty: no check).
  std::string cpu;                       // "x86-64-v3,znver5" with several code variants
  std::vector<std::string> cpu_features; // the least demanding variant's
  size_t cpu_variants = 1;               // > 1: NAME_cpu_variant() says which runs
  /// A profile build (maxc compile --profile): NAME_profile_report and
  /// NAME_profile_reset exported (Codegen/Profile.h).
  bool profile = false;
  /// One rank's program of a tensor-parallel model (Transforms/Shard.h):
  /// the ranks it runs among (its collectives' `world`), 0 for a model
  /// without collectives. NAME_set_communicator is exported.
  int64_t world = 0;
  int64_t rank = 0; // which rank's program (the compile's --rank)
};

ModelInterface describe_interface(const Graph &graph, const std::string &name);
/// True when an output's size names a symbol a node defines at run time:
/// NAME_run_packed's dims array then holds symbols.size() +
/// defined_symbols.size() values, the last written by the run (the
/// outputs' actual sizes; their buffers are sized by the bounds).
bool reports_defined_symbols(const ModelInterface &m);

namespace codegen {

/// The weights blob: every constant read by the root graph, then by each
/// subgraph (name order), each 64-byte aligned; `offsets` gets their byte
/// offsets. A copy of the bytes: weights_blob (WeightsSection.h) gives them
/// as views, which the writers stream.
std::string layout_constants(const Graph &lowered, std::map<std::pair<const Graph *, std::string>, uint64_t> &offsets);

} // namespace codegen

} // namespace maxc
