// The host object of a GPU artifact, for every GPU runtime: code images
// and weights as constants, the launch sequences (GpuHostEmitter) and the C
// entry points NAME_init/run/run_packed/workspace_size/destroy/
// status_string plus NAME_<runtime>_error. What differs between HIP and
// the CUDA driver API is a table of the runtime's symbol names and how a
// device and a code image are chosen (GpuRuntimeApi); the AMDGPU backend
// (AmdGpu/GpuModelCompiler.cpp) and the NVPTX backend
// (Nvptx/NvptxModelCompiler.cpp) both build their host module here.
#pragma once

#include "Gpu/GpuKernelEmitter.h"
#include "maxc/Codegen/GpuModelCompiler.h"
#include "maxc/Codegen/ModelAbi.h"
#include "maxc/Codegen/PassTimer.h"
#include "maxc/Codegen/Target.h"

#include <memory>
#include <string>
#include <vector>

namespace llvm {
class Module;
}

namespace maxc::codegen {

enum class GpuRuntime { hip, cuda };

/// The runtime calls the host object makes, by their exported symbol names
/// (the CUDA driver API's _v2 entry points: the headers' macros do not
/// apply to generated code).
struct GpuRuntimeApi {
  GpuRuntime runtime;
  const char *display_name; // "HIP", "CUDA": in NAME_status_string's messages
  const char *error_suffix; // "_hip_error", "_cuda_error": NAME<suffix>(ctx) gives the last error code
  const char *malloc, *free, *memcpy_htod, *memcpy_dtoh, *module_load, *module_get_function, *module_unload,
      *launch, *stream_synchronize, *device_synchronize;
  const char *memset; // (ptr, value, bytes): hipMemset's value an int, cuMemsetD8's a byte
  const char *memcpy_dtod; // (dst, src, bytes): a loop's carried values
  bool kernel_dots_to_underscores; // PTX names say '_' where the kernels' names say '.'
};
const GpuRuntimeApi &hip_runtime_api();
const GpuRuntimeApi &cuda_runtime_api();

/// The code images NAME_init may load. HIP: `bundle` (a clang offload
/// bundle: the runtime picks the object) first, then the code object whose
/// target matches the device's gcnArchName (generic targets and features
/// included), then every object in turn. CUDA: every image in order
/// (cubins, then PTX from the newest sm down: the driver refuses a cubin of
/// another architecture and PTX newer than the device).
struct GpuImages {
  std::string bundle;
  std::vector<std::pair<std::string, std::string>> images; // (target, bytes)
};

/// Fills `module` with the host code of `programs` (their kernels'
/// bodies not needed). With `host_copy_entry`, NAME_run_packed is instead
///   int32_t NAME_run_packed(void *const *buffers, const int64_t *dims, void *workspace)
/// on host buffers: init, device copies, run, copy back, destroy (the
/// in-process `maxc run --device cuda`; `workspace` is ignored), and the
/// device entry point is NAME_device_run_packed.
void build_gpu_runtime_host(llvm::Module &module, const ModelInterface &iface, const Graph &lowered,
                            const std::vector<GpuGraphProgram> &programs, const GpuImages &images,
                            const GpuRuntimeApi &api, bool host_copy_entry = false,
                            ByteChunks *streamed_weights = nullptr);

/// build_gpu_runtime_host into a new module, optimized and emitted as an
/// object for `host` (steps "host codegen", "optimize", "emit obj").
/// The weights are streamed into the object (WeightsSection.h), never IR.
/// `weights_head`, if set: weights_section_head(host.triple, weights_blob(lowered)),
/// already being written (append_weights_section).
ByteChunks emit_gpu_runtime_host_object(const ModelInterface &iface, const Graph &lowered,
                                        const std::vector<GpuGraphProgram> &programs, const GpuImages &images,
                                        const GpuRuntimeApi &api, const CpuTarget &host, PassTimer &timer,
                                        const ByteChunks *weights_head = nullptr);

/// The host object's head (ELF header and weights: weights_section_head),
/// which does not depend on the code: with the driver's writer (`early`
/// set) it starts being written before the kernels compile, so the weights
/// go to disk beside code generation; wait() after the host object is made.
class EarlyHostWeights {
public:
  EarlyHostWeights(EarlyWrites *early, const Graph &lowered, const std::string &host_triple);
  /// For emit_gpu_runtime_host_object: the head being written, or null.
  const ByteChunks *head() const { return write_ ? &head_ : nullptr; }
  /// Waits for the write ("wait for weights"; its own time is recorded as
  /// "weights (overlapped)"). Not waited for, the write is cancelled.
  void wait(PassTimer &timer);

private:
  ByteChunks head_;
  std::unique_ptr<EarlyWrite> write_;
};

/// The checks every GPU backend makes before generating kernels: a C name,
/// and no op the device cannot run yet (f64 transcendentals, pow). Throws
/// maxc::Error (InvalidArgument).
void check_gpu_model(const Graph &lowered, const std::string &name);

/// Keeps the launch sequence of `programs` (the kernels' names, grids and
/// buffers are the same in every device module) without the kernel
/// bodies, which die with their context; appends one summary per kernel.
void keep_launch_sequence(std::vector<GpuGraphProgram> &programs, std::vector<GpuKernelSummary> &summaries);

} // namespace maxc::codegen
