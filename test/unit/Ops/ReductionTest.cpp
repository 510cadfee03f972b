// Reductions, argmax/argmin and softmax: inference, verifier errors, and
// reference results checked against naive loops written here.
#include "TestUtil.h"

#include <algorithm>
#include <limits>

using namespace maxc;
using namespace maxc::test;

namespace {

using Build1 = std::function<Tensor(const std::vector<Tensor> &)>;

std::vector<Tensor> one(const Tensor &t) { return {t}; }

// Traces over inputs of the given (possibly symbolic) types and runs the
// interpreter, which binds the symbols from the concrete inputs.
HostTensor run_symbolic(const std::vector<TensorType> &types, const std::vector<HostTensor> &inputs,
                        const Build1 &build) {
  Graph graph("sym", types);
  {
    GraphRealizationContext ctx(graph);
    std::vector<Tensor> args;
    for (const Value &v : graph.inputs())
      args.push_back(Tensor::from_graph_value(v));
    graph.output({build(args).value()});
  }
  graph.verify();
  return Interpreter::run(graph, inputs).at(0);
}

enum class Kind { sum, mean, max, min, prod };

// Naive reduction: for every output element, scan the whole input and
// combine the elements whose kept coordinates match.
HostTensor naive_reduce(const HostTensor &x, std::vector<int64_t> axes, bool keepdims, Kind kind) {
  int64_t rank = x.rank();
  if (axes.empty())
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  for (int64_t &a : axes)
    a = a < 0 ? a + rank : a;
  auto reduced = [&](int64_t d) { return std::find(axes.begin(), axes.end(), d) != axes.end(); };
  std::vector<int64_t> kshape, oshape; // keepdims shape, result shape
  for (int64_t d = 0; d < rank; ++d) {
    kshape.push_back(reduced(d) ? 1 : x.shape()[d]);
    if (!reduced(d) || keepdims)
      oshape.push_back(reduced(d) ? 1 : x.shape()[d]);
  }
  HostTensor out(x.dtype(), oshape);
  int64_t n_out = out.numel();
  for (int64_t o = 0; o < n_out; ++o) {
    // Multi-index of o in the keepdims shape.
    std::vector<int64_t> oi(rank);
    for (int64_t d = rank - 1, r = o; d >= 0; --d) {
      oi[d] = r % kshape[d];
      r /= kshape[d];
    }
    double facc = kind == Kind::prod ? 1 : kind == Kind::max ? -INFINITY : kind == Kind::min ? INFINITY : 0;
    int64_t iacc = kind == Kind::prod ? 1 : 0;
    bool first = true;
    int64_t count = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      std::vector<int64_t> xi(rank);
      for (int64_t d = rank - 1, r = i; d >= 0; --d) {
        xi[d] = r % x.shape()[d];
        r /= x.shape()[d];
      }
      bool match = true;
      for (int64_t d = 0; d < rank; ++d)
        if (!reduced(d) && xi[d] != oi[d])
          match = false;
      if (!match)
        continue;
      ++count;
      double v = x.get_f64(i);
      int64_t iv = x.get_i64(i);
      switch (kind) {
      case Kind::sum:
      case Kind::mean:
        facc += v;
        iacc += iv;
        break;
      case Kind::prod:
        facc *= v;
        iacc *= iv;
        break;
      case Kind::max:
        facc = first || v > facc ? v : facc;
        iacc = first || iv > iacc ? iv : iacc;
        break;
      case Kind::min:
        facc = first || v < facc ? v : facc;
        iacc = first || iv < iacc ? iv : iacc;
        break;
      }
      first = false;
    }
    if (kind == Kind::mean)
      facc /= count;
    if (is_float(x.dtype()))
      out.set_f64(o, facc);
    else
      out.set_i64(o, iacc);
  }
  return out;
}

Tensor apply(Kind kind, const Tensor &x, const std::vector<int64_t> &axes, bool keepdims) {
  switch (kind) {
  case Kind::sum:
    return ops::sum(x, axes, keepdims);
  case Kind::mean:
    return ops::mean(x, axes, keepdims);
  case Kind::max:
    return ops::max(x, axes, keepdims);
  case Kind::min:
    return ops::min(x, axes, keepdims);
  case Kind::prod:
    return ops::prod(x, axes, keepdims);
  }
  return x;
}

} // namespace

