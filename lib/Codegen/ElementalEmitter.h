// The elemental emitter: the LLVM value of one element of a graph value,
// computed from its operands' elements (after XLA's elemental IR emitter).
// Values the LoweringPlan stores are loaded; fused values are recomputed
// inline. Shared by every code generator: the CPU FunctionEmitter drives it
// from loop nests, the GPU kernel generator from work-item ids. Where stored
// values live is the one thing a generator supplies (pointer_of).
#pragma once

#include "FpRange.h"
#include "WorkspaceLayout.h"
#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/IR/Graph.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace maxc::codegen {

using Index = std::vector<llvm::Value *>;

/// Values are computed in a "compute type" (f16/bf16 as float, bool as i1)
/// and stored in a "memory type" (f16 as half, bf16 as i16, bool as i8).
llvm::Type *compute_type(llvm::LLVMContext &c, DType d);
llvm::Type *memory_type(llvm::LLVMContext &c, DType d);
/// The type a sum or product of `d` elements accumulates in (the dtype
/// table's accumulator: f32 for f16/bf16/f32, f64, i64 for integers).
llvm::Type *accumulator_type(llvm::LLVMContext &c, DType d);
/// An integer comparison of `d` operands: `pred` (a signed predicate) as it
/// is for signed dtypes, its unsigned form for unsigned ones (u8, bool).
llvm::CmpInst::Predicate int_predicate(DType d, llvm::CmpInst::Predicate pred);

class ElementalEmitter;

/// What an element formula sees: its node, the operands' elements at the
/// output index (broadcast), the output index and the dtypes.
struct ElementArgs {
  const Node &node;
  const std::vector<llvm::Value *> &x;
  const Index &idx;
  DType in;  // operand 0's dtype (f32 for generators)
  DType out; // the result's dtype
};
using ElementFormula = llvm::Value *(*)(ElementalEmitter &, const ElementArgs &);



class ElementalEmitter {
public:
  using Value = llvm::Value;

  ElementalEmitter(llvm::Module &module, const Graph &g, LoweringPlan plan, const std::vector<std::string> &symbols);
  virtual ~ElementalEmitter() = default;

  const LoweringPlan &plan() const { return plan_; }

protected:
  /// Where a stored (non-fused) value's elements live.
  virtual Value *pointer_of(ValueId v) = 0;
  /// Called with each load and store load_element / store_element make, and
  /// the base pointer it indexes: a backend may tag it with alias metadata.
  virtual void annotate_access(llvm::Instruction *, Value * /*base*/) {}

  // ---- the function being emitted ----

  /// Emission starts in a new function whose dims array is `dims`; the
  /// builders already point into it. Dim values are computed anew there.
  /// `symbols_fixed`: no node of this function defines a symbol (a task
  /// function: the symbols its kernel reads were stored before it runs), so
  /// every dim is loaded once, in the entry block, and no loop reloads one.
  void begin_function(Value *dims, bool symbols_fixed = false);

  /// Emission moves into another function (a task: rows, a GEMM panel's
  /// epilogue) while this object lives: the builders, the dims argument and
  /// the dim values are that function's (symbols fixed: begin_function);
  /// the destructor restores the caller's.
  class FunctionScope {
  public:
    /// `entry`: where the new function's entry-block code goes (also where
    /// body code starts, until the caller moves b_).
    FunctionScope(ElementalEmitter &e, llvm::BasicBlock::iterator entry, llvm::BasicBlock *entry_block, Value *dims);
    ~FunctionScope();
    FunctionScope(const FunctionScope &) = delete;
    FunctionScope &operator=(const FunctionScope &) = delete;

  private:
    ElementalEmitter &e_;
    llvm::IRBuilderBase::InsertPoint ip_, entry_ip_;
    Value *dims_;
    std::unique_ptr<DimValues> dim_values_;
  };

  // ---- dims (computed once per function, in the entry block) ----

  Value *dim(const Dim &d);

