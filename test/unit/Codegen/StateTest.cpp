// Model state: a buffer the graph updates in place (buffer_append) and reads
// as views of its first rows (buffer_prefix, the append's result), inside a
// deduplicated block called twice (one state buffer per call), kept between
// runs by the caller (NAME_run) or by the artifact's state object
// (NAME_state_create / NAME_step). Runs equal on the reference interpreter,
// the CPU and the GPU kernels (host emulation), step after step, with two
// interleaved states.
#include "CompiledRunner.h"
#include "EmulatedRunner.h"
#include "StateModel.h"

#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/Codegen/ModelAbi.h"
#include "maxc/Transforms/Rewrite.h"
#include "maxc/Frontend/ModelLoader.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/Instructions.h>

#include <functional>

using namespace maxc;
using namespace maxc::test;

namespace {

constexpr int64_t kWidth = 4;

// The block: appends x * w (its rows) to its cache at row `past`, then
// attends: scores = x @ cache^T over every filled row, softmax, @ cache; and
// the sum of the rows filled before this run (a prefix view).
TensorTree block(GraphRealizationContext &, const std::vector<Tensor> &a, const NamedTensors &p) {
  Tensor rows = ops::matmul(a[0], p.at("w"));
  Tensor cache = ops::buffer_append(a[1], rows, Dim("past"));          // [past + n, W]
  Tensor before = ops::buffer_prefix(a[1], Dim("past"));               // [past, W]
  Tensor att = ops::matmul(ops::softmax(ops::matmul(a[0], ops::transpose(cache, {1, 0})), -1), cache);
  Tensor old = ops::sum(before, {0}, true);                            // [1, W]
  return TensorTree(att + old + a[0]);
}

// Inputs: x [n, W], cache0 and cache1 [cap, W] (state); output [n, W]; all
// of `dtype` (f16: the CPU's precision policy keeps the buffers 16-bit).
std::unique_ptr<Graph> state_model(DType dtype = DType::f32) {
  auto graph = std::make_unique<Graph>("cached");
  graph->add_input(TensorType(dtype, {Dim("n"), Dim(kWidth)}), "x");
  graph->add_input(TensorType(dtype, {Dim("cap"), Dim(kWidth)}), "cache0");
  graph->add_input(TensorType(dtype, {Dim("cap"), Dim(kWidth)}), "cache1");
  graph->symbol_table().declare("past", SymbolOrigin::DimArgument);
  graph->symbol_table().set_model_state({{"cache0", "cache1"}, "past", "cap", Dim("n")});
  {
    GraphRealizationContext ctx(*graph);
    std::vector<Tensor> in;
    for (const Value &v : graph->inputs())
      in.push_back(Tensor::from_graph_value(v));
    Tensor x = in[0];
    for (int i = 0; i < 2; ++i) {
      CallOptions options;
      options.key = "block";
      options.instance = "blocks." + std::to_string(i);
      options.name = "block";
      NamedTensors params{{"w", Tensor::from_host(random_tensor(dtype, {kWidth, kWidth}, -0.5, 0.5))}};
      x = ctx.call(options, block, {x, in[1 + i]}, params).tensor();
    }
    graph->output({x.value()});
  }
  graph->verify();
  return graph;
}

using Runner = std::function<std::vector<HostTensor>(const std::vector<HostTensor> &, const DimBindings &)>;

/// Runs `g` for each count of new rows in `steps` (a prefill, then steps)
/// through `run`, on its own caller-owned buffers of `cap` rows, and on the
/// reference's; the outputs and the buffers must match after every run
/// (each updated in place). Checks the rows past the filled ones were never
/// written; returns the rows filled and the reference's buffers.
struct Filled {
  int64_t past;
  HostTensor ref0, ref1;
};
Filled run_steps_against_reference(const Graph &g, int64_t cap, std::initializer_list<int64_t> steps, const Runner &run,
                                   double tol = 1e-5) {
  DType dt = g.type_of(g.input_ids()[0]).dtype;
  HostTensor ref0(dt, {cap, kWidth}), ref1(dt, {cap, kWidth});
  HostTensor mine0(dt, {cap, kWidth}), mine1(dt, {cap, kWidth});
  int64_t past = 0;
  for (int64_t n : steps) {
    INFO("past " << past << " n " << n);
    HostTensor x = random_tensor(dt, {n, kWidth});
    std::vector<HostTensor> expected = Interpreter::run(g, {x, ref0, ref1}, {{"past", past}});
    std::vector<HostTensor> actual = run({x, mine0, mine1}, {{"past", past}});
    MAXC_REQUIRE_CLOSE(actual[0], expected[0], tol, tol);
    past += n;
    MAXC_REQUIRE_CLOSE(mine0, ref0, tol, tol / 10);
    MAXC_REQUIRE_CLOSE(mine1, ref1, tol, tol / 10);
  }
  for (int64_t e = past * kWidth; e < cap * kWidth; ++e)
    REQUIRE(mine0.get_f64(e) == 0.0);
  return {past, ref0, ref1};
}

} // namespace

