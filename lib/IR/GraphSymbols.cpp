#include "maxc/IR/GraphSymbols.h"

#include <set>

namespace maxc {

namespace {

void collect(const Graph &g, std::set<std::string> &out) {
  for (size_t v = 0; v < g.num_values(); ++v)
    for (const Dim &d : g.type_of(static_cast<ValueId>(v)).shape)
      for (const std::string &s : d.symbols())
        out.insert(s);
  for (const Node &n : g.nodes())
    for (const auto &[name, value] : n.attrs.values())
      if (const Shape *shape = std::get_if<Shape>(&value))
        for (const Dim &d : *shape)
          for (const std::string &s : d.symbols())
            out.insert(s);
}

} // namespace

std::vector<std::string> dim_symbols(const Graph &graph) {
  std::set<std::string> out;
  collect(graph, out);
  for (const auto &[name, sub] : graph.subgraphs())
    collect(*sub, out); // subgraph bodies hold no subgraphs of their own
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
