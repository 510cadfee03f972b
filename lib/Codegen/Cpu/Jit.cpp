// In-process execution through ORC's LLJIT.
#include "OptLevel.h"
#include "maxc/Codegen/Jit.h"

#include "maxc/Codegen/ObjectEmitter.h"
#include "maxc/Codegen/Target.h"
#include "maxc/Support/Error.h"

#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/Error.h>
#include <llvm/TargetParser/Host.h>

namespace maxc {

using codegen::codegen_opt_level;

namespace {

[[noreturn]] void throw_llvm_error(llvm::Error error, const std::string &what) {
  throw Error(ErrorCode::Internal, what + ": " + llvm::toString(std::move(error)));
}

template <typename T> T take(llvm::Expected<T> value, const std::string &what) {
  if (!value)
    throw_llvm_error(value.takeError(), what);
  return std::move(*value);
}

} // namespace

struct JitModule::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
};

JitModule::JitModule(std::unique_ptr<llvm::LLVMContext> context_arg, std::unique_ptr<llvm::Module> module_arg,
                     int opt_level, const std::string &cpu,
                     const std::function<void(llvm::Module &)> &optimized)
    : impl_(std::make_unique<Impl>()) {
  // Locals fix the destruction order should something below throw: the
  // module goes before its context (parameters' order is unspecified).
  std::unique_ptr<llvm::LLVMContext> context = std::move(context_arg);
  std::unique_ptr<llvm::Module> module = std::move(module_arg);
  if (!context || !module)
    throw Error(ErrorCode::InvalidArgument, "JitModule needs a context and a module");
  if (&module->getContext() != context.get())
    throw Error(ErrorCode::InvalidArgument, "JitModule: the module was not created in the given context");
  // Validates opt_level and the host (an x86-64 or aarch64 Linux machine).
  CpuTarget host = resolve_cpu_target(llvm::sys::getProcessTriple(), cpu, opt_level);
  initialize_llvm_targets();

  // Optimize for the host as an AOT build would (same pipeline, same costs).
  optimize_module(*module, host);
  if (optimized)
    optimized(*module);

  llvm::orc::JITTargetMachineBuilder jtmb =
      cpu == "native" ? take(llvm::orc::JITTargetMachineBuilder::detectHost(), "cannot detect the host for the JIT")
                      : llvm::orc::JITTargetMachineBuilder(llvm::Triple(host.triple));
  if (cpu != "native")
    jtmb.setCPU(host.cpu);
  jtmb.setCodeGenOptLevel(codegen_opt_level(opt_level));
  impl_->jit = take(llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(jtmb)).create(),
                    "cannot create the JIT");

  // libc and libm (and anything else loaded in this process) resolve by name.
  auto generator = take(llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
                            impl_->jit->getDataLayout().getGlobalPrefix()),
                        "cannot search the current process for symbols");
  impl_->jit->getMainJITDylib().addGenerator(std::move(generator));

  if (module->getDataLayout() != impl_->jit->getDataLayout())
    throw Error(ErrorCode::Internal, "JIT data layout " + impl_->jit->getDataLayout().getStringRepresentation() +
                                         " differs from the module's " +
                                         module->getDataLayout().getStringRepresentation());
  llvm::orc::ThreadSafeModule tsm(std::move(module), std::move(context));
  if (llvm::Error error = impl_->jit->addIRModule(std::move(tsm)))
    throw_llvm_error(std::move(error), "cannot add the module to the JIT");
}

JitModule::~JitModule() = default;

void *JitModule::lookup(const std::string &name) const {
  llvm::Expected<llvm::orc::ExecutorAddr> address = impl_->jit->lookup(name);
  if (!address)
    throw Error(ErrorCode::InvalidArgument,
                "JIT lookup of '" + name + "' failed: " + llvm::toString(address.takeError()));
  return address->toPtr<void *>();
}

} // namespace maxc
