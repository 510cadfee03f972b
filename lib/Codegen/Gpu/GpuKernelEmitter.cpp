// The GPU kernel generator (GpuKernelEmitter.h): KernelBuilder turns one
// graph's plan — the driver's LoweringPlans entry, already refined by the
// GPU plan pass (Gpu/GpuPlan.cpp) — into kernels and a launch sequence. It
// does not plan again: the only decisions left here are how consecutive
// plan positions are launched (a row group as one row kernel, a position
// whose results are all fused as none) and each kernel's code.
#include "Gpu/GpuKernelEmitter.h"
#include "EntryPointUtil.h"

#include "Cpu/AttentionEmitter.h"
#include "ElementalEmitter.h"
#include "Gpu/GpuAttention.h"
#include "Gpu/GpuMatmul.h"
#include "Gpu/GpuPlan.h"
#include "Gpu/GpuWaveReduce.h"
#include "maxc/Codegen/GpuModelCompiler.h"
#include "maxc/Ops/OpRegistry.h"
#include "maxc/Transforms/CallSites.h"
#include "maxc/Support/Error.h"

#include <llvm/IR/Module.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

namespace maxc::codegen {

using llvm::Value;

namespace {

constexpr unsigned kElementwiseGroup = 256;
constexpr int64_t kTile = 16; // matmul: 16 x 16 outputs per workgroup, K in steps of 16

uint64_t next_pow2(uint64_t v) {
  uint64_t p = 1;
  while (p < v)
    p <<= 1;
  return p;
}

class KernelBuilder : public ElementalEmitter, private GemmPhaseBuilder {
public:
  /// `constant_params`: per input of `g` (a subgraph), true when every
  /// call site binds it to a constant (constant_bound_inputs, Transforms/CallSites.h).
  /// `plan`: g's, refined by the GPU plan pass (gpu_plan_options).
  KernelBuilder(llvm::Module &module, const Graph &g, const LoweringPlan &plan, std::string prefix, std::string tag,
                const std::vector<std::string> &symbols, std::string arch, std::vector<bool> constant_params = {})
      : ElementalEmitter(module, g, plan, symbols), prefix_(std::move(prefix)), tag_(std::move(tag)),
        arch_(std::move(arch)), constant_params_(std::move(constant_params)) {}

  GpuGraphProgram build() {
    for (const auto &[matmul, views] : plan_.stored_through)
      for (size_t c : views)
        stored_through_[matmul].push_back(&g_.nodes()[c]);
    made_by_matmul_ = stored_by_matmuls(g_, plan_);
    GpuGraphProgram program;
    program.graph = &g_;
    program.tag = tag_;
    for (size_t i = 0; i < plan_.kernels.size(); ++i) {
      const Node &node = g_.nodes()[plan_.kernels[i]];
      if (defines_symbol(node))
        for (const Node &reader : g_.nodes())
          if (std::find(reader.operands.begin(), reader.operands.end(), node.results[0]) != reader.operands.end())
            throw Error(ErrorCode::InvalidGraph, "gpu codegen: the value of symbol '" + defined_symbol(node) +
                                                     "' is read as a tensor by node '" + reader.op +
                                                     "'; on the GPU a symbol's definition only sets the dim "
                                                     "(read the operand it was defined from instead)");
      if (has_bodies(node.op) || defines_symbol(node) || op_traits(node.op).has(OpTrait::communicates)) {
        // host code: a call, a branch, a loop, a symbol's store, a collective
        program.items.push_back({-1, &node});
        continue;
      }
      if (op_traits(node.op).has(OpTrait::aliases_operand)) { // a view of a state buffer: its storage
        if (writes_buffer(node)) {
          program.items.push_back({static_cast<int>(program.kernels.size()), nullptr});
          program.kernels.push_back(buffer_write_kernel(node));
        }
        continue;
      }
      if (std::vector<const Node *> group = row_group(g_, plan_, i); group.size() > 1) {
        program.items.push_back({static_cast<int>(program.kernels.size()), nullptr});
        program.kernels.push_back(row_kernel(group));
        std::set<ValueId> written;
        for (const Node *n : group)
          written.insert(n->results.begin(), n->results.end());
        program.kernels.back().constant_inputs = reads_only_constants(program.kernels.back(), written);
        i += group.size() - 1;
        continue;
      }
      std::set<ValueId> written(node.results.begin(), node.results.end());
      if (auto e = plan_.epilogues.find(plan_.kernels[i]); e != plan_.epilogues.end())
        written.insert(e->second);
      if (auto t = stored_through_.find(plan_.kernels[i]); t != stored_through_.end())
        written.insert(t->second.back()->results.begin(), t->second.back()->results.end());
      for (GpuKernel &k : kernels_for(node)) {
        k.constant_inputs = reads_only_constants(k, written);
        program.items.push_back({static_cast<int>(program.kernels.size()), nullptr});
        program.kernels.push_back(std::move(k));
      }
    }
    for (const auto &[out, v] : plan_.output_copies) {
      program.items.push_back({static_cast<int>(program.kernels.size()), nullptr});
      program.kernels.push_back(copy_kernel(v, static_cast<int>(out)));
      program.kernels.back().constant_inputs = reads_only_constants(program.kernels.back(), {});
    }
    for (GpuKernel &k : program.kernels)
      annotate_buffers(k);
    program.plan = plan_;
    return program;
  }

protected:
  Value *pointer_of(ValueId v) override { return buffer_pointer({v, -1}); }

private:
  /// noalias and alignment of a kernel's buffers from where they live.
  void annotate_buffers(GpuKernel &k) {
    std::map<size_t, int> slot_uses;
    for (const KernelBuffer &b : k.buffers)
      if (b.output < 0 && plan_.values[b.value].storage == Storage::temp)
        ++slot_uses[plan_.values[b.value].index];
    for (const KernelBuffer &b : k.buffers) {
      Storage where = b.output >= 0 ? Storage::output : plan_.values[b.value].storage;
      bool temp = where == Storage::temp, weight = where == Storage::constant;
      k.buffer_noalias.push_back(weight || (temp && slot_uses[plan_.values[b.value].index] == 1));
      k.buffer_align.push_back(temp || weight ? 16 : 0);
    }
  }

  /// A value every run of this graph sees with the same contents: a
  /// constant, or a subgraph parameter every call site binds to one.
  bool constant_value(ValueId v) const { return codegen::constant_value(plan_, constant_params_, v); }

