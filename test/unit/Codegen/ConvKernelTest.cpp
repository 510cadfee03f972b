// The CPU convolution kernels (f32) against the reference interpreter on
// fresh random inputs: im2col + GEMM (one group) and the direct kernel of
// Cpu/ConvEmitter.cpp (depthwise and grouped), over odd sizes, asymmetric
// padding, strides 1-3, dilations, channel multipliers, 1x1 and batch > 1,
// with and without bias and an epilogue chain; serial and on two threads.
//
// Tolerance (|a-e| <= atol + rtol*|e|): rtol 1e-5, atol 1e-5: both kernels
// sum in f32 over at most C/groups*KH*KW = 45 products, the reference in
// double.
#include "CompiledRunner.h"

#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/Transforms/Decompose.h"

using namespace maxc;
using namespace maxc::test;

namespace {

constexpr double kRtol = 1e-5, kAtol = 1e-5;

struct Case {
  const char *name;
  std::vector<int64_t> x, w; // [N, C, H, W], [O, C/groups, KH, KW]
  ops::Conv2dOptions o;
  bool bias, chain; // an epilogue chain after the conv: relu(conv * 0.5 - 0.1)
};

ops::Conv2dOptions opts(std::vector<int64_t> stride, std::vector<int64_t> padding, std::vector<int64_t> dilation,
                        int64_t groups) {
  ops::Conv2dOptions o;
  o.stride = stride;
  o.padding = padding;
  o.dilation = dilation;
  o.groups = groups;
  return o;
}

void check_case(const Case &c) {
  INFO(c.name);
  std::vector<HostTensor> in = {random_tensor(DType::f32, c.x), random_tensor(DType::f32, c.w),
                                random_tensor(DType::f32, {c.w[0]})};
  auto g = trace_graph(types_of(in), [&](auto &t) {
    Tensor y = ops::conv2d(t[0], t[1], c.bias ? std::optional<Tensor>(t[2]) : std::nullopt, c.o);
    if (c.chain)
      y = ops::relu(y * 0.5 - 0.1);
    return std::vector<Tensor>{y};
  });
  auto lowered = decompose(*g);
  const Node *conv = nullptr;
  for (const Node &n : lowered->nodes())
    if (n.op == "conv2d")
      conv = &n;
  REQUIRE(conv);
  CHECK((c.o.groups == 1 ? conv_uses_gemm(*lowered, *conv) : conv_uses_direct(*lowered, *conv)));
  CHECK(plan_lowering(*lowered).epilogues.size() == (c.chain ? 1u : 0u));
  std::vector<HostTensor> expected = Interpreter::run(*g, in);
  std::vector<HostTensor> serial = run_compiled(*g, in);
  std::vector<HostTensor> parallel = run_compiled_two_threads(*g, in);
  std::string m = compare(serial[0], expected[0], kRtol, kAtol);
  INFO(m);
  CHECK(m.empty());
  m = compare(parallel[0], serial[0], 0, 0);
  INFO("two threads vs one: " << m);
  CHECK(m.empty());
}

} // namespace

