// Fused attention: Transforms/FuseAttention recognizes the JSON (matmul
// transpose_b, mul by a scalar, where with a causal mask) and ONNX (matmul
// of a transpose, div by a scalar, additive mask) spellings; the CPU runs
// the `attention` op as one flash-style kernel (Cpu/AttentionEmitter) and
// must match the interpreter on the traced pattern (rtol 1e-4, atol 1e-5:
// f32 dot products and exp vs double); the op's reference kernel and its
// decomposition (what GPU backends get) must agree, also under GPU
// emulation.
#include "CompiledRunner.h"
#include "EmulatedRunner.h"

#include "maxc/Codegen/CompiledRun.h"
#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/Frontend/ModelLoader.h"
#include "maxc/Transforms/Decompose.h"

using namespace maxc;
using namespace maxc::test;

namespace {

constexpr double kRtol = 1e-4, kAtol = 1e-5;

size_t count_op(const Graph &g, const std::string &op) {
  size_t n = 0;
  for (const Node &node : g.nodes())
    n += node.op == op;
  return n;
}

/// Traces `build`, requires one attention node and no softmax after the
/// CPU's decompose, and compiled == interpreter.
void check_fused(const std::vector<HostTensor> &inputs, const BuildFn &build) {
  std::unique_ptr<Graph> traced = trace_graph(types_of(inputs), build);
  auto lowered = decompose(*traced, {true, true});
  lowered->verify();
  CHECK(count_op(*lowered, "attention") == 1);
  CHECK(count_op(*lowered, "softmax") == 0);
  check_compiled(inputs, build, kRtol, kAtol);
}

// JSON spelling (examples/gpt): causal where-mask, scale by mul.
std::vector<Tensor> json_attention(const std::vector<Tensor> &in, int64_t sq, int64_t sk) {
  Tensor s = ops::matmul(in[0], in[1], false, true) * ops::full(0.125, DType::f32);
  Tensor rows = ops::iota({sq, sk}, 0), cols = ops::iota({sq, sk}, 1);
  Tensor masked = ops::where(ops::greater_equal(rows, cols), s, ops::full(-1e9, DType::f32));
  return {ops::matmul(ops::softmax(masked, -1), in[2])};
}

} // namespace

TEST_CASE("attention: the JSON spelling fuses and matches the interpreter", "[codegen][attention]") {
  for (auto [b, h, sq, sk, d, dv] : std::vector<std::array<int64_t, 6>>{{2, 3, 5, 5, 7, 3}, {1, 1, 1, 1, 1, 1}, {1, 2, 4, 9, 16, 5}, {1, 1, 3, 37, 8, 4}}) {
    INFO("b " << b << " h " << h << " sq " << sq << " sk " << sk << " d " << d << " dv " << dv);
    std::vector<HostTensor> in = {random_tensor(DType::f32, {b, h, sq, d}, -3, 3),
                                  random_tensor(DType::f32, {b, h, sk, d}, -3, 3),
                                  random_tensor(DType::f32, {b, h, sk, dv})};
    check_fused(in, [sq = sq, sk = sk](auto &x) { return json_attention(x, sq, sk); });
  }
}

TEST_CASE("attention: the ONNX spelling (transpose, div, additive mask) and no mask", "[codegen][attention]") {
  int64_t b = 2, h = 2, s = 6, d = 5;
  std::vector<HostTensor> in = {random_tensor(DType::f32, {b, h, s, d}, -3, 3),
                                random_tensor(DType::f32, {b, h, s, d}, -3, 3),
                                random_tensor(DType::f32, {b, h, s, d}),
                                random_tensor(DType::f32, {b, 1, 1, s}, -10000, 0)};
  check_fused(in, [](auto &x) {
    Tensor s = ops::div(ops::matmul(x[0], ops::transpose(x[1], {0, 1, 3, 2})), ops::full(2.2360679, DType::f32));
    return std::vector<Tensor>{ops::matmul(ops::softmax(s + x[3], 3), x[2])};
  });
  check_fused(in, [](auto &x) {
    return std::vector<Tensor>{ops::matmul(ops::softmax(ops::matmul(x[0], x[1], false, true), -1), x[2])};
  });
  // torch's scaled_dot_product_attention export: q and k^T each scaled by
  // sqrt(scale) (a [1] constant), with a further scale on the scores.
  check_fused(in, [](auto &x) {
    Tensor c = ops::full(0.6687403, DType::f32, {1});
    Tensor scores = ops::matmul(x[0] * c, ops::div(ops::transpose(x[1], {0, 1, 3, 2}), ops::full(1.5, DType::f32)));
    return std::vector<Tensor>{ops::matmul(ops::softmax(scores * ops::full(0.9, DType::f32), -1), x[2])};
  });
  // torch's export: k [b, s, h, d] transposed straight to [b, h, d, s].
  HostTensor kx = random_tensor(DType::f32, {b, s, h, d}, -3, 3);
  check_fused({in[0], kx, in[2]}, [](auto &x) {
    Tensor scores = ops::matmul(x[0], ops::transpose(x[1], {0, 2, 3, 1})) * ops::full(0.4, DType::f32);
    return std::vector<Tensor>{ops::matmul(ops::softmax(scores, -1), x[2])};
  });
}

