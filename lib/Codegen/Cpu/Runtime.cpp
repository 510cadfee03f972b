#include "Cpu/Runtime.h"

#include "maxc/Support/Error.h"

#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/IR/IntrinsicsAArch64.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/Module.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>
#include <llvm/Linker/Linker.h>
#include <llvm/Support/MemoryBuffer.h>

#include <vector>

namespace maxc::codegen {

namespace {

// RuntimePool.c as bitcode (lib/CMakeLists.txt builds the .inc).
const unsigned char kRuntimeBitcode[] = {
#include "RuntimePool.bc.inc"
};
// The same compiled with -DMAXC_RT_PROFILE: the pool plus RuntimeProfile.c.
const unsigned char kProfileRuntimeBitcode[] = {
#include "RuntimePoolProfile.bc.inc"
};

constexpr const char *kPrefix = "maxc_rt_";

std::string parallel_for_name(const std::string &prefix) { return prefix + ".rt.parallel_for"; }

} // namespace

llvm::FunctionType *task_function_type(llvm::LLVMContext &c) {
  return llvm::FunctionType::get(llvm::Type::getVoidTy(c),
                                 {llvm::PointerType::getUnqual(c), llvm::Type::getInt64Ty(c)}, false);
}

llvm::Function *create_task_function(llvm::Module &m, const std::string &name, llvm::IRBuilder<> &entry,
                                     llvm::IRBuilder<> &body) {
  llvm::LLVMContext &c = m.getContext();
  auto *fn = llvm::Function::Create(task_function_type(c), llvm::GlobalValue::InternalLinkage, name, m);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  auto *entry_block = llvm::BasicBlock::Create(c, "entry", fn);
  auto *body_block = llvm::BasicBlock::Create(c, "body", fn);
  entry.SetInsertPoint(entry_block);
  entry.SetInsertPoint(entry.CreateBr(body_block));
  body.SetInsertPoint(body_block);
  return fn;
}

llvm::Value *task_arg(llvm::IRBuilder<> &entry, llvm::StructType *st, llvm::Value *args, unsigned i,
                      llvm::Type *type) {
  return entry.CreateLoad(type, entry.CreateStructGEP(st, args, i));
}

llvm::Value *emit_task_args(llvm::IRBuilder<> &b, llvm::StructType *st, const std::vector<llvm::Value *> &fields) {
  llvm::Function *fn = b.GetInsertBlock()->getParent();
  llvm::IRBuilder<> entry(&fn->getEntryBlock(), fn->getEntryBlock().begin());
  llvm::Value *args = entry.CreateAlloca(st);
  for (unsigned i = 0; i < fields.size(); ++i)
    b.CreateStore(fields[i], b.CreateStructGEP(st, args, i));
  return args;
}

void emit_parallel_for(llvm::IRBuilder<> &b, const std::string &prefix, llvm::Value *ctx, llvm::Value *count,
                       llvm::Function *task, llvm::Value *work) {
  llvm::Module &m = *b.GetInsertBlock()->getModule();
  llvm::LLVMContext &c = m.getContext();
  auto *pf_type =
      llvm::FunctionType::get(b.getVoidTy(), {b.getPtrTy(), b.getInt64Ty(), b.getPtrTy(), b.getInt64Ty()}, false);
  llvm::FunctionCallee pf = m.getOrInsertFunction(parallel_for_name(prefix), pf_type);
  if (auto *f = llvm::dyn_cast<llvm::Function>(pf.getCallee()))
    f->addFnAttr(llvm::Attribute::NoUnwind);
  llvm::Function *fn = b.GetInsertBlock()->getParent();
  auto *one = llvm::BasicBlock::Create(c, "par.one", fn);
  auto *many = llvm::BasicBlock::Create(c, "par.many", fn);
  auto *join = llvm::BasicBlock::Create(c, "par.join", fn);
  b.CreateCondBr(b.CreateICmpSGT(count, b.getInt64(1)), many, one);
  b.SetInsertPoint(one);
  b.CreateCall(task, {ctx, b.getInt64(0)});
  b.CreateBr(join);
  b.SetInsertPoint(many);
  b.CreateCall(pf, {ctx, count, task, work ? work : b.getInt64(-1)});
  b.CreateBr(join);
  b.SetInsertPoint(join);
}

llvm::Value *emit_profile_begin(llvm::IRBuilder<> &b, const std::string &prefix) {
  llvm::Module &m = *b.GetInsertBlock()->getModule();
  llvm::FunctionCallee begin =
      m.getOrInsertFunction(prefix + ".rt.profile_begin", llvm::FunctionType::get(b.getInt64Ty(), false));
  return b.CreateCall(begin, {}, "profile.t0");
}

void emit_profile_end(llvm::IRBuilder<> &b, const std::string &prefix, llvm::Value *counter, llvm::Value *t0) {
  llvm::Module &m = *b.GetInsertBlock()->getModule();
  llvm::FunctionCallee end = m.getOrInsertFunction(
      prefix + ".rt.profile_end", llvm::FunctionType::get(b.getVoidTy(), {b.getPtrTy(), b.getInt64Ty()}, false));
  b.CreateCall(end, {counter, t0});
}

void link_cpu_runtime(llvm::Module &module, const std::string &name, bool profile, const std::string &triple_name) {
  llvm::StringRef bytes = profile ? llvm::StringRef(reinterpret_cast<const char *>(kProfileRuntimeBitcode),
                                                    sizeof kProfileRuntimeBitcode)
                                  : llvm::StringRef(reinterpret_cast<const char *>(kRuntimeBitcode), sizeof kRuntimeBitcode);
  auto parsed = llvm::parseBitcodeFile(llvm::MemoryBufferRef(bytes, "maxc-cpu-runtime"), module.getContext());
  if (!parsed)
    throw Error(ErrorCode::Internal, "cannot read the CPU runtime's bitcode: " + llvm::toString(parsed.takeError()));
  std::unique_ptr<llvm::Module> rt = std::move(*parsed);
  // Target-neutral: the model's triple, data layout and CPU apply (see
  // RuntimePool.c: it declares no type whose layout differs between them).
  rt->setTargetTriple(module.getTargetTriple());
  rt->setDataLayout(module.getDataLayout());
  if (llvm::NamedMDNode *flags = rt->getModuleFlagsMetadata())
    rt->eraseNamedMetadata(flags);
  if (llvm::NamedMDNode *ident = rt->getNamedMetadata("llvm.ident"))
    rt->eraseNamedMetadata(ident);
  // maxc_rt_relax: the target's spin-wait hint.
  if (llvm::Function *relax = rt->getFunction(std::string(kPrefix) + "relax"); relax && relax->isDeclaration()) {
    llvm::IRBuilder<> rb(llvm::BasicBlock::Create(rt->getContext(), "entry", relax));
    llvm::Triple triple(triple_name.empty() ? llvm::sys::getProcessTriple() : triple_name);
    if (triple.isX86())
      rb.CreateIntrinsic(llvm::Intrinsic::x86_sse2_pause, {}, {});
    else if (triple.isAArch64())
      rb.CreateIntrinsic(llvm::Intrinsic::aarch64_hint, {}, {rb.getInt32(1)}); // yield
    rb.CreateRetVoid();
    relax->setLinkage(llvm::GlobalValue::ExternalLinkage);
  }
  std::vector<std::string> internal;
  auto rename = [&](llvm::GlobalValue &gv) {
    if (gv.isDeclaration() || !gv.getName().starts_with(kPrefix))
      return;
    std::string base = gv.getName().drop_front(std::strlen(kPrefix)).str();
    if (base == "set_num_threads" || base == "set_parallel_for" || base == "set_communicator") {
      gv.setName(name + "_" + base);
      gv.setVisibility(llvm::GlobalValue::DefaultVisibility);
      gv.setDSOLocal(false);
      return;
    }
    // External until linked (so that NAME.rt.parallel_for resolves the
    // kernels' declaration), internal after.
    gv.setName(name + ".rt." + base);
    gv.setLinkage(llvm::GlobalValue::ExternalLinkage);
    internal.push_back(gv.getName().str());
  };
  for (llvm::Function &f : *rt) {
    for (const char *attr : {"target-cpu", "target-features", "tune-cpu", "no-builtins", "stack-protector-buffer-size"})
      f.removeFnAttr(attr);
    rename(f);
  }
  for (llvm::GlobalVariable &gv : rt->globals())
    if (gv.hasLocalLinkage())
      gv.setName(name + ".rt." + gv.getName().str()); // readable, and distinct from the model's
  if (llvm::Linker::linkModules(module, std::move(rt)))
    throw Error(ErrorCode::Internal, "cannot link the CPU runtime into model '" + name + "'");
  for (const std::string &n : internal)
    if (llvm::GlobalValue *gv = module.getNamedValue(n))
      gv->setLinkage(llvm::GlobalValue::InternalLinkage);
}

} // namespace maxc::codegen