  std::vector<Value *> dims_of(ValueId v);

  // ---- loads, stores, rounding ----

  Value *linear_index(const Index &idx, const std::vector<Value *> &dims);

  Value *load_element(DType dtype, Value *ptr, Value *linear);

  Value *to_bf16_bits(Value *f);

  void store_element(DType dtype, Value *ptr, Value *linear, Value *v);

  /// Rounds a compute value to the precision of its dtype (f16/bf16 results
  /// are rounded after every op, as the reference does).
  Value *round_to(DType dtype, Value *v);

  // ---- loops ----

  /// for (i = 0; i < n; ++i) body(i), at the current insertion point.
  void loop(Value *n, const std::function<void(Value *)> &body);

  /// The loops over `extents` from prefix.size() on; the innermost one a
  /// split_loop by `split` where split > 1 (its extent a multiple of it).
  void loop_nest(const std::vector<Value *> &extents, const std::function<void(const Index &)> &body, Index prefix = {},
                 int64_t split = 1);

  /// for (i = 0; i < n; ++i) body(i) where `n` is a multiple of `factor`:
  /// as a loop over i / factor whose body runs body(i) for the `factor`
  /// values of i % factor in turn (unrolled). Each such i is recorded as
  /// split (index_div / index_rem), so a reshape that cuts the axis into
  /// (i / f, i % f), f dividing factor, reads at affine indices of the
  /// outer counter: the vectorizer then sees f interleaved streams, not a
  /// division per element (a depth-to-space, a nearest upsampling).
  void split_loop(Value *n, int64_t factor, const std::function<void(Value *)> &body);

  /// i / d and i % d for an index and a divisor; where i is a split_loop
  /// index (outer * factor + inner) and d a constant dividing factor,
  /// outer * (factor / d) + inner / d and inner % d.
  Value *index_div(Value *i, Value *d);
  Value *index_rem(Value *i, Value *d);

  /// An accumulator variable in the entry block (SROA turns it into a register).
  Value *local(llvm::Type *t);

  // Operand batch index for a broadcast batch dim.
  Index batch_index(const Shape &operand, const Shape &result, const Index &bidx);

  /// `v` (a `dtype` element) extended to `acc`: floats FPExt, integers by signedness.
  Value *widen(Value *v, DType dtype, llvm::Type *acc);
  Value *narrow(Value *v, DType dtype, llvm::Type *acc);

  // ---- elemental emitters ----

  /// Element `idx` of value v: loaded if stored, else recomputed (a load of
  /// a small f32/f64 constant carries its values' range: FpRange.h).
  Value *element(ValueId v, const Index &idx);
  /// The range of a constant's values (constants of at most
  /// kRangeConstantElements elements; cached by name).
  std::optional<FpRange> constant_range(ValueId v);
  static constexpr int64_t kRangeConstantElements = 4096;

  /// Element `idx` of a fused value, without recursion along chains of
  /// element formulas read at the same index (see the .cpp).
  Value *fused_element(ValueId v, const Index &idx);
  /// True for an operand of a node of shape `shape` that fused_element
  /// evaluates from its work stack.
  bool in_same_index_chain(ValueId operand, const Shape &shape) const;

  /// Operand index under NumPy broadcasting into `out_shape`.
  Index broadcast(ValueId operand, const Shape &out_shape, const Index &idx);

  Value *fconst(DType d, double v);

  Value *node_element(const Node &node, size_t result, const Index &idx);

  Value *compute_element(const Node &node, size_t result, const Index &idx);

public:
  /// How one element of an op's result is computed, by op name: an element
  /// formula, a view's index remapping, a reduction loop, a window loop.
  using ElementLowering = Value *(ElementalEmitter::*)(const Node &, size_t result, const Index &);
  static const std::map<std::string, ElementLowering> &element_lowerings();

protected:
  Value *formula_element(const Node &node, size_t result, const Index &idx);
  Value *reduction_element(const Node &node, size_t result, const Index &idx);
  Value *convolution_element(const Node &node, size_t result, const Index &idx);
  Value *pooling_element(const Node &node, size_t result, const Index &idx);

