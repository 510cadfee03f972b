#include "maxc/Realization/GraphRealizationContext.h"

#include "maxc/Support/Error.h"

namespace maxc {

GraphRealizationContext::GraphRealizationContext(Graph &graph, std::vector<Tensor> signal_buffers,
                                                 std::string prefix)
    : graph_(&graph), signal_buffers_(std::move(signal_buffers)), prefix_(std::move(prefix)),
      owned_cache_(std::make_unique<SubgraphCache>()),
      owned_out_defs_(std::make_unique<std::map<std::string, TreeDef>>()) {
  // The root trace arms the dedup table.
  cache_ = owned_cache_.get();
  out_defs_ = owned_out_defs_.get();
}

GraphRealizationContext::GraphRealizationContext(Graph &graph, GraphRealizationContext &root, BodyTag)
    : graph_(&graph), owned_out_defs_(std::make_unique<std::map<std::string, TreeDef>>()), root_(&root) {
  // Body contexts have no cache: nested calls inline.
  out_defs_ = owned_out_defs_.get();
  // The body resolves the bodies of conditionals in it from the root.
  graph.attach_root(root.graph());
}

GraphRealizationContext::~GraphRealizationContext() = default;

void GraphRealizationContext::realize(const Tensor &) {
  throw RealizationError("a GraphRealizationContext cannot realize tensors: it records a graph for "
                         "ahead-of-time compilation (graph '" + graph_->name() + "')");
}

void GraphRealizationContext::realize_all() { realize(Tensor()); }

Tensor GraphRealizationContext::add_source(const Tensor &tensor, const std::string &name) {
  if (tensor.is_null() || !tensor.is_realized())
    throw Error(ErrorCode::InvalidArgument, "add_source: expects a realized tensor");
  std::string base = name.empty() ? tensor.name() : name;
  if (base.empty())
    base = "const" + std::to_string(anonymous_constants_++);
  std::string stored = graph_->add_constant(qualify(base), tensor.host());
  ValueId id = graph_->add_node("constant", {}, {{"name", stored}}, stored).front();
  return Tensor::make_unrealized(this, {graph_->value(id)});
}

Tensor GraphRealizationContext::add_transposed_source(const HostTensor &source, const std::string &name) {
  std::string stored = graph_->add_transposed_constant(qualify(name), source);
  ValueId id = graph_->add_node("constant", {}, {{"name", stored}}, stored).front();
  return Tensor::make_unrealized(this, {graph_->value(id)});
}

Tensor GraphRealizationContext::add_mutable_source(const Tensor &tensor, const std::string &name) {
  return add_source(tensor, name);
}

Tensor GraphRealizationContext::create_unrealized(const std::vector<Value> &values,
                                                  const std::vector<DeviceRef> &mapping) {
  for (const Value &v : values)
    if (v.graph() != graph_)
      throw Error(ErrorCode::ForeignValue, "create_unrealized: a value belongs to another graph");
  return Tensor::make_unrealized(this, values, mapping);
}

Value GraphRealizationContext::to_value(const Tensor &tensor, size_t shard) {
  if (tensor.is_null())
    throw Error(ErrorCode::InvalidArgument, "use of a null Tensor");
  if (tensor.is_realized())
    return add_source(tensor).value(); // realized tensors from outside become constants
  if (tensor.context() != this)
    throw Error(ErrorCode::ForeignValue,
                "tensor was recorded in another realization context (graph '" +
                    (tensor.values().front().graph() ? tensor.values().front().graph()->name() : std::string("?")) +
                    "'); pass it into a subgraph as an argument instead of capturing it");
  const auto &values = tensor.values();
  return values.size() == 1 ? values[0] : values.at(shard);
}

std::vector<Tensor> GraphRealizationContext::record(const std::string &op, const std::vector<Tensor> &operands,
                                                    const Attrs &attrs) {
  // A sharded operand makes the op run once per shard; all sharded operands
  // must agree on the shard count, unsharded ones are reused by every shard.
  size_t shards = 1;
  const Tensor *sharded = nullptr;
  for (const Tensor &t : operands) {
    if (!t.is_null() && !t.is_realized() && t.is_sharded()) {
      if (shards != 1 && t.values().size() != shards)
        throw Error(ErrorCode::ShapeMismatch, op + ": operands are sharded " + std::to_string(shards) + " and " +
                                                  std::to_string(t.values().size()) + " ways");
      shards = t.values().size();
      sharded = &t;
    }
  }
  std::vector<std::vector<Value>> per_result;
  for (size_t s = 0; s < shards; ++s) {
    std::vector<ValueId> ids;
    for (const Tensor &t : operands)
      ids.push_back(to_value(t, s).id());
    std::vector<ValueId> results = graph_->add_node(op, ids, attrs, node_name_);
    if (op == kBindDimOp) // however recorded (bind_dim, a model file's statement)
      declare_defined_symbol(graph_->nodes().back());
    per_result.resize(results.size());
    for (size_t r = 0; r < results.size(); ++r)
      per_result[r].push_back(graph_->value(results[r]));
  }
  std::vector<Tensor> out;
  for (auto &values : per_result)
    out.push_back(Tensor::make_unrealized(this, values, sharded ? sharded->device_mapping()
                                                                : std::vector<DeviceRef>{}));
  return out;
}

TensorTree GraphRealizationContext::call(const char *key_or_null, const SubgraphBody &body,
                                         const std::vector<Tensor> &args, const NamedTensors &params) {
  CallOptions options;
  if (key_or_null)
    options.key = key_or_null;
  return call(options, body, args, params);
}

TensorTree GraphRealizationContext::call_inline(const CallOptions &options, const SubgraphBody &body,
                                                const std::vector<Tensor> &args, const NamedTensors &params) {
  // Inline: the body records straight into this graph, under the instance's
  // prefix; restore the prefix even if the body throws.
  std::string saved = prefix_;
  prefix_ = qualify(options.instance);
  struct Restore {
    std::string &prefix;
    std::string saved;
    ~Restore() { prefix = saved; }
  } restore{prefix_, saved};
  NamedTensors local;
  for (const auto &[name, t] : params)
    local[name] = t.is_realized() ? add_source(t, name) : t;
  return body(*this, args, local);
}

TensorTree GraphRealizationContext::call(const CallOptions &options, const SubgraphBody &body,
                                         const std::vector<Tensor> &args, const NamedTensors &params) {
  if (!cache_)
    return call_inline(options, body, args, params);

  // Operands: arguments, then parameters in name order (qualified constants).
  std::string instance = qualify(options.instance);
  std::vector<ValueId> operands;
  std::vector<TensorType> input_types;
  std::vector<std::string> input_names;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].is_null() && !args[i].is_realized() && args[i].is_sharded())
      throw Error(ErrorCode::InvalidArgument, "subgraph call: sharded arguments are not supported");
    Value v = to_value(args[i], 0);
    operands.push_back(v.id());
    input_types.push_back(v.type());
    input_names.push_back("arg" + std::to_string(i));
  }
  for (const auto &[name, t] : params) {
    Value v = t.is_realized() ? add_source(t, options.instance.empty() ? name : options.instance + "." + name).value()
                              : to_value(t, 0);
    operands.push_back(v.id());
    input_types.push_back(v.type());
    input_names.push_back(name);
  }

  std::string callee;
  TreeDef out_def;
  auto keyed = options.key.empty() ? cache_->by_key.end() : cache_->by_key.find(options.key);
  if (keyed != cache_->by_key.end()) {
    callee = keyed->second; // reuse without tracing the body
    out_def = out_defs_->at(options.key);
  } else {
    auto sub = std::make_shared<Graph>(options.name.empty() ? (options.key.empty() ? "subgraph" : options.key)
                                                            : options.name);
    if (!options.arg_types.empty() && options.arg_types.size() != args.size())
      throw Error(ErrorCode::InvalidArgument, "subgraph call: " + std::to_string(options.arg_types.size()) +
                                                  " argument types for " + std::to_string(args.size()) + " arguments");
    for (size_t i = 0; i < input_types.size(); ++i)
      sub->add_input(i < options.arg_types.size() ? options.arg_types[i] : input_types[i], input_names[i]);
    {
      GraphRealizationContext body_ctx(*sub, *this, BodyTag{});
      std::vector<Tensor> body_args;
      for (size_t i = 0; i < args.size(); ++i)
        body_args.push_back(Tensor::make_unrealized(&body_ctx, {sub->value(sub->input_ids()[i])}));
      NamedTensors body_params;
      size_t index = args.size();
      for (const auto &[name, t] : params)
        body_params[name] = Tensor::make_unrealized(&body_ctx, {sub->value(sub->input_ids()[index++])});
      ++cache_->traces;
      TensorTree results = body(body_ctx, body_args, body_params);
      std::vector<ValueId> outs;
      for (const Tensor &t : results.flatten())
        outs.push_back(body_ctx.to_value(t, 0).id());
      sub->set_outputs(outs);
      out_def = results.structure();
    }
    std::string skey = sub->structural_key();
    auto same = cache_->by_structure.find(skey);
    if (same != cache_->by_structure.end()) {
      callee = same->second; // an identical body exists: share it
    } else {
      std::string base = sub->name();
      callee = base;
      for (int n = 1; graph_->find_subgraph(callee); ++n)
        callee = base + "." + std::to_string(n);
      sub->set_name(callee);
      graph_->add_subgraph(sub);
      cache_->by_structure.emplace(std::move(skey), callee);
    }
    if (!options.key.empty()) {
      cache_->by_key[options.key] = callee;
      (*out_defs_)[options.key] = out_def;
    }
  }
  ++cache_->calls;
  std::vector<ValueId> results = graph_->add_node(kSubgraphCallOp, operands, {{kSubgraphCalleeAttr, callee}}, instance);
  std::vector<Tensor> leaves;
  for (ValueId id : results)
    leaves.push_back(Tensor::make_unrealized(this, {graph_->value(id)}));
  return TensorTree::unflatten(out_def, leaves);
}

