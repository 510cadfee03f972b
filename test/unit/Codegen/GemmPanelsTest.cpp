// GEMM weights packed at compile time in the microkernel's panel order
// (Cpu/GemmPanels.h) against the reference interpreter on fresh random
// inputs, and bit for bit against the same GEMM with B as a graph input
// (packed at run time or read in place: the same multiply-adds in the same
// order): root constants at odd sizes (partial last panel, two K blocks,
// M below one tile, 4-row and one-row remainders), with an epilogue;
// subgraph parameters bound to different constants at two call sites; a
// parameter with another reader, or one a call site binds to a graph input,
// stays unpacked. 1, 2 and 3 threads give the same bits; 16- and 8-lane
// kernels (panels of 32 and 16 columns).
//
// Tolerance (rtol 1e-4, atol 2e-4): f32 sums over K <= 300 of products of
// values in [-1, 1] vs the reference's double.
#include "CompiledRunner.h"

#include "maxc/Realization/GraphRealizationContext.h"

using namespace maxc;
using namespace maxc::test;

namespace {

/// The number of GEMM task functions in `graph`'s module that read B packed
/// at compile time.
size_t packed_gemm_tasks(const Graph &graph) {
  return count_model_functions(
      graph, [](llvm::StringRef name) { return name.starts_with("m.gemm_panel.") && name.contains(".packed"); });
}

/// The number of packed GEMM task functions whose panels hold `dtype` (f16 or bf16).
size_t narrow_gemm_tasks(const Graph &graph, DType dtype) {
  std::string tag = ".packed." + std::string(dtype_name(dtype));
  return count_model_functions(graph, [&](llvm::StringRef name) {
    return name.starts_with("m.gemm_panel.") && name.contains(tag);
  });
}

/// Uniform values in [-1, 1] that are exactly `dtype` (f16 or bf16), as f32;
/// a bf16 one also holds 2^-30, which no f16 does (below its subnormals).
HostTensor exact_values(DType dtype, std::vector<int64_t> shape) {
  HostTensor narrow = random_tensor(dtype, shape, -1, 1), out(DType::f32, shape);
  for (int64_t i = 0; i < out.numel(); ++i)
    out.set_f64(i, narrow.get_f64(i));
  if (dtype == DType::bf16)
    out.set_f64(0, std::ldexp(1.0, -30));
  return out;
}

void check_close(const std::vector<HostTensor> &got, const std::vector<HostTensor> &expected) {
  for (size_t i = 0; i < expected.size(); ++i) {
    std::string m = compare(got[i], expected[i], 1e-4, 2e-4);
    INFO("output " << i << ": " << m);
    REQUIRE(m.empty());
  }
}

} // namespace

TEST_CASE("GEMM with constant B packed at compile time: odd sizes, epilogue, same bits as B at run time",
          "[codegen][gemm][gemm-panels]") {
  Dim m("m");
  for (auto [K, N] : std::vector<std::pair<int64_t, int64_t>>{{33, 70}, {300, 10}, {5, 64}}) {
    HostTensor w = random_tensor(DType::f32, {K, N}, -1, 1), bias = random_tensor(DType::f32, {N}, -1, 1);
    auto body = [&](const Tensor &x, const Tensor &b) {
      return std::vector<Tensor>{ops::matmul(x, b), ops::relu(ops::matmul(x, b) + Tensor::from_host(bias))};
    };
    auto constant = trace_graph({TensorType(DType::f32, {m, K})},
                                [&](auto &x) { return body(x[0], Tensor::from_host(w)); });
    auto input = trace_graph({TensorType(DType::f32, {m, K}), TensorType(DType::f32, {K, N})},
                             [&](auto &x) { return body(x[0], x[1]); });
    INFO("K " << K << " N " << N);
    CHECK(packed_gemm_tasks(*constant) >= 1);
    CHECK(packed_gemm_tasks(*input) == 0);
    JitCompiledGraph packed(*constant), unpacked(*input);
    for (int64_t M : {1, 5, 7, 64, 100}) {
      INFO("M " << M);
      HostTensor x = random_tensor(DType::f32, {M, K}, -1, 1);
      std::vector<HostTensor> one = packed.run_threads({x}, 1);
      check_close(one, Interpreter::run(*constant, {x}));
      for (int threads : {2, 3})
        REQUIRE(bitwise_mismatch(packed.run_threads({x}, threads), one).empty());
      REQUIRE(bitwise_mismatch(unpacked.run_threads({x, w}, 1), one).empty());
    }
    // 8-lane kernels (AVX2): panels of 16 columns.
    if (K == 33) {
      JitCompiledGraph packed8(*constant, "haswell"), unpacked8(*input, "haswell");
      HostTensor x = random_tensor(DType::f32, {7, K}, -1, 1);
      std::vector<HostTensor> one = packed8.run_threads({x}, 1);
      check_close(one, Interpreter::run(*constant, {x}));
      REQUIRE(bitwise_mismatch(unpacked8.run_threads({x, w}, 1), one).empty());
      REQUIRE(bitwise_mismatch(packed8.run_threads({x}, 2), one).empty());
    }
  }
}

