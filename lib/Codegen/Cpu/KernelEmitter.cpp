#include "Cpu/KernelEmitter.h"

#include "ElementalEmitter.h"
#include "Cpu/GemmEmitter.h"
#include "Cpu/Runtime.h"
#include "MathEmitter.h"
#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/IR/GraphSymbols.h"
#include "maxc/Support/Error.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>

namespace maxc::codegen {

using llvm::Value;

namespace {

// ---------------------------------------------------------------------------
// Types: values are computed in a "compute type" (f16/bf16 as float, bool as
// i1) and stored in a "memory type" (f16 as half, bf16 as i16, bool as i8).


struct Module {
  llvm::Module &m;
  llvm::LLVMContext &ctx;
  std::string prefix;
  std::vector<std::string> symbols;
  unsigned lanes; // f32 vector width for the GEMM microkernel
  const ExternalWeights *external; // null: constants are embedded globals
  std::map<const Graph *, EmittedGraph> functions;
  std::map<std::pair<const Graph *, std::string>, llvm::GlobalVariable *> constants;
};

// ---------------------------------------------------------------------------

class FunctionEmitter : public ElementalEmitter {
public:
  FunctionEmitter(Module &mod, const Graph &g, EmittedGraph fns)
      : ElementalEmitter(mod.m, g, plan_lowering(g), mod.symbols), mod_(mod), fns_(fns) {}

  void emit() {
    WorkspaceLayout::emit_size_function(fns_.workspace_size, g_, plan_, symbols_,
                                        [&](const Graph *callee) { return mod_.functions.at(callee).workspace_size; });
    llvm::Function *fn = fns_.run;
    auto *entry = llvm::BasicBlock::Create(mod_.ctx, "entry", fn);
    auto *body = llvm::BasicBlock::Create(mod_.ctx, "body", fn);
    entry_b_.SetInsertPoint(entry);
    entry_br_ = entry_b_.CreateBr(body);
    entry_b_.SetInsertPoint(entry_br_);
    b_.SetInsertPoint(body);
    begin_function(fn->getArg(1));
    begin_pointers(fn->getArg(0), fn->getArg(2));
    for (size_t n : plan_.kernels)
      emit_kernel(n);
    for (const auto &[out, v] : plan_.output_copies)
      emit_copy(v, out);
    b_.CreateRetVoid();
  }

private:
  /// Where the current function's buffers are: its arguments, the pointers
  /// loaded from them, its workspace layout.
  struct Pointers {
    Value *buffers = nullptr, *workspace = nullptr;
    std::map<size_t, Value *> buffer_args;
    std::map<ValueId, Value *> temp_pointers;
    std::map<std::pair<const Graph *, std::string>, Value *> external_pointers;
    std::unique_ptr<WorkspaceLayout> layout;
  };

  void begin_pointers(Value *buffers, Value *workspace) {
    fn_ = Pointers{};
    fn_.buffers = buffers;
    fn_.workspace = workspace;
    fn_.layout = std::make_unique<WorkspaceLayout>(plan_, *dim_values_, entry_b_);
  }

  Value *buffer_arg(size_t index) {
    if (auto it = fn_.buffer_args.find(index); it != fn_.buffer_args.end())
      return it->second;
    Value *ptr = entry_b_.CreateConstGEP1_64(entry_b_.getPtrTy(), fn_.buffers, index);
    return fn_.buffer_args[index] = entry_b_.CreateLoad(entry_b_.getPtrTy(), ptr);
  }

  Value *output_pointer(size_t out) { return buffer_arg(g_.input_ids().size() + out); }

  llvm::GlobalVariable *constant_global(const std::string &name) {
    auto key = std::make_pair(&g_, name);
    if (auto it = mod_.constants.find(key); it != mod_.constants.end())
      return it->second;
    const HostTensor &data = g_.constant(name);
    auto *bytes = llvm::ConstantDataArray::getRaw(
        llvm::StringRef(reinterpret_cast<const char *>(data.data()), data.nbytes()), data.nbytes(),
        llvm::Type::getInt8Ty(mod_.ctx));
    std::string global_name = mod_.prefix + ".const." + (&g_ == g_.root() ? "" : g_.name() + ".") + name;
    auto *gv = new llvm::GlobalVariable(mod_.m, bytes->getType(), true, llvm::GlobalValue::InternalLinkage, bytes,
                                        global_name);
    gv->setAlignment(llvm::Align(64));
    return mod_.constants[key] = gv;
  }

