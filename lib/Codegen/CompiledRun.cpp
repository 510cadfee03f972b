#include "maxc/Codegen/CompiledRun.h"

#include "GpuEmulation.h"

#include "maxc/Codegen/Jit.h"
#include "maxc/Codegen/ModelCompiler.h"
#include "maxc/Interpreter/Interpreter.h"
#include "maxc/Support/Error.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <functional>

namespace maxc {

namespace {

using ModuleBuilder = std::function<std::unique_ptr<llvm::Module>(const Graph &, const std::string &, llvm::LLVMContext &)>;

/// JIT-compiles the module `build` makes and calls its maxc_jit_run_packed.
std::vector<HostTensor> run_jitted(const Graph &graph, const std::vector<HostTensor> &inputs, DimBindings dims,
                                   int opt_level, const ModuleBuilder &build) {
  bind_input_dims(graph, inputs, dims);
  auto context = std::make_unique<llvm::LLVMContext>();
  auto module = build(graph, "maxc_jit", *context);
  JitModule jit(std::move(context), std::move(module), opt_level);
  auto run = reinterpret_cast<int32_t (*)(void *const *, const int64_t *, void *)>(jit.lookup("maxc_jit_run_packed"));
  std::vector<HostTensor> outputs;
  for (ValueId id : graph.output_ids())
    outputs.emplace_back(graph.type_of(id).dtype, evaluate_shape(graph.type_of(id).shape, dims));
  std::vector<void *> buffers;
  for (const HostTensor &x : inputs)
    buffers.push_back(const_cast<std::byte *>(x.data())); // read only
  for (HostTensor &y : outputs)
    buffers.push_back(y.data());
  std::vector<int64_t> dim_values;
  for (const std::string &s : describe_interface(graph, "maxc_jit").symbols) {
    auto it = dims.find(s);
    if (it == dims.end())
      throw Error(ErrorCode::UnboundDim, "symbolic dim '" + s + "' has no value; pass --dim " + s + "=N");
    dim_values.push_back(it->second);
  }
  int32_t status = run(buffers.data(), dim_values.data(), nullptr);
  if (status != 0)
    throw Error(ErrorCode::InputMismatch, "the compiled model returned status " + std::to_string(status));
  return outputs;
}

} // namespace

std::vector<HostTensor> run_compiled_on_host(const Graph &graph, const std::vector<HostTensor> &inputs,
                                             DimBindings dims, int opt_level) {
  return run_jitted(graph, inputs, std::move(dims), opt_level,
                    [](const Graph &g, const std::string &name, llvm::LLVMContext &c) {
                      return build_model_module(g, name, c);
                    });
}

std::vector<HostTensor> run_gpu_emulated(const Graph &graph, const std::vector<HostTensor> &inputs, DimBindings dims,
                                         int opt_level) {
  return run_jitted(graph, inputs, std::move(dims), opt_level, codegen::build_gpu_emulation_module);
}

} // namespace maxc
