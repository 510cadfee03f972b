// Per-call dims arrays (issue 29): a deduplicated block traced once with a
// dim of its own (`m`, CallOptions::arg_types) and called at three sizes —
// m := seq, m := 2*seq (a concat of the first call's result) and m := 3 (a
// static operand) — each call with its own weights. The body's sum over m
// and its m-row temporaries make every size matter; the workspace is sized
// at every call's binding. It runs equal on the reference interpreter, the
// CPU JIT (one and two threads) and amdgpu-emu at two values of seq.
#include "CompiledRunner.h"
#include "EmulatedRunner.h"

#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/Codegen/ModelAbi.h"
#include "maxc/IR/GraphJson.h"
#include "maxc/Ops/CallBinding.h"

using namespace maxc;
using namespace maxc::test;

namespace {

constexpr int64_t kCols = 8;

// The block: rows [m, 8] through a matmul and tanh (stored: m rows), their
// sum over m added back to every row (the body's own dim in a reduction).
TensorTree block(GraphRealizationContext &, const std::vector<Tensor> &a, const NamedTensors &p) {
  Tensor h = ops::tanh(ops::matmul(a[0], p.at("w")));
  Tensor total = ops::sum(h, {0}, true);
  return TensorTree(h * 0.5 + total * 0.125 + a[0]);
}

// Root: x [seq, 8] and z [3, 8]; y = block(block(x) ++ block(x) rows), and block(z).
std::unique_ptr<Graph> per_call_model(int *traced = nullptr) {
  auto graph = std::make_unique<Graph>("percall", std::vector<TensorType>{TensorType(DType::f32, {Dim("seq"), kCols}),
                                                                          TensorType(DType::f32, {3, kCols})});
  {
    GraphRealizationContext ctx(*graph);
    std::vector<Tensor> in;
    for (const Value &v : graph->inputs())
      in.push_back(Tensor::from_graph_value(v));
    int instance = 0;
    auto call = [&](const Tensor &x) {
      CallOptions options;
      options.key = "block";
      options.name = "block";
      options.instance = "blocks." + std::to_string(instance++);
      options.arg_types = {TensorType(DType::f32, {Dim("m"), kCols})};
      NamedTensors params{{"w", Tensor::from_host(random_tensor(DType::f32, {kCols, kCols}, -0.5, 0.5))}};
      return ctx.call(options, block, {x}, params).tensor();
    };
    Tensor y1 = call(in[0]);
    Tensor y2 = call(ops::concat({y1, y1 * 2.0}, 0));
    Tensor y3 = call(in[1]);
    graph->output({y2.value(), y3.value()});
    if (traced)
      *traced = static_cast<int>(ctx.subgraph_cache()->traces);
  }
  graph->verify();
  return graph;
}

} // namespace

TEST_CASE("a block with a dim of its own traces once and binds it per call", "[bodies][percall][dedup]") {
  int traced = 0;
  std::unique_ptr<Graph> g = per_call_model(&traced);
  CHECK(traced == 1);
  REQUIRE(g->subgraphs().size() == 1);
  const Graph &blk = *g->find_subgraph("block");
  CHECK(blk.type_of(blk.input_ids()[0]).to_string() == "f32[m,8]");
  std::vector<std::string> results, bindings;
  for (const Node &n : g->nodes())
    if (is_call(n)) {
      results.push_back(g->type_of(n.results[0]).to_string());
      DimBinding b = call_dim_binding(*g, n);
      bindings.push_back(b.count("m") ? b.at("m").to_string() : "-");
    }
  CHECK(results == std::vector<std::string>{"f32[seq,8]", "f32[2*seq,8]", "f32[3,8]"});
  CHECK(bindings == std::vector<std::string>{"seq", "2*seq", "3"});
  // m is no parameter of the artifact: a slot of the dims array, set per call.
  ModelInterface abi = describe_interface(*g, "percall");
  CHECK(abi.symbols == std::vector<std::string>{"seq"});
  CHECK(abi.call_symbols == std::vector<std::string>{"m"});
  CHECK(abi.dims_array() == std::vector<std::string>{"seq", "m"});
  CHECK(call_bound_symbols(*g) == std::vector<std::string>{"m"});
  // The workspace bound is in the caller's dims: m substituted per call.
  for (const std::string &s : workspace_bound(*g).symbols())
    CHECK(s == "seq");
  // The model format keeps the body's own types.
  CHECK(graph_from_json(graph_to_json(*g))->equals(*g));
}

