// Ops that own bodies, nested: a deduplicated block (a keyed call, traced
// once, called twice with its own weights) holding an `if` whose then-body
// holds an `if` whose then-body holds an `if` (three deep), captures passed
// explicitly from every level, predicates of both dtypes (bool, i32) and one
// computed by a kernel inside a body, and a dim the innermost body defines
// from a value it computes (bind_dim: a symbol whose value is known only at
// run time, its buffers sized by its bound). It traces, plans and runs equal
// on the reference interpreter, the CPU JIT and amdgpu-emu for every path
// through the branches; and the near misses fail with clear errors.
#include "CompiledRunner.h"
#include "EmulatedRunner.h"

#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/Codegen/ModelAbi.h"
#include "maxc/IR/GraphJson.h"
#include "maxc/IR/GraphSymbols.h"

#include <llvm/IR/Instructions.h>

using namespace maxc;
using namespace maxc::test;

namespace {

constexpr int64_t kRows = 4, kCols = 8;

// The innermost body (depth 3): captures u, x, t. Its then-body defines the
// dim n = int(|t|*4 + 1) (at most kCols) from t, and computes with tensors
// of n elements: an iota over [kRows, n] times ones [n, kCols] (a matmul with
// a run-time inner dim) gives every element n(n-1)/2; a stored ramp of n
// elements, its sum and max; n itself as a value (dim_values).
constexpr int64_t kMaxN = kCols;
std::vector<Tensor> innermost_then(const std::vector<Tensor> &c) {
  Dim n = ops::bind_dim(ops::cast(ops::abs(c[2]) * 4.0 + 1.0, DType::i32), "n", kMaxN);
  Tensor w = ops::iota({Dim(kRows), n}, 1, DType::f32);
  Tensor tri = ops::matmul(w, ops::full(1.0, DType::f32, {n, Dim(kCols)}));
  // A stored value of n elements (read twice): its kernel's extent is n,
  // read in the body's own function after the definition.
  Tensor ramp = ops::iota({n}, 0, DType::f32) * 0.5;
  Tensor stats = ops::sum(ramp, {0}) + ops::max(ramp, {0});
  // ...and n back as a value (dim_values): dims as values, values as dims.
  Tensor nv = ops::cast(ops::dim_values({n}, DType::i64, true), DType::f32);
  return {c[0] * c[1] + 1.0 + tri * 0.125 + stats + nv * 0.25};
}
std::vector<Tensor> innermost_else(const std::vector<Tensor> &c) { return {c[0] - c[1]}; }

// Depth 2: captures u, x, t (an f32 scalar); its predicate t > 0 is computed
// here, by a kernel of this body.
std::vector<Tensor> middle_then(const std::vector<Tensor> &c) {
  Tensor pred = ops::greater(c[2], ops::full(0.0, DType::f32));
  return ops::cond(pred, innermost_then, innermost_else, {c[0], c[1], c[2]}, "inner");
}
std::vector<Tensor> middle_else(const std::vector<Tensor> &c) { return {c[0] + c[1] * c[2]}; }

// Depth 1: captures h, x, level (i32), t.
std::vector<Tensor> outer_then(const std::vector<Tensor> &c) {
  Tensor u = ops::tanh(c[0]);
  return ops::cond(c[2], middle_then, middle_else, {u, c[1], c[3]}, "middle");
}
std::vector<Tensor> outer_else(const std::vector<Tensor> &c) { return {ops::relu(c[0]) - c[1]}; }

// The block: args x, flag (bool), level (i32), t (f32); param w.
TensorTree block(GraphRealizationContext &, const std::vector<Tensor> &a, const NamedTensors &p) {
  Tensor h = ops::matmul(a[0], p.at("w"));
  std::vector<Tensor> r = ops::cond(a[1], outer_then, outer_else, {h, a[0], a[2], a[3]}, "outer");
  return TensorTree(r[0] + a[0]);
}

std::vector<TensorType> model_types() {
  return {TensorType(DType::f32, {kRows, kCols}), TensorType(DType::boolean, Shape{}),
          TensorType(DType::i32, Shape{}), TensorType(DType::f32, Shape{})};
}

// Root: the block twice (one key: one trace), each call its own weights.
std::unique_ptr<Graph> nested_model(const char *key = "block", int *calls_traced = nullptr) {
  auto graph = std::make_unique<Graph>("nested", model_types());
  {
    GraphRealizationContext ctx(*graph);
    std::vector<Tensor> in;
    for (const Value &v : graph->inputs())
      in.push_back(Tensor::from_graph_value(v));
    Tensor x = in[0];
    for (int i = 0; i < 2; ++i) {
      CallOptions options;
      if (key)
        options.key = key;
      options.instance = "blocks." + std::to_string(i);
      options.name = "block";
      NamedTensors params{{"w", Tensor::from_host(random_tensor(DType::f32, {kCols, kCols}, -0.5, 0.5))}};
      x = ctx.call(options, block, {x, in[1], in[2], in[3]}, params).tensor();
    }
    graph->output({x.value()});
    if (calls_traced)
      *calls_traced = static_cast<int>(ctx.subgraph_cache()->traces);
  }
  graph->verify();
  return graph;
}

std::vector<HostTensor> model_inputs(bool flag, int32_t level, float t) {
  return {random_tensor(DType::f32, {kRows, kCols}), HostTensor::scalar(DType::boolean, flag),
          HostTensor::scalar(DType::i32, level), HostTensor::scalar(DType::f32, t)};
}

size_t count_op(const Graph &g, const std::string &op) {
  size_t n = 0;
  for (const Node &node : g.nodes())
    n += node.op == op;
  return n;
}

} // namespace