TEST_CASE("conv kernels: direct depthwise and grouped convolutions vs the interpreter", "[codegen][conv]") {
  const Case cases[] = {
      {"depthwise 3x3 s1 p1, odd plane", {1, 5, 9, 11}, {5, 1, 3, 3}, opts({1, 1}, {1, 1, 1, 1}, {1, 1}, 5), true, true},
      {"depthwise 3x3 s2 p1, batch 2", {2, 4, 13, 17}, {4, 1, 3, 3}, opts({2, 2}, {1, 1, 1, 1}, {1, 1}, 4), true, false},
      {"depthwise 5x5 s3, asymmetric pad, dilation", {1, 3, 19, 23}, {3, 1, 5, 5}, opts({3, 2}, {0, 2, 3, 1}, {2, 1}, 3),
       false, true},
      {"depthwise x2 multiplier, wide row (40 > 2 vectors)", {2, 2, 5, 40}, {4, 1, 3, 3}, opts({1, 1}, {1, 1}, {1, 1}, 2),
       true, true},
      {"depthwise 1x1, 1 column", {1, 3, 4, 1}, {3, 1, 1, 1}, opts({1, 1}, {0, 0}, {1, 1}, 3), true, false},
      {"grouped 2 x (3 -> 2), 3x2 kernel", {2, 6, 7, 9}, {4, 3, 3, 2}, opts({1, 2}, {1, 0, 2, 1}, {1, 2}, 2), true, true},
      {"grouped 3 x (5 -> 3), 3x3 s2, > 8 vectors per row", {1, 15, 6, 260}, {9, 5, 3, 3},
       opts({2, 2}, {1, 1}, {1, 1}, 3), true, true},
      // The taps read the input in place: padding wider than the kernel
      // (output rows and vectors whose taps all fall outside read zeros),
      // and BlazeFace's 3x3 s1 p1 and s2 (0, 0, 1, 1) on 64-column rows.
      {"depthwise 3x3, padding 4 > kernel", {1, 2, 5, 6}, {2, 1, 3, 3}, opts({1, 1}, {4, 4, 4, 4}, {1, 1}, 2), true,
       true},
      {"depthwise 3x3 s1 p1, BlazeFace rows", {1, 24, 32, 64}, {24, 1, 3, 3}, opts({1, 1}, {1, 1}, {1, 1}, 24), false,
       false},
      {"depthwise 3x3 s2 p(0,0,1,1), BlazeFace rows", {1, 24, 32, 64}, {24, 1, 3, 3},
       opts({2, 2}, {0, 0, 1, 1}, {1, 1}, 24), false, true},
  };
  for (const Case &c : cases)
    check_case(c);
}

// Depthwise convs of a symbolic height and width (PaddleOCR's detector
// compiled without --dim): the direct kernel with run-time lane masks
// (Cpu/ConvEmitter.h, emit_conv_depthwise_dynamic_f32), one object run at
// several sizes — rows narrower than a vector, several vectors with a
// partial last one, padding wider than the kernel, strides, dilation,
// with and without bias — against the interpreter, and the same bits on
// two threads.
TEST_CASE("conv kernels: depthwise convs of a symbolic size, one object at several sizes", "[codegen][conv]") {
  struct Sym {
    const char *name;
    int64_t C, KH, KW;
    ops::Conv2dOptions o;
    bool bias;
  };
  const Sym cases[] = {
      {"3x3 s1 p1 + bias", 5, 3, 3, opts({1, 1}, {1, 1, 1, 1}, {1, 1}, 5), true},
      {"3x3 s2 p1", 4, 3, 3, opts({2, 2}, {1, 1, 1, 1}, {1, 1}, 4), false},
      {"5x5 s(3,2), asymmetric pad, dilation (2,1) + bias", 3, 5, 5, opts({3, 2}, {0, 2, 3, 1}, {2, 1}, 3), true},
      {"3x3, padding 4 > kernel", 2, 3, 3, opts({1, 1}, {4, 4, 4, 4}, {1, 1}, 2), true},
  };
  for (const Sym &c : cases) {
    INFO(c.name);
    HostTensor w = random_tensor(DType::f32, {c.C, 1, c.KH, c.KW}), bias = random_tensor(DType::f32, {c.C});
    Graph graph("dw", {TensorType(DType::f32, {Dim("n"), c.C, Dim("h"), Dim("w")})});
    {
      GraphRealizationContext ctx(graph);
      Tensor x = Tensor::from_graph_value(graph.inputs()[0]);
      graph.output({ops::conv2d(x, Tensor::from_host(w), c.bias ? std::optional<Tensor>(Tensor::from_host(bias))
                                                                 : std::nullopt,
                                c.o)
                        .value()});
    }
    CHECK(count_model_functions(graph, [](llvm::StringRef f) { return f.contains("conv_dw.dyn"); }) == 1);
    if (&c == &cases[0]) { // a column stride past 4 (an STFT as a conv: 160) keeps the window loop
      Graph wide("dw_wide", {TensorType(DType::f32, {1, c.C, Dim("h"), Dim("w")})});
      {
        GraphRealizationContext ctx(wide);
        ops::Conv2dOptions o = opts({1, 160}, {0, 0, 0, 0}, {1, 1}, c.C);
        wide.output({ops::conv2d(Tensor::from_graph_value(wide.inputs()[0]), Tensor::from_host(w), std::nullopt, o)
                         .value()});
      }
      CHECK(count_model_functions(wide, [](llvm::StringRef f) { return f.contains("conv_dw.dyn"); }) == 0);
    }
    for (auto [n, h, wd] : std::vector<std::array<int64_t, 3>>{{1, 5, 7}, {2, 9, 40}, {1, 17, 67}}) {
      INFO("n " << n << ", h " << h << ", w " << wd);
      std::vector<HostTensor> in{random_tensor(DType::f32, {n, c.C, h, wd})};
      std::vector<HostTensor> expected = Interpreter::run(graph, in);
      std::vector<HostTensor> serial = run_compiled(graph, in);
      std::string m = compare(serial[0], expected[0], kRtol, kAtol);
      INFO(m);
      CHECK(m.empty());
      m = compare(run_compiled_two_threads(graph, in)[0], serial[0], 0, 0);
      INFO("two threads vs one: " << m);
      CHECK(m.empty());
    }
  }
}

