// Inlining definitions called once (Transforms/Inline.h), run by canonicalize.
#include "TestUtil.h"

#include "maxc/Transforms/Canonicalize.h"
#include "maxc/Transforms/Inline.h"

#include <map>

using namespace maxc;
using namespace maxc::test;

namespace {

/// x [2, 8] through one call per entry of `widths` of a layer
/// h = relu(h·w + b), w a parameter and b a constant of the body, the k-th
/// of width widths[k] (another input or output width: another definition).
std::unique_ptr<Graph> layers(const std::vector<int64_t> &widths) {
  auto graph = std::make_unique<Graph>("g", std::vector<TensorType>{TensorType(DType::f32, {2, 8})});
  GraphRealizationContext ctx(*graph);
  Tensor h = Tensor::from_graph_value(graph->inputs()[0]);
  int64_t in = 8;
  std::map<int64_t, HostTensor> biases; // one per width: equal layers, equal bodies
  for (size_t k = 0; k < widths.size(); ++k) {
    int64_t out = widths[k];
    if (!biases.count(out))
      biases.emplace(out, random_tensor(DType::f32, {out}, -0.5, 0.5));
    HostTensor b = biases.at(out);
    h = ctx.call(nullptr,
                 [b](auto &, auto &a, auto &p) {
                   return TensorTree(ops::relu(ops::matmul(a[0], p.at("w")) + Tensor::from_host(b)));
                 },
                 {h}, {{"w", Tensor::from_host(random_tensor(DType::f32, {in, out}, -0.5, 0.5))}})
            .tensor();
    in = out;
  }
  graph->output({h});
  return graph;
}

size_t calls_in(const Graph &g) {
  size_t n = 0;
  for (const Node &node : g.nodes())
    n += node.op == "call";
  return n;
}

} // namespace

TEST_CASE("inline: a definition called once is pasted into the root, bit-exact", "[transforms][inline]") {
  std::unique_ptr<Graph> g = layers({6, 6, 6}); // 8→6 once, 6→6 twice
  REQUIRE(g->subgraphs().size() == 2);
  REQUIRE(calls_in(*g) == 3);
  size_t inlined = 0;
  std::unique_ptr<Graph> out = inline_single_calls(*g, &inlined);
  REQUIRE(out);
  out->verify();
  CHECK(inlined == 1);
  CHECK(out->subgraphs().size() == 1); // the shared one stays
  CHECK(calls_in(*out) == 2);
  bool relu_in_root = false;
  for (const Node &n : out->nodes())
    relu_in_root = relu_in_root || n.op == "relu";
  CHECK(relu_in_root);
  // The body's own constant (b) joined the root's constants.
  CHECK(out->constants().size() > g->constants().size());
  HostTensor x = random_tensor(DType::f32, {2, 8});
  CHECK(Interpreter::run(*out, {x})[0].identical(Interpreter::run(*g, {x})[0]));

  // canonicalize runs it first and counts it.
  RewriteStats stats;
  std::unique_ptr<Graph> canonical = canonicalize(*g, &stats);
  REQUIRE(canonical);
  CHECK(stats.fired["inline-single-call"] == 1);
  CHECK(canonical->subgraphs().size() == 1);
  CHECK(Interpreter::run(*canonical, {x})[0].identical(Interpreter::run(*g, {x})[0]));
}

TEST_CASE("inline: calls sharing a definition stay calls; nothing to inline is null", "[transforms][inline]") {
  std::unique_ptr<Graph> shared = layers({8, 8, 8}); // 8→8 three times
  REQUIRE(shared->subgraphs().size() == 1);
  size_t inlined = 7;
  CHECK_FALSE(inline_single_calls(*shared, &inlined));
  CHECK(inlined == 0);
  // Every definition distinct: all inlined, no subgraph left.
  std::unique_ptr<Graph> distinct = layers({8, 6, 4});
  std::unique_ptr<Graph> out = inline_single_calls(*distinct);
  REQUIRE(out);
  out->verify();
  CHECK(out->subgraphs().empty());
  CHECK(calls_in(*out) == 0);
  HostTensor x = random_tensor(DType::f32, {2, 8});
  CHECK(Interpreter::run(*out, {x})[0].identical(Interpreter::run(*distinct, {x})[0]));
}
