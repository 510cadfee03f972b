// Wave-level reductions (lib/Codegen/Gpu/GpuWaveReduce.h): on AMD GPUs a
// reduction's or row kernel's partials are combined by a ds_bpermute
// butterfly inside each wave (64 lanes on gfx942, 32 on gfx1100), then the
// waves' totals through LDS. The emulator runs ds_bpermute with its lane
// semantics (lane l reads lane (addr / 4) mod wave), so a wrong lane pattern
// in the kernel gives wrong results here. Sizes cover a workgroup smaller
// than a wave (5 elements: 8 work-items) and several waves (200: 256).
//
// Tolerances: f32 sums accumulate in f32 (the reference in double), in
// another order (per lane, then the butterfly, then the waves): at 200
// elements in [-2, 2] |a - e| <= 1e-5 + 1e-5 * |e|; integers and max/min
// exact.
#include "EmulatedRunner.h"

#include "maxc/Codegen/GpuModelCompiler.h"
#include "maxc/Codegen/GpuTarget.h"
#include "maxc/Codegen/Jit.h"
#include "maxc/Driver/Backend.h"
#include "maxc/Driver/Compile.h"
#include "maxc/Interpreter/Interpreter.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <catch2/catch.hpp>

using namespace maxc;
using namespace maxc::test;

namespace {

} // namespace

TEST_CASE("wave-level reductions equal the reference on the emulator (wave64 and wave32)", "[codegen][gpu]") {
  std::vector<HostTensor> inputs;
  for (int64_t length : {5, 200})
    inputs.insert(inputs.end(), {random_tensor(DType::f32, {3, length}, -2, 2),
                                 random_tensor(DType::i32, {3, length}, -1000, 1000),
                                 random_tensor(DType::f32, {length, 3}, -2, 2)});
  auto graph = trace_graph(types_of(inputs), [](const std::vector<Tensor> &in) {
    // Last-axis reductions (a row kernel: softmax) and reductions of their
    // own (over axis 0, and of integers), at both lengths.
    std::vector<Tensor> out;
    for (size_t i = 0; i < in.size(); i += 3)
      for (const Tensor &t : {ops::softmax(in[i], -1), ops::sum(in[i], {1}), ops::max(in[i], {1}),
                              ops::min(in[i + 1], {1}), ops::sum(in[i + 1], {1}), ops::mean(in[i + 2], {0}),
                              ops::prod(ops::exp(ops::div(in[i + 2], ops::full(50.0, DType::f32))), {0})})
        out.push_back(t);
    return out;
  });
  std::vector<HostTensor> expected = Interpreter::run(*graph, inputs);
  for (const std::string arch : {"gfx942", "gfx1100"}) {
    INFO(arch);
    std::vector<HostTensor> actual = run_emulated(*graph, inputs, arch);
    REQUIRE(actual.size() == expected.size());
    for (size_t i = 0; i < actual.size(); ++i) {
      INFO("output " << i);
      MAXC_REQUIRE_CLOSE(actual[i], expected[i], 1e-5, 1e-5);
    }
  }
}

