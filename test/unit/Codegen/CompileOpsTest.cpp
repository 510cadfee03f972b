// Every op of the op set through the CPU code generator (ORC JIT), compared
// with the reference interpreter (the oracle) on fresh random inputs plus
// special values (NaN, ±inf, ±0, denormals, integer extremes).
//
// Tolerances, compiled vs interpreter (|a-e| <= atol + rtol*|e|):
//  - kExact (0, 0): integer and bool ops, comparisons, casts, shape ops, and
//    the float ops that are correctly rounded on both sides (+ - * / sqrt
//    floor ...: rounding a double result of f32 operands to f32 is the same
//    as rounding once, since 53 >= 2*24 + 2).
//  - kF32Math (rtol 1e-5, atol 1e-6): f32 transcendentals. exp/log/tanh/erf/
//    sigmoid are polynomials (lib/Codegen/MathEmitter.h, measured by
//    MathTest.cpp at a few ulp, well inside 1e-5); atol covers results near
//    0 after cancellation (gelu(x) for x << 0, 1 - 2/(e+1)) and denormals.
//  - kF64 (rtol 1e-12, atol 1e-300): f64 uses libm on both sides; only the
//    formula differs (x*sqrt(1/2) vs x/sqrt(2)...).
//  - kF64Acc (rtol 1e-12, atol 1e-12): f64 sums (matmul, conv, pooling)
//    added in another order than the reference (GEMM tiles, FMA): the
//    rounding error scales with the sum of |terms|, not with the result, so
//    a result near 0 after cancellation needs an absolute bound.
//  - kF32Acc (rtol 1e-4, atol 1e-5): f32 matmul accumulates in f32, the
//    reference in double; decomposed norms round intermediates to f32.
//  - kLow (rtol 1e-2, atol 1e-3): f16/bf16, one rounding of a value the two
//    sides compute differently (f32 vs double), bf16 ulp is 2^-8.
#include "CompiledRunner.h"

// Compiled by itself for the CPU backend, and included by
// CompileOpsEmuTest.cpp for the GPU kernels under host emulation.
#ifndef MAXC_COMPILED_RUN
#define MAXC_COMPILED_RUN(graph, inputs) run_compiled(graph, inputs)
// The CPU computes f16/bf16 in f32 (its precision policy): the reference runs the same.
#define MAXC_COMPILED_REFERENCE(graph, inputs) cpu_reference(graph, inputs)
#define MAXC_COMPILED_NAME(text) text
#define MAXC_COMPILED_TAGS "[codegen][compile-ops]"
#endif

#ifndef MAXC_COMPILED_REFERENCE
#define MAXC_COMPILED_REFERENCE(graph, inputs) Interpreter::run(graph, inputs)
#endif

#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/Transforms/Decompose.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace maxc;
using namespace maxc::test;

namespace {

using Ts = std::vector<Tensor>;
using OpFn = std::function<Tensor(const Ts &)>;

struct Tol {
  double rtol, atol;
};
constexpr Tol kExact{0, 0};
constexpr Tol kF32Math{1e-5, 1e-6};
constexpr Tol kF64{1e-12, 1e-300};
constexpr Tol kF64Acc{1e-12, 1e-12};
constexpr Tol kF32Acc{1e-4, 1e-5};
constexpr Tol kLow{1e-2, 1e-3};

Tol math_tol(DType d) {
  switch (d) {
  case DType::f16: case DType::bf16: return kLow;
  case DType::f64: return kF64;
  default: return kF32Math;
  }
}

struct Case {
  std::string name;
  OpFn fn;
  std::optional<Tol> tol = std::nullopt; // default: the check's
};

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

/// Like compare(), plus exact int64 equality for integer dtypes (get_f64
/// loses bits beyond 2^53) and, when exact, the sign of float zeros.
std::string mismatch(const HostTensor &actual, const HostTensor &expected, Tol tol) {
  std::string m = compare(actual, expected, tol.rtol, tol.atol);
  if (!m.empty())
    return m;
  if (is_float(actual.dtype())) {
    if (tol.rtol == 0 && tol.atol == 0)
      for (int64_t i = 0; i < actual.numel(); ++i)
        if (actual.get_f64(i) == 0 && std::signbit(actual.get_f64(i)) != std::signbit(expected.get_f64(i)))
          return "element " + std::to_string(i) + ": sign of zero differs";
    return "";
  }
  for (int64_t i = 0; i < actual.numel(); ++i)
    if (actual.get_i64(i) != expected.get_i64(i))
      return "element " + std::to_string(i) + ": got " + std::to_string(actual.get_i64(i)) + ", expected " +
             std::to_string(expected.get_i64(i));
  return "";
}

/// Runs `graph` on the interpreter and compiled; every output must match.
void check_graph(const Graph &graph, const std::vector<HostTensor> &inputs, const std::vector<std::string> &names,
                 const std::vector<Tol> &tols) {
  graph.verify();
  std::vector<HostTensor> expected = MAXC_COMPILED_REFERENCE(graph, inputs);
  std::vector<HostTensor> actual = MAXC_COMPILED_RUN(graph, inputs);
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    std::string m = mismatch(actual[i], expected[i], tols[i]);
    INFO("output " << i << " (" << names[i] << "): " << m);
    CHECK(m.empty());
  }
}

/// Traces every case as one output of a single graph over `inputs`.
void check_cases(const std::vector<HostTensor> &inputs, const std::vector<Case> &cases, Tol tol = kExact) {
  std::vector<TensorType> types;
  for (const HostTensor &x : inputs)
    types.emplace_back(x.dtype(), make_shape(x.shape()));
  Graph graph("g", types);
  std::vector<std::string> names;
  std::vector<Tol> tols;
  {
    GraphRealizationContext ctx(graph);
    Ts args;
    for (const Value &v : graph.inputs())
      args.push_back(Tensor::from_graph_value(v));
    std::vector<Value> outs;
    for (const Case &c : cases) {
      outs.push_back(c.fn(args).value());
      names.push_back(c.name);
      tols.push_back(c.tol.value_or(tol));
    }
    graph.output(outs);
  }
  check_graph(graph, inputs, names, tols);
}

/// Same, for a build function with several outputs named name.0, name.1...
void check_multi(const std::vector<HostTensor> &inputs, const std::string &name, const BuildFn &build,
                 Tol tol = kExact) {
  std::vector<TensorType> types;
  for (const HostTensor &x : inputs)
    types.emplace_back(x.dtype(), make_shape(x.shape()));
  Graph graph("g", types);
  std::vector<std::string> names;
  {
    GraphRealizationContext ctx(graph);
    Ts args;
    for (const Value &v : graph.inputs())
      args.push_back(Tensor::from_graph_value(v));
    std::vector<Value> outs;
    for (const Tensor &t : build(args)) {
      names.push_back(name + "." + std::to_string(outs.size()));
      outs.push_back(t.value());
    }
    graph.output(outs);
  }
  check_graph(graph, inputs, names, std::vector<Tol>(names.size(), tol));
}

/// Overwrites the first elements with `values` (converted to the dtype).
HostTensor with_values(HostTensor t, const std::vector<double> &values) {
  for (size_t i = 0; i < values.size() && static_cast<int64_t>(i) < t.numel(); ++i)
    t.set_f64(static_cast<int64_t>(i), values[i]);
  return t;
}
HostTensor with_ints(HostTensor t, const std::vector<int64_t> &values) {
  for (size_t i = 0; i < values.size() && static_cast<int64_t>(i) < t.numel(); ++i)
    t.set_i64(static_cast<int64_t>(i), values[i]);
  return t;
}
/// Rounds every element to a multiple of `step` (to create ties).
HostTensor quantized(HostTensor t, double step) {
  for (int64_t i = 0; i < t.numel(); ++i)
    t.set_f64(i, std::round(t.get_f64(i) / step) * step);
  return t;
}

// The extremes of an integer dtype, from the table's width and signedness,
// as get_i64 reads them (u64's maximum as its bits: -1).
int64_t int_min(DType d) {
  const DTypeInfo &info = dtype_info(d);
  return info.is_signed ? static_cast<int64_t>(~uint64_t{0} << (info.bits - 1)) : 0;
}
int64_t int_max(DType d) {
  const DTypeInfo &info = dtype_info(d);
  return static_cast<int64_t>(~uint64_t{0} >> (64 - info.digits));
}

// Unsigned dtypes: their values past the signed range are negative as bits
// of the signed type of their width, so every signed/unsigned choice of the
// code generator shows (u64 past 2^63 too: int_max(u64), -1).
const DType kIntTypes[] = {DType::i8, DType::i16, DType::i32, DType::i64, DType::u8, DType::u16, DType::u32, DType::u64};

// Float specials shared by the unary tests: NaN, infinities, signed zeros,
// halves (round), denormals (f32), overflow/underflow edges of exp.
const std::vector<double> kFloatSpecials = {kNaN, kInf,  -kInf, 0.0,   -0.0,  0.5,  -0.5, 1.5,  2.5,
                                            -2.5, 1e-40, -1e-40, 1e-3, 20.0, -20.0, 88.5, 89.0, -87.5,
                                            -104, 1e30,  -1e30, 1e-30, 7.0};
// For log/sqrt/rsqrt: zeros, negatives (NaN), denormals, huge.
const std::vector<double> kPositiveSpecials = {0.0, -0.0, kInf, kNaN, -1.0, 1e-40, 1.0, 1e30, 1e-30, 1e-45};

