// Backend "cuda": NVIDIA GPUs through the CUDA driver API — a host object
// embedding PTX per sm (and cubins where ptxas is installed), built by
// lib/Codegen/Nvptx/NvptxModelCompiler.cpp from the same kernel generator
// as "amdgpu", with the HIP artifact's entry points and status codes.
// In process (`maxc run --device cuda`) libcuda.so.1 is loaded with dlopen,
// so maxc itself builds and runs without CUDA. docs/GPU.md.
#include "Backends.h"

#include "maxc/Codegen/GpuModelCompiler.h"
#include "maxc/Codegen/GpuTarget.h"
#include "maxc/Codegen/HeaderEmitter.h"
#include "maxc/Support/Error.h"
#include "maxc/Support/Sha256.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <nlohmann/json.hpp>

#include <dlfcn.h>

namespace maxc::driver {

namespace {

using json = nlohmann::ordered_json;

struct GpuProduct {
  const char *sm, *product;
};
// The architectures `maxc targets` shows; --gpu accepts every sm LLVM knows.
constexpr GpuProduct kProducts[] = {
    {"sm_75", "NVIDIA Turing (T4, RTX 20xx)"},
    {"sm_80", "NVIDIA A100 (Ampere)"},
    {"sm_86", "NVIDIA RTX 30xx, A10, A40 (Ampere)"},
    {"sm_89", "NVIDIA L4, L40, RTX 40xx (Ada)"},
    {"sm_90", "NVIDIA H100, H200 (Hopper)"},
};

/// libcuda.so.1, loaded into the process once (RTLD_GLOBAL: the JIT
/// resolves the host module's cu* calls through the process), and the
/// device's sm; throws E0302 ("no CUDA driver" / "no CUDA device") otherwise.
std::string cuda_device_sm() {
  static void *handle = nullptr;
  if (!handle) {
    handle = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!handle) {
      const char *why = ::dlerror();
      throw Error(ErrorCode::NoGpuDevice, std::string("no CUDA driver: libcuda.so.1 cannot be loaded (") +
                                              (why ? why : "not found") +
                                              "); --device cuda needs an NVIDIA GPU with its driver installed");
    }
  }
  auto init = reinterpret_cast<int (*)(unsigned)>(::dlsym(handle, "cuInit"));
  auto get = reinterpret_cast<int (*)(int *, int)>(::dlsym(handle, "cuDeviceGet"));
  auto attribute = reinterpret_cast<int (*)(int *, int, int)>(::dlsym(handle, "cuDeviceGetAttribute"));
  if (!init || !get || !attribute)
    throw Error(ErrorCode::NoGpuDevice, "no CUDA driver: libcuda.so.1 lacks cuInit/cuDeviceGet/cuDeviceGetAttribute");
  int device = 0, major = 0, minor = 0;
  if (int rc = init(0); rc != 0)
    throw Error(ErrorCode::NoGpuDevice, "no CUDA device: cuInit returned " + std::to_string(rc));
  constexpr int kComputeCapabilityMajor = 75, kComputeCapabilityMinor = 76; // CUdevice_attribute
  if (get(&device, 0) != 0 || attribute(&major, kComputeCapabilityMajor, device) != 0 ||
      attribute(&minor, kComputeCapabilityMinor, device) != 0)
    throw Error(ErrorCode::NoGpuDevice, "no CUDA device: cannot read device 0's compute capability");
  // The device's own sm where LLVM knows it, else the newest LLVM knows
  // below it (its PTX is JIT-compiled forward by the driver).
  for (int cc = major * 10 + minor; cc >= 30; --cc) {
    try {
      return resolve_cuda_arches("sm_" + std::to_string(cc)).front();
    } catch (const Error &) {
    }
  }
  throw Error(ErrorCode::NoGpuDevice, "the CUDA device's compute capability " + std::to_string(major) + "." +
                                          std::to_string(minor) + " has no PTX target in LLVM");
}

class CudaBackend : public Backend {
public:
  std::string name() const override { return "cuda"; }
  std::string description() const override {
    return "NVIDIA GPUs through the CUDA driver API (maxc compile --gpu sm_80,...; maxc run --device cuda)";
  }

  std::vector<std::string> emit_kinds() const override { return {"obj", "header", "ptx", "cubin"}; }
  DecomposeOptions decompose_options() const override { return gpu_decompose_options(); }
  PlanOptions plan_options() const override { return gpu_plan_options(); }

  std::vector<std::string> artifact_kinds(const std::set<std::string> &emit, const BackendOptions &options) const override {
    return gpu_artifact_kinds(emit, {"ptx", "cubin"}, resolve_cuda_arches(options.gpu));
  }

