// Graphviz form of a Graph (`maxc trace --emit dot`): the root graph's nodes,
// each subgraph definition as a cluster, and a dashed edge from every node
// that invokes a body (a call, node_bodies) into the cluster of each body it
// invokes, from inside clusters too — so a model can be looked at as a picture.
#pragma once

#include <string>

namespace maxc {

class Graph;

std::string print_graph_dot(const Graph &graph);

} // namespace maxc
