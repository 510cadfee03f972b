// Ops that own bodies: an op declares the attributes naming its subgraph
// bodies (OpDef::body_attrs); node_bodies/body_names (IR) and is_call /
// call_body (Ops) answer from that declaration, and the DOT printer and
// dim_symbols walk every body, nested ones included.
#include "TestUtil.h"

#include "maxc/IR/DotPrinter.h"
#include "maxc/IR/GraphSymbols.h"
#include "maxc/Transforms/CallSites.h"

using namespace maxc;
using namespace maxc::test;

namespace {

// A body-owning op that is not a call ("test_if", bodies in "then" and
// "else"), declared through the IR hook for the length of a test; every other
// op keeps its registry declaration.
const std::vector<std::string> *test_body_attributes(const std::string &op) {
  static const std::vector<std::string> test_if{"then", "else"};
  if (op == "test_if")
    return &test_if;
  const OpDef *def = OpRegistry::instance().find(op);
  return def && def->has_bodies() ? &def->body_attrs : nullptr;
}

struct TestIfDeclared {
  BodyAttributes previous = set_body_attributes(&test_body_attributes);
  ~TestIfDeclared() { set_body_attributes(previous); }
};

// A body `name` of one f32[dim] input returning its negation.
std::shared_ptr<Graph> negating_body(const std::string &name, const Dim &dim) {
  auto body = std::make_shared<Graph>(name, std::vector<TensorType>{TensorType(DType::f32, {dim})});
  ValueId y = body->add_node("neg", {body->input_ids()[0]})[0];
  body->set_outputs({y});
  return body;
}

size_t count_of(const std::string &text, const std::string &part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1))
    ++n;
  return n;
}

} // namespace

TEST_CASE("the call op declares its callee as its one body", "[ir][bodies][subgraph]") {
  const OpDef &call = OpRegistry::instance().get("call");
  CHECK(call.body_attrs == std::vector<std::string>{"callee"});
  CHECK(call.has(OpTrait::call));
  CHECK(op_traits_text(call.traits) == "structural call");
  CHECK(op_traits_text(OpTrait::strided) == "strided");
  CHECK(has_bodies("call"));
  CHECK_FALSE(has_bodies("add"));
  CHECK_FALSE(has_bodies("no_such_op"));
  CHECK(body_attributes("call") == std::vector<std::string>{"callee"});
  CHECK(body_attributes("matmul").empty());
  // No other registered op owns bodies (but `if` and `loop`) or is a call without declaring one.
  for (const OpDef *def : OpRegistry::instance().all()) {
    INFO(def->name);
    CHECK(def->has_bodies() == (def->name == "call" || def->name == "if" || def->name == "loop"));
    CHECK(def->has(OpTrait::branch) == (def->name == "if"));
    CHECK(def->has(OpTrait::loop) == (def->name == "loop"));
    CHECK(def->has(OpTrait::call) == (def->name == "call"));
  }

  // A traced call: the helpers find its body; no other node has one.
  Graph root("root", {TensorType(DType::f32, {Dim("n")})});
  {
    GraphRealizationContext ctx(root);
    Tensor x = Tensor::from_graph_value(root.inputs()[0]);
    CallOptions options;
    options.name = "block";
    Tensor y = ctx.call(options, [](auto &, const std::vector<Tensor> &a, auto &) { return TensorTree(ops::neg(a[0])); },
                        {ops::exp(x)}, {})
                   .tensor();
    root.output({y});
  }
  const Graph *block = root.find_subgraph("block");
  REQUIRE(block != nullptr);
  size_t calls = 0;
  for (const Node &n : root.nodes()) {
    if (n.op != "call") {
      CHECK_FALSE(is_call(n));
      CHECK(call_body_name(n) == nullptr);
      CHECK(call_body(root, n) == nullptr);
      CHECK(body_names(n).empty());
      CHECK(node_bodies(root, n).empty());
      continue;
    }
    ++calls;
    CHECK(is_call(n));
    REQUIRE(call_body_name(n) != nullptr);
    CHECK(*call_body_name(n) == "block");
    CHECK(call_body(root, n) == block);
    CHECK(body_names(n) == std::vector<std::string>{"block"});
    CHECK(node_bodies(root, n) == std::vector<const Graph *>{block});
  }
  CHECK(calls == 1);
}

