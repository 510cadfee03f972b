// GraphRealizationContext: records Tensor operations into a Graph for
// ahead-of-time compilation. It can never realize: realize()/realize_all()
// throw RealizationError.
//
// Subgraph calls (`call`) trace a body into its own Graph with the call's
// tensor arguments and parameters as inputs, and deduplicate: bodies with the
// same structural key share one definition, and a call with a key reuses the
// keyed definition without tracing the body again. Inside a body the
// subgraph cache is null, so nested calls inline into the enclosing body.
//
// Conditionals (`cond`, the `if` op) own two bodies, traced like a call's
// into graphs of their own whose inputs are the explicit captures. A body
// points at the root graph while it is traced (Graph::attach_root), so an
// `if` inside it (inside a call body, inside another `if` body, at any
// depth) resolves its own bodies; each body enters the root's subgraph
// table once traced, under a unique name ("<name>.then", "<name>.then.1"
// ... in trace order), or shares an identical body already there (dedup by
// structural key, kept apart from call bodies). A tensor of an enclosing
// graph used inside a body without being passed as a capture is a
// ForeignValue error.
#pragma once

#include "maxc/Realization/RealizationContext.h"
#include "maxc/Tensor/TensorTree.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace maxc {

/// Parameters of a module instance by relative name ("attn.qkv.weight").
using NamedTensors = std::map<std::string, Tensor>;

class GraphRealizationContext;

/// The node a subgraph call records: op kSubgraphCallOp with the body's name
/// in its string attribute kSubgraphCalleeAttr. lib/Ops/Structural.cpp defines
/// the op from these names (Realization sits below Ops); code reading a graph
/// asks the op's declaration instead (is_call, call_body, node_bodies).
inline constexpr char kSubgraphCallOp[] = "call";
inline constexpr char kSubgraphCalleeAttr[] = "callee";
/// The node `cond` records: op kIfOp, its bodies' names in kIfThenAttr and
/// kIfElseAttr (lib/Ops/Structural.cpp defines the op; code reading a graph
/// asks is_branch / branch_bodies).
inline constexpr char kIfOp[] = "if";
inline constexpr char kIfThenAttr[] = "then_body";
inline constexpr char kIfElseAttr[] = "else_body";
/// The node `loop` records: op kLoopOp, its body's name in kLoopBodyAttr
/// (lib/Ops/Structural.cpp defines the op; code reading a graph asks
/// is_loop / loop_body).
inline constexpr char kLoopOp[] = "loop";
inline constexpr char kLoopBodyAttr[] = "body";
/// The node `bind_dim` records: op kBindDimOp, the symbol it defines in
/// kBindDimSymbolAttr and its upper bound in kBindDimBoundAttr.
inline constexpr char kBindDimOp[] = "bind_dim";
inline constexpr char kBindDimSymbolAttr[] = "symbol";
inline constexpr char kBindDimBoundAttr[] = "bound";

/// A subgraph body: given the body's context, its arguments and its
/// parameters (all as tensors of the body graph), returns its results.
using SubgraphBody = std::function<TensorTree(GraphRealizationContext &ctx, const std::vector<Tensor> &args,
                                              const NamedTensors &params)>;

/// A body of a conditional: given its captures (tensors of the body graph,
/// recorded in the body's context, which is current while it runs),
/// returns its results.
using BranchBody = std::function<std::vector<Tensor>(const std::vector<Tensor> &captures)>;

/// The dedup table, owned by the root trace.
struct SubgraphCache {
  /// Explicit key → subgraph name.
  std::map<std::string, std::string> by_key;
  /// Structural key → subgraph name.
  std::map<std::string, std::string> by_structure;
  /// How many bodies were traced and how many calls were made (for --stats).
  size_t traces = 0;
  size_t calls = 0;
};

struct CallOptions {
  /// Cache key: calls with the same key share one definition and trace the
  /// body only once. Empty: deduplicate by structure after tracing.
  std::string key;
  /// Instance name prefix, relative to the current prefix ("layers.3").
  /// Parameters become constants named `<prefix>.<instance>.<param>`.
  std::string instance;
  /// Preferred subgraph name (defaults to the key, or "subgraph").
  std::string name;
  /// The types the body is traced with for the arguments (one per
  /// argument; empty: the arguments' own). A bare symbol of its own
  /// ("[m, 8]") makes the body one function for calls of every size: each
  /// call binds m to its argument's dim (Ops/CallBinding.h; per-call dims).
  std::vector<TensorType> arg_types;
};

class GraphRealizationContext : public RealizationContext {
public:
  /// Records into `graph`. `signal_buffers` are the values used by
  /// multi-device collectives; `prefix` qualifies recorded names.
  explicit GraphRealizationContext(Graph &graph, std::vector<Tensor> signal_buffers = {},
                                   std::string prefix = {});
  ~GraphRealizationContext() override;

  Graph &graph() const { return *graph_; }
  const std::string &prefix() const override { return prefix_; }
  const std::vector<Tensor> &signal_buffers() const { return signal_buffers_; }

  std::vector<Tensor> record(const std::string &op, const std::vector<Tensor> &operands,
                             const Attrs &attrs = {}) override;
  /// The debug name (Node::name) of the nodes recorded from now on: the
  /// source node they come from (an ONNX node's name; the node a pass
  /// rewrites), so that a profile can name what a kernel computes. "" for
  /// none. NodeNameScope sets it for a scope.
  void set_node_name(std::string name) { node_name_ = std::move(name); }
  const std::string &node_name() const { return node_name_; }
  /// Always throws RealizationError.
  void realize(const Tensor &tensor) override;
  /// Always throws RealizationError.
  void realize_all() override;

