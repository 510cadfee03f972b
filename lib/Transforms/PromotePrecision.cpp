#include "maxc/Transforms/PromotePrecision.h"

#include "maxc/Ops/Ops.h"
#include "maxc/Realization/GraphRealizationContext.h"
#include "maxc/Transforms/Rewrite.h"

namespace maxc {

namespace {

bool low(DType d) { return d == DType::f16 || d == DType::bf16; }

TensorType widened(const TensorType &t) { return low(t.dtype) ? TensorType(DType::f32, t.shape) : t; }

HostTensor widened(const HostTensor &t) {
  HostTensor out(DType::f32, t.shape());
  float *dst = out.data_as<float>();
  for (int64_t i = 0, n = t.numel(); i < n; ++i) // exact: every f16/bf16 is an f32
    dst[i] = static_cast<float>(t.get_f64(i));
  return out;
}

bool has_low_values(const Graph &g) {
  for (size_t v = 0; v < g.num_values(); ++v)
    if (low(g.type_of(static_cast<ValueId>(v)).dtype))
      return true;
  for (const auto &[name, data] : g.constant_types())
    if (low(data.dtype()))
      return true;
  return false;
}

bool binds_dims(const Graph &g) {
  for (const Node &n : g.nodes())
    if (n.op == kBindDimOp)
      return true;
  return false;
}

/// `from` rebuilt into the empty `to` in f32. The root (`root`) keeps its
/// interface: 16-bit inputs are cast to f32 where they enter and 16-bit
/// outputs back where they leave; a body's signature is widened.
void promote(const Graph &from, Graph &to, bool root) {
  carry_symbols(from, to);
  GraphRealizationContext ctx(to);
  std::vector<Tensor> values(from.num_values());
  for (ValueId id : from.input_ids()) {
    const TensorType &t = from.value_info(id).type;
    ValueId in = to.add_input(root ? t : widened(t), from.value_info(id).name);
    values[id] = Tensor::from_graph_value(to.value(in));
  }
  for (const auto &[name, data] : from.constant_types()) {
    if (const HostTensor *source = from.transposed_source(name))
      to.add_transposed_constant(name, low(source->dtype()) ? widened(*source) : *source);
    else
      to.add_constant(name, low(data.dtype()) ? widened(from.constant(name)) : data);
  }
  if (root)
    for (ValueId id : from.input_ids())
      if (low(values[id].dtype()))
        values[id] = ops::cast(values[id], DType::f32);
  for (const Node &node : from.nodes()) {
    std::vector<ValueId> ids;
    for (ValueId v : node.operands)
      ids.push_back(values[v].value().id());
    Attrs attrs = node.attrs;
    for (const auto &[key, value] : node.attrs.values())
      if (const DType *d = std::get_if<DType>(&value); d && low(*d))
        attrs.set(key, DType::f32);
    if (node.op == "cast" && ids.size() == 1 && to.type_of(ids[0]).dtype == attrs.get_dtype("dtype")) {
      values[node.results[0]] = values[node.operands[0]]; // a cast the widening made an identity
      continue;
    }
    if (node.op == kBindDimOp) { // recorded: the symbol it defines moves to its new index
      NodeNameScope named(ctx, node.name);
      std::vector<Tensor> in;
      for (ValueId id : ids)
        in.push_back(Tensor::from_graph_value(to.value(id)));
      std::vector<Tensor> out = ctx.record(node.op, in, attrs);
      for (size_t r = 0; r < out.size(); ++r)
        values[node.results[r]] = out[r];
      continue;
    }
    std::vector<ValueId> results = to.add_node(node.op, ids, attrs, node.name);
    for (size_t r = 0; r < results.size(); ++r)
      values[node.results[r]] = Tensor::from_graph_value(to.value(results[r]));
  }
  std::vector<ValueId> outputs;
  for (ValueId id : from.output_ids()) {
    Tensor v = values[id];
    if (root && v.dtype() != from.type_of(id).dtype)
      v = ops::cast(v, from.type_of(id).dtype);
    outputs.push_back(v.value().id());
  }
  to.set_outputs(outputs, from.output_names());
}

} // namespace

std::unique_ptr<Graph> promote_low_precision(const Graph &graph) {
  bool any = has_low_values(graph);
  for (const auto &[name, sub] : graph.subgraphs())
    any = any || has_low_values(*sub);
  if (!any)
    return nullptr;
  // The rebuild adds and drops casts, moving nodes: the root's bind_dim
  // nodes are recorded again (their symbols move with them); a body's
  // would keep its old index in the root's table (not done: refused).
  for (const auto &[name, sub] : graph.subgraphs())
    if (binds_dims(*sub))
      return nullptr;
  auto out = std::make_unique<Graph>(graph.name());
  for (const Graph *sub : subgraphs_bodies_first(graph)) { // a call's inference looks its callee up
    auto body = std::make_shared<Graph>(sub->name());
    out->add_subgraph(body);
    promote(*sub, *body, false);
  }
  promote(graph, *out, true);
  return out;
}

} // namespace maxc
