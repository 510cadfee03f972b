#include "EntryPointUtil.h"

#include "maxc/Codegen/LoweringPlan.h"

#include "maxc/Support/Error.h"

#include <algorithm>

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

namespace maxc::codegen {

void verify_module(const llvm::Module &module, const std::string &what) {
  std::string problems;
  llvm::raw_string_ostream os(problems);
  if (llvm::verifyModule(module, &os))
    throw Error(ErrorCode::Internal, "invalid LLVM IR (" + what + "): " + os.str());
}

void return_if(llvm::IRBuilder<> &b, llvm::Value *cond, llvm::Value *status, const std::function<void()> &cleanup) {
  llvm::Function *fn = b.GetInsertBlock()->getParent();
  auto *bad = llvm::BasicBlock::Create(b.getContext(), "fail", fn);
  auto *ok = llvm::BasicBlock::Create(b.getContext(), "ok", fn);
  b.CreateCondBr(cond, bad, ok);
  b.SetInsertPoint(bad);
  if (cleanup)
    cleanup();
  b.CreateRet(status);
  b.SetInsertPoint(ok);
}

llvm::Value *emit_dim(llvm::IRBuilder<> &b, const Dim &d, const std::function<llvm::Value *(const DimAtom &)> &atom,
                      const std::function<llvm::Value *(llvm::Value *, llvm::Value *)> &mul,
                      const std::function<llvm::Value *(llvm::Value *, llvm::Value *, bool subtract)> &add_sub) {
  std::vector<DimTerm> terms = d.terms();
  if (terms.empty())
    terms.push_back({0, {}});
  llvm::Value *total = b.getInt64(0);
  for (const DimTerm &t : terms) {
    uint64_t mag = t.coeff < 0 ? 0 - static_cast<uint64_t>(t.coeff) : static_cast<uint64_t>(t.coeff);
    llvm::Value *product = b.getInt64(1);
    if (t.factors.empty() || mag != 1)
      product = mul(product, b.getInt64(static_cast<int64_t>(mag)));
    for (const DimAtom &a : t.factors)
      product = mul(product, atom(a));
    total = add_sub(total, product, t.coeff < 0);
  }
  return total;
}

llvm::Value *emit_derived_atom(llvm::IRBuilder<> &b, const DimAtom &atom,
                               const std::function<llvm::Value *(const Dim &)> &operand) {
  if (atom.kind() == DimAtom::Kind::FloorDiv) {
    // q = n / d rounded toward 0, minus 1 where the remainder is negative (d > 0).
    llvm::Value *n = operand(atom.args()[0]), *d = operand(atom.args()[1]);
    llvm::Value *q = b.CreateSDiv(n, d), *r = b.CreateSRem(n, d);
    return b.CreateSub(q, b.CreateZExt(b.CreateICmpSLT(r, b.getInt64(0)), b.getInt64Ty()));
  }
  if (atom.is_symbol())
    throw Error(ErrorCode::Internal, "emit_derived_atom on the symbol '" + atom.symbol() + "'");
  llvm::Intrinsic::ID id = atom.kind() == DimAtom::Kind::Min ? llvm::Intrinsic::smin : llvm::Intrinsic::smax;
  llvm::Value *v = operand(atom.args().front());
  for (size_t i = 1; i < atom.args().size(); ++i)
    v = b.CreateBinaryIntrinsic(id, v, operand(atom.args()[i]));
  return v;
}

llvm::Value *dims_invalid(llvm::IRBuilder<> &b, llvm::Value *dims, const std::vector<std::string> &symbols,
                          const Dim &bound) {
  llvm::Type *i64 = b.getInt64Ty();
  llvm::Module *m = b.GetInsertBlock()->getModule();
  std::vector<llvm::Value *> values;
  llvm::Value *bad = b.getFalse();
  for (size_t i = 0; i < symbols.size(); ++i) {
    values.push_back(b.CreateLoad(i64, b.CreateConstGEP1_64(i64, dims, i)));
    bad = b.CreateOr(bad, b.CreateICmpUGT(values.back(), b.getInt64(int64_t(1) << 40)));
  }
  auto checked = [&](llvm::Intrinsic::ID id, llvm::Value *x, llvm::Value *y) {
    llvm::Function *fn = llvm::Intrinsic::getDeclaration(m, id, {i64});
    llvm::Value *pair = b.CreateCall(fn, {x, y});
    bad = b.CreateOr(bad, b.CreateExtractValue(pair, 1));
    return b.CreateExtractValue(pair, 0);
  };
  auto mul = [&](llvm::Value *x, llvm::Value *y) { return checked(llvm::Intrinsic::smul_with_overflow, x, y); };
  auto add_sub = [&](llvm::Value *x, llvm::Value *y, bool subtract) {
    return checked(subtract ? llvm::Intrinsic::ssub_with_overflow : llvm::Intrinsic::sadd_with_overflow, x, y);
  };
  std::function<llvm::Value *(const Dim &)> value;
  std::function<llvm::Value *(const DimAtom &)> atom = [&](const DimAtom &a) -> llvm::Value * {
    if (a.is_symbol()) {
      for (size_t s = 0; s < symbols.size(); ++s)
        if (symbols[s] == a.symbol())
          return values[s];
      throw Error(ErrorCode::Internal, "workspace bound '" + bound.to_string() + "' names '" + a.symbol() +
                                           "', not a dim");
    }
    if (a.kind() != DimAtom::Kind::FloorDiv)
      return emit_derived_atom(b, a, value);
    // A divisor must be positive; a bad one flags the dims and divides by 1
    // (no trap) here.
    llvm::Value *divisor = value(a.args()[1]);
    llvm::Value *not_positive = b.CreateICmpSLE(divisor, b.getInt64(0));
    bad = b.CreateOr(bad, not_positive);
    llvm::Value *safe = b.CreateSelect(not_positive, b.getInt64(1), divisor);
    return emit_derived_atom(b, a, [&](const Dim &x) { return &x == &a.args()[1] ? safe : value(x); });
  };
  value = [&](const Dim &d) { return emit_dim(b, d, atom, mul, add_sub); };
  value(bound);
  return bad;
}

llvm::Value *emit_dims_value(llvm::IRBuilder<> &b, llvm::Value *dims, const std::vector<std::string> &symbols,
                             const Dim &d) {
  std::function<llvm::Value *(const Dim &)> value;
  std::function<llvm::Value *(const DimAtom &)> atom = [&](const DimAtom &a) -> llvm::Value * {
    if (!a.is_symbol())
      return emit_derived_atom(b, a, value);
    auto it = std::find(symbols.begin(), symbols.end(), a.symbol());
    if (it == symbols.end())
      throw Error(ErrorCode::Internal, "'" + d.to_string() + "' names '" + a.symbol() + "', not a dim");
    return b.CreateLoad(b.getInt64Ty(), b.CreateConstGEP1_64(b.getInt64Ty(), dims, static_cast<uint64_t>(it - symbols.begin())));
  };
  value = [&](const Dim &x) {
    return emit_dim(
        b, x, atom, [&](llvm::Value *p, llvm::Value *q) { return b.CreateMul(p, q); },
        [&](llvm::Value *p, llvm::Value *q, bool subtract) { return subtract ? b.CreateSub(p, q) : b.CreateAdd(p, q); });
  };
  return value(d);
}

llvm::Value *state_overflows(llvm::IRBuilder<> &b, llvm::Value *dims, const std::vector<std::string> &symbols,
                             const ModelState &state) {
  // Dims are in [0, 2^40] here (dims_invalid ran first): no overflow.
  llvm::Value *end = b.CreateAdd(emit_dims_value(b, dims, symbols, Dim(state.length)),
                                 emit_dims_value(b, dims, symbols, state.advance));
  return b.CreateICmpSGT(end, emit_dims_value(b, dims, symbols, Dim(state.capacity)));
}

void HostStateTarget::declare(llvm::Module &module) {
  llvm::Type *i64 = llvm::Type::getInt64Ty(module.getContext()), *ptr = llvm::PointerType::getUnqual(module.getContext());
  aligned_alloc_ = module.getOrInsertFunction("aligned_alloc", ptr, i64, i64);
  malloc_ = module.getOrInsertFunction("malloc", ptr, i64);
  module_ = &module;
}

llvm::Value *HostStateTarget::alloc_buffer(llvm::IRBuilder<> &b, llvm::Value *bytes) {
  return b.CreateCall(aligned_alloc_, {b.getInt64(64), bytes});
}

llvm::Value *HostStateTarget::zero(llvm::IRBuilder<> &b, llvm::Value *p, llvm::Value *bytes) {
  b.CreateMemSet(p, b.getInt8(0), bytes, llvm::MaybeAlign(64));
  return nullptr;
}

llvm::Value *HostStateTarget::alloc_workspace(llvm::IRBuilder<> &b, llvm::Value *bytes) {
  return b.CreateCall(malloc_, {bytes});
}

void HostStateTarget::release(llvm::IRBuilder<> &b, llvm::Value *p) { // free: declared after declare()
  b.CreateCall(module_->getOrInsertFunction("free", b.getVoidTy(), b.getPtrTy()), {p});
}

llvm::Value *HostStateTarget::run(llvm::IRBuilder<> &b, llvm::Value *, llvm::Value *buffers, llvm::Value *dims,
                                  llvm::Value *workspace) {
  return b.CreateCall(packed_, {buffers, dims, workspace});
}

void emit_state_entry_points(llvm::Module &module, const ModelInterface &m, llvm::Function *size_fn,
                             StateTarget &target) {
  llvm::LLVMContext &c = module.getContext();
  llvm::IRBuilder<> b(c);
  const ModelState &st = *m.state;
  llvm::Type *i32 = b.getInt32Ty(), *i64 = b.getInt64Ty(), *ptr = b.getPtrTy(), *void_t = b.getVoidTy();
  size_t nstate = m.state_row_bytes.size(), nbuf = m.inputs.size() + m.outputs.size(), ndims = m.symbols.size();
  std::vector<llvm::Type *> fields{i64, i64, ptr, i64, llvm::ArrayType::get(ptr, nstate)};
  constexpr unsigned kContextField = 5;
  if (target.has_context())
    fields.push_back(ptr);
  auto *state_t = llvm::StructType::get(c, fields);
  llvm::FunctionCallee calloc_fn = module.getOrInsertFunction("calloc", ptr, i64, i64);
  target.declare(module);
  llvm::FunctionCallee free_fn = module.getOrInsertFunction("free", void_t, ptr);
  auto field = [&](llvm::Value *s, unsigned i) { return b.CreateStructGEP(state_t, s, i); };
  auto buffer_field = [&](llvm::Value *s, size_t k) {
    return b.CreateInBoundsGEP(state_t, s, {b.getInt32(0), b.getInt32(4), b.getInt32(static_cast<int32_t>(k))});
  };
  auto context_of = [&](llvm::Value *s) -> llvm::Value * {
    return target.has_context() ? b.CreateLoad(ptr, field(s, kContextField)) : nullptr;
  };
  llvm::Value *null = llvm::ConstantPointerNull::get(b.getPtrTy());
  auto function = [&](const std::string &suffix, llvm::Type *ret, std::vector<llvm::Type *> params) {
    auto *f = llvm::Function::Create(llvm::FunctionType::get(ret, params, false), llvm::GlobalValue::ExternalLinkage,
                                     m.name + suffix, module);
    b.SetInsertPoint(llvm::BasicBlock::Create(c, "entry", f));
    return f;
  };

  // NAME_state_destroy(state)
  llvm::Function *destroy = function("_state_destroy", void_t, {ptr});
  {
    llvm::Value *s = destroy->getArg(0);
    return_if(b, b.CreateICmpEQ(s, null), nullptr);
    if (target.has_context()) // device memory is freed in its context (the context may be null)
      target.enter_context(b, context_of(s));
    for (size_t k = 0; k < nstate; ++k)
      target.release(b, b.CreateLoad(ptr, buffer_field(s, k)));
    target.release(b, b.CreateLoad(ptr, field(s, 2)));
    if (target.has_context())
      target.close_context(b, context_of(s));
    b.CreateCall(free_fn, {s});
    b.CreateRetVoid();
  }
  // NAME_state_create(max_context)
  {
    llvm::Function *f = function("_state_create", ptr, {i64});
    llvm::Value *cap = f->getArg(0);
    return_if(b, b.CreateOr(b.CreateICmpSLT(cap, b.getInt64(1)), b.CreateICmpSGT(cap, b.getInt64(int64_t(1) << 40))),
              null);
    llvm::Value *s = b.CreateCall(calloc_fn, {b.getInt64(1), llvm::ConstantExpr::getSizeOf(state_t)});
    return_if(b, b.CreateICmpEQ(s, null), null);
    b.CreateStore(cap, field(s, 0));
    if (target.has_context()) {
      llvm::Value *ctx = target.open_context(b);
      return_if(b, b.CreateICmpEQ(ctx, null), null, [&] { b.CreateCall(destroy, {s}); });
      b.CreateStore(ctx, field(s, kContextField));
    }
    for (size_t k = 0; k < nstate; ++k) { // rows <= 2^40, a row's bytes static: no overflow below 2^23 per row
      llvm::Value *bytes = b.CreateMul(cap, b.getInt64(m.state_row_bytes[k]));
      llvm::Value *size = b.CreateAnd(b.CreateAdd(bytes, b.getInt64(64 + 63)), b.getInt64(~int64_t(63)));
      llvm::Value *p = target.alloc_buffer(b, size);
      return_if(b, b.CreateICmpEQ(p, null), null, [&] { b.CreateCall(destroy, {s}); });
      if (llvm::Value *failed = target.zero(b, p, size))
        return_if(b, failed, null, [&] {
          target.release(b, p);
          b.CreateCall(destroy, {s});
        });
      b.CreateStore(p, buffer_field(s, k));
    }
    b.CreateRet(s);
  }
  // NAME_state_reset(state), NAME_state_length(state), NAME_state_capacity(state)
  {
    llvm::Function *f = function("_state_reset", void_t, {ptr});
    return_if(b, b.CreateICmpEQ(f->getArg(0), null), nullptr);
    b.CreateStore(b.getInt64(0), field(f->getArg(0), 1));
    b.CreateRetVoid();
    for (auto [suffix, index] : {std::pair{"_state_length", 1u}, std::pair{"_state_capacity", 0u}}) {
      llvm::Function *g = function(suffix, i64, {ptr});
      return_if(b, b.CreateICmpEQ(g->getArg(0), null), b.getInt64(-1));
      b.CreateRet(b.CreateLoad(i64, field(g->getArg(0), index)));
    }
  }
  // NAME_step(state, non-state inputs..., outputs..., other dims...)
  std::vector<llvm::Type *> params{ptr};
  for (const auto &t : m.inputs)
    if (!t.state)
      params.push_back(ptr);
  params.insert(params.end(), m.outputs.size(), ptr);
  for (const std::string &sym : m.symbols)
    if (sym != st.length && sym != st.capacity)
      params.push_back(i64);
  llvm::Function *step = function("_step", i32, params);
  {
    llvm::Value *s = step->getArg(0);
    return_if(b, b.CreateICmpEQ(s, null), b.getInt32(static_cast<int32_t>(RunStatus::null_pointer)));
    llvm::Value *ctx = context_of(s);
    unsigned arg = 1;
    llvm::Value *buffers = b.CreateAlloca(ptr, b.getInt64(static_cast<int64_t>(std::max<size_t>(nbuf, 1))));
    for (size_t i = 0, k = 0; i < m.inputs.size(); ++i)
      b.CreateStore(m.inputs[i].state ? static_cast<llvm::Value *>(b.CreateLoad(ptr, buffer_field(s, k++))) : step->getArg(arg++),
                    b.CreateConstGEP1_64(ptr, buffers, i));
    for (size_t o = 0; o < m.outputs.size(); ++o)
      b.CreateStore(step->getArg(arg++), b.CreateConstGEP1_64(ptr, buffers, m.inputs.size() + o));
    llvm::Value *dims = b.CreateAlloca(i64, b.getInt64(static_cast<int64_t>(std::max<size_t>(ndims, 1))));
    std::vector<llvm::Value *> dim_values;
    for (size_t d = 0; d < ndims; ++d) {
      const std::string &sym = m.symbols[d];
      llvm::Value *v = sym == st.capacity ? b.CreateLoad(i64, field(s, 0))
                       : sym == st.length ? b.CreateLoad(i64, field(s, 1))
                                          : static_cast<llvm::Value *>(step->getArg(arg++));
      b.CreateStore(v, b.CreateConstGEP1_64(i64, dims, d));
      dim_values.push_back(v);
    }
    // Invalid dims (or a full state): NAME_run_packed says which, running
    // nothing (it checks before it runs) — called only on that path.
    llvm::Value *size = b.CreateCall(size_fn, dim_values);
    llvm::Value *reject = b.CreateOr(b.CreateICmpSLT(size, b.getInt64(0)), state_overflows(b, dims, m.symbols, st));
    auto *rejected = llvm::BasicBlock::Create(c, "rejected", step), *accepted = llvm::BasicBlock::Create(c, "accepted", step);
    b.CreateCondBr(reject, rejected, accepted);
    b.SetInsertPoint(rejected);
    b.CreateRet(target.run(b, ctx, buffers, dims, null));
    b.SetInsertPoint(accepted);
    if (ctx)
      target.enter_context(b, ctx);
    // The state's workspace, grown on demand (at least 64 bytes: never the run's own).
    size = b.CreateBinaryIntrinsic(llvm::Intrinsic::smax, size, b.getInt64(64));
    auto *grow = llvm::BasicBlock::Create(c, "grow", step), *run = llvm::BasicBlock::Create(c, "run", step);
    b.CreateCondBr(b.CreateICmpSGT(size, b.CreateLoad(i64, field(s, 3))), grow, run);
    b.SetInsertPoint(grow);
    target.release(b, b.CreateLoad(ptr, field(s, 2)));
    llvm::Value *mem = target.alloc_workspace(b, b.CreateAdd(size, b.getInt64(64)));
    b.CreateStore(mem, field(s, 2));
    b.CreateStore(b.CreateSelect(b.CreateICmpEQ(mem, null), b.getInt64(0), size), field(s, 3));
    return_if(b, b.CreateICmpEQ(mem, null), b.getInt32(static_cast<int32_t>(RunStatus::out_of_memory)));
    b.CreateBr(run);
    b.SetInsertPoint(run);
    llvm::Value *ws = align_to_64(b, b.CreateLoad(ptr, field(s, 2)));
    llvm::Value *status = target.run(b, ctx, buffers, dims, ws);
    auto *advance = llvm::BasicBlock::Create(c, "advance", step), *done = llvm::BasicBlock::Create(c, "done", step);
    b.CreateCondBr(b.CreateICmpEQ(status, b.getInt32(0)), advance, done);
    b.SetInsertPoint(advance);
    llvm::Value *rows = emit_dims_value(b, dims, m.symbols, st.advance);
    b.CreateStore(b.CreateAdd(b.CreateLoad(i64, field(s, 1)), rows), field(s, 1));
    b.CreateBr(done);
    b.SetInsertPoint(done);
    b.CreateRet(status);
  }
}

llvm::Value *align_to_64(llvm::IRBuilder<> &b, llvm::Value *mem) {
  llvm::Type *i64 = b.getInt64Ty();
  llvm::Value *addr = b.CreatePtrToInt(mem, i64);
  llvm::Value *aligned = b.CreateAnd(b.CreateAdd(addr, b.getInt64(63)), b.getInt64(~int64_t(63)));
  return b.CreateGEP(b.getInt8Ty(), mem, b.CreateSub(aligned, addr));
}

llvm::Value *clamp_symbol_value(llvm::IRBuilder<> &b, llvm::Value *v, bool is_signed, int64_t bound,
                                llvm::Value **out_of_bound) {
  v = is_signed ? b.CreateSExtOrTrunc(v, b.getInt64Ty()) : b.CreateZExtOrTrunc(v, b.getInt64Ty());
  if (out_of_bound) // unsigned compare: negative values are huge
    *out_of_bound = b.CreateICmpUGT(v, b.getInt64(bound));
  v = b.CreateBinaryIntrinsic(llvm::Intrinsic::smax, v, b.getInt64(0));
  return b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, v, b.getInt64(bound));
}