TEST_CASE("conv kernels: the direct kernel and im2col split into tasks", "[codegen][conv]") {
  // Enough work for several tasks (conv_task_split), the last one short:
  // 37 channels -> 5 tasks of 8 (the last 5);
  // im2col over 21 input channels x 3 kernel rows -> 3 tasks of 21 (c, ky)
  // units; a 3-channel 7x7 stem -> 4 tasks of 6 units (tasks end mid-channel).
  const Case cases[] = {
      {"depthwise 3x3 s1 p1, 37 channels in 5 tasks", {1, 37, 24, 24}, {37, 1, 3, 3},
       opts({1, 1}, {1, 1}, {1, 1}, 37), true, true},
      {"im2col 3x3 s1 p1, 21 channels in 3 tasks", {1, 21, 24, 24}, {5, 21, 3, 3}, opts({1, 1}, {1, 1}, {1, 1}, 1),
       true, true},
      {"im2col 7x7 s2 p3 stem, 3 channels in 4 tasks", {1, 3, 64, 64}, {4, 3, 7, 7}, opts({2, 2}, {3, 3}, {1, 1}, 1),
       true, true},
  };
  CHECK(conv_task_split(37, 9 * 24 * 24) == std::array<int64_t, 2>{5, 8});
  CHECK(conv_task_split(21 * 3, 3 * 24 * 24) == std::array<int64_t, 2>{3, 21});
  CHECK(conv_task_split(3 * 7, 7 * 32 * 32) == std::array<int64_t, 2>{4, 6});
  CHECK(conv_task_split(1000, 1 << 20) == std::array<int64_t, 2>{16, 63}); // at most kConvMaxTasks
  CHECK(conv_task_split(5, 10) == std::array<int64_t, 2>{1, 5});            // small: one task
  for (const Case &c : cases)
    check_case(c);
}

