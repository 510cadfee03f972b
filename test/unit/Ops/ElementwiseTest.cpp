// Elementwise ops: inference, verifier errors, and reference results checked
// against independently computed values (std:: math on each element).
#include "TestUtil.h"

using namespace maxc;
using namespace maxc::test;

namespace {

struct UnaryCase {
  const char *name;
  std::function<Tensor(const Tensor &)> op;
  std::function<double(double)> expected;
  double lo, hi;
};

} // namespace

TEST_CASE("unary float ops match std:: math on random inputs", "[ops][elementwise]") {
  const double pi = 3.14159265358979323846;
  std::vector<UnaryCase> cases = {
      {"neg", ops::neg, [](double v) { return -v; }, -3, 3},
      {"abs", ops::abs, [](double v) { return std::fabs(v); }, -3, 3},
      {"exp", ops::exp, [](double v) { return std::exp(v); }, -5, 5},
      {"log", ops::log, [](double v) { return std::log(v); }, 0.01, 10},
      {"sqrt", ops::sqrt, [](double v) { return std::sqrt(v); }, 0, 10},
      {"rsqrt", ops::rsqrt, [](double v) { return 1 / std::sqrt(v); }, 0.01, 10},
      {"tanh", ops::tanh, [](double v) { return std::tanh(v); }, -4, 4},
      {"sigmoid", ops::sigmoid, [](double v) { return 1 / (1 + std::exp(-v)); }, -8, 8},
      {"relu", ops::relu, [](double v) { return v > 0 ? v : 0; }, -3, 3},
      {"gelu", [](const Tensor &x) { return ops::gelu(x); },
       [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }, -4, 4},
      {"gelu_tanh", [](const Tensor &x) { return ops::gelu(x, "tanh"); },
       [pi](double v) { return 0.5 * v * (1 + std::tanh(std::sqrt(2 / pi) * (v + 0.044715 * v * v * v))); }, -4, 4},
      {"silu", ops::silu, [](double v) { return v / (1 + std::exp(-v)); }, -6, 6},
      {"erf", ops::erf, [](double v) { return std::erf(v); }, -3, 3},
      {"sin", ops::sin, [](double v) { return std::sin(v); }, -6, 6},
      {"cos", ops::cos, [](double v) { return std::cos(v); }, -6, 6},
      {"floor", ops::floor, [](double v) { return std::floor(v); }, -5, 5},
      {"ceil", ops::ceil, [](double v) { return std::ceil(v); }, -5, 5},
      {"round", ops::round, [](double v) { return std::nearbyint(v); }, -5, 5},
      {"sign", ops::sign, [](double v) { return double((v > 0) - (v < 0)); }, -3, 3},
  };
  for (const auto &c : cases) {
    SECTION(c.name) {
      for (DType dtype : {DType::f32, DType::f64}) {
        HostTensor x = random_tensor(dtype, {3, 17}, c.lo, c.hi);
        HostTensor y = run1({x}, [&](const std::vector<Tensor> &in) { return c.op(in[0]); });
        HostTensor expected(dtype, {3, 17});
        for (int64_t i = 0; i < x.numel(); ++i)
          expected.set_f64(i, c.expected(x.get_f64(i)));
        // Rounded once from double: exact to the last bit of the dtype.
        MAXC_REQUIRE_CLOSE(y, expected, 0, 0);
      }
    }
  }
}

TEST_CASE("round is half-to-even and f16/bf16 results round once", "[ops][elementwise]") {
  HostTensor x = HostTensor::from_f64(DType::f32, {6}, {0.5, 1.5, 2.5, -0.5, -1.5, 2.6});
  HostTensor y = run1({x}, [](const std::vector<Tensor> &in) { return ops::round(in[0]); });
  CHECK(y.to_f64() == std::vector<double>{0, 2, 2, -0, -2, 3});

  HostTensor h = HostTensor::from_f64(DType::f16, {3}, {1.0, 2.0, 0.5});
  HostTensor e = run1({h}, [](const std::vector<Tensor> &in) { return ops::exp(in[0]); });
  CHECK(e.dtype() == DType::f16);
  CHECK(e.get_f64(0) == HostTensor::scalar(DType::f16, std::exp(1.0)).get_f64(0));
  HostTensor b = HostTensor::from_f64(DType::bf16, {2}, {1.0, -2.0});
  HostTensor bn = run1({b}, [](const std::vector<Tensor> &in) { return ops::neg(in[0]); });
  CHECK(bn.to_f64() == std::vector<double>{-1.0, 2.0});
}

