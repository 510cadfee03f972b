// The CPU attention's query-block kernel (Cpu/AttentionEmitter.h,
// emit_attention_function): causal and not, query / key counts that are not
// multiples of the block (1, 7, 33, 130), head dims 32 / 64 / 80 and value
// dims with a vector tail, bool and additive masks per query row (gathered)
// and broadcast over rows (BERT's [b, 1, 1, s]), the ONNX spelling, torch's
// masked_fill spelling (where(mask, fill, s)) with a constant causal mask
// (run causal: no mask reads) and another constant mask; every
// case against the interpreter (rtol 1e-4, atol 1e-5: f32 dot products and
// exp vs double) and the same bits at 1, 2 and 3 threads and through a
// two-thread parallel_for. A graph whose operand is a fused generator, or
// whose head dim is past kMaxBlockHeadDim, takes the per-batch loop instead,
// also checked.
#include "CompiledRunner.h"

#include "maxc/Codegen/ModelCompiler.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/raw_ostream.h>

#include <cmath>

using namespace maxc;
using namespace maxc::test;

namespace {

constexpr double kRtol = 1e-4, kAtol = 1e-5;

/// The query-block kernel of the CPU module of `g` as IR text ("" if none).
std::string block_kernel(const Graph &g) {
  llvm::LLVMContext context;
  auto module = build_model_module(g, "maxc_jit", context);
  llvm::Function *f = module->getFunction("maxc_jit.attention");
  std::string text;
  if (f) {
    llvm::raw_string_ostream os(text);
    f->print(os);
  }
  return text;
}

bool uses_block_kernel(const Graph &g) { return !block_kernel(g).empty(); }

/// `build` traced on `inputs`: the block kernel is used (or not, `blocks`),
/// compiled == interpreter, and the same bits on any number of threads.
void check_blocks(const std::vector<HostTensor> &inputs, const BuildFn &build, bool blocks = true) {
  std::unique_ptr<Graph> g = trace_graph(types_of(inputs), build);
  CHECK(uses_block_kernel(*g) == blocks);
  std::vector<HostTensor> expected = Interpreter::run(*g, inputs);
  std::vector<HostTensor> got = run_compiled_threads(*g, inputs);
  MAXC_REQUIRE_CLOSE(got[0], expected[0], kRtol, kAtol);
}

HostTensor rand(std::vector<int64_t> shape, double lo = -3, double hi = 3) {
  return random_tensor(DType::f32, std::move(shape), lo, hi);
}

} // namespace

TEST_CASE("attention blocks: causal (JSON spelling), odd lengths, head dims 32/64/80", "[codegen][attention]") {
  for (auto [b, h, s, d] : std::vector<std::array<int64_t, 4>>{{1, 2, 1, 32}, {1, 1, 7, 64}, {2, 1, 33, 80}, {1, 1, 130, 32}}) {
    INFO("b " << b << " h " << h << " s " << s << " d " << d);
    double scale = 1 / std::sqrt(double(d));
    check_blocks({rand({b, h, s, d}), rand({b, h, s, d}), rand({b, h, s, d})}, [s = s, scale](auto &x) {
      Tensor sc = ops::matmul(x[0], x[1], false, true) * ops::full(scale, DType::f32);
      Tensor causal = ops::greater_equal(ops::iota({s, s}, 0), ops::iota({s, s}, 1));
      return std::vector<Tensor>{ops::matmul(ops::softmax(ops::where(causal, sc, ops::full(-1e9, DType::f32)), -1), x[2])};
    });
  }
  {
    std::unique_ptr<Graph> g = trace_graph({TensorType(DType::f32, {1, 1, 7, 8}), TensorType(DType::f32, {1, 1, 7, 8}),
                                            TensorType(DType::f32, {1, 1, 7, 8})}, [](auto &x) {
      Tensor causal = ops::greater_equal(ops::iota({7, 7}, 0), ops::iota({7, 7}, 1));
      Tensor sc = ops::matmul(x[0], x[1], false, true);
      return std::vector<Tensor>{ops::matmul(ops::softmax(ops::where(causal, sc, ops::full(-1e9, DType::f32)), -1), x[2])};
    });
    std::string kernel = block_kernel(*g); // by index: the mask is not read
    CHECK(kernel.find("gather") == std::string::npos);
    CHECK(kernel.find("load i8") == std::string::npos);
  }
  // A causal mask with fill 0: the masked keys count (exp(0 - m)), none skipped.
  check_blocks({rand({1, 1, 37, 8}), rand({1, 1, 37, 8}), rand({1, 1, 37, 8})}, [](auto &x) {
    Tensor causal = ops::greater_equal(ops::iota({37, 37}, 0), ops::iota({37, 37}, 1));
    Tensor sc = ops::matmul(x[0], x[1], false, true);
    return std::vector<Tensor>{ops::matmul(ops::softmax(ops::where(causal, sc, ops::full(0.0, DType::f32)), -1), x[2])};
  });
  // cols <= rows, more keys than queries (the mask [sq, sk]).
  check_blocks({rand({1, 2, 20, 16}), rand({1, 2, 37, 16}), rand({1, 2, 37, 24})}, [](auto &x) {
    Tensor causal = ops::less_equal(ops::iota({20, 37}, 1), ops::iota({20, 37}, 0));
    Tensor sc = ops::matmul(x[0], x[1], false, true);
    return std::vector<Tensor>{ops::matmul(ops::softmax(ops::where(causal, sc, ops::full(-1e4, DType::f32)), -1), x[2])};
  });
}

