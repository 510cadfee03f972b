// GEMM epilogues: the elementwise chain after a matmul or an im2col conv2d
// (bias, activation, residual add) runs inside the GEMM kernel, on each
// finished tile. Compiled results are compared with the reference
// interpreter on fresh random inputs; the plan decision is checked too.
//
// Tolerances (|a-e| <= atol + rtol*|e|): kAcc (rtol 1e-4, atol 1e-4) for f32
// GEMMs over K up to 300 (f32 accumulation vs the reference's double);
// kConv (rtol 1e-5, atol 1e-5): the conv reference sums in double too, but
// the GEMM sums in f32 over K = C*KH*KW = 36.
#include "CompiledRunner.h"

#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/Transforms/Decompose.h"

using namespace maxc;
using namespace maxc::test;

namespace {

struct Tol {
  double rtol, atol;
};
constexpr Tol kAcc{1e-4, 1e-4};
constexpr Tol kConv{1e-5, 1e-5};

/// The plan of the decomposed graph, as the code generator sees it.
struct Planned {
  std::unique_ptr<Graph> lowered;
  LoweringPlan plan;
};
Planned plan_of(const Graph &g) {
  Planned p{decompose(g), {}};
  p.plan = plan_lowering(*p.lowered);
  return p;
}

/// Compiled (serial, and with two threads) vs the interpreter.
void check(const Graph &graph, const std::vector<HostTensor> &inputs, Tol tol) {
  graph.verify();
  std::vector<HostTensor> expected = cpu_reference(graph, inputs);
  std::vector<HostTensor> serial = run_compiled(graph, inputs);
  std::vector<HostTensor> parallel = run_compiled_two_threads(graph, inputs);
  REQUIRE(serial.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    std::string m = compare(serial[i], expected[i], tol.rtol, tol.atol);
    INFO("output " << i << ": " << m);
    CHECK(m.empty());
    m = compare(parallel[i], serial[i], 0, 0);
    INFO("output " << i << ", two threads vs one: " << m);
    CHECK(m.empty());
  }
}

/// The number of GEMM epilogues in the plan of `g` (decomposed).
size_t epilogues(const Graph &g) { return plan_of(g).plan.epilogues.size(); }

std::unique_ptr<Graph> trace(const std::vector<HostTensor> &inputs, const BuildFn &build) {
  return trace_graph(types_of(inputs), build);
}

} // namespace

TEST_CASE("epilogue: linear + bias + relu (constant weights, edges, K blocks)", "[codegen][epilogue]") {
  // M = 37 (6-row tiles + 1 leftover row), N = 70 (2 panels + a masked partial
  // edge), K = 300 (two K blocks: the epilogue must wait for the last).
  HostTensor w = random_tensor(DType::f32, {70, 300}, -1, 1), bias = random_tensor(DType::f32, {70});
  std::vector<HostTensor> in = {random_tensor(DType::f32, {37, 300}, -1, 1)};
  auto g = trace(in, [&](auto &x) {
    return std::vector<Tensor>{ops::relu(ops::linear(x[0], Tensor::from_host(w), Tensor::from_host(bias)))};
  });
  CHECK(epilogues(*g) == 1);
  check(*g, in, kAcc);
}

TEST_CASE("epilogue: linear + bias + relu with a symbolic batch", "[codegen][epilogue]") {
  HostTensor w = random_tensor(DType::f32, {40, 24}, -1, 1), bias = random_tensor(DType::f32, {40});
  auto g = trace_graph({TensorType(DType::f32, {Dim("n"), 24})}, [&](auto &x) {
    return std::vector<Tensor>{ops::relu(ops::linear(x[0], Tensor::from_host(w), Tensor::from_host(bias)))};
  });
  CHECK(epilogues(*g) == 1);
  for (int64_t n : {13, 1, 0}) {
    INFO("n = " << n);
    check(*g, {random_tensor(DType::f32, {n, 24}, -1, 1)}, kAcc);
  }
}

TEST_CASE("epilogue: matmul + gelu, matmul + residual add", "[codegen][epilogue]") {
  std::vector<HostTensor> in = {random_tensor(DType::f32, {20, 64}, -1, 1), random_tensor(DType::f32, {64, 64}, -1, 1),
                                random_tensor(DType::f32, {64, 40}, -1, 1), random_tensor(DType::f32, {64})};
  SECTION("gelu (erf and tanh forms)") {
    auto g = trace(in, [](auto &x) {
      return std::vector<Tensor>{ops::gelu(ops::matmul(x[0], x[2])), ops::gelu(ops::matmul(x[0], x[1]), "tanh")};
    });
    CHECK(epilogues(*g) == 2);
    check(*g, in, kAcc);
  }
  SECTION("residual: x + x @ w; x + relu(x @ w + b) * 0.5; a chain with a cast round trip") {
    auto g = trace(in, [](auto &x) {
      return std::vector<Tensor>{
          x[0] + ops::matmul(x[0], x[1]), x[0] + ops::relu(ops::matmul(x[0], x[1]) + x[3]) * 0.5,
          ops::cast(ops::cast(ops::matmul(x[0], x[2]), DType::f16), DType::f32)};
    });
    CHECK(epilogues(*g) == 3);
    check(*g, in, Tol{1e-3, 1e-3}); // the f16 round trip: one f16 rounding of values up to ~10
  }
}

