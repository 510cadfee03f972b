// Element math in the CPU's hot loops is vector code: the f32 polynomials of
// MathEmitter.h (exp, erf, tanh; accuracy in MathTest.cpp) are inlined, so
// after the optimizer the task functions of BERT's GELU (div, erf, add, mul,
// mul as ONNX spells it), GPT's tanh GELU in a GEMM epilogue and a softmax
// row kernel hold 16-lane AVX-512 arithmetic (<16 x float>, the exp's
// roundeven on 16 lanes) and no libm call, on AMD (znver4) and on Intel
// CPUs, whose prefer-256-bit tuning the kernels override (KernelEmitter's
// prefer-vector-width=512: the GEMM's zmm code runs anyway). Checked on the
// optimized IR, so the test needs no AVX-512 machine.
#include "TestUtil.h"
#include "maxc/Codegen/ModelCompiler.h"
#include "maxc/Codegen/ObjectEmitter.h"
#include "maxc/Codegen/Target.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/raw_ostream.h>

using namespace maxc;
using namespace maxc::test;

namespace {

/// The optimized IR of every task function (NAME.rows*, NAME.gemm_panel*)
/// of `build` on `types`, for `cpu`; `tasks` gets their count.
std::string task_ir(const std::vector<TensorType> &types, const BuildFn &build, size_t &tasks,
                    const char *cpu = "znver4") {
  std::unique_ptr<Graph> graph = trace_graph(types, build);
  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> module = build_model_module(*graph, "vm", context);
  optimize_module(*module, resolve_cpu_target("x86_64-linux-gnu", cpu, 3));
  std::string text;
  llvm::raw_string_ostream os(text);
  tasks = 0;
  for (llvm::Function &f : *module) {
    std::string name = f.getName().str();
    if (f.isDeclaration() || (name.rfind("vm.rows", 0) != 0 && name.rfind("vm.gemm_panel", 0) != 0))
      continue;
    ++tasks;
    f.print(os);
  }
  return text;
}

void require_vector_math(const std::string &ir) {
  INFO(ir.substr(0, 4000));
  CHECK(ir.find("<16 x float>") != std::string::npos);
  CHECK(ir.find("@llvm.roundeven.v16f32") != std::string::npos); // the exp polynomial, 16 lanes
  for (const char *libm : {"@erff", "@tanhf", "@expf", "@erf(", "@tanh(", "@exp("})
    CHECK(ir.find(libm) == std::string::npos);
}

} // namespace

TEST_CASE("vector math: BERT's erf GELU in an elementwise task", "[codegen][math][threads]") {
  size_t tasks = 0;
  std::string ir = task_ir({TensorType(DType::f32, {128, 1024})},
                           [](auto &x) {
                             Tensor e = ops::erf(x[0] / 1.4142135381698608);
                             return std::vector<Tensor>{x[0] * (e + 1.0) * 0.5};
                           },
                           tasks);
  REQUIRE(tasks == 1);
  require_vector_math(ir);
  for (const char *intel : {"skylake-avx512", "rocketlake"}) {
    INFO(intel);
    require_vector_math(task_ir({TensorType(DType::f32, {128, 1024})},
                                [](auto &x) { return std::vector<Tensor>{ops::gelu(x[0])}; }, tasks, intel));
  }
  // AVX2: 8 lanes, still polynomials.
  ir = task_ir({TensorType(DType::f32, {128, 1024})}, [](auto &x) { return std::vector<Tensor>{ops::gelu(x[0])}; },
               tasks, "haswell");
  CHECK(ir.find("@llvm.roundeven.v8f32") != std::string::npos);
  CHECK(ir.find("@erff") == std::string::npos);
}

TEST_CASE("vector math: GPT's tanh GELU in a GEMM epilogue, softmax rows", "[codegen][math][threads]") {
  size_t tasks = 0;
  std::string ir = task_ir({TensorType(DType::f32, {128, 256}), TensorType(DType::f32, {256, 512}),
                            TensorType(DType::f32, {512}), TensorType(DType::f32, {64, 1000})},
                           [](auto &x) {
                             return std::vector<Tensor>{ops::gelu(ops::matmul(x[0], x[1]) + x[2], "tanh"),
                                                        ops::softmax(x[3])};
                           },
                           tasks);
  REQUIRE(tasks >= 2);
  require_vector_math(ir);
}