  /// True when every buffer kernel `k` reads holds a constant value (or it
  /// reads none): its results would be the same on every run.
  bool reads_only_constants(const GpuKernel &k, const std::set<ValueId> &written) {
    for (const KernelBuffer &b : k.buffers)
      if (b.output < 0 && !written.count(b.value) && !constant_value(b.value))
        return false;
    return true;
  }

  // ---- kernels and phases ----

  GpuKernel &begin_kernel(const std::string &kind, unsigned workgroup_size) {
    kernel_ = GpuKernel{};
    kernel_.name = prefix_ + "." + tag_ + ".k" + std::to_string(counter_++);
    kernel_.kind = kind;
    kernel_.workgroup_size = workgroup_size;
    phases_ = 0;
    return kernel_;
  }

  /// Starts a phase function; the elemental emitter's builders point into it.
  llvm::Function *begin_phase() {
    llvm::Type *ptr = b_.getPtrTy(), *i64 = b_.getInt64Ty();
    auto *fn = begin_helper(llvm::FunctionType::get(b_.getVoidTy(), {ptr, ptr, i64, i64, ptr, ptr, i64}, false),
                            ".phase");
    workgroup_ = fn->getArg(2);
    local_id_ = fn->getArg(3);
    lds_ = fn->getArg(4);
    state_ = fn->getArg(5);
    iteration_ = fn->getArg(6);
    return fn;
  }

  /// An always-inline internal function NAME<suffix><n> of `type` whose
  /// first two arguments are the buffers and the dims; the builders point
  /// into it.
  llvm::Function *begin_helper(llvm::FunctionType *type, const char *suffix) {
    auto *fn = llvm::Function::Create(type, llvm::GlobalValue::InternalLinkage,
                                      kernel_.name + suffix + std::to_string(phases_++), module_);
    fn->addFnAttr(llvm::Attribute::AlwaysInline);
    fn->addFnAttr(llvm::Attribute::NoUnwind);
    start_function(fn);
    buffers_ = fn->getArg(0);
    begin_function(fn->getArg(1));
    return fn;
  }

  void start_function(llvm::Function *fn) {
    auto *entry = llvm::BasicBlock::Create(ctx_, "entry", fn);
    auto *body = llvm::BasicBlock::Create(ctx_, "body", fn);
    entry_b_.SetInsertPoint(entry);
    entry_b_.SetInsertPoint(entry_b_.CreateBr(body));
    b_.SetInsertPoint(body);
    pointers_.clear();
  }

  KernelStep end_phase(llvm::Function *fn) {
    b_.CreateRetVoid();
    return KernelStep{fn, nullptr, {}, 0, {}, {}};
  }

  /// A loop step whose trip count is `trips` (evaluated from the dims).
  KernelStep loop_step(const Dim &extent, int64_t divisor, std::vector<KernelStep> body) {
    llvm::Type *ptr = b_.getPtrTy();
    auto *fn = begin_helper(llvm::FunctionType::get(b_.getInt64Ty(), {ptr, ptr}, false), ".trips");
    b_.CreateRet(ceil_div(dim(extent), divisor));
    return KernelStep{nullptr, fn, std::move(body), 0, {}, {}};
  }

  Value *ceil_div(Value *x, int64_t d) {
    if (d == 1)
      return x;
    return b_.CreateUDiv(b_.CreateAdd(x, b_.getInt64(d - 1)), b_.getInt64(d));
  }

  /// The pointer of a kernel buffer: slot in the buffer table, loaded once
  /// per phase in its entry block.
  Value *buffer_pointer(const KernelBuffer &buffer) {
    auto it = std::find(kernel_.buffers.begin(), kernel_.buffers.end(), buffer);
    size_t slot = static_cast<size_t>(it - kernel_.buffers.begin());
    if (it == kernel_.buffers.end())
      kernel_.buffers.push_back(buffer);
    if (auto p = pointers_.find(slot); p != pointers_.end())
      return p->second;
    Value *at = entry_b_.CreateConstGEP1_64(entry_b_.getPtrTy(), buffers_, slot);
    return pointers_[slot] = entry_b_.CreateLoad(entry_b_.getPtrTy(), at);
  }

  /// if (cond) body(); at the current insertion point.
  void if_then(Value *cond, const std::function<void()> &body) { emit_if(b_, cond, body); }

  /// Row-major multi-index of linear position `lin` in `dims`. Every
  /// caller passes an in-bounds position (lin < product of dims), so the
  /// outermost index is what is left: no division by the outermost dim
  /// (often the dynamic batch, a 64-bit division on the GPU).
  Index unravel(Value *lin, const std::vector<Value *> &dims) {
    Index idx(dims.size());
    for (size_t d = dims.size(); d-- > 1;) {
      idx[d] = b_.CreateURem(lin, dims[d]);
      lin = b_.CreateUDiv(lin, dims[d]);
    }
    if (!dims.empty())
      idx[0] = lin;
    return idx;
  }

  Value *global_id() {
    return b_.CreateAdd(b_.CreateMul(workgroup_, b_.getInt64(kernel_.workgroup_size)), local_id_);
  }

  std::vector<GpuKernel> kernels_for(const Node &node) {
    std::vector<GpuKernel> out;
    std::string kind = gpu_kernel_kind(node.op);
    if (kind == "matmul") {
      out.push_back(matmul_kernel(node));
      return out;
    }
    if (kind == "conv2d") {
      out.push_back(conv_kernel(node));
      return out;
    }
    if (kind == "reduction") {
      out.push_back(reduction_kernel(node));
      return out;
    }
    if (kind == "attention") {
      out.push_back(attention_kernel(node));
      return out;
    }
    if (kind != "elementwise")
      throw Error(ErrorCode::Internal, "gpu: no kernel for op '" + node.op + "'");
    for (size_t r = 0; r < node.results.size(); ++r)
      if (plan_.values[node.results[r]].storage != Storage::fused && !made_by_matmul_.count(node.results[r]))
        out.push_back(elementwise_kernel(node, r));
    return out;
  }

  // ---- one work-item per output element ----

  /// A kernel of `kind` with one work-item per element of `v` (its
  /// multi-index `idx`, linear position `gid`): `body(idx, gid)`.
  GpuKernel per_element_kernel(const char *kind, ValueId v, const std::function<void(const Index &, Value *)> &body) {
    begin_kernel(kind, kElementwiseGroup);
    Dim numel = shape_numel(g_.type_of(v).shape);
    kernel_.grid = {{numel, kElementwiseGroup}};
    llvm::Function *fn = begin_phase();
    Value *gid = global_id();
    if_then(b_.CreateICmpULT(gid, dim(numel)), [&] { body(unravel(gid, dims_of(v)), gid); });
    kernel_.steps.push_back(end_phase(fn));
    return std::move(kernel_);
  }

