// The `loop` op (ops::loop): a body traced once and run while the iteration
// number is below a trip count and a condition holds, both known only at run
// time, with loop-carried values and explicit captures. It traces, plans and
// runs equal on the reference interpreter, amdgpu-emu and the CPU JIT (1, 2 and 3
// threads, bit for bit: the body's kernels split into tasks), for trip
// counts and conditions that stop after 0, 1, an odd and an even number of
// iterations (the carried values alternate between two buffer sets); it
// nests (a loop in a loop's body, a loop in an `if` in a deduplicated
// block), survives the model format, and runs on the GPU emulator (the loop
// in the host code around the body's launches).
#include "CompiledRunner.h"
#include "EmulatedRunner.h"

#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/IR/GraphJson.h"

using namespace maxc;
using namespace maxc::test;

namespace {

constexpr int64_t kRows = 48, kCols = 96; // the body's kernels are split into tasks

size_t count_op(const Graph &g, const std::string &op) {
  size_t n = 0;
  for (const Node &node : g.nodes())
    n += node.op == op;
  return n;
}

// Inputs: x [rows, cols], trip (i32), limit (f32), w [cols, cols].
// Carried: y (x at first), s (a scalar, 0). Body: y <- tanh(y @ w * 0.1 + i),
// s <- s + mean(y); continue while s < limit. w is captured.
std::vector<Tensor> root_loop(const std::vector<Tensor> &in) {
  auto body = [](const std::vector<Tensor> &a) {
    Tensor i = ops::cast(a[0], DType::f32);
    Tensor y = ops::tanh(ops::matmul(a[2], a[4]) * 0.1 + i * 0.01);
    Tensor s = a[3] + ops::mean(y, {0, 1});
    return std::vector<Tensor>{ops::less(s, a[5]), y, s};
  };
  Tensor go = ops::full(1.0, DType::boolean);
  return ops::loop(in[1], go, {in[0], ops::full(0.0, DType::f32)}, body, {in[3], in[2]}, "steps");
}

std::vector<HostTensor> root_inputs(int32_t trip, float limit) {
  return {random_tensor(DType::f32, {kRows, kCols}, -1, 1), HostTensor::scalar(DType::i32, trip),
          HostTensor::scalar(DType::f32, limit), random_tensor(DType::f32, {kCols, kCols}, -1, 1)};
}

// The number of iterations the reference ran: from s, a sum of means, is
// not recoverable, so count with a second carried value in a twin model.
int64_t iterations(const std::vector<HostTensor> &in) {
  std::unique_ptr<Graph> g = trace_graph(types_of(in), [](const std::vector<Tensor> &x) {
    auto body = [](const std::vector<Tensor> &a) {
      Tensor y = ops::tanh(ops::matmul(a[2], a[5]) * 0.1 + ops::cast(a[0], DType::f32) * 0.01);
      Tensor s = a[3] + ops::mean(y, {0, 1});
      return std::vector<Tensor>{ops::less(s, a[6]), y, s, a[4] + 1.0};
    };
    return ops::loop(x[1], ops::full(1.0, DType::boolean), {x[0], ops::full(0.0, DType::f32), ops::full(0.0, DType::f32)},
                     body, {x[3], x[2]}, "count");
  });
  return static_cast<int64_t>(Interpreter::run(*g, in)[2].get_f64(0));
}

} // namespace

TEST_CASE("loop with a run-time trip count and condition runs equal on reference and cpu", "[bodies][loop][codegen]") {
  std::vector<HostTensor> in = root_inputs(0, 0);
  std::unique_ptr<Graph> g = trace_graph(types_of(in), root_loop);
  g->verify();
  REQUIRE(count_op(*g, "loop") == 1);
  REQUIRE(g->find_subgraph("steps.body") != nullptr);
  // The plan's scratch slot holds the second set of carried values.
  LoweringPlan plan = plan_lowering(*g);
  REQUIRE(plan.scratch_slot != static_cast<size_t>(-1));
  CHECK(plan.slots[plan.scratch_slot].bytes ==
        Dim(3 * kLoopScalarBytes + kRows * kCols * 4 + 64 + 4 + 64));
  JitCompiledGraph cpu(*g);
  // (trip, limit): the iterations differ (0, 1, odd, even; the trip count or
  // the condition ends the loop), checked on the twin model.
  std::set<int64_t> seen;
  for (auto [trip, limit] : {std::pair{0, 9.f}, std::pair{1, 9.f}, std::pair{5, 9.f}, std::pair{6, 9.f},
                             std::pair{40, 0.3f}, std::pair{-3, 9.f}}) {
    in = root_inputs(trip, limit);
    INFO("trip " << trip << " limit " << limit);
    std::vector<HostTensor> expected = Interpreter::run(*g, in);
    std::vector<HostTensor> one = cpu.run_threads(in, 1);
    MAXC_REQUIRE_CLOSE(one[0], expected[0], 1e-5, 1e-6);
    MAXC_REQUIRE_CLOSE(one[1], expected[1], 1e-5, 1e-6);
    for (int threads : {2, 3})
      REQUIRE(bitwise_mismatch(cpu.run_threads(in, threads), one).empty());
    seen.insert(iterations(in));
  }
  // 0, 1, 5, 6 iterations and one stopped by the condition before 40.
  CHECK(seen.count(0) == 1);
  CHECK(seen.count(1) == 1);
  CHECK(seen.count(5) == 1);
  CHECK(seen.count(6) == 1);
  CHECK(std::any_of(seen.begin(), seen.end(), [](int64_t n) { return n > 1 && n < 40 && n != 5 && n != 6; }));
  // The model format keeps the loop and its body.
  std::unique_ptr<Graph> back = graph_from_json(graph_to_json(*g));
  CHECK(back->equals(*g));
  // The GPU host code runs the same loop around the body's launches.
  EmulatedGraph emu(*g, "gfx942");
  for (auto [trip, limit] : {std::pair{0, 9.f}, std::pair{1, 9.f}, std::pair{6, 9.f}, std::pair{40, 0.3f}}) {
    INFO("emu: trip " << trip << " limit " << limit);
    in = root_inputs(trip, limit);
    std::vector<HostTensor> expected = Interpreter::run(*g, in), got = emu.run(in);
    MAXC_REQUIRE_CLOSE(got[0], expected[0], 1e-5, 1e-6);
    MAXC_REQUIRE_CLOSE(got[1], expected[1], 1e-5, 1e-6);
  }
}