  /// Embeds a realized tensor as a graph constant named
  /// qualify(name or the tensor's name) and returns the unrealized tensor
  /// that reads it. Not a graph input.
  Tensor add_source(const Tensor &tensor, const std::string &name = {});
  /// A constant `name` holding `source` with its last two dimensions
  /// swapped, its bytes made only when read (Graph::add_transposed_constant).
  Tensor add_transposed_source(const HostTensor &source, const std::string &name);
  /// Same as add_source: graph constants are immutable in maxc.
  Tensor add_mutable_source(const Tensor &tensor, const std::string &name = {});
  /// An unrealized tensor backed by `values` of this graph (several values
  /// make a sharded tensor; `mapping` gives each shard's device).
  Tensor create_unrealized(const std::vector<Value> &values, const std::vector<DeviceRef> &mapping = {});

  /// Records a subgraph call. See the file comment for the dedup rules.
  TensorTree call(const CallOptions &options, const SubgraphBody &body, const std::vector<Tensor> &args,
                  const NamedTensors &params = {});
  /// Seed-style overload: `key_or_null` null means structural dedup.
  TensorTree call(const char *key_or_null, const SubgraphBody &body, const std::vector<Tensor> &args,
                  const NamedTensors &params = {});

  /// Records `if`: runs `then_body` when the scalar `pred` (bool or
  /// integer) is nonzero, else `else_body`, each traced once into a body
  /// graph whose inputs are `captures` (in order); both must return the
  /// same types. `name` names the bodies ("<name>.then", "<name>.else").
  /// Works in the root and inside any body (see the file comment).
  std::vector<Tensor> cond(const Tensor &pred, const BranchBody &then_body, const BranchBody &else_body,
                           const std::vector<Tensor> &captures, const std::string &name = "if");

  /// Records `loop`: while the iteration number i (0, 1, ...) is below the
  /// integer scalar `trip` and the scalar `cond` holds, runs `body` on
  /// (i as an i64 scalar, the condition as bool, the carried values, the
  /// captures) and takes its results (the next condition, the next carried
  /// values, each of its carried value's type) for the next iteration. The
  /// body is traced once into a body graph; returns the last carried values
  /// (the initial ones when no iteration runs). `name` names the body
  /// ("<name>.body"). Works in the root and inside any body.
  std::vector<Tensor> loop(const Tensor &trip, const Tensor &cond, const std::vector<Tensor> &carried,
                           const BranchBody &body, const std::vector<Tensor> &captures,
                           const std::string &name = "loop");

  /// Records `bind_dim`: the symbol `symbol` takes the value of the integer
  /// scalar `value` at run time, at most `bound` (buffers whose size it
  /// names are sized by the bound). Declares it in the root graph's symbol
  /// table (origin node result) and returns it as a Dim for later shapes.
  /// A symbol has one defining node per graph; the same name defined in
  /// another graph is an error (a symbol has one source).
  Dim bind_dim(const Tensor &value, const std::string &symbol, int64_t bound);

  /// The dedup table; null inside a subgraph body (nested calls inline).
  SubgraphCache *subgraph_cache() const { return cache_; }
  /// Output structure per keyed subgraph (key → TreeDef).
  const std::map<std::string, TreeDef> &subgraph_out_defs() const { return *out_defs_; }

private:
  struct BodyTag {};
  /// A body's context: `root` is the root trace's context (which owns the
  /// root graph and the dedup table bodies of conditionals register in).
  GraphRealizationContext(Graph &graph, GraphRealizationContext &root, BodyTag);
  /// Traces `body` into a new body graph with `inputs` as its inputs and
  /// registers it in the root (deduplicated); returns its name.
  std::string trace_branch_body(const BranchBody &body, const std::vector<TensorType> &inputs,
                                const std::string &name);
  /// Declares the symbol a recorded `bind_dim` node defines in the root's
  /// table (origin node result, its bound).
  void declare_defined_symbol(const Node &node);
  /// Turns an operand into a value of this graph (realized → constant).
  Value to_value(const Tensor &tensor, size_t shard);
  TensorTree call_inline(const CallOptions &options, const SubgraphBody &body, const std::vector<Tensor> &args,
                         const NamedTensors &params);

  Graph *graph_;
  std::vector<Tensor> signal_buffers_;
  std::string prefix_;
  // Owned by the root context; body contexts see a null cache.
  std::unique_ptr<SubgraphCache> owned_cache_;
  std::unique_ptr<std::map<std::string, TreeDef>> owned_out_defs_;
  SubgraphCache *cache_ = nullptr;
  std::map<std::string, TreeDef> *out_defs_ = nullptr;
  GraphRealizationContext *root_ = this; // the root trace's context
  size_t anonymous_constants_ = 0;
  std::string node_name_;
};

/// Names the nodes `ctx` records while it lives `name` (set_node_name),
/// then restores the name before it.
class NodeNameScope {
public:
  NodeNameScope(GraphRealizationContext &ctx, std::string name) : ctx_(ctx), saved_(ctx.node_name()) {
    ctx_.set_node_name(std::move(name));
  }
  ~NodeNameScope() { ctx_.set_node_name(std::move(saved_)); }
  NodeNameScope(const NodeNameScope &) = delete;
  NodeNameScope &operator=(const NodeNameScope &) = delete;

private:
  GraphRealizationContext &ctx_;
  std::string saved_;
};

} // namespace maxc
