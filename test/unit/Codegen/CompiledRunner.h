// Runs a graph through the CPU code generator in-process (ORC JIT) and
// returns its outputs, for comparing compiled kernels with the interpreter.
#pragma once

#include "TestUtil.h"

#include "maxc/Codegen/CompiledRun.h"
#include "maxc/Codegen/Jit.h"
#include "maxc/Codegen/ModelCompiler.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <thread>

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

/// A two-thread parallel_for: even tasks here, odd ones on a second thread.
using TaskFn = void (*)(void *, int64_t);
inline void two_threads(void *ctx, int64_t count, TaskFn task) {
  std::thread other([&] {
    for (int64_t i = 1; i < count; i += 2)
      task(ctx, i);
  });
  for (int64_t i = 0; i < count; i += 2)
    task(ctx, i);
  other.join();
}

/// `graph` compiled once (ORC JIT, symbol prefix maxc_jit), run as often as
/// needed, at any bindings of its symbolic dims, on one thread or with the
/// GEMM panels through two_threads (maxc_jit_set_parallel_for).
class JitCompiledGraph {
public:
  explicit JitCompiledGraph(const Graph &graph) : graph_(graph) {
    auto context = std::make_unique<llvm::LLVMContext>();
    auto module = build_model_module(graph, "maxc_jit", *context);
    jit_ = std::make_unique<JitModule>(std::move(context), std::move(module), 2);
    set_pf_ = reinterpret_cast<void (*)(void (*)(void *, int64_t, TaskFn))>(jit_->lookup("maxc_jit_set_parallel_for"));
    run_ = reinterpret_cast<int32_t (*)(void *const *, const int64_t *, void *)>(jit_->lookup("maxc_jit_run_packed"));
    symbols_ = describe_interface(graph, "maxc_jit").symbols;
  }

  std::vector<HostTensor> run(const std::vector<HostTensor> &inputs, bool two) {
    DimBindings dims;
    bind_input_dims(graph_, inputs, dims);
    std::vector<HostTensor> outputs;
    for (ValueId id : graph_.output_ids())
      outputs.emplace_back(graph_.type_of(id).dtype, evaluate_shape(graph_.type_of(id).shape, dims));
    std::vector<void *> buffers;
    for (const HostTensor &x : inputs)
      buffers.push_back(const_cast<std::byte *>(x.data()));
    for (HostTensor &y : outputs)
      buffers.push_back(y.data());
    std::vector<int64_t> dim_values;
    for (const std::string &s : symbols_)
      dim_values.push_back(dims.at(s));
    set_pf_(two ? two_threads : nullptr);
    REQUIRE(run_(buffers.data(), dim_values.data(), nullptr) == 0); // null: the run allocates its workspace
    return outputs;
  }

private:
  const Graph &graph_;
  std::unique_ptr<JitModule> jit_;
  void (*set_pf_)(void (*)(void *, int64_t, TaskFn)) = nullptr;
  int32_t (*run_)(void *const *, const int64_t *, void *) = nullptr;
  std::vector<std::string> symbols_;
};

/// Runs `graph` compiled, its GEMM panels through two_threads.
inline std::vector<HostTensor> run_compiled_two_threads(const Graph &graph, const std::vector<HostTensor> &inputs) {
  return JitCompiledGraph(graph).run(inputs, true);
}

} // namespace maxc::test
