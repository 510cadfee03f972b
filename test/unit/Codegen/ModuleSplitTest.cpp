// split_module (Codegen/ModuleSplit.h): a big partition's pieces define
// each placed function once, copy the helpers and small constants they use,
// keep one definition of every other global, and link back into the module.
#include "maxc/Codegen/ModuleSplit.h"
#include "maxc/Codegen/ObjectEmitter.h"

#include <catch2/catch.hpp>
#include <llvm/AsmParser/Parser.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/SourceMgr.h>

#include <map>
#include <memory>
#include <string>

namespace {

// Two tasks passed by pointer (as parallel_for gets them), one large and one
// small, a graph function that is exported, a helper both tasks call, a
// small constant table, a mutable global (pool state), an unnamed one and a
// big constant.
const char *kModule = R"(
@m.table = internal constant [4 x float] [float 1.0, float 2.0, float 3.0, float 4.0]
@m.state = internal global i64 0
@m.big = internal constant [2048 x float] zeroinitializer
@0 = internal global i64 0

define internal float @m.helper(float %x) {
  %i = fptosi float %x to i64
  %p = getelementptr [4 x float], ptr @m.table, i64 0, i64 %i
  %t = load float, ptr %p
  %y = fmul float %t, %x
  ret float %y
}

define internal void @m.task.big(ptr %args, i64 %n) {
  %a = call float @m.helper(float 1.0)
  %b = fadd float %a, 2.0
  %c = fmul float %b, %b
  %d = fadd float %c, %a
  %e = fmul float %d, %d
  %f = fadd float %e, %b
  %g = fmul float %f, %f
  %p = getelementptr [2048 x float], ptr @m.big, i64 0, i64 %n
  %h = load float, ptr %p
  %s = fadd float %g, %h
  store float %s, ptr %args
  ret void
}

define internal void @m.task.small(ptr %args, i64 %n) {
  %a = call float @m.helper(float 3.0)
  store float %a, ptr %args
  %v = load i64, ptr @m.state
  %w = add i64 %v, %n
  store i64 %w, ptr @m.state
  store i64 %w, ptr @0
  ret void
}

declare void @m.rt.parallel_for(ptr, i64, ptr, i64)

define void @m_run(ptr %args) {
  call void @m.rt.parallel_for(ptr %args, i64 4, ptr @m.task.big, i64 0)
  call void @m.rt.parallel_for(ptr %args, i64 4, ptr @m.task.small, i64 0)
  ret void
}
)";

std::unique_ptr<llvm::Module> parse(llvm::LLVMContext &context, const std::string &text) {
  llvm::SMDiagnostic error;
  std::unique_ptr<llvm::Module> module = llvm::parseAssemblyString(text, error, context);
  REQUIRE(module);
  return module;
}

} // namespace

TEST_CASE("split_module places each task once and copies helpers and small constants", "[split]") {
  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> module = parse(context, kModule);
  CHECK(maxc::codegen::instruction_count(*module) == 27);
  CHECK(maxc::codegen::split_piece_count(*module) == 1);

  std::vector<std::string> pieces = maxc::codegen::split_module(*module, 2, "m.part0.");
  REQUIRE(pieces.size() == 2);
  std::vector<std::unique_ptr<llvm::Module>> parsed;
  std::map<std::string, int> defined; // name -> pieces defining it
  for (const std::string &bitcode : pieces) {
    auto piece = maxc::join_bitcode({bitcode}, context);
    CHECK_FALSE(llvm::verifyModule(*piece, &llvm::errs()));
    for (const llvm::GlobalValue &gv : piece->global_values())
      if (!gv.isDeclaration())
        ++defined[gv.getName().str()];
    parsed.push_back(std::move(piece));
  }
  // Placed: the exported function and the two tasks (renamed, hidden), once.
  CHECK(defined["m_run"] == 1);
  CHECK(defined["m.part0.m.task.big"] == 1);
  CHECK(defined["m.part0.m.task.small"] == 1);
  // The largest task alone in one piece; m_run and the small one in the other.
  const llvm::Module *big_piece = parsed[0]->getFunction("m.part0.m.task.big")->isDeclaration() ? parsed[1].get()
                                                                                              : parsed[0].get();
  CHECK(big_piece->getFunction("m_run")->isDeclaration());
  const llvm::Function *task = big_piece->getFunction("m.part0.m.task.big");
  CHECK(task->getVisibility() == llvm::GlobalValue::HiddenVisibility);
  CHECK(task->hasExternalLinkage());
  // The helper and the small table: an internal copy in each piece.
  CHECK(defined["m.helper"] == 2);
  CHECK(defined["m.table"] == 2);
  for (const auto &piece : parsed) {
    CHECK(piece->getFunction("m.helper")->hasInternalLinkage());
    CHECK(piece->getGlobalVariable("m.table", true)->hasInternalLinkage());
  }
  // Mutable state and big constants: one definition (piece 0), shared.
  CHECK(defined["m.part0.m.state"] == 1);
  CHECK(defined["m.part0.m.big"] == 1);
  CHECK(defined["m.part0.unnamed.0"] == 1); // an unnamed global, named in module order
  CHECK_FALSE(parsed[0]->getGlobalVariable("m.part0.m.state", true)->isDeclaration());
  CHECK(parsed[1]->getGlobalVariable("m.part0.m.state", true)->isDeclaration());

  // The pieces link back into one module that verifies.
  llvm::LLVMContext other;
  auto joined = maxc::join_bitcode(pieces, other);
  CHECK_FALSE(llvm::verifyModule(*joined, &llvm::errs()));
  for (const char *name : {"m_run", "m.part0.m.task.big", "m.part0.m.task.small"})
    CHECK_FALSE(joined->getFunction(name)->isDeclaration());
}

TEST_CASE("split_module leaves what it cannot split alone", "[split]") {
  llvm::LLVMContext context;
  SECTION("one piece asked") {
    auto module = parse(context, kModule);
    CHECK(maxc::codegen::split_module(*module, 1, "m.p.").empty());
  }
  SECTION("a single placed function") {
    auto module = parse(context, "define void @only() {\n  ret void\n}\n");
    CHECK(maxc::codegen::split_module(*module, 4, "m.p.").empty());
  }
  SECTION("appending globals, aliases") {
    for (const char *extra : {"@llvm.used = appending global [1 x ptr] [ptr @m_run], section \"llvm.metadata\"\n",
                              "@alias = alias void (ptr), ptr @m_run\n"}) {
      auto module = parse(context, std::string(kModule) + extra);
      CHECK(maxc::codegen::split_module(*module, 2, "m.p.").empty());
      // Nothing renamed or externalized.
      CHECK(module->getFunction("m.task.big")->hasInternalLinkage());
    }
  }
  SECTION("more pieces than placed functions") {
    auto module = parse(context, kModule);
    CHECK(maxc::codegen::split_module(*module, 8, "m.p.").size() == 3);
  }
}
