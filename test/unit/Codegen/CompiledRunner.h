// Runs a graph through the CPU code generator in-process (ORC JIT) and
// returns its outputs, for comparing compiled kernels with the interpreter.
#pragma once

#include "TestUtil.h"

#include "maxc/Codegen/CompiledRun.h"
#include "maxc/Codegen/Jit.h"
#include "maxc/Codegen/ModelCompiler.h"
#include "maxc/Transforms/PromotePrecision.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/TargetParser/Host.h>

#include <cstring>
#include <thread>

namespace maxc::test {

/// What the CPU backend computes `graph` as, on the interpreter: f16/bf16
/// in f32 (its precision policy, Transforms/PromotePrecision.h), the
/// reference CPU results are compared with.
inline std::vector<HostTensor> cpu_reference(const Graph &graph, const std::vector<HostTensor> &inputs) {
  std::unique_ptr<Graph> promoted = promote_low_precision(graph);
  return Interpreter::run(promoted ? *promoted : graph, inputs);
}

inline std::vector<HostTensor> run_compiled(const Graph &graph, const std::vector<HostTensor> &inputs,
                                            int opt_level = 2) {
  return run_compiled_on_host(graph, inputs, {}, opt_level);
}

/// Traces `build`, then requires compiled results to match the interpreter.
inline void check_compiled(const std::vector<HostTensor> &inputs, const BuildFn &build, double rtol = 1e-5,
                           double atol = 1e-6) {
  std::unique_ptr<Graph> traced = trace_graph(types_of(inputs), build);
  const Graph &graph = *traced;
  auto expected = cpu_reference(graph, inputs);
  auto actual = run_compiled(graph, inputs);
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("output " << i);
    MAXC_REQUIRE_CLOSE(actual[i], expected[i], rtol, atol);
  }
}

/// A parallel_for that records the task counts it was given (task_counts())
/// and runs the tasks backwards: no task may depend on an earlier one.
inline std::vector<int64_t> &task_counts() {
  static std::vector<int64_t> counts;
  return counts;
}
using TaskFn = void (*)(void *, int64_t);
inline void counting_parallel_for(void *ctx, int64_t count, TaskFn task) {
  task_counts().push_back(count);
  for (int64_t i = count; i-- > 0;)
    task(ctx, i);
}

/// A two-thread parallel_for: even tasks here, odd ones on a second thread.
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
/// needed, at any bindings of its symbolic dims: on one thread, with its
/// tasks through two_threads (maxc_jit_set_parallel_for), or on n threads of
/// the artifact's own pool (maxc_jit_set_num_threads).
class JitCompiledGraph {
public:
  /// `cpu` other than "native": kernels and code for that CPU (of the host's
  /// architecture, runnable here: "haswell" for the 8-lane kernels).
  /// `lanes` other than 0: kernels of that width and the integer GEMM's
  /// `int8_dot` (Codegen/Target.h), in code for `cpu` (which must have them).
  explicit JitCompiledGraph(const Graph &graph, const std::string &cpu = "native", unsigned lanes = 0,
                            int int8_dot = -1)
      : graph_(graph) {
    auto context = std::make_unique<llvm::LLVMContext>();
    if (cpu != "native" && lanes == 0) {
      CpuTarget target = resolve_cpu_target(llvm::sys::getProcessTriple(), cpu, 2);
      lanes = cpu_vector_lanes(target);
      int8_dot = static_cast<int>(cpu_int8_dot(target));
    }
    auto module = build_model_module(graph, "maxc_jit", *context, lanes, int8_dot);
    jit_ = std::make_unique<JitModule>(std::move(context), std::move(module), 2, cpu);
    set_pf_ = reinterpret_cast<void (*)(void (*)(void *, int64_t, TaskFn))>(jit_->lookup("maxc_jit_set_parallel_for"));
    set_threads_ = reinterpret_cast<void (*)(int32_t)>(jit_->lookup("maxc_jit_set_num_threads"));
    run_ = reinterpret_cast<int32_t (*)(void *const *, const int64_t *, void *)>(jit_->lookup("maxc_jit_run_packed"));
    symbols_ = describe_interface(graph, "maxc_jit").symbols;
  }
  // The pool's workers run code of the JIT: joined before it goes.
  ~JitCompiledGraph() { set_threads_(1); }
  JitCompiledGraph(const JitCompiledGraph &) = delete;
  JitCompiledGraph &operator=(const JitCompiledGraph &) = delete;

  std::vector<HostTensor> run(const std::vector<HostTensor> &inputs, bool two) {
    return run_through(inputs, two ? two_threads : nullptr);
  }

  /// One thread, with `dims` binding the symbols no input determines (a
  /// model state's length). The inputs' bytes are the buffers: a state
  /// buffer is updated in place.
  std::vector<HostTensor> run_dims(const std::vector<HostTensor> &inputs, const DimBindings &dims) {
    set_threads_(1);
    set_pf_(nullptr);
    return execute(inputs, dims);
  }