llvm::Value *graph_dims_array(llvm::IRBuilder<> &b, llvm::Value *dims, size_t params, size_t internal) {
  if (internal == 0)
    return dims;
  size_t all = params + internal + 1; // the last: the out-of-bound flag
  llvm::Value *own = b.CreateAlloca(b.getInt64Ty(), b.getInt64(static_cast<int64_t>(all)));
  b.CreateMemSet(own, b.getInt8(0), all * 8, llvm::MaybeAlign(8));
  if (params)
    b.CreateMemCpy(own, llvm::MaybeAlign(8), dims, llvm::MaybeAlign(8), params * 8);
  return own;
}

llvm::Value *defined_symbols_failed(llvm::IRBuilder<> &b, llvm::Value *own, llvm::Value *dims, size_t params,
                                    size_t internal, size_t defined, bool copy_back) {
  if (copy_back)
    b.CreateMemCpy(b.CreateConstGEP1_64(b.getInt64Ty(), dims, params), llvm::MaybeAlign(8),
                   b.CreateConstGEP1_64(b.getInt64Ty(), own, params), llvm::MaybeAlign(8), defined * 8);
  llvm::Value *flag = b.CreateLoad(b.getInt64Ty(), b.CreateConstGEP1_64(b.getInt64Ty(), own, params + internal));
  return b.CreateICmpNE(flag, b.getInt64(0));
}

