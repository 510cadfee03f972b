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

TEST_CASE("row kernels reduce with ds_bpermute, two barriers per reduction", "[codegen][gpu]") {
  auto graph = trace_graph({TensorType(DType::f32, {Dim("batch"), 256})}, [](const std::vector<Tensor> &in) {
    return std::vector<Tensor>{ops::softmax(in[0], -1)};
  });
  driver::BackendOptions options;
  options.gpu = "gfx942,gfx1100";
  options.cpu = "";
  PassTimer timer;
  driver::BackendOutput out =
      driver::find_backend("amdgpu")->compile(driver::plan_model(*graph, "rows"), options, {"gpu-asm"}, timer);
  size_t seen = 0;
  for (const auto &[kind, text] : out.artifacts) {
    if (kind.rfind("gpu-asm.", 0) != 0)
      continue;
    ++seen;
    INFO(kind);
    // softmax: max, then sum of exp, over 256 work-items per row. Wave64:
    // 6 exchange steps per reduction; wave32: 5. f32 max and the f32 sum
    // (f32 accumulation) are one 32-bit word each.
    bool wave64 = kind == "gpu-asm.gfx942";
    CHECK(count_occurrences(text, "ds_bpermute_b32") == (wave64 ? 6u * 2 : 5u * 2));
    CHECK(count_occurrences(text, "_f64") == 0); // no double arithmetic left in an f32 softmax
    // Per reduction a barrier before the waves' totals are stored and one
    // before they are read, instead of one per tree level (8 at 256
    // work-items): 7 in all (21 with the LDS tree).
    CHECK(count_occurrences(text, "s_barrier") == 7);
  }
  CHECK(seen == 2);
}