std::vector<Case> unary_float_cases() {
  return {{"neg", [](auto &in) { return ops::neg(in[0]); }},
          {"abs", [](auto &in) { return ops::abs(in[0]); }},
          {"exp", [](auto &in) { return ops::exp(in[0]); }},
          {"log", [](auto &in) { return ops::log(in[1]); }},
          {"sqrt", [](auto &in) { return ops::sqrt(in[1]); }},
          {"rsqrt", [](auto &in) { return ops::rsqrt(in[1]); }},
          {"tanh", [](auto &in) { return ops::tanh(in[0]); }},
          {"sigmoid", [](auto &in) { return ops::sigmoid(in[0]); }},
          {"relu", [](auto &in) { return ops::relu(in[0]); }},
          {"gelu", [](auto &in) { return ops::gelu(in[0]); }},
          {"gelu_tanh", [](auto &in) { return ops::gelu(in[0], "tanh"); }},
          {"silu", [](auto &in) { return ops::silu(in[0]); }},
          {"erf", [](auto &in) { return ops::erf(in[0]); }},
          {"sin", [](auto &in) { return ops::sin(in[0]); }},
          {"cos", [](auto &in) { return ops::cos(in[0]); }},
          {"floor", [](auto &in) { return ops::floor(in[0]); }},
          {"ceil", [](auto &in) { return ops::ceil(in[0]); }},
          {"round", [](auto &in) { return ops::round(in[0]); }},
          {"sign", [](auto &in) { return ops::sign(in[0]); }},
          // A fused chain of several transcendentals.
          {"chain", [](auto &in) { return ops::tanh(ops::exp(in[0] * 0.25)) + ops::log(in[1]) * 0.5; }}};
}

} // namespace

// ---------------------------------------------------------------------------
// Elementwise

TEST_CASE(MAXC_COMPILED_NAME("compiled unary float ops match the interpreter (f32, f64)"), MAXC_COMPILED_TAGS) {
  for (DType d : {DType::f32, DType::f64}) {
    INFO(dtype_name(d));
    HostTensor x = with_values(random_tensor(d, {3, 37}, -4, 4), kFloatSpecials);
    HostTensor p = with_values(random_tensor(d, {3, 37}, 1e-3, 10), kPositiveSpecials);
    if (d == DType::f64) // f64-only specials: beyond f32's range
      x = with_values(x, {kNaN, kInf, -kInf, 0.0, -0.0, 1e-310, 700, -740, 1e300, -1e300, 1e-7, -3e-9, 1e-5,
                          -2.5e-5, 3.3e-6, 1.234e-4, -7.7e-3, 0.3});
    check_cases({x, p}, unary_float_cases(), math_tol(d));
  }
}

TEST_CASE(MAXC_COMPILED_NAME("compiled unary ops on f16 and bf16"), MAXC_COMPILED_TAGS) {
  for (DType d : {DType::f16, DType::bf16}) {
    INFO(dtype_name(d));
    HostTensor x = with_values(random_tensor(d, {2, 41}, -4, 4), {kNaN, kInf, -kInf, 0.0, -0.0, 0.5, 2.5, 1e-6});
    HostTensor p = with_values(random_tensor(d, {2, 41}, 1e-2, 10), {0.0, kInf, -1.0, 1e-6});
    check_cases({x, p}, unary_float_cases(), kLow);
  }
}

TEST_CASE(MAXC_COMPILED_NAME("compiled unary integer and bool ops"), MAXC_COMPILED_TAGS) {
  for (DType d : kIntTypes) {
    INFO(dtype_name(d));
    HostTensor x = with_ints(random_tensor(d, {4, 25}, -100, 100), {int_min(d), int_max(d), -1, 0, 1, int_min(d) + 1});
    check_cases({x}, {{"neg", [](auto &in) { return ops::neg(in[0]); }},
                      {"abs", [](auto &in) { return ops::abs(in[0]); }},
                      {"relu", [](auto &in) { return ops::relu(in[0]); }},
                      {"sign", [](auto &in) { return ops::sign(in[0]); }},
                      {"floor", [](auto &in) { return ops::floor(in[0]); }},
                      {"ceil", [](auto &in) { return ops::ceil(in[0]); }},
                      {"round", [](auto &in) { return ops::round(in[0]); }},
                      {"neg_abs", [](auto &in) { return ops::abs(ops::neg(in[0])); }}});
  }
  HostTensor b = random_tensor(DType::boolean, {3, 17});
  check_cases({b}, {{"not", [](auto &in) { return ops::logical_not(in[0]); }},
                    {"not_not", [](auto &in) { return ops::logical_not(ops::logical_not(in[0])); }}});
}

namespace {
std::vector<Case> binary_cases() {
  std::vector<Case> cases = {{"add", [](auto &in) { return ops::add(in[0], in[1]); }},
                             {"sub", [](auto &in) { return ops::sub(in[0], in[1]); }},
                             {"mul", [](auto &in) { return ops::mul(in[0], in[1]); }},
                             {"div", [](auto &in) { return ops::div(in[0], in[1]); }},
                             {"maximum", [](auto &in) { return ops::maximum(in[0], in[1]); }},
                             {"minimum", [](auto &in) { return ops::minimum(in[0], in[1]); }},
                             {"mod", [](auto &in) { return ops::mod(in[0], in[1]); }},
                             {"eq", [](auto &in) { return ops::equal(in[0], in[1]); }},
                             {"ne", [](auto &in) { return ops::not_equal(in[0], in[1]); }},
                             {"lt", [](auto &in) { return ops::less(in[0], in[1]); }},
                             {"le", [](auto &in) { return ops::less_equal(in[0], in[1]); }},
                             {"gt", [](auto &in) { return ops::greater(in[0], in[1]); }},
                             {"ge", [](auto &in) { return ops::greater_equal(in[0], in[1]); }},
                             {"where", [](auto &in) { return ops::where(ops::less(in[0], in[1]), in[0], in[1]); }},
                             // Broadcast the other way round too.
                             {"sub_ba", [](auto &in) { return ops::sub(in[1], in[0]); }},
                             {"div_ba", [](auto &in) { return ops::div(in[1], in[0]); }},
                             {"mod_ba", [](auto &in) { return ops::mod(in[1], in[0]); }}};
  return cases;
}
} // namespace

TEST_CASE(MAXC_COMPILED_NAME("compiled binary float ops with broadcasting"), MAXC_COMPILED_TAGS) {
  for (DType d : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    INFO(dtype_name(d));
    // Quantized so that comparisons see ties; specials on both sides.
    HostTensor a = with_values(quantized(random_tensor(d, {4, 1, 6}, -3, 3), 0.5),
                               {kNaN, kInf, -kInf, 0.0, -0.0, 5.5, -5.5, 1e-40});
    HostTensor b = with_values(quantized(random_tensor(d, {3, 1}, -3, 3), 0.5), {0.0, -2.5, kInf});
    Tol pow_tol = math_tol(d);
    Tol tol = d == DType::f16 || d == DType::bf16 ? kLow : kExact; // f32/f64: correctly rounded
    std::vector<Case> cases = binary_cases();
    cases.push_back({"pow", [](auto &in) { return ops::pow(in[0], in[1]); }, pow_tol});
    cases.push_back({"pow_pos", [](auto &in) { return ops::pow(ops::abs(in[0]), in[1]); }, pow_tol});
    check_cases({a, b}, cases, tol);
  }
}

TEST_CASE(MAXC_COMPILED_NAME("compiled binary integer ops: division by zero, negatives, MIN/-1"), MAXC_COMPILED_TAGS) {
  for (DType d : kIntTypes) {
    INFO(dtype_name(d));
    HostTensor a = with_ints(random_tensor(d, {6, 1}, -20, 20), {int_min(d), int_max(d), -7, 7, 0, -1});
    HostTensor b = with_ints(random_tensor(d, {1, 9}, -5, 5), {0, -1, 1, -3, 3, int_min(d), int_max(d), 0, -2});
    check_cases({a, b}, binary_cases());
  }
}

TEST_CASE(MAXC_COMPILED_NAME("compiled comparisons, logical ops and where on bool"), MAXC_COMPILED_TAGS) {
  HostTensor a = random_tensor(DType::boolean, {4, 1}), b = random_tensor(DType::boolean, {1, 5});
  a = with_ints(a, {0, 1, 0, 1});
  b = with_ints(b, {0, 0, 1, 1});
  check_cases({a, b}, {{"eq", [](auto &in) { return ops::equal(in[0], in[1]); }},
                       {"ne", [](auto &in) { return ops::not_equal(in[0], in[1]); }},
                       {"lt", [](auto &in) { return ops::less(in[0], in[1]); }},
                       {"le", [](auto &in) { return ops::less_equal(in[0], in[1]); }},
                       {"gt", [](auto &in) { return ops::greater(in[0], in[1]); }},
                       {"ge", [](auto &in) { return ops::greater_equal(in[0], in[1]); }},
                       {"and", [](auto &in) { return ops::logical_and(in[0], in[1]); }},
                       {"or", [](auto &in) { return ops::logical_or(in[0], in[1]); }},
                       {"not_and", [](auto &in) { return ops::logical_not(ops::logical_and(in[0], in[1])); }},
                       {"where_bool", [](auto &in) { return ops::where(in[0], in[1], ops::logical_not(in[1])); }}});
  // where with three-way broadcasting on every dtype.
  for (DType d : kAllDTypes) {
    INFO(dtype_name(d));
    HostTensor c = random_tensor(DType::boolean, {4, 1, 1});
    HostTensor x = random_tensor(d, {1, 3, 1}, -50, 50), y = random_tensor(d, {1, 1, 5}, -50, 50);
    check_cases({c, x, y}, {{"where", [](auto &in) { return ops::where(in[0], in[1], in[2]); }},
                            {"where_swapped", [](auto &in) { return ops::where(in[0], in[2], in[1]); }}});
  }
}

