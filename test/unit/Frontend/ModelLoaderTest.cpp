// The model format: every diagnostic code with its message and JSON pointer,
// all problems in one run, tracing equal to the hand-built API graph, dedup
// through subgraph modules, and weights checks.
#include "TestUtil.h"

#include "maxc/Frontend/ModelLoader.h"
#include "maxc/Frontend/Safetensors.h"

#include <cstdlib>
#include <fstream>
#include <optional>
#include <unistd.h>

using namespace maxc;
using namespace maxc::test;

namespace {

LoadedModel load(const std::string &text, DiagnosticEngine &diags, bool synthesize = true,
                 const std::string &path = "m.json") {
  LoadOptions options;
  options.synthesize_weights = synthesize;
  return load_model_text(text, path, options, diags);
}

// Asserts exactly one error with this code, pointer and message fragment.
void require_single(const std::string &model, ErrorCode code, const std::string &pointer, const std::string &fragment) {
  DiagnosticEngine diags;
  LoadedModel m = load(model, diags);
  INFO(diags.to_text());
  CHECK(m.graph == nullptr);
  REQUIRE(diags.error_count() == 1);
  const Diagnostic &d = diags.diagnostics().front();
  CHECK(d.code == code);
  CHECK(d.pointer == pointer);
  CHECK_THAT(d.message, Catch::Matchers::Contains(fragment));
}

const char *kMlp = R"({
  "maxc": 1, "name": "tiny",
  "inputs": [{"name": "x", "dtype": "f32", "shape": ["batch", 4]}],
  "outputs": ["y"],
  "modules": {
    "Linear": {"args": ["x"], "options": {"in": 4, "out": 3},
               "params": {"weight": ["$out", "$in"], "bias": {"shape": ["$out"], "init": "zeros"}},
               "body": [{"y": ["linear", "x", "@weight", "@bias"]}], "return": "y"}
  },
  "main": [
    {"h": ["call", "Linear", "x", {"instance": "fc1"}]},
    {"a": ["relu", "h"]},
    {"y": ["call", "Linear", "a", {"instance": "fc2", "in": 3, "out": 2}]}
  ]
})";

} // namespace

TEST_CASE("a model traces to the graph the API builds by hand", "[frontend]") {
  DiagnosticEngine diags;
  LoadedModel m = load(kMlp, diags);
  INFO(diags.to_text());
  REQUIRE(m.graph);
  CHECK(m.params.size() == 4);
  CHECK(m.params[0].name == "fc1.weight");
  CHECK(m.params[0].shape == std::vector<int64_t>{3, 4});

  Graph by_hand("tiny", {TensorType(DType::f32, {Dim("batch"), 4})});
  by_hand.set_value_name(0, "x");
  {
    GraphRealizationContext ctx(by_hand);
    Tensor x = Tensor::from_graph_value(by_hand.inputs()[0]);
    Tensor w1 = ctx.add_source(Tensor::from_host(HostTensor(DType::f32, {3, 4})), "fc1.weight");
    Tensor b1 = ctx.add_source(Tensor::from_host(HostTensor(DType::f32, {3})), "fc1.bias");
    // Node names: each statement's first result, qualified by the instance.
    std::optional<NodeNameScope> named(std::in_place, ctx, "fc1.y");
    Tensor h = ops::linear(x, w1, b1);
    named.emplace(ctx, "a");
    h = ops::relu(h);
    named.reset();
    Tensor w2 = ctx.add_source(Tensor::from_host(HostTensor(DType::f32, {2, 3})), "fc2.weight");
    Tensor b2 = ctx.add_source(Tensor::from_host(HostTensor(DType::f32, {2})), "fc2.bias");
    named.emplace(ctx, "fc2.y");
    by_hand.set_outputs({ops::linear(h, w2, b2).value().id()}, {"y"});
  }
  CHECK(print_graph(*m.graph) == print_graph(by_hand));
}

