// The dtype table (include/maxc/IR/DType.h): its rows agree with each other,
// its lookups invert its fields, and the JSON schemas list the same dtypes.
#include "maxc/IR/DType.h"
#include "maxc/IR/HostTensor.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <vector>

using namespace maxc;

TEST_CASE("dtype table rows are consistent", "[dtype]") {
  for (DType d : kAllDTypes) {
    const DTypeInfo &info = dtype_info(d);
    CAPTURE(info.name);
    CHECK(info.dtype == d);
    CHECK(parse_dtype(info.name) == d);
    CHECK(info.bits <= 8 * info.bytes);
    CHECK(dtype_size(d) == info.bytes);
    CHECK(is_float(d) + is_integer(d) + is_bool(d) == 1);
    if (is_float(d))
      CHECK(is_signed(d));
    if (is_bool(d))
      CHECK_FALSE(is_signed(d));
    // Computing and accumulating keep the class and never narrow.
    CHECK(dtype_info(info.compute).cls == info.cls);
    CHECK(dtype_info(info.compute).bits >= info.bits);
    CHECK((info.cls == DTypeClass::floating) == is_float(info.accumulator));
    CHECK(dtype_info(info.accumulator).bits >= dtype_info(info.compute).bits);
    CHECK(dtype_info(info.accumulator).compute == info.accumulator);
    // File-format codes invert.
    CHECK(dtype_from_onnx_type(info.onnx_type) == d);
    CHECK(dtype_from_safetensors_name(info.safetensors_name) == d);
    if (!info.npy_descr.empty())
      CHECK(dtype_from_npy_descr(info.npy_descr.substr(1)) == d);
    CHECK(!info.c_type.empty());
    CHECK(info.c_type.data()[info.c_type.size()] == '\0'); // c_type_name returns it as a C string
    CHECK(info.harness_tag.data()[info.harness_tag.size()] == '\0');
  }
  CHECK_FALSE(parse_dtype("float32"));
  CHECK_FALSE(dtype_from_onnx_type(0));  // UNDEFINED
  CHECK_FALSE(dtype_from_onnx_type(8));  // STRING
  CHECK_FALSE(dtype_from_npy_descr("")); // bf16 has no descr
  CHECK_FALSE(dtype_from_npy_descr("U8"));
  CHECK(dtype_from_npy_descr("f4") == DType::f32);
  CHECK(dtype_from_npy_descr("b1") == DType::boolean);
  CHECK(dtype_info(DType::f16).onnx_type == 10);
  CHECK(dtype_info(DType::bf16).npy_descr.empty());
  CHECK(dtype_info(DType::i8).c_type == "int8_t");
  CHECK(dtype_info(DType::f16).accumulator == DType::f32);
  CHECK(dtype_info(DType::i8).accumulator == DType::i64);
  CHECK(dtype_name_list() == "f16, bf16, f32, f64, i8, i32, i64, bool, u8, i16, u16, u32, u64");
  // u8: ONNX UINT8, NumPy uint8, unsigned.
  CHECK(dtype_info(DType::u8).onnx_type == 2);
  CHECK(dtype_from_npy_descr("u1") == DType::u8);
  CHECK(dtype_from_safetensors_name("U8") == DType::u8);
  CHECK(is_integer(DType::u8));
  CHECK_FALSE(is_signed(DType::u8));
  CHECK(dtype_info(DType::u8).accumulator == DType::i64);
  // i16, u16, u32, u64: ONNX INT16/UINT16/UINT32/UINT64, NumPy's names.
  CHECK(dtype_info(DType::i16).onnx_type == 5);
  CHECK(dtype_info(DType::u16).onnx_type == 4);
  CHECK(dtype_info(DType::u32).onnx_type == 12);
  CHECK(dtype_info(DType::u64).onnx_type == 13);
  CHECK(dtype_from_npy_descr("i2") == DType::i16);
  CHECK(dtype_from_npy_descr("u2") == DType::u16);
  CHECK(dtype_from_npy_descr("u4") == DType::u32);
  CHECK(dtype_from_npy_descr("u8") == DType::u64); // NumPy's "u8" is 8 bytes, maxc's u8 is "u1"
  CHECK(dtype_from_safetensors_name("U64") == DType::u64);
  CHECK(dtype_info(DType::u64).accumulator == DType::u64); // i64 cannot hold it
  CHECK_FALSE(is_signed(DType::u32));
  CHECK(is_signed(DType::i16));
}

TEST_CASE("the table's digits and exponent ranges are the C types'", "[dtype]") {
  CHECK(dtype_info(DType::f32).digits == std::numeric_limits<float>::digits);
  CHECK(dtype_info(DType::f32).max_exponent == std::numeric_limits<float>::max_exponent);
  CHECK(dtype_info(DType::f64).digits == std::numeric_limits<double>::digits);
  CHECK(dtype_info(DType::f64).max_exponent == std::numeric_limits<double>::max_exponent);
  CHECK(dtype_info(DType::i8).digits == std::numeric_limits<int8_t>::digits);
  CHECK(dtype_info(DType::u8).digits == std::numeric_limits<uint8_t>::digits);
  CHECK(dtype_info(DType::i32).digits == std::numeric_limits<int32_t>::digits);
  CHECK(dtype_info(DType::i64).digits == std::numeric_limits<int64_t>::digits);
  CHECK(dtype_info(DType::i16).digits == std::numeric_limits<int16_t>::digits);
  CHECK(dtype_info(DType::u16).digits == std::numeric_limits<uint16_t>::digits);
  CHECK(dtype_info(DType::u32).digits == std::numeric_limits<uint32_t>::digits);
  CHECK(dtype_info(DType::u64).digits == std::numeric_limits<uint64_t>::digits);
  CHECK(dtype_info(DType::boolean).digits == std::numeric_limits<bool>::digits);
  // IEEE binary16 and bfloat16 (f32's exponent, 8 significant bits).
  CHECK(dtype_info(DType::f16).digits == 11);
  CHECK(dtype_info(DType::f16).max_exponent == 16);
  CHECK(dtype_info(DType::bf16).digits == 8);
  CHECK(dtype_info(DType::bf16).max_exponent == std::numeric_limits<float>::max_exponent);
  for (DType d : kAllDTypes)
    CHECK((dtype_info(d).max_exponent > dtype_info(d).digits) == is_float(d));
}

