#include "FpRange.h"

#include <llvm/ADT/APFloat.h>
#include <llvm/ADT/DenseMap.h>
#include <llvm/Analysis/ValueTracking.h>
#include <llvm/IR/ConstantRange.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/Metadata.h>

#include <algorithm>
#include <cfloat>
#include <cmath>

namespace maxc::codegen {

using llvm::Value;

namespace {

constexpr const char *kRangeKind = "maxc.fp.range";

/// d rounded to the nearest f32 (APFloat: GCC 12 at -O2 drops a pair of
/// double -> float -> double conversions that SLP vectorizes as one).
double to_f32(double d) {
  llvm::APFloat f(d);
  bool lost = false;
  f.convert(llvm::APFloat::IEEEsingle(), llvm::APFloat::rmNearestTiesToEven, &lost);
  return static_cast<double>(f.convertToFloat());
}

/// The largest power of two that divides d (+inf for 0).
double granularity(double d) {
  if (d == 0)
    return INFINITY;
  int e = 0;
  double m = std::frexp(std::fabs(d), &e); // [0.5, 1)
  auto bits = static_cast<uint64_t>(std::ldexp(m, 53));
  return std::ldexp(1.0, e - 53 + __builtin_ctzll(bits));
}

// Bounds of a + b and a * b, rounded outward where double arithmetic is
// inexact (the error is found exactly: two-sum, fma).
double add_dir(double a, double b, bool up) {
  double s = a + b, bb = s - a, err = (a - (s - bb)) + (b - bb);
  if (up ? err > 0 : err < 0)
    s = std::nextafter(s, up ? INFINITY : -INFINITY);
  return s;
}
double mul_dir(double a, double b, bool up) {
  double p = a * b, err = std::fma(a, b, -p);
  if (up ? err > 0 : err < 0)
    p = std::nextafter(p, up ? INFINITY : -INFINITY);
  return p;
}

FpRange add_ranges(const FpRange &a, const FpRange &b, bool sub) {
  double blo = sub ? -b.hi : b.lo, bhi = sub ? -b.lo : b.hi;
  return {add_dir(a.lo, blo, false), add_dir(a.hi, bhi, true), std::min(a.unit, b.unit)};
}
FpRange mul_ranges(const FpRange &a, const FpRange &b) {
  double lo = INFINITY, hi = -INFINITY;
  for (double x : {a.lo, a.hi})
    for (double y : {b.lo, b.hi}) {
      lo = std::min(lo, mul_dir(x, y, false));
      hi = std::max(hi, mul_dir(x, y, true));
    }
  double unit = a.unit * b.unit; // inf * inf = inf: 0 * 0; 0 * anything is 0
  if (std::isinf(a.unit) || std::isinf(b.unit))
    unit = INFINITY;
  return {lo, hi, unit};
}

/// r's exact values after one rounding to `t` (round to nearest is
/// monotone: the bounds' roundings bound the results; a multiple of a
/// power of two rounds to one, down to the type's smallest subnormal).
std::optional<FpRange> rounded(FpRange r, const llvm::Type *t) {
  if (!std::isfinite(r.lo) || !std::isfinite(r.hi))
    return std::nullopt;
  double tiny = 0x1p-1074;
  if (t->isFloatTy()) {
    if (std::fabs(r.lo) > FLT_MAX || std::fabs(r.hi) > FLT_MAX) // may round to inf
      return std::nullopt;
    r.lo = to_f32(r.lo);
    r.hi = to_f32(r.hi);
    tiny = 0x1p-149;
  } else if (!t->isDoubleTy()) {
    return std::nullopt;
  }
  if (!std::isfinite(r.lo) || !std::isfinite(r.hi))
    return std::nullopt;
  r.unit = std::max(r.unit, tiny);
  return r;
}

std::optional<FpRange> constant_range(const llvm::Constant *c) {
  if (auto *vec = llvm::dyn_cast<llvm::ConstantDataVector>(c); vec && vec->getSplatValue())
    c = vec->getSplatValue();
  else if (auto *cv = llvm::dyn_cast<llvm::ConstantVector>(c); cv && cv->getSplatValue())
    c = cv->getSplatValue();
  auto *f = llvm::dyn_cast<llvm::ConstantFP>(c);
  if (!f || !(f->getType()->isFloatTy() || f->getType()->isDoubleTy()))
    return std::nullopt;
  double d = f->getValueAPF().convertToDouble();
  if (!std::isfinite(d))
    return std::nullopt;
  return FpRange{d, d, granularity(d)};
}

class Analysis {
public:
  std::optional<FpRange> of(const Value *v, int depth) {
    if (depth > 48)
      return std::nullopt;
    if (auto it = memo_.find(v); it != memo_.end())
      return it->second;
    std::optional<FpRange> r = compute(v, depth);
    memo_[v] = r;
    return r;
  }

private:
  std::optional<FpRange> compute(const Value *v, int depth) {
    llvm::Type *t = v->getType();
    if (!t->isFloatTy() && !t->isDoubleTy())
      return std::nullopt;
    if (auto *c = llvm::dyn_cast<llvm::Constant>(v))
      return constant_range(c);
    auto *inst = llvm::dyn_cast<llvm::Instruction>(v);
    if (!inst)
      return std::nullopt;
    auto operand = [&](unsigned i) { return of(inst->getOperand(i), depth + 1); };
    if (llvm::MDNode *md = inst->getMetadata(kRangeKind)) {
      if (md->getNumOperands() != 3)
        return std::nullopt;
      double x[3];
      for (unsigned i = 0; i < 3; ++i) {
        auto *c = llvm::mdconst::dyn_extract<llvm::ConstantFP>(md->getOperand(i));
        if (!c)
          return std::nullopt;
        x[i] = c->getValueAPF().convertToDouble();
      }
      return FpRange{x[0], x[1], x[2]};
    }
    switch (inst->getOpcode()) {
    case llvm::Instruction::SIToFP:
    case llvm::Instruction::UIToFP: {
      bool sign = inst->getOpcode() == llvm::Instruction::SIToFP;
      const Value *i = inst->getOperand(0);
      if (!i->getType()->isIntegerTy() || i->getType()->getIntegerBitWidth() > 64)
        return std::nullopt;
      llvm::ConstantRange cr = llvm::computeConstantRange(i, sign);
      double lo = sign ? static_cast<double>(cr.getSignedMin().getSExtValue())
                       : static_cast<double>(cr.getUnsignedMin().getZExtValue());
      double hi = sign ? static_cast<double>(cr.getSignedMax().getSExtValue())
                       : static_cast<double>(cr.getUnsignedMax().getZExtValue());
      if (i->getType()->getIntegerBitWidth() > 53) // the bounds themselves rounded: widen
        lo = std::nextafter(lo, -INFINITY), hi = std::nextafter(hi, INFINITY);
      return rounded({lo, hi, 1.0}, t);
    }
    case llvm::Instruction::FPExt:
      return operand(0);
    case llvm::Instruction::FPTrunc:
      if (auto r = operand(0))
        return rounded(*r, t);
      return std::nullopt;
    case llvm::Instruction::FNeg:
      if (auto r = operand(0))
        return FpRange{-r->hi, -r->lo, r->unit};
      return std::nullopt;
    case llvm::Instruction::FAdd:
    case llvm::Instruction::FSub:
    case llvm::Instruction::FMul: {
      auto a = operand(0), b = operand(1);
      if (!a || !b)
        return std::nullopt;
      if (inst->getOpcode() == llvm::Instruction::FMul)
        return rounded(mul_ranges(*a, *b), t);
      return rounded(add_ranges(*a, *b, inst->getOpcode() == llvm::Instruction::FSub), t);
    }
    case llvm::Instruction::Select: {
      auto a = operand(1), b = operand(2);
      if (!a || !b)
        return std::nullopt;
      FpRange u{std::min(a->lo, b->lo), std::max(a->hi, b->hi), std::min(a->unit, b->unit)};
      // select(x > y, x, y) and the like: max / min, not just the union.
      auto *cmp = llvm::dyn_cast<llvm::FCmpInst>(inst->getOperand(0));
      if (cmp) {
        const Value *x = inst->getOperand(1), *y = inst->getOperand(2);
        auto pred = cmp->getPredicate();
        if (cmp->getOperand(0) == y && cmp->getOperand(1) == x)
          pred = llvm::CmpInst::getSwappedPredicate(pred);
        else if (cmp->getOperand(0) != x || cmp->getOperand(1) != y)
          pred = llvm::CmpInst::BAD_FCMP_PREDICATE;
        if (pred == llvm::CmpInst::FCMP_OGT || pred == llvm::CmpInst::FCMP_OGE)
          u.lo = std::max(a->lo, b->lo);
        else if (pred == llvm::CmpInst::FCMP_OLT || pred == llvm::CmpInst::FCMP_OLE)
          u.hi = std::min(a->hi, b->hi);
      }
      return u;
    }
    case llvm::Instruction::Call: {
      auto *call = llvm::dyn_cast<llvm::IntrinsicInst>(inst);
      if (!call)
        return std::nullopt;
      switch (call->getIntrinsicID()) {
      case llvm::Intrinsic::fma:
      case llvm::Intrinsic::fmuladd: {
        auto a = operand(0), b = operand(1), c = operand(2);
        if (!a || !b || !c)
          return std::nullopt;
        return rounded(add_ranges(mul_ranges(*a, *b), *c, false), t);
      }
      case llvm::Intrinsic::roundeven:
      case llvm::Intrinsic::rint:
      case llvm::Intrinsic::nearbyint:
      case llvm::Intrinsic::round:
      case llvm::Intrinsic::floor:
      case llvm::Intrinsic::ceil:
      case llvm::Intrinsic::trunc: {
        auto r = operand(0);
        if (!r)
          return std::nullopt;
        return FpRange{std::floor(r->lo), std::ceil(r->hi), std::max(r->unit, 1.0)};
      }
      case llvm::Intrinsic::fabs: {
        auto r = operand(0);
        if (!r)
          return std::nullopt;
        double lo = r->lo <= 0 && r->hi >= 0 ? 0 : std::min(std::fabs(r->lo), std::fabs(r->hi));
        return FpRange{lo, std::max(std::fabs(r->lo), std::fabs(r->hi)), r->unit};
      }
      case llvm::Intrinsic::maxnum:
      case llvm::Intrinsic::minnum:
      case llvm::Intrinsic::maximum:
      case llvm::Intrinsic::minimum: {
        auto a = operand(0), b = operand(1);
        if (!a || !b)
          return std::nullopt;
        bool max = call->getIntrinsicID() == llvm::Intrinsic::maxnum || call->getIntrinsicID() == llvm::Intrinsic::maximum;
        return max ? FpRange{std::max(a->lo, b->lo), std::max(a->hi, b->hi), std::min(a->unit, b->unit)}
                   : FpRange{std::min(a->lo, b->lo), std::min(a->hi, b->hi), std::min(a->unit, b->unit)};
      }
      default: return std::nullopt;
      }
    }
    default: return std::nullopt;
    }
  }

