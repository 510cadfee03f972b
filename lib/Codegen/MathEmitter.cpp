#include "MathEmitter.h"

#include <llvm/IR/Intrinsics.h>

#include <cmath>
#include <vector>

namespace maxc::codegen {

using llvm::Value;

namespace {

Value *f32(llvm::IRBuilder<> &b, double v) { return llvm::ConstantFP::get(b.getFloatTy(), v); }

// Horner evaluation of c[0] + c[1]*x + c[2]*x^2 + ...
// A float constant of x's type (a splat when x is a vector).
Value *like(Value *x, double v) { return llvm::ConstantFP::get(x->getType(), v); }

// Each step acc * x + c is llvm.fmuladd: one FMA (one rounding) where the
// CPU has them, a multiply and an add where it has not.
Value *mul_add(llvm::IRBuilder<> &b, Value *x, Value *y, Value *z) {
  return b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {x->getType()}, {x, y, z});
}

Value *horner(llvm::IRBuilder<> &b, Value *x, const std::vector<double> &c) {
  Value *acc = like(x, c.back());
  for (size_t i = c.size() - 1; i-- > 0;)
    acc = mul_add(b, acc, x, like(x, c[i]));
  return acc;
}
Value *horner(llvm::IRBuilder<> &b, Value *x, std::initializer_list<double> coeffs) {
  return horner(b, x, std::vector<double>(coeffs));
}

// Estrin's scheme: the same polynomial as horner(x, c), its terms paired
// (c0 + c1 x, c2 + c3 x, ...) and the pairs combined with x^2, x^4, ...: a
// chain of about log2(degree) + 2 multiply-adds instead of degree. An
// elementwise loop of these functions is bound by the latency of one
// element's chain (the reorder buffer holds about two iterations of
// ~100 instructions: GELU's erf + exp at 48 cycles per vector on Zen 3),
// so the shorter chain is the throughput.
Value *estrin(llvm::IRBuilder<> &b, Value *x, const std::vector<double> &c) {
  std::vector<Value *> terms;
  for (size_t i = 0; i < c.size(); i += 2)
    terms.push_back(i + 1 < c.size() ? mul_add(b, like(x, c[i + 1]), x, like(x, c[i])) : like(x, c[i]));
  Value *power = b.CreateFMul(x, x);
  while (terms.size() > 1) {
    std::vector<Value *> next;
    for (size_t i = 0; i < terms.size(); i += 2)
      next.push_back(i + 1 < terms.size() ? mul_add(b, terms[i + 1], power, terms[i]) : terms[i]);
    terms = std::move(next);
    if (terms.size() > 1)
      power = b.CreateFMul(power, power);
  }
  return terms[0];
}

Value *is_nan(llvm::IRBuilder<> &b, Value *x) { return b.CreateFCmpUNO(x, x); }

// exp on the clamped range [-87, ln(FLT_MAX)]: 2^n * exp(r), n = round(x / ln2),
// r = x - n*ln2 with ln2 split in two (Cody–Waite, two multiply-adds), exp(r)
// by its Taylor polynomial to degree 7 on |r| ≤ ln2/2 (truncation < 1e-9
// relative) as 1 + (r + r^2 E(r)) with E by Estrin's scheme (MathTest: 1.31
// ulp, as Horner's; a whole Estrin polynomial added 1 + r early: 1.67).
Value *exp_core(llvm::IRBuilder<> &b, Value *x) {
  Value *clamped = b.CreateMaxNum(b.CreateMinNum(x, like(x, 88.72283935546875)), like(x, -87.0));
  Value *n = b.CreateUnaryIntrinsic(llvm::Intrinsic::roundeven, b.CreateFMul(clamped, like(x, 1.4426950408889634)));
  // (n * the high part is exact: one multiply-add is the same value.)
  Value *r = mul_add(b, n, like(x, -0.693145751953125), clamped);
  r = mul_add(b, n, like(x, -1.428606765330187e-06), r);
  // 1 + (r + r^2 E(r)), E the series from 1/2 by Estrin's scheme: the
  // chain of an element is ~5 multiply-adds instead of Horner's 7, and the
  // leading 1 + r is added last, in one rounding (as Horner's last step).
  Value *r2 = b.CreateFMul(r, r);
  Value *e = estrin(b, r, {1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040});
  Value *p = b.CreateFAdd(like(x, 1.0), mul_add(b, r2, e, r));
  // 2^n in two halves so that n = 128 or -126 stays representable.
  llvm::Type *int_t = x->getType()->getWithNewType(b.getInt32Ty()); // i32 or <N x i32>
  Value *ni = b.CreateFPToSI(n, int_t);
  Value *n1 = b.CreateAShr(ni, 1);
  Value *n2 = b.CreateSub(ni, n1);
  auto pow2 = [&](Value *k) {
    return b.CreateBitCast(b.CreateShl(b.CreateAdd(k, llvm::ConstantInt::get(int_t, 127)), 23), x->getType());
  };
  return b.CreateFMul(b.CreateFMul(p, pow2(n1)), pow2(n2));
}

} // namespace

