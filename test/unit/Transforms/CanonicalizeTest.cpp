// Canonicalization rules (Transforms/Canonicalize.h) and the rewrite driver
// (Transforms/Rewrite.h): per rule a golden test of what the graph becomes,
// its results against the reference interpreter on the original graph within
// the rule's stated bound (in ulps), and near misses that must stay as they
// are.
#include "TestUtil.h"

#include "maxc/Driver/Compile.h"
#include "maxc/IR/GraphSymbols.h"
#include "maxc/Ops/MatmulNbits.h"
#include "maxc/Transforms/Canonicalize.h"
#include "maxc/Transforms/Decompose.h"
#include "maxc/Transforms/DilatedConvAsBatch.h"

#include <cmath>
#include <cstring>

using namespace maxc;
using namespace maxc::test;

namespace {

/// The ops of a graph's nodes in order, constants and fulls left out: "mul sqrt".
std::string op_list(const Graph &g) {
  std::string out;
  for (const Node &n : g.nodes())
    if (n.op != "constant" && n.op != "full")
      out += (out.empty() ? "" : " ") + n.op;
  return out;
}

/// Distance in units in the last place between two f32 values (0 when
/// bit-identical; NaNs equal to NaNs).
int64_t ulps(float a, float b) {
  if (std::isnan(a) && std::isnan(b))
    return 0;
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  if (ia < 0)
    ia = INT32_MIN - ia;
  if (ib < 0)
    ib = INT32_MIN - ib;
  return std::llabs(static_cast<int64_t>(ia) - ib);
}

int64_t max_ulps(const HostTensor &a, const HostTensor &b) {
  REQUIRE(a.dtype() == DType::f32);
  REQUIRE(a.shape() == b.shape());
  int64_t worst = 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    worst = std::max(worst, ulps(static_cast<float>(a.get_f64(i)), static_cast<float>(b.get_f64(i))));
  return worst;
}

struct Canonicalized {
  std::unique_ptr<Graph> before, after;
  RewriteStats stats;
};

Canonicalized canonicalize_traced(const std::vector<HostTensor> &inputs, const BuildFn &build) {
  Canonicalized c;
  c.before = trace_graph(types_of(inputs), build);
  c.after = canonicalize(*c.before, &c.stats);
  if (c.after)
    c.after->verify();
  return c;
}

/// Canonicalizes, requires the op list `expected` after it, and results
/// within `max_ulp` of the reference run of the original graph.
void check_rule(const std::vector<HostTensor> &inputs, const BuildFn &build, const std::string &expected,
                int64_t max_ulp) {
  Canonicalized c = canonicalize_traced(inputs, build);
  INFO("before: " << op_list(*c.before));
  REQUIRE(c.after);
  CHECK(op_list(*c.after) == expected);
  auto want = Interpreter::run(*c.before, inputs);
  auto got = Interpreter::run(*c.after, inputs);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("output " << i);
    CHECK(max_ulps(got[i], want[i]) <= max_ulp);
  }
}

/// Requires that canonicalize leaves the graph alone (returns null).
void check_unchanged(const std::vector<HostTensor> &inputs, const BuildFn &build) {
  Canonicalized c = canonicalize_traced(inputs, build);
  INFO("graph: " << op_list(*c.before) << "; rewritten to: " << (c.after ? op_list(*c.after) : "-"));
  CHECK_FALSE(c.after);
}

Tensor constant_like(double v, const std::vector<int64_t> &shape) {
  HostTensor t(DType::f32, shape);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.set_f64(i, v);
  return Tensor::from_host(t);
}

using T = std::vector<Tensor>;

} // namespace

TEST_CASE("canonicalize: pow by a constant exponent", "[transforms][canonicalize]") {
  HostTensor x = random_tensor(DType::f32, {4, 33}, -3, 3);
  HostTensor pos = random_tensor(DType::f32, {4, 33}, 0.01, 5);
  check_rule({x}, [](auto &in) { return T{ops::pow(in[0], ops::full(2.0, DType::f32))}; }, "mul", 0);
  // The exponent as an initializer (a constant of one element), as ONNX exports write it.
  check_rule({x}, [](auto &in) { return T{ops::pow(in[0], constant_like(2.0, {1}))}; }, "mul", 0);
  check_rule({x}, [](auto &in) { return T{ops::pow(in[0], ops::full(3.0, DType::f32))}; }, "mul mul", 2);
  check_rule({x}, [](auto &in) { return T{ops::pow(in[0], ops::full(1.0, DType::f32))}; }, "", 0);
  check_rule({x}, [](auto &in) { return T{ops::pow(in[0], ops::full(0.0, DType::f32))}; }, "", 0);
  check_rule({x}, [](auto &in) { return T{ops::pow(in[0], ops::full(-1.0, DType::f32))}; }, "div", 0);
  check_rule({pos}, [](auto &in) { return T{ops::pow(in[0], ops::full(0.5, DType::f32))}; }, "sqrt", 1);
  check_rule({pos}, [](auto &in) { return T{ops::pow(in[0], ops::full(-0.5, DType::f32))}; }, "rsqrt", 1);
  // The exponent node, read by nothing else, goes with the pow.
  Canonicalized c = canonicalize_traced({x}, [](auto &in) { return T{ops::pow(in[0], ops::full(2.0, DType::f32))}; });
  REQUIRE(c.after);
  CHECK(c.after->nodes().size() == 1);
  CHECK(c.stats.fired["pow-by-constant"] == 1);
}

TEST_CASE("canonicalize: pow near misses stay pow", "[transforms][canonicalize]") {
  HostTensor x = random_tensor(DType::f32, {4, 8}, 0.1, 3);
  check_unchanged({x}, [](auto &in) { return T{ops::pow(in[0], ops::full(2.5, DType::f32))}; });
  check_unchanged({x}, [](auto &in) { return T{ops::pow(in[0], ops::full(2.0000002, DType::f32))}; });
  // Not one value: a constant with two different exponents.
  check_unchanged({x}, [](auto &in) {
    HostTensor e(DType::f32, {8});
    for (int64_t i = 0; i < 8; ++i)
      e.set_f64(i, i % 2 ? 2.0 : 3.0);
    return T{ops::pow(in[0], Tensor::from_host(e))};
  });
  // The exponent widens x by broadcasting: x·x would have x's shape.
  HostTensor row = random_tensor(DType::f32, {8}, 0.1, 3);
  check_unchanged({row}, [](auto &in) { return T{ops::pow(in[0], constant_like(2.0, {4, 8}))}; });
  // The base is the constant, the exponent varies.
  check_unchanged({x}, [](auto &in) { return T{ops::pow(ops::full(2.0, DType::f32), in[0])}; });
}

TEST_CASE("canonicalize: division by a square root and by a constant", "[transforms][canonicalize]") {
  HostTensor x = random_tensor(DType::f32, {3, 40}, -3, 3), y = random_tensor(DType::f32, {3, 1}, 0.1, 4);
  check_rule({x, y}, [](auto &in) { return T{in[0] / ops::sqrt(in[1])}; }, "rsqrt mul", 2);
  // 1/8 is exact: bit-exact.
  check_rule({x}, [](auto &in) { return T{in[0] / ops::full(8.0, DType::f32)}; }, "mul", 0);
  check_rule({x}, [](auto &in) { return T{in[0] / constant_like(std::sqrt(64.0 * 3), {1})}; }, "mul", 1);
  check_rule({x}, [](auto &in) { return T{in[0] / ops::full(3.0, DType::f32)}; }, "mul", 1);
  // Near misses: integer division truncates; 0; a constant that is no splat;
  // a divisor that widens x; a variable divisor; sqrt on the wrong side.
  HostTensor ix = HostTensor::from_i64(DType::i64, {4}, {7, -7, 9, 10});
  check_unchanged({ix}, [](auto &in) { return T{in[0] / ops::full(2.0, DType::i64)}; });
  check_unchanged({x}, [](auto &in) { return T{in[0] / ops::full(0.0, DType::f32)}; });
  check_unchanged({x}, [](auto &in) {
    return T{in[0] / Tensor::from_host(random_tensor(DType::f32, {40}, 1, 2))};
  });
  HostTensor row = random_tensor(DType::f32, {40});
  check_unchanged({row}, [](auto &in) { return T{in[0] / constant_like(4.0, {3, 40})}; });
  check_unchanged({x, y}, [](auto &in) { return T{in[0] / ops::exp(in[1])}; });
  check_unchanged({x, y}, [](auto &in) { return T{ops::sqrt(in[1]) / in[0]}; });
  // 1/3 is inexact and the quotient is rounded to an integer (ONNX's
  // QuantizeLinear: one ulp moves a tie), or has one element: it stays a
  // division. 1/4 is exact: rewritten even there.
  HostTensor ties = HostTensor::from_f64(DType::f32, {8}, {1.5, 4.5, 7.5, -1.5, 0.3, 10.5, 100.5, -7.5});
  check_unchanged({x}, [](auto &in) { return T{ops::round(in[0] / ops::full(3.0, DType::f32))}; });
  check_unchanged({x}, [](auto &in) { return T{ops::floor(in[0] / ops::full(3.0, DType::f32))}; });
  check_unchanged({x}, [](auto &in) { return T{ops::cast(in[0] / ops::full(0.1, DType::f32), DType::u8)}; });
  check_unchanged({x}, [](auto &in) { return T{ops::max(in[0], {}) / ops::full(255.0, DType::f32)}; });
  check_unchanged({x, y}, [](auto &in) { // a requantization multiplier: rounded two steps on
    return T{ops::round(ops::add(ops::mul(in[0], in[1] / ops::full(3.0, DType::f32)), ops::full(1.0, DType::f32)))};
  });
  check_rule({ties}, [](auto &in) { return T{ops::round(in[0] / ops::full(4.0, DType::f32))}; }, "mul round", 0);
  check_rule({x}, [](auto &in) { return T{ops::exp(in[0] / ops::full(3.0, DType::f32))}; }, "mul exp", 1);
  // The sqrt is read elsewhere too: it stays, so an rsqrt would be extra work.
  check_unchanged({x, y}, [](auto &in) {
    Tensor s = ops::sqrt(in[1]);
    return T{in[0] / s, s};
  });
}

TEST_CASE("canonicalize: arithmetic identities", "[transforms][canonicalize]") {
  HostTensor x = random_tensor(DType::f32, {5, 7});
  check_rule({x}, [](auto &in) { return T{ops::exp(in[0] * ops::full(1.0, DType::f32))}; }, "exp", 0);
  check_rule({x}, [](auto &in) { return T{ops::exp(ops::full(1.0, DType::f32) * in[0])}; }, "exp", 0);
  check_rule({x}, [](auto &in) { return T{ops::exp(in[0] - ops::full(0.0, DType::f32))}; }, "exp", 0);
  check_rule({x}, [](auto &in) { return T{ops::exp(in[0] / ops::full(1.0, DType::f32))}; }, "exp", 0);
  HostTensor ix = HostTensor::from_i64(DType::i32, {4}, {1, -2, 3, 0});
  Canonicalized c = canonicalize_traced({ix}, [](auto &in) { return T{ops::neg(in[0] + ops::full(0.0, DType::i32))}; });
  REQUIRE(c.after);
  CHECK(op_list(*c.after) == "neg");
  // Near misses: f32 x + 0 (turns -0 into +0); 0 - x; 1 / x; x · 1.0001;
  // x · 1 where the 1 widens x.
  check_unchanged({x}, [](auto &in) { return T{in[0] + ops::full(0.0, DType::f32)}; });
  check_unchanged({x}, [](auto &in) { return T{ops::full(0.0, DType::f32) - in[0]}; });
  check_unchanged({x}, [](auto &in) { return T{ops::full(1.0, DType::f32) / in[0]}; });
  check_unchanged({x}, [](auto &in) { return T{in[0] * ops::full(1.0001, DType::f32)}; });
  check_unchanged({x}, [](auto &in) { return T{in[0] * constant_like(1.0, {2, 5, 7})}; });
}

