// Backend "amdgpu": a host object with one HSACO per gfx architecture
// embedded (lib/Codegen/AmdGpu/GpuModelCompiler.cpp), its header, and on request
// the raw code objects and AMDGPU assembly. Backend "amdgpu-emu": the same
// kernels run on the host, every work-item emulated (maxc run).
#include "Backends.h"

#include "maxc/Codegen/GpuModelCompiler.h"
#include "maxc/Codegen/GpuTarget.h"
#include "maxc/Codegen/HeaderEmitter.h"
#include "maxc/Support/Error.h"
#include "maxc/Support/Sha256.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <nlohmann/json.hpp>

#include <map>

namespace maxc::driver {

namespace {

using json = nlohmann::ordered_json;

constexpr int kDefaultCodeObjectVersion = 5;

struct GpuProduct {
  const char *chip, *alias, *product;
};
// The architectures maxc is tested for; --gpu accepts every gfx name LLVM
// knows (known_amdgpu_arches), these are the ones `maxc targets` shows.
constexpr GpuProduct kProducts[] = {
    {"gfx90a", "mi250x", "AMD Instinct MI250X (CDNA2)"},
    {"gfx942", "mi300x", "AMD Instinct MI300X (CDNA3)"},
    {"gfx1100", "rx7900xtx", "AMD Radeon RX 7900 XTX (RDNA3)"},
};

int code_object_version(const BackendOptions &options) {
  return options.code_object_version ? options.code_object_version : kDefaultCodeObjectVersion;
}

class AmdGpuBackend : public Backend {
public:
  std::string name() const override { return "amdgpu"; }
  std::string description() const override { return "AMD GPUs through HIP (maxc compile --gpu ARCH,...)"; }

  std::vector<std::string> emit_kinds() const override { return {"obj", "header", "hsaco", "gpu-asm"}; }
  DecomposeOptions decompose_options() const override { return gpu_decompose_options(); }
  PlanOptions plan_options() const override { return gpu_plan_options(); }

  std::vector<std::string> artifact_kinds(const std::set<std::string> &emit, const BackendOptions &options) const override {
    return gpu_artifact_kinds(emit, {"hsaco", "gpu-asm"}, resolve_gpu_arches(options.gpu));
  }

  void validate(const BackendOptions &options) const override {
    reject_gpu_unsupported_options(options);
    at_flag("--gpu", [&] { resolve_gpu_arches(options.gpu); });
    at_flag("--code-object-version", [&] { resolve_code_object_version(code_object_version(options)); });
    gpu_host_target(options);
  }

  std::vector<TargetInfo> targets() const override {
    std::vector<TargetInfo> out;
    for (const GpuProduct &p : kProducts)
      out.push_back(gpu_target_info(p.chip, "amdgcn-amd-amdhsa", p.alias, p.product));
    return out;
  }

