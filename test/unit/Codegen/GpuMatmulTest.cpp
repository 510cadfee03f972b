// The matrix-core GEMM kernels (lib/Codegen/Gpu/GpuMatmul.cpp): executed by
// the host emulation with each arch's kernels (gfx942: MFMA, gfx1100: WMMA
// for f16/bf16 and the scalar 4 x 4 micro-tile for f32, "": the arch-neutral
// 16 x 16 LDS tile), compared with the reference interpreter; and the AMDGPU
// assembly of the same kernels: matrix instructions present, no spills.
//
// Tolerances (|a-e| <= atol + rtol*|e|), against the interpreter's double
// accumulation rounded once: f32 operands accumulate in f32 (rtol 1e-4,
// atol 1e-5 at K <= 100); f16/bf16 operands are multiplied exactly and
// accumulated in f32, then rounded to f16 (rtol 2e-3, ~2 f16 ulps) or bf16
// (rtol 1.6e-2, ~2 bf16 ulps), with atol 1e-2 for sums near zero.
#include "EmulatedRunner.h"

#include "maxc/Codegen/GpuModelCompiler.h"
#include "maxc/Codegen/Jit.h"
#include "maxc/Driver/Backend.h"
#include "maxc/Driver/Compile.h"
#include "maxc/Interpreter/Interpreter.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <catch2/catch.hpp>

#include <regex>

using namespace maxc;
using namespace maxc::test;

namespace {

struct Tol {
  double rtol, atol;
};

Tol tolerance(DType d) {
  switch (d) {
  case DType::f16: return {2e-3, 1e-2};
  case DType::bf16: return {1.6e-2, 1e-2};
  default: return {1e-4, 1e-5};
  }
}

/// A model of GEMM shapes: odd sizes (edge tiles in M, N and K), a batch
/// with a broadcast operand, a transposed operand, linear + bias + relu (a
/// GEMM epilogue) and a small conv2d (implicit GEMM).
void check_arch(const std::string &arch, DType d) {
  HostTensor a = random_tensor(d, {37, 70}, -1, 1), b = random_tensor(d, {70, 45}, -1, 1);
  HostTensor ab = random_tensor(d, {2, 3, 19, 20}, -1, 1), bb = random_tensor(d, {3, 20, 66}, -1, 1);
  HostTensor w = random_tensor(d, {45, 70}, -1, 1), bias = random_tensor(d, {45}, -1, 1);
  HostTensor x = random_tensor(d, {1, 3, 7, 6}, -1, 1), k = random_tensor(d, {5, 3, 3, 3}, -1, 1);
  std::vector<HostTensor> inputs = {a, b, ab, bb, w, bias, x, k};
  auto graph = trace_graph(types_of(inputs), [](const std::vector<Tensor> &in) {
    return std::vector<Tensor>{ops::matmul(in[0], in[1]), ops::matmul(in[2], in[3]),
                               ops::matmul(in[0], in[4], false, true), ops::relu(ops::linear(in[0], in[4], in[5])),
                               ops::conv2d(in[6], in[7])};
  });
  std::vector<HostTensor> expected = Interpreter::run(*graph, inputs);
  std::vector<HostTensor> actual = run_emulated(*graph, inputs, arch);
  Tol tol = tolerance(d);
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO(arch << " " << dtype_name(d) << " output " << i);
    MAXC_REQUIRE_CLOSE(actual[i], expected[i], tol.rtol, tol.atol);
  }
}

} // namespace

TEST_CASE("matrix-core GEMMs equal the interpreter on the emulator (MFMA, WMMA, scalar)", "[codegen][gpu-emu][mfma]") {
  SECTION("gfx942 MFMA f32") { check_arch("gfx942", DType::f32); }
  SECTION("gfx942 MFMA f16") { check_arch("gfx942", DType::f16); }
  SECTION("gfx90a MFMA bf16") { check_arch("gfx90a", DType::bf16); }
  SECTION("gfx1100 WMMA f16") { check_arch("gfx1100", DType::f16); }
  SECTION("gfx1100 WMMA bf16") { check_arch("gfx1100", DType::bf16); }
  SECTION("gfx1100 scalar micro-tiles f32") { check_arch("gfx1100", DType::f32); }
  SECTION("arch-neutral LDS tile f16") { check_arch("", DType::f16); }
}

