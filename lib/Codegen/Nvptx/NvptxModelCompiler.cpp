// The NVPTX backend's code generation ("cuda"): the GPU kernel generator's
// kernels lowered to PTX per sm, cubins through ptxas where it is
// installed, and the host object of Gpu/GpuRuntimeHost.cpp on the CUDA
// driver API. docs/GPU.md.
#include "maxc/Codegen/GpuModelCompiler.h"

#include "maxc/Codegen/CompileJobs.h"
#include "EntryPointUtil.h"
#include "Gpu/GpuKernelEmitter.h"
#include "Gpu/GpuLowering.h"
#include "Gpu/GpuRuntimeHost.h"
#include "maxc/Codegen/GpuTarget.h"
#include "maxc/Codegen/ObjectEmitter.h"
#include "maxc/IR/GraphSymbols.h"
#include "maxc/Support/Error.h"
#include "maxc/Transforms/Canonicalize.h"
#include "maxc/Transforms/Decompose.h"

#include <llvm/ADT/SmallString.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Program.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <tuple>
#include <cstdlib>

namespace maxc {

namespace {

/// PTX for `sm` of the kernels of `lowered` (`plans`: emit_gpu_kernels');
/// `programs` gets their launch sequence when empty.
std::string kernels_ptx(const Graph &lowered, const std::string &name, const std::vector<std::string> &symbols,
                        const std::string &sm, std::vector<codegen::GpuGraphProgram> *programs,
                        const LoweringPlans *plans) {
  llvm::LLVMContext context;
  llvm::Module device(name + ".ptx", context);
  device.setTargetTriple("nvptx64-nvidia-cuda");
  device.setDataLayout(nvptx_data_layout(sm));
  auto p = codegen::emit_gpu_kernels(device, lowered, name, symbols, sm, plans); // sm_80+: f16/bf16 GEMMs on mma.sync
  codegen::lower_gpu_kernels(device, p, codegen::GpuLoweringTarget::nvptx, symbols.size());
  codegen::verify_module(device, "NVPTX kernel");
  std::string ptx = emit_nvptx_assembly(device, sm);
  if (programs && programs->empty())
    *programs = std::move(p);
  return ptx;
}

struct TempFile {
  llvm::SmallString<128> path;
  explicit TempFile(const char *suffix) {
    if (llvm::sys::fs::createTemporaryFile("maxc-ptxas", suffix, path))
      throw Error(ErrorCode::FileWrite, "cannot create a temporary file for ptxas");
  }
  ~TempFile() { llvm::sys::fs::remove(path); }
  std::string read() const {
    auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
    return buffer ? (*buffer)->getBuffer().str() : std::string();
  }
};

/// Runs `ptxas args...`; its exit code, stdout+stderr in `output`.
int run_ptxas(const std::string &ptxas, std::vector<std::string> args, std::string &output) {
  TempFile log(".log");
  args.insert(args.begin(), ptxas);
  std::vector<llvm::StringRef> argv(args.begin(), args.end());
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(log.path), llvm::StringRef(log.path)};
  std::string error;
  int rc = llvm::sys::ExecuteAndWait(ptxas, argv, std::nullopt, redirects, /*SecondsToWait=*/300, 0, &error);
  output = log.read() + error;
  return rc;
}

/// (cubin, "") or ("", ptxas' message).
std::pair<std::string, std::string> assemble(const std::string &ptxas, const std::string &ptx, const std::string &sm) {
  TempFile in(".ptx"), out(".cubin");
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(in.path, ec);
    if (ec)
      throw Error(ErrorCode::FileWrite, "cannot write a temporary file for ptxas: " + ec.message());
    os << ptx;
  }
  std::string output;
  int rc = run_ptxas(ptxas, {"-arch=" + sm, "-o", std::string(out.path), std::string(in.path)}, output);
  if (rc != 0)
    return {"", output.empty() ? "ptxas exited with " + std::to_string(rc) : output};
  return {out.read(), ""};
}

} // namespace

std::vector<std::string> resolve_cuda_arches(const std::string &list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    if (item.empty())
      throw Error(ErrorCode::InvalidArgument, "empty NVIDIA GPU architecture in '" + list + "' (expected sm_80,sm_90,...)");
    nvptx_data_layout(item); // throws for an sm LLVM does not know
    if (std::find(out.begin(), out.end(), item) == out.end())
      out.push_back(item);
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  return out;
}

std::string find_ptxas() {
  if (const char *env = std::getenv("MAXC_PTXAS"))
    return std::string(env) == "none" ? "" : env;
  if (auto found = llvm::sys::findProgramByName("ptxas"))
    return *found;
  return llvm::sys::fs::can_execute("/usr/local/cuda/bin/ptxas") ? "/usr/local/cuda/bin/ptxas" : "";
}