llvm::BranchInst *emit_counted_loop(llvm::IRBuilder<> &b, llvm::Value *n, const std::function<void(llvm::Value *)> &body,
                                    const std::string &prefix, const std::string &counter, bool no_wrap) {
  llvm::LLVMContext &ctx = b.getContext();
  llvm::Function *fn = b.GetInsertBlock()->getParent();
  llvm::BasicBlock *pre = b.GetInsertBlock();
  auto *header = llvm::BasicBlock::Create(ctx, prefix + "loop", fn);
  auto *bodyb = llvm::BasicBlock::Create(ctx, prefix + "body", fn);
  auto *exit = llvm::BasicBlock::Create(ctx, prefix + "exit", fn);
  b.CreateBr(header);
  b.SetInsertPoint(header);
  llvm::PHINode *i = b.CreatePHI(b.getInt64Ty(), 2, counter);
  i->addIncoming(b.getInt64(0), pre);
  b.CreateCondBr(b.CreateICmpSLT(i, n), bodyb, exit);
  b.SetInsertPoint(bodyb);
  body(i);
  i->addIncoming(b.CreateAdd(i, b.getInt64(1), "", no_wrap, no_wrap), b.GetInsertBlock());
  llvm::BranchInst *latch = b.CreateBr(header);
  b.SetInsertPoint(exit);
  return latch;
}

