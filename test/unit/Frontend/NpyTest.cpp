#include "maxc/Frontend/Npy.h"
#include "maxc/Support/Error.h"

#include "TestUtil.h"

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>

using namespace maxc;
using Catch::Matchers::Contains;

namespace {

using NpyTempDir = maxc::test::TempDir;
const auto &put_bytes = maxc::test::write_bytes;
const auto &get_bytes = maxc::test::read_bytes;

HostTensor random_npy_tensor(DType dtype, std::vector<int64_t> shape, std::mt19937 &rng) {
  HostTensor t(dtype, std::move(shape));
  auto *p = reinterpret_cast<uint8_t *>(t.data());
  for (size_t i = 0; i < t.nbytes(); ++i)
    p[i] = static_cast<uint8_t>(dtype == DType::boolean ? rng() % 2 : rng() & 0xff);
  return t;
}

// A v1.0 file with `header` as is (no padding) followed by `data`.
std::string npy_v1(const std::string &header, const std::string &data) {
  std::string s("\x93NUMPY\x01\x00", 8);
  s += static_cast<char>(header.size() & 0xff);
  s += static_cast<char>(header.size() >> 8);
  return s + header + data;
}

void expect_npy_error(const std::function<void()> &f, ErrorCode code, const std::string &location,
                      std::vector<std::string> parts) {
  try {
    f();
    FAIL("expected maxc::Error " << error_code_name(code));
  } catch (const Error &e) {
    INFO(e.formatted());
    CHECK(e.code() == code);
    CHECK(e.location() == location);
    for (const auto &p : parts)
      CHECK_THAT(e.message(), Contains(p));
  }
}

} // namespace

TEST_CASE("npy round trip of every dtype", "[npy]") {
  NpyTempDir dir;
  std::mt19937 rng(42);
  const std::vector<std::vector<int64_t>> shapes = {{3, 5}, {7}, {}, {2, 0, 4}, {2, 3, 4}};
  for (DType d : kAllDTypes) {
    if (d == DType::bf16)
      continue;
    for (const auto &shape : shapes) {
      HostTensor t = random_npy_tensor(d, shape, rng);
      INFO(describe(t));
      const std::string path = dir.file("t.npy");
      write_npy(path, t);
      HostTensor r = read_npy(path);
      CHECK(r.identical(t));
      std::string bytes = serialize_npy(t);
      CHECK(get_bytes(path) == bytes);
      CHECK(bytes.size() % 64 == t.nbytes() % 64); // header is a multiple of 64
      CHECK(parse_npy(bytes, "mem").identical(t));
    }
  }
}

TEST_CASE("npy writer produces NumPy's exact header", "[npy]") {
  HostTensor t = HostTensor::from_f64(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6});
  // NumPy: dict repr, 20 growth-axis spaces (21 - len("2")), then padding
  // spaces and '\n' up to 128 bytes in all; header length 118 = 0x76.
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  std::string expected = std::string("\x93NUMPY\x01\x00\x76\x00", 10) + dict + std::string(58, ' ') + "\n";
  REQUIRE(expected.size() == 128);
  std::string bytes = serialize_npy(t);
  CHECK(bytes.substr(0, 128) == expected);
  CHECK(bytes.size() == 128 + 24);
  CHECK(bytes.substr(128, 4) == std::string("\x00\x00\x80\x3f", 4));

  // Scalar: no growth spaces.
  std::string scalar = "{'descr': '<f8', 'fortran_order': False, 'shape': (), }";
  CHECK(serialize_npy(HostTensor::scalar(DType::f64, 0)).substr(0, 128) ==
        std::string("\x93NUMPY\x01\x00\x76\x00", 10) + scalar + std::string(62, ' ') + "\n");

  // 1-d shapes get a trailing comma; one-byte types use '|'.
  std::string vec = "{'descr': '|b1', 'fortran_order': False, 'shape': (5,), }";
  CHECK(serialize_npy(HostTensor(DType::boolean, {5})).substr(0, 128) ==
        std::string("\x93NUMPY\x01\x00\x76\x00", 10) + vec + std::string(60, ' ') + "\n");

  // Here the growth spaces push the header into a third 64-byte block.
  std::vector<int64_t> shape(15, 7);
  shape[0] = 0;
  std::string long_dict =
      "{'descr': '<i4', 'fortran_order': False, 'shape': (0, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7), }";
  REQUIRE(long_dict.size() == 98);
  CHECK(serialize_npy(HostTensor(DType::i32, shape)) ==
        std::string("\x93NUMPY\x01\x00\xb6\x00", 10) + long_dict + std::string(83, ' ') + "\n");
}