TEST_CASE("conv kernels: im2col + GEMM vs the interpreter", "[codegen][conv]") {
  const Case cases[] = {
      {"3x3 s1 p1, batch 3", {3, 3, 11, 13}, {7, 3, 3, 3}, opts({1, 1}, {1, 1}, {1, 1}, 1), true, true},
      {"7x7 s2 p3 (ResNet stem, small)", {1, 3, 21, 19}, {8, 3, 7, 7}, opts({2, 2}, {3, 3}, {1, 1}, 1), false, true},
      // An STFT as a conv (openWakeWord's mel spectrogram): the column
      // stride 160 copies one element at a time (a wide load of 16 * 160
      // lanes never finished instruction selection).
      {"1x400 s(1,160), an STFT's frames", {1, 1, 1, 1280}, {6, 1, 1, 400}, opts({1, 160}, {0, 0}, {1, 1}, 1), false,
       false},
      {"1x1 s2 (downsample)", {2, 5, 9, 9}, {6, 5, 1, 1}, opts({2, 2}, {0, 0}, {1, 1}, 1), true, false},
      {"1x1 s1 pointwise (x is the GEMM's B), batch 2", {2, 7, 5, 9}, {13, 7, 1, 1}, opts({1, 1}, {0, 0}, {1, 1}, 1),
       true, true},
      {"1x1 s1 pointwise without bias", {1, 3, 1, 33}, {8, 3, 1, 1}, opts({1, 1}, {0, 0}, {2, 2}, 1), false, false},
      // Planes a multiple of 4 KiB: blocks of whole output rows (emit_conv_pointwise_blocks).
      {"1x1 pointwise, 4 KiB planes, 8 rows per block, batch 2", {2, 8, 32, 32}, {12, 8, 1, 1},
       opts({1, 1}, {0, 0}, {1, 1}, 1), true, true},
      {"1x1 pointwise, 4 KiB planes, 4 rows per block, no bias", {1, 5, 16, 64}, {3, 5, 1, 1},
       opts({1, 1}, {0, 0}, {1, 1}, 1), false, false},
      {"1x1 pointwise, 16 KiB planes, one 512-pixel row per block", {1, 6, 8, 512}, {4, 6, 1, 1},
       opts({1, 1}, {0, 0}, {1, 1}, 1), true, false},
      {"3x3 s3, dilation 2, asymmetric pad", {1, 4, 17, 16}, {5, 4, 3, 3}, opts({3, 1}, {2, 0, 1, 3}, {2, 2}, 1), true,
       true},
      {"window wider than the input (all padding at the edges)", {1, 2, 3, 2}, {3, 2, 5, 5},
       opts({1, 1}, {2, 2}, {1, 1}, 1), true, false},
      // Column stride > 1: im2col's rows copied in vectors of 16 (a wide
      // load and a shuffle), the last one masked.
      {"5x5 s2 p(1,1,2,2) stem (BlazeFace's), 3 channels, 39 columns", {1, 3, 40, 78}, {8, 3, 5, 5},
       opts({2, 2}, {1, 1, 2, 2}, {1, 1}, 1), true, true},
      {"3x3 column stride 3, 2 channels", {1, 2, 9, 100}, {4, 2, 3, 3}, opts({1, 3}, {1, 0, 1, 2}, {1, 1}, 1), false,
       false},
  };
  for (const Case &c : cases)
    check_case(c);
}