TEST_CASE("state buffers: appended in place, read as views, planned without copies", "[state]") {
  std::unique_ptr<Graph> g = state_model();
  const Graph &blk = *g->find_subgraph("block");
  LoweringPlan plan = plan_lowering(blk);
  for (const Node &n : blk.nodes())
    if (n.op == "buffer_append" || n.op == "buffer_prefix") {
      INFO(n.op);
      // The views live in the buffer (input 1 of the block): no slot, no copy.
      CHECK(plan.values[n.results[0]].storage == Storage::input);
      CHECK(plan.values[n.results[0]].index == 1);
    }
  // The write is an effect: kept by dead-code removal even when unread.
  std::unique_ptr<Graph> unread = trace_graph({TensorType(DType::f32, {2, kWidth}), TensorType(DType::f32, {8, kWidth})},
                                              [](const std::vector<Tensor> &x) {
                                                (void)ops::buffer_append(x[1], x[0] * 2.0, Dim(3));
                                                return std::vector<Tensor>{x[0] + 1.0};
                                              });
  std::unique_ptr<Graph> pruned = without_dead_nodes(*unread);
  const Graph &kept = pruned ? *pruned : *unread;
  CHECK(std::count_if(kept.nodes().begin(), kept.nodes().end(),
                      [](const Node &n) { return n.op == "buffer_append"; }) == 1);
  // The interface: state buffers are written (non-const), the state API exists.
  ModelInterface abi = describe_interface(*g, "cached");
  REQUIRE(abi.state);
  CHECK(abi.inputs[1].state);
  CHECK(!abi.inputs[0].state);
  CHECK(abi.state_row_bytes == std::vector<int64_t>{16, 16});
  CHECK(abi.symbols == std::vector<std::string>{"cap", "n", "past"});
  // A buffer that is a computed value: refused by the interpreter and the planner.
  std::unique_ptr<Graph> computed = trace_graph({TensorType(DType::f32, {2, kWidth}), TensorType(DType::f32, {8, kWidth})},
                                                [](const std::vector<Tensor> &x) {
                                                  return std::vector<Tensor>{ops::buffer_append(x[1] * 1.0, x[0], Dim(3))};
                                                });
  MAXC_REQUIRE_ERROR(Interpreter::run(*computed, {random_tensor(DType::f32, {2, kWidth}), HostTensor(DType::f32, {8, kWidth})}),
                     ErrorCode::InvalidGraph, "must be a state buffer");
  MAXC_REQUIRE_ERROR(plan_lowering(*computed), ErrorCode::InvalidGraph, "must be a state buffer");
  MAXC_REQUIRE_ERROR(plan_lowering_all(*computed, gpu_plan_options()), ErrorCode::InvalidGraph, "must be a state buffer");
  // Near misses: the op checks its operands.
  MAXC_REQUIRE_ERROR(trace_graph({TensorType(DType::f32, {2, 3}), TensorType(DType::f32, {8, kWidth})},
                                 [](const std::vector<Tensor> &x) {
                                   return std::vector<Tensor>{ops::buffer_append(x[1], x[0], Dim(0))};
                                 }),
                     ErrorCode::ShapeMismatch, "must match the buffer");
}

