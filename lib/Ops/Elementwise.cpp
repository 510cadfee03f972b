// Elementwise ops: unary math, binary arithmetic with broadcasting,
// comparisons, logical ops, where, cast.
//
// Reference semantics: float math is done in double and rounded once to the
// result dtype; integer math wraps on overflow (two's complement, like the
// compiled code) and never divides by zero (the result is 0). Unsigned
// integers compare, divide and take remainders as uint64_t (the same as
// int64_t for u8..u32, which get_i64 zero-extends; what u64 needs).
#include "Families.h"
#include "OpHelpers.h"
#include "maxc/Ops/Ops.h"
#include "maxc/Realization/RealizationContext.h"

#include <cmath>

namespace maxc {
using namespace ophelpers;

namespace {

enum class Domain { floats, numbers, booleans, any };

void check_domain(const std::string &op, const TensorType &t, Domain domain) {
  switch (domain) {
  case Domain::floats: require_float(op, t); break;
  case Domain::numbers:
    if (is_bool(t.dtype))
      fail_dtype(op, "operand must be numeric, got " + t.to_string());
    break;
  case Domain::booleans: require_dtype(op, t, DType::boolean); break;
  case Domain::any: break;
  }
}

using F64Fn = double (*)(double);
using I64Fn = int64_t (*)(int64_t);
using U64Fn = uint64_t (*)(uint64_t);

// Whether integer elements of `d` go through the unsigned form of an op.
bool unsigned_int(DType d) { return is_integer(d) && !is_signed(d); }

OpDef unary(const std::string &name, const std::string &summary, Domain domain, F64Fn f, I64Fn fi = nullptr,
            std::vector<AttrSpec> attrs = {}, U64Fn fu = nullptr) {
  OpDef def;
  def.name = name;
  def.summary = summary;
  def.attrs = std::move(attrs);
  def.traits = OpTrait::elementwise | OpTrait::unary | OpTrait::epilogue_safe;
  def.infer = [name, domain](const InferContext &c) {
    check_domain(name, c.operands[0], domain);
    return std::vector<TensorType>{c.operands[0]};
  };
  def.reference = [f, fi, fu](const ReferenceContext &c) {
    const HostTensor &x = c.operands[0];
    HostTensor out = c.make_result();
    bool integral = !is_float(x.dtype()), as_unsigned = fu && unsigned_int(x.dtype());
    for (int64_t i = 0; i < x.numel(); ++i) {
      if (as_unsigned)
        out.set_i64(i, static_cast<int64_t>(fu(static_cast<uint64_t>(x.get_i64(i)))));
      else if (integral && fi)
        out.set_i64(i, fi(x.get_i64(i)));
      else
        out.set_f64(i, f(x.get_f64(i)));
    }
    return std::vector<HostTensor>{out};
  };
  return def;
}

// Integer helpers that never hit UB: wrap through uint64.
int64_t wrap_add(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); }
int64_t wrap_sub(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b)); }
int64_t wrap_mul(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); }
int64_t int_div(int64_t a, int64_t b) {
  if (b == 0)
    return 0;
  if (b == -1)
    return wrap_sub(0, a);
  return a / b;
}
int64_t int_mod(int64_t a, int64_t b) {
  if (b == 0 || b == -1)
    return 0;
  int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
uint64_t uint_div(uint64_t a, uint64_t b) { return b == 0 ? 0 : a / b; }
uint64_t uint_mod(uint64_t a, uint64_t b) { return b == 0 ? 0 : a % b; }
double float_mod(double a, double b) {
  double r = std::fmod(a, b);
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
double round_half_even(double v) { return std::nearbyint(v); } // default FE_TONEAREST
double sign_of(double v) { return std::isnan(v) ? v : (v > 0) - (v < 0); }
double gelu_erf(double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); }
double gelu_tanh(double v) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * v * (1.0 + std::tanh(k * (v + 0.044715 * v * v * v)));
}

// Transcendental math: polynomials in f32 on every device, libm for f64.
OpDef needs_libm(OpDef def, OpTraits traits = OpTrait::device_libm_f64) {
  def.traits |= traits;
  return def;
}

