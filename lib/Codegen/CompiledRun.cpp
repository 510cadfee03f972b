#include "maxc/Codegen/CompiledRun.h"

#include "maxc/Codegen/Jit.h"
#include "maxc/Codegen/ModelCompiler.h"
#include "maxc/Interpreter/Interpreter.h"
#include "maxc/Support/Error.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

namespace maxc {

std::vector<HostTensor> run_compiled_on_host(const Graph &graph, const std::vector<HostTensor> &inputs,
                                             DimBindings dims, int opt_level) {
  bind_input_dims(graph, inputs, dims);
  auto context = std::make_unique<llvm::LLVMContext>();
  auto module = build_model_module(graph, "maxc_jit", *context);
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

} // namespace maxc
