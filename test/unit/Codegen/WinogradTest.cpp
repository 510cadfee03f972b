// Winograd F(2,3) and F(4,3) convolutions of the CPU code generator
// (Cpu/WinogradEmitter.h), phased and fused, against the reference interpreter on fresh random
// inputs: 3x3 stride-1 convs with constant weights (root constants, and
// subgraph parameters bound to different constants at two call sites),
// odd and even output sizes (tiles hanging over the border, tile rows of
// more than one chunk of vector lanes), padding 0, 1
// and asymmetric, bias and an epilogue chain, batch 2; 1, 2 and 3 threads
// give the same bits.
//
// Tolerance (|a-e| <= atol + rtol*|e|): rtol 1e-5, atol 1e-4. F(2,3) sums
// in f32 over C = 32..48 channels the products of transformed values
// (weights transformed in double, rounded once); the error scales with the
// outputs' range (|y| up to ~30 here), not each output: measured 4e-6 on
// outputs of 4..28 and up to 2.6e-5 absolute on outputs near 0 where the sum
// cancels (im2col's ConvKernelTest bound, atol 1e-5, is too tight for it).
#include "CompiledRunner.h"

#include <cmath>

#include "maxc/Realization/GraphRealizationContext.h"

using namespace maxc;
using namespace maxc::test;

namespace {

constexpr double kRtol = 1e-5, kAtol = 1e-4;

ops::Conv2dOptions pad(std::vector<int64_t> p) {
  ops::Conv2dOptions o;
  o.padding = std::move(p);
  return o;
}

/// The number of fused Winograd task functions (one per fused conv) in
/// `graph`'s module.
size_t fused_winograd_kernels(const Graph &graph) {
  return count_model_functions(graph, [](llvm::StringRef name) {
    return name == "m.winograd" || name.starts_with("m.winograd.");
  });
}

/// The number of Winograd convs in `graph`'s module: input-transform task
/// functions (phased) and fused task functions.
size_t winograd_kernels(const Graph &graph) {
  return count_model_functions(graph, [](llvm::StringRef name) { return name.starts_with("m.winograd_in"); }) +
         fused_winograd_kernels(graph);
}

/// F(4,3) (outputs of kWinogradF4MinSize and more): its transforms hold
/// larger constants (up to 8 in Aᵀ, 5 in Bᵀ, 1/24 in G), so its error, in
/// f32, is larger and scales with the outputs' range: |a-e| <= kF4Rel * max|e|.
constexpr double kF4Rel = 2e-5;

void check(const Graph &g, const std::vector<HostTensor> &in, bool f4 = false) {
  std::vector<HostTensor> expected = Interpreter::run(g, in);
  std::vector<HostTensor> got = run_compiled_threads(g, in);
  double range = 0, worst = 0;
  for (int64_t i = 0; i < expected[0].numel(); ++i) {
    range = std::max(range, std::abs(expected[0].get_f64(i)));
    worst = std::max(worst, std::abs(got[0].get_f64(i) - expected[0].get_f64(i)));
  }
  INFO("max abs error " << worst << " on outputs up to " << range);
  std::string m = f4 ? compare(got[0], expected[0], 0, kF4Rel * range) : compare(got[0], expected[0], kRtol, kAtol);
  INFO(m);
  CHECK(m.empty());
}

} // namespace