TEST_CASE("if nested three deep in a deduplicated block traces and plans", "[bodies][if][subgraph][dedup]") {
  int traced = 0;
  std::unique_ptr<Graph> g = nested_model("block", &traced);
  CHECK(traced == 1); // the keyed block is traced once
  CHECK(count_op(*g, "call") == 2);
  // The block and two bodies per `if`, all in the root's table.
  std::vector<std::string> names;
  for (const auto &[name, sub] : g->subgraphs())
    names.push_back(name);
  CHECK(names == std::vector<std::string>{"block", "inner.else", "inner.then", "middle.else", "middle.then",
                                          "outer.else", "outer.then"});
  const Graph &blk = *g->find_subgraph("block");
  REQUIRE(count_op(blk, "if") == 1);
  CHECK(count_op(*g->find_subgraph("outer.then"), "if") == 1);
  CHECK(count_op(*g->find_subgraph("middle.then"), "if") == 1);
  CHECK(count_op(*g->find_subgraph("inner.then"), "if") == 0);
  // The innermost then-body defines n: the root's table knows it (a node
  // result, bounded); it is no parameter of the artifact, but has a slot in
  // its functions' dims array; the buffers naming it are sized by its bound.
  REQUIRE(count_op(*g->find_subgraph("inner.then"), "bind_dim") == 1);
  const SymbolInfo *n = g->symbol_table().find("n");
  REQUIRE(n != nullptr);
  CHECK(n->origin == SymbolOrigin::NodeResult);
  CHECK(n->upper_bound == kMaxN);
  CHECK(dim_symbols(*g) == std::vector<std::string>{"n"});
  ModelInterface abi = describe_interface(*g, "nested");
  CHECK(abi.symbols.empty());
  CHECK(abi.defined_symbols == std::vector<std::string>{"n"});
  LoweringPlan inner = plan_lowering(*g->find_subgraph("inner.then"));
  for (const WorkspaceSlot &slot : inner.slots)
    CHECK(slot.bytes.is_static());
  // Every body sees the root's table; each is its own function in the plan.
  for (const auto &[name, sub] : g->subgraphs())
    CHECK(sub->root() == g.get());
  LoweringPlans plans = plan_lowering_all(*g);
  CHECK(plans.size() == 8);
  for (const auto &[name, sub] : g->subgraphs()) {
    INFO(name);
    const LoweringPlan &plan = plans.at(sub.get());
    for (size_t n : plan.kernels)
      if (is_branch(sub->nodes()[n])) // the predicate and captures are stored: the bodies read buffers
        for (ValueId v : sub->nodes()[n].operands)
          CHECK(plan.values[v].storage != Storage::fused);
  }
  // The workspace bound covers the largest body.
  CHECK(!workspace_bound(*g, &plans).to_string().empty());
  // The subgraph order a pass rebuilds in puts a node's bodies first.
  std::vector<const Graph *> order = subgraphs_bodies_first(*g);
  auto at = [&](const std::string &name) {
    return std::find(order.begin(), order.end(), g->find_subgraph(name)) - order.begin();
  };
  CHECK(at("inner.then") < at("middle.then"));
  CHECK(at("middle.then") < at("outer.then"));
  CHECK(at("outer.then") < at("block"));
  // The model format keeps every body and the nesting.
  std::unique_ptr<Graph> back = graph_from_json(graph_to_json(*g));
  CHECK(back->equals(*g));
}