std::string GraphRealizationContext::trace_branch_body(const BranchBody &body, const std::vector<TensorType> &inputs,
                                                       const std::string &name) {
  auto sub = std::make_shared<Graph>(name);
  for (size_t i = 0; i < inputs.size(); ++i)
    sub->add_input(inputs[i], "capture" + std::to_string(i));
  {
    GraphRealizationContext body_ctx(*sub, *root_, BodyTag{});
    std::vector<Tensor> captures;
    for (ValueId id : sub->input_ids())
      captures.push_back(Tensor::make_unrealized(&body_ctx, {sub->value(id)}));
    std::vector<Tensor> results = body(captures);
    std::vector<ValueId> outs;
    for (const Tensor &t : results)
      outs.push_back(body_ctx.to_value(t, 0).id());
    sub->set_outputs(outs);
  }
  // Kept apart from call bodies: a body is a call's or a branch's, so the
  // passes that rewrite call sites and callees together never meet a branch.
  std::string skey = "branch body\n" + sub->structural_key();
  SubgraphCache &cache = *root_->cache_;
  if (auto same = cache.by_structure.find(skey); same != cache.by_structure.end())
    return same->second;
  Graph &root = root_->graph();
  std::string unique = name;
  for (int n = 1; root.find_subgraph(unique); ++n)
    unique = name + "." + std::to_string(n);
  sub->set_name(unique);
  root.add_subgraph(sub);
  cache.by_structure.emplace(std::move(skey), unique);
  return unique;
}