TEST_CASE(MAXC_COMPILED_NAME("compiled cast between every pair of dtypes"), MAXC_COMPILED_TAGS) {
  const int64_t big = (int64_t(1) << 62) + (int64_t(1) << 38) + 1; // rounds differently via double
  for (DType from : kAllDTypes) {
    INFO("from " << dtype_name(from));
    HostTensor x;
    if (is_float(from)) {
      // NaN/inf/out-of-range → int saturate then wrap; ties of f16/bf16.
      x = with_values(random_tensor(from, {80}, -1000, 1000),
                      {kNaN,   kInf,     -kInf,   0.0,    -0.0,    0.5,       -0.5,         1.5,        -1.5,
                       2.5,    127.9,    128.0,   -128.5, -129.0,  255.0,     256.0,        300.7,      -300.7,
                       32767.5, 65504.0, 65520.0, 70000.0, 2147483647.0, 2147483648.0, -2147483649.0, 3e9,
                       -3e9,   1e10,     9.3e18,  -9.3e18, 1e20,   -1e30,     1e-8,         6e-8,       1e-40,
                       1.00048828125, 1.00390625, 1.01171875, 3.0000001, -0.99999});
    } else if (from == DType::boolean) {
      x = random_tensor(from, {40});
    } else {
      x = with_ints(random_tensor(from, {60}, -1000, 1000),
                    {int_min(from), int_max(from), big, -big, (int64_t(1) << 53) + 1, int64_t(1) << 31,
                     -(int64_t(1) << 31) - 1, (int64_t(1) << 32) + 5, 16777217, 16777219, 2049, 4294967295LL,
                     65520, 65505, 300, -129, 128, 255, 256, -1, 0, 1});
    }
    std::vector<Case> cases;
    for (DType to : kAllDTypes)
      cases.push_back({"to " + std::string(dtype_name(to)), [to](auto &in) { return ops::cast(in[0], to); }});
    check_cases({x}, cases);
  }
}

TEST_CASE(MAXC_COMPILED_NAME("compiled full, iota and range"), MAXC_COMPILED_TAGS) {
  HostTensor x = random_tensor(DType::f32, {2, 3});
  check_cases({x}, {{"full_f32", [](auto &) { return ops::full(3.7, DType::f32, {2, 3}); }},
                    {"full_i32", [](auto &) { return ops::full(-2.5, DType::i32, {4}); }},
                    {"full_i8_wrap", [](auto &) { return ops::full(300, DType::i8, {2}); }},
                    {"full_bool", [](auto &) { return ops::full(1, DType::boolean, {3, 1}); }},
                    {"full_f16", [](auto &) { return ops::full(0.1, DType::f16, {3}); }},
                    {"full_bf16", [](auto &) { return ops::full(0.1, DType::bf16, {3}); }},
                    {"scalar_f64", [](auto &) { return ops::scalar(-1e300, DType::f64); }},
                    {"iota_i32", [](auto &) { return ops::iota({3, 4}, 1, DType::i32); }},
                    {"iota_f32_neg_axis", [](auto &) { return ops::iota({2, 3, 4}, -1, DType::f32); }},
                    {"iota_i64_axis0", [](auto &) { return ops::iota({5, 2}, 0); }},
                    {"iota_f16", [](auto &) { return ops::iota({7}, 0, DType::f16); }},
                    {"range_i64", [](auto &) { return ops::range(0, 10, 3); }},
                    {"range_f32_neg", [](auto &) { return ops::range(1.5, -2, -0.5, DType::f32); }},
                    {"range_i32_frac", [](auto &) { return ops::range(-2.5, 5, 0.7, DType::i32); }},
                    {"range_f64", [](auto &) { return ops::range(0.1, 1.0, 0.1, DType::f64); }},
                    // Fused (cheap) into a consumer with broadcasting.
                    {"x_plus_iota", [](auto &in) { return in[0] * ops::iota({2, 3}, 1, DType::f32) + ops::full(0.5, DType::f32, {3}); }},
                    {"x_plus_range", [](auto &in) { return in[0] + ops::range(0, 3, 1, DType::f32); }}});
}

// ---------------------------------------------------------------------------
// Reductions

namespace {
// Every reduction over several axis sets; `all` false keeps a few variants
// (each output is a kernel of its own: JIT time).
std::vector<Case> reduction_cases(bool floats, bool all = true) {
  using Axes = std::vector<int64_t>;
  std::vector<std::pair<Axes, bool>> variants = {{{}, false}, {{-3, -1}, true}, {{1}, false}};
  if (all)
    variants.insert(variants.end(), {{{-1}, false}, {{0, 2}, false}, {{0, 1, 2}, true}});
  std::vector<Case> cases;
  for (auto &[axes, keep] : variants) {
    std::string tag = "[";
    for (int64_t a : axes)
      tag += std::to_string(a) + ",";
    tag += keep ? "] keep" : "]";
    Axes ax = axes;
    bool k = keep;
    cases.push_back({"sum" + tag, [ax, k](auto &in) { return ops::sum(in[0], ax, k); }});
    if (floats)
      cases.push_back({"mean" + tag, [ax, k](auto &in) { return ops::mean(in[0], ax, k); }});
    cases.push_back({"max" + tag, [ax, k](auto &in) { return ops::max(in[0], ax, k); }});
    cases.push_back({"min" + tag, [ax, k](auto &in) { return ops::min(in[0], ax, k); }});
    cases.push_back({"prod" + tag, [ax, k](auto &in) { return ops::prod(in[0], ax, k); }});
  }
  for (int64_t axis : {0, 1, -1})
    for (bool keep : {false, true}) {
      if (!all && keep != (axis == 1))
        continue;
      std::string tag = "(" + std::to_string(axis) + (keep ? ", keep)" : ")");
      cases.push_back({"argmax" + tag, [axis, keep](auto &in) { return ops::argmax(in[0], axis, keep); }});
      cases.push_back({"argmin" + tag, [axis, keep](auto &in) { return ops::argmin(in[0], axis, keep); }});
    }
  // A fused producer inside the reduction loop.
  cases.push_back({"sum(x*x)", [](auto &in) { return ops::sum(in[0] * in[0], {1}); }});
  return cases;
}
} // namespace

TEST_CASE(MAXC_COMPILED_NAME("compiled reductions over floats (axes, keepdims, negative axes, NaN, ties)"), MAXC_COMPILED_TAGS) {
  for (DType d : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    INFO(dtype_name(d));
    // Small integers: lots of ties for max/argmax; prod stays finite.
    HostTensor x = quantized(random_tensor(d, {3, 4, 5}, -2, 2), 1.0);
    Tol tol = d == DType::f32 ? Tol{1e-6, 1e-6} : d == DType::f64 ? kF64 : kLow;
    bool low = d == DType::f16 || d == DType::bf16;
    check_cases({x}, reduction_cases(true, !low), tol);
    // NaN: the first NaN wins argmax/argmin and poisons max/min/sum; inf too.
    HostTensor y = x.clone();
    y.set_f64(7, kNaN);  // [0,1,2]
    y.set_f64(41, kNaN); // [2,0,1]
    y.set_f64(45, kNaN); // [2,1,0]
    y.set_f64(20, kInf);
    y.set_f64(33, -kInf);
    if (!low)
      check_cases({y}, reduction_cases(true, false), tol);
  }
}

TEST_CASE(MAXC_COMPILED_NAME("compiled reductions over integers (wrapping sum/prod, ties)"), MAXC_COMPILED_TAGS) {
  for (DType d : kIntTypes) {
    INFO(dtype_name(d));
    HostTensor x = with_ints(random_tensor(d, {3, 4, 5}, -5, 5), {int_max(d), int_max(d), int_min(d)});
    check_cases({x}, reduction_cases(false, d == DType::i32));
    HostTensor big = random_tensor(d, {3, 4, 5}, -100, 100); // sum/prod wrap
    check_cases({big}, {{"sum", [](auto &in) { return ops::sum(in[0], {}); }},
                        {"prod", [](auto &in) { return ops::prod(in[0], {}); }},
                        {"prod[1]", [](auto &in) { return ops::prod(in[0], {1}); }},
                        {"prod[0,2] keep", [](auto &in) { return ops::prod(in[0], {0, 2}, true); }}});
  }
}

