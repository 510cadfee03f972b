#include "ElementalEmitter.h"

#include "EntryPointUtil.h"
#include "FpRange.h"

#include "MathEmitter.h"
#include "maxc/Ops/OpRegistry.h"
#include "maxc/Support/Error.h"

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace maxc::codegen {

using llvm::Value;

// The LLVM types of a dtype, from its class and width in the dtype table.
static llvm::Type *float_type(llvm::LLVMContext &c, unsigned bits) {
  return bits == 16 ? llvm::Type::getHalfTy(c) : bits == 32 ? llvm::Type::getFloatTy(c) : llvm::Type::getDoubleTy(c);
}

llvm::Type *compute_type(llvm::LLVMContext &c, DType d) {
  const DTypeInfo &info = dtype_info(dtype_info(d).compute);
  if (info.cls == DTypeClass::floating)
    return float_type(c, info.bits);
  return llvm::Type::getIntNTy(c, info.bits); // bool: i1
}

llvm::Type *accumulator_type(llvm::LLVMContext &c, DType d) { return compute_type(c, dtype_info(d).accumulator); }

llvm::CmpInst::Predicate int_predicate(DType d, llvm::CmpInst::Predicate pred) {
  return is_signed(d) ? pred : llvm::ICmpInst::getUnsignedPredicate(pred);
}

llvm::Type *memory_type(llvm::LLVMContext &c, DType d) {
  const DTypeInfo &info = dtype_info(d);
  if (info.cls != DTypeClass::floating || d == DType::bf16) // bf16: its bits
    return llvm::Type::getIntNTy(c, 8 * info.bytes);
  return float_type(c, info.bits);
}

ElementalEmitter::ElementalEmitter(llvm::Module &module, const Graph &g, LoweringPlan plan,
                                   const std::vector<std::string> &symbols)
    : module_(module), ctx_(module.getContext()), g_(g), plan_(std::move(plan)), symbols_(symbols), b_(ctx_),
      entry_b_(ctx_) {}

void ElementalEmitter::begin_function(Value *dims, bool symbols_fixed) {
  dims_ = dims;
  dim_values_ = std::make_unique<DimValues>(entry_b_, dims, symbols_, symbols_fixed ? nullptr : &g_.root()->symbol_table(),
                                            &b_);
}

ElementalEmitter::FunctionScope::FunctionScope(ElementalEmitter &e, llvm::BasicBlock::iterator entry,
                                               llvm::BasicBlock *entry_block, Value *dims)
    : e_(e), ip_(e.b_.saveIP()), entry_ip_(e.entry_b_.saveIP()), dims_(e.dims_),
      dim_values_(std::move(e.dim_values_)) {
  e.entry_b_.SetInsertPoint(entry_block, entry);
  e.b_.SetInsertPoint(entry_block, entry);
  e.begin_function(dims, /*symbols_fixed=*/true);
}

ElementalEmitter::FunctionScope::~FunctionScope() {
  e_.b_.restoreIP(ip_);
  e_.entry_b_.restoreIP(entry_ip_);
  e_.dims_ = dims_;
  e_.dim_values_ = std::move(dim_values_);
}

Value *ElementalEmitter::dim(const Dim &d) {
  if (d.is_static())
    return b_.getInt64(d.value());
  return dim_values_->get(d);
}

std::vector<Value *> ElementalEmitter::dims_of(ValueId v) {
  std::vector<Value *> out;
  for (const Dim &d : g_.type_of(v).shape)
    out.push_back(dim(d));
  return out;
}

Value *ElementalEmitter::linear_index(const Index &idx, const std::vector<Value *> &dims) {
  if (idx.empty())
    return b_.getInt64(0);
  Value *lin = idx[0]; // itself for one dim (index_div sees a split index)
  for (size_t d = 1; d < idx.size(); ++d)
    lin = b_.CreateAdd(b_.CreateMul(lin, dims[d]), idx[d]);
  return lin;
}

Value *ElementalEmitter::load_element(DType dtype, Value *ptr, Value *linear) {
  llvm::Type *mt = memory_type(ctx_, dtype);
  llvm::LoadInst *raw = b_.CreateLoad(mt, b_.CreateGEP(mt, ptr, linear));
  annotate_access(raw, ptr);
  switch (dtype) {
  case DType::f16: return b_.CreateFPExt(raw, b_.getFloatTy());
  case DType::bf16:
    return b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(raw, b_.getInt32Ty()), 16), b_.getFloatTy());
  case DType::boolean: return b_.CreateICmpNE(raw, b_.getInt8(0));
  default: return raw;
  }
}

Value *ElementalEmitter::to_bf16_bits(Value *f) {
  // Round to nearest even; NaN stays a (quiet) NaN.
  Value *bits = b_.CreateBitCast(f, b_.getInt32Ty());
  Value *lsb = b_.CreateAnd(b_.CreateLShr(bits, 16), b_.getInt32(1));
  Value *rounded = b_.CreateLShr(b_.CreateAdd(bits, b_.CreateAdd(b_.getInt32(0x7fff), lsb)), 16);
  Value *nan = b_.CreateOr(b_.CreateLShr(bits, 16), b_.getInt32(0x40));
  Value *out = b_.CreateSelect(b_.CreateFCmpUNO(f, f), nan, rounded);
  return b_.CreateTrunc(out, b_.getInt16Ty());
}

void ElementalEmitter::store_element(DType dtype, Value *ptr, Value *linear, Value *v) {
  llvm::Type *mt = memory_type(ctx_, dtype);
  Value *raw = v;
  switch (dtype) {
  case DType::f16: raw = b_.CreateFPTrunc(v, mt); break;
  case DType::bf16: raw = to_bf16_bits(v); break;
  case DType::boolean: raw = b_.CreateZExt(v, mt); break;
  default: break;
  }
  annotate_access(b_.CreateStore(raw, b_.CreateGEP(mt, ptr, linear)), ptr);
}

Value *ElementalEmitter::round_to(DType dtype, Value *v) {
  if (dtype == DType::f16)
    return b_.CreateFPExt(b_.CreateFPTrunc(v, b_.getHalfTy()), b_.getFloatTy());
  if (dtype == DType::bf16)
    return b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(to_bf16_bits(v), b_.getInt32Ty()), 16), b_.getFloatTy());
  return v;
}

void ElementalEmitter::loop(Value *n, const std::function<void(Value *)> &body) {
  emit_counted_loop(b_, n, body, "", "i", /*no_wrap=*/true);
}

void ElementalEmitter::loop_nest(const std::vector<Value *> &extents, const std::function<void(const Index &)> &body, Index prefix,
                                 int64_t split) {
  if (prefix.size() == extents.size()) {
    body(prefix);
    return;
  }
  auto next = [&](Value *i) {
    Index deeper = prefix;
    deeper.push_back(i);
    loop_nest(extents, body, deeper, split);
  };
  if (split > 1 && prefix.size() + 1 == extents.size())
    split_loop(extents.back(), split, next);
  else
    loop(extents[prefix.size()], next);
}

void ElementalEmitter::split_loop(Value *n, int64_t factor, const std::function<void(Value *)> &body) {
  loop(b_.CreateUDiv(n, b_.getInt64(factor)), [&](Value *outer) {
    Value *base = b_.CreateMul(outer, b_.getInt64(factor), "", /*HasNUW=*/true, /*HasNSW=*/true);
    for (int64_t inner = 0; inner < factor; ++inner) {
      Value *i = inner == 0 ? base : b_.CreateAdd(base, b_.getInt64(inner), "", true, true);
      split_indices_[i] = SplitIndex{outer, factor, inner};
      body(i);
      split_indices_.erase(i);
    }
  });
}

namespace {
/// d's value when it is a positive constant, else 0.
int64_t positive_constant(Value *d) {
  auto *c = llvm::dyn_cast<llvm::ConstantInt>(d);
  return c && c->getSExtValue() > 0 ? c->getSExtValue() : 0;
}
} // namespace

Value *ElementalEmitter::index_div(Value *i, Value *d) {
  auto it = split_indices_.find(i);
  int64_t dc = positive_constant(d);
  if (it == split_indices_.end() || dc == 0 || it->second.factor % dc != 0)
    return b_.CreateUDiv(i, d);
  const SplitIndex &s = it->second;
  Value *outer = s.factor == dc ? s.outer : b_.CreateMul(s.outer, b_.getInt64(s.factor / dc), "", true, true);
  return s.inner / dc == 0 ? outer : b_.CreateAdd(outer, b_.getInt64(s.inner / dc), "", true, true);
}