TEST_CASE("canonicalize: cast chains", "[transforms][canonicalize]") {
  HostTensor x = random_tensor(DType::f32, {6}, -100, 100);
  check_rule({x}, [](auto &in) { return T{ops::cast(ops::cast(in[0], DType::f64), DType::f32)}; }, "", 0);
  check_rule({x}, [](auto &in) { return T{ops::exp(ops::cast(in[0], DType::f32))}; }, "exp", 0);
  HostTensor h = random_tensor(DType::f16, {6});
  Canonicalized c = canonicalize_traced({h}, [](auto &in) {
    return T{ops::cast(ops::cast(in[0], DType::f32), DType::f64)};
  });
  REQUIRE(c.after);
  CHECK(op_list(*c.after) == "cast");
  CHECK(Interpreter::run(*c.after, {h})[0].identical(Interpreter::run(*c.before, {h})[0]));
  // Near misses: f32 → f16 → f32 rounds; i64 → i32 → i64 wraps; f32 → i32 → f32 truncates.
  check_unchanged({x}, [](auto &in) { return T{ops::cast(ops::cast(in[0], DType::f16), DType::f32)}; });
  check_unchanged({x}, [](auto &in) { return T{ops::cast(ops::cast(in[0], DType::i32), DType::f32)}; });
  HostTensor big = HostTensor::from_i64(DType::i64, {2}, {int64_t(1) << 40, -3});
  check_unchanged({big}, [](auto &in) { return T{ops::cast(ops::cast(in[0], DType::i32), DType::i64)}; });
  CHECK(cast_is_exact(DType::i8, DType::bf16));
  CHECK_FALSE(cast_is_exact(DType::i32, DType::f32));
  CHECK_FALSE(cast_is_exact(DType::f16, DType::bf16));
  CHECK_FALSE(cast_is_exact(DType::i8, DType::boolean));
  CHECK_FALSE(cast_is_exact(DType::i8, DType::u8));
  CHECK_FALSE(cast_is_exact(DType::u8, DType::i8));
  CHECK(cast_is_exact(DType::u8, DType::i32));
  CHECK(cast_is_exact(DType::u8, DType::bf16));
}

TEST_CASE("canonicalize: reshape and transpose chains", "[transforms][canonicalize]") {
  HostTensor x = random_tensor(DType::f32, {2, 3, 4});
  check_rule({x}, [](auto &in) { return T{ops::reshape(ops::reshape(in[0], {6, 4}), {4, 6})}; }, "reshape", 0);
  check_rule({x}, [](auto &in) { return T{ops::exp(ops::reshape(ops::reshape(in[0], {24}), {2, 3, 4}))}; }, "exp", 0);
  check_rule({x}, [](auto &in) { return T{ops::transpose(ops::transpose(in[0], {1, 0, 2}), {0, 2, 1})}; },
             "transpose", 0);
  check_rule({x}, [](auto &in) { return T{ops::exp(ops::transpose(ops::transpose(in[0], {1, 2, 0}), {2, 0, 1}))}; },
             "exp", 0);
  check_rule({x}, [](auto &in) { return T{ops::exp(ops::transpose(ops::transpose(in[0]), {}))}; }, "exp", 0);
  check_rule({x}, [](auto &in) { return T{ops::exp(ops::transpose(in[0], {0, 1, 2}))}; }, "exp", 0);
  // Near misses: a reshape of a transpose, a transpose of a reshape.
  check_unchanged({x}, [](auto &in) { return T{ops::reshape(ops::transpose(in[0], {1, 0, 2}), {6, 4})}; });
  check_unchanged({x}, [](auto &in) { return T{ops::transpose(ops::reshape(in[0], {6, 4}), {1, 0})}; });
}

TEST_CASE("canonicalize: a transpose that moves only dims of size 1 is a reshape", "[transforms][canonicalize]") {
  // tf2onnx's NHWC -> NCHW transpose of a 1-channel image.
  HostTensor img = random_tensor(DType::f32, {5, 7, 6, 1});
  check_rule({img}, [](auto &in) { return T{ops::transpose(in[0], {0, 3, 1, 2})}; }, "reshape", 0);
  check_rule({img}, [](auto &in) { return T{ops::exp(ops::transpose(in[0], {3, 0, 1, 2}))}; }, "reshape exp", 0);
  HostTensor x = random_tensor(DType::f32, {1, 4, 1, 3});
  check_rule({x}, [](auto &in) { return T{ops::transpose(in[0], {2, 1, 3, 0})}; }, "reshape", 0);
  // Near misses: dims not of size 1 change order.
  check_unchanged({x}, [](auto &in) { return T{ops::transpose(in[0], {0, 3, 2, 1})}; });
  check_unchanged({img}, [](auto &in) { return T{ops::transpose(in[0], {0, 2, 1, 3})}; });
}

TEST_CASE("canonicalize: a reshaped, squeezed or unsqueezed constant read once is a constant", "[transforms][canonicalize]") {
  HostTensor x = random_tensor(DType::f32, {3, 4}), w = random_tensor(DType::f32, {20}), b = random_tensor(DType::f32, {4});
  check_rule({x}, [&](auto &in) { return T{ops::matmul(in[0], ops::reshape(Tensor::from_host(w), {4, 5}))}; }, "matmul",
             0);
  // unsqueeze, then squeeze of the constant the first rewrite made.
  Canonicalized c = canonicalize_traced({x}, [&](auto &in) {
    return T{in[0] + ops::squeeze(ops::unsqueeze(Tensor::from_host(b), {0, 2}), {2})};
  });
  REQUIRE(c.after);
  CHECK(op_list(*c.after) == "add");
  CHECK(c.stats.fired["constant-reshape"] == 2);
  CHECK(Interpreter::run(*c.after, {x})[0].identical(Interpreter::run(*c.before, {x})[0]));
  // Near miss: the constant is also read as it is (a second constant of the
  // same bytes would be a second copy in the artifact).
  Graph g("g", {TensorType(DType::f32, {3, 4}), TensorType(DType::f32, {20})});
  {
    GraphRealizationContext ctx(g);
    Tensor cw = ctx.add_source(Tensor::from_host(w), "w"); // one constant node, two readers
    Tensor a = Tensor::from_graph_value(g.inputs()[0]), y = Tensor::from_graph_value(g.inputs()[1]);
    g.output({ops::matmul(a, ops::reshape(cw, {4, 5})).value(), (y + cw).value()});
  }
  CHECK_FALSE(canonicalize(g));
}

TEST_CASE("canonicalize: data movement on constants folds to a constant", "[transforms][canonicalize]") {
  // An LSTM's weight as an exporter reorders its gates: slices of a constant
  // concatenated in another order, transposed, then reshaped: one constant,
  // read by the matmul where it lies, the same bits.
  HostTensor x = random_tensor(DType::f32, {3, 4}), w = random_tensor(DType::f32, {8, 4});
  Canonicalized c = canonicalize_traced({x}, [&](auto &in) {
    Tensor cw = Tensor::from_host(w);
    Tensor gates = ops::concat({ops::slice(cw, {6}, {8}, {0}), ops::slice(cw, {0}, {6}, {0})}, 0);
    return T{ops::matmul(in[0], ops::reshape(ops::transpose(gates, {1, 0}), {4, 8}))};
  });
  REQUIRE(c.after);
  CHECK(op_list(*c.after) == "matmul");
  CHECK(c.stats.fired["constant-fold"] == 4);
  CHECK(Interpreter::run(*c.after, {x})[0].identical(Interpreter::run(*c.before, {x})[0]));
  // A gather with constant indices folds too; a cast stays (a widened
  // 8-bit weight is what the integer GEMM recognizes).
  HostTensor table = random_tensor(DType::f64, {4, 4});
  check_rule({x}, [&](auto &in) {
    Tensor idx = Tensor::from_host(HostTensor::from_i64(DType::i64, {1}, {3}));
    return T{in[0] + ops::cast(ops::gather(Tensor::from_host(table), idx, 0), DType::f32)};
  }, "cast add", 0);
  // Near misses: a slice of an input; a transpose of a constant that is also
  // read as it is, past the small size (folding would copy it).
  check_unchanged({x}, [](auto &in) { return T{ops::slice(in[0], {1}, {3}, {0})}; });
  HostTensor big = random_tensor(DType::f32, {256, 512});
  Graph g("g", {TensorType(DType::f32, {3, 256})});
  {
    GraphRealizationContext ctx(g);
    Tensor cw = ctx.add_source(Tensor::from_host(big), "w"); // one constant node, two readers
    Tensor a = Tensor::from_graph_value(g.inputs()[0]);
    g.output({ops::matmul(a, cw).value(), ops::transpose(cw, {1, 0}).value()});
  }
  CHECK_FALSE(canonicalize(g));
}

TEST_CASE("rewrite driver: fixed point, dead nodes, bodies shared, unchanged graphs", "[transforms][rewrite]") {
  HostTensor x = random_tensor(DType::f32, {4, 16}, 0.5, 2);
  // A chain that takes several rewrites: cast chains collapse one link per
  // pattern application, and pow(x, 2) / sqrt(...) meet after the first round.
  Canonicalized c = canonicalize_traced({x}, [](auto &in) {
    Tensor t = ops::cast(ops::cast(ops::cast(in[0], DType::f64), DType::f64), DType::f32);
    Tensor sq = ops::pow(t, ops::full(2.0, DType::f32));
    return T{in[0] / ops::sqrt(ops::mean(sq, {1}, true) + ops::full(1e-5, DType::f32))};
  });
  REQUIRE(c.after);
  CHECK(op_list(*c.after) == "mul mean add rsqrt mul");
  CHECK(c.stats.rounds >= 2);
  CHECK(c.stats.fired["pow-by-constant"] == 1);
  CHECK(c.stats.fired["div-by-sqrt"] == 1);
  CHECK(c.stats.fired["cast-chain"] >= 2);
  auto want = Interpreter::run(*c.before, {x});
  auto got = Interpreter::run(*c.after, {x});
  CHECK(max_ulps(got[0], want[0]) <= 4);
  // Nothing to rewrite: null, the caller keeps its graph.
  check_unchanged({x}, [](auto &in) { return T{ops::exp(in[0]) * in[0]}; });

  // Bodies are rewritten once, keep their names, and stay shared.
  Graph graph("g", {TensorType(DType::f32, {2, 8})});
  {
    GraphRealizationContext ctx(graph);
    Tensor h = Tensor::from_graph_value(graph.inputs()[0]);
    for (int i = 0; i < 3; ++i)
      h = ctx.call(nullptr,
                   [](auto &, auto &a, auto &p) {
                     return TensorTree(ops::matmul(ops::pow(a[0], ops::full(2.0, DType::f32)), p.at("w")));
                   },
                   {h}, {{"w", Tensor::from_host(random_tensor(DType::f32, {8, 8}, -0.5, 0.5))}})
              .tensor();
    graph.output({h});
  }
  RewriteStats stats;
  auto after = canonicalize(graph, &stats);
  REQUIRE(after);
  after->verify();
  REQUIRE(after->subgraphs().size() == 1);
  CHECK(after->subgraphs().begin()->first == graph.subgraphs().begin()->first);
  CHECK(op_list(*after->subgraphs().begin()->second) == "mul matmul");
  CHECK(stats.fired["pow-by-constant"] == 1);
  HostTensor in = random_tensor(DType::f32, {2, 8});
  CHECK(Interpreter::run(*after, {in})[0].identical(Interpreter::run(graph, {in})[0]));
}

