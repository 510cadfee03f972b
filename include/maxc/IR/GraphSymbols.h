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

} // namespace maxc