  /// Every elemental op, pooling, transposed convolution, argmax/argmin (a
  /// sequential loop per element) and the shape ops.
  GpuKernel elementwise_kernel(const Node &node, size_t r) {
    ValueId v = node.results[r];
    return per_element_kernel("elementwise", v, [&](const Index &idx, Value *gid) {
      store_element(g_.type_of(v).dtype, pointer_of(v), gid, node_element(node, r, idx));
    });
  }

  /// A graph output that lives elsewhere (an input, a constant, another
  /// output, a view of a state buffer): copied element by element into the
  /// caller's output buffer.
  GpuKernel copy_kernel(ValueId v, int output) {
    return per_element_kernel("copy", v, [&](const Index &idx, Value *gid) {
      store_element(g_.type_of(v).dtype, buffer_pointer({0, output}), gid, element(v, idx));
    });
  }

  /// buffer_append: one work-item per element of the new rows, stored at
  /// rows [offset, offset + n) of the state buffer, which is the result's
  /// storage (aliases_operand: the caller's device buffer, written in place).
  GpuKernel buffer_write_kernel(const Node &node) {
    ValueId x = node.operands[1], out = node.results[0];
    return per_element_kernel("state", x, [&](const Index &idx, Value *) {
      Index at = idx;
      at[0] = b_.CreateAdd(idx[0], dim(node.attrs.get_shape("offset")[0]));
      store_element(g_.type_of(x).dtype, pointer_of(out), linear_index(at, dims_of(out)), element(x, idx));
    });
  }

  // ---- reductions: one workgroup per output element ----

  /// The operand index for output index `out_idx` and reduced index `inner`.
  Index reduction_operand_index(const ReductionShape &s, const Index &out_idx, const Index &inner) {
    Index idx;
    size_t o = 0, k = 0;
    for (size_t d = 0; d < s.reduced.size(); ++d) {
      if (s.reduced[d]) {
        idx.push_back(inner[k++]);
        if (s.keepdims)
          ++o;
      } else {
        idx.push_back(out_idx[o++]);
      }
    }
    return idx;
  }

  struct Combiner {
    llvm::Type *type;
    Value *identity;
    std::function<Value *(Value *, Value *)> combine;
  };

  /// The accumulation of sum/mean/prod (floats in their compute type: f32
  /// for f32/f16/bf16, f64 for f64; integers in i64, as the CPU backend and
  /// the reference) and max/min (in the compute
  /// type; NaN propagates, the identity is -inf/+inf or the integer extreme).
  Combiner combiner(const std::string &op, DType d) {
    bool fp = is_float(d);
    if (op == "max" || op == "min") {
      bool max = op == "max";
      llvm::Type *t = compute_type(ctx_, d);
      Value *identity;
      if (fp)
        identity = llvm::ConstantFP::getInfinity(t, max);
      else if (is_signed(d))
        identity = llvm::ConstantInt::get(t, max ? llvm::APInt::getSignedMinValue(t->getIntegerBitWidth())
                                                 : llvm::APInt::getSignedMaxValue(t->getIntegerBitWidth()));
      else
        identity = llvm::ConstantInt::get(t, max ? llvm::APInt::getMinValue(t->getIntegerBitWidth())
                                                 : llvm::APInt::getMaxValue(t->getIntegerBitWidth()));
      return {t, identity, [this, fp, max, d](Value *a, Value *v) -> Value * {
                if (!fp)
                  return b_.CreateSelect(
                      b_.CreateICmp(int_predicate(d, max ? llvm::CmpInst::ICMP_SGT : llvm::CmpInst::ICMP_SLT), v, a), v, a);
                Value *take = b_.CreateAnd(b_.CreateNot(b_.CreateFCmpUNO(a, a)),
                                           b_.CreateOr(b_.CreateFCmpUNO(v, v),
                                                       max ? b_.CreateFCmpOGT(v, a) : b_.CreateFCmpOLT(v, a)));
                return b_.CreateSelect(take, v, a);
              }};
    }
    bool prod = op == "prod";
    // f32 (and f16/bf16, computed in f32) accumulate in f32, f64 in f64;
    // the reference accumulates in double (docs/GPU.md says what that costs).
    llvm::Type *t = accumulator_type(ctx_, d);
    Value *identity = fp ? static_cast<Value *>(llvm::ConstantFP::get(t, prod ? 1.0 : 0.0))
                         : llvm::ConstantInt::get(t, prod ? 1 : 0);
    return {t, identity, [this, fp, prod](Value *a, Value *v) -> Value * {
              if (fp)
                return prod ? b_.CreateFMul(a, v) : b_.CreateFAdd(a, v);
              return prod ? b_.CreateMul(a, v) : b_.CreateAdd(a, v);
            }};
  }

  /// An operand element widened to the accumulation type.
  Value *to_accumulator(const std::string &op, DType d, llvm::Type *acc, Value *v) {
    if (op == "max" || op == "min")
      return v;
    return widen(v, d, acc);
  }

  /// Work-items per workgroup of a reduction over `count` elements.
  static unsigned reduction_group(const Dim &count) {
    if (!count.is_static())
      return kElementwiseGroup;
    return static_cast<unsigned>(
        std::clamp<uint64_t>(next_pow2(static_cast<uint64_t>(count.value())), 1, kElementwiseGroup));
  }

  GpuKernel reduction_kernel(const Node &node) {
    ReductionShape shape = reduction_shape(g_, node);
    begin_kernel("reduction", reduction_group(shape.count));
    kernel_.grid = {{shape_numel(g_.type_of(node.results[0]).shape), 1}};
    reduction_phases(node);
    return std::move(kernel_);
  }

  /// The reduction's combine as an always-inline function T (T, T), for
  /// wave-level steps (GpuWaveReduce.h).
  llvm::Function *combine_function(const std::string &op, DType d) {
    Combiner c = combiner(op, d);
    auto *fn = llvm::Function::Create(llvm::FunctionType::get(c.type, {c.type, c.type}, false),
                                      llvm::GlobalValue::InternalLinkage,
                                      kernel_.name + ".combine" + std::to_string(phases_++), module_);
    fn->addFnAttr(llvm::Attribute::AlwaysInline);
    fn->addFnAttr(llvm::Attribute::NoUnwind);
    llvm::IRBuilderBase::InsertPointGuard guard(b_);
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn));
    b_.CreateRet(c.combine(fn->getArg(0), fn->getArg(1)));
    return fn;
  }