TEST_CASE("row kernels reduce with DPP, ds_swizzle and ds_bpermute, two barriers per reduction", "[codegen][gpu]") {
  auto graph = trace_graph({TensorType(DType::f32, {Dim("batch"), 256})}, [](const std::vector<Tensor> &in) {
    return std::vector<Tensor>{ops::softmax(in[0], -1)};
  });
  driver::BackendOptions options;
  options.gpu = "gfx942,gfx1100";
  options.cpu = "";
  PassTimer timer;
  driver::BackendOutput out =
      driver::find_backend("amdgpu")->compile(driver::plan_model(*graph, "rows", {}, gpu_plan_options()), options,
                                              {"gpu-asm"}, timer);
  size_t seen = 0;
  for (const auto &[kind, text] : out.artifacts) {
    if (kind.rfind("gpu-asm.", 0) != 0)
      continue;
    ++seen;
    INFO(kind);
    // softmax: max, then sum of exp, over 256 work-items per row. Per
    // reduction 2 quad_perm, row_half_mirror and row_mirror DPP steps (folded
    // into the max/add), one ds_swizzle (xor 16) and on wave64 one
    // ds_bpermute (xor 32). f32 max and the f32 sum (f32 accumulation) are
    // one 32-bit word each.
    bool wave64 = kind == "gpu-asm.gfx942";
    CHECK(count_occurrences(text, "quad_perm:[1,0,3,2]") == 2);
    CHECK(count_occurrences(text, "quad_perm:[2,3,0,1]") == 2);
    CHECK(count_occurrences(text, " row_half_mirror") == 2);
    CHECK(count_occurrences(text, " row_mirror") == 2);
    CHECK(count_occurrences(text, "ds_swizzle_b32") == 2);
    CHECK(count_occurrences(text, "ds_bpermute_b32") == (wave64 ? 2u : 0u));
    CHECK(count_occurrences(text, "_f64") == 0); // no double arithmetic left in an f32 softmax
    // Per reduction a barrier before the waves' totals are stored and one
    // before they are read, instead of one per tree level (8 at 256
    // work-items): 7 in all (21 with the LDS tree).
    CHECK(count_occurrences(text, "s_barrier") == 7);
  }
  CHECK(seen == 2);
}

namespace {

/// Runs the exchange steps on a host wave whose lane l holds the set {l}
/// (a bit), combining by union, through the decoding the emulator uses:
/// true when every lane ends with exactly the lanes of its aligned run of
/// `width`.
bool reduces(const std::vector<WaveExchange> &steps, unsigned width, unsigned wave) {
  std::vector<uint64_t> v(wave);
  for (unsigned l = 0; l < wave; ++l)
    v[l] = uint64_t(1) << l;
  for (const WaveExchange &step : steps) {
    std::vector<uint64_t> before = v;
    for (unsigned l = 0; l < wave; ++l)
      v[l] = before[l] | before[wave_exchange_source(step, l, wave) % wave];
  }
  for (unsigned l = 0; l < wave; ++l) {
    uint64_t run = (width == 64 ? ~uint64_t(0) : ((uint64_t(1) << width) - 1)) << (l / width * width);
    if (v[l] != run)
      return false;
  }
  return true;
}

} // namespace

TEST_CASE("wave reduction steps: decoded encodings reduce every run, mutated ones do not", "[codegen][gpu]") {
  for (unsigned wave : {32u, 64u})
    for (unsigned width = 2; width <= wave; width *= 2) {
      INFO("wave " << wave << " width " << width);
      std::vector<WaveExchange> steps = wave_reduce_exchanges(width);
      CHECK(steps.size() == static_cast<size_t>(__builtin_ctz(width)));
      CHECK(reduces(steps, width, wave));
    }
  // Mutations the emulator must catch (a wrong control word in the kernel):
  // each makes some lane miss part of its run.
  std::vector<WaveExchange> steps = wave_reduce_exchanges(64);
  REQUIRE(steps.size() == 6);
  auto mutated = [&](size_t at, WaveExchange by) {
    std::vector<WaveExchange> m = steps;
    m[at] = by;
    return m;
  };
  CHECK_FALSE(reduces(mutated(0, {"dpp", 0xE4}), 64, 64));           // quad_perm identity [0,1,2,3]
  CHECK_FALSE(reduces(mutated(1, {"dpp", 0xB1}), 64, 64));           // xor 1 twice, never xor 2
  CHECK_FALSE(reduces(mutated(2, {"dpp", 0x140}), 64, 64));          // row_mirror for the half mirror
  CHECK_FALSE(reduces(mutated(4, {"swizzle", 0x8 << 10 | 0x1f}), 64, 64)); // swizzle xor 8, not 16
  CHECK_FALSE(reduces(mutated(4, {"swizzle", 0x10 << 5 | 0x1f}), 64, 64)); // or 16, not xor: one half only
  CHECK_FALSE(reduces(mutated(5, {"bpermute", 16}), 64, 64));        // bpermute xor 16, not 32
  CHECK_FALSE(reduces(mutated(3, {"dpp", 0x141}), 64, 64));          // the half mirror twice
  // (Every step is an xor of the lane within its run — mirrors are xor 15
  // and xor 7 — so the order of the steps does not matter.)
}