Value *ElementalEmitter::index_rem(Value *i, Value *d) {
  auto it = split_indices_.find(i);
  int64_t dc = positive_constant(d);
  if (it == split_indices_.end() || dc == 0 || it->second.factor % dc != 0)
    return b_.CreateURem(i, d);
  return b_.getInt64(it->second.inner % dc);
}

Value *ElementalEmitter::local(llvm::Type *t) { return entry_b_.CreateAlloca(t); }

Index ElementalEmitter::batch_index(const Shape &operand, const Shape &result, const Index &bidx) {
  size_t ob = operand.size() - 2, rb = result.size() - 2;
  Index idx;
  for (size_t d = 0; d < ob; ++d) {
    size_t rd = d + rb - ob;
    bool broadcast = operand[d].is_static() && operand[d].value() == 1 &&
                     !(result[rd].is_static() && result[rd].value() == 1);
    idx.push_back(broadcast ? b_.getInt64(0) : bidx[rd]);
  }
  return idx;
}

Value *ElementalEmitter::widen(Value *v, DType dtype, llvm::Type *acc) {
  if (v->getType() == acc)
    return v;
  if (is_float(dtype))
    return b_.CreateFPExt(v, acc);
  return is_signed(dtype) ? b_.CreateSExt(v, acc) : b_.CreateZExt(v, acc);
}

Value *ElementalEmitter::narrow(Value *v, DType dtype, llvm::Type *acc) {
  llvm::Type *t = compute_type(ctx_, dtype);
  if (t == acc)
    return v;
  if (is_float(dtype))
    return b_.CreateFPTrunc(v, t);
  return b_.CreateTrunc(v, t);
}

Value *ElementalEmitter::element(ValueId v, const Index &idx) {
  if (auto it = element_overrides_.find(v); it != element_overrides_.end())
    return it->second;
  const ValuePlan &p = plan_.values[v];
  if (p.storage != Storage::fused) {
    std::vector<Value *> dims = dims_of(v);
    DType dtype = g_.type_of(v).dtype;
    Value *x = load_element(dtype, pointer_of(v), linear_index(idx, dims));
    if (auto *load = llvm::dyn_cast<llvm::LoadInst>(x); load && (dtype == DType::f32 || dtype == DType::f64))
      if (std::optional<FpRange> r = constant_range(v))
        set_fp_range(load, *r);
    return x;
  }
  return fused_element(v, idx);
}

std::optional<FpRange> ElementalEmitter::constant_range(ValueId v) {
  int64_t producer = g_.value_info(v).producer;
  if (producer < 0 || g_.nodes()[static_cast<size_t>(producer)].op != "constant")
    return std::nullopt;
  const Node &node = g_.nodes()[static_cast<size_t>(producer)];
  std::string name = node.attrs.get_string("name");
  if (auto it = constant_ranges_.find(name); it != constant_ranges_.end())
    return it->second;
  std::optional<FpRange> r;
  // Small constants only (a requantization's per-channel multipliers): the
  // data is read here.
  if (g_.has_constant(name)) {
    const HostTensor &t = g_.constant(name);
    if (t.numel() <= kRangeConstantElements) {
      std::vector<double> values(static_cast<size_t>(t.numel()));
      for (size_t i = 0; i < values.size(); ++i)
        values[i] = t.get_f64(static_cast<int64_t>(i));
      r = fp_range_of_values(values.data(), values.size());
    }
  }
  constant_ranges_[name] = r;
  return r;
}

bool ElementalEmitter::in_same_index_chain(ValueId operand, const Shape &shape) const {
  if (plan_.values[operand].storage != Storage::fused || element_overrides_.count(operand) ||
      g_.type_of(operand).shape != shape)
    return false;
  const ValueInfo &info = g_.value_info(operand);
  auto lowering = element_lowerings().find(g_.nodes()[info.producer].op);
  return lowering != element_lowerings().end() && lowering->second == &ElementalEmitter::formula_element;
}

// A fused value is computed from its operands' elements, which may be fused
// too: chains of elementwise ops can be tens of thousands of nodes deep. The
// operands an element formula reads at the same index (same shape) are
// evaluated first, bottom-up from an explicit work stack, and handed to
// their consumer as element overrides, so the C++ stack depth does not grow
// with the length of the chain (other fused operands, e.g. views, recurse).
Value *ElementalEmitter::fused_element(ValueId v, const Index &idx) {
  struct Item {
    ValueId value;
    bool operands_pushed;
  };
  std::map<ValueId, Value *> done;
  std::vector<Item> work{{v, false}};
  while (!work.empty()) {
    Item &item = work.back();
    ValueId u = item.value;
    const ValueInfo &info = g_.value_info(u);
    const Node &node = g_.nodes()[info.producer];
    if (done.count(u)) {
      work.pop_back();
      continue;
    }
    bool chain = u == v ? element_lowerings().count(node.op) &&
                              element_lowerings().at(node.op) == &ElementalEmitter::formula_element
                        : true;
    if (!item.operands_pushed) {
      item.operands_pushed = true;
      if (chain)
        for (ValueId operand : node.operands)
          if (!done.count(operand) && in_same_index_chain(operand, g_.type_of(u).shape))
            work.push_back({operand, false}); // invalidates `item`
      continue;
    }
    // Every same-index operand is done: they are this node's elements.
    std::vector<ValueId> set;
    for (ValueId operand : node.operands)
      if (auto it = done.find(operand); it != done.end() && !element_overrides_.count(operand)) {
        element_overrides_[operand] = it->second;
        set.push_back(operand);
      }
    Value *result = node_element(node, info.index, idx);
    for (ValueId operand : set)
      element_overrides_.erase(operand);
    done[u] = result;
    work.pop_back();
  }
  return done.at(v);
}

Index ElementalEmitter::broadcast(ValueId operand, const Shape &out_shape, const Index &idx) {
  const Shape &s = g_.type_of(operand).shape;
  Index out;
  size_t offset = out_shape.size() - s.size();
  for (size_t d = 0; d < s.size(); ++d) {
    const Dim &od = out_shape[d + offset];
    bool zero = s[d].is_static() && s[d].value() == 1 && !(od.is_static() && od.value() == 1);
    out.push_back(zero ? b_.getInt64(0) : idx[d + offset]);
  }
  return out;
}

Value *ElementalEmitter::fconst(DType d, double v) { return llvm::ConstantFP::get(compute_type(ctx_, d), v); }

Value *ElementalEmitter::node_element(const Node &node, size_t result, const Index &idx) {
  DType dtype = g_.type_of(node.results[result]).dtype;
  Value *v = compute_element(node, result, idx);
  return is_float(dtype) ? round_to(dtype, v) : v;
}

Value *ElementalEmitter::compute_element(const Node &node, size_t result, const Index &idx) {
  auto lowering = element_lowerings().find(node.op);
  if (lowering == element_lowerings().end())
    throw Error(ErrorCode::Internal, "codegen: no lowering for op '" + node.op + "'");
  return (this->*lowering->second)(node, result, idx);
}

Value *ElementalEmitter::formula_element(const Node &node, size_t result, const Index &idx) {
  const Shape &out_shape = g_.type_of(node.results[result]).shape;
  std::vector<Value *> x;
  for (ValueId operand : node.operands)
    x.push_back(element(operand, broadcast(operand, out_shape, idx)));
  DType in_dtype = node.operands.empty() ? DType::f32 : g_.type_of(node.operands[0]).dtype;
  return element_formulas().at(node.op)(*this, ElementArgs{node, x, idx, in_dtype, g_.type_of(node.results[result]).dtype});
}

Value *ElementalEmitter::reduction_element(const Node &node, size_t, const Index &idx) { return reduction(node, idx); }
Value *ElementalEmitter::convolution_element(const Node &node, size_t, const Index &idx) { return convolution(node, idx); }
Value *ElementalEmitter::pooling_element(const Node &node, size_t, const Index &idx) { return pooling(node, idx); }

const std::map<std::string, ElementalEmitter::ElementLowering> &ElementalEmitter::element_lowerings() {
  static const std::map<std::string, ElementLowering> lowerings = [] {
    using E = ElementalEmitter;
    std::map<std::string, ElementLowering> m = {
        {"reshape", &E::reshape_element},
        {"squeeze", &E::squeeze_element},
        {"unsqueeze", &E::squeeze_element},
        {"transpose", &E::transpose_element},
        {"broadcast_to", &E::broadcast_to_element},
        {"tile", &E::tile_element},
        {"slice", &E::slice_element},
        {"split", &E::split_element},
        {"concat", &E::concat_element},
        {"pad", &E::pad_element},
        {"gather", &E::gather_element},
        {"conv2d", &E::convolution_element},
        {"conv_transpose2d", &E::convolution_element},
        {"max_pool2d", &E::pooling_element},
        {"avg_pool2d", &E::pooling_element},
    };
    for (const auto &[op, formula] : element_formulas())
      m.emplace(op, &E::formula_element);
    // Every reduction has one accumulator loop (reduction()).
    for (const OpDef *def : OpRegistry::instance().all())
      if (def->has(OpTrait::reduction))
        m.emplace(def->name, &E::reduction_element);
    return m;
  }();
  return lowerings;
}

