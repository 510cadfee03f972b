// The Graph IR: SSA values, nodes in topological order, named constants and
// subgraphs.
//
// A Graph owns every value it defines. Values are numbered densely from 0 in
// definition order (graph inputs first, then node results), so a ValueId is
// also the index into per-value tables such as the interpreter's environment.
// Nodes are appended only after their operands exist, so node order is always
// a topological order. Subgraphs (deduplicated module bodies) live in the
// root graph's subgraph table and are invoked by nodes whose op declares body
// attributes (`call`'s "callee"): node_bodies() finds them.
#pragma once

#include "maxc/IR/Attribute.h"
#include "maxc/IR/HostTensor.h"
#include "maxc/IR/SymbolTable.h"
#include "maxc/IR/TensorType.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace maxc {

class Graph;
using ValueId = uint32_t;

/// A reference to one value of one graph.
class Value {
public:
  Value() = default;
  Value(const Graph *graph, ValueId id) : graph_(graph), id_(id) {}
  const Graph *graph() const { return graph_; }
  ValueId id() const { return id_; }
  const TensorType &type() const;
  bool valid() const { return graph_ != nullptr; }
  bool operator==(const Value &o) const { return graph_ == o.graph_ && id_ == o.id_; }
  bool operator!=(const Value &o) const { return !(*this == o); }

private:
  const Graph *graph_ = nullptr;
  ValueId id_ = 0;
};

struct ValueInfo {
  TensorType type;
  /// Index of the defining node, or -1 for a graph input.
  int64_t producer = -1;
  /// Which result of the producer (or which input) this value is.
  uint32_t index = 0;
  /// Optional human-readable name (inputs, outputs); not part of identity.
  std::string name;
};

struct Node {
  std::string op;
  std::vector<ValueId> operands;
  std::vector<ValueId> results;
  Attrs attrs;
  /// Optional qualified debug name ("h.3.attn.qkv"); not part of identity.
  std::string name;
};

class Graph;

/// How a Graph checks a node: normalises `attrs` in place (defaults, kinds)
/// and returns the result types, throwing maxc::Error for a bad node. The op
/// registry (lib/Ops, a layer above IR) installs it; IR knows no op.
using NodeInference = std::vector<TensorType> (*)(const std::string &op, const std::vector<TensorType> &operands,
                                                  Attrs &attrs, const Graph *graph);
void set_node_inference(NodeInference fn);

/// Which string attributes of an op name the subgraph bodies its node invokes
/// (each a subgraph of the root graph): the op's declaration, OpDef::body_attrs,
/// installed by the op registry like NodeInference. Null for an op without
/// bodies. set_body_attributes returns the hook it replaces.
using BodyAttributes = const std::vector<std::string> *(*)(const std::string &op);
BodyAttributes set_body_attributes(BodyAttributes fn);
/// The attributes of `op` that name bodies; empty for an op without bodies
/// (or an unknown op).
const std::vector<std::string> &body_attributes(const std::string &op);
/// The names of the bodies `node` invokes, in its op's declaration order.
std::vector<std::string> body_names(const Node &node);
/// The bodies `node`, a node of `graph`, invokes: looked up in the root
/// graph's subgraph table (Graph::find_subgraph); a name with no subgraph is
/// left out.
std::vector<const Graph *> node_bodies(const Graph &graph, const Node &node);

/// The root's subgraphs, each after every body its nodes invoke (so a pass
/// rebuilding them in this order finds a body's bodies done), in name order
/// otherwise.
std::vector<const Graph *> subgraphs_bodies_first(const Graph &root);

class Graph {
public:
  explicit Graph(std::string name, const std::vector<TensorType> &input_types = {});
  Graph(const Graph &) = delete; // values point at their graph
  Graph &operator=(const Graph &) = delete;

  const std::string &name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  // --- values ---
  ValueId add_input(const TensorType &type, std::string name = {});
  std::vector<Value> inputs() const;
  const std::vector<ValueId> &input_ids() const { return inputs_; }
  const ValueInfo &value_info(ValueId id) const;
  void set_value_name(ValueId id, std::string name);
  const TensorType &type_of(ValueId id) const { return value_info(id).type; }
  size_t num_values() const { return values_.size(); }
  Value value(ValueId id) const { return Value(this, id); }

  // --- nodes ---
  /// Appends a node after checking it with the op's verifier and inferring
  /// its result types. Attributes are normalised (defaults filled in, kinds
  /// coerced) first. Throws maxc::Error describing the problem.
  std::vector<ValueId> add_node(const std::string &op, const std::vector<ValueId> &operands, Attrs attrs = {},
                                std::string name = {});
  /// Appends a node with given result types, without inference (used by
  /// deserialisation, which verifies afterwards).
  std::vector<ValueId> append_node_unchecked(Node node, const std::vector<TensorType> &result_types);
  const std::vector<Node> &nodes() const { return nodes_; }

