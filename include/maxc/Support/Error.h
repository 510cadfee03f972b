// Errors raised by the maxc library.
//
// Library code reports a problem by throwing maxc::Error (or a subclass) that
// carries a stable error code and, where known, the location (file, JSON
// pointer or graph node). Only the CLI decides how to print it and which exit
// code to use; see docs/diagnostics.md.
#pragma once

#include <stdexcept>
#include <string>

namespace maxc {

/// Stable error codes. The numeric values never change once released; the
/// textual form ("E0101") is what users see and search for.
enum class ErrorCode : int {
  Internal = 1,          // a bug in maxc
  InvalidArgument = 2,   // an API or CLI argument is wrong
  // IR and ops (01xx)
  UnknownOp = 101,
  OperandCount = 102,
  DTypeMismatch = 103,
  ShapeMismatch = 104,
  InvalidAttribute = 105,
  UnknownAttribute = 106,
  DimOverflow = 107,
  UnboundDim = 108,
  InvalidGraph = 109,
  // Realization and tracing (02xx)
  Realization = 201,
  NoContext = 202,
  ForeignValue = 203,
  // Runtime (03xx)
  InputMismatch = 301,
  NoGpuDevice = 302,     // --device cuda: no CUDA driver, or no device it can use
  Collective = 303,      // a collective of a tensor-parallel run failed: a rank failed, timed out, or ranks disagree
  // Weights and data files (04xx)
  FileNotReadable = 401,
  SafetensorsHeader = 402,
  SafetensorsOffsets = 403,
  SafetensorsDType = 404,
  DuplicateTensorName = 405,
  NpyFormat = 406,
  FileWrite = 407,
  MemoryBudget = 408,    // a tensor or a run needs more memory than --max-memory allows
  // Model files (05xx)
  ModelSyntax = 501,     // malformed JSON
  ModelSchema = 502,     // a field has the wrong type, is missing or unknown
  UndefinedName = 503,   // a value, module or constant that does not exist
  ModuleCycle = 504,     // modules call each other in a cycle
  MissingWeight = 505,   // a parameter has no tensor in the weights file
  WeightMismatch = 506,  // a weight's shape/dtype differs from its declaration
  UnusedWeight = 507,    // a weight the model never reads (warning)
  UnknownOption = 508,   // a module option that the module does not declare
  ModuleDepth = 509,     // module calls nest deeper than the limit
  JsonDepth = 510,       // JSON (model, graph, safetensors header) nested deeper than the limit
  DuplicateKey = 511,    // a key appears twice in one JSON object
  // ONNX models (06xx; lib/Frontend/Onnx)
  OnnxFormat = 601,        // not a readable ONNX protobuf (truncated, wrong magic)
  OnnxGraph = 602,         // a cycle, an undefined or duplicate name, a missing input
  OnnxTensorData = 603,    // tensor data disagrees with its shape, or its dims overflow
  OnnxExternalData = 604,  // external data out of range or outside the model's folder
  OnnxUnsupportedOp = 605, // an op, domain or opset maxc does not implement
  OnnxUnsupportedType = 606, // a dtype or value kind maxc has no counterpart for
  OnnxAttribute = 607,     // an attribute or operand value maxc does not support
  OnnxNotFoldable = 608,   // a shape computation needs tensor values known only at run time
};

/// "E0104"-style code text.
std::string error_code_name(ErrorCode code);

/// The base of every error maxc throws.
class Error : public std::runtime_error {
public:
  Error(ErrorCode code, const std::string &message, std::string location = {})
      : std::runtime_error(message), code_(code), location_(std::move(location)) {}

  ErrorCode code() const { return code_; }
  /// Where the problem is: "node %4 (matmul)", a JSON pointer, a file... May be empty.
  const std::string &location() const { return location_; }
  /// The message without the location.
  std::string message() const { return what(); }
  /// "location: error[E0104]: message".
  std::string formatted() const;

private:
  ErrorCode code_;
  std::string location_;
};

/// Thrown when a tensor is realized inside a context that cannot realize
/// (a GraphRealizationContext): the TypeError of the seed.
class RealizationError : public Error {
public:
  explicit RealizationError(const std::string &message)
      : Error(ErrorCode::Realization, message) {}
};

} // namespace maxc
