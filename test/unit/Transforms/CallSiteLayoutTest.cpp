// Compile-time weight layout through subgraph calls (MatmulLayout.h): the
// parameters of a deduplicated block that every call binds to a constant
// arrive pre-transposed, the definition stays one function without weight
// transposes, and what the graph computes does not change (interpreter and
// compiled code).
#include "../Codegen/CompiledRunner.h"

#include "maxc/Frontend/ModelLoader.h"
#include "maxc/Transforms/Decompose.h"
#include "maxc/Transforms/MatmulLayout.h"

using namespace maxc;
using namespace maxc::test;

namespace {

/// Transpose nodes of `g` that read one of its inputs other than the first
/// (a subgraph's parameters: its weights).
size_t weight_transposes(const Graph &g) {
  size_t count = 0;
  for (const Node &n : g.nodes())
    if (n.op == "transpose" && g.value_info(n.operands[0]).producer < 0 && g.value_info(n.operands[0]).index > 0)
      ++count;
  return count;
}

size_t count_op(const Graph &g, const std::string &op) {
  size_t count = 0;
  for (const Node &n : g.nodes())
    count += n.op == op;
  return count;
}

Tensor param(std::vector<int64_t> shape) { return Tensor::from_host(random_tensor(DType::f32, std::move(shape))); }

} // namespace

TEST_CASE("the GPT example's block has no weight transposes after decompose", "[transforms][layout]") {
  LoadOptions options;
  options.synthesize_weights = true; // structure only
  DiagnosticEngine diagnostics;
  const std::string source = MAXC_SOURCE_DIR;
  LoadedModel model = load_model(source + "/examples/gpt/model.json", options, diagnostics);
  INFO(diagnostics.to_text());
  REQUIRE(model.graph);
  const Graph &graph = *model.graph;
  REQUIRE(graph.subgraphs().size() == 1);
  const Graph &block = *graph.subgraphs().begin()->second;
  CHECK(count_op(block, "linear") == 4); // each reads a weight parameter: before, a run-time transpose
  auto lowered = decompose(graph);
  lowered->verify();
  REQUIRE(lowered->subgraphs().size() == 1);
  const Graph &lowered_block = *lowered->subgraphs().begin()->second;
  CHECK(weight_transposes(lowered_block) == 0);
  CHECK(count_op(lowered_block, "matmul") == count_op(block, "linear") + count_op(block, "matmul"));
  CHECK(lowered_block.input_ids().size() == block.input_ids().size());
  size_t transposed_inputs = 0;
  for (size_t i = 0; i < block.input_ids().size(); ++i) {
    const ValueInfo &before = block.value_info(block.input_ids()[i]);
    const ValueInfo &after = lowered_block.value_info(lowered_block.input_ids()[i]);
    if (after.name == before.name + ".T") {
      CHECK(after.type == transposed_type(before.type));
      ++transposed_inputs;
    } else {
      CHECK(after.type == before.type);
    }
  }
  CHECK(transposed_inputs == 4); // qkv, attention proj, fc, mlp proj
  // Every call passes the transposed constants, stored once per instance.
  size_t calls = 0;
  for (const Node &n : lowered->nodes()) {
    if (n.op != "call")
      continue;
    ++calls;
    size_t transposed_operands = 0;
    for (ValueId id : n.operands) {
      const ValueInfo &info = lowered->value_info(id);
      if (info.producer >= 0 && lowered->nodes()[info.producer].op == "constant") {
        const std::string &name = lowered->nodes()[info.producer].attrs.get_string("name");
        transposed_operands += name.size() > 2 && name.compare(name.size() - 2, 2, ".T") == 0;
      }
    }
    CHECK(transposed_operands == 4);
  }
  CHECK(calls == 4);
}