TEST_CASE("maxc run semantics: the MLP matches an independent computation", "[frontend]") {
  TempDir dir;
  std::map<std::string, HostTensor> weights = {{"fc1.weight", random_tensor(DType::f32, {3, 4})},
                                               {"fc1.bias", random_tensor(DType::f32, {3})},
                                               {"fc2.weight", random_tensor(DType::f32, {2, 3})},
                                               {"fc2.bias", random_tensor(DType::f32, {2})}};
  write_safetensors(dir.path + "/w.safetensors", weights);
  std::string model = kMlp;
  model.insert(model.find("\"inputs\""), "\"weights\": \"w.safetensors\", ");
  std::string path = dir.write("tiny.json", model);
  DiagnosticEngine diags;
  LoadedModel m = load_model(path, LoadOptions{}, diags);
  INFO(diags.to_text());
  REQUIRE(m.graph);
  CHECK(m.files_read.size() == 2);
  HostTensor x = random_tensor(DType::f32, {5, 4});
  HostTensor y = Interpreter::run(*m.graph, {x})[0];
  REQUIRE(y.shape() == std::vector<int64_t>{5, 2});
  for (int64_t b = 0; b < 5; ++b) {
    double h[3];
    for (int j = 0; j < 3; ++j) {
      double acc = weights["fc1.bias"].get_f64(j);
      for (int k = 0; k < 4; ++k)
        acc += double(x.get_f64(b * 4 + k)) * weights["fc1.weight"].get_f64(j * 4 + k);
      h[j] = std::max(0.0, double(float(acc)));
    }
    for (int j = 0; j < 2; ++j) {
      double acc = weights["fc2.bias"].get_f64(j);
      for (int k = 0; k < 3; ++k)
        acc += h[k] * weights["fc2.weight"].get_f64(j * 3 + k);
      CHECK(y.get_f64(b * 2 + j) == Approx(acc).epsilon(1e-6));
    }
  }
}

TEST_CASE("weights problems: missing, mis-shaped, unused", "[frontend]") {
  TempDir dir;
  std::map<std::string, HostTensor> weights = {{"fc1.weight", random_tensor(DType::f32, {3, 4})},
                                               {"fc1.bias", random_tensor(DType::f32, {4})}, // declared [3]
                                               {"fc2.weight", random_tensor(DType::f32, {2, 3})},
                                               {"extra", random_tensor(DType::f32, {1})}};
  write_safetensors(dir.path + "/w.safetensors", weights);
  std::string model = kMlp;
  model.insert(model.find("\"inputs\""), "\"weights\": \"w.safetensors\", ");
  std::string path = dir.write("tiny.json", model);
  DiagnosticEngine diags;
  LoadedModel m = load_model(path, LoadOptions{}, diags);
  INFO(diags.to_text());
  CHECK(m.graph == nullptr);
  REQUIRE(diags.error_count() == 2);
  CHECK(diags.diagnostics()[0].code == ErrorCode::WeightMismatch);
  CHECK(diags.diagnostics()[0].pointer == "/modules/Linear/params/bias");
  CHECK_THAT(diags.diagnostics()[0].message, Catch::Matchers::Contains("'fc1.bias'") &&
                                                 Catch::Matchers::Contains("is f32[4], module Linear declares f32[3]"));
  CHECK(diags.diagnostics()[1].code == ErrorCode::MissingWeight);
  CHECK(diags.diagnostics()[1].pointer == "/modules/Linear/body/0/y/3");
  CHECK_THAT(diags.diagnostics()[1].message, Catch::Matchers::Contains("'fc2.bias' is not in"));

  // The unused weight is a warning once the rest is right.
  weights["fc1.bias"] = random_tensor(DType::f32, {3});
  weights["fc2.bias"] = random_tensor(DType::f32, {2});
  write_safetensors(dir.path + "/w.safetensors", weights);
  DiagnosticEngine ok;
  LoadedModel m2 = load_model(path, LoadOptions{}, ok);
  CHECK(m2.graph);
  REQUIRE(ok.warning_count() == 1);
  CHECK(ok.diagnostics()[0].code == ErrorCode::UnusedWeight);
  CHECK_THAT(ok.diagnostics()[0].message, Catch::Matchers::Contains("'extra' is never read"));

  // No weights file at all.
  DiagnosticEngine none;
  load(kMlp, none, /*synthesize=*/false);
  REQUIRE(none.error_count() == 1);
  CHECK(none.diagnostics()[0].code == ErrorCode::MissingWeight);
  CHECK_THAT(none.diagnostics()[0].message, Catch::Matchers::Contains("no weights file was given"));
}