  /// A constant inside the run-time weights blob: base + offset.
  Value *external_constant(const std::string &name) {
    auto key = std::make_pair(&g_, name);
    if (auto it = fn_.external_pointers.find(key); it != fn_.external_pointers.end())
      return it->second;
    Value *base = entry_b_.CreateLoad(entry_b_.getPtrTy(), mod_.external->base);
    Value *p = entry_b_.CreateGEP(entry_b_.getInt8Ty(), base,
                                  entry_b_.getInt64(static_cast<int64_t>(mod_.external->offsets.at(key))));
    return fn_.external_pointers[key] = p;
  }

  /// Where a stored value lives.
  Value *pointer_of(ValueId v) override {
    const ValuePlan &p = plan_.values[v];
    switch (p.storage) {
    case Storage::input: return buffer_arg(p.index);
    case Storage::output: return output_pointer(p.index);
    case Storage::temp: {
      if (auto it = fn_.temp_pointers.find(v); it != fn_.temp_pointers.end())
        return it->second;
      Value *ptr = entry_b_.CreateGEP(entry_b_.getInt8Ty(), fn_.workspace, fn_.layout->slot_offset(p.index));
      return fn_.temp_pointers[v] = ptr;
    }
    case Storage::constant: {
      const Node &n = g_.nodes()[g_.value_info(v).producer];
      if (mod_.external)
        return external_constant(n.attrs.get_string("name"));
      return constant_global(n.attrs.get_string("name"));
    }
    case Storage::fused: break;
    }
    throw Error(ErrorCode::Internal, "codegen: value %" + std::to_string(v) + " has no storage");
  }


  // ---- kernels ----

  void emit_kernel(size_t n) {
    const Node &node = g_.nodes()[n];
    std::string lowering = cpu_lowering(node.op);
    if (lowering == "call")
      return emit_call(node);
    if (lowering == "matmul")
      return emit_matmul(node);
    if (lowering == "conv2d" && node_uses_gemm(g_, plan_, node))
      return emit_conv_gemm(node);
    if (lowering != "conv2d" && lowering != "elemental")
      throw Error(ErrorCode::Internal, "codegen: no lowering for op '" + node.op + "'");
    for (size_t r = 0; r < node.results.size(); ++r) {
      ValueId v = node.results[r];
      if (plan_.values[v].storage == Storage::fused)
        continue;
      DType dtype = g_.type_of(v).dtype;
      parallel_loop_nest(g_.type_of(v).shape, element_cost(node, v), [&](const Index &idx) {
        store_element(dtype, pointer_of(v), linear_index(idx, dims_of(v)), node_element(node, r, idx));
      });
    }
  }

  void emit_copy(ValueId v, size_t out) {
    DType dtype = g_.type_of(v).dtype;
    parallel_loop_nest(g_.type_of(v).shape, b_.getInt64(1), [&](const Index &idx) {
      store_element(dtype, output_pointer(out), linear_index(idx, dims_of(v)), element(v, idx));
    });
  }

  // ---- splitting loops into tasks (Cpu/Runtime.h) ----

  /// Work units (about one element's load, compute and store) a task gets:
  /// less work than this in all runs as one task on the calling thread.
  static constexpr int64_t kTaskWork = 16384;