TEST_CASE("binary ops broadcast like NumPy", "[ops][elementwise]") {
  HostTensor a = random_tensor(DType::f32, {2, 1, 4});
  HostTensor b = random_tensor(DType::f32, {3, 1});
  HostTensor y = run1({a, b}, [](const std::vector<Tensor> &in) { return in[0] * in[1] + in[0]; });
  REQUIRE(y.shape() == std::vector<int64_t>{2, 3, 4});
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 4; ++k) {
        float av = a.data_as<float>()[i * 4 + k], bv = b.data_as<float>()[j];
        float expected = static_cast<float>(static_cast<double>(static_cast<float>(double(av) * bv)) + av);
        CHECK(y.data_as<float>()[(i * 3 + j) * 4 + k] == expected);
      }
}

TEST_CASE("binary arithmetic, comparisons and logic on every dtype", "[ops][elementwise]") {
  for (DType dtype : kAllDTypes) {
    if (is_bool(dtype))
      continue;
    INFO(dtype_name(dtype));
    HostTensor a = random_tensor(dtype, {5, 3}, is_signed(dtype) ? -20 : 0, 20);
    HostTensor b = random_tensor(dtype, {3}, 1, 9);
    auto outs = run_traced({a, b}, [](const std::vector<Tensor> &in) {
      return std::vector<Tensor>{ops::add(in[0], in[1]),     ops::sub(in[0], in[1]),  ops::mul(in[0], in[1]),
                                 ops::maximum(in[0], in[1]), ops::minimum(in[0], in[1]), ops::mod(in[0], in[1]),
                                 ops::less(in[0], in[1]),    ops::equal(in[0], in[0])};
    });
    for (int64_t i = 0; i < a.numel(); ++i) {
      double x = a.get_f64(i), y = b.get_f64(i % 3);
      HostTensor expect_add = HostTensor::scalar(dtype, x + y);
      if (!is_integer(dtype) || (x + y >= -128 && x + y <= 127)) // i8 wraps; checked separately
        CHECK(outs[0].get_f64(i) == expect_add.get_f64(0));
      CHECK(outs[3].get_f64(i) == std::max(x, y));
      CHECK(outs[4].get_f64(i) == std::min(x, y));
      double m = std::fmod(x, y);
      if (m != 0 && (m < 0) != (y < 0))
        m += y;
      CHECK(outs[5].get_f64(i) == Approx(HostTensor::scalar(dtype, m).get_f64(0)).margin(0.07));
      CHECK(outs[6].get_i64(i) == (x < y));
      CHECK(outs[7].get_i64(i) == 1);
    }
  }
}

TEST_CASE("integer division truncates, wraps, and never divides by zero", "[ops][elementwise]") {
  HostTensor a = HostTensor::from_i64(DType::i32, {5}, {7, -7, 7, 5, -2147483648LL});
  HostTensor b = HostTensor::from_i64(DType::i32, {5}, {2, 2, 0, -1, -1});
  auto outs = run_traced({a, b}, [](const std::vector<Tensor> &in) {
    return std::vector<Tensor>{ops::div(in[0], in[1]), ops::mod(in[0], in[1])};
  });
  CHECK(outs[0].to_i64() == std::vector<int64_t>{3, -3, 0, -5, -2147483648LL});
  CHECK(outs[1].to_i64() == std::vector<int64_t>{1, 1, 0, 0, 0});
  HostTensor c = HostTensor::from_i64(DType::i8, {1}, {100});
  HostTensor s = run1({c, c}, [](const std::vector<Tensor> &in) { return in[0] + in[1]; });
  CHECK(s.get_i64(0) == -56); // 200 wraps in i8
}

