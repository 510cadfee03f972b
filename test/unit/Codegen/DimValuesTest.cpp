// The LLVM values of Dims (lib/Codegen/WorkspaceLayout.h DimValues, and
// dims_invalid in EntryPointUtil.h), built from Dim::terms(): JIT-compiled
// and compared with Dim::evaluate, min/max/floordiv atoms included; and a
// dim a node defines, read by a task function (rows): loaded once in the
// task's entry block, so its loops vectorize.
#include "CompiledRunner.h"

#include "../../../lib/Codegen/EntryPointUtil.h"
#include "../../../lib/Codegen/WorkspaceLayout.h"

#include "maxc/Codegen/Jit.h"

#include "maxc/Codegen/ModelCompiler.h"

#include <llvm/IR/Instructions.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

using namespace maxc;

TEST_CASE("compiled dim values and dims_invalid agree with Dim::evaluate", "[codegen][dim]") {
  const std::vector<std::string> symbols{"a", "n"};
  Dim a("a"), n("n");
  const std::vector<Dim> dims{a * n * 3 - n + 7,
                              Dim::max(a, n * 2),
                              Dim::min({a, n, Dim(5)}) * a - 2,
                              Dim::floor_div(n * 5 - 7, 4),
                              Dim::floor_div(a * n, n + 1) - a,
                              Dim::floor_div(a - n * 3, n + 1), // negative numerators round down
                              Dim::ceil_div(a, 3) + Dim::max(a - n, Dim(0)),
                              Dim(0)};
  auto context = std::make_unique<llvm::LLVMContext>();
  auto module = std::make_unique<llvm::Module>("dims", *context);
  llvm::IRBuilder<> b(*context);
  auto *type = llvm::FunctionType::get(b.getInt64Ty(), {b.getPtrTy()}, false);
  for (size_t k = 0; k < dims.size(); ++k) {
    auto *value = llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage, "value" + std::to_string(k), *module);
    b.SetInsertPoint(llvm::BasicBlock::Create(*context, "entry", value));
    codegen::DimValues values(b, value->getArg(0), symbols);
    b.CreateRet(values.get(dims[k]));
    auto *invalid =
        llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage, "invalid" + std::to_string(k), *module);
    b.SetInsertPoint(llvm::BasicBlock::Create(*context, "entry", invalid));
    b.CreateRet(b.CreateZExt(codegen::dims_invalid(b, invalid->getArg(0), symbols, dims[k]), b.getInt64Ty()));
  }
  JitModule jit(std::move(context), std::move(module));
  using Fn = int64_t (*)(const int64_t *);
  for (size_t k = 0; k < dims.size(); ++k) {
    INFO(dims[k].to_string());
    auto value = reinterpret_cast<Fn>(jit.lookup("value" + std::to_string(k)));
    auto invalid = reinterpret_cast<Fn>(jit.lookup("invalid" + std::to_string(k)));
    for (int64_t av = 0; av <= 9; ++av)
      for (int64_t nv = 0; nv <= 9; ++nv) {
        const int64_t d[2] = {av, nv};
        CHECK(value(d) == dims[k].evaluate({{"a", av}, {"n", nv}}));
        CHECK(invalid(d) == 0);
      }
    const int64_t negative[2] = {-1, 3}, huge[2] = {int64_t(1) << 41, 3};
    CHECK(invalid(negative) == 1);
    CHECK(invalid(huge) == 1);
  }
  // Overflow of the bound, and a floordiv whose divisor is not positive.
  auto context2 = std::make_unique<llvm::LLVMContext>();
  auto module2 = std::make_unique<llvm::Module>("bad", *context2);
  llvm::IRBuilder<> b2(*context2);
  auto *type2 = llvm::FunctionType::get(b2.getInt64Ty(), {b2.getPtrTy()}, false);
  const std::vector<Dim> bounds{a * a * n * 8, Dim::floor_div(a, n) + 1};
  for (size_t k = 0; k < bounds.size(); ++k) {
    auto *fn = llvm::Function::Create(type2, llvm::GlobalValue::ExternalLinkage, "invalid" + std::to_string(k), *module2);
    b2.SetInsertPoint(llvm::BasicBlock::Create(*context2, "entry", fn));
    b2.CreateRet(b2.CreateZExt(codegen::dims_invalid(b2, fn->getArg(0), symbols, bounds[k]), b2.getInt64Ty()));
  }
  JitModule jit2(std::move(context2), std::move(module2));
  auto overflow = reinterpret_cast<Fn>(jit2.lookup("invalid0"));
  auto divisor = reinterpret_cast<Fn>(jit2.lookup("invalid1"));
  const int64_t big[2] = {int64_t(1) << 30, 4}, fine[2] = {int64_t(1) << 20, 4}, zero[2] = {5, 0}, one[2] = {5, 1};
  CHECK(overflow(big) == 1);
  CHECK(overflow(fine) == 0);
  CHECK(divisor(zero) == 1);
  CHECK(divisor(one) == 0);
}

// A symbol a node defines (bind_dim) is stored into the dims array mid-run,
// so the graph function loads it where it is read. A task function runs
// after the definition: there each such load is in the entry block (it was
// reloaded per element, inside the loop, where a store of the result might
// alias the dims array: Kokoro's generator ran its row kernels scalar).
TEST_CASE("a dim a node defines is loaded once per task function", "[codegen][dim]") {
  constexpr int64_t kRows = 48, kMax = 300;
  auto build = [](const std::vector<Tensor> &in) {
    Dim n = ops::bind_dim(ops::cast(ops::abs(in[1]) * 100.0 + 1.0, DType::i32), "n", kMax);
    Tensor col = ops::iota({Dim(kRows), n}, 1, DType::f32) * 0.01;
    Tensor y = ops::sin(col * ops::reshape(in[0], {Dim(kRows), Dim(1)})); // [rows, n], row stride n
    return std::vector<Tensor>{ops::sum(y * y, {1})};
  };
  std::vector<TensorType> types{TensorType(DType::f32, {kRows}), TensorType(DType::f32, Shape{})};
  std::unique_ptr<Graph> g = test::trace_graph(types, build);
  HostTensor x = test::random_tensor(DType::f32, {kRows}, -3, 3);
  for (float t : {0.36f, 2.5f}) { // n = 37 and 251
    INFO("t " << t);
    std::vector<HostTensor> in{x, HostTensor::scalar(DType::f32, t)};
    std::vector<HostTensor> expected = Interpreter::run(*g, in);
    MAXC_REQUIRE_CLOSE(test::run_compiled(*g, in)[0], expected[0], 1e-5, 1e-5);
  }
  llvm::LLVMContext context;
  auto module = build_model_module(*g, "m", context);
  size_t task_loads = 0;
  for (const llvm::Function &f : *module) {
    if (!f.getName().starts_with("m.rows"))
      continue;
    for (const llvm::BasicBlock &bb : f)
      for (const llvm::Instruction &inst : bb)
        if (llvm::isa<llvm::LoadInst>(inst) && inst.getName().starts_with("n")) {
          INFO(f.getName().str() << ": load of n in block " << bb.getName().str());
          CHECK(&bb == &f.getEntryBlock());
          ++task_loads;
        }
  }
  CHECK(task_loads > 0); // the kernel is a task that reads n
}
