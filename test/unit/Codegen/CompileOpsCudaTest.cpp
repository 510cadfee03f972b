// CompileOpsTest's cases (same inputs and tolerances) through the "cuda"
// backend on a real NVIDIA GPU: the JIT-compiled host module of the CUDA
// artifact, PTX for the device's sm, libcuda.so.1 loaded at run time.
// Hidden ("[.]"): ctest and plain runs skip them; scripts/gpu-check runs
// `maxc-unit-tests "[cuda]"` on a machine with an NVIDIA GPU. Graphs the
// GPU backends reject at compile time (f64 transcendentals, pow: no device
// libm yet) are reported with a warning and checked on the interpreter.
#include "maxc/Codegen/GpuModelCompiler.h"
#include "maxc/Driver/Compile.h"
#include "maxc/Interpreter/Interpreter.h"
#include "maxc/Support/Error.h"

#include <catch2/catch.hpp>

namespace {
std::vector<maxc::HostTensor> run_cuda(const maxc::Graph &graph, const std::vector<maxc::HostTensor> &inputs) {
  // Small test shapes on the macro-tile kernels too (mma.sync from sm_80),
  // so the real-GPU run checks their lane layouts.
  maxc::codegen::NvidiaMacroTileThreshold every_gemm(0);
  try {
    return maxc::driver::run_on_host("cuda", graph, inputs, {});
  } catch (const maxc::Error &e) {
    if (std::string(e.what()).find("no device libm") == std::string::npos)
      throw;
    WARN("not on the GPU (rejected at compile time): " << e.what());
    return maxc::Interpreter::run(graph, inputs);
  }
}
} // namespace

#define MAXC_COMPILED_RUN(graph, inputs) run_cuda(graph, inputs)
#define MAXC_COMPILED_NAME(text) "cuda: " text
#define MAXC_COMPILED_TAGS "[.][cuda]"
#include "CompileOpsTest.cpp"
