// Compiling a Graph for AMD GPUs: one HSACO code object per requested gfx
// architecture (kernels from the GPU kernel generator, lowered to AMDGPU
// and linked with ld.lld) embedded in a host object whose C entry points
// load the code object matching the device, upload the weights once and
// launch the kernels with hipModuleLaunchKernel. Links with -lamdhip64.
//
// Entry points (NAME = options.name; pointers to device memory):
//   int32_t NAME_init(NAME_context **ctx);
//   int32_t NAME_run(NAME_context *ctx, const T *in..., T *out..., int64_t dim...,
//                    void *workspace, void *stream);
//   int32_t NAME_run_packed(NAME_context *ctx, void *const *buffers, const int64_t *dims,
//                           void *workspace, void *stream);
//   int64_t NAME_workspace_size(int64_t dim...);
//   int32_t NAME_hip_error(const NAME_context *ctx);  // the last HIP error code
//   void NAME_destroy(NAME_context *ctx);
//   const char *NAME_status_string(int32_t status);
#pragma once

#include "maxc/Codegen/ModelCompiler.h"

#include <string>
#include <vector>

namespace maxc {

/// Status codes of the GPU entry points beyond the CPU ones (RunStatus).
enum class GpuRunStatus : int32_t {
  no_device = 6,        // no GPU visible to the HIP runtime
  no_matching_arch = 7, // the device's architecture is not among the code objects
  gpu_error = 8,        // a HIP call failed; NAME_hip_error() has its code
};

struct GpuCompileOptions {
  std::string name;                // C symbol prefix; default: the graph's name
  std::vector<std::string> arches; // gfx names (resolve_gpu_arches)
  int code_object_version = 5;
  std::string triple;              // host triple; "" = x86_64-unknown-linux-gnu
  std::string cpu = "native";      // host CPU (the launcher only)
  int opt_level = 2;
  bool gpu_assembly = false;       // also return AMDGPU assembly per arch
};

struct GpuKernelSummary {
  std::string name, kind, grid; // grid: number of workgroups as a formula in the dims
  unsigned workgroup_size = 0;
  uint64_t lds_bytes = 0;
};

/// What a kernel uses on one arch, from its code object's metadata.
struct GpuKernelResources {
  std::string name;
  int64_t sgpr_count = -1, vgpr_count = -1;
  int64_t private_segment_bytes = -1; // scratch per work-item
  int64_t group_segment_bytes = -1;   // LDS per workgroup
};

struct GpuCompiledModel {
  CpuTarget host;
  ModelInterface interface;
  std::string host_object;
  std::string header;
  std::vector<std::pair<std::string, std::string>> code_objects; // arch -> HSACO bytes
  std::vector<std::pair<std::string, std::string>> gpu_assembly; // arch -> text, when requested
  std::vector<GpuKernelSummary> kernels;
  std::vector<std::vector<GpuKernelResources>> resources; // per code object, per kernel
  std::string workspace_bound;
};

/// Validates names, arches and ops (f64 transcendentals and pow need a
/// device libm: rejected with the nodes named), then generates, links and
/// embeds. Throws maxc::Error.
GpuCompiledModel compile_gpu_model(const Graph &graph, const GpuCompileOptions &options);

/// The same kernels lowered to NVPTX: PTX text for `sm` with one .entry per
/// kernel (the kernel ABI of the AMDGPU code objects). For checking the
/// kernel generator on an NVIDIA GPU; no host launcher is generated.
std::string compile_gpu_kernels_ptx(const Graph &graph, const std::string &name, const std::string &sm);

} // namespace maxc
