#include "TestUtil.h"

using namespace maxc;

TEST_CASE("static and symbolic dims", "[ir][dim]") {
  Dim five(5), batch("batch");
  CHECK(five.is_static());
  CHECK(five.value() == 5);
  CHECK_FALSE(batch.is_static());
  CHECK(batch.is_symbol());
  CHECK(batch.to_string() == "batch");
  MAXC_REQUIRE_ERROR(batch.value(), ErrorCode::UnboundDim, "batch");
  MAXC_REQUIRE_ERROR(Dim("2x"), ErrorCode::InvalidArgument, "invalid dim symbol");
}

TEST_CASE("dim algebra keeps a canonical form", "[ir][dim]") {
  Dim b("batch"), s("seq");
  CHECK((b * 4 + 1).to_string() == "4*batch+1");
  CHECK((b * s).to_string() == "batch*seq");
  CHECK(b * s == s * b);
  CHECK(b + s == s + b);
  CHECK((b + b) == b * 2);
  CHECK((b - b) == Dim(0));
  CHECK((b * s * 2 + s).to_string() == "2*batch*seq+seq");
  CHECK(Dim(3) * Dim(4) == Dim(12));
  CHECK(((b * s * 4) / Dim(4)) == b * s);
  CHECK(((b * s * 4) / s) == b * 4);
  CHECK_FALSE((b * 3 + 1).exact_div(Dim(2)).has_value());
  CHECK_FALSE(b.exact_div(s).has_value());
  MAXC_REQUIRE_ERROR(b / Dim(2), ErrorCode::ShapeMismatch, "not divisible");
}

TEST_CASE("dim parse round-trips to_string", "[ir][dim]") {
  for (const Dim &d : {Dim(0), Dim(7), Dim("x"), Dim("b") * Dim("s") * 2 + Dim("s") - Dim(3), Dim(-4) * Dim("k")}) {
    INFO(d.to_string());
    CHECK(Dim::parse(d.to_string()) == d);
  }
  CHECK(Dim::parse(" 2 * seq + 1 ") == Dim("seq") * 2 + 1);
  MAXC_REQUIRE_ERROR(Dim::parse("seq +"), ErrorCode::InvalidArgument, "malformed dim");
  MAXC_REQUIRE_ERROR(Dim::parse("a/b"), ErrorCode::InvalidArgument, "unexpected '/'");
}

TEST_CASE("dims evaluate under bindings and detect overflow", "[ir][dim]") {
  Dim d = Dim("batch") * Dim("seq") + 1;
  CHECK(d.evaluate({{"batch", 3}, {"seq", 5}}) == 16);
  MAXC_REQUIRE_ERROR(d.evaluate({{"batch", 3}}), ErrorCode::UnboundDim, "'seq'");
  MAXC_REQUIRE_ERROR(Dim(int64_t(1) << 40) * Dim(int64_t(1) << 40), ErrorCode::DimOverflow, "overflow");
  MAXC_REQUIRE_ERROR(Dim("a").evaluate({{"a", int64_t(1) << 62}}) * 0 + (Dim("a") * 4).evaluate({{"a", int64_t(1) << 62}}),
                     ErrorCode::DimOverflow, "overflow");
  CHECK(Dim::parse("9223372036854775807").value() == INT64_MAX);
  MAXC_REQUIRE_ERROR(Dim::parse("99999999999999999999"), ErrorCode::DimOverflow, "overflow");
}

