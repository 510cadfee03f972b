#include "maxc/IR/GraphSymbols.h"

#include <set>

namespace maxc {

void node_symbols(const Graph &graph, const Node &node, std::set<std::string> &out) {
  for (ValueId r : node.results)
    for (const Dim &d : graph.type_of(r).shape)
      for (const std::string &s : d.symbols())
        out.insert(s);
  for (const auto &[name, value] : node.attrs.values())
    if (const Shape *shape = std::get_if<Shape>(&value))
      for (const Dim &d : *shape)
        for (const std::string &s : d.symbols())
          out.insert(s);
}

void graph_symbols(const Graph &g, std::set<std::string> &out) {
  for (size_t v = 0; v < g.num_values(); ++v)
    for (const Dim &d : g.type_of(static_cast<ValueId>(v)).shape)
      for (const std::string &s : d.symbols())
        out.insert(s);
  for (const Node &n : g.nodes())
    node_symbols(g, n, out);
}

std::vector<std::string> dim_symbols(const Graph &graph) {
  // Every graph reachable from `graph` through its subgraph table and the
  // bodies its nodes invoke, however deep, each once (a worklist, so neither
  // depth nor a cycle of calls can overflow the stack).
  std::set<std::string> out;
  std::set<const Graph *> seen{&graph};
  std::vector<const Graph *> work{&graph};
  auto visit = [&](const Graph *g) {
    if (seen.insert(g).second)
      work.push_back(g);
  };
  while (!work.empty()) {
    const Graph *g = work.back();
    work.pop_back();
    graph_symbols(*g, out);
    for (const auto &[name, sub] : g->subgraphs())
      visit(sub.get());
    for (const Node &n : g->nodes())
      for (const Graph *body : node_bodies(*g, n))
        visit(body);
  }
  return {out.begin(), out.end()};
}

SymbolTable model_symbols(const Graph &graph) {
  SymbolTable table = graph.symbol_table();
  for (const std::string &s : dim_symbols(graph))
    if (!table.contains(s))
      table.declare(s, SymbolOrigin::DimArgument);
  return table;
}

} // namespace maxc