TEST_CASE("winograd: 3x3 stride-1 convs with constant weights vs the interpreter", "[codegen][conv][winograd]") {
  struct Case {
    const char *name;
    std::vector<int64_t> x;
    int64_t O;
    std::vector<int64_t> padding;
    bool bias, chain;
    bool f4; // F(4,3): an output of at least kWinogradF4MinSize rows and columns
    bool fused; // kWinogradFusedMinTasks blocks of tile rows or more
  };
  const Case cases[] = {
      {"32->32 9x11 pad 1 (odd output), bias, relu chain", {1, 32, 9, 11}, 32, {1, 1}, true, true, false, false},
      {"32->40 8x7 pad 0 (6x5 output), batch 2", {2, 32, 8, 7}, 40, {0, 0}, false, false, false, false},
      {"48->32 7x6 asymmetric pad (0,1,2,1), bias", {1, 48, 7, 6}, 32, {0, 1, 2, 1}, true, false, false, false},
      {"32->32 5x70 pad 1 (two chunks of tiles, 6 columns in the last), relu chain", {1, 32, 5, 70}, 32, {1, 1}, false, true, false, false},
      {"F(4,3): 32->33 49x70 pad 1 (rows and columns hang over, two chunks), bias, chain", {1, 32, 49, 70}, 33, {1, 1}, true, true, true, true},
      {"F(4,3): 32->32 50x48 pad (0,1,2,1), batch 2", {2, 32, 50, 48}, 32, {0, 1, 2, 1}, false, false, true, true},
      {"F(4,3) phased (4 blocks of tile rows): 32->32 26x30 pad 1 (rows hang over)", {1, 32, 26, 30}, 32, {1, 1}, true, false, true, false},
      // 64 channels x 16 tiles = 1024 floats: V[e] and M[e] padded 64 bytes
      // apart (WinogradPlan::v_estride, m_estride).
      {"64->64 7x7 pad 1 (V and M blocks padded off 4 KB multiples), bias, relu chain", {1, 64, 7, 7}, 64, {1, 1}, true, true, false, false},
      {"F(4,3) phased at 14x14: 64->64 pad 1 (16 tiles, padded blocks), bias", {1, 64, 14, 14}, 64, {1, 1}, true, false, true, false},
      {"F(2,3) just below kWinogradF4MinSize: 32->32 13x20 pad 1", {1, 32, 13, 20}, 32, {1, 1}, false, false, false, false},
      // Fused (kWinogradFusedMinTasks blocks of tile rows or more): the
      // F(4,3) cases above (blocks of one tile row; of two, the last one
      // row), and blocks of 6 tile rows with a last block of 1 whose last
      // output row hangs over.
      {"fused F(2,3): 32->36 73x10 pad 1 (7 blocks of 6 tile rows, the last 1), bias, chain", {1, 32, 73, 10}, 36, {1, 1}, true, true, false, true},
  };
  for (const Case &c : cases) {
    INFO(c.name);
    int64_t C = c.x[1];
    HostTensor w = random_tensor(DType::f32, {c.O, C, 3, 3}), b = random_tensor(DType::f32, {c.O});
    std::vector<HostTensor> in = {random_tensor(DType::f32, c.x)};
    auto g = trace_graph(types_of(in), [&](auto &t) {
      Tensor y = ops::conv2d(t[0], Tensor::from_host(w), c.bias ? std::optional<Tensor>(Tensor::from_host(b)) : std::nullopt,
                             pad(c.padding));
      if (c.chain)
        y = ops::relu(y * 0.5 - 0.1);
      return std::vector<Tensor>{y};
    });
    CHECK(winograd_kernels(*g) == 1);
    CHECK(fused_winograd_kernels(*g) == (c.fused ? 1u : 0u));
    check(*g, in, c.f4);
  }
  // Below the channel threshold, or weights not constant: im2col + GEMM.
  std::vector<HostTensor> in = {random_tensor(DType::f32, {1, 16, 8, 8})};
  HostTensor w = random_tensor(DType::f32, {16, 16, 3, 3});
  auto small = trace_graph(types_of(in), [&](auto &t) {
    return std::vector<Tensor>{ops::conv2d(t[0], Tensor::from_host(w), std::nullopt, pad({1, 1}))};
  });
  CHECK(winograd_kernels(*small) == 0);
}

TEST_CASE("winograd: subgraph weights transformed per call site", "[codegen][conv][winograd]") {
  // Two calls of one block (conv 3x3 + bias + relu), each binding the
  // block's weights to constants of its own; with `all_constant` false the
  // second call binds the weight to a graph input, and the block takes
  // im2col + GEMM for both.
  auto block = [](GraphRealizationContext &, const std::vector<Tensor> &args, const NamedTensors &p) {
    return TensorTree(ops::relu(ops::conv2d(args[0], p.at("w"), p.at("b"), pad({1, 1}))));
  };
  for (bool all_constant : {true, false}) {
    INFO("all call sites constant: " << all_constant);
    Graph graph("g", {TensorType(DType::f32, {1, 32, 7, 9}), TensorType(DType::f32, {32, 32, 3, 3})});
    {
      GraphRealizationContext ctx(graph);
      Tensor y = Tensor::from_graph_value(graph.inputs()[0]);
      for (int i = 0; i < 2; ++i) {
        CallOptions options;
        options.instance = "layers." + std::to_string(i);
        options.name = "Block";
        Tensor w = !all_constant && i == 1 ? Tensor::from_graph_value(graph.inputs()[1])
                                           : Tensor::from_host(random_tensor(DType::f32, {32, 32, 3, 3}));
        y = ctx.call(options, block, {y}, {{"w", w}, {"b", Tensor::from_host(random_tensor(DType::f32, {32}))}})
                .tensor();
      }
      graph.output({y * 0.1});
    }
    REQUIRE(graph.subgraphs().size() == 1);
    CHECK(winograd_kernels(graph) == (all_constant ? 1u : 0u));
    check(graph, {random_tensor(DType::f32, {1, 32, 7, 9}), random_tensor(DType::f32, {32, 32, 3, 3})});
  }
}