TEST_CASE("reduction inference: axes, keepdims, negative axes, symbolic dims", "[ops][reduction]") {
  TensorType x(DType::f32, {Dim("batch"), 3, Dim("seq")});
  auto type_of = [&](std::function<Tensor(const Tensor &)> f) {
    return infer({x}, [&](auto &in) { return one(f(in[0])); }).at(0).to_string();
  };
  CHECK(type_of([](const Tensor &t) { return ops::sum(t, {1}); }) == "f32[batch,seq]");
  CHECK(type_of([](const Tensor &t) { return ops::sum(t, {1}, true); }) == "f32[batch,1,seq]");
  CHECK(type_of([](const Tensor &t) { return ops::mean(t, {-1}); }) == "f32[batch,3]");
  CHECK(type_of([](const Tensor &t) { return ops::max(t, {0, -1}, true); }) == "f32[1,3,1]");
  CHECK(type_of([](const Tensor &t) { return ops::min(t, {2, 0}); }) == "f32[3]");
  CHECK(type_of([](const Tensor &t) { return ops::prod(t, {}); }) == "f32[]");
  CHECK(type_of([](const Tensor &t) { return ops::sum(t, {}, true); }) == "f32[1,1,1]");
  CHECK(type_of([](const Tensor &t) { return ops::argmax(t, -1); }) == "i64[batch,3]");
  CHECK(type_of([](const Tensor &t) { return ops::argmin(t, 0, true); }) == "i64[1,3,seq]");
  CHECK(type_of([](const Tensor &t) { return ops::softmax(t); }) == "f32[batch,3,seq]");
  CHECK(type_of([](const Tensor &t) { return ops::log_softmax(t, 0); }) == "f32[batch,3,seq]");

  // Integer reductions keep their dtype; a rank-0 tensor reduces to itself.
  auto ti = infer({TensorType(DType::i32, {4, 5})}, [](auto &in) { return one(ops::sum(in[0], {0})); });
  CHECK(ti[0].to_string() == "i32[5]");
  auto ts = infer({TensorType(DType::f64, {})}, [](auto &in) { return one(ops::sum(in[0], {}, true)); });
  CHECK(ts[0].to_string() == "f64[]");
  // Max over a symbolic dim is allowed (it is checked when the dim is bound).
  auto tm = infer({TensorType(DType::f32, {Dim("n")})}, [](auto &in) { return one(ops::max(in[0], {0})); });
  CHECK(tm[0].to_string() == "f32[]");
}