  /// The phases of a reduction whose output element is the workgroup's
  /// number: strided partials, then on AMD GPUs a wave-level butterfly
  /// (no barrier) and the waves' totals through LDS, elsewhere (NVPTX, the
  /// arch-neutral kernels) a tree over LDS with one barrier per level;
  /// work-item 0 stores.
  void reduction_phases(const Node &node) {
    ValueId x = node.operands[0], out = node.results[0];
    DType d = g_.type_of(x).dtype, out_d = g_.type_of(out).dtype;
    ReductionShape shape = reduction_shape(g_, node);
    unsigned group = kernel_.workgroup_size;
    unsigned wave = starts_with_gfx(arch_) ? amdgpu_wave_size(arch_) : 0;
    unsigned waves = wave ? (group + wave - 1) / wave : 0;
    kernel_.lds_bytes = std::max<uint64_t>(kernel_.lds_bytes, uint64_t(wave ? waves : group) * 8);
    if (wave)
      kernel_.state_bytes = std::max<uint64_t>(kernel_.state_bytes, 8);
    const std::string &op = node.op;

    // Phase 1: each work-item folds elements lid, lid + group, ... into LDS
    // (the tree) or its state (the wave butterfly).
    {
      llvm::Function *fn = begin_phase();
      Combiner c = combiner(op, d);
      Index out_idx = unravel(workgroup_, dims_of(out));
      std::vector<Value *> extents;
      for (const Dim &e : shape.extents)
        extents.push_back(dim(e));
      Value *count = dim(shape.count);
      Value *trips = b_.CreateUDiv(b_.CreateSub(b_.CreateAdd(count, b_.getInt64(group)), b_.CreateAdd(local_id_, b_.getInt64(1))),
                                   b_.getInt64(group));
      Value *acc = local(c.type);
      b_.CreateStore(c.identity, acc);
      loop(trips, [&](Value *t) {
        Value *i = b_.CreateAdd(local_id_, b_.CreateMul(t, b_.getInt64(group)));
        Value *v = element(x, reduction_operand_index(shape, out_idx, unravel(i, extents)));
        b_.CreateStore(c.combine(b_.CreateLoad(c.type, acc), to_accumulator(op, d, c.type, v)), acc);
      });
      b_.CreateStore(b_.CreateLoad(c.type, acc), wave ? state_ : b_.CreateGEP(c.type, lds_, local_id_));
      kernel_.steps.push_back(end_phase(fn));
    }
    if (wave) {
      // Each wave's lanes combine their partials (every lane gets the
      // wave's total), then each wave's first lane puts it in LDS.
      KernelStep reduce;
      reduce.wave_reduces.push_back({0, combine_function(op, d), std::min(group, wave), wave});
      kernel_.steps.push_back(std::move(reduce));
      llvm::Function *fn = begin_phase();
      Combiner c = combiner(op, d);
      if_then(b_.CreateICmpEQ(b_.CreateAnd(local_id_, b_.getInt64(wave - 1)), b_.getInt64(0)), [&] {
        b_.CreateStore(b_.CreateLoad(c.type, state_),
                       b_.CreateGEP(c.type, lds_, b_.CreateLShr(local_id_, b_.getInt64(llvm::Log2_32(wave)))));
      });
      kernel_.steps.push_back(end_phase(fn));
    }
    // Else a tree over LDS, one barrier-separated phase per level.
    for (unsigned stride = group / 2; !wave && stride >= 1; stride /= 2) {
      llvm::Function *fn = begin_phase();
      Combiner c = combiner(op, d);
      if_then(b_.CreateICmpULT(local_id_, b_.getInt64(stride)), [&] {
        Value *mine = b_.CreateGEP(c.type, lds_, local_id_);
        Value *other = b_.CreateGEP(c.type, lds_, b_.CreateAdd(local_id_, b_.getInt64(stride)));
        b_.CreateStore(c.combine(b_.CreateLoad(c.type, mine), b_.CreateLoad(c.type, other)), mine);
      });
      kernel_.steps.push_back(end_phase(fn));
    }
    // Work-item 0 finishes (mean divides, narrowing, rounding) and stores.
    {
      llvm::Function *fn = begin_phase();
      Combiner c = combiner(op, d);
      if_then(b_.CreateICmpEQ(local_id_, b_.getInt64(0)), [&] {
        Value *result = b_.CreateLoad(c.type, lds_);
        for (unsigned w = 1; w < waves; ++w) // the waves' totals, in wave order
          result = c.combine(result, b_.CreateLoad(c.type, b_.CreateConstGEP1_64(c.type, lds_, w)));
        Value *count = dim(shape.count);
        llvm::Type *t = compute_type(ctx_, out_d);
        if (op == "mean")
          result = b_.CreateFDiv(result, b_.CreateSIToFP(count, c.type));
        if (op == "max" || op == "min") // nothing to reduce: 0, as the CPU loop
          result = b_.CreateSelect(b_.CreateICmpEQ(count, b_.getInt64(0)), llvm::Constant::getNullValue(t), result);
        else if (is_float(d))
          result = b_.CreateFPTrunc(result, t);
        else
          result = b_.CreateTrunc(result, t);
        if (is_float(out_d))
          result = round_to(out_d, result);
        store_element(out_d, pointer_of(out), workgroup_, result);
      });
      kernel_.steps.push_back(end_phase(fn));
    }
  }

  // ---- row kernels: a last-axis reduction and what follows it per row ----


  /// One workgroup per row: each node of `group` in turn, barriers between
  /// (a node reads what the group's earlier nodes stored for this row).
  GpuKernel row_kernel(const std::vector<const Node *> &group) {
    Rows rows;
    last_axis_reduction(g_, *group.front(), &rows);
    begin_kernel("row", reduction_group(rows.length));
    kernel_.grid = {{shape_numel(rows.outer), 1}};
    unsigned size = kernel_.workgroup_size;
    for (const Node *node : group) {
      if (gpu_kernel_kind(node->op) == "reduction") {
        reduction_phases(*node);
        continue;
      }
      ValueId v = node->results[0];
      DType d = g_.type_of(v).dtype;
      llvm::Function *fn = begin_phase();
      if (rows.per_row(g_.type_of(v).shape) && !(g_.type_of(v).shape == rows.full())) {
        if_then(b_.CreateICmpEQ(local_id_, b_.getInt64(0)), [&] {
          store_element(d, pointer_of(v), workgroup_, node_element(*node, 0, unravel(workgroup_, dims_of(v))));
        });
      } else {
        Value *length = dim(rows.length);
        Value *trips = b_.CreateUDiv(b_.CreateSub(b_.CreateAdd(length, b_.getInt64(size)),
                                                  b_.CreateAdd(local_id_, b_.getInt64(1))),
                                     b_.getInt64(size));
        loop(trips, [&](Value *t) {
          Value *j = b_.CreateAdd(local_id_, b_.CreateMul(t, b_.getInt64(size)));
          Value *lin = b_.CreateAdd(b_.CreateMul(workgroup_, length), j);
          store_element(d, pointer_of(v), lin, node_element(*node, 0, unravel(lin, dims_of(v))));
        });
      }
      kernel_.steps.push_back(end_phase(fn));
    }
    return std::move(kernel_);
  }

