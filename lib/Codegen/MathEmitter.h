// Transcendental functions emitted as polynomial approximations in LLVM IR,
// so loops that use them vectorize and need no libm (nor a device libm on a
// GPU). Single precision only;
// f64 uses LLVM intrinsics or libm calls (tanh, erf).
//
// Accuracy against libm in double, measured by test/unit/Codegen/MathTest.cpp
// on ~1e5-point sweeps of each function's whole range (max relative error
// over normal results; max error in f32 ulps over all finite results,
// denormals included; polynomials by Horner steps as llvm.fmuladd, i.e.
// FMAs on CPUs that have them, as measured here):
//   exp      1.13e-7 relative, 1.31 ulp   (overflow to inf past 88.72,
//                                          denormal results kept)
//   log      1.94e-7 relative, 2.62 ulp   (denormal inputs included)
//   tanh     1.59e-7 relative, 1.56 ulp
//   erf      1.64e-7 relative, 2.31 ulp, 1.27e-7 absolute (fitted
//                                          polynomials, 1 - exp(p) past
//                                          0.921875; no division)
//   sigmoid  1.60e-7 relative, 2.05 ulp   (denormal results kept)
//   sin, cos 5.94e-8 relative, 0.50 ulp   (in double inside; exact range
//                                          reduction up to FLT_MAX)
// Special values (±0, ±inf, NaN, denormals, ±FLT_MAX) give libm's result
// exactly where that is 0, ±1, ±inf or NaN, sign of zero included.
#pragma once

#include <llvm/IR/IRBuilder.h>

namespace maxc::codegen {

/// exp, log, tanh and sigmoid also take <N x float> (lane by lane, the same
/// formula).
llvm::Value *emit_exp_f32(llvm::IRBuilder<> &b, llvm::Value *x);
llvm::Value *emit_log_f32(llvm::IRBuilder<> &b, llvm::Value *x);
llvm::Value *emit_tanh_f32(llvm::IRBuilder<> &b, llvm::Value *x);
llvm::Value *emit_erf_f32(llvm::IRBuilder<> &b, llvm::Value *x);
llvm::Value *emit_sigmoid_f32(llvm::IRBuilder<> &b, llvm::Value *x);
/// sin/cos compute in double inside (exact range reduction at any |x|).
llvm::Value *emit_sin_f32(llvm::IRBuilder<> &b, llvm::Value *x);
llvm::Value *emit_cos_f32(llvm::IRBuilder<> &b, llvm::Value *x);

} // namespace maxc::codegen
