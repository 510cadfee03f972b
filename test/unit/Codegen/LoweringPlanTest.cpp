// Golden tests of fusion and memory-planning decisions (describe_plan).
#include "TestUtil.h"

#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/Transforms/Decompose.h"

#include <algorithm>
#include <tuple>

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

TEST_CASE("Winograd's channel rule: 1/C + 1/O <= 1/16, each at least 16", "[codegen][plan]") {
  // {input channels C, output channels O, takes Winograd}
  for (auto [C, O, winograd] : std::vector<std::tuple<int64_t, int64_t, bool>>{
           {32, 32, true}, {96, 24, true}, {24, 96, true}, {64, 64, true}, {24, 24, false}, {48, 20, false},
           {256, 15, false}, {16, 1024, false}}) {
    auto g = trace({TensorType(DType::f32, {1, C, 20, 20}), TensorType(DType::f32, {O, C, 3, 3})}, [](auto &in) {
      ops::Conv2dOptions same;
      same.padding = {1, 1, 1, 1};
      return std::vector<Tensor>{ops::conv2d(in[0], in[1], std::nullopt, same)};
    });
    INFO("C " << C << ", O " << O);
    CHECK(conv_winograd_shape(*g, g->nodes()[0]) == winograd);
  }
}

TEST_CASE("symbolic-size f32 convolutions take the GEMM path with a run-time scratch size", "[codegen][plan]") {
  auto g = trace({TensorType(DType::f32, {1, 3, Dim("h"), Dim("w")}), TensorType(DType::f32, {4, 3, 3, 3}),
                  TensorType(DType::f32, {5, 4, 1, 1}), TensorType(DType::f32, {4, 1, 3, 3})},
                 [](auto &in) {
                   ops::Conv2dOptions same;
                   same.padding = {1, 1, 1, 1};
                   Tensor y = ops::conv2d(in[0], in[1], std::nullopt, same); // colsT 27 x h*w floats
                   ops::Conv2dOptions dw = same;
                   dw.groups = 4;
                   return std::vector<Tensor>{ops::conv2d(y, in[2]), ops::conv2d(y, in[3], std::nullopt, dw)};
                 });
  LoweringPlan plan = plan_lowering(*g);
  const Node &conv3 = g->nodes()[0], &pointwise = g->nodes()[1], &depthwise = g->nodes()[2];
  CHECK(conv_is_symbolic_gemm(*g, conv3));
  CHECK(conv_uses_gemm(*g, conv3));
  CHECK(conv_is_symbolic_gemm(*g, pointwise));
  CHECK_FALSE(conv_is_symbolic_gemm(*g, depthwise)); // groups: the elemental loop
  CHECK_FALSE(conv_uses_direct(*g, depthwise));
  CHECK_FALSE(conv_winograd_shape(*g, conv3));
  CHECK(conv_block_plan(*g, conv3).blocks == 0);
  REQUIRE(plan.scratch_slot != static_cast<size_t>(-1));
  CHECK(plan.slots[plan.scratch_slot].bytes == Dim(27 * 4) * Dim("h") * Dim("w"));
}