TEST_CASE("the registry checks body attribute declarations", "[ir][bodies]") {
  auto op = [](std::vector<AttrSpec> attrs, std::vector<std::string> bodies, OpTraits traits) {
    OpDef def;
    def.name = "test_op";
    def.attrs = std::move(attrs);
    def.body_attrs = std::move(bodies);
    def.traits = traits;
    return def;
  };
  AttrSpec body{"body", AttrKind::string, std::nullopt, ""};
  AttrSpec other{"other", AttrKind::string, std::nullopt, ""};
  AttrSpec count{"count", AttrKind::integer, std::nullopt, ""};
  {
    OpRegistry r;
    CHECK_NOTHROW(r.add(op({body, other}, {"body", "other"}, OpTrait::structural)));
    CHECK(r.get("test_op").has_bodies());
  }
  {
    OpRegistry r; // a body attribute that is not declared
    CHECK_THROWS_AS(r.add(op({other}, {"body"}, OpTrait::structural)), Error);
  }
  {
    OpRegistry r; // ... or not a string
    CHECK_THROWS_AS(r.add(op({count}, {"count"}, OpTrait::structural)), Error);
  }
  {
    OpRegistry r; // a call has exactly one body
    CHECK_THROWS_AS(r.add(op({body, other}, {"body", "other"}, OpTrait::call)), Error);
    CHECK_THROWS_AS(r.add(op({}, {}, OpTrait::call)), Error);
  }
}

TEST_CASE("an op with two bodies: node_bodies, DOT clusters, nested symbols", "[ir][bodies][subgraph]") {
  TestIfDeclared declared;
  Graph root("root", {TensorType(DType::f32, {Dim("n")})});
  root.add_subgraph(negating_body("then_b", Dim("n")));
  root.add_subgraph(negating_body("leaf", Dim("n")));
  // else_b calls leaf: a call inside a body.
  auto else_b = std::make_shared<Graph>("else_b", std::vector<TensorType>{TensorType(DType::f32, {Dim("n")})});
  root.add_subgraph(else_b);
  ValueId called = else_b->add_node("call", {else_b->input_ids()[0]}, {{"callee", std::string("leaf")}})[0];
  else_b->set_outputs({called});
  // A body in else_b's own table (not the root's) that uses a symbol nothing
  // else uses: only a walk into nested bodies sees "m".
  else_b->add_subgraph(negating_body("deep", Dim("m")));

  Node test_if;
  test_if.op = "test_if";
  test_if.operands = {root.input_ids()[0]};
  test_if.attrs = Attrs{{"then", std::string("then_b")}, {"else", std::string("else_b")}};
  ValueId y = root.append_node_unchecked(test_if, {TensorType(DType::f32, {Dim("n")})})[0];
  root.set_outputs({y});

  const Node &node = root.nodes().back();
  CHECK(body_names(node) == std::vector<std::string>{"then_b", "else_b"});
  CHECK(node_bodies(root, node) == std::vector<const Graph *>{root.find_subgraph("then_b"), else_b.get()});
  CHECK_FALSE(is_call(node)); // bodies, but not a call: no operand-to-input binding
  CHECK(call_body(root, node) == nullptr);
  CHECK(node_bodies(*else_b, else_b->nodes().back()) == std::vector<const Graph *>{root.find_subgraph("leaf")});

  CHECK(dim_symbols(root) == std::vector<std::string>{"m", "n"});
  CHECK(dim_symbols(*else_b) == std::vector<std::string>{"m", "n"});
  CHECK(dim_symbols(*root.find_subgraph("then_b")) == std::vector<std::string>{"n"});

  std::string dot = print_graph_dot(root);
  INFO(dot);
  // Clusters in name order: else_b s0, leaf s1, then_b s2.
  CHECK_THAT(dot, Catch::Matchers::Contains("label=\"subgraph @else_b\""));
  CHECK_THAT(dot, Catch::Matchers::Contains("g_n0 [shape=box3d, label=\"test_if @then_b @else_b\\nf32[n]\"]"));
  CHECK_THAT(dot, Catch::Matchers::Contains("s0_n0 [shape=box3d, label=\"call @leaf\\nf32[n]\"]"));
  CHECK_THAT(dot, Catch::Matchers::Contains("g_n0 -> s2_v0 [style=dashed, lhead=cluster_s2];"));
  CHECK_THAT(dot, Catch::Matchers::Contains("g_n0 -> s0_v0 [style=dashed, lhead=cluster_s0];"));
  CHECK_THAT(dot, Catch::Matchers::Contains("s0_n0 -> s1_v0 [style=dashed, lhead=cluster_s1];"));
  CHECK(count_of(dot, "style=dashed") == 3);
}