  // ---- tiled matmul (LDS), shared by matmul and conv2d (implicit GEMM) ----

  /// C[b, i, j] = sum_k A(b, i, k) * B(b, k, j) over a batch of `batch`
  /// M x N outputs: a 16 x 16 tile per workgroup, K in tiles of 16 staged
  /// through LDS. The loaders are called only in bounds and return values
  /// of the accumulation type; store gets the final accumulator.
  using TiledGemm = GemmSpec;

  // GemmPhaseBuilder: the matrix-core GEMM's access to this kernel (GpuMatmul.cpp).
  llvm::IRBuilder<> &gemm_builder() override { return b_; }
  GpuKernel &gemm_kernel() override { return kernel_; }
  llvm::Function *gemm_begin_phase() override { return begin_phase(); }
  KernelStep gemm_end_phase(llvm::Function *fn) override { return end_phase(fn); }
  KernelStep gemm_loop_step(const Dim &extent, int64_t divisor, std::vector<KernelStep> body) override {
    return loop_step(extent, divisor, std::move(body));
  }
  Value *gemm_dim(const Dim &d) override { return dim(d); }
  Value *gemm_workgroup() override { return workgroup_; }
  Value *gemm_local_id() override { return local_id_; }
  Value *gemm_lds() override { return lds_; }
  Value *gemm_state() override { return state_; }
  Value *gemm_iteration() override { return iteration_; }
  Value *gemm_when(Value *cond, const std::function<Value *()> &then, Value *otherwise) override {
    return when(cond, then, otherwise);
  }
  void gemm_if(Value *cond, const std::function<void()> &then) override { if_then(cond, then); }

  Value *zero_of(llvm::Type *t) { return llvm::Constant::getNullValue(t); }