TEST_CASE("without_dead_nodes drops what nothing reads, keeps the interface", "[transforms][rewrite]") {
  Graph g("g", {TensorType(DType::f32, {3}), TensorType(DType::f32, {3})});
  {
    GraphRealizationContext ctx(g);
    Tensor a = Tensor::from_graph_value(g.inputs()[0]), b = Tensor::from_graph_value(g.inputs()[1]);
    Tensor unused = ops::exp(ops::sqrt(b)); // dead, and so is its operand
    (void)unused;
    g.output({a + b});
  }
  auto pruned = without_dead_nodes(g);
  REQUIRE(pruned);
  CHECK(op_list(*pruned) == "add");
  CHECK(pruned->input_ids().size() == 2);
  CHECK_FALSE(without_dead_nodes(*pruned));
}

TEST_CASE("without_dead_nodes drops a symbol's definition once nothing names the symbol", "[transforms][rewrite]") {
  // An ONNX Range whose result nothing reads left its bind_dim behind: the
  // symbol then had no slot in the dims array (an internal codegen error).
  auto build = [](bool read) {
    return test::trace_graph({TensorType(DType::f32, {4})}, [read](const std::vector<Tensor> &in) {
      Dim n = ops::bind_dim(ops::cast(ops::sum(in[0], {0}), DType::i32), "n", 16);
      Tensor r = ops::sum(ops::iota({n}, 0, DType::f32), {0});
      return read ? std::vector<Tensor>{in[0] * 2.0, r} : std::vector<Tensor>{in[0] * 2.0};
    });
  };
  auto dead = build(false);
  auto pruned = without_dead_nodes(*dead);
  REQUIRE(pruned);
  CHECK(op_list(*pruned) == "mul");
  CHECK(dim_symbols(*pruned).empty());
  auto kept = build(true);
  auto same = without_dead_nodes(*kept);
  const Graph &g = same ? *same : *kept;
  CHECK(op_list(g).find("bind_dim") != std::string::npos);
  CHECK(dim_symbols(g) == std::vector<std::string>{"n"});
}

namespace {

/// torch's LayerNorm at opset < 17: ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add.
Tensor spelled_layer_norm(const Tensor &x, const Tensor &w, const Tensor &b, std::vector<int64_t> axes, double eps) {
  Tensor d = x - ops::mean(x, axes, true);
  Tensor var = ops::mean(ops::pow(d, ops::full(2.0, x.dtype())), axes, true);
  return d / ops::sqrt(var + ops::full(eps, x.dtype())) * w + b;
}

/// Llama's RMSNorm as exported: Pow, ReduceMean, Add, Sqrt, Reciprocal (1/x), Mul, Mul.
Tensor spelled_rms_norm(const Tensor &x, const Tensor &w, double eps) {
  Tensor ms = ops::mean(ops::pow(x, ops::full(2.0, x.dtype())), {-1}, true);
  return w * (x * (ops::full(1.0, x.dtype()) / ops::sqrt(ms + ops::full(eps, x.dtype()))));
}

std::string canonical_ops(const std::vector<HostTensor> &inputs, const BuildFn &build) {
  Canonicalized c = canonicalize_traced(inputs, build);
  return c.after ? op_list(*c.after) : op_list(*c.before);
}

} // namespace

TEST_CASE("canonicalize: spelled-out LayerNorm and RMSNorm become the composite ops", "[transforms][canonicalize]") {
  HostTensor x = random_tensor(DType::f32, {2, 5, 32}, -3, 3);
  HostTensor w = random_tensor(DType::f32, {32}, 0.5, 1.5), b = random_tensor(DType::f32, {32});
  BuildFn ln = [](auto &in) { return T{spelled_layer_norm(in[0], in[1], in[2], {-1}, 1e-5)}; };
  Canonicalized c = canonicalize_traced({x, w, b}, ln);
  REQUIRE(c.after);
  CHECK(op_list(*c.after) == "layer_norm");
  CHECK(c.stats.fired["layer-norm"] == 1);
  MAXC_REQUIRE_CLOSE(Interpreter::run(*c.after, {x, w, b})[0], Interpreter::run(*c.before, {x, w, b})[0], 1e-5, 1e-5);
  // Over the two trailing axes, axes written positive, b + w·n.
  HostTensor w2 = random_tensor(DType::f32, {5, 32}), b2 = random_tensor(DType::f32, {5, 32});
  CHECK(canonical_ops({x, w2, b2}, [](auto &in) {
          Tensor d = in[0] - ops::mean(in[0], {1, 2}, true);
          Tensor var = ops::mean(d * d, {2, 1}, true);
          return T{in[2] + in[1] * (d * ops::rsqrt(ops::full(1e-6, DType::f32) + var))};
        }) == "layer_norm");

  // Without the + b (Moonshine's encoder): a layer norm of no bias, rooted
  // at the weight's product; a residual add after it stays an add.
  auto no_bias = [](const Tensor &x, const Tensor &w) {
    Tensor d = x - ops::mean(x, {-1}, true);
    return d * ops::rsqrt(ops::mean(d * d, {-1}, true) + ops::full(1e-5, DType::f32)) * w;
  };
  Canonicalized nb = canonicalize_traced({x, w}, [&](auto &in) { return T{no_bias(in[0], in[1])}; });
  REQUIRE(nb.after);
  CHECK(op_list(*nb.after) == "layer_norm");
  CHECK(nb.stats.fired["rms-norm"] == 1);
  MAXC_REQUIRE_CLOSE(Interpreter::run(*nb.after, {x, w})[0], Interpreter::run(*nb.before, {x, w})[0], 1e-5, 1e-5);
  CHECK(canonical_ops({x, w}, [&](auto &in) { return T{in[0] + no_bias(in[0], in[1])}; }) == "layer_norm add");
  // (A + b of the row's shape after it: the layer-norm pattern's, whole.)
  Canonicalized wb = canonicalize_traced({x, w, b}, [&](auto &in) { return T{no_bias(in[0], in[1]) + in[2]}; });
  REQUIRE(wb.after);
  CHECK(op_list(*wb.after) == "layer_norm");
  CHECK(wb.stats.fired["layer-norm"] == 1);

  BuildFn rms = [](auto &in) { return T{spelled_rms_norm(in[0], in[1], 1e-6)}; };
  Canonicalized r = canonicalize_traced({x, w}, rms);
  REQUIRE(r.after);
  CHECK(op_list(*r.after) == "rms_norm");
  MAXC_REQUIRE_CLOSE(Interpreter::run(*r.after, {x, w})[0], Interpreter::run(*r.before, {x, w})[0], 1e-5, 1e-5);
}

TEST_CASE("canonicalize: norm near misses are not fused", "[transforms][canonicalize]") {
  HostTensor x = random_tensor(DType::f32, {4, 32}, -3, 3);
  HostTensor w = random_tensor(DType::f32, {32}), b = random_tensor(DType::f32, {32});
  auto no_norm = [](const std::string &ops_after) {
    INFO(ops_after);
    CHECK(ops_after.find("layer_norm") == std::string::npos);
    CHECK(ops_after.find("rms_norm") == std::string::npos);
  };
  // Over the leading axis.
  no_norm(canonical_ops({x, w, b}, [](auto &in) {
    HostTensor w0 = random_tensor(DType::f32, {4, 1});
    return T{spelled_layer_norm(in[0], Tensor::from_host(w0), Tensor::from_host(w0), {0}, 1e-5)};
  }));
  // The weight is [1, C], not [C]: the composite's weight would change the result's shape rules.
  HostTensor w1 = random_tensor(DType::f32, {1, 32});
  no_norm(canonical_ops({x, w1, b}, [](auto &in) { return T{spelled_layer_norm(in[0], in[1], in[2], {-1}, 1e-5)}; }));
  // The centered value is also an output: fusing would compute it twice.
  no_norm(canonical_ops({x, w, b}, [](auto &in) {
    Tensor d = in[0] - ops::mean(in[0], {-1}, true);
    Tensor var = ops::mean(d * d, {-1}, true);
    return T{d * ops::rsqrt(var + ops::full(1e-5, DType::f32)) * in[1] + in[2], d};
  }));
  // Different axes for the two means.
  HostTensor x3 = random_tensor(DType::f32, {2, 4, 32});
  no_norm(canonical_ops({x3, w, b}, [](auto &in) {
    Tensor d = in[0] - ops::mean(in[0], {-1}, true);
    Tensor var = ops::mean(d * d, {-2, -1}, true);
    return T{d * ops::rsqrt(var + ops::full(1e-5, DType::f32)) * in[1] + in[2]};
  }));
  // rms: the square of another value; eps not a scalar.
  no_norm(canonical_ops({x, w}, [](auto &in) {
    Tensor y = in[0] + ops::full(1.0, DType::f32);
    return T{in[0] * ops::rsqrt(ops::mean(y * y, {-1}, true) + ops::full(1e-6, DType::f32)) * in[1]};
  }));
  no_norm(canonical_ops({x, w}, [](auto &in) {
    return T{in[0] * ops::rsqrt(ops::mean(in[0] * in[0], {-1}, true) + in[1]) * in[1]};
  }));
}

TEST_CASE("canonicalized norms compile and match the reference on the CPU and the GPU emulator", "[transforms][canonicalize][codegen]") {
  HostTensor x = random_tensor(DType::f32, {3, 64}, -3, 3);
  HostTensor w = random_tensor(DType::f32, {64}, 0.5, 1.5), b = random_tensor(DType::f32, {64});
  std::unique_ptr<Graph> g = trace_graph(types_of({x, w, b}), [](auto &in) {
    return T{spelled_layer_norm(in[0], in[1], in[2], {-1}, 1e-5), spelled_rms_norm(in[0], in[1], 1e-6),
             ops::pow(in[0], ops::full(3.0, DType::f32))};
  });
  auto want = Interpreter::run(*g, {x, w, b});
  for (const char *backend : {"cpu", "amdgpu-emu"}) {
    auto got = driver::run_on_host(backend, *g, {x, w, b});
    REQUIRE(got.size() == 3);
    for (size_t i = 0; i < 3; ++i) {
      INFO(backend << " output " << i);
      MAXC_REQUIRE_CLOSE(got[i], want[i], 1e-5, 1e-5);
    }
  }
}