TEST_CASE("loops nest: a loop in a loop's body, in an if, in a deduplicated block", "[bodies][loop][codegen]") {
  // Block (called twice, one definition): if flag, run an outer loop of
  // `trip` iterations whose body runs an inner loop of i + 1 iterations (its
  // trip count computed in the outer body) on a carried [4, 8] value.
  auto inner = [](const std::vector<Tensor> &a) { // iter, cond, v, k
    return std::vector<Tensor>{ops::full(1.0, DType::boolean), a[2] * 0.5 + a[3]};
  };
  auto outer = [&](const std::vector<Tensor> &a) { // iter, cond, v, trip-of-nothing, k
    Tensor n = ops::add(a[0], ops::scalar(1, DType::i64));
    Tensor v = ops::loop(n, a[1], {a[2]}, inner, {a[3]}, "inner")[0];
    return std::vector<Tensor>{ops::full(1.0, DType::boolean), ops::tanh(v)};
  };
  auto then_body = [&](const std::vector<Tensor> &c) { // x, trip, k
    return ops::loop(c[1], ops::full(1.0, DType::boolean), {c[0]}, outer, {c[2]}, "outer");
  };
  auto else_body = [](const std::vector<Tensor> &c) { return std::vector<Tensor>{c[0] - 1.0}; };
  SubgraphBody block = [&](GraphRealizationContext &, const std::vector<Tensor> &a, const NamedTensors &p) {
    Tensor k = ops::matmul(a[0], p.at("w"));
    return TensorTree(ops::cond(a[1], then_body, else_body, {a[0], a[2], k}, "pick")[0]);
  };
  std::vector<TensorType> types{TensorType(DType::f32, {4, 8}), TensorType(DType::boolean, Shape{}),
                                TensorType(DType::i64, Shape{})};
  auto g = std::make_unique<Graph>("nest", types);
  {
    GraphRealizationContext ctx(*g);
    std::vector<Tensor> in;
    for (const Value &v : g->inputs())
      in.push_back(Tensor::from_graph_value(v));
    Tensor x = in[0];
    for (int i = 0; i < 2; ++i) {
      CallOptions options;
      options.key = "block";
      options.instance = "blocks." + std::to_string(i);
      NamedTensors params{{"w", Tensor::from_host(random_tensor(DType::f32, {8, 8}, -0.5, 0.5))}};
      x = ctx.call(options, block, {x, in[1], in[2]}, params).tensor();
    }
    g->output({x.value()});
  }
  g->verify();
  CHECK(count_op(*g->find_subgraph("outer.body"), "loop") == 1);
  CHECK(count_op(*g->find_subgraph("pick.then"), "loop") == 1);
  JitCompiledGraph cpu(*g);
  for (auto [flag, trip] : {std::pair{true, 3}, std::pair{true, 0}, std::pair{true, 4}, std::pair{false, 2}}) {
    INFO("flag " << flag << " trip " << trip);
    std::vector<HostTensor> in{random_tensor(DType::f32, {4, 8}), HostTensor::scalar(DType::boolean, flag),
                               HostTensor::scalar(DType::i64, trip)};
    std::vector<HostTensor> expected = Interpreter::run(*g, in);
    MAXC_REQUIRE_CLOSE(cpu.run(in, false)[0], expected[0], 1e-5, 1e-6);
    MAXC_REQUIRE_CLOSE(cpu.run(in, true)[0], expected[0], 1e-5, 1e-6);
    MAXC_REQUIRE_CLOSE(run_gpu_emulated(*g, in)[0], expected[0], 1e-5, 1e-6);
  }
}

TEST_CASE("loop refuses a carried value whose type changes", "[bodies][loop]") {
  std::vector<HostTensor> in{random_tensor(DType::f32, {2, 3}), HostTensor::scalar(DType::i64, 2)};
  auto build = [](const std::vector<Tensor> &x) {
    auto body = [](const std::vector<Tensor> &a) {
      return std::vector<Tensor>{a[1], ops::concat({a[2], a[2]}, 0)};
    };
    return ops::loop(x[1], ops::full(1.0, DType::boolean), {x[0]}, body, {}, "grow");
  };
  MAXC_REQUIRE_ERROR(trace_graph(types_of(in), build), ErrorCode::ShapeMismatch,
                     "carried value 0 enters as f32[2,3] and leaves the body as f32[4,3]");
}
