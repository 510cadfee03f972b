#include "maxc/Interpreter/Interpreter.h"

#include "maxc/Ops/OpRegistry.h"
#include "maxc/Support/Error.h"

namespace maxc {

void bind_input_dims(const Graph &graph, const std::vector<HostTensor> &inputs, DimBindings &bindings) {
  const auto &ids = graph.input_ids();
  if (inputs.size() != ids.size())
    throw Error(ErrorCode::InputMismatch, "graph '" + graph.name() + "' takes " + std::to_string(ids.size()) +
                                              " inputs, got " + std::to_string(inputs.size()));
  auto input_label = [&](size_t i) {
    const std::string &n = graph.value_info(ids[i]).name;
    return "input " + std::to_string(i) + (n.empty() ? "" : " '" + n + "'");
  };
  // Bare symbols bind first, so compound dims ("2*seq") can be checked after.
  for (size_t i = 0; i < ids.size(); ++i) {
    const TensorType &t = graph.type_of(ids[i]);
    const HostTensor &x = inputs[i];
    if (x.dtype() != t.dtype || x.rank() != t.rank())
      throw Error(ErrorCode::InputMismatch, input_label(i) + " must be " + t.to_string() + ", got " + describe(x));
    for (size_t d = 0; d < t.shape.size(); ++d) {
      const Dim &dim = t.shape[d];
      if (!dim.is_symbol())
        continue;
      auto [it, inserted] = bindings.emplace(dim.symbol(), x.shape()[d]);
      if (!inserted && it->second != x.shape()[d])
        throw Error(ErrorCode::InputMismatch, input_label(i) + ": dim " + std::to_string(d) + " ('" + dim.symbol() +
                                                  "') is " + std::to_string(x.shape()[d]) + " but '" + dim.symbol() +
                                                  "' is already " + std::to_string(it->second));
    }
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    const TensorType &t = graph.type_of(ids[i]);
    for (size_t d = 0; d < t.shape.size(); ++d) {
      int64_t expected = t.shape[d].evaluate(bindings);
      if (expected != inputs[i].shape()[d])
        throw Error(ErrorCode::InputMismatch, input_label(i) + " must be " + t.to_string() + ", got " +
                                                  describe(inputs[i]) + " (dim " + std::to_string(d) + ")");
    }
  }
}

void Interpreter::execute(const Graph &graph, std::vector<std::optional<HostTensor>> &env, DimBindings &dims,
                          size_t first_node) {
  env.resize(graph.num_values());
  // A body's input symbols bind from its operands, per call: a body with
  // dims of its own (CallBinding.h) takes new values each call, and a body
  // traced with its caller's types rebinds the same values.
  auto run_graph = [&dims](const Graph &sub, const std::vector<HostTensor> &args) {
    DimBindings local = dims;
    for (ValueId id : sub.input_ids())
      for (const Dim &d : sub.type_of(id).shape)
        if (d.is_symbol())
          local.erase(d.symbol());
    return Interpreter::run(sub, args, local);
  };
  const auto &nodes = graph.nodes();
  for (size_t n = first_node; n < nodes.size(); ++n) {
    const Node &node = nodes[n];
    try {
      std::vector<HostTensor> operands;
      for (ValueId id : node.operands) {
        if (!env[id])
          throw Error(ErrorCode::Internal, "operand %" + std::to_string(id) + " has not been computed");
        operands.push_back(*env[id]);
      }
      std::vector<TensorType> result_types;
      std::vector<std::vector<int64_t>> result_shapes;
      for (ValueId id : node.results) {
        result_types.push_back(graph.type_of(id));
        result_shapes.push_back(evaluate_shape(result_types.back().shape, dims));
      }
      const OpDef &def = OpRegistry::instance().get(node.op);
      if (!def.reference)
        throw Error(ErrorCode::Internal, "op '" + node.op + "' has no reference implementation");
      if (def.has(OpTrait::aliases_operand) && graph.value_info(node.operands[0]).producer >= 0)
        throw Error(ErrorCode::InvalidGraph, node.op + ": operand 0 must be a state buffer (an input of the graph), "
                                                       "not a computed value");
      ReferenceContext ctx{operands, node.attrs, result_types, result_shapes, dims, graph, run_graph};
      std::vector<HostTensor> results = def.reference(ctx);
      if (results.size() != node.results.size())
        throw Error(ErrorCode::Internal, "reference kernel returned " + std::to_string(results.size()) +
                                             " results, expected " + std::to_string(node.results.size()));
      if (def.has(OpTrait::defines_symbol)) // later shapes read the symbol
        dims[defined_symbol(node)] = results[0].get_i64(0);
      for (size_t r = 0; r < results.size(); ++r) {
        if (results[r].shape() != result_shapes[r] || results[r].dtype() != result_types[r].dtype)
          throw Error(ErrorCode::Internal, "reference kernel result " + std::to_string(r) + " is " +
                                               describe(results[r]) + ", the graph says " +
                                               result_types[r].to_string());
        env[node.results[r]] = std::move(results[r]);
      }
    } catch (const Error &e) {
      if (!e.location().empty())
        throw;
      throw Error(e.code(), e.message(), describe_node(graph, n));
    }
  }
}

std::vector<HostTensor> Interpreter::run(const Graph &graph, const std::vector<HostTensor> &inputs,
                                         DimBindings dims) {
  bind_input_dims(graph, inputs, dims);
  std::vector<std::optional<HostTensor>> env(graph.num_values());
  for (size_t i = 0; i < inputs.size(); ++i)
    env[graph.input_ids()[i]] = inputs[i];
  execute(graph, env, dims);
  std::vector<HostTensor> out;
  for (ValueId id : graph.output_ids())
    out.push_back(*env.at(id));
  return out;
}

} // namespace maxc