TEST_CASE("GEMM epilogues: linear + bias + relu runs in the GEMM kernel", "[codegen][plan][epilogue]") {
  auto g = std::make_unique<Graph>("g", std::vector<TensorType>{TensorType(DType::f32, {Dim("n"), 8})});
  {
    GraphRealizationContext ctx(*g);
    Tensor x = Tensor::from_graph_value(g->inputs()[0]);
    Tensor w = ctx.add_source(Tensor::from_host(random_tensor(DType::f32, {4, 8})), "w");
    Tensor b = ctx.add_source(Tensor::from_host(random_tensor(DType::f32, {4})), "b");
    Tensor h = ops::relu(ops::linear(x, w, b));
    g->output({ops::sigmoid(ops::linear(h, ctx.add_source(Tensor::from_host(random_tensor(DType::f32, {4, 4})), "w2"))) + 1.0});
  }
  auto lowered = decompose(*g);
  LoweringPlan plan = plan_lowering(*lowered);
  // Each matmul's result is never stored: the GEMM accumulates into the
  // chain's stored value (relu's temp, the output) and finishes each tile
  // with + bias, relu (+ 1.0 read from a fused full).
  CHECK(describe_plan(*lowered, plan) == "%1 constant: constant\n"
                                         "%2 constant: constant\n"
                                         "%3 constant: constant\n"
                                         "%4 matmul: fused (GEMM epilogue -> %6)\n"
                                         "%5 add: fused\n"
                                         "%6 relu: temp slot 0 (16*n bytes)\n"
                                         "%7 constant: constant\n"
                                         "%8 constant: constant\n"
                                         "%9 matmul: fused (GEMM epilogue -> %12)\n"
                                         "%10 sigmoid: fused\n"
                                         "%11 full: fused\n"
                                         "%12 add: output 0\n");
  CHECK(plan.epilogues.size() == 2);
  CHECK(plan.kernels.size() == 2);
}

TEST_CASE("GEMM epilogues: conv2d + bias + residual + relu", "[codegen][plan][epilogue]") {
  auto g = trace({TensorType(DType::f32, {Dim("n"), 4, 8, 8}), TensorType(DType::f32, {4, 4, 3, 3}),
                  TensorType(DType::f32, {4})},
                 [](auto &in) {
                   ops::Conv2dOptions same;
                   same.padding = {1, 1, 1, 1};
                   return std::vector<Tensor>{ops::relu(in[0] + ops::conv2d(in[0], in[1], in[2], same))};
                 });
  LoweringPlan plan = plan_lowering(*g);
  CHECK(describe_plan(*g, plan) == "%3 conv2d: fused (GEMM epilogue -> %5)\n"
                                   "%4 add: fused\n"
                                   "%5 relu: output 0\n");
  CHECK(plan.epilogues.size() == 1);
  CHECK(plan.kernels == std::vector<size_t>{0}); // the conv, writing relu(x + conv) into the output
  CHECK(plan.scratch_slot == 0);
  CHECK(plan.slots.size() == 1); // only the im2col scratch
}

TEST_CASE("GEMM epilogues: where the chain does not fuse", "[codegen][plan][epilogue]") {
  auto g = trace({TensorType(DType::f32, {6, 8}), TensorType(DType::f32, {8, 5}), TensorType(DType::f32, {2, 6, 5}),
                  TensorType(DType::f32, {8, 6})},
                 [](auto &in) {
                   Tensor h = ops::matmul(in[0], in[1]);
                   return std::vector<Tensor>{
                       ops::relu(h) + h,                                       // %4: read twice, meets again: fuses
                       ops::matmul(in[0], in[1]) + in[2],                      // broadcast: h at a remapped index
                       ops::sum(ops::exp(ops::matmul(in[0], in[1])), {1}),     // exp fuses into the reduction
                       ops::reshape(ops::tanh(ops::matmul(in[0], in[1])), {30}), // a shape op
                       ops::cast(ops::matmul(in[0], in[1]), DType::f16),       // the stored value is not f32
                       ops::matmul(in[0], in[1]) * ops::matmul(in[0], in[1]),  // two GEMMs meet: the first takes it
                       ops::matmul(in[0], in[1], false, false),                // an output: stays stored
                       ops::relu(ops::matmul(in[3], in[1], true, false))};     // transposed: no GEMM
                 });
  LoweringPlan plan = plan_lowering(*g);
  CHECK(describe_plan(*g, plan) == "%4 matmul: fused (GEMM epilogue -> %6)\n"
                                   "%5 relu: fused\n"
                                   "%6 add: output 0\n"
                                   "%7 matmul: temp slot 0 (120 bytes)\n"
                                   "%8 add: output 1\n"
                                   "%9 matmul: temp slot 0 (120 bytes)\n"
                                   "%10 exp: fused\n"
                                   "%11 sum: output 2\n"
                                   "%12 matmul: temp slot 0 (120 bytes)\n"
                                   "%13 tanh: fused\n"
                                   "%14 reshape: output 3\n"
                                   "%15 matmul: temp slot 0 (120 bytes)\n"
                                   "%16 cast: output 4\n"
                                   "%17 matmul: fused (GEMM epilogue -> %19)\n"
                                   "%18 matmul: temp slot 0 (120 bytes)\n"
                                   "%19 mul: output 5\n"
                                   "%20 matmul: output 6\n"
                                   "%21 matmul: temp slot 0 (120 bytes)\n"
                                   "%22 relu: output 7\n");
  // The GEMM of %17 runs where %19 is computed, after %18's GEMM.
  std::vector<size_t> k = plan.kernels;
  size_t gemm17 = static_cast<size_t>(g->value_info(17).producer), gemm18 = static_cast<size_t>(g->value_info(18).producer);
  auto pos = [&](size_t n) { return std::find(k.begin(), k.end(), n) - k.begin(); };
  CHECK(pos(gemm18) < pos(gemm17));
  CHECK(std::find(k.begin(), k.end(), static_cast<size_t>(g->value_info(19).producer)) == k.end());
}

