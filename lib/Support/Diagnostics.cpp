#include "maxc/Support/Diagnostics.h"

#include <nlohmann/json.hpp>

#include <cctype>
#include <cstdio>

namespace maxc {

namespace {

// Where SARIF consumers send people to learn about the tool. The codes
// themselves are documented in docs/diagnostics.md of the source tree.
// Placeholder: replace with the project's published home page.

// A path as a URI reference (RFC 3986): unreserved characters and '/' kept,
// everything else percent-encoded; absolute paths become file:// URIs.
std::string path_to_uri(const std::string &path) {
  std::string out = !path.empty() && path[0] == '/' ? "file://" : "";
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

} // namespace

const std::vector<ErrorCodeInfo> &error_code_table() {
  static const std::vector<ErrorCodeInfo> table = {
      {ErrorCode::Internal, "Internal", "A bug in maxc."},
      {ErrorCode::InvalidArgument, "InvalidArgument", "An API or command-line argument is wrong."},
      {ErrorCode::UnknownOp, "UnknownOp", "No op of that name."},
      {ErrorCode::OperandCount, "OperandCount", "Wrong number of operands."},
      {ErrorCode::DTypeMismatch, "DTypeMismatch", "Operand dtypes disagree or are not allowed."},
      {ErrorCode::ShapeMismatch, "ShapeMismatch", "Shapes do not fit (broadcast, contraction, reshape)."},
      {ErrorCode::InvalidAttribute, "InvalidAttribute", "An attribute value is missing, ill-typed or out of range."},
      {ErrorCode::UnknownAttribute, "UnknownAttribute", "The op has no such attribute."},
      {ErrorCode::DimOverflow, "DimOverflow", "A dimension computation overflows 64 bits."},
      {ErrorCode::UnboundDim, "UnboundDim", "A symbolic dim has no value."},
      {ErrorCode::InvalidGraph, "InvalidGraph", "Malformed graph or graph JSON."},
      {ErrorCode::Realization, "Realization", "A graph context was asked to realize a tensor."},
      {ErrorCode::NoContext, "NoContext", "An op was recorded with no realization context."},
      {ErrorCode::ForeignValue, "ForeignValue", "A tensor from another context or graph."},
      {ErrorCode::InputMismatch, "InputMismatch", "Run-time inputs do not match the model's inputs."},
      {ErrorCode::NoGpuDevice, "NoGpuDevice", "No GPU driver, or no device it can use, for --device cuda."},
      {ErrorCode::Collective, "Collective",
       "A collective of a tensor-parallel run failed: a rank failed or timed out, or the ranks disagree on the step."},
      {ErrorCode::FileNotReadable, "FileNotReadable", "A file cannot be opened or read."},
      {ErrorCode::SafetensorsHeader, "SafetensorsHeader", "Malformed safetensors header."},
      {ErrorCode::SafetensorsOffsets, "SafetensorsOffsets",
       "Safetensors offsets out of range, overlapping or mis-sized."},
      {ErrorCode::SafetensorsDType, "SafetensorsDType", "Unknown safetensors dtype."},
      {ErrorCode::DuplicateTensorName, "DuplicateTensorName", "A tensor name appears twice."},
      {ErrorCode::NpyFormat, "NpyFormat", "Malformed or unsupported .npy file."},
      {ErrorCode::FileWrite, "FileWrite", "An output cannot be written (nothing partial is left)."},
      {ErrorCode::MemoryBudget, "MemoryBudget",
       "A tensor, or all of a run's tensors together, would need more memory than --max-memory allows."},
      {ErrorCode::ModelSyntax, "ModelSyntax", "The model is not valid JSON."},
      {ErrorCode::ModelSchema, "ModelSchema", "A field is missing, unknown or of the wrong type."},
      {ErrorCode::UndefinedName, "UndefinedName", "A value, module or constant that does not exist."},
      {ErrorCode::ModuleCycle, "ModuleCycle", "Modules call each other in a cycle."},
      {ErrorCode::MissingWeight, "MissingWeight", "A parameter has no tensor in the weights file."},
      {ErrorCode::WeightMismatch, "WeightMismatch", "A weight's shape or dtype differs from its declaration."},
      {ErrorCode::UnusedWeight, "UnusedWeight", "A weight the model never reads."},
      {ErrorCode::UnknownOption, "UnknownOption", "A module option that the module does not declare."},
      {ErrorCode::ModuleDepth, "ModuleDepth", "Module calls nest deeper than the limit."},
      {ErrorCode::JsonDepth, "JsonDepth", "JSON nested deeper than the limit."},
      {ErrorCode::DuplicateKey, "DuplicateKey", "A key appears twice in one JSON object."},
  };
  return table;
}

std::string_view severity_name(Severity severity) {
  switch (severity) {
  case Severity::error: return "error";
  case Severity::warning: return "warning";
  case Severity::note: return "note";
  }
  return "?";
}

std::string Diagnostic::to_text() const {
  std::string out;
  if (!file.empty())
    out += file + ": ";
  if (!pointer.empty())
    out += pointer + ": ";
  out += std::string(severity_name(severity)) + "[" + error_code_name(code) + "]: " + message;
  return out;
}

void DiagnosticEngine::report(Diagnostic d) {
  if (d.severity == Severity::warning && warnings_as_errors_)
    d.severity = Severity::error;
  for (const Diagnostic &seen : diagnostics_)
    if (seen.severity == d.severity && seen.code == d.code && seen.file == d.file && seen.pointer == d.pointer &&
        seen.message == d.message)
      return;
  if (d.severity == Severity::error)
    ++errors_;
  else if (d.severity == Severity::warning)
    ++warnings_;
  diagnostics_.push_back(std::move(d));
}

void DiagnosticEngine::error(ErrorCode code, const std::string &file, const std::string &pointer,
                             const std::string &message) {
  report(Diagnostic{Severity::error, code, file, pointer, message});
}

void DiagnosticEngine::warning(ErrorCode code, const std::string &file, const std::string &pointer,
                               const std::string &message) {
  report(Diagnostic{Severity::warning, code, file, pointer, message});
}

void DiagnosticEngine::error(const Error &e, const std::string &file, const std::string &pointer) {
  std::string where = pointer;
  if (where.empty()) {
    // The error's location may repeat the file, or be "file: pointer".
    where = e.location();
    if (!file.empty() && where == file)
      where.clear();
    else if (!file.empty() && where.rfind(file + ": ", 0) == 0)
      where = where.substr(file.size() + 2);
  }
  report(Diagnostic{Severity::error, e.code(), file, where, e.message()});
}

std::string DiagnosticEngine::to_text() const {
  std::string out;
  for (const Diagnostic &d : diagnostics_)
    out += d.to_text() + "\n";
  return out;
}

std::string DiagnosticEngine::to_json() const {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const Diagnostic &d : diagnostics_)
    list.push_back({{"severity", std::string(severity_name(d.severity))},
                    {"code", error_code_name(d.code)},
                    {"file", d.file},
                    {"pointer", d.pointer},
                    {"message", d.message}});
  nlohmann::ordered_json out{{"diagnostics", list}, {"errors", errors_}, {"warnings", warnings_}};
  return out.dump(2) + "\n";
}

std::string DiagnosticEngine::to_sarif(const std::string &tool_version) const {
  using json = nlohmann::ordered_json;
  const std::vector<ErrorCodeInfo> &table = error_code_table();
  json rules = json::array();
  for (const ErrorCodeInfo &info : table) {
    json rule{{"id", error_code_name(info.code)},
              {"name", info.name},
              {"shortDescription", {{"text", info.description}}},
              {"defaultConfiguration", {{"level", info.code == ErrorCode::UnusedWeight ? "warning" : "error"}}}};
    rules.push_back(std::move(rule));
  }
  json results = json::array();
  for (const Diagnostic &d : diagnostics_) {
    std::string id = error_code_name(d.code);
    json result{{"ruleId", id}};
    for (size_t i = 0; i < table.size(); ++i)
      if (table[i].code == d.code)
        result["ruleIndex"] = i;
    result["level"] = std::string(severity_name(d.severity));
    result["message"] = {{"text", d.message}};
    json location = json::object();
    if (!d.file.empty())
      location["physicalLocation"] = {{"artifactLocation", {{"uri", path_to_uri(d.file)}}}};
    if (!d.pointer.empty()) {
      json logical{{"fullyQualifiedName", d.pointer}};
      if (d.pointer[0] == '/')
        logical["kind"] = "element"; // a JSON pointer into the file
      location["logicalLocations"] = json::array({logical});
    }
    result["locations"] = location.empty() ? json::array() : json::array({location});
    results.push_back(std::move(result));
  }
  json driver{{"name", "maxc"},
              {"version", tool_version},
              {"semanticVersion", tool_version},
              {"rules", rules}};
  // executionSuccessful: maxc ran to completion (problems with the input are
  // results, not failures); false only for an internal error.
  bool internal = false;
  for (const Diagnostic &d : diagnostics_)
    internal = internal || (d.severity == Severity::error && d.code == ErrorCode::Internal);
  json run{{"tool", {{"driver", driver}}},
           {"invocations", json::array({{{"executionSuccessful", !internal}}})},
           {"results", results}};
  json out{{"$schema", "https://json.schemastore.org/sarif-2.1.0.json"},
           {"version", "2.1.0"},
           {"runs", json::array({run})}};
  return out.dump(2) + "\n";
}

} // namespace maxc
