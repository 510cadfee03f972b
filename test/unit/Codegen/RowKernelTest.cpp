// The CPU row kernels (Cpu/NormEmitter.h): softmax, log_softmax, layer_norm
// and rms_norm of f32 values kept whole by decompose({keep_rowwise}), one
// kernel each, against the reference interpreter (which computes in double
// and rounds once) on fresh random inputs: rows of 1 element and odd
// lengths, many rows and one, symbolic rows, several trailing axes, large
// means, -inf / -1e9 masks, NaN rows, and an elemental producer (scale and
// causal mask) fused into the softmax. Tolerance rtol 1e-5, atol 1e-6
// (f32 exp polynomial and f32 normalize arithmetic, a few ulp).
#include "CompiledRunner.h"

#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/Frontend/ModelLoader.h"
#include "maxc/Transforms/Decompose.h"

#include <cmath>
#include <limits>

using namespace maxc;
using namespace maxc::test;

namespace {

constexpr double kRtol = 1e-5, kAtol = 1e-6;

std::vector<Tensor> one(const Tensor &t) { return {t}; }

/// Every case of `ops` on `inputs`, compiled (row kernels) vs interpreter;
/// also checks that each is `kernels` kernels (one unless a producer is
/// stored) and that only those producers take workspace.
void check_rows(const std::vector<HostTensor> &inputs, const BuildFn &build, size_t kernels = 1) {
  std::unique_ptr<Graph> traced = trace_graph(types_of(inputs), build);
  auto lowered = decompose(*traced, {true});
  LoweringPlan plan = plan_lowering(*lowered);
  INFO(describe_plan(*lowered, plan));
  CHECK(plan.kernels.size() == kernels);
  CHECK(plan.slots.size() == kernels - 1);
  check_compiled(inputs, build, kRtol, kAtol);
}

} // namespace

TEST_CASE("row kernels: softmax and log_softmax, edge shapes", "[codegen][rows]") {
  for (std::vector<int64_t> shape : std::vector<std::vector<int64_t>>{{1}, {1, 1}, {7, 1}, {1, 37}, {3, 5, 17}, {2, 300}}) {
    INFO("shape " << shape.size() << "d, last " << shape.back());
    HostTensor x = random_tensor(DType::f32, shape, -8, 8);
    check_rows({x}, [](auto &in) { return one(ops::softmax(in[0])); });
    check_rows({x}, [](auto &in) { return one(ops::log_softmax(in[0], -1)); });
  }
}

TEST_CASE("row kernels: softmax special values", "[codegen][rows]") {
  constexpr double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  // Rows: -inf first then finite; all -inf (NaN, as the reference); a NaN;
  // +inf; -1e9 masks (a causal row); large values (no overflow).
  std::vector<std::vector<double>> rows = {{-inf, 1, 2, -inf, 3}, {-inf, -inf, -inf, -inf, -inf},
                                           {1, nan, 2, 3, 4},     {1, inf, 2, 3, 4},
                                           {0.5, -1e9, -1e9, -1e9, -1e9}, {80, 85, 88, 87, -80}};
  HostTensor x(DType::f32, {static_cast<int64_t>(rows.size()), 5});
  for (size_t r = 0; r < rows.size(); ++r)
    for (size_t c = 0; c < 5; ++c)
      x.set_f64(static_cast<int64_t>(r * 5 + c), rows[r][c]);
  check_rows({x}, [](auto &in) { return one(ops::softmax(in[0])); });
  check_rows({x}, [](auto &in) { return one(ops::log_softmax(in[0], 1)); });
}

TEST_CASE("row kernels: softmax special values in the vector lanes", "[codegen][rows]") {
  // Rows of 40 (two chunks of 16 lanes and a tail of 8): the max, the sum
  // and the merge of the lanes see each special value in a lane of its own.
  constexpr double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  constexpr int64_t cols = 40;
  std::vector<std::vector<std::pair<int64_t, double>>> specials = {
      {},                                              // finite only
      {{3, -inf}, {19, -inf}, {37, -inf}},             // -inf in lane 3 of both chunks and in the tail
      {{20, nan}},                                     // a NaN in the second chunk: the row is NaN
      {{18, inf}},                                     // +inf in lane 2: NaN
      {{33, inf}},                                     // +inf in the tail (lane 0): NaN
      {{5, 100}},                                      // a max that only lane 5 sees (exp(100 - 4) overflows)
      {{0, 30}, {17, 31}, {39, 29}},                   // the max in a later lane than the first
  };
  HostTensor x(DType::f32, {static_cast<int64_t>(specials.size()) + 1, cols});
  HostTensor base = random_tensor(DType::f32, {static_cast<int64_t>(specials.size()) + 1, cols}, -4, 4);
  for (int64_t i = 0; i < x.numel(); ++i)
    x.set_f64(i, base.get_f64(i));
  for (size_t r = 0; r < specials.size(); ++r)
    for (auto [c, v] : specials[r])
      x.set_f64(static_cast<int64_t>(r) * cols + c, v);
  for (int64_t c = 0; c < cols; ++c) // the last row all -inf: NaN, as the reference
    x.set_f64(static_cast<int64_t>(specials.size()) * cols + c, -inf);
  check_rows({x}, [](auto &in) { return one(ops::softmax(in[0])); });
  check_rows({x}, [](auto &in) { return one(ops::log_softmax(in[0], 1)); });
}

