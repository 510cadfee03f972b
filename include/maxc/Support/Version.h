// Version information for `maxc --version` and the artifacts' manifests.
#pragma once

#include <string>
#include <vector>

namespace maxc {

/// maxc's own version ("0.1.0").
std::string maxc_version();
/// The LLVM version maxc was built against ("19.1.7").
std::string llvm_version();
/// LLVM code generation targets available in this build ("x86-64", "amdgcn", ...), sorted.
std::vector<std::string> llvm_targets();

} // namespace maxc