bool has_elemental_lowering(const std::string &op) { return ElementalEmitter::element_lowerings().count(op) != 0; }

// ---- element formulas: one per elementwise, generator and collective op ----

bool has_element_formula(const std::string &op) { return ElementalEmitter::element_formulas().count(op) != 0; }

Value *ElementalEmitter::intrinsic(llvm::Intrinsic::ID id, Value *x) { return b_.CreateUnaryIntrinsic(id, x); }

Value *ElementalEmitter::sigmoid(DType d, Value *x) {
  if (d != DType::f64)
    return emit_sigmoid_f32(b_, x);
  return b_.CreateFDiv(fconst(d, 1), b_.CreateFAdd(fconst(d, 1), intrinsic(llvm::Intrinsic::exp, b_.CreateFNeg(x))));
}

Value *ElementalEmitter::compare(const ElementArgs &a, llvm::CmpInst::Predicate fp, llvm::CmpInst::Predicate sint,
                                 llvm::CmpInst::Predicate uint) {
  Value *x = a.x[0], *y = a.x[1];
  if (is_float(a.in))
    return b_.CreateFCmp(fp, x, y);
  return b_.CreateICmp(is_signed(a.in) ? sint : uint, x, y);
}

const std::map<std::string, ElementFormula> &ElementalEmitter::element_formulas() {
  using E = ElementalEmitter;
  using A = ElementArgs;
  using P = llvm::CmpInst;
  // f32 polynomials (MathEmitter) or, for f64, libm through intrinsics.
  static const auto libm_or_poly = [](E &e, const A &a, llvm::Intrinsic::ID id,
                                      Value *(*poly)(llvm::IRBuilder<> &, Value *)) {
    return a.in == DType::f64 ? e.intrinsic(id, a.x[0]) : poly(e.b_, a.x[0]);
  };
  static const auto zero = [](E &e, DType d) -> Value * {
    llvm::Type *t = compute_type(e.ctx_, d);
    return is_float(d) ? static_cast<Value *>(llvm::ConstantFP::get(t, 0.0)) : llvm::ConstantInt::get(t, 0);
  };
  static const std::map<std::string, ElementFormula> formulas = {
      // -- unary --
      {"neg", [](E &e, const A &a) { return is_float(a.in) ? e.b_.CreateFNeg(a.x[0]) : e.b_.CreateSub(zero(e, a.in), a.x[0]); }},
      {"abs", [](E &e, const A &a) -> Value * {
         if (is_float(a.in))
           return e.intrinsic(llvm::Intrinsic::fabs, a.x[0]);
         Value *z = zero(e, a.in);
         return e.b_.CreateSelect(e.b_.CreateICmp(int_predicate(a.in, P::ICMP_SLT), a.x[0], z), e.b_.CreateSub(z, a.x[0]), a.x[0]);
       }},
      {"exp", [](E &e, const A &a) { return libm_or_poly(e, a, llvm::Intrinsic::exp, emit_exp_f32); }},
      {"log", [](E &e, const A &a) { return libm_or_poly(e, a, llvm::Intrinsic::log, emit_log_f32); }},
      {"sqrt", [](E &e, const A &a) { return e.intrinsic(llvm::Intrinsic::sqrt, a.x[0]); }},
      {"rsqrt", [](E &e, const A &a) { return e.b_.CreateFDiv(e.fconst(a.in, 1.0), e.intrinsic(llvm::Intrinsic::sqrt, a.x[0])); }},
      {"tanh", [](E &e, const A &a) { return a.in == DType::f64 ? e.tanh_f64(a.x[0]) : emit_tanh_f32(e.b_, a.x[0]); }},
      {"sigmoid", [](E &e, const A &a) { return e.sigmoid(a.in, a.x[0]); }},
      {"relu", [](E &e, const A &a) {
         Value *z = zero(e, a.in);
         Value *positive = is_float(a.in) ? e.b_.CreateFCmpOGT(a.x[0], z) : e.b_.CreateICmp(int_predicate(a.in, P::ICMP_SGT), a.x[0], z);
         return e.b_.CreateSelect(positive, a.x[0], z);
       }},
      {"silu", [](E &e, const A &a) { return e.b_.CreateFMul(a.x[0], e.sigmoid(a.in, a.x[0])); }},
      {"erf", [](E &e, const A &a) { return a.in == DType::f64 ? e.erf_f64(a.x[0]) : emit_erf_f32(e.b_, a.x[0]); }},
      {"gelu", [](E &e, const A &a) {
         DType d = a.in;
         Value *x = a.x[0];
         bool f64 = d == DType::f64;
         auto &b = e.b_;
         if (a.node.attrs.get_string("approximate") == "tanh") {
           Value *inner = b.CreateFMul(e.fconst(d, std::sqrt(2.0 / M_PI)),
                                       b.CreateFAdd(x, b.CreateFMul(e.fconst(d, 0.044715), b.CreateFMul(x, b.CreateFMul(x, x)))));
           Value *th = f64 ? e.tanh_f64(inner) : emit_tanh_f32(b, inner);
           return b.CreateFMul(b.CreateFMul(e.fconst(d, 0.5), x), b.CreateFAdd(e.fconst(d, 1), th));
         }
         Value *arg = b.CreateFMul(x, e.fconst(d, M_SQRT1_2));
         Value *erf = f64 ? e.erf_f64(arg) : emit_erf_f32(b, arg);
         return b.CreateFMul(b.CreateFMul(e.fconst(d, 0.5), x), b.CreateFAdd(e.fconst(d, 1), erf));
       }},
      {"sin", [](E &e, const A &a) { return libm_or_poly(e, a, llvm::Intrinsic::sin, emit_sin_f32); }},
      {"cos", [](E &e, const A &a) { return libm_or_poly(e, a, llvm::Intrinsic::cos, emit_cos_f32); }},
      {"floor", [](E &e, const A &a) { return is_float(a.in) ? e.intrinsic(llvm::Intrinsic::floor, a.x[0]) : a.x[0]; }},
      {"ceil", [](E &e, const A &a) { return is_float(a.in) ? e.intrinsic(llvm::Intrinsic::ceil, a.x[0]) : a.x[0]; }},
      {"round", [](E &e, const A &a) { return is_float(a.in) ? e.intrinsic(llvm::Intrinsic::roundeven, a.x[0]) : a.x[0]; }},
      {"sign", [](E &e, const A &a) -> Value * {
         auto &b = e.b_;
         Value *x = a.x[0], *z = zero(e, a.in);
         llvm::Type *t = compute_type(e.ctx_, a.in);
         if (is_float(a.in)) {
           Value *pos = b.CreateUIToFP(b.CreateFCmpOGT(x, z), t);
           Value *neg = b.CreateUIToFP(b.CreateFCmpOLT(x, z), t);
           return b.CreateSelect(b.CreateFCmpUNO(x, x), x, b.CreateFSub(pos, neg));
         }
         return b.CreateSub(b.CreateZExt(b.CreateICmp(int_predicate(a.in, P::ICMP_SGT), x, z), t),
                            b.CreateZExt(b.CreateICmp(int_predicate(a.in, P::ICMP_SLT), x, z), t));
       }},
      {"not", [](E &e, const A &a) { return e.b_.CreateNot(a.x[0]); }},
      // -- binary --
      {"and", [](E &e, const A &a) { return e.b_.CreateAnd(a.x[0], a.x[1]); }},
      {"or", [](E &e, const A &a) { return e.b_.CreateOr(a.x[0], a.x[1]); }},
      {"eq", [](E &e, const A &a) { return e.compare(a, P::FCMP_OEQ, P::ICMP_EQ, P::ICMP_EQ); }},
      {"ne", [](E &e, const A &a) { return e.compare(a, P::FCMP_UNE, P::ICMP_NE, P::ICMP_NE); }},
      {"lt", [](E &e, const A &a) { return e.compare(a, P::FCMP_OLT, P::ICMP_SLT, P::ICMP_ULT); }},
      {"le", [](E &e, const A &a) { return e.compare(a, P::FCMP_OLE, P::ICMP_SLE, P::ICMP_ULE); }},
      {"gt", [](E &e, const A &a) { return e.compare(a, P::FCMP_OGT, P::ICMP_SGT, P::ICMP_UGT); }},
      {"ge", [](E &e, const A &a) { return e.compare(a, P::FCMP_OGE, P::ICMP_SGE, P::ICMP_UGE); }},
      {"add", [](E &e, const A &a) { return is_float(a.in) ? e.b_.CreateFAdd(a.x[0], a.x[1]) : e.b_.CreateAdd(a.x[0], a.x[1]); }},
      {"sub", [](E &e, const A &a) { return is_float(a.in) ? e.b_.CreateFSub(a.x[0], a.x[1]) : e.b_.CreateSub(a.x[0], a.x[1]); }},
      {"mul", [](E &e, const A &a) { return is_float(a.in) ? e.b_.CreateFMul(a.x[0], a.x[1]) : e.b_.CreateMul(a.x[0], a.x[1]); }},
      {"pow", [](E &e, const A &a) { return e.b_.CreateBinaryIntrinsic(llvm::Intrinsic::pow, a.x[0], a.x[1]); }},
      {"maximum", [](E &e, const A &a) { return e.min_max(a, true); }},
      {"minimum", [](E &e, const A &a) { return e.min_max(a, false); }},
      {"div", [](E &e, const A &a) -> Value * {
         auto &b = e.b_;
         Value *x = a.x[0], *y = a.x[1];
         if (is_float(a.in))
           return b.CreateFDiv(x, y);
         // x/0 = 0 and MIN/-1 wraps, with no UB: divide by a safe divisor.
         llvm::Type *t = compute_type(e.ctx_, a.in);
         Value *z = zero(e, a.in);
         if (!is_signed(a.in)) {
           Value *by_zero = b.CreateICmpEQ(y, z);
           return b.CreateSelect(by_zero, z, b.CreateUDiv(x, b.CreateSelect(by_zero, llvm::ConstantInt::get(t, 1), y)));
         }
         Value *minus_one = b.CreateICmpEQ(y, llvm::ConstantInt::get(t, -1, true));
         Value *bad = b.CreateOr(b.CreateICmpEQ(y, z), minus_one);
         Value *q = b.CreateSDiv(x, b.CreateSelect(bad, llvm::ConstantInt::get(t, 1), y));
         return b.CreateSelect(b.CreateICmpEQ(y, z), z, b.CreateSelect(minus_one, b.CreateSub(z, x), q));
       }},
      {"mod", [](E &e, const A &a) -> Value * {
         auto &b = e.b_;
         Value *x = a.x[0], *y = a.x[1], *z = zero(e, a.in);
         if (is_float(a.in)) {
           Value *r = b.CreateFRem(x, y);
           Value *fix = b.CreateAnd(b.CreateFCmpUNE(r, z), b.CreateXor(b.CreateFCmpOLT(r, z), b.CreateFCmpOLT(y, z)));
           return b.CreateSelect(fix, b.CreateFAdd(r, y), r);
         }
         llvm::Type *t = compute_type(e.ctx_, a.in);
         if (!is_signed(a.in)) { // x mod 0 = 0
           Value *by_zero = b.CreateICmpEQ(y, z);
           return b.CreateSelect(by_zero, z, b.CreateURem(x, b.CreateSelect(by_zero, llvm::ConstantInt::get(t, 1), y)));
         }
         Value *bad = b.CreateOr(b.CreateICmpEQ(y, z), b.CreateICmpEQ(y, llvm::ConstantInt::get(t, -1, true)));
         Value *r = b.CreateSRem(x, b.CreateSelect(bad, llvm::ConstantInt::get(t, 1), y));
         Value *fix = b.CreateAnd(b.CreateICmpNE(r, z), b.CreateXor(b.CreateICmpSLT(r, z), b.CreateICmpSLT(y, z)));
         return b.CreateSelect(bad, z, b.CreateSelect(fix, b.CreateAdd(r, y), r));
       }},
      // -- other elementwise --
      {"where", [](E &e, const A &a) { return e.b_.CreateSelect(a.x[0], a.x[1], a.x[2]); }},
      {"cast", [](E &e, const A &a) { return e.cast(a.x[0], a.in, a.out); }},
      // -- generators --
      {"full", [](E &e, const A &a) { return e.literal(a.out, a.node.attrs.get_real("value")); }},
      {"iota", [](E &e, const A &a) {
         int64_t axis = a.node.attrs.get_int("axis");
         if (axis < 0)
           axis += static_cast<int64_t>(a.idx.size());
         return e.from_i64(a.idx[axis], a.out);
       }},
      {"dim_values", [](E &e, const A &a) {
         const Shape &dims = a.node.attrs.get_shape("dims");
         if (dims.empty()) // [0]: no element is ever asked for
           return e.from_i64(e.b_.getInt64(0), a.out);
         Value *v = e.dim(dims.back());
         for (size_t i = dims.size() - 1; i-- > 0;) // a select per dim: few (a shape's rank)
           v = e.b_.CreateSelect(e.b_.CreateICmpEQ(a.idx[0], e.b_.getInt64(static_cast<int64_t>(i))), e.dim(dims[i]), v);
         return e.from_i64(v, a.out);
       }},
      {"range", [](E &e, const A &a) {
         auto &b = e.b_;
         Value *x = b.CreateFAdd(b.CreateFMul(b.CreateSIToFP(a.idx[0], b.getDoubleTy()),
                                              llvm::ConstantFP::get(b.getDoubleTy(), a.node.attrs.get_real("step"))),
                                 llvm::ConstantFP::get(b.getDoubleTy(), a.node.attrs.get_real("start")));
         return e.cast(x, DType::f64, a.out);
       }},
      // -- collectives --
      {"allreduce_sum", [](E &e, const A &a) -> Value * {
         auto &b = e.b_;
         bool fp = is_float(a.out);
         Value *acc = nullptr;
         for (Value *x : a.x) {
           if (fp)
             x = b.CreateFPExt(x, b.getDoubleTy());
           acc = !acc ? x : fp ? b.CreateFAdd(acc, x) : b.CreateAdd(acc, x);
         }
         return fp ? b.CreateFPTrunc(acc, compute_type(e.ctx_, a.out)) : acc;
       }},
  };
  return formulas;
}