TEST_CASE(MAXC_COMPILED_NAME("compiled softmax and normalizations (decomposed)"), MAXC_COMPILED_TAGS) {
  for (DType d : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    INFO(dtype_name(d));
    Tol tol = d == DType::f32 ? kF32Math : d == DType::f64 ? kF64 : kLow;
    HostTensor x = random_tensor(d, {2, 3, 8}, -3, 3);
    HostTensor w = random_tensor(d, {8}), bias = random_tensor(d, {8}), w2 = random_tensor(d, {3, 8});
    check_cases({x, w, bias, w2},
                {{"softmax", [](auto &in) { return ops::softmax(in[0]); }},
                 {"softmax_axis0", [](auto &in) { return ops::softmax(in[0], 0); }},
                 {"log_softmax", [](auto &in) { return ops::log_softmax(in[0], 1); }},
                 {"log_softmax_last", [](auto &in) { return ops::log_softmax(in[0], -1); }},
                 {"layer_norm", [](auto &in) { return ops::layer_norm(in[0], in[1], in[2]); }},
                 {"layer_norm_nobias_2d", [](auto &in) { return ops::layer_norm(in[0], in[3], std::nullopt, 1e-3); }},
                 {"rms_norm", [](auto &in) { return ops::rms_norm(in[0], in[1]); }},
                 {"rms_norm_2d", [](auto &in) { return ops::rms_norm(in[0], in[3], 1e-2); }}},
                tol);
    HostTensor img = random_tensor(d, {2, 3, 4, 5}, -3, 3), flat = random_tensor(d, {4, 3});
    HostTensor scale = random_tensor(d, {3}), shift = random_tensor(d, {3}), mean = random_tensor(d, {3});
    HostTensor var = random_tensor(d, {3}, 0.1, 2);
    check_cases({img, flat, scale, shift, mean, var},
                {{"batch_norm_nchw", [](auto &in) { return ops::batch_norm(in[0], in[2], in[3], in[4], in[5]); }},
                 {"batch_norm_nc", [](auto &in) { return ops::batch_norm(in[1], in[2], in[3], in[4], in[5], 1e-3); }},
                 {"global_avg_pool2d", [](auto &in) { return ops::global_avg_pool2d(in[0]); }}},
                tol);
  }
}

// ---------------------------------------------------------------------------
// Linear algebra, convolution, pooling

TEST_CASE(MAXC_COMPILED_NAME("compiled matmul: batched, broadcast batch dims, transposes, dtypes"), MAXC_COMPILED_TAGS) {
  for (DType d : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::i8, DType::u8, DType::i16,
                 DType::u16, DType::u32, DType::u64}) {
    INFO(dtype_name(d));
    Tol tol = d == DType::f32 ? kF32Acc : d == DType::f64 ? kF64Acc : is_float(d) ? kLow : kExact;
    double lo = is_float(d) ? -2 : -60, hi = is_float(d) ? 2 : 60; // i8 wraps
    HostTensor a = random_tensor(d, {2, 3, 4, 17}, lo, hi), b = random_tensor(d, {2, 3, 17, 6}, lo, hi);
    HostTensor a_b = random_tensor(d, {2, 1, 4, 17}, lo, hi), b_b = random_tensor(d, {3, 17, 6}, lo, hi);
    HostTensor at = random_tensor(d, {17, 4}, lo, hi), bt = random_tensor(d, {6, 17}, lo, hi);
    std::vector<Case> cases = {{"batched", [](auto &in) { return ops::matmul(in[0], in[1]); }},
                 {"broadcast_batch", [](auto &in) { return ops::matmul(in[2], in[3]); }},
                 {"rank2_vs_batched", [](auto &in) { return ops::matmul(in[4], in[3], true, false); }},
                 {"transpose_b", [](auto &in) { return ops::matmul(in[0], in[5], false, true); }},
                 {"transpose_both", [](auto &in) { return ops::matmul(in[4], in[5], true, true); }},
                 {"transpose_a_batched", [](auto &in) { return ops::matmul(ops::transpose(in[0], {0, 1, 3, 2}), in[1], true, false); }},
                 {"rank2", [](auto &in) { return ops::matmul(in[4], ops::transpose(in[5]), true, false); }},
                 // A fused elementwise consumer of the result.
                 {"matmul_relu", [](auto &in) { return ops::relu(ops::matmul(in[2], in[3])); }}};
    if (d != DType::f32 && d != DType::i32 && d != DType::f16) // the rest: a subset (JIT time)
      cases.resize(4);
    check_cases({a, b, a_b, b_b, at, bt}, cases, tol);
  }
}

TEST_CASE(MAXC_COMPILED_NAME("compiled f32 matmul at GEMM sizes (edges, K blocks, constants)"), MAXC_COMPILED_TAGS) {
  // M not a multiple of 6, N not a multiple of the vector panel, K > 256.
  HostTensor a = random_tensor(DType::f32, {37, 300}, -1, 1), b = random_tensor(DType::f32, {300, 70}, -1, 1);
  HostTensor a3 = random_tensor(DType::f32, {2, 13, 65}, -1, 1), b2 = random_tensor(DType::f32, {65, 33}, -1, 1);
  HostTensor wc = random_tensor(DType::f32, {70, 300}, -1, 1), bias = random_tensor(DType::f32, {70});
  Tol tol{1e-4, 1e-4}; // f32 accumulation over K = 300
  check_cases({a, b, a3, b2},
              {{"37x300x70", [](auto &in) { return ops::matmul(in[0], in[1]); }},
               {"batched_broadcast_rhs", [](auto &in) { return ops::matmul(in[2], in[3]); }},
               {"transpose_both_inputs", [](auto &in) { return ops::matmul(ops::transpose(in[2], {0, 2, 1}), ops::transpose(in[3]), true, true); }},
               {"const_transpose_b", [&](auto &in) { return ops::matmul(in[0], Tensor::from_host(wc), false, true); }},
               {"const_shared_by_two_linears", [&](auto &in) {
                  Tensor w = Tensor::from_host(wc);
                  return ops::linear(in[0], w, Tensor::from_host(bias)) - ops::linear(in[0] * 0.5, w);
                }},
               {"fused_operand", [](auto &in) { return ops::matmul(ops::iota({5, 300}, 1, DType::f32) * 0.01, in[1]); }},
               {"exp_operand", [](auto &in) { return ops::matmul(ops::exp(in[0]), in[1]); }}},
              tol);
}

TEST_CASE(MAXC_COMPILED_NAME("compiled linear with and without bias, rank-1 and rank-3 input"), MAXC_COMPILED_TAGS) {
  for (DType d : {DType::f32, DType::f16, DType::i32}) {
    INFO(dtype_name(d));
    Tol tol = d == DType::f32 ? kF32Acc : is_float(d) ? kLow : kExact;
    double lo = is_float(d) ? -2 : -20, hi = is_float(d) ? 2 : 20;
    HostTensor x3 = random_tensor(d, {2, 3, 12}, lo, hi), x1 = random_tensor(d, {12}, lo, hi);
    HostTensor w = random_tensor(d, {5, 12}, lo, hi), b = random_tensor(d, {5}, lo, hi);
    // Weights as graph constants (realized tensors) in some cases.
    HostTensor wc = random_tensor(d, {7, 12}, lo, hi), bc = random_tensor(d, {7}, lo, hi);
    check_cases({x3, x1, w, b},
                {{"rank3_bias", [](auto &in) { return ops::linear(in[0], in[2], in[3]); }},
                 {"rank3_nobias", [](auto &in) { return ops::linear(in[0], in[2]); }},
                 {"rank1_bias", [](auto &in) { return ops::linear(in[1], in[2], in[3]); }},
                 {"rank1_nobias", [](auto &in) { return ops::linear(in[1], in[2]); }},
                 {"const_weights", [&](auto &in) { return ops::linear(in[0], Tensor::from_host(wc), Tensor::from_host(bc)); }}},
                tol);
  }
}

TEST_CASE(MAXC_COMPILED_NAME("compiled conv2d: stride, padding, dilation, groups, depthwise, bias"), MAXC_COMPILED_TAGS) {
  for (DType d : {DType::f32, DType::f64, DType::f16}) {
    INFO(dtype_name(d));
    // f32 single-group convs run as GEMMs (CPU: im2col + register-blocked
    // GEMM, GPU: implicit GEMM), accumulating in f32: kF32Acc, as matmul.
    // The others accumulate in double like the reference.
    Tol tol = d == DType::f32 ? kF32Acc : d == DType::f64 ? kF64Acc : kLow;
    HostTensor x = random_tensor(d, {2, 4, 7, 8});
    HostTensor w = random_tensor(d, {6, 4, 3, 3}), bias = random_tensor(d, {6});
    HostTensor wg = random_tensor(d, {6, 2, 3, 2}), wd = random_tensor(d, {8, 1, 3, 3}), w1 = random_tensor(d, {3, 4, 1, 1});
    HostTensor bd = random_tensor(d, {8});
    ops::Conv2dOptions strided;
    strided.stride = {2, 1};
    strided.padding = {1, 0, 2, 1};
    strided.dilation = {1, 2};
    ops::Conv2dOptions grouped;
    grouped.groups = 2;
    grouped.padding = {1, 1};
    grouped.dilation = {2, 1};
    ops::Conv2dOptions depthwise;
    depthwise.groups = 4;
    depthwise.padding = {1, 1, 1, 1};
    depthwise.stride = {2, 2};
    check_cases({x, w, bias, wg, wd, w1, bd},
                {{"plain", [](auto &in) { return ops::conv2d(in[0], in[1]); }},
                 {"bias", [](auto &in) { return ops::conv2d(in[0], in[1], in[2]); }},
                 {"stride_pad_dilation", [&](auto &in) { return ops::conv2d(in[0], in[1], in[2], strided); }},
                 {"groups", [&](auto &in) { return ops::conv2d(in[0], in[3], in[2], grouped); }},
                 {"depthwise_x2", [&](auto &in) { return ops::conv2d(in[0], in[4], in[6], depthwise); }},
                 {"1x1", [](auto &in) { return ops::conv2d(in[0], in[5]); }},
                 {"conv_relu", [](auto &in) { return ops::relu(ops::conv2d(ops::exp(in[0]), in[1], in[2])); }}},
                tol);
  }
}

