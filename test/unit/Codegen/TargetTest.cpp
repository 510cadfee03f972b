// Target resolution, object emission and the ORC JIT.
#include "TestUtil.h"

#include "maxc/Codegen/Jit.h"
#include "maxc/Codegen/ObjectEmitter.h"
#include "maxc/Codegen/Target.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

using maxc::CpuTarget;
using maxc::ErrorCode;

namespace {

bool contains(const std::vector<std::string> &names, const std::string &name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

/// "x86_64" or "aarch64": the architecture this test runs on.
bool host_is_aarch64() {
#if defined(__aarch64__)
  return true;
#else
  return false;
#endif
}

} // namespace

TEST_CASE("known_cpus lists LLVM's CPUs for the architecture", "[codegen][target]") {
  std::vector<std::string> cpus = maxc::known_cpus("x86_64-linux-gnu");
  CHECK(contains(cpus, "skylake-avx512"));
  CHECK(contains(cpus, "x86-64-v3"));
  CHECK(contains(cpus, "znver4"));
  CHECK(std::is_sorted(cpus.begin(), cpus.end()));
  CHECK(std::adjacent_find(cpus.begin(), cpus.end()) == cpus.end());

  std::vector<std::string> arm = maxc::known_cpus("aarch64-linux-gnu");
  CHECK(contains(arm, "generic"));
  CHECK(contains(arm, "neoverse-v2"));
  CHECK_FALSE(contains(arm, "znver4"));

  MAXC_REQUIRE_ERROR(maxc::known_cpus("riscv64-linux-gnu"), ErrorCode::InvalidArgument, "x86_64-linux-gnu");
}

TEST_CASE("resolve_cpu_target validates the triple", "[codegen][target]") {
  CpuTarget def = maxc::resolve_cpu_target("", "", 2);
  CHECK(def.triple == "x86_64-unknown-linux-gnu");
  CHECK(def.cpu == "x86-64");
  CHECK(def.features.empty());
  CHECK(def.opt_level == 2);

  CHECK(maxc::resolve_cpu_target("x86_64-linux-gnu", "znver4", 3).triple == "x86_64-unknown-linux-gnu");

  MAXC_REQUIRE_ERROR(maxc::resolve_cpu_target("riscv64-linux-gnu", "", 2), ErrorCode::InvalidArgument,
                     "aarch64-linux-gnu");
  MAXC_REQUIRE_ERROR(maxc::resolve_cpu_target("x86_64-pc-windows-msvc", "", 2), ErrorCode::InvalidArgument,
                     "x86_64-linux-gnu");
  MAXC_REQUIRE_ERROR(maxc::resolve_cpu_target("nonsense", "", 2), ErrorCode::InvalidArgument, "nonsense");
}

TEST_CASE("resolve_cpu_target rejects unknown CPUs before LLVM sees them", "[codegen][target]") {
  MAXC_REQUIRE_ERROR(maxc::resolve_cpu_target("x86_64-linux-gnu", "znver99", 2), ErrorCode::InvalidArgument,
                     "znver4");
  MAXC_REQUIRE_ERROR(maxc::resolve_cpu_target("x86_64-linux-gnu", "skylake-avx51", 2),
                     ErrorCode::InvalidArgument, "did you mean 'skylake-avx512'");
  // An x86 CPU is not an aarch64 CPU.
  MAXC_REQUIRE_ERROR(maxc::resolve_cpu_target("aarch64-linux-gnu", "znver4", 2), ErrorCode::InvalidArgument,
                     "neoverse-v2");
}

TEST_CASE("resolve_cpu_target checks the optimization level", "[codegen][target]") {
  MAXC_REQUIRE_ERROR(maxc::resolve_cpu_target("", "", 4), ErrorCode::InvalidArgument, "0..3");
  MAXC_REQUIRE_ERROR(maxc::resolve_cpu_target("", "", -1), ErrorCode::InvalidArgument, "0..3");
  for (int level = 0; level <= 3; ++level)
    CHECK(maxc::resolve_cpu_target("", "", level).opt_level == level);
}

TEST_CASE("cpu native resolves to the host CPU", "[codegen][target]") {
  const std::string host_triple = host_is_aarch64() ? "aarch64-linux-gnu" : "x86_64-linux-gnu";
  const std::string other_triple = host_is_aarch64() ? "x86_64-linux-gnu" : "aarch64-linux-gnu";

  CpuTarget native = maxc::resolve_cpu_target(host_triple, "native", 3);
  INFO(native.cpu);
  CHECK(native.cpu != "native");
  CHECK(contains(maxc::known_cpus(host_triple), native.cpu));
  CHECK_FALSE(native.features.empty());
  CHECK((native.features[0] == '+' || native.features[0] == '-'));
  // Deterministic: the same string every time.
  CHECK(maxc::resolve_cpu_target(host_triple, "native", 3).features == native.features);

  // Another architecture has no "native" CPU.
  MAXC_REQUIRE_ERROR(maxc::resolve_cpu_target(other_triple, "native", 2), ErrorCode::InvalidArgument, "--cpu");
}

TEST_CASE("aarch64 targets resolve", "[codegen][target]") {
  CpuTarget arm = maxc::resolve_cpu_target("aarch64-linux-gnu", "", 2);
  CHECK(arm.triple == "aarch64-unknown-linux-gnu");
  CHECK(arm.cpu == "generic");
  CHECK(maxc::resolve_cpu_target("aarch64-linux-gnu", "neoverse-v2", 3).cpu == "neoverse-v2");
}

// The JIT and emission tests build LLVM IR by hand, so they need LLVM's
// headers on the test target's include path.
#if __has_include(<llvm/IR/IRBuilder.h>)

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Target/TargetMachine.h>

namespace {

/// i32 add1(i32 x) { return x + 1; }
/// float sum_f32(const float *p, i64 n) { float s = 0; for (i < n) s += p[i]; return s; }
///   (the fadd is `reassoc`, so the loop vectorizer may vectorize it)
/// double call_cos(double x) { return cos(x); }   (libm from the process)
std::unique_ptr<llvm::Module> build_test_module(llvm::LLVMContext &ctx) {
  auto module = std::make_unique<llvm::Module>("codegen_test", ctx);
  llvm::IRBuilder<> b(ctx);
  llvm::Type *i32 = b.getInt32Ty(), *i64 = b.getInt64Ty(), *f32 = b.getFloatTy(), *f64 = b.getDoubleTy();
  llvm::Type *ptr = b.getPtrTy();

  {
    auto *fn = llvm::Function::Create(llvm::FunctionType::get(i32, {i32}, false),
                                      llvm::Function::ExternalLinkage, "add1", *module);
    b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", fn));
    b.CreateRet(b.CreateAdd(fn->getArg(0), b.getInt32(1), "r"));
  }
  {
    auto *fn = llvm::Function::Create(llvm::FunctionType::get(f32, {ptr, i64}, false),
                                      llvm::Function::ExternalLinkage, "sum_f32", *module);
    llvm::Value *p = fn->getArg(0), *n = fn->getArg(1);
    auto *entry = llvm::BasicBlock::Create(ctx, "entry", fn);
    auto *loop = llvm::BasicBlock::Create(ctx, "loop", fn);
    auto *exit = llvm::BasicBlock::Create(ctx, "exit", fn);
    b.SetInsertPoint(entry);
    b.CreateCondBr(b.CreateICmpSGT(n, b.getInt64(0)), loop, exit);

    b.SetInsertPoint(loop);
    llvm::PHINode *i = b.CreatePHI(i64, 2, "i");
    llvm::PHINode *acc = b.CreatePHI(f32, 2, "acc");
    llvm::Value *x = b.CreateLoad(f32, b.CreateGEP(f32, p, i), "x");
    llvm::FastMathFlags fmf;
    fmf.setAllowReassoc();
    b.setFastMathFlags(fmf);
    llvm::Value *acc_next = b.CreateFAdd(acc, x, "acc.next");
    b.clearFastMathFlags();
    llvm::Value *i_next = b.CreateAdd(i, b.getInt64(1), "i.next", /*HasNUW=*/true, /*HasNSW=*/true);
    b.CreateCondBr(b.CreateICmpSLT(i_next, n), loop, exit);
    i->addIncoming(b.getInt64(0), entry);
    i->addIncoming(i_next, loop);
    acc->addIncoming(llvm::ConstantFP::get(f32, 0.0), entry);
    acc->addIncoming(acc_next, loop);

    b.SetInsertPoint(exit);
    llvm::PHINode *result = b.CreatePHI(f32, 2, "result");
    result->addIncoming(llvm::ConstantFP::get(f32, 0.0), entry);
    result->addIncoming(acc_next, loop);
    b.CreateRet(result);
  }
  {
    llvm::FunctionCallee cos = module->getOrInsertFunction("cos", llvm::FunctionType::get(f64, {f64}, false));
    auto *fn = llvm::Function::Create(llvm::FunctionType::get(f64, {f64}, false),
                                      llvm::Function::ExternalLinkage, "call_cos", *module);
    b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", fn));
    b.CreateRet(b.CreateCall(cos, {fn->getArg(0)}));
  }
  return module;
}

uint16_t elf_machine(const std::string &object) {
  REQUIRE(object.size() > 20);
  return static_cast<uint16_t>(static_cast<unsigned char>(object[18]) |
                               (static_cast<unsigned char>(object[19]) << 8));
}

bool is_elf(const std::string &object) { return object.size() > 4 && object.compare(0, 4, "\x7f" "ELF") == 0; }

} // namespace

TEST_CASE("make_target_machine makes validated TargetMachines", "[codegen][target]") {
  CpuTarget arm = maxc::resolve_cpu_target("aarch64-linux-gnu", "", 2);
  std::unique_ptr<llvm::TargetMachine> tm = maxc::make_target_machine(arm);
  REQUIRE(tm != nullptr);
  CHECK(tm->getTargetTriple().str() == "aarch64-unknown-linux-gnu");
  CHECK(tm->getTargetCPU().str() == "generic");
  CHECK(tm->getRelocationModel() == llvm::Reloc::PIC_);

  const std::string host_triple = host_is_aarch64() ? "aarch64-linux-gnu" : "x86_64-linux-gnu";
  CpuTarget native = maxc::resolve_cpu_target(host_triple, "native", 3);
  std::unique_ptr<llvm::TargetMachine> host_tm = maxc::make_target_machine(native);
  CHECK(host_tm->getTargetCPU().str() == native.cpu);
  CHECK(host_tm->getOptLevel() == llvm::CodeGenOptLevel::Aggressive);

  // A hand-made CpuTarget is checked too: LLVM would abort on it.
  CpuTarget bad{"x86_64-unknown-linux-gnu", "znver99", "", 2};
  MAXC_REQUIRE_ERROR(maxc::make_target_machine(bad), ErrorCode::InvalidArgument, "znver4");
}

TEST_CASE("JIT compiles and runs a module", "[codegen][target][jit]") {
  for (int level : {0, 2, 3}) {
    INFO("opt level " << level);
    auto ctx = std::make_unique<llvm::LLVMContext>();
    std::unique_ptr<llvm::Module> module = build_test_module(*ctx);
    maxc::JitModule jit(std::move(ctx), std::move(module), level);

    auto add1 = reinterpret_cast<int32_t (*)(int32_t)>(jit.lookup("add1"));
    REQUIRE(add1 != nullptr);
    CHECK(add1(41) == 42);
    CHECK(add1(-1) == 0);

    auto sum = reinterpret_cast<float (*)(const float *, int64_t)>(jit.lookup("sum_f32"));
    // Integers below 2^24 add exactly in float in any order.
    std::vector<float> data(1003);
    for (size_t i = 0; i < data.size(); ++i)
      data[i] = static_cast<float>(i + 1);
    CHECK(sum(data.data(), static_cast<int64_t>(data.size())) == 1003.0f * 1004.0f / 2.0f);
    CHECK(sum(data.data(), 7) == 28.0f);
    CHECK(sum(data.data(), 0) == 0.0f);

    auto call_cos = reinterpret_cast<double (*)(double)>(jit.lookup("call_cos"));
    CHECK(call_cos(0.0) == 1.0);

    MAXC_REQUIRE_ERROR(jit.lookup("no_such_function"), ErrorCode::InvalidArgument, "no_such_function");
  }
}

TEST_CASE("emit_module writes deterministic objects, assembly and IR", "[codegen][target]") {
  llvm::LLVMContext ctx;
  std::unique_ptr<llvm::Module> module = build_test_module(ctx);
  CpuTarget x86 = maxc::resolve_cpu_target("x86_64-linux-gnu", "znver4", 3);
  maxc::optimize_module(*module, x86);

  std::string obj1 = maxc::emit_module(*module, x86, maxc::OutputKind::object);
  std::string obj2 = maxc::emit_module(*module, x86, maxc::OutputKind::object);
  REQUIRE(is_elf(obj1));
  CHECK(elf_machine(obj1) == 62); // EM_X86_64
  CHECK(obj1 == obj2);

  std::string asm_text = maxc::emit_module(*module, x86, maxc::OutputKind::assembly);
  CHECK_THAT(asm_text, Catch::Matchers::Contains("add1:"));
  CHECK_THAT(asm_text, Catch::Matchers::Contains("sum_f32:"));
  // The vectorizer saw znver4's costs (it uses zmm registers): the
  // TargetMachine reached the PassBuilder.
  CHECK_THAT(asm_text, Catch::Matchers::Contains("zmm"));
  // Emitting assembly after an object works: the module was not consumed.
  CHECK(maxc::emit_module(*module, x86, maxc::OutputKind::object) == obj1);

  std::string ir = maxc::emit_module(*module, x86, maxc::OutputKind::llvm_ir);
  CHECK_THAT(ir, Catch::Matchers::Contains("define"));
  CHECK_THAT(ir, Catch::Matchers::Contains("@add1"));
  CHECK_THAT(ir, Catch::Matchers::Contains("x86_64-unknown-linux-gnu"));

  // A module optimized for x86-64 is not emitted for aarch64.
  CpuTarget arm = maxc::resolve_cpu_target("aarch64-linux-gnu", "", 2);
  MAXC_REQUIRE_ERROR(maxc::emit_module(*module, arm, maxc::OutputKind::object), ErrorCode::InvalidArgument,
                     "aarch64");
}

TEST_CASE("emit_module targets aarch64", "[codegen][target]") {
  llvm::LLVMContext ctx;
  std::unique_ptr<llvm::Module> module = build_test_module(ctx);
  CpuTarget arm = maxc::resolve_cpu_target("aarch64-linux-gnu", "neoverse-v2", 2);
  maxc::optimize_module(*module, arm);
  std::string obj = maxc::emit_module(*module, arm, maxc::OutputKind::object);
  REQUIRE(is_elf(obj));
  CHECK(elf_machine(obj) == 183); // EM_AARCH64
  CHECK(maxc::emit_module(*module, arm, maxc::OutputKind::object) == obj);
  CHECK_THAT(maxc::emit_module(*module, arm, maxc::OutputKind::assembly), Catch::Matchers::Contains("add1:"));

  // An unoptimized module is emitted as well (O0).
  llvm::LLVMContext ctx0;
  std::unique_ptr<llvm::Module> plain = build_test_module(ctx0);
  CpuTarget arm0 = maxc::resolve_cpu_target("aarch64-linux-gnu", "", 0);
  CHECK(elf_machine(maxc::emit_module(*plain, arm0, maxc::OutputKind::object)) == 183);
}

#else

TEST_CASE("codegen JIT/emission tests need LLVM's headers", "[codegen][target]") {
  FAIL("test/CMakeLists.txt must give maxc-unit-tests LLVM's include directories: "
       "target_include_directories(maxc-unit-tests SYSTEM PRIVATE ${LLVM_INCLUDE_DIRS})");
}

#endif