Value *ElementalEmitter::min_max(const ElementArgs &a, bool max) {
  Value *x = a.x[0], *y = a.x[1];
  if (is_float(a.in)) {
    Value *better = max ? b_.CreateFCmpOGT(x, y) : b_.CreateFCmpOLT(x, y);
    if (fp_range(x) && fp_range(y)) // neither is ever NaN: the same without the test
      return b_.CreateSelect(better, x, y);
    return b_.CreateSelect(b_.CreateOr(b_.CreateFCmpUNO(x, x), better), x, y);
  }
  return b_.CreateSelect(b_.CreateICmp(int_predicate(a.in, max ? llvm::CmpInst::ICMP_SGT : llvm::CmpInst::ICMP_SLT), x, y),
                         x, y);
}

Value *ElementalEmitter::tanh_f64(Value *x) {
  llvm::FunctionCallee f = module_.getOrInsertFunction("tanh", b_.getDoubleTy(), b_.getDoubleTy());
  return b_.CreateCall(f, {x});
}

Value *ElementalEmitter::erf_f64(Value *x) {
  llvm::FunctionCallee f = module_.getOrInsertFunction("erf", b_.getDoubleTy(), b_.getDoubleTy());
  return b_.CreateCall(f, {x});
}

Value *ElementalEmitter::from_i64(Value *i, DType to) {
  llvm::Type *t = compute_type(ctx_, to);
  if (is_float(to))
    return b_.CreateSIToFP(i, t);
  if (to == DType::boolean)
    return b_.CreateICmpNE(i, b_.getInt64(0));
  return b_.CreateTrunc(i, t);
}