TEST_CASE("canonicalize: a depthwise 1x1 conv folds into the conv that reads it", "[transforms][canonicalize]") {
  // Keras' SeparableConv2D with a 1x1 depthwise step, as tf2onnx writes it.
  HostTensor x = random_tensor(DType::f32, {2, 6, 5, 7});
  HostTensor d = random_tensor(DType::f32, {6, 1, 1, 1}), e = random_tensor(DType::f32, {6});
  HostTensor w1 = random_tensor(DType::f32, {4, 6, 1, 1}), w3 = random_tensor(DType::f32, {4, 6, 3, 3});
  HostTensor b = random_tensor(DType::f32, {4});
  ops::Conv2dOptions depthwise;
  depthwise.groups = 6;
  ops::Conv2dOptions padded;
  padded.padding = {1, 1, 1, 1};
  auto scaled = [&](const Tensor &in, bool bias) {
    return ops::conv2d(in, Tensor::from_host(d), bias ? std::optional<Tensor>(Tensor::from_host(e)) : std::nullopt,
                       depthwise);
  };
  auto check_folds = [&](const BuildFn &build, const std::string &expected) {
    Canonicalized c = canonicalize_traced({x}, build);
    REQUIRE(c.after);
    CHECK(op_list(*c.after) == expected);
    CHECK(c.stats.fired["conv-of-channel-scale"] == 1);
    auto want = Interpreter::run(*c.before, {x});
    MAXC_REQUIRE_CLOSE(Interpreter::run(*c.after, {x})[0], want[0], 1e-5, 1e-5);
    MAXC_REQUIRE_CLOSE(driver::run_on_host("cpu", *c.before, {x})[0], want[0], 1e-5, 1e-5);
  };
  // Pointwise, both with bias; a 3x3 conv without padding (the depthwise
  // bias folds through all nine taps); a padded 3x3 conv of a scale alone.
  check_folds([&](auto &in) {
    return T{ops::relu(ops::conv2d(scaled(ops::relu(in[0]), true), Tensor::from_host(w1), Tensor::from_host(b)))};
  }, "relu conv2d relu");
  check_folds([&](auto &in) { return T{ops::conv2d(scaled(in[0], true), Tensor::from_host(w3))}; }, "conv2d");
  check_folds([&](auto &in) {
    return T{ops::conv2d(scaled(in[0], false), Tensor::from_host(w3), Tensor::from_host(b), padded)};
  }, "conv2d");
  // Near misses: a padded conv of a biased scale (a padded tap reads 0, not
  // the bias); a 3x3 depthwise kernel; a strided depthwise step; a grouped
  // reader; the scale read twice; weights that are inputs.
  check_unchanged({x}, [&](auto &in) {
    return T{ops::conv2d(scaled(in[0], true), Tensor::from_host(w3), std::nullopt, padded)};
  });
  HostTensor d3 = random_tensor(DType::f32, {6, 1, 3, 3});
  check_unchanged({x}, [&](auto &in) {
    return T{ops::conv2d(ops::conv2d(in[0], Tensor::from_host(d3), std::nullopt, depthwise), Tensor::from_host(w1))};
  });
  ops::Conv2dOptions strided = depthwise;
  strided.stride = {2, 2};
  check_unchanged({x}, [&](auto &in) {
    return T{ops::conv2d(ops::conv2d(in[0], Tensor::from_host(d), std::nullopt, strided), Tensor::from_host(w1))};
  });
  ops::Conv2dOptions two_groups;
  two_groups.groups = 2;
  HostTensor wg = random_tensor(DType::f32, {4, 3, 1, 1});
  check_unchanged({x}, [&](auto &in) {
    return T{ops::conv2d(scaled(in[0], false), Tensor::from_host(wg), std::nullopt, two_groups)};
  });
  check_unchanged({x}, [&](auto &in) {
    Tensor s = scaled(in[0], false);
    return T{ops::conv2d(s, Tensor::from_host(w1)), s};
  });
  check_unchanged({x, d, w1}, [&](auto &in) {
    return T{ops::conv2d(ops::conv2d(in[0], in[1], std::nullopt, depthwise), in[2])};
  });
}

TEST_CASE("canonicalize: a conv weight dequantized on every run is computed at compile time",
          "[transforms][canonicalize]") {
  // ONNX Runtime's weight quantizer: Cast(8-bit) → Mul(scale) → Add(zero
  // point) before a float conv (Moonshine's audio stem), here 1-D as the
  // importer writes it (unsqueezed to 2-D). The folded weight is what the
  // reference computes: bit-identical results.
  HostTensor x = random_tensor(DType::f32, {1, 6, 1, 29});
  HostTensor q = random_tensor(DType::i8, {5, 6, 7}, -128, 127), scale = random_tensor(DType::f32, {1}, 0.01, 0.02);
  HostTensor zp = random_tensor(DType::f32, {1}, -0.1, 0.1), b = random_tensor(DType::f32, {5});
  ops::Conv2dOptions strided;
  strided.stride = {1, 3};
  auto weight = [&] {
    Tensor w = ops::cast(Tensor::from_host(q, "w.quantized"), DType::f32) * Tensor::from_host(scale);
    return ops::unsqueeze(w + Tensor::from_host(zp), {2});
  };
  Canonicalized c = canonicalize_traced({x}, [&](auto &in) {
    return T{ops::conv2d(in[0], weight(), Tensor::from_host(b), strided)};
  });
  REQUIRE(c.after);
  CHECK(op_list(*c.after) == "conv2d");
  CHECK(c.stats.fired["conv-of-computed-weight"] == 1);
  auto want = Interpreter::run(*c.before, {x});
  CHECK(max_ulps(Interpreter::run(*c.after, {x})[0], want[0]) == 0);
  MAXC_REQUIRE_CLOSE(driver::run_on_host("cpu", *c.after, {x})[0], want[0], 1e-5, 1e-5);
  // A weight computed from a graph input stays as it is.
  check_unchanged({x, random_tensor(DType::f32, {1})}, [&](auto &in) {
    Tensor w = ops::cast(Tensor::from_host(q), DType::f32) * in[1];
    return T{ops::conv2d(in[0], ops::unsqueeze(w, {2}), std::nullopt, strided)};
  });
}

TEST_CASE("canonicalize: a zero pad of a conv's spatial dims is the conv's padding", "[transforms][canonicalize]") {
  // tf2onnx's MobileNet: ReLU6, an explicit pad, a strided depthwise conv.
  HostTensor x = random_tensor(DType::f32, {2, 6, 9, 8});
  HostTensor dw = random_tensor(DType::f32, {6, 1, 3, 3}), w = random_tensor(DType::f32, {4, 6, 3, 3});
  ops::Conv2dOptions strided;
  strided.stride = {2, 2};
  strided.groups = 6;
  check_rule({x}, [&](auto &in) {
    Tensor six = ops::minimum(ops::relu(in[0]), ops::full(6.0, DType::f32));
    return T{ops::conv2d(ops::pad(six, {0, 0, 0, 0, 0, 1, 0, 1}), Tensor::from_host(dw), std::nullopt, strided)};
  }, "relu minimum conv2d", 0);
  // Added to the conv's own padding, asymmetric.
  ops::Conv2dOptions padded;
  padded.padding = {1, 0, 1, 2};
  check_rule({x}, [&](auto &in) {
    return T{ops::conv2d(ops::pad(in[0], {0, 0, 0, 0, 2, 1, 0, 3}), Tensor::from_host(w), std::nullopt, padded)};
  }, "conv2d", 0);
  // Near misses: a nonzero fill; a crop; a pad of the channels; a pad read twice.
  check_unchanged({x}, [&](auto &in) {
    return T{ops::conv2d(ops::pad(in[0], {0, 0, 0, 0, 1, 1, 1, 1}, 1.0), Tensor::from_host(w))};
  });
  check_unchanged({x}, [&](auto &in) {
    return T{ops::conv2d(ops::pad(in[0], {0, 0, 0, 0, -1, 1, 1, 1}), Tensor::from_host(w))};
  });
  HostTensor w7 = random_tensor(DType::f32, {4, 7, 3, 3});
  check_unchanged({x}, [&](auto &in) {
    return T{ops::conv2d(ops::pad(in[0], {0, 0, 1, 0, 1, 1, 1, 1}), Tensor::from_host(w7))};
  });
  check_unchanged({x}, [&](auto &in) {
    Tensor p = ops::pad(in[0], {0, 0, 0, 0, 1, 1, 1, 1});
    return T{ops::conv2d(p, Tensor::from_host(w)), p};
  });
}

TEST_CASE("canonicalize: a zero pad of a never-negative value before a max pool is the pool's padding",
          "[transforms][canonicalize]") {
  // Keras: ReLU, ZeroPadding2D, MaxPooling2D(3, strides 2).
  HostTensor x = random_tensor(DType::f32, {2, 3, 9, 8});
  ops::Pool2dOptions pool;
  pool.kernel = {3, 3};
  pool.stride = {2, 2};
  check_rule({x}, [&](auto &in) { return T{ops::max_pool2d(ops::pad(ops::relu(in[0]), {0, 0, 0, 0, 1, 1, 1, 1}), pool)}; },
             "relu max_pool2d", 0);
  check_rule({x}, [&](auto &in) {
    Tensor six = ops::minimum(ops::relu(in[0]), ops::full(6.0, DType::f32));
    return T{ops::max_pool2d(ops::pad(six, {0, 0, 0, 0, 0, 2, 1, 0}), pool)};
  }, "relu minimum max_pool2d", 0);
  // Near misses: the value may be negative; a nonzero fill; a pad as wide
  // as the kernel (a window of padding alone); channels padded.
  check_unchanged({x}, [&](auto &in) { return T{ops::max_pool2d(ops::pad(in[0], {0, 0, 0, 0, 1, 1, 1, 1}), pool)}; });
  check_unchanged({x}, [&](auto &in) {
    return T{ops::max_pool2d(ops::pad(ops::relu(in[0]), {0, 0, 0, 0, 1, 1, 1, 1}, 1.0), pool)};
  });
  check_unchanged({x}, [&](auto &in) {
    return T{ops::max_pool2d(ops::pad(ops::relu(in[0]), {0, 0, 0, 0, 3, 0, 0, 0}), pool)};
  });
  check_unchanged({x}, [&](auto &in) {
    return T{ops::max_pool2d(ops::pad(ops::relu(in[0]), {0, 0, 1, 0, 1, 1, 1, 1}), pool)};
  });
}

