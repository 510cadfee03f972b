// Structural ops: subgraph calls and collectives.
#include "Families.h"
#include "OpHelpers.h"
#include "maxc/IR/Graph.h"
#include "maxc/Ops/CallBinding.h"
#include "maxc/Ops/Ops.h"
#include "maxc/Realization/GraphRealizationContext.h"
#include "maxc/Support/Communicator.h"

#include <cstring>

namespace maxc {
using namespace ophelpers;

namespace {

OpDef call_op() {
  OpDef def;
  def.name = kSubgraphCallOp;
  def.traits = OpTrait::structural | OpTrait::call;
  def.summary = "invokes a subgraph of the root graph";
  def.min_operands = 0;
  def.max_operands = -1;
  def.attrs = {{kSubgraphCalleeAttr, AttrKind::string, std::nullopt, "subgraph name"}};
  def.body_attrs = {kSubgraphCalleeAttr};
  def.infer = [](const InferContext &c) {
    const std::string &callee = c.attrs.get_string(kSubgraphCalleeAttr);
    const Graph *sub = c.graph ? c.graph->find_subgraph(callee) : nullptr;
    if (!sub)
      throw Error(ErrorCode::InvalidGraph, "call: no subgraph named '" + callee + "'");
    // The body's own dims bind to the operands' (CallBinding.h); a body
    // traced with its operands' types binds each symbol to itself.
    DimBinding binding = without_identities(bind_body_inputs(*sub, c.operands, "call @" + callee));
    std::vector<TensorType> out;
    for (ValueId id : sub->output_ids()) {
      TensorType t = sub->type_of(id);
      if (!binding.empty())
        for (Dim &d : t.shape)
          d = d.substitute(binding);
      out.push_back(t);
    }
    return out;
  };
  def.reference = [](const ReferenceContext &c) {
    return c.run_graph(*c.graph.find_subgraph(c.attrs.get_string(kSubgraphCalleeAttr)), c.operands);
  };
  return def;
}

// Operands: a scalar predicate, then the captures (each body's inputs).
// Results: the taken body's outputs (both bodies return the same types).
OpDef if_op() {
  OpDef def;
  def.name = kIfOp;
  def.traits = OpTrait::structural | OpTrait::branch;
  def.summary = "runs then_body when the scalar pred (bool or integer) is nonzero, else else_body (subgraphs of "
                "the root graph), each with the captures as its inputs";
  def.min_operands = 1;
  def.max_operands = -1;
  def.attrs = {{kIfThenAttr, AttrKind::string, std::nullopt, "subgraph run when the predicate is nonzero"},
               {kIfElseAttr, AttrKind::string, std::nullopt, "subgraph run when the predicate is zero"}};
  def.body_attrs = {kIfThenAttr, kIfElseAttr};
  def.infer = [](const InferContext &c) {
    const std::string &then_name = c.attrs.get_string(kIfThenAttr), &else_name = c.attrs.get_string(kIfElseAttr);
    std::string where = "if @" + then_name + " @" + else_name;
    const TensorType &pred = c.operands[0];
    if (pred.rank() != 0)
      fail_shape(where, "the predicate must be a scalar (rank 0), got " + pred.to_string());
    if (is_float(pred.dtype))
      fail_dtype(where, "the predicate must be bool or an integer, got " + pred.to_string());
    std::vector<TensorType> out;
    for (const std::string *name : {&then_name, &else_name}) {
      const Graph *body = c.graph ? c.graph->find_subgraph(*name) : nullptr;
      if (!body)
        throw Error(ErrorCode::InvalidGraph, where + ": no subgraph named '" + *name + "'");
      const auto &inputs = body->input_ids();
      if (inputs.size() + 1 != c.operands.size())
        throw Error(ErrorCode::OperandCount, where + ": @" + *name + " takes " + std::to_string(inputs.size()) +
                                                 " captures, got " + std::to_string(c.operands.size() - 1));
      for (size_t i = 0; i < inputs.size(); ++i)
        if (body->type_of(inputs[i]) != c.operands[i + 1])
          fail_shape(where, "capture " + std::to_string(i) + " is " + c.operands[i + 1].to_string() + ", @" + *name +
                                " expects " + body->type_of(inputs[i]).to_string());
      std::vector<TensorType> results;
      for (ValueId id : body->output_ids())
        results.push_back(body->type_of(id));
      if (name == &then_name) {
        out = std::move(results);
        continue;
      }
      if (results.size() != out.size())
        fail_shape(where, "the bodies return " + std::to_string(out.size()) + " and " +
                              std::to_string(results.size()) + " results");
      for (size_t i = 0; i < out.size(); ++i)
        if (results[i] != out[i])
          fail_shape(where, "result " + std::to_string(i) + " is " + out[i].to_string() + " in @" + then_name +
                                " but " + results[i].to_string() + " in @" + else_name);
    }
    return out;
  };
  def.reference = [](const ReferenceContext &c) {
    bool taken = c.operands[0].get_i64(0) != 0;
    std::vector<HostTensor> captures(c.operands.begin() + kBranchFirstInput, c.operands.end());
    return c.run_graph(*c.graph.find_subgraph(c.attrs.get_string(taken ? kIfThenAttr : kIfElseAttr)), captures);
  };
  return def;
}

// Operands: the trip count (integer scalar), the initial condition (scalar),
// the loop-carried values, the captures. Body inputs: the iteration number
// (i64 scalar), the condition (bool scalar), the carried values, the
// captures; body outputs: the next condition (bool or integer scalar), the
// next carried values (same types). Results: the last carried values.
OpDef loop_op() {
  OpDef def;
  def.name = kLoopOp;
  def.traits = OpTrait::structural | OpTrait::loop;
  def.summary = "while the iteration number i is below trip and cond holds, runs body(i, cond, carried..., "
                "captures...) -> (cond, carried...); returns the last carried values";
  def.min_operands = 2;
  def.max_operands = -1;
  def.attrs = {{kLoopBodyAttr, AttrKind::string, std::nullopt, "subgraph run once per iteration"}};
  def.body_attrs = {kLoopBodyAttr};
  def.infer = [](const InferContext &c) {
    const std::string &name = c.attrs.get_string(kLoopBodyAttr);
    std::string where = "loop @" + name;
    for (size_t i = 0; i < 2; ++i) {
      const TensorType &t = c.operands[i];
      if (t.rank() != 0 || is_float(t.dtype))
        fail_shape(where, std::string(i == 0 ? "the trip count" : "the condition") +
                              " must be an integer or bool scalar, got " + t.to_string());
    }
    const Graph *body = c.graph ? c.graph->find_subgraph(name) : nullptr;
    if (!body)
      throw Error(ErrorCode::InvalidGraph, where + ": no subgraph named '" + name + "'");
    const auto &inputs = body->input_ids();
    const auto &outputs = body->output_ids();
    if (inputs.size() != c.operands.size() || outputs.empty() || outputs.size() + 1 > inputs.size())
      throw Error(ErrorCode::OperandCount, where + ": the body takes " + std::to_string(inputs.size()) +
                                               " inputs and returns " + std::to_string(outputs.size()) +
                                               "; the loop has " + std::to_string(c.operands.size()) +
                                               " operands (trip count, condition, carried values, captures)");
    if (body->type_of(inputs[0]) != TensorType{DType::i64, {}} ||
        body->type_of(inputs[1]) != TensorType{DType::boolean, {}})
      fail_shape(where, "the body's first inputs must be the iteration number (i64[]) and the condition (bool[])");
    for (size_t i = 2; i < inputs.size(); ++i)
      if (body->type_of(inputs[i]) != c.operands[i])
        fail_shape(where, "operand " + std::to_string(i) + " is " + c.operands[i].to_string() + ", the body expects " +
                              body->type_of(inputs[i]).to_string());
    const TensorType &next = body->type_of(outputs[0]);
    if (next.rank() != 0 || is_float(next.dtype))
      fail_shape(where, "the body's first output (the condition) must be an integer or bool scalar, got " +
                            next.to_string());
    std::vector<TensorType> out;
    for (size_t i = 1; i < outputs.size(); ++i) {
      const TensorType &t = body->type_of(outputs[i]);
      if (t != c.operands[kLoopFirstCarried + i - 1])
        fail_shape(where, "carried value " + std::to_string(i - 1) + " enters as " +
                              c.operands[kLoopFirstCarried + i - 1].to_string() + " and leaves the body as " +
                              t.to_string() + " (a carried value keeps its type)");
      out.push_back(t);
    }
    return out;
  };
  def.reference = [](const ReferenceContext &c) {
    const Graph &body = *c.graph.find_subgraph(c.attrs.get_string(kLoopBodyAttr));
    const size_t carried = body.output_ids().size() - 1;
    int64_t trip = c.operands[0].get_i64(0);
    HostTensor cond(DType::boolean, {});
    cond.set_i64(0, c.operands[1].get_i64(0) != 0);
    std::vector<HostTensor> args(c.operands.begin(), c.operands.end());
    for (int64_t i = 0; i < trip && cond.get_i64(0) != 0; ++i) {
      HostTensor iter(DType::i64, {});
      iter.set_i64(0, i);
      args[0] = iter;
      args[1] = cond;
      std::vector<HostTensor> next = c.run_graph(body, args);
      cond.set_i64(0, next[0].get_i64(0) != 0);
      for (size_t k = 0; k < carried; ++k)
        args[kLoopFirstCarried + k] = next[1 + k];
    }
    return std::vector<HostTensor>(args.begin() + kLoopFirstCarried, args.begin() + kLoopFirstCarried + carried);
  };
  return def;
}

// Operand: an integer scalar. Result: its value as an i64 scalar. Defines
// the symbol kBindDimSymbolAttr (OpTrait::defines_symbol): shapes recorded
// after it may name the symbol, whose run-time value is the operand's.
OpDef bind_dim_op() {
  OpDef def;
  def.name = kBindDimOp;
  def.traits = OpTrait::structural | OpTrait::defines_symbol;
  def.summary = "defines a symbolic dim from the value of an integer scalar at run time (at most `bound`; "
                "buffers are sized by the bound)";
  def.attrs = {{kBindDimSymbolAttr, AttrKind::string, std::nullopt, "the symbol defined (an identifier)"},
               {kBindDimBoundAttr, AttrKind::integer, std::nullopt, "the largest value the symbol may take"}};
  def.infer = [](const InferContext &c) {
    const TensorType &x = c.operands[0];
    const std::string &symbol = c.attrs.get_string(kBindDimSymbolAttr);
    std::string where = "bind_dim '" + symbol + "'";
    (void)Dim(symbol); // an identifier (throws naming it otherwise)
    if (!is_integer(x.dtype) || x.rank() != 0)
      throw Error(ErrorCode::DTypeMismatch, where + ": expects an integer scalar, got " + x.to_string());
    if (c.attrs.get_int(kBindDimBoundAttr) < 0)
      throw Error(ErrorCode::InvalidAttribute, where + ": bound " + std::to_string(c.attrs.get_int(kBindDimBoundAttr)) +
                                                   " is negative (symbols are sizes)");
    return std::vector<TensorType>{TensorType(DType::i64, Shape{})};
  };
  def.reference = [](const ReferenceContext &c) {
    int64_t v = c.operands[0].get_i64(0), bound = c.attrs.get_int(kBindDimBoundAttr);
    if (v < 0 || v > bound)
      throw Error(ErrorCode::InvalidArgument, "bind_dim '" + c.attrs.get_string(kBindDimSymbolAttr) + "': value " +
                                                  std::to_string(v) + " is outside [0, " + std::to_string(bound) + "]");
    return std::vector<HostTensor>{HostTensor::scalar(DType::i64, static_cast<double>(v))};
  };
  return def;
}

// Operands: N shards, then any signal buffers. Results: N shards, each the
// elementwise sum of all shards, on its shard's device.
OpDef allreduce_op() {
  OpDef def;
  def.name = "allreduce_sum";
  def.traits = OpTrait::collective;
  def.summary = "sum across the shards of a sharded tensor";
  def.min_operands = 1;
  def.max_operands = -1;
  def.attrs = {{"shards", AttrKind::integer, std::nullopt, "number of leading operands that are shards"}};
  def.infer = [](const InferContext &c) {
    int64_t n = c.attrs.get_int("shards");
    if (n < 1 || n > static_cast<int64_t>(c.operands.size()))
      fail_attr("allreduce_sum", "shards must be in [1, " + std::to_string(c.operands.size()) + "]");
    std::vector<TensorType> out;
    for (int64_t i = 0; i < n; ++i) {
      if (c.operands[i].dtype != c.operands[0].dtype || c.operands[i].shape != c.operands[0].shape)
        fail_shape("allreduce_sum", "shards must share dtype and shape, got " + c.operands[0].to_string() +
                                        " and " + c.operands[i].to_string());
      out.push_back(c.operands[i]);
    }
    return out;
  };
  def.reference = [](const ReferenceContext &c) {
    int64_t n = c.attrs.get_int("shards");
    HostTensor total = c.make_result(0);
    for (int64_t e = 0; e < total.numel(); ++e) {
      double acc = 0;
      for (int64_t s = 0; s < n; ++s)
        acc += c.operands[s].get_f64(e);
      total.set_f64(e, acc);
    }
    std::vector<HostTensor> out;
    for (int64_t s = 0; s < n; ++s)
      out.push_back(total.clone());
    return out;
  };
  return def;
}

/// The calling rank's communicator for a collective of a `world`-rank
/// program; a clear error outside a tensor-parallel run.
Communicator &rank_communicator(const char *op, int64_t world) {
  Communicator *comm = current_communicator();
  if (!comm)
    throw Error(ErrorCode::Collective, std::string(op) + ": this graph is one rank of a " + std::to_string(world) +
                                           "-rank tensor-parallel program; run it with its other ranks "
                                           "(maxc run --tensor-parallel " + std::to_string(world) + ")");
  if (comm->world() != world)
    throw Error(ErrorCode::Collective, std::string(op) + ": the program was sharded for " + std::to_string(world) +
                                           " ranks, but it runs among " + std::to_string(comm->world()));
  return *comm;
}

int64_t checked_world(const char *op, const Attrs &attrs) {
  int64_t world = attrs.get_int("world");
  if (world < 1 || world > 4096)
    fail_attr(op, "world " + std::to_string(world) + " must be in [1, 4096]");
  return world;
}

// One rank's value summed over the ranks of a tensor-parallel program
// (Transforms/Shard.h puts one after each row-parallel product).
OpDef all_reduce_op() {
  OpDef def;
  def.name = "all_reduce";
  def.traits = OpTrait::communicates;
  def.summary = "sum of x over the ranks of a tensor-parallel program (every rank gets the same bits)";
  def.attrs = {{"world", AttrKind::integer, std::nullopt, "ranks of the program"}};
  def.infer = [](const InferContext &c) {
    checked_world("all_reduce", c.attrs);
    if (!is_float(c.operands[0].dtype))
      throw Error(ErrorCode::DTypeMismatch, "all_reduce: expects a float tensor, got " + c.operands[0].to_string());
    return std::vector<TensorType>{c.operands[0]};
  };
  def.reference = [](const ReferenceContext &c) {
    Communicator &comm = rank_communicator("all_reduce", c.attrs.get_int("world"));
    std::vector<double> values = c.operands[0].to_f64();
    comm.all_reduce_sum(values.data(), values.size());
    return std::vector<HostTensor>{HostTensor::from_f64(c.operands[0].dtype(), c.operands[0].shape(), values)};
  };
  return def;
}

// The ranks' pieces of a value put side by side along an axis, rank 0's
// first: the whole value on every rank.
OpDef all_gather_op() {
  OpDef def;
  def.name = "all_gather";
  def.traits = OpTrait::communicates;
  def.summary = "the ranks' x concatenated along axis, in rank order, on every rank";
  def.attrs = {{"world", AttrKind::integer, std::nullopt, "ranks of the program"},
               {"axis", AttrKind::integer, std::nullopt, "the axis the pieces are concatenated along"}};
  def.infer = [](const InferContext &c) {
    int64_t world = checked_world("all_gather", c.attrs);
    const TensorType &x = c.operands[0];
    int64_t axis = c.attrs.get_int("axis");
    if (axis < 0 || axis >= x.rank())
      fail_attr("all_gather", "axis " + std::to_string(axis) + " is outside [0, " + std::to_string(x.rank()) +
                                  ") for " + x.to_string());
    Shape out = x.shape;
    out[axis] = out[axis] * Dim(world);
    return std::vector<TensorType>{TensorType(x.dtype, out, x.device)};
  };
  def.reference = [](const ReferenceContext &c) {
    int64_t world = c.attrs.get_int("world"), axis = c.attrs.get_int("axis");
    Communicator &comm = rank_communicator("all_gather", world);
    const HostTensor &x = c.operands[0];
    HostTensor gathered(x.dtype(), {world, x.numel()});
    comm.all_gather(x.data(), gathered.data(), x.nbytes());
    HostTensor out = c.make_result(0);
    int64_t outer = 1;
    for (int64_t a = 0; a < axis; ++a)
      outer *= x.shape()[a];
    size_t chunk = outer ? x.nbytes() / static_cast<size_t>(outer) : 0; // one outer index's bytes on one rank
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t r = 0; r < world; ++r)
        std::memcpy(out.data() + (o * world + r) * chunk, gathered.data() + r * x.nbytes() + o * chunk, chunk);
    return std::vector<HostTensor>{out};
  };
  return def;
}

} // namespace

