// maxc's -O0..-O3 as LLVM's code generation level (shared by the AOT and JIT paths).
#pragma once

#include <llvm/Support/CodeGen.h>

namespace maxc::codegen {

inline llvm::CodeGenOptLevel codegen_opt_level(int opt_level) {
  switch (opt_level) {
  case 0: return llvm::CodeGenOptLevel::None;
  case 1: return llvm::CodeGenOptLevel::Less;
  case 2: return llvm::CodeGenOptLevel::Default;
  default: return llvm::CodeGenOptLevel::Aggressive;
  }
}

} // namespace maxc::codegen
