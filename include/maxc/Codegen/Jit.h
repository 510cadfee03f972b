// In-process execution of a generated module through LLVM ORC (LLJIT), for
// `maxc run --device cpu` and for tests that compare compiled kernels with
// the reference interpreter without linking a program.
#pragma once

#include <functional>
#include <memory>
#include <string>

namespace llvm {
class Module;
class LLVMContext;
}

namespace maxc {

class JitModule {
public:
  /// JIT-compiles `module` (created in `context`, both moved in) for the host
  /// CPU at the given optimization level. Symbols of libc/libm resolve from
  /// the current process. Throws maxc::Error on failure. `cpu` other than
  /// "native" compiles for that CPU of the host's architecture instead (tests
  /// of the narrower-vector kernels: "haswell" runs on an AVX-512 host).
  /// `optimized`, if given, sees the module after optimization, before it
  /// is compiled (maxc profile's cliff check, Codegen/LoopCheck.h).
  JitModule(std::unique_ptr<llvm::LLVMContext> context, std::unique_ptr<llvm::Module> module, int opt_level = 2,
            const std::string &cpu = "native", const std::function<void(llvm::Module &)> &optimized = {});
  ~JitModule();
  JitModule(const JitModule &) = delete;
  JitModule &operator=(const JitModule &) = delete;

  /// Address of a function defined by the module; throws if missing.
  void *lookup(const std::string &name) const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace maxc