TEST_CASE("npy reader accepts NumPy header variants", "[npy]") {
  const std::string data("\x01\x00\x00\x00\xfe\xff\xff\xff\x03\x00\x00\x00", 12);
  const std::vector<int64_t> values = {1, -2, 3};
  SECTION("keys in any order, spaces, no trailing comma") {
    HostTensor t = parse_npy(npy_v1("{ 'shape' : ( 3 , ) ,'fortran_order':False,  'descr':'<i4'}  \n", data), "x");
    CHECK(t.dtype() == DType::i32);
    CHECK(t.shape() == std::vector<int64_t>{3});
    CHECK(t.to_i64() == values);
  }
  SECTION("double quotes, trailing commas, Python 2 longs") {
    HostTensor t = parse_npy(npy_v1("{\"descr\": \"<i4\", \"fortran_order\": False, \"shape\": (3L,),}\n", data), "x");
    CHECK(t.to_i64() == values);
  }
  SECTION("2-d and native byte order") {
    HostTensor t = parse_npy(npy_v1("{'descr': '=i4', 'fortran_order': False, 'shape': (1, 3), }", data), "x");
    CHECK(t.shape() == std::vector<int64_t>{1, 3});
  }
  SECTION("Fortran order when it equals C order") {
    HostTensor t = parse_npy(npy_v1("{'descr': '<i4', 'fortran_order': True, 'shape': (1, 3, 1), }", data), "x");
    CHECK(t.to_i64() == values);
  }
  SECTION("versions 2.0 and 3.0") {
    std::string header = "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }\n";
    for (char major : {'\x02', '\x03'}) {
      std::string s("\x93NUMPY", 6);
      s += major;
      s += '\0';
      s += static_cast<char>(header.size());
      s += std::string(3, '\0');
      CHECK(parse_npy(s + header + data, "x").to_i64() == values);
    }
  }
  SECTION("every supported descr") {
    struct Case {
      const char *descr;
      DType dtype;
    };
    for (Case c : {Case{"<f2", DType::f16}, Case{"<f4", DType::f32}, Case{"<f8", DType::f64},
                   Case{"|i1", DType::i8}, Case{"<i4", DType::i32}, Case{"<i8", DType::i64},
                   Case{"|b1", DType::boolean}}) {
      INFO(c.descr);
      std::string h = std::string("{'descr': '") + c.descr + "', 'fortran_order': False, 'shape': (), }";
      HostTensor t = parse_npy(npy_v1(h, std::string(dtype_size(c.dtype), '\x01')), "x");
      CHECK(t.dtype() == c.dtype);
      CHECK(t.shape().empty());
    }
  }
}

TEST_CASE("npy known bytes from a file", "[npy]") {
  NpyTempDir dir;
  const std::string path = dir.file("k.npy");
  put_bytes(path, npy_v1("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }\n",
                         std::string("\x00\x00\x00\x00\x00\x00\xf0\x3f"   // 1.0
                                     "\x00\x00\x00\x00\x00\x00\x04\xc0",  // -2.5
                                     16)));
  HostTensor t = read_npy(path);
  CHECK(t.dtype() == DType::f64);
  CHECK(t.to_f64() == std::vector<double>{1.0, -2.5});
}