// The compositions the ONNX importer builds for the quantized ops
// (lib/Frontend/Onnx/OnnxQuantized.cpp): QuantizeLinear is
// cast(clamp(round(x / scale) + zp)) in f32, round half to even; ConvInteger
// runs an `exact` conv2d in f32 on the zero-point-shifted 8-bit values where
// every partial sum stays below 2^24 (chunks of channels summed in i32
// beyond), else in f64 (every partial sum an integer below 2^53);
// MatMulInteger likewise in f32 chunks, or an i32 matmul.
static Tensor quantize_like_onnx(const Tensor &x, double scale, double zp, DType dtype) {
  double lo = dtype == DType::u8 ? 0 : -128, hi = dtype == DType::u8 ? 255 : 127;
  Tensor q = ops::add(ops::round(ops::div(x, ops::scalar(scale, DType::f32))), ops::scalar(zp, DType::f32));
  return ops::cast(ops::minimum(ops::maximum(q, ops::scalar(lo, DType::f32)), ops::scalar(hi, DType::f32)), dtype);
}

TEST_CASE(MAXC_COMPILED_NAME("compiled quantization: ties to even, saturation, zero points 0/128/255"),
          MAXC_COMPILED_TAGS) {
  const std::vector<double> edges = {0.5,   -0.5,  1.5,    -1.5,  2.5,   -2.5,   126.5, 127.5, 128.5,
                                     -127.5, -128.5, -129.5, 254.5, 255.5, 256.5, -0.49, 0.51,  1e9,
                                     -1e9,  0,     -0.0,   300,   -300,  3.5,   -3.5};
  HostTensor x = with_values(random_tensor(DType::f32, {64}, -400, 400), edges);
  struct Q {
    DType dtype;
    double scale, zp;
  };
  const Q qs[] = {{DType::u8, 1, 0},   {DType::u8, 1, 128}, {DType::u8, 0.5, 255}, {DType::i8, 1, 0},
                  {DType::i8, 2, -128}, {DType::i8, 1, 127}};
  std::vector<Case> cases;
  for (const Q &q : qs) {
    cases.push_back({std::string(dtype_name(q.dtype)) + " zp " + std::to_string(int(q.zp)),
                     [q](auto &in) { return quantize_like_onnx(in[0], q.scale, q.zp, q.dtype); }});
    // The reference itself against ONNX's formula (std::nearbyint: ties to even).
    Graph g("q", {TensorType(DType::f32, make_shape(x.shape()))});
    {
      GraphRealizationContext ctx(g);
      g.output({quantize_like_onnx(Tensor::from_graph_value(g.inputs()[0]), q.scale, q.zp, q.dtype).value()});
    }
    HostTensor ref = Interpreter::run(g, {x})[0];
    double lo = q.dtype == DType::u8 ? 0 : -128, hi = q.dtype == DType::u8 ? 255 : 127;
    for (int64_t i = 0; i < x.numel(); ++i) {
      float v = std::nearbyint(static_cast<float>(x.get_f64(i)) / static_cast<float>(q.scale)) + float(q.zp);
      INFO(dtype_name(q.dtype) << " zp " << q.zp << " x " << x.get_f64(i));
      CHECK(ref.get_i64(i) == static_cast<int64_t>(std::clamp<double>(v, lo, hi)));
    }
  }
  check_cases({x}, cases);

  // ConvInteger / MatMulInteger: sums beyond f32's 2^24 (K = 64*3*3 products
  // of up to 255*255), exact on every path.
  HostTensor xc = random_tensor(DType::u8, {1, 64, 5, 5}, 0, 255), wc = random_tensor(DType::u8, {4, 64, 3, 3}, 0, 255);
  for (int64_t i = 0; i < xc.numel(); i += 2)
    xc.set_i64(i, 255); // with w's zero point 255 and x's 0: products of -255*255
  HostTensor a = random_tensor(DType::u8, {3, 600}, 0, 255), b = random_tensor(DType::i8, {600, 5}, -128, 127);
  ops::Conv2dOptions padded;
  padded.padding = {1, 1};
  check_cases({xc, wc, a, b},
              {{"conv_integer", [&](auto &in) {
                  Tensor xs = ops::cast(in[0], DType::f64);
                  Tensor ws = ops::sub(ops::cast(in[1], DType::f64), ops::scalar(255, DType::f64));
                  return ops::cast(ops::conv2d(xs, ws, std::nullopt, padded), DType::i32);
                }},
               {"matmul_integer", [](auto &in) {
                  Tensor as = ops::sub(ops::cast(in[2], DType::i32), ops::scalar(128, DType::i32));
                  Tensor bs = ops::sub(ops::cast(in[3], DType::i32), ops::scalar(-128, DType::i32));
                  return ops::matmul(as, bs);
                }}});

  // The f32 form: an `exact` conv of a shape Winograd would take (3x3, 32
  // channels, 16x16) at worst-case magnitudes: x = 255 on most pixels,
  // constant weights in [0, 255] whose sum per output channel is 65793 (the
  // bound 255 * 65793 = 2^24 - 1, one chunk) or 65795 (above: two chunks of
  // 16 channels, summed in i32). Winograd's transforms would round these sums.
  HostTensor xe = random_tensor(DType::u8, {1, 32, 16, 16}, 0, 255);
  for (int64_t i = 0; i < xe.numel(); ++i)
    if (i % 7 != 0)
      xe.set_i64(i, 255);
  auto weights = [](int64_t sum) {
    HostTensor w(DType::f32, {32, 32, 3, 3});
    for (int64_t o = 0; o < 32; ++o) {
      int64_t deficit = 255 * 288 - (sum - o % 3); // 0, 1 or 2 below `sum`
      for (int64_t j = 0; j < 288; ++j) {
        int64_t d = std::min<int64_t>(255, deficit);
        deficit -= d;
        w.set_f64(o * 288 + (j * 97 + o) % 288, static_cast<double>(255 - d)); // spread over channels
      }
    }
    return w;
  };
  HostTensor below = weights(65793), above = weights(65795);
  ops::Conv2dOptions exact;
  exact.padding = {1, 1};
  exact.exact = true;
  auto exact_conv = [&](const Tensor &x, const HostTensor &w) {
    return ops::cast(ops::conv2d(ops::cast(x, DType::f32), Tensor::from_host(w), std::nullopt, exact), DType::i32);
  };
  auto channels = [](const HostTensor &w, int64_t c0, int64_t c1) {
    HostTensor out(DType::f32, {32, c1 - c0, 3, 3});
    for (int64_t o = 0; o < 32; ++o)
      for (int64_t k = 0; k < (c1 - c0) * 9; ++k)
        out.set_f64(o * (c1 - c0) * 9 + k, w.get_f64(o * 288 + c0 * 9 + k));
    return out;
  };
  HostTensor above_lo = channels(above, 0, 16), above_hi = channels(above, 16, 32);
  check_cases({xe}, {{"exact_conv_below_2^24", [&](auto &in) { return exact_conv(in[0], below); }},
                     {"exact_conv_split_above_2^24", [&](auto &in) {
                        return ops::add(exact_conv(ops::slice(in[0], {0}, {16}, {1}), above_lo),
                                        exact_conv(ops::slice(in[0], {16}, {32}, {1}), above_hi));
                      }}});
}

TEST_CASE(MAXC_COMPILED_NAME("compiled conv_transpose2d"), MAXC_COMPILED_TAGS) {
  for (DType d : {DType::f32, DType::f16}) {
    INFO(dtype_name(d));
    Tol tol = d == DType::f32 ? Tol{1e-5, 1e-6} : kLow;
    HostTensor x = random_tensor(d, {2, 4, 5, 6});
    HostTensor w = random_tensor(d, {4, 3, 3, 3}), bias = random_tensor(d, {3});
    HostTensor wg = random_tensor(d, {4, 2, 2, 3}), bg = random_tensor(d, {4});
    ops::ConvTranspose2dOptions s2;
    s2.stride = {2, 2};
    s2.padding = {1, 1, 1, 1};
    s2.output_padding = {1, 0};
    ops::ConvTranspose2dOptions g2;
    g2.groups = 2;
    g2.dilation = {2, 1};
    g2.stride = {1, 3};
    g2.padding = {0, 1, 1, 0};
    g2.output_padding = {1, 2};
    check_cases({x, w, bias, wg, bg},
                {{"plain", [](auto &in) { return ops::conv_transpose2d(in[0], in[1]); }},
                 {"stride_pad_outpad_bias", [&](auto &in) { return ops::conv_transpose2d(in[0], in[1], in[2], s2); }},
                 {"groups_dilation", [&](auto &in) { return ops::conv_transpose2d(in[0], in[3], in[4], g2); }}},
                tol);
  }
}