TEST_CASE("attention: grouped-query K/V repeated per head fuse over the repeated K/V", "[codegen][attention]") {
  // The attention op takes one batch shape for q, k and v, so a GQA model's
  // repeat of K/V (torch's repeat_interleave / HF's repeat_kv) stays a view
  // or copy before it and the rest fuses: Unsqueeze→Expand→Reshape, Tile
  // (k.repeat), Gather of the kv heads, torch 1.13's Split→Expand→Concat.
  int64_t b = 1, h = 4, kvh = 2, rep = h / kvh, s = 6, d = 8;
  std::vector<HostTensor> in = {random_tensor(DType::f32, {b, h, s, d}, -3, 3),
                                random_tensor(DType::f32, {b, kvh, s, d}, -3, 3),
                                random_tensor(DType::f32, {b, kvh, s, d})};
  auto sdpa = [](const Tensor &q, const Tensor &k, const Tensor &v) {
    Tensor scores = ops::matmul(q, ops::transpose(k, {0, 1, 3, 2})) * ops::full(0.35, DType::f32);
    return std::vector<Tensor>{ops::matmul(ops::softmax(scores, -1), v)};
  };
  auto expand_reshape = [=](const Tensor &k) {
    return ops::reshape(ops::broadcast_to(ops::unsqueeze(k, {2}), {b, kvh, rep, s, d}), {b, h, s, d});
  };
  check_fused(in, [&](auto &x) { return sdpa(x[0], expand_reshape(x[1]), expand_reshape(x[2])); });
  {
    // With attention_kv_groups (the CPU's option) HF's repeat_kv is read in
    // place: one attention node with kv_groups = 2 over the unrepeated k and
    // v, no broadcast left; without it (the GPUs) the repeat stays before it;
    // a kv_groups node decomposed for a backend without it repeats k and v
    // again. All equal to the interpreter.
    auto build = [&](auto &x) { return sdpa(x[0], expand_reshape(x[1]), expand_reshape(x[2])); };
    std::unique_ptr<Graph> traced = trace_graph(types_of(in), build);
    DecomposeOptions cpu{true, true};
    cpu.attention_kv_groups = true;
    auto grouped = decompose(*traced, cpu);
    grouped->verify();
    REQUIRE(count_op(*grouped, "attention") == 1);
    CHECK(count_op(*grouped, "broadcast_to") == 0);
    for (const Node &n : grouped->nodes())
      if (n.op == "attention") {
        CHECK(n.attrs.get_int("kv_groups") == rep);
        CHECK(grouped->type_of(n.operands[1]).shape == make_shape({b, kvh, s, d}));
      }
    std::vector<HostTensor> expected = Interpreter::run(*traced, in);
    MAXC_REQUIRE_CLOSE(Interpreter::run(*grouped, in)[0], expected[0], kRtol, kAtol);
    auto gpu = decompose(*traced, {false, true});
    CHECK(count_op(*gpu, "broadcast_to") == 2);
    auto decomposed = decompose(*grouped, {false, false});
    CHECK(count_op(*decomposed, "attention") == 0);
    MAXC_REQUIRE_CLOSE(Interpreter::run(*decomposed, in)[0], expected[0], kRtol, kAtol);
    MAXC_REQUIRE_CLOSE(run_compiled(*traced, in)[0], expected[0], kRtol, kAtol);
    MAXC_REQUIRE_CLOSE(run_gpu_emulated(*traced, in)[0], expected[0], kRtol, kAtol);
    // torch 1.13's repeat_interleave (Split -> per head Expand -> Concat) too.
    auto per_head = [&](const Tensor &k) {
      std::vector<Tensor> parts;
      for (const Tensor &one : ops::split(k, {1, 1}, 1))
        parts.push_back(ops::reshape(ops::broadcast_to(ops::unsqueeze(one, {2}), {b, 1, rep, s, d}), {b, rep, s, d}));
      return ops::concat(parts, 1);
    };
    auto interleaved = trace_graph(types_of(in), [&](auto &x) { return sdpa(x[0], per_head(x[1]), per_head(x[2])); });
    auto grouped2 = decompose(*interleaved, cpu);
    REQUIRE(count_op(*grouped2, "attention") == 1);
    CHECK(count_op(*grouped2, "concat") == 0);
    CHECK(count_op(*grouped2, "split") == 0);
    MAXC_REQUIRE_CLOSE(Interpreter::run(*grouped2, in)[0], expected[0], kRtol, kAtol);
    MAXC_REQUIRE_CLOSE(run_compiled(*interleaved, in)[0], expected[0], kRtol, kAtol);
    // A query block per head (8 > one vector of rows) and one query row (decode).
    for (int64_t sq : {int64_t(19), int64_t(1)}) {
      std::vector<HostTensor> rows = {random_tensor(DType::f32, {b, h, sq, d}, -3, 3), in[1], in[2]};
      MAXC_REQUIRE_CLOSE(run_compiled(*trace_graph(types_of(rows), build), rows)[0],
                         Interpreter::run(*trace_graph(types_of(rows), build), rows)[0], kRtol, kAtol);
    }
  }
  check_fused(in, [&](auto &x) { return sdpa(x[0], ops::tile(x[1], {1, rep, 1, 1}), ops::tile(x[2], {1, rep, 1, 1})); });
  check_fused(in, [&](auto &x) {
    Tensor heads = Tensor::from_host(HostTensor::from_i64(DType::i64, {4}, {0, 0, 1, 1}));
    return sdpa(x[0], ops::gather(x[1], heads, 1), ops::gather(x[2], heads, 1));
  });
  check_fused(in, [&](auto &x) {
    auto per_head = [&](const Tensor &k) {
      std::vector<Tensor> parts;
      for (const Tensor &one : ops::split(k, {1, 1}, 1))
        parts.push_back(ops::reshape(ops::broadcast_to(ops::unsqueeze(one, {2}), {b, 1, rep, s, d}), {b, rep, s, d}));
      return ops::concat(parts, 1);
    };
    return sdpa(x[0], per_head(x[1]), per_head(x[2]));
  });
  // Near miss: one kv head repeated along the sequence instead of the heads:
  // k and v broadcast over q's heads, no longer one batch shape, not fused.
  std::vector<HostTensor> one = {in[0], random_tensor(DType::f32, {b, 1, s, d}), random_tensor(DType::f32, {b, 1, s, d})};
  auto g = trace_graph(types_of(one), [&](auto &x) {
    return sdpa(x[0], ops::tile(x[1], {1, 1, rep, 1}), ops::tile(x[2], {1, 1, rep, 1}));
  });
  CHECK(count_op(*decompose(*g, {true, true}), "attention") == 0);
}

