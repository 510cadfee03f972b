// docs/ops.md is generated from the op registry (ops_markdown()); this test
// keeps the checked-in file in sync. With MAXC_UPDATE_DOCS=1 it rewrites the
// file instead of failing.
#include "TestUtil.h"

#include "maxc/Frontend/OpDocs.h"
#include "maxc/Ops/OpRegistry.h"
#include "maxc/Support/FileSystem.h"

#include <cstdlib>

using namespace maxc;

TEST_CASE("docs/ops.md matches the op registry", "[frontend][docs]") {
  const std::string source = MAXC_SOURCE_DIR;
  const std::string path = source + "/docs/ops.md";
  const std::string expected = ops_markdown();
  if (const char *update = std::getenv("MAXC_UPDATE_DOCS"); update && std::string(update) == "1")
    write_file_atomically(path, expected);
  std::string actual;
  try {
    actual = read_file(path);
  } catch (const Error &) {
  }
  INFO("docs/ops.md is out of date: regenerate it with MAXC_UPDATE_DOCS=1 build/test/maxc-unit-tests \"[docs]\"");
  CHECK(actual == expected);
}

TEST_CASE("every op has a documented signature with measured dtypes", "[frontend][docs]") {
  for (const OpDef *def : OpRegistry::instance().all()) {
    INFO(def->name);
    std::string sig = op_signature(def->name);
    CHECK(sig.rfind(def->name + "(", 0) == 0);
  }
  CHECK(op_signature("embedding") == "embedding(table: T[V, D], ids: I[...]) -> T[..., D]   T: any dtype; I: i8 i32 i64 u8 i16 u16 u32 u64");
  CHECK(op_signature("exp").find("T: f16 bf16 f32 f64") != std::string::npos);
  CHECK(op_signature("lt").find("-> bool[") != std::string::npos);
}