  /// Independent rows [0, rows), `row_cost` work units each (both values of
  /// the current function): body(begin, end) emits rows [begin, end) inside
  /// a task function of its own (`void NAME.rows(ptr, i64)`), where
  /// pointer_of, dims_of, element... give that function's values: the body
  /// must compute what it uses there, not capture the caller's values. Tasks
  /// of about kTaskWork units go through the runtime's parallel_for. The
  /// split depends on the shapes only, so results are the same bits at any
  /// thread count (rows must not share a reduction). Kernels in other files
  /// reach it through the FunctionEmitter they are emitted by.
  void emit_parallel_rows(Value *rows, Value *row_cost, const std::function<void(Value *, Value *)> &body) {
    llvm::LLVMContext &c = mod_.ctx;
    Value *cost = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, row_cost, b_.getInt64(1));
    Value *per = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, b_.CreateSDiv(b_.getInt64(kTaskWork), cost),
                                          b_.getInt64(1));
    Value *tasks = b_.CreateSDiv(b_.CreateAdd(rows, b_.CreateSub(per, b_.getInt64(1))), per);
    auto *ptr = b_.getPtrTy();
    auto *st = llvm::StructType::get(c, {ptr, ptr, ptr, b_.getInt64Ty(), b_.getInt64Ty()});
    Value *args = entry_b_.CreateAlloca(st);
    Value *fields[] = {fn_.buffers, dims_, fn_.workspace, rows, per};
    for (unsigned i = 0; i < 5; ++i)
      b_.CreateStore(fields[i], b_.CreateStructGEP(st, args, i));
    auto *task = llvm::Function::Create(task_function_type(c), llvm::GlobalValue::InternalLinkage,
                                        mod_.prefix + ".rows", mod_.m);
    task->addFnAttr(llvm::Attribute::NoUnwind);
    {
      auto *entry = llvm::BasicBlock::Create(c, "entry", task);
      auto *body_block = llvm::BasicBlock::Create(c, "body", task);
      llvm::IRBuilder<> at(entry);
      auto field = [&](unsigned i, llvm::Type *t) { return at.CreateLoad(t, at.CreateStructGEP(st, task->getArg(0), i)); };
      std::vector<Value *> captured = {field(0, ptr), field(1, ptr), field(2, ptr)};
      Value *n = field(3, at.getInt64Ty()), *step = field(4, at.getInt64Ty());
      Value *begin = at.CreateMul(task->getArg(1), step);
      Value *end = at.CreateBinaryIntrinsic(llvm::Intrinsic::smin, at.CreateAdd(begin, step), n);
      at.SetInsertPoint(at.CreateBr(body_block));
      TaskScope scope(*this, at, captured);
      b_.SetInsertPoint(body_block);
      body(begin, end);
      b_.CreateRetVoid();
    }
    emit_parallel_for(b_, mod_.prefix, args, tasks, task);
  }

  /// body(idx) for every index of `shape`, as emit_parallel_rows' rows: the
  /// leading dims are the rows (all but the last, or but the last two when
  /// the last is a small constant), `element_cost` units per element.
  void parallel_loop_nest(const Shape &shape, Value *element_cost, const std::function<void(const Index &)> &body) {
    if (shape.empty()) {
      body({});
      return;
    }
    size_t lead = shape.size() == 1 ? 1 : shape.size() - 1;
    if (shape.size() >= 3 && shape.back().is_static() && shape.back().value() < 32)
      lead = shape.size() - 2;
    auto product = [&](size_t from, size_t to) {
      Value *p = b_.getInt64(1);
      for (size_t d = from; d < to; ++d)
        p = b_.CreateMul(p, dim(shape[d]));
      return p;
    };
    Value *rows = product(0, lead), *row_cost = b_.CreateMul(product(lead, shape.size()), element_cost);
    emit_parallel_rows(rows, row_cost, [&](Value *begin, Value *end) {
      std::vector<Value *> extents;
      for (const Dim &d : shape)
        extents.push_back(dim(d));
      Value *first = b_.CreateSub(end, begin);
      loop(first, [&](Value *i) {
        Value *r = b_.CreateAdd(begin, i);
        Index idx(lead);
        for (size_t k = lead; k-- > 1;) {
          idx[k] = b_.CreateURem(r, extents[k]);
          r = b_.CreateUDiv(r, extents[k]);
        }
        idx[0] = r;
        loop_nest(std::vector<Value *>(extents.begin(), extents.end()), body, idx);
      });
    });
  }

