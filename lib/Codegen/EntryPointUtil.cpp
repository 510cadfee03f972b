#include "EntryPointUtil.h"

#include "maxc/Support/Error.h"

#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

namespace maxc::codegen {

void verify_module(const llvm::Module &module, const std::string &what) {
  std::string problems;
  llvm::raw_string_ostream os(problems);
  if (llvm::verifyModule(module, &os))
    throw Error(ErrorCode::Internal, "generated " + what + " IR is invalid: " + os.str());
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

llvm::Value *align_to_64(llvm::IRBuilder<> &b, llvm::Value *mem) {
  llvm::Type *i64 = b.getInt64Ty();
  llvm::Value *addr = b.CreatePtrToInt(mem, i64);
  llvm::Value *aligned = b.CreateAnd(b.CreateAdd(addr, b.getInt64(63)), b.getInt64(~int64_t(63)));
  return b.CreateGEP(b.getInt8Ty(), mem, b.CreateSub(aligned, addr));
}

} // namespace maxc::codegen