TEST_CASE("conv kernels: implicit im2col blocks (conv_block_plan): same bits at 1, 2 and 3 threads",
          "[codegen][conv][threads]") {
  // Each conv below takes conv_block_plan's one job (tasks of whole output
  // rows whose columns fill whole GEMM panels, each packing its own colsT
  // slice): a stem-like 7x7 s2 with a short last block (23 rows in blocks of
  // 3) and bias + relu, then a 3x3 s2 max pool; 3x3 s1 at batch 2 with 13
  // output channels (6- and 4-row and one-row tiles) and no bias; 70 output
  // channels over K = 360 (B packed per panel, two K blocks) with bias and
  // a residual add.
  struct Block {
    std::vector<int64_t> x, w;
    ops::Conv2dOptions o;
    int64_t rows, blocks; // conv_block_plan
  };
  const Block blocks[] = {
      {{1, 3, 45, 64}, {10, 3, 7, 7}, opts({2, 2}, {3, 3}, {1, 1}, 1), 3, 8},
      {{2, 5, 19, 16}, {13, 5, 3, 3}, opts({1, 1}, {1, 1}, {1, 1}, 1), 2, 10},
      {{1, 40, 15, 32}, {70, 40, 3, 3}, opts({1, 1}, {1, 1}, {1, 1}, 1), 2, 8},
  };
  ops::Pool2dOptions pool;
  pool.kernel = {3, 3};
  pool.stride = {2, 2};
  pool.padding = {1, 1, 1, 1};
  for (size_t i = 0; i < std::size(blocks); ++i) {
    const Block &c = blocks[i];
    INFO("case " << i);
    std::vector<HostTensor> in = {random_tensor(DType::f32, c.x, -1, 1), random_tensor(DType::f32, c.w, -1, 1),
                                  random_tensor(DType::f32, {c.w[0]}, -1, 1)};
    auto build = [&](auto &t) {
      if (i == 0)
        return std::vector<Tensor>{ops::max_pool2d(ops::relu(ops::conv2d(t[0], t[1], t[2], c.o)), pool)};
      if (i == 1)
        return std::vector<Tensor>{ops::conv2d(t[0], t[1], std::nullopt, c.o)};
      return std::vector<Tensor>{ops::conv2d(t[0], t[1], t[2], c.o) + t[3]};
    };
    if (i == 2)
      in.push_back(random_tensor(DType::f32, {1, 70, 15, 32}, -1, 1));
    auto lowered = decompose(*trace_graph(types_of(in), build));
    const Node *conv = nullptr;
    for (const Node &n : lowered->nodes())
      if (n.op == "conv2d")
        conv = &n;
    REQUIRE(conv);
    ConvBlockPlan plan = conv_block_plan(*lowered, *conv);
    CHECK(plan.rows == c.rows);
    CHECK(plan.blocks == c.blocks);
    check_threads(in, build, 1e-4, 1e-5);
  }
  // Not taken: a pointwise or 1x1 conv, blocks that leave too few tasks,
  // rows whose columns never fill whole panels.
  auto plan_of = [](std::vector<int64_t> x, std::vector<int64_t> w, ops::Conv2dOptions o) {
    auto g = decompose(*trace_graph(types_of({random_tensor(DType::f32, x), random_tensor(DType::f32, w)}),
                                    [&](auto &t) { return std::vector<Tensor>{ops::conv2d(t[0], t[1], std::nullopt, o)}; }));
    for (const Node &n : g->nodes())
      if (n.op == "conv2d")
        return conv_block_plan(*g, n).blocks;
    return int64_t{-1};
  };
  CHECK(plan_of({1, 4, 64, 64}, {8, 4, 1, 1}, opts({2, 2}, {0, 0}, {1, 1}, 1)) == 0);
  CHECK(plan_of({1, 4, 12, 32}, {8, 4, 3, 3}, opts({1, 1}, {1, 1}, {1, 1}, 1)) == 0); // 6 blocks of 2 rows
  CHECK(plan_of({1, 4, 40, 28}, {8, 4, 3, 3}, opts({1, 1}, {1, 1}, {1, 1}, 1)) == 0); // 28-112 columns
  CHECK(plan_of({1, 4, 14, 32}, {8, 4, 3, 3}, opts({1, 1}, {1, 1}, {1, 1}, 1)) == 7); // 7 blocks of 2 rows
}

