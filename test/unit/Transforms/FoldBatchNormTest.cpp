// Batch-norm folding (FoldBatchNorm.h): conv2d + batch_norm with constant
// parameters becomes one conv2d with folded weights and bias, and computes
// the same (interpreter and compiled code); anything else is left alone.
//
// Tolerance (rtol 1e-5, atol 1e-5): W' and b' are rounded to f32 once each,
// the reference normalizes the conv's output in double.
#include "../Codegen/CompiledRunner.h"

#include "maxc/Transforms/Decompose.h"

using namespace maxc;
using namespace maxc::test;

namespace {

size_t count_op(const Graph &g, const std::string &op) {
  size_t count = 0;
  for (const Node &n : g.nodes())
    count += n.op == op;
  return count;
}

Tensor constant(std::vector<int64_t> shape, double lo = -1, double hi = 1) {
  return Tensor::from_host(random_tensor(DType::f32, std::move(shape), lo, hi));
}

Tensor batch_norm(const Tensor &x, int64_t c) {
  return ops::batch_norm(x, constant({c}, 0.5, 2), constant({c}), constant({c}), constant({c}, 0.1, 2), 1e-5);
}

} // namespace

TEST_CASE("batch_norm after a constant-weight conv2d folds into it", "[transforms][fold-bn]") {
  ops::Conv2dOptions same;
  same.padding = {1, 1, 1, 1};
  ops::Conv2dOptions grouped = same;
  grouped.groups = 2;
  ops::Conv2dOptions depthwise;
  depthwise.groups = 4;
  depthwise.stride = {2, 2};
  HostTensor x = random_tensor(DType::f32, {2, 4, 9, 10});
  auto graph = trace_graph(types_of({x}), [&](auto &in) {
    return std::vector<Tensor>{
        ops::relu(batch_norm(ops::conv2d(in[0], constant({8, 4, 3, 3}), constant({8}), same), 8)), // bias, epilogue
        batch_norm(ops::conv2d(in[0], constant({6, 2, 3, 3}), std::nullopt, grouped), 6),          // no bias
        batch_norm(ops::conv2d(in[0], constant({4, 1, 3, 3}), std::nullopt, depthwise), 4)};       // depthwise
  });
  auto lowered = decompose(*graph);
  lowered->verify();
  CHECK(count_op(*graph, "batch_norm") == 3);
  CHECK(count_op(*lowered, "conv2d") == 3);
  CHECK(count_op(*lowered, "rsqrt") == 0); // no normalization left
  CHECK(count_op(*lowered, "sub") == 0);
  std::vector<HostTensor> expected = Interpreter::run(*graph, {x});
  std::vector<HostTensor> folded = Interpreter::run(*lowered, {x});
  std::vector<HostTensor> compiled = run_compiled(*graph, {x});
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("output " << i);
    MAXC_REQUIRE_CLOSE(folded[i], expected[i], 1e-5, 1e-5);
    MAXC_REQUIRE_CLOSE(compiled[i], expected[i], 1e-5, 1e-5);
  }
}

TEST_CASE("batch_norm stays when the conv2d result is used twice or a parameter is not constant",
          "[transforms][fold-bn]") {
  HostTensor x = random_tensor(DType::f32, {1, 3, 6, 6}), w = random_tensor(DType::f32, {5, 3, 3, 3});
  HostTensor gamma = random_tensor(DType::f32, {5}, 0.5, 2);
  auto graph = trace_graph(types_of({x, w, gamma}), [&](auto &in) {
    Tensor shared = ops::conv2d(in[0], constant({5, 3, 3, 3}));
    return std::vector<Tensor>{
        batch_norm(shared, 5) + shared,                                         // conv result read twice
        batch_norm(ops::conv2d(in[0], in[1]), 5),                               // weight is an input
        ops::batch_norm(ops::conv2d(in[0], constant({5, 3, 3, 3})), in[2], constant({5}), constant({5}),
                        constant({5}, 0.1, 2), 1e-5)};                          // gamma is an input
  });
  auto lowered = decompose(*graph);
  lowered->verify();
  CHECK(count_op(*lowered, "rsqrt") == 3); // every norm still computed
  std::vector<HostTensor> in = {x, w, gamma};
  std::vector<HostTensor> expected = Interpreter::run(*graph, in), actual = Interpreter::run(*lowered, in);
  for (size_t i = 0; i < expected.size(); ++i)
    MAXC_REQUIRE_CLOSE(actual[i], expected[i], 1e-5, 1e-5);
}
