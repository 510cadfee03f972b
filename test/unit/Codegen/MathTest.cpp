// Accuracy of the f32 polynomial math of the code generator
// (lib/Codegen/MathEmitter.cpp: exp, log, tanh, erf, sigmoid, sin, cos) against libm
// in double, on dense sweeps (~1e5 points per function) plus special values.
// Each function runs as a one-op graph through the JIT.
//
// Error measures, with r = std::f((double)x) and y the compiled f32 result:
//   rel = |y - r| / |r|          over results with |r| >= FLT_MIN
//   ulp = |y - r| / ulp_f32(r)   over every finite result (denormal ulp 2^-149)
// The sweeps are fixed grids (no randomness), so the maxima are
// reproducible; the bounds asserted below are the measured values (as
// documented in MathEmitter.h) plus ~10%. Set MAXC_MATH_REPORT=1 to print
// the measured maxima.
#include "CompiledRunner.h"

#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>

using namespace maxc;
using namespace maxc::test;

namespace {

using UnaryOp = Tensor (*)(const Tensor &);

std::vector<float> run_op(UnaryOp op, const std::vector<float> &xs) {
  const int64_t n = static_cast<int64_t>(xs.size());
  Graph graph("math", {TensorType(DType::f32, {n})});
  {
    GraphRealizationContext ctx(graph);
    graph.output({op(Tensor::from_graph_value(graph.inputs()[0]))});
  }
  HostTensor in(DType::f32, {n});
  std::memcpy(in.data(), xs.data(), xs.size() * sizeof(float));
  HostTensor out = run_compiled(graph, {in}).at(0);
  std::vector<float> ys(xs.size());
  std::memcpy(ys.data(), out.data(), ys.size() * sizeof(float));
  return ys;
}

double ulp_of(double r) {
  double a = std::fabs(r);
  if (a < FLT_MIN)
    return std::ldexp(1.0, -149);
  int e;
  std::frexp(a, &e); // a = m * 2^e, m in [0.5, 1)
  return std::ldexp(1.0, e - 24);
}

struct Accuracy {
  double max_rel = 0, rel_at = 0;
  double max_ulp = 0, ulp_at = 0;
  double max_abs = 0;
  std::vector<std::string> special_failures;
};

bool is_exact_special(double r) { return r == 0 || std::isinf(r) || std::isnan(r) || std::fabs(r) == 1.0; }

/// Measures `op` against `ref` on `xs`; special inputs must match exactly
/// where libm's result is 0, ±1, ±inf or NaN (sign of zero included).
Accuracy measure(UnaryOp op, double (*ref)(double), const std::vector<float> &xs, const std::vector<float> &specials) {
  std::vector<float> all = xs;
  all.insert(all.end(), specials.begin(), specials.end());
  std::vector<float> ys = run_op(op, all);
  Accuracy acc;
  for (size_t i = 0; i < all.size(); ++i) {
    double x = all[i], r = ref(x), y = ys[i];
    bool special = i >= xs.size();
    double rf = static_cast<float>(r); // libm's result rounded to f32
    if (is_exact_special(rf) || std::isnan(r)) {
      bool same = (std::isnan(rf) && std::isnan(y)) ||
                  (y == rf && std::signbit(y) == std::signbit(rf));
      if (!same && (special || std::isnan(r) || std::isinf(rf))) {
        std::ostringstream os;
        os.precision(9);
        os << "f(" << x << ") = " << y << ", libm " << rf;
        acc.special_failures.push_back(os.str());
      }
      if (std::isnan(r) || std::isinf(rf))
        continue;
    }
    double err = std::fabs(y - r);
    if (std::isnan(y) || std::isinf(y))
      err = std::numeric_limits<double>::infinity();
    acc.max_abs = std::max(acc.max_abs, err);
    double ulp = err / ulp_of(r);
    if (ulp > acc.max_ulp)
      acc.max_ulp = ulp, acc.ulp_at = x;
    if (std::fabs(r) >= FLT_MIN) {
      double rel = err / std::fabs(r);
      if (rel > acc.max_rel)
        acc.max_rel = rel, acc.rel_at = x;
    }
  }
  return acc;
}

/// n points evenly spaced over [lo, hi].
std::vector<float> linspace(double lo, double hi, int n) {
  std::vector<float> v;
  for (int i = 0; i < n; ++i)
    v.push_back(static_cast<float>(lo + (hi - lo) * i / (n - 1)));
  return v;
}
/// ±2^u for u evenly spaced over [lo, hi] (both signs when `both`).
std::vector<float> logspace(double lo, double hi, int n, bool both) {
  std::vector<float> v;
  for (int i = 0; i < n; ++i) {
    float x = static_cast<float>(std::exp2(lo + (hi - lo) * i / (n - 1)));
    v.push_back(x);
    if (both)
      v.push_back(-x);
  }
  return v;
}
std::vector<float> join(std::vector<float> a, const std::vector<float> &b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

const std::vector<float> kSpecials = {0.0f,      -0.0f,    INFINITY,  -INFINITY, NAN,      1e-45f,   -1e-45f,
                                      1e-40f,    -1e-40f,  FLT_MIN,   -FLT_MIN,  FLT_MAX,  -FLT_MAX, 1e30f,
                                      -1e30f,    1.0f,     -1.0f,     88.72f,    88.73f,   -87.0f,   -103.0f,
                                      -104.0f,   0.5f,     -0.5f,     4.0f,      -4.0f,    1e-20f,   -1e-20f};

double sigmoid_ref(double x) { return 1.0 / (1.0 + std::exp(-x)); }

void report(const char *name, const Accuracy &a) {
  if (std::getenv("MAXC_MATH_REPORT"))
    std::cout << name << ": max rel " << a.max_rel << " at x=" << a.rel_at << ", max " << a.max_ulp
              << " ulp at x=" << a.ulp_at << ", max abs " << a.max_abs << "\n";
  INFO(name << ": max rel " << a.max_rel << " at x=" << a.rel_at << ", max ulp " << a.max_ulp << " at x=" << a.ulp_at);
  for (const std::string &f : a.special_failures) {
    INFO(f);
    CHECK(false);
  }
}

double d_exp(double x) { return std::exp(x); }
double d_log(double x) { return std::log(x); }
double d_tanh(double x) { return std::tanh(x); }
double d_erf(double x) { return std::erf(x); }
double d_sin(double x) { return std::sin(x); }
double d_cos(double x) { return std::cos(x); }

} // namespace

TEST_CASE("f32 exp polynomial accuracy", "[codegen][math]") {
  // The whole range: overflow past 88.72, denormal results below -87.3, 0 below -103.9.
  auto xs = join(linspace(-110, 90, 100000), logspace(-40, 0, 2000, true));
  Accuracy a = measure([](const Tensor &x) { return ops::exp(x); }, d_exp, xs, kSpecials);
  report("exp", a);
  CHECK(a.max_rel < 1.25e-7);
  CHECK(a.max_ulp < 1.5);
}

TEST_CASE("f32 log polynomial accuracy", "[codegen][math]") {
  // Every binade from the smallest denormal to FLT_MAX, densely around 1.
  auto xs = join(logspace(-149, 128, 80000, false), linspace(0.5, 2, 20000));
  xs = join(xs, linspace(-1, 0, 11)); // negatives: NaN; 0: -inf
  Accuracy a = measure([](const Tensor &x) { return ops::log(x); }, d_log, xs, kSpecials);
  report("log", a);
  CHECK(a.max_rel < 2.2e-7);
  CHECK(a.max_ulp < 2.9);
}

TEST_CASE("f32 tanh polynomial accuracy", "[codegen][math]") {
  auto xs = join(linspace(-12, 12, 100000), logspace(-140, 0, 4000, true));
  Accuracy a = measure([](const Tensor &x) { return ops::tanh(x); }, d_tanh, xs, kSpecials);
  report("tanh", a);
  CHECK(a.max_rel < 1.8e-7);
  CHECK(a.max_ulp < 2.1);
}

TEST_CASE("f32 erf polynomial accuracy", "[codegen][math]") {
  auto xs = join(linspace(-6, 6, 100000), logspace(-140, 0, 4000, true));
  Accuracy a = measure([](const Tensor &x) { return ops::erf(x); }, d_erf, xs, kSpecials);
  report("erf", a);
  CHECK(a.max_rel < 2.1e-7);
  CHECK(a.max_ulp < 3.3);
  CHECK(a.max_abs < 2e-7);
}

TEST_CASE("f32 sigmoid polynomial accuracy", "[codegen][math]") {
  // Down to the denormal results (x < -87.3) and their flush to 0 (x < -103.3).
  auto xs = join(linspace(-110, 30, 100000), logspace(-40, 0, 2000, true));
  Accuracy a = measure([](const Tensor &x) { return ops::sigmoid(x); }, sigmoid_ref, xs, kSpecials);
  report("sigmoid", a);
  CHECK(a.max_rel < 1.9e-7);
  CHECK(a.max_ulp < 2.4);
}

TEST_CASE("f32 sin and cos accuracy (range reduction at every magnitude)", "[codegen][math]") {
  // Dense over a few periods, then every binade up to FLT_MAX (the exact
  // reduction past 2^20), both signs.
  auto xs = join(linspace(-10, 10, 100000), logspace(-140, 127.9, 8000, true));
  xs = join(xs, linspace(1048000, 1049000, 2001)); // across the 2^20 switch
  Accuracy s = measure([](const Tensor &x) { return ops::sin(x); }, d_sin, xs, kSpecials);
  report("sin", s);
  CHECK(s.max_ulp < 0.55);
  Accuracy c = measure([](const Tensor &x) { return ops::cos(x); }, d_cos, xs, kSpecials);
  report("cos", c);
  CHECK(c.max_ulp < 0.55);
}
