// The cliff check (include/maxc/Codegen/LoopCheck.h): after optimization,
// the innermost loops of the kernels' task functions that run one element
// at a time while striding past a cache line. A transposed read that the
// elemental loop walks column by column is found, with its node; plain
// elementwise kernels, broadcasts along either axis and a row kernel whose
// row stride is a dim a node defines (Kokoro's generator, which was scalar
// until task functions loaded such dims once) are not.
#include "CompiledRunner.h"

#include "maxc/Codegen/Jit.h"
#include "maxc/Codegen/LoopCheck.h"
#include "maxc/Codegen/ModelCompiler.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

using namespace maxc;
using namespace maxc::test;

namespace {

std::vector<ScalarStridedLoop> check_loops(const std::vector<TensorType> &types, const BuildFn &build) {
  std::unique_ptr<Graph> g = trace_graph(types, build);
  auto context = std::make_unique<llvm::LLVMContext>();
  std::unique_ptr<llvm::Module> module = build_model_module(*g, "m", *context);
  std::vector<ScalarStridedLoop> found;
  JitModule jit(std::move(context), std::move(module), 2, "native",
                [&](llvm::Module &m) { found = scalar_strided_loops(m); });
  return found;
}

} // namespace

TEST_CASE("the cliff check finds scalar loops with a long stride, and only those", "[codegen][profile]") {
  const TensorType square(DType::f32, {256, 256});
  // x^T + z: the kernel's rows are z's, its innermost loop reads x down a
  // column, 1 KiB per element.
  std::vector<ScalarStridedLoop> transposed =
      check_loops({square, square}, [](auto &in) { return std::vector<Tensor>{ops::transpose(in[0]) + in[1]}; });
  REQUIRE(transposed.size() == 1);
  CHECK(transposed[0].stride_bytes > kCliffStrideBytes);
  CHECK_FALSE(transposed[0].store);
  CHECK(transposed[0].node == "add");
  CHECK(transposed[0].function.rfind("m.rows", 0) == 0);

  // Unit strides and broadcasts along either axis vectorize.
  CHECK(check_loops({square, TensorType(DType::f32, {256, 1}), TensorType(DType::f32, {256})}, [](auto &in) {
          return std::vector<Tensor>{ops::sin(in[0] * in[1]) + in[2]};
        }).empty());
  // A row stride that a node defines at run time (bind_dim): reloaded per
  // element, the vectorizer declined the loop (this case fails then).
  CHECK(check_loops({TensorType(DType::f32, {64}), TensorType(DType::f32, Shape{})}, [](auto &in) {
          Dim n = ops::bind_dim(ops::cast(ops::abs(in[1]) * 100.0 + 1.0, DType::i32), "n", 4096);
          Tensor cols = ops::iota({Dim(64), n}, 1, DType::f32);
          return std::vector<Tensor>{ops::sin(cols * ops::reshape(in[0], {Dim(64), Dim(1)}))};
        }).empty());
}
