// The GPU generator's launch sequences of the examples (mlp, cnn, gpt and
// the GPT with f16 weights, whose norms cast their f16 weights to f32): no
// kernel reads constants only (its results would be the same every run:
// issue #13's bar). Values computed from weights alone, subgraph parameters
// bound to weights at every call site included, are fused into the kernels
// that read them. Kernels are generated, not compiled: cheap.
#include "TestUtil.h"

#include "maxc/Codegen/GpuModelCompiler.h"
#include "maxc/Driver/Backend.h"
#include "maxc/Driver/Compile.h"
#include "maxc/Frontend/ModelLoader.h"
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

std::vector<GpuKernelSummary> gpu_kernels(const std::string &text, const std::string &arch, uint64_t &launches) {
  LoadOptions options;
  options.synthesize_weights = true;
  DiagnosticEngine diagnostics;
  LoadedModel model = load_model_text(text, "model.json", options, diagnostics);
  REQUIRE(model.graph);
  driver::PlannedModel planned =
      driver::plan_model(*model.graph, "m", driver::find_backend("amdgpu")->decompose_options());
  return codegen::plan_gpu_kernels(*planned.lowered, arch, &launches);
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