Value *ElementalEmitter::cast(Value *x, DType from, DType to) {
  llvm::Type *t = compute_type(ctx_, to);
  if (from == to)
    return x;
  if (to == DType::boolean)
    return is_float(from) ? b_.CreateFCmpUNE(x, llvm::ConstantFP::get(x->getType(), 0.0))
                          : b_.CreateICmpNE(x, llvm::ConstantInt::get(x->getType(), 0));
  if (is_float(from) && is_float(to)) {
    if (x->getType() == t)
      return x; // f16/bf16/f32 share float; round_to() applies the precision
    if (t->isDoubleTy())
      return b_.CreateFPExt(x, t);
    if (Value *fma = exact_fma_f32(b_, x)) // p * c + q exact in f64: one rounding either way
      return fma;
    return b_.CreateFPTrunc(x, t);
  }
  if (is_float(from) && x->getType()->isFloatTy() &&
      (t->getIntegerBitWidth() == 8 || t->getIntegerBitWidth() == 16 || t->getIntegerBitWidth() == 32))
    if (std::optional<FpRange> r = fp_range(x); r && r->lo >= -2147483648.0 && r->hi <= 2147483648.0) {
      // An i32 (or narrower) converted to f32 within 2^24: exact, so the
      // truncation gives the integer back.
      if (auto *conv = llvm::dyn_cast<llvm::SIToFPInst>(x);
          conv && conv->getOperand(0)->getType()->getIntegerBitWidth() <= 32 && r->lo >= -16777216.0 &&
          r->hi <= 16777216.0)
        return b_.CreateSExtOrTrunc(conv->getOperand(0), t);
      // Never NaN, within [-2^31, 2^31]: the general form below reduces to
      // the 32-bit truncation, but at 2^31 (an i32 sum's f32 can round up
      // to it), where the 64-bit one wraps to INT32_MIN (low bytes 0).
      Value *small = b_.CreateFPToSI(x, b_.getInt32Ty());
      if (r->hi >= 2147483648.0)
        small = b_.CreateSelect(b_.CreateFCmpOGE(x, llvm::ConstantFP::get(x->getType(), 2147483648.0)),
                                b_.getInt32(0x80000000u), small);
      return b_.CreateTruncOrBitCast(small, t);
    }
  if (is_float(from) && x->getType()->isFloatTy() && t->getIntegerBitWidth() == 8) {
    // To 8 bits (a requantization's last step), the same result through a
    // 32-bit conversion, which vectorizes (fptosi.sat to i64 does not on
    // x86): below 2^31 in magnitude the two truncations agree; from 2^31
    // every f32 is a multiple of 256, whose low byte is 0, up to 2^63,
    // where saturation gives all ones (0xff); NaN and the rest give 0.
    Value *in_range = b_.CreateFCmpOLT(b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x),
                                       llvm::ConstantFP::get(x->getType(), 2147483648.0));
    Value *top = b_.CreateFCmpOGE(x, llvm::ConstantFP::get(x->getType(), 9223372036854775808.0));
    Value *small = b_.CreateTrunc(b_.CreateFPToSI(x, b_.getInt32Ty()), t);
    return b_.CreateSelect(in_range, small, b_.CreateSelect(top, llvm::ConstantInt::get(t, 0xff), llvm::ConstantInt::get(t, 0)));
  }
  if (is_float(from) && x->getType()->isFloatTy() && (t->getIntegerBitWidth() == 16 || t->getIntegerBitWidth() == 32)) {
    // To 16 or 32 bits (an integer conv's f32 sums cast to i32), the same
    // result with plain conversions, which vectorize: below 2^31 in
    // magnitude the 32-bit truncation; up to 2^63 the 64-bit one, wrapped;
    // from 2^63 saturation's all ones, at or below -2^63 (and NaN) 0.
    Value *in_range = b_.CreateFCmpOLT(b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x),
                                       llvm::ConstantFP::get(x->getType(), 2147483648.0));
    Value *top = b_.CreateFCmpOGE(x, llvm::ConstantFP::get(x->getType(), 9223372036854775808.0));
    Value *above_min = b_.CreateFCmpOGT(x, llvm::ConstantFP::get(x->getType(), -9223372036854775808.0));
    Value *small = b_.CreateTruncOrBitCast(b_.CreateFPToSI(x, b_.getInt32Ty()), t);
    Value *big = b_.CreateTrunc(b_.CreateFPToSI(x, b_.getInt64Ty()), t);
    Value *outside = b_.CreateSelect(top, llvm::ConstantInt::getAllOnesValue(t),
                                     b_.CreateSelect(above_min, big, llvm::ConstantInt::get(t, 0)));
    return b_.CreateSelect(in_range, small, outside);
  }
  if (is_float(from)) {
    // Truncate toward zero, saturate to i64 (NaN → 0), then wrap: as the reference.
    Value *i = b_.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {b_.getInt64Ty(), x->getType()}, {x});
    const DTypeInfo &info = dtype_info(to);
    if (!info.is_signed && info.digits > 63) { // u64: [2^63, 2^64) converts unsigned, past it saturates
      Value *big = b_.CreateFCmpOGE(x, llvm::ConstantFP::get(x->getType(), 9223372036854775808.0));
      i = b_.CreateSelect(big, b_.CreateIntrinsic(llvm::Intrinsic::fptoui_sat, {b_.getInt64Ty(), x->getType()}, {x}), i);
    }
    return t->getIntegerBitWidth() == 64 ? i : b_.CreateTrunc(i, t);
  }
  // From an integer or bool: its signedness says how it extends.
  bool sign = is_signed(from);
  if (is_float(to)) {
    // i64 → f32/f16/bf16 rounds through double first, as the reference
    // does (HostTensor::set_f64): past 2^53 a direct conversion can round
    // the other way (2^62 + 2^38 + 1 → f32).
    if (dtype_info(from).bits == 64 && !t->isDoubleTy())
      return b_.CreateFPTrunc(sign ? b_.CreateSIToFP(x, b_.getDoubleTy()) : b_.CreateUIToFP(x, b_.getDoubleTy()), t);
    return sign ? b_.CreateSIToFP(x, t) : b_.CreateUIToFP(x, t);
  }
  return sign ? b_.CreateSExtOrTrunc(x, t) : b_.CreateZExtOrTrunc(x, t);
}

Value *ElementalEmitter::literal(DType d, double v) {
  if (is_float(d)) {
    HostTensor rounded = HostTensor::scalar(d, v);
    return llvm::ConstantFP::get(compute_type(ctx_, d), rounded.get_f64(0));
  }
  HostTensor t = HostTensor::scalar(d, v);
  if (d == DType::boolean)
    return b_.getInt1(t.get_i64(0) != 0);
  return llvm::ConstantInt::get(compute_type(ctx_, d), t.get_i64(0), is_signed(d));
}

