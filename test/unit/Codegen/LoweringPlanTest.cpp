// Golden tests of fusion and memory-planning decisions (describe_plan).
#include "TestUtil.h"

#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/Transforms/Decompose.h"

using namespace maxc;
using namespace maxc::test;

namespace {
const auto &trace = trace_graph;
} // namespace

TEST_CASE("an elementwise chain fuses into one kernel", "[codegen][plan]") {
  auto g = trace({TensorType(DType::f32, {Dim("n"), 8}), TensorType(DType::f32, {8})},
                 [](auto &in) { return std::vector<Tensor>{ops::tanh(ops::exp(in[0] * in[1]) + 1.0)}; });
  LoweringPlan plan = plan_lowering(*g);
  CHECK(describe_plan(*g, plan) == "%2 mul: fused\n"
                                   "%3 exp: fused\n"
                                   "%4 full: fused\n"
                                   "%5 add: fused\n"
                                   "%6 tanh: output 0\n");
  CHECK(plan.kernels.size() == 1);
  CHECK(plan.slots.empty());
}

TEST_CASE("reductions fuse their producers; multi-use values are stored", "[codegen][plan]") {
  auto g = trace({TensorType(DType::f32, {4, 16})}, [](auto &in) { return std::vector<Tensor>{ops::softmax(in[0])}; });
  auto lowered = decompose(*g);
  LoweringPlan plan = plan_lowering(*lowered);
  // max → stored; x - max is used twice (exp inside the sum, exp for the
  // result) → stored; exp fused into the sum; the final exp / sum fuses.
  CHECK(describe_plan(*lowered, plan) == "%1 max: temp slot 0 (16 bytes)\n"
                                         "%2 sub: temp slot 1 (256 bytes)\n"
                                         "%3 exp: fused\n"
                                         "%4 sum: temp slot 0 (16 bytes)\n"
                                         "%5 exp: fused\n"
                                         "%6 div: output 0\n");
  CHECK(plan.kernels.size() == 4);
}

TEST_CASE("matmul operands are stored; constant weights are pre-transposed", "[codegen][plan]") {
  auto g = std::make_unique<Graph>("g", std::vector<TensorType>{TensorType(DType::f32, {Dim("n"), 8})});
  {
    GraphRealizationContext ctx(*g);
    Tensor x = Tensor::from_graph_value(g->inputs()[0]);
    Tensor w = ctx.add_source(Tensor::from_host(random_tensor(DType::f32, {4, 8})), "w");
    g->output({ops::relu(ops::linear(ops::gelu(x), w))});
  }
  auto lowered = decompose(*g);
  CHECK(lowered->has_constant("w.T"));
  CHECK(lowered->constant("w.T").shape() == std::vector<int64_t>{8, 4});
  LoweringPlan plan = plan_lowering(*lowered);
  // %1 (the original w) is no longer read: it emits nothing.
  CHECK(describe_plan(*lowered, plan) == "%1 constant: constant\n"
                                         "%2 gelu: temp slot 0 (32*n bytes)\n"
                                         "%3 constant: constant\n"
                                         "%4 matmul: fused (GEMM epilogue -> %5)\n"
                                         "%5 relu: output 0\n");
  CHECK(plan.kernels == std::vector<size_t>{1, 3}); // gelu, then the GEMM with relu on its tiles
  CHECK(workspace_bound(*lowered).to_string() == "32*n+63");
}

TEST_CASE("slots are reused once their value is dead", "[codegen][plan]") {
  auto g = trace({TensorType(DType::f32, {64})}, [](auto &in) {
    Tensor a = ops::sum(in[0] * in[0], {}, true); // stored (reduction)
    Tensor b = ops::max(in[0] + a, {}, true);     // a dead after this
    Tensor c = ops::min(in[0] - b, {}, true);     // b dead after this
    return std::vector<Tensor>{c + b * 0.0};
  });
  LoweringPlan plan = plan_lowering(*g);
  INFO(describe_plan(*g, plan));
  CHECK(plan.slots.size() == 2); // a and c share a slot; b lives across c
}

TEST_CASE("f32 convolutions reserve one shared im2col scratch slot", "[codegen][plan]") {
  auto g = trace({TensorType(DType::f32, {Dim("n"), 3, 8, 8}), TensorType(DType::f32, {4, 3, 3, 3}),
                  TensorType(DType::f32, {4, 4, 3, 3})},
                 [](auto &in) {
                   ops::Conv2dOptions same;
                   same.padding = {1, 1, 1, 1};
                   Tensor y = ops::conv2d(in[0], in[1], std::nullopt, same); // colsT 27 x 64 floats
                   return std::vector<Tensor>{ops::conv2d(ops::relu(y), in[2])}; // colsT 36 x 36 floats
                 });
  LoweringPlan plan = plan_lowering(*g);
  REQUIRE(plan.scratch_slot != static_cast<size_t>(-1));
  CHECK(plan.slots[plan.scratch_slot].bytes == Dim(27 * 64 * 4));
  CHECK(conv_uses_gemm(*g, g->nodes()[0]));
}
