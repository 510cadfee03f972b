// Internal to the ONNX front end: Loop and Scan (OnnxLoop.cpp), unrolled at
// import. They run their body subgraph once per iteration through the
// importer (BodyHost, which OnnxImporter.cpp implements).
#pragma once

#include "OnnxOps.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace maxc::onnx_import {

/// What Loop and Scan need from the importer.
class BodyHost {
public:
  virtual ~BodyHost() = default;
  /// The outer values `body` (or a subgraph inside it) reads that are traced
  /// tensors of the current context, by name: a call body takes them as
  /// arguments. Throws when one is undefined or failed to import.
  virtual std::vector<std::pair<std::string, Tensor>> traced_captures(const onnx::GraphProto &body) = 0;
  /// Runs `body` once: its inputs bound to `inputs` (in order), the outer
  /// names in `overrides` shadowed (a call body's arguments), `in_call`
  /// when it is traced into a subgraph call. Returns its outputs; the
  /// importer's values are as before. Throws an Error naming the body node
  /// that failed. `where` names the body in diagnostics.
  virtual std::vector<Val> run_body(const onnx::GraphProto &body, const std::vector<Val> &inputs,
                                    const std::map<std::string, Val> &overrides, bool in_call,
                                    const std::string &where) = 0;
  /// A value as a tensor of the current context.
  virtual Tensor tensor(const Val &v) = 0;
  /// Throws OnnxNotFoldable: input `index` of `node` (`what`) must be known
  /// at import time; names the graph inputs it is computed from (and
  /// records them as inputs a caller may pin).
  [[noreturn]] virtual void needs_import_value(const OnnxNode &node, size_t index, const std::string &what) = 0;
};

/// ONNX Loop: the trip count and the conditions must be known at import.
std::vector<Val> loop(const OnnxNode &node, BodyHost &host);
/// ONNX Scan (opset 8's batched form and 9+): a static sequence length.
std::vector<Val> scan(const OnnxNode &node, BodyHost &host);

} // namespace maxc::onnx_import