TEST_CASE("reduction verifier errors", "[ops][reduction]") {
  TensorType f(DType::f32, {2, 3, 4}), i(DType::i32, {2, 3}), b(DType::boolean, {3}), e(DType::f32, {2, 0});
  using F = std::function<Tensor(const Tensor &)>;
  auto on = [](TensorType t, F f) { return infer({t}, [f](auto &in) { return one(f(in[0])); }); };
  MAXC_REQUIRE_ERROR(on(f, [](auto &t) { return ops::sum(t, {3}); }), ErrorCode::InvalidAttribute,
                     "axis 3 is out of range for rank 3");
  MAXC_REQUIRE_ERROR(on(f, [](auto &t) { return ops::sum(t, {-4}); }), ErrorCode::InvalidAttribute, "axis -4");
  MAXC_REQUIRE_ERROR(on(f, [](auto &t) { return ops::mean(t, {1, -2}); }), ErrorCode::InvalidAttribute, "duplicate");
  MAXC_REQUIRE_ERROR(on(i, [](auto &t) { return ops::mean(t, {0}); }), ErrorCode::DTypeMismatch, "floating-point");
  MAXC_REQUIRE_ERROR(on(b, [](auto &t) { return ops::sum(t, {0}); }), ErrorCode::DTypeMismatch, "numeric");
  MAXC_REQUIRE_ERROR(on(b, [](auto &t) { return ops::argmax(t, 0); }), ErrorCode::DTypeMismatch, "numeric");
  MAXC_REQUIRE_ERROR(on(e, [](auto &t) { return ops::max(t, {1}); }), ErrorCode::ShapeMismatch, "size 0");
  MAXC_REQUIRE_ERROR(on(e, [](auto &t) { return ops::min(t, {}); }), ErrorCode::ShapeMismatch, "axis 1 of size 0");
  MAXC_REQUIRE_ERROR(on(e, [](auto &t) { return ops::argmin(t, -1); }), ErrorCode::ShapeMismatch, "size 0");
  MAXC_REQUIRE_ERROR(on(TensorType(DType::f32, {}), [](auto &t) { return ops::argmax(t, 0); }),
                     ErrorCode::ShapeMismatch, "rank >= 1");
  MAXC_REQUIRE_ERROR(on(TensorType(DType::f32, {}), [](auto &t) { return ops::sum(t, {0}); }),
                     ErrorCode::InvalidAttribute, "rank 0");
  MAXC_REQUIRE_ERROR(on(f, [](auto &t) { return ops::argmax(t, 3); }), ErrorCode::InvalidAttribute, "axis 3");
  MAXC_REQUIRE_ERROR(on(i, [](auto &t) { return ops::softmax(t); }), ErrorCode::DTypeMismatch, "floating-point");
  MAXC_REQUIRE_ERROR(on(f, [](auto &t) { return ops::log_softmax(t, -4); }), ErrorCode::InvalidAttribute, "axis -4");
  MAXC_REQUIRE_ERROR(on(TensorType(DType::f32, {}), [](auto &t) { return ops::softmax(t); }), ErrorCode::ShapeMismatch,
                     "rank >= 1");
  MAXC_REQUIRE_ERROR(on(f,
                        [](auto &t) {
                          return record_op("sum", {t}, {{"axis", int64_t{1}}});
                        }),
                     ErrorCode::UnknownAttribute, "expected one of: axes, keepdims");
}

TEST_CASE("reductions by hand on a 2x3 matrix", "[ops][reduction]") {
  HostTensor x = HostTensor::from_f64(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto outs = run_traced({x}, [](const std::vector<Tensor> &in) {
    const Tensor &t = in[0];
    return std::vector<Tensor>{ops::sum(t, {0}),  ops::sum(t, {-1}, true), ops::mean(t, {}),
                               ops::max(t, {1}),  ops::min(t, {0}),        ops::prod(t, {}),
                               ops::argmax(t, 1), ops::argmin(t, 0, true), ops::mean(t, {0})};
  });
  CHECK(outs[0].to_f64() == std::vector<double>{5, 7, 9});
  CHECK(outs[1].shape() == std::vector<int64_t>{2, 1});
  CHECK(outs[1].to_f64() == std::vector<double>{6, 15});
  CHECK(outs[2].shape().empty());
  CHECK(outs[2].get_f64(0) == 3.5);
  CHECK(outs[3].to_f64() == std::vector<double>{3, 6});
  CHECK(outs[4].to_f64() == std::vector<double>{1, 2, 3});
  CHECK(outs[5].get_f64(0) == 720);
  CHECK(outs[6].dtype() == DType::i64);
  CHECK(outs[6].to_i64() == std::vector<int64_t>{2, 2});
  CHECK(outs[7].shape() == std::vector<int64_t>{1, 3});
  CHECK(outs[7].to_i64() == std::vector<int64_t>{0, 0, 0});
  CHECK(outs[8].to_f64() == std::vector<double>{2.5, 3.5, 4.5});
}

TEST_CASE("reductions match a naive loop on random inputs", "[ops][reduction]") {
  const std::vector<std::vector<int64_t>> axis_sets = {{}, {0}, {1}, {-1}, {0, 2}, {-1, -3}, {1, 2}, {0, 1, 2}};
  for (Kind kind : {Kind::sum, Kind::mean, Kind::max, Kind::min, Kind::prod}) {
    for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::i32, DType::i64, DType::i8}) {
      if (kind == Kind::mean && !is_float(dtype))
        continue;
      // Products of many values overflow f16 and small ints; keep them near 1.
      double lo = kind == Kind::prod ? 0.5 : -4, hi = kind == Kind::prod ? 1.5 : 4;
      if (kind == Kind::prod && !is_float(dtype))
        lo = -2, hi = 2;
      HostTensor x = random_tensor(dtype, {2, 3, 4}, lo, hi);
      for (const auto &axes : axis_sets)
        for (bool keepdims : {false, true}) {
          INFO("kind " << int(kind) << " dtype " << dtype_name(dtype) << " axes " << axes.size() << " keepdims "
                       << keepdims);
          HostTensor y = run1({x}, [&](const std::vector<Tensor> &in) { return apply(kind, in[0], axes, keepdims); });
          HostTensor expected = naive_reduce(x, axes, keepdims, kind);
          double tol = dtype == DType::f16 ? 1e-3 : 1e-6;
          MAXC_REQUIRE_CLOSE(y, expected, tol, tol);
        }
    }
  }
}