TEST_CASE("dim terms are public, in to_string order", "[ir][dim]") {
  Dim b("batch"), s("seq");
  CHECK(Dim(0).terms().empty());
  std::vector<DimTerm> t = (b * s * 2 + s - 3).terms();
  REQUIRE(t.size() == 3);
  CHECK(t[0].coeff == 2);
  REQUIRE(t[0].factors.size() == 2);
  CHECK(t[0].factors[0].symbol() == "batch");
  CHECK(t[0].factors[1].symbol() == "seq");
  CHECK(t[1].coeff == 1);
  REQUIRE(t[1].factors.size() == 1);
  CHECK(t[1].factors[0].is_symbol());
  CHECK(t[2].coeff == -3);
  CHECK(t[2].factors.empty());
  // A square repeats its atom.
  std::vector<DimTerm> sq = (s * s).terms();
  REQUIRE(sq.size() == 1);
  CHECK(sq[0].factors.size() == 2);
  // Derived atoms are factors like symbols, with their operands.
  std::vector<DimTerm> m = (Dim::max(b, s) * 4).terms();
  REQUIRE(m.size() == 1);
  CHECK(m[0].coeff == 4);
  REQUIRE(m[0].factors.size() == 1);
  CHECK(m[0].factors[0].kind() == DimAtom::Kind::Max);
  REQUIRE(m[0].factors[0].args().size() == 2);
  CHECK(m[0].factors[0].args()[0] == b);
  CHECK(m[0].factors[0].args()[1] == s);
  MAXC_REQUIRE_ERROR(m[0].factors[0].symbol(), ErrorCode::Internal, "not a symbol");
}

TEST_CASE("dim min and max simplify what does not depend on the symbols", "[ir][dim]") {
  Dim a("a"), b("b"), n("n");
  CHECK(Dim::max(Dim(4), Dim(7)) == Dim(7));
  CHECK(Dim::min(Dim(4), Dim(7)) == Dim(4));
  CHECK(Dim::max(a, a) == a);
  CHECK(Dim::max(n, n + 1) == n + 1);
  CHECK(Dim::min(n, n + 1) == n);
  CHECK(Dim::max(n * 2 - 3, n * 2) == n * 2);
  // Symbols are dims (never negative): a difference that is a sum of symbol
  // products with non-negative coefficients decides too.
  CHECK(Dim::min(Dim(20), n * 600 + 20) == Dim(20));
  CHECK(Dim::max(Dim(20), n * 600 + 20) == n * 600 + 20);
  CHECK(Dim::min(n, Dim(0)) == Dim(0));
  CHECK(Dim::max(a, a * b + a) == a * b + a);
  CHECK(Dim::max(n, n * a).to_string() == "max(a*n,n)"); // n*a - n = n*(a-1) may be negative
  CHECK(Dim::min(n + 1, Dim::floor_div(n, 2) + 1).to_string() == "min(n+1,floordiv(n,2)+1)"); // atoms: not decided
  CHECK(Dim::max(a, b) == Dim::max(b, a));
  CHECK(Dim::max(a, b).to_string() == "max(a,b)");
  CHECK(Dim::min(a, b).to_string() == "min(a,b)");
  CHECK(Dim::max(Dim::max(a, b), n) == Dim::max({n, b, a}));
  CHECK(Dim::max({a, b, n}).to_string() == "max(a,b,n)");
  CHECK(Dim::max(Dim::min(a, b), a).to_string() == "max(a,min(a,b))");
  CHECK_FALSE(Dim::max(a, b).is_static());
  CHECK_FALSE(Dim::max(a, b).is_symbol());
  CHECK(Dim::max(a, b) != Dim::min(a, b));
  CHECK((Dim::max(a, b) * 2 + Dim::max(b, a)) == Dim::max(a, b) * 3);
  CHECK((Dim::max(a, b) * n + 1).to_string() == "n*max(a,b)+1");
  CHECK(Dim::max(a * n, 4).symbols() == std::vector<std::string>{"a", "n"});
  CHECK(Dim::max(a, b).evaluate({{"a", 3}, {"b", 5}}) == 5);
  CHECK(Dim::min(a, b).evaluate({{"a", 3}, {"b", 5}}) == 3);
  CHECK(Dim::max({a, b, Dim(9)}).evaluate({{"a", 3}, {"b", 5}}) == 9);
  MAXC_REQUIRE_ERROR(Dim::max(a, b).evaluate({{"a", 3}}), ErrorCode::UnboundDim, "'b'");
  MAXC_REQUIRE_ERROR(Dim::max(std::vector<Dim>{}), ErrorCode::InvalidArgument, "no dims");
}