Value *emit_exp_f32(llvm::IRBuilder<> &b, Value *x) {
  // Below -87 the result is denormal: compute exp(x + 40) * e^-40, which
  // rounds through the denormals to 0 like libm. One exp_core for both
  // ranges (its input and output selected), so a vector lane pays for one.
  Value *low = b.CreateFCmpOLT(x, like(x, -87.0));
  Value *core = exp_core(b, b.CreateSelect(low, b.CreateFAdd(x, like(x, 40.0)), x));
  Value *result = b.CreateSelect(low, b.CreateFMul(core, like(x, 4.248354255291589e-18)), core);
  result = b.CreateSelect(b.CreateFCmpOGT(x, like(x, 88.72283935546875)), like(x, INFINITY), result);
  return b.CreateSelect(is_nan(b, x), x, result);
}

// log(x) = e*ln2 + log(m), x = m * 2^e with m in [sqrt(1/2), sqrt(2));
// log(m) = 2 atanh(s), s = (m-1)/(m+1), |s| ≤ 0.172, by its odd series.
Value *emit_log_f32(llvm::IRBuilder<> &b, Value *x) {
  llvm::Type *i32 = x->getType()->getWithNewType(b.getInt32Ty()); // i32 or <N x i32>
  auto int32 = [&](uint32_t v) { return llvm::ConstantInt::get(i32, v); };
  // Scale denormals into the normal range first.
  Value *denormal = b.CreateFCmpOLT(x, like(x, 1.1754943508222875e-38));
  Value *scaled = b.CreateSelect(denormal, b.CreateFMul(x, like(x, 8388608.0)), x);
  Value *bits = b.CreateBitCast(scaled, i32);
  Value *e = b.CreateSub(b.CreateLShr(bits, 23), int32(127));
  Value *m = b.CreateBitCast(b.CreateOr(b.CreateAnd(bits, int32(0x007fffff)), int32(0x3f800000)),
                             x->getType()); // [1, 2)
  Value *big = b.CreateFCmpOGT(m, like(x, 1.4142135623730951));
  m = b.CreateSelect(big, b.CreateFMul(m, like(x, 0.5)), m);
  e = b.CreateSelect(big, b.CreateAdd(e, int32(1)), e);
  e = b.CreateSelect(denormal, b.CreateSub(e, int32(23)), e);
  Value *s = b.CreateFDiv(b.CreateFSub(m, like(x, 1.0)), b.CreateFAdd(m, like(x, 1.0)));
  Value *s2 = b.CreateFMul(s, s);
  Value *series = horner(b, s2, {2.0, 2.0 / 3, 2.0 / 5, 2.0 / 7, 2.0 / 9, 2.0 / 11});
  Value *ef = b.CreateSIToFP(e, x->getType());
  Value *result = b.CreateFAdd(b.CreateFMul(ef, like(x, 0.693145751953125)), b.CreateFMul(s, series));
  result = b.CreateFAdd(result, b.CreateFMul(ef, like(x, 1.428606765330187e-06)));
  result = b.CreateSelect(b.CreateFCmpOEQ(x, like(x, 0.0)), like(x, -INFINITY), result);
  result = b.CreateSelect(b.CreateFCmpOLT(x, like(x, 0.0)), like(x, NAN), result);
  result = b.CreateSelect(b.CreateFCmpOEQ(x, like(x, INFINITY)), x, result);
  return b.CreateSelect(is_nan(b, x), x, result);
}

// tanh: the odd Taylor series for |x| < 0.5 (no cancellation near 0), else
// 1 - 2/(exp(2|x|) + 1) with the sign restored.
Value *emit_tanh_f32(llvm::IRBuilder<> &b, Value *x) {
  Value *ax = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  Value *x2 = b.CreateFMul(x, x);
  Value *small = b.CreateFMul(
      x, horner(b, x2,
                {1.0, -1.0 / 3, 2.0 / 15, -17.0 / 315, 62.0 / 2835, -1382.0 / 155925, 21844.0 / 6081075,
                 -929569.0 / 638512875}));
  Value *e = emit_exp_f32(b, b.CreateFMul(ax, like(x, 2.0)));
  Value *large = b.CreateFSub(like(x, 1.0), b.CreateFDiv(like(x, 2.0), b.CreateFAdd(e, like(x, 1.0))));
  large = b.CreateCopySign(large, x);
  Value *result = b.CreateSelect(b.CreateFCmpOLT(ax, like(x, 0.5)), small, large);
  return b.CreateSelect(is_nan(b, x), x, result);
}

