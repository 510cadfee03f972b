#include "maxc/Transforms/PromotePrecision.h"

#include "maxc/Ops/OpRegistry.h"
#include "maxc/Ops/Ops.h"
#include "maxc/Realization/GraphRealizationContext.h"
#include "maxc/Transforms/Rewrite.h"

#include <map>
#include <set>

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

bool is_buffer_op(const std::string &op) { return op == "buffer_prefix" || op == "buffer_append"; }

/// Per body (by name): which inputs stay 16-bit — state buffers (operand 0
/// of buffer_prefix / buffer_append, or passed on to such a body input):
/// they are updated in place, so a widened copy would lose the writes.
using KeptInputs = std::map<std::string, std::set<size_t>>;

std::set<size_t> kept_inputs(const Graph &g, const Graph &root, const KeptInputs &kept) {
  std::set<size_t> out;
  auto mark = [&](ValueId v) {
    const ValueInfo &info = g.value_info(v);
    if (info.producer < 0 && low(info.type.dtype))
      out.insert(info.index);
  };
  for (const Node &n : g.nodes()) {
    if (is_buffer_op(n.op) && !n.operands.empty())
      mark(n.operands[0]);
    if (const Graph *callee = is_call(n) ? call_body(root, n) : nullptr)
      if (auto it = kept.find(callee->name()); it != kept.end())
        for (size_t i : it->second)
          if (i < n.operands.size())
            mark(n.operands[i]);
  }
  return out;
}

/// `from` rebuilt into the empty `to` in f32. The root (`root`) keeps its
/// interface: 16-bit inputs are cast to f32 where they enter and 16-bit
/// outputs back where they leave; a body's signature is widened. State
/// buffers stay 16-bit (the root's ModelState buffers, a body's `keep`
/// inputs): their buffer ops run on the 16-bit buffer, the rows appended
/// cast to it, the views read cast to f32 for the ops that read them.
void promote(const Graph &from, Graph &to, bool root, const std::set<size_t> &keep, const KeptInputs &kept) {
  carry_symbols(from, to);
  GraphRealizationContext ctx(to);
  // Per value: its f32 form (what ops read; made on demand from the 16-bit
  // one) and, for a value kept 16-bit, that.
  std::vector<Tensor> values(from.num_values()), narrow(from.num_values());
  std::set<std::string> state;
  if (root && from.symbol_table().model_state())
    for (const std::string &b : from.symbol_table().model_state()->buffers)
      state.insert(b);
  for (ValueId id : from.input_ids()) {
    const ValueInfo &info = from.value_info(id);
    bool kept16 = low(info.type.dtype) && (root ? state.count(info.name) != 0 : keep.count(info.index) != 0);
    ValueId in = to.add_input(root || kept16 ? info.type : widened(info.type), info.name);
    (kept16 ? narrow : values)[id] = Tensor::from_graph_value(to.value(in));
  }
  for (const auto &[name, data] : from.constant_types()) {
    if (const HostTensor *source = from.transposed_source(name))
      to.add_transposed_constant(name, low(source->dtype()) ? widened(*source) : *source);
    else
      to.add_constant(name, low(data.dtype()) ? widened(from.constant(name)) : data);
  }
  if (root)
    for (ValueId id : from.input_ids())
      if (!values[id].is_null() && low(values[id].dtype()))
        values[id] = ops::cast(values[id], DType::f32);
  auto wide = [&](ValueId v) -> const Tensor & {
    if (values[v].is_null())
      values[v] = ops::cast(narrow[v], DType::f32);
    return values[v];
  };
  auto low_form = [&](ValueId v, DType d) -> Tensor {
    return !narrow[v].is_null() ? narrow[v] : ops::cast(wide(v), d);
  };
  for (const Node &node : from.nodes()) {
    const Graph *callee = is_call(node) ? call_body(*from.root(), node) : nullptr;
    const std::set<size_t> *callee_keeps = nullptr;
    if (callee)
      if (auto it = kept.find(callee->name()); it != kept.end())
        callee_keeps = &it->second;
    bool buffer16 = is_buffer_op(node.op) && !node.operands.empty() && low(from.type_of(node.operands[0]).dtype);
    std::vector<ValueId> ids;
    for (size_t i = 0; i < node.operands.size(); ++i) {
      ValueId v = node.operands[i];
      DType d = from.type_of(v).dtype;
      // (a 16-bit buffer op's operands all: the buffer, and the rows appended to it)
      bool keep16 = low(d) && (buffer16 || (callee_keeps && callee_keeps->count(i)));
      ids.push_back((keep16 ? low_form(v, d) : wide(v)).value().id());
    }
    Attrs attrs = node.attrs;
    for (const auto &[key, value] : node.attrs.values())
      if (const DType *d = std::get_if<DType>(&value); d && low(*d))
        attrs.set(key, DType::f32);
    if (node.op == "cast" && ids.size() == 1 && to.type_of(ids[0]).dtype == attrs.get_dtype("dtype")) {
      values[node.results[0]] = wide(node.operands[0]); // a cast the widening made an identity
      continue;
    }
    std::vector<Tensor> results;
    if (node.op == kBindDimOp) { // recorded: the symbol it defines moves to its new index
      NodeNameScope named(ctx, node.name);
      std::vector<Tensor> in;
      for (ValueId id : ids)
        in.push_back(Tensor::from_graph_value(to.value(id)));
      results = ctx.record(node.op, in, attrs);
    } else {
      for (ValueId r : to.add_node(node.op, ids, attrs, node.name))
        results.push_back(Tensor::from_graph_value(to.value(r)));
    }
    for (size_t r = 0; r < results.size(); ++r)
      (low(results[r].dtype()) ? narrow : values)[node.results[r]] = results[r];
  }
  std::vector<ValueId> outputs;
  for (ValueId id : from.output_ids()) {
    DType d = from.type_of(id).dtype;
    Tensor v = root && low(d) && !narrow[id].is_null() ? narrow[id] : wide(id);
    if (root && v.dtype() != d)
      v = ops::cast(v, d);
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
  // The kept inputs of each body, callees first (a body passes a buffer on).
  KeptInputs kept;
  std::vector<const Graph *> bodies = subgraphs_bodies_first(graph);
  for (const Graph *sub : bodies)
    kept[sub->name()] = kept_inputs(*sub, graph, kept);
  auto out = std::make_unique<Graph>(graph.name());
  for (const Graph *sub : bodies) { // a call's inference looks its callee up
    auto body = std::make_shared<Graph>(sub->name());
    out->add_subgraph(body);
    promote(*sub, *body, false, kept[sub->name()], kept);
  }
  promote(graph, *out, true, {}, kept);
  return out;
}

} // namespace maxc
