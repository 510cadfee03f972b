// Subgraph dedup: identical bodies share one definition, differences do not,
// nested calls inline, keyed calls skip re-tracing.
#include "TestUtil.h"

using namespace maxc;
using namespace maxc::test;

namespace {

NamedTensors block_params(int64_t d, DType dtype = DType::f32) {
  return {{"fc.weight", Tensor::from_host(random_tensor(dtype, {d, d}))},
          {"fc.bias", Tensor::from_host(random_tensor(dtype, {d}))}};
}

// A small residual block: x + relu(linear-like(x)).
TensorTree block(GraphRealizationContext &, const std::vector<Tensor> &args, const NamedTensors &p, int *traces) {
  ++*traces;
  const Tensor &x = args[0];
  Tensor h = ops::matmul(x, p.at("fc.weight")) + p.at("fc.bias");
  return TensorTree(x + ops::relu(h));
}

} // namespace

TEST_CASE("identical bodies share one subgraph definition", "[realization][subgraph]") {
  Graph graph("chain", {TensorType(DType::f32, {Dim("batch"), 8})});
  int traces = 0;
  std::vector<NamedTensors> weights;
  {
    GraphRealizationContext ctx(graph);
    Tensor x = Tensor::from_graph_value(graph.inputs()[0]);
    for (int i = 0; i < 48; ++i) {
      weights.push_back(block_params(8));
      CallOptions options;
      options.instance = "layers." + std::to_string(i);
      options.name = "Block";
      x = ctx.call(options, [&](auto &c, auto &a, auto &p) { return block(c, a, p, &traces); }, {x}, weights.back())
              .tensor();
    }
    graph.output({x});
    CHECK(ctx.subgraph_cache()->traces == 48);
    CHECK(ctx.subgraph_cache()->calls == 48);
  }
  CHECK(traces == 48);
  REQUIRE(graph.subgraphs().size() == 1);
  size_t calls = 0;
  for (const Node &n : graph.nodes())
    calls += n.op == "call";
  CHECK(calls == 48);
  CHECK(graph.has_constant("layers.0.fc.weight"));
  CHECK(graph.has_constant("layers.47.fc.bias"));
  CHECK(graph.nodes().back().name == "layers.47");
  graph.verify();

  // Same numbers as running the blocks by hand.
  HostTensor in = random_tensor(DType::f32, {2, 8});
  HostTensor out = Interpreter::run(graph, {in})[0];
  Graph flat("flat", {TensorType(DType::f32, {2, 8})});
  {
    GraphRealizationContext ctx(flat);
    Tensor x = Tensor::from_graph_value(flat.inputs()[0]);
    int unused = 0;
    for (int i = 0; i < 48; ++i)
      x = block(ctx, {x}, weights[i], &unused).tensor();
    flat.output({x});
  }
  CHECK(flat.subgraphs().empty());
  MAXC_REQUIRE_CLOSE(out, Interpreter::run(flat, {in})[0], 0, 0);
  // And the JSON form keeps the sharing.
  auto back = graph_from_json(graph_to_json(graph));
  CHECK(back->equals(graph));
}

TEST_CASE("bodies differing in an attribute, dtype or shape are not shared", "[realization][subgraph]") {
  Graph graph("g", {TensorType(DType::f32, {4, 8}), TensorType(DType::f64, {4, 8}), TensorType(DType::f32, {4, 6})});
  GraphRealizationContext ctx(graph);
  auto in = graph.inputs();
  auto softmax_body = [](int64_t axis) {
    return [axis](GraphRealizationContext &, const std::vector<Tensor> &a, const NamedTensors &) {
      return TensorTree(ops::gelu(a[0], axis == 0 ? "none" : "tanh"));
    };
  };
  Tensor x32 = Tensor::from_graph_value(in[0]), x64 = Tensor::from_graph_value(in[1]),
         x6 = Tensor::from_graph_value(in[2]);
  ctx.call(nullptr, softmax_body(0), {x32});
  ctx.call(nullptr, softmax_body(0), {x32});  // same → shared
  ctx.call(nullptr, softmax_body(1), {x32});  // attribute differs
  ctx.call(nullptr, softmax_body(0), {x64});  // dtype differs
  ctx.call(nullptr, softmax_body(0), {x6});   // shape differs
  CHECK(graph.subgraphs().size() == 4);
  // Parameters of different shapes also split definitions.
  int traces = 0;
  auto body = [&](auto &c, auto &a, auto &p) { return block(c, a, p, &traces); };
  Graph g2("g2", {TensorType(DType::f32, {1, 8})});
  GraphRealizationContext ctx2(g2);
  Tensor y = Tensor::from_graph_value(g2.inputs()[0]);
  ctx2.call(nullptr, body, {y}, block_params(8));
  ctx2.call(nullptr, body, {y}, block_params(8, DType::f32));
  CHECK(g2.subgraphs().size() == 1);
  NamedTensors wide = {{"fc.weight", Tensor::from_host(random_tensor(DType::f32, {8, 8}))},
                       {"fc.bias", Tensor::from_host(random_tensor(DType::f32, {1, 8}))}};
  ctx2.call(nullptr, body, {y}, wide);
  CHECK(g2.subgraphs().size() == 2);
}