TEST_CASE("decompose: a dilated 3x3 conv becomes an undilated one over a batch of subsampled images",
          "[transforms][decompose]") {
  // M-LSD's decoder: 3x3, dilation 5, padding 5, after a batch norm that
  // folds into it first; here dilation (2, 3) on 16x24 images, 20 channels
  // (the CPU's Winograd kernel takes the undilated conv; the CPU backend
  // asks for the rewrite, the GPU's do not).
  HostTensor x = random_tensor(DType::f32, {2, 20, 16, 24});
  HostTensor w = random_tensor(DType::f32, {20, 20, 3, 3}), b = random_tensor(DType::f32, {20});
  ops::Conv2dOptions dilated;
  dilated.dilation = {2, 3};
  dilated.padding = {2, 3, 2, 3};
  auto bn = [](const Tensor &t) {
    return ops::batch_norm(t, Tensor::from_host(random_tensor(DType::f32, {20}, 0.5, 2)),
                           Tensor::from_host(random_tensor(DType::f32, {20})),
                           Tensor::from_host(random_tensor(DType::f32, {20})),
                           Tensor::from_host(random_tensor(DType::f32, {20}, 0.1, 2)), 1e-5);
  };
  auto g = trace_graph(types_of({x}), [&](auto &in) {
    return T{ops::relu(bn(ops::conv2d(in[0], Tensor::from_host(w), Tensor::from_host(b), dilated)))};
  });
  DecomposeOptions with_batch;
  with_batch.dilated_conv_as_batch = true;
  CHECK(op_list(*decompose(*g)) == "conv2d relu"); // only where the backend asks
  auto lowered = decompose(*g, with_batch);
  lowered->verify();
  CHECK(op_list(*lowered) == "reshape transpose reshape conv2d reshape transpose reshape relu");
  for (const Node &n : lowered->nodes())
    if (n.op == "conv2d") {
      CHECK(n.attrs.get_ints("dilation") == std::vector<int64_t>{1, 1});
      CHECK(n.attrs.get_ints("padding") == std::vector<int64_t>{1, 1, 1, 1});
    }
  auto want = Interpreter::run(*g, {x});
  MAXC_REQUIRE_CLOSE(Interpreter::run(*lowered, {x})[0], want[0], 1e-4, 1e-4);
  for (const char *backend : {"cpu", "amdgpu-emu"}) {
    INFO(backend);
    MAXC_REQUIRE_CLOSE(driver::run_on_host(backend, *g, {x})[0], want[0], 1e-4, 1e-4);
  }
  // A symbolic batch: [n * dh * dw, ...] in between.
  {
    auto gs = std::make_unique<Graph>("g", std::vector<TensorType>{TensorType(DType::f32, {Dim("n"), 20, 16, 24})});
    {
      GraphRealizationContext ctx(*gs);
      gs->output({ops::conv2d(Tensor::from_graph_value(gs->inputs()[0]), Tensor::from_host(w), Tensor::from_host(b),
                              dilated)});
    }
    auto ls = decompose(*gs, with_batch);
    ls->verify();
    CHECK(op_list(*ls) == "reshape transpose reshape conv2d reshape transpose reshape");
    HostTensor x3 = random_tensor(DType::f32, {3, 20, 16, 24});
    auto want3 = Interpreter::run(*gs, {x3});
    MAXC_REQUIRE_CLOSE(Interpreter::run(*ls, {x3})[0], want3[0], 1e-4, 1e-4);
    MAXC_REQUIRE_CLOSE(driver::run_on_host("cpu", *gs, {x3})[0], want3[0], 1e-4, 1e-4);
  }
  // Near misses: a height not a multiple of the dilation; a pad not a
  // multiple of it; a stride; subsampled images below 8 rows; a 5x5 kernel.
  auto unchanged = [&](const std::vector<int64_t> &shape, const std::vector<int64_t> &wshape, ops::Conv2dOptions o) {
    HostTensor xi = random_tensor(DType::f32, shape), wi = random_tensor(DType::f32, wshape);
    auto gi = trace_graph(types_of({xi}), [&](auto &in) { return T{ops::conv2d(in[0], Tensor::from_host(wi), std::nullopt, o)}; });
    CHECK_FALSE(apply_patterns(*gi, {&dilated_conv_as_batch_pattern()}));
  };
  unchanged({1, 4, 17, 24}, {4, 4, 3, 3}, dilated);
  ops::Conv2dOptions odd_pad = dilated;
  odd_pad.padding = {1, 3, 3, 3};
  unchanged({1, 4, 16, 24}, {4, 4, 3, 3}, odd_pad);
  ops::Conv2dOptions strided = dilated;
  strided.stride = {2, 2};
  unchanged({1, 4, 16, 24}, {4, 4, 3, 3}, strided);
  unchanged({1, 4, 14, 24}, {4, 4, 3, 3}, dilated);
  ops::Conv2dOptions five = dilated;
  five.padding = {4, 6, 4, 6};
  unchanged({1, 4, 16, 24}, {4, 4, 5, 5}, five);
}

TEST_CASE("canonicalize: a transposed conv with stride = kernel becomes a GEMM", "[transforms][canonicalize]") {
  HostTensor x = random_tensor(DType::f32, {2, 6, 5, 7});
  HostTensor w = random_tensor(DType::f32, {6, 4, 2, 3}), b = random_tensor(DType::f32, {4});
  auto up = [](std::vector<int64_t> stride, std::vector<int64_t> padding = {0, 0, 0, 0},
               std::vector<int64_t> output_padding = {0, 0}, int64_t groups = 1) {
    ops::ConvTranspose2dOptions o;
    o.stride = stride;
    o.padding = padding;
    o.output_padding = output_padding;
    o.groups = groups;
    return o;
  };
  BuildFn with_bias = [&](auto &in) {
    return T{ops::relu(ops::conv_transpose2d(ops::relu(in[0]), in[1], in[2], up({2, 3})))};
  };
  Canonicalized c = canonicalize_traced({x, w, b}, with_bias);
  REQUIRE(c.after);
  CHECK(op_list(*c.after) == "relu reshape reshape matmul reshape transpose reshape add reshape relu");
  CHECK(c.stats.fired["conv-transpose-as-matmul"] == 1);
  MAXC_REQUIRE_CLOSE(Interpreter::run(*c.after, {x, w, b})[0], Interpreter::run(*c.before, {x, w, b})[0], 1e-5, 1e-5);
  // Compiled (the CPU's GEMM and the view after it) against the reference on the traced graph.
  auto want = Interpreter::run(*c.before, {x, w, b});
  for (const char *backend : {"cpu", "amdgpu-emu"}) {
    INFO(backend);
    MAXC_REQUIRE_CLOSE(driver::run_on_host(backend, *c.before, {x, w, b})[0], want[0], 1e-5, 1e-5);
  }
  // Without bias, and with a symbolic batch (spatial dims must be static for the op today).
  auto g = std::make_unique<Graph>("g", std::vector<TensorType>{TensorType(DType::f32, {Dim("n"), 6, 4, 9}),
                                                                TensorType(DType::f32, {6, 4, 2, 3})});
  {
    GraphRealizationContext ctx(*g);
    g->output({ops::conv_transpose2d(Tensor::from_graph_value(g->inputs()[0]), Tensor::from_graph_value(g->inputs()[1]),
                                     std::nullopt, up({2, 3}))});
  }
  auto after = canonicalize(*g);
  REQUIRE(after);
  HostTensor x2 = random_tensor(DType::f32, {3, 6, 4, 9});
  MAXC_REQUIRE_CLOSE(Interpreter::run(*after, {x2, w})[0], Interpreter::run(*g, {x2, w})[0], 1e-5, 1e-5);
  MAXC_REQUIRE_CLOSE(driver::run_on_host("cpu", *g, {x2, w})[0], Interpreter::run(*g, {x2, w})[0], 1e-5, 1e-5);

  // Near misses: two groups, dilation, a 1x1 kernel at stride 1, more than
  // 16 shifted terms (5x5 at stride 1).
  HostTensor w4 = random_tensor(DType::f32, {6, 2, 2, 2});
  check_unchanged({x, w4}, [&](auto &in) { return T{ops::conv_transpose2d(in[0], in[1], std::nullopt, up({2, 2}, {0, 0, 0, 0}, {0, 0}, 2))}; });
  ops::ConvTranspose2dOptions dilated = up({2, 3});
  dilated.dilation = {2, 1};
  check_unchanged({x, w}, [&](auto &in) { return T{ops::conv_transpose2d(in[0], in[1], std::nullopt, dilated)}; });
  HostTensor w1 = random_tensor(DType::f32, {6, 4, 1, 1});
  check_unchanged({x, w1}, [&](auto &in) { return T{ops::conv_transpose2d(in[0], in[1], std::nullopt, up({1, 1}))}; });
  HostTensor w5 = random_tensor(DType::f32, {6, 4, 5, 5});
  check_unchanged({x, w5}, [&](auto &in) { return T{ops::conv_transpose2d(in[0], in[1], std::nullopt, up({1, 1}))}; });
}

TEST_CASE("canonicalize: a transposed conv with overlapping windows is a GEMM and shifted sums", "[transforms][canonicalize]") {
  // HTDemucs' decoders (kernel 8, stride 4, 2-D along H and 1-D along W),
  // a stride below the kernel, kernels that are not multiples of the stride
  // (zero taps appended), a kernel below the stride, padding and output
  // padding (cropped / extended, the bias on every position).
  HostTensor x = random_tensor(DType::f32, {2, 6, 5, 7}), b = random_tensor(DType::f32, {4});
  HostTensor w81 = random_tensor(DType::f32, {6, 4, 8, 1}), w18 = random_tensor(DType::f32, {6, 4, 1, 8});
  HostTensor w35 = random_tensor(DType::f32, {6, 4, 3, 5}), w23 = random_tensor(DType::f32, {6, 4, 2, 3});
  auto opts = [](std::vector<int64_t> stride, std::vector<int64_t> padding = {0, 0, 0, 0},
                 std::vector<int64_t> output_padding = {0, 0}) {
    ops::ConvTranspose2dOptions o;
    o.stride = stride;
    o.padding = padding;
    o.output_padding = output_padding;
    return o;
  };
  BuildFn build = [&](auto &in) {
    return T{ops::conv_transpose2d(in[0], in[1], in[5], opts({4, 1})),
             ops::conv_transpose2d(ops::relu(in[0]), in[2], in[5], opts({1, 4})),
             ops::conv_transpose2d(in[0], in[3], std::nullopt, opts({2, 2}, {1, 2, 0, 1}, {1, 1})),
             ops::conv_transpose2d(in[0], in[3], in[5], opts({1, 3}, {0, 0, 2, 1})),
             ops::conv_transpose2d(in[0], in[4], in[5], opts({3, 2}, {0, 0, 0, 0}, {2, 1})),
             ops::conv_transpose2d(in[0], in[4], in[5], opts({2, 3}, {1, 0, 0, 0}, {0, 2}))};
  };
  std::vector<HostTensor> inputs = {x, w81, w18, w35, w23, b};
  Canonicalized c = canonicalize_traced(inputs, build);
  REQUIRE(c.after);
  CHECK(c.stats.fired["conv-transpose-as-matmul"] == 6);
  auto want = Interpreter::run(*c.before, inputs);
  auto after = Interpreter::run(*c.after, inputs);
  auto cpu = driver::run_on_host("cpu", *c.before, inputs);
  REQUIRE(after.size() == 6);
  REQUIRE(cpu.size() == 6);
  for (size_t i = 0; i < 6; ++i) {
    INFO("output " << i);
    MAXC_REQUIRE_CLOSE(after[i], want[i], 1e-5, 1e-5);
    MAXC_REQUIRE_CLOSE(cpu[i], want[i], 1e-5, 1e-5);
  }
  // A symbolic length with padding (Kokoro's upsamplers: kernel 20, stride
  // 10, padding 5 along an audio length known at run time): the crop is a
  // gather of the kept positions. One graph, two lengths.
  auto g = std::make_unique<Graph>("g", std::vector<TensorType>{TensorType(DType::f32, {1, 6, 1, Dim("t")}),
                                                                TensorType(DType::f32, {6, 4, 1, 20}),
                                                                TensorType(DType::f32, {4})});
  {
    GraphRealizationContext ctx(*g);
    auto in = [&](size_t i) { return Tensor::from_graph_value(g->inputs()[i]); };
    g->output({ops::conv_transpose2d(in(0), in(1), in(2), opts({1, 10}, {0, 5, 0, 5})),
               ops::conv_transpose2d(in(0), in(1), std::nullopt, opts({1, 6}, {0, 3, 0, 2}, {0, 1}))});
  }
  auto canonical = canonicalize(*g);
  REQUIRE(canonical);
  HostTensor w20 = random_tensor(DType::f32, {6, 4, 1, 20});
  for (int64_t t : {5, 12}) {
    std::vector<HostTensor> xs = {random_tensor(DType::f32, {1, 6, 1, t}), w20, b};
    auto ref = Interpreter::run(*g, xs), got = Interpreter::run(*canonical, xs), jit = driver::run_on_host("cpu", *g, xs);
    for (size_t i = 0; i < 2; ++i) {
      INFO("length " << t << " output " << i);
      MAXC_REQUIRE_CLOSE(got[i], ref[i], 1e-5, 1e-5);
      MAXC_REQUIRE_CLOSE(jit[i], ref[i], 1e-5, 1e-5);
    }
  }
}