void set_loop_unroll(llvm::BranchInst *latch, unsigned unroll) {
  if (unroll == 0)
    return;
  llvm::LLVMContext &ctx = latch->getContext();
  llvm::Metadata *hint = unroll == 1
                             ? llvm::MDNode::get(ctx, llvm::MDString::get(ctx, "llvm.loop.unroll.disable"))
                             : llvm::MDNode::get(ctx, {llvm::MDString::get(ctx, "llvm.loop.unroll.count"),
                                                       llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(
                                                           llvm::Type::getInt32Ty(ctx), unroll))});
  llvm::TempMDTuple temp = llvm::MDNode::getTemporary(ctx, {});
  llvm::Metadata *ops[] = {temp.get(), hint};
  llvm::MDNode *id = llvm::MDNode::get(ctx, ops);
  id->replaceOperandWith(0, id);
  latch->setMetadata(llvm::LLVMContext::MD_loop, id);
}

void emit_if(llvm::IRBuilder<> &b, llvm::Value *cond, const std::function<void()> &then) {
  llvm::Function *fn = b.GetInsertBlock()->getParent();
  auto *yes = llvm::BasicBlock::Create(b.getContext(), "then", fn);
  auto *done = llvm::BasicBlock::Create(b.getContext(), "endif", fn);
  b.CreateCondBr(cond, yes, done);
  b.SetInsertPoint(yes);
  then();
  b.CreateBr(done);
  b.SetInsertPoint(done);
}