TEST_CASE("integer sum and prod wrap; i64 accumulates exactly", "[ops][reduction]") {
  HostTensor a = HostTensor::from_i64(DType::i8, {3}, {100, 100, 1});
  auto s8 = run_traced({a}, [](auto &in) { return std::vector<Tensor>{ops::sum(in[0], {}), ops::prod(in[0], {})}; });
  CHECK(s8[0].get_i64(0) == static_cast<int8_t>(201 - 256));
  CHECK(s8[1].get_i64(0) == static_cast<int8_t>(10000 % 256)); // 10000 = 39*256 + 16
  HostTensor b = HostTensor::from_i64(DType::i32, {2}, {65536, 65536});
  CHECK(run1({b}, [](auto &in) { return ops::prod(in[0], {}); }).get_i64(0) == 0);
  const int64_t big = (int64_t{1} << 60) + 1; // not representable in double
  HostTensor c = HostTensor::from_i64(DType::i64, {3}, {big, 1, -3});
  auto s64 = run_traced({c}, [](auto &in) {
    return std::vector<Tensor>{ops::sum(in[0], {}), ops::max(in[0], {}), ops::argmin(in[0], 0)};
  });
  CHECK(s64[0].get_i64(0) == big - 2);
  CHECK(s64[1].get_i64(0) == big);
  CHECK(s64[2].get_i64(0) == 2);
  HostTensor d = HostTensor::from_i64(DType::i64, {2}, {INT64_MAX, 1});
  CHECK(run1({d}, [](auto &in) { return ops::sum(in[0], {}); }).get_i64(0) == INT64_MIN);
}

TEST_CASE("reducing an empty axis: sum 0, prod 1, mean NaN; max fails when bound to 0", "[ops][reduction]") {
  HostTensor x(DType::f32, {2, 0});
  auto outs = run_traced({x}, [](const std::vector<Tensor> &in) {
    return std::vector<Tensor>{ops::sum(in[0], {1}), ops::prod(in[0], {-1}), ops::mean(in[0], {1}),
                               ops::sum(in[0], {0}), ops::max(in[0], {0}),   ops::softmax(in[0])};
  });
  CHECK(outs[0].to_f64() == std::vector<double>{0, 0});
  CHECK(outs[1].to_f64() == std::vector<double>{1, 1});
  CHECK(std::isnan(outs[2].get_f64(0)));
  CHECK(std::isnan(outs[2].get_f64(1)));
  CHECK(outs[3].shape() == std::vector<int64_t>{0}); // reducing a non-empty axis of an empty tensor
  CHECK(outs[4].shape() == std::vector<int64_t>{0});
  CHECK(outs[5].shape() == std::vector<int64_t>{2, 0});
  HostTensor xi(DType::i32, {0});
  CHECK(run1({xi}, [](auto &in) { return ops::sum(in[0], {}); }).get_i64(0) == 0);
  CHECK(run1({xi}, [](auto &in) { return ops::prod(in[0], {}); }).get_i64(0) == 1);

  TensorType sym(DType::f32, {2, Dim("n")});
  auto max_n = [](const std::vector<Tensor> &in) { return ops::max(in[0], {1}); };
  MAXC_REQUIRE_ERROR(run_symbolic({sym}, {HostTensor(DType::f32, {2, 0})}, max_n), ErrorCode::ShapeMismatch, "size 0");
  auto argmax_n = [](const std::vector<Tensor> &in) { return ops::argmax(in[0], 1); };
  MAXC_REQUIRE_ERROR(run_symbolic({sym}, {HostTensor(DType::f32, {2, 0})}, argmax_n), ErrorCode::ShapeMismatch,
                     "size 0");
  HostTensor r = random_tensor(DType::f32, {2, 5});
  CHECK(run_symbolic({sym}, {r}, max_n).identical(naive_reduce(r, {1}, false, Kind::max)));
}

