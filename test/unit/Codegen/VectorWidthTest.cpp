// The CPU kernels' vector width follows the target (cpu_vector_lanes,
// maxc/Codegen/Target.h): 16 f32 lanes with AVX-512F, 8 with AVX/AVX2, 4
// with SSE / NEON / generic. The narrower kernels (GEMM panels, the attention
// query blocks, the conv planes) compiled for "haswell" (8 lanes, AVX2) and
// "x86-64" (4 lanes, SSE2, the shape of the NEON kernels) run here on the
// host and match the reference interpreter on random inputs at odd sizes;
// the GEMM also on two threads. Skipped where the host lacks AVX2/FMA.
//
// Tolerances: as GemmTest / AttentionBlocksTest / ConvKernelTest (f32 sums
// over at most a few hundred products vs the reference's double).
#include "CompiledRunner.h"

#include "maxc/Codegen/Target.h"

#include <llvm/ADT/StringMap.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>

#include <cmath>

using namespace maxc;
using namespace maxc::test;

namespace {

unsigned lanes_of(const std::string &triple, const std::string &cpu) {
  return cpu_vector_lanes(resolve_cpu_target(triple, cpu, 2));
}

/// The host can run code for haswell (AVX2 + FMA and the rest of its set).
bool host_runs_haswell() {
  llvm::StringMap<bool> f = llvm::sys::getHostCPUFeatures();
  llvm::Triple host(llvm::sys::getProcessTriple());
  return host.getArch() == llvm::Triple::x86_64 && f.lookup("avx2") && f.lookup("fma") && f.lookup("bmi2") &&
         f.lookup("f16c") && f.lookup("movbe") && f.lookup("lzcnt");
}

bool host_is_x86() { return llvm::Triple(llvm::sys::getProcessTriple()).getArch() == llvm::Triple::x86_64; }

/// Cpus to run the narrower kernels with, those this host can execute.
std::vector<std::string> narrow_cpus() {
  std::vector<std::string> out;
  if (host_runs_haswell())
    out.push_back("haswell");
  if (host_is_x86())
    out.push_back("x86-64");
  return out;
}

void require_close(const std::vector<HostTensor> &got, const std::vector<HostTensor> &expected, double rtol,
                   double atol) {
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    std::string m = compare(got[i], expected[i], rtol, atol);
    INFO("output " << i << ": " << m);
    REQUIRE(m.empty());
  }
}

HostTensor rand(std::vector<int64_t> shape, double lo = -1, double hi = 1) {
  return random_tensor(DType::f32, std::move(shape), lo, hi);
}

} // namespace

TEST_CASE("vector lanes follow the target: AVX-512 16, AVX2 8, SSE/NEON/generic 4", "[codegen][lanes]") {
  const std::string x86 = "x86_64-linux-gnu", arm = "aarch64-linux-gnu";
  CHECK(lanes_of(x86, "znver4") == 16);
  CHECK(lanes_of(x86, "skylake-avx512") == 16);
  CHECK(lanes_of(x86, "rocketlake") == 16);
  CHECK(lanes_of(x86, "haswell") == 8);
  CHECK(lanes_of(x86, "znver2") == 8);
  CHECK(lanes_of(x86, "sandybridge") == 8); // AVX without AVX2
  CHECK(lanes_of(x86, "x86-64") == 4);
  CHECK(lanes_of(x86, "") == 4);
  CHECK(lanes_of(x86, "nehalem") == 4);
  CHECK(lanes_of(arm, "") == 4);
  CHECK(lanes_of(arm, "neoverse-v1") == 4);
  CHECK(lanes_of(arm, "apple-m1") == 4);
  CpuTarget no512{x86, "skylake-avx512", "-evex512", 2}; // AVX-512 without 512-bit vectors (AVX10/256)
  CHECK(cpu_vector_lanes(no512) == 8);
  CHECK(host_vector_lanes() == cpu_vector_lanes(resolve_cpu_target(llvm::sys::getProcessTriple(), "native", 2)));

  // The lanes reach the kernels: the GEMM panel function is named by them.
  auto g = trace_graph({TensorType(DType::f32, {5, 7}), TensorType(DType::f32, {7, 9})},
                       [](auto &x) { return std::vector<Tensor>{ops::matmul(x[0], x[1])}; });
  for (unsigned lanes : {4u, 8u, 16u}) {
    llvm::LLVMContext context;
    auto module = build_model_module(*g, "vw", context, lanes);
    bool found = false;
    for (const llvm::Function &f : *module)
      if (f.getName().starts_with("vw.gemm_panel."))
        found = f.getName().starts_with("vw.gemm_panel." + std::to_string(lanes));
    INFO("lanes " << lanes);
    CHECK(found);
  }
}