TEST_CASE("Winograd tiles: F(4,3) from 14x14 outputs, F(2,3) below; block strides off 4 KB", "[codegen][plan][winograd]") {
  CHECK(winograd_tile(56, 56) == 4);
  CHECK(winograd_tile(14, 14) == 4);
  CHECK(winograd_tile(14, 13) == 2);
  CHECK(winograd_tile(7, 7) == 2);
  // A phased conv whose V[e] / M[e] blocks would be a multiple of 1024
  // floats apart (64 channels x 16 tiles) gets them 16 floats further apart.
  auto conv = [](int64_t c, int64_t hw) {
    return trace_graph({TensorType(DType::f32, {1, c, hw, hw})}, [&](auto &t) {
      ops::Conv2dOptions o;
      o.padding = {1, 1};
      return std::vector<Tensor>{
          ops::conv2d(t[0], Tensor::from_host(random_tensor(DType::f32, {c, c, 3, 3})), std::nullopt, o)};
    });
  };
  for (auto [c, hw, stride] : {std::tuple<int64_t, int64_t, int64_t>{64, 14, 64 * 16 + 16}, {64, 7, 64 * 16 + 16},
                               {48, 7, 48 * 16}, {32, 20, 32 * 25}}) {
    INFO(c << " channels, " << hw << "x" << hw);
    auto g = conv(c, hw);
    const Node *node = nullptr;
    for (const Node &n : g->nodes())
      if (n.op == "conv2d")
        node = &n;
    REQUIRE(node);
    REQUIRE(conv_winograd_shape(*g, *node));
    WinogradPlan p = winograd_plan(*g, *node);
    CHECK(p.row_tasks == 0);
    CHECK(p.v_estride == stride);
    CHECK(p.m_estride == stride);
  }
}

TEST_CASE("an exact conv2d (integer-valued operands) never takes Winograd, whose transforms round",
          "[codegen][plan]") {
  for (bool exact : {false, true}) {
    auto g = trace_graph({TensorType(DType::f32, {1, 64, 14, 14})}, [&](auto &t) {
      ops::Conv2dOptions o;
      o.padding = {1, 1};
      o.exact = exact;
      return std::vector<Tensor>{
          ops::conv2d(t[0], Tensor::from_host(random_tensor(DType::f32, {64, 64, 3, 3})), std::nullopt, o)};
    });
    const Node *node = nullptr;
    for (const Node &n : g->nodes())
      if (n.op == "conv2d")
        node = &n;
    REQUIRE(node);
    CHECK(node->attrs.get_int("exact") == (exact ? 1 : 0));
    CHECK(conv_uses_gemm(*g, *node)); // the im2col GEMM instead
    CHECK(conv_winograd_shape(*g, *node) == !exact);
  }
}