TEST_CASE(MAXC_COMPILED_NAME("compiled max/avg pooling and global average pooling"), MAXC_COMPILED_TAGS) {
  for (DType d : {DType::f32, DType::f64, DType::f16}) {
    INFO(dtype_name(d));
    Tol tol = d == DType::f32 ? Tol{1e-6, 1e-7} : d == DType::f64 ? kF64Acc : kLow;
    HostTensor x = random_tensor(d, {2, 3, 7, 8});
    HostTensor xn = x.clone(); // NaN and inf propagate through max
    xn.set_f64(9, kNaN);
    xn.set_f64(60, kInf);
    xn.set_f64(100, -kInf);
    ops::Pool2dOptions k3;
    k3.kernel = {3, 3};
    k3.stride = {2, 2};
    k3.padding = {1, 1, 1, 1};
    ops::Pool2dOptions k3inc = k3;
    k3inc.count_include_pad = true;
    ops::Pool2dOptions asym;
    asym.kernel = {2, 3};
    asym.stride = {1, 2};
    asym.padding = {1, 0, 0, 2};
    ops::Pool2dOptions asym_inc = asym;
    asym_inc.count_include_pad = true;
    std::vector<Case> cases = {{"max_default", [](auto &in) { return ops::max_pool2d(in[0]); }},
                               {"max_k3_pad", [&](auto &in) { return ops::max_pool2d(in[0], k3); }},
                               {"max_asym", [&](auto &in) { return ops::max_pool2d(in[0], asym); }},
                               {"avg_default", [](auto &in) { return ops::avg_pool2d(in[0]); }},
                               {"avg_k3_pad", [&](auto &in) { return ops::avg_pool2d(in[0], k3); }},
                               {"avg_k3_pad_include", [&](auto &in) { return ops::avg_pool2d(in[0], k3inc); }},
                               {"avg_asym", [&](auto &in) { return ops::avg_pool2d(in[0], asym); }},
                               {"avg_asym_include", [&](auto &in) { return ops::avg_pool2d(in[0], asym_inc); }},
                               {"global_avg", [](auto &in) { return ops::global_avg_pool2d(in[0]); }}};
    check_cases({x}, cases, tol);
    check_cases({xn}, cases, tol);
  }
}

// ---------------------------------------------------------------------------
// Shape ops (exact on every dtype: they move elements)

namespace {
std::vector<Case> shape_cases(DType d, const HostTensor &table) {
  constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();
  // in[0]: x [2,3,4]; in[1]: [3,1]; in[2]: [1,3,1,4]; in[3]: [2,1,4]; in[4]: [2,5,4]
  std::vector<Case> cases = {
      {"reshape_-1", [](auto &in) { return ops::reshape(in[0], {4, -1}); }},
      {"reshape_flat", [](auto &in) { return ops::reshape(in[0], {24}); }},
      {"reshape_-1_first", [](auto &in) { return ops::reshape(in[0], {-1, 2, 3}); }},
      {"transpose_perm", [](auto &in) { return ops::transpose(in[0], {2, 0, 1}); }},
      {"transpose_reverse", [](auto &in) { return ops::transpose(in[0]); }},
      {"transpose_negative", [](auto &in) { return ops::permute(in[0], {-1, 0, -2}); }},
      {"broadcast_to", [](auto &in) { return ops::broadcast_to(in[1], {2, 3, 4}); }},
      {"squeeze_all", [](auto &in) { return ops::squeeze(in[2]); }},
      {"squeeze_0", [](auto &in) { return ops::squeeze(in[2], {0}); }},
      {"squeeze_-2", [](auto &in) { return ops::squeeze(in[2], {-2}); }},
      {"unsqueeze_0_-1", [](auto &in) { return ops::unsqueeze(in[0], {0, -1}); }},
      {"unsqueeze_2", [](auto &in) { return ops::unsqueeze(in[0], {2}); }},
      {"concat3_axis1", [](auto &in) { return ops::concat({in[0], in[3], in[4]}, 1); }},
      {"concat3_axis-1", [](auto &in) { return ops::concat({in[0], in[0], in[0]}, -1); }},
      {"concat_transposed", [](auto &in) { return ops::concat({ops::transpose(in[4], {1, 0, 2}), ops::transpose(in[0], {1, 0, 2})}, 0); }},
      {"slice_reverse", [](auto &in) { return ops::slice(in[0], {3}, {-5}, {2}, {-1}); }},
      {"slice_neg_step2", [](auto &in) { return ops::slice(in[0], {0, 5}, {2, -100}, {0, 2}, {1, -2}); }},
      {"slice_neg_start", [](auto &in) { return ops::slice(in[0], {-2, -3}, {kEnd, -1}, {1, 2}); }},
      {"slice_clamped", [](auto &in) { return ops::slice(in[0], {-100}, {100}, {1}, {2}); }},
      {"slice_empty", [](auto &in) { return ops::slice(in[0], {2}, {1}, {2}); }},
      {"slice_reverse_all", [](auto &in) { return ops::slice(in[0], {-1, -1, -1}, {-kEnd, -kEnd, -kEnd}, {0, 1, 2}, {-1, -1, -1}); }},
      {"pad_negative", [d](auto &in) { return ops::pad(in[0], {1, 0, -1, 2, 0, -2}, d == DType::boolean ? 1.0 : 7.0); }},
      {"pad_crop_only", [](auto &in) { return ops::pad(in[0], {0, -1, -1, -1, -2, 0}); }},
      {"tile", [](auto &in) { return ops::tile(in[0], {2, 1, 3}); }},
      {"tile_zero", [](auto &in) { return ops::tile(in[0], {1, 0, 1}); }},
      {"tile_of_transpose", [](auto &in) { return ops::tile(ops::transpose(in[1]), {2, 2}); }},
      // gather: 2-D and negative indices, every index dtype, axes 0/1/-1.
      {"gather_2d_axis1", [](auto &in) {
         return ops::gather(in[0], Tensor::from_i64(DType::i64, {2, 2}, {0, -1, 2, -3}), 1);
       }},
      {"gather_i32_axis-1", [](auto &in) {
         return ops::gather(in[0], Tensor::from_i64(DType::i32, {5}, {3, 0, -4, 1, 1}), -1);
       }},
      {"gather_i8_axis0", [](auto &in) {
         return ops::gather(in[0], Tensor::from_i64(DType::i8, {3, 1}, {1, -2, 0}), 0);
       }},
      {"gather_u8_axis0", [](auto &in) { // 254 is not -2: it clamps
         return ops::gather(in[0], Tensor::from_i64(DType::u8, {3, 1}, {1, 254, 0}), 0);
       }},
      {"gather_i16_axis1", [](auto &in) {
         return ops::gather(in[0], Tensor::from_i64(DType::i16, {2}, {-1, 2}), 1);
       }},
      {"gather_u16_u32_u64", [](auto &in) {
         Tensor g = ops::gather(in[0], Tensor::from_i64(DType::u16, {2}, {2, 0}), 1);
         g = ops::gather(g, Tensor::from_i64(DType::u32, {3}, {1, 0, 1}), 0);
         return ops::gather(g, Tensor::from_i64(DType::u64, {2}, {0, 1}), 1);
       }},
      {"gather_graph_indices", [](auto &in) {
         return ops::gather(in[4], ops::sub(ops::iota({2, 3}, 1, DType::i32), ops::full(1, DType::i32, {2, 3})), 1);
       }},
      {"embedding", [table](auto &) {
         return ops::embedding(Tensor::from_host(table), Tensor::from_i64(DType::i32, {2, 3}, {0, 9, 3, -1, 5, 5}));
       }},
      // Out of range: negatives wrap once, the rest clamps (docs/ops.md).
      {"gather_out_of_range", [](auto &in) {
         return ops::gather(in[0], Tensor::from_i64(DType::i64, {6}, {4, -5, 100, -100, INT64_MIN, INT64_MAX}), -1);
       }},
      {"embedding_out_of_range", [table](auto &) {
         return ops::embedding(Tensor::from_host(table), Tensor::from_i64(DType::i32, {4}, {10, -11, 1000, INT32_MIN}));
       }},
      // An axis of size 0: nothing to select, every element 0 (docs/ops.md).
      {"gather_empty_axis", [](auto &) {
         return ops::gather(Tensor::from_host(HostTensor(DType::f32, {3, 0})), Tensor::from_i64(DType::i64, {2}, {0, 5}), 1);
       }}};
  for (int piece = 0; piece < 3; ++piece) {
    cases.push_back({"split_axis-1." + std::to_string(piece),
                     [piece](auto &in) { return ops::split(in[0], {1, 2, 1}, -1)[piece]; }});
    cases.push_back({"split_axis1_empty_piece." + std::to_string(piece),
                     [piece](auto &in) { return ops::split(in[0], {1, 0, 2}, 1)[piece]; }});
  }
  return cases;
}
} // namespace

TEST_CASE(MAXC_COMPILED_NAME("compiled shape ops on every dtype"), MAXC_COMPILED_TAGS) {
  for (DType d : {DType::f32, DType::i64, DType::boolean, DType::f16, DType::i8}) {
    INFO(dtype_name(d));
    double lo = is_float(d) ? -2 : -100, hi = is_float(d) ? 2 : 100;
    HostTensor x = random_tensor(d, {2, 3, 4}, lo, hi);
    if (d == DType::f32)
      x = with_values(x, {kNaN, -0.0, kInf});
    if (d == DType::i64)
      x = with_ints(x, {int_min(DType::i64), int_max(DType::i64), (int64_t(1) << 53) + 1});
    HostTensor table = random_tensor(d, {10, 4}, lo, hi);
    check_cases({x, random_tensor(d, {3, 1}, lo, hi), random_tensor(d, {1, 3, 1, 4}, lo, hi),
                 random_tensor(d, {2, 1, 4}, lo, hi), random_tensor(d, {2, 5, 4}, lo, hi)},
                shape_cases(d, table));
  }
}

TEST_CASE(MAXC_COMPILED_NAME("compiled split as a multi-output node"), MAXC_COMPILED_TAGS) {
  HostTensor x = random_tensor(DType::f32, {4, 9});
  check_multi({x}, "split", [](auto &in) { return ops::split(in[0], {2, 3, 4}, 1); });
  // All three pieces consumed by one more op each (fused into their readers).
  check_multi({x}, "split_consumed", [](auto &in) {
    auto parts = ops::split(in[0], {1, 1, 2}, 0);
    return Ts{ops::exp(parts[0]), parts[1] * 2.0, ops::sum(parts[2], {0})};
  }, kF32Math);
}