TEST_CASE("row kernels: a scaled, causally masked score fuses into the softmax", "[codegen][rows]") {
  for (int64_t s : {1, 9}) {
    HostTensor x = random_tensor(DType::f32, {2, s, s}, -30, 30);
    check_rows({x}, [s](auto &in) {
      Tensor rows = ops::iota({s, s}, 0, DType::i64), cols = ops::iota({s, s}, 1, DType::i64);
      Tensor masked = ops::full(-1e9, DType::f32);
      return one(ops::softmax(ops::where(ops::greater_equal(rows, cols), in[0] * 0.125, masked), -1));
    }, 2); // the [s, s] mask is stored once (not recomputed per batch), as without row kernels
  }
}

TEST_CASE("row kernels: layer_norm and rms_norm", "[codegen][rows]") {
  for (std::vector<int64_t> shape : std::vector<std::vector<int64_t>>{{1}, {3, 1}, {1, 33}, {4, 3, 64}, {2, 257}}) {
    INFO("shape " << shape.size() << "d, last " << shape.back());
    int64_t d = shape.back();
    HostTensor x = random_tensor(DType::f32, shape, -3, 3);
    HostTensor w = random_tensor(DType::f32, {d}), b = random_tensor(DType::f32, {d});
    check_rows({x, w, b}, [](auto &in) { return one(ops::layer_norm(in[0], in[1], in[2])); });
    check_rows({x, w}, [](auto &in) { return one(ops::layer_norm(in[0], in[1], std::nullopt, 1e-2)); });
    check_rows({x, w}, [](auto &in) { return one(ops::rms_norm(in[0], in[1])); });
  }
  // A large mean next to a small spread (E[x^2] - mean^2 in double), and a
  // constant row (variance 0: the result is bias).
  HostTensor x = random_tensor(DType::f32, {3, 96}, 999, 1001);
  for (int64_t c = 0; c < 96; ++c)
    x.set_f64(2 * 96 + c, 5.0);
  HostTensor w = random_tensor(DType::f32, {96}), b = random_tensor(DType::f32, {96});
  check_rows({x, w, b}, [](auto &in) { return one(ops::layer_norm(in[0], in[1], in[2])); });
  // Several trailing axes, and a fused producer.
  HostTensor y = random_tensor(DType::f32, {2, 3, 5}), w2 = random_tensor(DType::f32, {3, 5});
  check_rows({y, w2}, [](auto &in) { return one(ops::layer_norm(ops::gelu(in[0]), in[1], std::nullopt)); });
  check_rows({y, w2}, [](auto &in) { return one(ops::rms_norm(in[0] * 3.0, in[1], 1e-6)); });
}

TEST_CASE("row kernels: symbolic rows", "[codegen][rows]") {
  auto g = std::make_unique<Graph>("g", std::vector<TensorType>{TensorType(DType::f32, {Dim("n"), 24}),
                                                                 TensorType(DType::f32, {24})});
  {
    GraphRealizationContext ctx(*g);
    Tensor x = Tensor::from_graph_value(g->inputs()[0]), w = Tensor::from_graph_value(g->inputs()[1]);
    g->output({ops::softmax(x), ops::layer_norm(x, w, std::nullopt), ops::rms_norm(x, w)});
  }
  HostTensor w = random_tensor(DType::f32, {24});
  for (int64_t n : {0, 1, 5}) {
    INFO("n = " << n);
    std::vector<HostTensor> in = {random_tensor(DType::f32, {n, 24}, -4, 4), w};
    auto expected = Interpreter::run(*g, in);
    auto actual = run_compiled(*g, in);
    for (size_t i = 0; i < expected.size(); ++i)
      MAXC_REQUIRE_CLOSE(actual[i], expected[i], kRtol, kAtol);
  }
}

TEST_CASE("row kernels: other axes and dtypes are decomposed", "[codegen][rows]") {
  auto g = trace_graph({TensorType(DType::f32, {4, 6}), TensorType(DType::f16, {4, 6})}, [](auto &in) {
    return std::vector<Tensor>{ops::softmax(in[0], 0), ops::softmax(in[1]), ops::softmax(in[0], 1)};
  });
  auto lowered = decompose(*g, {true});
  int whole = 0;
  for (const Node &n : lowered->nodes())
    whole += n.op == "softmax";
  CHECK(whole == 1); // only the f32 softmax over the last axis
  CHECK(decompose(*g)->nodes().size() > lowered->nodes().size());
}

TEST_CASE("row kernels: the GPT example's block plan", "[codegen][rows][plan]") {
  LoadOptions options;
  options.synthesize_weights = true; // structure only
  DiagnosticEngine diagnostics;
  LoadedModel model = load_model(std::string(MAXC_SOURCE_DIR) + "/examples/gpt/model.json", options, diagnostics);
  INFO(diagnostics.to_text());
  REQUIRE(model.graph);
  auto block_kernels = [](const Graph &lowered) {
    REQUIRE(lowered.subgraphs().size() == 1);
    return plan_lowering(*lowered.subgraphs().begin()->second).kernels.size();
  };
  // Decomposed (GPU backends): each layer norm is 5 kernels, the softmax 4.
  CHECK(block_kernels(*decompose(*model.graph)) == 25);
  // CPU: each norm and the softmax (with the scale and causal mask fused
  // into it) is one kernel: 25 - 2*4 - 3.
  auto lowered = decompose(*model.graph, {true});
  lowered->verify();
  CHECK(block_kernels(*lowered) == 14);
}