TEST_CASE("max/min/argmax/argmin: NaN propagates, ties pick the first", "[ops][reduction]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  HostTensor x = HostTensor::from_f64(DType::f32, {2, 4}, {1, nan, 5, nan, 3, 7, 7, -1});
  auto outs = run_traced({x}, [](const std::vector<Tensor> &in) {
    return std::vector<Tensor>{ops::max(in[0], {1}), ops::min(in[0], {1}), ops::argmax(in[0], 1),
                               ops::argmin(in[0], 1)};
  });
  CHECK(std::isnan(outs[0].get_f64(0)));
  CHECK(outs[0].get_f64(1) == 7);
  CHECK(std::isnan(outs[1].get_f64(0)));
  CHECK(outs[1].get_f64(1) == -1);
  CHECK(outs[2].to_i64() == std::vector<int64_t>{1, 1}); // first NaN; first of the tied 7s
  CHECK(outs[3].to_i64() == std::vector<int64_t>{1, 3});
  HostTensor t = HostTensor::from_f64(DType::f64, {5}, {2, 1, 1, 3, 3});
  auto ties = run_traced({t}, [](auto &in) {
    return std::vector<Tensor>{ops::argmax(in[0], 0), ops::argmin(in[0], -1)};
  });
  CHECK(ties[0].get_i64(0) == 3);
  CHECK(ties[1].get_i64(0) == 1);
  HostTensor inf = HostTensor::from_f64(DType::f32, {3}, {-INFINITY, -INFINITY, -INFINITY});
  CHECK(run1({inf}, [](auto &in) { return ops::max(in[0], {}); }).get_f64(0) == -INFINITY);
  CHECK(run1({inf}, [](auto &in) { return ops::argmax(in[0], 0); }).get_i64(0) == 0);
}

TEST_CASE("argmax/argmin match a naive search on random inputs", "[ops][reduction]") {
  for (DType dtype : {DType::f32, DType::i32}) {
    // Integers in a small range make ties common.
    HostTensor x = random_tensor(dtype, {3, 4, 5}, -3, 3);
    for (int64_t axis : {0, 1, 2, -1, -3})
      for (bool keepdims : {false, true}) {
        INFO(dtype_name(dtype) << " axis " << axis << " keepdims " << keepdims);
        auto outs = run_traced({x}, [&](const std::vector<Tensor> &in) {
          return std::vector<Tensor>{ops::argmax(in[0], axis, keepdims), ops::argmin(in[0], axis, keepdims)};
        });
        int64_t ax = axis < 0 ? axis + 3 : axis;
        std::vector<int64_t> shape = {3, 4, 5};
        std::vector<int64_t> oshape = shape;
        oshape[ax] = 1;
        if (!keepdims)
          oshape.erase(oshape.begin() + ax);
        REQUIRE(outs[0].shape() == oshape);
        // Walk all output positions in keepdims coordinates.
        int64_t o = 0;
        for (int64_t i = 0; i < (ax == 0 ? 1 : 3); ++i)
          for (int64_t j = 0; j < (ax == 1 ? 1 : 4); ++j)
            for (int64_t k = 0; k < (ax == 2 ? 1 : 5); ++k, ++o) {
              int64_t best_max = 0, best_min = 0;
              double vmax = 0, vmin = 0;
              for (int64_t r = 0; r < shape[ax]; ++r) {
                int64_t idx[3] = {i, j, k};
                idx[ax] = r;
                double v = x.get_f64((idx[0] * 4 + idx[1]) * 5 + idx[2]);
                if (r == 0 || v > vmax)
                  vmax = v, best_max = r;
                if (r == 0 || v < vmin)
                  vmin = v, best_min = r;
              }
              CHECK(outs[0].get_i64(o) == best_max);
              CHECK(outs[1].get_i64(o) == best_min);
            }
      }
  }
}

