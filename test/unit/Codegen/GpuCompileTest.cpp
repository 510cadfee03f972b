// compile_gpu_model: multi-arch artifacts, kernel kinds, determinism and
// the ops the device cannot run yet.
#include "TestUtil.h"

#include "maxc/Codegen/GpuModelCompiler.h"

#include <catch2/catch.hpp>

#include <set>

using namespace maxc;
using namespace maxc::test;

namespace {

std::unique_ptr<Graph> small_model(DType d) {
  return trace_graph({TensorType(d, {Dim("batch"), 8}), TensorType(d, {8, 4})}, [](const std::vector<Tensor> &in) {
    Tensor h = ops::tanh(ops::matmul(in[0], in[1]));
    return std::vector<Tensor>{ops::softmax(h, -1), ops::sum(h, {0})};
  });
}

} // namespace

TEST_CASE("a GPU model compiles for several architectures at once", "[codegen][gpu]") {
  auto graph = small_model(DType::f32);
  GpuCompileOptions options;
  options.name = "small";
  options.arches = {"gfx90a", "gfx942", "gfx1100"};
  GpuCompiledModel m = compile_gpu_model(*graph, options);
  REQUIRE(m.code_objects.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(m.code_objects[i].first == options.arches[i]);
    CHECK(m.code_objects[i].second.substr(0, 4) == "\x7f" "ELF");
  }
  std::set<std::string> kinds;
  for (const GpuKernelSummary &k : m.kernels) {
    kinds.insert(k.kind);
    CHECK(k.workgroup_size >= 1);
    CHECK(k.workgroup_size <= 256);
  }
  CHECK(kinds.count("matmul") == 1);
  CHECK(kinds.count("reduction") == 1);
  CHECK(m.header.find("int32_t small_init(small_context **ctx);") != std::string::npos);
  CHECK(m.header.find("int64_t batch, void *workspace, void *stream") != std::string::npos);
  // Same inputs, same bytes.
  GpuCompiledModel again = compile_gpu_model(*graph, options);
  CHECK(again.host_object == m.host_object);
  CHECK(again.code_objects == m.code_objects);
}

TEST_CASE("GPU compiles reject f64 transcendentals, naming the node", "[codegen][gpu]") {
  auto graph = small_model(DType::f64);
  GpuCompileOptions options;
  options.arches = {"gfx942"};
  try {
    compile_gpu_model(*graph, options);
    FAIL("expected an error");
  } catch (const Error &e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK_THAT(e.what(), Catch::Contains("'tanh' (f64)"));
  }
  options.arches = {};
  CHECK_THROWS_AS(compile_gpu_model(*small_model(DType::f32), options), Error);
}

TEST_CASE("the same kernels lower to NVPTX (PTX entries with barriers and shared memory)", "[codegen][gpu]") {
  auto graph = small_model(DType::f32);
  std::string ptx = compile_gpu_kernels_ptx(*graph, "small", "sm_90");
  CHECK(ptx.find(".target sm_90") != std::string::npos);
  CHECK(ptx.find(".entry") != std::string::npos);
  CHECK(ptx.find("bar.sync") != std::string::npos);
  CHECK(ptx.find(".shared") != std::string::npos);
  CHECK_THROWS_AS(compile_gpu_kernels_ptx(*graph, "small", "sm_9000"), Error);
  // Where CUDA's ptxas happens to be installed (not a dependency), it must
  // accept the PTX.
  if (std::system("command -v ptxas >/dev/null 2>&1") == 0) {
    TempDir dir;
    std::string path = dir.path + "/small.ptx";
    std::ofstream(path) << ptx;
    CHECK(std::system(("ptxas -arch=sm_90 " + path + " -o " + dir.path + "/small.cubin").c_str()) == 0);
  }
}