std::string compile_gpu_kernels_ptx(const Graph &graph, const std::string &name, const std::string &sm) {
  if (!is_c_identifier(name))
    throw Error(ErrorCode::InvalidArgument, "model name '" + name + "' is not a C identifier (use --name)");
  std::unique_ptr<Graph> canonical = canonicalize(graph);
  std::unique_ptr<Graph> lowered = decompose(canonical ? *canonical : graph, gpu_decompose_options());
  return kernels_ptx(*lowered, name, dim_symbols(*lowered), sm, nullptr, nullptr);
}

CudaCodegenResult compile_cuda(const Graph &lowered, const ModelInterface &abi, const CpuTarget &host,
                               const CudaCompileOptions &options, PassTimer &timer, const LoweringPlans *plans) {
  CudaCodegenResult out;
  const std::string &name = abi.name;
  if (options.sms.empty())
    throw Error(ErrorCode::InvalidArgument, "no NVIDIA GPU architecture given (--gpu sm_80,...)");
  codegen::check_gpu_model(lowered, name);
  // The host object's head (ELF header and weights) does not depend on the
  // code: with the driver's writer it is written while the sms compile.
  codegen::EarlyHostWeights early(options.early, lowered, host.triple);
  // Each sm's PTX (and cubin) on one of `options.jobs` threads, gathered in
  // sm order (CompileJobs.h): the artifact is the same for any --jobs.
  struct SmCode {
    PassTimer timer;
    std::vector<codegen::GpuGraphProgram> programs;
    std::string ptx, cubin, error;
  };
  std::vector<SmCode> per_sm(options.sms.size());
  timer.run("arches", [&] {
    codegen::run_jobs(options.sms.size(), options.jobs, [&](size_t i) {
      const std::string &sm = options.sms[i];
      SmCode &code = per_sm[i];
      code.ptx = code.timer.run("ptx " + sm, [&] { return kernels_ptx(lowered, name, abi.dims_array(), sm, &code.programs, plans); });
      if (!options.ptxas.empty())
        std::tie(code.cubin, code.error) =
            code.timer.run("ptxas " + sm, [&] { return assemble(options.ptxas, code.ptx, sm); });
    });
  });
  std::vector<codegen::GpuGraphProgram> programs;
  for (size_t i = 0; i < options.sms.size(); ++i) {
    const std::string &sm = options.sms[i];
    SmCode &code = per_sm[i];
    for (const auto &[step, ms] : code.timer.passes())
      timer.record(step, ms);
    if (programs.empty()) {
      programs = std::move(code.programs);
      codegen::keep_launch_sequence(programs, out.kernels);
    }
    out.ptx.emplace_back(sm, std::move(code.ptx));
    if (options.ptxas.empty())
      continue;
    if (code.error.empty())
      out.cubins.emplace_back(sm, std::move(code.cubin));
    else
      out.ptxas_errors.emplace_back(sm, code.error);
  }
  if (!options.ptxas.empty()) {
    std::string version;
    if (run_ptxas(options.ptxas, {"--version"}, version) == 0) {
      while (!version.empty() && version.back() == '\n')
        version.pop_back();
      out.ptxas_version = version.substr(version.find_last_of('\n') + 1);
    }
  }
  // Tried in this order: cubins (the driver refuses another arch's), then
  // PTX from the newest sm down (refused when newer than the device; older
  // PTX is JIT-compiled for it). cuModuleLoadData wants PTX NUL-terminated.
  codegen::GpuImages images;
  images.images = out.cubins;
  std::vector<std::pair<std::string, std::string>> ptx = out.ptx;
  std::stable_sort(ptx.begin(), ptx.end(), [](const auto &a, const auto &b) {
    return std::stoi(a.first.substr(3)) > std::stoi(b.first.substr(3));
  });
  for (const auto &[sm, text] : ptx)
    images.images.emplace_back(sm + ".ptx", text + std::string(1, '\0'));
  out.host_object = codegen::emit_gpu_runtime_host_object(abi, lowered, programs, images, codegen::cuda_runtime_api(),
                                                          host, timer, early.head());
  early.wait(timer);
  return out;
}

std::unique_ptr<llvm::Module> build_cuda_host_run_module(const Graph &lowered, const ModelInterface &abi,
                                                         const std::string &sm, llvm::LLVMContext &context,
                                                         const LoweringPlans *plans) {
  codegen::check_gpu_model(lowered, abi.name);
  std::vector<codegen::GpuGraphProgram> programs;
  std::vector<GpuKernelSummary> summaries;
  codegen::GpuImages images;
  images.images.emplace_back(sm + ".ptx", kernels_ptx(lowered, abi.name, abi.dims_array(), sm, &programs, plans) + std::string(1, '\0'));
  codegen::keep_launch_sequence(programs, summaries);
  auto module = std::make_unique<llvm::Module>(abi.name, context);
  codegen::build_gpu_runtime_host(*module, abi, lowered, programs, images, codegen::cuda_runtime_api(),
                                  /*host_copy_entry=*/true);
  return module;
}

} // namespace maxc