TEST_CASE("attention blocks: no mask, key counts and value dims off the block", "[codegen][attention]") {
  for (auto [sq, sk, d, dv] : std::vector<std::array<int64_t, 4>>{{7, 9, 64, 20}, {33, 130, 80, 80}, {130, 7, 32, 5}, {1, 1, 32, 64}}) {
    INFO("sq " << sq << " sk " << sk << " d " << d << " dv " << dv);
    double scale = 1 / std::sqrt(double(d));
    check_blocks({rand({2, sq, d}), rand({2, sk, d}), rand({2, sk, dv})}, [scale](auto &x) {
      Tensor sc = ops::matmul(x[0], x[1], false, true) * ops::full(scale, DType::f32);
      return std::vector<Tensor>{ops::matmul(ops::softmax(sc, -1), x[2])};
    });
  }
}

TEST_CASE("attention blocks: ONNX spelling with masks per row and broadcast", "[codegen][attention]") {
  int64_t b = 2, h = 2, s = 19, d = 32;
  // torch's export: q, k, v [b, s, h, d]; k transposed straight to [b, h, d, s].
  std::vector<HostTensor> in = {rand({b, s, h, d}), rand({b, s, h, d}), rand({b, s, h, d})};
  auto onnx_attention = [](auto &x, const Tensor *mask) {
    Tensor q = ops::transpose(x[0], {0, 2, 1, 3}), k = ops::transpose(x[1], {0, 2, 3, 1}),
           v = ops::transpose(x[2], {0, 2, 1, 3});
    Tensor sc = ops::div(ops::matmul(q, k), ops::full(std::sqrt(32.0), DType::f32));
    if (mask)
      sc = sc + *mask;
    return std::vector<Tensor>{ops::transpose(ops::matmul(ops::softmax(sc, 3), v), {0, 2, 1, 3})};
  };
  check_blocks(in, [&](auto &x) { return onnx_attention(x, nullptr); });
  // BERT's padding mask [b, 1, 1, s]: one scalar per key.
  std::vector<HostTensor> with_mask = in;
  with_mask.push_back(rand({b, 1, 1, s}, -10000, 0));
  check_blocks(with_mask, [&](auto &x) { return onnx_attention(x, &x[3]); });
  // A float mask per query row [b, 1, s, s] (gathered).
  with_mask[3] = rand({b, 1, s, s}, -5, 0);
  check_blocks(with_mask, [&](auto &x) { return onnx_attention(x, &x[3]); });
  // A bool mask [s, s] that is not causal: where(mask, scores, fill).
  HostTensor keep = random_tensor(DType::boolean, {s, s});
  for (int64_t i = 0; i < s; ++i)
    keep.set_i64(i * s + (i * 7) % s, 1); // every row keeps a key
  check_blocks({in[0], in[1], in[2], keep}, [](auto &x) {
    Tensor q = ops::transpose(x[0], {0, 2, 1, 3}), k = ops::transpose(x[1], {0, 2, 1, 3}),
           v = ops::transpose(x[2], {0, 2, 1, 3});
    Tensor sc = ops::matmul(q, k, false, true) * ops::full(0.2, DType::f32);
    return std::vector<Tensor>{ops::matmul(ops::softmax(ops::where(x[3], sc, ops::full(-1e9, DType::f32)), -1), v)};
  });
}

TEST_CASE("attention blocks: a fused generator operand, a head dim past 1024: the per-batch loop", "[codegen][attention]") {
  check_blocks({rand({1, 2, 1030}), rand({1, 3, 1030}), rand({1, 3, 4})}, [](auto &x) {
    Tensor sc = ops::matmul(x[0], x[1], false, true) * ops::full(0.03, DType::f32);
    return std::vector<Tensor>{ops::matmul(ops::softmax(sc, -1), x[2])};
  }, false);
  check_blocks({rand({1, 2, 9, 8}), rand({1, 2, 9, 8})}, [](auto &x) {
    Tensor v = ops::iota({1, 2, 9, 8}, 2, DType::f32);
    return std::vector<Tensor>{ops::matmul(ops::softmax(ops::matmul(x[0], x[1], false, true), -1), v)};
  }, false);
  // ...with a causal mask, which no kernel computes (LoweringPlan): the loop
  // evaluates it per element.
  check_blocks({rand({1, 2, 9, 8}), rand({1, 2, 9, 8})}, [](auto &x) {
    Tensor v = ops::iota({1, 2, 9, 8}, 2, DType::f32);
    Tensor causal = ops::greater_equal(ops::iota({9, 9}, 0), ops::iota({9, 9}, 1));
    Tensor sc = ops::where(causal, ops::matmul(x[0], x[1], false, true), ops::full(-1e9, DType::f32));
    return std::vector<Tensor>{ops::matmul(ops::softmax(sc, -1), v)};
  }, false);
}

