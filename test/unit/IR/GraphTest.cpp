#include "TestUtil.h"

using namespace maxc;
using namespace maxc::test;

namespace {

// A small graph touching constants, attributes of every kind, multi-result
// ops and named inputs/outputs.
std::unique_ptr<Graph> sample_graph() {
  auto g = std::make_unique<Graph>("sample");
  ValueId x = g->add_input(TensorType(DType::f32, {Dim("batch"), 4}), "x");
  GraphRealizationContext ctx(*g);
  Tensor tx = Tensor::from_graph_value(g->value(x));
  Tensor w = ctx.add_source(Tensor::from_host(random_tensor(DType::f32, {4}), "w"));
  Tensor y = ops::gelu(tx * w + 0.5, "tanh");
  Tensor z = ops::where(ops::greater(y, ops::scalar(0, DType::f32)), y, ops::full(-1.25, DType::f32, {Dim("batch"), 4}));
  Tensor c = ops::cast(z, DType::f16);
  g->set_outputs({y.value().id(), c.value().id()}, {"y", "c"});
  return g;
}

} // namespace

TEST_CASE("graphs record nodes in topological order with types", "[ir][graph]") {
  auto g = sample_graph();
  g->verify();
  CHECK(g->nodes().front().op == "constant");
  CHECK(g->type_of(g->output_ids()[1]).to_string() == "f16[batch,4]");
  CHECK(g->constants().count("w") == 1);
  std::string text = print_graph(*g);
  CHECK_THAT(text, Catch::Matchers::Contains("graph @sample(%0: f32[batch,4] \"x\")"));
  CHECK_THAT(text, Catch::Matchers::Contains("gelu(%"));
  CHECK_THAT(text, Catch::Matchers::Contains("{approximate = \"tanh\"}"));
  CHECK_THAT(text, Catch::Matchers::Contains("const \"w\" : f32[4]"));
}

TEST_CASE("graph JSON round-trips exactly", "[ir][json]") {
  auto g = sample_graph();
  std::string text = graph_to_json(*g);
  auto back = graph_from_json(text, "sample.json");
  CHECK(back->equals(*g));
  CHECK(graph_to_json(*back) == text);
  CHECK(print_graph(*back) == print_graph(*g));
  // Results are the same too.
  HostTensor x = random_tensor(DType::f32, {3, 4});
  auto a = Interpreter::run(*g, {x});
  auto b = Interpreter::run(*back, {x});
  CHECK(a[0].identical(b[0]));
  CHECK(a[1].identical(b[1]));
}

TEST_CASE("graph JSON with referenced constants uses the resolver", "[ir][json]") {
  auto g = sample_graph();
  GraphJsonOptions options;
  options.embed_constants = false;
  std::string text = graph_to_json(*g, options);
  CHECK(text.find("\"data\"") == std::string::npos);
  auto back = graph_from_json(text, "g.json", [&](const std::string &name, DType, const std::vector<int64_t> &) { return g->constant(name); });
  CHECK(back->equals(*g));
  MAXC_REQUIRE_ERROR(graph_from_json(text, "g.json"), ErrorCode::InvalidGraph, "no weights file");
  MAXC_REQUIRE_ERROR(graph_from_json(text, "g.json", [](const std::string &, DType, const std::vector<int64_t> &) { return HostTensor(DType::f32, {5}); }),
                     ErrorCode::ShapeMismatch, "g.json: /constants/0: error[E0104]: constant 'w' is declared f32[4]");
}

TEST_CASE("graph JSON errors name the file and JSON pointer", "[ir][json]") {
  std::string text = graph_to_json(*sample_graph());
  MAXC_REQUIRE_ERROR(graph_from_json("{", "bad.json"), ErrorCode::InvalidGraph, "bad.json: error[E0109]: malformed JSON");
  MAXC_REQUIRE_ERROR(graph_from_json("{\"format\":\"other\"}", "bad.json"), ErrorCode::InvalidGraph, "not a maxc graph");
  std::string wrong_op = text;
  wrong_op.replace(wrong_op.find("\"gelu\""), 6, "\"gelo\"");
  MAXC_REQUIRE_ERROR(graph_from_json(wrong_op, "bad.json"), ErrorCode::UnknownOp, "did you mean 'gelu'");
  std::string wrong_type = text;
  wrong_type.replace(wrong_type.find("\"f16[batch,4]\""), 14, "\"f16[batch,5]\"");
  MAXC_REQUIRE_ERROR(graph_from_json(wrong_type, "bad.json"), ErrorCode::ShapeMismatch, "/results/0/type");
}

