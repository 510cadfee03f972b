// The rewrite driver: graph rewrites as small named patterns (match →
// replace) applied by one driver to a fixed point, after MLIR's
// RewritePattern + greedy driver and XLA's AlgebraicSimplifier.
//
// A pattern looks at one node of the graph being rewritten (`from`, read
// only, through a GraphMatcher: producers, readers, scalar constants) and,
// when it applies, records the node's replacement into the new graph through
// the rewrite context and returns the replacement's results. The driver
// rebuilds the graph node by node (subgraph bodies too, keeping their names
// and signatures, so dedup survives), asks the patterns of each node's op in
// order, copies a node no pattern takes, drops the nodes that nothing reads
// any more, and repeats until a round changes nothing.
//
// Patterns are listed in order like the compile steps (Canonicalize.h has
// the canonicalization list). A pattern that fuses says which spellings it
// accepts; each has a golden test and a near-miss test of what it must not
// rewrite (test/unit/Transforms/CanonicalizeTest.cpp).
#pragma once

#include "maxc/IR/Graph.h"
#include "maxc/Realization/GraphRealizationContext.h"

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace maxc {

/// Who reads each value of a graph: node indices in node order, -1 for a
/// graph output (once per output position). Computed once per graph; every
/// pass that asks "used once?" reads these.
class Readers {
public:
  explicit Readers(const Graph &graph);
  const std::vector<int64_t> &of(ValueId v) const { return readers_.at(v); }
  /// v is read by exactly one node and is no graph output.
  bool single_use(ValueId v) const { return readers_.at(v).size() == 1 && readers_[v][0] >= 0; }
  /// The whole table, indexed by ValueId.
  const std::vector<std::vector<int64_t>> &table() const { return readers_; }

private:
  std::vector<std::vector<int64_t>> readers_;
};

/// Read-only questions about one graph that patterns ask.
class GraphMatcher {
public:
  GraphMatcher(const Graph &graph, const Readers &readers) : g_(graph), readers_(readers) {}
  const Graph &graph() const { return g_; }
  const Readers &readers() const { return readers_; }

  /// The node that defines v, or null for a graph input.
  const Node *producer(ValueId v) const;
  /// The defining node of v when it is op `op`, else null.
  const Node *producer_op(ValueId v, const char *op) const;
  /// Index of `n` (a node of this graph) in node order.
  size_t index(const Node *n) const { return static_cast<size_t>(n - g_.nodes().data()); }
  bool single_use(ValueId v) const { return readers_.single_use(v); }

  /// The value every element of v has, when v is a `full`, or a `constant`
  /// whose elements are all equal (a splat; NaNs never compare equal, so a
  /// NaN constant is no splat). Null otherwise. Any dtype.
  std::optional<double> splat(ValueId v) const;
  /// splat() restricted to one-element values (a scalar).
  std::optional<double> scalar(ValueId v) const;
  /// The data of v when a `constant` node defines it, else null.
  const HostTensor *constant(ValueId v) const;

private:
  const Graph &g_;
  const Readers &readers_;
};

/// What a pattern gets besides the node: the graph being read, and the
/// context recording into the graph being built.
struct RewriteContext {
  const GraphMatcher &match;
  GraphRealizationContext &out;
  /// The rebuilt value of each value of the graph being read, for the nodes
  /// already rebuilt (a pattern reads operands of operands through this).
  const std::vector<Tensor> &values;
  /// The rebuilt value of `v` of the graph being read.
  const Tensor &value(ValueId v) const { return values.at(v); }
};

class RewritePattern {
public:
  virtual ~RewritePattern() = default;
  /// A short name ("pow-by-constant"): --time-passes style statistics and
  /// test messages use it.
  virtual const char *name() const = 0;
  /// The op this pattern rewrites (the root of what it matches).
  virtual const char *root_op() const = 0;
  /// The replacement of `node` (its results, in order, recorded into
  /// `rc.out`), or an empty vector when the pattern does not apply.
  /// `operands` are the node's operands rebuilt. A pattern records nothing
  /// when it does not apply.
  virtual std::vector<Tensor> rewrite(const Node &node, const std::vector<Tensor> &operands,
                                      RewriteContext &rc) const = 0;
};

/// Gives `to`, a graph being rebuilt from `from` before any input is added,
/// `from`'s symbol table: every rebuild (canonicalize, decompose, dead-node
/// removal) keeps the symbols' origins and bounds. A symbol defined by a
/// node keeps its node index, so a rebuild that moves such a node must
/// declare the symbol again.
void carry_symbols(const Graph &from, Graph &to);

/// Copies `node` of another graph into `to` as it is (attributes and debug
/// name kept), its operands mapped to `to`'s values (`operands`).
std::vector<Tensor> copy_node(Graph &to, const Node &node, const std::vector<Tensor> &operands);

/// A graph being rebuilt into another: the new tensor of each value of the
/// graph read, node by node. The rebuild loops of the driver and of
/// decompose share it.
class GraphRebuild {
public:
  GraphRebuild(const Graph &from, Graph &to) : from_(from), to_(to), values_(from.num_values()) {}
  /// Maps input i of `from` to input i of `to` (which must have them).
  void map_inputs();
  /// The rebuilt operands of `node` (a node of `from`).
  std::vector<Tensor> operands(const Node &node) const;
  /// `node`'s results are `results` from now on.
  void define(const Node &node, const std::vector<Tensor> &results);
  /// The rebuilt values, indexed by `from`'s ValueIds (null where not rebuilt yet).
  std::vector<Tensor> &values() { return values_; }
  /// Makes `to`'s outputs the rebuilt values of `from`'s (same names).
  void set_outputs();

private:
  const Graph &from_;
  Graph &to_;
  std::vector<Tensor> values_;
};

/// How often each pattern fired, over all rounds and bodies.
struct RewriteStats {
  std::map<std::string, size_t> fired;
  size_t rounds = 0;
  size_t total() const;
};

/// Applies `patterns` to `graph` and its subgraph bodies until a round
/// changes nothing (at most `max_rounds` rounds). Returns the rewritten
/// graph, or null when no pattern applied anywhere (the caller keeps the
/// graph it has: an unchanged model compiles to the same bytes).
std::unique_ptr<Graph> apply_patterns(const Graph &graph, const std::vector<const RewritePattern *> &patterns,
                                      RewriteStats *stats = nullptr, size_t max_rounds = 16);

/// A copy of `graph` (subgraphs included) without the nodes whose results
/// nothing reads; inputs, outputs and constants stay. Null when every node
/// is read.
std::unique_ptr<Graph> without_dead_nodes(const Graph &graph);

} // namespace maxc
