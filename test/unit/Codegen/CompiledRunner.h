// Runs a graph through the CPU code generator in-process (ORC JIT) and
// returns its outputs, for comparing compiled kernels with the interpreter.
#pragma once

#include "TestUtil.h"

#include "maxc/Codegen/Jit.h"
#include "maxc/Codegen/ModelCompiler.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

namespace maxc::test {

inline std::vector<HostTensor> run_compiled(const Graph &graph, const std::vector<HostTensor> &inputs,
                                            int opt_level = 2) {
  auto context = std::make_unique<llvm::LLVMContext>();
  auto module = build_model_module(graph, "m", *context);
  JitModule jit(std::move(context), std::move(module), opt_level);
  auto run = reinterpret_cast<int32_t (*)(void *const *, const int64_t *, void *)>(jit.lookup("m_run_packed"));
  DimBindings dims;
  bind_input_dims(graph, inputs, dims);
  std::vector<HostTensor> outputs;
  for (ValueId id : graph.output_ids())
    outputs.emplace_back(graph.type_of(id).dtype, evaluate_shape(graph.type_of(id).shape, dims));
  std::vector<void *> buffers;
  for (const HostTensor &x : inputs)
    buffers.push_back(const_cast<std::byte *>(x.data()));
  for (HostTensor &y : outputs)
    buffers.push_back(y.data());
  std::vector<int64_t> dim_values;
  ModelInterface m = describe_interface(graph, "m");
  for (const std::string &s : m.symbols)
    dim_values.push_back(dims.at(s));
  int32_t status = run(buffers.data(), dim_values.data(), nullptr);
  REQUIRE(status == 0);
  return outputs;
}

/// Traces `build`, then requires compiled results to match the interpreter.
inline void check_compiled(const std::vector<HostTensor> &inputs, const BuildFn &build, double rtol = 1e-5,
                           double atol = 1e-6) {
  std::vector<TensorType> types;
  for (const HostTensor &x : inputs)
    types.emplace_back(x.dtype(), make_shape(x.shape()));
  Graph graph("g", types);
  {
    GraphRealizationContext ctx(graph);
    std::vector<Tensor> args;
    for (const Value &v : graph.inputs())
      args.push_back(Tensor::from_graph_value(v));
    std::vector<Value> outs;
    for (const Tensor &t : build(args))
      outs.push_back(t.value());
    graph.output(outs);
  }
  auto expected = Interpreter::run(graph, inputs);
  auto actual = run_compiled(graph, inputs);
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("output " << i);
    MAXC_REQUIRE_CLOSE(actual[i], expected[i], rtol, atol);
  }
}

} // namespace maxc::test