  Value *multiply_add(Value *acc, Value *x, Value *y) {
    if (!acc->getType()->isFloatingPointTy())
      return b_.CreateAdd(acc, b_.CreateMul(x, y));
    return b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {acc->getType()}, {x, y, acc});
  }

  void tiled_gemm(const TiledGemm &gm) {
    // AMD and NVIDIA GPUs: 64 x 64 macro-tiles, on matrix cores where the
    // arch has an instruction for the dtype (the same grid on every arch of
    // a build: an NVIDIA build's sms all take this kernel).
    // NVIDIA: only GEMMs big enough to fill the GPU with macro-tiles.
    bool nvidia = nvidia_sm(arch_) > 0 && nvidia_gemm_fills_macro_tiles(gm, arch_);
    if ((starts_with_gfx(arch_) || nvidia) && (gm.dtype == DType::f32 || gm.dtype == DType::f16 || gm.dtype == DType::bf16))
      return emit_matrix_core_gemm(*this, gm, matrix_core_for(arch_, gm.dtype), scalar_micro_tile_for(arch_, gm.dtype));
    kernel_.grid = {{gm.batch, 1}, {gm.m, kTile}, {gm.n, kTile}};
    uint64_t elem = gm.acc_type->getPrimitiveSizeInBits() / 8;
    kernel_.lds_bytes = 2 * kTile * kTile * elem;
    kernel_.state_bytes = 8;
    llvm::Type *t = gm.acc_type;
    // Where this work-item's output is: batch, row, column.
    auto coordinates = [&](Value *&batch, Value *&row, Value *&col) {
      Value *tiles_n = ceil_div(dim(gm.n), kTile), *tiles_m = ceil_div(dim(gm.m), kTile);
      Value *tn = b_.CreateURem(workgroup_, tiles_n);
      Value *rest = b_.CreateUDiv(workgroup_, tiles_n);
      bool single = gm.batch == Dim(1); // then `rest` is the row tile: no division by a dynamic tile count
      Value *tm = single ? rest : b_.CreateURem(rest, tiles_m);
      batch = single ? b_.getInt64(0) : b_.CreateUDiv(rest, tiles_m);
      Value *ty = b_.CreateUDiv(local_id_, b_.getInt64(kTile)), *tx = b_.CreateURem(local_id_, b_.getInt64(kTile));
      row = b_.CreateAdd(b_.CreateMul(tm, b_.getInt64(kTile)), ty);
      col = b_.CreateAdd(b_.CreateMul(tn, b_.getInt64(kTile)), tx);
    };
    {
      llvm::Function *fn = begin_phase();
      b_.CreateStore(zero_of(t), state_);
      kernel_.steps.push_back(end_phase(fn));
    }
    std::vector<KernelStep> body;
    {
      // Stage A[row, kt*16 + tx] and B[kt*16 + ty, col] (zeros outside).
      llvm::Function *fn = begin_phase();
      Value *batch, *row, *col;
      coordinates(batch, row, col);
      Value *ty = b_.CreateUDiv(local_id_, b_.getInt64(kTile)), *tx = b_.CreateURem(local_id_, b_.getInt64(kTile));
      Value *k0 = b_.CreateMul(iteration_, b_.getInt64(kTile));
      Value *ka = b_.CreateAdd(k0, tx), *kb = b_.CreateAdd(k0, ty);
      Value *m = dim(gm.m), *n = dim(gm.n), *k = dim(gm.k);
      Value *a_ok = b_.CreateAnd(b_.CreateICmpULT(row, m), b_.CreateICmpULT(ka, k));
      Value *b_ok = b_.CreateAnd(b_.CreateICmpULT(kb, k), b_.CreateICmpULT(col, n));
      Value *a = when(a_ok, [&] { return gm.load_a(batch, row, ka); }, zero_of(t));
      Value *bv = when(b_ok, [&] { return gm.load_b(batch, kb, col); }, zero_of(t));
      b_.CreateStore(a, b_.CreateGEP(t, lds_, local_id_));
      b_.CreateStore(bv, b_.CreateGEP(t, lds_, b_.CreateAdd(local_id_, b_.getInt64(kTile * kTile))));
      body.push_back(end_phase(fn));
    }
    {
      llvm::Function *fn = begin_phase();
      Value *ty = b_.CreateUDiv(local_id_, b_.getInt64(kTile)), *tx = b_.CreateURem(local_id_, b_.getInt64(kTile));
      Value *acc = local(t);
      b_.CreateStore(b_.CreateLoad(t, state_), acc);
      loop(b_.getInt64(kTile), [&](Value *kk) {
        Value *a = b_.CreateLoad(t, b_.CreateGEP(t, lds_, b_.CreateAdd(b_.CreateMul(ty, b_.getInt64(kTile)), kk)));
        Value *bv = b_.CreateLoad(
            t, b_.CreateGEP(t, lds_, b_.CreateAdd(b_.getInt64(kTile * kTile), b_.CreateAdd(b_.CreateMul(kk, b_.getInt64(kTile)), tx))));
        b_.CreateStore(multiply_add(b_.CreateLoad(t, acc), a, bv), acc);
      });
      b_.CreateStore(b_.CreateLoad(t, acc), state_);
      body.push_back(end_phase(fn));
    }
    kernel_.steps.push_back(loop_step(gm.k, kTile, std::move(body)));
    {
      llvm::Function *fn = begin_phase();
      Value *batch, *row, *col;
      coordinates(batch, row, col);
      Value *ok = b_.CreateAnd(b_.CreateICmpULT(row, dim(gm.m)), b_.CreateICmpULT(col, dim(gm.n)));
      ok = b_.CreateAnd(ok, b_.CreateICmpULT(batch, dim(gm.batch)));
      if_then(ok, [&] { gm.store(batch, row, col, b_.CreateLoad(t, state_)); });
      kernel_.steps.push_back(end_phase(fn));
    }
  }

  /// An accumulator back to the compute type of `d`, rounded like an op result.
  Value *from_accumulator(Value *acc, DType d) {
    llvm::Type *t = compute_type(ctx_, d);
    Value *v = acc;
    if (acc->getType() != t)
      v = is_float(d) ? b_.CreateFPTrunc(acc, t) : b_.CreateTrunc(acc, t);
    return is_float(d) ? round_to(d, v) : v;
  }

  /// Linear batch index → the batch index of an operand (broadcast dims: 0).
  Index operand_batch(const Shape &operand, const Shape &result, Value *batch_linear) {
    std::vector<Value *> batch_dims;
    for (size_t d = 0; d + 2 < result.size(); ++d)
      batch_dims.push_back(dim(result[d]));
    Index bidx = unravel(batch_linear, batch_dims);
    return batch_index(operand, result, bidx);
  }

  /// Stores a matmul/conv result element — or, when the plan gives the node
  /// a GEMM epilogue, the chain's value at that index (the matmul value is
  /// the accumulator there), into the chain's stored value.
  void store_gemm_result(const Node &node, const Index &idx, Value *linear, Value *value) {
    ValueId out = node.results[0];
    if (auto views = stored_through_.find(static_cast<size_t>(&node - g_.nodes().data()));
        views != stored_through_.end()) {
      // The element's index through the views: a transpose permutes it, a
      // reshape keeps the row-major linear position.
      Index at = idx;
      ValueId v = out;
      for (const Node *c : views->second) {
        if (c->op == "transpose") {
          std::vector<int64_t> perm = c->attrs.get_ints("perm");
          if (perm.empty()) // no perm: reversed
            for (size_t d = 0; d < at.size(); ++d)
              perm.push_back(static_cast<int64_t>(at.size() - 1 - d));
          Index moved;
          for (int64_t k : perm)
            moved.push_back(at[static_cast<size_t>(k < 0 ? k + static_cast<int64_t>(at.size()) : k)]);
          at = moved;
        } else {
          at = unravel(linear_index(at, dims_of(v)), dims_of(c->results[0]));
        }
        v = c->results[0];
      }
      store_element(g_.type_of(v).dtype, pointer_of(v), linear_index(at, dims_of(v)), value);
      return;
    }
    auto epilogue = plan_.epilogues.find(static_cast<size_t>(&node - g_.nodes().data()));
    if (epilogue == plan_.epilogues.end()) {
      store_element(g_.type_of(out).dtype, pointer_of(out), linear, value);
      return;
    }
    ValueId r = epilogue->second;
    element_overrides_[out] = value;
    const ValueInfo &info = g_.value_info(r);
    Value *v = node_element(g_.nodes()[info.producer], info.index, idx);
    element_overrides_.erase(out);
    store_element(g_.type_of(r).dtype, pointer_of(r), linear, v);
  }

  GpuKernel matmul_kernel(const Node &node) {
    ValueId a = node.operands[0], bm = node.operands[1], out = node.results[0];
    bool ta = node.attrs.get_bool("transpose_a"), tb = node.attrs.get_bool("transpose_b");
    const Shape &cs = g_.type_of(out).shape, &as = g_.type_of(a).shape, &bs = g_.type_of(bm).shape;
    DType d = g_.type_of(out).dtype;
    begin_kernel("matmul", kTile * kTile);
    Dim batch(1);
    for (size_t i = 0; i + 2 < cs.size(); ++i)
      batch = batch * cs[i];
    TiledGemm gm;
    gm.batch = batch;
    gm.m = cs[cs.size() - 2];
    gm.n = cs.back();
    gm.k = ta ? as[as.size() - 2] : as.back();
    gm.dtype = d;
    gm.acc_type = accumulator_type(ctx_, d);
    gm.load_a = [&](Value *bl, Value *i, Value *k) {
      Index idx = operand_batch(as, cs, bl);
      idx.push_back(ta ? k : i);
      idx.push_back(ta ? i : k);
      return widen(element(a, idx), d, gm.acc_type);
    };
    gm.load_b = [&](Value *bl, Value *k, Value *j) {
      Index idx = operand_batch(bs, cs, bl);
      idx.push_back(tb ? j : k);
      idx.push_back(tb ? k : j);
      return widen(element(bm, idx), d, gm.acc_type);
    };
    gm.store = [&](Value *bl, Value *i, Value *j, Value *acc) {
      Value *m = dim(gm.m), *n = dim(gm.n);
      Value *lin = b_.CreateAdd(b_.CreateMul(b_.CreateAdd(b_.CreateMul(bl, m), i), n), j);
      std::vector<Value *> batch_dims;
      for (size_t k = 0; k + 2 < cs.size(); ++k)
        batch_dims.push_back(dim(cs[k]));
      Index idx = unravel(bl, batch_dims);
      idx.push_back(i);
      idx.push_back(j);
      store_gemm_result(node, idx, lin, from_accumulator(acc, d));
    };
    tiled_gemm(gm);
    return std::move(kernel_);
  }

  /// Fused attention (Gpu/GpuAttention.h): q, k, v and the mask read through
  /// the elemental emitter (views and fused values recomputed where read).
  GpuKernel attention_kernel(const Node &node) {
    ValueId q = node.operands[0], k = node.operands[1], v = node.operands[2], out = node.results[0];
    const Shape &qs = g_.type_of(q).shape, &ks = g_.type_of(k).shape, &os = g_.type_of(out).shape;
    DType d = g_.type_of(out).dtype;
    size_t r = qs.size();
    begin_kernel("attention", 256).waves_per_eu = 4;
    AttentionSpec a;
    a.batch = Dim(1);
    for (size_t i = 0; i + 2 < r; ++i)
      a.batch = a.batch * os[i];
    a.sq = qs[r - 2];
    a.sk = ks[r - 2];
    a.d = qs[r - 1].value();
    a.dv = os[r - 1].value();
    a.scale = node.attrs.get_real("scale");
    a.fill = node.attrs.get_real("fill");
    if (d == DType::f16 && std::fabs(a.fill) >= 65520) // the f16 fill the reference writes: -1e9 is -inf
      a.fill = std::copysign(HUGE_VAL, a.fill);
    a.causal = node.operands.size() > 3 && is_causal_mask(g_, node.operands[3], qs, ks);
    auto loader = [&](ValueId x) {
      return [this, x, d, &os](Value *bl, Value *i, Value *e) {
        Index idx = operand_batch(g_.type_of(x).shape, os, bl);
        idx.push_back(i);
        idx.push_back(e);
        return widen(element(x, idx), d, b_.getFloatTy());
      };
    };
    a.load_q = loader(q);
    a.load_k = loader(k);
    a.load_v = loader(v);
    if (node.operands.size() > 3 && !a.causal)
      a.mask = [&](Value *bl, Value *i, Value *j, Value *s) {
        ValueId m = node.operands[3];
        const Shape &ms = g_.type_of(m).shape;
        std::vector<Value *> batch_dims;
        for (size_t x = 0; x + 2 < r; ++x)
          batch_dims.push_back(dim(os[x]));
        Index full = unravel(bl, batch_dims), idx;
        full.push_back(i);
        full.push_back(j);
        Shape scores(os.begin(), os.end() - 1);
        scores.push_back(ks[r - 2]);
        for (size_t x = 0; x < ms.size(); ++x) {
          size_t at = x + r - ms.size();
          bool broadcast = ms[x] == Dim(1) && scores[at] != Dim(1);
          idx.push_back(broadcast ? b_.getInt64(0) : full[at]);
        }
        Value *mv = element(m, idx);
        if (g_.type_of(m).dtype == DType::boolean)
          return b_.CreateSelect(b_.CreateIsNotNull(mv), s, llvm::ConstantFP::get(b_.getFloatTy(), a.fill));
        return b_.CreateFAdd(s, widen(mv, g_.type_of(m).dtype, b_.getFloatTy()));
      };
    a.store = [&](Value *bl, Value *i, Value *c, Value *value) {
      Value *lin = b_.CreateAdd(b_.CreateMul(b_.CreateAdd(b_.CreateMul(bl, dim(a.sq)), i), b_.getInt64(a.dv)), c);
      store_element(d, pointer_of(out), lin, from_accumulator(value, d));
    };
    emit_attention(*this, a);
    return std::move(kernel_);
  }

  /// conv2d as an implicit GEMM per (image, group): out[o, p] = sum_q W[o, q]
  /// * X(q, p) with q = (c, ky, kx) and p = (oy, ox), X read on the fly from
  /// the input window (zeros in the padding) — no im2col buffer.
  GpuKernel conv_kernel(const Node &node) {
    ValueId x = node.operands[0], w = node.operands[1], out = node.results[0];
    const Shape &xs = g_.type_of(x).shape, &ws = g_.type_of(w).shape, &os = g_.type_of(out).shape;
    DType d = g_.type_of(out).dtype;
    int64_t groups = node.attrs.get_int("groups");
    int64_t C = xs[1].value(), KH = ws[2].value(), KW = ws[3].value(), O = os[1].value();
    int64_t cin_g = C / groups, cout_g = O / groups;
    std::vector<int64_t> stride = node.attrs.get_ints("stride"), dil = node.attrs.get_ints("dilation");
    auto pad = padding4(node.attrs);
    begin_kernel("conv2d", kTile * kTile);
    // H, W (and so OH, OW) may be symbolic: read from the dims of the phase
    // function each access is emitted in.
    const Dim OHW_dim = os[2] * os[3];
    TiledGemm gm;
    gm.batch = xs[0] * Dim(groups);
    gm.m = Dim(cout_g);
    gm.n = OHW_dim;
    gm.k = Dim(cin_g * KH * KW);
    gm.dtype = d;
    gm.acc_type = accumulator_type(ctx_, d);
    auto window = [&](Value *q) { return unravel(q, {b_.getInt64(cin_g), b_.getInt64(KH), b_.getInt64(KW)}); };
    gm.load_a = [&](Value *bl, Value *i, Value *q) {
      Value *g = b_.CreateURem(bl, b_.getInt64(groups));
      Value *o = b_.CreateAdd(b_.CreateMul(g, b_.getInt64(cout_g)), i);
      Index cyx = window(q);
      return widen(element(w, {o, cyx[0], cyx[1], cyx[2]}), d, gm.acc_type);
    };
    gm.load_b = [&](Value *bl, Value *q, Value *p) {
      Value *n = b_.CreateUDiv(bl, b_.getInt64(groups)), *g = b_.CreateURem(bl, b_.getInt64(groups));
      Index cyx = window(q);
      Value *H = dim(xs[2]), *W = dim(xs[3]), *OW = dim(os[3]);
      Value *oy = b_.CreateUDiv(p, OW), *ox = b_.CreateURem(p, OW);
      Value *iy = b_.CreateAdd(b_.CreateSub(b_.CreateMul(oy, b_.getInt64(stride[0])), b_.getInt64(pad[0])),
                               b_.CreateMul(cyx[1], b_.getInt64(dil[0])));
      Value *ix = b_.CreateAdd(b_.CreateSub(b_.CreateMul(ox, b_.getInt64(stride[1])), b_.getInt64(pad[1])),
                               b_.CreateMul(cyx[2], b_.getInt64(dil[1])));
      Value *ok = in_bounds(iy, H, ix, W);
      Value *c = b_.CreateAdd(b_.CreateMul(g, b_.getInt64(cin_g)), cyx[0]);
      return when(ok, [&] { return widen(element(x, {n, c, iy, ix}), d, gm.acc_type); }, zero_of(gm.acc_type));
    };
    gm.store = [&](Value *bl, Value *i, Value *p, Value *acc) {
      Value *n = b_.CreateUDiv(bl, b_.getInt64(groups)), *g = b_.CreateURem(bl, b_.getInt64(groups));
      Value *o = b_.CreateAdd(b_.CreateMul(g, b_.getInt64(cout_g)), i);
      if (node.operands.size() > 2)
        acc = b_.CreateFAdd(acc, widen(element(node.operands[2], {o}), d, gm.acc_type));
      Value *OW = dim(os[3]), *OHW = dim(OHW_dim);
      Value *lin = b_.CreateAdd(b_.CreateMul(b_.CreateAdd(b_.CreateMul(n, b_.getInt64(O)), o), OHW), p);
      Index idx = {n, o, b_.CreateUDiv(p, OW), b_.CreateURem(p, OW)};
      store_gemm_result(node, idx, lin, from_accumulator(acc, d));
    };
    tiled_gemm(gm);
    return std::move(kernel_);
  }

  static bool starts_with_gfx(const std::string &arch) { return arch.rfind("gfx", 0) == 0; }

  std::string prefix_, tag_, arch_;
  std::vector<bool> constant_params_; // per input of g_: bound to a constant at every call site
  GpuKernel kernel_;
  size_t counter_ = 0, phases_ = 0;
  Value *buffers_ = nullptr, *workgroup_ = nullptr, *local_id_ = nullptr, *lds_ = nullptr, *state_ = nullptr,
        *iteration_ = nullptr;
  std::map<size_t, Value *> pointers_;
  std::map<size_t, std::vector<const Node *>> stored_through_; // matmul node -> views it stores through
  std::set<ValueId> made_by_matmul_;                           // the stored ends of those views
};