std::vector<Tensor> GraphRealizationContext::cond(const Tensor &pred, const BranchBody &then_body,
                                                  const BranchBody &else_body, const std::vector<Tensor> &captures,
                                                  const std::string &name) {
  if (!root_->cache_)
    throw Error(ErrorCode::InvalidArgument, "cond: the root trace has no subgraph table");
  std::vector<ValueId> operands{to_value(pred, 0).id()};
  std::vector<TensorType> types;
  for (const Tensor &t : captures) {
    if (!t.is_null() && !t.is_realized() && t.is_sharded())
      throw Error(ErrorCode::InvalidArgument, "cond: sharded captures are not supported");
    Value v = to_value(t, 0);
    operands.push_back(v.id());
    types.push_back(v.type());
  }
  std::string then_name = trace_branch_body(then_body, types, name + ".then");
  std::string else_name = trace_branch_body(else_body, types, name + ".else");
  std::vector<ValueId> results =
      graph_->add_node(kIfOp, operands, {{kIfThenAttr, then_name}, {kIfElseAttr, else_name}}, qualify(name));
  std::vector<Tensor> out;
  for (ValueId id : results)
    out.push_back(Tensor::make_unrealized(this, {graph_->value(id)}));
  return out;
}

std::vector<Tensor> GraphRealizationContext::loop(const Tensor &trip, const Tensor &cond,
                                                  const std::vector<Tensor> &carried, const BranchBody &body,
                                                  const std::vector<Tensor> &captures, const std::string &name) {
  if (!root_->cache_)
    throw Error(ErrorCode::InvalidArgument, "loop: the root trace has no subgraph table");
  std::vector<ValueId> operands{to_value(trip, 0).id(), to_value(cond, 0).id()};
  std::vector<TensorType> types{TensorType{DType::i64, {}}, TensorType{DType::boolean, {}}};
  for (const auto *list : {&carried, &captures})
    for (const Tensor &t : *list) {
      if (!t.is_null() && !t.is_realized() && t.is_sharded())
        throw Error(ErrorCode::InvalidArgument, "loop: sharded operands are not supported");
      Value v = to_value(t, 0);
      operands.push_back(v.id());
      types.push_back(v.type());
    }
  std::string body_name = trace_branch_body(body, types, name + ".body");
  std::vector<ValueId> results = graph_->add_node(kLoopOp, operands, {{kLoopBodyAttr, body_name}}, qualify(name));
  std::vector<Tensor> out;
  for (ValueId id : results)
    out.push_back(Tensor::make_unrealized(this, {graph_->value(id)}));
  return out;
}