TEST_CASE("NVIDIA GEMMs equal the interpreter on the emulator (mma.sync m16n8k16, scalar micro-tiles)",
          "[codegen][gpu-emu][nvmma]") {
  codegen::NvidiaMacroTileThreshold every_gemm(0); // small shapes on the macro-tile kernel
  SECTION("sm_90 mma.sync f16") { check_arch("sm_90", DType::f16); }
  SECTION("sm_80 mma.sync bf16") { check_arch("sm_80", DType::bf16); }
  SECTION("sm_90 scalar micro-tiles f32") { check_arch("sm_90", DType::f32); }
  SECTION("sm_75 scalar micro-tiles f16 (no m16n8k16 f32 accumulation)") { check_arch("sm_75", DType::f16); }
  SECTION("sm_90 f32 8 x 8 micro-tiles over several 128 x 128 tiles and edges") {
    HostTensor a = random_tensor(DType::f32, {130, 75}, -1, 1), b = random_tensor(DType::f32, {75, 261}, -1, 1);
    auto graph = trace_graph(types_of({a, b}), [](const std::vector<Tensor> &in) {
      return std::vector<Tensor>{ops::matmul(in[0], in[1])};
    });
    MAXC_REQUIRE_CLOSE(run_emulated(*graph, {a, b}, "sm_90")[0], Interpreter::run(*graph, {a, b})[0], 1e-4, 1e-5);
  }
}

TEST_CASE("the emulator catches a wrong mma.sync lane layout", "[codegen][gpu-emu][nvmma]") {
  // The kernel's A fragment with two elements swapped (rows g and g + 8 of
  // columns 2t, 2t + 1): the emulator, reading by the documented layout,
  // must then disagree with the interpreter.
  codegen::MmaLayoutMutation guard(1);
  codegen::NvidiaMacroTileThreshold every_gemm(0);
  HostTensor a = random_tensor(DType::f16, {32, 32}, -1, 1), b = random_tensor(DType::f16, {32, 32}, -1, 1);
  auto graph = trace_graph(types_of({a, b}), [](const std::vector<Tensor> &in) {
    return std::vector<Tensor>{ops::matmul(in[0], in[1])};
  });
  std::vector<HostTensor> expected = Interpreter::run(*graph, {a, b});
  std::vector<HostTensor> actual = run_emulated(*graph, {a, b}, "sm_90");
  REQUIRE(actual[0].numel() == expected[0].numel());
  double worst = 0;
  for (int64_t i = 0; i < actual[0].numel(); ++i)
    worst = std::max(worst, std::abs(actual[0].get_f64(i) - expected[0].get_f64(i)));
  CHECK(worst > 0.1);
}

TEST_CASE("f16/bf16 matmuls use mma.sync on sm_80/sm_90 (not on sm_75) and pass ptxas where installed", "[codegen][ptx][nvmma]") {
  codegen::NvidiaMacroTileThreshold every_gemm(0);
  for (DType d : {DType::f16, DType::bf16}) {
    auto graph = trace_graph({TensorType(d, {96, 256}), TensorType(d, {256, 80})}, [](const std::vector<Tensor> &in) {
      return std::vector<Tensor>{ops::matmul(in[0], in[1])};
    });
    driver::BackendOptions options;
    options.gpu = "sm_75,sm_80,sm_90";
    options.jobs = 1;
    PassTimer timer;
    driver::BackendOutput out =
        driver::find_backend("cuda")->compile(driver::plan_model(*graph, "mm", {}, gpu_plan_options()), options,
                                              {"ptx", "cubin"}, timer);
    std::string want = std::string("mma.sync.aligned.m16n8k16.row.col.f32.") + (d == DType::f16 ? "f16.f16" : "bf16.bf16") + ".f32";
    bool ptxas = !find_ptxas().empty();
    int ptx_seen = 0;
    for (const auto &[kind, text] : out.artifacts) {
      INFO(kind << " " << dtype_name(d));
      if (kind.rfind("ptx.", 0) == 0) {
        ++ptx_seen;
        // 1 x 2 blocks per warp x 2 instructions x K-tile 32 / 16, in the K loop.
        CHECK(count_occurrences(text, want) == (kind == "ptx.sm_75" ? 0u : 8u));
        CHECK(count_occurrences(text, "mma.sync") == (kind == "ptx.sm_75" ? 0u : 8u));
      }
      if (kind.rfind("cubin.", 0) == 0 && ptxas)
        CHECK(!text.empty());
    }
    CHECK(ptx_seen == 3);
  }
}