TEST_CASE("each diagnostic code names the JSON pointer", "[frontend][diagnostics]") {
  const std::string head = R"("maxc": 1, "name": "m", "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}], "outputs": ["y"], )";
  auto model = [&](const std::string &rest) { return "{" + head + rest + "}"; };

  DiagnosticEngine syntax;
  load("{\"maxc\": 1,\n \"name\": }", syntax);
  REQUIRE(syntax.error_count() == 1);
  CHECK(syntax.diagnostics()[0].code == ErrorCode::ModelSyntax);
  CHECK_THAT(syntax.diagnostics()[0].message, Catch::Matchers::Contains("line 2"));

  require_single(model(R"("main": [{"y": ["exp", "x"]}], "wieghts": "w")"), ErrorCode::ModelSchema, "/wieghts",
                 "unknown field 'wieghts'");
  require_single(R"({"maxc": 2, "name": "m", "inputs": [], "outputs": ["x"], "main": [{"x": ["iota", {"shape": [2]}]}]})", ErrorCode::ModelSchema,
                 "/maxc", "unsupported format version 2");
  require_single(model(R"("main": [{"y": ["expp", "x"]}])"), ErrorCode::UnknownOp, "/main/0/y/0",
                 "did you mean 'exp'");
  require_single(model(R"("main": [{"y": ["exp", "z"]}])"), ErrorCode::UndefinedName, "/main/0/y/1",
                 "'z' is not defined");
  require_single(model(R"("main": [{"y": ["softmax", "x", {"axes": 1}]}])"), ErrorCode::UnknownAttribute,
                 "/main/0/y/2/axes", "unknown attribute 'axes'");
  require_single(model(R"("main": [{"y": ["add", "x", "@w"]}], "modules": {})"), ErrorCode::ModelSchema, "/main/0/y/2",
                 "has no declaration");
  require_single(model(R"("main": [{"y": ["call", "Nope", "x"]}])"), ErrorCode::UndefinedName, "/main/0/y/1",
                 "no module named 'Nope'");
  require_single(model(R"("main": [{"y": ["add", "x", "#c"]}])"), ErrorCode::UndefinedName, "/main/0/y/2",
                 "no constant named 'c'");
  require_single(model(R"("main": [{"y": ["matmul", "x", "x"]}])"), ErrorCode::ShapeMismatch, "/main/0/y", "matmul");
  require_single(model(R"("main": [{"i": ["cast", "x", {"dtype": "i32"}]}, {"y": ["add", "x", "i"]}])"),
                 ErrorCode::DTypeMismatch, "/main/1/y", "insert a cast");
  require_single(model(R"("main": [{"y": ["call", "M", "x", {"size": 3}]}],
      "modules": {"M": {"args": ["a"], "body": [], "return": "a"}})"),
                 ErrorCode::UnknownOption, "/main/0/y/3/size", "module M has no option 'size'");
  require_single(model(R"("main": [{"y": ["call", "A", "x"]}],
      "modules": {"A": {"args": ["a"], "body": [{"b": ["call", "B", "a"]}], "return": "b"},
                  "B": {"args": ["a"], "body": [{"b": ["call", "A", "a"]}], "return": "b"}})"),
                 ErrorCode::ModuleCycle, "/modules/B/body/0", "A → B → A");
  require_single(model(R"("main": [{"y": ["reshape", "x", {"shape": ["$n"]}]}])"), ErrorCode::UnknownOption,
                 "/main/0/y/2/shape", "'$n' names no option");
}

TEST_CASE("check reports every independent problem in one run", "[frontend][diagnostics]") {
  DiagnosticEngine diags;
  load(R"({
    "maxc": 1, "name": "m", "colour": 1,
    "inputs": [{"name": "x", "dtype": "f33", "shape": [2]}, {"name": "z", "dtype": "f32", "shape": [2, 2]}],
    "outputs": ["y", "q"],
    "main": [{"y": ["exp", "z"]}, {"w": ["relu", "nope"]}, {"v": ["sofmax", "z"]}]
  })", diags);
  INFO(diags.to_text());
  std::vector<std::string> pointers;
  for (const Diagnostic &d : diags.diagnostics())
    pointers.push_back(d.pointer);
  CHECK(pointers == std::vector<std::string>{"/colour", "/inputs/0/dtype", "/main/2/v/0", "/main/1/w/1", "/outputs/1"});

  // Tracing problems too: both independent shape errors are reported, and a
  // statement using a failed result is skipped silently.
  DiagnosticEngine trace;
  load(R"({"maxc": 1, "name": "m", "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 3]}], "outputs": ["c"],
    "main": [{"a": ["matmul", "x", "x"]}, {"b": ["exp", "a"]}, {"c": ["reshape", "x", {"shape": [5]}]}]})", trace);
  INFO(trace.to_text());
  REQUIRE(trace.error_count() == 2);
  CHECK(trace.diagnostics()[0].pointer == "/main/0/a");
  CHECK(trace.diagnostics()[1].pointer == "/main/2/c");
}

