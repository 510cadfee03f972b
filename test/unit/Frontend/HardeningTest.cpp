// Issue #14: structural JSON checks before any DOM, the open-for-reading
// helper, byte sizes and the run memory budget.
#include "TestUtil.h"

#include "maxc/Frontend/ModelLoader.h"
#include "maxc/Interpreter/Interpreter.h"
#include "maxc/Ops/Ops.h"
#include "maxc/Support/FileSystem.h"
#include "maxc/Support/JsonCheck.h"

#include <cstdlib>
#include <sys/stat.h>
#include <unistd.h>

using namespace maxc;
using namespace maxc::test;

TEST_CASE("check_json_structure: depth limit and duplicate keys with pointers", "[frontend][json]") {
  CHECK(check_json_structure(R"({"a": [1, {"b": 2}], "c": "d"})").empty());
  // Exactly at the limit is fine; one more level is not.
  std::string at = std::string(64, '[') + std::string(64, ']');
  CHECK(check_json_structure(at).empty());
  std::string over = std::string(65, '[') + std::string(65, ']');
  auto issues = check_json_structure(over);
  REQUIRE(issues.size() == 1);
  CHECK(issues[0].kind == JsonIssue::Kind::too_deep);
  CHECK(issues[0].path.size() == 64);
  // Very deep input: the scan is iterative and stops at the limit.
  std::string deep = R"({"x/y": [0, )" + std::string(1000000, '[') + std::string(1000000, ']') + "]}";
  issues = check_json_structure(deep, 3);
  REQUIRE(issues.size() == 1);
  CHECK(issues[0].pointer() == "/x~1y/1/0");
  // Every duplicate, in document order, nested too.
  issues = check_json_structure(R"({"a": 1, "b": [{"k": 1, "k": 2}], "a": 3})");
  REQUIRE(issues.size() == 2);
  CHECK(issues[0].kind == JsonIssue::Kind::duplicate_key);
  CHECK(issues[0].pointer() == "/b/0/k");
  CHECK(issues[1].pointer() == "/a");
  // Malformed JSON is left to the parser that reports line and column.
  CHECK(check_json_structure("{\"a\": ").empty());
}

TEST_CASE("open_for_reading refuses directories, FIFOs and devices without blocking", "[frontend][support]") {
  char dir_template[] = "/tmp/maxc-harden-XXXXXX";
  std::string dir = ::mkdtemp(dir_template);
  std::string fifo = dir + "/fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  MAXC_REQUIRE_ERROR(open_for_reading(fifo, "model file"), ErrorCode::FileNotReadable,
                     "the path is a FIFO (named pipe), not a regular file");
  MAXC_REQUIRE_ERROR(open_for_reading(dir), ErrorCode::FileNotReadable, "the path is a directory");
  MAXC_REQUIRE_ERROR(open_for_reading("/dev/null"), ErrorCode::FileNotReadable, "character device");
  MAXC_REQUIRE_ERROR(open_for_reading(dir + "/missing"), ErrorCode::FileNotReadable, "No such file");
  MAXC_REQUIRE_ERROR(read_file(""), ErrorCode::FileNotReadable, "empty");
  std::string file = dir + "/f.txt";
  write_file_atomically(file, std::string("hello"));
  CHECK(read_file(file) == "hello");
  InputFile f = open_for_reading(file);
  CHECK(f.size() == 5);
  char buf[3];
  MAXC_REQUIRE_ERROR(read_exactly(f.fd(), buf, 3, 4, file), ErrorCode::FileNotReadable, "ends early");
  ::unlink(file.c_str());
  ::unlink(fifo.c_str());
  ::rmdir(dir.c_str());
}

TEST_CASE("tensor byte sizes, byte-size parsing and the run memory budget", "[frontend]") {
  CHECK(tensor_byte_size(DType::f32, {2, 3}) == 24u);
  CHECK(tensor_byte_size(DType::f32, {0, INT64_MAX}) == 0u);
  CHECK(tensor_byte_size(DType::i64, {int64_t(1) << 31, int64_t(1) << 31}) == std::nullopt);
  CHECK(tensor_byte_size(DType::i8, {int64_t(1) << 62}) == uint64_t(1) << 62);
  CHECK(tensor_byte_size(DType::i8, {(int64_t(1) << 62) + 1}) == std::nullopt);
  CHECK(parse_byte_size("512M") == uint64_t(512) << 20);
  CHECK(parse_byte_size("8GiB") == uint64_t(8) << 30);
  CHECK(parse_byte_size("100") == 100u);
  CHECK(parse_byte_size("") == std::nullopt);
  CHECK(parse_byte_size("1X") == std::nullopt);
  CHECK(parse_byte_size("99999999999999999999") == std::nullopt);
  CHECK(parse_byte_size("8000000T") == std::nullopt);
  CHECK(default_max_memory() > 0);

  Graph g("g");
  ValueId x = g.add_input(TensorType(DType::f32, {Dim("n"), 4}), "x");
  g.add_node("relu", {x});
  g.set_outputs({g.nodes().back().results[0]});
  HostTensor in(DType::f32, {8, 4});
  check_run_memory(g, {in}, {}, 256); // 128 + 128 bytes
  MAXC_REQUIRE_ERROR(check_run_memory(g, {in}, {}, 255), ErrorCode::MemoryBudget, "together");
  MAXC_REQUIRE_ERROR(check_run_memory(g, {in}, {}, 100), ErrorCode::MemoryBudget,
                     "input 'x' (%0), f32[8,4], needs 128 bytes, more than the memory budget of 100");
  check_dim_names(g, {{"n", 3}});
  MAXC_REQUIRE_ERROR(check_dim_names(g, {{"m", 3}}), ErrorCode::InvalidArgument, "no symbolic dim named 'm' (its dims: n)");
}
