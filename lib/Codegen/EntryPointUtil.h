// IR helpers every backend's entry points share: verifying a generated
// module, returning a status early, and the "no workspace given: allocate
// one, aligned to 64" sequence.
#pragma once

#include "maxc/Codegen/ModelAbi.h"

#include <llvm/IR/IRBuilder.h>

#include <functional>

namespace llvm {
class Module;
}

namespace maxc::codegen {

/// Throws maxc::Error (Internal) naming `what` when `module` is invalid IR.
void verify_module(const llvm::Module &module, const std::string &what);

/// if (cond) { cleanup(); return status; } — continuing after it otherwise.
void return_if(llvm::IRBuilder<> &b, llvm::Value *cond, llvm::Value *status,
               const std::function<void()> &cleanup = {});

/// `mem` (from an allocator giving `size + 64` bytes) rounded up to 64.
llvm::Value *align_to_64(llvm::IRBuilder<> &b, llvm::Value *mem);

} // namespace maxc::codegen