// erf, no division (the second polynomial by Estrin's scheme): below |x| = 0.921875, x * q(x^2) with q a degree-6
// least-squares fit of erf(x)/x (relative error 1.5e-9); from there to
// 3.925, 1 - exp(p(|x| - 2)) with p a degree-8 fit of log(erfc) on t = |x| -
// 2 (exact from 1 to 4: Sterbenz; absolute error 2.7e-8 in the logarithm,
// so relative 2.7e-8 in erfc); past 3.925 (erfc < 2^-25) exactly ±1.
// Fitted in double with numpy (Polynomial.fit on 20001 points); measured
// against libm in MathTest: 1.64e-7 relative, 2.31 ulp. (Until session 26:
// the Maclaurin series to |x| = 1 and Abramowitz & Stegun 7.1.26 beyond,
// with a division and a full exp: 1.93e-7, 2.94 ulp, more instructions.)
Value *emit_erf_f32(llvm::IRBuilder<> &b, Value *x) {
  Value *ax = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  Value *small = b.CreateFMul(
      x, horner(b, b.CreateFMul(x, x),
                {1.1283791668023375, -0.3761263526021697, 0.1128371811522867, -0.026860616646754314,
                 0.005203980272214161, -0.0008175406342018311, 8.50551676792067e-05}));
  // exp_core clamps its argument (minnum/maxnum also drop the NaN that
  // Estrin's inf - inf gives at |x| ~ 1e10), so a huge |x|, selected away
  // below, stays harmless.
  Value *log_erfc = estrin(b, b.CreateFSub(ax, like(x, 2.0)),
                           {-5.364941261489502, -4.418160842930566, -0.9237509217858312, -0.01646478812411386,
                            0.0035710007813331457, -0.0007332549754592273, 0.00013525002004797048,
                            -1.987740880264143e-05, 1.6532094073267172e-06});
  Value *large = b.CreateFSub(like(x, 1.0), exp_core(b, log_erfc));
  large = b.CreateSelect(b.CreateFCmpOGT(ax, like(x, 3.925)), like(x, 1.0), large);
  large = b.CreateCopySign(large, x);
  Value *result = b.CreateSelect(b.CreateFCmpOLT(ax, like(x, 0.921875)), small, large);
  return b.CreateSelect(is_nan(b, x), x, result);
}

