// A code generation backend, registered by name (IREE's TargetBackend /
// TargetRegistry shape): it validates its options, lists its targets (what
// `maxc targets` prints), and compiles a planned graph to named artifacts
// plus its section of the manifest. Backends: "cpu" (x86-64, aarch64),
// "amdgpu" (HIP code objects), "amdgpu-emu" (the GPU kernels run on the
// host; `maxc run --device amdgpu-emu`). docs/adding-a-backend.md.
#pragma once

#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/Codegen/Manifest.h"
#include "maxc/Codegen/ModelAbi.h"
#include "maxc/Codegen/PassTimer.h"
#include "maxc/Codegen/WeightsSection.h"
#include "maxc/IR/Graph.h"
#include "maxc/Transforms/Decompose.h"

#include <memory>
#include <set>
#include <string>
#include <vector>

namespace llvm {
class LLVMContext;
class Module;
} // namespace llvm

namespace maxc::driver {

/// Every backend option the command line has; a backend refuses the ones it
/// does not support (never ignores them).
struct BackendOptions {
  std::string triple;       // CPU / host triple; "" = x86_64-unknown-linux-gnu
  std::string cpu = "native";
  int opt_level = 2;
  std::string gpu;          // --gpu list as given ("gfx90a,mi300x"); "" = none
  int code_object_version = 0; // 0 = not given (5 where it applies)
  bool external_weights = false;
  unsigned jobs = 0;        // --jobs: code generation threads; 0 = the hardware threads
  bool profile = false;     // --profile (cpu): per-kernel counters, NAME_profile_report (Codegen/Profile.h)
  /// Not an option: the driver's writer, where a backend may start writing
  /// the weights while it generates code (WeightsSection.h); null: none.
  EarlyWrites *early_writes = nullptr;
};

/// One target a backend compiles for (a row of `maxc targets`).
struct TargetInfo {
  std::string arch;                 // "x86_64", "aarch64", "gfx90a"
  std::vector<std::string> triples; // accepted --target spellings (CPU) or the device triple (GPU)
  std::vector<std::string> aliases; // GPU product aliases ("mi300x")
  std::string product;              // "AMD Instinct MI300X (CDNA3)"
  std::string baseline;             // the CPU an empty --cpu means
  std::string native;               // the host CPU when this is the host's architecture
  std::vector<std::string> cpus;    // CPU names LLVM knows
  bool is_default = false;
};

/// A model after load → decompose → plan: what every backend compiles.
struct PlannedModel {
  const Graph *source = nullptr;  // as traced
  std::unique_ptr<Graph> canonical; // canonicalized (Transforms/Canonicalize.h); null: `source` unchanged
  std::unique_ptr<Graph> lowered;   // decomposed
  ModelInterface interface;       // of the source graph (header, manifest)
  ModelInterface abi;             // of the lowered graph (code generation)
  std::vector<std::string> kernels; // "main: 9 kernels", "sub.Block: 14 kernels"
  Dim workspace_bound;              // bytes, a Dim over the dims
  LoweringPlans plans;              // of `lowered` and its subgraphs (planned once)
};

/// What a backend produced: artifacts by kind ("obj", "header", "asm",
/// "hsaco.gfx90a", ...) and its manifest section.
struct BackendOutput {
  std::vector<std::pair<std::string, ByteChunks>> artifacts; // the weights as views, streamed by the writer
  ManifestSection manifest;
  std::string summary; // "x86_64-unknown-linux-gnu, znver4" for "maxc: wrote ..."
  uint64_t weights_blob_checksum = 0; // external weights
  uint64_t weights_blob_bytes = 0;
};

class Backend {
public:
  virtual ~Backend();
  virtual std::string name() const = 0;
  virtual std::string description() const = 0;
  /// The --emit kinds it accepts, in --print-outputs order (the driver adds
  /// "manifest" and "graph" itself, which every backend accepts).
  virtual std::vector<std::string> emit_kinds() const = 0;
  /// The artifact kinds a compile with `emit` writes, expanded (per arch),
  /// in --print-outputs order. `options` are valid.
  virtual std::vector<std::string> artifact_kinds(const std::set<std::string> &emit,
                                                  const BackendOptions &options) const = 0;
  /// Throws maxc::Error (InvalidArgument, location = the flag) for an option
  /// it does not support or a bad value.
  virtual void validate(const BackendOptions &options) const = 0;
  virtual std::vector<TargetInfo> targets() const = 0;
  /// Compiles; times its own steps into `timer`. Throws maxc::Error.
  virtual BackendOutput compile(const PlannedModel &model, const BackendOptions &options,
                                const std::set<std::string> &emit, PassTimer &timer) const = 0;
  /// A module for in-process execution (ORC JIT) exporting
  /// NAME_run_packed(buffers, dims, workspace); null when the backend's code
  /// cannot run on this host.
  virtual std::unique_ptr<llvm::Module> build_host_module(const PlannedModel &model, llvm::LLVMContext &context) const;
  /// The composites it lowers whole (decompose step); default: none.
  virtual DecomposeOptions decompose_options() const { return {}; }
  /// What its kernels take beyond the common lowering plan; default: nothing.
  virtual PlanOptions plan_options() const { return {}; }
};

/// The registered backends, in registration order (cpu, amdgpu, amdgpu-emu).
const std::vector<std::unique_ptr<Backend>> &backends();
/// The backend called `name`, or null.
const Backend *find_backend(const std::string &name);
/// "cpu, amdgpu, amdgpu-emu".
std::string backend_names();

} // namespace maxc::driver
