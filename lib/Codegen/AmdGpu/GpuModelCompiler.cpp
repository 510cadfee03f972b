#include "maxc/Codegen/GpuModelCompiler.h"

#include "maxc/Codegen/CompileJobs.h"
#include "EntryPointUtil.h"
#include "Gpu/GpuKernelEmitter.h"
#include "Gpu/GpuLowering.h"
#include "Gpu/GpuRuntimeHost.h"
#include "maxc/Codegen/GpuTarget.h"
#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/Codegen/ObjectEmitter.h"
#include "maxc/Codegen/WeightsSection.h"
#include "maxc/IR/GraphSymbols.h"
#include "maxc/Support/Error.h"

#include <llvm/IR/Module.h>

namespace maxc {

GpuCodegenResult compile_amdgpu(const Graph &lowered, const ModelInterface &abi, const CpuTarget &host,
                                const GpuCompileOptions &options, PassTimer &timer, const LoweringPlans *plans) {
  GpuCodegenResult out;
  const std::string &name = abi.name;
  if (options.arches.empty())
    throw Error(ErrorCode::InvalidArgument, "no AMD GPU architecture given (--gpu gfx90a,...)");
  resolve_code_object_version(options.code_object_version);
  codegen::check_gpu_model(lowered, name);
  const std::vector<std::string> symbols = abi.dims_array(); // kernels take every dim, defined ones too

  // The host object's head (ELF header and weights) does not depend on the
  // code: with the driver's writer it is written while the arches compile.
  codegen::EarlyHostWeights early(options.early, lowered, host.triple);

  // Each arch's kernels and code object on one of `options.jobs` threads,
  // in its own LLVMContext; results and step times are kept per arch and
  // gathered in arch order, so the artifact is the same for any --jobs.
  struct ArchCode {
    PassTimer timer;
    std::vector<codegen::GpuGraphProgram> programs;
    std::string hsaco, assembly;
  };
  std::vector<ArchCode> per_arch(options.arches.size());
  timer.run("arches", [&] {
    codegen::run_jobs(options.arches.size(), options.jobs, [&](size_t a) {
      const std::string &arch = options.arches[a];
      ArchCode &code = per_arch[a];
      llvm::LLVMContext context;
      llvm::Module device(name + "." + arch, context);
      device.setTargetTriple("amdgcn-amd-amdhsa");
      device.setDataLayout(amdgpu_data_layout(arch));
      code.programs = code.timer.run("kernels " + arch, [&] {
        auto p = codegen::emit_gpu_kernels(device, lowered, name, symbols, arch, plans);
        codegen::lower_gpu_kernels(device, p, codegen::GpuLoweringTarget::amdgpu, symbols.size());
        codegen::verify_module(device, "AMDGPU kernel");
        return p;
      });
      code.hsaco = code.timer.run("hsaco " + arch, [&] {
        return emit_amdgpu_code_object(device, arch, options.code_object_version);
      });
      if (options.gpu_assembly)
        code.assembly = code.timer.run("gpu-asm " + arch, [&] {
          return emit_amdgpu_assembly(device, arch, options.code_object_version);
        });
    });
  });
  // The launch sequences the host module describes: the kernels' names,
  // grids and buffers are the same in every device module (emit_gpu_kernels
  // is deterministic), so the first arch's are kept, without their bodies.
  std::vector<codegen::GpuGraphProgram> programs;
  for (size_t a = 0; a < options.arches.size(); ++a) {
    const std::string &arch = options.arches[a];
    ArchCode &code = per_arch[a];
    for (const auto &[step, ms] : code.timer.passes())
      timer.record(step, ms);
    out.resources.push_back(amdgpu_kernel_resources(code.hsaco));
    out.code_objects.emplace_back(arch, std::move(code.hsaco));
    if (options.gpu_assembly)
      out.gpu_assembly.emplace_back(arch, std::move(code.assembly));
    if (programs.empty()) {
      out.launches = codegen::gpu_launch_count(code.programs);
      programs = std::move(code.programs);
      codegen::keep_launch_sequence(programs, out.kernels);
    }
  }
  // One offload bundle (the runtime picks the object), and the objects
  // themselves for the launcher's own choice when it cannot.
  codegen::GpuImages images;
  images.bundle = timer.run("offload bundle", [&] { return make_offload_bundle(out.code_objects, host.triple); });
  images.images = out.code_objects;

  out.host_object = codegen::emit_gpu_runtime_host_object(abi, lowered, programs, images, codegen::hip_runtime_api(),
                                                          host, timer, early.head());
  early.wait(timer);
  return out;
}

std::vector<GpuKernelSummary> codegen::plan_gpu_kernels(const Graph &lowered, const std::string &arch,
                                                       uint64_t *launches, const LoweringPlans *plans) {
  llvm::LLVMContext context;
  llvm::Module device("plan", context);
  device.setTargetTriple("amdgcn-amd-amdhsa");
  device.setDataLayout(amdgpu_data_layout(arch.empty() ? "gfx942" : arch));
  std::vector<std::string> symbols = dim_symbols(lowered);
  std::vector<GpuGraphProgram> programs = emit_gpu_kernels(device, lowered, "plan", symbols, arch, plans);
  if (launches)
    *launches = gpu_launch_count(programs);
  std::vector<GpuKernelSummary> out;
  keep_launch_sequence(programs, out);
  return out;
}

} // namespace maxc