TEST_CASE("narrow-vector GEMM at odd sizes vs the interpreter (haswell, x86-64)", "[codegen][lanes][gemm]") {
  Dim m("m"), n("n"), k("k");
  auto graph = trace_graph({TensorType(DType::f32, {m, k}), TensorType(DType::f32, {k, n}), TensorType(DType::f32, {m, n})},
                           [](auto &x) {
                             return std::vector<Tensor>{ops::matmul(x[0], x[1]),
                                                        ops::relu(ops::matmul(x[0], x[1]) + x[2])};
                           });
  std::vector<std::string> cpus = narrow_cpus();
  if (cpus.empty())
    return; // the host cannot run haswell or x86-64 code
  for (const std::string &cpu : cpus) {
    JitCompiledGraph compiled(*graph, cpu);
    const int64_t sizes[] = {1, 5, 9, 17, 100, 300};
    for (int64_t M : {int64_t(1), int64_t(5), int64_t(13), int64_t(100)})
      for (int64_t N : sizes)
        for (int64_t K : {int64_t(1), int64_t(17), int64_t(257), int64_t(600)}) {
          std::vector<HostTensor> in = {rand({M, K}), rand({K, N}), rand({M, N})};
          std::vector<HostTensor> expected = Interpreter::run(*graph, in);
          INFO(cpu << ": M " << M << " N " << N << " K " << K);
          require_close(compiled.run(in, false), expected, 1e-4, 1e-4);
          require_close(compiled.run(in, true), expected, 1e-4, 1e-4);
        }
  }
}

TEST_CASE("narrow-vector attention blocks and conv kernels vs the interpreter (haswell, x86-64)",
          "[codegen][lanes][attention][conv]") {
  std::vector<std::string> cpus = narrow_cpus();
  if (cpus.empty())
    return; // the host cannot run haswell or x86-64 code
  for (const std::string &cpu : cpus) {
    INFO(cpu);
    // Attention (causal, odd lengths; one with more keys than queries and a value tail).
    for (auto [sq, sk, d, dv] : std::vector<std::array<int64_t, 4>>{{7, 7, 32, 32}, {33, 33, 80, 80}, {13, 37, 16, 5}}) {
      INFO("sq " << sq << " sk " << sk << " d " << d << " dv " << dv);
      std::vector<HostTensor> in = {rand({1, 2, sq, d}, -3, 3), rand({1, 2, sk, d}, -3, 3), rand({1, 2, sk, dv}, -3, 3)};
      double scale = 1 / std::sqrt(double(d));
      auto g = trace_graph(types_of(in), [sq = sq, sk = sk, scale](auto &x) {
        Tensor sc = ops::matmul(x[0], x[1], false, true) * ops::full(scale, DType::f32);
        Tensor causal = ops::less_equal(ops::iota({sq, sk}, 1), ops::iota({sq, sk}, 0));
        return std::vector<Tensor>{
            ops::matmul(ops::softmax(ops::where(causal, sc, ops::full(-1e9, DType::f32)), -1), x[2])};
      });
      {
        llvm::LLVMContext context;
        unsigned lanes = cpu_vector_lanes(resolve_cpu_target(llvm::sys::getProcessTriple(), cpu, 2));
        CHECK(build_model_module(*g, "maxc_jit", context, lanes)->getFunction("maxc_jit.attention"));
      }
      require_close(run_compiled_threads(*g, in, cpu), Interpreter::run(*g, in), 1e-4, 1e-5);
    }
    // Convolutions: im2col + GEMM (3x3, stride 2 with a 1x1) and the direct kernel (depthwise).
    struct ConvCase {
      std::vector<int64_t> x, w;
      std::vector<int64_t> stride, padding;
      int64_t groups;
    };
    for (const ConvCase &c : std::vector<ConvCase>{{{2, 3, 11, 13}, {7, 3, 3, 3}, {1, 1}, {1, 1}, 1},
                                                  {{1, 5, 9, 9}, {6, 5, 1, 1}, {2, 2}, {0, 0}, 1},
                                                  {{1, 8, 19, 17}, {8, 1, 3, 3}, {1, 1}, {1, 1}, 8},
                                                  {{1, 6, 10, 23}, {12, 3, 3, 3}, {2, 1}, {1, 1}, 2}}) {
      std::vector<HostTensor> in = {rand(c.x), rand(c.w), rand({c.w[0]})};
      auto g = trace_graph(types_of(in), [&](auto &t) {
        ops::Conv2dOptions o;
        o.stride = c.stride;
        o.padding = c.padding;
        o.groups = c.groups;
        return std::vector<Tensor>{ops::relu(ops::conv2d(t[0], t[1], t[2], o) * 0.5 - 0.1)};
      });
      INFO("conv x " << c.x[1] << "x" << c.x[2] << "x" << c.x[3] << " groups " << c.groups);
      require_close(run_compiled_threads(*g, in, cpu), Interpreter::run(*g, in), 1e-5, 1e-5);
    }
  }
}
