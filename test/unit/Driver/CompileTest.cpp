// The compile pipeline: every step runs once per compile, in order, on
// every backend; failures change no output.
#include "TestUtil.h"

#include "maxc/Driver/Compile.h"
#include "maxc/Support/FileSystem.h"

#include <catch2/catch.hpp>

#include <map>

using namespace maxc;
using namespace maxc::driver;

namespace {

const char *kModel = R"({
  "maxc": 1, "name": "tiny",
  "inputs": [{"name": "x", "dtype": "f32", "shape": ["n", 8]}],
  "outputs": ["y"],
  "main": [{"t": ["tanh", "x"]}, {"y": ["softmax", "t", {"axis": -1}]}]
})";

std::map<std::string, int> step_counts(const CompileResult &result) {
  std::map<std::string, int> counts;
  for (const auto &[name, ms] : result.timer.passes())
    counts[name] += 1;
  return counts;
}

} // namespace

TEST_CASE("the pipeline runs each step once, on every backend", "[driver]") {
  test::TempDir dir;
  for (const std::string &backend : {"cpu", "amdgpu"}) {
    INFO(backend);
    CompileRequest request;
    request.model = dir.write("tiny.json", kModel);
    request.backend = backend;
    request.options.cpu = "";
    if (backend == "amdgpu")
      request.options.gpu = "gfx942";
    request.output = dir.file(backend + ".o");
    request.output_given = true;
    request.verify_reproducible = true;
    DiagnosticEngine diagnostics;
    CompileResult result;
    std::vector<std::string> seen;
    REQUIRE(compile(request, diagnostics, result, [&](const std::string &step) { seen.push_back(step); }));
    CHECK(seen == std::vector<std::string>{"validate", "load", "canonicalize", "decompose", "plan", "backend", "verify-reproducible",
                                           "artifacts", "write"});
    std::map<std::string, int> counts = step_counts(result);
    for (const std::string &step : seen)
      CHECK(counts[step] == 1);
    CHECK(counts["optimize"] == 1); // the backend's own steps: once (verify-reproducible times apart)
    CHECK(counts["emit obj"] == 1);
    CHECK(read_file(dir.file(backend + ".o")).substr(0, 4) == "\x7f" "ELF");
    CHECK(read_file(dir.file("tiny.manifest.json")).find("\"backend\": \"" + backend + "\"") != std::string::npos);
  }
}

TEST_CASE("a refused option stops the pipeline before anything is read or written", "[driver]") {
  test::TempDir dir;
  CompileRequest request;
  request.model = dir.write("tiny.json", kModel);
  request.backend = "amdgpu";
  request.options.gpu = "gfx942";
  request.options.external_weights = true;
  request.output = dir.file("t.o");
  request.output_given = true;
  DiagnosticEngine diagnostics;
  CompileResult result;
  CHECK_FALSE(compile(request, diagnostics, result));
  CHECK(step_counts(result).count("load") == 0);
  CHECK(!std::ifstream(dir.file("t.o")).good());
  request.backend = "tpu";
  DiagnosticEngine d2;
  CompileResult r2;
  CHECK_FALSE(compile(request, d2, r2));
}