TEST_CASE("state buffers run equal on reference and cpu, step after step", "[state][codegen]") {
  std::unique_ptr<Graph> g = state_model();
  JitCompiledGraph cpu(*g);
  constexpr int64_t kCap = 16;
  // Caller-owned buffers through NAME_run: the reference's and the CPU's
  // own copies, each updated in place by its runs.
  Filled f = run_steps_against_reference(*g, kCap, {5, 1, 1, 3, 1},
                                         [&](const auto &in, const auto &dims) { return cpu.run_dims(in, dims); });
  // Earlier rows matter: the same x after other steps gives another result.
  HostTensor x = random_tensor(DType::f32, {1, kWidth});
  HostTensor fresh0(DType::f32, {kCap, kWidth}), fresh1(DType::f32, {kCap, kWidth});
  CHECK(!compare(Interpreter::run(*g, {x, f.ref0, f.ref1}, {{"past", f.past}})[0],
                 Interpreter::run(*g, {x, fresh0, fresh1}, {{"past", 0}})[0], 1e-5, 1e-5)
             .empty());
}

TEST_CASE("f16 state buffers stay 16-bit under the CPU's precision policy, updated in place", "[state][codegen][f16]") {
  // The policy computes in f32 but must not widen a state buffer: a widened
  // copy would take the appended rows and the state would never fill (an
  // f16 decoder with --state auto generated noise after its prompt).
  std::unique_ptr<Graph> g = state_model(DType::f16);
  JitCompiledGraph cpu(*g);
  constexpr int64_t kCap = 16;
  // f16 values, the reference rounding after every op, maxc after each kernel.
  Filled f = run_steps_against_reference(
      *g, kCap, {5, 1, 1, 3, 1}, [&](const auto &in, const auto &dims) { return cpu.run_dims(in, dims); }, 2e-2);
  CHECK(f.past == 11);
  HostTensor x = random_tensor(DType::f16, {1, kWidth});
  HostTensor fresh0(DType::f16, {kCap, kWidth}), fresh1(DType::f16, {kCap, kWidth});
  CHECK(!compare(Interpreter::run(*g, {x, f.ref0, f.ref1}, {{"past", f.past}})[0],
                 Interpreter::run(*g, {x, fresh0, fresh1}, {{"past", 0}})[0], 1e-2, 1e-2)
             .empty());
}

TEST_CASE("state buffers run equal on reference and amdgpu-emu, step after step", "[state][codegen][gpu]") {
  std::unique_ptr<Graph> g = state_model();
  // The GPU plan: the views live in their buffer, the write is a kernel.
  driver::PlannedModel planned = driver::plan_model(*g, "maxc_jit", gpu_decompose_options(), gpu_plan_options());
  const Graph &blk = *planned.lowered->find_subgraph("block");
  const LoweringPlan &plan = planned.plans.at(&blk);
  int views = 0;
  for (const Node &n : blk.nodes())
    if (n.op == "buffer_append" || n.op == "buffer_prefix") {
      ++views;
      CHECK(plan.values[n.results[0]].storage == Storage::input);
      CHECK(plan.values[n.results[0]].index == 1);
    }
  CHECK(views == 2);
  EmulatedGraph emu(*g, codegen::kGpuEmulationArch);
  constexpr int64_t kCap = 8;
  // The second run appends after the first.
  run_steps_against_reference(*g, kCap, {3, 2}, [&](const auto &in, const auto &dims) { return emu.run(in, dims); });
  // A graph output that is a view of a buffer is copied out of it.
  Graph view("view");
  view.add_input(TensorType(DType::f32, {Dim("n"), Dim(kWidth)}), "x");
  view.add_input(TensorType(DType::f32, {Dim("cap"), Dim(kWidth)}), "buf");
  view.symbol_table().declare("past", SymbolOrigin::DimArgument);
  view.symbol_table().set_model_state({{"buf"}, "past", "cap", Dim("n")});
  {
    GraphRealizationContext ctx(view);
    Tensor x = Tensor::from_graph_value(view.inputs()[0]), buf = Tensor::from_graph_value(view.inputs()[1]);
    view.output({ops::buffer_append(buf, x * 2.0, Dim("past")).value()});
  }
  view.verify();
  HostTensor x = random_tensor(DType::f32, {2, kWidth});
  HostTensor rbuf = random_tensor(DType::f32, {kCap, kWidth}), gbuf = rbuf.clone();
  std::vector<HostTensor> expected = Interpreter::run(view, {x, rbuf}, {{"past", 3}});
  EmulatedGraph copied(view, codegen::kGpuEmulationArch);
  MAXC_REQUIRE_CLOSE(copied.run({x, gbuf}, {{"past", 3}})[0], expected[0], 0, 0);
  MAXC_REQUIRE_CLOSE(gbuf, rbuf, 0, 0);
}

