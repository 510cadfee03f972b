#include "maxc/Transforms/Rewrite.h"

#include "maxc/IR/GraphSymbols.h"
#include "maxc/Ops/OpRegistry.h"
#include "maxc/Support/Error.h"

#include <functional>

namespace maxc {

Readers::Readers(const Graph &graph) : readers_(graph.num_values()) {
  for (size_t n = 0; n < graph.nodes().size(); ++n)
    for (ValueId id : graph.nodes()[n].operands)
      readers_[id].push_back(static_cast<int64_t>(n));
  for (ValueId id : graph.output_ids())
    readers_[id].push_back(-1);
}

const Node *GraphMatcher::producer(ValueId v) const {
  int64_t p = g_.value_info(v).producer;
  return p < 0 ? nullptr : &g_.nodes()[static_cast<size_t>(p)];
}

const Node *GraphMatcher::producer_op(ValueId v, const char *op) const {
  const Node *n = producer(v);
  return n && n->op == op ? n : nullptr;
}

std::optional<double> GraphMatcher::splat(ValueId v) const {
  const Node *n = producer(v);
  if (!n)
    return std::nullopt;
  if (n->op == "full")
    return n->attrs.get_real("value");
  if (n->op != "constant")
    return std::nullopt;
  const HostTensor &c = g_.constant(n->attrs.get_string("name"));
  if (c.numel() == 0)
    return std::nullopt;
  double first = c.get_f64(0);
  for (int64_t i = 1; i < c.numel(); ++i)
    if (!(c.get_f64(i) == first))
      return std::nullopt;
  return first == first ? std::optional<double>(first) : std::nullopt;
}

const HostTensor *GraphMatcher::constant(ValueId v) const {
  const Node *n = producer_op(v, "constant");
  return n ? &g_.constant(n->attrs.get_string("name")) : nullptr;
}

std::optional<double> GraphMatcher::scalar(ValueId v) const {
  if (shape_numel(g_.type_of(v).shape) != Dim(1))
    return std::nullopt;
  return splat(v);
}

void GraphRebuild::map_inputs() {
  for (size_t i = 0; i < from_.input_ids().size(); ++i)
    values_[from_.input_ids()[i]] = Tensor::from_graph_value(to_.inputs()[i]);
}

std::vector<Tensor> GraphRebuild::operands(const Node &node) const {
  std::vector<Tensor> out;
  out.reserve(node.operands.size());
  for (ValueId id : node.operands)
    out.push_back(values_[id]);
  return out;
}

void GraphRebuild::define(const Node &node, const std::vector<Tensor> &results) {
  for (size_t r = 0; r < results.size(); ++r)
    values_[node.results[r]] = results[r];
}

void GraphRebuild::set_outputs() {
  std::vector<ValueId> outputs;
  for (ValueId id : from_.output_ids())
    outputs.push_back(values_[id].value().id());
  to_.set_outputs(outputs, from_.output_names());
}

size_t RewriteStats::total() const {
  size_t t = 0;
  for (const auto &[name, count] : fired)
    t += count;
  return t;
}

void carry_symbols(const Graph &from, Graph &to) {
  // Declared before the rebuild adds inputs: add_input re-declares an input
  // dim with the same origin, which keeps this entry and its bound.
  to.symbol_table() = from.symbol_table();
}

namespace {

/// Makes `to`'s inputs and constants those of `from`.
void copy_interface(const Graph &from, Graph &to) {
  carry_symbols(from, to);
  for (ValueId id : from.input_ids())
    to.add_input(from.value_info(id).type, from.value_info(id).name);
  for (const auto &[name, data] : from.constant_types()) {
    if (const HostTensor *source = from.transposed_source(name))
      to.add_transposed_constant(name, *source);
    else
      to.add_constant(name, data);
  }
}

} // namespace

std::vector<Tensor> copy_node(Graph &to, const Node &node, const std::vector<Tensor> &operands) {
  std::vector<ValueId> ids;
  ids.reserve(operands.size());
  for (const Tensor &t : operands)
    ids.push_back(t.value().id());
  std::vector<Tensor> out;
  for (ValueId r : to.add_node(node.op, ids, node.attrs, node.name))
    out.push_back(Tensor::from_graph_value(to.value(r)));
  return out;
}

namespace {

/// One round over one graph: `from` rebuilt into the empty `to` (its inputs
/// and constants already made). Returns how many nodes a pattern replaced.
size_t rewrite_round(const Graph &from, Graph &to, const std::map<std::string, std::vector<const RewritePattern *>> &by_op,
                     RewriteStats &stats) {
  Readers readers(from);
  GraphMatcher match(from, readers);
  GraphRealizationContext ctx(to);
  GraphRebuild rebuild(from, to);
  rebuild.map_inputs();
  RewriteContext rc{match, ctx, rebuild.values()};
  size_t replaced = 0;
  for (const Node &node : from.nodes()) {
    std::vector<Tensor> operands = rebuild.operands(node);
    std::vector<Tensor> results;
    NodeNameScope named(ctx, node.name); // a replacement's nodes keep the node's name
    if (auto it = by_op.find(node.op); it != by_op.end())
      for (const RewritePattern *p : it->second) {
        results = p->rewrite(node, operands, rc);
        if (!results.empty()) {
          if (results.size() != node.results.size())
            throw Error(ErrorCode::Internal, std::string("rewrite pattern '") + p->name() + "' returned " +
                                                 std::to_string(results.size()) + " results for a node of " +
                                                 std::to_string(node.results.size()));
          for (size_t r = 0; r < results.size(); ++r)
            if (results[r].type() != from.type_of(node.results[r]))
              throw Error(ErrorCode::Internal, std::string("rewrite pattern '") + p->name() + "' changed the type of " +
                                                   node.op + "'s result " + std::to_string(r) + " from " +
                                                   from.type_of(node.results[r]).to_string() + " to " +
                                                   results[r].type().to_string());
          ++stats.fired[p->name()];
          ++replaced;
          break;
        }
      }
    rebuild.define(node, results.empty() ? copy_node(to, node, operands) : results);
  }
  rebuild.set_outputs();
  return replaced;
}

/// Which nodes of `g` something reads (a node whose results are all unread
/// is dead, and so are the nodes only dead ones read). A node that defines
/// a symbol is live while something still names the symbol: a live node's
/// type or shape, an output's type, or another graph of the model
/// (`elsewhere`, conservatively: any of their values) — later types read
/// the symbol, not the node's result, and a symbol nothing names would have
/// no slot in the dims array. A node with an effect (a state write,
/// has_effects) is always live. One backward sweep: a symbol's readers come
/// after the node that defines it.
std::vector<bool> live_nodes(const Graph &g, const std::function<bool(const std::string &)> &elsewhere) {
  std::vector<bool> live(g.nodes().size(), false), needed(g.num_values(), false);
  std::set<std::string> named;
  for (ValueId id : g.output_ids()) {
    needed[id] = true;
    for (const Dim &d : g.type_of(id).shape)
      for (const std::string &s : d.symbols())
        named.insert(s);
  }
  for (size_t n = g.nodes().size(); n-- > 0;) {
    const Node &node = g.nodes()[n];
    live[n] = (defines_symbol(node) && (named.count(defined_symbol(node)) || elsewhere(defined_symbol(node)))) ||
              has_effects(g, node);
    for (ValueId r : node.results)
      live[n] = live[n] || needed[r];
    if (live[n]) {
      for (ValueId id : node.operands)
        needed[id] = true;
      node_symbols(g, node, named);
    }
  }
  return live;
}

/// `from` into the empty `to` without its dead nodes.
void copy_live(const Graph &from, Graph &to, const std::vector<bool> &live) {
  copy_interface(from, to);
  GraphRealizationContext ctx(to); // Tensor::from_graph_value needs one
  GraphRebuild rebuild(from, to);
  rebuild.map_inputs();
  for (size_t n = 0; n < from.nodes().size(); ++n)
    if (live[n])
      rebuild.define(from.nodes()[n], copy_node(to, from.nodes()[n], rebuild.operands(from.nodes()[n])));
  rebuild.set_outputs();
}

bool all_live(const std::vector<bool> &live) {
  for (bool l : live)
    if (!l)
      return false;
  return true;
}

} // namespace

std::unique_ptr<Graph> without_dead_nodes(const Graph &graph) {
  // The symbols each graph names, and in how many graphs each is named:
  // a graph's definition of a symbol another graph names stays.
  std::map<const Graph *, std::set<std::string>> names;
  graph_symbols(graph, names[&graph]);
  for (const auto &[name, sub] : graph.subgraphs())
    graph_symbols(*sub, names[sub.get()]);
  std::map<std::string, size_t> graphs_naming;
  for (const auto &[g, symbols] : names)
    for (const std::string &s : symbols)
      ++graphs_naming[s];
  auto elsewhere = [&](const Graph *g) {
    return [&, g](const std::string &s) {
      auto it = graphs_naming.find(s);
      return it != graphs_naming.end() && it->second > names[g].count(s);
    };
  };
  std::map<std::string, std::vector<bool>> live;
  bool any_dead = false;
  for (const auto &[name, sub] : graph.subgraphs()) {
    live[name] = live_nodes(*sub, elsewhere(sub.get()));
    any_dead = any_dead || !all_live(live[name]);
  }
  std::vector<bool> root_live = live_nodes(graph, elsewhere(&graph));
  if (!any_dead && all_live(root_live))
    return nullptr;
  auto out = std::make_unique<Graph>(graph.name());
  for (const Graph *sub : subgraphs_bodies_first(graph)) { // a node's bodies before it
    auto body = std::make_shared<Graph>(sub->name());
    out->add_subgraph(body);
    copy_live(*sub, *body, live[sub->name()]);
  }
  copy_live(graph, *out, root_live);
  return out;
}

std::unique_ptr<Graph> apply_patterns(const Graph &graph, const std::vector<const RewritePattern *> &patterns,
                                      RewriteStats *stats, size_t max_rounds) {
  std::map<std::string, std::vector<const RewritePattern *>> by_op;
  for (const RewritePattern *p : patterns)
    by_op[p->root_op()].push_back(p);
  RewriteStats local;
  RewriteStats &s = stats ? *stats : local;
  std::unique_ptr<Graph> current;
  for (size_t round = 0; round < max_rounds; ++round) {
    const Graph &from = current ? *current : graph;
    auto to = std::make_unique<Graph>(from.name());
    size_t replaced = 0;
    // Bodies first: a call node's inference looks its callee up.
    for (const Graph *sub : subgraphs_bodies_first(from)) {
      auto body = std::make_shared<Graph>(sub->name());
      to->add_subgraph(body);
      copy_interface(*sub, *body);
      replaced += rewrite_round(*sub, *body, by_op, s);
    }
    copy_interface(from, *to);
    replaced += rewrite_round(from, *to, by_op, s);
    ++s.rounds;
    if (replaced == 0)
      break; // `to` is `from` again
    current = std::move(to);
    if (auto pruned = without_dead_nodes(*current))
      current = std::move(pruned);
  }
  return current;
}

} // namespace maxc