void register_structural_ops(OpRegistry &r) {
  r.add(call_op());
  r.add(if_op());
  r.add(loop_op());
  r.add(allreduce_op());
  r.add(all_reduce_op());
  r.add(all_gather_op());
  r.add(bind_dim_op());
}

namespace ops {

Tensor allreduce_sum(const Tensor &sharded) {
  auto &ctx = RealizationContext::require_current("allreduce_sum");
  if (sharded.is_null() || sharded.is_realized() || !sharded.is_sharded())
    throw Error(ErrorCode::InvalidArgument, "allreduce_sum: expects a sharded (multi-value) tensor");
  const auto &values = sharded.values();
  std::vector<Tensor> operands;
  for (size_t i = 0; i < values.size(); ++i)
    operands.push_back(Tensor::make_unrealized(&ctx, {values[i]}));
  if (auto *graph_ctx = dynamic_cast<GraphRealizationContext *>(&ctx))
    for (const Tensor &buffer : graph_ctx->signal_buffers())
      operands.push_back(buffer);
  std::vector<Tensor> shards = ctx.record("allreduce_sum", operands, {{"shards", int64_t(values.size())}});
  std::vector<Value> out_values;
  for (const Tensor &t : shards)
    out_values.push_back(t.value());
  return Tensor::make_unrealized(&ctx, out_values, sharded.device_mapping());
}

std::vector<Tensor> cond(const Tensor &pred, const BranchBody &then_body, const BranchBody &else_body,
                         const std::vector<Tensor> &captures, const std::string &name) {
  auto *ctx = dynamic_cast<GraphRealizationContext *>(&RealizationContext::require_current("cond"));
  if (!ctx)
    throw Error(ErrorCode::InvalidArgument, "cond: records an `if` node, so it needs a GraphRealizationContext");
  return ctx->cond(pred, then_body, else_body, captures, name);
}

std::vector<Tensor> loop(const Tensor &trip, const Tensor &cond, const std::vector<Tensor> &carried,
                         const BranchBody &body, const std::vector<Tensor> &captures, const std::string &name) {
  auto *ctx = dynamic_cast<GraphRealizationContext *>(&RealizationContext::require_current("loop"));
  if (!ctx)
    throw Error(ErrorCode::InvalidArgument, "loop: records a `loop` node, so it needs a GraphRealizationContext");
  return ctx->loop(trip, cond, carried, body, captures, name);
}

Dim bind_dim(const Tensor &value, const std::string &symbol, int64_t bound) {
  auto &ctx = RealizationContext::require_current("bind_dim");
  if (auto *graph_ctx = dynamic_cast<GraphRealizationContext *>(&ctx))
    return graph_ctx->bind_dim(value, symbol, bound);
  // Eager: the value is known now; the checks are the op's.
  Tensor r = ctx.record(kBindDimOp, {value}, {{kBindDimSymbolAttr, symbol}, {kBindDimBoundAttr, bound}}).at(0);
  return Dim(r.host().get_i64(0));
}

} // namespace ops
} // namespace maxc
