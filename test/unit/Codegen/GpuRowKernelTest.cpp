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
  const driver::Backend *amdgpu = driver::find_backend("amdgpu");
  driver::PlannedModel planned =
      driver::plan_model(graph, "rows", amdgpu->decompose_options(), amdgpu->plan_options());
  return amdgpu->compile(planned, options, {"obj"}, timer).manifest.extra_json;
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
  CHECK(count_occurrences(manifest, "\"kind\":\"row\"") == 1);
  CHECK(count_occurrences(manifest, "\"launches\":5,") == 1);
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

TEST_CASE("attention on the GPU: head views read and written by the matmuls, the mask recomputed", "[codegen][gpu]") {
  // x: [batch, 6, 8], two heads of 4: the split views become the fused
  // attention's loader index math, the merge view the output matmul's, the
  // causal mask (constants only) no launch of its own: QK^T, softmax and PV
  // are one attention kernel (Gpu/GpuAttention.h).
  std::vector<TensorType> types = {TensorType(DType::f32, {Dim("batch"), 6, 8}), TensorType(DType::f32, {8, 8}),
                                   TensorType(DType::f32, {8, 8}), TensorType(DType::f32, {8, 8}),
                                   TensorType(DType::f32, {8, 8})};
  auto graph = trace_graph(types, [](const std::vector<Tensor> &in) {
    auto heads = [&](const Tensor &w) {
      return ops::transpose(ops::reshape(ops::matmul(in[0], w), {Dim("batch"), 6, 2, 4}), {0, 2, 1, 3});
    };
    Tensor scores = ops::matmul(heads(in[1]), heads(in[2]), false, true);
    Tensor causal = ops::greater_equal(ops::iota({6, 6}, 0), ops::iota({6, 6}, 1));
    scores = ops::where(causal, scores, ops::full(-1e9, DType::f32));
    Tensor o = ops::matmul(ops::softmax(scores, -1), heads(in[3]));
    o = ops::reshape(ops::transpose(o, {0, 2, 1, 3}), {Dim("batch"), 6, 8});
    return std::vector<Tensor>{ops::add(ops::matmul(o, in[4]), in[0])};
  });
  std::string manifest = gpu_manifest(*graph);
  INFO(manifest);
  CHECK(count_occurrences(manifest, "\"kind\":\"row\"") == 0);
  CHECK(count_occurrences(manifest, "\"kind\":\"attention\"") == 1);
  CHECK(count_occurrences(manifest, "\"kind\":\"elementwise\"") == 0);
  CHECK(count_occurrences(manifest, "\"launches\":5,") == 1); // q, k, v, attention, output (7 unfused)
  for (int64_t batch : {1, 2}) {
    INFO("batch " << batch);
    std::vector<HostTensor> inputs = {random_tensor(DType::f32, {batch, 6, 8})};
    for (int i = 0; i < 4; ++i)
      inputs.push_back(random_tensor(DType::f32, {8, 8}));
    auto expected = Interpreter::run(*graph, inputs);
    auto actual = run_gpu_emulated(*graph, inputs);
    REQUIRE(actual.size() == 1);
    MAXC_REQUIRE_CLOSE(actual[0], expected[0], 1e-4, 1e-5);
  }
}
