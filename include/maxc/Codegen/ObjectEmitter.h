// Optimizing an LLVM module for a target and writing it out as an object
// file, assembly or textual IR. Kept apart so that LLVM's PassBuilder (a
// 10-second header) is included by one translation unit only.
#pragma once

#include "maxc/Codegen/Target.h"

#include <string>

namespace llvm {
class Module;
}

namespace maxc {

/// Runs the default O0..O3 pipeline for the target on `module` in place
/// (with the TargetMachine, so the vectorizer uses the target's costs).
void optimize_module(llvm::Module &module, const CpuTarget &target);

enum class OutputKind { object, assembly, llvm_ir };

/// Emits `module` (already optimized) in the given form. Codegen mutates a
/// module, so this works on a clone and `module` stays usable for the next
/// form. Throws maxc::Error on failure.
std::string emit_module(const llvm::Module &module, const CpuTarget &target, OutputKind kind);

} // namespace maxc
