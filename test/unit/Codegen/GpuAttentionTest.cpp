// Fused attention on the GPU (lib/Codegen/Gpu/GpuAttention.h): the traced
// scaled dot-product pattern is one kernel (no QK^T, softmax and PV
// launches, no [Sq, Sk] buffer), equal to the reference interpreter on the
// emulator for odd sequence lengths (a partial last query and key block),
// head dims 32, 64 and 80, causal (skipped key blocks, and a fill too large
// to skip), bool masks in both spellings and additive masks, at batch dims
// of one and two, f32, f16 and bf16; its code keeps the register budget on gfx942 (wave64) and
// gfx1100 (wave32).
//
// Tolerances: scores, softmax and the weighted sum accumulate in f32 (the
// reference in double), the softmax online over key blocks of 16: at these
// sizes |a - e| <= 1e-5 + 1e-4 * |e|. f16/bf16: the reference rounds the
// scores, the scaled scores and the probabilities to the dtype (the kernel
// only its result): 1e-2 + 1e-2 * |e| (f16), 4e-2 + 4e-2 * |e| (bf16).
#include "EmulatedRunner.h"

#include "maxc/Driver/Backend.h"
#include "maxc/Interpreter/Interpreter.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>

using namespace maxc;
using namespace maxc::test;

namespace {

enum class Mask { none, causal, causal_small_fill, keep, masked_fill, additive };

struct Case {
  std::vector<int64_t> batch;
  int64_t sq, sk, d, dv;
  Mask mask;
  DType dtype = DType::f32;
};

std::string describe(const Case &c) {
  std::string s = "sq " + std::to_string(c.sq) + " sk " + std::to_string(c.sk) + " d " + std::to_string(c.d) +
                  " dv " + std::to_string(c.dv) + " mask " + std::to_string(static_cast<int>(c.mask)) +
                  " " + std::string(dtype_name(c.dtype));
  return s;
}

/// q, k, v (and a mask input where the case has one) and the graph of
/// softmax(q @ k^T * scale, masked) @ v.
std::unique_ptr<Graph> attention_graph(const Case &c, std::vector<HostTensor> &inputs) {
  auto with = [&](int64_t a, int64_t b) {
    std::vector<int64_t> s = c.batch;
    s.push_back(a);
    s.push_back(b);
    return s;
  };
  inputs = {random_tensor(c.dtype, with(c.sq, c.d)), random_tensor(c.dtype, with(c.sk, c.d)),
            random_tensor(c.dtype, with(c.sk, c.dv))};
  if (c.mask == Mask::keep || c.mask == Mask::masked_fill)
    inputs.push_back(random_tensor(DType::boolean, {c.sq, c.sk}));
  if (c.mask == Mask::additive) // a padding mask: one row, broadcast over queries and batch
    inputs.push_back(random_tensor(c.dtype, {1, c.sk}, -3, 0));
  double scale = 1 / std::sqrt(static_cast<double>(c.d));
  return trace_graph(types_of(inputs), [&](const std::vector<Tensor> &in) {
    DType dt = c.dtype;
    Tensor s = ops::mul(ops::matmul(in[0], in[1], false, true), ops::full(scale, dt));
    double inf = std::numeric_limits<double>::infinity();
    switch (c.mask) {
    case Mask::none: break;
    case Mask::causal:
    case Mask::causal_small_fill: {
      Tensor keep = ops::greater_equal(ops::iota({c.sq, c.sk}, 0), ops::iota({c.sq, c.sk}, 1));
      s = ops::where(keep, s, ops::full(c.mask == Mask::causal ? -inf : -30.0, dt));
      break;
    }
    case Mask::keep: s = ops::where(in[3], s, ops::full(-1e9, dt)); break;
    case Mask::masked_fill: s = ops::where(in[3], ops::full(-1e4, dt), s); break; // torch's spelling
    case Mask::additive: s = ops::add(s, in[3]); break;
    }
    return std::vector<Tensor>{ops::matmul(ops::softmax(s, -1), in[2])};
  });
}

driver::PlannedModel gpu_planned(const Graph &graph) {
  const driver::Backend *amdgpu = driver::find_backend("amdgpu");
  return driver::plan_model(graph, "attn", amdgpu->decompose_options(), amdgpu->plan_options());
}

} // namespace