TEST_CASE("conv kernels: a pointwise conv on 4 KiB planes with a residual add (BlazeFace's block)", "[codegen][conv]") {
  // relu(x + conv1x1(x) + b) at 24 channels: the residual read at the
  // conv's (n, o, oy, ox) in the blocked kernel's epilogue.
  std::vector<HostTensor> in = {random_tensor(DType::f32, {2, 24, 32, 32}), random_tensor(DType::f32, {24, 24, 1, 1}),
                                random_tensor(DType::f32, {24})};
  auto g = trace_graph(types_of(in), [&](auto &t) {
    return std::vector<Tensor>{ops::relu(t[0] + ops::conv2d(t[0], t[1], t[2], opts({1, 1}, {0, 0}, {1, 1}, 1)))};
  });
  std::vector<HostTensor> expected = Interpreter::run(*g, in);
  std::vector<HostTensor> serial = run_compiled(*g, in);
  std::string m = compare(serial[0], expected[0], kRtol, kAtol);
  INFO(m);
  CHECK(m.empty());
  m = compare(run_compiled_two_threads(*g, in)[0], serial[0], 0, 0);
  INFO("two threads vs one: " << m);
  CHECK(m.empty());
}

TEST_CASE("conv kernels: a conv over a batch of small images runs groups of images as tasks",
          "[codegen][conv][threads]") {
  // emit_conv_images: 12 images of 7x7 (P = 49) in groups of 5 (5, 5, 2),
  // their rows side by side in one GEMM; bias, ReLU and a residual add in
  // the write-back; 3 images of 3x5 and no bias (one group); then im2col
  // convs: a 3x3 conv of 9 images of 6x5 (P = 30, groups of 8: 8, 1) and
  // a 7x7 stride-2 stem of 5 one-channel 28x28 images (P = 196, one image a
  // group). Same bits at 1 and 2 threads.
  struct Case {
    std::vector<int64_t> x, w;
    bool bias;
    std::vector<int64_t> stride, pad;
  };
  for (const Case &c : {Case{{12, 16, 7, 7}, {20, 16, 1, 1}, true, {1, 1}, {0, 0}},
                        Case{{3, 9, 3, 5}, {4, 9, 1, 1}, false, {1, 1}, {0, 0}},
                        Case{{9, 3, 6, 5}, {4, 3, 3, 3}, true, {1, 1}, {1, 1}},
                        Case{{5, 1, 28, 28}, {8, 1, 7, 7}, true, {2, 2}, {3, 3}}}) {
    INFO("x " << c.x[0] << "x" << c.x[1] << "x" << c.x[2] << "x" << c.x[3] << ", w " << c.w[2] << "x" << c.w[3]);
    int64_t oh = (c.x[2] + 2 * c.pad[0] - c.w[2]) / c.stride[0] + 1, ow = (c.x[3] + 2 * c.pad[1] - c.w[3]) / c.stride[1] + 1;
    std::vector<HostTensor> in = {random_tensor(DType::f32, c.x), random_tensor(DType::f32, c.w),
                                  random_tensor(DType::f32, {c.w[0]}),
                                  random_tensor(DType::f32, {c.x[0], c.w[0], oh, ow})};
    bool bias = c.bias;
    auto g = trace_graph(types_of(in), [&](auto &t) {
      Tensor y = ops::conv2d(t[0], t[1], bias ? std::optional<Tensor>(t[2]) : std::nullopt, opts(c.stride, {c.pad[0], c.pad[1], c.pad[0], c.pad[1]}, {1, 1}, 1));
      return std::vector<Tensor>{ops::relu(y) + t[3], y};
    });
    std::vector<HostTensor> expected = Interpreter::run(*g, in);
    std::vector<HostTensor> serial = run_compiled(*g, in), two = run_compiled_two_threads(*g, in);
    for (size_t i = 0; i < expected.size(); ++i) {
      std::string m = compare(serial[i], expected[i], kRtol, kAtol);
      INFO("output " << i << ": " << m);
      CHECK(m.empty());
      m = compare(two[i], serial[i], 0, 0);
      INFO("two threads vs one: " << m);
      CHECK(m.empty());
    }
  }
}