Value *ElementalEmitter::reduction(const Node &node, const Index &out_idx) {
  const std::string &op = node.op;
  ValueId x = node.operands[0];
  const Shape &xs = g_.type_of(x).shape;
  int64_t rank = static_cast<int64_t>(xs.size());
  DType d = g_.type_of(x).dtype;
  bool keep = node.attrs.get_bool("keepdims");
  std::vector<bool> reduced(rank, false);
  bool index_result = op_traits(op).has(OpTrait::index_result); // argmax-like: one axis, an i64 index
  if (index_result) {
    int64_t axis = node.attrs.get_int("axis");
    reduced[axis < 0 ? axis + rank : axis] = true;
  } else {
    std::vector<int64_t> axes = node.attrs.get_ints("axes");
    if (axes.empty())
      std::fill(reduced.begin(), reduced.end(), true);
    for (int64_t a : axes)
      reduced[a < 0 ? a + rank : a] = true;
  }
  std::vector<Value *> extents;
  Value *count = b_.getInt64(1);
  for (int64_t dd = 0; dd < rank; ++dd)
    if (reduced[dd]) {
      extents.push_back(dim(xs[dd]));
      count = b_.CreateMul(count, extents.back());
    }
  // Operand index from the output index and the reduction loop indices.
  auto operand_index = [&](const Index &inner) {
    Index idx;
    size_t o = 0, k = 0;
    for (int64_t dd = 0; dd < rank; ++dd) {
      if (reduced[dd]) {
        idx.push_back(inner[k++]);
        if (keep)
          ++o;
      } else {
        idx.push_back(out_idx[o++]);
      }
    }
    return idx;
  };
  bool fp = is_float(d);
  if (index_result) {
    bool max = op == "argmax";
    llvm::Type *t = compute_type(ctx_, d);
    Value *best = local(t), *best_i = local(b_.getInt64Ty()), *first = local(b_.getInt1Ty());
    b_.CreateStore(b_.getInt1(true), first);
    b_.CreateStore(b_.getInt64(0), best_i);
    b_.CreateStore(llvm::Constant::getNullValue(t), best);
    loop_nest(extents, [&](const Index &inner) {
      Value *v = element(x, operand_index(inner));
      Value *bv = b_.CreateLoad(t, best);
      Value *take;
      if (fp) {
        Value *better = max ? b_.CreateFCmpOGT(v, bv) : b_.CreateFCmpOLT(v, bv);
        // The first NaN wins and stays.
        take = b_.CreateAnd(b_.CreateNot(b_.CreateFCmpUNO(bv, bv)), b_.CreateOr(b_.CreateFCmpUNO(v, v), better));
      } else {
        take = b_.CreateICmp(int_predicate(d, max ? llvm::CmpInst::ICMP_SGT : llvm::CmpInst::ICMP_SLT), v, bv);
      }
      take = b_.CreateOr(take, b_.CreateLoad(b_.getInt1Ty(), first));
      b_.CreateStore(b_.getInt1(false), first);
      b_.CreateStore(b_.CreateSelect(take, v, bv), best);
      b_.CreateStore(b_.CreateSelect(take, inner[0], b_.CreateLoad(b_.getInt64Ty(), best_i)), best_i);
    });
    return b_.CreateLoad(b_.getInt64Ty(), best_i);
  }
  if (op == "max" || op == "min") {
    bool max = op == "max";
    llvm::Type *t = compute_type(ctx_, d);
    Value *acc = local(t), *first = local(b_.getInt1Ty());
    b_.CreateStore(b_.getInt1(true), first);
    b_.CreateStore(llvm::Constant::getNullValue(t), acc);
    loop_nest(extents, [&](const Index &inner) {
      Value *v = element(x, operand_index(inner));
      Value *a = b_.CreateLoad(t, acc);
      Value *take;
      if (fp)
        take = b_.CreateAnd(b_.CreateNot(b_.CreateFCmpUNO(a, a)),
                            b_.CreateOr(b_.CreateFCmpUNO(v, v), max ? b_.CreateFCmpOGT(v, a) : b_.CreateFCmpOLT(v, a)));
      else
        take = b_.CreateICmp(int_predicate(d, max ? llvm::CmpInst::ICMP_SGT : llvm::CmpInst::ICMP_SLT), v, a);
      take = b_.CreateOr(take, b_.CreateLoad(b_.getInt1Ty(), first));
      b_.CreateStore(b_.getInt1(false), first);
      b_.CreateStore(b_.CreateSelect(take, v, a), acc);
    });
    return b_.CreateLoad(t, acc);
  }
  // sum, mean, prod: floats accumulate in double, integers in i64 (wrapping).
  bool prod = op == "prod";
  llvm::Type *acc_t = fp ? b_.getDoubleTy() : b_.getInt64Ty();
  Value *acc = local(acc_t);
  b_.CreateStore(fp ? static_cast<Value *>(llvm::ConstantFP::get(acc_t, prod ? 1.0 : 0.0))
                    : b_.getInt64(prod ? 1 : 0),
                 acc);
  llvm::FastMathFlags fmf;
  fmf.setAllowReassoc();
  loop_nest(extents, [&](const Index &inner) {
    Value *v = element(x, operand_index(inner));
    Value *a = b_.CreateLoad(acc_t, acc);
    Value *r;
    if (fp) {
      v = b_.CreateFPExt(v, acc_t);
      r = prod ? b_.CreateFMul(a, v) : b_.CreateFAdd(a, v);
      llvm::cast<llvm::Instruction>(r)->setFastMathFlags(fmf); // lets the loop vectorize
    } else {
      v = widen(v, d, acc_t);
      r = prod ? b_.CreateMul(a, v) : b_.CreateAdd(a, v);
    }
    b_.CreateStore(r, acc);
  });
  Value *result = b_.CreateLoad(acc_t, acc);
  if (op == "mean")
    result = b_.CreateFDiv(result, b_.CreateSIToFP(count, acc_t));
  llvm::Type *t = compute_type(ctx_, g_.type_of(node.results[0]).dtype);
  return fp ? b_.CreateFPTrunc(result, t) : b_.CreateTrunc(result, t);
}

Value *ElementalEmitter::reshape_element(const Node &node, size_t result, const Index &idx) {
  ValueId x = node.operands[0];
  ValueId out = node.results[result];
  // The leading dims both shapes share pass through (no arithmetic on the
  // dynamic batch); the rest is linearized in the output shape and
  // unravelled in the input shape. The index is in bounds, so the first
  // unravelled dim takes what is left: no division by it.
  const Shape &os = g_.type_of(out).shape, &xs = g_.type_of(x).shape;
  size_t same = 0;
  while (same < os.size() && same < xs.size() && os[same] == xs[same] && same + 1 < xs.size())
    ++same;
  std::vector<Value *> out_dims = dims_of(out), in_dims = dims_of(x);
  Index in(in_dims.size());
  for (size_t d = 0; d < same; ++d)
    in[d] = idx[d];
  // Map groups of dims whose sizes multiply to the same product ([24, 2, 2]
  // <-> [96], [160, 160] <-> [25600], [2W] <-> [W, 2], [H, W] <-> [H*W]),
  // each linearized and unravelled on its own, so no division spans a whole
  // tail (the vectorizer sees w + 160 * h, not (...) mod 25600). Static
  // tails compare the sizes; symbolic ones grow the side whose product
  // divides the other's (Dim::exact_div: for every value of the symbols).
  auto static_tail = [&](const Shape &s) {
    for (size_t d = same; d < s.size(); ++d)
      if (!s[d].is_static() || s[d].value() <= 0)
        return false;
    return true;
  };
  auto no_empty = [&](const Shape &s) {
    return std::none_of(s.begin() + static_cast<std::ptrdiff_t>(same), s.end(),
                        [](const Dim &d) { return d.is_static() && d.value() <= 0; });
  };
  const bool is_static = static_tail(os) && static_tail(xs);
  size_t i = same, j = same;
  bool matched = is_static || (no_empty(os) && no_empty(xs));
  while (matched && i < os.size() && j < xs.size()) {
    size_t i0 = i, j0 = j;
    if (is_static) {
      int64_t po = os[i].value(), px = xs[j].value();
      while (po != px && matched) {
        if (po < px)
          matched = ++i < os.size() && (po *= os[i].value(), true);
        else
          matched = ++j < xs.size() && (px *= xs[j].value(), true);
      }
    } else {
      Dim po = os[i], px = xs[j];
      while (po != px && matched) {
        if (px.exact_div(po))
          matched = ++i < os.size() && (po = po * os[i], true);
        else if (po.exact_div(px))
          matched = ++j < xs.size() && (px = px * xs[j], true);
        else
          matched = false;
      }
    }
    if (!matched)
      break;
    Value *group = linear_index(Index(idx.begin() + static_cast<std::ptrdiff_t>(i0), idx.begin() + static_cast<std::ptrdiff_t>(i + 1)),
                                std::vector<Value *>(out_dims.begin() + static_cast<std::ptrdiff_t>(i0),
                                                     out_dims.begin() + static_cast<std::ptrdiff_t>(i + 1)));
    for (size_t d = j; d > j0; --d) {
      in[d] = index_rem(group, in_dims[d]);
      group = index_div(group, in_dims[d]);
    }
    in[j0] = group;
    ++i;
    ++j;
  }
  if (matched) {
    for (; j < xs.size(); ++j) // trailing size-1 dims of the input
      in[j] = b_.getInt64(0);
    return element(x, in);
  }
  Value *lin = linear_index(Index(idx.begin() + static_cast<std::ptrdiff_t>(same), idx.end()),
                            std::vector<Value *>(out_dims.begin() + static_cast<std::ptrdiff_t>(same), out_dims.end()));
  for (size_t d = in_dims.size(); d-- > same;) {
    if (d == same) {
      in[d] = lin;
      break;
    }
    in[d] = b_.CreateURem(lin, in_dims[d]);
    lin = b_.CreateUDiv(lin, in_dims[d]);
  }
  return element(x, in);

}

Value *ElementalEmitter::squeeze_element(const Node &node, size_t result, const Index &idx) {
  const std::string &op = node.op;
  ValueId x = node.operands[0];
  ValueId out = node.results[result];
  const Shape &os = g_.type_of(out).shape;
  // Drop (or skip) size-1 dims: map the remaining ones in order.
  const Shape &xs = g_.type_of(x).shape;
  Index in;
  if (op == "unsqueeze") {
    std::vector<int64_t> axes = node.attrs.get_ints("axes");
    std::set<int64_t> inserted;
    for (int64_t a : axes)
      inserted.insert(a < 0 ? a + static_cast<int64_t>(os.size()) : a);
    for (size_t d = 0; d < os.size(); ++d)
      if (!inserted.count(static_cast<int64_t>(d)))
        in.push_back(idx[d]);
  } else {
    std::vector<int64_t> axes = node.attrs.get_ints("axes");
    std::set<int64_t> removed;
    for (int64_t a : axes)
      removed.insert(a < 0 ? a + static_cast<int64_t>(xs.size()) : a);
    if (axes.empty())
      for (size_t d = 0; d < xs.size(); ++d)
        if (xs[d].is_static() && xs[d].value() == 1)
          removed.insert(static_cast<int64_t>(d));
    size_t o = 0;
    for (size_t d = 0; d < xs.size(); ++d)
      in.push_back(removed.count(static_cast<int64_t>(d)) ? b_.getInt64(0) : idx[o++]);
  }
  return element(x, in);

}