TEST_CASE("GEMM weights of a subgraph packed per call site", "[codegen][gemm][gemm-panels]") {
  // Two calls of one block (linear + bias + relu: decompose passes the
  // weight transposed), each binding the weight to a constant of its own:
  // packed. Not packed: the second call binds a graph input; the block
  // multiplies by the weight as it is and also sums it (another reader).
  for (int variant : {0, 1, 2}) {
    INFO("variant " << variant);
    auto block = [variant](GraphRealizationContext &, const std::vector<Tensor> &args, const NamedTensors &p) {
      if (variant == 2)
        return TensorTree(ops::matmul(args[0], p.at("w")) + ops::sum(p.at("w"), {0}) + p.at("b"));
      return TensorTree(ops::relu(ops::linear(args[0], p.at("w"), p.at("b"))));
    };
    Graph graph("g", {TensorType(DType::f32, {9, 36}), TensorType(DType::f32, {36, 36})});
    {
      GraphRealizationContext ctx(graph);
      Tensor y = Tensor::from_graph_value(graph.inputs()[0]);
      for (int i = 0; i < 2; ++i) {
        CallOptions options;
        options.instance = "layers." + std::to_string(i);
        options.name = "Block";
        Tensor w = variant == 1 && i == 1 ? Tensor::from_graph_value(graph.inputs()[1])
                                          : Tensor::from_host(random_tensor(DType::f32, {36, 36}, -1, 1));
        y = ctx.call(options, block, {y}, {{"w", w}, {"b", Tensor::from_host(random_tensor(DType::f32, {36}, -1, 1))}})
                .tensor();
      }
      graph.output({y});
    }
    REQUIRE(graph.subgraphs().size() == 1);
    CHECK(packed_gemm_tasks(graph) == (variant == 0 ? 1u : 0u));
    std::vector<HostTensor> in = {random_tensor(DType::f32, {9, 36}, -1, 1), random_tensor(DType::f32, {36, 36}, -1, 1)};
    check_close(run_compiled_threads(graph, in), Interpreter::run(graph, in));
  }
}

