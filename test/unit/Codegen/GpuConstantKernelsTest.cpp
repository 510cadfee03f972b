// The GPU generator's launch sequences of the examples (mlp, cnn, gpt and
// the GPT with f16 weights, whose norms cast their f16 weights to f32): no
// kernel reads constants only (its results would be the same every run:
// issue #13's bar). Values computed from weights alone, subgraph parameters
// bound to weights at every call site included, are fused into the kernels
// that read them. Kernels are generated, not compiled: cheap. Also: the
// generator runs the driver's plan, which the GPU plan pass refined.
#include "EmulatedRunner.h"
#include "TestUtil.h"

#include "maxc/Codegen/GpuModelCompiler.h"
#include "maxc/Driver/Backend.h"
#include "maxc/Driver/Compile.h"
#include "maxc/Frontend/ModelLoader.h"
#include "maxc/Interpreter/Interpreter.h"
#include "maxc/Ops/OpRegistry.h"
#include "maxc/Support/Diagnostics.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

using namespace maxc;

namespace {

std::string example_text(const std::string &name) {
  std::ifstream in(std::string(MAXC_SOURCE_DIR) + "/examples/" + name + "/model.json");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The GPT example with every parameter and every `full` constant f16 (so
/// every activation is f16), as e2e gpu_f16_gpt_budget builds it.
std::string f16_gpt_text() {
  nlohmann::json src = nlohmann::json::parse(example_text("gpt"));
  src["name"] = "gpt16";
  for (auto &[mname, module] : src["modules"].items()) {
    if (module.contains("params"))
      for (auto &[key, param] : module["params"].items()) {
        if (!param.is_object())
          param = nlohmann::json{{"shape", param}};
        param["dtype"] = "f16";
      }
    if (module.contains("body"))
      for (auto &stmt : module["body"])
        for (auto &[lhs, expr] : stmt.items())
          if (expr[0] == "full")
            expr[1]["dtype"] = "f16";
  }
  return src.dump();
}

LoadedModel load_text(const std::string &text) {
  LoadOptions options;
  options.synthesize_weights = true;
  DiagnosticEngine diagnostics;
  LoadedModel model = load_model_text(text, "model.json", options, diagnostics);
  REQUIRE(model.graph);
  return model;
}

/// Decomposed and planned as the amdgpu backend does (its plan pass too).
driver::PlannedModel plan_for_amdgpu(const Graph &graph) {
  const driver::Backend *amdgpu = driver::find_backend("amdgpu");
  return driver::plan_model(graph, "m", amdgpu->decompose_options(), amdgpu->plan_options());
}

std::vector<GpuKernelSummary> gpu_kernels(const std::string &text, const std::string &arch, uint64_t &launches) {
  LoadedModel model = load_text(text);
  driver::PlannedModel planned = plan_for_amdgpu(*model.graph);
  return codegen::plan_gpu_kernels(*planned.lowered, arch, &launches, &planned.plans);
}

} // namespace

TEST_CASE("GPU: no kernel of the examples reads constants only", "[codegen][gpu]") {
  std::vector<std::pair<std::string, std::string>> models = {
      {"mlp", example_text("mlp")}, {"cnn", example_text("cnn")}, {"gpt", example_text("gpt")}, {"gpt16", f16_gpt_text()}};
  for (const auto &[name, text] : models)
    for (const std::string arch : {"gfx942", "gfx1100"}) {
      uint64_t launches = 0;
      std::vector<GpuKernelSummary> kernels = gpu_kernels(text, arch, launches);
      INFO(name << " " << arch << ": " << kernels.size() << " kernels, " << launches << " launches");
      CHECK(!kernels.empty());
      for (const GpuKernelSummary &k : kernels) {
        INFO(k.name << " (" << k.kind << ", grid " << k.grid << ")");
        CHECK(!k.constant_inputs);
      }
      // The f16 GPT: 84 launches with its norm weights cast per call, 68
      // with its activations cast before each norm by a kernel of its own,
      // 60 before its attention was fused (f16 operands, f32 accumulation).
      if (name == "gpt16")
        CHECK(launches <= 48);
      // The f32 GPT: 7 per block (attention one fused kernel) + 3.
      if (name == "gpt")
        CHECK(launches == 31);
    }
}

TEST_CASE("GPU: a value computed from constants only would be flagged", "[codegen][gpu]") {
  // The check above can fail: a stored iota (an output) is a kernel whose
  // inputs (none) are all constants.
  auto g = test::trace_graph({TensorType(DType::f32, {Dim("batch"), 4})}, [](const std::vector<Tensor> &in) {
    Tensor iota = ops::iota({4}, 0, DType::f32);
    return std::vector<Tensor>{ops::add(in[0], iota), iota};
  });
  std::vector<GpuKernelSummary> kernels = codegen::plan_gpu_kernels(*g, "gfx942");
  bool flagged = false;
  for (const GpuKernelSummary &k : kernels)
    flagged = flagged || k.constant_inputs;
  CHECK(flagged);
}

TEST_CASE("GPU: the kernels run the driver's plan, refined once by the GPU plan pass", "[codegen][gpu]") {
  for (const std::string text : {example_text("gpt"), f16_gpt_text()}) {
    LoadedModel model = load_text(text);
    driver::PlannedModel planned = plan_for_amdgpu(*model.graph);
    // The driver's plans carry the GPU's fusion decisions: they differ from
    // the common plan (the f16 GPT's weight casts, its casts before the
    // norms: fused on the GPU only).
    LoweringPlans common = plan_lowering_all(*planned.lowered);
    bool refined = false;
    for (const auto &[graph, plan] : planned.plans) {
      CHECK(plan.gpu);
      CHECK(plan.kernels == common.at(graph).kernels); // positions, slots and epilogues stay
      CHECK(plan.slots.size() == common.at(graph).slots.size());
      CHECK(plan.epilogues == common.at(graph).epilogues);
      refined = refined || describe_plan(*graph, plan) != describe_plan(*graph, common.at(graph));
    }
    CHECK(refined);
    // The generator emits from them what it emits planning for itself.
    uint64_t given = 0, own = 0;
    std::vector<GpuKernelSummary> from_driver =
        codegen::plan_gpu_kernels(*planned.lowered, "gfx942", &given, &planned.plans);
    std::vector<GpuKernelSummary> planned_here = codegen::plan_gpu_kernels(*planned.lowered, "gfx942", &own);
    CHECK(given == own);
    REQUIRE(from_driver.size() == planned_here.size());
    for (size_t k = 0; k < from_driver.size(); ++k) {
      CHECK(from_driver[k].name == planned_here[k].name);
      CHECK(from_driver[k].kind == planned_here[k].kind);
      CHECK(from_driver[k].grid == planned_here[k].grid);
    }
    // A plan the GPU pass did not make (the CPU's, say) is refused.
    CHECK_THROWS_AS(codegen::plan_gpu_kernels(*planned.lowered, "gfx942", nullptr, &common), Error);
  }
}

TEST_CASE("GPU plan pass: a matmul stores through the views after it", "[codegen][gpu][plan]") {
  // h = x @ w, its heads merged (transpose, reshape) into m, which a
  // broadcasting add reads (so m is stored). The GPU plan pass lets the
  // matmul write m at the permuted position: no copy kernel between them.
  std::vector<HostTensor> inputs = {test::random_tensor(DType::f32, {2, 3, 8, 4}),
                                    test::random_tensor(DType::f32, {4, 4}),
                                    test::random_tensor(DType::f32, {5, 2, 8, 12})};
  auto g = test::trace_graph(test::types_of(inputs), [](const std::vector<Tensor> &in) {
    Tensor h = ops::matmul(in[0], in[1]);
    Tensor m = ops::reshape(ops::transpose(h, {0, 2, 1, 3}), {Dim(2), Dim(8), Dim(12)});
    return std::vector<Tensor>{ops::add(m, in[2])};
  });
  LoweringPlans common = plan_lowering_all(*g);
  LoweringPlans plans = plan_lowering_all(*g, gpu_plan_options());
  const LoweringPlan &plan = plans.at(g.get());
  std::string text = describe_plan(*g, plan);
  INFO(text);
  CHECK(common.at(g.get()).stored_through.empty());
  REQUIRE(plan.stored_through.size() == 1);
  CHECK(text.find("matmul: fused (stored through views -> %") != std::string::npos);
  uint64_t launches = 0;
  codegen::plan_gpu_kernels(*g, "", &launches, &plans);
  CHECK(launches == 2); // the matmul and the add
  std::vector<HostTensor> expected = Interpreter::run(*g, inputs);
  std::vector<HostTensor> actual = test::run_emulated(*g, inputs, "gfx942");
  MAXC_REQUIRE_CLOSE(actual[0], expected[0], 1e-5, 1e-5);
}

TEST_CASE("GPU plan pass: a symbol's definition computed from constants stays stored", "[codegen][gpu][plan]") {
  // n = int(full(2) * 1.5) is computed from constants only, but bind_dim
  // reads it on the host (into the dims array): the pass must not fuse it,
  // as it fuses other constant subexpressions.
  std::vector<HostTensor> inputs = {test::random_tensor(DType::f32, {4, 8})};
  auto g = test::trace_graph(test::types_of(inputs), [](const std::vector<Tensor> &in) {
    Dim n = ops::bind_dim(ops::cast(ops::full(2.0, DType::f32) * 1.5, DType::i32), "n", 8);
    return std::vector<Tensor>{in[0] + ops::sum(ops::iota({n}, 0, DType::f32), {0})};
  });
  LoweringPlans plans = plan_lowering_all(*g, gpu_plan_options());
  const Graph *graph = g.get();
  for (const Node &node : graph->nodes())
    if (defines_symbol(node)) {
      INFO(describe_plan(*graph, plans.at(graph)));
      CHECK(plans.at(graph).values[node.operands[0]].storage != Storage::fused);
    }
  std::vector<HostTensor> expected = Interpreter::run(*g, inputs);
  std::vector<HostTensor> actual = test::run_emulated(*g, inputs, "gfx942");
  MAXC_REQUIRE_CLOSE(actual[0], expected[0], 1e-6, 1e-6);
}
