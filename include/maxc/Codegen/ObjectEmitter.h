// Optimizing an LLVM module for a target and writing it out as an object
// file, assembly or textual IR. Kept apart so that LLVM's PassBuilder (a
// 10-second header) is included by one translation unit only.
#pragma once

#include "maxc/Codegen/Target.h"

#include <memory>
#include <string>
#include <vector>

namespace llvm {
class LLVMContext;
class Module;
} // namespace llvm

namespace maxc {

/// Runs the default O0..O3 pipeline for the target on `module` in place
/// (with the TargetMachine, so the vectorizer uses the target's costs).
void optimize_module(llvm::Module &module, const CpuTarget &target);

enum class OutputKind { object, assembly, llvm_ir };

/// Emits `module` (already optimized) in the given form. Codegen mutates a
/// module, so this works on a clone and `module` stays usable for the next
/// form. Throws maxc::Error on failure.
std::string emit_module(const llvm::Module &module, const CpuTarget &target, OutputKind kind);

/// `module` as LLVM bitcode: to carry it out of its LLVMContext (a compile
/// job's) into another.
std::string bitcode_of(const llvm::Module &module);

/// The modules of `bitcode` (bitcode_of) read into `context` and linked, in
/// this order, into one: the first's symbols are kept, the others' internal
/// names renamed where they clash. Throws maxc::Error.
std::unique_ptr<llvm::Module> join_bitcode(const std::vector<std::string> &bitcode, llvm::LLVMContext &context);

} // namespace maxc