TEST_CASE("identical blocks holding ifs deduplicate by structure", "[bodies][if][subgraph][dedup]") {
  int traced = 0;
  std::unique_ptr<Graph> g = nested_model(nullptr, &traced);
  CHECK(traced == 2);                        // no key: each call traces its block...
  CHECK(g->subgraphs().size() == 7);         // ...and the second shares every body of the first
  CHECK(count_op(*g->find_subgraph("block"), "if") == 1);
  for (const Node &n : g->nodes())
    if (n.op == "call")
      CHECK(n.attrs.get_string("callee") == "block");
}

TEST_CASE("if nested three deep runs equal on reference, cpu and amdgpu-emu", "[bodies][if][codegen][gpu-emu]") {
  std::unique_ptr<Graph> g = nested_model();
  JitCompiledGraph cpu(*g);
  EmulatedGraph emu(*g, "gfx942");
  // Every path: outer else; outer then + middle else; ... + inner else; + inner then.
  struct Path {
    bool flag;
    int32_t level;
    float t;
  };
  // The last three define n = 4, 7 and 8 (its bound) in the innermost body.
  for (Path p : {Path{false, 1, 1.f}, Path{true, 0, 1.f}, Path{true, 7, -0.5f}, Path{true, -2, 0.75f},
                 Path{true, 3, 1.5f}, Path{true, 1, 1.75f}}) {
    INFO("flag " << p.flag << " level " << p.level << " t " << p.t);
    std::vector<HostTensor> in = model_inputs(p.flag, p.level, p.t);
    std::vector<HostTensor> expected = Interpreter::run(*g, in);
    MAXC_REQUIRE_CLOSE(cpu.run(in, false)[0], expected[0], 1e-5, 1e-5);
    MAXC_REQUIRE_CLOSE(emu.run(in)[0], expected[0], 1e-5, 1e-5);
  }
  // The CPU branches: the block's function calls each outer body once, from
  // the two arms of one conditional branch.
  llvm::LLVMContext context;
  auto module = build_model_module(*g, "m", context);
  const llvm::Function *blk = module->getFunction("m.graph.sub.block");
  REQUIRE(blk != nullptr);
  std::map<std::string, std::string> callers; // body function -> the block calling it
  for (const llvm::BasicBlock &bb : *blk)
    for (const llvm::Instruction &inst : bb)
      if (const auto *call = llvm::dyn_cast<llvm::CallInst>(&inst))
        if (const llvm::Function *f = call->getCalledFunction(); f && f->getName().starts_with("m.graph.sub.outer"))
          callers[f->getName().str()] = bb.getName().str();
  CHECK(callers == std::map<std::string, std::string>{{"m.graph.sub.outer.else", "if.else"},
                                                      {"m.graph.sub.outer.then", "if.then"}});
  // The paths differ: a test that took one body everywhere would fail.
  std::vector<HostTensor> in = model_inputs(true, 1, 1.f);
  HostTensor taken = Interpreter::run(*g, in)[0];
  in[1].set_f64(0, 0);
  CHECK(!compare(Interpreter::run(*g, in)[0], taken, 1e-5, 1e-5).empty());
  // ...and n's value matters: n = 4 and n = 5 differ.
  // (HostTensor copies share their bytes: a new scalar, not set_f64 on a copy.)
  std::vector<HostTensor> n4 = model_inputs(true, 1, 0.75f), n5 = n4;
  n5[3] = HostTensor::scalar(DType::f32, 1.0);
  CHECK(!compare(Interpreter::run(*g, n5)[0], Interpreter::run(*g, n4)[0], 1e-5, 1e-5).empty());
  // A value past the bound: the reference rejects it; compiled code clamps
  // it to the bound (the buffers are sized by it, so nothing is written
  // past them) and the run returns INVALID_DIM, from a body three deep as
  // from the root (the CPU: the flag slot after the symbols, in the one dims
  // array every body's function gets; the GPU host code: the body's status).
  std::vector<HostTensor> over = model_inputs(true, 1, 3.f); // int(3*4+1) = 13 > 8
  MAXC_REQUIRE_ERROR(Interpreter::run(*g, over), ErrorCode::InvalidArgument, "value 13 is outside [0, 8]");
  const auto invalid_dim = static_cast<int32_t>(RunStatus::invalid_dim);
  CHECK(cpu.run_status(over) == invalid_dim);
  CHECK(emu.run_status(over) == invalid_dim);
  CHECK(cpu.run_status(model_inputs(true, 1, 1.75f)) == 0); // int(1.75*4+1) = 8: at the bound
  CHECK(emu.run_status(model_inputs(true, 1, 1.75f)) == 0);
}