namespace {
/// Drives a compiled model's state API (`lookup`: its functions by suffix)
/// on two interleaved states, a full one and a reset, each step against
/// the reference on its own buffers; destroys them.
void drive_state_api(const Graph &g, const std::function<void *(const std::string &)> &lookup) {
  using Create = void *(*)(int64_t);
  using Free = void (*)(void *);
  using Length = int64_t (*)(const void *);
  using Step = int32_t (*)(void *, const float *, float *, int64_t);
  auto create = reinterpret_cast<Create>(lookup("_state_create"));
  auto destroy = reinterpret_cast<Free>(lookup("_state_destroy"));
  auto reset = reinterpret_cast<Free>(lookup("_state_reset"));
  auto length = reinterpret_cast<Length>(lookup("_state_length"));
  auto capacity = reinterpret_cast<Length>(lookup("_state_capacity"));
  auto step = reinterpret_cast<Step>(lookup("_step")); // (state, x, out, n)
  CHECK(create(0) == nullptr);
  CHECK(create(-3) == nullptr);
  CHECK(length(nullptr) == -1);
  constexpr int64_t kCap = 12;
  void *a = create(kCap), *b = create(kCap);
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  CHECK(capacity(a) == kCap);
  // The reference keeps its own buffers per conversation.
  HostTensor ra0(DType::f32, {kCap, kWidth}), ra1(DType::f32, {kCap, kWidth});
  HostTensor rb0(DType::f32, {kCap, kWidth}), rb1(DType::f32, {kCap, kWidth});
  auto check_step = [&](void *state, HostTensor &r0, HostTensor &r1, int64_t n) {
    HostTensor x = random_tensor(DType::f32, {n, kWidth});
    int64_t past = length(state);
    std::vector<HostTensor> expected = Interpreter::run(g, {x, r0, r1}, {{"past", past}});
    HostTensor out(DType::f32, {n, kWidth});
    REQUIRE(step(state, reinterpret_cast<const float *>(x.data()), reinterpret_cast<float *>(out.data()), n) == 0);
    MAXC_REQUIRE_CLOSE(out, expected[0], 1e-5, 1e-5);
    CHECK(length(state) == past + n);
  };
  check_step(a, ra0, ra1, 4); // prefill a
  check_step(b, rb0, rb1, 2); // prefill b
  for (int i = 0; i < 3; ++i) {
    check_step(a, ra0, ra1, 1);
    check_step(b, rb0, rb1, 1);
  }
  // a holds 7 rows: 6 more do not fit; nothing runs, the length stays.
  HostTensor x6 = random_tensor(DType::f32, {6, kWidth}), out6(DType::f32, {6, kWidth});
  CHECK(step(a, reinterpret_cast<const float *>(x6.data()), reinterpret_cast<float *>(out6.data()), 6) ==
        static_cast<int32_t>(RunStatus::state_full));
  CHECK(length(a) == 7);
  check_step(a, ra0, ra1, 5); // exactly full
  CHECK(length(a) == kCap);
  // Reset: a new conversation on the same buffers.
  reset(a);
  CHECK(length(a) == 0);
  HostTensor fa0(DType::f32, {kCap, kWidth}), fa1(DType::f32, {kCap, kWidth});
  check_step(a, fa0, fa1, 3);
  CHECK(step(nullptr, nullptr, nullptr, 1) == static_cast<int32_t>(RunStatus::null_pointer));
  destroy(a);
  destroy(b);
  destroy(nullptr);
}
} // namespace

