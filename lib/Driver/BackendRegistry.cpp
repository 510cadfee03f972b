#include "Backends.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

namespace maxc::driver {

Backend::~Backend() = default;

std::unique_ptr<llvm::Module> Backend::build_host_module(const PlannedModel &, llvm::LLVMContext &) const {
  return nullptr;
}

const std::vector<std::unique_ptr<Backend>> &backends() {
  static const std::vector<std::unique_ptr<Backend>> registry = [] {
    std::vector<std::unique_ptr<Backend>> r;
    r.push_back(make_cpu_backend());
    r.push_back(make_amdgpu_backend());
    r.push_back(make_amdgpu_emulator_backend());
    r.push_back(make_cuda_backend());
    return r;
  }();
  return registry;
}

const Backend *find_backend(const std::string &name) {
  for (const auto &b : backends())
    if (b->name() == name)
      return b.get();
  return nullptr;
}

std::string backend_names() {
  std::string out;
  for (const auto &b : backends())
    out += (out.empty() ? "" : ", ") + b->name();
  return out;
}

} // namespace maxc::driver
