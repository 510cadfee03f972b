// The JSON form of a Graph (what `maxc trace --emit json` prints). It
// round-trips exactly: graph_from_json(graph_to_json(g)) equals g.
//
// Constants are either embedded (base64 of the raw little-endian bytes) or
// referenced by name, with their data supplied by a resolver when the graph
// is read back (e.g. from a safetensors file). See docs/graph-json.md.
#pragma once

#include "maxc/IR/Graph.h"

#include <functional>
#include <memory>
#include <string>

namespace maxc {

struct GraphJsonOptions {
  /// Embed constant bytes; otherwise only name, dtype and shape are written.
  bool embed_constants = true;
  /// Pretty-print with this indent (-1: compact).
  int indent = 2;
  /// With embed_constants false: the constants that are weights, written
  /// without bytes (read back from a weights file); every other constant
  /// (a model's inline constants) is embedded. Null: all are weights.
  std::function<bool(const std::string &name)> is_weight;
};

std::string graph_to_json(const Graph &graph, const GraphJsonOptions &options = {});

/// Supplies the data of a constant that the JSON references without bytes,
/// given its declared dtype and shape (the reader checks the result).
using ConstantResolver =
    std::function<HostTensor(const std::string &name, DType dtype, const std::vector<int64_t> &shape)>;

/// Parses and verifies a graph. Errors throw maxc::Error whose location is
/// `filename` plus the JSON pointer of the offending element.
std::unique_ptr<Graph> graph_from_json(const std::string &text, const std::string &filename = "<graph>",
                                       const ConstantResolver &resolver = nullptr);

/// True when `text` parses as JSON with "format": "maxc-graph" at the top.
bool looks_like_graph_json(const std::string &text);

} // namespace maxc