TEST_CASE("if at the root compiles through the cpu's and gpu's passes", "[bodies][if][codegen][gpu-emu]") {
  // The bodies hold a matmul and a softmax (decomposed or kept whole per
  // backend: the passes rebuild bodies before the graphs naming them).
  // The weight is a realized tensor: a constant of the root, passed through
  // the buffer table's constant template.
  std::vector<HostTensor> in = {random_tensor(DType::f32, {3, 5}), HostTensor(DType::i64, {})};
  HostTensor weight = random_tensor(DType::f32, {5, 5});
  auto build = [&](const std::vector<Tensor> &x) {
    return ops::cond(
        x[1], [](const std::vector<Tensor> &c) { return std::vector<Tensor>{ops::softmax(ops::matmul(c[0], c[1]), -1)}; },
        [](const std::vector<Tensor> &c) { return std::vector<Tensor>{ops::tanh(c[0]) * 2.0}; },
        {x[0], Tensor::from_host(weight)});
  };
  std::unique_ptr<Graph> g = trace_graph(types_of(in), build);
  g->verify();
  REQUIRE(count_op(*g, "constant") == 1);
  for (int64_t pred : {0, 5}) {
    in[1].set_f64(0, static_cast<double>(pred));
    std::vector<HostTensor> expected = Interpreter::run(*g, in);
    MAXC_REQUIRE_CLOSE(run_compiled(*g, in)[0], expected[0], 1e-5, 1e-6);
    MAXC_REQUIRE_CLOSE(run_gpu_emulated(*g, in)[0], expected[0], 1e-5, 1e-6);
  }
}

TEST_CASE("if near misses fail with clear errors", "[bodies][if]") {
  TensorType vec(DType::f32, {Dim(4)});
  auto id = [](const std::vector<Tensor> &c) { return std::vector<Tensor>{c[0]}; };
  auto trace = [&](const TensorType &pred, const BranchBody &then_body, const BranchBody &else_body) {
    return trace_graph({pred, vec}, [&](const std::vector<Tensor> &x) {
      return ops::cond(x[0], then_body, else_body, {x[1]});
    });
  };
  // Bodies returning different types.
  MAXC_REQUIRE_ERROR(trace(TensorType(DType::boolean, Shape{}), id,
                           [](const std::vector<Tensor> &c) { return std::vector<Tensor>{ops::cast(c[0], DType::f64)}; }),
                     ErrorCode::ShapeMismatch, "result 0 is f32[4] in @if.then but f64[4] in @if.else");
  MAXC_REQUIRE_ERROR(trace(TensorType(DType::boolean, Shape{}), id,
                           [](const std::vector<Tensor> &c) { return std::vector<Tensor>{c[0], c[0]}; }),
                     ErrorCode::ShapeMismatch, "the bodies return 1 and 2 results");
  // A predicate that is not a scalar, or not bool/integer.
  MAXC_REQUIRE_ERROR(trace(TensorType(DType::boolean, {Dim(1)}), id, id), ErrorCode::ShapeMismatch,
                     "the predicate must be a scalar (rank 0), got bool[1]");
  MAXC_REQUIRE_ERROR(trace(TensorType(DType::f32, Shape{}), id, id), ErrorCode::DTypeMismatch,
                     "the predicate must be bool or an integer");
  // An outer tensor used in a body without being passed as a capture.
  MAXC_REQUIRE_ERROR(trace_graph({TensorType(DType::boolean, Shape{}), vec},
                                 [&](const std::vector<Tensor> &x) {
                                   Tensor outer = x[1];
                                   return ops::cond(
                                       x[0], [&](const std::vector<Tensor> &c) { return std::vector<Tensor>{c[0] + outer}; },
                                       id, {x[1]});
                                 }),
                     ErrorCode::ForeignValue, "pass it into a subgraph as an argument");
  // A hand-built node with wrong captures.
  Graph g("g", {TensorType(DType::boolean, Shape{}), vec});
  auto body = std::make_shared<Graph>("b", std::vector<TensorType>{vec});
  body->set_outputs({body->input_ids()[0]});
  g.add_subgraph(body);
  MAXC_REQUIRE_ERROR(g.add_node("if", {g.input_ids()[0]}, {{"then_body", std::string("b")}, {"else_body", std::string("b")}}),
                     ErrorCode::OperandCount, "@b takes 1 captures, got 0");
  MAXC_REQUIRE_ERROR(g.add_node("if", {g.input_ids()[0], g.input_ids()[1]},
                                {{"then_body", std::string("b")}, {"else_body", std::string("nope")}}),
                     ErrorCode::InvalidGraph, "no subgraph named 'nope'");
  CHECK(g.add_node("if", {g.input_ids()[0], g.input_ids()[1]},
                   {{"then_body", std::string("b")}, {"else_body", std::string("b")}})
            .size() == 1);
}
