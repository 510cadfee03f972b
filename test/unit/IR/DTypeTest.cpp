// The dtype table (include/maxc/IR/DType.h): its rows agree with each other,
// its lookups invert its fields, and the JSON schemas list the same dtypes.
#include "maxc/IR/DType.h"
#include "maxc/IR/HostTensor.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
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
  CHECK(dtype_name_list() == "f16, bf16, f32, f64, i8, i32, i64, bool, u8");
  // u8: ONNX UINT8, NumPy uint8, unsigned.
  CHECK(dtype_info(DType::u8).onnx_type == 2);
  CHECK(dtype_from_npy_descr("u1") == DType::u8);
  CHECK(dtype_from_safetensors_name("U8") == DType::u8);
  CHECK(is_integer(DType::u8));
  CHECK_FALSE(is_signed(DType::u8));
  CHECK(dtype_info(DType::u8).accumulator == DType::i64);
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
    CHECK(t.get_f64(2) == (is_bool(d) ? 1.0 : is_signed(d) ? -1.0 : 255.0));
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