TEST_CASE("fused attention on the GPU equals the reference on the emulator", "[codegen][gpu][gpuattention]") {
  const Case cases[] = {
      {{2}, 19, 19, 32, 32, Mask::causal},             // skipped key blocks, -inf fill
      {{1, 2}, 17, 23, 64, 64, Mask::none},            // sq != sk, two batch dims
      {{2}, 21, 21, 80, 80, Mask::causal_small_fill},  // causal, nothing skipped
      {{1}, 18, 33, 32, 48, Mask::keep},               // bool mask, dv != d
      {{1}, 9, 20, 80, 40, Mask::masked_fill},         // where(mask, fill, s)
      {{2}, 5, 37, 64, 32, Mask::additive},            // float mask broadcast
      {{2}, 19, 19, 64, 64, Mask::causal, DType::f16}, // f16 operands, f32 accumulation
      {{1}, 9, 20, 32, 32, Mask::masked_fill, DType::f16},
      {{1}, 7, 18, 32, 32, Mask::additive, DType::bf16},
  };
  for (const Case &c : cases) {
    INFO(describe(c));
    std::vector<HostTensor> inputs;
    std::unique_ptr<Graph> graph = attention_graph(c, inputs);
    // One attention node survives decomposition (the pattern is recognized).
    driver::PlannedModel planned = gpu_planned(*graph);
    size_t attention = 0, softmax_parts = 0;
    for (const Node &n : planned.lowered->nodes()) {
      attention += n.op == "attention";
      softmax_parts += n.op == "exp" || n.op == "max" || n.op == "sum";
    }
    CHECK(attention == 1);
    CHECK(softmax_parts == 0);
    std::vector<HostTensor> expected = Interpreter::run(*graph, inputs);
    // wave size does not change the kernel; two arches for one case only (emulator time)
    for (const char *arch : {"gfx942", "gfx1100"}) {
      if (std::string(arch) == "gfx1100" && &c != &cases[0])
        continue;
      INFO(arch);
      std::vector<HostTensor> actual = run_emulated(*graph, inputs, arch);
      REQUIRE(actual.size() == 1);
      if (c.dtype == DType::f32)
        MAXC_REQUIRE_CLOSE(actual[0], expected[0], 1e-4, 1e-5);
      else // the reference rounds scores and probabilities to f16/bf16 on the way; the kernel once
        MAXC_REQUIRE_CLOSE(actual[0], expected[0], c.dtype == DType::f16 ? 1e-2 : 4e-2, c.dtype == DType::f16 ? 1e-2 : 4e-2);
    }
  }
}

TEST_CASE("fused attention is one launch within the register budget on gfx942 and gfx1100",
          "[codegen][gpu][gpuattention]") {
  std::vector<HostTensor> inputs;
  std::unique_ptr<Graph> graph = attention_graph({{2}, 21, 21, 80, 80, Mask::causal}, inputs);
  driver::BackendOptions options;
  options.gpu = "gfx942,gfx1100";
  options.cpu = "";
  PassTimer timer;
  std::string manifest =
      driver::find_backend("amdgpu")->compile(gpu_planned(*graph), options, {"obj"}, timer).manifest.extra_json;
  INFO(manifest);
  CHECK(count_occurrences(manifest, "\"kind\":\"attention\"") == 2); // one kernel per arch
  CHECK(count_occurrences(manifest, "\"launches\":1,") == 2);
  CHECK(count_occurrences(manifest, "\"vgpr_spill_count\":0,") == 2);
  CHECK(count_occurrences(manifest, "\"scratch_bytes\":0,") == 2);
  for (size_t at = manifest.find("\"vgpr_count\":"); at != std::string::npos;
       at = manifest.find("\"vgpr_count\":", at + 1))
    CHECK(std::stoi(manifest.substr(at + 13)) <= 128);
}

TEST_CASE("fused attention lowers to NVPTX as one kernel (ptxas accepts it where installed)",
          "[codegen][gpu][gpuattention]") {
  std::vector<HostTensor> inputs;
  std::unique_ptr<Graph> graph = attention_graph({{2}, 21, 21, 80, 80, Mask::keep}, inputs);
  std::string ptx = compile_gpu_kernels_ptx(*graph, "attn", "sm_80");
  CHECK(count_occurrences(ptx, ".entry") == 1); // the mask input read in place: no other kernel
  CHECK(ptx.find("bar.sync") != std::string::npos);
  CHECK(ptx.find(".shared") != std::string::npos);
  if (std::string ptxas = find_ptxas(); !ptxas.empty()) { // CUDA is no dependency: skipped without it
    TempDir dir;
    std::ofstream(dir.path + "/attn.ptx") << ptx;
    CHECK(std::system((ptxas + " -arch=sm_80 " + dir.path + "/attn.ptx -o " + dir.path + "/attn.cubin").c_str()) == 0);
  }
}