TEST_CASE("repeated subgraph modules dedup to one definition", "[frontend][subgraph]") {
  auto model = [](const std::string &subgraph, int times) {
    return R"({"maxc": 1, "name": "deep", "inputs": [{"name": "x", "dtype": "f32", "shape": ["batch", 8]}],
      "outputs": ["y"],
      "modules": {
        "Mlp": {"args": ["x"], "params": {"fc.weight": [8, 8]}, "body": [{"y": ["linear", "x", "@fc.weight"]}], "return": "y"},
        "Block": {"subgraph": )" + subgraph + R"(, "args": ["x"], "params": {"ln.weight": {"shape": [8], "init": "ones"}},
          "body": [{"h": ["rms_norm", "x", "@ln.weight"]}, {"m": ["call", "Mlp", "h", {"instance": "mlp"}]},
                   {"y": ["add", "x", "m"]}], "return": "y"}},
      "main": [{"y": ["repeat", "Block", "x", {"times": )" + std::to_string(times) + R"(, "prefix": "h.{i}"}]}]})";
  };
  DiagnosticEngine diags;
  LoadedModel m = load(model("true", 12), diags);
  INFO(diags.to_text());
  REQUIRE(m.graph);
  CHECK(m.stats.subgraph_definitions == 1);
  CHECK(m.stats.subgraph_calls == 12);
  CHECK(m.stats.subgraph_traces == 12);
  CHECK(m.graph->has_constant("h.11.mlp.fc.weight"));
  CHECK(m.graph->has_constant("h.0.ln.weight"));
  const Graph &body = *m.graph->subgraphs().begin()->second;
  CHECK(body.name() == "Block");
  CHECK(body.value_info(body.input_ids()[1]).name == "ln.weight");
  CHECK(body.value_info(body.input_ids()[2]).name == "mlp.fc.weight");

  DiagnosticEngine keyed_diags;
  LoadedModel keyed = load(model("\"block\"", 12), keyed_diags);
  REQUIRE(keyed.graph);
  CHECK(keyed.stats.subgraph_definitions == 1);
  CHECK(keyed.stats.subgraph_traces == 1);

  DiagnosticEngine flat_diags;
  LoadedModel flat = load(model("false", 3), flat_diags);
  REQUIRE(flat.graph);
  CHECK(flat.stats.subgraph_definitions == 0);

  // Same numbers either way.
  HostTensor x = random_tensor(DType::f32, {2, 8});
  DiagnosticEngine d3;
  LoadedModel three = load(model("true", 3), d3);
  MAXC_REQUIRE_CLOSE(Interpreter::run(*three.graph, {x})[0], Interpreter::run(*flat.graph, {x})[0], 0, 0);
}

TEST_CASE("module options bake into bodies and select definitions", "[frontend][subgraph]") {
  DiagnosticEngine diags;
  LoadedModel m = load(R"({"maxc": 1, "name": "m", "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 8]}],
    "outputs": ["y"],
    "modules": {"Act": {"subgraph": true, "args": ["x"], "options": {"mode": "none"},
                        "body": [{"y": ["gelu", "x", {"approximate": "$mode"}]}], "return": "y"}},
    "main": [{"a": ["call", "Act", "x"]}, {"b": ["call", "Act", "a", {"mode": "tanh"}]},
             {"y": ["call", "Act", "b", {"mode": "none"}]}]})", diags);
  INFO(diags.to_text());
  REQUIRE(m.graph);
  CHECK(m.stats.subgraph_definitions == 2);
  CHECK(m.stats.subgraph_calls == 3);
}

TEST_CASE("inline constants and number literals", "[frontend]") {
  DiagnosticEngine diags;
  LoadedModel m = load(R"({"maxc": 1, "name": "m", "inputs": [{"name": "x", "dtype": "f64", "shape": [3]}],
    "outputs": ["y"], "constants": {"k": {"dtype": "f64", "shape": [3], "values": [1, 2.5, -1]}},
    "main": [{"a": ["mul", "x", "#k"]}, {"y": ["add", "a", 0.5]}]})", diags);
  INFO(diags.to_text());
  REQUIRE(m.graph);
  HostTensor y = Interpreter::run(*m.graph, {HostTensor::from_f64(DType::f64, {3}, {2, 2, 2})})[0];
  CHECK(y.to_f64() == std::vector<double>{2.5, 5.5, -1.5});
}

TEST_CASE("graph JSON is accepted as a model", "[frontend]") {
  DiagnosticEngine diags;
  LoadedModel m = load(kMlp, diags);
  REQUIRE(m.graph);
  std::string json = graph_to_json(*m.graph);
  DiagnosticEngine again;
  LoadedModel back = load_model_text(json, "g.json", LoadOptions{}, again);
  INFO(again.to_text());
  REQUIRE(back.graph);
  CHECK(back.graph->equals(*m.graph));
}