// Result dtype rule of a binary op.
enum class BinaryResult { same, boolean };

using BinF64 = double (*)(double, double);
using BinI64 = int64_t (*)(int64_t, int64_t);
using BinU64 = uint64_t (*)(uint64_t, uint64_t);

// `fu`, where given, is the op on unsigned integers (compares, min/max,
// division); the others compute on the bits as int64_t.
OpDef binary(const std::string &name, const std::string &summary, Domain domain, BinaryResult result, BinF64 f,
             BinI64 fi, BinU64 fu = nullptr) {
  OpDef def;
  def.name = name;
  def.summary = summary;
  def.min_operands = def.max_operands = 2;
  def.traits = OpTrait::elementwise | OpTrait::binary | OpTrait::epilogue_safe;
  def.infer = [name, domain, result](const InferContext &c) {
    require_same_dtype(name, c.operands);
    require_same_device(name, c.operands);
    check_domain(name, c.operands[0], domain);
    TensorType out(result == BinaryResult::boolean ? DType::boolean : c.operands[0].dtype,
                   broadcast_shapes(name, c.operands[0].shape, c.operands[1].shape), c.operands[0].device);
    return std::vector<TensorType>{out};
  };
  def.reference = [f, fi, fu](const ReferenceContext &c) {
    const HostTensor &a = c.operands[0], &b = c.operands[1];
    HostTensor out = c.make_result();
    auto ia = broadcast_index_map(a.shape(), out.shape());
    auto ib = broadcast_index_map(b.shape(), out.shape());
    bool integral = !is_float(a.dtype()), as_unsigned = fu && unsigned_int(a.dtype());
    for (int64_t i = 0; i < out.numel(); ++i) {
      if (as_unsigned)
        out.set_i64(i, static_cast<int64_t>(fu(static_cast<uint64_t>(a.get_i64(ia[i])),
                                              static_cast<uint64_t>(b.get_i64(ib[i])))));
      else if (integral && fi)
        out.set_i64(i, fi(a.get_i64(ia[i]), b.get_i64(ib[i])));
      else
        out.set_f64(i, f(a.get_f64(ia[i]), b.get_f64(ib[i])));
    }
    return std::vector<HostTensor>{out};
  };
  return def;
}

OpDef where_op() {
  OpDef def;
  def.name = "where";
  def.summary = "cond ? a : b with broadcasting";
  def.min_operands = def.max_operands = 3;
  def.traits = OpTrait::elementwise | OpTrait::epilogue_safe;
  def.infer = [](const InferContext &c) {
    require_dtype("where", c.operands[0], DType::boolean, "condition");
    require_same_dtype("where", {c.operands[1], c.operands[2]});
    require_same_device("where", c.operands);
    Shape s = broadcast_shapes("where", c.operands[0].shape, c.operands[1].shape);
    s = broadcast_shapes("where", s, c.operands[2].shape);
    return std::vector<TensorType>{TensorType(c.operands[1].dtype, s, c.operands[1].device)};
  };
  def.reference = [](const ReferenceContext &c) {
    HostTensor out = c.make_result();
    auto ic = broadcast_index_map(c.operands[0].shape(), out.shape());
    auto ia = broadcast_index_map(c.operands[1].shape(), out.shape());
    auto ib = broadcast_index_map(c.operands[2].shape(), out.shape());
    size_t esize = dtype_size(out.dtype());
    for (int64_t i = 0; i < out.numel(); ++i) {
      const HostTensor &src = c.operands[0].get_i64(ic[i]) ? c.operands[1] : c.operands[2];
      int64_t j = c.operands[0].get_i64(ic[i]) ? ia[i] : ib[i];
      std::copy_n(src.data() + j * esize, esize, out.data() + i * esize); // exact for every dtype
    }
    return std::vector<HostTensor>{out};
  };
  return def;
}

