// maxc trace: print the traced graph as text, JSON or Graphviz, and stats.
#include "Diagnose.h"

#include "maxc/Frontend/ModelLoader.h"
#include "maxc/IR/DotPrinter.h"
#include "maxc/IR/GraphJson.h"
#include "maxc/IR/Printer.h"
#include "maxc/Transforms/Canonicalize.h"
#include "maxc/Transforms/Shard.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <set>

namespace maxc::cli {

static std::string stats_text(const LoadedModel &model) {
  const TraceStats &s = model.stats;
  char trace_ms[32];
  std::snprintf(trace_ms, sizeof trace_ms, "%.3f", s.trace_ms);
  std::string out;
  out += "nodes=" + std::to_string(s.nodes) + "\n";
  out += "subgraph_nodes=" + std::to_string(s.subgraph_nodes) + "\n";
  out += "subgraph_definitions=" + std::to_string(s.subgraph_definitions) + "\n";
  out += "subgraph_calls=" + std::to_string(s.subgraph_calls) + "\n";
  out += "subgraph_traces=" + std::to_string(s.subgraph_traces) + "\n";
  out += "constants=" + std::to_string(s.constants) + "\n";
  out += "constant_bytes=" + std::to_string(s.constant_bytes) + "\n";
  out += "weights_read=" + std::to_string(s.weights_read) + "\n";
  if (s.qdq_groups)
    out += "qdq_groups=" + std::to_string(s.qdq_groups) + "\n";
  out += "inputs=" + std::to_string(model.graph->input_ids().size()) + "\n";
  out += "outputs=" + std::to_string(model.graph->output_ids().size()) + "\n";
  out += std::string("trace_ms=") + trace_ms + "\n";
  return out;
}

int run_trace(const GlobalOptions &global, const TraceOptions &options) {
  DiagnosticEngine diagnostics;
  diagnostics.set_warnings_as_errors(global.warnings_as_errors);
  LoadOptions load = load_options(global);
  load.weights_path = options.weights;
  load.synthesize_weights = options.no_weights;
  LoadedModel model = load_model(options.model, load, diagnostics);
  quantize_loaded_weights(global, model, options.model, diagnostics);
  if (!model.graph)
    return finish(global, diagnostics);

  if (options.emit == "sharding" && options.tensor_parallel < 2) {
    diagnostics.error(ErrorCode::InvalidArgument, "", "--emit", "--emit sharding needs --tensor-parallel N (N >= 2)");
    return finish(global, diagnostics);
  }
  // With --tensor-parallel: one rank's program. With --canonicalize: the
  // graph the compile pipeline hands to decompose.
  std::unique_ptr<Graph> sharded;
  ShardReport sharding;
  if (options.tensor_parallel != 1 || options.rank != 0) {
    try {
      sharded = shard_graph(*model.graph, ShardOptions{options.tensor_parallel, options.rank, global.shard_replicated},
                            &sharding);
    } catch (const Error &e) {
      diagnostics.error(e, options.model, "");
      return finish(global, diagnostics);
    }
  }
  const Graph &traced = sharded ? *sharded : *model.graph;
  RewriteStats rewrites;
  std::unique_ptr<Graph> canonical = options.canonicalize ? canonicalize(traced, &rewrites) : nullptr;
  const Graph &graph = canonical ? *canonical : traced;

  std::string text;
  if (!options.stats || options.emit_given) {
    if (options.emit == "sharding") {
      text = sharding.text();
    } else if (options.emit == "text") {
      text = print_graph(graph);
    } else if (options.emit == "json") {
      GraphJsonOptions json;
      json.embed_constants = options.embed_constants;
      std::set<std::string> weights; // inline constants are embedded, so the JSON loads back
      for (const ParamSpec &p : model.params)
        weights.insert(p.name);
      json.is_weight = [&](const std::string &name) { return weights.count(name) != 0; };
      text = graph_to_json(graph, json);
    } else {
      text = print_graph_dot(graph);
    }
  }
  if (options.stats) {
    text += stats_text(model);
    if (options.canonicalize) {
      text += "canonical_nodes=" + std::to_string(graph.nodes().size()) + "\n";
      size_t sub_nodes = 0;
      for (const auto &[name, sub] : graph.subgraphs())
        sub_nodes += sub->nodes().size();
      text += "canonical_subgraph_nodes=" + std::to_string(sub_nodes) + "\n";
      text += "rewrites=" + std::to_string(rewrites.total()) + "\n";
      for (const auto &[pattern, count] : rewrites.fired) { // rewrite_pow_by_constant=3
        std::string key = "rewrite_" + pattern;
        std::replace(key.begin(), key.end(), '-', '_');
        text += key + "=" + std::to_string(count) + "\n";
      }
    }
  }
  write_output(options.output, text, diagnostics);
  return finish(global, diagnostics);
}

} // namespace maxc::cli