TEST_CASE("u8 is unsigned: it wraps modulo 256 and compares and divides as 0..255", "[ops][elementwise]") {
  HostTensor a = HostTensor::from_i64(DType::u8, {4}, {200, 250, 1, 0});
  HostTensor b = HostTensor::from_i64(DType::u8, {4}, {100, 7, 2, 0});
  auto outs = run_traced({a, b}, [](const std::vector<Tensor> &in) {
    return std::vector<Tensor>{ops::add(in[0], in[1]),     ops::div(in[0], in[1]),  ops::mod(in[0], in[1]),
                               ops::greater(in[0], in[1]), ops::maximum(in[0], in[1]), ops::neg(in[0]),
                               ops::cast(in[0], DType::f32), ops::cast(ops::cast(in[0], DType::i8), DType::u8)};
  });
  CHECK(outs[0].to_i64() == std::vector<int64_t>{44, 1, 3, 0});
  CHECK(outs[1].to_i64() == std::vector<int64_t>{2, 35, 0, 0});
  CHECK(outs[2].to_i64() == std::vector<int64_t>{0, 5, 1, 0});
  CHECK(outs[3].to_i64() == std::vector<int64_t>{1, 1, 0, 0});
  CHECK(outs[4].to_i64() == std::vector<int64_t>{200, 250, 2, 0});
  CHECK(outs[5].to_i64() == std::vector<int64_t>{56, 6, 255, 0});
  CHECK(outs[6].to_f64() == std::vector<double>{200, 250, 1, 0});
  CHECK(outs[7].to_i64() == std::vector<int64_t>{200, 250, 1, 0});
}

TEST_CASE("u64 past 2^63 compares, divides and converts as unsigned", "[ops][elementwise]") {
  const uint64_t big = 0xF000000000000000ull, top = ~uint64_t{0};
  auto bits = [](uint64_t v) { return static_cast<int64_t>(v); };
  HostTensor a = HostTensor::from_i64(DType::u64, {4}, {bits(big), bits(top), 5, 0});
  HostTensor b = HostTensor::from_i64(DType::u64, {4}, {3, bits(big), bits(top), 0});
  auto outs = run_traced({a, b}, [](const std::vector<Tensor> &in) {
    return std::vector<Tensor>{ops::div(in[0], in[1]),     ops::mod(in[0], in[1]),  ops::greater(in[0], in[1]),
                               ops::maximum(in[0], in[1]), ops::minimum(in[0], in[1]), ops::abs(in[0]),
                               ops::sign(in[0]),           ops::cast(in[0], DType::f64), ops::max(in[0], {0}),
                               ops::argmax(in[0], 0),      ops::cast(ops::cast(in[0], DType::f64), DType::u64)};
  });
  CHECK(outs[0].to_i64() == std::vector<int64_t>{bits(big / 3), 1, 0, 0});
  CHECK(outs[1].to_i64() == std::vector<int64_t>{bits(big % 3), bits(top - big), 5, 0});
  CHECK(outs[2].to_i64() == std::vector<int64_t>{1, 1, 0, 0});
  CHECK(outs[3].to_i64() == std::vector<int64_t>{bits(big), bits(top), bits(top), 0});
  CHECK(outs[4].to_i64() == std::vector<int64_t>{3, bits(big), 5, 0});
  CHECK(outs[5].to_i64() == a.to_i64());
  CHECK(outs[6].to_i64() == std::vector<int64_t>{1, 1, 1, 0});
  CHECK(outs[7].to_f64() == std::vector<double>{17293822569102704640.0, 18446744073709551616.0, 5, 0});
  CHECK(outs[8].get_i64(0) == bits(top));
  CHECK(outs[9].get_i64(0) == 1);
  // 2^64 (top rounded to double) saturates; big is exact.
  CHECK(outs[10].to_i64() == std::vector<int64_t>{bits(big), bits(top), 5, 0});
}