TEST_CASE("attention: a score used twice is not fused", "[codegen][attention]") {
  auto g = trace_graph({TensorType(DType::f32, {2, 4, 3}), TensorType(DType::f32, {2, 4, 3})}, [](auto &x) {
    Tensor s = ops::matmul(x[0], x[1], false, true);
    return std::vector<Tensor>{ops::matmul(ops::softmax(s, -1), x[1]), s};
  });
  CHECK(count_op(*decompose(*g, {true, true}), "attention") == 0);
}

TEST_CASE("attention: reference, decomposition and GPU emulation agree", "[codegen][attention]") {
  auto g = std::make_unique<Graph>("g", std::vector<TensorType>{TensorType(DType::f32, {2, 3, 4}),
                                                                 TensorType(DType::f32, {2, 5, 4}),
                                                                 TensorType(DType::f32, {2, 5, 3}),
                                                                 TensorType(DType::boolean, {3, 5})});
  std::vector<ValueId> in = g->input_ids();
  Attrs attrs;
  attrs.set("scale", 0.5);
  attrs.set("fill", -1e9);
  ValueId out = g->add_node("attention", in, attrs)[0];
  g->set_outputs({out}, {"o"});
  CHECK(g->type_of(out).shape == make_shape({2, 3, 3}));
  HostTensor mask = random_tensor(DType::boolean, {3, 5});
  for (int64_t i = 0; i < 3; ++i)
    mask.set_i64(i * 5, 1); // every row keeps a key
  std::vector<HostTensor> inputs = {random_tensor(DType::f32, {2, 3, 4}), random_tensor(DType::f32, {2, 5, 4}),
                                    random_tensor(DType::f32, {2, 5, 3}), mask};
  auto expected = Interpreter::run(*g, inputs);
  auto lowered = decompose(*g);
  CHECK(count_op(*lowered, "attention") == 0);
  MAXC_REQUIRE_CLOSE(Interpreter::run(*lowered, inputs)[0], expected[0], kRtol, kAtol);
  MAXC_REQUIRE_CLOSE(run_compiled(*g, inputs)[0], expected[0], kRtol, kAtol);
  MAXC_REQUIRE_CLOSE(run_gpu_emulated(*g, inputs)[0], expected[0], kRtol, kAtol);
  // The verifier: k's last dim must be q's.
  Graph bad("bad", {TensorType(DType::f32, {2, 3, 4}), TensorType(DType::f32, {2, 5, 3}), TensorType(DType::f32, {2, 5, 3})});
  CHECK_THROWS_WITH(bad.add_node("attention", bad.input_ids()), Catch::Matchers::Contains("must have q's last dim"));
}