TEST_CASE("keyed calls trace once and rebuild output trees", "[realization][subgraph]") {
  Graph graph("g", {TensorType(DType::f32, {2, 4})});
  int traces = 0;
  GraphRealizationContext ctx(graph);
  Tensor x = Tensor::from_graph_value(graph.inputs()[0]);
  auto body = [&](GraphRealizationContext &, const std::vector<Tensor> &a, const NamedTensors &p) {
    ++traces;
    Tensor s = a[0] * p.at("scale");
    return TensorTree::dict({{"scaled", TensorTree(s)},
                             {"pair", TensorTree::list({TensorTree(ops::exp(s)), TensorTree(ops::neg(s))})}});
  };
  TensorTree last;
  for (int i = 0; i < 5; ++i) {
    CallOptions options;
    options.key = "Scale";
    options.instance = "s" + std::to_string(i);
    last = ctx.call(options, body, {x}, {{"scale", Tensor::from_host(random_tensor(DType::f32, {4}))}});
    x = last.at("pair").at(1).tensor();
  }
  CHECK(traces == 1);
  CHECK(graph.subgraphs().size() == 1);
  CHECK(ctx.subgraph_out_defs().at("Scale").to_string() == "{pair: [*, *], scaled: *}");
  CHECK(last.at("scaled").tensor().type().to_string() == "f32[2,4]");
  // A keyed hit with incompatible operand types is caught.
  Graph other("o", {TensorType(DType::f32, {2, 4})});
  (void)other;
  MAXC_REQUIRE_ERROR(ctx.call(CallOptions{"Scale", "bad", ""}, body, {x},
                              {{"scale", Tensor::from_host(random_tensor(DType::f32, {2, 4}))}}),
                     ErrorCode::ShapeMismatch, "the subgraph expects f32[4]");
  // The seed-style overload with a key.
  ctx.call("Scale", body, {x}, {{"scale", Tensor::from_host(random_tensor(DType::f32, {4}))}});
  CHECK(traces == 1);
}

TEST_CASE("nested calls inside a body inline", "[realization][subgraph]") {
  Graph graph("g", {TensorType(DType::f32, {3})});
  GraphRealizationContext ctx(graph);
  Tensor x = Tensor::from_graph_value(graph.inputs()[0]);
  auto inner = [](GraphRealizationContext &c, const std::vector<Tensor> &a, const NamedTensors &p) {
    CHECK(c.subgraph_cache() == nullptr);
    CHECK(c.prefix() == "mlp");
    return TensorTree(a[0] * p.at("w"));
  };
  auto outer = [&](GraphRealizationContext &c, const std::vector<Tensor> &a, const NamedTensors &p) {
    CHECK(c.subgraph_cache() == nullptr); // inside a body
    CallOptions options;
    options.instance = "mlp";
    NamedTensors mlp_params{{"w", p.at("mlp.w")}};
    Tensor y = c.call(options, inner, {a[0]}, mlp_params).tensor();
    // A realized tensor captured in the body becomes a body constant, named
    // relative to the body.
    Tensor k = Tensor::from_f64(DType::f32, {3}, {1, 2, 3}).set_name("k");
    return TensorTree(y + k);
  };
  CallOptions options;
  options.instance = "h.0";
  Tensor out = ctx.call(options, outer, {x}, {{"mlp.w", Tensor::from_host(random_tensor(DType::f32, {3}))}}).tensor();
  REQUIRE(graph.subgraphs().size() == 1);
  const Graph &body = *graph.subgraphs().begin()->second;
  for (const Node &n : body.nodes())
    CHECK(n.op != "call");
  CHECK(body.has_constant("k"));
  CHECK(graph.has_constant("h.0.mlp.w"));
  graph.output({out});
  graph.verify();
}