TEST_CASE("pre-transposed subgraph parameters keep results", "[transforms][layout]") {
  // The block reads `w` through linear (replaced by its transpose), `u`
  // through matmul transpose_b and elementwise (transposed copy appended),
  // `v` through transpose_a, and `s` untransposed. The last call binds `w`
  // to a graph input: `w` is then transposed at run time for every call.
  auto block = [](GraphRealizationContext &, const std::vector<Tensor> &args, const NamedTensors &p) {
    Tensor h = ops::linear(args[0], p.at("w"), p.at("b"));                       // [n, 6]
    Tensor g = ops::matmul(h, p.at("u"), false, true) + ops::sum(p.at("u"), {0}); // [n, 6]
    Tensor k = ops::matmul(p.at("v"), ops::transpose(g), true, false);          // [6, n]
    return TensorTree(ops::transpose(k) * p.at("s"));
  };
  for (bool all_constant : {true, false}) {
    INFO("all call sites constant: " << all_constant);
    Graph graph("g", {TensorType(DType::f32, {Dim("n"), 6}), TensorType(DType::f32, {6, 6})});
    {
      GraphRealizationContext ctx(graph);
      Tensor x = Tensor::from_graph_value(graph.inputs()[0]);
      Tensor y = x;
      for (int i = 0; i < 3; ++i) {
        CallOptions options;
        options.instance = "layers." + std::to_string(i);
        options.name = "Block";
        Tensor w = !all_constant && i == 2 ? Tensor::from_graph_value(graph.inputs()[1]) : param({6, 6});
        y = ctx.call(options, block, {i == 0 ? x : y * 0.5 + x * 0.25},
                     {{"w", w}, {"b", param({6})}, {"u", param({6, 6})}, {"v", param({6, 6})}, {"s", param({6})}})
                .tensor();
      }
      graph.output({y});
    }
    REQUIRE(graph.subgraphs().size() == 1);
    auto lowered = decompose(graph);
    lowered->verify();
    REQUIRE(lowered->subgraphs().size() == 1);
    const Graph &body = *lowered->subgraphs().begin()->second;
    // w (when constant everywhere) and v replaced, u appended.
    CHECK(body.input_ids().size() == graph.subgraphs().begin()->second->input_ids().size() + 1);
    CHECK(weight_transposes(body) == (all_constant ? 0 : 1));
    CHECK(count_op(body, "transpose") == (all_constant ? 2 : 3)); // the body's own transposes of g and k stay

    for (int64_t n : {3, 1}) {
      INFO("n = " << n);
      std::vector<HostTensor> inputs = {random_tensor(DType::f32, {n, 6}), random_tensor(DType::f32, {6, 6})};
      HostTensor expected = Interpreter::run(graph, inputs)[0];
      // f32 roundings of the rewritten ops through three layers: 1e-4 failed
      // for 2 seeds in 60 (--rng-seed 33 and 49; e.g. 2.3e-4 at 0.23). A
      // wrong layout is off by far more than 2e-3.
      MAXC_REQUIRE_CLOSE(Interpreter::run(*lowered, inputs)[0], expected, 2e-3, 2e-3);
      MAXC_REQUIRE_CLOSE(run_compiled(graph, inputs)[0], expected, 2e-3, 2e-3);
    }
  }
}

TEST_CASE("a weight transposed for the root and for calls is stored once", "[transforms][layout]") {
  Graph graph("g", {TensorType(DType::f32, {2, 8})});
  {
    GraphRealizationContext ctx(graph);
    Tensor x = Tensor::from_graph_value(graph.inputs()[0]);
    Tensor w = param({8, 8});
    auto block = [](GraphRealizationContext &, const std::vector<Tensor> &a, const NamedTensors &p) {
      return TensorTree(ops::tanh(ops::linear(a[0], p.at("w"))));
    };
    Tensor y = ops::linear(x, w);
    for (int i = 0; i < 2; ++i)
      y = ctx.call(nullptr, block, {y}, {{"w", w}}).tensor();
    graph.output({y});
  }
  auto lowered = decompose(graph);
  lowered->verify();
  size_t transposed = 0;
  for (const auto &[name, data] : lowered->constants())
    transposed += name.size() > 2 && name.compare(name.size() - 2, 2, ".T") == 0;
  CHECK(transposed == 1);
  HostTensor in = random_tensor(DType::f32, {2, 8});
  MAXC_REQUIRE_CLOSE(Interpreter::run(*lowered, {in})[0], Interpreter::run(graph, {in})[0], 1e-5, 1e-6);
}
