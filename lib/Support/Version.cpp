#include "maxc/Support/Version.h"

#include <llvm/Config/llvm-config.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/TargetSelect.h>

#include <algorithm>

#ifndef MAXC_VERSION
#define MAXC_VERSION "0.0.0"
#endif

namespace maxc {

std::string maxc_version() { return MAXC_VERSION; }

std::string llvm_version() { return LLVM_VERSION_STRING; }

std::vector<std::string> llvm_targets() {
  llvm::InitializeAllTargetInfos();
  std::vector<std::string> names;
  for (const llvm::Target &t : llvm::TargetRegistry::targets())
    names.emplace_back(t.getName());
  std::sort(names.begin(), names.end());
  return names;
}

} // namespace maxc