TEST_CASE("attention: the GPT example's block has no seq x seq buffer; the CPU reads its head views in place", "[codegen][attention][plan]") {
  LoadOptions options;
  options.synthesize_weights = true;
  DiagnosticEngine diagnostics;
  LoadedModel model = load_model(std::string(MAXC_SOURCE_DIR) + "/examples/gpt/model.json", options, diagnostics);
  REQUIRE(model.graph);
  auto lowered = decompose(*model.graph, {true, true});
  lowered->verify();
  const Graph &block = *lowered->subgraphs().begin()->second;
  CHECK(count_op(block, "attention") == 1);
  LoweringPlan plan = plan_lowering(block);
  INFO(describe_plan(block, plan));
  // 25 decomposed; 14 with row kernels; attention also drops the k
  // transpose; its causal mask (ge of iotas) is never computed.
  CHECK(plan.kernels.size() == 11);
  for (const Node &n : block.nodes())
    if (n.op == "ge")
      CHECK(plan.values[n.results[0]].storage == Storage::fused);
  CHECK(count_op(block, "ge") == 1);
  for (const WorkspaceSlot &s : plan.slots)
    CHECK(s.bytes != Dim("batch") * Dim(4 * 128 * 128 * 4)); // the f32 scores of 4 heads
  // The CPU's plan reads the head-split views in place: the q, k, v
  // transposes are not stored (11 - 3 kernels).
  plan = plan_lowering(block, cpu_plan_options());
  INFO(describe_plan(block, plan));
  CHECK(plan.kernels.size() == 8);
  for (const Node &n : block.nodes()) {
    if (n.op != "attention")
      continue;
    for (size_t i = 0; i < 3; ++i) {
      CHECK(plan.values[n.operands[i]].storage == Storage::fused);
      std::optional<StridedView> view = strided_view(block, plan, n.operands[i]);
      REQUIRE(view);
      // [batch, heads 4, seq 128, 64] in the [batch, 128, 768] projection.
      CHECK(view->strides == std::vector<int64_t>{128 * 768, 64, 768, 1});
      CHECK(view->offset == static_cast<int64_t>(i) * 256);
      CHECK(plan.values[view->base].storage == Storage::temp);
    }
  }
}