TEST_CASE("epilogue: a chain value read by several nodes that meet again (ONNX GELU)", "[codegen][epilogue]") {
  // torch's erf GELU as exported to ONNX, after linear + bias: h = x @ w.T +
  // b is read by the div and by the mul, which meet in one stored value: h
  // is not stored, the GELU runs in the GEMM kernel. M = 37 (6-row tiles +
  // 1 leftover row), N = 70 (2 panels + a masked partial one), K = 300 (two
  // K blocks); then M = 4, N = 16 (the direct variant, one partial panel).
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{37, 70, 300}, {4, 16, 9}}) {
    INFO("m, n, k = " << m << ", " << n << ", " << k);
    HostTensor w = random_tensor(DType::f32, {n, k}, -1, 1), bias = random_tensor(DType::f32, {n});
    std::vector<HostTensor> in = {random_tensor(DType::f32, {m, k}, -1, 1)};
    auto g = trace(in, [&](auto &x) {
      Tensor h = ops::linear(x[0], Tensor::from_host(w), Tensor::from_host(bias));
      return std::vector<Tensor>{h * (ops::erf(h / 1.4142135381698608) + 1.0) * 0.5};
    });
    Planned p = plan_of(*g);
    REQUIRE(p.plan.epilogues.size() == 1);
    CHECK(p.plan.slots.empty()); // neither the GEMM's result nor h is stored
    check(*g, in, kAcc);
  }
}

TEST_CASE("epilogue: batched matmul + bias (batch dims in the chain's index)", "[codegen][epilogue]") {
  std::vector<HostTensor> in = {random_tensor(DType::f32, {2, 3, 7, 40}, -1, 1),
                                random_tensor(DType::f32, {2, 3, 40, 50}, -1, 1), random_tensor(DType::f32, {50}),
                                random_tensor(DType::f32, {3, 40, 50}, -1, 1), random_tensor(DType::f32, {2, 3, 7, 50})};
  auto g = trace(in, [](auto &x) {
    return std::vector<Tensor>{ops::matmul(x[0], x[1]) + x[2],
                               // broadcast rhs batch; the residual differs per batch
                               ops::silu(ops::matmul(x[0], x[3]) + x[4])};
  });
  CHECK(epilogues(*g) == 2);
  check(*g, in, kAcc);
}

TEST_CASE("epilogue: conv2d + bias + relu, conv2d + residual", "[codegen][epilogue]") {
  // O = 16 rows (two 6-row tiles + 4 leftover), P = 9*10 = 90 columns (two
  // panels + a masked partial one), K = 4*3*3 = 36.
  ops::Conv2dOptions same;
  same.padding = {1, 1, 1, 1};
  std::vector<HostTensor> in = {random_tensor(DType::f32, {2, 4, 9, 10}), random_tensor(DType::f32, {16, 4, 3, 3}),
                                random_tensor(DType::f32, {16}), random_tensor(DType::f32, {4, 4, 3, 3}),
                                random_tensor(DType::f32, {4})};
  SECTION("bias + relu") {
    auto g = trace(in, [&](auto &x) { return std::vector<Tensor>{ops::relu(ops::conv2d(x[0], x[1], x[2], same))}; });
    CHECK(epilogues(*g) == 1);
    check(*g, in, kConv);
  }
  SECTION("residual, without and with bias; bias alone (no chain)") {
    auto g = trace(in, [&](auto &x) {
      return std::vector<Tensor>{x[0] + ops::conv2d(x[0], x[3], std::nullopt, same),
                                 ops::relu(x[0] + ops::conv2d(ops::relu(x[0]), x[3], x[4], same)),
                                 ops::conv2d(x[0], x[1], x[2], same)};
    });
    CHECK(epilogues(*g) == 2);
    check(*g, in, kConv);
  }
}

TEST_CASE("epilogue: no fusion when the GEMM result is used twice or broadcast", "[codegen][epilogue]") {
  std::vector<HostTensor> in = {random_tensor(DType::f32, {8, 30}, -1, 1), random_tensor(DType::f32, {30, 16}, -1, 1),
                                random_tensor(DType::f32, {3, 8, 16})};
  SECTION("used twice: relu(h) and h * 2 read the stored h") {
    auto g = trace(in, [](auto &x) {
      Tensor h = ops::matmul(x[0], x[1]);
      return std::vector<Tensor>{ops::relu(h), h * 2.0};
    });
    CHECK(epilogues(*g) == 0);
    check(*g, in, kAcc);
  }
  SECTION("broadcast: h [8, 16] + y [3, 8, 16] reads h at a remapped index") {
    auto g = trace(in, [](auto &x) { return std::vector<Tensor>{ops::relu(ops::matmul(x[0], x[1]) + x[2])}; });
    CHECK(epilogues(*g) == 0);
    check(*g, in, kAcc);
  }
  SECTION("a chain value used twice: the epilogue stops there (it is stored)") {
    auto g = trace(in, [](auto &x) {
      Tensor t = ops::tanh(ops::matmul(x[0], x[1]));
      return std::vector<Tensor>{t * t + 1.0, ops::sum(t, {1})};
    });
    Planned p = plan_of(*g);
    REQUIRE(p.plan.epilogues.size() == 1);
    CHECK(p.lowered->nodes()[p.lowered->value_info(p.plan.epilogues.begin()->second).producer].op == "tanh");
    check(*g, in, Tol{1e-4, 1e-4});
  }
}

TEST_CASE("epilogue: K = 0 (C is the chain of zeros)", "[codegen][epilogue]") {
  // The GEMM runs one (empty) K block so its tiles are written and finished.
  std::vector<HostTensor> in = {random_tensor(DType::f32, {7, 0}), random_tensor(DType::f32, {0, 40}),
                                random_tensor(DType::f32, {40})};
  auto g = trace(in, [](auto &x) {
    return std::vector<Tensor>{ops::relu(ops::matmul(x[0], x[1]) + x[2]), ops::matmul(x[0], x[1])};
  });
  check(*g, in, kAcc);
}