TEST_CASE("rewrites keep the symbol table: origins and bounds", "[transforms][canonicalize][symbols]") {
  Graph g("g", {TensorType(DType::f32, {Dim("n"), Dim(4)})});
  g.symbol_table().set_upper_bound("n", 64);
  g.symbol_table().declare("extra", SymbolOrigin::DimArgument);
  g.symbol_table().set_upper_bound("extra", 9);
  {
    GraphRealizationContext ctx(g);
    Tensor x = Tensor::from_graph_value(g.inputs()[0]);
    g.output({ops::exp(x * ops::full(1.0, DType::f32))}); // x · 1: canonicalize fires
  }
  auto check = [](const Graph &r) {
    CHECK(r.symbol_table().upper_bound("n") == 64);
    REQUIRE(r.symbol_table().find("extra"));
    CHECK(r.symbol_table().find("extra")->origin == SymbolOrigin::DimArgument);
    CHECK(r.symbol_table().upper_bound("extra") == 9);
  };
  auto canonical = canonicalize(g);
  REQUIRE(canonical);
  CHECK(op_list(*canonical) == "exp");
  check(*canonical);
  check(*decompose(*canonical));
}

namespace {

Tensor f32(double v) { return ops::full(v, DType::f32); }

/// The canonicalized graph is exactly one `op` node (constants aside), its
/// results within rtol / 1e-6 of the reference run of the spelled graph.
void check_fused(const std::vector<HostTensor> &inputs, const BuildFn &build, const std::string &op,
                 const std::string &pattern, double rtol = 1e-5) {
  Canonicalized c = canonicalize_traced(inputs, build);
  INFO("before: " << op_list(*c.before));
  REQUIRE(c.after);
  CHECK(op_list(*c.after) == op);
  CHECK(c.stats.fired[pattern] == 1);
  MAXC_REQUIRE_CLOSE(Interpreter::run(*c.after, inputs)[0], Interpreter::run(*c.before, inputs)[0], rtol, 1e-6);
}

/// canonicalize leaves no `op` node in the graph.
void check_not_fused(const std::vector<HostTensor> &inputs, const BuildFn &build, const std::string &op) {
  std::string after = canonical_ops(inputs, build);
  INFO("canonicalized: " << after);
  CHECK((" " + after + " ").find(" " + op + " ") == std::string::npos);
}

/// torch's GELU at opset < 20: Div(x, 1.4142135), Erf, Add 1, Mul x, Mul 0.5.
Tensor torch_gelu(const Tensor &x, double sqrt2 = 1.4142135381698608) {
  return x * (ops::erf(x / f32(sqrt2)) + f32(1.0)) * f32(0.5);
}

/// torch's gelu(approximate='tanh'): 0.5 · (x · (1 + tanh(k · (x + a · x·(x·x))))).
Tensor torch_gelu_tanh(const Tensor &x, double k = 0.7978845608028654, double a = 0.044715) {
  Tensor cube = x * (x * x);
  return f32(0.5) * (x * (f32(1.0) + ops::tanh(f32(k) * (x + f32(a) * cube))));
}

/// e / sum(e) with e = exp(x - max(x)) over the given axes.
Tensor spelled_softmax(const Tensor &x, int64_t max_axis, int64_t sum_axis) {
  Tensor e = ops::exp(x - ops::max(x, {max_axis}, true));
  return e / ops::sum(e, {sum_axis}, true);
}

} // namespace

TEST_CASE("canonicalize: spelled-out GELU (erf form) becomes gelu", "[transforms][canonicalize][activations]") {
  HostTensor x = random_tensor(DType::f32, {4, 33}, -5, 5);
  check_fused({x}, [](auto &in) { return T{torch_gelu(in[0])}; }, "gelu", "gelu-erf");
  // tf2onnx / Keras: x · 0.5 · (1 + erf(x · 0.70710677)), the 0.5 first.
  check_fused({x}, [](auto &in) {
    return T{in[0] * f32(0.5) * (f32(1.0) + ops::erf(in[0] * f32(0.7071067690849304)))};
  }, "gelu", "gelu-erf");
  // x · (0.5 · (erf(...) + 1)), constants as one-element initializers.
  check_fused({x}, [](auto &in) {
    return T{in[0] * (constant_like(0.5, {1}) * (ops::erf(constant_like(M_SQRT1_2, {1}) * in[0]) + constant_like(1.0, {1})))};
  }, "gelu", "gelu-erf");
  // (0.5 · x) · (1 + erf(x / √2)), inside a larger graph.
  Canonicalized c = canonicalize_traced({x}, [](auto &in) {
    Tensor h = ops::exp(in[0]);
    return T{ops::tanh((f32(0.5) * h) * (f32(1.0) + ops::erf(h / f32(std::sqrt(2.0)))))};
  });
  REQUIRE(c.after);
  CHECK(op_list(*c.after) == "exp gelu tanh");
  const Node &gelu = c.after->nodes()[c.after->nodes().size() - 2];
  REQUIRE(gelu.op == "gelu");
  CHECK(gelu.attrs.get_string("approximate") == "none");
}

TEST_CASE("canonicalize: GELU constants in f16 match within half an ulp", "[transforms][canonicalize][activations]") {
  // An f16 export stores 1/√2 as 0.70703125 (the nearest f16): fused; the
  // next f16 up, 0.70751953, is another function: not.
  auto half_const = [](double v) {
    HostTensor t(DType::f16, {1});
    t.set_f64(0, v);
    return Tensor::from_host(t);
  };
  HostTensor x = random_tensor(DType::f16, {4, 16});
  for (auto [c, fused] : std::vector<std::pair<double, bool>>{{M_SQRT1_2, true}, {0.70751953125, false}}) {
    INFO("1/sqrt2 written as " << c);
    std::string after = canonical_ops({x}, [&, c = c](auto &in) {
      return T{in[0] * (ops::erf(in[0] * half_const(c)) + half_const(1.0)) * half_const(0.5)};
    });
    CHECK((after == "gelu") == fused);
  }
}

TEST_CASE("canonicalize: spelled-out GELU (tanh form) becomes gelu tanh", "[transforms][canonicalize][activations]") {
  HostTensor x = random_tensor(DType::f32, {3, 40}, -5, 5);
  check_fused({x}, [](auto &in) { return T{torch_gelu_tanh(in[0])}; }, "gelu", "gelu-tanh");
  // HF NewGELU: 0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · pow(x, 3)))).
  BuildFn hf = [](auto &in) {
    Tensor inner = f32(std::sqrt(2.0 / M_PI)) * (in[0] + f32(0.044715) * ops::pow(in[0], f32(3.0)));
    return T{f32(0.5) * in[0] * (f32(1.0) + ops::tanh(inner))};
  };
  Canonicalized c = canonicalize_traced({x}, hf);
  REQUIRE(c.after);
  CHECK(op_list(*c.after) == "gelu");
  CHECK(c.after->nodes().back().attrs.get_string("approximate") == "tanh");
  CHECK(c.stats.fired["pow-by-constant"] == 1);
  CHECK(c.stats.fired["gelu-tanh"] == 1);
  MAXC_REQUIRE_CLOSE(Interpreter::run(*c.after, {x})[0], Interpreter::run(*c.before, {x})[0], 1e-5, 1e-6);
}

TEST_CASE("canonicalize: GELU near misses are not fused", "[transforms][canonicalize][activations]") {
  HostTensor x = random_tensor(DType::f32, {4, 16}), y = random_tensor(DType::f32, {4, 16});
  // Wrong constants: 1.4143 for √2 (1e-4 off), 0.6 for 0.5, 2 + erf.
  check_not_fused({x}, [](auto &in) { return T{torch_gelu(in[0], 1.4143)}; }, "gelu");
  check_not_fused({x}, [](auto &in) { return T{in[0] * (ops::erf(in[0] / f32(M_SQRT2)) + f32(1.0)) * f32(0.6)}; }, "gelu");
  check_not_fused({x}, [](auto &in) { return T{in[0] * (ops::erf(in[0] / f32(M_SQRT2)) + f32(2.0)) * f32(0.5)}; }, "gelu");
  // erf of another value; the erf also read elsewhere; a 0.5 that widens x.
  check_not_fused({x, y}, [](auto &in) { return T{in[0] * (ops::erf(in[1] / f32(M_SQRT2)) + f32(1.0)) * f32(0.5)}; }, "gelu");
  check_not_fused({x}, [](auto &in) {
    Tensor e = ops::erf(in[0] / f32(M_SQRT2));
    return T{in[0] * (e + f32(1.0)) * f32(0.5), e};
  }, "gelu");
  HostTensor row = random_tensor(DType::f32, {16});
  check_not_fused({row}, [](auto &in) { return T{in[0] * (ops::erf(in[0] / f32(M_SQRT2)) + f32(1.0)) * constant_like(0.5, {4, 16})}; }, "gelu");
  // tanh form: 0.04472 for 0.044715, √(2/π) off by 1e-4, x² for x³.
  check_not_fused({x}, [](auto &in) { return T{torch_gelu_tanh(in[0], 0.7978845608028654, 0.04472)}; }, "gelu");
  check_not_fused({x}, [](auto &in) { return T{torch_gelu_tanh(in[0], 0.79796)}; }, "gelu");
  check_not_fused({x}, [](auto &in) {
    Tensor inner = f32(0.7978845608028654) * (in[0] + f32(0.044715) * (in[0] * in[0]));
    return T{f32(0.5) * (in[0] * (f32(1.0) + ops::tanh(inner)))};
  }, "gelu");
}

TEST_CASE("canonicalize: x * sigmoid(x) becomes silu", "[transforms][canonicalize][activations]") {
  HostTensor x = random_tensor(DType::f32, {5, 24}, -6, 6), y = random_tensor(DType::f32, {5, 24});
  check_fused({x}, [](auto &in) { return T{in[0] * ops::sigmoid(in[0])}; }, "silu", "silu");
  check_fused({x}, [](auto &in) { return T{ops::sigmoid(in[0]) * in[0]}; }, "silu", "silu");
  // Near misses: sigmoid(β·x) with β ≠ 1 (Swish-β, CLIP's quick GELU), another
  // value times the sigmoid, the sigmoid also read elsewhere.
  check_not_fused({x}, [](auto &in) { return T{in[0] * ops::sigmoid(f32(1.702) * in[0])}; }, "silu");
  check_not_fused({x, y}, [](auto &in) { return T{in[1] * ops::sigmoid(in[0])}; }, "silu");
  check_not_fused({x}, [](auto &in) {
    Tensor s = ops::sigmoid(in[0]);
    return T{in[0] * s, s};
  }, "silu");
}

