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

namespace {

// Weights are constants, as in an imported model (BatchNorm's scale and
// shift then come from a kernel of their own, in the workspace).
Tensor weight(std::vector<int64_t> shape, double lo, double hi) {
  return Tensor::from_f64(DType::f32, shape, test::random_tensor(DType::f32, shape, lo, hi).to_f64());
}

// PaddleOCR's DB head: stride-2 transposed convs (a GEMM and a
// depth-to-space), BatchNorm and ReLU between them, a sigmoid after.
std::vector<Tensor> db_head(const std::vector<Tensor> &in) {
  ops::ConvTranspose2dOptions o;
  o.stride = {2, 2};
  Tensor t = ops::conv_transpose2d(in[0], weight({8, 8, 2, 2}, -0.5, 0.5), weight({8}, -1, 1), o);
  Tensor r = ops::relu(ops::batch_norm(t, weight({8}, 0.5, 1.5), weight({8}, -1, 1), weight({8}, -1, 1),
                                       weight({8}, 0.5, 1.5)));
  return {ops::sigmoid(ops::conv_transpose2d(r, weight({8, 1, 2, 2}, -0.5, 0.5), weight({1}, -1, 1), o))};
}

// ONNX Resize, nearest, scale 2 (OnnxOps.cpp, repeat_along): one axis at a
// time, unsqueeze + broadcast_to + reshape.
Tensor upsample2(Tensor x) {
  for (int64_t axis : {2, 3}) {
    Shape wide = x.shape(), r = x.shape();
    wide.insert(wide.begin() + axis + 1, Dim(2));
    r[static_cast<size_t>(axis)] = r[static_cast<size_t>(axis)] * Dim(2);
    x = ops::reshape(ops::broadcast_to(ops::unsqueeze(x, {axis + 1}), wide), r);
  }
  return x;
}

struct Layout {
  const char *name;
  std::vector<HostTensor> inputs;
  BuildFn build;
};

// Layouts that models people export meet (issue 22: "no kernel that falls
// off a cliff"), each a kernel that ran one element at a time before: the
// depth-to-space of a stride-2 transposed conv and the BatchNorm after it
// (PaddleOCR's DB head), a nearest upsampling as views added to a skip
// (FPN necks: ONNX Resize), a squeeze-excite scale over a short row (the
// OCR classifier's 1x12 maps), concats along the channels and the last
// axis, broadcasts along inner and outer axes, reductions over each axis.
std::vector<Layout> real_model_layouts() {
  using test::random_tensor;
  std::vector<Layout> out;
  out.push_back({"transposed conv k2 s2, BatchNorm, ReLU, a second one to 1 channel, sigmoid",
                 {random_tensor(DType::f32, {1, 8, 40, 40})}, db_head});
  out.push_back({"nearest upsampling x2 as unsqueeze, broadcast_to, reshape, added to a skip",
                 {random_tensor(DType::f32, {1, 8, 40, 40}), random_tensor(DType::f32, {1, 8, 80, 80})},
                 [](auto &in) { return std::vector<Tensor>{upsample2(in[0]) + in[1]}; }});
  out.push_back({"squeeze-excite scale over 1x12 maps",
                 {random_tensor(DType::f32, {1, 64, 1, 12}), random_tensor(DType::f32, {1, 64, 1, 1})},
                 [](auto &in) { return std::vector<Tensor>{in[0] * ops::sigmoid(in[1])}; }});
  out.push_back({"squeeze-excite scale over 3x12 maps",
                 {random_tensor(DType::f32, {1, 64, 3, 12}), random_tensor(DType::f32, {1, 64, 1, 1})},
                 [](auto &in) { return std::vector<Tensor>{in[0] * ops::sigmoid(in[1])}; }});
  out.push_back({"concat along the channels and along the last axis",
                 {random_tensor(DType::f32, {1, 8, 16, 40}), random_tensor(DType::f32, {1, 8, 16, 24}),
                  random_tensor(DType::f32, {1, 16, 16, 40})},
                 [](auto &in) {
                   Tensor w = ops::concat({in[0], in[1]}, 3);
                   Tensor c = ops::concat({in[0], ops::slice(w, {0}, {40}, {3})}, 1);
                   return std::vector<Tensor>{ops::relu(c + in[2])};
                 }});
  out.push_back({"broadcasts along inner and outer axes",
                 {random_tensor(DType::f32, {4, 32, 48}), random_tensor(DType::f32, {4, 32, 1}),
                  random_tensor(DType::f32, {48}), random_tensor(DType::f32, {1, 32, 48})},
                 [](auto &in) { return std::vector<Tensor>{(in[0] - in[1]) * in[2] + in[3]}; }});
  out.push_back({"broadcasts before a trailing dim of size 1 (MeanVarianceNormalization's [3,3,3,1] - [1,3,1,1])",
                 {random_tensor(DType::f32, {3, 3, 3, 1}), random_tensor(DType::f32, {1, 3, 1, 1}),
                  random_tensor(DType::f32, {3, 3, 1, 1})},
                 [](auto &in) { return std::vector<Tensor>{(in[0] - in[1]) * in[2]}; }});
  out.push_back({"an attention key's K^T ([6, 100, 64] -> [6, 64, 100], Whisper's decoder) read by a matmul",
                 {random_tensor(DType::f32, {1, 6, 100, 64}), random_tensor(DType::f32, {6, 4, 64})},
                 [](auto &in) {
                   Tensor k = ops::reshape(in[0], {Dim(6), Dim(100), Dim(64)});
                   return std::vector<Tensor>{ops::matmul(in[1], ops::transpose(k, {0, 2, 1}))};
                 }});
  out.push_back({"NHWC -> NCHW with tiles cut by the edges ([1, 13, 17, 24] -> [1, 24, 13, 17])",
                 {random_tensor(DType::f32, {1, 13, 17, 24})},
                 [](auto &in) { return std::vector<Tensor>{ops::transpose(in[0], {0, 3, 1, 2})}; }});
  out.push_back({"reductions over each axis",
                 {random_tensor(DType::f32, {16, 24, 40})},
                 [](auto &in) {
                   return std::vector<Tensor>{ops::sum(in[0], {0}), ops::max(in[0], {1}), ops::mean(in[0], {2})};
                 }});
  return out;
}

} // namespace

