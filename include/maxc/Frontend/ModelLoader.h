// Loading a model: parse the maxc JSON model format (docs/model-format.md),
// validate it, and trace it into a Graph through the Tensor API inside a
// GraphRealizationContext. Also accepts the flat graph JSON that
// `maxc trace --emit json` prints.
//
// Problems are reported to a DiagnosticEngine — all of them, not only the
// first — and the returned graph is null when there was any error.
#pragma once

#include "maxc/IR/Graph.h"
#include "maxc/Support/Diagnostics.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace maxc {

struct LoadOptions {
  /// Weights file; overrides the model's "weights" (relative to the cwd).
  std::string weights_path;
  /// Instead of reading weights, use zero tensors of the declared param
  /// shapes (for `maxc init-weights` and for checking a model's structure
  /// before weights exist). Undeclared params are errors in this mode.
  bool synthesize_weights = false;
  /// Upper bound on statements executed while tracing (repeats and calls
  /// multiply), so a hostile model cannot make the tracer run forever.
  uint64_t max_statements = 50'000'000;
  /// ONNX: symbolic dims (dim_param names, or their mangled C names) pinned
  /// to static sizes (`--dim NAME=VALUE`).
  std::map<std::string, int64_t> dims;
  /// ONNX: find repeated layers and trace each unique block once as a
  /// subgraph definition (`--no-dedup` turns it off).
  bool dedup = true;
};

struct TraceStats {
  size_t nodes = 0;                 // nodes in the root graph
  size_t subgraph_nodes = 0;        // nodes in all subgraph definitions
  size_t subgraph_definitions = 0;
  size_t subgraph_calls = 0;
  size_t subgraph_traces = 0;       // bodies traced (keyed calls skip tracing)
  size_t constants = 0;
  uint64_t constant_bytes = 0;
  size_t weights_read = 0;
  double trace_ms = 0;
};

/// A model parameter as declared by the modules, with its qualified name.
struct ParamSpec {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::string init; // "normal", "uniform", "ones", "zeros", "normal:S"
};

struct LoadedModel {
  std::unique_ptr<Graph> graph; // null when diagnostics has errors
  TraceStats stats;
  /// Every parameter read, in first-use order (with declared init, if any).
  std::vector<ParamSpec> params;
  /// The weights file used ("" if none), and every file read (for depfiles).
  std::string weights_path;
  std::vector<std::string> files_read;
};

LoadedModel load_model(const std::string &path, const LoadOptions &options, DiagnosticEngine &diagnostics);
/// Same, for a model already in memory; `path` names it in diagnostics and
/// anchors relative weight paths.
LoadedModel load_model_text(const std::string &text, const std::string &path, const LoadOptions &options,
                            DiagnosticEngine &diagnostics);

} // namespace maxc