TEST_CASE("a block with a dim of its own runs equal on reference, cpu and amdgpu-emu", "[bodies][percall][codegen][gpu-emu]") {
  std::unique_ptr<Graph> g = per_call_model();
  JitCompiledGraph cpu(*g);
  EmulatedGraph emu(*g, "gfx942");
  for (int64_t seq : {5, 11}) {
    INFO("seq " << seq);
    std::vector<HostTensor> in = {random_tensor(DType::f32, {seq, kCols}), random_tensor(DType::f32, {3, kCols})};
    std::vector<HostTensor> expected = Interpreter::run(*g, in);
    REQUIRE(expected[0].shape() == std::vector<int64_t>{2 * seq, kCols});
    std::vector<HostTensor> one = cpu.run(in, false);
    for (size_t i = 0; i < expected.size(); ++i) {
      MAXC_REQUIRE_CLOSE(one[i], expected[i], 1e-5, 1e-5);
      MAXC_REQUIRE_CLOSE(emu.run(in)[i], expected[i], 1e-5, 1e-5);
    }
    CHECK(bitwise_mismatch(cpu.run(in, true), one).empty()); // the same bits on two threads
  }
  // Each call's m matters: the first and second calls' sums run over seq
  // and 2*seq rows (a body run at one m for every call would differ).
  std::vector<HostTensor> in = {random_tensor(DType::f32, {4, kCols}), random_tensor(DType::f32, {3, kCols})};
  HostTensor y = Interpreter::run(*g, in)[0];
  CHECK(y.shape() == std::vector<int64_t>{8, kCols});
}

TEST_CASE("per-call dims near misses fail with clear errors", "[bodies][percall]") {
  auto trace = [](std::vector<TensorType> arg_types) {
    Graph g("g", {TensorType(DType::f32, {Dim("seq"), kCols})});
    GraphRealizationContext ctx(g);
    CallOptions options;
    options.key = "twice";
    options.name = "twice";
    options.arg_types = std::move(arg_types);
    auto twice = [](GraphRealizationContext &, const std::vector<Tensor> &a, const NamedTensors &) {
      return TensorTree(a[0] * 2.0);
    };
    ctx.call(options, twice, {Tensor::from_graph_value(g.inputs()[0])}, {});
  };
  MAXC_REQUIRE_ERROR(trace({TensorType(DType::f32, {Dim("m"), 4})}), ErrorCode::ShapeMismatch,
                     "call @twice: operand 0 is f32[seq,8], the subgraph expects f32[m,4] (dim 1)");
  MAXC_REQUIRE_ERROR(trace({TensorType(DType::f32, {Dim("m")})}), ErrorCode::ShapeMismatch,
                     "the subgraph expects f32[m]");
  MAXC_REQUIRE_ERROR(trace({TensorType(DType::f32, {Dim("m"), kCols}), TensorType(DType::f32, {1})}),
                     ErrorCode::InvalidArgument, "2 argument types for 1 arguments");
  // The same symbol bound to two dims by one call.
  Graph g("g", {TensorType(DType::f32, {Dim("a"), kCols}), TensorType(DType::f32, {Dim("b"), kCols})});
  auto body = std::make_shared<Graph>("pair", std::vector<TensorType>{TensorType(DType::f32, {Dim("m"), kCols}),
                                                                       TensorType(DType::f32, {Dim("m"), kCols})});
  body->set_outputs({body->input_ids()[0]});
  g.add_subgraph(body);
  MAXC_REQUIRE_ERROR(g.add_node("call", {g.input_ids()[0], g.input_ids()[1]}, {{"callee", std::string("pair")}}),
                     ErrorCode::ShapeMismatch, "('m' is already a)");
}