bool needs_device_libm(const Node &node, const Graph &g) {
  OpTraits traits = op_traits(node.op);
  if (node.results.empty() || !is_float(g.type_of(node.results[0]).dtype))
    return false;
  return traits.has(OpTrait::device_libm) ||
         (traits.has(OpTrait::device_libm_f64) && g.type_of(node.results[0]).dtype == DType::f64);
}

} // namespace

std::string gpu_kernel_kind(const std::string &op) {
  OpTraits traits = op_traits(op);
  if (traits.has(OpTrait::call))
    return "call"; // a host-side call of the subgraph's launches
  if (traits.has(OpTrait::branch))
    return "branch"; // the predicate read on the host, then the taken body's launches
  if (traits.has(OpTrait::loop))
    return "loop"; // a host-side loop around the body's launches
  if (traits.has(OpTrait::defines_symbol))
    return "symbol"; // the value read on the host into the dims array, read by the launches after it
  if (traits.has(OpTrait::aliases_operand))
    return "state"; // a view of a state buffer: buffer_append's kernel stores its rows, buffer_prefix is none
  if (traits.has(OpTrait::communicates))
    return "collective"; // host code between launches: the emulator's communicator (KernelLauncher::collective)
  if (op == "constant")
    return op; // a weight in the blob
  if (op == "matmul" || op == "conv2d")
    return op; // tiled GEMMs through LDS (conv2d as an implicit GEMM)
  if (op == "attention")
    return op; // flash-attention style (Gpu/GpuAttention.h)
  if (traits.has(OpTrait::reduction) && !traits.has(OpTrait::index_result))
    return "reduction"; // one workgroup per output element
  if (has_elemental_lowering(op))
    return "elementwise"; // one work-item per output element
  return "";
}

