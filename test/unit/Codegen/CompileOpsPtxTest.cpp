// CompileOpsTest's graphs through the "cuda" backend's compiler, no GPU
// needed: every graph must compile to PTX for sm_90 (and pass ptxas where it
// is installed at test time). This catches, in CI, what LLVM's NVPTX backend
// cannot select (an f32 sin once aborted the whole compile: "Cannot select
// fsin"), which the values-on-a-real-GPU tests ([cuda], scripts/gpu-check)
// only see where a GPU is. Values here come from the interpreter: their
// comparison is the [cuda] variant's job. Graphs the GPU backends reject at
// compile time with a clear error (f64 transcendentals, pow: no device libm)
// are accepted as rejected.
#include "maxc/Driver/Compile.h"
#include "maxc/Interpreter/Interpreter.h"
#include "maxc/Support/Error.h"

#include <catch2/catch.hpp>

namespace {
std::vector<maxc::HostTensor> compile_ptx(const maxc::Graph &graph, const std::vector<maxc::HostTensor> &inputs) {
  using namespace maxc::driver;
  const Backend *cuda = find_backend("cuda");
  REQUIRE(cuda);
  PlannedModel planned = plan_model(graph, "maxc_ptx", cuda->decompose_options(), cuda->plan_options());
  BackendOptions options;
  options.gpu = "sm_90";
  options.jobs = 1;
  maxc::PassTimer timer;
  try {
    BackendOutput out = cuda->compile(planned, options, {"ptx"}, timer);
    bool has_ptx = false;
    for (const auto &[kind, bytes] : out.artifacts)
      has_ptx = has_ptx || (kind.rfind("ptx", 0) == 0 && bytes.size() > 0);
    CHECK(has_ptx);
  } catch (const maxc::Error &e) {
    if (std::string(e.what()).find("no device libm") == std::string::npos)
      throw;
  }
  return maxc::Interpreter::run(graph, inputs);
}
} // namespace

#define MAXC_COMPILED_RUN(graph, inputs) compile_ptx(graph, inputs)
#define MAXC_COMPILED_NAME(text) "ptx: " text
#define MAXC_COMPILED_TAGS "[codegen][ptx]"
#include "CompileOpsTest.cpp"
