// Row kernels of the GPU generator: a last-axis reduction and the nodes
// that follow it per row (LayerNorm, RMSNorm, softmax after decomposition)
// run as one launch with one workgroup per row; the emulator must still
// match the interpreter, at a dynamic batch.
#include "TestUtil.h"

#include "maxc/Codegen/CompiledRun.h"
#include "maxc/Codegen/GpuModelCompiler.h"
#include "maxc/Driver/Compile.h"
#include "maxc/Interpreter/Interpreter.h"

#include <catch2/catch.hpp>

using namespace maxc;
using namespace maxc::test;

namespace {

std::string gpu_manifest(const Graph &graph) {
  driver::BackendOptions options;
  options.gpu = "gfx942";
  options.cpu = "";
  PassTimer timer;
  return driver::find_backend("amdgpu")->compile(driver::plan_model(graph, "rows"), options, {"obj"}, timer)
      .manifest.extra_json;
}

size_t count(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

} // namespace

TEST_CASE("norms and softmax run as one row kernel each, equal to the reference", "[codegen][gpu]") {
  // x: [batch, 5, 40]; LayerNorm, a residual add, softmax, RMSNorm, and a
  // softmax over a non-last axis (not a row kernel: its own kernels).
  std::vector<TensorType> types = {TensorType(DType::f32, {Dim("batch"), 5, 40}), TensorType(DType::f32, {40}),
                                   TensorType(DType::f32, {40})};
  auto graph = trace_graph(types, [](const std::vector<Tensor> &in) {
    Tensor h = ops::layer_norm(in[0], in[1], in[2]);
    Tensor p = ops::softmax(ops::add(h, in[0]), -1);
    Tensor r = ops::rms_norm(p, in[1]);
    return std::vector<Tensor>{r, ops::softmax(h, 1)};
  });
  std::string manifest = gpu_manifest(*graph);
  INFO(manifest);
  // LayerNorm, add, softmax and RMSNorm share their rows: one row kernel;
  // the axis-1 softmax is two reductions and two elementwise kernels.
  CHECK(count(manifest, "\"kind\":\"row\"") == 1);
  CHECK(count(manifest, "\"launches\":5,") == 1);
  for (int64_t batch : {1, 3}) {
    INFO("batch " << batch);
    std::vector<HostTensor> inputs = {random_tensor(DType::f32, {batch, 5, 40}), random_tensor(DType::f32, {40}),
                                      random_tensor(DType::f32, {40})};
    auto expected = Interpreter::run(*graph, inputs);
    auto actual = run_gpu_emulated(*graph, inputs);
    REQUIRE(actual.size() == expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      INFO("output " << i);
      MAXC_REQUIRE_CLOSE(actual[i], expected[i], 1e-5, 1e-6);
    }
  }
}