  llvm::DenseMap<const Value *, std::optional<FpRange>> memo_;
};

/// `v` (f64) as the f32 value it exactly is, where the IR shows one;
/// `build` false only checks.
Value *as_f32(llvm::IRBuilder<> &b, Value *v, bool build) {
  if (auto *ext = llvm::dyn_cast<llvm::FPExtInst>(v); ext && ext->getOperand(0)->getType()->isFloatTy())
    return ext->getOperand(0);
  if (auto *k = llvm::dyn_cast<llvm::Constant>(v)) {
    auto r = constant_range(k);
    if (!r || to_f32(r->lo) != r->lo)
      return nullptr;
    return build ? llvm::ConstantFP::get(b.getFloatTy(), static_cast<float>(r->lo)) : v;
  }
  if (auto *conv = llvm::dyn_cast<llvm::CastInst>(v);
      conv && (conv->getOpcode() == llvm::Instruction::SIToFP || conv->getOpcode() == llvm::Instruction::UIToFP)) {
    auto r = fp_range(v);
    if (!r || r->lo < -0x1p24 || r->hi > 0x1p24) // an integer f32 holds exactly
      return nullptr;
    if (!build)
      return v;
    return conv->getOpcode() == llvm::Instruction::SIToFP ? b.CreateSIToFP(conv->getOperand(0), b.getFloatTy())
                                                          : b.CreateUIToFP(conv->getOperand(0), b.getFloatTy());
  }
  return nullptr;
}

} // namespace

std::optional<FpRange> fp_range(const Value *v) {
  if (!v)
    return std::nullopt;
  return Analysis().of(v, 0);
}

void set_fp_range(llvm::Instruction *inst, const FpRange &r) {
  llvm::LLVMContext &c = inst->getContext();
  auto md = [&](double d) { return llvm::ConstantAsMetadata::get(llvm::ConstantFP::get(llvm::Type::getDoubleTy(c), d)); };
  inst->setMetadata(kRangeKind, llvm::MDNode::get(c, {md(r.lo), md(r.hi), md(r.unit)}));
}

std::optional<FpRange> fp_range_of_values(const double *values, size_t n) {
  if (n == 0)
    return std::nullopt;
  FpRange r{INFINITY, -INFINITY, INFINITY};
  for (size_t i = 0; i < n; ++i) {
    double d = values[i];
    if (!std::isfinite(d))
      return std::nullopt;
    r.lo = std::min(r.lo, d);
    r.hi = std::max(r.hi, d);
    r.unit = std::min(r.unit, granularity(d));
  }
  return r;
}

Value *exact_fma_f32(llvm::IRBuilder<> &b, Value *x) {
  auto *add = llvm::dyn_cast<llvm::BinaryOperator>(x);
  if (!add || add->getOpcode() != llvm::Instruction::FAdd || !x->getType()->isDoubleTy())
    return nullptr;
  for (unsigned i = 0; i < 2; ++i) {
    auto *mul = llvm::dyn_cast<llvm::BinaryOperator>(add->getOperand(i));
    if (!mul || mul->getOpcode() != llvm::Instruction::FMul)
      continue;
    Value *p = mul->getOperand(0), *c = mul->getOperand(1), *q = add->getOperand(1 - i);
    if (!as_f32(b, p, false) || !as_f32(b, c, false) || !as_f32(b, q, false))
      continue;
    auto rp = fp_range(p), rc = fp_range(c), rq = fp_range(q);
    if (!rp || !rc || !rq)
      continue;
    // p * c exact in f64: a multiple of up * uc below 2^53 of them; the
    // sum likewise in its smaller unit. Then fptrunc rounds p * c + q once.
    FpRange prod = mul_ranges(*rp, *rc);
    if (prod.unit < 0x1p-1022)
      continue;
    auto fits = [](const FpRange &r) {
      return std::isinf(r.unit) || std::max(std::fabs(r.lo), std::fabs(r.hi)) / r.unit < 0x1p53;
    };
    FpRange sum = add_ranges(prod, *rq, false);
    if (!fits(prod) || !fits(sum) || !std::isfinite(sum.lo) || !std::isfinite(sum.hi))
      continue;
    return b.CreateIntrinsic(llvm::Intrinsic::fma, {b.getFloatTy()},
                             {as_f32(b, p, true), as_f32(b, c, true), as_f32(b, q, true)});
  }
  return nullptr;
}

} // namespace maxc::codegen
