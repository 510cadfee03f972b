// The symbolic dim names a graph uses: in its values' types and shape
// attributes, those of its subgraphs and of the bodies its nodes invoke
// (node_bodies) included, nested to any depth. One walk for every layer that asks
// (the code generators' argument order, `--dim` name checks).
#pragma once

#include "maxc/IR/Graph.h"

#include <set>
#include <string>
#include <vector>

namespace maxc {

/// The symbols one node mentions: in its results' types and its shape
/// attributes (what dim_symbols collects, node by node), added to `out`.
void node_symbols(const Graph &graph, const Node &node, std::set<std::string> &out);

/// The symbols of one graph's own values and nodes (not its bodies'),
/// added to `out`.
void graph_symbols(const Graph &graph, std::set<std::string> &out);

/// Every symbol of the graph, its subgraphs and the bodies its nodes invoke
/// (recursively), sorted and unique.
std::vector<std::string> dim_symbols(const Graph &graph);

/// The graph's symbol table (Graph::symbol_table: input dims, declared
/// symbols, bounds) completed with every other symbol of dim_symbols as a
/// dim argument: its names() include all of dim_symbols(graph).
SymbolTable model_symbols(const Graph &graph);

} // namespace maxc
