// The AMDGPU backend's code generation: one HSACO code object per
// requested gfx architecture (kernels from the GPU kernel generator,
// lowered to AMDGPU and linked with ld.lld) embedded in a host object, as
// one clang offload bundle plus the objects themselves, whose C entry
// points load the object for the device (the runtime's pick from the
// bundle, else the launcher's arch match, else each in turn: docs/GPU.md),
// upload the weights once and launch the kernels with
// hipModuleLaunchKernel. Links with -lamdhip64. The pipeline that drives it
// is lib/Driver (backend "amdgpu"); the NVIDIA counterpart is below.
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
#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/Codegen/ModelAbi.h"
#include "maxc/Codegen/PassTimer.h"
#include "maxc/Codegen/Target.h"
#include "maxc/Codegen/WeightsSection.h"
#include "maxc/Transforms/Decompose.h"

#include <memory>
#include <string>
#include <vector>

namespace llvm {
class LLVMContext;
class Module;
} // namespace llvm

namespace maxc {

/// What the GPU backends lower whole (decompose step): scaled dot-product
/// attention, f32, f16 and bf16, one fused kernel with f32 accumulation
/// (lib/Codegen/Gpu/GpuAttention.h); the
/// rowwise composites are decomposed (the generator regroups them as row
/// kernels).
inline DecomposeOptions gpu_decompose_options() {
  return {/*keep_rowwise=*/false, /*fuse_attention=*/true, /*attention_low_precision=*/true};
}

/// What the GPU backends plan with (plan step): the common plan, refined by
/// refine_gpu_plans. The GPU kernel generator takes only plans made so.
PlanOptions gpu_plan_options();
/// The GPU backends' plan pass (lib/Codegen/Gpu/GpuPlan.cpp), over the plans
/// of `root` and its subgraphs that `plans` holds: stored values the GPU
/// kernels recompute instead (constant subexpressions such as the causal
/// mask; views read only by matmuls and attentions, whose loaders read
/// through them; elementwise values read only by the row group after them),
/// and matmuls that store through the views after them
/// (LoweringPlan::stored_through). Positions, slots and epilogues stay.
void refine_gpu_plans(const Graph &root, LoweringPlans &plans);

struct GpuCompileOptions {
  std::vector<std::string> arches; // gfx names (resolve_gpu_arches)
  int code_object_version = 5;
  bool gpu_assembly = false;       // also return AMDGPU assembly per arch
  unsigned jobs = 0;               // arches compiled at once (maxc compile --jobs); 0 = the hardware threads
  EarlyWrites *early = nullptr;    // where the host object's weights start being written during codegen (or null)
};

struct GpuKernelSummary {
  std::string name, kind, grid; // grid: number of workgroups as a formula in the dims
  unsigned workgroup_size = 0;
  uint64_t lds_bytes = 0;
  bool constant_inputs = false; // reads constants only: the same results every run (none should)
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
/// describe_interface(lowered, name); `plans` the driver's (made with
/// gpu_plan_options(); null: planned here). Throws maxc::Error.
GpuCodegenResult compile_amdgpu(const Graph &lowered, const ModelInterface &abi, const CpuTarget &host,
                                const GpuCompileOptions &options, PassTimer &timer,
                                const LoweringPlans *plans = nullptr);

/// The same kernels lowered to NVPTX: PTX text for `sm` with one .entry per
/// kernel (the kernel ABI of the AMDGPU code objects), from an undecomposed
/// graph.
std::string compile_gpu_kernels_ptx(const Graph &graph, const std::string &name, const std::string &sm);

// ---- NVIDIA (backend "cuda", lib/Codegen/Nvptx/NvptxModelCompiler.cpp) ----
//
// The same kernel generator lowered to NVPTX; a host object with the PTX
// of every sm (and a cubin per sm where ptxas was found at compile time)
// whose entry points are the HIP artifact's (NAME_init/run/run_packed/
// workspace_size/destroy/status_string, same status codes) with
// NAME_cuda_error(ctx) giving the last CUresult. Launches through the CUDA
// driver API: links with -lcuda.

struct CudaCompileOptions {
  std::vector<std::string> sms; // "sm_80", ... (resolve_cuda_arches)
  std::string ptxas;            // ptxas to build cubins with; "" = PTX only (the driver JIT-compiles it)
  unsigned jobs = 0;            // sms compiled at once (maxc compile --jobs); 0 = the hardware threads
  EarlyWrites *early = nullptr; // where the host object's weights start being written during codegen (or null)
};

struct CudaCodegenResult {
  ByteChunks host_object; // the weights streamed in (WeightsSection.h)
  std::vector<std::pair<std::string, std::string>> ptx;    // sm -> PTX text
  std::vector<std::pair<std::string, std::string>> cubins; // sm -> cubin, for the sms ptxas accepted
  std::vector<std::pair<std::string, std::string>> ptxas_errors; // sm -> ptxas' message, where it refused
  std::string ptxas_version; // its last --version line; "" without ptxas
  std::vector<GpuKernelSummary> kernels;
};

/// "sm_80,sm_90" → {"sm_80", "sm_90"}: deduplicated, each an sm LLVM's
/// NVPTX target knows. Throws maxc::Error (InvalidArgument) otherwise.
std::vector<std::string> resolve_cuda_arches(const std::string &list);

/// The ptxas to use at compile time: $MAXC_PTXAS when set ("" or "none":
/// none), else ptxas on the PATH, else /usr/local/cuda/bin/ptxas; "" when
/// there is none.
std::string find_ptxas();

/// Validates as compile_amdgpu does, generates PTX per sm, cubins through
/// `options.ptxas`, and the host object (`plans`: as compile_amdgpu's).
/// Throws maxc::Error.
CudaCodegenResult compile_cuda(const Graph &lowered, const ModelInterface &abi, const CpuTarget &host,
                               const CudaCompileOptions &options, PassTimer &timer,
                               const LoweringPlans *plans = nullptr);

/// For `maxc run --device cuda`: the host module of the artifact (PTX for
/// `sm` only) whose NAME_run_packed(buffers, dims, workspace) takes host
/// buffers (the backends' in-process convention), for the ORC JIT; libcuda
/// must be loaded into the process. `plans`: as compile_amdgpu's.
std::unique_ptr<llvm::Module> build_cuda_host_run_module(const Graph &lowered, const ModelInterface &abi,
                                                         const std::string &sm, llvm::LLVMContext &context,
                                                         const LoweringPlans *plans = nullptr);

namespace codegen {
/// The kernels and launches the generator makes of a decomposed graph for
/// `arch` (a gfx name, "" for the arch-neutral kernels), without compiling
/// them: for tests of launch sequences. `launches`: per run; `plans`: as
/// compile_amdgpu's.
std::vector<GpuKernelSummary> plan_gpu_kernels(const Graph &lowered, const std::string &arch, uint64_t *launches = nullptr,
                                               const LoweringPlans *plans = nullptr);

/// The GPU backend executed on the host ("amdgpu-emu"): a host module of a
/// decomposed graph exporting
///   int32_t NAME_run_packed(void *const *buffers, const int64_t *dims, void *workspace)
/// (a null workspace is allocated), with the weights embedded; the kernels
/// are lowered to the emulation target (GpuEmulation.cpp). The kernels are
/// those generated for `arch` (the default: gfx942, whose matmuls run on
/// MFMA; "gfx1100": WMMA; "sm_90": NVIDIA's, f16/bf16 on mma.sync; "": the
/// arch-neutral kernels). `plans`: as compile_amdgpu's.
inline constexpr char kGpuEmulationArch[] = "gfx942";
std::unique_ptr<llvm::Module> build_gpu_emulation_module(const Graph &lowered, const std::string &name,
                                                         llvm::LLVMContext &context,
                                                         const std::string &arch = kGpuEmulationArch,
                                                         const LoweringPlans *plans = nullptr);

/// Tests only: while alive, the kernels' mma.sync A fragments take a wrong
/// lane layout (`kind` 1: elements 0 and 2 swapped), so that a test can show
/// the emulator (which reads by the documented layout) catches it.
struct MmaLayoutMutation {
  explicit MmaLayoutMutation(int kind);
  ~MmaLayoutMutation();
  MmaLayoutMutation(const MmaLayoutMutation &) = delete;
  MmaLayoutMutation &operator=(const MmaLayoutMutation &) = delete;
};

/// NVIDIA GEMMs take the macro-tile kernel (64 x 64, f32 128 x 128; f16/bf16
/// on mma.sync from sm_80) only when its grid has at least this many
/// macro-tiles, symbolic dims counted as 1; smaller GEMMs take the 16 x 16
/// kernel, whose hundreds of small blocks fill the GPU (H200, examples/gpt:
/// 0.48 ms per forward against 1.51 ms with macro-tiles). Default 64.
int64_t nvidia_min_macro_tiles();
/// Tests only: while alive, the threshold is `tiles` (0: every NVIDIA GEMM
/// takes the macro-tile kernel, so small test shapes exercise it).
struct NvidiaMacroTileThreshold {
  explicit NvidiaMacroTileThreshold(int64_t tiles);
  ~NvidiaMacroTileThreshold();
  NvidiaMacroTileThreshold(const NvidiaMacroTileThreshold &) = delete;
  NvidiaMacroTileThreshold &operator=(const NvidiaMacroTileThreshold &) = delete;
};
} // namespace codegen

} // namespace maxc
