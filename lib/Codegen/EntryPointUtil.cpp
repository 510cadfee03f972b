#include "EntryPointUtil.h"

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

llvm::Value *align_to_64(llvm::IRBuilder<> &b, llvm::Value *mem) {
  llvm::Type *i64 = b.getInt64Ty();
  llvm::Value *addr = b.CreatePtrToInt(mem, i64);
  llvm::Value *aligned = b.CreateAnd(b.CreateAdd(addr, b.getInt64(63)), b.getInt64(~int64_t(63)));
  return b.CreateGEP(b.getInt8Ty(), mem, b.CreateSub(aligned, addr));
}

llvm::Value *clamp_symbol_value(llvm::IRBuilder<> &b, llvm::Value *v, bool is_signed, int64_t bound) {
  v = is_signed ? b.CreateSExtOrTrunc(v, b.getInt64Ty()) : b.CreateZExtOrTrunc(v, b.getInt64Ty());
  v = b.CreateBinaryIntrinsic(llvm::Intrinsic::smax, v, b.getInt64(0));
  return b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, v, b.getInt64(bound));
}

llvm::Value *graph_dims_array(llvm::IRBuilder<> &b, llvm::Value *dims, size_t params, size_t defined) {
  if (defined == 0)
    return dims;
  size_t all = params + defined;
  llvm::Value *own = b.CreateAlloca(b.getInt64Ty(), b.getInt64(static_cast<int64_t>(all)));
  b.CreateMemSet(own, b.getInt8(0), all * 8, llvm::MaybeAlign(8));
  if (params)
    b.CreateMemCpy(own, llvm::MaybeAlign(8), dims, llvm::MaybeAlign(8), params * 8);
  return own;
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

} // namespace maxc::codegen
