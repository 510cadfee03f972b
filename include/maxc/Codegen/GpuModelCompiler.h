// The AMDGPU backend's code generation: one HSACO code object per
// requested gfx architecture (kernels from the GPU kernel generator,
// lowered to AMDGPU and linked with ld.lld) embedded in a host object whose
// C entry points load the code object matching the device, upload the
// weights once and launch the kernels with hipModuleLaunchKernel. Links with
// -lamdhip64. The pipeline that drives it is lib/Driver (backend "amdgpu").
//
// Entry points (NAME = the model's C name; pointers to device memory):
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

#include "maxc/Codegen/GpuTarget.h"
#include "maxc/Codegen/ModelAbi.h"
#include "maxc/Codegen/PassTimer.h"
#include "maxc/Codegen/Target.h"
#include "maxc/Codegen/WeightsSection.h"

#include <memory>
#include <string>
#include <vector>

namespace llvm {
class LLVMContext;
class Module;
} // namespace llvm

namespace maxc {

struct GpuCompileOptions {
  std::vector<std::string> arches; // gfx names (resolve_gpu_arches)
  int code_object_version = 5;
  bool gpu_assembly = false;       // also return AMDGPU assembly per arch
};

struct GpuKernelSummary {
  std::string name, kind, grid; // grid: number of workgroups as a formula in the dims
  unsigned workgroup_size = 0;
  uint64_t lds_bytes = 0;
};

struct GpuCodegenResult {
  ByteChunks host_object; // the weights streamed in (WeightsSection.h)
  std::vector<std::pair<std::string, std::string>> code_objects; // arch -> HSACO bytes
  std::vector<std::pair<std::string, std::string>> gpu_assembly; // arch -> text, when requested
  std::vector<GpuKernelSummary> kernels;
  std::vector<std::vector<GpuKernelResources>> resources; // per code object, per kernel
  uint64_t launches = 0; // kernel launches per run (subgraph calls expanded)
};

/// Validates the name, arches and ops of a decomposed graph (f64
/// transcendentals and pow need a device libm: rejected with the nodes
/// named), then generates the kernels once per arch, links the code
/// objects and builds the host object for `host`. `abi` is
/// describe_interface(lowered, name). Throws maxc::Error.
GpuCodegenResult compile_amdgpu(const Graph &lowered, const ModelInterface &abi, const CpuTarget &host,
                                const GpuCompileOptions &options, PassTimer &timer);

/// The same kernels lowered to NVPTX: PTX text for `sm` with one .entry per
/// kernel (the kernel ABI of the AMDGPU code objects). For checking the
/// kernel generator on an NVIDIA GPU; no host launcher is generated.
std::string compile_gpu_kernels_ptx(const Graph &graph, const std::string &name, const std::string &sm);

namespace codegen {
/// The GPU backend executed on the host ("amdgpu-emu"): a host module of a
/// decomposed graph exporting
///   int32_t NAME_run_packed(void *const *buffers, const int64_t *dims, void *workspace)
/// (a null workspace is allocated), with the weights embedded; the kernels
/// are lowered to the emulation target (GpuEmulation.cpp). The kernels are
/// those generated for `arch` (the default: gfx942, whose matmuls run on
/// MFMA; "gfx1100": WMMA; "": the arch-neutral kernels of the PTX path).
std::unique_ptr<llvm::Module> build_gpu_emulation_module(const Graph &lowered, const std::string &name,
                                                         llvm::LLVMContext &context,
                                                         const std::string &arch = "gfx942");
} // namespace codegen

} // namespace maxc
