#include "EntryPointUtil.h"

#include "maxc/Support/Error.h"

#include <cctype>

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

llvm::Value *dims_invalid(llvm::IRBuilder<> &b, llvm::Value *dims, const std::vector<std::string> &symbols,
                          const std::string &bound) {
  llvm::Type *i64 = b.getInt64Ty();
  llvm::Module *m = b.GetInsertBlock()->getModule();
  std::vector<llvm::Value *> values;
  llvm::Value *bad = b.getFalse();
  for (size_t i = 0; i < symbols.size(); ++i) {
    values.push_back(b.CreateLoad(i64, b.CreateConstGEP1_64(i64, dims, i)));
    bad = b.CreateOr(bad, b.CreateICmpUGT(values.back(), b.getInt64(int64_t(1) << 40)));
  }
  // The bound's canonical text: terms "c*a*b" joined by '+' or '-'.
  auto checked = [&](llvm::Intrinsic::ID id, llvm::Value *x, llvm::Value *y) {
    llvm::Function *fn = llvm::Intrinsic::getDeclaration(m, id, {i64});
    llvm::Value *pair = b.CreateCall(fn, {x, y});
    bad = b.CreateOr(bad, b.CreateExtractValue(pair, 1));
    return b.CreateExtractValue(pair, 0);
  };
  llvm::Value *total = b.getInt64(0);
  size_t i = 0;
  while (i < bound.size()) {
    bool negative = false;
    if (bound[i] == '+' || bound[i] == '-')
      negative = bound[i++] == '-';
    size_t end = bound.find_first_of("+-", i);
    std::string term = bound.substr(i, end == std::string::npos ? std::string::npos : end - i);
    i = end == std::string::npos ? bound.size() : end;
    llvm::Value *product = b.getInt64(1);
    for (size_t f = 0; f <= term.size();) {
      size_t star = term.find('*', f);
      std::string factor = term.substr(f, star == std::string::npos ? std::string::npos : star - f);
      f = star == std::string::npos ? term.size() + 1 : star + 1;
      llvm::Value *v = nullptr;
      if (!factor.empty() && std::isdigit(static_cast<unsigned char>(factor[0])))
        v = b.getInt64(static_cast<int64_t>(std::stoull(factor)));
      else
        for (size_t s = 0; s < symbols.size(); ++s)
          if (symbols[s] == factor)
            v = values[s];
      if (!v)
        throw Error(ErrorCode::Internal, "workspace bound '" + bound + "' names '" + factor + "', not a dim");
      product = checked(llvm::Intrinsic::smul_with_overflow, product, v);
    }
    total = checked(negative ? llvm::Intrinsic::ssub_with_overflow : llvm::Intrinsic::sadd_with_overflow, total,
                    product);
  }
  return bad;
}

llvm::Value *align_to_64(llvm::IRBuilder<> &b, llvm::Value *mem) {
  llvm::Type *i64 = b.getInt64Ty();
  llvm::Value *addr = b.CreatePtrToInt(mem, i64);
  llvm::Value *aligned = b.CreateAnd(b.CreateAdd(addr, b.getInt64(63)), b.getInt64(~int64_t(63)));
  return b.CreateGEP(b.getInt8Ty(), mem, b.CreateSub(aligned, addr));
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
