#include "Cpu/NormEmitter.h"

#include "MathEmitter.h"
#include "maxc/Support/Error.h"

#include <cmath>

namespace maxc::codegen {

using llvm::Value;

namespace {

Value *f32(llvm::IRBuilder<> &b, double v) { return llvm::ConstantFP::get(b.getFloatTy(), v); }
Value *f64(llvm::IRBuilder<> &b, double v) { return llvm::ConstantFP::get(b.getDoubleTy(), v); }

/// Sums over the row in double: `terms(col)` gives what each element adds to
/// each accumulator. Reassociation is allowed, so the loop vectorizes.
std::vector<Value *> row_sums(llvm::IRBuilder<> &b, const RowKernel &r, size_t count,
                              const std::function<std::vector<Value *>(Value *)> &terms) {
  std::vector<Value *> acc;
  for (size_t i = 0; i < count; ++i) {
    acc.push_back(r.local(b.getDoubleTy()));
    b.CreateStore(f64(b, 0.0), acc.back());
  }
  llvm::IRBuilderBase::FastMathFlagGuard guard(b);
  llvm::FastMathFlags fmf;
  fmf.setAllowReassoc();
  fmf.setAllowContract();
  r.loop(r.cols, [&](Value *col) {
    std::vector<Value *> t = terms(col);
    b.setFastMathFlags(fmf);
    for (size_t i = 0; i < count; ++i)
      b.CreateStore(b.CreateFAdd(b.CreateLoad(b.getDoubleTy(), acc[i]), t[i]), acc[i]);
    b.clearFastMathFlags();
  });
  std::vector<Value *> out;
  for (Value *a : acc)
    out.push_back(b.CreateLoad(b.getDoubleTy(), a));
  return out;
}

/// 1 / sqrt(mean_square + eps) (double), as f32.
Value *inverse_rms(llvm::IRBuilder<> &b, Value *mean_square, double eps) {
  Value *root = b.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, b.CreateFAdd(mean_square, f64(b, eps)));
  return b.CreateFPTrunc(b.CreateFDiv(f64(b, 1.0), root), b.getFloatTy());
}

void emit_norm(llvm::IRBuilder<> &b, const RowKernel &r, bool centered) {
  Value *n = b.CreateSIToFP(r.cols, b.getDoubleTy());
  Value *mean_hi = nullptr, *mean_lo = nullptr, *rstd = nullptr;
  if (centered) {
    auto sums = row_sums(b, r, 2, [&](Value *col) {
      Value *x = b.CreateFPExt(r.x(col), b.getDoubleTy());
      return std::vector<Value *>{x, b.CreateFMul(x, x)};
    });
    Value *m = b.CreateFDiv(sums[0], n);
    Value *var = b.CreateFSub(b.CreateFDiv(sums[1], n), b.CreateFMul(m, m));
    var = b.CreateSelect(b.CreateFCmpOLT(var, f64(b, 0.0)), f64(b, 0.0), var); // rounding; NaN passes
    // The mean as an f32 pair hi + lo: x - hi is exact near the mean, so
    // (x - hi) - lo keeps the deviation's precision for a large mean.
    mean_hi = b.CreateFPTrunc(m, b.getFloatTy());
    mean_lo = b.CreateFPTrunc(b.CreateFSub(m, b.CreateFPExt(mean_hi, b.getDoubleTy())), b.getFloatTy());
    rstd = inverse_rms(b, var, r.eps);
  } else {
    auto sums = row_sums(b, r, 1, [&](Value *col) {
      Value *x = b.CreateFPExt(r.x(col), b.getDoubleTy());
      return std::vector<Value *>{b.CreateFMul(x, x)};
    });
    rstd = inverse_rms(b, b.CreateFDiv(sums[0], n), r.eps);
  }
  r.loop(r.cols, [&](Value *col) {
    Value *x = r.x(col);
    if (mean_hi)
      x = b.CreateFSub(b.CreateFSub(x, mean_hi), mean_lo);
    Value *y = b.CreateFMul(b.CreateFMul(x, rstd), r.weight(col));
    if (r.bias)
      y = b.CreateFAdd(y, r.bias(col));
    r.store(col, y);
  });
}

// Softmax in three passes over the row (a row fits the L1 cache: the
// passes after the first read it from there):
//   max     M = the largest element, NaNs skipped (a NaN still makes the
//           row NaN through its exp, below);
//   sums    e = exp(x - M), stored (softmax: then summed from the output);
//           log_softmax only sums;
//   scale   softmax: the stored e times 1 / S; log_softmax: (x - M) - log S.
// One exp per element. The statistics run in kLanes independent lanes
// (element c goes to lane c % kLanes, the row's tail to lane 0), so the
// loops vectorize, then merge in lane order; sums are f32 (at most cols /
// kLanes + 1 terms of at most 1 per lane). Special rows as the reference: an
// all -inf row has M = -inf, x - M = NaN and every result NaN; a +inf makes
// inf - inf = NaN, so the sum and every result NaN; -inf elements of a row
// with a finite M give exp(-inf) = 0.
// (Until session 26 the statistics were an online max and sum, Milakov &
// Gimelshein, one pass but an exp and a rescale per element besides the
// normalizing pass's exp: 2.2 ns per element on Zen 3 against 1.0 now.)
constexpr int64_t kLanes = 16;

/// The row's statistic over kLanes lanes: `init` per lane, each element's
/// `step(lane accumulator, col)` (returns the new accumulator), merged in
/// lane order with `merge`.
Value *lane_reduce(llvm::IRBuilder<> &b, const RowKernel &r, Value *init,
                   const std::function<Value *(Value *, Value *)> &step,
                   const std::function<Value *(Value *, Value *)> &merge) {
  auto *lanes_t = llvm::ArrayType::get(b.getFloatTy(), kLanes);
  Value *acc = r.local(lanes_t);
  auto lane = [&](Value *l) { return b.CreateInBoundsGEP(lanes_t, acc, {b.getInt64(0), l}); };
  Value *lanes = b.getInt64(kLanes);
  r.loop(lanes, [&](Value *l) { b.CreateStore(init, lane(l)); });
  auto update = [&](Value *l, Value *col) {
    b.CreateStore(step(b.CreateLoad(b.getFloatTy(), lane(l)), col), lane(l));
  };
  Value *chunks = b.CreateUDiv(r.cols, lanes);
  r.loop(chunks, [&](Value *c) {
    Value *base = b.CreateMul(c, lanes);
    r.loop(lanes, [&](Value *l) { update(l, b.CreateAdd(base, l)); });
  });
  Value *done = b.CreateMul(chunks, lanes);
  r.loop(b.CreateSub(r.cols, done), [&](Value *t) { update(b.getInt64(0), b.CreateAdd(done, t)); });
  Value *total = r.local(b.getFloatTy());
  b.CreateStore(b.CreateLoad(b.getFloatTy(), lane(b.getInt64(0))), total);
  r.loop(b.getInt64(kLanes - 1), [&](Value *l) {
    Value *x = b.CreateLoad(b.getFloatTy(), lane(b.CreateAdd(l, b.getInt64(1))));
    b.CreateStore(merge(b.CreateLoad(b.getFloatTy(), total), x), total);
  });
  return b.CreateLoad(b.getFloatTy(), total);
}

void emit_softmax(llvm::IRBuilder<> &b, const RowKernel &r, bool log) {
  auto larger = [&](Value *m, Value *x) { return b.CreateSelect(b.CreateFCmpOGT(x, m), x, m); };
  auto add = [&](Value *acc, Value *x) { return b.CreateFAdd(acc, x); };
  Value *m = lane_reduce(
      b, r, f32(b, -INFINITY), [&](Value *acc, Value *col) { return larger(acc, r.x(col)); }, larger);
  auto exp_at = [&](Value *col) { return emit_exp_f32(b, b.CreateFSub(r.x(col), m)); };
  if (log) {
    Value *s = lane_reduce(
        b, r, f32(b, 0.0), [&](Value *acc, Value *col) { return add(acc, exp_at(col)); }, add);
    Value *log_s = emit_log_f32(b, s);
    r.loop(r.cols, [&](Value *col) { r.store(col, b.CreateFSub(b.CreateFSub(r.x(col), m), log_s)); });
    return;
  }
  // The exps stored first, then summed from the output: a loop that both
  // stores and accumulates keeps its lanes in memory (the store may alias
  // the input, so the loop is versioned around the reduction).
  r.loop(r.cols, [&](Value *col) { r.store(col, exp_at(col)); });
  Value *s = lane_reduce(
      b, r, f32(b, 0.0), [&](Value *acc, Value *col) { return add(acc, r.stored(col)); }, add);
  Value *scale = b.CreateFDiv(f32(b, 1.0), s);
  r.loop(r.cols, [&](Value *col) { r.store(col, b.CreateFMul(r.stored(col), scale)); });
}

} // namespace

void emit_row_kernel(llvm::IRBuilder<> &b, const RowKernel &r) {
  if (r.op == "layer_norm" || r.op == "rms_norm")
    return emit_norm(b, r, r.op == "layer_norm");
  if (r.op == "softmax" || r.op == "log_softmax")
    return emit_softmax(b, r, r.op == "log_softmax");
  throw Error(ErrorCode::Internal, "codegen: no row kernel for op '" + r.op + "'");
}

} // namespace maxc::codegen