TEST_CASE("dim floor_div is exact where it can be and an atom otherwise", "[ir][dim]") {
  Dim n("n"), m("m");
  CHECK(Dim::floor_div(Dim(7), Dim(2)) == Dim(3));
  CHECK(Dim::floor_div(Dim(-7), Dim(2)) == Dim(-4));
  CHECK(Dim::floor_div(n * 4 + 8, 4) == n + 2);
  CHECK(Dim::floor_div(n, 1) == n);
  CHECK(Dim::floor_div(n * 4 + 5, 4) == n + 1);
  CHECK(Dim::floor_div(n + 3, 4).to_string() == "floordiv(n+3,4)");
  CHECK(Dim::floor_div(n * 5 + 3, 4).to_string() == "n+floordiv(n+3,4)");
  CHECK(Dim::floor_div(n * 2, 4).to_string() == "floordiv(n,2)");
  CHECK(Dim::floor_div(n - 1, 4).to_string() == "floordiv(n+3,4)-1");
  CHECK(Dim::floor_div(Dim::floor_div(n, 2), 3) == Dim::floor_div(n, 6));
  CHECK(Dim::floor_div(Dim::floor_div(n, 2) + 3, 3) == Dim::floor_div(n, 6) + 1);
  // A chain of stride-2 windows: floor((floor(y/m) + c)/k) = floor((y + c*m)/(m*k)).
  CHECK(Dim::floor_div(Dim::floor_div(n + 1, 2) + 1, 2).to_string() == "floordiv(n+3,4)");
  CHECK(Dim::floor_div(Dim::floor_div(Dim::floor_div(n + 1, 2) + 1, 2) + 1, 2).to_string() == "floordiv(n+7,8)");
  CHECK(Dim::floor_div(Dim::floor_div(n, m) + 2, 3).to_string() == "floordiv(2*m+n,3*m)");
  CHECK(Dim::floor_div(n * m * 6, m * 3) == n * 2);
  CHECK(Dim::floor_div(Dim(0), m) == Dim(0));
  CHECK(Dim::floor_div(n, m).to_string() == "floordiv(n,m)");
  CHECK(Dim::ceil_div(n, 4).to_string() == "n-floordiv(3*n,4)");
  MAXC_REQUIRE_ERROR(Dim::floor_div(n, 0), ErrorCode::InvalidArgument, "positive");
  MAXC_REQUIRE_ERROR(Dim::floor_div(n, -2), ErrorCode::InvalidArgument, "positive");
  // Every form evaluates to the floor for every value, negative ones too.
  for (int64_t v = -9; v <= 9; ++v) {
    DimBindings at{{"n", v}, {"m", 3}};
    auto floor_of = [](int64_t x, int64_t d) { return x >= 0 ? x / d : -((-x + d - 1) / d); };
    CHECK(Dim::floor_div(n + 3, 4).evaluate(at) == floor_of(v + 3, 4));
    CHECK(Dim::floor_div(n * 5 + 3, 4).evaluate(at) == floor_of(5 * v + 3, 4));
    CHECK(Dim::floor_div(n - 1, 4).evaluate(at) == floor_of(v - 1, 4));
    CHECK(Dim::floor_div(n * 2, 4).evaluate(at) == floor_of(2 * v, 4));
    CHECK(Dim::ceil_div(n, 4).evaluate(at) == -floor_of(-v, 4));
    CHECK(Dim::floor_div(n, m).evaluate(at) == floor_of(v, 3));
    CHECK(Dim::floor_div(Dim::floor_div(n, 2), 3).evaluate(at) == floor_of(floor_of(v, 2), 3));
    CHECK(Dim::floor_div(Dim::floor_div(n + 1, 2) + 1, 3).evaluate(at) == floor_of(floor_of(v + 1, 2) + 1, 3));
    CHECK(Dim::floor_div(Dim::floor_div(n, m) + 2, 3).evaluate(at) == floor_of(floor_of(v, 3) + 2, 3));
  }
  MAXC_REQUIRE_ERROR(Dim::floor_div(n, m).evaluate({{"n", 4}, {"m", 0}}), ErrorCode::InvalidArgument, "positive");
}