TEST_CASE("logical ops and where", "[ops][elementwise]") {
  HostTensor p = HostTensor::from_i64(DType::boolean, {4}, {0, 0, 1, 1});
  HostTensor q = HostTensor::from_i64(DType::boolean, {4}, {0, 1, 0, 1});
  auto outs = run_traced({p, q}, [](const std::vector<Tensor> &in) {
    return std::vector<Tensor>{ops::logical_and(in[0], in[1]), ops::logical_or(in[0], in[1]),
                               ops::logical_not(in[0])};
  });
  CHECK(outs[0].to_i64() == std::vector<int64_t>{0, 0, 0, 1});
  CHECK(outs[1].to_i64() == std::vector<int64_t>{0, 1, 1, 1});
  CHECK(outs[2].to_i64() == std::vector<int64_t>{1, 1, 0, 0});

  HostTensor cond = random_tensor(DType::boolean, {2, 3});
  HostTensor a = random_tensor(DType::f32, {2, 3});
  HostTensor b = random_tensor(DType::f32, {3});
  HostTensor w = run1({cond, a, b}, [](const std::vector<Tensor> &in) { return ops::where(in[0], in[1], in[2]); });
  for (int64_t i = 0; i < 6; ++i)
    CHECK(w.get_f64(i) == (cond.get_i64(i) ? a.get_f64(i) : b.get_f64(i % 3)));
}

TEST_CASE("cast converts between every pair of dtypes", "[ops][elementwise]") {
  HostTensor x = HostTensor::from_f64(DType::f64, {6}, {-2.75, -1.0, 0.0, 0.5, 3.99, 100.25});
  for (DType to : kAllDTypes) {
    INFO(dtype_name(to));
    HostTensor y = run1({x}, [to](const std::vector<Tensor> &in) { return ops::cast(in[0], to); });
    REQUIRE(y.dtype() == to);
    for (int64_t i = 0; i < 6; ++i) {
      double v = x.get_f64(i);
      double t = std::trunc(v), wrapped = is_signed(to) || t >= 0 ? t : t + std::ldexp(1.0, dtype_info(to).bits); // u8: -2 is 254
      double expected = is_bool(to) ? (v != 0) : is_integer(to) ? wrapped : HostTensor::scalar(to, v).get_f64(0);
      CHECK(y.get_f64(i) == expected);
    }
  }
  HostTensor big = HostTensor::from_f64(DType::f32, {3}, {1e10, -1e10, std::nan("")});
  HostTensor sat = run1({big}, [](const std::vector<Tensor> &in) { return ops::cast(in[0], DType::i32); });
  CHECK(sat.to_i64() == std::vector<int64_t>{static_cast<int32_t>(static_cast<uint64_t>(10000000000LL)),
                                             static_cast<int32_t>(static_cast<uint64_t>(-10000000000LL)), 0});
}