TEST_CASE("softmax and log_softmax match std::exp on random inputs", "[ops][reduction]") {
  for (DType dtype : {DType::f32, DType::f64}) {
    HostTensor x = random_tensor(dtype, {3, 5, 4}, -6, 6);
    for (int64_t axis : {0, 1, -1}) {
      INFO(dtype_name(dtype) << " axis " << axis);
      auto outs = run_traced({x}, [&](const std::vector<Tensor> &in) {
        return std::vector<Tensor>{ops::softmax(in[0], axis), ops::log_softmax(in[0], axis)};
      });
      int64_t ax = axis < 0 ? axis + 3 : axis;
      const int64_t shape[3] = {3, 5, 4};
      HostTensor sm(dtype, {3, 5, 4}), lsm(dtype, {3, 5, 4});
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < 5; ++j)
          for (int64_t k = 0; k < 4; ++k) {
            // Plain (unshifted) formula: fine for these magnitudes.
            double denom = 0;
            for (int64_t r = 0; r < shape[ax]; ++r) {
              int64_t idx[3] = {i, j, k};
              idx[ax] = r;
              denom += std::exp(x.get_f64((idx[0] * 5 + idx[1]) * 4 + idx[2]));
            }
            int64_t lin = (i * 5 + j) * 4 + k;
            sm.set_f64(lin, std::exp(x.get_f64(lin)) / denom);
            lsm.set_f64(lin, x.get_f64(lin) - std::log(denom));
          }
      MAXC_REQUIRE_CLOSE(outs[0], sm, 1e-6, 1e-7);
      MAXC_REQUIRE_CLOSE(outs[1], lsm, 1e-6, 1e-6);
    }
  }
}

TEST_CASE("softmax is stable for large inputs and handles size-1 axes", "[ops][reduction]") {
  HostTensor x = HostTensor::from_f64(DType::f32, {2, 3}, {1000, 1001, 1002, -1000, -1000, -1000});
  auto outs = run_traced({x}, [](auto &in) {
    return std::vector<Tensor>{ops::softmax(in[0]), ops::log_softmax(in[0]), ops::softmax(in[0], 0)};
  });
  double e1 = std::exp(-1.0), e2 = std::exp(-2.0), s = 1 + e1 + e2;
  HostTensor expected = HostTensor::from_f64(DType::f32, {2, 3}, {e2 / s, e1 / s, 1 / s, 1. / 3, 1. / 3, 1. / 3});
  MAXC_REQUIRE_CLOSE(outs[0], expected, 1e-6, 0);
  HostTensor expected_log = HostTensor::from_f64(
      DType::f32, {2, 3},
      {-2 - std::log(s), -1 - std::log(s), -std::log(s), -std::log(3.0), -std::log(3.0), -std::log(3.0)});
  MAXC_REQUIRE_CLOSE(outs[1], expected_log, 1e-6, 0);
  // Along axis 0 the rows differ by 2000+: one-hot.
  CHECK(outs[2].to_f64() == std::vector<double>{1, 1, 1, 0, 0, 0});

  HostTensor y = random_tensor(DType::f32, {4, 1});
  auto ones = run_traced({y}, [](auto &in) {
    return std::vector<Tensor>{ops::softmax(in[0]), ops::log_softmax(in[0])};
  });
  CHECK(ones[0].to_f64() == std::vector<double>{1, 1, 1, 1});
  CHECK(ones[1].to_f64() == std::vector<double>{0, 0, 0, 0});
}

TEST_CASE("reductions run with symbolic dims bound at run time", "[ops][reduction]") {
  TensorType t(DType::f32, {Dim("batch"), 4});
  HostTensor x = random_tensor(DType::f32, {3, 4});
  HostTensor s = run_symbolic({t}, {x}, [](auto &in) { return ops::sum(in[0], {-1}, true); });
  CHECK(s.identical(naive_reduce(x, {-1}, true, Kind::sum)));
  HostTensor sm = run_symbolic({t}, {x}, [](auto &in) { return ops::softmax(in[0], 0); });
  CHECK(sm.shape() == std::vector<int64_t>{3, 4});
  for (int64_t j = 0; j < 4; ++j)
    CHECK(sm.get_f64(j) + sm.get_f64(4 + j) + sm.get_f64(8 + j) == Approx(1.0).epsilon(1e-6));
}