  /// Work units per element of `v`, the result of `node`: the elements of
  /// a reduction's (or pooling's) operand per result element, a direct
  /// convolution's multiply-adds; 1 for elementwise ops.
  Value *element_cost(const Node &node, ValueId v) {
    auto elements = [&](ValueId x) {
      Value *p = b_.getInt64(1);
      for (const Dim &d : g_.type_of(x).shape)
        p = b_.CreateMul(p, dim(d));
      return p;
    };
    if (node.op == "conv2d" && node.operands.size() > 1) {
      const Shape &ws = g_.type_of(node.operands[1]).shape;
      Value *p = b_.getInt64(1);
      for (size_t d = 1; d < ws.size(); ++d)
        p = b_.CreateMul(p, dim(ws[d]));
      return p;
    }
    if (node.operands.empty())
      return b_.getInt64(1);
    Value *out = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, elements(v), b_.getInt64(1));
    return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, b_.CreateSDiv(elements(node.operands[0]), out),
                                    b_.getInt64(1));
  }

  void emit_call(const Node &node) {
    const Graph *callee = g_.find_subgraph(node.attrs.get_string("callee"));
    EmittedGraph fns = mod_.functions.at(callee);
    size_t count = node.operands.size() + node.results.size();
    // The buffer table lives in the entry block. Weights (constants) are
    // known at link time: they come from a read-only template copied in one
    // memcpy, so each call costs the same few instructions however many
    // weights a layer has — code size stays flat in the number of layers.
    // Only the activations are stored one by one.
    Value *table = entry_b_.CreateAlloca(b_.getPtrTy(), entry_b_.getInt64(static_cast<int64_t>(count)));
    std::vector<ValueId> buffers(node.operands.begin(), node.operands.end());
    buffers.insert(buffers.end(), node.results.begin(), node.results.end());
    std::vector<llvm::Constant *> fixed;
    size_t constants = 0;
    for (ValueId v : buffers) {
      bool is_const = plan_.values[v].storage == Storage::constant && !mod_.external;
      fixed.push_back(is_const ? llvm::cast<llvm::Constant>(pointer_of(v))
                               : llvm::ConstantPointerNull::get(b_.getPtrTy()));
      constants += is_const;
    }
    if (constants > 0) {
      auto *type = llvm::ArrayType::get(b_.getPtrTy(), count);
      auto *tmpl = new llvm::GlobalVariable(mod_.m, type, true, llvm::GlobalValue::InternalLinkage,
                                            llvm::ConstantArray::get(type, fixed),
                                            mod_.prefix + ".call." + std::to_string(call_counter_++));
      b_.CreateMemCpy(table, llvm::MaybeAlign(8), tmpl, llvm::MaybeAlign(8), count * 8);
    }
    for (size_t i = 0; i < buffers.size(); ++i)
      if (plan_.values[buffers[i]].storage != Storage::constant || mod_.external)
        b_.CreateStore(i < node.operands.size() ? stored_pointer(buffers[i]) : pointer_of(buffers[i]),
                       b_.CreateConstGEP1_64(b_.getPtrTy(), table, i));
    Value *callee_ws = b_.CreateGEP(b_.getInt8Ty(), fn_.workspace, fn_.layout->slots_end());
    b_.CreateCall(fns.run, {table, dims_, callee_ws});
  }

  /// A pointer to v's elements, materializing a fused value into a scratch
  /// copy if needed (rare: call operands are stored by the plan).
  Value *stored_pointer(ValueId v) {
    if (plan_.values[v].storage != Storage::fused)
      return pointer_of(v);
    throw Error(ErrorCode::Internal, "codegen: call operand %" + std::to_string(v) + " is not stored");
  }

  // matmul: C[b, i, j] = sum_k A[b, i, k] * B[b, k, j] with NumPy batch
  // broadcasting. With B transposed (linear's weights) the inner loop is a
  // contiguous dot product; otherwise the loop order is i, k, j so the inner
  // loop streams rows of B and C.
  void emit_matmul(const Node &node) {
    ValueId out = node.results[0];
    bool ta = node.attrs.get_bool("transpose_a"), tb = node.attrs.get_bool("transpose_b");
    if (matmul_uses_gemm(g_, plan_, node))
      return emit_gemm(node);
    const Shape &cs = g_.type_of(out).shape;
    const Shape &as = g_.type_of(node.operands[0]).shape;
    const Shape &bs = g_.type_of(node.operands[1]).shape;
    size_t rank = cs.size();
    std::vector<Value *> cdims = dims_of(out);
    DType dtype = g_.type_of(out).dtype;
    Value *k_extent = dim(ta ? as[as.size() - 2] : as.back());
    Value *cptr = pointer_of(out);
    bool is_fp = is_float(dtype);
    llvm::Type *acc_type = is_fp ? b_.getFloatTy() : b_.getInt64Ty();
    if (dtype == DType::f64)
      acc_type = b_.getDoubleTy();
    std::vector<Value *> batch(cdims.begin(), cdims.end() - 2);
    auto a_elem = [&](const Index &bidx, Value *i, Value *k) {
      Index idx = batch_index(as, cs, bidx);
      idx.push_back(ta ? k : i);
      idx.push_back(ta ? i : k);
      return widen(element(node.operands[0], idx), dtype, acc_type);
    };
    auto b_elem = [&](const Index &bidx, Value *k, Value *j) {
      Index idx = batch_index(bs, cs, bidx);
      idx.push_back(tb ? j : k);
      idx.push_back(tb ? k : j);
      return widen(element(node.operands[1], idx), dtype, acc_type);
    };
    auto mul_add = [&](Value *acc, Value *x, Value *y) -> Value * {
      if (!is_fp)
        return b_.CreateAdd(acc, b_.CreateMul(x, y));
      llvm::FastMathFlags fmf;
      fmf.setAllowReassoc();
      fmf.setAllowContract();
      Value *prod = b_.CreateFMul(x, y);
      llvm::cast<llvm::Instruction>(prod)->setFastMathFlags(fmf);
      Value *sum = b_.CreateFAdd(acc, prod);
      llvm::cast<llvm::Instruction>(sum)->setFastMathFlags(fmf);
      return sum;
    };
    Value *zero = is_fp ? llvm::ConstantFP::get(acc_type, 0.0) : static_cast<Value *>(b_.getInt64(0));
    loop_nest(batch, [&](const Index &bidx) {
      loop(cdims[rank - 2], [&](Value *i) {
        // f16/bf16 results take the dot-product form too: accumulating in C
        // itself would round every partial sum to the storage precision.
        if (tb || dtype == DType::f16 || dtype == DType::bf16) {
          loop(cdims[rank - 1], [&](Value *j) {
            Value *acc = local(acc_type);
            b_.CreateStore(zero, acc);
            loop(k_extent, [&](Value *k) {
              b_.CreateStore(mul_add(b_.CreateLoad(acc_type, acc), a_elem(bidx, i, k), b_elem(bidx, k, j)), acc);
            });
            Index cidx = bidx;
            cidx.push_back(i);
            cidx.push_back(j);
            store_element(dtype, cptr, linear_index(cidx, cdims), narrow(b_.CreateLoad(acc_type, acc), dtype, acc_type));
          });
          return;
        }
        // Accumulate rows of C in a scratch row of acc_type? C itself is in
        // the output dtype; for f32/f64/i64 accumulate in place.
        loop(cdims[rank - 1], [&](Value *j) {
          Index cidx = bidx;
          cidx.push_back(i);
          cidx.push_back(j);
          store_element(dtype, cptr, linear_index(cidx, cdims), narrow(zero, dtype, acc_type));
        });
        loop(k_extent, [&](Value *k) {
          Value *a = a_elem(bidx, i, k);
          loop(cdims[rank - 1], [&](Value *j) {
            Index cidx = bidx;
            cidx.push_back(i);
            cidx.push_back(j);
            Value *lin = linear_index(cidx, cdims);
            Value *c = widen(load_element(dtype, cptr, lin), dtype, acc_type);
            store_element(dtype, cptr, lin, narrow(mul_add(c, a, b_elem(bidx, k, j)), dtype, acc_type));
          });
        });
      });
    });
  }

  // ---- GEMM epilogues ----

  static constexpr ValueId kNoValue = ~ValueId(0);

  /// Emission inside a GEMM panel task (a function of its own) while this
  /// lives: the elemental emitter's FunctionScope (builders, dims) plus this
  /// emitter's pointers, fresh for the task; the caller's come back at the end.
  class TaskScope {
  public:
    TaskScope(FunctionEmitter &e, llvm::IRBuilder<> &entry, const std::vector<Value *> &captured)
        : e_(e), function_(e, entry.GetInsertPoint(), entry.GetInsertBlock(), captured[1]),
          saved_(std::move(e.fn_)) {
      e.begin_pointers(captured[0], captured[2]);
    }
    ~TaskScope() { e_.fn_ = std::move(saved_); }

  private:
    FunctionEmitter &e_;
    FunctionScope function_;
    Pointers saved_;
  };

  /// The epilogue of GEMM node `node` (bias: conv2d's per-row bias operand,
  /// added first; then the plan's chain, if any). `index(prefix, row, col)`
  /// maps a C element to the result's full index, `prefix` being the batch
  /// index values where the code runs (the caller's `batch`, or their
  /// copies inside the panel task). Null when there is nothing to do.
  struct Epilogue {
    GemmEpilogue gemm;
    std::optional<TaskScope> task;
    Index batch, batch_here;
  };
  std::unique_ptr<Epilogue> make_epilogue(const Node &node, size_t n, const Index &batch, ValueId bias,
                                          std::function<Index(const Index &, Value *, Value *)> index) {
    auto it = plan_.epilogues.find(n);
    if (it == plan_.epilogues.end() && bias == kNoValue)
      return nullptr;
    ValueId m = node.results[0];
    ValueId r = it == plan_.epilogues.end() ? kNoValue : it->second;
    auto e = std::make_unique<Epilogue>();
    Epilogue *ep = e.get();
    ep->batch = ep->batch_here = batch;
    ep->gemm.captures = {fn_.buffers, dims_, fn_.workspace};
    ep->gemm.captures.insert(ep->gemm.captures.end(), batch.begin(), batch.end());
    ep->gemm.enter = [this, ep](llvm::IRBuilder<> &entry, const std::vector<Value *> &captured) {
      ep->task.emplace(*this, entry, captured);
      ep->batch_here = Index(captured.begin() + 3, captured.end());
    };
    ep->gemm.leave = [ep] {
      ep->task.reset();
      ep->batch_here = ep->batch;
    };
    ep->gemm.apply = [this, ep, m, r, bias, index](llvm::IRBuilder<> &at, Value *acc, Value *row, Value *col) {
      b_.SetInsertPoint(at.GetInsertBlock());
      Value *v = acc;
      if (bias != kNoValue)
        v = b_.CreateFAdd(v, element(bias, {row}));
      if (r != kNoValue) {
        element_overrides_[m] = v;
        const ValueInfo &info = g_.value_info(r);
        v = node_element(g_.nodes()[info.producer], info.index, index(ep->batch_here, row, col));
        element_overrides_.erase(m);
      }
      at.SetInsertPoint(b_.GetInsertBlock());
      return v;
    };
    return e;
  }

  /// Where a GEMM node's C lives: its epilogue's stored value, if any.
  Value *gemm_output(size_t n, ValueId out) {
    auto it = plan_.epilogues.find(n);
    return pointer_of(it == plan_.epilogues.end() ? out : it->second);
  }

  size_t node_index(const Node &node) const { return static_cast<size_t>(&node - g_.nodes().data()); }

  // f32, row-major operands in memory: the register-blocked GEMM, once per
  // batch (broadcast batch dims reuse the same operand matrix). With an
  // epilogue, C is the buffer of the chain's stored value (same shape, f32).
  void emit_gemm(const Node &node) {
    ValueId out = node.results[0], a = node.operands[0], bm = node.operands[1];
    const Shape &cs = g_.type_of(out).shape, &as = g_.type_of(a).shape, &bs = g_.type_of(bm).shape;
    std::vector<Value *> cdims = dims_of(out), adims = dims_of(a), bdims = dims_of(bm);
    size_t rank = cs.size();
    Value *m = cdims[rank - 2], *n = cdims[rank - 1], *k = adims.back();
    std::vector<Value *> cbatch(cdims.begin(), cdims.end() - 2), abatch(adims.begin(), adims.end() - 2),
        bbatch(bdims.begin(), bdims.end() - 2);
    size_t n_index = node_index(node);
    Value *aptr = pointer_of(a), *bptr = pointer_of(bm), *cptr = gemm_output(n_index, out);
    loop_nest(cbatch, [&](const Index &bidx) {
      auto epi = make_epilogue(node, n_index, bidx, kNoValue, [](const Index &prefix, Value *row, Value *col) {
        Index idx = prefix;
        idx.push_back(row);
        idx.push_back(col);
        return idx;
      });
      Value *a_off = b_.CreateMul(linear_index(batch_index(as, cs, bidx), abatch), b_.CreateMul(m, k));
      Value *b_off = b_.CreateMul(linear_index(batch_index(bs, cs, bidx), bbatch), b_.CreateMul(k, n));
      Value *c_off = b_.CreateMul(linear_index(bidx, cbatch), b_.CreateMul(m, n));
      GemmArgs args{b_.CreateGEP(b_.getFloatTy(), aptr, a_off), b_.CreateGEP(b_.getFloatTy(), bptr, b_off),
                    b_.CreateGEP(b_.getFloatTy(), cptr, c_off), m, n, k, k, n, n, mod_.lanes, mod_.prefix,
                    epi ? &epi->gemm : nullptr};
      emit_gemm_f32(b_, args);
    });
  }

  // conv2d (f32, one group) as im2col + GEMM, per image: the transposed
  // column matrix colsT[c*KH*KW + ky*KW + kx, oy*OW + ox] (zeros where the
  // window hangs over the padding) goes to the scratch slot; then
  // out[n] [O, OH*OW] = W [O, C*KH*KW] @ colsT — already NCHW — with bias
  // and the plan's epilogue chain applied per finished tile.
  void emit_conv_gemm(const Node &node) {
    ValueId x = node.operands[0], w = node.operands[1], out = node.results[0];
    const Shape &xs = g_.type_of(x).shape, &ws = g_.type_of(w).shape, &os = g_.type_of(out).shape;
    int64_t C = xs[1].value(), H = xs[2].value(), W = xs[3].value(), O = ws[0].value(), KH = ws[2].value(),
            KW = ws[3].value(), OH = os[2].value(), OW = os[3].value();
    std::vector<int64_t> stride = node.attrs.get_ints("stride"), dil = node.attrs.get_ints("dilation");
    auto pad = padding4(node.attrs);
    Value *cols = b_.CreateGEP(b_.getInt8Ty(), fn_.workspace, fn_.layout->slot_offset(plan_.scratch_slot));
    size_t n_index = node_index(node);
    Value *xptr = pointer_of(x), *wptr = pointer_of(w), *optr = gemm_output(n_index, out);
    int64_t K = C * KH * KW, P = OH * OW;
    loop(dim(xs[0]), [&](Value *n) {
      loop_nest({b_.getInt64(C), b_.getInt64(KH), b_.getInt64(KW), b_.getInt64(OH)}, [&](const Index &q) {
        Value *row = b_.CreateAdd(b_.CreateMul(b_.CreateAdd(b_.CreateMul(q[0], b_.getInt64(KH)), q[1]), b_.getInt64(KW)), q[2]);
        Value *iy = b_.CreateAdd(b_.CreateSub(b_.CreateMul(q[3], b_.getInt64(stride[0])), b_.getInt64(pad[0])),
                                 b_.CreateMul(q[1], b_.getInt64(dil[0])));
        Value *y_ok = b_.CreateAnd(b_.CreateICmpSGE(iy, b_.getInt64(0)), b_.CreateICmpSLT(iy, b_.getInt64(H)));
        loop(b_.getInt64(OW), [&](Value *ox) {
          Value *ix = b_.CreateAdd(b_.CreateSub(b_.CreateMul(ox, b_.getInt64(stride[1])), b_.getInt64(pad[1])),
                                   b_.CreateMul(q[2], b_.getInt64(dil[1])));
          Value *ok = b_.CreateAnd(y_ok, b_.CreateAnd(b_.CreateICmpSGE(ix, b_.getInt64(0)), b_.CreateICmpSLT(ix, b_.getInt64(W))));
          Value *src = linear_index({n, q[0], b_.CreateSelect(ok, iy, b_.getInt64(0)), b_.CreateSelect(ok, ix, b_.getInt64(0))},
                                    {b_.getInt64(0) /*unused*/, b_.getInt64(C), b_.getInt64(H), b_.getInt64(W)});
          Value *v = b_.CreateSelect(ok, load_element(DType::f32, xptr, src), llvm::ConstantFP::get(b_.getFloatTy(), 0.0));
          Value *dst = b_.CreateAdd(b_.CreateMul(row, b_.getInt64(P)), b_.CreateAdd(b_.CreateMul(q[3], b_.getInt64(OW)), ox));
          store_element(DType::f32, cols, dst, v);
        });
      });
      Value *out_n = b_.CreateGEP(b_.getFloatTy(), optr, b_.CreateMul(n, b_.getInt64(O * P)));
      // The epilogue: bias (one per output channel, a row of C), then the
      // plan's chain at (n, o, oy, ox).
      ValueId bias = node.operands.size() > 2 ? node.operands[2] : kNoValue;
      auto epi = make_epilogue(node, n_index, {n}, bias, [this, OW](const Index &prefix, Value *row, Value *col) {
        Value *ow = b_.getInt64(OW);
        return Index{prefix[0], row, b_.CreateUDiv(col, ow), b_.CreateURem(col, ow)};
      });
      GemmArgs args{wptr, cols, out_n, b_.getInt64(O), b_.getInt64(P), b_.getInt64(K),
                    b_.getInt64(K), b_.getInt64(P), b_.getInt64(P), mod_.lanes, mod_.prefix,
                    epi ? &epi->gemm : nullptr};
      emit_gemm_f32(b_, args);
    });
  }


  Module &mod_;
  EmittedGraph fns_;
  llvm::Instruction *entry_br_ = nullptr;
  Pointers fn_;
  size_t call_counter_ = 0;
};

} // namespace