OpDef cast_op() {
  OpDef def;
  def.name = "cast";
  def.summary = "converts to another dtype (floats→ints truncate toward zero and saturate; ints wrap)";
  def.attrs = {{"dtype", AttrKind::dtype, std::nullopt, "target dtype"}};
  def.traits = OpTrait::elementwise | OpTrait::epilogue_safe;
  def.infer = [](const InferContext &c) {
    TensorType t = c.operands[0];
    t.dtype = c.attrs.get_dtype("dtype");
    return std::vector<TensorType>{t};
  };
  def.reference = [](const ReferenceContext &c) {
    const HostTensor &x = c.operands[0];
    HostTensor out = c.make_result();
    bool exact_int = !is_float(x.dtype()) && !is_float(out.dtype());
    for (int64_t i = 0; i < x.numel(); ++i) {
      if (exact_int) // the bits, extended by the source's signedness (get_i64) and wrapped
        out.set_i64(i, x.get_i64(i));
      else // floats to integers truncate and saturate (set_f64)
        out.set_f64(i, x.get_f64(i));
    }
    return std::vector<HostTensor>{out};
  };
  return def;
}

} // namespace

void register_elementwise_ops(OpRegistry &r) {
  // clang-format off
  r.add(unary("neg", "-x", Domain::numbers, [](double v) { return -v; }, [](int64_t v) { return wrap_sub(0, v); }));
  r.add(unary("abs", "|x|", Domain::numbers, [](double v) { return std::fabs(v); },
              [](int64_t v) { return v < 0 ? wrap_sub(0, v) : v; }, {}, [](uint64_t v) { return v; }));
  r.add(needs_libm(unary("exp", "e^x", Domain::floats, [](double v) { return std::exp(v); })));
  r.add(needs_libm(unary("log", "natural logarithm", Domain::floats, [](double v) { return std::log(v); })));
  r.add(unary("sqrt", "square root", Domain::floats, [](double v) { return std::sqrt(v); }));
  r.add(unary("rsqrt", "1/sqrt(x)", Domain::floats, [](double v) { return 1.0 / std::sqrt(v); }));
  r.add(needs_libm(unary("tanh", "hyperbolic tangent", Domain::floats, [](double v) { return std::tanh(v); })));
  r.add(needs_libm(unary("sigmoid", "1/(1+e^-x)", Domain::floats, [](double v) { return 1.0 / (1.0 + std::exp(-v)); })));
  r.add(unary("relu", "max(x, 0)", Domain::numbers, [](double v) { return v > 0 ? v : 0.0; },
              [](int64_t v) { return v > 0 ? v : int64_t{0}; }, {}, [](uint64_t v) { return v; }));
  r.add(needs_libm(unary("silu", "x*sigmoid(x)", Domain::floats, [](double v) { return v / (1.0 + std::exp(-v)); })));
  r.add(needs_libm(unary("erf", "error function", Domain::floats, [](double v) { return std::erf(v); })));
  r.add(needs_libm(unary("sin", "sine", Domain::floats, [](double v) { return std::sin(v); })));
  r.add(needs_libm(unary("cos", "cosine", Domain::floats, [](double v) { return std::cos(v); })));
  r.add(unary("floor", "round down", Domain::numbers, [](double v) { return std::floor(v); }, [](int64_t v) { return v; }));
  r.add(unary("ceil", "round up", Domain::numbers, [](double v) { return std::ceil(v); }, [](int64_t v) { return v; }));
  r.add(unary("round", "round half to even", Domain::numbers, round_half_even, [](int64_t v) { return v; }));
  r.add(unary("sign", "-1, 0 or 1", Domain::numbers, sign_of, [](int64_t v) { return int64_t((v > 0) - (v < 0)); }, {},
              [](uint64_t v) { return uint64_t(v != 0); }));
  r.add(unary("not", "logical not", Domain::booleans, [](double v) { return v != 0 ? 0.0 : 1.0; }));
  // clang-format on

  // gelu has an attribute selecting the formula, so it is defined by hand.
  OpDef gelu = unary("gelu", "Gaussian error linear unit", Domain::floats, gelu_erf, nullptr,
                     {{"approximate", AttrKind::string, AttrValue(std::string("none")), "\"none\" (erf) or \"tanh\""}});
  InferFn base_infer = gelu.infer;
  gelu.infer = [base_infer](const InferContext &c) {
    const std::string &mode = c.attrs.get_string("approximate");
    if (mode != "none" && mode != "tanh")
      fail_attr("gelu", "approximate must be \"none\" or \"tanh\", got \"" + mode + "\"");
    return base_infer(c);
  };
  gelu.reference = [](const ReferenceContext &c) {
    F64Fn f = c.attrs.get_string("approximate") == "tanh" ? gelu_tanh : gelu_erf;
    HostTensor out = c.make_result();
    for (int64_t i = 0; i < out.numel(); ++i)
      out.set_f64(i, f(c.operands[0].get_f64(i)));
    return std::vector<HostTensor>{out};
  };
  r.add(needs_libm(std::move(gelu)));

  // clang-format off
  r.add(binary("add", "a + b", Domain::numbers, BinaryResult::same, [](double a, double b) { return a + b; }, wrap_add));
  r.add(binary("sub", "a - b", Domain::numbers, BinaryResult::same, [](double a, double b) { return a - b; }, wrap_sub));
  r.add(binary("mul", "a * b", Domain::numbers, BinaryResult::same, [](double a, double b) { return a * b; }, wrap_mul));
  r.add(binary("div", "a / b (integers truncate; x/0 = 0)", Domain::numbers, BinaryResult::same,
               [](double a, double b) { return a / b; }, int_div, uint_div));
  r.add(needs_libm(binary("pow", "a ^ b", Domain::floats, BinaryResult::same, [](double a, double b) { return std::pow(a, b); }, nullptr),
                   OpTrait::device_libm | OpTrait::device_libm_f64));
  r.add(binary("maximum", "elementwise maximum", Domain::numbers, BinaryResult::same,
               [](double a, double b) { return std::isnan(a) || a > b ? a : b; }, [](int64_t a, int64_t b) { return a > b ? a : b; },
               [](uint64_t a, uint64_t b) { return a > b ? a : b; }));
  r.add(binary("minimum", "elementwise minimum", Domain::numbers, BinaryResult::same,
               [](double a, double b) { return std::isnan(a) || a < b ? a : b; }, [](int64_t a, int64_t b) { return a < b ? a : b; },
               [](uint64_t a, uint64_t b) { return a < b ? a : b; }));
  r.add(binary("mod", "remainder with the divisor's sign", Domain::numbers, BinaryResult::same, float_mod, int_mod, uint_mod));
  r.add(binary("eq", "a == b", Domain::any, BinaryResult::boolean, [](double a, double b) { return double(a == b); },
               [](int64_t a, int64_t b) { return int64_t(a == b); }));
  r.add(binary("ne", "a != b", Domain::any, BinaryResult::boolean, [](double a, double b) { return double(a != b); },
               [](int64_t a, int64_t b) { return int64_t(a != b); }));
  r.add(binary("lt", "a < b", Domain::any, BinaryResult::boolean, [](double a, double b) { return double(a < b); },
               [](int64_t a, int64_t b) { return int64_t(a < b); }, [](uint64_t a, uint64_t b) { return uint64_t(a < b); }));
  r.add(binary("le", "a <= b", Domain::any, BinaryResult::boolean, [](double a, double b) { return double(a <= b); },
               [](int64_t a, int64_t b) { return int64_t(a <= b); }, [](uint64_t a, uint64_t b) { return uint64_t(a <= b); }));
  r.add(binary("gt", "a > b", Domain::any, BinaryResult::boolean, [](double a, double b) { return double(a > b); },
               [](int64_t a, int64_t b) { return int64_t(a > b); }, [](uint64_t a, uint64_t b) { return uint64_t(a > b); }));
  r.add(binary("ge", "a >= b", Domain::any, BinaryResult::boolean, [](double a, double b) { return double(a >= b); },
               [](int64_t a, int64_t b) { return int64_t(a >= b); }, [](uint64_t a, uint64_t b) { return uint64_t(a >= b); }));
  r.add(binary("and", "logical and", Domain::booleans, BinaryResult::boolean,
               [](double a, double b) { return double(a != 0 && b != 0); }, [](int64_t a, int64_t b) { return int64_t(a && b); }));
  r.add(binary("or", "logical or", Domain::booleans, BinaryResult::boolean,
               [](double a, double b) { return double(a != 0 || b != 0); }, [](int64_t a, int64_t b) { return int64_t(a || b); }));
  // clang-format on
  r.add(where_op());
  r.add(cast_op());
}