TEST_CASE("verify rejects malformed graphs", "[ir][graph]") {
  Graph g("g", {TensorType(DType::f32, {2})});
  MAXC_REQUIRE_ERROR(g.add_node("add", {0, 7}), ErrorCode::InvalidGraph, "%7 does not exist");
  MAXC_REQUIRE_ERROR(g.add_node("sqrtt", {0}), ErrorCode::UnknownOp, "did you mean 'sqrt'");
  MAXC_REQUIRE_ERROR(g.add_node("exp", {0}, {{"axis", int64_t{1}}}), ErrorCode::UnknownAttribute,
                     "this op takes no attributes");
  MAXC_REQUIRE_ERROR(g.add_node("cast", {0}), ErrorCode::InvalidAttribute, "missing required attribute 'dtype'");
  MAXC_REQUIRE_ERROR(g.add_node("cast", {0}, {{"dtype", int64_t{3}}}), ErrorCode::InvalidAttribute, "must be a dtype");
  MAXC_REQUIRE_ERROR(g.add_node("add", {0}), ErrorCode::OperandCount, "expected 2 operand(s), got 1");
  // A hand-built node with a wrong result type fails verify().
  Graph bad("bad", {TensorType(DType::f32, {2})});
  bad.append_node_unchecked(Node{"exp", {0}, {}, {}, ""}, {TensorType(DType::f32, {3})});
  MAXC_REQUIRE_ERROR(bad.verify(), ErrorCode::InvalidGraph, "infers f32[2]");
}

TEST_CASE("constants are stored once", "[ir][graph]") {
  Graph g("g");
  HostTensor w = random_tensor(DType::f32, {8});
  CHECK(g.add_constant("w", w) == "w");
  CHECK(g.add_constant("w", w) == "w");
  CHECK(g.add_constant("w", w.clone()) == "w"); // identical bytes
  CHECK(g.add_constant("w", random_tensor(DType::f32, {8}, 5, 6)) == "w.1");
  CHECK(g.constants().size() == 2);
}

TEST_CASE("transposed constants are made only when read", "[ir][graph]") {
  Graph g("g");
  HostTensor w = random_tensor(DType::f32, {2, 5, 3});
  CHECK(g.add_transposed_constant("w.T", w) == "w.T");
  // Type known, bytes not made; the source is at hand.
  CHECK(g.constant_types().at("w.T").shape() == std::vector<int64_t>{2, 3, 5});
  CHECK(g.constant_types().at("w.T").storage() == nullptr);
  REQUIRE(g.transposed_source("w.T") != nullptr);
  CHECK(g.transposed_source("w.T")->storage() == w.storage());
  CHECK(g.transposed_source("w") == nullptr);
  const HostTensor &t = g.constant("w.T");
  REQUIRE(t.storage() != nullptr);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j < 3; ++j)
        CHECK(t.data_as<float>()[(b * 3 + j) * 5 + i] == w.data_as<float>()[(b * 5 + i) * 3 + j]);
  // constants() makes every one; a name taken by other bytes gets a suffix,
  // by the same bytes is stored once.
  Graph h("h");
  h.add_transposed_constant("v.T", w);
  CHECK(h.add_constant("v.T", t.clone()) == "v.T");
  CHECK(h.add_transposed_constant("v.T", random_tensor(DType::f32, {2, 5, 3}, 5, 6)) == "v.T.1");
  h.add_transposed_constant("u.T", w);
  for (const auto &[name, data] : h.constants())
    CHECK(data.storage() != nullptr);
  CHECK(h.constant("u.T").identical(t));
}