TEST_CASE("dims with derived atoms parse what to_string prints", "[ir][dim]") {
  Dim a("a"), b("b"), n("n");
  for (const Dim &d : {Dim::max(a, b), Dim::min({a, b, n * 2 + 1}), Dim::floor_div(n + 3, 4),
                       Dim::floor_div(n * 5 - 7, 4) * a + 2, Dim::max(a, Dim::floor_div(n, b)) * Dim::min(a, 8) - 1,
                       Dim::ceil_div(n, 4), Dim::max(Dim::min(a, b), n - 2)})
    CHECK(Dim::parse(d.to_string()) == d);
  CHECK(Dim::parse("max(a, b)") == Dim::max(a, b));
  CHECK(Dim::parse("max(n,n+1)") == n + 1);
  CHECK(Dim::parse("floordiv(4*n+8,4)") == n + 2);
  CHECK(Dim::parse("2*(a+b)") == a * 2 + b * 2);
  CHECK(Dim::parse("max") == Dim("max")); // a symbol named max
  MAXC_REQUIRE_ERROR(Dim::parse("max(a)"), ErrorCode::InvalidArgument, "two or more");
  MAXC_REQUIRE_ERROR(Dim::parse("floordiv(a,b,c)"), ErrorCode::InvalidArgument, "two operands");
  MAXC_REQUIRE_ERROR(Dim::parse("max(a,b"), ErrorCode::InvalidArgument, "expected ')'");
  MAXC_REQUIRE_ERROR(Dim::parse("a)"), ErrorCode::InvalidArgument, "unexpected ')'");
}

TEST_CASE("tensor types print and parse", "[ir][type]") {
  TensorType t(DType::f32, {Dim("batch"), 5});
  CHECK(t.to_string() == "f32[batch,5]");
  CHECK(TensorType::parse("f32[batch,5]") == t);
  TensorType g(DType::bf16, {}, DeviceRef::gpu(1));
  CHECK(g.to_string() == "bf16[]@gpu:1");
  CHECK(TensorType::parse(g.to_string()) == g);
  MAXC_REQUIRE_ERROR(TensorType::parse("f33[1]"), ErrorCode::InvalidArgument, "malformed tensor type");
  MAXC_REQUIRE_ERROR(DeviceRef::parse("tpu:0"), ErrorCode::InvalidArgument, "unknown device");
  for (DType d : kAllDTypes)
    CHECK(parse_dtype(dtype_name(d)) == d);
}

TEST_CASE("half and bfloat16 conversions round to nearest even", "[ir][dtype]") {
  HostTensor h(DType::f16, {5});
  h.set_f64(0, 1.0);
  h.set_f64(1, 65504.0);  // max half
  h.set_f64(2, 70000.0);  // overflow → inf
  h.set_f64(3, 5.960464477539063e-08); // smallest subnormal
  h.set_f64(4, 1.0 + 1.0 / 2048);      // halfway between 1 and next → even (1)
  CHECK(h.get_f64(0) == 1.0);
  CHECK(h.get_f64(1) == 65504.0);
  CHECK(std::isinf(h.get_f64(2)));
  CHECK(h.get_f64(3) == 5.960464477539063e-08);
  CHECK(h.get_f64(4) == 1.0);
  HostTensor b(DType::bf16, {2});
  b.set_f64(0, 1.0 + 1.0 / 256); // halfway → even (1)
  b.set_f64(1, -3.140625);
  CHECK(b.get_f64(0) == 1.0);
  CHECK(b.get_f64(1) == -3.140625);
}

#include "maxc/Support/Sha256.h"

TEST_CASE("sha256 matches the FIPS test vectors", "[support]") {
  CHECK(maxc::sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(maxc::sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(maxc::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(maxc::sha256_hex(std::string(1000000, 'a')) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("Dim::parse refuses nesting deeper than its limit instead of recursing without bound", "[dim]") {
  std::string deep(100000, '(');
  deep += "n" + std::string(100000, ')');
  CHECK_THROWS_WITH(Dim::parse(deep), Catch::Contains("nested deeper than 64"));
  std::string ok = std::string(30, '(') + "n" + std::string(30, ')');
  CHECK(Dim::parse(ok) == Dim("n"));
  std::string maxes;
  for (int i = 0; i < 100000; ++i)
    maxes += "max(";
  CHECK_THROWS_WITH(Dim::parse(maxes + "n"), Catch::Contains("nested deeper"));
}
