// Runs a graph through the CPU code generator in-process (ORC JIT) and
// returns its outputs, for comparing compiled kernels with the interpreter.
#pragma once

#include "TestUtil.h"

#include "maxc/Codegen/CompiledRun.h"

namespace maxc::test {

inline std::vector<HostTensor> run_compiled(const Graph &graph, const std::vector<HostTensor> &inputs,
                                            int opt_level = 2) {
  return run_compiled_on_host(graph, inputs, {}, opt_level);
}

/// Traces `build`, then requires compiled results to match the interpreter.
inline void check_compiled(const std::vector<HostTensor> &inputs, const BuildFn &build, double rtol = 1e-5,
                           double atol = 1e-6) {
  std::unique_ptr<Graph> traced = trace_graph(types_of(inputs), build);
  const Graph &graph = *traced;
  auto expected = Interpreter::run(graph, inputs);
  auto actual = run_compiled(graph, inputs);
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("output " << i);
    MAXC_REQUIRE_CLOSE(actual[i], expected[i], rtol, atol);
  }
}

} // namespace maxc::test