namespace {

/// Traces `build`; requires `folded` of its attention's q, k, v to be read in
/// place (fused views under the CPU's plan), and the compiled model (1, 2
/// and 3 threads, same bits) to match the interpreter.
void check_views(const std::vector<HostTensor> &inputs, const BuildFn &build, size_t folded) {
  std::unique_ptr<Graph> traced = trace_graph(types_of(inputs), build);
  auto lowered = decompose(*traced, {true, true});
  LoweringPlan plan = plan_lowering(*lowered, cpu_plan_options());
  INFO(describe_plan(*lowered, plan));
  size_t fused = 0;
  for (const Node &n : lowered->nodes())
    if (n.op == "attention")
      for (size_t i = 0; i < 3; ++i)
        fused += plan.values[n.operands[i]].storage == Storage::fused;
  CHECK(fused == folded);
  check_threads(inputs, build, kRtol, kAtol);
}

} // namespace

TEST_CASE("attention: head-split views are read in place and match the interpreter", "[codegen][attention][threads]") {
  // The GPT block's spelling: q, k, v split from one projection, each
  // reshaped to heads and transposed; causal; 3 heads of 8, 37 positions
  // (a partial query block).
  int64_t b = 2, s = 37, h = 3, d = 8;
  check_views({random_tensor(DType::f32, {b, s, 3 * h * d}, -2, 2)},
              [=](auto &x) {
                std::vector<Tensor> qkv = ops::split(x[0], {h * d, h * d, h * d}, -1);
                for (Tensor &t : qkv)
                  t = ops::transpose(ops::reshape(t, make_shape({b, s, h, d})), {0, 2, 1, 3});
                return json_attention({qkv[0], qkv[1], qkv[2]}, s, s);
              },
              3);
  // BERT's (torch's export): three biased projections, k transposed
  // straight to [b, h, d, s], a scalar div, no mask; the bias adds become
  // the GEMMs' epilogues.
  int64_t e = 16;
  std::vector<HostTensor> in = {random_tensor(DType::f32, {b, s, e}, -2, 2)};
  for (int i = 0; i < 3; ++i) {
    in.push_back(random_tensor(DType::f32, {e, e}, -1, 1));
    in.push_back(random_tensor(DType::f32, {e}, -1, 1));
  }
  int64_t hb = 2, db = 8;
  check_views(in,
              [=](auto &x) {
                auto heads = [&](int i) { return ops::reshape(ops::matmul(x[0], x[1 + 2 * i]) + x[2 + 2 * i], make_shape({b, s, hb, db})); };
                Tensor q = ops::transpose(heads(0), {0, 2, 1, 3}), k = ops::transpose(heads(1), {0, 2, 3, 1}),
                       v = ops::transpose(heads(2), {0, 2, 1, 3});
                Tensor scores = ops::div(ops::matmul(q, k), ops::full(2.828427, DType::f32));
                return std::vector<Tensor>{ops::matmul(ops::softmax(scores, -1), v)};
              },
              3);
  // Heads merged across a transpose (no strided view: [b, 5, 4, 8] from
  // [b, 4, 5, 8] cannot be reshaped to [b, 20, 8] in place): q stays
  // stored; k and v are plain inputs.
  check_views({random_tensor(DType::f32, {b, 4, 5, d}, -2, 2), random_tensor(DType::f32, {b, 20, d}, -2, 2),
               random_tensor(DType::f32, {b, 20, d})},
              [=](auto &x) {
                Tensor q = ops::reshape(ops::transpose(x[0], {0, 2, 1, 3}), make_shape({b, 20, d}));
                return json_attention({q, x[1], x[2]}, 20, 20);
              },
              0);
}

TEST_CASE("attention: same bits at 1, 2 and 3 threads", "[codegen][attention][threads]") {
  // 2 x 4 entries of 64 x 64 x (32 + 32) work each: 32 tasks of 16 queries.
  std::vector<HostTensor> in = {random_tensor(DType::f32, {2, 4, 64, 32}, -3, 3),
                                random_tensor(DType::f32, {2, 4, 64, 32}, -3, 3),
                                random_tensor(DType::f32, {2, 4, 64, 32})};
  std::unique_ptr<Graph> traced = trace_graph(types_of(in), [](auto &x) { return json_attention(x, 64, 64); });
  std::vector<HostTensor> expected = Interpreter::run(*traced, in);
  std::vector<HostTensor> got = run_compiled_threads(*traced, in); // requires 2 and 3 threads == 1 thread, bitwise
  MAXC_REQUIRE_CLOSE(got[0], expected[0], kRtol, kAtol);
}