  // -- element formulas (one per elementwise, generator and collective op) --

public:
  /// Every element formula, by op name: adding an elementwise op means one
  /// entry here (and its OpDef with traits in lib/Ops).
  static const std::map<std::string, ElementFormula> &element_formulas();

protected:
  Value *intrinsic(llvm::Intrinsic::ID id, Value *x);
  Value *sigmoid(DType d, Value *x);
  /// A comparison: `fp` for floats, `sint` for integers, `uint` for booleans.
  Value *compare(const ElementArgs &a, llvm::CmpInst::Predicate fp, llvm::CmpInst::Predicate sint,
                 llvm::CmpInst::Predicate uint);
  /// maximum/minimum; a NaN in x wins (as the reference).
  Value *min_max(const ElementArgs &a, bool max);

  // libm's tanh: the former (1 - e)/(1 + e), e = exp(-2|x|), lost up to
  // 1e-8 relative precision for small |x| (1 - e cancels).
  Value *tanh_f64(Value *x);

  Value *erf_f64(Value *x);

  // -- conversions --

  Value *from_i64(Value *i, DType to);

  Value *cast(Value *x, DType from, DType to);

  Value *literal(DType d, double v);

  // -- reductions --

  Value *reduction(const Node &node, const Index &out_idx);

  // -- shape ops: one element function per op --

  Value *reshape_element(const Node &node, size_t result, const Index &idx);
  Value *squeeze_element(const Node &node, size_t result, const Index &idx);
  Value *transpose_element(const Node &node, size_t result, const Index &idx);
  Value *broadcast_to_element(const Node &node, size_t result, const Index &idx);
  Value *tile_element(const Node &node, size_t result, const Index &idx);
  Value *slice_element(const Node &node, size_t result, const Index &idx);
  Value *split_element(const Node &node, size_t result, const Index &idx);
  Value *concat_element(const Node &node, size_t result, const Index &idx);
  Value *pad_element(const Node &node, size_t result, const Index &idx);
  Value *gather_element(const Node &node, size_t result, const Index &idx);

  /// then() evaluated only when `cond` holds (it may read memory that does
  /// not exist otherwise), else `otherwise` (which must already be defined).
  Value *when(Value *cond, const std::function<Value *()> &then, Value *otherwise);

  bool extent_is_zero(ValueId v, int64_t axis);

  // -- convolution and pooling (NCHW) --

  static std::array<int64_t, 4> padding4(const Attrs &a);

  Value *convolution(const Node &node, const Index &idx);

  Value *in_bounds(Value *y, Value *H, Value *x, Value *W);

  Value *pooling(const Node &node, const Index &idx);


  llvm::Module &module_;
  llvm::LLVMContext &ctx_;
  const Graph &g_;
  LoweringPlan plan_;
  const std::vector<std::string> &symbols_; // dims_ holds one i64 per symbol, in this order
  llvm::IRBuilder<> b_;       // the current insertion point
  llvm::IRBuilder<> entry_b_; // the entry block: allocas, symbol loads, dim polynomials
  Value *dims_ = nullptr;                 // the current function's dims array
  std::unique_ptr<DimValues> dim_values_; // ...and its dim values
  /// Epilogues: while a GEMM tile evaluates the elementwise chain that
  /// consumes its result, element(v, idx) of the matmul value v is the
  /// accumulator at the current index (set here), not a load. Only sound for
  /// chains that read v at the output's own index (same shape, no remapping).
  std::map<ValueId, Value *> element_overrides_;
  std::map<std::string, std::optional<FpRange>> constant_ranges_;
  /// The indices split_loop made: i = outer * factor + inner.
  struct SplitIndex {
    Value *outer;
    int64_t factor;
    int64_t inner;
  };
  std::map<const Value *, SplitIndex> split_indices_;
};

} // namespace maxc::codegen