TEST_CASE("conv kernels: few output positions, many channels: the GEMM transposed, the weight packed",
          "[codegen][conv][gemm-panels]") {
  // conv_uses_transposed_gemm: colsᵀ [P, K] × Wᵀ [K, O] with the constant
  // weight packed at compile time, the [P, O] product written back
  // transposed through the bias and the chain (ReLU, a residual add). A
  // 1-D audio conv (Moonshine's stem, smaller: kernel 7, stride 3, 19
  // positions), a strided, padded, dilated 3x3 conv of 2 images (7x6 = 42
  // positions); then near misses that keep the usual GEMM: P a multiple of
  // 32, O not one, a weight that is a graph input. Same bits at 1 and 2
  // threads; tolerance: sums of K <= 336 products of values in [-1, 1].
  struct Case {
    std::vector<int64_t> x, w;
    std::vector<int64_t> stride, pad, dilation;
    bool constant_weight, transposed;
  };
  const Case cases[] = {
      {{1, 48, 1, 61}, {64, 48, 1, 7}, {1, 3}, {0, 0, 0, 0}, {1, 1}, true, true},
      {{2, 16, 13, 13}, {96, 16, 3, 3}, {2, 2}, {1, 2, 2, 1}, {1, 2}, true, true},
      {{1, 16, 8, 8}, {64, 16, 3, 3}, {1, 1}, {0, 0, 2, 2}, {1, 1}, true, false}, // P = 64 (and Winograd)
      {{1, 16, 1, 61}, {48, 16, 1, 7}, {1, 3}, {0, 0, 0, 0}, {1, 1}, true, false}, // O = 48
      {{1, 48, 1, 61}, {64, 48, 1, 7}, {1, 3}, {0, 0, 0, 0}, {1, 1}, false, false},
  };
  for (const Case &c : cases) {
    INFO("x " << c.x[1] << "x" << c.x[2] << "x" << c.x[3] << ", w " << c.w[0] << "x" << c.w[2] << "x" << c.w[3]
              << (c.constant_weight ? "" : ", weight an input"));
    ops::Conv2dOptions o = opts(c.stride, c.pad, c.dilation, 1);
    int64_t oh = (c.x[2] + c.pad[0] + c.pad[2] - c.dilation[0] * (c.w[2] - 1) - 1) / c.stride[0] + 1;
    int64_t ow = (c.x[3] + c.pad[1] + c.pad[3] - c.dilation[1] * (c.w[3] - 1) - 1) / c.stride[1] + 1;
    HostTensor weight = random_tensor(DType::f32, c.w), bias = random_tensor(DType::f32, {c.w[0]});
    std::vector<HostTensor> in = {random_tensor(DType::f32, c.x), random_tensor(DType::f32, {c.x[0], c.w[0], oh, ow})};
    if (!c.constant_weight)
      in.push_back(weight);
    auto g = trace_graph(types_of(in), [&](auto &t) {
      Tensor wt = c.constant_weight ? Tensor::from_host(weight, "w") : t[2];
      Tensor y = ops::conv2d(t[0], wt, Tensor::from_host(bias, "b"), o);
      return std::vector<Tensor>{ops::relu(y) + t[1]};
    });
    auto lowered = decompose(*g);
    const Node *conv = nullptr;
    for (const Node &n : lowered->nodes())
      if (n.op == "conv2d")
        conv = &n;
    REQUIRE(conv);
    CHECK(conv_uses_transposed_gemm(*lowered, *conv) == c.transposed);
    size_t packed = count_model_functions(
        *g, [](llvm::StringRef name) { return name.starts_with("m.gemm_panel.") && name.contains(".packed"); });
    CHECK((packed > 0) == c.transposed);
    std::vector<HostTensor> expected = Interpreter::run(*g, in);
    std::vector<HostTensor> serial = run_compiled(*g, in), two = run_compiled_two_threads(*g, in);
    std::string m = compare(serial[0], expected[0], 1e-5, 1e-4);
    INFO(m);
    CHECK(m.empty());
    m = compare(two[0], serial[0], 0, 0);
    INFO("two threads vs one: " << m);
    CHECK(m.empty());
  }
}