TEST_CASE("the workspace bound takes the largest callee need, not their sum", "[codegen][plan]") {
  // A body with one stored reduction per row: (4*rows + 63) bytes of slots.
  auto body = [](const std::string &name, const Dim &rows) {
    std::shared_ptr<Graph> g = trace({TensorType(DType::f32, {rows, 8})}, [](auto &in) {
      Tensor a = ops::sum(in[0] * in[0], {1}, true);
      return std::vector<Tensor>{ops::max(in[0] + a, {1}, true)};
    });
    g->set_name(name);
    return g;
  };
  auto root = [&](const std::vector<std::pair<std::string, Dim>> &subs) {
    auto g = trace({TensorType(DType::f32, {4})}, [](auto &in) { return std::vector<Tensor>{in[0] * 2.0}; });
    for (const auto &[name, rows] : subs)
      g->add_subgraph(body(name, rows));
    return g;
  };
  Dim n("n"), m("m");
  INFO(describe_plan(*body("b", n), plan_lowering(*body("b", n))));
  CHECK(workspace_bound(*root({})) == Dim(0));
  Dim need_n = workspace_bound(*body("b", n)), need_m = workspace_bound(*body("b", m));
  CHECK_FALSE(need_n.is_static());
  // One callee: its need (as the sum gave before).
  CHECK(workspace_bound(*root({{"a", n}})) == need_n);
  // Static callees: the largest.
  CHECK(workspace_bound(*root({{"a", Dim(2)}, {"b", Dim(100)}})) == workspace_bound(*body("b", Dim(100))));
  // Needs that differ by a constant: the larger, decided statically.
  CHECK(workspace_bound(*root({{"a", n}, {"b", n + 16}})) == workspace_bound(*body("b", n + 16)));
  // Unrelated symbolic needs: a max atom, which evaluates to the larger.
  Dim both = workspace_bound(*root({{"a", n}, {"b", m}}));
  CHECK(both == Dim::max(need_n, need_m));
  CHECK(both.evaluate({{"n", 3}, {"m", 50}}) == need_m.evaluate({{"m", 50}}));
  CHECK(both.evaluate({{"n", 70}, {"m", 50}}) == need_n.evaluate({{"n", 70}}));
}

TEST_CASE("a computed value read through a transpose of its last axis is stored for the tiled transpose",
          "[codegen][plan]") {
  // exp(x) transposed NCHW → NHWC, then a sigmoid of the result.
  auto g = trace({TensorType(DType::f32, {1, 16, 24})},
                 [](auto &in) { return std::vector<Tensor>{ops::sigmoid(ops::transpose(ops::exp(in[0]), {0, 2, 1}))}; });
  // The CPU: exp stored (computed along rows), the transpose fused into the
  // sigmoid (moves stored values only).
  CHECK(describe_plan(*g, plan_lowering(*g, cpu_plan_options())) == "%1 exp: temp slot 0 (1536 bytes)\n"
                                                                      "%2 transpose: fused\n"
                                                                      "%3 sigmoid: output 0\n");
  // Without the option (the GPU backends), all one kernel.
  CHECK(describe_plan(*g, plan_lowering(*g)) == "%1 exp: fused\n"
                                                 "%2 transpose: fused\n"
                                                 "%3 sigmoid: output 0\n");
  // A transpose that keeps the last axis, or of tiles below 8: fused.
  auto kept = trace({TensorType(DType::f32, {4, 16, 24})},
                    [](auto &in) { return std::vector<Tensor>{ops::sigmoid(ops::transpose(ops::exp(in[0]), {1, 0, 2}))}; });
  CHECK(describe_plan(*kept, plan_lowering(*kept, cpu_plan_options())).find("exp: fused") != std::string::npos);
  auto small = trace({TensorType(DType::f32, {1, 4, 24})},
                     [](auto &in) { return std::vector<Tensor>{ops::sigmoid(ops::transpose(ops::exp(in[0]), {0, 2, 1}))}; });
  CHECK(describe_plan(*small, plan_lowering(*small, cpu_plan_options())).find("exp: fused") != std::string::npos);
}