  // --- outputs ---
  void output(const std::vector<Value> &values);
  void set_outputs(const std::vector<ValueId> &ids, const std::vector<std::string> &names = {});
  std::vector<Value> outputs() const;
  const std::vector<ValueId> &output_ids() const { return outputs_; }
  const std::vector<std::string> &output_names() const { return output_names_; }

  // --- constants ---
  /// Stores `data` under `name` (made unique with a ".N" suffix if taken by
  /// different data) and returns the name used. Adding the same storage, or
  /// identical bytes, under the same name twice stores it once.
  std::string add_constant(const std::string &name, const HostTensor &data);
  /// A constant whose bytes are those of `source` with its last two
  /// dimensions swapped (a pre-transposed weight), made on first read:
  /// constant(name), constants(), equals(), structural_key(). A reader that
  /// can take the source's layout (the CPU's GEMM panel packing) asks
  /// transposed_source() and never makes them: no copy of the weights is
  /// ever resident. Returns the name used (as add_constant).
  std::string add_transposed_constant(const std::string &name, const HostTensor &source);
  /// The source of a constant added by add_transposed_constant (its bytes
  /// made or not); null for any other constant.
  const HostTensor *transposed_source(const std::string &name) const;
  bool has_constant(const std::string &name) const { return constants_.count(name) != 0; }
  const HostTensor &constant(const std::string &name) const;
  /// Every constant, with its bytes (makes those not made yet).
  const std::map<std::string, HostTensor> &constants() const;
  /// Every constant's dtype and shape without making any bytes: a lazily
  /// transposed constant not read yet has no storage here.
  const std::map<std::string, HostTensor> &constant_types() const { return constants_; }

  // --- symbols ---
  /// The origins and bounds of the graph's dim symbols (IR/SymbolTable.h).
  /// add_input declares each bare-symbol dim of an input as an input dim;
  /// the root graph's table is the model's, and model_symbols
  /// (GraphSymbols.h) completes it with every symbol the graph uses.
  SymbolTable &symbol_table() { return symbol_table_; }
  const SymbolTable &symbol_table() const { return symbol_table_; }

  // --- subgraphs ---
  void add_subgraph(std::shared_ptr<Graph> subgraph);
  const Graph *find_subgraph(const std::string &name) const;
  const std::map<std::string, std::shared_ptr<Graph>> &subgraphs() const { return subgraphs_; }
  /// Subgraph lookup for call nodes inside subgraph bodies, which resolve
  /// callees in the root graph. Set by add_subgraph.
  const Graph *root() const { return root_ ? root_ : this; }
  /// Points a body at `root` before it enters root's table (add_subgraph):
  /// a body being traced resolves the bodies of the nodes in it there.
  void attach_root(const Graph &root) { root_ = root.root(); }

  /// Checks SSA well-formedness and re-runs every op's verifier; throws
  /// maxc::Error with the offending node on failure.
  void verify() const;

  /// Structural equality: same inputs, nodes, attributes, types, outputs,
  /// constants (bytes) and subgraphs. Graph and debug names included.
  bool equals(const Graph &other) const;
  /// A canonical text of everything that defines what the graph computes
  /// (excludes the graph name and debug names): equal keys ⇔ interchangeable
  /// bodies. Used for subgraph deduplication.
  std::string structural_key() const;

private:
  ValueId new_value(TensorType type, int64_t producer, uint32_t index, std::string name);

  std::string name_;
  std::vector<ValueInfo> values_;
  std::vector<ValueId> inputs_;
  std::vector<Node> nodes_;
  std::vector<ValueId> outputs_;
  std::vector<std::string> output_names_;
  /// Makes the bytes of the lazily transposed constant `name` (all: null).
  void make_transposed(const std::string *name) const;

  mutable std::map<std::string, HostTensor> constants_; // lazy ones get their bytes on first read
  struct TransposedConstants; // add_transposed_constant's sources, which are made, a mutex
  std::shared_ptr<TransposedConstants> transposed_;
  std::map<std::string, std::shared_ptr<Graph>> subgraphs_;
  const Graph *root_ = nullptr;
  SymbolTable symbol_table_;
};

/// "node %7 (matmul)" — how diagnostics name a node.
std::string describe_node(const Graph &graph, size_t node_index);

} // namespace maxc
