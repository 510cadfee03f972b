// Transcendental functions emitted as polynomial approximations in LLVM IR,
// so loops that use them vectorize and need no libm. Single precision only;
// f64 uses LLVM intrinsics (libm). Accuracy (tested against libm in
// test/unit/Codegen/MathTest.cpp): exp, log, tanh, sigmoid ≤ 2 ulp-ish
// (relative 3e-7); erf absolute 2e-7.
#pragma once

#include <llvm/IR/IRBuilder.h>

namespace maxc::codegen {

llvm::Value *emit_exp_f32(llvm::IRBuilder<> &b, llvm::Value *x);
llvm::Value *emit_log_f32(llvm::IRBuilder<> &b, llvm::Value *x);
llvm::Value *emit_tanh_f32(llvm::IRBuilder<> &b, llvm::Value *x);
llvm::Value *emit_erf_f32(llvm::IRBuilder<> &b, llvm::Value *x);
llvm::Value *emit_sigmoid_f32(llvm::IRBuilder<> &b, llvm::Value *x);

} // namespace maxc::codegen