TEST_CASE("hostile models hit limits, not the machine", "[frontend]") {
  DiagnosticEngine diags;
  LoadOptions options;
  options.synthesize_weights = true;
  options.max_statements = 1000;
  LoadedModel m = load_model_text(R"({"maxc": 1, "name": "m", "inputs": [{"name": "x", "dtype": "f32", "shape": [2]}],
    "outputs": ["y"],
    "modules": {"A": {"args": ["x"], "body": [{"y": ["exp", "x"]}], "return": "y"},
                "B": {"args": ["x"], "body": [{"y": ["repeat", "A", "x", {"times": 1000, "prefix": "{i}"}]}], "return": "y"}},
    "main": [{"y": ["repeat", "B", "x", {"times": 1000, "prefix": "{i}"}]}]})", "m.json", options, diags);
  CHECK(m.graph == nullptr);
  REQUIRE(diags.error_count() == 1);
  CHECK_THAT(diags.diagnostics()[0].message, Catch::Matchers::Contains("more than 1000 statements"));

  // A huge declared weight costs address space, not memory.
  DiagnosticEngine big;
  LoadedModel huge = load(R"({"maxc": 1, "name": "m", "inputs": [{"name": "x", "dtype": "f32", "shape": [65536]}],
    "outputs": ["y"], "modules": {"M": {"args": ["x"], "params": {"w": [65536, 65536]},
      "body": [{"y": ["matmul", "x", "@w"]}], "return": "y"}},
    "main": [{"a": ["unsqueeze", "x", {"axes": [0]}]}, {"y": ["call", "M", "a"]}]})", big);
  INFO(big.to_text());
  CHECK(huge.graph);
  CHECK(huge.stats.constant_bytes == uint64_t(65536) * 65536 * 4);
}

TEST_CASE("regressions: option names, conflicting declarations, literal dtypes", "[frontend]") {
  const std::string head = R"("maxc": 1, "name": "m", "inputs": [{"name": "x", "dtype": "f32", "shape": [4, 4]},
      {"name": "n", "dtype": "i64", "shape": [4]}], )";
  // An option called "times" is an option for "call" (only repeat reserves it).
  DiagnosticEngine d1;
  LoadedModel m1 = load("{" + head + R"("outputs": ["y"],
    "modules": {"F": {"args": ["a"], "options": {"times": 3},
                      "body": [{"y": ["full", {"value": "$times", "dtype": "f32", "shape": [1]}]}], "return": "y"}},
    "main": [{"y": ["call", "F", "x", {"times": 7}]}]})", d1);
  INFO(d1.to_text());
  REQUIRE(m1.graph);
  CHECK(m1.graph->nodes().back().attrs.get_real("value") == 7.0);

  // One weight read through two declarations that disagree.
  require_single("{" + head + R"("outputs": ["y"],
    "modules": {"L": {"args": ["a"], "options": {"o": 4}, "params": {"w": ["$o", 4]},
                      "body": [{"y": ["linear", "a", "@w"]}], "return": "y"}},
    "main": [{"h": ["call", "L", "x", {"instance": "fc"}]}, {"y": ["call", "L", "h", {"instance": "fc", "o": 3}]}]})",
                 ErrorCode::WeightMismatch, "/modules/L/params/w", "is read as f32[4,4] elsewhere");

  // Literals must fit the dtype; where() takes the dtype of the values, not the mask.
  require_single("{" + head + R"("outputs": ["y"], "main": [{"y": ["add", "n", 0.5]}]})", ErrorCode::DTypeMismatch,
                 "/main/0/y/2", "not representable in i64");
  DiagnosticEngine d2;
  LoadedModel m2 = load("{" + head + R"("outputs": ["y"],
    "main": [{"m": ["gt", "x", 0]}, {"y": ["where", "m", "x", -1e9]}]})", d2);
  INFO(d2.to_text());
  REQUIRE(m2.graph);
  CHECK(m2.graph->type_of(m2.graph->output_ids()[0]).to_string() == "f32[4,4]");
}

TEST_CASE("numbers too large for JSON are syntax errors, not crashes", "[frontend]") {
  DiagnosticEngine diags;
  load("77777E7777", diags);
  REQUIRE(diags.error_count() == 1);
  CHECK(diags.diagnostics()[0].code == ErrorCode::ModelSyntax);
  DiagnosticEngine graph;
  load(R"({"format": "maxc-graph", "version": 1, "name": 1e999})", graph);
  CHECK(graph.error_count() == 1);
}