TEST_CASE("canonicalize: spelled-out softmax becomes softmax", "[transforms][canonicalize][activations]") {
  HostTensor x = random_tensor(DType::f32, {2, 3, 17}, -20, 20);
  check_fused({x}, [](auto &in) { return T{spelled_softmax(in[0], -1, -1)}; }, "softmax", "softmax");
  check_fused({x}, [](auto &in) { return T{spelled_softmax(in[0], 2, -1)}; }, "softmax", "softmax");
  // Over a middle axis; e · (1 / sum) as Reciprocal exports it.
  Canonicalized c = canonicalize_traced({x}, [](auto &in) { return T{spelled_softmax(in[0], 1, 1)}; });
  REQUIRE(c.after);
  CHECK(op_list(*c.after) == "softmax");
  CHECK(c.after->nodes().back().attrs.get_int("axis") == 1);
  MAXC_REQUIRE_CLOSE(Interpreter::run(*c.after, {x})[0], Interpreter::run(*c.before, {x})[0], 1e-5, 1e-6);
  check_fused({x}, [](auto &in) {
    Tensor e = ops::exp(in[0] - ops::max(in[0], {-1}, true));
    return T{e * (f32(1.0) / ops::sum(e, {-1}, true))};
  }, "softmax", "softmax");
  // Near misses: the max and the sum over different axes; two axes; keepdims
  // off (then it is no row-wise division); e read elsewhere; no max subtracted
  // (exp(x) overflows where softmax does not: not the same function).
  check_not_fused({x}, [](auto &in) { return T{spelled_softmax(in[0], 1, 2)}; }, "softmax");
  check_not_fused({x}, [](auto &in) {
    Tensor e = ops::exp(in[0] - ops::max(in[0], {1, 2}, true));
    return T{e / ops::sum(e, {1, 2}, true)};
  }, "softmax");
  HostTensor x2 = random_tensor(DType::f32, {4, 4});
  check_not_fused({x2}, [](auto &in) {
    Tensor e = ops::exp(in[0] - ops::max(in[0], {1}, false));
    return T{e / ops::sum(e, {1}, false)};
  }, "softmax");
  check_not_fused({x}, [](auto &in) {
    Tensor e = ops::exp(in[0] - ops::max(in[0], {-1}, true));
    return T{e / ops::sum(e, {-1}, true), e};
  }, "softmax");
  check_not_fused({x}, [](auto &in) {
    Tensor e = ops::exp(in[0]);
    return T{e / ops::sum(e, {-1}, true)};
  }, "softmax");
}

namespace {

/// Clip(x + 3, 0, 6) as the importer writes Clip: minimum(maximum(y, 0), 6).
Tensor relu6_of_x_plus_3(const Tensor &x) { return ops::minimum(ops::maximum(x + f32(3.0), f32(0.0)), f32(6.0)); }

/// HardSigmoid(alpha 1/6, beta 0.5) as the ONNX importer writes it.
Tensor imported_hard_sigmoid(const Tensor &x) {
  return ops::maximum(ops::scalar(0, DType::f32),
                      ops::minimum(ops::scalar(1, DType::f32), x * ops::scalar(1.0 / 6, DType::f32) + ops::scalar(0.5, DType::f32)));
}

} // namespace

TEST_CASE("canonicalize: HardSigmoid / HardSwish through ReLU6 become the importer's form",
          "[transforms][canonicalize][activations]") {
  HostTensor x = random_tensor(DType::f32, {4, 30}, -5, 5);
  // relu6(x + 3) / 6 (paddle2onnx's hard_sigmoid with offset 3, scale 6).
  std::string hs = "mul add minimum maximum";
  check_fused({x}, [](auto &in) { return T{relu6_of_x_plus_3(in[0]) / f32(6.0)}; }, hs, "hard-sigmoid");
  // x · relu6(x + 3) / 6 (paddle2onnx's hard_swish), x · (relu6(x + 3) · 1/6)
  // (tf2onnx's Keras hard_swish), bounds the other way round, Relu then Min.
  std::string hsw = hs + " mul";
  check_fused({x}, [](auto &in) { return T{in[0] * relu6_of_x_plus_3(in[0]) / f32(6.0)}; }, hsw, "hard-sigmoid");
  check_fused({x}, [](auto &in) {
    return T{in[0] * (ops::maximum(f32(0.0), ops::minimum(f32(6.0), f32(3.0) + in[0])) * f32(0.16666667))};
  }, hsw, "hard-sigmoid");
  check_fused({x}, [](auto &in) { return T{ops::minimum(ops::relu(in[0] + f32(3.0)), f32(6.0)) * in[0] / f32(6.0)}; },
              hsw, "hard-sigmoid");
  // The same graph as the ONNX HardSwish import: one form whichever spelling.
  auto canonical = canonicalize(*trace_graph(types_of({x}), [](auto &in) {
    return T{in[0] * relu6_of_x_plus_3(in[0]) / f32(6.0)};
  }));
  auto imported = trace_graph(types_of({x}), [](auto &in) { return T{in[0] * imported_hard_sigmoid(in[0])}; });
  REQUIRE(canonical);
  CHECK(Interpreter::run(*canonical, {x})[0].identical(Interpreter::run(*imported, {x})[0]));
  // Near misses: relu6(x + 2), a clip at 5, / 5, x + 3 read elsewhere,
  // the clip's lower bound 1.
  auto not_fired = [&](const BuildFn &build) {
    Canonicalized c = canonicalize_traced({x}, build);
    CHECK(c.stats.fired["hard-sigmoid"] == 0);
  };
  not_fired([](auto &in) { return T{ops::minimum(ops::maximum(in[0] + f32(2.0), f32(0.0)), f32(6.0)) / f32(6.0)}; });
  not_fired([](auto &in) { return T{ops::minimum(ops::maximum(in[0] + f32(3.0), f32(0.0)), f32(5.0)) / f32(6.0)}; });
  not_fired([](auto &in) { return T{relu6_of_x_plus_3(in[0]) / f32(5.0)}; });
  not_fired([](auto &in) {
    Tensor y = in[0] + f32(3.0);
    return T{ops::minimum(ops::maximum(y, f32(0.0)), f32(6.0)) / f32(6.0), y};
  });
  not_fired([](auto &in) { return T{in[0] * ops::minimum(ops::maximum(in[0] + f32(3.0), f32(1.0)), f32(6.0)) / f32(6.0)}; });
}

TEST_CASE("canonicalized activations compile and match the reference on the CPU and the GPU emulator",
          "[transforms][canonicalize][activations][codegen]") {
  HostTensor x = random_tensor(DType::f32, {3, 64}, -5, 5);
  std::unique_ptr<Graph> g = trace_graph(types_of({x}), [](auto &in) {
    Tensor hf_tanh = f32(0.5) * in[0] *
                     (f32(1.0) + ops::tanh(f32(std::sqrt(2.0 / M_PI)) * (in[0] + f32(0.044715) * ops::pow(in[0], f32(3.0)))));
    return T{torch_gelu(in[0]), hf_tanh, in[0] * ops::sigmoid(in[0]), spelled_softmax(in[0], -1, -1),
             in[0] * relu6_of_x_plus_3(in[0]) / f32(6.0)};
  });
  RewriteStats stats;
  auto canonical = canonicalize(*g, &stats);
  REQUIRE(canonical);
  CHECK(op_list(*canonical) == "gelu gelu silu softmax mul add minimum maximum mul");
  auto want = Interpreter::run(*g, {x});
  for (const char *backend : {"cpu", "amdgpu-emu"}) {
    auto got = driver::run_on_host(backend, *g, {x});
    REQUIRE(got.size() == 5);
    for (size_t i = 0; i < 5; ++i) {
      INFO(backend << " output " << i);
      MAXC_REQUIRE_CLOSE(got[i], want[i], 1e-5, 1e-6);
    }
  }
}

namespace {

/// DequantizeLinear as the ONNX importer spells it: f32(i32(q) - i32(zp)) * s
/// (no zero point: f32(i32(q)) * s).
Tensor dequant(const Tensor &q, const std::optional<Tensor> &zp, const Tensor &s) {
  Tensor v = ops::cast(q, DType::i32);
  if (zp)
    v = ops::sub(v, ops::cast(*zp, DType::i32));
  return ops::mul(ops::cast(v, DType::f32), s);
}

HostTensor scalar_of(DType d, double v) {
  HostTensor t(d, {});
  t.set_f64(0, v);
  return t;
}

/// dequantized-matmul's bound: the rewritten graph's reference and the CPU
/// code within f32 rounding of the original's reference (the weights agree
/// within an ulp of each product; the sums in another order). The CPU's
/// absolute tolerance is that of f32 sums over K <= 64 of products up to
/// ~30 (|x| <= 2, |w| <= 148 * 0.1): 1e-5 failed once by 1.4e-5 on a
/// result of 0.115 (fresh random inputs each run).
void check_dequantized(const Canonicalized &r, const std::vector<HostTensor> &inputs) {
  auto want = Interpreter::run(*r.before, inputs);
  MAXC_REQUIRE_CLOSE(Interpreter::run(*r.after, inputs)[0], want[0], 1e-5, 1e-5);
  MAXC_REQUIRE_CLOSE(driver::run_on_host("cpu", *r.before, inputs)[0], want[0], 1e-5, 1e-4);
}

} // namespace

TEST_CASE("dequantized-matmul: Whisper's tied embedding (u8 [N, K], transposed, per-tensor scale)",
          "[transforms][canonicalize][nbits]") {
  HostTensor q = random_tensor(DType::u8, {40, 64}, 0, 255), x = random_tensor(DType::f32, {1, 3, 64});
  HostTensor ids = HostTensor::from_i64(DType::i64, {2}, {3, 7});
  auto build = [&](auto &in) {
    Tensor w = Tensor::from_host(q, "embed"), zp = Tensor::from_host(scalar_of(DType::u8, 131), "zp");
    Tensor s = Tensor::from_host(scalar_of(DType::f32, 0.0123), "scale");
    Tensor logits = ops::matmul(in[0], dequant(ops::transpose(w, {1, 0}), zp, s));
    // The embedding read by a gather too (the codes are shared, not copied).
    return T{logits, dequant(ops::gather(w, in[1]), zp, s)};
  };
  Canonicalized r = canonicalize_traced({x, ids}, build);
  REQUIRE(r.after);
  CHECK(r.stats.fired["dequantized-matmul"] == 1);
  CHECK(op_list(*r.after).find("matmul_nbits") != std::string::npos);
  CHECK(op_list(*r.after).find("transpose") == std::string::npos);
  const Node *nbits = nullptr;
  for (const Node &n : r.after->nodes())
    if (n.op == kMatmulNbitsOp)
      nbits = &n;
  REQUIRE(nbits);
  CHECK(nbits->attrs.get_int("bits") == 8);
  CHECK(nbits->attrs.get_int("block_size") == 64);
  CHECK(nbits->operands.size() == 4); // zero point 131, not the default 128
  const Node *codes = &r.after->nodes()[static_cast<size_t>(r.after->value_info(nbits->operands[1]).producer)];
  REQUIRE(codes->op == "constant");
  CHECK(r.after->constant(codes->attrs.get_string("name")).data() == r.before->constant("embed").data());
  check_dequantized(r, {x, ids});
}