Value *ElementalEmitter::transpose_element(const Node &node, size_t result, const Index &idx) {
  ValueId x = node.operands[0];
  ValueId out = node.results[result];
  const Shape &os = g_.type_of(out).shape;
  std::vector<int64_t> perm = node.attrs.get_ints("perm");
  size_t rank = os.size();
  if (perm.empty())
    for (size_t d = 0; d < rank; ++d)
      perm.push_back(static_cast<int64_t>(rank - 1 - d));
  Index in(rank);
  for (size_t d = 0; d < rank; ++d)
    in[perm[d] < 0 ? perm[d] + static_cast<int64_t>(rank) : perm[d]] = idx[d];
  return element(x, in);

}

Value *ElementalEmitter::broadcast_to_element(const Node &node, size_t result, const Index &idx) {
  ValueId x = node.operands[0];
  ValueId out = node.results[result];
  const Shape &os = g_.type_of(out).shape;
  return element(x, broadcast(x, os, idx));
}

Value *ElementalEmitter::tile_element(const Node &node, size_t result, const Index &idx) {
  ValueId x = node.operands[0];
  std::vector<Value *> in_dims = dims_of(x);
  Index in;
  for (size_t d = 0; d < idx.size(); ++d)
    in.push_back(b_.CreateURem(idx[d], in_dims[d]));
  return element(x, in);

}

Value *ElementalEmitter::slice_element(const Node &node, size_t result, const Index &idx) {
  ValueId x = node.operands[0];
  Index in = idx;
  const Shape &xs = g_.type_of(x).shape;
  std::vector<int64_t> starts = node.attrs.get_ints("starts"), ends = node.attrs.get_ints("ends"),
                       axes = node.attrs.get_ints("axes"), steps = node.attrs.get_ints("steps");
  for (size_t k = 0; k < starts.size(); ++k) {
    int64_t axis = axes.empty() ? static_cast<int64_t>(k) : axes[k];
    if (axis < 0)
      axis += static_cast<int64_t>(xs.size());
    int64_t step = steps.empty() ? 1 : steps[k];
    if (!xs[axis].is_static())
      continue; // only the full range is allowed on symbolic dims
    int64_t n = xs[axis].value(), s = starts[k];
    if (s < 0)
      s += n;
    s = step > 0 ? std::clamp<int64_t>(s, 0, n) : std::clamp<int64_t>(s, -1, n - 1);
    in[axis] = b_.CreateAdd(b_.getInt64(s), b_.CreateMul(idx[axis], b_.getInt64(step)));
  }
  return element(x, in);

}

Value *ElementalEmitter::split_element(const Node &node, size_t result, const Index &idx) {
  ValueId x = node.operands[0];
  ValueId out = node.results[result];
  const Shape &os = g_.type_of(out).shape;
  int64_t axis = node.attrs.get_int("axis");
  if (axis < 0)
    axis += static_cast<int64_t>(os.size());
  std::vector<int64_t> sizes = node.attrs.get_ints("sizes");
  int64_t offset = 0;
  for (size_t r = 0; r < result; ++r)
    offset += sizes[r];
  Index in = idx;
  in[axis] = b_.CreateAdd(idx[axis], b_.getInt64(offset));
  return element(x, in);

}

Value *ElementalEmitter::concat_element(const Node &node, size_t result, const Index &idx) {
  ValueId out = node.results[result];
  const Shape &os = g_.type_of(out).shape;
  int64_t axis = node.attrs.get_int("axis");
  if (axis < 0)
    axis += static_cast<int64_t>(os.size());
  // Every operand's element at a clamped (in-bounds) index, then select.
  Value *offset = b_.getInt64(0);
  Value *result_v = nullptr;
  for (size_t k = 0; k < node.operands.size(); ++k) {
    ValueId xk = node.operands[k];
    Value *extent = dim(g_.type_of(xk).shape[axis]);
    Value *local_i = b_.CreateSub(idx[axis], offset);
    Value *in_range = b_.CreateAnd(b_.CreateICmpSGE(local_i, b_.getInt64(0)), b_.CreateICmpSLT(local_i, extent));
    Value *clamped = b_.CreateSelect(in_range, local_i, b_.getInt64(0));
    Index in = idx;
    in[axis] = clamped;
    if (extent_is_zero(xk, axis)) {
      // nothing to read
    } else if (g_.type_of(xk).shape[axis].is_static()) {
      Value *e = element(xk, in);
      result_v = result_v ? b_.CreateSelect(in_range, e, result_v) : e;
    } else {
      // A symbolic extent may be 0 at run time: read only when in range.
      Value *otherwise = result_v ? result_v : literal(g_.type_of(out).dtype, 0.0);
      result_v = when(in_range, [&] { return element(xk, in); }, otherwise);
    }
    offset = b_.CreateAdd(offset, extent);
  }
  return result_v ? result_v : literal(g_.type_of(out).dtype, 0.0); // every operand empty

}

Value *ElementalEmitter::pad_element(const Node &node, size_t result, const Index &idx) {
  ValueId x = node.operands[0];
  ValueId out = node.results[result];
  std::vector<int64_t> pads = node.attrs.get_ints("pads");
  std::vector<Value *> in_dims = dims_of(x);
  Index in;
  Value *inside = b_.getInt1(true);
  for (size_t d = 0; d < idx.size(); ++d) {
    Value *i = b_.CreateSub(idx[d], b_.getInt64(pads[2 * d]));
    Value *ok = b_.CreateAnd(b_.CreateICmpSGE(i, b_.getInt64(0)), b_.CreateICmpSLT(i, in_dims[d]));
    inside = b_.CreateAnd(inside, ok);
    in.push_back(b_.CreateSelect(ok, i, b_.getInt64(0)));
  }
  DType d = g_.type_of(out).dtype;
  if (shape_numel(g_.type_of(x).shape) == Dim(0)) // nothing to read: all padding
    return literal(d, node.attrs.get_real("value"));
  if (!shape_is_static(g_.type_of(x).shape)) // may be empty at run time: read only inside
    return when(inside, [&] { return element(x, in); }, literal(d, node.attrs.get_real("value")));
  return b_.CreateSelect(inside, element(x, in), literal(d, node.attrs.get_real("value")));

}

Value *ElementalEmitter::gather_element(const Node &node, size_t result, const Index &idx) {
  ValueId x = node.operands[0];
  int64_t axis = node.attrs.get_int("axis");
  const Shape &xs = g_.type_of(x).shape;
  if (axis < 0)
    axis += static_cast<int64_t>(xs.size());
  ValueId ids = node.operands[1];
  size_t id_rank = g_.type_of(ids).shape.size();
  Index id_idx(idx.begin() + axis, idx.begin() + axis + static_cast<long>(id_rank));
  Value *i = widen(element(ids, id_idx), g_.type_of(ids).dtype, b_.getInt64Ty());
  Value *n = dim(xs[axis]);
  i = b_.CreateSelect(b_.CreateICmpSLT(i, b_.getInt64(0)), b_.CreateAdd(i, n), i);
  // Out-of-range indices clamp (the interpreter reports them as errors).
  i = b_.CreateSelect(b_.CreateICmpSLT(i, b_.getInt64(0)), b_.getInt64(0), i);
  i = b_.CreateSelect(b_.CreateICmpSGE(i, n), b_.CreateSub(n, b_.getInt64(1)), i);
  Index in(idx.begin(), idx.begin() + axis);
  in.push_back(i);
  in.insert(in.end(), idx.begin() + axis + static_cast<long>(id_rank), idx.end());
  // An axis of size 0 has nothing to select: the element is 0 (docs/ops.md),
  // and the operand is never read.
  if (xs[axis].is_static())
    return xs[axis].value() == 0 ? llvm::Constant::getNullValue(compute_type(ctx_, g_.type_of(x).dtype)) : element(x, in);
  llvm::Type *t = compute_type(ctx_, g_.type_of(x).dtype);
  return when(b_.CreateICmpSGT(n, b_.getInt64(0)), [&] { return element(x, in); }, llvm::Constant::getNullValue(t));
}

