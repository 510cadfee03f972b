// Loading an ONNX model (docs/ONNX.md): the protobuf is read (initializers,
// external data through a memory map), shape computations are folded on
// symbolic dims, and the remaining nodes are traced through the Tensor API
// inside a GraphRealizationContext — the same LoadedModel the JSON format
// gives. Protobuf stays out of this header.
#pragma once

#include "maxc/Frontend/ModelLoader.h"
#include "maxc/IR/HostTensor.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace maxc {

/// True when `bytes` starts with a binary byte (not printable ASCII or
/// whitespace; ONNX files start with the tag 0x08), so the loader treats it
/// as an ONNX protobuf rather than JSON.
bool looks_like_onnx(const std::string &bytes);

struct OnnxImportOptions {
  /// Graph inputs whose values are fixed at compile time: they become
  /// constants (and leave the graph's inputs), so shape computations that
  /// read them fold. The conformance runner pins the inputs the importer
  /// reports in `OnnxImportInfo::needs_value`.
  std::map<std::string, HostTensor> pinned_inputs;
};

struct OnnxImportInfo {
  /// Graph inputs a node needed the value of (a value-dependent shape).
  std::vector<std::string> needs_value;
  /// ONNX name of each graph input / output of the result, in order (the
  /// graph's own names are mangled C identifiers).
  std::vector<std::string> input_names, output_names;
  /// Every graph input that is not an initializer, pinned ones included, in
  /// the model's order (the order of a conformance test's input_N.pb).
  std::vector<std::string> declared_inputs;
  /// Every op type the graph uses, in order of first appearance.
  std::vector<std::string> op_types;
  /// Every op type the model uses that maxc does not implement.
  std::vector<std::string> unsupported_ops;
};

/// Loads an ONNX model held in `bytes`; `path` names it in diagnostics and
/// anchors external data. Problems go to `diagnostics` (graph null then).
LoadedModel load_onnx_model(const std::string &bytes, const std::string &path, const LoadOptions &options,
                            DiagnosticEngine &diagnostics, const OnnxImportOptions &onnx = {},
                            OnnxImportInfo *info = nullptr);

/// Reads a serialized ONNX TensorProto (a conformance test's input_N.pb /
/// output_N.pb). Throws maxc::Error. `declared`: the dtype the model declares
/// for it; ONNX's test data stores bfloat16 tensors as UINT16 (numpy has no
/// bfloat16), read as bf16 when the model declares bf16.
HostTensor read_onnx_tensor_file(const std::string &path, std::optional<DType> declared = std::nullopt);

} // namespace maxc