  void validate(const BackendOptions &options) const override {
    reject_gpu_unsupported_options(options);
    if (options.code_object_version)
      throw Error(ErrorCode::InvalidArgument, "--code-object-version applies to AMD GPUs only", "--code-object-version");
    at_flag("--gpu", [&] { resolve_cuda_arches(options.gpu); });
    gpu_host_target(options);
  }

  std::vector<TargetInfo> targets() const override {
    std::vector<TargetInfo> out;
    for (const GpuProduct &p : kProducts)
      out.push_back(gpu_target_info(p.sm, "nvptx64-nvidia-cuda", nullptr, p.product));
    return out;
  }

  BackendOutput compile(const PlannedModel &model, const BackendOptions &options, const std::set<std::string> &emit,
                        PassTimer &timer) const override {
    BackendOutput out;
    CpuTarget host = gpu_host_target(options);
    CudaCompileOptions cuda;
    cuda.sms = resolve_cuda_arches(options.gpu);
    cuda.ptxas = find_ptxas();
    cuda.jobs = options.jobs;
    if (emit.count("obj"))
      cuda.early = options.early_writes;
    CudaCodegenResult code = compile_cuda(*model.lowered, model.abi, host, cuda, timer, &model.plans);

    if (emit.count("obj"))
      out.artifacts.emplace_back("obj", code.host_object);
    if (emit.count("header"))
      out.artifacts.emplace_back("header", timer.run("header", [&] {
        return emit_gpu_c_header(model.interface, cuda.sms, model.workspace_bound, /*cuda=*/true);
      }));
    if (emit.count("ptx"))
      for (const auto &[sm, text] : code.ptx)
        out.artifacts.emplace_back("ptx." + sm, text);
    if (emit.count("cubin")) {
      // Every requested cubin is written (empty where ptxas is missing or
      // refused the sm; the manifest says why).
      for (const std::string &sm : cuda.sms) {
        std::string bytes;
        for (const auto &[s, b] : code.cubins)
          if (s == sm)
            bytes = b;
        out.artifacts.emplace_back("cubin." + sm, bytes);
      }
    }

    const std::string &n = model.interface.name;
    out.manifest.backend = "cuda";
    out.manifest.target_json = gpu_target_json(
        "cuda", host, options, "nvptx64-nvidia-cuda", cuda.sms,
        json{{"ptxas", code.ptxas_version.empty() ? json(nullptr) : json(code.ptxas_version)}}.dump());
    out.manifest.entry_points = {n + "_init",       n + "_run",     n + "_run_packed",   n + "_workspace_size",
                                 n + "_cuda_error", n + "_destroy", n + "_status_string"};
    if (model.interface.state)
      for (const std::string &f : state_entry_point_suffixes())
        out.manifest.entry_points.push_back(n + f);
    out.manifest.link = {"-lcuda"};
    out.manifest.gpu_status_codes = true;
    json kernels = json::array();
    for (const auto &k : code.kernels) {
      std::string symbol = k.name;
      std::replace(symbol.begin(), symbol.end(), '.', '_');
      kernels.push_back({{"name", k.name}, {"symbol", symbol}, {"kind", k.kind}, {"workgroup_size", k.workgroup_size},
                         {"grid", k.grid}, {"lds_bytes", k.lds_bytes}});
    }
    json arches = json::array();
    for (const auto &[sm, text] : code.ptx) {
      json entry = {{"arch", sm}, {"ptx_bytes", text.size()}, {"ptx_sha256", sha256_hex(text)}};
      for (const auto &[s, bytes] : code.cubins)
        if (s == sm)
          entry.update({{"cubin_bytes", bytes.size()}, {"cubin_sha256", sha256_hex(bytes)}});
      for (const auto &[s, error] : code.ptxas_errors)
        if (s == sm)
          entry["ptxas_error"] = error.substr(0, error.find('\n'));
      entry["kernels"] = kernels;
      arches.push_back(entry);
    }
    out.manifest.extra_key = "gpu";
    out.manifest.extra_json = arches.dump();
    out.summary = "CUDA host " + host.triple + "; GPU";
    for (const std::string &sm : cuda.sms)
      out.summary += " " + sm;
    out.summary += code.cubins.empty() ? " (PTX)" : " (PTX + cubins)";
    return out;
  }

  std::unique_ptr<llvm::Module> build_host_module(const PlannedModel &model, llvm::LLVMContext &context) const override {
    return build_cuda_host_run_module(*model.lowered, model.abi, cuda_device_sm(), context, &model.plans);
  }
};

} // namespace

std::unique_ptr<Backend> make_cuda_backend() { return std::make_unique<CudaBackend>(); }

} // namespace maxc::driver
