#include "maxc/Support/Diagnostics.h"

#include <nlohmann/json.hpp>

namespace maxc {

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

} // namespace maxc
