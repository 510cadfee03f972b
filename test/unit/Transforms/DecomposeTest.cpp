// decompose() must not change what a graph computes (within rounding: the
// reference computes composites in double, the decomposition step by step).
#include "TestUtil.h"

#include "maxc/Transforms/Decompose.h"

using namespace maxc;
using namespace maxc::test;

namespace {

void check_decomposition(const std::vector<HostTensor> &inputs, const BuildFn &build, double rtol, double atol) {
  std::unique_ptr<Graph> traced = trace_graph(types_of(inputs), build);
  const Graph &graph = *traced;
  auto lowered = decompose(graph);
  lowered->verify();
  for (const Node &n : lowered->nodes())
    CHECK_FALSE(is_composite_op(n.op));
  auto expected = Interpreter::run(graph, inputs);
  auto actual = Interpreter::run(*lowered, inputs);
  for (size_t i = 0; i < expected.size(); ++i)
    MAXC_REQUIRE_CLOSE(actual[i], expected[i], rtol, atol);
}

} // namespace

TEST_CASE("decompose keeps results: softmax, norms, linear, embedding, pooling", "[transforms][decompose]") {
  HostTensor x = random_tensor(DType::f32, {3, 5, 8}, -4, 4);
  HostTensor w = random_tensor(DType::f32, {8}), b = random_tensor(DType::f32, {8});
  check_decomposition({x, w, b}, [](auto &in) {
    return std::vector<Tensor>{ops::softmax(in[0], -1),        ops::softmax(in[0], 1),
                               ops::log_softmax(in[0], -1),    ops::layer_norm(in[0], in[1], in[2], 1e-5),
                               ops::layer_norm(in[0], in[1], std::nullopt), ops::rms_norm(in[0], in[1], 1e-6)};
  }, 1e-5, 1e-6);

  HostTensor lw = random_tensor(DType::f32, {4, 8}), lb = random_tensor(DType::f32, {4});
  HostTensor v = random_tensor(DType::f32, {8});
  check_decomposition({x, lw, lb, v}, [](auto &in) {
    return std::vector<Tensor>{ops::linear(in[0], in[1], in[2]), ops::linear(in[3], in[1]), ops::linear(in[3], in[1], in[2])};
  }, 1e-6, 1e-6);

  HostTensor table = random_tensor(DType::f32, {10, 4});
  HostTensor ids = HostTensor::from_i64(DType::i64, {2, 3}, {0, 9, 3, 3, 1, -1});
  check_decomposition({table, ids}, [](auto &in) { return std::vector<Tensor>{ops::embedding(in[0], in[1])}; }, 0, 0);

  HostTensor img = random_tensor(DType::f32, {2, 3, 4, 5});
  HostTensor s = random_tensor(DType::f32, {3}, 0.5, 2), bias = random_tensor(DType::f32, {3});
  HostTensor mean = random_tensor(DType::f32, {3}), var = random_tensor(DType::f32, {3}, 0.1, 2);
  check_decomposition({img, s, bias, mean, var}, [](auto &in) {
    return std::vector<Tensor>{ops::global_avg_pool2d(in[0]), ops::batch_norm(in[0], in[1], in[2], in[3], in[4], 1e-5)};
  }, 1e-5, 1e-6);
}

TEST_CASE("decompose computes f16 normalizations in f32", "[transforms][decompose]") {
  HostTensor x = random_tensor(DType::f16, {4, 16}), w = random_tensor(DType::f16, {16});
  check_decomposition({x, w}, [](auto &in) {
    return std::vector<Tensor>{ops::softmax(in[0]), ops::rms_norm(in[0], in[1])};
  }, 1e-3, 1e-3); // one f16 rounding of the result
}

TEST_CASE("decompose keeps subgraph sharing", "[transforms][decompose]") {
  Graph graph("g", {TensorType(DType::f32, {2, 8})});
  {
    GraphRealizationContext ctx(graph);
    Tensor x = Tensor::from_graph_value(graph.inputs()[0]);
    for (int i = 0; i < 3; ++i)
      x = ctx.call(nullptr, [](auto &, auto &a, auto &p) { return TensorTree(ops::softmax(ops::linear(a[0], p.at("w")))); },
                   {x}, {{"w", Tensor::from_host(random_tensor(DType::f32, {8, 8}))}})
              .tensor();
    graph.output({x});
  }
  auto lowered = decompose(graph);
  lowered->verify();
  CHECK(lowered->subgraphs().size() == 1);
  HostTensor in = random_tensor(DType::f32, {2, 8});
  MAXC_REQUIRE_CLOSE(Interpreter::run(*lowered, {in})[0], Interpreter::run(graph, {in})[0], 1e-5, 1e-6);
}
