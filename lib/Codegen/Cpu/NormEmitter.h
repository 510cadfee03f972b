// Row kernels for the rowwise composites the CPU keeps whole
// (DecomposeOptions::keep_rowwise): softmax, log_softmax, layer_norm and
// rms_norm of f32 values, one kernel each, a statistics pass and a
// normalizing pass over a row (softmax: four passes, below):
//
//   statistics  one read of the row (softmax: the max read, an exp pass
//               into the output and a sum over it).
//     layer_norm: sum and sum of squares together, in double. An f32 square
//       is exact in double, so var = E[x^2] - mean^2 loses only
//       log2(mean^2 / var) of double's 53 bits to cancellation (clamped at
//       0): more accurate than the f32 two-pass form for any |mean|/std
//       below 2^10 and never worse than f32 up to 2^14.
//     rms_norm: the sum of squares in double.
//     softmax / log_softmax: the max m, then s = sum of exp(x - m) (softmax
//       first stores each exp into the output, then sums the stored
//       values); in 16 independent lanes (so the loops vectorize) merged
//       at the end.
//   normalize   one read and one write: layer_norm (x - mean) * rstd * w + b
//     (the mean as an f32 pair hi + lo, so x - mean keeps its precision),
//     rms_norm x * rstd * w, softmax the stored exp(x - m) times 1/s (a
//     read and a write of the output),
//     log_softmax (x - m) - log(s), in f32 (rstd, 1/s, log s computed once
//     per row). One exp per element.
//
// The planner fuses an elemental producer of the input into the kernel (a
// masked, scaled attention score row is computed twice, never stored). The
// reference computes in double and rounds once; these kernels match it
// within a few f32 ulps (NormTest: rtol 1e-5).
#pragma once

#include <llvm/IR/IRBuilder.h>

#include <functional>
#include <string>

namespace maxc::codegen {

struct RowKernel {
  std::string op;             // softmax, log_softmax, layer_norm, rms_norm
  llvm::Value *cols = nullptr; // i64: elements per row
  double eps = 0;             // the norms'
  /// f32 element `col` of the row being computed.
  std::function<llvm::Value *(llvm::Value *col)> x;
  /// The norms' weight and bias at `col` (f32); bias may be empty.
  std::function<llvm::Value *(llvm::Value *col)> weight, bias;
  std::function<void(llvm::Value *col, llvm::Value *y)> store;
  /// The f32 value last stored at `col` (softmax reads its exps back).
  std::function<llvm::Value *(llvm::Value *col)> stored;
  /// The caller's counted loop and entry-block locals.
  std::function<void(llvm::Value *n, const std::function<void(llvm::Value *)> &body)> loop;
  std::function<llvm::Value *(llvm::Type *)> local;
};

/// Emits one row of `r.op` at `b`'s insertion point. (The caller,
/// KernelEmitter's emit_rows, splits the rows into pool tasks; a row is
/// never split, so its sums have the same order at any thread count.)
void emit_row_kernel(llvm::IRBuilder<> &b, const RowKernel &r);

} // namespace maxc::codegen
