// Precision policy (Transforms/PromotePrecision.h): f16/bf16 graphs rebuilt
// in f32 with the interface kept, bodies widened in place (dedup kept), and
// results within 16-bit rounding of the 16-bit evaluation; the CPU backend
// applies it (its f16 conv ran element by element before).
#include "TestUtil.h"

#include "maxc/Codegen/CompiledRun.h"
#include "maxc/Transforms/Decompose.h"
#include "maxc/Transforms/PromotePrecision.h"

using namespace maxc;
using namespace maxc::test;

namespace {

/// How many values of `g` have dtype `d`.
size_t count_dtype(const Graph &g, DType d) {
  size_t n = 0;
  for (size_t v = 0; v < g.num_values(); ++v)
    n += g.type_of(static_cast<ValueId>(v)).dtype == d;
  return n;
}

/// x [2, 8] (dtype `d`) through three calls of one block (a matmul by its
/// own 16-bit weight, relu) then a cast to f32 and back: an f16 model as
/// exporters write them, with a deduplicated body.
std::unique_ptr<Graph> low_precision_model(DType d) {
  auto graph = std::make_unique<Graph>("g", std::vector<TensorType>{TensorType(d, {2, 8})});
  GraphRealizationContext ctx(*graph);
  Tensor h = Tensor::from_graph_value(graph->inputs()[0]);
  for (int i = 0; i < 3; ++i)
    h = ctx.call(nullptr,
                 [](auto &, auto &a, auto &p) { return TensorTree(ops::relu(ops::matmul(a[0], p.at("w")))); }, {h},
                 {{"w", Tensor::from_host(random_tensor(d, {8, 8}, -0.5, 0.5))}})
            .tensor();
  Tensor y = ops::cast(ops::cast(h, DType::f32) * 0.5, d);
  graph->output({y.value(), ops::cast(y, DType::f32).value()});
  return graph;
}

} // namespace

TEST_CASE("promote_low_precision computes f16 and bf16 in f32, interface kept", "[transforms][precision]") {
  for (DType d : {DType::f16, DType::bf16}) {
    INFO(dtype_name(d));
    std::unique_ptr<Graph> graph = low_precision_model(d);
    std::unique_ptr<Graph> promoted = promote_low_precision(*graph);
    REQUIRE(promoted);
    promoted->verify();
    // The interface: the same types.
    REQUIRE(promoted->input_ids().size() == 1);
    CHECK(promoted->type_of(promoted->input_ids()[0]) == graph->type_of(graph->input_ids()[0]));
    for (size_t i = 0; i < 2; ++i)
      CHECK(promoted->type_of(promoted->output_ids()[i]) == graph->type_of(graph->output_ids()[i]));
    CHECK(promoted->output_names() == graph->output_names());
    // Inside: 16 bits only where the input enters and the output leaves.
    CHECK(count_dtype(*promoted, d) == 2);
    REQUIRE(promoted->subgraphs().size() == 1); // still one body, three calls
    const Graph &body = *promoted->subgraphs().begin()->second;
    CHECK(promoted->subgraphs().begin()->first == graph->subgraphs().begin()->first);
    CHECK(count_dtype(body, d) == 0);
    CHECK(body.type_of(body.input_ids()[0]).dtype == DType::f32);
    // Within 16-bit rounding of the 16-bit evaluation.
    HostTensor x = random_tensor(d, {2, 8});
    std::vector<HostTensor> want = Interpreter::run(*graph, {x}), got = Interpreter::run(*promoted, {x});
    const double tol = d == DType::f16 ? 4e-3 : 3e-2;
    MAXC_REQUIRE_CLOSE(got[1], want[1], tol, tol);
    CHECK(got[0].dtype() == d);
  }
}

TEST_CASE("promote_low_precision leaves f32 graphs alone", "[transforms][precision]") {
  std::unique_ptr<Graph> graph = trace_graph({TensorType(DType::f32, {4})}, [](const std::vector<Tensor> &in) {
    return std::vector<Tensor>{ops::relu(in[0])};
  });
  CHECK_FALSE(promote_low_precision(*graph));
}

TEST_CASE("the CPU backend's decompose runs f16 models in f32", "[transforms][precision]") {
  std::unique_ptr<Graph> graph = low_precision_model(DType::f16);
  DecomposeOptions cpu{true, true};
  cpu.promote_low_precision = true;
  std::unique_ptr<Graph> lowered = decompose(*graph, cpu);
  CHECK(count_dtype(*lowered, DType::f16) == 2);
  std::unique_ptr<Graph> kept = decompose(*graph, DecomposeOptions{true, true});
  CHECK(count_dtype(*kept, DType::f16) > 2);
  // Compiled on the CPU (the driver's CPU backend promotes) vs the reference.
  HostTensor x = random_tensor(DType::f16, {2, 8});
  std::vector<HostTensor> want = Interpreter::run(*graph, {x});
  std::vector<HostTensor> got = run_compiled_on_host(*graph, {x});
  MAXC_REQUIRE_CLOSE(got[1], want[1], 4e-3, 4e-3);
}

TEST_CASE("promote_low_precision moves a dim the root's node defines with its node", "[transforms][precision][dim]") {
  // An f16 graph whose root defines a dim at run time (bind_dim, as a
  // value-dependent shape imports): the rebuild casts the inputs where
  // they enter, so the bind_dim node's index moves, and the symbol with it
  // (it refused such graphs before: their f16 ops ran element by element).
  constexpr int64_t kRows = 12, kMax = 300;
  auto build = [](const std::vector<Tensor> &in) {
    Dim n = ops::bind_dim(ops::cast(ops::abs(in[1]) * 100.0 + 1.0, DType::i32), "n", kMax);
    Tensor col = ops::iota({Dim(kRows), n}, 1, DType::f16) * 0.01;
    Tensor y = ops::sin(col * ops::reshape(in[0], {Dim(kRows), Dim(1)}));
    return std::vector<Tensor>{ops::sum(y * y, {1})};
  };
  std::vector<TensorType> types{TensorType(DType::f16, {kRows}), TensorType(DType::f16, Shape{})};
  std::unique_ptr<Graph> graph = trace_graph(types, build);
  std::unique_ptr<Graph> promoted = promote_low_precision(*graph);
  REQUIRE(promoted);
  promoted->verify();
  const SymbolInfo *n = promoted->symbol_table().find("n");
  REQUIRE(n);
  REQUIRE(n->origin == SymbolOrigin::NodeResult);
  REQUIRE(n->node >= 0);
  REQUIRE(static_cast<size_t>(n->node) < promoted->nodes().size());
  CHECK(promoted->nodes()[static_cast<size_t>(n->node)].op == kBindDimOp);
  CHECK(n->node != graph->symbol_table().find("n")->node); // moved (the inputs' casts come first)
  CHECK(promoted->symbol_table().upper_bound("n") == kMax);
  HostTensor x = random_tensor(DType::f16, {kRows}, -3, 3);
  for (double t : {0.36, 2.5}) { // n = 37 and 251
    INFO("t " << t);
    std::vector<HostTensor> in{x, HostTensor::scalar(DType::f16, t)};
    std::vector<HostTensor> want = Interpreter::run(*graph, in);
    MAXC_REQUIRE_CLOSE(Interpreter::run(*promoted, in)[0], want[0], 2e-2, 2e-2);
    MAXC_REQUIRE_CLOSE(run_compiled_on_host(*graph, in)[0], want[0], 2e-2, 2e-2);
  }
}