namespace ops {

// clang-format off
Tensor neg(const Tensor &x) { return record_op("neg", {x}); }
Tensor abs(const Tensor &x) { return record_op("abs", {x}); }
Tensor exp(const Tensor &x) { return record_op("exp", {x}); }
Tensor log(const Tensor &x) { return record_op("log", {x}); }
Tensor sqrt(const Tensor &x) { return record_op("sqrt", {x}); }
Tensor rsqrt(const Tensor &x) { return record_op("rsqrt", {x}); }
Tensor tanh(const Tensor &x) { return record_op("tanh", {x}); }
Tensor sigmoid(const Tensor &x) { return record_op("sigmoid", {x}); }
Tensor relu(const Tensor &x) { return record_op("relu", {x}); }
Tensor gelu(const Tensor &x, const std::string &approximate) { return record_op("gelu", {x}, {{"approximate", approximate}}); }
Tensor silu(const Tensor &x) { return record_op("silu", {x}); }
Tensor erf(const Tensor &x) { return record_op("erf", {x}); }
Tensor sin(const Tensor &x) { return record_op("sin", {x}); }
Tensor cos(const Tensor &x) { return record_op("cos", {x}); }
Tensor floor(const Tensor &x) { return record_op("floor", {x}); }
Tensor ceil(const Tensor &x) { return record_op("ceil", {x}); }
Tensor round(const Tensor &x) { return record_op("round", {x}); }
Tensor sign(const Tensor &x) { return record_op("sign", {x}); }
Tensor logical_not(const Tensor &x) { return record_op("not", {x}); }
Tensor cast(const Tensor &x, DType dtype) { return record_op("cast", {x}, {{"dtype", dtype}}); }

Tensor add(const Tensor &a, const Tensor &b) { return record_op("add", {a, b}); }
Tensor sub(const Tensor &a, const Tensor &b) { return record_op("sub", {a, b}); }
Tensor mul(const Tensor &a, const Tensor &b) { return record_op("mul", {a, b}); }
Tensor div(const Tensor &a, const Tensor &b) { return record_op("div", {a, b}); }
Tensor pow(const Tensor &a, const Tensor &b) { return record_op("pow", {a, b}); }
Tensor maximum(const Tensor &a, const Tensor &b) { return record_op("maximum", {a, b}); }
Tensor minimum(const Tensor &a, const Tensor &b) { return record_op("minimum", {a, b}); }
Tensor mod(const Tensor &a, const Tensor &b) { return record_op("mod", {a, b}); }
Tensor equal(const Tensor &a, const Tensor &b) { return record_op("eq", {a, b}); }
Tensor not_equal(const Tensor &a, const Tensor &b) { return record_op("ne", {a, b}); }
Tensor less(const Tensor &a, const Tensor &b) { return record_op("lt", {a, b}); }
Tensor less_equal(const Tensor &a, const Tensor &b) { return record_op("le", {a, b}); }
Tensor greater(const Tensor &a, const Tensor &b) { return record_op("gt", {a, b}); }
Tensor greater_equal(const Tensor &a, const Tensor &b) { return record_op("ge", {a, b}); }
Tensor logical_and(const Tensor &a, const Tensor &b) { return record_op("and", {a, b}); }
Tensor logical_or(const Tensor &a, const Tensor &b) { return record_op("or", {a, b}); }
Tensor where(const Tensor &c, const Tensor &a, const Tensor &b) { return record_op("where", {c, a, b}); }
// clang-format on

} // namespace ops
} // namespace maxc
