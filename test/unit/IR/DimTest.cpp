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
