// The amdgpu backend: multi-arch artifacts, kernel kinds, register counts
// from the code objects, determinism and the ops the device cannot run yet.
#include "TestUtil.h"

#include "maxc/Codegen/GpuModelCompiler.h"
#include "maxc/Driver/Compile.h"

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

driver::BackendOutput compile_gpu(const Graph &graph, const std::vector<std::string> &arches,
                                  std::set<std::string> emit = {"obj", "header", "hsaco"}) {
  driver::BackendOptions options;
  for (const std::string &a : arches)
    options.gpu += (options.gpu.empty() ? "" : ",") + a;
  options.cpu = "";
  PassTimer timer;
  return driver::find_backend("amdgpu")->compile(driver::plan_model(graph, "small", {}, gpu_plan_options()), options,
                                                 emit, timer);
}

std::string artifact(const driver::BackendOutput &out, const std::string &kind) {
  for (const auto &[k, bytes] : out.artifacts)
    if (k == kind)
      return bytes;
  FAIL("no artifact " << kind);
  return "";
}

TEST_CASE("a GPU model compiles for several architectures at once", "[codegen][gpu]") {
  auto graph = small_model(DType::f32);
  std::vector<std::string> arches = {"gfx90a", "gfx942", "gfx1100"};
  driver::BackendOutput m = compile_gpu(*graph, arches);
  for (const std::string &arch : arches) {
    std::string hsaco = artifact(m, "hsaco." + arch);
    CHECK(hsaco.substr(0, 4) == "\x7f" "ELF");
    // Register counts come from the code object's metadata note.
    std::vector<GpuKernelResources> used = amdgpu_kernel_resources(hsaco);
    REQUIRE(!used.empty());
    for (const GpuKernelResources &r : used) {
      CHECK(r.name.rfind("small.", 0) == 0);
      CHECK(r.sgpr_count > 0);
      CHECK(r.vgpr_count > 0);
      CHECK(r.private_segment_bytes == 0);
      CHECK(r.vgpr_spill_count == 0);
      CHECK(r.sgpr_spill_count == 0);
      CHECK(r.agpr_count == 0);
      CHECK(r.wavefront_size == (arch == "gfx1100" ? 32 : 64));
      CHECK(r.max_flat_workgroup_size > 0);
      CHECK(r.vgpr_count <= 128);
      CHECK(amdgpu_waves_per_simd(arch, r) >= 4);
    }
  }
  std::string header = artifact(m, "header");
  CHECK(header.find("int32_t small_init(small_context **ctx);") != std::string::npos);
  CHECK(header.find("int64_t batch, void *workspace, void *stream") != std::string::npos);
  // One status convention for every backend's header.
  CHECK(header.find("#define SMALL_OK 0") != std::string::npos);
  CHECK(header.find("#define SMALL_ERROR_NO_DEVICE 6") != std::string::npos);
  CHECK(m.manifest.extra_json.find("\"sgpr_count\"") != std::string::npos);
  CHECK(m.manifest.extra_json.find("\"vgpr_spill_count\":0") != std::string::npos);
  CHECK(m.manifest.extra_json.find("\"waves_per_simd\"") != std::string::npos);
  CHECK(m.manifest.extra_json.find("\"launches\":") != std::string::npos);
  CHECK(m.manifest.extra_json.find("\"kind\":\"matmul\"") != std::string::npos);
  CHECK(m.manifest.extra_json.find("\"kind\":\"reduction\"") != std::string::npos);
  // Same inputs, same bytes.
  driver::BackendOutput again = compile_gpu(*graph, arches);
  CHECK(again.artifacts == m.artifacts);
}

TEST_CASE("GPU compiles reject f64 transcendentals, naming the node", "[codegen][gpu]") {
  auto graph = small_model(DType::f64);
  try {
    compile_gpu(*graph, {"gfx942"});
    FAIL("expected an error");
  } catch (const Error &e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK_THAT(e.what(), Catch::Contains("'tanh' (f64)"));
  }
  driver::BackendOptions options; // no --gpu
  CHECK_THROWS_AS(driver::find_backend("amdgpu")->validate(options), Error);
  options.gpu = "gfx942";
  options.external_weights = true;
  CHECK_THROWS_WITH(driver::find_backend("amdgpu")->validate(options),
                    Catch::Contains("--weights-mode external is not supported with --gpu yet"));
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

TEST_CASE("occupancy follows the arch's register files and LDS", "[codegen][gpu]") {
  GpuKernelResources r;
  r.sgpr_count = 20;
  r.vgpr_count = 36;
  r.agpr_count = 0;
  r.group_segment_bytes = 0;
  r.wavefront_size = 64;
  r.max_flat_workgroup_size = 256;
  CHECK(amdgpu_waves_per_simd("gfx90a", r) == 8); // the wave limit (512 / 40 = 12)
  r.vgpr_count = 128;
  CHECK(amdgpu_waves_per_simd("gfx942", r) == 4); // 512 / 128
  r.vgpr_count = 36;
  r.sgpr_count = 100;
  CHECK(amdgpu_waves_per_simd("gfx90a", r) == 7); // 800 SGPRs / 112
  r.sgpr_count = 20;
  r.group_segment_bytes = 65536; // one workgroup of 4 waves per CU of 4 SIMDs
  CHECK(amdgpu_waves_per_simd("gfx90a", r) == 1);
  r.group_segment_bytes = 2048;
  CHECK(amdgpu_waves_per_simd("gfx90a", r) == 8);
  // gfx1100: wave32, 1536 VGPRs per lane in granules of 24, 16 waves.
  r.wavefront_size = 32;
  r.vgpr_count = 27;
  r.sgpr_count = 200; // SGPRs do not limit gfx10+
  CHECK(amdgpu_waves_per_simd("gfx1100", r) == 16);
  r.vgpr_count = 128;
  CHECK(amdgpu_waves_per_simd("gfx1100", r) == 10); // 1536 / 144
  r.vgpr_count = -1; // unknown
  CHECK(amdgpu_waves_per_simd("gfx1100", r) == 0);
}