namespace {

driver::BackendOutput compile_asm(const Graph &graph) {
  driver::BackendOptions options;
  options.gpu = "gfx90a,gfx942,gfx1100";
  options.cpu = "";
  PassTimer timer;
  return driver::find_backend("amdgpu")->compile(driver::plan_model(graph, "mm", {}, gpu_plan_options()), options,
                                                 {"gpu-asm"}, timer);
}

/// Per kernel of an AMDGPU assembly file: its metadata field `field`.
std::map<std::string, int64_t> kernel_field(const std::string &text, const std::string &field) {
  std::map<std::string, int64_t> out;
  std::istringstream in(text);
  std::string line;
  // amdhsa.kernels entries list their keys alphabetically: collect the
  // values of `field` and the names in order, then pair them.
  std::vector<std::string> names;
  std::vector<int64_t> values;
  std::regex name_re("^\\s+\\.name:\\s+(\\S+)"), field_re("^\\s+\\." + field + ":\\s+(\\d+)");
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, name_re))
      names.push_back(m[1]);
    else if (std::regex_search(line, m, field_re))
      values.push_back(std::stoll(m[1]));
  }
  REQUIRE(names.size() == values.size());
  for (size_t i = 0; i < names.size(); ++i)
    out[names[i]] = values[i];
  return out;
}

} // namespace

TEST_CASE("matmul kernels use v_mfma on gfx90a/gfx942 and v_wmma on gfx1100 (f16), without spills", "[codegen][gpu][mfma]") {
  for (DType d : {DType::f32, DType::f16}) {
    auto graph = trace_graph({TensorType(d, {96, 256}), TensorType(d, {256, 80})}, [](const std::vector<Tensor> &in) {
      return std::vector<Tensor>{ops::matmul(in[0], in[1])};
    });
    driver::BackendOutput out = compile_asm(*graph);
    for (const auto &[kind, text] : out.artifacts) {
      if (kind.rfind("gpu-asm.", 0) != 0)
        continue;
      std::string arch = kind.substr(8);
      INFO(kind << " " << dtype_name(d));
      if (arch == "gfx1100")
        CHECK(count_occurrences(text, "v_wmma_f32_16x16x16_f16") == (d == DType::f16 ? 4u : 0u)); // 1 x 2 blocks x K-tile 32 / 16
      else
        CHECK(count_occurrences(text, "v_mfma_f32_16x16x") == (d == DType::f16 ? 8u : 16u)); // 2 x 2 blocks x K-tile (32 or 16) / K
      // The K loop stays a loop, double-buffered: one barrier per trip and
      // one before the store phase.
      CHECK(count_occurrences(text, "s_barrier") == 2);
      // Contiguous operands are staged with 128-bit loads.
      CHECK(count_occurrences(text, arch == "gfx1100" ? "global_load_b128" : "global_load_dwordx4") >= 2);
      for (const auto &[name, spills] : kernel_field(text, "vgpr_spill_count")) {
        INFO(name);
        CHECK(spills == 0);
      }
      for (const auto &[name, vgprs] : kernel_field(text, "vgpr_count")) {
        INFO(name);
        CHECK(vgprs <= 128);
      }
    }
  }
}

TEST_CASE("NVIDIA: only GEMMs that fill the GPU with macro-tiles take them (small ones the 16 x 16 kernel)", "[codegen][ptx][nvmma]") {
  // 4096 x 4096 f16: 4096 macro-tiles of 64 x 64, on mma.sync; the example
  // GPT's 128 x 768 (batch symbolic, counted as 1): 24, below the default 64.
  auto mma_count = [](Dim m, int64_t n) {
    auto graph = trace_graph({TensorType(DType::f16, {m, Dim(256)}), TensorType(DType::f16, {Dim(256), Dim(n)})},
                             [](const std::vector<Tensor> &in) { return std::vector<Tensor>{ops::matmul(in[0], in[1])}; });
    driver::BackendOptions options;
    options.gpu = "sm_90";
    options.jobs = 1;
    PassTimer timer;
    driver::BackendOutput out =
        driver::find_backend("cuda")->compile(driver::plan_model(*graph, "mm", {}, gpu_plan_options()), options,
                                              {"ptx"}, timer);
    for (const auto &[kind, text] : out.artifacts)
      if (kind == "ptx.sm_90")
        return count_occurrences(text, "mma.sync");
    FAIL("no ptx.sm_90 artifact");
    return size_t(0);
  };
  CHECK(codegen::nvidia_min_macro_tiles() == 64);
  CHECK(mma_count(Dim(4096), 4096) == 8u);
  CHECK(mma_count(Dim("batch") * Dim(128), 768) == 0u);
  codegen::NvidiaMacroTileThreshold every_gemm(0);
  CHECK(mma_count(Dim("batch") * Dim(128), 768) == 8u);
}