std::string cpu_lowering(const std::string &op) {
  if (op == "call" || op == "constant")
    return op; // a call of the subgraph's function; a global (or the weights blob)
  if (op == "matmul")
    return op; // the register-blocked GEMM (f32) or dot-product loops
  if (op == "conv2d")
    return op; // im2col + GEMM (f32, one group) or the elemental window loop
  if (has_elemental_lowering(op))
    return "elemental"; // a loop nest over the output, one element at a time
  return "";
}

EmittedGraph emit_graph_functions(llvm::Module &module, const Graph &root, const std::string &prefix,
                                  const std::vector<std::string> &symbols, unsigned vector_lanes,
                                  const ExternalWeights *external) {
  Module mod{module, module.getContext(), prefix, symbols, vector_lanes, external, {}, {}};
  llvm::LLVMContext &c = mod.ctx;
  auto *ptr = llvm::PointerType::getUnqual(c);
  auto *run_type = llvm::FunctionType::get(llvm::Type::getVoidTy(c), {ptr, ptr, ptr}, false);
  auto *size_type = llvm::FunctionType::get(llvm::Type::getInt64Ty(c), {ptr}, false);
  auto declare = [&](const Graph &g, const std::string &tag) {
    EmittedGraph fns;
    fns.run = llvm::Function::Create(run_type, llvm::GlobalValue::InternalLinkage, prefix + ".graph." + tag, module);
    fns.workspace_size =
        llvm::Function::Create(size_type, llvm::GlobalValue::InternalLinkage, prefix + ".workspace." + tag, module);
    for (unsigned i = 0; i < 3; ++i)
      fns.run->addParamAttr(i, llvm::Attribute::NoUndef);
    fns.run->addFnAttr(llvm::Attribute::NoUnwind);
    fns.workspace_size->addFnAttr(llvm::Attribute::NoUnwind);
    mod.functions[&g] = fns;
  };
  for (const auto &[name, sub] : root.subgraphs())
    declare(*sub, "sub." + name);
  declare(root, "main");
  // Subgraphs first (sorted by name), so output is deterministic.
  for (const auto &[name, sub] : root.subgraphs())
    FunctionEmitter(mod, *sub, mod.functions.at(sub.get())).emit();
  FunctionEmitter(mod, root, mod.functions.at(&root)).emit();
  return mod.functions.at(&root);
}

} // namespace maxc::codegen