void GraphRealizationContext::declare_defined_symbol(const Node &node) {
  // A body traced again (structural dedup) declares it again at the same
  // node: kept. Any other second source throws (SymbolTable::declare).
  const std::string &symbol = node.attrs.get_string(kBindDimSymbolAttr);
  SymbolTable &table = root_->graph().symbol_table();
  int64_t index = static_cast<int64_t>(graph_->nodes().size()) - 1;
  // A root graph rebuilt by a pass (decompose...) starts from the old
  // graph's table (carry_symbols): an entry whose node is no bind_dim of
  // this symbol here is that graph's, and moves to this node.
  if (const SymbolInfo *info = table.find(symbol);
      info && info->origin == SymbolOrigin::NodeResult && info->node != index && graph_ == &root_->graph()) {
    const auto &nodes = graph_->nodes();
    bool defined_here = info->node >= 0 && info->node < index && nodes[info->node].op == kBindDimOp &&
                        nodes[info->node].attrs.get_string(kBindDimSymbolAttr) == symbol;
    if (!defined_here) { // the table without it (SymbolTable has no erase)
      SymbolTable rest;
      for (const auto &[name, entry] : table.entries())
        if (name != symbol) {
          rest.declare(name, entry.origin, entry.node, entry.result);
          if (entry.upper_bound)
            rest.set_upper_bound(name, *entry.upper_bound);
        }
      if (table.model_state())
        rest.set_model_state(*table.model_state());
      table = std::move(rest);
    }
  }
  table.declare(symbol, SymbolOrigin::NodeResult, index, 0);
  table.set_upper_bound(symbol, node.attrs.get_int(kBindDimBoundAttr));
}

Dim GraphRealizationContext::bind_dim(const Tensor &value, const std::string &symbol, int64_t bound) {
  record(kBindDimOp, {value}, {{kBindDimSymbolAttr, symbol}, {kBindDimBoundAttr, bound}});
  return Dim(symbol);
}

} // namespace maxc
