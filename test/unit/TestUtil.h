// Shared helpers for unit tests: random tensors, tolerant comparison, and a
// one-liner that traces an op into a graph and runs it on the interpreter.
#pragma once

#include "maxc/maxc.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace maxc::test {

/// A fresh directory under /tmp, removed with everything in it.
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/maxc-test-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
  std::string file(const std::string &name) const { return path + "/" + name; }
  /// Writes `bytes` to file(name) and returns its path.
  std::string write(const std::string &name, const std::string &bytes) const {
    std::ofstream out(file(name), std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    REQUIRE(out.good());
    return file(name);
  }
};

/// The whole file as bytes.
inline std::string read_bytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// Writes `bytes` to `path`.
inline void write_bytes(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

/// A fresh generator per call site, seeded from Catch's random seed so a
/// failure is reproducible with --rng-seed.
inline std::mt19937 &rng() {
  static std::mt19937 gen(Catch::rngSeed());
  return gen;
}

/// Random values uniform in [lo, hi) (integers: inclusive range, rounded).
inline HostTensor random_tensor(DType dtype, std::vector<int64_t> shape, double lo = -2.0, double hi = 2.0) {
  HostTensor t(dtype, std::move(shape));
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = dist(rng());
    if (is_bool(dtype))
      t.set_i64(i, v > (lo + hi) / 2);
    else if (is_integer(dtype))
      t.set_i64(i, static_cast<int64_t>(std::llround(v)));
    else
      t.set_f64(i, v);
  }
  return t;
}

/// Elementwise |a-b| <= atol + rtol*|b| (NaNs must match). Returns a
/// description of the first mismatch, or "" when all match.
inline std::string compare(const HostTensor &actual, const HostTensor &expected, double rtol = 1e-6,
                           double atol = 1e-6) {
  if (actual.dtype() != expected.dtype() || actual.shape() != expected.shape())
    return "type " + describe(actual) + " != " + describe(expected);
  for (int64_t i = 0; i < actual.numel(); ++i) {
    double a = actual.get_f64(i), e = expected.get_f64(i);
    if (std::isnan(a) && std::isnan(e))
      continue;
    if (std::isinf(e) && a == e)
      continue;
    if (!(std::fabs(a - e) <= atol + rtol * std::fabs(e))) {
      std::ostringstream os;
      os.precision(10);
      os << "element " << i << ": got " << a << ", expected " << e;
      return os.str();
    }
  }
  return "";
}

#define MAXC_REQUIRE_CLOSE(actual, expected, rtol, atol)                                                       \
  do {                                                                                                         \
    std::string maxc_mismatch = ::maxc::test::compare((actual), (expected), (rtol), (atol));                  \
    INFO(maxc_mismatch);                                                                                       \
    REQUIRE(maxc_mismatch.empty());                                                                            \
  } while (0)

using BuildFn = std::function<std::vector<Tensor>(const std::vector<Tensor> &inputs)>;

/// A graph named "g" with inputs of `types` and the outputs `build` returns,
/// traced in a GraphRealizationContext.
inline std::unique_ptr<Graph> trace_graph(const std::vector<TensorType> &types, const BuildFn &build) {
  auto graph = std::make_unique<Graph>("g", types);
  GraphRealizationContext ctx(*graph);
  std::vector<Tensor> args;
  for (const Value &v : graph->inputs())
    args.push_back(Tensor::from_graph_value(v));
  std::vector<Value> outs;
  for (const Tensor &t : build(args))
    outs.push_back(t.value());
  graph->output(outs);
  return graph;
}

/// The tensor types of host tensors.
inline std::vector<TensorType> types_of(const std::vector<HostTensor> &xs) {
  std::vector<TensorType> types;
  for (const HostTensor &x : xs)
    types.emplace_back(x.dtype(), make_shape(x.shape()));
  return types;
}

/// Traces `build` in a GraphRealizationContext over graph inputs typed like
/// `inputs`, verifies the graph, runs it on the interpreter and returns the
/// outputs. Also checks the eager context gives byte-identical results.
inline std::vector<HostTensor> run_traced(const std::vector<HostTensor> &inputs, const BuildFn &build) {
  std::unique_ptr<Graph> graph = trace_graph(types_of(inputs), build);
  graph->verify();
  std::vector<HostTensor> result = Interpreter::run(*graph, inputs);

  std::vector<Tensor> eager_outs;
  {
    EagerRealizationContext eager;
    std::vector<Tensor> args;
    for (const HostTensor &x : inputs)
      args.push_back(Tensor::from_host(x));
    eager_outs = build(args);
  }
  REQUIRE(eager_outs.size() == result.size());
  for (size_t i = 0; i < result.size(); ++i)
    REQUIRE(eager_outs[i].host().identical(result[i]));
  return result;
}

/// Single-output convenience form.
inline HostTensor run1(const std::vector<HostTensor> &inputs, const std::function<Tensor(const std::vector<Tensor> &)> &build) {
  return run_traced(inputs, [&](const std::vector<Tensor> &xs) { return std::vector<Tensor>{build(xs)}; }).at(0);
}

/// Infers result types without running anything: traces `build` over inputs
/// of the given types. Throws what the op's verifier throws.
inline std::vector<TensorType> infer(const std::vector<TensorType> &types,
                                     const std::function<std::vector<Tensor>(const std::vector<Tensor> &)> &build) {
  Graph graph("infer", types);
  GraphRealizationContext ctx(graph);
  std::vector<Tensor> args;
  for (const Value &v : graph.inputs())
    args.push_back(Tensor::from_graph_value(v));
  std::vector<TensorType> out;
  for (const Tensor &t : build(args))
    out.push_back(t.type());
  return out;
}

/// Requires that `expr` throws maxc::Error with `code` and a message
/// containing `fragment`.
#define MAXC_REQUIRE_ERROR(expr, expected_code, fragment)                                                               \
  do {                                                                                                         \
    bool maxc_threw = false;                                                                                   \
    try {                                                                                                      \
      (void)(expr);                                                                                            \
    } catch (const ::maxc::Error &maxc_e) {                                                                    \
      maxc_threw = true;                                                                                       \
      INFO(maxc_e.formatted());                                                                                \
      CHECK(maxc_e.code() == (expected_code));                                                                          \
      CHECK_THAT(maxc_e.formatted(), Catch::Matchers::Contains(fragment));                                     \
    }                                                                                                          \
    REQUIRE(maxc_threw);                                                                                       \
  } while (0)

/// How many times `what` occurs in `text` (overlapping): instruction counts in asm.
inline size_t count_occurrences(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1))
    ++n;
  return n;
}

} // namespace maxc::test
