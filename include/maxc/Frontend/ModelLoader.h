// Loading a model: parse the maxc JSON model format (docs/model-format.md),
// validate it, and trace it into a Graph through the Tensor API inside a
// GraphRealizationContext. Also accepts the flat graph JSON that
// `maxc trace --emit json` prints.
//
// Problems are reported to a DiagnosticEngine — all of them, not only the
// first — and the returned graph is null when there was any error.
#pragma once

#include "maxc/IR/Graph.h"
#include "maxc/IR/HostTensor.h"
#include "maxc/Support/Diagnostics.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
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
  /// multiply), so a hostile model cannot make the tracer run forever or
  /// fill memory: each traced statement costs about 1 KB and 15 µs, so the
  /// default bounds a trace near 2 GB and half a minute, hundreds of times
  /// what the largest real models need.
  uint64_t max_statements = 2'000'000;
  /// Symbolic input dims (JSON dims; ONNX dim_param names, or their mangled
  /// C names) pinned to static sizes (`--dim NAME=VALUE`). A name that is no
  /// input dim is an error, unless `dims_may_be_run_values` (below).
  std::map<std::string, int64_t> dims;
  /// `maxc run` / `profile`: a `dims` entry that names no input dim is not an
  /// error here; the command gives it as the value of a dim no input
  /// determines (LoadedModel::pinned_dims tells the two kinds apart).
  bool dims_may_be_run_values = false;
  /// ONNX: graph inputs fixed at compile time (`--bind NAME=VALUES`): the
  /// input becomes a constant and leaves the model's inputs, so an If on it
  /// resolves and shape computations on it fold. VALUES: comma-separated
  /// numbers, as many as the input's static shape holds, or a .npy file.
  std::map<std::string, std::string> bound_inputs;
  /// ONNX: upper bounds of dims read at run time from a tensor's values
  /// (`--max-dim NAME=N`; NAME: the dim's symbol, or the tensor holding the
  /// shape, starts, k ..., bounding every dim read from it). Buffers are
  /// sized by the bound; a larger value at run time fails the run.
  std::map<std::string, int64_t> max_dims;
  /// ONNX: the values the run will give graph inputs (`maxc run`'s files).
  /// They stay run-time inputs; a dim read from one without a bound from
  /// its op or --max-dim takes its value here as the bound.
  std::map<std::string, HostTensor> input_values;
  /// ONNX: find repeated layers and trace each unique block once as a
  /// subgraph definition (`--no-dedup` turns it off).
  bool dedup = true;
  /// ONNX: KV-cache pairs made model state (`--state`): "auto" takes every
  /// graph output computed as Concat(graph input, new rows) along a symbolic
  /// dim; else comma-separated IN=OUT pairs, where '*' matches the same
  /// text in both names. The inputs become state buffers [max_context,
  /// ...] written in place (ModelState), the outputs leave the graph.
  std::string state;
  /// ONNX: QDQ groups (DequantizeLinear → op → QuantizeLinear) become the
  /// integer ops ONNX Runtime runs them as (docs/ONNX.md, "QDQ models");
  /// `--no-qdq-fusion` keeps the float composition.
  bool fuse_qdq = true;
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
  size_t qdq_groups = 0;            // ONNX QDQ groups made integer ops
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
  /// Graph input/output name → the name the source model gave it, where
  /// they differ (ONNX names are mangled to C identifiers for the graph);
  /// headers and manifests show the source names.
  std::map<std::string, std::string> source_names;
  /// ONNX: graph inputs fixed to their LoadOptions::input_values because a
  /// node needs their values at import (axes, a rank): as --bind does, they
  /// left the graph's inputs.
  std::vector<std::string> bound_from_values;
  /// The LoadOptions::dims entries that pinned an input dim at import.
  std::set<std::string> pinned_dims;
};

/// The largest byte size (element count × dtype size) of any one tensor:
/// 2^62, so sums and offsets of a few tensors still fit int64. The same rule
/// applies everywhere: `check`/`trace`/`compile` reject a static shape over
/// it at the statement that makes it, and `run` a shape over it once its
/// symbolic dims are bound.
constexpr uint64_t kMaxTensorBytes = uint64_t(1) << 62;

/// numel(shape) × dtype_size(dtype), or nullopt when the product overflows
/// or exceeds kMaxTensorBytes.
std::optional<uint64_t> tensor_byte_size(DType dtype, const std::vector<int64_t> &shape);

/// The default memory budget of `maxc run` (--max-memory): the machine's
/// physical memory.
uint64_t default_max_memory();

/// "8G", "512M", "1048576", "64K" (powers of 1024; T, G, M, K, optional
/// trailing "B" or "iB"); nullopt when malformed or over 2^62.
std::optional<uint64_t> parse_byte_size(const std::string &text);

/// Checks `maxc run --dim NAME=N` values against `graph`: every NAME must be
/// a symbolic dim the graph uses. Throws maxc::Error (InvalidArgument)
/// naming the unknown symbol and listing the graph's.
void check_dim_names(const Graph &graph, const DimBindings &dims);

/// Compile-time pins (`--dim NAME=N`, LoadOptions::dims) that name none of
/// the model's input dims (`known`: their symbols, and ONNX dim_param
/// names): one InvalidArgument error each on `--dim`, naming the model file
/// and the dims it has — a pin is never silently ignored.
void report_unknown_dims(const std::map<std::string, int64_t> &dims, const std::set<std::string> &known,
                         const std::string &path, DiagnosticEngine &diagnostics);

/// Before a run allocates anything: binds the symbolic dims from `inputs`
/// (and `dims`), then checks that every tensor of the graph fits
/// kMaxTensorBytes and `max_bytes`, and that all of them together (what the
/// reference interpreter holds at its peak) fit `max_bytes`. Throws
/// maxc::Error (MemoryBudget) naming the tensor and the byte count; shapes
/// that cannot be evaluated yet are left to the run, which reports them.
void check_run_memory(const Graph &graph, const std::vector<HostTensor> &inputs, DimBindings dims,
                      uint64_t max_bytes);

LoadedModel load_model(const std::string &path, const LoadOptions &options, DiagnosticEngine &diagnostics);
/// Same, for a model already in memory; `path` names it in diagnostics and
/// anchors relative weight paths.
LoadedModel load_model_text(const std::string &text, const std::string &path, const LoadOptions &options,
                            DiagnosticEngine &diagnostics);

} // namespace maxc