TEST_CASE("npy validation errors", "[npy]") {
  NpyTempDir dir;
  const std::string path = dir.file("bad.npy");
  auto read_bytes_as_file = [&](const std::string &bytes) {
    put_bytes(path, bytes);
    return [&path] { read_npy(path); };
  };
  const std::string four(4, '\0');
  auto hdr = [](const std::string &descr, const std::string &order, const std::string &shape) {
    return "{'descr': '" + descr + "', 'fortran_order': " + order + ", 'shape': " + shape + ", }";
  };

  SECTION("too short, bad magic, bad version, header past the end") {
    expect_npy_error(read_bytes_as_file("\x93NUM"), ErrorCode::NpyFormat, path, {"too short"});
    expect_npy_error(read_bytes_as_file("PK\x03\x04 this is a zip file"), ErrorCode::NpyFormat, path,
                     {"not a .npy file"});
    expect_npy_error(read_bytes_as_file(std::string("\x93NUMPY\x04\x00\x10\x00", 10) + std::string(16, ' ')),
                     ErrorCode::NpyFormat, path, {"version 4.0"});
    expect_npy_error(read_bytes_as_file(std::string("\x93NUMPY\x01\x00\xff\x00{}", 12)), ErrorCode::NpyFormat, path,
                     {"header length 255", "past the end"});
    expect_npy_error(read_bytes_as_file(std::string("\x93NUMPY\x02\x00\x10\x00", 10)), ErrorCode::NpyFormat,
                     path, {"too short"});
  }
  SECTION("header syntax") {
    expect_npy_error(read_bytes_as_file(npy_v1("'descr': '<i4'", four)), ErrorCode::NpyFormat, path, {"'{'"});
    expect_npy_error(read_bytes_as_file(npy_v1("{'descr': '<i4", four)), ErrorCode::NpyFormat, path,
                     {"unterminated string"});
    expect_npy_error(read_bytes_as_file(npy_v1("{'descr': '<i4', 'fortran_order': False, 'shape': (1,)", four)),
                     ErrorCode::NpyFormat, path, {"expected ',' or '}'"});
    expect_npy_error(read_bytes_as_file(npy_v1(hdr("<i4", "False", "(1,)") + " x", four)), ErrorCode::NpyFormat,
                     path, {"after the header dict"});
    expect_npy_error(read_bytes_as_file(npy_v1(hdr("<i4", "false", "(1,)"), four)), ErrorCode::NpyFormat, path,
                     {"True or False"});
    expect_npy_error(read_bytes_as_file(npy_v1(hdr("<i4", "False", "[1]"), four)), ErrorCode::NpyFormat, path,
                     {"tuple"});
    expect_npy_error(read_bytes_as_file(npy_v1(hdr("<i4", "False", "(1)"), four)), ErrorCode::NpyFormat, path,
                     {"not a tuple", "(1,)"});
    expect_npy_error(read_bytes_as_file(npy_v1(hdr("<i4", "False", "(2, -2)"), four)), ErrorCode::NpyFormat, path,
                     {"negative"});
    expect_npy_error(read_bytes_as_file(npy_v1(hdr("<i4", "False", "(99999999999999999999,)"), four)),
                     ErrorCode::NpyFormat, path, {"too large"});
    expect_npy_error(read_bytes_as_file(npy_v1(hdr("<i4", "False", "(4294967296, 4294967296)"), four)),
                     ErrorCode::NpyFormat, path, {"overflows"});
  }
  SECTION("keys") {
    expect_npy_error(read_bytes_as_file(npy_v1("{'descr': '<i4', 'shape': (1,), }", four)), ErrorCode::NpyFormat,
                     path, {"lacks the key 'fortran_order'"});
    expect_npy_error(read_bytes_as_file(npy_v1("{'x': 1, " + hdr("<i4", "False", "(1,)").substr(1), four)),
                     ErrorCode::NpyFormat, path, {"unexpected key 'x'"});
    expect_npy_error(read_bytes_as_file(npy_v1("{'descr': '<i4', 'descr': '<i4', 'fortran_order': False, 'shape': (1,)}",
                                               four)),
                     ErrorCode::NpyFormat, path, {"'descr' appears more than once"});
  }
  SECTION("dtypes") {
    expect_npy_error(read_bytes_as_file(npy_v1(hdr(">f4", "False", "(1,)"), four)), ErrorCode::NpyFormat, path,
                     {"big-endian", "'>f4'", "astype('<f4')"});
    expect_npy_error(read_bytes_as_file(npy_v1(hdr("<c8", "False", "(2,)"), four + four)), ErrorCode::NpyFormat, path,
                     {"unsupported dtype '<c8'", "<f4", "<u8"});
    put_bytes(path, npy_v1(hdr("<u2", "False", "(2,)"), four)); // NumPy's uint16
    CHECK(read_npy(path).dtype() == DType::u16);
    expect_npy_error(read_bytes_as_file(npy_v1("{'descr': [('x', '<i4')], 'fortran_order': False, 'shape': (1,)}",
                                               four)),
                     ErrorCode::NpyFormat, path, {"structured"});
    // One-byte types ignore byte order.
    put_bytes(path, npy_v1(hdr(">i1", "False", "(4,)"), four));
    CHECK(read_npy(path).dtype() == DType::i8);
  }
  SECTION("Fortran order") {
    expect_npy_error(read_bytes_as_file(npy_v1(hdr("|i1", "True", "(2, 2)"), four)), ErrorCode::NpyFormat, path,
                     {"Fortran", "ascontiguousarray"});
  }
  SECTION("data length") {
    expect_npy_error(read_bytes_as_file(npy_v1(hdr("<i4", "False", "(2,)"), four)), ErrorCode::NpyFormat, path,
                     {"data is 4 bytes", "needs 8"});
    expect_npy_error(read_bytes_as_file(npy_v1(hdr("<i4", "False", "(1,)"), four + "x")), ErrorCode::NpyFormat,
                     path, {"data is 5 bytes", "needs 4"});
  }
  SECTION("in-memory errors use the given name") {
    expect_npy_error([] { parse_npy("nope", "inputs/x.npy"); }, ErrorCode::NpyFormat, "inputs/x.npy", {"too short"});
  }
  SECTION("unreadable files") {
    expect_npy_error([&] { read_npy(dir.file("missing.npy")); }, ErrorCode::FileNotReadable, dir.file("missing.npy"),
                     {"No such file"});
    expect_npy_error([&] { read_npy(dir.path); }, ErrorCode::FileNotReadable, dir.path, {"not a regular file"});
  }
}

TEST_CASE("npy writer errors", "[npy]") {
  NpyTempDir dir;
  expect_npy_error([] { serialize_npy(HostTensor(DType::bf16, {2})); }, ErrorCode::InvalidArgument, "",
                   {"bf16", "cast to f32"});
  const std::string path = dir.file("no/such/dir/x.npy");
  expect_npy_error([&] { write_npy(path, HostTensor(DType::f32, {2})); }, ErrorCode::FileWrite, path,
                   {"cannot create"});
  std::filesystem::create_directory(dir.file("d"));
  expect_npy_error([&] { write_npy(dir.file("d"), HostTensor(DType::f32, {2})); }, ErrorCode::FileWrite,
                   dir.file("d"), {"cannot rename"});
  for (const auto &e : std::filesystem::directory_iterator(dir.path))
    CHECK(e.path().filename() == "d"); // no temp file left behind
}