// sin and cos: |x| = n*pi/2 + r with r in [-pi/4, pi/4], in double.
// |x| < 2^20: n = round(|x| * 2/pi), r = (|x| - n*P1) - n*P2 with P1 = pi/2
// to 33 bits (n*P1 exact). Beyond: the exact fixed-point product of the
// 24-bit mantissa with 192 bits of 2/pi (the method of ARM's optimized-
// routines sinf, reduce_large): three 32-bit words of 2/pi picked by the
// exponent, a 32x96-bit product, the top two bits the quadrant, the rest r
// to 33+ bits. No table in memory: the words come from three 64-bit
// constants by selects and a funnel shift, so every target (CPU, AMDGPU,
// NVPTX) compiles it as plain integer code. sin r and cos r by their Taylor
// polynomials to degree 13 / 14 (truncation < 1e-11), then rounded to f32.
Value *sincos_f32(llvm::IRBuilder<> &b, Value *x, bool want_cos) {
  llvm::Type *f64 = b.getDoubleTy(), *i32 = b.getInt32Ty(), *i64 = b.getInt64Ty();
  auto d = [&](double v) { return llvm::ConstantFP::get(f64, v); };
  auto c32 = [&](uint32_t v) { return b.getInt32(v); };
  auto c64 = [&](uint64_t v) { return b.getInt64(v); };
  Value *ax = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  Value *small = b.CreateFCmpOLT(ax, f32(b, 1048576.0));
  // Fast path (its input zeroed where unused, so n stays in range).
  Value *axd = b.CreateFPExt(b.CreateSelect(small, ax, f32(b, 0.0)), f64);
  Value *n = b.CreateUnaryIntrinsic(llvm::Intrinsic::roundeven, b.CreateFMul(axd, d(0.63661977236758138)));
  Value *r_fast = b.CreateFSub(b.CreateFSub(axd, b.CreateFMul(n, d(1.5707963267341256))),
                               b.CreateFMul(n, d(6.0771005065061922e-11)));
  Value *q_fast = b.CreateFPToSI(n, i32);
  // Large path.
  Value *xi = b.CreateBitCast(ax, i32);
  Value *idx = b.CreateAnd(b.CreateLShr(xi, 26), c32(15));
  Value *shift = b.CreateAnd(b.CreateLShr(xi, 23), c32(7));
  Value *m = b.CreateShl(b.CreateOr(b.CreateAnd(xi, c32(0x7fffff)), c32(0x800000)), shift);
  // 2/pi's first 192 bits, with 64 zero bits on each side.
  static const uint64_t kTwoOverPi[5] = {0, 0xa2f9836e4e441529ull, 0xfc2757d1f534ddc0ull, 0xdb6295993c439041ull, 0};
  auto pick = [&](Value *j, int first) { // kTwoOverPi[first + j], j in 0..3
    Value *v = c64(kTwoOverPi[first + 3]);
    for (int k = 2; k >= 0; --k)
      v = b.CreateSelect(b.CreateICmpEQ(j, b.getInt64(k)), c64(kTwoOverPi[first + k]), v);
    return v;
  };
  // The 32 bits of 2/pi that end `end` bits after the binary point.
  auto word = [&](uint32_t end_base) {
    Value *start = b.CreateZExt(b.CreateAdd(b.CreateShl(idx, 3), c32(end_base - 32 + 64)), i64);
    Value *j = b.CreateLShr(start, 6);
    Value *window = b.CreateIntrinsic(llvm::Intrinsic::fshl, {i64},
                                      {pick(j, 0), pick(j, 1), b.CreateAnd(start, c64(63))});
    return b.CreateTrunc(b.CreateLShr(window, 32), i32);
  };
  Value *m64 = b.CreateZExt(m, i64);
  Value *res0 = b.CreateZExt(b.CreateMul(m, word(8)), i64);
  Value *res1 = b.CreateMul(m64, b.CreateZExt(word(40), i64));
  Value *res2 = b.CreateMul(m64, b.CreateZExt(word(72), i64));
  res0 = b.CreateAdd(b.CreateOr(b.CreateLShr(res2, 32), b.CreateShl(res0, 32)), res1);
  Value *nl = b.CreateLShr(b.CreateAdd(res0, c64(1ull << 61)), 62);
  res0 = b.CreateSub(res0, b.CreateShl(nl, 62));
  Value *r_large = b.CreateFMul(b.CreateSIToFP(res0, f64), d(3.4061215800865545e-19)); // pi * 2^-63
  Value *r = b.CreateSelect(small, r_fast, r_large);
  Value *q = b.CreateSelect(small, q_fast, b.CreateTrunc(nl, i32));
  if (want_cos) // cos(y) = sin(y + pi/2)
    q = b.CreateAdd(q, c32(1));
  Value *r2 = b.CreateFMul(r, r);
  Value *sin_r = b.CreateFAdd(
      r, b.CreateFMul(b.CreateFMul(r, r2), horner(b, r2, {-1.0 / 6, 1.0 / 120, -1.0 / 5040, 1.0 / 362880,
                                                             -1.0 / 39916800, 1.0 / 6227020800})));
  Value *cos_r = b.CreateFAdd(d(1.0), b.CreateFMul(r2, horner(b, r2, {-1.0 / 2, 1.0 / 24, -1.0 / 720, 1.0 / 40320,
                                                                         -1.0 / 3628800, 1.0 / 479001600,
                                                                         -1.0 / 87178291200})));
  Value *v = b.CreateSelect(b.CreateICmpNE(b.CreateAnd(q, c32(1)), c32(0)), cos_r, sin_r);
  v = b.CreateSelect(b.CreateICmpNE(b.CreateAnd(q, c32(2)), c32(0)), b.CreateFNeg(v), v);
  Value *result = b.CreateFPTrunc(v, b.getFloatTy());
  if (!want_cos) // sin(-y) = -sin(y), -0 included
    result = b.CreateSelect(b.CreateICmpSLT(b.CreateBitCast(x, i32), c32(0)), b.CreateFNeg(result), result);
  // inf and NaN: NaN (x - x keeps a NaN's payload).
  return b.CreateSelect(b.CreateFCmpOLT(ax, f32(b, INFINITY)), result, b.CreateFSub(x, x));
}

Value *emit_sin_f32(llvm::IRBuilder<> &b, Value *x) { return sincos_f32(b, x, false); }
Value *emit_cos_f32(llvm::IRBuilder<> &b, Value *x) { return sincos_f32(b, x, true); }

// sigmoid: with e = exp(-|x|), 1/(1 + e) for x >= 0 and e/(1 + e) (=
// e^x/(1 + e^x)) for x < 0, which keeps the denormal results of x < -87.3
// that 1/(1 + exp(-x)) flushed to 0 once exp(-x) overflowed.
Value *emit_sigmoid_f32(llvm::IRBuilder<> &b, Value *x) {
  Value *e = emit_exp_f32(b, b.CreateFNeg(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x)));
  Value *num = b.CreateSelect(b.CreateFCmpOLT(x, like(x, 0.0)), e, like(x, 1.0));
  return b.CreateFDiv(num, b.CreateFAdd(like(x, 1.0), e));
}

} // namespace maxc::codegen