TEST_CASE("cast_is_exact: every pair, from the table", "[dtype]") {
  // The rule as a list: what each dtype widens to exactly.
  auto expected = [](DType from, DType to) {
    if (from == to || from == DType::boolean)
      return true;
    switch (from) {
    case DType::f16:
    case DType::bf16: return to == DType::f32 || to == DType::f64;
    case DType::f32: return to == DType::f64;
    case DType::i8: // |v| <= 128: exact in every float
      return to != DType::boolean && (is_float(to) || is_signed(to));
    case DType::u8: return to != DType::boolean && to != DType::i8; // 0..255: likewise
    case DType::i16: return to == DType::i32 || to == DType::i64 || to == DType::f32 || to == DType::f64;
    case DType::u16: return to == DType::i32 || to == DType::i64 || to == DType::u32 || to == DType::u64 ||
                            to == DType::f32 || to == DType::f64;
    case DType::i32: return to == DType::i64 || to == DType::f64;
    case DType::u32: return to == DType::i64 || to == DType::u64 || to == DType::f64;
    default: return false;
    }
  };
  for (DType from : kAllDTypes)
    for (DType to : kAllDTypes) {
      CAPTURE(dtype_name(from), dtype_name(to));
      CHECK(cast_is_exact(from, to) == expected(from, to));
    }
  // Spot checks by value: every i8 and u8 round-trips through bf16's 8 bits.
  for (int v = -128; v <= 255; ++v) {
    float f = static_cast<float>(v);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    CHECK((bits & 0xffffu) == 0); // the low 16 bits bf16 drops are zero
  }
}

TEST_CASE("HostTensor elements follow the table's width and signedness", "[dtype]") {
  for (DType d : kAllDTypes) {
    CAPTURE(dtype_name(d));
    HostTensor t(d, {3});
    t.set_f64(0, 1.0);
    t.set_i64(1, 0);
    t.set_f64(2, -1.0);
    CHECK(t.get_f64(0) == 1.0);
    CHECK(t.get_i64(1) == 0);
    CHECK(t.get_f64(2) == (is_bool(d) ? 1.0 : is_signed(d) ? -1.0 : std::ldexp(1.0, dtype_info(d).bits) - 1));
    if (is_integer(d)) {
      int bits = dtype_info(d).bits;
      if (bits < 64) {
        t.set_i64(0, (int64_t(1) << (bits - 1))); // one past the signed maximum: the minimum, or 2^(bits-1) unsigned
        CHECK(t.get_i64(0) == (is_signed(d) ? -(int64_t(1) << (bits - 1)) : int64_t(1) << (bits - 1)));
        t.set_i64(0, -1); // wraps to the all-ones value
        CHECK(t.get_i64(0) == (is_signed(d) ? -1 : (int64_t(1) << bits) - 1));
        t.set_f64(0, -1e30); // floats saturate to i64, then wrap
        CHECK(t.get_i64(0) == 0);
      }
    }
  }
  // u64 holds [0, 2^64): get_i64 gives its bits, get_f64 its value; floats
  // at or past 2^63 convert unsigned and saturate to 2^64 - 1.
  HostTensor u(DType::u64, {4});
  u.set_f64(0, 9223372036854775808.0);
  u.set_f64(1, 1e30);
  u.set_f64(2, 17293822569102704640.0);
  u.set_i64(3, -1);
  CHECK(static_cast<uint64_t>(u.get_i64(0)) == uint64_t{1} << 63);
  CHECK(static_cast<uint64_t>(u.get_i64(1)) == ~uint64_t{0});
  CHECK(static_cast<uint64_t>(u.get_i64(2)) == 0xF000000000000000ull);
  CHECK(u.get_f64(0) == 9223372036854775808.0);
  CHECK(u.get_f64(2) == 17293822569102704640.0);
  CHECK(u.get_f64(3) == 18446744073709551616.0); // 2^64 - 1 rounded
}

namespace {

std::vector<std::string> table_names() {
  std::vector<std::string> out;
  for (const DTypeInfo &d : kDTypeInfo)
    out.emplace_back(d.name);
  return out;
}

nlohmann::json read_json(const std::string &path) {
  std::ifstream in(path);
  REQUIRE(in);
  return nlohmann::json::parse(in);
}

} // namespace

TEST_CASE("the JSON schemas list the table's dtypes", "[dtype]") {
  nlohmann::json model = read_json(MAXC_SOURCE_DIR "/docs/model-format.schema.json");
  CHECK(model["$defs"]["dtype"]["enum"].get<std::vector<std::string>>() == table_names());
  nlohmann::json manifest = read_json(MAXC_SOURCE_DIR "/docs/manifest.schema.json");
  CHECK(manifest["$defs"]["tensor"]["properties"]["dtype"]["enum"].get<std::vector<std::string>>() == table_names());
}