TEST_CASE("the layouts real models meet compile to no scalar loop, and compute the reference's values",
          "[codegen][profile]") {
  for (const Layout &layout : real_model_layouts()) {
    INFO(layout.name);
    std::vector<ScalarStridedLoop> found = check_loops(test::types_of(layout.inputs), layout.build);
    for (const ScalarStridedLoop &loop : found)
      UNSCOPED_INFO(loop.node << " (" << loop.function << "): " << (loop.declined ? "declined, " : "") << "stride "
                              << loop.stride_bytes << (loop.store ? " (store)" : " (load)"));
    CHECK(found.empty());
    test::check_compiled(layout.inputs, layout.build, 1e-5, 1e-5);
  }
}

TEST_CASE("the DB head and a nearest upsampling of a symbolic size: no scalar loop, one object at several sizes",
          "[codegen][profile]") {
  // Reshapes between symbolic shapes ([h, 2, w, 2] <-> [2h, 2w], [h*w] <->
  // [h, w]) map dim groups whose products are equal polynomials, and the
  // innermost loop over 2w is split by 2: no division by w per element.
  const TensorType x(DType::f32, {Dim(1), Dim(8), Dim("h"), Dim("w")});
  auto build = [](const std::vector<Tensor> &in) {
    std::vector<Tensor> out = db_head(in);
    out.push_back(ops::relu(upsample2(in[0])));
    return out;
  };
  std::vector<ScalarStridedLoop> found = check_loops({x}, build);
  for (const ScalarStridedLoop &loop : found)
    UNSCOPED_INFO(loop.node << " (" << loop.function << "): " << (loop.declined ? "declined, " : "") << "stride "
                            << loop.stride_bytes);
  CHECK(found.empty());
  std::unique_ptr<Graph> graph = trace_graph({x}, build);
  for (auto [h, w] : std::vector<std::array<int64_t, 2>>{{5, 7}, {16, 40}, {3, 1}}) {
    INFO("h " << h << ", w " << w);
    std::vector<HostTensor> in{test::random_tensor(DType::f32, {1, 8, h, w})};
    std::vector<HostTensor> expected = cpu_reference(*graph, in), actual = run_compiled(*graph, in);
    REQUIRE(actual.size() == expected.size());
    for (size_t i = 0; i < expected.size(); ++i)
      MAXC_REQUIRE_CLOSE(actual[i], expected[i], 1e-5, 1e-5);
  }
}

TEST_CASE("transposes that move the last axis run in tiles: every dtype, symbolic sizes, edges", "[codegen][profile]") {
  // emit_transpose_tiles: 8x8 tiles transposed in registers, tiles cut by
  // an edge element by element; sizes below, at and past a tile.
  const TensorType x(DType::f32, {Dim("h"), Dim("w")});
  auto build = [](const std::vector<Tensor> &in) { return std::vector<Tensor>{ops::transpose(in[0], {1, 0})}; };
  CHECK(check_loops({x}, build).empty());
  std::unique_ptr<Graph> graph = trace_graph({x}, build);
  for (auto [h, w] : std::vector<std::array<int64_t, 2>>{{5, 7}, {8, 8}, {16, 40}, {19, 3}, {33, 65}}) {
    INFO("h " << h << ", w " << w);
    std::vector<HostTensor> in{test::random_tensor(DType::f32, {h, w})};
    std::vector<HostTensor> expected = cpu_reference(*graph, in), actual = run_compiled(*graph, in);
    REQUIRE(actual.size() == 1);
    MAXC_REQUIRE_CLOSE(actual[0], expected[0], 0, 0);
  }
  // The perm as ONNX and the ops take it: empty (reversed), negative axes.
  std::vector<HostTensor> in{test::random_tensor(DType::f32, {3, 20, 35})};
  test::check_compiled(in, [](auto &t) { return std::vector<Tensor>{ops::transpose(t[0], {})}; }, 0, 0);
  test::check_compiled(in, [](auto &t) { return std::vector<Tensor>{ops::transpose(t[0], {0, -1, -2})}; }, 0, 0);
  for (DType dtype : {DType::i64, DType::f64, DType::i32, DType::u8, DType::i16, DType::f16}) {
    INFO(dtype_name(dtype));
    std::vector<HostTensor> in{test::random_tensor(dtype, {2, 20, 3, 35}, -100, 100)};
    test::check_compiled(in, [](auto &t) { return std::vector<Tensor>{ops::transpose(t[0], {0, 3, 2, 1})}; }, 0,
                         0);
  }
}
