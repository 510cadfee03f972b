// Runs a traced graph's GPU kernels for one arch through the host emulation
// (build_gpu_emulation_module, JIT-compiled): shared by the GPU kernel tests
// that pick an arch (GpuMatmulTest, GpuWaveReduceTest) and StateTest.
#pragma once

#include "TestUtil.h"

#include "maxc/Codegen/GpuModelCompiler.h"
#include "maxc/Codegen/Jit.h"
#include "maxc/Driver/Compile.h"
#include "maxc/Interpreter/Interpreter.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <catch2/catch.hpp>

namespace maxc::test {

/// `graph`'s GPU kernels for `arch` compiled once for the host emulation,
/// run as often as needed.
class EmulatedGraph {
public:
  EmulatedGraph(const Graph &graph, const std::string &arch) : graph_(graph) {
    driver::PlannedModel planned =
        driver::plan_model(graph, "maxc_jit", gpu_decompose_options(), gpu_plan_options()); // as amdgpu-emu
    symbols_ = planned.abi.symbols;
    auto context = std::make_unique<llvm::LLVMContext>();
    auto module = codegen::build_gpu_emulation_module(*planned.lowered, planned.abi.name, *context, arch, &planned.plans);
    jit_ = std::make_unique<JitModule>(std::move(context), std::move(module), 1);
    run_ = reinterpret_cast<int32_t (*)(void *const *, const int64_t *, void *)>(jit_->lookup("maxc_jit_run_packed"));
  }

  /// `dims` binds the symbols no input determines (a model state's
  /// length). The inputs' bytes are the (emulated device) buffers: a state
  /// buffer is updated in place.
  std::vector<HostTensor> run(const std::vector<HostTensor> &inputs, DimBindings dims = {}) {
    return execute(inputs, dims, nullptr);
  }

  /// The run's status (NAME_ERROR_*), whatever it is.
  int32_t run_status(const std::vector<HostTensor> &inputs) {
    int32_t status = 0;
    execute(inputs, {}, &status);
    return status;
  }

  /// The module's function `maxc_jit<suffix>` (a model with state: "_step", "_state_create"...).
  void *lookup(const std::string &suffix) const { return jit_->lookup("maxc_jit" + suffix); }

private:
  /// `status` null: the run must succeed; else the run's status goes there.
  std::vector<HostTensor> execute(const std::vector<HostTensor> &inputs, DimBindings dims, int32_t *status) {
    bind_input_dims(graph_, inputs, dims);
    std::vector<HostTensor> outputs;
    for (ValueId id : graph_.output_ids())
      outputs.emplace_back(graph_.type_of(id).dtype, evaluate_shape(graph_.type_of(id).shape, dims));
    std::vector<void *> buffers;
    for (const HostTensor &x : inputs)
      buffers.push_back(const_cast<std::byte *>(x.data()));
    for (HostTensor &y : outputs)
      buffers.push_back(y.data());
    std::vector<int64_t> values;
    for (const std::string &sym : symbols_)
      values.push_back(dims.at(sym));
    int32_t rc = run_(buffers.data(), values.empty() ? nullptr : values.data(), nullptr);
    if (status)
      *status = rc;
    else
      REQUIRE(rc == 0);
    return outputs;
  }

  const Graph &graph_;
  std::vector<std::string> symbols_;
  std::unique_ptr<JitModule> jit_;
  int32_t (*run_)(void *const *, const int64_t *, void *) = nullptr;
};

/// The graph's outputs through the emulated kernels of `arch`.
inline std::vector<HostTensor> run_emulated(const Graph &graph, const std::vector<HostTensor> &inputs,
                                            const std::string &arch) {
  return EmulatedGraph(graph, arch).run(inputs);
}

} // namespace maxc::test