TEST_CASE("dim_symbols terminates on a body that calls itself", "[ir][bodies]") {
  Graph root("root", {TensorType(DType::f32, {Dim("n")})});
  auto loop = negating_body("loop", Dim("k"));
  root.add_subgraph(loop);
  Node self;
  self.op = "call";
  self.operands = {loop->input_ids()[0]};
  self.attrs = Attrs{{"callee", std::string("loop")}};
  loop->append_node_unchecked(self, {TensorType(DType::f32, {Dim("k")})});
  CHECK(node_bodies(*loop, loop->nodes().back()) == std::vector<const Graph *>{loop.get()});
  CHECK(dim_symbols(root) == std::vector<std::string>{"k", "n"});
  CHECK(dim_symbols(*loop) == std::vector<std::string>{"k"});
}

TEST_CASE("call-site constants: a body another body-owning op runs is left out", "[ir][bodies][layout]") {
  TestIfDeclared declared;
  // root: w (a constant) passed by a call to `block`; optionally a test_if
  // that also runs `block` (binding nothing to its inputs).
  auto build = [](bool with_if) {
    auto root = std::make_unique<Graph>("root", std::vector<TensorType>{TensorType(DType::f32, {4, 4})});
    root->add_subgraph(negating_body("block", Dim(16)));
    root->add_subgraph(negating_body("other", Dim(16)));
    GraphRealizationContext ctx(*root);
    Tensor w = ctx.add_source(Tensor::from_host(random_tensor(DType::f32, {16}), "w"));
    ValueId y = root->add_node("call", {w.value().id()}, {{"callee", std::string("block")}})[0];
    if (with_if) {
      Node test_if;
      test_if.op = "test_if";
      test_if.operands = {y};
      test_if.attrs = Attrs{{"then", std::string("other")}, {"else", std::string("block")}};
      y = root->append_node_unchecked(test_if, {TensorType(DType::f32, {16})})[0];
    }
    root->set_outputs({y});
    return root;
  };
  auto plain = build(false);
  auto bound = constant_bound_inputs(*plain);
  REQUIRE(bound.count("block") == 1);
  CHECK(bound["block"] == std::vector<bool>{true});
  CHECK(bound.count("other") == 0); // never called
  CHECK(constant_bound_inputs(*build(true)).empty());

  // Transitive scope: every definition is listed; one that another
  // body-owning op runs has no constant-bound input.
  auto all = constant_bound_inputs(*plain, CallSiteScope::Transitive);
  CHECK(all["block"] == std::vector<bool>{true});
  CHECK(all["other"] == std::vector<bool>{true}); // never called: nothing contradicts
  auto with_if = constant_bound_inputs(*build(true), CallSiteScope::Transitive);
  CHECK(with_if["block"] == std::vector<bool>{false});
  CHECK(with_if["other"] == std::vector<bool>{false});
}

TEST_CASE("call-site constants: transitive through a definition's own inputs", "[ir][bodies][layout]") {
  // root calls `outer` with a constant and with an input; `outer` passes its
  // first input on to `inner`'s only input.
  auto root = std::make_unique<Graph>("root", std::vector<TensorType>{TensorType(DType::f32, {16})});
  auto inner = negating_body("inner", Dim(16));
  auto outer = std::make_shared<Graph>(
      "outer", std::vector<TensorType>{TensorType(DType::f32, {16}), TensorType(DType::f32, {16})});
  root->add_subgraph(inner);
  root->add_subgraph(outer);
  ValueId z = outer->add_node("call", {outer->input_ids()[0]}, {{"callee", std::string("inner")}})[0];
  outer->set_outputs({outer->add_node("add", {z, outer->input_ids()[1]})[0]});
  GraphRealizationContext ctx(*root);
  Tensor w = ctx.add_source(Tensor::from_host(random_tensor(DType::f32, {16}), "w"));
  ValueId x = root->input_ids()[0];
  ValueId y = root->add_node("call", {w.value().id(), x}, {{"callee", std::string("outer")}})[0];
  root->set_outputs({y});
  auto bound = constant_bound_inputs(*root, CallSiteScope::Transitive);
  CHECK(bound["outer"] == std::vector<bool>{true, false});
  CHECK(bound["inner"] == std::vector<bool>{true});
  // Root scope: `inner` is called from a body, so it is left out.
  auto rooted = constant_bound_inputs(*root);
  CHECK(rooted["outer"] == std::vector<bool>{true, false});
  CHECK(rooted.count("inner") == 0);

  // A second root call binding `outer`'s first input to the graph input
  // makes both non-constant.
  root->add_node("call", {x, x}, {{"callee", std::string("outer")}});
  bound = constant_bound_inputs(*root, CallSiteScope::Transitive);
  CHECK(bound["outer"] == std::vector<bool>{false, false});
  CHECK(bound["inner"] == std::vector<bool>{false});
}
