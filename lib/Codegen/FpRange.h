// What the elemental emitter can prove about a floating-point LLVM value it
// emitted: never NaN, within [lo, hi], an integer multiple of `unit` (a
// power of two; +inf for a value that is always 0). Read from the IR
// itself (constants, int -> float conversions with their integer ranges,
// + - * fma rounding, round/floor/ceil, min/max, select) and from the
// `maxc.fp.range` metadata the emitter puts on loads of small float
// constants. Used where a proof lets an op drop work its general form needs
// (ElementalEmitter: min_max's NaN test, the float -> int cast's range
// tests, an exact f64 multiply-add as one f32 FMA), each rewrite giving the
// same bits as the general form.
#pragma once

#include <llvm/IR/IRBuilder.h>

#include <optional>

namespace maxc::codegen {

struct FpRange {
  double lo = 0, hi = 0; // finite bounds
  double unit = 0;       // every value is k * unit for an integer k (inf: the value is 0)
};

/// The range of `v` (f32 or f64), if the IR proves one.
std::optional<FpRange> fp_range(const llvm::Value *v);

/// Attaches `r` to an instruction whose values the emitter knows (a load of
/// a constant whose data it has read; an integer conv's f32 sums).
void set_fp_range(llvm::Instruction *inst, const FpRange &r);

/// The range of a constant's values; nullopt if one is NaN or infinite.
std::optional<FpRange> fp_range_of_values(const double *values, size_t n);

/// For x = p * c + q in f64 (fadd of an fmul, either order) whose product
/// and sum are provably exact and whose three operands are f32 values (an
/// fpext, an f32-exact constant, an integer of at most 24 bits): the f32
/// fma(p, c, q), which rounds once as fptrunc(x) does: the same bits.
/// nullptr where that is not proven.
llvm::Value *exact_fma_f32(llvm::IRBuilder<> &b, llvm::Value *x);

} // namespace maxc::codegen