TEST_CASE("GEMM weights exact in f16 or bf16 packed in 16 bits: the same bits as f32", "[codegen][gemm][gemm-panels][f16]") {
  // f32 constants whose values are all f16 (bf16) — an f16 model's widened
  // weights — are packed in 16 bits and widened as the microkernel loads
  // them: the same products and sums as B given at run time in f32.
  Dim m("m");
  for (DType dtype : {DType::f16, DType::bf16})
    for (auto [K, N] : std::vector<std::pair<int64_t, int64_t>>{{33, 70}, {300, 10}}) {
      INFO(dtype_name(dtype) << " K " << K << " N " << N);
      HostTensor w = exact_values(dtype, {K, N}), bias = random_tensor(DType::f32, {N}, -1, 1);
      auto body = [&](const Tensor &x, const Tensor &b) {
        return std::vector<Tensor>{ops::matmul(x, b), ops::relu(ops::matmul(x, b) + Tensor::from_host(bias))};
      };
      auto constant = trace_graph({TensorType(DType::f32, {m, K})},
                                  [&](auto &x) { return body(x[0], Tensor::from_host(w)); });
      auto input = trace_graph({TensorType(DType::f32, {m, K}), TensorType(DType::f32, {K, N})},
                               [&](auto &x) { return body(x[0], x[1]); });
      CHECK(narrow_gemm_tasks(*constant, dtype) >= 1);
      CHECK(narrow_gemm_tasks(*constant, dtype == DType::f16 ? DType::bf16 : DType::f16) == 0);
      JitCompiledGraph packed(*constant), unpacked(*input);
      for (int64_t M : {1, 5, 7, 64}) {
        INFO("M " << M);
        HostTensor x = random_tensor(DType::f32, {M, K}, -1, 1);
        std::vector<HostTensor> one = packed.run_threads({x}, 1);
        check_close(one, Interpreter::run(*constant, {x}));
        REQUIRE(bitwise_mismatch(packed.run_threads({x}, 2), one).empty());
        REQUIRE(bitwise_mismatch(unpacked.run_threads({x, w}, 1), one).empty());
      }
      // 8-lane kernels (AVX2 with F16C: vcvtph2ps ymm).
      JitCompiledGraph packed8(*constant, "haswell"), unpacked8(*input, "haswell");
      HostTensor x = random_tensor(DType::f32, {7, K}, -1, 1);
      REQUIRE(bitwise_mismatch(unpacked8.run_threads({x, w}, 1), packed8.run_threads({x}, 1)).empty());
    }
  // Not exact (one value off by an f32 ulp): f32 panels.
  HostTensor w = exact_values(DType::f16, {40, 40});
  w.data_as<float>()[7] = std::nextafter(w.data_as<float>()[7], 2.0f);
  auto graph = trace_graph({TensorType(DType::f32, {m, 40})},
                           [&](auto &x) { return std::vector<Tensor>{ops::matmul(x[0], Tensor::from_host(w))}; });
  CHECK(packed_gemm_tasks(*graph) >= 1);
  CHECK(narrow_gemm_tasks(*graph, DType::f16) + narrow_gemm_tasks(*graph, DType::bf16) == 0);
}

TEST_CASE("An f16 model's GEMM weights: 16-bit panels per call site, f32 where a call's are not",
          "[codegen][gemm][gemm-panels][f16]") {
  // Two calls of one block (linear + bias + relu): an f16 model (the
  // precision policy widens its weights, exact in f16), then an f32 model
  // whose second call's weight is not exact in f16: the parameter's panels
  // must be one type for both calls, so f32.
  for (bool mixed : {false, true}) {
    INFO("mixed " << mixed);
    DType dt = mixed ? DType::f32 : DType::f16;
    auto block = [](GraphRealizationContext &, const std::vector<Tensor> &args, const NamedTensors &p) {
      return TensorTree(ops::relu(ops::linear(args[0], p.at("w"), p.at("b"))));
    };
    Graph graph("g", {TensorType(dt, {9, 36})});
    {
      GraphRealizationContext ctx(graph);
      Tensor y = Tensor::from_graph_value(graph.inputs()[0]);
      for (int i = 0; i < 2; ++i) {
        CallOptions options;
        options.instance = "layers." + std::to_string(i);
        options.name = "Block";
        HostTensor w = mixed && i == 1 ? random_tensor(DType::f32, {36, 36}, -1, 1) : random_tensor(dt, {36, 36}, -1, 1);
        if (mixed && i == 0)
          w = exact_values(DType::f16, {36, 36});
        y = ctx.call(options, block, {y}, {{"w", Tensor::from_host(w)}, {"b", Tensor::from_host(random_tensor(dt, {36}, -1, 1))}})
                .tensor();
      }
      graph.output({y});
    }
    REQUIRE(graph.subgraphs().size() == 1);
    CHECK(packed_gemm_tasks(graph) == 1);
    CHECK(narrow_gemm_tasks(graph, DType::f16) == (mixed ? 0u : 1u));
    std::vector<HostTensor> in = {random_tensor(dt, {9, 36}, -1, 1)};
    std::vector<HostTensor> got = run_compiled_threads(graph, in), expected = cpu_reference(graph, in);
    if (mixed) {
      check_close(got, expected);
    } else { // f16 outputs: the f32 results rounded once
      MAXC_REQUIRE_CLOSE(got[0], expected[0], 2e-3, 2e-3);
    }
  }
}