TEST_CASE("dequantized-matmul: i8 [K, N], per-column scale and zero point, K off the block, transpose_b",
          "[transforms][canonicalize][nbits]") {
  const int64_t K = 40, N = 24;
  HostTensor q = random_tensor(DType::i8, {K, N}, -128, 127), x = random_tensor(DType::f32, {5, K});
  HostTensor s = random_tensor(DType::f32, {N}, 0.01, 0.1), zp = random_tensor(DType::i8, {N}, -20, 20);
  SECTION("per column, [K, N]") {
    Canonicalized r = canonicalize_traced({x}, [&](auto &in) {
      return T{ops::matmul(in[0], dequant(Tensor::from_host(q), Tensor::from_host(zp), Tensor::from_host(s)))};
    });
    REQUIRE(r.after);
    CHECK(op_list(*r.after) == "matmul_nbits");
    check_dequantized(r, {x});
  }
  SECTION("no zero point, [N, K] read through transpose_b, one row") {
    HostTensor qnk = random_tensor(DType::i8, {N, K}, -128, 127), s1 = random_tensor(DType::f32, {N, 1}, 0.01, 0.1);
    HostTensor v = random_tensor(DType::f32, {1, K});
    Canonicalized r = canonicalize_traced({v}, [&](auto &in) {
      return T{ops::matmul(in[0], dequant(Tensor::from_host(qnk), std::nullopt, Tensor::from_host(s1)), false, true)};
    });
    REQUIRE(r.after);
    CHECK(op_list(*r.after) == "matmul_nbits");
    check_dequantized(r, {v});
  }
}

TEST_CASE("dequantized-matmul near misses stay a matmul", "[transforms][canonicalize][nbits]") {
  const int64_t K = 32, N = 16;
  HostTensor q = random_tensor(DType::u8, {K, N}, 0, 255), x = random_tensor(DType::f32, {2, K});
  auto zp = [] { return Tensor::from_host(scalar_of(DType::u8, 128)); };
  // A scale per row of K (along the contraction axis).
  HostTensor sk = random_tensor(DType::f32, {K, 1}, 0.01, 0.1);
  check_unchanged({x}, [&](auto &in) {
    return T{ops::matmul(in[0], dequant(Tensor::from_host(q), zp(), Tensor::from_host(sk)))};
  });
  // More rows than a GEMV's (17).
  HostTensor x17 = random_tensor(DType::f32, {17, K});
  check_unchanged({x17}, [&](auto &in) {
    return T{ops::matmul(in[0], dequant(Tensor::from_host(q), zp(), Tensor::from_host(scalar_of(DType::f32, 0.1))))};
  });
  // A scale that is no constant (an input).
  HostTensor s = scalar_of(DType::f32, 0.5);
  check_unchanged({x, s}, [&](auto &in) {
    return T{ops::matmul(in[0], dequant(Tensor::from_host(q), zp(), in[1]))};
  });
  // An 8-bit subtraction (wraps: not a dequantization).
  check_unchanged({x}, [&](auto &in) {
    Tensor d = ops::cast(ops::sub(Tensor::from_host(q), zp()), DType::f32);
    return T{ops::matmul(in[0], ops::mul(d, Tensor::from_host(scalar_of(DType::f32, 0.1))))};
  });
  // Codes that are no constant.
  HostTensor qin = random_tensor(DType::u8, {K, N}, 0, 255);
  check_unchanged({x, qin}, [&](auto &in) {
    return T{ops::matmul(in[0], dequant(in[1], zp(), Tensor::from_host(scalar_of(DType::f32, 0.1))))};
  });
}

TEST_CASE("canonicalize: a split between a transpose and its inverse is a slice", "[transforms][canonicalize]") {
  // tf2onnx's NHWC split between NCHW ops: transpose, split on channels,
  // transpose back per piece.
  HostTensor x = random_tensor(DType::f32, {1, 6, 4, 5});
  check_rule({x}, [](auto &in) {
    T pieces = ops::split(ops::transpose(in[0], {0, 2, 3, 1}), {2, 4}, 3);
    return T{ops::exp(ops::transpose(pieces[0], {0, 3, 1, 2})), ops::transpose(pieces[1], {0, 3, 1, 2})};
  }, "slice exp slice", 0);
  // Near misses: the outer transpose does not undo the inner one; no split
  // between them (transpose-chain's business).
  check_unchanged({x}, [](auto &in) {
    T pieces = ops::split(ops::transpose(in[0], {0, 2, 3, 1}), {2, 4}, 3);
    return T{ops::transpose(pieces[0], {0, 3, 2, 1}), pieces[1]};
  });
  check_unchanged({x}, [](auto &in) {
    T pieces = ops::split(in[0], {2, 4}, 1);
    return T{ops::transpose(pieces[0], {0, 3, 1, 2}), pieces[1]};
  });
}

TEST_CASE("canonicalize: a quantize through a transpose runs before it, the transpose moves bytes",
          "[transforms][canonicalize]") {
  HostTensor x = random_tensor(DType::f32, {1, 8, 12}, -3, 3);
  auto quantize = [](const Tensor &t) {
    Tensor q = ops::round(t / ops::full(0.05, DType::f32)) + ops::full(128.0, DType::f32);
    return ops::cast(ops::minimum(ops::maximum(q, ops::full(0.0, DType::f32)), ops::full(255.0, DType::f32)),
                     DType::u8);
  };
  Canonicalized c = canonicalize_traced({x}, [&](auto &in) { return T{quantize(ops::transpose(in[0], {0, 2, 1}))}; });
  REQUIRE(c.after);
  CHECK(c.stats.fired["narrow-before-transpose"] == 1);
  CHECK(c.after->nodes().back().op == "transpose");
  CHECK(Interpreter::run(*c.after, {x})[0].identical(Interpreter::run(*c.before, {x})[0]));
  // Near misses: a cast that widens (moved op by op by
  // elementwise-before-transpose instead, not as a narrowing chain); a chain
  // op whose other operand is a whole tensor; a transposed value read twice.
  Canonicalized wide =
      canonicalize_traced({x}, [](auto &in) { return T{ops::cast(ops::exp(ops::transpose(in[0], {0, 2, 1})), DType::f64)}; });
  CHECK(wide.stats.fired["narrow-before-transpose"] == 0);
  HostTensor y = random_tensor(DType::f32, {1, 12, 8});
  check_unchanged({x, y}, [](auto &in) {
    return T{ops::cast(ops::transpose(in[0], {0, 2, 1}) + in[1], DType::u8)};
  });
  check_unchanged({x}, [](auto &in) {
    Tensor t = ops::transpose(in[0], {0, 2, 1});
    return T{ops::cast(ops::exp(t), DType::u8), t};
  });
}

TEST_CASE("canonicalize: elementwise ops after a transpose run before it, constants transposed back",
          "[transforms][canonicalize]") {
  // A 1x1 conv's epilogue as YOLOv10's int8 convs have it: the GEMM's
  // [H*W, C] rows transposed to channels, then a scale, a bias per channel
  // and SiLU; then an exporter's transpose back to NHWC.
  HostTensor rows = random_tensor(DType::f32, {1, 20, 6}, -3, 3);
  HostTensor bias = random_tensor(DType::f32, {1, 6, 1, 1});
  auto epilogue = [&](const Tensor &x) {
    Tensor nchw = ops::reshape(ops::transpose(x, {0, 2, 1}), Shape{1, 6, 4, 5});
    return ops::silu(nchw * ops::full(0.5, DType::f32) + Tensor::from_host(bias));
  };
  check_rule({rows}, [&](auto &in) { return T{ops::transpose(epilogue(in[0]), {0, 2, 3, 1})}; },
             "reshape mul add silu", 0);
  // Left in NCHW for a reader: the ops run in the rows' layout, one
  // transpose at the end.
  Canonicalized c = canonicalize_traced({rows}, [&](auto &in) { return T{epilogue(in[0])}; });
  REQUIRE(c.after);
  CHECK(c.stats.fired["reshape-of-transpose"] == 1);
  CHECK(c.stats.fired["elementwise-before-transpose"] == 3);
  CHECK(c.after->nodes().back().op == "transpose");
  CHECK(Interpreter::run(*c.after, {rows})[0].identical(Interpreter::run(*c.before, {rows})[0]));
  // Near misses: another operand that is a computed tensor (no constant, not
  // one element); the transposed value read twice; a broadcast of the
  // transposed value itself.
  HostTensor y = random_tensor(DType::f32, {1, 6, 20});
  check_unchanged({rows, y}, [](auto &in) { return T{ops::transpose(in[0], {0, 2, 1}) * ops::exp(in[1])}; });
  check_unchanged({rows}, [](auto &in) {
    Tensor t = ops::transpose(in[0], {0, 2, 1});
    return T{ops::exp(t), t};
  });
  // A transpose that keeps the last axis (rows stay contiguous); a matmul
  // reading the result (attention's k^T scaled: the matmul takes the
  // transposed operand as it is).
  HostTensor heads = random_tensor(DType::f32, {2, 3, 4, 5});
  check_unchanged({heads}, [](auto &in) {
    return T{ops::transpose(in[0], {0, 2, 1, 3}) * ops::full(0.125, DType::f32)};
  });
  HostTensor q = random_tensor(DType::f32, {2, 3, 7, 5});
  check_unchanged({heads, q}, [](auto &in) {
    return T{ops::matmul(in[1], ops::transpose(in[0], {0, 1, 3, 2}) * ops::full(0.125, DType::f32))};
  });
  HostTensor small = random_tensor(DType::f32, {1, 2, 3}), wide = random_tensor(DType::f32, {5, 3, 2});
  check_unchanged({small, wide}, [](auto &in) { return T{ops::transpose(in[0], {0, 2, 1}) + ops::exp(in[1])}; });
}

TEST_CASE("canonicalize: a reshape that splits a transposed value's axes moves before the transpose",
          "[transforms][canonicalize]") {
  HostTensor x = random_tensor(DType::f32, {2, 12, 5});
  // [2, 12, 5] -> [2, 5, 12] -> [2, 5, 3, 4]: 12 splits into 3 x 4 in x's layout.
  check_rule({x}, [](auto &in) { return T{ops::reshape(ops::transpose(in[0], {0, 2, 1}), Shape{2, 5, 3, 4})}; },
             "reshape transpose", 0);
  // An axis of 1 that vanishes, one that appears.
  HostTensor z = random_tensor(DType::f32, {1, 6, 4});
  check_rule({z}, [](auto &in) { return T{ops::reshape(ops::transpose(in[0], {2, 0, 1}), Shape{4, 2, 3})}; },
             "reshape transpose", 0);
  // Near misses: a reshape that merges axes; the transposed value read twice.
  check_unchanged({x}, [](auto &in) { return T{ops::reshape(ops::transpose(in[0], {0, 2, 1}), Shape{10, 12})}; });
  check_unchanged({x}, [](auto &in) {
    Tensor t = ops::transpose(in[0], {0, 2, 1});
    return T{ops::reshape(t, Shape{2, 5, 3, 4}), t};
  });
}