// ---------------------------------------------------------------------------
// Graph-level situations: symbolic dims, empty tensors, shared values,
// outputs that live elsewhere, subgraph calls.

TEST_CASE(MAXC_COMPILED_NAME("compiled graphs with symbolic dims run at several sizes"), MAXC_COMPILED_TAGS) {
  HostTensor w = random_tensor(DType::f32, {5, 8}), b = random_tensor(DType::f32, {5});
  HostTensor ln = random_tensor(DType::f32, {8});
  // `crop` adds an output of dim batch-1, which needs batch >= 1.
  auto run = [&](bool crop, std::vector<int64_t> batches) {
    Graph graph("sym", {TensorType(DType::f32, {Dim("batch"), 8}), TensorType(DType::i64, {Dim("batch"), 3})});
    std::vector<std::string> names;
    std::vector<Tol> tols;
    {
      GraphRealizationContext ctx(graph);
      Tensor x = Tensor::from_graph_value(graph.inputs()[0]);
      Tensor ids = Tensor::from_graph_value(graph.inputs()[1]);
      std::vector<Value> outs;
      auto out = [&](const std::string &name, const Tensor &t, Tol tol = kExact) {
        names.push_back(name);
        tols.push_back(tol);
        outs.push_back(t.value());
      };
      out("softmax(linear)", ops::softmax(ops::relu(ops::linear(x, Tensor::from_host(w), Tensor::from_host(b)))),
          kF32Acc);
      out("sum [batch]", ops::sum(x, {1}), {1e-6, 1e-6});
      out("mean over batch (NaN for 0)", ops::mean(x, {0}, true), {1e-6, 1e-6});
      out("reshape [8*batch]", ops::reshape(x, {-1}));
      out("reshape [batch,4,2]", ops::reshape(x, {-1, 4, 2}));
      out("concat [2*batch]", ops::concat({x, x * 2.0}, 0));
      out("transpose [8,batch]", ops::transpose(x));
      out("layer_norm", ops::layer_norm(x, Tensor::from_host(ln), std::nullopt), kF32Acc);
      out("argmax", ops::argmax(x, -1));
      out("sum ids (scalar)", ops::sum(ids * ids, {}));
      out("gather", ops::gather(x, Tensor::from_i64(DType::i32, {2}, {7, -8}), 1));
      out("broadcast_to", ops::broadcast_to(ops::unsqueeze(ops::sum(x, {1}), {1}), {Dim("batch"), 4}),
          {1e-6, 1e-6});
      out("iota+slice", ops::iota({Dim("batch"), 2}, 0, DType::f32) + ops::slice(x, {0}, {2}, {1}));
      out("tile [2*batch]", ops::tile(x, {2, 1}));
      out("pad", ops::pad(x, {1, 1, 0, -2}, -1.0));
      out("concat [2*batch+2]", ops::concat({x, ops::full(2.0, DType::f32, {2, 8}), x}, 0));
      out("slice full range of batch", ops::slice(x, {0, 1}, {std::numeric_limits<int64_t>::max(), 8}, {0, 1}, {1, 3}));
      if (crop)
        out("pad [batch-1]", ops::pad(x, {0, -1, 0, 0}));
      graph.output(outs);
    }
    for (int64_t batch : batches) {
      INFO("batch = " << batch);
      check_graph(graph, {random_tensor(DType::f32, {batch, 8}), random_tensor(DType::i64, {batch, 3}, -9, 9)},
                  names, tols);
    }
  };
  run(true, {3, 1});
  run(false, {0});
}

// Symbolic H and W (one compiled graph, several image sizes): convolutions
// (plain, strided/padded/dilated, depthwise, pointwise), transposed
// convolutions (the kernel = stride rewrite to a matmul, and the general
// one), pools and global pooling, all through their general paths.
TEST_CASE(MAXC_COMPILED_NAME("compiled conv, transposed conv and pools with symbolic height and width"),
          MAXC_COMPILED_TAGS) {
  HostTensor w = random_tensor(DType::f32, {6, 4, 3, 3}), bias = random_tensor(DType::f32, {6});
  HostTensor wd = random_tensor(DType::f32, {4, 1, 3, 3}), w1 = random_tensor(DType::f32, {5, 4, 1, 1});
  HostTensor wt2 = random_tensor(DType::f32, {4, 3, 2, 2}), wt3 = random_tensor(DType::f32, {4, 3, 3, 3});
  Graph graph("spatial", {TensorType(DType::f32, {1, 4, Dim("h"), Dim("w")})});
  std::vector<std::string> names;
  std::vector<Tol> tols;
  {
    GraphRealizationContext ctx(graph);
    Tensor x = Tensor::from_graph_value(graph.inputs()[0]);
    auto c = [](const HostTensor &t) { return Tensor::from_host(t); };
    std::vector<Value> outs;
    auto out = [&](const std::string &name, const Tensor &t, Tol tol = kF32Acc) {
      names.push_back(name);
      tols.push_back(tol);
      outs.push_back(t.value());
    };
    ops::Conv2dOptions same;
    same.padding = {1, 1};
    ops::Conv2dOptions strided;
    strided.stride = {2, 1};
    strided.padding = {1, 0, 2, 1};
    strided.dilation = {1, 2};
    ops::Conv2dOptions depthwise;
    depthwise.groups = 4;
    depthwise.padding = {1, 1, 1, 1};
    depthwise.stride = {2, 2};
    ops::ConvTranspose2dOptions t2;
    t2.stride = {2, 2};
    ops::ConvTranspose2dOptions t3;
    t3.stride = {2, 2};
    t3.padding = {1, 1, 1, 1};
    t3.output_padding = {1, 0};
    ops::Pool2dOptions k3;
    k3.kernel = {3, 3};
    k3.stride = {2, 2};
    k3.padding = {1, 1, 1, 1};
    ops::Pool2dOptions k3inc = k3;
    k3inc.count_include_pad = true;
    out("conv same+bias+relu", ops::relu(ops::conv2d(x, c(w), c(bias), same)));
    out("conv stride/pad/dilation", ops::conv2d(x, c(w), std::nullopt, strided));
    out("depthwise stride 2", ops::conv2d(x, c(wd), std::nullopt, depthwise));
    out("pointwise", ops::conv2d(x, c(w1)));
    out("conv_transpose k2 s2", ops::conv_transpose2d(x, c(wt2), std::nullopt, t2), Tol{1e-5, 1e-6});
    out("conv_transpose k3 s2 pad", ops::conv_transpose2d(x, c(wt3), std::nullopt, t3), Tol{1e-5, 1e-6});
    out("max_pool 2x2", ops::max_pool2d(x), kExact);
    out("max_pool k3 s2 pad", ops::max_pool2d(x, k3), kExact);
    out("avg_pool k3 s2 pad", ops::avg_pool2d(x, k3), Tol{1e-6, 1e-7});
    out("avg_pool k3 s2 pad include", ops::avg_pool2d(x, k3inc), Tol{1e-6, 1e-7});
    out("global_avg_pool2d", ops::global_avg_pool2d(x), Tol{1e-6, 1e-7});
    graph.output(outs);
  }
  for (auto [h, wd_] : std::vector<std::pair<int64_t, int64_t>>{{5, 7}, {3, 12}}) {
    INFO("h = " << h << ", w = " << wd_);
    check_graph(graph, {random_tensor(DType::f32, {1, 4, h, wd_})}, names, tols);
  }
}

TEST_CASE(MAXC_COMPILED_NAME("compiled ops on rank-0 tensors"), MAXC_COMPILED_TAGS) {
  HostTensor x = random_tensor(DType::f32, {}), i = random_tensor(DType::i32, {}, -9, 9);
  check_cases({x, i}, {{"exp", [](auto &in) { return ops::exp(in[0]); }},
                       {"sum", [](auto &in) { return ops::sum(in[0], {}); }},
                       {"max_keep", [](auto &in) { return ops::max(in[1], {}, true); }},
                       {"reshape", [](auto &in) { return ops::reshape(in[0], {1, 1}); }},
                       {"broadcast_to", [](auto &in) { return ops::broadcast_to(in[1], {3, 2}); }},
                       {"unsqueeze", [](auto &in) { return ops::unsqueeze(in[0], {0}); }},
                       {"add_vector", [](auto &in) { return in[0] + ops::range(0, 4, 1, DType::f32); }},
                       {"cast", [](auto &in) { return ops::cast(in[0] * 10.0, DType::i32) + in[1]; }}},
              kF32Math);
}

