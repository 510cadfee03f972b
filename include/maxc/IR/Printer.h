// Human-readable text form of a Graph (what `maxc trace --emit text` prints).
//
//   graph @mlp(%0: f32[batch,784] "x") -> (%9 "logits") {
//     %1 = constant() {name = "fc1.weight"} : f32[512,784]
//     %2 = linear(%0, %1, ...) : f32[batch,512]
//     ...
//   }
#pragma once

#include <string>

namespace maxc {

class Graph;

struct PrintOptions {
  /// Show value and node debug names (input/output names, qualified node names).
  bool debug_names = true;
};

/// The whole graph: constants summary, subgraph definitions, then the body.
std::string print_graph(const Graph &graph, const PrintOptions &options = {});
/// Only this graph's signature and nodes (no subgraphs, no constant table).
std::string print_graph_body(const Graph &graph, const PrintOptions &options = {});

} // namespace maxc