TEST_CASE("elementwise verifier errors", "[ops][elementwise]") {
  TensorType f32x3(DType::f32, {3}), f32x4(DType::f32, {4}), i32x3(DType::i32, {3}), b3(DType::boolean, {3});
  auto binary = [](std::function<Tensor(const Tensor &, const Tensor &)> f) {
    return [f](const std::vector<Tensor> &in) { return std::vector<Tensor>{f(in[0], in[1])}; };
  };
  MAXC_REQUIRE_ERROR(infer({f32x3, f32x4}, binary(ops::add)), ErrorCode::ShapeMismatch, "cannot broadcast");
  // A symbolic dim against a static one: the value to pin (Whisper's
  // encoder: floordiv(len+1, 2) against its 1500 positions), the range of
  // values that give it, or the symbols when no single one decides.
  MAXC_REQUIRE_ERROR(infer({TensorType(DType::f32, {1, 1, 1, Dim("len")}), TensorType(DType::f32, {1, 1, 1, 3}),
                            TensorType(DType::f32, {1500})},
                           [](auto &in) {
                             ops::Conv2dOptions o;
                             o.stride = {1, 2};
                             o.padding = {0, 1, 0, 1}; // width floordiv(len+1, 2)
                             return std::vector<Tensor>{ops::add(ops::conv2d(in[0], in[1], std::nullopt, o), in[2])};
                           }),
                     ErrorCode::ShapeMismatch, "the model fixes it at 1500: pin it with --dim len=2999 (any value up to 3000");
  MAXC_REQUIRE_ERROR(infer({TensorType(DType::f32, {Dim("n") * Dim(2)}), f32x3}, binary(ops::add)),
                     ErrorCode::ShapeMismatch, "fixes it at 3: pin n with --dim NAME=N"); // 2n is never 3
  MAXC_REQUIRE_ERROR(infer({TensorType(DType::f32, {Dim("a") + Dim("b")}), f32x4}, binary(ops::add)),
                     ErrorCode::ShapeMismatch, "fixes it at 4: pin a, b with --dim NAME=N");
  MAXC_REQUIRE_ERROR(infer({f32x3, i32x3}, binary(ops::add)), ErrorCode::DTypeMismatch, "insert a cast");
  MAXC_REQUIRE_ERROR(infer({i32x3}, [](auto &in) { return std::vector<Tensor>{ops::exp(in[0])}; }),
                     ErrorCode::DTypeMismatch, "floating-point");
  MAXC_REQUIRE_ERROR(infer({f32x3, f32x3}, binary(ops::logical_and)), ErrorCode::DTypeMismatch, "bool");
  MAXC_REQUIRE_ERROR(infer({b3, b3}, binary(ops::add)), ErrorCode::DTypeMismatch, "numeric");
  MAXC_REQUIRE_ERROR(infer({f32x3, f32x3, f32x3}, [](auto &in) { return std::vector<Tensor>{ops::where(in[0], in[1], in[2])}; }),
                     ErrorCode::DTypeMismatch, "condition");
  MAXC_REQUIRE_ERROR(infer({f32x3}, [](auto &in) { return std::vector<Tensor>{ops::gelu(in[0], "fast")}; }),
                     ErrorCode::InvalidAttribute, "approximate");
}

TEST_CASE("symbolic dims broadcast and propagate", "[ops][elementwise]") {
  TensorType x(DType::f32, {Dim("batch"), 1, 8}), y(DType::f32, {Dim("seq"), 1});
  auto t = infer({x, y}, [](auto &in) { return std::vector<Tensor>{in[0] + in[1]}; });
  CHECK(t[0].to_string() == "f32[batch,seq,8]");
  TensorType z(DType::f32, {Dim("seq"), 8});
  MAXC_REQUIRE_ERROR(infer({TensorType(DType::f32, {Dim("batch")}), TensorType(DType::f32, {Dim("seq")})},
                           [](auto &in) { return std::vector<Tensor>{in[0] + in[1]}; }),
                     ErrorCode::ShapeMismatch, "batch vs seq");
}

TEST_CASE("empty tensors are legal in elementwise ops", "[ops][elementwise]") {
  HostTensor x(DType::f32, {0, 3});
  HostTensor y = run1({x}, [](const std::vector<Tensor> &in) { return ops::exp(in[0]) + 1.0; });
  CHECK(y.shape() == std::vector<int64_t>{0, 3});
}

TEST_CASE("creation ops: full, iota, range", "[ops][creation]") {
  HostTensor dummy(DType::f32, {1});
  auto outs = run_traced({dummy}, [](const std::vector<Tensor> &) {
    return std::vector<Tensor>{ops::full(2.5, DType::f32, {2, 2}), ops::iota({2, 3}, 1, DType::i32),
                               ops::range(1, 2, 0.25, DType::f32), ops::range(5, 0, -2)};
  });
  CHECK(outs[0].to_f64() == std::vector<double>{2.5, 2.5, 2.5, 2.5});
  CHECK(outs[1].to_i64() == std::vector<int64_t>{0, 1, 2, 0, 1, 2});
  CHECK(outs[2].to_f64() == std::vector<double>{1, 1.25, 1.5, 1.75});
  CHECK(outs[3].to_i64() == std::vector<int64_t>{5, 3, 1});
  MAXC_REQUIRE_ERROR(infer({}, [](auto &) { return std::vector<Tensor>{ops::range(0, 1, 0)}; }),
                     ErrorCode::InvalidAttribute, "step");
  MAXC_REQUIRE_ERROR(infer({}, [](auto &) { return std::vector<Tensor>{ops::iota({2}, 3)}; }),
                     ErrorCode::InvalidAttribute, "axis 3");
}