TEST_CASE(MAXC_COMPILED_NAME("compiled ops on empty tensors (a 0-size batch)"), MAXC_COMPILED_TAGS) {
  HostTensor x = random_tensor(DType::f32, {0, 8}), y = random_tensor(DType::f32, {2, 8});
  HostTensor w = random_tensor(DType::f32, {8, 3});
  check_cases({x, y, w}, {{"exp", [](auto &in) { return ops::exp(in[0]); }},
                          {"sum_axis0", [](auto &in) { return ops::sum(in[0], {0}); }},
                          {"prod_axis0", [](auto &in) { return ops::prod(in[0], {0}); }},
                          {"mean_axis0_nan", [](auto &in) { return ops::mean(in[0], {0}); }},
                          {"sum_axis1", [](auto &in) { return ops::sum(in[0], {1}); }},
                          {"max_axis1", [](auto &in) { return ops::max(in[0], {1}); }},
                          {"argmax_axis1", [](auto &in) { return ops::argmax(in[0], 1); }},
                          {"matmul", [](auto &in) { return ops::matmul(in[0], in[2]); }},
                          {"matmul_k0", [](auto &in) { return ops::matmul(ops::slice(ops::transpose(in[2]), {0}, {0}, {1}), ops::slice(in[2], {0}, {0})); }},
                          {"concat_with_empty", [](auto &in) { return ops::concat({in[0], in[1], in[0]}, 0); }},
                          {"softmax", [](auto &in) { return ops::softmax(in[0]); }},
                          {"reshape_-1", [](auto &in) { return ops::reshape(in[0], {-1, 4}); }},
                          {"transpose", [](auto &in) { return ops::transpose(in[0]); }},
                          {"pad_empty", [](auto &in) { return ops::pad(in[0], {1, 1, 0, 0}, 3.0); }}},
              kF32Math);
}

TEST_CASE(MAXC_COMPILED_NAME("compiled graph where one value is used twice (stored, not fused)"), MAXC_COMPILED_TAGS) {
  Graph graph("twice", {TensorType(DType::f32, {3, 16})});
  ValueId shared = 0;
  {
    GraphRealizationContext ctx(graph);
    Tensor x = Tensor::from_graph_value(graph.inputs()[0]);
    Tensor y = ops::exp(x * 0.5); // read by two nodes (and twice by one)
    shared = y.value().id();
    Tensor z = ops::tanh(y);     // fused into its only reader
    graph.output({y * y + z, ops::sum(y, {1})});
  }
  LoweringPlan plan = plan_lowering(graph);
  INFO(describe_plan(graph, plan));
  CHECK(plan.values[shared].storage == Storage::temp);
  check_graph(graph, {random_tensor(DType::f32, {3, 16})}, {"y*y+tanh(y)", "sum(y)"}, {kF32Math, kF32Math});
}

TEST_CASE(MAXC_COMPILED_NAME("compiled outputs that are inputs, constants or the same value twice"), MAXC_COMPILED_TAGS) {
  Graph graph("outs", {TensorType(DType::f32, {2, 5}), TensorType(DType::i32, {4})});
  HostTensor k = random_tensor(DType::f32, {3, 2});
  {
    GraphRealizationContext ctx(graph);
    Tensor x = Tensor::from_graph_value(graph.inputs()[0]);
    Tensor i = Tensor::from_graph_value(graph.inputs()[1]);
    Tensor c = ctx.add_source(Tensor::from_host(k), "k");
    Tensor y = ops::relu(x) + 1.0;
    graph.output({x, c, y, y, i, x, c * 2.0, ops::full(4, DType::i32, {2})});
  }
  check_graph(graph, {random_tensor(DType::f32, {2, 5}), random_tensor(DType::i32, {4}, -50, 50)},
              {"input", "constant", "y", "y again", "int input", "input again", "constant*2", "full"},
              std::vector<Tol>(8, kExact));
}

TEST_CASE(MAXC_COMPILED_NAME("compiled subgraph call chain with different weights"), MAXC_COMPILED_TAGS) {
  Graph graph("chain", {TensorType(DType::f32, {Dim("batch"), 8})});
  auto block = [](GraphRealizationContext &, const std::vector<Tensor> &args, const NamedTensors &p) {
    const Tensor &x = args[0];
    Tensor h = ops::matmul(x, p.at("w")) + p.at("b");
    return TensorTree(x + ops::relu(h) * p.at("scale"));
  };
  {
    GraphRealizationContext ctx(graph);
    Tensor x = Tensor::from_graph_value(graph.inputs()[0]);
    Tensor first = x;
    for (int i = 0; i < 3; ++i) {
      CallOptions options;
      options.instance = "layers." + std::to_string(i);
      options.name = "Block";
      NamedTensors params = {{"w", Tensor::from_host(random_tensor(DType::f32, {8, 8}))},
                             {"b", Tensor::from_host(random_tensor(DType::f32, {8}))},
                             {"scale", Tensor::from_host(random_tensor(DType::f32, {1}))}};
      x = ctx.call(options, block, {x}, params).tensor();
    }
    // A call whose argument is a cheap (normally fused) value.
    Tensor ones = ops::full(1.0, DType::f32, {Dim("batch"), 8});
    CallOptions options;
    options.instance = "layers.3";
    options.name = "Block";
    Tensor last = ctx.call(options, block, {ones + first},
                           {{"w", Tensor::from_host(random_tensor(DType::f32, {8, 8}))},
                            {"b", Tensor::from_host(random_tensor(DType::f32, {8}))},
                            {"scale", Tensor::from_host(random_tensor(DType::f32, {1}))}})
                      .tensor();
    options.instance = "layers.4";
    Tensor fill = ctx.call(options, block, {ones},
                           {{"w", Tensor::from_host(random_tensor(DType::f32, {8, 8}))},
                            {"b", Tensor::from_host(random_tensor(DType::f32, {8}))},
                            {"scale", Tensor::from_host(random_tensor(DType::f32, {1}))}})
                      .tensor();
    graph.output({x, last, fill});
  }
  REQUIRE(graph.subgraphs().size() == 1);
  for (int64_t batch : {2, 1}) {
    INFO("batch = " << batch);
    check_graph(graph, {random_tensor(DType::f32, {batch, 8})}, {"chain", "call(ones+x)", "call(full)"},
                {kF32Acc, kF32Acc, kF32Acc});
  }
}

TEST_CASE(MAXC_COMPILED_NAME("compiled fusion patterns (fused producers read at odd indices)"), MAXC_COMPILED_TAGS) {
  HostTensor x = random_tensor(DType::f32, {2, 3, 4}), y = random_tensor(DType::f32, {3, 1});
  check_cases({x, y},
              {{"reshape(transpose(exp))", [](auto &in) { return ops::reshape(ops::transpose(ops::exp(in[0]), {2, 1, 0}), {6, -1}); }},
               {"pad(exp) same size", [](auto &in) { return ops::pad(ops::exp(in[0]), {1, -1, 0, 0, -1, 1}, 2.0); }},
               {"slice_reverse(tanh) same size", [](auto &in) { return ops::slice(ops::tanh(in[0]), {-1}, {-100}, {1}, {-1}); }},
               {"sum(broadcast_to)", [](auto &in) { return ops::sum(ops::broadcast_to(ops::exp(in[1]), {2, 3, 4}), {0, 2}); }},
               {"argmax(neg)", [](auto &in) { return ops::argmax(ops::neg(in[0] * in[0]), 1, true); }},
               {"max(where)", [](auto &in) { return ops::max(ops::where(ops::greater(in[0], in[1]), in[0], ops::neg(in[0])), {-1}); }},
               {"cast chain", [](auto &in) { return ops::cast(ops::cast(ops::cast(in[0] * 100.0, DType::i8), DType::f16), DType::f32); }},
               {"tile(transpose(sqrt|x|))", [](auto &in) { return ops::tile(ops::transpose(ops::sqrt(ops::abs(in[1]))), {3, 2}); }},
               {"concat(split)", [](auto &in) {
                  auto parts = ops::split(ops::exp(in[0]), {1, 2, 1}, 2);
                  return ops::concat({parts[2], parts[0], parts[1]}, 2);
                }}},
              kF32Math);
}

TEST_CASE(MAXC_COMPILED_NAME("compiled DAG with many shared temporaries (workspace slot reuse)"), MAXC_COMPILED_TAGS) {
  Graph graph("dag", {TensorType(DType::f32, {Dim("n"), 16}), TensorType(DType::f32, {16})});
  {
    GraphRealizationContext ctx(graph);
    Tensor x = Tensor::from_graph_value(graph.inputs()[0]), b = Tensor::from_graph_value(graph.inputs()[1]);
    std::vector<Tensor> vals = {x, x * b};
    // Every value feeds several later ones (so it is stored), all the same
    // size (so slots are shared as lifetimes end).
    for (int i = 0; i < 24; ++i) {
      Tensor p = vals[(i * 7 + 3) % vals.size()], q = vals[(i * 5 + 1) % vals.size()];
      Tensor t;
      switch (i % 6) {
      case 0: t = (p + q) * 0.5; break;
      case 1: t = ops::tanh(p) * q; break;
      case 2: t = ops::maximum(p, q) - p * 0.25; break;
      case 3: t = p * 0.5 + ops::sum(q, {1}, true) * 0.01; break;
      case 4: t = ops::transpose(ops::transpose(p) * 0.75); break;
      default: t = ops::softmax(p - q); break;
      }
      vals.push_back(t);
    }
    graph.output({vals.back(), vals[vals.size() - 5], vals[10], ops::sum(vals[20], {0})});
  }
  std::unique_ptr<Graph> lowered = decompose(graph);
  LoweringPlan plan = plan_lowering(*lowered);
  size_t temps = 0;
  for (const ValuePlan &p : plan.values)
    temps += p.storage == Storage::temp;
  INFO(describe_plan(*lowered, plan));
  CHECK(plan.slots.size() < temps); // slots are reused
  for (int64_t n : {5, 1}) {
    INFO("n = " << n);
    check_graph(graph, {random_tensor(DType::f32, {n, 16}), random_tensor(DType::f32, {16})},
                {"last", "last-4", "vals[10]", "sum(vals[20])"}, std::vector<Tol>(4, Tol{1e-4, 1e-5}));
  }
}