TEST_CASE("the state API: two interleaved states, a full state, reset (cpu, amdgpu-emu)", "[state][codegen]") {
  std::unique_ptr<Graph> g = state_model();
  JitCompiledGraph cpu(*g);
  drive_state_api(*g, [&](const std::string &suffix) { return cpu.lookup(suffix); });
  // The same API over the GPU kernels (emulated; host memory).
  EmulatedGraph emu(*g, codegen::kGpuEmulationArch);
  drive_state_api(*g, [&](const std::string &suffix) { return emu.lookup(suffix); });
  // A step runs the model once: NAME_run_packed without a workspace (which
  // reports invalid dims or a full state) only on the path that returns its
  // status at once, never before the real run.
  {
    llvm::LLVMContext context;
    auto module = build_model_module(*g, "m", context);
    const llvm::Function *step_fn = module->getFunction("m_step");
    REQUIRE(step_fn != nullptr);
    int calls = 0;
    for (const llvm::BasicBlock &bb : *step_fn)
      for (const llvm::Instruction &inst : bb)
        if (const auto *call = llvm::dyn_cast<llvm::CallInst>(&inst))
          if (const llvm::Function *f = call->getCalledFunction(); f && f->getName() == "m_run_packed") {
            ++calls;
            if (llvm::isa<llvm::ConstantPointerNull>(call->getArgOperand(2)))
              CHECK(llvm::isa<llvm::ReturnInst>(call->getNextNode()));
          }
    CHECK(calls == 2);
  }
}

namespace {
// maxc's JSON format: a "state" declaration and the ops in statements (StateModel.h).
const char *kJsonState = kJsonStateModel;

std::string with_state(const std::string &state) {
  std::string m = kJsonState;
  size_t at = m.find(R"("state": )"), end = m.find('\n', at);
  return m.replace(at, end - at, R"("state": )" + state + ",");
}
} // namespace

TEST_CASE("state in maxc's JSON format: declared, traced, run step after step", "[state][frontend]") {
  DiagnosticEngine diags;
  LoadOptions options;
  LoadedModel m = load_model_text(kJsonState, "cache.json", options, diags);
  INFO(diags.to_text());
  REQUIRE(m.graph);
  const std::optional<ModelState> &st = m.graph->symbol_table().model_state();
  REQUIRE(st);
  CHECK(st->buffers == std::vector<std::string>{"k"});
  CHECK(st->capacity == "ctx");
  CHECK(st->length == "past");
  CHECK(st->advance == Dim("seq"));
  CHECK(m.graph->symbol_table().find("past")->origin == SymbolOrigin::DimArgument);
  JitCompiledGraph cpu(*m.graph);
  HostTensor ref(DType::f32, {8, 3}), mine(DType::f32, {8, 3});
  int64_t past = 0;
  for (int64_t n : {3, 1, 2}) {
    HostTensor x = random_tensor(DType::f32, {n, 3});
    std::vector<HostTensor> expected = Interpreter::run(*m.graph, {x, ref}, {{"past", past}});
    MAXC_REQUIRE_CLOSE(cpu.run_dims({x, mine}, {{"past", past}})[0], expected[0], 1e-5, 1e-6);
    past += n;
  }
  MAXC_REQUIRE_CLOSE(mine, ref, 0, 0);
  // Each problem named at its JSON pointer.
  auto error_of = [](const std::string &text) {
    DiagnosticEngine d;
    LoadedModel bad = load_model_text(text, "cache.json", LoadOptions{}, d);
    CHECK(!bad.graph);
    return d.to_text();
  };
  CHECK_THAT(error_of(with_state(R"({"buffers": ["nope"], "length": "past", "advance": "seq"})")),
             Catch::Matchers::Contains("/state/buffers/0") && Catch::Matchers::Contains("declared input"));
  CHECK_THAT(error_of(with_state(R"({"buffers": ["k", "x"], "length": "past", "advance": "seq"})")),
             Catch::Matchers::Contains("one capacity for every buffer"));
  CHECK_THAT(error_of(with_state(R"({"buffers": ["k"], "length": "seq", "advance": "seq"})")),
             Catch::Matchers::Contains("is a dim of input 'x'"));
  CHECK_THAT(error_of(with_state(R"({"buffers": ["k"], "length": "past"})")),
             Catch::Matchers::Contains("advance"));
  CHECK_THAT(error_of(with_state(R"({"buffers": ["k"], "length": "past", "advance": "seq", "extra": 1})")),
             Catch::Matchers::Contains("extra"));
}
