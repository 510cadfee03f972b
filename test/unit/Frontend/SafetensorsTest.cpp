#include "maxc/Frontend/Safetensors.h"
#include "maxc/Support/Error.h"

#include "TestUtil.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>

using namespace maxc;
using Catch::Matchers::Contains;

namespace {

using maxc::test::read_bytes;
using maxc::test::TempDir;
using maxc::test::write_bytes;

std::string le64(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i)
    s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

// A safetensors file from header text and data bytes (no padding added).
std::string st_file(const std::string &header, const std::string &data = std::string(16, '\0')) {
  return le64(header.size()) + header + data;
}

HostTensor random_tensor(DType dtype, std::vector<int64_t> shape, std::mt19937 &rng) {
  HostTensor t(dtype, std::move(shape));
  auto *p = reinterpret_cast<uint8_t *>(t.data());
  for (size_t i = 0; i < t.nbytes(); ++i)
    p[i] = static_cast<uint8_t>(dtype == DType::boolean ? rng() % 2 : rng() & 0xff);
  return t;
}

// Runs `f`, which must throw maxc::Error with `code` located at `location`
// and whose message contains every string in `parts`.
void expect_error(const std::function<void()> &f, ErrorCode code, const std::string &location,
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

bool inside(const SafetensorsFile &f, const void *p) {
  auto *b = reinterpret_cast<const char *>(f.bytes());
  auto *q = static_cast<const char *>(p);
  return q >= b && q <= b + f.byte_size();
}

} // namespace

TEST_CASE("safetensors dtype names", "[safetensors]") {
  CHECK(safetensors_dtype_name(DType::f16) == "F16");
  CHECK(safetensors_dtype_name(DType::bf16) == "BF16");
  CHECK(safetensors_dtype_name(DType::boolean) == "BOOL");
  for (DType d : kAllDTypes)
    CHECK(parse_safetensors_dtype(safetensors_dtype_name(d)) == d);
  CHECK(parse_safetensors_dtype("U8") == DType::u8);
  CHECK(parse_safetensors_dtype("U16") == DType::u16);
  CHECK(parse_safetensors_dtype("I16") == DType::i16);
  CHECK(parse_safetensors_dtype("U32") == DType::u32);
  CHECK(parse_safetensors_dtype("U64") == DType::u64);
  CHECK_FALSE(parse_safetensors_dtype("F8_E4M3"));
  CHECK_FALSE(parse_safetensors_dtype("f32"));
}

TEST_CASE("safetensors round trip of every dtype", "[safetensors]") {
  TempDir dir;
  std::mt19937 rng(1234);
  std::map<std::string, HostTensor> tensors;
  const std::vector<std::vector<int64_t>> shapes = {{3, 5}, {7}, {}, {2, 0, 4}, {1, 3, 1}};
  for (DType d : kAllDTypes)
    for (size_t s = 0; s < shapes.size(); ++s)
      tensors["layers." + std::string(dtype_name(d)) + "." + std::to_string(s)] = random_tensor(d, shapes[s], rng);
  std::map<std::string, std::string> meta = {{"format", "pt"}, {"note", "ünïcode \"quoted\""}};
  const std::string path = dir.file("all.safetensors");
  write_safetensors(path, tensors, meta);

  SafetensorsFile f = SafetensorsFile::open(path);
  CHECK(f.path() == path);
  CHECK(f.metadata() == meta);
  std::vector<std::string> expected_names;
  for (const auto &[name, t] : tensors)
    expected_names.push_back(name);
  CHECK(f.names() == expected_names); // std::map order = sorted
  CHECK(f.size() == tensors.size());
  for (const auto &[name, t] : tensors) {
    INFO(name);
    REQUIRE(f.contains(name));
    HostTensor r = f.tensor(name);
    CHECK(r.identical(t));
    CHECK(f.info(name).dtype == t.dtype());
    CHECK(f.info(name).shape == t.shape());
    // The writer aligns every tensor, so every tensor aliases the mapping.
    CHECK(inside(f, r.data()));
    CHECK(reinterpret_cast<uintptr_t>(r.data()) % dtype_size(t.dtype()) == 0);
  }
  CHECK(read_bytes(path) == serialize_safetensors(tensors, meta));
}

TEST_CASE("safetensors writer output is deterministic, padded and gap-free", "[safetensors]") {
  std::mt19937 rng(99);
  std::map<std::string, HostTensor> tensors = {
      {"a_i8", random_tensor(DType::i8, {3}, rng)},   {"b_f64", random_tensor(DType::f64, {3}, rng)},
      {"c_f16", random_tensor(DType::f16, {5}, rng)}, {"d_f32", random_tensor(DType::f32, {1}, rng)},
      {"e_i64", random_tensor(DType::i64, {2}, rng)}, {"f_bool", random_tensor(DType::boolean, {1}, rng)}};
  std::string bytes = serialize_safetensors(tensors);
  CHECK(bytes == serialize_safetensors(tensors));

  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  CHECK(n % 8 == 0);
  CHECK(bytes.substr(8, 1) == "{");
  auto owner = std::make_shared<std::string>(bytes);
  auto *data = reinterpret_cast<const std::byte *>(owner->data());
  SafetensorsFile f = SafetensorsFile::parse(std::shared_ptr<const std::byte>(owner, data), data, owner->size(), "mem");
  // Data ordered by element size then name, with no gaps.
  const std::vector<std::string> order = {"b_f64", "e_i64", "d_f32", "c_f16", "a_i8", "f_bool"};
  uint64_t offset = 0;
  for (const auto &name : order) {
    INFO(name);
    const auto &info = f.info(name);
    CHECK(info.data_begin == offset);
    CHECK(info.data_begin % dtype_size(info.dtype) == 0);
    offset = info.data_end;
  }
  CHECK(8 + n + offset == bytes.size());
}

TEST_CASE("safetensors writer produces the expected bytes", "[safetensors]") {
  HostTensor x = HostTensor::from_f64(DType::f32, {1}, {1.0});
  HostTensor b = HostTensor::from_i64(DType::i8, {3}, {1, -1, 127});
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"},"
                       "\"b\":{\"dtype\":\"I8\",\"shape\":[3],\"data_offsets\":[4,7]},"
                       "\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
  REQUIRE(header.size() == 137);
  std::string expected = std::string("\x90\0\0\0\0\0\0\0", 8) + header + std::string(7, ' ') +
                         std::string("\x00\x00\x80\x3f", 4) + std::string("\x01\xff\x7f", 3);
  CHECK(serialize_safetensors({{"x", x}, {"b", b}}, {{"format", "pt"}}) == expected);

  // No tensors at all is a valid file.
  CHECK(serialize_safetensors({}) == std::string("\x08\0\0\0\0\0\0\0{}      ", 16));
}

TEST_CASE("safetensors reads a hand-built file", "[safetensors]") {
  TempDir dir;
  // Header of 96 bytes, so the data section starts 8-aligned.
  std::string header = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                       "\"b\":{\"dtype\":\"I8\",\"shape\":[3],\"data_offsets\":[8,11]}}";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string data("\x00\x00\x80\x3f"   // 1.0f
                   "\x00\x00\x20\xc0"   // -2.5f
                   "\x01\xff\x7f",
                   11);
  const std::string path = dir.file("tiny.safetensors");
  write_bytes(path, le64(header.size()) + header + data);

  SafetensorsFile f = SafetensorsFile::open(path);
  CHECK(f.names() == std::vector<std::string>{"a", "b"});
  CHECK(f.metadata().empty());
  HostTensor a = f.tensor("a");
  CHECK(a.dtype() == DType::f32);
  CHECK(a.shape() == std::vector<int64_t>{2});
  CHECK(a.to_f64() == std::vector<double>{1.0, -2.5});
  HostTensor b = f.tensor("b");
  CHECK(b.dtype() == DType::i8);
  CHECK(b.to_i64() == std::vector<int64_t>{1, -1, 127});
}

TEST_CASE("safetensors tensors alias the mapping and keep it alive", "[safetensors]") {
  TempDir dir;
  std::mt19937 rng(7);
  HostTensor w = random_tensor(DType::f32, {64, 3}, rng);
  const std::string path = dir.file("w.safetensors");
  write_safetensors(path, {{"w", w}});
  HostTensor r;
  {
    SafetensorsFile f = SafetensorsFile::open(path);
    r = f.tensor("w");
    const std::byte *expect = f.bytes() + f.data_section_offset() + f.info("w").data_begin;
    CHECK(r.data() == expect); // no copy: the tensor points into the mapping
    CHECK(f.tensor("w").data() == expect);
  }
  // The file object is gone; the tensor still owns the mapping.
  CHECK(r.identical(w));
}

TEST_CASE("safetensors copies misaligned tensors and aliases aligned ones", "[safetensors]") {
  TempDir dir;
  // Pad the header so the data section starts at 1 mod 8: misaligned for F32.
  std::string header = "{\"f\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                       "\"i\":{\"dtype\":\"I8\",\"shape\":[1],\"data_offsets\":[8,9]}}";
  while ((8 + header.size()) % 8 != 1)
    header += ' ';
  const std::string data("\x00\x00\x80\x3f\x00\x00\x00\x40\x05", 9); // 1.0f 2.0f 5
  const std::string path = dir.file("odd.safetensors");
  write_bytes(path, le64(header.size()) + header + data);
  REQUIRE((8 + header.size()) % 4 != 0);

  SafetensorsFile f = SafetensorsFile::open(path);
  HostTensor fl = f.tensor("f");
  CHECK(fl.to_f64() == std::vector<double>{1.0, 2.0});
  CHECK(reinterpret_cast<uintptr_t>(fl.data()) % 4 == 0);
  CHECK_FALSE(inside(f, fl.data())); // an aligned copy
  HostTensor i = f.tensor("i");
  CHECK(i.to_i64() == std::vector<int64_t>{5});
  CHECK(inside(f, i.data())); // bytes are always aligned: aliased
}

TEST_CASE("safetensors accepts gaps and trailing bytes", "[safetensors]") {
  TempDir dir;
  std::string header = "{\"x\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[8,12]}}";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string data(16, '\0');
  data[8] = 42;
  const std::string path = dir.file("gap.safetensors");
  write_bytes(path, le64(header.size()) + header + data);
  CHECK(SafetensorsFile::open(path).tensor("x").to_i64() == std::vector<int64_t>{42});
}

TEST_CASE("safetensors parse() works on memory without an owner", "[safetensors]") {
  std::string bytes = serialize_safetensors({{"s", HostTensor::scalar(DType::i64, -3)}});
  auto *data = reinterpret_cast<const std::byte *>(bytes.data());
  SafetensorsFile f = SafetensorsFile::parse(nullptr, data, bytes.size(), "buffer");
  CHECK(f.path() == "buffer");
  CHECK(f.tensor("s").to_i64() == std::vector<int64_t>{-3});
  expect_error([&] { SafetensorsFile::parse(nullptr, data, 5, "buffer"); }, ErrorCode::SafetensorsHeader,
               "buffer", {"5 bytes"});
}

TEST_CASE("safetensors validation errors name the file and tensor", "[safetensors]") {
  TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  auto open_bytes = [&](const std::string &bytes) {
    write_bytes(path, bytes);
    return [&path] { SafetensorsFile::open(path); };
  };
  // One valid entry for 16 data bytes, with a field replaced.
  auto entry = [](const std::string &fields) { return "{\"w\":{" + fields + "}}"; };
  const std::string dtype = "\"dtype\":\"F32\"", shape = "\"shape\":[2,2]", offsets = "\"data_offsets\":[0,16]";

  SECTION("file shorter than 8 bytes") {
    expect_error(open_bytes("abcde"), ErrorCode::SafetensorsHeader, path, {"5 bytes", "8-byte header length"});
    expect_error(open_bytes(""), ErrorCode::SafetensorsHeader, path, {"0 bytes"});
  }
  SECTION("header length beyond the file") {
    expect_error(open_bytes(le64(1000) + "{}"), ErrorCode::SafetensorsHeader, path,
                 {"header length 1000", "past the end"});
    expect_error(open_bytes(le64(UINT64_MAX) + "{}"), ErrorCode::SafetensorsHeader, path, {"past the end"});
  }
  SECTION("header too large") {
    // A sparse file: big enough for the claimed header without writing it.
    write_bytes(path, le64(100'000'001) + "{");
    std::filesystem::resize_file(path, 8 + 100'000'001);
    expect_error([&] { SafetensorsFile::open(path); }, ErrorCode::SafetensorsHeader, path, {"limit"});
  }
  SECTION("header not JSON or not an object") {
    expect_error(open_bytes(st_file("{\"w\": ")), ErrorCode::SafetensorsHeader, path, {"not valid JSON"});
    expect_error(open_bytes(st_file("")), ErrorCode::SafetensorsHeader, path, {"not valid JSON"});
    expect_error(open_bytes(st_file("{\"w\":\"\xff\"}")), ErrorCode::SafetensorsHeader, path, {"not valid JSON"});
    expect_error(open_bytes(st_file("[1,2]")), ErrorCode::SafetensorsHeader, path, {"JSON object", "array"});
  }
  SECTION("entry is not an object") {
    expect_error(open_bytes(st_file("{\"w\":3}")), ErrorCode::SafetensorsHeader, path, {"tensor 'w'", "JSON object"});
  }
  SECTION("missing fields") {
    expect_error(open_bytes(st_file(entry(shape + "," + offsets))), ErrorCode::SafetensorsHeader, path,
                 {"tensor 'w'", "missing \"dtype\""});
    expect_error(open_bytes(st_file(entry(dtype + "," + offsets))), ErrorCode::SafetensorsHeader, path,
                 {"tensor 'w'", "missing \"shape\""});
    expect_error(open_bytes(st_file(entry(dtype + "," + shape))), ErrorCode::SafetensorsHeader, path,
                 {"tensor 'w'", "missing \"data_offsets\""});
  }
  SECTION("fields of the wrong JSON type") {
    expect_error(open_bytes(st_file(entry("\"dtype\":5," + shape + "," + offsets))), ErrorCode::SafetensorsHeader,
                 path, {"tensor 'w'", "\"dtype\" must be a string"});
    expect_error(open_bytes(st_file(entry(dtype + ",\"shape\":\"2x2\"," + offsets))), ErrorCode::SafetensorsHeader,
                 path, {"tensor 'w'", "\"shape\" must be an array"});
    expect_error(open_bytes(st_file(entry(dtype + ",\"shape\":[2.0,2]," + offsets))), ErrorCode::SafetensorsHeader,
                 path, {"tensor 'w'", "\"shape\" must be an array"});
    expect_error(open_bytes(st_file(entry(dtype + "," + shape + ",\"data_offsets\":[0,8,16]"))),
                 ErrorCode::SafetensorsHeader, path, {"tensor 'w'", "\"data_offsets\" must be"});
    expect_error(open_bytes(st_file(entry(dtype + "," + shape + ",\"data_offsets\":{\"a\":1}"))),
                 ErrorCode::SafetensorsHeader, path, {"tensor 'w'", "\"data_offsets\" must be"});
    expect_error(open_bytes(st_file(entry(dtype + "," + shape + ",\"data_offsets\":[-1,15]"))),
                 ErrorCode::SafetensorsHeader, path, {"tensor 'w'", "\"data_offsets\" must be"});
  }
  SECTION("unknown dtype") {
    expect_error(open_bytes(st_file(entry("\"dtype\":\"F8_E4M3\"," + shape + "," + offsets))), ErrorCode::SafetensorsDType,
                 path, {"tensor 'w'", "\"F8_E4M3\"", "BF16"});
  }
  SECTION("negative dimension and element-count overflow") {
    expect_error(open_bytes(st_file(entry(dtype + ",\"shape\":[2,-2]," + offsets))), ErrorCode::SafetensorsHeader,
                 path, {"tensor 'w'", "negative"});
    expect_error(open_bytes(st_file(entry(dtype + ",\"shape\":[4294967296,4294967296]," + offsets))),
                 ErrorCode::SafetensorsHeader, path, {"tensor 'w'", "overflows"});
    expect_error(open_bytes(st_file(entry(dtype + ",\"shape\":[1152921504606846976,4]," + offsets))),
                 ErrorCode::SafetensorsHeader, path, {"tensor 'w'", "byte size", "overflows"});
    expect_error(open_bytes(st_file(entry(dtype + ",\"shape\":[18446744073709551615]," + offsets))),
                 ErrorCode::SafetensorsHeader, path, {"tensor 'w'", "too large"});
  }
  SECTION("data_offsets out of range, reversed or the wrong size") {
    expect_error(open_bytes(st_file(entry(dtype + "," + shape + ",\"data_offsets\":[16,32]"))),
                 ErrorCode::SafetensorsOffsets, path, {"tensor 'w'", "past the end of the data section (16 bytes)"});
    expect_error(open_bytes(st_file(entry(dtype + "," + shape + ",\"data_offsets\":[16,0]"))),
                 ErrorCode::SafetensorsOffsets, path, {"tensor 'w'", "begin after end"});
    expect_error(open_bytes(st_file(entry(dtype + "," + shape + ",\"data_offsets\":[0,12]"))),
                 ErrorCode::SafetensorsOffsets, path, {"tensor 'w'", "hold 12 bytes", "needs 16"});
  }
  SECTION("overlapping tensors") {
    std::string h = "{\"a\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                    "\"z\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[12,16]},"
                    "\"m\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[4,12]}}";
    expect_error(open_bytes(st_file(h)), ErrorCode::SafetensorsOffsets, path, {"'a'", "'m'", "overlap"});
    // Zero-size tensors overlap nothing.
    std::string ok = "{\"a\":{\"dtype\":\"I32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                     "\"e\":{\"dtype\":\"I32\",\"shape\":[0],\"data_offsets\":[4,4]}}";
    write_bytes(path, st_file(ok));
    CHECK(SafetensorsFile::open(path).tensor("e").numel() == 0);
  }
  SECTION("duplicate tensor names") {
    std::string h = "{\"w\":{" + dtype + "," + shape + "," + offsets + "},\"w\":{" + dtype + "," + shape + "," +
                    offsets + "}}";
    expect_error(open_bytes(st_file(h)), ErrorCode::DuplicateTensorName, path, {"tensor 'w'", "more than once"});
    expect_error(open_bytes(st_file(entry(dtype + "," + dtype + "," + shape + "," + offsets))),
                 ErrorCode::SafetensorsHeader, path, {"tensor 'w'", "'dtype'", "more than once"});
  }
  SECTION("bad __metadata__") {
    expect_error(open_bytes(st_file("{\"__metadata__\":{\"k\":1}}")), ErrorCode::SafetensorsHeader, path,
                 {"__metadata__", "'k'", "string"});
    expect_error(open_bytes(st_file("{\"__metadata__\":[]}")), ErrorCode::SafetensorsHeader, path,
                 {"__metadata__"});
  }
  SECTION("unreadable files") {
    expect_error([&] { SafetensorsFile::open(dir.file("missing.safetensors")); }, ErrorCode::FileNotReadable,
                 dir.file("missing.safetensors"), {"No such file"});
    expect_error([&] { SafetensorsFile::open(dir.path); }, ErrorCode::FileNotReadable, dir.path,
                 {"not a regular file"});
  }
  SECTION("unknown tensor name") {
    write_bytes(path, st_file(entry(dtype + "," + shape + "," + offsets)));
    SafetensorsFile f = SafetensorsFile::open(path);
    CHECK_FALSE(f.contains("v"));
    expect_error([&] { f.tensor("v"); }, ErrorCode::InvalidArgument, path, {"'v'"});
  }
}

TEST_CASE("safetensors writer errors", "[safetensors]") {
  TempDir dir;
  HostTensor t = HostTensor::scalar(DType::f32, 1.0);
  expect_error([&] { serialize_safetensors({{"__metadata__", t}}); }, ErrorCode::InvalidArgument, "",
               {"__metadata__"});
  expect_error([&] { serialize_safetensors({{"bad\xff", t}}); }, ErrorCode::InvalidArgument, "", {"UTF-8"});
  expect_error([&] { serialize_safetensors({{"t", t}}, {{"k", "\xfe"}}); }, ErrorCode::InvalidArgument, "",
               {"UTF-8"});

  const std::string nodir = dir.file("no/such/dir/w.safetensors");
  expect_error([&] { write_safetensors(nodir, {{"t", t}}); }, ErrorCode::FileWrite, nodir, {"cannot create"});

  // Renaming over a directory fails after the temp file was written: it
  // must be cleaned up.
  std::filesystem::create_directory(dir.file("target"));
  expect_error([&] { write_safetensors(dir.file("target"), {{"t", t}}); }, ErrorCode::FileWrite, dir.file("target"),
               {"cannot rename"});
  for (const auto &e : std::filesystem::directory_iterator(dir.path))
    CHECK(e.path().filename() == "target");

  // Overwriting an existing file replaces it.
  const std::string path = dir.file("w.safetensors");
  write_safetensors(path, {{"a", t}});
  write_safetensors(path, {{"b", t}});
  CHECK(SafetensorsFile::open(path).names() == std::vector<std::string>{"b"});
}
