// Long chains of fused elementwise ops (a model that `repeat`s an
// elementwise module without a subgraph) are tens of thousands of nodes
// deep: the code generators walk them with explicit work stacks, not
// recursion, so they neither overflow the stack nor change the results.
#include "CompiledRunner.h"

#include "maxc/Codegen/CompiledRun.h"
#include "maxc/Codegen/LoweringPlan.h"

using namespace maxc;
using namespace maxc::test;

namespace {

/// x → ((x * 0.5 + 0.25) ...) `length` ops deep, alternating mul/add with a
/// scalar constant-free operand: y = x * a + b, a and b inputs of shape [n].
std::unique_ptr<Graph> deep_chain(int64_t length, int64_t n) {
  TensorType t(DType::f32, make_shape({n}));
  auto g = std::make_unique<Graph>("deep", std::vector<TensorType>{t, t, t});
  ValueId x = g->input_ids()[0], a = g->input_ids()[1], b = g->input_ids()[2];
  for (int64_t i = 0; i < length; ++i)
    x = g->add_node(i % 2 ? "add" : "mul", {x, i % 2 ? b : a})[0];
  x = g->add_node("neg", {x})[0];
  g->set_outputs({x});
  return g;
}

} // namespace

TEST_CASE("a 30000-op fused elementwise chain compiles (CPU, GPU emulation) like the interpreter",
          "[codegen][deep-chain]") {
  std::unique_ptr<Graph> g = deep_chain(30000, 5);
  LoweringPlan plan = plan_lowering(*g);
  CHECK(plan.kernels.size() == 1); // one kernel: the whole chain is fused
  // a = 1, b = 1e-4: x + 15000e-4 at the end, exactly representable steps aside.
  std::vector<HostTensor> inputs = {random_tensor(DType::f32, {5}, -1, 1), HostTensor(DType::f32, {5}),
                                    HostTensor(DType::f32, {5})};
  for (int64_t i = 0; i < 5; ++i) {
    inputs[1].set_f64(i, 1.0);
    inputs[2].set_f64(i, 1e-4 * static_cast<double>(i + 1));
  }
  std::vector<HostTensor> expected = Interpreter::run(*g, inputs);
  {
    INFO("CPU");
    MAXC_REQUIRE_CLOSE(run_compiled(*g, inputs, 0)[0], expected[0], 1e-5, 1e-6);
  }
  {
    INFO("GPU kernels, emulated");
    MAXC_REQUIRE_CLOSE(run_gpu_emulated(*g, inputs)[0], expected[0], 1e-5, 1e-6);
  }
}

TEST_CASE("a 20000-op chain of fused views compiles (CPU, GPU emulation) like the interpreter",
          "[codegen][deep-chain]") {
  // reshape [4,6] → [6,4] → transpose → [4,6] ..., with a neg every third
  // step: views recurse per element, so the planner stores one value every
  // 256 views (LoweringPlan kMaxFusedChain) instead of overflowing the stack.
  TensorType t(DType::f32, make_shape({4, 6}));
  auto g = std::make_unique<Graph>("views", std::vector<TensorType>{t});
  ValueId x = g->input_ids()[0];
  for (int i = 0; i < 20000; ++i) {
    if (i % 3 == 2) {
      x = g->add_node("neg", {x})[0];
      continue;
    }
    x = g->add_node("reshape", {x}, {{"shape", AttrValue(make_shape({6, 4}))}})[0];
    x = g->add_node("transpose", {x}, {{"perm", AttrValue(std::vector<int64_t>{1, 0})}})[0];
  }
  g->set_outputs({x});
  LoweringPlan plan = plan_lowering(*g);
  CHECK(plan.kernels.size() > 1);
  CHECK(plan.kernels.size() < 200);
  std::vector<HostTensor> inputs = {random_tensor(DType::f32, {4, 6}, 0.999, 1.001)};
  std::vector<HostTensor> expected = Interpreter::run(*g, inputs);
  {
    INFO("CPU");
    MAXC_REQUIRE_CLOSE(run_compiled(*g, inputs, 0)[0], expected[0], 1e-5, 1e-6);
  }
  {
    INFO("GPU kernels, emulated");
    MAXC_REQUIRE_CLOSE(run_gpu_emulated(*g, inputs)[0], expected[0], 1e-5, 1e-6);
  }
}