TEST_CASE("attention blocks: torch's masked_fill spelling where(mask, fill, s)", "[codegen][attention]") {
  int64_t s = 21, d = 32;
  std::vector<HostTensor> in = {rand({2, 2, s, d}), rand({2, 2, s, d}), rand({2, 2, s, d})};
  auto masked_fill = [](const Tensor &mask) {
    return [mask](auto &x) {
      Tensor sc = ops::div(ops::matmul(x[0], ops::transpose(x[1], {0, 1, 3, 2})), ops::full(5.0, DType::f32));
      return std::vector<Tensor>{ops::matmul(ops::softmax(ops::where(mask, ops::full(-3.4e38, DType::f32), sc), 3), x[2])};
    };
  };
  // The GPT-2 / Llama exports' constant "future" mask (j > i): runs causal,
  // reading no mask.
  std::vector<int64_t> future(static_cast<size_t>(s * s)), other(future.size());
  for (int64_t i = 0; i < s; ++i)
    for (int64_t j = 0; j < s; ++j) {
      future[static_cast<size_t>(i * s + j)] = j > i;
      other[static_cast<size_t>(i * s + j)] = (i * 5 + j * 3) % 4 == 1;
    }
  for (int64_t i = 0; i < s; ++i)
    other[static_cast<size_t>(i * s + i)] = 0; // every row keeps its diagonal key
  auto causal = masked_fill(Tensor::from_i64(DType::boolean, {s, s}, future));
  std::unique_ptr<Graph> g = trace_graph(types_of(in), causal);
  std::string kernel = block_kernel(*g);
  CHECK(!kernel.empty());
  CHECK(kernel.find("gather") == std::string::npos);
  check_blocks(in, causal);
  // Any other constant mask is read (gathered per query row), inverted.
  auto general = masked_fill(Tensor::from_i64(DType::boolean, {s, s}, other));
  g = trace_graph(types_of(in), general);
  CHECK(block_kernel(*g).find("gather") != std::string::npos);
  check_blocks(in, general);
}

TEST_CASE("attention blocks: a symbolic sequence length, causal and with a padding mask", "[codegen][attention]") {
  TensorType qkv(DType::f32, {1, 2, Dim("seq"), 16});
  Graph graph("sym", {qkv, qkv, qkv, TensorType(DType::f32, {1, 1, 1, Dim("seq")})});
  {
    GraphRealizationContext ctx(graph);
    std::vector<Tensor> x;
    for (const Value &v : graph.inputs())
      x.push_back(Tensor::from_graph_value(v));
    auto scores = [&] { return ops::matmul(x[0], x[1], false, true) * ops::full(0.25, DType::f32); };
    Tensor causal = ops::greater_equal(ops::iota({Dim("seq"), Dim("seq")}, 0), ops::iota({Dim("seq"), Dim("seq")}, 1));
    Tensor a = ops::matmul(ops::softmax(ops::where(causal, scores(), ops::full(-1e9, DType::f32)), -1), x[2]);
    Tensor b = ops::matmul(ops::softmax(scores() + x[3], -1), x[2]);
    graph.output({a.value(), b.value()});
  }
  CHECK(block_kernel(graph).find("gather") == std::string::npos); // causal: by index
  {
    llvm::LLVMContext context;
    auto module = build_model_module(graph, "maxc_jit", context);
    int kernels_found = 0, rows_found = 0;
    for (llvm::Function &f : *module) {
      rows_found += f.getName().starts_with("maxc_jit.attention_rows");
      kernels_found += f.getName().starts_with("maxc_jit.attention") && !f.getName().starts_with("maxc_jit.attention_rows");
    }
    CHECK(kernels_found == 2);
    CHECK(rows_found == 2); // the row-by-row variant of each, for blocks of few rows
  }
  // 1 and 3 rows: every block row by row; 36: the last block (4 rows) too.
  for (int64_t s : {5, 37, 0, 1, 3, 36}) {
    INFO("seq " << s);
    std::vector<HostTensor> in = {rand({1, 2, s, 16}), rand({1, 2, s, 16}), rand({1, 2, s, 16}), rand({1, 1, 1, s}, -100, 0)};
    std::vector<HostTensor> expected = Interpreter::run(graph, in);
    std::vector<HostTensor> got = run_compiled_threads(graph, in);
    MAXC_REQUIRE_CLOSE(got[0], expected[0], kRtol, kAtol);
    MAXC_REQUIRE_CLOSE(got[1], expected[1], kRtol, kAtol);
  }
}