Value *ElementalEmitter::when(Value *cond, const std::function<Value *()> &then, Value *otherwise) {
  llvm::Function *fn = b_.GetInsertBlock()->getParent();
  auto *then_bb = llvm::BasicBlock::Create(ctx_, "when", fn);
  auto *merge = llvm::BasicBlock::Create(ctx_, "when.end", fn);
  llvm::BasicBlock *from = b_.GetInsertBlock();
  b_.CreateCondBr(cond, then_bb, merge);
  b_.SetInsertPoint(then_bb);
  Value *v = then();
  llvm::BasicBlock *then_end = b_.GetInsertBlock();
  b_.CreateBr(merge);
  b_.SetInsertPoint(merge);
  llvm::PHINode *phi = b_.CreatePHI(v->getType(), 2);
  phi->addIncoming(v, then_end);
  phi->addIncoming(otherwise, from);
  return phi;
}

bool ElementalEmitter::extent_is_zero(ValueId v, int64_t axis) {
  const Dim &d = g_.type_of(v).shape[axis];
  return d.is_static() && d.value() == 0;
}

std::array<int64_t, 4> ElementalEmitter::padding4(const Attrs &a) {
  std::vector<int64_t> p = a.get_ints("padding");
  if (p.size() == 2)
    return {p[0], p[1], p[0], p[1]};
  return {p[0], p[1], p[2], p[3]};
}

Value *ElementalEmitter::convolution(const Node &node, const Index &idx) {
  bool transposed = node.op == "conv_transpose2d";
  ValueId x = node.operands[0], w = node.operands[1];
  const Shape &xs = g_.type_of(x).shape, &ws = g_.type_of(w).shape;
  std::vector<int64_t> stride = node.attrs.get_ints("stride"), dil = node.attrs.get_ints("dilation");
  auto pad = padding4(node.attrs);
  int64_t groups = node.attrs.get_int("groups");
  int64_t C = xs[1].value(), KH = ws[2].value(), KW = ws[3].value();
  Value *H = dim(xs[2]), *W = dim(xs[3]); // symbolic H, W: read from the dims
  int64_t out_channels = g_.type_of(node.results[0]).shape[1].value();
  int64_t cin_g = C / groups, cout_g = out_channels / groups;
  Value *acc = local(b_.getDoubleTy());
  b_.CreateStore(llvm::ConstantFP::get(b_.getDoubleTy(), 0.0), acc);
  Value *n = idx[0], *o = idx[1], *oy = idx[2], *ox = idx[3];
  Value *group = b_.CreateUDiv(o, b_.getInt64(cout_g));
  Value *o_in_group = b_.CreateURem(o, b_.getInt64(cout_g));
  loop_nest({b_.getInt64(cin_g), b_.getInt64(KH), b_.getInt64(KW)}, [&](const Index &k) {
    Value *c = b_.CreateAdd(b_.CreateMul(group, b_.getInt64(cin_g)), k[0]);
    Value *iy, *ix, *ok;
    if (!transposed) {
      iy = b_.CreateAdd(b_.CreateSub(b_.CreateMul(oy, b_.getInt64(stride[0])), b_.getInt64(pad[0])),
                        b_.CreateMul(k[1], b_.getInt64(dil[0])));
      ix = b_.CreateAdd(b_.CreateSub(b_.CreateMul(ox, b_.getInt64(stride[1])), b_.getInt64(pad[1])),
                        b_.CreateMul(k[2], b_.getInt64(dil[1])));
      ok = in_bounds(iy, H, ix, W);
    } else {
      // out = in*stride - pad + k*dil  ⇒  in = (out + pad - k*dil) / stride when exact.
      Value *ty = b_.CreateSub(b_.CreateAdd(oy, b_.getInt64(pad[0])), b_.CreateMul(k[1], b_.getInt64(dil[0])));
      Value *tx = b_.CreateSub(b_.CreateAdd(ox, b_.getInt64(pad[1])), b_.CreateMul(k[2], b_.getInt64(dil[1])));
      Value *exact = b_.CreateAnd(b_.CreateICmpEQ(b_.CreateSRem(ty, b_.getInt64(stride[0])), b_.getInt64(0)),
                                  b_.CreateICmpEQ(b_.CreateSRem(tx, b_.getInt64(stride[1])), b_.getInt64(0)));
      iy = b_.CreateSDiv(ty, b_.getInt64(stride[0]));
      ix = b_.CreateSDiv(tx, b_.getInt64(stride[1]));
      ok = b_.CreateAnd(exact, in_bounds(iy, H, ix, W));
      // weight [C_in, O/groups, kh, kw]
    }
    Value *cy = b_.CreateSelect(ok, iy, b_.getInt64(0));
    Value *cx = b_.CreateSelect(ok, ix, b_.getInt64(0));
    Value *xv = element(x, {n, c, cy, cx});
    Value *wv = transposed ? element(w, {c, o_in_group, k[1], k[2]}) : element(w, {o, k[0], k[1], k[2]});
    Value *prod = b_.CreateFMul(b_.CreateFPExt(xv, b_.getDoubleTy()), b_.CreateFPExt(wv, b_.getDoubleTy()));
    Value *a = b_.CreateLoad(b_.getDoubleTy(), acc);
    b_.CreateStore(b_.CreateSelect(ok, b_.CreateFAdd(a, prod), a), acc);
  });
  Value *result = b_.CreateLoad(b_.getDoubleTy(), acc);
  if (node.operands.size() > 2)
    result = b_.CreateFAdd(result, b_.CreateFPExt(element(node.operands[2], {o}), b_.getDoubleTy()));
  return b_.CreateFPTrunc(result, compute_type(ctx_, g_.type_of(node.results[0]).dtype));
}

Value *ElementalEmitter::in_bounds(Value *y, Value *H, Value *x, Value *W) {
  return b_.CreateAnd(b_.CreateAnd(b_.CreateICmpSGE(y, b_.getInt64(0)), b_.CreateICmpSLT(y, H)),
                      b_.CreateAnd(b_.CreateICmpSGE(x, b_.getInt64(0)), b_.CreateICmpSLT(x, W)));
}

Value *ElementalEmitter::pooling(const Node &node, const Index &idx) {
  bool is_max = node.op == "max_pool2d";
  ValueId x = node.operands[0];
  const Shape &xs = g_.type_of(x).shape;
  std::vector<int64_t> kernel = node.attrs.get_ints("kernel"), stride = node.attrs.get_ints("stride");
  if (stride.empty())
    stride = kernel;
  auto pad = padding4(node.attrs);
  Value *H = dim(xs[2]), *W = dim(xs[3]);
  bool include_pad = !is_max && node.attrs.get_bool("count_include_pad");
  llvm::Type *dt = b_.getDoubleTy();
  Value *acc = local(dt), *count = local(b_.getInt64Ty());
  b_.CreateStore(llvm::ConstantFP::get(dt, is_max ? -INFINITY : 0.0), acc);
  b_.CreateStore(b_.getInt64(0), count);
  loop_nest({b_.getInt64(kernel[0]), b_.getInt64(kernel[1])}, [&](const Index &k) {
    Value *iy = b_.CreateAdd(b_.CreateSub(b_.CreateMul(idx[2], b_.getInt64(stride[0])), b_.getInt64(pad[0])), k[0]);
    Value *ix = b_.CreateAdd(b_.CreateSub(b_.CreateMul(idx[3], b_.getInt64(stride[1])), b_.getInt64(pad[1])), k[1]);
    Value *ok = in_bounds(iy, H, ix, W);
    Value *v = b_.CreateFPExt(element(x, {idx[0], idx[1], b_.CreateSelect(ok, iy, b_.getInt64(0)),
                                          b_.CreateSelect(ok, ix, b_.getInt64(0))}),
                              dt);
    Value *a = b_.CreateLoad(dt, acc);
    Value *next;
    if (is_max) // NaN propagates: once NaN, stays NaN
      next = b_.CreateSelect(b_.CreateOr(b_.CreateFCmpUNO(v, v), b_.CreateFCmpOGT(v, a)), v, a);
    else
      next = b_.CreateFAdd(a, v);
    next = b_.CreateSelect(b_.CreateFCmpUNO(a, a), a, next);
    b_.CreateStore(b_.CreateSelect(ok, next, a), acc);
    b_.CreateStore(b_.CreateAdd(b_.CreateLoad(b_.getInt64Ty(), count), b_.CreateZExt(ok, b_.getInt64Ty())), count);
  });
  Value *result = b_.CreateLoad(dt, acc);
  if (!is_max) {
    Value *divisor = include_pad ? static_cast<Value *>(llvm::ConstantFP::get(dt, double(kernel[0] * kernel[1])))
                                 : b_.CreateSIToFP(b_.CreateLoad(b_.getInt64Ty(), count), dt);
    result = b_.CreateFDiv(result, divisor);
  }
  return b_.CreateFPTrunc(result, compute_type(ctx_, g_.type_of(node.results[0]).dtype));
}

} // namespace maxc::codegen