LoopCells loop_cells(llvm::IRBuilder<> &b, const Graph &graph, const Node &node, llvm::Value *scratch,
                     const std::function<llvm::Value *(const Dim &)> &dim) {
  llvm::Type *i8 = b.getInt8Ty();
  LoopCells cells;
  cells.iter = scratch;
  cells.cond_in = b.CreateConstGEP1_64(i8, scratch, kLoopScalarBytes);
  cells.cond_out = b.CreateConstGEP1_64(i8, scratch, 2 * kLoopScalarBytes);
  llvm::Value *offset = b.getInt64(3 * kLoopScalarBytes);
  for (ValueId r : node.results) {
    const TensorType &t = graph.type_of(r);
    llvm::Value *n = b.getInt64(static_cast<int64_t>(dtype_size(t.dtype)));
    for (const Dim &d : t.shape)
      n = b.CreateMul(n, dim(d));
    cells.bytes.push_back(n);
    cells.spare.push_back(b.CreateGEP(i8, scratch, offset));
    offset = b.CreateAnd(b.CreateAdd(b.CreateAdd(offset, n), b.getInt64(63)), b.getInt64(~int64_t(63)));
  }
  return cells;
}

void LoopCells::store_table(llvm::IRBuilder<> &b, llvm::Value *table, llvm::Value *odd,
                            const std::vector<llvm::Value *> &results,
                            const std::vector<llvm::Value *> &captures) const {
  std::vector<llvm::Value *> entries{iter, cond_in};
  for (size_t k = 0; k < results.size(); ++k)
    entries.push_back(b.CreateSelect(odd, spare[k], results[k]));
  entries.insert(entries.end(), captures.begin(), captures.end());
  entries.push_back(cond_out);
  for (size_t k = 0; k < results.size(); ++k)
    entries.push_back(b.CreateSelect(odd, results[k], spare[k]));
  for (size_t e = 0; e < entries.size(); ++e)
    b.CreateStore(entries[e], b.CreateConstGEP1_64(b.getPtrTy(), table, e));
}

} // namespace maxc::codegen
