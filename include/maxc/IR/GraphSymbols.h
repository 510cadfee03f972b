// The symbolic dim names a graph uses: in its values' types and shape
// attributes, its subgraphs' included. One walk for every layer that asks
// (the code generators' argument order, `--dim` name checks).
#pragma once

#include "maxc/IR/Graph.h"

#include <string>
#include <vector>

namespace maxc {

/// Every symbol of the graph and of its subgraphs, sorted and unique.
std::vector<std::string> dim_symbols(const Graph &graph);

/// The graph's symbol table (Graph::symbol_table: input dims, declared
/// symbols, bounds) completed with every other symbol of dim_symbols as a
/// dim argument: its names() include all of dim_symbols(graph).
SymbolTable model_symbols(const Graph &graph);

} // namespace maxc