std::string GpuKernel::grid_text() const {
  std::string out;
  for (const GridFactor &f : grid) {
    if (!out.empty())
      out += " * ";
    out += f.divisor == 1 ? f.extent.to_string()
                          : "ceil((" + f.extent.to_string() + ")/" + std::to_string(f.divisor) + ")";
  }
  return out.empty() ? "1" : out;
}

std::vector<GpuGraphProgram> emit_gpu_kernels(llvm::Module &module, const Graph &root, const std::string &prefix,
                                              const std::vector<std::string> &symbols, const std::string &arch,
                                              const LoweringPlans *plans) {
  LoweringPlans own_plans = plans ? LoweringPlans{} : plan_lowering_all(root, gpu_plan_options());
  const LoweringPlans &use = plans ? *plans : own_plans;
  auto plan_of = [&](const Graph &g, const std::string &tag) -> const LoweringPlan & {
    auto it = use.find(&g);
    if (it == use.end() || !it->second.gpu)
      throw Error(ErrorCode::Internal, "gpu: no plan made with gpu_plan_options() for graph '" + tag + "'");
    return it->second;
  };
  std::vector<GpuGraphProgram> programs;
  std::map<std::string, std::vector<bool>> constant_params = constant_bound_inputs(root, CallSiteScope::Transitive);
  for (const auto &[name, sub] : root.subgraphs())
    programs.push_back(KernelBuilder(module, *sub, plan_of(*sub, "sub." + name), prefix, "sub." + name, symbols, arch,
                                     constant_params[name])
                           .build());
  programs.push_back(KernelBuilder(module, root, plan_of(root, "main"), prefix, "main", symbols, arch).build());
  return programs;
}

uint64_t gpu_launch_count(const std::vector<GpuGraphProgram> &programs) {
  std::function<uint64_t(const GpuGraphProgram &)> count = [&](const GpuGraphProgram &p) {
    uint64_t n = 0;
    for (const GpuGraphProgram::Item &item : p.items) {
      if (!item.call) {
        ++n;
        continue;
      }
      uint64_t most = 0; // a branch runs one of its bodies: the larger count
      for (const std::string &body : body_names(*item.call))
        for (const GpuGraphProgram &callee : programs)
          if (callee.tag == "sub." + body)
            most = std::max(most, count(callee));
      n += most;
    }
    return n;
  };
  return programs.empty() ? 0 : count(programs.back());
}

std::vector<std::string> gpu_unsupported_nodes(const Graph &root) {
  std::vector<std::string> out;
  auto scan = [&](const Graph &g, const std::string &where) {
    for (size_t n = 0; n < g.nodes().size(); ++n) {
      const Node &node = g.nodes()[n];
      if (needs_device_libm(node, g))
        out.push_back(where + "node " + std::to_string(n) + " '" + node.op + "' (" +
                      std::string(dtype_name(g.type_of(node.results[0]).dtype)) + ")");
    }
  };
  scan(root, "");
  for (const auto &[name, sub] : root.subgraphs())
    scan(*sub, "subgraph " + name + ": ");
  return out;
}

} // namespace maxc::codegen