  /// The artifact's function `maxc_jit<suffix>` ("_step", "_state_create"...).
  void *lookup(const std::string &suffix) const { return jit_->lookup("maxc_jit" + suffix); }

  /// Through the caller's `parallel_for` (null: one thread).
  std::vector<HostTensor> run_through(const std::vector<HostTensor> &inputs, void (*parallel_for)(void *, int64_t, TaskFn)) {
    set_threads_(1);
    set_pf_(parallel_for);
    return execute(inputs);
  }

  /// On `threads` threads of the artifact's pool.
  std::vector<HostTensor> run_threads(const std::vector<HostTensor> &inputs, int threads) {
    set_pf_(nullptr);
    set_threads_(threads);
    return execute(inputs);
  }

  /// One thread; the run's status (NAME_ERROR_*), whatever it is.
  int32_t run_status(const std::vector<HostTensor> &inputs) {
    set_threads_(1);
    set_pf_(nullptr);
    int32_t status = 0;
    execute(inputs, {}, &status);
    return status;
  }

private:
  /// `status` null: the run must succeed; else the run's status goes there.
  std::vector<HostTensor> execute(const std::vector<HostTensor> &inputs, DimBindings dims = {},
                                  int32_t *status = nullptr) {
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
    int32_t rc = run_(buffers.data(), dim_values.data(), nullptr); // null: the run allocates its workspace
    if (status)
      *status = rc;
    else
      REQUIRE(rc == 0);
    return outputs;
  }

  const Graph &graph_;
  std::unique_ptr<JitModule> jit_;
  void (*set_pf_)(void (*)(void *, int64_t, TaskFn)) = nullptr;
  void (*set_threads_)(int32_t) = nullptr;
  int32_t (*run_)(void *const *, const int64_t *, void *) = nullptr;
  std::vector<std::string> symbols_;
};

/// Outputs of two runs that must be the same bits ("" if they are).
/// The number of functions in `graph`'s model module (compiled for this
/// host, symbol prefix "m") whose name satisfies `pred`.
template <typename Pred> size_t count_model_functions(const Graph &graph, Pred pred) {
  llvm::LLVMContext context;
  auto module = build_model_module(graph, "m", context);
  size_t n = 0;
  for (const llvm::Function &f : *module)
    n += pred(f.getName()) ? 1 : 0;
  return n;
}

inline std::string bitwise_mismatch(const std::vector<HostTensor> &a, const std::vector<HostTensor> &b) {
  if (a.size() != b.size())
    return "different output counts";
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].nbytes() != b[i].nbytes() || std::memcmp(a[i].data(), b[i].data(), a[i].nbytes()) != 0)
      return "output " + std::to_string(i) + " differs";
  return "";
}

/// `graph` compiled once and run on 1, 2 and 3 threads of the artifact's
/// pool and through two_threads: the runs must give the same bits; returns
/// the one-thread outputs.
inline std::vector<HostTensor> run_compiled_threads(const Graph &graph, const std::vector<HostTensor> &inputs,
                                                    const std::string &cpu = "native") {
  JitCompiledGraph compiled(graph, cpu);
  std::vector<HostTensor> one = compiled.run_threads(inputs, 1);
  for (int threads : {2, 3}) {
    std::string mismatch = bitwise_mismatch(compiled.run_threads(inputs, threads), one);
    INFO(threads << " threads: " << mismatch);
    REQUIRE(mismatch.empty());
  }
  REQUIRE(bitwise_mismatch(compiled.run(inputs, true), one).empty());
  return one;
}

/// `build` traced on `inputs`, compiled, run on 1, 2 and 3 threads (same
/// bits, run_compiled_threads) and checked against the interpreter; returns
/// the traced graph and the one-thread outputs.
inline std::pair<std::unique_ptr<Graph>, std::vector<HostTensor>>
check_threads(const std::vector<HostTensor> &inputs, const BuildFn &build, double rtol, double atol) {
  std::unique_ptr<Graph> graph = trace_graph(types_of(inputs), build);
  std::vector<HostTensor> expected = Interpreter::run(*graph, inputs);
  std::vector<HostTensor> actual = run_compiled_threads(*graph, inputs);
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("output " << i);
    MAXC_REQUIRE_CLOSE(actual[i], expected[i], rtol, atol);
  }
  return {std::move(graph), std::move(actual)};
}

/// Runs `graph` compiled, its GEMM panels through two_threads.
inline std::vector<HostTensor> run_compiled_two_threads(const Graph &graph, const std::vector<HostTensor> &inputs) {
  return JitCompiledGraph(graph).run(inputs, true);
}

} // namespace maxc::test