  BackendOutput compile(const PlannedModel &model, const BackendOptions &options, const std::set<std::string> &emit,
                        PassTimer &timer) const override {
    BackendOutput out;
    CpuTarget host = gpu_host_target(options);
    GpuCompileOptions gpu;
    gpu.arches = resolve_gpu_arches(options.gpu);
    gpu.code_object_version = code_object_version(options);
    gpu.gpu_assembly = emit.count("gpu-asm") != 0;
    gpu.jobs = options.jobs;
    if (emit.count("obj"))
      gpu.early = options.early_writes;
    GpuCodegenResult code = compile_amdgpu(*model.lowered, model.abi, host, gpu, timer, &model.plans);

    if (emit.count("obj"))
      out.artifacts.emplace_back("obj", code.host_object);
    if (emit.count("header"))
      out.artifacts.emplace_back("header", timer.run("header", [&] {
        return emit_gpu_c_header(model.interface, gpu.arches, model.workspace_bound);
      }));
    if (emit.count("hsaco"))
      for (const auto &[arch, bytes] : code.code_objects)
        out.artifacts.emplace_back("hsaco." + arch, bytes);
    for (const auto &[arch, text] : code.gpu_assembly)
      out.artifacts.emplace_back("gpu-asm." + arch, text);

    const std::string &n = model.interface.name;
    out.manifest.backend = "amdgpu";
    out.manifest.target_json =
        gpu_target_json("amdgpu", host, options, "amdgcn-amd-amdhsa", gpu.arches,
                        json{{"code_object_version", gpu.code_object_version}}.dump());
    out.manifest.entry_points = {n + "_init",        n + "_run",       n + "_run_packed",   n + "_workspace_size",
                                 n + "_hip_error",   n + "_destroy",   n + "_status_string"};
    if (model.interface.state)
      for (const std::string &f : state_entry_point_suffixes())
        out.manifest.entry_points.push_back(n + f);
    out.manifest.link = {"-lamdhip64"};
    out.manifest.gpu_status_codes = true;
    json arches = json::array();
    for (size_t a = 0; a < code.code_objects.size(); ++a) {
      const auto &[arch, bytes] = code.code_objects[a];
      std::map<std::string, GpuKernelResources> used;
      for (const GpuKernelResources &r : code.resources[a])
        used[r.name] = r;
      json kernels = json::array();
      for (const auto &k : code.kernels) {
        json entry = {{"name", k.name}, {"kind", k.kind}, {"workgroup_size", k.workgroup_size},
                      {"grid", k.grid}, {"lds_bytes", k.lds_bytes}};
        if (auto it = used.find(k.name); it != used.end())
          entry.update({{"sgpr_count", it->second.sgpr_count},
                        {"vgpr_count", it->second.vgpr_count},
                        {"agpr_count", it->second.agpr_count},
                        {"vgpr_spill_count", it->second.vgpr_spill_count},
                        {"sgpr_spill_count", it->second.sgpr_spill_count},
                        {"scratch_bytes", it->second.private_segment_bytes},
                        {"group_segment_bytes", it->second.group_segment_bytes},
                        {"wavefront_size", it->second.wavefront_size},
                        {"waves_per_simd", amdgpu_waves_per_simd(arch, it->second)}});
        kernels.push_back(entry);
      }
      arches.push_back({{"arch", arch}, {"hsaco_bytes", bytes.size()}, {"hsaco_sha256", sha256_hex(bytes)},
                        {"launches", code.launches}, {"kernels", kernels}});
    }
    out.manifest.extra_key = "gpu";
    out.manifest.extra_json = arches.dump();
    out.summary = "HIP host " + host.triple + "; GPU";
    for (const std::string &arch : gpu.arches)
      out.summary += " " + arch;
    return out;
  }
};

class AmdGpuEmulatorBackend : public Backend {
public:
  std::string name() const override { return "amdgpu-emu"; }
  std::string description() const override {
    return "the amdgpu backend's kernels run on this CPU, every work-item emulated (maxc run --device amdgpu-emu)";
  }
  std::vector<std::string> emit_kinds() const override { return {}; }
  DecomposeOptions decompose_options() const override { return gpu_decompose_options(); }
  PlanOptions plan_options() const override { return gpu_plan_options(); }
  std::vector<std::string> artifact_kinds(const std::set<std::string> &, const BackendOptions &) const override {
    return {};
  }
  void validate(const BackendOptions &) const override {
    throw Error(ErrorCode::InvalidArgument,
                "the amdgpu-emu backend runs in process only (maxc run --device amdgpu-emu); it writes no artifacts");
  }
  std::vector<TargetInfo> targets() const override { return {}; }
  BackendOutput compile(const PlannedModel &, const BackendOptions &options, const std::set<std::string> &,
                        PassTimer &) const override {
    validate(options);
    return {};
  }
  std::unique_ptr<llvm::Module> build_host_module(const PlannedModel &model, llvm::LLVMContext &context) const override {
    return codegen::build_gpu_emulation_module(*model.lowered, model.abi.name, context, codegen::kGpuEmulationArch,
                                               &model.plans);
  }
};

} // namespace

std::unique_ptr<Backend> make_amdgpu_backend() { return std::make_unique<AmdGpuBackend>(); }
std::unique_ptr<Backend> make_amdgpu_emulator_backend() { return std::make_unique<AmdGpuEmulatorBackend>(); }

} // namespace maxc::driver
