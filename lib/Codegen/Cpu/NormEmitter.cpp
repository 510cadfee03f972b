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

// Online softmax statistics (Milakov & Gimelshein): after each element,
// m = max so far and s = sum of exp(x - m) so far. m starts at -inf and s
// at 0; -inf while m is -inf adds 1 (x - m would be NaN; a later finite max
// rescales it to 0, an all -inf row ends NaN as the reference), a larger
// element rescales s by exp(m - x) and adds exp(x - x) (NaN for +inf: the
// reference's sum is NaN then). A NaN makes s NaN (every result NaN).
void online_step(llvm::IRBuilder<> &b, Value *x, Value *m_ptr, Value *s_ptr) {
  Value *m = b.CreateLoad(b.getFloatTy(), m_ptr), *s = b.CreateLoad(b.getFloatTy(), s_ptr);
  Value *d = b.CreateFSub(x, m);
  Value *grows = b.CreateFCmpOGT(d, f32(b, 0.0));
  Value *e = emit_exp_f32(b, b.CreateFNeg(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, d)));
  Value *both_neg_inf = b.CreateAnd(b.CreateFCmpOEQ(x, f32(b, -INFINITY)), b.CreateFCmpOEQ(m, f32(b, -INFINITY)));
  e = b.CreateSelect(both_neg_inf, f32(b, 1.0), e);
  Value *self = b.CreateFAdd(f32(b, 1.0), b.CreateFSub(x, x));
  Value *rescaled = b.CreateFAdd(b.CreateFMul(s, e), self);
  b.CreateStore(b.CreateSelect(grows, rescaled, b.CreateFAdd(s, e)), s_ptr);
  b.CreateStore(b.CreateSelect(grows, x, m), m_ptr);
}

// The statistics run in kLanes independent lanes (element c goes to lane
// c % kLanes, the row's tail to lane 0), so the loop over a chunk of lanes
// vectorizes; the lanes are then merged: M = max m[l], S = sum s[l] *
// exp(m[l] - M) (a lane still at -inf adds 0, unless M is -inf too).
// Sums are f32: at most cols / kLanes + 1 terms of at most 1 per lane.
constexpr int64_t kLanes = 16;

void emit_softmax(llvm::IRBuilder<> &b, const RowKernel &r, bool log) {
  auto *lanes_t = llvm::ArrayType::get(b.getFloatTy(), kLanes);
  Value *ms = r.local(lanes_t), *ss = r.local(lanes_t);
  auto lane = [&](Value *arr, Value *l) { return b.CreateInBoundsGEP(lanes_t, arr, {b.getInt64(0), l}); };
  Value *lanes = b.getInt64(kLanes);
  r.loop(lanes, [&](Value *l) {
    b.CreateStore(f32(b, -INFINITY), lane(ms, l));
    b.CreateStore(f32(b, 0.0), lane(ss, l));
  });
  Value *chunks = b.CreateUDiv(r.cols, lanes);
  r.loop(chunks, [&](Value *c) {
    Value *base = b.CreateMul(c, lanes);
    r.loop(lanes, [&](Value *l) { online_step(b, r.x(b.CreateAdd(base, l)), lane(ms, l), lane(ss, l)); });
  });
  Value *done = b.CreateMul(chunks, lanes);
  Value *zero = b.getInt64(0);
  r.loop(b.CreateSub(r.cols, done), [&](Value *t) { online_step(b, r.x(b.CreateAdd(done, t)), lane(ms, zero), lane(ss, zero)); });
  // Merge the lanes.
  Value *m_var = r.local(b.getFloatTy()), *s_var = r.local(b.getFloatTy());
  b.CreateStore(f32(b, -INFINITY), m_var);
  r.loop(lanes, [&](Value *l) {
    Value *m = b.CreateLoad(b.getFloatTy(), m_var), *x = b.CreateLoad(b.getFloatTy(), lane(ms, l));
    Value *bigger = b.CreateOr(b.CreateFCmpOGT(x, m), b.CreateFCmpUNO(x, x));
    b.CreateStore(b.CreateSelect(bigger, x, m), m_var);
  });
  Value *m = b.CreateLoad(b.getFloatTy(), m_var);
  b.CreateStore(f32(b, 0.0), s_var);
  r.loop(lanes, [&](Value *l) {
    Value *ml = b.CreateLoad(b.getFloatTy(), lane(ms, l)), *sl = b.CreateLoad(b.getFloatTy(), lane(ss, l));
    Value *both_neg_inf = b.CreateAnd(b.CreateFCmpOEQ(ml, f32(b, -INFINITY)), b.CreateFCmpOEQ(m, f32(b, -INFINITY)));
    Value *w = b.CreateSelect(both_neg_inf, f32(b, 1.0), emit_exp_f32(b, b.CreateFSub(ml, m)));
    b.CreateStore(b.CreateFAdd(b.CreateLoad(b.getFloatTy(), s_var), b.CreateFMul(sl, w)), s_var);
  });
  Value *s = b.CreateLoad(b.getFloatTy(), s_var);
  Value *scale = log ? emit_log_f32(b, s) : b.CreateFDiv(f32(b, 1.0), s);
  r.loop(r.cols, [&](Value *col) {
    Value *shifted = b.CreateFSub(r.x(col), m);
    r.store(col, log ? b.CreateFSub(shifted, scale) : b.CreateFMul(emit_exp_f32(b, shifted), scale));
  });
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
